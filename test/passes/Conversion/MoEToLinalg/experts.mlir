// RUN: moe-opt %s --convert-moe-to-linalg --split-input-file | FileCheck %s

// Dropless rows, G = 2E groups, a gated gelu (fc3) with every bias.

// CHECK-DAG: #[[$LHS:.+]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: #[[$RHS_T:.+]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG: #[[$OUT:.+]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @experts_dropless_gated_gelu
// CHECK-SAME: (%[[ROWS:.*]]: tensor<6x4xf32>, %[[COUNTS:.*]]: tensor<4xi32>, %[[W1:.*]]: tensor<2x5x4xf32>, %[[B1:.*]]: tensor<2x5xf32>, %[[W3:.*]]: tensor<2x5x4xf32>, %[[B3:.*]]: tensor<2x5xf32>, %[[W2:.*]]: tensor<2x3x5xf32>, %[[B2:.*]]: tensor<2x3xf32>)
// CHECK-NOT: moe.
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[ZEROS:.*]] = linalg.fill {{.*}} -> tensor<6x3xf32>
// CHECK-DAG: %[[NGROUPS:.*]] = arith.constant 4 : index
// CHECK: %[[LOOP:.*]]:2 = scf.for %[[G:.*]] = %[[C0]] to %[[NGROUPS]] step %{{.*}} iter_args(%[[ACC:.*]] = %[[ZEROS]], %[[BEGIN:.*]] = %[[C0]]) -> (tensor<6x3xf32>, index) {
// CHECK:   %[[COUNT_I32:.*]] = tensor.extract %[[COUNTS]][%[[G]]] : tensor<4xi32>
// CHECK:   %[[COUNT:.*]] = arith.index_cast %[[COUNT_I32]] : i32 to index
// CHECK:   %[[END:.*]] = arith.addi %[[BEGIN]], %[[COUNT]] : index
// CHECK:   %[[NONNEG:.*]] = arith.cmpi sge, %[[COUNT]], %[[C0]] : index
// CHECK:   cf.assert %[[NONNEG]], "moe.experts: a group has a negative row count"
// CHECK:   %[[FITS:.*]] = arith.cmpi sle, %[[END]], %{{.*}} : index
// CHECK:   cf.assert %[[FITS]], "moe.experts: the groups have more rows than the buffer"
// CHECK:   %[[X:.*]] = tensor.extract_slice %[[ROWS]][%[[BEGIN]], 0] [%[[COUNT]], 4] [1, 1] : tensor<6x4xf32> to tensor<?x4xf32>
// CHECK:   %[[E:.*]] = arith.remui %[[G]], %{{.*}} : index
// CHECK:   %[[W1E:.*]] = tensor.extract_slice %[[W1]][%[[E]], 0, 0] [1, 5, 4] [1, 1, 1] : tensor<2x5x4xf32> to tensor<5x4xf32>
// CHECK:   %[[B1E:.*]] = tensor.extract_slice %[[B1]][%[[E]], 0] [1, 5] [1, 1] : tensor<2x5xf32> to tensor<5xf32>
// CHECK:   %[[W3E:.*]] = tensor.extract_slice %[[W3]][%[[E]], 0, 0]
// CHECK:   %[[B3E:.*]] = tensor.extract_slice %[[B3]][%[[E]], 0]
// CHECK:   %[[W2E:.*]] = tensor.extract_slice %[[W2]][%[[E]], 0, 0] [1, 3, 5] [1, 1, 1] : tensor<2x3x5xf32> to tensor<3x5xf32>
// CHECK:   %[[B2E:.*]] = tensor.extract_slice %[[B2]][%[[E]], 0]
// CHECK:   %[[ACC1:.*]] = linalg.broadcast ins(%[[B1E]] : tensor<5xf32>) outs(%{{.*}} : tensor<?x5xf32>) dimensions = [0]
// CHECK:   %[[H1:.*]] = linalg.matmul indexing_maps = [#[[$LHS]], #[[$RHS_T]], #[[$OUT]]] {moe.expert_gemm} ins(%[[X]], %[[W1E]] : tensor<?x4xf32>, tensor<5x4xf32>) outs(%[[ACC1]] : tensor<?x5xf32>)
// CHECK:   %[[ACC3:.*]] = linalg.broadcast ins(%[[B3E]] : tensor<5xf32>)
// CHECK:   %[[H3:.*]] = linalg.matmul indexing_maps = [#[[$LHS]], #[[$RHS_T]], #[[$OUT]]] {moe.expert_gemm} ins(%[[X]], %[[W3E]] : {{.*}}) outs(%[[ACC3]] : tensor<?x5xf32>)
// CHECK:   %[[A:.*]] = linalg.generic {{.*}} ins(%[[H1]], %[[H3]] : tensor<?x5xf32>, tensor<?x5xf32>)
// CHECK:     math.erf
// CHECK:   %[[ACC2:.*]] = linalg.broadcast ins(%[[B2E]] : tensor<3xf32>)
// CHECK:   %[[Y:.*]] = linalg.matmul indexing_maps = [#[[$LHS]], #[[$RHS_T]], #[[$OUT]]] {moe.expert_gemm} ins(%[[A]], %[[W2E]] : tensor<?x5xf32>, tensor<3x5xf32>) outs(%[[ACC2]] : tensor<?x3xf32>)
// CHECK:   %[[NEXT:.*]] = tensor.insert_slice %[[Y]] into %[[ACC]][%[[BEGIN]], 0] [%[[COUNT]], 3] [1, 1] : tensor<?x3xf32> into tensor<6x3xf32>
// CHECK:   scf.yield %[[NEXT]], %[[END]] : tensor<6x3xf32>, index
// CHECK: return %[[LOOP]]#0 : tensor<6x3xf32>
func.func @experts_dropless_gated_gelu(
    %rows: tensor<6x4xf32>, %counts: tensor<4xi32>,
    %w1: tensor<2x5x4xf32>, %b1: tensor<2x5xf32>,
    %w3: tensor<2x5x4xf32>, %b3: tensor<2x5xf32>,
    %w2: tensor<2x3x5xf32>, %b2: tensor<2x3xf32>) -> tensor<6x3xf32> {
  %y = moe.experts %rows, %counts fc1(%w1, %b1) fc3(%w3) fc3_bias(%b3)
      fc2(%w2, %b2) activation <gelu>
      : (tensor<6x4xf32>, tensor<4xi32>, tensor<2x5x4xf32>, tensor<2x5xf32>,
         tensor<2x5x4xf32>, tensor<2x5xf32>, tensor<2x3x5xf32>,
         tensor<2x3xf32>) -> tensor<6x3xf32>
  return %y : tensor<6x3xf32>
}

