//===- ParallelLoopsFirst.cpp - Parallel loops outside reductions --------===//
//
// convert-linalg-to-parallel-loops keeps a linalg op's loop order: a
// reduction loop before a parallel one (a column sum, an ONNX ReduceSum over
// the first axis) becomes a sequential loop around a parallel one, which on
// a GPU is a host loop that launches a kernel, and waits for it, at every
// step. With the parallel loops moved outside the reductions the whole op
// is one kernel whose threads each run their reduction.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEPARALLELLOOPSFIRSTPASS
#include "passes/Passes.h.inc"

namespace {

struct ParallelLoopsFirst final : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    // The new order: the parallel loops, then the others, each as before.
    SmallVector<unsigned> order;
    SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
    for (auto [loop, iterator] : llvm::enumerate(iterators))
      if (linalg::isParallelIterator(iterator))
        order.push_back(loop);
    for (auto [loop, iterator] : llvm::enumerate(iterators))
      if (!linalg::isParallelIterator(iterator))
        order.push_back(loop);
    if (llvm::equal(order, llvm::seq<unsigned>(0, order.size())))
      return rewriter.notifyMatchFailure(op, "parallel loops come first");
    if (failed(linalg::interchangeGenericOp(rewriter, op, order)))
      return rewriter.notifyMatchFailure(op, "cannot interchange its loops");
    return success();
  }
};

struct MoEParallelLoopsFirstPass
    : public impl::MoEParallelLoopsFirstPassBase<MoEParallelLoopsFirstPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<ParallelLoopsFirst>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace mlir::moe
