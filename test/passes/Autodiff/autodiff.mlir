// RUN: moe-opt %s --split-input-file --moe-autodiff="loss=mse" | FileCheck %s
// RUN: not moe-opt %s --split-input-file --moe-autodiff="loss=hinge" 2>&1 | FileCheck %s --check-prefix=LOSS

// The step of y = x W under a mean squared error: the target becomes an
// input, the results are the loss, the MoE losses (none) and W's gradient
// 2 (y - t) / N through the MatMul's VJP, x^T dy.
// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[X:.*]]: tensor<2x2xf32> {onnx.name = "x"}, %[[T:.*]]: tensor<2x2xf32> {onnx.name = "target"}
// CHECK-SAME: -> (tensor<f32> {onnx.name = "loss"}, tensor<f32> {onnx.name = "aux_loss"}, tensor<2x2xf32> {moe.param = "model.w.weight", onnx.name = "grad:model.w.weight"})
// CHECK-SAME: attributes {moe.train_step}
// CHECK: %[[W:.*]] = arith.constant dense_resource<model.w.weight>
// CHECK: %[[Y:.*]] = onnx.MatMul %[[X]], %[[W]]
// CHECK: %[[D:.*]] = onnx.Sub %[[Y]], %[[T]]
// CHECK: %[[XT:.*]] = onnx.Transpose %[[X]] {perm = array<i64: 1, 0>}
// CHECK: %[[DW:.*]] = onnx.MatMul %[[XT]], %{{.*}} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
// CHECK: return %{{.*}}, %{{.*}}, %[[DW]]
// LOSS: moe-autodiff: unknown loss 'hinge' (model, causal-lm, cross-entropy or mse)
func.func @main(%x: tensor<2x2xf32> {onnx.name = "x"}) -> (tensor<2x2xf32> {onnx.name = "y"}) {
  %w = arith.constant dense_resource<model.w.weight> : tensor<2x2xf32>
  %y = onnx.MatMul %x, %w : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}

{-#
  dialect_resources: {
    builtin: {
      model.w.weight: "0x040000000000803F000000400000404000008040"
    }
  }
#-}
