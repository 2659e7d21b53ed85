//===- Constants.cpp - constant operands and folding ----------------------===//
//
// Exported graphs compute shapes, capacities and index offsets at run time
// from Shape, Gather, Concat, Mul, Cast, ... of constants. The lowering
// needs them as constants: this file reads constant operands and evaluates
// those ops where every operand is a small constant.
//
//===----------------------------------------------------------------------===//

#include "mlir/IR/DialectResourceBlobManager.h"
#include "passes/Conversion/ONNXToLinalg/Lowering.h"
#include "passes/ONNXFolding.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace mlir::moe::onnx_lowering {

/// Larger constants are not read (weights are never operands that the
/// lowering needs as values).
static constexpr int64_t kMaxReadElements = 1 << 16;
/// Larger results are computed at run time, not folded.
static constexpr int64_t kMaxFoldElements = 1024;

int64_t ConstTensor::size() const { return product(shape); }

//===----------------------------------------------------------------------===//
// Reading and writing constants
//===----------------------------------------------------------------------===//

/// The value of type T stored at `data` (the host's byte order).
template <typename T> static T load(const char *data) {
  T value;
  std::memcpy(&value, data, sizeof(T));
  return value;
}

/// The elements of a dense_resource blob of f32, f64, or 1-, 8-, 32- or
/// 64-bit integers.
static bool readBlob(DenseResourceElementsAttr attr, ConstTensor &value) {
  AsmResourceBlob *blob = attr.getRawHandle().getBlob();
  if (!blob)
    return false;
  ArrayRef<char> data = blob->getData();
  Type type = value.elementType;
  if (type.isIndex())
    return false;
  unsigned width = type.getIntOrFloatBitWidth();
  unsigned bytes = width == 1 ? 1 : width / 8;
  int64_t count = value.size();
  if (static_cast<int64_t>(data.size()) != count * bytes)
    return false;
  for (int64_t i = 0; i < count; ++i) {
    const char *element = data.data() + i * bytes;
    if (type.isF32())
      value.floats.push_back(load<float>(element));
    else if (type.isF64())
      value.floats.push_back(load<double>(element));
    else if (type.isInteger(1))
      value.ints.push_back(*element != 0);
    else if (type.isInteger(8))
      value.ints.push_back(load<int8_t>(element));
    else if (type.isInteger(32))
      value.ints.push_back(load<int32_t>(element));
    else if (type.isInteger(64))
      value.ints.push_back(load<int64_t>(element));
    else
      return false;
  }
  return true;
}

std::optional<ConstTensor> getConstant(Value value) {
  auto constant = value.getDefiningOp<arith::ConstantOp>();
  if (!constant || !isStaticTensor(constant.getType()))
    return std::nullopt;
  auto type = cast<RankedTensorType>(constant.getType());
  Type elementType = type.getElementType();
  if (type.getNumElements() > kMaxReadElements ||
      !(isa<FloatType>(elementType) || elementType.isIntOrIndex()))
    return std::nullopt;
  ConstTensor result{Shape(type.getShape()), elementType, {}, {}};
  Attribute attr = constant.getValue();
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(attr)) {
    if (!readBlob(resource, result))
      return std::nullopt;
    return result;
  }
  auto dense = dyn_cast<DenseElementsAttr>(attr);
  if (!dense)
    return std::nullopt;
  if (isa<FloatType>(elementType)) {
    for (APFloat element : dense.getValues<APFloat>()) {
      bool losesInfo;
      element.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven,
                      &losesInfo);
      result.floats.push_back(element.convertToDouble());
    }
  } else {
    bool isBool = elementType.isInteger(1);
    for (APInt element : dense.getValues<APInt>())
      result.ints.push_back(isBool ? element.getZExtValue()
                                   : element.getSExtValue());
  }
  return result;
}

std::optional<Shape> getConstantInts(Value value) {
  std::optional<ConstTensor> constant = getConstant(value);
  if (!constant)
    return std::nullopt;
  Shape ints;
  for (int64_t i = 0, e = constant->size(); i < e; ++i)
    ints.push_back(constant->asInt(i));
  return ints;
}

