//===- Matchers.cpp - recognising MoE pieces in onnx programs -------------===//

#include "passes/Raise/Matchers.h"
#include "passes/Raise/ElementwiseActivation.h"
#include "passes/Raise/Validation.h"
#include "dialects/onnx/IR/ONNXBuilders.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/IR/Verifier.h"
#include "passes/ONNXFolding.h"
#include "passes/Raise/IndexArithmetic.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <cmath>
#include <cstring>

namespace mlir::moe::raise {

Value skipNoOps(Value value) {
  while (Operation *op = value.getDefiningOp()) {
    // Identity, a Cast to the same element type, a Reshape to the same
    // static shape.
    Type in = op->getNumOperands() ? op->getOperand(0).getType() : Type();
    Type out = op->getNumResults() ? op->getResult(0).getType() : Type();
    bool noOp = isa<onnx::IdentityOp>(op) ||
                (isa<onnx::CastOp>(op) &&
                 getElementTypeOrSelf(in) == getElementTypeOrSelf(out)) ||
                (isa<onnx::ReshapeOp>(op) && in == out &&
                 cast<ShapedType>(in).hasStaticShape());
    if (!noOp)
      break;
    value = op->getOperand(0);
  }
  return value;
}

Value skipReshapes(Value value) {
  value = skipNoOps(value);
  while (Operation *op = value.getDefiningOp()) {
    bool sameShapeExpand = isa<onnx::ExpandOp>(op) &&
                           op->getOperand(0).getType() == value.getType();
    if (!isa<onnx::UnsqueezeOp, onnx::SqueezeOp, onnx::ReshapeOp>(op) &&
        !sameShapeExpand)
      break;
    value = skipNoOps(op->getOperand(0));
  }
  return value;
}

bool hasIntAttr(Operation *op, StringRef name, int64_t otherwise,
                int64_t want) {
  auto attr = op->getAttrOfType<IntegerAttr>(name);
  return (attr ? attr.getInt() : otherwise) == want;
}

arith::ConstantOp constantOp(Value value) {
  auto constant = skipNoOps(value).getDefiningOp<arith::ConstantOp>();
  if (!constant || !isa<RankedTensorType>(constant.getType()))
    return {};
  return constant;
}

std::optional<SmallVector<int64_t>> constantInts(Value value) {
  std::optional<onnx_lowering::ConstTensor> constant =
      onnx_lowering::getConstant(skipNoOps(value));
  if (!constant || constant->isFloat())
    return std::nullopt;
  return constant->ints;
}

std::optional<int64_t> constantInt(Value value) {
  std::optional<SmallVector<int64_t>> ints = constantInts(value);
  if (!ints)
    // Exports without constant folding compute it (a Reshape of a
    // constant, a Gather of a static extent).
    return evaluateScalar(value);
  if (ints->size() != 1)
    return std::nullopt;
  return ints->front();
}

std::optional<double> constantFloat(Value value) {
  std::optional<onnx_lowering::ConstTensor> constant =
      onnx_lowering::getConstant(skipNoOps(value));
  if (!constant || !constant->isFloat() || constant->size() != 1)
    return std::nullopt;
  return constant->floats.front();
}

bool isZeroConstant(Value value) {
  // Zeros stay zeros through any cast (a bf16 zeros made in f32: opset
  // 17's ConstantOfShape has no bf16).
  if (auto cast = skipNoOps(value).getDefiningOp<onnx::CastOp>())
    return isZeroConstant(cast.getInputs()[0]);
  // ConstantOfShape(shape) with a zero (or the default) fill.
  if (auto fill = definedBy<onnx::ConstantOfShapeOp>(value)) {
    auto fillValue = fill->getAttrOfType<DenseElementsAttr>("value");
    if (!fillValue)
      return true;
    if (isa<FloatType>(fillValue.getElementType()))
      return llvm::all_of(fillValue.getValues<APFloat>(),
                          [](const APFloat &v) { return v.isZero(); });
    return llvm::all_of(fillValue.getValues<APInt>(),
                        [](const APInt &v) { return v.isZero(); });
  }
  arith::ConstantOp constant = constantOp(value);
  if (!constant)
    return false;
  // Importers keep large constants as resources: compare the bytes (so a
  // -0.0 does not count, which only makes matching stricter).
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(constant.getValue()))
    return llvm::all_of(resource.getData(), [](char c) { return c == 0; });
  auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
  if (!dense)
    return false;
  if (isa<FloatType>(dense.getElementType()))
    return llvm::all_of(dense.getValues<APFloat>(),
                        [](const APFloat &v) { return v.isZero(); });
  return llvm::all_of(dense.getValues<APInt>(),
                      [](const APInt &v) { return v.isZero(); });
}

bool dependsOn(Value value, Value root, unsigned depth) {
  SmallVector<std::pair<Value, unsigned>> work{{value, 0}};
  llvm::SmallPtrSet<Operation *, 32> seen;
  while (!work.empty()) {
    auto [v, d] = work.pop_back_val();
    if (v == root)
      return true;
    Operation *op = v.getDefiningOp();
    if (!op || d >= depth || !seen.insert(op).second)
      continue;
    for (Value operand : op->getOperands())
      work.push_back({operand, d + 1});
  }
  return false;
}

bool movedFrom(Value value, Value root, unsigned depth) {
  for (unsigned d = 0; d <= depth; ++d) {
    if (value == root)
      return true;
    Operation *op = value.getDefiningOp();
    if (!isa_and_nonnull<onnx::ReshapeOp, onnx::FlattenOp, onnx::SqueezeOp,
                         onnx::UnsqueezeOp, onnx::TransposeOp, onnx::CastOp,
                         onnx::IdentityOp, onnx::SliceOp, onnx::ExpandOp,
                         onnx::TileOp, onnx::GatherOp, onnx::GatherNDOp,
                         onnx::GatherElementsOp, onnx::SplitOp>(op))
      return false;
    value = op->getOperand(0);
  }
  return false;
}

/// Whether `user` only reads the shape of what it is given (an exporter's
/// Shape of a tensor, possibly through slicing and reshaping).
static bool readsOnlyShape(Operation *user, unsigned depth = 4) {
  if (isa<onnx::ShapeOp>(user))
    return true;
  if (depth == 0 ||
      !isa<onnx::SliceOp, onnx::ReshapeOp, onnx::CastOp, onnx::UnsqueezeOp,
           onnx::SqueezeOp, onnx::TransposeOp>(user))
    return false;
  return llvm::all_of(user->getUsers(), [&](Operation *next) {
    return readsOnlyShape(next, depth - 1);
  });
}

/// The one user of `value` that reads its elements, if there is one.
static Operation *soleValueUser(Value value) {
  Operation *found = nullptr;
  for (Operation *user : value.getUsers()) {
    if (readsOnlyShape(user))
      continue;
    if (found && found != user)
      return nullptr;
    found = user;
  }
  return found;
}

Value matchSumOf(ArrayRef<Value> terms) {
  llvm::SmallPtrSet<Value, 16> termSet(terms.begin(), terms.end());
  // Climb from one term through the chain of Adds of terms that use it
  // (uses that only read its shape do not count; what the block adds
  // afterwards, a shared expert say, is not part of the sum).
  // From the term computed first: a later one's Add reads a partial sum.
  Value sum = terms.front();
  for (Value term : terms) {
    Operation *def = term.getDefiningOp(), *first = sum.getDefiningOp();
    if (def && first && def->getBlock() == first->getBlock() &&
        def->isBeforeInBlock(first))
      sum = term;
  }
  while (auto add = dyn_cast_or_null<onnx::AddOp>(soleValueUser(sum))) {
    Value other = add.getInputs()[add.getInputs()[0] == sum ? 1 : 0];
    if (!termSet.contains(other) && !isZeroConstant(other))
      break;
    sum = add.getOutputs()[0];
  }
  // Every leaf of the chain must be a term or zero, each term once.
  llvm::SmallPtrSet<Value, 16> found;
  SmallVector<Value> work{sum};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (termSet.contains(v)) {
      if (!found.insert(v).second)
        return {};
      continue;
    }
    if (isZeroConstant(v))
      continue;
    auto add = v.getDefiningOp<onnx::AddOp>();
    if (!add)
      return {};
    work.append(add.getInputs().begin(), add.getInputs().end());
  }
  return found.size() == termSet.size() ? sum : Value();
}

//===----------------------------------------------------------------------===//
// Router
//===----------------------------------------------------------------------===//

/// The single user of `value` of type `OpT`, looking through no-op casts.
template <typename OpT> static OpT soleUser(Value value) {
  OpT found;
  for (Operation *user : value.getUsers()) {
    if (isa<onnx::CastOp, onnx::IdentityOp>(user) &&
        skipNoOps(user->getResult(0)) == value)
      if (OpT inner = soleUser<OpT>(user->getResult(0))) {
        if (found && found != inner)
          return {};
        found = inner;
        continue;
      }
    if (auto op = dyn_cast<OpT>(user)) {
      if (found && found != op)
        return {};
      found = op;
    }
  }
  return found;
}

