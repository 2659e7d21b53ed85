//===- MoEToRuntime.cpp - dispatch and experts as runtime calls -----------===//
//
// The reference lowering dispatches tokens with a loop over the (token,
// slot) pairs that copies one row at a time: on a GPU, a host loop over
// device memory. A dropless moe.dispatch becomes one runtime call instead
// (moert_dispatch: a counting sort on the CPU; moert_cuda_dispatch: the
// permutation kernels), and for CUDA so does a capacity dispatch
// (moert_cuda_dispatch_capacity, into the padded buffer; the probs policy
// first gives id -1 to the pairs that C others outrank).
//
// The reference lowering runs moe.experts as a loop over its groups, each
// with its own slices, matmuls and activation. Here each projection of all
// groups is one grouped GEMM in the runtime (moert_grouped_matmul: a oneDNN
// matmul per group on the CPU; moert_cuda_grouped_matmul: one cuBLAS
// grouped call on the GPU), reading the [out, in] weights in place, and the
// activation is one elementwise op over all rows. Biases are the runtime's
// too (each group's rows start as its expert's bias). The runtime checks the
// counts and zeroes the rows outside every group, as the reference does.
//
// For CUDA, a top-k or grouped top-k moe.router (softmax or sigmoid scores,
// a selection bias or none) is the fused gating kernel (moert_cuda_router:
// one warp per token) and
// moe.combine the weighted un-permute (moert_cuda_combine), where the
// reference lowering would launch a kernel per step (scores, k rounds of
// argmax, normalization; a gather per slot). On the CPU both stay compiled
// loops, which fuse with their neighbours and vectorize. moe.place is one
// kernel (moert_cuda_place) for CUDA too.
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/MoEToLinalg/Lowering.h"
#include "passes/Passes.h"
#include "passes/Runtime/RuntimeCalls.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <limits>

namespace mlir::moe {
#define GEN_PASS_DEF_CONVERTMOETORUNTIMEPASS
#include "passes/Passes.h.inc"

using namespace runtime;

namespace {

/// Where the pattern calls `name`: moert_`name` or moert_cuda_`name`.
std::string callee(StringRef target, StringRef name) {
  return (target == "cuda" ? "moert_cuda_" : "moert_") + name.str();
}

/// Rows per logical expert up to which the CPU's expert GEMMs take the
/// runtime's few-rows kernel (memory-bound: each weight read once).
constexpr int64_t kFewRows = 8;

/// True for the element types the CUDA kernels read: f32, f16, bf16.
bool isCudaFloat(Type type) {
  return type.isF32() || type.isF16() || type.isBF16();
}

struct DispatchToRuntime final : OpRewritePattern<DispatchOp> {
  DispatchToRuntime(MLIRContext *context, StringRef target)
      : OpRewritePattern(context), target(target) {}

