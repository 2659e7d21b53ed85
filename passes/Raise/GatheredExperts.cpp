//===- GatheredExperts.cpp - raise the batched form (weights per pick) ----===//
//
// transformers 5's `batched_mm` experts run every (token, pick) pair p of
// the S = T*k pairs through the weights of its own expert:
//
//   rows = x.repeat_interleave(k, 0)      Unsqueeze(x, 1), Expand/Tile to
//                                         [T, k, H], Reshape to [S, H]
//   ids  = top_k_index.reshape(-1)        the router's ids, flattened
//   h    = bmm(W1[ids], rows[..., None])  GatherND(W1, ids[:, None]), then
//          [+ b1[ids]]                    Unsqueeze/MatMul/Squeeze; W1 is
//                                         [E, out, in], or [E, in, out]
//                                         (GPT-OSS) multiplied from the left
//   a    = act(h)                         a SwiGLU of h's two halves
//   o    = bmm(W2[ids], a[..., None]) [+ b2[ids]]
//   y    = (o * w.reshape(-1)[:, None]).reshape(T, k, H).sum(1)
//
// which is one dropless moe.layer. Pair p is token p / k's pick p % k: the
// repeat is checked by shapes (or, where the rows are gathered by an index,
// by evaluating that index on every pair), and the ids and weights by being
// the router's [T, k] tensors reshaped, which keeps their row-major order.
//
//===----------------------------------------------------------------------===//

#include "passes/Raise/GatheredExperts.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Verifier.h"
#include "passes/Raise/IndexArithmetic.h"
#include "passes/Raise/ElementwiseActivation.h"
#include "passes/Raise/Matchers.h"

