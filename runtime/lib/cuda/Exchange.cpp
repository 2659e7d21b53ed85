//===- Exchange.cpp - Exchanges between ranks over NCCL -------------------===//
//
// The moert.h exchanges on device buffers. The checks are the CPU
// runtime's (detail::agree: one small MPI_Allreduce, so that a mismatched
// call ends every rank instead of hanging NCCL); the data moves over NCCL.
// One communicator per group (per `axes` value), made on first use from an
// id that the group's first rank broadcasts over MPI. A group of one copies
// on the device. NCCL has no scan: the exclusive scan gathers every
// position's input and sums on the host (it is used for per-expert counts).
// Every call waits for the stream before it returns.
//
//===----------------------------------------------------------------------===//

#include "Device.h"

#include "moert/moert_cuda.h"

#include <dlfcn.h>
#include <nccl.h>

#include <map>
#include <vector>

using namespace moert;
using namespace moert::cuda;
using namespace moert::detail;

static void check(ncclResult_t status, const char *call) {
  if (status != ncclSuccess)
    fail(call, " failed: ", ncclGetErrorString(status),
         status == ncclSystemError || status == ncclRemoteError
             ? " (a peer rank failed or the network broke)"
             : "");
}

namespace {
/// A group and, for more than one rank, its NCCL communicator.
struct Peers {
  Group *group;
  ncclComm_t comm = nullptr;
  cudaStream_t stream;
};

/// An element type's NCCL name and size.
struct Element {
  ncclDataType_t type;
  int64_t bytes;
};
} // namespace

static Peers peers(int64_t axes, const char *op) {
  static std::map<int64_t, ncclComm_t> comms;
  Group &group = detail::group(axes, op);
  Peers p{&group, nullptr, device().stream};
  if (group.size == 1)
    return p;
  auto [it, inserted] = comms.try_emplace(axes, nullptr);
  if (inserted) {
    ncclUniqueId id;
    if (group.pos == 0)
      check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    Waiting wait("creating the NCCL communicator of " + group.name);
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, group.comm);
    // NCCL allocates its buffers itself: not from the pool, which keeps
    // what earlier calls freed.
    releaseCachedMemory();
    check(ncclCommInitRank(&it->second, group.size, id, group.pos),
          "ncclCommInitRank");
  }
  p.comm = it->second;
  return p;
}

static Element element(int32_t dtype, Op op) {
  switch (dtype) {
  case MOERT_F32:
    return {ncclFloat32, 4};
  case MOERT_F64:
    return {ncclFloat64, 8};
  case MOERT_I32:
    return {ncclInt32, 4};
  case MOERT_I64:
    return {ncclInt64, 8};
  case MOERT_F16:
    return {ncclFloat16, 2};
  case MOERT_BF16:
    return {ncclBfloat16, 2};
  }
  fail(opNames[op], ": unknown dtype code ", dtype);
}

static void copyOnDevice(void *out, const void *in, int64_t bytes,
                         cudaStream_t stream) {
  if (bytes > 0 && in != out)
    check(cudaMemcpyAsync(out, in, bytes, cudaMemcpyDefault, stream),
          "cudaMemcpyAsync");
}

static void wait(const Peers &p) {
  check(cudaStreamSynchronize(p.stream), "cudaStreamSynchronize");
}

/// The byte exchanges (all-gather, all-to-all) differ in the NCCL call only.
template <typename CallNccl>
static void exchangeBytes(Op op, const void *in, void *out,
                          int64_t bytesPerRank, int64_t axes,
                          CallNccl callNccl) {
  Peers p = peers(axes, opNames[op]);
  checkCount(bytesPerRank, op, "byte count");
  if (!p.comm) {
    copyOnDevice(out, in, bytesPerRank, p.stream);
  } else {
    agree(*p.group, op, {{"bytes per rank", bytesPerRank}});
    callNccl(p);
  }
  wait(p);
}

