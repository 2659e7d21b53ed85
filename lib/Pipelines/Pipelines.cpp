//===- Pipelines.cpp - named moe pass pipelines ---------------------------===//

#include "moe/Pipelines.h"

#include "passes/Passes.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void moe::buildLowerToLLVMPipeline(OpPassManager &pm,
                                   const LowerToLLVMOptions &options) {
  // The fused block has no lowering of its own.
  if (options.decompose)
    pm.addPass(moe::createMoEDecomposePass());
  if (options.runtime) {
    if (options.instrument)
      pm.addPass(moe::createMoEInstrumentLayersPass());
    pm.addPass(moe::createConvertCommToRuntimePass());
  }
  pm.addPass(moe::createConvertMoEToLinalgPass());
  // Imported models: the onnx ops around their raised MoE blocks.
  pm.addPass(moe::createConvertONNXToLinalgPass());
  // One-process exchanges are copies now; their grids are dead.
  pm.addPass(moe::createMoEEraseDeadGridsPass());
  // Elementwise arith/math on tensors (the shared-expert sum, user code)
  // becomes linalg.generic, which bufferizes.
  pm.addPass(createConvertElementwiseToLinalgPass());
  // Fold the index arithmetic of the lowering before bufferizing.
  pm.addPass(createCanonicalizerPass());
  // Whole-program bufferization, function signatures included, so that
  // tests can hand tensors to the runner's print functions.
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  if (options.runtime) {
    // Dense arguments and results: the entry point takes plain pointers.
    bufferize.functionBoundaryTypeConversion =
        bufferization::LayoutMapOption::IdentityLayoutMap;
  }
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  if (options.runtime) {
    bufferization::BufferResultsToOutParamsPassOptions outParams;
    outParams.modifyPublicFunctions = true;
    pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
  }
  // Free what bufferization allocated.
  bufferization::buildBufferDeallocationPipeline(pm);
  // The deallocation pipeline's clones and deallocs become memref ops.
  pm.addPass(createConvertBufferizationToMemRefPass());
  if (options.runtime)
    pm.addPass(moe::createConvertMatmulToRuntimePass());
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  if (options.runtime)
    pm.addPass(moe::createMoEVectorizableMathPass());
  pm.addPass(createSCFToControlFlowPass());
  // Subviews of the per-group slices become plain descriptors.
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  // Intrinsics first (fma and floor must stay instructions); what has none
  // (erf, tanh outside the runtime path) calls libm.
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  FinalizeMemRefToLLVMConversionPassOptions memrefToLLVM;
  // The runtime's allocator reuses buffers across calls.
  memrefToLLVM.useGenericFunctions = options.runtime;
  pm.addPass(createFinalizeMemRefToLLVMConversionPass(memrefToLLVM));
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  ConvertFuncToLLVMPassOptions funcToLLVM;
  funcToLLVM.useBarePtrCallConv = options.runtime;
  pm.addPass(createConvertFuncToLLVMPass(funcToLLVM));
  pm.addPass(createReconcileUnrealizedCastsPass());
  if (options.runtime) {
    moe::MoEEmitEntryPassOptions entry;
    entry.function = options.entry;
    pm.addPass(moe::createMoEEmitEntryPass(entry));
  }
}

void moe::registerPipelines() {
  PassPipelineRegistration<LowerToLLVMOptions>(
      "moe-lower-to-llvm",
      "Lower moe programs through linalg and bufferization to the LLVM "
      "dialect (the CPU reference path)",
      buildLowerToLLVMPipeline);
}