std::optional<double> getConstantScalar(Value value) {
  std::optional<ConstTensor> constant = getConstant(value);
  if (!constant || constant->size() != 1)
    return std::nullopt;
  return constant->asDouble(0);
}

DenseElementsAttr toAttr(const ConstTensor &value, RankedTensorType type) {
  Type elementType = type.getElementType();
  if (auto floatType = dyn_cast<FloatType>(elementType)) {
    SmallVector<APFloat> elements;
    for (int64_t i = 0, e = value.size(); i < e; ++i) {
      APFloat element(value.asDouble(i));
      bool losesInfo;
      element.convert(floatType.getFloatSemantics(),
                      APFloat::rmNearestTiesToEven, &losesInfo);
      elements.push_back(element);
    }
    return DenseElementsAttr::get(type, elements);
  }
  unsigned width = elementType.isIndex() ? IndexType::kInternalStorageBitWidth
                                         : elementType.getIntOrFloatBitWidth();
  SmallVector<APInt> elements;
  for (int64_t i = 0, e = value.size(); i < e; ++i) {
    int64_t element = value.asInt(i);
    if (width == 1)
      element = element != 0;
    elements.push_back(APInt(64, element, /*isSigned=*/true).trunc(width));
  }
  return DenseElementsAttr::get(type, elements);
}

//===----------------------------------------------------------------------===//
// Index arithmetic
//===----------------------------------------------------------------------===//

/// The multi-index of element `linear` of a tensor of `shape`.
static Shape unflatten(int64_t linear, ArrayRef<int64_t> shape) {
  Shape index(shape.size());
  for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
    index[i] = shape[i] == 0 ? 0 : linear % shape[i];
    linear = shape[i] == 0 ? 0 : linear / shape[i];
  }
  return index;
}

/// The linear position of `index` in a tensor of `shape`.
static int64_t flatten(ArrayRef<int64_t> index, ArrayRef<int64_t> shape) {
  int64_t linear = 0;
  for (auto [i, dim] : llvm::zip(index, shape))
    linear = linear * dim + i;
  return linear;
}

/// The element of an operand of `shape` that element `index` of a result it
/// broadcasts to reads.
static int64_t broadcastSource(ArrayRef<int64_t> index,
                               ArrayRef<int64_t> shape) {
  size_t offset = index.size() - shape.size();
  Shape source;
  for (auto [i, dim] : llvm::enumerate(shape))
    source.push_back(dim == 1 ? 0 : index[offset + i]);
  return flatten(source, shape);
}

/// A result of `shape` and `elementType` whose element `i` is element
/// `sourceOf(i)` of `from` (converted to the result's kind).
static ConstTensor
gatherElements(const ConstTensor &from, Shape shape, Type elementType,
               function_ref<int64_t(ArrayRef<int64_t>)> sourceOf) {
  ConstTensor result{shape, elementType, {}, {}};
  for (int64_t i = 0, e = product(shape); i < e; ++i) {
    int64_t source = sourceOf(unflatten(i, shape));
    if (result.isFloat())
      result.floats.push_back(from.asDouble(source));
    else
      result.ints.push_back(from.asInt(source));
  }
  return result;
}

//===----------------------------------------------------------------------===//
// Elementwise evaluation
//===----------------------------------------------------------------------===//

namespace {
/// Element functions over doubles (float operands) and int64 (integer and
/// boolean operands); none where the op is not evaluated (division by zero,
/// float operands of a logic op).
using FloatFn = function_ref<std::optional<double>(ArrayRef<double>)>;
using IntFn = function_ref<std::optional<int64_t>(ArrayRef<int64_t>)>;
} // namespace

