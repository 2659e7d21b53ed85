//===- AtenShapes.cpp - aten shape and indexing ops as ONNX nodes ---------===//
//
// The translations of shape, indexing, list and factory ops; see
// AtenToOnnx.cpp for the conventions.
//
//===----------------------------------------------------------------------===//

#include "AtenToOnnx.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Sequence.h"

#include <numeric>

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::torchscript;

namespace aten = c10::aten;
using T = GraphTranslator;

static constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

/// The results of `value` (of rank > 0) split along `axis` into `count`
/// slices with that axis squeezed away, as torch.onnx unbinds.
static std::vector<Operand> unbind(T &t, const std::string &value, int64_t axis,
                                   int64_t count) {
  SmallVector<int64_t> ones(count, 1);
  SmallVector<std::string> slices =
      t.onnx.addNode("Split", {value, t.onnx.constantInts(ones)},
                     {intAttr("axis", axis)}, count);
  std::vector<Operand> results;
  for (const std::string &slice : slices)
    results.push_back(Operand::tensor(
        t.onnx.op("Squeeze", {slice, t.onnx.constantInts({axis})})));
  return results;
}

/// How many elements the only user of `list`, a ListUnpack, takes out.
static std::optional<int64_t> unpackedCount(Value *list) {
  if (list->uses().size() != 1 ||
      list->uses()[0].user->kind() != c10::prim::ListUnpack)
    return std::nullopt;
  return list->uses()[0].user->outputs().size();
}

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

static void translateIdentity(T &t, Node *node) {
  t.set(node->output(), t.operand(node->input(0)));
}

static void translateDropout(T &t, Node *node) {
  if (t.getBool(node->input(2)))
    fail("dropout in training mode is not supported; call eval() before "
         "tracing");
  translateIdentity(t, node);
}

static void translateReshape(T &t, Node *node) {
  std::string input = t.tensor(node->input(0));
  std::string shape =
      node->kind() == aten::view_as || node->kind() == aten::reshape_as
          ? t.onnx.shapeOf(t.tensor(node->input(1)))
          : t.intListTensor(node->input(1));
  setResult(t, node, t.onnx.op("Reshape", {input, shape}));
}

static void translateFlatten(T &t, Node *node) {
  std::string input = t.tensor(node->input(0));
  SmallVector<int64_t> dims = t.onnx.shape(input);
  int64_t rank = dims.size();
  int64_t start = t.normalizeDim(t.getInt(node->input(1)), rank);
  int64_t end = t.normalizeDim(t.getInt(node->input(2)), rank);
  if (rank == 0) { // torch flattens a 0-d tensor into one element
    setResult(t, node, t.onnx.op("Reshape", {input, t.onnx.constantInts({1})}));
    return;
  }
  if (start >= end) {
    translateIdentity(t, node);
    return;
  }
  // Reshape's 0 copies the leading dims; the trailing ones must be static.
  SmallVector<int64_t> shape(start, 0);
  shape.push_back(-1);
  for (int64_t i = end + 1; i < rank; ++i) {
    if (dims[i] < 0)
      fail("flattening needs the static size of dimension " + Twine(i));
    shape.push_back(dims[i]);
  }
  setResult(t, node, t.onnx.op("Reshape", {input, t.onnx.constantInts(shape)}));
}

static void translateUnsqueeze(T &t, Node *node) {
  std::string input = t.tensor(node->input(0));
  int64_t dim =
      t.normalizeDim(t.getInt(node->input(1)), t.onnx.rank(input) + 1);
  setResult(t, node,
            t.onnx.op("Unsqueeze", {input, t.onnx.constantInts({dim})}));
}

static void translateSqueeze(T &t, Node *node) {
  std::string input = t.tensor(node->input(0));
  if (node->inputs().size() == 1) {
    setResult(t, node, t.onnx.op("Squeeze", {input}));
    return;
  }
  SmallVector<int64_t> dims = t.onnx.shape(input);
  int64_t dim = t.normalizeDim(t.getInt(node->input(1)), dims.size());
  // torch leaves dims that are not 1 (and 0-d tensors) alone.
  if (dims.empty() || dims[dim] > 1 || dims[dim] == 0) {
    translateIdentity(t, node);
    return;
  }
  if (dims[dim] < 0)
    fail("squeezing dimension " + Twine(dim) +
         " needs its static size, which is only known at run time");
  setResult(t, node, t.onnx.op("Squeeze", {input, t.onnx.constantInts({dim})}));
}

