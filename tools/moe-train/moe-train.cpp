//===- moe-train.cpp - Trains a compiled training step --------------------===//
//
// moe-train BUNDLE --input NAME=FILE.npy ... --steps N --batch-size B
//           [--lr X --momentum X --dampening X --nesterov --betas B1,B2
//            --eps X --weight-decay X --clip-grad-norm X --warmup-steps N
//            --schedule constant|cosine|linear] [--log FILE.csv]
//           [--checkpoint-dir DIR --checkpoint-every K] [--stop-after K]
//           [--resume DIR] [--output-dir DIR] [--stats] [--stats-json FILE]
//           [--timeout S]
//           [--zero-stage 1] [--replan-every N] [--placement-algorithm A]
//
// BUNDLE comes from moe-compile --train. Each input file holds the whole
// data set, samples along its first dimension; step s (from 0) reads the
// samples [s*B, (s+1)*B), wrapping around. Each step calls the compiled
// step (loss and one gradient per parameter), clips the gradients, and
// updates the fp32 master weights with the optimizer the bundle was
// compiled for, exactly as PyTorch does (moert/Train.h), on all threads;
// f32 weights are their own masters (MasterWeights.h), others are refreshed
// from theirs.
//
// A bundle compiled for several ranks runs under mpirun, every rank with
// the same data (Distributed.h): rank 0 writes the log, the summary and
// the final weights, gathered whole from the ranks' pieces.
//
//===----------------------------------------------------------------------===//

#include "Data.h"
#include "Distributed.h"
#include "ShardedCheckpoint.h"
#include "Library.h"
#include "MasterWeights.h"
#include "Manifest.h"
#include "Replacement.h"
#include "Slots.h"

#include "moert/Npy.h"
#include "moert/Runtime.h"
#include "moert/Train.h"
#ifdef MOE_RUN_HAVE_CUDA
#include "moert/moert_cuda.h"
#endif

#include "moe/Support/Input.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <sys/resource.h>
#include <unistd.h>

using namespace llvm;
using namespace moe_run;
namespace train = moert::train;
namespace planner = moe::planner;

