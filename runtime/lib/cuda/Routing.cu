//===- Routing.cu - Gating, permutation by expert and un-permute ----------===//
//
// The token-routing kernels of an MoE layer on the GPU, for f32, f16 and
// bf16 activations (math in f32):
//   gating     one warp per token: scores, a selection bias and group-limited
//              selection, top-k by repeated warp argmax (ties to the lower
//              index, as the CPU path), weights;
//   permute    a stable counting sort of the T * k assignments by expert:
//              per-block histograms, a scan over blocks, ranks within a
//              block, then one block per row copies it, 16 bytes at a time;
//   unpermute  one block per token sums its k rows, weighted.
// The permutation is stable so that results equal the CPU path's bit for
// bit where the arithmetic allows, and capacity drops the same tokens.
//
//===----------------------------------------------------------------------===//

#include "Kernels.cuh"

#include "moe/Planner/ReplicaRule.h"
#include "moert/moert_cuda.h"

#include <algorithm>
#include <type_traits>
#include <vector>

using namespace moert;
using namespace moert::cuda;

namespace {

//===----------------------------------------------------------------------===//
// Gating
//===----------------------------------------------------------------------===//

/// Warp-wide argmax of (value, index), ties to the lower index.
__device__ inline void warpArgmax(float &value, int &index) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    float v = __shfl_xor_sync(0xffffffffu, value, offset);
    int i = __shfl_xor_sync(0xffffffffu, index, offset);
    if (v > value || (v == value && i < index)) {
      value = v;
      index = i;
    }
  }
}

