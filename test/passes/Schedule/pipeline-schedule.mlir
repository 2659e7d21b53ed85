// RUN: moe-opt %s --split-input-file --verify-diagnostics --moe-autodiff="loss=mse" --moe-pipeline-schedule="microbatches=3" --canonicalize | FileCheck %s

// Two stages, three microbatches. The step takes the three at once (x and
// target 3 x 4 rows). Stage 0 runs forward, forward, then a backward and a
// forward in turn: 1F1B with one microbatch in flight ahead. Stage 1 (the
// last, the switch's default) alternates from the start. Each
// microbatch's loss part (the last stage's output broadcast) runs just
// before its backward on both stages, so the broadcasts come in the same
// order on every rank. The microbatches' gradients and losses are summed
// in the stages; their mean is then summed over the stages, once.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:.*]]: tensor<12x4xf32> {onnx.name = "x"}, %[[T:.*]]: tensor<12x4xf32> {onnx.name = "target"})
// CHECK-SAME: moe.microbatches = 3
// CHECK-DAG: %[[THIRD:.*]] = arith.constant dense<0.333333343> : tensor<4x4xf32>
// CHECK: %[[S:.*]]:3 = scf.index_switch
// CHECK-NEXT: case 0 {
// CHECK: tensor.extract_slice %[[X]][0, 0] [4, 4] [1, 1]
// CHECK: shard.send {{.*}} destination = [1]
// CHECK: tensor.extract_slice %[[X]][4, 0] [4, 4] [1, 1]
// CHECK: shard.send {{.*}} destination = [1]
// CHECK: shard.broadcast
// CHECK: shard.recv {{.*}} source = [1]
// CHECK: tensor.extract_slice %[[X]][8, 0] [4, 4] [1, 1]
// CHECK: shard.send {{.*}} destination = [1]
// CHECK: shard.broadcast
// CHECK: shard.recv {{.*}} source = [1]
// CHECK: arith.addf
// CHECK: shard.broadcast
// CHECK: shard.recv {{.*}} source = [1]
// CHECK: arith.addf
// CHECK: default {
// CHECK: shard.recv {{.*}} source = [0]
// CHECK: shard.broadcast
// CHECK: shard.send {{.*}} destination = [0]
// CHECK: shard.recv {{.*}} source = [0]
// CHECK: shard.broadcast
// CHECK: shard.send {{.*}} destination = [0]
// CHECK: arith.addf
// CHECK: shard.recv {{.*}} source = [0]
// CHECK: shard.broadcast
// CHECK: shard.send {{.*}} destination = [0]
// CHECK: arith.addf
// CHECK: }
// CHECK-DAG: %[[G0:.*]] = arith.mulf %[[S]]#0, %[[THIRD]]
// CHECK-DAG: %[[G1:.*]] = arith.mulf %[[S]]#1, %[[THIRD]]
// CHECK-DAG: %[[LOSS:.*]] = arith.mulf %[[S]]#2
// CHECK-DAG: shard.all_reduce %[[G0]] on @world grid_axes = [0]
// CHECK-DAG: shard.all_reduce %[[G1]] on @world grid_axes = [0]
// CHECK: return %[[LOSS]]
module attributes {moe.plan = #moe.plan<pp = 2, dp = 1, dp_shard = 1, ep = 1, tp = 1, dispatcher = all_to_all, token_shuffle = false, load_balancing = none, aux_loss_coeff = 0.0, z_loss_coeff = 0.0, seed = 1>} {
shard.grid @world(shape = 2x1x1x1x1)
func.func private @stage0(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %w = arith.constant dense_resource<first.w> : tensor<4x4xf32>
  %h = onnx.MatMul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %h : tensor<4x4xf32>
}
func.func private @stage1(%h: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %w = arith.constant dense_resource<second.w> : tensor<4x4xf32>
  %y = onnx.MatMul %h, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}
func.func @main(%x: tensor<4x4xf32> {onnx.name = "x"}) -> (tensor<4x4xf32> {onnx.name = "y"}) {
  %stage = shard.process_multi_index on @world axes = [0] : index
  %out = scf.index_switch %stage -> tensor<4x4xf32>
  case 0 {
    %h = func.call @stage0(%x) : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %sent = shard.send %h on @world grid_axes = [0] destination = [1] : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %none = tensor.empty() : tensor<4x4xf32>
    scf.yield %none : tensor<4x4xf32>
  }
  case 1 {
    %buffer = tensor.empty() : tensor<4x4xf32>
    %h = shard.recv %buffer on @world grid_axes = [0] source = [0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %y = func.call @stage1(%h) : (tensor<4x4xf32>) -> tensor<4x4xf32>
    scf.yield %y : tensor<4x4xf32>
  }
  default {
    %none = tensor.empty() : tensor<4x4xf32>
    scf.yield %none : tensor<4x4xf32>
  }
  %all = shard.broadcast %out on @world grid_axes = [0] root = [1] : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %all : tensor<4x4xf32>
}
}

{-#
  dialect_resources: {
    builtin: {
      first.w: "0x04000000000000000000803d0000003e0000403e0000803e0000a03e0000c03e0000e03e0000003f0000103f0000203f0000303f0000403f0000503f0000603f0000703f",
      second.w: "0x04000000000000000000803d0000003e0000403e0000803e0000a03e0000c03e0000e03e0000003f0000103f0000203f0000303f0000403f0000503f0000603f0000703f"
    }
  }
#-}

// -----

// Without pipeline stages there is nothing to schedule: moe-train
// accumulates microbatches itself.
// expected-error @+1 {{moe-pipeline-schedule: the training step has no pipeline stages}}
func.func @main(%x: tensor<4x4xf32> {onnx.name = "x"}) -> (tensor<4x4xf32> {onnx.name = "y"}) {
  %w = arith.constant dense_resource<only.w> : tensor<4x4xf32>
  %y = onnx.MatMul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

{-#
  dialect_resources: {
    builtin: {
      only.w: "0x04000000000000000000803d0000003e0000403e0000803e0000a03e0000c03e0000e03e0000003f0000103f0000203f0000303f0000403f0000503f0000603f0000703f"
    }
  }
#-}
