// RUN: moe-opt %s --convert-onnx-to-linalg --split-input-file | FileCheck %s
// RUN: moe-opt %s --convert-onnx-to-linalg=runtime=1 --split-input-file | FileCheck %s --check-prefix=RUNTIME

// Indices from a function argument: one reduction gives their smallest and
// largest (i64, into a [1] tensor), then, before the gather, a report where
// they leave [-4, 3]: a cf.assert, or with the runtime a call that ends the
// program with the index.

// CHECK-DAG:   #[[ALL:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG:   #[[ONE:.*]] = affine_map<(d0, d1, d2) -> (d0)>
// CHECK-LABEL: func.func @gather(
// CHECK-SAME:      %[[D:.*]]: tensor<4x3xf32>, %[[I:.*]]: tensor<2x5xi32>)
// CHECK-DAG:     %[[HUGE:.*]] = arith.constant 9223372036854775807 : i64
// CHECK-DAG:     %[[TINY:.*]] = arith.constant -9223372036854775808 : i64
// CHECK-DAG:     %[[MIN0:.*]] = linalg.fill ins(%[[HUGE]] : i64) outs(%{{.*}} : tensor<1xi64>)
// CHECK-DAG:     %[[MAX0:.*]] = linalg.fill ins(%[[TINY]] : i64) outs(%{{.*}} : tensor<1xi64>)
// CHECK:         %[[B:.*]]:2 = linalg.generic {indexing_maps = [#[[ALL]], #[[ONE]], #[[ONE]]], iterator_types = ["parallel", "reduction", "reduction"]} ins(%[[I]] : tensor<2x5xi32>) outs(%[[MIN0]], %[[MAX0]] : tensor<1xi64>, tensor<1xi64>)
// CHECK-NEXT:    ^bb0(%[[V:.*]]: i32, %[[LO:.*]]: i64, %[[HI:.*]]: i64):
// CHECK-NEXT:      %[[V64:.*]] = arith.extsi %[[V]] : i32 to i64
// CHECK-NEXT:      %[[NLO:.*]] = arith.minsi %[[V64]], %[[LO]] : i64
// CHECK-NEXT:      %[[NHI:.*]] = arith.maxsi %[[V64]], %[[HI]] : i64
// CHECK-NEXT:      linalg.yield %[[NLO]], %[[NHI]] : i64, i64
// CHECK:         %[[MIN:.*]] = tensor.extract %[[B]]#0[%{{.*}}] : tensor<1xi64>
// CHECK:         %[[MAX:.*]] = tensor.extract %[[B]]#1[%{{.*}}] : tensor<1xi64>
// CHECK:         %[[BELOW:.*]] = arith.cmpi slt, %[[MIN]], %c-4_i64 : i64
// CHECK:         %[[ABOVE:.*]] = arith.cmpi sgt, %[[MAX]], %c3_i64 : i64
// CHECK:         %[[OUT:.*]] = arith.ori %[[BELOW]], %[[ABOVE]] : i1
// CHECK:         %[[IN:.*]] = arith.xori %[[OUT]], %true : i1
// CHECK:         cf.assert %[[IN]], "onnx.Gather: an index is out of range for dim 0 of size 4 (ONNX allows [-4, 3])"
// CHECK:         linalg.generic {{.*}} ins(%[[I]] : tensor<2x5xi32>) outs(%{{.*}} : tensor<2x5x3xf32>)
// CHECK:           tensor.extract %[[D]]

// RUNTIME-DAG:   llvm.mlir.global internal constant @moe.op_name.onnx.Gather("onnx.Gather\00")
// RUNTIME-DAG:   func.func private @moert_index_out_of_range(!llvm.ptr, i64, i64, i64)
// RUNTIME-LABEL: func.func @gather(
// RUNTIME:         %[[MIN:.*]] = tensor.extract %{{.*}}#0
// RUNTIME:         %[[MAX:.*]] = tensor.extract %{{.*}}#1
// RUNTIME:         %[[ABOVE:.*]] = arith.cmpi sgt, %[[MAX]], %c3_i64 : i64
// RUNTIME:         %[[OUT:.*]] = arith.ori %{{.*}}, %[[ABOVE]] : i1
// RUNTIME-NEXT:    scf.if %[[OUT]] {
// RUNTIME-NEXT:      %[[INDEX:.*]] = arith.select %[[ABOVE]], %[[MAX]], %[[MIN]] : i64
// RUNTIME-NEXT:      %[[NAME:.*]] = llvm.mlir.addressof @moe.op_name.onnx.Gather : !llvm.ptr
// RUNTIME-DAG:       %[[DIM:.*]] = arith.constant 0 : i64
// RUNTIME-DAG:       %[[SIZE:.*]] = arith.constant 4 : i64
// RUNTIME-NEXT:      func.call @moert_index_out_of_range(%[[NAME]], %[[INDEX]], %[[DIM]], %[[SIZE]])
// RUNTIME-NEXT:    }
// RUNTIME-NOT:     cf.assert
// RUNTIME:         linalg.generic {{.*}} outs(%{{.*}} : tensor<2x5x3xf32>)
func.func @gather(%d: tensor<4x3xf32>, %i: tensor<2x5xi32>) -> tensor<2x5x3xf32> {
  %0 = onnx.Gather %d, %i {axis = 0 : i64} : (tensor<4x3xf32>, tensor<2x5xi32>) -> tensor<2x5x3xf32>
  return %0 : tensor<2x5x3xf32>
}

