// An attribute that Softmax does not define.
// RUN: not moe-translate --import-onnx %corpus/bad_unsupported_attr.onnx 2>&1 \
// RUN:   | FileCheck %s --implicit-check-not=error: --implicit-check-not="PLEASE submit"

// CHECK: bad_unsupported_attr.onnx:0:0: error: node 'softmax' (Softmax): unsupported attribute 'bogus'
