//===- OnnxBuilder.h - an ONNX graph built node by node ---------*- C++ -*-===//
//
// Internal to the TorchScript importer: builds the ONNX graph that a
// TorchScript graph translates to. Each node is typed as it is added, by the
// ONNX operator's own shape inference (as torch.onnx does while exporting), so
// translations can ask for the rank, static sizes and element type of any
// value they emitted.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_LIB_IMPORT_TORCHSCRIPT_ONNXBUILDER_H
#define MOE_LIB_IMPORT_TORCHSCRIPT_ONNXBUILDER_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"

#include <ATen/ATen.h>
#include <onnx/onnx_pb.h>

#include <deque>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>

namespace mlir::moe::torchscript {

/// The ONNX opset that TorchScript graphs translate to.
constexpr int64_t kOnnxOpset = 17;

/// A translation failure. These files are built with -fexceptions because
/// libtorch and ONNX report errors by throwing; ours unwind the same way to
/// the importer's boundary, which turns them into one diagnostic.
struct TranslationError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
[[noreturn]] void fail(const Twine &message);

/// ONNX node attributes.
::ONNX_NAMESPACE::AttributeProto intAttr(StringRef name, int64_t value);
::ONNX_NAMESPACE::AttributeProto intsAttr(StringRef name, ArrayRef<int64_t> values);
::ONNX_NAMESPACE::AttributeProto floatAttr(StringRef name, float value);
::ONNX_NAMESPACE::AttributeProto stringAttr(StringRef name, StringRef value);
::ONNX_NAMESPACE::AttributeProto tensorAttr(StringRef name, const at::Tensor &value);

/// The ONNX element type of a torch dtype, and back; fails on types that
/// have no counterpart.
int32_t toOnnxType(at::ScalarType type);
at::ScalarType toTorchType(int32_t onnxType);

class OnnxBuilder {
public:
  explicit OnnxBuilder(::ONNX_NAMESPACE::GraphProto &graph) : graph(graph) {}

  /// Adds a graph input.
  void addInput(StringRef name, at::ScalarType type, ArrayRef<int64_t> shape);
  /// Makes `value` the graph output `outputName`, renaming its producer's
  /// result where it can and adding an Identity where it cannot.
  void addOutput(const std::string &value, StringRef outputName);

  /// Adds an initializer with `tensor`'s data; returns its (unique) name.
  std::string addInitializer(StringRef nameHint, const at::Tensor &tensor);
  /// Adds a Constant node holding `tensor`; returns its result.
  std::string constant(const at::Tensor &tensor);
  /// A 1-D int64 constant.
  std::string constantInts(ArrayRef<int64_t> values);
  /// A 0-d constant of element type `type`.
  std::string constantScalar(const at::Scalar &value, at::ScalarType type);

  /// Adds an `opType` node with `numResults` results, typed by ONNX shape
  /// inference; an empty input name is an omitted optional input.
  SmallVector<std::string> addNode(StringRef opType,
                                   ArrayRef<std::string> inputs,
                                   ArrayRef<::ONNX_NAMESPACE::AttributeProto> attrs = {},
                                   unsigned numResults = 1);
  /// addNode for single-result nodes.
  std::string op(StringRef opType, ArrayRef<std::string> inputs,
                 ArrayRef<::ONNX_NAMESPACE::AttributeProto> attrs = {});

  /// `value` converted to `type` (itself when it already has it).
  std::string cast(const std::string &value, at::ScalarType type);
  /// A tensor of `shape` (a 1-D int64 value) filled with `value`'s one
  /// element, in its type.
  std::string constantOfShape(const std::string &shape, const at::Tensor &value);
  /// The shape of `value` as a 1-D int64 tensor: a constant when static,
  /// else a Shape node.
  std::string shapeOf(const std::string &value);

  /// The inferred type of `value`.
  at::ScalarType elementType(const std::string &value) const;
  int64_t rank(const std::string &value) const;
  /// The dims of `value`, -1 where unknown.
  SmallVector<int64_t> shape(const std::string &value) const;
  /// The dims of `value` when all are known.
  std::optional<SmallVector<int64_t>>
  staticShape(const std::string &value) const;
  const ::ONNX_NAMESPACE::TypeProto &type(const std::string &value) const;

private:
  std::string uniqueName(StringRef hint);
  void inferTypes(::ONNX_NAMESPACE::NodeProto &node);
  void refineShape(const ::ONNX_NAMESPACE::NodeProto &node);
  /// The value of a one-element int64 constant.
  std::optional<int64_t> constantInt(const std::string &value) const;

  ::ONNX_NAMESPACE::GraphProto &graph;
  llvm::StringSet<> usedNames;
  llvm::StringMap<unsigned> nextSuffix;
  /// What ONNX's inference contexts read: value types, constant data, and
  /// the shape data that ONNX's data propagation derives (Shape, Concat...).
  std::unordered_map<std::string, ::ONNX_NAMESPACE::TypeProto *> types;
  std::deque<::ONNX_NAMESPACE::TypeProto> typeStorage;
  std::unordered_map<std::string, const ::ONNX_NAMESPACE::TensorProto *> constants;
  std::unordered_map<std::string, ::ONNX_NAMESPACE::TensorShapeProto> shapeData;
  /// Graph outputs that are renamed node results, by their old names.
  std::unordered_map<std::string, std::string> renamedOutputs;
};

} // namespace mlir::moe::torchscript

#endif // MOE_LIB_IMPORT_TORCHSCRIPT_ONNXBUILDER_H
