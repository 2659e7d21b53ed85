// RUN: moe-opt %s --convert-moe-to-linalg --split-input-file | FileCheck %s

// Dropless: a reduction counts the pairs routed to lower experts (each
// expert's first row); then a token-major loop nest copies every routed pair
// to the next free row of its expert. Nothing is dropped.

// CHECK-LABEL: func.func @dispatch_dropless(
// CHECK-SAME:      %[[X:.*]]: tensor<4x8xf32>, %[[IDS:.*]]: tensor<4x2xi32>)
// CHECK-NOT:     moe.dispatch
// CHECK:         %[[OFFSETS:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction", "reduction"]} ins(%[[IDS]] : tensor<4x2xi32>) outs(%{{.*}} : tensor<3xi32>)
// CHECK:           arith.cmpi ult
// CHECK:         %[[ROWS0:.*]] = linalg.fill {{.*}} -> tensor<8x8xf32>
// CHECK:         %[[MINUS1:.*]] = arith.constant -1 : i32
// CHECK:         %[[SLOTS0:.*]] = linalg.fill ins(%[[MINUS1]] : i32) {{.*}} -> tensor<4x2xi32>
// CHECK:         %[[RES:.*]]:4 = scf.for %[[T:[^ ]+]] = {{.*}} iter_args(%{{.*}} = %[[ROWS0]], %{{.*}} = %[[SLOTS0]], {{.*}}) -> (tensor<8x8xf32>, tensor<4x2xi32>, tensor<3xi32>, i64)
// CHECK:           scf.for %[[J:[^ ]+]] = {{.*}} iter_args(%[[ROWS:[^ ]+]] = %{{.*}}, %[[SLOTS:[^ ]+]] = %{{.*}}, %[[PLACED:[^ ]+]] = %{{.*}}, %[[DROPPED:[^ ]+]] = %{{.*}})
// CHECK:             %[[ID:.*]] = tensor.extract %[[IDS]][%[[T]], %[[J]]]
// CHECK:             %[[ROUTED:.*]] = arith.cmpi ult, %[[ID]], %{{.*}} : i32
// CHECK:             %[[SAFE:.*]] = arith.select %[[ROUTED]], %[[ID]]
// CHECK:             %[[E:.*]] = arith.index_cast %[[SAFE]] : i32 to index
// CHECK:             %[[N:.*]] = tensor.extract %[[PLACED]][%[[E]]]
// CHECK:             %[[BASE:.*]] = tensor.extract %[[OFFSETS]][%[[E]]]
// CHECK:             %[[ROW:.*]] = arith.addi %[[BASE]], %[[N]] : i32
// CHECK:             %[[IF:.*]]:3 = scf.if %[[ROUTED]]
// CHECK:               %[[R:.*]] = arith.index_cast %[[ROW]] : i32 to index
// CHECK:               %[[TOKEN:.*]] = tensor.extract_slice %[[X]][%[[T]], 0] [1, 8] [1, 1]
// CHECK:               tensor.insert_slice %[[TOKEN]] into %[[ROWS]][%[[R]], 0] [1, 8] [1, 1]
// CHECK:               tensor.insert %[[ROW]] into %[[SLOTS]][%[[T]], %[[J]]]
// CHECK:             } else {
// CHECK:             scf.yield %[[IF]]#0, %[[IF]]#1, %[[IF]]#2, %[[DROPPED]]
// CHECK:         %[[NDROPPED:.*]] = tensor.from_elements %[[RES]]#3 : tensor<i64>
// CHECK:         return %[[RES]]#0, %[[RES]]#1, %[[RES]]#2, %[[NDROPPED]]
// CHECK-NOT:     moe.dispatch
func.func @dispatch_dropless(%x: tensor<4x8xf32>, %ids: tensor<4x2xi32>)
    -> (tensor<8x8xf32>, tensor<4x2xi32>, tensor<3xi32>, tensor<i64>) {
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids
      : (tensor<4x8xf32>, tensor<4x2xi32>)
     -> (tensor<8x8xf32>, tensor<4x2xi32>, tensor<3xi32>, tensor<i64>)
  return %rows, %slots, %counts, %dropped
      : tensor<8x8xf32>, tensor<4x2xi32>, tensor<3xi32>, tensor<i64>
}

// -----

// Position policy: a pair is kept while its expert holds fewer than C rows;
// expert e's block starts at e * C; the flat rows are expanded to [E, C, H].

