//===- FunctionOps.h - ONNX function operators by their bodies -*- C++ -*-===//
//
// Internal to lib/Import/Onnx. ONNX defines many operators as functions of
// others (SoftmaxCrossEntropyLoss as LogSoftmax and NegativeLogLikelihood
// loss, which are functions again, ...), and PyTorch's exporters write them:
// a transformers CausalLM exported with its labels computes its loss with
// SoftmaxCrossEntropyLoss. A node of such an operator that the onnx dialect
// has no op for is replaced by its function body from ONNX's own schema,
// built for the node's attributes and input types, until none is left.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_LIB_IMPORT_ONNX_FUNCTIONOPS_H
#define MOE_LIB_IMPORT_ONNX_FUNCTIONOPS_H

#include "mlir/IR/Location.h"
#include "mlir/Support/LLVM.h"

#include <onnx/onnx_pb.h>

namespace mlir::moe::onnx_import {

/// Expands the default-domain nodes of `model`'s graph whose operator has a
/// function body at `opset` and no onnx dialect op. `inferShapes` types the
/// graph's values, which context-dependent bodies are built from. Fails
/// with one error naming the node whose body cannot be built.
LogicalResult
expandFunctionOps(::ONNX_NAMESPACE::ModelProto &model, int64_t opset,
                  Location fileLoc,
                  function_ref<LogicalResult(::ONNX_NAMESPACE::ModelProto &)>
                      inferShapes);

} // namespace mlir::moe::onnx_import

#endif // MOE_LIB_IMPORT_ONNX_FUNCTIONOPS_H