  LogicalResult matchAndRewrite(DispatchOp op,
                                PatternRewriter &rewriter) const override {
    bool capacity = !op.isDropless();
    if (capacity && target != "cuda")
      return rewriter.notifyMatchFailure(op, "capacity dispatch on the CPU "
                                             "keeps the reference lowering");
    bool probs = capacity && op.getDropPolicy() == DropPolicy::Probs;
    auto inputType = cast<RankedTensorType>(op.getInput().getType());
    auto idsType = cast<RankedTensorType>(op.getIds().getType());
    auto rowsType = cast<RankedTensorType>(op.getRows().getType());
    Type element = inputType.getElementType();
    std::optional<int32_t> code = dtypeCode(element);
    if (!code || (target == "cuda" && !isCudaFloat(element)))
      return rewriter.notifyMatchFailure(op, "an element type the runtime "
                                             "does not move");
    Location loc = op.getLoc();
    Value ids = op.getIds(), outranked;
    if (probs)
      std::tie(ids, outranked) = keepBestWeighted(rewriter, loc, op);
    Value rows = newBuffer(rewriter, loc, rowsType);
    Value slots = newBuffer(rewriter, loc,
                            cast<RankedTensorType>(op.getSlots().getType()));
    auto countsType = cast<RankedTensorType>(op.getCounts().getType());
    Value counts = newBuffer(rewriter, loc, countsType);
    SmallVector<Value> args = {
        i32Const(rewriter, loc, *code),
        readPointer(rewriter, loc, op.getInput()),
        i64Const(rewriter, loc, inputType.getDimSize(0)),
        i64Const(rewriter, loc, inputType.getDimSize(1)),
        readPointer(rewriter, loc, ids),
        i64Const(rewriter, loc, idsType.getDimSize(1)),
        i64Const(rewriter, loc, countsType.getDimSize(0))};
    if (!capacity) {
      args.append({dataPointer(rewriter, loc, rows),
                   dataPointer(rewriter, loc, slots),
                   dataPointer(rewriter, loc, counts)});
      call(rewriter, loc, callee(target, "dispatch"), args);
      // Dropless: nothing is dropped.
      Value dropped = arith::ConstantOp::create(
          rewriter, loc,
          DenseElementsAttr::get(cast<ShapedType>(op.getDropped().getType()),
                                 rewriter.getI64IntegerAttr(0).getValue()));
      rewriter.replaceOp(op, {asTensor(rewriter, loc, rows),
                              asTensor(rewriter, loc, slots),
                              asTensor(rewriter, loc, counts), dropped});
      return success();
    }
    // Capacity: rows [E, B, H], expert e's from row e * B.
    Value dropped = newBuffer(rewriter, loc,
                              cast<RankedTensorType>(op.getDropped().getType()));
    Value after = op.getOffsets()
                      ? readPointer(rewriter, loc, op.getOffsets())
                      : LLVM::ZeroOp::create(
                            rewriter, loc,
                            LLVM::LLVMPointerType::get(rewriter.getContext()))
                            .getResult();
    bool choiceMajor = op.getDropPolicy() == DropPolicy::Choice;
    args.append({i64Const(rewriter, loc, *op.getCapacity()),
                 i32Const(rewriter, loc, choiceMajor ? 1 : 0), after,
                 i64Const(rewriter, loc, rowsType.getDimSize(1)),
                 dataPointer(rewriter, loc, rows),
                 dataPointer(rewriter, loc, slots),
                 dataPointer(rewriter, loc, counts),
                 dataPointer(rewriter, loc, dropped)});
    call(rewriter, loc, "moert_cuda_dispatch_capacity", args);
    Value lost = asTensor(rewriter, loc, dropped);
    if (outranked) {
      // Added as one-element vectors: a kernel, where a 0-d op would be
      // host code waiting for the GPU.
      auto one = RankedTensorType::get({1}, rewriter.getI64Type());
      Value sum = lowering::mapElements(
          rewriter, loc, one,
          {tensor::ExpandShapeOp::create(rewriter, loc, one, lost,
                                         ArrayRef<ReassociationIndices>{}),
           outranked},
          {}, [](OpBuilder &nb, Location nloc, ValueRange counts) -> Value {
            return arith::AddIOp::create(nb, nloc, counts[0], counts[1]);
          });
      lost = tensor::CollapseShapeOp::create(
          rewriter, loc, cast<RankedTensorType>(lost.getType()), sum,
          ArrayRef<ReassociationIndices>{});
    }
    rewriter.replaceOp(op, {asTensor(rewriter, loc, rows),
                            asTensor(rewriter, loc, slots),
                            asTensor(rewriter, loc, counts), lost});
    return success();
  }

  /// The `probs` policy on the position-policy kernels: each expert keeps
  /// the C pairs with the largest weights, in token order. Pairs that C
  /// others outrank get id -1, so the kernels place the rest as the
  /// reference does; returns those ids and how many routed pairs they took
  /// out (i64 `[1]`), which count as dropped.
  static std::pair<Value, Value> keepBestWeighted(PatternRewriter &rewriter,
                                                  Location loc, DispatchOp op) {
    Value ids = op.getIds();
    auto idsType = cast<RankedTensorType>(ids.getType());
    Value ranks = lowering::probsRanks(rewriter, loc, ids, op.getWeights());
    Type i32 = rewriter.getI32Type();
    Value kept = lowering::mapElements(
        rewriter, loc, idsType, {ids, ranks}, {},
        [&](OpBuilder &nb, Location nloc, ValueRange args) -> Value {
          Value outranked = arith::CmpIOp::create(
              nb, nloc, arith::CmpIPredicate::sge, args[1],
              lowering::scalarConst(nb, nloc, i32, *op.getCapacity()));
          return arith::SelectOp::create(
              nb, nloc, outranked, lowering::scalarConst(nb, nloc, i32, -1),
              args[0]);
        });
    // Loops (one, t, j): one kernel thread counts them all.
    AffineMap pair = lowering::loopsTo(rewriter, 3, {1, 2});
    Value routedAway = lowering::reduce(
        rewriter, loc, {ids, kept}, {pair, pair},
        RankedTensorType::get({1}, rewriter.getI64Type()), 0.0, {0},
        [&](OpBuilder &nb, Location nloc, ValueRange args) -> Value {
          Value routed = arith::CmpIOp::create(
              nb, nloc, arith::CmpIPredicate::ult, args[0],
              lowering::scalarConst(nb, nloc, i32, op.getNumExperts()));
          Value takenOut = arith::CmpIOp::create(
              nb, nloc, arith::CmpIPredicate::ne, args[0], args[1]);
          Value lost = arith::AndIOp::create(nb, nloc, routed, takenOut);
          return lowering::countIf(nb, nloc, lost, args[2]);
        });
    return {kept, routedAway};
  }

