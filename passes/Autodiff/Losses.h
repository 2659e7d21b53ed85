//===- Losses.h - the losses a training step differentiates -----*- C++ -*-===//
//
// Internal to passes/Autodiff: appends to the forward program the loss that
// moe-autodiff differentiates, the main loss plus the MoE losses.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_PASSES_AUTODIFF_LOSSES_H
#define MOE_PASSES_AUTODIFF_LOSSES_H

#include "dialects/moe/IR/MoEOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace mlir::moe::autodiff {

struct LossOptions {
  std::string kind = "model";
  std::string output;
  std::string loadBalancing = "none";
  std::string auxLossForm = "megatron";
  double auxLossCoeff = 1e-2;
  double zLossCoeff = 0.0;
  /// Where a partitioned program's routers see a part of the tokens:
  /// "global" computes the MoE losses over every token (gathering the
  /// routers' logits and choices: the one-rank losses), "local" averages
  /// each rank's losses over its own tokens (Megatron's default).
  std::string auxLossScope = "global";
};

/// Load balancing and coefficients from the module's `moe.plan`, if any.
void takeLossesFromPlan(ModuleOp module, LossOptions &options);

struct TrainingLosses {
  /// The scalar that is differentiated.
  Value total;
  /// The part of it from the MoE losses (0 without them).
  Value aux;
};

/// Appends the losses to `func` (adding a `labels` or `target` argument
/// where the loss needs one) and, for sinkhorn load balancing, makes the
/// routers route with sinkhorn. `plan`, where the program is partitioned,
/// gives the exchanges that make the losses agree across ranks. Fails with
/// an error naming what is missing.
FailureOr<TrainingLosses> buildLosses(func::FuncOp func,
                                      const LossOptions &options,
                                      PlanAttr plan);

} // namespace mlir::moe::autodiff

#endif // MOE_PASSES_AUTODIFF_LOSSES_H
