//===- ManagedMemory.cpp - Buffers that host and GPU code both reach ------===//
//
// With --target=cuda, parallel loops run as GPU kernels while the rest of
// the program (runtime calls, sequential loops) stays on the host. Until
// every buffer has one home, each is allocated host-shared (CUDA managed
// memory, through mgpuMemAlloc), so that both sides may touch it.
//
// Copies between buffers (a result moved into the caller's output, a
// reshape that could not alias; a scalar, as a buffer of one) become
// linalg.copy, and so kernels: as host memcpy they would pull every page of
// both buffers over to the host and back for the next kernel, and make the
// host wait for the GPU first.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEMANAGEDMEMORYPASS
#include "passes/Passes.h.inc"

namespace {

struct AllocToManaged : public OpRewritePattern<memref::AllocOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(memref::AllocOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getType().getMemorySpace())
      return rewriter.notifyMatchFailure(op, "has a memory space");
    auto alloc = gpu::AllocOp::create(
        rewriter, op.getLoc(), op.getType(), /*asyncToken=*/Type(),
        /*asyncDependencies=*/ValueRange(), op.getDynamicSizes(),
        op.getSymbolOperands(), /*hostShared=*/true);
    rewriter.replaceOp(op, alloc.getMemref());
    return success();
  }
};

struct DeallocToManaged : public OpRewritePattern<memref::DeallocOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(memref::DeallocOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.getMemref().getDefiningOp<gpu::AllocOp>())
      return rewriter.notifyMatchFailure(op, "not a gpu.alloc'ed buffer");
    // gpu-to-llvm lowers only the asynchronous form: free on a fresh
    // stream, then wait for it (moe-gpu-stream-order chains it instead).
    Location loc = op.getLoc();
    Type token = rewriter.getType<gpu::AsyncTokenType>();
    Value stream = gpu::WaitOp::create(rewriter, loc, token, ValueRange())
                       .getAsyncToken();
    Value freed = gpu::DeallocOp::create(rewriter, loc, token, stream,
                                         op.getMemref())
                      .getAsyncToken();
    gpu::WaitOp::create(rewriter, loc, Type(), freed);
    rewriter.eraseOp(op);
    return success();
  }
};

struct CopyToKernel : public OpRewritePattern<memref::CopyOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(memref::CopyOp op,
                                PatternRewriter &rewriter) const override {
    auto source = cast<MemRefType>(op.getSource().getType());
    auto target = cast<MemRefType>(op.getTarget().getType());
    if (source.getMemorySpace() || target.getMemorySpace())
      return rewriter.notifyMatchFailure(op, "has a memory space");
    Value from = op.getSource(), to = op.getTarget();
    if (source.getRank() == 0) {
      // A scalar is copied as one element: a loop of one, so a kernel.
      if (!source.getLayout().isIdentity() || !target.getLayout().isIdentity())
        return rewriter.notifyMatchFailure(op, "a scalar with a layout");
      auto asVector = [&](Value scalar, MemRefType type) -> Value {
        return memref::ExpandShapeOp::create(
            rewriter, op.getLoc(), MemRefType::get({1}, type.getElementType()),
            scalar, ArrayRef<ReassociationIndices>{});
      };
      from = asVector(from, source);
      to = asVector(to, target);
    }
    rewriter.replaceOpWithNewOp<linalg::CopyOp>(op, from, to);
    return success();
  }
};

struct MoEManagedMemoryPass
    : public impl::MoEManagedMemoryPassBase<MoEManagedMemoryPass> {
  using Base::Base;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<AllocToManaged, DeallocToManaged, CopyToKernel>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
} // namespace mlir::moe
