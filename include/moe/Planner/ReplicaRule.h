//===- ReplicaRule.h - which replica serves a rank's choices ----*- C++ -*-===//
//
// The replica rule of moe.place, written once for the host (the planner,
// the runtime's gradient exchange) and the device (moert_cuda_place): every
// routing choice of expert e made on source rank s goes to one slot of e.
//
//   1. If s holds a replica of e, its first one there: a shadow expert, as
//      FasterMoE computes them, whose tokens never leave their rank.
//   2. Otherwise the ranks that hold no replica of e take e's replicas in
//      turn: the j-th such rank (counting from rank 0) takes replica
//      j mod c_e of e's c_e slots in ascending order.
//
// A source's choices of one expert never split, so each replica's gradient
// is a sum of whole per-source parts; summed in source order, whatever
// replica computed each, they give the bits of one copy serving every
// source (moe.slot_grad_sum). Deterministic, stateless, O(P) per call.
//
// Plain C++, no allocation: MOE_HOST_DEVICE makes it a CUDA device
// function too.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_PLANNER_REPLICARULE_H
#define MOE_PLANNER_REPLICARULE_H

#include <cstdint>

#ifdef __CUDACC__
#define MOE_HOST_DEVICE __host__ __device__
#else
#define MOE_HOST_DEVICE
#endif

namespace moe::planner {

/// The slot of `table` (`numSlots` entries, slot -> expert, `numRanks`
/// ranks of numSlots / numRanks consecutive slots) that serves the choices
/// of `expert` made on rank `source`; -1 when no slot holds it.
MOE_HOST_DEVICE inline int64_t servingSlot(const int32_t *table,
                                           int64_t numSlots, int64_t numRanks,
                                           int64_t source, int32_t expert) {
  int64_t perRank = numSlots / numRanks;
  int64_t count = 0, holdersBelow = 0, lastHolder = -1, local = -1;
  for (int64_t p = 0; p < numSlots; ++p) {
    if (table[p] != expert)
      continue;
    ++count;
    int64_t rank = p / perRank;
    if (rank == source && local < 0)
      local = p;
    if (rank < source && rank != lastHolder) {
      ++holdersBelow;
      lastHolder = rank;
    }
  }
  if (count == 0)
    return -1;
  if (local >= 0)
    return local;
  int64_t want = (source - holdersBelow) % count;
  for (int64_t p = 0; p < numSlots; ++p)
    if (table[p] == expert && want-- == 0)
      return p;
  return -1;
}

} // namespace moe::planner

#endif // MOE_PLANNER_REPLICARULE_H
