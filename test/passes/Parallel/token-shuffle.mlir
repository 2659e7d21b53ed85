// Global token shuffle: each EP rank permutes its tokens (seed + EP rank),
// exchanges equal blocks within the EP group, routes and dispatches the
// shuffled tokens, and restores the order afterwards.
// RUN: moe-opt %s --moe-set-plan="ep=2 token-shuffle seed=7" --moe-partition | FileCheck %s

func.func @block(%x: tensor<16x8xf32>, %logits: tensor<16x8xf32>,
                 %w1: tensor<8x16x8xf32>, %w2: tensor<8x8x16xf32>) -> tensor<16x8xf32> {
  %y = moe.layer softmax topk k 2 %x, %logits fc1(%w1) fc2(%w2) activation <silu>
      : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<8x16x8xf32>,
         tensor<8x8x16xf32>) -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}

// One permutation per EP rank, and its inverse.
// CHECK: %[[TABLE:.*]] = arith.constant dense<{{\[\[}}[[P0:.*]]], {{\[}}[[P1:.*]]]]> : tensor<2x8xi32>
// CHECK: %[[ROW:.*]] = shard.all_slice %[[TABLE]] on @world grid_axes = [3] slice_axis = 0 : tensor<2x8xi32> -> tensor<1x8xi32>
// CHECK: %[[PERM:.*]] = tensor.collapse_shape %[[ROW]] {{\[\[}}0, 1]] : tensor<1x8xi32> into tensor<8xi32>
// CHECK: %[[INVTABLE:.*]] = arith.constant dense<{{.*}}> : tensor<2x8xi32>
// CHECK: %[[INVROW:.*]] = shard.all_slice %[[INVTABLE]]
// CHECK: %[[INV:.*]] = tensor.collapse_shape %[[INVROW]]
// CHECK: %[[X:.*]] = shard.all_slice %arg0 on @world grid_axes = [3] slice_axis = 0
// CHECK: %[[XP:.*]] = moe.gather_rows %[[X]][%[[PERM]]] : (tensor<8x8xf32>, tensor<8xi32>) -> tensor<8x8xf32>
// CHECK: %[[XS:.*]] = shard.all_to_all %[[XP]] on @world grid_axes = [3] split_axis = 0 concat_axis = 0 : tensor<8x8xf32> -> tensor<8x8xf32>
// CHECK: %[[L:.*]] = shard.all_slice %arg1
// CHECK: %[[LP:.*]] = moe.gather_rows %[[L]][%[[PERM]]]
// CHECK: %[[LS:.*]] = shard.all_to_all %[[LP]]
// CHECK: moe.router softmax topk %[[LS]]
// CHECK: moe.dispatch %[[XS]],
// CHECK: %[[OUT:.*]] = moe.combine
// CHECK: %[[BACK:.*]] = shard.all_to_all %[[OUT]] on @world grid_axes = [3] split_axis = 0 concat_axis = 0 : tensor<8x8xf32> -> tensor<8x8xf32>
// CHECK: %[[ORDERED:.*]] = moe.gather_rows %[[BACK]][%[[INV]]]
// CHECK: shard.all_gather %[[ORDERED]] on @world grid_axes = [3] gather_axis = 0 {moe.tokens} : tensor<8x8xf32> -> tensor<16x8xf32>
