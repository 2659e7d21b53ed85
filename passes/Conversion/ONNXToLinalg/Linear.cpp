//===- Linear.cpp - lower onnx.MatMul and onnx.Gemm -----------------------===//
//
// MatMul has NumPy semantics: batch dims broadcast, a 1-D operand is a row
// (left) or a column (right) whose dim the result drops. It becomes one
// linalg.generic with loops (batch..., m, n, k) that sums products into
// zeros. Gemm is the same contraction of 2-D operands, read transposed
// through their maps, then alpha and beta * C (broadcast) in one map. Conv
// (1-D, grouped) is a contraction too, over its zero-padded input.
//
//===----------------------------------------------------------------------===//

#include "mlir/Transforms/DialectConversion.h"
#include "passes/Conversion/ONNXToLinalg/Lowering.h"

namespace mlir::moe::onnx_lowering {

/// `acc + lhs * rhs`: the body of a contraction.
static SmallVector<Value> multiplyAccumulate(OpBuilder &b, Location loc,
                                             ValueRange args) {
  return {addScalars(b, loc, args[2], mulScalars(b, loc, args[0], args[1]))};
}

namespace {

struct MatMulLowering : OpConversionPattern<onnx::MatMulOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(onnx::MatMulOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value lhs = adaptor.getInputs()[0], rhs = adaptor.getInputs()[1];
    ArrayRef<int64_t> lhsShape = tensorType(lhs).getShape();
    ArrayRef<int64_t> rhsShape = tensorType(rhs).getShape();
    if (lhsShape.empty() || rhsShape.empty())
      return cannotLower(rewriter, op, "operands must not be scalars");
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    MLIRContext *ctx = op.getContext();
    bool lhsVector = lhsShape.size() == 1, rhsVector = rhsShape.size() == 1;
    // Loops: the result's batch dims, m (unless lhs is a vector), n (unless
    // rhs is a vector), then k.
    int64_t batchRank =
        type.getRank() - (lhsVector ? 0 : 1) - (rhsVector ? 0 : 1);
    ArrayRef<int64_t> batch = type.getShape().take_front(batchRank);
    unsigned m = batchRank, n = m + (lhsVector ? 0 : 1);
    unsigned k = n + (rhsVector ? 0 : 1), numLoops = k + 1;
    auto dim = [&](unsigned loop) { return getAffineDimExpr(loop, ctx); };
    SmallVector<AffineExpr> lhsExprs, rhsExprs;
    if (lhsVector) {
      lhsExprs.push_back(dim(k));
    } else {
      lhsExprs = broadcastExprs(lhsShape.drop_back(2), batch, 0, ctx);
      lhsExprs.append({dim(m), dim(k)});
    }
    if (rhsVector) {
      rhsExprs.push_back(dim(k));
    } else {
      rhsExprs = broadcastExprs(rhsShape.drop_back(2), batch, 0, ctx);
      rhsExprs.append({dim(k), dim(n)});
    }
    SmallVector<unsigned> resultLoops =
        llvm::to_vector(llvm::seq<unsigned>(0, k));
    Location loc = op.getLoc();
    Value product = buildGeneric(rewriter, loc, {lhs, rhs},
                                 {AffineMap::get(numLoops, 0, lhsExprs, ctx),
                                  AffineMap::get(numLoops, 0, rhsExprs, ctx)},
                                 filledTensor(rewriter, loc, type, 0.0),
                                 loopsTo(rewriter, numLoops, resultLoops),
                                 multiplyAccumulate)
                        .front();
    rewriter.replaceOp(op, product);
    return success();
  }
};

struct GemmLowering : OpConversionPattern<onnx::GemmOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(onnx::GemmOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ValueRange inputs = adaptor.getInputs();
    if (tensorType(inputs[0]).getRank() != 2 ||
        tensorType(inputs[1]).getRank() != 2)
      return cannotLower(rewriter, op, "A and B must be 2-D");
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    Location loc = op.getLoc();
    MLIRContext *ctx = op.getContext();
    AffineExpr m, n, k;
    bindDims(ctx, m, n, k);
    bool transA = intAttr(op, "transA", 0), transB = intAttr(op, "transB", 0);
    AffineMap lhsMap =
        AffineMap::get(3, 0, {transA ? k : m, transA ? m : k}, ctx);
    AffineMap rhsMap =
        AffineMap::get(3, 0, {transB ? n : k, transB ? k : n}, ctx);
    Value product =
        buildGeneric(rewriter, loc, {inputs[0], inputs[1]}, {lhsMap, rhsMap},
                     filledTensor(rewriter, loc, type, 0.0),
                     loopsTo(rewriter, 3, {0, 1}), multiplyAccumulate)
            .front();
    double alpha = floatAttr(op, "alpha", 1.0);
    double beta = floatAttr(op, "beta", 1.0);
    Value bias = optionalOperand(op, 2) ? inputs[2] : Value();
    if (alpha != 1.0 || bias) {
      SmallVector<Value> operands{product};
      if (bias)
        operands.push_back(bias);
      product = broadcastElements(
          rewriter, loc, type, operands,
          [&](OpBuilder &b, Location loc, ValueRange args) {
            Type elementType = args[0].getType();
            Value result = args[0];
            if (alpha != 1.0)
              result = mulScalars(b, loc, result,
                                  scalarConst(b, loc, elementType, alpha));
            if (args.size() == 1)
              return result;
            Value c = args[1];
            if (beta != 1.0)
              c = mulScalars(b, loc, c, scalarConst(b, loc, elementType, beta));
            return addScalars(b, loc, result, c);
          });
    }
    rewriter.replaceOp(op, product);
    return success();
  }
};

