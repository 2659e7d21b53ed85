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

    A block whose router covers E experts but whose graph holds fewer (a
    traced export keeps only the experts its sample input reached) is an
    error, not a smaller model. What the pass cannot recognise stays as it
    is; `explain` says why, as a remark at each router it looked at.
  }];
  let options = [
    Option<"explain", "explain", "bool", "false",
           "Report why each router's block was not raised">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::moe::MoEDialect"];
}

//===----------------------------------------------------------------------===//
// Conversions
//===----------------------------------------------------------------------===//

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
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

#endif // MOE_PASSES_PASSES_TD
