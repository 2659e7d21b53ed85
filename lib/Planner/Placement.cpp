//===- Placement.cpp - Placement tables and their metrics -----------------===//

#include "moe/Planner/Placement.h"
#include "Packing.h"

#include <algorithm>
#include <numeric>

using namespace moe::planner;

std::string detail::slotLayoutError(int64_t numExperts, int64_t numRanks,
                                    int64_t numSlots) {
  if (numExperts <= 0)
    return "a placement needs at least one expert";
  if (numRanks <= 0)
    return "a placement needs at least one rank";
  if (numSlots % numRanks != 0)
    return std::to_string(numSlots) + " slots do not divide over " +
           std::to_string(numRanks) + " ranks";
  if (numSlots < numExperts)
    return std::to_string(numSlots) + " slots cannot hold " +
           std::to_string(numExperts) + " experts";
  return "";
}

std::string moe::planner::validatePlacement(
    int64_t numExperts, int64_t numRanks,
    const std::vector<int32_t> &slotToExpert, bool distinctPerRank) {
  int64_t numSlots = static_cast<int64_t>(slotToExpert.size());
  if (std::string error = detail::slotLayoutError(numExperts, numRanks, numSlots);
      !error.empty())
    return error;
  int64_t perRank = numSlots / numRanks;
  std::vector<int64_t> count(numExperts, 0), lastRank(numExperts, -1);
  for (int64_t p = 0; p < numSlots; ++p) {
    int32_t e = slotToExpert[p];
    if (e < 0 || e >= numExperts)
      return "slot " + std::to_string(p) + " holds " + std::to_string(e) +
             ", not an expert of 0.." + std::to_string(numExperts - 1);
    // Slots of one rank are contiguous: a repeat on the rank is a repeat
    // since the rank began.
    if (distinctPerRank && lastRank[e] == p / perRank)
      return "rank " + std::to_string(p / perRank) + " holds expert " +
             std::to_string(e) + " twice";
    lastRank[e] = p / perRank;
    ++count[e];
  }
  for (int64_t e = 0; e < numExperts; ++e)
    if (count[e] == 0)
      return "expert " + std::to_string(e) + " has no slot";
  return "";
}

Placement::Placement(int64_t numExperts, int64_t numRanks,
                     std::vector<int32_t> slotToExpert)
    : experts(numExperts), ranks(numRanks), slots(std::move(slotToExpert)) {
  replicaBegin.assign(experts + 1, 0);
  for (int32_t e : slots)
    if (e >= 0 && e < experts)
      ++replicaBegin[e + 1];
  std::partial_sum(replicaBegin.begin(), replicaBegin.end(),
                   replicaBegin.begin());
  replicaSlots.resize(replicaBegin.back());
  std::vector<int64_t> next(replicaBegin.begin(), replicaBegin.end() - 1);
  for (int64_t p = 0; p < numSlots(); ++p)
    if (slots[p] >= 0 && slots[p] < experts)
      replicaSlots[next[slots[p]]++] = static_cast<int32_t>(p);
}

Placement Placement::identity(int64_t numExperts, int64_t numRanks,
                              int64_t numSlots) {
  std::vector<int32_t> slots(numSlots);
  for (int64_t p = 0; p < numSlots; ++p)
    slots[p] = static_cast<int32_t>(p % numExperts);
  return Placement(numExperts, numRanks, std::move(slots));
}

int64_t Placement::maxReplicas() const {
  int64_t most = 0;
  for (int32_t e = 0; e < experts; ++e)
    most = std::max(most, replicaCount(e));
  return most;
}

std::vector<int32_t> Placement::expertToSlotTable() const {
  int64_t width = maxReplicas();
  std::vector<int32_t> table(experts * width, -1);
  for (int32_t e = 0; e < experts; ++e)
    for (int64_t r = 0; r < replicaCount(e); ++r)
      table[e * width + r] = replicaSlot(e, r);
  return table;
}

std::vector<int32_t> Placement::replicaCounts() const {
  std::vector<int32_t> counts(experts);
  for (int32_t e = 0; e < experts; ++e)
    counts[e] = static_cast<int32_t>(replicaCount(e));
  return counts;
}

std::vector<double> moe::planner::rankLoads(
    const Placement &placement, const std::vector<double> &expertLoad) {
  std::vector<double> loads(placement.numRanks(), 0.0);
  for (int64_t p = 0; p < placement.numSlots(); ++p) {
    int32_t e = placement.expertAt(p);
    loads[placement.rankOfSlot(p)] +=
        expertLoad[e] / static_cast<double>(placement.replicaCount(e));
  }
  return loads;
}

double moe::planner::balancedness(const std::vector<double> &rankLoads) {
  if (rankLoads.empty())
    return 1;
  double sum = std::accumulate(rankLoads.begin(), rankLoads.end(), 0.0);
  double most = *std::max_element(rankLoads.begin(), rankLoads.end());
  return most > 0 ? sum / static_cast<double>(rankLoads.size()) / most : 1;
}

double moe::planner::balancedness(const Placement &placement,
                                  const std::vector<double> &expertLoad) {
  return balancedness(rankLoads(placement, expertLoad));
}

double moe::planner::maxLoadLowerBound(const Placement &placement,
                                       const std::vector<double> &expertLoad) {
  double sum = std::accumulate(expertLoad.begin(), expertLoad.end(), 0.0);
  double bound = sum / static_cast<double>(placement.numRanks());
  for (int32_t e = 0; e < placement.numExperts(); ++e)
    bound = std::max(bound, expertLoad[e] /
                                static_cast<double>(placement.replicaCount(e)));
  return bound;
}

double moe::planner::bestMaxLoadLowerBound(
    const std::vector<double> &expertLoad, int64_t numRanks,
    int64_t numSlots) {
  double sum = std::accumulate(expertLoad.begin(), expertLoad.end(), 0.0);
  std::vector<int32_t> counts =
      detail::apportion(expertLoad, numSlots, numRanks);
  double bound = sum / static_cast<double>(numRanks);
  for (size_t e = 0; e < expertLoad.size(); ++e)
    bound = std::max(bound, expertLoad[e] / counts[e]);
  return bound;
}

double moe::planner::bytesMoved(const Placement &from, const Placement &to,
                                double bytesPerExpert) {
  return bytesPerExpert *
         static_cast<double>(
             detail::countTransfers(from, to.slotToExpert()).total());
}

double moe::planner::busiestRankBytes(const Placement &from,
                                      const Placement &to,
                                      double bytesPerExpert) {
  return bytesPerExpert *
         static_cast<double>(
             detail::countTransfers(from, to.slotToExpert()).busiest());
}
