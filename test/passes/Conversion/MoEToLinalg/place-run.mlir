// The replica rule, run: the i-th choice of expert e (in token, choice
// order) takes replica i mod c_e of e's slots in ascending order; unrouted
// (-1) and unknown ids give -1; moe.slot_weights gathers rows by slot.
// RUN: moe-opt %s --moe-lower-to-llvm > %t.ll.mlir
// RUN: mlir-runner %t.ll.mlir -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s

func.func private @printMemrefI32(tensor<*xi32>)
func.func private @printMemrefF32(tensor<*xf32>)

// 3 experts on 6 slots: expert 0 on slots 0, 3 and 5, expert 1 on 1 and 4,
// expert 2 on 2. Expert 0 is every token's first choice: a rule on t*k+j
// would send all of them to one slot.
// CHECK: [0,   1]
// CHECK: [3,   4]
// CHECK: [5,   2]
// CHECK: [0,   1]
// CHECK: [3,   -1]
// CHECK: [5,   -1]
func.func @main() {
  %ids = arith.constant dense<[[0, 1], [0, 1], [0, 2], [0, 1], [0, -1], [0, 7]]> : tensor<6x2xi32>
  %t = arith.constant dense<[0, 1, 2, 0, 1, 0]> : tensor<6xi32>
  %s = moe.place %ids, %t : tensor<6x2xi32>, tensor<6xi32>
  %u = tensor.cast %s : tensor<6x2xi32> to tensor<*xi32>
  call @printMemrefI32(%u) : (tensor<*xi32>) -> ()
  // CHECK: [1,   2]
  // CHECK: [3,   4]
  // CHECK: [5,   6]
  // CHECK: [1,   2]
  %w = arith.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>
  %c = arith.constant dense<[0, 1, 2, 0]> : tensor<4xi32>
  %r = moe.slot_weights %w[%c] : (tensor<3x2xf32>, tensor<4xi32>) -> tensor<4x2xf32>
  %v = tensor.cast %r : tensor<4x2xf32> to tensor<*xf32>
  call @printMemrefF32(%v) : (tensor<*xf32>) -> ()
  return
}
