// Mixtral's sparse MoE block as torch.onnx.export writes it (static expert
// loop): every node becomes an onnx op, weights dense resources, and the
// Constant nodes arith.constant at the top.
// RUN: moe-translate --import-onnx %corpus/mixtral.onnx --mlir-elide-resource-strings-if-larger=16 \
// RUN:   | FileCheck %s --implicit-check-not='onnx.Constant{{[^O]}}'
// RUN: moe-translate --import-onnx %corpus/mixtral.onnx --mlir-elide-resource-strings-if-larger=16 \
// RUN:   | FileCheck %s --check-prefix=HOISTED

// No constant after the first op.
// HOISTED:     onnx.MatMul
// HOISTED-NOT: arith.constant
// HOISTED:     return

// CHECK-LABEL: func.func @main_graph(
// CHECK-SAME:      %arg0: tensor<2x4x16xf32> {onnx.name = "hidden_states"})
// CHECK-SAME:      -> (tensor<2x4x16xf32> {onnx.name = "output"})
// The router and the expert weights (13 initializers), then small constants.
// CHECK-NEXT:    %[[ROUTER:.*]] = arith.constant dense_resource<onnx__MatMul_307> : tensor<16x4xf32>
// CHECK-COUNT-12: arith.constant dense_resource<onnx__MatMul_{{[0-9]+}}> : tensor<{{16x32|32x16}}xf32>
// CHECK:         arith.constant dense<[-1, 16]> : tensor<2xi64>
// CHECK:         %[[LOGITS:.*]] = onnx.MatMul %{{.*}}, %[[ROUTER]] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
// CHECK:         %[[P:.*]] = onnx.Softmax %[[LOGITS]] {axis = 1 : i64} : (tensor<8x4xf32>) -> tensor<8x4xf32>
// CHECK:         %[[PROBS:.*]] = onnx.Cast %[[P]] {to = 1 : i64}
// CHECK:         %[[TOP:.*]]:2 = onnx.TopK %[[PROBS]], %{{.*}} {axis = -1 : i64, largest = 1 : i64, sorted = 1 : i64}
// CHECK-SAME:      : (tensor<8x4xf32>, tensor<1xi64>) -> (tensor<8x2xf32>, tensor<8x2xi64>)
// CHECK:         %[[SUM:.*]] = onnx.ReduceSum %[[TOP]]#0, %{{.*}} {keepdims = 1 : i64}
// CHECK:         onnx.Div %[[TOP]]#0, %[[SUM]]
// OneHot's depth is a constant, which ONNX shape inference reads.
// CHECK:         onnx.OneHot {{.*}} -> tensor<8x2x4xi64>
// Per expert: the tokens routed to it (data-dependent count), its SwiGLU FFN
// and the scatter back into token order.
// CHECK-COUNT-4: onnx.NonZero %{{.*}} : (tensor<2x8xi1>) -> tensor<2x?xi64>
// CHECK:         onnx.ScatterElements {{.*}} {axis = 0 : i64} : (tensor<8x16xf32>, tensor<?x16xi64>, tensor<?x16xf32>) -> tensor<8x16xf32>
// CHECK:         %[[OUT:.*]] = onnx.Reshape {{.*}} -> tensor<2x4x16xf32>
// CHECK-NEXT:    return %[[OUT]] : tensor<2x4x16xf32>
