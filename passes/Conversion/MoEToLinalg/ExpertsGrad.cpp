//===- ExpertsGrad.cpp - lower moe.experts_grad ---------------------------===//
//
// The backward of the expert FFNs, one group at a time as the forward runs
// (Experts.cpp): each group's projections and activation are recomputed
// from its rows, then the cotangents flow back through fc2, the activation
// and fc1 (and fc3). Weight cotangents of the groups of one expert add up
// in that expert's slice, in group order (per_group: each group's own
// slice); rows outside every group get zeros.
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/MoEToLinalg/Lowering.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::moe::lowering {

namespace {

/// `a^T c` for `a [n, p]` and `c [n, q]`: `[p, q]`, summed over the rows.
Value matmulTN(OpBuilder &b, Location loc, Value a, Value c) {
  RankedTensorType aType = tensorType(a);
  auto type = RankedTensorType::get(
      {aType.getDimSize(1), tensorType(c).getDimSize(1)},
      aType.getElementType());
  MLIRContext *ctx = b.getContext();
  AffineExpr p, q, r;
  bindDims(ctx, p, q, r);
  Value init = filledTensor(b, loc, type, 0.0);
  auto matmul = linalg::MatmulOp::create(b, loc, TypeRange{type},
                                         ValueRange{a, c}, init);
  matmul.setIndexingMapsAttr(b.getAffineMapArrayAttr(
      {AffineMap::get(3, 0, {r, p}, ctx), AffineMap::get(3, 0, {r, q}, ctx),
       AffineMap::get(3, 0, {p, q}, ctx)}));
  return matmul.getResult(0);
}

/// `a W` for `a [n, out]` and `W [out, in]`: `[n, in]`.
Value matmulNN(OpBuilder &b, Location loc, Value a, Value weight) {
  RankedTensorType wType = tensorType(weight);
  Value init = tensor::EmptyOp::create(
      b, loc,
      ArrayRef<OpFoldResult>{tensor::getMixedSize(b, loc, a, 0),
                             b.getIndexAttr(wType.getDimSize(1))},
      wType.getElementType());
  Value zero = scalarConst(b, loc, wType.getElementType(), 0.0);
  init = linalg::FillOp::create(b, loc, zero, init).getResult(0);
  return linalg::MatmulOp::create(b, loc, TypeRange{init.getType()},
                                  ValueRange{a, weight}, init)
      .getResult(0);
}

/// `[out]` sums over the rows of `a [n, out]`.
Value columnSum(OpBuilder &b, Location loc, Value a) {
  RankedTensorType type = tensorType(a);
  auto result =
      RankedTensorType::get({type.getDimSize(1)}, type.getElementType());
  return reduce(b, loc, a, {loopsTo(b, 2, {0, 1})}, result, 0.0, {1},
                [](OpBuilder &nb, Location nloc, ValueRange args) -> Value {
                  return arith::AddFOp::create(nb, nloc, args[0], args[1]);
                });
}

/// The cotangents of a SwiGLU's gate and linear halves for the output
/// cotangent `da`, with the inclusive clamp masks of a limit.
std::pair<Value, Value> swigluGrad(OpBuilder &b, Location loc,
                                   ActivationAttr activation, Value gate,
                                   Value lin, Value da) {
  Type type = gate.getType();
  auto c = [&](double value) { return scalarConst(b, loc, type, value); };
  auto mul = [&](Value lhs, Value rhs) -> Value {
    return arith::MulFOp::create(b, loc, lhs, rhs);
  };
  auto cmp = [&](arith::CmpFPredicate pred, Value lhs, Value rhs) -> Value {
    return arith::CmpFOp::create(b, loc, pred, lhs, rhs);
  };
  Value g = gate, l = lin;
  std::optional<APFloat> limit = activation.getLimit();
  if (limit) {
    double bound = limit->convertToDouble();
    g = arith::MinimumFOp::create(b, loc, gate, c(bound));
    l = arith::MaximumFOp::create(
        b, loc, arith::MinimumFOp::create(b, loc, lin, c(bound)), c(-bound));
  }
  double alpha = activation.getAlpha().convertToDouble();
  Value linear = arith::AddFOp::create(
      b, loc, l, c(activation.getBeta().convertToDouble()));
  Value s = sigmoid(b, loc, mul(c(alpha), g));
  // d/dg [g s(alpha g)] = s + alpha g s (1 - s)
  Value oneMinus = arith::SubFOp::create(b, loc, c(1.0), s);
  Value dGlu =
      arith::AddFOp::create(b, loc, s, mul(mul(c(alpha), g), mul(s, oneMinus)));
  Value dGate = mul(mul(da, linear), dGlu);
  Value dLin = mul(da, mul(g, s));
  if (limit) {
    double bound = limit->convertToDouble();
    dGate = arith::SelectOp::create(
        b, loc, cmp(arith::CmpFPredicate::OLE, gate, c(bound)), dGate, c(0.0));
    Value inside = arith::AndIOp::create(
        b, loc, cmp(arith::CmpFPredicate::OLE, lin, c(bound)),
        cmp(arith::CmpFPredicate::OGE, lin, c(-bound)));
    dLin = arith::SelectOp::create(b, loc, inside, dLin, c(0.0));
  }
  return {dGate, dLin};
}

/// An `[n, width]` tensor with the rows of `like`, uninitialized.
Value emptyRows(OpBuilder &b, Location loc, Value like, int64_t width) {
  return tensor::EmptyOp::create(
      b, loc,
      ArrayRef<OpFoldResult>{tensor::getMixedSize(b, loc, like, 0),
                             b.getIndexAttr(width)},
      tensorType(like).getElementType());
}

/// The cotangents of fc1's and fc3's outputs (`dh3` null without fc3) for
/// the cotangent `da [n, F]` of the activation.
std::pair<Value, Value> activationGrad(OpBuilder &b, Location loc,
                                       const ScalarActivation &scalar,
                                       Value h1, Value h3, Value da,
                                       int64_t width) {
  ActivationAttr activation = scalar.attr;
  ActivationKind kind = activation.getKind();
  auto identity = AffineMap::getMultiDimIdentityMap(2, b.getContext());
  if (kind != ActivationKind::SwiGLU && !h3) {
    Value dh1 = mapElements(
        b, loc, emptyRows(b, loc, da, width), {h1, da}, {},
        [&](OpBuilder &nb, Location nloc, ValueRange args) -> Value {
          return arith::MulFOp::create(nb, nloc, args[1],
                                       scalar.derivative(nb, nloc, args[0]));
        });
    return {dh1, Value()};
  }
  Value gate = h1, lin = h3;
  bool fused = activation.isFusedSwiGLU();
  bool interleaved = activation.getLayout() == SwiGLULayout::Interleaved;
  OpFoldResult rows = tensor::getMixedSize(b, loc, h1, 0);
  auto halfOffsets = [&](int64_t index) -> SmallVector<OpFoldResult> {
    return {b.getIndexAttr(0),
            b.getIndexAttr(interleaved ? index : index * width)};
  };
  SmallVector<OpFoldResult> halfSizes{rows, b.getIndexAttr(width)};
  SmallVector<OpFoldResult> halfStrides{b.getIndexAttr(1),
                                        b.getIndexAttr(interleaved ? 2 : 1)};
  if (fused) {
    gate = tensor::ExtractSliceOp::create(b, loc, h1, halfOffsets(0),
                                          halfSizes, halfStrides);
    lin = tensor::ExtractSliceOp::create(b, loc, h1, halfOffsets(1),
                                         halfSizes, halfStrides);
  }
  SmallVector<Value> inits{emptyRows(b, loc, da, width),
                           emptyRows(b, loc, da, width)};
  SmallVector<Value> grads = buildGeneric(
      b, loc, {gate, lin, da}, {identity, identity, identity}, inits, identity,
      [&](OpBuilder &nb, Location nloc, ValueRange args) -> SmallVector<Value> {
        if (kind == ActivationKind::SwiGLU) {
          auto [dGate, dLin] =
              swigluGrad(nb, nloc, activation, args[0], args[1], args[2]);
          return {dGate, dLin};
        }
        // act(h1) * h3
        Value dGate = arith::MulFOp::create(
            nb, nloc, arith::MulFOp::create(nb, nloc, args[2], args[1]),
            scalar.derivative(nb, nloc, args[0]));
        Value dLin = arith::MulFOp::create(nb, nloc, args[2],
                                           scalar.apply(nb, nloc, args[0]));
        return {dGate, dLin};
      });
  if (!fused)
    return {grads[0], grads[1]};
  // Both halves back into fc1's 2F columns.
  Value dh1 = emptyRows(b, loc, da, 2 * width);
  for (int64_t half : {0, 1})
    dh1 = tensor::InsertSliceOp::create(b, loc, grads[half], dh1,
                                        halfOffsets(half), halfSizes,
                                        halfStrides);
  return {dh1, Value()};
}

/// `acc[expert] += update` for a stacked `acc [E, ...]`. The slice is the
/// sum's init, read as the output element, so that bufferization adds in
/// place rather than copying the slice first to read it.
Value accumulateExpert(OpBuilder &b, Location loc, Value acc, Value expert,
                       Value update) {
  RankedTensorType type = tensorType(acc);
  SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
  offsets.front() = expert;
  SmallVector<OpFoldResult> sizes =
      getAsIndexOpFoldResult(b.getContext(), type.getShape());
  sizes.front() = b.getIndexAttr(1);
  SmallVector<OpFoldResult> strides(type.getRank(), b.getIndexAttr(1));
  Value current = expertSlice(b, loc, acc, expert);
  auto identity = AffineMap::getMultiDimIdentityMap(
      tensorType(update).getRank(), b.getContext());
  Value sum =
      buildGeneric(b, loc, {update}, {identity}, {current}, identity,
                   [](OpBuilder &nb, Location nloc,
                      ValueRange args) -> SmallVector<Value> {
                     // current + update, in the order of the two operands.
                     return {arith::AddFOp::create(nb, nloc, args[1], args[0])};
                   })
          .front();
  return tensor::InsertSliceOp::create(b, loc, sum, acc, offsets, sizes,
                                       strides);
}

struct ExpertsGradOpLowering final : OpConversionPattern<ExpertsGradOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(ExpertsGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType rowsType = tensorType(adaptor.getRows());
    bool capacity = rowsType.getRank() == 3;
    int64_t numGroups = tensorType(adaptor.getCounts()).getDimSize(0);
    int64_t numExperts = op.getNumExperts();
    int64_t width = tensorType(adaptor.getFc2Weight()).getDimSize(2);
    ScalarActivation activation =
        ScalarActivation::resolve(op, op.getActivation());

    // The carried cotangents: rows, then every weight the op has, in the
    // order of its results; then the dropless row offset.
    SmallVector<Value> weights{adaptor.getFc1Weight(), adaptor.getFc1Bias(),
                               adaptor.getFc3Weight(), adaptor.getFc3Bias(),
                               adaptor.getFc2Weight(), adaptor.getFc2Bias()};
    // Per group: one cotangent row per group, each written once.
    bool perGroup = op.getPerGroup();
    SmallVector<Value> inits{filledTensor(rewriter, loc, rowsType, 0.0)};
    for (Value weight : weights) {
      if (!weight)
        continue;
      RankedTensorType type = tensorType(weight);
      if (perGroup) {
        SmallVector<int64_t> shape(type.getShape());
        shape[0] = numGroups;
        type = type.clone(shape);
      }
      inits.push_back(filledTensor(rewriter, loc, type, 0.0));
    }
    Value zero = indexConst(rewriter, loc, 0);
    if (!capacity)
      inits.push_back(zero);

    auto loop = scf::ForOp::create(
        rewriter, loc, zero, indexConst(rewriter, loc, numGroups),
        indexConst(rewriter, loc, 1), inits,
        [&](OpBuilder &b, Location nloc, Value group, ValueRange args) {
          GroupRows rows = groupRows(b, nloc, "moe.experts_grad",
                                     adaptor.getCounts(), group,
                                     capacity ? zero : args.back(), zero,
                                     rowsType);
          Value x = rows.slice(b, nloc, adaptor.getRows());
          Value dy = rows.slice(b, nloc, adaptor.getDOutput());

          Value expert = arith::RemUIOp::create(
              b, nloc, group, indexConst(b, nloc, numExperts));
          auto local = [&](Value stacked) {
            return expertSlice(b, nloc, stacked, expert);
          };
          Value w1 = local(adaptor.getFc1Weight()),
                w3 = local(adaptor.getFc3Weight()),
                w2 = local(adaptor.getFc2Weight());
          // The forward of this group again.
          Value h1 = linear(b, nloc, x, w1, local(adaptor.getFc1Bias()));
          Value h3 = w3 ? linear(b, nloc, x, w3, local(adaptor.getFc3Bias()))
                        : Value();
          Value a = applyActivation(b, nloc, h1, h3, activation, width);

          Value da = matmulNN(b, nloc, dy, w2);
          auto [dh1, dh3] =
              activationGrad(b, nloc, activation, h1, h3, da, width);
          Value dx = matmulNN(b, nloc, dh1, w1);
          if (dh3)
            dx = mapElements(
                b, nloc, emptyRows(b, nloc, dx, rowsType.getShape().back()),
                {dx, matmulNN(b, nloc, dh3, w3)}, {},
                [](OpBuilder &nb, Location l, ValueRange v) -> Value {
                  return arith::AddFOp::create(nb, l, v[0], v[1]);
                });
          // This group's contribution to each weight, in result order.
          SmallVector<Value> updates{matmulTN(b, nloc, dh1, x),
                                     columnSum(b, nloc, dh1),
                                     dh3 ? matmulTN(b, nloc, dh3, x) : Value(),
                                     dh3 ? columnSum(b, nloc, dh3) : Value(),
                                     matmulTN(b, nloc, dy, a),
                                     columnSum(b, nloc, dy)};

          SmallVector<Value> yields{rows.insert(b, nloc, dx, args[0])};
          unsigned next = 1;
          for (auto [weight, update] : llvm::zip(weights, updates))
            if (weight)
              yields.push_back(accumulateExpert(
                  b, nloc, args[next++], perGroup ? group : expert, update));
          if (!capacity)
            yields.push_back(rows.end);
          scf::YieldOp::create(b, nloc, yields);
        });

    // The op's results are the rows' cotangent and one per weight it has.
    unsigned numResults = op->getNumResults();
    rewriter.replaceOp(op, loop.getResults().take_front(numResults));
    return success();
  }
};

} // namespace

void populateExpertsGradPatterns(RewritePatternSet &patterns) {
  patterns.add<ExpertsGradOpLowering>(patterns.getContext());
}

} // namespace mlir::moe::lowering
