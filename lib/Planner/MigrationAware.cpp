//===- MigrationAware.cpp - Ours: placement that pays for its moves -------===//
//
// Neither EPLB nor SmartMoE weighs what a new placement moves (EPLB#25: its
// tables are rebuilt from scratch, "nearly full-scale expert adjustments").
// Ours searches replica counts for a low maximum rank load, packs replicas
// preferring the ranks that hold them already, and changes the placement
// only when the time gained until the next re-plan exceeds the time of the
// migration.
//
//===----------------------------------------------------------------------===//

#include "Packing.h"

#include <algorithm>
#include <numeric>

using namespace moe::planner;
using namespace moe::planner::detail;

namespace {
/// Replicas the search moves per round: from the experts that lose least
/// by giving one up, to the experts of the most loaded rank and the
/// largest replicas.
constexpr int64_t searchWidth = 4;
/// Replicas the search may pack in all from one start, so that re-planning
/// 1024 ranks stays near a millisecond (a few packings of thousands of
/// slots); small layers get hundreds of packings.
constexpr int64_t searchBudget = int64_t{1} << 12;
/// How far above the best maximum a stickier plan may go; the cost rule
/// picks among them.
constexpr double slack[] = {0.0, 0.01, 0.02, 0.05};

/// The `k` first of `items` in `before` order, in that order.
template <typename Before>
std::vector<int32_t> firstK(std::vector<int32_t> items, int64_t k,
                            Before before) {
  k = std::min<int64_t>(k, static_cast<int64_t>(items.size()));
  std::partial_sort(items.begin(), items.begin() + k, items.end(), before);
  items.resize(k);
  return items;
}

/// Local search over replica counts: moves one replica from an expert
/// that has several to another while the packing's maximum drops.
class CountSearch {
public:
  CountSearch(const std::vector<double> &load, int64_t numRanks,
              int64_t numSlots, Packer &packer)
      : load(load), ranks(numRanks), perRank(numSlots / numRanks),
        packer(packer),
        maxPackings(std::max<int64_t>(1, searchBudget / numSlots)) {}

  /// The best counts reached from `counts`, and their packing.
  std::pair<std::vector<int32_t>, Packing> run(std::vector<int32_t> counts) {
    Packing best = packer.pack(counts);
    // One slot per rank: the min-max apportionment is already optimal.
    if (perRank == 1)
      return {counts, best};
    int64_t packings = 1;
    while (packings < maxPackings) {
      std::vector<int32_t> takers = receivers(counts, best);
      std::vector<int32_t> givers = donors(counts);
      int32_t bestTaker = -1, bestGiver = -1;
      Packing improved;
      for (int32_t e : takers)
        for (int32_t f : givers) {
          if (e == f || packings >= maxPackings)
            continue;
          ++counts[e];
          --counts[f];
          Packing p = packer.pack(counts);
          ++packings;
          --counts[e];
          ++counts[f];
          double bar = bestTaker < 0 ? best.maxLoad : improved.maxLoad;
          if (p.maxLoad < bar) {
            improved = std::move(p);
            bestTaker = e;
            bestGiver = f;
          }
        }
      if (bestTaker < 0)
        break;
      ++counts[bestTaker];
      --counts[bestGiver];
      best = std::move(improved);
    }
    return {counts, best};
  }

private:
  /// The experts of the most loaded rank and those of the largest
  /// replicas, that may take one more replica.
  std::vector<int32_t> receivers(const std::vector<int32_t> &counts,
                                 const Packing &packing) const {
    int64_t top = std::max_element(packing.loads.begin(),
                                   packing.loads.end()) -
                  packing.loads.begin();
    std::vector<int32_t> all(load.size());
    std::iota(all.begin(), all.end(), 0);
    std::vector<int32_t> chosen =
        firstK(all, searchWidth, [&](int32_t a, int32_t b) {
          double sa = load[a] / counts[a], sb = load[b] / counts[b];
          return sa > sb || (sa == sb && a < b);
        });
    chosen.insert(chosen.end(), packing.experts.begin() + top * perRank,
                  packing.experts.begin() + (top + 1) * perRank);
    std::sort(chosen.begin(), chosen.end());
    chosen.erase(std::unique(chosen.begin(), chosen.end()), chosen.end());
    chosen.erase(std::remove_if(chosen.begin(), chosen.end(),
                                [&](int32_t e) { return counts[e] >= ranks; }),
                 chosen.end());
    return chosen;
  }

  /// The experts with several replicas whose replicas grow least when
  /// they lose one.
  std::vector<int32_t> donors(const std::vector<int32_t> &counts) const {
    std::vector<int32_t> several;
    for (int32_t e = 0; e < static_cast<int32_t>(load.size()); ++e)
      if (counts[e] > 1)
        several.push_back(e);
    return firstK(several, searchWidth, [&](int32_t a, int32_t b) {
      double sa = load[a] / (counts[a] - 1), sb = load[b] / (counts[b] - 1);
      return sa < sb || (sa == sb && a < b);
    });
  }

