//===- MatmulToRuntime.cpp - contractions as tuned BLAS calls -------------===//
//
// On buffers, every linalg contraction with one m, one n and one k loop
// (the expert FFNs' matmuls, ONNX MatMul and Gemm, batched or not) becomes
// a runtime call on strided views: moert_matmul_f32 (oneDNN) on the CPU,
// moert_cuda_matmul (cuBLAS; f32, f16 and bf16) with --target=cuda. The
// innermost m, n and k loops are the GEMM's; the innermost loop that the
// output has besides them (a batch, or a broadcast operand's extra m dim)
// is the call's batch, one batched GEMM (attention's heads); every other
// loop (more batch dims, extra reduction dims, which accumulate) becomes an
// scf.for around the call. Each operand's stride along a loop
// comes from its indexing map and its strided metadata, so transposed and
// broadcast operands need no copies. A zero fill of the output just before
// the contraction is dropped and the call overwrites instead of adding: one
// pass less over the output. Matmuls that the expert lowering marked
// `moe.expert_gemm` are recorded as expert GEMMs for `moe-run --stats`.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/Runtime/RuntimeCalls.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::moe {
#define GEN_PASS_DEF_CONVERTMATMULTORUNTIMEPASS
#include "passes/Passes.h.inc"

using namespace runtime;

namespace {

/// One operand's base pointer, element offset and stride along each loop.
struct StridedOperand {
  Value pointer;
  Value offset;                  // index
  SmallVector<Value> loopStride; // index, one per loop (0 when absent)
};

StridedOperand describe(OpBuilder &b, Location loc, Value memref,
                        AffineMap map) {
  auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, memref);
  StridedOperand operand;
  operand.pointer = dataPointer(b, loc, metadata.getBaseBuffer());
  operand.offset = metadata.getOffset();
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  operand.loopStride.assign(map.getNumDims(), zero);
  for (auto [position, expr] : llvm::enumerate(map.getResults())) {
    unsigned loop = cast<AffineDimExpr>(expr).getPosition();
    operand.loopStride[loop] =
        arith::AddIOp::create(b, loc, operand.loopStride[loop],
                              metadata.getStrides()[position]);
  }
  return operand;
}

Value toI64(OpBuilder &b, Location loc, Value index) {
  return arith::IndexCastOp::create(b, loc, b.getI64Type(), index);
}

/// The pointer to the `element` at `offset` (index) past `pointer`.
Value advance(OpBuilder &b, Location loc, Value pointer, Type element,
              Value offset) {
  return LLVM::GEPOp::create(b, loc, pointer.getType(), element, pointer,
                             ValueRange{toI64(b, loc, offset)});
}

/// The element types each target's call takes, with the code that the CUDA
/// runtime's call is passed.
std::optional<int32_t> elementCode(StringRef target, Type element) {
  if (element.isF32())
    return dtypeCode(element);
  if (target == "cuda" && (element.isF16() || element.isBF16()))
    return dtypeCode(element);
  return std::nullopt;
}

/// The loops of `op` that its output lacks: those it sums over.
SmallVector<unsigned> summedLoops(linalg::LinalgOp op) {
  AffineMap out = op.getIndexingMapsArray().back();
  SmallVector<unsigned> summed;
  for (unsigned loop = 0, e = op.getNumLoops(); loop < e; ++loop)
    if (!out.isFunctionOfDim(loop))
      summed.push_back(loop);
  return summed;
}

/// The zero fill of `op`'s output right before it (nothing with memory
/// effects in between), which writing the output instead of accumulating
/// makes redundant; null if there is none or the GEMM's k is not the only
/// loop summed over (the calls of the others accumulate).
linalg::FillOp redundantZeroFill(linalg::LinalgOp op) {
  if (summedLoops(op).size() != 1)
    return {};
  Value output = op.getDpsInitOperand(0)->get();
  for (Operation *prev = op->getPrevNode(); prev; prev = prev->getPrevNode()) {
    if (auto fill = dyn_cast<linalg::FillOp>(prev)) {
      if (fill.hasPureBufferSemantics() && fill.getOutputs()[0] == output &&
          matchPattern(fill.value(), m_AnyZeroFloat()))
        return fill;
      return {};
    }
    if (!isMemoryEffectFree(prev))
      return {};
  }
  return {};
}

