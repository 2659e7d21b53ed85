// The system mlir-opt parses moe ops and runs moe passes through the plugin.
// Pass flags are parsed before plugins load, so the pass goes in a pipeline.
// RUN: mlir-opt %s --load-dialect-plugin=%moe_plugin --load-pass-plugin=%moe_plugin --pass-pipeline='builtin.module(moe-decompose)' | FileCheck %s

// CHECK-LABEL: func.func @block
// CHECK: moe.router softmax topk
// CHECK: moe.dispatch
// CHECK: moe.experts
// CHECK: moe.combine
// CHECK-NOT: moe.layer
func.func @block(%x: tensor<8x16xf32>, %logits: tensor<8x4xf32>,
                 %w1: tensor<4x32x16xf32>, %w2: tensor<4x16x32xf32>) -> tensor<8x16xf32> {
  %y = moe.layer softmax topk k 2 %x, %logits fc1(%w1) fc2(%w2) activation <silu>
      : (tensor<8x16xf32>, tensor<8x4xf32>, tensor<4x32x16xf32>, tensor<4x16x32xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
