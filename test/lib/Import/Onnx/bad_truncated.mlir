// The first half of mixtral.onnx: protobuf cannot parse it.
// RUN: not moe-translate --import-onnx %corpus/bad_truncated.onnx 2>&1 \
// RUN:   | FileCheck %s --implicit-check-not=error: --implicit-check-not="PLEASE submit"

// CHECK: bad_truncated.onnx:0:0: error: not a valid ONNX model: the protobuf could not be parsed
