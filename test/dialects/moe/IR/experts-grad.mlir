// RUN: moe-opt %s -split-input-file -verify-diagnostics | FileCheck %s
// RUN: moe-opt %s -split-input-file -verify-diagnostics | moe-opt -split-input-file | FileCheck %s
// RUN: moe-opt %s -split-input-file -verify-diagnostics --mlir-print-op-generic | moe-opt -split-input-file | FileCheck %s

// moe.experts_grad, the VJP of moe.experts that moe-autodiff emits: round
// trips of its forms, then one case per diagnostic of its verifier
// (MoEOps.cpp), in order. The custom form names the optional cotangent
// results in `resultSegmentSizes` (rows, fc1, fc1_bias, fc3, fc3_bias,
// fc2, fc2_bias). Shapes: R = 8 rows, H = 8, E = 4 experts, F = 16.

// A separate SwiGLU: cotangents of the rows and the three weights.
// CHECK-LABEL: func.func @swiglu(
// CHECK-SAME:    %[[R:[^:]*]]: tensor<8x8xf32>, %[[C:[^:]*]]: tensor<4xi32>, %[[DY:[^:]*]]: tensor<8x8xf32>, %[[W1:[^:]*]]: tensor<4x16x8xf32>, %[[W3:[^:]*]]: tensor<4x16x8xf32>, %[[W2:[^:]*]]: tensor<4x8x16xf32>)
// CHECK:         %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} = moe.experts_grad %[[R]], %[[C]], %[[DY]] fc1(%[[W1]]) fc3(%[[W3]]) fc2(%[[W2]]) activation <swiglu> {resultSegmentSizes = array<i32: 1, 1, 0, 1, 0, 1, 0>} : (tensor<8x8xf32>, tensor<4xi32>, tensor<8x8xf32>, tensor<4x16x8xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> (tensor<8x8xf32>, tensor<4x16x8xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>)
func.func @swiglu(%rows: tensor<8x8xf32>, %counts: tensor<4xi32>, %dy: tensor<8x8xf32>, %w1: tensor<4x16x8xf32>, %w3: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) -> (tensor<8x8xf32>, tensor<4x16x8xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) {
  %dx, %dw1, %dw3, %dw2 = moe.experts_grad %rows, %counts, %dy fc1(%w1) fc3(%w3) fc2(%w2) activation <swiglu> {resultSegmentSizes = array<i32: 1, 1, 0, 1, 0, 1, 0>}
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<8x8xf32>, tensor<4x16x8xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>)
     -> (tensor<8x8xf32>, tensor<4x16x8xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>)
  return %dx, %dw1, %dw3, %dw2 : tensor<8x8xf32>, tensor<4x16x8xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>
}

// -----

// Capacity rows [G, C, H] with G = 2E groups (two source ranks), biases on
// both projections: their cotangents follow their weights'.
// CHECK-LABEL: func.func @capacity_biases(
// CHECK:         moe.experts_grad %{{.*}}, %{{.*}}, %{{.*}} fc1(%{{.*}}, %{{.*}}) fc2(%{{.*}}, %{{.*}}) activation <gelu> {resultSegmentSizes = array<i32: 1, 1, 1, 0, 0, 1, 1>} : (tensor<8x3x8xf32>, tensor<8xi32>, tensor<8x3x8xf32>, tensor<4x16x8xf32>, tensor<4x16xf32>, tensor<4x8x16xf32>, tensor<4x8xf32>) -> (tensor<8x3x8xf32>, tensor<4x16x8xf32>, tensor<4x16xf32>, tensor<4x8x16xf32>, tensor<4x8xf32>)
func.func @capacity_biases(%rows: tensor<8x3x8xf32>, %counts: tensor<8xi32>, %dy: tensor<8x3x8xf32>, %w1: tensor<4x16x8xf32>, %b1: tensor<4x16xf32>, %w2: tensor<4x8x16xf32>, %b2: tensor<4x8xf32>) -> tensor<4x16xf32> {
  %dx, %dw1, %db1, %dw2, %db2 = moe.experts_grad %rows, %counts, %dy fc1(%w1, %b1) fc2(%w2, %b2) activation <gelu> {resultSegmentSizes = array<i32: 1, 1, 1, 0, 0, 1, 1>}
      : (tensor<8x3x8xf32>, tensor<8xi32>, tensor<8x3x8xf32>, tensor<4x16x8xf32>, tensor<4x16xf32>, tensor<4x8x16xf32>, tensor<4x8xf32>)
     -> (tensor<8x3x8xf32>, tensor<4x16x8xf32>, tensor<4x16xf32>, tensor<4x8x16xf32>, tensor<4x8xf32>)
  return %db1 : tensor<4x16xf32>
}

