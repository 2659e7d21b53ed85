//===- OptimizerKernels.cpp - AdamW, SGD and norm loops per ISA ----------===//
//
// Every path computes each element with the operations of the scalar loop,
// in its order: IEEE multiplies, adds, divides, square roots and fused
// multiply-adds round alike in every lane width, so the paths agree bit for
// bit. MKL's AVX-512 sqrt starts from VRSQRT14: the AVX-512 path runs the
// instruction, the others its model below. The file is compiled with
// -ffp-contract=off, like Optimizer.cpp.
//
//===----------------------------------------------------------------------===//

#include "OptimizerKernels.h"

#include <oneapi/dnnl/dnnl.h>

#include <cmath>
#include <cstring>
#include <limits>

#if defined(__x86_64__) && defined(__ELF__)
#include <immintrin.h>
#define MOERT_X86_KERNELS 1
// The scalar loops run a hardware FMA where the CPU has one and call libm's
// fmaf elsewhere: the same exactly rounded result, several times faster.
#define MOERT_FMA_CLONES __attribute__((target_clones("fma", "default")))
#else
#define MOERT_FMA_CLONES
#endif

#pragma STDC FP_CONTRACT OFF

using namespace moert::train;
using namespace moert::train::detail;

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
alignas(64) static const uint32_t kRsqrt14[2][32][2] = {
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

float detail::rsqrt14Normal(uint32_t u) {
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

/// MKL's AVX-512 sqrt: the estimate r, y = x*r, and one Newton step
/// y + (x - y*y)*(r/2) with both fused; inputs below 2^-64 are scaled by
/// 2^100 first, so that x - y*y does not underflow. Checked against
/// PyTorch's sqrt on every float.
MOERT_FMA_CLONES
float detail::mklAvx512Sqrt(float x) {
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

float moert::train::rsqrt14(float x) {
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

float moert::train::sqrtAs(SqrtKind kind, float x) {
  return kind == SqrtKind::Exact ? std::sqrt(x) : mklAvx512Sqrt(x);
}

//===----------------------------------------------------------------------===//
// The scalar loops: the reference every path must equal
//===----------------------------------------------------------------------===//

template <SqrtKind Sqrt>
static inline void adamwScalarAs(const AdamScalars &s, float gradScale,
                                 float *param, const float *grad, float *m,
                                 float *v, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    float p = param[i], g = grad[i] * gradScale;
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
static void adamwScalar(const AdamScalars &s, float gradScale, float *param,
                        const float *grad, float *m, float *v, size_t n) {
  if (s.sqrt == SqrtKind::Exact)
    adamwScalarAs<SqrtKind::Exact>(s, gradScale, param, grad, m, v, n);
  else
    adamwScalarAs<SqrtKind::MklAvx512>(s, gradScale, param, grad, m, v, n);
}

MOERT_FMA_CLONES
void detail::sgd(const SgdScalars &s, float gradScale, float *param,
                 const float *grad, float *buf, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    float g = grad[i] * gradScale;
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

/// linalg.vector_norm(x) of contiguous fp32 as ATen's CPU kernel sums it.
/// The kernel (ReduceOpsKernel.cpp, built for AVX2 only, so taken on AVX-512
/// CPUs too) keeps eight partial sums of unfused squares and adds them in
/// order; GCC compiled the scalar tail loop into one 4-wide step of unfused
/// squares where at least four elements remain, then fused steps.
MOERT_FMA_CLONES
static float norm2Tail(float acc[8], const float *x, size_t i, size_t n) {
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

static float norm2Scalar(const float *x, size_t n) {
  float acc[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j)
      acc[j] = acc[j] + x[i + j] * x[i + j];
  return norm2Tail(acc, x, i, n);
}

static inline float sqrtScalar(SqrtKind kind, float x) {
  return kind == SqrtKind::Exact ? std::sqrt(x) : mklAvx512Sqrt(x);
}

#ifdef MOERT_X86_KERNELS
//===----------------------------------------------------------------------===//
// AVX2
//===----------------------------------------------------------------------===//

#define MOERT_AVX2 __attribute__((target("avx2,fma"), always_inline)) inline

/// rsqrt14Normal on eight lanes: the table's two coefficients gathered by
/// segment.
MOERT_AVX2 static __m256 rsqrt14Avx2(__m256 x) {
  const __m256i u = _mm256_castps_si256(x);
  const __m256i exp =
      _mm256_sub_epi32(_mm256_srli_epi32(u, 23), _mm256_set1_epi32(127));
  const __m256i frac = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffff));
  const __m256i odd = _mm256_and_si256(exp, _mm256_set1_epi32(1));
  const __m256i half = _mm256_srai_epi32(_mm256_sub_epi32(exp, odd), 1);
  const __m256i top = _mm256_srli_epi32(frac, 8);
  const __m256i segment =
      _mm256_add_epi32(_mm256_slli_epi32(odd, 5), _mm256_srli_epi32(top, 10));
  const int *table = reinterpret_cast<const int *>(&kRsqrt14[0][0][0]);
  const __m256i a = _mm256_i32gather_epi32(table, segment, 8);
  const __m256i b = _mm256_i32gather_epi32(table + 1, segment, 8);
  const __m256i v = _mm256_sub_epi32(
      _mm256_slli_epi32(a, 7),
      _mm256_mullo_epi32(b, _mm256_and_si256(top, _mm256_set1_epi32(1023))));
  const __m256i significand =
      _mm256_and_si256(_mm256_srli_epi32(v, 9), _mm256_set1_epi32(0xffff));
  const __m256i estimate = _mm256_or_si256(
      _mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(126), half), 23),
      _mm256_slli_epi32(significand, 7));
  const __m256i exact =
      _mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(127), half), 23);
  const __m256i powerOf4 = _mm256_cmpeq_epi32(_mm256_or_si256(odd, frac),
                                              _mm256_setzero_si256());
  return _mm256_castsi256_ps(_mm256_blendv_epi8(estimate, exact, powerOf4));
}

/// mklAvx512Sqrt on lanes that are zero or positive and finite.
MOERT_AVX2 static __m256 mklSqrtAvx2(__m256 x) {
  const __m256 small = _mm256_cmp_ps(x, _mm256_set1_ps(0x1p-64f), _CMP_LT_OQ);
  const __m256 xs =
      _mm256_blendv_ps(x, _mm256_mul_ps(x, _mm256_set1_ps(0x1p100f)), small);
  const __m256 scale =
      _mm256_blendv_ps(_mm256_set1_ps(1.0f), _mm256_set1_ps(0x1p-50f), small);
  const __m256 r = rsqrt14Avx2(xs);
  const __m256 y = _mm256_mul_ps(xs, r);
  const __m256 h = _mm256_mul_ps(_mm256_set1_ps(0.5f), r);
  const __m256 root = _mm256_mul_ps(
      _mm256_fmadd_ps(_mm256_fnmadd_ps(y, y, xs), h, y), scale);
  return _mm256_blendv_ps(root, x,
                          _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_EQ_OQ));
}

