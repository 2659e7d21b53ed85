//===- Optimizer.cpp - AdamW, SGD and clipping as PyTorch computes them ---===//
//
// Each rounding is the one that torch.optim's single-tensor path gets from
// ATen's CPU kernels (their sources, checked bit for bit against PyTorch 2.x
// by test/runtime/train):
// - Python computes the scalars in double (1 - lr*wd, 1 - beta1, lr/bc1,
//   bc2**0.5); the kernels cast each to float.
// - add_(x, alpha=a) is fma(x, a, self) (ufunc::add's vector form; the
//   compiler contracts the scalar tail loop alike, so no element differs).
// - lerp_(end, w) is fma(w, end - self, self) for |w| < 0.5, else
//   fma(w - 1, end - self, end) (LerpKernel.cpp's lerp_vec).
// - addcmul_(t1, t2, value=c) is fma(c*t1, t2, self); addcdiv_ is
//   self + c*t1/t2, three roundings.
// - sqrt: see SqrtKind; the 2-norm: see norm2.
// This file is compiled with -ffp-contract=off (runtime/CMakeLists.txt) so
// that the compiler fuses nothing but the std::fmaf calls.
//
//===----------------------------------------------------------------------===//

#include "moert/Runtime.h"
#include "moert/Train.h"

#include <cmath>
#include <cstring>
#include <limits>

#pragma STDC FP_CONTRACT OFF

using namespace moert;
using namespace moert::train;

// The loops run a hardware FMA where the CPU has one and call libm's fmaf
// elsewhere: the same exactly rounded result, several times faster.
#if defined(__x86_64__) && defined(__ELF__)
#define MOERT_FMA_CLONES __attribute__((target_clones("fma", "default")))
#else
#define MOERT_FMA_CLONES
#endif

