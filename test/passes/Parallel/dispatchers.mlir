// The all-gather dispatcher (SageMaker moe_all_to_all_dispatcher = false):
// every rank gathers its EP group's tokens, runs its own experts on the rows
// routed to them and a reduce-scatter sums the results back to each rank.
// RUN: moe-opt %s --moe-set-plan="ep=2 dispatcher=all-gather" --moe-partition | FileCheck %s --check-prefix=DROPLESS
// RUN: moe-opt %s --moe-set-plan="ep=2 dp=2 dispatcher=all-gather" --moe-partition | FileCheck %s --check-prefix=CAPACITY

func.func @dropless(%x: tensor<16x8xf32>, %logits: tensor<16x8xf32>,
                    %w1: tensor<8x16x8xf32>, %w2: tensor<8x8x16xf32>) -> tensor<16x8xf32> {
  %y = moe.layer softmax topk k 2 %x, %logits fc1(%w1) fc2(%w2) activation <silu>
      : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<8x16x8xf32>,
         tensor<8x8x16xf32>) -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}

func.func @capacity(%x: tensor<16x8xf32>, %logits: tensor<16x8xf32>,
                    %w1: tensor<8x16x8xf32>, %w2: tensor<8x8x16xf32>) -> tensor<16x8xf32> {
  %y = moe.layer softmax topk k 2 %x, %logits capacity 4 drop position
      fc1(%w1) fc2(%w2) activation <silu>
      : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<8x16x8xf32>,
         tensor<8x8x16xf32>) -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}

// DROPLESS-LABEL: func.func @dropless
// DROPLESS: %[[X:.*]] = shard.all_slice %arg0 on @world grid_axes = [3] slice_axis = 0 {moe.tokens} : tensor<16x8xf32> -> tensor<8x8xf32>
// DROPLESS: %[[IDS:.*]], %[[W:.*]] = moe.router
// DROPLESS: %[[XS:.*]] = shard.all_gather %[[X]] on @world grid_axes = [3] gather_axis = 0 : tensor<8x8xf32> -> tensor<16x8xf32>
// DROPLESS: %[[WS:.*]] = shard.all_gather %[[W]] on @world grid_axes = [3] gather_axis = 0 : tensor<8x2xf32> -> tensor<16x2xf32>
// DROPLESS: %[[ALLIDS:.*]] = shard.all_gather %[[IDS]] on @world grid_axes = [3] gather_axis = 0 : tensor<8x2xi32> -> tensor<16x2xi32>
// Ids of this rank's experts: id - rank * E/ep inside [0, E/ep), else -1.
// DROPLESS: %[[RANK:.*]] = shard.process_multi_index on @world axes = [3] : index
// DROPLESS: arith.muli %[[RANK]], %c4
// DROPLESS: %[[SHIFTED:.*]] = arith.subi %[[ALLIDS]]
// DROPLESS: %[[MINE:.*]] = arith.select %{{.*}}, %[[SHIFTED]], %{{.*}} : tensor<16x2xi1>, tensor<16x2xi32>
// DROPLESS: %[[ROWS:.*]], %[[SLOTS:.*]], %[[COUNTS:.*]], %{{.*}} = moe.dispatch %[[XS]], %[[MINE]] {{.*}}: (tensor<16x8xf32>, tensor<16x2xi32>) -> (tensor<32x8xf32>, tensor<16x2xi32>, tensor<4xi32>, tensor<i64>)
// DROPLESS: %[[Y:.*]] = moe.experts %[[ROWS]], %[[COUNTS]] {{.*}} -> tensor<32x8xf32>
// DROPLESS: %[[PART:.*]] = moe.combine %[[Y]], %[[SLOTS]], %[[WS]] : {{.*}} -> tensor<16x8xf32>
// DROPLESS: %[[MY:.*]] = shard.reduce_scatter %[[PART]] on @world grid_axes = [3] scatter_axis = 0 : tensor<16x8xf32> -> tensor<8x8xf32>
// DROPLESS: shard.all_gather %[[MY]] on @world grid_axes = [3] gather_axis = 0 {moe.tokens} : tensor<8x8xf32> -> tensor<16x8xf32>
// DROPLESS-NOT: all_to_all

// The gathered EP group's tokens are contiguous in the batch; data-parallel
// groups before it are counted by a prefix sum over dp.
// CAPACITY-LABEL: func.func @capacity
// CAPACITY: %[[ROUTED:.*]] = moe.expert_counts %{{.*}} : tensor<8x2xi32> -> tensor<4xi32>
// CAPACITY: %[[BEFORE:.*]] = moe.prefix_sum %[[ROUTED]] on @world grid_axes = [1] : tensor<4xi32>
// CAPACITY: moe.dispatch %{{.*}}, %{{.*}} capacity 4 drop position after %[[BEFORE]] {{.*}}: {{.*}} -> (tensor<4x4x8xf32>, tensor<8x2xi32>, tensor<4xi32>, tensor<i64>)
// CAPACITY: shard.reduce_scatter %{{.*}} on @world grid_axes = [3] scatter_axis = 0 : tensor<8x8xf32> -> tensor<4x8xf32>
// CAPACITY: shard.all_gather %{{.*}} on @world grid_axes = [1, 3] gather_axis = 0 {moe.tokens} : tensor<4x8xf32> -> tensor<16x8xf32>
