//===- Alloc.cpp - buffers for compiled code, reused across calls ---------===//
//
// The memref lowering's generic alloc/free functions land here, on a
// BlockCache of malloc'ed blocks.
//
//===----------------------------------------------------------------------===//

#include "BlockCache.h"

#include "moert/moert.h"

#include <cstdlib>

namespace {

/// Every block is 64-byte aligned, which covers any alignment the memref
/// lowering asks for (it asks for at most the buffers' 64).
constexpr size_t kAlignment = 64;

auto &cache() {
  auto allocate = [](size_t size) { return std::aligned_alloc(kAlignment, size); };
  auto release = [](void *block) { std::free(block); };
  // Lives as long as the process.
  static auto *blocks = new moert::BlockCache<decltype(allocate),
                                              decltype(release)>(
      kAlignment, allocate, release);
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

void _mlir_memref_to_llvm_free(void *block) {
  // Blocks from elsewhere in the program are freed.
  if (block && !cache().give(block))
    std::free(block);
}
}
