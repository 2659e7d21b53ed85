//===- OrtContrib.h - ONNX Runtime's contrib ops as standard ops -*- C++ -*-===//
//
// Internal to lib/Import/Onnx: graphs that ONNX Runtime's fusions wrote
// (transformers' exporter with ort_fusions) hold com.microsoft operators
// besides MoE (MultiHeadAttention, RotaryEmbedding, SkipLayerNormalization,
// FusedMatMul, ...) and ORT-only operators in the default domain
// (SimplifiedLayerNormalization). Before the graph is checked and its shapes
// inferred, each such node is replaced by default-domain nodes that compute
// what ONNX Runtime's kernel computes, so that the rest of the importer and
// the lowering see only standard ONNX. com.microsoft.MoE is not expanded:
// it becomes a moe.layer (OrtMoE.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef MOE_LIB_IMPORT_ONNX_ORTCONTRIB_H
#define MOE_LIB_IMPORT_ONNX_ORTCONTRIB_H

#include "mlir/IR/Location.h"
#include "mlir/Support/LLVM.h"

#include <onnx/onnx_pb.h>

namespace mlir::moe::onnx_import {

/// Replaces every ONNX Runtime contrib node of `model`'s graph that the
/// importer expands by standard nodes at the model's default-domain opset
/// (imported where the model lacks it). Fails with one error naming the
/// node, at `fileLoc`, on a contrib op or attribute it cannot expand.
LogicalResult expandOrtContribOps(::ONNX_NAMESPACE::ModelProto &model,
                                  Location fileLoc);

} // namespace mlir::moe::onnx_import

#endif // MOE_LIB_IMPORT_ONNX_ORTCONTRIB_H
