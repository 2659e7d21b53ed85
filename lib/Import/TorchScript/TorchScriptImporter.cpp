//===- TorchScriptImporter.cpp - TorchScript to the onnx dialect ---------===//
//
// Loads a TorchScript archive with libtorch, inlines `forward`, makes in-place
// ops functional, translates the graph into an ONNX model (GraphTranslator)
// and finishes through the ONNX importer, so that both imports of a model
// share ONNX shape inference, weight handling and the onnx dialect image.
//
// libtorch's loader trusts the archive: some malformed zips make it read
// uninitialised memory and fault. The loading and translation therefore run
// in a child process that sends back the ONNX model or its errors; a child
// that dies is one error naming the archive.
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

#include <csignal>
#include <new>
#include <fcntl.h>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <c10/util/Logging.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/library.h>

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
  if (dynamic_cast<const std::bad_alloc *>(&error))
    return "loading it takes more memory than an archive of its size can "
           "hold (a length field that claims more than there is?)";
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

//===----------------------------------------------------------------------===//
// Functionalization
//===----------------------------------------------------------------------===//

using JitBlock = torch::jit::Block;
namespace aten = c10::aten;

/// Whether `node` is an in-place aten op: `aten::foo_(Tensor(a!) self, ...)
/// -> Tensor(a!)`.
static bool isInPlaceOp(torch::jit::Node *node) {
  StringRef name = node->kind().toUnqualString();
  if (!node->kind().is_aten() || !name.ends_with("_") ||
      name.ends_with("__") || node->outputs().size() != 1 ||
      node->inputs().empty())
    return false;
  const c10::FunctionSchema *schema = node->maybeSchema();
  if (!schema || schema->arguments().empty())
    return false;
  const c10::AliasInfo *alias = schema->arguments()[0].alias_info();
  return alias && alias->isWrite();
}

/// The ancestor of `node` (itself or a node whose blocks hold it) in
/// `block`, or null.
static torch::jit::Node *ancestorIn(torch::jit::Node *node, JitBlock *block) {
  while (node && node->owningBlock() != block)
    node = node->owningBlock()->owningNode();
  return node;
}

/// Replaces the uses of `value` that follow `after` in its block (and in
/// the blocks of later nodes) by `with`.
static void replaceUsesAfter(torch::jit::Value *value, torch::jit::Node *after,
                             torch::jit::Value *with) {
  JitBlock *block = after->owningBlock();
  std::vector<torch::jit::Use> uses = value->uses();
  for (const torch::jit::Use &use : uses) {
    torch::jit::Node *user = ancestorIn(use.user, block);
    if (!user || user == after)
      continue;
    if (user == block->return_node() || after->isBefore(user))
      use.user->replaceInput(use.offset, with);
  }
}

/// An int list argument that is a constant or a list of constants.
static std::optional<std::vector<int64_t>>
constantIntList(torch::jit::Value *value) {
  if (c10::optional<c10::IValue> known = torch::jit::toIValue(value))
    if (known->isIntList())
      return known->toIntVector();
  if (value->node()->kind() != c10::prim::ListConstruct)
    return std::nullopt;
  std::vector<int64_t> ints;
  for (torch::jit::Value *element : value->node()->inputs()) {
    c10::optional<c10::IValue> known = torch::jit::toIValue(element);
    if (!known || !known->isInt())
      return std::nullopt;
    ints.push_back(known->toInt());
  }
  return ints;
}

namespace {
/// Rewrites `aten::foo_(self, ...)` into `aten::foo(self, ...)` and rebinds
/// what the mutation changes: `self`, and when `self` is a view, each tensor
/// it is a view of (written back with select_scatter, slice_scatter,
/// reshape, transpose or permute) and the other views of them, recomputed
/// from the new values. Later uses, in the mutation's block and the blocks
/// nested in it, see the new values. A mutation of a tensor defined outside
/// the mutation's block (in an If or Loop body) is left to the translator,
/// which inlines those blocks; a write through a view that has no inverse
/// here fails, naming the op and its source.
class Functionalizer {
public:
  explicit Functionalizer(torch::jit::Graph &graph) : graph(graph) {}