/// The broadcast elementwise `onFloats`/`onInts` of `operands` into a result
/// of `shape` and `elementType`. The first operand's kind picks the function.
static std::optional<ConstTensor> mapConstants(ArrayRef<ConstTensor> operands,
                                               Shape shape, Type elementType,
                                               FloatFn onFloats, IntFn onInts) {
  ConstTensor result{shape, elementType, {}, {}};
  bool floatOperands = operands.front().isFloat();
  for (int64_t i = 0, e = product(shape); i < e; ++i) {
    Shape index = unflatten(i, shape);
    SmallVector<double> floats;
    SmallVector<int64_t> ints;
    for (const ConstTensor &operand : operands) {
      int64_t source = broadcastSource(index, operand.shape);
      floats.push_back(operand.asDouble(source));
      ints.push_back(operand.asInt(source));
    }
    double asFloat;
    int64_t asInt;
    if (floatOperands) {
      std::optional<double> value = onFloats(floats);
      if (!value || std::isnan(*value))
        return std::nullopt;
      asFloat = *value;
      asInt = static_cast<int64_t>(*value);
    } else {
      std::optional<int64_t> value = onInts(ints);
      if (!value)
        return std::nullopt;
      asInt = *value;
      asFloat = static_cast<double>(*value);
    }
    if (result.isFloat())
      result.floats.push_back(asFloat);
    else
      result.ints.push_back(asInt);
  }
  return result;
}

