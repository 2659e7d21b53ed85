//===- Collectives.cpp - moert_* exchanges over groups of ranks -----------===//
//
// Each collective checks first that every member of the group calls the same
// operation with the same sizes (one small MPI_Allreduce): a mismatch would
// otherwise hang or write past a buffer. A group of one copies locally and
// never calls MPI, so one process runs without it.
//
//===----------------------------------------------------------------------===//

#include "Process.h"

#include "moert/moert.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <optional>

using namespace moert;
using namespace moert::detail;

const char *const detail::opNames[NumOps] = {"",
                                             "moert_all_gather",
                                             "moert_all_reduce_sum",
                                             "moert_reduce_scatter_sum",
                                             "moert_all_to_all",
                                             "moert_ragged_all_to_all",
                                             "moert_exclusive_scan_sum",
                                             "moert_broadcast"};

const char *const detail::dtypeNames[] = {"f32", "f64", "i32",
                                          "i64", "f16", "bf16"};

/// Ends every rank over a mismatch that the whole group has seen, with one
/// report, by position 0.
template <typename... Ts>
[[noreturn]] static void failTogether(const Group &g, const Ts &...parts) {
  if (g.pos == 0)
    fail(parts...);
  awaitAbort(g.comm);
}

/// Ends every rank unless the whole group calls `op` with the same `fields`.
/// The exchange has a fixed size so that it matches whatever the others call.
void detail::agree(const Group &g, Op op, std::initializer_list<Field> fields) {
  constexpr int maxFields = 3;
  Waiting wait(std::string(opNames[op]) + " over " + g.name);
  int64_t v[2 * (maxFields + 1)] = {op, -op};
  int i = 2;
  for (const Field &f : fields) {
    v[i++] = f.value;
    v[i++] = -f.value;
  }
  MPI_Allreduce(MPI_IN_PLACE, v, 2 * (maxFields + 1), MPI_INT64_T, MPI_MAX,
                g.comm);
  if (v[0] != -v[1])
    failTogether(g, opNames[op], " over ", g.name,
                 ": the group's ranks call different collectives (",
                 opNames[-v[1]], " and ", opNames[v[0]], ")");
  i = 2;
  for (const Field &f : fields) {
    int64_t low = -v[i + 1], high = v[i];
    if (low != high && f.names)
      failTogether(g, opNames[op], " over ", g.name, ": ", f.what,
                   " disagree across the group: ", f.names[low], " vs ",
                   f.names[high]);
    if (low != high)
      failTogether(g, opNames[op], " over ", g.name, ": ", f.what,
                   " disagree across the group: ", low, " vs ", high);
    i += 2;
  }
}

int64_t detail::checkCount(int64_t n, Op op, const char *what) {
  if (n < 0)
    fail(opNames[op], ": negative ", what, " ", n);
  return n;
}

/// MPI type of a dtype code; sets its size.
static MPI_Datatype mpiType(int32_t dtype, Op op, int64_t &size) {
  switch (dtype) {
  case 0:
    size = 4;
    return MPI_FLOAT;
  case 1:
    size = 8;
    return MPI_DOUBLE;
  case 2:
    size = 4;
    return MPI_INT32_T;
  case 3:
    size = 8;
    return MPI_INT64_T;
  case MOERT_F16:
  case MOERT_BF16:
    fail(opNames[op], ": ", dtypeNames[dtype],
         " sums need the CUDA runtime (compile with --target=cuda)");
  }
  fail(opNames[op], ": unknown dtype code ", dtype);
}

static void copy(void *out, const void *in, int64_t bytes) {
  if (bytes > 0 && in != out)
    std::memmove(out, in, bytes);
}

