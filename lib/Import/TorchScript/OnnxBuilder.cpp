//===- OnnxBuilder.cpp - an ONNX graph built node by node -----------------===//

#include "OnnxBuilder.h"

#include "llvm/ADT/DenseMap.h"

#include <onnx/defs/schema.h>
#include <onnx/defs/tensor_proto_util.h>
#include <onnx/shape_inference/implementation.h>

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::torchscript;

void torchscript::fail(const Twine &message) {
  throw TranslationError(message.str());
}

//===----------------------------------------------------------------------===//
// Attributes and tensors
//===----------------------------------------------------------------------===//

static ::ONNX_NAMESPACE::AttributeProto
namedAttr(StringRef name, ::ONNX_NAMESPACE::AttributeProto::AttributeType type) {
  ::ONNX_NAMESPACE::AttributeProto attr;
  attr.set_name(name.str());
  attr.set_type(type);
  return attr;
}

::ONNX_NAMESPACE::AttributeProto torchscript::intAttr(StringRef name, int64_t value) {
  ::ONNX_NAMESPACE::AttributeProto attr = namedAttr(name, ::ONNX_NAMESPACE::AttributeProto::INT);
  attr.set_i(value);
  return attr;
}

::ONNX_NAMESPACE::AttributeProto torchscript::intsAttr(StringRef name,
                                             ArrayRef<int64_t> values) {
  ::ONNX_NAMESPACE::AttributeProto attr = namedAttr(name, ::ONNX_NAMESPACE::AttributeProto::INTS);
  for (int64_t value : values)
    attr.add_ints(value);
  return attr;
}

::ONNX_NAMESPACE::AttributeProto torchscript::floatAttr(StringRef name, float value) {
  ::ONNX_NAMESPACE::AttributeProto attr = namedAttr(name, ::ONNX_NAMESPACE::AttributeProto::FLOAT);
  attr.set_f(value);
  return attr;
}

::ONNX_NAMESPACE::AttributeProto torchscript::stringAttr(StringRef name,
                                               StringRef value) {
  ::ONNX_NAMESPACE::AttributeProto attr = namedAttr(name, ::ONNX_NAMESPACE::AttributeProto::STRING);
  attr.set_s(value.str());
  return attr;
}

/// Writes `tensor` into `proto`. Copying a parameter into raw_data is the
/// one copy of its data that the importer makes (the ONNX importer then
/// moves raw_data out of the model).
static void fillTensorProto(const at::Tensor &tensor, StringRef name,
                            ::ONNX_NAMESPACE::TensorProto &proto) {
  proto.set_name(name.str());
  proto.set_data_type(toOnnxType(tensor.scalar_type()));
  for (int64_t dim : tensor.sizes())
    proto.add_dims(dim);
  std::string &raw = *proto.mutable_raw_data();
  raw.resize(tensor.nbytes());
  // Copying through a view of raw_data handles any strides (a transposed
  // weight, a slice) in this one copy.
  at::NoGradGuard noGrad;
  at::from_blob(raw.data(), tensor.sizes(),
                at::TensorOptions().dtype(tensor.scalar_type()))
      .copy_(tensor);
}

::ONNX_NAMESPACE::AttributeProto torchscript::tensorAttr(StringRef name,
                                               const at::Tensor &value) {
  ::ONNX_NAMESPACE::AttributeProto attr = namedAttr(name, ::ONNX_NAMESPACE::AttributeProto::TENSOR);
  fillTensorProto(value, "", *attr.mutable_t());
  return attr;
}

int32_t torchscript::toOnnxType(at::ScalarType type) {
  using ::ONNX_NAMESPACE::TensorProto;
  switch (type) {
  case at::kFloat:
    return TensorProto::FLOAT;
  case at::kDouble:
    return TensorProto::DOUBLE;
  case at::kHalf:
    return TensorProto::FLOAT16;
  case at::kBFloat16:
    return TensorProto::BFLOAT16;
  case at::kLong:
    return TensorProto::INT64;
  case at::kInt:
    return TensorProto::INT32;
  case at::kShort:
    return TensorProto::INT16;
  case at::kChar:
    return TensorProto::INT8;
  case at::kByte:
    return TensorProto::UINT8;
  case at::kBool:
    return TensorProto::BOOL;
  default:
    fail(Twine("ONNX has no element type for torch dtype ") +
         c10::toString(type));
  }
}