template <SqrtKind Sqrt>
__attribute__((target("avx2,fma"))) static void
adamwAvx2(const AdamScalars &s, float gradScale, float *param,
          const float *grad, float *m, float *v, size_t n) {
  const __m256 scale = _mm256_set1_ps(gradScale);
  const __m256 decayFactor = _mm256_set1_ps(s.decayFactor);
  const __m256 weight =
      _mm256_set1_ps(s.smallWeight ? s.weight : s.weight - 1.0f);
  const __m256 beta2 = _mm256_set1_ps(s.beta2);
  const __m256 oneMinusBeta2 = _mm256_set1_ps(s.oneMinusBeta2);
  const __m256 bc2Sqrt = _mm256_set1_ps(s.bc2Sqrt);
  const __m256 eps = _mm256_set1_ps(s.eps);
  const __m256 negStepSize = _mm256_set1_ps(s.negStepSize);
  const __m256 zero = _mm256_setzero_ps();
  const __m256 largest = _mm256_set1_ps(std::numeric_limits<float>::max());
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 p = _mm256_loadu_ps(param + i);
    const __m256 g = _mm256_mul_ps(_mm256_loadu_ps(grad + i), scale);
    if (s.decay)
      p = _mm256_mul_ps(p, decayFactor);
    const __m256 m0 = _mm256_loadu_ps(m + i);
    const __m256 diff = _mm256_sub_ps(g, m0);
    const __m256 m1 = _mm256_fmadd_ps(weight, diff, s.smallWeight ? m0 : g);
    const __m256 v1 =
        _mm256_fmadd_ps(_mm256_mul_ps(oneMinusBeta2, g), g,
                        _mm256_mul_ps(_mm256_loadu_ps(v + i), beta2));
    __m256 root;
    if constexpr (Sqrt == SqrtKind::Exact) {
      root = _mm256_sqrt_ps(v1);
    } else {
      // NaN, infinite or negative lanes: the scalar loop, whose special
      // cases these are.
      const __m256 ordinary =
          _mm256_and_ps(_mm256_cmp_ps(v1, zero, _CMP_GE_OQ),
                        _mm256_cmp_ps(v1, largest, _CMP_LE_OQ));
      if (_mm256_movemask_ps(ordinary) != 0xff) {
        adamwScalarAs<Sqrt>(s, gradScale, param + i, grad + i, m + i, v + i,
                            8);
        continue;
      }
      root = mklSqrtAvx2(v1);
    }
    const __m256 denom = _mm256_add_ps(_mm256_div_ps(root, bc2Sqrt), eps);
    _mm256_storeu_ps(m + i, m1);
    _mm256_storeu_ps(v + i, v1);
    _mm256_storeu_ps(
        param + i,
        _mm256_add_ps(p, _mm256_div_ps(_mm256_mul_ps(negStepSize, m1), denom)));
  }
  adamwScalarAs<Sqrt>(s, gradScale, param + i, grad + i, m + i, v + i, n - i);
}

