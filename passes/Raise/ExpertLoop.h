//===- ExpertLoop.h - the per-expert loop form ------------------*- C++ -*-===//

#ifndef MOE_PASSES_RAISE_EXPERTLOOP_H
#define MOE_PASSES_RAISE_EXPERTLOOP_H

#include "passes/Raise/Matchers.h"

namespace mlir::moe::raise {

/// One unrolled iteration of the loop over experts.
struct LoopExpert {
  int64_t index;
  FFNMatch ffn;
  /// The op that adds the expert's rows into the block's sum.
  Operation *accumulate = nullptr;
};

/// The router and the rows of its expert mask that the loop reads: one
/// `mask[e]` per unrolled iteration.
struct ExpertMaskMatch {
  RouterMatch router;
  SmallVector<onnx::GatherOp> selects;
  /// The expert each select reads; none when the traced loop computed it
  /// from the routing (a loop over the experts the sample input reached).
  SmallVector<std::optional<int64_t>> indices;

  /// Whether every expert 0..E-1 is selected exactly once.
  bool isComplete() const;
};

/// Matches the router and the per-expert mask rows of a loop-form block.
FailureOr<ExpertMaskMatch> matchExpertMask(onnx::TopKOp topk,
                                           PatternRewriter &rewriter);
/// The same for a matched router; `anchor` takes the failure reasons.
FailureOr<ExpertMaskMatch> matchExpertMask(const RouterMatch &router,
                                           Operation *anchor,
                                           PatternRewriter &rewriter);

/// A whole loop-form block.
struct ExpertLoopMatch {
  RouterMatch router;
  Value x;                          // the tokens, [T, H]
  SmallVector<LoopExpert> experts;  // by expert index
  Value output;                     // the sum over experts, [T, H]
};

/// Matches the complete loop-form block routed by `router`.
FailureOr<ExpertLoopMatch> matchExpertLoop(const RouterMatch &router,
                                           Operation *anchor,
                                           PatternRewriter &rewriter);

/// `value` with Expand, Cast, Reshape, Unsqueeze and Squeeze looked
/// through.
Value skipShapeOps(Value value);

/// The expert FFN one side of `weighted` computes, the other side being its
/// routing weights: on x's rows picked through `mask`, with fused
/// parameters indexed by `expertIndex` or the constant `expert`.
FailureOr<FFNMatch> matchWeightedFFN(onnx::MulOp weighted, Value mask,
                                     Value expertIndex, int64_t expert,
                                     const RouterMatch &router, Value x,
                                     PatternRewriter &rewriter);

/// Replaces a matched loop-form block by one moe.layer; only where the
/// check ran and agreed with `requireCheck`.
LogicalResult rewriteExpertLoop(const ExpertLoopMatch &match,
                                Operation *anchor, PatternRewriter &rewriter,
                                bool requireCheck = false);

/// One expert of a loop whose rows `mask` picks: its FFN, weighted and
/// added by index_add_ (ScatterElements) into zeros.
FailureOr<LoopExpert> matchIndexAddExpert(Value mask, int64_t index,
                                          Value expertIndex,
                                          const RouterMatch &router, Value x,
                                          PatternRewriter &rewriter);

/// The masks `ids == e` of a loop over `torch.where(ids == e)`, with the
/// expert each picks (one a mask; some may be missing).
FailureOr<SmallVector<std::pair<int64_t, Value>>>
matchWhereMasks(const RouterMatch &router, Operation *anchor,
                PatternRewriter &rewriter);

/// The loop over `torch.where(ids == e)` that MoE code written without
/// transformers exports (WhereLoop.cpp).
FailureOr<ExpertLoopMatch> matchWhereLoop(const RouterMatch &router,
                                          Operation *anchor,
                                          PatternRewriter &rewriter);

void populateExpertLoopPatterns(RewritePatternSet &patterns);

} // namespace mlir::moe::raise

#endif // MOE_PASSES_RAISE_EXPERTLOOP_H
