//===- Matmul.cpp - Strided f32 matrix multiply-accumulate ----------------===//
//
// Compiled code passes operands with arbitrary strides (weights read
// transposed, slices of expert buffers, attention heads). oneDNN's matmul
// takes any strides directly, so no operand is copied or repacked by us; its
// brgemm kernels read the `[out, in]` expert weights as they are stored and
// beat a BLAS sgemm on the skinny expert GEMMs. A batch (attention's heads)
// is one 3-D matmul, an operand that repeats over it a batch dimension of
// one. C += A B is the matmul with a sum post-op; C = A B, where the
// compiler saw C freshly zeroed, without. Primitives are kept per shape and
// stride: expert GEMMs see a new row count whenever the routing changes, and
// building a primitive (JIT included) costs a fraction of a millisecond, so
// a product's rows are cut into a multiple of 32 and the rest, two kernels
// of few distinct row counts (a row's sums do not depend on its
// neighbours). A layout oneDNN refuses
// (a broadcast operand's zero stride) takes a plain loop.
//
// Read as stored, an expert weight is copied into oneDNN's blocked layout
// inside every call: on this project's 2-core Xeon, a quarter of the time
// of a 64-row expert GEMM (5% at 1024 rows). While the weights stay as
// they are (moe-run: setWeightsConstant, until re-placement moves them),
// each expert weight is packed into that layout once and kept. The layout
// does not depend on the row count, and the products are the same bits.
//
//===----------------------------------------------------------------------===//

#include "FewRows.h"
#include "OrderedGemm.h"
#include "Process.h"

#include "moert/moert.h"

#include <oneapi/dnnl/dnnl.h>

#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <optional>
#include <tuple>
#include <unistd.h>
#include <cstdlib>
#include <string>
#include <ctime>
#include <algorithm>
#include <vector>

using namespace moert;

// libgomp's, the OpenMP runtime oneDNN runs on (its omp.h is GCC's, not on
// clang's include path).
extern "C" void omp_set_num_threads(int);

namespace {
/// A rows x cols matrix: element (r, c) at r * sRow + c * sCol.
struct View {
  int64_t rows, cols, sRow, sCol;
};

/// An operand's batch dimension: its size and stride (stride 0: the same
/// matrix for every problem).
struct Batch {
  int64_t size, stride;
};

/// The batch, M, N, K, the nine strides, whether C accumulates and whether
/// B is packed: what a primitive is built for.
using Shape = std::array<int64_t, 15>;

/// One matmul primitive and the memory objects it runs on; only their data
/// handles change from call to call.
struct Kernel {
  dnnl_primitive_t primitive = nullptr;
  dnnl_memory_t a = nullptr, b = nullptr, c = nullptr;
};

/// Packed copies of weights beyond a quarter of the machine's memory stay
/// unpacked: a model's expert weights may be most of it.
size_t maxPackedBytes() {
  static const size_t bytes = static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) *
                              static_cast<size_t>(sysconf(_SC_PAGESIZE)) / 4;
  return bytes;
}

