//===- load-trace.cpp - Fuzz target: moe-plan's expert-load traces --------===//
//
// Any bytes as the trace that `moe-plan placement --trace` reads: a stats
// JSON file or, by its zip magic, a SmartMoE .npz. Of a trace that passes,
// every record's counts are read as the replay reads them.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"
#include "Trace.h"

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static moe_fuzz::TempFile file(".trace");
  llvm::Expected<moe_plan::LoadTrace> trace =
      moe_plan::readLoadTrace(file.write(data, size));
  if (!trace) {
    llvm::consumeError(trace.takeError());
    return 0;
  }
  if (trace->tokens.size() !=
      size_t(trace->records * trace->layers * trace->experts))
    std::abort();
  double sum = 0;
  for (int64_t r = 0; r < trace->records; ++r)
    for (int64_t l = 0; l < trace->layers; ++l)
      for (int64_t e = 0; e < trace->experts; ++e)
        sum += trace->at(r, l)[e];
  (void)sum;
  return 0;
}
