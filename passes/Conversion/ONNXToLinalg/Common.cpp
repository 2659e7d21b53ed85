//===- Common.cpp - helpers shared by the onnx-to-linalg lowerings --------===//
//
// Operands and attributes as ONNX gives them, broadcasting maps, reshapes
// and scalar conversions; Lowering.h documents them.
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Utils/ReshapeOpsUtils.h"
#include "passes/Conversion/ONNXToLinalg/Lowering.h"

namespace mlir::moe::onnx_lowering {

//===----------------------------------------------------------------------===//
// Operands and attributes
//===----------------------------------------------------------------------===//

LogicalResult cannotLower(RewriterBase &rewriter, Operation *op,
                          const Twine &reason) {
  op->emitError() << op->getName() << " cannot be lowered: " << reason;
  return rewriter.notifyMatchFailure(op, reason);
}

bool isNone(Value value) { return isa<NoneType>(value.getType()); }

Value optionalOperand(Operation *op, unsigned index) {
  if (index >= op->getNumOperands() || isNone(op->getOperand(index)))
    return nullptr;
  return op->getOperand(index);
}

int64_t intAttr(Operation *op, StringRef name, int64_t otherwise) {
  if (auto attr = op->getAttrOfType<IntegerAttr>(name))
    return attr.getInt();
  return otherwise;
}

double floatAttr(Operation *op, StringRef name, double otherwise) {
  if (auto attr = op->getAttrOfType<FloatAttr>(name))
    return attr.getValueAsDouble();
  return otherwise;
}

std::optional<Shape> intsAttr(Operation *op, StringRef name) {
  Attribute attr = op->getAttr(name);
  if (auto array = dyn_cast_or_null<DenseI64ArrayAttr>(attr))
    return Shape(array.asArrayRef());
  if (auto array = dyn_cast_or_null<ArrayAttr>(attr)) {
    Shape values;
    for (Attribute element : array) {
      auto integer = dyn_cast<IntegerAttr>(element);
      if (!integer)
        return std::nullopt;
      values.push_back(integer.getInt());
    }
    return values;
  }
  return std::nullopt;
}

int64_t normalizeAxis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

int64_t product(ArrayRef<int64_t> dims) {
  int64_t result = 1;
  for (int64_t dim : dims)
    result *= dim;
  return result;
}

std::optional<Shape> axesOf(Operation *op, unsigned operandIndex) {
  if (Value axes = optionalOperand(op, operandIndex))
    return getConstantInts(axes);
  if (std::optional<Shape> axes = intsAttr(op, "axes"))
    return axes;
  return Shape();
}

std::optional<SliceParams> sliceParams(Operation *op, ArrayRef<int64_t> shape) {
  int64_t rank = shape.size();
  std::optional<Shape> starts = getConstantInts(op->getOperand(1));
  std::optional<Shape> ends = getConstantInts(op->getOperand(2));
  if (!starts || !ends || starts->size() != ends->size())
    return std::nullopt;
  Shape axes, steps(starts->size(), 1);
  for (int64_t i = 0, e = starts->size(); i < e; ++i)
    axes.push_back(i);
  if (Value value = optionalOperand(op, 3)) {
    std::optional<Shape> given = getConstantInts(value);
    if (!given || given->size() != starts->size())
      return std::nullopt;
    axes = *given;
  }
  if (Value value = optionalOperand(op, 4)) {
    std::optional<Shape> given = getConstantInts(value);
    if (!given || given->size() != starts->size())
      return std::nullopt;
    steps = *given;
  }
  SliceParams params{Shape(rank, 0), Shape(rank, 1), Shape(shape)};
  for (auto [i, rawAxis] : llvm::enumerate(axes)) {
    int64_t axis = normalizeAxis(rawAxis, rank);
    if (axis < 0 || axis >= rank || ShapedType::isDynamic(shape[axis]) ||
        steps[i] == 0)
      return std::nullopt;
    int64_t dim = shape[axis], step = steps[i];
    int64_t start = (*starts)[i], end = (*ends)[i];
    if (start < 0)
      start += dim;
    if (end < 0)
      end += dim;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
    }
    int64_t span = step > 0 ? end - start : start - end;
    int64_t stride = step > 0 ? step : -step;
    params.starts[axis] = start;
    params.steps[axis] = step;
    params.sizes[axis] = span <= 0 ? 0 : (span + stride - 1) / stride;
  }
  return params;
}