at::ScalarType torchscript::toTorchType(int32_t onnxType) {
  using ::ONNX_NAMESPACE::TensorProto;
  switch (onnxType) {
  case TensorProto::FLOAT:
    return at::kFloat;
  case TensorProto::DOUBLE:
    return at::kDouble;
  case TensorProto::FLOAT16:
    return at::kHalf;
  case TensorProto::BFLOAT16:
    return at::kBFloat16;
  case TensorProto::INT64:
    return at::kLong;
  case TensorProto::INT32:
    return at::kInt;
  case TensorProto::INT16:
    return at::kShort;
  case TensorProto::INT8:
    return at::kChar;
  case TensorProto::UINT8:
    return at::kByte;
  case TensorProto::BOOL:
    return at::kBool;
  default:
    fail("torch has no dtype for ONNX element type " + Twine(onnxType));
  }
}

//===----------------------------------------------------------------------===//
// OnnxBuilder
//===----------------------------------------------------------------------===//

std::string OnnxBuilder::uniqueName(StringRef hint) {
  std::string name = hint.str();
  unsigned &suffix = nextSuffix[hint];
  while (!usedNames.insert(name).second)
    name = (hint + "_" + Twine(++suffix)).str();
  return name;
}

static ::ONNX_NAMESPACE::TypeProto tensorType(int32_t elemType, ArrayRef<int64_t> shape) {
  ::ONNX_NAMESPACE::TypeProto type;
  auto *tensor = type.mutable_tensor_type();
  tensor->set_elem_type(elemType);
  auto *dims = tensor->mutable_shape();
  for (int64_t dim : shape)
    dims->add_dim()->set_dim_value(dim);
  return type;
}

void OnnxBuilder::addInput(StringRef name, at::ScalarType type,
                           ArrayRef<int64_t> shape) {
  if (!usedNames.insert(name).second)
    fail("two inputs are named '" + name + "'");
  ::ONNX_NAMESPACE::ValueInfoProto *input = graph.add_input();
  input->set_name(name.str());
  *input->mutable_type() = tensorType(toOnnxType(type), shape);
  types[name.str()] = input->mutable_type();
}

void OnnxBuilder::addOutput(const std::string &value, StringRef outputName) {
  if (!usedNames.insert(outputName).second)
    fail("a value of the graph is already named '" + outputName + "'");
  std::string name = outputName.str();
  // A node result is renamed; a graph input, an initializer or a value that
  // is already an output is copied by an Identity.
  auto renamed = renamedOutputs.find(value);
  const std::string &current =
      renamed == renamedOutputs.end() ? value : renamed->second;
  ::ONNX_NAMESPACE::NodeProto *producer = nullptr;
  for (::ONNX_NAMESPACE::NodeProto &node : *graph.mutable_node())
    if (llvm::is_contained(node.output(), current))
      producer = &node;
  if (!producer || renamed != renamedOutputs.end()) {
    std::string identity = op("Identity", {current});
    graph.mutable_node()->rbegin()->set_output(0, name);
    types[name] = types.at(identity);
  } else {
    for (::ONNX_NAMESPACE::ValueInfoProto &info : *graph.mutable_value_info())
      if (info.name() == value)
        info.set_name(name);
    for (::ONNX_NAMESPACE::NodeProto &node : *graph.mutable_node()) {
      for (std::string &input : *node.mutable_input())
        if (input == value)
          input = name;
      for (std::string &result : *node.mutable_output())
        if (result == value)
          result = name;
    }
    types[name] = types.at(value);
    renamedOutputs[value] = name;
  }
  ::ONNX_NAMESPACE::ValueInfoProto *output = graph.add_output();
  output->set_name(name);
  *output->mutable_type() = *types.at(name);
}

