//===- RuntimeCalls.h - calls into the moert runtime ------------*- C++ -*-===//
//
// What the passes that target the CPU runtime (runtime/include/moert/moert.h)
// share: declaring moert_* functions, passing tensors and buffers to them as
// raw pointers, and the encodings of the ABI (grid axes, element types).
//
//===----------------------------------------------------------------------===//

#ifndef MOE_PASSES_RUNTIME_RUNTIMECALLS_H
#define MOE_PASSES_RUNTIME_RUNTIMECALLS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/PatternMatch.h"

#include <optional>

namespace mlir::moe::runtime {

/// An ordered list of grid axes as the ABI passes it: nibble i holds
/// axis_i + 1 and the list ends at the first zero nibble.
int64_t encodeAxes(ArrayRef<int16_t> axes);

/// The ABI's element type code (enum moert_dtype: 0 f32, 1 f64, 2 i32,
/// 3 i64, 4 f16, 5 bf16), if it has one.
std::optional<int32_t> dtypeCode(Type elementType);

/// `func.call @name(args)`, declaring `name` in the enclosing module on first
/// use with the types of `args` and `results`.
ValueRange call(OpBuilder &b, Location loc, StringRef name, ValueRange args,
                TypeRange results = {});

/// An i64 / i32 constant.
Value i64Const(OpBuilder &b, Location loc, int64_t value);
Value i32Const(OpBuilder &b, Location loc, int32_t value);

/// The data pointer (!llvm.ptr) of a memref with an identity layout.
Value dataPointer(OpBuilder &b, Location loc, Value memref);

/// The data pointer of a buffer holding `tensor`, which the callee only reads.
Value readPointer(OpBuilder &b, Location loc, Value tensor);

/// A new buffer of `type` for a callee to fill; `asTensor` gives the tensor
/// it holds afterwards.
Value newBuffer(OpBuilder &b, Location loc, RankedTensorType type);
Value asTensor(OpBuilder &b, Location loc, Value buffer);

/// The world rank (i64), from the runtime.
Value worldRank(OpBuilder &b, Location loc);

/// This rank's coordinate on grid axis `axis` (index) of a grid of `shape`.
Value gridCoordinate(OpBuilder &b, Location loc, Value rank,
                     ArrayRef<int64_t> shape, int16_t axis);

/// This rank's position (index) in its group over `axes`: the linear index of
/// its coordinates on them, last fastest.
Value groupPosition(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                    ArrayRef<int16_t> axes);

} // namespace mlir::moe::runtime

#endif // MOE_PASSES_RUNTIME_RUNTIMECALLS_H
