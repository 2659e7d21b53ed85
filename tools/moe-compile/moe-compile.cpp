//===- moe-compile.cpp - a model file to a runnable bundle ----------------===//
//
//   moe-compile MODEL --target=cpu [--ep N] [--dp N] [--tp N] [--pp N]
//               [--smp-config FILE] [--emit=import|moe|spmd|llvm|obj|lib]
//               -o OUT
//
// MODEL is .onnx, .pt or .mlir. With --emit=lib (the default) OUT is a
// directory that `moe-run` (or `mpirun -np N moe-run`) runs.
//
//===----------------------------------------------------------------------===//

#include "moe/Compile/Compile.h"
#include "moe/InitAll.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace mlir;
namespace cl = llvm::cl;

static cl::OptionCategory category("moe-compile options");

static cl::opt<std::string> model(cl::Positional, cl::Required,
                                  cl::desc("<model.onnx|.pt|.mlir>"),
                                  cl::cat(category));
static cl::opt<std::string> output("o", cl::Required,
                                   cl::desc("Output (a directory for lib)"),
                                   cl::value_desc("OUT"), cl::cat(category));

enum class Target { CPU, CUDA };
static cl::opt<Target> target(
    "target", cl::desc("Code to generate"),
    cl::values(clEnumValN(Target::CPU, "cpu", "LLVM code for this host's CPU "
                                              "with the MPI runtime"),
               clEnumValN(Target::CUDA, "cuda", "NVIDIA GPUs with NCCL")),
    cl::init(Target::CPU), cl::cat(category));

static cl::opt<moe::EmitStage> emit(
    "emit", cl::desc("Stop after this stage"),
    cl::values(
        clEnumValN(moe::EmitStage::Import, "import", "the imported program"),
        clEnumValN(moe::EmitStage::MoE, "moe", "MoE blocks raised to moe ops"),
        clEnumValN(moe::EmitStage::SPMD, "spmd", "the per-rank program"),
        clEnumValN(moe::EmitStage::LLVM, "llvm", "optimized LLVM IR"),
        clEnumValN(moe::EmitStage::Object, "obj", "an object file"),
        clEnumValN(moe::EmitStage::Library, "lib",
                   "a bundle directory for moe-run")),
    cl::init(moe::EmitStage::Library), cl::cat(category));

// The parallel plan: moe-set-plan's options. A degree is given when it is
// on the command line (getNumOccurrences), whatever its value, so that 0 is
// refused like any degree below 1; the defaults are never read.
static cl::opt<int64_t> worldSize("world-size",
                                  cl::desc("Ranks (default: the product of "
                                           "the degrees)"),
                                  cl::cat(category));
static cl::opt<int64_t> pp("pp", cl::desc("Pipeline-parallel degree (>= 1)"),
                           cl::cat(category));
static cl::opt<int64_t> dp("dp", cl::desc("Data-parallel degree (>= 1)"),
                           cl::cat(category));
static cl::opt<int64_t> dpShard(
    "dp-shard",
    cl::desc("Ranks of a data-parallel group that shard weights (>= 1)"),
    cl::cat(category));
static cl::opt<int64_t> ep("ep", cl::desc("Expert-parallel degree (>= 1)"),
                           cl::cat(category));
static cl::opt<int64_t> tp("tp", cl::desc("Tensor-parallel degree (>= 1)"),
                           cl::cat(category));
static cl::opt<std::string> dispatcher(
    "dispatcher", cl::desc("Token dispatcher: all-to-all or all-gather"),
    cl::cat(category));
static cl::opt<bool> tokenShuffle("token-shuffle",
                                  cl::desc("Shuffle tokens across EP ranks"),
                                  cl::cat(category));
static cl::opt<std::string> smpConfig(
    "smp-config", cl::desc("SageMaker model-parallel config (JSON)"),
    cl::value_desc("FILE"), cl::cat(category));

static cl::list<std::string> inputShapes(
    "input-shape",
    cl::desc("Static shape of a model input, NAME=D0xD1x... (repeatable)"),
    cl::value_desc("NAME=DIMS"), cl::cat(category));
static cl::opt<bool> gpuStreamOrder(
    "gpu-stream-order",
    cl::desc("With --target=cuda, launch kernels and free buffers without "
             "waiting for the GPU (default on; off: every launch waits, to "
             "tell whether the order is at fault)"),
    cl::init(true), cl::cat(category));

static cl::opt<bool> givenRouting(
    "given-routing",
    cl::desc("Raise every MoE router as its own ops (moe.router given), "
             "not as a named form; checks the named forms' fused routing "
             "and its gradient against the program's own"),
    cl::init(false), cl::cat(category), cl::Hidden);

static cl::opt<bool> validateRaising(
    "validate-raising",
    cl::desc("Check each raised MoE block against the ops it replaces on "
             "sample tokens, natively, and keep the generic ops where they "
             "differ (default on)"),
    cl::init(true), cl::cat(category));
