//===- SetPlan.cpp - attach a parallel plan to the module -----------------===//

#include "moe/Plan/Plan.h"
#include "passes/Parallel/ShardLayer.h"
#include "passes/Passes.h"
#include "llvm/Support/MemoryBuffer.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOESETPLANPASS
#include "passes/Passes.h.inc"

namespace {
struct MoESetPlanPass : public impl::MoESetPlanPassBase<MoESetPlanPass> {
  using Base::Base;

  /// The options the user set; 0 (or -1, "") means "not given".
  PlanRequest requestFromOptions() {
    PlanRequest r;
    auto given = [](int64_t v) -> std::optional<int64_t> {
      return v > 0 ? std::optional<int64_t>(v) : std::nullopt;
    };
    r.worldSize = given(worldSize);
    r.pp = given(pp);
    r.dp = given(dp);
    r.dpShard = given(dpShard);
    r.ep = given(ep);
    r.tp = given(tp);
    if (seed >= 0)
      r.seed = seed;
    if (tokenShuffle)
      r.tokenShuffle = true;
    return r;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto [name, value] :
         {std::pair<StringRef, int64_t>{"world-size", worldSize}, {"pp", pp},
          {"dp", dp}, {"dp-shard", dpShard}, {"ep", ep}, {"tp", tp}}) {
      if (value < 0) {
        module.emitError() << "moe-set-plan: " << name
                           << " must be at least 1, got " << value;
        return signalPassFailure();
      }
    }
    PlanRequest request;
    if (!smpConfig.empty()) {
      auto file = llvm::MemoryBuffer::getFile(smpConfig);
      if (!file) {
        module.emitError() << "moe-set-plan: cannot read '" << smpConfig
                           << "': " << file.getError().message();
        return signalPassFailure();
      }
      llvm::Expected<PlanRequest> fromFile =
          parseSmpConfig((*file)->getBuffer(), smpConfig);
      if (!fromFile) {
        module.emitError() << "moe-set-plan: "
                           << llvm::toString(fromFile.takeError());
        return signalPassFailure();
      }
      request = *fromFile;
    }
    PlanRequest overrides = requestFromOptions();
    if (!dispatcher.empty()) {
      if (dispatcher != "all-to-all" && dispatcher != "all-gather") {
        module.emitError() << "moe-set-plan: dispatcher must be all-to-all "
                              "or all-gather, got '"
                           << dispatcher << "'";
        return signalPassFailure();
      }
      overrides.dispatcher = dispatcher == "all-to-all"
                                 ? TokenDispatcher::AllToAll
                                 : TokenDispatcher::AllGather;
    }
    overridePlan(request, overrides);
    llvm::Expected<PlanAttr> plan = resolvePlan(&getContext(), request);
    if (!plan) {
      module.emitError() << "moe-set-plan: invalid plan: "
                         << llvm::toString(plan.takeError());
      return signalPassFailure();
    }
    module->setAttr(spmd::kPlanAttrName, *plan);
  }
};
} // namespace
} // namespace mlir::moe
