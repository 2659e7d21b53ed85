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
// The element loops are in OptimizerKernels.cpp, one per ISA with the same
// bits; a step's parameters are cut into blocks that the OpenMP pool's
// threads share. This file is compiled with -ffp-contract=off
// (runtime/CMakeLists.txt) so that the compiler fuses nothing but the
// std::fmaf calls.
//
//===----------------------------------------------------------------------===//

#include "OptimizerKernels.h"
#include "WorkItems.h"

#include "moert/Runtime.h"
#include "moert/Train.h"

#include <algorithm>
#include <array>
#include <cmath>

#pragma STDC FP_CONTRACT OFF

using namespace moert;
using namespace moert::train;
using namespace moert::train::detail;
using moert::detail::shareItems;

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
/// One parameter's update with its scalars, made before the threads start.
struct Prepared {
  ParamUpdate update;
  AdamScalars adam;
  SgdScalars sgd;
};

Prepared prepare(const OptimizerConfig &c, double lr, const ParamUpdate &u) {
  Prepared out{u, {}, {}};
  ParamState &state = *u.state;
  size_t n = u.n;
  if (c.kind == OptimizerKind::SGD) {
    SgdScalars &s = out.sgd;
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
    return out;
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
  AdamScalars &s = out.adam;
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
  return out;
}

/// Elements a work item updates: 4 streams of 128 KiB, enough to amortize
/// handing it out, small enough to balance the threads.
constexpr size_t kBlockElems = size_t(1) << 15;

/// Calls `body(i, begin, end)` for blocks of each of `sizes`, spread over
/// the threads.
template <typename Body>
void forEachBlock(const std::vector<size_t> &sizes, const Body &body) {
  std::vector<std::array<size_t, 3>> blocks;
  for (size_t i = 0; i < sizes.size(); ++i)
    for (size_t begin = 0; begin < sizes[i]; begin += kBlockElems)
      blocks.push_back({i, begin, std::min(sizes[i], begin + kBlockElems)});
  shareItems(blocks.size(), [&](size_t b) {
    body(blocks[b][0], blocks[b][1], blocks[b][2]);
  });
}
} // namespace

void train::optimizerSteps(const OptimizerConfig &c, double lr,
                           float gradScale,
                           const std::vector<ParamUpdate> &updates) {
  std::vector<Prepared> prepared;
  std::vector<size_t> sizes;
  prepared.reserve(updates.size());
  for (const ParamUpdate &u : updates) {
    prepared.push_back(prepare(c, lr, u));
    sizes.push_back(u.n);
  }
  Isa isa = bestIsa();
  bool adamw = c.kind == OptimizerKind::AdamW;
  forEachBlock(sizes, [&](size_t i, size_t begin, size_t end) {
    const Prepared &p = prepared[i];
    const ParamUpdate &u = p.update;
    if (adamw)
      detail::adamw(isa, p.adam, gradScale, u.param + begin, u.grad + begin,
                    u.state->expAvg.data() + begin,
                    u.state->expAvgSq.data() + begin, end - begin);
    else // without momentum there is no buffer (and no offset into it)
      detail::sgd(p.sgd, gradScale, u.param + begin, u.grad + begin,
                  p.sgd.momentum ? u.state->momentumBuffer.data() + begin
                                 : nullptr,
                  end - begin);
  });
}

void train::optimizerStep(const OptimizerConfig &c, double lr, float *param,
                          const float *grad, size_t n, ParamState &state) {
  optimizerSteps(c, lr, 1.0f, {{param, grad, n, &state}});
}

//===----------------------------------------------------------------------===//
// Clipping
//===----------------------------------------------------------------------===//

float train::norm2(const float *x, size_t n) {
  return detail::norm2(bestIsa(), x, n);
}

float train::totalGradNorm(
    const std::vector<std::pair<float *, size_t>> &grads,
    const std::function<void(std::vector<float> &)> &combine) {
  // A tensor's sum is one chain of eight partial sums: the tensors, not
  // their elements, are spread over the threads.
  std::vector<float> norms(grads.size());
  Isa isa = bestIsa();
  shareItems(grads.size(), [&](size_t i) {
    norms[i] = detail::norm2(isa, grads[i].first, grads[i].second);
  });
  if (combine)
    combine(norms);
  return detail::norm2(isa, norms.data(), norms.size());
}

float train::clipCoefficient(double maxNorm, float total) {
  if (!(maxNorm > 0) || std::isinf(maxNorm))
    return 1.0f;
  // max_norm / (total + 1e-6) is Tensor.__rtruediv__: reciprocal, then a
  // product; clamp(max=1) keeps a NaN.
  float coef =
      static_cast<float>(maxNorm) * (1.0f / (total + static_cast<float>(1e-6)));
  return coef > 1.0f ? 1.0f : coef;
}

double train::clipGradNorm(
    const std::vector<std::pair<float *, size_t>> &grads, double maxNorm,
    const std::function<void(std::vector<float> &)> &combine) {
  float total = totalGradNorm(grads, combine);
  if (!(maxNorm > 0) || std::isinf(maxNorm))
    return total;
  float coef = clipCoefficient(maxNorm, total);
  std::vector<size_t> sizes;
  for (const auto &grad : grads)
    sizes.push_back(grad.second);
  forEachBlock(sizes, [&](size_t i, size_t begin, size_t end) {
    float *g = grads[i].first;
    for (size_t j = begin; j < end; ++j)
      g[j] = g[j] * coef;
  });
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
