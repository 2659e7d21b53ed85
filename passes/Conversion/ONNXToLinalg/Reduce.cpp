//===- Reduce.cpp - lower onnx reductions, normalisations and selections --===//
//
// Reductions are linalg.generics whose result map drops the reduced loops,
// reshaped to the keepdims result. Softmax and LayerNormalization are
// reductions along an axis and maps that read them broadcast. ArgMax carries
// (value, index) with a strict `>` (ties to the first). TopK ranks every
// element among its row (larger, or equal and earlier, come first) and then
// picks the elements of rank 0..k-1, so ties go to the lower index and the
// output is sorted. CumSum sums the prefix (or suffix) of each element.
//
//===----------------------------------------------------------------------===//

#include "mlir/Transforms/DialectConversion.h"
#include "passes/Conversion/ONNXToLinalg/Lowering.h"

namespace mlir::moe::onnx_lowering {

/// The loops `[0, rank)` without `dropped`.
static SmallVector<unsigned> loopsExcept(int64_t rank, ArrayRef<bool> dropped) {
  SmallVector<unsigned> loops;
  for (int64_t i = 0; i < rank; ++i)
    if (!dropped[i])
      loops.push_back(i);
  return loops;
}

/// The shape `shape` without the `dropped` dims.
static Shape shapeExcept(ArrayRef<int64_t> shape, ArrayRef<bool> dropped) {
  Shape kept;
  for (auto [dim, drop] : llvm::zip(shape, dropped))
    if (!drop)
      kept.push_back(dim);
  return kept;
}

/// A tensor of `type` filled with the scalar `value`.
static Value filledWith(OpBuilder &b, Location loc, RankedTensorType type,
                        Value value) {
  return linalg::FillOp::create(b, loc, value, emptyTensor(b, loc, type))
      .getResult(0);
}

/// The identity map of `numLoops` loops, with loop `axis` read as `loop`.
static AffineMap withAxisAt(OpBuilder &b, unsigned numLoops, int64_t rank,
                            int64_t axis, unsigned loop) {
  SmallVector<unsigned> targets = llvm::to_vector(llvm::seq<unsigned>(0, rank));
  targets[axis] = loop;
  return loopsTo(b, numLoops, targets);
}

namespace {

enum class ReduceKind { Sum, Mean, Max, Min, Prod, L1, L2, LogSumExp };

/// The highest value of an element type: +inf or the signed maximum.
static Value highestValue(OpBuilder &b, Location loc, Type type) {
  if (isa<FloatType>(type))
    return scalarConst(b, loc, type, -kNegInf);
  unsigned width = type.getIntOrFloatBitWidth();
  APInt highest = width == 1 ? APInt(1, 1) : APInt::getSignedMaxValue(width);
  return arith::ConstantOp::create(b, loc, type,
                                   b.getIntegerAttr(type, highest));
}

/// `max` or `min` of two scalars; booleans order false < true.
static Value extremum(OpBuilder &b, Location loc, Value lhs, Value rhs,
                      bool max) {
  Type type = lhs.getType();
  if (isa<FloatType>(type))
    return max ? Value(arith::MaximumFOp::create(b, loc, lhs, rhs))
               : Value(arith::MinimumFOp::create(b, loc, lhs, rhs));
  if (type.isInteger(1))
    return max ? Value(arith::OrIOp::create(b, loc, lhs, rhs))
               : Value(arith::AndIOp::create(b, loc, lhs, rhs));
  return max ? Value(arith::MaxSIOp::create(b, loc, lhs, rhs))
             : Value(arith::MinSIOp::create(b, loc, lhs, rhs));
}

/// The Reduce* ops over constant axes (the input form that the import
/// gives every opset).
template <typename OpTy, ReduceKind kind>
struct ReduceLowering : OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;

  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value data = adaptor.getOperands()[0];
    RankedTensorType dataType = tensorType(data);
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    int64_t rank = dataType.getRank();
    std::optional<Shape> axes = axesOf(op, 1);
    if (!axes)
      return cannotLower(rewriter, op, "the axes are not a constant");
    Type elementType = type.getElementType();
    bool isFloatType = isa<FloatType>(elementType);
    if (!isFloatType &&
        (kind == ReduceKind::L2 || kind == ReduceKind::LogSumExp))
      return cannotLower(rewriter, op, "expects a float operand");
    Location loc = op.getLoc();
    if (axes->empty() && intAttr(op, "noop_with_empty_axes", 0)) {
      rewriter.replaceOp(op, data);
      return success();
    }
    SmallVector<bool> reduced(rank, axes->empty());
    for (int64_t axis : *axes)
      reduced[normalizeAxis(axis, rank)] = true;
    auto reducedType = RankedTensorType::get(
        shapeExcept(dataType.getShape(), reduced), elementType);
    AffineMap identity =
        AffineMap::getMultiDimIdentityMap(rank, op.getContext());
    AffineMap reducedMap = loopsTo(rewriter, rank, loopsExcept(rank, reduced));
    auto reduceWith =
        [&](Value init, ValueRange inputs, ArrayRef<AffineMap> maps,
            function_ref<Value(OpBuilder &, Location, ValueRange)> combine) {
          return buildGeneric(rewriter, loc, inputs, maps, init, reducedMap,
                              [&](OpBuilder &b, Location loc,
                                  ValueRange args) -> SmallVector<Value> {
                                return {combine(b, loc, args)};
                              })
              .front();
        };
    Value result;
    switch (kind) {
    case ReduceKind::Max:
    case ReduceKind::Min: {
      bool max = kind == ReduceKind::Max;
      Value init = filledWith(rewriter, loc, reducedType,
                              max ? lowestValue(rewriter, loc, elementType)
                                  : highestValue(rewriter, loc, elementType));
      result = reduceWith(init, data, identity,
                          [&](OpBuilder &b, Location loc, ValueRange args) {
                            return extremum(b, loc, args[0], args[1], max);
                          });
      break;
    }
    case ReduceKind::Prod:
      result =
          reduceWith(filledTensor(rewriter, loc, reducedType, 1.0), data,
                     identity, [](OpBuilder &b, Location loc, ValueRange args) {
                       return mulScalars(b, loc, args[0], args[1]);
                     });
      break;
    case ReduceKind::LogSumExp: {
      // log(sum(exp(x - max))) + max, which does not overflow.
      Value max = reduceWith(
          filledTensor(rewriter, loc, reducedType, kNegInf), data, identity,
          [](OpBuilder &b, Location loc, ValueRange args) {
            return arith::MaximumFOp::create(b, loc, args[0], args[1]);
          });
      Value sum = reduceWith(
          filledTensor(rewriter, loc, reducedType, 0.0), {data, max},
          {identity, reducedMap},
          [](OpBuilder &b, Location loc, ValueRange args) {
            Value shifted = arith::SubFOp::create(b, loc, args[0], args[1]);
            return arith::AddFOp::create(b, loc, args[2],
                                         math::ExpOp::create(b, loc, shifted));
          });
      result = mapElements(rewriter, loc, reducedType, {sum, max}, {},
                           [](OpBuilder &b, Location loc, ValueRange args) {
                             return arith::AddFOp::create(
                                 b, loc, math::LogOp::create(b, loc, args[0]),
                                 args[1]);
                           });
      break;
    }
    default:
      result = reduceWith(
          filledTensor(rewriter, loc, reducedType, 0.0), data, identity,
          [&](OpBuilder &b, Location loc, ValueRange args) {
            Value x = args[0];
            if (kind == ReduceKind::L2)
              x = mulScalars(b, loc, x, x);
            if (kind == ReduceKind::L1)
              x = extremum(
                  b, loc, x,
                  isFloatType
                      ? Value(arith::NegFOp::create(b, loc, x))
                      : Value(arith::SubIOp::create(
                            b, loc, scalarConst(b, loc, x.getType(), 0), x)),
                  /*max=*/true);
            return addScalars(b, loc, args[1], x);
          });
      break;
    }
    if (kind == ReduceKind::Mean || kind == ReduceKind::L2) {
      int64_t count = dataType.getNumElements() / reducedType.getNumElements();
      result = mapElements(
          rewriter, loc, reducedType, result, {},
          [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
            if (kind == ReduceKind::L2)
              return math::SqrtOp::create(b, loc, args[0]);
            Value n = scalarConst(b, loc, elementType, count);
            if (isa<FloatType>(elementType))
              return arith::DivFOp::create(b, loc, args[0], n);
            return arith::DivSIOp::create(b, loc, args[0], n);
          });
    }
    rewriter.replaceOp(op, reshapeTo(rewriter, loc, result, type));
    return success();
  }
};

