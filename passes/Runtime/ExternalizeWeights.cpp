//===- ExternalizeWeights.cpp - weights out of the code, split per rank ---===//
//
// A model's weights are most of its bytes. Compiled as constants they would
// be copied whole into every rank's code and sliced at run time; instead
// each weight (a float constant, possibly narrowed by a chain of
// shard.all_slice ops) becomes a `memref.global` of its local shape,
// uninitialized in the code. The global records where its data comes from:
//
//   moe.weight_source: the whole constant
//   moe.weight_slices: [{axes, dim}, ...] the all_slice steps, in order
//   moe.weight_grid:   the grid shape that gives each rank its coordinates
//
// A weight read through moe.slot_weights is laid out by slot: its global
// also records the slots' initial experts (moe.weight_slot_table) and, when
// the runtime owns the table, its layer (moe.weight_slot_layer); each
// moe.slot_table becomes the global moe_slot_table_<layer> (i32, its source
// the initial table), which the runtime rewrites when it re-places experts.
//
// moe-compile packs every rank's piece from these (and drops the source);
// moe-run copies its rank's pieces into the globals before the first call.
//
//===----------------------------------------------------------------------===//

#include "passes/Parallel/ShardLayer.h"
#include "passes/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEEXTERNALIZEWEIGHTSPASS
#include "passes/Passes.h.inc"

namespace {

struct MoEExternalizeWeightsPass
    : public impl::MoEExternalizeWeightsPassBase<MoEExternalizeWeightsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<arith::ConstantOp> weights;
    module.walk([&](arith::ConstantOp op) {
      auto value = dyn_cast<ElementsAttr>(op.getValue());
      if (value && isa<FloatType>(value.getElementType()) &&
          !value.isSplat() && value.getNumElements() >= minElements)
        weights.push_back(op);
    });
    MLIRContext *ctx = module.getContext();
    OpBuilder b(ctx);
    int64_t next = 0;
    for (arith::ConstantOp weight : weights) {
      auto value = cast<ElementsAttr>(weight.getValue());
      // Uses through moe.slot_weights are those of its result.
      SmallVector<std::pair<OpOperand *, SlotWeightsOp>> uses;
      SmallVector<SlotWeightsOp> bySlot;
      for (OpOperand &use : weight->getUses()) {
        auto slots = dyn_cast<SlotWeightsOp>(use.getOwner());
        if (!slots || use.getOperandNumber() != 0) {
          uses.push_back({&use, nullptr});
          continue;
        }
        bySlot.push_back(slots);
        for (OpOperand &slotUse : slots->getUses())
          uses.push_back({&slotUse, slots});
      }
      for (auto [use, slots] : uses) {
        spmd::WeightSlices chain = spmd::followWeightSlices(*use);
        auto localType = cast<RankedTensorType>(chain.local.getType());
        SmallVector<Attribute> steps;
        ArrayRef<int64_t> gridShape;
        for (Operation *op : chain.steps) {
          auto step = cast<shard::AllSliceOp>(op);
          auto grid = symbols.lookup<shard::GridOp>(step.getGrid());
          if (!grid) {
            step.emitOpError("slices over an undeclared grid");
            return signalPassFailure();
          }
          gridShape = grid.getShape();
          steps.push_back(DictionaryAttr::get(
              ctx, {b.getNamedAttr("axes", step.getGridAxesAttr()),
                    b.getNamedAttr("dim", step.getSliceAxisAttr())}));
        }

        b.setInsertionPointToStart(module.getBody());
        auto memrefType = MemRefType::get(localType.getShape(),
                                          localType.getElementType());
        std::string name = "moe_weight_" + std::to_string(next++);
        auto global = memref::GlobalOp::create(
            b, weight.getLoc(), name, /*sym_visibility=*/nullptr, memrefType,
            b.getUnitAttr(), /*constant=*/false, b.getI64IntegerAttr(64));
        global->setAttr("moe.weight_source", value);
        global->setAttr("moe.weight_slices", b.getArrayAttr(steps));
        if (!steps.empty())
          global->setAttr("moe.weight_grid", b.getDenseI64ArrayAttr(gridShape));
        if (slots && failed(recordSlots(global, slots)))
          return signalPassFailure();
        symbols.insert(global);

        Operation *at =
            chain.steps.empty() ? use->getOwner() : chain.steps.back();
        b.setInsertionPoint(at);
        Value buffer = memref::GetGlobalOp::create(b, weight.getLoc(),
                                                   memrefType,
                                                   global.getSymName());
        // Read-only: bufferization copies before anything writes to it.
        Value local = bufferization::ToTensorOp::create(
            b, weight.getLoc(), localType, buffer, /*restrict=*/true);
        if (chain.steps.empty()) {
          use->set(local);
          continue;
        }
        chain.local.replaceAllUsesWith(local);
        for (Operation *step : llvm::reverse(chain.steps))
          step->erase();
      }
      for (SlotWeightsOp slots : bySlot)
        slots.erase();
      weight.erase();
    }
    module.walk([&](SlotTableOp table) { externalizeTable(table, symbols); });
  }

  /// Where the slots of a slot-laid weight start: the table's initial
  /// experts, and its layer when the runtime owns it.
  LogicalResult recordSlots(memref::GlobalOp global, SlotWeightsOp slots) {
    Builder b(global.getContext());
    if (auto table = slots.getTable().getDefiningOp<SlotTableOp>()) {
      global->setAttr("moe.weight_slot_table", table.getInitialAttr());
      global->setAttr("moe.weight_slot_layer", table.getLayerAttr());
      return success();
    }
    DenseIntElementsAttr fixed;
    if (!matchPattern(slots.getTable(), m_Constant(&fixed)))
      return slots.emitOpError("reads a weight through a slot table that is "
                               "neither a constant nor moe.slot_table");
    global->setAttr("moe.weight_slot_table",
                    b.getDenseI32ArrayAttr(llvm::to_vector(llvm::map_range(
                        fixed.getValues<APInt>(), [](const APInt &v) {
                          return static_cast<int32_t>(v.getSExtValue());
                        }))));
    return success();
  }

  /// The runtime's table of the layer: one global per layer, shared by
  /// every op that reads it.
  void externalizeTable(SlotTableOp table, SymbolTable &symbols) {
    OpBuilder b(table.getContext());
    RankedTensorType type = table.getTable().getType();
    auto memrefType = MemRefType::get(type.getShape(), type.getElementType());
    std::string name = "moe_slot_table_" + std::to_string(table.getLayer());
    if (!symbols.lookup(name)) {
      b.setInsertionPointToStart(getOperation().getBody());
      auto global = memref::GlobalOp::create(
          b, table.getLoc(), name, /*sym_visibility=*/nullptr, memrefType,
          b.getUnitAttr(), /*constant=*/false, b.getI64IntegerAttr(64));
      global->setAttr("moe.weight_source",
                      DenseElementsAttr::get(type, table.getInitial()));
      global->setAttr("moe.slot_table",
                      b.getDictionaryAttr(
                          {b.getNamedAttr("layer", table.getLayerAttr()),
                           b.getNamedAttr("experts", table.getExpertsAttr())}));
      symbols.insert(global);
    }
    b.setInsertionPoint(table);
    Value buffer = memref::GetGlobalOp::create(b, table.getLoc(), memrefType,
                                               name);
    table.replaceAllUsesWith(bufferization::ToTensorOp::create(
        b, table.getLoc(), type, buffer, /*restrict=*/true)
                                 .getResult());
    table.erase();
  }
};

} // namespace
} // namespace mlir::moe
