// RUN: moe-opt %s --convert-onnx-to-linalg --split-input-file | FileCheck %s

// A reduction drops its loops from the result map; keepdims reshapes.

// CHECK-DAG:   #[[ALL:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG:   #[[KEPT:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-LABEL: func.func @reduce_sum_keepdims(
// CHECK-SAME:      %[[X:.*]]: tensor<2x3x4xf32>)
// CHECK:         %[[INIT:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<2x4xf32>)
// CHECK:         %[[SUM:.*]] = linalg.generic {indexing_maps = [#[[ALL]], #[[KEPT]]], iterator_types = ["parallel", "reduction", "parallel"]}
// CHECK-SAME:        ins(%[[X]] : tensor<2x3x4xf32>) outs(%[[INIT]] : tensor<2x4xf32>)
// CHECK:           arith.addf
// CHECK:         %[[R:.*]] = tensor.expand_shape %[[SUM]] {{\[\[}}0], [1, 2]] output_shape [2, 1, 4]
// CHECK:         return %[[R]]
func.func @reduce_sum_keepdims(%x: tensor<2x3x4xf32>) -> tensor<2x1x4xf32> {
  %axes = arith.constant dense<[1]> : tensor<1xi64>
  %0 = onnx.ReduceSum %x, %axes : (tensor<2x3x4xf32>, tensor<1xi64>) -> tensor<2x1x4xf32>
  return %0 : tensor<2x1x4xf32>
}

// -----

// Axes as an attribute (older opsets); the mean divides by the count.