// -----

// GatherElements and ScatterElements: the dim of `axis`.

// CHECK-LABEL: func.func @elements(
// CHECK:         cf.assert %{{.*}}, "onnx.GatherElements: an index is out of range for dim 1 of size 3 (ONNX allows [-3, 2])"
// CHECK:         cf.assert %{{.*}}, "onnx.ScatterElements: an index is out of range for dim 0 of size 2 (ONNX allows [-2, 1])"
// CHECK:         scf.for
func.func @elements(%d: tensor<2x3xf32>, %i: tensor<2x3xi64>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %0 = onnx.GatherElements %d, %i {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x3xi64>) -> tensor<2x3xf32>
  %1 = onnx.ScatterElements %d, %i, %0 {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xi64>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0, %1 : tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// GatherND and ScatterND: the bounds of each position of the last dim (the
// reduction keeps it), each against its own dim, after GatherND's batch
// dims.

// CHECK-DAG:   #[[ALL:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG:   #[[LAST:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @nd(
// CHECK-SAME:      %{{.*}}: tensor<2x5x6xf32>, %[[I:.*]]: tensor<2x2xi64>
// CHECK:         %[[B:.*]]:2 = linalg.generic {indexing_maps = [#[[ALL]], #[[LAST]], #[[LAST]]], iterator_types = ["reduction", "parallel"]} ins(%[[I]] : tensor<2x2xi64>) outs(%{{.*}}, %{{.*}} : tensor<2xi64>, tensor<2xi64>)
// CHECK:         tensor.extract %[[B]]#0[%c0]
// CHECK:         cf.assert %{{.*}}, "onnx.GatherND: an index is out of range for dim 1 of size 5 (ONNX allows [-5, 4])"
// CHECK:         tensor.extract %[[B]]#0[%c1]
// CHECK:         cf.assert %{{.*}}, "onnx.GatherND: an index is out of range for dim 2 of size 6 (ONNX allows [-6, 5])"
// CHECK:         cf.assert %{{.*}}, "onnx.ScatterND: an index is out of range for dim 0 of size 2 (ONNX allows [-2, 1])"
// CHECK:         cf.assert %{{.*}}, "onnx.ScatterND: an index is out of range for dim 1 of size 5 (ONNX allows [-5, 4])"
// CHECK:         cf.assert %{{.*}}, "onnx.GatherND: an index is out of range for dim 0 of size 2 (ONNX allows [-2, 1])"
// CHECK:         cf.assert %{{.*}}, "onnx.GatherND: an index is out of range for dim 1 of size 5 (ONNX allows [-5, 4])"
// CHECK-NOT:     cf.assert
// CHECK:         return
func.func @nd(%d: tensor<2x5x6xf32>, %i: tensor<2x2xi64>, %u: tensor<2x6xf32>) -> (tensor<2x6xf32>, tensor<2x5x6xf32>) {
  %0 = onnx.GatherND %d, %i {batch_dims = 1 : i64} : (tensor<2x5x6xf32>, tensor<2x2xi64>) -> tensor<2xf32>
  %1 = onnx.ScatterND %d, %i, %u : (tensor<2x5x6xf32>, tensor<2x2xi64>, tensor<2x6xf32>) -> tensor<2x5x6xf32>
  %2 = onnx.GatherND %d, %i : (tensor<2x5x6xf32>, tensor<2x2xi64>) -> tensor<2x6xf32>
  return %2, %1 : tensor<2x6xf32>, tensor<2x5x6xf32>
}

// -----

// No check where the indices are known to be in range: constants (checked
// when compiling), TopK's indices and ArgMax over a dim no larger, Range
// with constant start and delta, moe.router ids, Clip and Mod by
// constants, and casts and reshapes of those.

// CHECK-LABEL: func.func @proven(
// CHECK-NOT:     cf.assert
// CHECK-NOT:     linalg.fill ins(%{{.*}} : i64) outs(%{{.*}} : tensor<1xi64>)
// CHECK:         return
// RUNTIME-LABEL: func.func @proven(
// RUNTIME-NOT:     moert_index_out_of_range
// RUNTIME:         return
func.func @proven(%d: tensor<8x3xf32>, %x: tensor<4x8xf32>, %n: tensor<i64>, %a: tensor<4xi64>, %l: tensor<4x8xf32>)
    -> (tensor<2x3xf32>, tensor<4x2x1x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x2x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>) {
  %c = arith.constant dense<[7, -8]> : tensor<2xi64>
  %0 = onnx.Gather %d, %c {axis = 0 : i64} : (tensor<8x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>

  %k = arith.constant dense<2> : tensor<1xi64>
  %v, %top = onnx.TopK %x, %k {axis = 1 : i64} : (tensor<4x8xf32>, tensor<1xi64>) -> (tensor<4x2xf32>, tensor<4x2xi64>)
  %top32 = onnx.Cast %top {to = 6 : i64} : (tensor<4x2xi64>) -> tensor<4x2xi32>
  %axes = arith.constant dense<2> : tensor<1xi64>
  %top3 = onnx.Unsqueeze %top32, %axes : (tensor<4x2xi32>, tensor<1xi64>) -> tensor<4x2x1xi32>
  %1 = onnx.Gather %d, %top3 {axis = 0 : i64} : (tensor<8x3xf32>, tensor<4x2x1xi32>) -> tensor<4x2x1x3xf32>

  %arg = onnx.ArgMax %x {axis = 1 : i64, keepdims = 0 : i64} : (tensor<4x8xf32>) -> tensor<4xi64>
  %2 = onnx.Gather %d, %arg {axis = 0 : i64} : (tensor<8x3xf32>, tensor<4xi64>) -> tensor<4x3xf32>

  // 4 elements from 7 down by 2: [1, 7].
  %start = arith.constant dense<7> : tensor<i64>
  %delta = arith.constant dense<-2> : tensor<i64>
  %range = onnx.Range %start, %n, %delta : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<4xi64>
  %3 = onnx.Gather %d, %range {axis = 0 : i64} : (tensor<8x3xf32>, tensor<4xi64>) -> tensor<4x3xf32>

  // Ids in [-1, 7].
  %ids, %w = moe.router softmax topk %l : tensor<4x8xf32> -> tensor<4x2xi32>, tensor<4x2xf32>
  %4 = onnx.Gather %d, %ids {axis = 0 : i64} : (tensor<8x3xf32>, tensor<4x2xi32>) -> tensor<4x2x3xf32>

  %lo = arith.constant dense<-8> : tensor<i64>
  %hi = arith.constant dense<7> : tensor<i64>
  %clipped = onnx.Clip %a, %lo, %hi : (tensor<4xi64>, tensor<i64>, tensor<i64>) -> tensor<4xi64>
  %5 = onnx.Gather %d, %clipped {axis = 0 : i64} : (tensor<8x3xf32>, tensor<4xi64>) -> tensor<4x3xf32>

  %eight = arith.constant dense<8> : tensor<i64>
  %mod = onnx.Mod %a, %eight : (tensor<4xi64>, tensor<i64>) -> tensor<4xi64>
  %6 = onnx.Gather %d, %mod {axis = 0 : i64} : (tensor<8x3xf32>, tensor<4xi64>) -> tensor<4x3xf32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<2x3xf32>, tensor<4x2x1x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x2x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>
}

// -----

// A bound that does not fit the dim is checked: TopK over 8 elements into
// a dim of 4; a Range whose start is not a constant; Mod by a larger number.

// CHECK-LABEL: func.func @not_proven(
// CHECK:         cf.assert %{{.*}}, "onnx.Gather: an index is out of range for dim 0 of size 4 (ONNX allows [-4, 3])"
// CHECK:         cf.assert %{{.*}}, "onnx.Gather: an index is out of range for dim 0 of size 4 (ONNX allows [-4, 3])"
// CHECK:         cf.assert %{{.*}}, "onnx.Gather: an index is out of range for dim 0 of size 4 (ONNX allows [-4, 3])"
func.func @not_proven(%d: tensor<4x3xf32>, %x: tensor<4x8xf32>, %s: tensor<i64>, %a: tensor<4xi64>)
    -> (tensor<4x2x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>) {
  %k = arith.constant dense<2> : tensor<1xi64>
  %v, %top = onnx.TopK %x, %k {axis = 1 : i64} : (tensor<4x8xf32>, tensor<1xi64>) -> (tensor<4x2xf32>, tensor<4x2xi64>)
  %0 = onnx.Gather %d, %top {axis = 0 : i64} : (tensor<4x3xf32>, tensor<4x2xi64>) -> tensor<4x2x3xf32>
  %limit = arith.constant dense<100> : tensor<i64>
  %delta = arith.constant dense<1> : tensor<i64>
  %range = onnx.Range %s, %limit, %delta : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<4xi64>
  %1 = onnx.Gather %d, %range {axis = 0 : i64} : (tensor<4x3xf32>, tensor<4xi64>) -> tensor<4x3xf32>
  %five = arith.constant dense<5> : tensor<i64>
  %mod = onnx.Mod %a, %five : (tensor<4xi64>, tensor<i64>) -> tensor<4xi64>
  %2 = onnx.Gather %d, %mod {axis = 0 : i64} : (tensor<4x3xf32>, tensor<4xi64>) -> tensor<4x3xf32>
  return %0, %1, %2 : tensor<4x2x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>
}
