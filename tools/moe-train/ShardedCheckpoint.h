//===- ShardedCheckpoint.h - a checkpoint written by every rank -*- C++ -*-===//
//
// A training step on several ranks checkpoints in parallel: each rank
// writes the pieces it is the first holder of as an ordinary checkpoint
// (moert/Train.h) in DIR/rank-R, and rank 0 writes DIR/plan.json, which
// records the grid the step ran on and where each piece lies in its
// parameter. Reading puts every parameter and optimizer state back
// together whole, so that a rank of any other plan cuts its own piece.
// DIR is replaced in one rename once every rank has written its part.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_TRAIN_SHARDEDCHECKPOINT_H
#define MOE_TRAIN_SHARDEDCHECKPOINT_H

#include "Distributed.h"
#include "Manifest.h"

#include "llvm/ADT/ArrayRef.h"

#include "moert/Train.h"

#include <string>
#include <vector>

namespace moe_train {

/// One parameter as this rank holds it: its piece (weights and optimizer
/// state, whole over the piece) and the manifest weight that places it.
struct HeldParam {
  std::string name;
  const moe_run::TensorSpec *spec;
  llvm::ArrayRef<float> master;
  const moert::train::ParamState *state;
};

/// Writes the sharded checkpoint DIR. Collective; a rank that cannot write
/// its part ends every rank with the error (moert::failIfAnyRank).
void saveSharded(const std::string &dir, const moe_run::Manifest &m,
                        const std::vector<HeldParam> &params, int64_t step,
                        int64_t samplesConsumed,
                        const moert::train::OptimizerConfig &config,
                        const moert::train::Schedule &schedule);

/// Whether DIR holds a sharded checkpoint (its plan.json).
bool isSharded(const std::string &dir);

/// Reads the sharded checkpoint DIR with every parameter and state whole.
std::string loadSharded(const std::string &dir,
                        moert::train::LoadedCheckpoint &out);

} // namespace moe_train

#endif // MOE_TRAIN_SHARDEDCHECKPOINT_H
