//===- ONNXFolding.h - constant folding of onnx ops -------------*- C++ -*-===//
//
// Exported graphs compute shapes, capacities and index offsets at run time
// from Shape, Gather, Concat, Mul, Cast, ... of constants. One folder
// evaluates them (passes/Conversion/ONNXToLinalg/Constants.cpp): the
// convert-onnx-to-linalg lowering folds one op at a time, the raising
// patterns fold whole constant expressions.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_PASSES_ONNXFOLDING_H
#define MOE_PASSES_ONNXFOLDING_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace mlir::moe::onnx_lowering {

using Shape = SmallVector<int64_t>;

/// The value of a constant tensor: integers (i1 as 0/1) as int64, floats as
/// double.
struct ConstTensor {
  Shape shape;
  Type elementType;
  SmallVector<int64_t> ints;
  SmallVector<double> floats;

  bool isFloat() const { return isa<FloatType>(elementType); }
  int64_t size() const;
  double asDouble(int64_t i) const { return isFloat() ? floats[i] : ints[i]; }
  int64_t asInt(int64_t i) const {
    return isFloat() ? static_cast<int64_t>(floats[i]) : ints[i];
  }
};

/// The value of `value` where an arith.constant (dense, or a dense_resource
/// blob of a plain element type) defines it.
std::optional<ConstTensor> getConstant(Value value);
/// The elements of an integer or float constant as int64.
std::optional<Shape> getConstantInts(Value value);
/// The single element of a one-element constant.
std::optional<double> getConstantScalar(Value value);
/// The elements attribute of `value` with the static `type`.
DenseElementsAttr toAttr(const ConstTensor &value, RankedTensorType type);
/// What an onnx op evaluates to where its operands are constants, for the
/// ops that exported shape computations use; none where it is not folded.
std::optional<ConstTensor> foldOp(Operation *op);

/// Evaluates `value` when it is computed from constants and static shapes
/// only (Shape, Size, Gather, Cast, elementwise arithmetic, Mod, Ceil, Floor,
/// reshapes, ...), as a capacity `ceil(T / E * factor)` is with a static T:
/// `foldOp` applied through up to `depth` ops, each result rounded to its
/// element type as ONNX computes it (none where an integer does not fit).
std::optional<ConstTensor> foldConstantExpression(Value value,
                                                  unsigned depth = 16);

} // namespace mlir::moe::onnx_lowering

#endif // MOE_PASSES_ONNXFOLDING_H
