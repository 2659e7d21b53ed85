// Switch: the einsum form, top-1 with the capacity ceil(T / E) = 4 computed in the graph, the first tokens kept.
// The ONNX export and the TorchScript archive of test/corpus/switch import and
// raise to the same moe.layer, and every weight left after raising (the router's and the stacked experts') is the same.
// RUN: moe-translate --import-onnx %corpus/switch.onnx --input-shape hidden_states=16x16 | moe-opt --moe-raise --canonicalize > %t.onnx.mlir
// RUN: moe-translate --import-torchscript %corpus/switch.pt --input-shape hidden_states=16x16 | moe-opt --moe-raise --canonicalize > %t.pt.mlir
// RUN: FileCheck %s < %t.onnx.mlir
// RUN: FileCheck %s < %t.pt.mlir
// RUN: sed -n 's/^ *[A-Za-z0-9_.]*: "\(0x.*\)",\{0,1\}$/\1/p' %t.onnx.mlir | sort > %t.onnx.weights
// RUN: sed -n 's/^ *[A-Za-z0-9_.]*: "\(0x.*\)",\{0,1\}$/\1/p' %t.pt.mlir | sort > %t.pt.weights
// RUN: diff %t.onnx.weights %t.pt.weights

// CHECK-LABEL: func.func @main_graph
// CHECK:         moe.layer softmax topk k 1 %{{.*}}, %{{.*}} capacity 4 drop position fc1(%{{.*}}) fc2(%{{.*}}) activation <relu> : (tensor<16x16xf32>, tensor<16x4xf32>, tensor<4x32x16xf32>, tensor<4x16x32xf32>) -> tensor<16x16xf32>
// CHECK-NOT:     onnx.TopK
// CHECK-NOT:     onnx.ArgMax
