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
#include <vector>

namespace moert {

/// Starts the runtime. MPI is initialised only when mpirun started the
/// process (OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK in the environment);
/// a single process makes no MPI call at all.
void init(int &argc, char **&argv);

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

/// Prints `moe-run: error: [rank R] <message>` and ends every rank.
[[noreturn]] void fatal(const std::string &message);

/// Collective: when any rank passes a non-empty error, the lowest such rank
/// prints its message and every rank ends; otherwise returns. For errors that
/// ranks find in their own inputs, so that one report suffices.
void failIfAnyRank(const std::string &error);

/// Collective: waits for every rank.
void barrier();

/// Threads for the BLAS; 0 keeps its default.
void setThreads(int threads);

/// Bracket one call of the entry; the time between them is a run.
void beginRun();
void endRun();

/// Forgets what the statistics counted so far (tokens, drops, times, GEMM
/// rates; the device's pending counts too), so that printStats covers only
/// the runs after it: moe-run --warmup calls it after the warm-up runs.
void resetStats();

/// Collective: reduces the statistics of every run to rank 0, which prints
/// the entry's time, each MoE layer's tokens per expert, dropped tokens and
/// time, and the expert GEMMs' FLOP rate.
void printStats();

} // namespace moert

#endif // MOERT_RUNTIME_H
