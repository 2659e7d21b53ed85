//===- Train.h - Optimizers, clipping, schedules, checkpoints ---*- C++ -*-===//
//
// The host side of a training step: after the compiled step returns the
// loss and one fp32 gradient per parameter, the caller clips the gradients
// (clipGradNorm), asks the schedule for this step's learning rate (lrAt) and
// updates each parameter that got a gradient (optimizerStep). Each function
// reproduces PyTorch bit for bit: torch.optim.AdamW and SGD on their CPU
// single-tensor path (foreach=False), clip_grad_norm_, and the LambdaLR
// multipliers of transformers' get_*_schedule_with_warmup. Checkpoints hold
// the master weights and the optimizer state, written atomically.
//
// A parameter that got no gradient in a step (an expert of an eager
// ModuleList that no token reached) is skipped entirely: the caller does not
// call optimizerStep for it and leaves it out of clipGradNorm, as
// torch.optim skips a parameter whose .grad is None. It then gets no weight
// decay, its moments do not decay and its step count does not advance.
//
//===----------------------------------------------------------------------===//

#ifndef MOERT_TRAIN_H
#define MOERT_TRAIN_H

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace moert::train {

enum class OptimizerKind { SGD, AdamW };

/// How AdamW rounds sqrt(exp_avg_sq). PyTorch's CPU sqrt of a contiguous
/// fp32 tensor calls MKL's vsSqrt. Its AVX-512 code, which Intel CPUs with
/// AVX-512 run, refines the 14-bit VRSQRT14 estimate by one Newton step and
/// is one ulp below the exact root for about 0.7% of inputs; its AVX2 code
/// (MKL_ENABLE_INSTRUCTIONS=AVX2) rounds exactly. MklAvx512 is computed in
/// portable code: it gives the same bits on any machine.
enum class SqrtKind { MklAvx512, Exact };

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::AdamW;
  double lr = 1e-3;                   ///< base lr; the schedule scales it
  double momentum = 0, dampening = 0; ///< SGD
  bool nesterov = false;              ///< SGD
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8; ///< AdamW
  /// SGD: coupled L2 (g += wd*theta); AdamW: decoupled (theta *= 1-lr*wd).
  double weightDecay = 0;
  SqrtKind sqrt = SqrtKind::MklAvx512; ///< AdamW
};

/// What torch.optim refuses (a negative lr, a beta outside [0, 1), nesterov
/// without momentum or with dampening, a non-finite value); empty when the
/// configuration is valid.
std::string validate(const OptimizerConfig &config);

/// Per parameter, as torch.optim keeps it.
struct ParamState {
  int64_t step = 0;       ///< AdamW's per-parameter step count
  bool hasBuffer = false; ///< SGD momentum_buffer / AdamW moments exist
  std::vector<float> expAvg, expAvgSq; ///< AdamW
  std::vector<float> momentumBuffer;   ///< SGD
};

/// One optimizer step on one parameter of `n` fp32 elements, exactly as
/// torch.optim's single-tensor CPU path computes it; `lr` is this step's
/// scheduled lr. The first step creates the state (zero moments; SGD's
/// momentum buffer is a copy of the gradient). `grad` is not modified.
/// AdamW counts steps as exact integers, where PyTorch's float32 step
/// counter stops at 2^24.
void optimizerStep(const OptimizerConfig &config, double lr, float *param,
                   const float *grad, size_t n, ParamState &state);

/// One parameter's part of a step: `n` fp32 weights, their gradient and
/// their optimizer state.
struct ParamUpdate {
  float *param;
  const float *grad;
  size_t n;
  ParamState *state;
};

/// optimizerStep on every parameter of `updates`, each gradient taken as
/// `grad[i] * gradScale` (clipping's coefficient, rounded as
/// clip_grad_norm_'s in-place product rounds it; 1 leaves it exact). The
/// elements are spread over the threads of the OpenMP pool (moert's
/// --threads) and computed with the CPU's widest vectors: the bits are
/// those of the single-tensor path whatever the threads and the ISA.
void optimizerSteps(const OptimizerConfig &config, double lr, float gradScale,
                    const std::vector<ParamUpdate> &updates);

/// The 2-norm of `n` contiguous fp32, summed as PyTorch's CPU kernel sums
/// it (what clipGradNorm takes of each gradient).
float norm2(const float *x, size_t n);

