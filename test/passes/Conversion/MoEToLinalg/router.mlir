// RUN: moe-opt %s --convert-moe-to-linalg --split-input-file | FileCheck %s

// Softmax scores, then a parallel map over the tokens with one result per
// slot: each token's k passes over its row pick the largest score after
// the last pick (ties to the lower column; nothing left: -1); the slots are
// put side by side, and the weights are the gathered scores (0 for -1).

// CHECK-LABEL: func.func @topk(
// CHECK-SAME:      %[[LOGITS:.*]]: tensor<4x8xf32>)
// CHECK-NOT:     moe.router
// CHECK:         linalg.generic {{.*}} ins(%[[LOGITS]], %{{.*}} : tensor<4x8xf32>, tensor<4xf32>)
// CHECK:           math.exp
// CHECK:         %[[SCORES:.*]] = linalg.generic {{.*}} : tensor<4x8xf32>, tensor<4xf32>)
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      arith.divf
// CHECK:         %[[SLOTS:.*]]:2 = linalg.generic {{.*}} iterator_types = ["parallel"]} outs(%{{.*}}, %{{.*}} : tensor<4xi32>, tensor<4xi32>)
// CHECK:           %[[ROW:.*]] = linalg.index 0
// CHECK:           %[[FIRST:.*]]:2 = scf.for {{.*}} -> (f32, index)
// CHECK:             tensor.extract %[[SCORES]][%[[ROW]], %{{.*}}]
// CHECK:             arith.cmpf olt
// CHECK:             arith.cmpf ogt
// CHECK:           %[[FOUND:.*]] = arith.cmpi ne, %[[FIRST]]#1
// CHECK:           %[[AFTER_KEY:.*]] = arith.select %[[FOUND]], %[[FIRST]]#0
// CHECK:           %[[AFTER_COL:.*]] = arith.select %[[FOUND]], %[[FIRST]]#1
// CHECK:           %[[ID0:.*]] = arith.index_cast %[[AFTER_COL]] : index to i32
// CHECK:           %[[SLOT0:.*]] = arith.select %[[FOUND]], %[[ID0]], %c-1_i32
// CHECK:           scf.for {{.*}} -> (f32, index)
// CHECK:             arith.cmpf olt, %{{.*}}, %[[AFTER_KEY]]
// CHECK:             arith.cmpi sgt, %{{.*}}, %[[AFTER_COL]]
// CHECK:           linalg.yield %[[SLOT0]], %{{.*}} : i32, i32
// CHECK:         %[[TOP:.*]] = linalg.generic {{.*}} ins(%[[SLOTS]]#0, %[[SLOTS]]#1 : tensor<4xi32>, tensor<4xi32>) outs(%{{.*}} : tensor<4x2xi32>)
// CHECK:           linalg.index 1
// CHECK:           arith.select
// CHECK:         %[[W:.*]] = linalg.generic {{.*}} ins(%[[TOP]] : tensor<4x2xi32>)
// CHECK:           linalg.index 0
// CHECK:           tensor.extract %[[SCORES]]
// CHECK:         return %[[TOP]], %[[W]]
// CHECK-NOT:     moe.router
func.func @topk(%logits: tensor<4x8xf32>) -> (tensor<4x2xi32>, tensor<4x2xf32>) {
  %ids, %w = moe.router softmax topk %logits
      : tensor<4x8xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return %ids, %w : tensor<4x2xi32>, tensor<4x2xf32>
}

// -----

// The bias only steers selection; normalize and scaling_factor follow.
// bf16 logits and bias are routed in f32; only the weights are rounded back.

