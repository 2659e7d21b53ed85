//===- CommToRuntime.cpp - exchanges between ranks as moert calls ---------===//
//
// Every shard collective that moe-partition emits, and moe.all_to_all,
// moe.prefix_sum and moe.slot_grad_sum over more than one rank, becomes a
// call into the runtime on buffers: the input is read through a read-only
// buffer, the result is a new buffer that the call fills. Rank coordinates come from moert_rank and
// the static grid shape, so shard.all_slice is a slice at a computed offset.
// With target=cuda the same calls go to the CUDA runtime's moert_cuda_*,
// which take the same arguments and move the data over NCCL.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/Runtime/RuntimeCalls.h"

#include "dialects/moe/IR/MoEOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::moe {
#define GEN_PASS_DEF_CONVERTCOMMTORUNTIMEPASS
#include "passes/Passes.h.inc"

using namespace runtime;

namespace {

/// What every exchange needs: its grid's static shape, its axes and their
/// group size.
struct Group {
  SmallVector<int64_t> gridShape;
  SmallVector<int16_t> axes;
  int64_t size = 1;
};

FailureOr<Group> groupOf(Operation *op, FlatSymbolRefAttr gridName,
                         ArrayRef<int16_t> axes, PatternRewriter &rewriter) {
  if (!gridName)
    return rewriter.notifyMatchFailure(op, "no grid: one rank");
  auto grid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(op, gridName);
  if (!grid)
    return rewriter.notifyMatchFailure(op, "the grid is not declared");
  Group group;
  group.gridShape = llvm::to_vector(grid.getShape());
  if (llvm::any_of(group.gridShape, ShapedType::isDynamic))
    return rewriter.notifyMatchFailure(op, "the grid shape is dynamic");
  group.axes = llvm::to_vector(axes);
  for (int16_t axis : axes)
    group.size *= group.gridShape[axis];
  return group;
}

bool hasStaticShapes(Operation *op) {
  auto isStatic = [](Type type) {
    auto shaped = dyn_cast<ShapedType>(type);
    return !shaped || shaped.hasStaticShape();
  };
  return llvm::all_of(op->getOperandTypes(), isStatic) &&
         llvm::all_of(op->getResultTypes(), isStatic);
}

int64_t byteSize(Type type) {
  auto shaped = cast<ShapedType>(type);
  return shaped.getNumElements() *
         ((shaped.getElementTypeBitWidth() + 7) / 8);
}

/// The linear index of `multiIndex` over `axes`, last fastest.
int64_t linearize(const Group &group, ArrayRef<int64_t> multiIndex) {
  int64_t position = 0;
  for (auto [axis, index] : llvm::zip_equal(group.axes, multiIndex))
    position = position * group.gridShape[axis] + index;
  return position;
}

/// Common checks, then `lower(group)`; the base of every pattern here.
/// `halfSums`: the runtime sums f16 and bf16 too (the CUDA runtime does).
template <typename OpTy>
struct ExchangeLowering : OpRewritePattern<OpTy> {
  ExchangeLowering(MLIRContext *context, bool halfSums)
      : OpRewritePattern<OpTy>(context), halfSums(halfSums) {}
  bool halfSums;

  virtual LogicalResult lower(OpTy op, const Group &group,
                              PatternRewriter &rewriter) const = 0;

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    if (!hasStaticShapes(op))
      return rewriter.notifyMatchFailure(op, "dynamic shapes");
    FailureOr<Group> group =
        groupOf(op, op.getGridAttr(), op.getGridAxes(), rewriter);
    if (failed(group))
      return failure();
    return lower(op, *group, rewriter);
  }
};

/// `callee(in, out, <sizes...>, axes)` into a new buffer of `resultType`.
Value exchange(PatternRewriter &rewriter, Location loc, StringRef callee,
               Value input, Type resultType, ArrayRef<Value> sizes,
               const Group &group) {
  Value out = newBuffer(rewriter, loc, cast<RankedTensorType>(resultType));
  SmallVector<Value> args{readPointer(rewriter, loc, input),
                          dataPointer(rewriter, loc, out)};
  args.append(sizes.begin(), sizes.end());
  args.push_back(i64Const(rewriter, loc, encodeAxes(group.axes)));
  call(rewriter, loc, callee, args);
  return asTensor(rewriter, loc, out);
}

