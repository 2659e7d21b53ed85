// RUN: moe-opt %s --convert-comm-to-runtime=target=cuda | FileCheck %s
// RUN: not moe-opt %s --convert-comm-to-runtime=target=rocm 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: convert-comm-to-runtime: unknown target 'rocm' (expected cpu or cuda)

// With target=cuda every exchange calls the CUDA runtime's moert_cuda_*
// with the CPU call's arguments; the rank still comes from moert_rank.
shard.grid @world(shape = 2x1x1x2x1)

// CHECK-NOT: func.func private @moert_all
// CHECK-DAG: func.func private @moert_rank() -> i64
// CHECK-DAG: func.func private @moert_cuda_all_gather(!llvm.ptr, !llvm.ptr, i64, i64)
// CHECK-DAG: func.func private @moert_cuda_all_reduce_sum(!llvm.ptr, !llvm.ptr, i64, i32, i64)
// CHECK-LABEL: func.func @exchanges
// CHECK: call @moert_cuda_all_gather(%{{.*}}, %{{.*}}, %c128_i64, %c4_i64)
// bf16 sums carry dtype 5.
// CHECK: call @moert_cuda_all_reduce_sum(%{{.*}}, %{{.*}}, %c8_i64, %c5_i32, %c4_i64)
// CHECK: call @moert_cuda_reduce_scatter_sum(%{{.*}}, %{{.*}}, %c4_i64, %c0_i32, %c4_i64)
// CHECK: call @moert_cuda_exclusive_scan_sum(%{{.*}}, %{{.*}}, %c4_i64{{.*}}, %c2_i32, %c4_i64{{.*}})
// CHECK: call @moert_cuda_all_to_all(%{{.*}}, %{{.*}}, %c192_i64, %c4_i64)
// CHECK: call @moert_cuda_ragged_all_to_all(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c64_i64, %c2_i64, %c16_i64, %c4_i64)
func.func @exchanges(%x: tensor<8xf32>, %h: tensor<8xbf16>, %c: tensor<4xi32>, %rows: tensor<4x3x8xf32>, %r: tensor<8x16xf32>, %g: tensor<4x8xf32>)
    -> (tensor<8x8xf32>, tensor<8xbf16>, tensor<4xf32>, tensor<4xi32>, tensor<4x3x8xf32>, tensor<16x16xf32>, tensor<4xi32>) {
  %ag = shard.all_gather %g on @world grid_axes = [3] gather_axis = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  %ar = shard.all_reduce %h on @world grid_axes = [3] : tensor<8xbf16> -> tensor<8xbf16>
  %rs = shard.reduce_scatter %x on @world grid_axes = [3] scatter_axis = 0 : tensor<8xf32> -> tensor<4xf32>
  %p = moe.prefix_sum %c on @world grid_axes = [3] : tensor<4xi32>
  %a = shard.all_to_all %rows on @world grid_axes = [3] split_axis = 0 concat_axis = 0 : tensor<4x3x8xf32> -> tensor<4x3x8xf32>
  %o, %oc = moe.all_to_all %r, %c on @world grid_axes = [3] : (tensor<8x16xf32>, tensor<4xi32>) -> (tensor<16x16xf32>, tensor<4xi32>)
  return %ag, %ar, %rs, %p, %a, %o, %oc : tensor<8x8xf32>, tensor<8xbf16>, tensor<4xf32>, tensor<4xi32>, tensor<4x3x8xf32>, tensor<16x16xf32>, tensor<4xi32>
}

// CHECK-LABEL: func.func @stages
// CHECK: call @moert_rank()
// CHECK: call @moert_cuda_send(%{{.*}}, %c32_i64, %c1_i64, %c1_i64)
// CHECK: call @moert_cuda_recv(%{{.*}}, %c32_i64, %c1_i64, %c0_i64)
// CHECK: call @moert_cuda_broadcast(%{{.*}}, %{{.*}}, %c32_i64, %c1_i64, %c1_i64)
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
