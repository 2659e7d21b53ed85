//===- OnnxImporter.cpp - ONNX models to the onnx dialect -----------------===//
//
// The import runs in stages, each stopping at its first error:
//   1. parse the protobuf (ModelReader.h: importOnnxFile gives back the
//      file's pages as its tensors are parsed);
//   2. check the opsets, every node against the onnx dialect and ONNX's
//      schemas, and that values are defined before use -- before shape
//      inference, so that an unsupported operator is reported as such, and
//      because ONNX's inference functions trust the graph to be well formed;
//   3. apply --input-shape, then run ONNX's strict shape inference with data
//      propagation, which gives every value a type;
//   4. build @main_graph (GraphImporter).
// The ONNX library reports errors by throwing (LLVM is built without
// exceptions): the throwing calls are wrapped here and their messages
// become diagnostics naming the node.
//
//===----------------------------------------------------------------------===//

#include "OnnxImporter.h"
#include "GraphImporter.h"
#include "ModelReader.h"
#include "FunctionOps.h"
#include "IfNodes.h"
#include "OrtContrib.h"
#include "dialects/Common/BufferBounds.h"
#include "dialects/moe/IR/MoEDialect.h"
#include "dialects/onnx/IR/ONNXDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"

#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <sys/mman.h>

#include <algorithm>
#include <climits>
#include <optional>
#include <map>

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::onnx_import;
using ::ONNX_NAMESPACE::AttributeProto;
using ::ONNX_NAMESPACE::GraphProto;
using ::ONNX_NAMESPACE::ModelProto;
using ::ONNX_NAMESPACE::NodeProto;

/// The oldest default-domain opset the importer supports; the newest is the
/// newest that the linked ONNX library defines (GraphImporter gives each
/// versioned operator one form).
static constexpr int64_t kMinOpset = 13;

static int64_t getMaxOpset() {
  const auto &ranges =
      ::ONNX_NAMESPACE::OpSchemaRegistry::DomainToVersionRange::Instance()
          .Map();
  auto range = ranges.find(::ONNX_NAMESPACE::ONNX_DOMAIN);
  return range == ranges.end() ? kMinOpset : range->second.second;
}

/// The oldest IR version the importer reads: 3, ONNX 1.0's, the first with
/// opset imports. The newest is the linked ONNX library's: a newer file may
/// use fields this library does not know, which protobuf would drop.
static constexpr int64_t kMinIrVersion = 3;

static LogicalResult checkIrVersion(const ModelProto &model, Location fileLoc) {
  int64_t version = model.ir_version();
  int64_t newest = ::ONNX_NAMESPACE::IR_VERSION;
  if (version >= kMinIrVersion && version <= newest)
    return success();
  return emitError(fileLoc) << "ir_version " << version
                            << " is not supported (" << kMinIrVersion << " to "
                            << newest << ")";
}

/// Opset version by domain, the default domain as "".
using OpsetVersions = llvm::StringMap<int64_t>;

static std::string describeDomain(StringRef domain) {
  return domain.empty() ? "the default domain"
                        : ("domain '" + domain + "'").str();
}

static FailureOr<OpsetVersions> getOpsets(const ModelProto &model,
                                          Location fileLoc) {
  OpsetVersions opsets;
  for (const ::ONNX_NAMESPACE::OperatorSetIdProto &opset : model.opset_import()) {
    StringRef domain = getCanonicalDomain(opset.domain());
    int64_t version = opset.version();
    int64_t maxOpset = getMaxOpset();
    if (domain.empty() && (version < kMinOpset || version > maxOpset))
      return emitError(fileLoc)
             << "opset " << version << " of the default domain is not "
             << "supported (" << kMinOpset << " to " << maxOpset << ")";
    if (domain == kMicrosoftDomain && version != 1)
      return emitError(fileLoc) << "opset " << version << " of domain '"
                                << domain << "' is not supported (1)";
    // Other domains are reported by the nodes that use them.
    opsets[domain] = version;
  }
  return opsets;
}

