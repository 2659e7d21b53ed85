//===- MoEToLinalg.cpp - the convert-moe-to-linalg pass -------------------===//

#include "passes/Conversion/MoEToLinalg/Lowering.h"
#include "passes/Passes.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::moe {
#define GEN_PASS_DEF_CONVERTMOETOLINALGPASS
#include "passes/Passes.h.inc"

namespace lowering {

Value indexConst(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIndexOp::create(b, loc, value);
}

Value scalarConst(OpBuilder &b, Location loc, Type type, double value) {
  if (auto floatType = dyn_cast<FloatType>(type))
    return arith::ConstantOp::create(b, loc, type,
                                     b.getFloatAttr(floatType, value));
  return arith::ConstantOp::create(
      b, loc, type, b.getIntegerAttr(type, static_cast<int64_t>(value)));
}

Value filledTensor(OpBuilder &b, Location loc, RankedTensorType type,
                   double value) {
  Value empty = tensor::EmptyOp::create(b, loc, type.getShape(),
                                        type.getElementType());
  Value scalar = scalarConst(b, loc, type.getElementType(), value);
  return linalg::FillOp::create(b, loc, scalar, empty).getResult(0);
}

/// Reduces a `[T, E]` tensor over its columns with `combine`, from `init`.
static Value rowReduce(OpBuilder &b, Location loc, Value matrix, double init,
                       function_ref<Value(OpBuilder &, Location, Value, Value)>
                           combine) {
  auto type = cast<RankedTensorType>(matrix.getType());
  auto rowType =
      RankedTensorType::get({type.getDimSize(0)}, type.getElementType());
  Value acc = filledTensor(b, loc, rowType, init);
  MLIRContext *ctx = b.getContext();
  AffineMap id = AffineMap::getMultiDimIdentityMap(2, ctx);
  AffineMap rows = AffineMap::get(2, 0, {b.getAffineDimExpr(0)}, ctx);
  return linalg::GenericOp::create(
             b, loc, rowType, matrix, acc, ArrayRef<AffineMap>{id, rows},
             ArrayRef<utils::IteratorType>{utils::IteratorType::parallel,
                                           utils::IteratorType::reduction},
             [&](OpBuilder &nb, Location nloc, ValueRange args) {
               linalg::YieldOp::create(
                   nb, nloc, combine(nb, nloc, args[0], args[1]));
             })
      .getResult(0);
}

Value rowSum(OpBuilder &b, Location loc, Value matrix) {
  return rowReduce(b, loc, matrix, 0.0,
                   [](OpBuilder &nb, Location nloc, Value x, Value acc) {
                     return arith::AddFOp::create(nb, nloc, x, acc);
                   });
}

Value rowMax(OpBuilder &b, Location loc, Value matrix) {
  return rowReduce(b, loc, matrix, -std::numeric_limits<double>::infinity(),
                   [](OpBuilder &nb, Location nloc, Value x, Value acc) {
                     return arith::MaximumFOp::create(nb, nloc, x, acc);
                   });
}

/// Elementwise `body(x, rowValue)` over `[T, E]`, where `row` (a `[T]`
/// tensor) may be null, and `rowValue` then too.
static Value mapRows(OpBuilder &b, Location loc, Value matrix, Value row,
                     function_ref<Value(OpBuilder &, Location, Value, Value)>
                         body) {
  auto type = cast<RankedTensorType>(matrix.getType());
  MLIRContext *ctx = b.getContext();
  AffineMap id = AffineMap::getMultiDimIdentityMap(2, ctx);
  SmallVector<Value> inputs{matrix};
  SmallVector<AffineMap> maps{id};
  if (row) {
    inputs.push_back(row);
    maps.push_back(AffineMap::get(2, 0, {b.getAffineDimExpr(0)}, ctx));
  }
  maps.push_back(id);
  Value init = tensor::EmptyOp::create(b, loc, type.getShape(),
                                       type.getElementType());
  return linalg::GenericOp::create(
             b, loc, type, inputs, init, maps,
             ArrayRef<utils::IteratorType>{utils::IteratorType::parallel,
                                           utils::IteratorType::parallel},
             [&](OpBuilder &nb, Location nloc, ValueRange args) {
               Value r = row ? args[1] : Value();
               linalg::YieldOp::create(nb, nloc, body(nb, nloc, args[0], r));
             })
      .getResult(0);
}

Value scoreLogits(OpBuilder &b, Location loc, Value logits,
                  ScoringFunction scoring) {
  if (scoring == ScoringFunction::Sigmoid)
    return mapRows(b, loc, logits, Value(),
                   [](OpBuilder &nb, Location nloc, Value x, Value) {
                     // sigmoid(x) = 1 / (1 + exp(-x))
                     Value one = scalarConst(nb, nloc, x.getType(), 1.0);
                     Value negX = arith::NegFOp::create(nb, nloc, x);
                     Value e = math::ExpOp::create(nb, nloc, negX);
                     Value den = arith::AddFOp::create(nb, nloc, one, e);
                     return arith::DivFOp::create(nb, nloc, one, den);
                   });
  Value max = rowMax(b, loc, logits);
  Value exps = mapRows(b, loc, logits, max,
                       [](OpBuilder &nb, Location nloc, Value x, Value m) {
                         Value d = arith::SubFOp::create(nb, nloc, x, m);
                         return math::ExpOp::create(nb, nloc, d);
                       });
  Value sum = rowSum(b, loc, exps);
  return mapRows(b, loc, exps, sum,
                 [](OpBuilder &nb, Location nloc, Value x, Value s) {
                   return arith::DivFOp::create(nb, nloc, x, s);
                 });
}

} // namespace lowering

namespace {

struct ConvertMoEToLinalgPass
    : public impl::ConvertMoEToLinalgPassBase<ConvertMoEToLinalgPass> {
  using Base::Base;

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    // Say what is missing instead of a bare "failed to legalize".
    WalkResult unsupported = getOperation()->walk([](Operation *op) {
      if (isa<LayerOp>(op)) {
        op->emitOpError("must be decomposed first (run moe-decompose)");
        return WalkResult::interrupt();
      }
      if (auto exchange = dyn_cast<AllToAllOp>(op)) {
        int64_t ranks = exchange.getGroupSize();
        if (ranks != 1) {
          exchange.emitOpError()
              << "exchanges rows between " << ranks
              << " ranks; only the communication lowering handles that";
          return WalkResult::interrupt();
        }
      }
      return WalkResult::advance();
    });
    if (unsupported.wasInterrupted())
      return signalPassFailure();
    ConversionTarget target(*ctx);
    target.addIllegalDialect<MoEDialect>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(ctx);
    populateMoEToLinalgPatterns(patterns);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace

void populateMoEToLinalgPatterns(RewritePatternSet &patterns) {
  lowering::populateRouterPatterns(patterns);
  lowering::populateDispatchPatterns(patterns);
  lowering::populateExpertsPatterns(patterns);
  lowering::populateLossPatterns(patterns);
}

} // namespace mlir::moe
