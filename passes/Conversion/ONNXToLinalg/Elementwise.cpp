//===- Elementwise.cpp - lower elementwise onnx ops -----------------------===//
//
// Every elementwise op is one linalg.generic over the result, reading its
// operands through NumPy broadcasting maps (trailing dims align, size-1 dims
// read index 0). A scalar function per op builds the body; float and integer
// element types get the matching arith op. Comparisons yield i1; Cast
// converts with ONNX semantics.
//
//===----------------------------------------------------------------------===//

#include "mlir/Transforms/DialectConversion.h"
#include "passes/Conversion/ONNXToLinalg/Lowering.h"

namespace mlir::moe::onnx_lowering {

namespace {

/// Builds one result element (of element type `type`) from the operand
/// elements `args` (the present operands) of `op`.
using ScalarFn = Value (*)(OpBuilder &b, Location loc, Operation *op,
                           ValueRange args, Type type);

/// An elementwise op: `fn` of its present operands broadcast to the result.
/// `floatOnly` ops (exp, erf, ...) have no integer form.
struct ElementwiseLowering : ConversionPattern {
  ElementwiseLowering(MLIRContext *ctx, StringRef name, ScalarFn fn,
                      bool floatOnly)
      : ConversionPattern(name, /*benefit=*/1, ctx), fn(fn),
        floatOnly(floatOnly) {}

  LogicalResult
  matchAndRewrite(Operation *op, ArrayRef<Value> operands,
                  ConversionPatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    SmallVector<Value> inputs;
    for (Value operand : operands)
      if (!isNone(operand))
        inputs.push_back(operand);
    if (floatOnly &&
        !isa<FloatType>(tensorType(inputs.front()).getElementType()))
      return cannotLower(rewriter, op, "expects float operands");
    // Cast to the same type and Identity-like cases need no loop.
    if (isa<onnx::CastOp>(op) && tensorType(inputs.front()) == type) {
      rewriter.replaceOp(op, inputs.front());
      return success();
    }
    if (auto gelu = dyn_cast<onnx::GeluOp>(op); gelu && !geluForm(gelu))
      return cannotLower(rewriter, op,
                         "approximate='" + geluApproximation(gelu) +
                             "' (none or tanh)");
    if (isa<onnx::ClipOp>(op) && (op->hasAttr("min") || op->hasAttr("max")))
      return cannotLower(rewriter, op,
                         "min/max attributes (opset < 11) are not supported");
    Type elementType = type.getElementType();
    ScalarFn body = fn;
    rewriter.replaceOp(
        op, broadcastElements(rewriter, op->getLoc(), type, inputs,
                              [&](OpBuilder &b, Location loc, ValueRange args) {
                                return body(b, loc, op, args, elementType);
                              }));
    return success();
  }

  static std::string geluApproximation(onnx::GeluOp op) {
    auto approximate = op->getAttrOfType<StringAttr>("approximate");
    return approximate ? approximate.getValue().str() : "none";
  }
  /// Whether Gelu uses the tanh form; nullopt for an unknown one.
  static std::optional<bool> geluForm(onnx::GeluOp op) {
    std::string kind = geluApproximation(op);
    if (kind != "none" && kind != "tanh")
      return std::nullopt;
    return kind == "tanh";
  }

