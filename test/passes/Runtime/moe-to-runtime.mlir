// RUN: moe-opt %s --convert-moe-to-runtime --split-input-file | FileCheck %s
// RUN: moe-opt %s --convert-moe-to-runtime=target=cuda --split-input-file | FileCheck %s --check-prefix=CUDA
// RUN: not moe-opt %s --convert-moe-to-runtime=target=rocm 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: convert-moe-to-runtime: unknown target 'rocm' (expected cpu or cuda)

// Dropless rows [40, 4] in 4 groups of 2 experts (20 rows per expert: oneDNN
// per group), a separate SwiGLU: fc1 and fc3 are grouped GEMMs of the rows
// the groups take (the counts' sum, at most 40) x 4 -> 5 (f32: code 0,
// stride 0, no bias: a null pointer), the SwiGLU one elementwise op over
// those rows, fc2 a grouped GEMM 5 -> 3 of all 40 rows (the others zeroed).
// CHECK-LABEL: func.func @dropless_swiglu
// CHECK-NOT: moe.experts
// CHECK: %[[NOBIAS:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: %[[COUNTS:.*]] = llvm.inttoptr
// CHECK: %[[SUM:.*]] = scf.for
// CHECK: %[[USED:.*]] = arith.minsi %[[SUM]], %c40_i64 : i64
// CHECK: %[[H1:.*]] = memref.alloc() {alignment = 64 : i64} : memref<40x5xf32>
// CHECK: call @moert_grouped_matmul(%c0_i32, %c4_i64, %c2_i64, %[[COUNTS]], %c0_i64, %[[USED]], %c4_i64, %c5_i64, %{{.*}}, %{{.*}}, %[[NOBIAS]], %{{.*}})
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<40x5xf32>
// CHECK: call @moert_grouped_matmul(%c0_i32, %c4_i64, %c2_i64, %[[COUNTS]], %c0_i64, %[[USED]], %c4_i64, %c5_i64,
// CHECK: %[[USEDIDX:.*]] = arith.index_cast %[[USED]] : i64 to index
// CHECK: tensor.extract_slice %{{.*}}[0, 0] [%[[USEDIDX]], 5] [1, 1] : tensor<40x5xf32> to tensor<?x5xf32>
// CHECK: %[[A:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<?x5xf32>, tensor<?x5xf32>)
// CHECK:   math.exp
// CHECK: %[[Y:.*]] = memref.alloc() {alignment = 64 : i64} : memref<40x3xf32>
// CHECK: bufferization.to_buffer %[[A]] read_only
// CHECK: call @moert_grouped_matmul(%c0_i32, %c4_i64, %c2_i64, %[[COUNTS]], %c0_i64, %c40_i64, %c5_i64, %c3_i64,
// CHECK: %[[T:.*]] = bufferization.to_tensor %[[Y]]
// CHECK: return %[[T]] : tensor<40x3xf32>
// On the GPU the counts are read once into a host buffer made at the
// function's entry, then fc1 and fc3 are one call, then fc2.
// CUDA-LABEL: func.func @dropless_swiglu
// CUDA: %[[NOBIAS:.*]] = llvm.mlir.zero : !llvm.ptr
// CUDA: %[[HOST:.*]] = memref.alloca() : memref<4xi32>
// CUDA: %[[COUNTS:.*]] = llvm.inttoptr
// CUDA: %[[HOSTADDR:.*]] = memref.extract_aligned_pointer_as_index %[[HOST]]
// CUDA: %[[HOSTINT:.*]] = arith.index_cast %[[HOSTADDR]]
// CUDA: %[[HOSTCOUNTS:.*]] = llvm.inttoptr %[[HOSTINT]]
// CUDA: call @moert_cuda_read_counts(%[[COUNTS]], %c4_i64, %[[HOSTCOUNTS]])
// CUDA: call @moert_cuda_grouped_matmul_pair(%c0_i32, %c4_i64, %c2_i64, %[[HOSTCOUNTS]], %c0_i64, %c40_i64, %c4_i64, %c5_i64, %{{.*}}, %{{.*}}, %[[NOBIAS]], %{{.*}}, %{{.*}}, %[[NOBIAS]], %{{.*}})
// CUDA-NOT: call @moert_cuda_grouped_matmul_pair
// CUDA-NOT: call @moert_cuda_read_counts
// CUDA: call @moert_cuda_grouped_matmul(%c0_i32, %c4_i64, %c2_i64, %[[HOSTCOUNTS]], %c0_i64, %c40_i64, %c5_i64, %c3_i64,
func.func @dropless_swiglu(%rows: tensor<40x4xf32>, %counts: tensor<4xi32>,
    %w1: tensor<2x5x4xf32>, %w3: tensor<2x5x4xf32>, %w2: tensor<2x3x5xf32>) -> tensor<40x3xf32> {
  %y = moe.experts %rows, %counts fc1(%w1) fc3(%w3) fc2(%w2) activation <swiglu>
      : (tensor<40x4xf32>, tensor<4xi32>, tensor<2x5x4xf32>, tensor<2x5x4xf32>,
         tensor<2x3x5xf32>) -> tensor<40x3xf32>
  return %y : tensor<40x3xf32>
}

