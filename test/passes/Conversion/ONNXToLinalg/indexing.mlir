// RUN: moe-opt %s --convert-onnx-to-linalg --split-input-file | FileCheck %s

// Gather: a generic over the result reads the index through a map, wraps a
// negative one, and extracts from the data (after a check of the indices,
// index-checks.mlir).

// CHECK-DAG:   #[[IDX:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-LABEL: func.func @gather(
// CHECK-SAME:      %[[D:.*]]: tensor<3x4xf32>, %[[I:.*]]: tensor<2x2xi64>)
// CHECK:         linalg.generic {indexing_maps = [#[[IDX]], #{{.*}}], {{.*}} ins(%[[I]] : tensor<2x2xi64>) outs(%{{.*}} : tensor<3x2x2xf32>)
// CHECK-NEXT:    ^bb0(%[[V:.*]]: i64, %{{.*}}: f32):
// CHECK-NEXT:      %[[ROW:.*]] = linalg.index 0 : index
// CHECK-NEXT:      %[[COL:.*]] = arith.index_cast %[[V]] : i64 to index
// CHECK-NEXT:      %[[ZERO:.*]] = arith.constant 0 : index
// CHECK-NEXT:      %[[NEG:.*]] = arith.cmpi slt, %[[COL]], %[[ZERO]] : index
// CHECK-NEXT:      %[[FOUR:.*]] = arith.constant 4 : index
// CHECK-NEXT:      %[[UP:.*]] = arith.addi %[[COL]], %[[FOUR]] : index
// CHECK-NEXT:      %[[W:.*]] = arith.select %[[NEG]], %[[UP]], %[[COL]] : index
// CHECK-NEXT:      %[[E:.*]] = tensor.extract %[[D]][%[[ROW]], %[[W]]] : tensor<3x4xf32>
// CHECK-NEXT:      linalg.yield %[[E]]
func.func @gather(%d: tensor<3x4xf32>, %i: tensor<2x2xi64>) -> tensor<3x2x2xf32> {
  %0 = onnx.Gather %d, %i {axis = 1 : i64} : (tensor<3x4xf32>, tensor<2x2xi64>) -> tensor<3x2x2xf32>
  return %0 : tensor<3x2x2xf32>
}

// -----