  ScalarFn fn;
  bool floatOnly;
};

} // namespace

//===----------------------------------------------------------------------===//
// Scalar functions
//===----------------------------------------------------------------------===//

static bool isFloat(Value value) { return isa<FloatType>(value.getType()); }

/// The float op `F` or the integer op `I` of two scalars.
template <typename F, typename I>
static Value arith2(OpBuilder &b, Location loc, Operation *, ValueRange args,
                    Type) {
  if (isFloat(args[0]))
    return F::create(b, loc, args[0], args[1]);
  return I::create(b, loc, args[0], args[1]);
}

/// The float math op `F` of one scalar.
template <typename F>
static Value math1(OpBuilder &b, Location loc, Operation *, ValueRange args,
                   Type) {
  return F::create(b, loc, args[0]);
}

/// `F` or `I` folded over all operands (Min, Max).
template <typename F, typename I>
static Value foldAll(OpBuilder &b, Location loc, Operation *op, ValueRange args,
                     Type type) {
  Value result = args[0];
  for (Value arg : args.drop_front())
    result = arith2<F, I>(b, loc, op, {result, arg}, type);
  return result;
}

/// A comparison: `fp` for floats, `sp` for integers, `up` for booleans.
template <arith::CmpFPredicate fp, arith::CmpIPredicate sp,
          arith::CmpIPredicate up>
static Value compare(OpBuilder &b, Location loc, Operation *, ValueRange args,
                     Type) {
  if (isFloat(args[0]))
    return arith::CmpFOp::create(b, loc, fp, args[0], args[1]);
  return arith::CmpIOp::create(b, loc, args[0].getType().isInteger(1) ? up : sp,
                               args[0], args[1]);
}

/// `base ^ exponent`: math.powf in the base's float type, or in f64 for
/// integer bases.
static Value pow(OpBuilder &b, Location loc, Operation *,
                   ValueRange args, Type type) {
  Type computeType = isFloat(args[0]) ? args[0].getType() : b.getF64Type();
  Value base = convertScalar(b, loc, args[0], computeType);
  Value exponent = convertScalar(b, loc, args[1], computeType);
  Value result = math::PowFOp::create(b, loc, base, exponent);
  return convertScalar(b, loc, result, type);
}

static Value neg(OpBuilder &b, Location loc, Operation *,
                   ValueRange args, Type type) {
  if (isFloat(args[0]))
    return arith::NegFOp::create(b, loc, args[0]);
  return arith::SubIOp::create(b, loc, scalarConst(b, loc, type, 0), args[0]);
}

static Value reciprocal(OpBuilder &b, Location loc, Operation *,
                   ValueRange args, Type type) {
  return arith::DivFOp::create(b, loc, scalarConst(b, loc, type, 1.0), args[0]);
}

static Value sigmoid(OpBuilder &b, Location loc, Operation *,
                   ValueRange args, Type) {
  return lowering::sigmoid(b, loc, args[0]);
}

static Value relu(OpBuilder &b, Location loc, Operation *,
                   ValueRange args, Type type) {
  return arith2<arith::MaximumFOp, arith::MaxSIOp>(
      b, loc, nullptr, {args[0], scalarConst(b, loc, type, 0)}, type);
}

/// |x|; integers as `x < 0 ? -x : x` (math.absi has no LLVM lowering in
/// the pipeline).
static Value abs(OpBuilder &b, Location loc, Operation *,
                   ValueRange args, Type type) {
  Value x = args[0];
  if (isFloat(x))
    return math::AbsFOp::create(b, loc, x);
  Value zero = scalarConst(b, loc, type, 0);
  Value negative =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, x, zero);
  return arith::SelectOp::create(b, loc, negative,
                                 arith::SubIOp::create(b, loc, zero, x), x);
}

/// Ceil and Floor; integers are already whole.
template <typename F>
static Value round(OpBuilder &b, Location loc, Operation *, ValueRange args,
                   Type) {
  if (isFloat(args[0]))
    return F::create(b, loc, args[0]);
  return args[0];
}

/// -1, 0 or 1 by the sign of x; a float zero or NaN is returned as it is.
static Value sign(OpBuilder &b, Location loc, Operation *,
                   ValueRange args, Type type) {
  Value x = args[0];
  Value zero = scalarConst(b, loc, type, 0.0);
  Value positive, negative;
  if (isFloat(x)) {
    positive = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, zero);
    negative = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x, zero);
  } else {
    positive = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, x, zero);
    negative = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, x, zero);
  }
  Value otherwise = arith::SelectOp::create(
      b, loc, negative, scalarConst(b, loc, type, -1.0), isFloat(x) ? x : zero);
  return arith::SelectOp::create(b, loc, positive,
                                 scalarConst(b, loc, type, 1.0), otherwise);
}

/// Round: halves to even, as ONNX (and torch.round) specify.
static Value roundHalfEven(OpBuilder &b, Location loc, Operation *,
                   ValueRange args, Type) {
  if (isFloat(args[0]))
    return math::RoundEvenOp::create(b, loc, args[0]);
  return args[0];
}

