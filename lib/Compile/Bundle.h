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

/// What moe-run needs besides the code: the manifest and the weight bytes.
struct Bundle {
  llvm::json::Object manifest;
  std::string weights;
};

/// The manifest's program part (entry, grid, inputs, outputs, layers), read
/// from the partitioned module before lowering. Fails with a diagnostic when
/// the entry function is not unique or a shape is dynamic.
FailureOr<Bundle> describeProgram(ModuleOp module, std::string &entry);

/// Packs every rank's piece of every `moe-externalize-weights` global into
/// `bundle` (identical pieces once) and drops the sources from the module.
LogicalResult packWeights(ModuleOp module, Bundle &bundle);

/// Writes model.json and weights.bin into `directory`.
LogicalResult writeBundle(const Bundle &bundle, StringRef directory,
                          Location loc);

} // namespace mlir::moe

#endif // MOE_LIB_COMPILE_BUNDLE_H
