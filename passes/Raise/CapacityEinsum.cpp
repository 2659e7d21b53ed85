//===- CapacityEinsum.cpp - raise the GShard/Switch einsum form -----------===//
//
// The Switch Transformer's top-1 layer with expert capacity as GShard and
// Mesh-TensorFlow write it (dispatch and combine tensors, experts applied
// by einsum to their stacked weights):
//
//   p = softmax(x Wr); m = one_hot(argmax(p), E)                  [T, E]
//   pos = cumsum(m, tokens); keep = m * (pos <= C)                [T, E]
//   d = one_hot((pos - 1) * keep, C) * keep[..., None]            [T, E, C]
//   xe = einsum('tec,th->ech', d, x)
//   y = einsum('ecf,ehf->ech', act(einsum('ech,efh->ecf', xe, W1)), W2)
//   out = einsum('tec,ech->th', max(p)[:, None, None] * d, y)
//
// C is `ceil(T / E * capacity_factor)`, computed from Shape(x) in the graph.
// This is moe.layer softmax topk k 1 with capacity C and the `position`
// policy: each expert keeps its first C tokens in token order, and the
// tokens it drops get 0.
//
//===----------------------------------------------------------------------===//

#include "passes/Raise/CapacityEinsum.h"
#include "passes/Raise/ElementwiseActivation.h"
#include "passes/Raise/Validation.h"
#include "passes/ONNXFolding.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallVectorExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace mlir::moe::raise {

using onnx_lowering::ConstTensor;
using onnx_lowering::foldConstantExpression;

/// The single finite number `value` folds to.
static std::optional<double> foldNumber(Value value) {
  std::optional<ConstTensor> folded = foldConstantExpression(value);
  if (!folded || folded->size() != 1 || !std::isfinite(folded->asDouble(0)))
    return std::nullopt;
  return folded->asDouble(0);
}

/// The single integer `value` folds to.
static std::optional<int64_t> foldInteger(Value value) {
  std::optional<double> number = foldNumber(value);
  if (!number || *number != std::trunc(*number) ||
      std::fabs(*number) > std::ldexp(1.0, 53))
    return std::nullopt;
  return static_cast<int64_t>(*number);
}

/// The axes of a Reduce or Unsqueeze: its `axesInput`-th input (opset 13+
/// Unsqueeze, 18+ Reduce) or its `axes` attribute (earlier opsets).
static std::optional<SmallVector<int64_t>> axesOf(Operation *op,
                                                  unsigned axesInput) {
  if (axesInput < op->getNumOperands() &&
      !isa<NoneType>(op->getOperand(axesInput).getType())) {
    std::optional<ConstTensor> axes =
        foldConstantExpression(op->getOperand(axesInput));
    if (!axes || !axes->elementType.isInteger())
      return std::nullopt;
    return axes->ints;
  }
  if (auto attr = op->getAttrOfType<DenseI64ArrayAttr>("axes"))
    return SmallVector<int64_t>(attr.asArrayRef());
  return std::nullopt;
}

/// `shape` after Unsqueeze with `axes`, or none for invalid axes.
static std::optional<SmallVector<int64_t>>
unsqueezeShape(ArrayRef<int64_t> shape, ArrayRef<int64_t> axes) {
  auto rank = static_cast<int64_t>(shape.size() + axes.size());
  SmallVector<int64_t> inserted;
  for (int64_t axis : axes) {
    if (axis < -rank || axis >= rank)
      return std::nullopt;
    inserted.push_back(axis < 0 ? axis + rank : axis);
  }
  llvm::sort(inserted);
  if (std::adjacent_find(inserted.begin(), inserted.end()) != inserted.end())
    return std::nullopt;
  SmallVector<int64_t> result;
  const int64_t *next = shape.begin();
  for (int64_t i = 0; i < rank; ++i)
    result.push_back(llvm::is_contained(inserted, i) ? 1 : *next++);
  return result;
}

//===----------------------------------------------------------------------===//
// Einsum equations
//===----------------------------------------------------------------------===//

