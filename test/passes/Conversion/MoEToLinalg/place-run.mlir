// The replica rule, run. A rank's choices of an expert go to its first slot
// on that rank if it holds one, else the ranks holding none take the
// expert's slots in turn (ascending); unrouted (-1) and unknown ids give -1.
// moe.slot_weights gathers rows by slot, and moe.slot_grad_sum on one rank
// gives every slot `0 + ` the part of its expert's first slot.
// RUN: moe-opt %s --moe-lower-to-llvm > %t.ll.mlir
// RUN: mlir-runner %t.ll.mlir -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s

func.func private @printMemrefI32(tensor<*xi32>)
func.func private @printMemrefF32(tensor<*xf32>)

func.func @show(%s: tensor<2x2xi32>) {
  %u = tensor.cast %s : tensor<2x2xi32> to tensor<*xi32>
  call @printMemrefI32(%u) : (tensor<*xi32>) -> ()
  return
}

func.func @main() {
  // One rank, 3 experts on 6 slots: expert 0 on slots 0, 3 and 5, expert 1
  // on 1 and 4, expert 2 on 2. Every choice takes its expert's first slot.
  // CHECK: [0,   1]
  // CHECK: [0,   2]
  // CHECK: [0,   -1]
  // CHECK: [2,   -1]
  %ids = arith.constant dense<[[0, 1], [0, 2], [0, -1], [2, 7]]> : tensor<4x2xi32>
  %t = arith.constant dense<[0, 1, 2, 0, 1, 0]> : tensor<6xi32>
  %s = moe.place %ids, %t : tensor<4x2xi32>, tensor<6xi32>
  %u = tensor.cast %s : tensor<4x2xi32> to tensor<*xi32>
  call @printMemrefI32(%u) : (tensor<*xi32>) -> ()

  // 4 ranks of 2 slots: rank 0 holds experts 0, 1; rank 1 2, 3; rank 2 0,
  // 3; rank 3 1, 2. From rank 1: expert 0 is held by ranks 0 and 2, and
  // rank 1 is the first rank holding none (turn 0: slot 0); 2 and 3 are
  // its own. From rank 3: turn 1 for expert 0 (slot 4) and expert 3 (slot
  // 5); 1 and 2 its own. From rank 0: its own 0 and 1, turn 0 for 2 and 3.
  %ids4 = arith.constant dense<[[0, 1], [2, 3]]> : tensor<2x2xi32>
  %t4 = arith.constant dense<[0, 1, 2, 3, 0, 3, 1, 2]> : tensor<8xi32>
  %r0 = arith.constant 0 : index
  %r1 = arith.constant 1 : index
  %r3 = arith.constant 3 : index
  // CHECK: [0,   1]
  // CHECK: [2,   3]
  %s1 = moe.place %ids4, %t4 source %r1 ranks 4 : tensor<2x2xi32>, tensor<8xi32>
  call @show(%s1) : (tensor<2x2xi32>) -> ()
  // CHECK: [4,   6]
  // CHECK: [7,   5]
  %s3 = moe.place %ids4, %t4 source %r3 ranks 4 : tensor<2x2xi32>, tensor<8xi32>
  call @show(%s3) : (tensor<2x2xi32>) -> ()
  // CHECK: [0,   1]
  // CHECK: [2,   3]
  %s0 = moe.place %ids4, %t4 source %r0 ranks 4 : tensor<2x2xi32>, tensor<8xi32>
  call @show(%s0) : (tensor<2x2xi32>) -> ()

  // CHECK: [1,   2]
  // CHECK: [3,   4]
  // CHECK: [5,   6]
  // CHECK: [1,   2]
  %w = arith.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>
  %c = arith.constant dense<[0, 1, 2, 0]> : tensor<4xi32>
  %r = moe.slot_weights %w[%c] : (tensor<3x2xf32>, tensor<4xi32>) -> tensor<4x2xf32>
  %v = tensor.cast %r : tensor<4x2xf32> to tensor<*xf32>
  call @printMemrefF32(%v) : (tensor<*xf32>) -> ()

  // Slots 3 and 5 take slot 0's part, slot 4 slot 1's; -0 becomes 0 as
  // moe.experts_grad's first addition makes it.
  // CHECK: [0,   2]
  // CHECK: [3,   4]
  // CHECK: [5,   6]
  // CHECK: [0,   2]
  // CHECK: [3,   4]
  // CHECK: [0,   2]
  %parts = arith.constant dense<[[-0.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0], [9.0, 10.0], [11.0, 12.0]]> : tensor<6x2xf32>
  %g = moe.slot_grad_sum %parts, %t : (tensor<6x2xf32>, tensor<6xi32>) -> tensor<6x2xf32>
  %gv = tensor.cast %g : tensor<6x2xf32> to tensor<*xf32>
  call @printMemrefF32(%gv) : (tensor<*xf32>) -> ()
  return
}