static void transpose(T &t, Node *node, const std::string &input,
                      ArrayRef<int64_t> perm) {
  if (llvm::equal(perm, llvm::seq<int64_t>(0, perm.size()))) {
    translateIdentity(t, node);
    return;
  }
  setResult(t, node, t.onnx.op("Transpose", {input}, {intsAttr("perm", perm)}));
}

static void translatePermute(T &t, Node *node) {
  std::string input = t.tensor(node->input(0));
  int64_t rank = t.onnx.rank(input);
  SmallVector<int64_t> perm;
  for (int64_t dim : t.getIntList(node->input(1)))
    perm.push_back(t.normalizeDim(dim, rank));
  transpose(t, node, input, perm);
}

static void translateTranspose(T &t, Node *node) {
  std::string input = t.tensor(node->input(0));
  int64_t rank = t.onnx.rank(input);
  SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  if (node->kind() == aten::t) {
    if (rank == 2)
      std::swap(perm[0], perm[1]);
  } else if (node->kind() == aten::numpy_T) {
    std::reverse(perm.begin(), perm.end());
  } else {
    std::swap(perm[t.normalizeDim(t.getInt(node->input(1)), rank)],
              perm[t.normalizeDim(t.getInt(node->input(2)), rank)]);
  }
  transpose(t, node, input, perm);
}

static void translateExpand(T &t, Node *node) {
  std::string input = t.tensor(node->input(0));
  // expand's -1 keeps a dim, which is what ONNX's broadcasting 1 does.
  std::string shape = node->kind() == aten::expand_as
                          ? t.onnx.shapeOf(t.tensor(node->input(1)))
                          : t.intListTensor(node->input(1), /*minusOneAs=*/1);
  setResult(t, node, t.onnx.op("Expand", {input, shape}));
}

static void translateSize(T &t, Node *node) {
  std::string input = t.tensor(node->input(0));
  SmallVector<int64_t> dims = t.onnx.shape(input);
  auto dimOperand = [&](int64_t dim) {
    if (dims[dim] >= 0)
      return Operand::known(dims[dim]);
    return Operand::tensor(t.onnx.op(
        "Gather",
        {t.onnx.op("Shape", {input}), t.onnx.constantScalar(dim, at::kLong)},
        {intAttr("axis", 0)}));
  };
  if (node->inputs().size() == 2) {
    t.set(node->output(),
          dimOperand(t.normalizeDim(t.getInt(node->input(1)), dims.size())));
    return;
  }
  if (!llvm::is_contained(dims, -1)) {
    t.set(node->output(), Operand::known(c10::List<int64_t>(
                              std::vector<int64_t>(dims.begin(), dims.end()))));
    return;
  }
  std::vector<Operand> elements;
  for (int64_t dim = 0, e = dims.size(); dim < e; ++dim)
    elements.push_back(dimOperand(dim));
  t.set(node->output(), Operand::list(std::move(elements)));
}

/// len(tensor): its first dim.
static void translateLen(T &t, Node *node) {
  if (node->input()->type()->kind() != c10::TypeKind::TensorType)
    fail("len of a list that is built at run time is not supported");
  std::string input = t.tensor(node->input());
  if (t.onnx.rank(input) == 0)
    fail("len() of a 0-d tensor");
  int64_t dim = t.onnx.shape(input)[0];
  if (dim >= 0) {
    t.set(node->output(), Operand::known(dim));
    return;
  }
  t.setTensor(node->output(),
              t.onnx.op("Gather",
                        {t.onnx.op("Shape", {input}),
                         t.onnx.constantScalar(0, at::kLong)},
                        {intAttr("axis", 0)}));
}

static void translateDim(T &t, Node *node) {
  t.set(node->output(), Operand::known(t.rankOf(node->input(0))));
}

static void translateNumel(T &t, Node *node) {
  std::string input = t.tensor(node->input(0));
  if (std::optional<SmallVector<int64_t>> dims = t.onnx.staticShape(input)) {
    t.set(node->output(),
          Operand::known(std::accumulate(dims->begin(), dims->end(), int64_t(1),
                                         std::multiplies<int64_t>())));
    return;
  }
  setResult(t, node, t.onnx.op("Size", {input}));
}

//===----------------------------------------------------------------------===//
// Indexing
//===----------------------------------------------------------------------===//

static void translateWhere(T &t, Node *node) {
  if (node->inputs().size() == 1) {
    // torch.where(cond): nonzero, one index tensor per dimension.
    std::string condition = t.tensorAs(node->input(0), at::kBool);
    std::string indices =
        t.onnx.op("Transpose", {t.onnx.op("NonZero", {condition})},
                  {intsAttr("perm", {1, 0})});
    t.set(node->output(),
          Operand::list(unbind(t, indices, 1, t.onnx.rank(condition))));
    return;
  }
  auto [lhs, rhs] = promoted(t, node->input(1), node->input(2));
  setResult(
      t, node,
      t.onnx.op("Where", {t.tensorAs(node->input(0), at::kBool), lhs, rhs}));
}

