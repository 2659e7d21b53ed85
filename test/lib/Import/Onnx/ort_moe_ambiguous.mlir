// hidden == inter without a fused SwiGLU: the shapes cannot tell the layout,
// so it must be given.
// RUN: not moe-translate --import-onnx %corpus/ort_moe_ambiguous.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=DETECT --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RUN: moe-translate --import-onnx %corpus/ort_moe_ambiguous.onnx --ort-moe-layout=current \
// RUN:     --mlir-elide-resource-strings-if-larger=16 \
// RUN:   | FileCheck %s --check-prefix=CURRENT --implicit-check-not=onnx.Transpose
// RUN: moe-translate --import-onnx %corpus/ort_moe_ambiguous.onnx --ort-moe-layout=legacy \
// RUN:     --mlir-elide-resource-strings-if-larger=16 \
// RUN:   | FileCheck %s --check-prefix=LEGACY

// DETECT: ort_moe_ambiguous.onnx:0:0: error: node 'moe/MoE' (com.microsoft.MoE): the weight layout is ambiguous (hidden size == inter size); pass --ort-moe-layout=current or legacy

// CURRENT-DAG: %[[FC1:.*]] = arith.constant dense_resource<fc1_experts_weights> : tensor<4x16x16xf32>
// CURRENT-DAG: %[[FC2:.*]] = arith.constant dense_resource<fc2_experts_weights> : tensor<4x16x16xf32>
// CURRENT-DAG: %[[FC3:.*]] = arith.constant dense_resource<fc3_experts_weights> : tensor<4x16x16xf32>
// CURRENT:     moe.layer softmax topk k 2 %{{.*}}, %{{.*}} fc1(%[[FC1]]) fc3(%[[FC3]]) fc2(%[[FC2]]) activation <silu>

// LEGACY-DAG:  %[[FC1:.*]] = arith.constant dense_resource<fc1_experts_weights> : tensor<4x16x16xf32>
// LEGACY:      %[[FC1T:.*]] = onnx.Transpose %[[FC1]] {perm = array<i64: 0, 2, 1>}
// LEGACY-NEXT: %[[FC2T:.*]] = onnx.Transpose
// LEGACY-NEXT: %[[FC3T:.*]] = onnx.Transpose
// LEGACY-NEXT: moe.layer softmax topk k 2 %{{.*}}, %{{.*}} fc1(%[[FC1T]]) fc3(%[[FC3T]]) fc2(%[[FC2T]]) activation <silu>
