// Data parallelism with sharded weights (SageMaker hybrid_shard_degree): each
// rank keeps 1/dp_shard of its experts' weights and gathers them before use.
// RUN: moe-opt %s --moe-set-plan="dp=2 dp-shard=2 ep=2" --moe-partition | FileCheck %s

func.func @block(%x: tensor<16x8xf32>, %logits: tensor<16x8xf32>,
                 %w1: tensor<8x16x8xf32>, %w2: tensor<8x8x16xf32>) -> tensor<16x8xf32> {
  %y = moe.layer softmax topk k 2 %x, %logits fc1(%w1) fc2(%w2) activation <silu>
      : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<8x16x8xf32>,
         tensor<8x8x16xf32>) -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}

// CHECK: shard.grid @world(shape = 1x1x2x2x1)
// CHECK: shard.all_slice %arg0 on @world grid_axes = [2, 3] slice_axis = 0 {moe.tokens} : tensor<16x8xf32> -> tensor<4x8xf32>
// CHECK: %[[MINE:.*]] = shard.all_slice %arg2 on @world grid_axes = [3] slice_axis = 0 : tensor<8x16x8xf32> -> tensor<4x16x8xf32>
// CHECK: %[[SHARD:.*]] = shard.all_slice %[[MINE]] on @world grid_axes = [2] slice_axis = 0 : tensor<4x16x8xf32> -> tensor<2x16x8xf32>
// CHECK: %[[W1:.*]] = shard.all_gather %[[SHARD]] on @world grid_axes = [2] gather_axis = 0 : tensor<2x16x8xf32> -> tensor<4x16x8xf32>
// CHECK: moe.experts %{{.*}}, %{{.*}} fc1(%[[W1]])