// -----

// Capacity rows [G, C, H]: group g is the first counts[g] rows of block g; a
// separate SwiGLU (fc1 gate, fc3 linear), no biases.

// CHECK-LABEL: func.func @experts_capacity_swiglu
// CHECK-SAME: (%[[ROWS:.*]]: tensor<4x3x4xf32>, %[[COUNTS:.*]]: tensor<4xi32>, %[[W1:.*]]: tensor<2x5x4xf32>, %[[W3:.*]]: tensor<2x5x4xf32>, %[[W2:.*]]: tensor<2x3x5xf32>)
// CHECK-NOT: moe.
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[ZEROS:.*]] = linalg.fill {{.*}} -> tensor<4x3x3xf32>
// CHECK: %[[LOOP:.*]] = scf.for %[[G:.*]] = %[[C0]] to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %[[ZEROS]]) -> (tensor<4x3x3xf32>) {
// CHECK:   %[[COUNT:.*]] = arith.index_cast
// CHECK:   cf.assert %{{.*}}, "moe.experts: a group has a negative row count"
// CHECK:   %[[C3:.*]] = arith.constant 3 : index
// CHECK:   %[[FITS:.*]] = arith.cmpi sle, %[[COUNT]], %[[C3]] : index
// CHECK:   cf.assert %[[FITS]], "moe.experts: a group has more rows than the capacity"
// CHECK:   %[[X:.*]] = tensor.extract_slice %[[ROWS]][%[[G]], %[[C0]], 0] [1, %[[COUNT]], 4] [1, 1, 1] : tensor<4x3x4xf32> to tensor<?x4xf32>
// CHECK:   %[[H1:.*]] = linalg.matmul {{.*}} ins(%[[X]], %{{.*}} : tensor<?x4xf32>, tensor<5x4xf32>)
// CHECK:   %[[H3:.*]] = linalg.matmul {{.*}} ins(%[[X]], %{{.*}} : tensor<?x4xf32>, tensor<5x4xf32>)
// CHECK:   %[[A:.*]] = linalg.generic {{.*}} ins(%[[H1]], %[[H3]] : tensor<?x5xf32>, tensor<?x5xf32>)
// CHECK:     math.exp
// CHECK:   %[[Y:.*]] = linalg.matmul {{.*}} ins(%[[A]], %{{.*}} : tensor<?x5xf32>, tensor<3x5xf32>)
// CHECK:   %[[NEXT:.*]] = tensor.insert_slice %[[Y]] into %[[ACC]][%[[G]], %[[C0]], 0] [1, %[[COUNT]], 3] [1, 1, 1] : tensor<?x3xf32> into tensor<4x3x3xf32>
// CHECK:   scf.yield %[[NEXT]] : tensor<4x3x3xf32>
// CHECK: return %[[LOOP]] : tensor<4x3x3xf32>
func.func @experts_capacity_swiglu(
    %rows: tensor<4x3x4xf32>, %counts: tensor<4xi32>,
    %w1: tensor<2x5x4xf32>, %w3: tensor<2x5x4xf32>,
    %w2: tensor<2x3x5xf32>) -> tensor<4x3x3xf32> {
  %y = moe.experts %rows, %counts fc1(%w1) fc3(%w3) fc2(%w2)
      activation <swiglu>
      : (tensor<4x3x4xf32>, tensor<4xi32>, tensor<2x5x4xf32>,
         tensor<2x5x4xf32>, tensor<2x3x5xf32>) -> tensor<4x3x3xf32>
  return %y : tensor<4x3x3xf32>
}

