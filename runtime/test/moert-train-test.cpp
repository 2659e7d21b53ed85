//===- moert-train-test.cpp - Optimizers and checkpoints against PyTorch --===//
//
// Replays what test/runtime/train/Inputs/make_reference.py recorded from
// PyTorch and compares every result bit for bit, printing the first
// difference:
//
//   optimizer DIR [--resume-at K --checkpoint CKPT]
//       steps of AdamW or SGD on a few parameters (gradients that some steps
//       lack, clipping, a schedule); with --resume-at, saves a checkpoint
//       after K steps, loads it and goes on from what it read
//   clip DIR       clip_grad_norm_ on several gradient sets
//   schedule DIR   the learning rates of the transformers schedules
//   sqrt DIR       PyTorch's CPU sqrt against sqrtAs(MklAvx512)
//   rsqrt14        the VRSQRT14 model against the instruction (AVX-512 CPUs)
//   kernels        the AVX2 and AVX-512 AdamW, SGD and norm loops, and the
//                  threaded step of many parameters, against the scalar
//                  loops, bit for bit, on every path the CPU has: ordinary
//                  and special values, and sqrt on every significand
//   gemm-order     moert_matmul_f32 and moert_grouped_matmul(_few_rows)
//                  against one fused multiply-add chain per element, for
//                  any row count, grouping and layout of the weights (the
//                  runtime's ordered GEMMs: a CPU without AVX-512, or
//                  MOERT_ORDERED_GEMM=1)
//   load CKPT      reads a checkpoint and prints what it holds
//
// Exit 0 when everything matches; 1 with a message otherwise.
//
//===----------------------------------------------------------------------===//

#include "../lib/OptimizerKernels.h"

#include "moert/Npy.h"
#include "moert/Runtime.h"
#include "moert/Train.h"
#include "moert/moert.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <random>
#include <cstring>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

using namespace moert;
using namespace moert::train;

namespace {

[[noreturn]] void die(const std::string &message) {
  std::fprintf(stderr, "moert-train-test: error: %s\n", message.c_str());
  std::exit(1);
}

template <typename T> struct Expected;
template <> struct Expected<float> {
  static constexpr const char *descr = "<f4";
};
template <> struct Expected<double> {
  static constexpr const char *descr = "<f8";
};
template <> struct Expected<int64_t> {
  static constexpr const char *descr = "<i8";
};
template <> struct Expected<uint8_t> { // NumPy's bool
  static constexpr const char *descr = "|b1";
};

/// DIR/NAME.npy as a flat vector; `shape` gets its shape.
template <typename T>
std::vector<T> load(const std::string &dir, const std::string &name,
                    std::vector<int64_t> *shape = nullptr) {
  Array a;
  std::string path = dir + "/" + name + ".npy";
  if (std::string e = readNpy(path, a); !e.empty())
    die(e);
  if (a.descr != Expected<T>::descr)
    die(path + " holds " + a.descr + ", not " + Expected<T>::descr);
  if (shape)
    *shape = a.shape;
  std::vector<T> v(static_cast<size_t>(numElements(a.shape)));
  std::memcpy(v.data(), a.data.data(), v.size() * sizeof(T));
  return v;
}

std::string show(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  char text[64];
  std::snprintf(text, sizeof(text), "%.9g (0x%08x)", x, u);
  return text;
}

std::string show(double x) {
  uint64_t u;
  std::memcpy(&u, &x, 8);
  char text[64];
  std::snprintf(text, sizeof(text), "%.17g (0x%016llx)", x,
                static_cast<unsigned long long>(u));
  return text;
}

/// Bit equality; any two NaNs are equal (their payloads are not compared).
template <typename T> bool same(T a, T b) {
  return (std::isnan(a) && std::isnan(b)) ||
         std::memcmp(&a, &b, sizeof(T)) == 0;
}

/// Dies at the first element of `got` that differs from `want`.
void compare(const std::string &what, const float *got, const float *want,
             size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!same(got[i], want[i]))
      die(what + " element " + std::to_string(i) + ": got " + show(got[i]) +
          ", PyTorch " + show(want[i]));
}

//===----------------------------------------------------------------------===//
// optimizer
//===----------------------------------------------------------------------===//