static cl::opt<bool> sequenceParallel(
    "sequence-parallel",
    cl::desc("On more than one token rank (--ep, --dp): run attention, "
             "norms and the LM head on each rank's tokens too, gathering only "
             "keys, values and outputs (default on; off: they run whole on "
             "every rank)"),
    cl::init(true), cl::cat(category));

static cl::opt<int64_t> causalBlockRows(
    "causal-block-rows",
    cl::desc("Compute attention under a causal mask in blocks of this many "
             "query rows, each over the keys its mask may let through "
             "(default 128; 0: every key)"),
    cl::init(128), cl::cat(category));

static cl::opt<bool> train("train",
                           cl::desc("Compile the training step (loss and "
                                    "gradients) that moe-train runs"),
                           cl::cat(category));
static cl::opt<std::string> loss(
    "loss",
    cl::desc("Training loss: model (the model's `loss` output), causal-lm, "
             "cross-entropy or mse (default: model)"),
    cl::init("model"), cl::cat(category));
static cl::opt<std::string> lossOutput(
    "loss-output", cl::desc("The model output the loss reads"),
    cl::cat(category));
static cl::opt<std::string> optimizer(
    "optimizer", cl::desc("Optimizer moe-train runs: sgd or adamw"),
    cl::init("adamw"), cl::cat(category));
static cl::opt<std::string> loadBalancing(
    "moe-load-balancing",
    cl::desc("MoE load balancing in training: aux_loss, balanced, sinkhorn "
             "or none (default: the --smp-config's, else none)"),
    cl::cat(category));
static cl::opt<std::string> auxLossForm(
    "moe-aux-loss-form",
    cl::desc("Aux loss form: megatron (per layer, SageMaker's) or "
             "transformers (all layers concatenated)"),
    cl::init("megatron"), cl::cat(category));
static cl::opt<std::string> auxLossScope(
    "moe-aux-loss-scope",
    cl::desc("Tokens the MoE losses of a partitioned step cover: global "
             "(every rank's, as on one rank) or local (each rank's own, "
             "averaged over ranks, as Megatron)"),
    cl::init("global"), cl::cat(category));
static cl::opt<double> auxLossCoeff("moe-aux-loss-coeff",
                                    cl::desc("Aux loss coefficient"),
                                    cl::cat(category));
static cl::opt<double> zLossCoeff("moe-z-loss-coeff",
                                  cl::desc("Router z-loss coefficient"),
                                  cl::cat(category));
static cl::opt<int64_t> microbatches(
    "microbatches",
    cl::desc("With --pp: the step takes this many microbatches at once (its "
             "inputs as many times larger) and runs them through the "
             "pipeline stages in 1F1B order (default 1)"),
    cl::init(1), cl::cat(category));
static cl::opt<int64_t> redundantPerRank(
    "redundant-per-rank",
    cl::desc("Put each MoE layer's experts on slots whose table moe-run owns "
             "(re-placement without recompiling: moe-run --replan-every), "
             "with this many slots per EP rank for replicas of hot experts"),
    cl::cat(category));
static cl::opt<std::string> params(
    "params",
    cl::desc("Regular expression of the weights that are parameters "
             "(default: dotted torch names such as model.layers.0.mlp.gate."
             "weight)"),
    cl::cat(category));
static cl::opt<std::string> freeze(
    "freeze",
    cl::desc("Regular expression of weights not to train (default: rotary "
             "frequencies and selection biases)"),
    cl::cat(category));
static cl::opt<bool> allowFrozenWeights(
    "allow-frozen-weights",
    cl::desc("With --train: keep float constants that the loss's path "
             "multiplies by but that are not parameters (weights an exporter "
             "folded) as they are, instead of refusing the model"),
    cl::cat(category));

/// moe-autodiff's options from the command line: an --smp-config gives
/// the MoE losses unless the flags do.
static std::string autodiffOptions() {
  std::string result;
  llvm::raw_string_ostream os(result);
  os << "loss=" << loss << " aux-loss-form=" << auxLossForm
     << " aux-loss-scope=" << auxLossScope;
  if (!lossOutput.empty())
    os << " loss-output=" << lossOutput;
  bool fromPlan = !smpConfig.empty() && !loadBalancing.getNumOccurrences() &&
                  !auxLossCoeff.getNumOccurrences() &&
                  !zLossCoeff.getNumOccurrences();
  if (fromPlan)
    os << " from-plan=1";
  if (loadBalancing.getNumOccurrences())
    os << " load-balancing=" << loadBalancing;
  if (auxLossCoeff.getNumOccurrences())
    os << " aux-loss-coeff=" << auxLossCoeff;
  if (zLossCoeff.getNumOccurrences())
    os << " z-loss-coeff=" << zLossCoeff;
  if (freeze.getNumOccurrences())
    os << " freeze=" << freeze;
  if (params.getNumOccurrences())
    os << " params=" << params;
  if (allowFrozenWeights)
    os << " allow-frozen-weights=1";
  return result;
}

