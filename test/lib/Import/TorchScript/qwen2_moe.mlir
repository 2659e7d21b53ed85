// RUN: moe-translate --import-torchscript %corpus/qwen2_moe.pt --input-shape hidden_states=2x8x16 --mlir-elide-resource-strings-if-larger=16 | FileCheck %s

// The traced Qwen2-MoE block: softmax top-4 of 8 experts without
// renormalisation, the per-expert loop, and a shared expert gated by
// sigmoid(shared_expert_gate(x)).

// CHECK-LABEL: func.func @main_graph(
// CHECK-SAME:      %[[X:.*]]: tensor<2x8x16xf32> {onnx.name = "hidden_states"}) -> (tensor<2x8x16xf32> {onnx.name = "output"})
// CHECK-DAG:   %[[WR:.*]] = arith.constant dense_resource<gate.weight.T> : tensor<16x8xf32>
// CHECK-DAG:   %[[WG:.*]] = arith.constant dense<{{.*}}> : tensor<16x1xf32>
// CHECK-DAG:   arith.constant dense_resource<experts.7.down_proj.weight.T> : tensor<32x16xf32>
// CHECK-DAG:   arith.constant dense_resource<shared_expert.up_proj.weight.T> : tensor<16x48xf32>
// CHECK:       %[[ROWS:.*]] = onnx.Reshape %[[X]]
// CHECK:       %[[LOGITS:.*]] = onnx.MatMul %[[ROWS]], %[[WR]] : (tensor<16x16xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
// CHECK:       %[[PROBS:.*]] = onnx.Softmax %[[LOGITS]] {axis = 1 : i64}
// CHECK:       %[[TOPK:.*]]:2 = onnx.TopK %[[PROBS]], %{{.*}} : (tensor<16x8xf32>, tensor<1xi64>) -> (tensor<16x4xf32>, tensor<16x4xi64>)
// No renormalisation (norm_topk_prob = False).
// CHECK-NOT:   onnx.Div
// CHECK:       onnx.OneHot %[[TOPK]]#1
// CHECK-COUNT-8: onnx.ScatterElements {{.*}} {axis = 0 : i64, reduction = "add"}
// CHECK-NOT:   onnx.ScatterElements
// CHECK:       %[[GATE:.*]] = onnx.MatMul %[[ROWS]], %[[WG]] : (tensor<16x16xf32>, tensor<16x1xf32>) -> tensor<16x1xf32>
// CHECK:       %[[SIG:.*]] = onnx.Sigmoid %[[GATE]]
// CHECK:       %[[SHARED:.*]] = onnx.Mul %[[SIG]], %{{.*}} : (tensor<16x1xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
// CHECK:       onnx.Add %{{.*}}, %[[SHARED]]
// CHECK:       return %{{.*}} : tensor<2x8x16xf32>
