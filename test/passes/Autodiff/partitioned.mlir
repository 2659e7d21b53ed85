// RUN: moe-opt %s --split-input-file --verify-diagnostics --moe-autodiff="loss=mse" | FileCheck %s

// A partitioned program, differentiated as each rank runs it: tokens split
// over dp (axis 1), an expert weight cut over ep (axis 3) along its columns.
// CHECK-LABEL: func.func @main
// Each rank returns its piece's gradient, under the parameter's name.
// CHECK-SAME: tensor<4x4xf32> {moe.param = "dense.w", onnx.name = "grad:dense.w"}, tensor<4x2xf32> {moe.param = "expert.w", onnx.name = "grad:expert.w"}
// The forward's gathers take back their blocks, last first.
// CHECK: %[[DG:.*]] = shard.all_slice %{{[0-9]+}} on @world grid_axes = [1] slice_axis = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK: %[[DP:.*]] = shard.all_slice %[[DG]] on @world grid_axes = [3] slice_axis = 1 : tensor<4x4xf32> -> tensor<4x2xf32>
// The piece's gradient is summed over the dp ranks that hold the same piece;
// h was used alike by both ep ranks, so its cotangent is their sum.
// CHECK-DAG: %[[DE:.*]] = onnx.MatMul %{{.*}}, %[[DP]] : (tensor<4x4xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
// CHECK-DAG: %[[DH:.*]] = onnx.MatMul %[[DP]], %{{.*}} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
// CHECK-DAG: %[[DESUM:.*]] = shard.all_reduce %[[DE]] on @world grid_axes = [1] : tensor<4x2xf32> -> tensor<4x2xf32>
// CHECK-DAG: %[[DHSUM:.*]] = shard.all_reduce %[[DH]] on @world grid_axes = [3] : tensor<4x4xf32> -> tensor<4x4xf32>
// The weight the piece was cut from gets no gradient of its own.
// CHECK-NOT: shard.all_gather {{.*}} tensor<4x2xf32> -> tensor<4x4xf32>
// The dense weight's gradient is summed over the dp ranks.
// CHECK: %[[DW:.*]] = onnx.MatMul %{{.*}}, %[[DHSUM]] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK: %[[DWSUM:.*]] = shard.all_reduce %[[DW]] on @world grid_axes = [1] : tensor<4x4xf32> -> tensor<4x4xf32>
// CHECK: return %{{.*}}, %{{.*}}, %[[DWSUM]], %[[DESUM]]
module attributes {moe.plan = #moe.plan<pp = 1, dp = 2, dp_shard = 1, ep = 2, tp = 1, dispatcher = all_to_all, token_shuffle = false, load_balancing = none, aux_loss_coeff = 0.0, z_loss_coeff = 0.0, seed = 1>} {
shard.grid @world(shape = 1x2x1x2x1)
func.func @main(%x: tensor<8x4xf32> {onnx.name = "x"}) -> (tensor<8x4xf32> {onnx.name = "y"}) {
  %w = arith.constant dense_resource<dense.w> : tensor<4x4xf32>
  %e = arith.constant dense_resource<expert.w> : tensor<4x4xf32>
  %xs = shard.all_slice %x on @world grid_axes = [1] slice_axis = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
  %h = onnx.MatMul %xs, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %es = shard.all_slice %e on @world grid_axes = [3] slice_axis = 1 : tensor<4x4xf32> -> tensor<4x2xf32>
  %p = onnx.MatMul %h, %es : (tensor<4x4xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
  %g = shard.all_gather %p on @world grid_axes = [3] gather_axis = 1 : tensor<4x2xf32> -> tensor<4x4xf32>
  %y = shard.all_gather %g on @world grid_axes = [1] gather_axis = 0 : tensor<4x4xf32> -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}
}

{-#
  dialect_resources: {
    builtin: {
      dense.w: "0x04000000000000000000803d0000003e0000403e0000803e0000a03e0000c03e0000e03e0000003f0000103f0000203f0000303f0000403f0000503f0000603f0000703f",
      expert.w: "0x04000000000000000000803d0000003e0000403e0000803e0000a03e0000c03e0000e03e0000003f0000103f0000203f0000303f0000403f0000503f0000603f0000703f"
    }
  }
#-}

// -----

// A loss that differs between ranks has no single gradient.
module attributes {moe.plan = #moe.plan<pp = 1, dp = 2, dp_shard = 1, ep = 1, tp = 1, dispatcher = all_to_all, token_shuffle = false, load_balancing = none, aux_loss_coeff = 0.0, z_loss_coeff = 0.0, seed = 1>} {
shard.grid @world(shape = 1x2x1x1x1)
// expected-error @+1 {{the loss differs between ranks (it varies along dp)}}
func.func @main(%x: tensor<8x4xf32> {onnx.name = "x"}) -> (tensor<4x4xf32> {onnx.name = "y"}) {
  %w = arith.constant dense_resource<dense.w> : tensor<4x4xf32>
  %xs = shard.all_slice %x on @world grid_axes = [1] slice_axis = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
  %h = onnx.MatMul %xs, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %h : tensor<4x4xf32>
}
}

{-#
  dialect_resources: {
    builtin: {
      dense.w: "0x04000000000000000000803d0000003e0000403e0000803e0000a03e0000c03e0000e03e0000003f0000103f0000203f0000303f0000403f0000503f0000603f0000703f"
    }
  }
#-}

// -----

// Pipeline stages: the backward is a switch of the same cases, each the
// reverse of its case: the stage that received x sends its cotangent back,
// the stage that sent it receives it; the stage's weight gets its gradient
// from the switch, summed over the stages after it (the other stage's is
// zero), where every rank takes part. The broadcast's backward keeps the
// root's cotangent.
// CHECK-LABEL: func.func @main
// CHECK: scf.index_switch
// CHECK: shard.broadcast
// CHECK: %[[ROOT:.*]] = arith.cmpi eq, %{{.*}}, %c1
// CHECK: %[[DB:.*]] = arith.select %[[ROOT]]
// CHECK: %[[BACK:.*]]:2 = scf.index_switch
// CHECK: case 0 {
// CHECK: %[[DH:.*]] = shard.recv %{{.*}} on @world grid_axes = [0] source = [1]
// CHECK: onnx.MatMul %{{.*}}, %[[DH]]
// CHECK: case 1 {
// CHECK: shard.send %{{.*}} on @world grid_axes = [0] destination = [0]
// CHECK: shard.all_reduce %[[BACK]]#{{[01]}} on @world grid_axes = [0]
// CHECK: shard.all_reduce %[[BACK]]#{{[01]}} on @world grid_axes = [0]
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