//===----------------------------------------------------------------------===//
// Shapes, broadcasting, reshapes
//===----------------------------------------------------------------------===//

bool isStaticTensor(Type type) {
  auto ranked = dyn_cast<RankedTensorType>(type);
  return ranked && ranked.hasStaticShape();
}

FailureOr<Shape> broadcastShapes(ArrayRef<Shape> shapes) {
  size_t rank = 0;
  for (const Shape &shape : shapes)
    rank = std::max(rank, shape.size());
  Shape result(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    bool dynamic = false;
    int64_t known = 1;
    for (const Shape &shape : shapes) {
      if (i + shape.size() < rank)
        continue;
      int64_t dim = shape[i + shape.size() - rank];
      if (ShapedType::isDynamic(dim))
        dynamic = true;
      else if (dim != 1 && known != 1 && dim != known)
        return failure();
      else if (dim != 1)
        known = dim;
    }
    result[i] = known == 1 && dynamic ? ShapedType::kDynamic : known;
  }
  return result;
}

SmallVector<AffineExpr> broadcastExprs(ArrayRef<int64_t> operandShape,
                                       ArrayRef<int64_t> resultShape,
                                       unsigned firstLoop, MLIRContext *ctx) {
  SmallVector<AffineExpr> exprs;
  size_t offset = resultShape.size() - operandShape.size();
  for (auto [i, dim] : llvm::enumerate(operandShape)) {
    if (dim == 1 && resultShape[offset + i] != 1)
      exprs.push_back(getAffineConstantExpr(0, ctx));
    else
      exprs.push_back(getAffineDimExpr(firstLoop + offset + i, ctx));
  }
  return exprs;
}

AffineMap broadcastMap(ArrayRef<int64_t> operandShape,
                       ArrayRef<int64_t> resultShape, MLIRContext *ctx) {
  return AffineMap::get(resultShape.size(), 0,
                        broadcastExprs(operandShape, resultShape, 0, ctx), ctx);
}

Value broadcastElements(OpBuilder &b, Location loc, RankedTensorType type,
                        ValueRange inputs, lowering::ElementBody body) {
  SmallVector<AffineMap> maps;
  for (Value input : inputs)
    maps.push_back(broadcastMap(tensorType(input).getShape(), type.getShape(),
                                b.getContext()));
  return mapElements(b, loc, type, inputs, maps, body);
}

/// The reassociation that groups all `rank` dims into one.
static ReassociationIndices allDims(int64_t rank) {
  return llvm::to_vector(llvm::seq<int64_t>(0, rank));
}

Value reshapeTo(OpBuilder &b, Location loc, Value value,
                RankedTensorType type) {
  RankedTensorType source = tensorType(value);
  if (source.getShape() == type.getShape())
    return value;
  // One collapse or one expansion where the dims group.
  if (type.getRank() < source.getRank()) {
    if (auto groups = getReassociationIndicesForReshape(source, type))
      return tensor::CollapseShapeOp::create(b, loc, type, value, *groups);
  } else if (type.getRank() > source.getRank()) {
    if (auto groups = getReassociationIndicesForReshape(type, source))
      return tensor::ExpandShapeOp::create(b, loc, type, value, *groups);
  }
  // Otherwise through one dimension.
  auto flatType =
      RankedTensorType::get({type.getNumElements()}, type.getElementType());
  Value flat = value;
  if (source.getRank() == 0)
    flat = tensor::ExpandShapeOp::create(b, loc, flatType, value,
                                         ArrayRef<ReassociationIndices>{});
  else if (source.getRank() > 1)
    flat = tensor::CollapseShapeOp::create(
        b, loc, flatType, value,
        ArrayRef<ReassociationIndices>{allDims(source.getRank())});
  if (type.getRank() == 0)
    return tensor::CollapseShapeOp::create(b, loc, type, flat,
                                           ArrayRef<ReassociationIndices>{});
  if (type.getRank() == 1)
    return flat;
  return tensor::ExpandShapeOp::create(
      b, loc, type, flat,
      ArrayRef<ReassociationIndices>{allDims(type.getRank())});
}