__attribute__((target("avx2,fma"))) static float norm2Avx2(const float *x,
                                                           size_t n) {
  __m256 acc = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 y = _mm256_loadu_ps(x + i);
    acc = _mm256_add_ps(acc, _mm256_mul_ps(y, y));
  }
  float sums[8];
  _mm256_storeu_ps(sums, acc);
  return norm2Tail(sums, x, i, n);
}

//===----------------------------------------------------------------------===//
// AVX-512
//===----------------------------------------------------------------------===//

#define MOERT_AVX512 __attribute__((target("avx512f"), always_inline)) inline

/// mklAvx512Sqrt on lanes that are zero or positive and finite, from the
/// instruction itself.
MOERT_AVX512 static __m512 mklSqrtAvx512(__m512 x) {
  const __mmask16 small =
      _mm512_cmp_ps_mask(x, _mm512_set1_ps(0x1p-64f), _CMP_LT_OQ);
  const __m512 xs =
      _mm512_mask_mul_ps(x, small, x, _mm512_set1_ps(0x1p100f));
  const __m512 scale = _mm512_mask_blend_ps(small, _mm512_set1_ps(1.0f),
                                            _mm512_set1_ps(0x1p-50f));
  const __m512 r = _mm512_rsqrt14_ps(xs);
  const __m512 y = _mm512_mul_ps(xs, r);
  const __m512 h = _mm512_mul_ps(_mm512_set1_ps(0.5f), r);
  const __m512 root = _mm512_mul_ps(
      _mm512_fmadd_ps(_mm512_fnmadd_ps(y, y, xs), h, y), scale);
  return _mm512_mask_blend_ps(
      _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_EQ_OQ), root, x);
}

