//===- Exchange.cpp - Exchanges between ranks over NCCL -------------------===//
//
// One NCCL communicator per group (per `axes` value), made on first use: the
// group's first rank creates the id and broadcasts it over the group's MPI
// communicator, which the CPU runtime already keeps. A group of one copies.
// Uniform all-to-all is ncclAlltoAll; the ragged one is ncclSend/ncclRecv
// pairs in one NCCL group call.
//
//===----------------------------------------------------------------------===//

#include "Device.h"

#include "moert/moert_cuda.h"

#include <nccl.h>

#include <map>

using namespace moert;
using namespace moert::cuda;

static void check(ncclResult_t status, const char *call) {
  if (status != ncclSuccess)
    detail::fail(call, " failed: ", ncclGetErrorString(status),
                 status == ncclSystemError || status == ncclRemoteError
                     ? " (a peer rank failed or the network broke)"
                     : "");
}

namespace {
struct Peers {
  detail::Group *group;
  ncclComm_t comm = nullptr; ///< Null for a group of one.
};
} // namespace

static Peers peers(int64_t axes, const char *op) {
  static std::map<int64_t, ncclComm_t> comms;
  detail::Group &group = detail::group(axes, op);
  device();
  if (group.size == 1)
    return {&group, nullptr};
  auto it = comms.find(axes);
  if (it != comms.end())
    return {&group, it->second};
  ncclUniqueId id;
  if (group.pos == 0)
    check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, group.comm);
  ncclComm_t comm;
  check(ncclCommInitRank(&comm, group.size, id, group.pos), "ncclCommInitRank");
  comms.emplace(axes, comm);
  return {&group, comm};
}

static ncclDataType_t ncclType(int32_t dtype) {
  switch (dtype) {
  case MOERT_CUDA_F32:
    return ncclFloat32;
  case MOERT_CUDA_F16:
    return ncclFloat16;
  case MOERT_CUDA_BF16:
    return ncclBfloat16;
  }
  detail::fail("moert_cuda_all_reduce_sum: unknown element type code ", dtype);
}

void moert_cuda_all_to_all(const void *send, void *recv, int64_t bytesPerRank,
                           int64_t axes, void *stream) {
  Peers p = peers(axes, "moert_cuda_all_to_all");
  cudaStream_t s = streamOr(stream);
  if (!p.comm) {
    check(cudaMemcpyAsync(recv, send, bytesPerRank, cudaMemcpyDeviceToDevice, s),
          "cudaMemcpyAsync");
    return;
  }
  check(ncclAlltoAll(send, recv, bytesPerRank, ncclUint8, p.comm, s),
        "ncclAlltoAll");
}

void moert_cuda_all_to_all_v(const void *send, const int64_t *sendBytes,
                             void *recv, const int64_t *recvBytes,
                             int64_t axes, void *stream) {
  Peers p = peers(axes, "moert_cuda_all_to_all_v");
  cudaStream_t s = streamOr(stream);
  int size = p.group->size;
  for (int r = 0; r < size; ++r)
    if (sendBytes[r] < 0 || recvBytes[r] < 0)
      detail::fail("moert_cuda_all_to_all_v: negative count for rank ", r,
                   " of ", p.group->name);
  if (!p.comm) {
    if (sendBytes[0] != recvBytes[0])
      detail::fail("moert_cuda_all_to_all_v: sends ", sendBytes[0],
                   " bytes to itself but expects ", recvBytes[0]);
    check(cudaMemcpyAsync(recv, send, sendBytes[0], cudaMemcpyDeviceToDevice, s),
          "cudaMemcpyAsync");
    return;
  }
  const char *out = static_cast<const char *>(send);
  char *in = static_cast<char *>(recv);
  check(ncclGroupStart(), "ncclGroupStart");
  for (int r = 0; r < size; ++r) {
    if (sendBytes[r])
      check(ncclSend(out, sendBytes[r], ncclUint8, r, p.comm, s), "ncclSend");
    if (recvBytes[r])
      check(ncclRecv(in, recvBytes[r], ncclUint8, r, p.comm, s), "ncclRecv");
    out += sendBytes[r];
    in += recvBytes[r];
  }
  check(ncclGroupEnd(), "ncclGroupEnd");
}

void moert_cuda_all_reduce_sum(void *buffer, int64_t count, int32_t dtype,
                               int64_t axes, void *stream) {
  Peers p = peers(axes, "moert_cuda_all_reduce_sum");
  ncclDataType_t type = ncclType(dtype);
  if (!p.comm)
    return;
  check(ncclAllReduce(buffer, buffer, count, type, ncclSum, p.comm,
                      streamOr(stream)),
        "ncclAllReduce");
}

void moert_cuda_all_gather(const void *send, void *recv, int64_t bytesPerRank,
                           int64_t axes, void *stream) {
  Peers p = peers(axes, "moert_cuda_all_gather");
  cudaStream_t s = streamOr(stream);
  if (!p.comm) {
    check(cudaMemcpyAsync(recv, send, bytesPerRank, cudaMemcpyDeviceToDevice, s),
          "cudaMemcpyAsync");
    return;
  }
  check(ncclAllGather(send, recv, bytesPerRank, ncclUint8, p.comm, s),
        "ncclAllGather");
}
