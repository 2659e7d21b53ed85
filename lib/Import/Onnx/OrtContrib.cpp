//===- OrtContrib.cpp - ONNX Runtime's contrib ops as standard ops --------===//
//
// Each expansion follows ONNX Runtime's CPU kernel (contrib_ops/cpu), not
// only the op's documentation: where the two differ (RotaryEmbedding indexes
// its caches with a row stride of rotary_embedding_dim / 2 whatever their
// width; SkipLayerNormalization never writes its mean and inv_std_var
// outputs) the kernel wins, since that is what the model's outputs were
// checked against. Shapes are not known yet, so sizes are read at run time
// (Shape, Gather) and fold once the shapes are static. Ranks, which Transpose
// and the axis arithmetic need, come from the graph's value_info, inputs and
// initializers.
//
//===----------------------------------------------------------------------===//

#include "OrtContrib.h"
#include "GraphImporter.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

using namespace mlir;
using namespace mlir::moe::onnx_import;
using ::ONNX_NAMESPACE::AttributeProto;
using ::ONNX_NAMESPACE::GraphProto;
using ::ONNX_NAMESPACE::ModelProto;
using ::ONNX_NAMESPACE::NodeProto;
using ::ONNX_NAMESPACE::TensorProto;
using ::ONNX_NAMESPACE::ValueInfoProto;

/// The default-domain opset added to a model that imports none.
static constexpr int64_t kDefaultOpset = 17;

namespace {
/// What is known about a value before shape inference.
struct ValueFacts {
  std::optional<int64_t> rank;
  int32_t elemType = TensorProto::UNDEFINED;
};

/// Rewrites one graph's contrib nodes into a new node list.
class Expander {
public:
  Expander(GraphProto &graph, int64_t opset, Location fileLoc)
      : graph(graph), opset(opset), fileLoc(fileLoc) {}

  LogicalResult run();

private:
  // Collecting facts.
  void noteValueInfo(const ValueInfoProto &info);
  void noteTensor(const std::string &name, const TensorProto &tensor);
  std::optional<int64_t> rankOf(const std::string &name) const;
  int32_t elemTypeOf(const std::string &name) const;

  // Emitting nodes for the contrib node `cur`.
  std::string freshName(StringRef hint);
  NodeProto &add(StringRef opType, ArrayRef<std::string> inputs,
                 ArrayRef<std::string> outputs);
  std::string op(StringRef opType, ArrayRef<std::string> inputs);
  std::string op(StringRef opType, ArrayRef<std::string> inputs,
                 function_ref<void(NodeProto &)> setAttrs);
  void identity(const std::string &from, const std::string &to);
  void bindOutputs();
  void bindOutput(const std::string &from, const std::string &to);
  std::string constInts(ArrayRef<int64_t> values, bool scalar = false);
  std::string constInt32(int32_t value);
  std::string constFloat(double value, int32_t elemType);
  std::string dim(const std::string &value, int64_t index);
  std::string dimScalar(const std::string &value, int64_t index);
  std::string reduceMean(const std::string &value, ArrayRef<int64_t> axes);
  std::string slice(const std::string &value, const std::string &start,
                    const std::string &end, int64_t axis);
  std::string transpose(const std::string &value, ArrayRef<int64_t> perm);

  // Helpers on `cur`.
  InFlightDiagnostic fail() { return emitNodeError(*cur, fileLoc); }
  std::string input(int index) const {
    return index < cur->input_size() ? cur->input(index) : std::string();
  }
  std::string output(int index) const {
    return index < cur->output_size() ? cur->output(index) : std::string();
  }
  bool isUsed(const std::string &name) const {
    return !name.empty() && usedNames.contains(name);
  }
  LogicalResult checkAttributes(ArrayRef<StringRef> known);
  LogicalResult checkInputs(ArrayRef<int> supported, StringRef why);
  LogicalResult requireRank(const std::string &name, StringRef role,
                            ArrayRef<int64_t> allowed, int64_t &rank);
  const AttributeProto *attr(StringRef name) const;
  int64_t intAttr(StringRef name, int64_t dflt) const;
  float floatAttr(StringRef name, float dflt) const;

  // The expansions.
  LogicalResult expand(const NodeProto &node, bool &expanded);
  LogicalResult expandSimplifiedLayerNorm();
  LogicalResult expandLayerNorm();
  LogicalResult expandSkipLayerNorm(bool simplified);
  LogicalResult expandFusedMatMul();
  LogicalResult expandGelu(StringRef kind);
  LogicalResult expandRotaryEmbedding();
  LogicalResult expandMultiHeadAttention();
  std::string normalize(const std::string &x, ArrayRef<int64_t> axes,
                        float epsilon, bool simplified, std::string *meanOut,
                        std::string *invStdOut);

  GraphProto &graph;
  int64_t opset;
  Location fileLoc;
  const NodeProto *cur = nullptr;
  std::vector<NodeProto> result;
  llvm::StringSet<> names;
  llvm::StringSet<> usedNames;
  llvm::StringMap<ValueFacts> facts;
  unsigned counter = 0;
  /// Where the nodes of the current expansion start in `result`.
  size_t expansionStart = 0;
  /// The current expansion's (value, contrib output) pairs.
  std::vector<std::pair<std::string, std::string>> bindings;
};
} // namespace

