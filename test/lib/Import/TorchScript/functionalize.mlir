// In-place ops become their functional forms before translation; writes
// through views are written back into the viewed tensor, and views taken
// before a write are recomputed after it. (Inputs/gen_inputs.py makes the
// archives; test/e2e/hf_torchscript.test runs inplace_views against torch.)

// RUN: moe-translate --import-torchscript %S/Inputs/inplace_views.pt --input-shape x=2x8 | FileCheck %s --check-prefix=VIEWS
// VIEWS-LABEL: func.func @main_graph(
// VIEWS-SAME:      -> (tensor<2x8xf32> {onnx.name = "output_0"}, tensor<2x3xf32> {onnx.name = "output_1"})
// VIEWS:       %[[Y:.*]] = onnx.Mul %arg0
// y[0].mul_(2): the row, scaled, is written back by select_scatter.
// VIEWS:       %[[ROW:.*]] = onnx.Gather %[[Y]], %{{.*}} {axis = 0 : i64} : (tensor<2x8xf32>, tensor<i64>) -> tensor<8xf32>
// VIEWS:       %[[SCALED:.*]] = onnx.Mul %[[ROW]]
// VIEWS:       %[[ROW1:.*]] = onnx.Unsqueeze %[[SCALED]]
// VIEWS:       %[[REST:.*]] = onnx.Slice %[[Y]]
// VIEWS:       %[[Y1:.*]] = onnx.Concat %[[ROW1]], %[[REST]] {axis = 0 : i64} : (tensor<1x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
// y[:, 1:3].add_(1): slice_scatter, reading the new y.
// VIEWS:       %[[COLS:.*]] = onnx.Slice %[[Y1]], {{.*}} -> tensor<2x2xf32>
// VIEWS:       %[[ADDED:.*]] = onnx.Add %[[COLS]]
// VIEWS:       %[[Y2:.*]] = onnx.Concat %{{.*}}, %[[ADDED]], %{{.*}} {axis = 1 : i64} : (tensor<2x1xf32>, tensor<2x2xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
// y.t()[3].sub_(0.5): written back through the select and the transpose.
// VIEWS:       %[[T:.*]] = onnx.Transpose %[[Y2]] {perm = array<i64: 1, 0>}
// VIEWS:       onnx.Sub
// VIEWS:       %[[T1:.*]] = onnx.Concat {{.*}} {axis = 0 : i64} : (tensor<3x2xf32>, tensor<1x2xf32>, tensor<4x2xf32>) -> tensor<8x2xf32>
// VIEWS:       %[[Y3:.*]] = onnx.Transpose %[[T1]] {perm = array<i64: 1, 0>} : (tensor<8x2xf32>) -> tensor<2x8xf32>
// y.view(4, 4)[1].div_(4): back through the view with a reshape.
// VIEWS:       %[[V:.*]] = onnx.Reshape %[[Y3]], %{{.*}} -> tensor<4x4xf32>
// VIEWS:       onnx.Div
// VIEWS:       %[[V1:.*]] = onnx.Concat {{.*}} -> tensor<4x4xf32>
// VIEWS:       %[[Y4:.*]] = onnx.Reshape %[[V1]], %{{.*}} -> tensor<2x8xf32>
// v = y[:, 2:5], taken first, is recomputed from the final y.
// VIEWS:       %[[V2:.*]] = onnx.Slice %{{.*}} -> tensor<2x3xf32>
// VIEWS:       %[[OUT1:.*]] = onnx.Mul %[[V2]]
// VIEWS:       return %[[Y4]], %[[OUT1]]

// A mutated graph input: the output sees the new value.
// RUN: moe-translate --import-torchscript %S/Inputs/inplace_input.pt --input-shape x=2x8 | FileCheck %s --check-prefix=INPUT
// INPUT:       %[[ADD:.*]] = onnx.Add %arg0, %{{.*}} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
// INPUT:       %[[MUL:.*]] = onnx.Mul %[[ADD]]
// INPUT:       return %[[MUL]]

// expand has no inverse: one error, naming the op and its source.
// RUN: not moe-translate --import-torchscript %S/Inputs/inplace_expand.pt --input-shape x=2x8 2>&1 | FileCheck %s --check-prefix=EXPAND --implicit-check-not="PLEASE submit"
// EXPAND: inplace_expand.pt:0:0: error: cannot make aten::add_ at {{.*}}gen_inputs.py:{{[0-9]+}}:{{[0-9]+}} functional: it writes through a view made by aten::expand, which has no inverse here

// A chunk taken before the write and used after it would go stale.
// RUN: not moe-translate --import-torchscript %S/Inputs/inplace_after_chunk.pt --input-shape x=2x8 2>&1 | FileCheck %s --check-prefix=CHUNK --implicit-check-not="PLEASE submit"
// CHUNK: error: cannot make aten::add_ at {{.*}}gen_inputs.py:{{[0-9]+}}:{{[0-9]+}} functional: a piece of the mutated tensor that chunk, split or unbind made before the write is used after it

// Traced top-k weights normalised in place (w /= w.sum()), as the HF
// routers do: aten::div_ on TopK's values.
// RUN: moe-translate --import-torchscript %corpus/hf/mixtral.block.trace_eager.pt --input-shape hidden_states=2x8x16 --mlir-elide-resource-strings-if-larger=16 | FileCheck %s --check-prefix=ROUTER
// ROUTER:      %[[TOPK:.*]]:2 = onnx.TopK
// ROUTER:      %[[SUM:.*]] = onnx.ReduceSum %[[TOPK]]#0
// ROUTER:      onnx.Div %[[TOPK]]#0, %[[SUM]]
// index_add_ into zeros_like, once per expert that the trace saw.
// ROUTER-COUNT-4: onnx.ScatterElements {{.*}} {axis = 0 : i64, reduction = "add"}
// ROUTER-NOT:  onnx.ScatterElements