static cl::opt<unsigned> optLevel("O", cl::desc("LLVM optimization level"),
                                  cl::init(3), cl::Prefix, cl::cat(category));

/// The degree options given on the command line, by name (which is also
/// moe-set-plan's option name).
static SmallVector<std::pair<StringRef, int64_t>> givenDegrees() {
  SmallVector<std::pair<StringRef, int64_t>> given;
  for (cl::opt<int64_t> *option : {&worldSize, &pp, &dp, &dpShard, &ep, &tp})
    if (option->getNumOccurrences())
      given.push_back({option->ArgStr, option->getValue()});
  return given;
}

static std::string planOptions() {
  std::string result;
  llvm::raw_string_ostream os(result);
  for (auto [name, value] : givenDegrees())
    os << name << "=" << value << " ";
  if (!dispatcher.empty())
    os << "dispatcher=" << dispatcher << " ";
  if (tokenShuffle.getNumOccurrences())
    os << "token-shuffle=" << (tokenShuffle ? 1 : 0) << " ";
  if (!smpConfig.empty())
    os << "smp-config=" << smpConfig;
  return result;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  moe::registerAllPasses();
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv,
                              "MoE-MLIR compiler: model file to native code\n");

  DialectRegistry registry;
  moe::registerCompileDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  // A model's module is too large to print after every error.
  context.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);

  for (auto [name, value] : givenDegrees()) {
    if (value < 1) {
      emitError(UnknownLoc::get(&context))
          << "moe-compile: --" << name << " must be at least 1, got " << value;
      return 1;
    }
  }

  moe::CompileOptions options;
  options.modelPath = model;
  options.outputPath = output;
  options.emit = emit;
  options.planOptions = planOptions();
  options.optLevel = optLevel;
  options.cuda = target == Target::CUDA;
  options.streamOrder = gpuStreamOrder;
  options.sequenceParallel = sequenceParallel;
  options.validateRaising = validateRaising;
  options.givenRouting = givenRouting;
  if (causalBlockRows < 0) {
    emitError(UnknownLoc::get(&context))
        << "moe-compile: --causal-block-rows must be 0 or more, not "
        << static_cast<int64_t>(causalBlockRows);
    return 1;
  }
  options.causalBlockRows = causalBlockRows;
  options.train = train;
  options.import.namedWeights = train;
  options.import.allowFrozenWeights = allowFrozenWeights;
  options.optimizer = optimizer;
  if (train)
    options.autodiffOptions = autodiffOptions();
  options.microbatches = microbatches;
  if (redundantPerRank.getNumOccurrences()) {
    if (redundantPerRank < 0 || redundantPerRank > (1 << 20)) {
      emitError(UnknownLoc::get(&context))
          << "moe-compile: --redundant-per-rank must be in [0, 2^20], not "
          << static_cast<int64_t>(redundantPerRank);
      return 1;
    }
    options.redundantPerRank = redundantPerRank;
  }
  if (microbatches.getNumOccurrences() && !train) {
    emitError(UnknownLoc::get(&context))
        << "moe-compile: --microbatches needs --train";
    return 1;
  }
  // The step holds each pipeline stage's work once per microbatch.
  if (microbatches < 1 || microbatches > 1024) {
    emitError(UnknownLoc::get(&context))
        << "moe-compile: --microbatches must be in [1, 1024], not "
        << static_cast<int64_t>(microbatches);
    return 1;
  }
  if (allowFrozenWeights && !train) {
    emitError(UnknownLoc::get(&context))
        << "moe-compile: --allow-frozen-weights needs --train";
    return 1;
  }
  for (auto *option : {&loss, &lossOutput, &optimizer, &loadBalancing,
                       &auxLossForm, &auxLossScope, &freeze, &params})
    if (option->getNumOccurrences() && !train) {
      emitError(UnknownLoc::get(&context))
          << "moe-compile: --" << option->ArgStr << " needs --train";
      return 1;
    }
  for (auto *option : {&auxLossCoeff, &zLossCoeff})
    if (option->getNumOccurrences() && !train) {
      emitError(UnknownLoc::get(&context))
          << "moe-compile: --" << option->ArgStr << " needs --train";
      return 1;
    } else if (option->getNumOccurrences() &&
               !(*option >= 0 && std::isfinite(*option))) {
      emitError(UnknownLoc::get(&context))
          << "moe-compile: --" << option->ArgStr
          << " must be a finite number >= 0";
      return 1;
    }
  for (const std::string &spec : inputShapes) {
    std::string error;
    if (failed(moe::addInputShape(spec, options.import, error))) {
      emitError(UnknownLoc::get(&context)) << "moe-compile: " << error;
      return 1;
    }
  }
  return failed(moe::compileModel(context, options)) ? 1 : 0;
}