/// `in`, or a copy of it when it overlaps `out`: MPI forbids aliased send
/// and receive buffers.
static const void *apart(const void *in, int64_t inBytes, const void *out,
                         int64_t outBytes, std::vector<char> &scratch) {
  auto *i = static_cast<const char *>(in);
  auto *o = static_cast<const char *>(out);
  if (inBytes <= 0 || outBytes <= 0 || i + inBytes <= o || o + outBytes <= i)
    return in;
  scratch.assign(i, i + inBytes);
  return scratch.data();
}

int detail::checkPeer(const Group &g, int64_t peer, const char *op) {
  if (peer < 0 || peer >= g.size)
    fail(op, " over ", g.name, ": position ", peer, " outside a group of ",
         g.size);
  return static_cast<int>(peer);
}

void moert_all_gather(const void *in, void *out, int64_t bytesPerRank,
                      int64_t axes) {
  Group &g = group(axes, opNames[AllGather]);
  checkCount(bytesPerRank, AllGather, "byte count");
  if (g.size == 1)
    return copy(out, in, bytesPerRank);
  agree(g, AllGather, {{"bytes per rank", bytesPerRank}});
  Waiting wait(std::string(opNames[AllGather]) + " over " + g.name);
  int n = toInt(bytesPerRank, opNames[AllGather]);
  std::vector<char> scratch;
  MPI_Allgather(apart(in, bytesPerRank, out, bytesPerRank * g.size, scratch), n,
                MPI_BYTE, out, n, MPI_BYTE, g.comm);
}

/// The sum reductions differ only in the MPI call and in the input's size:
/// one chunk of `count` elements, or one per member when `chunked`.
template <typename CallMpi>
static void reduceSum(Op op, const void *in, void *out, int64_t count,
                      bool chunked, int32_t dtype, int64_t axes,
                      CallMpi callMpi) {
  Group &g = group(axes, opNames[op]);
  int64_t size;
  MPI_Datatype type = mpiType(dtype, op, size);
  int64_t bytes = checkCount(count, op, "element count") * size;
  if (g.size == 1) {
    if (op == ExclusiveScan)
      std::memset(out, 0, bytes);
    else
      copy(out, in, bytes);
    return;
  }
  agree(g, op,
        {{"element types", dtype, dtypeNames}, {"element counts", count}});
  Waiting wait(std::string(opNames[op]) + " over " + g.name);
  std::vector<char> scratch;
  const void *input =
      apart(in, chunked ? bytes * g.size : bytes, out, bytes, scratch);
  callMpi(input, out, toInt(count, opNames[op]), type, g.comm);
  // MPI leaves position 0's scan result undefined.
  if (op == ExclusiveScan && g.pos == 0)
    std::memset(out, 0, bytes);
}

void moert_all_reduce_sum(const void *in, void *out, int64_t count,
                          int32_t dtype, int64_t axes) {
  reduceSum(AllReduce, in, out, count, false, dtype, axes,
            [](const void *i, void *o, int n, MPI_Datatype t, MPI_Comm c) {
              MPI_Allreduce(i, o, n, t, MPI_SUM, c);
            });
}

void moert_reduce_scatter_sum(const void *in, void *out, int64_t countPerRank,
                              int32_t dtype, int64_t axes) {
  reduceSum(ReduceScatter, in, out, countPerRank, true, dtype, axes,
            [](const void *i, void *o, int n, MPI_Datatype t, MPI_Comm c) {
              MPI_Reduce_scatter_block(i, o, n, t, MPI_SUM, c);
            });
}

void moert_exclusive_scan_sum(const void *in, void *out, int64_t count,
                              int32_t dtype, int64_t axes) {
  reduceSum(ExclusiveScan, in, out, count, false, dtype, axes,
            [](const void *i, void *o, int n, MPI_Datatype t, MPI_Comm c) {
              MPI_Exscan(i, o, n, t, MPI_SUM, c);
            });
}

