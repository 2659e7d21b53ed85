// Capacity-mode expert parallelism: padded [E, B, H] buffers travel in one
// uniform all-to-all each way. The capacity is that of the whole batch: each
// rank learns from a prefix sum how many earlier tokens every expert holds.
// RUN: moe-opt %s --moe-set-plan="ep=2" --moe-partition | FileCheck %s --check-prefix=EP2
// RUN: moe-opt %s --moe-set-plan="dp=2 ep=4" --moe-partition | FileCheck %s --check-prefix=DPEP
// RUN: moe-opt %s --moe-set-plan="tp=2" --moe-partition | FileCheck %s --check-prefix=TP
// RUN: moe-opt %s --moe-set-plan="ep=2" --moe-partition | FileCheck %s --check-prefix=CHOICE

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

// The choice policy (GShard's top-2) on 2 EP ranks: the pairs of each choice
// are counted as experts j * E + e, one prefix sum and one sum over the
// ranks; a rank keeps clamp(C - G_j, 0, n_j) of its n_j choice-j pairs,
// G_j its earlier ranks' choice-j pairs plus every rank's lower choices,
// and dispatches with C less what it keeps.
// CHOICE-LABEL: func.func @choice
// CHOICE: %[[IDS:.*]], %{{.*}} = moe.router softmax topk
// CHOICE: %[[SHIFTED:.*]] = arith.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<8x2xi1>, tensor<8x2xi32>
// CHOICE: %[[LOCAL:.*]] = moe.expert_counts %[[SHIFTED]] : tensor<8x2xi32> -> tensor<16xi32>
// CHOICE: %[[BEFORE:.*]] = moe.prefix_sum %[[LOCAL]] on @world grid_axes = [3] : tensor<16xi32>
// CHOICE: %[[TOTAL:.*]] = shard.all_reduce %[[LOCAL]] on @world grid_axes = [3] : tensor<16xi32> -> tensor<16xi32>
// CHOICE: %[[B0:.*]] = tensor.extract_slice %[[BEFORE]][0] [8] [1]
// CHOICE: %[[LEFT0:.*]] = arith.subi %[[C:.*]], %[[B0]] : tensor<8xi32>
// CHOICE: %[[POS0:.*]] = arith.maxsi %[[LEFT0]], %[[ZERO:.*]] : tensor<8xi32>
// CHOICE: %[[N0:.*]] = tensor.extract_slice %[[LOCAL]][0] [8] [1]
// CHOICE: %[[K0:.*]] = arith.minsi %[[POS0]], %[[N0]]
// CHOICE: %[[T0:.*]] = tensor.extract_slice %[[TOTAL]][0] [8] [1]
// CHOICE: %[[B1:.*]] = tensor.extract_slice %[[BEFORE]][8] [8] [1]
// CHOICE: %[[G1:.*]] = arith.addi %[[T0]], %[[B1]]
// CHOICE: %[[LEFT1:.*]] = arith.subi %[[C]], %[[G1]]
// CHOICE: %[[POS1:.*]] = arith.maxsi %[[LEFT1]], %[[ZERO]]
// CHOICE: %[[N1:.*]] = tensor.extract_slice %[[LOCAL]][8] [8] [1]
// CHOICE: %[[K1:.*]] = arith.minsi %[[POS1]], %[[N1]]
// CHOICE: %[[KEPT:.*]] = arith.addi %[[K0]], %[[K1]]
// CHOICE: %[[AFTER:.*]] = arith.subi %[[C]], %[[KEPT]]
// CHOICE: moe.dispatch %{{.*}}, %[[IDS]] capacity 3 drop choice after %[[AFTER]] {{.*}} -> (tensor<8x3x8xf32>,
func.func @choice(%x: tensor<16x8xf32>, %logits: tensor<16x8xf32>,
                  %w1: tensor<8x16x8xf32>, %w2: tensor<8x8x16xf32>) -> tensor<16x8xf32> {
  %y = moe.layer softmax topk k 2 %x, %logits capacity 3 drop choice
      fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<8x16x8xf32>,
         tensor<8x8x16xf32>) -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}
