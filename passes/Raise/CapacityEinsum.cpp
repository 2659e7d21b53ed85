//===- CapacityEinsum.cpp - raise the GShard/Switch einsum form -----------===//
//
// The Switch Transformer's top-1 layer with expert capacity as GShard and
// Mesh-TensorFlow write it (dispatch and combine tensors, experts applied
// by einsum to their stacked weights):
//
//   p = softmax(x Wr); m = one_hot(argmax(p), E)                  [T, E]
//   pos = cumsum(m, tokens); keep = m * (pos <= C)                [T, E]
//   d = one_hot((pos - 1) * keep, C) * keep[..., None]            [T, E, C]
//   xe = einsum('tec,th->ech', d, x)
//   y = einsum('ecf,ehf->ech', act(einsum('ech,efh->ecf', xe, W1)), W2)
//   out = einsum('tec,ech->th', max(p)[:, None, None] * d, y)
//
// C is `ceil(T / E * capacity_factor)`, computed from Shape(x) in the graph.
// This is moe.layer softmax topk k 1 with capacity C and the `position`
// policy: each expert keeps its first C tokens in token order, and the
// tokens it drops get 0.
//
//===----------------------------------------------------------------------===//

#include "passes/Raise/CapacityEinsum.h"
#include "passes/Raise/EinsumParts.h"
#include "passes/Raise/ElementwiseActivation.h"
#include "passes/Raise/Validation.h"
#include "passes/ONNXFolding.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallVectorExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace mlir::moe::raise {

using onnx_lowering::ConstTensor;
using onnx_lowering::foldConstantExpression;

//===----------------------------------------------------------------------===//
// Router, masks and positions
//===----------------------------------------------------------------------===//

/// The top-1 router: the argmax of softmax probabilities.
struct Top1Router {
  onnx::ArgMaxOp argmax;
  Value probs;  // softmax(logits), [T, E]
  Value logits; // [T, E]
  Value x;      // the tokens the logits are computed from, [T, H]
  int64_t numTokens, numExperts;
};

static FailureOr<Top1Router> matchTop1Router(onnx::ArgMaxOp argmax,
                                             PatternRewriter &rewriter) {
  Top1Router router;
  router.argmax = argmax;
  // ArgMax defaults to axis 0 and keepdims 1.
  auto axis = argmax->getAttrOfType<IntegerAttr>("axis");
  auto keepdims = argmax->getAttrOfType<IntegerAttr>("keepdims");
  auto lastIndex = argmax->getAttrOfType<IntegerAttr>("select_last_index");
  if (!axis || (axis.getInt() != -1 && axis.getInt() != 1) || !keepdims ||
      keepdims.getInt() != 0)
    return rewriter.notifyMatchFailure(argmax,
                                       "not an argmax over the experts");
  if (lastIndex && lastIndex.getInt() != 0)
    return rewriter.notifyMatchFailure(argmax, "ties go to the last expert");
  auto softmax = definedBy<onnx::SoftmaxOp>(argmax.getInputs()[0]);
  if (!softmax)
    return rewriter.notifyMatchFailure(argmax, "scores are not a softmax");
  auto logitsType =
      dyn_cast<RankedTensorType>(softmax.getInputs()[0].getType());
  if (!logitsType || logitsType.getRank() != 2 || !logitsType.hasStaticShape())
    return rewriter.notifyMatchFailure(argmax,
                                       "logits are not a static [T, E]");
  auto softmaxAxis = softmax->getAttrOfType<IntegerAttr>("axis");
  if (softmaxAxis && softmaxAxis.getInt() != -1 && softmaxAxis.getInt() != 1)
    return rewriter.notifyMatchFailure(argmax, "softmax is not over experts");
  router.probs = softmax.getOutputs()[0];
  router.logits = skipNoOps(softmax.getInputs()[0]);
  router.numTokens = logitsType.getDimSize(0);
  router.numExperts = logitsType.getDimSize(1);
  auto matmul = definedBy<onnx::MatMulOp>(router.logits);
  if (!matmul)
    return rewriter.notifyMatchFailure(argmax, "logits are not x @ W_router");
  router.x = skipNoOps(matmul.getInputs()[0]);
  auto xType = dyn_cast<RankedTensorType>(router.x.getType());
  if (!xType || xType.getRank() != 2 || !xType.hasStaticShape() ||
      xType.getDimSize(0) != router.numTokens)
    return rewriter.notifyMatchFailure(argmax,
                                       "tokens are not a static [T, H]");
  if (xType.getElementType() != logitsType.getElementType())
    return rewriter.notifyMatchFailure(
        argmax, "router runs in another precision than the tokens");
  return router;
}

/// Whether `value` is the routing mask `one_hot(argmax, E)`, [T, E].
static bool isExpertMask(Value value, const Top1Router &router) {
  std::optional<OneHot> oneHot = matchOneHot(value);
  return oneHot &&
         skipExactCasts(oneHot->indices, router.numExperts) ==
             router.argmax->getResult(0) &&
         oneHot->depth == router.numExperts;
}

