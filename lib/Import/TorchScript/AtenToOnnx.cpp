//===- AtenToOnnx.cpp - aten ops as ONNX nodes ----------------------------===//
//
// One small translation per aten op family, producing the ONNX operators that
// torch.onnx's symbolics (opset 17) produce for it, with what torch.onnx
// folds at static shapes (sizes, shape tensors) folded here too. Arguments
// that are ONNX attributes (dims, k, dtypes, equations) must be known at
// import time. This file: arithmetic, casts, linear algebra, reductions and
// routing; AtenShapes.cpp: shapes, indexing, lists and factories.
//
//===----------------------------------------------------------------------===//

#include "AtenToOnnx.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::torchscript;

namespace aten = c10::aten;
using T = GraphTranslator;

std::string torchscript::intAs1D(T &t, Value *value) {
  const Operand &operand = t.operand(value);
  if (operand.isKnown())
    return t.onnx.constantInts({t.getInt(value)});
  std::string scalar = t.onnx.cast(t.tensor(operand), at::kLong);
  return t.onnx.op("Unsqueeze", {scalar, t.onnx.constantInts({0})});
}

std::string torchscript::intAs0D(T &t, Value *value) {
  return t.tensorAs(value, at::kLong);
}

std::pair<std::string, std::string> torchscript::promoted(T &t, Value *lhs,
                                                          Value *rhs) {
  at::ScalarType type = t.promotedType({lhs, rhs});
  return {t.tensorAs(lhs, type), t.tensorAs(rhs, type)};
}

