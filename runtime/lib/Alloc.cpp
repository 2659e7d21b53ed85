//===- Alloc.cpp - buffers for compiled code, reused across calls ---------===//
//
// Compiled programs allocate their intermediate buffers on every call (the
// memref lowering's generic alloc/free functions land here). Large blocks
// from malloc are fresh mmaps each time, so every call would fault in and
// zero its pages again; instead freed blocks are kept by size and handed
// out again. Compiled code is single-threaded, as is this cache.
//
//===----------------------------------------------------------------------===//

#include "moert/moert.h"

#include <cstdint>
#include <cstdlib>
#include <unordered_map>
#include <vector>

namespace {

/// Every block is 64-byte aligned, which covers any alignment the memref
/// lowering asks for (it asks for at most the buffers' 64).
constexpr size_t kAlignment = 64;

struct BlockCache {
  std::unordered_map<size_t, std::vector<void *>> free;
  std::unordered_map<void *, size_t> sizes;

  void *take(size_t size) {
    size = (size + kAlignment - 1) / kAlignment * kAlignment;
    if (size == 0)
      size = kAlignment;
    auto it = free.find(size);
    if (it != free.end() && !it->second.empty()) {
      void *block = it->second.back();
      it->second.pop_back();
      return block;
    }
    void *block = std::aligned_alloc(kAlignment, size);
    if (block)
      sizes.emplace(block, size);
    return block;
  }

  void give(void *block) {
    if (!block)
      return;
    auto it = sizes.find(block);
    if (it == sizes.end()) {
      std::free(block); // not ours: from elsewhere in the program
      return;
    }
    free[it->second].push_back(block);
  }
};

BlockCache &cache() {
  static BlockCache *blocks = new BlockCache(); // lives as long as the process
  return *blocks;
}

} // namespace

extern "C" {
void *_mlir_memref_to_llvm_alloc(size_t size) { return cache().take(size); }

void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t size) {
  if (alignment > kAlignment)
    return std::aligned_alloc(alignment,
                              (size + alignment - 1) / alignment * alignment);
  return cache().take(size);
}

void _mlir_memref_to_llvm_free(void *block) { cache().give(block); }
}
