//===- GraphImporter.h - an ONNX graph to @main_graph -----------*- C++ -*-===//
//
// Internal to the ONNX importer: builds the function from a graph whose
// values all have types (after shape inference), and the helpers that name
// nodes in locations and diagnostics.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_LIB_IMPORT_ONNX_GRAPHIMPORTER_H
#define MOE_LIB_IMPORT_ONNX_GRAPHIMPORTER_H

#include "Tensors.h"
#include "moe/Import/Import.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringMap.h"

#include <onnx/onnx_pb.h>

namespace mlir::moe::onnx_import {

/// ONNX Runtime's contrib operator domain.
inline constexpr llvm::StringLiteral kMicrosoftDomain = "com.microsoft";

/// Whether `domain` names the default ONNX domain ("" or "ai.onnx").
inline bool isDefaultDomain(StringRef domain) {
  return domain.empty() || domain == "ai.onnx";
}

/// `domain`, with the default domain as "".
inline StringRef getCanonicalDomain(StringRef domain) {
  return isDefaultDomain(domain) ? StringRef() : domain;
}

/// The graph inputs that no initializer gives a value: the function's
/// arguments, in order.
SmallVector<const ::ONNX_NAMESPACE::ValueInfoProto *>
getArgumentInputs(const ::ONNX_NAMESPACE::GraphProto &graph);

/// `node`'s operator as messages name it: "MatMul", "com.microsoft.MoE".
std::string getQualifiedOpType(const ::ONNX_NAMESPACE::NodeProto &node);

/// `node`'s location: its name around `fileLoc`.
Location getNodeLoc(const ::ONNX_NAMESPACE::NodeProto &node, Location fileLoc);

/// Starts the error "node '<name>' (<op type>): " at `node`'s location.
InFlightDiagnostic emitNodeError(const ::ONNX_NAMESPACE::NodeProto &node,
                                 Location fileLoc);

/// Builds `func.func @main_graph` in a module from an ONNX graph.
class GraphImporter {
public:
  GraphImporter(ModuleOp module, Location fileLoc, TensorImporter &tensors,
                const ImportOptions &options);

  /// Imports `graph`, moving its weights out. Every node must have a name,
  /// every value a type and one definition before its uses.
  LogicalResult importGraph(::ONNX_NAMESPACE::GraphProto &graph);

  /// The default-domain opset of the model, which decides the meaning of
  /// versioned attributes and inputs.
  void setOpset(int64_t version) { opset = version; }

  // For the node importers.
  OpBuilder &getBuilder() { return builder; }
  const ImportOptions &getOptions() const { return options; }
  Location getLoc(const ::ONNX_NAMESPACE::NodeProto &node) const {
    return getNodeLoc(node, fileLoc);
  }
  InFlightDiagnostic emitError(const ::ONNX_NAMESPACE::NodeProto &node) const {
    return emitNodeError(node, fileLoc);
  }
  /// `node`'s inputs in order; an empty name is the `onnx.none` value.
  SmallVector<Value> getInputs(const ::ONNX_NAMESPACE::NodeProto &node);
  /// The type shape inference gave output `index` of `node`.
  FailureOr<RankedTensorType> getOutputType(const ::ONNX_NAMESPACE::NodeProto &node,
                                            int index);
  /// For an output of unknown rank: the rank of a Reshape, Expand or
  /// ConstantOfShape by its shape operand's static length, of an
  /// elementwise op by its operands' (broadcast), every dimension dynamic;
  /// null otherwise.
  RankedTensorType
  getRankFromShapeOperand(const ::ONNX_NAMESPACE::NodeProto &node,
                          const ::ONNX_NAMESPACE::TypeProto &type);
  /// Binds `node`'s output names to `results`.
  void setOutputs(const ::ONNX_NAMESPACE::NodeProto &node, ValueRange results);

private:
  OpBuilder getConstantBuilder();
  Value getNone();
  Value createConstant(Location loc, ElementsAttr value);
  LogicalResult importInitializers(::ONNX_NAMESPACE::GraphProto &graph);
  LogicalResult importNode(::ONNX_NAMESPACE::NodeProto &node);
  LogicalResult importConstantNode(::ONNX_NAMESPACE::NodeProto &node);
  LogicalResult importOnnxNode(const ::ONNX_NAMESPACE::NodeProto &node);
  LogicalResult importDropoutNode(const ::ONNX_NAMESPACE::NodeProto &node);
  /// Rewrites the inputs and attributes of a default-domain node into the
  /// one form per op that the onnx dialect's users read, whatever the
  /// opset; refuses attribute values the lowering does not implement.
  LogicalResult normalizeNode(const ::ONNX_NAMESPACE::NodeProto &node,
                              SmallVectorImpl<Value> &inputs,
                              SmallVectorImpl<NamedAttribute> &attributes,
                              ArrayRef<Type> resultTypes);
  /// A 1-d i64 constant of `values` at the top of the body.
  Value createIntsConstant(Location loc, ArrayRef<int64_t> values);
  FailureOr<NamedAttribute> importAttribute(const ::ONNX_NAMESPACE::NodeProto &node,
                                            const ::ONNX_NAMESPACE::AttributeProto &attr);
  LogicalResult importResults(const ::ONNX_NAMESPACE::GraphProto &graph,
                              func::FuncOp func);

  ModuleOp module;
  Location fileLoc;
  TensorImporter &tensors;
  const ImportOptions &options;
  /// Appends the nodes' ops to the function body.
  OpBuilder builder;
  /// The last of the constants (and `onnx.none`) at the top of the body.
  Operation *lastConstant = nullptr;
  llvm::StringMap<Value> values;
  llvm::StringMap<const ::ONNX_NAMESPACE::TypeProto *> valueTypes;
  Value none;
  int64_t opset = 0;
};

/// Registers ONNX schemas for the com.microsoft operators the importer reads
/// (ONNX's library has none), so that checks and shape inference know them.
/// Idempotent.
void registerMicrosoftSchemas();

/// Imports a com.microsoft.MoE node as `moe.layer`.
LogicalResult importOrtMoE(GraphImporter &importer,
                           const ::ONNX_NAMESPACE::NodeProto &node);

} // namespace mlir::moe::onnx_import

#endif // MOE_LIB_IMPORT_ONNX_GRAPHIMPORTER_H
