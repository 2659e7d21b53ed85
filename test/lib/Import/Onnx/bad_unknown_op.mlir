// An operator that ONNX does not define.
// RUN: not moe-translate --import-onnx %corpus/bad_unknown_op.onnx 2>&1 \
// RUN:   | FileCheck %s --implicit-check-not=error: --implicit-check-not="PLEASE submit"

// CHECK: bad_unknown_op.onnx:0:0: error: node 'foobar' (FooBar): unsupported ONNX operator
