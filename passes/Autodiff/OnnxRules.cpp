//===- OnnxRules.cpp - vector-Jacobian products of onnx ops ---------------===//
//
// The rules of ONNX Runtime's gradient builder and PyTorch's
// derivatives.yaml for the ops transformer exports use (moe-training.md
// section 3). Broadcast operands get their cotangent summed back to their
// shape; integer and boolean operands get none. Rules that need a forward
// value read the forward's own result or operand (kept); only the
// normalisations recompute (their statistics, from the input).
//
//===----------------------------------------------------------------------===//

#include "passes/Autodiff/Rules.h"

#include "passes/Conversion/ONNXToLinalg/Lowering.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

namespace mlir::moe::autodiff {

using onnx_lowering::axesOf;
using onnx_lowering::floatAttr;
using onnx_lowering::getConstantScalar;
using onnx_lowering::intAttr;
using onnx_lowering::intsAttr;
using onnx_lowering::normalizeAxis;
using onnx_lowering::optionalOperand;

std::optional<Shape> constantInts(Value value) {
  return onnx_lowering::getConstantInts(value);
}

namespace {

Shape shapeOf(Value value) { return Shape(tensorType(value).getShape()); }
bool isFloat(Value value) {
  return isa<FloatType>(tensorType(value).getElementType());
}
Type elementOf(Value value) { return tensorType(value).getElementType(); }

/// Zeros for a missing cotangent of a result that has one type.
Value orZeros(Emitter &e, Value cotangent, Value like) {
  return cotangent ? cotangent : e.splat(tensorType(like), 0.0);
}

/// The cotangent `g` of a keepdims=0 reduction of `x` over `axes`, made
/// broadcastable against `x` again.
Value keepReducedDims(Emitter &e, Value g, Value x, ArrayRef<int64_t> axes,
                      bool keepdims) {
  int64_t rank = tensorType(x).getRank();
  Shape shape = shapeOf(x);
  SmallVector<bool> reduced(rank, axes.empty());
  for (int64_t axis : axes)
    reduced[normalizeAxis(axis, rank)] = true;
  for (int64_t i = 0; i < rank; ++i)
    if (reduced[i])
      shape[i] = 1;
  (void)keepdims;
  return e.reshape(g, shape);
}

/// The VJP of the onnx op `op`; `g` is the cotangent of result 0.
struct OnnxRule {
  Emitter &e;
  Operation *op;
  ArrayRef<Value> dResults;
  MutableArrayRef<Value> d;

  Value in(unsigned i) { return op->getOperand(i); }
  Value out(unsigned i = 0) { return op->getResult(i); }
  Value g() { return orZeros(e, dResults[0], out()); }
  /// Sets operand i's cotangent, summed back to its shape, if it is float.
  void set(unsigned i, Value cotangent) {
    if (i < op->getNumOperands() && isFloat(in(i)))
      d[i] = e.unbroadcast(cotangent, shapeOf(in(i)));
  }
  LogicalResult unsupported(const Twine &what) {
    return op->emitError("moe-autodiff: ") << what;
  }