// -----

// Capacity rows [4, 3, 4] are 12 rows, group g from row 3 g (stride 3).
// CHECK-LABEL: func.func @capacity_relu
// CHECK: tensor.collapse_shape %{{.*}} {{\[}}[0, 1], [2]] : tensor<4x3x4xf32> into tensor<12x4xf32>
// CHECK: call @moert_grouped_matmul(%c0_i32, %c4_i64, %c2_i64, %{{.*}}, %c3_i64, %c12_i64, %c4_i64, %c5_i64,
// CHECK: linalg.generic
// CHECK:   arith.maximumf
// CHECK: call @moert_grouped_matmul(%c0_i32, %c4_i64, %c2_i64, %{{.*}}, %c3_i64, %c12_i64, %c5_i64, %c3_i64,
// CHECK: tensor.expand_shape %{{.*}} {{\[}}[0, 1], [2]] output_shape [4, 3, 3] : tensor<12x3xf32> into tensor<4x3x3xf32>
func.func @capacity_relu(%rows: tensor<4x3x4xf32>, %counts: tensor<4xi32>,
    %w1: tensor<2x5x4xf32>, %w2: tensor<2x3x5xf32>) -> tensor<4x3x3xf32> {
  %y = moe.experts %rows, %counts fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<4x3x4xf32>, tensor<4xi32>, tensor<2x5x4xf32>, tensor<2x3x5xf32>)
      -> tensor<4x3x3xf32>
  return %y : tensor<4x3x3xf32>
}

// -----

// bf16 experts: the CPU runtime multiplies f32 only, so the CPU lowering
// leaves them to the reference; the CUDA one passes code 5.
// CHECK-LABEL: func.func @bf16
// CHECK: moe.experts
// CUDA-LABEL: func.func @bf16
// CUDA-COUNT-2: call @moert_cuda_grouped_matmul(%c5_i32,
func.func @bf16(%rows: tensor<6x4xbf16>, %counts: tensor<2xi32>,
    %w1: tensor<2x5x4xbf16>, %w2: tensor<2x3x5xbf16>) -> tensor<6x3xbf16> {
  %y = moe.experts %rows, %counts fc1(%w1) fc2(%w2) activation <silu>
      : (tensor<6x4xbf16>, tensor<2xi32>, tensor<2x5x4xbf16>, tensor<2x3x5xbf16>)
      -> tensor<6x3xbf16>
  return %y : tensor<6x3xbf16>
}

// -----