template <SqrtKind Sqrt>
__attribute__((target("avx512f"))) static void
adamwAvx512(const AdamScalars &s, float gradScale, float *param,
            const float *grad, float *m, float *v, size_t n) {
  const __m512 scale = _mm512_set1_ps(gradScale);
  const __m512 decayFactor = _mm512_set1_ps(s.decayFactor);
  const __m512 weight =
      _mm512_set1_ps(s.smallWeight ? s.weight : s.weight - 1.0f);
  const __m512 beta2 = _mm512_set1_ps(s.beta2);
  const __m512 oneMinusBeta2 = _mm512_set1_ps(s.oneMinusBeta2);
  const __m512 bc2Sqrt = _mm512_set1_ps(s.bc2Sqrt);
  const __m512 eps = _mm512_set1_ps(s.eps);
  const __m512 negStepSize = _mm512_set1_ps(s.negStepSize);
  const __m512 zero = _mm512_setzero_ps();
  const __m512 largest = _mm512_set1_ps(std::numeric_limits<float>::max());
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 p = _mm512_loadu_ps(param + i);
    const __m512 g = _mm512_mul_ps(_mm512_loadu_ps(grad + i), scale);
    if (s.decay)
      p = _mm512_mul_ps(p, decayFactor);
    const __m512 m0 = _mm512_loadu_ps(m + i);
    const __m512 diff = _mm512_sub_ps(g, m0);
    const __m512 m1 = _mm512_fmadd_ps(weight, diff, s.smallWeight ? m0 : g);
    const __m512 v1 =
        _mm512_fmadd_ps(_mm512_mul_ps(oneMinusBeta2, g), g,
                        _mm512_mul_ps(_mm512_loadu_ps(v + i), beta2));
    __m512 root;
    if constexpr (Sqrt == SqrtKind::Exact) {
      root = _mm512_sqrt_ps(v1);
    } else {
      const __mmask16 ordinary =
          _mm512_cmp_ps_mask(v1, zero, _CMP_GE_OQ) &
          _mm512_cmp_ps_mask(v1, largest, _CMP_LE_OQ);
      if (ordinary != 0xffff) {
        adamwScalarAs<Sqrt>(s, gradScale, param + i, grad + i, m + i, v + i,
                            16);
        continue;
      }
      root = mklSqrtAvx512(v1);
    }
    const __m512 denom = _mm512_add_ps(_mm512_div_ps(root, bc2Sqrt), eps);
    _mm512_storeu_ps(m + i, m1);
    _mm512_storeu_ps(v + i, v1);
    _mm512_storeu_ps(
        param + i,
        _mm512_add_ps(p, _mm512_div_ps(_mm512_mul_ps(negStepSize, m1), denom)));
  }
  adamwScalarAs<Sqrt>(s, gradScale, param + i, grad + i, m + i, v + i, n - i);
}
/// The roots alone, as the AdamW loops take them (special lanes from the
/// scalar function).
__attribute__((target("avx2,fma"))) static void
sqrtAvx2(SqrtKind kind, const float *x, float *out, size_t n) {
  const __m256 largest = _mm256_set1_ps(std::numeric_limits<float>::max());
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 ordinary =
        _mm256_and_ps(_mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GE_OQ),
                      _mm256_cmp_ps(v, largest, _CMP_LE_OQ));
    if (kind == SqrtKind::Exact)
      _mm256_storeu_ps(out + i, _mm256_sqrt_ps(v));
    else if (_mm256_movemask_ps(ordinary) == 0xff)
      _mm256_storeu_ps(out + i, mklSqrtAvx2(v));
    else
      for (size_t j = i; j < i + 8; ++j)
        out[j] = mklAvx512Sqrt(x[j]);
  }
  for (; i < n; ++i)
    out[i] = sqrtScalar(kind, x[i]);
}

