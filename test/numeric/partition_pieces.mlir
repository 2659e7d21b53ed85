// The pieces moe-partition adds, run on one rank: expert counts, row
// gathers (token shuffle) and capacity dispatch of a shard that comes after
// earlier tokens (offsets).
// RUN: moe-opt %s --moe-lower-to-llvm | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s

func.func private @printMemrefI32(tensor<*xi32>)
func.func private @printMemrefF32(tensor<*xf32>)
func.func private @printMemrefI64(tensor<*xi64>)

func.func @main() {
  %ids = arith.constant dense<[[0, 2], [2, -1], [3, 2]]> : tensor<3x2xi32>
  %counts = moe.expert_counts %ids : tensor<3x2xi32> -> tensor<4xi32>
  %c = tensor.cast %counts : tensor<4xi32> to tensor<*xi32>
  // CHECK: [1,  0,  3,  1]
  call @printMemrefI32(%c) : (tensor<*xi32>) -> ()

  %x = arith.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>
  %idx = arith.constant dense<[2, 0, 7]> : tensor<3xi32>
  %g = moe.gather_rows %x[%idx] : (tensor<3x2xf32>, tensor<3xi32>) -> tensor<3x2xf32>
  %gp = tensor.cast %g : tensor<3x2xf32> to tensor<*xf32>
  // CHECK: [5,   6]
  // CHECK-NEXT: [1,   2]
  // CHECK-NEXT: [0,   0]
  call @printMemrefF32(%gp) : (tensor<*xf32>) -> ()

  // Expert 0 already holds 2 of its 3 rows from earlier shards: only token 0
  // fits; tokens 1 and 3 are dropped. Expert 1 holds none before.
  %tok = arith.constant dense<[[1.0], [2.0], [3.0], [4.0]]> : tensor<4x1xf32>
  %route = arith.constant dense<[[0], [0], [1], [0]]> : tensor<4x1xi32>
  %before = arith.constant dense<[2, 0]> : tensor<2xi32>
  %rows, %slots, %kept, %dropped = moe.dispatch %tok, %route capacity 3 drop position after %before
      : (tensor<4x1xf32>, tensor<4x1xi32>, tensor<2xi32>)
     -> (tensor<2x3x1xf32>, tensor<4x1xi32>, tensor<2xi32>, tensor<i64>)
  %s = tensor.cast %slots : tensor<4x1xi32> to tensor<*xi32>
  // CHECK: [0]
  // CHECK-NEXT: [-1]
  // CHECK-NEXT: [3]
  // CHECK-NEXT: [-1]
  call @printMemrefI32(%s) : (tensor<*xi32>) -> ()
  %k = tensor.cast %kept : tensor<2xi32> to tensor<*xi32>
  // CHECK: [1,  1]
  call @printMemrefI32(%k) : (tensor<*xi32>) -> ()
  %d = tensor.cast %dropped : tensor<i64> to tensor<*xi64>
  // CHECK: [2]
  call @printMemrefI64(%d) : (tensor<*xi64>) -> ()
  %r = tensor.collapse_shape %rows [[0, 1], [2]] : tensor<2x3x1xf32> into tensor<6x1xf32>
  %rp = tensor.cast %r : tensor<6x1xf32> to tensor<*xf32>
  // CHECK: [1]
  // CHECK-NEXT: [0]
  // CHECK-NEXT: [0]
  // CHECK-NEXT: [3]
  // CHECK-NEXT: [0]
  // CHECK-NEXT: [0]
  call @printMemrefF32(%rp) : (tensor<*xf32>) -> ()
  return
}
