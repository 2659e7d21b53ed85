//===- Linear.cpp - lower onnx.MatMul and onnx.Gemm -----------------------===//
//
// MatMul has NumPy semantics: batch dims broadcast, a 1-D operand is a row
// (left) or a column (right) whose dim the result drops. It becomes one
// linalg.generic with loops (batch..., m, n, k) that sums products into
// zeros. Gemm is the same contraction of 2-D operands, read transposed
// through their maps, then alpha and beta * C (broadcast) in one map.
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

} // namespace

void populateLinearPatterns(RewritePatternSet &patterns) {
  patterns.add<MatMulLowering, GemmLowering>(patterns.getContext());
}

} // namespace mlir::moe::onnx_lowering