static void translateNonZero(T &t, Node *node) {
  std::string indices = t.onnx.op("NonZero", {t.tensor(node->input(0))});
  setResult(t, node,
            t.onnx.op("Transpose", {indices}, {intsAttr("perm", {1, 0})}));
}

static void translateSelect(T &t, Node *node) {
  std::string input = t.tensor(node->input(0));
  int64_t dim = t.normalizeDim(t.getInt(node->input(1)), t.onnx.rank(input));
  setResult(t, node,
            t.onnx.op("Gather", {input, intAs0D(t, node->input(2))},
                      {intAttr("axis", dim)}));
}

static void translateSlice(T &t, Node *node) {
  std::string input = t.tensor(node->input(0));
  SmallVector<int64_t> dims = t.onnx.shape(input);
  int64_t dim = t.normalizeDim(t.getInt(node->input(1)), dims.size());
  Value *start = node->input(2), *end = node->input(3);
  int64_t step = t.getInt(node->input(4));
  bool fromStart =
      t.isNone(start) || (t.operand(start).isKnown() && t.getInt(start) == 0);
  bool toEnd =
      t.isNone(end) || (t.operand(end).isKnown() &&
                        (t.getInt(end) == kInt64Max ||
                         (dims[dim] >= 0 && t.getInt(end) >= dims[dim])));
  if (fromStart && toEnd && step == 1) {
    translateIdentity(t, node);
    return;
  }
  std::string starts =
      t.isNone(start) ? t.onnx.constantInts({0}) : intAs1D(t, start);
  std::string ends =
      t.isNone(end) ? t.onnx.constantInts({kInt64Max}) : intAs1D(t, end);
  setResult(t, node,
            t.onnx.op("Slice", {input, starts, ends, t.onnx.constantInts({dim}),
                                t.onnx.constantInts({step})}));
}

static void translateIndexSelect(T &t, Node *node) {
  std::string input = t.tensor(node->input(0));
  int64_t dim = t.normalizeDim(t.getInt(node->input(1)), t.onnx.rank(input));
  std::string index = t.tensor(node->input(2));
  // A 0-d index selects a slice of one, unlike Gather's.
  if (t.onnx.rank(index) == 0)
    index = t.onnx.op("Unsqueeze", {index, t.onnx.constantInts({0})});
  setResult(t, node,
            t.onnx.op("Gather", {input, index}, {intAttr("axis", dim)}));
}

