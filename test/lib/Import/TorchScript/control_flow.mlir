// Scripted control flow that import-time values decide: prim::If on a
// static shape or a module attribute keeps the branch taken, and prim::Loop
// with a constant trip count is unrolled, with an in-place op in its body
// mutating a tensor from outside it.

// RUN: moe-translate --import-torchscript %S/Inputs/static_control_flow.pt --input-shape x=2x8 | FileCheck %s
// CHECK-LABEL: func.func @main_graph(
// x.size(1) == 8: y = x * 2; self.scale: y = y * 0.5.
// CHECK-DAG:   %[[TWO:.*]] = arith.constant dense<2.000000e+00> : tensor<f32>
// CHECK-DAG:   %[[HALF:.*]] = arith.constant dense<5.000000e-01> : tensor<f32>
// CHECK:       %[[Y0:.*]] = onnx.Mul %arg0, %[[TWO]]
// CHECK:       %[[Y:.*]] = onnx.Mul %[[Y0]], %[[HALF]]
// CHECK-NOT:   onnx.Sub
// Three iterations of out.add_(x * i); acc = acc + out.
// CHECK:       %[[ZEROS:.*]] = onnx.ConstantOfShape
// CHECK:       %[[OUT0:.*]] = onnx.Add %[[ZEROS]],
// CHECK:       %[[ACC0:.*]] = onnx.Add %arg0, %[[OUT0]]
// CHECK:       %[[OUT1:.*]] = onnx.Add %[[OUT0]],
// CHECK:       %[[ACC1:.*]] = onnx.Add %[[ACC0]], %[[OUT1]]
// CHECK:       %[[OUT2:.*]] = onnx.Add %[[OUT1]],
// CHECK:       %[[ACC2:.*]] = onnx.Add %[[ACC1]], %[[OUT2]]
// CHECK:       %[[RESULT:.*]] = onnx.Add %[[ACC2]], %[[Y]]
// CHECK:       return %[[RESULT]]

// A loop over what nonzero found has no trip count at import time.
// RUN: not moe-translate --import-torchscript %S/Inputs/data_dependent_loop.pt --input-shape x=2x8 2>&1 | FileCheck %s --check-prefix=DYNAMIC --implicit-check-not="PLEASE submit"
// DYNAMIC: data_dependent_loop.pt:0:0: error: cannot import prim::Loop at {{.*}}gen_inputs.py:{{[0-9]+}}:{{[0-9]+}}: its trip count is computed at run time

// The scripted DBRX block loops over the experts hit: the same error, at
// its source line.
// RUN: not moe-translate --import-torchscript %corpus/hf/dbrx.block.script.pt --input-shape hidden_states=2x8x16 2>&1 | FileCheck %s --check-prefix=DBRX --implicit-check-not="PLEASE submit"
// DBRX: error: cannot import prim::Loop at {{.*}}modeling_dbrx.py:296:8: its trip count is computed at run time
