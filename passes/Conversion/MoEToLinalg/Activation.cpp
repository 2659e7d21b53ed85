//===- Activation.cpp - an expert FFN's activation, element by element ----===//
//
// The scalar code of an activation and of its derivative, which the expert
// lowerings (forward, backward, and convert-moe-to-runtime) put in their
// linalg.generic bodies. The named kinds are written out, their
// derivatives as PyTorch's backward kernels compute them; a custom
// activation's body is inlined, and differentiated in forward mode op by
// op (one tangent per value, zero where none is recorded), so the backward
// of any body that the dialect accepts (isActivationBodyOp) is built here.
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/MoEToLinalg/Lowering.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

namespace mlir::moe::lowering {

ScalarActivation ScalarActivation::resolve(Operation *from,
                                           ActivationAttr attr) {
  ScalarActivation activation{attr, lookupActivationBody(from, attr)};
  assert((attr.getKind() != ActivationKind::Custom || activation.body) &&
         "the op verifier resolves a custom activation's body");
  return activation;
}

/// The named activation `kind` (not SwiGLU) of the scalar `x`.
static Value activateNamed(OpBuilder &b, Location loc, ActivationKind kind,
                           Value x) {
  Type type = x.getType();
  auto c = [&](double value) { return scalarConst(b, loc, type, value); };
  auto mul = [&](Value lhs, Value rhs) -> Value {
    return arith::MulFOp::create(b, loc, lhs, rhs);
  };
  // 0.5 * x * (1 + inner)
  auto geluFrom = [&](Value inner) {
    return mul(mul(c(0.5), x), arith::AddFOp::create(b, loc, c(1.0), inner));
  };
  switch (kind) {
  case ActivationKind::Identity:
    return x;
  case ActivationKind::Relu:
    return arith::MaximumFOp::create(b, loc, x, c(0.0));
  case ActivationKind::Gelu:
    // erf(x / sqrt(2))
    return geluFrom(
        math::ErfOp::create(b, loc, mul(x, c(0.70710678118654752440))));
  case ActivationKind::GeluTanh: {
    // tanh(sqrt(2 / pi) * (x + 0.044715 x^3))
    Value cube = mul(mul(x, x), x);
    Value inner = arith::AddFOp::create(b, loc, x, mul(c(0.044715), cube));
    return geluFrom(
        math::TanhOp::create(b, loc, mul(c(0.79788456080286535588), inner)));
  }
  case ActivationKind::Silu:
    return mul(x, sigmoid(b, loc, x));
  case ActivationKind::SwiGLU:
  case ActivationKind::Custom:
    break;
  }
  llvm_unreachable("swiglu takes two halves; a custom body is inlined");
}

/// `d act(x) / dx` for a named activation other than SwiGLU.
static Value namedDerivative(OpBuilder &b, Location loc, ActivationKind kind,
                             Value x) {
  Type type = x.getType();
  auto c = [&](double value) { return scalarConst(b, loc, type, value); };
  auto mul = [&](Value lhs, Value rhs) -> Value {
    return arith::MulFOp::create(b, loc, lhs, rhs);
  };
  auto add = [&](Value lhs, Value rhs) -> Value {
    return arith::AddFOp::create(b, loc, lhs, rhs);
  };
  auto sub = [&](Value lhs, Value rhs) -> Value {
    return arith::SubFOp::create(b, loc, lhs, rhs);
  };
  switch (kind) {
  case ActivationKind::Identity:
    return c(1.0);
  case ActivationKind::Relu: {
    Value positive =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, c(0.0));
    return arith::SelectOp::create(b, loc, positive, c(1.0), c(0.0));
  }
  case ActivationKind::Gelu: {
    // Phi(x) + x phi(x)
    Value cdf = mul(c(0.5), add(c(1.0), math::ErfOp::create(
                                            b, loc, mul(x, c(M_SQRT1_2)))));
    Value pdf = mul(c(0.39894228040143267794),
                    math::ExpOp::create(b, loc, mul(c(-0.5), mul(x, x))));
    return add(cdf, mul(x, pdf));
  }
  case ActivationKind::GeluTanh: {
    // PyTorch's gelu_backward(approximate='tanh').
    Value beta = c(0.79788456080286535588), kappa = c(0.044715);
    Value square = mul(x, x);
    Value inner = mul(beta, add(x, mul(kappa, mul(square, x))));
    Value t = math::TanhOp::create(b, loc, inner);
    Value left = mul(c(0.5), x);
    Value right = add(c(1.0), t);
    Value leftDerivative = mul(c(0.5), right);
    Value innerDerivative =
        mul(beta, add(c(1.0), mul(c(3.0), mul(kappa, square))));
    Value rightDerivative =
        mul(mul(left, sub(c(1.0), mul(t, t))), innerDerivative);
    return add(leftDerivative, rightDerivative);
  }
  case ActivationKind::Silu: {
    // s (1 + x (1 - s))
    Value s = sigmoid(b, loc, x);
    return mul(s, add(c(1.0), mul(x, sub(c(1.0), s))));
  }
  case ActivationKind::SwiGLU:
  case ActivationKind::Custom:
    break;
  }
  llvm_unreachable("swiglu has two halves; a custom body is differentiated");
}