/// Whether `reduce` sums its input over the last axis, keeping it.
static bool sumsLastAxisKeepingDims(Operation *reduce) {
  auto keep = reduce->getAttrOfType<IntegerAttr>("keepdims");
  if (keep && keep.getInt() != 1)
    return false;
  if (reduce->getNumOperands() < 2)
    return false;
  std::optional<SmallVector<int64_t>> axes =
      constantInts(reduce->getOperand(1));
  int64_t rank =
      cast<RankedTensorType>(reduce->getOperand(0).getType()).getRank();
  return axes && axes->size() == 1 &&
         ((*axes)[0] == -1 || (*axes)[0] == rank - 1);
}

FailureOr<RouterMatch> matchSoftmaxTopK(onnx::TopKOp topk,
                                        PatternRewriter &rewriter) {
  RouterMatch match;
  match.topk = topk;
  auto largest = topk->getAttrOfType<IntegerAttr>("largest");
  auto axis = topk->getAttrOfType<IntegerAttr>("axis");
  if ((largest && largest.getInt() != 1) ||
      (axis && axis.getInt() != -1 && axis.getInt() != 1))
    return rewriter.notifyMatchFailure(topk, "not a top-k over the experts");
  // A bf16 or f16 model widens its scores around the softmax (Hugging
  // Face's softmax(..., dtype=float)): the ONNX exporter casts after the
  // softmax, TorchScript before it. moe.router takes the narrow logits and
  // routes them in f32, as the model means to.
  auto skipFloatCast = [](Value value) {
    value = skipNoOps(value);
    auto cast = value.getDefiningOp<onnx::CastOp>();
    if (!cast)
      return value;
    auto from = dyn_cast<FloatType>(getElementTypeOrSelf(cast.getInputs()[0]));
    auto to = dyn_cast<FloatType>(getElementTypeOrSelf(value));
    // Only widening: a router narrowed on purpose keeps its cast.
    if (from && to && from.getWidth() < to.getWidth())
      return skipNoOps(cast.getInputs()[0]);
    return value;
  };
  auto softmax = definedBy<onnx::SoftmaxOp>(skipFloatCast(topk.getInputs()[0]));
  if (!softmax)
    return rewriter.notifyMatchFailure(topk, "scores are not a softmax");
  auto logitsType =
      dyn_cast<RankedTensorType>(softmax.getInputs()[0].getType());
  if (!logitsType || logitsType.getRank() != 2 || !logitsType.hasStaticShape())
    return rewriter.notifyMatchFailure(topk, "logits are not a static [T, E]");
  auto softmaxAxis = softmax->getAttrOfType<IntegerAttr>("axis");
  if (softmaxAxis && softmaxAxis.getInt() != -1 && softmaxAxis.getInt() != 1)
    return rewriter.notifyMatchFailure(topk, "softmax is not over experts");
  std::optional<int64_t> k = constantInt(topk.getInputs()[1]);
  if (!k)
    return rewriter.notifyMatchFailure(topk, "k is not a constant");
  match.logits = skipFloatCast(softmax.getInputs()[0]);
  match.scoring = ScoringFunction::Softmax;
  match.k = *k;
  match.numExperts = logitsType.getDimSize(1);
  match.indices = topk.getOutputs()[1];
  match.weights = topk.getOutputs()[0];

  // Renormalisation: values / ReduceSum(values, -1, keepdims), or the L1
  // norm (DBRX's), which is the sum of these positive scores.
  Value values = topk.getOutputs()[0];
  if (auto div = soleUser<onnx::DivOp>(values)) {
    Operation *sum = skipNoOps(div.getInputs()[1]).getDefiningOp();
    if (skipNoOps(div.getInputs()[0]) == values &&
        isa_and_nonnull<onnx::ReduceSumOp, onnx::ReduceL1Op>(sum) &&
        skipNoOps(sum->getOperand(0)) == values &&
        sumsLastAxisKeepingDims(sum)) {
      match.normalize = true;
      match.weights = div.getOutputs()[0];
    }
  }
  return match;
}

/// Whether `op` works on the last axis of a rank-`rank` tensor.
static bool onLastAxis(Operation *op, StringRef attr, int64_t rank) {
  auto axis = op->getAttrOfType<IntegerAttr>(attr);
  return !axis || axis.getInt() == -1 || axis.getInt() == rank - 1;
}

/// The constant axes of a reduction (the ONNX 13+ `axes` input).
static std::optional<SmallVector<int64_t>> reducedAxes(Operation *reduce) {
  if (reduce->getNumOperands() < 2)
    return std::nullopt;
  return constantInts(reduce->getOperand(1));
}

/// Whether `reduce` reduces exactly the last axis of its rank-`rank` input.
static bool reducesLastAxis(Operation *reduce, int64_t rank) {
  std::optional<SmallVector<int64_t>> axes = reducedAxes(reduce);
  return axes && axes->size() == 1 &&
         ((*axes)[0] == -1 || (*axes)[0] == rank - 1);
}

/// `a + constant` (either order): the non-constant operand and the constant.
static std::optional<std::pair<Value, arith::ConstantOp>>
matchAddConstant(Value value) {
  auto add = definedBy<onnx::AddOp>(value);
  if (!add)
    return std::nullopt;
  for (int i = 0; i < 2; ++i)
    if (arith::ConstantOp c = constantOp(add.getInputs()[1 - i]))
      return std::make_pair(add.getInputs()[i], c);
  return std::nullopt;
}

/// The group-limited selection whose mask decides `cond`: fills `router`'s
/// group fields from the group TopK and the group scores of `biased`.
/// `keptWhenTrue` says whether `cond` is true for experts of kept groups.
/// The groups must cover `router.numExperts`, which the caller has set.
static LogicalResult matchGroupMask(Value cond, Value biased,
                                    RouterMatch &router, bool &keptWhenTrue) {
  // Walk back to ScatterElements(zeros, groupIds, ones) through shape ops
  // and Nots.
  int nots = 0;
  Value v = cond;
  onnx::ScatterElementsOp scatter;
  while (Operation *op = v.getDefiningOp()) {
    if ((scatter = dyn_cast<onnx::ScatterElementsOp>(op)))
      break;
    if (isa<onnx::NotOp>(op))
      ++nots;
    else if (!isa<onnx::CastOp, onnx::ReshapeOp, onnx::ExpandOp,
                  onnx::UnsqueezeOp, onnx::IdentityOp>(op))
      return failure();
    v = op->getOperand(0);
  }
  if (!scatter || !isZeroConstant(scatter.getInputs()[0]))
    return failure();
  keptWhenTrue = nots % 2 == 0;
  auto groupTopK = scatter.getInputs()[1].getDefiningOp<onnx::TopKOp>();
  if (!groupTopK || groupTopK.getOutputs()[1] != scatter.getInputs()[1])
    return failure();
  std::optional<int64_t> groupK = constantInt(groupTopK.getInputs()[1]);
  auto groupsType =
      dyn_cast<RankedTensorType>(groupTopK.getInputs()[0].getType());
  if (!groupK || !groupsType || groupsType.getRank() != 2)
    return failure();
  // Group scores: ReduceSum of the top 2, or ReduceMax, over each group of
  // Reshape(biased, [T, G, E / G]).
  Value grouped;
  Value groupScores = skipNoOps(groupTopK.getInputs()[0]);
  if (auto sum = groupScores.getDefiningOp<onnx::ReduceSumOp>()) {
    auto top2 = sum.getInputs()[0].getDefiningOp<onnx::TopKOp>();
    if (!top2 || top2.getOutputs()[0] != sum.getInputs()[0] ||
        constantInt(top2.getInputs()[1]) != 2 || !reducesLastAxis(sum, 3) ||
        !onLastAxis(top2, "axis", 3))
      return failure();
    grouped = top2.getInputs()[0];
    router.groupScore = GroupScore::Top2Sum;
  } else if (auto max = groupScores.getDefiningOp<onnx::ReduceMaxOp>()) {
    grouped = max.getInputs()[0];
    router.groupScore = GroupScore::Max;
  } else {
    return failure();
  }
  auto reshape = grouped.getDefiningOp<onnx::ReshapeOp>();
  auto groupedType = dyn_cast<RankedTensorType>(grouped.getType());
  if (!reshape || skipNoOps(reshape.getInputs()[0]) != skipNoOps(biased) ||
      !groupedType || groupedType.getRank() != 3 ||
      !groupedType.hasStaticShape() ||
      groupedType.getDimSize(1) * groupedType.getDimSize(2) !=
          router.numExperts)
    return failure();
  router.numGroups = groupedType.getDimSize(1);
  router.groupTopk = *groupK;
  return success();
}