namespace {
struct Options {
  cl::OptionCategory category{"moe-train options"};
  cl::opt<std::string> bundleDir{cl::Positional, cl::Required,
                                 cl::desc("<bundle directory>"),
                                 cl::cat(category)};
  cl::list<std::string> inputs{
      "input", cl::desc("NAME=FILE.npy: a whole data set (samples first)"),
      cl::cat(category)};
  cl::opt<int64_t> steps{"steps", cl::Required,
                         cl::desc("Optimizer steps to run in all"),
                         cl::cat(category)};
  cl::opt<int64_t> batchSize{"batch-size", cl::Required,
                             cl::desc("Samples per step (the compiled batch)"),
                             cl::cat(category)};
  cl::opt<double> lr{"lr", cl::desc("Learning rate (default 1e-3)"),
                     cl::init(1e-3), cl::cat(category)};
  cl::opt<double> momentum{"momentum", cl::desc("SGD momentum"), cl::init(0),
                           cl::cat(category)};
  cl::opt<double> dampening{"dampening", cl::desc("SGD dampening"),
                            cl::init(0), cl::cat(category)};
  cl::opt<bool> nesterov{"nesterov", cl::desc("SGD Nesterov momentum"),
                         cl::cat(category)};
  cl::opt<std::string> betas{"betas", cl::desc("AdamW B1,B2 (0.9,0.999)"),
                             cl::init("0.9,0.999"), cl::cat(category)};
  cl::opt<double> eps{"eps", cl::desc("AdamW epsilon (1e-8)"), cl::init(1e-8),
                      cl::cat(category)};
  cl::opt<double> weightDecay{
      "weight-decay",
      cl::desc("Weight decay (AdamW: decoupled, default 0.01; SGD: L2, 0)"),
      cl::cat(category)};
  cl::opt<double> clipGradNorm{
      "clip-grad-norm",
      cl::desc("Clip the global gradient norm to X (default: no clipping)"),
      cl::init(0), cl::cat(category)};
  cl::opt<int64_t> warmupSteps{"warmup-steps",
                               cl::desc("Linear warm-up steps"), cl::init(0),
                               cl::cat(category)};
  cl::opt<std::string> schedule{
      "schedule", cl::desc("constant, cosine or linear (decay to 0 at --steps)"),
      cl::init("constant"), cl::cat(category)};
  cl::opt<std::string> log{"log", cl::desc("CSV file: one row per step"),
                           cl::cat(category)};
  cl::opt<std::string> checkpointDir{
      "checkpoint-dir", cl::desc("Where checkpoints go"), cl::cat(category)};
  cl::opt<int64_t> checkpointEvery{
      "checkpoint-every",
      cl::desc("Steps between checkpoints (and one at the end)"), cl::init(0),
      cl::cat(category)};
  cl::opt<int64_t> stopAfter{
      "stop-after",
      cl::desc("Stop after this many steps of the --steps run (checkpoint "
               "written), to be resumed later"),
      cl::init(0), cl::cat(category)};
  cl::opt<std::string> resume{"resume",
                              cl::desc("Continue from this checkpoint"),
                              cl::cat(category)};
  cl::opt<std::string> outputDir{
      "output-dir", cl::desc("Write the final weights there, one .npy each"),
      cl::cat(category)};
  cl::opt<bool> skipNonFinite{
      "skip-nonfinite-steps",
      cl::desc("Skip a step whose loss or gradient norm is not finite, with "
               "a warning, as mixed-precision loss scaling does (default: "
               "stop with an error before any weight takes it)"),
      cl::cat(category)};
  cl::opt<bool> stats{
      "stats",
      cl::desc("At the end, print each MoE layer's tokens per expert, "
               "dropped tokens and time over the run"),
      cl::cat(category)};
  cl::opt<std::string> statsJson{
      "stats-json",
      cl::desc("Write the tokens each MoE layer's experts received, one "
               "record per step, as JSON (moe-plan placement --trace reads "
               "it)"),
      cl::value_desc("file"), cl::cat(category)};
  cl::opt<unsigned> replanEvery{
      "replan-every", cl::init(10),
      cl::desc("Bundles with re-placeable experts (moe-compile "
               "--redundant-per-rank): re-place them by the load of the last "
               "N steps, every N steps, masters and optimizer state with "
               "them (default 10, as SmartMoE; 0: never)"),
      cl::cat(category)};
  cl::opt<std::string> placementAlgorithm{
      "placement-algorithm", cl::init("ours"),
      cl::desc("How to re-place experts: ours or eplb"), cl::cat(category)};
  cl::opt<int> threads{"threads", cl::desc("Threads (default: all cores)"),
                       cl::init(0), cl::cat(category)};
  cl::opt<int64_t> microbatches{
      "microbatches",
      cl::desc("Microbatches a step accumulates (default 1): the step runs "
               "the compiled program M times on --batch-size / M samples "
               "each, and the loss and gradients are the microbatches' "
               "mean, as Megatron and DeepSpeed accumulate them"),
      cl::init(1), cl::cat(category)};
  cl::opt<int> zeroStage{
      "zero-stage",
      cl::desc("1: ZeRO-1, the optimizer state of each parameter cut over "
               "the ranks that hold it alike (its data-parallel replicas), "
               "each updating its chunk; 0: every rank keeps all of it "
               "(default). The result is the same, bit for bit"),
      cl::init(0), cl::cat(category)};
  cl::opt<double> timeout{
      "timeout",
      cl::desc("Seconds that one wait for other ranks may last before every "
               "rank ends with an error (default 300)"),
      cl::init(moert::kDefaultTimeoutSeconds), cl::cat(category)};
};

Options &options() {
  static Options *opts = [] {
    setAsideLLVMOptions();
    return new Options;
  }();
  return *opts;
}

Error failure(const Twine &message) { return createStringError(message); }

/// `values` ([shape], row-major) with its dimensions permuted: dimension i
/// of the result is dimension perm[i] of `values`.
std::pair<std::vector<float>, std::vector<int64_t>>
permuteDims(const std::vector<float> &values, const std::vector<int64_t> &shape,
            const std::vector<int64_t> &perm) {
  size_t rank = shape.size();
  std::vector<int64_t> outShape(rank), strides(rank, 1), outStrides(rank);
  for (size_t i = rank; i-- > 1;)
    strides[i - 1] = strides[i] * shape[i];
  for (size_t i = 0; i < rank; ++i) {
    outShape[i] = shape[perm[i]];
    outStrides[i] = strides[perm[i]];
  }
  std::vector<float> out(values.size());
  std::vector<int64_t> index(rank, 0);
  for (size_t n = 0; n < out.size(); ++n) {
    int64_t from = 0;
    for (size_t i = 0; i < rank; ++i)
      from += index[i] * outStrides[i];
    out[n] = values[from];
    for (size_t i = rank; i-- > 0;) {
      if (++index[i] < outShape[i])
        break;
      index[i] = 0;
    }
  }
  return {std::move(out), std::move(outShape)};
}

/// Whether `spec`'s piece is cut from its parameter along dimension 0
/// over the expert-parallel grid axis alone (an expert weight [E, ...]).
bool cutByExpertsOnly(const Manifest &m, const TensorSpec &spec) {
  if (spec.slices.empty() || spec.shape.empty() || spec.shape[0] <= 0)
    return false;
  for (const TensorSpec::Slice &slice : spec.slices) {
    if (slice.dim != 0)
      return false;
    for (int64_t axis : slice.axes)
      if (axis < 0 || axis >= static_cast<int64_t>(m.axes.size()) ||
          m.axes[axis] != "ep")
        return false;
  }
  return true;
}

/// A parameter: its fp32 master weights, the symbols of model.so that hold
/// copies of it, its optimizer state and the output with its gradient.
struct Param {
  std::string name;
  std::vector<int64_t> shape;
  /// The weights' type in model.so (f32, or f16/bf16 with fp32 masters).
  const moert::DType *type = nullptr;
  moe_train::MasterWeights master;
  /// The gradient widened to fp32, for f16 and bf16 weights.
  std::vector<float> grad;
  /// The microbatches' gradients summed, with --microbatches above 1.
  std::vector<float> accumulated;
  std::vector<char *> copies;
  train::ParamState state;
  int gradOutput = -1;
  /// The weight that describes the parameter's piece on this rank.
  const TensorSpec *spec = nullptr;
  moe_train::Placement placement;
  moe_train::Replicas replicas;
  /// Laid out by the slots of this MoE layer (moe-compile
  /// --redundant-per-rank), one row of rowElems per local slot; else -1.
  int64_t slotLayer = -1, rowElems = 0;
  /// Cut by experts over the expert-parallel ranks only, without slots:
  /// the experts of the whole parameter, one row of rowElems each; else 0.
  int64_t shardedExperts = 0;