  const std::vector<double> &load;
  int64_t ranks, perRank;
  Packer &packer;
  int64_t maxPackings;
};

/// Rank by rank, the experts that stay keep their local slots; the new
/// ones take the freed slots in packing order.
std::vector<int32_t> keepLocalSlots(const Placement &current,
                                    const Packing &packing) {
  int64_t perRank = current.slotsPerRank();
  std::vector<int32_t> slots(current.numSlots(), -1);
  std::vector<int32_t> incoming;
  for (int64_t g = 0; g < current.numRanks(); ++g) {
    incoming.assign(packing.experts.begin() + g * perRank,
                    packing.experts.begin() + (g + 1) * perRank);
    for (int64_t k = 0; k < perRank; ++k) {
      auto it = std::find(incoming.begin(), incoming.end(),
                          current.expertAt(g * perRank + k));
      if (it == incoming.end())
        continue;
      slots[g * perRank + k] = *it;
      *it = -1;
    }
    auto next = incoming.begin();
    for (int64_t k = 0; k < perRank; ++k) {
      if (slots[g * perRank + k] >= 0)
        continue;
      next = std::find_if(next, incoming.end(), [](int32_t e) { return e >= 0; });
      slots[g * perRank + k] = *next++;
    }
  }
  return slots;
}

/// A plan the choice weighs.
struct Candidate {
  std::vector<int32_t> slots;
  double maxLoad;
  Transfers transfers;
};
} // namespace

Placement moe::planner::migrationAwarePlacement(
    const Placement &current, const std::vector<double> &load,
    const MigrationCost &cost) {
  int64_t numRanks = current.numRanks(), numSlots = current.numSlots();
  int64_t numExperts = current.numExperts();
  // One copy per rank at most: no more slots than experts times ranks.
  if (numSlots > numExperts * numRanks)
    return current;
  std::vector<double> currentLoads = rankLoads(current, load);
  double currentMax =
      *std::max_element(currentLoads.begin(), currentLoads.end());

  Packer packer(load, numRanks, current.slotsPerRank());
  packer.setCurrent(current);
  CountSearch search(load, numRanks, numSlots, packer);
  // From the min-max apportionment, and from the current counts, which a
  // drifting load often needs few changes of.
  std::vector<std::vector<int32_t>> starts{
      apportion(load, numSlots, numRanks)};
  std::vector<int32_t> currentCounts = current.replicaCounts();
  if (*std::max_element(currentCounts.begin(), currentCounts.end()) <=
          numRanks &&
      currentCounts != starts[0])
    starts.push_back(currentCounts);
  std::vector<std::pair<std::vector<int32_t>, Packing>> searched;
  double bestMax = currentMax;
  for (const std::vector<int32_t> &start : starts) {
    searched.push_back(search.run(start));
    bestMax = std::min(bestMax, searched.back().second.maxLoad);
  }

  std::vector<Candidate> candidates;
  auto consider = [&](const Packing &p, double limit) {
    if (p.maxLoad > limit)
      return;
    std::vector<int32_t> slots = keepLocalSlots(current, p);
    Transfers t = countTransfers(current, slots);
    candidates.push_back({std::move(slots), p.maxLoad, std::move(t)});
  };
  // Stickier packings of the best counts (those from the current counts on
  // ties): at most a few percent above the best maximum.
  size_t best = 0;
  for (size_t i = 0; i < searched.size(); ++i) {
    consider(searched[i].second, searched[i].second.maxLoad);
    if (searched[i].second.maxLoad <= searched[best].second.maxLoad)
      best = i;
  }
  for (double s : slack) {
    double limit = bestMax * (1 + s);
    consider(packer.pack(searched[best].first, /*sticky=*/true, limit), limit);
  }

  // Gain until the next re-plan minus the busiest rank's transfer time;
  // with no time per token, the lowest maximum. Then fewer moves.
  auto net = [&](const Candidate &c) {
    if (cost.secondsPerToken <= 0)
      return currentMax - c.maxLoad;
    double gain = (currentMax - c.maxLoad) * cost.secondsPerToken * cost.repeats;
    double migration = static_cast<double>(c.transfers.busiest()) *
                       cost.bytesPerExpert / cost.bytesPerSecond;
    return gain - migration;
  };
  const Candidate *chosen = nullptr;
  double chosenNet = 0;
  for (const Candidate &c : candidates) {
    if (c.maxLoad >= currentMax)
      continue;
    double n = net(c);
    if (n <= 0)
      continue;
    if (!chosen || n > chosenNet ||
        (n == chosenNet && c.transfers.total() < chosen->transfers.total())) {
      chosen = &c;
      chosenNet = n;
    }
  }
  if (!chosen)
    return current;
  return Placement(numExperts, numRanks, chosen->slots);
}