/// Checks that `node` is an operator the importer supports, in an imported
/// opset, with attributes its ONNX schema defines. With `functions`, an
/// operator the dialect lacks passes when ONNX defines it as a function
/// (expandFunctionOps replaces it by its body, which is checked in turn).
static LogicalResult checkNode(const NodeProto &node,
                               const OpsetVersions &opsets, Location fileLoc,
                               bool functions = false) {
  StringRef domain = getCanonicalDomain(node.domain());
  const std::string &opType = node.op_type();
  if (domain == kMicrosoftDomain) {
    if (opType == "QMoE")
      return emitNodeError(node, fileLoc) << "quantized MoE is not supported";
    if (opType != "MoE")
      return emitNodeError(node, fileLoc) << "unsupported operator";
  } else if (!domain.empty()) {
    return emitNodeError(node, fileLoc)
           << "operator domain '" << domain << "' is not supported";
  } else {
    std::string name = "onnx." + opType;
    auto opset = opsets.find(domain);
    const ::ONNX_NAMESPACE::OpSchema *schema =
        opset == opsets.end()
            ? nullptr
            : ::ONNX_NAMESPACE::OpSchemaRegistry::Schema(opType, opset->second,
                                                      "");
    bool function = functions && schema &&
                    (schema->HasFunction() ||
                     schema->HasContextDependentFunction());
    // Dropout is imported in its inference form (GraphImporter).
    if (name == moe::onnx::NoneOp::getOperationName() ||
        (!function && opType != "Dropout" &&
         !RegisteredOperationName::lookup(name, fileLoc.getContext())))
      return emitNodeError(node, fileLoc)
             << "unsupported ONNX operator '" << opType << "'"
             << (schema ? " (a standard operator the compiler does not "
                          "implement)"
                        : "");
  }

  auto opset = opsets.find(domain);
  if (opset == opsets.end())
    return emitNodeError(node, fileLoc)
           << "the model imports no opset of " << describeDomain(domain);
  const ::ONNX_NAMESPACE::OpSchema *schema =
      ::ONNX_NAMESPACE::OpSchemaRegistry::Schema(opType, opset->second, domain.str());
  if (!schema)
    return emitNodeError(node, fileLoc)
           << "the operator is not in opset " << opset->second << " of "
           << describeDomain(domain);
  for (const AttributeProto &attr : node.attribute()) {
    auto known = schema->attributes().find(attr.name());
    if (known == schema->attributes().end())
      return emitNodeError(node, fileLoc)
             << "unsupported attribute '" << attr.name() << "'";
    if (attr.type() != known->second.type)
      return emitNodeError(node, fileLoc)
             << "attribute '" << attr.name() << "' is "
             << AttributeProto::AttributeType_Name(attr.type()) << ", expected "
             << AttributeProto::AttributeType_Name(known->second.type);
  }
  // Input and output counts and required attributes, which ONNX's shape
  // inference functions take for granted.
  try {
    schema->Verify(node);
    return success();
  } catch (const std::exception &e) {
    // ONNX's messages start "Node (<name>) ", "Node (<name>)'s " or
    // "Node(<name>) with schema(<domain>::<op>:<version>) ".
    StringRef message = StringRef(e.what()).split('\n').first;
    std::string prefix = "Node (" + node.name() + ")";
    std::string newPrefix = "Node(" + node.name() + ")";
    if (message.consume_front(prefix) && !message.consume_front("'s ")) {
      message = message.ltrim();
    } else if (message.consume_front(newPrefix)) {
      if (message.consume_front(" with schema("))
        message = message.split(") ").second;
      message = message.ltrim();
    }
    return emitNodeError(node, fileLoc) << message;
  }
}