// CHECK-LABEL: func.func @dispatch_capacity_position(
// CHECK-SAME:      %[[X:.*]]: tensor<4x8xbf16>, %[[IDS:.*]]: tensor<4x2xi32>)
// CHECK-NOT:     linalg.generic
// CHECK:         %[[RES:.*]]:4 = scf.for {{.*}} -> (tensor<6x8xbf16>, tensor<4x2xi32>, tensor<3xi32>, i64)
// CHECK:           scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %[[PLACED:[^ ]+]] = %{{.*}}, %[[DROPPED:[^ ]+]] = %{{.*}})
// CHECK:             %[[ROUTED:.*]] = arith.cmpi ult
// CHECK:             %[[SAFE:.*]] = arith.select %[[ROUTED]]
// CHECK:             %[[N:.*]] = tensor.extract %[[PLACED]]
// CHECK:             %[[C:.*]] = arith.constant 2 : i32
// CHECK:             %[[FITS:.*]] = arith.cmpi slt, %[[N]], %[[C]] : i32
// CHECK:             %[[KEEP:.*]] = arith.andi %[[ROUTED]], %[[FITS]]
// CHECK:             %[[LOST:.*]] = arith.xori %[[ROUTED]], %[[KEEP]]
// CHECK:             %[[ONE:.*]] = arith.extui %[[LOST]] : i1 to i64
// CHECK:             %[[NEXT:.*]] = arith.addi %[[DROPPED]], %[[ONE]] : i64
// CHECK:             %[[BASE:.*]] = arith.muli %[[SAFE]], %{{.*}} : i32
// CHECK:             arith.addi %[[BASE]], %[[N]] : i32
// CHECK:             %[[IF:.*]]:3 = scf.if %[[KEEP]]
// CHECK:             scf.yield %[[IF]]#0, %[[IF]]#1, %[[IF]]#2, %[[NEXT]]
// CHECK:         %[[ROWS:.*]] = tensor.expand_shape %[[RES]]#0 {{\[\[}}0, 1], [2]] output_shape [3, 2, 8] : tensor<6x8xbf16> into tensor<3x2x8xbf16>
// CHECK:         %[[NDROPPED:.*]] = tensor.from_elements %[[RES]]#3
// CHECK:         return %[[ROWS]], %[[RES]]#1, %[[RES]]#2, %[[NDROPPED]]
func.func @dispatch_capacity_position(%x: tensor<4x8xbf16>, %ids: tensor<4x2xi32>)
    -> (tensor<3x2x8xbf16>, tensor<4x2xi32>, tensor<3xi32>, tensor<i64>) {
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids capacity 2 drop position
      : (tensor<4x8xbf16>, tensor<4x2xi32>)
     -> (tensor<3x2x8xbf16>, tensor<4x2xi32>, tensor<3xi32>, tensor<i64>)
  return %rows, %slots, %counts, %dropped
      : tensor<3x2x8xbf16>, tensor<4x2xi32>, tensor<3xi32>, tensor<i64>
}

// -----

// Choice policy (GShard): the same loop with the slots outside, so that
// every first choice takes its place before any second choice.

// CHECK-LABEL: func.func @dispatch_capacity_choice(
// CHECK-SAME:      %[[X:.*]]: tensor<4x8xf32>, %[[IDS:.*]]: tensor<4x2xi32>)
// CHECK:         scf.for %[[SLOT:[^ ]+]] = %{{.*}} to %c2
// CHECK:           scf.for %[[TOKEN:[^ ]+]] = %{{.*}} to %c4
// CHECK:             tensor.extract %[[IDS]][%[[TOKEN]], %[[SLOT]]] : tensor<4x2xi32>
// CHECK:             arith.cmpi slt, %{{.*}}, %{{.*}} : i32
// CHECK:             tensor.insert %{{.*}} into %{{.*}}[%[[TOKEN]], %[[SLOT]]] : tensor<4x2xi32>
func.func @dispatch_capacity_choice(%x: tensor<4x8xf32>, %ids: tensor<4x2xi32>)
    -> (tensor<3x2x8xf32>, tensor<4x2xi32>, tensor<3xi32>, tensor<i64>) {
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids capacity 2 drop choice
      : (tensor<4x8xf32>, tensor<4x2xi32>)
     -> (tensor<3x2x8xf32>, tensor<4x2xi32>, tensor<3xi32>, tensor<i64>)
  return %rows, %slots, %counts, %dropped
      : tensor<3x2x8xf32>, tensor<4x2xi32>, tensor<3xi32>, tensor<i64>
}

