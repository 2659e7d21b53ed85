//===- Reverse.cpp - the reverse sweep over a block -----------------------===//

#include "passes/Autodiff/Reverse.h"
#include "passes/Autodiff/Rules.h"
#include "passes/Autodiff/Stages.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::moe::autodiff {

bool isFloatTensor(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && isa<FloatType>(type.getElementType());
}

/// A send or recv of floats between pipeline stages: the other stage waits
/// for its backward whether or not a gradient flows through it here.
static bool isStageExchange(Operation *op) {
  return isa<shard::SendOp, shard::RecvOp>(op) &&
         isFloatTensor(op->getOperand(0));
}

static bool hasStageExchange(Operation *op) {
  return op->walk([](Operation *inner) {
           return isStageExchange(inner) ? WalkResult::interrupt()
                                         : WalkResult::advance();
         }).wasInterrupted();
}

void ReverseSweep::accumulate(Value value, Value cotangent) {
  Value &slot = cotangents[value];
  if (!slot) {
    slot = cotangent;
    return;
  }
  Emitter e(builder, value.getLoc());
  slot = e.add(slot, cotangent);
}

LogicalResult ReverseSweep::sweep(Block &block, AxisSet deferred) {
  SmallVector<Operation *> ops;
  for (Operation &op : block.without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops))
    if (failed(visit(op, deferred)))
      return failure();
  return success();
}

LogicalResult ReverseSweep::visit(Operation *op, AxisSet deferred) {
  if (isa<arith::ConstantOp>(op))
    return success();
  SmallVector<Value> dResults;
  bool any = false;
  for (Value result : op->getResults()) {
    Value cotangent =
        active.contains(result) ? cotangents.lookup(result) : Value();
    any |= static_cast<bool>(cotangent);
    dResults.push_back(cotangent);
  }
  Emitter e(builder, op->getLoc());
  if (auto stages = dyn_cast<scf::IndexSwitchOp>(op)) {
    if (!any && !hasStageExchange(op))
      return success();
    return stageSwitch(op, dResults, deferred);
  }
  bool forced = isStageExchange(op);
  // Ops before the parameters (a weight's slicing) need no rule.
  if (!forced && (!any || llvm::none_of(op->getOperands(), [&](Value v) {
                    return active.contains(v);
                  })))
    return success();
  if (forced)
    for (auto [result, cotangent] : llvm::zip(op->getResults(), dResults))
      if (!cotangent)
        cotangent = e.splat(tensorType(result), 0.0);

  SmallVector<Value> dOperands(op->getNumOperands());
  Dialect *dialect = op->getDialect();
  std::optional<spmd::Exchanges> exchanges;
  if (plan)
    exchanges.emplace(builder, plan);
  LogicalResult built = failure();
  if (isa<shard::ShardDialect>(dialect)) {
    if (!exchanges)
      return op->emitError("moe-autodiff: an exchange in a module without "
                           "a plan ('")
             << spmd::kPlanAttrName << "')";
    built = buildShardVJP(e, *exchanges, op, dResults, dOperands);
  } else if (isa<onnx::ONNXDialect>(dialect)) {
    built = buildOnnxVJP(e, op, dResults, dOperands);
  } else if (isa<MoEDialect>(dialect)) {
    built = buildMoEVJP(e, exchanges ? &*exchanges : nullptr, op, dResults,
                        dOperands);
  } else {
    built = buildUpstreamVJP(e, op, dResults, dOperands);
  }
  if (failed(built))
    return failure();
  for (auto [operand, cotangent] : llvm::zip(op->getOperands(), dOperands)) {
    if (!cotangent || !active.contains(operand))
      continue;
    // Ranks that used `operand` alike each hold a part of its cotangent.
    AxisSet extra = replication.usedAs(op, operand) &
                    ~replication.of(operand) & ~deferred;
    if (extra)
      cotangent =
          exchanges->allReduceSum(op->getLoc(), cotangent, axesOf(extra));
    accumulate(operand, cotangent);
  }
  return success();
}

/// Whether `value` is defined within `op`'s regions.
static bool definedInside(Value value, Operation *op) {
  Operation *owner = value.getDefiningOp();
  if (!owner)
    owner = cast<BlockArgument>(value).getOwner()->getParentOp();
  return op->isProperAncestor(owner) ||
         (owner == op && isa<BlockArgument>(value));
}

LogicalResult ReverseSweep::stageSwitch(Operation *op,
                                        ArrayRef<Value> dResults,
                                        AxisSet deferred) {
  auto stages = cast<scf::IndexSwitchOp>(op);
  Location loc = op->getLoc();
  // The active values the cases read from outside.
  llvm::SetVector<Value> captured;
  op->walk([&](Operation *inner) {
    for (Value operand : inner->getOperands())
      if (active.contains(operand) && !definedInside(operand, op))
        captured.insert(operand);
  });
  SmallVector<Type> types;
  for (Value value : captured)
    types.push_back(value.getType());
  auto backward = scf::IndexSwitchOp::create(
      builder, loc, types, stages.getArg(), stages.getCases(),
      stages.getNumCases());
  // moe-pipeline-schedule splits the step here into its forward and its
  // backward halves.
  backward->setAttr(kStagesBackwardAttr, builder.getUnitAttr());
  // The sums over the stage axis wait until every rank is out of the switch.
  AxisSet stageAxes = replication.of(stages.getArg());
  for (unsigned i = 0, e = stages.getNumRegions(); i < e; ++i) {
    Region &from = op->getRegion(i);
    Block *to = builder.createBlock(&backward->getRegion(i));
    OpBuilder inner = OpBuilder::atBlockEnd(to);
    ReverseSweep nested(inner, replication, active, plan);
    auto yield = cast<scf::YieldOp>(from.front().getTerminator());
    for (auto [value, cotangent] : llvm::zip(yield.getOperands(), dResults))
      if (cotangent && active.contains(value))
        nested.accumulate(value, cotangent);
    if (failed(nested.sweep(from.front(), deferred | stageAxes)))
      return failure();
    SmallVector<Value> outs;
    Emitter zeros(inner, loc);
    for (Value value : captured) {
      Value cotangent = nested.cotangentOf(value);
      outs.push_back(cotangent ? cotangent
                               : zeros.splat(tensorType(value), 0.0));
    }
    scf::YieldOp::create(inner, loc, outs);
  }
  // What the backward reads of the forward's cases, yielded by the forward
  // switch (the activations each stage keeps for its backward).
  llvm::SetVector<Value> kept;
  backward->walk([&](Operation *inner) {
    for (Value operand : inner->getOperands())
      if (definedInside(operand, op))
        kept.insert(operand);
  });
  SmallVector<Value> keptList = kept.takeVector();
  SmallVector<Value> results =
      yieldFromStages(stages, keptList, /*zeros=*/false);
  for (auto [value, result] : llvm::zip(keptList, results))
    value.replaceUsesWithIf(result, [&](OpOperand &use) {
      return backward->isProperAncestor(use.getOwner());
    });
  builder.setInsertionPointAfter(backward);
  std::optional<spmd::Exchanges> exchanges;
  if (plan)
    exchanges.emplace(builder, plan);
  // Sums over the other axes happened in the cases.
  for (auto [value, cotangent] : llvm::zip(captured, backward.getResults())) {
    Value sum = cotangent;
    if (AxisSet extra = stageAxes & ~replication.of(value) & ~deferred)
      sum = exchanges->allReduceSum(loc, sum, axesOf(extra));
    accumulate(value, sum);
  }
  return success();
}

} // namespace mlir::moe::autodiff
