//===- IfNodes.h - ONNX If nodes as a select of both branches -*- C++ -*-===//
//
// Internal to lib/Import/Onnx. PyTorch's exporters write an If for a Python
// `if` in a scripted function (DeepSpeed's `_capacity`: `if capacity <
// min_capacity`). Both branches of such an If are pure and give values of
// the same types, so the If is the branches' nodes in the graph and a Where
// on its condition for each output: the rest of the import (checks, shape
// inference, the folding that reads the capacity) then sees plain nodes.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_LIB_IMPORT_ONNX_IFNODES_H
#define MOE_LIB_IMPORT_ONNX_IFNODES_H

#include "mlir/IR/Location.h"
#include "mlir/Support/LLVM.h"

#include <onnx/onnx_pb.h>

namespace mlir::moe::onnx_import {

/// Replaces each default-domain If node of `graph` (and of its branches) by
/// the nodes of both branches, their names made unique, and one Where per
/// output. Fails with one error naming the node where a branch has no
/// declared output types, or the branches' outputs differ in element type
/// or shape (a Where would broadcast them where the If picks one).
LogicalResult inlineIfNodes(::ONNX_NAMESPACE::GraphProto &graph,
                            Location fileLoc);

} // namespace mlir::moe::onnx_import

#endif // MOE_LIB_IMPORT_ONNX_IFNODES_H
