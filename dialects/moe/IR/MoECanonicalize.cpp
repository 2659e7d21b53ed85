//===- MoECanonicalize.cpp - moe canonicalization patterns -----------------===//

#include "dialects/moe/IR/MoEOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::moe;

namespace {
/// An exchange within a group of one rank sends every row to itself: when the
/// result types match the operands, it is the identity.
struct FoldSingleRankAllToAll : OpRewritePattern<AllToAllOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AllToAllOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getGroupSize() != 1)
      return rewriter.notifyMatchFailure(op, "group has more than one rank");
    if (op.getInput().getType() != op.getOutput().getType())
      return rewriter.notifyMatchFailure(op, "receive buffer has another size");
    SmallVector<Value> replacements{op.getInput()};
    if (op.isRagged())
      replacements.push_back(op.getCounts());
    rewriter.replaceOp(op, replacements);
    return success();
  }
};

/// A prefix sum over one rank adds nothing: zeros.
struct FoldSingleRankPrefixSum : OpRewritePattern<PrefixSumOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(PrefixSumOp op,
                                PatternRewriter &rewriter) const override {
    if (getGroupSize(op, op.getGridAttr(), op.getGridAxes()) != 1)
      return rewriter.notifyMatchFailure(op, "group has more than one rank");
    rewriter.replaceOpWithNewOp<arith::ConstantOp>(
        op, rewriter.getZeroAttr(op.getType()));
    return success();
  }
};
} // namespace

void PrefixSumOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                              MLIRContext *context) {
  results.add<FoldSingleRankPrefixSum>(context);
}

void AllToAllOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                             MLIRContext *context) {
  results.add<FoldSingleRankAllToAll>(context);
}