/// Checks that every value is defined once, before its uses (ONNX's shape
/// inference dereferences the types of undefined inputs).
static LogicalResult checkValues(const GraphProto &graph, Location fileLoc) {
  llvm::StringSet<> defined;
  for (const ::ONNX_NAMESPACE::ValueInfoProto &input : graph.input())
    if (!defined.insert(input.name()).second)
      return emitError(fileLoc)
             << "graph input '" << input.name() << "' is listed twice";
  // An initializer may share a graph input's name (its default value).
  llvm::StringSet<> initialized;
  for (const ::ONNX_NAMESPACE::TensorProto &tensor : graph.initializer()) {
    if (!initialized.insert(tensor.name()).second)
      return emitError(fileLoc)
             << "initializer '" << tensor.name() << "' is defined twice";
    defined.insert(tensor.name());
  }
  for (const NodeProto &node : graph.node()) {
    for (const std::string &input : node.input())
      if (!input.empty() && !defined.contains(input))
        return emitNodeError(node, fileLoc)
               << "input '" << input << "' is not defined before the node";
    for (const std::string &output : node.output())
      if (!output.empty() && !defined.insert(output).second)
        return emitNodeError(node, fileLoc)
               << "output '" << output << "' is already defined";
  }
  for (const ::ONNX_NAMESPACE::ValueInfoProto &output : graph.output())
    if (!defined.contains(output.name()))
      return emitError(fileLoc)
             << "graph output '" << output.name() << "' is not defined";
  return success();
}

/// Gives the graph inputs named in `options` their static shapes. A shape
/// fills the model's dynamic dimensions; it must have the declared rank and
/// keep every static dimension the model declares (the graph relies on
/// them: another value would import IR that contradicts itself).
static LogicalResult applyInputShapes(GraphProto &graph,
                                      const ImportOptions &options,
                                      Location fileLoc) {
  SmallVector<StringRef> inputNames;
  for (const ::ONNX_NAMESPACE::ValueInfoProto *input : getArgumentInputs(graph))
    inputNames.push_back(input->name());
  // Sorted, so that the first bad name reported does not depend on hashing.
  SmallVector<const llvm::StringMapEntry<SmallVector<int64_t>> *> shapes;
  for (const auto &entry : options.inputShapes)
    shapes.push_back(&entry);
  llvm::sort(shapes, [](const auto *a, const auto *b) {
    return a->getKey() < b->getKey();
  });

  for (const auto *entry : shapes) {
    StringRef name = entry->getKey();
    ArrayRef<int64_t> dims = entry->getValue();
    if (!llvm::is_contained(inputNames, name))
      return emitError(fileLoc)
             << "--input-shape: the model has no input '" << name
             << "' (its inputs: " << llvm::join(inputNames, ", ") << ")";
    auto input = llvm::find_if(*graph.mutable_input(), [&](const auto &info) {
      return info.name() == name;
    });
    if (!input->type().has_tensor_type())
      return emitError(fileLoc)
             << "--input-shape: input '" << name << "' is not a tensor";
    ::ONNX_NAMESPACE::TypeProto::Tensor &tensor =
        *input->mutable_type()->mutable_tensor_type();
    if (tensor.has_shape() &&
        tensor.shape().dim_size() != static_cast<int>(dims.size()))
      return emitError(fileLoc)
             << "--input-shape: input '" << name << "' has rank "
             << tensor.shape().dim_size() << ", but the shape given has rank "
             << dims.size();
    if (tensor.has_shape()) {
      for (auto [i, dim] : llvm::enumerate(tensor.shape().dim()))
        if (dim.has_dim_value() && dim.dim_value() != dims[i])
          return emitError(fileLoc)
                 << "--input-shape: input '" << name << "' declares dim " << i
                 << " as " << dim.dim_value() << ", but the shape given has "
                 << dims[i] << " (only dynamic dims can be set)";
    }
    ::ONNX_NAMESPACE::TensorShapeProto &shape = *tensor.mutable_shape();
    shape.clear_dim();
    for (int64_t dim : dims)
      shape.add_dim()->set_dim_value(dim);
  }
  return success();
}