// Biases go to the runtime with their projections: fc1's [2, 5] bias, none
// for fc2. 6 rows of 2 experts are a few per expert: the runtime's
// few-rows kernel for every group (dropless only: no stride).
// CHECK-LABEL: func.func @biased
// CHECK-NOT: moe.experts
// CHECK: %[[NOBIAS:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: %[[B1:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<2x5xf32> to memref<2x5xf32>
// CHECK: %[[B1INT:.*]] = memref.extract_aligned_pointer_as_index %[[B1]]
// CHECK: %[[B1I64:.*]] = arith.index_cast %[[B1INT]]
// CHECK: %[[B1PTR:.*]] = llvm.inttoptr %[[B1I64]]
// CHECK: call @moert_grouped_matmul_few_rows(%c0_i32, %c2_i64, %c2_i64, %{{.*}}, %{{.*}}, %c4_i64, %c5_i64, %{{.*}}, %{{.*}}, %[[B1PTR]], %{{.*}})
// CHECK: call @moert_grouped_matmul_few_rows(%c0_i32, %c2_i64, %c2_i64, %{{.*}}, %c6_i64, %c5_i64, %c3_i64, %{{.*}}, %{{.*}}, %[[NOBIAS]], %{{.*}})
// CUDA-LABEL: func.func @biased
// CUDA-COUNT-2: call @moert_cuda_grouped_matmul(
func.func @biased(%rows: tensor<6x4xf32>, %counts: tensor<2xi32>,
    %w1: tensor<2x5x4xf32>, %b1: tensor<2x5xf32>, %w2: tensor<2x3x5xf32>) -> tensor<6x3xf32> {
  %y = moe.experts %rows, %counts fc1(%w1, %b1) fc2(%w2) activation <relu>
      : (tensor<6x4xf32>, tensor<2xi32>, tensor<2x5x4xf32>, tensor<2x5xf32>, tensor<2x3x5xf32>)
      -> tensor<6x3xf32>
  return %y : tensor<6x3xf32>
}

// -----

// Groups that are slots (moe-place-experts): the choice goes by the logical
// experts, 40 rows over 2 (oneDNN), not by the 8 groups of 4 slots (5 rows
// each), so that a row takes the same path whatever the placement.
// CHECK-LABEL: func.func @slots
// CHECK: call @moert_grouped_matmul(%c0_i32, %c8_i64, %c4_i64, %{{.*}}, %c0_i64, %{{.*}}, %c4_i64, %c5_i64,
// CHECK: call @moert_grouped_matmul(%c0_i32, %c8_i64, %c4_i64, %{{.*}}, %c0_i64, %c40_i64, %c5_i64, %c3_i64,
func.func @slots(%rows: tensor<40x4xf32>, %counts: tensor<8xi32>,
    %w1: tensor<4x5x4xf32>, %w2: tensor<4x3x5xf32>) -> tensor<40x3xf32> {
  %y = moe.experts %rows, %counts fc1(%w1) fc2(%w2) activation <relu>
      {moe.logical_experts = 2 : i64}
      : (tensor<40x4xf32>, tensor<8xi32>, tensor<4x5x4xf32>, tensor<4x3x5xf32>)
      -> tensor<40x3xf32>
  return %y : tensor<40x3xf32>
}

// -----

// A gated pair with fc3's bias only: each projection keeps its own.
// CUDA-LABEL: func.func @biased_pair
// CUDA: %[[NOBIAS:.*]] = llvm.mlir.zero : !llvm.ptr
// CUDA: bufferization.to_buffer %{{.*}} read_only : tensor<2x5xf32> to memref<2x5xf32>
// CUDA: %[[B3:.*]] = llvm.inttoptr
// CUDA: call @moert_cuda_grouped_matmul_pair(%c0_i32, %c2_i64, %c2_i64, %{{.*}}, %c0_i64, %c6_i64, %c4_i64, %c5_i64, %{{.*}}, %{{.*}}, %[[NOBIAS]], %{{.*}}, %{{.*}}, %[[B3]], %{{.*}})
func.func @biased_pair(%rows: tensor<6x4xf32>, %counts: tensor<2xi32>,
    %w1: tensor<2x5x4xf32>, %w3: tensor<2x5x4xf32>, %b3: tensor<2x5xf32>, %w2: tensor<2x3x5xf32>) -> tensor<6x3xf32> {
  %y = moe.experts %rows, %counts fc1(%w1) fc3(%w3) fc3_bias(%b3) fc2(%w2) activation <swiglu>
      : (tensor<6x4xf32>, tensor<2xi32>, tensor<2x5x4xf32>, tensor<2x5x4xf32>, tensor<2x5xf32>, tensor<2x3x5xf32>)
      -> tensor<6x3xf32>
  return %y : tensor<6x3xf32>
}

// -----