/// The tangent of `op`'s result (a clone in the program, reading the
/// values at x) from its operands' tangents (null: zero); null where the
/// result does not vary (a constant, a comparison).
static Value tangentOf(OpBuilder &b, Location loc, Operation *op,
                       ArrayRef<Value> dOperands) {
  Value y = op->getNumResults() == 1 ? op->getResult(0) : Value();
  if (!y || !isa<FloatType>(y.getType()))
    return {};
  Type type = y.getType();
  auto c = [&](double value) { return scalarConst(b, loc, type, value); };
  auto zeroIfNull = [&](Value t) { return t ? t : c(0.0); };
  auto mul = [&](Value lhs, Value rhs) -> Value {
    return arith::MulFOp::create(b, loc, lhs, rhs);
  };
  auto add = [&](Value lhs, Value rhs) -> Value {
    if (!lhs || !rhs)
      return lhs ? lhs : rhs;
    return arith::AddFOp::create(b, loc, lhs, rhs);
  };
  auto neg = [&](Value t) -> Value {
    return t ? Value(arith::NegFOp::create(b, loc, t)) : Value();
  };
  // `t * factor`, null for a null t.
  auto scale = [&](Value t, Value factor) -> Value {
    return t ? mul(t, factor) : Value();
  };
  // The tangent of the operand that `pick` selects, the other's otherwise.
  auto choose = [&](Value pick, Value tTrue, Value tFalse) -> Value {
    if (!tTrue && !tFalse)
      return {};
    return arith::SelectOp::create(b, loc, pick, zeroIfNull(tTrue),
                                   zeroIfNull(tFalse));
  };
  auto cmp = [&](arith::CmpFPredicate predicate, Value lhs, Value rhs) {
    return arith::CmpFOp::create(b, loc, predicate, lhs, rhs);
  };
  Value a = op->getNumOperands() > 0 ? op->getOperand(0) : Value();
  Value bOperand = op->getNumOperands() > 1 ? op->getOperand(1) : Value();
  Value ta = dOperands.empty() ? Value() : dOperands[0];
  Value tb = dOperands.size() > 1 ? dOperands[1] : Value();
  return llvm::TypeSwitch<Operation *, Value>(op)
      .Case<arith::AddFOp>([&](auto) { return add(ta, tb); })
      .Case<arith::SubFOp>([&](auto) { return add(ta, neg(tb)); })
      .Case<arith::MulFOp>(
          [&](auto) { return add(scale(ta, bOperand), scale(tb, a)); })
      // (a / b)' = a' / b - b' y / b
      .Case<arith::DivFOp>([&](auto) -> Value {
        Value da = ta ? Value(arith::DivFOp::create(b, loc, ta, bOperand))
                      : Value();
        Value db =
            tb ? Value(arith::DivFOp::create(b, loc, mul(tb, y), bOperand))
               : Value();
        return add(da, neg(db));
      })
      .Case<arith::NegFOp>([&](auto) { return neg(ta); })
      // At a tie the second operand's: relu = max(x, 0) has derivative 0
      // at 0, as PyTorch's.
      .Case<arith::MaximumFOp, arith::MaxNumFOp>([&](auto) {
        return choose(cmp(arith::CmpFPredicate::OGT, a, bOperand), ta, tb);
      })
      .Case<arith::MinimumFOp, arith::MinNumFOp>([&](auto) {
        return choose(cmp(arith::CmpFPredicate::OLT, a, bOperand), ta, tb);
      })
      .Case<arith::SelectOp>([&](arith::SelectOp select) {
        return choose(select.getCondition(), dOperands[1], dOperands[2]);
      })
      .Case<arith::ExtFOp>([&](auto) -> Value {
        return ta ? Value(arith::ExtFOp::create(b, loc, type, ta)) : Value();
      })
      .Case<arith::TruncFOp>([&](auto) -> Value {
        return ta ? Value(arith::TruncFOp::create(b, loc, type, ta)) : Value();
      })
      .Case<math::ExpOp>([&](auto) { return scale(ta, y); })
      .Case<math::ExpM1Op>(
          [&](auto) { return scale(ta, arith::AddFOp::create(b, loc, y, c(1))); })
      .Case<math::LogOp>([&](auto) -> Value {
        return ta ? Value(arith::DivFOp::create(b, loc, ta, a)) : Value();
      })
      .Case<math::Log1pOp>([&](auto) -> Value {
        return ta ? Value(arith::DivFOp::create(
                        b, loc, ta, arith::AddFOp::create(b, loc, a, c(1))))
                  : Value();
      })
      // 1 - tanh^2
      .Case<math::TanhOp>([&](auto) {
        return scale(ta, arith::SubFOp::create(b, loc, c(1), mul(y, y)));
      })
      // 2 / sqrt(pi) exp(-a^2)
      .Case<math::ErfOp>([&](auto) {
        Value gauss = math::ExpOp::create(
            b, loc, arith::NegFOp::create(b, loc, mul(a, a)));
        return scale(ta, mul(c(1.12837916709551257390), gauss));
      })
      .Case<math::SqrtOp>([&](auto) -> Value {
        return ta ? Value(arith::DivFOp::create(b, loc, mul(ta, c(0.5)), y))
                  : Value();
      })
      // (a^-1/2)' = -y / (2 a)
      .Case<math::RsqrtOp>([&](auto) -> Value {
        return ta ? Value(arith::DivFOp::create(b, loc, mul(ta, mul(c(-0.5), y)),
                                                a))
                  : Value();
      })
      // (a^p)' = p a^(p-1) a' + y log(a) p'
      .Case<math::PowFOp>([&](auto) {
        Value dBase;
        if (ta)
          dBase = mul(ta, mul(bOperand, math::PowFOp::create(
                                            b, loc, a,
                                            arith::SubFOp::create(
                                                b, loc, bOperand, c(1)))));
        Value dExponent =
            tb ? mul(tb, mul(y, math::LogOp::create(b, loc, a))) : Value();
        return add(dBase, dExponent);
      })
      // sign(a) a', 0 at 0 as PyTorch's.
      .Case<math::AbsFOp>([&](auto) -> Value {
        if (!ta)
          return {};
        Value negative = arith::SelectOp::create(
            b, loc, cmp(arith::CmpFPredicate::OLT, a, c(0)),
            arith::NegFOp::create(b, loc, ta), c(0));
        return arith::SelectOp::create(
            b, loc, cmp(arith::CmpFPredicate::OGT, a, c(0)), ta, negative);
      })
      .Case<math::SinOp>(
          [&](auto) { return scale(ta, math::CosOp::create(b, loc, a)); })
      .Case<math::CosOp>([&](auto) {
        return neg(scale(ta, math::SinOp::create(b, loc, a)));
      })
      .Default([&](Operation *) -> Value {
        // Constants; comparisons and boolean ops give no float.
        assert(isa<arith::ConstantOp>(op) && "isActivationBodyOp lists it");
        return {};
      });
}