/// The element functions of the elementwise ops that fold.
static std::optional<ConstTensor> foldElementwise(Operation *op,
                                                  ArrayRef<ConstTensor> ins,
                                                  Shape shape, Type type) {
  auto both = [&](auto f) {
    return mapConstants(
        ins, shape, type,
        [&](ArrayRef<double> x) -> std::optional<double> { return f(x); },
        [&](ArrayRef<int64_t> x) -> std::optional<int64_t> { return f(x); });
  };
  auto onFloats = [&](FloatFn f) {
    return mapConstants(ins, shape, type, f,
                        [](ArrayRef<int64_t>) -> std::optional<int64_t> {
                          return std::nullopt;
                        });
  };
  auto onInts = [&](IntFn f) {
    return mapConstants(
        ins, shape, type,
        [](ArrayRef<double>) -> std::optional<double> { return std::nullopt; },
        f);
  };
  return TypeSwitch<Operation *, std::optional<ConstTensor>>(op)
      .Case(
          [&](onnx::AddOp) { return both([](auto x) { return x[0] + x[1]; }); })
      .Case(
          [&](onnx::SubOp) { return both([](auto x) { return x[0] - x[1]; }); })
      .Case(
          [&](onnx::MulOp) { return both([](auto x) { return x[0] * x[1]; }); })
      .Case([&](onnx::DivOp) {
        return mapConstants(
            ins, shape, type,
            [](ArrayRef<double> x) -> std::optional<double> {
              return x[0] / x[1];
            },
            [](ArrayRef<int64_t> x) -> std::optional<int64_t> {
              if (x[1] == 0)
                return std::nullopt;
              return x[0] / x[1];
            });
      })
      .Case([&](onnx::ModOp mod) {
        // fmod: the remainder of the truncated quotient (sign of the
        // dividend); otherwise of the floored one (sign of the divisor).
        bool fmod = intAttr(mod, "fmod", 0);
        return mapConstants(
            ins, shape, type,
            [fmod](ArrayRef<double> x) -> std::optional<double> {
              double rem = std::fmod(x[0], x[1]);
              if (!fmod && rem != 0 && (rem < 0) != (x[1] < 0))
                rem += x[1];
              return rem;
            },
            [fmod](ArrayRef<int64_t> x) -> std::optional<int64_t> {
              if (x[1] == 0 ||
                  (x[1] == -1 && x[0] == std::numeric_limits<int64_t>::min()))
                return std::nullopt;
              int64_t rem = x[0] % x[1];
              if (!fmod && rem != 0 && (rem < 0) != (x[1] < 0))
                rem += x[1];
              return rem;
            });
      })
      .Case([&](onnx::NegOp) { return both([](auto x) { return -x[0]; }); })
      .Case([&](onnx::AbsOp) {
        return both([](auto x) { return x[0] < 0 ? -x[0] : x[0]; });
      })
      .Case([&](onnx::MinOp) {
        return both([](auto x) { return *llvm::min_element(x); });
      })
      .Case([&](onnx::MaxOp) {
        return both([](auto x) { return *llvm::max_element(x); });
      })
      .Case([&](onnx::CeilOp) {
        return onFloats([](ArrayRef<double> x) -> std::optional<double> {
          return std::ceil(x[0]);
        });
      })
      .Case([&](onnx::FloorOp) {
        return onFloats([](ArrayRef<double> x) -> std::optional<double> {
          return std::floor(x[0]);
        });
      })
      .Case([&](onnx::EqualOp) {
        return both([](auto x) -> int64_t { return x[0] == x[1]; });
      })
      .Case([&](onnx::LessOp) {
        return both([](auto x) -> int64_t { return x[0] < x[1]; });
      })
      .Case([&](onnx::LessOrEqualOp) {
        return both([](auto x) -> int64_t { return x[0] <= x[1]; });
      })
      .Case([&](onnx::GreaterOp) {
        return both([](auto x) -> int64_t { return x[0] > x[1]; });
      })
      .Case([&](onnx::GreaterOrEqualOp) {
        return both([](auto x) -> int64_t { return x[0] >= x[1]; });
      })
      .Case([&](onnx::AndOp) {
        return onInts([](ArrayRef<int64_t> x) -> std::optional<int64_t> {
          return x[0] && x[1];
        });
      })
      .Case([&](onnx::OrOp) {
        return onInts([](ArrayRef<int64_t> x) -> std::optional<int64_t> {
          return x[0] || x[1];
        });
      })
      .Case([&](onnx::NotOp) {
        return onInts([](ArrayRef<int64_t> x) -> std::optional<int64_t> {
          return !x[0];
        });
      })
      .Case([&](onnx::CastOp) {
        // The conversion is the store into the result's kind; to bool is
        // `!= 0`.
        if (type.isInteger(1))
          return both([](auto x) -> int64_t { return x[0] != 0; });
        return both([](auto x) { return x[0]; });
      })
      .Case([&](onnx::WhereOp) -> std::optional<ConstTensor> {
        ConstTensor result{shape, type, {}, {}};
        for (int64_t i = 0, e = product(shape); i < e; ++i) {
          Shape index = unflatten(i, shape);
          const ConstTensor &chosen =
              ins[0].asInt(broadcastSource(index, ins[0].shape)) ? ins[1]
                                                                 : ins[2];
          int64_t source = broadcastSource(index, chosen.shape);
          if (result.isFloat())
            result.floats.push_back(chosen.asDouble(source));
          else
            result.ints.push_back(chosen.asInt(source));
        }
        return result;
      })
      .Default([](Operation *) { return std::nullopt; });
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

/// The shape ops that fold: each result element is an element of an
/// operand.
static std::optional<ConstTensor>
foldMovement(Operation *op, ArrayRef<ConstTensor> ins, Shape shape, Type type) {
  auto copy = [&](const ConstTensor &from) {
    return gatherElements(from, shape, type, [&](ArrayRef<int64_t> index) {
      return flatten(index, shape);
    });
  };
  return TypeSwitch<Operation *, std::optional<ConstTensor>>(op)
      .Case<onnx::ReshapeOp, onnx::SqueezeOp, onnx::UnsqueezeOp,
            onnx::FlattenOp, onnx::IdentityOp>(
          [&](Operation *) { return copy(ins[0]); })
      .Case([&](onnx::ExpandOp) {
        return gatherElements(ins[0], shape, type,
                              [&](ArrayRef<int64_t> index) {
                                return broadcastSource(index, ins[0].shape);
                              });
      })
      .Case([&](onnx::ConcatOp concat) {
        int64_t axis = normalizeAxis(intAttr(concat, "axis", 0), shape.size());
        ConstTensor result{shape, type, {}, {}};
        for (int64_t i = 0, e = product(shape); i < e; ++i) {
          Shape index = unflatten(i, shape);
          for (const ConstTensor &in : ins) {
            if (index[axis] < in.shape[axis]) {
              int64_t source = flatten(index, in.shape);
              if (result.isFloat())
                result.floats.push_back(in.asDouble(source));
              else
                result.ints.push_back(in.asInt(source));
              break;
            }
            index[axis] -= in.shape[axis];
          }
        }
        return result;
      })
      .Case([&](onnx::GatherOp gather) -> std::optional<ConstTensor> {
        const ConstTensor &data = ins[0], &indices = ins[1];
        int64_t rank = data.shape.size();
        int64_t axis = normalizeAxis(intAttr(gather, "axis", 0), rank);
        int64_t q = indices.shape.size();
        for (int64_t i = 0, e = indices.size(); i < e; ++i) {
          int64_t index = indices.asInt(i);
          if (index < -data.shape[axis] || index >= data.shape[axis])
            return std::nullopt;
        }
        return gatherElements(data, shape, type, [&](ArrayRef<int64_t> index) {
          Shape source(index.take_front(axis));
          int64_t at =
              indices.asInt(flatten(index.slice(axis, q), indices.shape));
          source.push_back(at < 0 ? at + data.shape[axis] : at);
          llvm::append_range(source, index.drop_front(axis + q));
          return flatten(source, data.shape);
        });
      })
      .Case([&](onnx::SliceOp slice) -> std::optional<ConstTensor> {
        std::optional<SliceParams> params = sliceParams(slice, ins[0].shape);
        if (!params)
          return std::nullopt;
        return gatherElements(
            ins[0], shape, type, [&](ArrayRef<int64_t> index) {
              Shape source;
              for (auto [i, start, step] :
                   llvm::zip(index, params->starts, params->steps))
                source.push_back(start + i * step);
              return flatten(source, ins[0].shape);
            });
      })
      .Default([](Operation *) { return std::nullopt; });
}

/// What `op` evaluates to on the values `operands` of its operands other
/// than `none`. The result's shape is `shape` where given, else inferred.
static std::optional<ConstTensor>
foldWithOperands(Operation *op, ArrayRef<ConstTensor> operands, Type type,
                 std::optional<Shape> shape = std::nullopt) {
  if (operands.empty())
    return std::nullopt;
  if (auto range = dyn_cast<onnx::RangeOp>(op)) {
    double start = operands[0].asDouble(0), limit = operands[1].asDouble(0),
           delta = operands[2].asDouble(0);
    if (delta == 0)
      return std::nullopt;
    int64_t count = std::max<int64_t>(
        0, static_cast<int64_t>(std::ceil((limit - start) / delta)));
    if (count > kMaxFoldElements)
      return std::nullopt;
    ConstTensor result{{count}, type, {}, {}};
    for (int64_t i = 0; i < count; ++i) {
      if (result.isFloat())
        result.floats.push_back(start + i * delta);
      else
        result.ints.push_back(operands[0].asInt(0) + i * operands[2].asInt(0));
    }
    return result;
  }
  if (!shape) {
    SmallVector<Shape> shapes;
    std::string why;
    if (failed(inferShapes(op, shapes, why)) || shapes.size() != 1)
      return std::nullopt;
    shape = shapes[0];
  }
  if (ShapedType::isDynamicShape(*shape) || product(*shape) > kMaxFoldElements)
    return std::nullopt;
  if (std::optional<ConstTensor> folded =
          foldElementwise(op, operands, *shape, type))
    return folded;
  return foldMovement(op, operands, *shape, type);
}

/// The value of Shape or Size of an operand of static shape.
static std::optional<ConstTensor> foldShapeOf(Operation *op, Type type) {
  auto operandType = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
  if (!operandType || !operandType.hasStaticShape())
    return std::nullopt;
  ArrayRef<int64_t> dims = operandType.getShape();
  if (isa<onnx::SizeOp>(op))
    return ConstTensor{{}, type, {product(dims)}, {}};
  int64_t rank = dims.size();
  int64_t start = std::clamp<int64_t>(
      normalizeAxis(intAttr(op, "start", 0), rank), 0, rank);
  int64_t end = std::clamp<int64_t>(
      normalizeAxis(intAttr(op, "end", rank), rank), start, rank);
  Shape values(dims.slice(start, end - start));
  return ConstTensor{{end - start}, type, values, {}};
}

/// The element type of the single result of `op` where the folder
/// evaluates it.
static Type foldedElementType(Operation *op) {
  if (op->getNumResults() != 1)
    return {};
  auto resultType = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!resultType)
    return {};
  Type type = resultType.getElementType();
  if (!(isa<FloatType>(type) || type.isIntOrIndex()))
    return {};
  return type;
}

