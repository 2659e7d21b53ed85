//===- GraphImporter.cpp - an ONNX graph to @main_graph -------------------===//
//
// Graph inputs become arguments, initializers and Constant nodes become
// arith.constant at the top of the body, every other node one op
// `onnx.<OpType>` built generically (or moe.layer for com.microsoft.MoE),
// and graph outputs the results. Result types come from shape inference.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"
#include "dialects/onnx/IR/ONNXDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::moe::onnx_import;
using ::ONNX_NAMESPACE::AttributeProto;
using ::ONNX_NAMESPACE::GraphProto;
using ::ONNX_NAMESPACE::NodeProto;
using ::ONNX_NAMESPACE::TensorProto;
using ::ONNX_NAMESPACE::ValueInfoProto;

SmallVector<const ValueInfoProto *>
moe::onnx_import::getArgumentInputs(const GraphProto &graph) {
  llvm::StringSet<> initialized;
  for (const TensorProto &tensor : graph.initializer())
    initialized.insert(tensor.name());
  SmallVector<const ValueInfoProto *> arguments;
  for (const ValueInfoProto &input : graph.input())
    if (!initialized.contains(input.name()))
      arguments.push_back(&input);
  return arguments;
}

std::string moe::onnx_import::getQualifiedOpType(const NodeProto &node) {
  if (isDefaultDomain(node.domain()))
    return node.op_type();
  return node.domain() + "." + node.op_type();
}

Location moe::onnx_import::getNodeLoc(const NodeProto &node, Location fileLoc) {
  StringRef name = node.name().empty() ? node.op_type() : node.name();
  return NameLoc::get(StringAttr::get(fileLoc.getContext(), name), fileLoc);
}

InFlightDiagnostic moe::onnx_import::emitNodeError(const NodeProto &node,
                                                   Location fileLoc) {
  return mlir::emitError(getNodeLoc(node, fileLoc))
         << "node '" << node.name() << "' (" << getQualifiedOpType(node)
         << "): ";
}

GraphImporter::GraphImporter(ModuleOp module, Location fileLoc,
                             TensorImporter &tensors,
                             const ImportOptions &options)
    : module(module), fileLoc(fileLoc), tensors(tensors), options(options),
      builder(module.getContext()) {}

LogicalResult GraphImporter::importGraph(GraphProto &graph) {
  if (!graph.sparse_initializer().empty())
    return mlir::emitError(fileLoc)
           << "sparse initializer '"
           << graph.sparse_initializer(0).values().name()
           << "' is not supported";
  for (const auto *infos :
       {&graph.input(), &graph.value_info(), &graph.output()})
    for (const ValueInfoProto &info : *infos)
      valueTypes[info.name()] = &info.type();

  SmallVector<const ValueInfoProto *> arguments = getArgumentInputs(graph);
  SmallVector<Type> argTypes;
  SmallVector<Location> argLocs;
  for (const ValueInfoProto *input : arguments) {
    std::string error;
    RankedTensorType type =
        getTensorType(module.getContext(), input->type(), error);
    if (!type)
      return mlir::emitError(fileLoc)
             << "graph input '" << input->name() << "' " << error;
    argTypes.push_back(type);
    argLocs.push_back(
        NameLoc::get(builder.getStringAttr(input->name()), fileLoc));
  }

  builder.setInsertionPointToEnd(module.getBody());
  auto func = func::FuncOp::create(builder, fileLoc, "main_graph",
                                   builder.getFunctionType(argTypes, {}));
  Block *body = builder.createBlock(&func.getBody(), {}, argTypes, argLocs);
  for (auto [i, input] : llvm::enumerate(arguments)) {
    func.setArgAttr(i, "onnx.name", builder.getStringAttr(input->name()));
    values[input->name()] = body->getArgument(i);
  }

  if (failed(importInitializers(graph)))
    return failure();
  for (NodeProto &node : *graph.mutable_node())
    if (failed(importNode(node)))
      return failure();
  return importResults(graph, func);
}