/// Checks that the static dims of every graph input (as declared, or as
/// --input-shape gave them) are positive and count at most the elements one
/// buffer may hold, before shape inference multiplies them.
static LogicalResult checkInputSizes(const GraphProto &graph,
                                     Location fileLoc) {
  for (const ::ONNX_NAMESPACE::ValueInfoProto *input : getArgumentInputs(graph)) {
    if (!input->type().has_tensor_type() ||
        !input->type().tensor_type().has_shape())
      continue;
    int64_t count = 1;
    bool tooLarge = false;
    for (auto [i, dim] :
         llvm::enumerate(input->type().tensor_type().shape().dim()))
      if (dim.has_dim_value() && dim.dim_value() <= 0)
        return emitError(fileLoc)
               << "input '" << input->name() << "' declares dim " << i
               << " as " << dim.dim_value()
               << ": empty or negative dimensions are not supported";
    for (const auto &dim : input->type().tensor_type().shape().dim())
      if (dim.has_dim_value())
        tooLarge = tooLarge ||
                   llvm::MulOverflow(count, int64_t(dim.dim_value()), count) ||
                   count > kMaxBufferBytes;
    if (tooLarge) {
      InFlightDiagnostic diag = emitError(fileLoc)
                                << "input '" << input->name() << "' of shape [";
      llvm::interleaveComma(input->type().tensor_type().shape().dim(), diag,
                            [&](const auto &dim) {
                              if (dim.has_dim_value())
                                diag << dim.dim_value();
                              else
                                diag << "?";
                            });
      return diag << "] has more elements than one buffer may hold (2^40 "
                     "bytes)";
    }
  }
  return success();
}

/// Strips a leading "[ShapeInferenceError] "-style tag.
static StringRef stripErrorTag(StringRef text) {
  size_t end = text.find("] ");
  if (text.starts_with("[") && end != StringRef::npos &&
      text.take_front(end).ends_with("Error"))
    return text.drop_front(end + 2);
  return text;
}

/// Reports an exception from ONNX's shape inference. Node failures read
/// "[ShapeInferenceError] (op_type:Add, node name: n): [ShapeInferenceError]
/// message", several after "Shape inference error(s): ", one per line; the
/// first becomes an error of its node.
static LogicalResult reportInferenceError(const GraphProto &graph,
                                          StringRef message, Location fileLoc) {
  StringRef text = stripErrorTag(message.split('\n').first);
  // ONNX 1.12 writes "Shape inference error(s): ", later ones
  // "Inference error(s): ".
  if (!text.consume_front("Shape inference error(s): "))
    text.consume_front("Inference error(s): ");
  if (text.consume_front("(op_type:")) {
    auto [header, detail] = text.split("): ");
    StringRef nodeName = header.split(", node name: ").second;
    for (const NodeProto &node : graph.node())
      if (node.name() == nodeName)
        return emitNodeError(node, fileLoc)
               << "shape inference failed: " << stripErrorTag(detail);
  }
  return emitError(fileLoc)
         << "ONNX shape inference failed: " << stripErrorTag(message.trim());
}

/// The most elements a tensor whose values shape inference follows may
/// have: shapes and indices into them, never data.
static constexpr int64_t kMaxPropagatedElements = 1024;

/// Whether data propagation may follow the values of a tensor of `type`:
/// typed, and small (Shape and Size read only their input's type). ONNX turns each value into a dimension proto; a
/// mutated or hostile model would have it do so for billions.
static bool isPropagatable(const ::ONNX_NAMESPACE::TypeProto *type) {
  if (!type || !type->has_tensor_type())
    return false;
  if (!type->tensor_type().has_shape())
    return true;
  int64_t elements = 1;
  for (const auto &dim : type->tensor_type().shape().dim()) {
    if (!dim.has_dim_value())
      return false;
    if (dim.dim_value() < 0 ||
        llvm::MulOverflow(elements, dim.dim_value(), elements) ||
        elements > kMaxPropagatedElements)
      return false;
  }
  return true;
}

