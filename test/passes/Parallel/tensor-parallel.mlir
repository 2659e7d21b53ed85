// Expert parallelism with tensor parallelism inside the experts and the shared
// expert: each tp rank holds its block of the hidden units (both halves of a
// concatenated SwiGLU), the fc2 bias is added by tp rank 0 only, and one
// all-reduce over tp sums the experts' and the shared expert's partial outputs.
// RUN: moe-opt %s --moe-set-plan="ep=2 tp=2" --moe-partition | FileCheck %s

func.func @block(%x: tensor<16x8xf32>, %logits: tensor<16x4xf32>,
                 %w1: tensor<4x32x8xf32>, %b1: tensor<4x32xf32>,
                 %w2: tensor<4x8x16xf32>, %b2: tensor<4x8xf32>,
                 %s1: tensor<48x8xf32>, %s2: tensor<8x24xf32>,
                 %g: tensor<1x8xf32>) -> tensor<16x8xf32> {
  %y = moe.layer softmax topk k 2 %x, %logits fc1(%w1, %b1) fc2(%w2, %b2)
      shared_fc1(%s1) shared_fc2(%s2) shared_gate(%g)
      activation <swiglu, concatenated>
      : (tensor<16x8xf32>, tensor<16x4xf32>, tensor<4x32x8xf32>, tensor<4x32xf32>,
         tensor<4x8x16xf32>, tensor<4x8xf32>, tensor<48x8xf32>,
         tensor<8x24xf32>, tensor<1x8xf32>) -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}

// CHECK: shard.grid @world(shape = 1x1x1x2x2)
// Tokens split over ep only: tp ranks share them.
// CHECK: %[[X:.*]] = shard.all_slice %arg0 on @world grid_axes = [3] slice_axis = 0 {moe.tokens} : tensor<16x8xf32> -> tensor<8x8xf32>
// CHECK: %[[W1E:.*]] = shard.all_slice %arg2 on @world grid_axes = [3] slice_axis = 0 : tensor<4x32x8xf32> -> tensor<2x32x8xf32>
// CHECK: %[[HALVES:.*]] = tensor.expand_shape %[[W1E]] {{\[\[}}0], [1, 2], [3]] output_shape [2, 2, 16, 8] : tensor<2x32x8xf32> into tensor<2x2x16x8xf32>
// CHECK: %[[MINE:.*]] = shard.all_slice %[[HALVES]] on @world grid_axes = [4] slice_axis = 2 : tensor<2x2x16x8xf32> -> tensor<2x2x8x8xf32>
// CHECK: %[[W1:.*]] = tensor.collapse_shape %[[MINE]] {{\[\[}}0], [1, 2], [3]] : tensor<2x2x8x8xf32> into tensor<2x16x8xf32>
// CHECK: %[[B1:.*]] = tensor.collapse_shape {{.*}} into tensor<2x16xf32>
// CHECK: %[[W2E:.*]] = shard.all_slice %arg4 on @world grid_axes = [3] slice_axis = 0 : tensor<4x8x16xf32> -> tensor<2x8x16xf32>
// CHECK: %[[W2:.*]] = shard.all_slice %[[W2E]] on @world grid_axes = [4] slice_axis = 2 : tensor<2x8x16xf32> -> tensor<2x8x8xf32>
// CHECK: %[[B2E:.*]] = shard.all_slice %arg5 on @world grid_axes = [3] slice_axis = 0 : tensor<4x8xf32> -> tensor<2x8xf32>
// CHECK: %[[TPRANK:.*]] = shard.process_multi_index on @world axes = [4] : index
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[TPRANK]], %c0
// CHECK: %[[B2:.*]] = arith.select %[[FIRST]], %[[B2E]], %{{.*}} : tensor<2x8xf32>
// CHECK: moe.all_to_all
// CHECK: moe.experts %{{.*}}, %{{.*}} fc1(%[[W1]], %[[B1]]) fc2(%[[W2]], %[[B2]]) activation <swiglu, concatenated> : (tensor<32x8xf32>, tensor<4xi32>, tensor<2x16x8xf32>, tensor<2x16xf32>, tensor<2x8x8xf32>, tensor<2x8xf32>) -> tensor<32x8xf32>
// CHECK: moe.all_to_all
// CHECK: %[[ROUTED:.*]] = moe.combine {{.*}} -> tensor<8x8xf32>
// CHECK: %[[S1:.*]] = tensor.collapse_shape {{.*}} into tensor<24x8xf32>
// CHECK: %[[S2:.*]] = shard.all_slice %arg7 on @world grid_axes = [4] slice_axis = 1 : tensor<8x24xf32> -> tensor<8x12xf32>
// CHECK: %[[SHARED:.*]] = moe.shared_expert %[[X]] fc1(%[[S1]]) fc2(%[[S2]]) gate(%arg8) activation <swiglu, concatenated>
// CHECK: %[[SUM:.*]] = arith.addf %[[ROUTED]], %[[SHARED]] : tensor<8x8xf32>
// CHECK: %[[FULL:.*]] = shard.all_reduce %[[SUM]] on @world grid_axes = [4] : tensor<8x8xf32> -> tensor<8x8xf32>
// CHECK: shard.all_gather %[[FULL]] on @world grid_axes = [3] gather_axis = 0 {moe.tokens} : tensor<8x8xf32> -> tensor<16x8xf32>
