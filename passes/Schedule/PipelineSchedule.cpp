//===- PipelineSchedule.cpp - microbatches through the stages, 1F1B -------===//
//
// moe-autodiff leaves a pipelined training step in four parts: the forward
// (up to the stages' switch), the loss and its backward, the stages'
// backward switch (marked moe.stages_backward), and the gradients' sums
// over the stages. This pass makes the step take M microbatches (each input
// M times as large along its first dimension) and run them through the
// stages in the one-forward-one-backward order of PipeDream-Flush, as
// Megatron schedules them: stage s of P runs min(P - 1 - s, M) forwards,
// then one forward and one backward in turn, then the backwards left.
//
// Each microbatch's loss part runs just before its backward: then every
// exchange between stages that it makes (the last stage's output broadcast
// to all, the routers' statistics of the MoE losses) comes in microbatch
// order on every rank, whatever the stage. The backward's results are
// summed over the microbatches inside the stages, and what follows them
// (linear: the sums over the stages) runs once, on the microbatches' mean.
// The loss is the microbatches' mean too.
//
// A rank's schedule is the case of its stage in an scf.index_switch, with
// each microbatch's parts cloned into it and the stage index a constant
// there, so that canonicalization keeps only the stage's own case of each.
// The schedule relies on sends that do not wait for their receiver
// (moert_send): a stage sends a microbatch's activations on before it
// receives an earlier one's gradients.
//
//===----------------------------------------------------------------------===//

#include "passes/Autodiff/Stages.h"
#include "passes/Passes.h"

#include "dialects/onnx/IR/ONNXDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEPIPELINESCHEDULEPASS
#include "passes/Passes.h.inc"