// A dropless dispatch of 8 tokens of 16, top-2 of 4 experts: one call that
// fills the rows [16, 16], the slots and the counts; nothing is dropped.
// CHECK-LABEL: func.func @dropless_dispatch
// CHECK: %[[DROPPED:.*]] = arith.constant dense<0> : tensor<i64>
// CHECK-DAG: %[[ROWS:.*]] = memref.alloc() {alignment = 64 : i64} : memref<16x16xf32>
// CHECK-DAG: %[[SLOTS:.*]] = memref.alloc() {alignment = 64 : i64} : memref<8x2xi32>
// CHECK-DAG: %[[COUNTS:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4xi32>
// CHECK: call @moert_dispatch(%c0_i32, %{{.*}}, %c8_i64, %c16_i64, %{{.*}}, %c2_i64, %c4_i64, %{{.*}}, %{{.*}}, %{{.*}})
// CHECK-DAG: %[[R:.*]] = bufferization.to_tensor %[[ROWS]]
// CHECK-DAG: %[[S:.*]] = bufferization.to_tensor %[[SLOTS]]
// CHECK-DAG: %[[C:.*]] = bufferization.to_tensor %[[COUNTS]]
// CHECK: return %[[R]], %[[S]], %[[C]], %[[DROPPED]]
// CUDA-LABEL: func.func @dropless_dispatch
// CUDA: call @moert_cuda_dispatch(%c0_i32,
func.func @dropless_dispatch(%x: tensor<8x16xf32>, %ids: tensor<8x2xi32>)
    -> (tensor<16x16xf32>, tensor<8x2xi32>, tensor<4xi32>, tensor<i64>) {
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids
      : (tensor<8x16xf32>, tensor<8x2xi32>)
     -> (tensor<16x16xf32>, tensor<8x2xi32>, tensor<4xi32>, tensor<i64>)
  return %rows, %slots, %counts, %dropped : tensor<16x16xf32>, tensor<8x2xi32>, tensor<4xi32>, tensor<i64>
}

// -----

// Capacity dispatch (position policy) keeps the reference lowering on the
// CPU; with target=cuda it is one call into the padded buffer [4, 2, 16]:
// capacity 2, no `after` counts (a null pointer), rows of 2 per expert,
// and `dropped` a buffer the call fills.
// CHECK-LABEL: func.func @capacity_dispatch
// CHECK: moe.dispatch
// CHECK-NOT: moert_dispatch
// CUDA-LABEL: func.func @capacity_dispatch
// CUDA-NOT: moe.dispatch
// CUDA-DAG: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CUDA-DAG: %[[DROPPED:.*]] = memref.alloc() {alignment = 64 : i64} : memref<i64>
// CUDA: call @moert_cuda_dispatch_capacity(%c0_i32, %{{.*}}, %c8_i64, %c16_i64, %{{.*}}, %c1_i64, %c4_i64, %c2_i64, %c0_i32, %[[NULL]], %c2_i64, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (i32, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, i64, i32, !llvm.ptr, i64, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
// CUDA: %[[D:.*]] = bufferization.to_tensor %[[DROPPED]]
// CUDA: return {{.*}}, %[[D]]
func.func @capacity_dispatch(%x: tensor<8x16xf32>, %ids: tensor<8x1xi32>)
    -> (tensor<4x2x16xf32>, tensor<8x1xi32>, tensor<4xi32>, tensor<i64>) {
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids capacity 2 drop position
      : (tensor<8x16xf32>, tensor<8x1xi32>)
     -> (tensor<4x2x16xf32>, tensor<8x1xi32>, tensor<4xi32>, tensor<i64>)
  return %rows, %slots, %counts, %dropped : tensor<4x2x16xf32>, tensor<8x1xi32>, tensor<4xi32>, tensor<i64>
}

// -----

