// RUN: moe-opt %s --split-input-file --moe-autodiff="loss=mse" | FileCheck %s

// The VJP of a ragged all-to-all is the reverse exchange of the rows'
// cotangents with the counts the forward received (no count exchange): the
// rows go back to the ranks that sent them, in the layout they left in.
// The all_gather that makes the output the same on every rank takes back
// its block in the backward.
// CHECK-LABEL: func.func @main
// CHECK: %[[ROWS:.*]], %[[RECEIVED:.*]] = moe.all_to_all %{{.*}}, %arg1 on @world grid_axes = [3] : (tensor<8x4xf32>, tensor<4xi32>) -> (tensor<8x4xf32>, tensor<4xi32>)
// CHECK: %[[BLOCK:.*]] = shard.all_slice %{{.*}} on @world grid_axes = [3] slice_axis = 0 : tensor<32x4xf32> -> tensor<8x4xf32>
// CHECK: %[[BACK:.*]], %{{.*}} = moe.all_to_all %[[BLOCK]], %[[RECEIVED]] on @world grid_axes = [3] : (tensor<8x4xf32>, tensor<4xi32>) -> (tensor<8x4xf32>, tensor<4xi32>)
// Every rank sent its own copy of the same rows (they vary along no axis):
// their cotangent is the sum of the copies'.
// CHECK: %[[SUM:.*]] = shard.all_reduce %[[BACK]] on @world grid_axes = [3]
// CHECK: onnx.MatMul %{{.*}}, %[[SUM]]
module attributes {moe.plan = #moe.plan<pp = 1, dp = 1, dp_shard = 1, ep = 4, tp = 1, dispatcher = all_to_all, token_shuffle = false, load_balancing = none, aux_loss_coeff = 0.0, z_loss_coeff = 0.0, seed = 1>} {
shard.grid @world(shape = 1x1x1x4x1)
func.func @main(%x: tensor<8x4xf32> {onnx.name = "x"}, %counts: tensor<4xi32> {onnx.name = "counts"}) -> (tensor<32x4xf32> {onnx.name = "y"}) {
  %w = arith.constant dense_resource<layer.w> : tensor<4x4xf32>
  %rows = onnx.MatMul %x, %w : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %y, %received = moe.all_to_all %rows, %counts on @world grid_axes = [3] : (tensor<8x4xf32>, tensor<4xi32>) -> (tensor<8x4xf32>, tensor<4xi32>)
  %all = shard.all_gather %y on @world grid_axes = [3] gather_axis = 0 : tensor<8x4xf32> -> tensor<32x4xf32>
  return %all : tensor<32x4xf32>
}
}

{-#
  dialect_resources: {
    builtin: {
      layer.w: "0x04000000000000000000803d0000003e0000403e0000803e0000a03e0000c03e0000e03e0000003f0000103f0000203f0000303f0000403f0000503f0000603f0000703f"
    }
  }
#-}
