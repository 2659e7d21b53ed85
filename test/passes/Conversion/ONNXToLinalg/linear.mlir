// RUN: moe-opt %s --convert-onnx-to-linalg --split-input-file | FileCheck %s

// MatMul is one contraction over loops (batch..., m, n, k) into zeros.

// CHECK-DAG:   #[[LHS:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG:   #[[RHS:.*]] = affine_map<(d0, d1, d2) -> (d2, d1)>
// CHECK-DAG:   #[[OUT:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @matmul(
// CHECK-SAME:      %[[A:.*]]: tensor<3x4xf32>, %[[B:.*]]: tensor<4x2xf32>)
// CHECK-DAG:     %[[EMPTY:.*]] = tensor.empty() : tensor<3x2xf32>
// CHECK-DAG:     %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:         %[[INIT:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[EMPTY]] : tensor<3x2xf32>)
// CHECK:         %[[C:.*]] = linalg.generic {indexing_maps = [#[[LHS]], #[[RHS]], #[[OUT]]], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME:        ins(%[[A]], %[[B]] : tensor<3x4xf32>, tensor<4x2xf32>) outs(%[[INIT]] : tensor<3x2xf32>)
// CHECK-NEXT:    ^bb0(%[[X:.*]]: f32, %[[Y:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK-NEXT:      %[[P:.*]] = arith.mulf %[[X]], %[[Y]] : f32
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[ACC]], %[[P]] : f32
// CHECK-NEXT:      linalg.yield %[[S]] : f32
// CHECK:         return %[[C]]
func.func @matmul(%a: tensor<3x4xf32>, %b: tensor<4x2xf32>) -> tensor<3x2xf32> {
  %0 = onnx.MatMul %a, %b : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

// Batch dims broadcast: lhs's size-1 batch dim reads 0, rhs has no first one.

// CHECK-DAG:   #[[LHS:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, 0, d2, d4)>
// CHECK-DAG:   #[[RHS:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d1, d4, d3)>
// CHECK-DAG:   #[[OUT:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
// CHECK-LABEL: func.func @matmul_batch_broadcast(
// CHECK:         linalg.generic {indexing_maps = [#[[LHS]], #[[RHS]], #[[OUT]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
func.func @matmul_batch_broadcast(%a: tensor<2x1x3x4xf32>, %b: tensor<5x4x2xf32>) -> tensor<2x5x3x2xf32> {
  %0 = onnx.MatMul %a, %b : (tensor<2x1x3x4xf32>, tensor<5x4x2xf32>) -> tensor<2x5x3x2xf32>
  return %0 : tensor<2x5x3x2xf32>
}

// -----

// A 1-D lhs is a row whose dim the result drops: no m loop.

// CHECK-DAG:   #[[LHS:.*]] = affine_map<(d0, d1, d2) -> (d2)>
// CHECK-DAG:   #[[RHS:.*]] = affine_map<(d0, d1, d2) -> (d0, d2, d1)>
// CHECK-DAG:   #[[OUT:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @matmul_vector(
// CHECK:         linalg.generic {indexing_maps = [#[[LHS]], #[[RHS]], #[[OUT]]], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME:        outs(%{{.*}} : tensor<2x3xf32>)
func.func @matmul_vector(%v: tensor<4xf32>, %b: tensor<2x4x3xf32>) -> tensor<2x3xf32> {
  %0 = onnx.MatMul %v, %b : (tensor<4xf32>, tensor<2x4x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Gemm reads transposed operands through their maps, then alpha and
// beta * C (broadcast over rows) in one map.

// CHECK-DAG:   #[[AT:.*]] = affine_map<(d0, d1, d2) -> (d2, d0)>
// CHECK-DAG:   #[[BT:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG:   #[[C:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @gemm(
// CHECK-SAME:      %[[A:.*]]: tensor<4x3xf32>, %[[B:.*]]: tensor<2x4xf32>, %[[BIAS:.*]]: tensor<2xf32>)
// CHECK:         %[[P:.*]] = linalg.generic {indexing_maps = [#[[AT]], #[[BT]], #{{.*}}]
// CHECK-SAME:        ins(%[[A]], %[[B]] :
// CHECK:         linalg.generic {indexing_maps = [#{{.*}}, #[[C]], #{{.*}}], {{.*}} ins(%[[P]], %[[BIAS]] : tensor<3x2xf32>, tensor<2xf32>)
// CHECK-NEXT:    ^bb0(%[[X:.*]]: f32, %[[Y:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[ALPHA:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-NEXT:      %[[AX:.*]] = arith.mulf %[[X]], %[[ALPHA]] : f32
// CHECK-NEXT:      %[[BETA:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:      %[[BY:.*]] = arith.mulf %[[Y]], %[[BETA]] : f32
// CHECK-NEXT:      arith.addf %[[AX]], %[[BY]] : f32
func.func @gemm(%a: tensor<4x3xf32>, %b: tensor<2x4xf32>, %c: tensor<2xf32>) -> tensor<3x2xf32> {
  %0 = onnx.Gemm %a, %b, %c {alpha = 5.000000e-01 : f32, beta = 2.000000e+00 : f32, transA = 1 : i64, transB = 1 : i64} : (tensor<4x3xf32>, tensor<2x4xf32>, tensor<2xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

// Einsum: one loop per letter in order of appearance (b, i, j, k); j, not
// in the output, reduces.

// CHECK-DAG:   #[[A:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-DAG:   #[[B:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>
// CHECK-DAG:   #[[OUT:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
// CHECK-LABEL: func.func @einsum_batched(
// CHECK:         linalg.generic {indexing_maps = [#[[A]], #[[B]], #[[OUT]]], iterator_types = ["parallel", "parallel", "reduction", "parallel"]}
// CHECK:           arith.mulf
// CHECK:           arith.addf
func.func @einsum_batched(%a: tensor<2x3x4xf32>, %b: tensor<2x4x5xf32>) -> tensor<2x3x5xf32> {
  %0 = onnx.Einsum %a, %b {equation = "bij,bjk->bik"} : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  return %0 : tensor<2x3x5xf32>
}

// -----

// The ellipsis gets loops of its own, first.

// CHECK-DAG:   #[[IN:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG:   #[[OUT:.*]] = affine_map<(d0, d1, d2) -> (d0, d2, d1)>
// CHECK-LABEL: func.func @einsum_ellipsis(
// CHECK:         linalg.generic {indexing_maps = [#[[IN]], #[[OUT]]], iterator_types = ["parallel", "parallel", "parallel"]}
func.func @einsum_ellipsis(%a: tensor<2x3x4xf32>) -> tensor<2x4x3xf32> {
  %0 = onnx.Einsum %a {equation = "...ij->...ji"} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32>
  return %0 : tensor<2x4x3xf32>
}

// -----

// Implicit output: the letters that appear once (none): the trace.

// CHECK-DAG:   #[[DIAG:.*]] = affine_map<(d0) -> (d0, d0)>
// CHECK-DAG:   #[[SCALAR:.*]] = affine_map<(d0) -> ()>
// CHECK-LABEL: func.func @einsum_trace(
// CHECK:         linalg.generic {indexing_maps = [#[[DIAG]], #[[SCALAR]]], iterator_types = ["reduction"]}
// CHECK:           arith.addi
func.func @einsum_trace(%a: tensor<3x3xi64>) -> tensor<i64> {
  %0 = onnx.Einsum %a {equation = "ii"} : (tensor<3x3xi64>) -> tensor<i64>
  return %0 : tensor<i64>
}
