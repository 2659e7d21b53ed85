// RUN: moe-opt %s --convert-matmul-to-runtime=target=cuda | FileCheck %s
// RUN: moe-opt %s --convert-matmul-to-runtime | FileCheck %s --check-prefix=CPU
// RUN: not moe-opt %s --convert-matmul-to-runtime=target=rocm 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: convert-matmul-to-runtime: unknown target 'rocm' (expected cpu or cuda)

// f32 with --target=cuda: moert_cuda_matmul, the type code (0) first; the
// zero fill is dropped and the call overwrites (accumulate 0).
// CHECK-LABEL: func.func @f32
// CHECK-NOT: linalg.fill
// CHECK: %[[A:.*]], %{{.*}}, %{{.*}}:2, %{{.*}}:2 = memref.extract_strided_metadata %arg0
// CHECK: %[[APTR:.*]] = llvm.inttoptr
// CHECK: llvm.getelementptr %[[APTR]][%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK: call @moert_cuda_matmul(%c0_i32, %c1_i64, {{.*}}, %c0_i32, %c0_i32) : (i32, i64, i64, i64, i64, !llvm.ptr, i64, i64, i64, !llvm.ptr, i64, i64, i64, !llvm.ptr, i64, i64, i64, i32, i32) -> ()
// CPU-LABEL: func.func @f32
// CPU: call @moert_matmul_f32(
func.func @f32(%a: memref<4x8xf32, strided<[8, 1], offset: ?>>, %b: memref<8x3xf32>, %c: memref<4x3xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<4x3xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf32, strided<[8, 1], offset: ?>>, memref<8x3xf32>) outs(%c : memref<4x3xf32>)
  return
}

// bf16 (code 5) and f16 (code 4) go to cuBLAS too, addressed in their own
// element size; the CPU call takes f32 only.
// CHECK-LABEL: func.func @bf16
// CHECK: llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, bf16
// CHECK: call @moert_cuda_matmul(%c5_i32,
// CPU-LABEL: func.func @bf16
// CPU: linalg.matmul
func.func @bf16(%a: memref<4x8xbf16, strided<[8, 1], offset: ?>>, %b: memref<8x3xbf16>, %c: memref<4x3xbf16>) {
  linalg.matmul ins(%a, %b : memref<4x8xbf16, strided<[8, 1], offset: ?>>, memref<8x3xbf16>) outs(%c : memref<4x3xbf16>)
  return
}

// CHECK-LABEL: func.func @f16
// CHECK: call @moert_cuda_matmul(%c4_i32,
func.func @f16(%a: memref<4x8xf16>, %b: memref<8x3xf16>, %c: memref<4x3xf16>) {
  linalg.matmul ins(%a, %b : memref<4x8xf16>, memref<8x3xf16>) outs(%c : memref<4x3xf16>)
  return
}

// Mixed element types (f16 inputs, f32 accumulator) stay a linalg op.
// CHECK-LABEL: func.func @mixed
// CHECK: linalg.matmul
func.func @mixed(%a: memref<4x8xf16>, %b: memref<8x3xf16>, %c: memref<4x3xf32>) {
  linalg.matmul ins(%a, %b : memref<4x8xf16>, memref<8x3xf16>) outs(%c : memref<4x3xf32>)
  return
}