namespace {

/// One forward or backward of a microbatch, in a stage's order.
struct Item {
  bool forward;
  int64_t microbatch;
};

/// PipeDream-Flush's order for `stage` of `stages` over `microbatches`.
SmallVector<Item> oneForwardOneBackward(int64_t stage, int64_t stages,
                                        int64_t microbatches) {
  int64_t warmup = std::min(stages - 1 - stage, microbatches);
  SmallVector<Item> items;
  for (int64_t i = 0; i < warmup; ++i)
    items.push_back({true, i});
  for (int64_t j = 0; j + warmup < microbatches; ++j) {
    items.push_back({true, warmup + j});
    items.push_back({false, j});
  }
  for (int64_t j = microbatches - warmup; j < microbatches; ++j)
    items.push_back({false, j});
  return items;
}

/// Whether `op`, after the backward switch, is linear in its operands that
/// vary between microbatches: then it may run once on their sum.
bool isLinear(Operation *op) {
  if (auto reduce = dyn_cast<shard::AllReduceOp>(op))
    return reduce.getReduction() == shard::ReductionKind::Sum;
  return isa<shard::AllGatherOp, shard::ReduceScatterOp, shard::AllSliceOp,
             arith::AddFOp, tensor::ExpandShapeOp, tensor::CollapseShapeOp,
             tensor::ExtractSliceOp, tensor::InsertSliceOp, tensor::CastOp,
             onnx::AddOp, onnx::ReshapeOp, onnx::TransposeOp,
             onnx::IdentityOp, onnx::SqueezeOp, onnx::UnsqueezeOp,
             onnx::ConcatOp>(op);
}

/// The parts of the step's body.
struct Parts {
  SmallVector<Operation *> forward, loss, backward, sums;
  /// Values the same for every microbatch (constants, weights, the stage
  /// index): defined once, before the schedule.
  llvm::DenseSet<Value> invariant;
};

struct MoEPipelineSchedulePass
    : public impl::MoEPipelineSchedulePassBase<MoEPipelineSchedulePass> {
  using Base::Base;

  void runOnOperation() override;
  LogicalResult schedule(func::FuncOp step);
};

LogicalResult MoEPipelineSchedulePass::schedule(func::FuncOp step) {
  Block &body = step.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  scf::IndexSwitchOp backward, forward;
  for (Operation &op : body)
    if (op.hasAttr(autodiff::kStagesBackwardAttr))
      backward = cast<scf::IndexSwitchOp>(op);
  if (!backward)
    return step.emitError("moe-pipeline-schedule: the training step has no "
                          "pipeline stages; microbatches without them are "
                          "moe-train --microbatches");
  for (auto op : body.getOps<scf::IndexSwitchOp>())
    if (op != backward && op.getArg() == backward.getArg() &&
        op->isBeforeInBlock(backward)) {
      forward = op;
      break;
    }
  auto stageIndex = backward.getArg().getDefiningOp<shard::ProcessMultiIndexOp>();
  if (!forward || !stageIndex || stageIndex->getNumResults() != 1)
    return backward.emitError("moe-pipeline-schedule: expected the stages' "
                              "forward switch on the same stage index");
  if (ret.getNumOperands() < 2)
    return ret.emitError("moe-pipeline-schedule: expected the step to "
                         "return its loss and aux loss first");
  int64_t stages = forward.getNumCases();
  int64_t m = microbatches;

  // Each op's part, in program order; what depends on no input and has no
  // effect (nor regions) is invariant.
  Parts parts;
  SmallVector<Operation *> *part = &parts.forward;
  for (Operation &op : body.without_terminator()) {
    if (&op == backward.getOperation())
      part = &parts.backward;
    bool invariant = op.getNumRegions() == 0 && isMemoryEffectFree(&op) &&
                     llvm::all_of(op.getOperands(), [&](Value v) {
                       return parts.invariant.contains(v);
                     });
    if (invariant) {
      parts.invariant.insert(op.result_begin(), op.result_end());
    } else {
      part->push_back(&op);
    }
    if (&op == forward.getOperation())
      part = &parts.loss;
    else if (&op == backward.getOperation())
      part = &parts.sums;
  }
  // The stage index, wherever the step reads it: a constant in each case.
  SmallVector<Value> stageValues;
  for (auto index : body.getOps<shard::ProcessMultiIndexOp>())
    if (index.getGrid() == stageIndex.getGrid() &&
        index.getAxes() == stageIndex.getAxes())
      stageValues.push_back(index->getResult(0));

  // What the sums and the returned gradients take from the microbatches:
  // summed over them. The sums must be linear in it.
  llvm::SetVector<Value> summed;
  llvm::DenseSet<Operation *> sumOps(parts.sums.begin(), parts.sums.end());
  auto perMicrobatch = [&](Value v) {
    if (parts.invariant.contains(v) || isa<BlockArgument>(v))
      return false;
    return !sumOps.contains(v.getDefiningOp());
  };
  for (Operation *op : parts.sums) {
    if (!isLinear(op) && llvm::any_of(op->getOperands(), perMicrobatch))
      return op->emitError("moe-pipeline-schedule: '")
             << op->getName()
             << "' after the stages' backward is not linear in the "
                "gradients; they cannot be summed over microbatches first";
    for (Value v : op->getOperands()) {
      if (isa<BlockArgument>(v))
        return op->emitError("moe-pipeline-schedule: the gradients' sums "
                             "read an input of the step");
      if (perMicrobatch(v))
        summed.insert(v);
    }
  }
  for (Value v : ret.getOperands())
    if (perMicrobatch(v))
      summed.insert(v);
  for (Value v : summed)
    if (!isa<FloatType>(getElementTypeOrSelf(v.getType())) ||
        !isa<RankedTensorType>(v.getType()))
      return ret.emitError("moe-pipeline-schedule: a result of the stages' "
                           "backward is not a float tensor: ")
             << v.getType();

  // Inputs M times as large along their first dimension; each microbatch
  // reads its slice.
  SmallVector<RankedTensorType> microTypes;
  for (BlockArgument arg : body.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type || type.getRank() == 0 || type.isDynamicDim(0))
      return step.emitError("moe-pipeline-schedule: input ")
             << arg.getArgNumber() << " (" << arg.getType()
             << ") has no static first dimension to split into microbatches";
    microTypes.push_back(type);
    SmallVector<int64_t> shape(type.getShape());
    shape[0] *= m;
    arg.setType(type.clone(shape));
  }