/// Softmax along `axis` (opset 13): exp(x - max) / sum.
struct SoftmaxLowering : OpConversionPattern<onnx::SoftmaxOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(onnx::SoftmaxOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value x = adaptor.getInputs()[0];
    RankedTensorType type = tensorType(x);
    if (!isa<FloatType>(type.getElementType()))
      return cannotLower(rewriter, op, "expects a float operand");
    int64_t rank = type.getRank();
    SmallVector<bool> dropped(rank, false);
    dropped[normalizeAxis(intAttr(op, "axis", -1), rank)] = true;
    auto rowType = RankedTensorType::get(shapeExcept(type.getShape(), dropped),
                                         type.getElementType());
    SmallVector<unsigned> rowLoops = loopsExcept(rank, dropped);
    AffineMap element = AffineMap::getMultiDimIdentityMap(rank, getContext());
    AffineMap row = loopsTo(rewriter, rank, rowLoops);
    Location loc = op.getLoc();
    Value max =
        reduce(rewriter, loc, x, element, rowType, kNegInf, rowLoops,
               [](OpBuilder &b, Location loc, ValueRange args) {
                 return arith::MaximumFOp::create(b, loc, args[0], args[1]);
               });
    Value exps = mapElements(rewriter, loc, type, {x, max}, {element, row},
                             [](OpBuilder &b, Location loc, ValueRange args) {
                               Value shifted = arith::SubFOp::create(
                                   b, loc, args[0], args[1]);
                               return math::ExpOp::create(b, loc, shifted);
                             });
    Value sum = reduce(rewriter, loc, exps, element, rowType, 0.0, rowLoops,
                       [](OpBuilder &b, Location loc, ValueRange args) {
                         return arith::AddFOp::create(b, loc, args[0], args[1]);
                       });
    rewriter.replaceOp(
        op, mapElements(rewriter, loc, type, {exps, sum}, {element, row},
                        [](OpBuilder &b, Location loc, ValueRange args) {
                          return arith::DivFOp::create(b, loc, args[0],
                                                       args[1]);
                        }));
    return success();
  }
};

