//===- EinsumParts.h - pieces of the einsum MoE forms ------------*- C++ -*-===//
//
// What the einsum forms of an MoE block with capacity (GShard, Switch,
// Mesh-TensorFlow; DeepSpeed's and fairseq's top-2 gating) are made of:
// their contractions read whatever order an equation lists its operands
// in, one-hot masks and positions through the casts exporters insert, and
// the experts as einsums over stacked weights.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_PASSES_RAISE_EINSUMPARTS_H
#define MOE_PASSES_RAISE_EINSUMPARTS_H

#include "passes/Raise/Matchers.h"

#include <optional>

namespace mlir::moe::raise {

/// The single finite number `value` folds to.
std::optional<double> foldNumber(Value value);
/// The single integer `value` folds to.
std::optional<int64_t> foldInteger(Value value);

/// The axes of a Reduce or Unsqueeze: its `axesInput`-th input (opset 13+
/// Unsqueeze, 18+ Reduce) or its `axes` attribute (earlier opsets).
std::optional<SmallVector<int64_t>> axesOf(Operation *op, unsigned axesInput);
/// `shape` after Unsqueeze with `axes`, or none for invalid axes.
std::optional<SmallVector<int64_t>> unsqueezeShape(ArrayRef<int64_t> shape,
                                                   ArrayRef<int64_t> axes);

// The block's contractions: t tokens, e experts, c capacity slots, h the
// model width.
inline constexpr StringLiteral kDispatch = "tec,th->ech";
inline constexpr StringLiteral kCombine = "tec,ech->th";

/// The two operands of `einsum` in the order of `pattern` (the same
/// contraction with the letters renamed one to one), whichever order its
/// equation lists them in.
std::optional<std::pair<Value, Value>> einsumOperands(onnx::EinsumOp einsum,
                                                      StringRef pattern);

/// Whether every integer of magnitude up to `bound` survives a cast to
/// `type` (masks and token counts change type freely in exports).
bool keepsIntegers(Type type, int64_t bound);
/// `value` with the casts that keep integers up to `bound` looked through.
Value skipExactCasts(Value value, int64_t bound);

/// The shift that makes a cumsum over the tokens (axis 0 of [T, E], not
/// reversed) of a one-hot mask zero-based where the mask is 1: -1 for an
/// inclusive sum, which counts the token itself; none for another cumsum.
std::optional<int64_t> tokenCumsumShift(onnx::CumSumOp cumsum);

/// `one_hot(indices, depth)` along a new last axis with values 0 and 1:
/// onnx.OneHot, or `Equal(Unsqueeze(indices, -1), [0, 1, ..., depth-1])`
/// (torch's decomposition, which the dynamo exporter writes). `mask` is the
/// one-hot itself (the OneHot's or the Equal's result), which the casts
/// around it lead back to.
struct OneHot {
  Value mask, indices;
  int64_t depth;
};
std::optional<OneHot> matchOneHot(Value value);

/// One projection of all experts, `einsum(rows, W)` with W a constant
/// [E, out, in], or [E, in, out] when `transposed`.
struct Projection {
  Value rows;
  arith::ConstantOp weight;
  bool transposed = false;

  /// W's shape as [E, out, in].
  SmallVector<int64_t> shape() const;
};

/// The experts on the dispatched rows: `act(xe W1) [* (xe W3)] W2`.
struct EinsumExperts {
  Value rows; // [E, C, H]
  Projection fc1, fc2;
  std::optional<Projection> fc3;
  ActivationKind activation;
  ActivationAttr custom; // the activation when no kind names it
};

/// The experts whose output is `output`: relu, silu, none or a custom
/// activation (written into the module, reasons on `anchor`), gated or not.
std::optional<EinsumExperts> matchExperts(Value output, Operation *anchor,
                                          PatternRewriter &rewriter);

/// The experts and the dispatch of a block whose combine einsum reads
/// `expertOutputs`: `expertOutputs = experts(einsum('tec,th->ech', mask,
/// tokens))`.
struct EinsumBlock {
  EinsumExperts experts;
  onnx::EinsumOp dispatch;
  Value mask, tokens;
};
FailureOr<EinsumBlock> matchEinsumBlock(Value expertOutputs,
                                        onnx::EinsumOp combine,
                                        PatternRewriter &rewriter);

/// A projection's weight as moe.layer takes it, [E, out, in]: the constant
/// itself, or a transposed copy of an [E, in, out] one.
FailureOr<Value> layerWeight(const Projection &projection, StringRef name,
                             Location loc, PatternRewriter &rewriter);

/// ONNX's TensorProto code for a float element type (the `to` of Cast).
std::optional<int64_t> onnxTypeCode(Type type);

/// The layer's expert weights and activation from `experts`, checked to fit
/// tokens `x` [T, H] and E experts; the output width M in `width`.
LogicalResult setExpertWeights(LayerSpec &spec, const EinsumExperts &experts,
                               Value x, int64_t numExperts, int64_t &width,
                               Location loc, PatternRewriter &rewriter);

/// Replaces the block's output `output` (the combine einsum's result) by
/// the moe.layer of `spec` of width `width`, if the check on sample tokens
/// agrees (and ran, with `requireCheck`); fails with the layer erased.
LogicalResult replaceCombine(onnx::EinsumOp combine, const LayerSpec &spec,
                             int64_t width, PatternRewriter &rewriter);

} // namespace mlir::moe::raise

#endif // MOE_PASSES_RAISE_EINSUMPARTS_H
