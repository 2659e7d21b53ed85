//===- FasterMoE.cpp - FasterMoE's shadow decision ------------------------===//
//
// global_policy of laekov/fastmoe fmoe/fastermoe/shadow_policy.py, on
// per-expert token counts (the formula's B; the source sums the gathered
// counts over the wrong axis, fastmoe#184).
//
//===----------------------------------------------------------------------===//

#include "moe/Planner/Placement.h"

#include <algorithm>
#include <numeric>

using namespace moe::planner;

namespace {
/// The policy's per-token and per-shadow times.
struct ShadowTimes {
  double sendFeature, sendModel, compute;
  explicit ShadowTimes(const ShadowModel &m) {
    double alphaH2 = m.alpha * m.modelDim * m.modelDim;
    sendFeature = m.modelDim * m.dataSize / m.netBandwidth;
    sendModel = 2 * alphaH2 * m.dataSize / m.netBandwidth;
    compute = 4 * alphaH2 / m.gemmThroughput;
  }
  /// 3 = forward and twice backward compute; 4 = two all-to-alls forward
  /// and two backward.
  double latency(double tokens, double shadowTime) const {
    return 3 * compute * tokens + 4 * sendFeature * tokens + shadowTime;
  }
};

/// Experts by decreasing count, the lowest id first on ties.
std::vector<int32_t> hottestFirst(const std::vector<double> &load) {
  std::vector<int32_t> order(load.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return load[a] > load[b] || (load[a] == load[b] && a < b);
  });
  return order;
}
} // namespace

std::vector<bool> moe::planner::fasterMoEShadows(const std::vector<double> &load,
                                                 const ShadowModel &model) {
  std::vector<bool> shadowed(load.size(), false);
  if (load.empty())
    return shadowed;
  ShadowTimes times(model);
  std::vector<int32_t> order = hottestFirst(load);
  double best = times.latency(load[order[0]], 0);
  double shadowTime = 0;
  for (size_t i = 0; i + 1 < order.size(); ++i) {
    shadowTime += times.sendModel;
    double candidate = times.latency(load[order[i + 1]], shadowTime);
    if (!(candidate < best))
      break;
    best = candidate;
    shadowed[order[i]] = true;
  }
  return shadowed;
}

double moe::planner::fasterMoELatency(const std::vector<double> &load,
                                      int64_t numShadowed,
                                      const ShadowModel &model) {
  ShadowTimes times(model);
  std::vector<int32_t> order = hottestFirst(load);
  double tokens = numShadowed < static_cast<int64_t>(order.size())
                      ? load[order[numShadowed]]
                      : 0;
  return times.latency(tokens, static_cast<double>(numShadowed) *
                                   times.sendModel);
}