__device__ inline float warpSum(float v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ inline float warpMax(float v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

/// How the gating kernel selects, beyond plain top-k of the scores: a
/// selection bias (DeepSeek-V3's, added to the scores only to select; null
/// for none) and group-limited selection (DeepSeek-V2/V3: `groups` > 0
/// contiguous groups, the `groupTopk` best by the max or the top-2 sum of
/// their keys stay, the others' keys become `masked`).
template <typename T> struct SelectionOptions {
  const T *bias = nullptr;
  int groups = 0;
  int groupTopk = 0;
  int groupScore = 0; // 0: max, 1: sum of the two largest
  float masked = -INFINITY;
};

/// The score of group `g` of `per` keys: its max, or its two largest summed.
__device__ inline float groupScoreOf(const float *keys, int g, int per,
                                     int groupScore) {
  float first = -INFINITY, second = -INFINITY;
  for (int e = g * per; e < (g + 1) * per; ++e) {
    float v = keys[e];
    if (v > first) {
      second = first;
      first = v;
    } else if (v > second) {
      second = v;
    }
  }
  return groupScore == 1 ? first + second : first;
}

/// Shared memory holds two rows per warp: the scores (what the weights are)
/// and the keys (what selects: scores plus bias, masked by group). Weights
/// are written as W (f32 for moert_cuda_topk_gating, the logits' type for
/// moe.router).
template <typename T, typename W>
__global__ void gatingKernel(const T *logits, int64_t tokens, int experts,
                             int k, int scoring, int normalize, float scale,
                             SelectionOptions<T> select, W *weights,
                             int32_t *expertIds) {
  extern __shared__ float shared[];
  int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  int64_t token = static_cast<int64_t>(blockIdx.x) * (blockDim.x / kWarp) + warp;
  if (token >= tokens)
    return;
  float *row = shared + 2 * warp * experts;
  float *keys = row + experts;
  const T *in = logits + token * experts;
  float rowMax = -INFINITY;
  for (int e = lane; e < experts; e += kWarp) {
    row[e] = toFloat(in[e]);
    rowMax = fmaxf(rowMax, row[e]);
  }
  rowMax = warpMax(rowMax);
  if (scoring == MOERT_CUDA_SOFTMAX_TOPK) {
    float sum = 0;
    for (int e = lane; e < experts; e += kWarp) {
      row[e] = __expf(row[e] - rowMax);
      sum += row[e];
    }
    sum = warpSum(sum);
    for (int e = lane; e < experts; e += kWarp)
      row[e] /= sum;
  } else if (scoring == MOERT_CUDA_SIGMOID_TOPK) {
    for (int e = lane; e < experts; e += kWarp)
      row[e] = 1.0f / (1.0f + __expf(-row[e]));
  }
  for (int e = lane; e < experts; e += kWarp)
    keys[e] = select.bias ? row[e] + toFloat(select.bias[e]) : row[e];
  __syncwarp();

  if (select.groups > 0) {
    // One lane per group (groups <= 32 is checked on the host); the best
    // groups by repeated warp argmax, ties to the lower group.
    int per = experts / select.groups;
    float score = lane < select.groups
                      ? groupScoreOf(keys, lane, per, select.groupScore)
                      : NAN;
    unsigned kept = 0;
    for (int r = 0; r < select.groupTopk; ++r) {
      float best = isnan(score) ? -INFINITY : score;
      int bestId = isnan(score) ? kWarp : lane;
      warpArgmax(best, bestId);
      kept |= 1u << bestId;
      if (lane == bestId)
        score = NAN;
    }
    // Every lane has read the keys of its group before any is masked.
    __syncwarp();
    // A NaN key stays NaN: never chosen, masked or not.
    for (int e = lane; e < experts; e += kWarp)
      if (!((kept >> (e / per)) & 1) && !isnan(keys[e]))
        keys[e] = select.masked;
    __syncwarp();
  }

  int pickedId = 0;
  for (int j = 0; j < k; ++j) {
    float best = -INFINITY;
    int bestId = experts;
    // Picked experts are NaN; -inf keys can still be picked.
    for (int e = lane; e < experts; e += kWarp)
      if (keys[e] > best || (bestId == experts && !isnan(keys[e]))) {
        best = keys[e];
        bestId = e;
      }
    warpArgmax(best, bestId);
    // No candidate left (NaN scores from NaN logits): the pair is unrouted.
    if (lane == j)
      pickedId = bestId < experts ? bestId : -1;
    if (lane == 0 && bestId < experts)
      keys[bestId] = NAN;
    __syncwarp();
  }
  // Lanes 0 .. k-1 hold the picks (k <= 32 is checked on the host); their
  // weights are the unbiased scores.
  float picked = lane < k && pickedId >= 0 ? row[pickedId] : 0;
  if (scoring == MOERT_CUDA_TOPK_SOFTMAX) {
    float top = __shfl_sync(0xffffffffu, picked, 0);
    picked = lane < k && pickedId >= 0 ? __expf(picked - top) : 0;
  }
  float total = warpSum(lane < k ? picked : 0);
  if (lane < k) {
    // moe.router's normalize divides by the sum plus 1e-20; a token left
    // unrouted (all NaN) keeps weights 0.
    if (scoring == MOERT_CUDA_TOPK_SOFTMAX)
      picked = total > 0 ? picked / total : 0;
    else if (normalize)
      picked /= total + 1e-20f;
    weights[token * k + lane] = fromFloat<W>(picked * scale);
    expertIds[token * k + lane] = pickedId;
  }
}

//===----------------------------------------------------------------------===//
// Permutation
//===----------------------------------------------------------------------===//

/// Counters the host reads back after a permutation.
struct PermuteReport {
  unsigned long long dropped;
  unsigned long long invalid;
};

/// The order in which a permutation takes the n = T * k assignments: the
/// q-th is assignment (token, slot) `pairAt(q)`, flat index token * k + slot;
/// token-major, or slot-major (moe.dispatch's `choice` policy).
struct PairOrder {
  int64_t n = 0;
  int k = 1;
  bool choiceMajor = false;
  __device__ int64_t pairAt(int64_t q) const {
    if (!choiceMajor)
      return q;
    int64_t tokens = n / k;
    return (q % tokens) * k + q / tokens;
  }
};

/// Per block of kBlock assignments (in `order`): how many go to each expert.
__global__ void blockHistogram(const int32_t *expertIds, PairOrder order,
                               int experts, int32_t *blockCounts) {
  extern __shared__ int32_t counts[];
  for (int e = threadIdx.x; e < experts; e += blockDim.x)
    counts[e] = 0;
  __syncthreads();
  int64_t q = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (q < order.n) {
    int e = expertIds[order.pairAt(q)];
    if (e >= 0 && e < experts)
      atomicAdd(&counts[e], 1);
  }
  __syncthreads();
  for (int e = threadIdx.x; e < experts; e += blockDim.x)
    blockCounts[static_cast<int64_t>(blockIdx.x) * experts + e] = counts[e];
}

/// The pairs expert e may keep: all without a capacity, else the capacity
/// less what earlier shards sent it (moe.dispatch's `after`).
__device__ inline int64_t expertLimit(int64_t capacity, const int32_t *after,
                                      int64_t stride, int e) {
  if (capacity <= 0)
    return INT64_MAX;
  int64_t limit = capacity - (after ? after[e] : 0);
  // A padded block holds `stride` rows whatever `after` says.
  if (stride > 0 && limit > stride)
    limit = stride;
  return limit > 0 ? limit : 0;
}

/// One thread per expert turns block counts into each block's first rank
/// within the expert; then offsets (kept rows per expert scanned, or e *
/// stride for padded buffers), the kept counts and the dropped count (in
/// the report, and in `dropped` when not null).
__global__ void scanBlocks(int32_t *blockCounts, int blocks, int experts,
                           int64_t capacity, const int32_t *after,
                           int64_t stride, int64_t *offsets,
                           int32_t *keptCounts, PermuteReport *report,
                           int64_t *dropped) {
  extern __shared__ int64_t kept[];
  for (int e = threadIdx.x; e < experts; e += blockDim.x) {
    int32_t running = 0;
    for (int b = 0; b < blocks; ++b) {
      int32_t c = blockCounts[static_cast<int64_t>(b) * experts + e];
      blockCounts[static_cast<int64_t>(b) * experts + e] = running;
      running += c;
    }
    int64_t limit = expertLimit(capacity, after, stride, e);
    kept[e] = running > limit ? limit : running;
    if (keptCounts)
      keptCounts[e] = static_cast<int32_t>(kept[e]);
    if (kept[e] < running)
      atomicAdd(&report->dropped,
                static_cast<unsigned long long>(running - kept[e]));
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int64_t sum = 0;
    for (int e = 0; e < experts; ++e) {
      offsets[e] = stride > 0 ? e * stride : sum;
      sum += kept[e];
    }
    offsets[experts] = stride > 0 ? experts * stride : sum;
    if (dropped)
      *dropped = static_cast<int64_t>(atomicAdd(&report->dropped, 0ull));
  }
}

/// Each assignment's row: its expert's offset, plus the rank of its block,
/// plus its rank among the block's earlier assignments to the same expert.
__global__ void placeRows(const int32_t *expertIds, PairOrder order,
                          int experts, int64_t capacity, const int32_t *after,
                          int64_t stride, const int32_t *blockFirst,
                          const int64_t *offsets,
                          int32_t *slotRow, int64_t *rowSource,
                          PermuteReport *report) {
  __shared__ int32_t ids[kBlock];
  int64_t q = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t i = q < order.n ? order.pairAt(q) : -1;
  int e = q < order.n ? expertIds[i] : -1;
  ids[threadIdx.x] = e;
  __syncthreads();
  if (q >= order.n)
    return;
  if (e < 0 || e >= experts) {
    slotRow[i] = -1;
    atomicAdd(&report->invalid, 1ull);
    return;
  }
  int32_t rank = blockFirst[static_cast<int64_t>(blockIdx.x) * experts + e];
  for (int j = 0; j < static_cast<int>(threadIdx.x); ++j)
    rank += ids[j] == e;
  if (rank >= expertLimit(capacity, after, stride, e)) {
    slotRow[i] = -1;
    return;
  }
  int64_t row = offsets[e] + rank;
  slotRow[i] = static_cast<int32_t>(row);
  rowSource[row] = i / order.k;
}

/// One block per row of the permuted buffer; rows without a source (unused
/// rows of padded buffers) are zeroed, and rows past the kept total too when
/// `zeroTail` (else they are left alone).
template <typename V>
__global__ void copyRows(const V *x, int64_t width, const int64_t *rowSource,
                         const int64_t *offsets, int experts, bool zeroTail,
                         V *out) {
  int64_t row = blockIdx.x;
  bool past = row >= offsets[experts];
  if (past && !zeroTail)
    return;
  int64_t source = past ? -1 : rowSource[row];
  V *dst = out + row * width;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x)
    dst[c] = source < 0 ? V{} : x[source * width + c];
}

//===----------------------------------------------------------------------===//
// Un-permute
//===----------------------------------------------------------------------===//

/// Weights are W: f32 for moert_cuda_unpermute, the rows' type for
/// moe.combine.
template <typename T, typename W>
__global__ void unpermuteKernel(const T *y, int64_t hidden, int k,
                                const int32_t *slotRow, const W *weights,
                                T *out) {
  int64_t token = blockIdx.x;
  for (int64_t h = threadIdx.x; h < hidden; h += blockDim.x) {
    float acc = 0;
    for (int j = 0; j < k; ++j) {
      int32_t row = slotRow[token * k + j];
      if (row >= 0)
        acc += toFloat(weights[token * k + j]) * toFloat(y[row * hidden + h]);
    }
    out[token * hidden + h] = fromFloat<T>(acc);
  }
}

template <typename T>
__global__ void fillKernel(T *dst, T value, size_t count) {
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i < count; i += static_cast<size_t>(gridDim.x) * blockDim.x)
    dst[i] = value;
}

