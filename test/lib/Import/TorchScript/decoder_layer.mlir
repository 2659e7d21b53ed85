// RUN: moe-translate --import-torchscript %corpus/decoder_layer.pt --input-shape hidden_states=1x8x16 --mlir-elide-resource-strings-if-larger=16 | FileCheck %s

// A traced Mixtral decoder layer: the causal mask, RMSNorm, attention and
// the sparse MoE block.

// CHECK-LABEL: func.func @main_graph(
// CHECK-SAME:      %[[X:.*]]: tensor<1x8x16xf32> {onnx.name = "hidden_states"}) -> (tensor<1x8x16xf32> {onnx.name = "output"})
// CHECK-DAG:   arith.constant dense_resource<self_attn.q_proj.weight.T> : tensor<16x16xf32>
// CHECK-DAG:   arith.constant dense_resource<block_sparse_moe.gate.weight.T> : tensor<16x4xf32>
// _make_causal_mask: full, arange, masked_fill_ (made functional).
// CHECK:       %[[FULL:.*]] = onnx.ConstantOfShape %{{.*}} {value = dense<-3.40282347E+38> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<8x8xf32>
// CHECK:       %[[RANGE:.*]] = onnx.Range {{.*}} -> tensor<8xi64>
// CHECK:       %[[BELOW:.*]] = onnx.Less %[[RANGE]], %{{.*}} : (tensor<8xi64>, tensor<8x1xi64>) -> tensor<8x8xi1>
// CHECK:       onnx.Where %[[BELOW]], %{{.*}}, %[[FULL]]
// RMSNorm: x * rsqrt(mean(x^2) + eps).
// CHECK:       %[[SQ:.*]] = onnx.Pow %[[X]], %{{.*}} : (tensor<1x8x16xf32>, tensor<f32>)
// CHECK:       %[[MEAN:.*]] = onnx.ReduceMean %[[SQ]], %{{.*}} {keepdims = 1 : i64}
// CHECK:       onnx.Sqrt
// CHECK:       onnx.Div
// Attention: heads split and transposed, masked softmax.
// CHECK:       onnx.Reshape {{.*}} -> tensor<1x8x4x4xf32>
// CHECK:       onnx.Transpose %{{.*}} {perm = array<i64: 0, 2, 1, 3>}
// CHECK:       onnx.Transpose %{{.*}} {perm = array<i64: 0, 1, 3, 2>}
// CHECK:       onnx.Softmax %{{.*}} {axis = -1 : i64} : (tensor<1x4x8x8xf32>)
// The MoE block.
// CHECK:       onnx.Softmax %{{.*}} {axis = 1 : i64} : (tensor<8x4xf32>)
// CHECK:       onnx.TopK
// CHECK-COUNT-4: onnx.ScatterElements {{.*}} {axis = 0 : i64, reduction = "add"}
// CHECK:       return %{{.*}} : tensor<1x8x16xf32>