FailureOr<RouterMatch> matchSigmoidTopK(onnx::TopKOp topk,
                                        PatternRewriter &rewriter) {
  RouterMatch match;
  match.topk = topk;
  auto largest = topk->getAttrOfType<IntegerAttr>("largest");
  if ((largest && largest.getInt() != 1) || !onLastAxis(topk, "axis", 2))
    return rewriter.notifyMatchFailure(topk, "not a top-k over the experts");
  std::optional<int64_t> k = constantInt(topk.getInputs()[1]);
  if (!k)
    return rewriter.notifyMatchFailure(topk, "k is not a constant");
  match.k = *k;

  // Selection keys: [Where(mask, c, s + bias)] over s + bias. The mask is
  // matched once the logits give the number of experts, which its groups
  // must cover.
  Value keys = skipNoOps(topk.getInputs()[0]);
  Value biased = keys;
  auto where = keys.getDefiningOp<onnx::WhereOp>();
  bool constFirst = false;
  if (where) {
    ValueRange in = where.getInputs();
    constFirst = static_cast<bool>(constantOp(in[1]));
    biased = skipNoOps(in[constFirst ? 2 : 1]);
  }
  Value scores = biased;
  if (std::optional<std::pair<Value, arith::ConstantOp>> add =
          matchAddConstant(biased)) {
    scores = skipNoOps(add->first);
    match.bias = add->second;
  }
  if (auto sigmoid = scores.getDefiningOp<onnx::SigmoidOp>()) {
    match.scoring = ScoringFunction::Sigmoid;
    match.logits = sigmoid.getInputs()[0];
  } else if (auto softmax = scores.getDefiningOp<onnx::SoftmaxOp>()) {
    if (!onLastAxis(softmax, "axis", 2))
      return rewriter.notifyMatchFailure(topk, "softmax is not over experts");
    match.scoring = ScoringFunction::Softmax;
    match.logits = softmax.getInputs()[0];
  } else {
    return rewriter.notifyMatchFailure(topk, "no sigmoid or softmax scores");
  }
  auto logitsType = dyn_cast<RankedTensorType>(match.logits.getType());
  if (!logitsType || logitsType.getRank() != 2 || !logitsType.hasStaticShape())
    return rewriter.notifyMatchFailure(topk, "logits are not a static [T, E]");
  match.numExperts = logitsType.getDimSize(1);
  if (match.bias &&
      cast<RankedTensorType>(match.bias.getType()).getNumElements() !=
          match.numExperts)
    return rewriter.notifyMatchFailure(topk, "bias is not one per expert");
  if (where) {
    ValueRange in = where.getInputs();
    std::optional<double> masked = constantFloat(in[constFirst ? 1 : 2]);
    bool keptWhenTrue;
    if (!masked || failed(matchGroupMask(in[0], biased, match, keptWhenTrue)))
      return rewriter.notifyMatchFailure(where, "not a group-limited mask");
    // The masked constant must be what dropped groups get.
    if (keptWhenTrue == constFirst)
      return rewriter.notifyMatchFailure(where, "group mask is inverted");
    match.maskedScore = *masked;
  }
  match.indices = topk.getOutputs()[1];

  // Weights: the unbiased scores of the chosen experts, [normalised],
  // [scaled].
  auto gathered = soleUser<onnx::GatherElementsOp>(match.indices);
  if (!gathered || skipNoOps(gathered.getInputs()[0]) != scores ||
      !onLastAxis(gathered, "axis", 2))
    return rewriter.notifyMatchFailure(topk, "weights are not the scores");
  match.weights = gathered.getOutputs()[0];
  if (auto div = soleUser<onnx::DivOp>(match.weights)) {
    std::optional<std::pair<Value, arith::ConstantOp>> plusEps =
        matchAddConstant(div.getInputs()[1]);
    auto sum = plusEps ? definedBy<onnx::ReduceSumOp>(plusEps->first)
                       : definedBy<onnx::ReduceSumOp>(div.getInputs()[1]);
    std::optional<double> eps =
        plusEps ? constantFloat(plusEps->second) : std::optional<double>(0);
    if (sum && skipNoOps(sum.getInputs()[0]) == match.weights &&
        sumsLastAxisKeepingDims(sum) && eps && *eps >= 0 && *eps <= 1e-6) {
      match.normalize = true;
      match.weights = div.getOutputs()[0];
    }
  }
  if (auto mul = soleUser<onnx::MulOp>(match.weights))
    for (int i = 0; i < 2; ++i)
      if (skipNoOps(mul.getInputs()[i]) == match.weights)
        if (std::optional<double> scale = constantFloat(mul.getInputs()[1 - i]);
            scale && *scale > 0) {
          match.scalingFactor = *scale;
          match.weights = mul.getOutputs()[0];
          break;
        }
  return match;
}

FailureOr<RouterMatch> matchTopKSoftmax(onnx::TopKOp topk,
                                        PatternRewriter &rewriter) {
  auto largest = topk->getAttrOfType<IntegerAttr>("largest");
  auto logitsType = dyn_cast<RankedTensorType>(topk.getInputs()[0].getType());
  if ((largest && largest.getInt() != 1) || !logitsType ||
      logitsType.getRank() != 2 || !logitsType.hasStaticShape() ||
      !onLastAxis(topk, "axis", 2))
    return rewriter.notifyMatchFailure(topk, "not a top-k over the experts");
  auto softmax = soleUser<onnx::SoftmaxOp>(topk.getOutputs()[0]);
  if (!softmax || !onLastAxis(softmax, "axis", 2))
    return rewriter.notifyMatchFailure(topk, "chosen logits are not a softmax");
  std::optional<int64_t> k = constantInt(topk.getInputs()[1]);
  if (!k)
    return rewriter.notifyMatchFailure(topk, "k is not a constant");
  RouterMatch match;
  match.topk = topk;
  match.logits = skipNoOps(topk.getInputs()[0]);
  match.scoring = ScoringFunction::Softmax;
  match.k = *k;
  match.numExperts = logitsType.getDimSize(1);
  match.normalize = true;
  match.indices = topk.getOutputs()[1];
  match.weights = softmax.getOutputs()[0];
  return match;
}

/// Whether `value` is -inf everywhere (a constant, or ConstantOfShape).
static bool isMinusInfinity(Value value) {
  auto isMinusInf = [](double v) { return std::isinf(v) && v < 0; };
  if (auto fill = definedBy<onnx::ConstantOfShapeOp>(value)) {
    auto attr = fill->getAttrOfType<DenseFPElementsAttr>("value");
    return attr && attr.getNumElements() == 1 &&
           isMinusInf((*attr.getValues<APFloat>().begin()).convertToDouble());
  }
  std::optional<onnx_lowering::ConstTensor> constant =
      onnx_lowering::foldConstantExpression(value);
  return constant && constant->isFloat() && constant->size() > 0 &&
         llvm::all_of(constant->floats, isMinusInf);
}

/// `Softmax(Where(Greater((max - l) / Max(|l|, max), 2 eps), -inf, s))`
/// gathered at `choice`, where s is l with the earlier picks masked: the
/// 2 eps.
static std::optional<double> matchMixerWeight(Value weight, Value choice,
                                              Value masked, Value logits) {
  auto gather = definedBy<onnx::GatherElementsOp>(weight);
  auto softmax =
      gather ? definedBy<onnx::SoftmaxOp>(gather.getInputs()[0]) : nullptr;
  auto where =
      softmax ? definedBy<onnx::WhereOp>(softmax.getInputs()[0]) : nullptr;
  auto greater =
      where ? definedBy<onnx::GreaterOp>(where.getInputs()[0]) : nullptr;
  if (!greater || skipNoOps(gather.getInputs()[1]) != skipNoOps(choice) ||
      skipNoOps(where.getInputs()[2]) != skipNoOps(masked) ||
      !isMinusInfinity(where.getInputs()[1]) ||
      !dependsOn(greater.getInputs()[0], logits, 4))
    return std::nullopt;
  return constantFloat(greater.getInputs()[1]);
}

