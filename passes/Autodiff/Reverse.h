//===- Reverse.h - the reverse sweep over a block ---------------*- C++ -*-===//
//
// Internal to passes/Autodiff. Visits a block's ops last to first, each
// active op's rule emitting its operands' cotangents from its results',
// summed where a value has several uses and over the ranks that used it
// alike (Replication.h). A pipeline's stages are the cases of an
// scf.index_switch on the rank's stage: its backward is a switch of the
// same cases, each the reverse sweep of its case, yielding the cotangents
// of the values the cases read from outside; the sum over stages happens
// after it, where every rank takes part.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_PASSES_AUTODIFF_REVERSE_H
#define MOE_PASSES_AUTODIFF_REVERSE_H

#include "passes/Autodiff/Replication.h"

#include "dialects/moe/IR/MoEOps.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::moe::autodiff {

class ReverseSweep {
public:
  /// Emits at `builder`'s insertion point; `plan` (may be null) builds the
  /// exchanges of a partitioned program.
  ReverseSweep(OpBuilder &builder, const Replication &replication,
               const llvm::DenseSet<Value> &active, PlanAttr plan)
      : builder(builder), replication(replication), active(active),
        plan(plan) {}

  /// Adds `cotangent` to that of `value`.
  void accumulate(Value value, Value cotangent);
  Value cotangentOf(Value value) const { return cotangents.lookup(value); }

  /// The reverse sweep over `block`'s ops (its terminator aside). Sums over
  /// the axes `deferred` are left to an enclosing op's backward, which
  /// every rank runs.
  LogicalResult sweep(Block &block, AxisSet deferred);

private:
  LogicalResult visit(Operation *op, AxisSet deferred);
  LogicalResult stageSwitch(Operation *op, ArrayRef<Value> dResults,
                            AxisSet deferred);

  OpBuilder &builder;
  const Replication &replication;
  const llvm::DenseSet<Value> &active;
  PlanAttr plan;
  llvm::DenseMap<Value, Value> cotangents;
};

/// Whether `value` is a ranked tensor of floats.
bool isFloatTensor(Value value);

} // namespace mlir::moe::autodiff

#endif // MOE_PASSES_AUTODIFF_REVERSE_H
