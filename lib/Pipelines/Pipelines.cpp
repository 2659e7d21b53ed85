//===- Pipelines.cpp - named moe pass pipelines ---------------------------===//

#include "moe/Pipelines.h"

#include "passes/Passes.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

/// moe and onnx ops through linalg and bufferization to buffers: the part
/// that the CPU and GPU paths share. `runtime`: the moert runtime's calls,
/// dense function boundaries and results as out-parameters. `target`: the
/// runtime that exchanges call (cpu or cuda); on the CPU, softmaxes and
/// norms run one row at a time (a GPU runs each as one kernel instead).
static void buildBufferizedPipeline(OpPassManager &pm, bool decompose,
                                    bool runtime, bool instrument,
                                    StringRef target) {
  // The fused block has no lowering of its own.
  if (decompose)
    pm.addPass(moe::createMoEDecomposePass());
  if (runtime) {
    if (instrument) {
      moe::MoEInstrumentLayersPassOptions layers;
      layers.target = target.str();
      pm.addPass(moe::createMoEInstrumentLayersPass(layers));
    }
    moe::ConvertCommToRuntimePassOptions comm;
    comm.target = target.str();
    pm.addPass(moe::createConvertCommToRuntimePass(comm));
    // The expert FFNs as grouped GEMMs, one call per projection.
    moe::ConvertMoEToRuntimePassOptions experts;
    experts.target = target.str();
    pm.addPass(moe::createConvertMoEToRuntimePass(experts));
  }
  pm.addPass(moe::createConvertMoEToLinalgPass());
  // Imported models: the onnx ops around their raised MoE blocks.
  // Index checks report through the runtime where there is one.
  moe::ConvertONNXToLinalgPassOptions onnx;
  onnx.runtime = runtime;
  pm.addPass(moe::createConvertONNXToLinalgPass(onnx));
  // One-process exchanges are copies now; their grids are dead.
  pm.addPass(moe::createMoEEraseDeadGridsPass());
  // Elementwise arith/math on tensors (the shared-expert sum, user code)
  // becomes linalg.generic, which bufferizes.
  pm.addPass(createConvertElementwiseToLinalgPass());
  // Fold the index arithmetic of the lowering before bufferizing.
  pm.addPass(createCanonicalizerPass());
  // Chains of elementwise ops (attention's scale, mask and softmax, the
  // norms, residual adds) become one loop nest each instead of one pass over
  // memory per op.
  pm.addPass(moe::createMoEFuseElementwisePass());
  // What elementwise fusion leaves at reductions (softmax, norms) runs one
  // row at a time.
  if (target == "cpu")
    pm.addPass(moe::createMoEFuseRowsPass());
  // Whole-program bufferization, function signatures included, so that
  // tests can hand tensors to the runner's print functions.
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  if (runtime) {
    // Dense arguments and results: the entry point takes plain pointers.
    bufferize.functionBoundaryTypeConversion =
        bufferization::LayoutMapOption::IdentityLayoutMap;
  }
  // An op whose result is inserted into a slice of a larger tensor (each
  // expert's output rows) writes that slice directly instead of a buffer
  // of its own that is then copied.
  pm.addPass(bufferization::createEmptyTensorEliminationPass());
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  if (runtime) {
    bufferization::BufferResultsToOutParamsPassOptions outParams;
    outParams.modifyPublicFunctions = true;
    // Results computed in a buffer of static shape are computed in the
    // caller's output buffer, not copied there.
    outParams.hoistStaticAllocs = true;
    pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
  }
  // Free what bufferization allocated.
  bufferization::buildBufferDeallocationPipeline(pm);
  // The deallocation pipeline's clones and deallocs become memref ops.
  pm.addPass(createConvertBufferizationToMemRefPass());
  // Deallocs of several buffers that may alias (a pipeline stage switch's
  // results) call a helper with dynamically shaped arguments, which the
  // runtime's bare-pointer calling convention cannot pass: inlined, and the
  // helper dropped.
  if (runtime) {
    pm.addPass(createInlinerPass());
    pm.addPass(createSymbolDCEPass());
  }
}

