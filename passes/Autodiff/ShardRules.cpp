//===- ShardRules.cpp - vector-Jacobian products of exchanges -------------===//
//
// The backward of each shard exchange a partitioned program holds
// (moe-training.md section 6). Cotangents agree across ranks exactly where
// their values do (Replication.h), so an all_gather, whose result agrees
// along its axes, gets a cotangent that agrees too and takes back its own
// block; an all_reduce passes its cotangent on unchanged; an all_slice's
// blocks come back together by an all_gather. moe.all_to_all is in
// MoERules.cpp: the reverse exchange with the forward's received counts.
//
//===----------------------------------------------------------------------===//

#include "passes/Autodiff/Rules.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::moe::autodiff {

static SmallVector<spmd::Axis> axesIn(ArrayRef<int16_t> gridAxes) {
  return llvm::to_vector(llvm::map_range(
      gridAxes, [](int16_t axis) { return static_cast<spmd::Axis>(axis); }));
}

LogicalResult buildShardVJP(Emitter &e, spmd::Exchanges &x, Operation *op,
                            ArrayRef<Value> dResults,
                            MutableArrayRef<Value> d) {
  Value g = dResults[0];
  Location loc = e.getLoc();
  auto unsupported = [&](const Twine &why) -> LogicalResult {
    return op->emitError("moe-autodiff: no gradient rule for '")
           << op->getName() << "': " << why;
  };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](shard::AllSliceOp slice) {
        d[0] = x.gather(loc, g, axesIn(slice.getGridAxes()),
                        slice.getSliceAxis().getSExtValue());
        return success();
      })
      .Case([&](shard::AllGatherOp gather) {
        d[0] = x.slice(loc, g, axesIn(gather.getGridAxes()),
                       gather.getGatherAxis().getSExtValue());
        return success();
      })
      .Case([&](shard::AllReduceOp reduce) -> LogicalResult {
        if (reduce.getReduction() != shard::ReductionKind::Sum)
          return unsupported("only sums are differentiated");
        d[0] = g;
        return success();
      })
      .Case([&](shard::ReduceScatterOp scatter) -> LogicalResult {
        if (scatter.getReduction() != shard::ReductionKind::Sum)
          return unsupported("only sums are differentiated");
        d[0] = x.gather(loc, g, axesIn(scatter.getGridAxes()),
                        scatter.getScatterAxis().getSExtValue());
        return success();
      })
      .Case([&](shard::AllToAllOp exchange) -> LogicalResult {
        // Blocks along one dimension: the exchange is its own transpose.
        if (exchange.getSplitAxis() != 0 || exchange.getConcatAxis() != 0)
          return unsupported("only exchanges of blocks along dimension 0");
        d[0] = x.allToAll(loc, g, axesIn(exchange.getGridAxes()));
        return success();
      })
      .Case<shard::SendOp, shard::RecvOp, shard::BroadcastOp>([&](Operation *) {
        return unsupported("training with pipeline stages (pp > 1) is not "
                           "supported yet");
      })
      .Default([&](Operation *) { return unsupported("not an exchange"); });
}

} // namespace mlir::moe::autodiff
