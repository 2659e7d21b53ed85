//===- Stages.cpp - pipeline stages as the backward sees them -------------===//

#include "passes/Autodiff/Stages.h"

#include "passes/Autodiff/Emitter.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::moe::autodiff {

void flattenStages(func::FuncOp func) {
  SymbolTable symbols(func->getParentOfType<ModuleOp>());
  SmallVector<func::CallOp> calls;
  func.walk([&](func::CallOp call) { calls.push_back(call); });
  for (func::CallOp call : calls) {
    auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
    if (!callee || !callee.isPrivate() || callee.isExternal() ||
        !llvm::hasSingleElement(callee.getBody()))
      continue;
    IRMapping mapping;
    mapping.map(callee.getArguments(), call.getOperands());
    OpBuilder b(call);
    Block &body = callee.getBody().front();
    for (Operation &op : body.without_terminator())
      b.clone(op, mapping);
    for (auto [result, returned] :
         llvm::zip(call.getResults(), body.getTerminator()->getOperands()))
      result.replaceAllUsesWith(mapping.lookupOrDefault(returned));
    call.erase();
  }
  Block &entry = func.getBody().front();
  SmallVector<arith::ConstantOp> nested;
  func.walk([&](arith::ConstantOp constant) {
    if (constant->getBlock() != &entry)
      nested.push_back(constant);
  });
  for (arith::ConstantOp constant : nested)
    constant->moveBefore(&entry, entry.begin());
  // A weight's slicing between ranks moves with it: the sliced piece is
  // the parameter that each rank trains (spmd::followWeightSlices).
  bool moved = true;
  while (moved) {
    moved = false;
    func.walk([&](shard::AllSliceOp slice) {
      Operation *source = slice.getInput().getDefiningOp();
      if (slice->getBlock() == &entry || !source ||
          source->getBlock() != &entry)
        return;
      slice->moveAfter(source);
      moved = true;
    });
  }
}

SmallVector<Value> yieldFromStages(scf::IndexSwitchOp &stages,
                                   ArrayRef<Value> inside, bool zeros) {
  Location loc = stages.getLoc();
  SmallVector<Type> types(stages.getResultTypes());
  for (Value value : inside)
    types.push_back(value.getType());
  OpBuilder b(stages);
  auto widened = scf::IndexSwitchOp::create(b, loc, types, stages.getArg(),
                                            stages.getCases(),
                                            stages.getNumCases());
  for (unsigned i = 0, n = stages.getNumRegions(); i < n; ++i) {
    Region &region = widened->getRegion(i);
    region.takeBody(stages->getRegion(i));
    Operation *yield = region.front().getTerminator();
    OpBuilder at(yield);
    Emitter e(at, loc);
    SmallVector<Value> yielded(yield->getOperands());
    for (Value value : inside) {
      auto type = cast<RankedTensorType>(value.getType());
      if (value.getParentRegion() == &region)
        yielded.push_back(value);
      else if (zeros)
        yielded.push_back(e.splat(type, 0.0));
      else
        yielded.push_back(tensor::EmptyOp::create(at, loc, type.getShape(),
                                                  type.getElementType()));
    }
    yield->setOperands(yielded);
  }
  unsigned old = stages.getNumResults();
  stages->replaceAllUsesWith(widened->getResults().take_front(old));
  stages->erase();
  stages = widened;
  return SmallVector<Value>(widened->getResults().drop_front(old));
}

} // namespace mlir::moe::autodiff
