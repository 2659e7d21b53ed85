//===- GroupedGemm.cpp - Expert GEMMs as one cuBLAS grouped call ----------===//
//
// Row-major C_e = A_e W_e is column-major C_e^T = W_e^T A_e^T, so each group
// is cuBLAS's (m, n, k) = (N, rows_e, K) with W_e first. Experts with no rows
// are left out. The pointer arrays live on the device (cuBLAS reads them
// there) and are staged through pinned host memory kept between calls.
//
//===----------------------------------------------------------------------===//

#include "Device.h"

#include "moert/moert_cuda.h"

#include <climits>
#include <vector>

using namespace moert;
using namespace moert::cuda;

namespace {
/// Pinned host and device arrays of 3 * groups pointers.
struct PointerArrays {
  void **host = nullptr, **device = nullptr;
  size_t capacity = 0;
  /// The caller has waited for the stream: no copy reads the old arrays.
  void reserve(size_t count) {
    if (count <= capacity)
      return;
    if (host) {
      check(cudaFreeHost(host), "cudaFreeHost");
      check(cudaFree(device), "cudaFree");
    }
    check(cudaMallocHost(reinterpret_cast<void **>(&host),
                         count * sizeof(void *)),
          "cudaMallocHost");
    check(cudaMalloc(reinterpret_cast<void **>(&device), count * sizeof(void *)),
          "cudaMalloc");
    capacity = count;
  }
};
} // namespace

void moert_cuda_grouped_gemm(int32_t dtype, int64_t experts,
                             const int64_t *hostOffsets, int64_t K, int64_t N,
                             const void *A, const void *W, void *C,
                             void *stream) {
  size_t bytes = elementBytes(dtype, "moert_cuda_grouped_gemm");
  if (K > INT_MAX || N > INT_MAX || hostOffsets[experts] > INT_MAX)
    detail::fail("moert_cuda_grouped_gemm: sizes beyond int32 (K=", K,
                 " N=", N, " rows=", hostOffsets[experts], ")");
  Device &dev = device();
  cudaStream_t s = streamOr(stream);
  check(cublasSetStream(dev.blas, s), "cublasSetStream");

  std::vector<int> m, n, k, lda, ldb, ldc, groupSize;
  std::vector<const void *> a, b;
  std::vector<void *> c;
  for (int64_t e = 0; e < experts; ++e) {
    int64_t rows = hostOffsets[e + 1] - hostOffsets[e];
    if (rows < 0)
      detail::fail("moert_cuda_grouped_gemm: offsets decrease at expert ", e);
    if (rows == 0)
      continue;
    m.push_back(static_cast<int>(N));
    n.push_back(static_cast<int>(rows));
    k.push_back(static_cast<int>(K));
    lda.push_back(static_cast<int>(N));
    ldb.push_back(static_cast<int>(K));
    ldc.push_back(static_cast<int>(N));
    groupSize.push_back(1);
    a.push_back(static_cast<const char *>(W) + e * K * N * bytes);
    b.push_back(static_cast<const char *>(A) + hostOffsets[e] * K * bytes);
    c.push_back(static_cast<char *>(C) + hostOffsets[e] * N * bytes);
  }
  int groups = static_cast<int>(m.size());
  if (groups == 0)
    return;

  // An earlier call's copy out of the staging must be done before reuse.
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  static PointerArrays arrays;
  arrays.reserve(3 * static_cast<size_t>(groups));
  for (int g = 0; g < groups; ++g) {
    arrays.host[g] = const_cast<void *>(a[g]);
    arrays.host[groups + g] = const_cast<void *>(b[g]);
    arrays.host[2 * groups + g] = c[g];
  }
  check(cudaMemcpyAsync(arrays.device, arrays.host,
                        3 * groups * sizeof(void *), cudaMemcpyHostToDevice, s),
        "cudaMemcpyAsync");

  std::vector<cublasOperation_t> noTrans(groups, CUBLAS_OP_N);
  std::vector<float> alpha(groups, 1.0f), beta(groups, 0.0f);
  cudaDataType_t type = blasType(dtype);
  check(cublasGemmGroupedBatchedEx(
            dev.blas, noTrans.data(), noTrans.data(), m.data(), n.data(),
            k.data(), alpha.data(), arrays.device, type, lda.data(),
            arrays.device + groups, type, ldb.data(), beta.data(),
            arrays.device + 2 * groups, type, ldc.data(), groups,
            groupSize.data(), CUBLAS_COMPUTE_32F),
        "cublasGemmGroupedBatchedEx");
}
