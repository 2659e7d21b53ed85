// RUN: moe-opt %s --moe-thread-loops | FileCheck %s
// RUN: moe-opt %s --moe-thread-loops=min-iterations=1 | FileCheck %s --check-prefix=ALL

// An elementwise loop over 128 x 256: its rows are shared by the threads,
// each row's 256 elements one scf.for (vectorizable, no index division).
// CHECK-LABEL: func.func @elementwise
// CHECK: omp.parallel {
// CHECK-NEXT: omp.wsloop {
// CHECK-NEXT: omp.loop_nest (%[[I:.*]]) : index = (%c0) to (%c128) step (%c1) {
// CHECK-NEXT: scf.for %[[J:.*]] = %c0 to %c256 step %c1 {
// CHECK: memref.load %arg0[%[[I]], %[[J]]]
// CHECK-NOT: scf.parallel
// ALL-LABEL: func.func @elementwise
// ALL: omp.loop_nest
func.func @elementwise(%a: memref<128x256xf32>, %b: memref<128x256xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %c256 = arith.constant 256 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c128, %c256) step (%c1, %c1) {
    %x = memref.load %a[%i, %j] : memref<128x256xf32>
    %y = arith.addf %x, %x : f32
    memref.store %y, %b[%i, %j] : memref<128x256xf32>
  }
  return
}

// 32 iterations: not worth forking the threads; a scf.for nest. With
// min-iterations=1, parallel.
// CHECK-LABEL: func.func @small
// CHECK-NOT: omp.
// CHECK: scf.for %[[I:.*]] = %c0 to %c4 step %c1 {
// CHECK-NEXT: scf.for %[[J:.*]] = %c0 to %c8 step %c1 {
// CHECK-NEXT: memref.store %{{.*}}, %arg0[%[[I]], %[[J]]]
// CHECK-NOT: omp.
// CHECK-LABEL: func.func @rows
// ALL-LABEL: func.func @small
// ALL: omp.parallel
// ALL: omp.loop_nest (%{{.*}}) : index = (%c0) to (%c4) step (%c1)
// ALL-NEXT: scf.for %{{.*}} = %c0 to %c8 step %c1

func.func @small(%a: memref<4x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %cst = arith.constant 1.0 : f32
  scf.parallel (%i, %j) = (%c0, %c0) to (%c4, %c8) step (%c1, %c1) {
    memref.store %cst, %a[%i, %j] : memref<4x8xf32>
  }
  return
}

// A row loop (1024 rows of 64): the rows are parallel; the parallel loop
// nested in it runs sequentially within its row, as every loop inside does.
// CHECK: omp.parallel {
// CHECK: omp.loop_nest (%[[ROW:.*]]) : index = (%c0) to (%c1024) step (%c1) {
// CHECK-NEXT: scf.for %[[J:.*]] = %c0 to %c64 step %c1 {
// CHECK-NEXT: memref.store %{{.*}}, %arg0[%[[ROW]], %[[J]]]
// CHECK: scf.for %[[K:.*]] = %c0 to %c64 step %c1 {
// CHECK-NEXT: memref.store %{{.*}}, %arg0[%[[ROW]], %[[K]]]
// CHECK-NOT: scf.parallel
// CHECK-NOT: omp.parallel
// CHECK-LABEL: func.func @dynamic

func.func @rows(%a: memref<1024x64xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c1024 = arith.constant 1024 : index
  %cst = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%c1024) step (%c1) {
    scf.for %j = %c0 to %c64 step %c1 {
      memref.store %cst, %a[%i, %j] : memref<1024x64xf32>
    }
    scf.parallel (%k) = (%c0) to (%c64) step (%c1) {
      memref.store %cst, %a[%i, %k] : memref<1024x64xf32>
    }
  }
  return
}


// A dynamic trip count may be large: parallel.
// CHECK: omp.parallel {
// CHECK: omp.loop_nest (%{{.*}}) : index = (%c0) to (%arg1) step (%c1) {
func.func @dynamic(%a: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cst = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    memref.store %cst, %a[%i] : memref<?xf32>
  }
  return
}