static uint32_t bitsOf(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

static float fromBits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

//===----------------------------------------------------------------------===//
// sqrt as MKL's AVX-512 vsSqrt rounds it
//===----------------------------------------------------------------------===//

// VRSQRT14 interpolates linearly on 32 segments of [1, 2) and 32 of [2, 4),
// indexed by the input's exponent parity and top five fraction bits, from
// the top 15 fraction bits: v = 128a - b*t (t the next ten bits) in
// [2^25, 2^26), of which the top 17 bits are the estimate's significand.
// The coefficients (a, b) were measured from the instruction, the only pair
// per segment that reproduces it; with them the model equals the
// instruction on all 2^32 inputs (`moert-train-test rsqrt14` checks it on
// every significand where the CPU has AVX-512).
static const uint32_t kRsqrt14[2][32][2] = {
    {
        {524265, 1001}, {516257, 955}, {508613, 915}, {501298, 877},
        {494286, 841},  {487559, 807}, {481101, 775}, {474897, 747},
        {468922, 719},  {463169, 693}, {457623, 669}, {452276, 647},
        {447106, 625},  {442106, 603}, {437279, 585}, {432603, 567},
        {428071, 549},  {423683, 533}, {419423, 517}, {415288, 501},
        {411277, 487},  {407379, 473}, {403592, 461}, {399907, 449},
        {396319, 437},  {392827, 425}, {389430, 415}, {386110, 403},
        {382879, 393},  {379734, 385}, {376655, 375}, {373658, 367},
    },
    {
        {370709, 707}, {365049, 675}, {359644, 647}, {354468, 619},
        {349516, 595}, {344759, 571}, {340193, 549}, {335801, 527},
        {331581, 509}, {327515, 491}, {323589, 473}, {319805, 457},
        {316149, 441}, {312618, 427}, {309201, 413}, {305899, 401},
        {302695, 389}, {299587, 377}, {296575, 365}, {293657, 355},
        {290819, 345}, {288062, 335}, {285380, 325}, {282776, 317},
        {280242, 309}, {277773, 301}, {275367, 293}, {273022, 285},
        {270741, 279}, {268509, 271}, {266336, 265}, {264214, 259},
    },
};

/// VRSQRT14 of a positive normal float, given as its bits.
static inline float rsqrt14Normal(uint32_t u) {
  int exp = static_cast<int>(u >> 23) - 127;
  uint32_t frac = u & 0x7fffffu;
  int odd = exp & 1;
  int half = (exp - odd) / 2;
  if (!odd && !frac) // a power of 4 is exact
    return fromBits(static_cast<uint32_t>(127 - half) << 23);
  uint32_t top = frac >> 8;
  const uint32_t *c = kRsqrt14[odd][top >> 10];
  uint32_t v = c[0] * 128 - c[1] * (top & 1023);
  uint32_t significand = (v >> 9) & 0xffffu;
  return fromBits(static_cast<uint32_t>(126 - half) << 23 | significand << 7);
}

float train::rsqrt14(float x) {
  uint32_t u = bitsOf(x);
  if (std::isnan(x))
    return fromBits(u | 0x400000u);
  if (x == 0)
    return std::copysign(std::numeric_limits<float>::infinity(), x);
  if (u >> 31)
    return fromBits(0xffc00000u); // the default NaN
  if (std::isinf(x))
    return 0.0f;
  if (u >= 0x800000u)
    return rsqrt14Normal(u);
  // A subnormal: the instruction normalises it. Scaling by 2^64 does the
  // same exactly, and scales the estimate by 2^-32.
  return rsqrt14Normal(bitsOf(x * 0x1p64f)) * 0x1p32f;
}

/// MKL's AVX-512 sqrt: the estimate r, y = x*r, and one Newton step
/// y + (x - y*y)*(r/2) with both fused; inputs below 2^-64 are scaled by
/// 2^100 first, so that x - y*y does not underflow. Checked against
/// PyTorch's sqrt on every float.
static inline float mklAvx512Sqrt(float x) {
  float scale = 1.0f;
  if (!(x >= 0x1p-64f && x <= std::numeric_limits<float>::max())) {
    if (!(x > 0) || std::isinf(x)) {
      if (x == 0 || x > 0)
        return x;
      return std::isnan(x) ? fromBits(bitsOf(x) | 0x400000u)
                           : fromBits(0x7fc00000u);
    }
    x *= 0x1p100f;
    scale = 0x1p-50f;
  }
  float r = rsqrt14Normal(bitsOf(x));
  float y = x * r, h = 0.5f * r;
  return std::fmaf(std::fmaf(-y, y, x), h, y) * scale;
}

float train::sqrtAs(SqrtKind kind, float x) {
  return kind == SqrtKind::Exact ? std::sqrt(x) : mklAvx512Sqrt(x);
}

//===----------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------===//

std::string train::validate(const OptimizerConfig &c) {
  auto bad = [](const char *what, double v) {
    return std::string("invalid ") + what + " " + std::to_string(v);
  };
  for (double v :
       {c.lr, c.momentum, c.dampening, c.beta1, c.beta2, c.eps, c.weightDecay})
    if (!std::isfinite(v))
      return "optimizer values must be finite";
  if (c.lr < 0)
    return bad("learning rate", c.lr);
  if (c.weightDecay < 0)
    return bad("weight decay", c.weightDecay);
  if (c.kind == OptimizerKind::SGD) {
    if (c.momentum < 0)
      return bad("momentum", c.momentum);
    if (c.nesterov && (c.momentum <= 0 || c.dampening != 0))
      return "nesterov momentum requires a momentum and zero dampening";
    return "";
  }
  if (c.eps < 0)
    return bad("epsilon", c.eps);
  if (!(c.beta1 >= 0 && c.beta1 < 1))
    return bad("beta1", c.beta1);
  if (!(c.beta2 >= 0 && c.beta2 < 1))
    return bad("beta2", c.beta2);
  return "";
}

namespace {
/// One AdamW step's scalars, each as the kernel receives it.
struct AdamScalars {
  bool decay;
  float decayFactor; ///< 1 - lr*wd
  float weight;      ///< lerp weight 1 - beta1
  bool smallWeight;
  float beta2, oneMinusBeta2, bc2Sqrt, eps, negStepSize;
  SqrtKind sqrt;
};

struct SgdScalars {
  bool decay, momentum, firstStep, nesterov;
  float weightDecay, mu, alpha /* 1 - dampening */, negLr;
};
} // namespace

template <SqrtKind Sqrt>
static inline void adamwLoopAs(const AdamScalars &s, float *param,
                               const float *grad, float *m, float *v,
                               size_t n) {
  for (size_t i = 0; i < n; ++i) {
    float p = param[i], g = grad[i];
    if (s.decay)
      p = p * s.decayFactor;
    float diff = g - m[i];
    m[i] = s.smallWeight ? std::fmaf(s.weight, diff, m[i])
                         : std::fmaf(s.weight - 1.0f, diff, g);
    v[i] = std::fmaf(s.oneMinusBeta2 * g, g, v[i] * s.beta2);
    float root =
        Sqrt == SqrtKind::Exact ? std::sqrt(v[i]) : mklAvx512Sqrt(v[i]);
    float denom = root / s.bc2Sqrt + s.eps;
    param[i] = p + s.negStepSize * m[i] / denom;
  }
}

MOERT_FMA_CLONES
static void adamwLoop(const AdamScalars &s, float *param, const float *grad,
                      float *m, float *v, size_t n) {
  if (s.sqrt == SqrtKind::Exact)
    adamwLoopAs<SqrtKind::Exact>(s, param, grad, m, v, n);
  else
    adamwLoopAs<SqrtKind::MklAvx512>(s, param, grad, m, v, n);
}

MOERT_FMA_CLONES
static void sgdLoop(const SgdScalars &s, float *param, const float *grad,
                    float *buf, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    float g = grad[i];
    if (s.decay) // grad.add(param, alpha=wd)
      g = std::fmaf(param[i], s.weightDecay, g);
    if (s.momentum) { // buf.mul_(mu).add_(g, alpha=1-dampening)
      float b = s.firstStep ? g : std::fmaf(g, s.alpha, buf[i] * s.mu);
      buf[i] = b;
      g = s.nesterov ? std::fmaf(b, s.mu, g) : b;
    }
    param[i] = std::fmaf(g, s.negLr, param[i]);
  }
}