/// Device scratch that grows and is kept: permutation bookkeeping.
struct Scratch {
  void *ptr = nullptr;
  size_t bytes = 0;
  void *get(size_t want, cudaStream_t stream) {
    if (want <= bytes)
      return ptr;
    if (ptr)
      check(cudaFreeAsync(ptr, stream), "cudaFreeAsync");
    ptr = deviceAlloc(want, stream);
    bytes = want;
    return ptr;
  }
};

size_t alignUp(size_t n) { return (n + 255) / 256 * 256; }

} // namespace

/// Launches the gating kernel with weights of type W (void: f32), and the
/// selection bias (of the logits' type) and groups of `select`.
template <typename W>
static void gating(const void *logits, int32_t dtype, int64_t tokens,
                   int64_t experts, int64_t k, int32_t scoring,
                   int32_t normalize, float scale,
                   const SelectionOptions<void> &select, void *weights,
                   int32_t *expertIds, cudaStream_t s, const char *op) {
  if (k < 1 || k > kWarp || k > experts || experts > 4096)
    detail::fail(op, ": top-", k, " of ", experts,
                 " experts is not supported (1 <= k <= min(32, E), E <= 4096)");
  if (scoring < MOERT_CUDA_SOFTMAX_TOPK || scoring > MOERT_CUDA_SIGMOID_TOPK)
    detail::fail(op, ": unknown scoring code ", scoring);
  if (select.groups < 0 || select.groups > kWarp ||
      (select.groups &&
       (experts % select.groups || select.groupTopk < 1 ||
        select.groupTopk > select.groups ||
        (select.groupScore == 1 && experts / select.groups < 2))))
    detail::fail(op, ": ", select.groups, " groups keeping ", select.groupTopk,
                 " of ", experts, " experts is not supported (at most 32 "
                 "groups that divide the experts, two per group for top-2 "
                 "sums)");
  if (tokens == 0)
    return;
  int warps = experts > 1024 ? 1 : 4;
  size_t shared = 2 * sizeof(float) * warps * experts;
  dispatchType(dtype, op, [&](auto *type) {
    using T = std::remove_pointer_t<decltype(type)>;
    using Out = std::conditional_t<std::is_void_v<W>, float, T>;
    SelectionOptions<T> typed{static_cast<const T *>(select.bias),
                              select.groups, select.groupTopk,
                              select.groupScore, select.masked};
    gatingKernel<T, Out><<<blocksFor(tokens, warps), warps * kWarp, shared, s>>>(
        static_cast<const T *>(logits), tokens, static_cast<int>(experts),
        static_cast<int>(k), scoring, normalize, scale, typed,
        static_cast<Out *>(weights), expertIds);
  });
  checkLaunch("gating kernel");
}