/// Advanced indexing, x[i0, i1, ...] with index tensors and None (':'), as
/// torch.onnx's `index` symbolic exports it.
static void translateIndex(T &t, Node *node) {
  std::string self = t.tensor(node->input(0));
  std::vector<Operand> elements = t.listElements(node->input(1));
  SmallVector<std::optional<std::string>> indices;
  for (const Operand &element : elements) {
    if (element.isKnown() && element.value.isNone()) {
      indices.push_back(std::nullopt);
      continue;
    }
    std::string index = t.tensor(element);
    at::ScalarType type = t.onnx.elementType(index);
    if (type == at::kBool || type == at::kByte) {
      if (t.onnx.rank(index) != 1)
        fail("indexing with a mask of rank other than 1 is not supported");
      index = t.onnx.op("Squeeze",
                        {t.onnx.op("NonZero", {t.onnx.cast(index, at::kBool)}),
                         t.onnx.constantInts({0})});
    }
    indices.push_back(index);
  }
  SmallVector<int64_t> advanced;
  for (int64_t i = 0, e = indices.size(); i < e; ++i)
    if (indices[i])
      advanced.push_back(i);
  if (advanced.empty()) {
    translateIdentity(t, node);
    return;
  }
  if (advanced.size() == 1) {
    setResult(t, node,
              t.onnx.op("Gather", {self, *indices[advanced.front()]},
                        {intAttr("axis", advanced.front())}));
    return;
  }

  // Several index tensors: move their dims to the front, flatten them into
  // one, gather with the combined index, and restore the layout.
  std::optional<SmallVector<int64_t>> dims = t.onnx.staticShape(self);
  if (!dims)
    fail("advanced indexing with several index tensors needs the static "
         "shape of the indexed tensor");
  int64_t rank = dims->size(), count = advanced.size();
  SmallVector<int64_t> rest;
  for (int64_t i = 0; i < rank; ++i)
    if (!llvm::is_contained(advanced, i))
      rest.push_back(i);
  SmallVector<int64_t> perm(advanced);
  perm.append(rest);
  if (!llvm::equal(perm, llvm::seq<int64_t>(0, rank)))
    self = t.onnx.op("Transpose", {self}, {intsAttr("perm", perm)});
  self = t.onnx.op("Flatten", {self}, {intAttr("axis", count)});

  std::string combined = *indices[advanced.back()];
  int64_t multiplier = (*dims)[advanced.back()];
  for (int64_t i = count - 2; i >= 0; --i) {
    std::string scaled = t.onnx.op(
        "Mul", {*indices[advanced[i]], t.onnx.constantInts({multiplier})});
    combined = t.onnx.op("Add", {combined, scaled});
    multiplier *= (*dims)[advanced[i]];
  }
  std::string gathered =
      t.onnx.op("Gather", {self, combined}, {intAttr("axis", 0)});

  std::string indexShape = t.onnx.shapeOf(combined);
  SmallVector<std::string> finalShape;
  // (Empty parts are left out: ONNX 1.12's data propagation rejects them.)
  auto addRestDims = [&](auto predicate) {
    SmallVector<int64_t> sizes;
    for (int64_t i : rest)
      if (predicate(i))
        sizes.push_back((*dims)[i]);
    if (!sizes.empty())
      finalShape.push_back(t.onnx.constantInts(sizes));
  };
  bool consecutive =
      advanced.back() - advanced.front() + 1 == static_cast<int64_t>(count);
  if (consecutive) {
    // The indexed dims stay where they were.
    SmallVector<int64_t> folded = {-1};
    for (int64_t i : rest)
      folded.push_back((*dims)[i]);
    gathered = t.onnx.op("Reshape", {gathered, t.onnx.constantInts(folded)});
    int64_t first = advanced.front();
    SmallVector<int64_t> back =
        llvm::to_vector(llvm::seq<int64_t>(1, first + 1));
    back.push_back(0);
    llvm::append_range(back, llvm::seq<int64_t>(first + 1, rank - count + 1));
    if (!llvm::equal(back, llvm::seq<int64_t>(0, back.size())))
      gathered = t.onnx.op("Transpose", {gathered}, {intsAttr("perm", back)});
    addRestDims([&](int64_t i) { return i < first; });
    finalShape.push_back(indexShape);
    addRestDims([&](int64_t i) { return i > first; });
  } else {
    // Otherwise numpy puts them first.
    finalShape.push_back(indexShape);
    addRestDims([](int64_t) { return true; });
  }
  std::string shape = t.onnx.op("Concat", finalShape, {intAttr("axis", 0)});
  setResult(t, node, t.onnx.op("Reshape", {gathered, shape}));
}

static void translateGather(T &t, Node *node) {
  std::string input = t.tensor(node->input(0));
  int64_t dim = t.normalizeDim(t.getInt(node->input(1)), t.onnx.rank(input));
  setResult(t, node,
            t.onnx.op("GatherElements", {input, t.tensor(node->input(2))},
                      {intAttr("axis", dim)}));
}

/// scatter (src or value, optional reduce) and scatter_add.
static void translateScatter(T &t, Node *node) {
  std::string self = t.tensor(node->input(0));
  int64_t dim = t.normalizeDim(t.getInt(node->input(1)), t.onnx.rank(self));
  std::string index = t.tensor(node->input(2));
  Value *source = node->input(3);
  std::string updates;
  if (source->type()->kind() == c10::TypeKind::TensorType) {
    updates = t.tensorAs(source, t.onnx.elementType(self));
  } else {
    // A scalar source fills the index's shape.
    updates = t.onnx.op("Expand", {t.tensorAs(source, t.onnx.elementType(self)),
                                   t.onnx.shapeOf(index)});
  }
  std::string reduction;
  if (node->kind() == aten::scatter_add)
    reduction = "add";
  if (Value *reduce = t.namedInput(node, "reduce")) {
    std::string mode = t.knownValue(reduce).toStringRef();
    if (mode != "add" && mode != "multiply")
      fail("scatter reduce='" + mode + "' is not supported");
    reduction = mode == "add" ? "add" : "mul";
  }
  SmallVector<::ONNX_NAMESPACE::AttributeProto> attrs = {intAttr("axis", dim)};
  if (!reduction.empty())
    attrs.push_back(stringAttr("reduction", reduction));
  setResult(t, node,
            t.onnx.op("ScatterElements", {self, index, updates}, attrs));
}

