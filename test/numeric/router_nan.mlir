// RUN: moe-opt %s --moe-lower-to-llvm | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s
//
// NaN values are never chosen: a slot left with nothing to choose gets id -1
// and weight 0, and an expert_choice expert with fewer tokens to choose from
// than its capacity takes those it has.

func.func private @printMemrefI32(tensor<*xi32>)
func.func private @printMemrefF32(tensor<*xf32>)

func.func @main() {
  // Top-3 of sigmoid scores: row 0 has two NaN logits, row 1 one finite
  // score among -inf (sigmoid 0: still chosen, by lower index), row 2 ties
  // everywhere, row 3 one finite logit among NaN.
  %l = arith.constant dense<[[0x7FC00000, 1.0, 0x7FC00000, 2.0],
                              [0xFF800000, 0xFF800000, 3.0, 0xFF800000],
                              [1.0, 1.0, 1.0, 1.0],
                              [0x7FC00000, 0x7FC00000, 0x7FC00000, 5.0]]> : tensor<4x4xf32>
  %ids, %w = moe.router sigmoid topk %l : tensor<4x4xf32> -> tensor<4x3xi32>, tensor<4x3xf32>
  %ids_u = tensor.cast %ids : tensor<4x3xi32> to tensor<*xi32>
  call @printMemrefI32(%ids_u) : (tensor<*xi32>) -> ()
  %w_u = tensor.cast %w : tensor<4x3xf32> to tensor<*xf32>
  call @printMemrefF32(%w_u) : (tensor<*xf32>) -> ()

  // Group-limited top-3 of 2 groups of 2, the better group kept, the other
  // masked to 0.0 (Hugging Face's DeepSeek): expert 0's NaN stays NaN, so
  // the third pick is expert 1 (weighted by its score), never expert 0.
  %g = arith.constant dense<[[0x7FC00000, 0.5, 3.0, 2.0]]> : tensor<1x4xf32>
  %gids, %gw = moe.router sigmoid grouped_topk %g groups 2 top 1 by max masked = 0.0
      : tensor<1x4xf32> -> tensor<1x3xi32>, tensor<1x3xf32>
  %gids_u = tensor.cast %gids : tensor<1x3xi32> to tensor<*xi32>
  call @printMemrefI32(%gids_u) : (tensor<*xi32>) -> ()
  %gw_u = tensor.cast %gw : tensor<1x3xf32> to tensor<*xf32>
  call @printMemrefF32(%gw_u) : (tensor<*xf32>) -> ()

  // Expert choice, capacity 4 of 4 tokens: token 1's NaN logit makes its
  // softmax row NaN, so both experts take the 3 others.
  %e = arith.constant dense<[[0.0, 0.0], [0x7FC00000, 0.0], [0.0, 0.0], [3.0, 0.0]]> : tensor<4x2xf32>
  %eids, %ew = moe.router softmax expert_choice %e capacity 4 : tensor<4x2xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  %eids_u = tensor.cast %eids : tensor<4x2xi32> to tensor<*xi32>
  call @printMemrefI32(%eids_u) : (tensor<*xi32>) -> ()
  return
}

// CHECK:      [3,   1,   -1]
// CHECK-NEXT: [2,   0,   1]
// CHECK-NEXT: [0,   1,   2]
// CHECK-NEXT: [3,   -1,   -1]
// CHECK:      [0.880797,   0.731059,   0]
// CHECK-NEXT: [0.952574,   0,   0]
// CHECK-NEXT: [0.731059,   0.731059,   0.731059]
// CHECK-NEXT: [0.993307,   0,   0]
// CHECK:      [2,   3,   1]
// CHECK:      [0.952574,   0.880797,   0.622459]
// CHECK:      [0,   1]
// CHECK-NEXT: [-1,   -1]
// CHECK-NEXT: [0,   1]
// CHECK-NEXT: [0,   1]
