//===- BlockCache.h - Freed buffers kept by size for the next call -*- C++ -*-===//
//
// Compiled programs allocate their intermediate buffers on every call. A
// fresh buffer is costly on both targets: large mallocs are new mmaps whose
// pages fault in and are zeroed again, and CUDA managed memory is allocated
// with a device synchronization and migrates its pages on first touch.
// Freed blocks are therefore kept and handed out again, as framework
// caching allocators do. A lock guards the cache: compiled CPU code may
// allocate in loops that run on several OpenMP threads.
//
// Sizes follow the routing (a dropless expert's rows change with every
// batch), so blocks are cut to size classes, eight per power of two above
// 64 KiB, and a request takes the smallest free block of its class or up to
// a quarter above it. The free blocks never hold more bytes than the most
// the program ever had in use at once: a block given back beyond that is
// released, so that a long run with ever new sizes stays bounded at twice
// its peak instead of growing with every new size.
//
//===----------------------------------------------------------------------===//

#ifndef MOERT_LIB_BLOCKCACHE_H
#define MOERT_LIB_BLOCKCACHE_H

#include <algorithm>
#include <cstddef>
#include <map>
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

  /// The bytes a request of `size` is served with: a multiple of the
  /// alignment, and above 64 KiB one of eight sizes per power of two (at
  /// most an eighth more than asked).
  size_t classOf(size_t size) const {
    size = size == 0 ? alignment
                     : (size + alignment - 1) / alignment * alignment;
    if (size <= kExactUpTo)
      return size;
    size_t step = size_t(1) << (63 - __builtin_clzll(size) - 3);
    return (size + step - 1) / step * step;
  }

  /// A block of at least `size` bytes, aligned to the cache's alignment: a
  /// free one of its class or a little larger, else a new one; when none
  /// can be made, the free blocks are released and it is tried once more.
  /// Null if that fails too.
  void *take(size_t size) {
    std::lock_guard<std::mutex> hold(lock);
    size = classOf(size);
    auto it = free.lower_bound(size);
    if (it != free.end() && it->first <= size + size / 4) {
      void *block = it->second.back();
      size_t bytes = it->first;
      it->second.pop_back();
      if (it->second.empty())
        free.erase(it);
      freeBytes -= bytes;
      inUse(bytes);
      return block;
    }
    void *block = allocate(size);
    if (!block) {
      releaseFree();
      block = allocate(size);
    }
    if (block) {
      sizes.emplace(block, size);
      inUse(size);
    }
    return block;
  }

  /// Keeps `block` for a later take (or releases it, beyond the bound);
  /// false when it did not come from here.
  bool give(void *block) {
    std::lock_guard<std::mutex> hold(lock);
    auto it = sizes.find(block);
    if (it == sizes.end())
      return false;
    size_t bytes = it->second;
    usedBytes -= bytes;
    if (freeBytes + bytes > peakUsedBytes) {
      sizes.erase(it);
      release(block);
      return true;
    }
    free[bytes].push_back(block);
    freeBytes += bytes;
    return true;
  }

  /// Releases every free block.
  void trim() {
    std::lock_guard<std::mutex> hold(lock);
    releaseFree();
  }

  /// Bytes in the program's hands, and kept free.
  size_t bytesInUse() const { return usedBytes; }
  size_t bytesFree() const { return freeBytes; }

private:
  static constexpr size_t kExactUpTo = size_t(64) << 10;

  void inUse(size_t bytes) {
    usedBytes += bytes;
    peakUsedBytes = std::max(peakUsedBytes, usedBytes);
  }

  void releaseFree() {
    for (auto &[size, blocks] : free)
      for (void *block : blocks) {
        sizes.erase(block);
        release(block);
      }
    free.clear();
    freeBytes = 0;
  }

  std::mutex lock;
  size_t alignment;
  Allocate allocate;
  Release release;
  std::map<size_t, std::vector<void *>> free;
  std::unordered_map<void *, size_t> sizes;
  size_t usedBytes = 0, peakUsedBytes = 0, freeBytes = 0;
};

} // namespace moert

#endif // MOERT_LIB_BLOCKCACHE_H
