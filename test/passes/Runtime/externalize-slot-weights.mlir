// RUN: moe-opt %s --moe-externalize-weights=min-elements=8 | FileCheck %s

// A weight read through moe.slot_weights becomes a global of this rank's
// slots that records the initial table and its layer; the runtime's table
// becomes moe_slot_table_<layer>, whose source is the initial table. A
// constant table (a fixed placement) records the table and no layer.
shard.grid @world(shape = 1x1x1x2x1)

// CHECK-DAG: memref.global @moe_slot_table_2 : memref<6xi32> = uninitialized {alignment = 64 : i64, moe.slot_table = {experts = 4 : i64, layer = 2 : i64}, moe.weight_source = dense<[0, 1, 2, 3, 0, 1]> : tensor<6xi32>}
// CHECK-DAG: memref.global @[[RUNTIME:moe_weight_[0-9]+]] : memref<3x2xf32> = uninitialized {alignment = 64 : i64, moe.weight_grid = array<i64: 1, 1, 1, 2, 1>, moe.weight_slices = [{axes = array<i16: 3>, dim = 0 : index}], moe.weight_slot_layer = 2 : i64, moe.weight_slot_table = array<i32: 0, 1, 2, 3, 0, 1>, moe.weight_source = dense<{{.*}}> : tensor<4x2xf32>}
// CHECK-DAG: memref.global @[[FIXED:moe_weight_[0-9]+]] : memref<3x2xf32> = uninitialized {alignment = 64 : i64, moe.weight_grid = array<i64: 1, 1, 1, 2, 1>, moe.weight_slices = [{axes = array<i16: 3>, dim = 0 : index}], moe.weight_slot_table = array<i32: 3, 2, 1, 0, 3, 2>, moe.weight_source = dense<{{.*}}> : tensor<4x2xf32>}
// CHECK-LABEL: func.func @slots
// CHECK-NOT: moe.slot_weights
// CHECK-NOT: moe.slot_table
// CHECK-DAG: memref.get_global @[[RUNTIME]] : memref<3x2xf32>
// CHECK-DAG: memref.get_global @[[FIXED]] : memref<3x2xf32>
// CHECK-DAG: %[[T:.*]] = memref.get_global @moe_slot_table_2 : memref<6xi32>
// CHECK-DAG: %[[TT:.*]] = bufferization.to_tensor %[[T]] restrict : memref<6xi32> to tensor<6xi32>
// CHECK: moe.place %{{.*}}, %[[TT]]
func.func @slots(%ids: tensor<4x2xi32>) -> (tensor<3x2xf32>, tensor<3x2xf32>, tensor<4x2xi32>) {
  %w = arith.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]> : tensor<4x2xf32>
  %t = moe.slot_table layer 2 experts 4 initial [0, 1, 2, 3, 0, 1] : tensor<6xi32>
  %s = moe.slot_weights %w[%t] : (tensor<4x2xf32>, tensor<6xi32>) -> tensor<6x2xf32>
  %l = shard.all_slice %s on @world grid_axes = [3] slice_axis = 0 : tensor<6x2xf32> -> tensor<3x2xf32>
  %c = arith.constant dense<[3, 2, 1, 0, 3, 2]> : tensor<6xi32>
  %f = moe.slot_weights %w[%c] : (tensor<4x2xf32>, tensor<6xi32>) -> tensor<6x2xf32>
  %m = shard.all_slice %f on @world grid_axes = [3] slice_axis = 0 : tensor<6x2xf32> -> tensor<3x2xf32>
  %p = moe.place %ids, %t : tensor<4x2xi32>, tensor<6xi32>
  return %l, %m, %p : tensor<3x2xf32>, tensor<3x2xf32>, tensor<4x2xi32>
}