  void run() {
    std::vector<torch::jit::Node *> inPlaceOps;
    collect(graph.block(), inPlaceOps);
    for (torch::jit::Node *node : inPlaceOps)
      rewrite(node);
  }

private:
  static void collect(JitBlock *block, std::vector<torch::jit::Node *> &ops) {
    for (torch::jit::Node *node : block->nodes()) {
      for (JitBlock *inner : node->blocks())
        collect(inner, ops);
      if (isInPlaceOp(node))
        ops.push_back(node);
    }
  }

  [[noreturn]] static void failAt(torch::jit::Node *node,
                                  const Twine &message) {
    std::string where = sourceLocation(node);
    fail("cannot make " + Twine(node->kind().toQualString()) +
         (where.empty() ? "" : " at " + where) + " functional: " + message);
  }

  /// A node that computes the value of `view` over `parent` (a clone of
  /// `view`'s node with input 0 replaced), inserted at the insertion point.
  torch::jit::Value *replay(torch::jit::Node *view, torch::jit::Value *parent) {
    torch::jit::Node *clone = graph.createClone(
        view, [&](torch::jit::Value *v) { return v; });
    clone->replaceInput(0, parent);
    graph.insertNode(clone);
    clone->output()->setType(view->output()->type());
    return clone->output();
  }

  torch::jit::Value *insert(c10::Symbol kind,
                            ArrayRef<torch::jit::Value *> inputs,
                            torch::jit::Node *like) {
    torch::jit::Node *node = graph.create(
        kind, at::ArrayRef<torch::jit::Value *>(inputs.data(), inputs.size()),
        1);
    graph.insertNode(node);
    node->setSourceRange(like->sourceRange());
    node->output()->setType(like->output()->type());
    return node->output();
  }

  /// The new value of `view`'s input once its result is `updated`.
  torch::jit::Value *writeBack(torch::jit::Node *mutation,
                               torch::jit::Node *view,
                               torch::jit::Value *updated) {
    torch::jit::Value *parent = view->input(0);
    c10::Symbol kind = view->kind();
    auto parentLike = [&](torch::jit::Value *v) {
      v->setType(parent->type());
      return v;
    };
    if (kind == aten::select && view->inputs().size() == 3)
      return parentLike(insert(aten::select_scatter,
                               {parent, updated, view->input(1),
                                view->input(2)},
                               view));
    if (kind == aten::slice && view->inputs().size() == 5)
      return parentLike(insert(aten::slice_scatter,
                               {parent, updated, view->input(1),
                                view->input(2), view->input(3),
                                view->input(4)},
                               view));
    if (kind == aten::view || kind == aten::reshape || kind == aten::view_as ||
        kind == aten::reshape_as || kind == aten::unsqueeze ||
        kind == aten::squeeze || kind == aten::flatten)
      return parentLike(insert(aten::reshape_as, {updated, parent}, view));
    if (kind == aten::transpose || kind == aten::t || kind == aten::numpy_T)
      return parentLike(replay(view, updated));
    if (kind == aten::alias || kind == aten::detach)
      return updated;
    if (kind == aten::permute) {
      if (std::optional<std::vector<int64_t>> perm =
              constantIntList(view->input(1))) {
        int64_t rank = perm->size();
        std::vector<int64_t> inverse(rank);
        for (int64_t i = 0; i < rank; ++i)
          inverse[((*perm)[i] % rank + rank) % rank] = i;
        torch::jit::Value *dims = graph.insertConstant(inverse);
        return parentLike(insert(aten::permute, {updated, dims}, view));
      }
    }
    failAt(mutation, "it writes through a view made by " +
                         Twine(kind.toQualString()) +
                         ", which has no inverse here");
  }

  /// The views of `value` (transitively) with the view ops that make them,
  /// and the elements unpacked from lists of views (chunk, split, unbind).
  void collectViews(torch::jit::Value *value,
                    std::vector<torch::jit::Value *> &views,
                    std::vector<torch::jit::Value *> &elements) {
    for (const torch::jit::Use &use : value->uses()) {
      torch::jit::Node *user = use.user;
      if (user->kind() == c10::prim::ListUnpack &&
          value->type()->kind() == c10::TypeKind::ListType) {
        for (torch::jit::Value *element : user->outputs()) {
          elements.push_back(element);
          collectViews(element, views, elements);
        }
        continue;
      }
      if (use.offset != 0 || !isViewOp(user->kind()))
        continue;
      for (torch::jit::Value *output : user->outputs()) {
        views.push_back(output);
        collectViews(output, views, elements);
      }
    }
  }

