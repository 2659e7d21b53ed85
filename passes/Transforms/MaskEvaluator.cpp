//===- MaskEvaluator.cpp - attention masks read at compile time -----------===//

#include "passes/Transforms/MaskEvaluator.h"

#include "dialects/onnx/IR/ONNXDialect.h"
#include "passes/Conversion/ONNXToLinalg/Lowering.h"

#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <cstring>

using namespace mlir;
using namespace mlir::moe;
using onnx_lowering::intAttr;
using onnx_lowering::normalizeAxis;
using onnx_lowering::product;

namespace {

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

/// The element of `operand` that an elementwise op with result `shape`
/// reads at `index` (ONNX broadcasting: trailing dimensions line up); none
/// when the shapes do not broadcast.
std::optional<SmallVector<int64_t>>
broadcastIndex(Value operand, ArrayRef<int64_t> shape,
               ArrayRef<int64_t> index) {
  auto type = dyn_cast<RankedTensorType>(operand.getType());
  if (!type || type.getRank() > static_cast<int64_t>(index.size()))
    return std::nullopt;
  int64_t lead = index.size() - type.getRank();
  SmallVector<int64_t> at;
  for (auto [d, size] : llvm::enumerate(type.getShape())) {
    if (size != 1 && size != shape[lead + d])
      return std::nullopt;
    at.push_back(size == 1 ? 0 : index[lead + d]);
  }
  return at;
}

/// The element of `operand` that a reshape to `shape` puts at `index`; none
/// when the element counts differ.
std::optional<SmallVector<int64_t>>
reshapedIndex(Value operand, ArrayRef<int64_t> shape, ArrayRef<int64_t> index) {
  auto type = dyn_cast<RankedTensorType>(operand.getType());
  if (!type || !type.hasStaticShape() ||
      type.getNumElements() != product(shape))
    return std::nullopt;
  int64_t linear = 0;
  for (auto [i, size] : llvm::zip(index, shape))
    linear = linear * size + i;
  ArrayRef<int64_t> from = type.getShape();
  SmallVector<int64_t> at(from.size());
  for (int64_t d = from.size() - 1; d >= 0; --d) {
    at[d] = linear % from[d];
    linear /= from[d];
  }
  return at;
}

} // namespace

std::optional<double> MaskEvaluator::constantAt(Value v,
                                                ArrayRef<int64_t> index) {
  auto it = constants.find(v);
  if (it == constants.end()) {
    Constant c;
    Attribute attr;
    if (matchPattern(v, m_Constant(&attr))) {
      c.dense = dyn_cast<DenseElementsAttr>(attr);
      // Importers keep large constants as resources: their bytes, once.
      if (auto resource = dyn_cast<DenseResourceElementsAttr>(attr)) {
        c.bytes = resource.getData();
        c.type = resource.getType();
      } else if (c.dense) {
        c.type = c.dense.getType();
      }
    }
    it = constants.try_emplace(v, c).first;
  }
  const Constant &c = it->second;
  ShapedType type = c.type;
  if (!type)
    return std::nullopt;
  if (!type.hasStaticShape() ||
      index.size() != static_cast<size_t>(type.getRank()))
    return std::nullopt;
  int64_t linear = 0;
  for (auto [i, size] : llvm::zip(index, type.getShape()))
    linear = linear * size + i;
  if (linear < 0 || linear >= type.getNumElements())
    return std::nullopt;
  Type element = type.getElementType();
  if (DenseElementsAttr dense = c.dense) {
    if (dense.isSplat())
      linear = 0;
    if (element.isInteger(1))
      return dense.getValues<bool>()[linear] ? 1.0 : 0.0;
    if (isa<IntegerType>(element))
      return double(dense.getValues<APInt>()[linear].getSExtValue());
    if (isa<FloatType>(element))
      return dense.getValues<APFloat>()[linear].convertToDouble();
    return std::nullopt;
  }
  ArrayRef<char> bytes = c.bytes;
  unsigned width = element.isInteger(1) ? 8 : element.getIntOrFloatBitWidth();
  size_t at = linear * (width / 8);
  if (width % 8 || at + width / 8 > bytes.size())
    return std::nullopt;
  const char *p = bytes.data() + at;
  auto read = [&](auto sample) {
    decltype(sample) x;
    std::memcpy(&x, p, sizeof x);
    return double(x);
  };
  if (element.isInteger(1) || element.isInteger(8))
    return element.isInteger(1) ? double(*p != 0) : read(int8_t());
  if (element.isInteger(32))
    return read(int32_t());
  if (element.isInteger(64))
    return read(int64_t());
  if (element.isF32())
    return read(float());
  if (element.isF64())
    return read(double());
  return std::nullopt;
}