void moert_all_to_all(const void *in, void *out, int64_t bytesPerRank,
                      int64_t axes) {
  Group &g = group(axes, opNames[AllToAll]);
  checkCount(bytesPerRank, AllToAll, "byte count");
  if (g.size == 1)
    return copy(out, in, bytesPerRank);
  agree(g, AllToAll, {{"bytes per rank", bytesPerRank}});
  Waiting wait(std::string(opNames[AllToAll]) + " over " + g.name);
  int n = toInt(bytesPerRank, opNames[AllToAll]);
  int64_t bytes = bytesPerRank * g.size;
  std::vector<char> scratch;
  MPI_Alltoall(apart(in, bytes, out, bytes, scratch), n, MPI_BYTE, out, n,
               MPI_BYTE, g.comm);
}

/// Rows per peer (the sum of its L counts) and their offsets, in the ints
/// that MPI_Alltoallv takes (checked when MPI is used); returns the total.
static int64_t rowsPerPeer(const int32_t *counts, int size, int64_t groups,
                           std::vector<int> &rows, std::vector<int> &offsets) {
  const char *op = opNames[RaggedAllToAll];
  int64_t total = 0;
  rows.assign(size, 0);
  offsets.assign(size, 0);
  for (int p = 0; p < size; ++p) {
    int64_t n = 0;
    for (int64_t l = 0; l < groups; ++l)
      n += counts[p * groups + l];
    // Alltoallv takes int counts and offsets, in rows.
    offsets[p] = static_cast<int>(std::min<int64_t>(total, INT32_MAX));
    rows[p] = static_cast<int>(std::min<int64_t>(n, INT32_MAX));
    total += n;
  }
  if (size > 1)
    toInt(total, op);
  return total;
}

void moert_ragged_all_to_all(const void *in, const int32_t *counts, void *out,
                             int32_t *outCounts, int64_t rowBytes,
                             int64_t groupsPerRank, int64_t outRows,
                             int64_t axes) {
  const Op op = RaggedAllToAll;
  Group &g = group(axes, opNames[op]);
  checkCount(rowBytes, op, "row size");
  checkCount(groupsPerRank, op, "groups per rank");
  checkCount(outRows, op, "output row count");
  int64_t numCounts = g.size * groupsPerRank;
  for (int64_t i = 0; i < numCounts; ++i)
    if (counts[i] < 0)
      fail(opNames[op], " over ", g.name, ": negative count ", counts[i],
           " for position ", i / groupsPerRank, ", group ", i % groupsPerRank);

  // Held across both exchanges; a group of one waits for no one.
  std::optional<Waiting> wait;
  if (g.size == 1) {
    copy(outCounts, counts, numCounts * sizeof(int32_t));
  } else {
    wait.emplace(std::string(opNames[op]) + " over " + g.name);
    agree(g, op, {{"row sizes", rowBytes}, {"groups per rank", groupsPerRank}});
    std::vector<char> scratch;
    int n = toInt(groupsPerRank, opNames[op]);
    int64_t countBytes = numCounts * sizeof(int32_t);
    MPI_Alltoall(apart(counts, countBytes, outCounts, countBytes, scratch), n,
                 MPI_INT32_T, outCounts, n, MPI_INT32_T, g.comm);
  }

  std::vector<int> sendRows, sendOffsets, recvRows, recvOffsets;
  int64_t sent =
      rowsPerPeer(counts, g.size, groupsPerRank, sendRows, sendOffsets);
  int64_t received =
      rowsPerPeer(outCounts, g.size, groupsPerRank, recvRows, recvOffsets);
  // Checked before any row moves: the output cannot hold more.
  if (received > outRows)
    fail(opNames[op], " over ", g.name, ": receives ", received,
         " rows but the output holds ", outRows);

  if (g.size == 1 || rowBytes == 0) {
    copy(out, in, received * rowBytes);
  } else {
    MPI_Datatype row;
    MPI_Type_contiguous(toInt(rowBytes, opNames[op]), MPI_BYTE, &row);
    MPI_Type_commit(&row);
    std::vector<char> scratch;
    MPI_Alltoallv(apart(in, sent * rowBytes, out, outRows * rowBytes, scratch),
                  sendRows.data(), sendOffsets.data(), row, out,
                  recvRows.data(), recvOffsets.data(), row, g.comm);
    MPI_Type_free(&row);
  }
  std::memset(static_cast<char *>(out) + received * rowBytes, 0,
              (outRows - received) * rowBytes);
}