std::optional<ConstTensor> foldOp(Operation *op) {
  Type type = foldedElementType(op);
  if (!type)
    return std::nullopt;
  // Shape and Size only need a static operand shape.
  if (isa<onnx::ShapeOp, onnx::SizeOp>(op))
    return foldShapeOf(op, type);
  // Everything else needs constant operands and a small result.
  SmallVector<ConstTensor> operands;
  for (Value operand : op->getOperands()) {
    if (isNone(operand))
      continue;
    std::optional<ConstTensor> constant = getConstant(operand);
    if (!constant || constant->size() > kMaxFoldElements)
      return std::nullopt;
    operands.push_back(std::move(*constant));
  }
  return foldWithOperands(op, operands, type);
}

//===----------------------------------------------------------------------===//
// Constant expressions
//===----------------------------------------------------------------------===//

/// `v` as an element of `type` holds it (ONNX computes each op in its
/// element type), or none where it does not fit.
static std::optional<double> roundTo(Type type, double v) {
  if (auto floatType = dyn_cast<FloatType>(type)) {
    // Rounding a double result is exact for the narrower types (double has
    // more than twice their precision).
    if (floatType.getWidth() > 64)
      return std::nullopt;
    APFloat value(v);
    bool losesInfo;
    value.convert(floatType.getFloatSemantics(), APFloat::rmNearestTiesToEven,
                  &losesInfo);
    return value.convertToDouble();
  }
  auto intType = dyn_cast<IntegerType>(type);
  if (!intType || intType.isUnsigned() || intType.getWidth() > 64)
    return std::nullopt;
  if (intType.getWidth() == 1)
    return v != 0 ? 1.0 : 0.0;
  double limit = std::ldexp(1.0, std::min(intType.getWidth() - 1, 53u));
  if (!std::isfinite(v) || v != std::trunc(v) || v >= limit || v < -limit)
    return std::nullopt;
  return v;
}