class Matmuls {
public:
  Matmuls() {
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) !=
            dnnl_success)
      detail::fail("moert_matmul_f32: oneDNN has no CPU engine");
  }

  /// The primitive for `batch` problems of these views (batch strides sAb,
  /// sBb, sCb), or null when oneDNN has none for it. `packedB`: B comes in
  /// that layout (one problem, a weight packed by packWeight), not `b`'s.
  const Kernel *get(int64_t batch, const View &a, int64_t sAb, const View &b,
                    int64_t sBb, const View &c, int64_t sCb, bool accumulate,
                    const dnnl_memory_desc_t *packedB = nullptr) {
    Shape shape = {batch,  c.rows, c.cols, a.cols, sAb,    a.sRow,     a.sCol,
                   sBb,    b.sRow, b.sCol, sCb,    c.sRow, c.sCol, accumulate,
                   packedB != nullptr};
    auto [it, inserted] = kernels.try_emplace(shape);
    if (inserted)
      it->second = build({batch, sAb}, a, {batch, sBb}, b, {batch, sCb}, c,
                         accumulate, packedB);
    return it->second.primitive ? &it->second : nullptr;
  }

  /// Makes room for `count` more kernels: a long run meets many shapes
  /// (the contraction of a weight gradient is the expert's rows); once
  /// kMaxKernels are held, start over. Kernels got after it stay valid
  /// until the next call.
  void reserve(size_t count) {
    if (kernels.size() + count > kMaxKernels)
      clear();
  }

  /// C (+)= A B for one problem, its rows cut into a multiple of
  /// kRowQuantum and the rest: each part's kernel is kept by its row count,
  /// so that expert GEMMs, whose rows follow the routing, reuse a few dozen
  /// kernels instead of building one for every new count (a JIT compilation
  /// and the TLB shootdowns of making its code executable). A row's sums
  /// do not depend on the rows beside it: the bits are those of one
  /// product. False, having done nothing, when oneDNN has no kernel for a
  /// part.
  bool multiplyRows(const View &a, const float *A, const View &b,
                    const float *B, const View &c, float *C, bool accumulate,
                    const dnnl_memory_desc_t *packedB = nullptr) {
    int64_t whole = c.rows - c.rows % kRowQuantum;
    int64_t parts[2][2] = {{0, whole}, {whole, c.rows}};
    const Kernel *kernel[2] = {nullptr, nullptr};
    reserve(2);
    for (int i = 0; i < 2; ++i) {
      auto [begin, end] = parts[i];
      if (begin == end)
        continue;
      View ai = a, ci = c;
      ai.rows = ci.rows = end - begin;
      kernel[i] = get(1, ai, 0, b, 0, ci, 0, accumulate, packedB);
      if (!kernel[i])
        return false;
    }
    for (int i = 0; i < 2; ++i)
      if (kernel[i])
        run(*kernel[i], A + parts[i][0] * a.sRow, B, C + parts[i][0] * c.sRow);
    return true;
  }

  /// W ([N, K], read transposed as B) in oneDNN's own layout for it, packed
  /// once and kept until forgetPacked; null when there is none, or when
  /// packing it would hold more than kMaxPackedBytes. `layout` is set.
  const void *packWeight(const float *W, int64_t N, int64_t K,
                         const dnnl_memory_desc_t *&layout) {
    auto key = std::make_tuple(W, N, K);
    auto it = packed.find(key);
    if (it == packed.end()) {
      dnnl_memory_t memory = nullptr;
      const dnnl_memory_desc_t *to = packedLayout(N, K);
      if (to && packedBytes + dnnl_memory_desc_get_size(to) <= maxPackedBytes())
        memory = reorder(W, N, K, *to);
      if (memory)
        packedBytes += dnnl_memory_desc_get_size(to);
      it = packed.emplace(key, memory).first;
    }
    void *handle = nullptr;
    if (!it->second ||
        dnnl_memory_get_data_handle(it->second, &handle) != dnnl_success)
      return nullptr;
    layout = packedLayout(N, K);
    return handle;
  }

  /// Drops the packed weights: the weights were written.
  void forgetPacked() {
    for (auto &entry : packed)
      if (entry.second)
        dnnl_memory_destroy(entry.second);
    packed.clear();
    packedBytes = 0;
  }

  void run(const Kernel &k, const float *A, const float *B, float *C) {
    dnnl_memory_set_data_handle(k.a, const_cast<float *>(A));
    dnnl_memory_set_data_handle(k.b, const_cast<float *>(B));
    dnnl_memory_set_data_handle(k.c, C);
    dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, k.a},
                              {DNNL_ARG_WEIGHTS, k.b},
                              {DNNL_ARG_DST, k.c}};
    if (dnnl_primitive_execute(k.primitive, stream, 3, args) != dnnl_success ||
        dnnl_stream_wait(stream) != dnnl_success)
      detail::fail("moert_matmul_f32: oneDNN matmul failed");
  }

