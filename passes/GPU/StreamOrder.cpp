//===- StreamOrder.cpp - GPU work in stream order, host waits on demand ---===//
//
// A synchronous gpu.launch_func lowers to a launch followed by a wait for
// the device, and each free of a managed buffer waits too: a program of a
// dozen kernels and runtime calls waited for the GPU a dozen times per call.
// The runtime runs every kernel, cuBLAS call, copy and exchange on one
// stream, so their order on it is program order already; the host needs to
// wait only where it touches memory itself.
//
// Per block, launches, device allocations and frees become asynchronous and
// chain on one token; calls to moert_cuda_* functions (which enqueue on the
// same stream, and wait themselves before they read device data on the
// host), calls that touch no memory (moert_rank) and loops of nothing else
// (an outer batch dim's matmul calls) leave the chain pending. The host waits
// for the chain before any other op that reads or writes memory, before
// any other op with regions (whose blocks are chained on their own and
// waited for before their terminators) and before the block's terminator,
// so every function returns with its work done.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEGPUSTREAMORDERPASS
#include "passes/Passes.h.inc"

namespace {

/// The prefix of the runtime functions that are stream-ordered: they may be
/// called with device work pending and return with their own still pending
/// (runtime/README.md).
constexpr StringLiteral kStreamOrderedPrefix = "moert_cuda_";

bool isStreamOrderedCall(Operation *op) {
  auto call = dyn_cast<func::CallOp>(op);
  return call && call.getCallee().starts_with(kStreamOrderedPrefix);
}

/// Runtime functions that touch no memory of the program (moert.h).
constexpr StringLiteral kMemoryFreeCalls[] = {"moert_rank"};

/// An op without regions that may run while device work is pending: it
/// touches no memory, or only allocates it, or only enqueues on the stream.
bool isHostSafeLeaf(Operation *op) {
  if (isStreamOrderedCall(op))
    return true;
  if (auto call = dyn_cast<func::CallOp>(op))
    return llvm::is_contained(kMemoryFreeCalls, call.getCallee());
  if (isMemoryEffectFree(op))
    return true;
  auto interface = dyn_cast<MemoryEffectOpInterface>(op);
  if (!interface)
    return false;
  SmallVector<MemoryEffects::EffectInstance> effects;
  interface.getEffects(effects);
  return llvm::all_of(effects, [](const MemoryEffects::EffectInstance &e) {
    return isa<MemoryEffects::Allocate>(e.getEffect());
  });
}

/// Ops that may run while device work is pending: such leaves, and loops
/// and branches (ops whose effects are their body's) of nothing else, as an
/// outer batch dim's loop of matmul calls.
bool isHostSafe(Operation *op) {
  if (op->getNumRegions() == 0)
    return isHostSafeLeaf(op);
  WalkResult nested = op->walk([](Operation *inner) {
    // A region op counts through its body only if it has no effects of its
    // own (a linalg op reads and writes its operands).
    if (inner->getNumRegions() > 0
            ? inner->hasTrait<OpTrait::HasRecursiveMemoryEffects>() &&
                  !isa<MemoryEffectOpInterface, gpu::LaunchOp>(inner)
            : inner->hasTrait<OpTrait::IsTerminator>() ||
                  isHostSafeLeaf(inner))
      return WalkResult::advance();
    return WalkResult::interrupt();
  });
  return !nested.wasInterrupted();
}

/// The chain of one block: every token it made, and the last one, which
/// the device reaches after all the others.
class Chain {
public:
  explicit Chain(OpBuilder &builder) : b(builder) {}