OpBuilder GraphImporter::getConstantBuilder() {
  OpBuilder constantBuilder(module.getContext());
  if (lastConstant)
    constantBuilder.setInsertionPointAfter(lastConstant);
  else
    constantBuilder.setInsertionPointToStart(builder.getInsertionBlock());
  return constantBuilder;
}

Value GraphImporter::getNone() {
  if (!none) {
    OpBuilder constantBuilder = getConstantBuilder();
    none = moe::onnx::NoneOp::create(constantBuilder, fileLoc,
                                     constantBuilder.getNoneType());
    lastConstant = none.getDefiningOp();
  }
  return none;
}

Value GraphImporter::createConstant(Location loc, ElementsAttr value) {
  OpBuilder constantBuilder = getConstantBuilder();
  auto constant =
      arith::ConstantOp::create(constantBuilder, loc, cast<TypedAttr>(value));
  lastConstant = constant;
  return constant;
}

LogicalResult GraphImporter::importInitializers(GraphProto &graph) {
  for (TensorProto &tensor : *graph.mutable_initializer()) {
    Location loc = NameLoc::get(builder.getStringAttr(tensor.name()), fileLoc);
    FailureOr<ElementsAttr> value =
        tensors.importWeight(tensor, tensor.name(), loc);
    if (failed(value))
      return failure();
    values[tensor.name()] = createConstant(loc, *value);
  }
  return success();
}

LogicalResult GraphImporter::importNode(NodeProto &node) {
  // The checks before shape inference let only com.microsoft.MoE through
  // from outside the default domain.
  if (node.domain() == kMicrosoftDomain)
    return importOrtMoE(*this, node);
  if (node.op_type() == "Constant")
    return importConstantNode(node);
  return importOnnxNode(node);
}

/// A 0-d or 1-d constant of `values`.
template <typename T>
static DenseElementsAttr getConstantValue(Type elementType, ArrayRef<T> values,
                                          bool isList) {
  SmallVector<int64_t> shape;
  if (isList)
    shape.push_back(values.size());
  return DenseElementsAttr::get(RankedTensorType::get(shape, elementType),
                                values);
}

LogicalResult GraphImporter::importConstantNode(NodeProto &node) {
  if (node.attribute_size() != 1 || node.output_size() != 1)
    return emitError(node) << "expects one attribute and one output";
  AttributeProto &attr = *node.mutable_attribute(0);
  StringRef name = attr.name();
  Location loc = getLoc(node);
  FailureOr<ElementsAttr> value = failure();
  if (name == "value") {
    value = tensors.importWeight(*attr.mutable_t(), node.output(0), loc);
    if (failed(value))
      return failure();
  } else if (name == "value_float" || name == "value_floats") {
    float scalar = attr.f();
    ArrayRef<float> floats =
        name == "value_float"
            ? ArrayRef<float>(scalar)
            : ArrayRef<float>(attr.floats().data(), attr.floats_size());
    value = cast<ElementsAttr>(
        getConstantValue(builder.getF32Type(), floats, name == "value_floats"));
  } else if (name == "value_int" || name == "value_ints") {
    int64_t scalar = attr.i();
    ArrayRef<int64_t> ints =
        name == "value_int"
            ? ArrayRef<int64_t>(scalar)
            : ArrayRef<int64_t>(attr.ints().data(), attr.ints_size());
    value = cast<ElementsAttr>(
        getConstantValue(builder.getI64Type(), ints, name == "value_ints"));
  } else {
    return emitError(node) << "attribute '" << name << "' is not supported";
  }
  setOutputs(node, createConstant(loc, *value));
  return success();
}

