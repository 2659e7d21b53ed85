//===- Experts.cpp - lower moe.experts and moe.shared_expert --------------===//
//
// The reference semantics of the expert FFNs. One FFN builder serves both
// ops: every projection is a linalg.matmul against the `[out, in]` weight
// read transposed (through its indexing maps), accumulating onto the
// broadcast bias; the activation, gating or SwiGLU is one linalg.generic,
// reading the halves of a fused fc1 through strided slices.
// moe.experts runs it in an scf.for over the groups on dynamically sized
// slices of the rows and of expert `g mod E`'s weights; a bad count stops
// the program with a cf.assert before it is used to slice.
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/MoEToLinalg/Lowering.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::moe::lowering {

namespace {
/// The projections of one FFN: 2-D `[out, in]` weights and 1-D `[out]`
/// biases. Optional ones are null.
struct FFNWeights {
  Value fc1, fc1Bias, fc3, fc3Bias, fc2, fc2Bias;
};
} // namespace

// `x W^T + bias`: a linalg.matmul that reads W transposed and accumulates
// onto the broadcast bias (or zeros).
Value linear(OpBuilder &b, Location loc, Value x, Value weight, Value bias) {
  Type elementType = tensorType(x).getElementType();
  int64_t out = tensorType(weight).getDimSize(0);
  Value init = tensor::EmptyOp::create(
      b, loc,
      ArrayRef<OpFoldResult>{tensor::getMixedSize(b, loc, x, 0),
                             b.getIndexAttr(out)},
      elementType);
  Value acc;
  if (bias)
    acc = linalg::BroadcastOp::create(b, loc, bias, init, ArrayRef<int64_t>{0})
              ->getResult(0);
  else
    acc = linalg::FillOp::create(b, loc, scalarConst(b, loc, elementType, 0.0),
                                 init)
              .getResult(0);
  MLIRContext *ctx = b.getContext();
  AffineExpr m, n, k;
  bindDims(ctx, m, n, k);
  auto matmul = linalg::MatmulOp::create(b, loc, TypeRange{acc.getType()},
                                         ValueRange{x, weight}, acc);
  matmul.setIndexingMapsAttr(b.getAffineMapArrayAttr(
      {AffineMap::get(3, 0, {m, k}, ctx), AffineMap::get(3, 0, {n, k}, ctx),
       AffineMap::get(3, 0, {m, n}, ctx)}));
  // What `moe-run --stats` reports as expert GEMM throughput.
  matmul->setAttr("moe.expert_gemm", b.getUnitAttr());
  return matmul.getResult(0);
}

/// `G * sigmoid(alpha * G) * (L + beta)` with `G = min(g, limit)` and
/// `L = clamp(l, -limit, limit)` when a limit is given.
static Value swiglu(OpBuilder &b, Location loc, ActivationAttr activation,
                    Value gate, Value lin) {
  Type type = gate.getType();
  auto c = [&](const APFloat &value) {
    return scalarConst(b, loc, type, value.convertToDouble());
  };
  if (std::optional<APFloat> limit = activation.getLimit()) {
    gate = arith::MinimumFOp::create(b, loc, gate, c(*limit));
    lin = arith::MinimumFOp::create(b, loc, lin, c(*limit));
    lin = arith::MaximumFOp::create(b, loc, lin, c(-*limit));
  }
  // Leave out the identities of the default alpha = 1, beta = 0.
  Value scaled = gate;
  if (!activation.getAlpha().isExactlyValue(1.0))
    scaled = arith::MulFOp::create(b, loc, c(activation.getAlpha()), gate);
  if (!activation.getBeta().isZero())
    lin = arith::AddFOp::create(b, loc, lin, c(activation.getBeta()));
  Value glu = arith::MulFOp::create(b, loc, gate, sigmoid(b, loc, scaled));
  return arith::MulFOp::create(b, loc, glu, lin);
}

Value applyActivation(OpBuilder &b, Location loc, Value h1, Value h3,
                      const ScalarActivation &scalar, int64_t width) {
  ActivationAttr activation = scalar.attr;
  OpFoldResult rows = tensor::getMixedSize(b, loc, h1, 0);
  SmallVector<Value> inputs{h1};
  if (activation.isFusedSwiGLU()) {
    // Both halves are (strided) views of the 2F-wide h1: columns 2i and
    // 2i + 1, or i and F + i.
    bool interleaved = activation.getLayout() == SwiGLULayout::Interleaved;
    auto half = [&](int64_t index) -> Value {
      return tensor::ExtractSliceOp::create(
          b, loc, h1,
          {b.getIndexAttr(0),
           b.getIndexAttr(interleaved ? index : index * width)},
          {rows, b.getIndexAttr(width)},
          {b.getIndexAttr(1), b.getIndexAttr(interleaved ? 2 : 1)});
    };
    inputs = {half(0), half(1)};
  } else if (h3) {
    inputs.push_back(h3);
  }
  Value init = tensor::EmptyOp::create(
      b, loc, ArrayRef<OpFoldResult>{rows, b.getIndexAttr(width)},
      tensorType(h1).getElementType());
  ActivationKind kind = activation.getKind();
  return mapElements(
      b, loc, init, inputs, {},
      [&](OpBuilder &nb, Location nloc, ValueRange args) -> Value {
        if (kind == ActivationKind::SwiGLU)
          return swiglu(nb, nloc, activation, args[0], args[1]);
        Value act = scalar.apply(nb, nloc, args[0]);
        if (args.size() == 1)
          return act;
        return arith::MulFOp::create(nb, nloc, act, args[1]);
      });
}

/// `act(x W1^T + b1 [, x W3^T + b3]) W2^T + b2` for `x [n, H]`.
static Value buildFFN(OpBuilder &b, Location loc, Value x, const FFNWeights &w,
                      const ScalarActivation &activation) {
  Value h1 = linear(b, loc, x, w.fc1, w.fc1Bias);
  Value h3 = w.fc3 ? linear(b, loc, x, w.fc3, w.fc3Bias) : Value();
  int64_t width = tensorType(w.fc2).getDimSize(1);
  Value a = applyActivation(b, loc, h1, h3, activation, width);
  return linear(b, loc, a, w.fc2, w.fc2Bias);
}

Value expertSlice(OpBuilder &b, Location loc, Value stacked, Value expert) {
  if (!stacked)
    return Value();
  RankedTensorType type = tensorType(stacked);
  SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
  offsets.front() = expert;
  SmallVector<OpFoldResult> sizes =
      getAsIndexOpFoldResult(b.getContext(), type.getShape());
  sizes.front() = b.getIndexAttr(1);
  SmallVector<OpFoldResult> strides(type.getRank(), b.getIndexAttr(1));
  auto sliceType = RankedTensorType::get(type.getShape().drop_front(),
                                         type.getElementType());
  return tensor::ExtractSliceOp::create(b, loc, sliceType, stacked, offsets,
                                        sizes, strides);
}

GroupRows groupRows(OpBuilder &b, Location loc, StringRef op, Value counts,
                    Value group, Value begin, Value zero,
                    RankedTensorType rowsType) {
  int64_t rank = rowsType.getRank();
  bool capacity = rank == 3;
  GroupRows rows;
  rows.count = arith::IndexCastOp::create(
      b, loc, b.getIndexType(), tensor::ExtractOp::create(b, loc, counts, group));
  rows.end = capacity ? rows.count
                      : arith::AddIOp::create(b, loc, begin, rows.count);
  // Checked before the count sizes a slice.
  cf::AssertOp::create(
      b, loc,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, rows.count,
                            zero),
      (op + ": a group has a negative row count").str());
  cf::AssertOp::create(
      b, loc,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle, rows.end,
                            indexConst(b, loc, rowsType.getDimSize(rank - 2))),
      (op + (capacity ? ": a group has more rows than the capacity"
                      : ": the groups have more rows than the buffer"))
          .str());
  if (capacity) {
    rows.offsets.push_back(group);
    rows.sizes.push_back(b.getIndexAttr(1));
  }
  rows.offsets.append({capacity ? zero : begin, b.getIndexAttr(0)});
  rows.sizes.append({rows.count, b.getIndexAttr(rowsType.getShape().back())});
  rows.strides.assign(rank, b.getIndexAttr(1));
  return rows;
}