private:
  /// A descriptor of `v`: 2-D for one problem, else 3-D with the batch
  /// first (one, when `v` repeats over it). A stride along an extent of 1
  /// is never used; it becomes one oneDNN accepts.
  static bool describe(Batch batch, const View &v, dnnl_memory_desc_t &md) {
    dnnl_dims_t strides = {v.rows > 1 ? v.sRow : v.cols * v.sCol,
                           v.cols > 1 ? v.sCol : 1};
    if (v.cols == 1 && v.rows == 1)
      strides[0] = 1;
    if (strides[0] <= 0 || strides[1] <= 0)
      return false;
    if (batch.size == 1) {
      dnnl_dims_t dims = {v.rows, v.cols};
      return dnnl_memory_desc_init_by_strides(&md, 2, dims, dnnl_f32,
                                              strides) == dnnl_success;
    }
    int64_t span = (v.rows - 1) * strides[0] + (v.cols - 1) * strides[1] + 1;
    dnnl_dims_t dims = {batch.stride ? batch.size : 1, v.rows, v.cols};
    dnnl_dims_t batchStrides = {batch.stride ? batch.stride : span, strides[0],
                                strides[1]};
    if (batchStrides[0] <= 0)
      return false;
    return dnnl_memory_desc_init_by_strides(&md, 3, dims, dnnl_f32,
                                            batchStrides) == dnnl_success;
  }

  static void destroy(Kernel &k) {
    for (dnnl_memory_t m : {k.a, k.b, k.c})
      if (m)
        dnnl_memory_destroy(m);
    if (k.primitive)
      dnnl_primitive_destroy(k.primitive);
    k = Kernel();
  }

  void clear() {
    for (auto &entry : kernels)
      destroy(entry.second);
    kernels.clear();
  }

  Kernel build(Batch aBatch, const View &a, Batch bBatch, const View &b,
               Batch cBatch, const View &c, bool accumulate,
               const dnnl_memory_desc_t *packedB) {
    Kernel k;
    dnnl_memory_desc_t aMd, bMd, cMd;
    if (!describe(aBatch, a, aMd) || !describe(bBatch, b, bMd) ||
        !describe(cBatch, c, cMd))
      return k;
    if (packedB)
      bMd = *packedB;
    dnnl_matmul_desc_t desc;
    dnnl_post_ops_t postOps = nullptr;
    dnnl_primitive_attr_t attr = nullptr;
    dnnl_primitive_desc_t pd = nullptr;
    bool ok = dnnl_matmul_desc_init(&desc, &aMd, &bMd, nullptr, &cMd) ==
                  dnnl_success &&
              dnnl_post_ops_create(&postOps) == dnnl_success &&
              (!accumulate ||
               dnnl_post_ops_append_sum(postOps, 1.0f) == dnnl_success) &&
              dnnl_primitive_attr_create(&attr) == dnnl_success &&
              dnnl_primitive_attr_set_post_ops(attr, postOps) ==
                  dnnl_success &&
              dnnl_primitive_desc_create(&pd, &desc, attr, engine, nullptr) ==
                  dnnl_success &&
              dnnl_primitive_create(&k.primitive, pd) == dnnl_success &&
              dnnl_memory_create(&k.a, &aMd, engine, DNNL_MEMORY_NONE) ==
                  dnnl_success &&
              dnnl_memory_create(&k.b, &bMd, engine, DNNL_MEMORY_NONE) ==
                  dnnl_success &&
              dnnl_memory_create(&k.c, &cMd, engine, DNNL_MEMORY_NONE) ==
                  dnnl_success;
    if (pd)
      dnnl_primitive_desc_destroy(pd);
    if (attr)
      dnnl_primitive_attr_destroy(attr);
    if (postOps)
      dnnl_post_ops_destroy(postOps);
    if (!ok)
      destroy(k);
    return k;
  }

  /// The layout oneDNN picks for a [K, N] B of f32, kept per (N, K); null
  /// when it picks the plain one or none.
  const dnnl_memory_desc_t *packedLayout(int64_t N, int64_t K) {
    auto [it, inserted] = layouts.try_emplace({N, K});
    if (inserted) {
      // For 64 rows; the layout is the same for any row count.
      constexpr int64_t kRows = 64;
      dnnl_dims_t aDims = {kRows, K}, bDims = {K, N}, cDims = {kRows, N};
      dnnl_memory_desc_t aMd, bMd, cMd, plain;
      dnnl_matmul_desc_t desc;
      dnnl_primitive_desc_t pd = nullptr;
      View w{K, N, 1, K};
      bool ok =
          dnnl_memory_desc_init_by_tag(&aMd, 2, aDims, dnnl_f32, dnnl_ab) ==
              dnnl_success &&
          dnnl_memory_desc_init_by_tag(&bMd, 2, bDims, dnnl_f32,
                                       dnnl_format_tag_any) == dnnl_success &&
          dnnl_memory_desc_init_by_tag(&cMd, 2, cDims, dnnl_f32, dnnl_ab) ==
              dnnl_success &&
          dnnl_matmul_desc_init(&desc, &aMd, &bMd, nullptr, &cMd) ==
              dnnl_success &&
          dnnl_primitive_desc_create(&pd, &desc, nullptr, engine, nullptr) ==
              dnnl_success &&
          describe({1, 0}, w, plain);
      if (ok) {
        const dnnl_memory_desc_t *chosen =
            dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        if (chosen && !dnnl_memory_desc_equal(chosen, &plain))
          it->second = *chosen;
      }
      if (pd)
        dnnl_primitive_desc_destroy(pd);
    }
    return it->second ? &*it->second : nullptr;
  }

  /// A new memory in `layout` holding W ([N, K], as a transposed B); null
  /// if oneDNN cannot reorder it.
  dnnl_memory_t reorder(const float *W, int64_t N, int64_t K,
                        const dnnl_memory_desc_t &layout) {
    dnnl_memory_desc_t plain;
    if (!describe({1, 0}, View{K, N, 1, K}, plain))
      return nullptr;
    dnnl_memory_t from = nullptr, to = nullptr;
    dnnl_primitive_desc_t pd = nullptr;
    dnnl_primitive_t copy = nullptr;
    bool ok =
        dnnl_memory_create(&from, &plain, engine, const_cast<float *>(W)) ==
            dnnl_success &&
        dnnl_memory_create(&to, &layout, engine, DNNL_MEMORY_ALLOCATE) ==
            dnnl_success &&
        dnnl_reorder_primitive_desc_create(&pd, &plain, engine, &layout,
                                           engine, nullptr) == dnnl_success &&
        dnnl_primitive_create(&copy, pd) == dnnl_success;
    if (ok) {
      dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
      ok = dnnl_primitive_execute(copy, stream, 2, args) == dnnl_success &&
           dnnl_stream_wait(stream) == dnnl_success;
    }
    if (copy)
      dnnl_primitive_destroy(copy);
    if (pd)
      dnnl_primitive_desc_destroy(pd);
    if (from)
      dnnl_memory_destroy(from);
    if (!ok && to) {
      dnnl_memory_destroy(to);
      to = nullptr;
    }
    return to;
  }

  static constexpr size_t kMaxKernels = 1024;
  static constexpr int64_t kRowQuantum = 32;
  dnnl_engine_t engine = nullptr;
  dnnl_stream_t stream = nullptr;
  std::map<Shape, Kernel> kernels;
  std::map<std::pair<int64_t, int64_t>, std::optional<dnnl_memory_desc_t>>
      layouts;
  std::map<std::tuple<const float *, int64_t, int64_t>, dnnl_memory_t> packed;
  size_t packedBytes = 0;
};