/// config.npy, in make_reference.py's order.
struct Case {
  OptimizerConfig config;
  Schedule schedule;
  double maxNorm = 0;
};

Case readCase(const std::string &dir) {
  std::vector<double> c = load<double>(dir, "config");
  if (c.size() != 14)
    die(dir + "/config.npy: expected 14 values");
  Case k;
  OptimizerConfig &o = k.config;
  o.kind = c[0] == 0 ? OptimizerKind::SGD : OptimizerKind::AdamW;
  o.lr = c[1];
  o.momentum = c[2];
  o.dampening = c[3];
  o.nesterov = c[4] != 0;
  o.beta1 = c[5];
  o.beta2 = c[6];
  o.eps = c[7];
  o.weightDecay = c[8];
  k.schedule.kind = c[9] == 0   ? ScheduleKind::Constant
                    : c[9] == 1 ? ScheduleKind::Cosine
                                : ScheduleKind::Linear;
  k.schedule.warmupSteps = static_cast<int64_t>(c[10]);
  k.schedule.totalSteps = static_cast<int64_t>(c[11]);
  k.maxNorm = c[12];
  o.sqrt = c[13] == 0 ? SqrtKind::MklAvx512 : SqrtKind::Exact;
  if (std::string e = validate(o); !e.empty())
    die(dir + ": " + e);
  return k;
}

std::string describe(const OptimizerConfig &o, const Schedule &s) {
  char text[256];
  if (o.kind == OptimizerKind::AdamW)
    std::snprintf(text, sizeof(text),
                  "adamw lr=%g betas=(%g, %g) eps=%g wd=%g sqrt=%s", o.lr,
                  o.beta1, o.beta2, o.eps, o.weightDecay, name(o.sqrt));
  else
    std::snprintf(text, sizeof(text),
                  "sgd lr=%g momentum=%g dampening=%g nesterov=%d wd=%g", o.lr,
                  o.momentum, o.dampening, o.nesterov, o.weightDecay);
  return std::string(text) + " schedule=" + name(s.kind) + "(" +
         std::to_string(s.warmupSteps) + ", " + std::to_string(s.totalSteps) +
         ")";
}

