// The legacy weight layout [E, in, out] (hidden 16 != inter 32 and
// fc2.dims[1] == inter, as moe_helper.h detects it): every weight is
// transposed into moe.layer's [E, out, in]. silu with fc3 is the gated FFN.
// RUN: moe-translate --import-onnx %corpus/ort_moe_legacy.onnx --mlir-elide-resource-strings-if-larger=16 \
// RUN:   | FileCheck %s

// CHECK-LABEL: func.func @main_graph(
// CHECK-DAG:     %[[FC1:.*]] = arith.constant dense_resource<fc1_experts_weights> : tensor<4x16x32xf32>
// CHECK-DAG:     %[[FC2:.*]] = arith.constant dense_resource<fc2_experts_weights> : tensor<4x32x16xf32>
// CHECK-DAG:     %[[FC3:.*]] = arith.constant dense_resource<fc3_experts_weights> : tensor<4x16x32xf32>
// CHECK:         %[[ROWS:.*]] = tensor.collapse_shape
// CHECK-NEXT:    %[[FC1T:.*]] = onnx.Transpose %[[FC1]] {perm = array<i64: 0, 2, 1>} : (tensor<4x16x32xf32>) -> tensor<4x32x16xf32>
// CHECK-NEXT:    %[[FC2T:.*]] = onnx.Transpose %[[FC2]] {perm = array<i64: 0, 2, 1>} : (tensor<4x32x16xf32>) -> tensor<4x16x32xf32>
// CHECK-NEXT:    %[[FC3T:.*]] = onnx.Transpose %[[FC3]] {perm = array<i64: 0, 2, 1>} : (tensor<4x16x32xf32>) -> tensor<4x32x16xf32>
// CHECK-NEXT:    moe.layer softmax topk k 2 %[[ROWS]], %{{.*}} fc1(%[[FC1T]]) fc3(%[[FC3T]]) fc2(%[[FC2T]]) activation <silu> {normalize}