/// Integer attributes that ONNX's inference functions use as indices without
/// checking the lower bound the operator's specification sets.
struct AttributeBound {
  const char *op;
  const char *attribute;
  int64_t min;
};
static constexpr AttributeBound kAttributeBounds[] = {
    // GatherND's inference reads data.shape[indices.shape[-1] + batch_dims].
    {"GatherND", "batch_dims", 0},
};

/// Throws ONNX's inference error where a node breaks what its inference
/// function takes for granted: a negative dimension among its input shapes
/// (from a hostile value_info) or an attribute below its bound.
static void checkInferenceInputs(const std::string &op,
                                 ::ONNX_NAMESPACE::InferenceContext &ctx) {
  for (size_t i = 0, e = ctx.getNumInputs(); i < e; ++i) {
    const ::ONNX_NAMESPACE::TypeProto *type = ctx.getInputType(i);
    if (!type || !type->has_tensor_type() || !type->tensor_type().has_shape())
      continue;
    for (const auto &dim : type->tensor_type().shape().dim())
      if (dim.has_dim_value() && dim.dim_value() < 0)
        fail_shape_inference("input ", i, " has the negative dimension ",
                             dim.dim_value());
  }
  for (const AttributeBound &bound : kAttributeBounds) {
    if (op != bound.op)
      continue;
    const ::ONNX_NAMESPACE::AttributeProto *attr =
        ctx.getAttribute(bound.attribute);
    if (attr && attr->i() < bound.min)
      fail_shape_inference("attribute ", bound.attribute, " is ", attr->i(),
                           ", below ", bound.min);
  }
}

namespace {
/// ONNX's schemas, each inference function behind checkInferenceInputs, and
/// data propagation skipped for nodes that have an input without a type
/// (ONNX 1.12's strict mode carries on after a node fails, and propagators
/// such as Shape's then dereference the missing input type) or one too
/// large to be a shape.
class GuardedSchemaRegistry : public ::ONNX_NAMESPACE::ISchemaRegistry {
public:
  const ::ONNX_NAMESPACE::OpSchema *GetSchema(const std::string &key,
                                    const int maxInclusiveVersion,
                                    const std::string &domain) const override {
    const ::ONNX_NAMESPACE::OpSchema *schema =
        ::ONNX_NAMESPACE::OpSchemaRegistry::Schema(key, maxInclusiveVersion, domain);
    if (!schema)
      return schema;
    auto [guarded, inserted] = schemas.try_emplace(schema, *schema);
    if (!inserted)
      return &guarded->second;
    if (schema->has_type_and_shape_inference_function())
      guarded->second.TypeAndShapeInferenceFunction(
          [infer = schema->GetTypeAndShapeInferenceFunction(),
           op = schema->Name()](::ONNX_NAMESPACE::InferenceContext &ctx) {
            checkInferenceInputs(op, ctx);
            infer(ctx);
          });
    if (schema->has_data_propagation_function())
      guarded->second.PartialDataPropagationFunction(
          [propagate = schema->GetDataPropagationFunction(),
           readsTypesOnly = schema->Name() == "Shape" ||
                            schema->Name() == "Size"](
              ::ONNX_NAMESPACE::DataPropagationContext &ctx) {
            for (size_t i = 0, e = ctx.getNumInputs(); i < e; ++i)
              if (readsTypesOnly ? !ctx.getInputType(i)
                                 : !isPropagatable(ctx.getInputType(i)))
                return;
            propagate(ctx);
          });
    return &guarded->second;
  }

private:
  mutable std::map<const ::ONNX_NAMESPACE::OpSchema *, ::ONNX_NAMESPACE::OpSchema> schemas;
};
} // namespace