// A shard's capacity dispatch passes its `after` counts; rows [4, 3, 16]
// hold min(capacity 5, 3 pairs) rows per expert. The probs policy ranks
// the pairs (how many outrank each), gives id -1 to those that 5 others
// outrank, places the rest with the same kernels and counts the pairs it
// took out as dropped (on one-element vectors: kernels, not host code).
// CUDA-LABEL: func.func @capacity_after
// CUDA-SAME: %[[X:[^:]*]]: tensor<3x16xf32>, %[[IDS:[^:]*]]: tensor<3x1xi32>, %{{[^:]*}}: tensor<4xi32>, %[[W:[^:]*]]: tensor<3x1xf32>
// CUDA: call @moert_cuda_dispatch_capacity(%c0_i32, %{{.*}}, %c3_i64, %c16_i64, %{{.*}}, %c1_i64, %c4_i64, %c5_i64, %c0_i32, %{{.*}}, %c3_i64,
// CUDA: %[[RANKS:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction", "reduction"]} ins(%[[IDS]], %[[W]], %[[IDS]], %[[W]] :
// CUDA: %[[KEPT:.*]] = linalg.generic {{.*}} ins(%[[IDS]], %[[RANKS]] :
// CUDA:   %[[OUTRANKED:.*]] = arith.cmpi sge, %{{.*}}, %c5_i32
// CUDA:   arith.select %[[OUTRANKED]], %c-1_i32
// CUDA: %[[TAKEN:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction", "reduction"]} ins(%[[IDS]], %[[KEPT]] : {{.*}}) outs(%{{.*}} : tensor<1xi64>)
// CUDA:   arith.cmpi ult
// CUDA:   arith.cmpi ne
// CUDA: %[[KEPT_BUF:.*]] = bufferization.to_buffer %[[KEPT]]
// CUDA: %[[KEPT_ADDR:.*]] = memref.extract_aligned_pointer_as_index %[[KEPT_BUF]]
// CUDA: %[[KEPT_INT:.*]] = arith.index_cast %[[KEPT_ADDR]]
// CUDA: %[[KEPT_PTR:.*]] = llvm.inttoptr %[[KEPT_INT]]
// CUDA: %[[DROPPED:.*]] = memref.alloc() {{.*}} : memref<i64>
// CUDA: call @moert_cuda_dispatch_capacity(%c0_i32, %{{.*}}, %c3_i64, %c16_i64, %[[KEPT_PTR]], %c1_i64, %c4_i64, %c5_i64, %c0_i32, %{{.*}}, %c5_i64,
// CUDA: %[[LOST:.*]] = bufferization.to_tensor %[[DROPPED]]
// CUDA: %[[LOST1:.*]] = tensor.expand_shape %[[LOST]] [] output_shape [1] : tensor<i64> into tensor<1xi64>
// CUDA: %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["parallel"]} ins(%[[LOST1]], %[[TAKEN]] : tensor<1xi64>, tensor<1xi64>)
// CUDA:   arith.addi
// CUDA: %[[TOTAL:.*]] = tensor.collapse_shape %[[SUM]] [] : tensor<1xi64> into tensor<i64>
// CUDA: return {{.*}}, %[[TOTAL]]
// CUDA-NOT: moe.dispatch
func.func @capacity_after(%x: tensor<3x16xf32>, %ids: tensor<3x1xi32>,
    %after: tensor<4xi32>, %w: tensor<3x1xf32>)
    -> (tensor<4x3x16xf32>, tensor<4x5x16xf32>, tensor<i64>) {
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids capacity 5 drop position after %after
      : (tensor<3x16xf32>, tensor<3x1xi32>, tensor<4xi32>)
     -> (tensor<4x3x16xf32>, tensor<3x1xi32>, tensor<4xi32>, tensor<i64>)
  %rows2, %slots2, %counts2, %dropped2 = moe.dispatch %x, %ids capacity 5 drop probs by %w
      : (tensor<3x16xf32>, tensor<3x1xi32>, tensor<3x1xf32>)
     -> (tensor<4x5x16xf32>, tensor<3x1xi32>, tensor<4xi32>, tensor<i64>)
  return %rows, %rows2, %dropped2 : tensor<4x3x16xf32>, tensor<4x5x16xf32>, tensor<i64>
}

// -----

// The choice policy (GShard's top-2: every first choice before any second)
// is the same kernel taking the pairs slot-major (choice_major 1), on a
// shard with its `after` counts.
// CUDA-LABEL: func.func @capacity_choice
// CUDA: call @moert_cuda_dispatch_capacity(%c0_i32, %{{.*}}, %c3_i64, %c16_i64, %{{.*}}, %c2_i64, %c4_i64, %c5_i64, %c1_i32, %{{.*}}, %c5_i64,
// CUDA-NOT: moe.dispatch
func.func @capacity_choice(%x: tensor<3x16xf32>, %ids: tensor<3x2xi32>,
    %after: tensor<4xi32>) -> tensor<4x5x16xf32> {
  %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids capacity 5 drop choice after %after
      : (tensor<3x16xf32>, tensor<3x2xi32>, tensor<4xi32>)
     -> (tensor<4x5x16xf32>, tensor<3x2xi32>, tensor<4xi32>, tensor<i64>)
  return %rows : tensor<4x5x16xf32>
}

