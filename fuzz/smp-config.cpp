//===- smp-config.cpp - Fuzz target: SageMaker model-parallel configs -----===//
//
// Any text as the JSON of moe-set-plan's smp-config option, then the plan
// it asks for resolved as moe-set-plan resolves it: one error naming what
// is wrong, or a plan.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"
#include "dialects/moe/IR/MoEDialect.h"
#include "moe/Plan/Plan.h"

using namespace mlir;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const DialectRegistry registry = [] {
    DialectRegistry r;
    r.insert<moe::MoEDialect>();
    return r;
  }();
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  llvm::Expected<moe::PlanRequest> request =
      moe::parseSmpConfig(text, "smp.json");
  if (!request) {
    llvm::consumeError(request.takeError());
    return 0;
  }
  std::unique_ptr<MLIRContext> context = moe_fuzz::makeContext(registry);
  context->loadDialect<moe::MoEDialect>();
  llvm::Expected<moe::PlanAttr> plan = moe::resolvePlan(context.get(), *request);
  if (!plan)
    llvm::consumeError(plan.takeError());
  return 0;
}