/// The reduction input of sum/cumsum: cast to `dtype` if given, else
/// integral and bool tensors widened to int64 as torch does.
static std::string accumulated(T &t, Value *self, Value *dtype) {
  std::string input = t.tensor(self);
  if (std::optional<at::ScalarType> type = t.getOptionalDtype(dtype))
    return t.onnx.cast(input, *type);
  if (!at::isFloatingType(t.onnx.elementType(input)))
    return t.onnx.cast(input, at::kLong);
  return input;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

namespace {
struct UnaryOp {
  c10::Symbol kind;
  const char *onnx;
  /// Whether torch computes it in floating point for integral inputs.
  bool promotesToFloat;
};
} // namespace

static const UnaryOp kUnaryOps[] = {
    {aten::sigmoid, "Sigmoid", true}, {aten::relu, "Relu", false},
    {aten::tanh, "Tanh", true},       {aten::cos, "Cos", true},
    {aten::sin, "Sin", true},       {aten::exp, "Exp", true},
    {aten::log, "Log", true},         {aten::sqrt, "Sqrt", true},
    {aten::erf, "Erf", true},         {aten::reciprocal, "Reciprocal", true},
    {aten::abs, "Abs", false},        {aten::neg, "Neg", false},
    {aten::ceil, "Ceil", false},      {aten::floor, "Floor", false},
    {aten::sign, "Sign", false},      {aten::round, "Round", false},
    {aten::tan, "Tan", true},         {aten::atan, "Atan", true},
    {aten::asin, "Asin", true},       {aten::acos, "Acos", true},
    {aten::sinh, "Sinh", true},       {aten::cosh, "Cosh", true},
    {aten::asinh, "Asinh", true},     {aten::acosh, "Acosh", true},
    {aten::atanh, "Atanh", true},
};

/// The floating-point input of an op that torch computes in floating point.
static std::string floatInput(T &t, Value *value) {
  std::string input = t.tensor(value);
  if (!at::isFloatingType(t.onnx.elementType(input)))
    return t.onnx.cast(input, at::kFloat);
  return input;
}

static void translateUnary(T &t, Node *node) {
  const UnaryOp &op = *llvm::find_if(
      kUnaryOps, [&](const UnaryOp &op) { return op.kind == node->kind(); });
  if (node->kind() == aten::round && node->inputs().size() > 1 &&
      t.knownValue(node->input(1)).toInt() != 0)
    fail("round with decimals other than 0 is not supported");
  std::string input = op.promotesToFloat ? floatInput(t, node->input(0))
                                         : t.tensor(node->input(0));
  // Rounding an integer is the integer.
  if ((node->kind() == aten::ceil || node->kind() == aten::floor ||
       node->kind() == aten::round) &&
      !at::isFloatingType(t.onnx.elementType(input))) {
    t.set(node->output(), t.operand(node->input(0)));
    return;
  }
  setResult(t, node, t.onnx.op(op.onnx, {input}));
}

static void translateSilu(T &t, Node *node) {
  std::string input = floatInput(t, node->input(0));
  setResult(t, node, t.onnx.op("Mul", {input, t.onnx.op("Sigmoid", {input})}));
}

static void translateGelu(T &t, Node *node) {
  std::string x = floatInput(t, node->input(0));
  at::ScalarType type = t.onnx.elementType(x);
  auto scalar = [&](double value) {
    return t.onnx.constantScalar(value, type);
  };
  std::string approximate = "none";
  if (node->inputs().size() > 1)
    approximate = t.knownValue(node->input(1)).toStringRef();
  std::string inner;
  if (approximate == "none") {
    inner = t.onnx.op("Erf", {t.onnx.op("Div", {x, scalar(M_SQRT2)})});
  } else if (approximate == "tanh") {
    std::string cube = t.onnx.op("Mul", {x, t.onnx.op("Mul", {x, x})});
    std::string sum =
        t.onnx.op("Add", {x, t.onnx.op("Mul", {scalar(0.044715), cube})});
    inner = t.onnx.op("Tanh",
                      {t.onnx.op("Mul", {scalar(std::sqrt(2 / M_PI)), sum})});
  } else {
    fail("approximate='" + approximate + "' is not a gelu variant");
  }
  std::string onePlus = t.onnx.op("Add", {inner, scalar(1.0)});
  setResult(t, node,
            t.onnx.op("Mul", {t.onnx.op("Mul", {x, onePlus}), scalar(0.5)}));
}

static void translateRsqrt(T &t, Node *node) {
  std::string input = floatInput(t, node->input(0));
  std::string one = t.onnx.constantScalar(1.0, t.onnx.elementType(input));
  setResult(t, node, t.onnx.op("Div", {one, t.onnx.op("Sqrt", {input})}));
}

static void translateNot(T &t, Node *node) {
  if (node->kind() == aten::bitwise_not &&
      t.dtypeOf(node->input(0)) != at::kBool)
    fail("bitwise not of integers has no ONNX operator in opset 17");
  setResult(t, node, t.onnx.op("Not", {t.tensorAs(node->input(0), at::kBool)}));
}

namespace {
struct BinaryOp {
  c10::Symbol kind;
  const char *onnx;
  /// Whether the operands are booleans (logical ops).
  bool logical = false;
  /// Whether the result is negated (ne).
  bool negated = false;
};
} // namespace

static const BinaryOp kBinaryOps[] = {
    {aten::mul, "Mul"},
    {aten::pow, "Pow"},
    {aten::eq, "Equal"},
    {aten::ne, "Equal", false, true},
    {aten::lt, "Less"},
    {aten::le, "LessOrEqual"},
    {aten::gt, "Greater"},
    {aten::ge, "GreaterOrEqual"},
    {aten::maximum, "Max"},
    {aten::minimum, "Min"},
    {aten::logical_and, "And", true},
    {aten::logical_or, "Or", true},
    {aten::bitwise_and, "And", true},
    {aten::bitwise_or, "Or", true},
    {aten::__and__, "And", true},
    {aten::__or__, "Or", true},
};

static void translateBinary(T &t, Node *node) {
  const BinaryOp &op = *llvm::find_if(
      kBinaryOps, [&](const BinaryOp &op) { return op.kind == node->kind(); });
  Value *lhs = node->input(0), *rhs = node->input(1);
  std::string a, b;
  if (op.logical) {
    bool bitwise =
        node->kind() != aten::logical_and && node->kind() != aten::logical_or;
    if (bitwise && t.promotedType({lhs, rhs}) != at::kBool)
      fail("bitwise ops on integers have no ONNX operator in opset 17");
    a = t.tensorAs(lhs, at::kBool);
    b = t.tensorAs(rhs, at::kBool);
  } else {
    std::tie(a, b) = promoted(t, lhs, rhs);
  }
  std::string result = t.onnx.op(op.onnx, {a, b});
  if (op.negated)
    result = t.onnx.op("Not", {result});
  setResult(t, node, result);
}

/// add, sub, rsub: self + alpha * other and the like.
static void translateAddSub(T &t, Node *node) {
  Value *lhs = node->input(0), *rhs = node->input(1);
  if (node->kind() == aten::rsub)
    std::swap(lhs, rhs);
  at::ScalarType type = t.promotedType({lhs, rhs});
  std::string scaled = t.tensorAs(rhs, type);
  Value *alpha = node->inputs().size() > 2 ? node->input(2) : nullptr;
  // The alpha operand multiplies the self operand of rsub, the other one of
  // add and sub; after the swap above that is `rhs` in every case.
  if (alpha &&
      !(t.operand(alpha).isKnown() && t.knownValue(alpha).toScalar().equal(1)))
    scaled = t.onnx.op("Mul", {scaled, t.tensorAs(alpha, type)});
  const char *opType = node->kind() == aten::add ? "Add" : "Sub";
  setResult(t, node, t.onnx.op(opType, {t.tensorAs(lhs, type), scaled}));
}

/// a / b rounded toward minus infinity for integers, whose ONNX Div
/// truncates: as torch.onnx does, the quotient less one where the signs
/// differ and the division is inexact.
static std::string floorDivideIntegers(T &t, const std::string &a,
                                       const std::string &b) {
  at::ScalarType type = t.onnx.elementType(a);
  std::string zero = t.onnx.constantScalar(0, type);
  std::string quotient = t.onnx.op("Div", {a, b});
  std::string remainder =
      t.onnx.op("Sub", {a, t.onnx.op("Mul", {quotient, b})});
  std::string signsDiffer =
      t.onnx.op("Not", {t.onnx.op("Equal", {t.onnx.op("Less", {a, zero}),
                                            t.onnx.op("Less", {b, zero})})});
  std::string inexact =
      t.onnx.op("Not", {t.onnx.op("Equal", {remainder, zero})});
  std::string lower =
      t.onnx.op("Sub", {quotient, t.onnx.constantScalar(1, type)});
  return t.onnx.op("Where",
                   {t.onnx.op("And", {signsDiffer, inexact}), lower, quotient});
}

/// div (true, floor or trunc rounding), floor_divide and floordiv.
static void translateDiv(T &t, Node *node) {
  Value *lhs = node->input(0), *rhs = node->input(1);
  at::ScalarType type = t.promotedType({lhs, rhs});
  std::string rounding = node->kind() == aten::div ? "" : "floor";
  if (Value *mode = t.namedInput(node, "rounding_mode");
      mode && !t.isNone(mode))
    rounding = t.knownValue(mode).toStringRef();
  bool floating = at::isFloatingType(type);
  // True division of integers gives the default float type.
  if (rounding.empty() && !floating)
    type = at::kFloat;
  std::string a = t.tensorAs(lhs, type), b = t.tensorAs(rhs, type);
  if (rounding == "floor" && !floating) {
    setResult(t, node, floorDivideIntegers(t, a, b));
    return;
  }
  std::string quotient = t.onnx.op("Div", {a, b});
  if (rounding == "floor") {
    quotient = t.onnx.op("Floor", {quotient});
  } else if (rounding == "trunc" && floating) {
    std::string negative =
        t.onnx.op("Less", {quotient, t.onnx.constantScalar(0, type)});
    quotient = t.onnx.op("Where", {negative, t.onnx.op("Ceil", {quotient}),
                                   t.onnx.op("Floor", {quotient})});
  } else if (!rounding.empty() && rounding != "trunc") {
    fail("rounding_mode='" + rounding + "' is not a division mode");
  }
  setResult(t, node, quotient);
}

static void translateMaskedFill(T &t, Node *node) {
  std::string self = t.tensor(node->input(0));
  std::string value = t.tensorAs(node->input(2), t.onnx.elementType(self));
  setResult(
      t, node,
      t.onnx.op("Where", {t.tensorAs(node->input(1), at::kBool), value, self}));
}

static void translateClamp(T &t, Node *node) {
  std::string self = t.tensor(node->input(0));
  at::ScalarType type = t.onnx.elementType(self);
  auto bound = [&](Value *value) {
    return !value || t.isNone(value) ? std::string() : t.tensorAs(value, type);
  };
  Value *min = t.namedInput(node, "min"), *max = t.namedInput(node, "max");
  setResult(t, node, t.onnx.op("Clip", {self, bound(min), bound(max)}));
}

//===----------------------------------------------------------------------===//
// Casts
//===----------------------------------------------------------------------===//

/// to (with a dtype, or another tensor's) and type_as.
static void translateTo(T &t, Node *node) {
  std::optional<at::ScalarType> type;
  if (Value *dtype = t.namedInput(node, "dtype"))
    type = t.getOptionalDtype(dtype);
  else if (Value *other = t.namedInput(node, "other"))
    type = t.dtypeOf(other);
  if (!type) {
    t.set(node->output(), t.operand(node->input(0)));
    return;
  }
  setResult(t, node, t.onnx.cast(t.tensor(node->input(0)), *type));
}

/// aten::Int/Float/Bool of a runtime tensor: a 0-d tensor of that type.
static void translateNumber(T &t, Node *node) {
  std::string input = t.tensor(node->input(0));
  if (t.onnx.rank(input) != 0)
    input = t.onnx.op("Reshape", {input, t.onnx.constantInts({})});
  at::ScalarType type = node->kind() == aten::Int     ? at::kLong
                        : node->kind() == aten::Float ? at::kDouble
                                                      : at::kBool;
  setResult(t, node, t.onnx.cast(input, type));
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

static void translateLinear(T &t, Node *node) {
  std::string input = t.tensor(node->input(0));
  std::string weight = t.transposed(node->input(1));
  Value *bias = node->input(2);
  if (t.isNone(bias)) {
    setResult(t, node, t.onnx.op("MatMul", {input, weight}));
    return;
  }
  // torch.onnx: addmm (Gemm) for matrices, else matmul then bias + product.
  if (t.onnx.rank(input) == 2) {
    setResult(t, node, t.onnx.op("Gemm", {input, weight, t.tensor(bias)}));
    return;
  }
  std::string product = t.onnx.op("MatMul", {input, weight});
  setResult(t, node, t.onnx.op("Add", {t.tensor(bias), product}));
}

static void translateMatMul(T &t, Node *node) {
  setResult(t, node,
            t.onnx.op("MatMul",
                      {t.tensor(node->input(0)), t.tensor(node->input(1))}));
}

static void translateEinsum(T &t, Node *node) {
  std::string equation = t.knownValue(node->input(0)).toStringRef();
  SmallVector<std::string> operands = t.tensorList(node->input(1));
  // ONNX's Einsum has no bool; torch.onnx computes it in int64.
  bool isBool =
      !operands.empty() && t.onnx.elementType(operands.front()) == at::kBool;
  if (isBool)
    for (std::string &operand : operands)
      operand = t.onnx.cast(operand, at::kLong);
  std::string result =
      t.onnx.op("Einsum", operands, {stringAttr("equation", equation)});
  setResult(t, node, isBool ? t.onnx.cast(result, at::kBool) : result);
}

//===----------------------------------------------------------------------===//
// Reductions and routing
//===----------------------------------------------------------------------===//

static void translateSoftmax(T &t, Node *node) {
  std::string input = t.tensor(node->input(0));
  if (std::optional<at::ScalarType> type =
          t.getOptionalDtype(t.namedInput(node, "dtype")))
    input = t.onnx.cast(input, *type);
  setResult(t, node,
            t.onnx.op("Softmax", {input},
                      {intAttr("axis", t.getInt(node->input(1)))}));
}

static void translateTopK(T &t, Node *node) {
  SmallVector<std::string> results = t.onnx.addNode(
      "TopK", {t.tensor(node->input(0)), intAs1D(t, node->input(1))},
      {intAttr("axis", t.getInt(node->input(2))),
       intAttr("largest", t.getBool(node->input(3))),
       intAttr("sorted", t.getBool(node->input(4)))},
      2);
  setResult(t, node, results[0], 0);
  setResult(t, node, results[1], 1);
}

/// The dims of a reduction (empty for all) and keepdim.
static std::pair<SmallVector<int64_t>, bool> reductionDims(T &t, Node *node) {
  Value *dim = t.namedInput(node, "dim");
  if (!dim || t.isNone(dim))
    return {{}, false};
  return {t.getIntList(dim), t.getBool(t.namedInput(node, "keepdim"))};
}

static void translateSum(T &t, Node *node) {
  std::string input =
      accumulated(t, node->input(0), t.namedInput(node, "dtype"));
  auto [dims, keepdim] = reductionDims(t, node);
  SmallVector<std::string> operands = {input};
  if (!dims.empty())
    operands.push_back(t.onnx.constantInts(dims));
  setResult(t, node,
            t.onnx.op("ReduceSum", operands, {intAttr("keepdims", keepdim)}));
}

static void translateMean(T &t, Node *node) {
  std::string input = t.tensor(node->input(0));
  if (std::optional<at::ScalarType> type =
          t.getOptionalDtype(t.namedInput(node, "dtype")))
    input = t.onnx.cast(input, *type);
  auto [dims, keepdim] = reductionDims(t, node);
  SmallVector<::ONNX_NAMESPACE::AttributeProto> attrs = {intAttr("keepdims", keepdim)};
  if (!dims.empty())
    attrs.push_back(intsAttr("axes", dims));
  setResult(t, node, t.onnx.op("ReduceMean", {input}, attrs));
}

/// max / amax / max.dim (values and indices) / max.other.
static void translateMax(T &t, Node *node) {
  Value *other = t.namedInput(node, "other");
  if (other) {
    auto [lhs, rhs] = promoted(t, node->input(0), other);
    setResult(t, node, t.onnx.op("Max", {lhs, rhs}));
    return;
  }
  std::string input = t.tensor(node->input(0));
  auto [dims, keepdim] = reductionDims(t, node);
  SmallVector<::ONNX_NAMESPACE::AttributeProto> attrs = {intAttr("keepdims", keepdim)};
  if (!dims.empty())
    attrs.push_back(intsAttr("axes", dims));
  setResult(t, node, t.onnx.op("ReduceMax", {input}, attrs));
  if (node->outputs().size() == 2 && node->output(1)->hasUses())
    setResult(t, node,
              t.onnx.op("ArgMax", {input},
                        {intAttr("axis", dims.front()),
                         intAttr("keepdims", keepdim)}),
              1);
}

static void translateArgMax(T &t, Node *node) {
  std::string input = t.tensor(node->input(0));
  std::optional<int64_t> dim = t.getOptionalInt(node->input(1));
  bool keepdim = t.getBool(node->input(2));
  if (!dim) {
    if (keepdim)
      fail("argmax over all elements with keepdim is not supported");
    input = t.onnx.op("Reshape", {input, t.onnx.constantInts({-1})});
    dim = 0;
  }
  setResult(t, node,
            t.onnx.op("ArgMax", {input},
                      {intAttr("axis", *dim), intAttr("keepdims", keepdim)}));
}

static void translateCumSum(T &t, Node *node) {
  std::string input =
      accumulated(t, node->input(0), t.namedInput(node, "dtype"));
  setResult(t, node, t.onnx.op("CumSum", {input, intAs0D(t, node->input(1))}));
}

static void translateOneHot(T &t, Node *node) {
  int64_t numClasses = t.getInt(node->input(1));
  if (numClasses < 0)
    fail("num_classes=-1 takes the class count from the data; give it "
         "explicitly");
  setResult(t, node,
            t.onnx.op("OneHot",
                      {t.tensor(node->input(0)),
                       t.onnx.constantScalar(numClasses, at::kLong),
                       t.onnx.constantInts({0, 1})},
                      {intAttr("axis", -1)}));
}

/// sort as a full TopK along `dim` (ascending is largest=0). ONNX's TopK
/// puts equal elements in index order, as torch's stable CPU sort does.
static void translateSort(T &t, Node *node) {
  std::string input = t.tensor(node->input(0));
  int64_t rank = t.onnx.rank(input);
  int64_t dim = t.normalizeDim(t.getInt(t.namedInput(node, "dim")), rank);
  bool descending = t.getBool(t.namedInput(node, "descending"));
  if (rank == 0) {
    setResult(t, node, input, 0);
    setResult(t, node, t.onnx.constantScalar(0, at::kLong), 1);
    return;
  }
  std::string k;
  SmallVector<int64_t> dims = t.onnx.shape(input);
  if (dims[dim] >= 0)
    k = t.onnx.constantInts({dims[dim]});
  else
    k = t.onnx.op("Gather", {t.onnx.shapeOf(input), t.onnx.constantInts({dim})},
                  {intAttr("axis", 0)});
  SmallVector<std::string> results = t.onnx.addNode(
      "TopK", {input, k},
      {intAttr("axis", dim), intAttr("largest", descending),
       intAttr("sorted", 1)},
      2);
  setResult(t, node, results[0], 0);
  setResult(t, node, results[1], 1);
}

/// histc: `bins` equal bins over [min, max] (max falls in the last bin;
/// values outside are not counted), as torch's CPU kernel computes the bin:
/// (x - min) / (max - min) * bins, truncated. min == max takes the data's
/// range, which must then be computed at run time: refused.
static void translateHistc(T &t, Node *node) {
  std::string input = t.tensor(node->input(0));
  at::ScalarType type = t.onnx.elementType(input);
  if (!at::isFloatingType(type))
    fail("histc of a non-floating-point tensor");
  int64_t bins = t.getInt(t.namedInput(node, "bins"));
  double lo = t.getDouble(t.namedInput(node, "min"));
  double hi = t.getDouble(t.namedInput(node, "max"));
  if (bins <= 0)
    fail("histc with bins=" + Twine(bins));
  if (!(lo < hi))
    fail("histc with min >= max takes its range from the data at run time; "
         "give min and max explicitly");
  std::string flat = t.onnx.op("Reshape", {input, t.onnx.constantInts({-1})});
  std::string loC = t.onnx.constantScalar(lo, type);
  std::string hiC = t.onnx.constantScalar(hi, type);
  std::string inRange =
      t.onnx.op("And", {t.onnx.op("GreaterOrEqual", {flat, loC}),
                        t.onnx.op("LessOrEqual", {flat, hiC})});
  std::string scaled = t.onnx.op(
      "Mul", {t.onnx.op("Div", {t.onnx.op("Sub", {flat, loC}),
                                t.onnx.constantScalar(hi - lo, type)}),
              t.onnx.constantScalar(static_cast<double>(bins), type)});
  std::string bin = t.onnx.cast(t.onnx.op("Floor", {scaled}), at::kLong);
  bin = t.onnx.op("Min", {bin, t.onnx.constantScalar(bins - 1, at::kLong)});
  // Out-of-range values go to bin -1, which no bin matches.
  bin = t.onnx.op("Where",
                  {inRange, bin, t.onnx.constantScalar(-1, at::kLong)});
  std::string edges = t.onnx.op(
      "Range", {t.onnx.constantScalar(0, at::kLong),
                t.onnx.constantScalar(bins, at::kLong),
                t.onnx.constantScalar(1, at::kLong)});
  std::string hits = t.onnx.op(
      "Equal", {t.onnx.op("Unsqueeze", {bin, t.onnx.constantInts({1})}),
                t.onnx.op("Unsqueeze", {edges, t.onnx.constantInts({0})})});
  setResult(t, node,
            t.onnx.op("ReduceSum",
                      {t.onnx.cast(hits, type), t.onnx.constantInts({0})},
                      {intAttr("keepdims", 0)}));
}

/// torch._grouped_mm(mat_a [M, K], mat_b [G, K, N], offs [G]): rows
/// offs[g-1]..offs[g] of mat_a times mat_b[g], as transformers' grouped_mm
/// fallback loops over the groups. Every shape stays static: each group's
/// MatMul takes all M rows and a Where keeps the rows of its range (rows
/// past offs[G-1] are zero).
static void translateGroupedMM(T &t, Node *node) {
  Value *matA = node->input(0), *matB = node->input(1);
  Value *offs = t.namedInput(node, "offs");
  if (!offs || t.isNone(offs))
    fail("_grouped_mm without offs (batched form) is not supported");
  if (Value *bias = t.namedInput(node, "bias"); bias && !t.isNone(bias))
    fail("_grouped_mm with a bias is not supported");
  if (t.rankOf(matA) != 2 || t.rankOf(matB) != 3)
    fail("_grouped_mm is supported for a 2-d mat_a and a 3-d mat_b, got "
         "ranks " +
         Twine(t.rankOf(matA)) + " and " + Twine(t.rankOf(matB)));
  at::ScalarType type = t.dtypeOf(matA);
  if (std::optional<at::ScalarType> out =
          t.getOptionalDtype(t.namedInput(node, "out_dtype")))
    type = *out;
  std::string a = t.tensor(matA);
  const Operand &b = t.operand(matB);
  SmallVector<int64_t> bDims =
      b.isKnown() ? SmallVector<int64_t>(b.value.toTensor().sizes().begin(),
                                         b.value.toTensor().sizes().end())
                  : t.onnx.shape(t.tensor(b));
  int64_t groups = bDims[0];
  if (groups < 0)
    fail("_grouped_mm needs a static group count");
  std::string ends = t.onnx.cast(t.tensor(offs), at::kLong);
  // The row indices [M, 1]: a constant at a static M.
  std::string rows;
  if (int64_t numRows = t.onnx.shape(a)[0]; numRows >= 0) {
    rows = t.onnx.constant(at::arange(numRows, at::kLong).unsqueeze(1));
  } else {
    std::string count = t.onnx.op(
        "Squeeze", {t.onnx.op("Gather",
                              {t.onnx.shapeOf(a), t.onnx.constantInts({0})},
                              {intAttr("axis", 0)}),
                    t.onnx.constantInts({0})});
    rows = t.onnx.op(
        "Unsqueeze",
        {t.onnx.op("Range", {t.onnx.constantScalar(0, at::kLong), count,
                             t.onnx.constantScalar(1, at::kLong)}),
         t.onnx.constantInts({1})});
  }
  std::string result;
  std::string start = t.onnx.constantInts({0});
  for (int64_t g = 0; g < groups; ++g) {
    std::string end = t.onnx.op(
        "Slice", {ends, t.onnx.constantInts({g}), t.onnx.constantInts({g + 1}),
                  t.onnx.constantInts({0})});
    std::string weight;
    if (b.isKnown()) {
      at::Tensor slice = b.value.toTensor().select(0, g).contiguous();
      weight = t.tensor(Operand::known(
          slice, (b.path.empty() ? "grouped_mm" : b.path) + "." +
                     std::to_string(g)));
    } else {
      weight = t.onnx.op(
          "Gather", {t.tensor(b), t.onnx.constantScalar(g, at::kLong)},
          {intAttr("axis", 0)});
    }
    std::string product = t.onnx.op("MatMul", {a, weight});
    std::string inGroup =
        t.onnx.op("And", {t.onnx.op("GreaterOrEqual", {rows, start}),
                          t.onnx.op("Less", {rows, end})});
    if (result.empty())
      result = t.onnx.op(
          "Where", {inGroup, product,
                    t.onnx.constantScalar(0, t.onnx.elementType(product))});
    else
      result = t.onnx.op("Where", {inGroup, product, result});
    start = end;
  }
  setResult(t, node, t.onnx.cast(result, type));
}

/// p-norm over dims (linalg_vector_norm / norm with known p).
static void translateVectorNorm(T &t, Node *node) {
  std::string input = t.tensor(node->input(0));
  double p = t.getDouble(node->input(1));
  Value *dimValue = node->input(2);
  SmallVector<int64_t> dims;
  if (!t.isNone(dimValue))
    dims = t.getIntList(dimValue);
  bool keepdim = t.getBool(node->input(3));
  if (node->inputs().size() > 4)
    if (std::optional<at::ScalarType> type =
            t.getOptionalDtype(node->input(4)))
      input = t.onnx.cast(input, *type);
  SmallVector<std::string> operands;
  auto reduce = [&](StringRef op, std::string value) {
    SmallVector<std::string> inputs = {value};
    SmallVector<::ONNX_NAMESPACE::AttributeProto> attrs = {
        intAttr("keepdims", keepdim)};
    if (op == "ReduceSum") {
      if (!dims.empty())
        inputs.push_back(t.onnx.constantInts(dims));
    } else if (!dims.empty()) {
      attrs.push_back(intsAttr("axes", dims));
    }
    return t.onnx.op(op, inputs, attrs);
  };
  std::string abs = t.onnx.op("Abs", {input});
  at::ScalarType type = t.onnx.elementType(input);
  std::string result;
  if (p == 1) {
    result = reduce("ReduceSum", abs);
  } else if (p == 2) {
    result = t.onnx.op(
        "Sqrt", {reduce("ReduceSum", t.onnx.op("Mul", {input, input}))});
  } else if (std::isinf(p) && p > 0) {
    result = reduce("ReduceMax", abs);
  } else if (p > 0) {
    std::string power = reduce(
        "ReduceSum",
        t.onnx.op("Pow", {abs, t.onnx.constantScalar(p, type)}));
    result =
        t.onnx.op("Pow", {power, t.onnx.constantScalar(1.0 / p, type)});
  } else {
    fail("vector norm with p=" + std::to_string(p) + " is not supported");
  }
  setResult(t, node, result);
}

//===----------------------------------------------------------------------===//
// Normalisation
//===----------------------------------------------------------------------===//

static void translateLayerNorm(T &t, Node *node) {
  std::string input = t.tensor(node->input(0));
  SmallVector<int64_t> normalized = t.getIntList(node->input(1));
  at::ScalarType type = t.onnx.elementType(input);
  auto parameter = [&](Value *value, double otherwise) {
    if (!t.isNone(value))
      return t.tensor(value);
    std::vector<int64_t> shape(normalized.begin(), normalized.end());
    return t.onnx.constant(
        at::full(shape, otherwise, at::TensorOptions().dtype(type)));
  };
  setResult(
      t, node,
      t.onnx.op("LayerNormalization",
                {input, parameter(node->input(2), 1.0),
                 parameter(node->input(3), 0.0)},
                {intAttr("axis", -static_cast<int64_t>(normalized.size())),
                 floatAttr("epsilon", t.getDouble(node->input(4)))}));
}

//===----------------------------------------------------------------------===//
// The table
//===----------------------------------------------------------------------===//

void torchscript::addArithmeticHandlers(HandlerMap &handlers) {
  for (const UnaryOp &op : kUnaryOps)
    addHandler(handlers, {op.kind}, translateUnary);
  for (const BinaryOp &op : kBinaryOps)
    addHandler(handlers, {op.kind}, translateBinary);
  addHandler(handlers, {aten::silu}, translateSilu);
  addHandler(handlers, {aten::gelu}, translateGelu);
  addHandler(handlers, {aten::rsqrt}, translateRsqrt);
  addHandler(handlers, {aten::logical_not, aten::bitwise_not}, translateNot);
  addHandler(handlers, {aten::add, aten::sub, aten::rsub}, translateAddSub);
  addHandler(handlers, {aten::div, aten::floor_divide, aten::floordiv},
             translateDiv);
  addHandler(handlers, {aten::masked_fill}, translateMaskedFill);
  addHandler(handlers, {aten::clamp, aten::clamp_min, aten::clamp_max},
             translateClamp);
  addHandler(handlers, {aten::to, aten::type_as}, translateTo);
  addHandler(handlers, {aten::Int, aten::Float, aten::Bool}, translateNumber);
  addHandler(handlers, {aten::linear}, translateLinear);
  addHandler(handlers, {aten::matmul, aten::mm, aten::bmm}, translateMatMul);
  addHandler(handlers, {aten::einsum}, translateEinsum);
  addHandler(handlers, {aten::softmax}, translateSoftmax);
  addHandler(handlers, {aten::topk}, translateTopK);
  addHandler(handlers, {aten::sum}, translateSum);
  addHandler(handlers, {aten::mean}, translateMean);
  addHandler(handlers, {aten::max, aten::amax}, translateMax);
  addHandler(handlers, {aten::argmax}, translateArgMax);
  addHandler(handlers, {aten::cumsum}, translateCumSum);
  addHandler(handlers, {aten::sort}, translateSort);
  addHandler(handlers, {aten::histc}, translateHistc);
  addHandler(handlers, {c10::Symbol::fromQualString("aten::_grouped_mm")},
             translateGroupedMM);
  addHandler(handlers, {aten::linalg_vector_norm}, translateVectorNorm);
  addHandler(handlers, {aten::one_hot}, translateOneHot);
  addHandler(handlers, {aten::layer_norm}, translateLayerNorm);
}

Handler torchscript::lookupHandler(c10::Symbol kind) {
  static const HandlerMap handlers = [] {
    HandlerMap handlers;
    addArithmeticHandlers(handlers);
    addShapeHandlers(handlers);
    return handlers;
  }();
  return handlers.lookup(kind);
}
