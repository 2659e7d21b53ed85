//===- Interpreter.cpp - onnx ops evaluated one at a time -----------------===//
//
// Values are row-major tensors of doubles with their ONNX element kind
// (float, integer or boolean). The ops are those exported MoE blocks use
// (test/corpus); anything else is a failure naming the op, never a guess.
//
//===----------------------------------------------------------------------===//

#include "Interpreter.h"

#include "dialects/onnx/IR/ONNXDialect.h"
#include "passes/Conversion/ONNXToLinalg/Lowering.h"
#include "passes/ONNXFolding.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSwitch.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

using namespace mlir;
using namespace mlir::moe;

using onnx_lowering::floatAttr;
using onnx_lowering::intAttr;

namespace {

enum class Kind { Float, Int, Bool };

struct Tensor {
  SmallVector<int64_t> shape;
  std::vector<double> v;
  Kind kind = Kind::Float;

  int64_t size() const {
    return std::accumulate(shape.begin(), shape.end(), int64_t(1),
                           std::multiplies<int64_t>());
  }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
};

/// A failure with its reason, thrown inside one op's evaluation only.
struct Unsupported {
  std::string why;
};
[[noreturn]] void unsupported(const Twine &why) { throw Unsupported{why.str()}; }

Kind kindOf(Type type) {
  Type element = getElementTypeOrSelf(type);
  if (isa<FloatType>(element))
    return Kind::Float;
  if (element.isInteger(1))
    return Kind::Bool;
  return Kind::Int;
}

/// Rounds to what the element kind holds.
double round(double x, Kind kind) {
  switch (kind) {
  case Kind::Float:
    return static_cast<float>(x);
  case Kind::Int:
    return std::trunc(x);
  case Kind::Bool:
    return x != 0;
  }
  return x;
}

SmallVector<int64_t> strides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> s(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    s[i] = s[i + 1] * shape[i + 1];
  return s;
}

int64_t normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    unsupported("axis " + Twine(axis) + " out of range");
  return axis < 0 ? axis + rank : axis;
}

/// The elements as integers; the sentinels exporters write for "to the
/// end" (INT64_MAX, INT64_MIN, beyond a double's precision) stay so.
SmallVector<int64_t> ints(const Tensor &t) {
  SmallVector<int64_t> out;
  for (double x : t.v)
    out.push_back(x >= 9.2e18    ? std::numeric_limits<int64_t>::max()
                  : x <= -9.2e18 ? std::numeric_limits<int64_t>::min()
                                 : static_cast<int64_t>(x));
  return out;
}

/// The broadcast shape of `shapes` (numpy rules).
SmallVector<int64_t> broadcastShape(ArrayRef<const Tensor *> operands) {
  int64_t rank = 0;
  for (const Tensor *t : operands)
    rank = std::max(rank, t->rank());
  SmallVector<int64_t> shape(rank, 1);
  for (const Tensor *t : operands)
    for (int64_t i = 0; i < t->rank(); ++i) {
      int64_t &d = shape[rank - t->rank() + i];
      int64_t e = t->shape[i];
      if (d == 1)
        d = e;
      else if (e != 1 && e != d) {
        std::string shapes;
        for (const Tensor *u : operands) {
          shapes += " [";
          for (int64_t x : u->shape)
            shapes += std::to_string(x) + ",";
          shapes += "]";
        }
        unsupported("shapes that do not broadcast:" + shapes);
      }
    }
  return shape;
}

/// Element `linear` of `shape`'s broadcast read from `t`.
int64_t sourceIndex(int64_t linear, ArrayRef<int64_t> shape,
                    const Tensor &t) {
  int64_t index = 0, stride = 1;
  for (int64_t i = static_cast<int64_t>(shape.size()) - 1,
               j = t.rank() - 1;
       i >= 0; --i, --j) {
    int64_t coord = linear % shape[i];
    linear /= shape[i];
    if (j >= 0) {
      if (t.shape[j] != 1)
        index += coord * stride;
      stride *= t.shape[j];
    }
  }
  return index;
}

Tensor elementwise(ArrayRef<const Tensor *> in, Kind kind,
                   function_ref<double(ArrayRef<double>)> f) {
  Tensor out;
  out.shape = broadcastShape(in);
  out.kind = kind;
  out.v.resize(out.size());
  SmallVector<double> args(in.size());
  for (int64_t i = 0; i < out.size(); ++i) {
    for (size_t a = 0; a < in.size(); ++a)
      args[a] = in[a]->v[sourceIndex(i, out.shape, *in[a])];
    out.v[i] = round(f(args), kind);
  }
  return out;
}

/// Calls f(outer, axisIndex, inner) over a tensor's positions split at
/// `axis`: element (outer, i, inner) at (outer * n + i) * innerSize + inner.
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
  AxisSplit(ArrayRef<int64_t> shape, int64_t axis) {
    for (int64_t i = 0; i < axis; ++i)
      outer *= shape[i];
    n = shape[axis];
    for (int64_t i = axis + 1; i < static_cast<int64_t>(shape.size()); ++i)
      inner *= shape[i];
  }
  int64_t at(int64_t o, int64_t i, int64_t in) const {
    return (o * n + i) * inner + in;
  }
};

