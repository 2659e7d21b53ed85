// RUN: moe-opt %s --moe-externalize-weights=min-elements=8 | FileCheck %s

// Expert weights narrowed by ep then tp keep both steps; a replicated weight
// has none; small constants stay in the code.
shard.grid @world(shape = 1x1x1x2x2)

// CHECK-DAG: memref.global @[[WHOLE:moe_weight_[0-9]+]] : memref<4x2xf32> = uninitialized {alignment = 64 : i64, moe.weight_slices = [], moe.weight_source = dense<{{.*}}> : tensor<4x2xf32>}
// CHECK-DAG: memref.global @[[LOCAL:moe_weight_[0-9]+]] : memref<2x2x4xf32> = uninitialized {alignment = 64 : i64, moe.weight_grid = array<i64: 1, 1, 1, 2, 2>, moe.weight_slices = [{axes = array<i16: 3>, dim = 0 : index}, {axes = array<i16: 4>, dim = 1 : index}], moe.weight_source = dense<{{.*}}> : tensor<4x4x4xf32>}
// CHECK-LABEL: func.func @weights
// CHECK-NOT: shard.all_slice
// CHECK: %[[M:.*]] = memref.get_global @[[LOCAL]] : memref<2x2x4xf32>
// CHECK: %[[T:.*]] = bufferization.to_tensor %[[M]] restrict : memref<2x2x4xf32> to tensor<2x2x4xf32>
// CHECK: arith.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK: %[[W:.*]] = memref.get_global @[[WHOLE]] : memref<4x2xf32>
// CHECK: bufferization.to_tensor %[[W]] restrict
func.func @weights() -> (tensor<2x2x4xf32>, tensor<4x2xf32>, tensor<2xf32>) {
  %w = arith.constant dense<[[[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0], [12.0, 13.0, 14.0, 15.0]],
                             [[0.5, 1.5, 2.5, 3.5], [4.5, 5.5, 6.5, 7.5], [8.5, 9.5, 10.5, 11.5], [12.5, 13.5, 14.5, 15.5]],
                             [[1.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0], [12.0, 13.0, 14.0, 15.0]],
                             [[2.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0], [12.0, 13.0, 14.0, 15.0]]]> : tensor<4x4x4xf32>
  %e = shard.all_slice %w on @world grid_axes = [3] slice_axis = 0 : tensor<4x4x4xf32> -> tensor<2x4x4xf32>
  %t = shard.all_slice %e on @world grid_axes = [4] slice_axis = 1 : tensor<2x4x4xf32> -> tensor<2x2x4xf32>
  %g = arith.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]> : tensor<4x2xf32>
  %b = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  return %t, %g, %b : tensor<2x2x4xf32>, tensor<4x2xf32>, tensor<2xf32>
}
