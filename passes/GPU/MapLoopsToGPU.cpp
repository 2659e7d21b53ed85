//===- MapLoopsToGPU.cpp - parallel loops onto blocks and threads ---------===//
//
// Upstream's gpu-map-parallel-loops maps each dimension of a loop nest onto
// its own grid dimension and gives every block one thread, and a dimension
// past the third runs sequentially. Here every outermost scf.parallel is
// first collapsed into one dimension (the last loop varying fastest, so that
// neighbouring threads touch neighbouring elements), then tiled by the block
// size: the tile loop becomes the grid's x, the loop within a tile the
// block's threads, with a bounds check in place of a partial tile. Grid x
// reaches 2^31 - 1 blocks, so no loop nest is too big to launch. Parallel
// loops nested inside a mapped one run sequentially in its thread.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Dialect/GPU/Transforms/ParallelLoopMapper.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/IR/PatternMatch.h"

#include <numeric>

namespace mlir::moe {
#define GEN_PASS_DEF_MOEGPUMAPLOOPSPASS
#include "passes/Passes.h.inc"

namespace {

gpu::ParallelLoopDimMappingAttr mapTo(MLIRContext *context,
                                      gpu::Processor processor) {
  AffineMap identity = AffineMap::getMultiDimIdentityMap(1, context);
  return gpu::ParallelLoopDimMappingAttr::get(context, processor, identity,
                                              identity);
}

/// Runs every scf.parallel in `body` sequentially in its thread.
LogicalResult mapSequential(Block *body) {
  MLIRContext *context = body->getParentOp()->getContext();
  WalkResult result = body->walk([&](scf::ParallelOp nested) {
    SmallVector<gpu::ParallelLoopDimMappingAttr> mapping(
        nested.getNumLoops(), mapTo(context, gpu::Processor::Sequential));
    return failed(gpu::setMappingAttr(nested, mapping)) ? WalkResult::interrupt()
                                                       : WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

/// `loop` collapsed into one dimension, the last loop varying fastest.
scf::ParallelOp collapse(IRRewriter &rewriter, scf::ParallelOp loop) {
  std::vector<unsigned> all(loop.getNumLoops());
  std::iota(all.begin(), all.end(), 0u);
  // The collapsed loop replaces `loop` where it stood.
  Block *block = loop->getBlock();
  Operation *before = loop->getPrevNode();
  rewriter.setInsertionPoint(loop);
  collapseParallelLoops(rewriter, loop, {all});
  Operation *op = before ? before->getNextNode() : &block->front();
  while (!isa<scf::ParallelOp>(op))
    op = op->getNextNode();
  return cast<scf::ParallelOp>(op);
}

struct MoEGPUMapLoopsPass
    : public impl::MoEGPUMapLoopsPassBase<MoEGPUMapLoopsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (blockSize < 1 || blockSize > 1024) {
      emitError(getOperation()->getLoc())
          << "moe-gpu-map-loops: block-size must be in [1, 1024], got "
          << static_cast<int64_t>(blockSize);
      return signalPassFailure();
    }
    SmallVector<scf::ParallelOp> outermost;
    getOperation()->walk([&](scf::ParallelOp loop) {
      if (!loop->getParentOfType<scf::ParallelOp>() &&
          !loop->hasAttr(gpu::getMappingAttrName()))
        outermost.push_back(loop);
    });
    MLIRContext *context = &getContext();
    IRRewriter rewriter(context);
    for (scf::ParallelOp loop : outermost) {
      if (loop.getNumLoops() > 1)
        loop = collapse(rewriter, loop);
      auto [blocks, threads] =
          scf::tileParallelLoop(loop, {blockSize}, /*noMinMaxBounds=*/true);
      if (failed(mapSequential(threads.getBody())) ||
          failed(gpu::setMappingAttr(
              threads, {mapTo(context, gpu::Processor::ThreadX)})) ||
          failed(gpu::setMappingAttr(
              blocks, {mapTo(context, gpu::Processor::BlockX)}))) {
        loop.emitError("cannot map this loop onto GPU blocks and threads");
        return signalPassFailure();
      }
    }
  }
};

} // namespace
} // namespace mlir::moe
