//===- Rules.h - vector-Jacobian products of onnx and moe ops ---*- C++ -*-===//
//
// Internal to passes/Autodiff. One rule per op: given the cotangents of an
// op's results, emit the cotangents of its operands, in the op's dialect
// wherever the math allows (the backward program is readable and lowers
// with the forward). Each rule says in a comment what it keeps from the
// forward and what it recomputes.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_PASSES_AUTODIFF_RULES_H
#define MOE_PASSES_AUTODIFF_RULES_H

#include "passes/Autodiff/Emitter.h"
#include "passes/Parallel/ShardLayer.h"

namespace mlir::moe::autodiff {

/// Sets `dOperands[i]` to the cotangent of operand i of `op` (null where the
/// operand gets none: integer operands, shapes, routing ids) from the
/// cotangents `dResults` of its results (null: zero). The emitter inserts
/// after the op's forward. Fails with an error on `op` for an op without a
/// rule, or a case of one that a rule does not cover.
LogicalResult buildOnnxVJP(Emitter &e, Operation *op, ArrayRef<Value> dResults,
                           MutableArrayRef<Value> dOperands);
/// `x`: the exchanges of a partitioned program (null without a plan), for
/// the slot gradient sum of experts on slots.
LogicalResult buildMoEVJP(Emitter &e, spmd::Exchanges *x, Operation *op,
                          ArrayRef<Value> dResults,
                          MutableArrayRef<Value> dOperands);

/// Ops of upstream dialects: elementwise arith on tensors, reshapes, and
/// the per-rank choice arith.select.
LogicalResult buildUpstreamVJP(Emitter &e, Operation *op,
                               ArrayRef<Value> dResults,
                               MutableArrayRef<Value> dOperands);

/// Exchanges of a partitioned program (shard.all_slice, all_gather,
/// all_reduce, reduce_scatter, all_to_all), built in the backward through
/// `x`.
LogicalResult buildShardVJP(Emitter &e, spmd::Exchanges &x, Operation *op,
                            ArrayRef<Value> dResults,
                            MutableArrayRef<Value> dOperands);

/// The 1-d integer constant operand `value` (ONNX axes, shapes, pads).
std::optional<Shape> constantInts(Value value);

} // namespace mlir::moe::autodiff

#endif // MOE_PASSES_AUTODIFF_RULES_H