/// clipGradNorm's total norm, without scaling anything: the tensors are
/// normed on the threads of the pool.
float totalGradNorm(
    const std::vector<std::pair<float *, size_t>> &grads,
    const std::function<void(std::vector<float> &)> &combine = nullptr);

/// The factor clip_grad_norm_ multiplies every gradient by for a total
/// norm `total`: min(maxNorm / (total + 1e-6), 1), rounded as PyTorch
/// rounds it; 1 for maxNorm <= 0 or infinite (no clipping).
float clipCoefficient(double maxNorm, float total);

/// torch.nn.utils.clip_grad_norm_(params, maxNorm) with norm_type 2: the
/// norm of the per-tensor 2-norms, each summed in fp32 as ATen's x86 CPU
/// kernel (its AVX2 build, which AVX-512 CPUs run too) sums it, then every
/// gradient multiplied by min(maxNorm / (total + 1e-6), 1), even when that
/// is 1. Returns the total norm before clipping. maxNorm <= 0 or infinite:
/// no clipping (where PyTorch would zero the gradients for 0). On several
/// ranks, `combine` turns each rank's per-tensor norms of its pieces into
/// the norms of the whole tensors.
double clipGradNorm(
    const std::vector<std::pair<float *, size_t>> &grads, double maxNorm,
    const std::function<void(std::vector<float> &)> &combine = nullptr);

/// sqrt(x) rounded as `kind` says; exposed for tests.
float sqrtAs(SqrtKind kind, float x);
/// The VRSQRT14SS instruction, modelled in portable code; exposed for tests.
float rsqrt14(float x);

enum class ScheduleKind { Constant, Cosine, Linear };

/// transformers' get_constant_schedule_with_warmup,
/// get_cosine_schedule_with_warmup (num_cycles 0.5) and
/// get_linear_schedule_with_warmup under torch's LambdaLR.
struct Schedule {
  ScheduleKind kind = ScheduleKind::Constant;
  int64_t warmupSteps = 0;
  int64_t totalSteps = 0; ///< unused by Constant
  /// The lr of the optimizer step with 0-based index `step`: the value
  /// before that step's scheduler.step().
  double lrAt(double baseLr, int64_t step) const;
};

/// Empty when the schedule is valid (no negative step counts).
std::string validate(const Schedule &schedule);

/// Names as checkpoints and tools spell them: "sgd", "adamw"; "constant",
/// "cosine", "linear"; "mkl-avx512", "exact". parse* return false on others.
const char *name(OptimizerKind kind);
const char *name(ScheduleKind kind);
const char *name(SqrtKind kind);
bool parse(const std::string &text, OptimizerKind &kind);
bool parse(const std::string &text, ScheduleKind &kind);
bool parse(const std::string &text, SqrtKind &kind);

/// One parameter to save: its fp32 master weights and optimizer state.
struct CheckpointParam {
  std::string name;
  std::vector<int64_t> shape;
  const float *data;
  const ParamState *state;
};

/// Writes the directory `dir`: checkpoint.json (format version, step, data
/// position, optimizer config, schedule, and per parameter its name, shape,
/// byte ranges and state), params.bin (the weights, concatenated) and
/// optimizer.bin (the states). The files are written to `dir`.partial,
/// synced, and then take the place of `dir` in one rename, so that a job
/// killed at any point leaves either the old checkpoint or the new one. An
/// existing `dir` must be a checkpoint (or empty). Returns an error message,
/// empty on success.
std::string saveCheckpoint(const std::string &dir, int64_t step,
                           int64_t samplesConsumed,
                           const OptimizerConfig &config,
                           const Schedule &schedule,
                           const std::vector<CheckpointParam> &params);

struct LoadedCheckpoint {
  int64_t step = 0, samplesConsumed = 0;
  OptimizerConfig config;
  Schedule schedule;
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<std::vector<float>> params;
  std::vector<ParamState> states;
};

/// Reads a checkpoint that saveCheckpoint wrote. A malformed, truncated or
/// corrupted one (each file's size and digest are checked) is refused with
/// one message naming the file and what is wrong; `out` is then unspecified.
/// Returns an error message, empty on success.
std::string loadCheckpoint(const std::string &dir, LoadedCheckpoint &out);

} // namespace moert::train

#endif // MOERT_TRAIN_H
