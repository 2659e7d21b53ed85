//===- Import.h - model files to MLIR ---------------------------*- C++ -*-===//
//
// The importers that moe-translate and moe-compile share. Both produce a
// module with one function, @main_graph, whose body is onnx dialect ops (and
// moe.layer for ONNX Runtime's fused MoE node); arguments and results carry
// the model's input and output names as `onnx.name`.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_IMPORT_IMPORT_H
#define MOE_IMPORT_IMPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MemoryBufferRef.h"

#include <optional>
#include <string>

namespace mlir::moe {

/// Which weight layout a com.microsoft.MoE node uses when its shapes cannot
/// tell (hidden size == inter size without fused SwiGLU).
enum class OrtMoELayout { Detect, Current, Legacy };

struct ImportOptions {
  /// Graph input name -> its static shape. It fills the dims the model
  /// leaves dynamic; its rank and the model's static dims must be the
  /// model's (the ONNX importer refuses a shape that differs).
  llvm::StringMap<llvm::SmallVector<int64_t>> inputShapes;
  OrtMoELayout ortMoELayout = OrtMoELayout::Detect;
  /// Runs libtorch's loader and the graph translation of a TorchScript
  /// import in a child process, so that a crash inside libtorch on a
  /// malformed archive is an error, not the end of the tool. Off only where
  /// the caller must see the translation (a coverage-guided fuzzer).
  bool isolateTorchScript = true;
  /// Every float initializer, however small, becomes a resource named after
  /// it (training: the parameters keep their names and identities).
  bool namedWeights = false;
  /// With namedWeights: parameters that an exporter folded into constants
  /// that cannot be mapped back to them are accepted (frozen), not refused.
  bool allowFrozenWeights = false;
};

/// The module attribute where the ONNX importer records, for a training
/// import, the parameters that the exporter folded in another layout: a
/// dictionary of torch names to the permutation of the weight's dimensions
/// that gives torch's layout (moe-train writes weights in that layout).
inline constexpr llvm::StringLiteral kTorchLayoutsAttrName = "moe.torch_layouts";

/// Adds one `--input-shape` value, `NAME=D0xD1x...`, to `options`; on a
/// malformed value returns failure and says why in `error`.
LogicalResult addInputShape(llvm::StringRef spec, ImportOptions &options,
                            std::string &error);

/// Whether this build has the ONNX and TorchScript importers.
bool hasOnnxImporter();
bool hasTorchScriptImporter();

/// Imports an ONNX model (binary protobuf). External-data tensors are read
/// relative to the directory of `buffer`'s identifier (its file name).
/// Emits diagnostics through `context` and returns null on failure.
OwningOpRef<ModuleOp> importOnnx(llvm::MemoryBufferRef buffer,
                                 MLIRContext *context,
                                 const ImportOptions &options);

/// The same from the file at `path`, mapped and parsed one initializer at a
/// time, each part of the file given back once parsed: the file's bytes
/// are never held beside the tensors parsed from them.
OwningOpRef<ModuleOp> importOnnxFile(llvm::StringRef path,
                                     MLIRContext *context,
                                     const ImportOptions &options);

/// Imports a TorchScript archive (torch.jit.save).
OwningOpRef<ModuleOp> importTorchScript(llvm::MemoryBufferRef buffer,
                                        MLIRContext *context,
                                        const ImportOptions &options);

/// Loads a TorchScript archive with libtorch exactly as importTorchScript
/// does first (newer operators registered), and reads the source location
/// of each node of the inlined forward, as its errors do; throws what
/// libtorch throws. For the fuzz target's loader child, which must reach
/// whatever libtorch reaches from the archive's bytes in the importer.
void loadTorchScriptArchive(llvm::MemoryBufferRef buffer);

} // namespace mlir::moe

#endif // MOE_IMPORT_IMPORT_H
