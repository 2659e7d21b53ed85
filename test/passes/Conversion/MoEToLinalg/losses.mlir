// RUN: moe-opt %s --convert-moe-to-linalg --split-input-file | FileCheck %s

// Softmax scores summed over the tokens, routed pairs counted per expert,
// sum_e count_e * scoreSum_e, then one scale: coeff * E / (T * T * k)
// = 0.01 * 4 / (8 * 8 * 2).

// CHECK-DAG:   #[[$SEQ_TOKEN_EXPERT:.*]] = affine_map<(d0, d1, d2) -> (d0, d2, d1)>
// CHECK-LABEL: func.func @aux_loss_softmax(
// CHECK-SAME:      %[[LOGITS:.*]]: tensor<8x4xf32>, %[[IDS:.*]]: tensor<8x2xi32>)
// CHECK-NOT:     moe.aux_loss
// CHECK:         linalg.generic {{.*}} ins(%[[LOGITS]] : tensor<8x4xf32>) outs(%{{.*}} : tensor<8xf32>)
// CHECK:           arith.maximumf
// CHECK:           math.exp
// CHECK:         linalg.generic {{.*}} outs(%{{.*}} : tensor<8xf32>)
// CHECK:           arith.addf
// CHECK:         %[[SCORES:.*]] = linalg.generic
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      arith.divf
// CHECK:         %[[SEQ_SCORES:.*]] = tensor.expand_shape %[[SCORES]] {{\[\[}}0, 1], [2]] output_shape [1, 8, 4]
// CHECK:         %[[SUMS:.*]] = linalg.generic {indexing_maps = [#[[$SEQ_TOKEN_EXPERT]], {{.*}}], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[SEQ_SCORES]] : tensor<1x8x4xf32>) outs(%{{.*}} : tensor<1x4xf32>)
// CHECK:         %[[SEQ_IDS:.*]] = tensor.expand_shape %[[IDS]] {{\[\[}}0, 1], [2]] output_shape [1, 8, 2]
// CHECK:         %[[COUNTS:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction", "reduction"]} ins(%[[SEQ_IDS]] : tensor<1x8x2xi32>) outs(%{{.*}} : tensor<1x4xi32>)
// CHECK:           %[[E:.*]] = linalg.index 1
// CHECK:           %[[E32:.*]] = arith.index_cast %[[E]] : index to i32
// CHECK:           arith.cmpi eq, %{{.*}}, %[[E32]] : i32
// CHECK:         %[[TOTAL:.*]] = linalg.generic {{.*}} iterator_types = ["reduction", "reduction"]} ins(%[[COUNTS]], %[[SUMS]] : tensor<1x4xi32>, tensor<1x4xf32>) outs(%{{.*}} : tensor<f32>)
// CHECK:           arith.sitofp
// CHECK:           arith.mulf
// CHECK:           arith.addf
// CHECK:         %[[T:.*]] = tensor.extract %[[TOTAL]][]
// CHECK:         %[[FACTOR:.*]] = arith.constant 3.125000e-04 : f32
// CHECK:         %[[LOSS:.*]] = arith.mulf %[[T]], %[[FACTOR]]
// CHECK:         %[[RESULT:.*]] = tensor.from_elements %[[LOSS]] : tensor<f32>
// CHECK:         return %[[RESULT]]
// CHECK-NOT:     moe.aux_loss
func.func @aux_loss_softmax(%logits: tensor<8x4xf32>, %ids: tensor<8x2xi32>) -> tensor<f32> {
  %loss = moe.aux_loss softmax %logits, %ids {coeff = 1.0e-2}
      : tensor<8x4xf32>, tensor<8x2xi32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Sigmoid scores are divided by their token's sum; with seq_len the tokens
// are viewed as [T / L, L] and the factor is coeff * E / (S * L * L * k)
// = 0.01 * 4 / (2 * 4 * 4 * 2) = 6.25e-4, 6.2561e-4 in bf16.

// CHECK-LABEL: func.func @aux_loss_sigmoid_seq_len(
// CHECK-SAME:      %[[LOGITS:.*]]: tensor<8x4xbf16>, %[[IDS:.*]]: tensor<8x2xi32>)
// CHECK:         %[[SCORES:.*]] = linalg.generic {{.*}} ins(%[[LOGITS]] : tensor<8x4xbf16>)
// CHECK:           arith.negf
// CHECK:           math.exp
// CHECK:         %[[NORMS:.*]] = linalg.generic {{.*}} ins(%[[SCORES]] : tensor<8x4xbf16>) outs(%{{.*}} : tensor<8xbf16>)
// CHECK:         %[[SEQ_NORMS:.*]] = tensor.expand_shape %[[NORMS]] {{\[\[}}0, 1]] output_shape [2, 4]
// CHECK:         %[[SEQ_SCORES:.*]] = tensor.expand_shape %[[SCORES]] {{\[\[}}0, 1], [2]] output_shape [2, 4, 4]
// CHECK:         %[[SUMS:.*]] = linalg.generic {{.*}} ins(%[[SEQ_SCORES]], %[[SEQ_NORMS]] : tensor<2x4x4xbf16>, tensor<2x4xbf16>) outs(%{{.*}} : tensor<2x4xbf16>)
// CHECK-NEXT:    ^bb0(%[[S:.*]]: bf16, %[[NORM:.*]]: bf16, %[[ACC:.*]]: bf16):
// CHECK-NEXT:      %[[P:.*]] = arith.divf %[[S]], %[[NORM]]
// CHECK-NEXT:      arith.addf %[[ACC]], %[[P]]
// CHECK:         %[[SEQ_IDS:.*]] = tensor.expand_shape %[[IDS]] {{\[\[}}0, 1], [2]] output_shape [2, 4, 2]
// CHECK:         %[[COUNTS:.*]] = linalg.generic {{.*}} ins(%[[SEQ_IDS]] : tensor<2x4x2xi32>) outs(%{{.*}} : tensor<2x4xi32>)
// CHECK:         %[[TOTAL:.*]] = linalg.generic {{.*}} ins(%[[COUNTS]], %[[SUMS]] : tensor<2x4xi32>, tensor<2x4xbf16>) outs(%{{.*}} : tensor<bf16>)
// CHECK:         %[[T:.*]] = tensor.extract %[[TOTAL]][]
// CHECK:         %[[FACTOR:.*]] = arith.constant 6.256100e-04 : bf16
// CHECK:         arith.mulf %[[T]], %[[FACTOR]] : bf16
func.func @aux_loss_sigmoid_seq_len(%logits: tensor<8x4xbf16>, %ids: tensor<8x2xi32>) -> tensor<bf16> {
  %loss = moe.aux_loss sigmoid %logits, %ids {coeff = 1.0e-2, seq_len = 4}
      : tensor<8x4xbf16>, tensor<8x2xi32> -> tensor<bf16>
  return %loss : tensor<bf16>
}

// -----

// logsumexp with the row max subtracted, squared, averaged: coeff / T.

// CHECK-LABEL: func.func @z_loss(
// CHECK-SAME:      %[[LOGITS:.*]]: tensor<8x4xf32>)
// CHECK-NOT:     moe.z_loss
// CHECK:         %[[MAX:.*]] = linalg.generic {{.*}} ins(%[[LOGITS]] : tensor<8x4xf32>) outs(%{{.*}} : tensor<8xf32>)
// CHECK:           arith.maximumf
// CHECK:         %[[SUMEXP:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[LOGITS]], %[[MAX]] : tensor<8x4xf32>, tensor<8xf32>) outs(%{{.*}} : tensor<8xf32>)
// CHECK-NEXT:    ^bb0(%[[L:.*]]: f32, %[[M:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK-NEXT:      %[[SHIFTED:.*]] = arith.subf %[[L]], %[[M]]
// CHECK-NEXT:      %[[EXP:.*]] = math.exp %[[SHIFTED]]
// CHECK-NEXT:      arith.addf %[[ACC]], %[[EXP]]
// CHECK:         %[[TOTAL:.*]] = linalg.generic {{.*}} iterator_types = ["reduction"]} ins(%[[MAX]], %[[SUMEXP]] : tensor<8xf32>, tensor<8xf32>) outs(%{{.*}} : tensor<f32>)
// CHECK-NEXT:    ^bb0(%[[M2:.*]]: f32, %[[SUM:.*]]: f32, %[[ACC2:.*]]: f32):
// CHECK-NEXT:      %[[LOG:.*]] = math.log %[[SUM]]
// CHECK-NEXT:      %[[LSE:.*]] = arith.addf %[[M2]], %[[LOG]]
// CHECK-NEXT:      %[[SQ:.*]] = arith.mulf %[[LSE]], %[[LSE]]
// CHECK-NEXT:      arith.addf %[[ACC2]], %[[SQ]]
// CHECK:         %[[T:.*]] = tensor.extract %[[TOTAL]][]
// CHECK:         %[[FACTOR:.*]] = arith.constant 1.250000e-04 : f32
// CHECK:         %[[LOSS:.*]] = arith.mulf %[[T]], %[[FACTOR]]
// CHECK:         %[[RESULT:.*]] = tensor.from_elements %[[LOSS]]
// CHECK:         return %[[RESULT]]
// CHECK-NOT:     moe.z_loss
func.func @z_loss(%logits: tensor<8x4xf32>) -> tensor<f32> {
  %z = moe.z_loss %logits {coeff = 1.0e-3} : tensor<8x4xf32> -> tensor<f32>
  return %z : tensor<f32>
}

// -----

// A zero coefficient folds the loss away before the lowering sees it.

// CHECK-LABEL: func.func @zero_coeff(
// CHECK-NOT:     linalg.generic
// CHECK:         %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : tensor<f32>
// CHECK:         return %[[ZERO]], %[[ZERO]]
func.func @zero_coeff(%logits: tensor<8x4xf32>, %ids: tensor<8x2xi32>) -> (tensor<f32>, tensor<f32>) {
  %aux = moe.aux_loss softmax %logits, %ids {coeff = 0.0}
      : tensor<8x4xf32>, tensor<8x2xi32> -> tensor<f32>
  %z = moe.z_loss %logits {coeff = 0.0} : tensor<8x4xf32> -> tensor<f32>
  return %aux, %z : tensor<f32>, tensor<f32>
}
