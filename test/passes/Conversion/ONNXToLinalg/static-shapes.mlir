// RUN: moe-opt %s --convert-onnx-to-linalg --split-input-file | FileCheck %s

// Shape computations on constants fold to constants; the result types they
// leave dynamic are inferred. Users outside the onnx dialect (return) see the
// declared type through a tensor.cast.

// CHECK-LABEL: func.func @computed_reshape(
// CHECK-SAME:      %[[X:.*]]: tensor<2x3x4xf32>) -> tensor<?x?xf32>
// CHECK-DAG:     arith.constant dense<[2, 3, 4]> : tensor<3xi64>
// CHECK-DAG:     arith.constant dense<[2, -1]> : tensor<2xi64>
// CHECK-NOT:     onnx.
// CHECK:         tensor.collapse_shape %[[X]] {{\[\[}}0], [1, 2]] : tensor<2x3x4xf32> into tensor<2x12xf32>
// CHECK:         %[[RELU:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<2x12xf32>)
// CHECK:         %[[CAST:.*]] = tensor.cast %[[RELU]] : tensor<2x12xf32> to tensor<?x?xf32>
// CHECK:         return %[[CAST]]
func.func @computed_reshape(%x: tensor<2x3x4xf32>) -> tensor<?x?xf32> {
  %shape = onnx.Shape %x : (tensor<2x3x4xf32>) -> tensor<3xi64>
  %i = arith.constant dense<[0]> : tensor<1xi64>
  %first = onnx.Gather %shape, %i {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
  %minus1 = arith.constant dense<[-1]> : tensor<1xi64>
  %target = onnx.Concat %first, %minus1 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %0 = onnx.Reshape %x, %target : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  %1 = onnx.Relu %0 : (tensor<?x?xf32>) -> tensor<?x?xf32>
  return %1 : tensor<?x?xf32>
}

// -----

// The attention-mask form of exported decoders: Expand to
// Where(Equal(shape, ConstantOfShape * -1), ones, shape).

// CHECK-LABEL: func.func @expand_where(
// CHECK-DAG:     arith.constant dense<[false, false, true, true]> : tensor<4xi1>
// CHECK-DAG:     arith.constant dense<[1, 2, 1, 1]> : tensor<4xi64>
// CHECK:         %[[MASK:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<1x1x4x4xf32>) outs(%{{.*}} : tensor<1x2x4x4xf32>)
// CHECK:         linalg.generic {{.*}} ins(%{{.*}}, %[[MASK]] : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>)
// CHECK:           arith.addf
func.func @expand_where(%mask: tensor<1x1x4x4xf32>, %s: tensor<1x2x4x4xf32>) -> tensor<?x2x4x4xf32> {
  %shape = arith.constant dense<[1, 2, -1, -1]> : tensor<4xi64>
  %four = arith.constant dense<4> : tensor<1xi64>
  %ones = onnx.ConstantOfShape %four {value = dense<1> : tensor<1xi64>} : (tensor<1xi64>) -> tensor<4xi64>
  %neg = arith.constant dense<-1> : tensor<i64>
  %m = onnx.Mul %ones, %neg : (tensor<4xi64>, tensor<i64>) -> tensor<4xi64>
  %eq = onnx.Equal %shape, %m : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi1>
  %target = onnx.Where %eq, %ones, %shape : (tensor<4xi1>, tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  %e = onnx.Expand %mask, %target : (tensor<1x1x4x4xf32>, tensor<4xi64>) -> tensor<?x?x4x4xf32>
  %0 = onnx.Add %s, %e : (tensor<1x2x4x4xf32>, tensor<?x?x4x4xf32>) -> tensor<?x2x4x4xf32>
  return %0 : tensor<?x2x4x4xf32>
}

// -----

// A capacity computed in floats from Shape: OneHot's depth ceil(6 / 4) = 2.

// CHECK-LABEL: func.func @capacity(
// CHECK:         arith.constant dense<2.000000e+00> : tensor<1xf32>
// CHECK:         %[[HOT:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<6x2xi64>)
// CHECK:         %[[CAST:.*]] = tensor.cast %[[HOT]] : tensor<6x2xi64> to tensor<6x?xi64>
// CHECK:         return %[[CAST]]
func.func @capacity(%ids: tensor<6xi64>) -> tensor<6x?xi64> {
  %shape = onnx.Shape %ids : (tensor<6xi64>) -> tensor<1xi64>
  %n = onnx.Cast %shape {to = 1 : i64} : (tensor<1xi64>) -> tensor<1xf32>
  %e = arith.constant dense<4.0> : tensor<f32>
  %q = onnx.Div %n, %e : (tensor<1xf32>, tensor<f32>) -> tensor<1xf32>
  %cap = onnx.Ceil %q : (tensor<1xf32>) -> tensor<1xf32>
  %values = arith.constant dense<[0, 1]> : tensor<2xi64>
  %0 = onnx.OneHot %ids, %cap, %values {axis = -1 : i64} : (tensor<6xi64>, tensor<1xf32>, tensor<2xi64>) -> tensor<6x?xi64>
  return %0 : tensor<6x?xi64>
}

// -----

// Range, ConstantOfShape (a splat) and Size of constants and static shapes.

// CHECK-LABEL: func.func @constants(
// CHECK:         %[[RANGE:.*]] = arith.constant dense<[1, 4, 7]> : tensor<3xi64>
// CHECK-NEXT:    %[[CAST:.*]] = tensor.cast %[[RANGE]] : tensor<3xi64> to tensor<?xi64>
// CHECK:         %[[FILL:.*]] = arith.constant dense<2.500000e+00> : tensor<2x3xf32>
// CHECK-NEXT:    %[[SIZE:.*]] = arith.constant dense<6> : tensor<i64>
// CHECK:         return %[[CAST]], %[[FILL]], %[[SIZE]]
func.func @constants() -> (tensor<?xi64>, tensor<2x3xf32>, tensor<i64>) {
  %a = arith.constant dense<1> : tensor<i64>
  %b = arith.constant dense<10> : tensor<i64>
  %c = arith.constant dense<3> : tensor<i64>
  %0 = onnx.Range %a, %b, %c : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  %s = arith.constant dense<[2, 3]> : tensor<2xi64>
  %1 = onnx.ConstantOfShape %s {value = dense<2.5> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<2x3xf32>
  %2 = onnx.Size %1 : (tensor<2x3xf32>) -> tensor<i64>
  return %0, %1, %2 : tensor<?xi64>, tensor<2x3xf32>, tensor<i64>
}

// -----

// Shape operands may be dense_resource blobs (importers keep initializers
// as resources).

// CHECK-LABEL: func.func @resource_shape(
// CHECK-SAME:      %[[X:.*]]: tensor<2x6xf32>)
// CHECK:         %[[R:.*]] = tensor.expand_shape %{{.*}} output_shape [3, 4] : tensor<12xf32> into tensor<3x4xf32>
// CHECK:         tensor.cast %[[R]] : tensor<3x4xf32> to tensor<?x?xf32>
func.func @resource_shape(%x: tensor<2x6xf32>) -> tensor<?x?xf32> {
  %s = arith.constant dense_resource<target> : tensor<2xi64>
  %0 = onnx.Reshape %x, %s : (tensor<2x6xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

{-#
  dialect_resources: {
    builtin: {
      target: "0x0800000003000000000000000400000000000000"
    }
  }
#-}