int runOptimizer(const std::string &dir, int64_t resumeAt,
                 const std::string &checkpoint) {
  Case k = readCase(dir);
  std::vector<int64_t> sizes = load<int64_t>(dir, "sizes"), gradShape;
  std::vector<float> init = load<float>(dir, "init");
  std::vector<float> grads = load<float>(dir, "grads", &gradShape);
  std::vector<uint8_t> mask = load<uint8_t>(dir, "mask");
  std::vector<double> lrs = load<double>(dir, "lr");
  std::vector<float> norms = load<float>(dir, "norms");
  std::vector<float> expect = load<float>(dir, "expect");
  std::vector<float> finalState = load<float>(dir, "state");
  std::vector<int64_t> finalSteps = load<int64_t>(dir, "steps");
  size_t params = sizes.size(), total = init.size();
  size_t steps = gradShape.empty() ? 0 : static_cast<size_t>(gradShape[0]);
  std::vector<size_t> offset(params + 1, 0);
  for (size_t p = 0; p < params; ++p)
    offset[p + 1] = offset[p] + static_cast<size_t>(sizes[p]);
  if (offset[params] != total || grads.size() != steps * total ||
      mask.size() != steps * params || lrs.size() != steps ||
      norms.size() != steps || expect.size() != steps * total ||
      finalSteps.size() != params ||
      finalState.size() !=
          total * (k.config.kind == OptimizerKind::AdamW ? 2 : 1))
    die(dir + ": the reference files do not agree in size");

  if (resumeAt >= static_cast<int64_t>(steps))
    die("--resume-at must be below the " + std::to_string(steps) + " steps");

  std::vector<float> weights = init;
  std::vector<ParamState> states(params);
  for (size_t t = 0; t < steps; ++t) {
    std::string at = "step " + std::to_string(t);
    if (resumeAt >= 0 && t == static_cast<size_t>(resumeAt)) {
      // Save, read back into fresh state, and go on from what was read.
      std::vector<CheckpointParam> saved;
      for (size_t p = 0; p < params; ++p)
        saved.push_back({"layers.0.p" + std::to_string(p),
                         {sizes[p]},
                         weights.data() + offset[p],
                         &states[p]});
      int64_t samples = static_cast<int64_t>(t) * 8;
      if (std::string e = saveCheckpoint(checkpoint, static_cast<int64_t>(t),
                                         samples, k.config, k.schedule, saved);
          !e.empty())
        die(e);
      LoadedCheckpoint l;
      if (std::string e = loadCheckpoint(checkpoint, l); !e.empty())
        die(e);
      const OptimizerConfig &x = k.config, &y = l.config;
      bool sameConfig =
          x.kind == y.kind && x.lr == y.lr && x.momentum == y.momentum &&
          x.dampening == y.dampening && x.nesterov == y.nesterov &&
          x.beta1 == y.beta1 && x.beta2 == y.beta2 && x.eps == y.eps &&
          x.weightDecay == y.weightDecay && x.sqrt == y.sqrt &&
          k.schedule.kind == l.schedule.kind &&
          k.schedule.warmupSteps == l.schedule.warmupSteps &&
          k.schedule.totalSteps == l.schedule.totalSteps;
      if (l.step != static_cast<int64_t>(t) || l.samplesConsumed != samples ||
          !sameConfig || l.params.size() != params)
        die("the checkpoint read back differs in its step, data position, "
            "configuration or parameters");
      for (size_t p = 0; p < params; ++p) {
        std::string what = "checkpoint param " + std::to_string(p);
        const ParamState &a = states[p], &b = l.states[p];
        if (l.names[p] != saved[p].name || l.shapes[p] != saved[p].shape ||
            a.hasBuffer != b.hasBuffer || a.step != b.step)
          die(what + ": name, shape, step or state presence differs");
        compare(what, l.params[p].data(), weights.data() + offset[p],
                l.params[p].size());
        compare(what + " exp_avg", b.expAvg.data(), a.expAvg.data(),
                a.expAvg.size());
        compare(what + " exp_avg_sq", b.expAvgSq.data(), a.expAvgSq.data(),
                a.expAvgSq.size());
        compare(what + " momentum_buffer", b.momentumBuffer.data(),
                a.momentumBuffer.data(), a.momentumBuffer.size());
        std::memcpy(weights.data() + offset[p], l.params[p].data(),
                    l.params[p].size() * 4);
      }
      states = l.states;
      k.config = l.config;
      k.schedule = l.schedule;
      std::printf("checkpoint after %zu steps: saved, read back, identical\n",
                  t);
    }

    double lr = k.schedule.lrAt(k.config.lr, static_cast<int64_t>(t));
    if (!same(lr, lrs[t]))
      die(at + ": lr " + show(lr) + ", PyTorch " + show(lrs[t]));
    // This step's gradients: copies, as clipping scales them.
    std::vector<float> g(grads.begin() + t * total,
                         grads.begin() + (t + 1) * total);
    std::vector<std::pair<float *, size_t>> present;
    for (size_t p = 0; p < params; ++p)
      if (mask[t * params + p])
        present.emplace_back(g.data() + offset[p], offset[p + 1] - offset[p]);
    float norm = static_cast<float>(clipGradNorm(present, k.maxNorm));
    if (!same(norm, norms[t]))
      die(at + ": gradient norm " + show(norm) + ", PyTorch " + show(norms[t]));
    for (size_t p = 0; p < params; ++p)
      if (mask[t * params + p])
        optimizerStep(k.config, lr, weights.data() + offset[p],
                      g.data() + offset[p], offset[p + 1] - offset[p],
                      states[p]);
    for (size_t p = 0; p < params; ++p)
      compare(at + ", param " + std::to_string(p), weights.data() + offset[p],
              expect.data() + t * total + offset[p], offset[p + 1] - offset[p]);
  }

  // The final state; NaN in the reference where a parameter has none.
  for (size_t p = 0; p < params; ++p) {
    const ParamState &s = states[p];
    size_t n = offset[p + 1] - offset[p];
    std::string what = "final state of param " + std::to_string(p);
    bool adamw = k.config.kind == OptimizerKind::AdamW;
    bool want = n && !std::isnan(finalState[offset[p]]);
    if (n && s.hasBuffer != want)
      die(what + ": " + (want ? "missing" : "present, PyTorch has none"));
    if (adamw && s.step != finalSteps[p])
      die(what + ": step " + std::to_string(s.step) + ", PyTorch " +
          std::to_string(finalSteps[p]));
    if (!s.hasBuffer)
      continue;
    if (adamw) {
      compare(what + " exp_avg", s.expAvg.data(), &finalState[offset[p]], n);
      compare(what + " exp_avg_sq", s.expAvgSq.data(),
              &finalState[total + offset[p]], n);
    } else {
      compare(what + " momentum_buffer", s.momentumBuffer.data(),
              &finalState[offset[p]], n);
    }
  }
  std::string shapes;
  for (int64_t s : sizes)
    shapes += (shapes.empty() ? "" : ", ") + std::to_string(s);
  size_t skipped = 0;
  for (uint8_t b : mask)
    skipped += !b;
  std::printf("optimizer %s: %s maxnorm=%g: %zu steps, params of [%s], %zu "
              "gradients absent: bit-exact\n",
              dir.substr(dir.rfind('/') + 1).c_str(),
              describe(k.config, k.schedule).c_str(), k.maxNorm, steps,
              shapes.c_str(), skipped);
  return 0;
}

