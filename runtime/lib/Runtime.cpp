//===- Runtime.cpp - Process start, grid, groups and errors ---------------===//
//
// Communicators are made with MPI_Comm_create_group, which is collective over
// the new group only: with pipeline stages, ranks reach their first exchange
// over an axis at different points of the program, and a split of the whole
// world would wait for ranks that are busy elsewhere. The result is the
// communicator that MPI_Comm_split would give (color = coordinates on the
// other axes, key = position).
//
//===----------------------------------------------------------------------===//

#include "Process.h"

#include "moert/Npy.h"
#include "moert/moert.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

using namespace moert;
using namespace moert::detail;

namespace {
struct Process {
  bool mpi = false;
  int rank = 0;
  int size = 1;
  std::vector<int64_t> shape = {1};
  std::vector<std::string> names = {"world"};
  MPI_Errhandler errorHandler = MPI_ERRHANDLER_NULL;
  int tagUpperBound = 32767; // the least MPI guarantees
  std::map<int64_t, Group> groups;
};
Process proc;
} // namespace

static bool startedByMpirun() {
  for (const char *var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(var))
      return true;
  return false;
}

// MPI's own errors (a failed peer, a truncated message) end every rank with
// our message instead of MPI's default abort text alone.
static void onMpiError(MPI_Comm *, int *code, ...) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(*code, text, &len);
  fatal("MPI error: " + std::string(text, len));
}

static std::string &tool() {
  static std::string name = "moe-run";
  return name;
}

const char *detail::toolName() { return tool().c_str(); }

void moert::init(int &argc, char **&argv) {
  if (argc > 0) {
    std::string path = argv[0];
    tool() = path.substr(path.find_last_of('/') + 1);
  }
  if (!startedByMpirun())
    return;
  // Ranks that wait for others give up the core now and then instead of
  // spinning on it (unless the user's MCA settings say otherwise): ranks
  // often share cores with their OpenMP threads, and a stopped peer must
  // not leave the others at 100% CPU until the timeout.
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0);
  startWatchdog();
  {
    // A rank that never starts leaves the others waiting in MPI_Init.
    Waiting wait("the start of the job (MPI_Init)");
    MPI_Init(&argc, &argv);
  }
  proc.mpi = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &proc.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &proc.size);
  MPI_Comm_create_errhandler(onMpiError, &proc.errorHandler);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, proc.errorHandler);
  int *tagUpperBound, found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tagUpperBound, &found);
  if (found)
    proc.tagUpperBound = *tagUpperBound;
  proc.shape = {proc.size};
}

void moert::finalize() {
  if (!proc.mpi)
    return;
  // Every message sent reaches its receiver before the job ends.
  completeSends(/*wait=*/true);
  {
    Waiting wait("the end of the job (MPI_Finalize)");
    MPI_Finalize();
  }
  proc.mpi = false;
  stopWatchdog();
}

int moert::worldRank() { return proc.rank; }
int moert::worldSize() { return proc.size; }

void moert::setGrid(const std::vector<int64_t> &shape,
                    const std::vector<std::string> &names) {
  if (numElements(shape) != proc.size || shape.size() != names.size() ||
      shape.empty())
    fail("a grid of shape ", shapeString(shape), " and ", names.size(),
         " axis names does not fit ", proc.size, " ranks");
  proc.shape = shape;
  proc.names = names;
  proc.groups.clear();
}

void moert::fatal(const std::string &message) {
  // Compiled loops on several threads may fail at once: the first reports
  // and ends the process; the others wait here until it has.
  static std::mutex first;
  first.lock();
  std::fflush(stdout);
  std::fprintf(stderr, "%s: error: [rank %d] %s\n", toolName(), proc.rank,
               message.c_str());
  std::fflush(stderr);
  if (proc.mpi)
    MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

void moert::failIfAnyRank(const std::string &error) {
  if (!proc.mpi) {
    if (!error.empty())
      fatal(error);
    return;
  }
  int mine = error.empty() ? proc.size : proc.rank, first = 0;
  {
    Waiting wait("checking the other ranks for errors");
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  }
  if (first == proc.size)
    return;
  if (first == proc.rank)
    fatal(error);
  awaitAbort(MPI_COMM_WORLD);
}

/// FNV-1a: a digest's text as one word to compare across ranks.
static uint64_t fingerprint(const std::string &text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text)
    h = (h ^ c) * 1099511628211ull;
  return h;
}

