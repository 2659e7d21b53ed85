//===- Shape.cpp - lower onnx shape and data-movement ops -----------------===//
//
// With static shapes (StaticShapes.cpp), Reshape, Squeeze, Unsqueeze and
// Flatten are the same reshape of the data to the result type; Transpose is
// linalg.transpose; Concat inserts slices into an empty tensor and Split and
// Slice extract them (Slice with a negative step reads element by element).
// Expand is a broadcast copy. Shape, Size, Range and ConstantOfShape of
// constants are folded before this; a ConstantOfShape or Range whose
// operands are not constants but whose result is static is filled here.
//
//===----------------------------------------------------------------------===//

#include "mlir/Transforms/DialectConversion.h"
#include "passes/Conversion/ONNXToLinalg/Lowering.h"

namespace mlir::moe::onnx_lowering {

namespace {

/// Reshape, Squeeze, Unsqueeze, Flatten: the data in the result's shape.
template <typename OpTy> struct ReshapeLowering : OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;

  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    Value data = adaptor.getOperands()[0];
    if (tensorType(data).getNumElements() != type.getNumElements())
      return cannotLower(
          rewriter, op,
          "the result does not have the data's number of elements");
    rewriter.replaceOp(op, reshapeTo(rewriter, op.getLoc(), data, type));
    return success();
  }
};

struct IdentityLowering : OpConversionPattern<onnx::IdentityOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(onnx::IdentityOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op,
                       castToType(rewriter, op.getLoc(), adaptor.getInputs()[0],
                                  op->getResult(0).getType()));
    return success();
  }
};

struct TransposeLowering : OpConversionPattern<onnx::TransposeOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(onnx::TransposeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value data = adaptor.getInputs()[0];
    int64_t rank = tensorType(data).getRank();
    Shape perm = intsAttr(op, "perm").value_or(Shape());
    if (perm.empty())
      perm = llvm::to_vector(llvm::reverse(llvm::seq<int64_t>(0, rank)));
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    Location loc = op.getLoc();
    rewriter.replaceOp(
        op, linalg::TransposeOp::create(rewriter, loc, data,
                                        emptyTensor(rewriter, loc, type), perm)
                ->getResult(0));
    return success();
  }
};

/// Offsets that are 0 but at `axis`, sizes of `shape`, unit strides.
struct SliceBox {
  SmallVector<OpFoldResult> offsets, sizes, strides;

  SliceBox(OpBuilder &b, ArrayRef<int64_t> shape, int64_t axis,
           int64_t offset) {
    for (auto [i, dim] : llvm::enumerate(shape)) {
      offsets.push_back(
          b.getIndexAttr(static_cast<int64_t>(i) == axis ? offset : 0));
      sizes.push_back(b.getIndexAttr(dim));
      strides.push_back(b.getIndexAttr(1));
    }
  }
};

