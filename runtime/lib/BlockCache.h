//===- BlockCache.h - Freed buffers kept by size for the next call -*- C++ -*-===//
//
// Compiled programs allocate their intermediate buffers on every call. A
// fresh buffer is costly on both targets: large mallocs are new mmaps whose
// pages fault in and are zeroed again, and CUDA managed memory is allocated
// with a device synchronization and migrates its pages on first touch.
// Freed blocks are therefore kept by size and handed out again, as
// framework caching allocators do. A lock guards the cache: compiled CPU
// code may allocate in loops that run on several OpenMP threads.
//
//===----------------------------------------------------------------------===//

#ifndef MOERT_LIB_BLOCKCACHE_H
#define MOERT_LIB_BLOCKCACHE_H

#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace moert {

/// `allocate(bytes)` makes a block (null when it cannot), `release(block)`
/// returns one to the system.
template <typename Allocate, typename Release> class BlockCache {
public:
  BlockCache(size_t alignment, Allocate allocate, Release release)
      : alignment(alignment), allocate(allocate), release(release) {}

  /// A block of at least `size` bytes, aligned to the cache's alignment: a
  /// free one of that rounded size, else a new one; when none can be made,
  /// the free blocks are released and it is tried once more. Null if that
  /// fails too.
  void *take(size_t size) {
    std::lock_guard<std::mutex> hold(lock);
    size = size == 0 ? alignment : (size + alignment - 1) / alignment * alignment;
    auto it = free.find(size);
    if (it != free.end() && !it->second.empty()) {
      void *block = it->second.back();
      it->second.pop_back();
      return block;
    }
    void *block = allocate(size);
    if (!block) {
      releaseFree();
      block = allocate(size);
    }
    if (block)
      sizes.emplace(block, size);
    return block;
  }

  /// Keeps `block` for a later take; false when it did not come from here.
  bool give(void *block) {
    std::lock_guard<std::mutex> hold(lock);
    auto it = sizes.find(block);
    if (it == sizes.end())
      return false;
    free[it->second].push_back(block);
    return true;
  }

  /// Releases every free block.
  void trim() {
    std::lock_guard<std::mutex> hold(lock);
    releaseFree();
  }

private:
  void releaseFree() {
    for (auto &[size, blocks] : free)
      for (void *block : blocks) {
        sizes.erase(block);
        release(block);
      }
    free.clear();
  }

  std::mutex lock;
  size_t alignment;
  Allocate allocate;
  Release release;
  std::unordered_map<size_t, std::vector<void *>> free;
  std::unordered_map<void *, size_t> sizes;
};

} // namespace moert

#endif // MOERT_LIB_BLOCKCACHE_H
