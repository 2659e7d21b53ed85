//===- Replay.cpp - Placement algorithms replayed on a load trace ---------===//

#include "Replay.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <chrono>
#include <functional>

using namespace moe_plan;
using moe::planner::Placement;

static llvm::Error replayError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

int64_t moe_plan::replaySlots(const LoadTrace &trace,
                              const ReplayOptions &options) {
  return trace.experts + options.ranks * options.redundantPerRank;
}

double AlgorithmReplay::bytesAt(int64_t replan) const {
  double sum = 0;
  for (const std::vector<double> &layer : bytes)
    sum += layer[replan];
  return sum;
}

double AlgorithmReplay::bytesPerReplan() const {
  double sum = 0;
  for (int64_t r = 0; r < replans(); ++r)
    sum += bytesAt(r);
  return sum / static_cast<double>(replans());
}

double moe_plan::median(std::vector<double> values) {
  size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  double upper = values[mid];
  if (values.size() % 2)
    return upper;
  return (upper + *std::max_element(values.begin(), values.begin() + mid)) / 2;
}

double moe_plan::minimum(const std::vector<double> &values) {
  return *std::min_element(values.begin(), values.end());
}

double moe_plan::mean(const std::vector<double> &values) {
  double sum = 0;
  for (double v : values)
    sum += v;
  return sum / static_cast<double>(values.size());
}

std::vector<double> moe_plan::allBalance(const AlgorithmReplay &a) {
  std::vector<double> all;
  for (const std::vector<double> &layer : a.balance)
    all.insert(all.end(), layer.begin(), layer.end());
  return all;
}

namespace {
/// One algorithm: the next placement from the current one and the window's
/// loads.
using Planner = std::function<llvm::Expected<Placement>(
    const Placement &, const std::vector<double> &)>;

llvm::Expected<AlgorithmReplay> replayOne(const std::string &name,
                                          const Planner &plan,
                                          const LoadTrace &trace,
                                          const ReplayOptions &options) {
  int64_t k = options.replanEvery, slots = replaySlots(trace, options);
  AlgorithmReplay result{name, {}, {}, {}, 0};
  result.balance.resize(trace.layers);
  result.bytes.resize(trace.layers);
  std::vector<double> window(trace.experts);
  for (int64_t l = 0; l < trace.layers; ++l) {
    Placement current =
        Placement::identity(trace.experts, options.ranks, slots);
    for (int64_t begin = k; begin < trace.records; begin += k) {
      std::fill(window.begin(), window.end(), 0.0);
      for (int64_t t = begin - k; t < begin; ++t)
        for (int64_t e = 0; e < trace.experts; ++e)
          window[e] += trace.at(t, l)[e];
      auto start = std::chrono::steady_clock::now();
      llvm::Expected<Placement> next = plan(current, window);
      result.planSeconds += std::chrono::duration<double>(
                                std::chrono::steady_clock::now() - start)
                                .count();
      if (!next)
        return next.takeError();
      result.bytes[l].push_back(moe::planner::bytesMoved(
          current, *next, options.cost.bytesPerExpert));
      current = std::move(*next);
      int64_t end = std::min(begin + k, trace.records);
      for (int64_t t = begin; t < end; ++t) {
        std::vector<double> load(trace.at(t, l), trace.at(t, l) + trace.experts);
        result.balance[l].push_back(moe::planner::balancedness(current, load));
      }
    }
    result.last.push_back(std::move(current));
  }
  return result;
}
} // namespace

llvm::Expected<std::vector<AlgorithmReplay>>
moe_plan::replay(const LoadTrace &trace, const ReplayOptions &options) {
  int64_t slots = replaySlots(trace, options);
  if (options.ranks < 1 || options.redundantPerRank < 0 ||
      options.replanEvery < 1)
    return replayError("--ep and --replan-every must be at least 1, "
                       "--redundant-per-rank at least 0");
  if (slots % options.ranks != 0)
    return replayError(llvm::formatv(
        "{0} experts and {1} redundant slots per rank make {2} slots, which "
        "do not divide over --ep {3} ranks (--ep must divide the {0} experts)",
        trace.experts, options.redundantPerRank, slots, options.ranks));
  if (slots > trace.experts * options.ranks)
    return replayError(llvm::formatv(
        "{0} slots on {1} ranks would hold some expert twice on a rank "
        "(at most {2} redundant slots per rank for {3} experts)",
        slots, options.ranks, trace.experts - trace.experts / options.ranks,
        trace.experts));
  if (trace.records <= options.replanEvery)
    return replayError(llvm::formatv(
        "the trace has {0} records: re-planning every {1} needs more",
        trace.records, options.replanEvery));

  std::vector<std::pair<std::string, Planner>> planners;
  planners.emplace_back("static", [](const Placement &p,
                                     const std::vector<double> &) {
    return llvm::Expected<Placement>(p);
  });
  // SmartMoE permutes experts over as many slots; it has no replicas.
  if (slots == trace.experts)
    planners.emplace_back("smartmoe", [](const Placement &p,
                                         const std::vector<double> &load) {
      return llvm::Expected<Placement>(moe::planner::smartMoEGreedy(p, load));
    });
  planners.emplace_back(
      "eplb", [&](const Placement &p,
                  const std::vector<double> &load) -> llvm::Expected<Placement> {
        Placement next;
        std::string error =
            moe::planner::eplb(load, p.numSlots(), p.numRanks(), 1, 1, next);
        if (!error.empty())
          return replayError("eplb: " + error);
        return next;
      });
  planners.emplace_back("ours", [&](const Placement &p,
                                    const std::vector<double> &load) {
    return llvm::Expected<Placement>(
        moe::planner::migrationAwarePlacement(p, load, options.cost));
  });

  std::vector<AlgorithmReplay> results;
  for (const auto &[name, plan] : planners) {
    llvm::Expected<AlgorithmReplay> one = replayOne(name, plan, trace, options);
    if (!one)
      return one.takeError();
    results.push_back(std::move(*one));
  }
  return results;
}