// CHECK-LABEL: func.func @gather_elements(
// CHECK-SAME:      %[[D:.*]]: tensor<3x4xf32>, %[[I:.*]]: tensor<3x2xi32>)
// CHECK:         linalg.generic {{.*}} ins(%[[I]] : tensor<3x2xi32>) outs(%{{.*}} : tensor<3x2xf32>)
// CHECK-NEXT:    ^bb0(%[[V:.*]]: i32, %{{.*}}: f32):
// CHECK-NEXT:      %[[ROW:.*]] = linalg.index 0 : index
// CHECK:           %[[COL:.*]] = arith.index_cast %[[V]] : i32 to index
// CHECK:           %[[W:.*]] = arith.select %{{.*}}, %{{.*}}, %[[COL]] : index
// CHECK-NEXT:      tensor.extract %[[D]][%[[ROW]], %[[W]]] : tensor<3x4xf32>
func.func @gather_elements(%d: tensor<3x4xf32>, %i: tensor<3x2xi32>) -> tensor<3x2xf32> {
  %0 = onnx.GatherElements %d, %i {axis = 1 : i64} : (tensor<3x4xf32>, tensor<3x2xi32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

// GatherND reads each component of the index tuple.

// CHECK-LABEL: func.func @gather_nd(
// CHECK-SAME:      %[[D:.*]]: tensor<3x4x5xf32>, %[[I:.*]]: tensor<2x2xi64>)
// CHECK:         linalg.generic {{.*}} outs(%{{.*}} : tensor<2x5xf32>)
// CHECK:           %[[T:.*]] = linalg.index 0 : index
// CHECK:           tensor.extract %[[I]][%[[T]], %{{.*}}] : tensor<2x2xi64>
// CHECK:           %[[A:.*]] = arith.select
// CHECK:           tensor.extract %[[I]][%[[T]], %{{.*}}] : tensor<2x2xi64>
// CHECK:           %[[B:.*]] = arith.select
// CHECK:           %[[C:.*]] = linalg.index 1 : index
// CHECK:           tensor.extract %[[D]][%[[A]], %[[B]], %[[C]]] : tensor<3x4x5xf32>
func.func @gather_nd(%d: tensor<3x4x5xf32>, %i: tensor<2x2xi64>) -> tensor<2x5xf32> {
  %0 = onnx.GatherND %d, %i : (tensor<3x4x5xf32>, tensor<2x2xi64>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

// Scatters write the updates in order in an scf.for nest over them, into the
// data; `add` combines with the element there.

// CHECK-LABEL: func.func @scatter_elements_add(
// CHECK-SAME:      %[[D:.*]]: tensor<3x4xf32>, %[[I:.*]]: tensor<3x2xi64>, %[[U:.*]]: tensor<3x2xf32>)
// CHECK:         %[[R:.*]] = scf.for %[[R0:.*]] = {{.*}} iter_args(%[[OUTER:.*]] = %[[D]]) -> (tensor<3x4xf32>)
// CHECK:           scf.for %[[C0:.*]] = {{.*}} iter_args(%[[ACC:.*]] = %[[OUTER]]) -> (tensor<3x4xf32>)
// CHECK:             tensor.extract %[[I]][%[[R0]], %[[C0]]]
// CHECK:             %[[COL:.*]] = arith.select
// CHECK:             %[[NEW:.*]] = tensor.extract %[[U]][%[[R0]], %[[C0]]]
// CHECK:             %[[OLD:.*]] = tensor.extract %[[ACC]][%[[R0]], %[[COL]]]
// CHECK:             %[[SUM:.*]] = arith.addf %[[OLD]], %[[NEW]] : f32
// CHECK:             %[[INS:.*]] = tensor.insert %[[SUM]] into %[[ACC]][%[[R0]], %[[COL]]]
// CHECK:             scf.yield %[[INS]]
// CHECK:         return %[[R]]
func.func @scatter_elements_add(%d: tensor<3x4xf32>, %i: tensor<3x2xi64>, %u: tensor<3x2xf32>) -> tensor<3x4xf32> {
  %0 = onnx.ScatterElements %d, %i, %u {axis = 1 : i64, reduction = "add"} : (tensor<3x4xf32>, tensor<3x2xi64>, tensor<3x2xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// CHECK-LABEL: func.func @scatter_nd(
// CHECK-SAME:      %[[D:.*]]: tensor<3x4xf32>, %[[I:.*]]: tensor<2x1xi64>, %[[U:.*]]: tensor<2x4xf32>)
// CHECK:         scf.for %[[ROW:.*]] = {{.*}} iter_args(%{{.*}} = %[[D]])
// CHECK:           scf.for %[[COL:.*]] = {{.*}} iter_args(%[[ACC:.*]] = %{{.*}})
// CHECK:             tensor.extract %[[I]][%[[ROW]], %{{.*}}] : tensor<2x1xi64>
// CHECK:             %[[TARGET:.*]] = arith.select
// CHECK:             %[[NEW:.*]] = tensor.extract %[[U]][%[[ROW]], %[[COL]]]
// CHECK-NEXT:        tensor.insert %[[NEW]] into %[[ACC]][%[[TARGET]], %[[COL]]]
func.func @scatter_nd(%d: tensor<3x4xf32>, %i: tensor<2x1xi64>, %u: tensor<2x4xf32>) -> tensor<3x4xf32> {
  %0 = onnx.ScatterND %d, %i, %u : (tensor<3x4xf32>, tensor<2x1xi64>, tensor<2x4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// OneHot along axis 0: the index is compared with loop 0.

// CHECK-DAG:   #[[IDX:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @one_hot(
// CHECK-SAME:      %[[I:.*]]: tensor<3xi64>)
// CHECK:         %[[OFF:.*]] = tensor.extract %{{.*}}[%{{.*}}] : tensor<2xf32>
// CHECK:         %[[ON:.*]] = tensor.extract %{{.*}}[%{{.*}}] : tensor<2xf32>
// CHECK:         linalg.generic {indexing_maps = [#[[IDX]], #{{.*}}], {{.*}} ins(%[[I]] : tensor<3xi64>) outs(%{{.*}} : tensor<4x3xf32>)
// CHECK:           %[[W:.*]] = arith.select
// CHECK-NEXT:      %[[POS:.*]] = linalg.index 0 : index
// CHECK-NEXT:      %[[HIT:.*]] = arith.cmpi eq, %[[W]], %[[POS]] : index
// CHECK-NEXT:      arith.select %[[HIT]], %[[ON]], %[[OFF]] : f32
func.func @one_hot(%i: tensor<3xi64>) -> tensor<4x3xf32> {
  %depth = arith.constant dense<4> : tensor<i64>
  %values = arith.constant dense<[0.0, 1.0]> : tensor<2xf32>
  %0 = onnx.OneHot %i, %depth, %values {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>, tensor<2xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// Trilu keeps col - row <= k (lower) and zeroes the rest.

// CHECK-LABEL: func.func @trilu(
// CHECK-SAME:      %[[X:.*]]: tensor<3x4xf32>, %[[K:.*]]: tensor<i64>)
// CHECK:         %[[KV:.*]] = tensor.extract %[[K]][] : tensor<i64>
// CHECK:         %[[KI:.*]] = arith.index_cast %[[KV]] : i64 to index
// CHECK:         linalg.generic
// CHECK:           %[[ROW:.*]] = linalg.index 0 : index
// CHECK:           %[[COL:.*]] = linalg.index 1 : index
// CHECK:           %[[DIAG:.*]] = arith.subi %[[COL]], %[[ROW]] : index
// CHECK:           %[[KEEP:.*]] = arith.cmpi sle, %[[DIAG]], %[[KI]] : index
// CHECK:           arith.select %[[KEEP]]
func.func @trilu(%x: tensor<3x4xf32>, %k: tensor<i64>) -> tensor<3x4xf32> {
  %0 = onnx.Trilu %x, %k {upper = 0 : i64} : (tensor<3x4xf32>, tensor<i64>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}
