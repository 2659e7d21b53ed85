//===- Matchers.h - recognising MoE pieces in onnx programs -----*- C++ -*-===//
//
// Internal to passes/Raise: the matchers that the raising patterns share. An
// MoE block as an exporter writes it has three parts that every form shares
// (a router, per-expert FFNs with constant weights, and the tensor that the
// block's tokens came from); the patterns differ in how tokens reach the
// experts and how results are summed.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_PASSES_RAISE_MATCHERS_H
#define MOE_PASSES_RAISE_MATCHERS_H

#include "dialects/moe/IR/MoEOps.h"
#include "dialects/onnx/IR/ONNXDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/PatternMatch.h"

#include <optional>

namespace mlir::moe::raise {

/// `value` with value-preserving ops looked through: onnx.Identity and
/// onnx.Cast to the element type it already has.
Value skipNoOps(Value value);
/// `value` with no-ops and casts between float types looked through.
Value skipFloatCasts(Value value);

/// The op defining `value` (after skipNoOps) if it is an `OpT`.
template <typename OpT>
OpT definedBy(Value value) {
  return skipNoOps(value).getDefiningOp<OpT>();
}

/// `value` with Unsqueeze, Squeeze, Reshape and Expand to the same shape
/// looked through: each keeps the row-major order of the elements.
Value skipReshapes(Value value);

/// Whether `op`'s integer attribute `name` (`otherwise` when absent) is
/// `want`.
bool hasIntAttr(Operation *op, StringRef name, int64_t otherwise,
                int64_t want);

/// The integer contents of a constant tensor (splats expanded).
std::optional<SmallVector<int64_t>> constantInts(Value value);
/// The single integer of a constant with one element, or of one computed
/// from constants and static extents.
std::optional<int64_t> constantInt(Value value);
/// The single float of a constant with one element.
std::optional<double> constantFloat(Value value);
/// Whether `value` is a constant whose elements are all zero.
bool isZeroConstant(Value value);
/// The constant op defining `value`, if it is a constant tensor.
arith::ConstantOp constantOp(Value value);

/// Whether `value` is computed from `root` (through any ops, `depth` ops
/// deep at most).
bool dependsOn(Value value, Value root, unsigned depth = 24);

/// Whether `value` is elements of `root` moved without arithmetic: `root`
/// through reshapes, transposes, casts, slices, expansions and gathers of
/// its data (the routing weights a per-expert loop picks for its rows).
/// Unlike dependsOn, a weight computed from `root` (rescaled, offset) is
/// not `root`.
bool movedFrom(Value value, Value root, unsigned depth = 24);

/// The value that sums exactly `terms` (each once) through a chain of
/// onnx.Add starting from zeros; null if there is none. Uses that only read
/// a value's shape are ignored.
Value matchSumOf(ArrayRef<Value> terms);

/// The router of a token-choice block: scores from logits, a top-k, and the
/// combine weights made from the chosen scores.
struct RouterMatch {
  onnx::TopKOp topk;
  Value logits;          // [T, E]
  ScoringFunction scoring = ScoringFunction::Softmax;
  int64_t k = 0;
  int64_t numExperts = 0;
  bool normalize = false;
  double scalingFactor = 1.0;
  arith::ConstantOp bias;  // the selection bias, if any
  std::optional<int64_t> numGroups, groupTopk;
  std::optional<GroupScore> groupScore;
  std::optional<double> maskedScore;
  /// Phi-3.5-MoE's sparse mixer, with its jitter epsilon.
  std::optional<double> sparseMixerEps;
  /// A router no selection names: the ids and weights the program
  /// computes are taken as they are (`given`).
  bool given = false;
  Value indices;         // [T, k] expert ids (i64)
  Value weights;         // [T, k] the final combine weights
};

/// Matches `topk` as Softmax(l) -> TopK -> [Div by ReduceSum] -> weights.
FailureOr<RouterMatch> matchSoftmaxTopK(onnx::TopKOp topk,
                                        PatternRewriter &rewriter);

/// Matches DeepSeek-V3's router as Hugging Face exports it: sigmoid scores
/// s, a selection bias, optional group-limited selection (groups scored by
/// the sum of their top 2 or their max; the others masked with a constant),
/// TopK, weights = GatherElements(s, ids) [/ (sum + eps)] [* scale].
FailureOr<RouterMatch> matchSigmoidTopK(onnx::TopKOp topk,
                                        PatternRewriter &rewriter);

/// Matches GPT-OSS's router: TopK over the logits, then Softmax over the k
/// chosen logits, which is the softmax over all experts renormalised over
/// the chosen ones.
FailureOr<RouterMatch> matchTopKSoftmax(onnx::TopKOp topk,
                                        PatternRewriter &rewriter);

/// Matches Phi-3.5-MoE's inference sparse mixer on logits l, whose ids
/// `ids = Concat(ArgMax(l), ArgMax(l with the first masked to -inf))` a
/// sort reads: each weight is the chosen logit's softmax over the logits
/// within 2 * eps (relative) of it.
FailureOr<RouterMatch> matchSparseMixer(Value ids, Operation *anchor,
                                        PatternRewriter &rewriter);

/// A router of no named form, by its structure alone: logits `x @ W`
/// [T, E] upstream of `topk`, its indices as the ids, and as the weights
/// the one [T, k] float value computed from the top k that leaves the
/// routing ops (the raised block is checked against the original ops, so a
/// wrong pick is refused, never compiled).
FailureOr<RouterMatch> matchGivenRouter(onnx::TopKOp topk,
                                        PatternRewriter &rewriter);

/// Any router form; the named ones first, then `given`.
FailureOr<RouterMatch> matchRouter(onnx::TopKOp topk,
                                   PatternRewriter &rewriter);

/// The token rows `x [T, H]` that `logits` are computed from: `x @ W` or
/// `Gemm(x, W [, b])` (nn.Linear, with or without a bias).
Value matchRouterInput(Value logits);

/// One expert FFN as an exporter writes it with MatMuls on constant weights
/// in the `[in, out]` layout of `x @ W` (nn.Linear exports its weight
/// transposed).
struct FFNMatch {
  Value input;                 // the rows the FFN runs on
  Value output;                // its result
  arith::ConstantOp fc1, fc3, fc2;  // fc3 only for a gated FFN
  bool outIn = false;  // fc1, fc3, fc2 are [out, in] (Gemm with transB)
  ActivationKind activation;
  ActivationAttr custom; // the activation when no kind names it
  // Experts stored as fused 3-D parameters `[E, out, in]` (transformers 5's
  // `gate_up_proj`, `down_proj`) and indexed by `expertIndex`.
  arith::ConstantOp stackedFc1, stackedFc3, stackedFc2;  // fc3: separate halves
  arith::ConstantOp stackedFc1Bias, stackedFc2Bias;  // [E, out], if any
  // Which weights are [E, in, out] (GPT-OSS's, DBRX's w2), not [E, out, in].
  bool stackedFc1InOut = false, stackedFc2InOut = false;
  Value expertIndex;
  std::optional<ActivationAttr> fusedActivation;
};

/// Matches the FFN that produces `output`: `act(x W1) [* (x W3)] W2`, with
/// act silu (Mul(z, Sigmoid(z))), relu, or any chain of elementwise ops
/// (a custom activation, written into the module as its body).
FailureOr<FFNMatch> matchFFN(Value output, PatternRewriter &rewriter);

/// Matches the FFN of one expert of fused 3-D parameters:
/// `swiglu(x @ W1[e].T [+ b1[e]]) @ W2[e].T [+ b2[e]]` with W1 holding both
/// SwiGLU halves, or `silu(x @ W1[e].T) * (x @ W3[e].T)` (DBRX); any weight
/// may be `[E, in, out]` instead, used untransposed.
FailureOr<FFNMatch> matchIndexedFFN(Value output, PatternRewriter &rewriter);

/// The experts' weights for moe.layer: the per-expert `[in, out]` constants
/// transposed to `[out, in]` and stacked into one `[E, out, in]` constant.
FailureOr<Value> stackExpertWeights(ArrayRef<arith::ConstantOp> perExpert,
                                    StringRef name, Location loc,
                                    PatternRewriter &rewriter);

/// A constant with the same elements and another shape.
FailureOr<Value> reshapeConstant(arith::ConstantOp constant,
                                 ArrayRef<int64_t> shape, StringRef name,
                                 Location loc, PatternRewriter &rewriter);

/// One `[in, out]` weight constant transposed to `[out, in]`.
FailureOr<Value> transposeWeight(arith::ConstantOp weight, StringRef name,
                                 Location loc, PatternRewriter &rewriter);

/// 2-D weights with the same columns stacked row-wise into one.
FailureOr<Value> concatRows(ArrayRef<Value> parts, StringRef name,
                            Location loc, PatternRewriter &rewriter);

/// Discardable unit attribute that moe-raise{keep-weights} puts on the op
/// it runs on while it runs: the weight packing above (stacking, transposing,
/// reshaping, concatenating) then writes onnx ops over the model's own
/// weights instead of folding new constants, so that training updates the
/// weights by their names.
inline constexpr StringLiteral kKeepWeightsAttrName = "moe.keep_weights";

/// Stacked `[E, in, out]` expert weights transposed to `[E, out, in]`.
FailureOr<Value> transposeExpertWeights(arith::ConstantOp weights,
                                        StringRef name, Location loc,
                                        PatternRewriter &rewriter);

/// What a raised block becomes: moe.layer's operands and routing.
struct LayerSpec {
  Value input, logits;
  Value fc1, fc3, fc2;
  Value fc1Bias, fc2Bias;  // [E, out], where the experts have biases
  Value sharedFc1, sharedFc3, sharedFc2, sharedGate;
  Value selectionBias;
  // `given` routing: the program's own [T, k] ids and weights.
  Value routedIds, routedWeights;
  int64_t k;
  ActivationAttr activation;
  ScoringFunction scoring = ScoringFunction::Softmax;
  SelectionMethod selection = SelectionMethod::TopK;
  bool normalize = false;
  double scalingFactor = 1.0;
  std::optional<int64_t> capacity;
  std::optional<DropPolicy> dropPolicy;
  std::optional<int64_t> numGroups, groupTopk;
  std::optional<GroupScore> groupScore;
  std::optional<double> maskedScore;
  std::optional<double> jitterEps;
  // A form read from its structure loosely (as a `given` router is): the
  // block is raised only where the check ran and agreed.
  bool requireCheck = false;
};

/// The routing part of `spec` from a matched router.
void setRouting(LayerSpec &spec, const RouterMatch &router);

/// Sets `spec`'s selection bias from the router's, as an `[E]` constant.
LogicalResult setSelectionBias(LayerSpec &spec, const RouterMatch &router,
                               Location loc, PatternRewriter &rewriter);

/// Replaces `output`, the block's [T, H] result, by the moe.layer of `spec`,
/// made from `spec`'s routing with the selection bias of `router`; fails
/// (reasons on `anchor`) when the layer would not verify or differs in type.
LogicalResult replaceByLayer(LayerSpec spec, const RouterMatch &router,
                             Value output, Operation *anchor,
                             PatternRewriter &rewriter);

/// `value` reshaped to `shape`, as an onnx.Reshape (itself if it has it).
Value reshapeOp(Value value, ArrayRef<int64_t> shape, Location loc,
                PatternRewriter &rewriter);

/// The router logits x @ W [T, E] that `scores` [T, ...] are computed
/// from, through a few ops; null if none is found.
Value findRouterLogits(Value scores);

/// Creates the moe.layer of `spec` with result type `type`.
LayerOp createLayer(PatternRewriter &rewriter, Location loc, Type type,
                    const LayerSpec &spec);

/// The activation of `activated = act(h)` where `h [N, 2F]` holds both
/// halves of a SwiGLU: `silu(h[:, :F]) * h[:, F:]` (Hugging Face's
/// `gate_up_proj`, split or sliced) or GPT-OSS's clamped interleaved form
/// `(clamp(h[:, 1::2], -l, l) + beta) * G * sigmoid(alpha * G)` with
/// `G = min(h[:, ::2], l)`.
std::optional<ActivationAttr> matchFusedSwiGLU(Value activated, Value h);

/// The activation attribute of a matched FFN: a gated silu is a SwiGLU with
/// separate halves.
ActivationAttr activationOf(const FFNMatch &ffn, MLIRContext *context);

} // namespace mlir::moe::raise

#endif // MOE_PASSES_RAISE_MATCHERS_H
