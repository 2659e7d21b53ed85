//===- Stats.cpp - Per-run timings, expert loads and GEMM rates -----------===//
//
// The hooks always count (a clock read or a histogram of the routed ids per
// layer call, small beside the layer's work); only printStats talks to other
// ranks. Pipeline stages hold different layers, so ranks first agree on the
// extents of the tables they reduce.
//
//===----------------------------------------------------------------------===//

#include "Process.h"

#include "moert/moert.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

using namespace moert;
using namespace moert::detail;

using Clock = std::chrono::steady_clock;

namespace {
struct Layer {
  std::vector<int64_t> tokens; ///< per expert, summed over runs
  std::vector<int64_t> taken;  ///< what takeLayerTokens returned of them
  int64_t dropped = 0;         ///< summed over runs
  std::vector<double> seconds; ///< per run
  Clock::time_point begin;
};

struct Stats {
  std::map<int64_t, Layer> layers;
  int64_t runsBegun = 0;
  Clock::time_point runBegin;
  std::vector<double> runSeconds;
  double gemmFlops = 0, gemmSeconds = 0, gemmCpuSeconds = 0;
};
Stats stats;
} // namespace

static double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

static Layer &layer(int64_t id, const char *op) {
  if (id < 0 || id >= (1 << 20))
    fail(op, ": layer id ", id, " outside [0, 2^20)");
  return stats.layers[id];
}

void moert::beginRun() {
  ++stats.runsBegun;
  stats.runBegin = Clock::now();
}

void moert::endRun() {
  stats.runSeconds.push_back(secondsSince(stats.runBegin));
}

void detail::recordGemm(double flops, double seconds, double cpuSeconds) {
  stats.gemmFlops += flops;
  stats.gemmSeconds += seconds;
  stats.gemmCpuSeconds += cpuSeconds;
}

/// The run that layer times count towards: calls outside a run count
/// towards the first.
int64_t detail::currentRun() {
  return std::max<int64_t>(stats.runsBegun, 1) - 1;
}

void detail::checkLayer(int64_t id, const char *op) { layer(id, op); }

void detail::addLayerTokens(int64_t id, const std::vector<int64_t> &tokens) {
  Layer &l = layer(id, "addLayerTokens");
  if (l.tokens.size() < tokens.size())
    l.tokens.resize(tokens.size());
  for (size_t e = 0; e < tokens.size(); ++e)
    l.tokens[e] += tokens[e];
}

void detail::addLayerDropped(int64_t id, int64_t dropped) {
  layer(id, "addLayerDropped").dropped += dropped;
}

void detail::addLayerSeconds(int64_t id, int64_t run, double seconds) {
  Layer &l = layer(id, "addLayerSeconds");
  if (static_cast<int64_t>(l.seconds.size()) <= run)
    l.seconds.resize(run + 1);
  l.seconds[run] += seconds;
}

static std::vector<void (*)()> &collectors() {
  static std::vector<void (*)()> all;
  return all;
}

void detail::beforePrintStats(void (*collect)()) {
  collectors().push_back(collect);
}

void moert_layer_begin(int64_t id) {
  layer(id, "moert_layer_begin").begin = Clock::now();
}

void moert_layer_end(int64_t id) {
  Layer &l = layer(id, "moert_layer_end");
  addLayerSeconds(id, currentRun(), secondsSince(l.begin));
}

void moert_layer_tokens(int64_t id, const int32_t *ids, int64_t numIds,
                        int64_t numExperts, int64_t replicaAxes) {
  const char *op = "moert_layer_tokens";
  Layer &l = layer(id, op);
  if (numExperts < 0 || numExperts > (1 << 24) || numIds < 0)
    fail(op, ": ", numIds, " ids of ", numExperts, " experts");
  if (static_cast<int64_t>(l.tokens.size()) < numExperts)
    l.tokens.resize(numExperts);
  if (position(replicaAxes, op) != 0)
    return;
  for (int64_t i = 0; i < numIds; ++i)
    if (ids[i] >= 0 && ids[i] < numExperts)
      ++l.tokens[ids[i]];
}

