// Routers that balance over the whole batch see every rank's logits; other
// readers of the routing (a loss) get the whole batch's ids back.
// RUN: moe-opt %s --moe-set-plan="ep=4" --moe-partition | FileCheck %s

func.func @block(%x: tensor<16x8xf32>, %logits: tensor<16x8xf32>,
                 %w1: tensor<8x16x8xf32>, %w2: tensor<8x8x16xf32>) -> (tensor<16x8xf32>, tensor<f32>) {
  %ids, %w = moe.router softmax sinkhorn %logits : tensor<16x8xf32> -> tensor<16x1xi32>, tensor<16x1xf32>
  %loss = moe.aux_loss softmax %logits, %ids {coeff = 1.0e-2} : tensor<16x8xf32>, tensor<16x1xi32> -> tensor<f32>
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids : (tensor<16x8xf32>, tensor<16x1xi32>) -> (tensor<16x8xf32>, tensor<16x1xi32>, tensor<8xi32>, tensor<i64>)
  %h = moe.experts %rows, %counts fc1(%w1) fc2(%w2) activation <gelu> : (tensor<16x8xf32>, tensor<8xi32>, tensor<8x16x8xf32>, tensor<8x8x16xf32>) -> tensor<16x8xf32>
  %y = moe.combine %h, %slots, %w : (tensor<16x8xf32>, tensor<16x1xi32>, tensor<16x1xf32>) -> tensor<16x8xf32>
  return %y, %loss : tensor<16x8xf32>, tensor<f32>
}

// CHECK: %[[L:.*]] = shard.all_slice %arg1 on @world grid_axes = [3] slice_axis = 0 {moe.tokens} : tensor<16x8xf32> -> tensor<4x8xf32>
// CHECK: %[[ALL:.*]] = shard.all_gather %[[L]] on @world grid_axes = [3] gather_axis = 0 {moe.tokens} : tensor<4x8xf32> -> tensor<16x8xf32>
// CHECK: %[[IDS:.*]], %[[W:.*]] = moe.router softmax sinkhorn %[[ALL]] {{.*}}: tensor<16x8xf32> -> tensor<16x1xi32>, tensor<16x1xf32>
// CHECK: %[[MYIDS:.*]] = shard.all_slice %[[IDS]] on @world grid_axes = [3] slice_axis = 0 {moe.tokens} : tensor<16x1xi32> -> tensor<4x1xi32>
// CHECK: %[[MYW:.*]] = shard.all_slice %[[W]] on @world grid_axes = [3] slice_axis = 0 {moe.tokens} : tensor<16x1xf32> -> tensor<4x1xf32>
// CHECK: moe.dispatch %{{.*}}, %[[MYIDS]]
// CHECK: moe.combine %{{.*}}, %{{.*}}, %[[MYW]]
// CHECK: moe.aux_loss softmax %arg1, %[[IDS]]
