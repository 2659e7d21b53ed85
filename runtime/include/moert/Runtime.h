//===- Runtime.h - Process control for moe-run ------------------*- C++ -*-===//
//
// The side of the runtime that the driver calls: starting and ending the
// process group, the grid that `axes` arguments refer to, errors that end
// every rank, and the statistics that --stats prints. Functions marked
// collective must be called by every rank.
//
//===----------------------------------------------------------------------===//

#ifndef MOERT_RUNTIME_H
#define MOERT_RUNTIME_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace moert {

/// Starts the runtime. MPI is initialised only when mpirun started the
/// process (OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK in the environment);
/// a single process makes no MPI call at all.
void init(int &argc, char **&argv);

/// The bound on one wait for other ranks unless setTimeout changes it.
constexpr double kDefaultTimeoutSeconds = 300;

/// Bounds every wait for other ranks (an exchange, a barrier, the start and
/// end of the job): one that lasts longer than `seconds` ends every rank
/// with an error naming the wait. Ends the process on a non-positive or
/// non-finite value.
void setTimeout(double seconds);

/// Ends MPI, if it was started. Collective.
void finalize();

int worldRank();
int worldSize();

/// Sets the grid that `axes` arguments name, e.g. axes {"pp", ..., "tp"} with
/// shape {1, 1, 1, 2, 2}: world rank r has the row-major coordinates of r.
/// Without a call the grid is one axis of the world size. The product of the
/// shape must be the world size.
void setGrid(const std::vector<int64_t> &shape,
             const std::vector<std::string> &names);

/// Prints `<tool>: error: [rank R] <message>` and ends every rank; the tool
/// is the program's name.
[[noreturn]] void fatal(const std::string &message);

/// Collective: when any rank passes a non-empty error, the lowest such rank
/// prints its message and every rank ends; otherwise returns. For errors that
/// ranks find in their own inputs, so that one report suffices.
void failIfAnyRank(const std::string &error);

/// Collective: ends every rank, with one report naming the first item and
/// a rank that differs, unless every rank passes the same list of (what,
/// digest) pairs: the bundle, the options and each input that ranks must
/// share. Ranks that run different programs or data would otherwise compute
/// a wrong result with exit 0, or wait for each other until the timeout.
void checkRanksAgree(
    const std::vector<std::pair<std::string, std::string>> &items);

/// Collective: waits for every rank.
void barrier();

/// Threads for the BLAS; 0 keeps its default. Outside [0, 1024] the
/// process ends with an error.
void setThreads(int threads);

/// Bracket one call of the entry; the time between them is a run.
void beginRun();
void endRun();

/// Forgets what the statistics counted so far (tokens, drops, times, GEMM
/// rates; the device's pending counts too), so that printStats covers only
/// the runs after it: moe-run --warmup calls it after the warm-up runs.
void resetStats();

/// Collective: the tokens each MoE layer's experts received since the last
/// call (or since the start, or resetStats), summed over the ranks, on rank
/// 0: one vector per layer id (empty where no rank has that layer). Other
/// ranks get an empty result. For moe-run's and moe-train's --stats-json.
std::vector<std::vector<int64_t>> takeLayerTokens();

/// Collective: the tokens each MoE layer's experts received since the
/// start (or resetStats), summed over the ranks, on every rank; one vector
/// per layer id. Re-placement takes its loads from them.
std::vector<std::vector<int64_t>> layerTokenTotals();

/// Whether the program's weights stay as they are between calls of
/// weightsChanged (moe-run's: only re-placement moves them). While they do,
/// expert GEMMs keep each expert weight packed in oneDNN's own layout,
/// packed once (the same products, faster; at most a quarter of the
/// machine's memory more); moe-train, which updates them every step, leaves
/// this off. MOERT_PACKED_WEIGHTS=0 keeps it off.
void setWeightsConstant(bool constant);

/// Forgets the packed weights: the weights were written.
void weightsChanged();

/// One slot-laid buffer of this rank: its slots' rows, `rowBytes` each.
struct SlotBuffer {
  char *data;
  int64_t rowBytes;
};

/// Collective over this rank's EP group: turns the slots of `buffers` (this
/// rank's P / ep slots each) from the placement `from` into `to` (slot ->
/// expert tables of P entries, slot p on EP rank p / (P / ep)). Rows of
/// experts the rank already held are copied locally; the others come from
/// a rank that held the expert.
void migrateSlots(const std::vector<int32_t> &from,
                  const std::vector<int32_t> &to,
                  const std::vector<SlotBuffer> &buffers);

/// Collective: reduces the statistics of every run to rank 0, which prints
/// the entry's time, each MoE layer's tokens per expert, dropped tokens and
/// time, and the expert GEMMs' FLOP rate.
void printStats();

} // namespace moert

#endif // MOERT_RUNTIME_H