  void rewrite(torch::jit::Node *node) {
    torch::jit::Value *self = node->input(0);
    // The chain of views from `self` to the tensor they view.
    std::vector<torch::jit::Node *> chain;
    torch::jit::Value *base = self;
    while (isViewOp(base->node()->kind())) {
      torch::jit::Node *view = base->node();
      if (view->outputs().size() != 1 ||
          view->output()->type()->kind() != c10::TypeKind::TensorType)
        failAt(node, "it writes through a view made by " +
                         Twine(view->kind().toQualString()) +
                         ", which has no inverse here");
      chain.push_back(view);
      base = view->input(0);
    }
    if (base->node()->kind() == c10::prim::ListUnpack)
      failAt(node, "it writes into an element of a list (of chunk, split or "
                   "unbind), which has no inverse here");
    // Mutations of tensors from outside the block are left to the
    // translator, which sees blocks inline.
    JitBlock *block = node->owningBlock();
    if (base->node()->owningBlock() != block &&
        !(base->node()->kind() == c10::prim::Param &&
          block == graph.block())) {
      if (!chain.empty())
        failAt(node, "it writes through a view of a tensor defined outside "
                     "its block");
      return;
    }

    std::string name = node->kind().toQualString();
    name.pop_back();
    c10::Symbol functionalKind = c10::Symbol::fromQualString(name);
    torch::jit::WithInsertPoint guard(node);
    torch::jit::Node *functional =
        graph.create(functionalKind, node->inputs(), /*num_outputs=*/1);
    functional->setSourceRange(node->sourceRange());
    functional->output()->setType(node->output()->type());
    graph.insertNode(functional);
    if (!functional->maybeOperator()) {
      functional->destroy();
      failAt(node, "torch has no functional form " + name);
    }

    // Write the new value back through the views, innermost first.
    std::vector<std::pair<torch::jit::Value *, torch::jit::Value *>> rebound;
    torch::jit::Value *updated = functional->output();
    rebound.push_back({self, updated});
    for (torch::jit::Node *view : chain) {
      updated = writeBack(node, view, updated);
      rebound.push_back({view->input(0), updated});
    }
    // Other views of the base that are used later: recompute them from
    // the new base.
    std::vector<torch::jit::Value *> views, elements;
    collectViews(base, views, elements);
    auto usedAfter = [&](torch::jit::Value *value) {
      return llvm::any_of(value->uses(), [&](const torch::jit::Use &use) {
        torch::jit::Node *user = ancestorIn(use.user, block);
        return user && user != node &&
               (user == block->return_node() || node->isBefore(user));
      });
    };
    auto throughElement = [&](torch::jit::Value *view) {
      for (torch::jit::Value *v = view; v != base; v = v->node()->input(0))
        if (llvm::is_contained(elements, v))
          return true;
      return false;
    };
    for (torch::jit::Value *view : llvm::concat<torch::jit::Value *>(
             elements, views))
      if (throughElement(view) && view->node()->isBefore(node) &&
          usedAfter(view))
        failAt(node, "a piece of the mutated tensor that chunk, split or "
                     "unbind made before the write is used after it");
    for (torch::jit::Value *view : views) {
      if (throughElement(view) ||
          llvm::any_of(rebound, [&](auto &entry) {
            return entry.first == view;
          }) ||
          !view->node()->isBefore(node) ||
          view->node()->owningBlock() != block)
        continue;
      std::vector<torch::jit::Node *> path;
      for (torch::jit::Value *v = view; v != base; v = v->node()->input(0))
        path.push_back(v->node());
      torch::jit::Value *recomputed = updated;
      for (torch::jit::Node *step : llvm::reverse(path)) {
        if (step->outputs().size() != 1)
          failAt(node, "a view made by " + Twine(step->kind().toQualString()) +
                           " of the mutated tensor is used later");
        recomputed = replay(step, recomputed);
      }
      rebound.push_back({view, recomputed});
    }
    node->output()->replaceAllUsesWith(functional->output());
    for (auto [old, now] : rebound)
      replaceUsesAfter(old, node, now);
    node->destroy();
  }

