// RUN: moe-opt %s --convert-comm-to-runtime --split-input-file --verify-diagnostics | FileCheck %s

// Tokens split over dp x ep (axes 1 and 3 of a 1x2x1x2x1 grid): this rank's
// rows start at (dp * 2 + ep) * 2.
shard.grid @world(shape = 1x2x1x2x1)

// Runtime functions are declared once, on first use.
// CHECK: func.func private @moert_rank() -> i64
// CHECK: func.func private @moert_all_gather(!llvm.ptr, !llvm.ptr, i64, i64)
// CHECK-LABEL: func.func @slice_gather
// CHECK: %[[R:.*]] = call @moert_rank() : () -> i64
// CHECK: %[[RANK:.*]] = arith.index_cast %[[R]] : i64 to index
// CHECK: arith.divui %[[RANK]], %c2
// CHECK: arith.remui %{{.*}}, %c2
// CHECK: arith.remui %{{.*}}, %c2
// CHECK: %[[OFF:.*]] = arith.muli %{{.*}}, %c2
// CHECK: %[[MINE:.*]] = tensor.extract_slice %arg0[%[[OFF]], 0] [2, 16] [1, 1] : tensor<8x16xf32> to tensor<2x16xf32>
// CHECK: %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<8x16xf32>
// CHECK: %[[IN:.*]] = bufferization.to_buffer %[[MINE]] read_only : tensor<2x16xf32> to memref<2x16xf32>
// 128 bytes per rank; axes [1, 3] encode as 0x42.
// CHECK: call @moert_all_gather(%{{.*}}, %{{.*}}, %c128_i64, %c66_i64) : (!llvm.ptr, !llvm.ptr, i64, i64) -> ()
// CHECK: %[[T:.*]] = bufferization.to_tensor %[[OUT]] restrict writable
// CHECK: return %[[T]]
func.func @slice_gather(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %s = shard.all_slice %x on @world grid_axes = [1, 3] slice_axis = 0 : tensor<8x16xf32> -> tensor<2x16xf32>
  %g = shard.all_gather %s on @world grid_axes = [1, 3] gather_axis = 0 : tensor<2x16xf32> -> tensor<8x16xf32>
  return %g : tensor<8x16xf32>
}

// CHECK-LABEL: func.func @reductions
// 8 x f32 (dtype 0) summed over tp (axis 4 -> 5).
// CHECK: call @moert_all_reduce_sum(%{{.*}}, %{{.*}}, %c8_i64, %c0_i32, %c5_i64)
// 4 per rank after a sum over ep (axis 3 -> 4).
// CHECK: call @moert_reduce_scatter_sum(%{{.*}}, %{{.*}}, %c4_i64, %c0_i32, %c4_i64)
// i32 counts (dtype 2), exclusive scan over ep.
// CHECK: call @moert_exclusive_scan_sum(%{{.*}}, %{{.*}}, %c4_i64{{.*}}, %c2_i32, %c4_i64{{.*}})
func.func @reductions(%x: tensor<8xf32>, %c: tensor<4xi32>) -> (tensor<8xf32>, tensor<4xf32>, tensor<4xi32>) {
  %r = shard.all_reduce %x on @world grid_axes = [4] : tensor<8xf32> -> tensor<8xf32>
  %s = shard.reduce_scatter %x on @world grid_axes = [3] scatter_axis = 0 : tensor<8xf32> -> tensor<4xf32>
  %p = moe.prefix_sum %c on @world grid_axes = [3] : tensor<4xi32>
  return %r, %s, %p : tensor<8xf32>, tensor<4xf32>, tensor<4xi32>
}

// CHECK-LABEL: func.func @exchanges
// Uniform capacity rows: 4x3x8 f32 in two blocks of 192 bytes.
// CHECK: call @moert_all_to_all(%{{.*}}, %{{.*}}, %c192_i64, %c4_i64)
// Ragged rows: 64-byte rows, 2 local groups, 16 rows of room.
// CHECK: %[[ROWS:.*]] = memref.alloc() {{.*}} : memref<16x16xf32>
// CHECK: %[[COUNTS:.*]] = memref.alloc() {{.*}} : memref<4xi32>
// CHECK: call @moert_ragged_all_to_all(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c64_i64, %c2_i64, %c16_i64, %c4_i64)
func.func @exchanges(%rows: tensor<4x3x8xf32>, %r: tensor<8x16xf32>, %c: tensor<4xi32>) -> (tensor<4x3x8xf32>, tensor<16x16xf32>, tensor<4xi32>) {
  %a = shard.all_to_all %rows on @world grid_axes = [3] split_axis = 0 concat_axis = 0 : tensor<4x3x8xf32> -> tensor<4x3x8xf32>
  %o, %oc = moe.all_to_all %r, %c on @world grid_axes = [3] : (tensor<8x16xf32>, tensor<4xi32>) -> (tensor<16x16xf32>, tensor<4xi32>)
  return %a, %o, %oc : tensor<4x3x8xf32>, tensor<16x16xf32>, tensor<4xi32>
}

// -----

// A gather along dim 1 stacks the blocks, then places each one.
shard.grid @world(shape = 1x1x1x1x2)

