//===- Indexing.cpp - lower onnx gathers, scatters, OneHot and Trilu ------===//
//
// Gathers are linalg.generics over the result that read their index tensor
// through a map and the data with tensor.extract at the computed position.
// Scatters copy the data and then write the updates in order in an scf.for
// nest (tensor.insert, after combining with the old element for a
// reduction), so that later updates of the same element win. OneHot and
// Trilu are maps that compare the loop indices. Negative indices count from
// the end of their dim; gathers and scatters check their indices first
// (IndexChecks.cpp), so that none reads or writes outside its data.
//
//===----------------------------------------------------------------------===//

#include "mlir/Transforms/DialectConversion.h"
#include "passes/Conversion/ONNXToLinalg/Lowering.h"

namespace mlir::moe::onnx_lowering {

/// The loop indices `first..first+count` of the enclosing linalg.generic.
static SmallVector<Value> loopIndices(OpBuilder &b, Location loc, int64_t first,
                                      int64_t count) {
  SmallVector<Value> indices;
  for (int64_t i = first; i < first + count; ++i)
    indices.push_back(linalg::IndexOp::create(b, loc, i));
  return indices;
}

/// Element `index` of `indices`, as a position in a dim of `size`.
static Value readIndex(OpBuilder &b, Location loc, Value indices,
                       ValueRange index, int64_t size) {
  Value raw = tensor::ExtractOp::create(b, loc, indices, index);
  return wrapIndex(b, loc, toIndex(b, loc, raw), size);
}

/// How a scatter combines an update with the element it replaces.
static FailureOr<StringRef> scatterReduction(Operation *op) {
  auto attr = op->getAttrOfType<StringAttr>("reduction");
  StringRef reduction = attr ? attr.getValue() : "none";
  if (!llvm::is_contained({"none", "add", "mul", "max", "min"}, reduction))
    return failure();
  return reduction;
}

/// `update` combined with `old` by `reduction`.
static Value combine(OpBuilder &b, Location loc, StringRef reduction, Value old,
                     Value update) {
  bool isFloat = isa<FloatType>(update.getType());
  if (reduction == "add")
    return addScalars(b, loc, old, update);
  if (reduction == "mul")
    return mulScalars(b, loc, old, update);
  if (reduction == "max")
    return isFloat ? Value(arith::MaximumFOp::create(b, loc, old, update))
                   : Value(arith::MaxSIOp::create(b, loc, old, update));
  if (reduction == "min")
    return isFloat ? Value(arith::MinimumFOp::create(b, loc, old, update))
                   : Value(arith::MinSIOp::create(b, loc, old, update));
  return update;
}

/// Writes every element of `updates` into (a copy of) `data` at the
/// position `target(ivs)` gives for its index `ivs`, in order.
static Value
scatter(OpBuilder &b, Location loc, Value data, Value updates,
        StringRef reduction,
        function_ref<SmallVector<Value>(OpBuilder &, Location, ValueRange)>
            target) {
  return loopNest(b, loc, tensorType(updates).getShape(), data,
                  [&](OpBuilder &nb, Location nloc, ValueRange ivs,
                      ValueRange args) -> scf::ValueVector {
                    SmallVector<Value> position = target(nb, nloc, ivs);
                    Value update =
                        tensor::ExtractOp::create(nb, nloc, updates, ivs);
                    if (reduction != "none") {
                      Value old = tensor::ExtractOp::create(nb, nloc, args[0],
                                                            position);
                      update = combine(nb, nloc, reduction, old, update);
                    }
                    return {tensor::InsertOp::create(nb, nloc, update, args[0],
                                                     position)};
                  })
      .front();
}

namespace {

/// The lowering of an op that reads or writes at positions from an index
/// tensor, which it checks first; `runtime`: see checkIndices.
template <typename OpTy> struct CheckedLowering : OpConversionPattern<OpTy> {
  CheckedLowering(MLIRContext *context, bool runtime)
      : OpConversionPattern<OpTy>(context), runtime(runtime) {}

protected:
  bool runtime;
};

/// Gather: out[a..., i..., b...] = data[a..., indices[i...], b...].
struct GatherLowering : CheckedLowering<onnx::GatherOp> {
  using CheckedLowering::CheckedLowering;

