//===- IndexArithmetic.h - index functions written as onnx ops --*- C++ -*-===//
//
// Internal to passes/Raise: exporters spell simple index maps with chains of
// elementwise onnx ops (torch's floor division of a permutation by k is
// Less, Equal, Mod, And, Cast, Div and Sub; histc's bin of an expert id is
// Cast, Div, Cast and Clip). Rather than matching each spelling, a raising
// pattern evaluates the chain on every point of its domain and compares it
// with the map it needs.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_PASSES_RAISE_INDEXARITHMETIC_H
#define MOE_PASSES_RAISE_INDEXARITHMETIC_H

#include "mlir/IR/Value.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <optional>

namespace mlir::moe::raise {

/// The element of `result` computed from one element `point` of `source`,
/// where `result` is `source` through elementwise onnx ops (arithmetic,
/// Mod, comparisons, logic, Where, Cast, Clip, Floor, Ceil, Abs, Neg, Min,
/// Max) and shape-only ops (Reshape, Squeeze, Unsqueeze, Identity), with
/// one-element constants as the other operands; none otherwise. Each step
/// is rounded to its element type as ONNX computes it.
std::optional<double> evaluateIndexFunction(Value result, Value source,
                                            double point);

/// The single element of `value` where it is computed from constants and
/// static extents (Gather(Shape(v), i) of a static dimension of v) by the
/// ops above.
std::optional<int64_t> evaluateScalar(Value value);

/// Whether `result` is `expected(p)` of `source`'s element p for every p in
/// [0, size).
bool isIndexFunction(Value result, Value source, int64_t size,
                     llvm::function_ref<int64_t(int64_t)> expected);

} // namespace mlir::moe::raise

#endif // MOE_PASSES_RAISE_INDEXARITHMETIC_H
