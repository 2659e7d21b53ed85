// RUN: moe-opt %s | moe-opt | FileCheck %s
// RUN: moe-opt %s --mlir-print-op-generic | moe-opt | FileCheck %s

// Round trip of every moe op and every optional piece of its syntax. Shapes:
// T = 4 tokens, H = 8, E = 4 experts, k = 2, F = 16.

//===----------------------------------------------------------------------===//
// moe.router
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @router_topk(
// CHECK-SAME:    %[[L:.*]]: tensor<4x4xf32>
// CHECK:         %[[IDS:.*]], %[[W:.*]] = moe.router softmax topk %[[L]] {normalize} : tensor<4x4xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
// CHECK:         return %[[IDS]], %[[W]]
func.func @router_topk(%l: tensor<4x4xf32>) -> (tensor<4x2xi32>, tensor<4x2xf32>) {
  %ids, %w = moe.router softmax topk %l {normalize}
      : tensor<4x4xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return %ids, %w : tensor<4x2xi32>, tensor<4x2xf32>
}

// CHECK-LABEL: func.func @router_topk_bias(
// CHECK-SAME:    %[[L:.*]]: tensor<4x4xf32>, %[[B:.*]]: tensor<4xf32>
// CHECK:         moe.router sigmoid topk %[[L]] bias(%[[B]]) {scaling_factor = 2.500000e+00 : f64} : tensor<4x4xf32>, tensor<4xf32> -> tensor<4x1xi32>, tensor<4x1xf32>
func.func @router_topk_bias(%l: tensor<4x4xf32>, %b: tensor<4xf32>) -> (tensor<4x1xi32>, tensor<4x1xf32>) {
  %ids, %w = moe.router sigmoid topk %l bias(%b) {scaling_factor = 2.5}
      : tensor<4x4xf32>, tensor<4xf32> -> tensor<4x1xi32>, tensor<4x1xf32>
  return %ids, %w : tensor<4x1xi32>, tensor<4x1xf32>
}

// CHECK-LABEL: func.func @router_grouped_topk(
// CHECK-SAME:    %[[L:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8xf32>
// CHECK:         moe.router sigmoid grouped_topk %[[L]] bias(%[[B]]) groups 4 top 2 by top2_sum {normalize, scaling_factor = 2.500000e+00 : f64} : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x4xi32>, tensor<4x4xf32>
func.func @router_grouped_topk(%l: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<4x4xi32>, tensor<4x4xf32>) {
  %ids, %w = moe.router sigmoid grouped_topk %l bias(%b) groups 4 top 2 by top2_sum
      {normalize, scaling_factor = 2.5}
      : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x4xi32>, tensor<4x4xf32>
  return %ids, %w : tensor<4x4xi32>, tensor<4x4xf32>
}

// Hugging Face DeepSeek-V3 masks the dropped groups with 0.0; then every
// expert is selectable, so k may exceed the kept groups' experts.
// CHECK-LABEL: func.func @router_grouped_topk_masked(
// CHECK:         moe.router sigmoid grouped_topk %{{.*}} bias(%{{.*}}) groups 4 top 1 by top2_sum masked = 0.000000e+00 {normalize} : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x3xi32>, tensor<4x3xf32>
func.func @router_grouped_topk_masked(%l: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<4x3xi32>, tensor<4x3xf32>) {
  %ids, %w = moe.router sigmoid grouped_topk %l bias(%b) groups 4 top 1 by top2_sum
      masked = 0.0 {normalize}
      : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x3xi32>, tensor<4x3xf32>
  return %ids, %w : tensor<4x3xi32>, tensor<4x3xf32>
}

// CHECK-LABEL: func.func @router_grouped_topk_max(
// CHECK-SAME:    %[[L:.*]]: tensor<4x8xbf16>
// CHECK:         moe.router softmax grouped_topk %[[L]] groups 2 top 1 by max : tensor<4x8xbf16> -> tensor<4x2xi32>, tensor<4x2xbf16>
func.func @router_grouped_topk_max(%l: tensor<4x8xbf16>) -> (tensor<4x2xi32>, tensor<4x2xbf16>) {
  %ids, %w = moe.router softmax grouped_topk %l groups 2 top 1 by max
      : tensor<4x8xbf16> -> tensor<4x2xi32>, tensor<4x2xbf16>
  return %ids, %w : tensor<4x2xi32>, tensor<4x2xbf16>
}

// CHECK-LABEL: func.func @router_sinkhorn(
// CHECK-SAME:    %[[L:.*]]: tensor<4x4xf32>
// CHECK:         moe.router sigmoid sinkhorn %[[L]] {sinkhorn_max_iterations = 30 : i64, sinkhorn_tolerance = 1.000000e-03 : f64} : tensor<4x4xf32> -> tensor<4x1xi32>, tensor<4x1xf32>
func.func @router_sinkhorn(%l: tensor<4x4xf32>) -> (tensor<4x1xi32>, tensor<4x1xf32>) {
  %ids, %w = moe.router sigmoid sinkhorn %l
      {sinkhorn_tolerance = 1.0e-3, sinkhorn_max_iterations = 30}
      : tensor<4x4xf32> -> tensor<4x1xi32>, tensor<4x1xf32>
  return %ids, %w : tensor<4x1xi32>, tensor<4x1xf32>
}

// CHECK-LABEL: func.func @router_expert_choice(
// CHECK-SAME:    %[[L:.*]]: tensor<4x4xf32>
// CHECK:         moe.router softmax expert_choice %[[L]] capacity 2 : tensor<4x4xf32> -> tensor<4x4xi32>, tensor<4x4xf32>
func.func @router_expert_choice(%l: tensor<4x4xf32>) -> (tensor<4x4xi32>, tensor<4x4xf32>) {
  %ids, %w = moe.router softmax expert_choice %l capacity 2
      : tensor<4x4xf32> -> tensor<4x4xi32>, tensor<4x4xf32>
  return %ids, %w : tensor<4x4xi32>, tensor<4x4xf32>
}

// CHECK-LABEL: func.func @router_sparse_mixer(
// CHECK-SAME:    %[[L:.*]]: tensor<4x4xf16>
// CHECK:         moe.router softmax sparse_mixer %[[L]] {jitter_eps = 1.000000e-01 : f64} : tensor<4x4xf16> -> tensor<4x2xi32>, tensor<4x2xf16>
func.func @router_sparse_mixer(%l: tensor<4x4xf16>) -> (tensor<4x2xi32>, tensor<4x2xf16>) {
  %ids, %w = moe.router softmax sparse_mixer %l {jitter_eps = 0.1}
      : tensor<4x4xf16> -> tensor<4x2xi32>, tensor<4x2xf16>
  return %ids, %w : tensor<4x2xi32>, tensor<4x2xf16>
}

//===----------------------------------------------------------------------===//
// moe.aux_loss / moe.z_loss
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @losses(
// CHECK-SAME:    %[[L:.*]]: tensor<4x4xf32>, %[[IDS:.*]]: tensor<4x2xi32>
// CHECK:         %[[A:.*]] = moe.aux_loss softmax %[[L]], %[[IDS]] {coeff = 1.000000e-02 : f64} : tensor<4x4xf32>, tensor<4x2xi32> -> tensor<f32>
// CHECK:         %[[S:.*]] = moe.aux_loss sigmoid %[[L]], %[[IDS]] {coeff = 1.000000e-03 : f64, seq_len = 2 : i64} : tensor<4x4xf32>, tensor<4x2xi32> -> tensor<f32>
// CHECK:         %[[Z:.*]] = moe.z_loss %[[L]] {coeff = 1.000000e-03 : f64} : tensor<4x4xf32> -> tensor<f32>
// CHECK:         return %[[A]], %[[S]], %[[Z]]
func.func @losses(%l: tensor<4x4xf32>, %ids: tensor<4x2xi32>) -> (tensor<f32>, tensor<f32>, tensor<f32>) {
  %a = moe.aux_loss softmax %l, %ids {coeff = 1.0e-2}
      : tensor<4x4xf32>, tensor<4x2xi32> -> tensor<f32>
  %s = moe.aux_loss sigmoid %l, %ids {coeff = 1.0e-3, seq_len = 2}
      : tensor<4x4xf32>, tensor<4x2xi32> -> tensor<f32>
  %z = moe.z_loss %l {coeff = 1.0e-3} : tensor<4x4xf32> -> tensor<f32>
  return %a, %s, %z : tensor<f32>, tensor<f32>, tensor<f32>
}

//===----------------------------------------------------------------------===//
// moe.dispatch
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @dispatch_dropless(
// CHECK-SAME:    %[[X:.*]]: tensor<4x8xf32>, %[[IDS:.*]]: tensor<4x2xi32>
// CHECK:         %[[ROWS:.*]], %[[SLOTS:.*]], %[[COUNTS:.*]], %[[DROPPED:.*]] = moe.dispatch %[[X]], %[[IDS]] : (tensor<4x8xf32>, tensor<4x2xi32>) -> (tensor<8x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
// CHECK:         return %[[ROWS]], %[[SLOTS]], %[[COUNTS]], %[[DROPPED]]
func.func @dispatch_dropless(%x: tensor<4x8xf32>, %ids: tensor<4x2xi32>)
    -> (tensor<8x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>) {
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids
      : (tensor<4x8xf32>, tensor<4x2xi32>)
     -> (tensor<8x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
  return %rows, %slots, %counts, %dropped
      : tensor<8x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>
}

// CHECK-LABEL: func.func @dispatch_position(
// CHECK-SAME:    %[[X:.*]]: tensor<4x8xf32>, %[[IDS:.*]]: tensor<4x2xi32>
// CHECK:         moe.dispatch %[[X]], %[[IDS]] capacity 3 drop position : (tensor<4x8xf32>, tensor<4x2xi32>) -> (tensor<4x3x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
func.func @dispatch_position(%x: tensor<4x8xf32>, %ids: tensor<4x2xi32>) -> tensor<4x3x8xf32> {
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids capacity 3 drop position
      : (tensor<4x8xf32>, tensor<4x2xi32>)
     -> (tensor<4x3x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
  return %rows : tensor<4x3x8xf32>
}

// CHECK-LABEL: func.func @dispatch_choice(
// CHECK-SAME:    %[[X:.*]]: tensor<4x8xf32>, %[[IDS:.*]]: tensor<4x2xi32>, %[[AFTER:.*]]: tensor<4xi32>
// CHECK:         moe.dispatch %[[X]], %[[IDS]] capacity 3 drop choice after %[[AFTER]] : (tensor<4x8xf32>, tensor<4x2xi32>, tensor<4xi32>) -> (tensor<4x3x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
func.func @dispatch_choice(%x: tensor<4x8xf32>, %ids: tensor<4x2xi32>, %after: tensor<4xi32>) -> tensor<4x3x8xf32> {
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids capacity 3 drop choice after %after
      : (tensor<4x8xf32>, tensor<4x2xi32>, tensor<4xi32>)
     -> (tensor<4x3x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
  return %rows : tensor<4x3x8xf32>
}

// CHECK-LABEL: func.func @dispatch_probs(
// CHECK-SAME:    %[[X:.*]]: tensor<4x8xf32>, %[[IDS:.*]]: tensor<4x2xi32>, %[[W:.*]]: tensor<4x2xf32>
// CHECK:         moe.dispatch %[[X]], %[[IDS]] capacity 2 drop probs by %[[W]] : (tensor<4x8xf32>, tensor<4x2xi32>, tensor<4x2xf32>) -> (tensor<4x2x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
func.func @dispatch_probs(%x: tensor<4x8xf32>, %ids: tensor<4x2xi32>, %w: tensor<4x2xf32>) -> tensor<4x2x8xf32> {
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids capacity 2 drop probs by %w
      : (tensor<4x8xf32>, tensor<4x2xi32>, tensor<4x2xf32>)
     -> (tensor<4x2x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
  return %rows : tensor<4x2x8xf32>
}

//===----------------------------------------------------------------------===//
// moe.experts
//===----------------------------------------------------------------------===//

// Every plain activation, dropless rows.
// CHECK-LABEL: func.func @experts_activations(
// CHECK-SAME:    %[[R:[^:]*]]: tensor<8x8xf32>, %[[C:[^:]*]]: tensor<4xi32>, %[[W1:[^:]*]]: tensor<4x16x8xf32>, %[[W2:[^:]*]]: tensor<4x8x16xf32>
// CHECK:         moe.experts %[[R]], %[[C]] fc1(%[[W1]]) fc2(%[[W2]]) activation <identity> : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<8x8xf32>
// CHECK:         moe.experts %[[R]], %[[C]] fc1(%[[W1]]) fc2(%[[W2]]) activation <relu>
// CHECK:         moe.experts %[[R]], %[[C]] fc1(%[[W1]]) fc2(%[[W2]]) activation <gelu>
// CHECK:         moe.experts %[[R]], %[[C]] fc1(%[[W1]]) fc2(%[[W2]]) activation <gelu_tanh>
// CHECK:         moe.experts %[[R]], %[[C]] fc1(%[[W1]]) fc2(%[[W2]]) activation <silu>
func.func @experts_activations(%rows: tensor<8x8xf32>, %counts: tensor<4xi32>,
    %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>)
    -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {
  %0 = moe.experts %rows, %counts fc1(%w1) fc2(%w2) activation <identity>
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<8x8xf32>
  %1 = moe.experts %rows, %counts fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<8x8xf32>
  %2 = moe.experts %rows, %counts fc1(%w1) fc2(%w2) activation <gelu>
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<8x8xf32>
  %3 = moe.experts %rows, %counts fc1(%w1) fc2(%w2) activation <gelu_tanh>
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<8x8xf32>
  %4 = moe.experts %rows, %counts fc1(%w1) fc2(%w2) activation <silu>
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<8x8xf32>
  return %0, %1, %2, %3, %4
      : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
}

// An activation no kind names: a scalar function of the module (Nemotron-H's
// squared ReLU), gated by fc3 or not.
// CHECK-LABEL: func.func private @relu2(%{{.*}}: f32) -> f32
// CHECK-LABEL: func.func @experts_custom(
// CHECK:         moe.experts %{{.*}} fc1(%{{.*}}) fc2(%{{.*}}) activation <custom @relu2> :
// CHECK:         moe.experts %{{.*}} fc1(%{{.*}}) fc3(%{{.*}}) fc2(%{{.*}}) activation <custom @relu2> :
func.func private @relu2(%x: f32) -> f32 {
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.0 : f32
  %r = arith.maximumf %x, %zero : f32
  %y = math.powf %r, %two : f32
  return %y : f32
}
func.func @experts_custom(%rows: tensor<8x8xf32>, %counts: tensor<4xi32>,
    %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>)
    -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %0 = moe.experts %rows, %counts fc1(%w1) fc2(%w2) activation <custom @relu2>
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<8x8xf32>
  %1 = moe.experts %rows, %counts fc1(%w1) fc3(%w1) fc2(%w2) activation <custom @relu2>
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x16x8xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<8x8xf32>
  return %0, %1 : tensor<8x8xf32>, tensor<8x8xf32>
}

// A gated (FC3) silu with every bias, and a separate SwiGLU with the GPT-OSS
// parameters.
// CHECK-LABEL: func.func @experts_gated_biases(
// CHECK-SAME:    %[[R:[^:]*]]: tensor<8x8xf32>, %[[C:[^:]*]]: tensor<4xi32>, %[[W1:[^:]*]]: tensor<4x16x8xf32>, %[[B1:[^:]*]]: tensor<4x16xf32>, %[[W3:[^:]*]]: tensor<4x16x8xf32>, %[[B3:[^:]*]]: tensor<4x16xf32>, %[[W2:[^:]*]]: tensor<4x6x16xf32>, %[[B2:[^:]*]]: tensor<4x6xf32>
// CHECK:         moe.experts %[[R]], %[[C]] fc1(%[[W1]], %[[B1]]) fc3(%[[W3]]) fc3_bias(%[[B3]]) fc2(%[[W2]], %[[B2]]) activation <silu> : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x16x8xf32>, tensor<4x16xf32>, tensor<4x16x8xf32>, tensor<4x16xf32>, tensor<4x6x16xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
// CHECK:         moe.experts %[[R]], %[[C]] fc1(%[[W1]]) fc3(%[[W3]]) fc2(%[[W2]], %[[B2]]) activation <swiglu, alpha = 1.702000e+00, beta = 1.000000e+00, limit = 7.000000e+00> : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x16x8xf32>, tensor<4x16x8xf32>, tensor<4x6x16xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
func.func @experts_gated_biases(%rows: tensor<8x8xf32>, %counts: tensor<4xi32>,
    %w1: tensor<4x16x8xf32>, %b1: tensor<4x16xf32>,
    %w3: tensor<4x16x8xf32>, %b3: tensor<4x16xf32>,
    %w2: tensor<4x6x16xf32>, %b2: tensor<4x6xf32>) -> (tensor<8x6xf32>, tensor<8x6xf32>) {
  %0 = moe.experts %rows, %counts fc1(%w1, %b1) fc3(%w3) fc3_bias(%b3) fc2(%w2, %b2)
      activation <silu>
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x16x8xf32>, tensor<4x16xf32>,
         tensor<4x16x8xf32>, tensor<4x16xf32>, tensor<4x6x16xf32>, tensor<4x6xf32>)
     -> tensor<8x6xf32>
  %1 = moe.experts %rows, %counts fc1(%w1) fc3(%w3) fc2(%w2, %b2)
      activation <swiglu, alpha = 1.702, beta = 1.0, limit = 7.0>
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x16x8xf32>, tensor<4x16x8xf32>,
         tensor<4x6x16xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
  return %0, %1 : tensor<8x6xf32>, tensor<8x6xf32>
}

// Fused SwiGLU layouts: fc1 is 2F = 32 wide, fc2 takes F = 16; capacity rows
// [G, C, H] with G = 2E groups (rows received from two ranks).
// CHECK-LABEL: func.func @experts_fused_swiglu(
// CHECK-SAME:    %[[R:[^:]*]]: tensor<8x3x8xf32>, %[[C:[^:]*]]: tensor<8xi32>, %[[W1:[^:]*]]: tensor<4x32x8xf32>, %[[B1:[^:]*]]: tensor<4x32xf32>, %[[W2:[^:]*]]: tensor<4x8x16xf32>
// CHECK:         moe.experts %[[R]], %[[C]] fc1(%[[W1]], %[[B1]]) fc2(%[[W2]]) activation <swiglu, interleaved, alpha = 1.702000e+00, beta = 1.000000e+00, limit = 7.000000e+00> : (tensor<8x3x8xf32>, tensor<8xi32>, tensor<4x32x8xf32>, tensor<4x32xf32>, tensor<4x8x16xf32>) -> tensor<8x3x8xf32>
// CHECK:         moe.experts %[[R]], %[[C]] fc1(%[[W1]]) fc2(%[[W2]]) activation <swiglu, concatenated> : (tensor<8x3x8xf32>, tensor<8xi32>, tensor<4x32x8xf32>, tensor<4x8x16xf32>) -> tensor<8x3x8xf32>
// CHECK:         moe.experts %[[R]], %[[C]] fc1(%[[W1]]) fc2(%[[W2]]) activation <swiglu, concatenated, limit = 1.000000e+01>
func.func @experts_fused_swiglu(%rows: tensor<8x3x8xf32>, %counts: tensor<8xi32>,
    %w1: tensor<4x32x8xf32>, %b1: tensor<4x32xf32>, %w2: tensor<4x8x16xf32>)
    -> (tensor<8x3x8xf32>, tensor<8x3x8xf32>, tensor<8x3x8xf32>) {
  %0 = moe.experts %rows, %counts fc1(%w1, %b1) fc2(%w2)
      activation <swiglu, interleaved, alpha = 1.702, beta = 1.0, limit = 7.0>
      : (tensor<8x3x8xf32>, tensor<8xi32>, tensor<4x32x8xf32>, tensor<4x32xf32>,
         tensor<4x8x16xf32>) -> tensor<8x3x8xf32>
  %1 = moe.experts %rows, %counts fc1(%w1) fc2(%w2) activation <swiglu, concatenated>
      : (tensor<8x3x8xf32>, tensor<8xi32>, tensor<4x32x8xf32>, tensor<4x8x16xf32>)
     -> tensor<8x3x8xf32>
  %2 = moe.experts %rows, %counts fc1(%w1) fc2(%w2)
      activation <swiglu, concatenated, limit = 10.0>
      : (tensor<8x3x8xf32>, tensor<8xi32>, tensor<4x32x8xf32>, tensor<4x8x16xf32>)
     -> tensor<8x3x8xf32>
  return %0, %1, %2 : tensor<8x3x8xf32>, tensor<8x3x8xf32>, tensor<8x3x8xf32>
}

// The attribute on its own, in any order of its parameters.
// CHECK-LABEL: func.func @activation_attr(
// CHECK-SAME:    act = #moe.activation<swiglu, interleaved, alpha = 2.000000e+00, beta = 5.000000e-01, limit = 3.000000e+00>
// CHECK-SAME:    plain = #moe.activation<gelu_tanh>
// CHECK-SAME:    separate = #moe.activation<swiglu>
func.func @activation_attr() attributes {
    act = #moe.activation<swiglu, limit = 3.0, beta = 0.5, alpha = 2.0, interleaved>,
    plain = #moe.activation<gelu_tanh>,
    separate = #moe.activation<swiglu, separate>} {
  return
}

//===----------------------------------------------------------------------===//
// moe.shared_expert
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @shared_expert(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x8xf32>, %[[W1:[^:]*]]: tensor<12x8xf32>, %[[W3:[^:]*]]: tensor<12x8xf32>, %[[W2:[^:]*]]: tensor<8x12xf32>, %[[G:[^:]*]]: tensor<1x8xf32>
// CHECK:         moe.shared_expert %[[X]] fc1(%[[W1]]) fc3(%[[W3]]) fc2(%[[W2]]) activation <swiglu> : (tensor<4x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>, tensor<8x12xf32>) -> tensor<4x8xf32>
// CHECK:         moe.shared_expert %[[X]] fc1(%[[W1]]) fc3(%[[W3]]) fc2(%[[W2]]) gate(%[[G]]) activation <swiglu> : (tensor<4x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>, tensor<8x12xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
func.func @shared_expert(%x: tensor<4x8xf32>, %w1: tensor<12x8xf32>, %w3: tensor<12x8xf32>,
    %w2: tensor<8x12xf32>, %g: tensor<1x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %0 = moe.shared_expert %x fc1(%w1) fc3(%w3) fc2(%w2) activation <swiglu>
      : (tensor<4x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>, tensor<8x12xf32>) -> tensor<4x8xf32>
  %1 = moe.shared_expert %x fc1(%w1) fc3(%w3) fc2(%w2) gate(%g) activation <swiglu>
      : (tensor<4x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>, tensor<8x12xf32>,
         tensor<1x8xf32>) -> tensor<4x8xf32>
  return %0, %1 : tensor<4x8xf32>, tensor<4x8xf32>
}

// Every bias, a gated gelu, and a fused SwiGLU (fc1 2F = 24 wide) with a gate.
// CHECK-LABEL: func.func @shared_expert_biases(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x8xf16>, %[[W1:[^:]*]]: tensor<12x8xf16>, %[[B1:[^:]*]]: tensor<12xf16>, %[[W3:[^:]*]]: tensor<12x8xf16>, %[[B3:[^:]*]]: tensor<12xf16>, %[[W2:[^:]*]]: tensor<6x12xf16>, %[[B2:[^:]*]]: tensor<6xf16>, %[[W2F:[^:]*]]: tensor<6x6xf16>, %[[G:[^:]*]]: tensor<1x8xf16>
// CHECK:         moe.shared_expert %[[X]] fc1(%[[W1]], %[[B1]]) fc3(%[[W3]]) fc3_bias(%[[B3]]) fc2(%[[W2]], %[[B2]]) activation <gelu> : (tensor<4x8xf16>, tensor<12x8xf16>, tensor<12xf16>, tensor<12x8xf16>, tensor<12xf16>, tensor<6x12xf16>, tensor<6xf16>) -> tensor<4x6xf16>
// CHECK:         moe.shared_expert %[[X]] fc1(%[[W1]], %[[B1]]) fc2(%[[W2F]], %[[B2]]) gate(%[[G]]) activation <swiglu, interleaved> : (tensor<4x8xf16>, tensor<12x8xf16>, tensor<12xf16>, tensor<6x6xf16>, tensor<6xf16>, tensor<1x8xf16>) -> tensor<4x6xf16>
func.func @shared_expert_biases(%x: tensor<4x8xf16>, %w1: tensor<12x8xf16>, %b1: tensor<12xf16>,
    %w3: tensor<12x8xf16>, %b3: tensor<12xf16>, %w2: tensor<6x12xf16>, %b2: tensor<6xf16>,
    %w2f: tensor<6x6xf16>, %g: tensor<1x8xf16>) -> (tensor<4x6xf16>, tensor<4x6xf16>) {
  %0 = moe.shared_expert %x fc1(%w1, %b1) fc3(%w3) fc3_bias(%b3) fc2(%w2, %b2) activation <gelu>
      : (tensor<4x8xf16>, tensor<12x8xf16>, tensor<12xf16>, tensor<12x8xf16>, tensor<12xf16>,
         tensor<6x12xf16>, tensor<6xf16>) -> tensor<4x6xf16>
  %1 = moe.shared_expert %x fc1(%w1, %b1) fc2(%w2f, %b2) gate(%g) activation <swiglu, interleaved>
      : (tensor<4x8xf16>, tensor<12x8xf16>, tensor<12xf16>, tensor<6x6xf16>, tensor<6xf16>,
         tensor<1x8xf16>) -> tensor<4x6xf16>
  return %0, %1 : tensor<4x6xf16>, tensor<4x6xf16>
}

//===----------------------------------------------------------------------===//
// moe.combine
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @combine(
// CHECK-SAME:    %[[R:[^:]*]]: tensor<8x6xf32>, %[[RC:[^:]*]]: tensor<4x2x6xf32>, %[[S:[^:]*]]: tensor<4x2xi32>, %[[W:[^:]*]]: tensor<4x2xf32>
// CHECK:         moe.combine %[[R]], %[[S]], %[[W]] : (tensor<8x6xf32>, tensor<4x2xi32>, tensor<4x2xf32>) -> tensor<4x6xf32>
// CHECK:         moe.combine %[[RC]], %[[S]], %[[W]] : (tensor<4x2x6xf32>, tensor<4x2xi32>, tensor<4x2xf32>) -> tensor<4x6xf32>
func.func @combine(%rows: tensor<8x6xf32>, %crows: tensor<4x2x6xf32>, %slots: tensor<4x2xi32>,
    %w: tensor<4x2xf32>) -> (tensor<4x6xf32>, tensor<4x6xf32>) {
  %0 = moe.combine %rows, %slots, %w
      : (tensor<8x6xf32>, tensor<4x2xi32>, tensor<4x2xf32>) -> tensor<4x6xf32>
  %1 = moe.combine %crows, %slots, %w
      : (tensor<4x2x6xf32>, tensor<4x2xi32>, tensor<4x2xf32>) -> tensor<4x6xf32>
  return %0, %1 : tensor<4x6xf32>, tensor<4x6xf32>
}

//===----------------------------------------------------------------------===//
// moe.all_to_all
//===----------------------------------------------------------------------===//

// CHECK-LABEL: shard.grid @grid(shape = 2x4)
shard.grid @grid(shape = 2x4)

// CHECK-LABEL: func.func @all_to_all(
// CHECK-SAME:    %[[B:[^:]*]]: tensor<8x3x8xf32>, %[[R:[^:]*]]: tensor<16x8xbf16>, %[[C:[^:]*]]: tensor<8xi32>
// CHECK:         %[[U:.*]] = moe.all_to_all %[[B]] on @grid grid_axes = [1] : (tensor<8x3x8xf32>) -> tensor<8x3x8xf32>
// CHECK:         %[[U2:.*]] = moe.all_to_all %[[B]] on @grid grid_axes = [0, 1] : (tensor<8x3x8xf32>) -> tensor<8x3x8xf32>
// CHECK:         %[[V:.*]], %[[VC:.*]] = moe.all_to_all %[[R]], %[[C]] on @grid grid_axes = [1] : (tensor<16x8xbf16>, tensor<8xi32>) -> (tensor<32x8xbf16>, tensor<8xi32>)
// CHECK:         %[[E:.*]] = moe.all_to_all %[[B]] on @grid grid_axes = [] : (tensor<8x3x8xf32>) -> tensor<8x3x8xf32>
// CHECK:         return %[[U]], %[[U2]], %[[V]], %[[VC]], %[[E]]
func.func @all_to_all(%blocks: tensor<8x3x8xf32>, %rows: tensor<16x8xbf16>, %counts: tensor<8xi32>)
    -> (tensor<8x3x8xf32>, tensor<8x3x8xf32>, tensor<32x8xbf16>, tensor<8xi32>, tensor<8x3x8xf32>) {
  %u = moe.all_to_all %blocks on @grid grid_axes = [1]
      : (tensor<8x3x8xf32>) -> tensor<8x3x8xf32>
  %u2 = moe.all_to_all %blocks on @grid grid_axes = [0, 1]
      : (tensor<8x3x8xf32>) -> tensor<8x3x8xf32>
  %v, %vc = moe.all_to_all %rows, %counts on @grid grid_axes = [1]
      : (tensor<16x8xbf16>, tensor<8xi32>) -> (tensor<32x8xbf16>, tensor<8xi32>)
  %e = moe.all_to_all %blocks on @grid grid_axes = []
      : (tensor<8x3x8xf32>) -> tensor<8x3x8xf32>
  return %u, %u2, %v, %vc, %e
      : tensor<8x3x8xf32>, tensor<8x3x8xf32>, tensor<32x8xbf16>, tensor<8xi32>, tensor<8x3x8xf32>
}

//===----------------------------------------------------------------------===//
// moe.layer
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @layer_minimal(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x8xf32>, %[[L:[^:]*]]: tensor<4x4xf32>, %[[W1:[^:]*]]: tensor<4x16x8xf32>, %[[W2:[^:]*]]: tensor<4x8x16xf32>
// CHECK:         moe.layer softmax topk k 2 %[[X]], %[[L]] fc1(%[[W1]]) fc2(%[[W2]]) activation <relu> {normalize} : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<4x8xf32>
func.func @layer_minimal(%x: tensor<4x8xf32>, %l: tensor<4x4xf32>, %w1: tensor<4x16x8xf32>,
    %w2: tensor<4x8x16xf32>) -> tensor<4x8xf32> {
  %y = moe.layer softmax topk k 2 %x, %l fc1(%w1) fc2(%w2) activation <relu> {normalize}
      : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// Every optional operand and piece of syntax at once.
// CHECK-LABEL: func.func @layer_everything(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x8xf32>, %[[L:[^:]*]]: tensor<4x8xf32>, %[[SB:[^:]*]]: tensor<8xf32>, %[[W1:[^:]*]]: tensor<8x16x8xf32>, %[[B1:[^:]*]]: tensor<8x16xf32>, %[[W3:[^:]*]]: tensor<8x16x8xf32>, %[[B3:[^:]*]]: tensor<8x16xf32>, %[[W2:[^:]*]]: tensor<8x8x16xf32>, %[[B2:[^:]*]]: tensor<8x8xf32>, %[[S1:[^:]*]]: tensor<24x8xf32>, %[[S3:[^:]*]]: tensor<24x8xf32>, %[[S2:[^:]*]]: tensor<8x24xf32>, %[[SG:[^:]*]]: tensor<1x8xf32>
// CHECK:         moe.layer sigmoid grouped_topk k 4 %[[X]], %[[L]] bias(%[[SB]]) groups 4 top 2 by top2_sum capacity 3 drop probs fc1(%[[W1]], %[[B1]]) fc3(%[[W3]]) fc3_bias(%[[B3]]) fc2(%[[W2]], %[[B2]]) shared_fc1(%[[S1]]) shared_fc3(%[[S3]]) shared_fc2(%[[S2]]) shared_gate(%[[SG]]) activation <swiglu, alpha = 1.702000e+00, beta = 1.000000e+00, limit = 7.000000e+00> {normalize, scaling_factor = 2.500000e+00 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8x16x8xf32>, tensor<8x16xf32>, tensor<8x16x8xf32>, tensor<8x16xf32>, tensor<8x8x16xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<24x8xf32>, tensor<24x8xf32>, tensor<8x24xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
func.func @layer_everything(%x: tensor<4x8xf32>, %l: tensor<4x8xf32>, %sb: tensor<8xf32>,
    %w1: tensor<8x16x8xf32>, %b1: tensor<8x16xf32>, %w3: tensor<8x16x8xf32>, %b3: tensor<8x16xf32>,
    %w2: tensor<8x8x16xf32>, %b2: tensor<8x8xf32>,
    %s1: tensor<24x8xf32>, %s3: tensor<24x8xf32>, %s2: tensor<8x24xf32>, %sg: tensor<1x8xf32>)
    -> tensor<4x8xf32> {
  %y = moe.layer sigmoid grouped_topk k 4 %x, %l bias(%sb) groups 4 top 2 by top2_sum
      capacity 3 drop probs
      fc1(%w1, %b1) fc3(%w3) fc3_bias(%b3) fc2(%w2, %b2)
      shared_fc1(%s1) shared_fc3(%s3) shared_fc2(%s2) shared_gate(%sg)
      activation <swiglu, alpha = 1.702, beta = 1.0, limit = 7.0>
      {normalize, scaling_factor = 2.5}
      : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8x16x8xf32>, tensor<8x16xf32>,
         tensor<8x16x8xf32>, tensor<8x16xf32>, tensor<8x8x16xf32>, tensor<8x8xf32>,
         tensor<8xf32>, tensor<24x8xf32>, tensor<24x8xf32>, tensor<8x24xf32>,
         tensor<1x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// Expert choice (capacity without a drop policy), a fused SwiGLU, a shared
// expert without fc3 or gate.
// CHECK-LABEL: func.func @layer_expert_choice(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x8xf32>, %[[L:[^:]*]]: tensor<4x4xf32>, %[[W1:[^:]*]]: tensor<4x32x8xf32>, %[[W2:[^:]*]]: tensor<4x8x16xf32>, %[[S1:[^:]*]]: tensor<24x8xf32>, %[[S2:[^:]*]]: tensor<8x12xf32>
// CHECK:         moe.layer softmax expert_choice k 4 %[[X]], %[[L]] capacity 2 fc1(%[[W1]]) fc2(%[[W2]]) shared_fc1(%[[S1]]) shared_fc2(%[[S2]]) activation <swiglu, concatenated> : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x32x8xf32>, tensor<4x8x16xf32>, tensor<24x8xf32>, tensor<8x12xf32>) -> tensor<4x8xf32>
func.func @layer_expert_choice(%x: tensor<4x8xf32>, %l: tensor<4x4xf32>, %w1: tensor<4x32x8xf32>,
    %w2: tensor<4x8x16xf32>, %s1: tensor<24x8xf32>, %s2: tensor<8x12xf32>) -> tensor<4x8xf32> {
  %y = moe.layer softmax expert_choice k 4 %x, %l capacity 2 fc1(%w1) fc2(%w2)
      shared_fc1(%s1) shared_fc2(%s2) activation <swiglu, concatenated>
      : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x32x8xf32>, tensor<4x8x16xf32>,
         tensor<24x8xf32>, tensor<8x12xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// Sinkhorn, sparse_mixer and the position policy, with non-default routing
// attributes.
// CHECK-LABEL: func.func @layer_routing_attrs(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x8xf32>, %[[L:[^:]*]]: tensor<4x4xf32>, %[[W1:[^:]*]]: tensor<4x16x8xf32>, %[[W2:[^:]*]]: tensor<4x8x16xf32>
// CHECK:         moe.layer sigmoid sinkhorn k 1 %[[X]], %[[L]] capacity 2 drop position fc1(%[[W1]]) fc2(%[[W2]]) activation <gelu> {sinkhorn_max_iterations = 5 : i64, sinkhorn_tolerance = 1.000000e-02 : f64}
// CHECK:         moe.layer softmax sparse_mixer k 2 %[[X]], %[[L]] fc1(%[[W1]]) fc2(%[[W2]]) activation <silu> {jitter_eps = 0.000000e+00 : f64}
func.func @layer_routing_attrs(%x: tensor<4x8xf32>, %l: tensor<4x4xf32>, %w1: tensor<4x16x8xf32>,
    %w2: tensor<4x8x16xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %0 = moe.layer sigmoid sinkhorn k 1 %x, %l capacity 2 drop position fc1(%w1) fc2(%w2)
      activation <gelu> {sinkhorn_tolerance = 1.0e-2, sinkhorn_max_iterations = 5}
      : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<4x8xf32>
  %1 = moe.layer softmax sparse_mixer k 2 %x, %l fc1(%w1) fc2(%w2) activation <silu>
      {jitter_eps = 0.0}
      : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<4x8xf32>
  return %0, %1 : tensor<4x8xf32>, tensor<4x8xf32>
}

// CHECK-LABEL: func.func @placement(
func.func @placement(%ids: tensor<4x2xi32>, %w1: tensor<4x16x8xf32>, %b1: tensor<4x16xf32>) -> (tensor<4x2xi32>, tensor<6x16x8xf32>, tensor<6x16xf32>) {
  // CHECK: %[[T:.*]] = moe.slot_table layer 3 experts 4 initial [0, 1, 2, 3, 0, 1] : tensor<6xi32>
  %t = moe.slot_table layer 3 experts 4 initial [0, 1, 2, 3, 0, 1] : tensor<6xi32>
  // CHECK: moe.place %{{.*}}, %[[T]] : tensor<4x2xi32>, tensor<6xi32>
  %s = moe.place %ids, %t : tensor<4x2xi32>, tensor<6xi32>
  // CHECK: moe.place %{{.*}}, %[[T]] source %{{.*}} ranks 2 : tensor<4x2xi32>, tensor<6xi32>
  %rank = arith.constant 1 : index
  %mine = moe.place %ids, %t source %rank ranks 2 : tensor<4x2xi32>, tensor<6xi32>
  // CHECK: moe.slot_weights %{{.*}}[%[[T]]] : (tensor<4x16x8xf32>, tensor<6xi32>) -> tensor<6x16x8xf32>
  %w = moe.slot_weights %w1[%t] : (tensor<4x16x8xf32>, tensor<6xi32>) -> tensor<6x16x8xf32>
  // CHECK: moe.slot_weights %{{.*}}[%[[T]]] : (tensor<4x16xf32>, tensor<6xi32>) -> tensor<6x16xf32>
  %b = moe.slot_weights %b1[%t] : (tensor<4x16xf32>, tensor<6xi32>) -> tensor<6x16xf32>
  return %s, %w, %b : tensor<4x2xi32>, tensor<6x16x8xf32>, tensor<6x16xf32>
}

// -----

// The slot gradient sum: over the 2 ranks of grid axis 1 (6 slots, 3 per
// rank, 6 parts in), and on one rank (a part per slot).
shard.grid @slots(shape = 4x2)
// CHECK-LABEL: func.func @slot_grad_sum(
func.func @slot_grad_sum(%parts: tensor<6x16x8xf32>, %bias: tensor<6x16xf32>, %t: tensor<6xi32>) -> (tensor<3x16x8xf32>, tensor<6x16xf32>) {
  // CHECK: moe.slot_grad_sum %{{.*}}, %{{.*}} on @slots grid_axes = [1] : (tensor<6x16x8xf32>, tensor<6xi32>) -> tensor<3x16x8xf32>
  %g = moe.slot_grad_sum %parts, %t on @slots grid_axes = [1] : (tensor<6x16x8xf32>, tensor<6xi32>) -> tensor<3x16x8xf32>
  // CHECK: moe.slot_grad_sum %{{.*}}, %{{.*}} : (tensor<6x16xf32>, tensor<6xi32>) -> tensor<6x16xf32>
  %b = moe.slot_grad_sum %bias, %t : (tensor<6x16xf32>, tensor<6xi32>) -> tensor<6x16xf32>
  return %g, %b : tensor<3x16x8xf32>, tensor<6x16xf32>
}
