// RUN: moe-opt %s --split-input-file --moe-thread-loops | FileCheck %s
// RUN: moe-opt %s --split-input-file --moe-thread-loops=max-stack-bytes=4096 | FileCheck %s --check-prefix=SMALL

// A softmax row loop as moe-fuse-rows leaves it: each row's buffers (the
// row, its maximum) are allocated and freed within the row. They become one
// stack buffer per thread at the top of the parallel region; no heap
// allocation or free is left in the loop. With max-stack-bytes=4096 the
// 4096-byte row buffer no longer fits beside the 4-byte maximum (the
// smallest go first) and stays on the heap.
// CHECK-LABEL: func.func @row_buffers
// CHECK: omp.parallel {
// CHECK-DAG: %[[MAX:.*]] = memref.alloca() {alignment = 64 : i64} : memref<f32>
// CHECK-DAG: %[[ROW:.*]] = memref.alloca() {alignment = 64 : i64} : memref<1024xf32>
// CHECK: omp.wsloop {
// CHECK-NOT: memref.alloc(
// CHECK-NOT: memref.alloc()
// CHECK-NOT: memref.dealloc
// CHECK: memref.store %{{.*}}, %[[ROW]][%{{.*}}] : memref<1024xf32>
// CHECK: memref.store %{{.*}}, %[[MAX]][] : memref<f32>
// CHECK-NOT: memref.dealloc
// CHECK: omp.terminator
// SMALL-LABEL: func.func @row_buffers
// SMALL: omp.parallel {
// SMALL-NEXT: %[[MAX:.*]] = memref.alloca() {alignment = 64 : i64} : memref<f32>
// SMALL-NEXT: omp.wsloop {
// SMALL: %[[ROW:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1024xf32>
// SMALL: memref.dealloc %[[ROW]] : memref<1024xf32>
// SMALL-NOT: memref.dealloc
func.func @row_buffers(%x: memref<1024x1024xf32>, %y: memref<1024x1024xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c1024 = arith.constant 1024 : index
  %ninf = arith.constant 0xFF800000 : f32
  scf.parallel (%i) = (%c0) to (%c1024) step (%c1) {
    %row = memref.alloc() {alignment = 64 : i64} : memref<1024xf32>
    %max = memref.alloc() {alignment = 64 : i64} : memref<f32>
    memref.store %ninf, %max[] : memref<f32>
    scf.for %j = %c0 to %c1024 step %c1 {
      %v = memref.load %x[%i, %j] : memref<1024x1024xf32>
      memref.store %v, %row[%j] : memref<1024xf32>
      %m = memref.load %max[] : memref<f32>
      %n = arith.maximumf %m, %v : f32
      memref.store %n, %max[] : memref<f32>
    }
    scf.for %j = %c0 to %c1024 step %c1 {
      %v = memref.load %row[%j] : memref<1024xf32>
      %m = memref.load %max[] : memref<f32>
      %d = arith.subf %v, %m : f32
      memref.store %d, %y[%i, %j] : memref<1024x1024xf32>
    }
    memref.dealloc %max : memref<f32>
    memref.dealloc %row : memref<1024xf32>
  }
  return
}

// -----

// Buffers that stay on the heap: one of dynamic size, one larger than
// max-stack-bytes (64 KiB by default), and one freed through a view of it
// (the pass moves only buffers whose own dealloc it sees).
// CHECK-LABEL: func.func @heap_buffers
// SMALL-LABEL: func.func @heap_buffers
// CHECK: omp.parallel {
// CHECK-NEXT: omp.wsloop {
// CHECK: memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK: memref.alloc() : memref<32768xf32>
// CHECK: memref.alloc() : memref<16xf32>
// CHECK: memref.dealloc
// CHECK: memref.dealloc
// CHECK: memref.dealloc
// CHECK: omp.terminator
// CHECK-NOT: memref.alloca
// CHECK: return
func.func @heap_buffers(%x: memref<1024x1024xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c1024 = arith.constant 1024 : index
  %one = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%c1024) step (%c1) {
    %dyn = memref.alloc(%n) : memref<?xf32>
    %big = memref.alloc() : memref<32768xf32>
    %viewed = memref.alloc() : memref<16xf32>
    %view = memref.subview %viewed[0] [8] [1] : memref<16xf32> to memref<8xf32, strided<[1]>>
    scf.for %j = %c0 to %c1024 step %c1 {
      memref.store %one, %dyn[%c0] : memref<?xf32>
      memref.store %one, %big[%j] : memref<32768xf32>
      memref.store %one, %view[%c0] : memref<8xf32, strided<[1]>>
    }
    memref.dealloc %dyn : memref<?xf32>
    memref.dealloc %big : memref<32768xf32>
    memref.dealloc %view : memref<8xf32, strided<[1]>>
  }
  return
}
