// Dropless expert parallelism: each rank routes its 1/ep of the tokens,
// sends their rows to the experts' ranks in a ragged exchange (counts
// first), runs its E/ep experts and sends the results back.
// RUN: moe-opt %s --moe-set-plan="ep=2" --moe-partition | FileCheck %s --check-prefix=EP2
// RUN: moe-opt %s --moe-set-plan="ep=4" --moe-partition | FileCheck %s --check-prefix=EP4
// RUN: moe-opt %s --moe-set-plan="ep=8" --moe-partition | FileCheck %s --check-prefix=EP8
// RUN: moe-opt %s --moe-set-plan="dp=2 ep=2" --moe-partition | FileCheck %s --check-prefix=DPEP
// One rank: nothing to do.
// RUN: moe-opt %s --moe-set-plan --moe-partition | FileCheck %s --check-prefix=ONE

func.func @block(%x: tensor<16x8xf32>, %logits: tensor<16x8xf32>,
                 %w1: tensor<8x16x8xf32>, %w3: tensor<8x16x8xf32>,
                 %w2: tensor<8x8x16xf32>) -> tensor<16x8xf32> {
  %y = moe.layer softmax topk k 2 %x, %logits fc1(%w1) fc3(%w3) fc2(%w2)
      activation <swiglu> {normalize}
      : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<8x16x8xf32>,
         tensor<8x16x8xf32>, tensor<8x8x16xf32>) -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}

// EP2: shard.grid @world(shape = 1x1x1x2x1)
// EP2: %[[X:.*]] = shard.all_slice %arg0 on @world grid_axes = [3] slice_axis = 0 {moe.tokens} : tensor<16x8xf32> -> tensor<8x8xf32>
// EP2: %[[L:.*]] = shard.all_slice %arg1 on @world grid_axes = [3] slice_axis = 0 {moe.tokens} : tensor<16x8xf32> -> tensor<8x8xf32>
// EP2: %[[IDS:.*]], %[[W:.*]] = moe.router softmax topk %[[L]] {{.*}}: tensor<8x8xf32> -> tensor<8x2xi32>, tensor<8x2xf32>
// EP2: %[[W1:.*]] = shard.all_slice %arg2 on @world grid_axes = [3] slice_axis = 0 : tensor<8x16x8xf32> -> tensor<4x16x8xf32>
// EP2: %[[W3:.*]] = shard.all_slice %arg3 on @world grid_axes = [3] slice_axis = 0 : tensor<8x16x8xf32> -> tensor<4x16x8xf32>
// EP2: %[[W2:.*]] = shard.all_slice %arg4 on @world grid_axes = [3] slice_axis = 0 : tensor<8x8x16xf32> -> tensor<4x8x16xf32>
// EP2: %[[ROWS:.*]], %[[SLOTS:.*]], %[[COUNTS:.*]], %{{.*}} = moe.dispatch %[[X]], %[[IDS]] {{.*}}: (tensor<8x8xf32>, tensor<8x2xi32>) -> (tensor<16x8xf32>, tensor<8x2xi32>, tensor<8xi32>, tensor<i64>)
// EP2: %[[IN:.*]], %[[INC:.*]] = moe.all_to_all %[[ROWS]], %[[COUNTS]] on @world grid_axes = [3] : (tensor<16x8xf32>, tensor<8xi32>) -> (tensor<32x8xf32>, tensor<8xi32>)
// EP2: %[[Y:.*]] = moe.experts %[[IN]], %[[INC]] fc1(%[[W1]]) fc3(%[[W3]]) fc2(%[[W2]]) activation <swiglu> : (tensor<32x8xf32>, tensor<8xi32>, tensor<4x16x8xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<32x8xf32>
// EP2: %[[BACK:.*]], %{{.*}} = moe.all_to_all %[[Y]], %[[INC]] on @world grid_axes = [3] : (tensor<32x8xf32>, tensor<8xi32>) -> (tensor<16x8xf32>, tensor<8xi32>)
// EP2: %[[OUT:.*]] = moe.combine %[[BACK]], %[[SLOTS]], %[[W]] : (tensor<16x8xf32>, tensor<8x2xi32>, tensor<8x2xf32>) -> tensor<8x8xf32>
// EP2: %[[ALL:.*]] = shard.all_gather %[[OUT]] on @world grid_axes = [3] gather_axis = 0 {moe.tokens} : tensor<8x8xf32> -> tensor<16x8xf32>
// EP2: return %[[ALL]]

// EP4: shard.grid @world(shape = 1x1x1x4x1)
// EP4: moe.router softmax topk %{{.*}} {{.*}}: tensor<4x8xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
// EP4: shard.all_slice %arg2 on @world grid_axes = [3] slice_axis = 0 : tensor<8x16x8xf32> -> tensor<2x16x8xf32>
// EP4: moe.dispatch {{.*}} -> (tensor<8x8xf32>, tensor<4x2xi32>, tensor<8xi32>, tensor<i64>)
// EP4: moe.all_to_all {{.*}} on @world grid_axes = [3] : (tensor<8x8xf32>, tensor<8xi32>) -> (tensor<32x8xf32>, tensor<8xi32>)
// EP4: moe.experts {{.*}} -> tensor<32x8xf32>
// EP4: moe.all_to_all {{.*}} on @world grid_axes = [3] : (tensor<32x8xf32>, tensor<8xi32>) -> (tensor<8x8xf32>, tensor<8xi32>)
// EP4: shard.all_gather {{.*}} : tensor<4x8xf32> -> tensor<16x8xf32>

// EP8: shard.grid @world(shape = 1x1x1x8x1)
// EP8: shard.all_slice %arg2 on @world grid_axes = [3] slice_axis = 0 : tensor<8x16x8xf32> -> tensor<1x16x8xf32>
// EP8: moe.all_to_all {{.*}} : (tensor<4x8xf32>, tensor<8xi32>) -> (tensor<32x8xf32>, tensor<8xi32>)
// EP8: moe.experts {{.*}}tensor<1x16x8xf32>{{.*}} -> tensor<32x8xf32>
// EP8: shard.all_gather {{.*}} : tensor<2x8xf32> -> tensor<16x8xf32>

// Tokens split over dp x ep; experts only over ep, exchanged within it.
// DPEP: shard.grid @world(shape = 1x2x1x2x1)
// DPEP: shard.all_slice %arg0 on @world grid_axes = [1, 3] slice_axis = 0 {moe.tokens} : tensor<16x8xf32> -> tensor<4x8xf32>
// DPEP: shard.all_slice %arg2 on @world grid_axes = [3] slice_axis = 0 : tensor<8x16x8xf32> -> tensor<4x16x8xf32>
// DPEP: moe.all_to_all {{.*}} on @world grid_axes = [3] : (tensor<8x8xf32>, tensor<8xi32>) -> (tensor<16x8xf32>, tensor<8xi32>)
// DPEP: shard.all_gather {{.*}} on @world grid_axes = [1, 3] gather_axis = 0 {moe.tokens} : tensor<4x8xf32> -> tensor<16x8xf32>

// ONE-NOT: shard.grid
// ONE: moe.layer