FailureOr<RouterMatch> matchSparseMixer(Value ids, Operation *anchor,
                                        PatternRewriter &rewriter) {
  auto concatIds = definedBy<onnx::ConcatOp>(ids);
  if (!concatIds || concatIds.getInputs().size() != 2)
    return rewriter.notifyMatchFailure(anchor, "ids are not two picks");
  auto first = definedBy<onnx::ArgMaxOp>(concatIds.getInputs()[0]);
  auto second = definedBy<onnx::ArgMaxOp>(concatIds.getInputs()[1]);
  auto scatter = second
                     ? definedBy<onnx::ScatterElementsOp>(second.getInputs()[0])
                     : nullptr;
  if (!first || !scatter)
    return rewriter.notifyMatchFailure(anchor, "ids are not two arg-maxes");
  Value logits = skipNoOps(first.getInputs()[0]);
  auto logitsType = dyn_cast<RankedTensorType>(logits.getType());
  if (!logitsType || logitsType.getRank() != 2 ||
      !logitsType.hasStaticShape() ||
      skipNoOps(scatter.getInputs()[0]) != logits ||
      skipNoOps(scatter.getInputs()[1]) != skipNoOps(first.getOutputs()[0]) ||
      !isMinusInfinity(scatter.getInputs()[2]))
    return rewriter.notifyMatchFailure(
        anchor, "the second pick does not mask the first");
  // The weights: a concat whose users include what the sort's rows read.
  onnx::ConcatOp concatWeights;
  for (Operation *user : first.getOutputs()[0].getUsers())
    if (auto gather = dyn_cast<onnx::GatherElementsOp>(user))
      for (Operation *gatherUser : gather.getOutputs()[0].getUsers())
        if (auto concat = dyn_cast<onnx::ConcatOp>(gatherUser))
          concatWeights = concat;
  if (!concatWeights || concatWeights.getInputs().size() != 2)
    return rewriter.notifyMatchFailure(anchor, "no weights of both picks");
  std::optional<double> firstEps = matchMixerWeight(
      concatWeights.getInputs()[0], first.getOutputs()[0], logits, logits);
  std::optional<double> secondEps =
      matchMixerWeight(concatWeights.getInputs()[1], second.getOutputs()[0],
                       scatter.getOutputs()[0], logits);
  if (!firstEps || !secondEps || *firstEps != *secondEps || *firstEps < 0)
    return rewriter.notifyMatchFailure(anchor,
                                       "weights are not the sparse mixer's");
  RouterMatch match;
  match.logits = logits;
  match.scoring = ScoringFunction::Softmax;
  match.k = 2;
  match.numExperts = logitsType.getDimSize(1);
  match.sparseMixerEps = *firstEps / 2;
  match.indices = concatIds.getOutputs()[0];
  match.weights = concatWeights.getOutputs()[0];
  return match;
}

Value skipFloatCasts(Value value) {
  value = skipNoOps(value);
  while (auto castOp = value.getDefiningOp<onnx::CastOp>()) {
    Value from = castOp.getInputs()[0];
    if (!isa<FloatType>(getElementTypeOrSelf(from)) ||
        !isa<FloatType>(getElementTypeOrSelf(value)))
      break;
    value = skipNoOps(from);
  }
  return value;
}

/// The nearest `x @ W` [T, *] that `scores` are computed from, through at
/// most `kMaxRouterOps` onnx ops of [T, *] float operands.
Value findRouterLogits(Value scores) {
  constexpr unsigned kMaxRouterOps = 16;
  auto type = cast<RankedTensorType>(scores.getType());
  SmallVector<Value> frontier{scores};
  DenseSet<Value> seen;
  for (unsigned step = 0; step < kMaxRouterOps && !frontier.empty(); ++step) {
    SmallVector<Value> next;
    for (Value value : frontier) {
      if (!seen.insert(value).second)
        continue;
      if (matchRouterInput(value))
        return skipNoOps(value);
      Operation *op = value.getDefiningOp();
      if (!op || !isa<onnx::ONNXDialect>(op->getDialect()))
        continue;
      // Through [T, ...] scores (a router may slice off a column, or
      // view them as [T, groups, E / groups]).
      for (Value operand : op->getOperands()) {
        auto operandType = dyn_cast<RankedTensorType>(operand.getType());
        if (operandType && operandType.getRank() >= 2 &&
            operandType.getDimSize(0) == type.getDimSize(0) &&
            isa<FloatType>(operandType.getElementType()) &&
            !constantOp(operand))
          next.push_back(operand);
      }
    }
    frontier = std::move(next);
  }
  return {};
}

namespace {
/// The [T, k] values that leave the routing ops after `topk`: every onnx
/// op of [T, k] and [T, 1..E+1] results that reads only their results and
/// what the top-k could read (values not computed from its results: the
/// scores, the logits, constants).
/// What such ops compute and others read is what a block takes from its
/// router: the weights (floats) and the ids (integers).
struct RoutingExits {
  SmallVector<Value> floats, ints;
};
} // namespace

static RoutingExits routingExits(onnx::TopKOp topk, int64_t T, int64_t k) {
  // Widths up to one past the experts: a router may carry a column beside
  // them (a null expert's score) and drop it again.
  int64_t experts = cast<RankedTensorType>(topk.getInputs()[0].getType())
                        .getShape()
                        .back();
  // What the top-k could read: values not computed from its results.
  auto besideTopK = [&](Value value) {
    return !dependsOn(value, topk.getOutputs()[0]) &&
           !dependsOn(value, topk.getOutputs()[1]);
  };
  auto routingShaped = [&](Value value) {
    auto t = dyn_cast<RankedTensorType>(value.getType());
    return t && t.getRank() == 2 && t.getDimSize(0) == T &&
           (t.getDimSize(1) == k ||
            (t.getDimSize(1) >= 1 && t.getDimSize(1) <= experts + 1));
  };
  DenseSet<Value> routing{topk.getOutputs()[0], topk.getOutputs()[1]};
  SmallVector<Value> worklist(routing.begin(), routing.end());
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    for (Operation *user : value.getUsers()) {
      if (!isa<onnx::ONNXDialect>(user->getDialect()) ||
          !llvm::all_of(user->getResults(), routingShaped) ||
          !llvm::all_of(user->getOperands(), [&](Value operand) {
            return routing.contains(operand) || besideTopK(operand);
          }))
        continue;
      for (Value result : user->getResults())
        if (routing.insert(result).second)
          worklist.push_back(result);
    }
  }
  RoutingExits exits;
  for (Value value : routing) {
    auto t = cast<RankedTensorType>(value.getType());
    if (t.getDimSize(1) != k ||
        llvm::all_of(value.getUsers(), [&](Operation *user) {
          return llvm::any_of(user->getResults(), [&](Value result) {
            return routing.contains(result);
          });
        }))
      continue;
    // Comparisons of the ids with an expert (`indices == e`) are the
    // experts' masks, which the expert matchers read, not ids.
    if (t.getElementType().isInteger(1))
      continue;
    (isa<FloatType>(t.getElementType()) ? exits.floats : exits.ints)
        .push_back(value);
  }
  return exits;
}


FailureOr<RouterMatch> matchGivenRouter(onnx::TopKOp topk,
                                        PatternRewriter &rewriter) {
  if (!validationRequested(topk))
    return rewriter.notifyMatchFailure(
        topk, "a router of no named form is raised only where it is checked "
              "(moe-raise{validate=1})");
  Value scores = topk.getInputs()[0];
  auto type = dyn_cast<RankedTensorType>(scores.getType());
  if (!type || type.getRank() != 2 || !type.hasStaticShape() ||
      !isa<FloatType>(type.getElementType()))
    return rewriter.notifyMatchFailure(topk, "scores are not a static float "
                                             "[T, E]");
  auto axis = topk->getAttrOfType<IntegerAttr>("axis");
  if (axis && axis.getInt() != -1 && axis.getInt() != 1)
    return rewriter.notifyMatchFailure(topk, "top-k is not over experts");
  std::optional<int64_t> k = constantInt(topk.getInputs()[1]);
  if (!k)
    return rewriter.notifyMatchFailure(topk, "k is not a constant");
  int64_t T = type.getDimSize(0);
  RouterMatch match;
  match.topk = topk;
  match.logits = findRouterLogits(scores);
  if (!match.logits)
    return rewriter.notifyMatchFailure(topk, "no router logits x @ W [T, E] "
                                             "upstream of the top-k");
  match.k = *k;
  match.numExperts = type.getDimSize(1);
  match.scoring = ScoringFunction::Softmax; // read by no given routing
  match.given = true;

  // One float leaves the routing ops (the weights), and the ids: the
  // top-k's indices unless one integer value replaces them.
  RoutingExits exits = routingExits(topk, T, *k);
  SmallVector<Value> &floats = exits.floats, &ints = exits.ints;
  if (floats.size() != 1)
    return rewriter.notifyMatchFailure(
        topk, "not one [T, k] float value leaves the routing ops (" +
                  Twine(floats.size()) + ")");
  match.weights = floats.front();
  match.indices = topk.getOutputs()[1];
  if (ints.size() == 1)
    match.indices = ints.front();
  else if (ints.size() > 1)
    return rewriter.notifyMatchFailure(topk, "several [T, k] expert ids");
  return match;
}

