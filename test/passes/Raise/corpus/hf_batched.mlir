// MoE blocks of transformers 5 models exported by torch.onnx.export(dynamo=True)
// with the `batched_mm` experts (test/corpus/hf/*.block.dynamo.onnx): x
// repeated k times, each (token, pick) pair's expert weights gathered by the
// router's flat ids (GatherND on the stacked [E, ...] parameters), one bmm per
// projection, the SwiGLU, the routing weights and the sum over k. Each block
// becomes one moe.layer and nothing of the gathered form is left.
//
// Mixtral, Qwen3-MoE, GraniteMoE (TopK then Softmax), Qwen3-Next:
// renormalised top-2. The weights are `[E, out, in]` (bmm(W[ids], x)) and
// are used as they are.
// RUN: moe-translate --import-onnx %corpus/hf/mixtral.block.dynamo.onnx | moe-opt --moe-raise --canonicalize | FileCheck %s --check-prefix=MIXTRAL
// MIXTRAL-DAG: %[[FC1:.*]] = arith.constant dense_resource<val_21> : tensor<4x64x16xf32>
// MIXTRAL-DAG: %[[FC2:.*]] = arith.constant dense_resource<val_33> : tensor<4x16x32xf32>
// MIXTRAL: moe.layer softmax topk k 2 %{{.*}}, %{{.*}} fc1(%[[FC1]]) fc2(%[[FC2]]) activation <swiglu, concatenated> {normalize} : (tensor<16x16xf32>, tensor<16x4xf32>, tensor<4x64x16xf32>, tensor<4x16x32xf32>) -> tensor<16x16xf32>
// MIXTRAL-NOT: onnx.GatherND
// MIXTRAL-NOT: onnx.TopK
// MIXTRAL-NOT: onnx.Expand
// MIXTRAL-NOT: onnx.MatMul
//
// RUN: moe-translate --import-onnx %corpus/hf/qwen3_moe.block.dynamo.onnx | moe-opt --moe-raise --canonicalize | FileCheck %s --check-prefix=QWEN3
// QWEN3: moe.layer softmax topk k 2 %{{.*}}, %{{.*}} fc1(%{{.*}}) fc2(%{{.*}}) activation <swiglu, concatenated> {normalize} : (tensor<16x16xf32>, tensor<16x8xf32>, tensor<8x64x16xf32>, tensor<8x16x32xf32>) -> tensor<16x16xf32>
// QWEN3-NOT: onnx.GatherND
// QWEN3-NOT: onnx.TopK
//
// RUN: moe-translate --import-onnx %corpus/hf/granitemoe.block.dynamo.onnx | moe-opt --moe-raise --canonicalize | FileCheck %s --check-prefix=GRANITE
// GRANITE: moe.layer softmax topk k 2 %{{.*}}, %{{.*}} fc1(%{{.*}}) fc2(%{{.*}}) activation <swiglu, concatenated> {normalize} : (tensor<16x16xf32>, tensor<16x4xf32>, tensor<4x64x16xf32>, tensor<4x16x32xf32>) -> tensor<16x16xf32>
// GRANITE-NOT: onnx.GatherND
// GRANITE-NOT: onnx.TopK
//
// Qwen3-Next: a gated shared expert beside the routed ones, folded into
// the layer.
// RUN: moe-translate --import-onnx %corpus/hf/qwen3_next.block.dynamo.onnx | moe-opt --moe-raise --canonicalize | FileCheck %s --check-prefix=QWEN3NEXT
// QWEN3NEXT: %[[Y:.*]] = moe.layer softmax topk k 2 %{{.*}}, %{{.*}} fc1(%{{.*}}) fc2(%{{.*}}) shared_fc1(%{{.*}}) shared_fc2(%{{.*}}) shared_gate(%{{.*}}) activation <swiglu, concatenated> {normalize} : (tensor<16x16xf32>, tensor<16x8xf32>, tensor<8x64x16xf32>, tensor<8x16x32xf32>, tensor<64x16xf32>, tensor<16x32xf32>, tensor<1x16xf32>) -> tensor<16x16xf32>
// QWEN3NEXT-NEXT: onnx.Reshape %[[Y]]
// QWEN3NEXT-NEXT: return
// QWEN3NEXT-NOT: onnx.GatherND
// QWEN3NEXT-NOT: onnx.TopK
//
// Qwen2-MoE (with its gated shared expert, folded in), OLMoE and Jamba: no
// renormalisation.
// RUN: moe-translate --import-onnx %corpus/hf/qwen2_moe.block.dynamo.onnx | moe-opt --moe-raise --canonicalize | FileCheck %s --check-prefix=QWEN2
// QWEN2: %[[Y:.*]] = moe.layer softmax topk k 2 %{{.*}}, %{{.*}} fc1(%{{.*}}) fc2(%{{.*}}) shared_fc1(%{{.*}}) shared_fc2(%{{.*}}) shared_gate(%{{.*}}) activation <swiglu, concatenated> : (tensor<16x16xf32>, tensor<16x8xf32>, tensor<8x64x16xf32>, tensor<8x16x32xf32>, tensor<64x16xf32>, tensor<16x32xf32>, tensor<1x16xf32>) -> tensor<16x16xf32>
// QWEN2-NEXT: onnx.Reshape %[[Y]]
// QWEN2-NEXT: return
// QWEN2-NOT: onnx.GatherND
// QWEN2-NOT: onnx.TopK
//
// RUN: moe-translate --import-onnx %corpus/hf/olmoe.block.dynamo.onnx | moe-opt --moe-raise --canonicalize | FileCheck %s --check-prefix=OLMOE
// OLMOE: moe.layer softmax topk k 2 %{{.*}}, %{{.*}} fc1(%{{.*}}) fc2(%{{.*}}) activation <swiglu, concatenated> : (tensor<16x16xf32>, tensor<16x8xf32>, tensor<8x64x16xf32>, tensor<8x16x32xf32>) -> tensor<16x16xf32>
// OLMOE-NOT: onnx.GatherND
// OLMOE-NOT: onnx.TopK
//
// RUN: moe-translate --import-onnx %corpus/hf/jamba.block.dynamo.onnx | moe-opt --moe-raise --canonicalize | FileCheck %s --check-prefix=JAMBA
// JAMBA: moe.layer softmax topk k 2 %{{.*}}, %{{.*}} fc1(%{{.*}}) fc2(%{{.*}}) activation <swiglu, concatenated> : (tensor<16x16xf32>, tensor<16x4xf32>, tensor<4x64x16xf32>, tensor<4x16x32xf32>) -> tensor<16x16xf32>
// JAMBA-NOT: onnx.GatherND
// JAMBA-NOT: onnx.TopK
//
// DeepSeek-V3: sigmoid scores, the correction bias, group-limited top-k and
// the scaling factor; the shared expert folded into the layer.
// RUN: moe-translate --import-onnx %corpus/hf/deepseek_v3.block.dynamo.onnx | moe-opt --moe-raise --canonicalize | FileCheck %s --check-prefix=DSV3
// DSV3: %[[Y:.*]] = moe.layer sigmoid grouped_topk k 2 %{{.*}}, %{{.*}} bias(%{{.*}}) groups 4 top 2 by top2_sum fc1(%{{.*}}) fc2(%{{.*}}) shared_fc1(%{{.*}}) shared_fc2(%{{.*}}) activation <swiglu, concatenated> {normalize, scaling_factor = 2.500000e+00 : f64} : (tensor<16x16xf32>, tensor<16x8xf32>, tensor<8x64x16xf32>, tensor<8x16x32xf32>, tensor<8xf32>, tensor<64x16xf32>, tensor<16x32xf32>) -> tensor<16x16xf32>
// DSV3-NEXT: onnx.Reshape %[[Y]]
// DSV3-NEXT: return
// DSV3-NOT: onnx.GatherND
// DSV3-NOT: onnx.TopK
//
// GPT-OSS: `[E, in, out]` weights multiplied from the left
// (bmm(x, W[ids])), turned into new `[E, out, in]` constants; the expert
// biases gathered per pair; TopK then Softmax; the clamped interleaved
// SwiGLU.
// RUN: moe-translate --import-onnx %corpus/hf/gpt_oss.block.dynamo.onnx | moe-opt --moe-raise --canonicalize | FileCheck %s --check-prefix=GPTOSS
// GPTOSS-DAG: %[[FC1:.*]] = arith.constant dense_resource<experts_fc1> : tensor<4x64x16xf32>
// GPTOSS-DAG: %[[FC2:.*]] = arith.constant dense_resource<experts_fc2> : tensor<4x16x32xf32>
// GPTOSS-DAG: %[[B1:.*]] = arith.constant dense_resource<val_28> : tensor<4x64xf32>
// GPTOSS-DAG: %[[B2:.*]] = arith.constant dense_resource<val_76> : tensor<4x16xf32>
// GPTOSS: moe.layer softmax topk k 2 %{{.*}}, %{{.*}} fc1(%[[FC1]], %[[B1]]) fc2(%[[FC2]], %[[B2]]) activation <swiglu, interleaved, alpha = 1.70{{[0-9]*}}, beta = 1.000000e+00, limit = 7.000000e+00> {normalize} : (tensor<16x16xf32>, tensor<16x4xf32>, tensor<4x64x16xf32>, tensor<4x64xf32>, tensor<4x16x32xf32>, tensor<4x16xf32>) -> tensor<16x16xf32>
// GPTOSS-NOT: onnx.GatherND
// GPTOSS-NOT: onnx.TopK
// GPTOSS-NOT: onnx.Slice
//
// The same form in transformers' exporter with ONNX Runtime's fusions, which
// fuses these two families' experts into no com.microsoft.MoE: x repeated by
// Tile instead of Expand, one layer per MoE layer of the whole model.
// RUN: moe-translate --import-onnx %corpus/hf/gpt_oss.model.exporter_ort.onnx | moe-opt --moe-raise --canonicalize | FileCheck %s --check-prefix=GPTOSS-ORT
// GPTOSS-ORT-COUNT-2: moe.layer softmax topk k 2 %{{.*}}, %{{.*}} fc1(%{{.*}}, %{{.*}}) fc2(%{{.*}}, %{{.*}}) activation <swiglu, interleaved, alpha = 1.70{{[0-9]*}}, beta = 1.000000e+00, limit = 7.000000e+00> {normalize} : (tensor<16x16xf32>, tensor<16x4xf32>, tensor<4x64x16xf32>, tensor<4x64xf32>, tensor<4x16x32xf32>, tensor<4x16xf32>) -> tensor<16x16xf32>
// GPTOSS-ORT-NOT: onnx.GatherND
// GPTOSS-ORT-NOT: onnx.TopK
// GPTOSS-ORT-NOT: onnx.Tile
//
// RUN: moe-translate --import-onnx %corpus/hf/deepseek_v3.model.exporter_ort.onnx | moe-opt --moe-raise --canonicalize | FileCheck %s --check-prefix=DSV3-ORT
// DSV3-ORT: moe.layer sigmoid grouped_topk k 2 %{{.*}}, %{{.*}} bias(%{{.*}}) groups 4 top 2 by top2_sum fc1(%{{.*}}) fc2(%{{.*}}) {{.*}}activation <swiglu, concatenated> {normalize, scaling_factor = 2.500000e+00 : f64} : (tensor<16x16xf32>, tensor<16x8xf32>, tensor<8x64x16xf32>, tensor<8x16x32xf32>, tensor<8xf32>{{.*}}) -> tensor<16x16xf32>
// DSV3-ORT-NOT: moe.layer
// DSV3-ORT-NOT: onnx.GatherND
// DSV3-ORT-NOT: onnx.TopK
//
// PhiMoE's sparse mixer (two ArgMaxes, no TopK), found by the concat of its
// picks.
// RUN: moe-translate --import-onnx %corpus/hf/phimoe.block.dynamo.onnx | moe-opt --moe-raise --canonicalize | FileCheck %s --check-prefix=PHIMOE
// PHIMOE: moe.layer softmax sparse_mixer k 2 %{{.*}}, %{{.*}} fc1(%{{.*}}) fc2(%{{.*}}) activation <swiglu, concatenated> {jitter_eps = 0.0{{[0-9]*}} : f64}
// PHIMOE-NOT: onnx.GatherND
// PHIMOE-NOT: onnx.ArgMax
