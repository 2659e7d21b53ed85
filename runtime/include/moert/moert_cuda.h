/*===- moert_cuda.h - The CUDA runtime's C ABI ----------------*- C -*-===*\
|*                                                                        *|
|* What code compiled with --target=cuda calls, on top of moert.h:        *|
|* the MoE kernels (gating, permutation by expert, grouped GEMM,          *|
|* weighted un-permute), exchanges over NCCL, and the mgpu* functions     *|
|* that MLIR's GPU-to-LLVM lowering emits (Debian ships no MLIR CUDA      *|
|* runtime). Pointers are device pointers unless named host; every call   *|
|* is ordered on `stream` (null: the runtime's stream). A CUDA, cuBLAS or *|
|* NCCL error ends every rank with the failing call named.                *|
|*                                                                        *|
|* Stream order: a call may be made with earlier work still running on    *|
|* the stream, and returns with its own work possibly still running,      *|
|* unless it says it waits; it waits itself before it reads device data   *|
|* on the host. Host code that reads or writes what a call touches waits  *|
|* for the stream first (mgpuStreamSynchronize(moert_cuda_stream())).     *|
|* moe-gpu-stream-order relies on this for every moert_cuda_* function.   *|
|*                                                                        *|
\*===----------------------------------------------------------------------===*/

#ifndef MOERT_MOERT_CUDA_H
#define MOERT_MOERT_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "moert/moert.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Router scoring, as moe.router's `scoring`. */
enum moert_cuda_scoring {
  MOERT_CUDA_SOFTMAX_TOPK = 0, /* softmax over all experts, then top-k */
  MOERT_CUDA_TOPK_SOFTMAX = 1, /* top-k of the logits, softmax over the k */
  MOERT_CUDA_SIGMOID_TOPK = 2  /* sigmoid of each logit, then top-k */
};

/* Selects the device (the rank's local index modulo the device count) and
 * makes the runtime's stream, cuBLAS handle and NCCL state. Ends the process
 * with a clear error when no device or a too old driver is found. Called
 * lazily by every other function; moe-run calls it first. */
void moert_cuda_init(void);

/* The runtime's stream (a cudaStream_t). */
void *moert_cuda_stream(void);

/* Fused gating: logits [T, E] -> weights [T, k] (f32) and experts [T, k]
 * (i32, best first, ties to the lower index). normalize != 0 divides the k
 * weights by their sum (Mixtral's norm_topk_prob). */
void moert_cuda_topk_gating(const void *logits, int32_t dtype, int64_t tokens,
                            int64_t experts, int64_t k, int32_t scoring,
                            int32_t normalize, float *weights,
                            int32_t *expertIds, void *stream);

/* moe.router's topk and grouped_topk routing (scoring
 * MOERT_CUDA_SOFTMAX_TOPK or MOERT_CUDA_SIGMOID_TOPK), computed in f32: the
 * gating above, selecting by the scores plus `bias` (E values in the
 * logits' dtype; null for none) and, when `groups` > 0, only among the
 * `groupTopk` best of `groups` contiguous groups (scored by the max of
 * their keys, groupScore 0, or the sum of their two largest, 1; the other
 * groups' keys become `maskedScore`). The weights [T, k], in the logits'
 * dtype, are the unbiased scores of the picks, normalized as moe.router's
 * `normalize` (sum plus 1e-20), then times `scale` (its scaling_factor).
 * A token whose scores are all NaN gets ids -1 and weights 0. At most 32
 * picks, 32 groups (two experts each for top-2 sums) and 4096 experts. */
void moert_cuda_router(int32_t dtype, const void *logits, int64_t tokens,
                       int64_t experts, int64_t k, int32_t scoring,
                       int32_t normalize, double scale, const void *bias,
                       int64_t groups, int64_t groupTopk, int32_t groupScore,
                       double maskedScore, void *weights, int32_t *ids);