FailureOr<RouterMatch> matchRouter(onnx::TopKOp topk,
                                   PatternRewriter &rewriter) {
  if (wasRefused(topk))
    return rewriter.notifyMatchFailure(topk, "refused by the check before");
  // A named form must describe the routing up to the weights the block
  // reads: one that stops short (a floor on the normalisation it does not
  // know) leaves the rest to `given`.
  // Casts between float types (the weights in the model's dtype) are the
  // layer's own rounding, not routing.
  auto describesAll = [&](const RouterMatch &match) {
    auto ids = cast<RankedTensorType>(match.indices.getType());
    RoutingExits exits = routingExits(topk, ids.getDimSize(0), match.k);
    return exits.floats.size() != 1 ||
           skipFloatCasts(exits.floats.front()) ==
               skipFloatCasts(match.weights);
  };
  for (auto named : {matchSoftmaxTopK, matchTopKSoftmax, matchSigmoidTopK}) {
    if (givenRoutingRequested(topk))
      break;
    FailureOr<RouterMatch> router = named(topk, rewriter);
    if (succeeded(router) && describesAll(*router))
      return router;
    if (succeeded(router))
      break;
  }
  return matchGivenRouter(topk, rewriter);
}

Value matchRouterInput(Value logits) {
  Operation *op = skipNoOps(logits).getDefiningOp();
  // nn.Linear with a bias, as the TorchScript exporter writes it.
  if (auto add = dyn_cast_or_null<onnx::AddOp>(op))
    for (int i = 0; i < 2; ++i)
      if (constantOp(add.getInputs()[1 - i]))
        if (auto matmul = definedBy<onnx::MatMulOp>(add.getInputs()[i]))
          return skipNoOps(matmul.getInputs()[0]);
  if (auto matmul = dyn_cast_or_null<onnx::MatMulOp>(op))
    return skipNoOps(matmul.getInputs()[0]);
  if (auto gemm = dyn_cast_or_null<onnx::GemmOp>(op)) {
    auto transA = gemm->getAttrOfType<IntegerAttr>("transA");
    if (!transA || transA.getInt() == 0)
      return skipNoOps(gemm.getInputs()[0]);
  }
  return {};
}

void setRouting(LayerSpec &spec, const RouterMatch &router) {
  spec.logits = skipNoOps(router.logits);
  spec.k = router.k;
  spec.scoring = router.scoring;
  if (router.given) {
    // The layer's logits are [T, E]: router logits with a column beside
    // the experts' give way to the scores the top-k reads.
    if (cast<RankedTensorType>(spec.logits.getType()).getDimSize(1) !=
        router.numExperts)
      spec.logits = onnx::TopKOp(router.topk).getInputs()[0];
    spec.selection = SelectionMethod::Given;
    spec.routedIds = router.indices;
    spec.routedWeights = router.weights;
    spec.selectionBias = {};
    spec.normalize = false;
    spec.scalingFactor = 1.0;
    spec.numGroups = spec.groupTopk = std::nullopt;
    spec.groupScore = std::nullopt;
    spec.maskedScore = spec.jitterEps = std::nullopt;
    return;
  }
  spec.selection =
      router.numGroups ? SelectionMethod::GroupedTopK : SelectionMethod::TopK;
  if (router.sparseMixerEps) {
    spec.selection = SelectionMethod::SparseMixer;
    spec.jitterEps = router.sparseMixerEps;
  }
  spec.normalize = router.normalize;
  spec.scalingFactor = router.scalingFactor;
  spec.numGroups = router.numGroups;
  spec.groupTopk = router.groupTopk;
  spec.groupScore = router.groupScore;
  // -inf is what moe.router does without masked_score.
  if (router.maskedScore && !std::isinf(*router.maskedScore))
    spec.maskedScore = router.maskedScore;
}

//===----------------------------------------------------------------------===//
// Expert FFNs
//===----------------------------------------------------------------------===//

/// `x @ W` with W a constant `[in, out]` matrix, or `Gemm(x, W, transB)`
/// without a bias (nn.Linear as transformers' exporter writes it) with W
/// `[out, in]`: x, W and whether W is `[out, in]`.
static std::optional<std::tuple<Value, arith::ConstantOp, bool>>
matchLinear(Value value) {
  Operation *op = skipNoOps(value).getDefiningOp();
  bool outIn = false;
  if (auto gemm = dyn_cast_or_null<onnx::GemmOp>(op)) {
    auto intAttr = [&](StringRef name) {
      auto attr = gemm->getAttrOfType<IntegerAttr>(name);
      return attr ? attr.getInt() : 0;
    };
    auto alpha = gemm->getAttrOfType<FloatAttr>("alpha");
    if (intAttr("transA") != 0 || intAttr("transB") != 1 ||
        (alpha && alpha.getValueAsDouble() != 1.0) ||
        (gemm.getInputs().size() > 2 &&
         !isa<NoneType>(gemm.getInputs()[2].getType())))
      return std::nullopt;
    outIn = true;
  } else if (!isa_and_nonnull<onnx::MatMulOp>(op)) {
    return std::nullopt;
  }
  arith::ConstantOp weight = constantOp(op->getOperand(1));
  if (!weight || cast<RankedTensorType>(weight.getType()).getRank() != 2)
    return std::nullopt;
  return std::make_tuple(op->getOperand(0), weight, outIn);
}

/// `z * sigmoid(z)`: the z.
static Value matchSilu(Value value) {
  auto mul = definedBy<onnx::MulOp>(value);
  if (!mul)
    return {};
  for (int i = 0; i < 2; ++i) {
    Value z = mul.getInputs()[i];
    auto sigmoid = definedBy<onnx::SigmoidOp>(mul.getInputs()[1 - i]);
    if (sigmoid && skipNoOps(sigmoid.getInputs()[0]) == skipNoOps(z))
      return z;
  }
  return {};
}

/// An activation applied to `x @ W1`: the kind and the linear's result.
static std::optional<std::pair<ActivationKind, Value>>
matchActivation(Value value) {
  if (Value z = matchSilu(value))
    return std::make_pair(ActivationKind::Silu, z);
  if (auto relu = definedBy<onnx::ReluOp>(value))
    return std::make_pair(ActivationKind::Relu, relu.getInputs()[0]);
  return std::nullopt;
}

FailureOr<FFNMatch> matchFFN(Value output, PatternRewriter &rewriter) {
  FFNMatch ffn;
  ffn.output = output;
  auto down = matchLinear(output);
  if (!down)
    return failure();
  ffn.fc2 = std::get<1>(*down);
  ffn.outIn = std::get<2>(*down);
  Value hidden = std::get<0>(*down);

  auto matchUp = [&](Value activated) -> bool {
    auto take = [&](Value linear, ActivationKind kind,
                    ActivationAttr custom) -> bool {
      auto up = matchLinear(linear);
      if (!up || std::get<2>(*up) != ffn.outIn)
        return false;
      ffn.activation = kind;
      ffn.custom = custom;
      ffn.input = std::get<0>(*up);
      ffn.fc1 = std::get<1>(*up);
      return true;
    };
    std::optional<std::pair<ActivationKind, Value>> act =
        matchActivation(activated);
    if (act && take(act->second, act->first, ActivationAttr()))
      return true;
    // No kind names it: elementwise ops on the up projection alone.
    std::optional<ElementwiseChain> chain = matchElementwiseChain(activated);
    if (!chain || !matchLinear(chain->source))
      return false;
    FailureOr<ActivationAttr> custom =
        customActivation(*chain, output.getDefiningOp(), rewriter);
    return succeeded(custom) &&
           take(chain->source, ActivationKind::Custom, *custom);
  };

  // Gated: act(x W1) * (x W3).
  if (auto mul = definedBy<onnx::MulOp>(hidden)) {
    for (int i = 0; i < 2; ++i) {
      auto gate = matchLinear(mul.getInputs()[1 - i]);
      if (gate && std::get<2>(*gate) == ffn.outIn &&
          matchUp(mul.getInputs()[i]) &&
          skipNoOps(std::get<0>(*gate)) == skipNoOps(ffn.input)) {
        ffn.fc3 = std::get<1>(*gate);
        return ffn;
      }
    }
  }
  if (matchUp(hidden))
    return ffn;
  return failure();
}

namespace {
/// Which half of a fused SwiGLU input a value is.
struct SwiGLUHalf {
  SwiGLULayout layout;
  int64_t index; // 0: the gate half, 1: the linear half
};
} // namespace

