// Mixtral traced over `expert_hit`: only experts 1 and 3 are in the graph.
// The importer keeps the graph as it is (two expert branches, the weights of
// two experts); finding the lost experts is the raising passes' job.
// RUN: moe-translate --import-onnx %corpus/mixtral_lost_experts.onnx --mlir-elide-resource-strings-if-larger=16 \
// RUN:   | FileCheck %s --implicit-check-not=onnx.ScatterElements

// CHECK-LABEL: func.func @main_graph(
// CHECK-SAME:      %arg0: tensor<2x4x16xf32> {onnx.name = "hidden_states"})
// The router and 2 x 3 expert weights.
// CHECK-COUNT-7: arith.constant dense_resource<onnx__MatMul_{{[0-9]+}}>
// CHECK-NOT:     arith.constant dense_resource<onnx__MatMul
// CHECK:         %[[HIT:.*]] = onnx.Greater %{{.*}} : (tensor<4xi64>, tensor<i64>) -> tensor<4xi1>
// CHECK-NEXT:    onnx.NonZero %[[HIT]] : (tensor<4xi1>) -> tensor<1x?xi64>
// The tracer unrolled the loop for the 2 experts the sample hit.
// CHECK:         onnx.Split %{{.*}} {axis = 0 : i64} : (tensor<?x1xi64>, tensor<2xi64>) -> (tensor<?x1xi64>, tensor<?x1xi64>)
// CHECK-COUNT-2: onnx.ScatterElements