/// `value` with each element rounded to its element type, or none where
/// one does not fit.
static std::optional<ConstTensor> roundElements(ConstTensor value) {
  for (int64_t i = 0, e = value.size(); i < e; ++i) {
    std::optional<double> rounded =
        roundTo(value.elementType, value.asDouble(i));
    if (!rounded)
      return std::nullopt;
    if (value.isFloat())
      value.floats[i] = *rounded;
    else
      value.ints[i] = static_cast<int64_t>(*rounded);
  }
  return value;
}

std::optional<ConstTensor> foldConstantExpression(Value value,
                                                  unsigned depth) {
  if (depth == 0)
    return std::nullopt;
  if (std::optional<ConstTensor> constant = getConstant(value)) {
    if (constant->size() > kMaxFoldElements)
      return std::nullopt;
    return roundElements(std::move(*constant));
  }
  Operation *op = value.getDefiningOp();
  Type type = op ? foldedElementType(op) : Type();
  if (!type)
    return std::nullopt;
  std::optional<ConstTensor> folded;
  if (isa<onnx::ShapeOp, onnx::SizeOp>(op)) {
    folded = foldShapeOf(op, type);
  } else {
    SmallVector<ConstTensor> operands;
    for (Value operand : op->getOperands()) {
      if (isNone(operand))
        continue;
      std::optional<ConstTensor> constant =
          foldConstantExpression(operand, depth - 1);
      if (!constant || constant->size() > kMaxFoldElements)
        return std::nullopt;
      operands.push_back(std::move(*constant));
    }
    // The operands are not constants in the IR, so a result shape that
    // depends on their values is the result type's.
    auto resultType = cast<RankedTensorType>(value.getType());
    std::optional<Shape> shape;
    if (resultType.hasStaticShape())
      shape = Shape(resultType.getShape());
    folded = foldWithOperands(op, operands, type, shape);
  }
  if (!folded)
    return std::nullopt;
  return roundElements(std::move(*folded));
}

} // namespace mlir::moe::onnx_lowering