/// `half` as a piece of `h [N, 2F]` along its last axis: Split into two
/// equal parts, or a Slice of either half (step 1) or of the even or odd
/// columns (step 2).
static std::optional<SwiGLUHalf> matchSwiGLUHalf(Value half, Value h) {
  auto type = dyn_cast<RankedTensorType>(h.getType());
  if (!type || type.getRank() == 0 || type.isDynamicDim(type.getRank() - 1))
    return std::nullopt;
  int64_t rank = type.getRank(), width = type.getShape().back();
  if (width % 2)
    return std::nullopt;
  half = skipNoOps(half);
  Operation *op = half.getDefiningOp();
  if (auto split = dyn_cast_or_null<onnx::SplitOp>(op)) {
    auto pieceType = cast<RankedTensorType>(half.getType());
    if (skipNoOps(split.getInputs()[0]) != skipNoOps(h) ||
        split->getNumResults() != 2 || !onLastAxis(split, "axis", rank) ||
        pieceType.getShape().back() != width / 2)
      return std::nullopt;
    return SwiGLUHalf{SwiGLULayout::Concatenated,
                      cast<OpResult>(half).getResultNumber()};
  }
  auto slice = dyn_cast_or_null<onnx::SliceOp>(op);
  if (!slice || skipNoOps(slice.getInputs()[0]) != skipNoOps(h))
    return std::nullopt;
  ValueRange in = slice.getInputs();
  // Bounds may be computed from static extents (torch's chunk).
  std::optional<int64_t> start = evaluateScalar(in[1]),
                         end = evaluateScalar(in[2]);
  std::optional<int64_t> axis = in.size() > 3 && !isa<NoneType>(in[3].getType())
                                    ? evaluateScalar(in[3])
                                    : rank - 1;
  std::optional<int64_t> step = in.size() > 4 && !isa<NoneType>(in[4].getType())
                                    ? evaluateScalar(in[4])
                                    : 1;
  if (!start || !end || !axis || !step || (*axis != -1 && *axis != rank - 1))
    return std::nullopt;
  int64_t stop = std::min(*end, width);
  if (*step == 1 && *start == 0 && stop == width / 2)
    return SwiGLUHalf{SwiGLULayout::Concatenated, 0};
  if (*step == 1 && *start == width / 2 && stop == width)
    return SwiGLUHalf{SwiGLULayout::Concatenated, 1};
  if (*step == 2 && (*start == 0 || *start == 1) && stop >= width - 1)
    return SwiGLUHalf{SwiGLULayout::Interleaved, *start};
  return std::nullopt;
}

std::optional<ActivationAttr> matchFusedSwiGLU(Value activated, Value h) {
  auto mul = definedBy<onnx::MulOp>(activated);
  if (!mul)
    return std::nullopt;
  // Clip(v, lo, hi) with constant bounds (none where absent).
  auto clipOf = [](Value v, std::optional<double> &lo,
                   std::optional<double> &hi) -> Value {
    auto clip = definedBy<onnx::ClipOp>(v);
    if (!clip)
      return v;
    ValueRange in = clip.getInputs();
    if (in.size() > 1 && !isa<NoneType>(in[1].getType()))
      lo = constantFloat(in[1]);
    if (in.size() > 2 && !isa<NoneType>(in[2].getType()))
      hi = constantFloat(in[2]);
    return clip.getInputs()[0];
  };
  for (int i = 0; i < 2; ++i) {
    // The gate part: G * sigmoid(alpha * G), G = min(g, limit).
    auto gated = definedBy<onnx::MulOp>(mul.getInputs()[i]);
    if (!gated)
      continue;
    for (int j = 0; j < 2; ++j) {
      Value gate = skipNoOps(gated.getInputs()[j]);
      auto sigmoid = definedBy<onnx::SigmoidOp>(gated.getInputs()[1 - j]);
      if (!sigmoid)
        continue;
      double alpha = 1.0;
      Value z = skipNoOps(sigmoid.getInputs()[0]);
      if (z != gate) {
        auto scaled = definedBy<onnx::MulOp>(z);
        if (!scaled)
          continue;
        int g = skipNoOps(scaled.getInputs()[0]) == gate ? 0 : 1;
        std::optional<double> a = constantFloat(scaled.getInputs()[1 - g]);
        if (skipNoOps(scaled.getInputs()[g]) != gate || !a)
          continue;
        alpha = *a;
      }
      std::optional<double> gateLo, gateHi;
      Value gateHalf = clipOf(gate, gateLo, gateHi);
      // The linear part: clamp(l, -limit, limit) + beta.
      Value linear = skipNoOps(mul.getInputs()[1 - i]);
      double beta = 0.0;
      if (auto add = definedBy<onnx::AddOp>(linear)) {
        for (int b = 0; b < 2; ++b)
          if (std::optional<double> c = constantFloat(add.getInputs()[b])) {
            beta = *c;
            linear = skipNoOps(add.getInputs()[1 - b]);
            break;
          }
      }
      std::optional<double> linLo, linHi;
      Value linearHalf = clipOf(linear, linLo, linHi);
      std::optional<SwiGLUHalf> g = matchSwiGLUHalf(gateHalf, h);
      std::optional<SwiGLUHalf> l = matchSwiGLUHalf(linearHalf, h);
      if (!g || !l || g->layout != l->layout || g->index != 0 || l->index != 1)
        continue;
      // moe's limit clamps both halves alike, or neither.
      std::optional<double> limit = gateHi;
      bool clamped = gateHi && !gateLo && linHi && linLo && *linHi == *gateHi &&
                     *linLo == -*gateHi && *gateHi > 0;
      bool plain = !gateHi && !gateLo && !linHi && !linLo;
      if (!clamped && !plain)
        continue;
      MLIRContext *ctx = activated.getContext();
      return ActivationAttr::get(
          ctx, ActivationKind::SwiGLU, g->layout, APFloat(alpha), APFloat(beta),
          clamped ? std::optional<APFloat>(APFloat(*limit)) : std::nullopt);
    }
  }
  return std::nullopt;
}

namespace {
/// `x @ W[index].T [+ b[index]]` with W a constant `[E, out, in]` (or
/// `x @ W[index] [+ b[index]]` with W `[E, in, out]`, GPT-OSS's layout).
struct IndexedLinear {
  Value input;
  arith::ConstantOp weight, bias;
  bool inOut = false; // W is [E, in, out]
  Value index;
};
} // namespace

/// `Gather(C, index, axis 0)` of a constant of rank `rank`: C and index.
static std::optional<std::pair<arith::ConstantOp, Value>>
matchExpertRow(Value value, int64_t rank) {
  auto gather = definedBy<onnx::GatherOp>(value);
  if (!gather)
    return std::nullopt;
  auto axis = gather->getAttrOfType<IntegerAttr>("axis");
  arith::ConstantOp stacked = constantOp(gather.getInputs()[0]);
  if ((axis && axis.getInt() != 0) || !stacked ||
      cast<RankedTensorType>(stacked.getType()).getRank() != rank ||
      cast<RankedTensorType>(gather.getInputs()[1].getType()).getRank() != 0)
    return std::nullopt;
  return std::make_pair(stacked, skipNoOps(gather.getInputs()[1]));
}

static std::optional<IndexedLinear> matchIndexedLinear(Value value) {
  IndexedLinear linear;
  value = skipNoOps(value);
  if (auto add = value.getDefiningOp<onnx::AddOp>()) {
    for (int i = 0; i < 2 && !linear.bias; ++i)
      if (auto row = matchExpertRow(add.getInputs()[1 - i], 2)) {
        linear.bias = row->first;
        linear.index = row->second;
        value = skipNoOps(add.getInputs()[i]);
      }
    if (!linear.bias)
      return std::nullopt;
  }
  auto matmul = value.getDefiningOp<onnx::MatMulOp>();
  if (!matmul)
    return std::nullopt;
  Value weight = matmul.getInputs()[1];
  linear.inOut = true;
  if (auto transpose = definedBy<onnx::TransposeOp>(weight)) {
    auto perm = transpose->getAttrOfType<DenseI64ArrayAttr>("perm");
    if (!perm || perm.asArrayRef() != ArrayRef<int64_t>{1, 0})
      return std::nullopt;
    weight = transpose.getInputs()[0];
    linear.inOut = false;
  }
  auto row = matchExpertRow(weight, 3);
  if (!row || (linear.index && linear.index != row->second))
    return std::nullopt;
  linear.input = matmul.getInputs()[0];
  linear.weight = row->first;
  linear.index = row->second;
  return linear;
}