void moert_cuda_topk_gating(const void *logits, int32_t dtype, int64_t tokens,
                            int64_t experts, int64_t k, int32_t scoring,
                            int32_t normalize, float *weights,
                            int32_t *expertIds, void *stream) {
  gating<void>(logits, dtype, tokens, experts, k, scoring, normalize, 1.0f, {},
               weights, expertIds, streamOr(stream), "moert_cuda_topk_gating");
}

void moert_cuda_router(int32_t dtype, const void *logits, int64_t tokens,
                       int64_t experts, int64_t k, int32_t scoring,
                       int32_t normalize, double scale, const void *bias,
                       int64_t groups, int64_t groupTopk, int32_t groupScore,
                       double maskedScore, void *weights, int32_t *ids) {
  if (scoring == MOERT_CUDA_TOPK_SOFTMAX)
    detail::fail("moert_cuda_router: moe.router scores with softmax or "
                 "sigmoid (scoring code 0 or 2), not ", scoring);
  cudaStream_t s = device().stream;
  SelectionOptions<void> select{bias, static_cast<int>(groups),
                                static_cast<int>(groupTopk), groupScore,
                                static_cast<float>(maskedScore)};
  gating<char>(logits, dtype, tokens, experts, k, scoring, normalize,
               static_cast<float>(scale), select, weights, ids, s,
               "moert_cuda_router");
}

