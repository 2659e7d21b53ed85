// RUN: moe-opt %s --split-input-file --moe-gpu-device-memory | FileCheck %s

// Buffers that only kernels, moert_cuda_* calls (through views and raw
// addresses) and frees touch become device allocations on a stream, waited
// for at once; the weight that only a kernel reads is listed as a device
// global.
// CHECK: module attributes {gpu.container_module, moe.device_globals = [@weight]}
// CHECK-LABEL: func.func @device_only
// CHECK: %[[S1:.*]] = gpu.wait async
// CHECK-NEXT: %[[A:.*]], %[[T1:.*]] = gpu.alloc async [%[[S1]]] () : memref<4x8xf32>
// CHECK-NEXT: gpu.wait [%[[T1]]]
// CHECK: %[[S2:.*]] = gpu.wait async
// CHECK-NEXT: %[[B:.*]], %[[T2:.*]] = gpu.alloc async [%[[S2]]] () : memref<32xf32>
// CHECK-NEXT: gpu.wait [%[[T2]]]
// CHECK: %[[S3:.*]] = gpu.wait async
// CHECK-NEXT: %[[C:.*]], %[[T3:.*]] = gpu.alloc async [%[[S3]]] () : memref<4xi32>
// CHECK-NEXT: gpu.wait [%[[T3]]]
// CHECK-NOT: host_shared
// CHECK: gpu.launch_func @kernels::@fill {{.*}} args(%[[A]] : memref<4x8xf32>, %{{.*}} : memref<4x8xf32>)
// CHECK: memref.collapse_shape %[[A]]
// CHECK: call @moert_cuda_combine(
// CHECK: call @moert_cuda_read_counts(
// CHECK: gpu.dealloc async
module attributes {gpu.container_module} {
  memref.global "private" @weight : memref<4x8xf32>
  gpu.module @kernels {
    gpu.func @fill(%m: memref<4x8xf32>, %w: memref<4x8xf32>) kernel { gpu.return }
  }
  func.func private @moert_cuda_combine(!llvm.ptr, !llvm.ptr)
  func.func private @moert_cuda_read_counts(!llvm.ptr, i64, !llvm.ptr)
  func.func @device_only() {
    %c1 = arith.constant 1 : index
    %a = gpu.alloc host_shared () : memref<4x8xf32>
    %b = gpu.alloc host_shared () : memref<32xf32>
    %counts = gpu.alloc host_shared () : memref<4xi32>
    %host = memref.alloca() : memref<4xi32>
    %w = memref.get_global @weight : memref<4x8xf32>
    gpu.launch_func @kernels::@fill blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4x8xf32>, %w : memref<4x8xf32>)
    %flat = memref.collapse_shape %a [[0, 1]] : memref<4x8xf32> into memref<32xf32>
    %base, %offset, %size, %stride = memref.extract_strided_metadata %flat : memref<32xf32> -> memref<f32>, index, index, index
    %address = memref.extract_aligned_pointer_as_index %base : memref<f32> -> index
    %int = arith.index_cast %address : index to i64
    %ptr = llvm.inttoptr %int : i64 to !llvm.ptr
    %bAddress = memref.extract_aligned_pointer_as_index %b : memref<32xf32> -> index
    %bInt = arith.index_cast %bAddress : index to i64
    %bPtr = llvm.inttoptr %bInt : i64 to !llvm.ptr
    %next = llvm.getelementptr %bPtr[1] : (!llvm.ptr) -> !llvm.ptr, f32
    call @moert_cuda_combine(%ptr, %next) : (!llvm.ptr, !llvm.ptr) -> ()
    // The counts are read on the device, into the host's buffer.
    %cAddress = memref.extract_aligned_pointer_as_index %counts : memref<4xi32> -> index
    %cInt = arith.index_cast %cAddress : index to i64
    %cPtr = llvm.inttoptr %cInt : i64 to !llvm.ptr
    %hAddress = memref.extract_aligned_pointer_as_index %host : memref<4xi32> -> index
    %hInt = arith.index_cast %hAddress : index to i64
    %hPtr = llvm.inttoptr %hInt : i64 to !llvm.ptr
    %c4_i64 = arith.constant 4 : i64
    call @moert_cuda_read_counts(%cPtr, %c4_i64, %hPtr) : (!llvm.ptr, i64, !llvm.ptr) -> ()
    %s = gpu.wait async
    %f = gpu.dealloc async [%s] %a : memref<4x8xf32>
    gpu.wait [%f]
    return
  }
}

