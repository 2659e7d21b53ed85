//===- Replacement.cpp - moe-run's online re-placement of experts ---------===//

#include "Replacement.h"

#include "llvm/Support/FormatVariadic.h"

#ifdef MOE_RUN_HAVE_CUDA
#include "moert/moert_cuda.h"
#endif

#include <cstdio>
#include <map>

using namespace llvm;
using namespace moe_run;
namespace planner = moe::planner;

static Error failure(const Twine &message) {
  return createStringError(message);
}

Expected<ExpertReplacer>
ExpertReplacer::create(const Manifest &m, const std::vector<char *> &symbols,
                       unsigned every, std::string algorithm) {
  ExpertReplacer r;
  r.every = every;
  r.cuda = m.target == "cuda";
  r.algorithm = std::move(algorithm);
  if (r.algorithm != "ours" && r.algorithm != "eplb")
    return failure("--placement-algorithm: expected ours or eplb, not '" +
                   r.algorithm + "'");
  int64_t ep = 1;
  for (size_t i = 0; i < m.axes.size(); ++i)
    if (m.axes[i] == "ep")
      ep = m.gridShape[i];
  std::map<int64_t, size_t> byId;
  for (size_t i = 0; i < m.weights.size(); ++i) {
    const TensorSpec &w = m.weights[i];
    if (w.slotTableLayer < 0)
      continue;
    int64_t P = w.shape.size() == 1 ? w.shape[0] : -1;
    if (w.type->name != std::string("i32") || P < 1 || P % ep != 0 ||
        w.slotTableExperts < 1 || w.slotTableExperts > P)
      return failure(formatv("the slot table '{0}' of layer {1} is not i32 "
                             "[P] with P a multiple of ep = {2} and at "
                             "least its {3} experts",
                             w.name, w.slotTableLayer, ep,
                             w.slotTableExperts));
    if (!byId.emplace(w.slotTableLayer, r.layers.size()).second)
      return failure(formatv("layer {0} has two slot tables",
                             w.slotTableLayer));
    Layer l;
    l.id = w.slotTableLayer;
    l.table = reinterpret_cast<int32_t *>(symbols[i]);
    std::vector<int32_t> table(l.table, l.table + P);
    if (std::string error = planner::validatePlacement(w.slotTableExperts, ep,
                                                       table, false);
        !error.empty())
      return failure(formatv("the slot table of layer {0}: {1}", l.id, error));
    l.placement = planner::Placement(w.slotTableExperts, ep, std::move(table));
    r.layers.push_back(std::move(l));
  }
  for (size_t i = 0; i < m.weights.size(); ++i) {
    const TensorSpec &w = m.weights[i];
    if (w.slotLayer < 0)
      continue;
    auto it = byId.find(w.slotLayer);
    if (it == byId.end())
      return failure(formatv("weight '{0}' is laid out by the slots of "
                             "layer {1}, which has no slot table",
                             w.name, w.slotLayer));
    Layer &l = r.layers[it->second];
    int64_t S = l.placement.slotsPerRank();
    if (w.shape.empty() || w.shape[0] != S)
      return failure(formatv("weight '{0}' has {1} rows, layer {2} has {3} "
                             "slots per rank",
                             w.name, w.shape.empty() ? 0 : w.shape[0], l.id,
                             S));
    int64_t rowBytes = w.bytes() / S;
    l.buffers.push_back({symbols[i], rowBytes});
    l.bytesPerExpert += rowBytes;
  }
  return r;
}

void ExpertReplacer::moveSlots(Layer &l, const std::vector<int32_t> &to) {
  if (!cuda) {
    moert::migrateSlots(l.placement.slotToExpert(), to, l.buffers);
    return;
  }
#ifdef MOE_RUN_HAVE_CUDA
  std::vector<void *> buffers;
  std::vector<int64_t> rowBytes;
  for (const moert::SlotBuffer &buffer : l.buffers) {
    buffers.push_back(buffer.data);
    rowBytes.push_back(buffer.rowBytes);
  }
  moert_cuda_migrate_slots(l.placement.slotToExpert().data(), to.data(),
                           l.placement.numSlots(), buffers.data(),
                           rowBytes.data(),
                           static_cast<int64_t>(buffers.size()));
#else
  moert::fatal("moe-run: this moe-run has no CUDA runtime");
#endif
}

const planner::Placement *ExpertReplacer::placement(int64_t layer) const {
  for (const Layer &l : layers)
    if (l.id == layer)
      return &l.placement;
  return nullptr;
}

bool ExpertReplacer::afterCalls(uint64_t calls, const Mover &move) {
  if (!enabled() || calls % every != 0)
    return false;
  bool changed = false;
  std::vector<std::vector<int64_t>> totals = moert::layerTokenTotals();
  for (Layer &l : layers) {
    int64_t E = l.placement.numExperts();
    std::vector<double> load(E);
    l.seen.resize(E);
    for (int64_t e = 0; e < E; ++e) {
      int64_t total =
          l.id < static_cast<int64_t>(totals.size()) &&
                  e < static_cast<int64_t>(totals[l.id].size())
              ? totals[l.id][e]
              : 0;
      load[e] = static_cast<double>(total - l.seen[e]);
      l.seen[e] = total;
    }
    planner::Placement next;
    if (algorithm == "eplb") {
      std::string error =
          planner::eplb(load, l.placement.numSlots(), l.placement.numRanks(),
                        /*numGroups=*/1, /*numNodes=*/1, next);
      if (!error.empty())
        moert::fatal("moe-run: EPLB cannot place layer " +
                     std::to_string(l.id) + ": " + error);
    } else {
      planner::MigrationCost cost;
      cost.bytesPerExpert = l.bytesPerExpert;
      next = planner::migrationAwarePlacement(l.placement, load, cost);
    }
    if (l.replans++ == 0)
      l.firstBefore = planner::balancedness(l.placement, load);
    l.lastAfter = planner::balancedness(next, load);
    if (next == l.placement)
      continue;
    ++l.changes;
    l.bytesMoved += planner::bytesMoved(l.placement, next, l.bytesPerExpert);
    changed = true;
    if (move)
      move(l.id, l.placement.slotToExpert(), next.slotToExpert());
    else
      moveSlots(l, next.slotToExpert());
    std::copy(next.slotToExpert().begin(), next.slotToExpert().end(),
              l.table);
#ifdef MOE_RUN_HAVE_CUDA
    if (cuda)
      moert_cuda_update_global(l.table,
                               next.numSlots() * int64_t(sizeof(int32_t)));
#endif
    l.placement = std::move(next);
  }
  return changed;
}

void ExpertReplacer::printSummary() const {
  if (!enabled() || moert::worldRank() != 0)
    return;
  for (const Layer &l : layers) {
    if (l.replans == 0) {
      std::printf("layer %lld: no re-plan (every %u calls)\n",
                  static_cast<long long>(l.id), every);
      continue;
    }
    std::string table;
    for (int32_t e : l.placement.slotToExpert())
      table += (table.empty() ? "" : ", ") + std::to_string(e);
    std::printf("layer %lld: %lld re-plans (%s, every %u calls), %lld "
                "changed the placement, %.0f bytes moved; balancedness "
                "%.3f in the first window as compiled, %.3f in the last as "
                "re-placed; slots [%s]\n",
                static_cast<long long>(l.id),
                static_cast<long long>(l.replans), algorithm.c_str(), every,
                static_cast<long long>(l.changes), l.bytesMoved,
                l.firstBefore, l.lastAfter, table.c_str());
  }
  std::fflush(stdout);
}