Value castToType(OpBuilder &b, Location loc, Value value, Type type) {
  if (value.getType() == type)
    return value;
  return tensor::CastOp::create(b, loc, type, value);
}

Value emptyTensor(OpBuilder &b, Location loc, RankedTensorType type) {
  return tensor::EmptyOp::create(b, loc, type.getShape(),
                                 type.getElementType());
}

//===----------------------------------------------------------------------===//
// Scalars
//===----------------------------------------------------------------------===//

Value convertScalar(OpBuilder &b, Location loc, Value value, Type type) {
  Type from = value.getType();
  if (from == type)
    return value;
  auto fromFloat = dyn_cast<FloatType>(from);
  auto toFloat = dyn_cast<FloatType>(type);
  if (fromFloat && toFloat) {
    if (fromFloat.getWidth() < toFloat.getWidth())
      return arith::ExtFOp::create(b, loc, type, value);
    return arith::TruncFOp::create(b, loc, type, value);
  }
  if (fromFloat) {
    if (type.isInteger(1))
      return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, value,
                                   scalarConst(b, loc, from, 0.0));
    return arith::FPToSIOp::create(b, loc, type, value);
  }
  if (toFloat) {
    if (from.isInteger(1))
      return arith::UIToFPOp::create(b, loc, type, value);
    return arith::SIToFPOp::create(b, loc, type, value);
  }
  if (type.isInteger(1))
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, value,
                                 scalarConst(b, loc, from, 0.0));
  if (from.isInteger(1))
    return arith::ExtUIOp::create(b, loc, type, value);
  if (from.getIntOrFloatBitWidth() < type.getIntOrFloatBitWidth())
    return arith::ExtSIOp::create(b, loc, type, value);
  return arith::TruncIOp::create(b, loc, type, value);
}

Value toIndex(OpBuilder &b, Location loc, Value value) {
  if (value.getType().isIndex())
    return value;
  if (isa<FloatType>(value.getType()))
    value = arith::FPToSIOp::create(b, loc, b.getI64Type(), value);
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), value);
}

Value wrapIndex(OpBuilder &b, Location loc, Value index, int64_t size) {
  Value negative = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                         index, indexConst(b, loc, 0));
  Value wrapped =
      arith::AddIOp::create(b, loc, index, indexConst(b, loc, size));
  return arith::SelectOp::create(b, loc, negative, wrapped, index);
}

Value lowestValue(OpBuilder &b, Location loc, Type type) {
  if (isa<FloatType>(type))
    return scalarConst(b, loc, type, kNegInf);
  unsigned width = type.getIntOrFloatBitWidth();
  APInt lowest = width == 1 ? APInt(1, 0) : APInt::getSignedMinValue(width);
  return arith::ConstantOp::create(b, loc, type,
                                   b.getIntegerAttr(type, lowest));
}

Value addScalars(OpBuilder &b, Location loc, Value lhs, Value rhs) {
  if (isa<FloatType>(lhs.getType()))
    return arith::AddFOp::create(b, loc, lhs, rhs);
  return arith::AddIOp::create(b, loc, lhs, rhs);
}

Value mulScalars(OpBuilder &b, Location loc, Value lhs, Value rhs) {
  if (isa<FloatType>(lhs.getType()))
    return arith::MulFOp::create(b, loc, lhs, rhs);
  return arith::MulIOp::create(b, loc, lhs, rhs);
}

Value greaterThan(OpBuilder &b, Location loc, Value lhs, Value rhs,
                  bool orEqual) {
  if (isa<FloatType>(lhs.getType()))
    return arith::CmpFOp::create(
        b, loc, orEqual ? arith::CmpFPredicate::OGE : arith::CmpFPredicate::OGT,
        lhs, rhs);
  // Booleans compare unsigned (true > false).
  bool isBool = lhs.getType().isInteger(1);
  arith::CmpIPredicate predicate =
      orEqual
          ? (isBool ? arith::CmpIPredicate::uge : arith::CmpIPredicate::sge)
          : (isBool ? arith::CmpIPredicate::ugt : arith::CmpIPredicate::sgt);
  return arith::CmpIOp::create(b, loc, predicate, lhs, rhs);
}

} // namespace mlir::moe::onnx_lowering
