//===- moe-plan.cpp - Plans for MoE models, judged on load traces ---------===//
//
// moe-plan placement --trace FILE --ep N --redundant-per-rank R
//                    [--replan-every K] [--plot FILE.png] [--json]
//                    [--expert-bytes B] [--token-seconds S] [--bandwidth B]
//                    [--intervals] [--plot-layer L]
//
// Replays a load trace (Trace.h: SmartMoE's .npz or our stats JSON) for
// each placement algorithm of lib/Planner, re-planned every K records from
// the K records before, E + N * R slots over N ranks (Replay.h), and
// prints per layer the median balancedness (mean / max rank load, judged
// on each record) and the bytes each algorithm moves per re-plan, then the
// same over all layers. --json prints only
//   {"algorithms": {NAME: {"median_balancedness": x,
//                          "min_balancedness": x,
//                          "bytes_moved_per_replan": x}}}
// for NAME in static, smartmoe (without redundant slots only), eplb, ours;
// bytes_moved_per_replan is the mean over re-plans of the bytes all layers
// move at once. --plot draws the trace and the placements
// (plot_placement.py, with Debian's python3 and matplotlib).
//
//===----------------------------------------------------------------------===//

#include "Replay.h"
#include "Trace.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace llvm;
using namespace moe_plan;

