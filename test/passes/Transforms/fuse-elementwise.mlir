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
