//===- TorchScriptImporter.cpp - TorchScript to the onnx dialect ---------===//
//
// Loads a TorchScript archive with libtorch, inlines `forward`, makes in-place
// ops functional, translates the graph into an ONNX model (GraphTranslator)
// and finishes through the ONNX importer, so that both imports of a model
// share ONNX shape inference, weight handling and the onnx dialect image.
//
//===----------------------------------------------------------------------===//

#include "GraphTranslator.h"

#include "../Onnx/OnnxImporter.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"
#include "moe/Import/Import.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Path.h"

#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/serialization/import.h>

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::torchscript;

namespace {
/// Lets libtorch read the archive straight from the buffer.
class BufferReadAdapter final : public caffe2::serialize::ReadAdapterInterface {
public:
  explicit BufferReadAdapter(llvm::MemoryBufferRef buffer) : buffer(buffer) {}

  size_t size() const override { return buffer.getBufferSize(); }

  size_t read(uint64_t pos, void *buf, size_t n,
              const char * /*what*/) const override {
    if (pos >= size())
      return 0;
    n = std::min<size_t>(n, size() - pos);
    std::memcpy(buf, buffer.getBufferStart() + pos, n);
    return n;
  }

private:
  llvm::MemoryBufferRef buffer;
};
} // namespace

/// The message of a libtorch or ONNX exception, without libtorch's C++
/// backtrace, and with bytes that a corrupted archive put into it escaped.
static std::string messageOf(const std::exception &error) {
  const auto *torchError = dynamic_cast<const c10::Error *>(&error);
  StringRef message =
      StringRef(torchError ? torchError->what_without_backtrace()
                           : error.what())
          .trim();
  std::string printable;
  for (unsigned char c : message) {
    if (llvm::isPrint(c) || c == '\n') {
      printable += c;
      continue;
    }
    printable += "\\x";
    printable += llvm::hexdigit(c >> 4, /*LowerCase=*/true);
    printable += llvm::hexdigit(c & 15, /*LowerCase=*/true);
  }
  return printable;
}

/// The element type of the module's floating-point parameters when they
/// all share one (a bf16 or f16 checkpoint); float32 otherwise.
static at::ScalarType parameterFloatType(const torch::jit::Module &module) {
  std::optional<at::ScalarType> found;
  for (const at::Tensor &parameter : module.parameters()) {
    if (!at::isFloatingType(parameter.scalar_type()))
      continue;
    if (found && *found != parameter.scalar_type())
      return at::kFloat;
    found = parameter.scalar_type();
  }
  return found.value_or(at::kFloat);
}

/// Adds forward's tensor arguments as graph inputs with their
/// --input-shape shapes, which TorchScript archives do not record. Nor do
/// they record element types: an input of unrecorded type takes the type of
/// the module's floating-point parameters, so that a bf16 checkpoint takes
/// bf16 activations as it does in PyTorch.
static LogicalResult addInputs(const torch::jit::Module &module,
                               const torch::jit::Method &forward,
                               torch::jit::Graph &graph, Location loc,
                               const ImportOptions &options,
                               GraphTranslator &translator) {
  const std::vector<c10::Argument> &arguments =
      forward.function().getSchema().arguments();
  llvm::StringSet<> names;
  SmallVector<std::string> missing;
  // Argument 0 is the module itself.
  for (size_t i = 1, e = arguments.size(); i < e; ++i) {
    const std::string &name = arguments[i].name();
    torch::jit::Value *input = graph.inputs()[i];
    names.insert(name);
    auto tensorType = input->type()->cast<c10::TensorType>();
    if (!tensorType)
      return emitError(loc) << "forward's input '" << name << "' has type "
                            << input->type()->repr_str()
                            << "; only tensor inputs can be imported";
    auto shape = options.inputShapes.find(name);
    if (shape == options.inputShapes.end()) {
      missing.push_back(name);
      continue;
    }
    translator.onnx.addInput(
        name, tensorType->scalarType().value_or(parameterFloatType(module)),
        shape->second);
    translator.setTensor(input, name);
  }
  if (!missing.empty()) {
    InFlightDiagnostic diag = emitError(loc)
                              << "TorchScript archives do not record input "
                                 "shapes; give each input one with ";
    llvm::interleaveComma(missing, diag, [&](const std::string &name) {
      diag << "--input-shape " << name << "=D0xD1x...";
    });
    return diag;
  }
  for (const auto &entry : options.inputShapes)
    if (!names.contains(entry.getKey()))
      return emitError(loc) << "--input-shape names '" << entry.getKey()
                            << "', which is not an input of forward";
  return success();
}

