//===- SharedExpert.cpp - fold shared experts into moe.layer --------------===//
//
// Qwen2-MoE adds `sigmoid(x g) * SharedMLP(x)` to the routed experts' sum,
// DeepSeek adds `SharedMLP(x)`; once the routed block is a moe.layer, the
// sum becomes the layer's shared expert.
//
//===----------------------------------------------------------------------===//

#include "passes/Raise/SharedExpert.h"
#include "passes/Raise/Validation.h"

namespace mlir::moe::raise {
namespace {

/// `sigmoid(x @ g) * ffn` (either order; `Gemm(x, g, transB)` with g
/// `[1, H]` too): the gate weight, the FFN value and whether the gate is
/// `[1, H]`.
static std::optional<std::tuple<arith::ConstantOp, Value, bool>>
matchGated(Value value, Value x) {
  auto mul = definedBy<onnx::MulOp>(value);
  if (!mul)
    return std::nullopt;
  for (int i = 0; i < 2; ++i) {
    auto sigmoid = definedBy<onnx::SigmoidOp>(mul.getInputs()[i]);
    if (!sigmoid)
      continue;
    Operation *linear = skipNoOps(sigmoid.getInputs()[0]).getDefiningOp();
    auto gemm = dyn_cast_or_null<onnx::GemmOp>(linear);
    auto transB =
        gemm ? gemm->getAttrOfType<IntegerAttr>("transB") : IntegerAttr();
    bool outIn = transB && transB.getInt() == 1 && gemm.getInputs().size() == 2;
    if (!isa_and_nonnull<onnx::MatMulOp>(linear) && !outIn)
      continue;
    arith::ConstantOp gate = constantOp(linear->getOperand(1));
    if (!gate || skipNoOps(linear->getOperand(0)) != x ||
        cast<RankedTensorType>(gate.getType()).getDimSize(outIn ? 0 : 1) != 1)
      continue;
    return std::make_tuple(gate, mul.getInputs()[1 - i], outIn);
  }
  return std::nullopt;
}

/// Add(moe.layer, [sigmoid(x g) *] FFN(x)) -> moe.layer with a shared expert.
struct FoldSharedExpert : OpRewritePattern<onnx::AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(onnx::AddOp add,
                                PatternRewriter &rewriter) const override {
    for (int i = 0; i < 2; ++i) {
      // The layer's [T, H] result, or it reshaped back to the block's
      // [B, S, H] with the shared expert on the unflattened tokens.
      Value routed = add.getInputs()[i];
      auto unflatten = definedBy<onnx::ReshapeOp>(routed);
      auto layer =
          definedBy<LayerOp>(unflatten ? unflatten.getInputs()[0] : routed);
      if (!layer || !layer->hasOneUse() || layer.getSharedFc1() ||
          (unflatten && !unflatten->hasOneUse()))
        continue;
      Value x = layer.getInput();
      if (unflatten) {
        auto flatten = definedBy<onnx::ReshapeOp>(x);
        if (!flatten || flatten.getInputs()[0].getType() != routed.getType())
          continue;
        x = skipNoOps(flatten.getInputs()[0]);
      }
      Value shared = add.getInputs()[1 - i];
      arith::ConstantOp gate;
      bool gateOutIn = false;
      if (auto gated = matchGated(shared, x))
        std::tie(gate, shared, gateOutIn) = *gated;
      FailureOr<FFNMatch> ffn = matchFFN(shared, rewriter);
      if (failed(ffn) || skipNoOps(ffn->input) != x)
        return rewriter.notifyMatchFailure(add, "no shared FFN on the input");
      // Experts with both SwiGLU halves in fc1 take the shared expert's
      // halves the same way.
      ActivationAttr activation = layer.getActivation();
      bool concatenate = activation.isFusedSwiGLU() &&
                         activation.getLayout() == SwiGLULayout::Concatenated &&
                         ffn->fc3 &&
                         activationOf(*ffn, rewriter.getContext()) ==
                             ActivationAttr::get(rewriter.getContext(),
                                                 ActivationKind::SwiGLU);
      if (!concatenate &&
          activationOf(*ffn, rewriter.getContext()) != activation)
        return rewriter.notifyMatchFailure(
            add, "shared expert activation differs from the experts'");
      if (add.getOutputs()[0].getType() != routed.getType())
        return rewriter.notifyMatchFailure(add, "sum changes the type");

      Location loc = add.getLoc();
      rewriter.setInsertionPoint(layer);
      // moe's layout is [out, in].
      auto outIn = [&](arith::ConstantOp weight, bool isOutIn,
                       StringRef name) -> FailureOr<Value> {
        if (!weight)
          return Value();
        if (!isOutIn)
          return transposeWeight(weight, name, loc, rewriter);
        return reshapeConstant(
            weight, cast<RankedTensorType>(weight.getType()).getShape(), name,
            loc, rewriter);
      };
      FailureOr<Value> fc1 = outIn(ffn->fc1, ffn->outIn, "shared_fc1");
      FailureOr<Value> fc3 = outIn(ffn->fc3, ffn->outIn, "shared_fc3");
      FailureOr<Value> fc2 = outIn(ffn->fc2, ffn->outIn, "shared_fc2");
      FailureOr<Value> gateWeight = outIn(gate, gateOutIn, "shared_gate");
      if (concatenate && succeeded(fc1) && succeeded(fc3)) {
        fc1 = concatRows({*fc1, *fc3}, "shared_fc1", loc, rewriter);
        fc3 = Value();
      }
      if (failed(fc1) || failed(fc3) || failed(fc2) || failed(gateWeight))
        return rewriter.notifyMatchFailure(add, "weights could not be read");
      auto withShared = [&](LayerOp target) {
        target.getSharedFc1Mutable().assign(*fc1);
        if (*fc3)
          target.getSharedFc3Mutable().assign(*fc3);
        target.getSharedFc2Mutable().assign(*fc2);
        if (*gateWeight)
          target.getSharedGateMutable().assign(*gateWeight);
      };
      // Checked on a copy: the layer itself changes only if it holds.
      auto candidate = cast<LayerOp>(rewriter.clone(*layer));
      withShared(candidate);
      LogicalResult checked = checkRaisedBlock(
          add.getOutputs()[0], candidate.getOutput(),
          {layer.getInput(), layer.getLogits()}, add, rewriter);
      rewriter.eraseOp(candidate);
      if (failed(checked))
        return failure();
      rewriter.modifyOpInPlace(layer, [&] { withShared(layer); });
      rewriter.replaceOp(add, routed);
      return success();
    }
    // Not a candidate at all: no reason worth explaining.
    return failure();
  }
};

} // namespace

void populateSharedExpertPatterns(RewritePatternSet &patterns) {
  patterns.add<FoldSharedExpert>(patterns.getContext());
}

} // namespace mlir::moe::raise