  std::string target;
};

struct RouterToRuntime final : OpRewritePattern<RouterOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(RouterOp op,
                                PatternRewriter &rewriter) const override {
    bool grouped = op.getSelection() == SelectionMethod::GroupedTopK;
    if (op.getSelection() != SelectionMethod::TopK && !grouped)
      return rewriter.notifyMatchFailure(op, "only top-k and grouped top-k "
                                             "run as the fused gating kernel");
    if (grouped && *op.getNumGroups() > 32)
      return rewriter.notifyMatchFailure(op, "more than 32 groups");
    auto logitsType = cast<RankedTensorType>(op.getLogits().getType());
    Type element = logitsType.getElementType();
    if (!isCudaFloat(element))
      return rewriter.notifyMatchFailure(op, "not f32, f16 or bf16 logits");
    int64_t tokens = logitsType.getDimSize(0);
    int64_t experts = logitsType.getDimSize(1);
    int64_t k = op.getIds().getType().getDimSize(1);
    // The kernel's limits: one warp holds the k picks, one block's shared
    // memory the scores.
    if (k > 32 || experts > 4096)
      return rewriter.notifyMatchFailure(op, "more than 32 picks or 4096 "
                                             "experts");
    Location loc = op.getLoc();
    Value weights = newBuffer(rewriter, loc, op.getWeights().getType());
    Value ids = newBuffer(rewriter, loc, op.getIds().getType());
    int32_t scoring = op.getScoring() == ScoringFunction::Softmax
                          ? /*MOERT_CUDA_SOFTMAX_TOPK*/ 0
                          : /*MOERT_CUDA_SIGMOID_TOPK*/ 2;
    auto f64 = [&](double value) -> Value {
      return arith::ConstantOp::create(rewriter, loc,
                                       rewriter.getF64FloatAttr(value));
    };
    Value bias = op.getBias()
                     ? readPointer(rewriter, loc, op.getBias())
                     : LLVM::ZeroOp::create(
                           rewriter, loc,
                           LLVM::LLVMPointerType::get(rewriter.getContext()))
                           .getResult();
    int64_t groups = grouped ? *op.getNumGroups() : 0;
    int64_t groupTopk = grouped ? *op.getGroupTopk() : 0;
    int32_t groupScore =
        grouped && *op.getGroupScore() == GroupScore::Top2Sum ? 1 : 0;
    double masked = op.getMaskedScore()
                        ? op.getMaskedScore()->convertToDouble()
                        : -std::numeric_limits<double>::infinity();
    call(rewriter, loc, "moert_cuda_router",
         {i32Const(rewriter, loc, *dtypeCode(element)),
          readPointer(rewriter, loc, op.getLogits()),
          i64Const(rewriter, loc, tokens), i64Const(rewriter, loc, experts),
          i64Const(rewriter, loc, k), i32Const(rewriter, loc, scoring),
          i32Const(rewriter, loc, op.getNormalize()),
          f64(op.getScalingFactor().convertToDouble()), bias,
          i64Const(rewriter, loc, groups), i64Const(rewriter, loc, groupTopk),
          i32Const(rewriter, loc, groupScore), f64(masked),
          dataPointer(rewriter, loc, weights), dataPointer(rewriter, loc, ids)});
    rewriter.replaceOp(op, {asTensor(rewriter, loc, ids),
                            asTensor(rewriter, loc, weights)});
    return success();
  }
};

struct CombineToRuntime final : OpRewritePattern<CombineOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(CombineOp op,
                                PatternRewriter &rewriter) const override {
    auto rowsType = cast<RankedTensorType>(op.getRows().getType());
    Type element = rowsType.getElementType();
    if (!isCudaFloat(element))
      return rewriter.notifyMatchFailure(op, "not f32, f16 or bf16 rows");
    Location loc = op.getLoc();
    // Capacity rows [G, C, M] are read as G * C rows.
    Value rows = op.getRows();
    int64_t width = rowsType.getShape().back();
    if (rowsType.getRank() == 3)
      rows = tensor::CollapseShapeOp::create(
          rewriter, loc,
          RankedTensorType::get({rowsType.getNumElements() / width, width},
                                element),
          rows, ArrayRef<ReassociationIndices>{{0, 1}, {2}});
    auto slotsType = op.getSlots().getType();
    Value out = newBuffer(rewriter, loc, op.getType());
    call(rewriter, loc, "moert_cuda_combine",
         {i32Const(rewriter, loc, *dtypeCode(element)),
          readPointer(rewriter, loc, rows),
          i64Const(rewriter, loc, slotsType.getDimSize(0)),
          i64Const(rewriter, loc, width),
          i64Const(rewriter, loc, slotsType.getDimSize(1)),
          readPointer(rewriter, loc, op.getSlots()),
          readPointer(rewriter, loc, op.getWeights()),
          dataPointer(rewriter, loc, out)});
    rewriter.replaceOp(op, asTensor(rewriter, loc, out));
    return success();
  }
};