std::string OnnxBuilder::addInitializer(StringRef nameHint,
                                        const at::Tensor &tensor) {
  std::string name = uniqueName(nameHint);
  ::ONNX_NAMESPACE::TensorProto *proto = graph.add_initializer();
  fillTensorProto(tensor, name, *proto);
  typeStorage.push_back(tensorType(proto->data_type(), tensor.sizes().vec()));
  types[name] = &typeStorage.back();
  constants[name] = proto;
  return name;
}

std::string OnnxBuilder::constant(const at::Tensor &tensor) {
  std::string name = op("Constant", {}, {tensorAttr("value", tensor)});
  constants[name] = &graph.node().rbegin()->attribute(0).t();
  return name;
}

std::string OnnxBuilder::constantInts(ArrayRef<int64_t> values) {
  return constant(at::tensor(std::vector<int64_t>(values.begin(), values.end()),
                             at::kLong));
}

std::string OnnxBuilder::constantScalar(const at::Scalar &value,
                                        at::ScalarType type) {
  return constant(at::scalar_tensor(value, at::TensorOptions().dtype(type)));
}

void OnnxBuilder::inferTypes(::ONNX_NAMESPACE::NodeProto &node) {
  const ::ONNX_NAMESPACE::OpSchema *schema = ::ONNX_NAMESPACE::OpSchemaRegistry::Schema(
      node.op_type(), kOnnxOpset, node.domain());
  if (!schema)
    fail("ONNX opset " + Twine(kOnnxOpset) + " has no operator " +
         node.op_type());
  try {
    schema->Verify(node);
    std::unordered_map<std::string, const ::ONNX_NAMESPACE::SparseTensorProto *>
        noSparseData;
    ::ONNX_NAMESPACE::ShapeInferenceOptions options(/*check_type_val=*/true,
                                                    /*strict_mode_val=*/1,
                                                    /*data_prop_val=*/true);
    ::ONNX_NAMESPACE::shape_inference::InferenceContextImpl context(
        node, types, constants, noSparseData, options, &shapeData);
    if (schema->has_type_and_shape_inference_function())
      schema->GetTypeAndShapeInferenceFunction()(context);
    else if (schema->HasFunction()) // e.g. LessOrEqual-16
      ::ONNX_NAMESPACE::shape_inference::InferShapeForFunctionNode(
          *schema->GetFunction(), ::ONNX_NAMESPACE::OpSchemaRegistry::Instance(),
          context);
    if (schema->has_data_propagation_function()) {
      ::ONNX_NAMESPACE::shape_inference::DataPropagationContextImpl propagation(
          node, types, constants, shapeData);
      schema->GetDataPropagationFunction()(propagation);
    }
    for (int i = 0, e = node.output_size(); i < e; ++i) {
      ::ONNX_NAMESPACE::TypeProto &type = context.allOutputTypes_[i];
      if (!type.has_tensor_type() || !type.tensor_type().elem_type())
        fail("no type inferred for result " + Twine(i));
      typeStorage.push_back(std::move(type));
      types[node.output(i)] = &typeStorage.back();
    }
    refineShape(node);
  } catch (const std::exception &error) {
    // A translation that ONNX rejects is a bug of the translation, or a
    // model that torch would reject too; say which ONNX node it was.
    std::string inputs;
    for (const std::string &input : node.input()) {
      inputs += inputs.empty() ? "" : ", ";
      auto it = types.find(input);
      if (input.empty() || it == types.end()) {
        inputs += "none";
        continue;
      }
      const auto &tensor = it->second->tensor_type();
      inputs += ::ONNX_NAMESPACE::TensorProto::DataType_Name(
          static_cast<::ONNX_NAMESPACE::TensorProto::DataType>(tensor.elem_type()));
      inputs += "[";
      for (int d = 0; d < tensor.shape().dim_size(); ++d) {
        const auto &dim = tensor.shape().dim(d);
        inputs += (d ? "x" : "") + (dim.has_dim_value()
                                        ? std::to_string(dim.dim_value())
                                        : std::string("?"));
      }
      inputs += "]";
    }
    fail("ONNX rejects the " + node.op_type() + " made for it (inputs " +
         inputs + "): " + error.what());
  }
}