void moert_broadcast(const void *in, void *out, int64_t bytes, int64_t axes,
                     int64_t root) {
  const char *op = opNames[Broadcast];
  Group &g = group(axes, op);
  checkCount(bytes, Broadcast, "byte count");
  int r = checkPeer(g, root, op);
  if (g.pos == r)
    copy(out, in, bytes);
  if (g.size == 1)
    return;
  agree(g, Broadcast, {{"byte counts", bytes}, {"roots", root}});
  Waiting wait(std::string(op) + " over " + g.name);
  MPI_Bcast(out, toInt(bytes, op), MPI_BYTE, r, g.comm);
}

void moert_send(const void *in, int64_t bytes, int64_t axes, int64_t dest) {
  const char *op = "moert_send";
  Group &g = group(axes, op);
  int d = checkPeer(g, dest, op);
  if (bytes < 0)
    fail(op, ": negative byte count ", bytes);
  if (d == g.pos) {
    auto *i = static_cast<const char *>(in);
    g.selfMessages.emplace_back(i, i + bytes);
    return;
  }
  completeSends(/*wait=*/false);
  // A copy the send owns, so that the sender goes on at once: a pipeline
  // stage sends a microbatch's activations and then, in a 1F1B schedule,
  // receives another's gradients before the receiver takes the first.
  PendingSend &send = pendingSends().emplace_back();
  send.bytes.assign(static_cast<const char *>(in),
                    static_cast<const char *>(in) + bytes);
  send.what = std::string(op) + " over " + g.name + " to position " +
              std::to_string(d);
  MPI_Isend(send.bytes.data(), toInt(bytes, op), MPI_BYTE, d, 0, g.comm,
            &send.request);
}

std::deque<PendingSend> &moert::detail::pendingSends() {
  static std::deque<PendingSend> sends;
  return sends;
}

void moert::detail::completeSends(bool wait) {
  std::deque<PendingSend> &sends = pendingSends();
  while (!sends.empty()) {
    PendingSend &front = sends.front();
    if (wait) {
      Waiting waiting(front.what);
      MPI_Wait(&front.request, MPI_STATUS_IGNORE);
    } else {
      int done = 0;
      MPI_Test(&front.request, &done, MPI_STATUS_IGNORE);
      if (!done)
        return;
    }
    sends.pop_front();
  }
}

void moert_recv(void *out, int64_t bytes, int64_t axes, int64_t source) {
  const char *op = "moert_recv";
  Group &g = group(axes, op);
  int s = checkPeer(g, source, op);
  int64_t got;
  if (s == g.pos) {
    if (g.selfMessages.empty())
      fail(op, " over ", g.name, ": this rank sent nothing to itself");
    std::vector<char> message = std::move(g.selfMessages.front());
    g.selfMessages.pop_front();
    got = message.size();
    if (got == bytes)
      copy(out, message.data(), bytes);
  } else {
    Waiting wait(std::string(op) + " over " + g.name + " from position " +
                 std::to_string(s));
    // Probe first so that a size mismatch is reported, not truncated.
    MPI_Status status;
    MPI_Probe(s, 0, g.comm, &status);
    int n;
    MPI_Get_count(&status, MPI_BYTE, &n);
    got = n;
    if (got == bytes)
      MPI_Recv(out, n, MPI_BYTE, s, 0, g.comm, MPI_STATUS_IGNORE);
  }
  if (got != bytes)
    fail(op, " over ", g.name, " from position ", s, ": expects ", bytes,
         " bytes, the sender sent ", got);
}
