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
