//===- GraphImporter.cpp - an ONNX graph to @main_graph -------------------===//
//
// Graph inputs become arguments, initializers and Constant nodes become
// arith.constant at the top of the body, every other node one op
// `onnx.<OpType>` built generically (or moe.layer for com.microsoft.MoE),
// and graph outputs the results. Result types come from shape inference.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"
#include "FoldedParameters.h"
#include "dialects/onnx/IR/ONNXDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"
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
  // Training: parameters the exporter folded are named after themselves,
  // and the module records how each lies against torch's layout.
  llvm::StringMap<FoldedParameter> folded;
  if (options.namedWeights) {
    FailureOr<llvm::StringMap<FoldedParameter>> found =
        findFoldedParameters(graph, fileLoc, options.allowFrozenWeights);
    if (failed(found))
      return failure();
    folded = std::move(*found);
    SmallVector<NamedAttribute> layouts;
    for (auto &entry : folded)
      if (!entry.second.toTorch.empty())
        layouts.push_back(builder.getNamedAttr(
            entry.second.name,
            builder.getDenseI64ArrayAttr(entry.second.toTorch)));
    if (!layouts.empty())
      module->setAttr(kTorchLayoutsAttrName,
                      builder.getDictionaryAttr(layouts));
  }
  for (TensorProto &tensor : *graph.mutable_initializer()) {
    Location loc = NameLoc::get(builder.getStringAttr(tensor.name()), fileLoc);
    auto it = folded.find(tensor.name());
    StringRef name = it != folded.end() ? StringRef(it->second.name)
                                        : StringRef(tensor.name());
    FailureOr<ElementsAttr> value =
        tensors.importWeight(tensor, name, loc, options.namedWeights);
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
  if (node.op_type() == "Dropout")
    return importDropoutNode(node);
  return importOnnxNode(node);
}

LogicalResult GraphImporter::importDropoutNode(const NodeProto &node) {
  // Inference form only: the output is the input and the mask all true.
  // training_mode (opset 12) must be absent or a constant false; before 12
  // an is_test attribute was the switch and eval exports never set it off.
  SmallVector<Value> inputs = getInputs(node);
  if (inputs.empty() || isa<NoneType>(inputs[0].getType()))
    return emitError(node) << "expects its data input";
  if (inputs.size() > 2 && !isa<NoneType>(inputs[2].getType())) {
    DenseElementsAttr training;
    if (!matchPattern(inputs[2], m_Constant(&training)) ||
        training.getNumElements() != 1 ||
        training.getSplatValue<APInt>().getBoolValue())
      return emitError(node)
             << "Dropout in training mode (training_mode not a constant "
                "false) is not supported: export the model in eval mode";
  }
  SmallVector<Value> results{inputs[0]};
  if (node.output_size() > 1 && !node.output(1).empty()) {
    FailureOr<RankedTensorType> maskType = getOutputType(node, 1);
    if (failed(maskType))
      return failure();
    if (!maskType->hasStaticShape())
      return emitError(node) << "its mask output has a dynamic shape";
    results.push_back(createConstant(
        getLoc(node), DenseElementsAttr::get(*maskType, true)));
  }
  setOutputs(node, results);
  return success();
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

  if (failed(normalizeNode(node, inputs, attributes, resultTypes)))
    return failure();

  OperationState state(getLoc(node), "onnx." + node.op_type());
  state.addOperands(inputs);
  state.addTypes(resultTypes);
  state.addAttributes(attributes);
  setOutputs(node, builder.create(state)->getResults());
  return success();
}

Value GraphImporter::createIntsConstant(Location loc,
                                        ArrayRef<int64_t> values) {
  auto type = RankedTensorType::get({static_cast<int64_t>(values.size())},
                                    builder.getI64Type());
  return createConstant(loc, DenseIntElementsAttr::get(type, values));
}

/// The elements of `value` where a dense integer constant defines it (the
/// small initializers and Constant nodes that shape operands are).
static std::optional<SmallVector<int64_t>> getConstantInts(Value value) {
  auto constant = value.getDefiningOp<arith::ConstantOp>();
  auto dense =
      constant ? dyn_cast<DenseIntElementsAttr>(constant.getValue()) : nullptr;
  if (!dense)
    return std::nullopt;
  SmallVector<int64_t> ints;
  for (const APInt &element : dense)
    ints.push_back(element.getSExtValue());
  return ints;
}