/* Permutation by expert, stable in (token, slot) order:
 *   slotRow[t * k + j] = the row of xPermuted that holds token t for its
 *                        j-th expert;
 *   offsets[e] .. offsets[e + 1] = expert e's rows (offsets has E + 1 i64);
 *   xPermuted [T * k, H] = the rows of x [T, H] in that order.
 * capacity > 0 keeps at most `capacity` rows per expert (later tokens are
 * dropped: slotRow -1). hostOffsets (E + 1) and dropped, host pointers that
 * may be null, receive the offsets and the dropped count: the call waits for
 * the stream, and fails on expert ids outside [0, E). */
void moert_cuda_permute(const void *x, int32_t dtype, int64_t tokens,
                        int64_t hidden, const int32_t *expertIds, int64_t k,
                        int64_t experts, int64_t capacity, void *xPermuted,
                        int32_t *slotRow, int64_t *offsets,
                        int64_t *hostOffsets, int64_t *dropped, void *stream);

/* moert_dispatch of moert.h (moe.dispatch without capacity: ids outside
 * [0, experts) go nowhere, their rows past the kept ones zero) on device
 * buffers in f32, f16 or bf16, through the permutation above, all on the
 * device. */
void moert_cuda_dispatch(int32_t dtype, const void *x, int64_t tokens,
                         int64_t hidden, const int32_t *ids, int64_t k,
                         int64_t experts, void *rows, int32_t *slots,
                         int32_t *counts);

/* moe.dispatch in capacity mode with the `position` or `choice` policy, on
 * device buffers in f32, f16 or bf16: expert e keeps its first `capacity`
 * pairs in (token, slot) order, or in (slot, token) order where
 * `choice_major` is 1, or with `after` (E counts, may be null: the slots
 * earlier shards took from each expert) those at positions p with
 * after[e] + p < capacity. rows [E, stride, H]: expert e's kept pairs from
 * row e * stride, unused rows zero (stride at least min(capacity, T * k));
 * slots e * stride + p or -1; counts the kept rows per expert; *dropped
 * (one i64 the device can write) the pairs lost to capacity. Ids outside
 * [0, E) go nowhere. All on the device. */
void moert_cuda_dispatch_capacity(int32_t dtype, const void *x,
                                  int64_t tokens, int64_t hidden,
                                  const int32_t *ids, int64_t k,
                                  int64_t experts, int64_t capacity,
                                  int32_t choice_major, const int32_t *after,
                                  int64_t stride, void *rows, int32_t *slots,
                                  int32_t *counts, int64_t *dropped);

/* Grouped GEMM: for each expert e, rows offsets[e] .. offsets[e + 1] of
 * C [R, N] = rows of A [R, K] x W[e] [K, N] (row-major; weights of all
 * experts contiguous). hostOffsets are the E + 1 offsets on the host.
 * cuBLAS with f32 accumulation: one grouped call, or one GEMM per group
 * where the groups are large (moert_cuda_set_gemm_strategy). */
void moert_cuda_grouped_gemm(int32_t dtype, int64_t experts,
                             const int64_t *hostOffsets, int64_t K, int64_t N,
                             const void *A, const void *W, void *C,
                             void *stream);

/* How the grouped GEMMs here go to cuBLAS: AUTO (the default) picks per
 * call by the groups' sizes; GROUPED and SEPARATE force one way, for the
 * tests and benchmarks that compare them. */
enum { MOERT_GEMM_AUTO = 0, MOERT_GEMM_GROUPED = 1, MOERT_GEMM_SEPARATE = 2 };
void moert_cuda_set_gemm_strategy(int32_t strategy);

/* Copies `groups` counts from the device to `hostCounts` (host memory),
 * waiting for the stream: cuBLAS takes group sizes on the host, so the
 * grouped matmuls below take them there, and all the projections of one
 * experts op share one read (one wait). */
void moert_cuda_read_counts(const int32_t *counts, int64_t groups,
                            int32_t *hostCounts);

/* moert_grouped_matmul of moert.h (moe.experts' GEMMs: groups of rows by
 * the counts, W [experts, N, K] read transposed, plus bias [experts, N]
 * when not null, other rows of C zeroed) on the device in f32, f16 or bf16:
 * one cuBLAS grouped call, onto the rows' biases when there are, enqueued
 * without waiting. hostCounts are the counts in host memory
 * (moert_cuda_read_counts). */
