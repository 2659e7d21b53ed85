//===- Tensors.h - ONNX types and tensors to MLIR ---------------*- C++ -*-===//
//
// Internal to the ONNX importer: element and value types, and TensorProtos
// (initializers, Constant values, tensor attributes) as elements attributes.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_LIB_IMPORT_ONNX_TENSORS_H
#define MOE_LIB_IMPORT_ONNX_TENSORS_H

#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Location.h"

#include <onnx/onnx_pb.h>

#include <string>

namespace mlir::moe::onnx_import {

/// The element type of ONNX data type `dataType` (a TensorProto::DataType),
/// or null when the importer does not support it.
Type getElementType(MLIRContext *context, int32_t dataType);

/// ONNX's name of `dataType` for messages, e.g. "STRING".
std::string getDataTypeName(int32_t dataType);

/// The ranked tensor type of an ONNX value type (unknown dimensions are
/// dynamic). On failure returns null and sets `error` to why, phrased to
/// follow the value's name: "is not a tensor", "has an unknown rank", ...
RankedTensorType getTensorType(MLIRContext *context,
                               const ::ONNX_NAMESPACE::TypeProto &type,
                               std::string &error);

/// Turns TensorProtos into elements attributes. Weights are not copied: raw
/// data is moved out of the TensorProto, and external data is memory-mapped,
/// into dense resources whose blobs own the bytes.
class TensorImporter {
public:
  /// External data is read relative to `baseDir`.
  TensorImporter(MLIRContext *context, StringRef baseDir)
      : context(context), baseDir(baseDir.str()) {}

  /// An initializer or a Constant node's value: a dense resource named after
  /// `name` that takes `tensor`'s raw data (or maps its external data), or,
  /// for small and boolean tensors, a DenseElementsAttr (a named resource
  /// still for a float tensor of two or more elements with `keepNamed`, which training needs: a
  /// parameter keeps its name, and two equal ones stay two). Errors (at
  /// `loc`) name the tensor.
  FailureOr<ElementsAttr> importWeight(::ONNX_NAMESPACE::TensorProto &tensor,
                                       StringRef name, Location loc,
                                       bool keepNamed = false);

  /// A tensor attribute, copied into a DenseElementsAttr.
  FailureOr<DenseElementsAttr> importInline(const ::ONNX_NAMESPACE::TensorProto &tensor,
                                            StringRef name, Location loc);

private:
  struct Bytes;
  FailureOr<Bytes> readBytes(const ::ONNX_NAMESPACE::TensorProto &tensor,
                             std::string *rawToMove, RankedTensorType type,
                             size_t size, StringRef name, Location loc);
  FailureOr<Bytes> readExternal(const ::ONNX_NAMESPACE::TensorProto &tensor, size_t size,
                                StringRef name, Location loc);

  MLIRContext *context;
  std::string baseDir;
};

} // namespace mlir::moe::onnx_import

#endif // MOE_LIB_IMPORT_ONNX_TENSORS_H
