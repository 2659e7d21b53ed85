// A Mixtral decoder layer: RMSNorm, causal attention and the MoE block among
// ordinary ops.
// RUN: moe-translate --import-onnx %corpus/decoder_layer.onnx --mlir-elide-resource-strings-if-larger=16 \
// RUN:   | FileCheck %s --implicit-check-not='onnx.Constant{{[^O]}}'

// CHECK-LABEL: func.func @main_graph(
// CHECK-SAME:      %arg0: tensor<1x8x16xf32> {onnx.name = "hidden_states"})
// CHECK-SAME:      -> (tensor<1x8x16xf32> {onnx.name = "output"})
// RMSNorm. Opset 17's axes attribute becomes the axes input (opset 18's
// form).
// CHECK:         onnx.Pow %{{.*}} : (tensor<1x8x16xf32>, tensor<f32>) -> tensor<1x8x16xf32>
// CHECK-NEXT:    onnx.ReduceMean %{{.*}}, %{{.*}} {keepdims = 1 : i64} : (tensor<1x8x16xf32>, tensor<1xi64>) -> tensor<1x8x1xf32>
// CHECK:         onnx.Sqrt
// Attention: 4 heads of 4.
// CHECK:         onnx.Transpose %{{.*}} {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x4x4xf32>) -> tensor<1x4x8x4xf32>
// CHECK:         onnx.Softmax %{{.*}} {axis = -1 : i64} : (tensor<?x4x8x8xf32>) -> tensor<?x4x8x8xf32>
// The MoE block.
// CHECK:         onnx.Softmax %{{.*}} {axis = 1 : i64} : (tensor<8x4xf32>) -> tensor<8x4xf32>
// CHECK:         onnx.TopK {{.*}} -> (tensor<8x2xf32>, tensor<8x2xi64>)
// CHECK-COUNT-4: onnx.ScatterElements
// CHECK:         return %{{.*}} : tensor<1x8x16xf32>