Matmuls &matmuls() {
  static Matmuls *instance = new Matmuls(); // lives as long as the process
  return *instance;
}

/// Whether the weights stay as they are until weightsChanged: expert GEMMs
/// may then keep them packed.
std::atomic<bool> weightsConstant{false};
} // namespace

void moert::setWeightsConstant(bool constant) {
  // MOERT_PACKED_WEIGHTS=0: never packed (to compare, in benchmarks).
  static const bool disabled = [] {
    const char *v = std::getenv("MOERT_PACKED_WEIGHTS");
    return v && std::string(v) == "0";
  }();
  weightsConstant = constant && !disabled;
  if (!weightsConstant) {
    matmuls().forgetPacked();
    detail::forgetPanels();
  }
}

void moert::weightsChanged() {
  matmuls().forgetPacked();
  detail::forgetPanels();
}

/// The CPU time of the calling thread: an expert GEMM's share of a core.
static double threadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

static void gemmLoop(const View &a, const float *A, const View &b,
                     const float *B, const View &c, float *C,
                     bool accumulate) {
  for (int64_t m = 0; m < c.rows; ++m)
    for (int64_t n = 0; n < c.cols; ++n) {
      float acc = 0;
      for (int64_t k = 0; k < a.cols; ++k)
        acc += A[m * a.sRow + k * a.sCol] * B[k * b.sRow + n * b.sCol];
      float &out = C[m * c.sRow + n * c.sCol];
      out = accumulate ? out + acc : acc;
    }
}