// What each opset from 13 to the newest changes in the operators the onnx
// dialect has (the since_version history of ONNX's schemas), and how the
// import gives the lowering one meaning per op. Versions that only add
// element types (Add/Sub/Mul/Div 14, Relu 14, Pow 15, Where 16,
// GreaterOrEqual/LessOrEqual 16, Equal 19, Size 19, ConstantOfShape 20,
// Transpose/Squeeze/Unsqueeze/Flatten/Identity/Constant 21-25, TopK 24,
// Einsum/OneHot/ReduceLogSumExp 28, Softplus/Conv 22, Mod 28) need nothing:
// types the importer lacks (float8, int4, strings, ...) are refused with
// the value that has them.
//
//   op (versions)                  change                  here
//   Reduce{Mean,Max,Min,L1,L2,     axes attribute (13) ->  always the axes
//     Prod,LogSumExp} (13, 18)       axes input (18)         input
//   ReduceMax/Min 20               bool inputs             i1 max/min in
//                                                            the lowering
//   Split (13, 18)                 num_outputs (18): ceil  always an explicit
//                                    parts, last smaller     split input
//   Reshape (13, 14)               allowzero (14)          dropped where the
//                                                            shape has no 0;
//                                                            refused with one
//   Shape (13, 15)                 start/end (15)          honoured by the
//                                                            folder
//   Cast (13, 19, 24)              saturate (19),          only for float8
//                                    round_mode (24)         targets: dropped
//   Pad (13, 18, 19)               axes input (18),        axes folded into
//                                    mode wrap (19)          full pads; modes
//                                                            other than
//                                                            constant refused
//   Scatter{Elements,ND} (16, 18)  reduction add/mul (16), lowered; others
//                                    max/min (18)            refused
//   LayerNormalization 17,         stash_type              1 (float) only:
//     Range 27                                               the default
//   Gelu 20                        approximate             none, tanh
//   Mod 13                         fmod                    both lowered
//   Softmax 13, TopK, CumSum 14,   none since 13           --
//     ArgMax, Gather*, Trilu 14
LogicalResult GraphImporter::normalizeNode(
    const NodeProto &node, SmallVectorImpl<Value> &inputs,
    SmallVectorImpl<NamedAttribute> &attributes, ArrayRef<Type> resultTypes) {
  StringRef opType = node.op_type();
  Location loc = getLoc(node);
  auto getAttr = [&](StringRef name) -> Attribute {
    for (const NamedAttribute &attr : attributes)
      if (attr.getName() == name)
        return attr.getValue();
    return {};
  };
  auto eraseAttr = [&](StringRef name) {
    llvm::erase_if(attributes, [&](const NamedAttribute &attr) {
      return attr.getName() == name;
    });
  };
  auto intAttr = [&](StringRef name, int64_t otherwise) {
    auto attr = dyn_cast_or_null<IntegerAttr>(getAttr(name));
    return attr ? attr.getInt() : otherwise;
  };
  auto stringAttr = [&](StringRef name, StringRef otherwise) {
    auto attr = dyn_cast_or_null<StringAttr>(getAttr(name));
    return attr ? attr.getValue() : otherwise;
  };
  auto hasInput = [&](unsigned i) {
    return i < inputs.size() && !isa<NoneType>(inputs[i].getType());
  };

  if (llvm::is_contained({"ReduceMean", "ReduceMax", "ReduceMin", "ReduceL1",
                          "ReduceL2", "ReduceProd", "ReduceLogSumExp"},
                         opType)) {
    // Before opset 18 the axes are an attribute; absent, all dims reduce,
    // as an absent axes input does (noop_with_empty_axes is 0 there).
    if (auto axes = dyn_cast_or_null<DenseI64ArrayAttr>(getAttr("axes"))) {
      eraseAttr("axes");
      inputs.resize(1);
      inputs.push_back(createIntsConstant(loc, axes.asArrayRef()));
    }
    return success();
  }

  if (opType == "Split") {
    int64_t numOutputs = intAttr("num_outputs", 0);
    eraseAttr("num_outputs");
    if (hasInput(1))
      return success();
    auto type = inputs.empty()
                    ? RankedTensorType()
                    : dyn_cast<RankedTensorType>(inputs[0].getType());
    if (!type)
      return emitError(node) << "Split needs an input of known rank";
    int64_t axis = intAttr("axis", 0);
    if (axis < -type.getRank() || axis >= type.getRank())
      return emitError(node) << "attribute 'axis' is " << axis
                             << ", outside the input's " << type.getRank()
                             << " dimensions";
    if (axis < 0)
      axis += type.getRank();
    int64_t count = numOutputs ? numOutputs : node.output_size();
    if (count < 1)
      return emitError(node) << "Split must have at least one output";
    if (count != node.output_size() ||
        count != static_cast<int64_t>(resultTypes.size()))
      return emitError(node)
             << "attribute 'num_outputs' is " << count << ", but the node has "
             << node.output_size() << " outputs";
    SmallVector<int64_t> sizes;
    int64_t dim = type.getDimSize(axis);
    if (!ShapedType::isDynamic(dim)) {
      // Opset 18: parts of ceil(dim / count), the last one smaller; before,
      // equal parts.
      int64_t part = (dim + count - 1) / count;
      int64_t last = dim - part * (count - 1);
      if ((opset < 18 && dim % count != 0) || last < 0)
        return emitError(node) << "dimension " << axis << " of size " << dim
                               << " does not split into " << count << " parts";
      sizes.assign(count - 1, part);
      sizes.push_back(last);
    } else {
      for (Type resultType : resultTypes) {
        auto result = dyn_cast<RankedTensorType>(resultType);
        if (!result || result.getRank() != type.getRank())
          return emitError(node) << "an output of Split does not have the "
                                    "input's rank";
        int64_t size = result.getDimSize(axis);
        if (ShapedType::isDynamic(size))
          return emitError(node)
                 << "the split dimension " << axis
                 << " is dynamic and the node gives no split sizes; give "
                    "the input's shape (--input-shape)";
        sizes.push_back(size);
      }
    }
    inputs.resize(1);
    inputs.push_back(createIntsConstant(loc, sizes));
    return success();
  }

  if (opType == "Reshape") {
    if (!intAttr("allowzero", 0)) {
      eraseAttr("allowzero");
      return success();
    }
    // allowzero=1 differs from the default only where the shape has a 0; a
    // shape computed at run time keeps the attribute, which the lowering
    // honours.
    if (std::optional<SmallVector<int64_t>> shape =
            getConstantInts(inputs[1])) {
      if (llvm::is_contained(*shape, 0))
        return emitError(node) << "attribute 'allowzero' = 1 with a 0 in the "
                                  "shape (an empty dimension) is not "
                                  "supported";
      eraseAttr("allowzero");
    }
    return success();
  }

  if (opType == "Cast") {
    // Both apply only to float8 targets, which the importer does not have.
    eraseAttr("saturate");
    eraseAttr("round_mode");
    return success();
  }

  if (opType == "Pad") {
    StringRef mode = stringAttr("mode", "constant");
    if (mode != "constant")
      return emitError(node) << "attribute 'mode' = '" << mode
                             << "' is not supported (only 'constant')";
    eraseAttr("mode");
    if (!hasInput(3))
      return success();
    // Opset 18 pads only the listed axes: make the pads cover every dim.
    auto type = cast<RankedTensorType>(inputs[0].getType());
    int64_t rank = type.getRank();
    std::optional<SmallVector<int64_t>> pads = getConstantInts(inputs[1]);
    std::optional<SmallVector<int64_t>> axes = getConstantInts(inputs[3]);
    if (!pads || !axes || pads->size() != 2 * axes->size())
      return emitError(node) << "input 'axes' is supported only with constant "
                                "pads and axes";
    SmallVector<int64_t> full(2 * rank, 0);
    int64_t numAxes = axes->size();
    for (auto [i, axis] : llvm::enumerate(*axes)) {
      if (axis < -rank || axis >= rank)
        return emitError(node) << "axis " << axis << " is out of range";
      if (axis < 0)
        axis += rank;
      full[axis] = (*pads)[i];
      full[axis + rank] = (*pads)[i + numAxes];
    }
    inputs[1] = createIntsConstant(loc, full);
    inputs.resize(3);
    return success();
  }

  if (opType == "ScatterElements" || opType == "ScatterND") {
    StringRef reduction = stringAttr("reduction", "none");
    if (!llvm::is_contained({"none", "add", "mul", "max", "min"}, reduction))
      return emitError(node) << "attribute 'reduction' = '" << reduction
                             << "' is not supported";
    if (reduction == "none")
      eraseAttr("reduction");
    return success();
  }

  if (opType == "LayerNormalization" || opType == "Range" ||
      opType == "RMSNormalization") {
    // The lowering computes in the input's type: float for the models it
    // compiles, the stash type ONNX defaults to.
    if (intAttr("stash_type", 1) != 1)
      return emitError(node)
             << "attribute 'stash_type' = " << intAttr("stash_type", 1)
             << " is not supported (only 1, float)";
    eraseAttr("stash_type");
    return success();
  }

  if (opType == "Gelu") {
    StringRef approximate = stringAttr("approximate", "none");
    if (approximate != "none" && approximate != "tanh")
      return emitError(node) << "attribute 'approximate' = '" << approximate
                             << "' is not supported (none or tanh)";
    return success();
  }

  if (opType == "Mod") {
    int64_t fmod = intAttr("fmod", 0);
    if (fmod != 0 && fmod != 1)
      return emitError(node)
             << "attribute 'fmod' = " << fmod << " is not supported (0 or 1)";
    return success();
  }
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
    tensorType = getRankFromShapeOperand(node, *type);
  if (!tensorType)
    return emitError(node) << "output '" << name << "' " << error;
  return tensorType;
}

