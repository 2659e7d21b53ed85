// The traced HF block with transformers' default grouped_mm experts
// (torch 2.x archive): rows sorted by expert (aten::sort), counted per
// expert (aten::histc), cumsum'd into group ends (aten::cumsum), both
// projections as aten::_grouped_mm, and the inverse permutation built with
// aten::index_put_. libtorch 1.13 learns _grouped_mm's schema to load it.

// RUN: moe-translate --import-torchscript %corpus/hf/mixtral.block.trace.pt --input-shape hidden_states=2x8x16 --mlir-elide-resource-strings-if-larger=16 | FileCheck %s
// CHECK-LABEL: func.func @main_graph(
// CHECK-SAME:      tensor<2x8x16xf32> {onnx.name = "hidden_states"}) -> (tensor<2x8x16xf32> {onnx.name = "output"})
// The fused [E, H, 2F] weights, transposed at import, one constant per expert.
// CHECK-DAG:   %[[W0:.*]] = arith.constant dense_resource<experts.gate_up_proj_transpose.0> : tensor<16x64xf32>
// CHECK-DAG:   %[[W3:.*]] = arith.constant dense_resource<experts.gate_up_proj_transpose.3> : tensor<16x64xf32>
// CHECK-DAG:   arith.constant dense_resource<experts.down_proj_transpose.3> : tensor<32x16xf32>
// CHECK:       %[[TOPK:.*]]:2 = onnx.TopK %{{.*}} {axis = -1 : i64, largest = 1 : i64, sorted = 1 : i64}
// top_k_weights /= sum: the in-place div made functional.
// CHECK:       onnx.Div %[[TOPK]]#0
// sort(expert_ids): an ascending TopK over all 32 rows.
// CHECK:       %[[SORT:.*]]:2 = onnx.TopK %{{.*}} {axis = 0 : i64, largest = 0 : i64, sorted = 1 : i64} : (tensor<32xi64>, tensor<1xi64>) -> (tensor<32xi64>, tensor<32xi64>)
// CHECK:       %[[ROWS:.*]] = onnx.Gather %{{.*}} {axis = 0 : i64} : (tensor<16x16xf32>, tensor<32xi64>) -> tensor<32x16xf32>
// histc(bins=4, min=0, max=3): the bin of each row, compared with 0..3.
// CHECK:       onnx.Floor
// CHECK:       %[[HIT:.*]] = onnx.Equal %{{.*}}, %{{.*}} : (tensor<32x1xi64>, tensor<1x4xi64>) -> tensor<32x4xi1>
// CHECK:       %[[COUNTS:.*]] = onnx.ReduceSum %{{.*}}, %{{.*}} {keepdims = 0 : i64} : (tensor<32x4xf32>, tensor<1xi64>) -> tensor<4xf32>
// CHECK:       %[[ENDS:.*]] = onnx.CumSum %{{.*}} : (tensor<4xi32>, tensor<i64>) -> tensor<4xi32>
// _grouped_mm: per expert, the MatMul of all rows, kept where the row is in
// the expert's range; static shapes throughout.
// CHECK:       %[[P0:.*]] = onnx.MatMul %[[ROWS]], %[[W0]] : (tensor<32x16xf32>, tensor<16x64xf32>) -> tensor<32x64xf32>
// CHECK:       %[[G0:.*]] = onnx.Where %{{.*}}, %[[P0]], %{{.*}} : (tensor<32x1xi1>, tensor<32x64xf32>, tensor<f32>) -> tensor<32x64xf32>
// CHECK-COUNT-2: onnx.Where %{{.*}} : (tensor<32x1xi1>, tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
// CHECK:       %[[P3:.*]] = onnx.MatMul %[[ROWS]], %[[W3]]
// CHECK:       %[[GATE_UP:.*]] = onnx.Where %{{.*}}, %[[P3]], %{{.*}} : (tensor<32x1xi1>, tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>
// CHECK:       onnx.Split %[[GATE_UP]]
// CHECK-COUNT-4: onnx.Where %{{.*}} -> tensor<32x16xf32>
// inv_perm = empty_like(perm); inv_perm[perm] = arange: index_put_ as ScatterND.
// CHECK:       %[[INV:.*]] = onnx.ScatterND %{{.*}}, %{{.*}}, %{{.*}} : (tensor<32xi64>, tensor<32x1xi64>, tensor<32xi64>) -> tensor<32xi64>
// CHECK:       onnx.Gather %{{.*}}, %[[INV]] {axis = 0 : i64} : (tensor<32x16xf32>, tensor<32xi64>) -> tensor<32x16xf32>
// CHECK:       return %{{.*}} : tensor<2x8x16xf32>