namespace {
cl::SubCommand placementCommand(
    "placement", "Compare expert placement algorithms on a load trace");

cl::opt<std::string> traceFile(
    "trace", cl::sub(placementCommand), cl::Required,
    cl::desc("Load trace: SmartMoE's .npz or a stats JSON file"),
    cl::value_desc("file"));
cl::opt<int64_t> ep("ep", cl::sub(placementCommand), cl::Required,
                    cl::desc("Expert-parallel ranks"));
cl::opt<int64_t> redundantPerRank(
    "redundant-per-rank", cl::sub(placementCommand), cl::Required,
    cl::desc("Redundant expert slots per rank (E + ep * R slots in all)"));
cl::opt<int64_t> replanEvery(
    "replan-every", cl::sub(placementCommand), cl::init(10),
    cl::desc("Re-plan every K records of the trace (default 10)"));
cl::opt<std::string> plotFile(
    "plot", cl::sub(placementCommand),
    cl::desc("Draw the expert loads and the rank loads into a PNG file"),
    cl::value_desc("file.png"));
cl::opt<int64_t> plotLayer(
    "plot-layer", cl::sub(placementCommand), cl::init(-1),
    cl::desc("Layer to plot (default: the least balanced under static)"));
cl::opt<bool> jsonOutput("json", cl::sub(placementCommand),
                         cl::desc("Print the summary as one JSON object"));
cl::opt<bool> intervals(
    "intervals", cl::sub(placementCommand),
    cl::desc("Also print each re-plan interval's balancedness and bytes"));
// The trace's model (SmartMoE-AE's GPT-MoE) is not recorded with it; the
// defaults assume d_model 1024 and FastMoE's expert, a two-layer MLP of
// hidden 4 d_model (2 * 1024 * 4096 parameters), trained in fp16 with fp32
// master weights and Adam (2 + 4 + 4 + 4 bytes per parameter travel with an
// expert), and the A100 rates of SmartMoE-AE's runs (FMOE_FASTER_GLBPLC_
// GPUTP 112 TFLOP/s, NETBW 8 GB/s).
cl::opt<double> expertBytes(
    "expert-bytes", cl::sub(placementCommand), cl::init(117440512),
    cl::desc("Bytes that move with one expert (default 112 MiB: 8.4M "
             "parameters, fp16 weights, fp32 masters and Adam state)"));
cl::opt<double> tokenSeconds(
    "token-seconds", cl::sub(placementCommand), cl::init(4.49e-7),
    cl::desc("Expert time of one routed token, forward and backward "
             "(default 4.49e-7 s: 3 * 4 * 1024 * 4096 FLOP at 112 TFLOP/s)"));
cl::opt<double> bandwidth(
    "bandwidth", cl::sub(placementCommand), cl::init(8e9),
    cl::desc("Bytes per second one rank sends or receives (default 8e9)"));

Error planError(const Twine &message) {
  return createStringError(inconvertibleErrorCode(), message);
}

Error checkOptions() {
  // Bounds that keep ep x (E / ep + R) slots far from overflowing.
  if (ep < 1 || ep > (1 << 20))
    return planError("--ep must be in [1, 2^20]");
  if (redundantPerRank < 0 || redundantPerRank > (1 << 20))
    return planError("--redundant-per-rank must be in [0, 2^20]");
  if (replanEvery < 1)
    return planError("--replan-every must be at least 1");
  for (auto [name, value] : {std::pair{"--expert-bytes", double(expertBytes)},
                             {"--token-seconds", double(tokenSeconds)}})
    if (!std::isfinite(value) || value < 0)
      return planError(Twine(name) + " must be finite and not negative");
  if (!std::isfinite(bandwidth) || bandwidth <= 0)
    return planError("--bandwidth must be positive");
  return Error::success();
}

std::string megabytes(double bytes) {
  return formatv("{0:f1} MB", bytes / 1e6).str();
}

void printText(const LoadTrace &trace, const ReplayOptions &options,
               const std::vector<AlgorithmReplay> &results) {
  raw_ostream &os = outs();
  int64_t slots = replaySlots(trace, options);
  os << formatv("trace {0}: {1} records ({2} steps each), {3} layers, {4} "
                "experts\n",
                traceFile, trace.records, trace.stepsPerRecord, trace.layers,
                trace.experts);
  os << formatv("ep {0}, redundant slots per rank {1}: {2} slots, {3} per "
                "rank; re-planned every {4} records from the {4} before, "
                "{5} re-plans; {6} per expert moved\n",
                options.ranks, options.redundantPerRank, slots,
                slots / options.ranks, options.replanEvery,
                results[0].replans(), megabytes(options.cost.bytesPerExpert));

  os << "\nmedian balancedness per layer (mean / max rank load of each "
        "record)\nlayer";
  for (const AlgorithmReplay &a : results)
    os << formatv(" {0,10}", a.name);
  os << "\n";
  for (int64_t l = 0; l < trace.layers; ++l) {
    os << formatv("{0,5}", l);
    for (const AlgorithmReplay &a : results)
      os << formatv(" {0,10:f3}", median(a.balance[l]));
    os << "\n";
  }
  os << "\nbytes moved per re-plan per layer (mean)\nlayer";
  for (const AlgorithmReplay &a : results)
    os << formatv(" {0,10}", a.name);
  os << "\n";
  for (int64_t l = 0; l < trace.layers; ++l) {
    os << formatv("{0,5}", l);
    for (const AlgorithmReplay &a : results)
      os << formatv(" {0,10}", megabytes(mean(a.bytes[l])));
    os << "\n";
  }

  if (intervals) {
    os << "\nper re-plan interval: median balancedness over layers and "
          "records, bytes moved by all layers\ninterval records";
    for (const AlgorithmReplay &a : results)
      os << formatv(" {0,10} {1,10}", a.name, "bytes");
    os << "\n";
    for (int64_t r = 0; r < results[0].replans(); ++r) {
      int64_t begin = (r + 1) * options.replanEvery;
      int64_t end = std::min(begin + options.replanEvery, trace.records);
      os << formatv("{0,8} {1,7}", r, formatv("{0}-{1}", begin, end - 1));
      for (const AlgorithmReplay &a : results) {
        std::vector<double> values;
        for (const std::vector<double> &layer : a.balance)
          values.insert(values.end(),
                        layer.begin() + r * options.replanEvery,
                        layer.begin() + (end - options.replanEvery));
        os << formatv(" {0,10:f3} {1,10}", median(values),
                      megabytes(a.bytesAt(r)));
      }
      os << "\n";
    }
  }

  os << "\nall layers" << formatv("{0,14}", "");
  for (const AlgorithmReplay &a : results)
    os << formatv(" {0,10}", a.name);
  os << "\nmedian balancedness       ";
  for (const AlgorithmReplay &a : results)
    os << formatv(" {0,10:f3}", median(allBalance(a)));
  os << "\nmin balancedness          ";
  for (const AlgorithmReplay &a : results)
    os << formatv(" {0,10:f3}", minimum(allBalance(a)));
  os << "\nbytes moved per re-plan   ";
  for (const AlgorithmReplay &a : results)
    os << formatv(" {0,10}", megabytes(a.bytesPerReplan()));
  os << "\nplanning time (us/layer)  ";
  for (const AlgorithmReplay &a : results)
    os << formatv(" {0,10:f1}",
                  a.planSeconds * 1e6 / (a.replans() * trace.layers));
  os << "\n";
}

void printJson(const std::vector<AlgorithmReplay> &results) {
  json::Object algorithms;
  for (const AlgorithmReplay &a : results) {
    std::vector<double> balance = allBalance(a);
    algorithms[a.name] = json::Object{
        {"median_balancedness", median(balance)},
        {"min_balancedness", minimum(balance)},
        {"bytes_moved_per_replan", a.bytesPerReplan()}};
  }
  outs() << formatv("{0:2}", json::Value(json::Object{
                                 {"algorithms", std::move(algorithms)}}))
         << "\n";
}

/// What plot_placement.py draws: one layer's expert loads over the records,
/// its rank loads at the last record under each algorithm, and every
/// algorithm's balancedness over the records (median over layers).
json::Value plotData(const LoadTrace &trace, const ReplayOptions &options,
                     const std::vector<AlgorithmReplay> &results,
                     int64_t layer) {
  json::Array steps, shares;
  for (int64_t t = 0; t < trace.records; ++t) {
    steps.push_back(t * trace.stepsPerRecord);
    const double *tokens = trace.at(t, layer);
    double sum = 0;
    for (int64_t e = 0; e < trace.experts; ++e)
      sum += tokens[e];
    json::Array share;
    for (int64_t e = 0; e < trace.experts; ++e)
      share.push_back(sum > 0 ? tokens[e] / sum : 0.0);
    shares.push_back(std::move(share));
  }
  std::vector<double> last(trace.at(trace.records - 1, layer),
                           trace.at(trace.records - 1, layer) + trace.experts);
  json::Object rankLoads, balance;
  json::Array names;
  for (const AlgorithmReplay &a : results) {
    names.push_back(a.name);
    std::vector<double> loads = moe::planner::rankLoads(a.last[layer], last);
    double average = mean(loads);
    json::Array relative;
    for (double l : loads)
      relative.push_back(average > 0 ? l / average : 0.0);
    rankLoads[a.name] = std::move(relative);
    json::Array overRecords;
    for (size_t i = 0; i < a.balance[0].size(); ++i) {
      std::vector<double> layers;
      for (const std::vector<double> &l : a.balance)
        layers.push_back(l[i]);
      overRecords.push_back(median(layers));
    }
    balance[a.name] = std::move(overRecords);
  }
  return json::Object{
      {"title", formatv("{0} layers, {1} experts, ep {2}, redundant slots "
                        "per rank {3}, re-planned every {4} records",
                        trace.layers, trace.experts, options.ranks,
                        options.redundantPerRank, options.replanEvery)
                    .str()},
      {"layer", layer},
      {"algorithms", std::move(names)},
      {"steps", std::move(steps)},
      {"first_judged", options.replanEvery},
      {"shares", std::move(shares)},
      {"rank_loads", std::move(rankLoads)},
      {"balance", std::move(balance)}};
}

/// Runs plot_placement.py on the plot data written to a temporary file;
/// the last line it writes to stderr says why it failed, when it does.
Error drawPlot(const json::Value &data) {
  SmallString<128> dataPath, errorPath;
  if (std::error_code ec =
          sys::fs::createTemporaryFile("moe-plan", "json", dataPath))
    return planError("cannot make a temporary file: " + ec.message());
  FileRemover removeData(dataPath);
  if (std::error_code ec =
          sys::fs::createTemporaryFile("moe-plan", "err", errorPath))
    return planError("cannot make a temporary file: " + ec.message());
  FileRemover removeError(errorPath);
  {
    std::error_code ec;
    raw_fd_ostream out(dataPath, ec);
    if (ec)
      return planError("cannot write " + dataPath + ": " + ec.message());
    out << data;
  }
  const char *python = std::getenv("MOE_PLAN_PYTHON");
  std::string interpreter = python ? python : "/usr/bin/python3";
  std::string message;
  std::optional<StringRef> redirects[] = {std::nullopt, std::nullopt,
                                          StringRef(errorPath)};
  int status = sys::ExecuteAndWait(
      interpreter, {interpreter, MOE_PLAN_PLOT_SCRIPT, dataPath, plotFile},
      std::nullopt, redirects, 0, 0, &message);
  if (status < 0)
    return planError("cannot run " + interpreter + " for --plot: " + message);
  if (status == 0)
    return Error::success();
  std::string why = "the script failed";
  if (ErrorOr<std::unique_ptr<MemoryBuffer>> err =
          MemoryBuffer::getFile(errorPath)) {
    StringRef text = (*err)->getBuffer().rtrim();
    size_t lastLine = text.rfind('\n');
    if (!text.empty())
      why = text.substr(lastLine == StringRef::npos ? 0 : lastLine + 1).str();
  }
  return planError("--plot " + plotFile + ": " + why);
}

/// The layer least balanced under the trivial layout.
int64_t mostSkewedLayer(const AlgorithmReplay &trivial) {
  int64_t worst = 0;
  for (size_t l = 1; l < trivial.balance.size(); ++l)
    if (median(trivial.balance[l]) < median(trivial.balance[worst]))
      worst = static_cast<int64_t>(l);
  return worst;
}

Error runPlacement() {
  if (Error e = checkOptions())
    return e;
  Expected<LoadTrace> trace = readLoadTrace(traceFile);
  if (!trace)
    return trace.takeError();
  if (plotLayer >= trace->layers)
    return planError(formatv("--plot-layer {0}: the trace has {1} layers",
                             plotLayer, trace->layers));
  ReplayOptions options;
  options.ranks = ep;
  options.redundantPerRank = redundantPerRank;
  options.replanEvery = replanEvery;
  options.cost = {tokenSeconds, expertBytes, bandwidth,
                  static_cast<double>(trace->stepsPerRecord)};
  Expected<std::vector<AlgorithmReplay>> results = replay(*trace, options);
  if (!results)
    return results.takeError();
  if (jsonOutput)
    printJson(*results);
  else
    printText(*trace, options, *results);
  if (plotFile.empty())
    return Error::success();
  int64_t layer = plotLayer >= 0 ? int64_t(plotLayer)
                                 : mostSkewedLayer(results->front());
  return drawPlot(plotData(*trace, options, *results, layer));
}
} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(
      argc, argv, "MoE-MLIR planner: expert placement on load traces\n");
  Error error = placementCommand
                    ? runPlacement()
                    : planError("give a subcommand: moe-plan placement "
                                "--trace FILE --ep N --redundant-per-rank R "
                                "(see moe-plan placement --help)");
  if (error) {
    errs() << "moe-plan: error: " << toString(std::move(error)) << "\n";
    return 1;
  }
  return 0;
}