/// Replaces in-place ops by their functional forms where nothing else sees
/// the mutation: the mutated tensor is no graph input, and no value that may
/// alias it and was defined before the op is used after it. (torch's
/// RemoveTensorMutation also insists on moving the tensor's creation next to
/// the mutation, which traced code such as `w /= w.sum()` does not allow.)
/// What is left is reported when translated.
static void
makeInPlaceOpsFunctional(const std::shared_ptr<torch::jit::Graph> &graph) {
  std::vector<torch::jit::Node *> inPlaceOps;
  for (torch::jit::Node *node : graph->nodes()) {
    const c10::FunctionSchema *schema = node->maybeSchema();
    if (schema && schema->is_mutable() && node->kind().is_aten() &&
        StringRef(schema->name()).ends_with("_") &&
        node->outputs().size() == 1 && !node->inputs().empty())
      inPlaceOps.push_back(node);
  }
  for (torch::jit::Node *node : inPlaceOps) {
    torch::jit::Value *mutated = node->input(0);
    if (mutated->node()->kind() == c10::prim::Param)
      continue;
    // The alias analysis is redone for each op: the rewrites change it.
    torch::jit::AliasDb aliasDb(graph);
    torch::jit::ValueSet others(node->inputs().begin() + 1,
                                node->inputs().end());
    if (aliasDb.writesToAlias(node, others))
      continue;
    bool observed = false;
    for (torch::jit::Node *later = node->next(); !observed;
         later = later->next()) {
      for (torch::jit::Value *input : later->inputs())
        observed |= input != mutated && input->node()->isBefore(node) &&
                    aliasDb.mayContainAlias(input, mutated);
      if (later == graph->return_node())
        break;
    }
    if (observed)
      continue;
    std::string name = node->kind().toQualString();
    name.pop_back();
    torch::jit::Node *functional = graph->create(
        c10::Symbol::fromQualString(name), node->inputs(), /*num_outputs=*/1);
    functional->insertBefore(node);
    functional->setSourceRange(node->sourceRange());
    functional->output()->setType(node->output()->type());
    if (!functional->maybeOperator()) {
      functional->destroy();
      continue;
    }
    mutated->replaceAllUsesAfterNodeWith(node, functional->output());
    node->output()->replaceAllUsesWith(functional->output());
    node->destroy();
  }
}

/// Appends the ONNX tensors of a (possibly nested) output to `results`.
static void flattenOutput(GraphTranslator &translator, const Operand &output,
                          SmallVectorImpl<std::string> &results) {
  if (output.kind == Operand::Kind::List) {
    for (const Operand &element : output.elements)
      flattenOutput(translator, element, results);
    return;
  }
  if (output.isKnown() && (output.value.isList() || output.value.isTuple())) {
    std::vector<c10::IValue> elements =
        output.value.isList() ? output.value.toListRef().vec()
                              : output.value.toTupleRef().elements().vec();
    for (c10::IValue &element : elements)
      flattenOutput(translator, Operand::known(std::move(element), output.path),
                    results);
    return;
  }
  results.push_back(translator.tensor(output));
}

/// Translates `forward` of the archive in `buffer` into `model`.
static LogicalResult translateArchive(llvm::MemoryBufferRef buffer,
                                      Location loc,
                                      const ImportOptions &options,
                                      ::ONNX_NAMESPACE::ModelProto &model) {
  torch::jit::Module module;
  try {
    module = torch::jit::load(std::make_shared<BufferReadAdapter>(buffer),
                              c10::Device(c10::kCPU));
  } catch (const std::exception &error) {
    return emitError(loc) << "not a valid TorchScript archive: "
                          << messageOf(error);
  }
  c10::optional<torch::jit::Method> forward = module.find_method("forward");
  if (!forward)
    return emitError(loc) << "the TorchScript module has no forward method";

  std::shared_ptr<torch::jit::Graph> graph = forward->graph()->copy();
  torch::jit::Inline(*graph);
  makeInPlaceOpsFunctional(graph);
  torch::jit::EliminateDeadCode(graph);

  model.set_ir_version(::ONNX_NAMESPACE::IR_VERSION);
  model.set_producer_name("moe-translate --import-torchscript");
  ::ONNX_NAMESPACE::OperatorSetIdProto *opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOnnxOpset);
  ::ONNX_NAMESPACE::GraphProto &onnxGraph = *model.mutable_graph();
  onnxGraph.set_name("main_graph");

  OnnxBuilder builder(onnxGraph);
  GraphTranslator translator(builder);
  translator.set(graph->inputs()[0],
                 Operand::known(module._ivalue(), /*path=*/""));
  if (failed(addInputs(module, *forward, *graph, loc, options, translator)))
    return failure();

  for (torch::jit::Node *node : graph->nodes()) {
    try {
      translator.translate(node);
    } catch (const std::exception &error) {
      std::string where = sourceLocation(node);
      return emitError(loc) << "cannot import " << node->kind().toQualString()
                            << (where.empty() ? "" : " at " + where) << ": "
                            << messageOf(error);
    }
  }

  SmallVector<std::string> results;
  for (torch::jit::Value *output : graph->outputs())
    flattenOutput(translator, translator.operand(output), results);
  for (auto [i, result] : llvm::enumerate(results))
    builder.addOutput(result, results.size() == 1
                                  ? std::string("output")
                                  : "output_" + std::to_string(i));
  return success();
}

OwningOpRef<ModuleOp> moe::importTorchScript(llvm::MemoryBufferRef buffer,
                                             MLIRContext *context,
                                             const ImportOptions &options) {
  StringRef source = buffer.getBufferIdentifier();
  Location loc = FileLineColLoc::get(context, source, 0, 0);
  // LLVM is built without exceptions: nothing that libtorch or ONNX throws
  // may leave this function.
  try {
    ::ONNX_NAMESPACE::ModelProto model;
    if (failed(translateArchive(buffer, loc, options, model)))
      return {};
    return importOnnxModel(std::move(model), source,
                           llvm::sys::path::parent_path(source), context,
                           options);
  } catch (const std::exception &error) {
    emitError(loc) << "cannot import the TorchScript archive: "
                   << messageOf(error);
  } catch (...) {
    emitError(loc) << "cannot import the TorchScript archive: unknown error";
  }
  return {};
}