// CHECK-LABEL: func.func @topk_bias_normalize_scale(
// CHECK-SAME:      %[[LOGITS:.*]]: tensor<4x8xbf16>, %[[BIAS:.*]]: tensor<8xbf16>)
// CHECK:         linalg.generic {{.*}} ins(%[[LOGITS]] : tensor<4x8xbf16>) outs(%{{.*}} : tensor<4x8xf32>)
// CHECK:           arith.extf %{{.*}} : bf16 to f32
// CHECK:         %[[WIDEBIAS:.*]] = linalg.generic {{.*}} ins(%[[BIAS]] : tensor<8xbf16>) outs(%{{.*}} : tensor<8xf32>)
// CHECK:         %[[KEYS:.*]] = linalg.generic {{.*}} ins(%[[SCORES:[^ ,]*]], %[[WIDEBIAS]] : tensor<4x8xf32>, tensor<8xf32>)
// CHECK:           arith.addf
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel"]} outs(%{{.*}}, %{{.*}}, %{{.*}} : tensor<4xi32>, tensor<4xi32>, tensor<4xi32>)
// CHECK:               tensor.extract %[[KEYS]]
// CHECK:               arith.cmpf ogt, %{{.*}}, %{{.*}} : f32
// CHECK:         %[[TOP:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<4x3xi32>)
// CHECK:         %[[W:.*]] = linalg.generic {{.*}} ins(%[[TOP]] : tensor<4x3xi32>)
// CHECK:           tensor.extract %[[SCORES]]
// CHECK:         %[[SUM:.*]] = linalg.generic {{.*}} ins(%[[W]] : tensor<4x3xf32>) outs(%{{.*}} : tensor<4xf32>)
// CHECK:         %[[NORM:.*]] = linalg.generic {{.*}} ins(%[[W]], %[[SUM]] : tensor<4x3xf32>, tensor<4xf32>)
// CHECK:           arith.divf
// CHECK:         %[[SCALE:.*]] = arith.constant 2.500000e+00 : f32
// CHECK:         %[[SCALED:.*]] = linalg.generic {{.*}} ins(%[[NORM]] : tensor<4x3xf32>)
// CHECK:           arith.mulf %{{.*}}, %[[SCALE]]
// CHECK:         %[[NARROW:.*]] = linalg.generic {{.*}} ins(%[[SCALED]] : tensor<4x3xf32>) outs(%{{.*}} : tensor<4x3xbf16>)
// CHECK:           arith.truncf %{{.*}} : f32 to bf16
// CHECK:         return %[[TOP]], %[[NARROW]]
func.func @topk_bias_normalize_scale(%logits: tensor<4x8xbf16>, %bias: tensor<8xbf16>)
    -> (tensor<4x3xi32>, tensor<4x3xbf16>) {
  %ids, %w = moe.router sigmoid topk %logits bias(%bias)
      {normalize, scaling_factor = 2.5}
      : tensor<4x8xbf16>, tensor<8xbf16> -> tensor<4x3xi32>, tensor<4x3xbf16>
  return %ids, %w : tensor<4x3xi32>, tensor<4x3xbf16>
}

// -----

// Group scores over [T, G, E / G], top groups per token, the other groups
// masked with -inf (a map: each expert looks for its group among the
// token's), then top-k.