/// Lets `kernel` take `bytes` of dynamic shared memory: launches asking for
/// more than 48 KB fail unless the kernel was allowed them.
template <typename Kernel>
static void allowSharedBytes(Kernel *kernel, size_t bytes) {
  constexpr size_t kDefaultLimit = 48 * 1024;
  if (bytes > kDefaultLimit)
    check(cudaFuncSetAttribute(kernel,
                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(bytes)),
          "cudaFuncSetAttribute (shared memory for the permutation)");
}

/// Where moert_cuda_permute puts the kept pairs: packed by expert (stride
/// 0), or expert e's from row e * stride, unused rows zeroed (moe.dispatch's
/// capacity buffers), in token-major order or, with `choiceMajor`,
/// slot-major. `after` (E counts, may be null) lowers each expert's
/// capacity by the pairs that earlier shards sent it; `counts` and
/// `dropped` (device pointers, may be null) receive the kept rows per
/// expert and the pairs lost to capacity; `zeroTail` zeroes the rows of a
/// packed buffer past the kept ones.
struct Placement {
  int64_t stride = 0;
  const int32_t *after = nullptr;
  int32_t *counts = nullptr;
  int64_t *dropped = nullptr;
  bool zeroTail = false;
  bool choiceMajor = false;
};

/// Enqueues the permutation of moert_cuda_permute on `s` (pairs whose ids
/// are outside [0, experts) go nowhere: slot -1) and returns its report, in
/// device scratch that the next permutation reuses.
static PermuteReport *permute(const void *x, int32_t dtype, int64_t tokens,
                              int64_t hidden, const int32_t *expertIds,
                              int64_t k, int64_t experts, int64_t capacity,
                              void *xPermuted, int32_t *slotRow,
                              int64_t *offsets, cudaStream_t s, const char *op,
                              Placement placement = {}) {
  int64_t n = tokens * k;
  if (experts < 1 || experts > 16384 || n > INT32_MAX)
    detail::fail(op, ": ", experts, " experts and ", n,
                 " assignments are out of range");
  int blocks = std::max(1, blocksFor(n, kBlock));
  static Scratch scratch;
  size_t countsBytes = alignUp(sizeof(int32_t) * blocks * experts);
  size_t sourceBytes = alignUp(
      sizeof(int64_t) *
      std::max<int64_t>({n, experts * placement.stride, 1}));
  auto *base = static_cast<char *>(scratch.get(
      countsBytes + sourceBytes + alignUp(sizeof(PermuteReport)), s));
  auto *blockCounts = reinterpret_cast<int32_t *>(base);
  auto *rowSource = reinterpret_cast<int64_t *>(base + countsBytes);
  auto *report =
      reinterpret_cast<PermuteReport *>(base + countsBytes + sourceBytes);
  check(cudaMemsetAsync(report, 0, sizeof(PermuteReport), s), "cudaMemsetAsync");
  // Padded buffers have rows no pair fills: their source is -1 (all ones).
  int64_t outRows = placement.stride > 0 ? experts * placement.stride : n;
  if (placement.stride > 0)
    check(cudaMemsetAsync(rowSource, 0xff, sizeof(int64_t) * outRows, s),
          "cudaMemsetAsync");

  int e = static_cast<int>(experts);
  // A count per expert in shared memory: past 48 KB (6144 experts for the
  // scan) a kernel must ask for it.
  size_t histogramBytes = sizeof(int32_t) * e, scanBytes = sizeof(int64_t) * e;
  allowSharedBytes(blockHistogram, histogramBytes);
  allowSharedBytes(scanBlocks, scanBytes);
  PairOrder order{n, static_cast<int>(std::max<int64_t>(k, 1)),
                  placement.choiceMajor};
  blockHistogram<<<blocks, kBlock, histogramBytes, s>>>(expertIds, order, e,
                                                        blockCounts);
  checkLaunch("permute histogram kernel");
  scanBlocks<<<1, std::min(e, 1024), scanBytes, s>>>(
      blockCounts, blocks, e, capacity, placement.after, placement.stride,
      offsets, placement.counts, report, placement.dropped);
  checkLaunch("permute scan kernel");
  placeRows<<<blocks, kBlock, 0, s>>>(expertIds, order, e,
                                      capacity, placement.after,
                                      placement.stride, blockCounts, offsets,
                                      slotRow, rowSource, report);
  checkLaunch("permute place kernel");
  size_t rowBytes = hidden * elementBytes(dtype, op);
  if (outRows > 0 && rowBytes > 0) {
    // 16-byte moves where the rows allow, else the element size.
    if (rowBytes % 16 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
        reinterpret_cast<uintptr_t>(xPermuted) % 16 == 0)
      copyRows<<<outRows, 128, 0, s>>>(
          static_cast<const int4 *>(x), rowBytes / 16, rowSource, offsets, e,
          placement.zeroTail, static_cast<int4 *>(xPermuted));
    else
      copyRows<<<outRows, 128, 0, s>>>(
          static_cast<const char *>(x), rowBytes, rowSource, offsets, e,
          placement.zeroTail, static_cast<char *>(xPermuted));
    checkLaunch("permute copy kernel");
  }
  return report;
}

