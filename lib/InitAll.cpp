//===- InitAll.cpp - registration shared by every moe tool ----------------===//

#include "moe/InitAll.h"

#include "dialects/moe/IR/MoEDialect.h"
#include "dialects/onnx/IR/ONNXDialect.h"
#include "moe/Evaluate/Evaluate.h"
#include "moe/Pipelines.h"
#include "passes/Passes.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"

#include <atomic>
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/BufferDeallocationOpInterfaceImpl.h"
#include "mlir/Dialect/Arith/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Transforms/FuncBufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/ControlFlow/Transforms/BufferDeallocationOpInterfaceImpl.h"
#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Linalg/Transforms/TilingInterfaceImpl.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/IR/MemRefMemorySlot.h"
#include "mlir/Dialect/MemRef/Transforms/AllocationOpInterfaceImpl.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/BufferDeallocationOpInterfaceImpl.h"
#include "mlir/Dialect/SCF/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/OpenMP/OpenMPToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

void mlir::moe::registerAllDialects(DialectRegistry &registry) {
  registry.insert<moe::MoEDialect, moe::onnx::ONNXDialect, affine::AffineDialect, arith::ArithDialect,
                  bufferization::BufferizationDialect, cf::ControlFlowDialect,
                  func::FuncDialect, gpu::GPUDialect, linalg::LinalgDialect,
                  LLVM::LLVMDialect, NVVM::NVVMDialect,
                  math::MathDialect, memref::MemRefDialect, scf::SCFDialect,
                  shard::ShardDialect, tensor::TensorDialect>();
}

void mlir::moe::registerAllExtensions(DialectRegistry &registry) {
  // One-shot bufferization of the linalg reference lowering.
  arith::registerBufferizableOpInterfaceExternalModels(registry);
  bufferization::func_ext::registerBufferizableOpInterfaceExternalModels(
      registry);
  linalg::registerBufferizableOpInterfaceExternalModels(registry);
  // moe-fuse-rows tiles linalg ops and fuses their producers.
  linalg::registerTilingInterfaceExternalModels(registry);
  scf::registerBufferizableOpInterfaceExternalModels(registry);
  tensor::registerBufferizableOpInterfaceExternalModels(registry);
  // Ownership-based deallocation of the buffers it creates.
  arith::registerBufferDeallocationOpInterfaceExternalModels(registry);
  cf::registerBufferDeallocationOpInterfaceExternalModels(registry);
  scf::registerBufferDeallocationOpInterfaceExternalModels(registry);
  // memref.alloc is an allocation to buffer-results-to-out-params, which
  // then computes a static result in the caller's buffer instead of copying
  // it there (hoist-static-allocs).
  memref::registerAllocationOpInterfaceExternalModels(registry);
  // The deallocation helper is inlined where the runtime calls bare
  // pointers (moe-lower-to-llvm).
  func::registerInlinerExtension(registry);
  // --target=cuda: NVVM targets serialize kernels; gpu and nvvm ops
  // translate to LLVM IR (kernel launches become mgpu* calls).
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  // convert-gpu-to-nvvm lowers kernel bodies through these interfaces.
  arith::registerConvertArithToLLVMInterface(registry);
  cf::registerConvertControlFlowToLLVMInterface(registry);
  registerConvertFuncToLLVMInterface(registry);
  registerConvertMathToLLVMInterface(registry);
  registerConvertMemRefToLLVMInterface(registry);
  NVVM::registerConvertGpuToNVVMInterface(registry);
  registerConvertNVVMToLLVMInterface(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerOpenMPDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  gpu::registerOffloadingLLVMTranslationInterfaceExternalModels(registry);
  registerNVVMDialectTranslation(registry);
}

void mlir::moe::registerAllPasses() {
  moe::registerMoEPasses();
  // moe-raise{validate} runs its checks through the evaluator.
  moe::registerRaiseEvaluator();
  moe::registerPipelines();
  // Upstream passes that tests run on their own.
  registerCanonicalizerPass();
  registerCSEPass();
  bufferization::registerOneShotBufferizePass();
}

using namespace mlir;

namespace {
/// Counts the errors emitted while a pass runs; on its failure with none,
/// emits one naming it.
class SilentFailureReporter : public PassInstrumentation {
public:
  explicit SilentFailureReporter(MLIRContext *context)
      : handler(context, [this](Diagnostic &diag) {
          if (diag.getSeverity() == DiagnosticSeverity::Error)
            ++errors;
          return failure(); // on to the next handler, which prints it
        }) {}

  void runBeforePass(Pass *, Operation *) override {
    errorsBefore = errors.load();
  }

  void runAfterPassFailed(Pass *pass, Operation *op) override {
    if (errors == errorsBefore)
      op->emitError() << "pass '" << pass->getArgument()
                      << "' failed on this op without saying why";
  }

private:
  // Function passes may run on several threads at once.
  std::atomic<int64_t> errors = 0, errorsBefore = 0;
  ScopedDiagnosticHandler handler;
};
} // namespace

void mlir::moe::reportSilentPassFailures(PassManager &pm) {
  pm.addInstrumentation(
      std::make_unique<SilentFailureReporter>(pm.getContext()));
}
