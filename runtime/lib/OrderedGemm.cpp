//===- OrderedGemm.cpp - f32 GEMMs whose sums have one order --------------===//
//
// The kernel is the classic broadcast form: 6 rows of A against a panel of
// 16 columns of B, twelve AVX2 accumulators, one FMA per k and element, so
// each element's chain is k = 0 .. K-1 whatever the tile it falls in
// (OrderedGemm.h says why the order matters). B is read from panels
// [K][16], packed per work item (a work item's rows are many, so the copy
// is a small share) or once for a constant weight. Work items are
// (problem, 64 columns, up to 192 rows), shared by the threads of oneDNN's
// OpenMP pool as FewRows.cpp does.
//
//===----------------------------------------------------------------------===//

#include "OrderedGemm.h"
#include "WorkItems.h"

#include <oneapi/dnnl/dnnl.h>

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <tuple>

using namespace moert::detail;

bool moert::detail::useOrderedGemm() {
  static const bool ordered = [] {
    if (const char *v = std::getenv("MOERT_ORDERED_GEMM");
        v && std::string(v) == "1")
      return true;
    unsigned isa = dnnl_get_effective_cpu_isa();
    return (isa & dnnl_cpu_isa_avx512_core) != dnnl_cpu_isa_avx512_core;
  }();
  return ordered;
}

namespace {

constexpr int64_t kRowsPerTile = 6;
constexpr int64_t kPanelsPerItem = 4;
constexpr int64_t kRowsPerItem = 32 * kRowsPerTile;

const bool kHasAvx2 =
    __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");

void packPanel(const float *B, int64_t sBk, int64_t sBn, int64_t K,
               int64_t cols, float *panel) {
  for (int64_t k = 0; k < K; ++k) {
    float *row = panel + k * kPanelCols;
    const float *from = B + k * sBk;
    if (sBn == 1) {
      std::memcpy(row, from, cols * sizeof(float));
    } else {
      for (int64_t j = 0; j < cols; ++j)
        row[j] = from[j * sBn];
    }
    std::fill(row + cols, row + kPanelCols, 0.0f);
  }
}

/// Writes a tile's sums: C = sum, or C += sum.
inline void store(const OrderedGemmProblem &p, int64_t m, int64_t n0,
                  int64_t cols, const float *sums) {
  float *c = p.C + m * p.sCm + n0 * p.sCn;
  for (int64_t j = 0; j < cols; ++j) {
    float &out = c[j * p.sCn];
    out = p.accumulate ? out + sums[j] : sums[j];
  }
}

/// Rows [m0, m0 + Rows) against one panel, with AVX2 and FMA.
template <int Rows>
__attribute__((target("avx2,fma"))) void
tileAvx2(const OrderedGemmProblem &p, int64_t m0, int64_t n0, int64_t cols,
         const float *panel) {
  __m256 acc[Rows][2];
  for (int m = 0; m < Rows; ++m)
    acc[m][0] = acc[m][1] = _mm256_setzero_ps();
  const float *a = p.A + m0 * p.sAm;
  for (int64_t k = 0; k < p.K; ++k) {
    __m256 b0 = _mm256_loadu_ps(panel + k * kPanelCols);
    __m256 b1 = _mm256_loadu_ps(panel + k * kPanelCols + 8);
    for (int m = 0; m < Rows; ++m) {
      __m256 x = _mm256_broadcast_ss(a + m * p.sAm + k * p.sAk);
      acc[m][0] = _mm256_fmadd_ps(x, b0, acc[m][0]);
      acc[m][1] = _mm256_fmadd_ps(x, b1, acc[m][1]);
    }
  }
  alignas(32) float sums[kPanelCols];
  for (int m = 0; m < Rows; ++m) {
    _mm256_store_ps(sums, acc[m][0]);
    _mm256_store_ps(sums + 8, acc[m][1]);
    store(p, m0 + m, n0, cols, sums);
  }
}

/// The same chains one element at a time, for a CPU without AVX2 and FMA.
void tileScalar(const OrderedGemmProblem &p, int64_t m0, int64_t rows,
                int64_t n0, int64_t cols, const float *panel) {
  float sums[kPanelCols];
  for (int64_t m = m0; m < m0 + rows; ++m) {
    for (int64_t j = 0; j < cols; ++j) {
      float acc = 0;
      for (int64_t k = 0; k < p.K; ++k)
        acc = std::fma(p.A[m * p.sAm + k * p.sAk], panel[k * kPanelCols + j],
                       acc);
      sums[j] = acc;
    }
    store(p, m, n0, cols, sums);
  }
}

using Tile = void (*)(const OrderedGemmProblem &, int64_t, int64_t, int64_t,
                      const float *);
constexpr Tile kTiles[] = {nullptr,     tileAvx2<1>, tileAvx2<2>, tileAvx2<3>,
                           tileAvx2<4>, tileAvx2<5>, tileAvx2<6>};

/// Rows [m0, m1) against one panel.
void rowsTimesPanel(const OrderedGemmProblem &p, int64_t m0, int64_t m1,
                    int64_t n0, int64_t cols, const float *panel) {
  if (!kHasAvx2)
    return tileScalar(p, m0, m1 - m0, n0, cols, panel);
  for (int64_t m = m0; m < m1; m += kRowsPerTile) {
    int64_t rows = std::min(kRowsPerTile, m1 - m);
    kTiles[rows](p, m, n0, cols, panel);
  }
}

struct Item {
  size_t problem;
  int64_t m0, panel0;
};

/// One work item's panels times its rows; `scratch` holds a panel packed
/// here (one per thread: each runs its own copy of the body).
void runItem(const OrderedGemmProblem &p, const Item &item,
             std::vector<float> &scratch) {
  int64_t panels = (p.N + kPanelCols - 1) / kPanelCols;
  int64_t m1 = std::min(item.m0 + kRowsPerItem, p.M);
  for (int64_t q = item.panel0;
       q < std::min(item.panel0 + kPanelsPerItem, panels); ++q) {
    int64_t n0 = q * kPanelCols, cols = std::min(kPanelCols, p.N - n0);
    const float *panel;
    if (p.panels) {
      panel = p.panels + q * p.K * kPanelCols;
    } else {
      scratch.resize(p.K * kPanelCols);
      packPanel(p.B + n0 * p.sBn, p.sBk, p.sBn, p.K, cols, scratch.data());
      panel = scratch.data();
    }
    rowsTimesPanel(p, item.m0, m1, n0, cols, panel);
  }
}

} // namespace

