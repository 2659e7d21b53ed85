//===- SortedExperts.cpp - raise the grouped form (tokens sorted) ---------===//
//===//
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
// which is one dropless moe.layer. TorchScript's `_grouped_mm` (as the
// TorchScript importer translates it) computes each group densely instead,
// `h = Where(row in group e, rows @ W1[e], ...)` chained over e, with the
// histogram a sum of one-hot rows and gathers in place of GatherNDs; both
// spellings are matched. The index maps (floor division, histc's bins) are
// checked by evaluating them on their whole domain.
//
//===----------------------------------------------------------------------===//

#include "passes/Raise/SortedExperts.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Verifier.h"
#include "passes/ONNXFolding.h"
#include "passes/Raise/IndexArithmetic.h"
#include "passes/Raise/ElementwiseActivation.h"
#include "passes/Raise/Matchers.h"

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
  if (auto slice = value.getDefiningOp<onnx::SliceOp>()) {
    ValueRange in = slice.getInputs();
    bool axisZero = in.size() < 4 || isa<NoneType>(in[3].getType()) ||
                    constantInt(in[3]) == 0;
    bool stepOne = in.size() < 5 || isa<NoneType>(in[4].getType()) ||
                   constantInt(in[4]) == 1;
    if (!axisZero || !stepOne || constantInt(in[1]) != index ||
        constantInt(in[2]) != index + 1)
      return {};
    return in[0];
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
  Value rows;                      // [N, in], sorted by expert
  SmallVector<Value> ends;         // the end row of each expert's group
  SmallVector<Operation *> ranges; // each group's Range (or Where)
  arith::ConstantOp weight;        // [E, in, out]
  SmallVector<arith::ConstantOp> perExpert; // or one [in, out] per expert
  arith::ConstantOp bias; // [E, out], gathered by sorted expert id
  Value result;           // [N, out], bias added
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
      return rewriter.notifyMatchFailure(matmul,
                                         "groups read other rows or weights");
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

/// Whether `value` is the constant column `[0, 1, ..., n-1]` ([n] or [n, 1]),
/// or Range(0, n, 1).
static bool isIota(Value value, int64_t n) {
  value = skipReshapes(value);
  if (auto range = value.getDefiningOp<onnx::RangeOp>())
    return constantInt(range.getInputs()[0]) == 0 &&
           constantInt(range.getInputs()[1]) == n &&
           constantInt(range.getInputs()[2]) == 1;
  std::optional<SmallVector<int64_t>> ints = constantInts(value);
  if (!ints || static_cast<int64_t>(ints->size()) != n)
    return false;
  for (int64_t i = 0; i < n; ++i)
    if ((*ints)[i] != i)
      return false;
  return true;
}

/// Matches `Where(i in [ends[e-1], ends[e]), rows @ W[e], ...)` chained over
/// the E experts from `value`, the last link, down to zeros.
static FailureOr<GroupedMatMul>
matchMaskedGroupedMatMul(Value value, int64_t numExperts, Operation *anchor,
                         PatternRewriter &rewriter) {
  GroupedMatMul grouped;
  grouped.result = value;
  SmallVector<onnx::WhereOp> chain;
  for (int64_t e = 0; e < numExperts; ++e) {
    auto where = definedBy<onnx::WhereOp>(value);
    if (!where)
      return rewriter.notifyMatchFailure(anchor,
                                         "not one masked group per expert");
    chain.push_back(where);
    value = where.getInputs()[2];
  }
  if (!isZeroConstant(value))
    return rewriter.notifyMatchFailure(anchor, "groups do not start at zero");
  std::reverse(chain.begin(), chain.end());
  Value start;
  for (auto [e, where] : llvm::enumerate(chain)) {
    auto matmul = definedBy<onnx::MatMulOp>(where.getInputs()[1]);
    arith::ConstantOp weight =
        matmul ? constantOp(matmul.getInputs()[1]) : nullptr;
    auto inGroup = definedBy<onnx::AndOp>(where.getInputs()[0]);
    auto lower = inGroup
                     ? definedBy<onnx::GreaterOrEqualOp>(inGroup.getInputs()[0])
                     : nullptr;
    auto upper =
        inGroup ? definedBy<onnx::LessOp>(inGroup.getInputs()[1]) : nullptr;
    if (!weight || cast<RankedTensorType>(weight.getType()).getRank() != 2 ||
        !lower || !upper)
      return rewriter.notifyMatchFailure(
          where, "a group is not Where(row in range, rows @ W[e])");
    Value rows = skipNoOps(matmul.getInputs()[0]);
    int64_t numRows = cast<RankedTensorType>(rows.getType()).getDimSize(0);
    Value iota = lower.getInputs()[0];
    bool starts = e == 0 ? constantInt(lower.getInputs()[1]) == 0
                         : skipCasts(lower.getInputs()[1]) == skipCasts(start);
    if ((grouped.rows && rows != grouped.rows) || !starts ||
        skipNoOps(upper.getInputs()[0]) != skipNoOps(iota) ||
        !isIota(iota, numRows))
      return rewriter.notifyMatchFailure(
          where, "groups are not consecutive row ranges");
    grouped.rows = rows;
    grouped.perExpert.push_back(weight);
    start = upper.getInputs()[1];
    grouped.ends.push_back(start);
    grouped.ranges.push_back(where);
  }
  return grouped;
}

/// The grouped projection whose result (bias not added) is `value`.
static FailureOr<GroupedMatMul>
matchGroupedProjection(Value value, int64_t numExperts, Operation *anchor,
                       PatternRewriter &rewriter) {
  if (auto concat = definedBy<onnx::ConcatOp>(value))
    return matchGroupedMatMul(concat, numExperts, rewriter);
  return matchMaskedGroupedMatMul(value, numExperts, anchor, rewriter);
}

/// The constant `[E, out]` bias that `value` gathers by `ids` (Gather on
/// axis 0, or GatherND).
static arith::ConstantOp gatheredBias(Value value, Value ids) {
  Operation *op = skipNoOps(value).getDefiningOp();
  Value data, index;
  if (auto gather = dyn_cast_or_null<onnx::GatherOp>(op)) {
    if (hasIntAttr(gather, "axis", 0, 0))
      std::tie(data, index) =
          std::make_pair(gather.getInputs()[0], gather.getInputs()[1]);
  } else if (auto gather = dyn_cast_or_null<onnx::GatherNDOp>(op)) {
    std::tie(data, index) =
        std::make_pair(gather.getInputs()[0], gather.getInputs()[1]);
  }
  arith::ConstantOp bias = data ? constantOp(data) : nullptr;
  if (!bias || skipReshapes(index) != ids ||
      cast<RankedTensorType>(bias.getType()).getRank() != 2)
    return {};
  return bias;
}

/// `b[ids_sorted]` added to `grouped.result` (GPT-OSS's expert biases).
static void matchGroupedBias(GroupedMatMul &grouped, Value sortedIds) {
  Value result = grouped.result;
  if (!result.hasOneUse())
    return;
  auto add = dyn_cast<onnx::AddOp>(*result.getUsers().begin());
  if (!add)
    return;
  Value other = add.getInputs()[add.getInputs()[0] == result ? 1 : 0];
  if (arith::ConstantOp bias = gatheredBias(other, sortedIds)) {
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
  Value counts = skipCasts(cumsum.getInputs()[0]);
  Value bins;
  if (auto scatter = definedBy<onnx::ScatterElementsOp>(counts)) {
    // ScatterElements(zeros[E], bins, ones, reduction = add).
    auto reduction = scatter->getAttrOfType<StringAttr>("reduction");
    // A plain constant first: the folder stops at small tensors, and there
    // is one 1 per pick.
    std::optional<onnx_lowering::ConstTensor> ones =
        onnx_lowering::getConstant(skipNoOps(scatter.getInputs()[2]));
    if (!ones)
      ones = onnx_lowering::foldConstantExpression(scatter.getInputs()[2]);
    if (!reduction || reduction.getValue() != "add" ||
        !hasIntAttr(scatter, "axis", 0, 0) ||
        !isZeroConstant(scatter.getInputs()[0]) ||
        cast<RankedTensorType>(scatter.getInputs()[0].getType()).getShape() !=
            ArrayRef<int64_t>{numExperts} ||
        !ones ||
        llvm::any_of(llvm::seq<int64_t>(0, ones->size()),
                     [&](int64_t i) { return ones->asDouble(i) != 1; }))
      return rewriter.notifyMatchFailure(cumsum,
                                         "counts are not a histogram of ids");
    bins = scatter.getInputs()[1];
  } else if (auto sum = definedBy<onnx::ReduceSumOp>(counts)) {
    // ReduceSum(Equal(bins[:, None], arange(E)[None, :]), axis 0).
    auto equal = definedBy<onnx::EqualOp>(skipCasts(sum.getInputs()[0]));
    if (!equal || sum.getInputs().size() < 2 ||
        constantInts(sum.getInputs()[1]) != SmallVector<int64_t>{0} ||
        !hasIntAttr(sum, "keepdims", 1, 0))
      return rewriter.notifyMatchFailure(cumsum,
                                         "counts are not a histogram of ids");
    for (int i = 0; i < 2 && !bins; ++i)
      if (isIota(equal.getInputs()[1 - i], numExperts))
        bins = skipReshapes(equal.getInputs()[i]);
    if (!bins)
      return rewriter.notifyMatchFailure(equal, "ids are not binned by expert");
  } else {
    return rewriter.notifyMatchFailure(cumsum,
                                       "counts are not a histogram of ids");
  }
  if (!isIndexFunction(bins, sortedIds, numExperts,
                       [](int64_t id) { return id; }))
    return rewriter.notifyMatchFailure(cumsum,
                                       "histogram bins are not the expert ids");
  return success();
}

/// Whether the groups of `a` and `b` end at the same rows: the same values,
/// or the same elements of one cumsum.
static bool sameGroups(const GroupedMatMul &a, const GroupedMatMul &b) {
  for (auto [e, x, y] : llvm::enumerate(a.ends, b.ends)) {
    if (skipCasts(x) == skipCasts(y))
      continue;
    Value wx = elementOf(x, e), wy = elementOf(y, e);
    if (!wx || !wy || skipCasts(wx) != skipCasts(wy))
      return false;
  }
  return true;
}

/// The rows `data[index]` of a Gather (axis 0) or GatherND (an index with a
/// trailing 1): the index, where `data` is `from`.
static Value gatheredIndex(Operation *op, Value from) {
  if (auto gather = dyn_cast_or_null<onnx::GatherOp>(op))
    if (hasIntAttr(gather, "axis", 0, 0) &&
        skipReshapes(gather.getInputs()[0]) == skipReshapes(from))
      return gather.getInputs()[1];
  if (auto gather = dyn_cast_or_null<onnx::GatherNDOp>(op))
    if (hasIntAttr(gather, "batch_dims", 0, 0) &&
        skipReshapes(gather.getInputs()[0]) == skipReshapes(from))
      return gather.getInputs()[1];
  return {};
}

/// The pieces of a grouped-form block routed by `topk`.
struct SortedBlock {
  RouterMatch router;
  Value x; // [T, H]
  GroupedMatMul up, down;
  ActivationAttr activation;
  Value output; // [T, H]
};

static FailureOr<SortedBlock> matchSortedBlock(onnx::TopKOp topk,
                                               PatternRewriter &rewriter) {
  SortedBlock block;
  // The router's TopK, or (a sparse mixer has none) the sort itself.
  onnx::TopKOp sort;
  FailureOr<RouterMatch> router = failure();
  if (hasIntAttr(topk, "largest", 1, 0)) {
    router =
        matchSparseMixer(skipReshapes(topk.getInputs()[0]), topk, rewriter);
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

  // rows = x[perm // k].
  Value rows;
  for (Operation *user : block.x.getUsers())
    if (Value index = gatheredIndex(user, block.x))
      if (isIndexFunction(index, perm, pairs, [&](int64_t p) { return p / k; }))
        rows = user->getResult(0);
  // The experts may read other token rows than the router (a norm of
  // their own): any [T, H] gathered at perm // k.
  if (!rows) {
    SmallVector<Value> frontier{perm};
    for (unsigned depth = 0; depth < 4 && !rows; ++depth) {
      SmallVector<Value> next;
      for (Value value : frontier)
        for (Operation *user : value.getUsers()) {
          bool isGather = isa<onnx::GatherOp, onnx::GatherNDOp>(user);
          Value data = isGather ? skipNoOps(user->getOperand(0)) : Value();
          Value index = isGather ? gatheredIndex(user, data) : Value();
          auto dataType =
              data ? dyn_cast<RankedTensorType>(data.getType()) : nullptr;
          if (index && dataType && dataType.getRank() == 2 &&
              dataType.getDimSize(0) == xType.getDimSize(0) &&
              isIndexFunction(index, perm, pairs,
                              [&](int64_t p) { return p / k; })) {
            block.x = data;
            rows = user->getResult(0);
            break;
          }
          llvm::append_range(next, user->getResults());
        }
      frontier = std::move(next);
    }
  }
  if (!rows)
    return rewriter.notifyMatchFailure(sort, "no rows x[perm // k]");

  // The down projection is what w.flatten()[perm] scales.
  onnx::MulOp weighted;
  Value downResult;
  for (Operation *user : perm.getUsers())
    for (Operation *gather : user->getResult(0).getUsers())
      if (gatheredIndex(gather, router->weights) ||
          gatheredIndex(user, router->weights)) {
        Operation *scaleOp =
            gatheredIndex(user, router->weights) ? user : gather;
        SmallVector<Value> scales{scaleOp->getResult(0)};
        for (Operation *u : scaleOp->getResult(0).getUsers())
          if (isa<onnx::UnsqueezeOp, onnx::ReshapeOp>(u))
            scales.push_back(u->getResult(0));
        for (Value scale : scales)
          for (Operation *u : scale.getUsers())
            if (auto mul = dyn_cast<onnx::MulOp>(u)) {
              weighted = mul;
              downResult = mul.getInputs()[mul.getInputs()[0] == scale ? 1 : 0];
            }
      }
  if (!weighted)
    return rewriter.notifyMatchFailure(sort, "no rows scaled by w[perm]");
  // GPT-OSS adds b2[ids_sorted] after the grouped product.
  Value downProduct = downResult;
  if (auto add = definedBy<onnx::AddOp>(downResult))
    for (int i = 0; i < 2; ++i)
      if (gatheredBias(add.getInputs()[1 - i], sortedIds))
        downProduct = add.getInputs()[i];
  FailureOr<GroupedMatMul> down =
      matchGroupedProjection(downProduct, numExperts, weighted, rewriter);
  if (failed(down))
    return failure();
  matchGroupedBias(*down, sortedIds);
  if (down->result != downResult)
    return rewriter.notifyMatchFailure(weighted,
                                       "the down projection's bias differs");
  block.down = *down;

  // The up projection reads the rows: the concat of its groups, or the end
  // of its chain of masked groups.
  Value upResult;
  for (Operation *user : rows.getUsers()) {
    Operation *product = user;
    if (isa<onnx::GatherOp>(user) && user->getResult(0).hasOneUse())
      product = *user->getResult(0).getUsers().begin();
    if (!isa<onnx::MatMulOp>(product))
      continue;
    for (Operation *c : product->getResult(0).getUsers()) {
      if (isa<onnx::ConcatOp>(c))
        upResult = c->getResult(0);
      if (!isa<onnx::WhereOp>(c))
        continue;
      // Follow the chain: each link is the else of the next.
      Value link = c->getResult(0);
      for (bool more = true; more;) {
        more = false;
        for (Operation *next : link.getUsers())
          if (auto where = dyn_cast<onnx::WhereOp>(next))
            if (where.getInputs()[2] == link) {
              link = where.getOutputs()[0];
              more = true;
            }
      }
      upResult = link;
    }
  }
  if (!upResult)
    return rewriter.notifyMatchFailure(sort, "no grouped up projection");
  FailureOr<GroupedMatMul> up =
      matchGroupedProjection(upResult, numExperts, weighted, rewriter);
  if (failed(up) || up->rows != rows ||
      failed(matchGroupEnds(*up, sortedIds, numExperts, rewriter)))
    return rewriter.notifyMatchFailure(sort, "no grouped up projection");
  matchGroupedBias(*up, sortedIds);
  block.up = *up;
  if (!sameGroups(*up, *down))
    return rewriter.notifyMatchFailure(weighted,
                                       "projections group rows otherwise");
  if (up->perExpert.empty() != down->perExpert.empty())
    return rewriter.notifyMatchFailure(weighted,
                                       "projections hold weights otherwise");
  std::optional<ActivationAttr> activation =
      matchFusedSwiGLU(down->rows, up->result);
  if (!activation)
    activation =
        matchCustomActivation(down->rows, up->result, weighted, rewriter);
  if (!activation)
    return rewriter.notifyMatchFailure(
        weighted, "the activation is not a SwiGLU or elementwise ops on the "
                  "up projection");
  block.activation = *activation;

  // Unsorted by inverse(perm) = ScatterND(_, perm, arange), then summed
  // over the k picks of each token.
  if (!weighted.getOutputs()[0].hasOneUse())
    return rewriter.notifyMatchFailure(weighted, "weighted rows escape");
  Operation *unsort = *weighted.getOutputs()[0].getUsers().begin();
  Value inverseIndex = gatheredIndex(unsort, weighted.getOutputs()[0]);
  auto inverse = inverseIndex
                     ? definedBy<onnx::ScatterNDOp>(skipReshapes(inverseIndex))
                     : nullptr;
  if (!inverse || skipReshapes(inverse.getInputs()[1]) != perm ||
      !isIota(inverse.getInputs()[2], pairs))
    return rewriter.notifyMatchFailure(weighted,
                                       "rows are not put back in token order");
  Value unsorted = unsort->getResult(0);
  if (!unsorted.hasOneUse())
    return rewriter.notifyMatchFailure(unsort, "unsorted rows escape");
  auto reshape = dyn_cast<onnx::ReshapeOp>(*unsorted.getUsers().begin());
  auto perToken =
      reshape ? dyn_cast<RankedTensorType>(reshape.getOutputs()[0].getType())
              : RankedTensorType();
  auto sum = reshape && reshape.getOutputs()[0].hasOneUse()
                 ? dyn_cast<onnx::ReduceSumOp>(
                       *reshape.getOutputs()[0].getUsers().begin())
                 : nullptr;
  if (!perToken ||
      perToken.getShape() != ArrayRef<int64_t>{xType.getDimSize(0), k,
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
    auto pack = [&](const GroupedMatMul &grouped, StringRef name) {
      return grouped.perExpert.empty()
                 ? transposeExpertWeights(grouped.weight, name, loc, rewriter)
                 : stackExpertWeights(grouped.perExpert, name, loc, rewriter);
    };
    FailureOr<Value> fc1 = pack(block->up, "experts_fc1");
    FailureOr<Value> fc2 = pack(block->down, "experts_fc2");
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
    return replaceByLayer(spec, block->router, block->output, topk, rewriter);
  }
};

} // namespace

void populateSortedExpertsPatterns(RewritePatternSet &patterns) {
  patterns.add<RaiseSortedExperts>(patterns.getContext());
}

} // namespace mlir::moe::raise