void moert_cuda_all_gather(const void *in, void *out, int64_t bytesPerRank,
                           int64_t axes) {
  exchangeBytes(AllGather, in, out, bytesPerRank, axes, [&](const Peers &p) {
    check(ncclAllGather(in, out, bytesPerRank, ncclUint8, p.comm, p.stream),
          "ncclAllGather");
  });
}

/// The sums differ in the NCCL call only; `count` is the output's.
template <typename CallNccl>
static void reduceSum(Op op, const void *in, void *out, int64_t count,
                      int32_t dtype, int64_t axes, CallNccl callNccl) {
  Peers p = peers(axes, opNames[op]);
  Element e = element(dtype, op);
  int64_t bytes = checkCount(count, op, "element count") * e.bytes;
  if (!p.comm) {
    copyOnDevice(out, in, bytes, p.stream);
  } else {
    agree(*p.group, op,
          {{"element types", dtype, dtypeNames}, {"element counts", count}});
    callNccl(in, out, count, e.type, p);
  }
  wait(p);
}

void moert_cuda_all_reduce_sum(const void *in, void *out, int64_t count,
                               int32_t dtype, int64_t axes) {
  reduceSum(AllReduce, in, out, count, dtype, axes,
            [](const void *i, void *o, int64_t n, ncclDataType_t t,
               const Peers &p) {
              check(ncclAllReduce(i, o, n, t, ncclSum, p.comm, p.stream),
                    "ncclAllReduce");
            });
}

void moert_cuda_reduce_scatter_sum(const void *in, void *out,
                                   int64_t countPerRank, int32_t dtype,
                                   int64_t axes) {
  reduceSum(ReduceScatter, in, out, countPerRank, dtype, axes,
            [](const void *i, void *o, int64_t n, ncclDataType_t t,
               const Peers &p) {
              check(ncclReduceScatter(i, o, n, t, ncclSum, p.comm, p.stream),
                    "ncclReduceScatter");
            });
}

/// Sends sendBytes[peer] bytes of `in` to each peer and receives
/// recvBytes[peer] bytes from it into `out`, both packed in peer order, as
/// one NCCL group of sends and receives.
static void sendReceive(const void *in, const std::vector<int64_t> &sendBytes,
                        void *out, const std::vector<int64_t> &recvBytes,
                        const Peers &p) {
  auto *src = static_cast<const char *>(in);
  auto *dst = static_cast<char *>(out);
  check(ncclGroupStart(), "ncclGroupStart");
  for (int peer = 0; peer < p.group->size; ++peer) {
    if (sendBytes[peer])
      check(ncclSend(src, sendBytes[peer], ncclUint8, peer, p.comm, p.stream),
            "ncclSend");
    if (recvBytes[peer])
      check(ncclRecv(dst, recvBytes[peer], ncclUint8, peer, p.comm, p.stream),
            "ncclRecv");
    src += sendBytes[peer];
    dst += recvBytes[peer];
  }
  check(ncclGroupEnd(), "ncclGroupEnd");
}

/// `bytes` to and from every peer: ncclAlltoAll where the NCCL loaded has
/// it (2.28 and later; it is looked up, since the NCCL that PyTorch's
/// wheels bring may be older), else grouped sends and receives.
static void uniformAllToAll(const void *in, void *out, int64_t bytes,
                            const Peers &p) {
  using AllToAll = ncclResult_t (*)(const void *, void *, size_t,
                                    ncclDataType_t, ncclComm_t, cudaStream_t);
  static auto ncclAllToAll =
      reinterpret_cast<AllToAll>(dlsym(RTLD_DEFAULT, "ncclAlltoAll"));
  if (ncclAllToAll) {
    check(ncclAllToAll(in, out, bytes, ncclUint8, p.comm, p.stream),
          "ncclAlltoAll");
    return;
  }
  std::vector<int64_t> perPeer(p.group->size, bytes);
  sendReceive(in, perPeer, out, perPeer, p);
}