void moert_cuda_grouped_matmul(int32_t dtype, int64_t groups, int64_t experts,
                               const int32_t *hostCounts, int64_t groupStride,
                               int64_t rows, int64_t K, int64_t N,
                               const void *A, const void *W, const void *bias,
                               void *C);

/* Two projections of the same rows (a gated FFN's gate and up, W1 and W3
 * [experts, N, K], biases optional): moert_cuda_grouped_matmul for each,
 * with all groups of both in one cuBLAS call. */
void moert_cuda_grouped_matmul_pair(int32_t dtype, int64_t groups,
                                    int64_t experts, const int32_t *hostCounts,
                                    int64_t groupStride, int64_t rows,
                                    int64_t K, int64_t N, const void *A,
                                    const void *W1, const void *bias1,
                                    void *C1, const void *W3,
                                    const void *bias3, void *C3);

/* Weighted un-permute: out[t] = sum_j weights[t, j] * y[slotRow[t * k + j]]
 * over the slots that were kept (y [R, H], out [T, H]). */
void moert_cuda_unpermute(const void *y, int32_t dtype, int64_t tokens,
                          int64_t hidden, int64_t k, const int32_t *slotRow,
                          const float *weights, void *out, void *stream);

/* moe.combine: the un-permute above with rows [R, width] in f32, f16 or
 * bf16 and the weights [T, k] in the same type (sums in f32). */
void moert_cuda_combine(int32_t dtype, const void *rows, int64_t tokens,
                        int64_t width, int64_t k, const int32_t *slots,
                        const void *weights, void *out);

/* The batched matmul of moert_matmul_f32 (batch, strides, accumulate,
 * site) for f32, f16 and bf16 (A, B and C of one type, f32 accumulation).
 * Views with a unit stride go to cuBLAS (one strided-batched call for the
 * batch), others to a plain kernel. An expert GEMM (site 1) waits for the
 * stream before and after, to time it alone. */
void moert_cuda_matmul(int32_t dtype, int64_t batch, int64_t M, int64_t N,
                       int64_t K, const void *A, int64_t sAb, int64_t sAm,
                       int64_t sAk, const void *B, int64_t sBb, int64_t sBk,
                       int64_t sBn, void *C, int64_t sCb, int64_t sCm,
                       int64_t sCn, int32_t accumulate, int32_t site);

/* Exchanges among the ranks of the group that `axes` names: the calls of
 * moert.h with the same arguments and meaning, on device (or managed)
 * buffers, over NCCL. Each group's communicator is made on first use from
 * an id that its first rank broadcasts over MPI; like the CPU calls, each
 * first checks over MPI that the whole group makes the same call with the
 * same sizes. The calls run on the runtime's stream and wait for it before
 * they return. Sums take every moert_dtype, the
 * scan all but f16 and bf16. moert_cuda_send returns once the receiver has
 * posted its moert_cuda_recv (no eager sends, unlike small MPI messages):
 * two ranks that both send before they receive wait for each other. */
void moert_cuda_all_gather(const void *in, void *out, int64_t bytesPerRank,
                           int64_t axes);
void moert_cuda_all_reduce_sum(const void *in, void *out, int64_t count,
                               int32_t dtype, int64_t axes);
void moert_cuda_reduce_scatter_sum(const void *in, void *out,
                                   int64_t countPerRank, int32_t dtype,
                                   int64_t axes);
void moert_cuda_all_to_all(const void *in, void *out, int64_t bytesPerRank,
                           int64_t axes);
/* counts and outCounts may be device memory: they are copied to the host to
 * size the grouped ncclSend/ncclRecv. */
void moert_cuda_ragged_all_to_all(const void *in, const int32_t *counts,
                                  void *out, int32_t *outCounts,
                                  int64_t rowBytes, int64_t groupsPerRank,
                                  int64_t outRows, int64_t axes);
void moert_cuda_exclusive_scan_sum(const void *in, void *out, int64_t count,
                                   int32_t dtype, int64_t axes);
