//===- Placement.cpp - expert slots between the ranks of EP ---------------===//
//
// Migration: a re-placement changes which expert each slot holds; the rows of every
// slot-laid buffer follow. Every rank of the EP group computes the same
// schedule from the two tables: a slot whose new expert its rank already
// held is a local copy; any other is received from one of the expert's old
// holders (spread over them by slot number). Senders read a snapshot of
// their old rows, so that a slot may be overwritten while its old expert
// travels elsewhere.
//
// Gradients (moert_slot_grad_sum): each slot's weight gradient is the sum
// of its expert's per-source parts in source order, wherever the replica
// rule had them computed, so that replicas agree bit for bit with one copy.
//
//===----------------------------------------------------------------------===//

#include "Process.h"

#include "moe/Planner/ReplicaRule.h"
#include "moert/moert.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>

using namespace moert;
using namespace moert::detail;

std::vector<SlotMove> detail::slotMoves(const std::vector<int32_t> &from,
                                        const std::vector<int32_t> &to,
                                        int64_t ranks, const char *op) {
  int64_t P = static_cast<int64_t>(from.size());
  if (P == 0 || ranks < 1 || to.size() != from.size() || P % ranks != 0)
    fail(op, ": tables of ", from.size(), " and ", to.size(),
         " slots over ", ranks, " ranks");
  int64_t S = P / ranks;
  auto heldBy = [&](int64_t rank, int32_t expert) -> int64_t {
    for (int64_t p = rank * S; p < (rank + 1) * S; ++p)
      if (from[p] == expert)
        return p;
    return -1;
  };
  std::vector<SlotMove> moves;
  for (int64_t p = 0; p < P; ++p) {
    if (from[p] == to[p])
      continue;
    int64_t dest = p / S;
    if (int64_t local = heldBy(dest, to[p]); local >= 0) {
      moves.push_back({p, local});
      continue;
    }
    // Old holders: the first old slot of each rank that held the expert.
    std::vector<int64_t> holders;
    for (int64_t r = 0; r < ranks; ++r)
      if (int64_t slot = heldBy(r, to[p]); slot >= 0)
        holders.push_back(slot);
    if (holders.empty())
      fail(op, ": expert ", to[p], " has no slot to come from");
    moves.push_back({p, holders[p % holders.size()]});
  }
  return moves;
}

void moert::migrateSlots(const std::vector<int32_t> &from,
                         const std::vector<int32_t> &to,
                         const std::vector<SlotBuffer> &buffers) {
  const char *op = "moe-run: re-placing experts";
  weightsChanged();
  Group &ep = group(kEpAxes, op);
  std::vector<SlotMove> moves = slotMoves(from, to, ep.size, op);
  int64_t S = static_cast<int64_t>(from.size()) / ep.size, first = ep.pos * S;
  for (const SlotBuffer &buffer : buffers)
    if (buffer.rowBytes < 0 || buffer.rowBytes > INT_MAX)
      fail(op, ": a slot row of ", buffer.rowBytes,
           " bytes does not fit one message");

  std::vector<std::vector<char>> snapshot;
  for (const SlotBuffer &buffer : buffers)
    snapshot.emplace_back(buffer.data, buffer.data + S * buffer.rowBytes);
  std::vector<MPI_Request> requests;
  // In slot order on every rank, so that messages between two ranks match
  // in the order both post them.
  for (const SlotMove &move : moves) {
    int64_t dest = move.slot / S, source = move.source / S;
    for (size_t b = 0; b < buffers.size(); ++b) {
      int64_t rowBytes = buffers[b].rowBytes;
      char *into = buffers[b].data + (move.slot - first) * rowBytes;
      const char *old = snapshot[b].data() + (move.source - first) * rowBytes;
      if (dest == ep.pos && source == ep.pos) {
        std::memcpy(into, old, rowBytes);
      } else if (dest == ep.pos) {
        requests.emplace_back();
        MPI_Irecv(into, static_cast<int>(rowBytes), MPI_BYTE,
                  static_cast<int>(source), 0, ep.comm, &requests.back());
      } else if (source == ep.pos) {
        requests.emplace_back();
        MPI_Isend(old, static_cast<int>(rowBytes), MPI_BYTE,
                  static_cast<int>(dest), 0, ep.comm, &requests.back());
      }
    }
  }
  if (requests.empty())
    return;
  Waiting wait("moving expert weights between the ranks of " + ep.name);
  MPI_Waitall(static_cast<int>(requests.size()), requests.data(),
              MPI_STATUSES_IGNORE);
}

