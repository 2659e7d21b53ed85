//===- GroupedGemm.cu - Expert GEMMs as one cuBLAS grouped call -----------===//
//
// moert_cuda_grouped_gemm (weights [E, K, N], offsets on the host) and
// moert_cuda_grouped_matmul (moe.experts' form: [E, N, K] weights read
// transposed, groups of rows by counts that moert_cuda_read_counts brought
// to the host; _pair: a gated FFN's two projections of the same rows) are
// one cublasGemmGroupedBatchedEx over the groups that have rows, or, where
// the groups are large, one cublasGemmEx each: cuBLAS's grouped kernel ran
// at 0.35 of its plain GEMM's rate on Mixtral's expert shapes on an H200
// (moert-cuda-bench), and a large group hides its own launch. The pointer
// arrays of a grouped call live on the device (cuBLAS reads them there)
// and are staged through pinned host memory kept between calls. Expert
// biases are written into C first, row by row, and the GEMMs accumulate
// onto them.
//
//===----------------------------------------------------------------------===//

#include "Kernels.cuh"

#include "moert/moert_cuda.h"

#include <algorithm>
#include <array>
#include <climits>
#include <type_traits>
#include <vector>

using namespace moert;
using namespace moert::cuda;

namespace {
/// The pointer arrays of a cuBLAS grouped call, copied to device memory
/// through pinned host memory. A few staging buffers are used in turn, so
/// that a call need not wait for the GPU: before one is rewritten, the host
/// waits for the call that last used it (an event recorded after it, on
/// whatever stream it ran), which the GPU finished long before in all but
/// a deep queue.
class PointerStaging {
public:
  /// The device copy of `pointers`, for a call on `stream`; `used` then
  /// records that call's end.
  void **stage(const std::vector<void *> &pointers, cudaStream_t stream) {
    Slot &slot = slots[next++ % slots.size()];
    if (slot.used)
      check(cudaEventSynchronize(slot.used), "cudaEventSynchronize");
    else
      check(cudaEventCreateWithFlags(&slot.used, cudaEventDisableTiming),
            "cudaEventCreate");
    size_t bytes = pointers.size() * sizeof(void *);
    if (pointers.size() > slot.capacity) {
      if (slot.host) {
        check(cudaFreeHost(slot.host), "cudaFreeHost");
        check(cudaFreeAsync(slot.device, stream), "cudaFreeAsync");
      }
      check(cudaMallocHost(reinterpret_cast<void **>(&slot.host), bytes),
            "cudaMallocHost");
      slot.device = static_cast<void **>(deviceAlloc(bytes, stream));
      slot.capacity = pointers.size();
    }
    std::copy(pointers.begin(), pointers.end(), slot.host);
    check(cudaMemcpyAsync(slot.device, slot.host, bytes,
                          cudaMemcpyHostToDevice, stream),
          "cudaMemcpyAsync");
    current = &slot;
    return slot.device;
  }

  /// Marks the end, on `stream`, of the call that the last stage served.
  void used(cudaStream_t stream) {
    check(cudaEventRecord(current->used, stream), "cudaEventRecord");
  }

private:
  struct Slot {
    void **host = nullptr, **device = nullptr;
    size_t capacity = 0;
    cudaEvent_t used = nullptr;
  };
  Slot *current = nullptr;
  std::array<Slot, 4> slots;
  size_t next = 0;
};
} // namespace

namespace {
/// Row r of C [rows, N] = bias[rowExpert[r]], or zeros where it is -1: one
/// block per row.
template <typename T>
__global__ void fillRowBias(T *c, int64_t n, const int32_t *rowExpert,
                            const T *bias) {
  int64_t row = blockIdx.x;
  int32_t e = rowExpert[row];
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    c[row * n + i] = e < 0 ? fromFloat<T>(0.0f) : bias[e * n + i];
}

/// One group of a grouped GEMM: row-major C [rows, N] = A [rows, K] times
/// the weight, which is [K, N] or, `transposed`, [N, K], plus beta * C.
struct Group {
  int64_t rows;
  const void *a, *w;
  void *c;
  float beta = 0.0f;
};

/// One projection of moert_cuda_grouped_matmul: C = rows x W^T (+ bias).
struct Projection {
  const void *w, *bias;
  void *c;
};
} // namespace

static int32_t gemmStrategy = MOERT_GEMM_AUTO;

void moert_cuda_set_gemm_strategy(int32_t strategy) {
  if (strategy != MOERT_GEMM_AUTO && strategy != MOERT_GEMM_GROUPED &&
      strategy != MOERT_GEMM_SEPARATE)
    detail::fail("moert_cuda_set_gemm_strategy: unknown strategy ", strategy);
  gemmStrategy = strategy;
}