/// Where `value` holds token positions within their expert, the shift s
/// that makes `value + s` the zero-based position. It is the cumsum over
/// tokens of the expert mask, offset by constants and multiplied by masks
/// that are 1 wherever a position is read: the expert mask and, given
/// `keep`, the capacity mask.
static std::optional<int64_t> positionShift(Value value,
                                            const Top1Router &router,
                                            Value keep, unsigned depth = 8) {
  value = skipExactCasts(value, router.numTokens + 1);
  Operation *op = value.getDefiningOp();
  if (!op || depth == 0)
    return std::nullopt;
  if (auto cumsum = dyn_cast<onnx::CumSumOp>(op))
    return isExpertMask(cumsum.getInputs()[0], router)
               ? tokenCumsumShift(cumsum)
               : std::nullopt;
  if (isa<onnx::AddOp, onnx::SubOp>(op)) {
    bool sub = isa<onnx::SubOp>(op);
    for (int i = 0; i < (sub ? 1 : 2); ++i) {
      std::optional<int64_t> offset = foldInteger(op->getOperand(1 - i));
      if (!offset || std::abs(*offset) > router.numTokens)
        continue;
      if (std::optional<int64_t> shift =
              positionShift(op->getOperand(i), router, keep, depth - 1))
        return sub ? *shift + *offset : *shift - *offset;
    }
    return std::nullopt;
  }
  if (isa<onnx::MulOp>(op)) {
    for (int i = 0; i < 2; ++i) {
      Value mask = op->getOperand(1 - i);
      if (isExpertMask(mask, router) ||
          (keep && skipExactCasts(mask, 1) == keep))
        return positionShift(op->getOperand(i), router, keep, depth - 1);
    }
  }
  return std::nullopt;
}

/// The number N of tokens every expert keeps, if `value` is the capacity
/// mask `one_hot(argmax, E) * (position <= bound)` (or `<`, or the
/// comparison flipped).
static std::optional<int64_t> keptTokens(Value value,
                                         const Top1Router &router) {
  auto mul = skipExactCasts(value, 1).getDefiningOp<onnx::MulOp>();
  if (!mul)
    return std::nullopt;
  for (int i = 0; i < 2; ++i) {
    if (!isExpertMask(mul.getInputs()[i], router))
      continue;
    Operation *cmp = skipExactCasts(mul.getInputs()[1 - i], 1).getDefiningOp();
    if (!isa_and_present<onnx::LessOrEqualOp, onnx::LessOp,
                         onnx::GreaterOrEqualOp, onnx::GreaterOp>(cmp))
      continue;
    bool flipped = isa<onnx::GreaterOrEqualOp, onnx::GreaterOp>(cmp);
    bool strict = isa<onnx::LessOp, onnx::GreaterOp>(cmp);
    std::optional<int64_t> shift =
        positionShift(cmp->getOperand(flipped ? 1 : 0), router, Value());
    std::optional<double> bound = foldNumber(cmp->getOperand(flipped ? 0 : 1));
    if (!shift || !bound || std::fabs(*bound) > std::ldexp(1.0, 53))
      continue;
    // With z = position + shift: position <= b keeps z < floor(b) + 1 + shift,
    // position < b keeps z < ceil(b) + shift.
    double limit = strict ? std::ceil(*bound) : std::floor(*bound) + 1;
    return static_cast<int64_t>(limit) + *shift;
  }
  return std::nullopt;
}

/// The slots each expert has, if `value` is the dispatch mask
/// `one_hot(z, D) * keep[..., None]` [T, E, D] with z the zero-based
/// position: min(N, D), since positions past the depth get no slot.
static std::optional<int64_t> dispatchCapacity(Value value,
                                               const Top1Router &router) {
  auto mul = skipExactCasts(value, 1).getDefiningOp<onnx::MulOp>();
  if (!mul)
    return std::nullopt;
  for (int i = 0; i < 2; ++i) {
    std::optional<OneHot> slots = matchOneHot(mul.getInputs()[i]);
    auto unsqueeze = skipExactCasts(mul.getInputs()[1 - i], 1)
                         .getDefiningOp<onnx::UnsqueezeOp>();
    if (!slots || !unsqueeze)
      continue;
    Value keep = skipExactCasts(unsqueeze.getInputs()[0], 1);
    std::optional<int64_t> kept = keptTokens(keep, router);
    std::optional<SmallVector<int64_t>> axes = axesOf(unsqueeze, 1);
    // keep is [T, E]: it must become [T, E, 1].
    if (!kept || !axes || axes->size() != 1 ||
        ((*axes)[0] != -1 && (*axes)[0] != 2) ||
        positionShift(slots->indices, router, keep) != 0)
      continue;
    int64_t capacity = std::min(*kept, slots->depth);
    if (capacity < 1)
      continue;
    return capacity;
  }
  return std::nullopt;
}

