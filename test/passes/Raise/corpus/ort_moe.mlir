// ONNX Runtime's fused com.microsoft.MoE imports straight to moe.layer, which
// raising leaves as it is.
// RUN: moe-translate --import-onnx %corpus/ort_moe.onnx | moe-opt --moe-raise | FileCheck %s

// CHECK-LABEL: func.func @main_graph
// CHECK:         moe.layer softmax topk k 2
// CHECK-SAME:      activation <swiglu, interleaved, alpha = 1.702000e+00, beta = 1.000000e+00, limit = 7.000000e+00> {normalize}