void moert_cuda_permute(const void *x, int32_t dtype, int64_t tokens,
                        int64_t hidden, const int32_t *expertIds, int64_t k,
                        int64_t experts, int64_t capacity, void *xPermuted,
                        int32_t *slotRow, int64_t *offsets,
                        int64_t *hostOffsets, int64_t *dropped, void *stream) {
  const char *op = "moert_cuda_permute";
  cudaStream_t s = streamOr(stream);
  PermuteReport *report =
      permute(x, dtype, tokens, hidden, expertIds, k, experts, capacity,
              xPermuted, slotRow, offsets, s, op);
  // The grouped GEMM needs the offsets on the host, and bad expert ids must
  // fail here rather than corrupt memory later.
  PermuteReport counters;
  std::vector<int64_t> local(experts + 1);
  int64_t *host = hostOffsets ? hostOffsets : local.data();
  check(cudaMemcpyAsync(&counters, report, sizeof counters,
                        cudaMemcpyDeviceToHost, s),
        "cudaMemcpyAsync");
  check(cudaMemcpyAsync(host, offsets, sizeof(int64_t) * (experts + 1),
                        cudaMemcpyDeviceToHost, s),
        "cudaMemcpyAsync");
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  if (counters.invalid)
    detail::fail(op, ": ", counters.invalid, " expert ids outside [0, ",
                 experts, ")");
  if (dropped)
    *dropped = static_cast<int64_t>(counters.dropped);
}