void moert_matmul_f32(int64_t batch, int64_t M, int64_t N, int64_t K,
                      const float *A, int64_t sAb, int64_t sAm, int64_t sAk,
                      const float *B, int64_t sBb, int64_t sBk, int64_t sBn,
                      float *C, int64_t sCb, int64_t sCm, int64_t sCn,
                      int32_t accumulate, int32_t site) {
  if (batch < 0 || M < 0 || N < 0 || K < 0)
    detail::fail("moert_matmul_f32: negative size batch=", batch, " M=", M,
                 " N=", N, " K=", K);
  if (batch == 0 || M == 0 || N == 0)
    return;
  if (batch > 1 && sCb == 0)
    detail::fail("moert_matmul_f32: the output repeats over a batch of ",
                 batch);
  if (batch == 1)
    sAb = sBb = sCb = 0;
  if (K == 0) { // an empty sum: C stays, or becomes 0
    if (!accumulate)
      for (int64_t i = 0; i < batch; ++i)
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N; ++n)
            C[i * sCb + m * sCm + n * sCn] = 0;
    return;
  }
  auto start = std::chrono::steady_clock::now();
  double cpuStart = threadCpuSeconds();
  View a{M, K, sAm, sAk}, b{K, N, sBk, sBn}, c{M, N, sCm, sCn};
  Matmuls &all = matmuls();
  bool add = accumulate != 0;
  if (detail::useOrderedGemm()) {
    std::vector<detail::OrderedGemmProblem> problems;
    for (int64_t i = 0; i < batch; ++i)
      problems.push_back({A + i * sAb, sAm, sAk, B + i * sBb, sBk, sBn,
                          C + i * sCb, sCm, sCn, M, N, K, add});
    detail::runOrderedGemms(problems);
  } else if (batch == 1) {
    // oneDNN's 2-D matmul by row blocks, else a plain loop.
    if (!all.multiplyRows(a, A, b, B, c, C, add))
      gemmLoop(a, A, b, B, c, C, add);
  } else {
    all.reserve(2);
    if (const Kernel *kernel =
            all.get(batch, a, sAb, b, sBb, c, sCb, add)) {
      all.run(*kernel, A, B, C);
    } else {
      // One problem at a time: oneDNN's 2-D matmul, else a plain loop.
      const Kernel *single = all.get(1, a, 0, b, 0, c, 0, add);
      for (int64_t i = 0; i < batch; ++i) {
        const float *Ai = A + i * sAb, *Bi = B + i * sBb;
        float *Ci = C + i * sCb;
        if (single)
          all.run(*single, Ai, Bi, Ci);
        else
          gemmLoop(a, Ai, b, Bi, c, Ci, add);
      }
    }
  }
  if (site == 1)
    detail::recordGemm(
        2.0 * batch * M * N * K,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count(),
        threadCpuSeconds() - cpuStart);
}

std::vector<int64_t> detail::groupBegins(const int32_t *counts, int64_t groups,
                                         int64_t groupStride, int64_t rows,
                                         const char *op) {
  std::vector<int64_t> begins(groups);
  int64_t packed = 0;
  for (int64_t g = 0; g < groups; ++g) {
    if (counts[g] < 0)
      fail(op, ": group ", g, " has a negative row count ", counts[g]);
    begins[g] = groupStride > 0 ? g * groupStride : packed;
    packed += counts[g];
    if (groupStride > 0 && counts[g] > groupStride)
      fail(op, ": group ", g, " has ", counts[g],
           " rows, more than the capacity ", groupStride);
    if (begins[g] + counts[g] > rows)
      fail(op, ": the groups have more rows than the buffer (", rows, ")");
  }
  return begins;
}

