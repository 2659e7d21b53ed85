//===- Decompose.cpp - expand moe.layer into its parts --------------------===//

#include "dialects/moe/IR/MoEOps.h"
#include "passes/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEDECOMPOSEPASS
#include "passes/Passes.h.inc"

namespace {

/// moe.layer -> moe.router, moe.dispatch, moe.experts, moe.combine, and for a
/// shared expert moe.shared_expert plus arith.addf.
struct DecomposeLayer : OpRewritePattern<LayerOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(LayerOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType inputType = op.getInput().getType();
    Type elt = inputType.getElementType();
    int64_t T = inputType.getDimSize(0), H = inputType.getDimSize(1);
    int64_t E = op.getLogits().getType().getDimSize(1);
    int64_t k = op.getK();
    bool expertChoice = op.getSelection() == SelectionMethod::ExpertChoice;

    auto idsType = RankedTensorType::get({T, k}, rewriter.getI32Type());
    auto weightsType = RankedTensorType::get({T, k}, elt);
    auto router = RouterOp::create(
        rewriter, loc, idsType, weightsType, op.getLogits(),
        op.getSelectionBias(), op.getRoutedIds(), op.getRoutedWeights(),
        expertChoice ? op.getCapacityAttr() : IntegerAttr(),
        op.getScoringAttr(), op.getSelectionAttr(), op.getNormalizeAttr(),
        op.getScalingFactorAttr(), op.getNumGroupsAttr(),
        op.getGroupTopkAttr(), op.getGroupScoreAttr(), op.getMaskedScoreAttr(),
        op.getSinkhornToleranceAttr(), op.getSinkhornMaxIterationsAttr(),
        op.getJitterEpsAttr());

    // Expert choice fills exactly `capacity` slots per expert, so a capacity
    // buffer of that size with the position policy drops nothing.
    std::optional<int64_t> capacity = op.getCapacity();
    DropPolicyAttr policy = op.getDropPolicyAttr();
    if (expertChoice)
      policy = DropPolicyAttr::get(getContext(), DropPolicy::Position);
    RankedTensorType rowsType =
        capacity ? RankedTensorType::get({E, *capacity, H}, elt)
                 : RankedTensorType::get({T * k, H}, elt);
    Value probs = policy && policy.getValue() == DropPolicy::Probs
                      ? router.getWeights()
                      : Value();
    auto dispatch = DispatchOp::create(
        rewriter, loc, rowsType, idsType,
        RankedTensorType::get({E}, rewriter.getI32Type()),
        RankedTensorType::get({}, rewriter.getI64Type()), op.getInput(),
        router.getIds(), probs, /*offsets=*/Value(),
        capacity ? rewriter.getI64IntegerAttr(*capacity) : IntegerAttr(),
        policy);

    int64_t M = op.getOutput().getType().getDimSize(1);
    SmallVector<int64_t> outShape(rowsType.getShape());
    outShape.back() = M;
    auto experts = ExpertsOp::create(
        rewriter, loc, RankedTensorType::get(outShape, elt), dispatch.getRows(),
        dispatch.getCounts(), op.getFc1Weight(), op.getFc1Bias(),
        op.getFc3Weight(), op.getFc3Bias(), op.getFc2Weight(),
        op.getFc2Bias(), op.getActivationAttr());
    Value result = CombineOp::create(rewriter, loc, op.getOutput().getType(),
                                     experts.getOutput(), dispatch.getSlots(),
                                     router.getWeights());

    if (op.getSharedFc1()) {
      Value shared = SharedExpertOp::create(
          rewriter, loc, op.getOutput().getType(), op.getInput(),
          op.getSharedFc1(), Value(), op.getSharedFc3(), Value(),
          op.getSharedFc2(), Value(), op.getSharedGate(),
          op.getActivationAttr());
      result = arith::AddFOp::create(rewriter, loc, result, shared);
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct MoEDecomposePass
    : public impl::MoEDecomposePassBase<MoEDecomposePass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMoEDecomposePatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace

void populateMoEDecomposePatterns(RewritePatternSet &patterns) {
  patterns.add<DecomposeLayer>(patterns.getContext());
}

} // namespace mlir::moe