void moert_cuda_all_to_all(const void *in, void *out, int64_t bytesPerRank,
                           int64_t axes) {
  exchangeBytes(AllToAll, in, out, bytesPerRank, axes, [&](const Peers &p) {
    uniformAllToAll(in, out, bytesPerRank, p);
  });
}

/// Rows per peer: the sum of its `groups` counts.
static std::vector<int64_t> rowsPerPeer(const std::vector<int32_t> &counts,
                                        int size, int64_t groups) {
  std::vector<int64_t> rows(size, 0);
  for (int peer = 0; peer < size; ++peer)
    for (int64_t l = 0; l < groups; ++l)
      rows[peer] += counts[peer * groups + l];
  return rows;
}

void moert_cuda_ragged_all_to_all(const void *in, const int32_t *counts,
                                  void *out, int32_t *outCounts,
                                  int64_t rowBytes, int64_t groupsPerRank,
                                  int64_t outRows, int64_t axes) {
  const Op op = RaggedAllToAll;
  Peers p = peers(axes, opNames[op]);
  Group &g = *p.group;
  checkCount(rowBytes, op, "row size");
  checkCount(groupsPerRank, op, "groups per rank");
  checkCount(outRows, op, "output row count");
  int64_t numCounts = g.size * groupsPerRank;
  size_t countBytes = numCounts * sizeof(int32_t);
  std::vector<int32_t> sendCounts(numCounts), recvCounts(numCounts);
  check(cudaMemcpyAsync(sendCounts.data(), counts, countBytes,
                        cudaMemcpyDefault, p.stream),
        "cudaMemcpyAsync");
  wait(p);
  for (int64_t i = 0; i < numCounts; ++i)
    if (sendCounts[i] < 0)
      fail(opNames[op], " over ", g.name, ": negative count ", sendCounts[i],
           " for position ", i / groupsPerRank, ", group ",
           i % groupsPerRank);
  if (p.comm) {
    agree(g, op, {{"row sizes", rowBytes}, {"groups per rank", groupsPerRank}});
    uniformAllToAll(counts, outCounts, groupsPerRank * sizeof(int32_t), p);
  } else {
    copyOnDevice(outCounts, counts, countBytes, p.stream);
  }
  check(cudaMemcpyAsync(recvCounts.data(), outCounts, countBytes,
                        cudaMemcpyDefault, p.stream),
        "cudaMemcpyAsync");
  wait(p);

  std::vector<int64_t> sendRows = rowsPerPeer(sendCounts, g.size, groupsPerRank);
  std::vector<int64_t> recvRows = rowsPerPeer(recvCounts, g.size, groupsPerRank);
  int64_t received = 0;
  for (int64_t rows : recvRows)
    received += rows;
  // Checked before any row moves: the output cannot hold more.
  if (received > outRows)
    fail(opNames[op], " over ", g.name, ": receives ", received,
         " rows but the output holds ", outRows);
  if (!p.comm) {
    copyOnDevice(out, in, received * rowBytes, p.stream);
  } else {
    for (int peer = 0; peer < g.size; ++peer) {
      sendRows[peer] *= rowBytes;
      recvRows[peer] *= rowBytes;
    }
    sendReceive(in, sendRows, out, recvRows, p);
  }
  if (outRows > received && rowBytes > 0)
    check(cudaMemsetAsync(static_cast<char *>(out) + received * rowBytes, 0,
                          (outRows - received) * rowBytes, p.stream),
          "cudaMemsetAsync");
  wait(p);
}

/// out = sum of the first `before` of `gathered`'s chunks of `count` Ts.
template <typename T>
static void sumChunks(const std::vector<char> &gathered, int before,
                      int64_t count, std::vector<char> &out) {
  auto *chunks = reinterpret_cast<const T *>(gathered.data());
  auto *sum = reinterpret_cast<T *>(out.data());
  for (int64_t i = 0; i < count; ++i) {
    T acc = 0;
    for (int position = 0; position < before; ++position)
      acc += chunks[position * count + i];
    sum[i] = acc;
  }
}

