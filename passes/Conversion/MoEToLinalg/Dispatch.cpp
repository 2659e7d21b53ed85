//===- Dispatch.cpp - lower dispatch, combine, all_to_all -----------------===//
//
// The reference semantics of moving rows between tokens and experts.
// moe.dispatch is one scf.for nest over the (token, slot) pairs in the
// policy's order that copies every kept pair to the next free row of its
// expert; moe.combine is a linalg.generic that gathers rows through the
// slots; an moe.all_to_all within a group of one rank is a copy.
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/MoEToLinalg/Lowering.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::moe::lowering {

/// Whether the i32 `value` is in `[0, bound)`: negative values, -1 among
/// them, are huge as unsigned numbers.
static Value isBelow(OpBuilder &b, Location loc, Value value, Value bound) {
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, value, bound);
}

//===----------------------------------------------------------------------===//
// moe.dispatch
//===----------------------------------------------------------------------===//

/// Where each expert's rows start in a dropless buffer, i32 `[E]`: the
/// number of pairs routed to a lower expert.
static Value droplessOffsets(OpBuilder &b, Location loc, Value ids,
                             int64_t numExperts) {
  // Loops (e, t, j).
  return reduce(b, loc, ids, loopsTo(b, 3, {1, 2}),
                RankedTensorType::get({numExperts}, b.getI32Type()), 0.0, {0},
                [](OpBuilder &nb, Location nloc, ValueRange args) {
                  Value expert = loopIndexI32(nb, nloc, 0);
                  Value lower = isBelow(nb, nloc, args[0], expert);
                  return countIf(nb, nloc, lower, args[1]);
                });
}

Value probsRanks(OpBuilder &b, Location loc, Value ids, Value weights) {
  RankedTensorType idsType = tensorType(ids);
  int64_t k = idsType.getDimSize(1);
  // Loops (t, j, u, i): pair (u, i) against pair (t, j).
  AffineMap pair = loopsTo(b, 4, {0, 1}), other = loopsTo(b, 4, {2, 3});
  return reduce(
      b, loc, {ids, weights, ids, weights}, {pair, pair, other, other}, idsType,
      0.0, {0, 1}, [&](OpBuilder &nb, Location nloc, ValueRange args) {
        auto flatIndex = [&](int64_t rowDim) -> Value {
          Value row = linalg::IndexOp::create(nb, nloc, rowDim);
          Value col = linalg::IndexOp::create(nb, nloc, rowDim + 1);
          Value rowStart =
              arith::MulIOp::create(nb, nloc, row, indexConst(nb, nloc, k));
          return arith::AddIOp::create(nb, nloc, rowStart, col);
        };
        Value sameExpert = arith::CmpIOp::create(
            nb, nloc, arith::CmpIPredicate::eq, args[0], args[2]);
        Value larger = arith::CmpFOp::create(
            nb, nloc, arith::CmpFPredicate::OGT, args[3], args[1]);
        Value equal = arith::CmpFOp::create(nb, nloc, arith::CmpFPredicate::OEQ,
                                            args[3], args[1]);
        Value earlier = arith::CmpIOp::create(
            nb, nloc, arith::CmpIPredicate::ult, flatIndex(2), flatIndex(0));
        Value tieBreak = arith::AndIOp::create(nb, nloc, equal, earlier);
        Value better = arith::OrIOp::create(nb, nloc, larger, tieBreak);
        Value outranks = arith::AndIOp::create(nb, nloc, sameExpert, better);
        return countIf(nb, nloc, outranks, args[4]);
      });
}

namespace {
/// What the loop over the (token, slot) pairs of moe.dispatch reads.
struct DispatchPlan {
  Value input, ids;
  int64_t numExperts;
  std::optional<int64_t> capacity;
  /// Capacity: rows per expert block (C, or fewer for a shard's buffer).
  int64_t blockRows = 0;
  /// Capacity on a shard: pairs routed to each expert before this shard.
  Value before = nullptr;
  /// Dropless: where each expert's rows start.
  Value offsets = nullptr;
  /// `probs` policy: how many pairs outrank each pair.
  Value ranks = nullptr;
};

/// What that loop carries: the rows, the slots, the rows placed per expert
/// (the counts in the end) and the dropped pairs (i64).
enum DispatchState { Rows, Slots, Placed, Dropped };
} // namespace

