//===- Emitter.cpp - typed onnx ops for the backward program --------------===//

#include "passes/Autodiff/Emitter.h"

#include "mlir/IR/BuiltinAttributes.h"

namespace mlir::moe::autodiff {

RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

static Type elementTypeOf(Value value) {
  return tensorType(value).getElementType();
}

NamedAttribute Emitter::intAttr(StringRef name, int64_t value) {
  return b.getNamedAttr(name, b.getI64IntegerAttr(value));
}

NamedAttribute Emitter::intsAttr(StringRef name, ArrayRef<int64_t> values) {
  return b.getNamedAttr(name, b.getDenseI64ArrayAttr(values));
}

Value Emitter::scalar(Type elementType, double value) {
  return splat(RankedTensorType::get({}, elementType), value);
}

Value Emitter::splat(RankedTensorType type, double value) {
  Type elt = type.getElementType();
  TypedAttr attr;
  if (auto floatType = dyn_cast<FloatType>(elt)) {
    bool lost;
    APFloat v(value);
    v.convert(floatType.getFloatSemantics(), APFloat::rmNearestTiesToEven,
              &lost);
    attr = DenseElementsAttr::get(type, v);
  } else {
    attr = DenseElementsAttr::get(
        type, APInt(elt.getIntOrFloatBitWidth(), static_cast<int64_t>(value),
                    /*isSigned=*/true));
  }
  return arith::ConstantOp::create(b, loc, attr);
}

Value Emitter::ints(ArrayRef<int64_t> values) {
  auto type = RankedTensorType::get({static_cast<int64_t>(values.size())},
                                    b.getI64Type());
  return arith::ConstantOp::create(b, loc,
                                   DenseIntElementsAttr::get(type, values));
}

Shape Emitter::broadcastShape(Value lhs, Value rhs) {
  ArrayRef<int64_t> a = tensorType(lhs).getShape(),
                    c = tensorType(rhs).getShape();
  size_t rank = std::max(a.size(), c.size());
  Shape shape(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t x = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t y = i < rank - c.size() ? 1 : c[i - (rank - c.size())];
    shape[i] = x == 1 ? y : x;
  }
  return shape;
}

template <typename OpTy> Value Emitter::binary(Value lhs, Value rhs) {
  auto type =
      RankedTensorType::get(broadcastShape(lhs, rhs), elementTypeOf(lhs));
  return create<OpTy>(type, {lhs, rhs});
}

Value Emitter::add(Value lhs, Value rhs) {
  return binary<onnx::AddOp>(lhs, rhs);
}
Value Emitter::sub(Value lhs, Value rhs) {
  return binary<onnx::SubOp>(lhs, rhs);
}
Value Emitter::mul(Value lhs, Value rhs) {
  return binary<onnx::MulOp>(lhs, rhs);
}
Value Emitter::div(Value lhs, Value rhs) {
  return binary<onnx::DivOp>(lhs, rhs);
}
Value Emitter::neg(Value x) { return unary<onnx::NegOp>(x); }

Value Emitter::where(Value cond, Value lhs, Value rhs) {
  Shape shape = broadcastShape(lhs, rhs);
  auto withCond = RankedTensorType::get(shape, b.getI1Type());
  Value shaped = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(withCond, false));
  shape = broadcastShape(cond, shaped);
  return create<onnx::WhereOp>(
      RankedTensorType::get(shape, elementTypeOf(lhs)), {cond, lhs, rhs});
}

Value Emitter::cast(Value x, Type elementType) {
  if (elementTypeOf(x) == elementType)
    return x;
  int64_t to = 1; // FLOAT
  if (elementType.isF16())
    to = 10;
  else if (elementType.isBF16())
    to = 16;
  else if (elementType.isF64())
    to = 11;
  else if (elementType.isInteger(64))
    to = 7;
  else if (elementType.isInteger(32))
    to = 6;
  else if (elementType.isInteger(1))
    to = 9;
  return create<onnx::CastOp>(
      RankedTensorType::get(tensorType(x).getShape(), elementType), x,
      {intAttr("to", to)});
}

