//===- moert-cpu-bench.cpp - Expert GEMMs against the memory bound --------===//
//
// The decode regime of an MoE block is memory-bound: every expert's weights
// are read once per call and each row of a few meets them. This prints, in
// one run on the machine at hand:
//   * a STREAM-style read bandwidth: T threads summing their share of a
//     buffer larger than the caches, four streams each (the bound for
//     reading weights);
//   * the expert GEMMs of one decode call (E experts [F, H], [F, H] and
//     [H, F], R rows each) through moert_grouped_matmul (oneDNN per group)
//     and moert_grouped_matmul_few_rows (the runtime's streaming kernel),
//     as time, weight bytes per second and the fraction of that bandwidth.
//
//   moert-cpu-bench [--threads T] [--experts E] [--rows R] [--hidden H]
//                   [--ffn F] [--repeat N]
//
//===----------------------------------------------------------------------===//

#include "moert/Runtime.h"
#include "moert/moert.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <sys/mman.h>

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

/// The best of `repeat` runs of `run`, in seconds.
template <typename Run> double best(int repeat, Run run) {
  double fastest = 1e30;
  for (int i = 0; i < repeat; ++i) {
    auto start = Clock::now();
    run();
    fastest = std::min(fastest, seconds(start));
  }
  return fastest;
}

/// `n` elements (uninitialized) on transparent huge pages where the kernel gives
/// them, as moe-run asks for its weights (on 4 KiB pages a stream takes a
/// TLB miss per 4 KiB): the bandwidth and the kernels read alike.
template <typename T> class HugeArray {
public:
  explicit HugeArray(size_t n) : n(n) {
    constexpr size_t kHuge = size_t(2) << 20;
    size_t bytes = (n * sizeof(T) + kHuge - 1) & ~(kHuge - 1);
    p = static_cast<T *>(std::aligned_alloc(kHuge, bytes));
    if (!p) {
      std::fprintf(stderr, "moert-cpu-bench: out of memory\n");
      std::exit(1);
    }
    (void)madvise(p, bytes, MADV_HUGEPAGE);
  }
  HugeArray(const HugeArray &) = delete;
  HugeArray &operator=(const HugeArray &) = delete;
  ~HugeArray() { std::free(p); }
  T *data() { return p; }
  size_t size() const { return n; }
  T &operator[](size_t i) { return p[i]; }
  T *begin() { return p; }

private:
  T *p;
  size_t n;
};

/// Bytes per second that `threads` threads read, each summing its share.
double readBandwidth(int threads, int repeat) {
  size_t n = size_t(128) << 20; // 1 GiB of words
  // Words, not floats: an integer sum vectorizes (a float one keeps its
  // order and would measure the adds instead of the memory).
  HugeArray<uint64_t> data(n);
  std::vector<std::thread> pool;
  // First touch by the threads that read, as the weights are.
  auto forEachShare = [&](auto body) {
    pool.clear();
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] { body(n * t / threads, n * (t + 1) / threads); });
    for (std::thread &th : pool)
      th.join();
  };
  forEachShare([&](size_t b, size_t e) {
    std::fill(data.begin() + b, data.begin() + e, 1u);
  });
  std::vector<uint64_t> sums(threads);
  double s = best(repeat, [&] {
    forEachShare([&](size_t b, size_t e) {
      // Four streams at once, as the kernels read weight rows side by
      // side (one stream alone reads slower here).
      size_t quarter = (e - b) / 4;
      const uint64_t *p0 = &data[b], *p1 = p0 + quarter, *p2 = p1 + quarter,
                     *p3 = p2 + quarter;
      uint64_t sum = 0;
      for (size_t i = 0; i < quarter; ++i)
        sum += p0[i] + p1[i] + p2[i] + p3[i];
      sums[(b * threads) / n] = sum;
    });
  });
  return n * sizeof(uint64_t) / s;
}

int64_t flag(int argc, char **argv, const char *name, int64_t value) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0)
      return std::atoll(argv[i + 1]);
  return value;
}

} // namespace