/// Whether `value` is the chosen expert's probability, `max(p, -1)` shaped
/// [T, 1, 1] by Unsqueeze to scale the [T, E, C] dispatch mask.
static bool isTop1Probability(Value value, const Top1Router &router) {
  SmallVector<onnx::UnsqueezeOp> unsqueezes;
  value = skipNoOps(value);
  while (auto unsqueeze = value.getDefiningOp<onnx::UnsqueezeOp>()) {
    unsqueezes.push_back(unsqueeze);
    value = skipNoOps(unsqueeze.getInputs()[0]);
  }
  auto reduce = value.getDefiningOp<onnx::ReduceMaxOp>();
  if (!reduce || skipNoOps(reduce.getInputs()[0]) != router.probs)
    return false;
  std::optional<SmallVector<int64_t>> axes = axesOf(reduce, 1);
  auto keepdims = reduce->getAttrOfType<IntegerAttr>("keepdims");
  if (!axes || axes->size() != 1 || ((*axes)[0] != -1 && (*axes)[0] != 1))
    return false;
  SmallVector<int64_t> shape{router.numTokens};
  if (!keepdims || keepdims.getInt() != 0)
    shape.push_back(1);
  for (onnx::UnsqueezeOp unsqueeze : llvm::reverse(unsqueezes)) {
    std::optional<SmallVector<int64_t>> inserted = axesOf(unsqueeze, 1);
    std::optional<SmallVector<int64_t>> next =
        inserted ? unsqueezeShape(shape, *inserted) : std::nullopt;
    if (!next)
      return false;
    shape = *next;
  }
  return shape == ArrayRef<int64_t>{router.numTokens, 1, 1};
}

//===----------------------------------------------------------------------===//
// The pattern
//===----------------------------------------------------------------------===//

/// The combine einsum of the block routed by `argmax`: the one einsum of
/// the combine form that the argmax flows into.
static onnx::EinsumOp findCombine(onnx::ArgMaxOp argmax, unsigned depth = 32) {
  SmallVector<std::pair<Value, unsigned>> work{{argmax.getOutputs()[0], 0}};
  llvm::SmallPtrSet<Operation *, 32> seen;
  onnx::EinsumOp found;
  while (!work.empty()) {
    auto [v, d] = work.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (!seen.insert(user).second)
        continue;
      auto einsum = dyn_cast<onnx::EinsumOp>(user);
      if (einsum && einsumOperands(einsum, kCombine)) {
        if (found)
          return {};
        found = einsum;
        continue;
      }
      if (d + 1 < depth)
        for (Value result : user->getResults())
          work.push_back({result, d + 1});
    }
  }
  return found;
}

namespace {

/// Rewrites a Switch/GShard einsum block with capacity into one moe.layer.
struct RaiseCapacityEinsum : OpRewritePattern<onnx::ArgMaxOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(onnx::ArgMaxOp argmax,
                                PatternRewriter &rewriter) const override {
    FailureOr<Top1Router> router = matchTop1Router(argmax, rewriter);
    if (failed(router))
      return failure();
    onnx::EinsumOp combine = findCombine(argmax);
    if (!combine)
      return rewriter.notifyMatchFailure(
          argmax, "no single combine einsum 'tec,ech->th' after the router");
    auto [weights, expertOutputs] = *einsumOperands(combine, kCombine);

    FailureOr<EinsumBlock> block =
        matchEinsumBlock(expertOutputs, combine, rewriter);
    if (failed(block))
      return failure();
    onnx::EinsumOp dispatch = block->dispatch;
    if (block->tokens != router->x)
      return rewriter.notifyMatchFailure(
          dispatch, "dispatched tokens are not the router's input");
    std::optional<int64_t> capacity = dispatchCapacity(block->mask, *router);
    if (!capacity)
      return rewriter.notifyMatchFailure(
          dispatch, "dispatch mask is not one_hot(position) of the first C "
                    "tokens of each expert");

    // Combine weights: the top-1 probability times the same dispatch mask.
    auto scaled = definedBy<onnx::MulOp>(weights);
    bool weighted = false;
    for (int i = 0; scaled && i < 2 && !weighted; ++i)
      weighted =
          isTop1Probability(scaled.getInputs()[i], *router) &&
          dispatchCapacity(scaled.getInputs()[1 - i], *router) == capacity;
    if (!weighted)
      return rewriter.notifyMatchFailure(
          combine, "combine weights are not the top-1 probability times "
                   "the dispatch mask");

    LayerSpec spec;
    spec.input = router->x;
    spec.logits = router->logits;
    spec.k = 1;
    spec.capacity = *capacity;
    spec.dropPolicy = DropPolicy::Position;
    int64_t width = 0;
    rewriter.setInsertionPoint(combine);
    if (failed(setExpertWeights(spec, block->experts, router->x,
                                router->numExperts,
                                width, combine.getLoc(), rewriter)))
      return rewriter.notifyMatchFailure(
          combine, "expert weights do not fit the tokens and experts");
    return replaceCombine(combine, spec, width, rewriter);
  }
};

} // namespace

void populateCapacityEinsumPatterns(RewritePatternSet &patterns) {
  patterns.add<RaiseCapacityEinsum>(patterns.getContext());
}

} // namespace mlir::moe::raise
