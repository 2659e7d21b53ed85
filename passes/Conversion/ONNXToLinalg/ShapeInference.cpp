//===- ShapeInference.cpp - result shapes of onnx ops ---------------------===//
//
// The result shapes of each onnx op from its operand shapes and constant
// operands (ONNX's shape inference rules), for the ops whose results the
// model leaves dynamic (StaticShapes.cpp) and for the folder (Constants.cpp).
// Where a shape is not determined statically the rule says why.
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/ONNXToLinalg/Lowering.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::moe::onnx_lowering {

namespace {
using Shapes = SmallVectorImpl<Shape>;
} // namespace

/// The shape of operand `index` of `op`.
static Shape shapeOf(Operation *op, unsigned index) {
  return Shape(
      cast<RankedTensorType>(op->getOperand(index).getType()).getShape());
}

/// Fails with `message` in `why`.
static LogicalResult fail(std::string &why, const Twine &message) {
  why = message.str();
  return failure();
}

/// A Reshape downstream of `nonZero` to a constant shape of fixed sizes
/// (no -1) from rows of a dynamic count: a tracing exporter writes the
/// count its sample input had (a traced `y[idx] += v`).
static Operation *tracedReshapeAfter(onnx::NonZeroOp nonZero) {
  SmallVector<std::pair<Value, unsigned>> work{{nonZero.getOutputs()[0], 0}};
  DenseSet<Operation *> seen;
  while (!work.empty()) {
    auto [value, depth] = work.pop_back_val();
    for (Operation *user : value.getUsers()) {
      if (!seen.insert(user).second)
        continue;
      if (auto reshape = dyn_cast<onnx::ReshapeOp>(user)) {
        auto in = dyn_cast<RankedTensorType>(reshape.getInputs()[0].getType());
        std::optional<Shape> shape = getConstantInts(reshape.getInputs()[1]);
        if (in && !in.hasStaticShape() && shape &&
            llvm::all_of(*shape, [](int64_t n) { return n > 0; }))
          return reshape;
      }
      if (depth < 16)
        for (Value result : user->getResults())
          work.push_back({result, depth + 1});
    }
  }
  return nullptr;
}

/// `op`'s name in the model where the importer kept it, else its location.
static std::string describeLoc(Operation *op) {
  if (auto name = dyn_cast<NameLoc>(op->getLoc()))
    return "node '" + name.getName().str() + "'";
  std::string text;
  llvm::raw_string_ostream os(text);
  op->getLoc().print(os);
  return text;
}

//===----------------------------------------------------------------------===//
// Per-family rules
//===----------------------------------------------------------------------===//

static LogicalResult inferBroadcast(Operation *op, Shapes &shapes,
                                    std::string &why) {
  SmallVector<Shape> operands;
  for (auto [i, operand] : llvm::enumerate(op->getOperands()))
    if (!isNone(operand))
      operands.push_back(shapeOf(op, i));
  FailureOr<Shape> shape = broadcastShapes(operands);
  if (failed(shape))
    return fail(why, "operand shapes do not broadcast");
  shapes.push_back(*shape);
  return success();
}

static LogicalResult inferMatMul(Operation *op, Shapes &shapes,
                                 std::string &why) {
  Shape a = shapeOf(op, 0), b = shapeOf(op, 1);
  if (a.empty() || b.empty())
    return fail(why, "MatMul of a scalar");
  bool vectorA = a.size() == 1, vectorB = b.size() == 1;
  if (vectorA)
    a.insert(a.begin(), 1);
  if (vectorB)
    b.push_back(1);
  FailureOr<Shape> batch = broadcastShapes(
      {Shape(ArrayRef(a).drop_back(2)), Shape(ArrayRef(b).drop_back(2))});
  if (failed(batch))
    return fail(why, "batch dimensions do not broadcast");
  Shape result = *batch;
  if (!vectorA)
    result.push_back(a[a.size() - 2]);
  if (!vectorB)
    result.push_back(b.back());
  shapes.push_back(result);
  return success();
}

static LogicalResult inferGemm(Operation *op, Shapes &shapes, std::string &) {
  Shape a = shapeOf(op, 0), b = shapeOf(op, 1);
  int64_t m = intAttr(op, "transA", 0) ? a[1] : a[0];
  int64_t n = intAttr(op, "transB", 0) ? b[0] : b[1];
  shapes.push_back({m, n});
  return success();
}

static LogicalResult inferEinsum(Operation *op, Shapes &shapes,
                                 std::string &why) {
  auto equation = op->getAttrOfType<StringAttr>("equation");
  if (!equation)
    return fail(why, "has no equation");
  SmallVector<Shape> operands;
  for (unsigned i = 0; i < op->getNumOperands(); ++i)
    operands.push_back(shapeOf(op, i));
  FailureOr<EinsumSpec> spec =
      parseEinsum(equation.getValue(), operands, op->getContext(), why);
  if (failed(spec))
    return failure();
  Shape result;
  for (unsigned loop : spec->outputLoops)
    result.push_back(spec->loopSizes[loop]);
  shapes.push_back(result);
  return success();
}

/// Reduce*: the axes operand (or attribute), keepdims and
/// noop_with_empty_axes.
static LogicalResult inferReduce(Operation *op, Shapes &shapes,
                                 std::string &why) {
  Shape shape = shapeOf(op, 0);
  int64_t rank = shape.size();
  std::optional<Shape> axes = axesOf(op, 1);
  if (!axes)
    return fail(why, "the axes (operand #1) are not a constant");
  bool keepDims = intAttr(op, "keepdims", 1);
  if (axes->empty()) {
    if (intAttr(op, "noop_with_empty_axes", 0)) {
      shapes.push_back(shape);
      return success();
    }
    axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  }
  SmallVector<bool> reduced(rank, false);
  for (int64_t axis : *axes) {
    axis = normalizeAxis(axis, rank);
    if (axis < 0 || axis >= rank)
      return fail(why, "an axis is out of range");
    reduced[axis] = true;
  }
  Shape result;
  for (int64_t i = 0; i < rank; ++i)
    if (!reduced[i])
      result.push_back(shape[i]);
    else if (keepDims)
      result.push_back(1);
  shapes.push_back(result);
  return success();
}

static LogicalResult inferArgMax(Operation *op, Shapes &shapes, std::string &) {
  Shape shape = shapeOf(op, 0);
  int64_t axis = normalizeAxis(intAttr(op, "axis", 0), shape.size());
  if (intAttr(op, "keepdims", 1))
    shape[axis] = 1;
  else
    shape.erase(shape.begin() + axis);
  shapes.push_back(shape);
  return success();
}

static LogicalResult inferTopK(Operation *op, Shapes &shapes,
                               std::string &why) {
  Shape shape = shapeOf(op, 0);
  std::optional<double> k = getConstantScalar(op->getOperand(1));
  if (!k)
    return fail(why, "K (operand #1) is not a constant");
  shape[normalizeAxis(intAttr(op, "axis", -1), shape.size())] =
      static_cast<int64_t>(*k);
  shapes.push_back(shape);
  shapes.push_back(shape);
  return success();
}

static LogicalResult inferLayerNorm(Operation *op, Shapes &shapes,
                                    std::string &) {
  Shape shape = shapeOf(op, 0);
  int64_t rank = shape.size();
  int64_t axis = normalizeAxis(intAttr(op, "axis", -1), rank);
  shapes.push_back(shape);
  Shape statistics(shape);
  for (int64_t i = axis; i < rank; ++i)
    statistics[i] = 1;
  for (unsigned i = 1; i < op->getNumResults(); ++i)
    shapes.push_back(statistics);
  return success();
}

static LogicalResult inferOneHot(Operation *op, Shapes &shapes,
                                 std::string &why) {
  Shape shape = shapeOf(op, 0);
  std::optional<double> depth = getConstantScalar(op->getOperand(1));
  if (!depth)
    return fail(why, "the depth (operand #1) is not a constant");
  int64_t axis = normalizeAxis(intAttr(op, "axis", -1), shape.size() + 1);
  shape.insert(shape.begin() + axis, static_cast<int64_t>(*depth));
  shapes.push_back(shape);
  return success();
}

static LogicalResult inferGather(Operation *op, Shapes &shapes, std::string &) {
  Shape data = shapeOf(op, 0), indices = shapeOf(op, 1);
  int64_t axis = normalizeAxis(intAttr(op, "axis", 0), data.size());
  Shape result(ArrayRef(data).take_front(axis));
  llvm::append_range(result, indices);
  llvm::append_range(result, ArrayRef(data).drop_front(axis + 1));
  shapes.push_back(result);
  return success();
}

static LogicalResult inferGatherND(Operation *op, Shapes &shapes,
                                   std::string &why) {
  Shape data = shapeOf(op, 0), indices = shapeOf(op, 1);
  int64_t batchDims = intAttr(op, "batch_dims", 0);
  if (indices.empty() || ShapedType::isDynamic(indices.back()))
    return fail(why, "the index tuple length is not static");
  int64_t depth = indices.back();
  if (batchDims + depth > static_cast<int64_t>(data.size()))
    return fail(why, "index tuples are longer than the data rank");
  Shape result(ArrayRef(indices).drop_back());
  llvm::append_range(result, ArrayRef(data).drop_front(batchDims + depth));
  shapes.push_back(result);
  return success();
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

static LogicalResult inferReshape(Operation *op, Shapes &shapes,
                                  std::string &why) {
  Shape input = shapeOf(op, 0);
  std::optional<Shape> target = getConstantInts(op->getOperand(1));
  if (!target)
    return fail(why, "the target shape (operand #1) is not a constant");
  bool allowZero = intAttr(op, "allowzero", 0);
  int64_t inferred = -1;
  for (auto [i, dim] : llvm::enumerate(*target)) {
    if (dim == 0 && !allowZero) {
      if (i >= input.size())
        return fail(why, "a 0 in the target shape has no input dim");
      dim = input[i];
    } else if (dim == -1) {
      inferred = i;
    }
  }
  if (inferred >= 0) {
    if (ShapedType::isDynamicShape(input))
      return fail(why, "the -1 of the target shape needs a static input");
    int64_t known = 1;
    for (auto [i, dim] : llvm::enumerate(*target))
      if (static_cast<int64_t>(i) != inferred)
        known *= dim;
    if (known == 0 || product(input) % known != 0)
      return fail(why, "the target shape does not divide the input");
    (*target)[inferred] = product(input) / known;
  }
  shapes.push_back(*target);
  return success();
}

static LogicalResult inferSqueeze(Operation *op, Shapes &shapes,
                                  std::string &why) {
  Shape input = shapeOf(op, 0);
  int64_t rank = input.size();
  std::optional<Shape> axes = axesOf(op, 1);
  if (!axes)
    return fail(why, "the axes (operand #1) are not a constant");
  SmallVector<bool> drop(rank, false);
  for (int64_t i = 0; i < rank && axes->empty(); ++i)
    drop[i] = input[i] == 1;
  for (int64_t axis : *axes)
    drop[normalizeAxis(axis, rank)] = true;
  Shape result;
  for (int64_t i = 0; i < rank; ++i)
    if (!drop[i])
      result.push_back(input[i]);
  shapes.push_back(result);
  return success();
}

static LogicalResult inferUnsqueeze(Operation *op, Shapes &shapes,
                                    std::string &why) {
  Shape input = shapeOf(op, 0);
  std::optional<Shape> axes = axesOf(op, 1);
  if (!axes)
    return fail(why, "the axes (operand #1) are not a constant");
  int64_t rank = input.size() + axes->size();
  SmallVector<bool> added(rank, false);
  for (int64_t axis : *axes)
    added[normalizeAxis(axis, rank)] = true;
  Shape result;
  auto next = input.begin();
  for (int64_t i = 0; i < rank; ++i)
    result.push_back(added[i] ? 1 : *next++);
  shapes.push_back(result);
  return success();
}

static LogicalResult inferFlatten(Operation *op, Shapes &shapes,
                                  std::string &) {
  Shape input = shapeOf(op, 0);
  int64_t axis = normalizeAxis(intAttr(op, "axis", 1), input.size());
  shapes.push_back({product(ArrayRef(input).take_front(axis)),
                    product(ArrayRef(input).drop_front(axis))});
  return success();
}

static LogicalResult inferTranspose(Operation *op, Shapes &shapes,
                                    std::string &) {
  Shape input = shapeOf(op, 0);
  Shape perm = intsAttr(op, "perm").value_or(Shape());
  if (perm.empty())
    perm = llvm::to_vector(llvm::reverse(llvm::seq<int64_t>(0, input.size())));
  Shape result;
  for (int64_t axis : perm)
    result.push_back(input[axis]);
  shapes.push_back(result);
  return success();
}

static LogicalResult inferConcat(Operation *op, Shapes &shapes, std::string &) {
  Shape result = shapeOf(op, 0);
  int64_t axis = normalizeAxis(intAttr(op, "axis", 0), result.size());
  for (unsigned i = 1; i < op->getNumOperands(); ++i) {
    int64_t dim = shapeOf(op, i)[axis];
    result[axis] = ShapedType::isDynamic(dim) ? dim : result[axis] + dim;
  }
  shapes.push_back(result);
  return success();
}

static LogicalResult inferSplit(Operation *op, Shapes &shapes,
                                std::string &why) {
  Shape input = shapeOf(op, 0);
  int64_t axis = normalizeAxis(intAttr(op, "axis", 0), input.size());
  int64_t outputs = op->getNumResults();
  std::optional<Shape> sizes = intsAttr(op, "split");
  if (Value split = optionalOperand(op, 1)) {
    sizes = getConstantInts(split);
    if (!sizes)
      return fail(why, "the split sizes (operand #1) are not a constant");
  }
  if (!sizes) {
    // Equal parts, the last one smaller (opset 18 num_outputs).
    int64_t part = (input[axis] + outputs - 1) / outputs;
    sizes = Shape(outputs, part);
    sizes->back() = input[axis] - part * (outputs - 1);
  }
  if (static_cast<int64_t>(sizes->size()) != outputs)
    return fail(why, "the split sizes do not match the outputs");
  for (int64_t size : *sizes) {
    Shape shape(input);
    shape[axis] = size;
    shapes.push_back(shape);
  }
  return success();
}

static LogicalResult inferSlice(Operation *op, Shapes &shapes,
                                std::string &why) {
  std::optional<SliceParams> params = sliceParams(op, shapeOf(op, 0));
  if (!params)
    return fail(why, "starts, ends, axes and steps must be constants");
  shapes.push_back(params->sizes);
  return success();
}

static LogicalResult inferExpand(Operation *op, Shapes &shapes,
                                 std::string &why) {
  std::optional<Shape> target = getConstantInts(op->getOperand(1));
  if (!target)
    return fail(why, "the target shape (operand #1) is not a constant");
  FailureOr<Shape> shape = broadcastShapes({shapeOf(op, 0), *target});
  if (failed(shape))
    return fail(why, "the target shape does not broadcast with the input");
  shapes.push_back(*shape);
  return success();
}

static LogicalResult inferTile(Operation *op, Shapes &shapes,
                               std::string &why) {
  Shape shape = shapeOf(op, 0);
  std::optional<Shape> repeats = getConstantInts(op->getOperand(1));
  if (!repeats)
    return fail(why, "the repeats (operand #1) are not a constant");
  if (repeats->size() != shape.size())
    return fail(why, "the repeats do not match the input rank");
  for (auto [dim, repeat] : llvm::zip(shape, *repeats)) {
    if (repeat < 0)
      return fail(why, "a repeat is negative");
    dim *= repeat;
  }
  shapes.push_back(shape);
  return success();
}

static LogicalResult inferPad(Operation *op, Shapes &shapes, std::string &why) {
  Shape shape = shapeOf(op, 0);
  int64_t rank = shape.size();
  std::optional<Shape> pads = getConstantInts(op->getOperand(1));
  if (!pads)
    return fail(why, "the pads (operand #1) are not a constant");
  if (optionalOperand(op, 3) || static_cast<int64_t>(pads->size()) != 2 * rank)
    return fail(why, "the pads do not cover every dim");
  for (int64_t i = 0; i < rank; ++i)
    shape[i] += (*pads)[i] + (*pads)[i + rank];
  shapes.push_back(shape);
  return success();
}

static LogicalResult inferConv(Operation *op, Shapes &shapes,
                               std::string &why) {
  FailureOr<Conv1DParams> params = conv1DParams(op, why);
  if (failed(params))
    return failure();
  Shape x = shapeOf(op, 0), w = shapeOf(op, 1);
  int64_t span = params->dilation * (w[2] - 1) + 1;
  int64_t length =
      (x[2] + params->padBegin + params->padEnd - span) / params->stride + 1;
  shapes.push_back({x[0], w[0], length});
  return success();
}

static LogicalResult inferConstantOfShape(Operation *op, Shapes &shapes,
                                          std::string &why) {
  std::optional<Shape> shape = getConstantInts(op->getOperand(0));
  if (!shape)
    return fail(why, "the shape (operand #0) is not a constant");
  shapes.push_back(*shape);
  return success();
}

static LogicalResult inferRange(Operation *op, Shapes &shapes,
                                std::string &why) {
  std::optional<double> start = getConstantScalar(op->getOperand(0));
  std::optional<double> limit = getConstantScalar(op->getOperand(1));
  std::optional<double> delta = getConstantScalar(op->getOperand(2));
  if (!start || !limit || !delta || *delta == 0)
    return fail(why, "start, limit and delta must be constants (a Range "
                     "over data-dependent bounds, as an exported MoE block "
                     "slices each expert's rows, compiles only inside a "
                     "block that moe-raise raised; `moe-opt "
                     "--moe-raise=explain=1` says why one was not)");
  shapes.push_back({std::max<int64_t>(
      0, static_cast<int64_t>(std::ceil((*limit - *start) / *delta)))});
  return success();
}

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

LogicalResult inferShapes(Operation *op, SmallVectorImpl<Shape> &shapes,
                          std::string &why) {
  for (Value operand : op->getOperands())
    if (!isNone(operand) && !isStaticTensor(operand.getType()))
      return fail(why, "an operand has a dynamic shape");
  auto same = [&](Operation *) {
    shapes.push_back(shapeOf(op, 0));
    return success();
  };
  if (onnx::isElementwise(op))
    return inferBroadcast(op, shapes, why);
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case<onnx::SoftmaxOp, onnx::CumSumOp, onnx::TriluOp,
            onnx::RMSNormalizationOp, onnx::ScatterElementsOp,
            onnx::ScatterNDOp>(same)
      // GatherElements takes the shape of its indices.
      .Case([&](onnx::GatherElementsOp) {
        shapes.push_back(shapeOf(op, 1));
        return success();
      })
      .Case([&](onnx::MatMulOp) { return inferMatMul(op, shapes, why); })
      .Case([&](onnx::GemmOp) { return inferGemm(op, shapes, why); })
      .Case([&](onnx::EinsumOp) { return inferEinsum(op, shapes, why); })
      .Case<onnx::ReduceSumOp, onnx::ReduceMeanOp, onnx::ReduceMaxOp,
            onnx::ReduceMinOp, onnx::ReduceProdOp, onnx::ReduceL1Op,
            onnx::ReduceL2Op, onnx::ReduceLogSumExpOp>(
          [&](Operation *) { return inferReduce(op, shapes, why); })
      .Case<onnx::ArgMaxOp, onnx::ArgMinOp>(
          [&](Operation *) { return inferArgMax(op, shapes, why); })
      .Case([&](onnx::TopKOp) { return inferTopK(op, shapes, why); })
      .Case([&](onnx::LayerNormalizationOp) {
        return inferLayerNorm(op, shapes, why);
      })
      .Case([&](onnx::OneHotOp) { return inferOneHot(op, shapes, why); })
      .Case([&](onnx::GatherOp) { return inferGather(op, shapes, why); })
      .Case([&](onnx::GatherNDOp) { return inferGatherND(op, shapes, why); })
      .Case([&](onnx::ReshapeOp) { return inferReshape(op, shapes, why); })
      .Case([&](onnx::SqueezeOp) { return inferSqueeze(op, shapes, why); })
      .Case([&](onnx::UnsqueezeOp) { return inferUnsqueeze(op, shapes, why); })
      .Case([&](onnx::FlattenOp) { return inferFlatten(op, shapes, why); })
      .Case([&](onnx::TransposeOp) { return inferTranspose(op, shapes, why); })
      .Case([&](onnx::ConcatOp) { return inferConcat(op, shapes, why); })
      .Case([&](onnx::SplitOp) { return inferSplit(op, shapes, why); })
      .Case([&](onnx::SliceOp) { return inferSlice(op, shapes, why); })
      .Case([&](onnx::ExpandOp) { return inferExpand(op, shapes, why); })
      .Case([&](onnx::TileOp) { return inferTile(op, shapes, why); })
      .Case([&](onnx::PadOp) { return inferPad(op, shapes, why); })
      .Case([&](onnx::ConvOp) { return inferConv(op, shapes, why); })
      .Case([&](onnx::ConstantOfShapeOp) {
        return inferConstantOfShape(op, shapes, why);
      })
      .Case([&](onnx::RangeOp) { return inferRange(op, shapes, why); })
      .Case([&](onnx::NonZeroOp nonZero) {
        if (Operation *traced = tracedReshapeAfter(nonZero))
          return fail(why,
                      "has a data-dependent shape, and a Reshape after it (" +
                          describeLoc(traced) +
                          ") fixes its rows to the count the exporter's "
                          "sample input had: the graph runs only on inputs "
                          "routed as that sample was (it fails on others); "
                          "export the expert loop with index_add_ "
                          "(`y.index_add_(0, idx, ...)`), not `y[idx] += ...`");
        return fail(why, "has a data-dependent shape; only the MoE blocks "
                         "that contain it can be compiled, after moe-raise");
      })
      .Default([&](Operation *) {
        return fail(why, "has no shape rule in the lowering");
      });
}

} // namespace mlir::moe::onnx_lowering
