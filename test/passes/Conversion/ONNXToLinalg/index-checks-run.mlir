// RUN: moe-opt %s --moe-lower-to-llvm > %t.ll.mlir
// RUN: mlir-runner %t.ll.mlir -e in_range -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s

// Without the runtime, indices out of range fail the cf.assert: its
// message, then abort (stdout unbuffered, or the message stays in the
// buffer).
// RUN: not --crash stdbuf -o0 mlir-runner %t.ll.mlir -e too_large -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils 2>&1 | FileCheck %s --check-prefix=LARGE
// RUN: not --crash stdbuf -o0 mlir-runner %t.ll.mlir -e too_small -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils 2>&1 | FileCheck %s --check-prefix=SMALL

func.func private @printMemrefF32(tensor<*xf32>)

// Rows of a [3, 2] table, the indices a run-time argument.
func.func @rows(%i: tensor<4xi64>) -> tensor<4x2xf32> {
  %d = arith.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>
  %0 = onnx.Gather %d, %i {axis = 0 : i64} : (tensor<3x2xf32>, tensor<4xi64>) -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

func.func @print(%x: tensor<4x2xf32>) {
  %u = tensor.cast %x : tensor<4x2xf32> to tensor<*xf32>
  call @printMemrefF32(%u) : (tensor<*xf32>) -> ()
  return
}

// The whole of [-3, 2].
// CHECK: [1,   2]
// CHECK: [5,   6]
// CHECK: [1,   2]
// CHECK: [5,   6]
func.func @in_range() {
  %i = arith.constant dense<[0, 2, -3, -1]> : tensor<4xi64>
  %r = call @rows(%i) : (tensor<4xi64>) -> tensor<4x2xf32>
  call @print(%r) : (tensor<4x2xf32>) -> ()
  return
}

// LARGE: onnx.Gather: an index is out of range for dim 0 of size 3 (ONNX allows [-3, 2])
// LARGE-NOT: [
func.func @too_large() {
  %i = arith.constant dense<[0, 3, 1, 1]> : tensor<4xi64>
  %r = call @rows(%i) : (tensor<4xi64>) -> tensor<4x2xf32>
  call @print(%r) : (tensor<4x2xf32>) -> ()
  return
}

// SMALL: onnx.Gather: an index is out of range for dim 0 of size 3 (ONNX allows [-3, 2])
func.func @too_small() {
  %i = arith.constant dense<[0, 1, -4, 1]> : tensor<4xi64>
  %r = call @rows(%i) : (tensor<4xi64>) -> tensor<4x2xf32>
  call @print(%r) : (tensor<4x2xf32>) -> ()
  return
}