/// Whether a pair routed to an expert that already holds `placed` rows fits
/// in its capacity; null when dropless (every routed pair fits).
static Value fitsCapacity(OpBuilder &b, Location loc, const DispatchPlan &plan,
                          ValueRange pair, Value expert, Value placed) {
  if (!plan.capacity)
    return Value();
  // `position` and `choice` keep the first C pairs of the whole batch in
  // their order. A kept pair's position on this shard is `placed`, so it
  // never passes the block.
  Value capacity = scalarConst(b, loc, b.getI32Type(), *plan.capacity);
  if (plan.before)
    placed = arith::AddIOp::create(
        b, loc, placed, tensor::ExtractOp::create(b, loc, plan.before, expert));
  Value fits = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, placed,
                                     capacity);
  if (!plan.ranks)
    return fits;
  // `probs` keeps the C best ranked ones. At most C rank below C unless
  // weights are NaN (unordered); the check above still bounds the block.
  Value rank = tensor::ExtractOp::create(b, loc, plan.ranks, pair);
  Value ranked =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, rank, capacity);
  return arith::AndIOp::create(b, loc, fits, ranked);
}

/// The first row of expert `expert` (i32 `id`).
static Value expertBase(OpBuilder &b, Location loc, const DispatchPlan &plan,
                        Value id, Value expert) {
  if (plan.offsets)
    return tensor::ExtractOp::create(b, loc, plan.offsets, expert);
  return arith::MulIOp::create(
      b, loc, id, scalarConst(b, loc, b.getI32Type(), plan.blockRows));
}

/// Copies the token row of `pair` to `row` (i32) and records it: `row` is
/// the next free row of `expert`, which holds `placed` rows. Returns the
/// rows, slots and rows placed per expert.
static scf::ValueVector placePair(OpBuilder &b, Location loc,
                                  const DispatchPlan &plan, ValueRange pair,
                                  Value row, Value expert, Value placed,
                                  ValueRange state) {
  Value rowIndex = arith::IndexCastOp::create(b, loc, b.getIndexType(), row);
  int64_t width = tensorType(plan.input).getDimSize(1);
  SmallVector<OpFoldResult> sizes{b.getIndexAttr(1), b.getIndexAttr(width)};
  SmallVector<OpFoldResult> strides(2, b.getIndexAttr(1));
  Value tokenRow = tensor::ExtractSliceOp::create(
      b, loc, plan.input, ArrayRef<OpFoldResult>{pair[0], b.getIndexAttr(0)},
      sizes, strides);
  Value rows = tensor::InsertSliceOp::create(
      b, loc, tokenRow, state[Rows],
      ArrayRef<OpFoldResult>{rowIndex, b.getIndexAttr(0)}, sizes, strides);
  Value slots = tensor::InsertOp::create(b, loc, row, state[Slots], pair);
  Value nextPlaced = arith::AddIOp::create(
      b, loc, placed, scalarConst(b, loc, placed.getType(), 1));
  Value placedPerExpert =
      tensor::InsertOp::create(b, loc, nextPlaced, state[Placed], expert);
  return {rows, slots, placedPerExpert};
}

