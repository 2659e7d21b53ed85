//===- FunctionOps.cpp - ONNX function operators by their bodies ----------===//

#include "FunctionOps.h"

#include "GraphImporter.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OperationSupport.h"

#include <onnx/defs/function.h>
#include <onnx/defs/schema.h>

#include <unordered_map>

using namespace mlir;
using namespace mlir::moe::onnx_import;
using ::ONNX_NAMESPACE::FunctionProto;
using ::ONNX_NAMESPACE::GraphProto;
using ::ONNX_NAMESPACE::ModelProto;
using ::ONNX_NAMESPACE::NodeProto;
using ::ONNX_NAMESPACE::OpSchema;
using ::ONNX_NAMESPACE::TypeProto;

/// Bodies expand into bodies (SoftmaxCrossEntropyLoss into LogSoftmax and
/// NegativeLogLikelihoodLoss); ONNX's nest a few levels at most.
static constexpr int kMaxRounds = 8;

/// The schema of `node` when it is to be expanded.
static const OpSchema *expandable(const NodeProto &node, int64_t opset,
                                  MLIRContext *context) {
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return nullptr;
  if (RegisteredOperationName::lookup("onnx." + node.op_type(), context))
    return nullptr;
  const OpSchema *schema = ::ONNX_NAMESPACE::OpSchemaRegistry::Schema(
      node.op_type(), static_cast<int>(opset), "");
  if (!schema || !(schema->HasFunction() || schema->HasContextDependentFunction()))
    return nullptr;
  return schema;
}

LogicalResult mlir::moe::onnx_import::expandFunctionOps(
    ModelProto &model, int64_t opset, Location fileLoc,
    function_ref<LogicalResult(ModelProto &)> inferShapes) {
  MLIRContext *context = fileLoc.getContext();
  for (int round = 0; round < kMaxRounds; ++round) {
    GraphProto &graph = *model.mutable_graph();
    if (llvm::none_of(graph.node(), [&](const NodeProto &node) {
          return expandable(node, opset, context);
        }))
      return success();
    // Context-dependent bodies depend on the input types.
    if (failed(inferShapes(model)))
      return failure();
    std::unordered_map<std::string, const TypeProto *> types;
    for (const auto *list : {&graph.input(), &graph.value_info(), &graph.output()})
      for (const auto &info : *list)
        types[info.name()] = &info.type();

    google::protobuf::RepeatedPtrField<NodeProto> nodes;
    for (const NodeProto &node : graph.node()) {
      const OpSchema *schema = expandable(node, opset, context);
      if (!schema) {
        *nodes.Add() = node;
        continue;
      }
      FunctionProto body;
      bool built = false;
      if (schema->HasContextDependentFunction()) {
        std::vector<TypeProto> inputTypes;
        for (const std::string &input : node.input()) {
          auto it = types.find(input);
          inputTypes.push_back(it == types.end() ? TypeProto() : *it->second);
        }
        ::ONNX_NAMESPACE::FunctionBodyBuildContextImpl build(node, inputTypes);
        try {
          built = schema->BuildContextDependentFunction(build, body,
                                                        static_cast<int>(opset));
        } catch (const std::exception &) {
          built = false;
        }
      } else {
        try {
          if (const FunctionProto *function =
                  schema->GetFunction(static_cast<int>(opset))) {
            body = *function;
            built = true;
          }
        } catch (const std::exception &) {
          built = false;
        }
      }
      if (!built)
        return emitNodeError(node, fileLoc)
               << "unsupported ONNX operator (its function body could not "
                  "be built for this node)";
      GraphProto expanded;
      // ONNX reports a node that does not fit its body (more inputs than
      // the body takes, a missing attribute) by throwing.
      try {
        ::ONNX_NAMESPACE::FunctionExpandHelper(node, body, expanded,
                                              node.name() + "/");
      } catch (const std::exception &e) {
        return emitNodeError(node, fileLoc)
               << "cannot expand the operator into its ONNX function body: "
               << StringRef(e.what()).split('\n').first;
      }
      for (NodeProto &inner : *expanded.mutable_node()) {
        if (inner.name().empty())
          inner.set_name(node.name() + "/" + inner.op_type());
        *nodes.Add() = std::move(inner);
      }
    }
    graph.mutable_node()->Swap(&nodes);
  }
  return emitError(fileLoc) << "ONNX function operators nest more than "
                            << kMaxRounds << " levels deep";
}
