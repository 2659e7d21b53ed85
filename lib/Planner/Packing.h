//===- Packing.h - Replica counts and packing for the planners --*- C++ -*-===//
//
// Pieces that EPLB and ours share, or that ours runs many times and so must
// be fast: the min-max apportionment of slots to experts, a largest-first
// packing of replicas into ranks of S slots, and the transfers between two
// placements.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_PLANNER_PACKING_H
#define MOE_PLANNER_PACKING_H

#include "moe/Planner/Placement.h"

#include <cstdint>
#include <string>
#include <vector>

namespace moe::planner::detail {

/// Why E experts cannot take P slots over R ranks (none, at least one
/// expert and rank, S = P / R whole, P >= E), or "".
std::string slotLayoutError(int64_t numExperts, int64_t numRanks,
                            int64_t numSlots);

/// Replica counts: one each, then each further slot to the expert with the
/// largest load per replica (the lowest id on ties) that has fewer than
/// `maxCopies` replicas (EPLB's replicate_experts, capped). Needs
/// E <= numSlots <= E * maxCopies.
std::vector<int32_t> apportion(const std::vector<double> &load,
                               int64_t numSlots, int64_t maxCopies);

/// Ranks filled by a largest-first packing: `experts` holds rank g's
/// experts at [g * S, g * S + S) in the order they came.
struct Packing {
  std::vector<int32_t> experts;
  std::vector<double> loads;
  double maxLoad = 0;
};

/// Packs `counts[e]` replicas of each expert, of load load[e] / counts[e]
/// each, into `numRanks` ranks of `slotsPerRank` slots, never two replicas
/// of one expert on one rank (counts[e] <= numRanks): experts by
/// decreasing replica load (lowest id on ties), each replica to the
/// least-loaded rank with a free slot (lowest rank on ties) that does not
/// hold the expert. With `current`, a replica first goes to a rank that
/// holds the expert there, when that rank's load stays within
/// `stickyLimit` (the least-loaded such rank first).
class Packer {
public:
  Packer(const std::vector<double> &load, int64_t numRanks,
         int64_t slotsPerRank);
  /// Where `current` puts each expert; needed before a sticky pack.
  void setCurrent(const Placement &current);
  Packing pack(const std::vector<int32_t> &counts, bool sticky = false,
               double stickyLimit = 0);

private:
  void place(Packing &packing, int64_t rank, int32_t expert, double size);
  bool placeByRepair(Packing &packing, int32_t expert, double size);

  const std::vector<double> &load;
  int64_t ranks, perRank;
  // Scratch, reused across packs.
  std::vector<int64_t> filled;
  std::vector<int32_t> lastExpert, order;
  std::vector<double> sizes;
  // The current placement's ranks of each expert (CSR), when set.
  std::vector<int64_t> currentBegin;
  std::vector<int32_t> currentRanks;
};

/// Per rank, how many experts it receives and sends to go from `from` to
/// the slot table `to`: a rank receives each expert it lacks once; the
/// holders of an expert send it in turn.
struct Transfers {
  std::vector<int64_t> received, sent;
  int64_t total() const;
  int64_t busiest() const;
};
Transfers countTransfers(const Placement &from,
                         const std::vector<int32_t> &to);

} // namespace moe::planner::detail

#endif // MOE_PLANNER_PACKING_H
