// RUN: moe-opt %s --moe-instrument-layers --split-input-file --verify-diagnostics | FileCheck %s
// RUN: moe-opt %s --moe-instrument-layers=target=cuda --split-input-file --verify-diagnostics | FileCheck %s --check-prefix=CUDA
// RUN: not moe-opt %s --moe-instrument-layers=target=tpu --split-input-file 2>&1 | FileCheck %s --check-prefix=BAD

// With target=cuda the CUDA runtime's hooks record on the device.
// CUDA-LABEL: func.func @layer
// CUDA: call @moert_cuda_layer_begin(
// CUDA: call @moert_cuda_layer_tokens(
// CUDA: call @moert_cuda_layer_dropped(
// CUDA: call @moert_cuda_layer_end(
// BAD: moe-instrument-layers: unknown target 'tpu' (cpu or cuda)

// Layer 0: begin before the router, its ids (8 of them, 4 experts, copies
// over tp: axis 4 -> 5), the dispatch's dropped count, end after combine.
// CHECK-LABEL: func.func @layer
// CHECK: call @moert_layer_begin({{%c0_i64[_0-9]*}})
// CHECK: %[[IDS:.*]], %{{.*}} = moe.router
// CHECK: bufferization.to_buffer %[[IDS]] read_only : tensor<4x2xi32> to memref<4x2xi32>
// CHECK: call @moert_layer_tokens({{%c0_i64[_0-9]*}}, %{{.*}}, %c8_i64, %c4_i64, %c5_i64)
// CHECK: %{{.*}}, %{{.*}}, %{{.*}}, %[[DROPPED:.*]] = moe.dispatch
// CHECK: bufferization.to_buffer %[[DROPPED]] read_only : tensor<i64> to memref<i64>
// CHECK: call @moert_layer_dropped({{%c0_i64[_0-9]*}}, %{{.*}}, {{%c0_i64[_0-9]*}})
// CHECK: moe.combine
// CHECK: call @moert_layer_end({{%c0_i64[_0-9]*}})
func.func @layer(%x: tensor<4x8xf32>, %logits: tensor<4x4xf32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) -> tensor<4x8xf32> {
  %ids, %w = moe.router softmax topk %logits {moe.replicas = array<i16: 4>} : tensor<4x4xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids : (tensor<4x8xf32>, tensor<4x2xi32>) -> (tensor<8x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
  %h = moe.experts %rows, %counts fc1(%w1) fc2(%w2) activation <relu> : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<8x8xf32>
  %y = moe.combine %h, %slots, %w : (tensor<8x8xf32>, tensor<4x2xi32>, tensor<4x2xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// expected-error @+1 {{decompose moe.layer first}}
module {
  func.func @fused(%x: tensor<4x8xf32>, %logits: tensor<4x4xf32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) -> tensor<4x8xf32> {
    %y = moe.layer softmax topk k 2 %x, %logits fc1(%w1) fc2(%w2) activation <relu> : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<4x8xf32>
    return %y : tensor<4x8xf32>
  }
}