/// The box `sizes` with the row width of `buffer`.
static SmallVector<OpFoldResult> withWidth(OpBuilder &b,
                                           ArrayRef<OpFoldResult> sizes,
                                           Value buffer) {
  SmallVector<OpFoldResult> widened(sizes);
  widened.back() = b.getIndexAttr(tensorType(buffer).getShape().back());
  return widened;
}

Value GroupRows::slice(OpBuilder &b, Location loc, Value buffer) const {
  RankedTensorType type = tensorType(buffer);
  auto groupType = RankedTensorType::get(
      {ShapedType::kDynamic, type.getShape().back()}, type.getElementType());
  return tensor::ExtractSliceOp::create(b, loc, groupType, buffer, offsets,
                                        withWidth(b, sizes, buffer), strides);
}

Value GroupRows::insert(OpBuilder &b, Location loc, Value rows,
                        Value buffer) const {
  return tensor::InsertSliceOp::create(b, loc, rows, buffer, offsets,
                                       withWidth(b, sizes, buffer), strides);
}

namespace {

struct ExpertsOpLowering final : OpConversionPattern<ExpertsOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(ExpertsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType rowsType = tensorType(adaptor.getRows());
    auto outType = cast<RankedTensorType>(op.getType());
    bool capacity = rowsType.getRank() == 3;
    int64_t numGroups = tensorType(adaptor.getCounts()).getDimSize(0);
    int64_t numExperts = op.getNumExperts();
    ScalarActivation activation =
        ScalarActivation::resolve(op, op.getActivation());

    Value zero = indexConst(rewriter, loc, 0);
    // Rows outside every group stay zero.
    SmallVector<Value> inits{filledTensor(rewriter, loc, outType, 0.0)};
    if (!capacity)
      inits.push_back(zero);
    auto loop = scf::ForOp::create(
        rewriter, loc, zero, indexConst(rewriter, loc, numGroups),
        indexConst(rewriter, loc, 1), inits,
        [&](OpBuilder &b, Location nloc, Value group, ValueRange args) {
          GroupRows rows = groupRows(b, nloc, "moe.experts",
                                     adaptor.getCounts(), group,
                                     capacity ? zero : args[1], zero,
                                     rowsType);
          Value x = rows.slice(b, nloc, adaptor.getRows());
          Value expert = arith::RemUIOp::create(
              b, nloc, group, indexConst(b, nloc, numExperts));
          auto slice = [&](Value stacked) {
            return expertSlice(b, nloc, stacked, expert);
          };
          FFNWeights weights{
              slice(adaptor.getFc1Weight()), slice(adaptor.getFc1Bias()),
              slice(adaptor.getFc3Weight()), slice(adaptor.getFc3Bias()),
              slice(adaptor.getFc2Weight()), slice(adaptor.getFc2Bias())};
          Value y = buildFFN(b, nloc, x, weights, activation);
          SmallVector<Value> yields{rows.insert(b, nloc, y, args[0])};
          if (!capacity)
            yields.push_back(rows.end);
          scf::YieldOp::create(b, nloc, yields);
        });
    rewriter.replaceOp(op, loop.getResult(0));
    return success();
  }
};