FailureOr<FFNMatch> matchIndexedFFN(Value output, PatternRewriter &rewriter) {
  // A Reshape between equal types with at most one dynamic dimension keeps
  // every extent (the element count fixes it).
  Value product = skipNoOps(output);
  if (auto reshape = product.getDefiningOp<onnx::ReshapeOp>()) {
    auto type = cast<RankedTensorType>(product.getType());
    if (reshape.getInputs()[0].getType() == type &&
        type.getNumDynamicDims() <= 1)
      product = reshape.getInputs()[0];
  }
  std::optional<IndexedLinear> down = matchIndexedLinear(product);
  if (!down)
    return failure();
  Value activated = down->input;
  // The up projection: the first indexed linear that the activation reads.
  SmallVector<Value> work{activated};
  llvm::SmallPtrSet<Operation *, 16> seen;
  for (unsigned steps = 0; !work.empty() && steps < 16; ++steps) {
    Value v = work.pop_back_val();
    if (std::optional<IndexedLinear> up = matchIndexedLinear(v)) {
      std::optional<ActivationAttr> activation = matchFusedSwiGLU(activated, v);
      if (!activation)
        break;
      if (up->index != down->index ||
          static_cast<bool>(up->bias) != static_cast<bool>(down->bias))
        return failure();
      FFNMatch ffn;
      ffn.input = up->input;
      ffn.output = output;
      ffn.stackedFc1 = up->weight;
      ffn.stackedFc2 = down->weight;
      ffn.stackedFc1Bias = up->bias;
      ffn.stackedFc2Bias = down->bias;
      ffn.stackedFc1InOut = up->inOut;
      ffn.stackedFc2InOut = down->inOut;
      ffn.expertIndex = down->index;
      ffn.fusedActivation = *activation;
      return ffn;
    }
    if (Operation *op = v.getDefiningOp(); op && seen.insert(op).second)
      for (Value operand : op->getOperands())
        work.push_back(operand);
  }
  // Separate halves: silu(x @ W1[e].T) * (x @ W3[e].T), no biases.
  auto mul = definedBy<onnx::MulOp>(activated);
  for (int i = 0; mul && i < 2 && !down->bias; ++i) {
    Value z = matchSilu(mul.getInputs()[i]);
    std::optional<IndexedLinear> gate =
        z ? matchIndexedLinear(z) : std::nullopt;
    std::optional<IndexedLinear> up =
        matchIndexedLinear(mul.getInputs()[1 - i]);
    if (!gate || !up || gate->bias || up->bias || gate->index != down->index ||
        up->index != down->index || gate->inOut != up->inOut ||
        skipNoOps(gate->input) != skipNoOps(up->input))
      continue;
    FFNMatch ffn;
    ffn.input = gate->input;
    ffn.output = output;
    ffn.stackedFc1 = gate->weight;
    ffn.stackedFc3 = up->weight;
    ffn.stackedFc2 = down->weight;
    ffn.stackedFc1InOut = gate->inOut;
    ffn.stackedFc2InOut = down->inOut;
    ffn.expertIndex = down->index;
    ffn.fusedActivation =
        ActivationAttr::get(activated.getContext(), ActivationKind::SwiGLU);
    return ffn;
  }
  return failure();
}

LogicalResult setSelectionBias(LayerSpec &spec, const RouterMatch &router,
                               Location loc, PatternRewriter &rewriter) {
  if (!router.bias)
    return success();
  FailureOr<Value> bias = reshapeConstant(router.bias, {router.numExperts},
                                          "selection_bias", loc, rewriter);
  if (failed(bias))
    return rewriter.notifyMatchFailure(loc, "bias could not be read");
  spec.selectionBias = *bias;
  return success();
}

LogicalResult replaceByLayer(LayerSpec spec, const RouterMatch &router,
                             Value output, Operation *anchor,
                             PatternRewriter &rewriter) {
  Location loc = output.getLoc();
  if (failed(setSelectionBias(spec, router, loc, rewriter)))
    return failure();
  LayerOp layer = createLayer(rewriter, loc, spec.input.getType(), spec);
  if (failed(verify(layer)) ||
      layer.getOutput().getType() != output.getType()) {
    rewriter.eraseOp(layer);
    return rewriter.notifyMatchFailure(anchor, "block output type differs");
  }
  // A `given` router is a guess at the block's structure: it is raised
  // only where the check ran and agreed.
  if (failed(checkRaisedBlock(output, layer.getOutput(),
                              {spec.input, spec.logits}, anchor, rewriter,
                              router.given || spec.requireCheck))) {
    rewriter.eraseOp(layer);
    if (router.topk)
      markRefused(router.topk);
    // A named router that the check refuses may do more than its name says
    // (a bias applied another way, a floor on the normalisation): the
    // block's own routing ops are then taken as they are.
    if (router.given || !router.topk)
      return failure();
    FailureOr<RouterMatch> given = matchGivenRouter(router.topk, rewriter);
    if (failed(given))
      return failure();
    retryRefused();
    setRouting(spec, *given);
    return replaceByLayer(spec, *given, output, anchor, rewriter);
  }
  rewriter.replaceAllUsesWith(output, layer.getOutput());
  return success();
}

LayerOp createLayer(PatternRewriter &rewriter, Location loc, Type type,
                    const LayerSpec &spec) {
  MLIRContext *ctx = rewriter.getContext();
  auto optionalInt = [&](std::optional<int64_t> v) {
    return v ? rewriter.getI64IntegerAttr(*v) : IntegerAttr();
  };
  return LayerOp::create(
      rewriter, loc, type, spec.input, spec.logits, spec.fc1, spec.fc1Bias,
      spec.fc3, /*fc3_bias=*/Value(), spec.fc2, spec.fc2Bias,
      spec.selectionBias, spec.routedIds, spec.routedWeights, spec.sharedFc1,
      spec.sharedFc3, spec.sharedFc2,
      spec.sharedGate, rewriter.getI64IntegerAttr(spec.k), spec.activation,
      optionalInt(spec.capacity),
      spec.dropPolicy ? DropPolicyAttr::get(ctx, *spec.dropPolicy)
                      : DropPolicyAttr(),
      ScoringFunctionAttr::get(ctx, spec.scoring),
      SelectionMethodAttr::get(ctx, spec.selection),
      spec.normalize ? rewriter.getUnitAttr() : UnitAttr(),
      rewriter.getF64FloatAttr(spec.scalingFactor), optionalInt(spec.numGroups),
      optionalInt(spec.groupTopk),
      spec.groupScore ? GroupScoreAttr::get(ctx, *spec.groupScore)
                      : GroupScoreAttr(),
      spec.maskedScore ? rewriter.getF64FloatAttr(*spec.maskedScore)
                       : FloatAttr(),
      rewriter.getF64FloatAttr(1.0e-4), rewriter.getI64IntegerAttr(10000),
      rewriter.getF64FloatAttr(spec.jitterEps.value_or(0.01)));
}

ActivationAttr activationOf(const FFNMatch &ffn, MLIRContext *context) {
  if (ffn.custom)
    return ffn.custom;
  if (ffn.fc3 && ffn.activation == ActivationKind::Silu)
    return ActivationAttr::get(context, ActivationKind::SwiGLU);
  return ActivationAttr::get(context, ffn.activation);
}

//===----------------------------------------------------------------------===//
// Weight stacking
//===----------------------------------------------------------------------===//

/// The bytes of a constant tensor, splats expanded into `storage`.
static std::optional<ArrayRef<char>> constantBytes(arith::ConstantOp constant,
                                                   std::vector<char> &storage) {
  auto type = cast<RankedTensorType>(constant.getType());
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(constant.getValue()))
    return resource.getData();
  auto dense = dyn_cast<DenseIntOrFPElementsAttr>(constant.getValue());
  if (!dense)
    return std::nullopt;
  ArrayRef<char> raw = dense.getRawData();
  if (!dense.isSplat())
    return raw;
  size_t elementBytes = raw.size();
  storage.resize(elementBytes * type.getNumElements());
  for (size_t i = 0; i < storage.size(); i += elementBytes)
    std::memcpy(storage.data() + i, raw.data(), elementBytes);
  return ArrayRef<char>(storage);
}

/// `[in, out]` matrices (rank-2 constants, or rank-3 stacks of them)
/// transposed and stacked: `[n, out, in]` for n matrices, or `[out, in]` for
/// a single one without `keepStackDim`.
/// Whether the weights stay the model's own (training: each parameter keeps
/// its name, and the gradient of a packed weight reaches it): packing then
/// writes onnx ops over the weights instead of folding a new constant.
static bool keepsWeights(PatternRewriter &rewriter) {
  for (Operation *at = rewriter.getInsertionBlock()->getParentOp(); at;
       at = at->getParentOp())
    if (at->hasAttr(kKeepWeightsAttrName))
      return true;
  return false;
}

/// `value` with its last two dims swapped, as an onnx.Transpose.
static Value transposeLast(Value value, Location loc,
                           PatternRewriter &rewriter) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> perm, shape(type.getShape());
  for (int64_t i = 0; i < type.getRank(); ++i)
    perm.push_back(i);
  std::swap(perm[type.getRank() - 1], perm[type.getRank() - 2]);
  std::swap(shape[type.getRank() - 1], shape[type.getRank() - 2]);
  return onnx::TransposeOp::create(
             rewriter, loc,
             TypeRange{RankedTensorType::get(shape, type.getElementType())},
             ValueRange{value},
             {rewriter.getNamedAttr("perm", rewriter.getDenseI64ArrayAttr(perm))})
      ->getResult(0);
}

