// Weights in an external data file (relative `location`, offsets, lengths):
// mapped, and imported exactly as the same model with inline weights.
// RUN: moe-translate --import-onnx %corpus/mixtral_external.onnx -o %t.external.mlir
// RUN: moe-translate --import-onnx %corpus/mixtral.onnx -o %t.inline.mlir
// RUN: diff %t.inline.mlir %t.external.mlir
// RUN: FileCheck %s --input-file=%t.external.mlir

// CHECK: %[[ROUTER:.*]] = arith.constant dense_resource<onnx__MatMul_307> : tensor<16x4xf32>
// CHECK: onnx.MatMul %{{.*}}, %[[ROUTER]]
// CHECK: dialect_resources: {
// CHECK:   builtin: {
// The blob: its alignment (4), then the weights.
// CHECK:     onnx__MatMul_307: "0x04000000{{[0-9A-F]+}}"

// An external file next to a generated model, at offset 8; then a missing
// file, a short one, and a location outside the model's directory.
// RUN: rm -rf %t.dir && mkdir -p %t.dir
// RUN: %python %S/Inputs/make_model.py external %t.dir/ok.onnx variant=ok
// RUN: moe-translate --import-onnx %t.dir/ok.onnx | FileCheck %s --check-prefix=OK
// RUN: %python %S/Inputs/make_model.py external %t.dir/missing.onnx variant=missing
// RUN: not moe-translate --import-onnx %t.dir/missing.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=MISSING --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RUN: %python %S/Inputs/make_model.py external %t.dir/short.onnx variant=short
// RUN: not moe-translate --import-onnx %t.dir/short.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=SHORT --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RUN: %python %S/Inputs/make_model.py external %t.dir/escape.onnx variant=escape
// RUN: not moe-translate --import-onnx %t.dir/escape.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=ESCAPE --implicit-check-not=error: --implicit-check-not="PLEASE submit"

// OK: arith.constant dense_resource<w> : tensor<16x4xf32>
// 0.0, 1.0, 2.0, ... as little-endian floats.
// OK: w: "0x04000000000000000000803F0000004000004040

// MISSING: missing.onnx:0:0: error: tensor 'w': cannot read external data file '{{.*}}missing.onnx.data': No such file or directory
// SHORT: short.onnx:0:0: error: tensor 'w': external data file '{{.*}}short.onnx.data' is too short: the tensor needs bytes 8 to 264, the file has 108
// ESCAPE: escape.onnx:0:0: error: tensor 'w': external data location '../w.bin' is not a path inside the model's directory
