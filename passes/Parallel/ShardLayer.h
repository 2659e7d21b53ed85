//===- ShardLayer.h - the one place that builds shard dialect IR -*- C++ -*-===//
//
// Upstream's `shard` dialect was renamed from `mesh` in 2025 and still moves,
// so the parallel passes reach it only through this layer: the world grid
// of a plan, and builders for the exchanges over its axes. Exchanges that
// `shard` has no op for (ragged all-to-all, prefix sums) are moe ops built
// here as well, so a pass never cares which dialect an exchange lives in.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_PASSES_PARALLEL_SHARDLAYER_H
#define MOE_PASSES_PARALLEL_SHARDLAYER_H

#include "dialects/moe/IR/MoEOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::moe::spmd {

/// Axes of the world grid, outermost first; the plan's degrees in order.
enum class Axis : int16_t { PP = 0, DP = 1, DPShard = 2, EP = 3, TP = 4 };

/// Short names ("pp", "dp", "dp_shard", "ep", "tp") for messages.
StringRef axisName(int16_t axis);

/// The name of the grid that `moe-partition` creates.
inline constexpr StringLiteral kWorldGrid = "world";

/// The module attribute that carries the plan.
inline constexpr StringLiteral kPlanAttrName = "moe.plan";

/// Marks the shard.all_slice and shard.all_gather ops of an MoE block's
/// tokens (not of its experts, which EP slices over the same axis), so that
/// moe-sequence-parallel can give them another order of the tokens.
inline constexpr StringLiteral kTokensAttrName = "moe.tokens";

/// `value`, its defining exchange marked as one of tokens.
Value markTokens(Value value);

/// Creates `shard.grid @world` for `plan` at the start of `module`.
void createWorldGrid(ModuleOp module, PlanAttr plan);

/// The chain of shard.all_slice ops that narrows a weight from one of its
/// uses: each step slices the previous one and is its only use. `local` is
/// the rank's piece (the used value itself when `use` is not a slice).
/// moe-externalize-weights stores that piece per rank, and moe-autodiff
/// takes it as the parameter, so that the gradient and the stored piece
/// agree.
struct WeightSlices {
  SmallVector<Operation *> steps;
  Value local;
};
WeightSlices followWeightSlices(OpOperand &use);

/// Whether `op` exchanges data between ranks (a shard collective, send,
/// recv, or moe.all_to_all / moe.prefix_sum).
bool isExchange(Operation *op);

/// Builds exchanges over the axes of the world grid. Axes of size 1 are left
/// out of every op, and an exchange over no ranks returns its input.
class Exchanges {
public:
  Exchanges(OpBuilder &builder, PlanAttr plan) : b(builder), planAttr(plan) {}

  PlanAttr plan() const { return planAttr; }
  int64_t size(Axis axis) const;
  int64_t size(ArrayRef<Axis> axes) const;

  /// This rank's index along `axis`.
  Value index(Location loc, Axis axis);

  /// This rank's block of `value` along `dim` (no data moves).
  Value slice(Location loc, Value value, ArrayRef<Axis> axes, int64_t dim);
  /// The blocks of every rank concatenated along `dim`.
  Value gather(Location loc, Value value, ArrayRef<Axis> axes, int64_t dim);
  Value allReduceSum(Location loc, Value value, ArrayRef<Axis> axes);
  /// The sum over ranks, of which each keeps its block along dimension 0.
  Value reduceScatterSum(Location loc, Value value, ArrayRef<Axis> axes);
  /// Uniform all-to-all of the equal blocks along dimension 0.
  Value allToAll(Location loc, Value value, ArrayRef<Axis> axes);
  /// Ragged all-to-all of rows grouped by `counts`; returns the received
  /// rows (`receivedRows` of them at most) and their counts.
  std::pair<Value, Value> raggedAllToAll(Location loc, Value rows,
                                         Value counts, ArrayRef<Axis> axes,
                                         int64_t receivedRows);
  /// Exclusive prefix sum of counts over the ranks of `axes`.
  Value prefixSum(Location loc, Value counts, ArrayRef<Axis> axes);
  /// Point to point along one axis, between ranks that agree on the others.
  void send(Location loc, Value value, Axis axis, int64_t destination);
  Value recv(Location loc, Type type, Axis axis, int64_t source);
  Value broadcast(Location loc, Value value, Axis axis, int64_t root);

  /// The axes of `axes` with more than one rank, as grid axis numbers.
  SmallVector<int16_t> liveAxes(ArrayRef<Axis> axes) const;
  /// The world grid, for ops built outside this class.
  FlatSymbolRefAttr grid();

private:
  OpBuilder &b;
  PlanAttr planAttr;
};

} // namespace mlir::moe::spmd

#endif // MOE_PASSES_PARALLEL_SHARDLAYER_H
