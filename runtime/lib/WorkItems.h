//===- WorkItems.h - a list of items shared by the OpenMP pool --*- C++ -*-===//
//
// Internal to runtime/lib: the runtime's own kernels (FewRows.cpp,
// OrderedGemm.cpp) spread a call over the cores by handing out work items
// to the threads of the OpenMP pool that oneDNN uses, so that no second
// pool competes with oneDNN's.
//
//===----------------------------------------------------------------------===//

#ifndef MOERT_LIB_WORKITEMS_H
#define MOERT_LIB_WORKITEMS_H

#include <atomic>
#include <cstddef>

// libgomp's (LLVM's libomp provides the same entry points).
extern "C" void GOMP_parallel(void (*fn)(void *), void *data,
                              unsigned numThreads, unsigned flags);

namespace moert::detail {

/// Calls `body(i)` once for every i < count, each handed out in order to
/// whichever thread of the pool is free; on the calling thread alone when
/// there is one item. `Body` may keep per-thread state by value: each
/// thread runs its own copy.
template <typename Body> void shareItems(size_t count, const Body &body) {
  struct Shared {
    const Body *body;
    size_t count;
    std::atomic<size_t> next{0};
  } shared{&body, count};
  auto run = [](void *data) {
    auto *s = static_cast<Shared *>(data);
    Body mine = *s->body;
    for (size_t i; (i = s->next.fetch_add(1, std::memory_order_relaxed)) <
                   s->count;)
      mine(i);
  };
  if (count == 0)
    return;
  if (count == 1)
    return run(&shared);
  GOMP_parallel(run, &shared, /*numThreads=*/0, /*flags=*/0);
}

} // namespace moert::detail

#endif // MOERT_LIB_WORKITEMS_H
