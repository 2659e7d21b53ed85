//===- Copies.cpp - Buffer copies of CPU programs --------------------------===//
//
// What bufferization leaves as memref.copy, each lowered by what it is:
// - a result built in a buffer of its own and copied into the output
//   argument at the end (out-parameters cannot hoist an allocation whose
//   value leaves through a loop): built in the output argument itself;
// - a copy of a constant global that holds one repeated value (the zeros a
//   scatter or a gradient sum starts from): a fill, which reads nothing;
// - a copy with a non-contiguous side: linalg.copy, hence parallel loops
//   shared among the threads and vectorized, where the memref lowering
//   would call the C runner's generic memrefCopy on one thread.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOECOPIESPASS
#include "passes/Passes.h.inc"

namespace {

/// Whether `op` passes on an alias of (or a pointer into) its operand: a
/// view, a cast, the metadata or address of a buffer, pointer arithmetic.
bool passesOnAlias(Operation *op) {
  return isa<ViewLikeOpInterface, memref::CastOp,
             memref::ExtractStridedMetadataOp,
             memref::ExtractAlignedPointerAsIndexOp, arith::IndexCastOp,
             LLVM::IntToPtrOp, LLVM::GEPOp>(op);
}

/// A function's buffer copied whole into one of its output arguments after
/// every other use: the function builds the result in the argument.
struct ComputeInOutput final : OpRewritePattern<memref::CopyOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(memref::CopyOp op,
                                PatternRewriter &rewriter) const override {
    auto output = dyn_cast<BlockArgument>(op.getTarget());
    auto func = output ? dyn_cast<func::FuncOp>(
                             output.getOwner()->getParentOp())
                       : func::FuncOp();
    if (!func || output.getOwner() != &func.getBody().front())
      return rewriter.notifyMatchFailure(op, "not into a function argument");
    if (!output.hasOneUse())
      return rewriter.notifyMatchFailure(op, "the argument has other uses");
    auto alloc = op.getSource().getDefiningOp<memref::AllocOp>();
    if (!alloc || alloc.getType() != output.getType() ||
        alloc->getBlock() != op->getBlock())
      return rewriter.notifyMatchFailure(
          op, "not a buffer of the argument's type allocated in its block");
    // Every use of the buffer, of its views and of its addresses comes
    // before the copy, but its deallocation.
    SmallVector<memref::DeallocOp> deallocs;
    SmallVector<Value> aliases{alloc.getResult()};
    while (!aliases.empty()) {
      Value alias = aliases.pop_back_val();
      for (Operation *user : alias.getUsers()) {
        if (user == op.getOperation())
          continue;
        if (auto dealloc = dyn_cast<memref::DeallocOp>(user);
            dealloc && alias == alloc.getResult()) {
          deallocs.push_back(dealloc);
          continue;
        }
        Operation *inBlock = op->getBlock()->findAncestorOpInBlock(*user);
        if (!inBlock || !inBlock->isBeforeInBlock(op))
          return rewriter.notifyMatchFailure(
              op, "the buffer is used after the copy");
        if (passesOnAlias(user))
          llvm::append_range(aliases, user->getResults());
      }
    }
    for (memref::DeallocOp dealloc : deallocs)
      rewriter.eraseOp(dealloc);
    rewriter.eraseOp(op);
    rewriter.replaceOp(alloc, output);
    return success();
  }
};

/// The repeated value of the constant global that `value` reads, if any.
std::optional<TypedAttr> splatGlobal(Value value) {
  auto get = value.getDefiningOp<memref::GetGlobalOp>();
  if (!get)
    return std::nullopt;
  auto global = SymbolTable::lookupNearestSymbolFrom<memref::GlobalOp>(
      get, get.getNameAttr());
  if (!global || !global.getConstant())
    return std::nullopt;
  auto init = dyn_cast_or_null<SplatElementsAttr>(global.getConstantInitValue());
  if (!init)
    return std::nullopt;
  return init.getSplatValue<TypedAttr>();
}

/// A copy of a constant of one repeated value: a fill.
struct FillFromSplat final : OpRewritePattern<memref::CopyOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(memref::CopyOp op,
                                PatternRewriter &rewriter) const override {
    std::optional<TypedAttr> splat = splatGlobal(op.getSource());
    if (!splat)
      return rewriter.notifyMatchFailure(
          op, "not a copy of a constant of one repeated value");
    Value value = arith::ConstantOp::create(rewriter, op.getLoc(), *splat);
    rewriter.replaceOpWithNewOp<linalg::FillOp>(op, value, op.getTarget());
    return success();
  }
};

/// What the memref lowering copies with one memcpy (its own test).
bool isContiguous(MemRefType type) {
  return type.getLayout().isIdentity() ||
         memref::isStaticShapeAndContiguousRowMajor(type);
}

/// A copy with a non-contiguous side: linalg.copy.
struct StridedCopyToLinalg final : OpRewritePattern<memref::CopyOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(memref::CopyOp op,
                                PatternRewriter &rewriter) const override {
    auto source = dyn_cast<MemRefType>(op.getSource().getType());
    auto target = dyn_cast<MemRefType>(op.getTarget().getType());
    if (!source || !target)
      return rewriter.notifyMatchFailure(op, "an unranked side");
    if (isContiguous(source) && isContiguous(target))
      return rewriter.notifyMatchFailure(op, "both sides contiguous: a memcpy");
    if (source.getRank() == 0)
      return rewriter.notifyMatchFailure(op, "a scalar");
    rewriter.replaceOpWithNewOp<linalg::CopyOp>(op, op.getSource(),
                                                op.getTarget());
    return success();
  }
};

struct MoECopiesPass final : impl::MoECopiesPassBase<MoECopiesPass> {
  void runOnOperation() override {
    MLIRContext *context = &getContext();
    RewritePatternSet patterns(context);
    // In place first: a result then needs no copy at all.
    patterns.add<ComputeInOutput>(context, /*benefit=*/3);
    patterns.add<FillFromSplat>(context, /*benefit=*/2);
    patterns.add<StridedCopyToLinalg>(context, /*benefit=*/1);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    // Private constants that no copy reads any more.
    SymbolTableCollection symbols;
    SymbolUserMap users(symbols, getOperation());
    for (auto global : llvm::make_early_inc_range(
             getOperation().getOps<memref::GlobalOp>()))
      if (global.isPrivate() && global.getConstant() &&
          users.useEmpty(global))
        global.erase();
  }
};

} // namespace
} // namespace mlir::moe