// -----

// A fused (interleaved) SwiGLU with a limit and an fc3-free layout: fc1 is
// [E, 2F, H], fc2 [E, H, F].
// CHECK-LABEL: func.func @fused_swiglu_limit(
// CHECK:         moe.experts_grad %{{.*}}, %{{.*}}, %{{.*}} fc1(%{{.*}}) fc2(%{{.*}}) activation <swiglu, interleaved, alpha = 1.702000e+00, limit = 7.000000e+00> {resultSegmentSizes = array<i32: 1, 1, 0, 0, 0, 1, 0>} : (tensor<8x8xbf16>, tensor<4xi32>, tensor<8x8xbf16>, tensor<4x32x8xbf16>, tensor<4x8x16xbf16>) -> (tensor<8x8xbf16>, tensor<4x32x8xbf16>, tensor<4x8x16xbf16>)
func.func @fused_swiglu_limit(%rows: tensor<8x8xbf16>, %counts: tensor<4xi32>, %dy: tensor<8x8xbf16>, %w1: tensor<4x32x8xbf16>, %w2: tensor<4x8x16xbf16>) -> tensor<8x8xbf16> {
  %dx, %dw1, %dw2 = moe.experts_grad %rows, %counts, %dy fc1(%w1) fc2(%w2) activation <swiglu, interleaved, alpha = 1.702, limit = 7.0> {resultSegmentSizes = array<i32: 1, 1, 0, 0, 0, 1, 0>}
      : (tensor<8x8xbf16>, tensor<4xi32>, tensor<8x8xbf16>, tensor<4x32x8xbf16>, tensor<4x8x16xbf16>)
     -> (tensor<8x8xbf16>, tensor<4x32x8xbf16>, tensor<4x8x16xbf16>)
  return %dx : tensor<8x8xbf16>
}

// -----

// Per group (experts on slots): a weight cotangent per group of counts, 8
// groups of 2 sources x 4 local slots, which moe.slot_grad_sum adds up.
// CHECK-LABEL: func.func @per_group(
// CHECK:         moe.experts_grad %{{.*}}, %{{.*}}, %{{.*}} fc1(%{{.*}}, %{{.*}}) fc2(%{{.*}}) activation <relu> per_group {resultSegmentSizes = array<i32: 1, 1, 1, 0, 0, 1, 0>} : (tensor<8x8xf32>, tensor<8xi32>, tensor<8x8xf32>, tensor<4x16x8xf32>, tensor<4x16xf32>, tensor<4x8x16xf32>) -> (tensor<8x8xf32>, tensor<8x16x8xf32>, tensor<8x16xf32>, tensor<8x8x16xf32>)
func.func @per_group(%rows: tensor<8x8xf32>, %counts: tensor<8xi32>, %dy: tensor<8x8xf32>, %w1: tensor<4x16x8xf32>, %b1: tensor<4x16xf32>, %w2: tensor<4x8x16xf32>) -> tensor<8x16x8xf32> {
  %dx, %dw1, %db1, %dw2 = moe.experts_grad %rows, %counts, %dy fc1(%w1, %b1) fc2(%w2) activation <relu> per_group {resultSegmentSizes = array<i32: 1, 1, 1, 0, 0, 1, 0>}
      : (tensor<8x8xf32>, tensor<8xi32>, tensor<8x8xf32>, tensor<4x16x8xf32>, tensor<4x16xf32>, tensor<4x8x16xf32>)
     -> (tensor<8x8xf32>, tensor<8x16x8xf32>, tensor<8x16xf32>, tensor<8x8x16xf32>)
  return %dw1 : tensor<8x16x8xf32>
}

// -----

// The operands obey moe.experts' constraints (shared code): E >= 1 ...
func.func @no_experts(%rows: tensor<8x8xf32>, %counts: tensor<0xi32>, %dy: tensor<8x8xf32>, %w1: tensor<0x16x8xf32>, %w2: tensor<0x8x16xf32>) {
  // expected-error @+1 {{'moe.experts_grad' op fc1 must have at least one expert}}
  %dx, %dw1, %dw2 = moe.experts_grad %rows, %counts, %dy fc1(%w1) fc2(%w2) activation <relu> {resultSegmentSizes = array<i32: 1, 1, 0, 0, 0, 1, 0>}
      : (tensor<8x8xf32>, tensor<0xi32>, tensor<8x8xf32>, tensor<0x16x8xf32>, tensor<0x8x16xf32>) -> (tensor<8x8xf32>, tensor<0x16x8xf32>, tensor<0x8x16xf32>)
  return
}

// -----

