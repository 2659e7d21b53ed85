//===- Placement.cpp - slot tables, the replica rule, slot weights --------===//
//
// The lowerings of a placement that is fixed when the program is compiled:
// moe.slot_table becomes its initial table (a runtime-owned table is made a
// buffer by moe-externalize-weights before this runs), moe.place counts
// each expert's choices in token order and moe.slot_weights gathers rows.
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

/// The replica rule as one pass over the choices in (t, j) order: the
/// choice that is the i-th of this batch to pick expert e takes e's replica
/// i mod c_e (its slots in ascending order). Before it, the table is read
/// once into replica counts and each expert's slots (a counting sort), so
/// the work is O(P + T k). Expert ids index tables of P entries: ids of the
/// table are experts below E <= P; others (unrouted -1) give -1.
struct PlaceOpLowering : public OpConversionPattern<PlaceOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(PlaceOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    OpBuilder &b = rewriter;
    RankedTensorType idsType = op.getIds().getType();
    Value ids = adaptor.getIds(), table = adaptor.getTable();
    int64_t P = tensorType(table).getDimSize(0);
    Type i32 = b.getI32Type(), index = b.getIndexType();
    auto perSlot = RankedTensorType::get({P}, i32);
    Value zeros = filledTensor(b, loc, perSlot, 0);
    Value none = scalarConst(b, loc, i32, -1);
    Value one = scalarConst(b, loc, i32, 1);
    Value zero = scalarConst(b, loc, i32, 0);
    auto toIndex = [&](OpBuilder &nb, Location nloc, Value v) -> Value {
      return arith::IndexCastOp::create(nb, nloc, index, v);
    };
    auto at = [&](OpBuilder &nb, Location nloc, Value t, Value i) -> Value {
      return tensor::ExtractOp::create(nb, nloc, t, toIndex(nb, nloc, i));
    };
    auto put = [&](OpBuilder &nb, Location nloc, Value v, Value t,
                   Value i) -> Value {
      return tensor::InsertOp::create(nb, nloc, v, t, toIndex(nb, nloc, i));
    };
    // An expert id that indexes the tables: [0, P), else 0 (and `valid`
    // false).
    auto clamp = [&](OpBuilder &nb, Location nloc, Value e,
                     Value &valid) -> Value {
      Value atLeast0 = arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::sge,
                                             e, zero);
      Value below = arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::slt, e,
                                          scalarConst(nb, nloc, i32, P));
      valid = arith::AndIOp::create(nb, nloc, atLeast0, below);
      return arith::SelectOp::create(nb, nloc, valid, e, zero);
    };

    // Replica counts c_e.
    Value counts = loopNest(
        b, loc, {P}, {zeros},
        [&](OpBuilder &nb, Location nloc, ValueRange ivs,
            ValueRange acc) -> scf::ValueVector {
          Value valid;
          Value e = clamp(nb, nloc,
                          tensor::ExtractOp::create(nb, nloc, table, ivs[0]),
                          valid);
          Value c = at(nb, nloc, acc[0], e);
          c = arith::SelectOp::create(nb, nloc, valid,
                                      arith::AddIOp::create(nb, nloc, c, one),
                                      c);
          return {put(nb, nloc, c, acc[0], e)};
        })[0];
    // Where each expert's slots start in `sorted`: the exclusive prefix sum.
    Value begins = loopNest(
        b, loc, {P}, {zeros, zero},
        [&](OpBuilder &nb, Location nloc, ValueRange ivs,
            ValueRange acc) -> scf::ValueVector {
          Value c = tensor::ExtractOp::create(nb, nloc, counts, ivs[0]);
          return {tensor::InsertOp::create(nb, nloc, acc[1], acc[0], ivs[0]),
                  arith::AddIOp::create(nb, nloc, acc[1], c)};
        })[0];
    // Each expert's slots in ascending order.
    Value sorted = loopNest(
        b, loc, {P}, {begins, zeros},
        [&](OpBuilder &nb, Location nloc, ValueRange ivs,
            ValueRange acc) -> scf::ValueVector {
          Value valid;
          Value e = clamp(nb, nloc,
                          tensor::ExtractOp::create(nb, nloc, table, ivs[0]),
                          valid);
          Value next = at(nb, nloc, acc[0], e);
          Value slot = arith::IndexCastOp::create(nb, nloc, i32, ivs[0]);
          // An invalid entry writes its own place again: a no-op.
          Value into = arith::SelectOp::create(nb, nloc, valid, next, zero);
          Value kept = at(nb, nloc, acc[1], into);
          Value sortedNext = put(
              nb, nloc, arith::SelectOp::create(nb, nloc, valid, slot, kept),
              acc[1], into);
          Value fill = put(
              nb, nloc,
              arith::SelectOp::create(
                  nb, nloc, valid, arith::AddIOp::create(nb, nloc, next, one),
                  next),
              acc[0], e);
          return {fill, sortedNext};
        })[1];
    // The choices in (t, j) order.
    Value init = tensor::EmptyOp::create(b, loc, idsType.getShape(), i32);
    Value slots = loopNest(
        b, loc, idsType.getShape(), {init, zeros},
        [&](OpBuilder &nb, Location nloc, ValueRange ivs,
            ValueRange acc) -> scf::ValueVector {
          Value valid;
          Value e = clamp(nb, nloc,
                          tensor::ExtractOp::create(nb, nloc, ids, ivs), valid);
          Value c = at(nb, nloc, counts, e);
          valid = arith::AndIOp::create(
              nb, nloc, valid,
              arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::sgt, c,
                                    zero));
          Value seen = at(nb, nloc, acc[1], e);
          Value replica = arith::RemUIOp::create(
              nb, nloc, seen, arith::MaxSIOp::create(nb, nloc, c, one));
          Value where =
              arith::AddIOp::create(nb, nloc, at(nb, nloc, begins, e), replica);
          where = arith::SelectOp::create(nb, nloc, valid, where, zero);
          Value slot = arith::SelectOp::create(
              nb, nloc, valid, at(nb, nloc, sorted, where), none);
          Value seenNext = arith::SelectOp::create(
              nb, nloc, valid, arith::AddIOp::create(nb, nloc, seen, one), seen);
          return {tensor::InsertOp::create(nb, nloc, slot, acc[0], ivs),
                  put(nb, nloc, seenNext, acc[1], e)};
        })[0];
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