Value ScalarActivation::apply(OpBuilder &b, Location loc, Value x) const {
  if (!body)
    return activateNamed(b, loc, attr.getKind(), x);
  Block &block = func::FuncOp(body).getBody().front();
  IRMapping values;
  values.map(block.getArgument(0), x);
  for (Operation &op : block.without_terminator())
    b.clone(op, values);
  return values.lookup(block.getTerminator()->getOperand(0));
}

Value ScalarActivation::derivative(OpBuilder &b, Location loc,
                                   Value x) const {
  if (!body)
    return namedDerivative(b, loc, attr.getKind(), x);
  Block &block = func::FuncOp(body).getBody().front();
  IRMapping values;
  DenseMap<Value, Value> tangents; // body value -> d value / dx
  values.map(block.getArgument(0), x);
  tangents[block.getArgument(0)] = scalarConst(b, loc, x.getType(), 1.0);
  for (Operation &op : block.without_terminator()) {
    Operation *clone = b.clone(op, values);
    SmallVector<Value> dOperands;
    for (Value operand : op.getOperands())
      dOperands.push_back(tangents.lookup(operand));
    if (Value tangent = tangentOf(b, loc, clone, dOperands))
      tangents[op.getResult(0)] = tangent;
  }
  Value result = block.getTerminator()->getOperand(0);
  if (Value tangent = tangents.lookup(result))
    return tangent;
  return scalarConst(b, loc, x.getType(), 0.0);
}

} // namespace mlir::moe::lowering