/// index_add as torch.onnx exports it: the source broadcast to self's rank,
/// the index expanded to the source's shape, scattered into zeros and added
/// to self. The scatter's reduction "add" (not torch.onnx's overwrite)
/// keeps repeated indices accumulating as in torch.
static void translateIndexAdd(T &t, Node *node) {
  std::string self = t.tensor(node->input(0));
  int64_t rank = t.onnx.rank(self);
  int64_t dim = t.normalizeDim(t.getInt(node->input(1)), rank);
  std::string index = t.tensor(node->input(2));
  at::ScalarType type = t.onnx.elementType(self);
  std::string source = t.tensorAs(node->input(3), type);
  if (Value *alpha = t.namedInput(node, "alpha");
      alpha &&
      !(t.operand(alpha).isKnown() && t.knownValue(alpha).toScalar().equal(1)))
    source = t.onnx.op("Mul", {source, t.tensorAs(alpha, type)});

  for (int64_t r = t.onnx.rank(source); r < rank; ++r)
    source = t.onnx.op("Unsqueeze", {source, t.onnx.constantInts({r})});
  // Broadcast the source over self's other dims: self's shape with 1 at dim.
  std::string selfShape;
  if (std::optional<SmallVector<int64_t>> dims = t.onnx.staticShape(self)) {
    (*dims)[dim] = 1;
    selfShape = t.onnx.constantInts(*dims);
  } else {
    SmallVector<int64_t> ends(rank, kInt64Max);
    ends[dim] = 1;
    selfShape = t.onnx.op(
        "Shape",
        {t.onnx.op("Slice",
                   {self, t.onnx.constantInts(SmallVector<int64_t>(rank, 0)),
                    t.onnx.constantInts(ends),
                    t.onnx.constantInts(
                        llvm::to_vector(llvm::seq<int64_t>(0, rank)))})});
  }
  source = t.onnx.op("Expand", {source, selfShape});

  SmallVector<int64_t> axes;
  for (int64_t i = 0; i < rank; ++i)
    if (i != dim)
      axes.push_back(i);
  if (!axes.empty())
    index = t.onnx.op("Unsqueeze", {index, t.onnx.constantInts(axes)});
  index = t.onnx.op("Expand", {index, t.onnx.shapeOf(source)});
  std::string zeros = t.onnx.constantOfShape(
      t.onnx.shapeOf(self), at::zeros({1}, at::TensorOptions(type)));
  std::string added =
      t.onnx.op("ScatterElements", {zeros, index, source},
                {intAttr("axis", dim), stringAttr("reduction", "add")});
  setResult(t, node, t.onnx.op("Add", {self, added}));
}

//===----------------------------------------------------------------------===//
// Lists of tensors
//===----------------------------------------------------------------------===//

/// The tensors of a Tensor[] in the dtype torch.cat promotes them to.
static SmallVector<std::string> promotedList(T &t, Value *list) {
  std::vector<Operand> elements = t.listElements(list);
  if (elements.empty())
    fail("the tensor list is empty");
  at::ScalarType type = t.dtypeOf(elements.front());
  for (const Operand &element : elements)
    type = at::promoteTypes(type, t.dtypeOf(element));
  SmallVector<std::string> tensors;
  for (const Operand &element : elements)
    tensors.push_back(t.tensorAs(element, type));
  return tensors;
}

static void translateCat(T &t, Node *node) {
  SmallVector<std::string> tensors = promotedList(t, node->input(0));
  int64_t rank = t.onnx.rank(tensors.front());
  bool stack = node->kind() == aten::stack;
  int64_t dim = t.normalizeDim(t.getInt(node->input(1)), rank + stack);
  if (stack)
    for (std::string &tensor : tensors)
      tensor = t.onnx.op("Unsqueeze", {tensor, t.onnx.constantInts({dim})});
  setResult(t, node, t.onnx.op("Concat", tensors, {intAttr("axis", dim)}));
}

static void translateUnbind(T &t, Node *node) {
  std::string input = t.tensor(node->input(0));
  SmallVector<int64_t> dims = t.onnx.shape(input);
  int64_t dim = t.normalizeDim(t.getInt(node->input(1)), dims.size());
  // A dynamic size (rows of nonzero) is what the trace unpacked: torch.onnx
  // splits into that many, and so does this.
  std::optional<int64_t> count =
      dims[dim] >= 0 ? std::optional(dims[dim]) : unpackedCount(node->output());
  if (!count)
    fail("unbinding dimension " + Twine(dim) +
         " needs its size, which is only known at run time");
  t.set(node->output(), Operand::list(unbind(t, input, dim, *count)));
}