void moert_slot_grad_sum(const float *partials, const int32_t *table,
                         float *out, int64_t numSlots, int64_t rowElems,
                         int64_t axes) {
  const char *op = "moert_slot_grad_sum";
  Group &g = group(axes, op);
  int64_t P = numSlots, N = g.size;
  if (P < 1 || P % N != 0)
    fail(op, ": a table of ", P, " slots over ", N, " ranks of ", g.name);
  if (rowElems < 0 || rowElems > INT_MAX / static_cast<int64_t>(sizeof(float)))
    fail(op, ": a slot row of ", rowElems, " floats does not fit one message");
  int64_t S = P / N, first = g.pos * S;
  // The serving slot of each (expert, source), and the ranks holding each
  // expert, for the experts in the table.
  std::map<int32_t, std::vector<int64_t>> serving, holders;
  for (int64_t p = 0; p < P; ++p) {
    if (table[p] < 0 || table[p] >= P)
      fail(op, ": slot ", p, " holds ", table[p], ", not an expert");
    std::vector<int64_t> &ranks = holders[table[p]];
    if (ranks.empty() || ranks.back() != p / S)
      ranks.push_back(p / S);
  }
  for (auto &[expert, ranks] : holders)
    for (int64_t s = 0; s < N; ++s)
      serving[expert].push_back(
          moe::planner::servingSlot(table, P, N, s, expert));
  auto partAt = [&](int64_t slot, int64_t source) {
    return partials + (source * S + slot % S) * rowElems;
  };

  // The parts of replicated experts go from the rank that computed them
  // to the expert's other holders; posted in (expert, source) order on
  // every rank, so that messages between two ranks match in order.
  std::map<std::pair<int32_t, int64_t>, std::vector<float>> received;
  std::vector<MPI_Request> requests;
  int bytes = static_cast<int>(rowElems * sizeof(float));
  for (auto &[expert, ranks] : holders) {
    if (ranks.size() < 2)
      continue;
    bool mine = std::find(ranks.begin(), ranks.end(), g.pos) != ranks.end();
    for (int64_t s = 0; s < N; ++s) {
      int64_t slot = serving[expert][s], owner = slot / S;
      if (owner == g.pos) {
        for (int64_t rank : ranks)
          if (rank != owner) {
            requests.emplace_back();
            MPI_Isend(partAt(slot, s), bytes, MPI_BYTE, static_cast<int>(rank),
                      2, g.comm, &requests.back());
          }
      } else if (mine) {
        std::vector<float> &part = received[{expert, s}];
        part.resize(rowElems);
        requests.emplace_back();
        MPI_Irecv(part.data(), bytes, MPI_BYTE, static_cast<int>(owner), 2,
                  g.comm, &requests.back());
      }
    }
  }
  if (!requests.empty()) {
    Waiting wait("exchanging the gradients of expert replicas within " +
                 g.name);
    MPI_Waitall(static_cast<int>(requests.size()), requests.data(),
                MPI_STATUSES_IGNORE);
  }
  // 0 + part(e, 0) + ... + part(e, N-1), as moe.experts_grad adds groups.
  for (int64_t j = 0; j < S; ++j) {
    int32_t expert = table[first + j];
    float *row = out + j * rowElems;
    std::fill(row, row + rowElems, 0.0f);
    for (int64_t s = 0; s < N; ++s) {
      int64_t slot = serving[expert][s];
      const float *part = slot / S == g.pos
                              ? partAt(slot, s)
                              : received[{expert, s}].data();
      for (int64_t i = 0; i < rowElems; ++i)
        row[i] += part[i];
    }
  }
}
