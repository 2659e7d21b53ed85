// mixtral.onnx with 64 bytes of its node section overwritten.
// RUN: not moe-translate --import-onnx %corpus/bad_corrupted.onnx 2>&1 \
// RUN:   | FileCheck %s --implicit-check-not=error: --implicit-check-not="PLEASE submit"

// CHECK: bad_corrupted.onnx:0:0: error: not a valid ONNX model: the protobuf could not be parsed