// CHECK-LABEL: func.func @grouped_topk_top2_sum(
// CHECK-SAME:      %[[LOGITS:.*]]: tensor<4x8xf32>, %[[BIAS:.*]]: tensor<8xf32>)
// CHECK:         %[[KEYS:.*]] = linalg.generic {{.*}} ins(%[[SCORES:[^ ,]*]], %[[BIAS]] : tensor<4x8xf32>, tensor<8xf32>)
// CHECK:         %[[GROUPED:.*]] = tensor.expand_shape %[[KEYS]] {{\[\[}}0], [1, 2]] output_shape [4, 4, 2] : tensor<4x8xf32> into tensor<4x4x2xf32>
// CHECK:         %[[TOP2:.*]]:2 = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[GROUPED]] : tensor<4x4x2xf32>)
// CHECK:         %[[GSCORES:.*]] = linalg.generic {{.*}} ins(%[[TOP2]]#0, %[[TOP2]]#1 : tensor<4x4xf32>, tensor<4x4xf32>)
// CHECK:           arith.addf
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel"]} outs(%{{.*}}, %{{.*}} : tensor<4xi32>, tensor<4xi32>)
// CHECK:               tensor.extract %[[GSCORES]]
// CHECK:         %[[GROUPS:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<4x2xi32>)
// CHECK:         %[[MASKED:.*]] = linalg.generic {{.*}} ins(%[[KEYS]] : tensor<4x8xf32>) outs(%{{.*}} : tensor<4x8xf32>)
// CHECK:           %[[GROUP:.*]] = arith.divui %{{.*}}, %c2_i32
// CHECK:           tensor.extract %[[GROUPS]][%{{.*}}, %c0]
// CHECK:           arith.cmpi eq, %{{.*}}, %[[GROUP]]
// CHECK:           tensor.extract %[[GROUPS]][%{{.*}}, %c1]
// CHECK:           arith.cmpi eq, %{{.*}}, %[[GROUP]]
// CHECK:           arith.select %{{.*}}, %{{.*}}, %cst
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel"]} outs(%{{.*}}, %{{.*}}, %{{.*}} : tensor<4xi32>, tensor<4xi32>, tensor<4xi32>)
// CHECK:               tensor.extract %[[MASKED]]
// CHECK:         %[[TOP:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<4x3xi32>)
// CHECK:         %[[W:.*]] = linalg.generic {{.*}} ins(%[[TOP]] : tensor<4x3xi32>)
// CHECK:           tensor.extract %[[SCORES]]
// CHECK:         return %[[TOP]], %{{.*}}
func.func @grouped_topk_top2_sum(%logits: tensor<4x8xf32>, %bias: tensor<8xf32>)
    -> (tensor<4x3xi32>, tensor<4x3xf32>) {
  %ids, %w = moe.router sigmoid grouped_topk %logits bias(%bias)
      groups 4 top 2 by top2_sum {normalize}
      : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x3xi32>, tensor<4x3xf32>
  return %ids, %w : tensor<4x3xi32>, tensor<4x3xf32>
}

// -----

// CHECK-LABEL: func.func @grouped_topk_max(
// CHECK:         %[[GROUPED:.*]] = tensor.expand_shape %{{.*}} {{\[\[}}0], [1, 2]] output_shape [4, 2, 4]
// CHECK:         %[[GSCORES:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[GROUPED]] : tensor<4x2x4xf32>) outs(%{{.*}} : tensor<4x2xf32>)
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      arith.maxnumf
// CHECK:         %[[GROUP:.*]] = linalg.generic {{.*}} iterator_types = ["parallel"]} outs(%{{.*}} : tensor<4xi32>)
// CHECK:               tensor.extract %[[GSCORES]]
// CHECK:         tensor.expand_shape %[[GROUP]] {{\[\[}}0, 1]] output_shape [4, 1] : tensor<4xi32> into tensor<4x1xi32>
func.func @grouped_topk_max(%logits: tensor<4x8xf32>) -> (tensor<4x2xi32>, tensor<4x2xf32>) {
  %ids, %w = moe.router softmax grouped_topk %logits groups 2 top 1 by max
      : tensor<4x8xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return %ids, %w : tensor<4x2xi32>, tensor<4x2xf32>
}

// -----

// Megatron's Sinkhorn on exp(logits) in an scf.while bounded by the
// tolerance and the iteration cap; top-k of the balanced matrix, weighted by
// the scores.

