//===- Bundle.h - the manifest and weights of a compiled model --*- C++ -*-===//
//
// Internal to lib/Compile.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_LIB_COMPILE_BUNDLE_H
#define MOE_LIB_COMPILE_BUNDLE_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/JSON.h"

#include <string>
#include <vector>

namespace mlir::moe {

/// What moe-run needs besides the code: the manifest, and the weight bytes
/// in a file that packWeights writes as it goes (never held in memory).
struct Bundle {
  llvm::json::Object manifest;
  std::string weightsPath;
};

/// The manifest's program part (entry, grid, inputs, outputs, layers), read
/// from the partitioned module before lowering. Fails with a diagnostic when
/// the entry function is not unique or a shape is dynamic.
FailureOr<Bundle> describeProgram(ModuleOp module, std::string &entry);

/// Writes every rank's piece of every `moe-externalize-weights` global to
/// `weightsPath` (identical pieces once), records the file's size and
/// digest in the manifest, and drops the sources from the module, freeing
/// each constant's bytes once its last global is written: the compiler
/// never holds a weight twice.
LogicalResult packWeights(ModuleOp module, Bundle &bundle,
                          StringRef weightsPath);

/// The library's description of itself: a public constant that holds the
/// manifest as JSON (NUL-terminated), which moe-run compares with model.json
/// so that an edited or mismatched manifest cannot make it read or write
/// past a buffer.
inline constexpr llvm::StringLiteral kManifestSymbol = "moe_manifest";

/// Completes the manifest with the target and adds it to `module` as the
/// constant kManifestSymbol. After packWeights, before lowering.
void embedManifest(ModuleOp module, Bundle &bundle, StringRef target);

/// Adds the size and digest of `directory`/model.so (linked already) to the
/// manifest, then writes model.json and moves the packed weights to
/// weights.bin in `directory`.
LogicalResult writeBundle(Bundle &bundle, StringRef directory, Location loc);

} // namespace mlir::moe

#endif // MOE_LIB_COMPILE_BUNDLE_H
