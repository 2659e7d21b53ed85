//===- OrderedGemm.h - f32 GEMMs whose sums have one order ------*- C++ -*-===//
//
// Internal to runtime/lib. Where oneDNN has no brgemm kernels for f32 (a CPU
// without AVX-512, or ONEDNN_MAX_CPU_ISA below AVX512_CORE), its matmul
// falls back to a JIT sgemm whose K blocking and thread split follow the
// shape: the same row of A times the same B gives other bits when the
// row count changes (experts re-placed, groups merged) or when B is
// packed. There every f32 matmul of the runtime runs here instead: each
// element of C is one chain of fused multiply-adds over k = 0 .. K-1 from
// zero, then added to C where C accumulates. The chain does not depend on
// M, on the rows beside a row, on zero rows or columns padded on, on how
// B is laid out, on the thread count, nor on the kernel (AVX2 and FMA, or
// the scalar std::fma loop where the CPU has neither: the same bits).
//
//===----------------------------------------------------------------------===//

#ifndef MOERT_LIB_ORDEREDGEMM_H
#define MOERT_LIB_ORDEREDGEMM_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace moert::detail {

/// Whether the runtime's f32 matmuls run here: oneDNN's effective ISA
/// (the machine's, capped by ONEDNN_MAX_CPU_ISA) lacks AVX512_CORE.
/// MOERT_ORDERED_GEMM=1 chooses it on any machine (tests, benchmarks).
bool useOrderedGemm();

/// Columns of B per panel: [K][kPanelCols] floats, zero past N.
inline constexpr int64_t kPanelCols = 16;

/// C [M, N] (+)= A [M, K] B [K, N], every operand strided as given.
struct OrderedGemmProblem {
  const float *A;
  int64_t sAm, sAk;
  const float *B;
  int64_t sBk, sBn;
  float *C;
  int64_t sCm, sCn;
  int64_t M, N, K;
  /// C += A B (the sum added to C), else C = A B.
  bool accumulate;
  /// B already in panels (packPanels), or null: packed per work item.
  const float *panels = nullptr;
};

/// B [K, N] (strides sBk, sBn) as ceil(N / kPanelCols) panels.
std::vector<float> packPanels(const float *B, int64_t sBk, int64_t sBn,
                              int64_t K, int64_t N);

/// Runs every problem on the threads of the OpenMP pool that oneDNN uses.
void runOrderedGemms(const std::vector<OrderedGemmProblem> &problems);

/// The panels of an expert weight W [N, K] (read transposed as B), packed
/// once and kept until forgetPanels (the caller asks only while the weights
/// stay constant); null when the packed copies would hold more than
/// `budgetBytes` in all.
const float *cachedWeightPanels(const float *W, int64_t N, int64_t K,
                                size_t budgetBytes);
void forgetPanels();

} // namespace moert::detail

#endif // MOERT_LIB_ORDEREDGEMM_H