// -----

// An interleaved SwiGLU (GPT-OSS): the gate and linear halves are the even
// and odd columns of the 2F-wide fc1 output; alpha, beta and limit.

// CHECK-LABEL: func.func @experts_swiglu_interleaved
// CHECK-NOT: moe.
// CHECK: scf.for
// CHECK:   %[[H1:.*]] = linalg.matmul {{.*}} -> tensor<?x10xf32>
// CHECK:   %[[N:.*]] = tensor.dim %[[H1]], %{{.*}} : tensor<?x10xf32>
// CHECK:   %[[GATE:.*]] = tensor.extract_slice %[[H1]][0, 0] [%[[N]], 5] [1, 2] : tensor<?x10xf32> to tensor<?x5xf32>
// CHECK:   %[[LIN:.*]] = tensor.extract_slice %[[H1]][0, 1] [%[[N]], 5] [1, 2] : tensor<?x10xf32> to tensor<?x5xf32>
// CHECK:   linalg.generic {{.*}} ins(%[[GATE]], %[[LIN]] : tensor<?x5xf32>, tensor<?x5xf32>)
// CHECK:   ^bb0(%[[G:.*]]: f32, %[[L:.*]]: f32, %{{.*}}: f32):
// CHECK:     %[[LIMIT:.*]] = arith.constant 7.000000e+00 : f32
// CHECK:     %[[GC:.*]] = arith.minimumf %[[G]], %[[LIMIT]] : f32
// CHECK:     %[[LC:.*]] = arith.minimumf %[[L]], %{{.*}} : f32
// CHECK:     %[[NEG_LIMIT:.*]] = arith.constant -7.000000e+00 : f32
// CHECK:     %[[LCC:.*]] = arith.maximumf %[[LC]], %[[NEG_LIMIT]] : f32
// CHECK:     %[[ALPHA:.*]] = arith.constant 1.702000e+00 : f32
// CHECK:     %[[SCALED:.*]] = arith.mulf %[[ALPHA]], %[[GC]] : f32
// CHECK:     %[[BETA:.*]] = arith.constant 1.000000e+00 : f32
// CHECK:     %[[LB:.*]] = arith.addf %[[LCC]], %[[BETA]] : f32
// CHECK:     math.exp
// CHECK:     %[[GLU:.*]] = arith.mulf %[[GC]], %{{.*}} : f32
// CHECK:     %[[OUT:.*]] = arith.mulf %[[GLU]], %[[LB]] : f32
// CHECK:     linalg.yield %[[OUT]] : f32
// CHECK:   linalg.matmul
// CHECK:   tensor.insert_slice
func.func @experts_swiglu_interleaved(
    %rows: tensor<6x4xf32>, %counts: tensor<2xi32>,
    %w1: tensor<2x10x4xf32>, %w2: tensor<2x3x5xf32>) -> tensor<6x3xf32> {
  %y = moe.experts %rows, %counts fc1(%w1) fc2(%w2)
      activation <swiglu, interleaved, alpha = 1.702, beta = 1.0, limit = 7.0>
      : (tensor<6x4xf32>, tensor<2xi32>, tensor<2x10x4xf32>,
         tensor<2x3x5xf32>) -> tensor<6x3xf32>
  return %y : tensor<6x3xf32>
}

