//===- Slots.cpp - moe-train with experts on slots ------------------------===//

#include "Slots.h"

#include "moert/Train.h"

#include <cmath>

using namespace moe_train;

std::vector<float>
moe_train::firstReplicaNorms(const float *grad, int64_t rowElems,
                             int64_t firstSlot,
                             const moe::planner::Placement &placement) {
  std::vector<float> norms(placement.numExperts(), 0.0f);
  for (int64_t s = 0; s < placement.slotsPerRank(); ++s) {
    int64_t slot = firstSlot + s;
    int32_t expert = placement.expertAt(slot);
    if (placement.replicaSlot(expert, 0) == slot)
      norms[expert] = moert::train::norm2(grad + s * rowElems, rowElems);
  }
  return norms;
}

std::vector<float>
moe_train::expertsFromSlots(const std::vector<float> &slots, int64_t rowElems,
                            const moe::planner::Placement &placement) {
  std::vector<float> experts(placement.numExperts() * rowElems);
  for (int32_t e = 0; e < placement.numExperts(); ++e) {
    int64_t slot = placement.replicaSlot(e, 0);
    std::copy(slots.begin() + slot * rowElems,
              slots.begin() + (slot + 1) * rowElems,
              experts.begin() + e * rowElems);
  }
  return experts;
}

std::vector<float>
moe_train::slotsFromExperts(const std::vector<float> &experts, int64_t rowElems,
                            const moe::planner::Placement &placement) {
  std::vector<float> slots(placement.numSlots() * rowElems);
  for (int64_t p = 0; p < placement.numSlots(); ++p) {
    int32_t e = placement.expertAt(p);
    std::copy(experts.begin() + e * rowElems,
              experts.begin() + (e + 1) * rowElems,
              slots.begin() + p * rowElems);
  }
  return slots;
}
