//===- moe-run.cpp - Runs a compiled MoE bundle ---------------------------===//
//
// moe-run OUT --input NAME=FILE.npy ... --output-dir DIR [--stats]
//        [--stats-json FILE]
//         [--warmup N] [--repeat N] [--threads N] [--timeout SECONDS]
//         [--replan-every N] [--placement-algorithm ours|eplb]
//
// Started alone, or once per rank by mpirun. Every rank reads the bundle that
// moe-compile --emit=lib wrote to OUT and the same whole inputs, copies its
// own piece of each weight into model.so and calls the entry; rank 0 writes
// the outputs. Errors in the command line, bundle or inputs are reported once,
// by the lowest rank that finds one, and end every rank.
//
// Nothing in the bundle is trusted before it is checked: model.so and
// weights.bin must have the size and digest that model.json records, and
// model.json must say what model.so says of itself (its inputs, outputs and
// weights, with their types, shapes and places). Before the first call the
// ranks compare digests of the bundle, the options and every input, and no
// wait for other ranks lasts longer than --timeout.
//
//===----------------------------------------------------------------------===//

#include "Library.h"
#include "Replacement.h"
#include "Manifest.h"

#include "moert/Npy.h"
#include "moert/Runtime.h"
#ifdef MOE_RUN_HAVE_CUDA
#include "moert/moert_cuda.h"
#endif

#include "moe/Support/Input.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <link.h>
#include <set>

using namespace llvm;
using namespace moe_run;

namespace {
struct Options {
  cl::OptionCategory category{"moe-run options"};
  cl::opt<std::string> bundleDir{cl::Positional, cl::Required,
                                 cl::desc("<bundle directory>"),
                                 cl::cat(category)};
  cl::list<std::string> inputs{"input", cl::desc("An input of the model"),
                               cl::value_desc("name=file.npy"),
                               cl::cat(category)};
  // Required, but checked in setUp(): cl reports a missing required
  // option straight to stderr, on every rank.
  cl::opt<std::string> outputDir{
      "output-dir", cl::desc("Where rank 0 writes each output as <name>.npy"),
      cl::value_desc("dir"), cl::cat(category)};
  cl::opt<bool> stats{
      "stats",
      cl::desc("Print the entry's time, each MoE layer's tokens per expert, "
               "dropped tokens and time, and the expert GEMM rate"),
      cl::cat(category)};
  cl::opt<std::string> statsJson{
      "stats-json",
      cl::desc("Write the tokens each MoE layer's experts received, one "
               "record per call, as JSON (moe-plan placement --trace reads "
               "it)"),
      cl::value_desc("file"), cl::cat(category)};
  cl::opt<unsigned> replanEvery{
      "replan-every", cl::init(10),
      cl::desc("Bundles with re-placeable experts (moe-compile "
               "--redundant-per-rank): re-place them by the load of the last "
               "N calls, every N calls (default 10, as SmartMoE; 0: never)"),
      cl::cat(category)};
  cl::opt<std::string> placementAlgorithm{
      "placement-algorithm", cl::init("ours"),
      cl::desc("How to re-place experts: ours (migration-aware, one copy of "
               "an expert per rank) or eplb (DeepSeek's EPLB)"),
      cl::cat(category)};
  cl::opt<unsigned> repeat{"repeat", cl::init(1),
                           cl::desc("Calls of the entry (default 1)"),
                           cl::cat(category)};
  cl::opt<unsigned> warmup{
      "warmup", cl::init(0),
      cl::desc("Calls of the entry before the --repeat ones, left out of "
               "--stats (default 0)"),
      cl::cat(category)};
  cl::opt<unsigned> threads{
      "threads", cl::init(0),
      cl::desc("OpenMP threads for the matmuls (default: one per core)"),
      cl::cat(category)};
  cl::opt<std::string> weights{
      "weights",
      cl::desc("Read the weights from this file instead of the bundle's "
               "weights.bin: the same layout and size, other values (its "
               "digest is not checked)"),
      cl::value_desc("file"), cl::cat(category)};
  cl::opt<double> timeout{
      "timeout", cl::init(moert::kDefaultTimeoutSeconds),
      cl::desc("Seconds that one wait for other ranks may last before every "
               "rank ends with an error (default 300)"),
      cl::value_desc("seconds"), cl::cat(category)};
};
} // namespace

