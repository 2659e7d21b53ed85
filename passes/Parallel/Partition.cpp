//===- Partition.cpp - moe-partition: the program one rank runs -----------===//

#include "passes/Parallel/Partition.h"
#include "passes/Parallel/ShardLayer.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEPARTITIONPASS
#include "passes/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::spmd;

static int64_t byteSize(Type type) {
  auto shaped = cast<ShapedType>(type);
  if (!shaped.hasStaticShape())
    return -1;
  return shaped.getNumElements() *
         ((shaped.getElementTypeBitWidth() + 7) / 8);
}

void spmd::reportExchanges(ModuleOp module) {
  module.walk([](Operation *op) {
    if (!isExchange(op))
      return;
    auto grid = op->getAttrOfType<FlatSymbolRefAttr>("grid");
    auto axes = op->getAttrOfType<DenseI16ArrayAttr>("grid_axes");
    ArrayRef<int16_t> axisList = axes ? axes.asArrayRef() : ArrayRef<int16_t>();
    int64_t n = getGroupSize(op, grid, axisList);
    int64_t in = byteSize(op->getOperand(0).getType());
    // What one rank puts on the wire (a ring for all-reduce).
    std::string sends;
    if (in < 0) {
      sends = "a dynamic size";
    } else {
      int64_t bytes = llvm::TypeSwitch<Operation *, int64_t>(op)
                          .Case<shard::AllGatherOp, shard::BroadcastOp>(
                              [&](auto) { return in * (n - 1); })
                          .Case<shard::AllReduceOp>(
                              [&](auto) { return 2 * in * (n - 1) / n; })
                          .Case<shard::AllToAllOp, shard::ReduceScatterOp>(
                              [&](auto) { return in * (n - 1) / n; })
                          .Case<shard::RecvOp>([](auto) { return 0; })
                          .Default([&](Operation *) { return in; });
      bool upTo = isa<shard::BroadcastOp>(op) ||
                  (isa<AllToAllOp>(op) && cast<AllToAllOp>(op).isRagged());
      sends = (upTo ? "up to " : "") + std::to_string(bytes) + " bytes";
      if (auto a2a = dyn_cast<AllToAllOp>(op); a2a && a2a.isRagged())
        sends += " after " +
                 std::to_string(byteSize(a2a.getCounts().getType())) +
                 " bytes of counts";
    }
    InFlightDiagnostic remark = op->emitRemark();
    remark << "exchange " << op->getName() << " over [";
    llvm::interleaveComma(axisList, remark,
                          [&](int16_t a) { remark << axisName(a); });
    remark << "] (" << n << " ranks): ";
    llvm::interleaveComma(op->getOperandTypes(), remark);
    remark << " -> ";
    llvm::interleaveComma(op->getResultTypes(), remark);
    remark << "; each rank sends " << sends;
  });
}

namespace {
struct MoEPartitionPass
    : public moe::impl::MoEPartitionPassBase<MoEPartitionPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto plan = module->getAttrOfType<PlanAttr>(kPlanAttrName);
    if (!plan) {
      module.emitError() << "moe-partition: the module has no '"
                         << kPlanAttrName
                         << "' attribute; run moe-set-plan first";
      return signalPassFailure();
    }
    if (SymbolTable::lookupSymbolIn(module, kWorldGrid)) {
      module.emitError() << "moe-partition: the module already has a symbol "
                            "@"
                         << kWorldGrid << "; is it partitioned already?";
      return signalPassFailure();
    }
    if (plan.getWorldSize() == 1)
      return;

    // Blocks are partitioned from their parts.
    RewritePatternSet patterns(&getContext());
    populateMoEDecomposePatterns(patterns);
    if (failed(applyPatternsGreedily(module, std::move(patterns))))
      return signalPassFailure();

    createWorldGrid(module, plan);
    SmallVector<func::FuncOp> funcs(module.getOps<func::FuncOp>());
    SmallVector<func::FuncOp> toPartition;
    for (func::FuncOp func : funcs) {
      // A custom activation's body is a scalar function, not a program.
      if (func.isExternal() || func->hasAttr(kActivationBodyAttrName))
        continue;
      if (plan.getPp() == 1) {
        toPartition.push_back(func);
        continue;
      }
      FailureOr<SmallVector<func::FuncOp>> stages =
          splitPipelineStages(func, plan);
      if (failed(stages))
        return signalPassFailure();
      llvm::append_range(toPartition, *stages);
    }
    for (func::FuncOp func : toPartition)
      if (failed(partitionMoEBlocks(func, plan)))
        return signalPassFailure();
    if (report)
      reportExchanges(module);
  }
};
} // namespace
