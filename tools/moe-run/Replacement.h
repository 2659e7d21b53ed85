//===- Replacement.h - moe-run's online re-placement of experts -*- C++ -*-===//
//
// A bundle compiled with --redundant-per-rank holds each MoE layer's
// slot -> expert table and its slot-laid weights in buffers of the library.
// Every K calls, the runner takes the tokens each expert received in those
// calls (summed over the ranks, so every rank plans the same), plans a new
// placement with the planner library, moves the weights between the ranks
// of EP (moert::migrateSlots) and rewrites the table. The program never
// changes: the next call reads the new table.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_RUN_REPLACEMENT_H
#define MOE_RUN_REPLACEMENT_H

#include "Manifest.h"

#include "moe/Planner/Placement.h"
#include "moert/Runtime.h"

#include "llvm/Support/Error.h"

#include <functional>
#include <string>
#include <vector>

namespace moe_run {

class ExpertReplacer {
public:
  /// The layers of `m` whose tables are among `symbols` (the weights'
  /// buffers, in manifest order); `every` calls between re-plans (0:
  /// never); `algorithm` is "ours" or "eplb".
  static llvm::Expected<ExpertReplacer>
  create(const Manifest &m, const std::vector<char *> &symbols,
         unsigned every, std::string algorithm);

  bool enabled() const { return every > 0 && !layers.empty(); }
  /// Whether the bundle has slot tables (re-placed or not).
  bool hasSlots() const { return !layers.empty(); }

  /// Moves what a layer holds per slot from placement `from` to `to`
  /// (collective over EP); the default moves the bundle's slot-laid weights.
  using Mover = std::function<void(int64_t layer,
                                   const std::vector<int32_t> &from,
                                   const std::vector<int32_t> &to)>;
  /// Collective: after `calls` calls (or steps), re-places every K-th time;
  /// returns whether any layer changed.
  bool afterCalls(uint64_t calls, const Mover &move = nullptr);
  /// Layer `layer`'s placement now; null for a layer without slots.
  const moe::planner::Placement *placement(int64_t layer) const;
  /// The token counts restart (moert::resetStats): so does the window.
  void restartWindow() {
    for (Layer &l : layers)
      l.seen.assign(l.seen.size(), 0);
  }
  /// What the re-plans did, on rank 0 (moe-run --stats).
  void printSummary() const;

private:
  struct Layer {
    int64_t id = 0;
    moe::planner::Placement placement;
    int32_t *table = nullptr;
    std::vector<moert::SlotBuffer> buffers;
    double bytesPerExpert = 0;
    /// Totals at the last re-plan, to take the window's loads from.
    std::vector<int64_t> seen;
    int64_t replans = 0, changes = 0;
    double bytesMoved = 0;
    /// Balancedness (mean / max rank load) of the first window as compiled
    /// and of the last window as re-placed for it.
    double firstBefore = 0, lastAfter = 0;
  };
  /// Moves the slots' rows from the layer's placement to `to`.
  void moveSlots(Layer &l, const std::vector<int32_t> &to);

  std::vector<Layer> layers;
  /// A CUDA bundle's weights are read from their device copies, which
  /// move over NCCL.
  bool cuda = false;
  unsigned every = 0;
  std::string algorithm;
};

} // namespace moe_run

#endif // MOE_RUN_REPLACEMENT_H