static void groupedMatmulF32(int64_t groups, int64_t experts,
                             const int32_t *counts,
                             const std::vector<int64_t> &begins, int64_t rows,
                             int64_t K, int64_t N, const void *A,
                             const void *W, const void *bias, void *C);

namespace {
/// Groups of fewer rows than this on average are multiplied per expert.
constexpr int64_t kMergeRowsPerGroup = 64;

/// Several groups of one expert (rows from several source ranks) side by
/// side in scratch, so that each expert is one product, not one per group:
/// its weights read once, and more rows to a GEMM. A row's sums do not
/// depend on the rows beside it, so the bits are those of a group at a time.
struct ExpertRows {
  std::vector<float> a, c;       // [rows, K] and [rows, N], expert-major
  std::vector<int64_t> first;    // expert e's rows: [first[e], first[e + 1])
  std::vector<std::pair<int64_t, int64_t>> moved; // (row of C, of scratch)

  ExpertRows(int64_t groups, int64_t experts, const int32_t *counts,
             const std::vector<int64_t> &begins, int64_t K, int64_t N,
             const float *A, const float *bias)
      : first(experts + 1, 0) {
    for (int64_t g = 0; g < groups; ++g)
      first[g % experts + 1] += counts[g];
    for (int64_t e = 0; e < experts; ++e)
      first[e + 1] += first[e];
    a.resize(first[experts] * K);
    c.resize(first[experts] * N);
    std::vector<int64_t> next(first.begin(), first.end() - 1);
    for (int64_t g = 0; g < groups; ++g) {
      int64_t e = g % experts;
      for (int64_t r = begins[g]; r < begins[g] + counts[g]; ++r) {
        int64_t m = next[e]++;
        std::copy(A + r * K, A + (r + 1) * K, a.data() + m * K);
        if (bias)
          std::copy(bias + e * N, bias + (e + 1) * N, c.data() + m * N);
        moved.push_back({r, m});
      }
    }
  }
  int64_t rows(int64_t e) const { return first[e + 1] - first[e]; }
  /// The products back to the groups' rows of C.
  void scatter(int64_t N, float *C) const {
    for (auto [r, m] : moved)
      std::copy(c.data() + m * N, c.data() + (m + 1) * N, C + r * N);
  }
};
} // namespace

void moert_grouped_matmul(int32_t dtype, int64_t groups, int64_t experts,
                          const int32_t *counts, int64_t groupStride,
                          int64_t rows, int64_t K, int64_t N, const void *A,
                          const void *W, const void *bias, void *C) {
  const char *op = "moert_grouped_matmul";
  if (dtype != MOERT_F32)
    detail::fail(op, ": the CPU runtime multiplies f32 only (dtype code ", dtype, ")");
  if (groups < 0 || experts < 1 || rows < 0 || K < 0 || N < 0)
    detail::fail(op, ": bad sizes: ", groups, " groups, ", experts, " experts, ", rows,
         " x ", K, " by ", N);
  std::vector<int64_t> begins =
      detail::groupBegins(counts, groups, groupStride, rows, op);
  // MOERT_SERIAL_EXPERT_GEMMS=1 (benchmarks only: every rank must make the
  // same calls): the ranks take turns, so that a rank's expert time is its
  // own where ranks share cores (bench/placement_replay.py).
  static const bool serial = [] {
    const char *v = std::getenv("MOERT_SERIAL_EXPERT_GEMMS");
    return v && std::string(v) == "1";
  }();
  int turns = serial ? worldSize() : 1;
  for (int turn = 0; turn < turns; ++turn) {
    if (serial)
      barrier();
    if (turn == (serial ? worldRank() : 0))
      groupedMatmulF32(groups, experts, counts, begins, rows, K, N, A, W,
                       bias, C);
  }
  if (serial)
    barrier();
}

