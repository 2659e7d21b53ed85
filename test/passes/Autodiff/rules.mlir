// RUN: moe-opt %s --split-input-file --moe-autodiff="loss=mse" | FileCheck %s

// The IR of some VJP rules of OnnxRules.cpp (their values are checked
// against PyTorch by gradcheck.test). Each model multiplies one op's
// result of a parameter by the input x; the op's cotangent is G = dL/dy * x,
// emitted after the target's (an unused onnx.Neg).

// Tile: the cotangent [r0 d0, r1 d1] viewed as [r0, d0, r1, d1] and summed
// over the repeats.
// CHECK-LABEL: func.func @tile
// CHECK: %[[W:.*]] = arith.constant dense_resource<m.w> : tensor<2x3xf32>
// CHECK: onnx.Neg
// CHECK-NEXT: %[[G:.*]] = onnx.Mul %{{.*}}, %arg0 : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
// CHECK: %[[SPLIT:.*]] = arith.constant dense<[2, 2, 2, 3]> : tensor<4xi64>
// CHECK: %[[V:.*]] = onnx.Reshape %[[G]], %[[SPLIT]] : (tensor<4x6xf32>, tensor<4xi64>) -> tensor<2x2x2x3xf32>
// CHECK: %[[AXES:.*]] = arith.constant dense<[0, 2]> : tensor<2xi64>
// CHECK: %[[DW:.*]] = onnx.ReduceSum %[[V]], %[[AXES]] {keepdims = 0 : i64} : (tensor<2x2x2x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
// CHECK: return %{{.*}}, %{{.*}}, %[[DW]]
func.func @tile(%x: tensor<4x6xf32> {onnx.name = "x"}) -> (tensor<4x6xf32> {onnx.name = "y"}) {
  %w = arith.constant dense_resource<m.w> : tensor<2x3xf32>
  %r = arith.constant dense<[2, 2]> : tensor<2xi64>
  %t = onnx.Tile %w, %r : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<4x6xf32>
  %y = onnx.Mul %t, %x : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  return %y : tensor<4x6xf32>
}

