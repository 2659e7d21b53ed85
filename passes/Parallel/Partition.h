//===- Partition.h - pieces of moe-partition -------------------*- C++ -*-===//

#ifndef MOE_PASSES_PARALLEL_PARTITION_H
#define MOE_PASSES_PARALLEL_PARTITION_H

#include "dialects/moe/IR/MoEOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::moe::spmd {

/// Rewrites every MoE block of `func` (router, dispatch, experts, combine
/// and an added shared expert) into what one rank of `plan` runs.
LogicalResult partitionMoEBlocks(func::FuncOp func, PlanAttr plan);

/// Cuts `func` into `plan.getPp()` stages, each outlined as a private
/// function, and rewrites `func` to run this rank's stage and pass
/// activations on. Returns the stage functions.
FailureOr<SmallVector<func::FuncOp>> splitPipelineStages(func::FuncOp func,
                                                         PlanAttr plan);

/// Emits a remark at every exchange in `module` with its type and the bytes
/// each rank sends.
void reportExchanges(ModuleOp module);

} // namespace mlir::moe::spmd

#endif // MOE_PASSES_PARALLEL_PARTITION_H