// ... a multiple of E groups ...
func.func @groups_not_multiple(%rows: tensor<8x8xf32>, %counts: tensor<6xi32>, %dy: tensor<8x8xf32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) {
  // expected-error @+1 {{'moe.experts_grad' op counts has 6 groups, not a multiple of the 4 experts}}
  %dx, %dw1, %dw2 = moe.experts_grad %rows, %counts, %dy fc1(%w1) fc2(%w2) activation <relu> {resultSegmentSizes = array<i32: 1, 1, 0, 0, 0, 1, 0>}
      : (tensor<8x8xf32>, tensor<6xi32>, tensor<8x8xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> (tensor<8x8xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>)
  return
}

// -----

// ... one block of capacity rows per group ...
func.func @capacity_blocks(%rows: tensor<4x3x8xf32>, %counts: tensor<8xi32>, %dy: tensor<4x3x8xf32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) {
  // expected-error @+1 {{'moe.experts_grad' op capacity rows have 4 blocks for 8 groups}}
  %dx, %dw1, %dw2 = moe.experts_grad %rows, %counts, %dy fc1(%w1) fc2(%w2) activation <relu> {resultSegmentSizes = array<i32: 1, 1, 0, 0, 0, 1, 0>}
      : (tensor<4x3x8xf32>, tensor<8xi32>, tensor<4x3x8xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> (tensor<4x3x8xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>)
  return
}

// -----

// ... and FFN weights that fit the rows and each other.
func.func @ffn_fc1_input_size(%rows: tensor<8x8xf32>, %counts: tensor<4xi32>, %dy: tensor<8x8xf32>, %w1: tensor<4x16x6xf32>, %w2: tensor<4x8x16xf32>) {
  // expected-error @+1 {{'moe.experts_grad' op fc1 input size 6 does not match the row width 8}}
  %dx, %dw1, %dw2 = moe.experts_grad %rows, %counts, %dy fc1(%w1) fc2(%w2) activation <relu> {resultSegmentSizes = array<i32: 1, 1, 0, 0, 0, 1, 0>}
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<8x8xf32>, tensor<4x16x6xf32>, tensor<4x8x16xf32>) -> (tensor<8x8xf32>, tensor<4x16x6xf32>, tensor<4x8x16xf32>)
  return
}

// -----

func.func @separate_swiglu_no_fc3(%rows: tensor<8x8xf32>, %counts: tensor<4xi32>, %dy: tensor<8x8xf32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) {
  // expected-error @+1 {{'moe.experts_grad' op a separate swiglu needs fc3}}
  %dx, %dw1, %dw2 = moe.experts_grad %rows, %counts, %dy fc1(%w1) fc2(%w2) activation <swiglu> {resultSegmentSizes = array<i32: 1, 1, 0, 0, 0, 1, 0>}
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<8x8xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> (tensor<8x8xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>)
  return
}

// -----

// d_output has the type of moe.experts' result: fc2's width M ...
func.func @d_output_shape(%rows: tensor<8x8xf32>, %counts: tensor<4xi32>, %dy: tensor<8x4xf32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) {
  // expected-error @+1 {{'moe.experts_grad' op d_output must be [8, 8], got [8, 4]}}
  %dx, %dw1, %dw2 = moe.experts_grad %rows, %counts, %dy fc1(%w1) fc2(%w2) activation <relu> {resultSegmentSizes = array<i32: 1, 1, 0, 0, 0, 1, 0>}
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<8x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> (tensor<8x8xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>)
  return
}

// -----

// ... with fc2's output width where it differs from H (M = 4 here) ...
func.func @d_output_width(%rows: tensor<8x8xf32>, %counts: tensor<4xi32>, %dy: tensor<8x8xf32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x4x16xf32>) {
  // expected-error @+1 {{'moe.experts_grad' op d_output must be [8, 4], got [8, 8]}}
  %dx, %dw1, %dw2 = moe.experts_grad %rows, %counts, %dy fc1(%w1) fc2(%w2) activation <relu> {resultSegmentSizes = array<i32: 1, 1, 0, 0, 0, 1, 0>}
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<8x8xf32>, tensor<4x16x8xf32>, tensor<4x4x16xf32>) -> (tensor<8x8xf32>, tensor<4x16x8xf32>, tensor<4x4x16xf32>)
  return
}

// -----

// ... and the rows' element type.
func.func @d_output_element_type(%rows: tensor<8x8xf32>, %counts: tensor<4xi32>, %dy: tensor<8x8xf16>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) {
  // expected-error @+1 {{'moe.experts_grad' op d_output element type 'f16' does not match 'f32'}}
  %dx, %dw1, %dw2 = moe.experts_grad %rows, %counts, %dy fc1(%w1) fc2(%w2) activation <relu> {resultSegmentSizes = array<i32: 1, 1, 0, 0, 0, 1, 0>}
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<8x8xf16>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> (tensor<8x8xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>)
  return
}