void moert_cuda_exclusive_scan_sum(const void *in, void *out, int64_t count,
                                   int32_t dtype, int64_t axes) {
  const Op op = ExclusiveScan;
  Peers p = peers(axes, opNames[op]);
  Group &g = *p.group;
  Element e = element(dtype, op);
  int64_t bytes = checkCount(count, op, "element count") * e.bytes;
  if (dtype == MOERT_F16 || dtype == MOERT_BF16)
    fail(opNames[op], ": ", dtypeNames[dtype],
         " scans are not supported (counts are integers)");
  std::vector<char> gathered(bytes * g.size), sum(bytes, 0);
  if (p.comm)
    agree(g, op,
          {{"element types", dtype, dtypeNames}, {"element counts", count}});
  if (p.comm && bytes > 0) {
    void *staging = nullptr;
    staging = deviceAlloc(bytes * g.size, p.stream);
    check(ncclAllGather(in, staging, bytes, ncclUint8, p.comm, p.stream),
          "ncclAllGather");
    check(cudaMemcpyAsync(gathered.data(), staging, bytes * g.size,
                          cudaMemcpyDefault, p.stream),
          "cudaMemcpyAsync");
    check(cudaFreeAsync(staging, p.stream), "cudaFreeAsync");
    wait(p);
    switch (dtype) {
    case MOERT_F32:
      sumChunks<float>(gathered, g.pos, count, sum);
      break;
    case MOERT_F64:
      sumChunks<double>(gathered, g.pos, count, sum);
      break;
    case MOERT_I32:
      sumChunks<int32_t>(gathered, g.pos, count, sum);
      break;
    default:
      sumChunks<int64_t>(gathered, g.pos, count, sum);
      break;
    }
  }
  copyOnDevice(out, sum.data(), bytes, p.stream);
  wait(p);
}

void moert_cuda_broadcast(const void *in, void *out, int64_t bytes,
                          int64_t axes, int64_t root) {
  const char *op = opNames[Broadcast];
  Peers p = peers(axes, op);
  checkCount(bytes, Broadcast, "byte count");
  int r = checkPeer(*p.group, root, op);
  if (!p.comm) {
    copyOnDevice(out, in, bytes, p.stream);
  } else {
    agree(*p.group, Broadcast, {{"byte counts", bytes}, {"roots", root}});
    check(ncclBroadcast(in, out, bytes, ncclUint8, r, p.comm, p.stream),
          "ncclBroadcast");
  }
  wait(p);
}

namespace {
/// A message a rank sent to its own position: a device copy, oldest first.
struct SelfMessage {
  void *data;
  int64_t bytes;
};
std::map<int64_t, std::vector<SelfMessage>> selfMessages;
} // namespace

void moert_cuda_send(const void *in, int64_t bytes, int64_t axes,
                     int64_t dest) {
  const char *op = "moert_send";
  Peers p = peers(axes, op);
  int d = checkPeer(*p.group, dest, op);
  if (bytes < 0)
    fail(op, ": negative byte count ", bytes);
  if (d == p.group->pos) {
    SelfMessage message{nullptr, bytes};
    message.data = deviceAlloc(std::max<int64_t>(bytes, 1), p.stream);
    copyOnDevice(message.data, in, bytes, p.stream);
    selfMessages[axes].push_back(message);
  } else {
    // The receiver checks the size: both sides exchange it over MPI first,
    // since NCCL would hang on a mismatch instead of failing.
    Waiting wait("moert_cuda_send over " + p.group->name);
    MPI_Send(&bytes, 1, MPI_INT64_T, d, 1, p.group->comm);
    check(ncclSend(in, bytes, ncclUint8, d, p.comm, p.stream), "ncclSend");
  }
  wait(p);
}

