//===- GraphTranslator.cpp - TorchScript graph to ONNX graph --------------===//

#include "GraphTranslator.h"

#include <ATen/native/TypeProperties.h>
#include <torch/csrc/jit/frontend/source_range.h>

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::torchscript;

namespace prim = c10::prim;
namespace aten = c10::aten;

/// Known tensors up to this size become Constant nodes, larger ones (and
/// every parameter) initializers.
static constexpr int64_t kMaxConstantNodeElements = 64;

std::string torchscript::sourceLocation(const Node *node) {
  // Traced graphs point into the archive's generated code; the range that
  // generated it is the user's Python source.
  const torch::jit::SourceRange &range = node->sourceRange();
  c10::optional<torch::jit::SourceRange> original =
      range.findSourceRangeThatGenerated();
  auto position = (original ? *original : range).file_line_col();
  if (!position)
    return "";
  auto [file, line, column] = *position;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

//===----------------------------------------------------------------------===//
// Operands
//===----------------------------------------------------------------------===//

void GraphTranslator::set(Value *value, Operand operand) {
  operands[value] = std::move(operand);
}

const Operand &GraphTranslator::operand(Value *value) const {
  auto it = operands.find(value);
  if (it == operands.end())
    fail("internal error: %" + value->debugName() + " is not translated");
  return it->second;
}

std::string GraphTranslator::describe(Value *value) const {
  if (current) {
    const c10::FunctionSchema *schema = current->maybeSchema();
    for (size_t i = 0, e = current->inputs().size(); i < e; ++i)
      if (current->input(i) == value && schema &&
          i < schema->arguments().size())
        return "argument '" + schema->arguments()[i].name() + "'";
  }
  return "value %" + value->debugName();
}

const c10::IValue &GraphTranslator::knownValue(Value *value) const {
  const Operand &known = operand(value);
  if (!known.isKnown())
    fail("its " + describe(value) +
         " must be known at import time, but is computed at run time");
  return known.value;
}

bool GraphTranslator::isNone(Value *value) const {
  const Operand &known = operand(value);
  return known.isKnown() && known.value.isNone();
}

int64_t GraphTranslator::getInt(Value *value) const {
  const c10::IValue &known = knownValue(value);
  if (!known.isInt())
    fail("its " + describe(value) + " is not an int");
  return known.toInt();
}

double GraphTranslator::getDouble(Value *value) const {
  const c10::IValue &known = knownValue(value);
  if (!known.isDouble() && !known.isInt())
    fail("its " + describe(value) + " is not a number");
  return known.isDouble() ? known.toDouble() : known.toInt();
}

bool GraphTranslator::getBool(Value *value) const {
  const c10::IValue &known = knownValue(value);
  if (!known.isBool())
    fail("its " + describe(value) + " is not a bool");
  return known.toBool();
}

std::optional<int64_t> GraphTranslator::getOptionalInt(Value *value) const {
  if (isNone(value))
    return std::nullopt;
  return getInt(value);
}

SmallVector<int64_t> GraphTranslator::getIntList(Value *value) const {
  const c10::IValue &known = knownValue(value);
  if (known.isInt())
    return {known.toInt()};
  if (!known.isIntList())
    fail("its " + describe(value) + " is not an int list");
  std::vector<int64_t> ints = known.toIntVector();
  return SmallVector<int64_t>(ints.begin(), ints.end());
}

std::optional<at::ScalarType>
GraphTranslator::getOptionalDtype(Value *value) const {
  if (!value || isNone(value))
    return std::nullopt;
  return static_cast<at::ScalarType>(getInt(value));
}

Value *GraphTranslator::namedInput(Node *node, StringRef name) const {
  if (const c10::FunctionSchema *schema = node->maybeSchema())
    if (c10::optional<int> index = schema->argumentIndexWithName(
            c10::string_view(name.data(), name.size())))
      return node->input(*index);
  return nullptr;
}

int64_t GraphTranslator::normalizeDim(int64_t dim, int64_t rank) const {
  // As in torch, a 0-d tensor has one dimension to index, 0 or -1.
  int64_t bound = std::max<int64_t>(rank, 1);
  if (dim < -bound || dim >= bound)
    fail("dimension " + Twine(dim) + " is out of range for rank " +
         Twine(rank));
  return dim < 0 ? dim + bound : dim;
}

//===----------------------------------------------------------------------===//
// Tensors
//===----------------------------------------------------------------------===//

std::string GraphTranslator::materialize(const at::Tensor &tensor,
                                         StringRef path) {
  auto it = materialized.find(tensor.unsafeGetTensorImpl());
  if (it != materialized.end())
    return it->second.second;
  std::string name =
      !path.empty() || tensor.numel() > kMaxConstantNodeElements
          ? onnx.addInitializer(path.empty() ? "constant" : path, tensor)
          : onnx.constant(tensor);
  materialized[tensor.unsafeGetTensorImpl()] = {tensor, name};
  return name;
}

std::string GraphTranslator::tensor(Value *value) {
  return tensor(operand(value));
}

std::string GraphTranslator::tensor(const Operand &operand) {
  if (operand.kind == Operand::Kind::Tensor)
    return operand.name;
  if (operand.isKnown()) {
    const c10::IValue &known = operand.value;
    if (known.isTensor())
      return materialize(known.toTensor(), operand.path);
    if (known.isInt() || known.isDouble() || known.isBool())
      return onnx.constantScalar(known.toScalar(), dtypeOf(operand));
  }
  fail("expected a tensor, got a " +
       (operand.isKnown() ? operand.value.tagKind() : std::string("list")));
}

std::string GraphTranslator::tensorAs(Value *value, at::ScalarType type) {
  return tensorAs(operand(value), type);
}

std::string GraphTranslator::tensorAs(const Operand &operand,
                                      at::ScalarType type) {
  if (operand.isKnown()) {
    const c10::IValue &known = operand.value;
    if (known.isInt() || known.isDouble() || known.isBool())
      return onnx.constantScalar(known.toScalar(), type);
    if (known.isTensor() && known.toTensor().scalar_type() != type) {
      at::NoGradGuard noGrad;
      return materialize(known.toTensor().to(type), operand.path);
    }
  }
  return onnx.cast(tensor(operand), type);
}

std::string GraphTranslator::transposed(Value *value) {
  const Operand &weight = operand(value);
  if (rankOf(value) != 2)
    fail("expected a 2-d weight, got rank " + Twine(rankOf(value)));
  if (!weight.isKnown())
    return onnx.op("Transpose", {tensor(weight)}, {intsAttr("perm", {1, 0})});
  // As torch.onnx's constant folding does, store the weight transposed.
  const at::Tensor &known = weight.value.toTensor();
  auto it = transposedWeights.find(known.unsafeGetTensorImpl());
  if (it != transposedWeights.end())
    return it->second.second;
  std::string name = onnx.addInitializer(
      weight.path.empty() ? "constant.T" : weight.path + ".T", known.t());
  transposedWeights[known.unsafeGetTensorImpl()] = {known, name};
  return name;
}

std::vector<Operand> GraphTranslator::listElements(Value *value) const {
  const Operand &list = operand(value);
  if (list.kind == Operand::Kind::List)
    return list.elements;
  if (!list.isKnown() || !(list.value.isList() || list.value.isTuple()))
    fail("its " + describe(value) + " is not a list");
  std::vector<Operand> elements;
  if (list.value.isList()) {
    for (const c10::IValue &element : list.value.toListRef())
      elements.push_back(Operand::known(element));
  } else {
    for (const c10::IValue &element : list.value.toTupleRef().elements())
      elements.push_back(Operand::known(element));
  }
  return elements;
}

SmallVector<std::string> GraphTranslator::tensorList(Value *value) {
  SmallVector<std::string> tensors;
  for (const Operand &element : listElements(value))
    tensors.push_back(tensor(element));
  return tensors;
}

std::string GraphTranslator::intListTensor(Value *value, int64_t minusOneAs) {
  std::vector<Operand> elements = listElements(value);
  SmallVector<int64_t> known;
  for (const Operand &element : elements)
    if (element.isKnown() && element.value.isInt())
      known.push_back(element.value.toInt() == -1 ? minusOneAs
                                                  : element.value.toInt());
  if (known.size() == elements.size())
    return onnx.constantInts(known);
  // Runtime ints are 0-d tensors; torch.onnx concatenates them as [1]s.
  SmallVector<std::string> parts;
  for (const Operand &element : elements) {
    if (element.isKnown()) {
      int64_t dim = getIntOf(element);
      parts.push_back(onnx.constantInts({dim == -1 ? minusOneAs : dim}));
      continue;
    }
    std::string dim = onnx.cast(tensor(element), at::kLong);
    parts.push_back(onnx.op("Unsqueeze", {dim, onnx.constantInts({0})}));
  }
  return onnx.op("Concat", parts, {intAttr("axis", 0)});
}

int64_t GraphTranslator::getIntOf(const Operand &element) const {
  if (!element.isKnown() || !element.value.isInt())
    fail("expected an int list element");
  return element.value.toInt();
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

at::ScalarType GraphTranslator::dtypeOf(const Operand &operand) const {
  if (operand.kind == Operand::Kind::Tensor)
    return onnx.elementType(operand.name);
  if (operand.isKnown()) {
    const c10::IValue &known = operand.value;
    if (known.isTensor())
      return known.toTensor().scalar_type();
    if (known.isInt())
      return at::kLong;
    if (known.isDouble())
      return at::kDouble;
    if (known.isBool())
      return at::kBool;
  }
  fail("expected a tensor or a number");
}

int64_t GraphTranslator::rankOf(Value *value) const {
  const Operand &tensor = operand(value);
  if (tensor.kind == Operand::Kind::Tensor)
    return onnx.rank(tensor.name);
  if (tensor.isKnown() && tensor.value.isTensor())
    return tensor.value.toTensor().dim();
  return 0;
}

at::ScalarType GraphTranslator::promotedType(ArrayRef<Value *> values) const {
  at::native::ResultTypeState state;
  for (Value *value : values) {
    const Operand &input = operand(value);
    if (input.isKnown() && input.value.isTensor()) {
      state =
          at::native::update_result_type_state(input.value.toTensor(), state);
      continue;
    }
    at::ScalarType type = dtypeOf(input);
    // Python numbers (known or runtime) only raise the category, as torch's
    // wrapped numbers do; tensors take part by dtype and by being 0-d.
    if (input.isKnown() || value->type()->kind() != c10::TypeKind::TensorType) {
      at::Scalar number = at::isFloatingType(type) ? at::Scalar(0.0)
                          : type == at::kBool      ? at::Scalar(false)
                                                   : at::Scalar(int64_t(0));
      state = at::native::update_result_type_state(number, state);
      continue;
    }
    at::Tensor example = rankOf(value) == 0
                             ? at::empty({}, at::TensorOptions().dtype(type))
                             : at::empty({1}, at::TensorOptions().dtype(type));
    state = at::native::update_result_type_state(example, state);
  }
  return at::native::result_type(state);
}

//===----------------------------------------------------------------------===//
// Nodes
//===----------------------------------------------------------------------===//

bool GraphTranslator::tryFold(Node *node) {
  if (!llvm::all_of(node->inputs(),
                    [&](Value *input) { return operand(input).isKnown(); }))
    return false;
  if (isTensorFactory(node->kind()) || node->isNondeterministic() ||
      node->hasSideEffects() || !node->maybeOperator())
    return false;
  if (const c10::FunctionSchema *schema = node->maybeSchema())
    if (schema->is_mutable())
      return false;

  torch::jit::Stack stack;
  for (Value *input : node->inputs())
    stack.push_back(operand(input).value);
  {
    at::NoGradGuard noGrad;
    node->getOperation()(stack);
  }
  if (stack.size() != node->outputs().size())
    fail("internal error: folding gave " + Twine(stack.size()) +
         " results for " + Twine(node->outputs().size()));
  for (size_t i = 0, e = stack.size(); i < e; ++i) {
    // A folded tensor keeps the path of the parameter it is (a no-op `to`)
    // or was computed from, which names its initializer.
    std::string path;
    for (Value *input : node->inputs()) {
      const Operand &known = operand(input);
      if (known.path.empty())
        continue;
      if (stack[i].isTensor() && known.value.isTensor() &&
          stack[i].toTensor().unsafeGetTensorImpl() ==
              known.value.toTensor().unsafeGetTensorImpl()) {
        path = known.path;
        break;
      }
      if (path.empty())
        path = known.path + "/" + node->kind().toUnqualString();
    }
    set(node->output(i), Operand::known(std::move(stack[i]), path));
  }
  return true;
}

c10::IValue GraphTranslator::knownAggregate(Node *node) const {
  std::vector<c10::IValue> elements;
  for (Value *input : node->inputs())
    elements.push_back(operand(input).value);
  if (node->kind() == prim::TupleConstruct)
    return c10::ivalue::Tuple::create(std::move(elements));
  c10::impl::GenericList list(
      node->output()->type()->expectRef<c10::ListType>().getElementType());
  for (c10::IValue &element : elements)
    list.push_back(std::move(element));
  return list;
}

void GraphTranslator::translateGetAttr(Node *node) {
  const Operand &object = operand(node->input());
  if (!object.isKnown() || !object.value.isObject())
    fail("expected a module");
  const std::string &name = node->s(torch::jit::attr::name);
  std::string path = object.path.empty() ? name : object.path + "." + name;
  set(node->output(),
      Operand::known(object.value.toObjectRef().getAttr(name), path));
}

bool torchscript::isViewOp(c10::Symbol kind) {
  static const c10::Symbol kinds[] = {
      aten::select,   aten::slice,      aten::view,     aten::reshape,
      aten::view_as,  aten::reshape_as, aten::unsqueeze, aten::squeeze,
      aten::flatten,  aten::transpose,  aten::t,        aten::numpy_T,
      aten::permute,  aten::expand,     aten::expand_as, aten::narrow,
      aten::diagonal, aten::as_strided, aten::unfold,   aten::alias,
      aten::detach,   aten::chunk,      aten::split,    aten::unbind,
      aten::split_with_sizes};
  return llvm::is_contained(kinds, kind);
}

void GraphTranslator::translateBlock(torch::jit::Block *block) {
  for (Node *inner : block->nodes())
    translate(inner);
}

/// prim::If whose condition is known at import time (a constant, a module
/// attribute, or what static shapes make of it): only the branch taken.
void GraphTranslator::translateIf(Node *node) {
  if (!operand(node->input()).isKnown())
    fail("its condition is computed at run time (data-dependent control "
         "flow); only conditions known at import time are supported");
  torch::jit::Block *block = node->blocks()[getBool(node->input()) ? 0 : 1];
  translateBlock(block);
  for (size_t i = 0, e = node->outputs().size(); i < e; ++i)
    set(node->output(i), operand(block->outputs()[i]));
}

/// prim::Loop with a trip count and conditions known at import time,
/// unrolled: the body is translated once per iteration.
void GraphTranslator::translateLoop(Node *node) {
  constexpr int64_t kMaxIterations = 4096;
  Value *tripCount = node->input(0);
  if (!operand(tripCount).isKnown())
    fail("its trip count is computed at run time (a data-dependent loop, "
         "such as one over the experts that tokens were routed to); only "
         "loops with a trip count known at import time are unrolled");
  int64_t trips = getInt(tripCount);
  bool condition = getBool(node->input(1));
  std::vector<Operand> carried;
  for (size_t i = 2, e = node->inputs().size(); i < e; ++i)
    carried.push_back(operand(node->input(i)));
  torch::jit::Block *body = node->blocks()[0];
  for (int64_t i = 0; i < trips && condition; ++i) {
    if (i == kMaxIterations)
      fail("the loop runs more than " + Twine(kMaxIterations) +
           " iterations; it is not unrolled");
    set(body->inputs()[0], Operand::known(i));
    for (size_t j = 0, e = carried.size(); j < e; ++j)
      set(body->inputs()[j + 1], carried[j]);
    translateBlock(body);
    current = node;
    if (!operand(body->outputs()[0]).isKnown())
      fail("its continue condition is computed at run time");
    condition = getBool(body->outputs()[0]);
    for (size_t j = 0, e = carried.size(); j < e; ++j)
      carried[j] = operand(body->outputs()[j + 1]);
  }
  for (size_t i = 0, e = node->outputs().size(); i < e; ++i)
    set(node->output(i), carried[i]);
}

/// An in-place op that the graph pass left (one inside an If or Loop
/// block that mutates a tensor from outside it): as blocks are translated
/// inline, rebinding the mutated value to the functional result makes every
/// later use see the mutation.
bool GraphTranslator::translateInPlace(Node *node) {
  const c10::FunctionSchema *schema = node->maybeSchema();
  StringRef name = node->kind().toUnqualString();
  if (!schema || !schema->is_mutable() || !node->kind().is_aten() ||
      !name.ends_with("_") || name.ends_with("__") ||
      node->outputs().size() != 1)
    return false;
  c10::Symbol kind = c10::Symbol::aten(name.drop_back().str());
  Handler handler = lookupHandler(kind);
  if (!handler)
    return false;
  Value *self = node->input(0);
  if (isViewOp(self->node()->kind()))
    fail("it writes through a view (" +
         Twine(self->node()->kind().toQualString()) +
         ") of a tensor defined outside its block, which cannot be made "
         "functional");
  // The functional twin (outside any block) is what the handler reads.
  Node *&twin = functionalTwins[node];
  if (!twin) {
    twin = node->owningGraph()->create(kind, node->inputs(), 1);
    twin->output()->setType(node->output()->type());
    if (!twin->maybeOperator())
      return false;
  }
  handler(*this, twin);
  set(node->output(), operand(twin->output()));
  set(self, operand(twin->output()));
  return true;
}

void GraphTranslator::translate(Node *node) {
  current = node;
  switch (node->kind()) {
  case prim::Constant:
    set(node->output(),
        Operand::known(torch::jit::toIValue(node->output()).value()));
    return;
  case prim::GetAttr:
    translateGetAttr(node);
    return;
  default:
    break;
  }
  if (tryFold(node))
    return;

  switch (node->kind()) {
  case prim::ListConstruct:
  case prim::TupleConstruct: {
    if (llvm::all_of(node->inputs(),
                     [&](Value *input) { return operand(input).isKnown(); })) {
      // A list of parameters (to stack) names what is folded from it.
      std::string path;
      for (Value *input : node->inputs())
        if (path.empty())
          path = operand(input).path;
      set(node->output(), Operand::known(knownAggregate(node), path));
      return;
    }
    std::vector<Operand> elements;
    for (Value *input : node->inputs())
      elements.push_back(operand(input));
    set(node->output(), Operand::list(std::move(elements)));
    return;
  }
  case prim::ListUnpack:
  case prim::TupleUnpack: {
    std::vector<Operand> elements = listElements(node->input());
    if (elements.size() != node->outputs().size())
      fail("unpacks " + Twine(node->outputs().size()) +
           " values from a list of " + Twine(elements.size()));
    for (size_t i = 0, e = elements.size(); i < e; ++i)
      set(node->output(i), std::move(elements[i]));
    return;
  }
  case prim::TupleIndex:
  case aten::__getitem__: {
    std::vector<Operand> elements = listElements(node->input(0));
    int64_t size = elements.size(), index = getInt(node->input(1));
    if (index < -size || index >= size)
      fail("index " + Twine(index) + " is out of range for a list of " +
           Twine(size));
    set(node->output(), elements[index < 0 ? index + size : index]);
    return;
  }
  // What traced graphs ask of runtime tensors: their dtype and device.
  case prim::dtype:
    set(node->output(),
        Operand::known(static_cast<int64_t>(dtypeOf(node->input()))));
    return;
  case prim::device:
    set(node->output(), Operand::known(c10::Device(c10::kCPU)));
    return;
  case prim::If:
    translateIf(node);
    return;
  case prim::Loop:
    translateLoop(node);
    return;
  case prim::layout:
    set(node->output(), Operand::known(static_cast<int64_t>(at::kStrided)));
    return;
  // Scripted `with torch.no_grad():` makes a context object; import does
  // not differentiate.
  case prim::CreateObject:
  case prim::Enter:
  case prim::Exit:
    for (Value *output : node->outputs())
      set(output, Operand::known(c10::IValue()));
    return;
  case prim::SetAttr:
    if (operand(node->input(0)).isKnown() &&
        operand(node->input(0)).value.isNone())
      return;
    fail("it sets a module attribute, which is not supported");
  case prim::unchecked_cast:
    set(node->output(), operand(node->input()));
    return;
  // Runtime numbers are 0-d tensors already.
  case prim::NumToTensor:
  case aten::ScalarImplicit:
    set(node->output(), operand(node->input()));
    return;
  default:
    break;
  }

  if (Handler handler = lookupHandler(node->kind())) {
    handler(*this, node);
    return;
  }
  if (translateInPlace(node))
    return;
  const c10::FunctionSchema *schema = node->maybeSchema();
  if (schema && schema->is_mutable())
    fail("it is an in-place op that could not be made functional");
  fail("the TorchScript importer has no translation for this op");
}
