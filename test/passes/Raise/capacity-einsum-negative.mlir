// Lookalikes of the GShard/Switch einsum form with capacity that must not
// be raised: what decides the semantics differs from moe.layer's top-1
// routing with the position drop policy.
// RUN: moe-opt %s --moe-raise --split-input-file | FileCheck %s

// The base block (capacity 2, splat weights) is raised; each case below
// changes one fact that decides its semantics.
// CHECK-LABEL: func.func @main_graph
// CHECK: moe.layer softmax topk k 1 %arg0, %{{.*}} capacity 2 drop position
// CHECK-NOT: onnx.Einsum
module {
  func.func @main_graph(%arg0: tensor<4x4xf32>) -> tensor<?x?xf32> {
    %wr = arith.constant dense<[[0.3, -0.5], [-0.4, -0.3], [-0.4, 0.3], [0.4, 0.1]]> : tensor<4x2xf32>
    %wi = arith.constant dense<0.1> : tensor<2x8x4xf32>
    %wo = arith.constant dense<0.2> : tensor<2x4x8xf32>
    %x = onnx.Cast %arg0 {to = 1 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %logits = onnx.MatMul %x, %wr : (tensor<4x4xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %probs = onnx.Softmax %logits {axis = -1 : i64} : (tensor<4x2xf32>) -> tensor<4x2xf32>
    %index = onnx.ArgMax %probs {axis = -1 : i64, keepdims = 0 : i64, select_last_index = 0 : i64} : (tensor<4x2xf32>) -> tensor<4xi64>
    %num_experts = arith.constant dense<2> : tensor<i64>
    %off_on = arith.constant dense<[0, 1]> : tensor<2xi64>
    %mask = onnx.OneHot %index, %num_experts, %off_on {axis = -1 : i64} : (tensor<4xi64>, tensor<i64>, tensor<2xi64>) -> tensor<4x?xi64>
    %capacity = arith.constant dense<2.0> : tensor<f32>
    %token_axis = arith.constant dense<-2> : tensor<i32>
    %priority = onnx.CumSum %mask, %token_axis : (tensor<4x?xi64>, tensor<i32>) -> tensor<4x?xi64>
    %priority_f = onnx.Cast %priority {to = 1 : i64} : (tensor<4x?xi64>) -> tensor<4x?xf32>
    %fits = onnx.LessOrEqual %priority_f, %capacity : (tensor<4x?xf32>, tensor<f32>) -> tensor<4x?xi1>
    %fits_i = onnx.Cast %fits {to = 7 : i64} : (tensor<4x?xi1>) -> tensor<4x?xi64>
    %keep = onnx.Mul %mask, %fits_i : (tensor<4x?xi64>, tensor<4x?xi64>) -> tensor<4x?xi64>
    %top_prob = onnx.ReduceMax %probs {axes = array<i64: -1>, keepdims = 0 : i64} : (tensor<4x2xf32>) -> tensor<4xf32>
    %last = arith.constant dense<[-1]> : tensor<1xi64>
    %top_prob2 = onnx.Unsqueeze %top_prob, %last : (tensor<4xf32>, tensor<1xi64>) -> tensor<4x1xf32>
    %one = arith.constant dense<1> : tensor<i64>
    %position1 = onnx.Sub %priority, %one : (tensor<4x?xi64>, tensor<i64>) -> tensor<4x?xi64>
    %position = onnx.Mul %position1, %keep : (tensor<4x?xi64>, tensor<4x?xi64>) -> tensor<4x?xi64>
    %slot = onnx.OneHot %position, %capacity, %off_on {axis = -1 : i64} : (tensor<4x?xi64>, tensor<f32>, tensor<2xi64>) -> tensor<4x?x?xi64>
    %keep3 = onnx.Unsqueeze %keep, %last : (tensor<4x?xi64>, tensor<1xi64>) -> tensor<4x?x1xi64>
    %dispatch_i = onnx.Mul %slot, %keep3 : (tensor<4x?x?xi64>, tensor<4x?x1xi64>) -> tensor<4x?x?xi64>
    %dispatch = onnx.Cast %dispatch_i {to = 1 : i64} : (tensor<4x?x?xi64>) -> tensor<4x?x?xf32>
    %top_prob3 = onnx.Unsqueeze %top_prob2, %last : (tensor<4x1xf32>, tensor<1xi64>) -> tensor<4x1x1xf32>
    %combine = onnx.Mul %top_prob3, %dispatch : (tensor<4x1x1xf32>, tensor<4x?x?xf32>) -> tensor<4x?x?xf32>
    %rows = onnx.Einsum %dispatch, %x {equation = "tec,th->ech"} : (tensor<4x?x?xf32>, tensor<4x4xf32>) -> tensor<?x?x?xf32>
    %h = onnx.Einsum %rows, %wi {equation = "ech,efh->ecf"} : (tensor<?x?x?xf32>, tensor<2x8x4xf32>) -> tensor<?x?x?xf32>
    %act = onnx.Relu %h : (tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
    %y = onnx.Einsum %act, %wo {equation = "ecf,ehf->ech"} : (tensor<?x?x?xf32>, tensor<2x4x8xf32>) -> tensor<?x?x?xf32>
    %out = onnx.Einsum %combine, %y {equation = "tec,ech->th"} : (tensor<4x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?xf32>
    return %out : tensor<?x?xf32>
  }
}

// -----

// The dispatch einsum lays the expert rows out slot-major ([C, E, H]), so
// the experts would contract the wrong axis.
// CHECK-LABEL: func.func @main_graph
// CHECK-NOT: moe.layer
// CHECK: onnx.Einsum {{.*}} {equation = "t{{.*}}->th"}
module {
  func.func @main_graph(%arg0: tensor<4x4xf32>) -> tensor<?x?xf32> {
    %wr = arith.constant dense<[[0.3, -0.5], [-0.4, -0.3], [-0.4, 0.3], [0.4, 0.1]]> : tensor<4x2xf32>
    %wi = arith.constant dense<0.1> : tensor<2x8x4xf32>
    %wo = arith.constant dense<0.2> : tensor<2x4x8xf32>
    %x = onnx.Cast %arg0 {to = 1 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %logits = onnx.MatMul %x, %wr : (tensor<4x4xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %probs = onnx.Softmax %logits {axis = -1 : i64} : (tensor<4x2xf32>) -> tensor<4x2xf32>
    %index = onnx.ArgMax %probs {axis = -1 : i64, keepdims = 0 : i64, select_last_index = 0 : i64} : (tensor<4x2xf32>) -> tensor<4xi64>
    %num_experts = arith.constant dense<2> : tensor<i64>
    %off_on = arith.constant dense<[0, 1]> : tensor<2xi64>
    %mask = onnx.OneHot %index, %num_experts, %off_on {axis = -1 : i64} : (tensor<4xi64>, tensor<i64>, tensor<2xi64>) -> tensor<4x?xi64>
    %capacity = arith.constant dense<2.0> : tensor<f32>
    %token_axis = arith.constant dense<-2> : tensor<i32>
    %priority = onnx.CumSum %mask, %token_axis : (tensor<4x?xi64>, tensor<i32>) -> tensor<4x?xi64>
    %priority_f = onnx.Cast %priority {to = 1 : i64} : (tensor<4x?xi64>) -> tensor<4x?xf32>
    %fits = onnx.LessOrEqual %priority_f, %capacity : (tensor<4x?xf32>, tensor<f32>) -> tensor<4x?xi1>
    %fits_i = onnx.Cast %fits {to = 7 : i64} : (tensor<4x?xi1>) -> tensor<4x?xi64>
    %keep = onnx.Mul %mask, %fits_i : (tensor<4x?xi64>, tensor<4x?xi64>) -> tensor<4x?xi64>
    %top_prob = onnx.ReduceMax %probs {axes = array<i64: -1>, keepdims = 0 : i64} : (tensor<4x2xf32>) -> tensor<4xf32>
    %last = arith.constant dense<[-1]> : tensor<1xi64>
    %top_prob2 = onnx.Unsqueeze %top_prob, %last : (tensor<4xf32>, tensor<1xi64>) -> tensor<4x1xf32>
    %one = arith.constant dense<1> : tensor<i64>
    %position1 = onnx.Sub %priority, %one : (tensor<4x?xi64>, tensor<i64>) -> tensor<4x?xi64>
    %position = onnx.Mul %position1, %keep : (tensor<4x?xi64>, tensor<4x?xi64>) -> tensor<4x?xi64>
    %slot = onnx.OneHot %position, %capacity, %off_on {axis = -1 : i64} : (tensor<4x?xi64>, tensor<f32>, tensor<2xi64>) -> tensor<4x?x?xi64>
    %keep3 = onnx.Unsqueeze %keep, %last : (tensor<4x?xi64>, tensor<1xi64>) -> tensor<4x?x1xi64>
    %dispatch_i = onnx.Mul %slot, %keep3 : (tensor<4x?x?xi64>, tensor<4x?x1xi64>) -> tensor<4x?x?xi64>
    %dispatch = onnx.Cast %dispatch_i {to = 1 : i64} : (tensor<4x?x?xi64>) -> tensor<4x?x?xf32>
    %top_prob3 = onnx.Unsqueeze %top_prob2, %last : (tensor<4x1xf32>, tensor<1xi64>) -> tensor<4x1x1xf32>
    %combine = onnx.Mul %top_prob3, %dispatch : (tensor<4x1x1xf32>, tensor<4x?x?xf32>) -> tensor<4x?x?xf32>
    %rows = onnx.Einsum %dispatch, %x {equation = "tec,th->ceh"} : (tensor<4x?x?xf32>, tensor<4x4xf32>) -> tensor<?x?x?xf32>
    %h = onnx.Einsum %rows, %wi {equation = "ech,efh->ecf"} : (tensor<?x?x?xf32>, tensor<2x8x4xf32>) -> tensor<?x?x?xf32>
    %act = onnx.Relu %h : (tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
    %y = onnx.Einsum %act, %wo {equation = "ecf,ehf->ech"} : (tensor<?x?x?xf32>, tensor<2x4x8xf32>) -> tensor<?x?x?xf32>
    %out = onnx.Einsum %combine, %y {equation = "tec,ech->th"} : (tensor<4x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?xf32>
    return %out : tensor<?x?xf32>
  }
}

// -----

// The first expert projection contracts the experts' weights over the
// capacity slots instead of the hidden axis.
// CHECK-LABEL: func.func @main_graph
// CHECK-NOT: moe.layer
// CHECK: onnx.Einsum {{.*}} {equation = "t{{.*}}->th"}
module {
  func.func @main_graph(%arg0: tensor<4x4xf32>) -> tensor<?x?xf32> {
    %wr = arith.constant dense<[[0.3, -0.5], [-0.4, -0.3], [-0.4, 0.3], [0.4, 0.1]]> : tensor<4x2xf32>
    %wi = arith.constant dense<0.1> : tensor<2x8x4xf32>
    %wo = arith.constant dense<0.2> : tensor<2x4x8xf32>
    %x = onnx.Cast %arg0 {to = 1 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %logits = onnx.MatMul %x, %wr : (tensor<4x4xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %probs = onnx.Softmax %logits {axis = -1 : i64} : (tensor<4x2xf32>) -> tensor<4x2xf32>
    %index = onnx.ArgMax %probs {axis = -1 : i64, keepdims = 0 : i64, select_last_index = 0 : i64} : (tensor<4x2xf32>) -> tensor<4xi64>
    %num_experts = arith.constant dense<2> : tensor<i64>
    %off_on = arith.constant dense<[0, 1]> : tensor<2xi64>
    %mask = onnx.OneHot %index, %num_experts, %off_on {axis = -1 : i64} : (tensor<4xi64>, tensor<i64>, tensor<2xi64>) -> tensor<4x?xi64>
    %capacity = arith.constant dense<2.0> : tensor<f32>
    %token_axis = arith.constant dense<-2> : tensor<i32>
    %priority = onnx.CumSum %mask, %token_axis : (tensor<4x?xi64>, tensor<i32>) -> tensor<4x?xi64>
    %priority_f = onnx.Cast %priority {to = 1 : i64} : (tensor<4x?xi64>) -> tensor<4x?xf32>
    %fits = onnx.LessOrEqual %priority_f, %capacity : (tensor<4x?xf32>, tensor<f32>) -> tensor<4x?xi1>
    %fits_i = onnx.Cast %fits {to = 7 : i64} : (tensor<4x?xi1>) -> tensor<4x?xi64>
    %keep = onnx.Mul %mask, %fits_i : (tensor<4x?xi64>, tensor<4x?xi64>) -> tensor<4x?xi64>
    %top_prob = onnx.ReduceMax %probs {axes = array<i64: -1>, keepdims = 0 : i64} : (tensor<4x2xf32>) -> tensor<4xf32>
    %last = arith.constant dense<[-1]> : tensor<1xi64>
    %top_prob2 = onnx.Unsqueeze %top_prob, %last : (tensor<4xf32>, tensor<1xi64>) -> tensor<4x1xf32>
    %one = arith.constant dense<1> : tensor<i64>
    %position1 = onnx.Sub %priority, %one : (tensor<4x?xi64>, tensor<i64>) -> tensor<4x?xi64>
    %position = onnx.Mul %position1, %keep : (tensor<4x?xi64>, tensor<4x?xi64>) -> tensor<4x?xi64>
    %slot = onnx.OneHot %position, %capacity, %off_on {axis = -1 : i64} : (tensor<4x?xi64>, tensor<f32>, tensor<2xi64>) -> tensor<4x?x?xi64>
    %keep3 = onnx.Unsqueeze %keep, %last : (tensor<4x?xi64>, tensor<1xi64>) -> tensor<4x?x1xi64>
    %dispatch_i = onnx.Mul %slot, %keep3 : (tensor<4x?x?xi64>, tensor<4x?x1xi64>) -> tensor<4x?x?xi64>
    %dispatch = onnx.Cast %dispatch_i {to = 1 : i64} : (tensor<4x?x?xi64>) -> tensor<4x?x?xf32>
    %top_prob3 = onnx.Unsqueeze %top_prob2, %last : (tensor<4x1xf32>, tensor<1xi64>) -> tensor<4x1x1xf32>
    %combine = onnx.Mul %top_prob3, %dispatch : (tensor<4x1x1xf32>, tensor<4x?x?xf32>) -> tensor<4x?x?xf32>
    %rows = onnx.Einsum %dispatch, %x {equation = "tec,th->ech"} : (tensor<4x?x?xf32>, tensor<4x4xf32>) -> tensor<?x?x?xf32>
    %h = onnx.Einsum %rows, %wi {equation = "ech,efc->ehf"} : (tensor<?x?x?xf32>, tensor<2x8x4xf32>) -> tensor<?x?x?xf32>
    %act = onnx.Relu %h : (tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
    %y = onnx.Einsum %act, %wo {equation = "ecf,ehf->ech"} : (tensor<?x?x?xf32>, tensor<2x4x8xf32>) -> tensor<?x?x?xf32>
    %out = onnx.Einsum %combine, %y {equation = "tec,ech->th"} : (tensor<4x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?xf32>
    return %out : tensor<?x?xf32>
  }
}

// -----

// Combine weights not from the router's probabilities: the max logit.
// CHECK-LABEL: func.func @main_graph
// CHECK-NOT: moe.layer
// CHECK: onnx.Einsum {{.*}} {equation = "t{{.*}}->th"}
module {
  func.func @main_graph(%arg0: tensor<4x4xf32>) -> tensor<?x?xf32> {
    %wr = arith.constant dense<[[0.3, -0.5], [-0.4, -0.3], [-0.4, 0.3], [0.4, 0.1]]> : tensor<4x2xf32>
    %wi = arith.constant dense<0.1> : tensor<2x8x4xf32>
    %wo = arith.constant dense<0.2> : tensor<2x4x8xf32>
    %x = onnx.Cast %arg0 {to = 1 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %logits = onnx.MatMul %x, %wr : (tensor<4x4xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %probs = onnx.Softmax %logits {axis = -1 : i64} : (tensor<4x2xf32>) -> tensor<4x2xf32>
    %index = onnx.ArgMax %probs {axis = -1 : i64, keepdims = 0 : i64, select_last_index = 0 : i64} : (tensor<4x2xf32>) -> tensor<4xi64>
    %num_experts = arith.constant dense<2> : tensor<i64>
    %off_on = arith.constant dense<[0, 1]> : tensor<2xi64>
    %mask = onnx.OneHot %index, %num_experts, %off_on {axis = -1 : i64} : (tensor<4xi64>, tensor<i64>, tensor<2xi64>) -> tensor<4x?xi64>
    %capacity = arith.constant dense<2.0> : tensor<f32>
    %token_axis = arith.constant dense<-2> : tensor<i32>
    %priority = onnx.CumSum %mask, %token_axis : (tensor<4x?xi64>, tensor<i32>) -> tensor<4x?xi64>
    %priority_f = onnx.Cast %priority {to = 1 : i64} : (tensor<4x?xi64>) -> tensor<4x?xf32>
    %fits = onnx.LessOrEqual %priority_f, %capacity : (tensor<4x?xf32>, tensor<f32>) -> tensor<4x?xi1>
    %fits_i = onnx.Cast %fits {to = 7 : i64} : (tensor<4x?xi1>) -> tensor<4x?xi64>
    %keep = onnx.Mul %mask, %fits_i : (tensor<4x?xi64>, tensor<4x?xi64>) -> tensor<4x?xi64>
    %top_prob = onnx.ReduceMax %logits {axes = array<i64: -1>, keepdims = 0 : i64} : (tensor<4x2xf32>) -> tensor<4xf32>
    %last = arith.constant dense<[-1]> : tensor<1xi64>
    %top_prob2 = onnx.Unsqueeze %top_prob, %last : (tensor<4xf32>, tensor<1xi64>) -> tensor<4x1xf32>
    %one = arith.constant dense<1> : tensor<i64>
    %position1 = onnx.Sub %priority, %one : (tensor<4x?xi64>, tensor<i64>) -> tensor<4x?xi64>
    %position = onnx.Mul %position1, %keep : (tensor<4x?xi64>, tensor<4x?xi64>) -> tensor<4x?xi64>
    %slot = onnx.OneHot %position, %capacity, %off_on {axis = -1 : i64} : (tensor<4x?xi64>, tensor<f32>, tensor<2xi64>) -> tensor<4x?x?xi64>
    %keep3 = onnx.Unsqueeze %keep, %last : (tensor<4x?xi64>, tensor<1xi64>) -> tensor<4x?x1xi64>
    %dispatch_i = onnx.Mul %slot, %keep3 : (tensor<4x?x?xi64>, tensor<4x?x1xi64>) -> tensor<4x?x?xi64>
    %dispatch = onnx.Cast %dispatch_i {to = 1 : i64} : (tensor<4x?x?xi64>) -> tensor<4x?x?xf32>
    %top_prob3 = onnx.Unsqueeze %top_prob2, %last : (tensor<4x1xf32>, tensor<1xi64>) -> tensor<4x1x1xf32>
    %combine = onnx.Mul %top_prob3, %dispatch : (tensor<4x1x1xf32>, tensor<4x?x?xf32>) -> tensor<4x?x?xf32>
    %rows = onnx.Einsum %dispatch, %x {equation = "tec,th->ech"} : (tensor<4x?x?xf32>, tensor<4x4xf32>) -> tensor<?x?x?xf32>
    %h = onnx.Einsum %rows, %wi {equation = "ech,efh->ecf"} : (tensor<?x?x?xf32>, tensor<2x8x4xf32>) -> tensor<?x?x?xf32>
    %act = onnx.Relu %h : (tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
    %y = onnx.Einsum %act, %wo {equation = "ecf,ehf->ech"} : (tensor<?x?x?xf32>, tensor<2x4x8xf32>) -> tensor<?x?x?xf32>
    %out = onnx.Einsum %combine, %y {equation = "tec,ech->th"} : (tensor<4x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?xf32>
    return %out : tensor<?x?xf32>
  }
}

// -----

// Combine weights are the dispatch mask alone, without the probability.
// CHECK-LABEL: func.func @main_graph
// CHECK-NOT: moe.layer
// CHECK: onnx.Einsum {{.*}} {equation = "t{{.*}}->th"}
module {
  func.func @main_graph(%arg0: tensor<4x4xf32>) -> tensor<?x?xf32> {
    %wr = arith.constant dense<[[0.3, -0.5], [-0.4, -0.3], [-0.4, 0.3], [0.4, 0.1]]> : tensor<4x2xf32>
    %wi = arith.constant dense<0.1> : tensor<2x8x4xf32>
    %wo = arith.constant dense<0.2> : tensor<2x4x8xf32>
    %x = onnx.Cast %arg0 {to = 1 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %logits = onnx.MatMul %x, %wr : (tensor<4x4xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %probs = onnx.Softmax %logits {axis = -1 : i64} : (tensor<4x2xf32>) -> tensor<4x2xf32>
    %index = onnx.ArgMax %probs {axis = -1 : i64, keepdims = 0 : i64, select_last_index = 0 : i64} : (tensor<4x2xf32>) -> tensor<4xi64>
    %num_experts = arith.constant dense<2> : tensor<i64>
    %off_on = arith.constant dense<[0, 1]> : tensor<2xi64>
    %mask = onnx.OneHot %index, %num_experts, %off_on {axis = -1 : i64} : (tensor<4xi64>, tensor<i64>, tensor<2xi64>) -> tensor<4x?xi64>
    %capacity = arith.constant dense<2.0> : tensor<f32>
    %token_axis = arith.constant dense<-2> : tensor<i32>
    %priority = onnx.CumSum %mask, %token_axis : (tensor<4x?xi64>, tensor<i32>) -> tensor<4x?xi64>
    %priority_f = onnx.Cast %priority {to = 1 : i64} : (tensor<4x?xi64>) -> tensor<4x?xf32>
    %fits = onnx.LessOrEqual %priority_f, %capacity : (tensor<4x?xf32>, tensor<f32>) -> tensor<4x?xi1>
    %fits_i = onnx.Cast %fits {to = 7 : i64} : (tensor<4x?xi1>) -> tensor<4x?xi64>
    %keep = onnx.Mul %mask, %fits_i : (tensor<4x?xi64>, tensor<4x?xi64>) -> tensor<4x?xi64>
    %top_prob = onnx.ReduceMax %probs {axes = array<i64: -1>, keepdims = 0 : i64} : (tensor<4x2xf32>) -> tensor<4xf32>
    %last = arith.constant dense<[-1]> : tensor<1xi64>
    %top_prob2 = onnx.Unsqueeze %top_prob, %last : (tensor<4xf32>, tensor<1xi64>) -> tensor<4x1xf32>
    %one = arith.constant dense<1> : tensor<i64>
    %position1 = onnx.Sub %priority, %one : (tensor<4x?xi64>, tensor<i64>) -> tensor<4x?xi64>
    %position = onnx.Mul %position1, %keep : (tensor<4x?xi64>, tensor<4x?xi64>) -> tensor<4x?xi64>
    %slot = onnx.OneHot %position, %capacity, %off_on {axis = -1 : i64} : (tensor<4x?xi64>, tensor<f32>, tensor<2xi64>) -> tensor<4x?x?xi64>
    %keep3 = onnx.Unsqueeze %keep, %last : (tensor<4x?xi64>, tensor<1xi64>) -> tensor<4x?x1xi64>
    %dispatch_i = onnx.Mul %slot, %keep3 : (tensor<4x?x?xi64>, tensor<4x?x1xi64>) -> tensor<4x?x?xi64>
    %dispatch = onnx.Cast %dispatch_i {to = 1 : i64} : (tensor<4x?x?xi64>) -> tensor<4x?x?xf32>
    %top_prob3 = onnx.Unsqueeze %top_prob2, %last : (tensor<4x1xf32>, tensor<1xi64>) -> tensor<4x1x1xf32>
    %combine = onnx.Mul %top_prob3, %dispatch : (tensor<4x1x1xf32>, tensor<4x?x?xf32>) -> tensor<4x?x?xf32>
    %rows = onnx.Einsum %dispatch, %x {equation = "tec,th->ech"} : (tensor<4x?x?xf32>, tensor<4x4xf32>) -> tensor<?x?x?xf32>
    %h = onnx.Einsum %rows, %wi {equation = "ech,efh->ecf"} : (tensor<?x?x?xf32>, tensor<2x8x4xf32>) -> tensor<?x?x?xf32>
    %act = onnx.Relu %h : (tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
    %y = onnx.Einsum %act, %wo {equation = "ecf,ehf->ech"} : (tensor<?x?x?xf32>, tensor<2x4x8xf32>) -> tensor<?x?x?xf32>
    %out = onnx.Einsum %dispatch, %y {equation = "tec,ech->th"} : (tensor<4x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?xf32>
    return %out : tensor<?x?xf32>
  }
}

// -----

// The cumsum runs over the experts, not the tokens.
// CHECK-LABEL: func.func @main_graph
// CHECK-NOT: moe.layer
// CHECK: onnx.Einsum {{.*}} {equation = "t{{.*}}->th"}
module {
  func.func @main_graph(%arg0: tensor<4x4xf32>) -> tensor<?x?xf32> {
    %wr = arith.constant dense<[[0.3, -0.5], [-0.4, -0.3], [-0.4, 0.3], [0.4, 0.1]]> : tensor<4x2xf32>
    %wi = arith.constant dense<0.1> : tensor<2x8x4xf32>
    %wo = arith.constant dense<0.2> : tensor<2x4x8xf32>
    %x = onnx.Cast %arg0 {to = 1 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %logits = onnx.MatMul %x, %wr : (tensor<4x4xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %probs = onnx.Softmax %logits {axis = -1 : i64} : (tensor<4x2xf32>) -> tensor<4x2xf32>
    %index = onnx.ArgMax %probs {axis = -1 : i64, keepdims = 0 : i64, select_last_index = 0 : i64} : (tensor<4x2xf32>) -> tensor<4xi64>
    %num_experts = arith.constant dense<2> : tensor<i64>
    %off_on = arith.constant dense<[0, 1]> : tensor<2xi64>
    %mask = onnx.OneHot %index, %num_experts, %off_on {axis = -1 : i64} : (tensor<4xi64>, tensor<i64>, tensor<2xi64>) -> tensor<4x?xi64>
    %capacity = arith.constant dense<2.0> : tensor<f32>
    %token_axis = arith.constant dense<-1> : tensor<i32>
    %priority = onnx.CumSum %mask, %token_axis : (tensor<4x?xi64>, tensor<i32>) -> tensor<4x?xi64>
    %priority_f = onnx.Cast %priority {to = 1 : i64} : (tensor<4x?xi64>) -> tensor<4x?xf32>
    %fits = onnx.LessOrEqual %priority_f, %capacity : (tensor<4x?xf32>, tensor<f32>) -> tensor<4x?xi1>
    %fits_i = onnx.Cast %fits {to = 7 : i64} : (tensor<4x?xi1>) -> tensor<4x?xi64>
    %keep = onnx.Mul %mask, %fits_i : (tensor<4x?xi64>, tensor<4x?xi64>) -> tensor<4x?xi64>
    %top_prob = onnx.ReduceMax %probs {axes = array<i64: -1>, keepdims = 0 : i64} : (tensor<4x2xf32>) -> tensor<4xf32>
    %last = arith.constant dense<[-1]> : tensor<1xi64>
    %top_prob2 = onnx.Unsqueeze %top_prob, %last : (tensor<4xf32>, tensor<1xi64>) -> tensor<4x1xf32>
    %one = arith.constant dense<1> : tensor<i64>
    %position1 = onnx.Sub %priority, %one : (tensor<4x?xi64>, tensor<i64>) -> tensor<4x?xi64>
    %position = onnx.Mul %position1, %keep : (tensor<4x?xi64>, tensor<4x?xi64>) -> tensor<4x?xi64>
    %slot = onnx.OneHot %position, %capacity, %off_on {axis = -1 : i64} : (tensor<4x?xi64>, tensor<f32>, tensor<2xi64>) -> tensor<4x?x?xi64>
    %keep3 = onnx.Unsqueeze %keep, %last : (tensor<4x?xi64>, tensor<1xi64>) -> tensor<4x?x1xi64>
    %dispatch_i = onnx.Mul %slot, %keep3 : (tensor<4x?x?xi64>, tensor<4x?x1xi64>) -> tensor<4x?x?xi64>
    %dispatch = onnx.Cast %dispatch_i {to = 1 : i64} : (tensor<4x?x?xi64>) -> tensor<4x?x?xf32>
    %top_prob3 = onnx.Unsqueeze %top_prob2, %last : (tensor<4x1xf32>, tensor<1xi64>) -> tensor<4x1x1xf32>
    %combine = onnx.Mul %top_prob3, %dispatch : (tensor<4x1x1xf32>, tensor<4x?x?xf32>) -> tensor<4x?x?xf32>
    %rows = onnx.Einsum %dispatch, %x {equation = "tec,th->ech"} : (tensor<4x?x?xf32>, tensor<4x4xf32>) -> tensor<?x?x?xf32>
    %h = onnx.Einsum %rows, %wi {equation = "ech,efh->ecf"} : (tensor<?x?x?xf32>, tensor<2x8x4xf32>) -> tensor<?x?x?xf32>
    %act = onnx.Relu %h : (tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
    %y = onnx.Einsum %act, %wo {equation = "ecf,ehf->ech"} : (tensor<?x?x?xf32>, tensor<2x4x8xf32>) -> tensor<?x?x?xf32>
    %out = onnx.Einsum %combine, %y {equation = "tec,ech->th"} : (tensor<4x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?xf32>
    return %out : tensor<?x?xf32>
  }
}

// -----

// The comparison keeps the tokens past the capacity.
// CHECK-LABEL: func.func @main_graph
// CHECK-NOT: moe.layer
// CHECK: onnx.Einsum {{.*}} {equation = "t{{.*}}->th"}
module {
  func.func @main_graph(%arg0: tensor<4x4xf32>) -> tensor<?x?xf32> {
    %wr = arith.constant dense<[[0.3, -0.5], [-0.4, -0.3], [-0.4, 0.3], [0.4, 0.1]]> : tensor<4x2xf32>
    %wi = arith.constant dense<0.1> : tensor<2x8x4xf32>
    %wo = arith.constant dense<0.2> : tensor<2x4x8xf32>
    %x = onnx.Cast %arg0 {to = 1 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %logits = onnx.MatMul %x, %wr : (tensor<4x4xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %probs = onnx.Softmax %logits {axis = -1 : i64} : (tensor<4x2xf32>) -> tensor<4x2xf32>
    %index = onnx.ArgMax %probs {axis = -1 : i64, keepdims = 0 : i64, select_last_index = 0 : i64} : (tensor<4x2xf32>) -> tensor<4xi64>
    %num_experts = arith.constant dense<2> : tensor<i64>
    %off_on = arith.constant dense<[0, 1]> : tensor<2xi64>
    %mask = onnx.OneHot %index, %num_experts, %off_on {axis = -1 : i64} : (tensor<4xi64>, tensor<i64>, tensor<2xi64>) -> tensor<4x?xi64>
    %capacity = arith.constant dense<2.0> : tensor<f32>
    %token_axis = arith.constant dense<-2> : tensor<i32>
    %priority = onnx.CumSum %mask, %token_axis : (tensor<4x?xi64>, tensor<i32>) -> tensor<4x?xi64>
    %priority_f = onnx.Cast %priority {to = 1 : i64} : (tensor<4x?xi64>) -> tensor<4x?xf32>
    %fits = onnx.GreaterOrEqual %priority_f, %capacity : (tensor<4x?xf32>, tensor<f32>) -> tensor<4x?xi1>
    %fits_i = onnx.Cast %fits {to = 7 : i64} : (tensor<4x?xi1>) -> tensor<4x?xi64>
    %keep = onnx.Mul %mask, %fits_i : (tensor<4x?xi64>, tensor<4x?xi64>) -> tensor<4x?xi64>
    %top_prob = onnx.ReduceMax %probs {axes = array<i64: -1>, keepdims = 0 : i64} : (tensor<4x2xf32>) -> tensor<4xf32>
    %last = arith.constant dense<[-1]> : tensor<1xi64>
    %top_prob2 = onnx.Unsqueeze %top_prob, %last : (tensor<4xf32>, tensor<1xi64>) -> tensor<4x1xf32>
    %one = arith.constant dense<1> : tensor<i64>
    %position1 = onnx.Sub %priority, %one : (tensor<4x?xi64>, tensor<i64>) -> tensor<4x?xi64>
    %position = onnx.Mul %position1, %keep : (tensor<4x?xi64>, tensor<4x?xi64>) -> tensor<4x?xi64>
    %slot = onnx.OneHot %position, %capacity, %off_on {axis = -1 : i64} : (tensor<4x?xi64>, tensor<f32>, tensor<2xi64>) -> tensor<4x?x?xi64>
    %keep3 = onnx.Unsqueeze %keep, %last : (tensor<4x?xi64>, tensor<1xi64>) -> tensor<4x?x1xi64>
    %dispatch_i = onnx.Mul %slot, %keep3 : (tensor<4x?x?xi64>, tensor<4x?x1xi64>) -> tensor<4x?x?xi64>
    %dispatch = onnx.Cast %dispatch_i {to = 1 : i64} : (tensor<4x?x?xi64>) -> tensor<4x?x?xf32>
    %top_prob3 = onnx.Unsqueeze %top_prob2, %last : (tensor<4x1xf32>, tensor<1xi64>) -> tensor<4x1x1xf32>
    %combine = onnx.Mul %top_prob3, %dispatch : (tensor<4x1x1xf32>, tensor<4x?x?xf32>) -> tensor<4x?x?xf32>
    %rows = onnx.Einsum %dispatch, %x {equation = "tec,th->ech"} : (tensor<4x?x?xf32>, tensor<4x4xf32>) -> tensor<?x?x?xf32>
    %h = onnx.Einsum %rows, %wi {equation = "ech,efh->ecf"} : (tensor<?x?x?xf32>, tensor<2x8x4xf32>) -> tensor<?x?x?xf32>
    %act = onnx.Relu %h : (tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
    %y = onnx.Einsum %act, %wo {equation = "ecf,ehf->ech"} : (tensor<?x?x?xf32>, tensor<2x4x8xf32>) -> tensor<?x?x?xf32>
    %out = onnx.Einsum %combine, %y {equation = "tec,ech->th"} : (tensor<4x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?xf32>
    return %out : tensor<?x?xf32>
  }
}

// -----

// The dispatch mask is not capacity-masked: dropped tokens would land in
// slot 0.
// CHECK-LABEL: func.func @main_graph
// CHECK-NOT: moe.layer
// CHECK: onnx.Einsum {{.*}} {equation = "t{{.*}}->th"}
module {
  func.func @main_graph(%arg0: tensor<4x4xf32>) -> tensor<?x?xf32> {
    %wr = arith.constant dense<[[0.3, -0.5], [-0.4, -0.3], [-0.4, 0.3], [0.4, 0.1]]> : tensor<4x2xf32>
    %wi = arith.constant dense<0.1> : tensor<2x8x4xf32>
    %wo = arith.constant dense<0.2> : tensor<2x4x8xf32>
    %x = onnx.Cast %arg0 {to = 1 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %logits = onnx.MatMul %x, %wr : (tensor<4x4xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %probs = onnx.Softmax %logits {axis = -1 : i64} : (tensor<4x2xf32>) -> tensor<4x2xf32>
    %index = onnx.ArgMax %probs {axis = -1 : i64, keepdims = 0 : i64, select_last_index = 0 : i64} : (tensor<4x2xf32>) -> tensor<4xi64>
    %num_experts = arith.constant dense<2> : tensor<i64>
    %off_on = arith.constant dense<[0, 1]> : tensor<2xi64>
    %mask = onnx.OneHot %index, %num_experts, %off_on {axis = -1 : i64} : (tensor<4xi64>, tensor<i64>, tensor<2xi64>) -> tensor<4x?xi64>
    %capacity = arith.constant dense<2.0> : tensor<f32>
    %token_axis = arith.constant dense<-2> : tensor<i32>
    %priority = onnx.CumSum %mask, %token_axis : (tensor<4x?xi64>, tensor<i32>) -> tensor<4x?xi64>
    %priority_f = onnx.Cast %priority {to = 1 : i64} : (tensor<4x?xi64>) -> tensor<4x?xf32>
    %fits = onnx.LessOrEqual %priority_f, %capacity : (tensor<4x?xf32>, tensor<f32>) -> tensor<4x?xi1>
    %fits_i = onnx.Cast %fits {to = 7 : i64} : (tensor<4x?xi1>) -> tensor<4x?xi64>
    %keep = onnx.Mul %mask, %fits_i : (tensor<4x?xi64>, tensor<4x?xi64>) -> tensor<4x?xi64>
    %top_prob = onnx.ReduceMax %probs {axes = array<i64: -1>, keepdims = 0 : i64} : (tensor<4x2xf32>) -> tensor<4xf32>
    %last = arith.constant dense<[-1]> : tensor<1xi64>
    %top_prob2 = onnx.Unsqueeze %top_prob, %last : (tensor<4xf32>, tensor<1xi64>) -> tensor<4x1xf32>
    %one = arith.constant dense<1> : tensor<i64>
    %position1 = onnx.Sub %priority, %one : (tensor<4x?xi64>, tensor<i64>) -> tensor<4x?xi64>
    %position = onnx.Mul %position1, %keep : (tensor<4x?xi64>, tensor<4x?xi64>) -> tensor<4x?xi64>
    %slot = onnx.OneHot %position, %capacity, %off_on {axis = -1 : i64} : (tensor<4x?xi64>, tensor<f32>, tensor<2xi64>) -> tensor<4x?x?xi64>
    %keep3 = onnx.Unsqueeze %mask, %last : (tensor<4x?xi64>, tensor<1xi64>) -> tensor<4x?x1xi64>
    %dispatch_i = onnx.Mul %slot, %keep3 : (tensor<4x?x?xi64>, tensor<4x?x1xi64>) -> tensor<4x?x?xi64>
    %dispatch = onnx.Cast %dispatch_i {to = 1 : i64} : (tensor<4x?x?xi64>) -> tensor<4x?x?xf32>
    %top_prob3 = onnx.Unsqueeze %top_prob2, %last : (tensor<4x1xf32>, tensor<1xi64>) -> tensor<4x1x1xf32>
    %combine = onnx.Mul %top_prob3, %dispatch : (tensor<4x1x1xf32>, tensor<4x?x?xf32>) -> tensor<4x?x?xf32>
    %rows = onnx.Einsum %dispatch, %x {equation = "tec,th->ech"} : (tensor<4x?x?xf32>, tensor<4x4xf32>) -> tensor<?x?x?xf32>
    %h = onnx.Einsum %rows, %wi {equation = "ech,efh->ecf"} : (tensor<?x?x?xf32>, tensor<2x8x4xf32>) -> tensor<?x?x?xf32>
    %act = onnx.Relu %h : (tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
    %y = onnx.Einsum %act, %wo {equation = "ecf,ehf->ech"} : (tensor<?x?x?xf32>, tensor<2x4x8xf32>) -> tensor<?x?x?xf32>
    %out = onnx.Einsum %combine, %y {equation = "tec,ech->th"} : (tensor<4x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?xf32>
    return %out : tensor<?x?xf32>
  }
}

// -----

// Slots are the 1-based positions (no `- 1`): every token is one slot off.
// CHECK-LABEL: func.func @main_graph
// CHECK-NOT: moe.layer
// CHECK: onnx.Einsum {{.*}} {equation = "t{{.*}}->th"}
module {
  func.func @main_graph(%arg0: tensor<4x4xf32>) -> tensor<?x?xf32> {
    %wr = arith.constant dense<[[0.3, -0.5], [-0.4, -0.3], [-0.4, 0.3], [0.4, 0.1]]> : tensor<4x2xf32>
    %wi = arith.constant dense<0.1> : tensor<2x8x4xf32>
    %wo = arith.constant dense<0.2> : tensor<2x4x8xf32>
    %x = onnx.Cast %arg0 {to = 1 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %logits = onnx.MatMul %x, %wr : (tensor<4x4xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %probs = onnx.Softmax %logits {axis = -1 : i64} : (tensor<4x2xf32>) -> tensor<4x2xf32>
    %index = onnx.ArgMax %probs {axis = -1 : i64, keepdims = 0 : i64, select_last_index = 0 : i64} : (tensor<4x2xf32>) -> tensor<4xi64>
    %num_experts = arith.constant dense<2> : tensor<i64>
    %off_on = arith.constant dense<[0, 1]> : tensor<2xi64>
    %mask = onnx.OneHot %index, %num_experts, %off_on {axis = -1 : i64} : (tensor<4xi64>, tensor<i64>, tensor<2xi64>) -> tensor<4x?xi64>
    %capacity = arith.constant dense<2.0> : tensor<f32>
    %token_axis = arith.constant dense<-2> : tensor<i32>
    %priority = onnx.CumSum %mask, %token_axis : (tensor<4x?xi64>, tensor<i32>) -> tensor<4x?xi64>
    %priority_f = onnx.Cast %priority {to = 1 : i64} : (tensor<4x?xi64>) -> tensor<4x?xf32>
    %fits = onnx.LessOrEqual %priority_f, %capacity : (tensor<4x?xf32>, tensor<f32>) -> tensor<4x?xi1>
    %fits_i = onnx.Cast %fits {to = 7 : i64} : (tensor<4x?xi1>) -> tensor<4x?xi64>
    %keep = onnx.Mul %mask, %fits_i : (tensor<4x?xi64>, tensor<4x?xi64>) -> tensor<4x?xi64>
    %top_prob = onnx.ReduceMax %probs {axes = array<i64: -1>, keepdims = 0 : i64} : (tensor<4x2xf32>) -> tensor<4xf32>
    %last = arith.constant dense<[-1]> : tensor<1xi64>
    %top_prob2 = onnx.Unsqueeze %top_prob, %last : (tensor<4xf32>, tensor<1xi64>) -> tensor<4x1xf32>
    %one = arith.constant dense<1> : tensor<i64>
    %position1 = onnx.Sub %priority, %one : (tensor<4x?xi64>, tensor<i64>) -> tensor<4x?xi64>
    %position = onnx.Mul %priority, %keep : (tensor<4x?xi64>, tensor<4x?xi64>) -> tensor<4x?xi64>
    %slot = onnx.OneHot %position, %capacity, %off_on {axis = -1 : i64} : (tensor<4x?xi64>, tensor<f32>, tensor<2xi64>) -> tensor<4x?x?xi64>
    %keep3 = onnx.Unsqueeze %keep, %last : (tensor<4x?xi64>, tensor<1xi64>) -> tensor<4x?x1xi64>
    %dispatch_i = onnx.Mul %slot, %keep3 : (tensor<4x?x?xi64>, tensor<4x?x1xi64>) -> tensor<4x?x?xi64>
    %dispatch = onnx.Cast %dispatch_i {to = 1 : i64} : (tensor<4x?x?xi64>) -> tensor<4x?x?xf32>
    %top_prob3 = onnx.Unsqueeze %top_prob2, %last : (tensor<4x1xf32>, tensor<1xi64>) -> tensor<4x1x1xf32>
    %combine = onnx.Mul %top_prob3, %dispatch : (tensor<4x1x1xf32>, tensor<4x?x?xf32>) -> tensor<4x?x?xf32>
    %rows = onnx.Einsum %dispatch, %x {equation = "tec,th->ech"} : (tensor<4x?x?xf32>, tensor<4x4xf32>) -> tensor<?x?x?xf32>
    %h = onnx.Einsum %rows, %wi {equation = "ech,efh->ecf"} : (tensor<?x?x?xf32>, tensor<2x8x4xf32>) -> tensor<?x?x?xf32>
    %act = onnx.Relu %h : (tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
    %y = onnx.Einsum %act, %wo {equation = "ecf,ehf->ech"} : (tensor<?x?x?xf32>, tensor<2x4x8xf32>) -> tensor<?x?x?xf32>
    %out = onnx.Einsum %combine, %y {equation = "tec,ech->th"} : (tensor<4x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?xf32>
    return %out : tensor<?x?xf32>
  }
}

// -----

// The dispatched tokens are not the router's input.
// CHECK-LABEL: func.func @main_graph
// CHECK-NOT: moe.layer
// CHECK: onnx.Einsum {{.*}} {equation = "t{{.*}}->th"}
module {
  func.func @main_graph(%arg0: tensor<4x4xf32>) -> tensor<?x?xf32> {
    %wr = arith.constant dense<[[0.3, -0.5], [-0.4, -0.3], [-0.4, 0.3], [0.4, 0.1]]> : tensor<4x2xf32>
    %wi = arith.constant dense<0.1> : tensor<2x8x4xf32>
    %wo = arith.constant dense<0.2> : tensor<2x4x8xf32>
    %x = onnx.Cast %arg0 {to = 1 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %logits = onnx.MatMul %x, %wr : (tensor<4x4xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %probs = onnx.Softmax %logits {axis = -1 : i64} : (tensor<4x2xf32>) -> tensor<4x2xf32>
    %index = onnx.ArgMax %probs {axis = -1 : i64, keepdims = 0 : i64, select_last_index = 0 : i64} : (tensor<4x2xf32>) -> tensor<4xi64>
    %num_experts = arith.constant dense<2> : tensor<i64>
    %off_on = arith.constant dense<[0, 1]> : tensor<2xi64>
    %mask = onnx.OneHot %index, %num_experts, %off_on {axis = -1 : i64} : (tensor<4xi64>, tensor<i64>, tensor<2xi64>) -> tensor<4x?xi64>
    %capacity = arith.constant dense<2.0> : tensor<f32>
    %token_axis = arith.constant dense<-2> : tensor<i32>
    %priority = onnx.CumSum %mask, %token_axis : (tensor<4x?xi64>, tensor<i32>) -> tensor<4x?xi64>
    %priority_f = onnx.Cast %priority {to = 1 : i64} : (tensor<4x?xi64>) -> tensor<4x?xf32>
    %fits = onnx.LessOrEqual %priority_f, %capacity : (tensor<4x?xf32>, tensor<f32>) -> tensor<4x?xi1>
    %fits_i = onnx.Cast %fits {to = 7 : i64} : (tensor<4x?xi1>) -> tensor<4x?xi64>
    %keep = onnx.Mul %mask, %fits_i : (tensor<4x?xi64>, tensor<4x?xi64>) -> tensor<4x?xi64>
    %top_prob = onnx.ReduceMax %probs {axes = array<i64: -1>, keepdims = 0 : i64} : (tensor<4x2xf32>) -> tensor<4xf32>
    %last = arith.constant dense<[-1]> : tensor<1xi64>
    %top_prob2 = onnx.Unsqueeze %top_prob, %last : (tensor<4xf32>, tensor<1xi64>) -> tensor<4x1xf32>
    %one = arith.constant dense<1> : tensor<i64>
    %position1 = onnx.Sub %priority, %one : (tensor<4x?xi64>, tensor<i64>) -> tensor<4x?xi64>
    %position = onnx.Mul %position1, %keep : (tensor<4x?xi64>, tensor<4x?xi64>) -> tensor<4x?xi64>
    %slot = onnx.OneHot %position, %capacity, %off_on {axis = -1 : i64} : (tensor<4x?xi64>, tensor<f32>, tensor<2xi64>) -> tensor<4x?x?xi64>
    %keep3 = onnx.Unsqueeze %keep, %last : (tensor<4x?xi64>, tensor<1xi64>) -> tensor<4x?x1xi64>
    %dispatch_i = onnx.Mul %slot, %keep3 : (tensor<4x?x?xi64>, tensor<4x?x1xi64>) -> tensor<4x?x?xi64>
    %dispatch = onnx.Cast %dispatch_i {to = 1 : i64} : (tensor<4x?x?xi64>) -> tensor<4x?x?xf32>
    %top_prob3 = onnx.Unsqueeze %top_prob2, %last : (tensor<4x1xf32>, tensor<1xi64>) -> tensor<4x1x1xf32>
    %combine = onnx.Mul %top_prob3, %dispatch : (tensor<4x1x1xf32>, tensor<4x?x?xf32>) -> tensor<4x?x?xf32>
    %xr = onnx.Relu %x : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %rows = onnx.Einsum %dispatch, %xr {equation = "tec,th->ech"} : (tensor<4x?x?xf32>, tensor<4x4xf32>) -> tensor<?x?x?xf32>
    %h = onnx.Einsum %rows, %wi {equation = "ech,efh->ecf"} : (tensor<?x?x?xf32>, tensor<2x8x4xf32>) -> tensor<?x?x?xf32>
    %act = onnx.Relu %h : (tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
    %y = onnx.Einsum %act, %wo {equation = "ecf,ehf->ech"} : (tensor<?x?x?xf32>, tensor<2x4x8xf32>) -> tensor<?x?x?xf32>
    %out = onnx.Einsum %combine, %y {equation = "tec,ech->th"} : (tensor<4x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?xf32>
    return %out : tensor<?x?xf32>
  }
}

// -----

// Ties go to the last expert (moe.layer picks the first).
// CHECK-LABEL: func.func @main_graph
// CHECK-NOT: moe.layer
// CHECK: onnx.Einsum {{.*}} {equation = "t{{.*}}->th"}
module {
  func.func @main_graph(%arg0: tensor<4x4xf32>) -> tensor<?x?xf32> {
    %wr = arith.constant dense<[[0.3, -0.5], [-0.4, -0.3], [-0.4, 0.3], [0.4, 0.1]]> : tensor<4x2xf32>
    %wi = arith.constant dense<0.1> : tensor<2x8x4xf32>
    %wo = arith.constant dense<0.2> : tensor<2x4x8xf32>
    %x = onnx.Cast %arg0 {to = 1 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %logits = onnx.MatMul %x, %wr : (tensor<4x4xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %probs = onnx.Softmax %logits {axis = -1 : i64} : (tensor<4x2xf32>) -> tensor<4x2xf32>
    %index = onnx.ArgMax %probs {axis = -1 : i64, keepdims = 0 : i64, select_last_index = 1 : i64} : (tensor<4x2xf32>) -> tensor<4xi64>
    %num_experts = arith.constant dense<2> : tensor<i64>
    %off_on = arith.constant dense<[0, 1]> : tensor<2xi64>
    %mask = onnx.OneHot %index, %num_experts, %off_on {axis = -1 : i64} : (tensor<4xi64>, tensor<i64>, tensor<2xi64>) -> tensor<4x?xi64>
    %capacity = arith.constant dense<2.0> : tensor<f32>
    %token_axis = arith.constant dense<-2> : tensor<i32>
    %priority = onnx.CumSum %mask, %token_axis : (tensor<4x?xi64>, tensor<i32>) -> tensor<4x?xi64>
    %priority_f = onnx.Cast %priority {to = 1 : i64} : (tensor<4x?xi64>) -> tensor<4x?xf32>
    %fits = onnx.LessOrEqual %priority_f, %capacity : (tensor<4x?xf32>, tensor<f32>) -> tensor<4x?xi1>
    %fits_i = onnx.Cast %fits {to = 7 : i64} : (tensor<4x?xi1>) -> tensor<4x?xi64>
    %keep = onnx.Mul %mask, %fits_i : (tensor<4x?xi64>, tensor<4x?xi64>) -> tensor<4x?xi64>
    %top_prob = onnx.ReduceMax %probs {axes = array<i64: -1>, keepdims = 0 : i64} : (tensor<4x2xf32>) -> tensor<4xf32>
    %last = arith.constant dense<[-1]> : tensor<1xi64>
    %top_prob2 = onnx.Unsqueeze %top_prob, %last : (tensor<4xf32>, tensor<1xi64>) -> tensor<4x1xf32>
    %one = arith.constant dense<1> : tensor<i64>
    %position1 = onnx.Sub %priority, %one : (tensor<4x?xi64>, tensor<i64>) -> tensor<4x?xi64>
    %position = onnx.Mul %position1, %keep : (tensor<4x?xi64>, tensor<4x?xi64>) -> tensor<4x?xi64>
    %slot = onnx.OneHot %position, %capacity, %off_on {axis = -1 : i64} : (tensor<4x?xi64>, tensor<f32>, tensor<2xi64>) -> tensor<4x?x?xi64>
    %keep3 = onnx.Unsqueeze %keep, %last : (tensor<4x?xi64>, tensor<1xi64>) -> tensor<4x?x1xi64>
    %dispatch_i = onnx.Mul %slot, %keep3 : (tensor<4x?x?xi64>, tensor<4x?x1xi64>) -> tensor<4x?x?xi64>
    %dispatch = onnx.Cast %dispatch_i {to = 1 : i64} : (tensor<4x?x?xi64>) -> tensor<4x?x?xf32>
    %top_prob3 = onnx.Unsqueeze %top_prob2, %last : (tensor<4x1xf32>, tensor<1xi64>) -> tensor<4x1x1xf32>
    %combine = onnx.Mul %top_prob3, %dispatch : (tensor<4x1x1xf32>, tensor<4x?x?xf32>) -> tensor<4x?x?xf32>
    %rows = onnx.Einsum %dispatch, %x {equation = "tec,th->ech"} : (tensor<4x?x?xf32>, tensor<4x4xf32>) -> tensor<?x?x?xf32>
    %h = onnx.Einsum %rows, %wi {equation = "ech,efh->ecf"} : (tensor<?x?x?xf32>, tensor<2x8x4xf32>) -> tensor<?x?x?xf32>
    %act = onnx.Relu %h : (tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
    %y = onnx.Einsum %act, %wo {equation = "ecf,ehf->ech"} : (tensor<?x?x?xf32>, tensor<2x4x8xf32>) -> tensor<?x?x?xf32>
    %out = onnx.Einsum %combine, %y {equation = "tec,ech->th"} : (tensor<4x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?xf32>
    return %out : tensor<?x?xf32>
  }
}

// -----

// The expert weights are not constants.
// CHECK-LABEL: func.func @main_graph
// CHECK-NOT: moe.layer
// CHECK: onnx.Einsum {{.*}} {equation = "t{{.*}}->th"}
module {
  func.func @main_graph(%arg0: tensor<4x4xf32>, %wi: tensor<2x8x4xf32>) -> tensor<?x?xf32> {
    %wr = arith.constant dense<[[0.3, -0.5], [-0.4, -0.3], [-0.4, 0.3], [0.4, 0.1]]> : tensor<4x2xf32>
    %wo = arith.constant dense<0.2> : tensor<2x4x8xf32>
    %x = onnx.Cast %arg0 {to = 1 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %logits = onnx.MatMul %x, %wr : (tensor<4x4xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %probs = onnx.Softmax %logits {axis = -1 : i64} : (tensor<4x2xf32>) -> tensor<4x2xf32>
    %index = onnx.ArgMax %probs {axis = -1 : i64, keepdims = 0 : i64, select_last_index = 0 : i64} : (tensor<4x2xf32>) -> tensor<4xi64>
    %num_experts = arith.constant dense<2> : tensor<i64>
    %off_on = arith.constant dense<[0, 1]> : tensor<2xi64>
    %mask = onnx.OneHot %index, %num_experts, %off_on {axis = -1 : i64} : (tensor<4xi64>, tensor<i64>, tensor<2xi64>) -> tensor<4x?xi64>
    %capacity = arith.constant dense<2.0> : tensor<f32>
    %token_axis = arith.constant dense<-2> : tensor<i32>
    %priority = onnx.CumSum %mask, %token_axis : (tensor<4x?xi64>, tensor<i32>) -> tensor<4x?xi64>
    %priority_f = onnx.Cast %priority {to = 1 : i64} : (tensor<4x?xi64>) -> tensor<4x?xf32>
    %fits = onnx.LessOrEqual %priority_f, %capacity : (tensor<4x?xf32>, tensor<f32>) -> tensor<4x?xi1>
    %fits_i = onnx.Cast %fits {to = 7 : i64} : (tensor<4x?xi1>) -> tensor<4x?xi64>
    %keep = onnx.Mul %mask, %fits_i : (tensor<4x?xi64>, tensor<4x?xi64>) -> tensor<4x?xi64>
    %top_prob = onnx.ReduceMax %probs {axes = array<i64: -1>, keepdims = 0 : i64} : (tensor<4x2xf32>) -> tensor<4xf32>
    %last = arith.constant dense<[-1]> : tensor<1xi64>
    %top_prob2 = onnx.Unsqueeze %top_prob, %last : (tensor<4xf32>, tensor<1xi64>) -> tensor<4x1xf32>
    %one = arith.constant dense<1> : tensor<i64>
    %position1 = onnx.Sub %priority, %one : (tensor<4x?xi64>, tensor<i64>) -> tensor<4x?xi64>
    %position = onnx.Mul %position1, %keep : (tensor<4x?xi64>, tensor<4x?xi64>) -> tensor<4x?xi64>
    %slot = onnx.OneHot %position, %capacity, %off_on {axis = -1 : i64} : (tensor<4x?xi64>, tensor<f32>, tensor<2xi64>) -> tensor<4x?x?xi64>
    %keep3 = onnx.Unsqueeze %keep, %last : (tensor<4x?xi64>, tensor<1xi64>) -> tensor<4x?x1xi64>
    %dispatch_i = onnx.Mul %slot, %keep3 : (tensor<4x?x?xi64>, tensor<4x?x1xi64>) -> tensor<4x?x?xi64>
    %dispatch = onnx.Cast %dispatch_i {to = 1 : i64} : (tensor<4x?x?xi64>) -> tensor<4x?x?xf32>
    %top_prob3 = onnx.Unsqueeze %top_prob2, %last : (tensor<4x1xf32>, tensor<1xi64>) -> tensor<4x1x1xf32>
    %combine = onnx.Mul %top_prob3, %dispatch : (tensor<4x1x1xf32>, tensor<4x?x?xf32>) -> tensor<4x?x?xf32>
    %rows = onnx.Einsum %dispatch, %x {equation = "tec,th->ech"} : (tensor<4x?x?xf32>, tensor<4x4xf32>) -> tensor<?x?x?xf32>
    %h = onnx.Einsum %rows, %wi {equation = "ech,efh->ecf"} : (tensor<?x?x?xf32>, tensor<2x8x4xf32>) -> tensor<?x?x?xf32>
    %act = onnx.Relu %h : (tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
    %y = onnx.Einsum %act, %wo {equation = "ecf,ehf->ech"} : (tensor<?x?x?xf32>, tensor<2x4x8xf32>) -> tensor<?x?x?xf32>
    %out = onnx.Einsum %combine, %y {equation = "tec,ech->th"} : (tensor<4x?x?xf32>, tensor<?x?x?xf32>) -> tensor<?x?xf32>
    return %out : tensor<?x?xf32>
  }
}
