//===- MoEToRuntime.cpp - dispatch and experts as runtime calls -----------===//
//
// The reference lowering dispatches tokens with a loop over the (token,
// slot) pairs that copies one row at a time: on a GPU, a host loop over
// device memory. A dropless moe.dispatch becomes one runtime call instead
// (moert_dispatch: a counting sort on the CPU; moert_cuda_dispatch: the
// permutation kernels).
//
// The reference lowering runs moe.experts as a loop over its groups, each
// with its own slices, matmuls and activation. Here each projection of all
// groups is one grouped GEMM in the runtime (moert_grouped_matmul: a oneDNN
// matmul per group on the CPU; moert_cuda_grouped_matmul: one cuBLAS
// grouped call on the GPU), reading the [out, in] weights in place, and the
// activation is one elementwise op over all rows. The runtime checks the
// counts and zeroes the rows outside every group, as the reference does.
// Experts with biases keep the reference lowering.
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/MoEToLinalg/Lowering.h"
#include "passes/Passes.h"
#include "passes/Runtime/RuntimeCalls.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::moe {
#define GEN_PASS_DEF_CONVERTMOETORUNTIMEPASS
#include "passes/Passes.h.inc"

using namespace runtime;

namespace {

/// Where the pattern calls `name`: moert_`name` or moert_cuda_`name`.
std::string callee(StringRef target, StringRef name) {
  return (target == "cuda" ? "moert_cuda_" : "moert_") + name.str();
}

struct DispatchToRuntime final : OpRewritePattern<DispatchOp> {
  DispatchToRuntime(MLIRContext *context, StringRef target)
      : OpRewritePattern(context), target(target) {}

  LogicalResult matchAndRewrite(DispatchOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.isDropless() || op.getOffsets())
      return rewriter.notifyMatchFailure(op, "capacity dispatch keeps the "
                                             "reference lowering");
    auto inputType = cast<RankedTensorType>(op.getInput().getType());
    auto idsType = cast<RankedTensorType>(op.getIds().getType());
    auto rowsType = cast<RankedTensorType>(op.getRows().getType());
    if (!inputType.hasStaticShape() || !idsType.hasStaticShape())
      return rewriter.notifyMatchFailure(op, "dynamic shapes");
    Type element = inputType.getElementType();
    std::optional<int32_t> code = dtypeCode(element);
    if (!code || (target == "cuda" && !element.isF32() && !element.isF16() &&
                  !element.isBF16()))
      return rewriter.notifyMatchFailure(op, "an element type the runtime "
                                             "does not move");
    Location loc = op.getLoc();
    Value rows = newBuffer(rewriter, loc, rowsType);
    Value slots = newBuffer(rewriter, loc,
                            cast<RankedTensorType>(op.getSlots().getType()));
    auto countsType = cast<RankedTensorType>(op.getCounts().getType());
    Value counts = newBuffer(rewriter, loc, countsType);
    call(rewriter, loc, callee(target, "dispatch"),
         {i32Const(rewriter, loc, *code),
          readPointer(rewriter, loc, op.getInput()),
          i64Const(rewriter, loc, inputType.getDimSize(0)),
          i64Const(rewriter, loc, inputType.getDimSize(1)),
          readPointer(rewriter, loc, op.getIds()),
          i64Const(rewriter, loc, idsType.getDimSize(1)),
          i64Const(rewriter, loc, countsType.getDimSize(0)),
          dataPointer(rewriter, loc, rows), dataPointer(rewriter, loc, slots),
          dataPointer(rewriter, loc, counts)});
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

  std::string target;
};

struct ExpertsToRuntime final : OpRewritePattern<ExpertsOp> {
  ExpertsToRuntime(MLIRContext *context, StringRef target)
      : OpRewritePattern(context), target(target) {}

  LogicalResult matchAndRewrite(ExpertsOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getFc1Bias() || op.getFc3Bias() || op.getFc2Bias())
      return rewriter.notifyMatchFailure(op, "biases keep the reference "
                                             "lowering");
    auto rowsType = cast<RankedTensorType>(op.getRows().getType());
    auto outType = cast<RankedTensorType>(op.getType());
    if (!rowsType.hasStaticShape())
      return rewriter.notifyMatchFailure(op, "dynamic row buffer");
    Type element = rowsType.getElementType();
    std::optional<int32_t> code = dtypeCode(element);
    bool supported = element.isF32() ||
                     (target == "cuda" && (element.isF16() || element.isBF16()));
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

    // rows x W^T for a stacked weight [E, out, in], all groups at once.
    auto project = [&](Value input, Value weight) -> Value {
      auto weightType = cast<RankedTensorType>(weight.getType());
      int64_t out = weightType.getDimSize(1), in = weightType.getDimSize(2);
      Value result =
          newBuffer(rewriter, loc, RankedTensorType::get({rows, out}, element));
      call(rewriter, loc, callee(target, "grouped_matmul"),
           {i32Const(rewriter, loc, *code), i64Const(rewriter, loc, groups),
            i64Const(rewriter, loc, experts), counts,
            i64Const(rewriter, loc, groupStride),
            i64Const(rewriter, loc, rows), i64Const(rewriter, loc, in),
            i64Const(rewriter, loc, out), readPointer(rewriter, loc, input),
            readPointer(rewriter, loc, weight),
            dataPointer(rewriter, loc, result)});
      return asTensor(rewriter, loc, result);
    };
    Value h1 = project(x, op.getFc1Weight());
    Value h3 = op.getFc3Weight() ? project(x, op.getFc3Weight()) : Value();
    int64_t width = op.getFc2Weight().getType().getDimSize(2);
    Value activated = lowering::applyActivation(rewriter, loc, h1, h3,
                                                op.getActivation(), width);
    Value y = project(activated, op.getFc2Weight());
    if (capacity)
      y = tensor::ExpandShapeOp::create(
          rewriter, loc, outType, y,
          ArrayRef<ReassociationIndices>{{0, 1}, {2}});
    rewriter.replaceOp(op, y);
    return success();
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
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace mlir::moe
