//===- WhereLoop.cpp - raise a loop over torch.where(ids == e) -------------===//
//
// MoE blocks written without transformers, as DeepSeek's reference
// inference code writes them:
//
//   y = zeros_like(x)
//   for i in range(E):
//     idx, top = torch.where(indices == i)
//     y[idx] += expert_i(x[idx]) * weights[idx, top, None]
//
// export, for each expert, a NonZero of `Equal(ids, i)`; with
// `y.index_add_(0, idx, update)`, a ScatterElements of the expert's
// weighted rows into zeros, added to the running sum. (Tracing exporters
// write `y[idx] += ...` with the row count of their sample input fixed in a
// Reshape, a graph that fails on other inputs: the lowering refuses it and
// says so.) The form is read loosely (the mask's decomposition into tokens
// and slots is not), so such a block is raised only where the check ran and
// agreed.
//
//===----------------------------------------------------------------------===//

#include "passes/Raise/ExpertLoop.h"
#include "llvm/ADT/SmallSet.h"

namespace mlir::moe::raise {

FailureOr<SmallVector<std::pair<int64_t, Value>>>
matchWhereMasks(const RouterMatch &router, Operation *anchor,
                PatternRewriter &rewriter) {
  SmallVector<std::pair<int64_t, Value>> masks;
  llvm::SmallSet<int64_t, 16> seen;
  for (Operation *user : router.indices.getUsers()) {
    auto equal = dyn_cast<onnx::EqualOp>(user);
    if (!equal)
      continue;
    int side = equal.getInputs()[0] == router.indices ? 1 : 0;
    std::optional<int64_t> expert = constantInt(equal.getInputs()[side]);
    if (!expert || *expert < 0 || *expert >= router.numExperts ||
        !seen.insert(*expert).second)
      return rewriter.notifyMatchFailure(equal, "not one mask per expert");
    masks.push_back({*expert, equal.getOutputs()[0]});
  }
  if (masks.empty())
    return rewriter.notifyMatchFailure(anchor, "no `ids == e` expert masks");
  return masks;
}

FailureOr<ExpertLoopMatch> matchWhereLoop(const RouterMatch &router,
                                          Operation *anchor,
                                          PatternRewriter &rewriter) {
  ExpertLoopMatch match;
  match.router = router;
  match.x = matchRouterInput(router.logits);
  if (!match.x)
    return rewriter.notifyMatchFailure(anchor, "logits are not x @ W_router");
  FailureOr<SmallVector<std::pair<int64_t, Value>>> masks =
      matchWhereMasks(router, anchor, rewriter);
  if (failed(masks))
    return failure();
  if (static_cast<int64_t>(masks->size()) != router.numExperts)
    return rewriter.notifyMatchFailure(anchor,
                                       "experts are missing (a traced export "
                                       "lost them)");

  // index_add_: each expert's rows scattered into zeros, summed.
  SmallVector<Value> added;
  for (auto [expert, mask] : *masks) {
    FailureOr<LoopExpert> e = matchIndexAddExpert(mask, expert, Value(),
                                                  router, match.x, rewriter);
    if (failed(e))
      return failure();
    match.experts.push_back(*e);
    added.push_back(e->accumulate->getResult(0));
  }
  match.output = matchSumOf(added);
  if (!match.output)
    return rewriter.notifyMatchFailure(anchor, "expert sums do not add up");
  llvm::sort(match.experts, [](const LoopExpert &a, const LoopExpert &b) {
    return a.index < b.index;
  });
  return match;
}

} // namespace mlir::moe::raise
