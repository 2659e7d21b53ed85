// The GShard/Switch einsum form with capacity (SwitchCapacityMoE of
// test/corpus/models.py) as torch.onnx.export writes it, at toy sizes: 8
// tokens, hidden 4, 2 experts of width 8, top-1. The capacity
// ceil(T / E * 1.0) = 4 is computed from Shape(x); the experts' einsum
// weights are already [E, out, in], so moe.layer takes them as they are.
// RUN: moe-opt %s --moe-raise --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @main_graph(
// CHECK-SAME:    %[[ARG:.*]]: tensor<8x4xf32>
// CHECK-DAG:     %[[WR:.*]] = arith.constant {{.*}} : tensor<4x2xf32>
// CHECK-DAG:     %[[WI:.*]] = arith.constant {{.*}} : tensor<2x8x4xf32>
// CHECK-DAG:     %[[WO:.*]] = arith.constant {{.*}} : tensor<2x4x8xf32>
// CHECK:         %[[X:.*]] = onnx.Cast %[[ARG]]
// CHECK:         %[[LOGITS:.*]] = onnx.MatMul %[[X]], %[[WR]]
// CHECK-NEXT:    %[[Y:.*]] = moe.layer softmax topk k 1 %[[ARG]], %[[LOGITS]] capacity 4 drop position fc1(%[[WI]]) fc2(%[[WO]]) activation <relu>
// CHECK-SAME:      -> tensor<8x4xf32>
// CHECK-NEXT:    %[[OUT:.*]] = onnx.Cast %[[Y]] {to = 1 : i64} : (tensor<8x4xf32>) -> tensor<?x?xf32>
// CHECK-NEXT:    return %[[OUT]]
// CHECK-NOT:     onnx.Einsum