/// moe.place as one kernel on the device (moert_cuda_place), where the
/// reference lowering's scans would be host loops over device memory.
struct PlaceToRuntime final : OpRewritePattern<PlaceOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(PlaceOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    int64_t slots = op.getTable().getType().getDimSize(0);
    if (slots > 3072)
      return rewriter.notifyMatchFailure(
          op, "more slots than the kernel's shared memory holds");
    Value out = newBuffer(rewriter, loc, op.getType());
    Value source =
        op.getSource()
            ? Value(arith::IndexCastOp::create(rewriter, loc,
                                               rewriter.getI64Type(),
                                               op.getSource()))
            : i64Const(rewriter, loc, 0);
    call(rewriter, loc, "moert_cuda_place",
         {readPointer(rewriter, loc, op.getIds()),
          i64Const(rewriter, loc, op.getIds().getType().getNumElements()),
          readPointer(rewriter, loc, op.getTable()),
          i64Const(rewriter, loc, slots),
          i64Const(rewriter, loc, static_cast<int64_t>(op.getRanks())), source,
          dataPointer(rewriter, loc, out)});
    rewriter.replaceOp(op, asTensor(rewriter, loc, out));
    return success();
  }
};

/// moert_cuda_grouped_matmul_pair: x W1^T (+ b1) and x W3^T (+ b3) of an
/// experts op whose fc1 and fc3 weights have one type.
std::pair<Value, Value> projectPair(PatternRewriter &rewriter, Location loc,
                                    ExpertsOp op, Value x, Value counts,
                                    int32_t code, int64_t groups,
                                    int64_t groupStride, int64_t rows,
                                    Value noBias) {
  auto weightType = cast<RankedTensorType>(op.getFc1Weight().getType());
  int64_t out = weightType.getDimSize(1), in = weightType.getDimSize(2);
  auto resultType = RankedTensorType::get(
      {rows, out}, cast<RankedTensorType>(x.getType()).getElementType());
  Value c1 = newBuffer(rewriter, loc, resultType);
  Value c3 = newBuffer(rewriter, loc, resultType);
  auto bias = [&](Value b) { return b ? readPointer(rewriter, loc, b) : noBias; };
  call(rewriter, loc, "moert_cuda_grouped_matmul_pair",
       {i32Const(rewriter, loc, code), i64Const(rewriter, loc, groups),
        i64Const(rewriter, loc, op.getNumExperts()), counts,
        i64Const(rewriter, loc, groupStride), i64Const(rewriter, loc, rows),
        i64Const(rewriter, loc, in), i64Const(rewriter, loc, out),
        readPointer(rewriter, loc, x),
        readPointer(rewriter, loc, op.getFc1Weight()), bias(op.getFc1Bias()),
        dataPointer(rewriter, loc, c1),
        readPointer(rewriter, loc, op.getFc3Weight()), bias(op.getFc3Bias()),
        dataPointer(rewriter, loc, c3)});
  return {asTensor(rewriter, loc, c1), asTensor(rewriter, loc, c3)};
}

struct ExpertsToRuntime final : OpRewritePattern<ExpertsOp> {
  ExpertsToRuntime(MLIRContext *context, StringRef target)
      : OpRewritePattern(context), target(target) {}

