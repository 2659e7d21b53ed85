// A Mixtral decoder layer: RMSNorm, attention, the MoE block, residuals; only the block becomes moe ops.
// The ONNX export and the TorchScript archive of test/corpus/decoder_layer import and
// raise to the same moe.layer, and the stacked expert weights are the same (the layer's other weights are imported as the exporters wrote them).
// RUN: moe-translate --import-onnx %corpus/decoder_layer.onnx --input-shape hidden_states=1x8x16 | moe-opt --moe-raise --canonicalize > %t.onnx.mlir
// RUN: moe-translate --import-torchscript %corpus/decoder_layer.pt --input-shape hidden_states=1x8x16 | moe-opt --moe-raise --canonicalize > %t.pt.mlir
// RUN: FileCheck %s < %t.onnx.mlir
// RUN: FileCheck %s < %t.pt.mlir
// RUN: grep -E '^ +(experts|shared)_[a-z0-9]+: ' %t.onnx.mlir | sort > %t.onnx.weights
// RUN: grep -E '^ +(experts|shared)_[a-z0-9]+: ' %t.pt.mlir | sort > %t.pt.weights
// RUN: diff %t.onnx.weights %t.pt.weights

// CHECK-LABEL: func.func @main_graph
// CHECK:         moe.layer softmax topk k 2 %{{.*}}, %{{.*}} fc1(%{{.*}}) fc3(%{{.*}}) fc2(%{{.*}}) activation <swiglu> {normalize} : (tensor<8x16xf32>, tensor<8x4xf32>, tensor<4x32x16xf32>, tensor<4x32x16xf32>, tensor<4x16x32xf32>) -> tensor<8x16xf32>
// CHECK-NOT:     onnx.TopK
// CHECK-NOT:     onnx.ArgMax
