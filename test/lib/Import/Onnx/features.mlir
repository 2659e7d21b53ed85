// ONNX constructs the corpus does not show (Inputs/make_model.py features):
// Constant node forms, typed *_data tensors, fp16 and bool tensors, an
// initializer also listed as a graph input, an omitted optional input, a
// tensor attribute, node names as locations.
// RUN: %python %S/Inputs/make_model.py features %t.onnx
// RUN: moe-translate --import-onnx %t.onnx --mlir-print-debuginfo \
// RUN:   | FileCheck %s --implicit-check-not='onnx.Constant{{[^O]}}'

// CHECK: #[[FILE:loc]] = loc("{{.*}}features.mlir.tmp.onnx":0:0)
// `scale` has an initializer: it is a constant, not an argument.
// CHECK-LABEL: func.func @main_graph(
// CHECK-SAME:      %[[X:.*]]: tensor<?x16xf32> {onnx.name = "x"} loc("x"(#[[FILE]])))
// CHECK-SAME:      -> (tensor<4x8xf32> {onnx.name = "sum"}, tensor<4x8xi64> {onnx.name = "zeros"}, tensor<2xf32> {onnx.name = "half32"},
// CHECK-SAME:          tensor<2xi64> {onnx.name = "c_ints"}, tensor<2xf32> {onnx.name = "c_floats"}, tensor<i64> {onnx.name = "c_int"})
// Initializers, in order: raw data (moved into a resource), float_data
// (packed into a resource), fp16 bits in int32_data, bools, a scalar.
// CHECK-NEXT:    %[[W:.*]] = arith.constant dense_resource<w> : tensor<16x4xf32> loc(#[[W_LOC:loc[0-9]+]])
// CHECK-NEXT:    %[[TYPED:.*]] = arith.constant dense_resource<typed> : tensor<4x8xf32>
// CHECK-NEXT:    %[[HALF:.*]] = arith.constant dense<[1.500000e+00, -2.000000e+00]> : tensor<2xf16>
// CHECK-NEXT:    %[[MASK:.*]] = arith.constant dense<[true, false, true, true]> : tensor<4xi1>
// CHECK-NEXT:    %[[SCALE:.*]] = arith.constant dense<5.000000e-01> : tensor<1xf32>
// Constant nodes, then onnx.none, still above the first op.
// CHECK-NEXT:    %[[CT:.*]] = arith.constant dense_resource<c_tensor> : tensor<4x8xf32> loc(#[[CT_LOC:loc[0-9]+]])
// CHECK-NEXT:    %[[CF:.*]] = arith.constant dense<6.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[CFS:.*]] = arith.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT:    %[[CI:.*]] = arith.constant dense<3> : tensor<i64>
// CHECK-NEXT:    %[[CIS:.*]] = arith.constant dense<[1, -1]> : tensor<2xi64>
// CHECK-NEXT:    %[[NONE:.*]] = onnx.none
// CHECK-NEXT:    %[[H:.*]] = onnx.MatMul %[[X]], %[[W]] : (tensor<?x16xf32>, tensor<16x4xf32>) -> tensor<?x4xf32> loc(#[[MATMUL_LOC:loc[0-9]+]])
// CHECK-NEXT:    %[[CLIP:.*]] = onnx.Clip %[[H]], %[[NONE]], %[[CF]] : (tensor<?x4xf32>, none, tensor<f32>) -> tensor<?x4xf32>
// CHECK-NEXT:    %[[MUL:.*]] = onnx.Mul %[[CLIP]], %[[SCALE]]
// CHECK-NEXT:    %[[RELU:.*]] = onnx.Relu %[[MUL]] : (tensor<?x4xf32>) -> tensor<?x4xf32> loc(#[[RELU_LOC:loc[0-9]+]])
// CHECK-NEXT:    %[[SEL:.*]] = onnx.Where %[[MASK]], %[[RELU]], %[[RELU]]
// CHECK-NEXT:    %[[WIDE:.*]] = onnx.MatMul %[[SEL]], %[[TYPED]]
// CHECK-NEXT:    %[[SUM:.*]] = onnx.Add %[[WIDE]], %[[CT]] : (tensor<?x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %[[SHAPE:.*]] = onnx.Shape %[[SUM]] : (tensor<4x8xf32>) -> tensor<2xi64>
// CHECK-NEXT:    %[[ZEROS:.*]] = onnx.ConstantOfShape %[[SHAPE]] {value = dense<0> : tensor<1xi64>} : (tensor<2xi64>) -> tensor<4x8xi64>
// CHECK-NEXT:    %[[HALF32:.*]] = onnx.Cast %[[HALF]] {to = 1 : i64} : (tensor<2xf16>) -> tensor<2xf32>
// CHECK-NEXT:    return %[[SUM]], %[[ZEROS]], %[[HALF32]], %[[CIS]], %[[CFS]], %[[CI]]
// Locations: values and nodes by name (an unnamed node by type and index)
// around the file.
// CHECK-DAG: #[[W_LOC]] = loc("w"(#[[FILE]]))
// CHECK-DAG: #[[CT_LOC]] = loc("c_tensor"(#[[FILE]]))
// CHECK-DAG: #[[MATMUL_LOC]] = loc("matmul"(#[[FILE]]))
// CHECK-DAG: #[[RELU_LOC]] = loc("Relu_8"(#[[FILE]]))
// The resources' blobs.
// CHECK: dialect_resources: {
// CHECK:   builtin: {
// CHECK-DAG:   typed: "0x04000000000000000000803F00000040
// CHECK-DAG:   c_tensor: "0x040000000000803F0000803F
