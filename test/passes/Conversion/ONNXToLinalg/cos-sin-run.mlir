// RUN: moe-opt %s --moe-lower-to-llvm | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s
//
// Cos and Sin (rotary embeddings that the exporter does not fold at long
// sequences), lowered and run; values print as int64 of x * 1000
// (truncated). Reference: NumPy.

func.func private @printMemrefI64(tensor<*xi64> {bufferization.access = "read"})

func.func @model(%x: tensor<4xf32>) -> (tensor<4xi64>, tensor<4xi64>) {
  %scale = arith.constant dense<1000.0> : tensor<4xf32>
  %c = onnx.Cos %x : (tensor<4xf32>) -> tensor<4xf32>
  %s = onnx.Sin %x : (tensor<4xf32>) -> tensor<4xf32>
  %cs = onnx.Mul %c, %scale : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %ss = onnx.Mul %s, %scale : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %ci = onnx.Cast %cs {to = 7 : i64} : (tensor<4xf32>) -> tensor<4xi64>
  %si = onnx.Cast %ss {to = 7 : i64} : (tensor<4xf32>) -> tensor<4xi64>
  return %ci, %si : tensor<4xi64>, tensor<4xi64>
}

func.func @main() {
  %x = arith.constant dense<[0.0, 0.5, 1.0, 3.0]> : tensor<4xf32>
  %c, %s = call @model(%x) : (tensor<4xf32>) -> (tensor<4xi64>, tensor<4xi64>)
  %cu = tensor.cast %c : tensor<4xi64> to tensor<*xi64>
  %su = tensor.cast %s : tensor<4xi64> to tensor<*xi64>
  call @printMemrefI64(%cu) : (tensor<*xi64>) -> ()
  call @printMemrefI64(%su) : (tensor<*xi64>) -> ()
  return
}

// CHECK: sizes = [4] strides = [1] data =
// CHECK-NEXT: [1000, 877, 540, -989]
// CHECK: sizes = [4] strides = [1] data =
// CHECK-NEXT: [0, 479, 841, 141]
