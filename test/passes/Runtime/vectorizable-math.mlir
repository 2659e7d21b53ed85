// RUN: moe-opt %s --moe-vectorizable-math | FileCheck %s

// Float arithmetic may be reassociated (reductions vectorize); exp, tanh and
// erf become calls-free polynomials; integer ops are left alone.

// CHECK-LABEL: func.func @softmax_row
func.func @softmax_row(%x: memref<64xf32>, %y: memref<64xf32>, %m: f32) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0.0 : f32
  // CHECK: scf.for
  %sum = scf.for %i = %c0 to %c64 step %c1 iter_args(%acc = %zero) -> f32 {
    %v = memref.load %x[%i] : memref<64xf32>
    // CHECK: arith.subf {{.*}} fastmath<reassoc,contract,afn>
    %d = arith.subf %v, %m : f32
    // CHECK-NOT: math.exp
    // CHECK: arith.select
    // CHECK: math.fma
    // CHECK: arith.bitcast
    %e = math.exp %d : f32
    memref.store %e, %y[%i] : memref<64xf32>
    // CHECK: arith.addf {{.*}} fastmath<reassoc,contract,afn>
    %s = arith.addf %acc, %e : f32
    scf.yield %s : f32
  }
  return %sum : f32
}

// CHECK-LABEL: func.func @activations
// CHECK-NOT: math.tanh
// CHECK-NOT: math.erf
// CHECK: arith.addi %{{.*}}, %{{.*}} : i32
// CHECK-NOT: fastmath
// CHECK: return
func.func @activations(%a: f32, %i: i32) -> (f32, f32, i32) {
  %t = math.tanh %a : f32
  %e = math.erf %a : f32
  %j = arith.addi %i, %i : i32
  return %t, %e, %j : f32, f32, i32
}

// Flags already there are kept.
// CHECK-LABEL: func.func @kept
// CHECK: arith.mulf {{.*}} fastmath<reassoc,nnan,contract,afn>
func.func @kept(%a: f32) -> f32 {
  %0 = arith.mulf %a, %a fastmath<nnan> : f32
  return %0 : f32
}