module {
  func.func @main_graph(%arg0: tensor<8x4xf32>) -> tensor<?x?xf32> {
    %wr = arith.constant dense<[[0.3, -0.5], [-0.4, -0.3], [-0.4, 0.3], [0.4, 0.1]]> : tensor<4x2xf32>
    // [E, F, H]: torch.stack of the experts' wi.weight.
    %wi = arith.constant dense<[
        [[-0.5, -0.4, -0.2, -0.1], [0.1, 0.0, -0.3, -0.4], [0.2, 0.3, -0.5, -0.4], [-0.1, -0.1, 0.4, 0.0],
         [-0.1, -0.1, 0.2, 0.1], [-0.4, 0.3, 0.3, 0.5], [0.3, -0.2, -0.2, 0.2], [0.2, 0.2, 0.4, -0.2]],
        [[0.5, -0.5, -0.5, 0.5], [0.5, -0.2, -0.4, -0.2], [-0.5, 0.4, 0.2, 0.1], [-0.3, 0.0, -0.3, 0.3],
         [0.0, -0.5, -0.3, 0.2], [0.0, -0.1, -0.3, -0.5], [0.1, 0.2, 0.0, 0.5], [0.5, -0.3, 0.1, 0.1]]]> : tensor<2x8x4xf32>
    // [E, H, F]: torch.stack of the experts' wo.weight.
    %wo = arith.constant dense<[
        [[-0.3, -0.2, 0.0, 0.3, -0.2, 0.2, 0.2, -0.3], [-0.1, 0.4, 0.4, 0.2, -0.5, 0.2, -0.3, 0.4],
         [0.5, -0.1, 0.5, 0.3, -0.2, 0.4, -0.1, -0.4], [0.1, 0.4, 0.2, -0.1, 0.4, 0.0, -0.1, -0.4]],
        [[-0.3, 0.2, 0.3, -0.2, 0.1, 0.4, -0.4, -0.2], [0.0, 0.1, -0.1, -0.1, -0.4, 0.1, 0.5, -0.3],
         [0.3, -0.4, -0.5, 0.3, -0.4, 0.3, -0.2, 0.1], [0.5, 0.5, 0.0, -0.3, -0.3, 0.4, 0.1, -0.4]]]> : tensor<2x4x8xf32>
    %x = onnx.Cast %arg0 {to = 1 : i64} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    %logits = onnx.MatMul %x, %wr : (tensor<8x4xf32>, tensor<4x2xf32>) -> tensor<8x2xf32>
    %probs = onnx.Softmax %logits {axis = -1 : i64} : (tensor<8x2xf32>) -> tensor<8x2xf32>
    %index = onnx.ArgMax %probs {axis = -1 : i64, keepdims = 0 : i64, select_last_index = 0 : i64} : (tensor<8x2xf32>) -> tensor<8xi64>
    %num_experts = arith.constant dense<2> : tensor<i64>
    %off_on = arith.constant dense<[0, 1]> : tensor<2xi64>
    %mask = onnx.OneHot %index, %num_experts, %off_on {axis = -1 : i64} : (tensor<8xi64>, tensor<i64>, tensor<2xi64>) -> tensor<8x?xi64>
    // capacity = ceil(T / E * 1.0)
    %shape = onnx.Shape %x : (tensor<8x4xf32>) -> tensor<2xi64>
    %zero = arith.constant dense<0> : tensor<i64>
    %tokens = onnx.Gather %shape, %zero {axis = 0 : i64} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
    %tokens_f = onnx.Cast %tokens {to = 1 : i64} : (tensor<i64>) -> tensor<f32>
    %experts_f = arith.constant dense<2.0> : tensor<f32>
    %per_expert = onnx.Div %tokens_f, %experts_f : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %factor = arith.constant dense<1.0> : tensor<f32>
    %scaled = onnx.Mul %per_expert, %factor : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %capacity = onnx.Ceil %scaled : (tensor<f32>) -> tensor<f32>
    // 1-based position of each token among its expert's; kept while <= C.
    %token_axis = arith.constant dense<-2> : tensor<i32>
    %priority = onnx.CumSum %mask, %token_axis : (tensor<8x?xi64>, tensor<i32>) -> tensor<8x?xi64>
    %priority_f = onnx.Cast %priority {to = 1 : i64} : (tensor<8x?xi64>) -> tensor<8x?xf32>
    %fits = onnx.LessOrEqual %priority_f, %capacity : (tensor<8x?xf32>, tensor<f32>) -> tensor<8x?xi1>
    %fits_i = onnx.Cast %fits {to = 7 : i64} : (tensor<8x?xi1>) -> tensor<8x?xi64>
    %keep = onnx.Mul %mask, %fits_i : (tensor<8x?xi64>, tensor<8x?xi64>) -> tensor<8x?xi64>
    %top_prob = onnx.ReduceMax %probs {axes = array<i64: -1>, keepdims = 0 : i64} : (tensor<8x2xf32>) -> tensor<8xf32>
    %last = arith.constant dense<[-1]> : tensor<1xi64>
    %top_prob2 = onnx.Unsqueeze %top_prob, %last : (tensor<8xf32>, tensor<1xi64>) -> tensor<8x1xf32>
    // dispatch = one_hot((priority - 1) * keep, C) * keep[..., None]
    %one = arith.constant dense<1> : tensor<i64>
    %position1 = onnx.Sub %priority, %one : (tensor<8x?xi64>, tensor<i64>) -> tensor<8x?xi64>
    %position = onnx.Mul %position1, %keep : (tensor<8x?xi64>, tensor<8x?xi64>) -> tensor<8x?xi64>
    %slot = onnx.OneHot %position, %capacity, %off_on {axis = -1 : i64} : (tensor<8x?xi64>, tensor<f32>, tensor<2xi64>) -> tensor<8x?x?xi64>
    %keep3 = onnx.Unsqueeze %keep, %last : (tensor<8x?xi64>, tensor<1xi64>) -> tensor<8x?x1xi64>
    %dispatch_i = onnx.Mul %slot, %keep3 : (tensor<8x?x?xi64>, tensor<8x?x1xi64>) -> tensor<8x?x?xi64>
    %dispatch = onnx.Cast %dispatch_i {to = 1 : i64} : (tensor<8x?x?xi64>) -> tensor<8x?x?xf32>
    %top_prob3 = onnx.Unsqueeze %top_prob2, %last : (tensor<8x1xf32>, tensor<1xi64>) -> tensor<8x1x1xf32>
    %combine = onnx.Mul %top_prob3, %dispatch : (tensor<8x1x1xf32>, tensor<8x?x?xf32>) -> tensor<8x?x?xf32>
    %rows = onnx.Einsum %dispatch, %x {equation = "tec,th->ech"} : (tensor<8x?x?xf32>, tensor<8x4xf32>) -> tensor<?x?x?xf32>
    %h = onnx.Einsum %rows, %wi {equation = "ech,efh->ecf"} : (tensor<?x?x?xf32>, tensor<2x8x4xf32>) -> tensor<?x?x?xf32>
    %act = onnx.Relu %h : (tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
    %y = onnx.Einsum %act, %wo {equation = "ecf,ehf->ech"} : (tensor<?x?x?xf32>, tensor<2x4x8xf32>) -> tensor<?x?x?xf32>
    %out = onnx.Einsum %combine, %y {equation = "tec,ech->th"} : (tensor<8x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?xf32>
    return %out : tensor<?x?xf32>
  }
}

// -----

// The same block as Mesh-TensorFlow writes it, with GShard's letters and
// static types: a constant capacity 3, 0-based positions from an exclusive
// cumsum kept while < C, operands in the other order, and a SwiGLU expert
// whose einsum weights are [E, in, out] (so they are transposed into new
// constants; fc3 is a splat).
// CHECK-LABEL: func.func @main_graph(
// CHECK-SAME:    %[[ARG:.*]]: tensor<8x4xf32>
// CHECK:         %[[LOGITS:.*]] = onnx.MatMul %[[ARG]]
// CHECK:         %[[Y:.*]] = moe.layer softmax topk k 1 %[[ARG]], %[[LOGITS]] capacity 3 drop position fc1(%{{.*}}) fc3(%{{.*}}) fc2(%{{.*}}) activation <swiglu>
// CHECK-SAME:      (tensor<8x4xf32>, tensor<8x2xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x4x8xf32>) -> tensor<8x4xf32>
// CHECK-NEXT:    return %[[Y]]
// [E, out, in]: expert 0's first row is column 0 of w_gate[0], [-0.3, -0.1, 0.5, 0.1].
// CHECK:         experts_fc1: "0x100000009A9999BECDCCCCBD0000003FCDCCCC3D

module {
  func.func @main_graph(%arg0: tensor<8x4xf32>) -> tensor<8x4xf32> {
    %wr = arith.constant dense<[[0.3, -0.5], [-0.4, -0.3], [-0.4, 0.3], [0.4, 0.1]]> : tensor<4x2xf32>
    // [E, H, F]
    %w_gate = arith.constant dense<[
        [[-0.3, -0.2, 0.0, 0.3, -0.2, 0.2, 0.2, -0.3], [-0.1, 0.4, 0.4, 0.2, -0.5, 0.2, -0.3, 0.4],
         [0.5, -0.1, 0.5, 0.3, -0.2, 0.4, -0.1, -0.4], [0.1, 0.4, 0.2, -0.1, 0.4, 0.0, -0.1, -0.4]],
        [[-0.3, 0.2, 0.3, -0.2, 0.1, 0.4, -0.4, -0.2], [0.0, 0.1, -0.1, -0.1, -0.4, 0.1, 0.5, -0.3],
         [0.3, -0.4, -0.5, 0.3, -0.4, 0.3, -0.2, 0.1], [0.5, 0.5, 0.0, -0.3, -0.3, 0.4, 0.1, -0.4]]]> : tensor<2x4x8xf32>
    %w_up = arith.constant dense<0.5> : tensor<2x4x8xf32>
    // [E, F, H]
    %w_down = arith.constant dense<[
        [[-0.5, -0.4, -0.2, -0.1], [0.1, 0.0, -0.3, -0.4], [0.2, 0.3, -0.5, -0.4], [-0.1, -0.1, 0.4, 0.0],
         [-0.1, -0.1, 0.2, 0.1], [-0.4, 0.3, 0.3, 0.5], [0.3, -0.2, -0.2, 0.2], [0.2, 0.2, 0.4, -0.2]],
        [[0.5, -0.5, -0.5, 0.5], [0.5, -0.2, -0.4, -0.2], [-0.5, 0.4, 0.2, 0.1], [-0.3, 0.0, -0.3, 0.3],
         [0.0, -0.5, -0.3, 0.2], [0.0, -0.1, -0.3, -0.5], [0.1, 0.2, 0.0, 0.5], [0.5, -0.3, 0.1, 0.1]]]> : tensor<2x8x4xf32>
    %logits = onnx.MatMul %arg0, %wr : (tensor<8x4xf32>, tensor<4x2xf32>) -> tensor<8x2xf32>
    %probs = onnx.Softmax %logits {axis = 1 : i64} : (tensor<8x2xf32>) -> tensor<8x2xf32>
    %index = onnx.ArgMax %probs {axis = 1 : i64, keepdims = 0 : i64} : (tensor<8x2xf32>) -> tensor<8xi64>
    %num_experts = arith.constant dense<2> : tensor<i64>
    %off_on = arith.constant dense<[0, 1]> : tensor<2xi64>
    %mask = onnx.OneHot %index, %num_experts, %off_on {axis = -1 : i64} : (tensor<8xi64>, tensor<i64>, tensor<2xi64>) -> tensor<8x2xi64>
    %capacity = arith.constant dense<3> : tensor<i64>
    %token_axis = arith.constant dense<0> : tensor<i64>
    %before = onnx.CumSum %mask, %token_axis {exclusive = 1 : i64} : (tensor<8x2xi64>, tensor<i64>) -> tensor<8x2xi64>
    %position = onnx.Mul %before, %mask : (tensor<8x2xi64>, tensor<8x2xi64>) -> tensor<8x2xi64>
    %fits = onnx.Less %position, %capacity : (tensor<8x2xi64>, tensor<i64>) -> tensor<8x2xi1>
    %fits_i = onnx.Cast %fits {to = 7 : i64} : (tensor<8x2xi1>) -> tensor<8x2xi64>
    %keep = onnx.Mul %fits_i, %mask : (tensor<8x2xi64>, tensor<8x2xi64>) -> tensor<8x2xi64>
    %slot = onnx.OneHot %position, %capacity, %off_on {axis = -1 : i64} : (tensor<8x2xi64>, tensor<i64>, tensor<2xi64>) -> tensor<8x2x3xi64>
    %axis2 = arith.constant dense<[2]> : tensor<1xi64>
    %keep3 = onnx.Unsqueeze %keep, %axis2 : (tensor<8x2xi64>, tensor<1xi64>) -> tensor<8x2x1xi64>
    %dispatch_i = onnx.Mul %keep3, %slot : (tensor<8x2x1xi64>, tensor<8x2x3xi64>) -> tensor<8x2x3xi64>
    %dispatch = onnx.Cast %dispatch_i {to = 1 : i64} : (tensor<8x2x3xi64>) -> tensor<8x2x3xf32>
    %axis1 = arith.constant dense<[1]> : tensor<1xi64>
    %top_prob = onnx.ReduceMax %probs, %axis1 {keepdims = 1 : i64} : (tensor<8x2xf32>, tensor<1xi64>) -> tensor<8x1xf32>
    %top_prob3 = onnx.Unsqueeze %top_prob, %axis2 : (tensor<8x1xf32>, tensor<1xi64>) -> tensor<8x1x1xf32>
    %combine = onnx.Mul %dispatch, %top_prob3 : (tensor<8x2x3xf32>, tensor<8x1x1xf32>) -> tensor<8x2x3xf32>
    %rows = onnx.Einsum %arg0, %dispatch {equation = "sm,sec->ecm"} : (tensor<8x4xf32>, tensor<8x2x3xf32>) -> tensor<2x3x4xf32>
    %g = onnx.Einsum %rows, %w_gate {equation = "ecm,emh->ech"} : (tensor<2x3x4xf32>, tensor<2x4x8xf32>) -> tensor<2x3x8xf32>
    %sig = onnx.Sigmoid %g : (tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
    %silu = onnx.Mul %g, %sig : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
    %up = onnx.Einsum %w_up, %rows {equation = "emh,ecm->ech"} : (tensor<2x4x8xf32>, tensor<2x3x4xf32>) -> tensor<2x3x8xf32>
    %h = onnx.Mul %silu, %up : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
    %y = onnx.Einsum %h, %w_down {equation = "ech,ehm->ecm"} : (tensor<2x3x8xf32>, tensor<2x8x4xf32>) -> tensor<2x3x4xf32>
    %out = onnx.Einsum %y, %combine {equation = "ecm,sec->sm"} : (tensor<2x3x4xf32>, tensor<8x2x3xf32>) -> tensor<8x4xf32>
    return %out : tensor<8x4xf32>
  }
}
