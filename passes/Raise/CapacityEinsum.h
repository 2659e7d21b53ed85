//===- CapacityEinsum.h - the GShard/Switch einsum form ---------*- C++ -*-===//

#ifndef MOE_PASSES_RAISE_CAPACITYEINSUM_H
#define MOE_PASSES_RAISE_CAPACITYEINSUM_H

#include "passes/Raise/Matchers.h"

namespace mlir::moe::raise {

/// A constant expression evaluated: its elements in row-major order, each
/// rounded to the element type as ONNX computes it.
struct FoldedConstant {
  Type elementType;
  SmallVector<double> values;
};

/// Evaluates `value` when it is computed from constants and static shapes
/// only (Shape, Size, Gather, Cast, elementwise arithmetic, Ceil, Floor and
/// reshapes), as a capacity `ceil(T / E * factor)` is with a static T.
std::optional<FoldedConstant> foldConstantExpression(Value value,
                                                     unsigned depth = 16);

void populateCapacityEinsumPatterns(RewritePatternSet &patterns);

} // namespace mlir::moe::raise

#endif // MOE_PASSES_RAISE_CAPACITYEINSUM_H
