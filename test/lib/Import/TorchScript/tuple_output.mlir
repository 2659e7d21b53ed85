// RUN: moe-translate --import-torchscript %S/Inputs/tuple_output.pt --input-shape x=2x8 --input-shape y=2x8 | FileCheck %s

// Inputs are forward's argument names; a tuple result is flattened into
// output_0, output_1, ...

// CHECK-LABEL: func.func @main_graph(
// CHECK-SAME:      %[[X:.*]]: tensor<2x8xf32> {onnx.name = "x"}, %[[Y:.*]]: tensor<2x8xf32> {onnx.name = "y"})
// CHECK-SAME:      -> (tensor<2x8xf32> {onnx.name = "output_0"}, tensor<2xf32> {onnx.name = "output_1"})
// CHECK:       %[[SUM:.*]] = onnx.Add %[[X]], %[[Y]]
// CHECK:       %[[PRODUCT:.*]] = onnx.Mul %[[X]], %[[Y]]
// CHECK:       %[[REDUCED:.*]] = onnx.ReduceSum %[[PRODUCT]], %{{.*}} {keepdims = 0 : i64}
// CHECK:       return %[[SUM]], %[[REDUCED]]