/// moe-run's options, made on first use: libLLVM.so registers a --stats and
/// a --threads of its own, which first move aside to --llvm-stats and
/// --llvm-threads.
static Options &options() {
  static Options *opts = [] {
    setAsideLLVMOptions();
    return new Options;
  }();
  return *opts;
}

namespace {
struct Session {
  Manifest manifest;
  /// The digest of model.json, which names the digests of the rest, and of
  /// the --weights file, when one replaces weights.bin.
  std::string manifestDigest, weightsDigest;
  std::vector<moert::Array> inputs;   ///< manifest order
  std::vector<moert::Buffer> outputs; ///< manifest order
  std::vector<std::string> outputFiles;
  Entry entry = nullptr;
  /// Each weight's buffer in the library, manifest order.
  std::vector<char *> weights;
};
} // namespace

static Error failure(const Twine &message) {
  return createStringError(message);
}

static std::string inBundle(StringRef file) {
  SmallString<128> path(options().bundleDir);
  sys::path::append(path, file);
  return std::string(path);
}

static Error readInputs(Session &s) {
  const std::vector<TensorSpec> &specs = s.manifest.inputs;
  s.inputs.resize(specs.size());
  std::vector<std::string> files(specs.size());
  if (Error error =
          readNamedInputs(options().inputs, specs, "model", s.inputs, files))
    return error;
  for (size_t i = 0; i < specs.size(); ++i)
    if (!files[i].empty() && s.inputs[i].shape != specs[i].shape)
      return failure(formatv("input '{0}': {1} has shape {2}, the model "
                             "expects {3}",
                             specs[i].name, files[i],
                             moert::shapeString(s.inputs[i].shape),
                             moert::shapeString(specs[i].shape)));
  for (size_t i = 0; i < specs.size(); ++i)
    if (files[i].empty())
      return failure(formatv("missing input '{0}' (pass --input "
                             "{0}=FILE.npy)",
                             specs[i].name));
  return Error::success();
}

/// Output names may be ONNX names ("logits:0", "layer/out"): anything
/// outside [A-Za-z0-9._-] becomes '_'.
static std::string outputFileName(StringRef name) {
  std::string file;
  for (char c : name)
    file += isAlnum(c) || StringRef("._-").contains(c) ? c : '_';
  SmallString<128> path(options().outputDir);
  sys::path::append(path, file + ".npy");
  return std::string(path);
}

static Error prepareOutputs(Session &s) {
  std::set<std::string> files;
  for (const TensorSpec &t : s.manifest.outputs) {
    s.outputs.emplace_back(t.bytes());
    std::string file = outputFileName(t.name);
    if (!files.insert(file).second)
      return failure(formatv("two outputs write {0}", file));
    s.outputFiles.push_back(file);
  }
  // Created now so that a bad directory fails before the run, not after.
  if (moert::worldRank() == 0)
    if (std::error_code ec = sys::fs::create_directories(options().outputDir))
      return failure("cannot create " + options().outputDir + ": " +
                     ec.message());
  return Error::success();
}

static Error loadLibrary(Session &s) {
  Expected<LoadedLibrary> library =
      moe_run::loadLibrary(s.manifest, options().bundleDir);
  if (!library)
    return library.takeError();
  s.entry = library->entry;
  Expected<std::vector<char *>> weights =
      loadWeights(s.manifest, library->handle, options().bundleDir,
                  options().weights, &s.weightsDigest);
  if (!weights)
    return weights.takeError();
  s.weights = std::move(*weights);
  return Error::success();
}

static Error setUp(Session &s) {
  if (options().outputDir.empty())
    return failure("missing --output-dir DIR");
  if (options().repeat < 1)
    return failure("--repeat must be at least 1");
  if (!(options().timeout > 0) || !std::isfinite(options().timeout))
    return failure("--timeout must be a positive number of seconds");
  auto text = mlir::moe::readInputFile(inBundle("model.json"), 1u << 30);
  if (!text)
    return text.takeError();
  Expected<Manifest> manifest =
      parseManifest((*text)->getBuffer(), inBundle("model.json"));
  if (!manifest)
    return manifest.takeError();
  s.manifest = std::move(*manifest);
  s.manifestDigest =
      mlir::moe::contentDigest(arrayRefFromStringRef((*text)->getBuffer()));
  if (Error error = checkWorldSize(s.manifest, "model"))
    return error;
  if (Error error = readInputs(s))
    return error;
  if (Error error = prepareOutputs(s))
    return error;
  return loadLibrary(s);
}

