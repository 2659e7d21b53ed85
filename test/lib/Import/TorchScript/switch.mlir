// RUN: moe-translate --import-torchscript %corpus/switch.pt --input-shape hidden_states=16x16 --mlir-elide-resource-strings-if-larger=16 | FileCheck %s

// The traced Switch (GShard einsum) layer with expert capacity. The scripted
// capacity formula ceil(T / E * capacity_factor) folds to 4 at import time,
// the stacked expert weights fold into one constant each, and the one-hot
// and einsum shapes are static.

// CHECK-LABEL: func.func @main_graph(
// CHECK-SAME:      %[[X:.*]]: tensor<16x16xf32> {onnx.name = "hidden_states"}) -> (tensor<16x16xf32> {onnx.name = "output"})
// CHECK-DAG:   %[[WR:.*]] = arith.constant dense_resource<classifier.weight.T> : tensor<16x4xf32>
// CHECK-DAG:   %[[WI:.*]] = arith.constant dense_resource<{{.*}}stack> : tensor<4x32x16xf32>
// CHECK-DAG:   %[[WO:.*]] = arith.constant dense_resource<{{.*}}stack> : tensor<4x16x32xf32>
// The no-op casts to float32 leave nothing behind.
// CHECK:       %[[LOGITS:.*]] = onnx.MatMul %[[X]], %[[WR]]
// CHECK:       %[[PROBS:.*]] = onnx.Softmax %[[LOGITS]] {axis = -1 : i64}
// CHECK:       %[[ARGMAX:.*]] = onnx.ArgMax %[[PROBS]] {axis = -1 : i64, keepdims = 0 : i64}
// CHECK:       %[[HOT:.*]] = onnx.OneHot %[[ARGMAX]], {{.*}} -> tensor<16x4xi64>
// CHECK:       %[[PRIORITY:.*]] = onnx.CumSum %[[HOT]]
// CHECK:       %[[KEEP:.*]] = onnx.LessOrEqual %[[PRIORITY]], %{{.*}} : (tensor<16x4xi64>, tensor<i64>) -> tensor<16x4xi1>
// int64 * bool promotes the mask.
// CHECK:       %[[KEEPI:.*]] = onnx.Cast %[[KEEP]] {to = 7 : i64}
// CHECK:       onnx.Mul %[[HOT]], %[[KEEPI]]
// CHECK:       onnx.ReduceMax %[[PROBS]], %{{.*}} {keepdims = 0 : i64}
// The capacity, 4, is the depth of the dispatch one-hot.
// CHECK:       onnx.OneHot {{.*}} -> tensor<16x4x4xi64>
// CHECK:       %[[IN:.*]] = onnx.Einsum %{{.*}}, %[[X]] {equation = "tec,th->ech"} : (tensor<16x4x4xf32>, tensor<16x16xf32>) -> tensor<4x4x16xf32>
// CHECK:       %[[H:.*]] = onnx.Einsum %[[IN]], %[[WI]] {equation = "ech,efh->ecf"} {{.*}} -> tensor<4x4x32xf32>
// CHECK:       %[[ACT:.*]] = onnx.Relu %[[H]]
// CHECK:       %[[OUT:.*]] = onnx.Einsum %[[ACT]], %[[WO]] {equation = "ecf,ehf->ech"}
// CHECK:       %[[Y:.*]] = onnx.Einsum %{{.*}}, %[[OUT]] {equation = "tec,ech->th"} {{.*}} -> tensor<16x16xf32>
// CHECK:       return %[[Y]] : tensor<16x16xf32>
