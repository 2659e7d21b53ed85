//===- Packing.cpp - Replica counts and packing for the planners ----------===//

#include "Packing.h"

#include <algorithm>
#include <numeric>
#include <queue>

using namespace moe::planner;
using namespace moe::planner::detail;

std::vector<int32_t> detail::apportion(const std::vector<double> &load,
                                       int64_t numSlots, int64_t maxCopies) {
  int64_t numExperts = static_cast<int64_t>(load.size());
  std::vector<int32_t> counts(numExperts, 1);
  // The largest load per replica on top, the lowest id on ties.
  struct Entry {
    double perReplica;
    int32_t expert;
    bool operator<(const Entry &o) const {
      return perReplica < o.perReplica ||
             (perReplica == o.perReplica && expert > o.expert);
    }
  };
  std::priority_queue<Entry> heap;
  for (int32_t e = 0; e < numExperts; ++e)
    if (maxCopies > 1)
      heap.push({load[e], e});
  for (int64_t slot = numExperts; slot < numSlots && !heap.empty(); ++slot) {
    int32_t e = heap.top().expert;
    heap.pop();
    if (++counts[e] < maxCopies)
      heap.push({load[e] / counts[e], e});
  }
  return counts;
}

namespace {
/// Ranks by load, the least loaded (then the lowest) on top, with each
/// rank's place in the heap so that a rank whose load grows sinks in place.
/// Loads are copied into the entries: comparisons read no other memory.
class RankHeap {
public:
  RankHeap(const std::vector<double> &loads, int64_t numRanks)
      : loads(loads), place(numRanks, -1) {}

  bool empty() const { return heap.empty(); }
  int64_t top() const { return heap.front().rank; }
  void push(int64_t rank) {
    place[rank] = static_cast<int64_t>(heap.size());
    heap.push_back({loads[rank], rank});
    up(place[rank]);
  }
  void remove(int64_t rank) {
    int64_t i = place[rank];
    Entry last = heap.back();
    heap.pop_back();
    place[rank] = -1;
    if (i < static_cast<int64_t>(heap.size())) {
      heap[i] = last;
      place[last.rank] = i;
      down(i);
      up(place[last.rank]);
    }
  }
  /// `rank`'s load grew.
  void grew(int64_t rank) {
    heap[place[rank]].load = loads[rank];
    down(place[rank]);
  }

private:
  struct Entry {
    double load;
    int64_t rank;
    bool operator<(const Entry &o) const {
      return load < o.load || (load == o.load && rank < o.rank);
    }
  };
  void set(int64_t i, Entry e) {
    heap[i] = e;
    place[e.rank] = i;
  }
  void up(int64_t i) {
    Entry moving = heap[i];
    while (i > 0 && moving < heap[(i - 1) / 2]) {
      set(i, heap[(i - 1) / 2]);
      i = (i - 1) / 2;
    }
    set(i, moving);
  }
  void down(int64_t i) {
    int64_t n = static_cast<int64_t>(heap.size());
    Entry moving = heap[i];
    for (;;) {
      int64_t child = 2 * i + 1;
      if (child >= n)
        break;
      if (child + 1 < n && heap[child + 1] < heap[child])
        ++child;
      if (!(heap[child] < moving))
        break;
      set(i, heap[child]);
      i = child;
    }
    set(i, moving);
  }

  const std::vector<double> &loads;
  std::vector<Entry> heap;
  std::vector<int64_t> place;
};
} // namespace

Packer::Packer(const std::vector<double> &load, int64_t numRanks,
               int64_t slotsPerRank)
    : load(load), ranks(numRanks), perRank(slotsPerRank) {}

void Packer::setCurrent(const Placement &current) {
  // Each expert's ranks, once each, ascending.
  int64_t numExperts = current.numExperts();
  currentBegin.assign(numExperts + 1, 0);
  currentRanks.clear();
  for (int32_t e = 0; e < numExperts; ++e) {
    int64_t last = -1;
    for (int64_t r = 0; r < current.replicaCount(e); ++r) {
      int64_t g = current.rankOfSlot(current.replicaSlot(e, r));
      if (g != last)
        currentRanks.push_back(static_cast<int32_t>(g));
      last = g;
    }
    currentBegin[e + 1] = static_cast<int64_t>(currentRanks.size());
  }
}

void Packer::place(Packing &packing, int64_t rank, int32_t expert,
                   double size) {
  packing.experts[rank * perRank + filled[rank]++] = expert;
  packing.loads[rank] += size;
  lastExpert[rank] = expert;
}

// Every rank with a free slot already holds `expert`: a full rank without
// it gives one of its experts to the least-loaded of those and takes the
// replica instead. Such a rank and expert exist while counts[e] <= ranks (a
// rank with a free slot holds at most S - 1 experts, one of them `expert`).
bool Packer::placeByRepair(Packing &packing, int32_t expert, double size) {
  int64_t open = -1;
  for (int64_t g = 0; g < ranks; ++g)
    if (filled[g] < perRank &&
        (open < 0 || packing.loads[g] < packing.loads[open]))
      open = g;
  if (open < 0)
    return false;
  auto holds = [&](int64_t g, int32_t e) {
    const int32_t *first = &packing.experts[g * perRank];
    return std::find(first, first + filled[g], e) != first + filled[g];
  };
  for (int64_t g = 0; g < ranks; ++g) {
    if (filled[g] < perRank || holds(g, expert))
      continue;
    for (int64_t k = 0; k < perRank; ++k) {
      int32_t &given = packing.experts[g * perRank + k];
      if (holds(open, given))
        continue;
      int32_t moved = given;
      given = expert;
      packing.loads[g] += size - sizes[moved];
      lastExpert[g] = expert;
      place(packing, open, moved, sizes[moved]);
      lastExpert[open] = expert; // it still holds `expert`
      return true;
    }
  }
  return false;
}

