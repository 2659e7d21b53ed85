//===- Replication.h - which ranks agree on each value ----------*- C++ -*-===//
//
// Internal to passes/Autodiff. In a partitioned program every rank runs the
// same function; a value either is the same on every rank of a grid axis
// or varies along it (JAX's "varying manual axes"). Inputs and weights vary
// along no axis; all_slice and all_to_all make a value vary along their
// axes, all_gather and all_reduce make it agree again; any other op varies
// along the union of its operands' axes.
//
// The backward program follows from one rule (moe-training.md section 6):
// where an op uses an operand as varying along axes that the operand does
// not vary along (any op whose other operands vary there; an exchange over
// those axes, which takes one block per rank), every rank of those axes
// used the same value, and its cotangent is the sum of the ranks'
// contributions: an all-reduce over the extra axes. Dense weights get their data-parallel sum that way, expert
// weights the sum over their replicas, tensor-parallel inputs the sum of
// their partial products.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_PASSES_AUTODIFF_REPLICATION_H
#define MOE_PASSES_AUTODIFF_REPLICATION_H

#include "passes/Parallel/ShardLayer.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::moe::autodiff {

/// A set of grid axes (bit i: axis i of the world grid).
using AxisSet = uint32_t;

/// The axes of `set`, in grid order.
SmallVector<spmd::Axis> axesOf(AxisSet set);

class Replication {
public:
  /// The axes each value of `func`'s body varies along, in program order.
  explicit Replication(func::FuncOp func);

  AxisSet of(Value value) const { return varying.lookup(value); }
  /// The axes an op's results vary along.
  AxisSet ofOp(Operation *op) const;
  /// The axes along which `op` uses `operand` as varying.
  AxisSet usedAs(Operation *op, Value operand) const;

private:
  llvm::DenseMap<Value, AxisSet> varying;
};

} // namespace mlir::moe::autodiff

#endif // MOE_PASSES_AUTODIFF_REPLICATION_H