struct ConcatLowering : OpConversionPattern<onnx::ConcatOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(onnx::ConcatOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    int64_t axis = normalizeAxis(intAttr(op, "axis", 0), type.getRank());
    Location loc = op.getLoc();
    Value result = emptyTensor(rewriter, loc, type);
    int64_t offset = 0;
    for (Value input : adaptor.getInputs()) {
      ArrayRef<int64_t> shape = tensorType(input).getShape();
      if (shape[axis] == 0)
        continue;
      SliceBox box(rewriter, shape, axis, offset);
      result = tensor::InsertSliceOp::create(
          rewriter, loc, input, result, box.offsets, box.sizes, box.strides);
      offset += shape[axis];
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct SplitLowering : OpConversionPattern<onnx::SplitOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(onnx::SplitOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value data = adaptor.getInputs()[0];
    int64_t axis =
        normalizeAxis(intAttr(op, "axis", 0), tensorType(data).getRank());
    Location loc = op.getLoc();
    SmallVector<Value> parts;
    int64_t offset = 0;
    for (Value result : op->getResults()) {
      auto type = cast<RankedTensorType>(result.getType());
      // An empty part (a split size of 0, as exporters write for an unused
      // rotary section) reads nothing; a slice at the axis' end would be
      // out of bounds.
      if (type.getNumElements() == 0) {
        parts.push_back(tensor::EmptyOp::create(rewriter, loc, type.getShape(),
                                                type.getElementType()));
        continue;
      }
      SliceBox box(rewriter, type.getShape(), axis, offset);
      parts.push_back(tensor::ExtractSliceOp::create(
          rewriter, loc, type, data, box.offsets, box.sizes, box.strides));
      offset += type.getDimSize(axis);
    }
    if (offset != tensorType(data).getDimSize(axis))
      return cannotLower(rewriter, op, "the parts do not cover the axis");
    rewriter.replaceOp(op, parts);
    return success();
  }
};

struct SliceLowering : OpConversionPattern<onnx::SliceOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(onnx::SliceOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value data = adaptor.getInputs()[0];
    std::optional<SliceParams> params =
        sliceParams(op, tensorType(data).getShape());
    if (!params)
      return cannotLower(rewriter, op,
                         "starts, ends, axes and steps must be constants");
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    Location loc = op.getLoc();
    // An empty slice (its start at the dim's end) reads nothing.
    if (type.getNumElements() == 0) {
      rewriter.replaceOpWithNewOp<tensor::EmptyOp>(op, type.getShape(),
                                                   type.getElementType());
      return success();
    }
    if (llvm::all_of(params->steps, [](int64_t step) { return step > 0; })) {
      rewriter.replaceOpWithNewOp<tensor::ExtractSliceOp>(
          op, type, data,
          getAsIndexOpFoldResult(op.getContext(), params->starts),
          getAsIndexOpFoldResult(op.getContext(), type.getShape()),
          getAsIndexOpFoldResult(op.getContext(), params->steps));
      return success();
    }
    // Negative steps: element i of a dim reads start + i * step.
    Value result = mapElements(
        rewriter, loc, type, {}, {},
        [&](OpBuilder &b, Location loc, ValueRange) -> Value {
          SmallVector<Value> index;
          for (auto [dim, start, step] :
               llvm::enumerate(params->starts, params->steps)) {
            Value i = linalg::IndexOp::create(b, loc, dim);
            Value scaled =
                arith::MulIOp::create(b, loc, i, indexConst(b, loc, step));
            index.push_back(arith::AddIOp::create(b, loc, scaled,
                                                  indexConst(b, loc, start)));
          }
          return tensor::ExtractOp::create(b, loc, data, index);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct ExpandLowering : OpConversionPattern<onnx::ExpandOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(onnx::ExpandOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    Value data = adaptor.getInputs()[0];
    if (tensorType(data) == type) {
      rewriter.replaceOp(op, data);
      return success();
    }
    rewriter.replaceOp(
        op, broadcastElements(rewriter, op.getLoc(), type, data,
                              [](OpBuilder &, Location, ValueRange args) {
                                return args[0];
                              }));
    return success();
  }
};

/// Tile: out[i...] = input[i % dim...].
struct TileLowering : OpConversionPattern<onnx::TileOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(onnx::TileOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    Value data = adaptor.getInputs()[0];
    ArrayRef<int64_t> shape = tensorType(data).getShape();
    if (tensorType(data) == type) {
      rewriter.replaceOp(op, data);
      return success();
    }
    Value result = mapElements(
        rewriter, op.getLoc(), type, {}, {},
        [&](OpBuilder &b, Location loc, ValueRange) -> Value {
          SmallVector<Value> index;
          for (auto [i, dim] : llvm::enumerate(shape)) {
            Value at = linalg::IndexOp::create(b, loc, i);
            if (dim != type.getDimSize(i))
              at = arith::RemUIOp::create(b, loc, at, indexConst(b, loc, dim));
            index.push_back(at);
          }
          return tensor::ExtractOp::create(b, loc, data, index);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// Pad in constant mode (the import refuses the others and folds opset 18's
/// axes into full pads): the value everywhere, the data inserted at the
/// leading pads.
struct PadLowering : OpConversionPattern<onnx::PadOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(onnx::PadOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto mode = op->getAttrOfType<StringAttr>("mode");
    if (mode && mode.getValue() != "constant")
      return cannotLower(rewriter, op,
                         "mode '" + mode.getValue() + "' (only constant)");
    if (optionalOperand(op, 3))
      return cannotLower(rewriter, op, "the axes input (the import folds it)");
    Value data = adaptor.getInputs()[0];
    int64_t rank = tensorType(data).getRank();
    std::optional<Shape> pads = getConstantInts(op->getOperand(1));
    if (!pads || static_cast<int64_t>(pads->size()) != 2 * rank)
      return cannotLower(rewriter, op, "the pads are not a constant");
    if (llvm::any_of(*pads, [](int64_t pad) { return pad < 0; }))
      return cannotLower(rewriter, op, "negative pads");
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    Location loc = op.getLoc();
    Value value = scalarConst(rewriter, loc, type.getElementType(), 0.0);
    if (optionalOperand(op, 2)) {
      Value given = adaptor.getInputs()[2];
      SmallVector<Value> zeros(tensorType(given).getRank(),
                               indexConst(rewriter, loc, 0));
      value = tensor::ExtractOp::create(rewriter, loc, given, zeros);
    }
    Value result = linalg::FillOp::create(rewriter, loc, value,
                                          emptyTensor(rewriter, loc, type))
                       .getResult(0);
    SmallVector<OpFoldResult> offsets, sizes, strides;
    for (int64_t i = 0; i < rank; ++i) {
      offsets.push_back(rewriter.getIndexAttr((*pads)[i]));
      sizes.push_back(rewriter.getIndexAttr(tensorType(data).getDimSize(i)));
      strides.push_back(rewriter.getIndexAttr(1));
    }
    rewriter.replaceOpWithNewOp<tensor::InsertSliceOp>(op, data, result,
                                                       offsets, sizes, strides);
    return success();
  }
};

/// ConstantOfShape with a shape computed at run time but a static result.
struct ConstantOfShapeLowering : OpConversionPattern<onnx::ConstantOfShapeOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(onnx::ConstantOfShapeOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    Location loc = op.getLoc();
    Value element = scalarConst(rewriter, loc, type.getElementType(), 0.0);
    if (auto value = op->getAttrOfType<DenseElementsAttr>("value"))
      element = arith::ConstantOp::create(rewriter, loc,
                                          value.getSplatValue<TypedAttr>());
    rewriter.replaceOp(op,
                       linalg::FillOp::create(rewriter, loc, element,
                                              emptyTensor(rewriter, loc, type))
                           .getResult(0));
    return success();
  }
};

/// Range with operands computed at run time but a static result:
/// `start + i * delta`.
struct RangeLowering : OpConversionPattern<onnx::RangeOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(onnx::RangeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    Location loc = op.getLoc();
    auto scalar = [&](Value tensor) -> Value {
      SmallVector<Value> zeros(tensorType(tensor).getRank(),
                               indexConst(rewriter, loc, 0));
      return tensor::ExtractOp::create(rewriter, loc, tensor, zeros);
    };
    Value start = scalar(adaptor.getInputs()[0]);
    Value delta = scalar(adaptor.getInputs()[2]);
    Value result = mapElements(
        rewriter, loc, type, {}, {},
        [&](OpBuilder &b, Location loc, ValueRange) {
          Value i = linalg::IndexOp::create(b, loc, 0);
          Value step = convertScalar(
              b, loc, arith::IndexCastOp::create(b, loc, b.getI64Type(), i),
              start.getType());
          return addScalars(b, loc, start, mulScalars(b, loc, step, delta));
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

} // namespace

void populateShapePatterns(RewritePatternSet &patterns) {
  patterns
      .add<ReshapeLowering<onnx::ReshapeOp>, ReshapeLowering<onnx::SqueezeOp>,
           ReshapeLowering<onnx::UnsqueezeOp>, ReshapeLowering<onnx::FlattenOp>,
           IdentityLowering, TransposeLowering, ConcatLowering, SplitLowering,
           SliceLowering, ExpandLowering, TileLowering, PadLowering,
           ConstantOfShapeLowering, RangeLowering>(patterns.getContext());
}

} // namespace mlir::moe::onnx_lowering