Tensor reduce(const Tensor &x, ArrayRef<int64_t> axesIn, bool keepdims,
              bool noopWithEmpty, double init,
              function_ref<double(double, double)> f,
              function_ref<double(double, int64_t)> finish) {
  SmallVector<bool> reduced(x.rank(), axesIn.empty() && !noopWithEmpty);
  for (int64_t a : axesIn)
    reduced[normalizeAxis(a, x.rank())] = true;
  Tensor out;
  out.kind = x.kind == Kind::Bool ? Kind::Int : x.kind;
  SmallVector<int64_t> outShape;
  for (int64_t i = 0; i < x.rank(); ++i)
    if (!reduced[i])
      outShape.push_back(x.shape[i]);
    else if (keepdims)
      outShape.push_back(1);
  out.shape = outShape;
  SmallVector<int64_t> kept; // the result's shape without the 1s of keepdims
  for (int64_t i = 0; i < x.rank(); ++i)
    if (!reduced[i])
      kept.push_back(x.shape[i]);
  int64_t keptSize = 1, count = 1;
  for (int64_t d : kept)
    keptSize *= d;
  for (int64_t i = 0; i < x.rank(); ++i)
    if (reduced[i])
      count *= x.shape[i];
  std::vector<double> acc(keptSize, init);
  SmallVector<int64_t> xs = strides(x.shape);
  for (int64_t i = 0; i < x.size(); ++i) {
    int64_t rest = i, k = 0;
    for (int64_t d = 0; d < x.rank(); ++d) {
      int64_t coord = rest / xs[d];
      rest %= xs[d];
      if (!reduced[d])
        k = k * x.shape[d] + coord;
    }
    acc[k] = f(acc[k], x.v[i]);
  }
  out.v.resize(keptSize);
  for (int64_t k = 0; k < keptSize; ++k)
    out.v[k] = round(finish(acc[k], count), out.kind);
  return out;
}

Tensor transpose(const Tensor &x, ArrayRef<int64_t> perm) {
  Tensor out;
  out.kind = x.kind;
  for (int64_t p : perm)
    out.shape.push_back(x.shape[p]);
  out.v.resize(x.size());
  SmallVector<int64_t> xs = strides(x.shape), os = strides(out.shape);
  for (int64_t i = 0; i < out.size(); ++i) {
    int64_t rest = i, src = 0;
    for (int64_t d = 0; d < out.rank(); ++d) {
      src += (rest / os[d]) * xs[perm[d]];
      rest %= os[d];
    }
    out.v[i] = x.v[src];
  }
  return out;
}

/// A [.., M, K] x [.., K, N] product with broadcast batch dimensions.
Tensor matmul(Tensor a, Tensor b) {
  bool vecA = a.rank() == 1, vecB = b.rank() == 1;
  if (vecA)
    a.shape.insert(a.shape.begin(), 1);
  if (vecB)
    b.shape.push_back(1);
  int64_t M = a.shape[a.rank() - 2], K = a.shape.back(),
          N = b.shape.back();
  if (b.shape[b.rank() - 2] != K)
    unsupported("MatMul of mismatched shapes");
  Tensor batchA, batchB;
  batchA.shape.assign(a.shape.begin(), a.shape.end() - 2);
  batchB.shape.assign(b.shape.begin(), b.shape.end() - 2);
  SmallVector<int64_t> batch = broadcastShape({&batchA, &batchB});
  Tensor out;
  out.kind = Kind::Float;
  out.shape = batch;
  int64_t batches = out.size();
  out.shape.push_back(M);
  out.shape.push_back(N);
  out.v.assign(batches * M * N, 0);
  for (int64_t bi = 0; bi < batches; ++bi) {
    int64_t ia = sourceIndex(bi, batch, batchA),
            ib = sourceIndex(bi, batch, batchB);
    const double *A = a.v.data() + ia * M * K, *B = b.v.data() + ib * K * N;
    double *C = out.v.data() + bi * M * N;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k)
          s += A[m * K + k] * B[k * N + n];
        C[m * N + n] = static_cast<float>(s);
      }
  }
  if (vecA)
    out.shape.erase(out.shape.end() - 2);
  if (vecB)
    out.shape.pop_back();
  return out;
}

/// NumPy-style indexing helpers for Gather and the scatters.
int64_t wrap(int64_t i, int64_t n) {
  if (i < -n || i >= n)
    unsupported("an index out of range");
  return i < 0 ? i + n : i;
}

Tensor reshapeTo(Tensor x, ArrayRef<int64_t> requested, bool allowZero) {
  SmallVector<int64_t> shape(requested);
  int64_t known = 1, infer = -1;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    if (shape[i] == 0 && !allowZero)
      shape[i] = x.shape[i];
    if (shape[i] == -1)
      infer = i;
    else
      known *= shape[i];
  }
  if (infer >= 0)
    shape[infer] = known ? x.size() / known : 0;
  x.shape = shape;
  if (x.size() != static_cast<int64_t>(x.v.size()))
    unsupported("a Reshape that changes the element count");
  return x;
}

class Interpreter {
public:
  FailureOr<std::vector<float>> run(Value root, std::string &error);

private:
  const Tensor &get(Value v) { return values.find(v)->second; }
  bool isNone(Value v) {
    return v.getDefiningOp() && isa<onnx::NoneOp>(v.getDefiningOp());
  }
  void evaluate(Operation *op);
  void compute(Operation *op);
  Tensor constant(arith::ConstantOp op);

  llvm::DenseMap<Value, Tensor> values;
  SmallVector<std::pair<Value, Tensor>> pending;
};