void train::optimizerStep(const OptimizerConfig &c, double lr, float *param,
                          const float *grad, size_t n, ParamState &state) {
  if (c.kind == OptimizerKind::SGD) {
    SgdScalars s;
    s.decay = c.weightDecay != 0;
    s.weightDecay = static_cast<float>(c.weightDecay);
    s.momentum = c.momentum != 0;
    s.mu = static_cast<float>(c.momentum);
    s.alpha = static_cast<float>(1 - c.dampening);
    s.nesterov = c.nesterov;
    s.negLr = static_cast<float>(-lr);
    s.firstStep = s.momentum && !state.hasBuffer;
    if (s.firstStep) {
      state.momentumBuffer.assign(n, 0.0f);
      state.hasBuffer = true;
    } else if (s.momentum && state.momentumBuffer.size() != n) {
      fatal("SGD: the momentum buffer has " +
            std::to_string(state.momentumBuffer.size()) +
            " elements, the parameter " + std::to_string(n));
    }
    sgdLoop(s, param, grad, state.momentumBuffer.data(), n);
    return;
  }

  if (!state.hasBuffer) {
    state.expAvg.assign(n, 0.0f);
    state.expAvgSq.assign(n, 0.0f);
    state.hasBuffer = true;
  } else if (state.expAvg.size() != n || state.expAvgSq.size() != n) {
    fatal("AdamW: the moments have " + std::to_string(state.expAvg.size()) +
          " and " + std::to_string(state.expAvgSq.size()) +
          " elements, the parameter " + std::to_string(n));
  }
  ++state.step;
  double t = static_cast<double>(state.step);
  double bc1 = 1 - std::pow(c.beta1, t), bc2 = 1 - std::pow(c.beta2, t);
  AdamScalars s;
  s.decay = c.weightDecay != 0;
  s.decayFactor = static_cast<float>(1 - lr * c.weightDecay);
  s.weight = static_cast<float>(1 - c.beta1);
  s.smallWeight = std::abs(s.weight) < 0.5f;
  s.beta2 = static_cast<float>(c.beta2);
  s.oneMinusBeta2 = static_cast<float>(1 - c.beta2);
  s.bc2Sqrt = static_cast<float>(std::pow(bc2, 0.5)); // Python's bc2**0.5
  s.eps = static_cast<float>(c.eps);
  s.negStepSize = static_cast<float>(-(lr / bc1));
  s.sqrt = c.sqrt;
  adamwLoop(s, param, grad, state.expAvg.data(), state.expAvgSq.data(), n);
}