/// split (by size or sizes) and chunk, on a dim of static size.
static void translateSplit(T &t, Node *node) {
  std::string input = t.tensor(node->input(0));
  SmallVector<int64_t> dims = t.onnx.shape(input);
  int64_t dim = t.normalizeDim(t.getInt(node->input(2)), dims.size());
  if (dims[dim] < 0)
    fail("splitting dimension " + Twine(dim) +
         " needs its static size, which is only known at run time");
  SmallVector<int64_t> sizes;
  if (node->kind() == aten::split_with_sizes ||
      t.knownValue(node->input(1)).isIntList()) {
    sizes = t.getIntList(node->input(1));
  } else {
    int64_t size = t.getInt(node->input(1));
    if (node->kind() == aten::chunk) // chunks of ceil(n / chunks)
      size = (dims[dim] + size - 1) / size;
    for (int64_t begin = 0; begin < dims[dim]; begin += size)
      sizes.push_back(std::min(size, dims[dim] - begin));
  }
  SmallVector<std::string> parts =
      t.onnx.addNode("Split", {input, t.onnx.constantInts(sizes)},
                     {intAttr("axis", dim)}, sizes.size());
  std::vector<Operand> results;
  for (const std::string &part : parts)
    results.push_back(Operand::tensor(part));
  t.set(node->output(), Operand::list(std::move(results)));
}

//===----------------------------------------------------------------------===//
// Factories
//===----------------------------------------------------------------------===//

/// The dtype torch gives a tensor filled with `fill` when none is given.
static at::ScalarType defaultDtypeFor(T &t, const Operand &fill) {
  at::ScalarType type = t.dtypeOf(fill);
  return at::isFloatingType(type) ? at::kFloat : type;
}

/// zeros, ones, full, empty, their _like and new_ forms, and zero_ and
/// fill_ made functional.
static void translateFilled(T &t, Node *node) {
  StringRef name = node->kind().toUnqualString();
  bool like = name.ends_with("_like") || name == "zero" || name == "fill";
  bool fromSelf = like || name.starts_with("new_");
  std::string shape = like ? t.onnx.shapeOf(t.tensor(node->input(0)))
                           : t.intListTensor(node->input(fromSelf ? 1 : 0));

  Value *fillValue =
      t.namedInput(node, name == "fill" ? "value" : "fill_value");
  Operand fill = Operand::known(int64_t(name.contains("ones")));
  if (fillValue)
    fill = t.operand(fillValue);

  std::optional<at::ScalarType> type =
      t.getOptionalDtype(t.namedInput(node, "dtype"));
  if (!type)
    type = fromSelf    ? t.dtypeOf(node->input(0))
           : fillValue ? defaultDtypeFor(t, fill)
                       : at::kFloat;
  if (fill.isKnown()) {
    at::Tensor value =
        at::full({1}, fill.value.toScalar(), at::TensorOptions().dtype(*type));
    setResult(t, node, t.onnx.constantOfShape(shape, value));
    return;
  }
  setResult(t, node, t.onnx.op("Expand", {t.tensorAs(fill, *type), shape}));
}

static void translateArange(T &t, Node *node) {
  Value *start = t.namedInput(node, "start"), *end = t.namedInput(node, "end"),
        *step = t.namedInput(node, "step");
  std::optional<at::ScalarType> type =
      t.getOptionalDtype(t.namedInput(node, "dtype"));
  if (!type) {
    // Integers unless some bound is a float, as in torch.
    type = at::kLong;
    for (Value *bound : {start, end, step})
      if (bound && at::isFloatingType(t.dtypeOf(bound)))
        type = at::kFloat;
  }
  auto bound = [&](Value *value, int64_t otherwise) {
    return value ? t.tensorAs(value, *type)
                 : t.onnx.constantScalar(otherwise, *type);
  };
  setResult(
      t, node,
      t.onnx.op("Range", {bound(start, 0), bound(end, 0), bound(step, 1)}));
}

static void translateTriangle(T &t, Node *node) {
  std::string diagonal = node->inputs().size() > 1
                             ? intAs0D(t, node->input(1))
                             : t.onnx.constantScalar(0, at::kLong);
  setResult(t, node,
            t.onnx.op("Trilu", {t.tensor(node->input(0)), diagonal},
                      {intAttr("upper", node->kind() == aten::triu)}));
}

//===----------------------------------------------------------------------===//
// The table
//===----------------------------------------------------------------------===//

