//===- GraphTranslator.h - TorchScript graph to ONNX graph ------*- C++ -*-===//
//
// Internal to the TorchScript importer: translates an inlined TorchScript
// graph into an ONNX graph, node by node, the way torch.onnx's symbolics
// export each aten op. Values known at import time (constants, module
// parameters, sizes of static shapes and what is computed from them) are
// folded with libtorch itself and only become ONNX constants where a
// runtime op consumes them.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_LIB_IMPORT_TORCHSCRIPT_GRAPHTRANSLATOR_H
#define MOE_LIB_IMPORT_TORCHSCRIPT_GRAPHTRANSLATOR_H

#include "OnnxBuilder.h"

#include "llvm/ADT/DenseMap.h"

#include <torch/csrc/jit/ir/ir.h>

#include <unordered_map>

namespace mlir::moe::torchscript {

using torch::jit::Node;
using torch::jit::Value;

/// What a TorchScript value translates to.
struct Operand {
  enum class Kind { Known, Tensor, List };

  static Operand known(c10::IValue value, std::string path = {}) {
    Operand operand;
    operand.value = std::move(value);
    operand.path = std::move(path);
    return operand;
  }
  static Operand tensor(std::string name) {
    Operand operand;
    operand.kind = Kind::Tensor;
    operand.name = std::move(name);
    return operand;
  }
  static Operand list(std::vector<Operand> elements) {
    Operand operand;
    operand.kind = Kind::List;
    operand.elements = std::move(elements);
    return operand;
  }

  bool isKnown() const { return kind == Kind::Known; }

  Kind kind = Kind::Known;
  /// Known: the value: a scalar, list, None, dtype, module object, or a
  /// constant tensor (a parameter, or one folded from constants).
  c10::IValue value;
  /// Known: the module path of a module object, of a parameter or buffer,
  /// or of the parameter that a folded tensor came from; names initializers.
  std::string path;
  /// Tensor: the ONNX value. Runtime ints, floats and bools are 0-d
  /// tensors, as in torch.onnx.
  std::string name;
  /// List: the elements of a list or tuple that is not all known.
  std::vector<Operand> elements;
};

class GraphTranslator {
public:
  explicit GraphTranslator(OnnxBuilder &onnx) : onnx(onnx) {}

  /// Translates `node`, whose inputs are translated.
  void translate(Node *node);

  void set(Value *value, Operand operand);
  void setTensor(Value *value, std::string name) {
    set(value, Operand::tensor(std::move(name)));
  }
  const Operand &operand(Value *value) const;

  /// Arguments that must be known at import time; these fail, naming the
  /// argument, when they are not.
  const c10::IValue &knownValue(Value *value) const;
  bool isNone(Value *value) const;
  int64_t getInt(Value *value) const;
  double getDouble(Value *value) const;
  bool getBool(Value *value) const;
  std::optional<int64_t> getOptionalInt(Value *value) const;
  SmallVector<int64_t> getIntList(Value *value) const;
  std::optional<at::ScalarType> getOptionalDtype(Value *value) const;
  /// The argument of the node being translated with this schema name.
  Value *namedInput(Node *node, StringRef name) const;

  /// The ONNX tensor of `value`. Known tensors become initializers (those
  /// of parameters) or Constant nodes; known scalars 0-d constants.
  std::string tensor(Value *value);
  std::string tensor(const Operand &operand);
  /// tensor() of element type `type`: constants are made in it, runtime
  /// values cast to it.
  std::string tensorAs(Value *value, at::ScalarType type);
  std::string tensorAs(const Operand &operand, at::ScalarType type);
  /// A 2-d weight transposed: known weights are stored transposed (once
  /// per weight), as torch.onnx's constant folding does.
  std::string transposed(Value *value);
  /// An int list (known, or with runtime elements) as a 1-D int64 tensor;
  /// known elements equal to -1 become `minusOneAs`.
  std::string intListTensor(Value *value, int64_t minusOneAs = -1);
  /// The elements of a list value, whether known or not.
  std::vector<Operand> listElements(Value *value) const;
  /// A Tensor[] argument as ONNX tensors.
  SmallVector<std::string> tensorList(Value *value);

  /// Types of tensor values (runtime or known).
  at::ScalarType dtypeOf(const Operand &operand) const;
  at::ScalarType dtypeOf(Value *value) const { return dtypeOf(operand(value)); }
  int64_t rankOf(Value *value) const;
  /// The dtype torch computes an elementwise op of `values` in (its type
  /// promotion, which ONNX leaves to the exporter).
  at::ScalarType promotedType(ArrayRef<Value *> values) const;

  /// `dim` in [0, rank); fails when out of range.
  int64_t normalizeDim(int64_t dim, int64_t rank) const;

  /// The node being translated (the innermost, inside If and Loop blocks).
  Node *currentNode() const { return current; }

  OnnxBuilder &onnx;

private:
  void translateBlock(torch::jit::Block *block);
  void translateIf(Node *node);
  void translateLoop(Node *node);
  bool translateInPlace(Node *node);
  bool tryFold(Node *node);
  std::string materialize(const at::Tensor &tensor, StringRef path);
  void translateGetAttr(Node *node);
  /// The list or tuple that a ListConstruct/TupleConstruct of known values
  /// builds.
  c10::IValue knownAggregate(Node *node) const;
  std::string describe(Value *value) const;
  int64_t getIntOf(const Operand &element) const;

  Node *current = nullptr;
  /// Functional forms of the in-place ops that translateInPlace handles.
  llvm::DenseMap<Node *, Node *> functionalTwins;
  /// (References to operands stay valid as more are added.)
  std::unordered_map<Value *, Operand> operands;
  /// Known tensors already in the ONNX graph (the tensors are kept alive so
  /// that their addresses stay unique).
  llvm::DenseMap<c10::TensorImpl *, std::pair<at::Tensor, std::string>>
      materialized;
  llvm::DenseMap<c10::TensorImpl *, std::pair<at::Tensor, std::string>>
      transposedWeights;
};

using Handler = void (*)(GraphTranslator &, Node *);
/// The translation of aten op `kind`, or null.
Handler lookupHandler(c10::Symbol kind);
/// Whether `kind` creates a tensor from sizes and scalars only: such ops
/// become ONNX ops (ConstantOfShape, Range) even with known arguments,
/// as torch.onnx exports them.
bool isTensorFactory(c10::Symbol kind);

/// Whether `kind` may return a view of its first argument.
bool isViewOp(c10::Symbol kind);

/// The Python source position of `node` ("file:line:col"), or "".
std::string sourceLocation(const Node *node);

} // namespace mlir::moe::torchscript

#endif // MOE_LIB_IMPORT_TORCHSCRIPT_GRAPHTRANSLATOR_H