  /// The elements whose optimizer state this rank keeps and updates.
  std::pair<size_t, size_t> updated() const {
    return options().zeroStage ? replicas.chunk(master.size())
                               : std::pair<size_t, size_t>{0, master.size()};
  }
};

struct Trainer {
  Manifest manifest;
  Entry entry = nullptr;
  std::vector<Param> params;
  moe_train::TrainingData data;
  std::vector<moert::Buffer> outputs;
  int lossOutput = -1, auxOutput = -1;
  /// The digest of model.json, which names the digests of the rest.
  std::string manifestDigest;
  train::OptimizerConfig config;
  train::Schedule schedule;
  int64_t firstStep = 0;
  /// Re-placement of experts on slots; empty for other bundles.
  std::optional<ExpertReplacer> replacer;
};

std::string inBundle(StringRef file) {
  SmallString<128> path(options().bundleDir);
  sys::path::append(path, file);
  return std::string(path);
}

Error findParams(Trainer &t, const std::vector<char *> &symbols) {
  const Manifest &m = t.manifest;
  std::map<std::string, size_t> byName;
  for (auto [spec, symbol] : zip_equal(m.weights, symbols)) {
    if (spec.param.empty())
      continue;
    std::string type = spec.type->name;
    if (type != "f32" && type != "f16" && type != "bf16")
      return failure(formatv("parameter '{0}' is {1}; moe-train updates "
                             "f32, f16 and bf16 weights",
                             spec.param, type));
    auto [it, inserted] = byName.try_emplace(spec.param, t.params.size());
    if (inserted) {
      Param &p = t.params.emplace_back();
      p.name = spec.param;
      p.shape = spec.shape;
      p.type = spec.type;
      p.spec = &spec;
      p.placement = moe_train::placementOf(m, spec, moert::worldRank());
      p.replicas = moe_train::replicasOf(m, spec, moert::worldRank());
      if (spec.slotLayer >= 0 && !spec.shape.empty() && spec.shape[0] > 0) {
        p.slotLayer = spec.slotLayer;
        p.rowElems = moert::numElements(spec.shape) / spec.shape[0];
      } else if (cutByExpertsOnly(m, spec)) {
        p.shardedExperts = p.placement.wholeShape[0];
        p.rowElems = moert::numElements(spec.shape) / spec.shape[0];
      }
      // fp32 master weights, whatever the model computes in: for f32
      // weights, the model's first copy itself.
      size_t n = moert::numElements(spec.shape);
      if (type == "f32") {
        p.master.alias(reinterpret_cast<float *>(symbol), n);
      } else {
        p.master.own(n);
        moert::widenToFloat(*spec.type, symbol, p.master.data(), n);
        p.grad.resize(n);
      }
    } else if (t.params[it->second].shape != spec.shape ||
               t.params[it->second].type != spec.type) {
      return failure(formatv("two weights of parameter '{0}' differ in shape "
                             "or type",
                             spec.param));
    }
    t.params[it->second].copies.push_back(symbol);
  }
  for (auto [i, spec] : enumerate(m.outputs)) {
    t.outputs.emplace_back(spec.bytes());
    StringRef name = spec.name;
    bool scalar = moert::numElements(spec.shape) == 1 &&
                  spec.type->name == std::string("f32");
    if ((name == "loss" || name == "aux_loss") && !scalar)
      return failure(formatv("output '{0}' is not one f32", spec.name));
    if (name == "loss")
      t.lossOutput = i;
    else if (name == "aux_loss")
      t.auxOutput = i;
    else if (name.consume_front("grad:")) {
      auto it = byName.find(name.str());
      if (it == byName.end())
        return failure(formatv("output '{0}' is the gradient of no weight",
                               spec.name));
      if (spec.shape != t.params[it->second].shape ||
          spec.type != t.params[it->second].type)
        return failure(formatv("gradient '{0}' has the shape {1} (or a type), "
                               "its weight {2}",
                               spec.name, moert::shapeString(spec.shape),
                               moert::shapeString(t.params[it->second].shape)));
      t.params[it->second].gradOutput = i;
    }
  }
  if (t.lossOutput < 0 || t.auxOutput < 0)
    return failure("the bundle's step returns no 'loss' and 'aux_loss': "
                   "compile it with moe-compile --train");
  return Error::success();
}

Error configure(Trainer &t) {
  Options &o = options();
  train::OptimizerConfig &c = t.config;
  train::parse(t.manifest.optimizer, c.kind);
  c.lr = o.lr;
  c.momentum = o.momentum;
  c.dampening = o.dampening;
  c.nesterov = o.nesterov;
  c.eps = o.eps;
  bool adamw = c.kind == train::OptimizerKind::AdamW;
  c.weightDecay = o.weightDecay.getNumOccurrences() ? o.weightDecay
                                                     : (adamw ? 0.01 : 0.0);
  auto [b1, b2] = StringRef(o.betas).split(',');
  if (b1.trim().getAsDouble(c.beta1) || b2.trim().getAsDouble(c.beta2))
    return failure("--betas " + o.betas + ": expected B1,B2");
  if (!adamw)
    for (cl::Option *opt : {(cl::Option *)&o.betas, (cl::Option *)&o.eps})
      if (opt->getNumOccurrences())
        return failure(formatv("--{0} is an AdamW option; the bundle was "
                               "compiled with --optimizer=sgd",
                               opt->ArgStr));
  if (adamw)
    for (cl::Option *opt : {(cl::Option *)&o.momentum,
                            (cl::Option *)&o.dampening,
                            (cl::Option *)&o.nesterov})
      if (opt->getNumOccurrences())
        return failure(formatv("--{0} is an SGD option; the bundle was "
                               "compiled with --optimizer=adamw",
                               opt->ArgStr));
  if (std::string error = train::validate(c); !error.empty())
    return failure(error);
  if (!train::parse(o.schedule, t.schedule.kind))
    return failure("--schedule " + o.schedule +
                   ": expected constant, cosine or linear");
  t.schedule.warmupSteps = o.warmupSteps;
  t.schedule.totalSteps = o.steps;
  if (std::string error = train::validate(t.schedule); !error.empty())
    return failure(error);
  if (o.steps < 1)
    return failure("--steps must be at least 1");
  if (o.stopAfter < 0 || (o.stopAfter > 0 && o.checkpointDir.empty()))
    return failure("--stop-after needs a positive step count and "
                   "--checkpoint-dir DIR to resume from");
  if (o.microbatches < 1 || o.batchSize % o.microbatches != 0)
    return failure(formatv("--microbatches {0} must be at least 1 and divide "
                           "--batch-size {1}",
                           o.microbatches.getValue(), o.batchSize.getValue()));
  if (o.zeroStage != 0 && o.zeroStage != 1)
    return failure("--zero-stage must be 0 or 1");
  if (!(o.clipGradNorm >= 0) || std::isnan(o.clipGradNorm))
    return failure("--clip-grad-norm must be a number >= 0");
  if (o.checkpointEvery < 0 ||
      (o.checkpointEvery > 0 && o.checkpointDir.empty()))
    return failure("--checkpoint-every needs a positive K and "
                   "--checkpoint-dir DIR");
  return Error::success();
}

Error resumeFrom(Trainer &t, const std::string &dir) {
  train::LoadedCheckpoint ckpt;
  if (std::string error = moe_train::isSharded(dir)
                              ? moe_train::loadSharded(dir, ckpt)
                              : train::loadCheckpoint(dir, ckpt);
      !error.empty())
    return failure(error);
  if (ckpt.names.size() != t.params.size())
    return failure(formatv("checkpoint {0} holds {1} parameters, the bundle "
                           "{2}",
                           dir, ckpt.names.size(), t.params.size()));
  // Whole parameters, found by name: a checkpoint written under any plan
  // resumes under any other, each rank taking its piece.
  std::map<std::string, size_t> byName;
  for (auto [i, name] : enumerate(ckpt.names))
    byName[name] = i;
  for (Param &p : t.params) {
    auto it = byName.find(p.name);
    if (it == byName.end())
      return failure(formatv("checkpoint {0} holds no parameter '{1}'", dir,
                             p.name));
    size_t i = it->second;
    // Per expert in the checkpoint, per slot here.
    std::vector<int64_t> wholeShape = p.placement.wholeShape;
    const planner::Placement *slots =
        p.slotLayer >= 0 ? t.replacer->placement(p.slotLayer) : nullptr;
    if (slots) {
      wholeShape[0] = slots->numExperts();
      if (ckpt.shapes[i] == wholeShape) {
        for (std::vector<float> *whole :
             {&ckpt.params[i], &ckpt.states[i].expAvg,
              &ckpt.states[i].expAvgSq, &ckpt.states[i].momentumBuffer})
          if (!whole->empty())
            *whole = moe_train::slotsFromExperts(*whole, p.rowElems, *slots);
        ckpt.shapes[i] = wholeShape = p.placement.wholeShape;
      }
    }
    if (ckpt.shapes[i] != wholeShape)
      return failure(formatv("checkpoint {0} holds '{1}' as {2}, the bundle "
                             "as {3}",
                             dir, p.name, moert::shapeString(ckpt.shapes[i]),
                             moert::shapeString(wholeShape)));
    p.master.assign(moe_train::cutPiece(ckpt.params[i], p.shape, p.placement));
    std::pair<size_t, size_t> kept = p.updated();
    auto piece = [&](const std::vector<float> &whole) {
      if (whole.empty())
        return whole;
      std::vector<float> cut = moe_train::cutPiece(whole, p.shape, p.placement);
      return std::vector<float>(cut.begin() + kept.first,
                                cut.begin() + kept.second);
    };
    train::ParamState &state = ckpt.states[i];
    state.expAvg = piece(state.expAvg);
    state.expAvgSq = piece(state.expAvgSq);
    state.momentumBuffer = piece(state.momentumBuffer);
    p.state = std::move(state);
  }
  if (ckpt.config.kind != t.config.kind)
    return failure(formatv("checkpoint {0} was written by {1}, the bundle "
                           "trains with {2}",
                           dir, train::name(ckpt.config.kind),
                           train::name(t.config.kind)));
  t.firstStep = ckpt.step;
  if (t.firstStep >= options().steps)
    return failure(formatv("checkpoint {0} is at step {1}; --steps {2} "
                           "leaves nothing to run",
                           dir, ckpt.step, options().steps.getValue()));
  return Error::success();
}

/// Refreshes the weights model.so reads from the masters, where they are
/// not the masters themselves (and, for a CUDA bundle, the device's copies
/// of them).
void publish(Trainer &t) {
  for (Param &p : t.params)
    for (char *copy : p.copies) {
      int64_t bytes = p.master.size() * p.type->size;
      if (!p.master.isAlias(copy))
        moert::narrowFromFloat(*p.type, p.master.data(), copy,
                               p.master.size());
#ifdef MOE_RUN_HAVE_CUDA
      if (t.manifest.target == "cuda")
        moert_cuda_update_global(copy, bytes);
#endif
    }
}

/// The samples of microbatch `micro` of step `step` into the batch
/// buffers: step s reads the samples [s*B, (s+1)*B), microbatch m the m-th
/// B/M of them.
void fillBatch(Trainer &t, int64_t step, int64_t micro) {
  int64_t perStep = options().batchSize;
  int64_t b = perStep / options().microbatches;
  for (size_t i = 0; i < t.data.datasets.size(); ++i) {
    int64_t sampleBytes =
        t.data.batches[i].size() / (t.data.wholeSamples[i] ? 1 : b);
    for (int64_t row = 0; row < b; ++row) {
      int64_t sample = (step * perStep + micro * b + row) % t.data.samples;
      std::memcpy(t.data.batches[i].data() + row * sampleBytes,
                  t.data.datasets[i].data.data() + sample * sampleBytes,
                  sampleBytes);
    }
  }
}

/// Writes a checkpoint from which a run resumes under any plan
/// (resumeFrom): on one rank, the ordinary one; on several, each rank
/// writes the pieces it is the first holder of (ShardedCheckpoint.h).
/// Collective.
/// A checkpoint of a bundle with experts on slots: every parameter and
/// optimizer state gathered whole to rank 0, slot-laid ones per expert, in
/// the one-file format (resumed under any placement or plan). Collective.
Error saveWholePerExpert(Trainer &t, int64_t stepsDone) {
  const Options &o = options();
  std::vector<std::vector<float>> wholes;
  std::vector<train::ParamState> states(t.params.size());
  std::vector<train::CheckpointParam> saved;
  wholes.reserve(t.params.size());
  for (size_t i = 0; i < t.params.size(); ++i) {
    Param &p = t.params[i];
    train::ParamState &state = states[i];
    std::vector<int64_t> shape = p.placement.wholeShape;
    const planner::Placement *slots =
        p.slotLayer >= 0 ? t.replacer->placement(p.slotLayer) : nullptr;
    auto whole = [&](ArrayRef<float> piece) {
      if (piece.empty())
        return std::vector<float>();
      std::vector<float> w = moe_train::gatherWhole(t.manifest, *p.spec, piece);
      return slots && !w.empty()
                 ? moe_train::expertsFromSlots(w, p.rowElems, *slots)
                 : w;
    };
    if (slots)
      shape[0] = slots->numExperts();
    wholes.push_back(whole(p.master));
    state = p.state;
    state.expAvg = whole(p.state.expAvg);
    state.expAvgSq = whole(p.state.expAvgSq);
    state.momentumBuffer = whole(p.state.momentumBuffer);
    saved.push_back({p.name, shape, wholes.back().data(), &state});
  }
  std::string error;
  if (moert::worldRank() == 0)
    error = train::saveCheckpoint(o.checkpointDir, stepsDone,
                                  stepsDone * o.batchSize, t.config,
                                  t.schedule, saved);
  moert::failIfAnyRank(error);
  return Error::success();
}

Error save(Trainer &t, int64_t stepsDone) {
  const Options &o = options();
  if (t.replacer)
    return saveWholePerExpert(t, stepsDone);
  if (t.manifest.worldSize == 1) {
    std::vector<train::CheckpointParam> saved;
    for (Param &p : t.params)
      saved.push_back({p.name, p.shape, p.master.data(), &p.state});
    if (std::string error = train::saveCheckpoint(
            o.checkpointDir, stepsDone, stepsDone * o.batchSize, t.config,
            t.schedule, saved);
        !error.empty())
      return failure(error);
    return Error::success();
  }
  // Each piece's optimizer state whole over the piece: under ZeRO-1 the
  // replicas' chunks first. Every rank decides alike (a chunk may be
  // empty): collective.
  bool adamw = t.config.kind == train::OptimizerKind::AdamW;
  std::vector<train::ParamState> states;
  states.reserve(t.params.size());
  for (Param &p : t.params) {
    size_t begin = p.updated().first;
    auto piece = [&](const std::vector<float> &kept, bool exists) {
      if (!exists || !o.zeroStage)
        return kept;
      std::vector<float> whole(p.master.size());
      std::copy(kept.begin(), kept.end(), whole.begin() + begin);
      moe_train::gatherChunks(whole.data(), whole.size(), p.replicas);
      return whole;
    };
    train::ParamState &state = states.emplace_back(p.state);
    bool moments = adamw && p.state.hasBuffer;
    state.expAvg = piece(p.state.expAvg, moments);
    state.expAvgSq = piece(p.state.expAvgSq, moments);
    state.momentumBuffer =
        piece(p.state.momentumBuffer, !adamw && p.state.hasBuffer);
  }
  std::vector<moe_train::HeldParam> held;
  for (auto [p, state] : zip_equal(t.params, states))
    held.push_back({p.name, p.spec, p.master, &state});
  moe_train::saveSharded(o.checkpointDir, t.manifest, held, stepsDone,
                         stepsDone * o.batchSize, t.config, t.schedule);
  return Error::success();
}

/// Resident memory in MiB: now (from /proc/self/statm), and the process's
/// peak so far.
double residentMiB() {
  long pages = 0, resident = 0;
  if (FILE *f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2)
      resident = 0;
    std::fclose(f);
  }
  return static_cast<double>(resident) * sysconf(_SC_PAGESIZE) / (1 << 20);
}

