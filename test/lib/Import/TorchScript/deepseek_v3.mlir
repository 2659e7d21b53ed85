// RUN: moe-translate --import-torchscript %corpus/deepseek_v3.pt --input-shape hidden_states=8x16 --mlir-elide-resource-strings-if-larger=16 | FileCheck %s

// The traced DeepSeek-V3 block: sigmoid scores, group-limited top-k with
// the score correction bias, normalised and scaled weights, dense experts
// (every expert on every token) and a shared expert.

// CHECK-LABEL: func.func @main_graph(
// CHECK-SAME:      %[[X:.*]]: tensor<8x16xf32> {onnx.name = "hidden_states"}) -> (tensor<8x16xf32> {onnx.name = "output"})
// CHECK-DAG:   %[[WR:.*]] = arith.constant dense_resource<gate.weight.T> : tensor<16x8xf32>
// CHECK-DAG:   arith.constant dense_resource<shared_experts.down_proj.weight.T> : tensor<32x16xf32>
// CHECK:       %[[LOGITS:.*]] = onnx.MatMul %{{.*}}, %[[WR]] : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
// CHECK:       %[[SCORES:.*]] = onnx.Sigmoid %[[LOGITS]]
// scores + e_score_correction_bias.unsqueeze(0)
// CHECK:       onnx.Add %{{.*}}, %{{.*}} : (tensor<8x8xf32>, tensor<1x8xf32>) -> tensor<8x8xf32>
// CHECK:       onnx.TopK {{.*}} {axis = -1 : i64, largest = 1 : i64, sorted = 1 : i64} : (tensor<8x4x2xf32>, tensor<1xi64>)
// CHECK:       %[[GROUPS:.*]]:2 = onnx.TopK {{.*}} {axis = -1 : i64, largest = 1 : i64, sorted = 0 : i64} : (tensor<8x4xf32>, tensor<1xi64>)
// group_mask.scatter_(1, group_idx, 1) on zeros_like(group_scores)
// CHECK:       %[[ZEROS:.*]] = onnx.ConstantOfShape {{.*}} -> tensor<8x4xf32>
// CHECK:       %[[ONES:.*]] = onnx.Expand {{.*}} -> tensor<8x2xf32>
// CHECK:       onnx.ScatterElements %[[ZEROS]], %[[GROUPS]]#1, %[[ONES]] {axis = 1 : i64}
// masked_fill(~score_mask.bool(), 0.0)
// CHECK:       %[[NOT:.*]] = onnx.Not
// CHECK:       onnx.Where %[[NOT]], %{{.*}}, %{{.*}} : (tensor<8x8xi1>, tensor<f32>, tensor<8x8xf32>)
// CHECK:       %[[IDS:.*]]:2 = onnx.TopK {{.*}} {axis = -1 : i64, largest = 1 : i64, sorted = 0 : i64} : (tensor<8x8xf32>, tensor<1xi64>) -> (tensor<8x2xf32>, tensor<8x2xi64>)
// CHECK:       onnx.GatherElements %[[SCORES]], %[[IDS]]#1 {axis = 1 : i64}
// CHECK:       onnx.Div
// Dense experts: (topk_weights * (topk_indices == e)).sum(-1) for each e.
// CHECK-COUNT-8: onnx.Equal %[[IDS]]#1, %{{.*}} : (tensor<8x2xi64>, tensor<i64>) -> tensor<8x2xi1>
// CHECK-NOT:   onnx.Equal
// CHECK:       return %{{.*}} : tensor<8x16xf32>
