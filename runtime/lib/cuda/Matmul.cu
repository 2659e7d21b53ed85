//===- Matmul.cu - Strided matmuls through cuBLAS -------------------------===//
//
// What convert-matmul-to-runtime emits for --target=cuda. cuBLAS is
// column-major: a strided rows x cols view is a column-major matrix when
// its row stride is 1, or the transpose of one when its column stride is 1.
// A row-major C = A B is computed as the column-major C^T = B^T A^T. A
// batch of problems (attention's heads) is one strided-batched call. Views
// that are neither (broadcast operands with a zero stride, sizes past int32)
// go to a plain kernel, one thread per element of C. Everything runs in
// order on the runtime's stream.
//
//===----------------------------------------------------------------------===//

#include "Kernels.cuh"

#include <chrono>
#include <climits>
#include <optional>

using namespace moert;
using namespace moert::cuda;

namespace {

/// A rows x cols matrix at `data`, element (r, c) at r * sRow + c * sCol.
struct View {
  int64_t rows, cols, sRow, sCol;
  View transposed() const { return {cols, rows, sCol, sRow}; }
};

/// How cuBLAS reads a view: as stored (N) or transposed (T), and its
/// leading dimension.
struct BlasOperand {
  cublasOperation_t op;
  int ld;
};

bool fitsInt(int64_t v) { return v >= 0 && v <= INT_MAX; }

std::optional<BlasOperand> asBlas(const View &v) {
  // Column-major: (r, c) at r + c * ld, ld >= rows.
  if (v.rows == 1 || v.sRow == 1) {
    int64_t ld = v.cols == 1 ? std::max<int64_t>(v.rows, 1) : v.sCol;
    if (ld >= std::max<int64_t>(v.rows, 1) && fitsInt(ld))
      return BlasOperand{CUBLAS_OP_N, static_cast<int>(ld)};
  }
  // Its transpose is column-major: (r, c) at c + r * ld, ld >= cols.
  if (v.cols == 1 || v.sCol == 1) {
    int64_t ld = v.rows == 1 ? std::max<int64_t>(v.cols, 1) : v.sRow;
    if (ld >= std::max<int64_t>(v.cols, 1) && fitsInt(ld))
      return BlasOperand{CUBLAS_OP_T, static_cast<int>(ld)};
  }
  return std::nullopt;
}

/// The batch strides of A, B and C (in elements; 0: the same matrix for
/// every problem), and the batch size.
struct Batch {
  int64_t size, sA, sB, sC;
};

/// C = A B (+ C), for each problem of `batch`, through cuBLAS where every
/// view allows it and C is column-major as stored; false otherwise.
bool blasGemm(cudaDataType_t type, const Batch &batch, const View &a,
              const void *A, const View &b, const void *B, const View &c,
              void *C, bool accumulate) {
  std::optional<BlasOperand> opA = asBlas(a), opB = asBlas(b), opC = asBlas(c);
  if (!opA || !opB || !opC || opC->op != CUBLAS_OP_N || !fitsInt(c.rows) ||
      !fitsInt(c.cols) || !fitsInt(a.cols) || !fitsInt(batch.size) ||
      batch.sA < 0 || batch.sB < 0 || batch.sC < 0)
    return false;
  float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  int m = static_cast<int>(c.rows), n = static_cast<int>(c.cols),
      k = static_cast<int>(a.cols);
  if (batch.size == 1)
    check(cublasGemmEx(device().blas, opA->op, opB->op, m, n, k, &alpha, A,
                       type, opA->ld, B, type, opB->ld, &beta, C, type,
                       opC->ld, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
  else
    check(cublasGemmStridedBatchedEx(
              device().blas, opA->op, opB->op, m, n, k, &alpha, A, type,
              opA->ld, batch.sA, B, type, opB->ld, batch.sB, &beta, C, type,
              opC->ld, batch.sC, static_cast<int>(batch.size),
              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmStridedBatchedEx");
  return true;
}

template <typename T>
__global__ void stridedGemm(Batch batch, View a, const T *A, View b,
                            const T *B, View c, T *C, bool accumulate) {
  int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (index >= batch.size * c.rows * c.cols)
    return;
  int64_t problem = index / (c.rows * c.cols), element = index % (c.rows * c.cols);
  int64_t m = element / c.cols, n = element % c.cols;
  A += problem * batch.sA;
  B += problem * batch.sB;
  C += problem * batch.sC;
  float sum = 0;
  for (int64_t k = 0; k < a.cols; ++k)
    sum += toFloat(A[m * a.sRow + k * a.sCol]) *
           toFloat(B[k * b.sRow + n * b.sCol]);
  T &out = C[m * c.sRow + n * c.sCol];
  out = fromFloat<T>(accumulate ? toFloat(out) + sum : sum);
}

} // namespace

void moert_cuda_matmul(int32_t dtype, int64_t batch, int64_t M, int64_t N,
                       int64_t K, const void *A, int64_t sAb, int64_t sAm,
                       int64_t sAk, const void *B, int64_t sBb, int64_t sBk,
                       int64_t sBn, void *C, int64_t sCb, int64_t sCm,
                       int64_t sCn, int32_t accumulate, int32_t site) {
  elementBytes(dtype, "moert_cuda_matmul");
  if (batch < 0 || M < 0 || N < 0 || K < 0)
    detail::fail("moert_cuda_matmul: negative size batch=", batch, " M=", M,
                 " N=", N, " K=", K);
  if (batch == 0 || M == 0 || N == 0)
    return;
  if (batch > 1 && sCb == 0)
    detail::fail("moert_cuda_matmul: the output repeats over a batch of ",
                 batch);
  if (batch == 1)
    sAb = sBb = sCb = 0;
  Device &dev = device();
  // An expert GEMM is timed, alone on the device; others run in stream order.
  bool timed = site == 1;
  if (timed)
    check(cudaStreamSynchronize(dev.stream), "cudaStreamSynchronize");
  auto start = std::chrono::steady_clock::now();
  check(cublasSetStream(dev.blas, dev.stream), "cublasSetStream");
  View a{M, K, sAm, sAk}, b{K, N, sBk, sBn}, c{M, N, sCm, sCn};
  bool add = accumulate != 0;
  cudaDataType_t type = blasType(dtype);
  // C column-major: C = A B; C row-major: C^T = B^T A^T.
  bool done = K > 0 && (blasGemm(type, {batch, sAb, sBb, sCb}, a, A, b, B, c,
                                 C, add) ||
                        blasGemm(type, {batch, sBb, sAb, sCb}, b.transposed(),
                                 B, a.transposed(), A, c.transposed(), C, add));
  if (!done)
    dispatchType(dtype, "moert_cuda_matmul", [&](auto *type) {
      using T = std::remove_pointer_t<decltype(type)>;
      stridedGemm<T>
          <<<blocksFor(batch * M * N, kBlock), kBlock, 0, dev.stream>>>(
              {batch, sAb, sBb, sCb}, a, static_cast<const T *>(A), b,
              static_cast<const T *>(B), c, static_cast<T *>(C), add);
      checkLaunch("moert_cuda_matmul (strided kernel)");
    });
  if (!timed)
    return;
  check(cudaStreamSynchronize(dev.stream), "cudaStreamSynchronize");
  detail::recordGemm(
      2.0 * batch * M * N * K,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count());
}