double peakResidentMiB() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0; // KiB on Linux
}

std::string formatTime(double seconds) {
  int64_t s = static_cast<int64_t>(seconds + 0.5);
  return formatv("{0}:{1:2}", s / 60, s % 60).str();
}

/// In the gradient norm, each expert once: the norms per expert (from the
/// rank of each one's first replica that counts the piece, `owners`),
/// normed in expert order on rank 0, which alone counts the parameter
/// then. Expert weights cut over the expert-parallel ranks without slots
/// are normed the same way, so that a program with slots and one without
/// agree on the norm, and on the gradients that clipping scales by it.
/// Collective.
void countExpertsOnce(Trainer &t,
                      const std::vector<std::pair<float *, size_t>> &grads,
                      std::vector<float> &norms, std::vector<bool> &owners) {
  size_t next = 0;
  for (Param &p : t.params) {
    if (p.gradOutput < 0)
      continue;
    size_t i = next++;
    if (p.slotLayer < 0 && p.shardedExperts == 0)
      continue;
    int64_t first = p.placement.offsets.empty() ? 0 : p.placement.offsets[0];
    std::vector<float> perExpert;
    if (p.slotLayer >= 0) {
      const planner::Placement &placement =
          *t.replacer->placement(p.slotLayer);
      perExpert = owners[i] ? moe_train::firstReplicaNorms(
                                  grads[i].first, p.rowElems, first, placement)
                            : std::vector<float>(placement.numExperts(), 0.0f);
    } else {
      perExpert.assign(p.shardedExperts, 0.0f);
      int64_t local = static_cast<int64_t>(grads[i].second) / p.rowElems;
      for (int64_t e = 0; owners[i] && e < local; ++e)
        perExpert[first + e] =
            moert::train::norm2(grads[i].first + e * p.rowElems, p.rowElems);
    }
    moe_train::sumOverWorld(perExpert, t.manifest);
    owners[i] = moert::worldRank() == 0;
    norms[i] = owners[i] ? moert::train::norm2(perExpert.data(),
                                               perExpert.size())
                         : 0.0f;
  }
}

