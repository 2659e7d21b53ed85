//===- KernelOperands.cpp - Kernel buffers whose layout a pointer holds ---===//
//
// The host passes each buffer to a kernel as one bare pointer, so a kernel
// can only rebuild a buffer whose sizes, strides and offset its type gives.
// A per-rank slice (an offset that depends on the rank) or a dynamic shape
// would lose them. Such a buffer is passed instead as its base buffer plus
// the dynamic parts of its metadata, and the kernel rebuilds the view with
// memref.reinterpret_cast.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Transforms/RegionUtils.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEGPUSTATICKERNELOPERANDSPASS
#include "passes/Passes.h.inc"

namespace {

/// A strided layout: the strides and offset, each static or dynamic.
struct Layout {
  SmallVector<int64_t> strides;
  int64_t offset;
};

/// Whether a bare pointer to the first element is all a kernel needs.
bool isStatic(MemRefType type, const Layout &layout) {
  return type.hasStaticShape() && !ShapedType::isDynamic(layout.offset) &&
         llvm::none_of(layout.strides, ShapedType::isDynamic);
}

/// `value` in its static form where the type has one, else `dynamic`.
OpFoldResult fold(OpBuilder &b, int64_t value, Value dynamic) {
  if (ShapedType::isDynamic(value))
    return dynamic;
  return b.getIndexAttr(value);
}

/// Rebuilds `buffer` at the top of `launch`'s body from its base buffer and
/// the dynamic parts of its metadata, taken on the host.
void rebuildInKernel(gpu::LaunchOp launch, Value buffer,
                     const Layout &layout) {
  auto type = cast<MemRefType>(buffer.getType());
  OpBuilder b(launch);
  Location loc = launch.getLoc();
  auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, buffer);
  SmallVector<OpFoldResult> sizes, strideValues;
  for (auto [size, value] : llvm::zip(type.getShape(), metadata.getSizes()))
    sizes.push_back(fold(b, size, value));
  for (auto [stride, value] : llvm::zip(layout.strides, metadata.getStrides()))
    strideValues.push_back(fold(b, stride, value));
  OpFoldResult offsetValue = fold(b, layout.offset, metadata.getOffset());

  b.setInsertionPointToStart(&launch.getBody().front());
  Value rebuilt = memref::ReinterpretCastOp::create(
      b, loc, type, metadata.getBaseBuffer(), offsetValue, sizes, strideValues);
  buffer.replaceUsesWithIf(rebuilt, [&](OpOperand &use) {
    return launch->isProperAncestor(use.getOwner());
  });
}

struct MoEGPUStaticKernelOperandsPass
    : public impl::MoEGPUStaticKernelOperandsPassBase<
          MoEGPUStaticKernelOperandsPass> {
  void runOnOperation() override {
    WalkResult result = getOperation()->walk([&](gpu::LaunchOp launch) {
      llvm::SetVector<Value> captured;
      getUsedValuesDefinedAbove(launch.getBody(), captured);
      for (Value value : captured) {
        auto type = dyn_cast<MemRefType>(value.getType());
        if (!type)
          continue;
        Layout layout;
        if (failed(type.getStridesAndOffset(layout.strides, layout.offset))) {
          launch.emitError("moe-gpu-static-kernel-operands: a kernel uses a "
                           "buffer without a strided layout: ")
              << type;
          return WalkResult::interrupt();
        }
        if (!isStatic(type, layout))
          rebuildInKernel(launch, value, layout);
      }
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
} // namespace mlir::moe