void moert_cuda_dispatch(int32_t dtype, const void *x, int64_t tokens,
                         int64_t hidden, const int32_t *ids, int64_t k,
                         int64_t experts, void *rows, int32_t *slots,
                         int32_t *counts) {
  const char *op = "moert_cuda_dispatch";
  if (tokens < 0 || hidden < 0 || k < 0 || experts < 1)
    detail::fail(op, ": bad sizes: ", tokens, " tokens of ", hidden, ", top-",
                 k, " of ", experts, " experts");
  cudaStream_t s = device().stream;
  auto *offsets = static_cast<int64_t *>(
      deviceAlloc(sizeof(int64_t) * (experts + 1), s));
  // Rows past the last group (pairs that went nowhere) are zero.
  Placement packed;
  packed.counts = counts;
  packed.zeroTail = true;
  permute(x, dtype, tokens, hidden, ids, k, experts, /*capacity=*/0, rows,
          slots, offsets, s, op, packed);
  check(cudaFreeAsync(offsets, s), "cudaFreeAsync");
}

void moert_cuda_dispatch_capacity(int32_t dtype, const void *x,
                                  int64_t tokens, int64_t hidden,
                                  const int32_t *ids, int64_t k,
                                  int64_t experts, int64_t capacity,
                                  int32_t choice_major, const int32_t *after,
                                  int64_t stride, void *rows, int32_t *slots,
                                  int32_t *counts, int64_t *dropped) {
  const char *op = "moert_cuda_dispatch_capacity";
  if (tokens < 0 || hidden < 0 || k < 0 || experts < 1 || capacity < 1 ||
      stride < std::min(capacity, tokens * k) || stride < 1 ||
      experts * stride > INT32_MAX)
    detail::fail(op, ": bad sizes: ", tokens, " tokens of ", hidden, ", top-",
                 k, " of ", experts, " experts, capacity ", capacity,
                 " in rows of ", stride, " per expert");
  cudaStream_t s = device().stream;
  auto *offsets = static_cast<int64_t *>(
      deviceAlloc(sizeof(int64_t) * (experts + 1), s));
  permute(x, dtype, tokens, hidden, ids, k, experts, capacity, rows, slots,
          offsets, s, op,
          Placement{stride, after, counts, dropped, /*zeroTail=*/false,
                    choice_major != 0});
  check(cudaFreeAsync(offsets, s), "cudaFreeAsync");
}

