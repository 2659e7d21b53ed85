//===- Watchdog.cpp - A bound on every wait for other ranks ---------------===//
//
// A rank that stops (SIGSTOP, a debugger, a swapped-out node) or runs a
// different program never answers, and MPI waits for it forever. Every wait
// for other ranks is bracketed by a Waiting guard; a thread wakes a few times
// a second and, when one wait has lasted longer than the timeout, reports it
// and ends the job. A rank that dies is MPI's business: mpirun ends the
// others at once.
//
//===----------------------------------------------------------------------===//

#include "Process.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
#include <unistd.h>

using namespace moert;
using namespace moert::detail;

namespace {
using Clock = std::chrono::steady_clock;

struct Watchdog {
  std::mutex mutex;
  std::condition_variable wake;
  std::thread thread;
  bool stopping = false;
  double timeoutSeconds = kDefaultTimeoutSeconds;
  /// The wait in progress (the outermost of nested ones): its start and
  /// what it waits for.
  int depth = 0;
  Clock::time_point since;
  std::string what;

  void run();
};
Watchdog dog;
} // namespace

void Watchdog::run() {
  std::unique_lock<std::mutex> lock(mutex);
  while (!stopping) {
    wake.wait_for(lock, std::chrono::milliseconds(100));
    if (depth == 0)
      continue;
    double waited =
        std::chrono::duration<double>(Clock::now() - since).count();
    if (waited <= timeoutSeconds)
      continue;
    // Printed here: the main thread is inside MPI and cannot.
    std::fprintf(stderr,
                 "%s: error: [rank %d] %s: no answer from the other ranks "
                 "in %g s (one stopped, hung, or runs something else); "
                 "--timeout sets this bound\n",
                 toolName(), worldRank(), what.c_str(), timeoutSeconds);
    std::fflush(stderr);
    // Before MPI_Init returns, exiting is what ends the job: mpirun ends
    // the others when a rank exits with an error.
    int started = 0;
    MPI_Initialized(&started);
    if (started)
      MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
  }
}

void moert::setTimeout(double seconds) {
  if (!(seconds > 0) || !std::isfinite(seconds))
    fail("the timeout must be a positive number of seconds, not ", seconds);
  std::lock_guard<std::mutex> lock(dog.mutex);
  dog.timeoutSeconds = seconds;
}

void detail::startWatchdog() {
  dog.thread = std::thread([] { dog.run(); });
}

void detail::stopWatchdog() {
  if (!dog.thread.joinable())
    return;
  {
    std::lock_guard<std::mutex> lock(dog.mutex);
    dog.stopping = true;
  }
  dog.wake.notify_one();
  dog.thread.join();
}

Waiting::Waiting(const std::string &what) {
  std::lock_guard<std::mutex> lock(dog.mutex);
  if (dog.depth++ > 0)
    return;
  dog.since = Clock::now();
  dog.what = what;
}

Waiting::~Waiting() {
  std::lock_guard<std::mutex> lock(dog.mutex);
  --dog.depth;
}
