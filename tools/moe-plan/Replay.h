//===- Replay.h - Placement algorithms replayed on a load trace -*- C++ -*-===//
//
// Each algorithm re-plans every K records from the loads of the K records
// before (the window summed), starting from the trivial layout, and its
// placement is then judged on each record of the next window: balancedness
// = mean / max rank load of that record. Records before the first re-plan
// are not judged, for any algorithm.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_PLAN_REPLAY_H
#define MOE_PLAN_REPLAY_H

#include "Trace.h"

#include "moe/Planner/Placement.h"

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace moe_plan {

struct ReplayOptions {
  int64_t ranks = 1, redundantPerRank = 0, replanEvery = 10;
  /// What ours weighs; bytesPerExpert also prices every algorithm's moves.
  moe::planner::MigrationCost cost;
};

struct AlgorithmReplay {
  std::string name;
  /// [layer][judged record]: balancedness.
  std::vector<std::vector<double>> balance;
  /// [layer][re-plan]: bytes moved.
  std::vector<std::vector<double>> bytes;
  /// Each layer's placement after the last re-plan.
  std::vector<moe::planner::Placement> last;
  /// Time spent planning, over all layers and re-plans.
  double planSeconds = 0;

  int64_t replans() const {
    return bytes.empty() ? 0 : static_cast<int64_t>(bytes[0].size());
  }
  /// All layers' bytes at re-plan `replan`.
  double bytesAt(int64_t replan) const;
  /// The mean over re-plans of bytesAt.
  double bytesPerReplan() const;
};

/// The slots of the replay: E + ranks * redundantPerRank.
int64_t replaySlots(const LoadTrace &trace, const ReplayOptions &options);

/// Replays static (the trivial layout), smartmoe (where there are no
/// redundant slots), eplb (global policy) and ours, in that order.
llvm::Expected<std::vector<AlgorithmReplay>>
replay(const LoadTrace &trace, const ReplayOptions &options);

/// The median, minimum and mean of `values`, which must not be empty.
double median(std::vector<double> values);
double minimum(const std::vector<double> &values);
double mean(const std::vector<double> &values);
/// Every judged record of every layer, in one list.
std::vector<double> allBalance(const AlgorithmReplay &a);

} // namespace moe_plan

#endif // MOE_PLAN_REPLAY_H
