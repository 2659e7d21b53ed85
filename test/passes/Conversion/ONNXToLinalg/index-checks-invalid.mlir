// RUN: moe-opt %s --convert-onnx-to-linalg --split-input-file --verify-diagnostics

// Constant indices out of range are an error when compiling: the first one
// of each op, with the dim it selects in and what ONNX allows there.

func.func @gather(%d: tensor<4x3xf32>) -> tensor<2x3xf32> {
  %i = arith.constant dense<[3, 7]> : tensor<2xi64>
  // expected-error @+1 {{'onnx.Gather' op index 7 is out of range for dim 0 of size 4 (ONNX allows [-4, 3])}}
  %0 = onnx.Gather %d, %i {axis = 0 : i64} : (tensor<4x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Negative indices count from the end: -4 is the first of 4, -5 is none.

func.func @gather_negative(%d: tensor<4x3xf32>) -> tensor<4x2xf32> {
  %i = arith.constant dense<[-3, -4]> : tensor<2xi32>
  %0 = onnx.Gather %d, %i {axis = 0 : i64} : (tensor<4x3xf32>, tensor<2xi32>) -> tensor<2x3xf32>
  %j = arith.constant dense<[-5]> : tensor<1xi64>
  // expected-error @+1 {{'onnx.Gather' op index -5 is out of range for dim 0 of size 4 (ONNX allows [-4, 3])}}
  %1 = onnx.Gather %d, %j {axis = 0 : i64} : (tensor<4x3xf32>, tensor<1xi64>) -> tensor<1x3xf32>
  %2 = arith.constant dense<0.0> : tensor<4x2xf32>
  return %2 : tensor<4x2xf32>
}

// -----

// An index computed from constants is folded first, then checked.

func.func @folded(%d: tensor<4x3xf32>) -> tensor<3xf32> {
  %a = arith.constant dense<2> : tensor<i64>
  %b = arith.constant dense<3> : tensor<i64>
  %i = onnx.Mul %a, %b : (tensor<i64>, tensor<i64>) -> tensor<i64>
  // expected-error @+1 {{'onnx.Gather' op index 6 is out of range for dim 0 of size 4 (ONNX allows [-4, 3])}}
  %0 = onnx.Gather %d, %i {axis = 0 : i64} : (tensor<4x3xf32>, tensor<i64>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @gather_elements(%d: tensor<2x3xf32>) -> tensor<2x2xf32> {
  %i = arith.constant dense<[[0, 2], [-3, 3]]> : tensor<2x2xi64>
  // expected-error @+1 {{'onnx.GatherElements' op index 3 is out of range for dim 1 of size 3 (ONNX allows [-3, 2])}}
  %0 = onnx.GatherElements %d, %i {axis = -1 : i64} : (tensor<2x3xf32>, tensor<2x2xi64>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

func.func @scatter_elements(%d: tensor<2x3xf32>, %u: tensor<1x3xf32>) -> tensor<2x3xf32> {
  %i = arith.constant dense<[[0, 1, -3]]> : tensor<1x3xi64>
  // expected-error @+1 {{'onnx.ScatterElements' op index -3 is out of range for dim 0 of size 2 (ONNX allows [-2, 1])}}
  %0 = onnx.ScatterElements %d, %i, %u {axis = 0 : i64} : (tensor<2x3xf32>, tensor<1x3xi64>, tensor<1x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// The tuples of GatherND and ScatterND: component c selects in dim c (after
// GatherND's batch dims).

func.func @gather_nd(%d: tensor<2x5x6xf32>) -> tensor<2xf32> {
  %i = arith.constant dense<[[4, 5], [0, 6]]> : tensor<2x2xi64>
  // expected-error @+1 {{'onnx.GatherND' op index 6 is out of range for dim 2 of size 6 (ONNX allows [-6, 5])}}
  %0 = onnx.GatherND %d, %i {batch_dims = 1 : i64} : (tensor<2x5x6xf32>, tensor<2x2xi64>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @scatter_nd(%d: tensor<2x5xf32>, %u: tensor<2xf32>) -> tensor<2x5xf32> {
  %i = arith.constant dense<[[1, 4], [2, 0]]> : tensor<2x2xi64>
  // expected-error @+1 {{'onnx.ScatterND' op index 2 is out of range for dim 0 of size 2 (ONNX allows [-2, 1])}}
  %0 = onnx.ScatterND %d, %i, %u : (tensor<2x5xf32>, tensor<2x2xi64>, tensor<2xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}
