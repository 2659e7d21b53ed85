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

#include "mlir/Dialect/Arith/IR/Arith.h"
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
      // Pipeline stages: a value sent to the next stage gets its cotangent
      // back from it, and a received one sends its cotangent back; the
      // stages run their backward in the reverse order, so the sends and
      // receives pair up as in the forward.
      .Case([&](shard::SendOp send) -> LogicalResult {
        if (send.getGridAxes().size() != 1)
          return unsupported("a send along one grid axis only");
        d[0] = x.recv(loc, send.getInput().getType(),
                      static_cast<spmd::Axis>(send.getGridAxes()[0]),
                      send.getDestination()[0]);
        return success();
      })
      .Case([&](shard::RecvOp recv) -> LogicalResult {
        if (recv.getGridAxes().size() != 1 || !recv.getSource())
          return unsupported("a receive along one grid axis, from a given "
                             "rank, only");
        x.send(loc, g, static_cast<spmd::Axis>(recv.getGridAxes()[0]),
               (*recv.getSource())[0]);
        return success();
      })
      // The root's value, the same on every rank: the root's cotangent is
      // that of the result (the loss counts it once), the others' zero.
      .Case([&](shard::BroadcastOp broadcast) -> LogicalResult {
        if (broadcast.getGridAxes().size() != 1)
          return unsupported("a broadcast along one grid axis only");
        Value index = x.index(
            loc, static_cast<spmd::Axis>(broadcast.getGridAxes()[0]));
        OpBuilder &b = e.builder();
        Value root =
            arith::ConstantIndexOp::create(b, loc, broadcast.getRoot()[0]);
        Value isRoot = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                             index, root);
        d[0] = arith::SelectOp::create(b, loc, isRoot, g,
                                       e.splat(tensorType(g), 0.0));
        return success();
      })
      .Default([&](Operation *) { return unsupported("not an exchange"); });
}

} // namespace mlir::moe::autodiff
