//===- EinsumParts.cpp - pieces of the einsum MoE forms -------------------===//

#include "passes/Raise/EinsumParts.h"
#include "passes/Raise/ElementwiseActivation.h"
#include "passes/Raise/Validation.h"
#include "passes/ONNXFolding.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cmath>

namespace mlir::moe::raise {

using onnx_lowering::ConstTensor;
using onnx_lowering::foldConstantExpression;

/// The single finite number `value` folds to.
std::optional<double> foldNumber(Value value) {
  std::optional<ConstTensor> folded = foldConstantExpression(value);
  if (!folded || folded->size() != 1 || !std::isfinite(folded->asDouble(0)))
    return std::nullopt;
  return folded->asDouble(0);
}

/// The single integer `value` folds to.
std::optional<int64_t> foldInteger(Value value) {
  std::optional<double> number = foldNumber(value);
  if (!number || *number != std::trunc(*number) ||
      std::fabs(*number) > std::ldexp(1.0, 53))
    return std::nullopt;
  return static_cast<int64_t>(*number);
}

/// The axes of a Reduce or Unsqueeze: its `axesInput`-th input (opset 13+
/// Unsqueeze, 18+ Reduce) or its `axes` attribute (earlier opsets).
std::optional<SmallVector<int64_t>> axesOf(Operation *op,
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
std::optional<SmallVector<int64_t>>
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

// A projection maps its rows' width i to o.
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
std::optional<std::pair<Value, Value>>
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

/// Whether every integer of magnitude up to `bound` survives a cast to
/// `type` (masks and token counts change type freely in exports).
bool keepsIntegers(Type type, int64_t bound) {
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
Value skipExactCasts(Value value, int64_t bound) {
  value = skipNoOps(value);
  while (auto cast = value.getDefiningOp<onnx::CastOp>()) {
    if (!keepsIntegers(cast.getInputs()[0].getType(), bound) ||
        !keepsIntegers(cast.getOutputs()[0].getType(), bound))
      break;
    value = skipNoOps(cast.getInputs()[0]);
  }
  return value;
}

std::optional<int64_t> tokenCumsumShift(onnx::CumSumOp cumsum) {
  std::optional<int64_t> axis = foldInteger(cumsum.getInputs()[1]);
  auto exclusive = cumsum->getAttrOfType<IntegerAttr>("exclusive");
  auto reverse = cumsum->getAttrOfType<IntegerAttr>("reverse");
  if (!axis || (*axis != 0 && *axis != -2) ||
      (reverse && reverse.getInt() != 0))
    return std::nullopt;
  return exclusive && exclusive.getInt() != 0 ? 0 : -1;
}

/// A OneHot's depth (ONNX casts a non-integer depth to int64).
static std::optional<int64_t> oneHotDepth(onnx::OneHotOp oneHot) {
  std::optional<double> depth = foldNumber(oneHot.getInputs()[1]);
  if (!depth || std::fabs(*depth) > std::ldexp(1.0, 53))
    return std::nullopt;
  return static_cast<int64_t>(std::trunc(*depth));
}

/// `Equal(Unsqueeze(indices, -1), [0, 1, ..., D-1])`, either order.
static std::optional<OneHot> matchEqualOneHot(onnx::EqualOp equal) {
  for (int i = 0; i < 2; ++i) {
    auto unsqueeze = skipNoOps(equal.getInputs()[i]).getDefiningOp<onnx::UnsqueezeOp>();
    std::optional<ConstTensor> range =
        foldConstantExpression(equal.getInputs()[1 - i]);
    auto rangeType =
        dyn_cast<RankedTensorType>(equal.getInputs()[1 - i].getType());
    if (!unsqueeze || !range || !rangeType || rangeType.getRank() != 1)
      continue;
    auto indicesType =
        dyn_cast<RankedTensorType>(unsqueeze.getInputs()[0].getType());
    std::optional<SmallVector<int64_t>> axes = axesOf(unsqueeze, 1);
    if (!indicesType || !axes || axes->size() != 1 ||
        ((*axes)[0] != -1 && (*axes)[0] != indicesType.getRank()))
      continue;
    int64_t depth = static_cast<int64_t>(range->size());
    bool arange = depth >= 1;
    for (int64_t c = 0; c < depth && arange; ++c)
      arange = range->asDouble(c) == static_cast<double>(c);
    if (arange)
      return OneHot{equal.getResult(0), unsqueeze.getInputs()[0], depth};
  }
  return std::nullopt;
}

std::optional<OneHot> matchOneHot(Value value) {
  Value root = skipExactCasts(value, 1);
  if (auto equal = root.getDefiningOp<onnx::EqualOp>())
    return matchEqualOneHot(equal);
  auto oneHot = root.getDefiningOp<onnx::OneHotOp>();
  if (!oneHot)
    return std::nullopt;
  std::optional<ConstTensor> values =
      foldConstantExpression(oneHot.getInputs()[2]);
  auto axis = oneHot->getAttrOfType<IntegerAttr>("axis");
  auto indicesType =
      dyn_cast<RankedTensorType>(oneHot.getInputs()[0].getType());
  std::optional<int64_t> depth = oneHotDepth(oneHot);
  if (!values || values->size() != 2 || values->asDouble(0) != 0.0 ||
      values->asDouble(1) != 1.0 || !indicesType || !depth ||
      (axis && axis.getInt() != -1 && axis.getInt() != indicesType.getRank()))
    return std::nullopt;
  return OneHot{oneHot.getResult(0), oneHot.getInputs()[0], *depth};
}

//===----------------------------------------------------------------------===//
// Experts
//===----------------------------------------------------------------------===//

SmallVector<int64_t> Projection::shape() const {
  ArrayRef<int64_t> s =
      cast<RankedTensorType>(weight->getResult(0).getType()).getShape();
  return transposed ? SmallVector<int64_t>{s[0], s[2], s[1]}
                    : SmallVector<int64_t>(s);
}

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


std::optional<EinsumExperts> matchExperts(Value output,
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
FailureOr<Value> layerWeight(const Projection &projection,
                                    StringRef name, Location loc,
                                    PatternRewriter &rewriter) {
  if (!projection.transposed)
    return projection.weight->getResult(0);
  return transposeExpertWeights(projection.weight, name, loc, rewriter);
}

/// ONNX's TensorProto code for a float element type (the `to` of Cast).
std::optional<int64_t> onnxTypeCode(Type type) {
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


FailureOr<EinsumBlock> matchEinsumBlock(Value expertOutputs,
                                        onnx::EinsumOp combine,
                                        PatternRewriter &rewriter) {
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
  return EinsumBlock{*experts, dispatch, dispatched->first,
                     skipNoOps(dispatched->second)};
}

LogicalResult setExpertWeights(LayerSpec &spec, const EinsumExperts &experts,
                               Value x, int64_t numExperts, int64_t &width,
                               Location loc, PatternRewriter &rewriter) {
  // Weights as [E, out, in]: fc1 and fc3 [E, F, H], fc2 [E, M, F].
  auto xType = cast<RankedTensorType>(x.getType());
  Type elementType = xType.getElementType();
  SmallVector<int64_t> fc1 = experts.fc1.shape(), fc2 = experts.fc2.shape();
  auto sameElements = [&](const Projection &p) {
    return getElementTypeOrSelf(p.weight->getResult(0).getType()) ==
           elementType;
  };
  if (fc1[0] != numExperts || fc1[2] != xType.getDimSize(1) ||
      fc2[0] != numExperts || fc2[2] != fc1[1] ||
      (experts.fc3 && experts.fc3->shape() != fc1) ||
      !sameElements(experts.fc1) || !sameElements(experts.fc2) ||
      (experts.fc3 && !sameElements(*experts.fc3)))
    return failure();
  FailureOr<Value> w1 = layerWeight(experts.fc1, "experts_fc1", loc, rewriter);
  FailureOr<Value> w2 = layerWeight(experts.fc2, "experts_fc2", loc, rewriter);
  FailureOr<Value> w3 =
      experts.fc3 ? layerWeight(*experts.fc3, "experts_fc3", loc, rewriter)
                  : FailureOr<Value>(Value());
  if (failed(w1) || failed(w2) || failed(w3))
    return failure();
  FFNMatch ffn;
  ffn.activation = experts.activation;
  ffn.custom = experts.custom;
  ffn.fc3 = experts.fc3 ? experts.fc3->weight : arith::ConstantOp();
  spec.fc1 = *w1;
  spec.fc3 = *w3;
  spec.fc2 = *w2;
  spec.activation = activationOf(ffn, rewriter.getContext());
  width = fc2[1];
  return success();
}

LogicalResult replaceCombine(onnx::EinsumOp combine, const LayerSpec &spec,
                             int64_t width, PatternRewriter &rewriter) {
  auto xType = cast<RankedTensorType>(spec.input.getType());
  Type elementType = xType.getElementType();
  Value output = combine.getOutputs()[0];
  auto layerType =
      RankedTensorType::get({xType.getDimSize(0), width}, elementType);
  auto outputType = dyn_cast<TensorType>(output.getType());
  std::optional<int64_t> typeCode = onnxTypeCode(elementType);
  if (!outputType || outputType.getElementType() != elementType ||
      failed(verifyCompatibleShape(outputType, layerType)) || !typeCode)
    return rewriter.notifyMatchFailure(combine, "block output type differs");
  Location loc = combine.getLoc();
  LayerOp layer = createLayer(rewriter, loc, layerType, spec);
  if (failed(verify(layer))) {
    rewriter.eraseOp(layer);
    return rewriter.notifyMatchFailure(combine, "the layer would not verify");
  }
  Value result = layer.getOutput();
  // ONNX shape inference leaves the block's output dynamic (the capacity
  // is data to it); a Cast to the same element type keeps that type.
  if (outputType != layerType)
    result = onnx::CastOp::create(
                 rewriter, loc, TypeRange{outputType}, ValueRange{result},
                 {rewriter.getNamedAttr(
                     "to", rewriter.getI64IntegerAttr(*typeCode))})
                 .getOutputs()[0];
  if (failed(checkRaisedBlock(output, result, {spec.input, spec.logits},
                              combine, rewriter, spec.requireCheck))) {
    if (result != layer.getOutput())
      rewriter.eraseOp(result.getDefiningOp());
    rewriter.eraseOp(layer);
    return failure();
  }
  rewriter.replaceOp(combine, result);
  return success();
}

} // namespace mlir::moe::raise