  LogicalResult matchAndRewrite(ExpertsOp op,
                                PatternRewriter &rewriter) const override {
    auto rowsType = cast<RankedTensorType>(op.getRows().getType());
    auto outType = cast<RankedTensorType>(op.getType());
    if (!rowsType.hasStaticShape())
      return rewriter.notifyMatchFailure(op, "dynamic row buffer");
    Type element = rowsType.getElementType();
    std::optional<int32_t> code = dtypeCode(element);
    bool supported =
        target == "cuda" ? isCudaFloat(element) : element.isF32();
    if (!code || !supported)
      return rewriter.notifyMatchFailure(
          op, target == "cuda" ? "not f32, f16 or bf16 rows" : "not f32 rows");

    Location loc = op.getLoc();
    // Capacity rows [G, C, H] are G * C rows, group g from row g * C.
    bool capacity = rowsType.getRank() == 3;
    int64_t hidden = rowsType.getShape().back();
    int64_t rows = rowsType.getNumElements() / hidden;
    int64_t groupStride = capacity ? rowsType.getDimSize(1) : 0;
    Value x = op.getRows();
    if (capacity)
      x = tensor::CollapseShapeOp::create(
          rewriter, loc, RankedTensorType::get({rows, hidden}, element), x,
          ArrayRef<ReassociationIndices>{{0, 1}, {2}});
    int64_t groups = op.getCounts().getType().getDimSize(0);
    int64_t experts = op.getNumExperts();
    Value counts = readPointer(rewriter, loc, op.getCounts());
    if (target == "cuda")
      counts = countsOnHost(rewriter, loc, op, counts, groups);

    Value noBias =
        LLVM::ZeroOp::create(rewriter, loc,
                             LLVM::LLVMPointerType::get(rewriter.getContext()))
            .getResult();
    // rows x W^T (+ b) for a stacked weight [E, out, in] and bias [E, out],
    // all groups at once.
    // A few rows per expert (decode): the runtime's streaming kernel for
    // every group. Decided by the layer's shape, the routing choices over
    // its logical experts, so that slots (moe-place-experts) do not change
    // the path a row takes and with it its bits.
    auto logical = op->getAttrOfType<IntegerAttr>(kLogicalExpertsAttrName);
    int64_t perExpert = rows / std::max<int64_t>(
                                   logical ? logical.getInt() : groups, 1);
    bool fewRows = target == "cpu" && !capacity && perExpert <= kFewRows;
    // Dropless groups are packed from row 0. On the CPU the hidden
    // projections and the activation cover their rows only, [0, used): the
    // buffer's other rows (up to all of them again on an EP rank) are read
    // by no one but would cost a zero fill and an activation. The output
    // keeps its zeroed rows.
    Value usedRows, allRows = i64Const(rewriter, loc, rows);
    if (target == "cpu" && !capacity)
      usedRows = packedRows(rewriter, loc, op.getCounts(), groups, rows);
    auto project = [&](Value input, Value weight, Value bias,
                       Value extent) -> Value {
      auto weightType = cast<RankedTensorType>(weight.getType());
      int64_t out = weightType.getDimSize(1), in = weightType.getDimSize(2);
      Value result =
          newBuffer(rewriter, loc, RankedTensorType::get({rows, out}, element));
      // The same operands; the few-rows call takes dropless rows, no stride.
      SmallVector<Value> operands = {
          i32Const(rewriter, loc, *code), i64Const(rewriter, loc, groups),
          i64Const(rewriter, loc, experts), counts,
          extent, i64Const(rewriter, loc, in),
          i64Const(rewriter, loc, out), readPointer(rewriter, loc, input),
          readPointer(rewriter, loc, weight),
          bias ? readPointer(rewriter, loc, bias) : noBias,
          dataPointer(rewriter, loc, result)};
      if (!fewRows)
        operands.insert(operands.begin() + 4,
                        i64Const(rewriter, loc, groupStride));
      call(rewriter, loc,
           fewRows ? std::string("moert_grouped_matmul_few_rows")
                   : callee(target, "grouped_matmul"),
           operands);
      return asTensor(rewriter, loc, result);
    };
    Value h1, h3;
    if (target == "cuda" && op.getFc3Weight() &&
        op.getFc3Weight().getType() == op.getFc1Weight().getType()) {
      // A gated FFN's gate and up projections read the same rows: one
      // cuBLAS grouped call for both.
      std::tie(h1, h3) = projectPair(rewriter, loc, op, x, counts, *code,
                                     groups, groupStride, rows, noBias);
    } else {
      Value extent = usedRows ? usedRows : allRows;
      h1 = project(x, op.getFc1Weight(), op.getFc1Bias(), extent);
      if (op.getFc3Weight())
        h3 = project(x, op.getFc3Weight(), op.getFc3Bias(), extent);
    }
    if (usedRows) {
      Value used = arith::IndexCastOp::create(
          rewriter, loc, rewriter.getIndexType(), usedRows);
      auto head = [&](Value h) -> Value {
        if (!h)
          return h;
        int64_t columns = cast<RankedTensorType>(h.getType()).getDimSize(1);
        return tensor::ExtractSliceOp::create(
            rewriter, loc, h,
            ArrayRef<OpFoldResult>{rewriter.getIndexAttr(0),
                                   rewriter.getIndexAttr(0)},
            ArrayRef<OpFoldResult>{used, rewriter.getIndexAttr(columns)},
            ArrayRef<OpFoldResult>{rewriter.getIndexAttr(1),
                                   rewriter.getIndexAttr(1)});
      };
      h1 = head(h1);
      h3 = head(h3);
    }
    int64_t width = op.getFc2Weight().getType().getDimSize(2);
    Value activated = lowering::applyActivation(
        rewriter, loc, h1, h3,
        lowering::ScalarActivation::resolve(op, op.getActivation()), width);
    Value y = project(activated, op.getFc2Weight(), op.getFc2Bias(), allRows);
    if (capacity)
      y = tensor::ExpandShapeOp::create(
          rewriter, loc, outType, y,
          ArrayRef<ReassociationIndices>{{0, 1}, {2}});
    rewriter.replaceOp(op, y);
    return success();
  }

