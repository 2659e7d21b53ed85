//===- SortedExperts.cpp - raise the grouped form (tokens sorted by expert) ===//
//
// transformers 5 stores each block's experts as fused 3-D parameters
// (`gate_up_proj [E, 2F, H]`, `down_proj [E, H, F]`) and runs them with
// `grouped_mm`, which its ONNX exporter writes unrolled:
//
//   perm = argsort(ids.flatten())        TopK(largest = 0) over the T*k picks
//   rows = x[perm // k]                  GatherND (floor division spelled out)
//   ends = cumsum(histc(ids_sorted, E))  ScatterElements(add), CumSum, Split
//   h    = concat_e(rows[ends[e-1]:ends[e]] @ W1[e]) [+ b1[ids_sorted]]
//   a    = act(h)                        a SwiGLU of h's two halves
//   o    = concat_e(a[ends[e-1]:ends[e]] @ W2[e]) [+ b2[ids_sorted]]
//   y    = (o * w.flatten()[perm])[inverse(perm)].reshape(T, k, H).sum(1)
//
// which is one dropless moe.layer. The index maps (floor division, histc's
// bins) are checked by evaluating them on their whole domain.
//
//===----------------------------------------------------------------------===//

#include "passes/Raise/SortedExperts.h"
#include "passes/Raise/IndexArithmetic.h"
#include "passes/ONNXFolding.h"
#include "passes/Raise/Matchers.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Verifier.h"