struct ContractionToRuntime final
    : OpInterfaceRewritePattern<linalg::LinalgOp> {
  ContractionToRuntime(MLIRContext *context, StringRef target)
      : OpInterfaceRewritePattern(context), target(target) {}

  LogicalResult matchAndRewrite(linalg::LinalgOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureBufferSemantics())
      return rewriter.notifyMatchFailure(op, "runs on buffers only");
    if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1)
      return rewriter.notifyMatchFailure(op, "not a two-input contraction");
    Type element = getElementTypeOrSelf(op->getOperand(0).getType());
    std::optional<int32_t> code = elementCode(target, element);
    if (!code || !llvm::all_of(op->getOperandTypes(), [&](Type type) {
          auto memref = dyn_cast<MemRefType>(type);
          return memref && memref.getElementType() == element;
        }))
      return rewriter.notifyMatchFailure(
          op, target == "cuda" ? "not f32, f16 or bf16 buffers of one type"
                               : "not f32 buffers");
    if (!linalg::isaContractionOpInterface(op))
      return rewriter.notifyMatchFailure(op, "not a multiply-add contraction");
    FailureOr<linalg::ContractionDimensions> dims =
        linalg::inferContractionDims(op);
    if (failed(dims) || dims->m.empty() || dims->n.empty() || dims->k.empty())
      return rewriter.notifyMatchFailure(op, "needs m, n and k loops");
    SmallVector<AffineMap> maps = op.getIndexingMapsArray();
    if (!llvm::all_of(maps, [](AffineMap map) {
          return llvm::all_of(map.getResults(), llvm::IsaPred<AffineDimExpr>);
        }))
      return rewriter.notifyMatchFailure(op, "indexing maps are not plain "
                                             "loop dims");

    Location loc = op.getLoc();
    SmallVector<Range> ranges = op.createLoopRanges(rewriter, loc);
    auto size = [&](unsigned loop) {
      return getValueOrCreateConstantIndexOp(rewriter, loc, ranges[loop].size);
    };
    SmallVector<StridedOperand> operands;
    for (OpOperand &operand : op->getOpOperands())
      operands.push_back(describe(rewriter, loc, operand.get(),
                                  maps[operand.getOperandNumber()]));
    unsigned m = dims->m.back(), n = dims->n.back(), k = dims->k.back();
    int32_t site = op->hasAttr("moe.expert_gemm") ? 1 : 0;
    linalg::FillOp zeroFill = redundantZeroFill(op);
    // The call's batch: the innermost other loop that the output has (so
    // that every problem writes its own C), preferring one that is not
    // known to be of size 1.
    std::optional<unsigned> batch;
    SmallVector<unsigned> summed = summedLoops(op);
    SmallVector<int64_t> bounds = op.getStaticLoopRanges();
    for (unsigned loop = 0, e = op.getNumLoops(); loop < e; ++loop)
      if (loop != m && loop != n && !llvm::is_contained(summed, loop) &&
          (!batch || bounds[loop] != 1))
        batch = loop;

    // The other loops around the call, each moving every operand's offset.
    SmallVector<Value> offsets = llvm::to_vector(llvm::map_range(
        operands, [](const StridedOperand &o) { return o.offset; }));
    OpBuilder::InsertionGuard guard(rewriter);
    Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
    Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
    for (unsigned outer = 0, e = op.getNumLoops(); outer < e; ++outer) {
      if (outer == m || outer == n || outer == k || outer == batch)
        continue;
      auto loop = scf::ForOp::create(rewriter, loc, zero, size(outer), one);
      rewriter.setInsertionPointToStart(loop.getBody());
      for (auto [offset, operand] : llvm::zip(offsets, operands))
        offset = arith::AddIOp::create(
            rewriter, loc, offset,
            arith::MulIOp::create(rewriter, loc, loop.getInductionVar(),
                                  operand.loopStride[outer]));
    }
    auto stride = [&](unsigned operand, unsigned loop) {
      return toI64(rewriter, loc, operands[operand].loopStride[loop]);
    };
    auto batchStride = [&](unsigned operand) {
      return batch ? stride(operand, *batch) : i64Const(rewriter, loc, 0);
    };
    auto pointer = [&](unsigned operand) {
      return advance(rewriter, loc, operands[operand].pointer, element,
                     offsets[operand]);
    };
    SmallVector<Value> args = {
        batch ? toI64(rewriter, loc, size(*batch)) : i64Const(rewriter, loc, 1),
        toI64(rewriter, loc, size(m)), toI64(rewriter, loc, size(n)),
        toI64(rewriter, loc, size(k)), pointer(0), batchStride(0),
        stride(0, m), stride(0, k), pointer(1), batchStride(1), stride(1, k),
        stride(1, n), pointer(2), batchStride(2), stride(2, m), stride(2, n),
        i32Const(rewriter, loc, zeroFill ? 0 : 1),
        i32Const(rewriter, loc, site)};
    if (target == "cuda")
      args.insert(args.begin(), i32Const(rewriter, loc, *code));
    call(rewriter, loc,
         target == "cuda" ? "moert_cuda_matmul" : "moert_matmul_f32", args);
    rewriter.eraseOp(op);
    if (zeroFill)
      rewriter.eraseOp(zeroFill);
    return success();
  }

private:
  std::string target;
};

struct ConvertMatmulToRuntimePass
    : public impl::ConvertMatmulToRuntimePassBase<ConvertMatmulToRuntimePass> {
  using Base::Base;

  void runOnOperation() override {
    if (target != "cpu" && target != "cuda") {
      emitError(getOperation().getLoc())
          << "convert-matmul-to-runtime: unknown target '" << target
          << "' (expected cpu or cuda)";
      return signalPassFailure();
    }
    RewritePatternSet patterns(&getContext());
    patterns.add<ContractionToRuntime>(&getContext(), target);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace mlir::moe