std::vector<float> moert::detail::packPanels(const float *B, int64_t sBk,
                                             int64_t sBn, int64_t K,
                                             int64_t N) {
  int64_t panels = (N + kPanelCols - 1) / kPanelCols;
  std::vector<float> packed(panels * K * kPanelCols);
  for (int64_t q = 0; q < panels; ++q)
    packPanel(B + q * kPanelCols * sBn, sBk, sBn, K,
              std::min(kPanelCols, N - q * kPanelCols),
              packed.data() + q * K * kPanelCols);
  return packed;
}

void moert::detail::runOrderedGemms(
    const std::vector<OrderedGemmProblem> &problems) {
  std::vector<Item> items;
  for (size_t i = 0; i < problems.size(); ++i) {
    const OrderedGemmProblem &p = problems[i];
    if (p.M == 0 || p.N == 0)
      continue;
    if (p.K == 0) { // an empty sum: C stays, or becomes 0
      if (!p.accumulate)
        for (int64_t m = 0; m < p.M; ++m)
          for (int64_t n = 0; n < p.N; ++n)
            p.C[m * p.sCm + n * p.sCn] = 0;
      continue;
    }
    int64_t panels = (p.N + kPanelCols - 1) / kPanelCols;
    for (int64_t q = 0; q < panels; q += kPanelsPerItem)
      for (int64_t m0 = 0; m0 < p.M; m0 += kRowsPerItem)
        items.push_back({i, m0, q});
  }
  shareItems(items.size(),
             [&, scratch = std::vector<float>()](size_t i) mutable {
               runItem(problems[items[i].problem], items[i], scratch);
             });
}

namespace {
struct PanelCache {
  std::map<std::tuple<const float *, int64_t, int64_t>, std::vector<float>>
      panels;
  size_t bytes = 0;
};
PanelCache &panelCache() {
  static PanelCache *cache = new PanelCache(); // lives as long as the process
  return *cache;
}
} // namespace

const float *moert::detail::cachedWeightPanels(const float *W, int64_t N,
                                               int64_t K, size_t budgetBytes) {
  PanelCache &cache = panelCache();
  auto key = std::make_tuple(W, N, K);
  auto it = cache.panels.find(key);
  if (it == cache.panels.end()) {
    size_t size = ((N + kPanelCols - 1) / kPanelCols) * K * kPanelCols *
                  sizeof(float);
    if (cache.bytes + size > budgetBytes)
      return nullptr;
    // W [N, K] read as B [K, N]: B's k stride 1, n stride K.
    it = cache.panels.emplace(key, packPanels(W, 1, K, K, N)).first;
    cache.bytes += size;
  }
  return it->second.data();
}

void moert::detail::forgetPanels() {
  PanelCache &cache = panelCache();
  cache.panels.clear();
  cache.bytes = 0;
}
