// RUN: moe-opt %s --moe-managed-memory | FileCheck %s

// CHECK-LABEL: func.func @buffers
// CHECK: %[[A:.*]] = gpu.alloc  host_shared () : memref<16xf32>
// The free is asynchronous (the only form gpu-to-llvm lowers) on a fresh
// stream, waited for at once.
// CHECK: %[[S:.*]] = gpu.wait async
// CHECK: %[[F:.*]] = gpu.dealloc async [%[[S]]] %[[A]] : memref<16xf32>
// CHECK: gpu.wait [%[[F]]]
// A buffer in another memory space is left alone.
// CHECK: memref.alloc() : memref<4xf32, 3>
func.func @buffers(%v: f32) {
  %c0 = arith.constant 0 : index
  %a = memref.alloc() : memref<16xf32>
  memref.store %v, %a[%c0] : memref<16xf32>
  memref.dealloc %a : memref<16xf32>
  %s = memref.alloc() : memref<4xf32, 3>
  memref.store %v, %s[%c0] : memref<4xf32, 3>
  return
}

// Copies become linalg.copy (kernels later), strided views included, and a
// scalar's as a copy of one element; one in another memory space stays
// memref.copy.
// CHECK-LABEL: func.func @copies
// CHECK: linalg.copy ins(%{{.*}} : memref<4x8xf32>) outs(%{{.*}} : memref<4x8xf32>)
// CHECK: linalg.copy ins(%{{.*}} : memref<4x2xf32, strided<[8, 1]>>) outs(%{{.*}} : memref<4x2xf32>)
// CHECK: %[[S:.*]] = memref.expand_shape %arg3 [] output_shape [1] : memref<f32> into memref<1xf32>
// CHECK: %[[T:.*]] = memref.expand_shape %arg4 [] output_shape [1] : memref<f32> into memref<1xf32>
// CHECK: linalg.copy ins(%[[S]] : memref<1xf32>) outs(%[[T]] : memref<1xf32>)
// CHECK: memref.copy %{{.*}}, %{{.*}} : memref<4xf32, 3> to memref<4xf32, 3>
// CHECK-NOT: linalg.copy
func.func @copies(%a: memref<4x8xf32>, %b: memref<4x8xf32>, %c: memref<4x2xf32>,
    %s: memref<f32>, %t: memref<f32>, %u: memref<4xf32, 3>, %w: memref<4xf32, 3>) {
  memref.copy %a, %b : memref<4x8xf32> to memref<4x8xf32>
  %view = memref.subview %a[0, 0] [4, 2] [1, 1] : memref<4x8xf32> to memref<4x2xf32, strided<[8, 1]>>
  memref.copy %view, %c : memref<4x2xf32, strided<[8, 1]>> to memref<4x2xf32>
  memref.copy %s, %t : memref<f32> to memref<f32>
  memref.copy %u, %w : memref<4xf32, 3> to memref<4xf32, 3>
  return
}
