//===- Passes.td - moe passes ------------------------------*- tablegen -*-===//
//
// Every pass of the project, grouped under banners, alphabetical within a
// group. Transform flags start with `moe-`; conversions follow upstream's
// `convert-<from>-to-<to>`.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_PASSES_PASSES_TD
#define MOE_PASSES_PASSES_TD

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Transforms
//===----------------------------------------------------------------------===//

def MoEDecomposePass : Pass<"moe-decompose"> {
  let summary = "Expand moe.layer into router, dispatch, experts and combine";
  let description = [{
    Rewrites every fused `moe.layer` into the ops that make it up, so that
    later passes (expert parallelism, lowering) see each stage:

    ```mlir
    %y = moe.layer softmax topk k 2 %x, %logits fc1(%w1) fc3(%w3) fc2(%w2)
        activation <swiglu> {normalize} : (...) -> tensor<32x64xf32>
    ```
    becomes
    ```mlir
    %ids, %w = moe.router softmax topk %logits {normalize} : ...
    %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids : ...
    %h = moe.experts %rows, %counts fc1(%w1) fc3(%w3) fc2(%w2) activation <swiglu> : ...
    %y = moe.combine %h, %slots, %w : ...
    ```
    A shared expert becomes `moe.shared_expert` and an `arith.addf`.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def MoEAutodiffPass : Pass<"moe-autodiff", "::mlir::ModuleOp"> {
  let summary = "Turn a raised program into its training step: loss and "
                "gradients";
  let description = [{
    Reverse-mode differentiation of the module's public function, after
    raising and decomposing (a traced expert loop is only valid for the
    routing it was traced with; `moe.*` ops are valid for any). The function
    becomes the training step: it keeps its inputs (plus `labels` or
    `target` where the loss needs them) and returns the total loss (named
    `loss`), the part of it that the MoE losses contribute (`aux_loss`,
    coefficients included) and one gradient per trainable parameter, named
    `grad:<parameter>` and marked `moe.param`.

    * Parameters are the float weights the importer kept by name (each ONNX
      initializer with at least two elements is a named resource) whose name
      matches `params` (torch's dotted parameter names, not the exporter's
      names for folded constants such as rotary tables), except those
      matching `freeze` (buffers such as rotary frequencies and DeepSeek's
      selection bias). Raise with `moe-raise{keep-weights}` first, as
      `moe-compile --train` does, so that packed expert weights are ops over
      the parameters rather than new constants. A parameter the loss does not reach gets
      no gradient (PyTorch leaves its `.grad` as None).
    * A float constant that the loss's path multiplies by (in a MatMul,
      Gemm, Einsum, Conv or MoE op whose result the loss depends on,
      through transposes, casts, reshapes, slices and the like), that is
      neither a parameter, nor a torch name left out by `params`, nor
      matched by `freeze`, is refused with its name: it is most likely a parameter
      that the exporter folded under a name of its own, and training would
      leave it as exported. `allow-frozen-weights` keeps such constants as
      they are. The function gets `moe.frozen`, the names of the named
      weights that are not trained.
    * `loss`: `model` differentiates the output named `loss-output`
      (default `loss`); `causal-lm` takes `logits [B, S, V]` and `labels`
      `[B, S]` (transformers' causal LM loss: labels shifted by one, -100
      ignored, mean over the valid tokens, logits in f32); `cross-entropy`
      the same without the shift; `mse` the mean squared error against
      `target`.
    * MoE losses (`load-balancing`): `aux_loss` adds every router's
      load-balancing loss times `aux-loss-coeff`, in Megatron's form
      (`moe.aux_loss`, per layer) or with `aux-loss-form=transformers` in
      transformers' form (all layers' routing concatenated, no 1/k);
      `balanced` adds the sequence-wise form (per sequence of the input's
      second dimension, DeepSeek-V3's balance loss); `sinkhorn` routes with
      Megatron's sinkhorn in training (indices without gradient, weights
      from the softmax, or sigmoid for top-1, not renormalised) and adds no
      aux loss; `none` adds none. `z-loss-coeff > 0` adds ST-MoE's z-loss
      per router. With `from-plan`, these come from the module's `moe.plan`
      (a SageMaker config).
    * Partitioned programs (run after `moe-partition`) are differentiated
      as each rank runs them: every exchange has a rule (an all_slice's
      backward gathers, an all_gather's slices, an all_reduce's passes its
      cotangent on, an all-to-all's is the reverse exchange), and a
      cotangent is summed over the ranks that used its value alike, which
      sums dense gradients over data-parallel ranks, expert gradients over
      an expert's replicas and tensor-parallel partial products. A weight
      sliced between ranks is trained as each rank's piece. Pipeline
      stages (an scf.index_switch on the rank's stage, one function per
      stage) are inlined; the backward is a switch of the reversed cases,
      sends and receives exchanged, the sums over stages after it. The loss is the
      same on every rank: the MoE losses are over every token
      (`aux-loss-scope=global`, the routers' logits and choices gathered)
      or each rank's over its own tokens, averaged (`local`, Megatron's).

    The backward is emitted in onnx and moe ops after the forward; what a
    rule needs from the forward is either the forward's value (kept) or
    recomputed from it, which the IR shows (e.g. `moe.experts_grad`
    recomputes each expert's activations from its rows).
  }];
  let options = [
    Option<"loss", "loss", "std::string", "\"model\"",
           "The loss: model, causal-lm, cross-entropy or mse">,
    Option<"lossOutput", "loss-output", "std::string", "\"\"",
           "The output the loss reads (default: loss, or logits for "
           "causal-lm and cross-entropy, or the first output for mse)">,
    Option<"loadBalancing", "load-balancing", "std::string", "\"none\"",
           "MoE load balancing in training: aux_loss, balanced, sinkhorn or "
           "none">,
    Option<"auxLossForm", "aux-loss-form", "std::string", "\"megatron\"",
           "Form of the aux loss: megatron or transformers">,
    Option<"auxLossScope", "aux-loss-scope", "std::string", "\"global\"",
           "Tokens of a partitioned program's MoE losses: global (every "
           "rank's) or local (each rank's own, averaged)">,
    Option<"auxLossCoeff", "aux-loss-coeff", "double", "1.0e-2",
           "Coefficient of the aux loss">,
    Option<"zLossCoeff", "z-loss-coeff", "double", "0.0",
           "Coefficient of the router z-loss">,
    Option<"fromPlan", "from-plan", "bool", "false",
           "Take load balancing and coefficients from the module's plan">,
    Option<"params", "params", "std::string",
           "\"^[A-Za-z_][A-Za-z0-9_]*([.][A-Za-z0-9_]+)+$\"",
           "Regular expression of the weights that are parameters: dotted "
           "module paths, as torch names them">,
    Option<"freeze", "freeze", "std::string",
           "\"inv_freq|rotary|e_score_correction_bias\"",
           "Regular expression of weights that are not trained">,
    Option<"allowFrozenWeights", "allow-frozen-weights", "bool", "false",
           "Keep float constants that the loss's path multiplies by, but "
           "that are not parameters, as they are (refused otherwise)">
  ];
  let dependentDialects = ["::mlir::moe::MoEDialect",
                           "::mlir::moe::onnx::ONNXDialect",
                           "::mlir::arith::ArithDialect"];
}

def MoEPipelineSchedulePass : Pass<"moe-pipeline-schedule", "::mlir::ModuleOp"> {
  let summary = "Run M microbatches through a pipelined training step in "
                "1F1B order";
  let description = [{
    Runs after `moe-autodiff` on a step with pipeline stages. The step then
    takes `microbatches` microbatches at once: each input `microbatches`
    times as large along its first dimension. Each rank runs them through
    its stage in the one-forward-one-backward order of PipeDream-Flush (as
    Megatron's schedule): stage s of P runs min(P - 1 - s, M) forwards, then
    one forward and one backward in turn, then the remaining backwards.
    A microbatch's loss part runs just before its backward, so the
    exchanges it makes between stages come in microbatch order on every
    rank. The backward's results are summed over the microbatches in the
    stages; the gradients' sums over the stages (which must be linear: a
    step that does anything else after the stages' backward is refused)
    then run once. The loss, the aux loss and the gradients are the
    microbatches' mean, as with `moe-train --microbatches`. The step is
    marked `moe.microbatches`.

    ```mlir
    // Before: func.func @main_graph(%ids: tensor<4x16xi64>, ...)
    //   %f:n = scf.index_switch %stage ... (forward)   ... loss ...
    //   %b:k = scf.index_switch %stage ... {moe.stages_backward}
    //   shard.all_reduce %b#i on @world grid_axes = [0] ...
    // After (microbatches=2, 2 stages):
    //   func.func @main_graph(%ids: tensor<8x16xi64>, ...)
    //   %s:k = scf.index_switch %stage
    //   case 0 { F(0) F(1) B(0) B(1): sums of the B's results }
    //   default { F(0) B(0) F(1) B(1) }
    //   mean, then the all_reduces over the stages on it
    ```

    The schedule relies on sends that do not wait for their receivers, as
    the runtime's `moert_send`.
  }];
  let options = [
    Option<"microbatches", "microbatches", "int64_t", "1",
           "Microbatches per step (1: the step is left as it is)">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect"];
}

def MoEEmitEntryPass : Pass<"moe-emit-entry", "::mlir::ModuleOp"> {
  let summary = "Add the `moe_entry(void **args)` wrapper that moe-run calls";
  let description = [{
    Runs on the LLVM dialect, after functions take bare pointers and buffer
    results became out-parameters. Adds `llvm.func @<entry>(%args: !llvm.ptr)`
    that loads `args[i]` for every parameter of `function` and calls it, so
    that every compiled model has the same C entry point.
  }];
  let options = [
    Option<"function", "function", "std::string", "\"main_graph\"",
           "The program's function">,
    Option<"entry", "entry", "std::string", "\"moe_entry\"",
           "Name of the wrapper">
  ];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def MoEEraseDeadGridsPass : Pass<"moe-erase-dead-grids", "::mlir::ModuleOp"> {
  let summary = "Erase shard.grid symbols that nothing refers to";
  let description = [{
    Once every exchange over a grid has been lowered (for a single process,
    `convert-moe-to-linalg` lowers one-rank exchanges to copies), the
    `shard.grid` declarations are dead; removing them leaves a module that
    the LLVM lowering and `mlir-runner` accept. Grids that are still
    referenced are kept.
  }];
}

def MoEExternalizeWeightsPass
    : Pass<"moe-externalize-weights", "::mlir::ModuleOp"> {
  let summary = "Move weights out of the code into per-rank globals";
  let description = [{
    Every float constant with at least `min-elements` elements, together with
    the chain of `shard.all_slice` ops that narrows it to this rank's piece,
    becomes a public, uninitialized `memref.global` of the local shape, read
    through `memref.get_global` and `bufferization.to_tensor`:

    ```mlir
    %w = arith.constant dense_resource<fc1> : tensor<4x32x16xf32>
    %l = shard.all_slice %w on @world grid_axes = [3] slice_axis = 0
        : tensor<4x32x16xf32> -> tensor<2x32x16xf32>
    ```
    becomes
    ```mlir
    memref.global @moe_weight_0 : memref<2x32x16xf32> = uninitialized
        {alignment = 64, moe.weight_source = dense_resource<fc1> : ...,
         moe.weight_grid = array<i64: 1, 1, 1, 2, 1>,
         moe.weight_slices = [{axes = array<i16: 3>, dim = 0 : index} ]}
    %m = memref.get_global @moe_weight_0 : memref<2x32x16xf32>
    %l = bufferization.to_tensor %m restrict : ...
    ```
    `moe-compile` packs each rank's piece from the source and the slices,
    then drops the source: the code holds no weights, and each rank loads
    only its own.
  }];
  let options = [
    Option<"minElements", "min-elements", "int64_t", "64",
           "Smallest constant (in elements) that counts as a weight">
  ];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect",
                           "::mlir::memref::MemRefDialect"];
}

def MoEInstrumentLayersPass
    : Pass<"moe-instrument-layers", "::mlir::ModuleOp"> {
  let summary = "Record per-layer statistics through the runtime";
  let description = [{
    Numbers the MoE layers (the i-th router, dispatch and combine belong to
    layer i) and adds runtime calls: `moert_layer_begin` before the router,
    `moert_layer_tokens` with its expert ids, `moert_layer_dropped` with the
    dispatch's dropped count, `moert_layer_end` after the combine. The
    `moe.replicas` axes of routers and dispatches say which ranks hold copies,
    so that each token is counted once. `moe-run --stats` prints the result.
    With `target=cuda` the calls are `moert_cuda_layer_*`, which count and
    time on the GPU's stream instead of reading device buffers on the host.
  }];
  let options = [
    Option<"target", "target", "std::string", "\"cpu\"",
           "The runtime that records: cpu (moert_layer_*) or cuda "
           "(moert_cuda_layer_*)">,
  ];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect"];
}

def MoEVectorizableMathPass : Pass<"moe-vectorizable-math"> {
  let summary = "Relax float arithmetic and expand exp, tanh and erf so that "
                "the host compiler vectorizes the loops around them";
  let description = [{
    Marks float arith and math ops `reassoc contract afn`, so that LLVM's loop
    vectorizer may reorder float reductions (softmax sums, norms), and expands
    `math.exp`, `math.tanh` and `math.erf` of f32 into branch-free
    polynomials that widen to vectors and saturate without libm's slow error
    path. `ninf` and `nnan` are not set: masked entries stay -inf.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::vector::VectorDialect"];
}

def MoEFuseElementwisePass : Pass<"moe-fuse-elementwise"> {
  let summary = "Fuse chains of elementwise linalg ops on tensors, leaving "
                "contractions whole";
  let description = [{
    Merges every elementwise `linalg.generic` whose result has a single use
    into that user (another elementwise op or a reduction), so that a chain
    such as attention's scale, mask add and softmax, or a norm's square,
    mean and scale, runs as one loop nest instead of one pass over memory per
    op. Contractions are neither fused into nor fused from: with a prologue
    or an epilogue they would no longer lower to a BLAS call. A fill that
    initialises several contractions (CSE merges identical ones) is cloned
    for each, so that bufferization does not fill once and copy per user.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def MoECopiesPass : Pass<"moe-copies", "::mlir::ModuleOp"> {
  let summary = "Buffer copies of CPU programs: results computed in place, "
                "zero constants filled, slices copied by loops";
  let description = [{
    For CPU programs after bufferization, before
    `convert-linalg-to-parallel-loops`, each `memref.copy`:

    * of a buffer that a function allocates into one of its output
      arguments (an argument this copy alone uses), after every other use of
      the buffer and of its views and pointers: the function computes in the
      output argument instead, and the copy, the allocation and its
      deallocation go. Bufferization's out-parameters leave such copies
      where a result comes out of a loop (the expert weights' gradients).
    * from a constant global of one repeated value (the zero tensors that
      scatters and gradient sums start from): a `linalg.fill`, which writes
      without reading the library's copy of the constant. A global no longer
      used goes.
    * whose source or target is not a contiguous row-major buffer (a half of
      the fused gate and up projection's columns, rotary embedding's halves,
      a transposed view): `linalg.copy`. The memref lowering would call the
      C runner's `memrefCopy`, which walks such a copy element by element or
      one short row at a time on one thread; as parallel loops, its rows are
      shared among the threads (`moe-thread-loops`) and its innermost loop
      vectorizes. Copies between contiguous buffers stay one `memcpy`.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::arith::ArithDialect"];
}

def MoEThreadLoopsPass : Pass<"moe-thread-loops", "::mlir::ModuleOp"> {
  let summary = "Run the outermost parallel loops worth it on OpenMP "
                "threads; make the rest scf.for";
  let description = [{
    For CPU programs, before `convert-scf-to-openmp`: an `scf.parallel`
    stays parallel when no other `scf.parallel` encloses it, it has no
    reductions, and it runs at least `min-iterations` innermost iterations
    (the product of its trip counts and those of the deepest loop nest
    inside it; dynamic bounds count as many). Every other `scf.parallel`
    becomes a nest of `scf.for`, the loops that `convert-linalg-to-loops`
    makes. Forking the thread pool costs microseconds, so a small loop, or
    one nested in a parallel loop (which would fork at every outer step),
    runs on one thread. The loops that stay parallel become `omp.parallel`
    and `omp.wsloop` (`convert-scf-to-openmp`), their bodies' alloca scopes
    inlined when they hold no allocas.

    A heap buffer that lives within one iteration of such a loop (a
    statically shaped `memref.alloc` whose one `memref.dealloc` is in the
    same block and that no terminator passes on) becomes a `memref.alloca`
    at the top of the `omp.parallel` region: one buffer per thread, reused
    by that thread's iterations, in place of an allocation and a free per
    iteration through the runtime's shared buffer cache. Buffers larger
    than `max-stack-bytes`, or past that total in one loop, stay on the
    heap (OpenMP threads have a few megabytes of stack).
  }];
  let options = [
    Option<"minIterations", "min-iterations", "int64_t", "16384",
           "The fewest innermost iterations worth forking the threads for">,
    Option<"maxStackBytes", "max-stack-bytes", "int64_t", "65536",
           "The most bytes of one threaded loop's iteration buffers put on "
           "each thread's stack">
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::omp::OpenMPDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

def MoECausalAttentionPass : Pass<"moe-causal-attention"> {
  let summary = "Compute attention over the keys that its mask lets "
                "through";
  let description = [{
    Exported attention is `softmax(Q K^T (* s) + M) V` over every key, the
    upper triangle of a causal mask included: half of its products and of
    its exponentials are of keys that the mask removes. This pass reads the
    mask's computation at compile time (constants, comparisons, logic,
    casts, arithmetic, Where, Expand and reshapes; inputs such as the
    attention mask are unknown), finds for each block of `block-rows` query
    rows the last key that any of its rows may see, and computes each
    block's scores, softmax and product with V over those keys only,
    concatenating the blocks' outputs.

    A key is removed where the mask is known to be -1e30 or less: a score
    plus that has an exp of exactly 0 beside any key let through, so a row
    keeps its bits up to the order of sums. A row all of whose keys are
    removed would get a uniform softmax over every key in the exported
    graph but over fewer keys here, so the pass applies only where each row
    has a key known to pass (a causal mask alone), or where the graph
    zeroes such rows itself, as transformers' export does
    (`Where(ReduceSum(Cast(B)) < t, 0, attention)` with the mask
    `Cast(Not(B)) * c`, 0 < t <= 1, c <= -1e30).

    After `moe-sequence-parallel` the mask is each rank's block of rows of a
    mask every rank computes (`shard.all_slice` over its rows), and the keys
    a block needs depend on the rank: the pass then reads the whole mask and
    emits an `scf.index_switch` on the rank's position among the row blocks,
    one case of static shapes per rank.

    ```mlir
    // before: every query row against all 1024 keys
    %s = onnx.MatMul %q, %kt : (tensor<1x16x1024x64xf32>, tensor<1x16x64x1024xf32>) -> tensor<1x16x1024x1024xf32>
    // after (block-rows = 128): rows 0-127 against keys 0-127, ...
    %s0 = onnx.MatMul %q0, %kt0 : (tensor<1x16x128x64xf32>, tensor<1x16x64x128xf32>) -> tensor<1x16x128x128xf32>
    ```
  }];
  let options = [
    Option<"blockRows", "block-rows", "int64_t", "128",
           "Query rows per block (each block one GEMM per product)">,
    Option<"maxMaskElements", "max-mask-elements", "int64_t", "1 << 24",
           "Masks with more elements are not read (compile time)">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::shard::ShardDialect"];
}

def MoEFuseRowsPass : Pass<"moe-fuse-rows"> {
  let summary = "Compute softmaxes and norms one row at a time: tile the "
                "last elementwise op of a chain with reductions by rows and "
                "fuse its producers into the row loop";
  let description = [{
    For each elementwise `linalg` op on tensors whose producers include a
    reduction (a softmax's max and sum, a norm's mean), tiles every loop but
    the innermost with size 1 and fuses the producers into that loop, so that
    each row is read once and its intermediates never leave the cache.

    A producer fuses when its loops line up with its user's (same loop count,
    the user's operand map equal to the producer's result map), it reduces
    over the innermost loop only, and all its users are in the chain; a
    reduction's fill fuses with it. Contractions never fuse. Chains without a
    reduction are left to `moe-fuse-elementwise`.
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect"];
}

def MoEManagedMemoryPass : Pass<"moe-managed-memory"> {
  let summary = "Allocate buffers host-shared, for programs whose kernels "
                "run on a GPU and whose other code runs on the host";
  let description = [{
    Rewrites `memref.alloc` (default memory space) into
    `gpu.alloc host_shared` and its `memref.dealloc` into `gpu.dealloc`, so
    that GPU kernels and host code reach the same buffers (CUDA managed
    memory through the runtime's mgpuMemAlloc; `moe-gpu-device-memory`
    later gives device memory to those that host code never touches). A
    `memref.copy` in the default memory space becomes `linalg.copy` (a
    scalar's through views of one element, when both have the identity
    layout), which the GPU pipeline runs as a kernel: a host memcpy would
    wait for the GPU and migrate both buffers' pages to the host.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::linalg::LinalgDialect"];
}

def MoEGPUDeviceMemoryPass
    : Pass<"moe-gpu-device-memory", "::mlir::ModuleOp"> {
  let summary = "Give device memory to the buffers and globals that host "
                "code never dereferences";
  let description = [{
    For host code after `gpu-kernel-outlining`. A `gpu.alloc host_shared`
    whose every use, through view-like ops, `memref.extract_strided_metadata`
    and the address taken by `memref.extract_aligned_pointer_as_index`
    (with casts and pointer arithmetic on it), is a `gpu.launch_func`, code
    in a `gpu.launch`, a device-pointer parameter of a `moert_cuda_*`
    function that compiled code calls (`moert_cuda.h` names the host ones;
    a function the pass does not know counts as a host access), a
    `gpu.dealloc`, `gpu.memcpy` or `gpu.memset`, or an op that
    reads no memory (`memref.dim`, address comparisons) becomes a device
    allocation: `gpu.alloc async` on a fresh stream, waited for at once
    (`moe-gpu-stream-order` chains it). Any other use (a host load or
    store, another call, a `memref.copy`, a return or a region's yield)
    keeps the buffer host-shared.

    The globals whose every `memref.get_global` in host code passes the same
    test are listed in the module attribute `moe.device_globals`, for
    `moe-device-globals`.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def MoEGPUFatbinPass : Pass<"moe-gpu-fatbin", "::mlir::ModuleOp"> {
  let summary = "Build one fatbin for all the chips of each gpu.binary";
  let description = [{
    For `gpu.binary` ops whose objects are PTX (`gpu-module-to-binary`
    `format=isa`) for NVVM targets: each target's PTX is compiled by the
    toolkit's `ptxas` for its chip (at the target's `O` level), and
    `fatbinary` packs the cubins with the PTX of the oldest plain `sm_NN`
    chip, which newer GPUs compile when they load it. The binary's objects
    become that one fatbin object (on the first target), so the offloading
    translation, which embeds a single object, embeds code for every chip,
    and the CUDA runtime picks the image for its device. The object's
    `images` property lists them (`sm_NN` cubins, `compute_NN` PTX). A tool that is
    missing or fails is an error that names it and carries its output.
  }];
  let options = [
    Option<"toolkit", "toolkit", "std::string", "\"/usr/local/cuda\"",
           "The CUDA toolkit whose bin/ holds ptxas and fatbinary (PATH "
           "is searched after it)">,
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def MoEDeviceGlobalsPass
    : Pass<"moe-device-globals", "::mlir::ModuleOp"> {
  let summary = "Reach globals through copies that GPU code can read";
  let description = [{
    Runs on the LLVM dialect of code compiled for CUDA. Every
    `llvm.mlir.addressof` of an `llvm.mlir.global` in a host function (the
    lowered `memref.get_global` of a weight or constant) is passed through
    a runtime call that returns a copy of the global made on first use:
    kernels and cuBLAS cannot read the host memory of the model's shared
    library. Globals that the module attribute `moe.device_globals` lists
    (see `moe-gpu-device-memory`) go through
    `moert_cuda_device_global(address, bytes)`, a copy in device memory;
    the others through `moert_cuda_global(address, bytes)`, a managed copy
    that host code can read as well. The attribute is removed. Kernels in
    `gpu.module`s are untouched.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def MoEParallelLoopsFirstPass : Pass<"moe-parallel-loops-first"> {
  let summary = "Move the parallel loops of linalg.generic ops outside "
                "their reductions";
  let description = [{
    Interchanges the loops of every `linalg.generic` whose iterators have a
    reduction before a parallel loop, so that the parallel loops come first
    (each group in its order), with the indexing maps and `linalg.index`
    uses adapted. For GPU programs: `convert-linalg-to-parallel-loops`
    keeps the loop order, and a reduction outside a parallel loop (a column
    sum) would become a host loop launching a kernel per step; afterwards
    the op is one kernel.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def MoEGPUMapLoopsPass : Pass<"moe-gpu-map-loops"> {
  let summary = "Map parallel loops onto GPU blocks and threads";
  let description = [{
    Collapses every outermost `scf.parallel` into one dimension (the last
    loop varying fastest, so that neighbouring threads access neighbouring
    elements) and tiles it by `block-size`: the tile loop is mapped to the
    grid's x dimension and the loop within a tile to the block's x threads,
    with a bounds check instead of a partial tile. Parallel loops nested in
    a mapped loop run sequentially in its thread. `convert-parallel-loops-
    to-gpu` then turns each mapped loop into a `gpu.launch`.
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", "256",
           "Threads per block, in [1, 1024]">,
  ];
  let dependentDialects = ["::mlir::affine::AffineDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::scf::SCFDialect"];
}

def MoEGPUStaticKernelOperandsPass
    : Pass<"moe-gpu-static-kernel-operands", "::mlir::func::FuncOp"> {
  let summary = "Pass kernels only buffers whose layout their type gives";
  let description = [{
    Kernel arguments are bare pointers (the host passes each buffer as its
    aligned pointer), which can only stand for a buffer of static sizes,
    strides and offset. For each `gpu.launch`, a buffer from above with a
    dynamic offset, size or stride (a per-rank slice, a dynamic shape) is
    split on the host by `memref.extract_strided_metadata` and rebuilt at the
    top of the kernel by `memref.reinterpret_cast` from its base buffer and
    the dynamic parts of its metadata, which the kernel then takes as
    arguments. A buffer without a strided layout is an error.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def MoEGPUStreamOrderPass
    : Pass<"moe-gpu-stream-order", "::mlir::func::FuncOp"> {
  let summary = "Run GPU work in stream order and make the host wait only "
                "where it touches memory";
  let description = [{
    For host code after `gpu-kernel-outlining`, on a runtime that runs all
    GPU work on one stream. In each block, synchronous `gpu.launch_func`s
    become asynchronous and, with the block's `gpu.alloc async`s and
    `gpu.dealloc async`s, chain on one token; the synchronous `gpu.wait`s
    for tokens of the chain go, and a `gpu.wait async` starts the chain or
    joins it. Calls to `moert_cuda_*` functions, which enqueue their work
    on the runtime's stream and wait themselves before they read device
    data on the host, leave the chain pending, as do ops that touch no
    memory or only allocate it (`moert_rank` among them), and loops and
    branches (ops whose memory effects are their body's) that hold nothing
    else (an outer batch dim's loop of matmul calls). A single `gpu.wait` for the chain comes before any other op (a
    host load or store, another call, another op with regions, whose blocks
    are chained on their own) and before the block's terminator.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def MoERaisePass : Pass<"moe-raise"> {
  let summary = "Recognise exported MoE blocks in onnx programs as moe.layer";
  let description = [{
    Importers give a model as onnx dialect ops; an MoE block is spread over
    dozens of them in one of the forms exporters produce. This pass finds
    each block by its router and rewrites it into one `moe.layer`, with the
    experts' weights stacked into `[E, out, in]` constants:

    * the Hugging Face per-expert loop (Softmax, TopK, renormalisation,
      OneHot, NonZero, Gather, the expert FFN, ScatterElements into zeros,
      summed over experts);
    * the GShard/Switch einsum form with capacity (Softmax, ArgMax, OneHot,
      CumSum over tokens against a capacity folded from Shape, dispatch and
      combine masks `[T, E, C]`, experts as Einsums on stacked weights):
      top-1 with `capacity` C and the `position` drop policy;
    * GShard's top-k form of it (DeepSpeed's and fairseq's top-2 gating):
      one arg-max, one-hot mask and CumSum place per choice, each place
      after the counts of the choices before it, combine = the sum of the
      choices' terms, dispatch = combine != 0: the `choice` drop policy,
      its routing `given` (the arg-maxes and the program's per-token
      weights), raised only where the check agreed;

    A block whose router covers E experts but whose graph holds fewer (a
    traced export keeps only the experts its sample input reached) is an
    error, not a smaller model. What the pass cannot recognise stays as it
    is; `explain` says why, as a remark at each router it looked at.

    With `validate` (on in `moe-compile`), each block is checked before it
    is replaced (translation validation): the ops a pattern recognised and
    the op it built are evaluated on the same sample tokens (N(0, 1), a
    dynamic token count of 4; the router's logits computed from them by the
    block's own ops, or sampled too where they come from elsewhere),
    through the reference
    lowering run natively by the evaluator the tools register
    (lib/Evaluate). A block whose output differs by more than 1e-4 of its
    largest magnitude is not raised, with a remark saying by how much; a
    block that cannot be evaluated (it reads other values, or a tool has no
    evaluator) is raised unchecked. The module gets `moe.raise_validation`:
    the counts checked, unchecked and refused, the seconds spent and why
    the first unchecked block was not checked.
  }];
  let options = [
    Option<"keepWeights", "keep-weights", "bool", "false",
           "Pack expert weights with onnx ops over the model's own weights "
           "instead of folding new constants (training)">,
    Option<"explain", "explain", "bool", "false",
           "Report why each router's block was not raised">,
    Option<"validate", "validate", "bool", "false",
           "Check each raised block against the ops it replaces on sample "
           "tokens (translation validation); a block that differs is not "
           "raised">,
    Option<"givenRouting", "given-routing", "bool", "false",
           "Raise every router as `given` (its own ops, differentiated as "
           "ops), not as a named form: the named forms' fused routing is "
           "checked against it (needs validate)">
  ];
  // What the checks' reference lowering loads.
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::moe::MoEDialect",
                           "::mlir::affine::AffineDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::cf::ControlFlowDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect"];
}

//===----------------------------------------------------------------------===//
// Parallelisation
//===----------------------------------------------------------------------===//

def MoEPartitionPass : Pass<"moe-partition", "::mlir::ModuleOp"> {
  let summary = "Rewrite the program into what each rank of its plan runs";
  let description = [{
    Reads the module's `moe.plan` (see `#moe.plan` and `moe-set-plan`),
    creates `shard.grid @world(shape = pp x dp/dp_shard x dp_shard x ep x
    tp)` and rewrites every MoE block (a `moe.layer` is decomposed first) so
    that each rank runs its share, with every exchange an op:

    * tokens: each rank takes its block of the whole input's tokens over
      `dp x ep` (`shard.all_slice`) and the results are gathered back
      (`shard.all_gather`), so every rank returns the whole output;
    * experts: rank i of `ep` holds experts `[i E/ep, (i+1) E/ep)`
      (`shard.all_slice` of the weights). With the all-to-all dispatcher,
      capacity-mode rows travel in one uniform `shard.all_to_all` each way
      (`[E, B, H]`, blocks per destination), dropless rows in a ragged
      `moe.all_to_all` whose counts travel first. Capacity is that of the
      whole batch: `moe.prefix_sum` of `moe.expert_counts` tells each
      rank how many earlier tokens each expert already holds. With the
      all-gather dispatcher every rank gathers the EP group's tokens, runs
      its experts on them and `shard.reduce_scatter` sums the results back;
    * token shuffle: tokens are permuted (seed + EP rank) and exchanged
      uniformly within the EP group before routing, and restored after;
    * routers that couple tokens (sinkhorn, expert choice) see the gathered
      logits of the whole batch;
    * tensor parallelism splits each expert's (and shared expert's) hidden
      dimension over `tp`; partial outputs are summed by `shard.all_reduce`
      and the output bias is added by tp rank 0 only;
    * sharded data parallelism keeps each rank's `1/dp_shard` of its expert
      weights and gathers them (`shard.all_gather` over `dp_shard`) at use;
    * pipeline parallelism cuts the function into `pp` stages of balanced
      cost (never inside an MoE block), outlined as `@<fn>_stage<i>`;
      stages pass activations by `shard.send`/`shard.recv`, and the last
      stage broadcasts the results.

    Other ops run unchanged (replicated) on every rank of their stage.
    With `report`, every exchange is reported as a remark with its type and
    the bytes each rank sends.
  }];
  let options = [
    Option<"report", "report", "bool", "false",
           "Report every exchange with its size per rank">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::moe::MoEDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::shard::ShardDialect",
                           "::mlir::tensor::TensorDialect"];
}

def MoESequenceParallelPass
    : Pass<"moe-sequence-parallel", "::mlir::ModuleOp"> {
  let summary = "Run the dense layers between MoE blocks on each rank's "
                "tokens";
  let description = [{
    Runs after `moe-partition` (and, for training, before `moe-autodiff`,
    which sums the gradients of weights used on blocks over the token
    ranks: data parallelism for the dense layers). The partitioned MoE
    blocks take each rank's block of the tokens over `dp x ep` and gather
    their results back, which leaves attention, norms and the LM head
    running whole on every rank. This pass follows the token blocks forward
    from the blocks' gathered results (`shard.all_gather` over the token
    axes) and from the function's inputs (each along its first dimension
    of more than one element) and runs every onnx op that keeps them apart
    on this rank's block:

    * elementwise ops with broadcasting (an operand broadcast along the
      split dimension is taken whole), Softmax over the last dimension,
      LayerNormalization, RMSNormalization and reductions over other
      dimensions;
    * MatMul and Gemm split along rows or a batch dimension (the other
      operand whole), or along B's columns;
    * Transpose, Reshape, Squeeze, Unsqueeze, Flatten and Expand where the
      blocks survive the new shape, Slice, Concat and Split along other
      dimensions, and Gather of a block of indices (an embedding lookup);
    * an MoE block's token slice (`shard.all_slice`) of a value that has
      this block already becomes that block.

    Any other use of a value that has a block takes it whole: again from
    what every rank holds when that costs no exchange and no matmul (a mask
    built from an input), else from a `shard.all_gather` of the blocks.
    So attention's keys and values, the returned logits and the KV cache
    are gathered; an op that mixes tokens never sees a block. Ops that
    every rank ran whole and nothing uses any more are erased.

    ```mlir
    // before: every rank runs the LM head on all 1024 tokens
    %h = shard.all_gather %y on @world grid_axes = [3] gather_axis = 0
        : tensor<512x64xf32> -> tensor<1024x64xf32>
    %logits = onnx.MatMul %h, %w : (tensor<1024x64xf32>, tensor<64x100xf32>)
        -> tensor<1024x100xf32>
    // after: on its 512, gathered where the program returns them
    %local = onnx.MatMul %y, %w : (tensor<512x64xf32>, tensor<64x100xf32>)
        -> tensor<512x100xf32>
    %logits = shard.all_gather %local on @world grid_axes = [3]
        gather_axis = 0 : tensor<512x100xf32> -> tensor<1024x100xf32>
    ```

    With `zigzag`, rank r of R takes chunks r and 2R-1-r of the 2R chunks
    of a split dimension instead of its r-th block (every token slice and
    gather reorders the chunks with static Slices and a Concat). Under a
    causal mask the first block's queries see few keys and the last
    block's all of them; in zigzag order every rank's queries see as many,
    so `moe-causal-attention` gives each rank the same work. It applies
    only where every split dimension divides into 2R chunks and no MoE
    block has a capacity (which keeps tokens by their order).
  }];
  let options = [
    Option<"zigzag", "zigzag", "bool", "false",
           "Give rank r chunks r and 2R-1-r of 2R (balances causal "
           "attention over the ranks)">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::shard::ShardDialect"];
}

def MoEPlaceExpertsPass : Pass<"moe-place-experts", "::mlir::ModuleOp"> {
  let summary = "Put each MoE layer's experts on physical slots";
  let description = [{
    Runs after `moe-set-plan` and before `moe-partition`. Every dropless MoE
    block (a `moe.layer` is decomposed first) gets P = E + ep x
    `redundant-per-rank` slots, P / ep on each EP rank:

    * `moe.slot_table` (layer i is the i-th router of the module) holds the
      slot -> expert table, starting from the identity layout (slot p holds
      expert p mod E: the experts in order, then the redundant slots from
      expert 0 on), which the runtime may change between calls;
    * `moe.place` maps each routing choice to one of its expert's slots
      (the replica rule), and `moe.dispatch` and `moe.experts` work on slots;
    * every expert weight and bias reaches `moe.experts` through
      `moe.slot_weights`, which `moe-partition` slices per rank and
      `moe-externalize-weights` makes a buffer that the runtime fills.

    With `runtime=0` the table is a constant instead (a fixed placement): an
    identity table of E slots folds away with the ops above. Capacity
    dispatch is refused, since which tokens a capacity drops would depend on
    the placement.
  }];
  let options = [
    Option<"redundantPerRank", "redundant-per-rank", "int64_t", "0",
           "Slots per EP rank beyond E / ep, for replicas of hot experts">,
    Option<"runtime", "runtime", "bool", "true",
           "The table is the runtime's (re-placement without recompiling), "
           "not a constant">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::moe::MoEDialect"];
}

def MoEStaticShapesPass : Pass<"moe-static-shapes", "::mlir::ModuleOp"> {
  let summary = "Fold the shape computations of onnx programs into static "
                "types";
  let description = [{
    The first stage of `convert-onnx-to-linalg` on its own: shape
    computations (Shape, Gather of shapes, capacity arithmetic) are folded
    and result types refined in program order, until every onnx op has
    static shapes; the op where that fails is reported. Public functions
    then return the static types. `moe-compile` runs it before
    `moe-partition`, so that pipeline stages and the compiled entry point
    have static shapes.
  }];
  let options = [
    Option<"keepWeights", "keep-weights", "bool", "false",
           "Fold no op that reads a named weight (training: parameters stay "
           "parameters)">
  ];
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
}

def MoESetPlanPass : Pass<"moe-set-plan", "::mlir::ModuleOp"> {
  let summary = "Attach a parallel plan to the module";
  let description = [{
    Builds the module's `moe.plan` from the options, from a SageMaker
    model-parallel JSON config (`smp-config`: `expert_parallel_degree`,
    `tensor_parallel_degree`, `hybrid_shard_degree`, `random_seed` and the
    MoEConfig fields `moe_load_balancing`, `global_token_shuffle`,
    `moe_all_to_all_dispatcher`, `moe_aux_loss_coeff`, `moe_z_loss_coeff`),
    or both (options win). Without `dp`, the data-parallel degree is what
    `world-size` leaves after pp, ep and tp. An option counts as given when
    the pipeline sets it, whatever its value: a degree or world size set to
    0 or below is refused (the defaults shown are never read). The world
    size is at most 2^31 - 1 ranks, every product of degrees computed
    without overflow. An invalid plan is one error naming the problem.
  }];
  let options = [
    Option<"worldSize", "world-size", "int64_t", "0", "Ranks in the world">,
    Option<"pp", "pp", "int64_t", "0", "Pipeline stages">,
    Option<"dp", "dp", "int64_t", "0", "Data-parallel degree">,
    Option<"dpShard", "dp-shard", "int64_t", "0",
           "Data-parallel ranks that share one copy of the expert weights">,
    Option<"ep", "ep", "int64_t", "0", "Expert-parallel degree">,
    Option<"tp", "tp", "int64_t", "0", "Tensor-parallel degree">,
    Option<"dispatcher", "dispatcher", "std::string", "\"\"",
           "Token dispatcher: all-to-all or all-gather">,
    Option<"tokenShuffle", "token-shuffle", "bool", "false",
           "Shuffle tokens across the EP group">,
    Option<"seed", "seed", "int64_t", "-1", "Seed of the token shuffle">,
    Option<"smpConfig", "smp-config", "std::string", "\"\"",
           "SageMaker model-parallel config (JSON file)">
  ];
  let dependentDialects = ["::mlir::moe::MoEDialect"];
}

//===----------------------------------------------------------------------===//
// Conversions
//===----------------------------------------------------------------------===//

def ConvertCommToRuntimePass
    : Pass<"convert-comm-to-runtime", "::mlir::ModuleOp"> {
  let summary = "Lower exchanges between ranks to moert runtime calls";
  let description = [{
    The shard collectives that `moe-partition` emits (`all_slice`,
    `all_gather`, `all_reduce` and `reduce_scatter` sums, `all_to_all` along
    dim 0, `send`, `recv`, `broadcast`, `process_multi_index`) and
    `moe.all_to_all` / `moe.prefix_sum` between more than one rank become
    calls into the CPU runtime (runtime/include/moert/moert.h) on buffers:
    inputs through read-only `bufferization.to_buffer`, results in new
    buffers returned by `bufferization.to_tensor`. Ranks find their
    coordinates from `moert_rank()` and the static grid shape. Grid axes are
    passed as an ordered list (nibble i = axis + 1). What the runtime has no
    call for (dynamic shapes, reductions other than sum) is an error. With
    `target=cuda` the calls are the CUDA runtime's `moert_cuda_*` (same
    arguments, device buffers, NCCL).
  }];
  let options = [
    Option<"target", "target", "std::string", "\"cpu\"",
           "The runtime to call: cpu or cuda">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::func::FuncDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

def ConvertMoEToRuntimePass
    : Pass<"convert-moe-to-runtime", "::mlir::ModuleOp"> {
  let summary = "Lower moe.router, moe.dispatch, moe.experts and moe.combine "
                "to runtime calls";
  let description = [{
    A dropless `moe.dispatch` (no offsets) becomes one call that sorts the
    (token, slot) pairs by expert and moves their rows: `moert_dispatch`
    (`target=cpu`) or `moert_cuda_dispatch` (`target=cuda`, the permutation
    kernels), with the results in new buffers and `dropped` a zero constant.
    With `target=cuda` a capacity dispatch is one
    `moert_cuda_dispatch_capacity` call into the padded `[E, B, H]` rows
    (its `after` counts passed on, or a null pointer), which also fills
    `dropped`; for the `probs` policy, the pairs that `capacity` others
    outrank (a parallel map ranks them) are first given id -1 and then
    added to `dropped`. On the CPU capacity dispatch keeps the reference
    lowering.

    Each projection of a `moe.experts` without biases becomes one grouped
    GEMM over all its groups of rows, on tensors through
    `bufferization.to_buffer` and a new buffer: `moert_grouped_matmul`
    (`target=cpu`, f32) or `moert_cuda_grouped_matmul` (`target=cuda`, f32,
    f16, bf16; the group counts are first read to a host buffer at the
    function's entry by one `moert_cuda_read_counts`, which every
    projection's call takes), with the group counts, the capacity stride
    (0 for dropless rows), the `[E, out, in]` weight read in place and the `[E, out]` bias
    (or a null pointer). The activation (or SwiGLU, or the FC3 gate) is one
    elementwise op over all rows. The runtime checks the counts and zeroes
    the rows outside every group, as the reference lowering does.

    `target=cuda` only: a `moe.router` with `topk` or `grouped_topk`
    selection (softmax or sigmoid scores, any selection bias, k <= 32,
    at most 32 groups, E <= 4096) becomes `moert_cuda_router`, the fused
    gating kernel, with the bias (or a null pointer), the groups, the kept
    groups, the group score, the masked score, `normalize` and
    `scaling_factor` passed on; a `moe.combine` becomes `moert_cuda_combine`,
    the weighted un-permute (capacity rows `[G, C, M]` read as `G * C`
    rows; f16 and bf16 sums in f32); a `moe.place` with at most 3072 slots
    becomes `moert_cuda_place`, the replica rule in one kernel. On the CPU
    they stay compiled loops.
  }];
  let options = [
    Option<"target", "target", "std::string", "\"cpu\"",
           "The runtime to call: cpu or cuda">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::func::FuncDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

def ConvertMatmulToRuntimePass
    : Pass<"convert-matmul-to-runtime", "::mlir::ModuleOp"> {
  let summary = "Lower linalg contractions on buffers to tuned BLAS calls";
  let description = [{
    Every linalg contraction on buffers with one m, one n and one k loop
    (named or generic) becomes a runtime call with each operand's base
    pointer and its strides along m, n and k (transposed operands need no
    copies) and along the call's batch: the innermost other loop that the
    output has (a batch, or a broadcast operand's extra m loop; an operand
    without it has stride 0). Other loops (more batch dims, extra reduction
    dims, which accumulate) become scf.for around the call. For `target=cpu`,
    `moert_matmul_f32` on f32 (oneDNN); for `target=cuda`,
    `moert_cuda_matmul` on f32, f16 or bf16 with the element type's code
    first (cuBLAS). A zero fill of the output right before the contraction
    is dropped and the call overwrites the output, when the GEMM's k is the
    only loop summed over. Matmuls marked
    `moe.expert_gemm` by the expert lowering are counted as expert GEMMs in
    `moe-run --stats`.
  }];
  let options = [
    Option<"target", "target", "std::string", "\"cpu\"",
           "The runtime to call: cpu or cuda">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::func::FuncDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
  ];
}

def ConvertMoEToLinalgPass : Pass<"convert-moe-to-linalg"> {
  let summary = "Lower moe ops to linalg, tensor, arith, math and scf";
  let description = [{
    The reference semantics of every moe op, written with upstream tensor
    dialects so that it can be bufferized, lowered to LLVM and run. Routing
    and dispatch become loops over tokens and experts; expert FFNs become
    `linalg.matmul`s on per-group slices; losses become reductions.
    `moe.layer` must be decomposed first (`moe-decompose`), and
    `moe.all_to_all` lowers only within a group of one rank: exchanges between
    ranks are left to the communication lowering.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::cf::ControlFlowDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

def ConvertONNXToLinalgPass : Pass<"convert-onnx-to-linalg"> {
  let summary = "Lower the onnx ops left after raising to linalg, tensor, "
                "arith, math and scf";
  let description = [{
    Whole imported models compile once `moe-raise` has turned their MoE
    blocks into `moe.layer`: this pass lowers what remains (attention,
    norms, routers' matmuls, reshapes, ...) with ONNX semantics.

    First it makes shapes static. Exported graphs compute shapes and
    capacities at run time (`Expand(x, Where(Equal(Shape(y), -1), ...))`,
    `OneHot(ids, Ceil(Cast(Size(x)) / E))`); where such a computation's
    operands are constants it is folded to an `arith.constant`, and result
    types that ONNX left dynamic are inferred from operand shapes and
    constant operands (onnx users see the refined type, others a
    `tensor.cast` back). An op whose shape stays dynamic is an error that
    names it and why, e.g. `onnx.NonZero has a data-dependent shape`.

    Then each op becomes linalg: elementwise ops (NumPy broadcasting),
    reductions and the MatMul, Gemm and Einsum contractions are
    `linalg.generic`s; reshapes are `tensor.collapse_shape`/`expand_shape`,
    Concat, Split and Slice slice ops; gathers `tensor.extract` in a
    generic, scatters `scf.for` nests of `tensor.insert`. TopK ranks each
    element within its row, so ties go to the lower index, as do ArgMax's.
    Softmax and the reductions have opset 13+ semantics (Softmax along one
    axis; axes as an operand, or as the older attribute).

    Gathers and scatters check their indices against ONNX's `[-s, s-1]`
    once, before they use them: constant indices at compile time (an error
    names the op, the index, the dim and its size), indices whose producer
    bounds them (TopK, ArgMax, Range, moe.router, ...) not at all, others
    with one min/max reduction at run time that reports through
    `moert_index_out_of_range` with `runtime`, through `cf.assert` without.
  }];
  let options = [
    Option<"runtime", "runtime", "bool", "false",
           "Report an index out of range at run time through the moert "
           "runtime (moert_index_out_of_range) instead of cf.assert; run "
           "the pass on the module then">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::cf::ControlFlowDialect",
    "::mlir::func::FuncDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

#endif // MOE_PASSES_PASSES_TD