/// The dims from `axis` on that a normalization reduces: the statistics'
/// type and loops, the maps of an element and of its statistics, and how
/// many elements each statistic covers.
struct NormalizedDims {
  RankedTensorType statsType;
  SmallVector<unsigned> statsLoops;
  AffineMap element, stats;
  int64_t count;
};

static NormalizedDims normalizedDims(OpBuilder &b, RankedTensorType type,
                                     int64_t axis) {
  int64_t rank = type.getRank();
  axis = normalizeAxis(axis, rank);
  SmallVector<bool> normalized(rank, false);
  for (int64_t i = axis; i < rank; ++i)
    normalized[i] = true;
  auto statsType = RankedTensorType::get(
      shapeExcept(type.getShape(), normalized), type.getElementType());
  SmallVector<unsigned> statsLoops = loopsExcept(rank, normalized);
  AffineMap element = AffineMap::getMultiDimIdentityMap(rank, b.getContext());
  AffineMap stats = loopsTo(b, rank, statsLoops);
  int64_t count = type.getNumElements() / statsType.getNumElements();
  return {statsType, statsLoops, element, stats, count};
}

/// `1 / sqrt(v + epsilon)` (libm has no rsqrt for math.rsqrt to call).
static Value invSqrt(OpBuilder &b, Location loc, Value v, double epsilon) {
  Type type = v.getType();
  Value shifted =
      arith::AddFOp::create(b, loc, v, scalarConst(b, loc, type, epsilon));
  return arith::DivFOp::create(b, loc, scalarConst(b, loc, type, 1.0),
                               math::SqrtOp::create(b, loc, shifted));
}