Value Emitter::reshape(Value x, ArrayRef<int64_t> shape) {
  if (tensorType(x).getShape() == shape)
    return x;
  return create<onnx::ReshapeOp>(
      RankedTensorType::get(shape, elementTypeOf(x)), {x, ints(shape)});
}

Value Emitter::transpose(Value x, ArrayRef<int64_t> perm) {
  ArrayRef<int64_t> in = tensorType(x).getShape();
  Shape shape;
  for (int64_t p : perm)
    shape.push_back(in[p]);
  return create<onnx::TransposeOp>(
      RankedTensorType::get(shape, elementTypeOf(x)), x,
      {intsAttr("perm", perm)});
}

Value Emitter::transposeLast(Value x) {
  int64_t rank = tensorType(x).getRank();
  Shape perm;
  for (int64_t i = 0; i < rank; ++i)
    perm.push_back(i);
  std::swap(perm[rank - 1], perm[rank - 2]);
  return transpose(x, perm);
}

Value Emitter::expand(Value x, ArrayRef<int64_t> shape) {
  if (tensorType(x).getShape() == shape)
    return x;
  return create<onnx::ExpandOp>(
      RankedTensorType::get(shape, elementTypeOf(x)), {x, ints(shape)});
}

Value Emitter::concat(ValueRange parts, int64_t axis) {
  Shape shape(tensorType(parts.front()).getShape());
  int64_t rank = shape.size();
  axis = axis < 0 ? axis + rank : axis;
  shape[axis] = 0;
  for (Value part : parts)
    shape[axis] += tensorType(part).getDimSize(axis);
  return create<onnx::ConcatOp>(
      RankedTensorType::get(shape, elementTypeOf(parts.front())), parts,
      {intAttr("axis", axis)});
}

Value Emitter::slice(Value x, int64_t axis, int64_t begin, int64_t end) {
  Shape shape(tensorType(x).getShape());
  shape[axis] = end - begin;
  return create<onnx::SliceOp>(
      RankedTensorType::get(shape, elementTypeOf(x)),
      {x, ints({begin}), ints({end}), ints({axis}), ints({1})});
}

Value Emitter::pad(Value x, ArrayRef<int64_t> before, ArrayRef<int64_t> after) {
  Shape shape(tensorType(x).getShape());
  Shape pads(before);
  pads.append(after.begin(), after.end());
  for (size_t i = 0; i < shape.size(); ++i)
    shape[i] += before[i] + after[i];
  return create<onnx::PadOp>(RankedTensorType::get(shape, elementTypeOf(x)),
                             {x, ints(pads)});
}

template <typename OpTy>
static Value reduceWith(Emitter &e, Value x, ArrayRef<int64_t> axes,
                        bool keepdims) {
  ArrayRef<int64_t> in = tensorType(x).getShape();
  int64_t rank = in.size();
  SmallVector<bool> reduced(rank, axes.empty());
  for (int64_t axis : axes)
    reduced[axis < 0 ? axis + rank : axis] = true;
  Shape listed;
  for (int64_t i = 0; i < rank; ++i)
    if (reduced[i])
      listed.push_back(i);
  Shape shape;
  for (int64_t i = 0; i < rank; ++i)
    if (!reduced[i])
      shape.push_back(in[i]);
    else if (keepdims)
      shape.push_back(1);
  return e.create<OpTy>(RankedTensorType::get(shape, elementTypeOf(x)),
                        {x, e.ints(listed)}, {e.intAttr("keepdims", keepdims)});
}