// -----

// Probs policy: every pair is ranked among the pairs of its expert (larger
// weight, or equal weight and earlier pair, first); the loop keeps the pairs
// ranked below C, still in token order, and never more than C (NaN weights
// are unordered).

// CHECK-LABEL: func.func @dispatch_capacity_probs(
// CHECK-SAME:      %[[X:.*]]: tensor<4x8xf32>, %[[IDS:.*]]: tensor<4x2xi32>, %[[W:.*]]: tensor<4x2xf32>)
// CHECK:         %[[RANKS:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction", "reduction"]} ins(%[[IDS]], %[[W]], %[[IDS]], %[[W]] : {{.*}}) outs(%{{.*}} : tensor<4x2xi32>)
// CHECK:           arith.cmpi eq
// CHECK:           arith.cmpf ogt
// CHECK:           arith.cmpf oeq
// CHECK:           arith.cmpi ult, %{{.*}}, %{{.*}} : index
// CHECK:         scf.for %[[T:[^ ]+]] =
// CHECK:           scf.for %[[J:[^ ]+]] =
// CHECK:             %[[FITS:.*]] = arith.cmpi slt, %{{.*}}, %[[C:.*]] : i32
// CHECK:             %[[RANK:.*]] = tensor.extract %[[RANKS]][%[[T]], %[[J]]]
// CHECK:             %[[RANKED:.*]] = arith.cmpi slt, %[[RANK]], %[[C]] : i32
// CHECK:             %[[BOTH:.*]] = arith.andi %[[FITS]], %[[RANKED]]
// CHECK:             arith.andi %{{.*}}, %[[BOTH]]
// CHECK:         tensor.expand_shape {{.*}} into tensor<3x2x8xf32>
func.func @dispatch_capacity_probs(%x: tensor<4x8xf32>, %ids: tensor<4x2xi32>,
                                   %w: tensor<4x2xf32>)
    -> (tensor<3x2x8xf32>, tensor<4x2xi32>, tensor<3xi32>, tensor<i64>) {
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids capacity 2 drop probs by %w
      : (tensor<4x8xf32>, tensor<4x2xi32>, tensor<4x2xf32>)
     -> (tensor<3x2x8xf32>, tensor<4x2xi32>, tensor<3xi32>, tensor<i64>)
  return %rows, %slots, %counts, %dropped
      : tensor<3x2x8xf32>, tensor<4x2xi32>, tensor<3xi32>, tensor<i64>
}

// -----

// Combine gathers row slots[t, j] for every output element, j innermost;
// slots outside the rows (-1) are skipped.

// CHECK-LABEL: func.func @combine(
// CHECK-SAME:      %[[ROWS:.*]]: tensor<8x16xf32>, %[[SLOTS:.*]]: tensor<4x2xi32>, %[[W:.*]]: tensor<4x2xf32>)
// CHECK:         %[[ZERO:.*]] = linalg.fill {{.*}} -> tensor<4x16xf32>
// CHECK:         %[[OUT:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[SLOTS]], %[[W]] : tensor<4x2xi32>, tensor<4x2xf32>) outs(%[[ZERO]] : tensor<4x16xf32>)
// CHECK-NEXT:    ^bb0(%[[SLOT:.*]]: i32, %[[WEIGHT:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK:           %[[N:.*]] = arith.constant 8 : i32
// CHECK:           %[[VALID:.*]] = arith.cmpi ult, %[[SLOT]], %[[N]] : i32
// CHECK:           %[[SAFE:.*]] = arith.select %[[VALID]], %[[SLOT]]
// CHECK:           %[[ROW:.*]] = arith.index_cast %[[SAFE]] : i32 to index
// CHECK:           %[[COL:.*]] = linalg.index 1 : index
// CHECK:           %[[V:.*]] = tensor.extract %[[ROWS]][%[[ROW]], %[[COL]]]
// CHECK:           %[[TERM:.*]] = arith.mulf %[[WEIGHT]], %[[V]]
// CHECK:           %[[SUM:.*]] = arith.addf %[[ACC]], %[[TERM]]
// CHECK:           %[[NEW:.*]] = arith.select %[[VALID]], %[[SUM]], %[[ACC]]
// CHECK:           linalg.yield %[[NEW]]
// CHECK:         return %[[OUT]]
// CHECK-NOT:     moe.combine
func.func @combine(%rows: tensor<8x16xf32>, %slots: tensor<4x2xi32>,
                   %w: tensor<4x2xf32>) -> tensor<4x16xf32> {
  %out = moe.combine %rows, %slots, %w
      : (tensor<8x16xf32>, tensor<4x2xi32>, tensor<4x2xf32>) -> tensor<4x16xf32>
  return %out : tensor<4x16xf32>
}

