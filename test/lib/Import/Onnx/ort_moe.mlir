// ONNX Runtime's com.microsoft.MoE with GPT-OSS attributes (interleaved
// fused SwiGLU, alpha 1.702, beta 1, limit 7, renormalised top-2, biases):
// one moe.layer on the collapsed [B*S, H] tokens.
// RUN: moe-translate --import-onnx %corpus/ort_moe.onnx --mlir-elide-resource-strings-if-larger=16 \
// RUN:   | FileCheck %s --implicit-check-not=onnx.Transpose

// CHECK-LABEL: func.func @main_graph(
// CHECK-SAME:      %[[X:.*]]: tensor<2x4x16xf32> {onnx.name = "input"})
// CHECK-SAME:      -> (tensor<2x4x16xf32> {onnx.name = "output"})
// CHECK-DAG:     %[[FC1:.*]] = arith.constant dense_resource<fc1_experts_weights> : tensor<4x64x16xf32>
// CHECK-DAG:     %[[FC1B:.*]] = arith.constant dense_resource<fc1_experts_bias> : tensor<4x64xf32>
// CHECK-DAG:     %[[FC2:.*]] = arith.constant dense_resource<fc2_experts_weights> : tensor<4x16x32xf32>
// CHECK-DAG:     %[[FC2B:.*]] = arith.constant dense_resource<fc2_experts_bias> : tensor<4x16xf32>
// CHECK:         %[[LOGITS:.*]] = onnx.Reshape {{.*}} -> tensor<8x4xf32>
// CHECK:         %[[ROWS:.*]] = tensor.collapse_shape %[[X]] {{\[}}[0, 1], [2]] : tensor<2x4x16xf32> into tensor<8x16xf32>
// CHECK:         %[[Y:.*]] = moe.layer softmax topk k 2 %[[ROWS]], %[[LOGITS]]
// CHECK-SAME:      fc1(%[[FC1]], %[[FC1B]]) fc2(%[[FC2]], %[[FC2B]])
// CHECK-SAME:      activation <swiglu, interleaved, alpha = 1.702000e+00, beta = 1.000000e+00, limit = 7.000000e+00> {normalize}
// CHECK-SAME:      -> tensor<8x16xf32>
// CHECK:         %[[OUT:.*]] = tensor.expand_shape %[[Y]] {{\[}}[0, 1], [2]] output_shape [2, 4, 16] : tensor<8x16xf32> into tensor<2x4x16xf32>
// CHECK:         return %[[OUT]]
