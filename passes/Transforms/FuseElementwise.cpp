//===- FuseElementwise.cpp - one loop nest per chain of elementwise ops ---===//
//
// Imported models spell attention's scale, mask and softmax, the norms and
// the residual adds as one ONNX op each, so each becomes its own pass over
// memory. Upstream's elementwise fusion merges a producer into its single
// user; contractions are kept out of it on both sides, since a contraction
// with a fused prologue or epilogue is no longer a plain matmul and would
// lose its BLAS call.
//
// Every contraction also gets its own copy of a shared initial fill: CSE
// merges identical fills of empty tensors, and bufferization would then
// fill one buffer and copy it for each user, where a fill right before each
// contraction is a write that the BLAS call absorbs.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEFUSEELEMENTWISEPASS
#include "passes/Passes.h.inc"

namespace {

bool isContraction(Operation *op) {
  auto linalgOp = dyn_cast_or_null<linalg::LinalgOp>(op);
  return linalgOp && linalg::isaContractionOpInterface(linalgOp);
}

/// Whether `op`'s payload reads one of its inits (an einsum lowered as
/// `out + a * b` on a fill): fused into a user with more loops, the init
/// stays an output that the extra loops would accumulate into.
bool readsInits(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  return !linalgOp ||
         llvm::any_of(linalgOp.getDpsInitsMutable(), [&](OpOperand &init) {
           return linalgOp.payloadUsesValueFromOperand(&init);
         });
}

/// Fuse a producer into its only user, neither of them a contraction, the
/// producer's values a function of its inputs alone.
bool shouldFuse(OpOperand *operand) {
  Operation *producer = operand->get().getDefiningOp();
  return producer && producer->hasOneUse() && !isContraction(producer) &&
         !readsInits(producer) && !isContraction(operand->getOwner());
}

/// Gives each contraction whose init is a fill a fill (and empty tensor) of
/// its own, right before it; shared originals go once unused.
void unshareContractionFills(Operation *root) {
  SmallVector<linalg::LinalgOp> contractions;
  root->walk([&](linalg::LinalgOp op) {
    if (isContraction(op) && op.hasPureTensorSemantics())
      contractions.push_back(op);
  });
  for (linalg::LinalgOp op : contractions) {
    for (OpOperand &init : op.getDpsInitsMutable()) {
      auto fill = init.get().getDefiningOp<linalg::FillOp>();
      if (!fill || (fill->hasOneUse() && fill->getNextNode() == op))
        continue;
      OpBuilder b(op);
      auto empty = fill.getOutputs()[0].getDefiningOp<tensor::EmptyOp>();
      IRMapping mapping;
      if (empty && empty->getBlock() == op->getBlock())
        b.clone(*empty, mapping);
      init.set(b.clone(*fill, mapping)->getResult(0));
      if (fill->use_empty())
        fill->erase();
      if (empty && empty->use_empty())
        empty->erase();
    }
  }
}

struct MoEFuseElementwisePass
    : public impl::MoEFuseElementwisePassBase<MoEFuseElementwisePass> {
  void runOnOperation() override {
    unshareContractionFills(getOperation());
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
