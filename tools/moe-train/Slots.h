//===- Slots.h - moe-train with experts on slots ----------------*- C++ -*-===//
//
// A step compiled with --redundant-per-rank trains each expert weight as
// the rows of this rank's slots. The step itself gives every replica the
// whole gradient of its expert, the same bits as one copy serving every
// rank (moe.slot_grad_sum), so replicas take the same update and stay
// identical. The gradient norm counts each expert once, summed per expert
// in expert order so that no placement changes its bits, and the weights
// written at the end are per expert. Between
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

/// Each expert's gradient norm (the 2-norm of its slot row, `rowElems`
/// floats) where this rank's slots (`grad`, the first of them slot
/// `firstSlot`) hold the expert's first replica, else 0. Summed over the
/// ranks, the norms per expert: the same bits under any placement, since
/// every replica's gradient is.
std::vector<float> firstReplicaNorms(const float *grad, int64_t rowElems,
                                     int64_t firstSlot,
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
