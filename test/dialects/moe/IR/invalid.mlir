// RUN: moe-opt %s -split-input-file -verify-diagnostics

// One case per diagnostic of MoEOps.cpp and MoEAttrs.cpp, in the order of
// those files, then the ODS type constraints. Shapes: T = 4 tokens, H = 8,
// E = 4 experts, k = 2, F = 16 unless a case says otherwise.

//===----------------------------------------------------------------------===//
// #moe.activation
//===----------------------------------------------------------------------===//

func.func @unknown_activation(%r: tensor<8x8xf32>, %c: tensor<4xi32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) -> tensor<8x8xf32> {
  %0 = moe.experts %r, %c fc1(%w1) fc2(%w2)
      // expected-error @+1 {{unknown activation 'swish'}}
      activation <swish>
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

// expected-error @+1 {{expected a SwiGLU layout, 'alpha', 'beta' or 'limit', got 'gamma'}}
func.func @unknown_key() attributes {a = #moe.activation<swiglu, gamma = 1.0>} {
  return
}

// -----

// A parameter is rejected for another activation even at its default value.
// expected-error @+1 {{a layout, alpha, beta or limit is only valid for swiglu, not silu}}
func.func @param_not_swiglu() attributes {a = #moe.activation<silu, alpha = 1.0>} {
  return
}

// -----

// expected-error @+1 {{the swiglu layout is given twice}}
func.func @layout_twice() attributes {a = #moe.activation<swiglu, interleaved, concatenated>} {
  return
}

// -----

// expected-error @+1 {{alpha is given twice}}
func.func @alpha_twice() attributes {a = #moe.activation<swiglu, alpha = 1.5, alpha = 2.0>} {
  return
}

// -----

// expected-error @+1 {{swiglu limit must be finite and positive, got 0.000000e+00}}
func.func @limit_not_positive() attributes {a = #moe.activation<swiglu, interleaved, limit = 0.0>} {
  return
}

// -----

// expected-error @+1 {{a custom activation names its body (`<custom @f>`)}}
func.func @custom_without_body() attributes {a = #moe.activation<custom>} {
  return
}

// -----

func.func @custom_body_missing(%r: tensor<8x8xf32>, %c: tensor<4xi32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{activation body @nowhere is not a func.func of the module}}
  %0 = moe.experts %r, %c fc1(%w1) fc2(%w2) activation <custom @nowhere>
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

func.func private @wide(%x: f64) -> f64 {
  return %x : f64
}
func.func @custom_body_type(%r: tensor<8x8xf32>, %c: tensor<4xi32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{activation body @wide must map one 'f32' to one, not '(f64) -> f64'}}
  %0 = moe.experts %r, %c fc1(%w1) fc2(%w2) activation <custom @wide>
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

// A floor has no derivative the backward builds.
func.func private @stairs(%x: f32) -> f32 {
  %y = math.floor %x : f32
  return %y : f32
}
func.func @custom_body_op(%x: tensor<4x8xf32>, %w1: tensor<16x8xf32>, %w2: tensor<8x16xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{activation body @stairs holds 'math.floor', which is not a scalar arith or math op an activation may use (one the backward differentiates)}}
  %0 = moe.shared_expert %x fc1(%w1) fc2(%w2) activation <custom @stairs>
      : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

//===----------------------------------------------------------------------===//
// Routing attributes (shown on moe.router; moe.layer shares the code)
//===----------------------------------------------------------------------===//

// -----

func.func @bias_not_topk(%l: tensor<4x4xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'moe.router' op a selection bias is only used by topk and grouped_topk, not sinkhorn}}
  %ids, %w = moe.router softmax sinkhorn %l bias(%b)
      : tensor<4x4xf32>, tensor<4xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return
}

// -----

// The custom syntax gives all three group attributes or none.
func.func @grouped_missing_attrs(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.router' op grouped_topk needs num_groups, group_topk and group_score}}
  %ids, %w = "moe.router"(%l) <{scoring = 0 : i32, selection = 1 : i32, num_groups = 2 : i64, group_topk = 1 : i64, operandSegmentSizes = array<i32: 1, 0, 0, 0>}>
      : (tensor<4x8xf32>) -> (tensor<4x2xi32>, tensor<4x2xf32>)
  return
}

// -----

func.func @masked_score_not_grouped(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.router' op masked_score is only used by grouped_topk, not topk}}
  %ids, %w = moe.router softmax topk %l masked = 0.0
      : tensor<4x8xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return
}

// -----

func.func @group_attrs_not_grouped(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.router' op num_groups, group_topk and group_score are only used by grouped_topk, not topk}}
  %ids, %w = moe.router softmax topk %l groups 2 top 1 by max
      : tensor<4x8xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return
}

// -----

func.func @num_groups_not_positive(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.router' op num_groups must be positive, got 0}}
  %ids, %w = moe.router softmax grouped_topk %l groups 0 top 1 by max
      : tensor<4x8xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return
}

// -----

func.func @num_groups_not_divisor(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.router' op num_groups 3 does not divide the 8 experts}}
  %ids, %w = moe.router softmax grouped_topk %l groups 3 top 1 by max
      : tensor<4x8xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return
}

// -----

func.func @group_topk_range(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.router' op group_topk 5 must be in [1, 4]}}
  %ids, %w = moe.router softmax grouped_topk %l groups 4 top 5 by max
      : tensor<4x8xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return
}

// -----

func.func @top2_sum_single_expert_groups(%l: tensor<4x4xf32>) {
  // expected-error @+1 {{'moe.router' op top2_sum needs at least 2 experts per group, got 1}}
  %ids, %w = moe.router softmax grouped_topk %l groups 4 top 2 by top2_sum
      : tensor<4x4xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return
}

// -----

func.func @k_exceeds_kept_groups(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.router' op k = 3 exceeds the 2 experts in the 1 kept groups}}
  %ids, %w = moe.router softmax grouped_topk %l groups 4 top 1 by top2_sum
      : tensor<4x8xf32> -> tensor<4x3xi32>, tensor<4x3xf32>
  return
}

// -----

func.func @expert_choice_no_capacity(%l: tensor<4x4xf32>) {
  // expected-error @+1 {{'moe.router' op expert_choice needs a capacity}}
  %ids, %w = moe.router softmax expert_choice %l
      : tensor<4x4xf32> -> tensor<4x4xi32>, tensor<4x4xf32>
  return
}

// -----

