//===- Replication.cpp - which ranks agree on each value ------------------===//

#include "passes/Autodiff/Replication.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::moe::autodiff {

static AxisSet setOf(ArrayRef<int16_t> axes) {
  AxisSet set = 0;
  for (int16_t axis : axes)
    set |= AxisSet(1) << axis;
  return set;
}

SmallVector<spmd::Axis> axesOf(AxisSet set) {
  SmallVector<spmd::Axis> axes;
  for (int16_t axis = 0; axis < 32; ++axis)
    if (set & (AxisSet(1) << axis))
      axes.push_back(static_cast<spmd::Axis>(axis));
  return axes;
}

Replication::Replication(func::FuncOp func) {
  func.walk([&](Operation *op) {
    if (auto stages = dyn_cast<scf::IndexSwitchOp>(op)) {
      // Result i: the selector's axes and those of what the cases yield
      // as result i.
      for (auto [i, result] : llvm::enumerate(stages.getResults())) {
        AxisSet set = of(stages.getArg());
        for (Region &region : op->getRegions())
          set |= of(region.front().getTerminator()->getOperand(i));
        varying[result] = set;
      }
      return;
    }
    AxisSet set = ofOp(op);
    for (Value result : op->getResults())
      varying[result] = set;
  });
}

AxisSet Replication::ofOp(Operation *op) const {
  AxisSet operands = 0;
  for (Value operand : op->getOperands())
    operands |= of(operand);
  // An op with regions (a pipeline's stage switch): also what its regions
  // yield (visited first: the walk is post-order).
  for (Region &region : op->getRegions())
    for (Block &block : region)
      if (!block.empty() && block.back().hasTrait<OpTrait::IsTerminator>())
        for (Value yielded : block.back().getOperands())
          operands |= of(yielded);
  return llvm::TypeSwitch<Operation *, AxisSet>(op)
      .Case([&](shard::AllSliceOp slice) {
        return operands | setOf(slice.getGridAxes());
      })
      .Case([&](shard::AllGatherOp gather) {
        return operands & ~setOf(gather.getGridAxes());
      })
      .Case([&](shard::AllReduceOp reduce) {
        return operands & ~setOf(reduce.getGridAxes());
      })
      .Case([&](shard::BroadcastOp broadcast) {
        return operands & ~setOf(broadcast.getGridAxes());
      })
      .Case([&](shard::ReduceScatterOp scatter) {
        return operands | setOf(scatter.getGridAxes());
      })
      .Case([&](shard::AllToAllOp exchange) {
        return operands | setOf(exchange.getGridAxes());
      })
      .Case([&](AllToAllOp exchange) {
        return operands | setOf(exchange.getGridAxes());
      })
      .Case([&](PrefixSumOp sum) { return operands | setOf(sum.getGridAxes()); })
      .Case([&](shard::ProcessMultiIndexOp index) {
        // No axes: the index along every axis.
        return index.getAxes().empty() ? ~AxisSet(0)
                                       : operands | setOf(index.getAxes());
      })
      .Case([&](shard::RecvOp recv) {
        return operands | setOf(recv.getGridAxes());
      })
      .Default([&](Operation *) { return operands; });
}

AxisSet Replication::usedAs(Operation *op, Value operand) const {
  AxisSet own = of(operand);
  return llvm::TypeSwitch<Operation *, AxisSet>(op)
      // Each rank takes its block of a value it holds whole.
      .Case([&](shard::AllSliceOp) { return own; })
      .Case<shard::AllGatherOp, shard::AllReduceOp, shard::ReduceScatterOp,
            shard::AllToAllOp>([&](auto exchange) {
        return own | setOf(exchange.getGridAxes());
      })
      .Case([&](AllToAllOp exchange) {
        return own | setOf(exchange.getGridAxes());
      })
      .Default([&](Operation *) { return ofOp(op); });
}

} // namespace mlir::moe::autodiff
