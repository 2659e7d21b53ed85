//===- FoldedParameters.h - torch parameters an exporter folded -*- C++ -*-===//
//
// Internal to the ONNX importer. torch.onnx's dynamo exporter (and
// transformers' OnnxExporter, with its default optimization) folds the ops
// between a parameter and its use into the initializer: a Linear's weight
// becomes its transpose under a name such as `val_31`, a fused expert
// weight `transpose_5`. Training needs the parameter back under its torch
// name. torch.export's metadata tells it: the graph's signature names every
// parameter (`p_..._weight: PARAMETER target='model....weight'`), and each
// node's FX node names the placeholders it read.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_LIB_IMPORT_ONNX_FOLDEDPARAMETERS_H
#define MOE_LIB_IMPORT_ONNX_FOLDEDPARAMETERS_H

#include "mlir/IR/Location.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

#include <onnx/onnx_pb.h>

#include <string>

namespace mlir::moe::onnx_import {

/// A folded initializer's parameter: its torch name and the permutation of
/// the initializer's dimensions that gives torch's layout (empty: the same
/// layout).
struct FoldedParameter {
  std::string name;
  SmallVector<int64_t> toTorch;
};

/// The parameters of `graph` that the exporter folded, by initializer
/// name. Recognized: a Linear's weight read transposed by MatMul (or Gemm
/// without transB), a parameter read as it is (a Gather's data), and the
/// fused expert weights a module's grouped GEMMs read transposed
/// (`transpose_N`, matched to the module's parameters in order). A
/// parameter of the signature that is neither an initializer of its own
/// nor recognized is an error at `loc` (training would leave it as
/// exported), unless `allowUnrecovered`. A graph without torch.export's
/// signature has none.
FailureOr<llvm::StringMap<FoldedParameter>>
findFoldedParameters(const ::ONNX_NAMESPACE::GraphProto &graph, Location loc,
                     bool allowUnrecovered);

} // namespace mlir::moe::onnx_import

#endif // MOE_LIB_IMPORT_ONNX_FOLDEDPARAMETERS_H
