//===- Placement.cpp - moving expert slots between the ranks of EP --------===//
//
// A re-placement changes which expert each slot holds; the rows of every
// slot-laid buffer follow. Every rank of the EP group computes the same
// schedule from the two tables: a slot whose new expert its rank already
// held is a local copy; any other is received from one of the expert's old
// holders (spread over them by slot number). Senders read a snapshot of
// their old rows, so that a slot may be overwritten while its old expert
// travels elsewhere.
//
//===----------------------------------------------------------------------===//

#include "Process.h"

#include <climits>
#include <map>
#include <cstring>

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

void moert::sumReplicaRows(const std::vector<int32_t> &table,
                           const std::vector<SlotBuffer> &buffers) {
  const char *op = "moe-train: summing the gradients of expert replicas";
  Group &ep = group(kEpAxes, op);
  int64_t P = static_cast<int64_t>(table.size());
  if (P == 0 || P % ep.size != 0)
    fail(op, ": a table of ", P, " slots over ", ep.size, " ranks");
  int64_t S = P / ep.size, first = ep.pos * S;
  for (const SlotBuffer &buffer : buffers)
    if (buffer.rowBytes < 0 || buffer.rowBytes > INT_MAX ||
        buffer.rowBytes % sizeof(float) != 0)
      fail(op, ": a slot row of ", buffer.rowBytes, " bytes");
  // Each expert's slots, ascending.
  std::map<int32_t, std::vector<int64_t>> replicas;
  for (int64_t p = 0; p < P; ++p)
    replicas[table[p]].push_back(p);
  auto holds = [&](const std::vector<int64_t> &slots, int64_t rank) {
    for (int64_t p : slots)
      if (p / S == rank)
        return true;
    return false;
  };
  // Rows of other ranks' replicas, by slot and buffer; posted in (expert,
  // slot, buffer) order on both sides.
  std::map<std::pair<int64_t, size_t>, std::vector<float>> received;
  std::vector<MPI_Request> requests;
  for (auto &[expert, slots] : replicas) {
    if (slots.size() < 2)
      continue;
    bool mine = holds(slots, ep.pos);
    for (int64_t q : slots) {
      int64_t owner = q / S;
      for (size_t b = 0; b < buffers.size(); ++b) {
        int bytes = static_cast<int>(buffers[b].rowBytes);
        if (owner != ep.pos && mine) {
          std::vector<float> &row = received[{q, b}];
          row.resize(buffers[b].rowBytes / sizeof(float));
          requests.emplace_back();
          MPI_Irecv(row.data(), bytes, MPI_BYTE, static_cast<int>(owner), 1,
                    ep.comm, &requests.back());
        } else if (owner == ep.pos) {
          // To every other rank that holds a replica, once.
          for (int64_t rank = 0; rank < ep.size; ++rank)
            if (rank != ep.pos && holds(slots, rank)) {
              requests.emplace_back();
              MPI_Isend(buffers[b].data + (q - first) * buffers[b].rowBytes,
                        bytes, MPI_BYTE, static_cast<int>(rank), 1, ep.comm,
                        &requests.back());
            }
        }
      }
    }
  }
  if (!requests.empty()) {
    Waiting wait("exchanging the gradients of expert replicas within " +
                 ep.name);
    MPI_Waitall(static_cast<int>(requests.size()), requests.data(),
                MPI_STATUSES_IGNORE);
  }
  // The sum in slot order, the same on every holder.
  for (auto &[expert, slots] : replicas) {
    if (slots.size() < 2 || !holds(slots, ep.pos))
      continue;
    for (size_t b = 0; b < buffers.size(); ++b) {
      size_t n = buffers[b].rowBytes / sizeof(float);
      auto row = [&](int64_t q) -> const float * {
        if (q / S == ep.pos)
          return reinterpret_cast<const float *>(buffers[b].data +
                                                 (q - first) *
                                                     buffers[b].rowBytes);
        return received[{q, b}].data();
      };
      std::vector<float> sum(row(slots[0]), row(slots[0]) + n);
      for (size_t i = 1; i < slots.size(); ++i) {
        const float *r = row(slots[i]);
        for (size_t j = 0; j < n; ++j)
          sum[j] += r[j];
      }
      for (int64_t p : slots)
        if (p / S == ep.pos)
          std::copy(sum.begin(), sum.end(),
                    reinterpret_cast<float *>(buffers[b].data +
                                              (p - first) *
                                                  buffers[b].rowBytes));
    }
  }
}
