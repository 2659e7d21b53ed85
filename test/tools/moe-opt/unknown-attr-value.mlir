// An unknown enum keyword or activation in an op is a diagnostic and a
// non-zero exit, never a crash.
// RUN: not moe-opt %s -split-input-file 2>&1 | FileCheck %s --implicit-check-not="PLEASE submit" --implicit-check-not="Stack dump"

// CHECK: error: custom op 'moe.router' expected string or keyword containing one of the following enum values for attribute 'scoring' [softmax, sigmoid]
func.func @scoring(%l: tensor<4x4xf32>) {
  %ids, %w = moe.router softplus topk %l : tensor<4x4xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return
}

// -----

// CHECK: error: custom op 'moe.router' expected string or keyword containing one of the following enum values for attribute 'selection' [topk, grouped_topk, sinkhorn, expert_choice, sparse_mixer, given]
func.func @selection(%l: tensor<4x4xf32>) {
  %ids, %w = moe.router softmax top_k %l : tensor<4x4xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return
}

// -----

// CHECK: error: custom op 'moe.router' expected string or keyword containing one of the following enum values for attribute 'group_score' [max, top2_sum]
func.func @group_score(%l: tensor<4x8xf32>) {
  %ids, %w = moe.router softmax grouped_topk %l groups 2 top 1 by sum
      : tensor<4x8xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return
}

// -----

// CHECK: error: custom op 'moe.dispatch' expected string or keyword containing one of the following enum values for attribute 'drop_policy' [position, probs, choice]
func.func @drop_policy(%x: tensor<4x8xf32>, %ids: tensor<4x2xi32>) {
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids capacity 2 drop random
      : (tensor<4x8xf32>, tensor<4x2xi32>) -> (tensor<4x2x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
  return
}

// -----

// CHECK: error: custom op 'moe.experts' unknown activation 'swish'
func.func @activation(%r: tensor<8x8xf32>, %c: tensor<4xi32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) {
  %0 = moe.experts %r, %c fc1(%w1) fc2(%w2) activation <swish>
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<8x8xf32>
  return
}

// -----

// CHECK: error: custom op 'moe.experts' expected a SwiGLU layout, 'alpha', 'beta' or 'limit', got 'fused'
func.func @swiglu_layout(%r: tensor<8x8xf32>, %c: tensor<4xi32>, %w1: tensor<4x32x8xf32>, %w2: tensor<4x8x16xf32>) {
  %0 = moe.experts %r, %c fc1(%w1) fc2(%w2) activation <swiglu, fused>
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x32x8xf32>, tensor<4x8x16xf32>) -> tensor<8x8xf32>
  return
}

// -----

// CHECK: error: {{.*}}swiglu limit must be finite and positive, got -7.000000e+00
func.func @swiglu_limit(%r: tensor<8x8xf32>, %c: tensor<4xi32>, %w1: tensor<4x32x8xf32>, %w2: tensor<4x8x16xf32>) {
  %0 = moe.experts %r, %c fc1(%w1) fc2(%w2) activation <swiglu, interleaved, limit = -7.0>
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x32x8xf32>, tensor<4x8x16xf32>) -> tensor<8x8xf32>
  return
}

// -----

// CHECK: error: unknown attribute `gate` in dialect `moe`
// CHECK-NOT: error: invalid properties
func.func @unknown_attribute() attributes {a = #moe.gate<1>} {
  return
}

// -----

// An out-of-range enum value in the generic form.
// CHECK: error: invalid properties {operandSegmentSizes = array<i32: 1, 0, 0, 0>, scoring = 7 : i32, selection = 0 : i32} for op moe.router: Invalid attribute `scoring` in property conversion: 7 : i32
func.func @generic_enum_value(%l: tensor<4x4xf32>) {
  %ids, %w = "moe.router"(%l) <{scoring = 7 : i32, selection = 0 : i32, operandSegmentSizes = array<i32: 1, 0, 0, 0>}>
      : (tensor<4x4xf32>) -> (tensor<4x2xi32>, tensor<4x2xf32>)
  return
}
