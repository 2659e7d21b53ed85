// Versioned operators in the forms of opsets 13, 20 and 23 (tiny models made
// by Inputs/make_opset_models.py): the import gives each op one form,
// whatever the opset, as GraphImporter::normalizeNode's table lists.
// RUN: moe-translate --import-onnx %S/Inputs/opset13_forms.onnx | FileCheck %s --check-prefix=OPSET13
// RUN: moe-translate --import-onnx %S/Inputs/opset20_forms.onnx | FileCheck %s --check-prefix=OPSET20
// RUN: moe-translate --import-onnx %S/Inputs/opset23_rmsnorm.onnx | FileCheck %s --check-prefix=OPSET23

// Opset 13: the reductions' axes attributes become the axes input (no
// attribute: every dim, as without the input); Split without sizes, equal
// parts.
// OPSET13-DAG:   %[[MEAN_AXES:.*]] = arith.constant dense<-1> : tensor<1xi64>
// OPSET13-DAG:   %[[L2_AXES:.*]] = arith.constant dense<[0, 2]> : tensor<2xi64>
// OPSET13-DAG:   %[[PARTS:.*]] = arith.constant dense<4> : tensor<2xi64>
// OPSET13:       onnx.ReduceMean %arg0, %[[MEAN_AXES]] {keepdims = 1 : i64} : (tensor<2x3x8xf32>, tensor<1xi64>) -> tensor<2x3x1xf32>
// OPSET13:       onnx.ReduceMax %arg0 {keepdims = 0 : i64} : (tensor<2x3x8xf32>) -> tensor<f32>
// OPSET13:       onnx.ReduceL2 %arg0, %[[L2_AXES]] {keepdims = 0 : i64} : (tensor<2x3x8xf32>, tensor<2xi64>) -> tensor<3xf32>
// OPSET13:       onnx.Split %arg0, %[[PARTS]] {axis = 2 : i64} : (tensor<2x3x8xf32>, tensor<2xi64>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>)
// OPSET13-NOT:   axes =

// Opset 20: the same forms. Split's num_outputs becomes sizes of
// ceil(8 / 3) with a smaller last part; allowzero without a 0 in the shape
// and Cast's saturate (float8 only) are dropped; Pad's axes become pads of
// every dim; reduction="none" is the default.
// OPSET20-DAG:   %[[AXES:.*]] = arith.constant dense<-1> : tensor<1xi64>
// OPSET20-DAG:   %[[SIZES:.*]] = arith.constant dense<[3, 3, 2]> : tensor<3xi64>
// OPSET20-DAG:   %[[PADS:.*]] = arith.constant dense<[1, 0, 2, 0, 0, 3]> : tensor<6xi64>
// OPSET20-DAG:   %[[NONE:.*]] = onnx.none
// OPSET20:       onnx.ReduceMean %arg0, %[[AXES]] {keepdims = 1 : i64} : (tensor<2x3x8xf32>, tensor<1xi64>) -> tensor<2x3x1xf32>
// OPSET20:       onnx.ReduceMin %arg0 {keepdims = 0 : i64} : (tensor<2x3x8xf32>) -> tensor<f32>
// OPSET20:       onnx.Split %arg0, %[[SIZES]] {axis = 2 : i64} : (tensor<2x3x8xf32>, tensor<3xi64>) -> (tensor<2x3x3xf32>, tensor<2x3x3xf32>, tensor<2x3x2xf32>)
// OPSET20:       onnx.Reshape %arg0, %{{.*}} : (tensor<2x3x8xf32>, tensor<2xi64>) -> tensor<6x8xf32>
// OPSET20:       onnx.Cast %arg0 {to = 1 : i64} : (tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
// OPSET20:       onnx.Gelu %arg0 {approximate = "tanh"}
// OPSET20:       onnx.Mod %arg0, %arg0 {fmod = 1 : i64}
// OPSET20:       onnx.Pad %arg0, %[[PADS]], %[[NONE]] : (tensor<2x3x8xf32>, tensor<6xi64>, none) -> tensor<3x3x13xf32>
// OPSET20:       onnx.ScatterElements %arg0, %arg1, %arg0 {axis = 0 : i64} :
// OPSET20-NOT:   num_outputs
// OPSET20-NOT:   allowzero
// OPSET20-NOT:   saturate

// Opset 23's RMSNormalization.
// OPSET23:       onnx.RMSNormalization %arg0, %arg1 {axis = -1 : i64, epsilon = 9.99999997E-7 : f32} : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
