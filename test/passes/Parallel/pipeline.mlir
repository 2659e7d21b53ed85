// Pipeline x expert parallelism: the function is cut into stages of balanced
// cost between MoE blocks; each rank runs its stage, activations travel by
// send/recv and the last stage broadcasts the result.
// RUN: moe-opt %s --moe-set-plan="pp=2 ep=2" --moe-partition | FileCheck %s
// An imported decoder layer: attention and the router in stage 0, the MoE
// block in stage 1.
// RUN: moe-translate --import-onnx %corpus/decoder_layer.onnx | moe-opt --moe-raise --moe-set-plan="pp=2 ep=2" --moe-partition | FileCheck %s --check-prefix=DECODER

func.func @two_layers(%x: tensor<16x8xf32>, %r: tensor<8x8xf32>,
                      %w1: tensor<8x16x8xf32>, %w2: tensor<8x8x16xf32>) -> tensor<16x8xf32> {
  %z = arith.constant dense<0.0> : tensor<16x8xf32>
  %l0 = linalg.matmul ins(%x, %r : tensor<16x8xf32>, tensor<8x8xf32>) outs(%z : tensor<16x8xf32>) -> tensor<16x8xf32>
  %y0 = moe.layer softmax topk k 2 %x, %l0 fc1(%w1) fc2(%w2) activation <silu>
      : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<8x16x8xf32>, tensor<8x8x16xf32>) -> tensor<16x8xf32>
  %h = arith.addf %x, %y0 : tensor<16x8xf32>
  %l1 = linalg.matmul ins(%h, %r : tensor<16x8xf32>, tensor<8x8xf32>) outs(%z : tensor<16x8xf32>) -> tensor<16x8xf32>
  %y1 = moe.layer softmax topk k 2 %h, %l1 fc1(%w1) fc2(%w2) activation <silu>
      : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<8x16x8xf32>, tensor<8x8x16xf32>) -> tensor<16x8xf32>
  %out = arith.addf %h, %y1 : tensor<16x8xf32>
  return %out : tensor<16x8xf32>
}

// CHECK: shard.grid @world(shape = 2x1x1x2x1)
// CHECK-LABEL: func.func private @two_layers_stage0(
// CHECK-SAME: %arg0: tensor<16x8xf32>, %arg1: tensor<8x8xf32>, %arg2: tensor<8x16x8xf32>, %arg3: tensor<8x8x16xf32>) -> tensor<16x8xf32>
// CHECK: moe.all_to_all {{.*}} on @world grid_axes = [3]
// CHECK: %[[H:.*]] = arith.addf %arg0,
// CHECK: return %[[H]]
// CHECK-LABEL: func.func private @two_layers_stage1(
// CHECK-SAME: %arg4: tensor<16x8xf32>) -> tensor<16x8xf32>
// CHECK: linalg.matmul ins(%arg4, %arg1
// CHECK: moe.all_to_all {{.*}} on @world grid_axes = [3]
// CHECK: arith.addf %arg4,
// CHECK-LABEL: func.func @two_layers(
// CHECK: %[[STAGE:.*]] = shard.process_multi_index on @world axes = [0] : index
// CHECK: %[[R:.*]] = scf.index_switch %[[STAGE]] -> tensor<16x8xf32>
// CHECK: case 0 {
// CHECK:   %[[A:.*]] = func.call @two_layers_stage0(%arg0, %arg1, %arg2, %arg3)
// CHECK:   shard.send %[[A]] on @world grid_axes = [0] destination = [1] : (tensor<16x8xf32>) -> tensor<16x8xf32>
// CHECK: case 1 {
// CHECK:   %[[BUF:.*]] = tensor.empty() : tensor<16x8xf32>
// CHECK:   %[[IN:.*]] = shard.recv %[[BUF]] on @world grid_axes = [0] source = [0] : (tensor<16x8xf32>) -> tensor<16x8xf32>
// CHECK:   %[[B:.*]] = func.call @two_layers_stage1(%arg0, %arg1, %arg2, %arg3, %[[IN]])
// CHECK:   scf.yield %[[B]]
// CHECK: %[[OUT:.*]] = shard.broadcast %[[R]] on @world grid_axes = [0] root = [1] : (tensor<16x8xf32>) -> tensor<16x8xf32>
// CHECK: return %[[OUT]]

// DECODER-LABEL: func.func private @main_graph_stage0(
// DECODER-SAME: -> (tensor<8x4xf32>, tensor<8x16xf32>, tensor<1x8x16xf32>)
// DECODER: onnx.Softmax
// DECODER-NOT: moe.
// DECODER: return
// DECODER-LABEL: func.func private @main_graph_stage1(
// DECODER: moe.router
// DECODER: moe.all_to_all
// DECODER: moe.experts
// DECODER: moe.all_to_all
// DECODER: onnx.Add
// DECODER-LABEL: func.func @main_graph(
// DECODER-COUNT-3: shard.send
// DECODER-COUNT-3: shard.recv
// DECODER: shard.broadcast
