//===- OptimizerKernels.h - AdamW, SGD and norm loops per ISA ---*- C++ -*-===//
//
// Internal to runtime/lib: the element loops of Optimizer.cpp, in portable
// scalar code and in AVX2 and AVX-512 code that computes every element with
// the same operations in the same order, so that each path gives the same
// bits (moert-train-test `kernels` checks it on every path the CPU has).
// Optimizer.cpp chooses the path and spreads the elements over the threads.
//
//===----------------------------------------------------------------------===//

#ifndef MOERT_LIB_OPTIMIZERKERNELS_H
#define MOERT_LIB_OPTIMIZERKERNELS_H

#include "moert/Train.h"

#include <cstddef>
#include <cstdint>

namespace moert::train::detail {

/// One AdamW step's scalars, each as PyTorch's kernels receive it.
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

/// The element loops' code paths. Best is the widest the CPU has, capped
/// as oneDNN's is by ONEDNN_MAX_CPU_ISA (so that forcing AVX2 for the
/// matmuls forces it here too).
enum class Isa { Scalar, Avx2, Avx512 };
Isa bestIsa();
bool available(Isa isa);
const char *name(Isa isa);

/// AdamW on n elements: the gradient is `grad[i] * gradScale` (clipping's
/// product, rounded as clip_grad_norm_ rounds it), then PyTorch's
/// single-tensor update of param, m (exp_avg) and v (exp_avg_sq).
void adamw(Isa isa, const AdamScalars &s, float gradScale, float *param,
           const float *grad, float *m, float *v, size_t n);

/// SGD on n elements, the gradient scaled as adamw's; `buf` is the momentum
/// buffer (unused without momentum).
void sgd(const SgdScalars &s, float gradScale, float *param, const float *grad,
         float *buf, size_t n);

/// The 2-norm of n contiguous fp32 as ATen's CPU kernel sums it.
float norm2(Isa isa, const float *x, size_t n);

/// sqrtAs(kind, x[i]) for n elements, on path `isa` (the roots of adamw's
/// loops, exposed for tests).
void sqrtAll(Isa isa, SqrtKind kind, const float *x, float *out, size_t n);

/// MKL's AVX-512 sqrt (SqrtKind::MklAvx512) in portable code.
float mklAvx512Sqrt(float x);
/// The VRSQRT14 estimate of a positive normal float, given as its bits.
float rsqrt14Normal(uint32_t bits);

} // namespace moert::train::detail

#endif // MOERT_LIB_OPTIMIZERKERNELS_H
