//===- ChoiceCapacity.cpp - raise GShard's top-k einsum form --------------===//
//
// GShard's top-2 gating with expert capacity (Lepikhin et al. 2020,
// Algorithm 2) as DeepSpeed-MoE, fairseq and fairscale write it: each
// choice j has its own one-hot mask, takes its place in its expert after
// every pair of the choices before it, and adds its own combine term:
//
//   m_j = one_hot(argmax_j, E)                                     [T, E]
//   loc_j = cumsum(m_j, tokens) - 1 + sum_{i<j} sum(m_i, tokens)   [T, E]
//   keep_j = m_j * (loc_j < C)                                     [T, E]
//   s_j = one_hot(sum(loc_j * keep_j, experts), C)                 [T, C]
//   combine = sum_j einsum('se,sc->sec', g_j * keep_j, s_j)
//   out = einsum('sec,ecm->sm', combine,
//                experts(einsum('sec,sm->ecm', bool(combine), x)))
//
// with the experts as in the Switch form (EinsumParts.h). That is moe.layer
// with capacity C and the `choice` policy. Its routing is `given`: the ids
// are the arg-maxes and the weights the per-token g_j the program computes,
// whatever it does to them (DeepSpeed renormalises the gates of the choices
// kept after the drops), since a dropped pair's term is zero whatever its
// g_j. Counting the earlier choices' kept pairs (`keep_i`) instead of all of
// them (`m_i`) keeps the same pairs: a choice's pairs can only be kept where
// every earlier choice's were. Raised only where the check on sample tokens
// ran and agreed.
//
//===----------------------------------------------------------------------===//

#include "passes/Raise/ChoiceCapacity.h"
#include "passes/Raise/EinsumParts.h"
#include "passes/Raise/Validation.h"
#include "mlir/IR/TypeUtilities.h"

#include <cmath>

