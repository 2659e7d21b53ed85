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
// moe-compile packs every rank's piece from these (and drops the source);
// moe-run copies its rank's pieces into the globals before the first call.
//
//===----------------------------------------------------------------------===//

#include "passes/Parallel/ShardLayer.h"
#include "passes/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
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
      SmallVector<OpOperand *> uses = llvm::to_vector(llvm::map_range(
          weight->getUses(), [](OpOperand &use) { return &use; }));
      for (OpOperand *use : uses) {
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
      weight.erase();
    }
  }
};

} // namespace
} // namespace mlir::moe