func.func @expert_choice_capacity_range(%l: tensor<4x4xf32>) {
  // expected-error @+1 {{'moe.router' op expert_choice capacity 5 must be in [1, 4]}}
  %ids, %w = moe.router softmax expert_choice %l capacity 5
      : tensor<4x4xf32> -> tensor<4x4xi32>, tensor<4x4xf32>
  return
}

// -----

func.func @expert_choice_k(%l: tensor<4x4xf32>) {
  // expected-error @+1 {{'moe.router' op expert_choice routes to all 4 experts, so k must be 4, got 2}}
  %ids, %w = moe.router softmax expert_choice %l capacity 2
      : tensor<4x4xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return
}

// -----

func.func @k_range(%l: tensor<4x4xf32>) {
  // expected-error @+1 {{'moe.router' op k = 5 must be in [1, 4]}}
  %ids, %w = moe.router softmax topk %l
      : tensor<4x4xf32> -> tensor<4x5xi32>, tensor<4x5xf32>
  return
}

// -----

func.func @sparse_mixer_sigmoid(%l: tensor<4x4xf32>) {
  // expected-error @+1 {{'moe.router' op sparse_mixer needs k = 2 and softmax scoring}}
  %ids, %w = moe.router sigmoid sparse_mixer %l
      : tensor<4x4xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return
}

// -----

func.func @normalize_expert_choice(%l: tensor<4x4xf32>) {
  // expected-error @+1 {{'moe.router' op normalize is not used with expert_choice}}
  %ids, %w = moe.router softmax expert_choice %l capacity 2 {normalize}
      : tensor<4x4xf32> -> tensor<4x4xi32>, tensor<4x4xf32>
  return
}

// -----

func.func @scaling_factor_not_positive(%l: tensor<4x4xf32>) {
  // expected-error @+1 {{'moe.router' op scaling_factor must be finite and positive, got 0.000000e+00}}
  %ids, %w = moe.router softmax topk %l {scaling_factor = 0.0}
      : tensor<4x4xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return
}

// -----

func.func @sinkhorn_tolerance_not_positive(%l: tensor<4x4xf32>) {
  // expected-error @+1 {{'moe.router' op sinkhorn_tolerance must be finite and positive, got -1.000000e-04}}
  %ids, %w = moe.router softmax sinkhorn %l {sinkhorn_tolerance = -1.0e-4}
      : tensor<4x4xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return
}

// -----

func.func @sinkhorn_max_iterations(%l: tensor<4x4xf32>) {
  // expected-error @+1 {{'moe.router' op sinkhorn_max_iterations must be at least 1, got 0}}
  %ids, %w = moe.router softmax sinkhorn %l {sinkhorn_max_iterations = 0}
      : tensor<4x4xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return
}

// -----

func.func @jitter_eps_negative(%l: tensor<4x4xf32>) {
  // expected-error @+1 {{'moe.router' op jitter_eps must be finite and non-negative, got -1.000000e-02}}
  %ids, %w = moe.router softmax sparse_mixer %l {jitter_eps = -0.01}
      : tensor<4x4xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return
}

//===----------------------------------------------------------------------===//
// Expert FFN weights (shown on moe.experts; moe.shared_expert and moe.layer
// share the code)
//===----------------------------------------------------------------------===//

// -----

func.func @ffn_weight_element_type(%r: tensor<8x8xf32>, %c: tensor<4xi32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf16>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'moe.experts' op fc2 element type 'f16' does not match 'f32'}}
  %0 = moe.experts %r, %c fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x16x8xf32>, tensor<4x8x16xf16>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

// Only moe.layer can get this wrong: moe.experts takes E from fc1.
func.func @ffn_num_experts(%x: tensor<4x8xf32>, %l: tensor<4x4xf32>, %w1: tensor<2x16x8xf32>, %w2: tensor<2x8x16xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'moe.layer' op fc1 has 2 experts, expected 4}}
  %y = moe.layer softmax topk k 2 %x, %l fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<2x16x8xf32>, tensor<2x8x16xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @ffn_fc1_input_size(%r: tensor<8x8xf32>, %c: tensor<4xi32>, %w1: tensor<4x16x6xf32>, %w2: tensor<4x8x16xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'moe.experts' op fc1 input size 6 does not match the row width 8}}
  %0 = moe.experts %r, %c fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x16x6xf32>, tensor<4x8x16xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

func.func @ffn_fused_swiglu_odd(%r: tensor<8x8xf32>, %c: tensor<4xi32>, %w1: tensor<4x15x8xf32>, %w2: tensor<4x8x7xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'moe.experts' op a fused swiglu needs an even fc1 width, got 15}}
  %0 = moe.experts %r, %c fc1(%w1) fc2(%w2) activation <swiglu, interleaved>
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x15x8xf32>, tensor<4x8x7xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

func.func @ffn_separate_swiglu_no_fc3(%r: tensor<8x8xf32>, %c: tensor<4xi32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'moe.experts' op a separate swiglu needs fc3}}
  %0 = moe.experts %r, %c fc1(%w1) fc2(%w2) activation <swiglu>
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

func.func @ffn_fused_swiglu_fc3(%r: tensor<8x8xf32>, %c: tensor<4xi32>, %w1: tensor<4x32x8xf32>, %w3: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'moe.experts' op a fused swiglu takes no fc3}}
  %0 = moe.experts %r, %c fc1(%w1) fc3(%w3) fc2(%w2) activation <swiglu, concatenated>
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x32x8xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

func.func @ffn_fc3_bias_no_fc3(%r: tensor<8x8xf32>, %c: tensor<4xi32>, %w1: tensor<4x16x8xf32>, %b3: tensor<4x16xf32>, %w2: tensor<4x8x16xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'moe.experts' op fc3_bias needs fc3}}
  %0 = moe.experts %r, %c fc1(%w1) fc3_bias(%b3) fc2(%w2) activation <silu>
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x16x8xf32>, tensor<4x16xf32>, tensor<4x8x16xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

// fc2 must take the F = 2F1 / 2 = 16 outputs of a fused SwiGLU, not 32.
func.func @ffn_fc2_shape(%r: tensor<8x8xf32>, %c: tensor<4xi32>, %w1: tensor<4x32x8xf32>, %w2: tensor<4x8x32xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'moe.experts' op fc2 must be [4, 8, 16], got [4, 8, 32]}}
  %0 = moe.experts %r, %c fc1(%w1) fc2(%w2) activation <swiglu, interleaved>
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x32x8xf32>, tensor<4x8x32xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

