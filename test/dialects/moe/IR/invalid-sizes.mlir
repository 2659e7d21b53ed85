// RUN: moe-opt %s -split-input-file -verify-diagnostics

// Sizes that overflow or cannot be held, and float attributes that are not
// finite: each is one error. BoundedBuffers bounds every operand and result
// (2^40 bytes); the verifiers bound what attributes and i32 ids and slots
// imply (E, capacity, top-k). 2^30 = 1073741824, 2^31 = 2147483648,
// 2^40 = 1099511627776, 2^62 = 4611686018427387904.

//===----------------------------------------------------------------------===//
// BoundedBuffers: operands and results
//===----------------------------------------------------------------------===//

// A router over 2^40 experts: its logits alone are 4 TiB.
func.func @router_2pow40_experts(%l: tensor<1x1099511627776xf32>) {
  // expected-error @+1 {{'moe.router' op operand #0 of type 'tensor<1x1099511627776xf32>' needs 4398046511104 bytes, more than the 2^40 bytes one buffer may hold}}
  %ids, %w = moe.router softmax topk %l
      : tensor<1x1099511627776xf32> -> tensor<1x2xi32>, tensor<1x2xf32>
  return
}

// -----

// Capacity 2^40 spelled in the dispatch's result type.
func.func @dispatch_rows_2pow40(%x: tensor<4x8xf32>, %ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.dispatch' op result #0 of type 'tensor<4x1099511627776x8xf32>' needs 140737488355328 bytes, more than the 2^40 bytes one buffer may hold}}
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids capacity 1099511627776 drop position
      : (tensor<4x8xf32>, tensor<4x2xi32>)
     -> (tensor<4x1099511627776x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
  return
}

// -----

// Capacity 2^62: the element count overflows int64.
func.func @dispatch_rows_2pow62(%x: tensor<4x8xf32>, %ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.dispatch' op result #0 of type 'tensor<4x4611686018427387904x8xf32>' has more elements than int64 can count}}
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids capacity 4611686018427387904 drop position
      : (tensor<4x8xf32>, tensor<4x2xi32>)
     -> (tensor<4x4611686018427387904x8xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
  return
}

// -----

// 2^62 elements fit int64; their 2^64 bytes do not.
func.func @bytes_overflow(%x: tensor<4611686018427387904x1xf32>, %i: tensor<4xi32>) {
  // expected-error @+1 {{'moe.gather_rows' op operand #0 of type 'tensor<4611686018427387904x1xf32>' needs more bytes than int64 can count}}
  %y = moe.gather_rows %x[%i] : (tensor<4611686018427387904x1xf32>, tensor<4xi32>) -> tensor<4x1xf32>
  return
}

// -----

// Just over the bound: 2^38 + 1 f32 elements.
func.func @just_over(%x: tensor<274877906945x1xf32>, %i: tensor<4xi32>) {
  // expected-error @+1 {{'moe.gather_rows' op operand #0 of type 'tensor<274877906945x1xf32>' needs 1099511627780 bytes, more than the 2^40 bytes one buffer may hold}}
  %y = moe.gather_rows %x[%i] : (tensor<274877906945x1xf32>, tensor<4xi32>) -> tensor<4x1xf32>
  return
}

// -----

// Exactly the bound is allowed: 2^38 f32 elements are 2^40 bytes.
func.func @at_bound(%x: tensor<274877906944x1xf32>, %i: tensor<4xi32>) -> tensor<4x1xf32> {
  %y = moe.gather_rows %x[%i] : (tensor<274877906944x1xf32>, tensor<4xi32>) -> tensor<4x1xf32>
  return %y : tensor<4x1xf32>
}

//===----------------------------------------------------------------------===//
// Experts: ids are i32, so E <= 2^31 - 1
//===----------------------------------------------------------------------===//

// -----

// 2^31 f16 logits are only 4 GiB, but no i32 id names expert 2^31 - 1 + 1.
func.func @router_2pow31_experts(%l: tensor<1x2147483648xf16>) {
  // expected-error @+1 {{'moe.router' op 2147483648 experts are more than the 2147483647 (2^31 - 1) that i32 expert ids can name}}
  %ids, %w = moe.router softmax topk %l
      : tensor<1x2147483648xf16> -> tensor<1x2xi32>, tensor<1x2xf16>
  return
}

// -----

func.func @expert_counts_2pow31(%ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.expert_counts' op 2147483648 experts are more than the 2147483647 (2^31 - 1) that i32 expert ids can name}}
  %c = moe.expert_counts %ids : tensor<4x2xi32> -> tensor<2147483648xi32>
  return
}

// -----

func.func @dispatch_2pow31_experts(%x: tensor<4x8xf32>, %ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.dispatch' op 2147483648 experts are more than the 2147483647 (2^31 - 1) that i32 expert ids can name}}
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids
      : (tensor<4x8xf32>, tensor<4x2xi32>)
     -> (tensor<8x8xf32>, tensor<4x2xi32>, tensor<2147483648xi32>, tensor<i64>)
  return
}

// -----

func.func @experts_2pow31(%r: tensor<8x1xf16>, %c: tensor<2147483648xi32>,
    %w1: tensor<2147483648x1x1xf16>, %w2: tensor<2147483648x1x1xf16>) {
  // expected-error @+1 {{'moe.experts' op 2147483648 experts are more than the 2147483647 (2^31 - 1) that i32 expert ids can name}}
  %0 = moe.experts %r, %c fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<8x1xf16>, tensor<2147483648xi32>, tensor<2147483648x1x1xf16>, tensor<2147483648x1x1xf16>) -> tensor<8x1xf16>
  return
}

// -----

func.func @aux_loss_2pow31(%l: tensor<1x2147483648xf16>, %ids: tensor<1x2xi32>) {
  // expected-error @+1 {{'moe.aux_loss' op 2147483648 experts are more than the 2147483647 (2^31 - 1) that i32 expert ids can name}}
  %a = moe.aux_loss softmax %l, %ids {coeff = 1.0e-2}
      : tensor<1x2147483648xf16>, tensor<1x2xi32> -> tensor<f16>
  return
}

//===----------------------------------------------------------------------===//
// Dispatched rows: slots are i32, so at most 2^31 - 1 rows
//===----------------------------------------------------------------------===//

// -----

// 4 x 2^30 rows of one f32 are 16 GiB (within the bound), but slot
// e * C + c overflows i32.
func.func @dispatch_capacity_rows(%x: tensor<4x1xf32>, %ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.dispatch' op capacity 1073741824 for 4 experts makes more than the 2147483647 (2^31 - 1) dispatched rows that i32 slots can index}}
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids capacity 1073741824 drop position
      : (tensor<4x1xf32>, tensor<4x2xi32>)
     -> (tensor<4x1073741824x1xf32>, tensor<4x2xi32>, tensor<4xi32>, tensor<i64>)
  return
}

// -----

func.func @dispatch_dropless_rows(%x: tensor<2147483648x1xf16>, %ids: tensor<2147483648x1xi32>) {
  // expected-error @+1 {{'moe.dispatch' op 2147483648 tokens routed to k = 1 experts make more than the 2147483647 (2^31 - 1) dispatched rows that i32 slots can index}}
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids
      : (tensor<2147483648x1xf16>, tensor<2147483648x1xi32>)
     -> (tensor<2147483648x1xf16>, tensor<2147483648x1xi32>, tensor<4xi32>, tensor<i64>)
  return
}

// -----

// moe.layer's capacity sizes the buffer moe-decompose creates: 2^40.
func.func @layer_capacity_2pow40(%x: tensor<4x8xf32>, %l: tensor<4x4xf32>,
    %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) {
  // expected-error @+1 {{'moe.layer' op capacity 1099511627776 for 4 experts makes more than the 2147483647 (2^31 - 1) dispatched rows that i32 slots can index}}
  %y = moe.layer softmax topk k 2 %x, %l capacity 1099511627776 drop position
      fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<4x8xf32>
  return
}

// -----

// 2^62: 4 x 2^62 overflows int64.
func.func @layer_capacity_2pow62(%x: tensor<4x8xf32>, %l: tensor<4x4xf32>,
    %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) {
  // expected-error @+1 {{'moe.layer' op capacity 4611686018427387904 for 4 experts makes more than the 2147483647 (2^31 - 1) dispatched rows that i32 slots can index}}
  %y = moe.layer softmax topk k 2 %x, %l capacity 4611686018427387904 drop position
      fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<4x8xf32>
  return
}

// -----

// The largest capacity an i64 holds (2^63 - 1).
func.func @layer_capacity_max(%x: tensor<4x8xf32>, %l: tensor<4x4xf32>,
    %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) {
  // expected-error @+1 {{'moe.layer' op capacity 9223372036854775807 for 4 experts makes more than the 2147483647 (2^31 - 1) dispatched rows}}
  %y = moe.layer softmax topk k 2 %x, %l capacity 9223372036854775807 drop position
      fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<4x8xf32>
  return
}

// -----

// capacity x experts x hidden: 4 x 2^28 rows fit i32 slots, but with
// H = 4096 the buffer is 16 TiB.
func.func @layer_capacity_bytes(%x: tensor<4x4096xf32>, %l: tensor<4x4xf32>,
    %w1: tensor<4x1x4096xf32>, %w2: tensor<4x4096x1xf32>) {
  // expected-error @+1 {{'moe.layer' op the dispatched rows [4, 268435456, 4096] needs 17592186044416 bytes, more than the 2^40 bytes one buffer may hold}}
  %y = moe.layer softmax topk k 2 %x, %l capacity 268435456 drop position
      fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<4x4096xf32>, tensor<4x4xf32>, tensor<4x1x4096xf32>, tensor<4x4096x1xf32>) -> tensor<4x4096xf32>
  return
}