// CHECK-LABEL: func.func @reduce_mean_attr(
// CHECK:         %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
// CHECK:         linalg.generic {{.*}} ins(%[[SUM]] : tensor<2x3xf32>)
// CHECK:           %[[N:.*]] = arith.constant 4.000000e+00 : f32
// CHECK:           arith.divf %{{.*}}, %[[N]] : f32
func.func @reduce_mean_attr(%x: tensor<2x3x4xf32>) -> tensor<2x3xf32> {
  %0 = onnx.ReduceMean %x {axes = array<i64: -1>, keepdims = 0 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// No axes: every dim reduces; an integer max starts at the signed minimum.

// CHECK-LABEL: func.func @reduce_max_int(
// CHECK:         %[[LOW:.*]] = arith.constant -9223372036854775808 : i64
// CHECK:         linalg.fill ins(%[[LOW]] : i64) outs(%{{.*}} : tensor<i64>)
// CHECK:         linalg.generic {{.*}} iterator_types = ["reduction", "reduction"]
// CHECK:           arith.maxsi
func.func @reduce_max_int(%x: tensor<2x3xi64>) -> tensor<i64> {
  %0 = onnx.ReduceMax %x {keepdims = 0 : i64} : (tensor<2x3xi64>) -> tensor<i64>
  return %0 : tensor<i64>
}

// -----

// Softmax along axis 1: max, exp(x - max), sum, divide.

// CHECK-DAG:   #[[ROW:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-LABEL: func.func @softmax(
// CHECK-SAME:      %[[X:.*]]: tensor<2x3x4xf32>)
// CHECK:         %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK:         %[[MAX:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction", "parallel"]} ins(%[[X]] : tensor<2x3x4xf32>)
// CHECK:           arith.maximumf
// CHECK:         %[[EXP:.*]] = linalg.generic {indexing_maps = [#{{.*}}, #[[ROW]], #{{.*}}], {{.*}} ins(%[[X]], %[[MAX]] : tensor<2x3x4xf32>, tensor<2x4xf32>)
// CHECK:           arith.subf
// CHECK:           math.exp
// CHECK:         %[[SUM:.*]] = linalg.generic {{.*}} ins(%[[EXP]] : tensor<2x3x4xf32>)
// CHECK:           arith.addf
// CHECK:         %[[R:.*]] = linalg.generic {{.*}} ins(%[[EXP]], %[[SUM]] : tensor<2x3x4xf32>, tensor<2x4xf32>)
// CHECK:           arith.divf
// CHECK:         return %[[R]]
func.func @softmax(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %0 = onnx.Softmax %x {axis = 1 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// -----

// LayerNormalization: mean, variance of x - mean, 1 / sqrt(var + eps), then
// one map with scale and bias; the Mean output reshaped to [2, 1].

// CHECK-LABEL: func.func @layer_norm(
// CHECK-SAME:      %[[X:.*]]: tensor<2x4xf32>, %[[S:.*]]: tensor<4xf32>, %[[B:.*]]: tensor<4xf32>)
// CHECK:         %[[SUM:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<2x4xf32>)
// CHECK:         %[[MEAN:.*]] = linalg.generic {{.*}} ins(%[[SUM]] : tensor<2xf32>)
// CHECK:           arith.divf
// CHECK:         %[[SQ:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[MEAN]] : tensor<2x4xf32>, tensor<2xf32>)
// CHECK:           arith.subf
// CHECK:           arith.mulf
// CHECK:         %[[VAR:.*]] = linalg.generic {{.*}} ins(%[[SQ]] : tensor<2xf32>)
// CHECK:         %[[INV:.*]] = linalg.generic {{.*}} ins(%[[VAR]] : tensor<2xf32>)
// CHECK:           arith.constant 9.99999974E-6 : f32
// CHECK:           math.sqrt
// CHECK:           arith.divf
// CHECK:         %[[Y:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[MEAN]], %[[INV]], %[[S]], %[[B]] :
// CHECK:         %[[M:.*]] = tensor.expand_shape %[[MEAN]] {{\[\[}}0, 1]] output_shape [2, 1]
// CHECK:         return %[[Y]], %[[M]]
func.func @layer_norm(%x: tensor<2x4xf32>, %s: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x1xf32>) {
  %0, %1 = onnx.LayerNormalization %x, %s, %b {axis = -1 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x1xf32>)
  return %0, %1 : tensor<2x4xf32>, tensor<2x1xf32>
}

// -----

// ArgMax carries (value, index); the strict `>` keeps the first maximum.

// CHECK-LABEL: func.func @argmax(
// CHECK:         %[[BEST:.*]]:2 = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%{{.*}} : tensor<3x5xf32>) outs(%{{.*}}, %{{.*}} : tensor<3xf32>, tensor<3xi64>)
// CHECK-NEXT:    ^bb0(%[[X:.*]]: f32, %[[V:.*]]: f32, %[[I:.*]]: i64):
// CHECK-NEXT:      %[[GT:.*]] = arith.cmpf ogt, %[[X]], %[[V]] : f32
// CHECK-NEXT:      %[[J:.*]] = linalg.index 1 : index
// CHECK-NEXT:      %[[J64:.*]] = arith.index_cast %[[J]] : index to i64
// CHECK-NEXT:      %[[NV:.*]] = arith.select %[[GT]], %[[X]], %[[V]] : f32
// CHECK-NEXT:      %[[NI:.*]] = arith.select %[[GT]], %[[J64]], %[[I]] : i64
// CHECK-NEXT:      linalg.yield %[[NV]], %[[NI]]
// CHECK:         tensor.expand_shape %[[BEST]]#1 {{\[\[}}0, 1]] output_shape [3, 1]
func.func @argmax(%x: tensor<3x5xf32>) -> tensor<3x1xi64> {
  %0 = onnx.ArgMax %x {axis = 1 : i64} : (tensor<3x5xf32>) -> tensor<3x1xi64>
  return %0 : tensor<3x1xi64>
}

// -----

// TopK ranks each element in its row (larger, or equal and earlier, count),
// then slot r takes the element of rank r.

// CHECK-DAG:   #[[SELF:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG:   #[[OTHER:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-LABEL: func.func @topk(
// CHECK-SAME:      %[[X:.*]]: tensor<3x5xf32>)
// CHECK:         %[[RANK:.*]] = linalg.generic {indexing_maps = [#[[SELF]], #[[OTHER]], #[[SELF]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]], %[[X]] : tensor<3x5xf32>, tensor<3x5xf32>) outs(%{{.*}} : tensor<3x5xi64>)
// CHECK-NEXT:    ^bb0(%[[XI:.*]]: f32, %[[XJ:.*]]: f32, %[[N:.*]]: i64):
// CHECK-NEXT:      %[[GT:.*]] = arith.cmpf ogt, %[[XJ]], %[[XI]] : f32
// CHECK-NEXT:      %[[EQ:.*]] = arith.cmpf oeq, %[[XI]], %[[XJ]] : f32
// CHECK-NEXT:      %[[J:.*]] = linalg.index 2 : index
// CHECK-NEXT:      %[[I:.*]] = linalg.index 1 : index
// CHECK-NEXT:      %[[EARLIER:.*]] = arith.cmpi ult, %[[J]], %[[I]] : index
// CHECK-NEXT:      %[[TIE:.*]] = arith.andi %[[EQ]], %[[EARLIER]] : i1
// CHECK-NEXT:      %[[BEFORE:.*]] = arith.ori %[[GT]], %[[TIE]] : i1
// CHECK:         %[[TOP:.*]]:2 = linalg.generic {indexing_maps = [#[[OTHER]], #[[OTHER]], #[[SELF]], #[[SELF]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]], %[[RANK]] : tensor<3x5xf32>, tensor<3x5xi64>) outs(%{{.*}}, %{{.*}} : tensor<3x2xf32>, tensor<3x2xi64>)
// CHECK:           arith.cmpi eq
// CHECK:         return %[[TOP]]#0, %[[TOP]]#1
func.func @topk(%x: tensor<3x5xf32>) -> (tensor<3x2xf32>, tensor<3x2xi64>) {
  %k = arith.constant dense<2> : tensor<1xi64>
  %0, %1 = onnx.TopK %x, %k {axis = -1 : i64, largest = 1 : i64, sorted = 1 : i64} : (tensor<3x5xf32>, tensor<1xi64>) -> (tensor<3x2xf32>, tensor<3x2xi64>)
  return %0, %1 : tensor<3x2xf32>, tensor<3x2xi64>
}

// -----

// CumSum sums the elements j of the row on the chosen side of i.

// CHECK-LABEL: func.func @cumsum_reverse(
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
// CHECK:           %[[J:.*]] = linalg.index 2 : index
// CHECK:           %[[I:.*]] = linalg.index 1 : index
// CHECK:           %[[IN:.*]] = arith.cmpi uge, %[[J]], %[[I]] : index
// CHECK:           arith.select %[[IN]]
func.func @cumsum_reverse(%x: tensor<3x5xi64>) -> tensor<3x5xi64> {
  %axis = arith.constant dense<1> : tensor<i32>
  %0 = onnx.CumSum %x, %axis {reverse = 1 : i64} : (tensor<3x5xi64>, tensor<i32>) -> tensor<3x5xi64>
  return %0 : tensor<3x5xi64>
}