func.func @ffn_fc3_shape(%r: tensor<8x8xf32>, %c: tensor<4xi32>, %w1: tensor<4x16x8xf32>, %w3: tensor<4x12x8xf32>, %w2: tensor<4x8x16xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'moe.experts' op fc3 must be [4, 16, 8], got [4, 12, 8]}}
  %0 = moe.experts %r, %c fc1(%w1) fc3(%w3) fc2(%w2) activation <swiglu>
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x16x8xf32>, tensor<4x12x8xf32>, tensor<4x8x16xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

func.func @ffn_bias_shape(%r: tensor<8x8xf32>, %c: tensor<4xi32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>, %b2: tensor<4x16xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'moe.experts' op fc2_bias must be [4, 8], got [4, 16]}}
  %0 = moe.experts %r, %c fc1(%w1) fc2(%w2, %b2) activation <relu>
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

//===----------------------------------------------------------------------===//
// moe.router
//===----------------------------------------------------------------------===//

// -----

func.func @router_ids_rows(%l: tensor<4x4xf32>) {
  // expected-error @+1 {{'moe.router' op ids must be [4, 2], got [3, 2]}}
  %ids, %w = moe.router softmax topk %l
      : tensor<4x4xf32> -> tensor<3x2xi32>, tensor<4x2xf32>
  return
}

// -----

func.func @router_weights_shape(%l: tensor<4x4xf32>) {
  // expected-error @+1 {{'moe.router' op weights must be [4, 2], got [4, 1]}}
  %ids, %w = moe.router softmax topk %l
      : tensor<4x4xf32> -> tensor<4x2xi32>, tensor<4x1xf32>
  return
}

// -----

func.func @router_weights_element_type(%l: tensor<4x4xf32>) {
  // expected-error @+1 {{'moe.router' op weights element type 'f16' does not match 'f32'}}
  %ids, %w = moe.router softmax topk %l
      : tensor<4x4xf32> -> tensor<4x2xi32>, tensor<4x2xf16>
  return
}

// -----

func.func @router_bias_shape(%l: tensor<4x4xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'moe.router' op bias must be [4], got [8]}}
  %ids, %w = moe.router sigmoid topk %l bias(%b)
      : tensor<4x4xf32>, tensor<8xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return
}

// -----

func.func @router_bias_element_type(%l: tensor<4x4xf32>, %b: tensor<4xbf16>) {
  // expected-error @+1 {{'moe.router' op bias element type 'bf16' does not match 'f32'}}
  %ids, %w = moe.router sigmoid topk %l bias(%b)
      : tensor<4x4xf32>, tensor<4xbf16> -> tensor<4x2xi32>, tensor<4x2xf32>
  return
}

// -----

func.func @router_capacity_not_expert_choice(%l: tensor<4x4xf32>) {
  // expected-error @+1 {{'moe.router' op capacity is only used by expert_choice}}
  %ids, %w = moe.router softmax topk %l capacity 2
      : tensor<4x4xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return
}

//===----------------------------------------------------------------------===//
// moe.aux_loss / moe.z_loss
//===----------------------------------------------------------------------===//

// -----

func.func @loss_element_type(%l: tensor<4x4xf32>) {
  // expected-error @+1 {{'moe.z_loss' op loss element type 'f16' does not match 'f32'}}
  %z = moe.z_loss %l {coeff = 1.0e-3} : tensor<4x4xf32> -> tensor<f16>
  return
}

// -----

func.func @loss_coeff_negative(%l: tensor<4x4xf32>, %ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.aux_loss' op coeff must be finite and non-negative, got -1.000000e-02}}
  %a = moe.aux_loss softmax %l, %ids {coeff = -1.0e-2}
      : tensor<4x4xf32>, tensor<4x2xi32> -> tensor<f32>
  return
}

// -----

func.func @aux_loss_ids_rows(%l: tensor<4x4xf32>, %ids: tensor<3x2xi32>) {
  // expected-error @+1 {{'moe.aux_loss' op ids has 3 rows, expected 4}}
  %a = moe.aux_loss softmax %l, %ids {coeff = 1.0e-2}
      : tensor<4x4xf32>, tensor<3x2xi32> -> tensor<f32>
  return
}

// -----

func.func @aux_loss_seq_len_not_positive(%l: tensor<4x4xf32>, %ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.aux_loss' op seq_len must be positive, got 0}}
  %a = moe.aux_loss softmax %l, %ids {coeff = 1.0e-2, seq_len = 0}
      : tensor<4x4xf32>, tensor<4x2xi32> -> tensor<f32>
  return
}

// -----

func.func @aux_loss_seq_len_not_divisor(%l: tensor<4x4xf32>, %ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.aux_loss' op seq_len 3 does not divide the 4 tokens}}
  %a = moe.aux_loss softmax %l, %ids {coeff = 1.0e-2, seq_len = 3}
      : tensor<4x4xf32>, tensor<4x2xi32> -> tensor<f32>
  return
}

//===----------------------------------------------------------------------===//
// moe.dispatch
//===----------------------------------------------------------------------===//

// -----

