// Qwen2-MoE's sparse block: top-4 of 8 without renormalisation, and the
// shared expert behind a sigmoid gate.
// RUN: moe-translate --import-onnx %corpus/qwen2_moe.onnx --mlir-elide-resource-strings-if-larger=16 \
// RUN:   | FileCheck %s --implicit-check-not='onnx.Constant{{[^O]}}'

// CHECK-LABEL: func.func @main_graph(
// CHECK-SAME:      %arg0: tensor<2x8x16xf32> {onnx.name = "hidden_states"})
// CHECK-SAME:      -> (tensor<2x8x16xf32> {onnx.name = "output"})
// CHECK:         %[[SHARED_UP:.*]] = arith.constant dense_resource<onnx__MatMul_{{[0-9]+}}> : tensor<16x48xf32>
// The shared expert gate, Linear(16 -> 1): 64 bytes, kept inline.
// CHECK:         %[[GATE:.*]] = arith.constant dense<{{.*}}> : tensor<16x1xf32>
// CHECK:         onnx.Softmax %{{.*}} {axis = 1 : i64} : (tensor<16x8xf32>) -> tensor<16x8xf32>
// CHECK:         %[[TOP:.*]]:2 = onnx.TopK {{.*}} -> (tensor<16x4xf32>, tensor<16x4xi64>)
// norm_topk_prob = False: the weights are used as they are.
// CHECK-NEXT:    onnx.Cast %[[TOP]]#0 {to = 1 : i64}
// CHECK-NEXT:    onnx.OneHot %[[TOP]]#1
// CHECK-COUNT-8: onnx.NonZero %{{.*}} : (tensor<4x16xi1>) -> tensor<2x?xi64>
// CHECK:         onnx.MatMul %[[X:.*]], %[[SHARED_UP]] : (tensor<16x16xf32>, tensor<16x48xf32>) -> tensor<16x48xf32>
// CHECK:         %[[G:.*]] = onnx.MatMul %[[X]], %[[GATE]] : (tensor<16x16xf32>, tensor<16x1xf32>) -> tensor<16x1xf32>
// CHECK-NEXT:    %[[S:.*]] = onnx.Sigmoid %[[G]] : (tensor<16x1xf32>) -> tensor<16x1xf32>
// CHECK-NEXT:    onnx.Mul %[[S]], %{{.*}} : (tensor<16x1xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
// CHECK:         return %{{.*}} : tensor<2x8x16xf32>