/// Re-placement: the masters and optimizer state of layer `layer`'s
/// slot-laid parameters move with their slots.
void moveSlots(Trainer &t, int64_t layer, const std::vector<int32_t> &from,
               const std::vector<int32_t> &to) {
  std::vector<moert::SlotBuffer> buffers;
  for (Param &p : t.params) {
    if (p.slotLayer != layer)
      continue;
    int64_t rowBytes = p.rowElems * static_cast<int64_t>(sizeof(float));
    buffers.push_back({reinterpret_cast<char *>(p.master.data()), rowBytes});
    for (std::vector<float> *v :
         {&p.state.expAvg, &p.state.expAvgSq, &p.state.momentumBuffer})
      if (!v->empty())
        buffers.push_back({reinterpret_cast<char *>(v->data()), rowBytes});
  }
  moert::migrateSlots(from, to, buffers);
}

Error run(Trainer &t) {
  Options &o = options();
  bool first = moert::worldRank() == 0;
  std::unique_ptr<raw_fd_ostream> log;
  if (!o.log.empty() && first) {
    std::error_code ec;
    log = std::make_unique<raw_fd_ostream>(
        o.log, ec, t.firstStep ? sys::fs::OF_Append : sys::fs::OF_None);
    if (ec)
      return failure("cannot write " + o.log + ": " + ec.message());
    if (!t.firstStep)
      *log << "step,loss,aux_loss,grad_norm,lr\n";
  }
  CallArguments args(t.manifest.target == "cuda");
  for (std::vector<char> &batch : t.data.batches)
    args.add(batch.data(), batch.size(), /*isOutput=*/false);
  for (moert::Buffer &out : t.outputs)
    args.add(out.data(), out.size(), /*isOutput=*/true);
  int64_t tokens = t.manifest.inputs.empty()
                       ? 0
                       : moert::numElements(t.manifest.inputs[0].shape) *
                             o.microbatches;
  bool terminal = first && isatty(STDERR_FILENO);
  std::vector<double> stepSeconds;
  // Per step: the compiled step's calls (with the batches' and gradients'
  // copies around them), the gradient norm, the optimizer.
  std::vector<double> callSeconds, normSeconds, optimizerSeconds;
  auto since = [](std::chrono::steady_clock::time_point from) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         from)
        .count();
  };
  float lastLoss = 0;
  auto start = std::chrono::steady_clock::now();
  double residentBefore = residentMiB();
  publish(t);
  int64_t end = o.stopAfter > 0 ? std::min<int64_t>(o.stopAfter, o.steps)
                                 : o.steps;
  ExpertLoadLog loads(o.statsJson);
  for (int64_t step = t.firstStep; step < end; ++step) {
    auto begin = std::chrono::steady_clock::now();
    int64_t micros = o.microbatches;
    float loss = 0, aux = 0;
    std::vector<std::pair<float *, size_t>> grads;
    std::vector<bool> owners;
    for (int64_t micro = 0; micro < micros; ++micro) {
      fillBatch(t, step, micro);
      args.copyInputsIn();
      moert::beginRun();
      callEntry(t.entry, args.data());
      args.finishRun();
      moert::endRun();
      args.copyOutputsBack();
      auto scalar = [&](int index) {
        return *reinterpret_cast<const float *>(t.outputs[index].data());
      };
      float microLoss = scalar(t.lossOutput);
      if (!std::isfinite(microLoss) && !o.skipNonFinite)
        return failure(formatv("step {0}: the loss is {1}; no weight was "
                               "updated (--skip-nonfinite-steps skips such "
                               "steps)",
                               step + 1, microLoss));
      loss += microLoss;
      aux += scalar(t.auxOutput);
      for (Param &p : t.params) {
        if (p.gradOutput < 0)
          continue;
        float *grad =
            reinterpret_cast<float *>(t.outputs[p.gradOutput].data());
        if (!p.grad.empty()) {
          moert::widenToFloat(*p.type, grad, p.grad.data(), p.grad.size());
          grad = p.grad.data();
        }
        if (micros > 1) {
          p.accumulated.resize(p.master.size());
          for (size_t i = 0; i < p.accumulated.size(); ++i)
            p.accumulated[i] = micro ? p.accumulated[i] + grad[i] : grad[i];
          grad = p.accumulated.data();
        }
        if (micro == micros - 1) {
          owners.push_back(p.placement.owner);
          grads.push_back({grad, p.master.size()});
        }
      }
    }
    // The microbatches' mean.
    if (micros > 1) {
      float scale = 1.0f / static_cast<float>(micros);
      loss *= scale;
      aux *= scale;
      for (auto [grad, n] : grads)
        for (size_t i = 0; i < n; ++i)
          grad[i] *= scale;
    }
    callSeconds.push_back(since(begin));
    auto normBegin = std::chrono::steady_clock::now();
    // Clipping's product is taken by the optimizer as it reads each
    // gradient.
    float total = train::totalGradNorm(
        grads, [&](std::vector<float> &norms) {
          std::vector<bool> counted = owners;
          countExpertsOnce(t, grads, norms, counted);
          moe_train::combineNorms(norms, counted, t.manifest);
        });
    double norm = total;
    normSeconds.push_back(since(normBegin));
    auto optimizerBegin = std::chrono::steady_clock::now();
    double lr = t.schedule.lrAt(t.config.lr, step);
    // Every rank has the same norm (combined over the ranks) and loss, so
    // every rank takes the same decision.
    bool finite = std::isfinite(norm) && std::isfinite(loss);
    if (!finite && !o.skipNonFinite)
      return failure(formatv("step {0}: the gradient norm is {1} (loss {2}); "
                             "no weight was updated (--skip-nonfinite-steps "
                             "skips such steps)",
                             step + 1, norm, loss));
    if (!finite && first)
      errs() << formatv("moe-train: warning: step {0} skipped: the gradient "
                        "norm is {1} (loss {2})\n",
                        step + 1, norm, loss);
    std::vector<train::ParamUpdate> updates;
    size_t next = 0;
    for (Param &p : t.params) {
      if (p.gradOutput < 0 || !finite)
        continue;
      auto [begin, end] = p.updated();
      updates.push_back({p.master.data() + begin, grads[next++].first + begin,
                         end - begin, &p.state});
    }
    train::optimizerSteps(t.config, lr,
                          train::clipCoefficient(o.clipGradNorm, total),
                          updates);
    for (Param &p : t.params)
      if (p.gradOutput >= 0 && finite && o.zeroStage)
        moe_train::gatherChunks(p.master.data(), p.master.size(), p.replicas);
    publish(t);
    optimizerSeconds.push_back(since(optimizerBegin));
    loads.record(step);
    if (t.replacer && t.replacer->afterCalls(
                          step + 1 - t.firstStep,
                          [&](int64_t layer, const std::vector<int32_t> &from,
                              const std::vector<int32_t> &to) {
                            moveSlots(t, layer, from, to);
                          }))
      publish(t);
    auto now = std::chrono::steady_clock::now();
    double seconds = std::chrono::duration<double>(now - begin).count();
    stepSeconds.push_back(seconds);
    lastLoss = loss;
    double elapsed = std::chrono::duration<double>(now - start).count();
    if (log)
      *log << formatv("{0},{1},{2},{3},{4}\n", step + 1,
                      formatv("{0:e8}", loss), formatv("{0:e8}", aux),
                      formatv("{0:e8}", norm), formatv("{0:e8}", lr));
    if (terminal) {
      double left = elapsed / (step + 1 - t.firstStep) * (o.steps - step - 1);
      errs() << formatv("step {0}/{1}  loss {2:f4}  aux {3:f4}  grad norm "
                        "{4:f3}  {5:f0} tok/s  {6} left\n",
                        step + 1, o.steps.getValue(), loss, aux, norm,
                        tokens / seconds, formatTime(left));
    }
    bool last = step + 1 == end;
    if (!o.checkpointDir.empty() &&
        (last || (o.checkpointEvery > 0 && (step + 1) % o.checkpointEvery == 0)))
      if (Error error = save(t, step + 1))
        return error;
  }
  if (Error error = loads.write())
    return error;
  // The summary: the median step (optimizer included), which the
  // benchmarks read.
  if (!stepSeconds.empty() && first) {
    auto median = [](std::vector<double> seconds) {
      std::sort(seconds.begin(), seconds.end());
      return seconds[seconds.size() / 2];
    };
    double step = median(stepSeconds);
    outs() << formatv("trained steps {0} to {1}: loss {2:f6}; median step "
                      "{3:f2} ms, {4:f0} tokens/s (medians: compiled step "
                      "{5:f2} ms, gradient norm {6:f2} ms, optimizer {7:f2} "
                      "ms)\n",
                      t.firstStep + 1, t.firstStep + stepSeconds.size(),
                      lastLoss, step * 1e3, tokens / step,
                      median(callSeconds) * 1e3, median(normSeconds) * 1e3,
                      median(optimizerSeconds) * 1e3);
    outs() << formatv("peak resident memory {0:f1} MiB ({1:f1} MiB when the "
                      "first step began)\n",
                      peakResidentMiB(), residentBefore);
  }
  if (!o.outputDir.empty()) {
    if (std::error_code ec = sys::fs::create_directories(o.outputDir))
      return failure("cannot create " + o.outputDir + ": " + ec.message());
    for (Param &p : t.params) {
      std::vector<float> whole =
          moe_train::gatherWhole(t.manifest, *p.spec, p.master);
      if (!first)
        continue;
      std::vector<int64_t> shape = p.placement.wholeShape;
      if (p.slotLayer >= 0) {
        const planner::Placement &placement =
            *t.replacer->placement(p.slotLayer);
        whole = moe_train::expertsFromSlots(whole, p.rowElems, placement);
        shape[0] = placement.numExperts();
      }
      if (!p.spec->torchPermutation.empty())
        std::tie(whole, shape) =
            permuteDims(whole, shape, p.spec->torchPermutation);
      SmallString<128> path(o.outputDir);
      sys::path::append(path, p.name + ".npy");
      if (std::string error = moert::writeNpy(
              std::string(path), *moert::findDType("f32"), shape,
              reinterpret_cast<const char *>(whole.data()));
          !error.empty())
        return failure(error);
    }
  }
  return Error::success();
}