// -----

// Mixtral's router (softmax, top-2, normalized) is the fused gating kernel
// with target=cuda: bf16 (code 5), 32 tokens of 8 experts, scoring 0, normalize 1,
// scale 1.0; weights and ids in new buffers. The CPU keeps the compiled
// router.
// CHECK-LABEL: func.func @router_softmax
// CHECK: moe.router
// CUDA-LABEL: func.func @router_softmax
// CUDA-NOT: moe.router
// CUDA-DAG: %[[SCALE:.*]] = arith.constant 1.000000e+00 : f64
// CUDA-DAG: %[[W:.*]] = memref.alloc() {alignment = 64 : i64} : memref<32x2xbf16>
// CUDA-DAG: %[[IDS:.*]] = memref.alloc() {alignment = 64 : i64} : memref<32x2xi32>
// CUDA-DAG: %[[NOBIAS:.*]] = llvm.mlir.zero : !llvm.ptr
// CUDA-DAG: %[[NEGINF:.*]] = arith.constant 0xFFF0000000000000 : f64
// CUDA: call @moert_cuda_router(%c5_i32, %{{.*}}, %c32_i64, %c8_i64, %c2_i64, %c0_i32, %c1_i32, %[[SCALE]], %[[NOBIAS]], %c0_i64, %c0_i64, %c0_i32, %[[NEGINF]], %{{.*}}, %{{.*}}) : (i32, !llvm.ptr, i64, i64, i64, i32, i32, f64, !llvm.ptr, i64, i64, i32, f64, !llvm.ptr, !llvm.ptr) -> ()
// CUDA-DAG: %[[TI:.*]] = bufferization.to_tensor %[[IDS]]
// CUDA-DAG: %[[TW:.*]] = bufferization.to_tensor %[[W]]
// CUDA: return %[[TI]], %[[TW]]
func.func @router_softmax(%logits: tensor<32x8xbf16>)
    -> (tensor<32x2xi32>, tensor<32x2xbf16>) {
  %ids, %w = moe.router softmax topk %logits {normalize}
      : tensor<32x8xbf16> -> tensor<32x2xi32>, tensor<32x2xbf16>
  return %ids, %w : tensor<32x2xi32>, tensor<32x2xbf16>
}

// -----

// Sigmoid scores (scoring 2), not normalized, scaled by 2.5.
// CUDA-LABEL: func.func @router_sigmoid
// CUDA: arith.constant 2.500000e+00 : f64
// CUDA: call @moert_cuda_router(%c0_i32, %{{.*}}, %c16_i64, %c64_i64, %c4_i64, %c2_i32, %c0_i32,
func.func @router_sigmoid(%logits: tensor<16x64xf32>)
    -> (tensor<16x4xi32>, tensor<16x4xf32>) {
  %ids, %w = moe.router sigmoid topk %logits {scaling_factor = 2.5}
      : tensor<16x64xf32> -> tensor<16x4xi32>, tensor<16x4xf32>
  return %ids, %w : tensor<16x4xi32>, tensor<16x4xf32>
}

// -----

// DeepSeek-V3's router (sigmoid, a selection bias, 8 groups of which the 4
// best by top-2 sums stay, Hugging Face's 0.0 mask) and V2's (softmax, max
// group scores, -inf) are the gating kernel too, with the bias's pointer,
// groups, kept groups, group score (1: top-2 sum, 0: max) and mask.
// CUDA-LABEL: func.func @router_grouped
// CUDA-NOT: moe.router
// CUDA: %[[BIAS:.*]] = llvm.inttoptr
// CUDA: call @moert_cuda_router(%c0_i32, %{{.*}}, %c16_i64, %c64_i64, %c8_i64, %c2_i32, %c1_i32, %{{.*}}, %[[BIAS]], %c8_i64, %c4_i64, %c1_i32, %{{.*}}, %{{.*}}, %{{.*}})
// CUDA: call @moert_cuda_router(%c0_i32, %{{.*}}, %c16_i64, %c64_i64, %c6_i64, %c0_i32, %c0_i32, %{{.*}}, %{{.*}}, %c8_i64, %c3_i64, %c0_i32, %{{.*}}, %{{.*}}, %{{.*}})
func.func @router_grouped(%logits: tensor<16x64xf32>, %b: tensor<64xf32>)
    -> (tensor<16x8xf32>, tensor<16x6xf32>) {
  %i0, %w0 = moe.router sigmoid grouped_topk %logits bias(%b)
      groups 8 top 4 by top2_sum masked = 0.0 {normalize, scaling_factor = 2.5}
      : tensor<16x64xf32>, tensor<64xf32> -> tensor<16x8xi32>, tensor<16x8xf32>
  %i1, %w1 = moe.router softmax grouped_topk %logits groups 8 top 3 by max
      : tensor<16x64xf32> -> tensor<16x6xi32>, tensor<16x6xf32>
  return %w0, %w1 : tensor<16x8xf32>, tensor<16x6xf32>
}

