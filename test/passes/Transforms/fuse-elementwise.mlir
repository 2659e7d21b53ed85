// RUN: moe-opt %s --moe-fuse-elementwise | FileCheck %s

// scale -> add mask -> exp: one generic. The contraction that produces the
// scores and the one that consumes the result stay as they are.
// CHECK-LABEL: func.func @chain
// CHECK: %[[SCORES:.*]] = linalg.matmul
// CHECK: %[[FUSED:.*]] = linalg.generic {{.*}} ins(%[[SCORES]], %arg2 :
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: math.exp
// CHECK-NOT: linalg.generic
// CHECK: linalg.matmul ins(%[[FUSED]], %arg3
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @chain(%q: tensor<4x8xf32>, %k: tensor<8x4xf32>, %mask: tensor<4x4xf32>, %v: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %scale = arith.constant 0.125 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %scores = linalg.matmul ins(%q, %k : tensor<4x8xf32>, tensor<8x4xf32>) outs(%acc : tensor<4x4xf32>) -> tensor<4x4xf32>
  %scaled = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%scores : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %scale : f32
    linalg.yield %m : f32
  } -> tensor<4x4xf32>
  %masked = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%scaled, %mask : tensor<4x4xf32>, tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  %exp = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%masked : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %x = math.exp %a : f32
    linalg.yield %x : f32
  } -> tensor<4x4xf32>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %acc2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %out = linalg.matmul ins(%exp, %v : tensor<4x4xf32>, tensor<4x8xf32>) outs(%acc2 : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %out : tensor<4x8xf32>
}

// One zero fill shared by two contractions (as CSE leaves it): each gets its
// own, so that bufferization neither shares nor copies it.
// CHECK-LABEL: func.func @shared_fill
// CHECK: %[[E1:.*]] = tensor.empty() : tensor<4x4xf32>
// CHECK: %[[F1:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E1]]
// CHECK: linalg.matmul ins(%arg0, %arg1 : {{.*}}) outs(%[[F1]]
// CHECK: %[[E2:.*]] = tensor.empty() : tensor<4x4xf32>
// CHECK: %[[F2:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E2]]
// CHECK: linalg.matmul ins(%arg0, %arg2 : {{.*}}) outs(%[[F2]]
func.func @shared_fill(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>, %c: tensor<8x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %x = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x4xf32>) outs(%acc : tensor<4x4xf32>) -> tensor<4x4xf32>
  %y = linalg.matmul ins(%a, %c : tensor<4x8xf32>, tensor<8x4xf32>) outs(%acc : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %x, %y : tensor<4x4xf32>, tensor<4x4xf32>
}

// An einsum without a reduced letter ('s,se->se') lowers to `out + a * b`
// on a zero fill. Fused into the 'se,sc->sec' product that reads it, its
// init would stay an output that the c loop accumulates into (each value
// C times): it stays a generic of its own.
// CHECK-LABEL: func.func @reads_init
// CHECK: %[[SCALED:.*]] = linalg.generic {{.*}} ins(%arg0, %arg1 :
// CHECK: %[[OUTER:.*]] = linalg.generic {{.*}} ins(%[[SCALED]], %arg2 :
// CHECK: return %[[OUTER]]
#s = affine_map<(d0, d1) -> (d0)>
#se = affine_map<(d0, d1) -> (d0, d1)>
#sec_se = affine_map<(d0, d1, d2) -> (d0, d1)>
#sec_sc = affine_map<(d0, d1, d2) -> (d0, d2)>
#sec = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @reads_init(%a: tensor<16xf32>, %m: tensor<16x4xf32>, %l: tensor<16x4xf32>) -> tensor<16x4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<16x4xf32>) -> tensor<16x4xf32>
  %g = linalg.generic {indexing_maps = [#s, #se, #se], iterator_types = ["parallel", "parallel"]}
      ins(%a, %m : tensor<16xf32>, tensor<16x4xf32>) outs(%f : tensor<16x4xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<16x4xf32>
  %e3 = tensor.empty() : tensor<16x4x4xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<16x4x4xf32>) -> tensor<16x4x4xf32>
  %y = linalg.generic {indexing_maps = [#sec_se, #sec_sc, #sec], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%g, %l : tensor<16x4xf32>, tensor<16x4xf32>) outs(%f3 : tensor<16x4x4xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<16x4x4xf32>
  return %y : tensor<16x4x4xf32>
}
