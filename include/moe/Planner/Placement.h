//===- Placement.h - Expert placement of MoE layers -------------*- C++ -*-===//
//
// Where the experts of one MoE layer live: E logical experts on P physical
// slots over R ranks, S = P / R slots per rank, slot p = rank * S + local
// slot (the convention of SmartMoE, EPLB, vLLM and SGLang). P > E adds
// P - E redundant slots, replicas of some experts. The algorithms that
// choose a placement from measured loads follow the sources exactly
// (../shared/reference/moe-placement.md, sections 1 and 2): SmartMoE's
// greedy, DeepSeek's EPLB, FasterMoE's shadow decision; ours weighs the
// bytes that a change moves against what it gains.
//
// Plain C++17 and the standard library only, so that the runtime can link
// it as the tools do. Loads are tokens per expert (top-k choices counted),
// as doubles.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_PLANNER_PLACEMENT_H
#define MOE_PLANNER_PLACEMENT_H

#include "moe/Planner/ReplicaRule.h"

#include <cstdint>
#include <string>
#include <vector>

namespace moe::planner {

/// Checks the tables of a placement: numRanks > 0, numSlots a multiple of
/// numRanks and at least numExperts, every entry an expert, every expert on
/// at least one slot and, with `distinctPerRank`, no two copies of one
/// expert on one rank. Returns an error message, empty when valid.
std::string validatePlacement(int64_t numExperts, int64_t numRanks,
                              const std::vector<int32_t> &slotToExpert,
                              bool distinctPerRank);

/// One MoE layer's placement: the slot -> expert table and, derived from
/// it, expert -> slots (each expert's replicas in ascending slot order).
class Placement {
public:
  Placement() = default;
  /// `slotToExpert` must pass validatePlacement (without distinctPerRank);
  /// entries that are not experts are left out of the replica lists.
  Placement(int64_t numExperts, int64_t numRanks,
            std::vector<int32_t> slotToExpert);
  /// The trivial layout: slot p holds expert p % E (vLLM's initial map,
  /// contiguous experts first, then the redundant slots from expert 0 on).
  static Placement identity(int64_t numExperts, int64_t numRanks,
                            int64_t numSlots);

  int64_t numExperts() const { return experts; }
  int64_t numRanks() const { return ranks; }
  int64_t numSlots() const { return static_cast<int64_t>(slots.size()); }
  int64_t slotsPerRank() const { return ranks ? numSlots() / ranks : 0; }
  int64_t rankOfSlot(int64_t slot) const { return slot / slotsPerRank(); }

  const std::vector<int32_t> &slotToExpert() const { return slots; }
  int32_t expertAt(int64_t slot) const { return slots[slot]; }
  /// How many slots hold `expert`.
  int64_t replicaCount(int32_t expert) const {
    return replicaBegin[expert + 1] - replicaBegin[expert];
  }
  /// The `replica`-th slot of `expert` in ascending slot order.
  int32_t replicaSlot(int32_t expert, int64_t replica) const {
    return replicaSlots[replicaBegin[expert] + replica];
  }

  /// The replica rule (moe.place, ReplicaRule.h): the slot that serves the
  /// choices of `expert` made on rank `source`: its replica there if that
  /// rank holds one, else the ranks without one take its replicas in turn.
  /// The load model (rankLoads) splits an expert's load evenly over its
  /// replicas, which the rule gives where every rank routes alike.
  int32_t slotFor(int32_t expert, int64_t source) const {
    return static_cast<int32_t>(servingSlot(slots.data(), numSlots(), ranks,
                                            source, expert));
  }

  /// The runtime's tables: expert e's replicas at [e * maxReplicas + r],
  /// -1 padded (EPLB's log2phy), and the replica count of each expert.
  int64_t maxReplicas() const;
  std::vector<int32_t> expertToSlotTable() const;
  std::vector<int32_t> replicaCounts() const;