LogicalResult GraphImporter::importOnnxNode(const NodeProto &node) {
  SmallVector<Value> inputs = getInputs(node);
  // Omitted optional outputs at the end are not results.
  int numOutputs = node.output_size();
  while (numOutputs > 0 && node.output(numOutputs - 1).empty())
    --numOutputs;
  SmallVector<Type> resultTypes;
  for (int i = 0; i < numOutputs; ++i) {
    FailureOr<RankedTensorType> type = getOutputType(node, i);
    if (failed(type))
      return failure();
    resultTypes.push_back(*type);
  }
  SmallVector<NamedAttribute> attributes;
  for (const AttributeProto &attr : node.attribute()) {
    FailureOr<NamedAttribute> attribute = importAttribute(node, attr);
    if (failed(attribute))
      return failure();
    attributes.push_back(*attribute);
  }

  OperationState state(getLoc(node), "onnx." + node.op_type());
  state.addOperands(inputs);
  state.addTypes(resultTypes);
  state.addAttributes(attributes);
  setOutputs(node, builder.create(state)->getResults());
  return success();
}

FailureOr<NamedAttribute>
GraphImporter::importAttribute(const NodeProto &node,
                               const AttributeProto &attr) {
  StringAttr name = builder.getStringAttr(attr.name());
  switch (attr.type()) {
  case AttributeProto::FLOAT:
    return NamedAttribute(name, builder.getF32FloatAttr(attr.f()));
  case AttributeProto::INT:
    return NamedAttribute(name, builder.getI64IntegerAttr(attr.i()));
  case AttributeProto::STRING:
    return NamedAttribute(name, builder.getStringAttr(attr.s()));
  case AttributeProto::FLOATS:
    return NamedAttribute(name, builder.getDenseF32ArrayAttr(ArrayRef<float>(
                                    attr.floats().data(), attr.floats_size())));
  case AttributeProto::INTS:
    return NamedAttribute(name, builder.getDenseI64ArrayAttr(ArrayRef<int64_t>(
                                    attr.ints().data(), attr.ints_size())));
  case AttributeProto::STRINGS: {
    SmallVector<Attribute> strings;
    for (const std::string &string : attr.strings())
      strings.push_back(builder.getStringAttr(string));
    return NamedAttribute(name, builder.getArrayAttr(strings));
  }
  case AttributeProto::TENSOR: {
    FailureOr<DenseElementsAttr> value =
        tensors.importInline(attr.t(), attr.name(), getLoc(node));
    if (failed(value))
      return failure();
    return NamedAttribute(name, *value);
  }
  default:
    return emitError(node) << "attribute '" << attr.name() << "' of type "
                           << AttributeProto::AttributeType_Name(attr.type())
                           << " is not supported";
  }
}

LogicalResult GraphImporter::importResults(const GraphProto &graph,
                                           func::FuncOp func) {
  SmallVector<Value> results;
  for (const ValueInfoProto &output : graph.output()) {
    results.push_back(values.lookup(output.name()));
  }
  func::ReturnOp::create(builder, fileLoc, results);
  func.setType(builder.getFunctionType(func.getArgumentTypes(),
                                       ValueRange(results).getTypes()));
  for (auto [i, output] : llvm::enumerate(graph.output()))
    func.setResultAttr(i, "onnx.name", builder.getStringAttr(output.name()));
  return success();
}

SmallVector<Value> GraphImporter::getInputs(const NodeProto &node) {
  SmallVector<Value> inputs;
  for (const std::string &name : node.input()) {
    if (name.empty()) {
      inputs.push_back(getNone());
      continue;
    }
    inputs.push_back(values.lookup(name));
  }
  return inputs;
}

FailureOr<RankedTensorType> GraphImporter::getOutputType(const NodeProto &node,
                                                         int index) {
  const std::string &name = node.output(index);
  if (name.empty())
    return emitError(node) << "output " << index
                           << " is omitted; only trailing optional outputs "
                              "may be";
  const ::ONNX_NAMESPACE::TypeProto *type = valueTypes.lookup(name);
  if (!type)
    return emitError(node) << "output '" << name
                           << "' has no type: shape inference could not "
                              "infer it";
  std::string error;
  RankedTensorType tensorType =
      getTensorType(module.getContext(), *type, error);
  if (!tensorType)
    return emitError(node) << "output '" << name << "' " << error;
  return tensorType;
}

void GraphImporter::setOutputs(const NodeProto &node, ValueRange results) {
  for (auto [name, result] : llvm::zip(node.output(), results))
    values[name] = result;
}
