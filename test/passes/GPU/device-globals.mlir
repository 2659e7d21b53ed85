// RUN: moe-opt %s --split-input-file --moe-device-globals | FileCheck %s

// Host code reaches a weight (4 x 8 f32: 128 bytes) and a constant (16
// bytes) through their managed copies; a function's address and a kernel's
// own global stay as they are.
// CHECK: llvm.func @moert_cuda_global(!llvm.ptr, i64) -> !llvm.ptr
// CHECK-LABEL: llvm.func @host
// CHECK:   %[[W:.*]] = llvm.mlir.addressof @w : !llvm.ptr
// CHECK:   %[[WB:.*]] = llvm.mlir.constant(128 : i64) : i64
// CHECK:   %[[WD:.*]] = llvm.call @moert_cuda_global(%[[W]], %[[WB]])
// CHECK:   llvm.getelementptr %[[WD]][0, 1, 2]
// CHECK:   %[[C:.*]] = llvm.mlir.addressof @c : !llvm.ptr
// CHECK:   %[[CB:.*]] = llvm.mlir.constant(16 : i64) : i64
// CHECK:   %[[CD:.*]] = llvm.call @moert_cuda_global(%[[C]], %[[CB]])
// CHECK:   llvm.load %[[CD]]
// CHECK:   llvm.mlir.addressof @host : !llvm.ptr
// CHECK-NOT: moert_cuda_global
// CHECK-LABEL: gpu.module @kernels
// CHECK:   llvm.mlir.addressof @table
// CHECK-NOT: moert_cuda_global
module attributes {gpu.container_module} {
  llvm.mlir.global private @w() {addr_space = 0 : i32} : !llvm.array<4 x array<8 x f32>> {
    %0 = llvm.mlir.undef : !llvm.array<4 x array<8 x f32>>
    llvm.return %0 : !llvm.array<4 x array<8 x f32>>
  }
  llvm.mlir.global private constant @c(dense<1.0> : tensor<4xf32>) {addr_space = 0 : i32} : !llvm.array<4 x f32>
  llvm.func @host() -> !llvm.ptr {
    %w = llvm.mlir.addressof @w : !llvm.ptr
    %p = llvm.getelementptr %w[0, 1, 2] : (!llvm.ptr) -> !llvm.ptr, !llvm.array<4 x array<8 x f32>>
    %c = llvm.mlir.addressof @c : !llvm.ptr
    %v = llvm.load %c : !llvm.ptr -> f32
    llvm.store %v, %p : f32, !llvm.ptr
    %f = llvm.mlir.addressof @host : !llvm.ptr
    llvm.return %f : !llvm.ptr
  }
  gpu.module @kernels {
    llvm.mlir.global private constant @table(dense<2.0> : tensor<2xf32>) {addr_space = 0 : i32} : !llvm.array<2 x f32>
    llvm.func @kernel() {
      %t = llvm.mlir.addressof @table : !llvm.ptr
      %v = llvm.load %t : !llvm.ptr -> f32
      llvm.return
    }
  }
}

// -----

// The globals moe.device_globals lists get device copies, the others
// managed ones; the list is consumed.
// CHECK-NOT: moe.device_globals
// CHECK-DAG: llvm.func @moert_cuda_device_global(!llvm.ptr, i64) -> !llvm.ptr
// CHECK-DAG: llvm.func @moert_cuda_global(!llvm.ptr, i64) -> !llvm.ptr
// CHECK-LABEL: llvm.func @mixed
// CHECK:   %[[W:.*]] = llvm.mlir.addressof @w : !llvm.ptr
// CHECK:   llvm.call @moert_cuda_device_global(%[[W]],
// CHECK:   %[[C:.*]] = llvm.mlir.addressof @c : !llvm.ptr
// CHECK:   llvm.call @moert_cuda_global(%[[C]],
module attributes {moe.device_globals = [@w]} {
  llvm.mlir.global private @w() {addr_space = 0 : i32} : !llvm.array<4 x f32> {
    %0 = llvm.mlir.undef : !llvm.array<4 x f32>
    llvm.return %0 : !llvm.array<4 x f32>
  }
  llvm.mlir.global private constant @c(dense<1.0> : tensor<4xf32>) {addr_space = 0 : i32} : !llvm.array<4 x f32>
  llvm.func @mixed() -> f32 {
    %w = llvm.mlir.addressof @w : !llvm.ptr
    %c = llvm.mlir.addressof @c : !llvm.ptr
    %v = llvm.load %c : !llvm.ptr -> f32
    llvm.store %v, %w : f32, !llvm.ptr
    llvm.return %v : f32
  }
}
