//===- Trace.h - Expert-load traces for moe-plan ----------------*- C++ -*-===//
//
// Tokens per expert per layer, record by record, from either of two files:
//
// - SmartMoE's trace as repacked in ../shared/data/smartmoe-trace: an .npz
//   whose `counts` is [records, ranks, layers, microbatches, experts]
//   (any integer or float type), summed over ranks and microbatches; an
//   optional `iterations` [records] gives the steps between records.
// - Our own stats, the format of moe-run's and moe-train's --stats-json:
//
//     {"moe_expert_load": 1,
//      "steps_per_record": 1,
//      "records": [{"step": 0, "tokens": [[t_0, t_1, ...], ...]}, ...]}
//
//   one record per step (or per sampled step: steps_per_record, default 1,
//   is how many steps each stands for); `tokens[l][e]` is how many routing
//   choices (top-k counted; those a capacity dropped too) layer l made for
//   expert e
//   in that step, summed over the expert-parallel group. `step` is
//   optional; every record has the same layers and experts.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_PLAN_TRACE_H
#define MOE_PLAN_TRACE_H

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace moe_plan {

struct LoadTrace {
  int64_t records = 0, layers = 0, experts = 0;
  /// Steps each record stands for (the SmartMoE trace: 10).
  int64_t stepsPerRecord = 1;
  /// [records][layers][experts], row-major.
  std::vector<double> tokens;

  const double *at(int64_t record, int64_t layer) const {
    return tokens.data() + (record * layers + layer) * experts;
  }
};

/// Reads an .npz (by its zip magic) or a stats JSON file.
llvm::Expected<LoadTrace> readLoadTrace(const std::string &path);

} // namespace moe_plan

#endif // MOE_PLAN_TRACE_H