/// moert_grouped_matmul's work, after its checks.
/// C (+)= A W^T, [M, K] by [N, K], with W packed once (while the weights
/// are constant); false, having done nothing, when W is not packed.
static bool packedExpertMatmul(int64_t M, int64_t N, int64_t K,
                               const float *A, const float *W, float *C,
                               bool accumulate) {
  if (!weightsConstant || M == 0 || N == 0 || K == 0)
    return false;
  auto start = std::chrono::steady_clock::now();
  double cpuStart = threadCpuSeconds();
  Matmuls &all = matmuls();
  const dnnl_memory_desc_t *layout = nullptr;
  const void *packedW = all.packWeight(W, N, K, layout);
  if (!packedW)
    return false;
  View a{M, K, K, 1}, b{K, N, 1, K}, c{M, N, N, 1};
  if (!all.multiplyRows(a, A, b, static_cast<const float *>(packedW), c, C,
                        accumulate, layout))
    return false;
  detail::recordGemm(
      2.0 * M * N * K,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count(),
      threadCpuSeconds() - cpuStart);
  return true;
}

/// An expert's W as B: its panels, packed once while the weights are
/// constant, else null (packed per call).
static const float *expertPanels(const float *W, int64_t N, int64_t K) {
  return weightsConstant ? detail::cachedWeightPanels(W, N, K, maxPackedBytes())
                         : nullptr;
}

/// C (+)= A W^T, [M, K] by [N, K], where the matmuls are ordered.
static void orderedExpertMatmul(int64_t M, int64_t N, int64_t K,
                                const float *A, const float *W, float *C,
                                bool accumulate) {
  auto start = std::chrono::steady_clock::now();
  double cpuStart = threadCpuSeconds();
  detail::runOrderedGemms({{A, K, 1, W, 1, K, C, N, 1, M, N, K, accumulate,
                            expertPanels(W, N, K)}});
  detail::recordGemm(
      2.0 * M * N * K,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count(),
      threadCpuSeconds() - cpuStart);
}

static void groupedMatmulF32(int64_t groups, int64_t experts,
                             const int32_t *counts,
                             const std::vector<int64_t> &begins, int64_t rows,
                             int64_t K, int64_t N, const void *A,
                             const void *W, const void *bias, void *C) {
  auto *a = static_cast<const float *>(A);
  auto *w = static_cast<const float *>(W);
  auto *c = static_cast<float *>(C);
  auto *b = static_cast<const float *>(bias);
  // C_e (+)= A_e W_e^T, W_e [N, K] packed, else read transposed in place.
  auto product = [&](int64_t M, int64_t e, const float *Ae, float *Ce) {
    if (detail::useOrderedGemm())
      return orderedExpertMatmul(M, N, K, Ae, w + e * N * K, Ce,
                                 /*accumulate=*/b != nullptr);
    if (!packedExpertMatmul(M, N, K, Ae, w + e * N * K, Ce,
                            /*accumulate=*/b != nullptr))
      moert_matmul_f32(/*batch=*/1, M, N, K, Ae, 0, K, 1, w + e * N * K, 0, 1,
                       K, Ce, 0, N, 1, /*accumulate=*/b != nullptr,
                       /*site=*/1);
  };
  int64_t used = 0;
  for (int64_t g = 0; g < groups; ++g)
    used += counts[g];
  // Rows outside every group are zero.
  std::vector<char> covered(rows, 0);
  // Groups of one expert from several source ranks, a few dozen rows each:
  // one product per expert over its rows gathered (such GEMMs run well
  // below the machine's peak; the copies cost far less).
  if (groups > experts && used < kMergeRowsPerGroup * groups) {
    ExpertRows merged(groups, experts, counts, begins, K, N, a, b);
    for (int64_t e = 0; e < experts; ++e)
      if (merged.rows(e) > 0)
        product(merged.rows(e), e, merged.a.data() + merged.first[e] * K,
                merged.c.data() + merged.first[e] * N);
    merged.scatter(N, c);
    for (auto [r, m] : merged.moved)
      covered[r] = 1;
  } else {
    for (int64_t g = 0; g < groups; ++g) {
      std::fill(covered.begin() + begins[g],
                covered.begin() + begins[g] + counts[g], 1);
      int64_t e = g % experts;
      // The bias first, then the product accumulated onto it.
      if (b)
        for (int64_t r = begins[g]; r < begins[g] + counts[g]; ++r)
          std::copy(b + e * N, b + (e + 1) * N, c + r * N);
      if (counts[g] > 0)
        product(counts[g], e, a + begins[g] * K, c + begins[g] * N);
    }
  }
  for (int64_t r = 0; r < rows; ++r)
    if (!covered[r])
      std::fill(c + r * N, c + (r + 1) * N, 0.0f);
}

