//===- OnnxImport.h - One ONNX import for the ONNX fuzz targets -*- C++ -*-===//

#ifndef MOE_FUZZ_ONNXIMPORT_H
#define MOE_FUZZ_ONNXIMPORT_H

#include "FuzzSupport.h"
#include "dialects/moe/IR/MoEDialect.h"
#include "dialects/onnx/IR/ONNXDialect.h"
#include "moe/Import/Import.h"

#include "llvm/ADT/StringRef.h"

namespace moe_fuzz {

/// Imports `size` bytes at `data` as an ONNX model file. The model's
/// directory does not exist, so external data is never read.
inline void importOnnxBytes(const uint8_t *data, size_t size) {
  static const mlir::DialectRegistry registry = [] {
    mlir::DialectRegistry r;
    r.insert<mlir::moe::MoEDialect, mlir::moe::onnx::ONNXDialect>();
    return r;
  }();
  std::unique_ptr<mlir::MLIRContext> context = makeContext(registry);
  llvm::MemoryBufferRef buffer(
      llvm::StringRef(reinterpret_cast<const char *>(data), size),
      "/nonexistent/moe-fuzz/model.onnx");
  (void)mlir::moe::importOnnx(buffer, context.get(), mlir::moe::ImportOptions());
}

} // namespace moe_fuzz

#endif // MOE_FUZZ_ONNXIMPORT_H