bool torchscript::isTensorFactory(c10::Symbol kind) {
  static const c10::Symbol kinds[] = {
      aten::zeros,      aten::ones,      aten::full,      aten::empty,
      aten::zeros_like, aten::ones_like, aten::full_like, aten::empty_like,
      aten::new_zeros,  aten::new_ones,  aten::new_full,  aten::new_empty,
      aten::arange};
  return llvm::is_contained(kinds, kind);
}

/// index_put (x[i0, i1, ...] = values, or += with accumulate) with index
/// tensors for the leading dims: ScatterND with the indices stacked on a
/// last axis and the values broadcast to the indexed rows.
static void translateIndexPut(T &t, Node *node) {
  std::string self = t.tensor(node->input(0));
  int64_t rank = t.onnx.rank(self);
  SmallVector<std::string> indices;
  for (const Operand &element : t.listElements(node->input(1))) {
    if (element.isKnown() && element.value.isNone())
      fail("index_put with ':' before or between index tensors is not "
           "supported");
    std::string index = t.tensor(element);
    at::ScalarType type = t.onnx.elementType(index);
    if (type == at::kBool || type == at::kByte) {
      if (t.onnx.rank(index) != 1 || !indices.empty())
        fail("index_put with a mask is only supported as the one index of "
             "rank 1");
      index = t.onnx.op("Squeeze",
                        {t.onnx.op("NonZero", {t.onnx.cast(index, at::kBool)}),
                         t.onnx.constantInts({0})});
    }
    indices.push_back(t.onnx.cast(index, at::kLong));
  }
  int64_t count = indices.size();
  if (count == 0 || count > rank)
    fail("index_put with " + Twine(count) + " indices into rank " +
         Twine(rank));
  // Broadcast the index tensors to one shape.
  std::string indexShape = t.onnx.shapeOf(indices.front());
  for (const std::string &index : llvm::drop_begin(indices))
    indexShape = t.onnx.shapeOf(
        t.onnx.op("Add", {t.onnx.op("ConstantOfShape", {indexShape}),
                          t.onnx.op("ConstantOfShape",
                                    {t.onnx.shapeOf(index)})}));
  SmallVector<std::string> stacked;
  for (const std::string &index : indices)
    stacked.push_back(t.onnx.op(
        "Unsqueeze", {t.onnx.op("Expand", {index, indexShape}),
                      t.onnx.constantInts({-1})}));
  std::string index = stacked.size() == 1
                          ? stacked.front()
                          : t.onnx.op("Concat", stacked, {intAttr("axis", -1)});
  std::string rowShape;
  if (count < rank)
    rowShape = t.onnx.op(
      "Slice", {t.onnx.shapeOf(self), t.onnx.constantInts({count}),
                t.onnx.constantInts({rank}), t.onnx.constantInts({0})});
  std::string values = t.onnx.op(
      "Expand", {t.tensorAs(node->input(2), t.onnx.elementType(self)),
                 count == rank ? indexShape
                               : t.onnx.op("Concat", {indexShape, rowShape},
                                           {intAttr("axis", 0)})});
  SmallVector<::ONNX_NAMESPACE::AttributeProto> attrs;
  if (t.getBool(node->input(3)))
    attrs.push_back(stringAttr("reduction", "add"));
  setResult(t, node, t.onnx.op("ScatterND", {self, index, values}, attrs));
}

/// base with `src` written over base[..., start:end, ...] along `dim`
/// (step 1): the parts before and after, concatenated around it. Parts that
/// static bounds make empty are left out.
static std::string writeSlice(T &t, const std::string &base,
                              const std::string &src, int64_t dim,
                              const std::string &start,
                              const std::string &end, bool fromStart,
                              bool toEnd) {
  std::string axis = t.onnx.constantInts({dim});
  SmallVector<std::string> parts;
  if (!fromStart)
    parts.push_back(t.onnx.op(
        "Slice", {base, t.onnx.constantInts({0}), start, axis}));
  parts.push_back(t.onnx.cast(src, t.onnx.elementType(base)));
  if (!toEnd)
    parts.push_back(t.onnx.op(
        "Slice", {base, end, t.onnx.constantInts({kInt64Max}), axis}));
  if (parts.size() == 1)
    return parts.front();
  return t.onnx.op("Concat", parts, {intAttr("axis", dim)});
}

