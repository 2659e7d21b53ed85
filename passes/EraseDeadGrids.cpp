//===- EraseDeadGrids.cpp - drop shard.grid symbols nothing uses ----------===//

#include "passes/Passes.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEERASEDEADGRIDSPASS
#include "passes/Passes.h.inc"

namespace {

struct MoEEraseDeadGridsPass
    : public impl::MoEEraseDeadGridsPassBase<MoEEraseDeadGridsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto grid :
         llvm::make_early_inc_range(module.getOps<shard::GridOp>()))
      if (SymbolTable::symbolKnownUseEmpty(grid, module))
        grid.erase();
  }
};

} // namespace
} // namespace mlir::moe