//===----------------------------------------------------------------------===//
// Facts and names
//===----------------------------------------------------------------------===//

void Expander::noteValueInfo(const ValueInfoProto &info) {
  names.insert(info.name());
  if (!info.type().has_tensor_type())
    return;
  const auto &tensorType = info.type().tensor_type();
  ValueFacts &fact = facts[info.name()];
  if (tensorType.elem_type() != TensorProto::UNDEFINED)
    fact.elemType = tensorType.elem_type();
  if (tensorType.has_shape())
    fact.rank = tensorType.shape().dim_size();
}

void Expander::noteTensor(const std::string &name, const TensorProto &tensor) {
  names.insert(name);
  ValueFacts &fact = facts[name];
  fact.rank = tensor.dims_size();
  fact.elemType = tensor.data_type();
}

std::optional<int64_t> Expander::rankOf(const std::string &name) const {
  auto it = facts.find(name);
  return it == facts.end() ? std::nullopt : it->second.rank;
}

int32_t Expander::elemTypeOf(const std::string &name) const {
  auto it = facts.find(name);
  if (it == facts.end() || it->second.elemType == TensorProto::UNDEFINED)
    return TensorProto::FLOAT;
  return it->second.elemType;
}

std::string Expander::freshName(StringRef hint) {
  std::string name;
  do {
    name = (cur->name() + "/" + hint + "_" + Twine(counter++)).str();
  } while (names.contains(name));
  names.insert(name);
  return name;
}

NodeProto &Expander::add(StringRef opType, ArrayRef<std::string> inputs,
                         ArrayRef<std::string> outputs) {
  NodeProto &node = result.emplace_back();
  node.set_op_type(opType.str());
  node.set_name(freshName(opType));
  for (const std::string &in : inputs)
    node.add_input(in);
  for (const std::string &out : outputs)
    node.add_output(out);
  // The contrib node's metadata is not copied to each node of its
  // expansion: nothing reads it, and a model with thousands of entries made
  // the copies quadratic (a fuzzer's timeout).
  return node;
}

std::string Expander::op(StringRef opType, ArrayRef<std::string> inputs) {
  std::string out = freshName(opType.lower());
  add(opType, inputs, {out});
  return out;
}

std::string Expander::op(StringRef opType, ArrayRef<std::string> inputs,
                         function_ref<void(NodeProto &)> setAttrs) {
  std::string out = freshName(opType.lower());
  setAttrs(add(opType, inputs, {out}));
  return out;
}

/// Binds the contrib node's output `to` to `from` once the expansion is
/// complete (bindOutputs).
void Expander::identity(const std::string &from, const std::string &to) {
  bindings.emplace_back(from, to);
}

/// Renames `from` to `to` where this expansion made `from` and nothing of it
/// reads it, else adds an Identity.
void Expander::bindOutputs() {
  for (auto &[from, to] : bindings)
    bindOutput(from, to);
  bindings.clear();
}

void Expander::bindOutput(const std::string &from, const std::string &to) {
  NodeProto *producer = nullptr;
  bool read = false;
  for (size_t i = expansionStart; i < result.size(); ++i) {
    for (const std::string &in : result[i].input())
      read |= in == from;
    for (std::string &out : *result[i].mutable_output())
      if (out == from)
        producer = &result[i];
  }
  if (!producer || read) {
    add("Identity", {from}, {to});
    return;
  }
  for (std::string &out : *producer->mutable_output())
    if (out == from)
      out = to;
}

static void setInt(NodeProto &node, StringRef name, int64_t value) {
  AttributeProto *attr = node.add_attribute();
  attr->set_name(name.str());
  attr->set_type(AttributeProto::INT);
  attr->set_i(value);
}

static void setInts(NodeProto &node, StringRef name, ArrayRef<int64_t> values) {
  AttributeProto *attr = node.add_attribute();
  attr->set_name(name.str());
  attr->set_type(AttributeProto::INTS);
  for (int64_t value : values)
    attr->add_ints(value);
}

static AttributeProto &addTensorAttr(NodeProto &node) {
  AttributeProto *attr = node.add_attribute();
  attr->set_name("value");
  attr->set_type(AttributeProto::TENSOR);
  return *attr;
}

std::string Expander::constInts(ArrayRef<int64_t> values, bool scalar) {
  std::string out = freshName("const");
  TensorProto *tensor = addTensorAttr(add("Constant", {}, {out})).mutable_t();
  tensor->set_data_type(TensorProto::INT64);
  if (!scalar)
    tensor->add_dims(static_cast<int64_t>(values.size()));
  for (int64_t value : values)
    tensor->add_int64_data(value);
  return out;
}

std::string Expander::constInt32(int32_t value) {
  std::string out = freshName("const");
  TensorProto *tensor = addTensorAttr(add("Constant", {}, {out})).mutable_t();
  tensor->set_data_type(TensorProto::INT32);
  tensor->add_int32_data(value);
  return out;
}

/// A scalar of `elemType`, written as a float and cast for the other
/// floating-point types (their encodings are not float_data's).
std::string Expander::constFloat(double value, int32_t elemType) {
  std::string out = freshName("const");
  TensorProto *tensor = addTensorAttr(add("Constant", {}, {out})).mutable_t();
  if (elemType == TensorProto::DOUBLE) {
    tensor->set_data_type(TensorProto::DOUBLE);
    tensor->add_double_data(value);
    return out;
  }
  tensor->set_data_type(TensorProto::FLOAT);
  tensor->add_float_data(static_cast<float>(value));
  if (elemType == TensorProto::FLOAT)
    return out;
  return op("Cast", {out}, [&](NodeProto &n) { setInt(n, "to", elemType); });
}