/// Host code on buffers and control flow to the LLVM dialect. `runtime`:
/// the moert allocator, bare-pointer functions and `moe_entry` wrapping
/// `entry`; `gpu`: kernel launches and GPU buffers become mgpu* calls.
static void buildHostToLLVMPipeline(OpPassManager &pm, bool runtime, bool gpu,
                                    StringRef entry) {
  // Subviews of the per-group slices become plain descriptors.
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  // Intrinsics first (fma and floor must stay instructions); what has none
  // (erf, tanh outside the runtime path) calls libm.
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  FinalizeMemRefToLLVMConversionPassOptions memrefToLLVM;
  // The runtime's allocator reuses buffers across calls.
  memrefToLLVM.useGenericFunctions = runtime;
  pm.addPass(createFinalizeMemRefToLLVMConversionPass(memrefToLLVM));
  if (gpu) {
    GpuToLLVMConversionPassOptions gpuToLLVM;
    gpuToLLVM.hostBarePtrCallConv = runtime;
    // Host bare pointers imply bare kernel arguments; say so.
    gpuToLLVM.kernelBarePtrCallConv = runtime;
    pm.addPass(createGpuToLLVMConversionPass(gpuToLLVM));
  }
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  ConvertFuncToLLVMPassOptions funcToLLVM;
  funcToLLVM.useBarePtrCallConv = runtime;
  pm.addPass(createConvertFuncToLLVMPass(funcToLLVM));
  if (runtime && !gpu)
    pm.addPass(createConvertOpenMPToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  if (runtime) {
    moe::MoEEmitEntryPassOptions entryOptions;
    entryOptions.function = entry.str();
    pm.addPass(moe::createMoEEmitEntryPass(entryOptions));
  }
}

void moe::buildLowerToLLVMPipeline(OpPassManager &pm,
                                   const LowerToLLVMOptions &options) {
  buildBufferizedPipeline(pm, options.decompose, options.runtime,
                          options.instrument, "cpu");
  if (options.runtime) {
    pm.addPass(moe::createConvertMatmulToRuntimePass());
    // The row loops and the parallel loops of linalg ops run on the OpenMP
    // threads of oneDNN's pool where they have the work for it.
    pm.addNestedPass<func::FuncOp>(createForallToParallelLoopPass());
    // Results computed where the caller wants them, zero constants filled,
    // copies of slices as loops (not the C runner's memrefCopy).
    pm.addPass(moe::createMoECopiesPass());
    pm.addNestedPass<func::FuncOp>(createConvertLinalgToParallelLoopsPass());
    pm.addPass(moe::createMoEVectorizableMathPass());
    pm.addPass(moe::createMoEThreadLoopsPass());
  } else {
    pm.addNestedPass<func::FuncOp>(createForallToForLoopPass());
    pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  }
  pm.addPass(createSCFToControlFlowPass());
  buildHostToLLVMPipeline(pm, options.runtime, /*gpu=*/false, options.entry);
}

void moe::buildLowerToGPUPipeline(OpPassManager &pm,
                                   const LowerToGPUOptions &options) {
  buildBufferizedPipeline(pm, /*decompose=*/true, /*runtime=*/true,
                          options.instrument, "cuda");
  // Matmuls go to cuBLAS.
  moe::ConvertMatmulToRuntimePassOptions matmuls;
  matmuls.target = "cuda";
  pm.addPass(moe::createConvertMatmulToRuntimePass(matmuls));
  pm.addPass(moe::createMoEManagedMemoryPass());
  // Parallel loops become kernels, one thread per iteration, in blocks of
  // `blockSize` threads; what stays sequential runs on the host, so
  // reductions go inside the parallel loops first.
  pm.addNestedPass<func::FuncOp>(moe::createMoEParallelLoopsFirstPass());
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToParallelLoopsPass());
  moe::MoEGPUMapLoopsPassOptions mapLoops;
  mapLoops.blockSize = options.blockSize;
  pm.addNestedPass<func::FuncOp>(moe::createMoEGPUMapLoopsPass(mapLoops));
  pm.addNestedPass<func::FuncOp>(createConvertParallelLoopToGpuPass());
  // Kernels take bare pointers: views they cannot rebuild from one are
  // rebuilt from their base buffer and metadata.
  pm.addNestedPass<func::FuncOp>(moe::createMoEGPUStaticKernelOperandsPass());
  pm.addPass(createGpuKernelOutliningPass());
  // Now that kernels are apart, what host code never touches goes to
  // device memory.
  pm.addPass(moe::createMoEGPUDeviceMemoryPass());
  if (options.streamOrder)
    pm.addNestedPass<func::FuncOp>(moe::createMoEGPUStreamOrderPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  SmallVector<std::string> chips(options.chips.begin(), options.chips.end());
  if (chips.empty())
    chips = {"sm_80", "sm_90"};
  for (const std::string &chip : chips) {
    GpuNVVMAttachTargetOptions target;
    target.chip = chip;
    target.features = options.features;
    pm.addPass(createGpuNVVMAttachTarget(target));
  }
  // Kernels take each buffer as one bare pointer, as the host passes it
  // (buildHostToLLVMPipeline): nothing checks that the two sides agree once
  // the kernels are binaries.
  ConvertGpuOpsToNVVMOpsOptions nvvm;
  nvvm.useBarePtrCallConv = true;
  pm.addNestedPass<gpu::GPUModuleOp>(createConvertGpuOpsToNVVMOps(nvvm));
  pm.addPass(createReconcileUnrealizedCastsPass());
  // PTX for each chip, then one fatbin of them all: the offloading
  // translation embeds a single object per module.
  GpuModuleToBinaryPassOptions binary;
  binary.toolkitPath = options.toolkit;
  binary.compilationTarget = "isa";
  pm.addPass(createGpuModuleToBinaryPass(binary));
  moe::MoEGPUFatbinPassOptions fatbin;
  fatbin.toolkit = options.toolkit;
  pm.addPass(moe::createMoEGPUFatbinPass(fatbin));
  buildHostToLLVMPipeline(pm, /*runtime=*/true, /*gpu=*/true, options.entry);
  // Weights and constants live in the library's host memory.
  pm.addPass(moe::createMoEDeviceGlobalsPass());
}

void moe::registerPipelines() {
  PassPipelineRegistration<LowerToLLVMOptions>(
      "moe-lower-to-llvm",
      "Lower moe programs through linalg and bufferization to the LLVM "
      "dialect (the CPU reference path)",
      buildLowerToLLVMPipeline);
  PassPipelineRegistration<LowerToGPUOptions>(
      "moe-lower-to-gpu",
      "Lower moe programs for NVIDIA GPUs: parallel loops become kernels "
      "compiled to a fatbin, host code goes to the LLVM dialect (what "
      "moe-compile --target=cuda builds)",
      buildLowerToGPUPipeline);
}
