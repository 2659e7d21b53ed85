// RUN: moe-opt %s --split-input-file --moe-partition -verify-diagnostics

// expected-error @below {{moe-partition: the module has no 'moe.plan' attribute; run moe-set-plan first}}
module {}

// -----

module attributes {moe.plan = #moe.plan<ep = 4>} {
func.func @experts(%x: tensor<16x8xf32>, %logits: tensor<16x6xf32>,
                   %w1: tensor<6x16x8xf32>, %w2: tensor<6x8x16xf32>) -> tensor<16x8xf32> {
  // expected-error @below {{moe-partition: ep = 4 does not divide the 6 experts of this block}}
  %y = moe.layer softmax topk k 2 %x, %logits fc1(%w1) fc2(%w2) activation <silu>
      : (tensor<16x8xf32>, tensor<16x6xf32>, tensor<6x16x8xf32>, tensor<6x8x16xf32>) -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}
}

// -----

module attributes {moe.plan = #moe.plan<dp = 2, ep = 2>} {
func.func @tokens(%x: tensor<10x8xf32>, %logits: tensor<10x4xf32>,
                  %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) -> tensor<10x8xf32> {
  // expected-error @below {{moe-partition: the 10 tokens do not split evenly over dp x ep = 4 ranks}}
  %y = moe.layer softmax topk k 2 %x, %logits fc1(%w1) fc2(%w2) activation <silu>
      : (tensor<10x8xf32>, tensor<10x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<10x8xf32>
  return %y : tensor<10x8xf32>
}
}

// -----

module attributes {moe.plan = #moe.plan<ep = 2>} {
func.func @probs(%x: tensor<16x8xf32>, %logits: tensor<16x4xf32>,
                 %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) -> tensor<16x8xf32> {
  // expected-error @below {{moe-partition: the probs drop policy keeps each expert's most probable tokens of the whole batch, which is split over 2 ranks here; use the position policy or dropless dispatch}}
  %y = moe.layer softmax topk k 2 %x, %logits capacity 4 drop probs fc1(%w1) fc2(%w2) activation <silu>
      : (tensor<16x8xf32>, tensor<16x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}
}

// -----

module attributes {moe.plan = #moe.plan<ep = 2, tp = 4>} {
func.func @hidden(%x: tensor<16x8xf32>, %logits: tensor<16x4xf32>,
                  %w1: tensor<4x6x8xf32>, %w2: tensor<4x8x6xf32>) -> tensor<16x8xf32> {
  // expected-error @below {{moe-partition: tp = 4 does not divide the 6 hidden units of fc1}}
  %y = moe.layer softmax topk k 2 %x, %logits fc1(%w1) fc2(%w2) activation <silu>
      : (tensor<16x8xf32>, tensor<16x4xf32>, tensor<4x6x8xf32>, tensor<4x8x6xf32>) -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}
}

// -----

module attributes {moe.plan = #moe.plan<ep = 4, token_shuffle = true>} {
func.func @shuffle(%x: tensor<8x8xf32>, %logits: tensor<8x4xf32>,
                   %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) -> tensor<8x8xf32> {
  // expected-error @below {{moe-partition: token shuffle exchanges equal blocks, but the 2 tokens of a rank do not split over ep = 4}}
  %y = moe.layer softmax topk k 2 %x, %logits fc1(%w1) fc2(%w2) activation <silu>
      : (tensor<8x8xf32>, tensor<8x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}
}

// -----

module attributes {moe.plan = #moe.plan<pp = 4>} {
// expected-error @below {{moe-partition: pp = 4 stages, but stages has too few places to cut (an MoE block, or a value of dynamic shape, is never cut)}}
func.func @stages(%x: tensor<8x8xf32>, %logits: tensor<8x4xf32>,
                  %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) -> tensor<8x8xf32> {
  %y = moe.layer softmax topk k 2 %x, %logits fc1(%w1) fc2(%w2) activation <silu>
      : (tensor<8x8xf32>, tensor<8x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}
}

// -----

module attributes {moe.plan = #moe.plan<ep = 2>} {
func.func @loose(%rows: tensor<16x8xf32>, %slots: tensor<8x2xi32>, %w: tensor<8x2xf32>) -> tensor<8x8xf32> {
  // expected-error @below {{moe-partition: cannot partition this block: its rows do not come from moe.experts}}
  %y = moe.combine %rows, %slots, %w : (tensor<16x8xf32>, tensor<8x2xi32>, tensor<8x2xf32>) -> tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}
}

// -----

// expected-error @below {{moe-partition: the module already has a symbol @world; is it partitioned already?}}
module attributes {moe.plan = #moe.plan<ep = 2>} {
  shard.grid @world(shape = 2)
}