/// Dimension `index` of `value` as a one-element vector.
std::string Expander::dim(const std::string &value, int64_t index) {
  return op("Gather", {op("Shape", {value}), constInts({index})});
}

/// Dimension `index` of `value` as a scalar.
std::string Expander::dimScalar(const std::string &value, int64_t index) {
  return op("Gather", {op("Shape", {value}), constInts({index}, true)});
}

std::string Expander::reduceMean(const std::string &value,
                                 ArrayRef<int64_t> axes) {
  // ReduceMean's axes became an input in opset 18.
  if (opset >= 18)
    return op("ReduceMean", {value, constInts(axes)},
              [&](NodeProto &n) { setInt(n, "keepdims", 1); });
  return op("ReduceMean", {value}, [&](NodeProto &n) {
    setInts(n, "axes", axes);
    setInt(n, "keepdims", 1);
  });
}

std::string Expander::slice(const std::string &value, const std::string &start,
                            const std::string &end, int64_t axis) {
  return op("Slice", {value, start, end, constInts({axis})});
}

std::string Expander::transpose(const std::string &value,
                                ArrayRef<int64_t> perm) {
  return op("Transpose", {value},
            [&](NodeProto &n) { setInts(n, "perm", perm); });
}

//===----------------------------------------------------------------------===//
// Checks on the node being expanded
//===----------------------------------------------------------------------===//