Error setUp(Trainer &t) {
  auto text = mlir::moe::readInputFile(inBundle("model.json"), 1u << 30);
  if (!text)
    return text.takeError();
  Expected<Manifest> manifest =
      parseManifest((*text)->getBuffer(), inBundle("model.json"));
  if (!manifest)
    return manifest.takeError();
  t.manifest = std::move(*manifest);
  t.manifestDigest =
      mlir::moe::contentDigest(arrayRefFromStringRef((*text)->getBuffer()));
  if (!(options().timeout > 0) || !std::isfinite(options().timeout))
    return failure("--timeout must be a positive number of seconds");
  if (t.manifest.optimizer.empty())
    return failure(options().bundleDir +
                   " holds a forward program; compile the model with "
                   "moe-compile --train for moe-train");
  if (Error error = checkWorldSize(t.manifest, "the step was"))
    return error;
  if (Error error = configure(t))
    return error;
  Expected<moe_train::TrainingData> data = moe_train::readTrainingData(
      options().inputs, t.manifest.inputs, options().batchSize,
      options().microbatches);
  if (!data)
    return data.takeError();
  t.data = std::move(*data);
  Expected<LoadedLibrary> library =
      loadLibrary(t.manifest, options().bundleDir);
  if (!library)
    return library.takeError();
  t.entry = library->entry;
  Expected<std::vector<char *>> symbols =
      loadWeights(t.manifest, library->handle, options().bundleDir, "",
                  nullptr);
  if (!symbols)
    return symbols.takeError();
  if (Error error = findParams(t, *symbols))
    return error;
  Expected<ExpertReplacer> replacer =
      ExpertReplacer::create(t.manifest, *symbols, options().replanEvery,
                             options().placementAlgorithm);
  if (!replacer)
    return replacer.takeError();
  if (replacer->hasSlots()) {
    const Options &o = options();
    if (o.zeroStage)
      return failure("--zero-stage 1 with experts on slots (moe-compile "
                     "--redundant-per-rank) is not supported");
    t.replacer = std::move(*replacer);
  }
  if (!options().resume.empty())
    return resumeFrom(t, options().resume);
  return Error::success();
}

