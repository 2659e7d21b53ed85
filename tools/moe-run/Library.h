//===- Library.h - A bundle's model.so, checked and loaded ------*- C++ -*-===//
//
// What moe-run and moe-train share: model.so is loaded only after its size
// and digest match the manifest, the manifest must say what the library
// says of itself, and each weight is copied into its symbol only after the
// symbol proves to have the weight's size and to be writable.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_RUN_LIBRARY_H
#define MOE_RUN_LIBRARY_H

#include "Manifest.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <memory>
#include <string>
#include <vector>

namespace moe_run {

/// The compiled entry: inputs, then outputs, as pointers.
using Entry = void (*)(void **);

struct LoadedLibrary {
  void *handle = nullptr;
  Entry entry = nullptr;
};

/// The contents of `path`, after checking that it has the size and (unless
/// `digest` is empty) the digest that the manifest records.
llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
readChecked(const std::string &path, int64_t bytes, llvm::StringRef digest);

/// Loads the model.so of the bundle in `bundleDir` (initializing the device
/// first for a CUDA bundle) and finds its entry.
llvm::Expected<LoadedLibrary> loadLibrary(const Manifest &m,
                                          llvm::StringRef bundleDir);

/// Copies this rank's piece of every weight into its symbol, from the
/// bundle's weights file or from `weightsOverride` (size checked, not the
/// digest, whose own digest goes to `overrideDigest`). Returns each weight's
/// symbol, in manifest order.
llvm::Expected<std::vector<char *>>
loadWeights(const Manifest &m, void *library, llvm::StringRef bundleDir,
            llvm::StringRef weightsOverride, std::string *overrideDigest);

} // namespace moe_run

#endif // MOE_RUN_LIBRARY_H