  LogicalResult build();
  LogicalResult matmul();
  LogicalResult gemm();
  LogicalResult gather();
  LogicalResult gatherND();
  LogicalResult slice();
  LogicalResult pad();
  LogicalResult tile();
  LogicalResult layerNorm(bool rms);
  LogicalResult einsum();
};

LogicalResult OnnxRule::matmul() {
  // dA = dY B^T, dB = A^T dY (A and B kept). A 1-d operand is a row
  // (left) or a column (right) vector, as numpy's matmul reads it: the
  // product is taken on those matrices and the cotangent reshaped back.
  Value a = in(0), bm = in(1);
  int64_t rankA = tensorType(a).getRank(), rankB = tensorType(bm).getRank();
  Shape shapeA = shapeOf(a), shapeB = shapeOf(bm);
  if (rankA == 1)
    shapeA.insert(shapeA.begin(), 1);
  if (rankB == 1)
    shapeB.push_back(1);
  Value matA = e.reshape(a, shapeA), matB = e.reshape(bm, shapeB);
  Value grad = e.reshape(g(), Emitter::matmulShape(matA, matB));
  // Summed back to the matrices first (over the batch dims the other
  // operand brought), so that a vector's cotangent keeps its own dim.
  set(0, e.reshape(e.unbroadcast(e.matmul(grad, e.transposeLast(matB)),
                                 shapeA),
                   shapeOf(a)));
  set(1, e.reshape(e.unbroadcast(e.matmul(e.transposeLast(matA), grad),
                                 shapeB),
                   shapeOf(bm)));
  return success();
}

LogicalResult OnnxRule::einsum() {
  // Y = einsum(t_0, ..., t_n -> o): dX_i = einsum(o, t_j (j != i) -> t_i),
  // where the letters of t_i that neither o nor another operand has were
  // summed out of X_i alone: the cotangent is the same along them (the
  // einsum to t_i without them, expanded).
  auto equation = op->getAttrOfType<StringAttr>("equation");
  std::string compact;
  for (char c : equation ? equation.getValue() : StringRef())
    if (!llvm::isSpace(c))
      compact.push_back(c);
  size_t arrow = compact.find("->");
  if (arrow == std::string::npos)
    return unsupported("Einsum has a gradient only for an explicit equation");
  SmallVector<StringRef> parts;
  StringRef(compact).take_front(arrow).split(parts, ',');
  std::string output = compact.substr(arrow + 2);
  SmallVector<std::string> terms(parts.begin(), parts.end());
  if (terms.size() != op->getNumOperands())
    return unsupported("Einsum's equation does not name each operand");
  llvm::DenseMap<char, int64_t> sizes;
  for (auto [i, term] : llvm::enumerate(terms)) {
    Shape shape = shapeOf(in(i));
    if (static_cast<int64_t>(term.size()) != static_cast<int64_t>(shape.size()) ||
        !llvm::all_of(term, llvm::isAlpha))
      return unsupported("Einsum has a gradient only for equations of "
                         "letters, one per dimension (no ellipsis)");
    for (auto [letter, size] : llvm::zip(term, shape))
      sizes[letter] = size;
  }
  for (const std::string &term : llvm::concat<const std::string>(
           terms, ArrayRef<std::string>(output)))
    for (size_t k = 0; k < term.size(); ++k)
      if (term.find(term[k], k + 1) != std::string::npos)
        return unsupported("Einsum has no gradient for a repeated letter "
                           "(a diagonal)");
  for (auto [i, term] : llvm::enumerate(terms)) {
    if (!isFloat(in(i)))
      continue;
    std::string others = output, kept;
    SmallVector<Value> operands{g()};
    for (auto [j, other] : llvm::enumerate(terms))
      if (j != i) {
        others += other;
        operands.push_back(in(j));
      }
    Shape keptShape, broadcastShape;
    for (char letter : term) {
      bool shared = others.find(letter) != std::string::npos;
      if (shared) {
        kept.push_back(letter);
        keptShape.push_back(sizes[letter]);
      }
      broadcastShape.push_back(shared ? sizes[letter] : 1);
    }
    std::string rule = output;
    for (auto [j, other] : llvm::enumerate(terms))
      if (j != i)
        rule += "," + other;
    rule += "->" + kept;
    Value grad = e.create<onnx::EinsumOp>(
        RankedTensorType::get(keptShape, elementOf(in(i))), operands,
        {e.builder().getNamedAttr("equation",
                                  e.builder().getStringAttr(rule))});
    grad = e.reshape(grad, broadcastShape);
    if (broadcastShape != shapeOf(in(i)))
      grad = e.expand(grad, shapeOf(in(i)));
    set(i, grad);
  }
  return success();
}

LogicalResult OnnxRule::gemm() {
  // Y = alpha op(A) op(B) + beta C
  double alpha = floatAttr(op, "alpha", 1.0), beta = floatAttr(op, "beta", 1.0);
  bool transA = intAttr(op, "transA", 0), transB = intAttr(op, "transB", 0);
  Value a = in(0), bm = in(1);
  Value opA = transA ? e.transposeLast(a) : a;
  Value opB = transB ? e.transposeLast(bm) : bm;
  Value scaled = alpha == 1.0 ? g() : e.mul(g(), e.scalar(elementOf(a), alpha));
  Value dOpA = e.matmul(scaled, e.transposeLast(opB));
  Value dOpB = e.matmul(e.transposeLast(opA), scaled);
  set(0, transA ? e.transposeLast(dOpA) : dOpA);
  set(1, transB ? e.transposeLast(dOpB) : dOpB);
  if (Value c = optionalOperand(op, 2))
    set(2, beta == 1.0 ? g() : e.mul(g(), e.scalar(elementOf(c), beta)));
  return success();
}

LogicalResult OnnxRule::gather() {
  // d data: the result rows added back at their indices (an embedding's
  // gradient), as ScatterND with `add` onto zeros.
  Value data = in(0), indices = in(1);
  int64_t rank = tensorType(data).getRank();
  int64_t axis = normalizeAxis(intAttr(op, "axis", 0), rank);
  Shape dataShape = shapeOf(data), indexShape = shapeOf(indices);
  int64_t count = 1;
  for (int64_t dim : indexShape)
    count *= dim;
  int64_t indexRank = indexShape.size();
  // The result is data[:axis] + indices + data[axis+1:]; bring the index
  // dims first, then the axis first in data.
  Value grad = g();
  Shape perm;
  for (int64_t i = 0; i < indexRank; ++i)
    perm.push_back(axis + i);
  for (int64_t i = 0; i < axis; ++i)
    perm.push_back(i);
  for (int64_t i = axis + indexRank; i < rank - 1 + indexRank; ++i)
    perm.push_back(i);
  bool moved = axis != 0;
  if (moved)
    grad = e.transpose(grad, perm);
  Shape rest;
  for (int64_t i = 0; i < rank; ++i)
    if (i != axis)
      rest.push_back(dataShape[i]);
  Shape updatesShape{count};
  updatesShape.append(rest);
  grad = e.reshape(grad, updatesShape);
  Value index = e.cast(indices, e.builder().getI64Type());
  // Negative indices count from the end.
  Value size = e.scalar(e.builder().getI64Type(), dataShape[axis]);
  Value zero = e.scalar(e.builder().getI64Type(), 0);
  index = e.where(e.compare<onnx::LessOp>(index, zero), e.add(index, size),
                  index);
  index = e.reshape(index, {count, 1});
  Shape movedShape{dataShape[axis]};
  movedShape.append(rest);
  Value scattered = e.scatterNDAdd(
      e.splat(RankedTensorType::get(movedShape, elementOf(data)), 0.0), index,
      grad);
  if (moved) {
    // Inverse of [axis, 0..axis-1, axis+1..]
    Shape back;
    for (int64_t i = 0; i < rank; ++i)
      back.push_back(i < axis ? i + 1 : (i == axis ? 0 : i));
    scattered = e.transpose(scattered, back);
  }
  set(0, scattered);
  return success();
}

LogicalResult OnnxRule::gatherND() {
  // d data: the result's slices added back at their index tuples, as
  // ScatterND with `add` onto zeros (indices kept).
  if (intAttr(op, "batch_dims", 0) != 0)
    return unsupported("GatherND with batch_dims has no gradient here");
  Value data = in(0);
  Shape indexShape = shapeOf(in(1));
  int64_t k = indexShape.back();
  Value index = e.cast(in(1), e.builder().getI64Type());
  // Negative indices count from the end of their dim.
  Shape sizes(shapeOf(data));
  sizes.resize(k);
  Value zero = e.scalar(e.builder().getI64Type(), 0);
  index = e.where(e.compare<onnx::LessOp>(index, zero),
                  e.add(index, e.ints(sizes)), index);
  set(0, e.scatterNDAdd(e.splat(tensorType(data), 0.0), index, g()));
  return success();
}

LogicalResult OnnxRule::pad() {
  // Constant mode: the cotangent of the data is the cotangent where the
  // data went (a slice; zeros padded back where a negative pad cropped);
  // the padding value's is the rest of the cotangent's sum. Pads kept.
  auto mode = op->getAttrOfType<StringAttr>("mode");
  if (mode && mode.getValue() != "constant")
    return unsupported("Pad has a gradient only in constant mode");
  if (optionalOperand(op, 3))
    return unsupported("a Pad with axes has no gradient here");
  Shape shape = shapeOf(in(0));
  int64_t rank = shape.size();
  std::optional<Shape> pads = constantInts(in(1));
  if (!pads || static_cast<int64_t>(pads->size()) != 2 * rank)
    return unsupported("a Pad with non-constant pads has no gradient here");
  Value grad = g();
  Shape cropBefore(rank, 0), cropAfter(rank, 0);
  for (int64_t axis = 0; axis < rank; ++axis) {
    int64_t before = (*pads)[axis], after = (*pads)[rank + axis];
    int64_t size = tensorType(grad).getDimSize(axis);
    int64_t begin = std::max<int64_t>(before, 0);
    int64_t end = size - std::max<int64_t>(after, 0);
    if (begin != 0 || end != size)
      grad = e.slice(grad, axis, begin, end);
    cropBefore[axis] = std::max<int64_t>(-before, 0);
    cropAfter[axis] = std::max<int64_t>(-after, 0);
  }
  if (llvm::any_of(cropBefore, [](int64_t v) { return v != 0; }) ||
      llvm::any_of(cropAfter, [](int64_t v) { return v != 0; }))
    grad = e.pad(grad, cropBefore, cropAfter);
  set(0, grad);
  if (Value value = optionalOperand(op, 2)) {
    Shape all;
    for (int64_t i = 0; i < rank; ++i)
      all.push_back(i);
    Value rest = e.sub(e.reduceSum(g(), all, /*keepdims=*/false),
                       e.reduceSum(grad, all, /*keepdims=*/false));
    set(2, e.reshape(rest, shapeOf(value)));
  }
  return success();
}

LogicalResult OnnxRule::tile() {
  // The cotangent summed over the repeats (repeats kept): [r0 d0, ...]
  // viewed as [r0, d0, r1, d1, ...], summed over the r axes.
  std::optional<Shape> repeats = constantInts(in(1));
  if (!repeats)
    return unsupported("a Tile with non-constant repeats has no gradient here");
  Shape shape = shapeOf(in(0)), split, axes;
  for (size_t i = 0; i < shape.size(); ++i) {
    split.push_back((*repeats)[i]);
    split.push_back(shape[i]);
    axes.push_back(2 * i);
  }
  set(0, e.reshape(e.reduceSum(e.reshape(g(), split), axes,
                               /*keepdims=*/false),
                   shape));
  return success();
}

LogicalResult OnnxRule::slice() {
  // Strided axes: the cotangent scattered back to its indices, one axis at
  // a time; then the rest padded with zeros back to the input's shape.
  Shape shape = shapeOf(in(0));
  std::optional<onnx_lowering::SliceParams> params =
      onnx_lowering::sliceParams(op, shape);
  if (!params)
    return unsupported("a Slice with non-constant bounds has no gradient here");
  Value grad = g();
  Shape before, after;
  for (size_t axis = 0; axis < shape.size(); ++axis) {
    int64_t start = params->starts[axis], step = params->steps[axis],
            size = params->sizes[axis];
    if (step == 1 || size <= 1) {
      before.push_back(start);
      after.push_back(shape[axis] - start - size);
      continue;
    }
    Shape current = shapeOf(grad);
    Shape full = current;
    full[axis] = shape[axis];
    SmallVector<int64_t> indices;
    int64_t inner = 1;
    for (size_t i = axis + 1; i < current.size(); ++i)
      inner *= current[i];
    int64_t total = tensorType(grad).getNumElements();
    indices.reserve(total);
    for (int64_t i = 0; i < total; ++i)
      indices.push_back(start + ((i / inner) % current[axis]) * step);
    auto indexType = RankedTensorType::get(current, e.builder().getI64Type());
    Value index = arith::ConstantOp::create(
        e.builder(), e.getLoc(), DenseIntElementsAttr::get(indexType, indices));
    grad = e.create<onnx::ScatterElementsOp>(
        RankedTensorType::get(full, elementOf(grad)),
        {e.splat(RankedTensorType::get(full, elementOf(grad)), 0.0), index,
         grad},
        {e.intAttr("axis", axis)});
    before.push_back(0);
    after.push_back(0);
  }
  if (llvm::any_of(before, [](int64_t v) { return v != 0; }) ||
      llvm::any_of(after, [](int64_t v) { return v != 0; }))
    grad = e.pad(grad, before, after);
  set(0, grad);
  return success();
}

LogicalResult OnnxRule::layerNorm(bool rms) {
  // Recomputes the statistics from X (kept): x^ = (x - mu) r, then
  // dx = r (g^ - mean(g^) - x^ mean(g^ x^)) with g^ = dY * scale; RMS has
  // no mean: dx = r g^ - x r^3 mean(x g^). Where LayerNormalization's Mean
  // and InvStdDev results are used, their cotangents add dMean / N and
  // dr * (-r^2 x^ / N) (for r = (var + eps)^-1/2).
  Value x = in(0), scale = in(1);
  int64_t rank = tensorType(x).getRank();
  int64_t axis = normalizeAxis(intAttr(op, "axis", -1), rank);
  double epsilon = floatAttr(op, "epsilon", 1e-5);
  Shape axes;
  int64_t n = 1;
  for (int64_t i = axis; i < rank; ++i) {
    axes.push_back(i);
    n *= shapeOf(x)[i];
  }
  Type elt = elementOf(x);
  Value inverseN = e.scalar(elt, 1.0 / static_cast<double>(n));
  auto mean = [&](Value v) {
    return e.mul(e.reduceSum(v, axes, /*keepdims=*/true), inverseN);
  };
  Value centered = rms ? x : e.sub(x, mean(x));
  Value variance = mean(e.mul(centered, centered));
  Value r = e.unary<onnx::ReciprocalOp>(e.unary<onnx::SqrtOp>(
      e.add(variance, e.scalar(elt, epsilon))));
  Value normalized = e.mul(centered, r);
  Value grad = g();
  set(1, e.mul(grad, normalized));
  if (Value bias = optionalOperand(op, 2))
    set(2, grad);
  Value gHat = e.mul(grad, scale);
  Value dx;
  if (rms) {
    dx = e.sub(e.mul(r, gHat),
               e.mul(e.mul(x, e.mul(r, e.mul(r, r))), mean(e.mul(x, gHat))));
  } else {
    dx = e.mul(r, e.sub(e.sub(gHat, mean(gHat)),
                        e.mul(normalized, mean(e.mul(gHat, normalized)))));
    // The statistics are in the stash type.
    if (op->getNumResults() > 1 && dResults[1])
      dx = e.add(dx, e.mul(e.cast(dResults[1], elt), inverseN));
    if (op->getNumResults() > 2 && dResults[2])
      dx = e.sub(dx, e.mul(e.mul(e.cast(dResults[2], elt), inverseN),
                           e.mul(e.mul(r, r), normalized)));
  }
  set(0, dx);
  return success();
}

LogicalResult OnnxRule::build() {
  for (unsigned i = 1; i < op->getNumResults(); ++i)
    if (dResults[i] && !isa<onnx::LayerNormalizationOp, onnx::SplitOp>(op))
      return unsupported("only the first result of this op is differentiable");
  Type elt = isFloat(out()) ? elementOf(out()) : Type();
  auto c = [&](double value) { return e.scalar(elt, value); };
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](onnx::AddOp) {
        set(0, g());
        set(1, g());
        return success();
      })
      .Case([&](onnx::SubOp) {
        set(0, g());
        set(1, e.neg(g()));
        return success();
      })
      .Case([&](onnx::MulOp) {
        set(0, e.mul(g(), in(1)));
        set(1, e.mul(g(), in(0)));
        return success();
      })
      .Case([&](onnx::DivOp) {
        set(0, e.div(g(), in(1)));
        // -g a / b^2 = -g y / b
        set(1, e.neg(e.div(e.mul(g(), out()), in(1))));
        return success();
      })
      .Case([&](onnx::NegOp) {
        set(0, e.neg(g()));
        return success();
      })
      .Case([&](onnx::AbsOp) {
        // torch's sgn(x) dY: none at 0 (x kept).
        Value zero = c(0.0);
        set(0, e.where(e.compare<onnx::GreaterOp>(in(0), zero), g(),
                       e.where(e.compare<onnx::LessOp>(in(0), zero),
                               e.neg(g()), zero)));
        return success();
      })
      .Case([&](onnx::PowOp) {
        std::optional<double> exponent = getConstantScalar(in(1));
        if (!exponent)
          return unsupported("Pow has a gradient only for a constant "
                             "scalar exponent");
        Value derivative =
            *exponent == 2.0
                ? e.mul(in(0), c(2.0))
                : e.mul(e.create<onnx::PowOp>(out().getType(),
                                              {in(0), c(*exponent - 1.0)}),
                        c(*exponent));
        set(0, e.mul(g(), derivative));
        return success();
      })
      .Case([&](onnx::SqrtOp) {
        set(0, e.div(e.mul(g(), c(0.5)), out()));
        return success();
      })
      .Case([&](onnx::ReciprocalOp) {
        set(0, e.neg(e.mul(g(), e.mul(out(), out()))));
        return success();
      })
      .Case([&](onnx::ExpOp) {
        set(0, e.mul(g(), out()));
        return success();
      })
      .Case([&](onnx::LogOp) {
        set(0, e.div(g(), in(0)));
        return success();
      })
      .Case([&](onnx::TanhOp) {
        set(0, e.mul(g(), e.sub(c(1.0), e.mul(out(), out()))));
        return success();
      })
      .Case([&](onnx::SigmoidOp) {
        set(0, e.mul(g(), e.mul(out(), e.sub(c(1.0), out()))));
        return success();
      })
      .Case([&](onnx::ErfOp) {
        Value x = in(0);
        Value gauss = e.unary<onnx::ExpOp>(e.neg(e.mul(x, x)));
        set(0, e.mul(g(), e.mul(gauss, c(2.0 / std::sqrt(M_PI)))));
        return success();
      })
      .Case([&](onnx::SinOp) {
        set(0, e.mul(g(), e.unary<onnx::CosOp>(in(0))));
        return success();
      })
      .Case([&](onnx::CosOp) {
        set(0, e.neg(e.mul(g(), e.unary<onnx::SinOp>(in(0)))));
        return success();
      })
      // Piecewise constant: torch's gradient is zero; a parameter that
      // only reaches the loss through one still gets its (zero) gradient.
      .Case<onnx::SignOp, onnx::RoundOp, onnx::FloorOp, onnx::CeilOp>(
          [&](Operation *) {
            set(0, e.splat(tensorType(in(0)), 0.0));
            return success();
          })
      .Case([&](onnx::TanOp) {
        set(0, e.mul(g(), e.add(c(1.0), e.mul(out(), out()))));
        return success();
      })
      .Case([&](onnx::AtanOp) {
        set(0, e.div(g(), e.add(c(1.0), e.mul(in(0), in(0)))));
        return success();
      })
      .Case<onnx::AsinOp, onnx::AcosOp>([&](Operation *) {
        Value root = e.unary<onnx::SqrtOp>(e.sub(c(1.0), e.mul(in(0), in(0))));
        Value dx = e.div(g(), root);
        set(0, isa<onnx::AcosOp>(op) ? e.neg(dx) : dx);
        return success();
      })
      .Case([&](onnx::SinhOp) {
        set(0, e.mul(g(), e.unary<onnx::CoshOp>(in(0))));
        return success();
      })
      .Case([&](onnx::CoshOp) {
        set(0, e.mul(g(), e.unary<onnx::SinhOp>(in(0))));
        return success();
      })
      .Case<onnx::AsinhOp, onnx::AcoshOp>([&](Operation *) {
        double one = isa<onnx::AsinhOp>(op) ? 1.0 : -1.0;
        set(0, e.div(g(), e.unary<onnx::SqrtOp>(
                              e.add(e.mul(in(0), in(0)), c(one)))));
        return success();
      })
      .Case([&](onnx::AtanhOp) {
        set(0, e.div(g(), e.sub(c(1.0), e.mul(in(0), in(0)))));
        return success();
      })
      .Case<onnx::SumOp, onnx::MeanOp>([&](Operation *) {
        unsigned n = op->getNumOperands();
        Value each = isa<onnx::MeanOp>(op) ? e.mul(g(), c(1.0 / n)) : g();
        for (unsigned i = 0; i < n; ++i)
          set(i, each);
        return success();
      })
      .Case([&](onnx::SoftplusOp) {
        set(0, e.mul(g(), e.unary<onnx::SigmoidOp>(in(0))));
        return success();
      })
      .Case([&](onnx::ReluOp) {
        Value positive = e.compare<onnx::GreaterOp>(out(), c(0.0));
        set(0, e.where(positive, g(), c(0.0)));
        return success();
      })
      .Case([&](onnx::GeluOp) {
        auto approximate = op->getAttrOfType<StringAttr>("approximate");
        if (approximate && approximate.getValue() != "none")
          return unsupported("only the erf form of Gelu has a gradient here");
        // Phi(x) + x phi(x)
        Value x = in(0);
        Value cdf = e.mul(c(0.5), e.add(c(1.0), e.unary<onnx::ErfOp>(
                                                    e.mul(x, c(M_SQRT1_2)))));
        Value pdf = e.mul(c(0.39894228040143267794),
                          e.unary<onnx::ExpOp>(e.mul(e.mul(x, x), c(-0.5))));
        set(0, e.mul(g(), e.add(cdf, e.mul(x, pdf))));
        return success();
      })
      .Case([&](onnx::SoftmaxOp) {
        int64_t axis = intAttr(op, "axis", -1);
        set(0, e.softmaxGrad(out(), g(), axis));
        return success();
      })
      .Case([&](onnx::ReduceSumOp) -> LogicalResult {
        std::optional<Shape> axes = axesOf(op, 1);
        if (!axes)
          return unsupported("ReduceSum axes must be constant");
        if (axes->empty() && intAttr(op, "noop_with_empty_axes", 0)) {
          set(0, g());
          return success();
        }
        Value grad = keepReducedDims(e, g(), in(0), *axes, true);
        set(0, e.expand(grad, shapeOf(in(0))));
        return success();
      })
      .Case([&](onnx::ReduceMeanOp) -> LogicalResult {
        std::optional<Shape> axes = axesOf(op, 1);
        if (!axes)
          return unsupported("ReduceMean axes must be constant");
        if (axes->empty() && intAttr(op, "noop_with_empty_axes", 0)) {
          set(0, g());
          return success();
        }
        int64_t in0 = tensorType(in(0)).getNumElements();
        int64_t n = in0 / std::max<int64_t>(1, tensorType(out()).getNumElements());
        Value grad = keepReducedDims(e, g(), in(0), *axes, true);
        set(0, e.expand(e.mul(grad, c(1.0 / static_cast<double>(n))),
                        shapeOf(in(0))));
        return success();
      })
      .Case([&](onnx::ReduceLogSumExpOp) -> LogicalResult {
        std::optional<Shape> axes = axesOf(op, 1);
        if (!axes)
          return unsupported("ReduceLogSumExp axes must be constant");
        if (axes->empty() && intAttr(op, "noop_with_empty_axes", 0)) {
          set(0, g());
          return success();
        }
        Value grad = keepReducedDims(e, g(), in(0), *axes, true);
        Value y = keepReducedDims(e, out(), in(0), *axes, true);
        set(0, e.mul(e.unary<onnx::ExpOp>(e.sub(in(0), y)), grad));
        return success();
      })
      .Case<onnx::ReduceMaxOp, onnx::ReduceMinOp>(
          [&](Operation *) -> LogicalResult {
            // PyTorch's amax/amin: the cotangent split evenly among the
            // ties (the input and the result kept).
            std::optional<Shape> axes = axesOf(op, 1);
            if (!axes)
              return unsupported("ReduceMax and ReduceMin axes must be "
                                 "constant");
            if (axes->empty() && intAttr(op, "noop_with_empty_axes", 0)) {
              set(0, g());
              return success();
            }
            Value y = keepReducedDims(e, out(), in(0), *axes, true);
            Value hit = e.cast(e.compare<onnx::EqualOp>(in(0), y), elt);
            Value ties = e.reduceSum(hit, *axes, /*keepdims=*/true);
            Value grad = keepReducedDims(e, g(), in(0), *axes, true);
            set(0, e.mul(hit, e.div(grad, ties)));
            return success();
          })
      .Case([&](onnx::MatMulOp) { return matmul(); })
      .Case([&](onnx::GemmOp) { return gemm(); })
      .Case([&](onnx::EinsumOp) { return einsum(); })
      .Case<onnx::ReshapeOp, onnx::FlattenOp, onnx::SqueezeOp,
            onnx::UnsqueezeOp, onnx::IdentityOp>([&](Operation *) {
        set(0, e.reshape(g(), shapeOf(in(0))));
        return success();
      })
      .Case([&](onnx::TransposeOp) {
        int64_t rank = tensorType(in(0)).getRank();
        Shape perm;
        if (std::optional<Shape> given = intsAttr(op, "perm"))
          perm = *given;
        else
          for (int64_t i = rank - 1; i >= 0; --i)
            perm.push_back(i);
        Shape inverse(rank);
        for (int64_t i = 0; i < rank; ++i)
          inverse[perm[i]] = i;
        set(0, e.transpose(g(), inverse));
        return success();
      })
      .Case([&](onnx::ConcatOp) {
        int64_t rank = tensorType(out()).getRank();
        int64_t axis = normalizeAxis(intAttr(op, "axis", 0), rank);
        int64_t offset = 0;
        for (unsigned i = 0; i < op->getNumOperands(); ++i) {
          int64_t size = tensorType(in(i)).getDimSize(axis);
          set(i, e.slice(g(), axis, offset, offset + size));
          offset += size;
        }
        return success();
      })
      .Case([&](onnx::SplitOp) {
        int64_t rank = tensorType(in(0)).getRank();
        int64_t axis = normalizeAxis(intAttr(op, "axis", 0), rank);
        SmallVector<Value> parts;
        for (unsigned i = 0; i < op->getNumResults(); ++i)
          parts.push_back(orZeros(e, dResults[i], out(i)));
        set(0, e.concat(parts, axis));
        return success();
      })
      .Case([&](onnx::SliceOp) { return slice(); })
      .Case([&](onnx::ExpandOp) {
        set(0, g());
        return success();
      })
      .Case([&](onnx::TileOp) { return tile(); })
      .Case([&](onnx::PadOp) { return pad(); })
      .Case([&](onnx::TriluOp) {
        // The same triangle of the cotangent (k kept).
        SmallVector<Value> operands{g()};
        if (Value k = optionalOperand(op, 1))
          operands.push_back(k);
        set(0, e.create<onnx::TriluOp>(out().getType(), operands,
                                       {e.intAttr("upper",
                                                  intAttr(op, "upper", 1))}));
        return success();
      })
      .Case([&](onnx::CumSumOp) -> LogicalResult {
        // The cotangent summed the other way along the axis (the axis
        // kept): y_i = sum_{j <= i} x_j gives dx_j = sum_{i >= j} dy_i,
        // and exclusive sums stay exclusive.
        std::optional<Shape> axis = constantInts(in(1));
        if (!axis || axis->size() != 1)
          return unsupported("a CumSum with a non-constant axis has no "
                             "gradient here");
        set(0, e.create<onnx::CumSumOp>(
                   out().getType(), {g(), in(1)},
                   {e.intAttr("exclusive", intAttr(op, "exclusive", 0)),
                    e.intAttr("reverse", !intAttr(op, "reverse", 0))}));
        return success();
      })
      .Case([&](onnx::GatherOp) { return gather(); })
      .Case([&](onnx::GatherNDOp) { return gatherND(); })
      .Case([&](onnx::GatherElementsOp) {
        Value data = in(0);
        int64_t rank = tensorType(data).getRank();
        int64_t axis = normalizeAxis(intAttr(op, "axis", 0), rank);
        Value index = e.cast(in(1), e.builder().getI64Type());
        Value size = e.scalar(e.builder().getI64Type(),
                              tensorType(data).getDimSize(axis));
        Value zero = e.scalar(e.builder().getI64Type(), 0);
        index = e.where(e.compare<onnx::LessOp>(index, zero),
                        e.add(index, size), index);
        set(0, e.scatterElementsAdd(e.splat(tensorType(data), 0.0), index,
                                    g(), axis));
        return success();
      })
      .Case([&](onnx::ScatterNDOp) -> LogicalResult {
        // d data: the cotangent where nothing was written over it;
        // d updates: the cotangent read back where they went.
        auto reduction = op->getAttrOfType<StringAttr>("reduction");
        bool add = reduction && reduction.getValue() == "add";
        if (reduction && !add && reduction.getValue() != "none")
          return unsupported("ScatterND with reduction '" +
                             reduction.getValue() + "' has no gradient here");
        Value indices = e.cast(in(1), e.builder().getI64Type());
        Value updates = in(2);
        set(0, add ? g()
                   : e.create<onnx::ScatterNDOp>(
                         out().getType(),
                         {g(), indices, e.splat(tensorType(updates), 0.0)}));
        set(2, e.create<onnx::GatherNDOp>(updates.getType(), {g(), indices}));
        return success();
      })
      .Case([&](onnx::ScatterElementsOp) -> LogicalResult {
        // As ScatterND, element by element along the axis (indices kept).
        auto reduction = op->getAttrOfType<StringAttr>("reduction");
        bool add = reduction && reduction.getValue() == "add";
        if (reduction && !add && reduction.getValue() != "none")
          return unsupported("ScatterElements with reduction '" +
                             reduction.getValue() + "' has no gradient here");
        Value data = in(0), indices = in(1), updates = in(2);
        int64_t rank = tensorType(data).getRank();
        int64_t axis = normalizeAxis(intAttr(op, "axis", 0), rank);
        set(0, add ? g()
                   : e.create<onnx::ScatterElementsOp>(
                         out().getType(),
                         {g(), indices, e.splat(tensorType(updates), 0.0)},
                         {e.intAttr("axis", axis)}));
        set(2, e.gatherElements(g(), indices, axis));
        return success();
      })
      .Case([&](onnx::TopKOp) {
        // The values' cotangent back at their indices (the indices get
        // none): torch's value_selecting_reduction_backward.
        if (!dResults[0])
          return success();
        Value data = in(0);
        int64_t rank = tensorType(data).getRank();
        int64_t axis = normalizeAxis(intAttr(op, "axis", -1), rank);
        Value index = e.cast(out(1), e.builder().getI64Type());
        set(0, e.scatterElementsAdd(e.splat(tensorType(data), 0.0), index,
                                    dResults[0], axis));
        return success();
      })
      .Case([&](onnx::WhereOp) {
        Value zero = c(0.0);
        set(1, e.where(in(0), g(), zero));
        set(2, e.where(in(0), zero, g()));
        return success();
      })
      .Case([&](onnx::CastOp) {
        if (isFloat(in(0)))
          set(0, e.cast(g(), elementOf(in(0))));
        return success();
      })
      .Case<onnx::MaxOp, onnx::MinOp>([&](Operation *) -> LogicalResult {
        if (op->getNumOperands() != 2)
          return unsupported("Max and Min have gradients for two operands");
        // PyTorch's maximum/minimum: a tie gives each side half.
        bool max = isa<onnx::MaxOp>(op);
        Value a = in(0), bm = in(1);
        Value wins = max ? e.compare<onnx::GreaterOp>(a, bm)
                         : e.compare<onnx::LessOp>(a, bm);
        Value ties = e.compare<onnx::EqualOp>(a, bm);
        Value share = e.where(wins, c(1.0), e.where(ties, c(0.5), c(0.0)));
        set(0, e.mul(g(), share));
        set(1, e.mul(g(), e.sub(c(1.0), share)));
        return success();
      })
      .Case([&](onnx::ClipOp) {
        // torch.clamp: the bounds pass the gradient (inclusive).
        Value x = in(0);
        Value inside = e.splat(
            RankedTensorType::get(shapeOf(x), e.builder().getI1Type()), 1.0);
        if (Value low = optionalOperand(op, 1))
          inside = e.create<onnx::AndOp>(
              inside.getType(),
              {inside, e.compare<onnx::GreaterOrEqualOp>(x, low)});
        if (Value high = optionalOperand(op, 2))
          inside = e.create<onnx::AndOp>(
              inside.getType(),
              {inside, e.compare<onnx::LessOrEqualOp>(x, high)});
        set(0, e.where(inside, g(), c(0.0)));
        return success();
      })
      .Case([&](onnx::LayerNormalizationOp) { return layerNorm(false); })
      .Case([&](onnx::RMSNormalizationOp) { return layerNorm(true); })
      .Default([&](Operation *) {
        return unsupported("no gradient rule for '" +
                           op->getName().getStringRef() +
                           "' (the op lies between a parameter and the loss)");
      });
}

} // namespace

LogicalResult buildOnnxVJP(Emitter &e, Operation *op, ArrayRef<Value> dResults,
                           MutableArrayRef<Value> dOperands) {
  return OnnxRule{e, op, dResults, dOperands}.build();
}

} // namespace mlir::moe::autodiff