func.func @dispatch_ids_rows(%x: tensor<4x8xf32>, %ids: tensor<3x2xi32>) {
  // expected-error @+1 {{'moe.dispatch' op ids must be [4, 2], got [3, 2]}}
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids
      : (tensor<4x8xf32>, tensor<3x2xi32>) -> (tensor<8x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
  return
}

// -----

func.func @dispatch_slots_shape(%x: tensor<4x8xf32>, %ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.dispatch' op slots must be [4, 2], got [4, 1]}}
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids
      : (tensor<4x8xf32>, tensor<4x2xi32>) -> (tensor<8x8xf32>, tensor<4x1xi32>, tensor<4xi32>, tensor<i64>)
  return
}

// -----

func.func @dispatch_rows_element_type(%x: tensor<4x8xf32>, %ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.dispatch' op rows element type 'bf16' does not match 'f32'}}
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids
      : (tensor<4x8xf32>, tensor<4x2xi32>) -> (tensor<8x8xbf16>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
  return
}

// -----

func.func @dispatch_no_experts(%x: tensor<4x8xf32>, %ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.dispatch' op counts must have at least one expert}}
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids
      : (tensor<4x8xf32>, tensor<4x2xi32>) -> (tensor<8x8xf32>, tensor<4x2xi32>, tensor<0xi32>, tensor<i64>)
  return
}

// -----

func.func @dispatch_capacity_no_policy(%x: tensor<4x8xf32>, %ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.dispatch' op a capacity needs a drop_policy}}
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids capacity 2
      : (tensor<4x8xf32>, tensor<4x2xi32>) -> (tensor<4x2x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
  return
}

// -----

func.func @dispatch_capacity_not_positive(%x: tensor<4x8xf32>, %ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.dispatch' op capacity must be at least 1, got 0}}
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids capacity 0 drop position
      : (tensor<4x8xf32>, tensor<4x2xi32>) -> (tensor<4x0x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
  return
}

// -----

func.func @dispatch_capacity_rows(%x: tensor<4x8xf32>, %ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.dispatch' op rows must be [4, 2, 8], got [8, 8]}}
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids capacity 2 drop position
      : (tensor<4x8xf32>, tensor<4x2xi32>) -> (tensor<8x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
  return
}

// -----

func.func @dispatch_policy_no_capacity(%x: tensor<4x8xf32>, %ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.dispatch' op a drop_policy needs a capacity}}
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids drop position
      : (tensor<4x8xf32>, tensor<4x2xi32>) -> (tensor<8x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
  return
}

// -----

func.func @dispatch_dropless_rows(%x: tensor<4x8xf32>, %ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.dispatch' op rows must be [8, 8], got [4, 8]}}
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids
      : (tensor<4x8xf32>, tensor<4x2xi32>) -> (tensor<4x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
  return
}

// -----

func.func @dispatch_probs_no_weights(%x: tensor<4x8xf32>, %ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.dispatch' op the probs drop policy needs weights}}
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids capacity 2 drop probs
      : (tensor<4x8xf32>, tensor<4x2xi32>) -> (tensor<4x2x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
  return
}

// -----

func.func @dispatch_weights_not_probs(%x: tensor<4x8xf32>, %ids: tensor<4x2xi32>, %w: tensor<4x2xf32>) {
  // expected-error @+1 {{'moe.dispatch' op weights are only used by the probs drop policy}}
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids capacity 2 drop position by %w
      : (tensor<4x8xf32>, tensor<4x2xi32>, tensor<4x2xf32>) -> (tensor<4x2x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
  return
}

// -----

func.func @dispatch_weights_shape(%x: tensor<4x8xf32>, %ids: tensor<4x2xi32>, %w: tensor<4x1xf32>) {
  // expected-error @+1 {{'moe.dispatch' op weights must be [4, 2], got [4, 1]}}
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids capacity 2 drop probs by %w
      : (tensor<4x8xf32>, tensor<4x2xi32>, tensor<4x1xf32>) -> (tensor<4x2x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
  return
}

// -----

func.func @dispatch_weights_element_type(%x: tensor<4x8xf32>, %ids: tensor<4x2xi32>, %w: tensor<4x2xf16>) {
  // expected-error @+1 {{'moe.dispatch' op weights element type 'f16' does not match 'f32'}}
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids capacity 2 drop probs by %w
      : (tensor<4x8xf32>, tensor<4x2xi32>, tensor<4x2xf16>) -> (tensor<4x2x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
  return
}

//===----------------------------------------------------------------------===//
// moe.experts
//===----------------------------------------------------------------------===//

// -----

func.func @experts_no_experts(%r: tensor<8x8xf32>, %c: tensor<4xi32>, %w1: tensor<0x16x8xf32>, %w2: tensor<0x8x16xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'moe.experts' op fc1 must have at least one expert}}
  %0 = moe.experts %r, %c fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<0x16x8xf32>, tensor<0x8x16xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

func.func @experts_counts_groups(%r: tensor<8x8xf32>, %c: tensor<6xi32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'moe.experts' op counts has 6 groups, not a multiple of the 4 experts}}
  %0 = moe.experts %r, %c fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<8x8xf32>, tensor<6xi32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

func.func @experts_capacity_blocks(%r: tensor<4x2x8xf32>, %c: tensor<8xi32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) -> tensor<4x2x8xf32> {
  // expected-error @+1 {{'moe.experts' op capacity rows have 4 blocks for 8 groups}}
  %0 = moe.experts %r, %c fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<4x2x8xf32>, tensor<8xi32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<4x2x8xf32>
  return %0 : tensor<4x2x8xf32>
}

// -----

func.func @experts_output_shape(%r: tensor<8x8xf32>, %c: tensor<4xi32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x6x16xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'moe.experts' op output must be [8, 6], got [8, 8]}}
  %0 = moe.experts %r, %c fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x16x8xf32>, tensor<4x6x16xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

func.func @experts_output_element_type(%r: tensor<8x8xf32>, %c: tensor<4xi32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) -> tensor<8x8xf16> {
  // expected-error @+1 {{'moe.experts' op output element type 'f16' does not match 'f32'}}
  %0 = moe.experts %r, %c fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<8x8xf16>
  return %0 : tensor<8x8xf16>
}

//===----------------------------------------------------------------------===//
// moe.shared_expert
//===----------------------------------------------------------------------===//

// -----

func.func @shared_bias_shape(%x: tensor<4x8xf32>, %w1: tensor<12x8xf32>, %b1: tensor<8xf32>, %w2: tensor<8x12xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'moe.shared_expert' op fc1_bias must be [12], got [8]}}
  %0 = moe.shared_expert %x fc1(%w1, %b1) fc2(%w2) activation <relu>
      : (tensor<4x8xf32>, tensor<12x8xf32>, tensor<8xf32>, tensor<8x12xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @shared_gate_shape(%x: tensor<4x8xf32>, %w1: tensor<12x8xf32>, %w2: tensor<8x12xf32>, %g: tensor<2x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'moe.shared_expert' op gate must be [1, 8], got [2, 8]}}
  %0 = moe.shared_expert %x fc1(%w1) fc2(%w2) gate(%g) activation <relu>
      : (tensor<4x8xf32>, tensor<12x8xf32>, tensor<8x12xf32>, tensor<2x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @shared_gate_element_type(%x: tensor<4x8xf32>, %w1: tensor<12x8xf32>, %w2: tensor<8x12xf32>, %g: tensor<1x8xf16>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'moe.shared_expert' op gate element type 'f16' does not match 'f32'}}
  %0 = moe.shared_expert %x fc1(%w1) fc2(%w2) gate(%g) activation <relu>
      : (tensor<4x8xf32>, tensor<12x8xf32>, tensor<8x12xf32>, tensor<1x8xf16>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @shared_output_shape(%x: tensor<4x8xf32>, %w1: tensor<12x8xf32>, %w2: tensor<6x12xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'moe.shared_expert' op output must be [4, 6], got [4, 8]}}
  %0 = moe.shared_expert %x fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<4x8xf32>, tensor<12x8xf32>, tensor<6x12xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @shared_output_element_type(%x: tensor<4x8xf32>, %w1: tensor<12x8xf32>, %w2: tensor<8x12xf32>) -> tensor<4x8xbf16> {
  // expected-error @+1 {{'moe.shared_expert' op output element type 'bf16' does not match 'f32'}}
  %0 = moe.shared_expert %x fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<4x8xf32>, tensor<12x8xf32>, tensor<8x12xf32>) -> tensor<4x8xbf16>
  return %0 : tensor<4x8xbf16>
}

//===----------------------------------------------------------------------===//
// moe.combine
//===----------------------------------------------------------------------===//

// -----

func.func @combine_weights_shape(%r: tensor<8x6xf32>, %s: tensor<4x2xi32>, %w: tensor<4x1xf32>) {
  // expected-error @+1 {{'moe.combine' op weights must be [4, 2], got [4, 1]}}
  %0 = moe.combine %r, %s, %w : (tensor<8x6xf32>, tensor<4x2xi32>, tensor<4x1xf32>) -> tensor<4x6xf32>
  return
}

// -----

func.func @combine_weights_element_type(%r: tensor<8x6xf32>, %s: tensor<4x2xi32>, %w: tensor<4x2xf16>) {
  // expected-error @+1 {{'moe.combine' op weights element type 'f16' does not match 'f32'}}
  %0 = moe.combine %r, %s, %w : (tensor<8x6xf32>, tensor<4x2xi32>, tensor<4x2xf16>) -> tensor<4x6xf32>
  return
}

// -----

func.func @combine_output_shape(%r: tensor<4x2x6xf32>, %s: tensor<4x2xi32>, %w: tensor<4x2xf32>) {
  // expected-error @+1 {{'moe.combine' op output must be [4, 6], got [4, 8]}}
  %0 = moe.combine %r, %s, %w : (tensor<4x2x6xf32>, tensor<4x2xi32>, tensor<4x2xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @combine_output_element_type(%r: tensor<8x6xf32>, %s: tensor<4x2xi32>, %w: tensor<4x2xf32>) {
  // expected-error @+1 {{'moe.combine' op output element type 'f16' does not match 'f32'}}
  %0 = moe.combine %r, %s, %w : (tensor<8x6xf32>, tensor<4x2xi32>, tensor<4x2xf32>) -> tensor<4x6xf16>
  return
}

//===----------------------------------------------------------------------===//
// moe.all_to_all
//===----------------------------------------------------------------------===//

// -----

func.func @all_to_all_no_grid(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{'moe.all_to_all' op no shard.grid named @nope}}
  %0 = moe.all_to_all %x on @nope grid_axes = [0] : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return
}

// -----

// A symbol that is not a shard.grid does not do either.
func.func private @not_a_grid()
func.func @all_to_all_not_a_grid(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{'moe.all_to_all' op no shard.grid named @not_a_grid}}
  %0 = moe.all_to_all %x on @not_a_grid grid_axes = [0] : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return
}

// -----

shard.grid @grid(shape = 2x4)
func.func @all_to_all_axis_range(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{'moe.all_to_all' op grid axis 2 is out of range for a grid of rank 2}}
  %0 = moe.all_to_all %x on @grid grid_axes = [2] : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return
}

// -----

shard.grid @grid(shape = 2x4)
func.func @all_to_all_axis_negative(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{'moe.all_to_all' op grid axis -1 is out of range for a grid of rank 2}}
  %0 = moe.all_to_all %x on @grid grid_axes = [-1] : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return
}

// -----

shard.grid @grid(shape = 2x4)
func.func @all_to_all_axis_repeated(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{'moe.all_to_all' op grid axis 1 is repeated}}
  %0 = moe.all_to_all %x on @grid grid_axes = [1, 1] : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return
}

// -----

shard.grid @grid(shape = 2x?)
func.func @all_to_all_axis_dynamic(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{'moe.all_to_all' op grid axis 1 has a dynamic size}}
  %0 = moe.all_to_all %x on @grid grid_axes = [1] : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return
}

// -----

// Used to divide by zero.
shard.grid @grid(shape = 2x0)
func.func @all_to_all_axis_empty(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{'moe.all_to_all' op grid axis 1 has size 0}}
  %0 = moe.all_to_all %x on @grid grid_axes = [1] : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return
}

// -----

// Used to overflow to a group of 0 ranks and divide by zero.
shard.grid @grid(shape = 4294967296x4294967296)
func.func @all_to_all_too_many_ranks(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{'moe.all_to_all' op grid_axes span more than 2^63 - 1 ranks}}
  %0 = moe.all_to_all %x on @grid grid_axes = [0, 1] : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return
}