// CHECK-LABEL: func.func @sinkhorn(
// CHECK-SAME:      %[[LOGITS:.*]]: tensor<8x4xf32>)
// CHECK:         linalg.generic {{.*}} ins(%[[LOGITS]], %{{.*}} : tensor<8x4xf32>, tensor<8xf32>)
// CHECK:           math.exp
// CHECK:         %[[SCORES:.*]] = linalg.generic {{.*}} : tensor<8x4xf32>, tensor<8xf32>)
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      arith.divf
// CHECK:         %[[COST:.*]] = linalg.generic {{.*}} ins(%[[LOGITS]] : tensor<8x4xf32>)
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      math.exp
// CHECK:         %[[ERROR:.*]] = arith.constant 1.000000e+09 : f32
// CHECK:         %[[TOL:.*]] = arith.constant 1.000000e-03 : f32
// CHECK:         %[[CAP:.*]] = arith.constant 50 : index
// CHECK:         %[[LOOP:.*]]:4 = scf.while ({{.*}}, %{{.*}} = %[[ERROR]], %{{.*}} = %{{.*}}) : (tensor<8xf32>, tensor<4xf32>, f32, index) -> (tensor<8xf32>, tensor<4xf32>, f32, index)
// CHECK:           %[[UNCONVERGED:.*]] = arith.cmpf ogt, %{{.*}}, %[[TOL]] : f32
// CHECK:           %[[ROUNDS:.*]] = arith.cmpi slt, %{{.*}}, %[[CAP]] : index
// CHECK:           %[[MORE:.*]] = arith.andi %[[UNCONVERGED]], %[[ROUNDS]]
// CHECK:           scf.condition(%[[MORE]])
// CHECK:         } do {
// CHECK:           %[[ROWSUM:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[COST]], %{{.*}} : tensor<8x4xf32>, tensor<4xf32>)
// CHECK:           %[[D0:.*]] = linalg.generic {{.*}} ins(%[[ROWSUM]] : tensor<8xf32>)
// CHECK:           %[[COLSUM:.*]] = linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]} ins(%[[COST]], %[[D0]] : tensor<8x4xf32>, tensor<8xf32>)
// CHECK:           %[[D1:.*]] = linalg.generic {{.*}} ins(%[[COLSUM]] : tensor<4xf32>)
// CHECK:             math.absf
// CHECK:           linalg.copy ins(%[[D0]] : tensor<8xf32>)
// CHECK:           linalg.copy ins(%[[D1]] : tensor<4xf32>)
// CHECK:           scf.yield
// CHECK:         %[[MATRIX:.*]] = linalg.generic {{.*}} ins(%[[COST]], %[[LOOP]]#0, %[[LOOP]]#1 : tensor<8x4xf32>, tensor<8xf32>, tensor<4xf32>)
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel"]} outs(%{{.*}}, %{{.*}} : tensor<8xi32>, tensor<8xi32>)
// CHECK:               tensor.extract %[[MATRIX]]
// CHECK:         %[[TOP:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<8x2xi32>)
// CHECK:         %[[W:.*]] = linalg.generic {{.*}} ins(%[[TOP]] : tensor<8x2xi32>)
// CHECK:           tensor.extract %[[SCORES]]
// CHECK:         return %[[TOP]], %[[W]]
func.func @sinkhorn(%logits: tensor<8x4xf32>) -> (tensor<8x2xi32>, tensor<8x2xf32>) {
  %ids, %w = moe.router softmax sinkhorn %logits
      {sinkhorn_tolerance = 1.0e-3, sinkhorn_max_iterations = 50 : i64}
      : tensor<8x4xf32> -> tensor<8x2xi32>, tensor<8x2xf32>
  return %ids, %w : tensor<8x2xi32>, tensor<8x2xf32>
}

// -----

// Each expert's last pick among the tokens (capacity passes over its
// column of the transposed scores, a map over the experts); then expert e
// took token t where t comes no later than that pick (score above it, or
// equal and t no later): ids [T, E] are e there and -1 elsewhere.

