// RUN: moe-opt %s --moe-erase-dead-grids | FileCheck %s

// CHECK-NOT: shard.grid @unused
// CHECK: shard.grid @used(shape = 2)
// CHECK-LABEL: func.func @exchange
// CHECK: moe.all_to_all %{{.*}} on @used
shard.grid @unused(shape = 1)
shard.grid @used(shape = 2)

func.func @exchange(%rows: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %out = moe.all_to_all %rows on @used grid_axes = [0]
      : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %out : tensor<4x8xf32>
}
