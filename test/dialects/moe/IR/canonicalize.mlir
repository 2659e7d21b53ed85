// RUN: moe-opt %s -canonicalize -split-input-file | FileCheck %s

// A loss with coefficient 0 folds to the constant 0 of its type.

// CHECK-LABEL: func.func @aux_loss_zero_coeff(
// CHECK-NOT:     moe.aux_loss
// CHECK:         %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NOT:     moe.aux_loss
// CHECK:         return %[[ZERO]] : tensor<f32>
func.func @aux_loss_zero_coeff(%l: tensor<4x4xf32>, %ids: tensor<4x2xi32>) -> tensor<f32> {
  %a = moe.aux_loss softmax %l, %ids {coeff = 0.0, seq_len = 2}
      : tensor<4x4xf32>, tensor<4x2xi32> -> tensor<f32>
  return %a : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @z_loss_zero_coeff(
// CHECK-NOT:     moe.z_loss
// CHECK:         %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : tensor<bf16>
// CHECK-NOT:     moe.z_loss
// CHECK:         return %[[ZERO]] : tensor<bf16>
func.func @z_loss_zero_coeff(%l: tensor<4x4xbf16>) -> tensor<bf16> {
  %z = moe.z_loss %l {coeff = 0.0} : tensor<4x4xbf16> -> tensor<bf16>
  return %z : tensor<bf16>
}

// -----

// CHECK-LABEL: func.func @losses_nonzero_coeff(
// CHECK-SAME:    %[[L:.*]]: tensor<4x4xf32>, %[[IDS:.*]]: tensor<4x2xi32>
// CHECK-NOT:     arith.constant
// CHECK:         %[[A:.*]] = moe.aux_loss softmax %[[L]], %[[IDS]] {coeff = 1.000000e-02 : f64}
// CHECK:         %[[Z:.*]] = moe.z_loss %[[L]] {coeff = 1.000000e-03 : f64}
// CHECK:         return %[[A]], %[[Z]]
func.func @losses_nonzero_coeff(%l: tensor<4x4xf32>, %ids: tensor<4x2xi32>) -> (tensor<f32>, tensor<f32>) {
  %a = moe.aux_loss softmax %l, %ids {coeff = 1.0e-2}
      : tensor<4x4xf32>, tensor<4x2xi32> -> tensor<f32>
  %z = moe.z_loss %l {coeff = 1.0e-3} : tensor<4x4xf32> -> tensor<f32>
  return %a, %z : tensor<f32>, tensor<f32>
}

// -----

// An exchange within a group of one rank is the identity. Axis 0 of the grid
// has one rank; the empty axis list is a group of one rank too.

shard.grid @grid(shape = 1x4)

// CHECK-LABEL: func.func @all_to_all_one_rank_uniform(
// CHECK-SAME:    %[[X:.*]]: tensor<8x3x8xf32>
// CHECK-NOT:     moe.all_to_all
// CHECK:         return %[[X]], %[[X]] : tensor<8x3x8xf32>, tensor<8x3x8xf32>
func.func @all_to_all_one_rank_uniform(%x: tensor<8x3x8xf32>) -> (tensor<8x3x8xf32>, tensor<8x3x8xf32>) {
  %0 = moe.all_to_all %x on @grid grid_axes = [0] : (tensor<8x3x8xf32>) -> tensor<8x3x8xf32>
  %1 = moe.all_to_all %x on @grid grid_axes = [] : (tensor<8x3x8xf32>) -> tensor<8x3x8xf32>
  return %0, %1 : tensor<8x3x8xf32>, tensor<8x3x8xf32>
}

// CHECK-LABEL: func.func @all_to_all_one_rank_ragged(
// CHECK-SAME:    %[[X:.*]]: tensor<16x8xf32>, %[[C:.*]]: tensor<4xi32>
// CHECK-NOT:     moe.all_to_all
// CHECK:         return %[[X]], %[[C]] : tensor<16x8xf32>, tensor<4xi32>
func.func @all_to_all_one_rank_ragged(%x: tensor<16x8xf32>, %c: tensor<4xi32>) -> (tensor<16x8xf32>, tensor<4xi32>) {
  %0, %1 = moe.all_to_all %x, %c on @grid grid_axes = [0]
      : (tensor<16x8xf32>, tensor<4xi32>) -> (tensor<16x8xf32>, tensor<4xi32>)
  return %0, %1 : tensor<16x8xf32>, tensor<4xi32>
}

// -----

// Two ranks: a real exchange.

shard.grid @grid(shape = 2x1)

// CHECK-LABEL: func.func @all_to_all_two_ranks(
// CHECK-SAME:    %[[X:.*]]: tensor<8x8xf32>, %[[R:.*]]: tensor<16x8xf32>, %[[C:.*]]: tensor<4xi32>
// CHECK:         %[[U:.*]] = moe.all_to_all %[[X]] on @grid grid_axes = [0]
// CHECK:         %[[V:.*]], %[[VC:.*]] = moe.all_to_all %[[R]], %[[C]] on @grid grid_axes = [0, 1]
// CHECK:         return %[[U]], %[[V]], %[[VC]]
func.func @all_to_all_two_ranks(%x: tensor<8x8xf32>, %r: tensor<16x8xf32>, %c: tensor<4xi32>)
    -> (tensor<8x8xf32>, tensor<16x8xf32>, tensor<4xi32>) {
  %0 = moe.all_to_all %x on @grid grid_axes = [0] : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %1, %2 = moe.all_to_all %r, %c on @grid grid_axes = [0, 1]
      : (tensor<16x8xf32>, tensor<4xi32>) -> (tensor<16x8xf32>, tensor<4xi32>)
  return %0, %1, %2 : tensor<8x8xf32>, tensor<16x8xf32>, tensor<4xi32>
}

// -----

// One rank, but the ragged receive buffer is larger than the input: the
// result cannot be replaced by the input.

shard.grid @grid(shape = 1)

// CHECK-LABEL: func.func @all_to_all_one_rank_other_buffer(
// CHECK-SAME:    %[[X:.*]]: tensor<16x8xf32>, %[[C:.*]]: tensor<4xi32>
// CHECK:         %[[V:.*]], %[[VC:.*]] = moe.all_to_all %[[X]], %[[C]] on @grid grid_axes = [0] : (tensor<16x8xf32>, tensor<4xi32>) -> (tensor<32x8xf32>, tensor<4xi32>)
// CHECK:         return %[[V]], %[[VC]]
func.func @all_to_all_one_rank_other_buffer(%x: tensor<16x8xf32>, %c: tensor<4xi32>) -> (tensor<32x8xf32>, tensor<4xi32>) {
  %0, %1 = moe.all_to_all %x, %c on @grid grid_axes = [0]
      : (tensor<16x8xf32>, tensor<4xi32>) -> (tensor<32x8xf32>, tensor<4xi32>)
  return %0, %1 : tensor<32x8xf32>, tensor<4xi32>
}

// -----

// A constant identity table: moe.place and moe.slot_weights fold away. A
// runtime table (moe.slot_table) or another constant keeps them.

// CHECK-LABEL: func.func @identity_placement(
// CHECK-SAME: %[[IDS:[^:]*]]: tensor<4x2xi32>, %[[W:[^:]*]]: tensor<4x16x8xf32>
// CHECK-NOT: moe.place
// CHECK-NOT: moe.slot_weights
// CHECK: return %[[IDS]], %[[W]]
func.func @identity_placement(%ids: tensor<4x2xi32>, %w: tensor<4x16x8xf32>) -> (tensor<4x2xi32>, tensor<4x16x8xf32>) {
  %t = arith.constant dense<[0, 1, 2, 3]> : tensor<4xi32>
  %s = moe.place %ids, %t : tensor<4x2xi32>, tensor<4xi32>
  %y = moe.slot_weights %w[%t] : (tensor<4x16x8xf32>, tensor<4xi32>) -> tensor<4x16x8xf32>
  return %s, %y : tensor<4x2xi32>, tensor<4x16x8xf32>
}

// CHECK-LABEL: func.func @kept_placement(
// CHECK: moe.place
// CHECK: moe.slot_weights
// CHECK: moe.place
func.func @kept_placement(%ids: tensor<4x2xi32>, %w: tensor<4x16x8xf32>) -> (tensor<4x2xi32>, tensor<4x16x8xf32>, tensor<4x2xi32>) {
  %t = moe.slot_table layer 0 experts 4 initial [0, 1, 2, 3] : tensor<4xi32>
  %s = moe.place %ids, %t : tensor<4x2xi32>, tensor<4xi32>
  %y = moe.slot_weights %w[%t] : (tensor<4x16x8xf32>, tensor<4xi32>) -> tensor<4x16x8xf32>
  %c = arith.constant dense<[1, 0, 2, 3]> : tensor<4xi32>
  %z = moe.place %ids, %c : tensor<4x2xi32>, tensor<4xi32>
  return %s, %y, %z : tensor<4x2xi32>, tensor<4x16x8xf32>, tensor<4x2xi32>
}
