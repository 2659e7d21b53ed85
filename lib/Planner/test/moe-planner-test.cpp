//===- moe-planner-test.cpp - Tests of the placement algorithms -----------===//
//
// moe-planner-test              golden and property tests; prints one line
//                               per failed check and "N checks, N failed"
// moe-planner-test time [RANKS EXPERTS]
//                               re-planning time per layer (median of
//                               drifting Zipf loads) for 1 and 2 slots per
//                               rank, default 1024 ranks x 256 experts
//
// Golden vectors: EPLB's README; SmartMoE's greedy on hand cases whose
// results its Python (SmartMoE-AE mapping.py) gives; FasterMoE's rule on
// counts simple enough to follow by hand.
//
//===----------------------------------------------------------------------===//

#include "moe/Planner/Placement.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>

using namespace moe::planner;

namespace {
int checks = 0, failures = 0;

void check(bool ok, const std::string &what) {
  ++checks;
  if (!ok) {
    ++failures;
    std::printf("FAIL: %s\n", what.c_str());
  }
}

std::string str(const std::vector<int32_t> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

void checkSlots(const Placement &p, const std::vector<int32_t> &expected,
                const std::string &what) {
  check(p.slotToExpert() == expected,
        what + ": got " + str(p.slotToExpert()) + ", expected " +
            str(expected));
}

bool near(double a, double b, double tolerance) {
  return std::fabs(a - b) <= tolerance;
}

/// Deterministic pseudo-random numbers (64-bit LCG, high bits).
struct Random {
  uint64_t state;
  explicit Random(uint64_t seed) : state(seed * 2862933555777941757ull + 1) {}
  uint64_t next() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  }
  double uniform() { return static_cast<double>(next()) / 2147483648.0; }
};

/// Zipf loads of skew `s` (expert of popularity rank i gets 1e6 / i^s), in
/// a shuffled expert order.
std::vector<double> zipf(int64_t numExperts, double s, Random &random) {
  std::vector<double> load(numExperts);
  for (int64_t i = 0; i < numExperts; ++i)
    load[i] = 1e6 / std::pow(static_cast<double>(i + 1), s);
  for (int64_t i = numExperts - 1; i > 0; --i)
    std::swap(load[i], load[random.next() % (i + 1)]);
  return load;
}

double maxRankLoad(const Placement &p, const std::vector<double> &load) {
  std::vector<double> loads = rankLoads(p, load);
  return *std::max_element(loads.begin(), loads.end());
}

//===----------------------------------------------------------------------===//
// Golden tests
//===----------------------------------------------------------------------===//

void testPlacement() {
  Placement p = Placement::identity(3, 2, 6);
  checkSlots(p, {0, 1, 2, 0, 1, 2}, "identity");
  check(p.slotsPerRank() == 3 && p.rankOfSlot(4) == 1, "identity shape");
  check(p.replicaCount(0) == 2 && p.replicaSlot(0, 1) == 3, "replicas");
  // The replica rule: a rank holding a replica serves itself (its first
  // one); ranks holding none take the replicas in turn.
  check(p.slotFor(1, 0) == 1 && p.slotFor(1, 1) == 4, "slotFor: local replica");
  Placement r(4, 4, {0, 1, 2, 3, 0, 3, 1, 2});
  check(r.slotFor(0, 0) == 0 && r.slotFor(0, 2) == 4,
        "slotFor: each holder its own replica");
  check(r.slotFor(0, 1) == 0 && r.slotFor(0, 3) == 4,
        "slotFor: non-holders 1 and 3 take replicas 0 and 1");
  check(r.slotFor(1, 0) == 1 && r.slotFor(1, 1) == 1 && r.slotFor(1, 3) == 6,
        "slotFor: expert 1 from ranks 0, 1, 3 " +
            str(std::vector<int32_t>{r.slotFor(1, 0), r.slotFor(1, 1),
                                     r.slotFor(1, 3)}));
  Placement twice(2, 1, {0, 1, 0});
  check(twice.slotFor(0, 0) == 0, "slotFor: the first of two local replicas");
  Placement q(3, 2, {0, 0, 1, 2, 2, 2});
  check(q.expertToSlotTable() ==
            std::vector<int32_t>{0, 1, -1, 2, -1, -1, 3, 4, 5},
        "expertToSlotTable " + str(q.expertToSlotTable()));
  check(q.replicaCounts() == std::vector<int32_t>{2, 1, 3}, "replicaCounts");

  check(validatePlacement(3, 2, {0, 1, 2, 0, 1, 2}, true).empty(), "valid");
  check(validatePlacement(3, 4, {0, 1, 2, 0, 1, 2}, false) ==
            "6 slots do not divide over 4 ranks",
        "invalid: ranks");
  check(validatePlacement(4, 1, {0, 1, 2}, false) ==
            "3 slots cannot hold 4 experts",
        "invalid: too few slots");
  check(validatePlacement(3, 2, {0, 1, 2, 0, 1, 1}, false).empty(),
        "duplicates allowed");
  check(validatePlacement(3, 2, {0, 1, 0, 2, 1, 2}, true) ==
            "rank 0 holds expert 0 twice",
        "invalid: duplicate on a rank");
  check(validatePlacement(3, 2, {0, 1, 1, 0, 1, 0}, false) ==
            "expert 2 has no slot",
        "invalid: expert without slot");
  check(validatePlacement(3, 2, {0, 1, 3, 0, 1, 2}, false) ==
            "slot 2 holds 3, not an expert of 0..2",
        "invalid: not an expert");

  // Metrics: expert 0 (load 6) on both ranks shares 3 + 3.
  Placement m(3, 2, {0, 1, 0, 2});
  std::vector<double> load{6, 2, 4};
  check(rankLoads(m, load) == std::vector<double>{5, 7}, "rankLoads");
  check(near(balancedness(m, load), 6.0 / 7, 1e-12), "balancedness");
  check(balancedness(std::vector<double>{0, 0}) == 1, "balancedness of 0");
  check(maxLoadLowerBound(m, load) == 6, "lower bound (mean)");
  check(maxLoadLowerBound(Placement(3, 2, {0, 1, 2, 2}), {30, 1, 1}) == 30,
        "lower bound (hot expert)");
  // At most 2 copies each: counts 2, 2, 2 and the mean, 7, bounds.
  check(bestMaxLoadLowerBound({12, 1, 1}, 2, 6) == 7, "best bound (mean)");
  // At most 3: counts 3, 2, 1 and 12 / 3 = 4 < 14 / 3.
  check(near(bestMaxLoadLowerBound({12, 1, 1}, 3, 6), 14.0 / 3, 1e-12),
        "best bound (replicas)");
  check(bestMaxLoadLowerBound({12, 1, 1}, 4, 4) == 6,
        "best bound (hot expert)");

  // Rank 1 gains expert 2 (held before on rank 0); rank 0 gains 1.
  Placement from(3, 2, {0, 2, 0, 1}), to(3, 2, {2, 1, 0, 2});
  check(bytesMoved(from, to, 10) == 20, "bytesMoved");
  check(busiestRankBytes(from, to, 10) == 10, "busiestRankBytes");
  check(bytesMoved(from, Placement(3, 2, {2, 0, 1, 0}), 10) == 0,
        "moves within ranks are free");
}

void testSmartMoE() {
  // Expected slot tables from SmartMoE-AE's mapping.py run on the same
  // inputs (its mapping is expert -> slot; these are slot -> expert).
  auto run = [](int64_t ranks, std::vector<int32_t> current,
                std::vector<double> load) {
    int64_t n = static_cast<int64_t>(current.size());
    return smartMoEGreedy(Placement(n, ranks, std::move(current)), load);
  };
  // Same maximum (5): the current mapping stays.
  checkSlots(run(2, {0, 1, 2, 3}, {1, 4, 3, 2}), {0, 1, 2, 3},
             "smartmoe rejects an equal maximum");
  checkSlots(run(2, {0, 1, 2, 3}, {4, 3, 2, 1}), {0, 3, 1, 2},
             "smartmoe greedy");
  // Expert 3 ties ranks 0 and 1 at load 3 and stays on its rank 1.
  checkSlots(run(2, {0, 1, 2, 3}, {3, 3, 0, 0}), {1, 2, 0, 3},
             "smartmoe stickiness");
  // Equal loads go in decreasing id order (expert 2 first).
  checkSlots(run(3, {0, 1, 2, 3, 4, 5}, {1, 1, 1, 0, 0, 0}),
             {1, 4, 2, 3, 0, 5}, "smartmoe ties");
  checkSlots(run(3, {5, 4, 3, 2, 1, 0}, {1, 2, 3, 4, 5, 6}),
             {5, 0, 4, 1, 3, 2}, "smartmoe from a permutation");
}

void testEplb() {
  // deepseek-ai/EPLB README: 2 layers, 12 experts in 4 groups, 16 slots,
  // 2 nodes, 8 GPUs.
  std::vector<std::vector<double>> weight{
      {90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86},
      {20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27}};
  std::vector<std::vector<int32_t>> expected{
      {5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1},
      {7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1}};
  double expectedBalance[] = {0.828, 0.805};
  for (size_t layer = 0; layer < 2; ++layer) {
    Placement p;
    std::string error = eplb(weight[layer], 16, 8, 4, 2, p);
    check(error.empty(), "eplb: " + error);
    checkSlots(p, expected[layer],
               "eplb README layer " + std::to_string(layer));
    check(near(balancedness(p, weight[layer]), expectedBalance[layer], 5e-4),
          "eplb README balancedness " + std::to_string(layer));
  }
  // Groups that do not divide over the nodes: the global policy (one group
  // on one node) whatever E % groups is.
  Placement global, oneGroup;
  check(eplb(weight[0], 16, 8, 5, 2, global).empty(), "eplb global");
  check(eplb(weight[0], 16, 8, 1, 1, oneGroup).empty(), "eplb one group");
  check(global == oneGroup, "eplb falls back to the global policy");
  Placement unused;
  check(eplb(weight[0], 16, 8, 8, 2, unused) ==
            "12 experts do not form 8 groups",
        "eplb: groups");
  check(eplb(weight[0], 16, 6, 4, 4, unused) ==
            "6 ranks do not divide over 4 nodes",
        "eplb: nodes");
  check(eplb(weight[0], 12, 8, 4, 2, unused) ==
            "12 slots do not divide over 8 ranks",
        "eplb: slots");
  check(eplb(weight[0], 8, 8, 4, 2, unused) == "8 slots cannot hold 12 experts",
        "eplb: too few slots");
}

void testFasterMoE() {
  // Times per unit: feature 1, model 2, compute 1: latency 7 B + shadows.
  ShadowModel unit{1, 1, 1, 4, 1};
  auto shadows = [&](std::vector<double> load) {
    std::vector<bool> flags = fasterMoEShadows(load, unit);
    std::vector<int32_t> chosen;
    for (size_t e = 0; e < flags.size(); ++e)
      if (flags[e])
        chosen.push_back(static_cast<int32_t>(e));
    return chosen;
  };
  // 70 -> 7*5 + 2 = 37 (shadow 0) -> 7*5 + 4 = 39, no gain: stop.
  check(shadows({10, 1, 5, 5}) == std::vector<int32_t>{0}, "shadow one");
  // 70 -> 63 + 2 -> 7 + 4 = 11 -> 7 + 6 = 13: shadow 0 and 1.
  check(shadows({10, 9, 1, 1}) == std::vector<int32_t>{0, 1}, "shadow two");
  // 35 -> 35 + 2 is no gain.
  check(shadows({5, 5}).empty(), "shadow none");
  check(shadows({7}).empty(), "one expert is never shadowed");
  check(fasterMoELatency({10, 9, 1, 1}, 2, unit) == 11, "shadow latency");
  check(fasterMoELatency({10, 9, 1, 1}, 0, unit) == 70, "plain latency");
  // The source's defaults: H = 2048, 2 H hidden, 6.25 GB/s, 11.5 TFLOP/s.
  ShadowModel defaults;
  double model = 2 * 2.0 * 2048 * 2048 * 4 / (50e9 / 8);
  check(near(fasterMoELatency({4096, 0}, 1, defaults), model, 1e-12),
        "shadow defaults");
}

void testMigrationAware() {
  // Expert 2, alone on rank 0, is hot: ours gives it two copies (91 and 6
  // tokens -> 48.5 each, the mean).
  Placement current = Placement::identity(4, 2, 6);
  std::vector<double> load{1, 1, 90, 5};
  Placement p = migrationAwarePlacement(current, load);
  check(validatePlacement(4, 2, p.slotToExpert(), true).empty(),
        "ours is valid: " + str(p.slotToExpert()));
  check(p.replicaCount(2) == 2 && maxRankLoad(p, load) == 48.5,
        "ours replicates the hot expert: " + str(p.slotToExpert()));
  // Nothing to gain: the same placement.
  check(migrationAwarePlacement(p, load) == p, "ours is stable");
  // 1 s per expert moved against 45 us gained: no change...
  MigrationCost dear{1e-6, 1e9, 1e9, 1};
  check(migrationAwarePlacement(current, load, dear) == current,
        "ours keeps a placement whose change does not pay");
  // ...1 ms against 45 ms: the change.
  MigrationCost cheap{1e-3, 1e6, 1e9, 1};
  check(migrationAwarePlacement(current, load, cheap) == p,
        "ours moves when it pays");
  // Experts that stay on a rank keep their local slots.
  Placement before(4, 2, {3, 0, 1, 2});
  Placement after = migrationAwarePlacement(before, {10, 1, 1, 10});
  check(after.expertAt(0) == 3 || after.expertAt(1) == 0,
        "ours keeps local slots: " + str(after.slotToExpert()));
  // A current placement with duplicates on a rank (EPLB's) is repaired.
  Placement duplicated(3, 2, {0, 0, 1, 2});
  Placement fixed = migrationAwarePlacement(duplicated, {5, 5, 5});
  check(validatePlacement(3, 2, fixed.slotToExpert(), true).empty(),
        "ours from duplicates: " + str(fixed.slotToExpert()));
}

//===----------------------------------------------------------------------===//
// Property tests
//===----------------------------------------------------------------------===//

/// Worst maximum rank load over the bound of section 1, per algorithm.
struct Worst {
  const char *name;
  double ratio = 1;
};

void testProperties() {
  Worst worst[] = {{"static"}, {"smartmoe"}, {"eplb"}, {"ours"}};
  int64_t cases = 0;
  Random random(1);
  for (double skew : {0.0, 0.5, 1.0, 1.5, 2.0})
    for (int64_t experts : {8, 32, 128, 512})
      for (int64_t ranks : {2, 8, 64, 1024})
        for (int64_t extra : {0, 1, 2}) {
          int64_t perRank = (experts + ranks - 1) / ranks + extra;
          int64_t slots = ranks * perRank;
          if (slots > experts * ranks)
            continue;
          ++cases;
          std::string name = "skew " + std::to_string(skew) + " E " +
                             std::to_string(experts) + " R " +
                             std::to_string(ranks) + " P " +
                             std::to_string(slots);
          std::vector<double> load = zipf(experts, skew, random);
          double bound = bestMaxLoadLowerBound(load, ranks, slots);
          Placement start = Placement::identity(experts, ranks, slots);
          Placement plans[4];
          plans[0] = start;
          plans[1] = slots == experts ? smartMoEGreedy(start, load) : start;
          std::string error = eplb(load, slots, ranks, 1, 1, plans[2]);
          check(error.empty(), name + ": eplb: " + error);
          plans[3] = migrationAwarePlacement(start, load);
          for (int a = 0; a < 4; ++a) {
            bool distinct = a != 2; // EPLB may repeat an expert on a rank
            std::string v = validatePlacement(experts, ranks,
                                              plans[a].slotToExpert(), distinct);
            check(v.empty(), name + ": " + worst[a].name + ": " + v);
            if (!v.empty())
              continue;
            double most = maxRankLoad(plans[a], load);
            // No placement beats the bound; report how far each is.
            check(most >= bound * (1 - 1e-12),
                  name + ": " + worst[a].name + " below the bound");
            worst[a].ratio = std::max(worst[a].ratio, most / bound);
          }
          double ours = maxRankLoad(plans[3], load);
          check(ours <= maxRankLoad(start, load),
                name + ": ours worse than where it started");
          // One slot per rank: the min-max replica counts reach the bound.
          if (perRank == 1)
            check(near(ours, bound, bound * 1e-12), name + ": ours off the bound");
          check(migrationAwarePlacement(start, load) == plans[3] &&
                    (slots != experts ||
                     smartMoEGreedy(start, load) == plans[1]),
                name + ": not deterministic");
        }
  std::printf("property cases: %lld; worst max rank load / bound:",
              static_cast<long long>(cases));
  for (const Worst &w : worst)
    std::printf(" %s %.3f", w.name, w.ratio);
  std::printf("\n");
}

/// Loads that change from step to step: ours re-plans from where it is and
/// spends less time than EPLB, which starts from scratch, on expert compute
/// and migration together, moving fewer experts. Moving an expert costs
/// 10 ms, a token 1 us (a step some 0.3 s on the busiest rank).
void testDrift() {
  MigrationCost cost{1e-6, 1e7, 1e9, 1};
  Random random(7);
  int64_t experts = 64, ranks = 16, slots = 96;
  std::vector<double> load = zipf(experts, 1.2, random);
  Placement ours = Placement::identity(experts, ranks, slots), theirs = ours;
  double oursMoved = 0, theirsMoved = 0, oursTime = 0, theirsTime = 0;
  for (int step = 0; step < 50; ++step) {
    // Plans from this step's load serve the next one.
    Placement next = migrationAwarePlacement(ours, load, cost);
    Placement eplbNext;
    eplb(load, slots, ranks, 1, 1, eplbNext);
    for (double &l : load)
      l *= 0.9 + 0.2 * random.uniform();
    oursMoved += bytesMoved(ours, next, 1);
    theirsMoved += bytesMoved(theirs, eplbNext, 1);
    oursTime += busiestRankBytes(ours, next, cost.bytesPerExpert) /
                    cost.bytesPerSecond +
                maxRankLoad(next, load) * cost.secondsPerToken;
    theirsTime += busiestRankBytes(theirs, eplbNext, cost.bytesPerExpert) /
                      cost.bytesPerSecond +
                  maxRankLoad(eplbNext, load) * cost.secondsPerToken;
    ours = next;
    theirs = eplbNext;
  }
  check(oursMoved < theirsMoved,
        "drift: ours moved " + std::to_string(oursMoved) + " experts, eplb " +
            std::to_string(theirsMoved));
  check(oursTime < theirsTime, "drift: ours took " + std::to_string(oursTime) +
                                   " s, eplb " + std::to_string(theirsTime));
  std::printf("drift: experts moved ours %.0f eplb %.0f; time ours %.2f s "
              "eplb %.2f s\n",
              oursMoved, theirsMoved, oursTime, theirsTime);
}

//===----------------------------------------------------------------------===//
// Timing
//===----------------------------------------------------------------------===//

int timeReplanning(int64_t ranks, int64_t experts) {
  Random random(3);
  for (int64_t perRank : {1, 2}) {
    int64_t slots = ranks * perRank;
    if (slots < experts)
      continue;
    std::vector<double> load = zipf(experts, 1.0, random);
    // One untimed re-plan first: the first touch of the memory.
    Placement current = migrationAwarePlacement(
        Placement::identity(experts, ranks, slots), load);
    std::vector<double> micros;
    for (int i = 0; i < 40; ++i) {
      for (double &l : load)
        l *= 0.9 + 0.2 * random.uniform();
      auto begin = std::chrono::steady_clock::now();
      current = migrationAwarePlacement(current, load);
      auto end = std::chrono::steady_clock::now();
      micros.push_back(
          std::chrono::duration<double, std::micro>(end - begin).count());
    }
    std::sort(micros.begin(), micros.end());
    std::printf("ours: %lld ranks x %lld experts, %lld slots: median %.0f us, "
                "max %.0f us per layer (40 re-plans of drifting Zipf loads, "
                "skew 1)\n",
                static_cast<long long>(ranks), static_cast<long long>(experts),
                static_cast<long long>(slots), micros[micros.size() / 2],
                micros.back());
  }
  return 0;
}
} // namespace

int main(int argc, char **argv) {
  if (argc >= 2 && std::strcmp(argv[1], "time") == 0)
    return timeReplanning(argc >= 3 ? std::atoll(argv[2]) : 1024,
                          argc >= 4 ? std::atoll(argv[3]) : 256);
  if (argc != 1) {
    std::fprintf(stderr, "usage: moe-planner-test [time [RANKS EXPERTS]]\n");
    return 2;
  }
  testPlacement();
  testSmartMoE();
  testEplb();
  testFasterMoE();
  testMigrationAware();
  testProperties();
  testDrift();
  std::printf("%d checks, %d failed\n", checks, failures);
  return failures ? 1 : 0;
}
