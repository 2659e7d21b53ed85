//===- Eplb.cpp - DeepSeek's expert-parallelism load balancer -------------===//
//
// deepseek-ai/EPLB eplb.py for one layer, in float32 as the source computes
// (`weight.float()`): balanced_packing, replicate_experts and
// rebalance_experts_hierarchical, whose global form is one group on one
// node. torch's sorts are unstable; these break ties by the lower index (a
// stable sort), which reproduces the README's example.
//
//===----------------------------------------------------------------------===//

#include "moe/Planner/Placement.h"
#include "Packing.h"

#include <algorithm>
#include <numeric>

using namespace moe::planner;

namespace {
/// Pack of each item and its rank in the pack.
struct PackResult {
  std::vector<int64_t> pack, rank;
};

/// balanced_packing: `weight.size() / numPacks` items per pack, heaviest
/// first, each to the lightest pack with room (Python's min: the first).
PackResult balancedPacking(const std::vector<float> &weight,
                           int64_t numPacks) {
  int64_t n = static_cast<int64_t>(weight.size()), perPack = n / numPacks;
  PackResult r{std::vector<int64_t>(n), std::vector<int64_t>(n, 0)};
  if (perPack == 1) {
    std::iota(r.pack.begin(), r.pack.end(), 0);
    return r;
  }
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return weight[a] > weight[b] || (weight[a] == weight[b] && a < b);
  });
  std::vector<float> packWeight(numPacks, 0.0f);
  std::vector<int64_t> packItems(numPacks, 0);
  for (int64_t item : order) {
    int64_t best = -1;
    for (int64_t p = 0; p < numPacks; ++p)
      if (packItems[p] < perPack &&
          (best < 0 || packWeight[p] < packWeight[best]))
        best = p;
    r.pack[item] = best;
    r.rank[item] = packItems[best]++;
    packWeight[best] += weight[item];
  }
  return r;
}

/// replicate_experts: physical expert i < numLogical is logical i; each
/// further one copies the logical expert of the largest weight per replica
/// (the first on ties).
struct Replicas {
  std::vector<int64_t> phyToLog, count;
};
Replicas replicateExperts(const std::vector<float> &weight, int64_t numPhy) {
  int64_t numLog = static_cast<int64_t>(weight.size());
  Replicas r{std::vector<int64_t>(numPhy), std::vector<int64_t>(numLog, 1)};
  std::iota(r.phyToLog.begin(), r.phyToLog.begin() + numLog, 0);
  for (int64_t i = numLog; i < numPhy; ++i) {
    int64_t best = 0;
    for (int64_t e = 1; e < numLog; ++e)
      if (weight[e] / static_cast<float>(r.count[e]) >
          weight[best] / static_cast<float>(r.count[best]))
        best = e;
    r.phyToLog[i] = best;
    ++r.count[best];
  }
  return r;
}

std::vector<int64_t> inverse(const std::vector<int64_t> &perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inv[perm[i]] = static_cast<int64_t>(i);
  return inv;
}
} // namespace

std::string moe::planner::eplb(const std::vector<double> &expertLoad,
                               int64_t numSlots, int64_t numRanks,
                               int64_t numGroups, int64_t numNodes,
                               Placement &result) {
  int64_t numExperts = static_cast<int64_t>(expertLoad.size());
  if (numExperts == 0 || numRanks <= 0 || numGroups <= 0 || numNodes <= 0)
    return "EPLB needs experts, ranks, groups and nodes";
  if (numGroups % numNodes != 0)
    numGroups = numNodes = 1; // rebalance_experts' global policy
  if (numExperts % numGroups != 0)
    return std::to_string(numExperts) + " experts do not form " +
           std::to_string(numGroups) + " groups";
  if (numRanks % numNodes != 0)
    return std::to_string(numRanks) + " ranks do not divide over " +
           std::to_string(numNodes) + " nodes";
  if (std::string error =
          detail::slotLayoutError(numExperts, numRanks, numSlots);
      !error.empty())
    return error;

  std::vector<float> weight(expertLoad.begin(), expertLoad.end());
  int64_t groupSize = numExperts / numGroups;
  int64_t groupsPerNode = numGroups / numNodes;
  int64_t expertsPerNode = numExperts / numNodes;
  int64_t slotsPerNode = numSlots / numNodes;
  int64_t ranksPerNode = numRanks / numNodes;
  int64_t slotsPerRank = numSlots / numRanks;

  // Step 1: groups to nodes; experts renumbered node-major ("mlog").
  std::vector<float> groupWeight(numGroups, 0.0f);
  for (int64_t e = 0; e < numExperts; ++e)
    groupWeight[e / groupSize] += weight[e];
  PackResult groups = balancedPacking(groupWeight, numNodes);
  std::vector<int64_t> logToMlog(numExperts);
  for (int64_t e = 0; e < numExperts; ++e) {
    int64_t g = e / groupSize;
    logToMlog[e] = (groups.pack[g] * groupsPerNode + groups.rank[g]) *
                       groupSize +
                   e % groupSize;
  }
  std::vector<int64_t> mlogToLog = inverse(logToMlog);

  std::vector<int32_t> slots(numSlots);
  for (int64_t node = 0; node < numNodes; ++node) {
    // Step 2: replicas within the node.
    std::vector<float> nodeWeight(expertsPerNode);
    for (int64_t i = 0; i < expertsPerNode; ++i)
      nodeWeight[i] = weight[mlogToLog[node * expertsPerNode + i]];
    Replicas replicas = replicateExperts(nodeWeight, slotsPerNode);
    // Step 3: replicas to the node's ranks.
    std::vector<float> replicaWeight(slotsPerNode);
    for (int64_t i = 0; i < slotsPerNode; ++i) {
      int64_t m = replicas.phyToLog[i];
      replicaWeight[i] =
          nodeWeight[m] / static_cast<float>(replicas.count[m]);
    }
    PackResult packed = balancedPacking(replicaWeight, ranksPerNode);
    // Step 4: back to global slot and expert ids.
    for (int64_t i = 0; i < slotsPerNode; ++i) {
      int64_t slot = packed.pack[i] * slotsPerRank + packed.rank[i];
      int64_t mlog = replicas.phyToLog[i] + node * expertsPerNode;
      slots[node * slotsPerNode + slot] =
          static_cast<int32_t>(mlogToLog[mlog]);
    }
  }
  result = Placement(numExperts, numRanks, std::move(slots));
  return "";
}
