//===- SmartMoE.cpp - SmartMoE's greedy expert placement ------------------===//
//
// A line-by-line port of greedy_gen_mapping_from_history (SmartMoE-AE
// src/fastmoe/fmoe/smartmoe/mapping.py): `mapping[e]` is expert e's slot,
// `k` slots per worker, loads summed in the same order as the Python code.
//
//===----------------------------------------------------------------------===//

#include "moe/Planner/Placement.h"

#include <algorithm>
#include <numeric>

using namespace moe::planner;

Placement moe::planner::smartMoEGreedy(const Placement &current,
                                       const std::vector<double> &load) {
  int64_t numExperts = current.numExperts();
  int64_t workers = current.numRanks(), k = current.slotsPerRank();
  if (current.numSlots() != numExperts)
    return current;
  std::vector<int32_t> mapping(numExperts);
  for (int32_t e = 0; e < numExperts; ++e)
    mapping[e] = current.replicaSlot(e, 0);

  std::vector<double> currentLoad(workers, 0.0);
  for (int32_t e = 0; e < numExperts; ++e)
    currentLoad[mapping[e] / k] += load[e];
  double currentMax = 0;
  for (double l : currentLoad)
    currentMax = std::max(currentMax, l);

  // list(history_gate.argsort()) reversed: numpy's sort of few elements is
  // an insertion sort, stable, so equal loads come out in decreasing id.
  // (Sorts here break ties by id: a stable sort without its buffer.)
  std::vector<int32_t> order(numExperts);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return load[a] > load[b] || (load[a] == load[b] && a > b);
  });

  std::vector<int32_t> newMapping(numExperts, -1);
  std::vector<int64_t> count(workers, 0);
  std::vector<double> tokens(workers, 0.0);
  double newMax = 0;
  for (int32_t e : order) {
    int64_t oldWorker = mapping[e] / k;
    // The first least-loaded worker with a free slot...
    int64_t worker = -1;
    double least = 0;
    for (int64_t w = 0; w < workers; ++w)
      if (count[w] < k && (worker == -1 || tokens[w] < least)) {
        least = tokens[w];
        worker = w;
      }
    // ...unless the old worker has a free slot and the same load.
    if (count[oldWorker] < k && tokens[oldWorker] == least)
      worker = oldWorker;
    newMapping[e] = static_cast<int32_t>(worker * k + count[worker]++);
    tokens[worker] += load[e];
    newMax = std::max(newMax, tokens[worker]);
  }
  if (!(currentMax > newMax))
    return current;
  std::vector<int32_t> slots(numExperts);
  for (int32_t e = 0; e < numExperts; ++e)
    slots[newMapping[e]] = e;
  return Placement(numExperts, workers, std::move(slots));
}