namespace mlir::moe::raise {

namespace {

/// Where a [T, E] value holds each pair's place in its expert: the shift s
/// that makes `value + s` zero-based, and the earlier choices' masks whose
/// per-expert counts it adds.
struct Place {
  int64_t shift = 0;
  SmallVector<Value> earlier;
};

/// One choice (one term of the combine weights).
struct Choice {
  Value ids;      // [T] expert ids, an ArgMax over [T, E]
  Value mask;     // one_hot(ids, E)
  Value kept;     // mask * (place < limit)
  Value weight;   // g_j, [T] or [T, 1]
  Place place;    // of the capacity comparison
  int64_t limit;  // zero-based places below it are kept
  int64_t slots;  // depth of the slot one-hot
  SmallVector<Value> slotEarlier; // what the slot one-hot's place counts
};

struct Block {
  int64_t numTokens, numExperts;
  // Above every place and count of the block: T pairs per choice.
  int64_t placeBound;
};

/// The terms of a sum of onnx.Add (and onnx.Sum) ops.
void collectTerms(Value value, SmallVectorImpl<Value> &terms,
                  unsigned depth = 8) {
  value = skipFloatCasts(value);
  Operation *op = value.getDefiningOp();
  if (depth > 0 && isa_and_present<onnx::AddOp, onnx::SumOp>(op)) {
    for (Value operand : op->getOperands())
      collectTerms(operand, terms, depth - 1);
    return;
  }
  terms.push_back(value);
}

/// Whether `op` reduces over axis `axis` of a rank-2 value, keeping dims as
/// `keepdims` says.
bool reducesAxis(onnx::ReduceSumOp op, int64_t axis, bool keepdims) {
  std::optional<SmallVector<int64_t>> axes = axesOf(op, 1);
  auto keep = op->getAttrOfType<IntegerAttr>("keepdims");
  bool keeps = !keep || keep.getInt() != 0;
  return axes && axes->size() == 1 &&
         ((*axes)[0] == axis || (*axes)[0] == axis - 2) && keeps == keepdims;
}

/// The place `value` holds for the pairs of mask `mask`, multiplied only by
/// masks of `readers` (1 wherever the place is read).
std::optional<Place> placeOf(Value value, Value mask, ArrayRef<Value> readers,
                             const Block &block, unsigned depth = 8) {
  int64_t bound = block.placeBound;
  value = skipExactCasts(value, bound);
  Operation *op = value.getDefiningOp();
  if (!op || depth == 0)
    return std::nullopt;
  if (auto cumsum = dyn_cast<onnx::CumSumOp>(op)) {
    std::optional<int64_t> shift = tokenCumsumShift(cumsum);
    if (!shift || skipExactCasts(cumsum.getInputs()[0], 1) != mask)
      return std::nullopt;
    return Place{*shift, {}};
  }
  if (isa<onnx::AddOp, onnx::SubOp>(op)) {
    bool sub = isa<onnx::SubOp>(op);
    for (int i = 0; i < (sub ? 1 : 2); ++i) {
      Value other = op->getOperand(1 - i);
      std::optional<Place> place;
      if (std::optional<int64_t> offset = foldInteger(other)) {
        if (std::abs(*offset) > bound ||
            !(place = placeOf(op->getOperand(i), mask, readers, block,
                              depth - 1)))
          continue;
        place->shift += sub ? *offset : -*offset;
        return place;
      }
      // An earlier choice's count per expert: sum(mask_i, tokens), [1, E].
      auto count = skipExactCasts(other, bound).getDefiningOp<onnx::ReduceSumOp>();
      if (sub || !count || !reducesAxis(count, 0, /*keepdims=*/true) ||
          !(place = placeOf(op->getOperand(i), mask, readers, block,
                            depth - 1)))
        continue;
      place->earlier.push_back(skipExactCasts(count.getInputs()[0], 1));
      return place;
    }
    return std::nullopt;
  }
  if (isa<onnx::MulOp>(op))
    for (int i = 0; i < 2; ++i)
      if (llvm::is_contained(readers,
                             skipExactCasts(op->getOperand(1 - i), 1)))
        return placeOf(op->getOperand(i), mask, readers, block, depth - 1);
  return std::nullopt;
}

/// The kept mask `one_hot(ids, E) * (place < bound)` (or `<=`, or the
/// comparison flipped), into `choice`.
bool matchKept(Value value, Choice &choice, const Block &block) {
  choice.kept = skipExactCasts(value, 1);
  auto mul = choice.kept.getDefiningOp<onnx::MulOp>();
  if (!mul)
    return false;
  for (int i = 0; i < 2; ++i) {
    std::optional<OneHot> oneHot = matchOneHot(mul.getInputs()[i]);
    Operation *cmp = skipExactCasts(mul.getInputs()[1 - i], 1).getDefiningOp();
    if (!oneHot || oneHot->depth != block.numExperts ||
        !isa_and_present<onnx::LessOrEqualOp, onnx::LessOp,
                         onnx::GreaterOrEqualOp, onnx::GreaterOp>(cmp))
      continue;
    auto idsType = dyn_cast<RankedTensorType>(oneHot->indices.getType());
    auto argmax = skipNoOps(oneHot->indices).getDefiningOp<onnx::ArgMaxOp>();
    if (!idsType || idsType.getRank() != 1 || !argmax)
      continue;
    auto axis = argmax->getAttrOfType<IntegerAttr>("axis");
    auto keepdims = argmax->getAttrOfType<IntegerAttr>("keepdims");
    auto scores = dyn_cast<RankedTensorType>(argmax.getInputs()[0].getType());
    if (!axis || (axis.getInt() != 1 && axis.getInt() != -1) || !keepdims ||
        keepdims.getInt() != 0 || !scores || scores.getRank() != 2 ||
        scores.getDimSize(1) != block.numExperts)
      continue;
    bool flipped = isa<onnx::GreaterOrEqualOp, onnx::GreaterOp>(cmp);
    bool strict = isa<onnx::LessOp, onnx::GreaterOp>(cmp);
    choice.mask = oneHot->mask;
    std::optional<Place> place = placeOf(cmp->getOperand(flipped ? 1 : 0),
                                         choice.mask, {choice.mask}, block);
    std::optional<double> limit = foldNumber(cmp->getOperand(flipped ? 0 : 1));
    if (!place || !limit || std::fabs(*limit) > std::ldexp(1.0, 53))
      continue;
    // With z = place + shift: place <= b keeps z < floor(b) + 1 + shift,
    // place < b keeps z < ceil(b) + shift.
    choice.limit =
        static_cast<int64_t>(strict ? std::ceil(*limit) : std::floor(*limit) + 1) +
        place->shift;
    choice.place = *place;
    choice.ids = skipNoOps(oneHot->indices);
    return true;
  }
  return false;
}

/// The slot one-hot `one_hot(sum(place * kept, experts), D)` [T, D] of
/// `choice`: the zero-based place of each kept pair.
bool matchSlots(Value value, Choice &choice, const Block &block) {
  std::optional<OneHot> oneHot = matchOneHot(value);
  if (!oneHot)
    return false;
  int64_t bound = block.placeBound;
  Value placed = skipExactCasts(oneHot->indices, bound);
  // The two factors of sum(place * kept, experts), or of
  // einsum('se,se->s', place, kept).
  std::optional<std::pair<Value, Value>> factors;
  if (auto reduce = placed.getDefiningOp<onnx::ReduceSumOp>()) {
    auto mul = skipExactCasts(reduce.getInputs()[0], bound)
                   .getDefiningOp<onnx::MulOp>();
    if (reducesAxis(reduce, 1, /*keepdims=*/false) && mul)
      factors = std::make_pair(mul.getInputs()[0], mul.getInputs()[1]);
  } else if (auto einsum = placed.getDefiningOp<onnx::EinsumOp>()) {
    factors = einsumOperands(einsum, "te,te->t");
  }
  if (!factors)
    return false;
  for (auto [place, kept] :
       {*factors, std::make_pair(factors->second, factors->first)}) {
    if (skipExactCasts(kept, 1) != choice.kept)
      continue;
    std::optional<Place> at =
        placeOf(place, choice.mask, {choice.mask, choice.kept}, block);
    if (at && at->shift == 0) {
      choice.slots = oneHot->depth;
      choice.slotEarlier = at->earlier;
      return true;
    }
  }
  return false;
}

/// A per-token factor [T] or [T, 1] of float type.
bool isTokenFactor(Value value, const Block &block) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && isa<FloatType>(type.getElementType()) &&
         type.getDimSize(0) == block.numTokens &&
         (type.getRank() == 1 ||
          (type.getRank() == 2 && type.getDimSize(1) == 1));
}

/// g * kept [T, E]: einsum('s,se->se', g, kept) or Mul(g [T, 1], kept).
bool matchWeightedKept(Value value, Choice &choice, const Block &block) {
  value = skipFloatCasts(value);
  if (auto einsum = value.getDefiningOp<onnx::EinsumOp>()) {
    std::optional<std::pair<Value, Value>> operands =
        einsumOperands(einsum, "t,te->te");
    if (!operands || !isTokenFactor(operands->first, block))
      return false;
    choice.weight = operands->first;
    return matchKept(operands->second, choice, block);
  }
  if (auto mul = value.getDefiningOp<onnx::MulOp>())
    for (int i = 0; i < 2; ++i) {
      auto type = dyn_cast<RankedTensorType>(mul.getInputs()[i].getType());
      if (!type || type.getRank() != 2 || !isTokenFactor(mul.getInputs()[i], block))
        continue;
      choice.weight = mul.getInputs()[i];
      if (matchKept(mul.getInputs()[1 - i], choice, block))
        return true;
    }
  return false;
}

/// One term of the combine weights: einsum('se,sc->sec', g * kept, slots).
bool matchTerm(Value term, Choice &choice, const Block &block) {
  auto einsum = term.getDefiningOp<onnx::EinsumOp>();
  std::optional<std::pair<Value, Value>> operands =
      einsum ? einsumOperands(einsum, "te,tc->tec") : std::nullopt;
  return operands && matchWeightedKept(operands->first, choice, block) &&
         matchSlots(operands->second, choice, block);
}

/// Whether the dispatch mask `value` is `combine != 0` (a cast to bool,
/// back to a float type).
bool isNonzeroOf(Value value, Value combine) {
  value = skipNoOps(value);
  bool tested = false;
  while (auto cast = value.getDefiningOp<onnx::CastOp>()) {
    Type to = getElementTypeOrSelf(value);
    if (to.isInteger(1))
      tested = true;
    else if (!isa<FloatType>(to))
      return false;
    value = skipNoOps(cast.getInputs()[0]);
    if (tested)
      break;
  }
  return tested && skipFloatCasts(value) == skipFloatCasts(combine);
}

/// Whether `earlier` counts each choice of `before` once, by its mask or
/// by its kept mask.
bool countsEach(ArrayRef<Value> earlier, ArrayRef<Choice *> before) {
  if (earlier.size() != before.size())
    return false;
  SmallVector<bool> counted(before.size(), false);
  for (Value value : earlier) {
    const auto *it = llvm::find_if(before, [&](Choice *c) {
      return value == c->mask || value == c->kept;
    });
    if (it == before.end() || counted[it - before.begin()])
      return false;
    counted[it - before.begin()] = true;
  }
  return true;
}

/// `values` [T] or [T, 1] as the columns of one [T, k] value of `element`,
/// cast to it where they are of another float type.
Value columns(ArrayRef<Value> values, Type element, Location loc,
              PatternRewriter &rewriter) {
  SmallVector<Value> parts;
  int64_t T = cast<RankedTensorType>(values.front().getType()).getDimSize(0);
  for (Value v : values) {
    Value column = reshapeOp(v, {T, 1}, loc, rewriter);
    if (getElementTypeOrSelf(column) != element)
      column = onnx::CastOp::create(
                   rewriter, loc,
                   TypeRange{RankedTensorType::get({T, 1}, element)},
                   ValueRange{column},
                   {rewriter.getNamedAttr(
                       "to", rewriter.getI64IntegerAttr(*onnxTypeCode(element)))})
                   .getOutputs()[0];
    parts.push_back(column);
  }
  auto type = RankedTensorType::get({T, static_cast<int64_t>(parts.size())},
                                    element);
  return onnx::ConcatOp::create(
             rewriter, loc, TypeRange{type}, parts,
             {rewriter.getNamedAttr("axis", rewriter.getI64IntegerAttr(1))})
      .getOutputs()[0];
}

/// Erases the op of `value` if nothing uses it, and then so the ops of its
/// operands that only it used, down to values the program had.
void eraseUnusedChain(Value value, PatternRewriter &rewriter) {
  Operation *op = value.getDefiningOp();
  if (!op || !op->use_empty() || !isa<onnx::ConcatOp, onnx::ReshapeOp,
                                      onnx::CastOp, arith::ConstantOp>(op))
    return;
  SmallVector<Value> operands(op->getOperands());
  rewriter.eraseOp(op);
  for (Value operand : operands)
    eraseUnusedChain(operand, rewriter);
}

/// Rewrites a GShard top-k einsum block with capacity into one moe.layer.
struct RaiseChoiceCapacity : OpRewritePattern<onnx::EinsumOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(onnx::EinsumOp combine,
                                PatternRewriter &rewriter) const override {
    std::optional<std::pair<Value, Value>> combined =
        einsumOperands(combine, kCombine);
    if (!combined)
      return failure();
    auto [weights, expertOutputs] = *combined;
    SmallVector<Value> terms;
    collectTerms(weights, terms);
    if (terms.size() < 2)
      return rewriter.notifyMatchFailure(
          combine, "combine weights are not a sum of per-choice terms");
    FailureOr<EinsumBlock> einsumBlock =
        matchEinsumBlock(expertOutputs, combine, rewriter);
    if (failed(einsumBlock))
      return failure();
    if (!isNonzeroOf(einsumBlock->mask, weights))
      return rewriter.notifyMatchFailure(
          combine, "the dispatch mask is not combine != 0");
    Value x = einsumBlock->tokens;
    auto xType = dyn_cast<RankedTensorType>(x.getType());
    auto weightsType = dyn_cast<RankedTensorType>(weights.getType());
    if (!xType || xType.getRank() != 2 || !xType.hasStaticShape() ||
        !weightsType || weightsType.getRank() != 3 ||
        weightsType.getDimSize(0) != xType.getDimSize(0) ||
        ShapedType::isDynamic(weightsType.getDimSize(1)))
      return rewriter.notifyMatchFailure(combine,
                                         "tokens are not a static [T, H]");
    if (!onnxTypeCode(xType.getElementType()))
      return rewriter.notifyMatchFailure(combine,
                                         "tokens of a type the layer lacks");
    int64_t T = xType.getDimSize(0);
    Block block{T, weightsType.getDimSize(1),
                T * static_cast<int64_t>(terms.size()) + 1};

    SmallVector<Choice> choices(terms.size());
    for (auto [term, choice] : llvm::zip(terms, choices))
      if (!matchTerm(term, choice, block))
        return rewriter.notifyMatchFailure(
            combine, "a combine term is not einsum('se,sc->sec', g * "
                     "one_hot(argmax) * (place < C), one_hot(place))");
    // Choice j counts the pairs of choices 0..j-1 (all, or those kept).
    SmallVector<Choice *> order(choices.size(), nullptr);
    for (Choice &choice : choices) {
      size_t j = choice.place.earlier.size();
      if (j >= order.size() || order[j])
        return rewriter.notifyMatchFailure(
            combine, "the choices' places do not count the choices before "
                     "each once");
      order[j] = &choice;
    }
    for (size_t j = 0; j < order.size(); ++j) {
      ArrayRef<Choice *> before = ArrayRef(order).take_front(j);
      if (!countsEach(order[j]->place.earlier, before) ||
          !countsEach(order[j]->slotEarlier, before))
        return rewriter.notifyMatchFailure(
            combine, "a choice's places do not count each earlier choice "
                     "once");
    }
    int64_t limit = order.front()->limit;
    int64_t capacity = limit;
    for (Choice *choice : order) {
      if (choice->limit != limit)
        return rewriter.notifyMatchFailure(
            combine, "the choices are kept by different capacities");
      capacity = std::min(capacity, choice->slots);
    }
    if (capacity < 1)
      return rewriter.notifyMatchFailure(combine, "capacity below 1");

    // The router the first choice's arg-max reads, computed from x.
    auto argmax = order.front()->ids.getDefiningOp<onnx::ArgMaxOp>();
    Value logits = findRouterLogits(argmax.getInputs()[0]);
    if (!logits || matchRouterInput(logits) != x ||
        cast<RankedTensorType>(logits.getType()).getDimSize(1) !=
            block.numExperts)
      return rewriter.notifyMatchFailure(
          combine, "no router logits x @ W [T, E] upstream of the choices");

    Location loc = combine.getLoc();
    rewriter.setInsertionPoint(combine);
    LayerSpec spec;
    spec.input = x;
    spec.logits = logits;
    spec.k = static_cast<int64_t>(order.size());
    spec.capacity = capacity;
    spec.dropPolicy = DropPolicy::Choice;
    spec.selection = SelectionMethod::Given;
    spec.requireCheck = true;
    int64_t width = 0;
    if (failed(setExpertWeights(spec, einsumBlock->experts, x,
                                block.numExperts, width, loc, rewriter)))
      return rewriter.notifyMatchFailure(
          combine, "expert weights do not fit the tokens and experts");
    SmallVector<Value> ids, gates;
    for (Choice *choice : order) {
      ids.push_back(choice->ids);
      gates.push_back(choice->weight);
    }
    // ArgMax gives int64 ids.
    spec.routedIds = columns(ids, rewriter.getI64Type(), loc, rewriter);
    spec.routedWeights =
        columns(gates, xType.getElementType(), loc, rewriter);
    if (succeeded(replaceCombine(combine, spec, width, rewriter)))
      return success();
    for (Value built : {spec.routedIds, spec.routedWeights})
      eraseUnusedChain(built, rewriter);
    return failure();
  }
};

} // namespace

void populateChoiceCapacityPatterns(RewritePatternSet &patterns) {
  patterns.add<RaiseChoiceCapacity>(patterns.getContext());
}

} // namespace mlir::moe::raise