void moert_layer_dropped(int64_t id, const int64_t *dropped,
                         int64_t replicaAxes) {
  const char *op = "moert_layer_dropped";
  Layer &l = layer(id, op);
  if (position(replicaAxes, op) == 0)
    l.dropped += *dropped;
}

/// Reduces `v` element-wise over the ranks into rank 0's copy (into every
/// copy when `all`). Ranks pass vectors of the same size.
template <typename T>
static void reduce(std::vector<T> &v, MPI_Datatype type, MPI_Op op,
                   bool all = false) {
  if (worldSize() == 1 || v.empty())
    return;
  int n = toInt(v.size(), "moe-run --stats");
  Waiting wait("gathering the statistics");
  if (all)
    MPI_Allreduce(MPI_IN_PLACE, v.data(), n, type, op, MPI_COMM_WORLD);
  else if (worldRank() == 0)
    MPI_Reduce(MPI_IN_PLACE, v.data(), n, type, op, 0, MPI_COMM_WORLD);
  else
    MPI_Reduce(v.data(), nullptr, n, type, op, 0, MPI_COMM_WORLD);
}

static double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/// Counts per run: whole numbers unless runs routed differently.
static std::string perRun(int64_t total, int64_t runs) {
  char text[32];
  if (total % runs == 0)
    std::snprintf(text, sizeof text, "%lld",
                  static_cast<long long>(total / runs));
  else
    std::snprintf(text, sizeof text, "%.2f", static_cast<double>(total) / runs);
  return text;
}

void moert::resetStats() {
  // The device's counts and times land in the tables first (which zeroes
  // its counters and frees its events), then go with the rest.
  for (void (*collect)() : collectors())
    collect();
  stats = Stats();
}

/// Collective: the extents every rank's tables take, layer ids and experts
/// per layer (pipeline stages hold different layers).
static std::pair<int64_t, int64_t> agreedExtents() {
  std::vector<int64_t> extents = {0, 0};
  for (const auto &[id, l] : stats.layers) {
    extents[0] = id + 1;
    extents[1] = std::max<int64_t>(extents[1], l.tokens.size());
  }
  reduce(extents, MPI_INT64_T, MPI_MAX, /*all=*/true);
  return {extents[0], extents[1]};
}

std::vector<std::vector<int64_t>> moert::takeLayerTokens() {
  for (void (*collect)() : collectors())
    collect();
  auto [numLayers, numExperts] = agreedExtents();
  // Per layer: its expert count (max), then its new tokens (sum).
  std::vector<int64_t> counts(numLayers), tokens(numLayers * numExperts);
  for (auto &[id, l] : stats.layers) {
    counts[id] = l.tokens.size();
    l.taken.resize(l.tokens.size());
    for (size_t e = 0; e < l.tokens.size(); ++e) {
      tokens[id * numExperts + e] = l.tokens[e] - l.taken[e];
      l.taken[e] = l.tokens[e];
    }
  }
  reduce(counts, MPI_INT64_T, MPI_MAX);
  reduce(tokens, MPI_INT64_T, MPI_SUM);
  std::vector<std::vector<int64_t>> result;
  if (worldRank() != 0)
    return result;
  for (int64_t id = 0; id < numLayers; ++id)
    result.emplace_back(tokens.begin() + id * numExperts,
                        tokens.begin() + id * numExperts + counts[id]);
  return result;
}

std::vector<std::vector<int64_t>> moert::layerTokenTotals() {
  for (void (*collect)() : collectors())
    collect();
  auto [numLayers, numExperts] = agreedExtents();
  std::vector<int64_t> tokens(numLayers * numExperts);
  for (const auto &[id, l] : stats.layers)
    std::copy(l.tokens.begin(), l.tokens.end(),
              tokens.begin() + id * numExperts);
  reduce(tokens, MPI_INT64_T, MPI_SUM, /*all=*/true);
  std::vector<std::vector<int64_t>> result;
  for (int64_t id = 0; id < numLayers; ++id)
    result.emplace_back(tokens.begin() + id * numExperts,
                        tokens.begin() + (id + 1) * numExperts);
  return result;
}

