//===- FuseElementwise.cpp - one loop nest per chain of elementwise ops ---===//
//
// Imported models spell attention's scale, mask and softmax, the norms and
// the residual adds as one ONNX op each, so each becomes its own pass over
// memory. Upstream's elementwise fusion merges a producer into its single
// user; contractions are kept out of it on both sides, since a contraction
// with a fused prologue or epilogue is no longer a plain matmul and would
// lose its BLAS call.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEFUSEELEMENTWISEPASS
#include "passes/Passes.h.inc"

namespace {

bool isContraction(Operation *op) {
  auto linalgOp = dyn_cast_or_null<linalg::LinalgOp>(op);
  return linalgOp && linalg::isaContractionOpInterface(linalgOp);
}

/// Fuse a producer into its only user, neither of them a contraction.
bool shouldFuse(OpOperand *operand) {
  Operation *producer = operand->get().getDefiningOp();
  return producer && producer->hasOneUse() && !isContraction(producer) &&
         !isContraction(operand->getOwner());
}

struct MoEFuseElementwisePass
    : public impl::MoEFuseElementwisePassBase<MoEFuseElementwisePass> {
  void runOnOperation() override {
    MLIRContext *context = &getContext();
    RewritePatternSet patterns(context);
    linalg::populateElementwiseOpsFusionPatterns(patterns, shouldFuse);
    linalg::GenericOp::getCanonicalizationPatterns(patterns, context);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace mlir::moe
