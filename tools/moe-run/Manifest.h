//===- Manifest.h - The model.json of a compiled bundle ---------*- C++ -*-===//
//
// What moe-compile --emit=lib writes next to model.so: the entry, the world
// and grid it was compiled for, its inputs and outputs, and where each rank's
// weights lie in weights.bin (docs in runtime/README.md).
//
//===----------------------------------------------------------------------===//

#ifndef MOE_RUN_MANIFEST_H
#define MOE_RUN_MANIFEST_H

#include "moert/Npy.h"

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace moe_run {

/// An input, output or weight: name, element type and (local) shape.
struct TensorSpec {
  std::string name;
  const moert::DType *type = nullptr;
  std::vector<int64_t> shape;
  /// Weights only: byte offset in the weights file of each rank's piece.
  std::vector<int64_t> offsets;

  int64_t bytes() const { return moert::numElements(shape) * type->size; }
};

struct Manifest {
  /// "cpu" or "cuda" (absent: cpu).
  std::string target = "cpu";
  std::string library;
  std::string entry;
  int64_t worldSize = 1;
  std::vector<std::string> axes;
  std::vector<int64_t> gridShape;
  std::vector<TensorSpec> inputs, outputs;
  std::string weightsFile;
  std::vector<TensorSpec> weights;
};

/// Reads and checks `path`; every error names the file and the field.
llvm::Expected<Manifest> readManifest(const std::string &path);

} // namespace moe_run

#endif // MOE_RUN_MANIFEST_H
