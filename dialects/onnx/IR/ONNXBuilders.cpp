//===- ONNXBuilders.cpp - onnx ops that passes create ---------------------===//

#include "dialects/onnx/IR/ONNXBuilders.h"
#include "dialects/onnx/IR/ONNXDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::moe;

Value onnx::createSlice(OpBuilder &b, Location loc, Value value, int64_t axis,
                        int64_t begin, int64_t end) {
  auto type = cast<RankedTensorType>(value.getType());
  if (begin == 0 && end == type.getDimSize(axis))
    return value;
  auto one = RankedTensorType::get({1}, b.getI64Type());
  auto constant = [&](int64_t x) -> Value {
    return arith::ConstantOp::create(b, loc,
                                     DenseIntElementsAttr::get(one, {x}));
  };
  SmallVector<int64_t> shape(type.getShape());
  shape[axis] = end - begin;
  return SliceOp::create(
             b, loc, TypeRange{type.clone(shape)},
             ValueRange{value, constant(begin), constant(end), constant(axis)})
      ->getResult(0);
}

Value onnx::createConcat(OpBuilder &b, Location loc, ArrayRef<Value> parts,
                         int64_t axis) {
  if (parts.size() == 1)
    return parts.front();
  auto type = cast<RankedTensorType>(parts.front().getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[axis] = 0;
  for (Value part : parts)
    shape[axis] += cast<RankedTensorType>(part.getType()).getDimSize(axis);
  return ConcatOp::create(
             b, loc, TypeRange{type.clone(shape)}, ValueRange(parts),
             {b.getNamedAttr("axis", b.getI64IntegerAttr(axis))})
      ->getResult(0);
}
