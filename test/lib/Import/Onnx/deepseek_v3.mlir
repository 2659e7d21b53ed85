// DeepSeek-V3's MoE in the dense-fallback form: sigmoid scores, a selection
// bias, group-limited top-k with masked_fill, every expert on every token.
// RUN: moe-translate --import-onnx %corpus/deepseek_v3.onnx --mlir-elide-resource-strings-if-larger=16 \
// RUN:   | FileCheck %s --implicit-check-not='onnx.Constant{{[^O]}}'

// CHECK-LABEL: func.func @main_graph(
// CHECK-SAME:      %arg0: tensor<8x16xf32> {onnx.name = "hidden_states"})
// CHECK-SAME:      -> (tensor<8x16xf32> {onnx.name = "output"})
// CHECK:         %[[LOGITS:.*]] = onnx.MatMul {{.*}} -> tensor<8x8xf32>
// CHECK:         %[[SCORES:.*]] = onnx.Sigmoid %[[LOGITS]] : (tensor<8x8xf32>) -> tensor<8x8xf32>
// Group scores: the top 2 of each of 4 groups, then the top 2 groups.
// CHECK:         onnx.TopK {{.*}} {axis = -1 : i64, largest = 1 : i64, sorted = 1 : i64} : (tensor<8x4x2xf32>, tensor<1xi64>)
// CHECK:         %[[GROUPS:.*]]:2 = onnx.TopK {{.*}} sorted = 0 : i64} : (tensor<8x4xf32>, tensor<1xi64>) -> (tensor<8x2xf32>, tensor<8x2xi64>)
// CHECK:         onnx.ScatterElements %{{.*}}, %[[GROUPS]]#1, %{{.*}} {axis = 1 : i64} : (tensor<8x4xf32>, tensor<8x2xi64>, tensor<8x2xf32>) -> tensor<8x4xf32>
// CHECK:         onnx.Not
// CHECK:         %[[MASKED:.*]] = onnx.Where %{{.*}} : (tensor<?x8xi1>, tensor<f32>, tensor<8x8xf32>) -> tensor<8x8xf32>
// CHECK:         %[[CHOSEN:.*]]:2 = onnx.TopK %[[MASKED]], {{.*}} -> (tensor<8x2xf32>, tensor<8x2xi64>)
// The weights come from the unbiased scores.
// CHECK:         onnx.GatherElements %[[SCORES]], %[[CHOSEN]]#1 {axis = 1 : i64} : (tensor<8x8xf32>, tensor<8x2xi64>) -> tensor<8x2xf32>
// CHECK-COUNT-8: onnx.Equal %[[CHOSEN]]#1, %{{.*}} : (tensor<8x2xi64>, tensor<i64>) -> tensor<8x2xi1>
// CHECK:         return %{{.*}} : tensor<8x16xf32>
