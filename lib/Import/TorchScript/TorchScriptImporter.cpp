//===- TorchScriptImporter.cpp - TorchScript to the onnx dialect ---------===//

#include "moe/Import/Import.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"

using namespace mlir;

OwningOpRef<ModuleOp> moe::importTorchScript(llvm::MemoryBufferRef buffer,
                                      MLIRContext *context,
                                      const ImportOptions &options) {
  emitError(FileLineColLoc::get(context, buffer.getBufferIdentifier(), 0, 0))
      << "the TorchScript importer is not written yet";
  return {};
}