static Value isNaN(OpBuilder &b, Location loc, Operation *,
                   ValueRange args, Type) {
  return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, args[0],
                               args[0]);
}

/// Mean of the operands: their sum over their count.
static Value mean(OpBuilder &b, Location loc, Operation *,
                   ValueRange args, Type type) {
  Value sum = args[0];
  for (Value arg : args.drop_front())
    sum = arith::AddFOp::create(b, loc, sum, arg);
  return arith::DivFOp::create(
      b, loc, sum, scalarConst(b, loc, type, static_cast<double>(args.size())));
}

static Value bitwiseNot(OpBuilder &b, Location loc, Operation *,
                   ValueRange args, Type type) {
  return arith::XOrIOp::create(
      b, loc, args[0],
      arith::ConstantOp::create(
          b, loc, type,
          b.getIntegerAttr(type, APInt::getAllOnes(
                                     type.getIntOrFloatBitWidth()))));
}

static Value logicalNot(OpBuilder &b, Location loc, Operation *,
                   ValueRange args, Type type) {
  return arith::XOrIOp::create(b, loc, args[0], scalarConst(b, loc, type, 1));
}

static Value where(OpBuilder &b, Location loc, Operation *,
                   ValueRange args, Type) {
  return arith::SelectOp::create(b, loc, args[0], args[1], args[2]);
}

static Value castElement(OpBuilder &b, Location loc, Operation *,
                   ValueRange args, Type type) {
  return convertScalar(b, loc, args[0], type);
}

/// `log(1 + exp(x))` as `max(x, 0) + log(1 + exp(-|x|))`, which neither
/// overflows for large x nor loses small results for very negative x.
static Value softplus(OpBuilder &b, Location loc, Operation *,
                   ValueRange args, Type type) {
  Value x = args[0];
  Value zero = scalarConst(b, loc, type, 0.0);
  Value one = scalarConst(b, loc, type, 1.0);
  Value negAbs = arith::NegFOp::create(b, loc, math::AbsFOp::create(b, loc, x));
  Value tail = math::LogOp::create(
      b, loc,
      arith::AddFOp::create(b, loc, one, math::ExpOp::create(b, loc, negAbs)));
  return arith::AddFOp::create(
      b, loc, arith::MaximumFOp::create(b, loc, x, zero), tail);
}

/// `a mod b`: with `fmod` the remainder of the truncated quotient (sign of
/// a), otherwise of the floored quotient (sign of b, Python's `%`).
static Value mod(OpBuilder &b, Location loc, Value lhs, Value rhs, bool fmod) {
  bool isFloatType = isFloat(lhs);
  Value rem = isFloatType ? Value(arith::RemFOp::create(b, loc, lhs, rhs))
                          : Value(arith::RemSIOp::create(b, loc, lhs, rhs));
  if (fmod)
    return rem;
  Type type = lhs.getType();
  Value zero = scalarConst(b, loc, type, 0.0);
  Value nonZero, remNegative, rhsNegative;
  if (isFloatType) {
    nonZero =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::ONE, rem, zero);
    remNegative =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, rem, zero);
    rhsNegative =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, rhs, zero);
  } else {
    nonZero =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, rem, zero);
    remNegative =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, rem, zero);
    rhsNegative =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, rhs, zero);
  }
  Value signsDiffer = arith::XOrIOp::create(b, loc, remNegative, rhsNegative);
  Value adjust = arith::AndIOp::create(b, loc, nonZero, signsDiffer);
  return arith::SelectOp::create(b, loc, adjust, addScalars(b, loc, rem, rhs),
                                 rem);
}

/// Gelu: `x/2 (1 + erf(x / sqrt 2))`, or with approximate="tanh"
/// `x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
static Value gelu(OpBuilder &b, Location loc, Value x, bool useTanh) {
  Type type = x.getType();
  auto c = [&](double value) { return scalarConst(b, loc, type, value); };
  Value inner;
  if (useTanh) {
    Value cube =
        arith::MulFOp::create(b, loc, x, arith::MulFOp::create(b, loc, x, x));
    Value poly = arith::AddFOp::create(
        b, loc, x, arith::MulFOp::create(b, loc, c(0.044715), cube));
    inner = math::TanhOp::create(
        b, loc, arith::MulFOp::create(b, loc, c(0.7978845608028654), poly));
  } else {
    inner = math::ErfOp::create(
        b, loc, arith::MulFOp::create(b, loc, x, c(0.7071067811865476)));
  }
  Value half = arith::MulFOp::create(b, loc, c(0.5), x);
  return arith::MulFOp::create(b, loc, half,
                               arith::AddFOp::create(b, loc, c(1.0), inner));
}

