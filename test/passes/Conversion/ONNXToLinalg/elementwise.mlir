// RUN: moe-opt %s --convert-onnx-to-linalg --split-input-file | FileCheck %s

// NumPy broadcasting: operands align on trailing dims; a missing dim is not
// read, a size-1 dim that the result widens reads index 0.

// CHECK-DAG:   #[[ID:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG:   #[[ROW:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @add_broadcast(
// CHECK-SAME:      %[[A:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<3xf32>)
// CHECK:         %[[INIT:.*]] = tensor.empty() : tensor<2x3xf32>
// CHECK:         %[[SUM:.*]] = linalg.generic {indexing_maps = [#[[ID]], #[[ROW]], #[[ID]]], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME:        ins(%[[A]], %[[B]] : tensor<2x3xf32>, tensor<3xf32>) outs(%[[INIT]] : tensor<2x3xf32>)
// CHECK-NEXT:    ^bb0(%[[X:.*]]: f32, %[[Y:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[X]], %[[Y]] : f32
// CHECK-NEXT:      linalg.yield %[[S]] : f32
// CHECK:         return %[[SUM]]
func.func @add_broadcast(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  %0 = onnx.Add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// CHECK-DAG:   #[[COL0:.*]] = affine_map<(d0, d1) -> (d0, 0)>
// CHECK-DAG:   #[[ROW0:.*]] = affine_map<(d0, d1) -> (0, d1)>
// CHECK-LABEL: func.func @mul_both_ways(
// CHECK:         linalg.generic {indexing_maps = [#[[COL0]], #[[ROW0]], #{{.*}}]
// CHECK:           arith.muli %{{.*}}, %{{.*}} : i64
func.func @mul_both_ways(%a: tensor<2x1xi64>, %b: tensor<1x3xi64>) -> tensor<2x3xi64> {
  %0 = onnx.Mul %a, %b : (tensor<2x1xi64>, tensor<1x3xi64>) -> tensor<2x3xi64>
  return %0 : tensor<2x3xi64>
}

// -----

// Variadic Max over a vector, a scalar and a one-element vector.

// CHECK-DAG:   #[[SCALAR:.*]] = affine_map<(d0) -> ()>
// CHECK-DAG:   #[[FIRST:.*]] = affine_map<(d0) -> (0)>
// CHECK-LABEL: func.func @max_variadic(
// CHECK:         linalg.generic {indexing_maps = [#{{.*}}, #[[SCALAR]], #[[FIRST]], #{{.*}}]
// CHECK-NEXT:    ^bb0(%[[A:.*]]: i32, %[[B:.*]]: i32, %[[C:.*]]: i32, %{{.*}}: i32):
// CHECK-NEXT:      %[[AB:.*]] = arith.maxsi %[[A]], %[[B]] : i32
// CHECK-NEXT:      %[[ABC:.*]] = arith.maxsi %[[AB]], %[[C]] : i32
// CHECK-NEXT:      linalg.yield %[[ABC]]
func.func @max_variadic(%a: tensor<4xi32>, %b: tensor<i32>, %c: tensor<1xi32>) -> tensor<4xi32> {
  %0 = onnx.Max %a, %b, %c : (tensor<4xi32>, tensor<i32>, tensor<1xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// A missing Clip bound is not read; the unused onnx.none goes away.

// CHECK-LABEL: func.func @clip_max_only(
// CHECK-SAME:      %[[X:.*]]: tensor<4xf32>, %[[HI:.*]]: tensor<f32>)
// CHECK-NOT:     onnx.none
// CHECK:         linalg.generic {{.*}} ins(%[[X]], %[[HI]] : tensor<4xf32>, tensor<f32>)
// CHECK-NEXT:    ^bb0(%[[V:.*]]: f32, %[[H:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[M:.*]] = arith.minimumf %[[V]], %[[H]] : f32
// CHECK-NEXT:      linalg.yield %[[M]]
func.func @clip_max_only(%x: tensor<4xf32>, %hi: tensor<f32>) -> tensor<4xf32> {
  %none = onnx.none
  %0 = onnx.Clip %x, %none, %hi : (tensor<4xf32>, none, tensor<f32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Comparisons yield i1; Where selects.

// CHECK-LABEL: func.func @where_less(
// CHECK-SAME:      %[[A:.*]]: tensor<4xf32>, %[[B:.*]]: tensor<4xf32>)
// CHECK:         %[[LESS:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<4xi1>)
// CHECK:           arith.cmpf olt
// CHECK:         linalg.generic {{.*}} ins(%[[LESS]], %[[A]], %[[B]] : tensor<4xi1>, tensor<4xf32>, tensor<4xf32>)
// CHECK:           arith.select
func.func @where_less(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %c = onnx.Less %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %0 = onnx.Where %c, %a, %b : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Not is xor with true; And on booleans.

// CHECK-LABEL: func.func @not_and(
// CHECK:         arith.constant true
// CHECK:         arith.xori
// CHECK:         arith.andi
func.func @not_and(%a: tensor<4xi1>, %b: tensor<4xi1>) -> tensor<4xi1> {
  %0 = onnx.Not %a : (tensor<4xi1>) -> tensor<4xi1>
  %1 = onnx.And %0, %b : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  return %1 : tensor<4xi1>
}

// -----

// Cast: float to int truncates, to bool is `!= 0`, to the same type is the
// operand itself.

// CHECK-LABEL: func.func @cast(
// CHECK-SAME:      %[[X:.*]]: tensor<4xf32>)
// CHECK:         %[[I:.*]] = linalg.generic
// CHECK:           arith.fptosi %{{.*}} : f32 to i64
// CHECK:         %[[B:.*]] = linalg.generic
// CHECK:           arith.cmpf une
// CHECK:         return %[[I]], %[[B]], %[[X]]
func.func @cast(%x: tensor<4xf32>) -> (tensor<4xi64>, tensor<4xi1>, tensor<4xf32>) {
  %0 = onnx.Cast %x {to = 7 : i64} : (tensor<4xf32>) -> tensor<4xi64>
  %1 = onnx.Cast %x {to = 9 : i64} : (tensor<4xf32>) -> tensor<4xi1>
  %2 = onnx.Cast %x {to = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %0, %1, %2 : tensor<4xi64>, tensor<4xi1>, tensor<4xf32>
}

// -----

// Unary float ops, one generic each.

// CHECK-LABEL: func.func @unary(
// CHECK:         linalg.generic
// CHECK:           arith.negf
// CHECK:           math.exp
// CHECK:           arith.divf
// CHECK:         linalg.generic
// CHECK:           math.erf
// CHECK:         linalg.generic
// CHECK:           arith.maximumf
func.func @unary(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = onnx.Sigmoid %x : (tensor<4xf32>) -> tensor<4xf32>
  %1 = onnx.Erf %0 : (tensor<4xf32>) -> tensor<4xf32>
  %2 = onnx.Relu %1 : (tensor<4xf32>) -> tensor<4xf32>
  return %2 : tensor<4xf32>
}

// -----

// An integer exponent converts to the base's type.

// CHECK-LABEL: func.func @pow_int_exponent(
// CHECK:         ^bb0(%[[X:.*]]: f32, %[[E:.*]]: i64, %{{.*}}: f32):
// CHECK-NEXT:      %[[EF:.*]] = arith.sitofp %[[E]] : i64 to f32
// CHECK-NEXT:      %[[P:.*]] = math.powf %[[X]], %[[EF]] : f32
func.func @pow_int_exponent(%x: tensor<4xf32>, %e: tensor<i64>) -> tensor<4xf32> {
  %0 = onnx.Pow %x, %e : (tensor<4xf32>, tensor<i64>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