Value reshapeOp(Value value, ArrayRef<int64_t> shape, Location loc,
                PatternRewriter &rewriter) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getShape() == shape)
    return value;
  auto shapeType = RankedTensorType::get({static_cast<int64_t>(shape.size())},
                                         rewriter.getI64Type());
  Value target = arith::ConstantOp::create(
      rewriter, loc, DenseIntElementsAttr::get(shapeType, shape));
  return onnx::ReshapeOp::create(
             rewriter, loc,
             TypeRange{RankedTensorType::get(shape, type.getElementType())},
             ValueRange{value, target})
      ->getResult(0);
}

/// `src` [rows, cols] into `dst` [cols, rows], in tiles that stay in cache:
/// an element at a time along `dst`'s columns took 17 s for 2.8 GB of
/// expert weights.
template <typename Element>
static void transposeTiles(const char *src, char *dst, int64_t rows,
                           int64_t cols) {
  constexpr int64_t kTile = 64;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile)
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      int64_t r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + kTile);
      for (int64_t c = c0; c < c1; ++c)
        for (int64_t r = r0; r < r1; ++r) {
          Element e;
          std::memcpy(&e, src + (r * cols + c) * sizeof(Element), sizeof e);
          std::memcpy(dst + (c * rows + r) * sizeof(Element), &e, sizeof e);
        }
    }
}

/// transposeTiles for elements of `elementBytes` bytes (1, 2, 4 or 8).
static void transposeMatrix(const char *src, char *dst, int64_t rows,
                            int64_t cols, size_t elementBytes) {
  switch (elementBytes) {
  case 1:
    return transposeTiles<uint8_t>(src, dst, rows, cols);
  case 2:
    return transposeTiles<uint16_t>(src, dst, rows, cols);
  case 4:
    return transposeTiles<uint32_t>(src, dst, rows, cols);
  default:
    assert(elementBytes == 8 && "weights of 1, 2, 4 or 8 bytes");
    return transposeTiles<uint64_t>(src, dst, rows, cols);
  }
}

static FailureOr<Value> packWeights(ArrayRef<arith::ConstantOp> constants,
                                    StringRef name, Location loc,
                                    PatternRewriter &rewriter,
                                    bool keepStackDim) {
  auto type = cast<RankedTensorType>(constants.front()->getResult(0).getType());
  Type elementType = type.getElementType();
  if (elementType.getIntOrFloatBitWidth() % 8 != 0 ||
      elementType.getIntOrFloatBitWidth() > 64 || type.getRank() < 2)
    return failure();
  size_t elementBytes = elementType.getIntOrFloatBitWidth() / 8;
  int64_t in = type.getDimSize(type.getRank() - 2);
  int64_t out = type.getDimSize(type.getRank() - 1);
  size_t matrixBytes = in * out * elementBytes;
  int64_t perConstant = type.getNumElements() / (in * out);
  int64_t numMatrices = perConstant * constants.size();
  if (keepsWeights(rewriter)) {
    SmallVector<Value> parts;
    for (arith::ConstantOp constant : constants) {
      if (constant->getResult(0).getType() != type)
        return failure();
      Value part = transposeLast(constant.getResult(), loc, rewriter);
      parts.push_back(keepStackDim
                          ? reshapeOp(part, {perConstant, out, in}, loc, rewriter)
                          : reshapeOp(part, {out, in}, loc, rewriter));
    }
    return onnx::createConcat(rewriter, loc, parts, 0);
  }

  AsmResourceBlob blob = HeapAsmResourceBlob::allocate(
      matrixBytes * numMatrices, alignof(std::max_align_t),
      /*dataIsMutable=*/true);
  MutableArrayRef<char> data = blob.getMutableData();
  for (auto [c, constant] : llvm::enumerate(constants)) {
    if (constant->getResult(0).getType() != type)
      return failure();
    std::vector<char> storage;
    std::optional<ArrayRef<char>> bytes = constantBytes(constant, storage);
    if (!bytes || bytes->size() != matrixBytes * perConstant)
      return failure();
    // Each [in, out] -> [out, in].
    for (int64_t m = 0; m < perConstant; ++m)
      transposeMatrix(bytes->data() + m * matrixBytes,
                      data.data() + (c * perConstant + m) * matrixBytes, in,
                      out, elementBytes);
  }
  auto packedType =
      keepStackDim ? RankedTensorType::get({numMatrices, out, in}, elementType)
                   : RankedTensorType::get({out, in}, elementType);
  auto attr = DenseResourceElementsAttr::get(packedType, name, std::move(blob));
  return arith::ConstantOp::create(rewriter, loc, packedType, attr).getResult();
}

FailureOr<Value> reshapeConstant(arith::ConstantOp constant,
                                 ArrayRef<int64_t> shape, StringRef name,
                                 Location loc, PatternRewriter &rewriter) {
  auto type = cast<RankedTensorType>(constant->getResult(0).getType());
  auto reshaped = RankedTensorType::get(shape, type.getElementType());
  if (reshaped.getNumElements() != type.getNumElements())
    return failure();
  if (keepsWeights(rewriter))
    return reshapeOp(constant.getResult(), shape, loc, rewriter);
  Attribute value;
  if (auto dense = dyn_cast<DenseElementsAttr>(constant.getValue())) {
    value = dense.reshape(reshaped);
  } else {
    std::vector<char> storage;
    std::optional<ArrayRef<char>> bytes = constantBytes(constant, storage);
    if (!bytes)
      return failure();
    AsmResourceBlob blob =
        HeapAsmResourceBlob::allocateAndCopyWithAlign(*bytes, alignof(double));
    value = DenseResourceElementsAttr::get(reshaped, name, std::move(blob));
  }
  return arith::ConstantOp::create(rewriter, loc, reshaped,
                                   cast<TypedAttr>(value))
      .getResult();
}

FailureOr<Value> stackExpertWeights(ArrayRef<arith::ConstantOp> perExpert,
                                    StringRef name, Location loc,
                                    PatternRewriter &rewriter) {
  return packWeights(perExpert, name, loc, rewriter, /*keepStackDim=*/true);
}

FailureOr<Value> transposeWeight(arith::ConstantOp weight, StringRef name,
                                 Location loc, PatternRewriter &rewriter) {
  return packWeights(weight, name, loc, rewriter, /*keepStackDim=*/false);
}

FailureOr<Value> concatRows(ArrayRef<Value> values, StringRef name,
                            Location loc, PatternRewriter &rewriter) {
  if (keepsWeights(rewriter))
    return onnx::createConcat(rewriter, loc, values, 0);
  SmallVector<arith::ConstantOp> parts;
  for (Value value : values) {
    auto constant = value.getDefiningOp<arith::ConstantOp>();
    if (!constant)
      return failure();
    parts.push_back(constant);
  }
  auto type = cast<RankedTensorType>(parts.front()->getResult(0).getType());
  Type elementType = type.getElementType();
  if (type.getRank() != 2 || elementType.getIntOrFloatBitWidth() % 8 != 0)
    return failure();
  int64_t rows = 0;
  SmallVector<std::vector<char>> storage(parts.size());
  SmallVector<ArrayRef<char>> bytes;
  for (auto [i, part] : llvm::enumerate(parts)) {
    auto partType = cast<RankedTensorType>(part->getResult(0).getType());
    std::optional<ArrayRef<char>> data = constantBytes(part, storage[i]);
    if (partType.getRank() != 2 || partType.getElementType() != elementType ||
        partType.getDimSize(1) != type.getDimSize(1) || !data)
      return failure();
    rows += partType.getDimSize(0);
    bytes.push_back(*data);
  }
  size_t total = 0;
  for (ArrayRef<char> b : bytes)
    total += b.size();
  AsmResourceBlob blob = HeapAsmResourceBlob::allocate(
      total, alignof(std::max_align_t), /*dataIsMutable=*/true);
  char *dst = blob.getMutableData().data();
  for (ArrayRef<char> b : bytes) {
    std::memcpy(dst, b.data(), b.size());
    dst += b.size();
  }
  auto resultType =
      RankedTensorType::get({rows, type.getDimSize(1)}, elementType);
  auto attr = DenseResourceElementsAttr::get(resultType, name, std::move(blob));
  return arith::ConstantOp::create(rewriter, loc, resultType, attr).getResult();
}

FailureOr<Value> transposeExpertWeights(arith::ConstantOp weights,
                                        StringRef name, Location loc,
                                        PatternRewriter &rewriter) {
  return packWeights(weights, name, loc, rewriter, /*keepStackDim=*/true);
}

} // namespace mlir::moe::raise
