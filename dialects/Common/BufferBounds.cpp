//===- BufferBounds.cpp - the most a tensor or memref may hold ------------===//

#include "dialects/Common/BufferBounds.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;

int64_t moe::getElementBytes(Type type) {
  if (type.isIntOrFloat())
    return std::max<int64_t>(1, llvm::divideCeil(type.getIntOrFloatBitWidth(), 8));
  if (type.isIndex())
    return 8;
  if (auto complex = dyn_cast<ComplexType>(type))
    return 2 * getElementBytes(complex.getElementType());
  if (auto vector = dyn_cast<VectorType>(type)) {
    // Vectors are small (their shapes are in registers): no overflow here
    // that the buffer's own count would not report.
    std::optional<int64_t> count = getStaticElementCount(vector.getShape());
    int64_t bytes;
    if (!count ||
        llvm::MulOverflow(*count, getElementBytes(vector.getElementType()),
                          bytes))
      return kMaxBufferBytes + 1;
    return std::max<int64_t>(bytes, 1);
  }
  return 1;
}

std::optional<int64_t> moe::getStaticElementCount(ArrayRef<int64_t> shape) {
  int64_t count = 1;
  for (int64_t dim : shape)
    if (!ShapedType::isDynamic(dim) && llvm::MulOverflow(count, dim, count))
      return std::nullopt;
  return count;
}

LogicalResult moe::verifyBufferSize(Operation *op, const Twine &what,
                                    ArrayRef<int64_t> shape,
                                    Type elementType) {
  std::optional<int64_t> count = getStaticElementCount(shape);
  if (!count)
    return op->emitOpError() << what
                             << " has more elements than int64 can count";
  int64_t bytes;
  if (llvm::MulOverflow(*count, getElementBytes(elementType), bytes))
    return op->emitOpError() << what
                             << " needs more bytes than int64 can count";
  if (bytes > kMaxBufferBytes)
    return op->emitOpError()
           << what << " needs " << bytes
           << " bytes, more than the 2^40 bytes one buffer may hold";
  return success();
}

/// Checks one operand or result type; names it as `kind #index`.
static LogicalResult verifyValueType(Operation *op, Type type, StringRef kind,
                                     unsigned index) {
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped || !shaped.hasRank() || isa<VectorType>(type))
    return success();
  std::string what;
  llvm::raw_string_ostream os(what);
  os << kind << " #" << index << " of type '" << type << "'";
  return moe::verifyBufferSize(op, what, shaped.getShape(),
                               shaped.getElementType());
}

LogicalResult moe::verifyBufferBounds(Operation *op) {
  for (auto [index, type] : llvm::enumerate(op->getOperandTypes()))
    if (failed(verifyValueType(op, type, "operand", index)))
      return failure();
  for (auto [index, type] : llvm::enumerate(op->getResultTypes()))
    if (failed(verifyValueType(op, type, "result", index)))
      return failure();
  return success();
}