//===----------------------------------------------------------------------===//
// clip, schedule, sqrt, rsqrt14
//===----------------------------------------------------------------------===//

int runClip(const std::string &dir) {
  std::vector<int64_t> sizes = load<int64_t>(dir, "sizes"), shape;
  std::vector<float> grads = load<float>(dir, "grads", &shape);
  std::vector<float> expect = load<float>(dir, "expect");
  std::vector<float> norms = load<float>(dir, "norms");
  std::vector<double> maxNorms = load<double>(dir, "max_norms");
  size_t trials = maxNorms.size(),
         total = grads.size() / std::max<size_t>(trials, 1);
  if (expect.size() != grads.size() || norms.size() != trials)
    die(dir + ": the reference files do not agree in size");
  for (size_t k = 0; k < trials; ++k) {
    std::vector<float> g(grads.begin() + k * total,
                         grads.begin() + (k + 1) * total);
    std::vector<std::pair<float *, size_t>> list;
    size_t at = 0;
    for (int64_t s : sizes) {
      list.emplace_back(g.data() + at, static_cast<size_t>(s));
      at += static_cast<size_t>(s);
    }
    std::string what = "trial " + std::to_string(k) + " (max_norm " +
                       std::to_string(maxNorms[k]) + ")";
    float norm = static_cast<float>(clipGradNorm(list, maxNorms[k]));
    if (!same(norm, norms[k]))
      die(what + ": norm " + show(norm) + ", PyTorch " + show(norms[k]));
    compare(what + " gradient", g.data(), expect.data() + k * total, total);
  }
  std::printf("clip: %zu trials on %zu tensors: bit-exact\n", trials,
              sizes.size());
  return 0;
}

int runSchedule(const std::string &dir) {
  std::vector<int64_t> shape;
  std::vector<double> config = load<double>(dir, "config", &shape);
  std::vector<double> lrs = load<double>(dir, "lr");
  size_t cases = shape.size() == 2 && shape[1] == 4 ? shape[0] : 0;
  size_t steps = cases ? lrs.size() / cases : 0;
  if (!cases || lrs.size() != cases * steps)
    die(dir + ": the reference files do not agree in size");
  for (size_t c = 0; c < cases; ++c) {
    const double *k = &config[c * 4];
    Schedule s;
    s.kind = k[0] == 0   ? ScheduleKind::Constant
             : k[0] == 1 ? ScheduleKind::Cosine
                         : ScheduleKind::Linear;
    s.warmupSteps = static_cast<int64_t>(k[1]);
    s.totalSteps = static_cast<int64_t>(k[2]);
    for (size_t t = 0; t < steps; ++t) {
      double lr = s.lrAt(k[3], static_cast<int64_t>(t));
      if (!same(lr, lrs[c * steps + t]))
        die(std::string(name(s.kind)) + "(" + std::to_string(s.warmupSteps) +
            ", " + std::to_string(s.totalSteps) + ") step " +
            std::to_string(t) + ": lr " + show(lr) + ", PyTorch " +
            show(lrs[c * steps + t]));
    }
    std::printf("schedule %s warmup=%lld total=%lld base=%g: %zu steps "
                "bit-exact\n",
                name(s.kind), static_cast<long long>(s.warmupSteps),
                static_cast<long long>(s.totalSteps), k[3], steps);
  }
  return 0;
}

