// RUN: moe-opt %s --moe-autodiff="loss=mse" | FileCheck %s

// The VJP of a ragged all-to-all is the reverse exchange of the rows'
// cotangents with the counts the forward received (no count exchange): the
// rows go back to the ranks that sent them, in the layout they left in.
// CHECK-LABEL: func.func @main
// CHECK: %[[ROWS:.*]], %[[RECEIVED:.*]] = moe.all_to_all %{{.*}}, %arg1 on @grid grid_axes = [0] : (tensor<8x4xf32>, tensor<4xi32>) -> (tensor<8x4xf32>, tensor<4xi32>)
// CHECK: %[[BACK:.*]], %{{.*}} = moe.all_to_all %{{.*}}, %[[RECEIVED]] on @grid grid_axes = [0] : (tensor<8x4xf32>, tensor<4xi32>) -> (tensor<8x4xf32>, tensor<4xi32>)
// CHECK: onnx.MatMul %{{.*}}, %[[BACK]]
shard.grid @grid(shape = 4)
func.func @main(%x: tensor<8x4xf32> {onnx.name = "x"}, %counts: tensor<4xi32> {onnx.name = "counts"}) -> (tensor<8x4xf32> {onnx.name = "y"}) {
  %w = arith.constant dense_resource<layer.w> : tensor<4x4xf32>
  %rows = onnx.MatMul %x, %w : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %y, %received = moe.all_to_all %rows, %counts on @grid grid_axes = [0] : (tensor<8x4xf32>, tensor<4xi32>) -> (tensor<8x4xf32>, tensor<4xi32>)
  return %y : tensor<8x4xf32>
}

{-#
  dialect_resources: {
    builtin: {
      layer.w: "0x04000000000000000000803d0000003e0000403e0000803e0000a03e0000c03e0000e03e0000003f0000103f0000203f0000303f0000403f0000503f0000603f0000703f"
    }
  }
#-}
