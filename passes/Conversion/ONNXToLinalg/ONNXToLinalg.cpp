//===- ONNXToLinalg.cpp - the convert-onnx-to-linalg pass -----------------===//

#include "mlir/Transforms/DialectConversion.h"
#include "passes/Conversion/ONNXToLinalg/Lowering.h"
#include "passes/Passes.h"

namespace mlir::moe {
#define GEN_PASS_DEF_CONVERTONNXTOLINALGPASS
#define GEN_PASS_DEF_MOESTATICSHAPESPASS
#include "passes/Passes.h.inc"

namespace {

/// Every op's lowering; `runtime`: gathers and scatters report an index out
/// of range through the moert runtime.
void populateONNXToLinalgPatterns(RewritePatternSet &patterns, bool runtime) {
  onnx_lowering::populateElementwisePatterns(patterns);
  onnx_lowering::populateLinearPatterns(patterns);
  onnx_lowering::populateShapePatterns(patterns);
  onnx_lowering::populateReducePatterns(patterns);
  onnx_lowering::populateIndexingPatterns(patterns, runtime);
  onnx_lowering::populateEinsumPatterns(patterns);
}

/// Public functions whose results are `tensor.cast`s of static tensors (the
/// refinement keeps the signature it was given) return the static tensors
/// instead: a compiled entry point has static shapes.
void refinePublicResults(ModuleOp module) {
  for (auto func : module.getOps<func::FuncOp>()) {
    if (!func.isPublic() || func.isExternal())
      continue;
    SmallVector<Type> results;
    func.walk([&](func::ReturnOp ret) {
      for (OpOperand &operand : ret->getOpOperands())
        if (auto cast = operand.get().getDefiningOp<tensor::CastOp>())
          if (cast.getSource().getType().hasStaticShape())
            operand.set(cast.getSource());
      results = llvm::to_vector(ret.getOperandTypes());
    });
    func.setFunctionType(FunctionType::get(module.getContext(),
                                           func.getArgumentTypes(), results));
  }
}

struct MoEStaticShapesPass
    : public impl::MoEStaticShapesPassBase<MoEStaticShapesPass> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(onnx_lowering::makeShapesStatic(getOperation(), keepWeights)))
      return signalPassFailure();
    refinePublicResults(getOperation());
  }
};

struct ConvertONNXToLinalgPass
    : public impl::ConvertONNXToLinalgPassBase<ConvertONNXToLinalgPass> {
  using Base::Base;

  void runOnOperation() override {
    Operation *root = getOperation();
    MLIRContext *ctx = &getContext();
    // Fold shape computations and infer static shapes; stop at the first op
    // whose shape is not static, saying why.
    if (failed(onnx_lowering::makeShapesStatic(root)))
      return signalPassFailure();
    // Indices that are constants now are checked now, one error per op.
    if (failed(onnx_lowering::checkConstantIndices(root)))
      return signalPassFailure();
    ConversionTarget target(*ctx);
    target.addIllegalDialect<onnx::ONNXDialect>();
    target.addLegalOp<onnx::NoneOp>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(ctx);
    populateONNXToLinalgPatterns(patterns, runtime);
    // Patterns report why they do not apply (cannotLower).
    if (failed(applyPartialConversion(root, target, std::move(patterns))))
      return signalPassFailure();
    // Missing optional inputs have no users left.
    root->walk([](onnx::NoneOp none) {
      if (none->use_empty())
        none->erase();
    });
  }
};

} // namespace

} // namespace mlir::moe