int runSqrt(const std::string &dir) {
  std::vector<float> x = load<float>(dir, "x"), want = load<float>(dir, "sqrt");
  if (x.size() != want.size())
    die(dir + ": the reference files do not agree in size");
  size_t inexact = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    float got = sqrtAs(SqrtKind::MklAvx512, x[i]);
    if (!same(got, want[i]))
      die("sqrt of " + show(x[i]) + ": " + show(got) + ", PyTorch " +
          show(want[i]));
    inexact += !same(got, sqrtAs(SqrtKind::Exact, x[i]));
  }
  std::printf("sqrt: %zu inputs, %zu of them below the exact root: "
              "bit-exact\n",
              x.size(), inexact);
  return 0;
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) float hardwareRsqrt14(float x) {
  __m128 v = _mm_set_ss(x);
  return _mm_cvtss_f32(_mm_rsqrt14_ss(v, v));
}
#endif

int runRsqrt14(bool all) {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) {
    uint64_t checked = 0;
    auto check = [&](uint32_t u) {
      float x;
      std::memcpy(&x, &u, 4);
      float a = rsqrt14(x), b = hardwareRsqrt14(x);
      if (!same(a, b))
        die("rsqrt14 of " + show(x) + ": model " + show(a) + ", instruction " +
            show(b));
      ++checked;
    };
    if (all) {
      for (uint64_t u = 0; u <= 0xffffffffu; ++u)
        check(static_cast<uint32_t>(u));
    } else {
      // Every significand in both exponent parities, every subnormal, and
      // every exponent of a few significands.
      for (uint32_t f = 0; f < (1u << 23); ++f) {
        check(127u << 23 | f);
        check(128u << 23 | f);
        check(f);
      }
      for (uint32_t e = 0; e < 256; ++e)
        for (uint32_t f : {0u, 1u, 0x2aaaaau, 0x7fffffu})
          for (uint32_t sign : {0u, 1u})
            check(sign << 31 | e << 23 | f);
    }
    std::printf("rsqrt14: the model equals the instruction on %llu inputs\n",
                static_cast<unsigned long long>(checked));
    return 0;
  }
#endif
  (void)all;
  std::printf("rsqrt14: this CPU has no AVX-512; the model was not compared "
              "with the instruction\n");
  return 0;
}

int runLoad(const std::string &dir) {
  LoadedCheckpoint l;
  if (std::string e = loadCheckpoint(dir, l); !e.empty())
    die(e);
  size_t withState = 0, elements = 0;
  for (size_t i = 0; i < l.params.size(); ++i) {
    withState += l.states[i].hasBuffer;
    elements += l.params[i].size();
  }
  std::printf("checkpoint: step %lld, %lld samples, %s, %zu params (%zu "
              "elements), %zu with state\n",
              static_cast<long long>(l.step),
              static_cast<long long>(l.samplesConsumed),
              describe(l.config, l.schedule).c_str(), l.params.size(), elements,
              withState);
  return 0;
}


/// C[m, n] = chain over k of fma(A[m, k], W[n, k], acc) from 0, plus the
/// bias: what the ordered GEMMs promise for every element.
float chain(const float *a, const float *w, int64_t K, float bias,
            bool hasBias) {
  float acc = 0;
  for (int64_t k = 0; k < K; ++k)
    acc = std::fma(a[k], w[k], acc);
  return hasBias ? bias + acc : acc;
}

