//===- SharedExpert.cpp - fold shared experts into moe.layer --------------===//
//
// Qwen2-MoE adds `sigmoid(x g) * SharedMLP(x)` to the routed experts' sum,
// DeepSeek adds `SharedMLP(x)`; once the routed block is a moe.layer, the
// sum becomes the layer's shared expert.
//
//===----------------------------------------------------------------------===//

#include "passes/Raise/SharedExpert.h"

namespace mlir::moe::raise {
namespace {

/// `sigmoid(x @ g) * ffn` (either order): the gate weight and the FFN value.
static std::optional<std::pair<arith::ConstantOp, Value>>
matchGated(Value value, Value x) {
  auto mul = definedBy<onnx::MulOp>(value);
  if (!mul)
    return std::nullopt;
  for (int i = 0; i < 2; ++i) {
    auto sigmoid = definedBy<onnx::SigmoidOp>(mul.getInputs()[i]);
    if (!sigmoid)
      continue;
    auto matmul = definedBy<onnx::MatMulOp>(sigmoid.getInputs()[0]);
    arith::ConstantOp gate =
        matmul ? constantOp(matmul.getInputs()[1]) : arith::ConstantOp();
    if (!gate || skipNoOps(matmul.getInputs()[0]) != x ||
        cast<RankedTensorType>(gate.getType()).getDimSize(1) != 1)
      continue;
    return std::make_pair(gate, mul.getInputs()[1 - i]);
  }
  return std::nullopt;
}

/// Add(moe.layer, [sigmoid(x g) *] FFN(x)) -> moe.layer with a shared expert.
struct FoldSharedExpert : OpRewritePattern<onnx::AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(onnx::AddOp add,
                                PatternRewriter &rewriter) const override {
    for (int i = 0; i < 2; ++i) {
      auto layer = definedBy<LayerOp>(add.getInputs()[i]);
      if (!layer || !layer->hasOneUse() || layer.getSharedFc1())
        continue;
      Value x = layer.getInput();
      Value shared = add.getInputs()[1 - i];
      arith::ConstantOp gate;
      if (std::optional<std::pair<arith::ConstantOp, Value>> gated =
              matchGated(shared, x)) {
        gate = gated->first;
        shared = gated->second;
      }
      FailureOr<FFNMatch> ffn = matchFFN(shared, rewriter);
      if (failed(ffn) || skipNoOps(ffn->input) != x)
        return rewriter.notifyMatchFailure(add, "no shared FFN on the input");
      if (activationOf(*ffn, rewriter.getContext()) != layer.getActivation())
        return rewriter.notifyMatchFailure(
            add, "shared expert activation differs from the experts'");
      if (add.getOutputs()[0].getType() != layer.getOutput().getType())
        return rewriter.notifyMatchFailure(add, "sum changes the type");

      Location loc = add.getLoc();
      rewriter.setInsertionPoint(layer);
      auto transpose = [&](arith::ConstantOp weight,
                           StringRef name) -> FailureOr<Value> {
        return weight ? transposeWeight(weight, name, loc, rewriter)
                      : FailureOr<Value>(Value());
      };
      FailureOr<Value> fc1 = transpose(ffn->fc1, "shared_fc1");
      FailureOr<Value> fc3 = transpose(ffn->fc3, "shared_fc3");
      FailureOr<Value> fc2 = transpose(ffn->fc2, "shared_fc2");
      FailureOr<Value> gateWeight = transpose(gate, "shared_gate");
      if (failed(fc1) || failed(fc3) || failed(fc2) || failed(gateWeight))
        return rewriter.notifyMatchFailure(add, "weights could not be read");
      rewriter.modifyOpInPlace(layer, [&] {
        layer.getSharedFc1Mutable().assign(*fc1);
        if (*fc3)
          layer.getSharedFc3Mutable().assign(*fc3);
        layer.getSharedFc2Mutable().assign(*fc2);
        if (*gateWeight)
          layer.getSharedGateMutable().assign(*gateWeight);
      });
      rewriter.replaceOp(add, layer.getOutput());
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