int main(int argc, char **argv) {
  int threads = static_cast<int>(
      flag(argc, argv, "--threads",
           std::max(1u, std::thread::hardware_concurrency())));
  int64_t E = flag(argc, argv, "--experts", 64);
  int64_t R = flag(argc, argv, "--rows", 4);
  int64_t H = flag(argc, argv, "--hidden", 1024);
  int64_t F = flag(argc, argv, "--ffn", 3584);
  int repeat = static_cast<int>(flag(argc, argv, "--repeat", 5));
  if (threads < 1 || E < 1 || R < 1 || H < 1 || F < 1 || repeat < 1) {
    std::fprintf(stderr, "moert-cpu-bench: sizes and counts must be positive\n");
    return 2;
  }
  moert::setThreads(threads);

  double stream = readBandwidth(threads, repeat);
  std::printf("read bandwidth (STREAM-style sum, %d threads): %.1f GB/s\n",
              threads, stream * 1e-9);

  // One decode call's expert GEMMs: x W1^T, x W3^T [R, F] and h W2^T [R, H].
  HugeArray<float> w1(E * F * H), w3(E * F * H), w2(E * H * F);
  std::vector<float> x(E * R * H), h(E * R * F), y1(E * R * F), y3(E * R * F),
      out(E * R * H);
  auto fill = [](float *v, size_t n) {
    for (size_t i = 0; i < n; ++i)
      v[i] = static_cast<float>(i % 13) * 0.01f - 0.06f;
  };
  for (HugeArray<float> *w : {&w1, &w3, &w2})
    fill(w->data(), w->size());
  for (std::vector<float> *v : {&x, &h})
    fill(v->data(), v->size());
  std::vector<int32_t> counts(E, static_cast<int32_t>(R));
  double bytes = 3.0 * E * F * H * sizeof(float);

  // A projection of every group: rows [E R, K] times W^T, W [E, N, K].
  using Grouped = std::function<void(const float *, const float *, float *,
                                     int64_t, int64_t)>;
  auto call = [&](const Grouped &project) {
    project(x.data(), w1.data(), y1.data(), H, F);
    project(x.data(), w3.data(), y3.data(), H, F);
    project(h.data(), w2.data(), out.data(), F, H);
  };
  Grouped onednn = [&](const float *a, const float *w, float *c, int64_t K,
                       int64_t N) {
    moert_grouped_matmul(MOERT_F32, E, E, counts.data(), 0, E * R, K, N, a, w,
                         nullptr, c);
  };
  Grouped fewRows = [&](const float *a, const float *w, float *c, int64_t K,
                        int64_t N) {
    moert_grouped_matmul_few_rows(MOERT_F32, E, E, counts.data(), E * R, K, N,
                                  a, w, nullptr, c);
  };
  std::printf("decode expert GEMMs: %lld experts x [%lld, %lld] x 3, %lld "
              "rows each, %.2f GB of weights, %d threads\n",
              static_cast<long long>(E), static_cast<long long>(F),
              static_cast<long long>(H), static_cast<long long>(R),
              bytes * 1e-9, threads);
  std::printf("| kernel | time | weights read | of the read bandwidth |\n");
  std::printf("| --- | --- | --- | --- |\n");
  std::vector<float> reference;
  for (const auto &kernel :
       {std::pair{"oneDNN per group (moert_grouped_matmul)", onednn},
        std::pair{"few rows (moert_grouped_matmul_few_rows)", fewRows}}) {
    const char *name = kernel.first;
    const Grouped &project = kernel.second;
    call(project); // warm: primitives built, pages touched
    double s = best(repeat, [&] { call(project); });
    std::printf("| %s | %.1f ms | %.1f GB/s | %.0f%% |\n", name, s * 1e3,
                bytes / s * 1e-9, 100 * bytes / s / stream);
    if (reference.empty()) {
      reference = out;
      continue;
    }
    double worst = 0, scale = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      worst = std::max(worst, double(std::abs(out[i] - reference[i])));
      scale = std::max(scale, double(std::abs(reference[i])));
    }
    std::printf("(outputs agree to %.2g of their scale)\n", worst / scale);
  }
  return 0;
}
