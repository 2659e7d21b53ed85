//===- BufferBounds.h - the most a tensor or memref may hold ----*- C++ -*-===//
//
// A type such as tensor<4x4611686018427387904x8xf32> is valid MLIR, but its
// element count overflows int64 and no machine can hold it: lowerings that
// compute its size wrap to 0 or a negative number and the program crashes
// at run time. Every op of the moe and onnx dialects carries the
// BoundedBuffers trait, which refuses such types on its operands and
// results; verifiers that size buffers from attributes (a capacity, a top-k)
// check those buffers with the same bound.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_DIALECTS_COMMON_BUFFERBOUNDS_H
#define MOE_DIALECTS_COMMON_BUFFERBOUNDS_H

#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/Operation.h"

#include <cstdint>
#include <optional>

namespace mlir::moe {

/// The most bytes one tensor or memref may hold: 2^40 (1 TiB). Far above any
/// single buffer of a real model (one layer's stacked expert weights are a
/// few GiB), and far enough below 2^63 that sizes derived from it (strides
/// times element sizes, sums of a few buffers) cannot overflow int64.
inline constexpr int64_t kMaxBufferBytes = int64_t(1) << 40;

/// Bytes one element of `type` takes in memory: whole bytes for integers and
/// floats (i1 takes one), 8 for index, and the parts of complex and vector
/// elements; 1 for any other type.
int64_t getElementBytes(Type type);

/// The product of the static dimensions of `shape` (dynamic ones are
/// skipped), or nullopt when it overflows int64.
std::optional<int64_t> getStaticElementCount(ArrayRef<int64_t> shape);

/// Checks that a buffer of `shape` (its static dimensions) and `elementType`
/// has an element count and a byte size that fit int64 and at most
/// kMaxBufferBytes bytes; otherwise emits an error on `op` that names the
/// buffer as `what`.
LogicalResult verifyBufferSize(Operation *op, const Twine &what,
                               ArrayRef<int64_t> shape, Type elementType);

/// verifyBufferSize for every ranked tensor and memref operand and result of
/// `op`.
LogicalResult verifyBufferBounds(Operation *op);

/// The op trait: every ranked tensor and memref operand and result of the
/// op is within the buffer bound (see verifyBufferBounds). Not in a nested
/// `OpTrait` namespace, which would hide mlir::OpTrait inside mlir::moe.
template <typename ConcreteType>
class BoundedBuffers
    : public ::mlir::OpTrait::TraitBase<ConcreteType, BoundedBuffers> {
public:
  static LogicalResult verifyTrait(Operation *op) {
    return verifyBufferBounds(op);
  }
};

} // namespace mlir::moe

#endif // MOE_DIALECTS_COMMON_BUFFERBOUNDS_H
