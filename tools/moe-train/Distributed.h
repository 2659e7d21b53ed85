//===- Distributed.h - moe-train on several ranks ---------------*- C++ -*-===//
//
// A partitioned training step runs on every rank of the grid it was
// compiled for, each rank with the whole batch. A parameter is either
// replicated (every rank holds it and gets the same gradient) or cut into
// pieces (an expert weight under expert parallelism: each rank holds and
// updates its piece, with its own optimizer state). What moe-train needs
// beyond one rank: the norm of the gradients counting every element once,
// and the whole parameter gathered from its pieces.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_TRAIN_DISTRIBUTED_H
#define MOE_TRAIN_DISTRIBUTED_H

#include "Manifest.h"

#include "llvm/ADT/ArrayRef.h"

#include <vector>

namespace moe_train {

/// Where this rank's piece of a parameter lies.
struct Placement {
  /// The whole parameter's shape.
  std::vector<int64_t> wholeShape;
  /// Per dimension: where the piece starts in the whole.
  std::vector<int64_t> offsets;
  /// Whether this rank is the lowest of those holding the same piece (the
  /// one that counts it in the gradient norm).
  bool owner = true;
  /// Whether the piece is less than the whole.
  bool sliced = false;
};

/// The placement on `rank` of the weight `spec` of manifest `m`.
Placement placementOf(const moe_run::Manifest &m,
                      const moe_run::TensorSpec &spec, int64_t rank);

/// The 2-norms of every parameter's whole gradient from each rank's norms
/// of its pieces (`owner[i]`: whether this rank counts piece i). Collective.
void combineNorms(std::vector<float> &norms, const std::vector<bool> &owner,
                  const moe_run::Manifest &m);

/// `values` summed over every rank, in place (f32). Collective.
void sumOverWorld(std::vector<float> &values, const moe_run::Manifest &m);

/// The whole parameter (or one of its per-element optimizer states) on
/// rank 0 from every rank's `piece` (fp32) of `spec`; empty on the other
/// ranks. Collective.
std::vector<float> gatherWhole(const moe_run::Manifest &m,
                               const moe_run::TensorSpec &spec,
                               llvm::ArrayRef<float> piece);

/// Copies `piece` (of `localShape`) to where `placement` puts it in
/// `whole`.
void placePiece(std::vector<float> &whole, const float *piece,
                const std::vector<int64_t> &localShape,
                const Placement &placement);

/// This rank's piece, at `placement`, of `whole` (the parameter under any
/// plan: a checkpoint written on other ranks).
std::vector<float> cutPiece(const std::vector<float> &whole,
                            const std::vector<int64_t> &localShape,
                            const Placement &placement);

/// The ranks that hold the same piece of a parameter (every rank, for one
/// that is not cut): under ZeRO-1 each updates a chunk of the piece and
/// keeps the optimizer state of that chunk only.
struct Replicas {
  /// The runtime's code of the grid axes that the replicas span.
  int64_t axes = 0;
  int64_t count = 1;
  /// This rank's position among them.
  int64_t position = 0;

  /// The elements [begin, end) of a piece of `n` that this rank updates.
  std::pair<size_t, size_t> chunk(size_t n) const;
};
Replicas replicasOf(const moe_run::Manifest &m, const moe_run::TensorSpec &spec,
                    int64_t rank);

/// Every replica's chunk of `piece` (n elements), each rank having updated
/// its own: the whole piece on every replica. Collective over the replicas.
void gatherChunks(float *piece, size_t n, const Replicas &replicas);

} // namespace moe_train

#endif // MOE_TRAIN_DISTRIBUTED_H
