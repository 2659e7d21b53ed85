// Qwen2-MoE: the per-expert loop, top-4 of 8 without renormalisation, and a shared expert behind sigmoid(x g).
// The ONNX export and the TorchScript archive of test/corpus/qwen2_moe import and
// raise to the same moe.layer, and every weight left after raising (the router's and the stacked experts') is the same.
// RUN: moe-translate --import-onnx %corpus/qwen2_moe.onnx --input-shape hidden_states=2x8x16 | moe-opt --moe-raise --canonicalize > %t.onnx.mlir
// RUN: moe-translate --import-torchscript %corpus/qwen2_moe.pt --input-shape hidden_states=2x8x16 | moe-opt --moe-raise --canonicalize > %t.pt.mlir
// RUN: FileCheck %s < %t.onnx.mlir
// RUN: FileCheck %s < %t.pt.mlir
// RUN: sed -n 's/^ *[A-Za-z0-9_.]*: "\(0x.*\)",\{0,1\}$/\1/p' %t.onnx.mlir | sort > %t.onnx.weights
// RUN: sed -n 's/^ *[A-Za-z0-9_.]*: "\(0x.*\)",\{0,1\}$/\1/p' %t.pt.mlir | sort > %t.pt.weights
// RUN: diff %t.onnx.weights %t.pt.weights

// CHECK-LABEL: func.func @main_graph
// CHECK:         moe.layer softmax topk k 4 %{{.*}}, %{{.*}} fc1(%{{.*}}) fc3(%{{.*}}) fc2(%{{.*}}) shared_fc1(%{{.*}}) shared_fc3(%{{.*}}) shared_fc2(%{{.*}}) shared_gate(%{{.*}}) activation <swiglu> : (tensor<16x16xf32>, tensor<16x8xf32>, tensor<8x32x16xf32>, tensor<8x32x16xf32>, tensor<8x16x32xf32>, tensor<48x16xf32>, tensor<48x16xf32>, tensor<16x48xf32>, tensor<1x16xf32>) -> tensor<16x16xf32>
// CHECK-NOT:     onnx.TopK
// CHECK-NOT:     onnx.ArgMax