const AttributeProto *Expander::attr(StringRef name) const {
  for (const AttributeProto &a : cur->attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t Expander::intAttr(StringRef name, int64_t dflt) const {
  const AttributeProto *a = attr(name);
  return a ? a->i() : dflt;
}

float Expander::floatAttr(StringRef name, float dflt) const {
  const AttributeProto *a = attr(name);
  return a ? a->f() : dflt;
}

LogicalResult Expander::checkAttributes(ArrayRef<StringRef> known) {
  for (const AttributeProto &a : cur->attribute())
    if (!llvm::is_contained(known, StringRef(a.name())))
      return fail() << "unsupported attribute '" << a.name() << "'";
  return success();
}

/// Fails on a present input whose index is not in `supported`.
LogicalResult Expander::checkInputs(ArrayRef<int> supported, StringRef op) {
  for (int i = 0; i < cur->input_size(); ++i)
    if (!cur->input(i).empty() && !llvm::is_contained(supported, i))
      return fail() << "input " << i << " ('" << cur->input(i)
                    << "') is not supported by the " << op << " expansion";
  return success();
}

LogicalResult Expander::requireRank(const std::string &name, StringRef role,
                                    ArrayRef<int64_t> allowed, int64_t &rank) {
  std::optional<int64_t> known = rankOf(name);
  if (!known)
    return fail() << "the rank of " << role << " '" << name
                  << "' is unknown (the graph has no value_info for it)";
  if (!llvm::is_contained(allowed, *known))
    return fail() << role << " '" << name << "' of rank " << *known
                  << " is not supported";
  rank = *known;
  return success();
}

//===----------------------------------------------------------------------===//
// Normalizations
//===----------------------------------------------------------------------===//

/// ONNX Runtime's layer_norm_impl / skip_layer_norm: the variance is
/// E[x^2] - E[x]^2 and the output divides by sqrt(var + eps).
std::string Expander::normalize(const std::string &x, ArrayRef<int64_t> axes,
                                float epsilon, bool simplified,
                                std::string *meanOut, std::string *invStdOut) {
  int32_t type = elemTypeOf(x);
  std::string meanSquare = reduceMean(op("Mul", {x, x}), axes);
  std::string centered = x, variance = meanSquare, mean;
  if (!simplified) {
    mean = reduceMean(x, axes);
    variance = op("Sub", {meanSquare, op("Mul", {mean, mean})});
    centered = op("Sub", {x, mean});
  }
  std::string stdDev =
      op("Sqrt", {op("Add", {variance, constFloat(epsilon, type)})});
  if (meanOut)
    *meanOut = mean;
  if (invStdOut)
    *invStdOut = op("Reciprocal", {stdDev});
  return op("Div", {centered, stdDev});
}

/// The axes from `axis` to the last, negative; fails on a positive axis of
/// an input whose rank is unknown, and on more trailing axes than a tensor
/// has (or, rank unknown, than any tensor of a model has: a fuzzed axis of
/// -2^31 would list two billion).
static std::optional<SmallVector<int64_t>>
getTrailingAxes(int64_t axis, std::optional<int64_t> rank) {
  constexpr int64_t kMaxRank = 64;
  if (axis >= 0) {
    if (!rank || axis >= *rank)
      return std::nullopt;
    axis -= *rank;
  }
  if (axis < -kMaxRank || (rank && -axis > *rank))
    return std::nullopt;
  SmallVector<int64_t> axes;
  for (int64_t a = axis; a < 0; ++a)
    axes.push_back(a);
  return axes;
}

/// Casts `value` to float when `stash` asks for float statistics of a
/// narrower type; returns the type to cast the result back to, if any.
static bool needsStash(int64_t stashType, int32_t elemType) {
  return stashType == 1 && (elemType == TensorProto::FLOAT16 ||
                            elemType == TensorProto::BFLOAT16);
}

LogicalResult Expander::expandSimplifiedLayerNorm() {
  if (failed(checkAttributes({"axis", "epsilon", "stash_type"})) ||
      failed(checkInputs({0, 1}, "SimplifiedLayerNormalization")))
    return failure();
  if (cur->output_size() > 2)
    return fail() << "unexpected output 2";
  std::string x = input(0), scale = input(1);
  std::optional<SmallVector<int64_t>> axes =
      getTrailingAxes(intAttr("axis", -1), rankOf(x));
  if (!axes)
    return fail() << "axis " << intAttr("axis", -1)
                  << " needs the rank of input '" << x << "', which is unknown";
  int32_t type = elemTypeOf(x);
  bool stash = needsStash(intAttr("stash_type", 1), type);
  if (stash) {
    auto toFloat = [&](NodeProto &n) { setInt(n, "to", TensorProto::FLOAT); };
    x = op("Cast", {x}, toFloat);
    scale = op("Cast", {scale}, toFloat);
    facts[x].elemType = TensorProto::FLOAT;
  }
  std::string invStd;
  std::string y =
      op("Mul", {normalize(x, *axes, floatAttr("epsilon", 1e-5f), true,
                           nullptr, isUsed(output(1)) ? &invStd : nullptr),
                 scale});
  auto back = [&](NodeProto &n) { setInt(n, "to", type); };
  if (stash)
    y = op("Cast", {y}, back);
  identity(y, output(0));
  // inv_std_var stays float, as the kernel's U type.
  if (isUsed(output(1)))
    identity(invStd, output(1));
  return success();
}

/// LayerNormalization in the default domain before opset 17 is ONNX
/// Runtime's own (version 1 of its contrib registration).
LogicalResult Expander::expandLayerNorm() {
  if (failed(checkAttributes({"axis", "epsilon", "stash_type"})) ||
      failed(checkInputs({0, 1, 2}, "LayerNormalization")))
    return failure();
  std::string x = input(0), scale = input(1), bias = input(2);
  std::optional<SmallVector<int64_t>> axes =
      getTrailingAxes(intAttr("axis", -1), rankOf(x));
  if (!axes)
    return fail() << "axis " << intAttr("axis", -1)
                  << " needs the rank of input '" << x << "', which is unknown";
  int32_t type = elemTypeOf(x);
  bool stash = needsStash(intAttr("stash_type", 1), type);
  auto toFloat = [&](NodeProto &n) { setInt(n, "to", TensorProto::FLOAT); };
  if (stash) {
    x = op("Cast", {x}, toFloat);
    scale = op("Cast", {scale}, toFloat);
    if (!bias.empty())
      bias = op("Cast", {bias}, toFloat);
    facts[x].elemType = TensorProto::FLOAT;
  }
  std::string mean, invStd;
  std::string y = op("Mul", {normalize(x, *axes, floatAttr("epsilon", 1e-5f),
                                       false, &mean, &invStd),
                             scale});
  if (!bias.empty())
    y = op("Add", {y, bias});
  if (stash)
    y = op("Cast", {y}, [&](NodeProto &n) { setInt(n, "to", type); });
  identity(y, output(0));
  if (isUsed(output(1)))
    identity(mean, output(1));
  if (isUsed(output(2)))
    identity(invStd, output(2));
  return success();
}

/// Skip[Simplified]LayerNormalization (skip_layer_norm.cc): the sum
/// input + skip (+ bias) over the last axis, `skip` broadcast over the
/// leading rows. The kernel computes in float for float16.
LogicalResult Expander::expandSkipLayerNorm(bool simplified) {
  if (failed(checkAttributes({"epsilon"})))
    return failure();
  // SkipSimplifiedLayerNormalization has no beta: its input 3 is the bias.
  int betaIndex = simplified ? -1 : 3, biasIndex = simplified ? 3 : 4;
  if (failed(checkInputs(simplified ? ArrayRef<int>{0, 1, 2, 3}
                                    : ArrayRef<int>{0, 1, 2, 3, 4},
                         cur->op_type())))
    return failure();
  for (int i : {1, 2})
    if (isUsed(output(i)))
      return fail() << "output " << i << " ('" << output(i)
                    << "') is not computed by ONNX Runtime's kernels";
  if (cur->output_size() > 4)
    return fail() << "unexpected output 4";
  int32_t type = elemTypeOf(input(0));
  bool half = needsStash(1, type);
  auto toFloat = [&](const std::string &v) {
    if (v.empty() || !half)
      return v;
    return op("Cast", {v}, [](NodeProto &n) {
      setInt(n, "to", TensorProto::FLOAT);
    });
  };
  std::string sum = op("Add", {toFloat(input(0)), toFloat(input(1))});
  if (!input(biasIndex).empty())
    sum = op("Add", {sum, toFloat(input(biasIndex))});
  if (half)
    facts[sum].elemType = TensorProto::FLOAT;
  std::string y =
      op("Mul", {normalize(sum, {-1}, floatAttr("epsilon", 1e-12f), simplified,
                           nullptr, nullptr),
                 toFloat(input(2))});
  if (betaIndex >= 0 && !input(betaIndex).empty())
    y = op("Add", {y, toFloat(input(betaIndex))});
  auto back = [&](const std::string &v) {
    if (!half)
      return v;
    return op("Cast", {v}, [&](NodeProto &n) { setInt(n, "to", type); });
  };
  identity(back(y), output(0));
  if (!output(3).empty())
    identity(back(sum), output(3));
  return success();
}

//===----------------------------------------------------------------------===//
// FusedMatMul, Gelu
//===----------------------------------------------------------------------===//

/// alpha * op(A) @ op(B), op transposing the last two axes.
LogicalResult Expander::expandFusedMatMul() {
  if (failed(checkAttributes(
          {"alpha", "transA", "transB", "transBatchA", "transBatchB"})) ||
      failed(checkInputs({0, 1}, "FusedMatMul")))
    return failure();
  for (StringRef name : {"transBatchA", "transBatchB"})
    if (intAttr(name, 0) != 0)
      return fail() << "attribute '" << name << "' = " << intAttr(name, 0)
                    << " is not supported";
  SmallVector<std::string, 2> operands;
  const char *transNames[] = {"transA", "transB"};
  for (int index = 0; index < 2; ++index) {
    std::string value = input(index);
    if (intAttr(transNames[index], 0) != 0) {
      int64_t rank;
      if (failed(requireRank(value, index ? "input B" : "input A",
                             {2, 3, 4, 5, 6}, rank)))
        return failure();
      SmallVector<int64_t> perm;
      for (int64_t i = 0; i < rank; ++i)
        perm.push_back(i);
      std::swap(perm[rank - 1], perm[rank - 2]);
      value = transpose(value, perm);
    }
    operands.push_back(value);
  }
  std::string y = op("MatMul", {operands[0], operands[1]});
  float alpha = floatAttr("alpha", 1.0f);
  if (alpha != 1.0f)
    y = op("Mul", {y, constFloat(alpha, elemTypeOf(input(0)))});
  identity(y, output(0));
  return success();
}

/// com.microsoft Gelu, BiasGelu, FastGelu and QuickGelu.
LogicalResult Expander::expandGelu(StringRef kind) {
  bool quick = kind == "QuickGelu";
  if (failed(checkAttributes(quick ? ArrayRef<StringRef>{"alpha"}
                                   : ArrayRef<StringRef>{})) ||
      failed(checkInputs(kind == "Gelu" || quick ? ArrayRef<int>{0}
                                                 : ArrayRef<int>{0, 1},
                         kind)))
    return failure();
  int32_t type = elemTypeOf(input(0));
  std::string x = input(0);
  if (!input(1).empty())
    x = op("Add", {x, input(1)});
  auto c = [&](double value) { return constFloat(value, type); };
  std::string y;
  if (quick) {
    // x * sigmoid(alpha * x)
    std::string scaled = op("Mul", {x, c(floatAttr("alpha", 1.702f))});
    y = op("Mul", {x, op("Sigmoid", {scaled})});
  } else if (kind == "FastGelu") {
    // 0.5 x (1 + tanh(sqrt(2/pi) x + 0.044715 sqrt(2/pi) x^3))
    constexpr double kAlpha = 0.7978845608028654; // sqrt(2/pi)
    constexpr double kBeta = 0.044715 * kAlpha;
    std::string inner = op(
        "Mul", {x, op("Add", {c(kAlpha), op("Mul", {c(kBeta), op("Mul", {x, x})})})});
    std::string t = op("Add", {op("Tanh", {inner}), c(1.0)});
    y = op("Mul", {op("Mul", {x, c(0.5)}), t});
  } else {
    // 0.5 x (1 + erf(x / sqrt(2)))
    std::string e = op("Erf", {op("Mul", {x, c(M_SQRT1_2)})});
    y = op("Mul", {op("Mul", {x, c(0.5)}), op("Add", {e, c(1.0)})});
  }
  identity(y, output(0));
  return success();
}

//===----------------------------------------------------------------------===//
// RotaryEmbedding
//===----------------------------------------------------------------------===//

/// rotary_embedding.cc: input [B, S, N*H] or [B, N, S, H]; position_ids one
/// element (the first position; row s uses it + s) or [B, S]; each cache is
/// read flat at position * (rotary_dim / 2) + i. The rotary_dim leading
/// channels of each head rotate (halves, or interleaved pairs), the rest pass
/// through. `scale` is not read by the kernels.
LogicalResult Expander::expandRotaryEmbedding() {
  if (failed(checkAttributes({"interleaved", "num_heads", "rotary_embedding_dim",
                              "scale", "is_packed_batching"})) ||
      failed(checkInputs({0, 1, 2, 3}, "RotaryEmbedding")))
    return failure();
  if (intAttr("is_packed_batching", 0) != 0)
    return fail() << "attribute 'is_packed_batching' = "
                  << intAttr("is_packed_batching", 0) << " is not supported";
  for (int i = 0; i < 4; ++i)
    if (input(i).empty())
      return fail() << "input " << i << " is missing";
  int64_t numHeads = intAttr("num_heads", 0);
  int64_t rotaryDim = intAttr("rotary_embedding_dim", 0);
  bool interleaved = intAttr("interleaved", 0) != 0;
  if (rotaryDim > 0 && numHeads <= 0)
    return fail() << "'rotary_embedding_dim' needs 'num_heads'";
  if (rotaryDim % 2 != 0 || rotaryDim < 0)
    return fail() << "'rotary_embedding_dim' = " << rotaryDim
                  << " is not a positive even number";
  int64_t rank;
  if (failed(requireRank(input(0), "input", {3, 4}, rank)))
    return failure();
  std::string x = input(0), positions = input(1), cosCache = input(2),
              sinCache = input(3);

  // Half the rotated channels: a vector [1] and a scalar.
  std::string half, halfScalar;
  if (rotaryDim > 0) {
    half = constInts({rotaryDim / 2});
    halfScalar = constInts({rotaryDim / 2}, true);
  } else {
    half = dim(cosCache, 1);
    halfScalar = dimScalar(cosCache, 1);
  }
  std::string rotated =
      rotaryDim > 0 ? constInts({rotaryDim}) : op("Add", {half, half});

  // The input as [B, S, N, H] or [B, N, S, H].
  std::string heads;
  if (rotaryDim > 0) {
    heads = rank == 3 ? op("Reshape", {x, constInts({0, 0, numHeads, -1})})
                      : op("Reshape", {x, constInts({0, numHeads, 0, -1})});
  } else {
    std::string shape =
        rank == 3 ? op("Concat", {constInts({0, 0, -1}), rotated},
                       [](NodeProto &n) { setInt(n, "axis", 0); })
                  : op("Concat", {constInts({0, -1, 0}), rotated},
                       [](NodeProto &n) { setInt(n, "axis", 0); });
    heads = op("Reshape", {x, shape});
  }
  int64_t seqAxis = rank == 3 ? 1 : 2;

  // Positions [1, S] or [B, S]: a one-element position_ids starts a run.
  // Its rank, where known, picks the form; else it is tested at run time.
  std::string seqLen = dimScalar(x, seqAxis);
  std::string zero = constInts({0}, true), one = constInts({1}, true);
  std::string steps = op("Range", {zero, seqLen, one});
  std::optional<int64_t> posRank = rankOf(positions);
  std::string pos;
  if (posRank && *posRank == 2) {
    pos = positions;
  } else if (posRank) {
    pos = op("Add", {op("Reshape", {positions, constInts({1, 1})}),
                     op("Unsqueeze", {steps, constInts({0})})});
  } else {
    std::string single = op("Equal", {op("Size", {positions}), one});
    std::string width = op("Where", {single, constInts({1}),
                                     op("Unsqueeze", {seqLen, constInts({0})})});
    std::string pos2d =
        op("Reshape", {positions, op("Concat", {constInts({-1}), width},
                                     [](NodeProto &n) { setInt(n, "axis", 0); })});
    std::string offsets =
        op("Mul", {steps, op("Cast", {single}, [](NodeProto &n) {
                     setInt(n, "to", TensorProto::INT64);
                   })});
    pos = op("Add", {pos2d, offsets});
  }

  // Cache rows [P, S, half] from the flat caches, then broadcast over heads.
  std::string index = op(
      "Add", {op("Mul", {op("Unsqueeze", {pos, constInts({-1})}), half}),
              op("Range", {zero, halfScalar, one})});
  auto gatherCache = [&](const std::string &cache) {
    std::string rows =
        op("Gather", {op("Reshape", {cache, constInts({-1})}), index});
    return op("Unsqueeze", {rows, constInts({rank == 3 ? 2 : 1})});
  };
  std::string cos = gatherCache(cosCache), sin = gatherCache(sinCache);

  std::string zeroVec = constInts({0});
  std::string toEnd = constInts({std::numeric_limits<int64_t>::max()});
  std::string rot = slice(heads, zeroVec, rotated, -1);
  std::string pass = slice(heads, rotated, toEnd, -1);
  std::string out;
  if (interleaved) {
    std::string pairs = op("Reshape", {rot, constInts({0, 0, 0, -1, 2})});
    std::string even = slice(pairs, zeroVec, constInts({1}), -1);
    std::string odd = slice(pairs, constInts({1}), constInts({2}), -1);
    std::string cos5 = op("Unsqueeze", {cos, constInts({-1})});
    std::string sin5 = op("Unsqueeze", {sin, constInts({-1})});
    std::string newEven = op("Sub", {op("Mul", {even, cos5}), op("Mul", {odd, sin5})});
    std::string newOdd = op("Add", {op("Mul", {odd, cos5}), op("Mul", {even, sin5})});
    out = op("Reshape",
             {op("Concat", {newEven, newOdd},
                 [](NodeProto &n) { setInt(n, "axis", -1); }),
              constInts({0, 0, 0, -1})});
  } else {
    std::string first = slice(rot, zeroVec, half, -1);
    std::string second = slice(rot, half, rotated, -1);
    std::string newFirst =
        op("Sub", {op("Mul", {first, cos}), op("Mul", {second, sin})});
    std::string newSecond =
        op("Add", {op("Mul", {second, cos}), op("Mul", {first, sin})});
    out = op("Concat", {newFirst, newSecond},
             [](NodeProto &n) { setInt(n, "axis", -1); });
  }
  // Without rotary_embedding_dim the whole head rotates.
  if (rotaryDim > 0)
    out = op("Concat", {out, pass}, [](NodeProto &n) { setInt(n, "axis", -1); });
  identity(op("Reshape", {out, op("Shape", {x})}), output(0));
  facts[output(0)].rank = rank;
  return success();
}

//===----------------------------------------------------------------------===//
// MultiHeadAttention
//===----------------------------------------------------------------------===//

/// multihead_attention.cc for query [B, S, D], key and value [B, T, D] or
/// [B, N, T, H] (BNSH; not packed):
/// softmax(scale * Q K^T + attention_bias + mask) V per head, with the
/// optional packed bias [D + D + Dv], past_key/past_value [B, N, P, H]
/// prepended to K/V (and returned as present_key/value), and a causal mask of
/// mask_filter_value (the kernel adds it to the scores) when unidirectional.
LogicalResult Expander::expandMultiHeadAttention() {
  if (failed(checkAttributes({"num_heads", "scale", "mask_filter_value",
                              "unidirectional"})) ||
      failed(checkInputs({0, 1, 2, 3, 5, 6, 7}, "MultiHeadAttention")))
    return failure();
  int64_t numHeads = intAttr("num_heads", 0);
  if (numHeads <= 0)
    return fail() << "'num_heads' must be positive";
  if (input(1).empty() || input(2).empty())
    return fail() << "packed QKV (no separate key and value) is not supported";
  if (input(6).empty() != input(7).empty())
    return fail() << "past_key and past_value must be given together";
  for (int i = 3; i < cur->output_size(); ++i)
    if (!output(i).empty())
      return fail() << "output " << i << " ('" << output(i)
                    << "') is not supported";
  // Key and value [B, T, D], or already split into heads [B, N, T, H]
  // (BNSH: what the fusion writes when the keys come out of a cache or a
  // grouped-query repeat).
  int64_t rank, keyRank, valueRank;
  if (failed(requireRank(input(0), "query", {3}, rank)) ||
      failed(requireRank(input(1), "key", {3, 4}, keyRank)) ||
      failed(requireRank(input(2), "value", {3, 4}, valueRank)))
    return failure();
  if (keyRank != valueRank)
    return fail() << "key of rank " << keyRank << " with value of rank "
                  << valueRank << " is not supported";
  bool keysInHeads = keyRank == 4;
  if (keysInHeads && !input(3).empty())
    return fail() << "a bias with key and value in heads (BNSH) is not "
                     "supported";
  if (keysInHeads && !input(6).empty())
    return fail() << "past_key with key and value in heads (BNSH) is not "
                     "supported";
  // ONNX Runtime's causal mask over keys in heads follows neither form of
  // the one above (checked against its CPU kernel); the exporter masks
  // through the bias instead.
  if (keysInHeads && intAttr("unidirectional", 0) != 0)
    return fail() << "unidirectional with key and value in heads (BNSH) is "
                     "not supported";
  int32_t type = elemTypeOf(input(0));
  std::string q = input(0), k = input(1), v = input(2);

  if (!input(3).empty()) {
    std::string hidden = dim(q, 2);
    std::string twice = op("Add", {hidden, hidden});
    std::string zero = constInts({0});
    std::string bias = input(3);
    q = op("Add", {q, slice(bias, zero, hidden, 0)});
    k = op("Add", {k, slice(bias, hidden, twice, 0)});
    v = op("Add", {v, slice(bias, twice,
                            constInts({std::numeric_limits<int64_t>::max()}),
                            0)});
  }
  auto toHeads = [&](const std::string &value) {
    return transpose(op("Reshape", {value, constInts({0, 0, numHeads, -1})}),
                     {0, 2, 1, 3});
  };
  std::string qh = toHeads(q);
  std::string kh = keysInHeads ? k : toHeads(k);
  std::string vh = keysInHeads ? v : toHeads(v);
  if (!input(6).empty()) {
    auto axis2 = [](NodeProto &n) { setInt(n, "axis", 2); };
    kh = op("Concat", {input(6), kh}, axis2);
    vh = op("Concat", {input(7), vh}, axis2);
  }
  if (!output(1).empty())
    identity(kh, output(1));
  if (!output(2).empty())
    identity(vh, output(2));

  std::string scale;
  float scaleAttr = floatAttr("scale", 0.0f);
  if (scaleAttr != 0.0f) {
    scale = constFloat(scaleAttr, type);
  } else {
    // 1 / sqrt(head_size), head_size = D / num_heads.
    std::string headSize =
        op("Div", {dimScalar(input(0), 2), constInts({numHeads}, true)});
    scale = op("Reciprocal",
               {op("Sqrt", {op("Cast", {headSize}, [&](NodeProto &n) {
                      setInt(n, "to", type);
                    })})});
  }
  std::string scores =
      op("Mul", {op("MatMul", {qh, transpose(kh, {0, 1, 3, 2})}), scale});
  if (!input(5).empty())
    scores = op("Add", {scores, input(5)});
  if (intAttr("unidirectional", 0) != 0) {
    // Query row i (after P past rows) sees keys j <= i + P, P = T - S.
    std::string s = dimScalar(qh, 2), t = dimScalar(kh, 2);
    std::string zero = constInts({0}, true), one = constInts({1}, true);
    std::string rows =
        op("Unsqueeze", {op("Add", {op("Range", {zero, s, one}),
                                    op("Sub", {t, s})}),
                         constInts({1})});
    std::string cols = op("Range", {zero, t, one});
    std::string masked = op("Greater", {cols, rows});
    std::string mask =
        op("Where", {masked,
                     constFloat(floatAttr("mask_filter_value", -10000.0f), type),
                     constFloat(0.0, type)});
    scores = op("Add", {scores, mask});
  }
  std::string probs =
      op("Softmax", {scores}, [](NodeProto &n) { setInt(n, "axis", -1); });
  std::string context = transpose(op("MatMul", {probs, vh}), {0, 2, 1, 3});
  identity(op("Reshape", {context, constInts({0, 0, -1})}), output(0));
  facts[output(0)].rank = 3;
  return success();
}

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

LogicalResult Expander::expand(const NodeProto &node, bool &expanded) {
  cur = &node;
  expanded = true;
  expansionStart = result.size();
  StringRef domain = getCanonicalDomain(node.domain());
  StringRef opType = node.op_type();
  if (domain.empty()) {
    if (opType == "SimplifiedLayerNormalization")
      return expandSimplifiedLayerNorm();
    if (opType == "LayerNormalization" && opset < 17)
      return expandLayerNorm();
  } else if (domain == kMicrosoftDomain) {
    if (opType == "SimplifiedLayerNormalization")
      return expandSimplifiedLayerNorm();
    if (opType == "LayerNormalization")
      return expandLayerNorm();
    if (opType == "SkipLayerNormalization")
      return expandSkipLayerNorm(/*simplified=*/false);
    if (opType == "SkipSimplifiedLayerNormalization")
      return expandSkipLayerNorm(/*simplified=*/true);
    if (opType == "FusedMatMul")
      return expandFusedMatMul();
    if (opType == "Gelu" || opType == "BiasGelu" || opType == "FastGelu" ||
        opType == "QuickGelu")
      return expandGelu(opType);
    if (opType == "RotaryEmbedding")
      return expandRotaryEmbedding();
    if (opType == "MultiHeadAttention")
      return expandMultiHeadAttention();
    if (opType == "GroupQueryAttention" || opType == "Attention")
      return fail() << "this attention operator is not supported; only "
                       "MultiHeadAttention is expanded";
  }
  expanded = false;
  return success();
}

LogicalResult Expander::run() {
  for (const ValueInfoProto &info : graph.input())
    noteValueInfo(info);
  for (const ValueInfoProto &info : graph.output()) {
    noteValueInfo(info);
    usedNames.insert(info.name());
  }
  for (const ValueInfoProto &info : graph.value_info())
    noteValueInfo(info);
  for (const TensorProto &tensor : graph.initializer())
    noteTensor(tensor.name(), tensor);
  for (const NodeProto &node : graph.node()) {
    for (const std::string &in : node.input())
      usedNames.insert(in);
    for (const std::string &out : node.output())
      names.insert(out);
    if (node.op_type() == "Constant" && isDefaultDomain(node.domain()))
      for (const AttributeProto &a : node.attribute())
        if (a.name() == "value" && a.has_t() && node.output_size() == 1)
          noteTensor(node.output(0), a.t());
    // Subgraphs may read outer values.
    for (const AttributeProto &a : node.attribute()) {
      auto noteGraph = [&](const GraphProto &sub) {
        for (const NodeProto &inner : sub.node())
          for (const std::string &in : inner.input())
            usedNames.insert(in);
        for (const ValueInfoProto &out : sub.output())
          usedNames.insert(out.name());
      };
      if (a.has_g())
        noteGraph(a.g());
      for (const GraphProto &sub : a.graphs())
        noteGraph(sub);
    }
  }
  result.reserve(graph.node_size());
  for (const NodeProto &node : graph.node()) {
    bool expanded;
    if (failed(expand(node, expanded)))
      return failure();
    bindOutputs();
    if (!expanded)
      result.push_back(node);
  }
  graph.clear_node();
  for (NodeProto &node : result)
    *graph.add_node() = std::move(node);
  return success();
}

LogicalResult moe::onnx_import::expandOrtContribOps(ModelProto &model,
                                                    Location fileLoc) {
  // The default-domain opset the expansion's nodes are written in.
  ::ONNX_NAMESPACE::OperatorSetIdProto *defaultOpset = nullptr;
  for (auto &opsetId : *model.mutable_opset_import())
    if (isDefaultDomain(opsetId.domain()))
      defaultOpset = &opsetId;
  if (!defaultOpset) {
    defaultOpset = model.add_opset_import();
    defaultOpset->set_domain("");
    defaultOpset->set_version(kDefaultOpset);
  }
  Expander expander(*model.mutable_graph(), defaultOpset->version(), fileLoc);
  if (failed(expander.run()))
    return failure();

  // Without contrib nodes left, the com.microsoft import is unused: drop it,
  // so that its version does not matter.
  bool usesMicrosoft = llvm::any_of(model.graph().node(), [](const NodeProto &n) {
    return getCanonicalDomain(n.domain()) == kMicrosoftDomain;
  });
  if (!usesMicrosoft) {
    auto *opsets = model.mutable_opset_import();
    for (int i = opsets->size() - 1; i >= 0; --i)
      if (opsets->Get(i).domain() == kMicrosoftDomain.str())
        opsets->DeleteSubrange(i, 1);
  }
  return success();
}
