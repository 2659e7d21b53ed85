//===- Placement.cpp - slot tables, the replica rule, slot weights --------===//
//
// The lowerings of a placement that is fixed when the program is compiled:
// moe.slot_table becomes its initial table (a runtime-owned table is made a
// buffer by moe-externalize-weights before this runs), moe.place scans the
// table for each routing choice and moe.slot_weights gathers rows.
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/MoEToLinalg/Lowering.h"

#include "mlir/Transforms/DialectConversion.h"

namespace mlir::moe::lowering {
namespace {

struct SlotTableOpLowering : public OpConversionPattern<SlotTableOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(SlotTableOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<arith::ConstantOp>(
        op, DenseElementsAttr::get(op.getTable().getType(), op.getInitial()));
    return success();
  }
};

/// Per choice at (t, j) with expert e: c = the slots of e, then the
/// ((t * k + j) mod c)-th of them in slot order; -1 when c = 0. Two scans
/// of the table per choice (P is small: experts plus a few replicas).
struct PlaceOpLowering : public OpConversionPattern<PlaceOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(PlaceOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType idsType = op.getIds().getType();
    int64_t k = idsType.getDimSize(1);
    Value table = adaptor.getTable();
    int64_t P = tensorType(table).getDimSize(0);
    Value slots = mapElements(
        rewriter, op.getLoc(), idsType, adaptor.getIds(), {},
        [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
          Type i32 = b.getI32Type();
          Value expert = args[0];
          Value zero = scalarConst(b, loc, i32, 0);
          auto holds = [&](OpBuilder &nb, Location nloc, Value slot) {
            Value held = tensor::ExtractOp::create(nb, nloc, table, slot);
            return arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::eq,
                                         held, expert);
          };
          Value count =
              loopNest(b, loc, {P}, {zero},
                       [&](OpBuilder &nb, Location nloc, ValueRange ivs,
                           ValueRange acc) -> scf::ValueVector {
                         return {countIf(nb, nloc, holds(nb, nloc, ivs[0]),
                                         acc[0])};
                       })[0];
          // (t * k + j) mod max(c, 1): the replica this choice takes.
          Value position = arith::AddIOp::create(
              b, loc,
              arith::MulIOp::create(b, loc, loopIndexI32(b, loc, 0),
                                    scalarConst(b, loc, i32, k)),
              loopIndexI32(b, loc, 1));
          Value one = scalarConst(b, loc, i32, 1);
          Value replica = arith::RemUIOp::create(
              b, loc, position, arith::MaxSIOp::create(b, loc, count, one));
          Value none = scalarConst(b, loc, i32, -1);
          // Carried: the replicas of e seen so far and the slot chosen.
          return loopNest(
              b, loc, {P}, {zero, none},
              [&](OpBuilder &nb, Location nloc, ValueRange ivs,
                  ValueRange acc) -> scf::ValueVector {
                Value isMine = holds(nb, nloc, ivs[0]);
                Value isChosen = arith::AndIOp::create(
                    nb, nloc, isMine,
                    arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::eq,
                                          acc[0], replica));
                Value slot = arith::IndexCastOp::create(nb, nloc, i32, ivs[0]);
                return {countIf(nb, nloc, isMine, acc[0]),
                        arith::SelectOp::create(nb, nloc, isChosen, slot,
                                                acc[1])};
              })[1];
        });
    rewriter.replaceOp(op, slots);
    return success();
  }
};

/// output[p, ...] = input[table[p], ...].
struct SlotWeightsOpLowering : public OpConversionPattern<SlotWeightsOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(SlotWeightsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType outType = op.getOutput().getType();
    Value input = adaptor.getInput(), table = adaptor.getTable();
    Value output = mapElements(
        rewriter, op.getLoc(), outType, ValueRange{}, {},
        [&](OpBuilder &b, Location loc, ValueRange) -> Value {
          SmallVector<Value> at;
          for (int64_t d = 0; d < outType.getRank(); ++d)
            at.push_back(linalg::IndexOp::create(b, loc, d));
          Value expert = tensor::ExtractOp::create(b, loc, table, at[0]);
          at[0] = arith::IndexCastOp::create(b, loc, b.getIndexType(), expert);
          return tensor::ExtractOp::create(b, loc, input, at);
        });
    rewriter.replaceOp(op, output);
    return success();
  }
};

} // namespace

void populatePlacementPatterns(RewritePatternSet &patterns) {
  patterns.add<SlotTableOpLowering, PlaceOpLowering, SlotWeightsOpLowering>(
      patterns.getContext());
}

} // namespace mlir::moe::lowering
