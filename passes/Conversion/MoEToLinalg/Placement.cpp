//===- Placement.cpp - slot tables, the replica rule, slot weights --------===//
//
// The lowerings of a placement that is fixed when the program is compiled:
// moe.slot_table becomes its initial table (a runtime-owned table is made a
// buffer by moe-externalize-weights before this runs), moe.place finds the
// slot serving each expert from this rank, moe.slot_weights gathers rows
// and moe.slot_grad_sum on one rank adds each expert's parts.
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

/// The replica rule (ReplicaRule.h) in two steps: the slot that serves
/// each expert from this rank, from scans of the table (replica counts,
/// each expert's slots in ascending order, its first slot here, the
/// holder ranks below this one), then one lookup per choice. O(P + T k).
/// Expert ids index tables of P entries: ids of the table are experts
/// below E <= P; others (unrouted -1) give -1.
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
    int64_t perRank = P / static_cast<int64_t>(op.getRanks());
    Type i32 = b.getI32Type(), index = b.getIndexType();
    auto perSlot = RankedTensorType::get({P}, i32);
    Value zero = scalarConst(b, loc, i32, 0);
    Value one = scalarConst(b, loc, i32, 1);
    Value none = scalarConst(b, loc, i32, -1);
    Value zeros = filledTensor(b, loc, perSlot, 0);
    Value nones = filledTensor(b, loc, perSlot, -1);
    Value source =
        adaptor.getSource()
            ? Value(arith::IndexCastOp::create(b, loc, i32, adaptor.getSource()))
            : zero;
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
    auto cmp = [](OpBuilder &nb, Location nloc, arith::CmpIPredicate pred,
                  Value lhs, Value rhs) -> Value {
      return arith::CmpIOp::create(nb, nloc, pred, lhs, rhs);
    };
    auto select = [](OpBuilder &nb, Location nloc, Value c, Value t,
                     Value f) -> Value {
      return arith::SelectOp::create(nb, nloc, c, t, f);
    };
    auto allOf = [](OpBuilder &nb, Location nloc,
                    std::initializer_list<Value> conditions) -> Value {
      Value all;
      for (Value c : conditions)
        all = all ? Value(arith::AndIOp::create(nb, nloc, all, c)) : c;
      return all;
    };
    // An expert id that indexes the tables: [0, P), else 0 (and `valid`
    // false).
    auto clamp = [&](OpBuilder &nb, Location nloc, Value e,
                     Value &valid) -> Value {
      valid = arith::AndIOp::create(
          nb, nloc, cmp(nb, nloc, arith::CmpIPredicate::sge, e, zero),
          cmp(nb, nloc, arith::CmpIPredicate::slt, e,
              scalarConst(nb, nloc, i32, P)));
      return select(nb, nloc, valid, e, zero);
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
          c = select(nb, nloc, valid, arith::AddIOp::create(nb, nloc, c, one),
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
    // In one scan, ascending: each expert's slots in order (`sorted`), its
    // first slot on this rank (`local`, -1 if none), and the ranks below
    // this one that hold it (`below`, counting each rank once: `last` is
    // the last such rank seen).
    SmallVector<Value> scanned = loopNest(
        b, loc, {P}, {begins, zeros, nones, zeros, nones},
        [&](OpBuilder &nb, Location nloc, ValueRange ivs,
            ValueRange acc) -> scf::ValueVector {
          Value fill = acc[0], sorted = acc[1], local = acc[2],
                below = acc[3], last = acc[4];
          Value valid;
          Value e = clamp(nb, nloc,
                          tensor::ExtractOp::create(nb, nloc, table, ivs[0]),
                          valid);
          Value slot = arith::IndexCastOp::create(nb, nloc, i32, ivs[0]);
          Value rank = arith::DivUIOp::create(
              nb, nloc, slot, scalarConst(nb, nloc, i32, perRank));
          // An invalid entry writes its own place again: a no-op.
          Value next = at(nb, nloc, fill, e);
          Value into = select(nb, nloc, valid, next, zero);
          sorted = put(nb, nloc,
                       select(nb, nloc, valid, slot, at(nb, nloc, sorted, into)),
                       sorted, into);
          fill = put(nb, nloc,
                     select(nb, nloc, valid,
                            arith::AddIOp::create(nb, nloc, next, one), next),
                     fill, e);
          Value localNow = at(nb, nloc, local, e);
          Value isLocal = allOf(
              nb, nloc,
              {valid, cmp(nb, nloc, arith::CmpIPredicate::eq, rank, source),
               cmp(nb, nloc, arith::CmpIPredicate::slt, localNow, zero)});
          local = put(nb, nloc, select(nb, nloc, isLocal, slot, localNow),
                      local, e);
          Value lastNow = at(nb, nloc, last, e);
          Value isBelow = allOf(
              nb, nloc,
              {valid, cmp(nb, nloc, arith::CmpIPredicate::slt, rank, source),
               cmp(nb, nloc, arith::CmpIPredicate::ne, rank, lastNow)});
          Value belowNow = at(nb, nloc, below, e);
          below = put(nb, nloc,
                      select(nb, nloc, isBelow,
                             arith::AddIOp::create(nb, nloc, belowNow, one),
                             belowNow),
                      below, e);
          last = put(nb, nloc, select(nb, nloc, isBelow, rank, lastNow), last,
                     e);
          return {fill, sorted, local, below, last};
        });
    Value sorted = scanned[1], local = scanned[2], below = scanned[3];
    // The serving slot of each expert.
    Value serve = loopNest(
        b, loc, {P}, {nones},
        [&](OpBuilder &nb, Location nloc, ValueRange ivs,
            ValueRange acc) -> scf::ValueVector {
          Value e = arith::IndexCastOp::create(nb, nloc, i32, ivs[0]);
          Value c = at(nb, nloc, counts, e);
          Value held = cmp(nb, nloc, arith::CmpIPredicate::sgt, c, zero);
          Value turn = arith::RemUIOp::create(
              nb, nloc, arith::SubIOp::create(nb, nloc, source,
                                              at(nb, nloc, below, e)),
              arith::MaxSIOp::create(nb, nloc, c, one));
          Value where = select(
              nb, nloc, held,
              arith::AddIOp::create(nb, nloc, at(nb, nloc, begins, e), turn),
              zero);
          Value mine = at(nb, nloc, local, e);
          Value slot = select(
              nb, nloc, cmp(nb, nloc, arith::CmpIPredicate::sge, mine, zero),
              mine, at(nb, nloc, sorted, where));
          return {put(nb, nloc, select(nb, nloc, held, slot, none), acc[0],
                      e)};
        })[0];
    // The choices.
    Value init = tensor::EmptyOp::create(b, loc, idsType.getShape(), i32);
    Value slots = loopNest(
        b, loc, idsType.getShape(), {init},
        [&](OpBuilder &nb, Location nloc, ValueRange ivs,
            ValueRange acc) -> scf::ValueVector {
          Value valid;
          Value e = clamp(nb, nloc,
                          tensor::ExtractOp::create(nb, nloc, ids, ivs), valid);
          Value slot = select(nb, nloc, valid, at(nb, nloc, serve, e), none);
          return {tensor::InsertOp::create(nb, nloc, slot, acc[0], ivs)};
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

/// moe.slot_grad_sum on one rank: every choice of an expert went to its
/// first slot, so each slot's gradient is `0 + partials[first slot of its
/// expert]` (the addition of moe.experts_grad's first group). Over more
/// ranks it is an exchange (convert-comm-to-runtime).
struct SlotGradSumOpLowering : public OpConversionPattern<SlotGradSumOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(SlotGradSumOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (op.getGroupSize() != 1)
      return rewriter.notifyMatchFailure(
          op, "over several ranks: lowered to the runtime's exchange");
    Location loc = op.getLoc();
    Value table = adaptor.getTable(), partials = adaptor.getPartials();
    int64_t P = tensorType(table).getDimSize(0);
    Type i32 = rewriter.getI32Type();
    Value zero = scalarConst(rewriter, loc, i32, 0);
    // Each expert's first slot (experts index tables of P entries).
    Value first = loopNest(
        rewriter, loc, {P},
        {filledTensor(rewriter, loc, RankedTensorType::get({P}, i32), -1)},
        [&](OpBuilder &b, Location nloc, ValueRange ivs,
            ValueRange acc) -> scf::ValueVector {
          Value e = tensor::ExtractOp::create(b, nloc, table, ivs[0]);
          Value valid = arith::AndIOp::create(
              b, nloc,
              arith::CmpIOp::create(b, nloc, arith::CmpIPredicate::sge, e,
                                    zero),
              arith::CmpIOp::create(b, nloc, arith::CmpIPredicate::slt, e,
                                    scalarConst(b, nloc, i32, P)));
          Value at = arith::IndexCastOp::create(
              b, nloc, b.getIndexType(),
              arith::SelectOp::create(b, nloc, valid, e, zero));
          Value seen = tensor::ExtractOp::create(b, nloc, acc[0], at);
          Value take = arith::AndIOp::create(
              b, nloc, valid,
              arith::CmpIOp::create(b, nloc, arith::CmpIPredicate::slt, seen,
                                    zero));
          Value slot = arith::IndexCastOp::create(b, nloc, i32, ivs[0]);
          return {tensor::InsertOp::create(
              b, nloc, arith::SelectOp::create(b, nloc, take, slot, seen),
              acc[0], at)};
        })[0];
    RankedTensorType outType = op.getOutput().getType();
    Value output = mapElements(
        rewriter, loc, outType, ValueRange{}, {},
        [&](OpBuilder &b, Location nloc, ValueRange) -> Value {
          SmallVector<Value> at;
          for (int64_t d = 0; d < outType.getRank(); ++d)
            at.push_back(linalg::IndexOp::create(b, nloc, d));
          Value expert = tensor::ExtractOp::create(b, nloc, table, at[0]);
          Value index = arith::IndexCastOp::create(b, nloc, b.getIndexType(),
                                                   expert);
          Value slot = tensor::ExtractOp::create(b, nloc, first, index);
          at[0] = arith::IndexCastOp::create(b, nloc, b.getIndexType(), slot);
          Value part = tensor::ExtractOp::create(b, nloc, partials, at);
          return arith::AddFOp::create(
              b, nloc,
              scalarConst(b, nloc, outType.getElementType(), 0.0), part);
        });
    rewriter.replaceOp(op, output);
    return success();
  }
};

} // namespace

void populatePlacementPatterns(RewritePatternSet &patterns) {
  patterns.add<SlotTableOpLowering, PlaceOpLowering, SlotWeightsOpLowering,
               SlotGradSumOpLowering>(patterns.getContext());
}

} // namespace mlir::moe::lowering