/// LayerNormalization over the dims from `axis`: (x - mean) / sqrt(var +
/// epsilon) * scale + bias, with the Mean and InvStdDev outputs.
struct LayerNormLowering : OpConversionPattern<onnx::LayerNormalizationOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(onnx::LayerNormalizationOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ValueRange inputs = adaptor.getInputs();
    Value x = inputs[0];
    RankedTensorType type = tensorType(x);
    Type elementType = type.getElementType();
    if (!isa<FloatType>(elementType))
      return cannotLower(rewriter, op, "expects a float operand");
    double epsilon = floatAttr(op, "epsilon", 1e-5);
    NormalizedDims dims =
        normalizedDims(rewriter, type, intAttr(op, "axis", -1));
    RankedTensorType statsType = dims.statsType;
    AffineMap element = dims.element, stats = dims.stats;
    int64_t count = dims.count;
    Location loc = op.getLoc();
    auto divideByCount = [&](Value sums) {
      return mapElements(rewriter, loc, statsType, sums, {},
                         [&](OpBuilder &b, Location loc, ValueRange args) {
                           return arith::DivFOp::create(
                               b, loc, args[0],
                               scalarConst(b, loc, elementType, count));
                         });
    };
    Value mean = divideByCount(
        reduce(rewriter, loc, x, element, statsType, 0.0, dims.statsLoops,
               [](OpBuilder &b, Location loc, ValueRange args) {
                 return arith::AddFOp::create(b, loc, args[0], args[1]);
               }));
    Value variance = divideByCount(reduce(
        rewriter, loc, {x, mean}, {element, stats}, statsType, 0.0,
        dims.statsLoops, [](OpBuilder &b, Location loc, ValueRange args) {
          Value d = arith::SubFOp::create(b, loc, args[0], args[1]);
          Value square = arith::MulFOp::create(b, loc, d, d);
          return arith::AddFOp::create(b, loc, args[2], square);
        }));
    Value invStdDev =
        mapElements(rewriter, loc, statsType, variance, {},
                    [&](OpBuilder &b, Location loc, ValueRange args) {
                      return invSqrt(b, loc, args[0], epsilon);
                    });
    // Scale and bias broadcast to the normalized dims.
    SmallVector<Value> operands{x, mean, invStdDev, inputs[1]};
    SmallVector<AffineMap> maps{element, stats, stats,
                                broadcastMap(tensorType(inputs[1]).getShape(),
                                             type.getShape(), getContext())};
    if (optionalOperand(op, 2)) {
      operands.push_back(inputs[2]);
      maps.push_back(broadcastMap(tensorType(inputs[2]).getShape(),
                                  type.getShape(), getContext()));
    }
    Value y = mapElements(
        rewriter, loc, type, operands, maps,
        [](OpBuilder &b, Location loc, ValueRange args) {
          Value centered = arith::SubFOp::create(b, loc, args[0], args[1]);
          Value normal = arith::MulFOp::create(b, loc, centered, args[2]);
          Value scaled = arith::MulFOp::create(b, loc, normal, args[3]);
          if (args.size() == 4)
            return scaled;
          return arith::AddFOp::create(b, loc, scaled, args[4]).getResult();
        });
    SmallVector<Value> results{y};
    Value statistics[] = {mean, invStdDev};
    for (unsigned i = 1; i < op->getNumResults(); ++i)
      results.push_back(
          reshapeTo(rewriter, loc, statistics[i - 1],
                    cast<RankedTensorType>(op->getResult(i).getType())));
    rewriter.replaceOp(op, results);
    return success();
  }
};

/// RMSNormalization over the dims from `axis`: x / sqrt(mean(x^2) +
/// epsilon) * scale.
struct RMSNormLowering : OpConversionPattern<onnx::RMSNormalizationOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(onnx::RMSNormalizationOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value x = adaptor.getInputs()[0], scale = adaptor.getInputs()[1];
    RankedTensorType type = tensorType(x);
    Type elementType = type.getElementType();
    if (!isa<FloatType>(elementType))
      return cannotLower(rewriter, op, "expects a float operand");
    double epsilon = floatAttr(op, "epsilon", 1e-5);
    NormalizedDims dims =
        normalizedDims(rewriter, type, intAttr(op, "axis", -1));
    RankedTensorType statsType = dims.statsType;
    AffineMap element = dims.element, stats = dims.stats;
    int64_t count = dims.count;
    Location loc = op.getLoc();
    Value squares =
        reduce(rewriter, loc, x, element, statsType, 0.0, dims.statsLoops,
               [](OpBuilder &b, Location loc, ValueRange args) {
                 Value square = arith::MulFOp::create(b, loc, args[0], args[0]);
                 return arith::AddFOp::create(b, loc, args[1], square);
               });
    Value invRms = mapElements(
        rewriter, loc, statsType, squares, {},
        [&](OpBuilder &b, Location loc, ValueRange args) {
          Value mean = arith::DivFOp::create(
              b, loc, args[0], scalarConst(b, loc, elementType, count));
          return invSqrt(b, loc, mean, epsilon);
        });
    auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
    Value y =
        mapElements(rewriter, loc, resultType, {x, invRms, scale},
                    {element, stats,
                     broadcastMap(tensorType(scale).getShape(), type.getShape(),
                                  getContext())},
                    [](OpBuilder &b, Location loc, ValueRange args) {
                      Value normal =
                          arith::MulFOp::create(b, loc, args[0], args[1]);
                      return arith::MulFOp::create(b, loc, normal, args[2]);
                    });
    rewriter.replaceOp(op, y);
    return success();
  }
};