// -----

// A cotangent result exactly for each optional weight given: none for a
// given bias ...
func.func @missing_bias_cotangent(%rows: tensor<8x8xf32>, %counts: tensor<4xi32>, %dy: tensor<8x8xf32>, %w1: tensor<4x16x8xf32>, %b1: tensor<4x16xf32>, %w2: tensor<4x8x16xf32>) {
  // expected-error @+1 {{'moe.experts_grad' op has no cotangent result for fc1_bias, which is given}}
  %dx, %dw1, %dw2 = moe.experts_grad %rows, %counts, %dy fc1(%w1, %b1) fc2(%w2) activation <relu> {resultSegmentSizes = array<i32: 1, 1, 0, 0, 0, 1, 0>}
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<8x8xf32>, tensor<4x16x8xf32>, tensor<4x16xf32>, tensor<4x8x16xf32>) -> (tensor<8x8xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>)
  return
}

// -----

// ... one for a weight that is not given ...
func.func @extra_fc3_cotangent(%rows: tensor<8x8xf32>, %counts: tensor<4xi32>, %dy: tensor<8x8xf32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) {
  // expected-error @+1 {{'moe.experts_grad' op has a cotangent result for fc3, which is not}}
  %dx, %dw1, %dw3, %dw2 = moe.experts_grad %rows, %counts, %dy fc1(%w1) fc2(%w2) activation <silu> {resultSegmentSizes = array<i32: 1, 1, 0, 1, 0, 1, 0>}
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<8x8xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> (tensor<8x8xf32>, tensor<4x16x8xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>)
  return
}

// -----

// ... and each of the type of what it is the cotangent of: the rows ...
func.func @d_rows_type(%rows: tensor<8x8xf32>, %counts: tensor<4xi32>, %dy: tensor<8x8xf32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) {
  // expected-error @+1 {{'moe.experts_grad' op cotangent of rows has type 'tensor<8x8xf16>', expected 'tensor<8x8xf32>'}}
  %dx, %dw1, %dw2 = moe.experts_grad %rows, %counts, %dy fc1(%w1) fc2(%w2) activation <relu> {resultSegmentSizes = array<i32: 1, 1, 0, 0, 0, 1, 0>}
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<8x8xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> (tensor<8x8xf16>, tensor<4x16x8xf32>, tensor<4x8x16xf32>)
  return
}

// -----

// ... a weight ...
func.func @d_fc2_type(%rows: tensor<8x8xf32>, %counts: tensor<4xi32>, %dy: tensor<8x8xf32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) {
  // expected-error @+1 {{'moe.experts_grad' op cotangent of fc2 has type 'tensor<4x16x8xf32>', expected 'tensor<4x8x16xf32>'}}
  %dx, %dw1, %dw2 = moe.experts_grad %rows, %counts, %dy fc1(%w1) fc2(%w2) activation <relu> {resultSegmentSizes = array<i32: 1, 1, 0, 0, 0, 1, 0>}
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<8x8xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> (tensor<8x8xf32>, tensor<4x16x8xf32>, tensor<4x16x8xf32>)
  return
}

// -----

// ... and a bias.
func.func @d_fc2_bias_type(%rows: tensor<8x8xf32>, %counts: tensor<4xi32>, %dy: tensor<8x8xf32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>, %b2: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.experts_grad' op cotangent of fc2_bias has type 'tensor<4x16xf32>', expected 'tensor<4x8xf32>'}}
  %dx, %dw1, %dw2, %db2 = moe.experts_grad %rows, %counts, %dy fc1(%w1) fc2(%w2, %b2) activation <relu> {resultSegmentSizes = array<i32: 1, 1, 0, 0, 0, 1, 1>}
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<8x8xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>, tensor<4x8xf32>) -> (tensor<8x8xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>)
  return
}

// -----

// Per group, a weight cotangent has a row per group, not per expert.
func.func @per_group_shape(%rows: tensor<8x8xf32>, %counts: tensor<8xi32>, %dy: tensor<8x8xf32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) {
  // expected-error @+1 {{'moe.experts_grad' op cotangent of fc1 has type 'tensor<4x16x8xf32>', expected 'tensor<8x16x8xf32>'}}
  %dx, %dw1, %dw2 = moe.experts_grad %rows, %counts, %dy fc1(%w1) fc2(%w2) activation <relu> per_group {resultSegmentSizes = array<i32: 1, 1, 0, 0, 0, 1, 0>}
      : (tensor<8x8xf32>, tensor<8xi32>, tensor<8x8xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> (tensor<8x8xf32>, tensor<4x16x8xf32>, tensor<8x8x16xf32>)
  return
}
