// RUN: moe-opt %s --convert-matmul-to-runtime | FileCheck %s

// x [m, k] times W^T for W [n, k] (the expert FFN's form): B's strides along
// k and n are W's 1 and 8; the output is added to (accumulate 1); an expert
// GEMM is site 1; one problem (batch 1, batch strides 0).
// CHECK-LABEL: func.func @expert
// CHECK-NOT: linalg.matmul
// CHECK: %[[A:.*]], %[[AOFF:.*]], %{{.*}}:2, %[[AS:.*]]:2 = memref.extract_strided_metadata %arg0
// CHECK: %[[B:.*]], %[[BOFF:.*]], %{{.*}}:2, %[[BS:.*]]:2 = memref.extract_strided_metadata %arg1
// CHECK: %[[C:.*]], %[[COFF:.*]], %{{.*}}:2, %[[CS:.*]]:2 = memref.extract_strided_metadata %arg2
// CHECK: call @moert_matmul_f32(%c1_i64, %{{.*}}, %c16_i64, %c8_i64, %{{.*}}, %c0_i64, %{{.*}}, %{{.*}}, %{{.*}}, %c0_i64, %{{.*}}, %{{.*}}, %{{.*}}, %c0_i64, %{{.*}}, %{{.*}}, %c1_i32, %c1_i32)
#lhs = affine_map<(m, n, k) -> (m, k)>
#rhs_t = affine_map<(m, n, k) -> (n, k)>
#out = affine_map<(m, n, k) -> (m, n)>
func.func @expert(%x: memref<?x8xf32, strided<[8, 1], offset: ?>>, %w: memref<16x8xf32>, %y: memref<?x16xf32>) {
  linalg.matmul indexing_maps = [#lhs, #rhs_t, #out] {moe.expert_gemm}
      ins(%x, %w : memref<?x8xf32, strided<[8, 1], offset: ?>>, memref<16x8xf32>) outs(%y : memref<?x16xf32>)
  return
}

// ONNX MatMul [2, m, k] x [k, n]: one call for the batch of 2, the weight
// the same for both (batch stride 0), A's and C's batch strides 32 and 12;
// other GEMMs are site 0.
// CHECK-LABEL: func.func @batched
// CHECK-NOT: scf.for
// CHECK: call @moert_matmul_f32(%c2_i64, %c4_i64, %c3_i64, %c8_i64, %{{.*}}, %c32_i64, %c8_i64, %c1_i64, %{{.*}}, %c0_i64, %c3_i64, %c1_i64, %{{.*}}, %c12_i64, %c3_i64, %c1_i64, %c1_i32, %c0_i32)
func.func @batched(%a: memref<2x4x8xf32>, %b: memref<8x3xf32>, %c: memref<2x4x3xf32>) {
  linalg.generic {indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (k, n)>, affine_map<(b, m, n, k) -> (b, m, n)>],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<2x4x8xf32>, memref<8x3xf32>) outs(%c : memref<2x4x3xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// Two batch dims (attention's [batch, heads, m, k]): the inner one (heads,
// 3) is the call's batch, the outer one a loop around it that moves every
// operand.
// CHECK-LABEL: func.func @batched_heads
// CHECK: scf.for %[[B:.*]] = %c0 to %c2 step %c1
// CHECK:   arith.muli %[[B]]
// CHECK:   call @moert_matmul_f32(%c3_i64, %c4_i64, %c5_i64, %c8_i64, %{{.*}}, %c32_i64, %c8_i64, %c1_i64, %{{.*}}, %c40_i64, %c5_i64, %c1_i64, %{{.*}}, %c20_i64, %c5_i64, %c1_i64, %c1_i32, %c0_i32)
func.func @batched_heads(%a: memref<2x3x4x8xf32>, %b: memref<2x3x8x5xf32>, %c: memref<2x3x4x5xf32>) {
  linalg.generic {indexing_maps = [affine_map<(b, h, m, n, k) -> (b, h, m, k)>, affine_map<(b, h, m, n, k) -> (b, h, k, n)>, affine_map<(b, h, m, n, k) -> (b, h, m, n)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<2x3x4x8xf32>, memref<2x3x8x5xf32>) outs(%c : memref<2x3x4x5xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// A sum over a loop that only A has (an Einsum's "rbmk,bkn->bmn"): b, which
// the output has, is the call's batch; r is a loop around the call whose
// calls accumulate, so the zero fill stays.
// CHECK-LABEL: func.func @summed_loop
// CHECK: linalg.fill
// CHECK: scf.for %[[R:.*]] = %c0 to %c3 step %c1
// CHECK:   call @moert_matmul_f32(%c2_i64, %c4_i64, %c5_i64, %c8_i64, {{.*}}, %c1_i32, %c0_i32)
func.func @summed_loop(%a: memref<3x2x4x8xf32>, %b: memref<2x8x5xf32>, %c: memref<2x4x5xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<2x4x5xf32>)
  linalg.generic {indexing_maps = [affine_map<(r, b, m, n, k) -> (r, b, m, k)>, affine_map<(r, b, m, n, k) -> (b, k, n)>, affine_map<(r, b, m, n, k) -> (b, m, n)>],
                  iterator_types = ["reduction", "parallel", "parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<3x2x4x8xf32>, memref<2x8x5xf32>) outs(%c : memref<2x4x5xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// A zero fill right before the contraction (only side-effect-free ops in
// between) is dropped: the call overwrites its output (accumulate 0).
// CHECK-LABEL: func.func @zero_filled
// CHECK-NOT: linalg.fill
// CHECK: call @moert_matmul_f32({{.*}}, %c0_i32, %c0_i32)
func.func @zero_filled(%a: memref<4x8xf32>, %b: memref<8x3xf32>, %c: memref<4x3xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<4x3xf32>)
  %view = memref.subview %a[0, 0] [4, 8] [1, 1] : memref<4x8xf32> to memref<4x8xf32, strided<[8, 1]>>
  linalg.matmul ins(%view, %b : memref<4x8xf32, strided<[8, 1]>>, memref<8x3xf32>) outs(%c : memref<4x3xf32>)
  return
}

// A fill of another value, of another buffer, or one with a write in between
// stays; the call accumulates onto it.
// CHECK-LABEL: func.func @fill_kept
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%arg2
// CHECK: call @moert_matmul_f32({{.*}}, %c1_i32, %c0_i32)
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%arg3
// CHECK: call @moert_matmul_f32({{.*}}, %c1_i32, %c0_i32)
// CHECK: linalg.fill
// CHECK: memref.store
// CHECK: call @moert_matmul_f32({{.*}}, %c1_i32, %c0_i32)
func.func @fill_kept(%a: memref<4x8xf32>, %b: memref<8x3xf32>, %c: memref<4x3xf32>, %d: memref<4x3xf32>) {
  %one = arith.constant 1.0 : f32
  %zero = arith.constant 0.0 : f32
  %i = arith.constant 0 : index
  linalg.fill ins(%one : f32) outs(%c : memref<4x3xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x3xf32>) outs(%c : memref<4x3xf32>)
  linalg.fill ins(%zero : f32) outs(%d : memref<4x3xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x3xf32>) outs(%c : memref<4x3xf32>)
  linalg.fill ins(%zero : f32) outs(%c : memref<4x3xf32>)
  memref.store %one, %a[%i, %i] : memref<4x8xf32>
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x3xf32>) outs(%c : memref<4x3xf32>)
  return
}

// Not f32, or not a contraction: left to the loop lowering.
// CHECK-LABEL: func.func @left
// CHECK: linalg.matmul
// CHECK-NOT: moert_matmul_f32
func.func @left(%a: memref<4x8xf64>, %b: memref<8x3xf64>, %c: memref<4x3xf64>) {
  linalg.matmul ins(%a, %b : memref<4x8xf64>, memref<8x3xf64>) outs(%c : memref<4x3xf64>)
  return
}

// A scalar operand (a fused scale): not two buffers, left alone.
// CHECK-LABEL: func.func @scalar_operand
// CHECK: linalg.generic
// CHECK-NOT: moert_matmul_f32
func.func @scalar_operand(%a: memref<4x8xf32>, %s: f32, %c: memref<4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, k) -> (m, k)>, affine_map<(m, k) -> ()>, affine_map<(m, k) -> (m)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%a, %s : memref<4x8xf32>, f32) outs(%c : memref<4xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  }
  return
}