std::optional<int64_t>
OnnxBuilder::constantInt(const std::string &value) const {
  auto it = constants.find(value);
  if (it == constants.end())
    return std::nullopt;
  const ::ONNX_NAMESPACE::TensorProto &data = *it->second;
  if (data.data_type() != ::ONNX_NAMESPACE::TensorProto::INT64 ||
      data.raw_data().size() != sizeof(int64_t))
    return std::nullopt;
  int64_t result;
  std::memcpy(&result, data.raw_data().data(), sizeof(int64_t));
  return result;
}

void OnnxBuilder::refineShape(const ::ONNX_NAMESPACE::NodeProto &node) {
  // What ONNX 1.12's inference leaves unknown but follows from the node:
  // OneHot's depth and Einsum's letters (which torch.onnx knew from the
  // trace), and some ranks. They are recorded as value_info too, so that
  // the ONNX importer's own inference keeps them.
  auto attr = [&](StringRef name) -> const ::ONNX_NAMESPACE::AttributeProto * {
    for (const ::ONNX_NAMESPACE::AttributeProto &attr : node.attribute())
      if (attr.name() == name)
        return &attr;
    return nullptr;
  };
  SmallVector<int64_t> dims;
  if (node.op_type() == "OneHot") {
    std::optional<int64_t> depth = constantInt(node.input(1));
    const ::ONNX_NAMESPACE::AttributeProto *axis = attr("axis");
    if (!depth || (axis && axis->i() != -1))
      return;
    dims = shape(node.input(0));
    dims.push_back(*depth);
  } else if (node.op_type() == "Einsum") {
    StringRef equation = attr("equation")->s();
    auto [operands, result] = equation.split("->");
    if (equation.contains("...") || !equation.contains("->"))
      return;
    SmallVector<StringRef> terms;
    operands.split(terms, ',');
    llvm::SmallDenseMap<char, int64_t> letterDims;
    for (auto [term, input] : llvm::zip(terms, node.input())) {
      SmallVector<int64_t> inputDims = shape(input);
      term = term.trim();
      if (term.size() != inputDims.size())
        return;
      for (auto [letter, dim] : llvm::zip(term, inputDims))
        if (dim >= 0)
          letterDims[letter] = dim;
    }
    for (char letter : result.trim())
      dims.push_back(letterDims.lookup_or(letter, -1));
  } else if (node.op_type() == "ConstantOfShape") {
    // The rank, when the shape is computed at run time.
    SmallVector<int64_t> shapeDims = shape(node.input(0));
    if (shapeDims.size() != 1 || shapeDims[0] < 0)
      return;
    dims.assign(shapeDims[0], -1);
  } else if (node.op_type() == "Slice") {
    // The rank, when the bounds are computed at run time; the dims that are
    // not sliced keep their sizes.
    dims = shape(node.input(0));
    auto axes = constants.find(node.input_size() > 3 ? node.input(3) : "");
    if (axes == constants.end()) {
      dims.assign(dims.size(), -1);
    } else {
      for (int64_t axis : ::ONNX_NAMESPACE::ParseData<int64_t>(axes->second))
        dims[axis < 0 ? axis + dims.size() : axis] = -1;
    }
  } else if (StringRef(node.op_type()).starts_with("Reduce") &&
             node.input_size() == 1 && !attr("axes")) {
    // A reduction of all dims, when the input's rank is unknown.
    const ::ONNX_NAMESPACE::AttributeProto *keepdims = attr("keepdims");
    if (keepdims && keepdims->i())
      return;
  } else {
    return;
  }
  ::ONNX_NAMESPACE::TypeProto &type = *types.at(node.output(0));
  ::ONNX_NAMESPACE::TypeProto_Tensor &tensor = *type.mutable_tensor_type();
  bool refined = false;
  if (!tensor.has_shape()) {
    auto *resultShape = tensor.mutable_shape();
    for (int64_t known : dims) {
      auto *dim = resultShape->add_dim();
      if (known >= 0)
        dim->set_dim_value(known);
    }
    refined = true;
  } else if (tensor.shape().dim_size() == static_cast<int>(dims.size())) {
    for (auto [dim, known] :
         llvm::zip(*tensor.mutable_shape()->mutable_dim(), dims)) {
      if (known < 0 || dim.has_dim_value())
        continue;
      dim.set_dim_value(known);
      refined = true;
    }
  }
  if (!refined)
    return;
  ::ONNX_NAMESPACE::ValueInfoProto *info = graph.add_value_info();
  info->set_name(node.output(0));
  *info->mutable_type() = type;
}