// -----

// A concatenated SwiGLU (Hugging Face gate_up_proj): g = h1[:, :F],
// l = h1[:, F:]; the defaults alpha = 1, beta = 0 and no limit add no ops.

// CHECK-LABEL: func.func @experts_swiglu_concatenated
// CHECK-NOT: moe.
// CHECK: scf.for
// CHECK:   %[[H1:.*]] = linalg.matmul {{.*}} -> tensor<?x10xf32>
// CHECK:   %[[GATE:.*]] = tensor.extract_slice %[[H1]][0, 0] [%{{.*}}, 5] [1, 1] : tensor<?x10xf32> to tensor<?x5xf32>
// CHECK:   %[[LIN:.*]] = tensor.extract_slice %[[H1]][0, 5] [%{{.*}}, 5] [1, 1] : tensor<?x10xf32> to tensor<?x5xf32>
// CHECK:   linalg.generic {{.*}} ins(%[[GATE]], %[[LIN]] : tensor<?x5xf32>, tensor<?x5xf32>)
// CHECK:   ^bb0(%[[G:.*]]: f32, %[[L:.*]]: f32, %{{.*}}: f32):
// CHECK-NOT:  arith.minimumf
// CHECK-NOT:  arith.maximumf
// CHECK:     %[[NEG:.*]] = arith.negf %[[G]] : f32
// CHECK:     %[[EXP:.*]] = math.exp %[[NEG]] : f32
// CHECK:     %[[SIG:.*]] = arith.divf
// CHECK:     %[[GLU:.*]] = arith.mulf %[[G]], %[[SIG]] : f32
// CHECK:     %[[OUT:.*]] = arith.mulf %[[GLU]], %[[L]] : f32
// CHECK:     linalg.yield %[[OUT]] : f32
// CHECK:   linalg.matmul
// CHECK:   tensor.insert_slice
func.func @experts_swiglu_concatenated(
    %rows: tensor<6x4xf32>, %counts: tensor<2xi32>,
    %w1: tensor<2x10x4xf32>, %b1: tensor<2x10xf32>,
    %w2: tensor<2x3x5xf32>) -> tensor<6x3xf32> {
  %y = moe.experts %rows, %counts fc1(%w1, %b1) fc2(%w2)
      activation <swiglu, concatenated>
      : (tensor<6x4xf32>, tensor<2xi32>, tensor<2x10x4xf32>,
         tensor<2x10xf32>, tensor<2x3x5xf32>) -> tensor<6x3xf32>
  return %y : tensor<6x3xf32>
}

// -----

// The shared expert: one FFN on every token, no loop, scaled per token by
// sigmoid(x g^T).