namespace mlir::moe::raise {
namespace {

static ArrayRef<int64_t> shapeOf(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type ? type.getShape() : ArrayRef<int64_t>();
}

/// Whether the Unsqueeze or Squeeze `op` inserts or removes exactly the one
/// axis `axis` of a `rank`-D tensor (the rank with that axis).
static bool hasSingleAxis(Operation *op, int64_t axis, int64_t rank) {
  if (op->getNumOperands() < 2)
    return false;
  std::optional<SmallVector<int64_t>> axes = constantInts(op->getOperand(1));
  if (!axes || axes->size() != 1)
    return false;
  int64_t got = (*axes)[0] < 0 ? (*axes)[0] + rank : (*axes)[0];
  return got == axis;
}

/// `value` followed through Unsqueeze-then-Squeeze pairs of the same axis
/// (the exporter writes one after each bmm): the last value of the chain
/// that equals `value`.
static Value skipUnitPairs(Value value) {
  while (value.hasOneUse()) {
    auto unsqueeze = dyn_cast<onnx::UnsqueezeOp>(*value.getUsers().begin());
    if (!unsqueeze || !unsqueeze.getOutputs()[0].hasOneUse())
      break;
    auto squeeze = dyn_cast<onnx::SqueezeOp>(
        *unsqueeze.getOutputs()[0].getUsers().begin());
    std::optional<SmallVector<int64_t>> in =
        constantInts(unsqueeze.getInputs()[1]);
    std::optional<SmallVector<int64_t>> out =
        squeeze && squeeze.getInputs().size() > 1
            ? constantInts(squeeze.getInputs()[1])
            : std::nullopt;
    int64_t rank = shapeOf(unsqueeze.getOutputs()[0]).size();
    if (!in || !out || in->size() != 1 || out->size() != 1 ||
        squeeze.getOutputs()[0].getType() != value.getType() ||
        !hasSingleAxis(squeeze, (*in)[0] < 0 ? (*in)[0] + rank : (*in)[0],
                       rank))
      break;
    value = squeeze.getOutputs()[0];
  }
  return value;
}

/// Whether `index [S]` (or `[S, 1]`) holds p / k at every pair p: a
/// constant, or computed from arange(S) by elementwise ops.
static bool isTokenOfPair(Value index, int64_t pairs, int64_t k) {
  if (std::optional<SmallVector<int64_t>> values = constantInts(index)) {
    if (static_cast<int64_t>(values->size()) != pairs)
      return false;
    for (int64_t p = 0; p < pairs; ++p)
      if ((*values)[p] != p / k)
        return false;
    return true;
  }
  // The arange the index is computed from (a few ops up).
  SmallVector<std::pair<Value, unsigned>> work{{index, 0}};
  while (!work.empty()) {
    auto [value, depth] = work.pop_back_val();
    Operation *op = value.getDefiningOp();
    if (!op || depth > 12)
      continue;
    if (auto range = dyn_cast<onnx::RangeOp>(op)) {
      if (evaluateScalar(range.getInputs()[0]) == 0 &&
          evaluateScalar(range.getInputs()[1]) == pairs &&
          evaluateScalar(range.getInputs()[2]) == 1)
        return isIndexFunction(index, value, pairs,
                               [&](int64_t p) { return p / k; });
      continue;
    }
    for (Value operand : op->getOperands())
      work.push_back({operand, depth + 1});
  }
  return false;
}

/// Whether `rows [S, H]` is `x [T, H]` with each row repeated k times in
/// place (torch's repeat_interleave), S = T * k.
static bool isRepeatInterleave(Value rows, Value x, int64_t k) {
  ArrayRef<int64_t> xShape = shapeOf(x);
  int64_t tokens = xShape[0], hidden = xShape[1], pairs = tokens * k;
  rows = skipNoOps(rows);
  if (shapeOf(rows) != ArrayRef<int64_t>{pairs, hidden})
    return false;
  Operation *op = rows.getDefiningOp();
  // x.unsqueeze(1).expand(T, k, H).reshape(S, H).
  if (auto reshape = dyn_cast_or_null<onnx::ReshapeOp>(op)) {
    Value repeated = skipNoOps(reshape.getInputs()[0]);
    if (shapeOf(repeated) != ArrayRef<int64_t>{tokens, k, hidden})
      return false;
    Value unsqueezed;
    if (auto expand = repeated.getDefiningOp<onnx::ExpandOp>()) {
      unsqueezed = expand.getInputs()[0];
    } else if (auto tile = repeated.getDefiningOp<onnx::TileOp>()) {
      if (constantInts(tile.getInputs()[1]) != SmallVector<int64_t>{1, k, 1})
        return false;
      unsqueezed = tile.getInputs()[0];
    }
    auto unsqueeze =
        unsqueezed ? definedBy<onnx::UnsqueezeOp>(unsqueezed) : nullptr;
    return unsqueeze && hasSingleAxis(unsqueeze, 1, 3) &&
           shapeOf(unsqueeze.getOutputs()[0]) ==
               ArrayRef<int64_t>{tokens, 1, hidden} &&
           skipNoOps(unsqueeze.getInputs()[0]) == x;
  }
  // x[index] with index(p) = p / k.
  if (auto gather = dyn_cast_or_null<onnx::GatherOp>(op))
    return hasIntAttr(gather, "axis", 0, 0) &&
           skipNoOps(gather.getInputs()[0]) == x &&
           shapeOf(gather.getInputs()[1]) == ArrayRef<int64_t>{pairs} &&
           isTokenOfPair(gather.getInputs()[1], pairs, k);
  if (auto gather = dyn_cast_or_null<onnx::GatherNDOp>(op))
    return hasIntAttr(gather, "batch_dims", 0, 0) &&
           skipNoOps(gather.getInputs()[0]) == x &&
           shapeOf(gather.getInputs()[1]) == ArrayRef<int64_t>{pairs, 1} &&
           isTokenOfPair(gather.getInputs()[1], pairs, k);
  return false;
}

/// One projection of the experts as batched_mm writes it: each pair's rows
/// times the weight of its expert, gathered by the flat ids.
struct GatheredMatMul {
  onnx::MatMulOp matmul;
  Value rows;               // [S, in]
  arith::ConstantOp weight; // [E, out, in], or [E, in, out] if transposed
  bool transposed = false;
  arith::ConstantOp bias; // [E, out], gathered by the flat ids
  Value result;           // [S, out], bias added
};

/// Matches the bmm that `gather` (the weights of every pair) feeds:
/// `bmm(W[ids], rows[:, :, None])[:, :, 0]` for `[E, out, in]` weights or
/// `bmm(rows[:, None], W[ids])[:, 0]` for `[E, in, out]` ones, then an
/// optional `+ b[ids]` of the same ids.
static FailureOr<GatheredMatMul>
matchGatheredMatMul(onnx::GatherNDOp gather, Value routerIds,
                    PatternRewriter &rewriter) {
  GatheredMatMul mm;
  mm.weight = constantOp(gather.getInputs()[0]);
  Value selected = gather.getOutputs()[0];
  if (!selected.hasOneUse() ||
      !(mm.matmul = dyn_cast<onnx::MatMulOp>(*selected.getUsers().begin())))
    return rewriter.notifyMatchFailure(gather,
                                       "gathered weights are not one bmm's");
  ArrayRef<int64_t> wShape = shapeOf(selected);
  int64_t pairs = wShape[0];
  mm.transposed = mm.matmul.getInputs()[1] == selected;
  Value columns = mm.matmul.getInputs()[mm.transposed ? 0 : 1];
  // The rows as a batch of vectors: [S, in, 1] on the right, or [S, 1, in]
  // on the left.
  int64_t unitAxis = mm.transposed ? 1 : 2;
  auto unsqueeze = definedBy<onnx::UnsqueezeOp>(columns);
  Value product = mm.matmul.getOutputs()[0];
  auto squeeze = product.hasOneUse()
                     ? dyn_cast<onnx::SqueezeOp>(*product.getUsers().begin())
                     : nullptr;
  int64_t in = mm.transposed ? wShape[1] : wShape[2];
  int64_t out = mm.transposed ? wShape[2] : wShape[1];
  if (!unsqueeze || !hasSingleAxis(unsqueeze, unitAxis, 3) || !squeeze ||
      !hasSingleAxis(squeeze, unitAxis, 3) ||
      shapeOf(unsqueeze.getInputs()[0]) != ArrayRef<int64_t>{pairs, in} ||
      shapeOf(squeeze.getOutputs()[0]) != ArrayRef<int64_t>{pairs, out})
    return rewriter.notifyMatchFailure(
        mm.matmul, "not a bmm of each pair's row with its weight");
  mm.rows = skipNoOps(unsqueeze.getInputs()[0]);
  mm.result = skipUnitPairs(squeeze.getOutputs()[0]);
  // GPT-OSS's biases, gathered by the same ids.
  if (mm.result.hasOneUse())
    if (auto add = dyn_cast<onnx::AddOp>(*mm.result.getUsers().begin())) {
      Value other = add.getInputs()[add.getInputs()[0] == mm.result ? 1 : 0];
      auto biasGather = definedBy<onnx::GatherNDOp>(other);
      arith::ConstantOp bias =
          biasGather ? constantOp(biasGather.getInputs()[0]) : nullptr;
      if (bias && hasIntAttr(biasGather, "batch_dims", 0, 0) &&
          skipReshapes(biasGather.getInputs()[1]) == skipReshapes(routerIds) &&
          shapeOf(biasGather.getInputs()[1]) == ArrayRef<int64_t>{pairs, 1} &&
          shapeOf(bias) == ArrayRef<int64_t>{shapeOf(mm.weight)[0], out} &&
          shapeOf(other) == ArrayRef<int64_t>{pairs, out}) {
        mm.bias = bias;
        mm.result = skipUnitPairs(add.getOutputs()[0]);
      }
    }
  return mm;
}

/// The pieces of a batched-form block routed by `router`.
struct GatheredBlock {
  Value x; // [T, H]
  GatheredMatMul up, down;
  ActivationAttr activation;
  Value output; // [T, H]
};

static FailureOr<GatheredBlock> matchGatheredBlock(const RouterMatch &router,
                                                   Operation *anchor,
                                                   PatternRewriter &rewriter) {
  GatheredBlock block;
  int64_t k = router.k, numExperts = router.numExperts;
  block.x = matchRouterInput(router.logits);
  auto xType = block.x ? dyn_cast<RankedTensorType>(block.x.getType())
                       : RankedTensorType();
  if (!xType || xType.getRank() != 2 || !xType.hasStaticShape())
    return rewriter.notifyMatchFailure(anchor, "logits are not x @ W_router");
  int64_t tokens = xType.getDimSize(0), pairs = tokens * k;

  // The expert weights of every pair: stacked constants gathered by the
  // router's ids, flattened to one id per pair.
  SmallVector<onnx::GatherNDOp> gathers;
  SmallVector<Value> work{router.indices};
  llvm::SmallPtrSet<Operation *, 8> seen;
  while (!work.empty()) {
    Value value = work.pop_back_val();
    for (Operation *user : value.getUsers()) {
      if (!seen.insert(user).second)
        continue;
      if (isa<onnx::UnsqueezeOp, onnx::SqueezeOp, onnx::ReshapeOp,
              onnx::IdentityOp>(user) &&
          user->getOperand(0) == value) {
        work.push_back(user->getResult(0));
        continue;
      }
      auto gather = dyn_cast<onnx::GatherNDOp>(user);
      if (!gather || gather.getInputs()[1] != value ||
          shapeOf(value) != ArrayRef<int64_t>{pairs, 1} ||
          !hasIntAttr(gather, "batch_dims", 0, 0))
        continue;
      arith::ConstantOp weight = constantOp(gather.getInputs()[0]);
      ArrayRef<int64_t> shape = weight ? shapeOf(weight) : ArrayRef<int64_t>();
      if (shape.size() != 3 || shape[0] != numExperts)
        continue;
      gathers.push_back(gather);
    }
  }
  if (gathers.size() != 2)
    return rewriter.notifyMatchFailure(
        anchor, "not two expert weights gathered by the router's ids");

  // The up projection reads x repeated k times; the down projection reads
  // its activation.
  SmallVector<GatheredMatMul, 2> projections;
  for (onnx::GatherNDOp gather : gathers) {
    FailureOr<GatheredMatMul> mm =
        matchGatheredMatMul(gather, router.indices, rewriter);
    if (failed(mm))
      return failure();
    projections.push_back(*mm);
  }
  if (!isRepeatInterleave(projections[0].rows, block.x, k))
    std::swap(projections[0], projections[1]);
  block.up = projections[0];
  block.down = projections[1];
  if (!isRepeatInterleave(block.up.rows, block.x, k))
    return rewriter.notifyMatchFailure(
        block.up.matmul, "the rows are not x with each token repeated k times");
  if (block.up.transposed != block.down.transposed)
    return rewriter.notifyMatchFailure(block.down.matmul,
                                       "the projections' layouts differ");
  std::optional<ActivationAttr> activation =
      matchFusedSwiGLU(block.down.rows, block.up.result);
  if (!activation)
    activation = matchCustomActivation(block.down.rows, block.up.result,
                                       block.down.matmul, rewriter);
  if (!activation)
    return rewriter.notifyMatchFailure(
        block.down.matmul, "the down projection does not read a SwiGLU or "
                           "elementwise activation of the up projection");
  block.activation = *activation;

  // Weighted by w.reshape(-1)[:, None]: one weight per pair, along rows.
  Value expertRows = block.down.result;
  int64_t hidden = xType.getDimSize(1);
  if (shapeOf(expertRows) != ArrayRef<int64_t>{pairs, hidden} ||
      !expertRows.hasOneUse())
    return rewriter.notifyMatchFailure(block.down.matmul, "expert rows escape");
  auto weighted = dyn_cast<onnx::MulOp>(*expertRows.getUsers().begin());
  if (!weighted)
    return rewriter.notifyMatchFailure(block.down.matmul,
                                       "rows are not weighted");
  Value scale =
      weighted.getInputs()[weighted.getInputs()[0] == expertRows ? 1 : 0];
  if (skipReshapes(scale) != skipNoOps(router.weights) ||
      shapeOf(scale) != ArrayRef<int64_t>{pairs, 1})
    return rewriter.notifyMatchFailure(
        weighted, "rows are not scaled by the router's weights");

  // Summed over the k picks of each token.
  Value scaled = weighted.getOutputs()[0];
  auto reshape = scaled.hasOneUse()
                     ? dyn_cast<onnx::ReshapeOp>(*scaled.getUsers().begin())
                     : nullptr;
  auto sum = reshape && reshape.getOutputs()[0].hasOneUse()
                 ? dyn_cast<onnx::ReduceSumOp>(
                       *reshape.getOutputs()[0].getUsers().begin())
                 : nullptr;
  if (!reshape ||
      shapeOf(reshape.getOutputs()[0]) !=
          ArrayRef<int64_t>{tokens, k, hidden} ||
      !sum || sum.getInputs().size() < 2 ||
      constantInts(sum.getInputs()[1]) != SmallVector<int64_t>{1} ||
      !hasIntAttr(sum, "keepdims", 1, 0))
    return rewriter.notifyMatchFailure(weighted,
                                       "rows are not summed over k per token");
  block.output = sum.getOutputs()[0];
  return block;
}

/// Rewrites the batched-form block of `router` into one dropless moe.layer.
static LogicalResult raiseGatheredBlock(const RouterMatch &router,
                                        Operation *anchor,
                                        PatternRewriter &rewriter) {
  FailureOr<GatheredBlock> block = matchGatheredBlock(router, anchor, rewriter);
  if (failed(block))
    return failure();
  Location loc = block->output.getLoc();
  rewriter.setInsertionPoint(block->output.getDefiningOp());
  // moe's weights are [E, out, in]: what bmm(W[ids], rows) reads; the
  // transposed form's are turned.
  auto pack = [&](const GatheredMatMul &mm,
                  StringRef name) -> FailureOr<Value> {
    if (!mm.transposed)
      return Value(arith::ConstantOp(mm.weight));
    return transposeExpertWeights(mm.weight, name, loc, rewriter);
  };
  FailureOr<Value> fc1 = pack(block->up, "experts_fc1");
  FailureOr<Value> fc2 = pack(block->down, "experts_fc2");
  if (failed(fc1) || failed(fc2))
    return rewriter.notifyMatchFailure(anchor, "weights could not be packed");
  LayerSpec spec;
  setRouting(spec, router);
  spec.input = block->x;
  spec.fc1 = *fc1;
  spec.fc2 = *fc2;
  if (block->up.bias)
    spec.fc1Bias = block->up.bias;
  if (block->down.bias)
    spec.fc2Bias = block->down.bias;
  spec.activation = block->activation;
  return replaceByLayer(spec, router, block->output, anchor, rewriter);
}

/// A batched-form block routed by a TopK.
struct RaiseGatheredExperts : OpRewritePattern<onnx::TopKOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(onnx::TopKOp topk,
                                PatternRewriter &rewriter) const override {
    FailureOr<RouterMatch> router = matchRouter(topk, rewriter);
    if (failed(router))
      return failure();
    return raiseGatheredBlock(*router, topk, rewriter);
  }
};

/// A batched-form block routed by Phi's sparse mixer (no TopK), found by
/// the concat of its two picks.
struct RaiseGatheredSparseMixer : OpRewritePattern<onnx::ConcatOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(onnx::ConcatOp ids,
                                PatternRewriter &rewriter) const override {
    auto type = dyn_cast<RankedTensorType>(ids.getOutputs()[0].getType());
    if (!type || !type.getElementType().isInteger(64))
      return failure();
    FailureOr<RouterMatch> router =
        matchSparseMixer(ids.getOutputs()[0], ids, rewriter);
    if (failed(router))
      return failure();
    return raiseGatheredBlock(*router, ids, rewriter);
  }
};

} // namespace

void populateGatheredExpertsPatterns(RewritePatternSet &patterns) {
  patterns.add<RaiseGatheredExperts, RaiseGatheredSparseMixer>(
      patterns.getContext());
}

} // namespace mlir::moe::raise