namespace mlir::moe::raise {
namespace {

/// `value` with every Cast looked through (counts and offsets go through
/// float and back).
static Value skipCasts(Value value) {
  value = skipNoOps(value);
  while (auto cast = value.getDefiningOp<onnx::CastOp>())
    value = skipNoOps(cast.getInputs()[0]);
  return value;
}

/// `value` with Unsqueeze, Squeeze and Reshape looked through.
static Value skipReshapes(Value value) {
  value = skipNoOps(value);
  while (Operation *op = value.getDefiningOp()) {
    if (!isa<onnx::UnsqueezeOp, onnx::SqueezeOp, onnx::ReshapeOp>(op))
      break;
    value = skipNoOps(op->getOperand(0));
  }
  return value;
}

/// Whether `op`'s integer attribute `name` (default `otherwise`) is `want`.
static bool hasIntAttr(Operation *op, StringRef name, int64_t otherwise,
                       int64_t want) {
  auto attr = op->getAttrOfType<IntegerAttr>(name);
  return (attr ? attr.getInt() : otherwise) == want;
}

/// Element `index` of `value` along axis 0: Squeeze(Split(v)[index]) or
/// Gather(v, index); the `v`.
static Value elementOf(Value value, int64_t index) {
  value = skipCasts(value);
  if (auto squeeze = value.getDefiningOp<onnx::SqueezeOp>())
    value = skipNoOps(squeeze.getInputs()[0]);
  if (auto split = value.getDefiningOp<onnx::SplitOp>()) {
    if (!hasIntAttr(split, "axis", 0, 0) ||
        cast<OpResult>(value).getResultNumber() != index ||
        cast<RankedTensorType>(value.getType()).getDimSize(0) != 1)
      return {};
    return split.getInputs()[0];
  }
  if (auto gather = value.getDefiningOp<onnx::GatherOp>()) {
    if (!hasIntAttr(gather, "axis", 0, 0) ||
        constantInt(gather.getInputs()[1]) != index ||
        cast<RankedTensorType>(gather.getInputs()[1].getType()).getRank() != 0)
      return {};
    return gather.getInputs()[0];
  }
  return {};
}

/// One projection of the experts as grouped_mm's fallback writes it.
struct GroupedMatMul {
  Value rows;                 // [N, in], sorted by expert
  SmallVector<Value> ends;    // the end row of each expert's group
  SmallVector<Operation *> ranges;  // each group's Range
  arith::ConstantOp weight;   // [E, in, out]
  arith::ConstantOp bias;     // [E, out], gathered by sorted expert id
  Value result;               // [N, out], bias added
};

/// Matches the `concat_e(rows[ends[e-1]:ends[e]] @ W[e])` that `concat`
/// computes, for E experts.
static FailureOr<GroupedMatMul> matchGroupedMatMul(onnx::ConcatOp concat,
                                                   int64_t numExperts,
                                                   PatternRewriter &rewriter) {
  GroupedMatMul grouped;
  ValueRange parts = concat.getInputs();
  if (!hasIntAttr(concat, "axis", 0, 0) ||
      static_cast<int64_t>(parts.size()) != numExperts)
    return rewriter.notifyMatchFailure(concat, "not one group per expert");
  Value start;
  for (auto [e, part] : llvm::enumerate(parts)) {
    auto matmul = definedBy<onnx::MatMulOp>(part);
    auto gather =
        matmul ? definedBy<onnx::GatherOp>(matmul.getInputs()[0]) : nullptr;
    auto range =
        gather ? definedBy<onnx::RangeOp>(gather.getInputs()[1]) : nullptr;
    if (!range || !hasIntAttr(gather, "axis", 0, 0))
      return rewriter.notifyMatchFailure(
          concat, "a group is not rows[start:end] @ W[e]");
    Value stacked = elementOf(matmul.getInputs()[1], e);
    arith::ConstantOp weight = stacked ? constantOp(stacked) : nullptr;
    if (!weight || cast<RankedTensorType>(weight.getType()).getRank() != 3 ||
        cast<RankedTensorType>(weight.getType()).getDimSize(0) != numExperts)
      return rewriter.notifyMatchFailure(
          matmul, "the weight is not expert e's of stacked constants");
    Value rows = skipNoOps(gather.getInputs()[0]);
    if ((grouped.weight && weight != grouped.weight) ||
        (grouped.rows && rows != grouped.rows))
      return rewriter.notifyMatchFailure(
          matmul, "groups read other rows or weights");
    grouped.weight = weight;
    grouped.rows = rows;
    // Group e runs from the end of group e - 1 (0 for the first) in steps
    // of 1.
    ValueRange bounds = range.getInputs();
    bool starts = e == 0 ? constantInt(bounds[0]) == 0
                         : skipCasts(bounds[0]) == skipCasts(start);
    if (!starts || constantInt(bounds[2]) != 1)
      return rewriter.notifyMatchFailure(
          range, "groups are not consecutive row ranges");
    start = bounds[1];
    grouped.ends.push_back(bounds[1]);
    grouped.ranges.push_back(range);
  }
  grouped.result = concat.getOutputs()[0];
  return grouped;
}

/// `b[ids_sorted]` added to `grouped.result` (GPT-OSS's expert biases).
static void matchGroupedBias(GroupedMatMul &grouped, Value sortedIds) {
  Value result = grouped.result;
  for (Operation *user : result.getUsers()) {
    auto add = dyn_cast<onnx::AddOp>(user);
    if (!add || !llvm::hasSingleElement(result.getUsers()))
      continue;
    Value other = add.getInputs()[add.getInputs()[0] == result ? 1 : 0];
    auto gather = definedBy<onnx::GatherNDOp>(other);
    arith::ConstantOp bias =
        gather ? constantOp(gather.getInputs()[0]) : nullptr;
    if (!bias || skipReshapes(gather.getInputs()[1]) != sortedIds ||
        cast<RankedTensorType>(bias.getType()).getRank() != 2)
      continue;
    grouped.bias = bias;
    grouped.result = add.getOutputs()[0];
  }
}

/// Whether `ends[e]` is the end of expert e's rows among `sortedIds`:
/// element e of cumsum(histc(sortedIds, bins = E)), with histc's bin of
/// every id e being e.
static LogicalResult matchGroupEnds(const GroupedMatMul &grouped,
                                    Value sortedIds, int64_t numExperts,
                                    PatternRewriter &rewriter) {
  Value cumsumValue;
  for (auto [e, end] : llvm::enumerate(grouped.ends)) {
    Value whole = elementOf(end, e);
    if (!whole || (cumsumValue && skipCasts(whole) != cumsumValue))
      return rewriter.notifyMatchFailure(grouped.ranges[e],
                                         "group ends are not one cumsum");
    cumsumValue = skipCasts(whole);
  }
  auto cumsum = cumsumValue.getDefiningOp<onnx::CumSumOp>();
  if (!cumsum || !hasIntAttr(cumsum, "exclusive", 0, 0) ||
      !hasIntAttr(cumsum, "reverse", 0, 0) ||
      constantInt(cumsum.getInputs()[1]).value_or(-1) != 0)
    return rewriter.notifyMatchFailure(grouped.ranges.front(),
                                       "group ends are not a cumsum");
  auto scatter = definedBy<onnx::ScatterElementsOp>(
      skipCasts(cumsum.getInputs()[0]));
  auto reduction =
      scatter ? scatter->getAttrOfType<StringAttr>("reduction") : nullptr;
  std::optional<onnx_lowering::ConstTensor> ones =
      scatter ? onnx_lowering::foldConstantExpression(scatter.getInputs()[2])
              : std::nullopt;
  if (!scatter || !reduction || reduction.getValue() != "add" ||
      !hasIntAttr(scatter, "axis", 0, 0) ||
      !isZeroConstant(scatter.getInputs()[0]) ||
      cast<RankedTensorType>(scatter.getInputs()[0].getType()).getShape() !=
          ArrayRef<int64_t>{numExperts} ||
      !ones || llvm::any_of(llvm::seq<int64_t>(0, ones->size()),
                            [&](int64_t i) { return ones->asDouble(i) != 1; }))
    return rewriter.notifyMatchFailure(cumsum,
                                       "counts are not a histogram of ids");
  if (!isIndexFunction(scatter.getInputs()[1], sortedIds, numExperts,
                       [](int64_t id) { return id; }))
    return rewriter.notifyMatchFailure(scatter,
                                       "histogram bins are not the expert ids");
  return success();
}

/// The pieces of a grouped-form block routed by `topk`.
struct SortedBlock {
  RouterMatch router;
  Value x;                        // [T, H]
  GroupedMatMul up, down;
  ActivationAttr activation;
  Value output;                   // [T, H]
};

static FailureOr<SortedBlock> matchSortedBlock(onnx::TopKOp topk,
                                               PatternRewriter &rewriter) {
  SortedBlock block;
  // The router's TopK, or (a sparse mixer has none) the sort itself.
  onnx::TopKOp sort;
  FailureOr<RouterMatch> router = failure();
  if (hasIntAttr(topk, "largest", 1, 0)) {
    router = matchSparseMixer(skipReshapes(topk.getInputs()[0]), topk,
                              rewriter);
    sort = topk;
  } else {
    router = matchRouter(topk, rewriter);
    // The sort: TopK(largest = 0) of all T*k expert ids.
    if (succeeded(router))
      for (Operation *user : router->indices.getUsers())
        for (Value flat : user->getResults())
          for (Operation *flatUser : flat.getUsers())
            if (auto candidate = dyn_cast<onnx::TopKOp>(flatUser))
              if (skipReshapes(candidate.getInputs()[0]) == router->indices)
                sort = candidate;
  }
  if (failed(router))
    return failure();
  block.router = *router;
  int64_t k = router->k, numExperts = router->numExperts;
  block.x = matchRouterInput(router->logits);
  auto xType = block.x ? dyn_cast<RankedTensorType>(block.x.getType())
                       : RankedTensorType();
  if (!xType || xType.getRank() != 2 || !xType.hasStaticShape())
    return rewriter.notifyMatchFailure(topk, "logits are not x @ W_router");
  int64_t pairs = xType.getDimSize(0) * k;
  if (!sort || !hasIntAttr(sort, "largest", 1, 0) ||
      skipReshapes(sort.getInputs()[0]) != router->indices ||
      constantInt(sort.getInputs()[1]) != pairs)
    return rewriter.notifyMatchFailure(topk,
                                       "expert ids are not sorted (argsort)");
  Value sortedIds = sort.getOutputs()[0], perm = sort.getOutputs()[1];

  // rows = x[perm // k]: the GatherND of x whose index is perm // k.
  onnx::GatherNDOp rows;
  for (Operation *user : block.x.getUsers())
    if (auto gather = dyn_cast<onnx::GatherNDOp>(user))
      if (isIndexFunction(gather.getInputs()[1], perm, pairs,
                          [&](int64_t p) { return p / k; }))
        rows = gather;
  if (!rows)
    return rewriter.notifyMatchFailure(sort, "no rows x[perm // k]");

  // The up projection reads the rows; the down projection reads the
  // activation over the same ranges.
  auto concatOf = [](Value v) -> onnx::ConcatOp {
    for (Operation *user : v.getUsers())
      if (isa<onnx::GatherOp>(user))
        for (Operation *mm : user->getResult(0).getUsers())
          if (isa<onnx::MatMulOp>(mm))
            for (Operation *c : mm->getResult(0).getUsers())
              if (auto concat = dyn_cast<onnx::ConcatOp>(c))
                return concat;
    return {};
  };
  onnx::ConcatOp upConcat = concatOf(rows.getOutputs()[0]);
  if (!upConcat)
    return rewriter.notifyMatchFailure(rows, "no grouped up projection");
  FailureOr<GroupedMatMul> up =
      matchGroupedMatMul(upConcat, numExperts, rewriter);
  if (failed(up) || up->rows != rows.getOutputs()[0] ||
      failed(matchGroupEnds(*up, sortedIds, numExperts, rewriter)))
    return failure();
  matchGroupedBias(*up, sortedIds);
  block.up = *up;

  // The down projection: the other Gather on the first group's range.
  onnx::ConcatOp downConcat;
  for (Operation *user : up->ranges.front()->getResult(0).getUsers())
    if (auto gather = dyn_cast<onnx::GatherOp>(user))
      if (skipNoOps(gather.getInputs()[0]) != up->rows)
        if (onnx::ConcatOp c = concatOf(gather.getInputs()[0]))
          downConcat = c;
  if (!downConcat)
    return rewriter.notifyMatchFailure(upConcat, "no grouped down projection");
  FailureOr<GroupedMatMul> down =
      matchGroupedMatMul(downConcat, numExperts, rewriter);
  if (failed(down))
    return failure();
  for (auto [a, b] : llvm::zip(up->ranges, down->ranges))
    if (a != b)
      return rewriter.notifyMatchFailure(downConcat,
                                         "projections group rows otherwise");
  matchGroupedBias(*down, sortedIds);
  block.down = *down;
  std::optional<ActivationAttr> activation =
      matchFusedSwiGLU(down->rows, up->result);
  if (!activation)
    return rewriter.notifyMatchFailure(downConcat,
                                       "the activation is not a SwiGLU");
  block.activation = *activation;

  // Weighted by w.flatten()[perm].
  if (!down->result.hasOneUse())
    return rewriter.notifyMatchFailure(downConcat, "expert rows escape");
  auto weighted = dyn_cast<onnx::MulOp>(*down->result.getUsers().begin());
  if (!weighted)
    return rewriter.notifyMatchFailure(downConcat, "rows are not weighted");
  Value scale = weighted.getInputs()[weighted.getInputs()[0] ==
                                             down->result
                                         ? 1
                                         : 0];
  auto scaleGather = definedBy<onnx::GatherNDOp>(skipReshapes(scale));
  if (!scaleGather || skipReshapes(scaleGather.getInputs()[0]) !=
                          skipNoOps(router->weights) ||
      skipReshapes(scaleGather.getInputs()[1]) != perm)
    return rewriter.notifyMatchFailure(weighted,
                                       "rows are not scaled by w[perm]");

  // Unsorted by inverse(perm) = ScatterND(_, perm, arange), then summed
  // over the k picks of each token.
  if (!weighted.getOutputs()[0].hasOneUse())
    return rewriter.notifyMatchFailure(weighted, "weighted rows escape");
  auto unsort = dyn_cast<onnx::GatherNDOp>(
      *weighted.getOutputs()[0].getUsers().begin());
  auto inverse = unsort ? definedBy<onnx::ScatterNDOp>(
                              skipReshapes(unsort.getInputs()[1]))
                        : nullptr;
  std::optional<SmallVector<int64_t>> arange =
      inverse ? constantInts(inverse.getInputs()[2]) : std::nullopt;
  bool isArange = arange && static_cast<int64_t>(arange->size()) == pairs;
  for (int64_t i = 0; isArange && i < pairs; ++i)
    isArange = (*arange)[i] == i;
  if (!inverse || skipReshapes(inverse.getInputs()[1]) != perm || !isArange)
    return rewriter.notifyMatchFailure(weighted,
                                       "rows are not put back in token order");
  Value unsorted = unsort.getOutputs()[0];
  if (!unsorted.hasOneUse())
    return rewriter.notifyMatchFailure(unsort, "unsorted rows escape");
  auto reshape = dyn_cast<onnx::ReshapeOp>(*unsorted.getUsers().begin());
  auto perToken = reshape ? dyn_cast<RankedTensorType>(
                                reshape.getOutputs()[0].getType())
                          : RankedTensorType();
  auto sum = reshape && reshape.getOutputs()[0].hasOneUse()
                 ? dyn_cast<onnx::ReduceSumOp>(
                       *reshape.getOutputs()[0].getUsers().begin())
                 : nullptr;
  if (!perToken || perToken.getShape() !=
                       ArrayRef<int64_t>{xType.getDimSize(0), k,
                                         perToken.getShape().back()} ||
      !sum || sum.getInputs().size() < 2 ||
      constantInts(sum.getInputs()[1]) != SmallVector<int64_t>{1} ||
      !hasIntAttr(sum, "keepdims", 1, 0))
    return rewriter.notifyMatchFailure(unsort,
                                       "rows are not summed over k per token");
  block.output = sum.getOutputs()[0];
  return block;
}

/// Rewrites a grouped-form block into one dropless moe.layer.
struct RaiseSortedExperts : OpRewritePattern<onnx::TopKOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(onnx::TopKOp topk,
                                PatternRewriter &rewriter) const override {
    FailureOr<SortedBlock> block = matchSortedBlock(topk, rewriter);
    if (failed(block))
      return failure();
    Location loc = block->output.getLoc();
    rewriter.setInsertionPoint(block->output.getDefiningOp());
    // grouped_mm's weights are [E, in, out]; moe's are [E, out, in].
    FailureOr<Value> fc1 =
        transposeExpertWeights(block->up.weight, "experts_fc1", loc, rewriter);
    FailureOr<Value> fc2 = transposeExpertWeights(block->down.weight,
                                                  "experts_fc2", loc, rewriter);
    if (failed(fc1) || failed(fc2))
      return rewriter.notifyMatchFailure(topk, "weights could not be packed");
    LayerSpec spec;
    setRouting(spec, block->router);
    spec.input = block->x;
    spec.fc1 = *fc1;
    spec.fc2 = *fc2;
    if (block->up.bias)
      spec.fc1Bias = block->up.bias;
    if (block->down.bias)
      spec.fc2Bias = block->down.bias;
    spec.activation = block->activation;
    if (failed(setSelectionBias(spec, block->router, loc, rewriter)))
      return failure();
    LayerOp layer = createLayer(rewriter, loc, block->x.getType(), spec);
    if (failed(verify(layer)) ||
        layer.getOutput().getType() != block->output.getType()) {
      rewriter.eraseOp(layer);
      return rewriter.notifyMatchFailure(topk, "block output type differs");
    }
    rewriter.replaceAllUsesWith(block->output, layer.getOutput());
    return success();
  }
};

} // namespace

void populateSortedExpertsPatterns(RewritePatternSet &patterns) {
  patterns.add<RaiseSortedExperts>(patterns.getContext());
}

} // namespace mlir::moe::raise
