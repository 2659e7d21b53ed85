//===- Matmul.cpp - Strided f32 matrix multiply-accumulate ----------------===//
//
// Compiled code passes operands with arbitrary strides (transposed weights,
// slices of expert buffers). cblas_sgemm takes a row-major matrix with a
// leading dimension, transposed or not, so any operand with a unit stride
// maps onto it; C, which cblas cannot transpose, maps through
// C^T = B^T A^T. Anything else takes a plain loop.
//
//===----------------------------------------------------------------------===//

#include "Process.h"

#include "moert/moert.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <climits>

using namespace moert;

namespace {
/// A rows x cols matrix: element (r, c) at r * sRow + c * sCol.
struct View {
  int64_t rows, cols, sRow, sCol;
  View t() const { return {cols, rows, sCol, sRow}; }
};
} // namespace

/// True when `v` is a row-major matrix with leading dimension `ld`. Strides
/// along an extent of 1 are never used, so they do not matter.
static bool isRowMajor(const View &v, int64_t &ld) {
  if (v.cols > 1 && v.sCol != 1)
    return false;
  ld = v.rows > 1 ? v.sRow : std::max<int64_t>(v.cols, 1);
  return ld >= std::max<int64_t>(v.cols, 1) && ld <= INT_MAX;
}

/// How cblas reads `v`: as stored, or as the transpose of what is stored.
static bool blasLayout(const View &v, CBLAS_TRANSPOSE &trans, int64_t &ld) {
  trans = CblasNoTrans;
  if (isRowMajor(v, ld))
    return true;
  trans = CblasTrans;
  return isRowMajor(v.t(), ld);
}

/// C += A B through cblas_sgemm; false when a layout does not fit.
static bool gemmBlas(const View &a, const float *A, const View &b,
                     const float *B, const View &c, float *C) {
  CBLAS_TRANSPOSE ta, tb, tc;
  int64_t lda, ldb, ldc;
  if (!blasLayout(c, tc, ldc))
    return false;
  if (tc == CblasTrans)
    return gemmBlas(b.t(), B, a.t(), A, c.t(), C);
  if (!blasLayout(a, ta, lda) || !blasLayout(b, tb, ldb) ||
      std::max({c.rows, c.cols, a.cols}) > INT_MAX)
    return false;
  cblas_sgemm(CblasRowMajor, ta, tb, c.rows, c.cols, a.cols, 1.0f, A, lda, B,
              ldb, 1.0f, C, ldc);
  return true;
}

static void gemmLoop(const View &a, const float *A, const View &b,
                     const float *B, const View &c, float *C) {
  for (int64_t m = 0; m < c.rows; ++m)
    for (int64_t n = 0; n < c.cols; ++n) {
      float acc = 0;
      for (int64_t k = 0; k < a.cols; ++k)
        acc += A[m * a.sRow + k * a.sCol] * B[k * b.sRow + n * b.sCol];
      C[m * c.sRow + n * c.sCol] += acc;
    }
}

void moert_matmul_f32(int64_t M, int64_t N, int64_t K, const float *A,
                      int64_t sAm, int64_t sAk, const float *B, int64_t sBk,
                      int64_t sBn, float *C, int64_t sCm, int64_t sCn,
                      int32_t site) {
  if (M < 0 || N < 0 || K < 0)
    detail::fail("moert_matmul_f32: negative size M=", M, " N=", N, " K=", K);
  if (M == 0 || N == 0 || K == 0)
    return;
  auto start = std::chrono::steady_clock::now();
  View a{M, K, sAm, sAk}, b{K, N, sBk, sBn}, c{M, N, sCm, sCn};
  if (!gemmBlas(a, A, b, B, c, C))
    gemmLoop(a, A, b, B, c, C);
  if (site == 1)
    detail::recordGemm(
        2.0 * M * N * K,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
}

void moert::setThreads(int threads) {
  if (threads > 0)
    openblas_set_num_threads(threads);
}