  torch::jit::Graph &graph;
};
} // namespace

/// Teaches libtorch 1.13 the schemas of newer aten ops that archives from
/// torch 2.x call, so that they load; the translator gives them meaning.
static void registerNewerOps() {
  static torch::Library *library = [] {
    auto *lib = new torch::Library(torch::Library::FRAGMENT, "aten",
                                   c10::nullopt, __FILE__, __LINE__);
    lib->def("_grouped_mm(Tensor self, Tensor mat2, Tensor? offs=None, "
             "Tensor? bias=None, ScalarType? out_dtype=None) -> Tensor");
    return lib;
  }();
  (void)library;
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

/// Stops libtorch from symbolizing a C++ backtrace into every c10::Error
/// it throws: the importer reports errors without it (messageOf), and
/// dladdr's walk of libtorch's symbol table for each frame made a broken
/// archive's import several times slower than a good one's.
static void dropErrorBacktraces() {
  static const bool dropped = [] {
    c10::SetStackTraceFetcher([] { return std::string(); });
    return true;
  }();
  (void)dropped;
}

/// libtorch's module of the archive in `buffer`, with the operators of newer
/// PyTorch versions registered; throws what libtorch throws.
static torch::jit::Module loadArchive(llvm::MemoryBufferRef buffer) {
  registerNewerOps();
  dropErrorBacktraces();
  return torch::jit::load(std::make_shared<BufferReadAdapter>(buffer),
                          c10::Device(c10::kCPU));
}

/// The source location of every node in `block`, nested blocks included.
static void readSourceRanges(torch::jit::Block *block) {
  for (torch::jit::Node *node : block->nodes()) {
    (void)sourceLocation(node);
    for (torch::jit::Block *inner : node->blocks())
      readSourceRanges(inner);
  }
}

void moe::loadTorchScriptArchive(llvm::MemoryBufferRef buffer) {
  torch::jit::Module module = loadArchive(buffer);
  c10::optional<torch::jit::Method> forward = module.find_method("forward");
  if (!forward)
    return;
  // Errors name the source that generated a node, which libtorch reads from
  // the archive's debug records on first use (and crashes on when they are
  // corrupted: uninitialized memory in findSourceRangeThatGenerated).
  std::shared_ptr<torch::jit::Graph> graph = forward->graph()->copy();
  torch::jit::Inline(*graph);
  readSourceRanges(graph->block());
}

/// Translates `forward` of the archive in `buffer` into `model`.
static LogicalResult translateArchive(llvm::MemoryBufferRef buffer,
                                      Location loc,
                                      const ImportOptions &options,
                                      ::ONNX_NAMESPACE::ModelProto &model) {
  torch::jit::Module module;
  try {
    module = loadArchive(buffer);
  } catch (const std::exception &error) {
    return emitError(loc) << "not a valid TorchScript archive: "
                          << messageOf(error);
  }
  c10::optional<torch::jit::Method> forward = module.find_method("forward");
  if (!forward)
    return emitError(loc) << "the TorchScript module has no forward method";

  std::shared_ptr<torch::jit::Graph> graph = forward->graph()->copy();
  torch::jit::Inline(*graph);
  try {
    Functionalizer(*graph).run();
  } catch (const std::exception &error) {
    return emitError(loc) << messageOf(error);
  }
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
      // The innermost node, when the failure is inside an If or Loop.
      torch::jit::Node *failed = translator.currentNode();
      if (!failed)
        failed = node;
      std::string where = sourceLocation(failed);
      return emitError(loc) << "cannot import "
                            << failed->kind().toQualString()
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

namespace {
/// What the child sends back: a tag, then the serialized model ('M') or the
/// text of each error, NUL-terminated ('E').
enum class Reply : char { Model = 'M', Errors = 'E' };
} // namespace

static bool writeAll(int fd, const char *data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    data += n;
    size -= n;
  }
  return true;
}

/// Bounds the memory the loader child may take: libtorch's unpickler
/// reserves what an archive's length fields claim (a fuzzed 80 kB archive
/// took 4 GB), which could end the machine's memory, not just the import.
/// The bound is the child's memory now, plus four times the archive and
/// 2 GiB: a real archive's tensors, held once by libtorch and once by the
/// translation, fit. Under AddressSanitizer, whose shadow memory already
/// counts against the limit, nothing is bounded.
static void boundLoaderMemory(size_t archiveBytes) {
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
  return;
#endif
#endif
  // VmData: the private writable memory that RLIMIT_DATA counts, in kB.
  uint64_t now = 0;
  if (FILE *status = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, status))
      if (std::sscanf(line, "VmData: %" SCNu64, &now) == 1)
        break;
    std::fclose(status);
  }
  rlimit limit;
  if (::getrlimit(RLIMIT_DATA, &limit) != 0)
    return;
  uint64_t bound = now * 1024 + 4 * uint64_t(archiveBytes) + (uint64_t(2) << 30);
  if (limit.rlim_max != RLIM_INFINITY && bound > limit.rlim_max)
    bound = limit.rlim_max;
  if (limit.rlim_cur == RLIM_INFINITY || bound < limit.rlim_cur) {
    limit.rlim_cur = bound;
    ::setrlimit(RLIMIT_DATA, &limit);
  }
}