//===----------------------------------------------------------------------===//
// Ops with attributes or optional operands
//===----------------------------------------------------------------------===//

static Value modScalar(OpBuilder &b, Location loc, Operation *op,
                       ValueRange args, Type) {
  return mod(b, loc, args[0], args[1], intAttr(op, "fmod", 0));
}

static Value geluScalar(OpBuilder &b, Location loc, Operation *op,
                        ValueRange args, Type) {
  return gelu(b, loc, args[0],
              *ElementwiseLowering::geluForm(cast<onnx::GeluOp>(op)));
}

/// IsInf(x): +inf when detect_positive (default 1), -inf when
/// detect_negative (default 1).
static Value isInf(OpBuilder &b, Location loc, Operation *op, ValueRange args,
                   Type) {
  Type elt = args[0].getType();
  Value inf = scalarConst(b, loc, elt, -kNegInf);
  auto equals = [&](Value x) {
    return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, x, inf);
  };
  Value result = arith::ConstantOp::create(b, loc, b.getBoolAttr(false));
  if (intAttr(op, "detect_positive", 1))
    result = equals(args[0]);
  if (intAttr(op, "detect_negative", 1))
    result = arith::OrIOp::create(
        b, loc, result, equals(arith::NegFOp::create(b, loc, args[0])));
  return result;
}

/// Clip(x, min?, max?): max(min(x, hi), lo) with the bounds that are given
/// (scalars, read as rank-0 broadcasts; `args` holds the present ones).
static Value clip(OpBuilder &b, Location loc, Operation *op, ValueRange args,
                  Type) {
  bool hasMin = optionalOperand(op, 1) != nullptr;
  bool hasMax = optionalOperand(op, 2) != nullptr;
  Value x = args[0];
  if (hasMin)
    x = arith2<arith::MaximumFOp, arith::MaxSIOp>(b, loc, op, {x, args[1]},
                                                  x.getType());
  if (hasMax)
    x = arith2<arith::MinimumFOp, arith::MinSIOp>(b, loc, op,
                                                  {x, args.back()},
                                                  x.getType());
  return x;
}

//===----------------------------------------------------------------------===//
// Registration
//===----------------------------------------------------------------------===//

namespace {
/// The scalar form of one elementwise op.
struct ScalarForm {
  StringRef name;
  ScalarFn fn;
  bool floatOnly;
};
} // namespace

template <typename OpTy>
static ScalarForm form(ScalarFn fn, bool floatOnly = false) {
  return {OpTy::getOperationName(), fn, floatOnly};
}

