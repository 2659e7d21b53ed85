// MatMul of [4, 8] by [6, 3]: strict shape inference fails, naming the node.
// RUN: not moe-translate --import-onnx %corpus/bad_inconsistent_shapes.onnx 2>&1 \
// RUN:   | FileCheck %s --implicit-check-not=error: --implicit-check-not="PLEASE submit"

// CHECK: bad_inconsistent_shapes.onnx:0:0: error: node 'matmul' (MatMul): shape inference failed: Incompatible dimensions for matrix multiplication
