//===- Losses.cpp - lower moe.aux_loss and moe.z_loss --------------------===//
//
// Both losses are linalg.generic reductions down to one scalar, in the
// element type of the logits; the constant factors are applied once at the
// end.
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/MoEToLinalg/Lowering.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::moe::lowering {

/// `factor * loss` for a 0-d `loss`.
static Value scale(OpBuilder &b, Location loc, Value loss, double factor) {
  Value value = tensor::ExtractOp::create(b, loc, loss, ValueRange{});
  Value scaled = arith::MulFOp::create(
      b, loc, value, scalarConst(b, loc, value.getType(), factor));
  return tensor::FromElementsOp::create(b, loc, loss.getType(), scaled);
}

//===----------------------------------------------------------------------===//
// moe.aux_loss
//===----------------------------------------------------------------------===//

/// `[T, ...]` viewed as `[S, T/S, ...]`: the tokens of each sequence.
static Value splitTokens(OpBuilder &b, Location loc, Value value,
                         int64_t numSequences) {
  RankedTensorType type = tensorType(value);
  SmallVector<int64_t> shape{numSequences, type.getDimSize(0) / numSequences};
  SmallVector<ReassociationIndices> reassociation{{0, 1}};
  for (int64_t dim = 1; dim < type.getRank(); ++dim) {
    shape.push_back(type.getDimSize(dim));
    reassociation.push_back({dim + 1});
  }
  return tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get(shape, type.getElementType()), value,
      reassociation);
}

/// `sum_t score[s, t, e]` per sequence, `[S, E]`, of `scores [S, L, E]`,
/// each score first divided by its token's entry of `norms [S, L]` if given.
static Value sequenceScoreSums(OpBuilder &b, Location loc, Value scores,
                               Value norms) {
  RankedTensorType type = tensorType(scores);
  auto sumsType = RankedTensorType::get(
      {type.getDimSize(0), type.getDimSize(2)}, type.getElementType());
  // Loops (s, e, t).
  SmallVector<Value> inputs{scores};
  SmallVector<AffineMap> maps{loopsTo(b, 3, {0, 2, 1})};
  if (norms) {
    inputs.push_back(norms);
    maps.push_back(loopsTo(b, 3, {0, 2}));
  }
  return reduce(b, loc, inputs, maps, sumsType, 0.0, {0, 1},
                [&](OpBuilder &nb, Location nloc, ValueRange args) -> Value {
                  Value score = args[0], acc = args.back();
                  if (norms)
                    score = arith::DivFOp::create(nb, nloc, score, args[1]);
                  return arith::AddFOp::create(nb, nloc, acc, score);
                });
}

/// How many (token, slot) pairs of each sequence chose each of `numExperts`
/// experts, i32 `[S, E]`, for `ids [S, L, k]`. Other ids match no expert.
static Value sequenceCounts(OpBuilder &b, Location loc, Value ids,
                            int64_t numExperts) {
  auto countsType = RankedTensorType::get(
      {tensorType(ids).getDimSize(0), numExperts}, b.getI32Type());
  // Loops (s, e, t, j).
  return reduce(b, loc, ids, loopsTo(b, 4, {0, 2, 3}), countsType, 0.0, {0, 1},
                [](OpBuilder &nb, Location nloc, ValueRange args) {
                  Value chosen =
                      arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::eq,
                                            args[0], loopIndexI32(nb, nloc, 1));
                  return countIf(nb, nloc, chosen, args[1]);
                });
}

