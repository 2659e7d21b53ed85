//===- FuseRows.cpp - softmax and norms one row at a time -----------------===//
//
// Elementwise fusion stops at reductions: a softmax stays a mask add, a max,
// an exp, a sum and a divide, each one pass over a tensor that for
// attention's scores is far larger than the caches. Here the last
// elementwise op of such a chain is tiled by rows (every loop but the
// innermost, tile size 1) and its producers are fused into the row loop, so
// that each row is read from memory once, worked on while it is in L1, and
// written once.
//
// A chain only fuses when every edge in it lines loop k of the producer up
// with loop k of its user (the same loop count, the user's operand map
// equal to the producer's result map) and reductions run only over the
// innermost loop: then a row of the root needs one row of every producer,
// and fusion recomputes nothing across rows. Producers whose results are
// also used outside the chain, and contractions (BLAS calls), stay out.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/CSE.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEFUSEROWSPASS
#include "passes/Passes.h.inc"

namespace {

/// A linalg op on tensors that a row loop may compute: anything but a
/// contraction.
linalg::LinalgOp rowOp(Operation *op) {
  auto linalgOp = dyn_cast_or_null<linalg::LinalgOp>(op);
  if (!linalgOp || !linalgOp.hasPureTensorSemantics() ||
      linalg::isaContractionOpInterface(linalgOp) ||
      !isa<TilingInterface>(op) || op->getNumResults() != 1)
    return {};
  return linalgOp;
}

/// Reductions, if any, only over the innermost of `loops` loops.
bool reducesInnermostOnly(linalg::LinalgOp op, unsigned loops) {
  if (op.getNumLoops() != loops)
    return false;
  auto iterators = op.getIteratorTypesArray();
  return llvm::all_of(llvm::drop_end(iterators), [](utils::IteratorType it) {
    return it == utils::IteratorType::parallel;
  });
}

/// The producers that `root`'s row loop computes, `root` excluded: the
/// transitive linalg producers whose loops line up with `root`'s, less those
/// with users outside the chain. Empty when the chain has no reduction
/// (elementwise fusion has already done all there is).
llvm::SetVector<Operation *> rowChain(linalg::LinalgOp root) {
  unsigned loops = root.getNumLoops();
  llvm::SetVector<Operation *> chain;
  SmallVector<linalg::LinalgOp> worklist{root};
  while (!worklist.empty()) {
    linalg::LinalgOp user = worklist.pop_back_val();
    for (OpOperand &operand : user->getOpOperands()) {
      auto result = dyn_cast<OpResult>(operand.get());
      if (!result || result.getOwner()->getBlock() != root->getBlock())
        continue;
      Operation *def = result.getOwner();
      // A reduction's initial value: computed per row as it is.
      if (isa<linalg::FillOp>(def) && user.isDpsInit(&operand)) {
        chain.insert(def);
        continue;
      }
      linalg::LinalgOp producer = rowOp(def);
      if (!producer || !reducesInnermostOnly(producer, loops) ||
          producer.getIndexingMapMatchingResult(result) !=
              user.getMatchingIndexingMap(&operand))
        continue;
      if (chain.insert(def))
        worklist.push_back(producer);
    }
  }
  // Producers also needed outside the row loop stay whole; so do, in turn,
  // the producers that only they used.
  for (bool changed = true; changed;) {
    changed = false;
    for (Operation *op : llvm::to_vector(chain)) {
      bool usedOutside = llvm::any_of(op->getUsers(), [&](Operation *user) {
        return user != root && !chain.contains(user);
      });
      if (usedOutside) {
        chain.remove(op);
        changed = true;
      }
    }
  }
  bool reduces = llvm::any_of(chain, [](Operation *op) {
    auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
    return linalgOp && linalgOp.getNumReductionLoops() > 0;
  });
  if (!reduces)
    chain.clear();
  return chain;
}

struct MoEFuseRowsPass : public impl::MoEFuseRowsPassBase<MoEFuseRowsPass> {
  void runOnOperation() override {
    // Roots: elementwise ops of rank 2 or more at the end of a chain. The
    // last ones first, so that a root fused into a later one's loop is gone
    // before it is visited.
    SmallVector<linalg::LinalgOp> roots;
    getOperation()->walk([&](Operation *op) {
      linalg::LinalgOp root = rowOp(op);
      if (root && root.getNumLoops() >= 2 &&
          root.getNumReductionLoops() == 0)
        roots.push_back(root);
    });
    IRRewriter rewriter(&getContext());
    DenseSet<Operation *> erased;
    SmallVector<Operation *> rowLoops;
    for (linalg::LinalgOp root : llvm::reverse(roots)) {
      if (erased.contains(root) || root->use_empty())
        continue; // fused into a later root's loop, or dead
      llvm::SetVector<Operation *> chain = rowChain(root);
      if (chain.empty())
        continue;
      scf::SCFTilingOptions tiling;
      // An scf.forall: the rows are independent, and the CPU pipeline runs
      // them on its threads.
      tiling.setLoopType(scf::SCFTilingOptions::LoopType::ForallOp);
      SmallVector<OpFoldResult> sizes(root.getNumLoops() - 1,
                                      rewriter.getIndexAttr(1));
      sizes.push_back(rewriter.getIndexAttr(0));
      tiling.setTileSizes(sizes);
      scf::SCFTileAndFuseOptions options;
      options.setTilingOptions(tiling);
      options.setFusionControlFn(
          [&](tensor::ExtractSliceOp, OpResult producer, bool)
              -> std::optional<scf::SCFTileAndFuseOptions::ControlFnResult> {
            if (!chain.contains(producer.getOwner()))
              return std::nullopt;
            return scf::SCFTileAndFuseOptions::ControlFnResult{};
          });
      rewriter.setInsertionPoint(root);
      FailureOr<scf::SCFTileAndFuseResult> fused =
          scf::tileConsumerAndFuseProducersUsingSCF(
              rewriter, cast<TilingInterface>(root.getOperation()), options);
      if (failed(fused))
        continue; // left as it was
      rewriter.replaceOp(root, fused->replacements.lookup(root->getResult(0)));
      rowLoops.push_back(fused->loops.front());
      // The whole-tensor producers are dead now, users before producers.
      for (bool changed = true; changed;) {
        changed = false;
        for (Operation *op : chain) {
          if (erased.contains(op))
            continue;
          // Slices that fusion took of the producer and no longer needs.
          for (Operation *user : llvm::make_early_inc_range(op->getUsers()))
            if (isa<tensor::ExtractSliceOp>(user) && user->use_empty())
              rewriter.eraseOp(user);
          if (!op->use_empty())
            continue;
          rewriter.eraseOp(op);
          erased.insert(op);
          changed = true;
        }
      }
    }
    // Fusion computes a producer again for each of its users in the loop;
    // the copies are the same ops on the same slices. Only the loops: CSE
    // elsewhere would merge the fills that contractions must not share.
    DominanceInfo dominance;
    for (Operation *loop : rowLoops)
      eliminateCommonSubExpressions(rewriter, dominance, loop);
  }
};

} // namespace
} // namespace mlir::moe