/// translateArchive in a child process; its errors are re-emitted here.
static LogicalResult translateIsolated(llvm::MemoryBufferRef buffer,
                                       Location loc,
                                       const ImportOptions &options,
                                       ::ONNX_NAMESPACE::ModelProto &model) {
  int fds[2];
  if (::pipe(fds) != 0)
    return emitError(loc) << "cannot start the TorchScript loader: "
                          << std::strerror(errno);
  pid_t child = ::fork();
  if (child < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return emitError(loc) << "cannot start the TorchScript loader: "
                          << std::strerror(errno);
  }
  if (child == 0) {
    ::close(fds[0]);
    // What the child has to say goes through the pipe; a crash report of
    // the signal handlers the tool installed would only add noise to the
    // one error the parent prints.
    int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, STDOUT_FILENO);
    ::dup2(null, STDERR_FILENO);
    boundLoaderMemory(buffer.getBufferSize());
    std::string errors;
    bool translated = false;
    {
      ScopedDiagnosticHandler collect(loc.getContext(), [&](Diagnostic &d) {
        if (d.getSeverity() == DiagnosticSeverity::Error)
          errors += d.str() + '\0';
        return success();
      });
      try {
        translated = succeeded(translateArchive(buffer, loc, options, model));
      } catch (const std::exception &error) {
        errors += "cannot import the TorchScript archive: " +
                  messageOf(error) + '\0';
      } catch (...) {
      }
    }
    std::string reply(1, static_cast<char>(Reply::Model));
    if (!translated || !model.AppendToString(&reply))
      reply = static_cast<char>(Reply::Errors) + errors;
    _exit(writeAll(fds[1], reply.data(), reply.size()) ? 0 : 1);
  }
  ::close(fds[1]);
  std::string reply;
  char chunk[1 << 16];
  for (ssize_t n; (n = ::read(fds[0], chunk, sizeof chunk)) != 0;) {
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      break;
    reply.append(chunk, n);
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status))
    return emitError(loc) << "not a valid TorchScript archive: libtorch's "
                             "loader crashed on it ("
                          << strsignal(WTERMSIG(status)) << ")";
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || reply.empty())
    return emitError(loc) << "the TorchScript loader ended without an answer";
  StringRef body = StringRef(reply).drop_front();
  if (reply[0] == static_cast<char>(Reply::Model)) {
    if (!model.ParseFromArray(body.data(), static_cast<int>(body.size())))
      return emitError(loc) << "the TorchScript loader sent a malformed model";
    return success();
  }
  SmallVector<StringRef> errors;
  body.split(errors, '\0', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  for (StringRef error : errors)
    emitError(loc) << error;
  if (errors.empty())
    emitError(loc) << "cannot import the TorchScript archive";
  return failure();
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
    if (failed(options.isolateTorchScript
                   ? translateIsolated(buffer, loc, options, model)
                   : translateArchive(buffer, loc, options, model)))
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