// -----

// What the kernel does not do keeps the reference lowering: sinkhorn, more
// than 32 groups, and f64 logits.
// CUDA-LABEL: func.func @router_reference
// CUDA-NOT: moert_cuda_router
// CUDA-COUNT-3: moe.router
// CUDA-NOT: moert_cuda_router
func.func @router_reference(%logits: tensor<16x64xf32>, %l64: tensor<16x8xf64>)
    -> (tensor<16x2xf32>, tensor<16x2xf32>, tensor<16x2xf64>) {
  %i0, %w0 = moe.router softmax sinkhorn %logits
      : tensor<16x64xf32> -> tensor<16x2xi32>, tensor<16x2xf32>
  %i1, %w1 = moe.router softmax grouped_topk %logits groups 64 top 2 by max
      : tensor<16x64xf32> -> tensor<16x2xi32>, tensor<16x2xf32>
  %i2, %w2 = moe.router softmax topk %l64
      : tensor<16x8xf64> -> tensor<16x2xi32>, tensor<16x2xf64>
  return %w0, %w1, %w2 : tensor<16x2xf32>, tensor<16x2xf32>, tensor<16x2xf64>
}

// -----

// moe.combine is the weighted un-permute with target=cuda: capacity rows [4, 3, 5]
// read as 12 rows of 5, 6 tokens of top-2 (f16: code 4). The CPU keeps the
// compiled combine.
// CHECK-LABEL: func.func @combine
// CHECK: moe.combine
// CUDA-LABEL: func.func @combine
// CUDA: tensor.collapse_shape %{{.*}} {{\[}}[0, 1], [2]] : tensor<4x3x5xf16> into tensor<12x5xf16>
// CUDA: %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<6x5xf16>
// CUDA: call @moert_cuda_combine(%c4_i32, %{{.*}}, %c6_i64, %c5_i64, %c2_i64, %{{.*}}, %{{.*}}, %{{.*}}) : (i32, !llvm.ptr, i64, i64, i64, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
// CUDA: %[[T:.*]] = bufferization.to_tensor %[[OUT]]
// CUDA: return %[[T]]
func.func @combine(%rows: tensor<4x3x5xf16>, %slots: tensor<6x2xi32>,
    %w: tensor<6x2xf16>) -> tensor<6x5xf16> {
  %out = moe.combine %rows, %slots, %w
      : (tensor<4x3x5xf16>, tensor<6x2xi32>, tensor<6x2xf16>) -> tensor<6x5xf16>
  return %out : tensor<6x5xf16>
}

// -----

// moe.place is one kernel with target=cuda: 12 choices over 10 slots of 2
// ranks, from this rank's position. The CPU keeps the compiled scans.
// CHECK-LABEL: func.func @place
// CHECK: moe.place
// CUDA-LABEL: func.func @place
// CUDA: %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<6x2xi32>
// CUDA: %[[POS:.*]] = arith.index_cast %{{.*}} : index to i64
// CUDA: call @moert_cuda_place(%{{.*}}, %c12_i64, %{{.*}}, %c10_i64, %c2_i64, %[[POS]], %{{.*}}) : (!llvm.ptr, i64, !llvm.ptr, i64, i64, i64, !llvm.ptr) -> ()
// CUDA: %[[T:.*]] = bufferization.to_tensor %[[OUT]]
// CUDA: return %[[T]]
func.func @place(%ids: tensor<6x2xi32>, %table: tensor<10xi32>, %rank: index) -> tensor<6x2xi32> {
  %s = moe.place %ids, %table source %rank ranks 2 : tensor<6x2xi32>, tensor<10xi32>
  return %s : tensor<6x2xi32>
}