Tensor Interpreter::constant(arith::ConstantOp op) {
  std::optional<onnx_lowering::ConstTensor> c =
      onnx_lowering::getConstant(op.getResult());
  if (!c)
    unsupported("a constant it cannot read (too large, or of another type)");
  Tensor t;
  t.shape.assign(c->shape.begin(), c->shape.end());
  t.kind = kindOf(op.getType());
  for (int64_t i = 0, e = c->size(); i < e; ++i)
    t.v.push_back(c->asDouble(i));
  return t;
}

void Interpreter::evaluate(Operation *op) {
  pending.clear();
  compute(op);
  for (auto &[value, tensor] : pending)
    values[value] = std::move(tensor);
  pending.clear();
}

void Interpreter::compute(Operation *op) {
  if (auto c = dyn_cast<arith::ConstantOp>(op)) {
    values[c.getResult()] = constant(c);
    return;
  }
  if (isa<onnx::NoneOp>(op))
    return;
  if (op->getDialect()->getNamespace() != "onnx")
    unsupported("'" + op->getName().getStringRef() + "'");
  StringRef name = op->getName().stripDialect();
  SmallVector<const Tensor *> in;
  for (Value operand : op->getOperands())
    in.push_back(isNone(operand) ? nullptr : &get(operand));
  // Results wait in `pending` until the op is done: `values` may move its
  // elements when it grows, and the operands are references into it.
  auto result = [&](unsigned i, Tensor t) {
    pending.emplace_back(op->getResult(i), std::move(t));
  };
  // Operand `i`, present: an op of fewer operands is not evaluated.
  auto arg = [&](size_t i) -> const Tensor & {
    if (i >= in.size() || !in[i])
      unsupported("'" + name + "' without its input " + Twine(i));
    return *in[i];
  };
  // The one element of operand `i` (a scalar or a 1-element list).
  auto scalar = [&](size_t i, size_t at = 0) -> double {
    const Tensor &t = arg(i);
    if (at >= t.v.size())
      unsupported("'" + name + "' with a too short input " + Twine(i));
    return t.v[at];
  };
  Kind outKind = op->getNumResults() ? kindOf(op->getResult(0).getType())
                                     : Kind::Float;
  auto unary = [&](double (*f)(double)) {
    result(0, elementwise({&arg(0)}, outKind,
                          [&](ArrayRef<double> x) { return f(x[0]); }));
  };
  using F = double (*)(double);
  // Elementwise.
  if (std::optional<F> f = llvm::StringSwitch<std::optional<F>>(name)
          .Case("Sqrt", [](double x) { return std::sqrt(x); })
          .Case("Exp", [](double x) { return std::exp(x); })
          .Case("Log", [](double x) { return std::log(x); })
          .Case("Tanh", [](double x) { return std::tanh(x); })
          .Case("Erf", [](double x) { return std::erf(x); })
          .Case("Neg", [](double x) { return -x; })
          .Case("Abs", [](double x) { return std::fabs(x); })
          .Case("Ceil", [](double x) { return std::ceil(x); })
          .Case("Floor", [](double x) { return std::floor(x); })
          .Case("Reciprocal", [](double x) { return 1 / x; })
          .Case("Sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); })
          .Case("Relu", [](double x) { return x > 0 ? x : 0.0; })
          .Case("Softplus", [](double x) { return std::log1p(std::exp(x)); })
          .Case("Cos", [](double x) { return std::cos(x); })
          .Case("Sin", [](double x) { return std::sin(x); })
          .Case("Not", [](double x) { return double(x == 0); })
          .Case("Identity", [](double x) { return x; })
          .Case("Sign", [](double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : x; })
          .Case("Round", [](double x) { return std::nearbyint(x); })
          .Case("Tan", [](double x) { return std::tan(x); })
          .Case("Asin", [](double x) { return std::asin(x); })
          .Case("Acos", [](double x) { return std::acos(x); })
          .Case("Atan", [](double x) { return std::atan(x); })
          .Case("Sinh", [](double x) { return std::sinh(x); })
          .Case("Cosh", [](double x) { return std::cosh(x); })
          .Case("Asinh", [](double x) { return std::asinh(x); })
          .Case("Acosh", [](double x) { return std::acosh(x); })
          .Case("Atanh", [](double x) { return std::atanh(x); })
          .Case("IsNaN", [](double x) { return double(std::isnan(x)); })
          .Case("BitwiseNot",
                [](double x) { return double(~static_cast<int64_t>(x)); })
          .Default(std::nullopt))
    return unary(*f);
  using G = double (*)(double, double);
  if (std::optional<G> g = llvm::StringSwitch<std::optional<G>>(name)
          .Case("Add", [](double a, double b) { return a + b; })
          .Case("Sub", [](double a, double b) { return a - b; })
          .Case("Mul", [](double a, double b) { return a * b; })
          .Case("Pow", [](double a, double b) { return std::pow(a, b); })
          .Case("Equal", [](double a, double b) { return double(a == b); })
          .Case("Greater", [](double a, double b) { return double(a > b); })
          .Case("GreaterOrEqual",
                [](double a, double b) { return double(a >= b); })
          .Case("Less", [](double a, double b) { return double(a < b); })
          .Case("LessOrEqual",
                [](double a, double b) { return double(a <= b); })
          .Case("And", [](double a, double b) { return double(a && b); })
          .Case("Or", [](double a, double b) { return double(a || b); })
          .Case("Xor",
                [](double a, double b) { return double((a != 0) != (b != 0)); })
          .Case("BitwiseAnd",
                [](double a, double b) {
                  return double(static_cast<int64_t>(a) &
                                static_cast<int64_t>(b));
                })
          .Case("BitwiseOr",
                [](double a, double b) {
                  return double(static_cast<int64_t>(a) |
                                static_cast<int64_t>(b));
                })
          .Case("BitwiseXor",
                [](double a, double b) {
                  return double(static_cast<int64_t>(a) ^
                                static_cast<int64_t>(b));
                })
          .Default(std::nullopt)) {
    if (in.size() != 2 || !in[0] || !in[1])
      unsupported("'" + name + "' of other than two inputs");
    return result(0, elementwise({&arg(0), &arg(1)}, outKind,
                                 [&](ArrayRef<double> x) {
                                   return (*g)(x[0], x[1]);
                                 }));
  }
  if (name == "Div")
    return result(0, elementwise({&arg(0), &arg(1)}, outKind,
                                 [&](ArrayRef<double> x) {
                                   if (outKind != Kind::Float && x[1] == 0)
                                     unsupported("an integer division by 0");
                                   return x[0] / x[1];
                                 }));
  if (name == "Mod")
    return result(0, elementwise({&arg(0), &arg(1)}, outKind,
                                 [&](ArrayRef<double> x) {
                                   if (x[1] == 0)
                                     unsupported("Mod by 0");
                                   double r = std::fmod(x[0], x[1]);
                                   if (!intAttr(op, "fmod", 0) && r != 0 &&
                                       (r < 0) != (x[1] < 0))
                                     r += x[1];
                                   return r;
                                 }));
  if (name == "Max" || name == "Min" || name == "Sum" || name == "Mean") {
    SmallVector<const Tensor *> present;
    for (size_t i = 0; i < in.size(); ++i)
      present.push_back(&arg(i));
    return result(0, elementwise(present, outKind, [&](ArrayRef<double> x) {
                    double r = x[0];
                    for (double y : x.drop_front())
                      r = name == "Max"   ? std::max(r, y)
                          : name == "Min" ? std::min(r, y)
                                          : r + y;
                    return name == "Mean" ? r / x.size() : r;
                  }));
  }
  if (name == "IsInf") {
    bool positive = intAttr(op, "detect_positive", 1);
    bool negative = intAttr(op, "detect_negative", 1);
    return result(0, elementwise({&arg(0)}, outKind, [&](ArrayRef<double> x) {
                    return double((positive && x[0] == INFINITY) ||
                                  (negative && x[0] == -INFINITY));
                  }));
  }
  if (name == "Where")
    return result(0, elementwise({&arg(0), &arg(1), &arg(2)}, outKind,
                                 [](ArrayRef<double> x) {
                                   return x[0] != 0 ? x[1] : x[2];
                                 }));
  if (name == "Clip") {
    double lo = in.size() > 1 && in[1] ? scalar(1) : -INFINITY;
    double hi = in.size() > 2 && in[2] ? scalar(2) : INFINITY;
    return result(0, elementwise({&arg(0)}, outKind, [&](ArrayRef<double> x) {
                    return std::min(std::max(x[0], lo), hi);
                  }));
  }
  if (name == "Cast")
    return result(0, elementwise({&arg(0)}, outKind,
                                 [](ArrayRef<double> x) { return x[0]; }));
  if (name == "Gelu") {
    bool tanh = op->getAttrOfType<StringAttr>("approximate") &&
                op->getAttrOfType<StringAttr>("approximate").getValue() ==
                    "tanh";
    return result(0, elementwise({&arg(0)}, outKind, [&](ArrayRef<double> x) {
                    double v = x[0];
                    if (tanh)
                      return 0.5 * v *
                             (1 + std::tanh(std::sqrt(2 / M_PI) *
                                            (v + 0.044715 * v * v * v)));
                    return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
                  }));
  }
  // Shapes.
  if (name == "Shape") {
    Tensor t;
    t.kind = Kind::Int;
    t.shape = {arg(0).rank()};
    int64_t start = normalizeAxis(std::clamp<int64_t>(intAttr(op, "start", 0), -arg(0).rank(), arg(0).rank()), arg(0).rank() + 1);
    int64_t end = intAttr(op, "end", arg(0).rank());
    end = end < 0 ? std::max<int64_t>(end + arg(0).rank(), 0)
                  : std::min(end, arg(0).rank());
    t.shape = {std::max<int64_t>(end - start, 0)};
    for (int64_t i = start; i < end; ++i)
      t.v.push_back(arg(0).shape[i]);
    return result(0, t);
  }
  if (name == "Size") {
    Tensor t;
    t.kind = Kind::Int;
    t.v = {double(arg(0).size())};
    return result(0, t);
  }
  if (name == "Reshape")
    return result(0, reshapeTo(arg(0), ints(arg(1)),
                               intAttr(op, "allowzero", 0) != 0));
  if (name == "Flatten") {
    int64_t axis = normalizeAxis(intAttr(op, "axis", 1), arg(0).rank() + 1);
    int64_t outer = 1;
    for (int64_t i = 0; i < axis; ++i)
      outer *= arg(0).shape[i];
    return result(0, reshapeTo(arg(0), {outer, -1}, false));
  }
  if (name == "Squeeze" || name == "Unsqueeze") {
    Tensor t = arg(0);
    SmallVector<int64_t> axes =
        in.size() > 1 && in[1] ? ints(arg(1)) : SmallVector<int64_t>();
    if (name == "Squeeze") {
      SmallVector<int64_t> shape;
      for (int64_t i = 0; i < t.rank(); ++i) {
        bool listed = llvm::any_of(axes, [&](int64_t a) {
          return normalizeAxis(a, t.rank()) == i;
        });
        if (!(axes.empty() ? t.shape[i] == 1 : listed))
          shape.push_back(t.shape[i]);
      }
      t.shape = shape;
    } else {
      int64_t rank = t.rank() + static_cast<int64_t>(axes.size());
      SmallVector<int64_t> normalized;
      for (int64_t a : axes)
        normalized.push_back(normalizeAxis(a, rank));
      SmallVector<int64_t> shape;
      for (int64_t i = 0, j = 0; i < rank; ++i)
        shape.push_back(llvm::is_contained(normalized, i) ? 1
                                                          : t.shape[j++]);
      t.shape = shape;
    }
    return result(0, t);
  }
  if (name == "Expand") {
    Tensor target;
    target.shape = ints(arg(1));
    SmallVector<int64_t> shape = broadcastShape({&arg(0), &target});
    Tensor shapeOnly;
    shapeOnly.shape = shape;
    shapeOnly.v.assign(shapeOnly.size(), 0);
    return result(0, elementwise({&arg(0), &shapeOnly}, outKind,
                                 [](ArrayRef<double> x) { return x[0]; }));
  }
  if (name == "ConstantOfShape") {
    Tensor t;
    t.kind = outKind;
    t.shape = ints(arg(0));
    double fill = 0;
    if (auto value = op->getAttrOfType<DenseElementsAttr>("value")) {
      if (isa<FloatType>(value.getElementType()))
        fill = (*value.getValues<APFloat>().begin()).convertToDouble();
      else
        fill = (*value.getValues<APInt>().begin()).getSExtValue();
    }
    t.v.assign(t.size(), fill);
    return result(0, t);
  }
  if (name == "Range") {
    Tensor t;
    t.kind = outKind;
    double start = scalar(0), limit = scalar(1), delta = scalar(2);
    if (delta == 0)
      unsupported("a Range of step 0");
    int64_t n = std::max<int64_t>(
        static_cast<int64_t>(std::ceil((limit - start) / delta)), 0);
    t.shape = {n};
    for (int64_t i = 0; i < n; ++i)
      t.v.push_back(round(start + i * delta, outKind));
    return result(0, t);
  }
  if (name == "Transpose") {
    SmallVector<int64_t> perm;
    if (auto p = op->getAttrOfType<DenseI64ArrayAttr>("perm"))
      perm.assign(p.asArrayRef().begin(), p.asArrayRef().end());
    else
      for (int64_t i = arg(0).rank() - 1; i >= 0; --i)
        perm.push_back(i);
    SmallVector<int64_t> sorted(perm);
    llvm::sort(sorted);
    for (int64_t i = 0; i < static_cast<int64_t>(sorted.size()); ++i)
      if (sorted[i] != i || static_cast<int64_t>(sorted.size()) != arg(0).rank())
        unsupported("a Transpose of a bad permutation");
    return result(0, transpose(arg(0), perm));
  }
  if (name == "Concat") {
    int64_t axis = normalizeAxis(intAttr(op, "axis", 0), arg(0).rank());
    Tensor t;
    t.kind = outKind;
    t.shape = arg(0).shape;
    t.shape[axis] = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      const Tensor &x = arg(i);
      for (int64_t d = 0; d < t.rank(); ++d)
        if (x.rank() != t.rank() || (d != axis && x.shape[d] != t.shape[d]))
          unsupported("a Concat of mismatched shapes");
      t.shape[axis] += x.shape[axis];
    }
    AxisSplit out(t.shape, axis);
    t.v.resize(t.size());
    int64_t offset = 0;
    for (const Tensor *x : in) {
      AxisSplit from(x->shape, axis);
      for (int64_t o = 0; o < from.outer; ++o)
        for (int64_t i = 0; i < from.n; ++i)
          for (int64_t k = 0; k < from.inner; ++k)
            t.v[out.at(o, offset + i, k)] = x->v[from.at(o, i, k)];
      offset += x->shape[axis];
    }
    return result(0, t);
  }
  if (name == "Split") {
    const Tensor &x = arg(0);
    int64_t axis = normalizeAxis(intAttr(op, "axis", 0), x.rank());
    SmallVector<int64_t> sizes;
    if (in.size() > 1 && in[1]) {
      sizes = ints(arg(1));
    } else {
      int64_t parts = op->getNumResults(), n = x.shape[axis];
      int64_t each = (n + parts - 1) / parts;
      for (int64_t p = 0; p < parts; ++p)
        sizes.push_back(std::min(each, n - p * each));
    }
    if (static_cast<int64_t>(sizes.size()) != op->getNumResults() ||
        std::accumulate(sizes.begin(), sizes.end(), int64_t(0)) !=
            x.shape[axis] ||
        llvm::any_of(sizes, [](int64_t n) { return n < 0; }))
      unsupported("a Split whose sizes do not add up to its input");
    AxisSplit from(x.shape, axis);
    int64_t offset = 0;
    for (unsigned r = 0; r < op->getNumResults(); ++r) {
      Tensor t;
      t.kind = x.kind;
      t.shape = x.shape;
      t.shape[axis] = sizes[r];
      AxisSplit out(t.shape, axis);
      t.v.resize(t.size());
      for (int64_t o = 0; o < out.outer; ++o)
        for (int64_t i = 0; i < out.n; ++i)
          for (int64_t k = 0; k < out.inner; ++k)
            t.v[out.at(o, i, k)] = x.v[from.at(o, offset + i, k)];
      offset += sizes[r];
      result(r, t);
    }
    return;
  }
  if (name == "Slice") {
    const Tensor &x = arg(0);
    SmallVector<int64_t> starts = ints(arg(1)), ends = ints(arg(2));
    SmallVector<int64_t> axes, steps(starts.size(), 1);
    if (in.size() > 3 && in[3])
      axes = ints(arg(3));
    else
      for (int64_t i = 0; i < static_cast<int64_t>(starts.size()); ++i)
        axes.push_back(i);
    if (in.size() > 4 && in[4])
      steps = ints(arg(4));
    SmallVector<int64_t> begin(x.rank(), 0), step(x.rank(), 1),
        shape(x.shape);
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t a = normalizeAxis(axes[i], x.rank()), n = x.shape[a];
      int64_t s = starts[i], e = ends[i], st = steps[i];
      if (st == 0)
        unsupported("a Slice of step 0");
      if (s < 0)
        s += n;
      if (e < 0)
        e += n;
      if (st > 0) {
        s = std::clamp<int64_t>(s, 0, n);
        e = std::clamp<int64_t>(e, 0, n);
        shape[a] = std::max<int64_t>(0, (e - s + st - 1) / st);
      } else {
        s = std::clamp<int64_t>(s, 0, n - 1);
        e = std::clamp<int64_t>(e, -1, n - 1);
        shape[a] = std::max<int64_t>(0, (s - e - st - 1) / -st);
      }
      begin[a] = s;
      step[a] = st;
    }
    Tensor t;
    t.kind = x.kind;
    t.shape = shape;
    t.v.resize(t.size());
    SmallVector<int64_t> os = strides(shape), xs = strides(x.shape);
    for (int64_t i = 0; i < t.size(); ++i) {
      int64_t rest = i, src = 0;
      for (int64_t d = 0; d < x.rank(); ++d) {
        src += (begin[d] + (rest / os[d]) * step[d]) * xs[d];
        rest %= os[d];
      }
      t.v[i] = x.v[src];
    }
    return result(0, t);
  }
  if (name == "Tile") {
    const Tensor &x = arg(0);
    SmallVector<int64_t> repeats = ints(arg(1));
    Tensor t;
    t.kind = x.kind;
    if (static_cast<int64_t>(repeats.size()) != x.rank())
      unsupported("a Tile of another rank");
    for (int64_t d = 0; d < x.rank(); ++d)
      t.shape.push_back(x.shape[d] * repeats[d]);
    t.v.resize(t.size());
    SmallVector<int64_t> os = strides(t.shape), xs = strides(x.shape);
    for (int64_t i = 0; i < t.size(); ++i) {
      int64_t rest = i, src = 0;
      for (int64_t d = 0; d < x.rank(); ++d) {
        src += ((rest / os[d]) % x.shape[d]) * xs[d];
        rest %= os[d];
      }
      t.v[i] = x.v[src];
    }
    return result(0, t);
  }
  // Indexing.
  if (name == "Gather") {
    const Tensor &x = arg(0), &idx = arg(1);
    int64_t axis = normalizeAxis(intAttr(op, "axis", 0), x.rank());
    AxisSplit from(x.shape, axis);
    Tensor t;
    t.kind = x.kind;
    t.shape.assign(x.shape.begin(), x.shape.begin() + axis);
    t.shape.append(idx.shape.begin(), idx.shape.end());
    t.shape.append(x.shape.begin() + axis + 1, x.shape.end());
    t.v.resize(t.size());
    int64_t pos = 0;
    for (int64_t o = 0; o < from.outer; ++o)
      for (int64_t j = 0; j < idx.size(); ++j) {
        int64_t i = wrap(static_cast<int64_t>(idx.v[j]), from.n);
        for (int64_t k = 0; k < from.inner; ++k)
          t.v[pos++] = x.v[from.at(o, i, k)];
      }
    return result(0, t);
  }
  if (name == "GatherElements" || name == "ScatterElements") {
    bool scatter = name == "ScatterElements";
    const Tensor &x = arg(0), &idx = arg(1);
    int64_t axis = normalizeAxis(intAttr(op, "axis", 0), x.rank());
    Tensor t;
    t.kind = x.kind;
    t.shape = scatter ? x.shape : idx.shape;
    t.v = scatter ? x.v : std::vector<double>(idx.size());
    StringRef reduction = "none";
    if (auto r = op->getAttrOfType<StringAttr>("reduction"))
      reduction = r.getValue();
    if (idx.rank() != x.rank() ||
        (scatter && arg(2).shape != idx.shape))
      unsupported("'" + name + "' of mismatched ranks");
    for (int64_t d = 0; d < x.rank(); ++d)
      if (d != axis && idx.shape[d] > x.shape[d])
        unsupported("'" + name + "' with indices beyond its data");
    SmallVector<int64_t> is = strides(idx.shape), xs = strides(x.shape);
    for (int64_t j = 0; j < idx.size(); ++j) {
      int64_t rest = j, at = 0;
      for (int64_t d = 0; d < idx.rank(); ++d) {
        int64_t coord = rest / is[d];
        rest %= is[d];
        if (d == axis)
          coord = wrap(static_cast<int64_t>(idx.v[j]), x.shape[d]);
        at += coord * xs[d];
      }
      if (!scatter) {
        t.v[j] = x.v[at];
        continue;
      }
      double u = arg(2).v[j];
      if (reduction == "add")
        t.v[at] += u;
      else if (reduction == "mul")
        t.v[at] *= u;
      else if (reduction == "max")
        t.v[at] = std::max(t.v[at], u);
      else if (reduction == "min")
        t.v[at] = std::min(t.v[at], u);
      else
        t.v[at] = u;
      t.v[at] = round(t.v[at], t.kind);
    }
    return result(0, t);
  }
  if (name == "GatherND" || name == "ScatterND") {
    bool scatter = name == "ScatterND";
    const Tensor &x = arg(0), &idx = arg(1);
    if (intAttr(op, "batch_dims", 0) != 0)
      unsupported("GatherND with batch_dims");
    int64_t q = idx.shape.back(), tuples = idx.size() / std::max<int64_t>(q, 1);
    int64_t slice = 1;
    for (int64_t d = q; d < x.rank(); ++d)
      slice *= x.shape[d];
    SmallVector<int64_t> xs = strides(x.shape);
    Tensor t;
    t.kind = x.kind;
    if (scatter) {
      t.shape = x.shape;
      t.v = x.v;
    } else {
      t.shape.assign(idx.shape.begin(), idx.shape.end() - 1);
      t.shape.append(x.shape.begin() + q, x.shape.end());
      t.v.resize(t.size());
    }
    StringRef reduction = "none";
    if (auto r = op->getAttrOfType<StringAttr>("reduction"))
      reduction = r.getValue();
    for (int64_t j = 0; j < tuples; ++j) {
      int64_t at = 0;
      for (int64_t d = 0; d < q; ++d)
        at += wrap(static_cast<int64_t>(idx.v[j * q + d]), x.shape[d]) * xs[d];
      for (int64_t k = 0; k < slice; ++k) {
        if (!scatter) {
          t.v[j * slice + k] = x.v[at + k];
          continue;
        }
        double u = arg(2).v[j * slice + k];
        t.v[at + k] = round(reduction == "add" ? t.v[at + k] + u
                            : reduction == "mul" ? t.v[at + k] * u
                                                 : u,
                            t.kind);
      }
    }
    return result(0, t);
  }
  if (name == "NonZero") {
    const Tensor &x = arg(0);
    SmallVector<int64_t> xs = strides(x.shape), hits;
    for (int64_t i = 0; i < x.size(); ++i)
      if (x.v[i] != 0)
        hits.push_back(i);
    Tensor t;
    t.kind = Kind::Int;
    int64_t rank = std::max<int64_t>(x.rank(), 1);
    t.shape = {rank, static_cast<int64_t>(hits.size())};
    t.v.resize(t.size());
    for (size_t h = 0; h < hits.size(); ++h) {
      int64_t rest = hits[h];
      for (int64_t d = 0; d < x.rank(); ++d) {
        t.v[d * hits.size() + h] = rest / xs[d];
        rest %= xs[d];
      }
    }
    return result(0, t);
  }
  if (name == "OneHot") {
    const Tensor &idx = arg(0);
    int64_t depth = static_cast<int64_t>(scalar(1));
    double off = scalar(2), on = scalar(2, 1);
    int64_t axis = normalizeAxis(intAttr(op, "axis", -1), idx.rank() + 1);
    Tensor t;
    t.kind = outKind;
    t.shape = idx.shape;
    t.shape.insert(t.shape.begin() + axis, depth);
    AxisSplit out(t.shape, axis);
    t.v.assign(t.size(), off);
    for (int64_t o = 0; o < out.outer; ++o)
      for (int64_t k = 0; k < out.inner; ++k) {
        int64_t i = static_cast<int64_t>(idx.v[o * out.inner + k]);
        if (i < 0)
          i += depth;
        if (i >= 0 && i < depth)
          t.v[out.at(o, i, k)] = on;
      }
    return result(0, t);
  }
  // Linear algebra and reductions.
  if (name == "MatMul")
    return result(0, matmul(arg(0), arg(1)));
  if (name == "Gemm") {
    Tensor a = arg(0), b = arg(1);
    if (intAttr(op, "transA", 0))
      a = transpose(a, {1, 0});
    if (intAttr(op, "transB", 0))
      b = transpose(b, {1, 0});
    Tensor ab = matmul(a, b);
    double alpha = floatAttr(op, "alpha", 1), beta = floatAttr(op, "beta", 1);
    if (in.size() > 2 && in[2])
      return result(0, elementwise({&ab, &arg(2)}, Kind::Float,
                                   [&](ArrayRef<double> x) {
                                     return alpha * x[0] + beta * x[1];
                                   }));
    for (double &x : ab.v)
      x = static_cast<float>(alpha * x);
    return result(0, ab);
  }
  if (name == "Softmax") {
    Tensor t = arg(0);
    int64_t axis = normalizeAxis(intAttr(op, "axis", -1), t.rank());
    AxisSplit s(t.shape, axis);
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t k = 0; k < s.inner; ++k) {
        double m = -INFINITY, sum = 0;
        for (int64_t i = 0; i < s.n; ++i)
          m = std::max(m, t.v[s.at(o, i, k)]);
        for (int64_t i = 0; i < s.n; ++i)
          sum += std::exp(t.v[s.at(o, i, k)] - m);
        for (int64_t i = 0; i < s.n; ++i)
          t.v[s.at(o, i, k)] =
              static_cast<float>(std::exp(t.v[s.at(o, i, k)] - m) / sum);
      }
    return result(0, t);
  }
  if (name.starts_with("Reduce")) {
    SmallVector<int64_t> axes =
        in.size() > 1 && in[1] ? ints(arg(1)) : SmallVector<int64_t>();
    bool keep = intAttr(op, "keepdims", 1) != 0;
    bool noop = intAttr(op, "noop_with_empty_axes", 0) != 0;
    auto id = [](double a, int64_t) { return a; };
    Tensor t;
    if (name == "ReduceSum")
      t = reduce(arg(0), axes, keep, noop, 0, std::plus<double>(), id);
    else if (name == "ReduceMean")
      t = reduce(arg(0), axes, keep, noop, 0, std::plus<double>(),
                 [](double a, int64_t n) { return a / n; });
    else if (name == "ReduceMax")
      t = reduce(arg(0), axes, keep, noop, -INFINITY,
                 [](double a, double b) { return std::max(a, b); }, id);
    else if (name == "ReduceMin")
      t = reduce(arg(0), axes, keep, noop, INFINITY,
                 [](double a, double b) { return std::min(a, b); }, id);
    else if (name == "ReduceL1")
      t = reduce(arg(0), axes, keep, noop, 0,
                 [](double a, double b) { return a + std::fabs(b); }, id);
    else if (name == "ReduceL2")
      t = reduce(arg(0), axes, keep, noop, 0,
                 [](double a, double b) { return a + b * b; },
                 [](double a, int64_t) { return std::sqrt(a); });
    else
      unsupported("'" + name + "'");
    t.kind = outKind;
    return result(0, t);
  }
  if (name == "TopK" || name == "ArgMax" || name == "ArgMin") {
    const Tensor &x = arg(0);
    bool argIndex = name != "TopK"; // ArgMax or ArgMin
    int64_t axis = normalizeAxis(intAttr(op, "axis", argIndex ? 0 : -1), x.rank());
    int64_t k = argIndex ? 1 : static_cast<int64_t>(scalar(1));
    bool largest = name == "ArgMax" || (name == "TopK" && intAttr(op, "largest", 1));
    AxisSplit s(x.shape, axis);
    if (k > s.n)
      unsupported("a TopK of more than the axis holds");
    Tensor values, indices;
    values.kind = x.kind;
    indices.kind = Kind::Int;
    values.shape = indices.shape = x.shape;
    values.shape[axis] = indices.shape[axis] = k;
    if (argIndex && !intAttr(op, "keepdims", 1)) {
      indices.shape.erase(indices.shape.begin() + axis);
    }
    AxisSplit out(values.shape, axis);
    values.v.resize(out.outer * k * out.inner);
    indices.v.resize(values.v.size());
    bool lastIndex = argIndex && intAttr(op, "select_last_index", 0);
    SmallVector<int64_t> order(s.n);
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t j = 0; j < s.inner; ++j) {
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
          double va = x.v[s.at(o, a, j)], vb = x.v[s.at(o, b, j)];
          if (va != vb)
            return largest ? va > vb : va < vb;
          return lastIndex ? a > b : a < b;
        });
        for (int64_t i = 0; i < k; ++i) {
          values.v[out.at(o, i, j)] = x.v[s.at(o, order[i], j)];
          indices.v[out.at(o, i, j)] = order[i];
        }
      }
    if (argIndex)
      return result(0, indices);
    result(0, values);
    return result(1, indices);
  }
  if (name == "CumSum") {
    Tensor t = arg(0);
    int64_t axis = normalizeAxis(static_cast<int64_t>(scalar(1)), t.rank());
    bool exclusive = intAttr(op, "exclusive", 0), reverse = intAttr(op, "reverse", 0);
    AxisSplit s(t.shape, axis);
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t k = 0; k < s.inner; ++k) {
        double acc = 0;
        for (int64_t step = 0; step < s.n; ++step) {
          int64_t i = reverse ? s.n - 1 - step : step;
          double x = arg(0).v[s.at(o, i, k)];
          if (exclusive) {
            t.v[s.at(o, i, k)] = round(acc, t.kind);
            acc += x;
          } else {
            acc += x;
            t.v[s.at(o, i, k)] = round(acc, t.kind);
          }
        }
      }
    return result(0, t);
  }
  unsupported("'" + op->getName().getStringRef() + "'");
}

FailureOr<std::vector<float>> Interpreter::run(Value root, std::string &error) {
  // The ops `root` is computed by, in program order.
  llvm::SetVector<Operation *> needed;
  SmallVector<Value> work{root};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    Operation *def = v.getDefiningOp();
    if (!def) {
      error = "it reads a block argument";
      return failure();
    }
    if (!needed.insert(def))
      continue;
    llvm::append_range(work, def->getOperands());
  }
  SmallVector<Operation *> ordered(needed.begin(), needed.end());
  llvm::sort(ordered, [](Operation *a, Operation *b) {
    return a->isBeforeInBlock(b);
  });
  Operation *current = nullptr;
  try {
    for (Operation *op : ordered) {
      current = op;
      evaluate(op);
    }
  } catch (const Unsupported &e) {
    error = "the interpreter does not evaluate " + e.why + " (" +
            current->getName().getStringRef().str() + ")";
    return failure();
  }
  const Tensor &t = get(root);
  return std::vector<float>(t.v.begin(), t.v.end());
}

} // namespace

FailureOr<std::vector<float>> mlir::moe::interpretValue(Value root,
                                                         std::string &error) {
  Interpreter interpreter;
  return interpreter.run(root, error);
}