// -----

// Dropless: T x k = 2^31 x 2 rows.
func.func @layer_dropless_rows(%x: tensor<2147483648x1xf16>, %l: tensor<2147483648x2xf16>,
    %w1: tensor<2x1x1xf16>, %w2: tensor<2x1x1xf16>) {
  // expected-error @+1 {{'moe.layer' op 2147483648 tokens routed to k = 2 experts make more than the 2147483647 (2^31 - 1) dispatched rows that i32 slots can index}}
  %y = moe.layer softmax topk k 2 %x, %l fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<2147483648x1xf16>, tensor<2147483648x2xf16>, tensor<2x1x1xf16>, tensor<2x1x1xf16>) -> tensor<2147483648x1xf16>
  return
}

// -----

// The experts' output rows [T*k, M] = [2^20, 2^19] f32 are 2 TiB, though the
// result [T, M] is exactly 2^40 bytes.
func.func @layer_output_rows_bytes(%x: tensor<524288x1xf32>, %l: tensor<524288x2xf32>,
    %w1: tensor<2x1x1xf32>, %w2: tensor<2x524288x1xf32>) {
  // expected-error @+1 {{'moe.layer' op the experts' output rows [1048576, 524288] needs 2199023255552 bytes, more than the 2^40 bytes one buffer may hold}}
  %y = moe.layer softmax topk k 2 %x, %l fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<524288x1xf32>, tensor<524288x2xf32>, tensor<2x1x1xf32>, tensor<2x524288x1xf32>) -> tensor<524288x524288xf32>
  return
}