// -----

// What host code may dereference stays host-shared: a buffer loaded on the
// host through a view, one passed to another function, one whose address
// goes to a runtime function's host parameter (moert_cuda_read_counts'
// third, moert_cuda_grouped_matmul's fourth) or to a runtime function the
// pass does not know, one carried out of a loop. The constant read on the
// host is not a device global.
// CHECK-NOT: moe.device_globals
// CHECK-LABEL: func.func @host_touched
// CHECK-COUNT-6: gpu.alloc  host_shared
// CHECK-NOT: gpu.alloc async
module attributes {gpu.container_module} {
  memref.global "private" constant @table : memref<4xf32> = dense<1.0>
  func.func private @host_work(memref<16xf32>)
  func.func private @moert_cuda_read_counts(!llvm.ptr, i64, !llvm.ptr)
  func.func private @moert_cuda_grouped_matmul(i32, i64, i64, !llvm.ptr)
  func.func private @moert_cuda_future(!llvm.ptr)
  func.func @host_touched(%n: index) -> (f32, f32) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %a = gpu.alloc host_shared () : memref<16xf32>
    %view = memref.subview %a[4] [4] [1] : memref<16xf32> to memref<4xf32, strided<[1], offset: 4>>
    %v = memref.load %view[%c0] : memref<4xf32, strided<[1], offset: 4>>
    %b = gpu.alloc host_shared () : memref<16xf32>
    call @host_work(%b) : (memref<16xf32>) -> ()
    %c = gpu.alloc host_shared () : memref<16xf32>
    %address = memref.extract_aligned_pointer_as_index %c : memref<16xf32> -> index
    %int = arith.index_cast %address : index to i64
    %ptr = llvm.inttoptr %int : i64 to !llvm.ptr
    %c4_i64 = arith.constant 4 : i64
    call @moert_cuda_read_counts(%ptr, %c4_i64, %ptr) : (!llvm.ptr, i64, !llvm.ptr) -> ()
    %counts = gpu.alloc host_shared () : memref<16xf32>
    %countsAddress = memref.extract_aligned_pointer_as_index %counts : memref<16xf32> -> index
    %countsInt = arith.index_cast %countsAddress : index to i64
    %countsPtr = llvm.inttoptr %countsInt : i64 to !llvm.ptr
    %c0_i32 = arith.constant 0 : i32
    call @moert_cuda_grouped_matmul(%c0_i32, %c4_i64, %c4_i64, %countsPtr) : (i32, i64, i64, !llvm.ptr) -> ()
    %unknown = gpu.alloc host_shared () : memref<16xf32>
    %unknownAddress = memref.extract_aligned_pointer_as_index %unknown : memref<16xf32> -> index
    %unknownInt = arith.index_cast %unknownAddress : index to i64
    %unknownPtr = llvm.inttoptr %unknownInt : i64 to !llvm.ptr
    call @moert_cuda_future(%unknownPtr) : (!llvm.ptr) -> ()
    %d = gpu.alloc host_shared () : memref<16xf32>
    %last = scf.for %i = %c0 to %n step %c1 iter_args(%m = %d) -> memref<16xf32> {
      scf.yield %m : memref<16xf32>
    }
    %t = memref.get_global @table : memref<4xf32>
    %u = memref.load %t[%c0] : memref<4xf32>
    return %v, %u : f32, f32
  }
}

// -----

// A global is a device global only if every host read of it is a device
// use: here one function reads it on the host.
// CHECK-NOT: moe.device_globals
// CHECK-LABEL: func.func @device_read
// CHECK-LABEL: func.func @host_read
module attributes {gpu.container_module} {
  memref.global "private" @weight : memref<4xf32>
  gpu.module @kernels {
    gpu.func @use(%w: memref<4xf32>) kernel { gpu.return }
  }
  func.func @device_read() {
    %c1 = arith.constant 1 : index
    %w = memref.get_global @weight : memref<4xf32>
    gpu.launch_func @kernels::@use blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%w : memref<4xf32>)
    return
  }
  func.func @host_read() -> f32 {
    %c0 = arith.constant 0 : index
    %w = memref.get_global @weight : memref<4xf32>
    %v = memref.load %w[%c0] : memref<4xf32>
    return %v : f32
  }
}
