//===- ExpertLoop.cpp - raise the Hugging Face per-expert loop ------------===//
//
// The form `torch.onnx.export` and `torch.jit.trace` give Mixtral- and
// Qwen-style blocks: a router (softmax, top-k, optional renormalisation),
// an expert mask `one_hot(ids).permute(2, 1, 0)`, and for every expert e
// `top_x = nonzero(mask[e])`, the expert FFN on `x[top_x]`, a product with
// the routing weights and an `index_add_` (ScatterElements) into a zero
// accumulator. The accumulations of all experts are summed.
//
//===----------------------------------------------------------------------===//

#include "passes/Raise/ExpertLoop.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallSet.h"

namespace mlir::moe::raise {

/// The op among the forward slice of `from` (within `depth` ops) that is an
/// `OpT`, if exactly one is.
template <typename OpT>
static OpT uniqueUserWithin(Value from, unsigned depth) {
  SmallVector<std::pair<Value, unsigned>> work{{from, 0}};
  llvm::SmallPtrSet<Operation *, 32> seen;
  OpT found;
  while (!work.empty()) {
    auto [v, d] = work.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (!seen.insert(user).second)
        continue;
      if (auto op = dyn_cast<OpT>(user)) {
        if (found)
          return {};
        found = op;
        continue;
      }
      if (d + 1 < depth)
        for (Value result : user->getResults())
          work.push_back({result, d + 1});
    }
  }
  return found;
}

Value skipShapeOps(Value value) {
  while (Operation *op = value.getDefiningOp()) {
    if (!isa<onnx::ExpandOp, onnx::CastOp, onnx::ReshapeOp, onnx::IdentityOp,
             onnx::UnsqueezeOp, onnx::SqueezeOp>(op))
      break;
    value = op->getOperand(0);
  }
  return value;
}

FailureOr<LoopExpert> matchIndexAddExpert(Value mask, int64_t index,
                                          Value expertIndex,
                                          const RouterMatch &router, Value x,
                                          PatternRewriter &rewriter) {
  LoopExpert expert;
  expert.index = index;
  auto scatter = uniqueUserWithin<onnx::ScatterElementsOp>(mask, /*depth=*/16);
  if (!scatter || !isZeroConstant(scatter.getInputs()[0]))
    return rewriter.notifyMatchFailure(
        mask.getLoc(), "no index_add of the expert's rows into zeros");
  auto axis = scatter->getAttrOfType<IntegerAttr>("axis");
  if (axis && axis.getInt() != 0)
    return rewriter.notifyMatchFailure(scatter, "not scattered by token");
  // Into zeros, `add` (index_add_) and plain replacement agree.
  auto reduction = scatter->getAttrOfType<StringAttr>("reduction");
  if (reduction && reduction.getValue() != "none" &&
      reduction.getValue() != "add")
    return rewriter.notifyMatchFailure(scatter, "scatter reduces otherwise");
  if (!dependsOn(scatter.getInputs()[1], mask))
    return rewriter.notifyMatchFailure(scatter,
                                       "scatter rows are not the expert's");
  auto weighted = dyn_cast_or_null<onnx::MulOp>(
      skipShapeOps(scatter.getInputs()[2]).getDefiningOp());
  if (!weighted)
    return rewriter.notifyMatchFailure(scatter, "update is not weighted");
  FailureOr<FFNMatch> ffn = matchWeightedFFN(weighted, mask, expertIndex,
                                             index, router, x, rewriter);
  if (failed(ffn))
    return failure();
  expert.ffn = *ffn;
  expert.accumulate = scatter;
  return expert;
}

FailureOr<FFNMatch> matchWeightedFFN(onnx::MulOp weighted, Value mask,
                                     Value expertIndex, int64_t expert,
                                     const RouterMatch &router, Value x,
                                     PatternRewriter &rewriter) {
  for (int i = 0; i < 2; ++i) {
    FailureOr<FFNMatch> ffn = matchFFN(weighted.getInputs()[i], rewriter);
    // Stacking takes per-expert weights as [in, out].
    if (succeeded(ffn) && ffn->outIn)
      ffn = failure();
    if (failed(ffn))
      ffn = matchIndexedFFN(weighted.getInputs()[i], rewriter);
    if (failed(ffn))
      continue;
    // Fused parameters are indexed by the expert the mask is.
    if (ffn->expertIndex && ffn->expertIndex != expertIndex &&
        constantInt(ffn->expertIndex) != expert)
      return rewriter.notifyMatchFailure(weighted,
                                         "FFN weights are another expert's");
    // The FFN must run on x's rows (moved, not computed) picked by this
    // expert's mask, and be scaled by the routing weights.
    if (!movedFrom(ffn->input, x) || !dependsOn(ffn->input, mask))
      return rewriter.notifyMatchFailure(weighted,
                                         "FFN is not fed by this expert");
    if (!movedFrom(weighted.getInputs()[1 - i], router.weights))
      return rewriter.notifyMatchFailure(
          weighted, "expert output is not scaled by the routing weights");
    return ffn;
  }
  return rewriter.notifyMatchFailure(weighted, "no expert FFN");
}

