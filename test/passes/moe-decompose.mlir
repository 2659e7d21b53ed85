// RUN: moe-opt %s --moe-decompose --split-input-file | FileCheck %s

// Dropless top-k: router -> dispatch (no capacity) -> experts -> combine.

// CHECK-LABEL: func.func @dropless_topk(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x8xf32>, %[[L:[^:]*]]: tensor<4x4xf32>, %[[W1:[^:]*]]: tensor<4x16x8xf32>, %[[W3:[^:]*]]: tensor<4x16x8xf32>, %[[W2:[^:]*]]: tensor<4x8x16xf32>
// CHECK-NOT:     moe.layer
// CHECK:         %[[IDS:.*]], %[[W:.*]] = moe.router softmax topk %[[L]] {normalize} : tensor<4x4xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
// CHECK:         %[[ROWS:.*]], %[[SLOTS:.*]], %[[COUNTS:.*]], %[[DROPPED:.*]] = moe.dispatch %[[X]], %[[IDS]] : (tensor<4x8xf32>, tensor<4x2xi32>) -> (tensor<8x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
// CHECK:         %[[Y:.*]] = moe.experts %[[ROWS]], %[[COUNTS]] fc1(%[[W1]]) fc3(%[[W3]]) fc2(%[[W2]]) activation <swiglu> : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x16x8xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<8x8xf32>
// CHECK:         %[[OUT:.*]] = moe.combine %[[Y]], %[[SLOTS]], %[[W]] : (tensor<8x8xf32>, tensor<4x2xi32>, tensor<4x2xf32>) -> tensor<4x8xf32>
// CHECK-NOT:     arith.addf
// CHECK:         return %[[OUT]] : tensor<4x8xf32>
func.func @dropless_topk(%x: tensor<4x8xf32>, %l: tensor<4x4xf32>, %w1: tensor<4x16x8xf32>,
    %w3: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) -> tensor<4x8xf32> {
  %y = moe.layer softmax topk k 2 %x, %l fc1(%w1) fc3(%w3) fc2(%w2) activation <swiglu> {normalize}
      : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x16x8xf32>, tensor<4x16x8xf32>,
         tensor<4x8x16xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Capacity with the probs policy: dispatch keeps the C most probable tokens
// by the router's weights; rows become [E, C, H] and the experts' output
// [E, C, M]. The biases and the activation's parameters carry over.

// CHECK-LABEL: func.func @capacity_probs(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x8xf32>, %[[L:[^:]*]]: tensor<4x4xf32>, %[[W1:[^:]*]]: tensor<4x32x8xf32>, %[[B1:[^:]*]]: tensor<4x32xf32>, %[[W2:[^:]*]]: tensor<4x6x16xf32>, %[[B2:[^:]*]]: tensor<4x6xf32>
// CHECK:         %[[IDS:.*]], %[[W:.*]] = moe.router sigmoid topk %[[L]] {scaling_factor = 2.000000e+00 : f64} : tensor<4x4xf32> -> tensor<4x1xi32>, tensor<4x1xf32>
// CHECK:         %[[ROWS:.*]], %[[SLOTS:.*]], %[[COUNTS:.*]], %[[DROPPED:.*]] = moe.dispatch %[[X]], %[[IDS]] capacity 3 drop probs by %[[W]] : (tensor<4x8xf32>, tensor<4x1xi32>, tensor<4x1xf32>) -> (tensor<4x3x8xf32>, tensor<4x1xi32>, tensor<4xi32>, tensor<i64>)
// CHECK:         %[[Y:.*]] = moe.experts %[[ROWS]], %[[COUNTS]] fc1(%[[W1]], %[[B1]]) fc2(%[[W2]], %[[B2]]) activation <swiglu, interleaved, alpha = 1.702000e+00, beta = 1.000000e+00, limit = 7.000000e+00> : (tensor<4x3x8xf32>, tensor<4xi32>, tensor<4x32x8xf32>, tensor<4x32xf32>, tensor<4x6x16xf32>, tensor<4x6xf32>) -> tensor<4x3x6xf32>
// CHECK:         %[[OUT:.*]] = moe.combine %[[Y]], %[[SLOTS]], %[[W]] : (tensor<4x3x6xf32>, tensor<4x1xi32>, tensor<4x1xf32>) -> tensor<4x6xf32>
// CHECK:         return %[[OUT]]
func.func @capacity_probs(%x: tensor<4x8xf32>, %l: tensor<4x4xf32>, %w1: tensor<4x32x8xf32>,
    %b1: tensor<4x32xf32>, %w2: tensor<4x6x16xf32>, %b2: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %y = moe.layer sigmoid topk k 1 %x, %l capacity 3 drop probs fc1(%w1, %b1) fc2(%w2, %b2)
      activation <swiglu, interleaved, alpha = 1.702, beta = 1.0, limit = 7.0>
      {scaling_factor = 2.0}
      : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x32x8xf32>, tensor<4x32xf32>,
         tensor<4x6x16xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  return %y : tensor<4x6xf32>
}

// -----

// Capacity with the position policy: no weights go to dispatch.

// CHECK-LABEL: func.func @capacity_position(
// CHECK:         %[[IDS:.*]], %[[W:.*]] = moe.router softmax sinkhorn %{{.*}} {sinkhorn_max_iterations = 7 : i64, sinkhorn_tolerance = 1.000000e-02 : f64}
// CHECK:         moe.dispatch %{{.*}}, %[[IDS]] capacity 2 drop position : (tensor<4x8xf32>, tensor<4x2xi32>) -> (tensor<4x2x8xf32>,
// CHECK:         moe.experts {{.*}} activation <gelu_tanh>
// CHECK:         moe.combine {{.*}}, %[[W]] :
func.func @capacity_position(%x: tensor<4x8xf32>, %l: tensor<4x4xf32>, %w1: tensor<4x16x8xf32>,
    %w2: tensor<4x8x16xf32>) -> tensor<4x8xf32> {
  %y = moe.layer softmax sinkhorn k 2 %x, %l capacity 2 drop position fc1(%w1) fc2(%w2)
      activation <gelu_tanh> {sinkhorn_tolerance = 1.0e-2, sinkhorn_max_iterations = 7}
      : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Expert choice: the capacity goes to the router (tokens per expert) and to
// dispatch with the position policy, which then drops nothing.

// CHECK-LABEL: func.func @expert_choice(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x8xf32>, %[[L:[^:]*]]: tensor<4x4xf32>
// CHECK:         %[[IDS:.*]], %[[W:.*]] = moe.router softmax expert_choice %[[L]] capacity 2 : tensor<4x4xf32> -> tensor<4x4xi32>, tensor<4x4xf32>
// CHECK:         %[[ROWS:.*]], %[[SLOTS:.*]], %[[COUNTS:.*]], %[[DROPPED:.*]] = moe.dispatch %[[X]], %[[IDS]] capacity 2 drop position : (tensor<4x8xf32>, tensor<4x4xi32>) -> (tensor<4x2x8xf32>, tensor<4x4xi32>, tensor<4xi32>, tensor<i64>)
// CHECK:         %[[Y:.*]] = moe.experts %[[ROWS]], %[[COUNTS]] {{.*}} -> tensor<4x2x8xf32>
// CHECK:         moe.combine %[[Y]], %[[SLOTS]], %[[W]] : (tensor<4x2x8xf32>, tensor<4x4xi32>, tensor<4x4xf32>) -> tensor<4x8xf32>
func.func @expert_choice(%x: tensor<4x8xf32>, %l: tensor<4x4xf32>, %w1: tensor<4x16x8xf32>,
    %w2: tensor<4x8x16xf32>) -> tensor<4x8xf32> {
  %y = moe.layer softmax expert_choice k 4 %x, %l capacity 2 fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// A shared expert with a gate: moe.shared_expert with the layer's activation,
// added to the combined output.

// CHECK-LABEL: func.func @shared_expert_gate(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x8xf32>, %[[L:[^:]*]]: tensor<4x4xf32>, %[[W1:[^:]*]]: tensor<4x16x8xf32>, %[[W3:[^:]*]]: tensor<4x16x8xf32>, %[[W2:[^:]*]]: tensor<4x8x16xf32>, %[[S1:[^:]*]]: tensor<12x8xf32>, %[[S3:[^:]*]]: tensor<12x8xf32>, %[[S2:[^:]*]]: tensor<8x12xf32>, %[[G:[^:]*]]: tensor<1x8xf32>
// CHECK:         moe.router softmax topk %[[L]]
// CHECK:         moe.dispatch %[[X]]
// CHECK:         moe.experts {{.*}} fc1(%[[W1]]) fc3(%[[W3]]) fc2(%[[W2]]) activation <swiglu>
// CHECK:         %[[ROUTED:.*]] = moe.combine
// CHECK:         %[[SHARED:.*]] = moe.shared_expert %[[X]] fc1(%[[S1]]) fc3(%[[S3]]) fc2(%[[S2]]) gate(%[[G]]) activation <swiglu> : (tensor<4x8xf32>, tensor<12x8xf32>, tensor<12x8xf32>, tensor<8x12xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
// CHECK:         %[[SUM:.*]] = arith.addf %[[ROUTED]], %[[SHARED]] : tensor<4x8xf32>
// CHECK:         return %[[SUM]]
func.func @shared_expert_gate(%x: tensor<4x8xf32>, %l: tensor<4x4xf32>, %w1: tensor<4x16x8xf32>,
    %w3: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>, %s1: tensor<12x8xf32>, %s3: tensor<12x8xf32>,
    %s2: tensor<8x12xf32>, %g: tensor<1x8xf32>) -> tensor<4x8xf32> {
  %y = moe.layer softmax topk k 2 %x, %l fc1(%w1) fc3(%w3) fc2(%w2)
      shared_fc1(%s1) shared_fc3(%s3) shared_fc2(%s2) shared_gate(%g) activation <swiglu>
      : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x16x8xf32>, tensor<4x16x8xf32>,
         tensor<4x8x16xf32>, tensor<12x8xf32>, tensor<12x8xf32>, tensor<8x12xf32>,
         tensor<1x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// A shared expert without a gate or fc3.

// CHECK-LABEL: func.func @shared_expert_no_gate(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x8xf32>, %{{[^:]*}}: tensor<4x4xf32>, %{{[^:]*}}: tensor<4x16x8xf32>, %{{[^:]*}}: tensor<4x8x16xf32>, %[[S1:[^:]*]]: tensor<12x8xf32>, %[[S2:[^:]*]]: tensor<8x12xf32>
// CHECK:         %[[ROUTED:.*]] = moe.combine
// CHECK:         %[[SHARED:.*]] = moe.shared_expert %[[X]] fc1(%[[S1]]) fc2(%[[S2]]) activation <silu> : (tensor<4x8xf32>, tensor<12x8xf32>, tensor<8x12xf32>) -> tensor<4x8xf32>
// CHECK:         arith.addf %[[ROUTED]], %[[SHARED]]
func.func @shared_expert_no_gate(%x: tensor<4x8xf32>, %l: tensor<4x4xf32>, %w1: tensor<4x16x8xf32>,
    %w2: tensor<4x8x16xf32>, %s1: tensor<12x8xf32>, %s2: tensor<8x12xf32>) -> tensor<4x8xf32> {
  %y = moe.layer softmax topk k 2 %x, %l fc1(%w1) fc2(%w2) shared_fc1(%s1) shared_fc2(%s2)
      activation <silu>
      : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>,
         tensor<12x8xf32>, tensor<8x12xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Grouped top-k with a selection bias: the bias, groups and every routing
// attribute go to the router; fc3_bias to the experts.

// CHECK-LABEL: func.func @grouped_topk_bias(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x8xf32>, %[[L:[^:]*]]: tensor<4x8xf32>, %[[B:[^:]*]]: tensor<8xf32>, %[[W1:[^:]*]]: tensor<8x16x8xf32>, %[[W3:[^:]*]]: tensor<8x16x8xf32>, %[[B3:[^:]*]]: tensor<8x16xf32>, %[[W2:[^:]*]]: tensor<8x8x16xf32>
// CHECK:         %[[IDS:.*]], %[[W:.*]] = moe.router sigmoid grouped_topk %[[L]] bias(%[[B]]) groups 4 top 2 by top2_sum {normalize, scaling_factor = 2.500000e+00 : f64} : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x3xi32>, tensor<4x3xf32>
// CHECK:         %[[ROWS:.*]], %[[SLOTS:.*]], %[[COUNTS:.*]], %[[DROPPED:.*]] = moe.dispatch %[[X]], %[[IDS]] : (tensor<4x8xf32>, tensor<4x3xi32>) -> (tensor<12x8xf32>, tensor<4x3xi32>, tensor<8xi32>, tensor<i64>)
// CHECK:         %[[Y:.*]] = moe.experts %[[ROWS]], %[[COUNTS]] fc1(%[[W1]]) fc3(%[[W3]]) fc3_bias(%[[B3]]) fc2(%[[W2]]) activation <silu>
// CHECK:         moe.combine %[[Y]], %[[SLOTS]], %[[W]]
func.func @grouped_topk_bias(%x: tensor<4x8xf32>, %l: tensor<4x8xf32>, %b: tensor<8xf32>,
    %w1: tensor<8x16x8xf32>, %w3: tensor<8x16x8xf32>, %b3: tensor<8x16xf32>,
    %w2: tensor<8x8x16xf32>) -> tensor<4x8xf32> {
  %y = moe.layer sigmoid grouped_topk k 3 %x, %l bias(%b) groups 4 top 2 by top2_sum
      fc1(%w1) fc3(%w3) fc3_bias(%b3) fc2(%w2) activation <silu>
      {normalize, scaling_factor = 2.5}
      : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8x16x8xf32>, tensor<8x16x8xf32>,
         tensor<8x16xf32>, tensor<8x8x16xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Sparse mixer keeps its jitter_eps.

// CHECK-LABEL: func.func @sparse_mixer(
// CHECK:         moe.router softmax sparse_mixer %{{.*}} {jitter_eps = 1.000000e-01 : f64} : tensor<4x4xf16> -> tensor<4x2xi32>, tensor<4x2xf16>
// CHECK:         moe.dispatch {{.*}} -> (tensor<8x8xf16>,
func.func @sparse_mixer(%x: tensor<4x8xf16>, %l: tensor<4x4xf16>, %w1: tensor<4x16x8xf16>,
    %w2: tensor<4x8x16xf16>) -> tensor<4x8xf16> {
  %y = moe.layer softmax sparse_mixer k 2 %x, %l fc1(%w1) fc2(%w2) activation <relu>
      {jitter_eps = 0.1}
      : (tensor<4x8xf16>, tensor<4x4xf16>, tensor<4x16x8xf16>, tensor<4x8x16xf16>) -> tensor<4x8xf16>
  return %y : tensor<4x8xf16>
}
