// Capacity-mode expert parallelism: padded [E, B, H] buffers travel in one
// uniform all-to-all each way. The capacity is that of the whole batch: each
// rank learns from a prefix sum how many earlier tokens every expert holds.
// RUN: moe-opt %s --moe-set-plan="ep=2" --moe-partition | FileCheck %s --check-prefix=EP2
// RUN: moe-opt %s --moe-set-plan="dp=2 ep=4" --moe-partition | FileCheck %s --check-prefix=DPEP
// RUN: moe-opt %s --moe-set-plan="tp=2" --moe-partition | FileCheck %s --check-prefix=TP

func.func @block(%x: tensor<16x8xf32>, %logits: tensor<16x8xf32>,
                 %w1: tensor<8x16x8xf32>, %w2: tensor<8x8x16xf32>) -> tensor<16x8xf32> {
  %y = moe.layer softmax topk k 1 %x, %logits capacity 3 drop position
      fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<8x16x8xf32>,
         tensor<8x8x16xf32>) -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}

// EP2: %[[IDS:.*]], %[[W:.*]] = moe.router softmax topk %{{.*}} {{.*}}: tensor<8x8xf32> -> tensor<8x1xi32>, tensor<8x1xf32>
// EP2: %[[ROUTED:.*]] = moe.expert_counts %[[IDS]] : tensor<8x1xi32> -> tensor<8xi32>
// EP2: %[[BEFORE:.*]] = moe.prefix_sum %[[ROUTED]] on @world grid_axes = [3] : tensor<8xi32>
// EP2: %[[ROWS:.*]], %[[SLOTS:.*]], %[[COUNTS:.*]], %{{.*}} = moe.dispatch %{{.*}}, %[[IDS]] capacity 3 drop position after %[[BEFORE]] {{.*}}: (tensor<8x8xf32>, tensor<8x1xi32>, tensor<8xi32>) -> (tensor<8x3x8xf32>, tensor<8x1xi32>, tensor<8xi32>, tensor<i64>)
// EP2: %[[IN:.*]] = shard.all_to_all %[[ROWS]] on @world grid_axes = [3] split_axis = 0 concat_axis = 0 : tensor<8x3x8xf32> -> tensor<8x3x8xf32>
// EP2: %[[INC:.*]] = shard.all_to_all %[[COUNTS]] on @world grid_axes = [3] split_axis = 0 concat_axis = 0 : tensor<8xi32> -> tensor<8xi32>
// EP2: %[[Y:.*]] = moe.experts %[[IN]], %[[INC]] fc1(%{{.*}}) fc2(%{{.*}}) activation <relu> : (tensor<8x3x8xf32>, tensor<8xi32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<8x3x8xf32>
// EP2: %[[BACK:.*]] = shard.all_to_all %[[Y]] on @world grid_axes = [3] split_axis = 0 concat_axis = 0 : tensor<8x3x8xf32> -> tensor<8x3x8xf32>
// EP2: moe.combine %[[BACK]], %[[SLOTS]], %[[W]]

// With 2 tokens per rank an expert keeps at most 2 rows here.
// DPEP: shard.grid @world(shape = 1x2x1x4x1)
// DPEP: moe.prefix_sum %{{.*}} on @world grid_axes = [1, 3] : tensor<8xi32>
// DPEP: moe.dispatch {{.*}} capacity 3 drop position after {{.*}} -> (tensor<8x2x8xf32>,
// DPEP: shard.all_to_all %{{.*}} on @world grid_axes = [3] split_axis = 0 concat_axis = 0 : tensor<8x2x8xf32> -> tensor<8x2x8xf32>

// Tokens are not split by tp: the whole-batch dispatch is unchanged.
// TP-NOT: moe.prefix_sum
// TP: moe.dispatch %arg0, %{{.*}} capacity 3 drop position {{.*}}: {{.*}} -> (tensor<8x3x8xf32>,
// TP: shard.all_reduce %{{.*}} on @world grid_axes = [4] : tensor<16x8xf32> -> tensor<16x8xf32>