/// The position i of an expert index read as the i-th of `expert_hit`, the
/// experts the routing reached (NonZero), split into `numExperts` pieces:
/// such a graph only runs when every expert is reached, and then the i-th
/// is expert i.
static std::optional<int64_t> hitPosition(Value index, int64_t numExperts) {
  auto gather = definedBy<onnx::GatherOp>(index);
  if (!gather || constantInt(gather.getInputs()[1]) != 0)
    return std::nullopt;
  Value piece = skipNoOps(gather.getInputs()[0]);
  if (auto squeeze = piece.getDefiningOp<onnx::SqueezeOp>())
    piece = skipNoOps(squeeze.getInputs()[0]);
  auto split = piece.getDefiningOp<onnx::SplitOp>();
  if (!split || static_cast<int64_t>(split->getNumResults()) != numExperts)
    return std::nullopt;
  auto hits = definedBy<onnx::TransposeOp>(split.getInputs()[0]);
  if (!hits || !definedBy<onnx::NonZeroOp>(hits.getInputs()[0]))
    return std::nullopt;
  // One id a piece: split sizes of 1 (inference may not know them).
  std::optional<SmallVector<int64_t>> sizes =
      split.getInputs().size() > 1 ? constantInts(split.getInputs()[1])
                                   : std::nullopt;
  if (!hasIntAttr(split, "axis", 0, 0) ||
      !(sizes
            ? llvm::all_of(*sizes, [](int64_t n) { return n == 1; })
            : llvm::all_of(split->getResults(), [](Value result) {
                return cast<RankedTensorType>(result.getType()).getDimSize(0) ==
                       1;
              })))
    return std::nullopt;
  return cast<OpResult>(piece).getResultNumber();
}

FailureOr<ExpertMaskMatch> matchExpertMask(onnx::TopKOp topk,
                                           PatternRewriter &rewriter) {
  FailureOr<RouterMatch> router = matchRouter(topk, rewriter);
  if (failed(router))
    return failure();
  return matchExpertMask(*router, topk, rewriter);
}

FailureOr<ExpertMaskMatch> matchExpertMask(const RouterMatch &routerMatch,
                                           Operation *topk,
                                           PatternRewriter &rewriter) {
  const RouterMatch *router = &routerMatch;
  ExpertMaskMatch match;
  match.router = *router;
  // mask = one_hot(ids, E).permute(2, 1, 0); mask[e] picks expert e.
  // transformers 5 adds a class for padding ids (E + 1), never chosen.
  auto oneHot = uniqueUserWithin<onnx::OneHotOp>(router->indices, 2);
  std::optional<int64_t> depth =
      oneHot ? constantInt(oneHot.getInputs()[1]) : std::nullopt;
  if (!depth ||
      (*depth != router->numExperts && *depth != router->numExperts + 1))
    return rewriter.notifyMatchFailure(topk, "no one-hot expert mask");
  for (Operation *user : oneHot.getOutputs()[0].getUsers())
    if (auto transpose = dyn_cast<onnx::TransposeOp>(user))
      for (Operation *maskUser : transpose.getOutputs()[0].getUsers())
        if (auto gather = dyn_cast<onnx::GatherOp>(maskUser)) {
          // A loop over `expert_hit` (the experts the traced input reached)
          // picks mask rows by an index computed from the routing.
          std::optional<int64_t> index = constantInt(gather.getInputs()[1]);
          if (!index)
            index = hitPosition(gather.getInputs()[1], router->numExperts);
          if (!index && !dependsOn(gather.getInputs()[1], router->indices))
            return rewriter.notifyMatchFailure(gather,
                                               "expert index not constant");
          match.selects.push_back(gather);
          match.indices.push_back(index);
        }
  if (match.selects.empty())
    return rewriter.notifyMatchFailure(oneHot, "no per-expert mask rows");
  return match;
}