namespace {
struct AuxLossOpLowering : public OpConversionPattern<AuxLossOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(AuxLossOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value logits = adaptor.getLogits(), ids = adaptor.getIds();
    int64_t numTokens = tensorType(logits).getDimSize(0);
    int64_t numExperts = tensorType(logits).getDimSize(1);
    int64_t k = tensorType(ids).getDimSize(1);
    if (numTokens == 0 || k == 0)
      return rewriter.notifyMatchFailure(op, "no routed pairs to average");
    int64_t seqLen = op.getSeqLen().value_or(numTokens);
    int64_t numSequences = numTokens / seqLen;

    Value scores = scoreLogits(rewriter, loc, logits, op.getScoring());
    // Sigmoid scores are normalised per token (DeepSeek).
    Value norms;
    if (op.getScoring() == ScoringFunction::Sigmoid)
      norms = splitTokens(rewriter, loc, rowSum(rewriter, loc, scores),
                          numSequences);
    Value scoreSums = sequenceScoreSums(
        rewriter, loc, splitTokens(rewriter, loc, scores, numSequences), norms);
    Value counts = sequenceCounts(rewriter, loc,
                                  splitTokens(rewriter, loc, ids, numSequences),
                                  numExperts);
    // sum over sequences and experts of count * scoreSum.
    Value total =
        reduce(rewriter, loc, {counts, scoreSums},
               {loopsTo(rewriter, 2, {0, 1}), loopsTo(rewriter, 2, {0, 1})},
               op.getLoss().getType(), 0.0, {},
               [](OpBuilder &b, Location nloc, ValueRange args) -> Value {
                 Value count = arith::SIToFPOp::create(
                     b, nloc, args[1].getType(), args[0]);
                 Value term = arith::MulFOp::create(b, nloc, count, args[1]);
                 return arith::AddFOp::create(b, nloc, args[2], term);
               });
    // f = count / (L * k) and P = scoreSum / L, averaged over sequences.
    double factor = op.getCoeff().convertToDouble() * numExperts /
                    (static_cast<double>(numSequences) * seqLen * seqLen * k);
    rewriter.replaceOp(op, scale(rewriter, loc, total, factor));
    return success();
  }
};
} // namespace

//===----------------------------------------------------------------------===//
// moe.z_loss
//===----------------------------------------------------------------------===//

namespace {
struct ZLossOpLowering : public OpConversionPattern<ZLossOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(ZLossOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value logits = adaptor.getLogits();
    RankedTensorType type = tensorType(logits);
    int64_t numTokens = type.getDimSize(0);
    if (numTokens == 0)
      return rewriter.notifyMatchFailure(op, "no tokens to average");

    // logsumexp(l) = m + log(sum exp(l - m)) with m the row max, so that
    // exp cannot overflow.
    Value max = rowMax(rewriter, loc, logits);
    Value sumExp =
        reduce(rewriter, loc, {logits, max},
               {loopsTo(rewriter, 2, {0, 1}), loopsTo(rewriter, 2, {0})},
               RankedTensorType::get({numTokens}, type.getElementType()), 0.0,
               {0}, [](OpBuilder &b, Location nloc, ValueRange args) -> Value {
                 Value shifted =
                     arith::SubFOp::create(b, nloc, args[0], args[1]);
                 Value exp = math::ExpOp::create(b, nloc, shifted);
                 return arith::AddFOp::create(b, nloc, args[2], exp);
               });
    AffineMap tokens = loopsTo(rewriter, 1, {0});
    Value total = reduce(
        rewriter, loc, {max, sumExp}, {tokens, tokens}, op.getLoss().getType(),
        0.0, {}, [](OpBuilder &b, Location nloc, ValueRange args) -> Value {
          Value log = math::LogOp::create(b, nloc, args[1]);
          Value lse = arith::AddFOp::create(b, nloc, args[0], log);
          Value square = arith::MulFOp::create(b, nloc, lse, lse);
          return arith::AddFOp::create(b, nloc, args[2], square);
        });
    double factor = op.getCoeff().convertToDouble() / numTokens;
    rewriter.replaceOp(op, scale(rewriter, loc, total, factor));
    return success();
  }
};
} // namespace

void populateLossPatterns(RewritePatternSet &patterns) {
  patterns.add<AuxLossOpLowering, ZLossOpLowering>(patterns.getContext());
}

} // namespace mlir::moe::lowering
