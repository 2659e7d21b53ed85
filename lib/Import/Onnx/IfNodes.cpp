//===- IfNodes.cpp - ONNX If nodes as a select of both branches -----------===//

#include "IfNodes.h"
#include "GraphImporter.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/Twine.h"

using namespace mlir;
using namespace mlir::moe::onnx_import;
using ::ONNX_NAMESPACE::AttributeProto;
using ::ONNX_NAMESPACE::GraphProto;
using ::ONNX_NAMESPACE::NodeProto;
using ::ONNX_NAMESPACE::TensorShapeProto;
using ::ONNX_NAMESPACE::TypeProto;

/// Whether two declared tensor types are one: the same element type and
/// the same dims, each a known size or the same symbol.
static bool sameTensorType(const TypeProto &a, const TypeProto &b) {
  if (!a.has_tensor_type() || !b.has_tensor_type() ||
      a.tensor_type().elem_type() != b.tensor_type().elem_type() ||
      !a.tensor_type().has_shape() || !b.tensor_type().has_shape())
    return false;
  const TensorShapeProto &x = a.tensor_type().shape(),
                         &y = b.tensor_type().shape();
  if (x.dim_size() != y.dim_size())
    return false;
  for (int i = 0; i < x.dim_size(); ++i) {
    const auto &p = x.dim(i), &q = y.dim(i);
    bool sameValue = p.has_dim_value() && q.has_dim_value() &&
                     p.dim_value() == q.dim_value();
    bool sameParam = p.has_dim_param() && q.has_dim_param() &&
                     !p.dim_param().empty() && p.dim_param() == q.dim_param();
    if (!sameValue && !sameParam)
      return false;
  }
  return true;
}

/// Appends `branch`'s initializers and nodes to `into` and `nodes`, each
/// name the branch defines prefixed with `prefix`; returns its outputs'
/// new names.
static SmallVector<std::string> appendBranch(GraphProto &branch,
                                             const std::string &prefix,
                                             GraphProto &into,
                                             std::vector<NodeProto> &nodes) {
  llvm::StringMap<std::string> renamed;
  auto define = [&](std::string *name) {
    if (name->empty())
      return;
    std::string fresh = prefix + *name;
    renamed[*name] = fresh;
    *name = fresh;
  };
  for (auto &tensor : *branch.mutable_initializer()) {
    define(tensor.mutable_name());
    *into.add_initializer() = std::move(tensor);
  }
  for (NodeProto &node : *branch.mutable_node()) {
    for (std::string &input : *node.mutable_input()) {
      auto it = renamed.find(input);
      if (it != renamed.end())
        input = it->second;
    }
    for (std::string &output : *node.mutable_output())
      define(&output);
    node.set_name(prefix + node.name());
    nodes.push_back(std::move(node));
  }
  for (auto &info : *branch.mutable_value_info()) {
    auto it = renamed.find(info.name());
    if (it != renamed.end()) {
      info.set_name(it->second);
      *into.add_value_info() = std::move(info);
    }
  }
  SmallVector<std::string> outputs;
  for (const auto &output : branch.output()) {
    auto it = renamed.find(output.name());
    outputs.push_back(it != renamed.end() ? it->second : output.name());
  }
  return outputs;
}

/// The nodes that replace If node `node`, or failure (reported).
static LogicalResult inlineIfs(GraphProto &graph, Location fileLoc,
                               unsigned &serial);

static LogicalResult inlineIf(NodeProto &node, GraphProto &graph,
                              Location fileLoc, unsigned &serial,
                              std::vector<NodeProto> &nodes) {
  GraphProto *branches[2] = {nullptr, nullptr};
  for (AttributeProto &attr : *node.mutable_attribute()) {
    if (attr.type() != AttributeProto::GRAPH)
      continue;
    if (attr.name() == "then_branch")
      branches[0] = attr.mutable_g();
    else if (attr.name() == "else_branch")
      branches[1] = attr.mutable_g();
  }
  if (!branches[0] || !branches[1] || node.input_size() != 1)
    return emitNodeError(node, fileLoc)
           << "an If needs a condition, a then_branch and an else_branch";
  for (GraphProto *branch : branches) {
    if (branch->output_size() != node.output_size())
      return emitNodeError(node, fileLoc)
             << "a branch gives " << branch->output_size()
             << " values for the If's " << node.output_size() << " outputs";
    if (failed(inlineIfs(*branch, fileLoc, serial)))
      return failure();
  }
  for (int i = 0; i < node.output_size(); ++i)
    if (!sameTensorType(branches[0]->output(i).type(),
                        branches[1]->output(i).type()))
      return emitNodeError(node, fileLoc)
             << "the branches' output " << i
             << " differs in element type or shape (or declare neither): only "
                "an If whose branches give values of one type is supported";

  // Both branches are computed; the condition (one element) picks. The
  // serial keeps apart Ifs of one name (unnamed ones in branches).
  std::string prefix = node.name() + "#" + std::to_string(serial++) + "/";
  SmallVector<std::string> thenValues =
      appendBranch(*branches[0], prefix + "then/", graph, nodes);
  SmallVector<std::string> elseValues =
      appendBranch(*branches[1], prefix + "else/", graph, nodes);
  std::string scalarShape = prefix + "scalar_shape";
  auto *shape = graph.add_initializer();
  shape->set_name(scalarShape);
  shape->set_data_type(::ONNX_NAMESPACE::TensorProto::INT64);
  shape->add_dims(0);
  NodeProto reshape;
  reshape.set_name(prefix + "condition");
  reshape.set_op_type("Reshape");
  reshape.add_input(node.input(0));
  reshape.add_input(scalarShape);
  std::string condition = prefix + "condition";
  reshape.add_output(condition);
  nodes.push_back(std::move(reshape));
  for (int i = 0; i < node.output_size(); ++i) {
    if (node.output(i).empty())
      continue;
    NodeProto select;
    select.set_name(prefix + "select_" + std::to_string(i));
    select.set_op_type("Where");
    select.add_input(condition);
    select.add_input(thenValues[i]);
    select.add_input(elseValues[i]);
    select.add_output(node.output(i));
    nodes.push_back(std::move(select));
  }
  return success();
}

static LogicalResult inlineIfs(GraphProto &graph, Location fileLoc,
                               unsigned &serial) {
  bool any = false;
  for (const NodeProto &node : graph.node())
    any |= node.op_type() == "If" && isDefaultDomain(node.domain());
  if (!any)
    return success();
  std::vector<NodeProto> nodes;
  for (NodeProto &node : *graph.mutable_node()) {
    if (node.op_type() != "If" || !isDefaultDomain(node.domain())) {
      nodes.push_back(std::move(node));
      continue;
    }
    if (failed(inlineIf(node, graph, fileLoc, serial, nodes)))
      return failure();
  }
  graph.clear_node();
  for (NodeProto &node : nodes)
    *graph.add_node() = std::move(node);
  return success();
}

LogicalResult mlir::moe::onnx_import::inlineIfNodes(GraphProto &graph,
                                                    Location fileLoc) {
  unsigned serial = 0;
  return inlineIfs(graph, fileLoc, serial);
}