bool ExpertMaskMatch::isComplete() const {
  if (static_cast<int64_t>(indices.size()) != router.numExperts)
    return false;
  llvm::SmallSet<int64_t, 16> seen;
  for (std::optional<int64_t> index : indices)
    if (!index || *index < 0 || *index >= router.numExperts ||
        !seen.insert(*index).second)
      return false;
  return true;
}

FailureOr<ExpertLoopMatch> matchExpertLoop(const RouterMatch &router,
                                           Operation *topk,
                                           PatternRewriter &rewriter) {
  FailureOr<ExpertMaskMatch> mask = matchExpertMask(router, topk, rewriter);
  if (failed(mask))
    return failure();
  if (!mask->isComplete())
    return rewriter.notifyMatchFailure(
        topk, "experts are missing (a traced export lost them)");
  ExpertLoopMatch match;
  match.router = mask->router;
  match.x = matchRouterInput(match.router.logits);
  if (!match.x)
    return rewriter.notifyMatchFailure(topk, "logits are not x @ W_router");
  for (auto [select, index] : llvm::zip(mask->selects, mask->indices)) {
    FailureOr<LoopExpert> expert = matchIndexAddExpert(
        select.getOutputs()[0], *index, skipNoOps(select.getInputs()[1]),
        match.router, match.x, rewriter);
    if (failed(expert))
      return failure();
    match.experts.push_back(*expert);
  }
  llvm::sort(match.experts, [](const LoopExpert &a, const LoopExpert &b) {
    return a.index < b.index;
  });
  SmallVector<Value> scattered;
  for (const LoopExpert &e : match.experts)
    scattered.push_back(e.accumulate->getResult(0));
  match.output = matchSumOf(scattered);
  if (!match.output)
    return rewriter.notifyMatchFailure(topk, "expert sums do not add up");
  return match;
}

namespace {

/// Rewrites a complete loop over experts stored as fused 3-D parameters,
/// already in moe's `[E, out, in]` layout.
static LogicalResult raiseIndexedExperts(const ExpertLoopMatch &match,
                                         PatternRewriter &rewriter,
                                         bool requireCheck) {
  FFNMatch first = match.experts.front().ffn;
  int64_t numExperts = match.router.numExperts;
  if (cast<RankedTensorType>(first.stackedFc1.getType()).getDimSize(0) !=
          numExperts ||
      cast<RankedTensorType>(first.stackedFc2.getType()).getDimSize(0) !=
          numExperts)
    return rewriter.notifyMatchFailure(match.output.getLoc(),
                                       "parameters do not hold E experts");
  Location loc = match.output.getLoc();
  rewriter.setInsertionPoint(match.output.getDefiningOp());
  LayerSpec spec;
  setRouting(spec, match.router);
  spec.input = match.x;
  // moe's weights are [E, out, in].
  auto pack = [&](arith::ConstantOp weight, bool inOut,
                  StringRef name) -> FailureOr<Value> {
    if (!weight)
      return Value();
    if (inOut)
      return transposeExpertWeights(weight, name, loc, rewriter);
    return weight.getResult();
  };
  FailureOr<Value> fc1 =
      pack(first.stackedFc1, first.stackedFc1InOut, "experts_fc1");
  FailureOr<Value> fc3 =
      pack(first.stackedFc3, first.stackedFc1InOut, "experts_fc3");
  FailureOr<Value> fc2 =
      pack(first.stackedFc2, first.stackedFc2InOut, "experts_fc2");
  if (failed(fc1) || failed(fc3) || failed(fc2))
    return rewriter.notifyMatchFailure(loc, "weights could not be packed");
  spec.fc1 = *fc1;
  spec.fc3 = *fc3;
  spec.fc2 = *fc2;
  if (first.stackedFc1Bias)
    spec.fc1Bias = first.stackedFc1Bias;
  if (first.stackedFc2Bias)
    spec.fc2Bias = first.stackedFc2Bias;
  spec.activation = *first.fusedActivation;
  spec.requireCheck = requireCheck;
  return replaceByLayer(spec, match.router, match.output,
                        match.output.getDefiningOp(), rewriter);
}

} // namespace

