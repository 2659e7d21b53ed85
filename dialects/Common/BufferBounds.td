//===- BufferBounds.td - the most a tensor or memref may hold -*- tablegen -*-===//

#ifndef MOE_DIALECTS_COMMON_BUFFERBOUNDS_TD
#define MOE_DIALECTS_COMMON_BUFFERBOUNDS_TD

include "mlir/IR/OpBase.td"

// Every ranked tensor and memref operand and result has a static element
// count and byte size that fit int64 and at most 2^40 bytes
// (dialects/Common/BufferBounds.h).
def BoundedBuffers : NativeOpTrait<"BoundedBuffers"> {
  let cppNamespace = "::mlir::moe";
}

#endif // MOE_DIALECTS_COMMON_BUFFERBOUNDS_TD
