//===- PlaceExperts.cpp - experts on physical slots -----------------------===//
//
// Placement as data: each MoE layer's experts live on P >= E slots whose
// slot -> expert table the runtime owns, so that a new placement (replicas
// of hot experts, experts moved between ranks) needs no new program and no
// new shapes. See MoEPlaceExpertsPass in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/Parallel/ShardLayer.h"

#include "dialects/moe/IR/MoEOps.h"
#include "moe/Planner/Placement.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEPLACEEXPERTSPASS
#include "passes/Passes.h.inc"

namespace {

struct MoEPlaceExpertsPass
    : public impl::MoEPlaceExpertsPassBase<MoEPlaceExpertsPass> {
  using Base::Base;

  LogicalResult place(DispatchOp dispatch, int64_t layer, int64_t ep);

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto plan = module->getAttrOfType<PlanAttr>(spmd::kPlanAttrName);
    if (!plan) {
      module.emitError() << "moe-place-experts: the module has no '"
                         << spmd::kPlanAttrName
                         << "' attribute; run moe-set-plan first";
      return signalPassFailure();
    }
    if (redundantPerRank < 0 || redundantPerRank > (1 << 20)) {
      module.emitError() << "moe-place-experts: redundant-per-rank must be in "
                            "[0, 2^20], not "
                         << static_cast<int64_t>(redundantPerRank);
      return signalPassFailure();
    }
    RewritePatternSet patterns(&getContext());
    populateMoEDecomposePatterns(patterns);
    if (failed(applyPatternsGreedily(module, std::move(patterns))))
      return signalPassFailure();

    // Layer i is the i-th router, as moe-instrument-layers numbers them.
    DenseMap<Operation *, int64_t> layers;
    module.walk([&](RouterOp router) {
      layers.try_emplace(router, static_cast<int64_t>(layers.size()));
    });
    SmallVector<DispatchOp> dispatches;
    module.walk([&](DispatchOp op) { dispatches.push_back(op); });
    for (DispatchOp dispatch : dispatches) {
      auto router = dispatch.getIds().getDefiningOp<RouterOp>();
      if (!router) {
        dispatch.emitError("moe-place-experts: the ids of this dispatch do "
                           "not come from a moe.router");
        return signalPassFailure();
      }
      if (failed(place(dispatch, layers.lookup(router), plan.getEp())))
        return signalPassFailure();
    }
  }
};

LogicalResult MoEPlaceExpertsPass::place(DispatchOp dispatch, int64_t layer,
                                         int64_t ep) {
  if (!dispatch.isDropless())
    return dispatch.emitError(
        "moe-place-experts: placement needs dropless dispatch: with a "
        "capacity, which tokens are dropped would depend on the placement");
  SmallVector<ExpertsOp> experts;
  for (Operation *user : dispatch.getRows().getUsers()) {
    auto op = dyn_cast<ExpertsOp>(user);
    if (!op || op.getCounts() != dispatch.getCounts())
      return dispatch.emitError("moe-place-experts: the rows of this "
                                "dispatch go elsewhere than to moe.experts "
                                "with its counts");
    experts.push_back(op);
  }
  int64_t E = dispatch.getNumExperts();
  if (E % ep != 0)
    return dispatch.emitError("moe-place-experts: ep = ")
           << ep << " does not divide the " << E << " experts";
  // More redundant slots on a rank than the layer has experts only
  // multiply the weights (and, unbounded, exhaust the compiler's memory).
  if (redundantPerRank > E)
    return dispatch.emitError("moe-place-experts: redundant-per-rank ")
           << static_cast<int64_t>(redundantPerRank)
           << " is more than the layer's " << E << " experts";
  int64_t P = E + ep * redundantPerRank;
  if (P > std::numeric_limits<int32_t>::max())
    return dispatch.emitError("moe-place-experts: ")
           << P << " slots do not fit i32 slot ids";
  std::vector<int32_t> initial =
      ::moe::planner::Placement::identity(E, ep, P).slotToExpert();

  OpBuilder b(dispatch);
  Location loc = dispatch.getLoc();
  auto tableType = RankedTensorType::get({P}, b.getI32Type());
  Value table =
      runtime ? Value(SlotTableOp::create(b, loc, tableType, layer, E,
                                          b.getDenseI32ArrayAttr(initial)))
              : Value(arith::ConstantOp::create(
                    b, loc, DenseElementsAttr::get(tableType,
                                                   ArrayRef<int32_t>(initial))));
  Value slots = PlaceOp::create(b, loc, dispatch.getIds().getType(),
                                dispatch.getIds(), table, Value(), 1);
  auto newDispatch = DispatchOp::create(
      b, loc, dispatch.getRows().getType(), dispatch.getSlots().getType(),
      tableType, dispatch.getDropped().getType(), dispatch.getInput(), slots,
      dispatch.getWeights(), dispatch.getOffsets(),
      dispatch.getCapacityAttr(), dispatch.getDropPolicyAttr());
  newDispatch->setDiscardableAttrs(dispatch->getDiscardableAttrDictionary());

  for (ExpertsOp op : experts) {
    b.setInsertionPoint(op);
    auto bySlot = [&](OpOperand &operand) {
      auto type = cast<RankedTensorType>(operand.get().getType());
      SmallVector<int64_t> shape(type.getShape());
      shape[0] = P;
      operand.set(SlotWeightsOp::create(b, op.getLoc(), type.clone(shape),
                                        operand.get(), table));
    };
    bySlot(op.getFc1WeightMutable());
    bySlot(op.getFc2WeightMutable());
    for (OpOperand &operand :
         llvm::concat<OpOperand>(op.getFc1BiasMutable(), op.getFc3WeightMutable(),
                                 op.getFc3BiasMutable(), op.getFc2BiasMutable()))
      bySlot(operand);
    op.getCountsMutable().set(newDispatch.getCounts());
    op->setAttr(kLogicalExpertsAttrName, b.getI64IntegerAttr(E));
  }
  dispatch.replaceAllUsesWith(newDispatch);
  dispatch.erase();
  return success();
}

} // namespace
} // namespace mlir::moe
