// RUN: moe-opt %s -split-input-file -verify-diagnostics

// BoundedBuffers on the onnx dialect: the static dimensions of every ranked
// input and output give an element count and byte size that fit int64 and
// at most 2^40 bytes; dynamic dimensions are left to run time.

func.func @input_too_large(%x: tensor<1099511627776x1099511627776xf32>) {
  // expected-error @+1 {{'onnx.Relu' op operand #0 of type 'tensor<1099511627776x1099511627776xf32>' has more elements than int64 can count}}
  %y = onnx.Relu %x : (tensor<1099511627776x1099511627776xf32>) -> tensor<1099511627776x1099511627776xf32>
  return
}

// -----

func.func @output_too_large(%x: tensor<2xi64>) {
  // expected-error @+1 {{'onnx.ConstantOfShape' op result #0 of type 'tensor<1048576x1048576xf32>' needs 4398046511104 bytes, more than the 2^40 bytes one buffer may hold}}
  %y = onnx.ConstantOfShape %x : (tensor<2xi64>) -> tensor<1048576x1048576xf32>
  return
}

// -----

// The static part of a shape with a dynamic dimension is bounded too.
func.func @dynamic_and_too_large(%x: tensor<?x1099511627776xf32>) {
  // expected-error @+1 {{'onnx.Relu' op operand #0 of type 'tensor<?x1099511627776xf32>' needs 4398046511104 bytes, more than the 2^40 bytes one buffer may hold}}
  %y = onnx.Relu %x : (tensor<?x1099511627776xf32>) -> tensor<?x1099511627776xf32>
  return
}

// -----

// i1 takes a byte: 2^40 + 1 of them are over the bound.
func.func @bool_bytes(%x: tensor<1099511627777xi1>) {
  // expected-error @+1 {{'onnx.Not' op operand #0 of type 'tensor<1099511627777xi1>' needs 1099511627777 bytes, more than the 2^40 bytes one buffer may hold}}
  %y = onnx.Not %x : (tensor<1099511627777xi1>) -> tensor<1099511627777xi1>
  return
}

// -----

// Within the bound, dynamic or not.
func.func @fine(%x: tensor<?x4096xf32>, %y: tensor<1099511627776xi1>) -> (tensor<?x4096xf32>, tensor<1099511627776xi1>) {
  %a = onnx.Relu %x : (tensor<?x4096xf32>) -> tensor<?x4096xf32>
  %b = onnx.Not %y : (tensor<1099511627776xi1>) -> tensor<1099511627776xi1>
  return %a, %b : tensor<?x4096xf32>, tensor<1099511627776xi1>
}