  LogicalResult
  matchAndRewrite(onnx::GatherOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value data = adaptor.getInputs()[0], indices = adaptor.getInputs()[1];
    ArrayRef<int64_t> shape = tensorType(data).getShape();
    int64_t rank = shape.size(), q = tensorType(indices).getRank();
    int64_t axis = normalizeAxis(intAttr(op, "axis", 0), rank);
    if (failed(checkIndices(rewriter, op, indices, runtime)))
      return failure();
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    SmallVector<unsigned> indexLoops =
        llvm::to_vector(llvm::seq<unsigned>(axis, axis + q));
    Value result = mapElements(
        rewriter, op.getLoc(), type, indices,
        loopsTo(rewriter, type.getRank(), indexLoops),
        [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
          SmallVector<Value> position = loopIndices(b, loc, 0, axis);
          position.push_back(
              wrapIndex(b, loc, toIndex(b, loc, args[0]), shape[axis]));
          llvm::append_range(position,
                             loopIndices(b, loc, axis + q, rank - axis - 1));
          return tensor::ExtractOp::create(b, loc, data, position);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// GatherElements: out[p] = data[p with p[axis] = indices[p]].
struct GatherElementsLowering : CheckedLowering<onnx::GatherElementsOp> {
  using CheckedLowering::CheckedLowering;

  LogicalResult
  matchAndRewrite(onnx::GatherElementsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value data = adaptor.getInputs()[0], indices = adaptor.getInputs()[1];
    ArrayRef<int64_t> shape = tensorType(data).getShape();
    int64_t rank = shape.size();
    int64_t axis = normalizeAxis(intAttr(op, "axis", 0), rank);
    if (failed(checkIndices(rewriter, op, indices, runtime)))
      return failure();
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    Value result = mapElements(
        rewriter, op.getLoc(), type, indices, {},
        [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
          SmallVector<Value> position = loopIndices(b, loc, 0, rank);
          position[axis] =
              wrapIndex(b, loc, toIndex(b, loc, args[0]), shape[axis]);
          return tensor::ExtractOp::create(b, loc, data, position);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// GatherND: out[i..., s...] = data[batch..., indices[i..., :], s...].
struct GatherNDLowering : CheckedLowering<onnx::GatherNDOp> {
  using CheckedLowering::CheckedLowering;

  LogicalResult
  matchAndRewrite(onnx::GatherNDOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value data = adaptor.getInputs()[0], indices = adaptor.getInputs()[1];
    ArrayRef<int64_t> shape = tensorType(data).getShape();
    int64_t rank = shape.size(), q = tensorType(indices).getRank();
    int64_t depth = tensorType(indices).getShape().back();
    int64_t batchDims = intAttr(op, "batch_dims", 0);
    if (failed(checkIndices(rewriter, op, indices, runtime)))
      return failure();
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    Value result = mapElements(
        rewriter, op.getLoc(), type, {}, {},
        [&](OpBuilder &b, Location loc, ValueRange) -> Value {
          SmallVector<Value> tuple = loopIndices(b, loc, 0, q - 1);
          tuple.push_back(nullptr);
          SmallVector<Value> position = loopIndices(b, loc, 0, batchDims);
          for (int64_t c = 0; c < depth; ++c) {
            tuple.back() = indexConst(b, loc, c);
            position.push_back(
                readIndex(b, loc, indices, tuple, shape[batchDims + c]));
          }
          llvm::append_range(
              position, loopIndices(b, loc, q - 1, rank - batchDims - depth));
          return tensor::ExtractOp::create(b, loc, data, position);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// ScatterElements: data[p with p[axis] = indices[p]] = updates[p].
struct ScatterElementsLowering : CheckedLowering<onnx::ScatterElementsOp> {
  using CheckedLowering::CheckedLowering;

  LogicalResult
  matchAndRewrite(onnx::ScatterElementsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    FailureOr<StringRef> reduction = scatterReduction(op);
    if (failed(reduction))
      return cannotLower(rewriter, op, "unknown reduction");
    ValueRange inputs = adaptor.getInputs();
    Value data = inputs[0], indices = inputs[1], updates = inputs[2];
    ArrayRef<int64_t> shape = tensorType(data).getShape();
    int64_t axis = normalizeAxis(intAttr(op, "axis", 0), shape.size());
    if (failed(checkIndices(rewriter, op, indices, runtime)))
      return failure();
    rewriter.replaceOp(
        op, scatter(rewriter, op.getLoc(), data, updates, *reduction,
                    [&](OpBuilder &b, Location loc, ValueRange ivs) {
                      SmallVector<Value> position(ivs);
                      position[axis] =
                          readIndex(b, loc, indices, ivs, shape[axis]);
                      return position;
                    }));
    return success();
  }
};

/// ScatterND: data[indices[i..., :], s...] = updates[i..., s...].
struct ScatterNDLowering : CheckedLowering<onnx::ScatterNDOp> {
  using CheckedLowering::CheckedLowering;

  LogicalResult
  matchAndRewrite(onnx::ScatterNDOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    FailureOr<StringRef> reduction = scatterReduction(op);
    if (failed(reduction))
      return cannotLower(rewriter, op, "unknown reduction");
    ValueRange inputs = adaptor.getInputs();
    Value data = inputs[0], indices = inputs[1], updates = inputs[2];
    ArrayRef<int64_t> shape = tensorType(data).getShape();
    int64_t q = tensorType(indices).getRank();
    int64_t depth = tensorType(indices).getShape().back();
    if (failed(checkIndices(rewriter, op, indices, runtime)))
      return failure();
    rewriter.replaceOp(
        op, scatter(rewriter, op.getLoc(), data, updates, *reduction,
                    [&](OpBuilder &b, Location loc, ValueRange ivs) {
                      SmallVector<Value> tuple(ivs.take_front(q - 1));
                      tuple.push_back(nullptr);
                      SmallVector<Value> position;
                      for (int64_t c = 0; c < depth; ++c) {
                        tuple.back() = indexConst(b, loc, c);
                        position.push_back(
                            readIndex(b, loc, indices, tuple, shape[c]));
                      }
                      llvm::append_range(position, ivs.drop_front(q - 1));
                      return position;
                    }));
    return success();
  }
};

/// OneHot: values[1] where the index (wrapped by depth) is the position
/// along `axis`, values[0] elsewhere.
struct OneHotLowering : OpConversionPattern<onnx::OneHotOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(onnx::OneHotOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value indices = adaptor.getInputs()[0], values = adaptor.getInputs()[2];
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    int64_t rank = type.getRank();
    int64_t axis = normalizeAxis(intAttr(op, "axis", -1), rank);
    int64_t depth = type.getDimSize(axis);
    Location loc = op.getLoc();
    Value off = tensor::ExtractOp::create(rewriter, loc, values,
                                          indexConst(rewriter, loc, 0));
    Value on = tensor::ExtractOp::create(rewriter, loc, values,
                                         indexConst(rewriter, loc, 1));
    SmallVector<unsigned> indexLoops;
    for (int64_t i = 0; i < rank; ++i)
      if (i != axis)
        indexLoops.push_back(i);
    Value result = mapElements(
        rewriter, loc, type, indices, loopsTo(rewriter, rank, indexLoops),
        [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
          Value index = wrapIndex(b, loc, toIndex(b, loc, args[0]), depth);
          Value hit =
              arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, index,
                                    linalg::IndexOp::create(b, loc, axis));
          return arith::SelectOp::create(b, loc, hit, on, off);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// Trilu: the elements on and above (upper) or on and below (lower) the
/// k-th diagonal of the last two dims; zero elsewhere.
struct TriluLowering : OpConversionPattern<onnx::TriluOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(onnx::TriluOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value x = adaptor.getInputs()[0];
    RankedTensorType type = tensorType(x);
    int64_t rank = type.getRank();
    if (rank < 2)
      return cannotLower(rewriter, op, "expects at least 2 dims");
    bool upper = intAttr(op, "upper", 1);
    Location loc = op.getLoc();
    Value k;
    if (optionalOperand(op, 1)) {
      Value kTensor = adaptor.getInputs()[1];
      SmallVector<Value> zeros(tensorType(kTensor).getRank(),
                               indexConst(rewriter, loc, 0));
      k = toIndex(rewriter, loc,
                  tensor::ExtractOp::create(rewriter, loc, kTensor, zeros));
    } else {
      k = indexConst(rewriter, loc, 0);
    }
    Value result = mapElements(
        rewriter, loc, type, x, {},
        [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
          Value row = linalg::IndexOp::create(b, loc, rank - 2);
          Value col = linalg::IndexOp::create(b, loc, rank - 1);
          Value diagonal = arith::SubIOp::create(b, loc, col, row);
          Value keep = arith::CmpIOp::create(b, loc,
                                             upper ? arith::CmpIPredicate::sge
                                                   : arith::CmpIPredicate::sle,
                                             diagonal, k);
          Value zero = scalarConst(b, loc, args[0].getType(), 0.0);
          return arith::SelectOp::create(b, loc, keep, args[0], zero);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

} // namespace

void populateIndexingPatterns(RewritePatternSet &patterns, bool runtime) {
  MLIRContext *context = patterns.getContext();
  patterns.add<GatherLowering, GatherElementsLowering, GatherNDLowering,
               ScatterElementsLowering, ScatterNDLowering>(context, runtime);
  // OneHot and Trilu only compare their indices with loop indices.
  patterns.add<OneHotLowering, TriluLowering>(context);
}

} // namespace mlir::moe::onnx_lowering
