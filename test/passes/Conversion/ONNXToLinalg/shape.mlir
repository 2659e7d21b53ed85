// RUN: moe-opt %s --convert-onnx-to-linalg --split-input-file | FileCheck %s

// Reshape-like ops become one collapse or expansion where the dims group,
// else a collapse to one dim and an expansion (0 copies a dim, -1 is
// inferred).

// CHECK-LABEL: func.func @reshape(
// CHECK-SAME:      %[[X:.*]]: tensor<2x3x4xf32>)
// CHECK:         %[[R:.*]] = tensor.collapse_shape %[[X]] {{\[\[}}0], [1, 2]] : tensor<2x3x4xf32> into tensor<2x12xf32>
// CHECK:         return %[[R]]
func.func @reshape(%x: tensor<2x3x4xf32>) -> tensor<2x12xf32> {
  %s = arith.constant dense<[0, -1]> : tensor<2xi64>
  %0 = onnx.Reshape %x, %s : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<2x12xf32>
  return %0 : tensor<2x12xf32>
}

// -----

// CHECK-LABEL: func.func @reshape_regroup(
// CHECK-SAME:      %[[X:.*]]: tensor<2x3x4xf32>)
// CHECK:         %[[FLAT:.*]] = tensor.collapse_shape %[[X]] {{\[\[}}0, 1, 2]] : tensor<2x3x4xf32> into tensor<24xf32>
// CHECK:         %[[R:.*]] = tensor.expand_shape %[[FLAT]] {{\[\[}}0, 1, 2]] output_shape [4, 3, 2] : tensor<24xf32> into tensor<4x3x2xf32>
// CHECK:         return %[[R]]
func.func @reshape_regroup(%x: tensor<2x3x4xf32>) -> tensor<4x3x2xf32> {
  %s = arith.constant dense<[4, 0, -1]> : tensor<3xi64>
  %0 = onnx.Reshape %x, %s : (tensor<2x3x4xf32>, tensor<3xi64>) -> tensor<4x3x2xf32>
  return %0 : tensor<4x3x2xf32>
}

// -----

// CHECK-LABEL: func.func @unsqueeze_flatten(
// CHECK-SAME:      %[[X:.*]]: tensor<3xf32>, %[[Y:.*]]: tensor<2x3x4xf32>)
// CHECK:         %[[U:.*]] = tensor.expand_shape %[[X]] {{\[\[}}0, 1, 2]] output_shape [1, 3, 1] : tensor<3xf32> into tensor<1x3x1xf32>
// CHECK:         %[[F:.*]] = tensor.collapse_shape %[[Y]] {{\[\[}}0, 1], [2]] : tensor<2x3x4xf32> into tensor<6x4xf32>
// CHECK:         return %[[U]], %[[F]]
func.func @unsqueeze_flatten(%x: tensor<3xf32>, %y: tensor<2x3x4xf32>) -> (tensor<1x3x1xf32>, tensor<6x4xf32>) {
  %axes = arith.constant dense<[0, -1]> : tensor<2xi64>
  %0 = onnx.Unsqueeze %x, %axes : (tensor<3xf32>, tensor<2xi64>) -> tensor<1x3x1xf32>
  %1 = onnx.Flatten %y {axis = 2 : i64} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  return %0, %1 : tensor<1x3x1xf32>, tensor<6x4xf32>
}

// -----

// CHECK-LABEL: func.func @squeeze_to_scalar(
// CHECK-SAME:      %[[X:.*]]: tensor<1x1xi64>)
// CHECK:         %[[S:.*]] = tensor.collapse_shape %[[X]] [] : tensor<1x1xi64> into tensor<i64>
// CHECK:         return %[[S]]
func.func @squeeze_to_scalar(%x: tensor<1x1xi64>) -> tensor<i64> {
  %0 = onnx.Squeeze %x : (tensor<1x1xi64>) -> tensor<i64>
  return %0 : tensor<i64>
}

// -----

