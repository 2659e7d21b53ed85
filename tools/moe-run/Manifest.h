//===- Manifest.h - The model.json of a compiled bundle ---------*- C++ -*-===//
//
// What moe-compile --emit=lib writes next to model.so: the entry, the world
// and grid it was compiled for, its inputs and outputs, where each rank's
// weights lie in weights.bin, and the size and digest of both files (docs in
// runtime/README.md). model.so holds the same description (less its own
// size and digest), against which the manifest is checked before use.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_RUN_MANIFEST_H
#define MOE_RUN_MANIFEST_H

#include "moert/Npy.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

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
  /// Weights of a training bundle only: the parameter the weight holds
  /// (several weights may hold one), as its gradient output names it.
  std::string param;
  /// Training bundles only: the steps that cut this rank's piece of the
  /// parameter, in order: dimension `dim` split over the grid axes `axes`.
  struct Slice {
    std::vector<int64_t> axes;
    int64_t dim = 0;
  };
  std::vector<Slice> slices;
  /// Training bundles only: where the exporter folded the parameter in
  /// another layout, the permutation of its whole's dimensions that gives
  /// torch's (moe-train writes it so); empty otherwise.
  std::vector<int64_t> torchPermutation;
  /// Bundles with re-placeable experts (moe-compile --redundant-per-rank):
  /// the slot -> expert table of layer `slotTableLayer` (i32 [P]) over
  /// `slotTableExperts` experts, or a weight laid out by the slots of layer
  /// `slotLayer` (one row per local slot); -1 for other weights.
  int64_t slotTableLayer = -1, slotTableExperts = 0, slotLayer = -1;

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
  /// A training step's bundle (moe-compile --train): its optimizer, sgd or
  /// adamw; empty for a forward bundle.
  std::string optimizer;
  std::vector<TensorSpec> weights;
  /// Sizes and "xxh3:<hex>" digests of model.so and weights.bin.
  int64_t libraryBytes = 0, weightsBytes = 0;
  std::string libraryDigest, weightsDigest;
  /// The whole manifest as read, for the comparison with the library's.
  llvm::json::Object json;
};

/// Parses and checks the text of a manifest; errors name `name` and the
/// field.
llvm::Expected<Manifest> parseManifest(llvm::StringRef text,
                                       llvm::StringRef name);

/// Reads `path` (with a size bound) and parses it.
llvm::Expected<Manifest> readManifest(const std::string &path);

/// Where the manifest `m` and the library's own description `embedded` (its
/// JSON text) disagree, as a message; empty when they agree on every field
/// but the library's size and digest, which the library cannot hold.
std::string compareWithLibrary(const Manifest &m, llvm::StringRef embedded);

} // namespace moe_run

#endif // MOE_RUN_MANIFEST_H