  void run(Block &block) {
    for (Operation &op : llvm::make_early_inc_range(block))
      visit(&op);
  }

private:
  void visit(Operation *op) {
    if (op->hasTrait<OpTrait::IsTerminator>())
      return waitBefore(op);
    if (auto wait = dyn_cast<gpu::WaitOp>(op))
      return visitWait(wait);
    if (auto launch = dyn_cast<gpu::LaunchFuncOp>(op);
        launch && !launch.getAsyncObject())
      return visitLaunch(launch);
    if (auto alloc = dyn_cast<gpu::AllocOp>(op);
        alloc && alloc.getAsyncToken() && onChain(alloc))
      return chainMemoryOp(alloc);
    if (auto dealloc = dyn_cast<gpu::DeallocOp>(op);
        dealloc && dealloc.getAsyncToken() && onChain(dealloc))
      return chainMemoryOp(dealloc);
    if (isHostSafe(op))
      return;
    waitBefore(op);
    // A kernel not yet outlined is device code: nothing to chain in it.
    if (isa<gpu::LaunchOp>(op))
      return;
    // Nested blocks chain on their own, from an idle device.
    for (Region &region : op->getRegions())
      for (Block &block : region)
        Chain(b).run(block);
  }

  /// Whether every dependency of `op` is a token of this chain: the device
  /// reaches them before `pending`.
  bool onChain(gpu::AsyncOpInterface op) const {
    return llvm::all_of(op.getAsyncDependencies(),
                        [&](Value dep) { return tokens.contains(dep); });
  }

  void visitWait(gpu::WaitOp wait) {
    if (!onChain(wait))
      return waitBefore(wait);
    if (!wait.getAsyncToken()) {
      // A wait for part of the chain: the next host access waits for all.
      if (!wait.getAsyncDependencies().empty())
        wait.erase();
      else
        waitBefore(wait);
      return;
    }
    // A new stream: the chain's, when it has one.
    if (pending) {
      wait.getAsyncToken().replaceAllUsesWith(pending);
      wait.erase();
      return;
    }
    wait.getAsyncDependenciesMutable().clear();
    extend(wait.getAsyncToken());
  }

  void visitLaunch(gpu::LaunchFuncOp launch) {
    if (launch.getAsyncToken() && !onChain(launch))
      return waitBefore(launch);
    b.setInsertionPoint(launch);
    std::optional<gpu::KernelDim3> cluster;
    if (launch.hasClusterSize())
      cluster = launch.getClusterSizeOperandValues();
    auto async = gpu::LaunchFuncOp::create(
        b, launch.getLoc(), launch.getKernel(),
        launch.getGridSizeOperandValues(), launch.getBlockSizeOperandValues(),
        launch.getDynamicSharedMemorySize(), launch.getKernelOperands(),
        b.getType<gpu::AsyncTokenType>(), dependency(launch.getLoc()),
        cluster);
    async->setDiscardableAttrs(launch->getDiscardableAttrDictionary());
    if (launch.getAsyncToken())
      launch.getAsyncToken().replaceAllUsesWith(async.getAsyncToken());
    launch.erase();
    extend(async.getAsyncToken());
  }

  /// A stream-ordered allocation or free: on the chain.
  template <typename OpTy>
  void chainMemoryOp(OpTy op) {
    b.setInsertionPoint(op);
    Value dep = dependency(op.getLoc());
    op.getAsyncDependenciesMutable().assign(dep);
    extend(op.getAsyncToken());
  }

  /// The token the next op on the stream waits for: the chain's last, or a
  /// new stream when the device is idle.
  Value dependency(Location loc) {
    if (pending)
      return pending;
    Value fresh = gpu::WaitOp::create(b, loc, b.getType<gpu::AsyncTokenType>(),
                                      ValueRange())
                      .getAsyncToken();
    tokens.insert(fresh);
    return fresh;
  }

  void extend(Value token) {
    tokens.insert(token);
    pending = token;
  }

  void waitBefore(Operation *op) {
    if (!pending)
      return;
    b.setInsertionPoint(op);
    gpu::WaitOp::create(b, op->getLoc(), Type(), pending);
    pending = {};
  }

  OpBuilder &b;
  llvm::SmallPtrSet<Value, 16> tokens;
  Value pending;
};

struct MoEGPUStreamOrderPass
    : public impl::MoEGPUStreamOrderPassBase<MoEGPUStreamOrderPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    OpBuilder b(func.getContext());
    for (Block &block : func.getBody())
      Chain(b).run(block);
  }
};

} // namespace
} // namespace mlir::moe
