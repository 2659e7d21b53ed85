// DeepSeek-V3: sigmoid scores with a selection bias, group-limited top-2 (top-2 sums, dropped groups masked with 0.0 as Hugging Face does), normalised and scaled by 2.5, dense-fallback experts, an ungated shared expert.
// The ONNX export and the TorchScript archive of test/corpus/deepseek_v3 import and
// raise to the same moe.layer, and every weight left after raising (the router's and the stacked experts') is the same.
// RUN: moe-translate --import-onnx %corpus/deepseek_v3.onnx --input-shape hidden_states=8x16 | moe-opt --moe-raise --canonicalize > %t.onnx.mlir
// RUN: moe-translate --import-torchscript %corpus/deepseek_v3.pt --input-shape hidden_states=8x16 | moe-opt --moe-raise --canonicalize > %t.pt.mlir
// RUN: FileCheck %s < %t.onnx.mlir
// RUN: FileCheck %s < %t.pt.mlir
// RUN: sed -n 's/^ *[A-Za-z0-9_.]*: "\(0x.*\)",\{0,1\}$/\1/p' %t.onnx.mlir | sort > %t.onnx.weights
// RUN: sed -n 's/^ *[A-Za-z0-9_.]*: "\(0x.*\)",\{0,1\}$/\1/p' %t.pt.mlir | sort > %t.pt.weights
// RUN: diff %t.onnx.weights %t.pt.weights

// CHECK-LABEL: func.func @main_graph
// CHECK:         moe.layer sigmoid grouped_topk k 2 %{{.*}}, %{{.*}} bias(%{{.*}}) groups 4 top 2 by top2_sum masked = 0.000000e+00 fc1(%{{.*}}) fc3(%{{.*}}) fc2(%{{.*}}) shared_fc1(%{{.*}}) shared_fc3(%{{.*}}) shared_fc2(%{{.*}}) activation <swiglu> {normalize, scaling_factor = 2.500000e+00 : f64} : (tensor<8x16xf32>, tensor<8x8xf32>, tensor<8x32x16xf32>, tensor<8x32x16xf32>, tensor<8x16x32xf32>, tensor<8xf32>, tensor<32x16xf32>, tensor<32x16xf32>, tensor<16x32xf32>) -> tensor<8x16xf32>
// CHECK-NOT:     onnx.TopK
// CHECK-NOT:     onnx.ArgMax