/// Every elementwise op the lowering (and moe-raise's custom activations)
/// builds element by element.
static ArrayRef<ScalarForm> scalarForms() {
  using namespace arith;
  using FP = CmpFPredicate;
  using IP = CmpIPredicate;
  static const ScalarForm forms[] = {
      form<onnx::AddOp>(arith2<AddFOp, AddIOp>),
      form<onnx::SubOp>(arith2<SubFOp, SubIOp>),
      form<onnx::MulOp>(arith2<MulFOp, MulIOp>),
      form<onnx::DivOp>(arith2<DivFOp, DivSIOp>),
      form<onnx::PowOp>(pow),
      form<onnx::SqrtOp>(math1<math::SqrtOp>, true),
      form<onnx::ReciprocalOp>(reciprocal, true),
      form<onnx::NegOp>(neg),
      form<onnx::ExpOp>(math1<math::ExpOp>, true),
      form<onnx::LogOp>(math1<math::LogOp>, true),
      form<onnx::TanhOp>(math1<math::TanhOp>, true),
      form<onnx::CosOp>(math1<math::CosOp>, true),
      form<onnx::SinOp>(math1<math::SinOp>, true),
      form<onnx::ErfOp>(math1<math::ErfOp>, true),
      form<onnx::SigmoidOp>(sigmoid, true),
      form<onnx::ReluOp>(relu),
      form<onnx::AbsOp>(abs),
      form<onnx::CeilOp>(round<math::CeilOp>),
      form<onnx::FloorOp>(round<math::FloorOp>),
      form<onnx::MinOp>(foldAll<MinimumFOp, MinSIOp>),
      form<onnx::MaxOp>(foldAll<MaximumFOp, MaxSIOp>),
      form<onnx::EqualOp>(compare<FP::OEQ, IP::eq, IP::eq>),
      form<onnx::GreaterOp>(compare<FP::OGT, IP::sgt, IP::ugt>),
      form<onnx::GreaterOrEqualOp>(compare<FP::OGE, IP::sge, IP::uge>),
      form<onnx::LessOp>(compare<FP::OLT, IP::slt, IP::ult>),
      form<onnx::LessOrEqualOp>(compare<FP::OLE, IP::sle, IP::ule>),
      form<onnx::AndOp>(arith2<AndIOp, AndIOp>),
      form<onnx::OrOp>(arith2<OrIOp, OrIOp>),
      form<onnx::NotOp>(logicalNot),
      form<onnx::WhereOp>(where),
      form<onnx::CastOp>(castElement),
      form<onnx::SoftplusOp>(softplus, true),
      form<onnx::SignOp>(sign),
      form<onnx::RoundOp>(roundHalfEven),
      form<onnx::TanOp>(math1<math::TanOp>, true),
      form<onnx::AsinOp>(math1<math::AsinOp>, true),
      form<onnx::AcosOp>(math1<math::AcosOp>, true),
      form<onnx::AtanOp>(math1<math::AtanOp>, true),
      form<onnx::SinhOp>(math1<math::SinhOp>, true),
      form<onnx::CoshOp>(math1<math::CoshOp>, true),
      form<onnx::AsinhOp>(math1<math::AsinhOp>, true),
      form<onnx::AcoshOp>(math1<math::AcoshOp>, true),
      form<onnx::AtanhOp>(math1<math::AtanhOp>, true),
      form<onnx::SumOp>(foldAll<AddFOp, AddIOp>),
      form<onnx::MeanOp>(mean, true),
      form<onnx::IsNaNOp>(isNaN, true),
      form<onnx::IsInfOp>(isInf, true),
      form<onnx::XorOp>(arith2<XOrIOp, XOrIOp>),
      form<onnx::BitwiseAndOp>(arith2<AndIOp, AndIOp>),
      form<onnx::BitwiseOrOp>(arith2<OrIOp, OrIOp>),
      form<onnx::BitwiseXorOp>(arith2<XOrIOp, XOrIOp>),
      form<onnx::BitwiseNotOp>(bitwiseNot),
      form<onnx::ModOp>(modScalar),
      form<onnx::GeluOp>(geluScalar, true),
      form<onnx::ClipOp>(clip),
  };
  return forms;
}

void populateElementwisePatterns(RewritePatternSet &patterns) {
  for (const ScalarForm &f : scalarForms())
    patterns.add<ElementwiseLowering>(patterns.getContext(), f.name, f.fn,
                                      f.floatOnly);
}

FailureOr<Value> buildElementwiseScalar(OpBuilder &b, Location loc,
                                        Operation *op, ValueRange args,
                                        Type type) {
  StringRef name = op->getName().getStringRef();
  const ScalarForm *f = llvm::find_if(
      scalarForms(), [&](const ScalarForm &f) { return f.name == name; });
  if (f == scalarForms().end() ||
      (f->floatOnly && !isa<FloatType>(args.front().getType())))
    return failure();
  if (auto gelu = dyn_cast<onnx::GeluOp>(op);
      gelu && !ElementwiseLowering::geluForm(gelu))
    return failure();
  if (isa<onnx::ClipOp>(op) && (op->hasAttr("min") || op->hasAttr("max")))
    return failure();
  if (isa<onnx::CastOp>(op) && args.front().getType() == type)
    return args.front();
  return f->fn(b, loc, op, args, type);
}

} // namespace mlir::moe::onnx_lowering