//===----------------------------------------------------------------------===//
// #moe.plan: the world size is bounded, computed without overflow
//===----------------------------------------------------------------------===//

// -----

// ep x tp = 2^62 x 4 wraps to 0 in int64.
// expected-error @+1 {{plan world size pp x dp x ep x tp = 1 x 1 x 4611686018427387904 x 4 is more than the 2147483647 (2^31 - 1) ranks an MPI rank number can count}}
module attributes {moe.plan = #moe.plan<ep = 4611686018427387904, tp = 4>} {}

// -----

// expected-error @+1 {{plan world size pp x dp x ep x tp = 1 x 65536 x 32768 x 1 is more than the 2147483647 (2^31 - 1) ranks}}
module attributes {moe.plan = #moe.plan<dp = 65536, ep = 32768>} {}

// -----

// expected-error @+1 {{plan degree ep must be at least 1, got 0}}
module attributes {moe.plan = #moe.plan<ep = 0>} {}

//===----------------------------------------------------------------------===//
// Float attributes: finite (NaN and inf pass a plain "> 0" test)
//===----------------------------------------------------------------------===//

// -----

func.func @scaling_factor_inf(%l: tensor<4x4xf32>) {
  // expected-error @+1 {{'moe.router' op scaling_factor must be finite and positive, got INF}}
  %ids, %w = moe.router softmax topk %l {scaling_factor = 0x7FF0000000000000 : f64}
      : tensor<4x4xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return
}

// -----

func.func @scaling_factor_nan(%l: tensor<4x4xf32>) {
  // expected-error @+1 {{'moe.router' op scaling_factor must be finite and positive, got nan}}
  %ids, %w = moe.router softmax topk %l {scaling_factor = 0x7FF8000000000000 : f64}
      : tensor<4x4xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return
}

// -----

func.func @sinkhorn_tolerance_inf(%l: tensor<4x4xf32>) {
  // expected-error @+1 {{'moe.router' op sinkhorn_tolerance must be finite and positive, got INF}}
  %ids, %w = moe.router softmax sinkhorn %l {sinkhorn_tolerance = 0x7FF0000000000000 : f64}
      : tensor<4x4xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return
}

// -----

func.func @jitter_eps_inf(%l: tensor<4x4xf32>) {
  // expected-error @+1 {{'moe.router' op jitter_eps must be finite and non-negative, got INF}}
  %ids, %w = moe.router softmax sparse_mixer %l {jitter_eps = 0x7FF0000000000000 : f64}
      : tensor<4x4xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return
}

// -----

func.func @masked_score_nan(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.router' op masked_score must be finite or -inf, got nan}}
  %ids, %w = moe.router sigmoid grouped_topk %l groups 4 top 2 by max masked = 0x7FF8000000000000
      : tensor<4x8xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return
}

// -----

func.func @masked_score_inf(%l: tensor<4x8xf32>) {
  // expected-error @+1 {{'moe.router' op masked_score must be finite or -inf, got INF}}
  %ids, %w = moe.router sigmoid grouped_topk %l groups 4 top 2 by max masked = 0x7FF0000000000000
      : tensor<4x8xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return
}

// -----

// -inf is the documented "never chosen".
func.func @masked_score_neg_inf(%l: tensor<4x8xf32>) -> tensor<4x2xi32> {
  %ids, %w = moe.router sigmoid grouped_topk %l groups 4 top 2 by max masked = 0xFFF0000000000000
      : tensor<4x8xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return %ids : tensor<4x2xi32>
}

// -----

func.func @aux_loss_coeff_inf(%l: tensor<4x4xf32>, %ids: tensor<4x2xi32>) {
  // expected-error @+1 {{'moe.aux_loss' op coeff must be finite and non-negative, got INF}}
  %a = moe.aux_loss softmax %l, %ids {coeff = 0x7FF0000000000000 : f64}
      : tensor<4x4xf32>, tensor<4x2xi32> -> tensor<f32>
  return
}

// -----

func.func @z_loss_coeff_nan(%l: tensor<4x4xf32>) {
  // expected-error @+1 {{'moe.z_loss' op coeff must be finite and non-negative, got nan}}
  %z = moe.z_loss %l {coeff = 0x7FF8000000000000 : f64} : tensor<4x4xf32> -> tensor<f32>
  return
}

// -----

func.func @layer_scaling_factor_inf(%x: tensor<4x8xf32>, %l: tensor<4x4xf32>,
    %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>) {
  // expected-error @+1 {{'moe.layer' op scaling_factor must be finite and positive, got INF}}
  %y = moe.layer softmax topk k 2 %x, %l fc1(%w1) fc2(%w2) activation <relu>
      {scaling_factor = 0x7FF0000000000000 : f64}
      : (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<4x8xf32>
  return
}

// -----

// expected-error @+1 {{swiglu alpha must be finite, got INF}}
func.func @alpha_inf() attributes {a = #moe.activation<swiglu, interleaved, alpha = 0x7FF0000000000000>} {
  return
}

// -----

// No limit is written by leaving it out.
// expected-error @+1 {{swiglu limit must be finite and positive, got INF}}
func.func @limit_inf() attributes {a = #moe.activation<swiglu, interleaved, limit = 0x7FF0000000000000>} {
  return
}