LogicalResult rewriteExpertLoop(const ExpertLoopMatch &loop, Operation *topk,
                                PatternRewriter &rewriter, bool requireCheck) {
  const ExpertLoopMatch *match = &loop;
  const FFNMatch &first = match->experts.front().ffn;
  for (const LoopExpert &e : match->experts)
    if (e.ffn.activation != first.activation || e.ffn.custom != first.custom ||
        static_cast<bool>(e.ffn.fc3) != static_cast<bool>(first.fc3) ||
        e.ffn.stackedFc1 != first.stackedFc1 ||
        e.ffn.stackedFc2 != first.stackedFc2 ||
        e.ffn.stackedFc3 != first.stackedFc3 ||
        e.ffn.stackedFc1Bias != first.stackedFc1Bias ||
        e.ffn.stackedFc2Bias != first.stackedFc2Bias ||
        e.ffn.fusedActivation != first.fusedActivation)
      return rewriter.notifyMatchFailure(topk, "experts differ in shape");
  if (first.stackedFc1)
    return raiseIndexedExperts(*match, rewriter, requireCheck);

  Location loc = match->output.getLoc();
  rewriter.setInsertionPoint(match->output.getDefiningOp());
  auto stack = [&](auto field, StringRef name) -> FailureOr<Value> {
    SmallVector<arith::ConstantOp> weights;
    for (const LoopExpert &e : match->experts)
      weights.push_back(e.ffn.*field);
    return stackExpertWeights(weights, name, loc, rewriter);
  };
  FailureOr<Value> fc1 = stack(&FFNMatch::fc1, "experts_fc1");
  FailureOr<Value> fc2 = stack(&FFNMatch::fc2, "experts_fc2");
  FailureOr<Value> fc3 =
      first.fc3 ? stack(&FFNMatch::fc3, "experts_fc3") : FailureOr<Value>();
  if (failed(fc1) || failed(fc2) || (first.fc3 && failed(fc3)))
    return rewriter.notifyMatchFailure(topk, "weights could not be stacked");

  LayerSpec spec;
  setRouting(spec, match->router);
  spec.input = match->x;
  spec.fc1 = *fc1;
  spec.fc3 = first.fc3 ? *fc3 : Value();
  spec.fc2 = *fc2;
  spec.activation = activationOf(first, rewriter.getContext());
  spec.requireCheck = requireCheck;
  return replaceByLayer(spec, match->router, match->output, topk, rewriter);
}

namespace {

/// Rewrites the complete per-expert loop of `router` into one moe.layer:
/// the Hugging Face form, else the loop over `torch.where(ids == e)` (raised
/// only where the check ran).
static LogicalResult raiseExpertLoop(const RouterMatch &router, Operation *topk,
                                     PatternRewriter &rewriter) {
  FailureOr<ExpertLoopMatch> match = matchExpertLoop(router, topk, rewriter);
  if (succeeded(match))
    return rewriteExpertLoop(*match, topk, rewriter);
  match = matchWhereLoop(router, topk, rewriter);
  if (failed(match))
    return failure();
  return rewriteExpertLoop(*match, topk, rewriter, /*requireCheck=*/true);
}



/// A loop routed by a TopK.
struct RaiseExpertLoop : OpRewritePattern<onnx::TopKOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(onnx::TopKOp topk,
                                PatternRewriter &rewriter) const override {
    FailureOr<RouterMatch> router = matchRouter(topk, rewriter);
    if (failed(router))
      return failure();
    return raiseExpertLoop(*router, topk, rewriter);
  }
};

/// A loop routed without a TopK (Phi-3.5-MoE's sparse mixer), found by its
/// expert mask.
struct RaiseSparseMixerLoop : OpRewritePattern<onnx::OneHotOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(onnx::OneHotOp oneHot,
                                PatternRewriter &rewriter) const override {
    FailureOr<RouterMatch> router =
        matchSparseMixer(skipNoOps(oneHot.getInputs()[0]), oneHot, rewriter);
    if (failed(router))
      return failure();
    return raiseExpertLoop(*router, oneHot, rewriter);
  }
};

} // namespace

void populateExpertLoopPatterns(RewritePatternSet &patterns) {
  patterns.add<RaiseExpertLoop, RaiseSparseMixerLoop>(patterns.getContext());
}

} // namespace mlir::moe::raise
