//===- Process.h - Groups and errors shared by the runtime's files -*- C++ -*-//
//
// Internal to runtime/lib: the group that an `axes` argument names (its MPI
// communicator is created on first use and cached) and the error helper.
//
//===----------------------------------------------------------------------===//

#ifndef MOERT_LIB_PROCESS_H
#define MOERT_LIB_PROCESS_H

#include "moert/Runtime.h"

#include <mpi.h>

#include <cstdint>
#include <deque>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

namespace moert::detail {

/// The group of this rank for one `axes` value.
struct Group {
  int size = 1; ///< G
  int pos = 0;  ///< this rank's position
  /// Null when size == 1: a group of one never talks to MPI.
  MPI_Comm comm = MPI_COMM_NULL;
  /// "(ep, tp)", for messages.
  std::string name;
  /// Messages this rank sent to its own position, oldest first.
  std::deque<std::vector<char>> selfMessages;
};

/// The group for `axes`; ends every rank when `axes` is malformed. The first
/// call for an `axes` value is collective over that group only.
Group &group(int64_t axes, const char *op);

/// This rank's position for `axes`, without creating a communicator.
int position(int64_t axes, const char *op);

/// fatal() with a message built from streamable parts.
template <typename... Ts> [[noreturn]] void fail(const Ts &...parts) {
  std::ostringstream os;
  (os << ... << parts);
  fatal(os.str());
}

/// The first row of each of `groups` groups of rows (`counts` rows each):
/// packed one after the other, or every `groupStride` rows when positive.
/// Ends the process when a count is negative, exceeds the stride, or the
/// groups overrun `rows`.
std::vector<int64_t> groupBegins(const int32_t *counts, int64_t groups,
                                 int64_t groupStride, int64_t rows,
                                 const char *op);

/// Bytes of one element of a moert_dtype; ends the process on others.
int64_t dtypeBytes(int32_t dtype, const char *op);

/// Adds one expert GEMM (site 1 of moert_matmul_f32) to the statistics:
/// its wall time and the calling thread's CPU time (what a rank computes
/// when ranks share cores; 0 where not measured).
void recordGemm(double flops, double seconds, double cpuSeconds = 0);

/// Per-layer statistics that another runtime gathers (the CUDA runtime's,
/// on the device) and adds when moe-run prints them: `beforePrintStats`
/// registers the function that adds them. checkLayer ends the process on a
/// layer id the statistics cannot hold; currentRun is the run that layer
/// times now count towards.
void checkLayer(int64_t id, const char *op);
int64_t currentRun();
void addLayerTokens(int64_t id, const std::vector<int64_t> &tokens);
void addLayerDropped(int64_t id, int64_t dropped);
void addLayerSeconds(int64_t id, int64_t run, double seconds);
void beforePrintStats(void (*collect)());

/// The encoded axes of the EP axis alone (grid axis 3 of pp, dp, dp_shard,
/// ep, tp), as compiled code names it.
inline constexpr int64_t kEpAxes = 3 + 1;

/// One slot of a re-placement that changes: slot `slot` takes the rows of
/// old slot `source` (on the same rank: a local copy).
struct SlotMove {
  int64_t slot, source;
};
/// The changes from placement `from` to `to` over `ranks` ranks, in slot
/// order: a slot takes its new expert from its own rank's old slots if one
/// held it, else from one of the ranks that did (spread by slot number).
/// Every rank computes the same list.
std::vector<SlotMove> slotMoves(const std::vector<int32_t> &from,
                                const std::vector<int32_t> &to, int64_t ranks,
                                const char *op);

/// For ranks that saw an error another rank of `comm` reports: waits in a
/// barrier of `comm` that the reporting rank never joins, until its
/// MPI_Abort ends this one. Keeps the report the only message.
[[noreturn]] void awaitAbort(MPI_Comm comm);

/// Marks a wait for other ranks (an MPI call that needs them) from its
/// construction to its destruction. When one lasts longer than the timeout
/// (moert::setTimeout), the watchdog reports `what` and ends every rank.
class Waiting {
public:
  explicit Waiting(const std::string &what);
  ~Waiting();
  Waiting(const Waiting &) = delete;
  Waiting &operator=(const Waiting &) = delete;
};

/// A point-to-point send still under way: moert_send returns at once, with
/// its own copy of the message.
struct PendingSend {
  std::vector<char> bytes;
  MPI_Request request;
  std::string what;
};
std::deque<PendingSend> &pendingSends();
/// Retires the sends that have completed, oldest first; with `wait`, waits
/// for every one (within the timeout, as any wait for other ranks).
void completeSends(bool wait);

/// The watchdog thread, started with MPI and stopped before it ends.
void startWatchdog();
void stopWatchdog();

/// The program's name for messages ("moe-run", "moe-train").
const char *toolName();

/// Converts a byte or element count into the int that MPI takes.
int toInt(int64_t n, const char *op);

/// The collectives, for the checks that the CPU (MPI) and CUDA (NCCL)
/// runtimes share.
enum Op : int64_t {
  AllGather = 1,
  AllReduce,
  ReduceScatter,
  AllToAll,
  RaggedAllToAll,
  ExclusiveScan,
  Broadcast,
  NumOps
};
extern const char *const opNames[NumOps];
/// Spellings of the enum moert_dtype codes.
extern const char *const dtypeNames[6];

/// One quantity that all members of a group must agree on.
struct Field {
  const char *what;
  int64_t value;
  /// Spelling of each value, when it is a code.
  const char *const *names = nullptr;
};

/// Ends every rank unless the whole group (of more than one) calls `op`
/// with the same `fields` (at most 3): a mismatch would otherwise hang or
/// write past a buffer. One small MPI_Allreduce.
void agree(const Group &g, Op op, std::initializer_list<Field> fields);

/// `n`; ends the process when it is negative.
int64_t checkCount(int64_t n, Op op, const char *what);

/// `peer` as an int; ends the process when it is not a position of `g`.
int checkPeer(const Group &g, int64_t peer, const char *op);

} // namespace moert::detail

#endif // MOERT_LIB_PROCESS_H