RankedTensorType
GraphImporter::getRankFromShapeOperand(const NodeProto &node,
                                       const ::ONNX_NAMESPACE::TypeProto &type) {
  // ONNX's inference leaves the rank unknown where the shape operand is
  // computed (a Concat of Shape pieces, as opset-13 exports write it), but
  // its length, which is the rank, is static in the IR built so far.
  StringRef op = node.op_type();
  if (!type.has_tensor_type() || type.tensor_type().has_shape())
    return {};
  Type elementType =
      getElementType(module.getContext(), type.tensor_type().elem_type());
  if (!elementType)
    return {};
  auto dynamicOfRank = [&](int64_t rank) {
    return RankedTensorType::get(
        SmallVector<int64_t>(rank, ShapedType::kDynamic), elementType);
  };
  // An elementwise op broadcasts its operands: the largest rank.
  std::optional<RegisteredOperationName> registered =
      RegisteredOperationName::lookup(("onnx." + op).str(),
                                      module.getContext());
  if (node.domain().empty() && registered &&
      registered->hasTrait<onnx::OpTrait::Elementwise>()) {
    int64_t rank = 0;
    for (const std::string &input : node.input()) {
      if (input.empty())
        continue;
      auto inputType =
          dyn_cast_or_null<RankedTensorType>(values.lookup(input).getType());
      if (!inputType)
        return {};
      rank = std::max(rank, inputType.getRank());
    }
    return dynamicOfRank(rank);
  }
  int shapeOperand = op == "Reshape" || op == "Expand" ? 1
                     : op == "ConstantOfShape"        ? 0
                                                      : -1;
  if (shapeOperand < 0 || node.input_size() <= shapeOperand)
    return {};
  auto shapeType = dyn_cast_or_null<RankedTensorType>(
      values.lookup(node.input(shapeOperand)).getType());
  if (!shapeType || shapeType.getRank() != 1 || shapeType.isDynamicDim(0))
    return {};
  int64_t rank = shapeType.getDimSize(0);
  // Expand broadcasts: the rank is the larger of the two.
  if (op == "Expand")
    if (auto inputType = dyn_cast_or_null<RankedTensorType>(
            values.lookup(node.input(0)).getType()))
      rank = std::max(rank, inputType.getRank());
  return dynamicOfRank(rank);
}

void GraphImporter::setOutputs(const NodeProto &node, ValueRange results) {
  for (auto [name, result] : llvm::zip(node.output(), results))
    values[name] = result;
}