  /// The rows the packed groups of `counts` take, as i64: the sum of the
  /// counts, negative ones as 0, at most `rows` (a negative count or more
  /// rows than that are the runtime's errors to report, each with its own
  /// message).
  static Value packedRows(PatternRewriter &rewriter, Location loc,
                          Value counts, int64_t groups, int64_t rows) {
    Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
    Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
    Value total = scf::ForOp::create(
                      rewriter, loc, zero,
                      arith::ConstantIndexOp::create(rewriter, loc, groups),
                      one, ValueRange{i64Const(rewriter, loc, 0)},
                      [&](OpBuilder &b, Location l, Value g, ValueRange sum) {
                        Value count = arith::MaxSIOp::create(
                            b, l,
                            arith::ExtSIOp::create(
                                b, l, b.getI64Type(),
                                tensor::ExtractOp::create(b, l, counts, g)),
                            i64Const(b, l, 0));
                        scf::YieldOp::create(
                            b, l,
                            ValueRange{arith::AddIOp::create(b, l, sum[0],
                                                             count)});
                      })
                      .getResult(0);
    return arith::MinSIOp::create(rewriter, loc, total,
                                  i64Const(rewriter, loc, rows));
  }

  /// cuBLAS takes group sizes on the host: the device counts are read once
  /// (the one wait for the GPU in the experts op) into a host buffer at the
  /// function's entry, whose address every projection's call takes.
  static Value countsOnHost(PatternRewriter &rewriter, Location loc,
                            ExpertsOp op, Value counts, int64_t groups) {
    Value host;
    {
      OpBuilder::InsertionGuard guard(rewriter);
      auto func = op->getParentOfType<FunctionOpInterface>();
      rewriter.setInsertionPointToStart(&func.getFunctionBody().front());
      host = memref::AllocaOp::create(
          rewriter, loc, MemRefType::get({groups}, rewriter.getI32Type()));
    }
    Value hostCounts = dataPointer(rewriter, loc, host);
    call(rewriter, loc, "moert_cuda_read_counts",
         {counts, i64Const(rewriter, loc, groups), hostCounts});
    return hostCounts;
  }

  std::string target;
};

struct ConvertMoEToRuntimePass
    : public impl::ConvertMoEToRuntimePassBase<
          ConvertMoEToRuntimePass> {
  using Base::Base;

  void runOnOperation() override {
    if (target != "cpu" && target != "cuda") {
      emitError(getOperation().getLoc())
          << "convert-moe-to-runtime: unknown target '" << target
          << "' (expected cpu or cuda)";
      return signalPassFailure();
    }
    RewritePatternSet patterns(&getContext());
    patterns.add<DispatchToRuntime, ExpertsToRuntime>(&getContext(), target);
    if (target == "cuda")
      patterns.add<RouterToRuntime, CombineToRuntime, PlaceToRuntime>(
          &getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    eraseUnusedActivationBodies(getOperation());
  }
};

} // namespace
} // namespace mlir::moe
