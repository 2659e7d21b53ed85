//===- Plan.h - parallel plans from options and SageMaker configs -*- C++ -*-===//
//
// A plan (`#moe.plan`) comes from tool options, from the JSON a SageMaker
// model-parallel (SMP v2) user already has, or both; options win over the
// file. Every invalid plan is one error naming what is wrong.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_PLAN_PLAN_H
#define MOE_PLAN_PLAN_H

#include "dialects/moe/IR/MoEOps.h"
#include "llvm/Support/Error.h"
#include <optional>
#include <string>

namespace mlir::moe {

/// What the user asked for; unset fields come from the SMP config, then from
/// the defaults (one rank, SageMaker MoEConfig's defaults).
struct PlanRequest {
  std::optional<int64_t> worldSize, pp, dp, dpShard, ep, tp, seed;
  std::optional<TokenDispatcher> dispatcher;
  std::optional<bool> tokenShuffle;
  std::optional<LoadBalancing> loadBalancing;
  std::optional<double> auxLossCoeff, zLossCoeff;
};

/// Reads an SMP configuration: the `parameters` object of
/// `smdistributed.modelparallel` (or the whole estimator `distribution`
/// dict around it) with the core degrees and the MoEConfig fields. `name`
/// names the source in messages.
llvm::Expected<PlanRequest> parseSmpConfig(llvm::StringRef json,
                                           llvm::StringRef name);

/// Fills `request` with `overrides`' set fields.
void overridePlan(PlanRequest &request, const PlanRequest &overrides);

/// The plan for `request`. The data-parallel degree, when not given, is
/// what the world size leaves after pp, ep and tp.
llvm::Expected<PlanAttr> resolvePlan(MLIRContext *context,
                                     const PlanRequest &request);

} // namespace mlir::moe

#endif // MOE_PLAN_PLAN_H