__attribute__((target("avx512f"))) static void
sqrtAvx512(SqrtKind kind, const float *x, float *out, size_t n) {
  const __m512 largest = _mm512_set1_ps(std::numeric_limits<float>::max());
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    const __mmask16 ordinary =
        _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_GE_OQ) &
        _mm512_cmp_ps_mask(v, largest, _CMP_LE_OQ);
    if (kind == SqrtKind::Exact)
      _mm512_storeu_ps(out + i, _mm512_sqrt_ps(v));
    else if (ordinary == 0xffff)
      _mm512_storeu_ps(out + i, mklSqrtAvx512(v));
    else
      for (size_t j = i; j < i + 16; ++j)
        out[j] = mklAvx512Sqrt(x[j]);
  }
  for (; i < n; ++i)
    out[i] = sqrtScalar(kind, x[i]);
}
#endif // MOERT_X86_KERNELS

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

bool detail::available(Isa isa) {
#ifdef MOERT_X86_KERNELS
  switch (isa) {
  case Isa::Scalar:
    return true;
  case Isa::Avx2:
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  case Isa::Avx512:
    return __builtin_cpu_supports("avx512f") && available(Isa::Avx2);
  }
  return false;
#else
  return isa == Isa::Scalar;
#endif
}

Isa detail::bestIsa() {
  static const Isa best = [] {
    unsigned cap = dnnl_get_effective_cpu_isa();
    auto allows = [&](dnnl_cpu_isa_t isa) { return (cap & isa) == isa; };
    if (available(Isa::Avx512) && allows(dnnl_cpu_isa_avx512_core))
      return Isa::Avx512;
    if (available(Isa::Avx2) && allows(dnnl_cpu_isa_avx2))
      return Isa::Avx2;
    return Isa::Scalar;
  }();
  return best;
}

const char *detail::name(Isa isa) {
  switch (isa) {
  case Isa::Scalar:
    return "scalar";
  case Isa::Avx2:
    return "avx2";
  case Isa::Avx512:
    return "avx512";
  }
  return "?";
}

void detail::adamw(Isa isa, const AdamScalars &s, float gradScale,
                   float *param, const float *grad, float *m, float *v,
                   size_t n) {
#ifdef MOERT_X86_KERNELS
  bool exact = s.sqrt == SqrtKind::Exact;
  if (isa == Isa::Avx512)
    return exact ? adamwAvx512<SqrtKind::Exact>(s, gradScale, param, grad, m,
                                                v, n)
                 : adamwAvx512<SqrtKind::MklAvx512>(s, gradScale, param, grad,
                                                    m, v, n);
  if (isa == Isa::Avx2)
    return exact ? adamwAvx2<SqrtKind::Exact>(s, gradScale, param, grad, m, v,
                                              n)
                 : adamwAvx2<SqrtKind::MklAvx512>(s, gradScale, param, grad, m,
                                                  v, n);
#endif
  adamwScalar(s, gradScale, param, grad, m, v, n);
}

void detail::sqrtAll(Isa isa, SqrtKind kind, const float *x, float *out,
                     size_t n) {
#ifdef MOERT_X86_KERNELS
  if (isa == Isa::Avx512)
    return sqrtAvx512(kind, x, out, n);
  if (isa == Isa::Avx2)
    return sqrtAvx2(kind, x, out, n);
#endif
  for (size_t i = 0; i < n; ++i)
    out[i] = sqrtScalar(kind, x[i]);
}

float detail::norm2(Isa isa, const float *x, size_t n) {
#ifdef MOERT_X86_KERNELS
  // Eight partial sums are one AVX2 register; AVX-512 has nothing to add.
  if (isa != Isa::Scalar)
    return norm2Avx2(x, n);
#endif
  return norm2Scalar(x, n);
}