/// select_scatter(base, src, dim, index): what writing through a select
/// view becomes.
static void translateSelectScatter(T &t, Node *node) {
  std::string base = t.tensor(node->input(0));
  SmallVector<int64_t> dims = t.onnx.shape(base);
  int64_t dim = t.normalizeDim(t.getInt(node->input(2)), dims.size());
  int64_t index = t.getInt(node->input(3));
  if (index < 0) {
    if (dims[dim] < 0)
      fail("select_scatter with a negative index into a dynamic dim");
    index += dims[dim];
  }
  std::string src = t.onnx.op(
      "Unsqueeze", {t.tensor(node->input(1)), t.onnx.constantInts({dim})});
  setResult(t, node,
            writeSlice(t, base, src, dim, t.onnx.constantInts({index}),
                       t.onnx.constantInts({index + 1}), index == 0,
                       dims[dim] >= 0 && index + 1 >= dims[dim]));
}

/// slice_scatter(base, src, dim, start, end, step=1).
static void translateSliceScatter(T &t, Node *node) {
  std::string base = t.tensor(node->input(0));
  SmallVector<int64_t> dims = t.onnx.shape(base);
  int64_t dim = t.normalizeDim(t.getInt(node->input(2)), dims.size());
  if (t.getInt(node->input(5)) != 1)
    fail("slice_scatter with a step other than 1 is not supported");
  Value *start = node->input(3), *end = node->input(4);
  std::string starts =
      t.isNone(start) ? t.onnx.constantInts({0}) : intAs1D(t, start);
  std::string ends =
      t.isNone(end) ? t.onnx.constantInts({kInt64Max}) : intAs1D(t, end);
  bool fromStart =
      t.isNone(start) || (t.operand(start).isKnown() && t.getInt(start) == 0);
  bool toEnd = t.isNone(end) ||
               (t.operand(end).isKnown() && dims[dim] >= 0 &&
                t.getInt(end) >= dims[dim]);
  setResult(t, node,
            writeSlice(t, base, t.tensor(node->input(1)), dim, starts, ends,
                       fromStart, toEnd));
}

void torchscript::addShapeHandlers(HandlerMap &handlers) {
  addHandler(handlers,
             {aten::contiguous, aten::clone, aten::detach, aten::alias,
              aten::lift_fresh},
             translateIdentity);
  addHandler(handlers,
             {aten::dropout, aten::feature_dropout, aten::alpha_dropout},
             translateDropout);
  addHandler(handlers,
             {aten::view, aten::reshape, aten::view_as, aten::reshape_as},
             translateReshape);
  addHandler(handlers, {aten::flatten}, translateFlatten);
  addHandler(handlers, {aten::unsqueeze}, translateUnsqueeze);
  addHandler(handlers, {aten::squeeze}, translateSqueeze);
  addHandler(handlers, {aten::permute}, translatePermute);
  addHandler(handlers, {aten::transpose, aten::t, aten::numpy_T},
             translateTranspose);
  addHandler(handlers, {aten::expand, aten::expand_as}, translateExpand);
  addHandler(handlers, {aten::size}, translateSize);
  addHandler(handlers, {aten::dim}, translateDim);
  addHandler(handlers, {aten::len}, translateLen);
  addHandler(handlers, {c10::Symbol::fromQualString("aten::numel")},
             translateNumel);
  addHandler(handlers, {aten::where}, translateWhere);
  addHandler(handlers, {aten::nonzero}, translateNonZero);
  addHandler(handlers, {aten::select}, translateSelect);
  addHandler(handlers, {aten::slice}, translateSlice);
  addHandler(handlers, {aten::index_select}, translateIndexSelect);
  addHandler(handlers, {aten::index}, translateIndex);
  addHandler(handlers, {aten::gather}, translateGather);
  addHandler(handlers, {aten::scatter, aten::scatter_add}, translateScatter);
  addHandler(handlers, {aten::index_add}, translateIndexAdd);
  addHandler(handlers, {aten::index_put}, translateIndexPut);
  addHandler(handlers, {aten::select_scatter}, translateSelectScatter);
  addHandler(handlers, {aten::slice_scatter}, translateSliceScatter);
  addHandler(handlers, {aten::cat, aten::stack}, translateCat);
  addHandler(handlers, {aten::unbind}, translateUnbind);
  addHandler(handlers, {aten::split, aten::split_with_sizes, aten::chunk},
             translateSplit);
  addHandler(handlers,
             {aten::zeros, aten::ones, aten::full, aten::empty,
              aten::zeros_like, aten::ones_like, aten::full_like,
              aten::empty_like, aten::new_zeros, aten::new_ones, aten::new_full,
              aten::new_empty, aten::zero, aten::fill},
             translateFilled);
  addHandler(handlers, {aten::arange}, translateArange);
  addHandler(handlers, {aten::tril, aten::triu}, translateTriangle);
}
