//===- ExpertLoop.h - the per-expert loop form ------------------*- C++ -*-===//

#ifndef MOE_PASSES_RAISE_EXPERTLOOP_H
#define MOE_PASSES_RAISE_EXPERTLOOP_H

#include "passes/Raise/Matchers.h"

namespace mlir::moe::raise {

/// One unrolled iteration of the loop over experts.
struct LoopExpert {
  int64_t index;
  FFNMatch ffn;
  onnx::ScatterElementsOp scatter;
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

void populateExpertLoopPatterns(RewritePatternSet &patterns);

} // namespace mlir::moe::raise

#endif // MOE_PASSES_RAISE_EXPERTLOOP_H
