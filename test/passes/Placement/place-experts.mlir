// Experts on slots: the router's choices go through moe.place, dispatch and
// experts work on P = E + ep x R slots, weights through moe.slot_weights.
// RUN: moe-opt %s -split-input-file --moe-set-plan="ep=2" --moe-place-experts="redundant-per-rank=1" | FileCheck %s
// moe-partition gives each rank its 5 of the 10 slots, and places its own
// tokens' choices.
// RUN: moe-opt %s -split-input-file --moe-set-plan="ep=2" --moe-place-experts="redundant-per-rank=1" --moe-partition | FileCheck %s --check-prefix=EP2
// A fixed identity placement folds away.
// RUN: moe-opt %s -split-input-file --moe-set-plan="ep=2" --moe-place-experts="runtime=0" --canonicalize | FileCheck %s --check-prefix=FIXED
// The lowering of the placement ops on one rank.
// RUN: moe-opt %s -split-input-file --moe-set-plan --moe-place-experts="redundant-per-rank=2" --convert-moe-to-linalg | FileCheck %s --check-prefix=LOWER

// CHECK-LABEL: func.func @block(
// CHECK-SAME: %[[X:[^:]*]]: tensor<16x8xf32>, %[[L:[^:]*]]: tensor<16x8xf32>, %[[W1:[^:]*]]: tensor<8x16x8xf32>, %[[W3:[^:]*]]: tensor<8x16x8xf32>, %[[W2:[^:]*]]: tensor<8x8x16xf32>
// CHECK: %[[IDS:.*]], %[[P:.*]] = moe.router softmax topk %[[L]]
// CHECK: %[[T:.*]] = moe.slot_table layer 0 experts 8 initial [0, 1, 2, 3, 4, 5, 6, 7, 0, 1] : tensor<10xi32>
// CHECK: %[[S:.*]] = moe.place %[[IDS]], %[[T]] : tensor<16x2xi32>, tensor<10xi32>
// CHECK: %[[ROWS:.*]], %[[POS:.*]], %[[C:.*]], %{{.*}} = moe.dispatch %[[X]], %[[S]] : (tensor<16x8xf32>, tensor<16x2xi32>) -> (tensor<32x8xf32>, tensor<16x2xi32>, tensor<10xi32>, tensor<i64>)
// CHECK-DAG: %[[SW1:.*]] = moe.slot_weights %[[W1]][%[[T]]] : (tensor<8x16x8xf32>, tensor<10xi32>) -> tensor<10x16x8xf32>
// CHECK-DAG: %[[SW3:.*]] = moe.slot_weights %[[W3]][%[[T]]] : (tensor<8x16x8xf32>, tensor<10xi32>) -> tensor<10x16x8xf32>
// CHECK-DAG: %[[SW2:.*]] = moe.slot_weights %[[W2]][%[[T]]] : (tensor<8x8x16xf32>, tensor<10xi32>) -> tensor<10x8x16xf32>
// CHECK: %[[Y:.*]] = moe.experts %[[ROWS]], %[[C]] fc1(%[[SW1]]) fc3(%[[SW3]]) fc2(%[[SW2]])
// CHECK: moe.combine %[[Y]], %[[POS]], %[[P]]

// EP2: %[[T:.*]] = moe.slot_table layer 0 experts 8 initial [0, 1, 2, 3, 4, 5, 6, 7, 0, 1] : tensor<10xi32>
// EP2: %[[SW1:.*]] = moe.slot_weights %arg2[%[[T]]]
// EP2: %[[IDS:.*]], %{{.*}} = moe.router softmax topk %{{.*}} : tensor<8x8xf32> -> tensor<8x2xi32>, tensor<8x2xf32>
// EP2: %[[POS:.*]] = shard.process_multi_index on @world axes = [3] : index
// EP2: %[[S:.*]] = moe.place %[[IDS]], %[[T]] source %[[POS]] ranks 2 : tensor<8x2xi32>, tensor<10xi32>
// EP2: %[[LW1:.*]] = shard.all_slice %[[SW1]] on @world grid_axes = [3] slice_axis = 0 : tensor<10x16x8xf32> -> tensor<5x16x8xf32>
// EP2: %[[ROWS:.*]], %{{.*}}, %[[C:.*]], %{{.*}} = moe.dispatch %{{.*}}, %[[S]] {{.*}}-> (tensor<16x8xf32>, tensor<8x2xi32>, tensor<10xi32>, tensor<i64>)
// EP2: %[[IN:.*]], %[[INC:.*]] = moe.all_to_all %[[ROWS]], %[[C]] on @world grid_axes = [3] : (tensor<16x8xf32>, tensor<10xi32>) -> (tensor<32x8xf32>, tensor<10xi32>)
// EP2: moe.experts %[[IN]], %[[INC]] fc1(%[[LW1]]) {{.*}}tensor<5x16x8xf32>

// FIXED-LABEL: func.func @block(
// FIXED-NOT: moe.place
// FIXED-NOT: moe.slot_weights
// FIXED: moe.dispatch {{.*}} -> (tensor<32x8xf32>, tensor<16x2xi32>, tensor<8xi32>, tensor<i64>)

// The table read in scans (replica counts, their prefix sum; each expert's
// slots, first local slot and holder ranks below this one), the serving
// slot of each expert, then one lookup per choice.
// LOWER-LABEL: func.func @block(
// LOWER: %[[T:.*]] = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 0, 1]> : tensor<10xi32>
// LOWER: %[[C:.*]] = scf.for {{.*}} -> (tensor<10xi32>)
// LOWER: tensor.extract %[[T]]
// LOWER: %[[B:.*]]:2 = scf.for {{.*}} -> (tensor<10xi32>, i32)
// LOWER: %[[S:.*]]:5 = scf.for {{.*}} -> (tensor<10xi32>, tensor<10xi32>, tensor<10xi32>, tensor<10xi32>, tensor<10xi32>)
// LOWER: %[[SERVE:.*]] = scf.for {{.*}} -> (tensor<10xi32>)
// LOWER: tensor.extract %[[C]]
// LOWER: tensor.extract %[[S]]#3
// LOWER: arith.remui
// LOWER: tensor.extract %[[B]]#0
// LOWER: tensor.extract %[[S]]#2
// LOWER: tensor.extract %[[S]]#1
// LOWER: scf.for {{.*}} -> (tensor<16x2xi32>)
// LOWER: scf.for {{.*}} -> (tensor<16x2xi32>)
// LOWER: tensor.extract %[[SERVE]]
func.func @block(%x: tensor<16x8xf32>, %logits: tensor<16x8xf32>,
                 %w1: tensor<8x16x8xf32>, %w3: tensor<8x16x8xf32>,
                 %w2: tensor<8x8x16xf32>) -> tensor<16x8xf32> {
  %y = moe.layer softmax topk k 2 %x, %logits fc1(%w1) fc3(%w3) fc2(%w2)
      activation <swiglu> {normalize}
      : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<8x16x8xf32>,
         tensor<8x16x8xf32>, tensor<8x8x16xf32>) -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}