std::optional<double> MaskEvaluator::at(Value v, ArrayRef<int64_t> index,
                                        int depth) {
  if (std::optional<double> c = constantAt(v, index))
    return c;
  Operation *def = v.getDefiningOp();
  if (auto slice = dyn_cast_or_null<shard::AllSliceOp>(def)) {
    if (!group || depth > 32 || slice.getGridAttr() != group.getGridAttr() ||
        slice.getGridAxes() != group.getGridAxes())
      return std::nullopt;
    SmallVector<int64_t> where(index);
    int64_t axis = slice.getSliceAxis().getSExtValue();
    where[axis] += rank * shapeOf(v)[axis];
    return at(slice.getInput(), where, depth + 1);
  }
  if (!def || depth > 32 ||
      def->getDialect() !=
          def->getContext()->getLoadedDialect<onnx::ONNXDialect>())
    return std::nullopt;
  ArrayRef<int64_t> shape = shapeOf(v);
  auto operand = [&](unsigned i) -> std::optional<double> {
    std::optional<SmallVector<int64_t>> where =
        broadcastIndex(def->getOperand(i), shape, index);
    return where ? at(def->getOperand(i), *where, depth + 1) : std::nullopt;
  };
  auto both = [&](auto fn) -> std::optional<double> {
    std::optional<double> a = operand(0), b;
    if (a)
      b = operand(1);
    if (!a || !b)
      return std::nullopt;
    return fn(*a, *b);
  };
  return llvm::TypeSwitch<Operation *, std::optional<double>>(def)
      .Case([&](onnx::AndOp) -> std::optional<double> {
        // False either way decides it, whatever the other side holds.
        std::optional<double> a = operand(0);
        if (a && *a == 0)
          return 0.0;
        std::optional<double> b = operand(1);
        if (b && *b == 0)
          return 0.0;
        return a && b ? std::optional<double>(1.0) : std::nullopt;
      })
      .Case([&](onnx::OrOp) -> std::optional<double> {
        std::optional<double> a = operand(0);
        if (a && *a != 0)
          return 1.0;
        std::optional<double> b = operand(1);
        if (b && *b != 0)
          return 1.0;
        return a && b ? std::optional<double>(0.0) : std::nullopt;
      })
      .Case([&](onnx::NotOp) -> std::optional<double> {
        std::optional<double> a = operand(0);
        return a ? std::optional<double>(*a == 0 ? 1.0 : 0.0) : std::nullopt;
      })
      .Case([&](onnx::NegOp) -> std::optional<double> {
        std::optional<double> a = operand(0);
        return a ? std::optional<double>(-*a) : std::nullopt;
      })
      .Case([&](onnx::CastOp) -> std::optional<double> {
        std::optional<double> a = operand(0);
        Type to = cast<RankedTensorType>(v.getType()).getElementType();
        if (!a)
          return std::nullopt;
        if (to.isInteger(1))
          return *a != 0 ? 1.0 : 0.0;
        if (isa<IntegerType>(to))
          return std::trunc(*a);
        return *a;
      })
      .Case([&](onnx::LessOp) { return both([](double a, double b) { return double(a < b); }); })
      .Case([&](onnx::LessOrEqualOp) { return both([](double a, double b) { return double(a <= b); }); })
      .Case([&](onnx::GreaterOp) { return both([](double a, double b) { return double(a > b); }); })
      .Case([&](onnx::GreaterOrEqualOp) { return both([](double a, double b) { return double(a >= b); }); })
      .Case([&](onnx::EqualOp) { return both([](double a, double b) { return double(a == b); }); })
      .Case([&](onnx::AddOp) { return both([](double a, double b) { return a + b; }); })
      .Case([&](onnx::SubOp) { return both([](double a, double b) { return a - b; }); })
      .Case([&](onnx::MulOp) { return both([](double a, double b) { return a * b; }); })
      .Case([&](onnx::WhereOp) -> std::optional<double> {
        std::optional<double> c = operand(0);
        if (c)
          return operand(*c != 0 ? 1 : 2);
        std::optional<double> a = operand(1), b = operand(2);
        return a && b && *a == *b ? a : std::nullopt;
      })
      .Case([&](onnx::ExpandOp) { return operand(0); })
      .Case([&](onnx::SliceOp) -> std::optional<double> {
        Value in = def->getOperand(0);
        std::optional<onnx_lowering::SliceParams> params =
            onnx_lowering::sliceParams(def, shapeOf(in));
        if (!params || params->starts.size() != index.size())
          return std::nullopt;
        SmallVector<int64_t> where;
        for (auto [i, start, step] :
             llvm::zip(index, params->starts, params->steps))
          where.push_back(start + i * step);
        return at(in, where, depth + 1);
      })
      .Case([&](onnx::ConcatOp) -> std::optional<double> {
        int64_t axis = normalizeAxis(intAttr(def, "axis", 0), shape.size());
        if (axis < 0 || axis >= static_cast<int64_t>(index.size()))
          return std::nullopt;
        SmallVector<int64_t> where(index);
        for (Value in : def->getOperands()) {
          auto type = dyn_cast<RankedTensorType>(in.getType());
          if (!type || type.getRank() != static_cast<int64_t>(index.size()))
            return std::nullopt;
          if (where[axis] < type.getDimSize(axis))
            return at(in, where, depth + 1);
          where[axis] -= type.getDimSize(axis);
        }
        return std::nullopt;
      })
      .Case<onnx::ReshapeOp, onnx::UnsqueezeOp, onnx::SqueezeOp,
            onnx::FlattenOp>([&](Operation *) -> std::optional<double> {
        Value in = def->getOperand(0);
        std::optional<SmallVector<int64_t>> where =
            reshapedIndex(in, shape, index);
        return where ? at(in, *where, depth + 1) : std::nullopt;
      })
      .Default([](Operation *) { return std::nullopt; });
}