// -----

shard.grid @grid(shape = 2x4)
func.func @all_to_all_counts_split(%x: tensor<8x8xf32>, %c: tensor<6xi32>) {
  // expected-error @+1 {{'moe.all_to_all' op the 6 counts do not split over 4 ranks}}
  %0, %1 = moe.all_to_all %x, %c on @grid grid_axes = [1]
      : (tensor<8x8xf32>, tensor<6xi32>) -> (tensor<8x8xf32>, tensor<6xi32>)
  return
}

// -----

shard.grid @grid(shape = 2x4)
func.func @all_to_all_blocks_split(%x: tensor<6x8xf32>) {
  // expected-error @+1 {{'moe.all_to_all' op dimension 0 (6) does not split over 4 ranks}}
  %0 = moe.all_to_all %x on @grid grid_axes = [1] : (tensor<6x8xf32>) -> tensor<6x8xf32>
  return
}

// -----

shard.grid @grid(shape = 4)
func.func @all_to_all_output_counts_uniform(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{'moe.all_to_all' op output_counts needs input counts}}
  %0, %1 = moe.all_to_all %x on @grid grid_axes = [0]
      : (tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<4xi32>)
  return
}

// -----

shard.grid @grid(shape = 4)
func.func @all_to_all_uniform_type(%x: tensor<8x8xf32>) {
  // expected-error @+1 {{'moe.all_to_all' op a uniform exchange keeps its type, got 'tensor<8x8xf32>' -> 'tensor<16x8xf32>'}}
  %0 = moe.all_to_all %x on @grid grid_axes = [0] : (tensor<8x8xf32>) -> tensor<16x8xf32>
  return
}

// -----

shard.grid @grid(shape = 4)
func.func @all_to_all_ragged_no_output_counts(%x: tensor<8x8xf32>, %c: tensor<4xi32>) {
  // expected-error @+1 {{'moe.all_to_all' op a ragged exchange returns output_counts}}
  %0 = moe.all_to_all %x, %c on @grid grid_axes = [0]
      : (tensor<8x8xf32>, tensor<4xi32>) -> tensor<16x8xf32>
  return
}