Value Emitter::reduceSum(Value x, ArrayRef<int64_t> axes, bool keepdims) {
  return reduceWith<onnx::ReduceSumOp>(*this, x, axes, keepdims);
}
Value Emitter::reduceMax(Value x, ArrayRef<int64_t> axes, bool keepdims) {
  return reduceWith<onnx::ReduceMaxOp>(*this, x, axes, keepdims);
}
Value Emitter::reduceLogSumExp(Value x, ArrayRef<int64_t> axes,
                               bool keepdims) {
  return reduceWith<onnx::ReduceLogSumExpOp>(*this, x, axes, keepdims);
}

Value Emitter::unbroadcast(Value g, ArrayRef<int64_t> shape) {
  ArrayRef<int64_t> in = tensorType(g).getShape();
  if (in == shape)
    return g;
  int64_t lead = in.size() - shape.size();
  Shape axes;
  for (int64_t i = 0; i < static_cast<int64_t>(in.size()); ++i)
    if (i < lead || (shape[i - lead] == 1 && in[i] != 1))
      axes.push_back(i);
  Value summed = axes.empty() ? g : reduceSum(g, axes, /*keepdims=*/true);
  return reshape(summed, shape);
}

Value Emitter::matmul(Value lhs, Value rhs) {
  return create<onnx::MatMulOp>(
      RankedTensorType::get(matmulShape(lhs, rhs), elementTypeOf(lhs)),
      {lhs, rhs});
}

Shape Emitter::matmulShape(Value lhs, Value rhs) {
  ArrayRef<int64_t> a = tensorType(lhs).getShape(),
                    c = tensorType(rhs).getShape();
  // Batch dims broadcast; the last two contract.
  Shape batchA(a.drop_back(2)), batchC(c.drop_back(2));
  size_t rank = std::max(batchA.size(), batchC.size());
  Shape shape(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t x = i < rank - batchA.size() ? 1 : batchA[i - (rank - batchA.size())];
    int64_t y = i < rank - batchC.size() ? 1 : batchC[i - (rank - batchC.size())];
    shape[i] = x == 1 ? y : x;
  }
  shape.push_back(a[a.size() - 2]);
  shape.push_back(c.back());
  return shape;
}

Value Emitter::gatherElements(Value data, Value indices, int64_t axis) {
  return create<onnx::GatherElementsOp>(
      RankedTensorType::get(tensorType(indices).getShape(),
                            elementTypeOf(data)),
      {data, indices}, {intAttr("axis", axis)});
}

Value Emitter::scatterElementsAdd(Value data, Value indices, Value updates,
                                  int64_t axis) {
  return create<onnx::ScatterElementsOp>(
      data.getType(), {data, indices, updates},
      {intAttr("axis", axis),
       b.getNamedAttr("reduction", b.getStringAttr("add"))});
}

Value Emitter::scatterNDAdd(Value data, Value indices, Value updates) {
  return create<onnx::ScatterNDOp>(
      data.getType(), {data, indices, updates},
      {b.getNamedAttr("reduction", b.getStringAttr("add"))});
}

Value Emitter::idCounts(Value ids, int64_t numExperts, Type elementType) {
  Shape experts;
  for (int64_t i = 0; i < numExperts; ++i)
    experts.push_back(i);
  ArrayRef<int64_t> shape = tensorType(ids).getShape();
  Value wide = reshape(cast(ids, b.getI64Type()), {shape[0], shape[1], 1});
  Value hits = cast(compare<onnx::EqualOp>(wide, this->ints(experts)),
                    elementType);
  return reduceSum(hits, {1}, /*keepdims=*/false);
}

Value Emitter::softmax(Value x, int64_t axis) {
  return create<onnx::SoftmaxOp>(x.getType(), x, {intAttr("axis", axis)});
}

Value Emitter::softmaxGrad(Value y, Value dy, int64_t axis) {
  Value dot = reduceSum(mul(dy, y), {axis}, /*keepdims=*/true);
  return mul(y, sub(dy, dot));
}

} // namespace mlir::moe::autodiff