// The block's contractions: t tokens, e experts, c capacity slots, h the
// model width; a projection maps its rows' width i to o.
constexpr StringLiteral kDispatch = "tec,th->ech";
constexpr StringLiteral kCombine = "tec,ech->th";
constexpr StringLiteral kProjection = "eci,eoi->eco";           // W [E, o, i]
constexpr StringLiteral kProjectionTransposed = "eci,eio->eco"; // W [E, i, o]

/// The terms of an explicit einsum equation (the inputs, then the output),
/// each a string of distinct axis letters; none for an implicit output, an
/// ellipsis or a repeated (diagonal) letter.
static std::optional<SmallVector<std::string>>
parseEquation(StringRef equation) {
  std::string compact;
  for (char c : equation)
    if (!llvm::isSpace(c))
      compact.push_back(c);
  size_t arrow = compact.find("->");
  if (arrow == std::string::npos)
    return std::nullopt;
  SmallVector<StringRef> inputs;
  StringRef(compact).take_front(arrow).split(inputs, ',');
  SmallVector<std::string> terms;
  for (StringRef input : inputs)
    terms.push_back(input.str());
  terms.push_back(compact.substr(arrow + 2));
  for (const std::string &term : terms) {
    if (!llvm::all_of(term, llvm::isAlpha))
      return std::nullopt;
    for (size_t i = 0; i < term.size(); ++i)
      if (term.find(term[i], i + 1) != std::string::npos)
        return std::nullopt;
  }
  return terms;
}

/// Whether `terms` are `pattern`'s with the letters renamed one to one: the
/// same contraction.
static bool sameContraction(ArrayRef<std::string> terms,
                            ArrayRef<std::string> pattern) {
  if (terms.size() != pattern.size())
    return false;
  llvm::DenseMap<char, char> forward, backward;
  for (auto [term, expected] : llvm::zip(terms, pattern)) {
    if (term.size() != expected.size())
      return false;
    for (auto [a, b] : llvm::zip(expected, term))
      if (forward.try_emplace(a, b).first->second != b ||
          backward.try_emplace(b, a).first->second != a)
        return false;
  }
  return true;
}

