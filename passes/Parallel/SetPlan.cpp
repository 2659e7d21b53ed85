//===- SetPlan.cpp - attach a parallel plan to the module -----------------===//

#include "moe/Plan/Plan.h"
#include "moe/Support/Input.h"
#include "passes/Parallel/ShardLayer.h"
#include "passes/Passes.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOESETPLANPASS
#include "passes/Passes.h.inc"

namespace {
struct MoESetPlanPass : public impl::MoESetPlanPassBase<MoESetPlanPass> {
  using Base::Base;

  /// The degree options by name. An option is given when the pipeline sets
  /// it (Option::hasValue), whatever its value: 0 is refused like any
  /// degree below 1, never read as "not given".
  SmallVector<std::pair<StringRef, const Option<int64_t> *>> degreeOptions() {
    return {{"world-size", &worldSize}, {"pp", &pp}, {"dp", &dp},
            {"dp-shard", &dpShard},     {"ep", &ep}, {"tp", &tp}};
  }

  /// The options the pipeline set.
  PlanRequest requestFromOptions() {
    PlanRequest r;
    auto given = [](const Option<int64_t> &o) -> std::optional<int64_t> {
      return o.hasValue() ? std::optional<int64_t>(o.getValue())
                          : std::nullopt;
    };
    r.worldSize = given(worldSize);
    r.pp = given(pp);
    r.dp = given(dp);
    r.dpShard = given(dpShard);
    r.ep = given(ep);
    r.tp = given(tp);
    r.seed = given(seed);
    if (tokenShuffle.hasValue())
      r.tokenShuffle = tokenShuffle.getValue();
    return r;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto [name, option] : degreeOptions()) {
      int64_t value = option->getValue();
      if (option->hasValue() && value < 1) {
        module.emitError() << "moe-set-plan: " << name
                           << " must be at least 1, got " << value;
        return signalPassFailure();
      }
    }
    if (seed.hasValue() && seed.getValue() < 0) {
      module.emitError() << "moe-set-plan: seed must not be negative, got "
                         << seed.getValue();
      return signalPassFailure();
    }
    PlanRequest request;
    if (!smpConfig.empty()) {
      // Bounded: a directory, /dev/zero or a huge file is one error.
      auto file = readInputFile(smpConfig);
      if (!file) {
        module.emitError() << "moe-set-plan: "
                           << llvm::toString(file.takeError());
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
