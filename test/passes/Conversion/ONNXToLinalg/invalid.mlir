// RUN: moe-opt %s --convert-onnx-to-linalg --split-input-file --verify-diagnostics

// NonZero is data-dependent: only moe-raise's blocks contain it. Its users
// (dynamic too) are not reported again.

func.func @nonzero(%mask: tensor<2x8xi1>) -> tensor<?x2xi64> {
  // expected-error @+1 {{onnx.NonZero has a data-dependent shape; only the MoE blocks that contain it can be compiled, after moe-raise}}
  %0 = onnx.NonZero %mask : (tensor<2x8xi1>) -> tensor<2x?xi64>
  %1 = onnx.Transpose %0 {perm = array<i64: 1, 0>} : (tensor<2x?xi64>) -> tensor<?x2xi64>
  return %1 : tensor<?x2xi64>
}

// -----

// A traced `y[idx] += v` fixes the sample's row count in a Reshape after the
// NonZero: the graph only runs on inputs routed as that sample was.
func.func @traced_row_count(%mask: tensor<2x8xi1>, %x: tensor<8x16xf32>) -> tensor<16xf32> {
  %zero = arith.constant dense<0> : tensor<i64>
  %count = arith.constant dense<16> : tensor<1xi64>
  // expected-error @+1 {{onnx.NonZero has a data-dependent shape, and a Reshape after it (node 'y_put') fixes its rows to the count the exporter's sample input had: the graph runs only on inputs routed as that sample was (it fails on others); export the expert loop with index_add_ (`y.index_add_(0, idx, ...)`), not `y[idx] += ...`}}
  %0 = onnx.NonZero %mask : (tensor<2x8xi1>) -> tensor<2x?xi64>
  %1 = onnx.Gather %0, %zero {axis = 0 : i64} : (tensor<2x?xi64>, tensor<i64>) -> tensor<?xi64>
  %2 = onnx.Gather %x, %1 {axis = 0 : i64} : (tensor<8x16xf32>, tensor<?xi64>) -> tensor<?x16xf32>
  %3 = onnx.Reshape %2, %count : (tensor<?x16xf32>, tensor<1xi64>) -> tensor<16xf32> loc("y_put")
  return %3 : tensor<16xf32>
}

// -----

func.func @dynamic_argument(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{onnx.Relu operand #0 has the type 'tensor<?x4xf32>'; the lowering needs static shapes (give the function static argument types)}}
  %0 = onnx.Relu %x : (tensor<?x4xf32>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

func.func @reshape_to_runtime_shape(%x: tensor<2x4xf32>, %shape: tensor<2xi64>) -> tensor<?x?xf32> {
  // expected-error @+1 {{onnx.Reshape result #0 has the dynamic type 'tensor<?x?xf32>': the target shape (operand #1) is not a constant}}
  %0 = onnx.Reshape %x, %shape : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----

func.func @slice_runtime_start(%x: tensor<8xf32>, %start: tensor<1xi64>) -> tensor<?xf32> {
  %end = arith.constant dense<8> : tensor<1xi64>
  // expected-error @+1 {{onnx.Slice result #0 has the dynamic type 'tensor<?xf32>': starts, ends, axes and steps must be constants}}
  %0 = onnx.Slice %x, %start, %end : (tensor<8xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

func.func @topk_runtime_k(%x: tensor<4x8xf32>, %k: tensor<1xi64>) -> tensor<4x?xi64> {
  // expected-error @+1 {{onnx.TopK result #0 has the dynamic type 'tensor<4x?xf32>': K (operand #1) is not a constant}}
  %v, %i = onnx.TopK %x, %k {axis = -1 : i64} : (tensor<4x8xf32>, tensor<1xi64>) -> (tensor<4x?xf32>, tensor<4x?xi64>)
  return %i : tensor<4x?xi64>
}

// -----

func.func @einsum_unknown_letter(%x: tensor<2x4xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{onnx.Einsum cannot be lowered: equation 'ij->k': output letter 'k' is not an input letter or repeats}}
  // expected-error @+1 {{failed to legalize operation 'onnx.Einsum' that was explicitly marked illegal}}
  %0 = onnx.Einsum %x {equation = "ij->k"} : (tensor<2x4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @scatter_unknown_reduction(%d: tensor<4xf32>, %i: tensor<2xi64>, %u: tensor<2xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{onnx.ScatterElements cannot be lowered: unknown reduction}}
  // expected-error @+1 {{failed to legalize operation 'onnx.ScatterElements' that was explicitly marked illegal}}
  %0 = onnx.ScatterElements %d, %i, %u {reduction = "median"} : (tensor<4xf32>, tensor<2xi64>, tensor<2xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @exp_of_integers(%x: tensor<4xi64>) -> tensor<4xi64> {
  // expected-error @+2 {{onnx.Exp cannot be lowered: expects float operands}}
  // expected-error @+1 {{failed to legalize operation 'onnx.Exp' that was explicitly marked illegal}}
  %0 = onnx.Exp %x : (tensor<4xi64>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

// Conv beyond one spatial dim is refused.

func.func @conv_2d(%x: tensor<1x2x4x4xf32>, %w: tensor<2x2x3x3xf32>) -> tensor<1x2x?x?xf32> {
  // expected-error @+1 {{onnx.Conv result #0 has the dynamic type 'tensor<1x2x?x?xf32>': only 1-D convolutions (rank-3 input and weight) are supported}}
  %0 = onnx.Conv %x, %w : (tensor<1x2x4x4xf32>, tensor<2x2x3x3xf32>) -> tensor<1x2x?x?xf32>
  return %0 : tensor<1x2x?x?xf32>
}

// -----

func.func @conv_2d_static(%x: tensor<1x2x4x4xf32>, %w: tensor<2x2x3x3xf32>) -> tensor<1x2x2x2xf32> {
  // expected-error @+2 {{onnx.Conv cannot be lowered: only 1-D convolutions (rank-3 input and weight) are supported}}
  // expected-error @+1 {{failed to legalize operation 'onnx.Conv' that was explicitly marked illegal}}
  %0 = onnx.Conv %x, %w : (tensor<1x2x4x4xf32>, tensor<2x2x3x3xf32>) -> tensor<1x2x2x2xf32>
  return %0 : tensor<1x2x2x2xf32>
}

// -----

func.func @pad_reflect(%x: tensor<2x3xf32>) -> tensor<2x5xf32> {
  %p = arith.constant dense<[0, 1, 0, 1]> : tensor<4xi64>
  // expected-error @+2 {{onnx.Pad cannot be lowered: mode 'reflect' (only constant)}}
  // expected-error @+1 {{failed to legalize operation 'onnx.Pad' that was explicitly marked illegal}}
  %0 = onnx.Pad %x, %p {mode = "reflect"} : (tensor<2x3xf32>, tensor<4xi64>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

func.func @gelu_unknown(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{onnx.Gelu cannot be lowered: approximate='erf' (none or tanh)}}
  // expected-error @+1 {{failed to legalize operation 'onnx.Gelu' that was explicitly marked illegal}}
  %0 = onnx.Gelu %x {approximate = "erf"} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
