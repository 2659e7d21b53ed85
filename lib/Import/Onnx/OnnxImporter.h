//===- OnnxImporter.h - an ONNX ModelProto to MLIR --------------*- C++ -*-===//
//
// Internal to lib/Import: the ONNX importer's entry for a model already in
// memory. The TorchScript importer translates TorchScript graphs into ONNX
// models and finishes through here, so both imports share shape inference,
// weight handling and the onnx dialect image.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_LIB_IMPORT_ONNX_ONNXIMPORTER_H
#define MOE_LIB_IMPORT_ONNX_ONNXIMPORTER_H

#include "moe/Import/Import.h"

#include <onnx/onnx_pb.h>

namespace mlir::moe {

/// Imports `model`. `sourceName` names the model in diagnostics and
/// locations; external-data tensors are read relative to `baseDir`.
/// Initializers' raw data is moved out of `model`, not copied.
OwningOpRef<ModuleOp> importOnnxModel(::ONNX_NAMESPACE::ModelProto &&model,
                                      llvm::StringRef sourceName,
                                      llvm::StringRef baseDir,
                                      MLIRContext *context,
                                      const ImportOptions &options);

} // namespace mlir::moe

#endif // MOE_LIB_IMPORT_ONNX_ONNXIMPORTER_H