Packing Packer::pack(const std::vector<int32_t> &counts, bool sticky,
                     double stickyLimit) {
  int64_t numExperts = static_cast<int64_t>(load.size());
  Packing out;
  out.experts.assign(ranks * perRank, -1);
  out.loads.assign(ranks, 0.0);
  filled.assign(ranks, 0);
  lastExpert.assign(ranks, -1);
  sizes.resize(numExperts);
  order.resize(numExperts);
  for (int32_t e = 0; e < numExperts; ++e) {
    sizes[e] = load[e] / counts[e];
    order[e] = e;
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return sizes[a] > sizes[b] || (sizes[a] == sizes[b] && a < b);
  });

  // Ranks with a free slot: those still empty (all of load 0) in rank
  // order, the others in a heap that a full one leaves. With one slot per
  // rank, or in the first round, no heap work at all.
  RankHeap heap(out.loads, ranks);
  int64_t nextEmpty = 0;
  auto firstEmpty = [&] {
    while (nextEmpty < ranks && filled[nextEmpty] > 0)
      ++nextEmpty;
    return nextEmpty;
  };
  // The least-loaded rank with a free slot, -1 when none.
  auto leastLoaded = [&]() -> int64_t {
    int64_t empty = firstEmpty();
    if (heap.empty())
      return empty < ranks ? empty : -1;
    int64_t g = heap.top();
    if (empty < ranks && (out.loads[g] > 0 || (out.loads[g] == 0 && empty < g)))
      return empty;
    return g;
  };
  auto placeIn = [&](int64_t g, int32_t e, double size) {
    bool wasEmpty = filled[g] == 0;
    place(out, g, e, size);
    if (wasEmpty) {
      if (filled[g] < perRank)
        heap.push(g);
    } else if (filled[g] == perRank) {
      heap.remove(g);
    } else {
      heap.grew(g);
    }
  };
  std::vector<int64_t> holders, candidates;

  for (int32_t e : order) {
    double size = sizes[e];
    int64_t left = counts[e];
    if (sticky) {
      candidates.clear();
      for (int64_t i = currentBegin[e]; i < currentBegin[e + 1]; ++i)
        if (filled[currentRanks[i]] < perRank)
          candidates.push_back(currentRanks[i]);
      std::sort(candidates.begin(), candidates.end(), [&](int64_t a, int64_t b) {
        return out.loads[a] < out.loads[b] ||
               (out.loads[a] == out.loads[b] && a < b);
      });
      for (int64_t g : candidates) {
        if (left == 0 || out.loads[g] + size > stickyLimit)
          break;
        placeIn(g, e, size);
        --left;
      }
    }
    // A replica's copies come one after another, so a rank holds `e` when
    // `e` is the last expert it took; such ranks wait outside the heap.
    holders.clear();
    while (left > 0) {
      int64_t g = leastLoaded();
      if (g < 0) {
        if (!placeByRepair(out, e, size))
          break;
        --left;
        continue;
      }
      if (lastExpert[g] == e) {
        heap.remove(g);
        holders.push_back(g);
        continue;
      }
      placeIn(g, e, size);
      --left;
    }
    for (int64_t g : holders)
      if (filled[g] < perRank)
        heap.push(g);
  }
  out.maxLoad = *std::max_element(out.loads.begin(), out.loads.end());
  return out;
}

int64_t Transfers::total() const {
  int64_t sum = 0;
  for (int64_t r : received)
    sum += r;
  return sum;
}

int64_t Transfers::busiest() const {
  int64_t most = 0;
  for (size_t g = 0; g < received.size(); ++g)
    most = std::max({most, received[g], sent[g]});
  return most;
}

Transfers detail::countTransfers(const Placement &from,
                                 const std::vector<int32_t> &to) {
  int64_t perRank = from.slotsPerRank();
  Transfers t{std::vector<int64_t>(from.numRanks(), 0),
              std::vector<int64_t>(from.numRanks(), 0)};
  std::vector<int64_t> turn(from.numExperts(), 0);
  std::vector<int32_t> before, after;
  for (int64_t g = 0; g < from.numRanks(); ++g) {
    const int32_t *old = from.slotToExpert().data() + g * perRank;
    before.assign(old, old + perRank);
    after.assign(to.begin() + g * perRank, to.begin() + (g + 1) * perRank);
    std::sort(before.begin(), before.end());
    std::sort(after.begin(), after.end());
    after.erase(std::unique(after.begin(), after.end()), after.end());
    for (int32_t e : after) {
      if (std::binary_search(before.begin(), before.end(), e))
        continue;
      ++t.received[g];
      int64_t replica = turn[e]++ % from.replicaCount(e);
      ++t.sent[from.rankOfSlot(from.replicaSlot(e, replica))];
    }
  }
  return t;
}