/// ArgMax (`isMax`) and ArgMin: one pass along the axis carrying the best
/// value and its index.
template <typename OpTy, bool isMax>
struct ArgExtremumLowering : OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  using OpAdaptor = typename OpTy::Adaptor;

  LogicalResult
  matchAndRewrite(OpTy op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value data = adaptor.getInputs()[0];
    RankedTensorType dataType = tensorType(data);
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    int64_t rank = dataType.getRank();
    int64_t axis = normalizeAxis(intAttr(op, "axis", 0), rank);
    bool last = intAttr(op, "select_last_index", 0);
    SmallVector<bool> dropped(rank, false);
    dropped[axis] = true;
    Shape kept = shapeExcept(dataType.getShape(), dropped);
    Type elementType = dataType.getElementType();
    Type indexType = type.getElementType();
    Location loc = op.getLoc();
    Value inits[] = {filledWith(rewriter, loc,
                                RankedTensorType::get(kept, elementType),
                                isMax ? lowestValue(rewriter, loc, elementType)
                                      : highestValue(rewriter, loc, elementType)),
                     filledTensor(rewriter, loc,
                                  RankedTensorType::get(kept, indexType), 0.0)};
    SmallVector<Value> best = buildGeneric(
        rewriter, loc, data,
        AffineMap::getMultiDimIdentityMap(rank, op.getContext()), inits,
        loopsTo(rewriter, rank, loopsExcept(rank, dropped)),
        [&](OpBuilder &b, Location loc, ValueRange args) -> SmallVector<Value> {
          Value x = args[0], value = args[1], index = args[2];
          // Strict `>` keeps the first maximum; `>=` the last.
          Value take = isMax ? greaterThan(b, loc, x, value, last)
                             : greaterThan(b, loc, value, x, last);
          Value i = arith::IndexCastOp::create(
              b, loc, indexType, linalg::IndexOp::create(b, loc, axis));
          return {arith::SelectOp::create(b, loc, take, x, value),
                  arith::SelectOp::create(b, loc, take, i, index)};
        });
    rewriter.replaceOp(op, reshapeTo(rewriter, loc, best[1], type));
    return success();
  }
};

struct TopKLowering : OpConversionPattern<onnx::TopKOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(onnx::TopKOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value x = adaptor.getInputs()[0];
    RankedTensorType type = tensorType(x);
    int64_t rank = type.getRank();
    int64_t axis = normalizeAxis(intAttr(op, "axis", -1), rank);
    bool largest = intAttr(op, "largest", 1);
    auto valuesType = cast<RankedTensorType>(op->getResult(0).getType());
    auto indicesType = cast<RankedTensorType>(op->getResult(1).getType());
    Location loc = op.getLoc();
    // Loops: the elements of x, then the other element j of the row.
    unsigned j = rank;
    AffineMap self = loopsTo(rewriter, rank + 1,
                             llvm::to_vector(llvm::seq<unsigned>(0, rank)));
    AffineMap other = withAxisAt(rewriter, rank + 1, rank, axis, j);
    auto rankType = type.clone(rewriter.getI64Type());
    Value ranks =
        buildGeneric(rewriter, loc, {x, x}, {self, other},
                     filledTensor(rewriter, loc, rankType, 0.0), self,
                     [&](OpBuilder &b, Location loc,
                         ValueRange args) -> SmallVector<Value> {
                       Value xi = args[0], xj = args[1];
                       Value before = largest ? greaterThan(b, loc, xj, xi)
                                              : greaterThan(b, loc, xi, xj);
                       Value equal =
                           isa<FloatType>(xi.getType())
                               ? Value(arith::CmpFOp::create(
                                     b, loc, arith::CmpFPredicate::OEQ, xi, xj))
                               : Value(arith::CmpIOp::create(
                                     b, loc, arith::CmpIPredicate::eq, xi, xj));
                       Value earlier = arith::CmpIOp::create(
                           b, loc, arith::CmpIPredicate::ult,
                           linalg::IndexOp::create(b, loc, j),
                           linalg::IndexOp::create(b, loc, axis));
                       Value tie =
                           arith::AndIOp::create(b, loc, equal, earlier);
                       Value counts = arith::OrIOp::create(b, loc, before, tie);
                       return {lowering::countIf(b, loc, counts, args[2])};
                     })
            .front();
    // Loops: the outputs, then the element i of the row; output slot r
    // takes the element of rank r.
    AffineMap element = withAxisAt(rewriter, rank + 1, rank, axis, rank);
    Value inits[] = {filledTensor(rewriter, loc, valuesType, 0.0),
                     filledTensor(rewriter, loc, indicesType, 0.0)};
    SmallVector<Value> top = buildGeneric(
        rewriter, loc, {x, ranks}, {element, element}, inits, self,
        [&](OpBuilder &b, Location loc, ValueRange args) -> SmallVector<Value> {
          Value slot = arith::IndexCastOp::create(
              b, loc, b.getI64Type(), linalg::IndexOp::create(b, loc, axis));
          Value hit = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                            args[1], slot);
          Value i =
              arith::IndexCastOp::create(b, loc, indicesType.getElementType(),
                                         linalg::IndexOp::create(b, loc, rank));
          return {arith::SelectOp::create(b, loc, hit, args[0], args[2]),
                  arith::SelectOp::create(b, loc, hit, i, args[3])};
        });
    rewriter.replaceOp(op, top);
    return success();
  }
};