// CHECK-DAG: #[[$LHS:.+]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: #[[$RHS_T:.+]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG: #[[$OUT:.+]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG: #[[$ID:.+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[$ROW:.+]] = affine_map<(d0, d1) -> (d0, 0)>
// CHECK-LABEL: func.func @shared_expert_gate
// CHECK-SAME: (%[[X:.*]]: tensor<5x4xf32>, %[[W1:.*]]: tensor<6x4xf32>, %[[B1:.*]]: tensor<6xf32>, %[[W2:.*]]: tensor<3x6xf32>, %[[GATE:.*]]: tensor<1x4xf32>)
// CHECK-NOT: moe.
// CHECK-NOT: scf.for
// CHECK: %[[ACC1:.*]] = linalg.broadcast ins(%[[B1]] : tensor<6xf32>) outs(%{{.*}} : tensor<5x6xf32>) dimensions = [0]
// CHECK: %[[H1:.*]] = linalg.matmul indexing_maps = [#[[$LHS]], #[[$RHS_T]], #[[$OUT]]] {moe.expert_gemm} ins(%[[X]], %[[W1]] : tensor<5x4xf32>, tensor<6x4xf32>) outs(%[[ACC1]] : tensor<5x6xf32>)
// CHECK: %[[A:.*]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$ID]]], {{.*}}} ins(%[[H1]] : tensor<5x6xf32>)
// CHECK:   math.tanh
// CHECK: %[[ZEROS:.*]] = linalg.fill {{.*}} -> tensor<5x3xf32>
// CHECK: %[[Y:.*]] = linalg.matmul indexing_maps = [#[[$LHS]], #[[$RHS_T]], #[[$OUT]]] {moe.expert_gemm} ins(%[[A]], %[[W2]] : tensor<5x6xf32>, tensor<3x6xf32>) outs(%[[ZEROS]] : tensor<5x3xf32>)
// CHECK: %[[LOGIT:.*]] = linalg.matmul indexing_maps = [#[[$LHS]], #[[$RHS_T]], #[[$OUT]]] {moe.expert_gemm} ins(%[[X]], %[[GATE]] : tensor<5x4xf32>, tensor<1x4xf32>) outs(%{{.*}} : tensor<5x1xf32>)
// CHECK: %[[OUTPUT:.*]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$ROW]], #[[$ID]]], {{.*}}} ins(%[[Y]], %[[LOGIT]] : tensor<5x3xf32>, tensor<5x1xf32>)
// CHECK: ^bb0(%[[YV:.*]]: f32, %[[LV:.*]]: f32, %{{.*}}: f32):
// CHECK:   arith.negf %[[LV]]
// CHECK:   math.exp
// CHECK:   %[[SIG:.*]] = arith.divf
// CHECK:   %[[SCALED:.*]] = arith.mulf %[[YV]], %[[SIG]] : f32
// CHECK:   linalg.yield %[[SCALED]] : f32
// CHECK: return %[[OUTPUT]] : tensor<5x3xf32>
func.func @shared_expert_gate(
    %x: tensor<5x4xf32>, %w1: tensor<6x4xf32>, %b1: tensor<6xf32>,
    %w2: tensor<3x6xf32>, %gate: tensor<1x4xf32>) -> tensor<5x3xf32> {
  %y = moe.shared_expert %x fc1(%w1, %b1) fc2(%w2) gate(%gate)
      activation <gelu_tanh>
      : (tensor<5x4xf32>, tensor<6x4xf32>, tensor<6xf32>, tensor<3x6xf32>,
         tensor<1x4xf32>) -> tensor<5x3xf32>
  return %y : tensor<5x3xf32>
}

// -----

// A custom activation's body is inlined into the activation's generic, and
// the body, named by no op any more, is erased.
// CHECK-NOT: func.func private @relu2
// CHECK-LABEL: func.func @experts_custom
// CHECK:   %[[H1:.*]] = linalg.matmul {{.*}} {moe.expert_gemm}
// CHECK:   linalg.generic {{.*}} ins(%[[H1]] : tensor<?x5xf32>)
// CHECK:     ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK:       %[[R:.*]] = arith.maximumf %[[IN]], %{{.*}} : f32
// CHECK:       %[[Y:.*]] = math.powf %[[R]], %{{.*}} : f32
// CHECK:       linalg.yield %[[Y]] : f32
// CHECK-NOT: func.func private @relu2
func.func private @relu2(%x: f32) -> f32 attributes {moe.activation_body} {
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.0 : f32
  %r = arith.maximumf %x, %zero : f32
  %y = math.powf %r, %two : f32
  return %y : f32
}
func.func @experts_custom(%rows: tensor<6x4xf32>, %counts: tensor<2xi32>,
    %w1: tensor<2x5x4xf32>, %w2: tensor<2x3x5xf32>) -> tensor<6x3xf32> {
  %0 = moe.experts %rows, %counts fc1(%w1) fc2(%w2) activation <custom @relu2>
      : (tensor<6x4xf32>, tensor<2xi32>, tensor<2x5x4xf32>, tensor<2x3x5xf32>) -> tensor<6x3xf32>
  return %0 : tensor<6x3xf32>
}