// -----

// Capacity rows are read as one flat list of rows.

// CHECK-LABEL: func.func @combine_capacity(
// CHECK-SAME:      %[[ROWS:.*]]: tensor<3x2x16xf32>,
// CHECK:         %[[FLAT:.*]] = tensor.collapse_shape %[[ROWS]] {{\[\[}}0, 1], [2]] : tensor<3x2x16xf32> into tensor<6x16xf32>
// CHECK:         linalg.generic
// CHECK:           arith.constant 6 : i32
// CHECK:           tensor.extract %[[FLAT]]
func.func @combine_capacity(%rows: tensor<3x2x16xf32>, %slots: tensor<4x2xi32>,
                            %w: tensor<4x2xf32>) -> tensor<4x16xf32> {
  %out = moe.combine %rows, %slots, %w
      : (tensor<3x2x16xf32>, tensor<4x2xi32>, tensor<4x2xf32>) -> tensor<4x16xf32>
  return %out : tensor<4x16xf32>
}

// -----

// A uniform exchange within one rank is the identity.

shard.grid @grid(shape = 1x4)

// CHECK-LABEL: func.func @all_to_all_uniform(
// CHECK-SAME:      %[[X:.*]]: tensor<2x4x8xf32>)
// CHECK-NEXT:    return %[[X]]
func.func @all_to_all_uniform(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %y = moe.all_to_all %x on @grid grid_axes = [0]
      : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// A ragged exchange within one rank keeps the counted rows and pads with
// zeros; more rows than the receive buffer holds stop the program.

shard.grid @grid(shape = 1)

// CHECK-LABEL: func.func @all_to_all_ragged(
// CHECK-SAME:      %[[X:.*]]: tensor<6x8xf32>, %[[COUNTS:.*]]: tensor<2xi32>)
// CHECK:         %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["reduction"]} ins(%[[COUNTS]] : tensor<2xi32>) outs(%{{.*}} : tensor<i32>)
// CHECK:         %[[TOTAL32:.*]] = tensor.extract %[[SUM]][]
// CHECK:         %[[TOTAL:.*]] = arith.index_cast %[[TOTAL32]] : i32 to index
// CHECK:         %[[R:.*]] = arith.constant 6 : index
// CHECK:         %[[SENDS:.*]] = arith.cmpi ule, %[[TOTAL]], %[[R]]
// CHECK:         cf.assert %[[SENDS]], "moe.all_to_all: the counts send more rows than the input holds"
// CHECK:         %[[CAP:.*]] = arith.constant 10 : index
// CHECK:         %[[FITS:.*]] = arith.cmpi ule, %[[TOTAL]], %[[CAP]]
// CHECK:         cf.assert %[[FITS]], "moe.all_to_all: the receive buffer overflowed
// CHECK:         %[[SENT:.*]] = tensor.extract_slice %[[X]][0, 0] [%[[TOTAL]], 8] [1, 1] : tensor<6x8xf32> to tensor<?x8xf32>
// CHECK:         %[[ZERO:.*]] = linalg.fill {{.*}} -> tensor<10x8xf32>
// CHECK:         %[[OUT:.*]] = tensor.insert_slice %[[SENT]] into %[[ZERO]][0, 0] [%[[TOTAL]], 8] [1, 1]
// CHECK:         return %[[OUT]], %[[COUNTS]]
// CHECK-NOT:     moe.all_to_all
func.func @all_to_all_ragged(%x: tensor<6x8xf32>, %counts: tensor<2xi32>)
    -> (tensor<10x8xf32>, tensor<2xi32>) {
  %y, %c = moe.all_to_all %x, %counts on @grid grid_axes = [0]
      : (tensor<6x8xf32>, tensor<2xi32>) -> (tensor<10x8xf32>, tensor<2xi32>)
  return %y, %c : tensor<10x8xf32>, tensor<2xi32>
}
