//===- ThreadLoops.cpp - The parallel loops worth the OpenMP threads -------===//
//
// On the CPU, scf.parallel loops become OpenMP worksharing loops
// (convert-scf-to-openmp) on the pool that oneDNN's matmuls use. Forking
// the pool costs a few microseconds, and a loop nested in another would
// fork at every outer step: only outermost parallel loops with enough
// iterations (their own times those of the loops inside) stay parallel;
// the others become scf.for nests, as convert-linalg-to-loops would have
// made them. An elementwise loop keeps its innermost dimension sequential,
// so that it still vectorizes. Loops with reductions are refused: threads
// would change the order of their additions, and the lowering makes none.
// Small buffers that live within one iteration of a threaded loop (a
// softmax's row, its maximum and sum) move to each thread's stack: an
// allocation and a free per row through the runtime's buffer cache, whose
// lock the threads share, cost more than the row's arithmetic.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Conversion/SCFToOpenMP/SCFToOpenMP.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOETHREADLOOPSPASS
#include "passes/Passes.h.inc"

namespace {

/// Iterations of a loop dimension; dynamic bounds count as many.
int64_t tripCount(Value lower, Value upper, Value step) {
  std::optional<int64_t> lo = getConstantIntValue(lower);
  std::optional<int64_t> hi = getConstantIntValue(upper);
  std::optional<int64_t> st = getConstantIntValue(step);
  if (!lo || !hi || !st || *st <= 0)
    return std::numeric_limits<int32_t>::max();
  return std::max<int64_t>(0, llvm::divideCeil(*hi - *lo, *st));
}

int64_t saturatingMul(int64_t a, int64_t b) {
  int64_t product;
  if (llvm::MulOverflow(a, b, product))
    return std::numeric_limits<int64_t>::max();
  return product;
}

int64_t iterationsInside(Region &region);

/// The iterations of `loop`'s own dimensions.
int64_t ownIterations(scf::ParallelOp loop) {
  int64_t trips = 1;
  for (auto [lo, hi, st] :
       llvm::zip(loop.getLowerBound(), loop.getUpperBound(), loop.getStep()))
    trips = saturatingMul(trips, tripCount(lo, hi, st));
  return trips;
}

/// The innermost iterations that `op`, a loop, runs; 0 if it is no loop.
int64_t iterations(Operation *op) {
  int64_t trips;
  if (auto loop = dyn_cast<scf::ForOp>(op))
    trips = tripCount(loop.getLowerBound(), loop.getUpperBound(),
                      loop.getStep());
  else if (auto loop = dyn_cast<scf::ParallelOp>(op))
    trips = ownIterations(loop);
  else
    return 0;
  return saturatingMul(trips, iterationsInside(op->getRegion(0)));
}

/// The innermost iterations that one step of the loops around `region`
/// runs: the largest product of trip counts along a nest inside it.
int64_t iterationsInside(Region &region) {
  int64_t most = 1;
  region.walk<WalkOrder::PreOrder>([&](Operation *op) {
    int64_t inner = iterations(op);
    if (inner == 0)
      return WalkResult::advance();
    most = std::max(most, inner);
    return WalkResult::skip();
  });
  return most;
}

/// Whether `loop`'s body holds a loop.
bool hasInnerLoop(scf::ParallelOp loop) {
  return loop.getBody()
      ->walk([](Operation *op) {
        return isa<scf::ForOp, scf::ParallelOp>(op) ? WalkResult::interrupt()
                                                    : WalkResult::advance();
      })
      .wasInterrupted();
}

/// Makes the innermost dimension of `loop` an scf.for inside a parallel
/// loop over the others. The OpenMP lowering collapses a loop's dimensions
/// into one, recovering each index by division: on an elementwise loop's
/// innermost dimension that costs a division per element and the
/// vectorization of the loop.
void serializeInnermost(RewriterBase &rewriter, scf::ParallelOp loop) {
  Location loc = loop.getLoc();
  rewriter.setInsertionPoint(loop);
  auto outer = scf::ParallelOp::create(
      rewriter, loc, loop.getLowerBound().drop_back(),
      loop.getUpperBound().drop_back(), loop.getStep().drop_back());
  rewriter.setInsertionPoint(outer.getBody()->getTerminator());
  auto inner = scf::ForOp::create(rewriter, loc, loop.getLowerBound().back(),
                                  loop.getUpperBound().back(),
                                  loop.getStep().back());
  SmallVector<Value> ivs(outer.getInductionVars());
  ivs.push_back(inner.getInductionVar());
  Block *body = loop.getBody();
  rewriter.eraseOp(body->getTerminator());
  rewriter.inlineBlockBefore(body, inner.getBody()->getTerminator(), ivs);
  rewriter.eraseOp(loop);
}

/// The bytes of `type` when it is statically shaped, else nothing.
std::optional<int64_t> staticBytes(MemRefType type) {
  if (!type.hasStaticShape() || !type.getElementType().isIntOrFloat())
    return std::nullopt;
  int64_t bits = type.getElementTypeBitWidth();
  for (int64_t size : type.getShape())
    bits = saturatingMul(bits, size);
  return llvm::divideCeil(bits, 8);
}

/// The one memref.dealloc of `alloc`'s buffer when the buffer lives within
/// the block of `alloc`: the dealloc is in that block, and no terminator
/// passes the buffer or a view of it on.
memref::DeallocOp iterationDealloc(memref::AllocOp alloc) {
  memref::DeallocOp dealloc;
  SmallVector<Value> values{alloc.getResult()};
  while (!values.empty()) {
    Value value = values.pop_back_val();
    for (Operation *user : value.getUsers()) {
      if (user->hasTrait<OpTrait::IsTerminator>())
        return {};
      if (auto free = dyn_cast<memref::DeallocOp>(user)) {
        if (dealloc || value != alloc.getResult() ||
            free->getBlock() != alloc->getBlock())
          return {};
        dealloc = free;
      } else if (auto view = dyn_cast<ViewLikeOpInterface>(user)) {
        if (view.getViewSource() == value)
          values.append(user->result_begin(), user->result_end());
      }
    }
  }
  return dealloc;
}

/// Moves the buffers that live within one iteration of `parallel`'s
/// worksharing loop to the top of its region, as stack buffers: each
/// thread runs its iterations one after another, so one buffer each
/// serves them all. At most `maxBytes` in all, the smallest buffers first.
void moveIterationBuffersToStack(RewriterBase &rewriter,
                                 omp::ParallelOp parallel, int64_t maxBytes) {
  SmallVector<std::tuple<int64_t, memref::AllocOp, memref::DeallocOp>> moves;
  parallel.walk([&](memref::AllocOp alloc) {
    // Those of a loop nested deeper in its own parallel region stay.
    if (alloc->getParentOfType<omp::ParallelOp>() != parallel ||
        !alloc->getParentOfType<omp::LoopNestOp>() ||
        !alloc.getSymbolOperands().empty())
      return;
    std::optional<int64_t> bytes = staticBytes(alloc.getType());
    memref::DeallocOp dealloc = iterationDealloc(alloc);
    if (bytes && *bytes <= maxBytes && dealloc)
      moves.emplace_back(*bytes, alloc, dealloc);
  });
  llvm::stable_sort(moves, [](const auto &a, const auto &b) {
    return std::get<0>(a) < std::get<0>(b);
  });
  int64_t total = 0;
  rewriter.setInsertionPointToStart(&parallel.getRegion().front());
  for (auto [bytes, alloc, dealloc] : moves) {
    if (total + bytes > maxBytes)
      break;
    total += bytes;
    auto stack = memref::AllocaOp::create(rewriter, alloc.getLoc(),
                                          alloc.getType(),
                                          alloc.getAlignmentAttr());
    rewriter.replaceOp(alloc, stack.getResult());
    rewriter.eraseOp(dealloc);
  }
}

struct ThreadLoopsPass final
    : impl::MoEThreadLoopsPassBase<ThreadLoopsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<scf::ParallelOp> sequential;
    WalkResult walk = module.walk([&](scf::ParallelOp loop) {
      if (loop.getNumResults()) {
        loop.emitError("a parallel loop with reductions: threads would "
                       "change the order of its combinations, and the "
                       "lowering makes none");
        return WalkResult::interrupt();
      }
      if (loop->getParentOfType<scf::ParallelOp>() ||
          iterations(loop) < minIterations)
        sequential.push_back(loop);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();
    IRRewriter rewriter(&getContext());
    // Inner loops first (the walk is post-order): each conversion replaces
    // only the loop it is given.
    for (scf::ParallelOp loop : sequential) {
      rewriter.setInsertionPoint(loop);
      if (failed(scf::parallelForToNestedFors(rewriter, loop))) {
        loop.emitError("cannot make this parallel loop sequential");
        return signalPassFailure();
      }
    }

    SmallVector<scf::ParallelOp> elementwise;
    module.walk([&](scf::ParallelOp loop) {
      if (loop.getNumLoops() > 1 && !hasInnerLoop(loop))
        elementwise.push_back(loop);
    });
    for (scf::ParallelOp loop : elementwise)
      serializeInnermost(rewriter, loop);

    OpPassManager openmp(ModuleOp::getOperationName());
    openmp.addPass(createConvertSCFToOpenMPPass());
    if (failed(runPipeline(openmp, module)))
      return signalPassFailure();
    module.walk([&](omp::ParallelOp parallel) {
      moveIterationBuffersToStack(rewriter, parallel, maxStackBytes);
    });
    // The conversion puts each loop body in a memref.alloca_scope, which
    // must stay one block: inlined where the body has no allocas (all of
    // them here: the stack buffers above sit outside the loop), so that the
    // loops inside can become control flow.
    SmallVector<Operation *> scopes;
    module.walk([&](memref::AllocaScopeOp scope) { scopes.push_back(scope); });
    RewritePatternSet patterns(&getContext());
    memref::AllocaScopeOp::getCanonicalizationPatterns(patterns, &getContext());
    if (failed(applyOpPatternsGreedily(scopes, std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
} // namespace mlir::moe
