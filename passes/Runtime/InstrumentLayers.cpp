//===- InstrumentLayers.cpp - per-layer statistics from the runtime -------===//
//
// `moe-run --stats` reports, per MoE layer, the tokens routed to each expert,
// the tokens dropped and the time. This pass numbers the layers (the i-th
// router, dispatch and combine of the module belong to layer i) and adds the
// runtime calls that record them. The `moe.replicas` axes that moe-partition
// puts on routers and dispatches name the grid axes over which they hold
// copies of the same data, so that each token is counted once. For CUDA the
// hooks are the runtime's moert_cuda_layer_*, which record on the device.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/Runtime/RuntimeCalls.h"

#include "dialects/moe/IR/MoEOps.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEINSTRUMENTLAYERSPASS
#include "passes/Passes.h.inc"

using namespace runtime;

namespace {

Value replicaAxes(OpBuilder &b, Operation *op) {
  auto axes = op->getAttrOfType<DenseI16ArrayAttr>(kReplicasAttrName);
  return i64Const(b, op->getLoc(), axes ? encodeAxes(axes.asArrayRef()) : 0);
}

struct MoEInstrumentLayersPass
    : public impl::MoEInstrumentLayersPassBase<MoEInstrumentLayersPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (module.walk([](LayerOp) { return WalkResult::interrupt(); })
            .wasInterrupted()) {
      module.emitError("moe-instrument-layers: decompose moe.layer first");
      return signalPassFailure();
    }
    SmallVector<RouterOp> routers;
    SmallVector<DispatchOp> dispatches;
    SmallVector<CombineOp> combines;
    module.walk([&](Operation *op) {
      if (auto router = dyn_cast<RouterOp>(op))
        routers.push_back(router);
      else if (auto dispatch = dyn_cast<DispatchOp>(op))
        dispatches.push_back(dispatch);
      else if (auto combine = dyn_cast<CombineOp>(op);
               combine && !combine->hasAttr(kBackwardAttrName))
        combines.push_back(combine);
    });
    if (routers.size() != dispatches.size() ||
        routers.size() != combines.size()) {
      module.emitError("moe-instrument-layers: ")
          << routers.size() << " routers, " << dispatches.size()
          << " dispatches and " << combines.size()
          << " combines do not pair up into layers";
      return signalPassFailure();
    }
    if (target != "cpu" && target != "cuda") {
      module.emitError("moe-instrument-layers: unknown target '")
          << target << "' (cpu or cuda)";
      return signalPassFailure();
    }
    // The CUDA runtime's hooks count and time on its stream.
    std::string prefix = target == "cuda" ? "moert_cuda_layer_" : "moert_layer_";
    auto hook = [&](StringRef name) { return prefix + name.str(); };
    OpBuilder b(module.getContext());
    for (auto [layer, router] : llvm::enumerate(routers)) {
      Location loc = router.getLoc();
      b.setInsertionPoint(router);
      call(b, loc, hook("begin"), {i64Const(b, loc, layer)});
      b.setInsertionPointAfter(router);
      auto idsType = router.getIds().getType();
      auto logitsType = cast<RankedTensorType>(router.getLogits().getType());
      call(b, loc, hook("tokens"),
           {i64Const(b, loc, layer), readPointer(b, loc, router.getIds()),
            i64Const(b, loc, idsType.getNumElements()),
            i64Const(b, loc, logitsType.getDimSize(1)),
            replicaAxes(b, router)});
    }
    for (auto [layer, dispatch] : llvm::enumerate(dispatches)) {
      Location loc = dispatch.getLoc();
      b.setInsertionPointAfter(dispatch);
      call(b, loc, hook("dropped"),
           {i64Const(b, loc, layer), readPointer(b, loc, dispatch.getDropped()),
            replicaAxes(b, dispatch)});
    }
    for (auto [layer, combine] : llvm::enumerate(combines)) {
      b.setInsertionPointAfter(combine);
      call(b, combine.getLoc(), hook("end"),
           {i64Const(b, combine.getLoc(), layer)});
    }
  }
};

} // namespace
} // namespace mlir::moe
