//===- ShardLayer.cpp - the one place that builds shard dialect IR --------===//

#include "passes/Parallel/ShardLayer.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::spmd;

StringRef spmd::axisName(int16_t axis) {
  static constexpr StringLiteral names[] = {"pp", "dp", "dp_shard", "ep",
                                            "tp"};
  if (axis < 0 || axis >= 5)
    return "?";
  return names[axis];
}

void spmd::createWorldGrid(ModuleOp module, PlanAttr plan) {
  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  SmallVector<int64_t> shape{plan.getPp(), plan.getDp() / plan.getDpShard(),
                             plan.getDpShard(), plan.getEp(), plan.getTp()};
  shard::GridOp::create(b, module.getLoc(), kWorldGrid, shape);
}

Value spmd::markTokens(Value value) {
  if (Operation *def = value.getDefiningOp();
      isa_and_nonnull<shard::AllSliceOp, shard::AllGatherOp>(def))
    def->setAttr(kTokensAttrName, UnitAttr::get(def->getContext()));
  return value;
}

WeightSlices spmd::followWeightSlices(OpOperand &use) {
  WeightSlices chain;
  chain.local = use.get();
  auto slice = dyn_cast<shard::AllSliceOp>(use.getOwner());
  while (slice && slice.getInput() == chain.local) {
    chain.steps.push_back(slice);
    chain.local = slice.getResult();
    slice = chain.local.hasOneUse()
                ? dyn_cast<shard::AllSliceOp>(*chain.local.getUsers().begin())
                : nullptr;
  }
  return chain;
}

bool spmd::isExchange(Operation *op) {
  return isa<shard::AllGatherOp, shard::AllReduceOp, shard::AllToAllOp,
             shard::BroadcastOp, shard::ReduceScatterOp, shard::SendOp,
             shard::RecvOp, AllToAllOp, PrefixSumOp>(op);
}

int64_t Exchanges::size(Axis axis) const {
  switch (axis) {
  case Axis::PP:
    return planAttr.getPp();
  case Axis::DP:
    return planAttr.getDp() / planAttr.getDpShard();
  case Axis::DPShard:
    return planAttr.getDpShard();
  case Axis::EP:
    return planAttr.getEp();
  case Axis::TP:
    return planAttr.getTp();
  }
  llvm_unreachable("unknown grid axis");
}

int64_t Exchanges::size(ArrayRef<Axis> axes) const {
  int64_t n = 1;
  for (Axis axis : axes)
    n *= size(axis);
  return n;
}

SmallVector<int16_t> Exchanges::liveAxes(ArrayRef<Axis> axes) const {
  SmallVector<int16_t> live;
  for (Axis axis : axes)
    if (size(axis) > 1)
      live.push_back(static_cast<int16_t>(axis));
  return live;
}

FlatSymbolRefAttr Exchanges::grid() {
  return FlatSymbolRefAttr::get(b.getContext(), kWorldGrid);
}

/// `type` with dimension `dim` multiplied by `num` and divided by `den`.
static RankedTensorType scaleDim(Value value, int64_t dim, int64_t num,
                                 int64_t den) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] = shape[dim] * num / den;
  return type.clone(shape);
}

Value Exchanges::index(Location loc, Axis axis) {
  if (size(axis) == 1)
    return arith::ConstantIndexOp::create(b, loc, 0);
  auto op = shard::ProcessMultiIndexOp::create(
      b, loc, kWorldGrid, ArrayRef<int16_t>{static_cast<int16_t>(axis)});
  return op.getResult()[0];
}

Value Exchanges::slice(Location loc, Value value, ArrayRef<Axis> axes,
                       int64_t dim) {
  int64_t n = size(axes);
  if (n == 1)
    return value;
  return shard::AllSliceOp::create(b, loc, scaleDim(value, dim, 1, n), value,
                                   kWorldGrid, liveAxes(axes), dim);
}

Value Exchanges::gather(Location loc, Value value, ArrayRef<Axis> axes,
                        int64_t dim) {
  int64_t n = size(axes);
  if (n == 1)
    return value;
  return shard::AllGatherOp::create(
      b, loc, scaleDim(value, dim, n, 1), grid(),
      b.getDenseI16ArrayAttr(liveAxes(axes)), value, b.getIndexAttr(dim));
}

Value Exchanges::allReduceSum(Location loc, Value value, ArrayRef<Axis> axes) {
  if (size(axes) == 1)
    return value;
  return shard::AllReduceOp::create(b, loc, value, kWorldGrid, liveAxes(axes),
                                    shard::ReductionKind::Sum);
}

Value Exchanges::reduceScatterSum(Location loc, Value value,
                                  ArrayRef<Axis> axes) {
  int64_t n = size(axes);
  if (n == 1)
    return value;
  return shard::ReduceScatterOp::create(
      b, loc, scaleDim(value, 0, 1, n), grid(),
      b.getDenseI16ArrayAttr(liveAxes(axes)), value,
      shard::ReductionKindAttr::get(b.getContext(), shard::ReductionKind::Sum),
      b.getIndexAttr(0));
}

Value Exchanges::allToAll(Location loc, Value value, ArrayRef<Axis> axes) {
  if (size(axes) == 1)
    return value;
  return shard::AllToAllOp::create(
      b, loc, value.getType(), grid(), b.getDenseI16ArrayAttr(liveAxes(axes)),
      value, b.getIndexAttr(0), b.getIndexAttr(0));
}

std::pair<Value, Value> Exchanges::raggedAllToAll(Location loc, Value rows,
                                                  Value counts,
                                                  ArrayRef<Axis> axes,
                                                  int64_t receivedRows) {
  auto rowsType = cast<RankedTensorType>(rows.getType());
  if (size(axes) == 1 && rowsType.getDimSize(0) == receivedRows)
    return {rows, counts};
  SmallVector<int64_t> shape(rowsType.getShape());
  shape[0] = receivedRows;
  auto op = AllToAllOp::create(b, loc, rowsType.clone(shape), counts.getType(),
                               rows, counts, grid(),
                               b.getDenseI16ArrayAttr(liveAxes(axes)));
  return {op.getOutput(), op.getOutputCounts()};
}

Value Exchanges::prefixSum(Location loc, Value counts, ArrayRef<Axis> axes) {
  if (size(axes) == 1)
    return arith::ConstantOp::create(b, loc, b.getZeroAttr(counts.getType()));
  return PrefixSumOp::create(b, loc, counts, kWorldGrid, liveAxes(axes));
}

void Exchanges::send(Location loc, Value value, Axis axis,
                     int64_t destination) {
  shard::SendOp::create(b, loc, value.getType(), grid(),
                        b.getDenseI16ArrayAttr(liveAxes({axis})), value,
                        b.getDenseI64ArrayAttr({destination}), ValueRange());
}

Value Exchanges::recv(Location loc, Type type, Axis axis, int64_t source) {
  auto tensorType = cast<RankedTensorType>(type);
  Value buffer = tensor::EmptyOp::create(b, loc, tensorType.getShape(),
                                         tensorType.getElementType());
  return shard::RecvOp::create(b, loc, type, grid(),
                               b.getDenseI16ArrayAttr(liveAxes({axis})),
                               buffer, b.getDenseI64ArrayAttr({source}),
                               ValueRange());
}

Value Exchanges::broadcast(Location loc, Value value, Axis axis,
                           int64_t root) {
  if (size(axis) == 1)
    return value;
  return shard::BroadcastOp::create(
      b, loc, value.getType(), grid(), b.getDenseI16ArrayAttr(liveAxes({axis})),
      value, b.getDenseI64ArrayAttr({root}), ValueRange());
}
