// A valid model of opset 9, older than the importer supports.
// RUN: not moe-translate --import-onnx %corpus/bad_opset9.onnx 2>&1 \
// RUN:   | FileCheck %s --implicit-check-not=error: --implicit-check-not="PLEASE submit"

// CHECK: bad_opset9.onnx:0:0: error: opset 9 of the default domain is not supported (13 to {{[0-9]+}})
