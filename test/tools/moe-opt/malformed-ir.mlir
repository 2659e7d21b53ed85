// Malformed input is a diagnostic and a non-zero exit, never a crash.
// RUN: not moe-opt %s -split-input-file 2>&1 | FileCheck %s --implicit-check-not="PLEASE submit" --implicit-check-not="Stack dump"
// A file that is not even split ends the same way.
// RUN: not moe-opt %s 2>&1 | FileCheck %s --check-prefix=WHOLE --implicit-check-not="PLEASE submit" --implicit-check-not="Stack dump"
// WHOLE: error:

// CHECK: malformed-ir.mlir:[[# @LINE + 3]]:30: error: expected operation name in quotes
func.func @unterminated(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // The split ends the region before its closing brace.
  return %x : tensor<4x8xf32>

// -----

// CHECK: malformed-ir.mlir:[[# @LINE + 2]]:68: error: expected attribute value
func.func @capacity_without_value(%x: tensor<4x8xf32>, %ids: tensor<4x2xi32>) {
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids capacity drop position
      : (tensor<4x8xf32>, tensor<4x2xi32>) -> (tensor<4x2x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
  return
}

// -----

// CHECK: error: custom op 'moe.route' is unknown
func.func @unknown_op(%l: tensor<4x4xf32>) {
  %ids, %w = moe.route softmax topk %l : tensor<4x4xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return
}

// -----

// CHECK: error: use of undeclared SSA value name
func.func @undefined_value() {
  %z = moe.z_loss %l {coeff = 1.0} : tensor<4x4xf32> -> tensor<f32>
  return
}

// -----

// CHECK: error: expected ','
func.func @missing_result_type(%l: tensor<4x4xf32>) {
  %ids, %w = moe.router softmax topk %l : tensor<4x4xf32> -> tensor<4x2xi32>
  return
}

// -----

// CHECK: error: expected ')'
func.func @unclosed_paren(%r: tensor<8x8xf32>, %c: tensor<4xi32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) {
  %0 = moe.experts %r, %c fc1(%w1 fc2(%w2) activation <relu>
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<8x8xf32>
  return
}

// -----

// CHECK: error: operation defines 4 results but was provided 2 to bind
func.func @wrong_result_count(%x: tensor<4x8xf32>, %ids: tensor<4x2xi32>) {
  %rows, %slots = moe.dispatch %x, %ids
      : (tensor<4x8xf32>, tensor<4x2xi32>) -> (tensor<8x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
  return
}

// -----

// CHECK: error: use of value '%x' expects different type than prior uses: 'tensor<4x4xf32>' vs 'tensor<4x8xf32>'
func.func @operand_type_mismatch(%x: tensor<4x8xf32>) {
  %z = moe.z_loss %x {coeff = 1.0} : tensor<4x4xf32> -> tensor<f32>
  return
}

// -----

// CHECK: error: expected operation name in quotes
func.func @stray_brace() {
  return
}
}

// -----

// CHECK: error: attribute names with a '.' are reserved for dialect-defined names
#moe.activation<relu>