/// What every rank must hold the same of, with a digest of each: ranks that
/// run different bundles, options or inputs would compute a wrong result or
/// wait for each other forever.
static std::vector<std::pair<std::string, std::string>>
agreement(const Session &s) {
  std::vector<std::pair<std::string, std::string>> items;
  items.emplace_back("the bundle (model.json)", s.manifestDigest);
  // Only the options that decide which calls the ranks make together.
  std::string calls = formatv(
      "repeat={0} warmup={1} stats={2} json={3} replan={4} algorithm={5}",
      options().repeat, options().warmup, options().stats ? 1 : 0,
      options().statsJson.empty() ? 0 : 1, options().replanEvery,
      options().placementAlgorithm);
  items.emplace_back("the options --repeat, --warmup, --stats, "
                     "--stats-json, --replan-every and --placement-algorithm",
                     mlir::moe::contentDigest(arrayRefFromStringRef(calls)));
  if (!s.weightsDigest.empty())
    items.emplace_back("the --weights file", s.weightsDigest);
  for (auto [spec, input] : llvm::zip_equal(s.manifest.inputs, s.inputs))
    items.emplace_back(
        "input '" + spec.name + "'",
        mlir::moe::contentDigest(ArrayRef<uint8_t>(
            reinterpret_cast<const uint8_t *>(input.data.data()),
            input.data.size())));
  return items;
}

static std::string writeOutputs(const Session &s) {
  const std::vector<TensorSpec> &specs = s.manifest.outputs;
  for (size_t i = 0; i < specs.size(); ++i)
    if (std::string error =
            moert::writeNpy(s.outputFiles[i], *specs[i].type, specs[i].shape,
                            s.outputs[i].data());
        !error.empty())
      return error;
  return "";
}


int main(int argc, char **argv) {
  moert::init(argc, argv);

  Options &opts = options();
  parseCommandLine(argc, argv, opts.category,
                   "runs a bundle written by moe-compile --emit=lib\n");

  Session s;
  moert::failIfAnyRank(toString(setUp(s)));
  moert::setTimeout(opts.timeout);
  moert::checkRanksAgree(agreement(s));
  moert::setGrid(s.manifest.gridShape, s.manifest.axes);
  moert::setThreads(opts.threads);
  // Only re-placement writes the weights after loading, and it says so.
  moert::setWeightsConstant(true);

  ExpertLoadLog loads(opts.statsJson);
  Expected<ExpertReplacer> replacer = ExpertReplacer::create(
      s.manifest, s.weights, opts.replanEvery, opts.placementAlgorithm);
  moert::failIfAnyRank(replacer ? "" : toString(replacer.takeError()));
  {
    // Freed before the runtime finishes.
    CallArguments args(s.manifest.target == "cuda");
    for (moert::Array &input : s.inputs)
      args.add(input.data.data(), input.data.size(), /*isOutput=*/false);
    for (moert::Buffer &output : s.outputs)
      args.add(output.data(), output.size(), /*isOutput=*/true);
    // The warm-up calls (first loads, handle creation, ...) run as the
    // others do; the statistics then start afresh.
    uint64_t calls = uint64_t(opts.warmup) + opts.repeat;
    for (uint64_t run = 0; run < calls; ++run) {
      if (run == opts.warmup && run > 0) {
        moert::resetStats();
        replacer->restartWindow();
      }
      moert::barrier();
      moert::beginRun();
      callEntry(s.entry, args.data());
      args.finishRun();
      moert::endRun();
      loads.record(run);
      replacer->afterCalls(run + 1);
    }
    args.copyOutputsBack();
  }
  moert::failIfAnyRank(toString(loads.write()));

  if (opts.stats) {
    moert::printStats();
    replacer->printSummary();
  }
  moert::failIfAnyRank(moert::worldRank() == 0 ? writeOutputs(s) : "");
  moert::finalize();
  return 0;
}
