// RUN: moe-opt %s --convert-moe-to-linalg --split-input-file --verify-diagnostics

// Exchanges between ranks are left to the communication lowering.

shard.grid @grid(shape = 4)

func.func @uniform_four_ranks(%x: tensor<8x16x64xf32>) -> tensor<8x16x64xf32> {
  // expected-error @+1 {{'moe.all_to_all' op exchanges rows between 4 ranks; only the communication lowering handles that}}
  %y = moe.all_to_all %x on @grid grid_axes = [0]
      : (tensor<8x16x64xf32>) -> tensor<8x16x64xf32>
  return %y : tensor<8x16x64xf32>
}

// -----

shard.grid @grid(shape = 2x3)

func.func @ragged_six_ranks(%x: tensor<64x64xf32>, %counts: tensor<6xi32>)
    -> (tensor<128x64xf32>, tensor<6xi32>) {
  // expected-error @+1 {{'moe.all_to_all' op exchanges rows between 6 ranks; only the communication lowering handles that}}
  %y, %c = moe.all_to_all %x, %counts on @grid grid_axes = [0, 1]
      : (tensor<64x64xf32>, tensor<6xi32>) -> (tensor<128x64xf32>, tensor<6xi32>)
  return %y, %c : tensor<128x64xf32>, tensor<6xi32>
}

// -----

// The group is the grid axes named, not the whole grid.

shard.grid @grid(shape = 1x2)

func.func @ragged_second_axis(%x: tensor<64x64xf32>, %counts: tensor<4xi32>)
    -> (tensor<128x64xf32>, tensor<4xi32>) {
  // expected-error @+1 {{'moe.all_to_all' op exchanges rows between 2 ranks; only the communication lowering handles that}}
  %y, %c = moe.all_to_all %x, %counts on @grid grid_axes = [1]
      : (tensor<64x64xf32>, tensor<4xi32>) -> (tensor<128x64xf32>, tensor<4xi32>)
  return %y, %c : tensor<128x64xf32>, tensor<4xi32>
}
