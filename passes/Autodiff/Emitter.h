//===- Emitter.h - typed onnx ops for the backward program ------*- C++ -*-===//
//
// Internal to passes/Autodiff. The VJP rules write the backward program in
// onnx and moe ops on static shapes (moe-autodiff runs after
// moe-static-shapes); the emitter computes each result type (broadcasts,
// reductions, transposes) so that a rule states only the math.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_PASSES_AUTODIFF_EMITTER_H
#define MOE_PASSES_AUTODIFF_EMITTER_H

#include "dialects/onnx/IR/ONNXDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"

namespace mlir::moe::autodiff {

using Shape = SmallVector<int64_t>;

/// The ranked type of `value`.
RankedTensorType tensorType(Value value);

class Emitter {
public:
  Emitter(OpBuilder &builder, Location loc) : b(builder), loc(loc) {}

  OpBuilder &builder() { return b; }
  Location getLoc() const { return loc; }

  /// An onnx op of `OpTy` with one result of `type`.
  template <typename OpTy>
  Value create(Type type, ValueRange inputs,
               ArrayRef<NamedAttribute> attrs = {}) {
    return OpTy::create(b, loc, TypeRange{type}, inputs, attrs)->getResult(0);
  }
  NamedAttribute intAttr(StringRef name, int64_t value);
  NamedAttribute intsAttr(StringRef name, ArrayRef<int64_t> values);

  // Constants.
  /// A 0-d tensor of the float or integer `elementType`.
  Value scalar(Type elementType, double value);
  /// A splat tensor.
  Value splat(RankedTensorType type, double value);
  /// A 1-d i64 tensor.
  Value ints(ArrayRef<int64_t> values);

  // Elementwise, with ONNX (numpy) broadcasting.
  Value add(Value lhs, Value rhs);
  Value sub(Value lhs, Value rhs);
  Value mul(Value lhs, Value rhs);
  Value div(Value lhs, Value rhs);
  Value neg(Value x);
  Value where(Value cond, Value lhs, Value rhs);
  /// An i1 comparison `OpTy` (Equal, Less, ...) of two broadcast operands.
  template <typename OpTy> Value compare(Value lhs, Value rhs) {
    Shape shape = broadcastShape(lhs, rhs);
    return create<OpTy>(RankedTensorType::get(shape, b.getI1Type()),
                        {lhs, rhs});
  }
  /// A unary op whose result has the operand's type.
  template <typename OpTy> Value unary(Value x) {
    return create<OpTy>(x.getType(), x);
  }
  Value cast(Value x, Type elementType);

  // Shapes.
  Value reshape(Value x, ArrayRef<int64_t> shape);
  Value transpose(Value x, ArrayRef<int64_t> perm);
  Value expand(Value x, ArrayRef<int64_t> shape);
  Value concat(ValueRange parts, int64_t axis);
  /// `x[..., begin:end, ...]` along `axis`, step 1.
  Value slice(Value x, int64_t axis, int64_t begin, int64_t end);
  /// Zero padding of `x` by `before` and `after` elements per dimension.
  Value pad(Value x, ArrayRef<int64_t> before, ArrayRef<int64_t> after);

  // Reductions and contractions. No axes reduce every axis (ONNX's
  // default; the op lists them all).
  Value reduceSum(Value x, ArrayRef<int64_t> axes, bool keepdims);
  Value reduceMax(Value x, ArrayRef<int64_t> axes, bool keepdims);
  Value reduceLogSumExp(Value x, ArrayRef<int64_t> axes, bool keepdims);
  /// The cotangent `g` of a broadcast result, summed back to `shape` (the
  /// leading dims the broadcast added and its stretched size-1 dims).
  Value unbroadcast(Value g, ArrayRef<int64_t> shape);
  /// ONNX MatMul (batched, broadcast).
  Value matmul(Value lhs, Value rhs);
  /// The last two dims of `x` swapped.
  Value transposeLast(Value x);

  // Indexing.
  Value gatherElements(Value data, Value indices, int64_t axis);
  /// `data` with `updates` added at `indices` along `axis`.
  Value scatterElementsAdd(Value data, Value indices, Value updates,
                           int64_t axis);
  /// `data` with `updates [N, ...]` added at the rows `indices [N, 1]`.
  Value scatterNDAdd(Value data, Value indices, Value updates);

  /// `[T, E]` of `elementType`: how many of each token's ids `[T, k]` are
  /// expert e (unrouted -1 counts for none).
  Value idCounts(Value ids, int64_t numExperts, Type elementType);

  // Activations.
  Value softmax(Value x, int64_t axis);
  /// The softmax VJP: `y * (dy - sum(dy * y, axis))` for `y = softmax(x)`.
  Value softmaxGrad(Value y, Value dy, int64_t axis);

  /// The numpy broadcast of two operand shapes.
  static Shape broadcastShape(Value lhs, Value rhs);
  /// The result shape of ONNX MatMul of two operands of rank >= 2.
  static Shape matmulShape(Value lhs, Value rhs);

private:
  template <typename OpTy> Value binary(Value lhs, Value rhs);

  OpBuilder &b;
  Location loc;
};

} // namespace mlir::moe::autodiff

#endif // MOE_PASSES_AUTODIFF_EMITTER_H