/// Conv over one spatial dim (the depthwise causal convolutions of Mamba
/// and gated DeltaNet layers), any group count: out[n, m, l] = B[m] +
/// sum over ci, k of X[n, g(m) * C/group + ci, l * stride + k * dilation -
/// padBegin] * W[m, ci, k], with X zero-padded first.
struct ConvLowering : OpConversionPattern<onnx::ConvOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(onnx::ConvOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    std::string why;
    FailureOr<Conv1DParams> params = conv1DParams(op, why);
    if (failed(params))
      return cannotLower(rewriter, op, why);
    ValueRange inputs = adaptor.getInputs();
    Value x = inputs[0], w = inputs[1];
    RankedTensorType xType = tensorType(x);
    ArrayRef<int64_t> wShape = tensorType(w).getShape();
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    Location loc = op.getLoc();
    MLIRContext *ctx = op.getContext();
    if (params->padBegin || params->padEnd) {
      Shape padded(xType.getShape());
      padded[2] += params->padBegin + params->padEnd;
      auto paddedType = xType.clone(padded);
      Value zeros = filledTensor(rewriter, loc, paddedType, 0.0);
      SmallVector<OpFoldResult> offsets{
          rewriter.getIndexAttr(0), rewriter.getIndexAttr(0),
          rewriter.getIndexAttr(params->padBegin)};
      SmallVector<OpFoldResult> sizes, strides(3, rewriter.getIndexAttr(1));
      for (int64_t dim : xType.getShape())
        sizes.push_back(rewriter.getIndexAttr(dim));
      x = tensor::InsertSliceOp::create(rewriter, loc, x, zeros, offsets, sizes,
                                        strides);
    }
    int64_t outPerGroup = wShape[0] / params->group;
    int64_t inPerGroup = wShape[1];
    // Loops: n, m, l, then the reductions ci, k.
    AffineExpr n, m, l, ci, k;
    bindDims(ctx, n, m, l, ci, k);
    AffineMap xMap =
        AffineMap::get(5, 0,
                       {n, m.floorDiv(outPerGroup) * inPerGroup + ci,
                        l * params->stride + k * params->dilation},
                       ctx);
    AffineMap wMap = AffineMap::get(5, 0, {m, ci, k}, ctx);
    // The sums start from the bias, broadcast along n and l.
    Value init =
        optionalOperand(op, 2)
            ? mapElements(rewriter, loc, type, inputs[2],
                          AffineMap::get(3, 0, {getAffineDimExpr(1, ctx)}, ctx),
                          [](OpBuilder &, Location, ValueRange args) {
                            return args[0];
                          })
            : filledTensor(rewriter, loc, type, 0.0);
    Value result =
        buildGeneric(rewriter, loc, {x, w}, {xMap, wMap}, init,
                     loopsTo(rewriter, 5, {0, 1, 2}), multiplyAccumulate)
            .front();
    rewriter.replaceOp(op, result);
    return success();
  }
};

} // namespace

FailureOr<Conv1DParams> conv1DParams(Operation *op, std::string &why) {
  auto fail = [&](StringRef reason) {
    why = reason.str();
    return failure();
  };
  auto xType = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
  auto wType = dyn_cast<RankedTensorType>(op->getOperand(1).getType());
  if (!xType || !wType || xType.getRank() != 3 || wType.getRank() != 3)
    return fail("only 1-D convolutions (rank-3 input and weight) are "
                "supported");
  auto autoPad = op->getAttrOfType<StringAttr>("auto_pad");
  if (autoPad && autoPad.getValue() != "NOTSET" &&
      autoPad.getValue() != "VALID")
    return fail("auto_pad '" + autoPad.getValue().str() +
                "' is not supported (NOTSET or VALID)");
  Conv1DParams params{intAttr(op, "group", 1), 1, 1, 0, 0};
  if (std::optional<Shape> strides = intsAttr(op, "strides"))
    params.stride = strides->front();
  if (std::optional<Shape> dilations = intsAttr(op, "dilations"))
    params.dilation = dilations->front();
  if (std::optional<Shape> pads = intsAttr(op, "pads")) {
    if (pads->size() != 2)
      return fail("pads must have 2 values");
    params.padBegin = (*pads)[0];
    params.padEnd = (*pads)[1];
  }
  int64_t channels = xType.getDimSize(1), outChannels = wType.getDimSize(0);
  if (params.group <= 0 || ShapedType::isDynamic(channels) ||
      channels % params.group != 0 || outChannels % params.group != 0 ||
      wType.getDimSize(1) * params.group != channels)
    return fail("the channels do not match the group count");
  if (params.stride <= 0 || params.dilation <= 0 || params.padBegin < 0 ||
      params.padEnd < 0)
    return fail("strides and dilations must be positive, pads non-negative");
  return params;
}

void populateLinearPatterns(RewritePatternSet &patterns) {
  patterns.add<MatMulLowering, GemmLowering, ConvLowering>(
      patterns.getContext());
}

} // namespace mlir::moe::onnx_lowering
