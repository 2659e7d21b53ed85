// ONNX Runtime contrib ops become standard onnx ops at import (graphs made by
// Inputs/make_ort_contrib.py; test/e2e/ort_contrib.test runs them against
// ONNX Runtime's outputs). No com.microsoft op is left.
// RUN: moe-translate --import-onnx %S/Inputs/ort_contrib_skip_sln.onnx | FileCheck %s --check-prefix=SKIP --implicit-check-not=com.microsoft
// RUN: moe-translate --import-onnx %S/Inputs/ort_contrib_fused_matmul.onnx | FileCheck %s --check-prefix=FUSED --implicit-check-not=com.microsoft
// RUN: moe-translate --import-onnx %S/Inputs/ort_contrib_mha.onnx | FileCheck %s --check-prefix=MHA --implicit-check-not=com.microsoft
// RUN: moe-translate --import-onnx %S/Inputs/ort_contrib_rotary_partial.onnx | FileCheck %s --check-prefix=ROPE --implicit-check-not=com.microsoft
// RUN: moe-translate --import-onnx %S/Inputs/ort_contrib_gelu.onnx | FileCheck %s --check-prefix=GELU --implicit-check-not=com.microsoft

// SkipSimplifiedLayerNormalization: input 3 is the bias; output 3 is the sum.
// SKIP-LABEL: func.func @main_graph(
// SKIP-SAME:      %[[X:.*]]: tensor<2x3x8xf32> {onnx.name = "x"}, %[[S:.*]]: tensor<3x8xf32> {onnx.name = "skip"})
// SKIP-DAG:     %[[EPS:.*]] = arith.constant dense<9.99999997E-7> : tensor<f32>
// SKIP:         %[[XS:.*]] = onnx.Add %[[X]], %[[S]] : (tensor<2x3x8xf32>, tensor<3x8xf32>) -> tensor<2x3x8xf32>
// SKIP:         %[[SUM:.*]] = onnx.Add %[[XS]], %{{.*}} : (tensor<2x3x8xf32>, tensor<8xf32>)
// SKIP:         %[[SQ:.*]] = onnx.Mul %[[SUM]], %[[SUM]]
// SKIP:         %[[MS:.*]] = onnx.ReduceMean %[[SQ]], %{{.*}} {keepdims = 1 : i64} {{.*}} -> tensor<2x3x1xf32>
// SKIP:         %[[VE:.*]] = onnx.Add %[[MS]], %[[EPS]]
// SKIP:         %[[SD:.*]] = onnx.Sqrt %[[VE]]
// SKIP:         %[[N:.*]] = onnx.Div %[[SUM]], %[[SD]]
// SKIP:         %[[Y:.*]] = onnx.Mul %[[N]], %{{.*}} : (tensor<2x3x8xf32>, tensor<8xf32>)
// SKIP:         %[[ID:.*]] = onnx.Identity %[[SUM]]
// SKIP:         return %[[Y]], %[[ID]]

// FusedMatMul transA transB alpha 0.5.
// FUSED-LABEL: func.func @main_graph(
// FUSED-DAG:     %[[HALF:.*]] = arith.constant dense<5.000000e-01> : tensor<f32>
// FUSED:         %[[A:.*]] = onnx.Transpose %arg0 {perm = array<i64: 0, 2, 1>} : (tensor<2x4x3xf32>) -> tensor<2x3x4xf32>
// FUSED:         %[[B:.*]] = onnx.Transpose %{{.*}} {perm = array<i64: 1, 0>} : (tensor<5x4xf32>) -> tensor<4x5xf32>
// FUSED:         %[[P:.*]] = onnx.MatMul %[[A]], %[[B]] : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
// FUSED:         %[[Y:.*]] = onnx.Mul %[[P]], %[[HALF]]
// FUSED:         return %[[Y]]

// MultiHeadAttention, 2 heads of 8, attention_bias added to the scaled scores.
// MHA-LABEL: func.func @main_graph(
// MHA:         %[[Q:.*]] = onnx.Transpose %{{.*}} {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
// MHA:         %[[K:.*]] = onnx.Transpose %{{.*}} {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x2x8xf32>) -> tensor<2x2x5x8xf32>
// MHA:         %[[V:.*]] = onnx.Transpose %{{.*}} {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x2x8xf32>) -> tensor<2x2x5x8xf32>
// MHA:         %[[SCALE:.*]] = onnx.Reciprocal %{{.*}} : (tensor<f32>) -> tensor<f32>
// MHA:         %[[KT:.*]] = onnx.Transpose %[[K]] {perm = array<i64: 0, 1, 3, 2>}
// MHA:         %[[QK:.*]] = onnx.MatMul %[[Q]], %[[KT]] {{.*}} -> tensor<2x2x4x5xf32>
// MHA:         %[[S:.*]] = onnx.Mul %[[QK]], %[[SCALE]]
// MHA:         %[[SB:.*]] = onnx.Add %[[S]], %arg3 : (tensor<2x2x4x5xf32>, tensor<2x1x4x5xf32>)
// MHA:         %[[P:.*]] = onnx.Softmax %[[SB]] {axis = -1 : i64}
// MHA:         %[[O:.*]] = onnx.MatMul %[[P]], %[[V]] {{.*}} -> tensor<2x2x4x8xf32>
// MHA:         %[[OT:.*]] = onnx.Transpose %[[O]] {perm = array<i64: 0, 2, 1, 3>}
// MHA:         %[[Y:.*]] = onnx.Reshape %[[OT]], %{{.*}} -> tensor<2x4x16xf32>
// MHA:         return %[[Y]]

// RotaryEmbedding rotary_embedding_dim 4 of heads of 8: caches read flat at
// position * 2 + i, the first 4 channels rotate, the last 4 pass through.
// ROPE-LABEL: func.func @main_graph(
// ROPE:         %[[H:.*]] = onnx.Reshape %arg0, %{{.*}} -> tensor<2x4x2x8xf32>
// ROPE:         %[[FLAT:.*]] = onnx.Reshape %{{.*}} : (tensor<8x2xf32>, tensor<1xi64>) -> tensor<16xf32>
// ROPE:         onnx.Gather %[[FLAT]], %{{.*}} -> tensor<1x?x2xf32>
// ROPE:         %[[ROT:.*]] = onnx.Slice %[[H]], {{.*}} -> tensor<2x4x2x4xf32>
// ROPE:         %[[PASS:.*]] = onnx.Slice %[[H]], {{.*}} -> tensor<2x4x2x4xf32>
// ROPE:         onnx.Slice %[[ROT]], {{.*}} -> tensor<2x4x2x2xf32>
// ROPE:         onnx.Slice %[[ROT]], {{.*}} -> tensor<2x4x2x2xf32>
// ROPE:         onnx.Sub
// ROPE:         onnx.Add
// ROPE:         %[[R:.*]] = onnx.Concat {{.*}} {axis = -1 : i64} {{.*}} -> tensor<2x4x2x4xf32>
// ROPE:         %[[ALL:.*]] = onnx.Concat %[[R]], %[[PASS]] {axis = -1 : i64} {{.*}} -> tensor<2x4x2x8xf32>
// ROPE:         %[[Y:.*]] = onnx.Reshape %[[ALL]], %{{.*}} -> tensor<2x4x16xf32>
// ROPE:         return %[[Y]]

// Gelu (erf), BiasGelu, FastGelu (tanh) and QuickGelu (sigmoid).
// GELU-LABEL: func.func @main_graph(
// GELU:         onnx.Erf
// GELU:         onnx.Erf
// GELU:         onnx.Tanh
// GELU:         onnx.Sigmoid
// GELU:         return