/// Forgets the dims that the exporter's value_info gives the values
/// downstream of a data-dependent shape (NonZero's rows, and what is
/// computed from them): a tracing exporter writes the sizes its sample input
/// had, which another input does not have. Shape inference then derives
/// what the graph determines; the graph's outputs keep their declared types.
static void forgetTracedShapes(GraphProto &graph) {
  llvm::StringSet<> dependent;
  for (const NodeProto &node : graph.node()) {
    bool sized = (node.domain().empty() || node.domain() == "ai.onnx") &&
                 (node.op_type() == "NonZero" || node.op_type() == "Unique" ||
                  node.op_type() == "Compress" ||
                  node.op_type() == "NonMaxSuppression");
    bool reads = llvm::any_of(node.input(), [&](const std::string &input) {
      return !input.empty() && dependent.contains(input);
    });
    if (sized || reads)
      for (const std::string &output : node.output())
        if (!output.empty())
          dependent.insert(output);
  }
  for (::ONNX_NAMESPACE::ValueInfoProto &info : *graph.mutable_value_info()) {
    if (!dependent.contains(info.name()) || !info.type().has_tensor_type() ||
        !info.type().tensor_type().has_shape())
      continue;
    for (auto &dim : *info.mutable_type()
                          ->mutable_tensor_type()
                          ->mutable_shape()
                          ->mutable_dim()) {
      dim.clear_dim_value();
      dim.clear_dim_param();
    }
  }
}

/// Runs ONNX's shape inference in strict mode, with type checks and data
/// propagation (shapes computed by Shape/Gather/Concat... are followed).
static LogicalResult inferShapes(ModelProto &model, Location fileLoc) {
  try {
    ::ONNX_NAMESPACE::ShapeInferenceOptions options(/*check_type_val=*/true,
                                          /*strict_mode_val=*/1,
                                          /*data_prop_val=*/true);
    std::unordered_map<std::string, ::ONNX_NAMESPACE::TensorShapeProto> shapeData;
    GuardedSchemaRegistry schemas;
    ::ONNX_NAMESPACE::shape_inference::InferShapes(model, &schemas, options, &shapeData);
    return success();
  } catch (const std::exception &e) {
    return reportInferenceError(model.graph(), e.what(), fileLoc);
  } catch (...) {
    return emitError(fileLoc) << "ONNX shape inference failed";
  }
}

OwningOpRef<ModuleOp> moe::importOnnxModel(ModelProto &&model,
                                           StringRef sourceName,
                                           StringRef baseDir,
                                           MLIRContext *context,
                                           const ImportOptions &options) {
  context->loadDialect<arith::ArithDialect, func::FuncDialect,
                       tensor::TensorDialect, MoEDialect,
                       moe::onnx::ONNXDialect>();
  Location fileLoc = FileLineColLoc::get(context, sourceName, 0, 0);
  if (failed(checkIrVersion(model, fileLoc)))
    return {};
  if (!model.has_graph()) {
    emitError(fileLoc) << "not a valid ONNX model: it has no graph";
    return {};
  }
  registerMicrosoftSchemas();
  GraphProto &graph = *model.mutable_graph();
  // Unnamed nodes get "<op_type>_<index>", for locations and for ONNX's
  // messages.
  for (auto [index, node] : llvm::enumerate(*graph.mutable_node()))
    if (node.name().empty())
      node.set_name(node.op_type() + "_" + std::to_string(index));

  // ONNX requires one: without it no node has a meaning (checked before
  // the contrib expansion, which writes its nodes in a default opset).
  if (model.opset_import().empty()) {
    emitError(fileLoc) << "the model imports no opset (its opset_import is "
                          "empty): not a valid ONNX model";
    return {};
  }
  if (failed(expandOrtContribOps(model, fileLoc)) ||
      failed(inlineIfNodes(graph, fileLoc)))
    return {};
  FailureOr<OpsetVersions> opsets = getOpsets(model, fileLoc);
  if (failed(opsets))
    return {};
  for (const NodeProto &node : graph.node())
    if (failed(checkNode(node, *opsets, fileLoc, /*functions=*/true)))
      return {};
  if (failed(checkValues(graph, fileLoc)))
    return {};
  if (failed(applyInputShapes(graph, options, fileLoc)) ||
      failed(checkInputSizes(graph, fileLoc)))
    return {};
  // Shape inference (which context-dependent function bodies need) only
  // after the checks: ONNX's inference functions trust what they check.
  if (failed(expandFunctionOps(model, opsets->lookup(""), fileLoc,
                               [&](ModelProto &typed) {
                                 return inferShapes(typed, fileLoc);
                               })))
    return {};
  for (const NodeProto &node : graph.node())
    if (failed(checkNode(node, *opsets, fileLoc)))
      return {};
  if (failed(checkValues(graph, fileLoc)))
    return {};
  forgetTracedShapes(graph);
  if (failed(inferShapes(model, fileLoc)))
    return {};

  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  TensorImporter tensors(context, baseDir);
  GraphImporter importer(*module, fileLoc, tensors, options);
  importer.setOpset(opsets->lookup(""));
  if (failed(importer.importGraph(graph)) || failed(verify(*module)))
    return {};
  return module;
}