//===----------------------------------------------------------------------===//
// Clipping
//===----------------------------------------------------------------------===//

/// linalg.vector_norm(x) of contiguous fp32 as ATen's CPU kernel sums it.
/// The kernel (ReduceOpsKernel.cpp, built for AVX2 only, so taken on AVX-512
/// CPUs too) keeps eight partial sums of unfused squares and adds them in
/// order; GCC compiled the scalar tail loop into one 4-wide step of unfused
/// squares where at least four elements remain, then fused steps.
MOERT_FMA_CLONES
float train::norm2(const float *x, size_t n) {
  float acc[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j)
      acc[j] = acc[j] + x[i + j] * x[i + j];
  float sum = acc[0];
  for (int j = 1; j < 8; ++j)
    sum = sum + acc[j];
  if (n - i >= 4)
    for (size_t end = i + 4; i < end; ++i)
      sum = sum + x[i] * x[i];
  for (; i < n; ++i)
    sum = std::fmaf(x[i], x[i], sum);
  return std::sqrt(sum);
}

double train::clipGradNorm(
    const std::vector<std::pair<float *, size_t>> &grads, double maxNorm,
    const std::function<void(std::vector<float> &)> &combine) {
  std::vector<float> norms;
  norms.reserve(grads.size());
  for (const auto &[g, n] : grads)
    norms.push_back(norm2(g, n));
  if (combine)
    combine(norms);
  float total = norm2(norms.data(), norms.size());
  if (!(maxNorm > 0) || std::isinf(maxNorm))
    return total;
  // max_norm / (total + 1e-6) is Tensor.__rtruediv__: reciprocal, then a
  // product; clamp(max=1) keeps a NaN.
  float coef =
      static_cast<float>(maxNorm) * (1.0f / (total + static_cast<float>(1e-6)));
  if (coef > 1.0f)
    coef = 1.0f;
  for (const auto &[g, n] : grads)
    for (size_t i = 0; i < n; ++i)
      g[i] = g[i] * coef;
  return total;
}

//===----------------------------------------------------------------------===//
// Names
//===----------------------------------------------------------------------===//

const char *train::name(OptimizerKind kind) {
  return kind == OptimizerKind::SGD ? "sgd" : "adamw";
}

const char *train::name(SqrtKind kind) {
  return kind == SqrtKind::Exact ? "exact" : "mkl-avx512";
}

bool train::parse(const std::string &text, OptimizerKind &kind) {
  for (OptimizerKind k : {OptimizerKind::SGD, OptimizerKind::AdamW})
    if (text == name(k))
      return kind = k, true;
  return false;
}

bool train::parse(const std::string &text, SqrtKind &kind) {
  for (SqrtKind k : {SqrtKind::MklAvx512, SqrtKind::Exact})
    if (text == name(k))
      return kind = k, true;
  return false;
}