/// The two operands of `einsum` in the order of `pattern`, whichever order
/// its equation lists them in.
static std::optional<std::pair<Value, Value>>
einsumOperands(onnx::EinsumOp einsum, StringRef pattern) {
  auto equation = einsum->getAttrOfType<StringAttr>("equation");
  if (!equation || einsum.getInputs().size() != 2)
    return std::nullopt;
  std::optional<SmallVector<std::string>> terms =
      parseEquation(equation.getValue());
  std::optional<SmallVector<std::string>> expected = parseEquation(pattern);
  if (!terms || !expected || terms->size() != 3)
    return std::nullopt;
  Value a = einsum.getInputs()[0], b = einsum.getInputs()[1];
  if (sameContraction(*terms, *expected))
    return std::make_pair(a, b);
  std::swap((*terms)[0], (*terms)[1]);
  if (sameContraction(*terms, *expected))
    return std::make_pair(b, a);
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Router, masks and positions
//===----------------------------------------------------------------------===//

/// Whether every integer of magnitude up to `bound` survives a cast to
/// `type` (masks and token counts change type freely in exports).
static bool keepsIntegers(Type type, int64_t bound) {
  type = getElementTypeOrSelf(type);
  if (auto intType = dyn_cast<IntegerType>(type)) {
    if (intType.isUnsigned())
      return false;
    unsigned width = intType.getWidth();
    return width == 1 ? bound <= 1
                      : width > 63 || bound < (int64_t(1) << (width - 1));
  }
  if (auto floatType = dyn_cast<FloatType>(type)) {
    int precision = floatType.getFPMantissaWidth();
    return precision > 62 || bound <= (int64_t(1) << precision);
  }
  return false;
}

/// `value` with the casts that keep integers up to `bound` looked through.
static Value skipExactCasts(Value value, int64_t bound) {
  value = skipNoOps(value);
  while (auto cast = value.getDefiningOp<onnx::CastOp>()) {
    if (!keepsIntegers(cast.getInputs()[0].getType(), bound) ||
        !keepsIntegers(cast.getOutputs()[0].getType(), bound))
      break;
    value = skipNoOps(cast.getInputs()[0]);
  }
  return value;
}

/// The top-1 router: the argmax of softmax probabilities.
struct Top1Router {
  onnx::ArgMaxOp argmax;
  Value probs;  // softmax(logits), [T, E]
  Value logits; // [T, E]
  Value x;      // the tokens the logits are computed from, [T, H]
  int64_t numTokens, numExperts;
};

static FailureOr<Top1Router> matchTop1Router(onnx::ArgMaxOp argmax,
                                             PatternRewriter &rewriter) {
  Top1Router router;
  router.argmax = argmax;
  // ArgMax defaults to axis 0 and keepdims 1.
  auto axis = argmax->getAttrOfType<IntegerAttr>("axis");
  auto keepdims = argmax->getAttrOfType<IntegerAttr>("keepdims");
  auto lastIndex = argmax->getAttrOfType<IntegerAttr>("select_last_index");
  if (!axis || (axis.getInt() != -1 && axis.getInt() != 1) || !keepdims ||
      keepdims.getInt() != 0)
    return rewriter.notifyMatchFailure(argmax,
                                       "not an argmax over the experts");
  if (lastIndex && lastIndex.getInt() != 0)
    return rewriter.notifyMatchFailure(argmax, "ties go to the last expert");
  auto softmax = definedBy<onnx::SoftmaxOp>(argmax.getInputs()[0]);
  if (!softmax)
    return rewriter.notifyMatchFailure(argmax, "scores are not a softmax");
  auto logitsType =
      dyn_cast<RankedTensorType>(softmax.getInputs()[0].getType());
  if (!logitsType || logitsType.getRank() != 2 || !logitsType.hasStaticShape())
    return rewriter.notifyMatchFailure(argmax,
                                       "logits are not a static [T, E]");
  auto softmaxAxis = softmax->getAttrOfType<IntegerAttr>("axis");
  if (softmaxAxis && softmaxAxis.getInt() != -1 && softmaxAxis.getInt() != 1)
    return rewriter.notifyMatchFailure(argmax, "softmax is not over experts");
  router.probs = softmax.getOutputs()[0];
  router.logits = skipNoOps(softmax.getInputs()[0]);
  router.numTokens = logitsType.getDimSize(0);
  router.numExperts = logitsType.getDimSize(1);
  auto matmul = definedBy<onnx::MatMulOp>(router.logits);
  if (!matmul)
    return rewriter.notifyMatchFailure(argmax, "logits are not x @ W_router");
  router.x = skipNoOps(matmul.getInputs()[0]);
  auto xType = dyn_cast<RankedTensorType>(router.x.getType());
  if (!xType || xType.getRank() != 2 || !xType.hasStaticShape() ||
      xType.getDimSize(0) != router.numTokens)
    return rewriter.notifyMatchFailure(argmax,
                                       "tokens are not a static [T, H]");
  if (xType.getElementType() != logitsType.getElementType())
    return rewriter.notifyMatchFailure(
        argmax, "router runs in another precision than the tokens");
  return router;
}

/// `one_hot(indices, depth)` along a new last axis with values 0 and 1.
static onnx::OneHotOp matchOneHot(Value value) {
  auto oneHot = skipExactCasts(value, 1).getDefiningOp<onnx::OneHotOp>();
  if (!oneHot)
    return {};
  std::optional<ConstTensor> values =
      foldConstantExpression(oneHot.getInputs()[2]);
  auto axis = oneHot->getAttrOfType<IntegerAttr>("axis");
  auto indicesType =
      dyn_cast<RankedTensorType>(oneHot.getInputs()[0].getType());
  if (!values || values->size() != 2 || values->asDouble(0) != 0.0 ||
      values->asDouble(1) != 1.0 || !indicesType ||
      (axis && axis.getInt() != -1 && axis.getInt() != indicesType.getRank()))
    return {};
  return oneHot;
}

/// A one-hot's depth (ONNX casts a non-integer depth to int64).
static std::optional<int64_t> oneHotDepth(onnx::OneHotOp oneHot) {
  std::optional<double> depth = foldNumber(oneHot.getInputs()[1]);
  if (!depth || std::fabs(*depth) > std::ldexp(1.0, 53))
    return std::nullopt;
  return static_cast<int64_t>(std::trunc(*depth));
}

/// Whether `value` is the routing mask `one_hot(argmax, E)`, [T, E].
static bool isExpertMask(Value value, const Top1Router &router) {
  onnx::OneHotOp oneHot = matchOneHot(value);
  return oneHot &&
         skipExactCasts(oneHot.getInputs()[0], router.numExperts) ==
             router.argmax->getResult(0) &&
         oneHotDepth(oneHot) == router.numExperts;
}

/// Where `value` holds token positions within their expert, the shift s
/// that makes `value + s` the zero-based position. It is the cumsum over
/// tokens of the expert mask, offset by constants and multiplied by masks
/// that are 1 wherever a position is read: the expert mask and, given
/// `keep`, the capacity mask.
static std::optional<int64_t> positionShift(Value value,
                                            const Top1Router &router,
                                            Value keep, unsigned depth = 8) {
  value = skipExactCasts(value, router.numTokens + 1);
  Operation *op = value.getDefiningOp();
  if (!op || depth == 0)
    return std::nullopt;
  if (auto cumsum = dyn_cast<onnx::CumSumOp>(op)) {
    std::optional<int64_t> axis = foldInteger(cumsum.getInputs()[1]);
    auto exclusive = cumsum->getAttrOfType<IntegerAttr>("exclusive");
    auto reverse = cumsum->getAttrOfType<IntegerAttr>("reverse");
    if (!isExpertMask(cumsum.getInputs()[0], router) || !axis ||
        (*axis != 0 && *axis != -2) || (reverse && reverse.getInt() != 0))
      return std::nullopt;
    // An inclusive sum counts the token itself: positions start at 1.
    return exclusive && exclusive.getInt() != 0 ? 0 : -1;
  }
  if (isa<onnx::AddOp, onnx::SubOp>(op)) {
    bool sub = isa<onnx::SubOp>(op);
    for (int i = 0; i < (sub ? 1 : 2); ++i) {
      std::optional<int64_t> offset = foldInteger(op->getOperand(1 - i));
      if (!offset || std::abs(*offset) > router.numTokens)
        continue;
      if (std::optional<int64_t> shift =
              positionShift(op->getOperand(i), router, keep, depth - 1))
        return sub ? *shift + *offset : *shift - *offset;
    }
    return std::nullopt;
  }
  if (isa<onnx::MulOp>(op)) {
    for (int i = 0; i < 2; ++i) {
      Value mask = op->getOperand(1 - i);
      if (isExpertMask(mask, router) ||
          (keep && skipExactCasts(mask, 1) == keep))
        return positionShift(op->getOperand(i), router, keep, depth - 1);
    }
  }
  return std::nullopt;
}

/// The number N of tokens every expert keeps, if `value` is the capacity
/// mask `one_hot(argmax, E) * (position <= bound)` (or `<`, or the
/// comparison flipped).
static std::optional<int64_t> keptTokens(Value value,
                                         const Top1Router &router) {
  auto mul = skipExactCasts(value, 1).getDefiningOp<onnx::MulOp>();
  if (!mul)
    return std::nullopt;
  for (int i = 0; i < 2; ++i) {
    if (!isExpertMask(mul.getInputs()[i], router))
      continue;
    Operation *cmp = skipExactCasts(mul.getInputs()[1 - i], 1).getDefiningOp();
    if (!isa_and_present<onnx::LessOrEqualOp, onnx::LessOp,
                         onnx::GreaterOrEqualOp, onnx::GreaterOp>(cmp))
      continue;
    bool flipped = isa<onnx::GreaterOrEqualOp, onnx::GreaterOp>(cmp);
    bool strict = isa<onnx::LessOp, onnx::GreaterOp>(cmp);
    std::optional<int64_t> shift =
        positionShift(cmp->getOperand(flipped ? 1 : 0), router, Value());
    std::optional<double> bound = foldNumber(cmp->getOperand(flipped ? 0 : 1));
    if (!shift || !bound || std::fabs(*bound) > std::ldexp(1.0, 53))
      continue;
    // With z = position + shift: position <= b keeps z < floor(b) + 1 + shift,
    // position < b keeps z < ceil(b) + shift.
    double limit = strict ? std::ceil(*bound) : std::floor(*bound) + 1;
    return static_cast<int64_t>(limit) + *shift;
  }
  return std::nullopt;
}

/// The slots each expert has, if `value` is the dispatch mask
/// `one_hot(z, D) * keep[..., None]` [T, E, D] with z the zero-based
/// position: min(N, D), since positions past the depth get no slot.
static std::optional<int64_t> dispatchCapacity(Value value,
                                               const Top1Router &router) {
  auto mul = skipExactCasts(value, 1).getDefiningOp<onnx::MulOp>();
  if (!mul)
    return std::nullopt;
  for (int i = 0; i < 2; ++i) {
    onnx::OneHotOp slots = matchOneHot(mul.getInputs()[i]);
    auto unsqueeze = skipExactCasts(mul.getInputs()[1 - i], 1)
                         .getDefiningOp<onnx::UnsqueezeOp>();
    if (!slots || !unsqueeze)
      continue;
    Value keep = skipExactCasts(unsqueeze.getInputs()[0], 1);
    std::optional<int64_t> kept = keptTokens(keep, router);
    std::optional<SmallVector<int64_t>> axes = axesOf(unsqueeze, 1);
    std::optional<int64_t> depth = oneHotDepth(slots);
    // keep is [T, E]: it must become [T, E, 1].
    if (!kept || !depth || !axes || axes->size() != 1 ||
        ((*axes)[0] != -1 && (*axes)[0] != 2) ||
        positionShift(slots.getInputs()[0], router, keep) != 0)
      continue;
    int64_t capacity = std::min(*kept, *depth);
    if (capacity < 1)
      continue;
    return capacity;
  }
  return std::nullopt;
}

/// Whether `value` is the chosen expert's probability, `max(p, -1)` shaped
/// [T, 1, 1] by Unsqueeze to scale the [T, E, C] dispatch mask.
static bool isTop1Probability(Value value, const Top1Router &router) {
  SmallVector<onnx::UnsqueezeOp> unsqueezes;
  value = skipNoOps(value);
  while (auto unsqueeze = value.getDefiningOp<onnx::UnsqueezeOp>()) {
    unsqueezes.push_back(unsqueeze);
    value = skipNoOps(unsqueeze.getInputs()[0]);
  }
  auto reduce = value.getDefiningOp<onnx::ReduceMaxOp>();
  if (!reduce || skipNoOps(reduce.getInputs()[0]) != router.probs)
    return false;
  std::optional<SmallVector<int64_t>> axes = axesOf(reduce, 1);
  auto keepdims = reduce->getAttrOfType<IntegerAttr>("keepdims");
  if (!axes || axes->size() != 1 || ((*axes)[0] != -1 && (*axes)[0] != 1))
    return false;
  SmallVector<int64_t> shape{router.numTokens};
  if (!keepdims || keepdims.getInt() != 0)
    shape.push_back(1);
  for (onnx::UnsqueezeOp unsqueeze : llvm::reverse(unsqueezes)) {
    std::optional<SmallVector<int64_t>> inserted = axesOf(unsqueeze, 1);
    std::optional<SmallVector<int64_t>> next =
        inserted ? unsqueezeShape(shape, *inserted) : std::nullopt;
    if (!next)
      return false;
    shape = *next;
  }
  return shape == ArrayRef<int64_t>{router.numTokens, 1, 1};
}

//===----------------------------------------------------------------------===//
// Experts
//===----------------------------------------------------------------------===//

/// One projection of all experts, `einsum(rows, W)` with W a constant
/// [E, out, in], or [E, in, out] when `transposed`.
struct Projection {
  Value rows;
  arith::ConstantOp weight;
  bool transposed = false;

  /// W's shape as [E, out, in].
  SmallVector<int64_t> shape() const {
    ArrayRef<int64_t> s =
        cast<RankedTensorType>(weight->getResult(0).getType()).getShape();
    return transposed ? SmallVector<int64_t>{s[0], s[2], s[1]}
                      : SmallVector<int64_t>(s);
  }
};

static std::optional<Projection> matchProjection(Value value) {
  auto einsum = definedBy<onnx::EinsumOp>(value);
  if (!einsum)
    return std::nullopt;
  for (bool transposed : {false, true}) {
    std::optional<std::pair<Value, Value>> operands = einsumOperands(
        einsum, transposed ? kProjectionTransposed : kProjection);
    if (!operands)
      continue;
    arith::ConstantOp weight = constantOp(operands->second);
    auto type = weight ? dyn_cast<RankedTensorType>(weight.getType())
                       : RankedTensorType();
    if (!type || type.getRank() != 3 || !type.hasStaticShape())
      return std::nullopt;
    return Projection{skipNoOps(operands->first), weight, transposed};
  }
  return std::nullopt;
}

/// An activation applied to a projection: relu, silu (`z * sigmoid(z)`),
/// none, or elementwise ops no kind names (`custom` set to the activation).
static std::optional<std::pair<ActivationKind, Projection>>
matchActivated(Value value, ActivationAttr &custom, Operation *anchor,
               PatternRewriter &rewriter) {
  if (auto relu = definedBy<onnx::ReluOp>(value))
    if (std::optional<Projection> z = matchProjection(relu.getInputs()[0]))
      return std::make_pair(ActivationKind::Relu, *z);
  if (auto mul = definedBy<onnx::MulOp>(value))
    for (int i = 0; i < 2; ++i) {
      auto sigmoid = definedBy<onnx::SigmoidOp>(mul.getInputs()[1 - i]);
      if (!sigmoid ||
          skipNoOps(sigmoid.getInputs()[0]) != skipNoOps(mul.getInputs()[i]))
        continue;
      if (std::optional<Projection> z = matchProjection(mul.getInputs()[i]))
        return std::make_pair(ActivationKind::Silu, *z);
    }
  if (std::optional<Projection> z = matchProjection(value))
    return std::make_pair(ActivationKind::Identity, *z);
  if (std::optional<ElementwiseChain> chain = matchElementwiseChain(value))
    if (std::optional<Projection> z = matchProjection(chain->source)) {
      FailureOr<ActivationAttr> attr =
          customActivation(*chain, anchor, rewriter);
      if (failed(attr))
        return std::nullopt;
      custom = *attr;
      return std::make_pair(ActivationKind::Custom, *z);
    }
  return std::nullopt;
}

/// The experts on the dispatched rows: `act(xe W1) [* (xe W3)] W2`.
struct EinsumExperts {
  Value rows; // [E, C, H]
  Projection fc1, fc2;
  std::optional<Projection> fc3;
  ActivationKind activation;
  ActivationAttr custom; // the activation when no kind names it
};

static std::optional<EinsumExperts> matchExperts(Value output,
                                                 Operation *anchor,
                                                 PatternRewriter &rewriter) {
  std::optional<Projection> fc2 = matchProjection(output);
  if (!fc2)
    return std::nullopt;
  EinsumExperts experts;
  experts.fc2 = *fc2;
  if (auto up = matchActivated(fc2->rows, experts.custom, anchor, rewriter)) {
    experts.activation = up->first;
    experts.fc1 = up->second;
  } else if (auto mul = definedBy<onnx::MulOp>(fc2->rows)) {
    // Gated: act(xe W1) * (xe W3).
    for (int i = 0; i < 2 && !experts.fc3; ++i) {
      auto gate =
          matchActivated(mul.getInputs()[i], experts.custom, anchor, rewriter);
      std::optional<Projection> linear =
          matchProjection(mul.getInputs()[1 - i]);
      if (!gate || !linear || linear->rows != gate->second.rows)
        continue;
      experts.activation = gate->first;
      experts.fc1 = gate->second;
      experts.fc3 = linear;
    }
  }
  if (!experts.fc1.weight)
    return std::nullopt;
  experts.rows = experts.fc1.rows;
  return experts;
}

/// A projection's weight as moe.layer takes it, [E, out, in]: the constant
/// itself, or a transposed copy of an [E, in, out] one.
static FailureOr<Value> layerWeight(const Projection &projection,
                                    StringRef name, Location loc,
                                    PatternRewriter &rewriter) {
  if (!projection.transposed)
    return projection.weight->getResult(0);
  return transposeExpertWeights(projection.weight, name, loc, rewriter);
}

/// ONNX's TensorProto code for a float element type (the `to` of Cast).
static std::optional<int64_t> onnxTypeCode(Type type) {
  if (type.isF32())
    return 1;
  if (type.isF16())
    return 10;
  if (type.isF64())
    return 11;
  if (type.isBF16())
    return 16;
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// The pattern
//===----------------------------------------------------------------------===//

/// The combine einsum of the block routed by `argmax`: the one einsum of
/// the combine form that the argmax flows into.
static onnx::EinsumOp findCombine(onnx::ArgMaxOp argmax, unsigned depth = 32) {
  SmallVector<std::pair<Value, unsigned>> work{{argmax.getOutputs()[0], 0}};
  llvm::SmallPtrSet<Operation *, 32> seen;
  onnx::EinsumOp found;
  while (!work.empty()) {
    auto [v, d] = work.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (!seen.insert(user).second)
        continue;
      auto einsum = dyn_cast<onnx::EinsumOp>(user);
      if (einsum && einsumOperands(einsum, kCombine)) {
        if (found)
          return {};
        found = einsum;
        continue;
      }
      if (d + 1 < depth)
        for (Value result : user->getResults())
          work.push_back({result, d + 1});
    }
  }
  return found;
}

namespace {

/// Rewrites a Switch/GShard einsum block with capacity into one moe.layer.
struct RaiseCapacityEinsum : OpRewritePattern<onnx::ArgMaxOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(onnx::ArgMaxOp argmax,
                                PatternRewriter &rewriter) const override {
    FailureOr<Top1Router> router = matchTop1Router(argmax, rewriter);
    if (failed(router))
      return failure();
    onnx::EinsumOp combine = findCombine(argmax);
    if (!combine)
      return rewriter.notifyMatchFailure(
          argmax, "no single combine einsum 'tec,ech->th' after the router");
    auto [weights, expertOutputs] = *einsumOperands(combine, kCombine);

    std::optional<EinsumExperts> experts =
        matchExperts(expertOutputs, combine, rewriter);
    if (!experts)
      return rewriter.notifyMatchFailure(
          combine, "expert outputs are not einsum FFNs on constant weights");
    auto dispatch = definedBy<onnx::EinsumOp>(experts->rows);
    std::optional<std::pair<Value, Value>> dispatched =
        dispatch ? einsumOperands(dispatch, kDispatch) : std::nullopt;
    if (!dispatched)
      return rewriter.notifyMatchFailure(
          combine, "expert rows are not einsum('tec,th->ech', dispatch, x)");
    if (skipNoOps(dispatched->second) != router->x)
      return rewriter.notifyMatchFailure(
          dispatch, "dispatched tokens are not the router's input");
    std::optional<int64_t> capacity =
        dispatchCapacity(dispatched->first, *router);
    if (!capacity)
      return rewriter.notifyMatchFailure(
          dispatch, "dispatch mask is not one_hot(position) of the first C "
                    "tokens of each expert");

    // Combine weights: the top-1 probability times the same dispatch mask.
    auto scaled = definedBy<onnx::MulOp>(weights);
    bool weighted = false;
    for (int i = 0; scaled && i < 2 && !weighted; ++i)
      weighted =
          isTop1Probability(scaled.getInputs()[i], *router) &&
          dispatchCapacity(scaled.getInputs()[1 - i], *router) == capacity;
    if (!weighted)
      return rewriter.notifyMatchFailure(
          combine, "combine weights are not the top-1 probability times "
                   "the dispatch mask");

    // Weights as [E, out, in]: fc1 and fc3 [E, F, H], fc2 [E, M, F].
    auto xType = cast<RankedTensorType>(router->x.getType());
    Type elementType = xType.getElementType();
    SmallVector<int64_t> fc1 = experts->fc1.shape(), fc2 = experts->fc2.shape();
    auto sameElements = [&](const Projection &p) {
      return getElementTypeOrSelf(p.weight->getResult(0).getType()) ==
             elementType;
    };
    if (fc1[0] != router->numExperts || fc1[2] != xType.getDimSize(1) ||
        fc2[0] != router->numExperts || fc2[2] != fc1[1] ||
        (experts->fc3 && experts->fc3->shape() != fc1) ||
        !sameElements(experts->fc1) || !sameElements(experts->fc2) ||
        (experts->fc3 && !sameElements(*experts->fc3)))
      return rewriter.notifyMatchFailure(
          combine, "expert weights do not fit the tokens and experts");
    Value output = combine.getOutputs()[0];
    auto layerType =
        RankedTensorType::get({router->numTokens, fc2[1]}, elementType);
    auto outputType = dyn_cast<TensorType>(output.getType());
    std::optional<int64_t> typeCode = onnxTypeCode(elementType);
    if (!outputType || outputType.getElementType() != elementType ||
        failed(verifyCompatibleShape(outputType, layerType)) || !typeCode)
      return rewriter.notifyMatchFailure(combine, "block output type differs");

    Location loc = combine.getLoc();
    rewriter.setInsertionPoint(combine);
    FailureOr<Value> w1 =
        layerWeight(experts->fc1, "experts_fc1", loc, rewriter);
    FailureOr<Value> w2 =
        layerWeight(experts->fc2, "experts_fc2", loc, rewriter);
    FailureOr<Value> w3 =
        experts->fc3 ? layerWeight(*experts->fc3, "experts_fc3", loc, rewriter)
                     : FailureOr<Value>(Value());
    if (failed(w1) || failed(w2) || failed(w3))
      return rewriter.notifyMatchFailure(combine,
                                         "weights could not be transposed");

    FFNMatch ffn;
    ffn.activation = experts->activation;
    ffn.custom = experts->custom;
    ffn.fc3 = experts->fc3 ? experts->fc3->weight : arith::ConstantOp();
    LayerSpec spec;
    spec.input = router->x;
    spec.logits = router->logits;
    spec.fc1 = *w1;
    spec.fc3 = *w3;
    spec.fc2 = *w2;
    spec.k = 1;
    spec.activation = activationOf(ffn, rewriter.getContext());
    spec.capacity = *capacity;
    spec.dropPolicy = DropPolicy::Position;
    LayerOp layer = createLayer(rewriter, loc, layerType, spec);
    Value result = layer.getOutput();
    // ONNX shape inference leaves the block's output dynamic (the capacity
    // is data to it); a Cast to the same element type keeps that type.
    if (outputType != layerType)
      result = onnx::CastOp::create(
                   rewriter, loc, TypeRange{outputType}, ValueRange{result},
                   {rewriter.getNamedAttr(
                       "to", rewriter.getI64IntegerAttr(*typeCode))})
                   .getOutputs()[0];
    if (failed(checkRaisedBlock(combine->getResult(0), result,
                                {spec.input, spec.logits}, combine,
                                rewriter))) {
      if (result != layer.getOutput())
        rewriter.eraseOp(result.getDefiningOp());
      rewriter.eraseOp(layer);
      return failure();
    }
    rewriter.replaceOp(combine, result);
    return success();
  }
};

} // namespace

void populateCapacityEinsumPatterns(RewritePatternSet &patterns) {
  patterns.add<RaiseCapacityEinsum>(patterns.getContext());
}

} // namespace mlir::moe::raise
