//===- FewRows.cpp - Expert GEMMs of a few rows at memory speed -----------===//
//
// In decode each expert gets a handful of rows (T k / E: 4 for T = 64, k = 4,
// E = 64), so the expert GEMMs read every weight once and do a few FMAs per
// weight: memory-bound. oneDNN repacks the [out, in] weight for such shapes
// and reached half the bandwidth of a matrix-vector product. Here each
// output n is the dot product of the (cache-resident) rows of A with weight
// row n, streamed once (and prefetched ahead): three or four weight rows at
// a time with AVX-512, one accumulator per (row, weight row), so a row's
// sums are the same in every call. Only where oneDNN has its AVX-512
// kernels: elsewhere every GEMM is OrderedGemm's.
// Every small group of a grouped GEMM is one list
// of (group, block of weight rows) items that the threads of oneDNN's own
// OpenMP pool share (GOMP_parallel), so the call spreads over the cores
// without a second pool competing with oneDNN's.
//
//===----------------------------------------------------------------------===//

#include "FewRows.h"
#include "WorkItems.h"

#include <immintrin.h>

#include <algorithm>

using namespace moert::detail;

namespace {

/// How far ahead of the loads each weight stream is prefetched, in floats:
/// the hardware prefetchers alone left 4 to 8 rows' kernels at 50% to 70%
/// of the read bandwidth (moert-cpu-bench --rows R); 1 KiB ahead took
/// them to 60% to 90% (a 2-core Zen 5).
constexpr int64_t kPrefetchFloats = 256;

/// Prefetches the line `kPrefetchFloats` past `w`.
inline void prefetchAhead(const float *w) {
  _mm_prefetch(reinterpret_cast<const char *>(w + kPrefetchFloats),
               _MM_HINT_T0);
}

/// One step of 16 floats of K (the tail masked) for `Rows` rows of A
/// against `Streams` weight rows read side by side: one accumulator per
/// (row, weight row), so every element is the same sum whatever `Streams`.
template <int Rows, int Streams>
__attribute__((target("avx512f"), always_inline)) inline void
stepAvx512(const FewRowsProblem &p, const float *const *w, int64_t k,
           __mmask16 mask, __m512 (&acc)[Streams][Rows]) {
  __m512 x[Streams];
  for (int s = 0; s < Streams; ++s)
    x[s] = _mm512_maskz_loadu_ps(mask, w[s] + k);
  for (int m = 0; m < Rows; ++m) {
    __m512 a = _mm512_maskz_loadu_ps(mask, p.A + m * p.K + k);
    for (int s = 0; s < Streams; ++s)
      acc[s][m] = _mm512_fmadd_ps(a, x[s], acc[s][m]);
  }
}

/// C[m, n..n+Streams) for `Rows` rows of A, with AVX-512.
template <int Rows, int Streams>
__attribute__((target("avx512f"), always_inline)) inline void
dotStreamsAvx512(const FewRowsProblem &p, int64_t n) {
  const int64_t K = p.K, full = K & ~int64_t(15);
  const __mmask16 tail = static_cast<__mmask16>((1u << (K - full)) - 1);
  const float *w[Streams];
  for (int s = 0; s < Streams; ++s)
    w[s] = p.W + (n + s) * K;
  __m512 acc[Streams][Rows];
  for (int s = 0; s < Streams; ++s)
    for (int m = 0; m < Rows; ++m)
      acc[s][m] = _mm512_setzero_ps();
  for (int64_t k = 0; k < full; k += 16) {
    for (int s = 0; s < Streams; ++s)
      prefetchAhead(w[s] + k);
    stepAvx512<Rows, Streams>(p, w, k, 0xffff, acc);
  }
  if (tail)
    stepAvx512<Rows, Streams>(p, w, full, tail, acc);
  for (int m = 0; m < Rows; ++m)
    for (int s = 0; s < Streams; ++s) {
      float &c = p.C[m * p.N + n + s];
      float sum = _mm512_reduce_add_ps(acc[s][m]);
      c = p.accumulate ? c + sum : sum;
    }
}

/// The same with AVX-512, as many weight rows at a time as the 32
/// registers hold accumulators for (four streams read faster than two
/// here).
template <int Rows>
__attribute__((target("avx512f"))) void
dotRowsAvx512(const FewRowsProblem &p, int64_t n0, int64_t n1) {
  constexpr int kStreams = Rows <= 6 ? 4 : 3;
  int64_t n = n0;
  for (; n + kStreams <= n1; n += kStreams)
    dotStreamsAvx512<Rows, kStreams>(p, n);
  for (; n < n1; ++n)
    dotStreamsAvx512<Rows, 1>(p, n);
}

using DotRows = void (*)(const FewRowsProblem &, int64_t, int64_t);

DotRows kernelFor(int64_t rows) {
  static constexpr DotRows byRows[] = {
      nullptr,          dotRowsAvx512<1>, dotRowsAvx512<2>,
      dotRowsAvx512<3>, dotRowsAvx512<4>, dotRowsAvx512<5>,
      dotRowsAvx512<6>, dotRowsAvx512<7>, dotRowsAvx512<8>};
  return byRows[rows];
}

/// Weight rows per work item: 64 rows of 1024 to 3584 floats (256 KiB to
/// 0.9 MiB) keep the item list short and the threads' shares even.
constexpr int64_t kBlock = 64;

/// One work item: rows [m0, m0 + kMaxFewRows) of a problem against weight
/// rows [n0, n0 + kBlock).
struct Item {
  size_t problem;
  int64_t m0, n0;
};

/// One work item: its rows as a problem of their own (a row's sums never
/// depend on the rows beside it) against its block of weight rows.
void runItem(FewRowsProblem p, const Item &item) {
  p.A += item.m0 * p.K;
  p.C += item.m0 * p.N;
  p.M = std::min(kMaxFewRows, p.M - item.m0);
  kernelFor(p.M)(p, item.n0, std::min(item.n0 + kBlock, p.N));
}

} // namespace

void moert::detail::runFewRows(const std::vector<FewRowsProblem> &problems) {
  std::vector<Item> items;
  for (size_t i = 0; i < problems.size(); ++i)
    for (int64_t m0 = 0; m0 < problems[i].M; m0 += kMaxFewRows)
      for (int64_t n0 = 0; n0 < problems[i].N; n0 += kBlock)
        items.push_back({i, m0, n0});
  shareItems(items.size(), [&](size_t i) {
    runItem(problems[items[i].problem], items[i]);
  });
}