struct SharedExpertOpLowering final : OpConversionPattern<SharedExpertOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(SharedExpertOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value x = adaptor.getInput();
    FFNWeights weights{adaptor.getFc1Weight(), adaptor.getFc1Bias(),
                       adaptor.getFc3Weight(), adaptor.getFc3Bias(),
                       adaptor.getFc2Weight(), adaptor.getFc2Bias()};
    Value y = buildFFN(rewriter, loc, x, weights,
                       ScalarActivation::resolve(op, op.getActivation()));
    if (Value gate = adaptor.getGate()) {
      // y * sigmoid(x g^T), the [T, 1] logit broadcast along each row.
      Value logit = linear(rewriter, loc, x, gate, Value());
      MLIRContext *ctx = rewriter.getContext();
      AffineMap rowLogit = AffineMap::get(
          2, 0, {getAffineDimExpr(0, ctx), getAffineConstantExpr(0, ctx)}, ctx);
      y = mapElements(rewriter, loc, cast<RankedTensorType>(op.getType()),
                      {y, logit}, {loopsTo(rewriter, 2, {0, 1}), rowLogit},
                      [](OpBuilder &nb, Location nloc, ValueRange args) {
                        return arith::MulFOp::create(
                            nb, nloc, args[0], sigmoid(nb, nloc, args[1]));
                      });
    }
    rewriter.replaceOp(op, y);
    return success();
  }
};

} // namespace

void populateExpertsPatterns(RewritePatternSet &patterns) {
  patterns.add<ExpertsOpLowering, SharedExpertOpLowering>(
      patterns.getContext());
}

} // namespace mlir::moe::lowering