// CHECK-LABEL: func.func @transpose(
// CHECK-SAME:      %[[X:.*]]: tensor<2x3x4xf32>)
// CHECK:         %[[INIT:.*]] = tensor.empty() : tensor<4x2x3xf32>
// CHECK:         %[[T:.*]] = linalg.transpose ins(%[[X]] : tensor<2x3x4xf32>) outs(%[[INIT]] : tensor<4x2x3xf32>) permutation = [2, 0, 1]
// CHECK:         return %[[T]]
func.func @transpose(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  %0 = onnx.Transpose %x {perm = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  return %0 : tensor<4x2x3xf32>
}

// -----

// Concat inserts slices into an empty tensor; Split extracts them.

// CHECK-LABEL: func.func @concat_split(
// CHECK-SAME:      %[[A:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<2x1xf32>)
// CHECK:         %[[INIT:.*]] = tensor.empty() : tensor<2x4xf32>
// CHECK:         %[[AA:.*]] = tensor.insert_slice %[[A]] into %[[INIT]][0, 0] [2, 3] [1, 1]
// CHECK:         %[[AB:.*]] = tensor.insert_slice %[[B]] into %[[AA]][0, 3] [2, 1] [1, 1]
// CHECK:         %[[P0:.*]] = tensor.extract_slice %[[AB]][0, 0] [2, 1] [1, 1] : tensor<2x4xf32> to tensor<2x1xf32>
// CHECK:         %[[P1:.*]] = tensor.extract_slice %[[AB]][0, 1] [2, 3] [1, 1] : tensor<2x4xf32> to tensor<2x3xf32>
// CHECK:         return %[[P0]], %[[P1]]
func.func @concat_split(%a: tensor<2x3xf32>, %b: tensor<2x1xf32>) -> (tensor<2x1xf32>, tensor<2x3xf32>) {
  %0 = onnx.Concat %a, %b {axis = -1 : i64} : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  %s = arith.constant dense<[1, 3]> : tensor<2xi64>
  %1, %2 = onnx.Split %0, %s {axis = 1 : i64} : (tensor<2x4xf32>, tensor<2xi64>) -> (tensor<2x1xf32>, tensor<2x3xf32>)
  return %1, %2 : tensor<2x1xf32>, tensor<2x3xf32>
}

// -----

// Slice clamps starts and ends (negative ones count from the end); positive
// steps are a strided extract_slice, a negative step reads element by
// element from the start down.

// CHECK-LABEL: func.func @slice(
// CHECK-SAME:      %[[X:.*]]: tensor<4x6xf32>)
// CHECK:         %[[S:.*]] = tensor.extract_slice %[[X]][1, 1] [3, 2] [1, 2] : tensor<4x6xf32> to tensor<3x2xf32>
// CHECK:         %[[R:.*]] = linalg.generic
// CHECK:           %[[J:.*]] = linalg.index 1 : index
// CHECK:           %[[STEP:.*]] = arith.constant -2 : index
// CHECK:           %[[JS:.*]] = arith.muli %[[J]], %[[STEP]] : index
// CHECK:           %[[START:.*]] = arith.constant 5 : index
// CHECK:           %[[COL:.*]] = arith.addi %[[JS]], %[[START]] : index
// CHECK:           tensor.extract %[[X]][%{{.*}}, %[[COL]]] : tensor<4x6xf32>
// CHECK:         return %[[S]], %[[R]]
func.func @slice(%x: tensor<4x6xf32>) -> (tensor<3x2xf32>, tensor<4x3xf32>) {
  %starts = arith.constant dense<[1, -5]> : tensor<2xi64>
  %ends = arith.constant dense<[9223372036854775807, 5]> : tensor<2xi64>
  %axes = arith.constant dense<[0, 1]> : tensor<2xi64>
  %steps = arith.constant dense<[1, 2]> : tensor<2xi64>
  %0 = onnx.Slice %x, %starts, %ends, %axes, %steps : (tensor<4x6xf32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<3x2xf32>
  %rs = arith.constant dense<[-1]> : tensor<1xi64>
  %re = arith.constant dense<[-9223372036854775807]> : tensor<1xi64>
  %ra = arith.constant dense<[1]> : tensor<1xi64>
  %rst = arith.constant dense<[-2]> : tensor<1xi64>
  %1 = onnx.Slice %x, %rs, %re, %ra, %rst : (tensor<4x6xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4x3xf32>
  return %0, %1 : tensor<3x2xf32>, tensor<4x3xf32>
}

// -----

// Expand is a broadcast copy.

// CHECK-DAG:   #[[IN:.*]] = affine_map<(d0, d1, d2) -> (d1, 0)>
// CHECK-DAG:   #[[OUT:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @expand(
// CHECK:         linalg.generic {indexing_maps = [#[[IN]], #[[OUT]]]
// CHECK-NEXT:    ^bb0(%[[V:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      linalg.yield %[[V]] : f32
func.func @expand(%x: tensor<3x1xf32>) -> tensor<2x3x4xf32> {
  %s = arith.constant dense<[2, 1, 4]> : tensor<3xi64>
  %0 = onnx.Expand %x, %s : (tensor<3x1xf32>, tensor<3xi64>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// -----

// CHECK-LABEL: func.func @identity(
// CHECK-SAME:      %[[X:.*]]: tensor<3xf32>)
// CHECK-NEXT:    return %[[X]]
func.func @identity(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = onnx.Identity %x : (tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}
