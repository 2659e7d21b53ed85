// RUN: moe-translate --import-torchscript %corpus/mixtral_lost_experts.pt --input-shape hidden_states=2x4x16 --mlir-elide-resource-strings-if-larger=16 | FileCheck %s

// The HF loop over `expert_hit`, traced: the trace unrolled it over the two
// experts (1 and 3) that the sample input hit. The import keeps what the
// trace recorded, no more: the raising passes report the lost experts.

// CHECK-LABEL: func.func @main_graph(
// CHECK-SAME:      tensor<2x4x16xf32> {onnx.name = "hidden_states"}) -> (tensor<2x4x16xf32> {onnx.name = "output"})
// CHECK-NOT:   experts.0.
// CHECK-DAG:   arith.constant dense_resource<experts.1.w1.weight.T> : tensor<16x32xf32>
// CHECK-DAG:   arith.constant dense_resource<experts.3.w2.weight.T> : tensor<32x16xf32>
// CHECK-NOT:   experts.2.
// CHECK:       %[[MASK:.*]] = onnx.Transpose %{{.*}} {perm = array<i64: 2, 1, 0>} : (tensor<8x2x4xi64>) -> tensor<4x2x8xi64>
// expert_hit = (expert_mask.sum(dim=(-1, -2)) > 0).nonzero()
// CHECK:       %[[COUNTS:.*]] = onnx.ReduceSum %[[MASK]], %{{.*}} {keepdims = 0 : i64} : (tensor<4x2x8xi64>, tensor<2xi64>) -> tensor<4xi64>
// CHECK:       %[[HIT:.*]] = onnx.Greater %[[COUNTS]], %{{.*}} : (tensor<4xi64>, tensor<i64>) -> tensor<4xi1>
// CHECK:       %[[NZ:.*]] = onnx.NonZero %[[HIT]]
// CHECK:       %[[ROWS:.*]] = onnx.Transpose %[[NZ]] {perm = array<i64: 1, 0>}
// `for expert_idx in expert_hit` unbinds as many rows as the trace saw.
// CHECK:       %[[EACH:.*]]:2 = onnx.Split %[[ROWS]], %{{.*}} {axis = 0 : i64}
// CHECK:       %[[E0:.*]] = onnx.Squeeze %[[EACH]]#0
// CHECK:       onnx.Gather %[[MASK]], %[[E0]] {axis = 0 : i64}
// CHECK-COUNT-2: onnx.ScatterElements {{.*}} {axis = 0 : i64, reduction = "add"}
// CHECK-NOT:   onnx.ScatterElements
// CHECK:       return %{{.*}} : tensor<2x4x16xf32>