/// Launches the un-permute kernel with weights of type W (void: f32).
template <typename W>
static void unpermute(const void *y, int32_t dtype, int64_t tokens,
                      int64_t hidden, int64_t k, const int32_t *slotRow,
                      const void *weights, void *out, cudaStream_t s,
                      const char *op) {
  if (tokens < 0 || hidden < 0 || k < 0)
    detail::fail(op, ": bad sizes: ", tokens, " tokens of ", hidden,
                 ", top-", k);
  if (tokens == 0 || hidden == 0)
    return;
  dispatchType(dtype, op, [&](auto *type) {
    using T = std::remove_pointer_t<decltype(type)>;
    using Weight = std::conditional_t<std::is_void_v<W>, float, T>;
    unpermuteKernel<T, Weight><<<tokens, 256, 0, s>>>(
        static_cast<const T *>(y), hidden, static_cast<int>(k), slotRow,
        static_cast<const Weight *>(weights), static_cast<T *>(out));
  });
  checkLaunch("unpermute kernel");
}

void moert_cuda_unpermute(const void *y, int32_t dtype, int64_t tokens,
                          int64_t hidden, int64_t k, const int32_t *slotRow,
                          const float *weights, void *out, void *stream) {
  unpermute<void>(y, dtype, tokens, hidden, k, slotRow, weights, out,
                  streamOr(stream), "moert_cuda_unpermute");
}

void moert_cuda_combine(int32_t dtype, const void *rows, int64_t tokens,
                        int64_t width, int64_t k, const int32_t *slots,
                        const void *weights, void *out) {
  cudaStream_t s = device().stream;
  unpermute<char>(rows, dtype, tokens, width, k, slots, weights, out, s,
                  "moert_cuda_combine");
}

/// moe.place on the device: the slot serving each expert from this rank
/// (the replica rule, moe/Planner/ReplicaRule.h) into shared memory, a
/// thread per expert, then a thread per choice. One block: P is small.
__global__ void placeKernel(const int32_t *ids, int64_t n,
                            const int32_t *table, int P, int ranks, int source,
                            int32_t *out) {
  extern __shared__ int32_t serve[];
  for (int e = threadIdx.x; e < P; e += blockDim.x)
    serve[e] = static_cast<int32_t>(
        moe::planner::servingSlot(table, P, ranks, source, e));
  __syncthreads();
  for (int64_t q = threadIdx.x; q < n; q += blockDim.x)
    out[q] = ids[q] >= 0 && ids[q] < P ? serve[ids[q]] : -1;
}

void moert_cuda_place(const int32_t *ids, int64_t numIds,
                      const int32_t *table, int64_t numSlots, int64_t ranks,
                      int64_t source, int32_t *out) {
  const char *op = "moert_cuda_place";
  // A table of P in shared memory (12 KiB).
  if (numIds < 0 || numSlots < 1 || numSlots > 3072 || ranks < 1 ||
      numSlots % ranks != 0 || source < 0 || source >= ranks)
    detail::fail(op, ": ", numIds, " choices over ", numSlots,
                 " slots (at most 3072) of ", ranks, " ranks, from rank ",
                 source);
  if (numIds == 0)
    return;
  placeKernel<<<1, 256, numSlots * sizeof(int32_t), device().stream>>>(
      ids, numIds, table, static_cast<int>(numSlots), static_cast<int>(ranks),
      static_cast<int>(source), out);
  checkLaunch("place kernel");
}

void mgpuMemset32(void *dst, uint32_t value, size_t count, void *stream) {
  if (!count)
    return;
  fillKernel<<<std::min<size_t>((count + 255) / 256, 65535), 256, 0,
               streamOr(stream)>>>(static_cast<uint32_t *>(dst), value, count);
  checkLaunch("memset kernel");
}

void mgpuMemset16(void *dst, uint16_t value, size_t count, void *stream) {
  if (!count)
    return;
  fillKernel<<<std::min<size_t>((count + 255) / 256, 65535), 256, 0,
               streamOr(stream)>>>(static_cast<uint16_t *>(dst), value, count);
  checkLaunch("memset kernel");
}
