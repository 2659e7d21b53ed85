// RUN: moe-translate --import-torchscript %corpus/mixtral.pt --input-shape hidden_states=2x4x16 --mlir-elide-resource-strings-if-larger=16 | FileCheck %s

// The traced Mixtral block (static loop over 4 experts): the router, the
// one-hot expert mask, and per expert torch.where, the token gather, the
// SwiGLU FFN, the routing weight and index_add_, as torch.onnx exports them.

// CHECK-LABEL: func.func @main_graph(
// CHECK-SAME:      %[[X:.*]]: tensor<2x4x16xf32> {onnx.name = "hidden_states"})
// CHECK-SAME:      -> (tensor<2x4x16xf32> {onnx.name = "output"})
// Linear weights are stored transposed, named after their parameters.
// CHECK-DAG:   %[[WR:.*]] = arith.constant dense_resource<gate.weight.T> : tensor<16x4xf32>
// CHECK-DAG:   %[[W1:.*]] = arith.constant dense_resource<experts.0.w1.weight.T> : tensor<16x32xf32>
// CHECK-DAG:   arith.constant dense_resource<experts.3.w2.weight.T> : tensor<32x16xf32>
// CHECK:       %[[ROWS:.*]] = onnx.Reshape %[[X]], %{{.*}} : (tensor<2x4x16xf32>, tensor<2xi64>) -> tensor<8x16xf32>
// CHECK:       %[[LOGITS:.*]] = onnx.MatMul %[[ROWS]], %[[WR]] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
// CHECK:       %[[PROBS:.*]] = onnx.Softmax %[[LOGITS]] {axis = 1 : i64}
// CHECK:       %[[TOPK:.*]]:2 = onnx.TopK %[[PROBS]], %{{.*}} {axis = -1 : i64, largest = 1 : i64, sorted = 1 : i64} : (tensor<8x4xf32>, tensor<1xi64>) -> (tensor<8x2xf32>, tensor<8x2xi64>)
// CHECK:       %[[SUM:.*]] = onnx.ReduceSum %[[TOPK]]#0, %{{.*}} {keepdims = 1 : i64}
// CHECK:       %[[WEIGHTS:.*]] = onnx.Div %[[TOPK]]#0, %[[SUM]]
// CHECK:       onnx.ConstantOfShape %{{.*}} {value = dense<0.000000e+00> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<8x16xf32>
// CHECK:       %[[HOT:.*]] = onnx.OneHot %[[TOPK]]#1, %{{.*}}, %{{.*}} {axis = -1 : i64} : (tensor<8x2xi64>, tensor<i64>, tensor<2xi64>) -> tensor<8x2x4xi64>
// CHECK:       %[[MASK:.*]] = onnx.Transpose %[[HOT]] {perm = array<i64: 2, 1, 0>}

// Expert 0: torch.where(expert_mask[0]) is NonZero, Transpose, Split.
// CHECK:       %[[ROW:.*]] = onnx.Gather %[[MASK]], %{{.*}} {axis = 0 : i64} : (tensor<4x2x8xi64>, tensor<i64>) -> tensor<2x8xi64>
// CHECK:       %[[BOOL:.*]] = onnx.Cast %[[ROW]] {to = 9 : i64}
// CHECK:       %[[NZ:.*]] = onnx.NonZero %[[BOOL]] : (tensor<2x8xi1>) -> tensor<2x?xi64>
// CHECK:       %[[NZT:.*]] = onnx.Transpose %[[NZ]] {perm = array<i64: 1, 0>}
// CHECK:       %[[SPLIT:.*]]:2 = onnx.Split %[[NZT]]
// CHECK:       %[[IDX:.*]] = onnx.Squeeze %[[SPLIT]]#0
// CHECK:       %[[TOPX:.*]] = onnx.Squeeze %[[SPLIT]]#1
// hidden_states[None, top_x]
// CHECK:       %[[X3:.*]] = onnx.Unsqueeze %[[ROWS]]
// CHECK:       %[[PICKED:.*]] = onnx.Gather %[[X3]], %[[TOPX]] {axis = 1 : i64} : (tensor<1x8x16xf32>, tensor<?xi64>) -> tensor<1x?x16xf32>
// CHECK:       %[[IN:.*]] = onnx.Reshape %[[PICKED]]
// CHECK:       %[[GATE:.*]] = onnx.MatMul %[[IN]], %[[W1]] : (tensor<?x16xf32>, tensor<16x32xf32>) -> tensor<?x32xf32>
// CHECK:       %[[SIG:.*]] = onnx.Sigmoid %[[GATE]]
// CHECK:       onnx.Mul %[[GATE]], %[[SIG]]
// routing_weights[top_x, idx, None]: advanced indexing over a flattened tensor.
// CHECK:       onnx.Flatten %{{.*}} {axis = 2 : i64} : (tensor<8x2x1xf32>) -> tensor<16x1xf32>
// index_add_: a scatter into zeros that accumulates, added to the buffer.
// CHECK:       %[[ZEROS:.*]] = onnx.ConstantOfShape
// CHECK:       %[[SCATTER:.*]] = onnx.ScatterElements %[[ZEROS]], %{{.*}}, %{{.*}} {axis = 0 : i64, reduction = "add"} : (tensor<8x16xf32>, tensor<?x16xi64>, tensor<?x16xf32>) -> tensor<8x16xf32>
// CHECK:       onnx.Add %{{.*}}, %[[SCATTER]] : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>

// Every expert is in the graph.
// CHECK-COUNT-3: onnx.ScatterElements {{.*}} {axis = 0 : i64, reduction = "add"}
// CHECK-NOT:   onnx.ScatterElements
// CHECK:       %[[OUT:.*]] = onnx.Reshape %{{.*}}, %{{.*}} : (tensor<8x16xf32>, tensor<3xi64>) -> tensor<2x4x16xf32>
// CHECK:       return %[[OUT]] : tensor<2x4x16xf32>