struct AllSliceLowering final : ExchangeLowering<shard::AllSliceOp> {
  using ExchangeLowering::ExchangeLowering;
  LogicalResult lower(shard::AllSliceOp op, const Group &group,
                      PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(op.getType());
    int64_t dim = op.getSliceAxis().getSExtValue();
    Value position =
        groupPosition(rewriter, loc, group.gridShape, group.axes);
    SmallVector<OpFoldResult> offsets(type.getRank(), rewriter.getIndexAttr(0));
    offsets[dim] = arith::MulIOp::create(
                       rewriter, loc, position,
                       arith::ConstantIndexOp::create(rewriter, loc,
                                                      type.getDimSize(dim)))
                       .getResult();
    SmallVector<OpFoldResult> sizes =
        getAsIndexOpFoldResult(rewriter.getContext(), type.getShape());
    SmallVector<OpFoldResult> strides(type.getRank(), rewriter.getIndexAttr(1));
    rewriter.replaceOpWithNewOp<tensor::ExtractSliceOp>(
        op, type, op.getInput(), offsets, sizes, strides);
    return success();
  }
};

struct AllGatherLowering final : ExchangeLowering<shard::AllGatherOp> {
  using ExchangeLowering::ExchangeLowering;
  LogicalResult lower(shard::AllGatherOp op, const Group &group,
                      PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto inType = cast<RankedTensorType>(op.getInput().getType());
    auto outType = cast<RankedTensorType>(op.getType());
    int64_t dim = op.getGatherAxis().getSExtValue();
    Value bytes = i64Const(rewriter, loc, byteSize(inType));
    if (dim == 0) {
      rewriter.replaceOp(op, exchange(rewriter, loc, "moert_all_gather",
                                      op.getInput(), outType, bytes, group));
      return success();
    }
    // The runtime concatenates whole buffers: gather into [G, in...], then
    // place block g at offset g * in[dim] along `dim`.
    SmallVector<int64_t> stacked{group.size};
    llvm::append_range(stacked, inType.getShape());
    Value blocks = exchange(rewriter, loc, "moert_all_gather", op.getInput(),
                            inType.clone(stacked), bytes, group);
    Value result = tensor::EmptyOp::create(rewriter, loc, outType.getShape(),
                                           outType.getElementType());
    int64_t rank = inType.getRank();
    SmallVector<OpFoldResult> ones(rank + 1, rewriter.getIndexAttr(1));
    for (int64_t g = 0; g < group.size; ++g) {
      SmallVector<OpFoldResult> offsets(rank + 1, rewriter.getIndexAttr(0));
      offsets[0] = rewriter.getIndexAttr(g);
      SmallVector<OpFoldResult> sizes{rewriter.getIndexAttr(1)};
      llvm::append_range(sizes, getAsIndexOpFoldResult(rewriter.getContext(),
                                                       inType.getShape()));
      Value block = tensor::ExtractSliceOp::create(
          rewriter, loc, inType, blocks, offsets, sizes, ones);
      SmallVector<OpFoldResult> at(rank, rewriter.getIndexAttr(0));
      at[dim] = rewriter.getIndexAttr(g * inType.getDimSize(dim));
      result = tensor::InsertSliceOp::create(
          rewriter, loc, block, result, at, ArrayRef(sizes).drop_front(),
          ArrayRef(ones).drop_front());
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// Replaces `op` (one tensor result) with the runtime's sum `callee` of
/// `input`: `callee(in, out, count of the result, dtype, axes)`. Every
/// runtime sums f32, f64, i32 and i64; `halfSums`: f16 and bf16 too.
LogicalResult replaceWithSum(Operation *op, Value input, StringRef callee,
                             const Group &group, bool halfSums,
                             PatternRewriter &rewriter) {
  Type element = cast<ShapedType>(input.getType()).getElementType();
  std::optional<int32_t> code = dtypeCode(element);
  if (!code || (!halfSums && (element.isF16() || element.isBF16())))
    return rewriter.notifyMatchFailure(
        op, halfSums ? "the runtime sums f32, f64, i32, i64, f16 and bf16 only"
                     : "the runtime sums f32, f64, i32 and i64 only");
  Location loc = op->getLoc();
  Type resultType = op->getResult(0).getType();
  Value count =
      i64Const(rewriter, loc, cast<ShapedType>(resultType).getNumElements());
  rewriter.replaceOp(op, exchange(rewriter, loc, callee, input, resultType,
                                  {count, i32Const(rewriter, loc, *code)},
                                  group));
  return success();
}

struct AllReduceLowering final : ExchangeLowering<shard::AllReduceOp> {
  using ExchangeLowering::ExchangeLowering;
  LogicalResult lower(shard::AllReduceOp op, const Group &group,
                      PatternRewriter &rewriter) const override {
    if (op.getReduction() != shard::ReductionKind::Sum)
      return rewriter.notifyMatchFailure(op, "only sums are lowered");
    if (!isa<RankedTensorType>(op.getType()))
      return rewriter.notifyMatchFailure(op, "a buffer, not a tensor");
    return replaceWithSum(op, op.getInput(), "moert_all_reduce_sum", group,
                          halfSums, rewriter);
  }
};

struct ReduceScatterLowering final : ExchangeLowering<shard::ReduceScatterOp> {
  using ExchangeLowering::ExchangeLowering;
  LogicalResult lower(shard::ReduceScatterOp op, const Group &group,
                      PatternRewriter &rewriter) const override {
    if (op.getReduction() != shard::ReductionKind::Sum)
      return rewriter.notifyMatchFailure(op, "only sums are lowered");
    if (op.getScatterAxis() != 0)
      return rewriter.notifyMatchFailure(op, "scatters along dim 0 only");
    return replaceWithSum(op, op.getInput(), "moert_reduce_scatter_sum", group,
                          halfSums, rewriter);
  }
};

/// Replaces `op` (first result of `resultType`) with the uniform exchange of
/// `input`: equal blocks along dim 0, block p to position p.
LogicalResult replaceWithAllToAll(Operation *op, Value input, Type resultType,
                                  const Group &group,
                                  PatternRewriter &rewriter) {
  Location loc = op->getLoc();
  Value bytes = i64Const(rewriter, loc, byteSize(input.getType()) / group.size);
  Value result = exchange(rewriter, loc, "moert_all_to_all", input, resultType,
                          bytes, group);
  rewriter.replaceOp(op, result);
  return success();
}

struct AllToAllLowering final : ExchangeLowering<shard::AllToAllOp> {
  using ExchangeLowering::ExchangeLowering;
  LogicalResult lower(shard::AllToAllOp op, const Group &group,
                      PatternRewriter &rewriter) const override {
    if (op.getSplitAxis() != 0 || op.getConcatAxis() != 0)
      return rewriter.notifyMatchFailure(op,
                                         "splits and concatenates dim 0 only");
    return replaceWithAllToAll(op, op.getInput(), op.getType(), group,
                               rewriter);
  }
};

struct RowsAllToAllLowering final : ExchangeLowering<AllToAllOp> {
  using ExchangeLowering::ExchangeLowering;
  LogicalResult lower(AllToAllOp op, const Group &group,
                      PatternRewriter &rewriter) const override {
    if (group.size == 1)
      return rewriter.notifyMatchFailure(op, "one rank: a copy, lowered with "
                                             "the other moe ops");
    if (!op.getCounts())
      return replaceWithAllToAll(op, op.getInput(), op.getOutput().getType(),
                                 group, rewriter);
    Location loc = op.getLoc();
    int64_t inBytes = byteSize(op.getInput().getType());
    auto inType = cast<RankedTensorType>(op.getInput().getType());
    auto outType = cast<RankedTensorType>(op.getOutput().getType());
    auto countsType = cast<RankedTensorType>(op.getCounts().getType());
    int64_t groupsPerRank = countsType.getDimSize(0) / group.size;
    Value out = newBuffer(rewriter, loc, outType);
    Value outCounts = newBuffer(rewriter, loc, countsType);
    call(rewriter, loc, "moert_ragged_all_to_all",
         {readPointer(rewriter, loc, op.getInput()),
          readPointer(rewriter, loc, op.getCounts()),
          dataPointer(rewriter, loc, out), dataPointer(rewriter, loc, outCounts),
          i64Const(rewriter, loc, inBytes / inType.getDimSize(0)),
          i64Const(rewriter, loc, groupsPerRank),
          i64Const(rewriter, loc, outType.getDimSize(0)),
          i64Const(rewriter, loc, encodeAxes(group.axes))});
    rewriter.replaceOp(op, {asTensor(rewriter, loc, out),
                            asTensor(rewriter, loc, outCounts)});
    return success();
  }
};

/// moe.slot_grad_sum over several ranks: the runtime sends the parts of
/// replicated experts between their holders and adds each slot's parts in
/// source order (moert_slot_grad_sum, f32 on the CPU).
struct SlotGradSumLowering final : ExchangeLowering<SlotGradSumOp> {
  using ExchangeLowering::ExchangeLowering;
  LogicalResult lower(SlotGradSumOp op, const Group &group,
                      PatternRewriter &rewriter) const override {
    if (group.size == 1)
      return rewriter.notifyMatchFailure(op, "one rank: lowered with the "
                                             "other moe ops");
    // The CUDA runtime trains on one rank.
    if (halfSums)
      return rewriter.notifyMatchFailure(
          op, "the CUDA runtime has no slot gradient exchange");
    auto type = cast<RankedTensorType>(op.getPartials().getType());
    if (!type.getElementType().isF32())
      return rewriter.notifyMatchFailure(op, "the runtime adds f32 parts only");
    Location loc = op.getLoc();
    int64_t numSlots = op.getTable().getType().getDimSize(0);
    Value out = newBuffer(rewriter, loc, op.getOutput().getType());
    call(rewriter, loc, "moert_slot_grad_sum",
         {readPointer(rewriter, loc, op.getPartials()),
          readPointer(rewriter, loc, op.getTable()),
          dataPointer(rewriter, loc, out), i64Const(rewriter, loc, numSlots),
          i64Const(rewriter, loc, type.getNumElements() / type.getDimSize(0)),
          i64Const(rewriter, loc, encodeAxes(group.axes))});
    rewriter.replaceOp(op, asTensor(rewriter, loc, out));
    return success();
  }
};

struct PrefixSumLowering final : ExchangeLowering<PrefixSumOp> {
  using ExchangeLowering::ExchangeLowering;
  LogicalResult lower(PrefixSumOp op, const Group &group,
                      PatternRewriter &rewriter) const override {
    if (group.size == 1)
      return rewriter.notifyMatchFailure(op, "one rank: zeros, lowered with "
                                             "the other moe ops");
    // Counts: no runtime scans f16 or bf16.
    return replaceWithSum(op, op.getInput(), "moert_exclusive_scan_sum", group,
                          /*halfSums=*/false, rewriter);
  }
};

struct SendLowering final : ExchangeLowering<shard::SendOp> {
  using ExchangeLowering::ExchangeLowering;
  LogicalResult lower(shard::SendOp op, const Group &group,
                      PatternRewriter &rewriter) const override {
    if (!op.getDestinationDynamic().empty())
      return rewriter.notifyMatchFailure(op, "a dynamic destination");
    Location loc = op.getLoc();
    call(rewriter, loc, "moert_send",
         {readPointer(rewriter, loc, op.getInput()),
          i64Const(rewriter, loc, byteSize(op.getInput().getType())),
          i64Const(rewriter, loc, encodeAxes(group.axes)),
          i64Const(rewriter, loc, linearize(group, op.getDestination()))});
    // The result is the value sent, unchanged on this rank.
    rewriter.replaceOp(op, op.getInput());
    return success();
  }
};

struct RecvLowering final : ExchangeLowering<shard::RecvOp> {
  using ExchangeLowering::ExchangeLowering;
  LogicalResult lower(shard::RecvOp op, const Group &group,
                      PatternRewriter &rewriter) const override {
    if (!op.getSource() || !op.getSourceDynamic().empty())
      return rewriter.notifyMatchFailure(op, "needs a static source");
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(op.getType());
    Value out = newBuffer(rewriter, loc, type);
    call(rewriter, loc, "moert_recv",
         {dataPointer(rewriter, loc, out),
          i64Const(rewriter, loc, byteSize(type)),
          i64Const(rewriter, loc, encodeAxes(group.axes)),
          i64Const(rewriter, loc, linearize(group, *op.getSource()))});
    rewriter.replaceOp(op, asTensor(rewriter, loc, out));
    return success();
  }
};

struct BroadcastLowering final : ExchangeLowering<shard::BroadcastOp> {
  using ExchangeLowering::ExchangeLowering;
  LogicalResult lower(shard::BroadcastOp op, const Group &group,
                      PatternRewriter &rewriter) const override {
    if (!op.getRootDynamic().empty())
      return rewriter.notifyMatchFailure(op, "a dynamic root");
    Location loc = op.getLoc();
    Value out = newBuffer(rewriter, loc, cast<RankedTensorType>(op.getType()));
    call(rewriter, loc, "moert_broadcast",
         {readPointer(rewriter, loc, op.getInput()),
          dataPointer(rewriter, loc, out),
          i64Const(rewriter, loc, byteSize(op.getType())),
          i64Const(rewriter, loc, encodeAxes(group.axes)),
          i64Const(rewriter, loc, linearize(group, op.getRoot()))});
    rewriter.replaceOp(op, asTensor(rewriter, loc, out));
    return success();
  }
};

struct ProcessMultiIndexLowering final
    : OpRewritePattern<shard::ProcessMultiIndexOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(shard::ProcessMultiIndexOp op,
                                PatternRewriter &rewriter) const override {
    FailureOr<Group> group = groupOf(op, op.getGridAttr(), {}, rewriter);
    if (failed(group))
      return failure();
    SmallVector<int16_t> axes = llvm::to_vector(op.getAxes());
    if (axes.empty())
      for (int16_t axis = 0; axis < (int16_t)group->gridShape.size(); ++axis)
        axes.push_back(axis);
    Location loc = op.getLoc();
    Value rank = worldRank(rewriter, loc);
    SmallVector<Value> coordinates;
    for (int16_t axis : axes)
      coordinates.push_back(
          gridCoordinate(rewriter, loc, rank, group->gridShape, axis));
    rewriter.replaceOp(op, coordinates);
    return success();
  }
};

/// The exchange calls, which the CUDA runtime provides under the same names
/// with moert_cuda_ in place of moert_.
constexpr StringLiteral kExchanges[] = {
    "moert_all_gather",         "moert_all_reduce_sum",
    "moert_reduce_scatter_sum", "moert_all_to_all",
    "moert_ragged_all_to_all",  "moert_exclusive_scan_sum",
    "moert_send",               "moert_recv",
    "moert_broadcast"};

/// Points every exchange call of `module` at the CUDA runtime.
void retargetToCUDA(ModuleOp module) {
  for (StringRef name : kExchanges) {
    auto decl = module.lookupSymbol<func::FuncOp>(name);
    if (!decl)
      continue;
    auto cudaName = StringAttr::get(
        module.getContext(), "moert_cuda_" + name.drop_front(strlen("moert_")));
    if (failed(SymbolTable::replaceAllSymbolUses(decl, cudaName, module)))
      llvm_unreachable("calls of a private function are in its module");
    SymbolTable::setSymbolName(decl, cudaName);
  }
}

struct ConvertCommToRuntimePass
    : public impl::ConvertCommToRuntimePassBase<ConvertCommToRuntimePass> {
  using Base::Base;

  void runOnOperation() override {
    if (target != "cpu" && target != "cuda") {
      emitError(getOperation().getLoc())
          << "convert-comm-to-runtime: unknown target '" << target
          << "' (expected cpu or cuda)";
      return signalPassFailure();
    }
    RewritePatternSet patterns(&getContext());
    patterns.add<AllSliceLowering, AllGatherLowering, AllReduceLowering,
                 ReduceScatterLowering, AllToAllLowering, RowsAllToAllLowering,
                 PrefixSumLowering, SlotGradSumLowering, SendLowering, RecvLowering,
                 BroadcastLowering>(&getContext(),
                                    /*halfSums=*/target == "cuda");
    patterns.add<ProcessMultiIndexLowering>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    // Whatever is left has a form the runtime has no call for.
    WalkResult left = getOperation()->walk([](Operation *op) {
      bool oneRank = false;
      if (auto rows = dyn_cast<AllToAllOp>(op))
        oneRank = rows.getGroupSize() == 1;
      if (auto scan = dyn_cast<PrefixSumOp>(op))
        oneRank = getGroupSize(op, scan.getGridAttr(), scan.getGridAxes()) == 1;
      if (auto sum = dyn_cast<SlotGradSumOp>(op))
        oneRank = sum.getGroupSize() == 1;
      bool shardExchange =
          isa<shard::ShardDialect>(op->getDialect()) && !isa<shard::GridOp>(op);
      if ((shardExchange || isa<AllToAllOp, PrefixSumOp, SlotGradSumOp>(op)) &&
          !oneRank) {
        op->emitOpError("has no runtime lowering (dynamic shapes, a reduction "
                        "other than sum, or an unsupported axis or dtype)");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (left.wasInterrupted())
      return signalPassFailure();
    if (target == "cuda")
      retargetToCUDA(getOperation());
  }
};

} // namespace
} // namespace mlir::moe