/// One step of the dispatch loop: keeps or drops `pair` (token, slot).
static scf::ValueVector dispatchPair(OpBuilder &b, Location loc,
                                     const DispatchPlan &plan, ValueRange pair,
                                     ValueRange state) {
  Type i32 = b.getI32Type();
  Value id = tensor::ExtractOp::create(b, loc, plan.ids, pair);
  Value routed = isBelow(b, loc, id, scalarConst(b, loc, i32, plan.numExperts));
  // Unrouted pairs read expert 0's entries, and leave them alone.
  Value safeId =
      arith::SelectOp::create(b, loc, routed, id, scalarConst(b, loc, i32, 0));
  Value expert = arith::IndexCastOp::create(b, loc, b.getIndexType(), safeId);
  Value placed = tensor::ExtractOp::create(b, loc, state[Placed], expert);
  Value keep = routed, dropped = state[Dropped];
  if (Value fits = fitsCapacity(b, loc, plan, pair, expert, placed)) {
    keep = arith::AndIOp::create(b, loc, routed, fits);
    Value lost = arith::XOrIOp::create(b, loc, routed, keep);
    dropped = arith::AddIOp::create(
        b, loc, dropped, arith::ExtUIOp::create(b, loc, b.getI64Type(), lost));
  }
  Value row = arith::AddIOp::create(
      b, loc, expertBase(b, loc, plan, safeId, expert), placed);
  auto ifOp = scf::IfOp::create(
      b, loc, keep,
      [&](OpBuilder &tb, Location tloc) {
        scf::YieldOp::create(
            tb, tloc,
            placePair(tb, tloc, plan, pair, row, expert, placed, state));
      },
      [&](OpBuilder &eb, Location eloc) {
        scf::YieldOp::create(eb, eloc, state.take_front(Dropped));
      });
  scf::ValueVector next(ifOp.getResults());
  next.push_back(dropped);
  return next;
}

namespace {
struct DispatchOpLowering : public OpConversionPattern<DispatchOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(DispatchOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    DispatchPlan plan{adaptor.getInput(), adaptor.getIds(), op.getNumExperts(),
                      op.getCapacity()};
    if (plan.capacity) {
      plan.blockRows = op.getRows().getType().getDimSize(1);
      plan.before = adaptor.getOffsets();
    }
    if (op.getDropPolicy() == DropPolicy::Probs) {
      if (!adaptor.getWeights())
        return rewriter.notifyMatchFailure(op, "probs policy without weights");
      plan.ranks = probsRanks(rewriter, loc, plan.ids, adaptor.getWeights());
    }
    if (!plan.capacity)
      plan.offsets = droplessOffsets(rewriter, loc, plan.ids, plan.numExperts);

    RankedTensorType inputType = tensorType(plan.input);
    ArrayRef<int64_t> pairs = tensorType(plan.ids).getShape();
    // Capacity rows are built as flat `[E*C, H]` and expanded at the end.
    int64_t numRows =
        plan.capacity ? plan.numExperts * plan.blockRows : pairs[0] * pairs[1];
    auto rowsType = RankedTensorType::get({numRows, inputType.getDimSize(1)},
                                          inputType.getElementType());
    Value init[] = {filledTensor(rewriter, loc, rowsType, 0.0),
                    filledTensor(rewriter, loc, op.getSlots().getType(), -1.0),
                    filledTensor(rewriter, loc, op.getCounts().getType(), 0.0),
                    scalarConst(rewriter, loc, rewriter.getI64Type(), 0.0)};
    // The order of the rows within an expert, and of who keeps its place:
    // token-major, slot-minor; slot-major for the `choice` policy.
    bool choiceMajor = op.getDropPolicy() == DropPolicy::Choice;
    SmallVector<int64_t> bounds(pairs);
    if (choiceMajor)
      std::swap(bounds[0], bounds[1]);
    SmallVector<Value> results = loopNest(
        rewriter, loc, bounds, init,
        [&](OpBuilder &b, Location nloc, ValueRange ivs, ValueRange state) {
          SmallVector<Value> pair(ivs);
          if (choiceMajor)
            std::swap(pair[0], pair[1]);
          return dispatchPair(b, nloc, plan, pair, state);
        });

    Value rows = results[Rows];
    if (plan.capacity)
      rows = tensor::ExpandShapeOp::create(
          rewriter, loc, op.getRows().getType(), rows,
          ArrayRef<ReassociationIndices>{{0, 1}, {2}});
    Value dropped = tensor::FromElementsOp::create(
        rewriter, loc, op.getDropped().getType(), results[Dropped]);
    rewriter.replaceOp(op, {rows, results[Slots], results[Placed], dropped});
    return success();
  }
};
} // namespace

//===----------------------------------------------------------------------===//
// moe.combine
//===----------------------------------------------------------------------===//