// CHECK-LABEL: func.func @expert_choice(
// CHECK:         %[[PER_EXPERT:.*]] = linalg.transpose ins(%[[SCORES:.*]] : tensor<6x4xf32>) outs(%{{.*}} : tensor<4x6xf32>) permutation = [1, 0]
// CHECK:         %[[LAST:.*]]:2 = linalg.generic {{.*}} iterator_types = ["parallel"]} outs(%{{.*}}, %{{.*}} : tensor<4xf32>, tensor<4xindex>)
// CHECK:           %[[E:.*]] = linalg.index 0
// CHECK:           scf.for %{{.*}} = %c0 to %c2 {{.*}} -> (f32, index)
// CHECK:             scf.for {{.*}} -> (f32, index)
// CHECK:               tensor.extract %[[PER_EXPERT]][%[[E]], %{{.*}}]
// CHECK:         %[[IDS:.*]] = linalg.generic {{.*}} ins(%[[SCORES]], %[[LAST]]#0, %[[LAST]]#1 : tensor<6x4xf32>, tensor<4xf32>, tensor<4xindex>) outs(%{{.*}} : tensor<6x4xi32>)
// CHECK:         ^bb0(%[[SCORE:.*]]: f32, %[[THRESHOLD:.*]]: f32, %[[LAST_TOKEN:.*]]: index, %{{.*}}: i32):
// CHECK:           %[[T:.*]] = linalg.index 0
// CHECK:           arith.cmpf ogt, %[[SCORE]], %[[THRESHOLD]]
// CHECK:           arith.cmpf oeq, %[[SCORE]], %[[THRESHOLD]]
// CHECK:           arith.cmpi sle, %[[T]], %[[LAST_TOKEN]]
// CHECK:           arith.select %{{.*}}, %{{.*}}, %c-1_i32
// CHECK:         %[[W:.*]] = linalg.generic {{.*}} ins(%[[IDS]], %[[SCORES]] : tensor<6x4xi32>, tensor<6x4xf32>)
// CHECK:           arith.cmpi sge
// CHECK:           arith.select
// CHECK:         return %[[IDS]], %[[W]]
func.func @expert_choice(%logits: tensor<6x4xf32>) -> (tensor<6x4xi32>, tensor<6x4xf32>) {
  %ids, %w = moe.router softmax expert_choice %logits capacity 2
      : tensor<6x4xf32> -> tensor<6x4xi32>, tensor<6x4xf32>
  return %ids, %w : tensor<6x4xi32>, tensor<6x4xf32>
}

// -----

// Top-2 of the raw logits (no softmax), then one masked sum of exponentials
// per slot over loops (t, j, e); w = 1 / sum.

// CHECK-LABEL: func.func @sparse_mixer(
// CHECK-SAME:      %[[LOGITS:.*]]: tensor<4x8xf32>)
// CHECK-NOT:     math.exp
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel"]} outs(%{{.*}}, %{{.*}} : tensor<4xi32>, tensor<4xi32>)
// CHECK:               tensor.extract %[[LOGITS]]
// CHECK:         %[[TOP:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<4x2xi32>)
// CHECK:         %[[MAXIMA:.*]] = linalg.generic {{.*}} ins(%[[TOP]] : tensor<4x2xi32>)
// CHECK:           tensor.extract %[[LOGITS]]
// CHECK:         %[[TWO_EPS:.*]] = arith.constant 5.000000e-02 : f32
// CHECK:         %[[SUMS:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[LOGITS]], %[[MAXIMA]], %[[TOP]] : tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x2xi32>)
// CHECK:           arith.mulf %[[TWO_EPS]]
// CHECK:           arith.cmpf ugt
// CHECK:           linalg.index 1
// CHECK:           linalg.index 2
// CHECK:           arith.ori
// CHECK:           math.exp
// CHECK:           arith.select
// CHECK:         %[[W:.*]] = linalg.generic {{.*}} ins(%[[SUMS]], %[[TOP]] : tensor<4x2xf32>, tensor<4x2xi32>)
// CHECK:           %[[PICKED:.*]] = arith.cmpi sge
// CHECK:           %[[RECIPROCAL:.*]] = arith.divf
// CHECK:           arith.select %[[PICKED]], %[[RECIPROCAL]]
// CHECK:         %[[SCALED:.*]] = linalg.generic {{.*}} ins(%[[W]] : tensor<4x2xf32>)
// CHECK:         return %[[TOP]], %[[SCALED]]
func.func @sparse_mixer(%logits: tensor<4x8xf32>) -> (tensor<4x2xi32>, tensor<4x2xf32>) {
  %ids, %w = moe.router softmax sparse_mixer %logits
      {jitter_eps = 0.025, scaling_factor = 2.0}
      : tensor<4x8xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  return %ids, %w : tensor<4x2xi32>, tensor<4x2xf32>
}