  bool operator==(const Placement &other) const {
    return experts == other.experts && ranks == other.ranks &&
           slots == other.slots;
  }
  bool operator!=(const Placement &other) const { return !(*this == other); }

private:
  int64_t experts = 0, ranks = 0;
  std::vector<int32_t> slots;
  // CSR: expert e's slots are replicaSlots[replicaBegin[e] .. [e + 1]).
  std::vector<int64_t> replicaBegin{0};
  std::vector<int32_t> replicaSlots;
};

//===----------------------------------------------------------------------===//
// Metrics (reference section 1)
//===----------------------------------------------------------------------===//

/// Tokens each rank computes: every slot takes its expert's load divided by
/// the expert's replica count (what the replica rule gives).
std::vector<double> rankLoads(const Placement &placement,
                              const std::vector<double> &expertLoad);
/// mean / max of `rankLoads`, in (0, 1]; 1 when nothing is loaded.
double balancedness(const std::vector<double> &rankLoads);
double balancedness(const Placement &placement,
                    const std::vector<double> &expertLoad);

/// The lower bound of section 1 on the maximum rank load of `placement`:
/// max(sum_e w_e / R, max_e w_e / c_e).
double maxLoadLowerBound(const Placement &placement,
                         const std::vector<double> &expertLoad);
/// The same bound for the best replica counts any placement of `numSlots`
/// slots over `numRanks` ranks can have (at most numRanks copies of an
/// expert, one per rank): the greedy apportionment that minimises
/// max_e w_e / c_e. No such placement's balancedness exceeds
/// mean / this bound.
double bestMaxLoadLowerBound(const std::vector<double> &expertLoad,
                             int64_t numRanks, int64_t numSlots);

/// Bytes that go over the network to turn `from` into `to` (same shape):
/// each rank receives every expert it holds in `to` but not in `from` once,
/// `bytesPerExpert` each; slots that change within a rank are local copies
/// and cost nothing here.
double bytesMoved(const Placement &from, const Placement &to,
                  double bytesPerExpert);
/// The most bytes one rank sends or receives in that change: the time of
/// the migration when all ranks transfer at once.
double busiestRankBytes(const Placement &from, const Placement &to,
                        double bytesPerExpert);

//===----------------------------------------------------------------------===//
// Algorithms (reference section 2)
//===----------------------------------------------------------------------===//

/// SmartMoE's greedy (SmartMoE-AE smartmoe/mapping.py,
/// greedy_gen_mapping_from_history), a permutation (P == E): experts by
/// decreasing load (numpy's argsort reversed: equal loads in decreasing id
/// order), each to the first least-loaded rank with a free slot, or to its
/// current rank if that one has a free slot and the same load; local slots
/// in arrival order. Returns `current` unless the new maximum rank load is
/// strictly lower than the current one. A permutation only: `current`
/// itself when numSlots != numExperts.
Placement smartMoEGreedy(const Placement &current,
                         const std::vector<double> &expertLoad);

/// DeepSeek's EPLB (deepseek-ai/EPLB eplb.py rebalance_experts) for one
/// layer: hierarchical when numGroups % numNodes == 0 (groups of
/// contiguous experts packed to nodes, replicas made within each node,
/// replicas packed to the node's ranks), else global (one group, one node).
/// Sorts are stable, ties go to the lowest index. Fills `result` and
/// returns an empty string, or returns what is wrong (EPLB's assertions:
/// E % numGroups, numRanks % numNodes, numSlots % numRanks, and
/// numSlots % numNodes, numSlots >= E). Two replicas of one expert may land
/// on one rank (deepseek-ai/EPLB#22).
std::string eplb(const std::vector<double> &expertLoad, int64_t numSlots,
                 int64_t numRanks, int64_t numGroups, int64_t numNodes,
                 Placement &result);

/// FasterMoE's shadow policy (laekov/fastmoe fastermoe/shadow_policy.py)
/// and its cost model; defaults are its environment defaults.
struct ShadowModel {
  double modelDim = 2048;          // FMOE_FASTER_GLBPLC_DMODEL: H
  double alpha = 2;                // FMOE_FASTER_GLBPLC_ALPHA: FFN = alpha H
  double netBandwidth = 50e9 / 8;  // FMOE_FASTER_GLBPLC_NETBW, bytes/s
  double gemmThroughput = 11.5e12; // FMOE_FASTER_GLBPLC_GPUTP, FLOP/s
  double dataSize = 4;             // bytes per element ("TODO: other types")
};
/// The experts to shadow (broadcast to every rank) for per-expert token
/// counts `expertLoad` (the formula's per-expert totals, not the source's
/// per-worker sums; reference 2.2): the hottest experts first (stable,
/// lowest id on ties), each shadowed while 3 comp B + 4 feat B plus the
/// shadows' model transfers, with B the hottest count left unshadowed, is
/// strictly lower than the best so far. Flags per expert.
std::vector<bool> fasterMoEShadows(const std::vector<double> &expertLoad,
                                   const ShadowModel &model = {});
/// That model's time of one iteration when the `numShadowed` hottest
/// experts are shadowed, in seconds.
double fasterMoELatency(const std::vector<double> &expertLoad,
                        int64_t numShadowed, const ShadowModel &model = {});

/// What a re-placement costs and what it gains, for ours.
struct MigrationCost {
  /// Expert compute time of one routed token on one rank (fwd, or fwd and
  /// bwd in training), seconds. 0 weighs balance alone.
  double secondsPerToken = 0;
  /// What travels with one expert: weights, and in training the master
  /// weights and optimizer state.
  double bytesPerExpert = 0;
  /// What one rank sends or receives per second.
  double bytesPerSecond = 1;
  /// How many times the given load recurs before the next re-plan.
  double repeats = 1;
};

/// Ours: migration-aware placement with replicas, at most one copy of an
/// expert per rank. Replica counts start from the min-max apportionment
/// (and from the current counts), then move one replica at a time while
/// that lowers the maximum rank load of a largest-first packing (a bounded
/// number of packings); the packing prefers each expert's current ranks.
/// Among the candidate plans (the tightest, and stickier ones within a few
/// percent of the best maximum) it keeps the one whose gain over the next
/// interval, (current max - new max) * secondsPerToken * repeats, minus
/// the busiest rank's migration time (cost.bytesPerExpert per expert it
/// sends or receives, at bytesPerSecond) is largest and positive, else
/// `current`. With secondsPerToken 0 it keeps the lowest maximum (fewest
/// moves on ties) if that is below the current one. Within a rank, experts
/// that stay keep their local slots. Same shape as `current`, which must
/// hold every expert (duplicates on a rank are allowed and removed);
/// `current` itself when numSlots > numExperts * numRanks. Deterministic.
Placement migrationAwarePlacement(const Placement &current,
                                  const std::vector<double> &expertLoad,
                                  const MigrationCost &cost = {});

} // namespace moe::planner

#endif // MOE_PLANNER_PLACEMENT_H