void moert_cuda_recv(void *out, int64_t bytes, int64_t axes, int64_t source) {
  const char *op = "moert_recv";
  Peers p = peers(axes, op);
  Group &g = *p.group;
  int s = checkPeer(g, source, op);
  int64_t got;
  if (s == g.pos) {
    std::vector<SelfMessage> &queue = selfMessages[axes];
    if (queue.empty())
      fail(op, " over ", g.name, ": this rank sent nothing to itself");
    SelfMessage message = queue.front();
    queue.erase(queue.begin());
    got = message.bytes;
    if (got == bytes)
      copyOnDevice(out, message.data, bytes, p.stream);
    check(cudaFreeAsync(message.data, p.stream), "cudaFreeAsync");
  } else {
    Waiting wait("moert_cuda_recv over " + g.name);
    MPI_Recv(&got, 1, MPI_INT64_T, s, 1, g.comm, MPI_STATUS_IGNORE);
    // Received whatever the size, so that the sender's ncclSend completes.
    void *landing = out;
    if (got != bytes)
      landing = deviceAlloc(std::max<int64_t>(got, 1), p.stream);
    check(ncclRecv(landing, got, ncclUint8, s, p.comm, p.stream), "ncclRecv");
    if (landing != out)
      check(cudaFreeAsync(landing, p.stream), "cudaFreeAsync");
  }
  wait(p);
  if (got != bytes)
    fail(op, " over ", g.name, " from position ", s, ": expects ", bytes,
         " bytes, the sender sent ", got);
}

void moert_cuda_migrate_slots(const int32_t *from, const int32_t *to,
                              int64_t numSlots, void *const *buffers,
                              const int64_t *rowBytes, int64_t numBuffers) {
  const char *op = "moert_cuda_migrate_slots";
  if (numSlots < 1 || numBuffers < 0)
    fail(op, ": ", numSlots, " slots, ", numBuffers, " buffers");
  Peers p = peers(kEpAxes, op);
  std::vector<int32_t> before(from, from + numSlots), after(to, to + numSlots);
  std::vector<SlotMove> moves = slotMoves(before, after, p.group->size, op);
  int64_t S = numSlots / p.group->size, first = p.group->pos * S;
  // Senders read a snapshot of their old rows on the device.
  std::vector<char *> device(numBuffers), snapshot(numBuffers);
  for (int64_t b = 0; b < numBuffers; ++b) {
    device[b] = static_cast<char *>(globalCopyOf(buffers[b]));
    if (!device[b] || rowBytes[b] < 0)
      fail(op, ": buffer ", b, " has no device copy");
    snapshot[b] = static_cast<char *>(
        deviceAlloc(std::max<int64_t>(S * rowBytes[b], 1), p.stream));
    copyOnDevice(snapshot[b], device[b], S * rowBytes[b], p.stream);
  }
  if (p.comm)
    check(ncclGroupStart(), "ncclGroupStart");
  for (const SlotMove &move : moves) {
    int64_t dest = move.slot / S, source = move.source / S;
    for (int64_t b = 0; b < numBuffers; ++b) {
      char *into = device[b] + (move.slot - first) * rowBytes[b];
      const char *old = snapshot[b] + (move.source - first) * rowBytes[b];
      if (dest == p.group->pos && source == p.group->pos)
        copyOnDevice(into, old, rowBytes[b], p.stream);
      else if (dest == p.group->pos)
        check(ncclRecv(into, rowBytes[b], ncclUint8, static_cast<int>(source),
                       p.comm, p.stream),
              "ncclRecv");
      else if (source == p.group->pos)
        check(ncclSend(old, rowBytes[b], ncclUint8, static_cast<int>(dest),
                       p.comm, p.stream),
              "ncclSend");
    }
  }
  if (p.comm)
    check(ncclGroupEnd(), "ncclGroupEnd");
  for (char *copy : snapshot)
    check(cudaFreeAsync(copy, p.stream), "cudaFreeAsync");
  Waiting waiting("moving expert weights between the GPUs of " +
                  p.group->name);
  wait(p);
}
