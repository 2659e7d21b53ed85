// RUN: moe-opt %s -split-input-file -verify-diagnostics --moe-set-plan="ep=2" --moe-place-experts="redundant-per-rank=1"
// RUN: not moe-opt %s -split-input-file --moe-place-experts 2>&1 | FileCheck %s --check-prefix=NOPLAN
// RUN: not moe-opt %s -split-input-file --moe-set-plan --moe-place-experts="redundant-per-rank=-1" 2>&1 | FileCheck %s --check-prefix=BOUNDS

// NOPLAN: moe-place-experts: the module has no 'moe.plan' attribute; run moe-set-plan first
// BOUNDS: moe-place-experts: redundant-per-rank must be in [0, 2^20], not -1

// Which tokens a capacity keeps would depend on the placement.
func.func @capacity(%x: tensor<16x8xf32>, %logits: tensor<16x8xf32>,
                    %w1: tensor<8x16x8xf32>, %w2: tensor<8x8x16xf32>) -> tensor<16x8xf32> {
  // expected-error @below {{placement needs dropless dispatch}}
  %y = moe.layer softmax topk k 2 %x, %logits capacity 4 drop position fc1(%w1) fc2(%w2)
      activation <gelu>
      : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<8x16x8xf32>,
         tensor<8x8x16xf32>) -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}

// -----

// 3 experts do not split over ep = 2.
func.func @uneven(%x: tensor<16x8xf32>, %logits: tensor<16x3xf32>,
                  %w1: tensor<3x16x8xf32>, %w2: tensor<3x8x16xf32>) -> tensor<16x8xf32> {
  // expected-error @below {{ep = 2 does not divide the 3 experts}}
  %y = moe.layer softmax topk k 2 %x, %logits fc1(%w1) fc2(%w2)
      activation <gelu>
      : (tensor<16x8xf32>, tensor<16x3xf32>, tensor<3x16x8xf32>,
         tensor<3x8x16xf32>) -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}
