// RUN: moe-opt %s --convert-onnx-to-linalg --split-input-file | FileCheck %s

// The ops that exports of opsets 18 to 23 use beyond the older ones.
// new-ops-run.mlir runs them against NumPy.

// Mod (fmod=0): the remainder takes the divisor's sign.

// CHECK-LABEL: func.func @mod_int(
// CHECK:         linalg.generic
// CHECK:           %[[REM:.*]] = arith.remsi %[[A:.*]], %[[B:.*]] : i64
// CHECK:           %[[NZ:.*]] = arith.cmpi ne, %[[REM]], %[[ZERO:.*]] : i64
// CHECK:           %[[RNEG:.*]] = arith.cmpi slt, %[[REM]], %[[ZERO]] : i64
// CHECK:           %[[BNEG:.*]] = arith.cmpi slt, %[[B]], %[[ZERO]] : i64
// CHECK:           %[[DIFF:.*]] = arith.xori %[[RNEG]], %[[BNEG]] : i1
// CHECK:           %[[FIX:.*]] = arith.andi %[[NZ]], %[[DIFF]] : i1
// CHECK:           %[[SUM:.*]] = arith.addi %[[REM]], %[[B]] : i64
// CHECK:           arith.select %[[FIX]], %[[SUM]], %[[REM]] : i64
func.func @mod_int(%a: tensor<4xi64>, %b: tensor<i64>) -> tensor<4xi64> {
  %0 = onnx.Mod %a, %b {fmod = 0 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

// Mod of constants folds (index arithmetic of exported graphs): integers
// floored, floats with fmod=1 truncated.

// CHECK-LABEL: func.func @mod_fold(
// CHECK-DAG:     arith.constant dense<[2, -2, -1, 1]> : tensor<4xi64>
// CHECK-DAG:     arith.constant dense<[-1.500000e+00, 1.500000e+00, 1.250000e+00]> : tensor<3xf32>
// CHECK-NOT:     arith.remsi
// CHECK-NOT:     arith.remf
func.func @mod_fold() -> (tensor<4xi64>, tensor<3xf32>) {
  %a = arith.constant dense<[-7, 7, -7, 7]> : tensor<4xi64>
  %b = arith.constant dense<[3, -3, -3, 3]> : tensor<4xi64>
  %0 = onnx.Mod %a, %b : (tensor<4xi64>, tensor<4xi64>) -> tensor<?xi64>
  %1 = onnx.Relu %0 : (tensor<?xi64>) -> tensor<4xi64>
  %fa = arith.constant dense<[-7.5, 7.5, 5.25]> : tensor<3xf32>
  %fb = arith.constant dense<[2.0, -2.0, -2.0]> : tensor<3xf32>
  %2 = onnx.Mod %fa, %fb {fmod = 1 : i64} : (tensor<3xf32>, tensor<3xf32>) -> tensor<?xf32>
  %3 = onnx.Relu %2 : (tensor<?xf32>) -> tensor<3xf32>
  return %1, %3 : tensor<4xi64>, tensor<3xf32>
}

// -----

// Tile reads the input at each index modulo its dim; the result shape comes
// from the constant repeats.

// CHECK-LABEL: func.func @tile(
// CHECK-SAME:      %[[X:.*]]: tensor<2x3xf32>)
// CHECK:         %[[R:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<4x3xf32>)
// CHECK:           %[[I:.*]] = linalg.index 0 : index
// CHECK:           %[[TWO:.*]] = arith.constant 2 : index
// CHECK:           %[[WRAPPED:.*]] = arith.remui %[[I]], %[[TWO]] : index
// CHECK:           %[[J:.*]] = linalg.index 1 : index
// CHECK:           tensor.extract %[[X]][%[[WRAPPED]], %[[J]]] : tensor<2x3xf32>
// CHECK:         tensor.cast %[[R]] : tensor<4x3xf32> to tensor<?x?xf32>
func.func @tile(%x: tensor<2x3xf32>) -> tensor<?x?xf32> {
  %r = arith.constant dense<[2, 1]> : tensor<2xi64>
  %0 = onnx.Tile %x, %r : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----

// Pad (constant mode, no value: 0): the data inserted at the leading pads.

// CHECK-LABEL: func.func @pad(
// CHECK-SAME:      %[[X:.*]]: tensor<2x3xf32>)
// CHECK:         %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:         %[[FILL:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.*}} : tensor<3x5xf32>)
// CHECK:         tensor.insert_slice %[[X]] into %[[FILL]][0, 2] [2, 3] [1, 1] : tensor<2x3xf32> into tensor<3x5xf32>
func.func @pad(%x: tensor<2x3xf32>) -> tensor<?x?xf32> {
  %p = arith.constant dense<[0, 2, 1, 0]> : tensor<4xi64>
  %none = onnx.none
  %0 = onnx.Pad %x, %p, %none : (tensor<2x3xf32>, tensor<4xi64>, none) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}

// -----

// The causal depthwise Conv of Mamba and gated DeltaNet layers: the input
// zero-padded in front, then one contraction over (channel in group, tap)
// that starts from the bias.

// CHECK-DAG:   #[[XMAP:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1 + d3, d2 + d4)>
// CHECK-DAG:   #[[WMAP:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d1, d3, d4)>
// CHECK-DAG:   #[[OMAP:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
// CHECK-DAG:   #[[BMAP:.*]] = affine_map<(d0, d1, d2) -> (d1)>
// CHECK-LABEL: func.func @conv(
// CHECK-SAME:      %[[X:.*]]: tensor<1x4x6xf32>, %[[W:.*]]: tensor<4x1x3xf32>, %[[B:.*]]: tensor<4xf32>)
// CHECK:         %[[PADDED:.*]] = tensor.insert_slice %[[X]] into %{{.*}}[0, 0, 2] [1, 4, 6] [1, 1, 1] : tensor<1x4x6xf32> into tensor<1x4x8xf32>
// CHECK:         %[[BIAS:.*]] = linalg.generic {indexing_maps = [#[[BMAP]], {{.*}}]{{.*}} ins(%[[B]] : tensor<4xf32>)
// CHECK:         linalg.generic {indexing_maps = [#[[XMAP]], #[[WMAP]], #[[OMAP]]], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]}
// CHECK-SAME:        ins(%[[PADDED]], %[[W]] : tensor<1x4x8xf32>, tensor<4x1x3xf32>) outs(%[[BIAS]] : tensor<1x4x6xf32>)
// CHECK:           arith.mulf
// CHECK:           arith.addf
func.func @conv(%x: tensor<1x4x6xf32>, %w: tensor<4x1x3xf32>, %b: tensor<4xf32>) -> tensor<1x4x?xf32> {
  %0 = onnx.Conv %x, %w, %b {group = 4 : i64, kernel_shape = array<i64: 3>, pads = array<i64: 2, 0>} : (tensor<1x4x6xf32>, tensor<4x1x3xf32>, tensor<4xf32>) -> tensor<1x4x?xf32>
  return %0 : tensor<1x4x?xf32>
}

// -----

// ReduceL1 of integers sums max(x, -x); a boolean ReduceMax (opset 20) is an
// or from false.

// CHECK-LABEL: func.func @reduce_l1(
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK:           %[[NEG:.*]] = arith.subi %{{.*}}, %[[IN:.*]] : i64
// CHECK:           %[[ABS:.*]] = arith.maxsi %[[IN]], %[[NEG]] : i64
// CHECK:           arith.addi %{{.*}}, %[[ABS]] : i64
func.func @reduce_l1(%x: tensor<2x3xi64>) -> tensor<2xi64> {
  %axes = arith.constant dense<[1]> : tensor<1xi64>
  %0 = onnx.ReduceL1 %x, %axes {keepdims = 0 : i64} : (tensor<2x3xi64>, tensor<1xi64>) -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// CHECK-LABEL: func.func @reduce_max_bool(
// CHECK:         %[[FALSE:.*]] = arith.constant false
// CHECK:         linalg.fill ins(%[[FALSE]] : i1)
// CHECK:         linalg.generic
// CHECK:           arith.ori
func.func @reduce_max_bool(%x: tensor<2x3xi1>) -> tensor<2xi1> {
  %axes = arith.constant dense<[1]> : tensor<1xi64>
  %0 = onnx.ReduceMax %x, %axes {keepdims = 0 : i64} : (tensor<2x3xi1>, tensor<1xi64>) -> tensor<2xi1>
  return %0 : tensor<2xi1>
}

// -----

// Softplus as max(x, 0) + log(1 + exp(-|x|)), which does not overflow.

// CHECK-LABEL: func.func @softplus(
// CHECK:           %[[ABS:.*]] = math.absf %[[X:.*]] : f32
// CHECK:           %[[NEG:.*]] = arith.negf %[[ABS]] : f32
// CHECK:           %[[EXP:.*]] = math.exp %[[NEG]] : f32
// CHECK:           %[[ONEP:.*]] = arith.addf %{{.*}}, %[[EXP]] : f32
// CHECK:           %[[LOG:.*]] = math.log %[[ONEP]] : f32
// CHECK:           %[[POS:.*]] = arith.maximumf %[[X]], %{{.*}} : f32
// CHECK:           arith.addf %[[POS]], %[[LOG]] : f32
func.func @softplus(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = onnx.Softplus %x : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