/// Whether `groups` go to cuBLAS one plain GEMM each: when they average
/// 2^30 FLOPs or more, over a microsecond of a Hopper GPU's tensor cores
/// each, longer than the host takes to launch one.
static bool separateCalls(const std::vector<Group> &groups, int64_t K,
                          int64_t N) {
  if (gemmStrategy != MOERT_GEMM_AUTO)
    return gemmStrategy == MOERT_GEMM_SEPARATE;
  double flops = 0;
  for (const Group &g : groups)
    flops += 2.0 * g.rows * K * N;
  return flops >= double(groups.size()) * (1 << 30);
}

/// Every group with rows as cuBLAS GEMMs on `stream`. Row-major
/// C = A W is column-major C^T = W^T A^T: cuBLAS's (m, n, k) = (N, rows, K)
/// with the weight first, read transposed when it is stored [N, K].
static void groupedGemm(int32_t dtype, const std::vector<Group> &all,
                        int64_t K, int64_t N, bool transposed,
                        cudaStream_t stream, const char *op) {
  std::vector<Group> groups;
  for (const Group &g : all) {
    if (g.rows > INT_MAX || K > INT_MAX || N > INT_MAX)
      detail::fail(op, ": sizes beyond int32 (K=", K, " N=", N, " rows=",
                   g.rows, ")");
    if (g.rows > 0)
      groups.push_back(g);
  }
  int count = static_cast<int>(groups.size());
  if (count == 0 || N == 0)
    return;
  Device &dev = device();
  check(cublasSetStream(dev.blas, stream), "cublasSetStream");
  // Leading dimensions are at least 1 even for an empty K or N, as cuBLAS
  // requires (with K = 0 it scales C by beta).
  int ldK = static_cast<int>(std::max<int64_t>(K, 1)),
      ldN = static_cast<int>(std::max<int64_t>(N, 1));
  cudaDataType_t type = blasType(dtype);
  cublasOperation_t opW = transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (separateCalls(groups, K, N)) {
    const float one = 1.0f;
    for (const Group &g : groups)
      check(cublasGemmEx(dev.blas, opW, CUBLAS_OP_N, static_cast<int>(N),
                         static_cast<int>(g.rows), static_cast<int>(K), &one,
                         g.w, type, transposed ? ldK : ldN, g.a, type, ldK,
                         &g.beta, g.c, type, ldN, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx");
    return;
  }
  std::vector<int> m(count, N), n(count), k(count, K),
      lda(count, transposed ? ldK : ldN), ldb(count, ldK), ldc(count, ldN),
      groupSize(count, 1);
  std::vector<float> alpha(count, 1.0f), betas(count);
  // The weights', the inputs' and the outputs' pointers, in that order.
  std::vector<void *> pointers(3 * count);
  for (int g = 0; g < count; ++g) {
    n[g] = static_cast<int>(groups[g].rows);
    pointers[g] = const_cast<void *>(groups[g].w);
    pointers[count + g] = const_cast<void *>(groups[g].a);
    pointers[2 * count + g] = groups[g].c;
    betas[g] = groups[g].beta;
  }
  static PointerStaging staging;
  void **arrays = staging.stage(pointers, stream);
  std::vector<cublasOperation_t> opWs(count, opW), opA(count, CUBLAS_OP_N);
  check(cublasGemmGroupedBatchedEx(
            dev.blas, opWs.data(), opA.data(), m.data(), n.data(), k.data(),
            alpha.data(), arrays, type, lda.data(), arrays + count, type,
            ldb.data(), betas.data(), arrays + 2 * count, type, ldc.data(),
            count,
            groupSize.data(), CUBLAS_COMPUTE_32F),
        "cublasGemmGroupedBatchedEx");
  staging.used(stream);
}

void moert_cuda_grouped_gemm(int32_t dtype, int64_t experts,
                             const int64_t *hostOffsets, int64_t K, int64_t N,
                             const void *A, const void *W, void *C,
                             void *stream) {
  const char *op = "moert_cuda_grouped_gemm";
  size_t bytes = elementBytes(dtype, op);
  std::vector<Group> groups;
  for (int64_t e = 0; e < experts; ++e) {
    int64_t rows = hostOffsets[e + 1] - hostOffsets[e];
    if (rows < 0)
      detail::fail(op, ": offsets decrease at expert ", e);
    groups.push_back({rows, static_cast<const char *>(A) + hostOffsets[e] * K * bytes,
                      static_cast<const char *>(W) + e * K * N * bytes,
                      static_cast<char *>(C) + hostOffsets[e] * N * bytes});
  }
  groupedGemm(dtype, groups, K, N, /*transposed=*/false, streamOr(stream), op);
}

void moert_cuda_read_counts(const int32_t *counts, int64_t groups,
                            int32_t *hostCounts) {
  if (groups < 0)
    detail::fail("moert_cuda_read_counts: ", groups, " groups");
  Device &dev = device();
  check(cudaMemcpyAsync(hostCounts, counts, groups * sizeof(int32_t),
                        cudaMemcpyDefault, dev.stream),
        "cudaMemcpyAsync");
  check(cudaStreamSynchronize(dev.stream), "cudaStreamSynchronize");
}

/// moert_cuda_grouped_matmul for projections of the same rows: all
/// projections' groups are one cuBLAS call.
static void groupedMatmuls(int32_t dtype, int64_t groups, int64_t experts,
                           const int32_t *hostCounts, int64_t groupStride,
                           int64_t rows, int64_t K, int64_t N, const void *A,
                           const std::vector<Projection> &projections,
                           const char *op) {
  size_t bytes = elementBytes(dtype, op);
  if (groups < 0 || experts < 1 || rows < 0 || K < 0 || N < 0)
    detail::fail(op, ": bad sizes: ", groups, " groups, ", experts,
                 " experts, ", rows, " x ", K, " by ", N);
  Device &dev = device();
  std::vector<int64_t> begins =
      detail::groupBegins(hostCounts, groups, groupStride, rows, op);
  // Each group's rows start as its expert's bias, the others as zeros.
  int32_t *deviceRows = nullptr;
  for (const Projection &p : projections) {
    if (!p.bias || rows == 0 || N == 0) {
      check(cudaMemsetAsync(p.c, 0, rows * N * bytes, dev.stream),
            "cudaMemsetAsync");
      continue;
    }
    if (!deviceRows) {
      if (rows > INT_MAX)
        detail::fail(op, ": ", rows, " rows are beyond one launch's blocks");
      std::vector<int32_t> rowExpert(rows, -1);
      for (int64_t g = 0; g < groups; ++g)
        std::fill(rowExpert.begin() + begins[g],
                  rowExpert.begin() + begins[g] + hostCounts[g],
                  static_cast<int32_t>(g % experts));
      deviceRows = static_cast<int32_t *>(
          deviceAlloc(rows * sizeof(int32_t), dev.stream));
      // Pageable: the copy reads rowExpert before it returns.
      check(cudaMemcpyAsync(deviceRows, rowExpert.data(),
                            rows * sizeof(int32_t), cudaMemcpyHostToDevice,
                            dev.stream),
            "cudaMemcpyAsync");
    }
    dispatchType(dtype, op, [&](auto *type) {
      using T = std::remove_pointer_t<decltype(type)>;
      fillRowBias<T><<<rows, 256, 0, dev.stream>>>(
          static_cast<T *>(p.c), N, deviceRows, static_cast<const T *>(p.bias));
    });
    checkLaunch("bias kernel");
  }
  if (deviceRows)
    check(cudaFreeAsync(deviceRows, dev.stream), "cudaFreeAsync");
  std::vector<Group> list;
  for (const Projection &p : projections)
    for (int64_t g = 0; g < groups; ++g)
      list.push_back({hostCounts[g],
                      static_cast<const char *>(A) + begins[g] * K * bytes,
                      static_cast<const char *>(p.w) +
                          (g % experts) * N * K * bytes,
                      static_cast<char *>(p.c) + begins[g] * N * bytes,
                      p.bias ? 1.0f : 0.0f});
  groupedGemm(dtype, list, K, N, /*transposed=*/true, dev.stream, op);
}

void moert_cuda_grouped_matmul(int32_t dtype, int64_t groups, int64_t experts,
                               const int32_t *hostCounts, int64_t groupStride,
                               int64_t rows, int64_t K, int64_t N,
                               const void *A, const void *W, const void *bias,
                               void *C) {
  groupedMatmuls(dtype, groups, experts, hostCounts, groupStride, rows, K, N,
                 A, {{W, bias, C}}, "moert_cuda_grouped_matmul");
}

void moert_cuda_grouped_matmul_pair(int32_t dtype, int64_t groups,
                                    int64_t experts, const int32_t *hostCounts,
                                    int64_t groupStride, int64_t rows,
                                    int64_t K, int64_t N, const void *A,
                                    const void *W1, const void *bias1,
                                    void *C1, const void *W3,
                                    const void *bias3, void *C3) {
  groupedMatmuls(dtype, groups, experts, hostCounts, groupStride, rows, K, N,
                 A, {{W1, bias1, C1}, {W3, bias3, C3}},
                 "moert_cuda_grouped_matmul_pair");
}