SmallVector<std::string>
OnnxBuilder::addNode(StringRef opType, ArrayRef<std::string> inputs,
                     ArrayRef<::ONNX_NAMESPACE::AttributeProto> attrs,
                     unsigned numResults) {
  std::string name = uniqueName(opType);
  ::ONNX_NAMESPACE::NodeProto *node = graph.add_node();
  node->set_op_type(opType.str());
  node->set_name(name);
  for (const std::string &input : inputs)
    node->add_input(input);
  for (const ::ONNX_NAMESPACE::AttributeProto &attr : attrs)
    *node->add_attribute() = attr;
  SmallVector<std::string> results;
  for (unsigned i = 0; i < numResults; ++i) {
    results.push_back(
        numResults == 1 ? name : uniqueName(name + "." + std::to_string(i)));
    node->add_output(results.back());
  }
  inferTypes(*node);
  return results;
}

std::string OnnxBuilder::op(StringRef opType, ArrayRef<std::string> inputs,
                            ArrayRef<::ONNX_NAMESPACE::AttributeProto> attrs) {
  return addNode(opType, inputs, attrs).front();
}

std::string OnnxBuilder::cast(const std::string &value, at::ScalarType type) {
  if (elementType(value) == type)
    return value;
  return op("Cast", {value}, {intAttr("to", toOnnxType(type))});
}

std::string OnnxBuilder::constantOfShape(const std::string &shape,
                                         const at::Tensor &value) {
  // Opset 17's ConstantOfShape has no bfloat16: fill in float32, then cast.
  if (value.scalar_type() == at::kBFloat16)
    return cast(constantOfShape(shape, value.to(at::kFloat)), at::kBFloat16);
  return op("ConstantOfShape", {shape}, {tensorAttr("value", value)});
}

std::string OnnxBuilder::shapeOf(const std::string &value) {
  if (std::optional<SmallVector<int64_t>> dims = staticShape(value))
    return constantInts(*dims);
  return op("Shape", {value});
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

const ::ONNX_NAMESPACE::TypeProto &OnnxBuilder::type(const std::string &value) const {
  auto it = types.find(value);
  if (it == types.end())
    fail("internal error: ONNX value '" + value + "' has no type");
  return *it->second;
}

at::ScalarType OnnxBuilder::elementType(const std::string &value) const {
  return toTorchType(type(value).tensor_type().elem_type());
}

int64_t OnnxBuilder::rank(const std::string &value) const {
  const ::ONNX_NAMESPACE::TypeProto_Tensor &tensor = type(value).tensor_type();
  if (!tensor.has_shape())
    fail("the rank of " + value + " is unknown after ONNX shape inference");
  return tensor.shape().dim_size();
}

SmallVector<int64_t> OnnxBuilder::shape(const std::string &value) const {
  int64_t numDims = rank(value);
  SmallVector<int64_t> dims;
  for (int64_t i = 0; i < numDims; ++i) {
    const auto &dim = type(value).tensor_type().shape().dim(i);
    dims.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
  }
  return dims;
}

std::optional<SmallVector<int64_t>>
OnnxBuilder::staticShape(const std::string &value) const {
  SmallVector<int64_t> dims = shape(value);
  if (llvm::is_contained(dims, -1))
    return std::nullopt;
  return dims;
}
