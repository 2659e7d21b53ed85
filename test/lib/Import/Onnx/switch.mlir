// Switch Transformer with capacity, exported with a dynamic token dimension:
// the capacity is computed in the graph (Shape/Gather/Div/Ceil), so the
// capacity dimension stays dynamic; --input-shape specialises the tokens.
// RUN: moe-translate --import-onnx %corpus/switch.onnx --mlir-elide-resource-strings-if-larger=16 \
// RUN:   | FileCheck %s
// RUN: moe-translate --import-onnx %corpus/switch.onnx --input-shape hidden_states=16x16 \
// RUN:     --mlir-elide-resource-strings-if-larger=16 \
// RUN:   | FileCheck %s --check-prefix=STATIC

// CHECK-LABEL: func.func @main_graph(
// CHECK-SAME:      %arg0: tensor<?x16xf32> {onnx.name = "hidden_states"})
// CHECK-SAME:      -> (tensor<?x16xf32> {onnx.name = "output"})
// CHECK-DAG:     arith.constant dense_resource<onnx__Einsum_{{[0-9]+}}> : tensor<4x32x16xf32>
// CHECK-DAG:     arith.constant dense_resource<onnx__Einsum_{{[0-9]+}}> : tensor<4x16x32xf32>
// CHECK:         onnx.ArgMax %{{.*}} {axis = -1 : i64, keepdims = 0 : i64, select_last_index = 0 : i64} : (tensor<?x4xf32>) -> tensor<?xi64>
// CHECK:         %[[SHAPE:.*]] = onnx.Shape %{{.*}} : (tensor<?x16xf32>) -> tensor<2xi64>
// CHECK:         onnx.Ceil
// CHECK:         onnx.CumSum %{{.*}} : (tensor<?x4xi64>, tensor<i32>) -> tensor<?x4xi64>
// CHECK:         onnx.LessOrEqual %{{.*}} : (tensor<?x4xf32>, tensor<f32>) -> tensor<?x4xi1>
// CHECK:         onnx.Einsum %{{.*}} {equation = "tec,th->ech"}

// STATIC-LABEL: func.func @main_graph(
// STATIC-SAME:      %arg0: tensor<16x16xf32> {onnx.name = "hidden_states"})
// ONNX's Einsum inference keeps the token and hidden dims through the
// capacity that OneHot's data-dependent depth leaves unknown.
// STATIC-SAME:      -> (tensor<16x16xf32> {onnx.name = "output"})
// STATIC:         onnx.MatMul %{{.*}} : (tensor<16x16xf32>, tensor<16x4xf32>) -> tensor<16x4xf32>
// STATIC:         onnx.ArgMax {{.*}} -> tensor<16xi64>
// STATIC:         onnx.CumSum %{{.*}} : (tensor<16x4xi64>, tensor<i32>) -> tensor<16x4xi64>