// -----

shard.grid @grid(shape = 4)
func.func @all_to_all_output_counts_type(%x: tensor<8x8xf32>, %c: tensor<4xi32>) {
  // expected-error @+1 {{'moe.all_to_all' op output_counts must have the type of counts}}
  %0, %1 = moe.all_to_all %x, %c on @grid grid_axes = [0]
      : (tensor<8x8xf32>, tensor<4xi32>) -> (tensor<16x8xf32>, tensor<8xi32>)
  return
}

// -----

shard.grid @grid(shape = 4)
func.func @all_to_all_ragged_row_shape(%x: tensor<8x8xf32>, %c: tensor<4xi32>) {
  // expected-error @+1 {{'moe.all_to_all' op a ragged exchange keeps the row shape and element type, got 'tensor<8x8xf32>' -> 'tensor<16x4xf32>'}}
  %0, %1 = moe.all_to_all %x, %c on @grid grid_axes = [0]
      : (tensor<8x8xf32>, tensor<4xi32>) -> (tensor<16x4xf32>, tensor<4xi32>)
  return
}

//===----------------------------------------------------------------------===//
// moe.layer
//===----------------------------------------------------------------------===//

// -----

func.func @layer_logits_rows(%x: tensor<4x8xf32>, %l: tensor<3x4xf32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'moe.layer' op logits has 3 rows for 4 tokens}}
  %y = moe.layer softmax topk k 2 %x, %l fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<4x8xf32>, tensor<3x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @layer_logits_element_type(%x: tensor<4x8xf32>, %l: tensor<4x4xf16>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'moe.layer' op logits element type 'f16' does not match 'f32'}}
  %y = moe.layer softmax topk k 2 %x, %l fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<4x8xf32>, tensor<4x4xf16>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @layer_selection_bias_shape(%x: tensor<4x8xf32>, %l: tensor<4x4xf32>, %b: tensor<2xf32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'moe.layer' op selection_bias must be [4], got [2]}}
  %y = moe.layer sigmoid topk k 2 %x, %l bias(%b) fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>, tensor<2xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @layer_selection_bias_element_type(%x: tensor<4x8xf32>, %l: tensor<4x4xf32>, %b: tensor<4xf16>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'moe.layer' op selection_bias element type 'f16' does not match 'f32'}}
  %y = moe.layer sigmoid topk k 2 %x, %l bias(%b) fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>, tensor<4xf16>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// The routing checks run on moe.layer too (k is an attribute here).
func.func @layer_k_range(%x: tensor<4x8xf32>, %l: tensor<4x4xf32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'moe.layer' op k = 0 must be in [1, 4]}}
  %y = moe.layer softmax topk k 0 %x, %l fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @layer_expert_choice_policy(%x: tensor<4x8xf32>, %l: tensor<4x4xf32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'moe.layer' op expert_choice drops no tokens, so takes no drop_policy}}
  %y = moe.layer softmax expert_choice k 4 %x, %l capacity 2 drop position fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @layer_capacity_no_policy(%x: tensor<4x8xf32>, %l: tensor<4x4xf32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'moe.layer' op capacity and drop_policy must be given together}}
  %y = moe.layer softmax topk k 2 %x, %l capacity 2 fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Used to pass: the unsigned getter read -1 as 2^64 - 1.
func.func @layer_capacity_negative(%x: tensor<4x8xf32>, %l: tensor<4x4xf32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'moe.layer' op capacity must be at least 1, got -1}}
  %y = moe.layer softmax topk k 2 %x, %l capacity -1 drop position fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @layer_shared_fc2_missing(%x: tensor<4x8xf32>, %l: tensor<4x4xf32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>, %s1: tensor<12x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'moe.layer' op shared_fc1 and shared_fc2 must be given together}}
  %y = moe.layer softmax topk k 2 %x, %l fc1(%w1) fc2(%w2) shared_fc1(%s1) activation <relu>
      : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>, tensor<12x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @layer_shared_gate_alone(%x: tensor<4x8xf32>, %l: tensor<4x4xf32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>, %g: tensor<1x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'moe.layer' op shared_fc3 and shared_gate need shared_fc1}}
  %y = moe.layer softmax topk k 2 %x, %l fc1(%w1) fc2(%w2) shared_gate(%g) activation <relu>
      : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// The shared FFN's diagnostics name its operands.
func.func @layer_shared_swiglu_no_fc3(%x: tensor<4x8xf32>, %l: tensor<4x4xf32>, %w1: tensor<4x16x8xf32>, %w3: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>, %s1: tensor<12x8xf32>, %s2: tensor<8x12xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'moe.layer' op a separate swiglu needs shared_fc3}}
  %y = moe.layer softmax topk k 2 %x, %l fc1(%w1) fc3(%w3) fc2(%w2) shared_fc1(%s1) shared_fc2(%s2) activation <swiglu>
      : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x16x8xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>, tensor<12x8xf32>, tensor<8x12xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @layer_shared_fc1_input_size(%x: tensor<4x8xf32>, %l: tensor<4x4xf32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>, %s1: tensor<12x6xf32>, %s2: tensor<8x12xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'moe.layer' op shared_fc1 input size 6 does not match the row width 8}}
  %y = moe.layer softmax topk k 2 %x, %l fc1(%w1) fc2(%w2) shared_fc1(%s1) shared_fc2(%s2) activation <relu>
      : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>, tensor<12x6xf32>, tensor<8x12xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @layer_shared_width(%x: tensor<4x8xf32>, %l: tensor<4x4xf32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>, %s1: tensor<12x8xf32>, %s2: tensor<6x12xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'moe.layer' op the shared expert's output width 6 differs from the experts' 8}}
  %y = moe.layer softmax topk k 2 %x, %l fc1(%w1) fc2(%w2) shared_fc1(%s1) shared_fc2(%s2) activation <relu>
      : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>, tensor<12x8xf32>, tensor<6x12xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @layer_shared_gate_shape(%x: tensor<4x8xf32>, %l: tensor<4x4xf32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>, %s1: tensor<12x8xf32>, %s2: tensor<8x12xf32>, %g: tensor<1x4xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'moe.layer' op shared_gate must be [1, 8], got [1, 4]}}
  %y = moe.layer softmax topk k 2 %x, %l fc1(%w1) fc2(%w2) shared_fc1(%s1) shared_fc2(%s2) shared_gate(%g) activation <relu>
      : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>, tensor<12x8xf32>, tensor<8x12xf32>, tensor<1x4xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @layer_shared_gate_element_type(%x: tensor<4x8xf32>, %l: tensor<4x4xf32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>, %s1: tensor<12x8xf32>, %s2: tensor<8x12xf32>, %g: tensor<1x8xf16>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'moe.layer' op shared_gate element type 'f16' does not match 'f32'}}
  %y = moe.layer softmax topk k 2 %x, %l fc1(%w1) fc2(%w2) shared_fc1(%s1) shared_fc2(%s2) shared_gate(%g) activation <relu>
      : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>, tensor<12x8xf32>, tensor<8x12xf32>, tensor<1x8xf16>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @layer_output_shape(%x: tensor<4x8xf32>, %l: tensor<4x4xf32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x6x16xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'moe.layer' op output must be [4, 6], got [4, 8]}}
  %y = moe.layer softmax topk k 2 %x, %l fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x16x8xf32>, tensor<4x6x16xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @layer_output_element_type(%x: tensor<4x8xf32>, %l: tensor<4x4xf32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) -> tensor<4x8xf16> {
  // expected-error @+1 {{'moe.layer' op output element type 'f16' does not match 'f32'}}
  %y = moe.layer softmax topk k 2 %x, %l fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<4x8xf16>
  return %y : tensor<4x8xf16>
}