  Location loc = step.getLoc();
  OpBuilder b(ret);
  auto emitStage = [&](OpBuilder &b, int64_t stage) {
    Value stageConstant = arith::ConstantIndexOp::create(b, loc, stage);
    SmallVector<IRMapping> maps(m);
    SmallVector<Value> sums(summed.size());
    for (Item item : oneForwardOneBackward(stage, stages, m)) {
      IRMapping &map = maps[item.microbatch];
      auto clone = [&](ArrayRef<Operation *> ops) {
        for (Operation *op : ops)
          b.clone(*op, map);
      };
      if (item.forward) {
        for (Value v : stageValues)
          map.map(v, stageConstant);
        for (auto [arg, type] : llvm::zip(body.getArguments(), microTypes)) {
          SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0)),
              sizes, strides(type.getRank(), b.getIndexAttr(1));
          offsets[0] = b.getIndexAttr(item.microbatch * type.getDimSize(0));
          for (int64_t dim : type.getShape())
            sizes.push_back(b.getIndexAttr(dim));
          map.map(arg, tensor::ExtractSliceOp::create(b, loc, type, arg,
                                                      offsets, sizes, strides)
                           .getResult());
        }
        clone(parts.forward);
        continue;
      }
      clone(parts.loss);
      clone(parts.backward);
      for (auto [sum, value] : llvm::zip(sums, summed)) {
        Value next = map.lookup(value);
        sum = sum ? arith::AddFOp::create(b, loc, sum, next).getResult() : next;
      }
    }
    return sums;
  };

  SmallVector<Value> sums;
  if (stages == 1) {
    sums = emitStage(b, 0);
  } else {
    SmallVector<Type> types;
    for (Value v : summed)
      types.push_back(v.getType());
    SmallVector<int64_t> cases = llvm::to_vector(llvm::seq<int64_t>(0, stages - 1));
    auto perStage = scf::IndexSwitchOp::create(b, loc, types, backward.getArg(),
                                               cases, cases.size());
    for (int64_t stage = 0; stage < stages; ++stage) {
      Region &region = stage + 1 < stages ? perStage.getCaseRegions()[stage]
                                          : perStage.getDefaultRegion();
      OpBuilder inner = OpBuilder::atBlockEnd(b.createBlock(&region));
      scf::YieldOp::create(inner, loc, emitStage(inner, stage));
    }
    b.setInsertionPointAfter(perStage);
    sums = SmallVector<Value>(perStage.getResults());
  }

  // The microbatches' mean, then the sums over the stages on it.
  IRMapping after;
  for (auto [value, sum] : llvm::zip(summed, sums)) {
    auto type = cast<RankedTensorType>(sum.getType());
    Value scale = arith::ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(
            type, FloatAttr::get(type.getElementType(), 1.0 / double(m))));
    after.map(value, arith::MulFOp::create(b, loc, sum, scale).getResult());
  }
  for (Operation *op : parts.sums)
    b.clone(*op, after);
  SmallVector<Value> results;
  for (Value v : ret.getOperands())
    results.push_back(after.lookupOrDefault(v));
  func::ReturnOp::create(b, ret.getLoc(), results);
  ret.erase();
  for (SmallVector<Operation *> *ops :
       {&parts.sums, &parts.backward, &parts.loss, &parts.forward})
    for (Operation *op : llvm::reverse(*ops)) {
      op->dropAllUses();
      op->erase();
    }
  step.setFunctionType(FunctionType::get(&getContext(),
                                         body.getArgumentTypes(),
                                         ValueRange(results).getTypes()));
  step->setAttr("moe.microbatches", b.getI64IntegerAttr(m));
  return success();
}

void MoEPipelineSchedulePass::runOnOperation() {
  // The step holds each stage's forward and backward once per microbatch:
  // its code grows with their number.
  constexpr int64_t kMaxMicrobatches = 1024;
  if (microbatches < 1 || microbatches > kMaxMicrobatches) {
    getOperation().emitError("moe-pipeline-schedule: microbatches must be in "
                             "[1, ")
        << kMaxMicrobatches << "], not " << microbatches;
    return signalPassFailure();
  }
  for (auto func : getOperation().getOps<func::FuncOp>()) {
    if (!func->hasAttr("moe.train_step"))
      continue;
    if (microbatches > 1 && failed(schedule(func)))
      return signalPassFailure();
    return;
  }
  getOperation().emitError("moe-pipeline-schedule: no training step (run "
                           "moe-autodiff first)");
  signalPassFailure();
}

} // namespace
} // namespace mlir::moe