namespace {
struct CombineOpLowering : public OpConversionPattern<CombineOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(CombineOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value rows = adaptor.getRows();
    // Capacity rows `[G, C, M]` are read as `[G*C, M]`.
    if (tensorType(rows).getRank() == 3)
      rows = tensor::CollapseShapeOp::create(
          rewriter, loc, rows, ArrayRef<ReassociationIndices>{{0, 1}, {2}});
    int64_t numRows = tensorType(rows).getDimSize(0);
    // Loops (t, m, j); j innermost, so every output element sums its slots
    // in increasing order.
    AffineMap pairs = loopsTo(rewriter, 3, {0, 2});
    Value output = reduce(
        rewriter, loc, {adaptor.getSlots(), adaptor.getWeights()},
        {pairs, pairs}, op.getOutput().getType(), 0.0, {0, 1},
        [&](OpBuilder &b, Location nloc, ValueRange args) -> Value {
          Value slot = args[0], weight = args[1], acc = args[2];
          // Slots outside the rows (the -1 of dropped and unrouted pairs,
          // or a corrupt index) contribute nothing rather than read out of
          // bounds.
          Value valid = isBelow(b, nloc, slot,
                                scalarConst(b, nloc, slot.getType(), numRows));
          Value safeSlot = arith::SelectOp::create(
              b, nloc, valid, slot, scalarConst(b, nloc, slot.getType(), 0));
          Value row =
              arith::IndexCastOp::create(b, nloc, b.getIndexType(), safeSlot);
          Value col = linalg::IndexOp::create(b, nloc, 1);
          Value x =
              tensor::ExtractOp::create(b, nloc, rows, ValueRange{row, col});
          Value term = arith::MulFOp::create(b, nloc, weight, x);
          Value sum = arith::AddFOp::create(b, nloc, acc, term);
          return arith::SelectOp::create(b, nloc, valid, sum, acc);
        });
    rewriter.replaceOp(op, output);
    return success();
  }
};
} // namespace

//===----------------------------------------------------------------------===//
// moe.all_to_all
//===----------------------------------------------------------------------===//

/// The sum of the i32 `counts [G]`, as an index.
static Value sumCounts(OpBuilder &b, Location loc, Value counts) {
  Value sum = reduce(b, loc, counts, loopsTo(b, 1, {0}),
                     RankedTensorType::get({}, b.getI32Type()), 0.0, {},
                     [](OpBuilder &nb, Location nloc, ValueRange args) {
                       return arith::AddIOp::create(nb, nloc, args[0], args[1]);
                     });
  Value total = tensor::ExtractOp::create(b, loc, sum, ValueRange{});
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), total);
}

/// Stops the program with `message` unless `0 <= value <= bound`.
static void assertAtMost(OpBuilder &b, Location loc, Value value, int64_t bound,
                         StringRef message) {
  // Unsigned, so that a negative total fails too.
  Value ok = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ule, value,
                                   indexConst(b, loc, bound));
  cf::AssertOp::create(b, loc, ok, message);
}

namespace {
struct AllToAllOpLowering : public OpConversionPattern<AllToAllOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(AllToAllOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (op.getGroupSize() != 1)
      return rewriter.notifyMatchFailure(
          op, "exchanges between ranks are left to the communication "
              "lowering");
    Value input = adaptor.getInput();
    // A rank sends its whole input to itself.
    if (!op.isRagged()) {
      rewriter.replaceOp(op, input);
      return success();
    }
    RankedTensorType inType = tensorType(input);
    RankedTensorType outType = op.getOutput().getType();
    if (!outType.getElementType().isIntOrIndexOrFloat())
      return rewriter.notifyMatchFailure(
          op, "only integer and float rows have a zero to pad with");

    // Received rows first, then zeros.
    Location loc = op.getLoc();
    Value counts = adaptor.getCounts();
    Value total = sumCounts(rewriter, loc, counts);
    assertAtMost(rewriter, loc, total, inType.getDimSize(0),
                 "moe.all_to_all: the counts send more rows than the input "
                 "holds");
    assertAtMost(rewriter, loc, total, outType.getDimSize(0),
                 "moe.all_to_all: the receive buffer overflowed (more rows "
                 "received than the output holds)");
    int64_t rank = inType.getRank();
    SmallVector<OpFoldResult> offsets(rank, rewriter.getIndexAttr(0));
    SmallVector<OpFoldResult> strides(rank, rewriter.getIndexAttr(1));
    SmallVector<OpFoldResult> sizes =
        getAsIndexOpFoldResult(rewriter.getContext(), inType.getShape());
    sizes[0] = total;
    Value sent = tensor::ExtractSliceOp::create(rewriter, loc, input, offsets,
                                                sizes, strides);
    Value zeros = filledTensor(rewriter, loc, outType, 0.0);
    Value output = tensor::InsertSliceOp::create(rewriter, loc, sent, zeros,
                                                 offsets, sizes, strides);
    rewriter.replaceOp(op, {output, counts});
    return success();
  }
};
} // namespace

