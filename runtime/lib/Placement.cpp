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
#include <cstring>

using namespace moert;
using namespace moert::detail;

/// The encoded axes of the EP axis alone (grid axis 3 of pp, dp, dp_shard,
/// ep, tp), as compiled code names it.
static constexpr int64_t kEpAxes = 3 + 1;

void moert::migrateSlots(const std::vector<int32_t> &from,
                         const std::vector<int32_t> &to,
                         const std::vector<SlotBuffer> &buffers) {
  const char *op = "moe-run: re-placing experts";
  Group &ep = group(kEpAxes, op);
  int64_t P = static_cast<int64_t>(from.size());
  if (P == 0 || to.size() != from.size() || P % ep.size != 0)
    fail(op, ": tables of ", from.size(), " and ", to.size(),
         " slots over ", ep.size, " ranks");
  int64_t S = P / ep.size, first = ep.pos * S;
  for (const SlotBuffer &buffer : buffers)
    if (buffer.rowBytes < 0 || buffer.rowBytes > INT_MAX)
      fail(op, ": a slot row of ", buffer.rowBytes,
           " bytes does not fit one message");

  // Old holders: per expert, the first old slot on each rank holding it.
  auto holders = [&](int32_t expert) {
    std::vector<int64_t> slots;
    for (int64_t r = 0; r < ep.size; ++r)
      for (int64_t p = r * S; p < (r + 1) * S; ++p)
        if (from[p] == expert) {
          slots.push_back(p);
          break;
        }
    return slots;
  };
  auto heldBy = [&](int64_t rank, int32_t expert) -> int64_t {
    for (int64_t p = rank * S; p < (rank + 1) * S; ++p)
      if (from[p] == expert)
        return p;
    return -1;
  };

  std::vector<std::vector<char>> snapshot;
  for (const SlotBuffer &buffer : buffers)
    snapshot.emplace_back(buffer.data, buffer.data + S * buffer.rowBytes);

  std::vector<MPI_Request> requests;
  auto row = [&](size_t b, int64_t localSlot) {
    return snapshot[b].data() + localSlot * buffers[b].rowBytes;
  };
  // In slot order on every rank, so that messages between two ranks match
  // in the order both post them.
  for (int64_t p = 0; p < P; ++p) {
    if (from[p] == to[p])
      continue;
    int64_t dest = p / S;
    if (heldBy(dest, to[p]) >= 0) {
      if (dest == ep.pos)
        for (size_t b = 0; b < buffers.size(); ++b)
          std::memcpy(buffers[b].data + (p - first) * buffers[b].rowBytes,
                      row(b, heldBy(dest, to[p]) - first), buffers[b].rowBytes);
      continue;
    }
    std::vector<int64_t> sources = holders(to[p]);
    if (sources.empty())
      fail(op, ": expert ", to[p], " has no slot to come from");
    int64_t source = sources[p % sources.size()];
    int64_t sourceRank = source / S;
    for (size_t b = 0; b < buffers.size(); ++b) {
      int bytes = static_cast<int>(buffers[b].rowBytes);
      if (dest == ep.pos) {
        requests.emplace_back();
        MPI_Irecv(buffers[b].data + (p - first) * buffers[b].rowBytes, bytes,
                  MPI_BYTE, static_cast<int>(sourceRank), 0, ep.comm,
                  &requests.back());
      } else if (sourceRank == ep.pos) {
        requests.emplace_back();
        MPI_Isend(row(b, source - first), bytes, MPI_BYTE,
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