OwningOpRef<ModuleOp> moe::importOnnxFile(StringRef path,
                                          MLIRContext *context,
                                          const ImportOptions &options) {
  Location fileLoc = FileLineColLoc::get(context, path, 0, 0);
  llvm::Expected<llvm::sys::fs::file_t> file =
      llvm::sys::fs::openNativeFileForRead(path);
  if (!file) {
    emitError(fileLoc) << "cannot read " << path << ": "
                       << llvm::toString(file.takeError());
    return {};
  }
  llvm::sys::fs::file_status status;
  std::error_code ec = llvm::sys::fs::status(*file, status);
  // Protobuf parses at most 2 GiB.
  if (!ec && status.getSize() > INT_MAX) {
    llvm::sys::fs::closeFile(*file);
    emitError(fileLoc) << "the model is larger than 2 GiB; store its "
                          "weights as external data";
    return {};
  }
  std::optional<llvm::sys::fs::mapped_file_region> mapping;
  if (!ec && status.getSize() > 0)
    mapping.emplace(*file, llvm::sys::fs::mapped_file_region::readonly,
                    status.getSize(), 0, ec);
  llvm::sys::fs::closeFile(*file);
  if (ec) {
    emitError(fileLoc) << "cannot read " << path << ": " << ec.message();
    return {};
  }
  ModelProto model;
  const char *begin = mapping ? mapping->const_data() : nullptr;
  size_t size = mapping ? mapping->size() : 0;
  // The pages of each parsed tensor go back as the reader moves on.
  const char *released = begin;
  size_t page = llvm::sys::Process::getPageSizeEstimate();
  auto consumed = [&](const char *end) {
    const char *upTo = begin + (end - begin) / page * page;
    if (upTo > released)
      ::madvise(const_cast<char *>(released), upTo - released, MADV_DONTNEED);
    released = std::max(released, upTo);
  };
  if (!readModel(begin, size, model, consumed)) {
    emitError(fileLoc)
        << "not a valid ONNX model: the protobuf could not be parsed";
    return {};
  }
  mapping.reset();
  return importOnnxModel(std::move(model), path,
                         llvm::sys::path::parent_path(path), context, options);
}

OwningOpRef<ModuleOp> moe::importOnnx(llvm::MemoryBufferRef buffer,
                                      MLIRContext *context,
                                      const ImportOptions &options) {
  StringRef file = buffer.getBufferIdentifier();
  Location fileLoc = FileLineColLoc::get(context, file, 0, 0);
  // Protobuf parses at most 2 GiB.
  if (buffer.getBufferSize() > INT_MAX) {
    emitError(fileLoc) << "the model is larger than 2 GiB; store its "
                          "weights as external data";
    return {};
  }
  ModelProto model;
  if (!readModel(buffer.getBufferStart(), buffer.getBufferSize(), model,
                 [](const char *) {})) {
    emitError(fileLoc)
        << "not a valid ONNX model: the protobuf could not be parsed";
    return {};
  }
  return importOnnxModel(std::move(model), file,
                         llvm::sys::path::parent_path(file), context, options);
}
