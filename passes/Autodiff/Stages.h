//===- Stages.h - pipeline stages as the backward sees them -----*- C++ -*-===//
//
// Internal to passes/Autodiff. moe-partition writes a pipeline as one
// private function per stage, called in the cases of an scf.index_switch
// on the rank's stage. The backward needs the stages' weights as values of
// the step itself and some of a stage's values after its switch (what its
// backward reads, what the losses read): the switch then yields them.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_PASSES_AUTODIFF_STAGES_H
#define MOE_PASSES_AUTODIFF_STAGES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mlir::moe::autodiff {

/// Marks the switch of the stages' backward cases in a training step.
inline constexpr llvm::StringLiteral kStagesBackwardAttr = "moe.stages_backward";

/// Inlines the stage functions into their cases and hoists every constant
/// (the weights among them), and the slicing of a weight between ranks, to
/// the start of `func`.
void flattenStages(func::FuncOp func);

/// Replaces `stages` by a switch with one more result per value of
/// `inside` (each computed in one of its cases): that case yields it, the
/// others zeros (`zeros`) or an empty tensor. Returns the new results.
SmallVector<Value> yieldFromStages(scf::IndexSwitchOp &stages,
                                   ArrayRef<Value> inside, bool zeros);

} // namespace mlir::moe::autodiff

#endif // MOE_PASSES_AUTODIFF_STAGES_H