//===----------------------------------------------------------------------===//
// moe.expert_counts / moe.gather_rows / moe.prefix_sum
//===----------------------------------------------------------------------===//

namespace {
/// counts[e] = #{(t, j) : ids[t, j] == e}, a reduction over loops (t, j, e).
struct ExpertCountsOpLowering : public OpConversionPattern<ExpertCountsOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(ExpertCountsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value counts = reduce(
        rewriter, op.getLoc(), adaptor.getIds(),
        loopsTo(rewriter, 3, {0, 1}), op.getCounts().getType(), 0.0, {2},
        [](OpBuilder &b, Location loc, ValueRange args) {
          Value isExpert = arith::CmpIOp::create(
              b, loc, arith::CmpIPredicate::eq, args[0],
              loopIndexI32(b, loc, 2));
          return countIf(b, loc, isExpert, args[1]);
        });
    rewriter.replaceOp(op, counts);
    return success();
  }
};

/// output[i, h] = input[indices[i], h], zero for an index out of range.
struct GatherRowsOpLowering : public OpConversionPattern<GatherRowsOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(GatherRowsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType outType = op.getOutput().getType();
    if (!outType.getElementType().isIntOrIndexOrFloat())
      return rewriter.notifyMatchFailure(
          op, "only integer and float rows have a zero to pad with");
    Value input = adaptor.getInput();
    int64_t rows = tensorType(input).getDimSize(0);
    Value output = mapElements(
        rewriter, op.getLoc(), outType, adaptor.getIndices(),
        loopsTo(rewriter, 2, {0}),
        [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
          Type i32 = b.getI32Type();
          Value inRange = isBelow(b, loc, args[0], scalarConst(b, loc, i32, rows));
          Value row = arith::SelectOp::create(b, loc, inRange, args[0],
                                              scalarConst(b, loc, i32, 0));
          Value element = tensor::ExtractOp::create(
              b, loc, input,
              ValueRange{arith::IndexCastOp::create(b, loc, b.getIndexType(), row),
                         linalg::IndexOp::create(b, loc, 1)});
          return arith::SelectOp::create(
              b, loc, inRange, element,
              scalarConst(b, loc, outType.getElementType(), 0.0));
        });
    rewriter.replaceOp(op, output);
    return success();
  }
};

/// Within a group of one rank nothing comes before this rank: zeros.
struct PrefixSumOpLowering : public OpConversionPattern<PrefixSumOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(PrefixSumOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (getGroupSize(op, op.getGridAttr(), op.getGridAxes()) != 1)
      return rewriter.notifyMatchFailure(
          op, "exchanges between ranks are left to the communication "
              "lowering");
    rewriter.replaceOp(op, filledTensor(rewriter, op.getLoc(),
                                        op.getOutput().getType(), 0.0));
    return success();
  }
};
} // namespace

void populateDispatchPatterns(RewritePatternSet &patterns) {
  patterns.add<DispatchOpLowering, CombineOpLowering, AllToAllOpLowering,
               ExpertCountsOpLowering, GatherRowsOpLowering,
               PrefixSumOpLowering>(patterns.getContext());
}

} // namespace mlir::moe::lowering