void moert_cuda_send(const void *in, int64_t bytes, int64_t axes,
                     int64_t dest);
void moert_cuda_recv(void *out, int64_t bytes, int64_t axes, int64_t source);
void moert_cuda_broadcast(const void *in, void *out, int64_t bytes,
                          int64_t axes, int64_t root);

/* Per-layer statistics (moe-instrument-layers with target=cuda): the
 * moert_layer_* hooks of moert.h on device buffers, kept on the device.
 * They count the routed ids and add the dropped count (one device i64)
 * with kernels on the runtime's stream and time each layer between two
 * events; moert::printStats gathers the counts and times. */
void moert_cuda_layer_begin(int64_t id);
void moert_cuda_layer_end(int64_t id);
void moert_cuda_layer_tokens(int64_t id, const int32_t *ids, int64_t numIds,
                             int64_t numExperts, int64_t replicaAxes);
void moert_cuda_layer_dropped(int64_t id, const int64_t *dropped,
                              int64_t replicaAxes);

/* A managed (host- and device-reachable) copy of the `bytes` at `host`,
 * made on the first call for that address and prefetched to the device;
 * later calls return the same copy. Code compiled with --target=cuda reaches
 * its globals (weights, constants) through this, after moe-run has loaded
 * the weights into them. */
void *moert_cuda_global(const void *host, int64_t bytes);

/* moert_cuda_global for a global that only the device reads: the copy is
 * device memory, made on the runtime's stream. */
void *moert_cuda_device_global(const void *host, int64_t bytes);

/* Copies the `bytes` at `host` into that global's copy, if one was made:
 * moe-train's updated weights reach the device before the next step. */
void moert_cuda_update_global(const void *host, int64_t bytes);

/* moe.place on the device: out[q] is the slot of table (numSlots entries,
 * slot -> expert, over `ranks` ranks) that serves the q-th of the numIds
 * routing choices `ids`, made on rank `source`, by the replica rule
 * (moe/Planner/ReplicaRule.h); -1 for ids no slot holds. */
void moert_cuda_place(const int32_t *ids, int64_t numIds,
                      const int32_t *table, int64_t numSlots, int64_t ranks,
                      int64_t source, int32_t *out);

/* moert::migrateSlots on the device: the device copies of the slot-laid
 * globals at the host addresses `buffers` (this rank's P / ep slots of
 * `rowBytes[i]` bytes each) go from placement `from` to `to` (slot -> expert
 * tables of `numSlots` entries) over NCCL within the EP group; local slots
 * are copied on the device. Collective over that group. */
void moert_cuda_migrate_slots(const int32_t *from, const int32_t *to,
                              int64_t numSlots, void *const *buffers,
                              const int64_t *rowBytes, int64_t numBuffers);

/* The functions MLIR's gpu-to-llvm lowering calls. */
void *mgpuStreamCreate(void);
void mgpuStreamDestroy(void *stream);
void mgpuStreamSynchronize(void *stream);
void mgpuStreamWaitEvent(void *stream, void *event);
void *mgpuEventCreate(void);
void mgpuEventDestroy(void *event);
void mgpuEventSynchronize(void *event);
void mgpuEventRecord(void *event, void *stream);
void *mgpuMemAlloc(uint64_t bytes, void *stream, bool isHostShared);
void mgpuMemFree(void *ptr, void *stream);
void mgpuMemcpy(void *dst, void *src, size_t bytes, void *stream);
void mgpuMemset32(void *dst, uint32_t value, size_t count, void *stream);
void mgpuMemset16(void *dst, uint16_t value, size_t count, void *stream);
void *mgpuModuleLoad(void *data, size_t bytes);
void *mgpuModuleLoadJIT(void *data, int optLevel);
void mgpuModuleUnload(void *module);
void *mgpuModuleGetFunction(void *module, const char *name);
void mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY,
                      intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t sharedBytes, void *stream,
                      void **params, void **extra, size_t paramCount);
void mgpuSetDefaultDevice(int32_t device);

#ifdef __cplusplus
}
#endif

#endif /* MOERT_MOERT_CUDA_H */
