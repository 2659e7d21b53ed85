//===- DenseExperts.cpp - raise the dense fallback form -------------------===//
//
// The portable export (mobius, onnxruntime-genai before QMoE, DeepSeek
// models made traceable): every expert runs on all tokens and is weighted
// by `sum_j weights[t, j] * (ids[t, j] == e)`, zero for the experts a token
// did not choose; the weighted outputs are summed. It computes exactly what
// a routed block computes, so it raises to the same moe.layer.
//
//===----------------------------------------------------------------------===//

#include "passes/Raise/DenseExperts.h"

namespace mlir::moe::raise {
namespace {

/// One expert's term: `w_e(t) * FFN_e(x)`.
struct DenseTerm {
  int64_t index;
  FFNMatch ffn;
  Value term;
};

/// `Unsqueeze(ReduceSum(weights * Cast(ids == e), -1), 1)` starting from
/// the Equal: the term that multiplies it with FFN_e(x).
static FailureOr<DenseTerm> matchTerm(onnx::EqualOp equal,
                                      const RouterMatch &router, Value x,
                                      PatternRewriter &rewriter) {
  DenseTerm term;
  std::optional<int64_t> index;
  for (int i = 0; i < 2; ++i)
    if (skipNoOps(equal.getInputs()[i]) == router.indices)
      index = constantInt(equal.getInputs()[1 - i]);
  if (!index)
    return rewriter.notifyMatchFailure(equal, "not ids == constant expert");
  term.index = *index;
  // Follow the single chain of users: Cast, Mul by the weights, ReduceSum
  // over the k slots, Unsqueeze, Mul by the FFN.
  Value v = equal.getOutputs()[0];
  auto next = [&]() -> Operation * {
    return v.hasOneUse() ? *v.getUsers().begin() : nullptr;
  };
  while (isa_and_nonnull<onnx::CastOp>(next()))
    v = next()->getResult(0);
  auto masked = dyn_cast_or_null<onnx::MulOp>(next());
  if (!masked || !llvm::is_contained(
                     llvm::map_range(masked.getInputs(), skipNoOps),
                     skipNoOps(router.weights)))
    return rewriter.notifyMatchFailure(equal, "mask is not on the weights");
  v = masked.getOutputs()[0];
  auto sum = dyn_cast_or_null<onnx::ReduceSumOp>(next());
  if (!sum || sum.getInputs().size() < 2 ||
      (constantInts(sum.getInputs()[1]) != SmallVector<int64_t>{-1} &&
       constantInts(sum.getInputs()[1]) != SmallVector<int64_t>{1}))
    return rewriter.notifyMatchFailure(masked, "weights are not summed");
  v = sum.getOutputs()[0];
  while (isa_and_nonnull<onnx::UnsqueezeOp, onnx::ReshapeOp, onnx::CastOp>(
      next()))
    v = next()->getResult(0);
  auto weighted = dyn_cast_or_null<onnx::MulOp>(next());
  if (!weighted)
    return rewriter.notifyMatchFailure(sum, "expert output is not weighted");
  Value ffnOut = weighted.getInputs()[weighted.getInputs()[0] == v ? 1 : 0];
  FailureOr<FFNMatch> ffn = matchFFN(ffnOut, rewriter);
  // Stacking takes per-expert weights as [in, out].
  if (failed(ffn) || ffn->outIn || skipNoOps(ffn->input) != x)
    return rewriter.notifyMatchFailure(weighted,
                                       "no expert FFN on the block input");
  term.ffn = *ffn;
  term.term = weighted.getOutputs()[0];
  return term;
}

/// Rewrites a complete dense-fallback block into one moe.layer.
struct RaiseDenseExperts : OpRewritePattern<onnx::TopKOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(onnx::TopKOp topk,
                                PatternRewriter &rewriter) const override {
    FailureOr<RouterMatch> router = matchRouter(topk, rewriter);
    if (failed(router))
      return failure();
    auto matmul = definedBy<onnx::MatMulOp>(router->logits);
    Value x = matmul ? skipNoOps(matmul.getInputs()[0]) : Value();
    if (!x)
      return rewriter.notifyMatchFailure(topk, "logits are not x @ W_router");

    SmallVector<DenseTerm> terms;
    for (Operation *user : router->indices.getUsers())
      if (auto equal = dyn_cast<onnx::EqualOp>(user)) {
        FailureOr<DenseTerm> term = matchTerm(equal, *router, x, rewriter);
        if (failed(term))
          return failure();
        terms.push_back(*term);
      }
    if (static_cast<int64_t>(terms.size()) != router->numExperts)
      return rewriter.notifyMatchFailure(topk, "not one term per expert");
    llvm::sort(terms, [](const DenseTerm &a, const DenseTerm &b) {
      return a.index < b.index;
    });
    for (auto [i, term] : llvm::enumerate(terms))
      if (term.index != static_cast<int64_t>(i) ||
          term.ffn.activation != terms.front().ffn.activation ||
          term.ffn.custom != terms.front().ffn.custom ||
          static_cast<bool>(term.ffn.fc3) !=
              static_cast<bool>(terms.front().ffn.fc3))
        return rewriter.notifyMatchFailure(topk, "experts do not match up");
    SmallVector<Value> values =
        llvm::map_to_vector(terms, [](const DenseTerm &t) { return t.term; });
    Value output = matchSumOf(values);
    if (!output || output.getType() != x.getType())
      return rewriter.notifyMatchFailure(topk, "expert terms do not add up");

    Location loc = output.getLoc();
    rewriter.setInsertionPoint(output.getDefiningOp());
    auto stack = [&](arith::ConstantOp FFNMatch::*field,
                     StringRef name) -> FailureOr<Value> {
      SmallVector<arith::ConstantOp> weights = llvm::map_to_vector(
          terms, [&](const DenseTerm &t) { return t.ffn.*field; });
      return stackExpertWeights(weights, name, loc, rewriter);
    };
    const FFNMatch &first = terms.front().ffn;
    LayerSpec spec;
    setRouting(spec, *router);
    spec.input = x;
    FailureOr<Value> fc1 = stack(&FFNMatch::fc1, "experts_fc1");
    FailureOr<Value> fc2 = stack(&FFNMatch::fc2, "experts_fc2");
    FailureOr<Value> fc3 =
        first.fc3 ? stack(&FFNMatch::fc3, "experts_fc3") : FailureOr<Value>();
    if (failed(fc1) || failed(fc2) || (first.fc3 && failed(fc3)))
      return rewriter.notifyMatchFailure(topk, "weights could not be read");
    spec.fc1 = *fc1;
    spec.fc2 = *fc2;
    spec.fc3 = first.fc3 ? *fc3 : Value();
    spec.activation = activationOf(first, rewriter.getContext());
    return replaceByLayer(spec, *router, output, topk, rewriter);
  }
};

} // namespace

void populateDenseExpertsPatterns(RewritePatternSet &patterns) {
  patterns.add<RaiseDenseExperts>(patterns.getContext());
}

} // namespace mlir::moe::raise