// CHECK-LABEL: func.func @gather_dim1
// CHECK: call @moert_all_gather({{.*}}) : (!llvm.ptr, !llvm.ptr, i64, i64) -> ()
// CHECK: %[[B:.*]] = bufferization.to_tensor {{.*}} : memref<2x4x3xf32> to tensor<2x4x3xf32>
// CHECK: %[[B0:.*]] = tensor.extract_slice %[[B]][0, 0, 0] [1, 4, 3] [1, 1, 1] : tensor<2x4x3xf32> to tensor<4x3xf32>
// CHECK: %[[R0:.*]] = tensor.insert_slice %[[B0]] into %{{.*}}[0, 0] [4, 3] [1, 1] : tensor<4x3xf32> into tensor<4x6xf32>
// CHECK: %[[B1:.*]] = tensor.extract_slice %[[B]][1, 0, 0] [1, 4, 3] [1, 1, 1] : tensor<2x4x3xf32> to tensor<4x3xf32>
// CHECK: tensor.insert_slice %[[B1]] into %[[R0]][0, 3] [4, 3] [1, 1] : tensor<4x3xf32> into tensor<4x6xf32>
func.func @gather_dim1(%x: tensor<4x3xf32>) -> tensor<4x6xf32> {
  %g = shard.all_gather %x on @world grid_axes = [4] gather_axis = 1 : tensor<4x3xf32> -> tensor<4x6xf32>
  return %g : tensor<4x6xf32>
}

// -----

// Pipeline stages: send, recv and broadcast along pp, by position.
shard.grid @world(shape = 2x1x1x1x1)

// CHECK-LABEL: func.func @stages
// CHECK: call @moert_rank()
// CHECK: scf.index_switch
// CHECK: call @moert_send(%{{.*}}, %c32_i64, %c1_i64, %c1_i64)
// CHECK: call @moert_recv(%{{.*}}, %c32_i64, %c1_i64, %c0_i64)
// CHECK: call @moert_broadcast(%{{.*}}, %{{.*}}, %c32_i64, %c1_i64, %c1_i64)
func.func @stages(%x: tensor<8xf32>) -> tensor<8xf32> {
  %i = shard.process_multi_index on @world axes = [0] : index
  %r = scf.index_switch %i -> tensor<8xf32>
  case 0 {
    %s = shard.send %x on @world grid_axes = [0] destination = [1] : (tensor<8xf32>) -> tensor<8xf32>
    scf.yield %s : tensor<8xf32>
  }
  default {
    %e = tensor.empty() : tensor<8xf32>
    %v = shard.recv %e on @world grid_axes = [0] source = [0] : (tensor<8xf32>) -> tensor<8xf32>
    scf.yield %v : tensor<8xf32>
  }
  %b = shard.broadcast %r on @world grid_axes = [0] root = [1] : (tensor<8xf32>) -> tensor<8xf32>
  return %b : tensor<8xf32>
}

// -----

shard.grid @world(shape = 1x1x1x2x1)

func.func @max(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{has no runtime lowering}}
  %r = shard.all_reduce %x on @world grid_axes = [3] reduction = max : tensor<8xf32> -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// The CPU runtime sums no bf16 (the CUDA runtime does).
shard.grid @world(shape = 1x1x1x2x1)

func.func @bf16_sum(%x: tensor<8xbf16>) -> tensor<8xbf16> {
  // expected-error @+1 {{has no runtime lowering}}
  %r = shard.all_reduce %x on @world grid_axes = [3] : tensor<8xbf16> -> tensor<8xbf16>
  return %r : tensor<8xbf16>
}

// -----

// Slot gradients over the 2 ep ranks: 6 slots, 3 per rank, rows of 4x2
// floats; f32 only. On one rank (no grid) the moe lowering adds them.
shard.grid @world(shape = 1x1x1x2x1)

// CHECK-LABEL: func.func @slot_grad_sum
// CHECK: %[[OUT:.*]] = memref.alloc() {{.*}} : memref<3x4x2xf32>
// CHECK: call @moert_slot_grad_sum(%{{.*}}, %{{.*}}, %{{.*}}, %c6_i64, %c8_i64, %c4_i64)
// CHECK: moe.slot_grad_sum %{{.*}}, %{{.*}} : (tensor<6x4xf32>, tensor<6xi32>) -> tensor<6x4xf32>
func.func @slot_grad_sum(%parts: tensor<6x4x2xf32>, %t: tensor<6xi32>, %one: tensor<6x4xf32>) -> (tensor<3x4x2xf32>, tensor<6x4xf32>) {
  %g = moe.slot_grad_sum %parts, %t on @world grid_axes = [3] : (tensor<6x4x2xf32>, tensor<6xi32>) -> tensor<3x4x2xf32>
  %b = moe.slot_grad_sum %one, %t : (tensor<6x4xf32>, tensor<6xi32>) -> tensor<6x4xf32>
  return %g, %b : tensor<3x4x2xf32>, tensor<6x4xf32>
}

// -----

shard.grid @world(shape = 1x1x1x2x1)

func.func @slot_grad_sum_f16(%parts: tensor<6x4xf16>, %t: tensor<6xi32>) -> tensor<3x4xf16> {
  // expected-error @+1 {{has no runtime lowering}}
  %g = moe.slot_grad_sum %parts, %t on @world grid_axes = [3] : (tensor<6x4xf16>, tensor<6xi32>) -> tensor<3x4xf16>
  return %g : tensor<3x4xf16>
}
