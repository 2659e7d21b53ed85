// RUN: moe-opt %s | moe-opt | FileCheck %s
// RUN: moe-opt %s --mlir-print-op-generic | moe-opt | FileCheck %s

// CHECK: module attributes {moe.plan = #moe.plan<pp = 2, dp = 4, dp_shard = 2, ep = 8, tp = 1, dispatcher = all_gather, token_shuffle = true, load_balancing = aux_loss, aux_loss_coeff = 1.000000e-02, z_loss_coeff = 0.000000e+00, seed = 7>}
module attributes {moe.plan = #moe.plan<seed = 7, ep = 8, dp = 4, dp_shard = 2, pp = 2,
    dispatcher = all_gather, token_shuffle = true, load_balancing = aux_loss,
    aux_loss_coeff = 1.0e-2, z_loss_coeff = 0.0>} {
  shard.grid @world(shape = 2x2x2x8x1)

  // CHECK-LABEL: func.func @pieces
  func.func @pieces(%ids: tensor<16x2xi32>, %x: tensor<16x8xf32>, %perm: tensor<16xi32>) -> (tensor<8xi32>, tensor<16x8xf32>) {
    // CHECK: %[[C:.*]] = moe.expert_counts %{{.*}} : tensor<16x2xi32> -> tensor<8xi32>
    %c = moe.expert_counts %ids : tensor<16x2xi32> -> tensor<8xi32>
    // CHECK: moe.prefix_sum %[[C]] on @world grid_axes = [1, 3] : tensor<8xi32>
    %before = moe.prefix_sum %c on @world grid_axes = [1, 3] : tensor<8xi32>
    // CHECK: moe.gather_rows %{{.*}}[%{{.*}}] : (tensor<16x8xf32>, tensor<16xi32>) -> tensor<16x8xf32>
    %y = moe.gather_rows %x[%perm] : (tensor<16x8xf32>, tensor<16xi32>) -> tensor<16x8xf32>
    return %before, %y : tensor<8xi32>, tensor<16x8xf32>
  }

  // CHECK-LABEL: func.func @shard_dispatch
  func.func @shard_dispatch(%x: tensor<4x8xf32>, %ids: tensor<4x2xi32>, %before: tensor<8xi32>) -> tensor<8x3x8xf32> {
    // CHECK: moe.dispatch %{{.*}}, %{{.*}} capacity 5 drop position after %{{.*}} : (tensor<4x8xf32>, tensor<4x2xi32>, tensor<8xi32>) -> (tensor<8x5x8xf32>
    %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids capacity 5 drop position after %before
        : (tensor<4x8xf32>, tensor<4x2xi32>, tensor<8xi32>)
       -> (tensor<8x5x8xf32>, tensor<4x2xi32>, tensor<8xi32>, tensor<i64>)
    %r = tensor.extract_slice %rows[0, 0, 0] [8, 3, 8] [1, 1, 1] : tensor<8x5x8xf32> to tensor<8x3x8xf32>
    return %r : tensor<8x3x8xf32>
  }
}