void moert::printStats() {
  for (void (*collect)() : collectors())
    collect();
  int64_t runs = stats.runSeconds.size(); // the same on every rank

  auto [numLayers, numExperts] = agreedExtents();

  // Per layer: seen and expert count (max), tokens and dropped (sum), seconds
  // per run (max); the entry's seconds per run come last.
  std::vector<int64_t> maxInts(2 * numLayers);
  std::vector<int64_t> sumInts((numExperts + 1) * numLayers);
  std::vector<double> times((numLayers + 1) * runs);
  for (const auto &[id, l] : stats.layers) {
    maxInts[2 * id] = 1;
    maxInts[2 * id + 1] = l.tokens.size();
    std::copy(l.tokens.begin(), l.tokens.end(),
              sumInts.begin() + id * (numExperts + 1));
    sumInts[id * (numExperts + 1) + numExperts] = l.dropped;
    std::copy_n(l.seconds.begin(), std::min<int64_t>(l.seconds.size(), runs),
                times.begin() + id * runs);
  }
  std::copy(stats.runSeconds.begin(), stats.runSeconds.end(),
            times.begin() + numLayers * runs);
  std::vector<double> gemm = {stats.gemmFlops, stats.gemmSeconds};
  reduce(maxInts, MPI_INT64_T, MPI_MAX);
  reduce(sumInts, MPI_INT64_T, MPI_SUM);
  reduce(times, MPI_DOUBLE, MPI_MAX);
  reduce(gemm, MPI_DOUBLE, MPI_SUM);
  // Per rank: the most and the sum, for the slowest rank and the mean.
  std::vector<double> cpuMax = {stats.gemmCpuSeconds},
                      cpuSum = {stats.gemmCpuSeconds};
  reduce(cpuMax, MPI_DOUBLE, MPI_MAX);
  reduce(cpuSum, MPI_DOUBLE, MPI_SUM);
  if (worldRank() != 0 || runs == 0)
    return;

  auto runTimes = [&](int64_t row) {
    return std::vector<double>(times.begin() + row * runs,
                               times.begin() + (row + 1) * runs);
  };
  std::vector<double> entry = runTimes(numLayers);
  std::printf("entry: %lld run%s on %d rank%s, median %.3f ms, min %.3f ms\n",
              static_cast<long long>(runs), runs == 1 ? "" : "s", worldSize(),
              worldSize() == 1 ? "" : "s", median(entry) * 1e3,
              *std::min_element(entry.begin(), entry.end()) * 1e3);
  for (int64_t id = 0; id < numLayers; ++id) {
    if (!maxInts[2 * id])
      continue;
    const int64_t *row = &sumInts[id * (numExperts + 1)];
    std::string tokens;
    for (int64_t e = 0; e < maxInts[2 * id + 1]; ++e)
      tokens += (e ? ", " : "") + perRun(row[e], runs);
    std::printf("layer %lld: tokens per expert [%s], dropped %s, median "
                "%.3f ms\n",
                static_cast<long long>(id), tokens.c_str(),
                perRun(row[numExperts], runs).c_str(),
                median(runTimes(id)) * 1e3);
  }
  if (gemm[1] > 0)
    std::printf("expert GEMM: %.2f GFLOP/s per rank (%.3g GFLOP in %.3f ms "
                "over all ranks and runs)\n",
                gemm[0] / gemm[1] * 1e-9, gemm[0] * 1e-9, gemm[1] * 1e3);
  else
    std::printf("expert GEMM: none\n");
  if (cpuMax[0] > 0)
    std::printf("expert GEMM thread CPU time per run: %.3f ms on the busiest "
                "rank, %.3f ms mean\n",
                cpuMax[0] / runs * 1e3, cpuSum[0] / worldSize() / runs * 1e3);
  std::fflush(stdout);
}
