//===- Slots.h - moe-train with experts on slots ----------------*- C++ -*-===//
//
// A step compiled with --redundant-per-rank trains each expert weight as
// the rows of this rank's slots. Replicas of an expert get a part of its
// gradient each: summed over the replicas before the optimizer
// (moert::sumReplicaRows), so that every replica takes the same update and
// stays identical. The gradient norm counts each expert once (its first
// replica), and the weights written at the end are per expert. Between
// steps the placement may change (ExpertReplacer): masters and optimizer
// state move with their slots. Checkpoints hold the weights per expert, so
// that they resume under any placement or plan.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_TRAIN_SLOTS_H
#define MOE_TRAIN_SLOTS_H

#include "moe/Planner/Placement.h"

#include <cstdint>
#include <vector>

namespace moe_train {

/// The 2-norm of the rows of `grad` (this rank's slots, `rowElems` floats
/// each, the first of them slot `firstSlot`) whose slot is the first of its
/// expert's replicas: together over the ranks, each expert counted once.
float firstReplicaNorm(const float *grad, int64_t rowElems, int64_t firstSlot,
                       const moe::planner::Placement &placement);

/// The weight per expert, [E, ...], from the whole weight per slot
/// ([P, ...], `rowElems` floats per slot): each expert's first replica.
std::vector<float> expertsFromSlots(const std::vector<float> &slots,
                                    int64_t rowElems,
                                    const moe::planner::Placement &placement);

/// The inverse: the whole weight per slot from the weight per expert, each
/// slot its expert's row under `placement` (a checkpoint resumed on slots).
std::vector<float> slotsFromExperts(const std::vector<float> &experts,
                                    int64_t rowElems,
                                    const moe::planner::Placement &placement);

} // namespace moe_train

#endif // MOE_TRAIN_SLOTS_H
