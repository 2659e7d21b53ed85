//===- IndexArithmetic.cpp - index functions written as onnx ops ----------===//

#include "passes/Raise/IndexArithmetic.h"
#include "dialects/onnx/IR/ONNXDialect.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/TypeUtilities.h"
#include "passes/ONNXFolding.h"
#include "passes/Raise/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <limits>

namespace mlir::moe::raise {

/// `v` held in `type`, truncated toward zero for integers (a Cast from a
/// float), or none where it does not fit.
static std::optional<double> roundTo(Type type, double v) {
  if (std::isnan(v))
    return std::nullopt;
  if (type.isInteger(1))
    return v != 0 ? 1.0 : 0.0;
  if (auto intType = dyn_cast<IntegerType>(type)) {
    double limit = std::ldexp(1.0, std::min(intType.getWidth() - 1, 53u));
    v = std::trunc(v);
    if (v >= limit || v < -limit)
      return std::nullopt;
    return v;
  }
  if (type.isF32())
    return static_cast<double>(static_cast<float>(v));
  if (type.isF64())
    return v;
  return std::nullopt;
}

static std::optional<double> evaluate(Value value, Value source, double point,
                                      unsigned depth) {
  if (value == source)
    return point;
  if (depth == 0)
    return std::nullopt;
  Operation *op = value.getDefiningOp();
  if (!op || op->getNumResults() != 1)
    return std::nullopt;
  Type type = getElementTypeOrSelf(value.getType());
  // A static extent: Gather(Shape(v), i) where v's dimension i is static.
  if (auto gather = dyn_cast<onnx::GatherOp>(op))
    if (auto shape = gather.getInputs()[0].getDefiningOp<onnx::ShapeOp>()) {
      auto shaped = dyn_cast<RankedTensorType>(shape.getInputs()[0].getType());
      std::optional<onnx_lowering::ConstTensor> index =
          onnx_lowering::getConstant(gather.getInputs()[1]);
      if (!shaped || !index || index->size() != 1 || index->isFloat() ||
          shape->getAttr("start") || shape->getAttr("end"))
        return std::nullopt;
      int64_t dim = index->ints[0] < 0 ? index->ints[0] + shaped.getRank()
                                       : index->ints[0];
      if (dim < 0 || dim >= shaped.getRank() || shaped.isDynamicDim(dim))
        return std::nullopt;
      return static_cast<double>(shaped.getDimSize(dim));
    }
  // A one-element constant is the same for every point.
  if (!source || !dependsOn(value, source)) {
    // Plain constants unrounded: slice ends are often INT64_MAX.
    std::optional<onnx_lowering::ConstTensor> constant =
        onnx_lowering::getConstant(value);
    if (!constant)
      constant = onnx_lowering::foldConstantExpression(value);
    if (constant) {
      if (constant->size() != 1)
        return std::nullopt;
      return constant->asDouble(0);
    }
    if (isa<onnx::ShapeOp, onnx::ConstantOfShapeOp>(op))
      return std::nullopt;
  }
  if (op->getNumOperands() == 0)
    return std::nullopt;
  SmallVector<double> args;
  for (Value operand : op->getOperands()) {
    if (isa<NoneType>(operand.getType())) {
      args.push_back(std::nan(""));
      continue;
    }
    std::optional<double> arg = evaluate(operand, source, point, depth - 1);
    if (!arg)
      return std::nullopt;
    args.push_back(*arg);
  }
  bool isInt =
      isa<IntegerType>(getElementTypeOrSelf(op->getOperand(0).getType()));
  if (op->getName().getStringRef() == "onnx.Mod") {
    if (args[1] == 0)
      return std::nullopt;
    double r = std::fmod(args[0], args[1]);
    // fmod = 0 (the default): the sign of the divisor, as Python's %.
    auto fmod = op->getAttrOfType<IntegerAttr>("fmod");
    if (!(fmod && fmod.getInt() == 1) && r != 0 && (r < 0) != (args[1] < 0))
      r += args[1];
    return roundTo(type, r);
  }
  std::optional<double> result =
      llvm::TypeSwitch<Operation *, std::optional<double>>(op)
          .Case<onnx::IdentityOp, onnx::ReshapeOp, onnx::SqueezeOp,
                onnx::UnsqueezeOp, onnx::CastOp, onnx::ExpandOp>(
              [&](Operation *) { return args[0]; })
          .Case([&](onnx::AddOp) { return args[0] + args[1]; })
          .Case([&](onnx::SubOp) { return args[0] - args[1]; })
          .Case([&](onnx::MulOp) { return args[0] * args[1]; })
          .Case([&](onnx::DivOp) -> std::optional<double> {
            if (!isInt)
              return args[0] / args[1];
            if (args[1] == 0)
              return std::nullopt;
            return std::trunc(args[0] / args[1]);
          })
          .Case([&](onnx::NegOp) { return -args[0]; })
          .Case([&](onnx::AbsOp) { return std::fabs(args[0]); })
          .Case([&](onnx::FloorOp) { return std::floor(args[0]); })
          .Case([&](onnx::CeilOp) { return std::ceil(args[0]); })
          .Case([&](onnx::ClipOp) {
            double v = args[0];
            if (args.size() > 1 && !std::isnan(args[1]))
              v = std::max(v, args[1]);
            if (args.size() > 2 && !std::isnan(args[2]))
              v = std::min(v, args[2]);
            return v;
          })
          .Case([&](onnx::MinOp) {
            double v = args[0];
            for (double a : args)
              v = std::min(v, a);
            return v;
          })
          .Case([&](onnx::MaxOp) {
            double v = args[0];
            for (double a : args)
              v = std::max(v, a);
            return v;
          })
          .Case([&](onnx::EqualOp) { return double(args[0] == args[1]); })
          .Case([&](onnx::LessOp) { return double(args[0] < args[1]); })
          .Case([&](onnx::LessOrEqualOp) { return double(args[0] <= args[1]); })
          .Case([&](onnx::GreaterOp) { return double(args[0] > args[1]); })
          .Case([&](onnx::GreaterOrEqualOp) {
            return double(args[0] >= args[1]);
          })
          .Case(
              [&](onnx::AndOp) { return double(args[0] != 0 && args[1] != 0); })
          .Case(
              [&](onnx::OrOp) { return double(args[0] != 0 || args[1] != 0); })
          .Case([&](onnx::NotOp) { return double(args[0] == 0); })
          .Case([&](onnx::WhereOp) { return args[0] != 0 ? args[1] : args[2]; })
          .Default([](Operation *) { return std::nullopt; });
  if (!result)
    return std::nullopt;
  return roundTo(type, *result);
}

std::optional<double> evaluateIndexFunction(Value result, Value source,
                                            double point) {
  return evaluate(result, source, point, /*depth=*/24);
}

std::optional<int64_t> evaluateScalar(Value value) {
  std::optional<double> result = evaluate(value, Value(), 0.0, /*depth=*/24);
  if (!result || *result != std::trunc(*result))
    return std::nullopt;
  // INT64_MAX and INT64_MIN (open slice bounds) do not survive a double.
  constexpr double kLimit = 0x1p62;
  if (*result >= kLimit)
    return std::numeric_limits<int64_t>::max();
  if (*result <= -kLimit)
    return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(*result);
}

bool isIndexFunction(Value result, Value source, int64_t size,
                     llvm::function_ref<int64_t(int64_t)> expected) {
  for (int64_t p = 0; p < size; ++p) {
    std::optional<double> value =
        evaluateIndexFunction(result, source, static_cast<double>(p));
    if (!value || *value != static_cast<double>(expected(p)))
      return false;
  }
  return true;
}

} // namespace mlir::moe::raise
