// Quantised MoE is rejected, before shape inference.
// RUN: not moe-translate --import-onnx %corpus/ort_qmoe.onnx 2>&1 \
// RUN:   | FileCheck %s --implicit-check-not=error: --implicit-check-not="PLEASE submit"

// CHECK: ort_qmoe.onnx:0:0: error: node 'moe/QMoE' (com.microsoft.QMoE): quantized MoE is not supported
