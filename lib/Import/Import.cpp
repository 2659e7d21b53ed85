//===- Import.cpp - options shared by the importers -----------------------===//

#include "moe/Import/Import.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"

using namespace mlir;

LogicalResult moe::addInputShape(StringRef spec, ImportOptions &options,
                                 std::string &error) {
  auto [name, dims] = spec.rsplit('=');
  if (name.empty() || dims.empty() || !spec.contains('=')) {
    error = ("--input-shape expects NAME=D0xD1x..., got '" + spec + "'").str();
    return failure();
  }
  SmallVector<int64_t> shape;
  SmallVector<StringRef> parts;
  dims.split(parts, 'x');
  for (StringRef part : parts) {
    int64_t dim;
    // An empty input (a dimension of 0) has nothing to compute.
    if (part.getAsInteger(10, dim) || dim <= 0) {
      error = ("--input-shape '" + spec + "': '" + part +
               "' is not a positive dimension")
                  .str();
      return failure();
    }
    shape.push_back(dim);
  }
  if (!options.inputShapes.try_emplace(name, shape).second) {
    error = ("--input-shape gives '" + name + "' twice").str();
    return failure();
  }
  return success();
}

bool moe::hasOnnxImporter() { return MOE_ENABLE_ONNX; }
bool moe::hasTorchScriptImporter() { return MOE_ENABLE_TORCHSCRIPT; }

/// What an importer left out of this build says when asked to import.
[[maybe_unused]] static OwningOpRef<ModuleOp>
notBuilt(MLIRContext *context, llvm::MemoryBufferRef buffer, StringRef what) {
  emitError(FileLineColLoc::get(context, buffer.getBufferIdentifier(), 0, 0))
      << "this build has no " << what << " importer (configure with "
      << (what == "ONNX" ? "MOE_ENABLE_ONNX" : "MOE_ENABLE_TORCHSCRIPT")
      << "=ON)";
  return {};
}

#if !MOE_ENABLE_ONNX
OwningOpRef<ModuleOp> moe::importOnnx(llvm::MemoryBufferRef buffer,
                                      MLIRContext *context,
                                      const ImportOptions &) {
  return notBuilt(context, buffer, "ONNX");
}

OwningOpRef<ModuleOp> moe::importOnnxFile(StringRef path, MLIRContext *context,
                                          const ImportOptions &) {
  return notBuilt(context, llvm::MemoryBufferRef("", path), "ONNX");
}
#endif

#if !MOE_ENABLE_TORCHSCRIPT
OwningOpRef<ModuleOp> moe::importTorchScript(llvm::MemoryBufferRef buffer,
                                             MLIRContext *context,
                                             const ImportOptions &) {
  return notBuilt(context, buffer, "TorchScript");
}
#endif