//===----------------------------------------------------------------------===//
// ODS type constraints
//===----------------------------------------------------------------------===//

// -----

func.func @dynamic_shape(%l: tensor<?x4xf32>) {
  // expected-error @+1 {{'moe.router' op operand #0 must be statically shaped 2D tensor of floating-point values, but got 'tensor<?x4xf32>'}}
  %ids, %w = moe.router softmax topk %l
      : tensor<?x4xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return
}

// -----

// The custom syntax only parses ranked tensors; the generic one gets to ODS.
func.func @unranked(%l: tensor<*xf32>) {
  // expected-error @+1 {{'moe.z_loss' op operand #0 must be statically shaped 2D tensor of floating-point values, but got 'tensor<*xf32>'}}
  %z = "moe.z_loss"(%l) <{coeff = 1.0 : f64}> : (tensor<*xf32>) -> tensor<f32>
  return
}

// -----

func.func @wrong_rank(%r: tensor<8x8xf32>, %c: tensor<4xi32>, %w1: tensor<16x8xf32>, %w2: tensor<4x8x16xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'moe.experts' op operand #2 must be statically shaped 3D tensor of floating-point values, but got 'tensor<16x8xf32>'}}
  %0 = moe.experts %r, %c fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<8x8xf32>, tensor<4xi32>, tensor<16x8xf32>, tensor<4x8x16xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

func.func @wrong_rank_rows(%x: tensor<4x8xf32>, %ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.dispatch' op result #0 must be statically shaped 2D/3D tensor of floating-point values, but got 'tensor<4x2x1x8xf32>'}}
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids capacity 2 drop position
      : (tensor<4x8xf32>, tensor<4x2xi32>) -> (tensor<4x2x1x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
  return
}

// -----

func.func @integer_logits(%l: tensor<4x4xi32>) {
  // expected-error @+1 {{'moe.router' op operand #0 must be statically shaped 2D tensor of floating-point values, but got 'tensor<4x4xi32>'}}
  %ids, %w = moe.router softmax topk %l
      : tensor<4x4xi32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return
}

// -----

func.func @i64_ids(%x: tensor<4x8xf32>, %ids: tensor<4x2xi64>) {
  // expected-error @+1 {{'moe.dispatch' op operand #1 must be statically shaped 2D tensor of 32-bit signless integer values, but got 'tensor<4x2xi64>'}}
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids
      : (tensor<4x8xf32>, tensor<4x2xi64>) -> (tensor<8x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
  return
}

// -----

func.func @float_counts(%r: tensor<8x8xf32>, %c: tensor<4xf32>, %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'moe.experts' op operand #1 must be statically shaped 1D tensor of 32-bit signless integer values, but got 'tensor<4xf32>'}}
  %0 = moe.experts %r, %c fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<8x8xf32>, tensor<4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

func.func @memref_operand(%l: memref<4x4xf32>) {
  // expected-error @+1 {{invalid kind of type specified: expected builtin.tensor, but found 'memref<4x4xf32>'}}
  %z = moe.z_loss %l {coeff = 1.0} : memref<4x4xf32> -> tensor<f32>
  return
}

// -----

func.func @loss_not_scalar(%l: tensor<4x4xf32>) {
  // expected-error @+1 {{'moe.z_loss' op result #0 must be statically shaped 0D tensor of floating-point values, but got 'tensor<1xf32>'}}
  %z = moe.z_loss %l {coeff = 1.0} : tensor<4x4xf32> -> tensor<1xf32>
  return
}

// -----

func.func @unknown_scoring(%l: tensor<4x4xf32>) {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'scoring' [softmax, sigmoid]}}
  %ids, %w = moe.router softplus topk %l
      : tensor<4x4xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return
}

// -----

func.func @missing_coeff(%l: tensor<4x4xf32>) {
  // expected-error @+1 {{'moe.z_loss' op requires attribute 'coeff'}}
  %z = moe.z_loss %l : tensor<4x4xf32> -> tensor<f32>
  return
}

// -----

// expected-error @below {{plan dp_shard 3 does not divide dp 4}}
module attributes {moe.plan = #moe.plan<dp = 4, dp_shard = 3>} {}

// -----

// expected-error @below {{plan aux_loss_coeff must be finite and not negative, got -1}}
module attributes {moe.plan = #moe.plan<aux_loss_coeff = -1.0>} {}

// -----

// expected-error @below {{plan degree ep must be at least 1, got 0}}
module attributes {moe.plan = #moe.plan<ep = 0>} {}

// -----

// expected-error @below {{unknown plan field 'experts'}}
module attributes {moe.plan = #moe.plan<experts = 4>} {}

// -----

// expected-error @below {{plan field 'ep' is given twice}}
module attributes {moe.plan = #moe.plan<ep = 2, ep = 4>} {}

// -----

// expected-error @below {{unknown dispatcher 'broadcast'}}
module attributes {moe.plan = #moe.plan<dispatcher = broadcast>} {}

// -----

func.func @offsets_without_capacity(%x: tensor<4x8xf32>, %ids: tensor<4x2xi32>, %b: tensor<4xi32>) {
  // expected-error @below {{offsets need a capacity}}
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids after %b
      : (tensor<4x8xf32>, tensor<4x2xi32>, tensor<4xi32>)
     -> (tensor<8x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
  return
}

// -----

func.func @offsets_probs(%x: tensor<4x8xf32>, %ids: tensor<4x2xi32>, %w: tensor<4x2xf32>, %b: tensor<4xi32>) {
  // expected-error @below {{offsets need the position or choice drop policy and the type of counts}}
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids capacity 3 drop probs by %w after %b
      : (tensor<4x8xf32>, tensor<4x2xi32>, tensor<4x2xf32>, tensor<4xi32>)
     -> (tensor<4x3x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
  return
}

// -----

func.func @offsets_buffer(%x: tensor<4x8xf32>, %ids: tensor<4x2xi32>, %b: tensor<4xi32>) {
  // expected-error @below {{rows must be [4, 3, 8], got [4, 5, 8]}}
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids capacity 3 drop position after %b
      : (tensor<4x8xf32>, tensor<4x2xi32>, tensor<4xi32>)
     -> (tensor<4x5x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
  return
}

// -----

func.func @gather_rows_shape(%x: tensor<4x8xf32>, %i: tensor<6xi32>) {
  // expected-error @below {{result must be [6, 8], got [4, 8]}}
  %y = moe.gather_rows %x[%i] : (tensor<4x8xf32>, tensor<6xi32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @prefix_sum_grid(%c: tensor<4xi32>) {
  // expected-error @below {{no shard.grid named @nowhere}}
  %y = moe.prefix_sum %c on @nowhere grid_axes = [0] : tensor<4xi32>
  return
}

// -----

func.func @slot_table_layer() {
  // expected-error @below {{layer must be at least 0, got -1}}
  %t = moe.slot_table layer -1 experts 2 initial [0, 1] : tensor<2xi32>
  return
}

// -----

func.func @slot_table_experts() {
  // expected-error @below {{experts must be at least 1, got 0}}
  %t = moe.slot_table layer 0 experts 0 initial [0, 1] : tensor<2xi32>
  return
}

// -----

func.func @slot_table_entries() {
  // expected-error @below {{initial has 2 entries for 3 slots}}
  %t = moe.slot_table layer 0 experts 2 initial [0, 1] : tensor<3xi32>
  return
}

// -----

func.func @slot_table_not_an_expert() {
  // expected-error @below {{slot 1 holds expert 2, not one of the 2 experts}}
  %t = moe.slot_table layer 0 experts 2 initial [0, 2, 1] : tensor<3xi32>
  return
}

// -----

func.func @slot_table_unplaced_expert() {
  // expected-error @below {{expert 2 has no slot}}
  %t = moe.slot_table layer 0 experts 3 initial [0, 1, 1, 0] : tensor<4xi32>
  return
}

// -----

func.func @slot_weights_shape(%w: tensor<4x16x8xf32>, %t: tensor<6xi32>) {
  // expected-error @below {{result must be [6, 16, 8], got [4, 16, 8]}}
  %y = moe.slot_weights %w[%t] : (tensor<4x16x8xf32>, tensor<6xi32>) -> tensor<4x16x8xf32>
  return
}

// -----

func.func @slot_weights_type(%w: tensor<4x16xf32>, %t: tensor<6xi32>) {
  // expected-error @below {{result element type 'f16' does not match 'f32'}}
  %y = moe.slot_weights %w[%t] : (tensor<4x16xf32>, tensor<6xi32>) -> tensor<6x16xf16>
  return
}

// -----

func.func @place_types(%ids: tensor<4x2xi32>, %t: tensor<6xi32>) {
  // expected-error @below {{all of {ids, slots} have same type}}
  %s = "moe.place"(%ids, %t) : (tensor<4x2xi32>, tensor<6xi32>) -> tensor<4x1xi32>
  return
}

// -----

func.func @place_ranks(%ids: tensor<4x2xi32>, %t: tensor<6xi32>, %r: index) {
  // expected-error @below {{the 6 slots do not split over 4 ranks}}
  %s = moe.place %ids, %t source %r ranks 4 : tensor<4x2xi32>, tensor<6xi32>
  return
}

// -----

func.func @place_no_ranks(%ids: tensor<4x2xi32>, %t: tensor<6xi32>) {
  // expected-error @below {{ranks must be at least 1, got 0}}
  %s = "moe.place"(%ids, %t) <{ranks = 0 : i64}> : (tensor<4x2xi32>, tensor<6xi32>) -> tensor<4x2xi32>
  return
}

// -----

func.func @place_source(%ids: tensor<4x2xi32>, %t: tensor<6xi32>) {
  // expected-error @below {{takes a source rank exactly when ranks > 1}}
  %s = "moe.place"(%ids, %t) <{ranks = 2 : i64}> : (tensor<4x2xi32>, tensor<6xi32>) -> tensor<4x2xi32>
  return
}

// -----

func.func @slot_grad_sum_rows(%p: tensor<6x16xf32>, %t: tensor<6xi32>) {
  // expected-error @below {{keeps the row shape and element type, got 'tensor<6x16xf32>' -> 'tensor<6x8xf32>'}}
  %g = moe.slot_grad_sum %p, %t : (tensor<6x16xf32>, tensor<6xi32>) -> tensor<6x8xf32>
  return
}

// -----

func.func @slot_grad_sum_one_rank(%p: tensor<6x16xf32>, %t: tensor<6xi32>) {
  // expected-error @below {{on one rank takes and returns a row per slot (6)}}
  %g = moe.slot_grad_sum %p, %t : (tensor<6x16xf32>, tensor<6xi32>) -> tensor<3x16xf32>
  return
}

// -----

shard.grid @pair(shape = 2)
func.func @slot_grad_sum_ranks(%p: tensor<6x16xf32>, %t: tensor<6xi32>) {
  // expected-error @below {{over 2 ranks takes 6 rows (one per source and local slot) and returns 3}}
  %g = moe.slot_grad_sum %p, %t on @pair grid_axes = [0] : (tensor<6x16xf32>, tensor<6xi32>) -> tensor<6x16xf32>
  return
}

// -----

shard.grid @three(shape = 3)
func.func @slot_grad_sum_split(%p: tensor<4x16xf32>, %t: tensor<4xi32>) {
  // expected-error @below {{the 4 slots do not split over 3 ranks}}
  %g = moe.slot_grad_sum %p, %t on @three grid_axes = [0] : (tensor<4x16xf32>, tensor<4xi32>) -> tensor<2x16xf32>
  return
}
