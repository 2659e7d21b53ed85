// Mixtral: the per-expert loop, softmax top-2, renormalised, SwiGLU experts.
// The ONNX export and the TorchScript archive of test/corpus/mixtral import and
// raise to the same moe.layer, and every weight left after raising (the router's and the stacked experts') is the same.
// RUN: moe-translate --import-onnx %corpus/mixtral.onnx --input-shape hidden_states=2x4x16 | moe-opt --moe-raise --canonicalize > %t.onnx.mlir
// RUN: moe-translate --import-torchscript %corpus/mixtral.pt --input-shape hidden_states=2x4x16 | moe-opt --moe-raise --canonicalize > %t.pt.mlir
// RUN: FileCheck %s < %t.onnx.mlir
// RUN: FileCheck %s < %t.pt.mlir
// RUN: sed -n 's/^ *[A-Za-z0-9_.]*: "\(0x.*\)",\{0,1\}$/\1/p' %t.onnx.mlir | sort > %t.onnx.weights
// RUN: sed -n 's/^ *[A-Za-z0-9_.]*: "\(0x.*\)",\{0,1\}$/\1/p' %t.pt.mlir | sort > %t.pt.weights
// RUN: diff %t.onnx.weights %t.pt.weights

// CHECK-LABEL: func.func @main_graph
// CHECK:         moe.layer softmax topk k 2 %{{.*}}, %{{.*}} fc1(%{{.*}}) fc3(%{{.*}}) fc2(%{{.*}}) activation <swiglu> {normalize} : (tensor<8x16xf32>, tensor<8x4xf32>, tensor<4x32x16xf32>, tensor<4x32x16xf32>, tensor<4x16x32xf32>) -> tensor<8x16xf32>
// CHECK-NOT:     onnx.TopK
// CHECK-NOT:     onnx.ArgMax