int runGemmOrder() {
  std::mt19937 gen(7);
  std::normal_distribution<float> normal;
  auto random = [&](size_t n) {
    std::vector<float> v(n);
    for (float &x : v)
      x = normal(gen);
    return v;
  };
  int64_t checked = 0;
  auto expect = [&](const std::vector<float> &got,
                    const std::vector<float> &want, const std::string &what) {
    for (size_t i = 0; i < want.size(); ++i)
      if (!same(got[i], want[i]))
        die("gemm-order: " + what + ": element " + std::to_string(i) + " is " +
            show(got[i]) + ", the chain " + show(want[i]));
    checked += static_cast<int64_t>(want.size());
  };
  // Sizes around the kernel's tiles (6 rows, 16 columns) and work items
  // (192 rows, 64 columns).
  for (auto [M, N, K] : {std::array<int64_t, 3>{1, 1, 1}, {5, 17, 33},
                         {13, 40, 100}, {200, 70, 64}, {7, 130, 257}}) {
    std::vector<float> A = random(M * K), W = random(N * K),
                       bias = random(N);
    std::vector<float> want(M * N), got(M * N), wt(K * N);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n)
        want[m * N + n] = chain(&A[m * K], &W[n * K], K, 0, false);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n)
        wt[k * N + n] = W[n * K + k];
    std::string shape = std::to_string(M) + "x" + std::to_string(N) + "x" +
                        std::to_string(K);
    // B read transposed from W [N, K], then as stored [K, N].
    moert_matmul_f32(1, M, N, K, A.data(), 0, K, 1, W.data(), 0, 1, K,
                     got.data(), 0, N, 1, 0, 0);
    expect(got, want, shape + " with W read transposed");
    moert_matmul_f32(1, M, N, K, A.data(), 0, K, 1, wt.data(), 0, N, 1,
                     got.data(), 0, N, 1, 0, 0);
    expect(got, want, shape + " with B as stored");
    // One row at a time, accumulated onto a bias.
    std::vector<float> rowWant(N), rowGot(N);
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N; ++n) {
        rowWant[n] = chain(&A[m * K], &W[n * K], K, bias[n], true);
        rowGot[n] = bias[n];
      }
      moert_matmul_f32(1, 1, N, K, &A[m * K], 0, K, 1, W.data(), 0, 1, K,
                       rowGot.data(), 0, N, 1, 1, 0);
      expect(rowGot, rowWant, shape + " row " + std::to_string(m));
    }
    // The rows as groups of one expert (3 groups of 2 experts: merged per
    // expert or not), with and without the weights packed once, and the
    // few-rows entry point.
    std::vector<float> W2 = W, bias2 = bias;
    W2.insert(W2.end(), W.begin(), W.end()); // experts 0 and 1 alike
    bias2.insert(bias2.end(), bias.begin(), bias.end());
    std::vector<int32_t> counts = {static_cast<int32_t>(M / 3),
                                   static_cast<int32_t>(M / 3), 0};
    counts[2] = static_cast<int32_t>(M) - counts[0] - counts[1];
    for (bool constant : {false, true}) {
      setWeightsConstant(constant);
      for (int64_t groups : {int64_t(1), int64_t(3)}) {
        std::vector<int32_t> c = groups == 1
                                     ? std::vector<int32_t>{int32_t(M)}
                                     : counts;
        std::string what = shape + ", " + std::to_string(groups) +
                           " groups, weights " +
                           (constant ? "constant" : "changing");
        moert_grouped_matmul(MOERT_F32, groups, 2, c.data(), 0, M, K, N,
                             A.data(), W2.data(), bias2.data(), got.data());
        std::vector<float> biased(M * N);
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N; ++n)
            biased[m * N + n] = chain(&A[m * K], &W[n * K], K, bias[n], true);
        expect(got, biased, what);
        moert_grouped_matmul_few_rows(MOERT_F32, groups, 2, c.data(), M, K, N,
                                      A.data(), W2.data(), nullptr,
                                      got.data());
        expect(got, want, what + ", few rows");
      }
    }
    setWeightsConstant(false);
  }
  std::printf("gemm-order: %lld elements, each the same fused multiply-add "
              "chain\n",
              static_cast<long long>(checked));
  return 0;
}

/// Values of every magnitude and sign, with zeros, subnormals, infinities
/// and NaNs among them.
std::vector<float> wideValues(size_t n, uint32_t seed, bool nonNegative) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> exponent(-45.0f, 30.0f);
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    float x = std::pow(10.0f, exponent(gen));
    switch (gen() % 64) {
    case 0:
      x = 0;
      break;
    case 1:
      x = std::numeric_limits<float>::denorm_min() * (gen() % 1000);
      break;
    case 2:
      x = std::numeric_limits<float>::infinity();
      break;
    case 3:
      x = std::numeric_limits<float>::quiet_NaN();
      break;
    case 4:
      x = std::numeric_limits<float>::max();
      break;
    }
    out[i] = nonNegative || gen() % 2 ? x : -x;
  }
  return out;
}