void moert_grouped_matmul_few_rows(int32_t dtype, int64_t groups,
                                   int64_t experts, const int32_t *counts,
                                   int64_t rows, int64_t K, int64_t N,
                                   const void *A, const void *W,
                                   const void *bias, void *C) {
  const char *op = "moert_grouped_matmul_few_rows";
  if (dtype != MOERT_F32)
    detail::fail(op, ": the CPU runtime multiplies f32 only (dtype code ",
                 dtype, ")");
  if (groups < 0 || experts < 1 || rows < 0 || K < 0 || N < 0)
    detail::fail(op, ": bad sizes: ", groups, " groups, ", experts,
                 " experts, ", rows, " x ", K, " by ", N);
  std::vector<int64_t> begins =
      detail::groupBegins(counts, groups, /*groupStride=*/0, rows, op);
  auto *a = static_cast<const float *>(A);
  auto *w = static_cast<const float *>(W);
  auto *c = static_cast<float *>(C);
  auto *b = static_cast<const float *>(bias);
  std::vector<detail::FewRowsProblem> problems;
  // Several groups of one expert: its weights read once, not per group.
  std::optional<ExpertRows> merged;
  if (groups > experts) {
    merged.emplace(groups, experts, counts, begins, K, N, a, b);
    for (int64_t e = 0; e < experts; ++e)
      if (merged->rows(e) > 0)
        problems.push_back({merged->a.data() + merged->first[e] * K,
                            w + e * N * K,
                            merged->c.data() + merged->first[e] * N,
                            merged->rows(e), N, K, b != nullptr});
  } else {
    for (int64_t g = 0; g < groups; ++g) {
      int64_t e = g % experts;
      if (b)
        for (int64_t r = begins[g]; r < begins[g] + counts[g]; ++r)
          std::copy(b + e * N, b + (e + 1) * N, c + r * N);
      if (counts[g] > 0)
        problems.push_back({a + begins[g] * K, w + e * N * K,
                            c + begins[g] * N, counts[g], N, K, b != nullptr});
    }
  }
  // The groups are packed from row 0: the rows after them are zero.
  int64_t used = groups ? begins[groups - 1] + counts[groups - 1] : 0;
  std::fill(c + used * N, c + rows * N, 0.0f);
  auto start = std::chrono::steady_clock::now();
  double cpuStart = threadCpuSeconds();
  if (detail::useOrderedGemm()) {
    std::vector<detail::OrderedGemmProblem> ordered;
    for (const detail::FewRowsProblem &p : problems)
      ordered.push_back({p.A, p.K, 1, p.W, 1, p.K, p.C, p.N, 1, p.M, p.N, p.K,
                         p.accumulate, expertPanels(p.W, p.N, p.K)});
    detail::runOrderedGemms(ordered);
  } else {
    detail::runFewRows(problems);
  }
  if (merged)
    merged->scatter(N, c);
  double flops = 0;
  for (const detail::FewRowsProblem &p : problems)
    flops += 2.0 * p.M * p.N * p.K;
  detail::recordGemm(
      flops,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count(),
      threadCpuSeconds() - cpuStart);
}

void moert::setThreads(int threads) {
  // More threads than any machine here has cores only costs stacks; far
  // more end inside the OpenMP runtime without a word.
  constexpr int kMaxThreads = 1024;
  if (threads < 0 || threads > kMaxThreads)
    detail::fail("--threads ", threads, " is out of range: 0 (one per core) "
                 "to ", kMaxThreads);
  if (threads > 0)
    omp_set_num_threads(threads);
}
