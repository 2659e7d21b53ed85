// RUN: moe-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(moe-gpu-static-kernel-operands))' --verify-diagnostics | FileCheck %s

// A slice at a rank's offset and a buffer of dynamic size reach the kernel
// as base buffers and metadata; the kernel rebuilds them. A buffer of static
// layout (a static offset included) is passed as it is.
// CHECK-LABEL: func.func @views
// CHECK-DAG: %[[SLICE:.*]], %[[OFF:.*]], %{{.*}}:2, %{{.*}}:2 = memref.extract_strided_metadata %{{.*}} : memref<4x8xf32, strided<[8, 1], offset: ?>>
// CHECK-DAG: %[[DYN:.*]], %{{.*}}, %[[SIZE:.*]], %{{.*}} = memref.extract_strided_metadata %arg2 : memref<?xf32>
// CHECK: gpu.launch
// CHECK-DAG: memref.reinterpret_cast %[[SLICE]] to offset: [%[[OFF]]], sizes: [4, 8], strides: [8, 1] : memref<f32> to memref<4x8xf32, strided<[8, 1], offset: ?>>
// CHECK-DAG: memref.reinterpret_cast %[[DYN]] to offset: [0], sizes: [%[[SIZE]]], strides: [1] : memref<f32> to memref<?xf32>
// CHECK: memref.load %{{.*}} : memref<4x8xf32, strided<[8, 1], offset: ?>>
// CHECK: memref.load %{{.*}} : memref<?xf32>
// CHECK: memref.load %arg3[%{{.*}}] : memref<4xf32, strided<[1], offset: 4>>
func.func @views(%m: memref<16x8xf32>, %rank: index, %d: memref<?xf32>, %s: memref<4xf32, strided<[1], offset: 4>>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %slice = memref.subview %m[%rank, 0] [4, 8] [1, 1] : memref<16x8xf32> to memref<4x8xf32, strided<[8, 1], offset: ?>>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %a = memref.load %slice[%c0, %c0] : memref<4x8xf32, strided<[8, 1], offset: ?>>
    %b = memref.load %d[%c0] : memref<?xf32>
    %c = memref.load %s[%c0] : memref<4xf32, strided<[1], offset: 4>>
    gpu.terminator
  }
  return
}

// -----

func.func @not_strided(%m: memref<4x4xf32, affine_map<(i, j) -> (j, i)>>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-error @+1 {{moe-gpu-static-kernel-operands: a kernel uses a buffer without a strided layout}}
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %a = memref.load %m[%c0, %c0] : memref<4x4xf32, affine_map<(i, j) -> (j, i)>>
    gpu.terminator
  }
  return
}