{-#
  dialect_resources: {
    builtin: {
      m.w: "0x04000000000000000000803F000000400000404000008040000080BF"
    }
  }
#-}

// -----

// MatMul of a batch of matrices by a vector v [4]: v is the column [4, 1],
// the cotangent x^T dy [2, 4, 1] is summed over the batch to that column
// (not over v's own dim), then viewed as [4] again.
// CHECK-LABEL: func.func @matvec
// CHECK: %[[V:.*]] = arith.constant dense_resource<m.v> : tensor<4xf32>
// CHECK: %[[Y:.*]] = onnx.MatMul %arg0, %[[V]] : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3xf32>
// CHECK: %[[G:.*]] = onnx.Reshape %{{.*}} : (tensor<2x3xf32>, tensor<3xi64>) -> tensor<2x3x1xf32>
// CHECK: %[[XT:.*]] = onnx.Transpose %arg0 {perm = array<i64: 0, 2, 1>}
// CHECK: %[[P:.*]] = onnx.MatMul %[[XT]], %[[G]] : (tensor<2x4x3xf32>, tensor<2x3x1xf32>) -> tensor<2x4x1xf32>
// CHECK: %[[B:.*]] = arith.constant dense<0> : tensor<1xi64>
// CHECK: %[[S:.*]] = onnx.ReduceSum %[[P]], %[[B]] {keepdims = 1 : i64} : (tensor<2x4x1xf32>, tensor<1xi64>) -> tensor<1x4x1xf32>
// CHECK: %[[COL:.*]] = onnx.Reshape %[[S]], %{{.*}} -> tensor<4x1xf32>
// CHECK: %[[DV:.*]] = onnx.Reshape %[[COL]], %{{.*}} -> tensor<4xf32>
// CHECK: return %{{.*}}, %{{.*}}, %[[DV]]
func.func @matvec(%x: tensor<2x3x4xf32> {onnx.name = "x"}) -> (tensor<2x3xf32> {onnx.name = "y"}) {
  %v = arith.constant dense_resource<m.v> : tensor<4xf32>
  %y = onnx.MatMul %x, %v : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

{-#
  dialect_resources: {
    builtin: {
      m.v: "0x04000000000000000000803F0000004000004040"
    }
  }
#-}

// -----

// ReduceMax without axes (every axis): the ties [[1, 3], [3, -2]] share
// the cotangent; their count is a ReduceSum that lists both axes.
// CHECK-LABEL: func.func @reduce_max_all
// CHECK: %[[W:.*]] = arith.constant dense_resource<m.w> : tensor<2x2xf32>
// CHECK: %[[M:.*]] = onnx.ReduceMax %[[W]] {keepdims = 0 : i64} : (tensor<2x2xf32>) -> tensor<f32>
// CHECK: onnx.Neg
// CHECK-NEXT: %[[G:.*]] = onnx.Mul %{{.*}}, %arg0 : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK: %[[MK:.*]] = onnx.Reshape %[[M]], %{{.*}} -> tensor<1x1xf32>
// CHECK: %[[HIT:.*]] = onnx.Equal %[[W]], %[[MK]] : (tensor<2x2xf32>, tensor<1x1xf32>) -> tensor<2x2xi1>
// CHECK: %[[HITF:.*]] = onnx.Cast %[[HIT]] {to = 1 : i64}
// CHECK: %[[ALL:.*]] = arith.constant dense<[0, 1]> : tensor<2xi64>
// CHECK: %[[TIES:.*]] = onnx.ReduceSum %[[HITF]], %[[ALL]] {keepdims = 1 : i64} : (tensor<2x2xf32>, tensor<2xi64>) -> tensor<1x1xf32>
// CHECK: %[[GK:.*]] = onnx.Reshape %[[G]], %{{.*}} -> tensor<1x1xf32>
// CHECK: %[[SHARE:.*]] = onnx.Div %[[GK]], %[[TIES]]
// CHECK: %[[DW:.*]] = onnx.Mul %[[HITF]], %[[SHARE]] : (tensor<2x2xf32>, tensor<1x1xf32>) -> tensor<2x2xf32>
// CHECK: return %{{.*}}, %{{.*}}, %[[DW]]
func.func @reduce_max_all(%x: tensor<f32> {onnx.name = "x"}) -> (tensor<f32> {onnx.name = "y"}) {
  %w = arith.constant dense_resource<m.w> : tensor<2x2xf32>
  %m = onnx.ReduceMax %w {keepdims = 0 : i64} : (tensor<2x2xf32>) -> tensor<f32>
  %y = onnx.Mul %m, %x : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %y : tensor<f32>
}

{-#
  dialect_resources: {
    builtin: {
      m.w: "0x040000000000803F0000404000004040000000C0"
    }
  }
#-}

// -----

// CumSum: the cotangent summed the other way, exclusive still.
// CHECK-LABEL: func.func @cumsum
// CHECK: %[[AXIS:.*]] = arith.constant dense<1> : tensor<i64>
// CHECK: onnx.CumSum %{{.*}}, %[[AXIS]] {exclusive = 1 : i64}
// CHECK: onnx.Neg
// CHECK-NEXT: %[[G:.*]] = onnx.Mul %{{.*}}, %arg0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: %[[DW:.*]] = onnx.CumSum %[[G]], %[[AXIS]] {exclusive = 1 : i64, reverse = 1 : i64}
// CHECK: return %{{.*}}, %{{.*}}, %[[DW]]
func.func @cumsum(%x: tensor<2x3xf32> {onnx.name = "x"}) -> (tensor<2x3xf32> {onnx.name = "y"}) {
  %w = arith.constant dense_resource<m.w> : tensor<2x3xf32>
  %axis = arith.constant dense<1> : tensor<i64>
  %c = onnx.CumSum %w, %axis {exclusive = 1 : i64} : (tensor<2x3xf32>, tensor<i64>) -> tensor<2x3xf32>
  %y = onnx.Mul %c, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

{-#
  dialect_resources: {
    builtin: {
      m.w: "0x04000000000000000000803F000000400000404000008040000080BF"
    }
  }
#-}

// -----

// LayerNormalization whose Mean and InvStdDev results are used: the
// statistics are recomputed from the input h (x^ = (h - mu) r), Y's
// cotangent (zero here) gives r (g^ - mean(g^) - x^ mean(g^ x^)), then
// dMean / N is added and dr r^2 x^ / N taken away.
// CHECK-LABEL: func.func @layernorm_stats
// CHECK: %[[H:.*]] = onnx.Mul %arg0, %{{.*}}
// CHECK: %[[LN:.*]]:3 = onnx.LayerNormalization %[[H]]
// CHECK: %[[DR:.*]] = onnx.Mul %{{.*}}, %[[LN]]#1 : (tensor<2x1xf32>, tensor<2x1xf32>) -> tensor<2x1xf32>
// CHECK: %[[INVN:.*]] = arith.constant dense<2.500000e-01> : tensor<f32>
// CHECK: %[[SUM:.*]] = onnx.ReduceSum %[[H]]
// CHECK: %[[MU:.*]] = onnx.Mul %[[SUM]], %[[INVN]]
// CHECK: %[[C:.*]] = onnx.Sub %[[H]], %[[MU]]
// CHECK: %[[R:.*]] = onnx.Reciprocal
// CHECK: %[[XHAT:.*]] = onnx.Mul %[[C]], %[[R]] : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
// CHECK: %[[DY:.*]] = onnx.Mul %[[R]], %{{.*}} : (tensor<2x1xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK: %[[DMEAN:.*]] = onnx.Mul %{{.*}}, %[[INVN]] : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
// CHECK: %[[WITHMEAN:.*]] = onnx.Add %[[DY]], %[[DMEAN]]
// CHECK: %[[DRN:.*]] = onnx.Mul %[[DR]], %[[INVN]]
// CHECK: %[[R2:.*]] = onnx.Mul %[[R]], %[[R]]
// CHECK: %[[R2X:.*]] = onnx.Mul %[[R2]], %[[XHAT]]
// CHECK: %[[DRX:.*]] = onnx.Mul %[[DRN]], %[[R2X]]
// CHECK: %[[DH:.*]] = onnx.Sub %[[WITHMEAN]], %[[DRX]]
// CHECK: %[[DW:.*]] = onnx.Mul %[[DH]], %arg0
// CHECK: return %{{.*}}, %{{.*}}, %[[DW]]
func.func @layernorm_stats(%x: tensor<2x4xf32> {onnx.name = "x"}) -> (tensor<2x1xf32> {onnx.name = "y"}) {
  %w = arith.constant dense_resource<m.w> : tensor<2x4xf32>
  %s = arith.constant dense<1.0> : tensor<4xf32>
  %h = onnx.Mul %x, %w : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %y, %mean, %rstd = onnx.LayerNormalization %h, %s {axis = -1 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  %r = onnx.Mul %mean, %rstd : (tensor<2x1xf32>, tensor<2x1xf32>) -> tensor<2x1xf32>
  return %r : tensor<2x1xf32>
}

{-#
  dialect_resources: {
    builtin: {
      m.w: "0x04000000000000000000803F000000400000404000008040000080BF0000A0400000C040"
    }
  }
#-}

// -----

// Clip passes the cotangent where min <= w <= max, bounds included (the
// parameter holds -0.5 and 0.5), as torch.clamp.
// CHECK-LABEL: func.func @clip
// CHECK: %[[W:.*]] = arith.constant dense_resource<m.w> : tensor<2x2xf32>
// CHECK: %[[LO:.*]] = arith.constant dense<-5.000000e-01> : tensor<f32>
// CHECK: %[[HI:.*]] = arith.constant dense<5.000000e-01> : tensor<f32>
// CHECK: onnx.Neg
// CHECK-NEXT: %[[G:.*]] = onnx.Mul %{{.*}}, %arg0 : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
// CHECK: %[[GE:.*]] = onnx.GreaterOrEqual %[[W]], %[[LO]]
// CHECK: %[[A:.*]] = onnx.And %{{.*}}, %[[GE]]
// CHECK: %[[LE:.*]] = onnx.LessOrEqual %[[W]], %[[HI]]
// CHECK: %[[IN:.*]] = onnx.And %[[A]], %[[LE]]
// CHECK: %[[DW:.*]] = onnx.Where %[[IN]], %[[G]], %{{.*}} : (tensor<2x2xi1>, tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xf32>
// CHECK: return %{{.*}}, %{{.*}}, %[[DW]]
func.func @clip(%x: tensor<2x2xf32> {onnx.name = "x"}) -> (tensor<2x2xf32> {onnx.name = "y"}) {
  %w = arith.constant dense_resource<m.w> : tensor<2x2xf32>
  %lo = arith.constant dense<-5.0e-01> : tensor<f32>
  %hi = arith.constant dense<5.0e-01> : tensor<f32>
  %c = onnx.Clip %w, %lo, %hi : (tensor<2x2xf32>, tensor<f32>, tensor<f32>) -> tensor<2x2xf32>
  %y = onnx.Mul %c, %x : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}

{-#
  dialect_resources: {
    builtin: {
      m.w: "0x04000000000000BF0000003F000080BF00000000"
    }
  }
#-}
