// RUN: moe-opt %s --moe-lower-to-llvm | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s
//
// A Split with a part of size 0 (exporters write one for an unused rotary
// section) and a Slice that starts at its dim's end: empty results, the
// other parts read as usual. A slice at the axis' end was out of bounds.

func.func private @printMemrefF32(tensor<*xf32> {bufferization.access = "read"})

func.func @model(%x: tensor<2x3xf32>) -> (tensor<2x1xf32>, tensor<2x2xf32>, tensor<2x0xf32>, tensor<2x0xf32>) {
  %sizes = arith.constant dense<[1, 2, 0]> : tensor<3xi64>
  %a, %b, %c = onnx.Split %x, %sizes {axis = 1 : i64} : (tensor<2x3xf32>, tensor<3xi64>) -> (tensor<2x1xf32>, tensor<2x2xf32>, tensor<2x0xf32>)
  %start = arith.constant dense<3> : tensor<1xi64>
  %end = arith.constant dense<9> : tensor<1xi64>
  %axis = arith.constant dense<1> : tensor<1xi64>
  %d = onnx.Slice %x, %start, %end, %axis : (tensor<2x3xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x0xf32>
  return %a, %b, %c, %d : tensor<2x1xf32>, tensor<2x2xf32>, tensor<2x0xf32>, tensor<2x0xf32>
}

func.func @main() {
  %x = arith.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %a, %b, %c, %d = call @model(%x) : (tensor<2x3xf32>) -> (tensor<2x1xf32>, tensor<2x2xf32>, tensor<2x0xf32>, tensor<2x0xf32>)
  %au = tensor.cast %a : tensor<2x1xf32> to tensor<*xf32>
  %bu = tensor.cast %b : tensor<2x2xf32> to tensor<*xf32>
  %cu = tensor.cast %c : tensor<2x0xf32> to tensor<*xf32>
  %du = tensor.cast %d : tensor<2x0xf32> to tensor<*xf32>
  call @printMemrefF32(%au) : (tensor<*xf32>) -> ()
  call @printMemrefF32(%bu) : (tensor<*xf32>) -> ()
  call @printMemrefF32(%cu) : (tensor<*xf32>) -> ()
  call @printMemrefF32(%du) : (tensor<*xf32>) -> ()
  return
}

// CHECK: sizes = [2, 1]
// CHECK-NEXT: [1],
// CHECK-NEXT: [4]
// CHECK: sizes = [2, 2]
// CHECK-NEXT: [2,   3],
// CHECK-NEXT: [5,   6]
// CHECK: sizes = [2, 0]
// CHECK: sizes = [2, 0]