/// What every rank must hold the same of, with a digest of each: ranks that
/// train with different bundles, options or data would drift apart
/// silently or wait for each other until the timeout.
std::vector<std::pair<std::string, std::string>> agreement(const Trainer &t) {
  const Options &o = options();
  std::vector<std::pair<std::string, std::string>> items;
  items.emplace_back("the bundle (model.json)", t.manifestDigest);
  std::string flags = formatv(
      "steps={0} batch={1} lr={2} momentum={3} dampening={4} nesterov={5} "
      "betas={6} eps={7} wd={8}/{9} clip={10} warmup={11} schedule={12} "
      "stats={13} threads={14} zero={15} micro={16} json={17} replan={18} "
      "algorithm={19}",
      o.steps, o.batchSize, o.lr, o.momentum, o.dampening, o.nesterov,
      o.betas, o.eps, o.weightDecay, o.weightDecay.getNumOccurrences(),
      o.clipGradNorm, o.warmupSteps, o.schedule, o.stats, o.threads,
      o.zeroStage, o.microbatches, o.statsJson.empty() ? 0 : 1,
      o.replanEvery, o.placementAlgorithm);
  items.emplace_back("the training options",
                     mlir::moe::contentDigest(arrayRefFromStringRef(flags)));
  for (auto [spec, data] : zip_equal(t.manifest.inputs, t.data.datasets))
    items.emplace_back("input '" + spec.name + "'",
                       mlir::moe::contentDigest(ArrayRef<uint8_t>(
                           reinterpret_cast<const uint8_t *>(data.data.data()),
                           data.data.size())));
  return items;
}

} // namespace

int main(int argc, char **argv) {
  moert::init(argc, argv);
  Options &opts = options();
  parseCommandLine(argc, argv, opts.category,
                   "trains a bundle written by moe-compile --train\n");

  Trainer t;
  moert::failIfAnyRank(toString(setUp(t)));
  moert::setTimeout(opts.timeout);
  moert::checkRanksAgree(agreement(t));
  moert::setGrid(t.manifest.gridShape, t.manifest.axes);
  moert::setThreads(opts.threads);
  moert::failIfAnyRank(toString(run(t)));
  if (opts.stats) {
    moert::printStats();
    if (t.replacer)
      t.replacer->printSummary();
  }
  moert::finalize();
  return 0;
}