int runKernels() {
  using namespace moert::train::detail;
  std::vector<Isa> paths;
  for (Isa isa : {Isa::Avx2, Isa::Avx512})
    if (available(isa))
      paths.push_back(isa);
  // An odd count: every path ends in its scalar tail.
  const size_t n = 100003;
  std::vector<float> param = wideValues(n, 1, false),
                     grad = wideValues(n, 2, false),
                     m = wideValues(n, 3, false), v = wideValues(n, 4, true);
  // A third of the moments zero, as for a new parameter.
  for (size_t i = 0; i < n; i += 3)
    m[i] = v[i] = 0;
  uint64_t cases = 0;
  auto check = [&](const std::string &what, const std::vector<float> &a,
                   const std::vector<float> &b) {
    for (size_t i = 0; i < a.size(); ++i)
      if (!same(a[i], b[i]))
        die(what + ": element " + std::to_string(i) + " is " + show(a[i]) +
            ", the scalar loop's " + show(b[i]));
  };
  for (SqrtKind sqrt : {SqrtKind::MklAvx512, SqrtKind::Exact})
    for (int variant = 0; variant < 4; ++variant)
      for (float scale : {1.0f, 0.3719f}) {
        AdamScalars s{};
        s.decay = variant & 1;
        s.decayFactor = 0.99999f;
        s.weight = variant & 2 ? 0.75f : 0.1f; // lerp's two forms
        s.smallWeight = s.weight < 0.5f;
        s.beta2 = 0.999f;
        s.oneMinusBeta2 = 1 - s.beta2;
        s.bc2Sqrt = 0.0447f;
        s.eps = 1e-8f;
        s.negStepSize = -0.0123f;
        s.sqrt = sqrt;
        std::vector<float> p0 = param, m0 = m, v0 = v;
        adamw(Isa::Scalar, s, scale, p0.data(), grad.data(), m0.data(),
              v0.data(), n);
        for (Isa isa : paths) {
          std::vector<float> p1 = param, m1 = m, v1 = v;
          adamw(isa, s, scale, p1.data(), grad.data(), m1.data(), v1.data(),
                n);
          std::string what = std::string("adamw ") + name(isa) + " (" +
                             moert::train::name(sqrt) + ", variant " +
                             std::to_string(variant) + ")";
          check(what + " param", p1, p0);
          check(what + " exp_avg", m1, m0);
          check(what + " exp_avg_sq", v1, v0);
          ++cases;
        }
      }

  // The vector roots alone: every significand of both exponent parities,
  // every subnormal, every exponent of a few significands, both signs.
  auto fromBits = [](uint32_t u) {
    float x;
    std::memcpy(&x, &u, 4);
    return x;
  };
  std::vector<float> x;
  for (uint32_t f = 0; f < (1u << 23); ++f)
    for (uint32_t bits : {127u << 23 | f, 128u << 23 | f, f})
      x.push_back(fromBits(bits));
  for (uint32_t e = 0; e < 256; ++e)
    for (uint32_t f : {0u, 1u, 0x2aaaaau, 0x7fffffu})
      for (uint32_t sign : {0u, 1u})
        x.push_back(fromBits(sign << 31 | e << 23 | f));
  for (SqrtKind sqrt : {SqrtKind::MklAvx512, SqrtKind::Exact}) {
    std::vector<float> want(x.size());
    sqrtAll(Isa::Scalar, sqrt, x.data(), want.data(), x.size());
    for (Isa isa : paths) {
      std::vector<float> got(x.size());
      sqrtAll(isa, sqrt, x.data(), got.data(), x.size());
      check(std::string(moert::train::name(sqrt)) + " sqrt " + name(isa), got,
            want);
      ++cases;
    }
  }

  // SGD and the norms.
  for (Isa isa : paths) {
    std::vector<float> rows = wideValues(n, 5, false);
    for (size_t len : {size_t(0), size_t(5), size_t(12), size_t(4099), n}) {
      float a = norm2(Isa::Scalar, rows.data(), len),
            b = norm2(isa, rows.data(), len);
      if (!same(a, b))
        die(std::string("norm2 ") + name(isa) + " of " + std::to_string(len) +
            " elements: " + show(b) + ", the scalar loop's " + show(a));
      ++cases;
    }
  }

  // The threaded step of several parameters (best path, all threads)
  // against the scalar loop per parameter.
  moert::setThreads(2);
  for (OptimizerKind kind : {OptimizerKind::AdamW, OptimizerKind::SGD}) {
    OptimizerConfig c;
    c.kind = kind;
    c.weightDecay = 0.1;
    c.momentum = 0.9;
    std::vector<size_t> sizes = {1, 70001, 16, 300007, 33};
    std::vector<std::vector<float>> w, g;
    std::vector<ParamState> threaded(sizes.size()), serial(sizes.size());
    for (size_t i = 0; i < sizes.size(); ++i) {
      w.push_back(wideValues(sizes[i], 10 + i, false));
      g.push_back(wideValues(sizes[i], 20 + i, false));
    }
    std::vector<std::vector<float>> w1 = w, w0 = w;
    for (int step = 0; step < 3; ++step) {
      std::vector<ParamUpdate> updates;
      for (size_t i = 0; i < sizes.size(); ++i)
        updates.push_back({w1[i].data(), g[i].data(), sizes[i], &threaded[i]});
      optimizerSteps(c, 1e-3, 0.625f, updates);
      for (size_t i = 0; i < sizes.size(); ++i) {
        std::vector<float> scaled = g[i];
        for (float &x : scaled)
          x = x * 0.625f;
        optimizerStep(c, 1e-3, w0[i].data(), scaled.data(), sizes[i],
                      serial[i]);
      }
    }
    for (size_t i = 0; i < sizes.size(); ++i) {
      std::string what = std::string("optimizerSteps ") +
                         moert::train::name(kind) + " param " +
                         std::to_string(i);
      check(what, w1[i], w0[i]);
      check(what + " state", kind == OptimizerKind::AdamW
                                 ? threaded[i].expAvgSq
                                 : threaded[i].momentumBuffer,
            kind == OptimizerKind::AdamW ? serial[i].expAvgSq
                                         : serial[i].momentumBuffer);
    }
    ++cases;
  }
  std::string names = "scalar";
  for (Isa isa : paths)
    names += std::string(", ") + name(isa);
  std::printf("kernels: %s; %llu cases bit-identical to the scalar loops "
              "(best path here: %s)\n",
              names.c_str(), static_cast<unsigned long long>(cases),
              name(bestIsa()));
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string usage =
      "usage: moert-train-test optimizer DIR [--resume-at K --checkpoint "
      "CKPT] | clip DIR | schedule DIR | sqrt DIR | rsqrt14 [--all] | load "
      "CKPT | gemm-order | kernels";
  if (args.empty())
    die(usage);
  const std::string &cmd = args[0];
  if (cmd == "gemm-order" && args.size() == 1)
    return runGemmOrder();
  if (cmd == "kernels" && args.size() == 1)
    return runKernels();
  if (cmd == "rsqrt14" && args.size() <= 2)
    return runRsqrt14(args.size() == 2 && args[1] == "--all");
  if (args.size() < 2)
    die(usage);
  if (cmd == "optimizer") {
    int64_t resumeAt = -1;
    std::string checkpoint;
    for (size_t i = 2; i + 1 < args.size(); i += 2) {
      if (args[i] == "--resume-at")
        resumeAt = std::stoll(args[i + 1]);
      else if (args[i] == "--checkpoint")
        checkpoint = args[i + 1];
      else
        die(usage);
    }
    if (args.size() % 2 != 0 || (resumeAt >= 0) != !checkpoint.empty())
      die(usage);
    return runOptimizer(args[1], resumeAt, checkpoint);
  }
  if (args.size() != 2)
    die(usage);
  if (cmd == "clip")
    return runClip(args[1]);
  if (cmd == "schedule")
    return runSchedule(args[1]);
  if (cmd == "sqrt")
    return runSqrt(args[1]);
  if (cmd == "load")
    return runLoad(args[1]);
  die(usage);
}