struct CumSumLowering : OpConversionPattern<onnx::CumSumOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(onnx::CumSumOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    std::optional<double> axisValue = getConstantScalar(op->getOperand(1));
    if (!axisValue)
      return cannotLower(rewriter, op, "the axis is not a constant");
    Value x = adaptor.getInputs()[0];
    RankedTensorType type = tensorType(x);
    int64_t rank = type.getRank();
    int64_t axis = normalizeAxis(static_cast<int64_t>(*axisValue), rank);
    bool exclusive = intAttr(op, "exclusive", 0);
    bool reverse = intAttr(op, "reverse", 0);
    // Loops: the outputs, then the element j of the row that may add in.
    unsigned j = rank;
    AffineMap output = loopsTo(rewriter, rank + 1,
                               llvm::to_vector(llvm::seq<unsigned>(0, rank)));
    Location loc = op.getLoc();
    Value result =
        buildGeneric(
            rewriter, loc, x, withAxisAt(rewriter, rank + 1, rank, axis, j),
            filledTensor(rewriter, loc, type, 0.0), output,
            [&](OpBuilder &b, Location loc,
                ValueRange args) -> SmallVector<Value> {
              using P = arith::CmpIPredicate;
              P predicate = reverse ? (exclusive ? P::ugt : P::uge)
                                    : (exclusive ? P::ult : P::ule);
              Value in = arith::CmpIOp::create(
                  b, loc, predicate, linalg::IndexOp::create(b, loc, j),
                  linalg::IndexOp::create(b, loc, axis));
              Value zero = scalarConst(b, loc, args[0].getType(), 0.0);
              Value term = arith::SelectOp::create(b, loc, in, args[0], zero);
              return {addScalars(b, loc, args[1], term)};
            })
            .front();
    rewriter.replaceOp(op, result);
    return success();
  }
};

} // namespace

void populateReducePatterns(RewritePatternSet &patterns) {
  patterns.add<ReduceLowering<onnx::ReduceSumOp, ReduceKind::Sum>,
               ReduceLowering<onnx::ReduceMeanOp, ReduceKind::Mean>,
               ReduceLowering<onnx::ReduceMaxOp, ReduceKind::Max>,
               ReduceLowering<onnx::ReduceMinOp, ReduceKind::Min>,
               ReduceLowering<onnx::ReduceProdOp, ReduceKind::Prod>,
               ReduceLowering<onnx::ReduceL1Op, ReduceKind::L1>,
               ReduceLowering<onnx::ReduceL2Op, ReduceKind::L2>,
               ReduceLowering<onnx::ReduceLogSumExpOp, ReduceKind::LogSumExp>,
               RMSNormLowering, SoftmaxLowering, LayerNormLowering,
               ArgExtremumLowering<onnx::ArgMaxOp, true>,
               ArgExtremumLowering<onnx::ArgMinOp, false>, TopKLowering, CumSumLowering>(
      patterns.getContext());
}

} // namespace mlir::moe::onnx_lowering