void moert::checkRanksAgree(
    const std::vector<std::pair<std::string, std::string>> &items) {
  if (!proc.mpi)
    return;
  Waiting wait("comparing what the ranks read");
  int64_t n = static_cast<int64_t>(items.size()), range[2] = {n, -n};
  MPI_Allreduce(MPI_IN_PLACE, range, 2, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  if (range[0] != -range[1])
    failIfAnyRank("the ranks read different numbers of inputs");
  std::vector<uint64_t> mine, all(items.size() * proc.size);
  for (const auto &item : items)
    mine.push_back(fingerprint(item.second));
  MPI_Allgather(mine.data(), toInt(n, "checkRanksAgree"), MPI_UINT64_T,
                all.data(), toInt(n, "checkRanksAgree"), MPI_UINT64_T,
                MPI_COMM_WORLD);
  std::string error;
  for (int64_t i = 0; i < n && error.empty(); ++i)
    for (int r = 1; r < proc.size && error.empty(); ++r)
      if (all[r * n + i] != all[i])
        error = "ranks disagree on " + items[i].first + ": rank " +
                std::to_string(r) + "'s differs from rank 0's (start every "
                "rank with the same bundle, options and input files)";
  failIfAnyRank(error);
}

void detail::awaitAbort(MPI_Comm comm) {
  Waiting wait("waiting for the rank that reports an error to end the job");
  MPI_Barrier(comm);
  // Not reached; should it be, end anyway.
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

void moert::barrier() {
  if (!proc.mpi)
    return;
  Waiting wait("a barrier of all ranks");
  MPI_Barrier(MPI_COMM_WORLD);
}

int detail::toInt(int64_t n, const char *op) {
  if (n < 0 || n > INT32_MAX)
    fail(op, ": count ", n, " is outside what one MPI call takes [0, 2^31)");
  return static_cast<int>(n);
}

/// The listed axes of `axes`, validated against the grid.
static std::vector<int> decodeAxes(int64_t axes, const char *op) {
  std::vector<int> list;
  for (uint64_t bits = axes; bits & 0xf; bits >>= 4) {
    int axis = static_cast<int>(bits & 0xf) - 1;
    if (axis >= static_cast<int>(proc.shape.size()))
      fail(op, ": axes value 0x", std::hex, axes, std::dec, " names axis ",
           axis, " of a grid with ", proc.shape.size(), " axes");
    if (std::count(list.begin(), list.end(), axis))
      fail(op, ": axes value 0x", std::hex, axes, std::dec, " names axis ",
           axis, " twice");
    list.push_back(axis);
  }
  return list;
}

/// Row-major coordinates of world rank `rank`.
static std::vector<int64_t> coordinates(int64_t rank) {
  std::vector<int64_t> coords(proc.shape.size());
  for (size_t i = proc.shape.size(); i-- > 0; rank /= proc.shape[i])
    coords[i] = rank % proc.shape[i];
  return coords;
}

static int positionOf(const std::vector<int> &list,
                      const std::vector<int64_t> &coords) {
  int64_t pos = 0;
  for (int axis : list)
    pos = pos * proc.shape[axis] + coords[axis];
  return static_cast<int>(pos);
}

int detail::position(int64_t axes, const char *op) {
  return positionOf(decodeAxes(axes, op), coordinates(proc.rank));
}

Group &detail::group(int64_t axes, const char *op) {
  auto it = proc.groups.find(axes);
  if (it != proc.groups.end())
    return it->second;

  std::vector<int> list = decodeAxes(axes, op);
  std::vector<int64_t> coords = coordinates(proc.rank);
  Group g;
  g.pos = positionOf(list, coords);
  g.name = "(";
  for (int axis : list) {
    g.size *= static_cast<int>(proc.shape[axis]);
    g.name += (g.name.size() > 1 ? ", " : "") + proc.names[axis];
  }
  g.name += ")";

  if (g.size > 1) {
    // World rank of each position: our coordinates with the listed ones
    // replaced by the position's digits.
    std::vector<int> members(g.size);
    for (int p = 0; p < g.size; ++p) {
      std::vector<int64_t> c = coords;
      int64_t rest = p;
      for (auto axis = list.rbegin(); axis != list.rend(); ++axis) {
        c[*axis] = rest % proc.shape[*axis];
        rest /= proc.shape[*axis];
      }
      int64_t rank = 0;
      for (size_t i = 0; i < c.size(); ++i)
        rank = rank * proc.shape[i] + c[i];
      members[p] = static_cast<int>(rank);
    }
    MPI_Group world, sub;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, g.size, members.data(), &sub);
    int tag = static_cast<int>(static_cast<uint64_t>(axes) %
                               (static_cast<uint64_t>(proc.tagUpperBound) + 1));
    {
      Waiting wait(std::string(op) + ": creating the group " + g.name);
      MPI_Comm_create_group(MPI_COMM_WORLD, sub, tag, &g.comm);
    }
    MPI_Comm_set_errhandler(g.comm, proc.errorHandler);
    MPI_Group_free(&sub);
    MPI_Group_free(&world);
  }
  return proc.groups.emplace(axes, std::move(g)).first->second;
}

int64_t moert_rank(void) { return proc.rank; }
