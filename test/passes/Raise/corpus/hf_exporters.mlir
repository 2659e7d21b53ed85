// MoE blocks of transformers 5 models (fused gate_up_proj / down_proj
// parameters) as its own ONNX exporter and torch.onnx write them, raised to
// moe.layer: every MoE layer of the whole models, nothing of the grouped or
// looped form left.
//
// The exporter's default (grouped_mm unrolled: argsort, histogram, one
// Range/Gather/MatMul per expert, the un-sort): Mixtral, two MoE layers.
// RUN: moe-translate --import-onnx %corpus/hf/mixtral.model.exporter.onnx | moe-opt --moe-raise --canonicalize | FileCheck %s --check-prefix=GROUPED
// GROUPED-COUNT-2: moe.layer softmax topk k 2 %{{.*}}, %{{.*}} fc1(%{{.*}}) fc2(%{{.*}}) activation <swiglu, concatenated> {normalize} : (tensor<16x16xf32>, tensor<16x4xf32>, tensor<4x64x16xf32>, tensor<4x16x32xf32>) -> tensor<16x16xf32>
// GROUPED-NOT: onnx.TopK
// GROUPED-NOT: onnx.Range
// GROUPED-NOT: onnx.ScatterND
//
// GPT-OSS: TopK then Softmax over the chosen logits (a renormalised
// softmax), expert biases gathered by sorted id, the clamped interleaved
// SwiGLU.
// RUN: moe-translate --import-onnx %corpus/hf/gpt_oss.model.exporter.onnx | moe-opt --moe-raise --canonicalize | FileCheck %s --check-prefix=GPTOSS
// GPTOSS-COUNT-2: moe.layer softmax topk k 2 %{{.*}}, %{{.*}} fc1(%{{.*}}, %{{.*}}) fc2(%{{.*}}, %{{.*}}) activation <swiglu, interleaved, alpha = 1.70{{[0-9]*}}, beta = 1.000000e+00, limit = 7.000000e+00> {normalize} : (tensor<16x16xf32>, tensor<16x4xf32>, tensor<4x64x16xf32>, tensor<4x64xf32>, tensor<4x16x32xf32>, tensor<4x16xf32>) -> tensor<16x16xf32>
// GPTOSS-NOT: onnx.TopK
//
// DeepSeek-V3: sigmoid scores, the correction bias, group-limited top-k and
// the scaling factor; its first layer is dense.
// RUN: moe-translate --import-onnx %corpus/hf/deepseek_v3.model.exporter.onnx | moe-opt --moe-raise --canonicalize | FileCheck %s --check-prefix=DSV3
// Its shared expert (on the unflattened [B, S, H] tokens) is folded in, its
// gate and up halves concatenated as the routed experts'.
// DSV3: moe.layer sigmoid grouped_topk k 2 %{{.*}}, %{{.*}} bias(%{{.*}}) groups 4 top 2 by top2_sum fc1(%{{.*}}) fc2(%{{.*}}) shared_fc1(%{{.*}}) shared_fc2(%{{.*}}) activation <swiglu, concatenated> {normalize, scaling_factor = 2.500000e+00 : f64} : (tensor<16x16xf32>, tensor<16x8xf32>, tensor<8x64x16xf32>, tensor<8x16x32xf32>, tensor<8xf32>, tensor<64x16xf32>, tensor<16x32xf32>) -> tensor<16x16xf32>
// DSV3-NOT: moe.layer
// DSV3-NOT: onnx.TopK
//
// torch.onnx's legacy export of the eager loop: Gather(gate_up_proj, e),
// chunk into halves, a loop over expert_hit split into E pieces.
// RUN: moe-translate --import-onnx %corpus/hf/mixtral.block.legacy.onnx | moe-opt --moe-raise --canonicalize | FileCheck %s --check-prefix=LOOP
// LOOP: moe.layer softmax topk k 2 %{{.*}}, %{{.*}} fc1(%{{.*}}) fc2(%{{.*}}) activation <swiglu, concatenated> {normalize} : (tensor<16x16xf32>, tensor<16x4xf32>, tensor<4x64x16xf32>, tensor<4x16x32xf32>) -> tensor<16x16xf32>
// LOOP-NOT: onnx.NonZero
//
// Qwen2-MoE: no renormalisation; the sigmoid-gated shared expert (nn.Linear
// as Gemm with transB) folded in.
// RUN: moe-translate --import-onnx %corpus/hf/qwen2_moe.model.exporter.onnx | moe-opt --moe-raise --canonicalize | FileCheck %s --check-prefix=QWEN2
// QWEN2-COUNT-2: moe.layer softmax topk k 2 %{{.*}}, %{{.*}} fc1(%{{.*}}) fc2(%{{.*}}) shared_fc1(%{{.*}}) shared_fc2(%{{.*}}) shared_gate(%{{.*}}) activation <swiglu, concatenated> : (tensor<16x16xf32>, tensor<16x8xf32>, tensor<8x64x16xf32>, tensor<8x16x32xf32>, tensor<64x16xf32>, tensor<16x32xf32>, tensor<1x16xf32>) -> tensor<16x16xf32>
//
// Phi-3.5-MoE's sparse mixer (no TopK: two masked arg-maxes), in the
// exporter's grouped form and in the legacy loop.
// RUN: moe-translate --import-onnx %corpus/hf/phimoe.model.exporter.onnx | moe-opt --moe-raise --canonicalize | FileCheck %s --check-prefix=PHI
// PHI-COUNT-2: moe.layer softmax sparse_mixer k 2 %{{.*}}, %{{.*}} fc1(%{{.*}}) fc2(%{{.*}}) activation <swiglu, concatenated> {jitter_eps = 0.0{{[0-9]*}} : f64}
// PHI-NOT: onnx.ArgMax
// RUN: moe-translate --import-onnx %corpus/hf/phimoe.block.legacy.onnx | moe-opt --moe-raise --canonicalize | FileCheck %s --check-prefix=PHILOOP
// PHILOOP: moe.layer softmax sparse_mixer k 2
// PHILOOP-NOT: onnx.NonZero
//
// GPT-OSS's legacy loop: [E, in, out] experts with biases indexed per expert.
// RUN: moe-translate --import-onnx %corpus/hf/gpt_oss.block.legacy.onnx | moe-opt --moe-raise --canonicalize | FileCheck %s --check-prefix=GPTLOOP
// GPTLOOP: moe.layer softmax topk k 2 %{{.*}}, %{{.*}} fc1(%{{.*}}, %{{.*}}) fc2(%{{.*}}, %{{.*}}) activation <swiglu, interleaved, alpha = 1.70{{[0-9]*}}, beta = 1.000000e+00, limit = 7.000000e+00> {normalize}
// GPTLOOP-NOT: onnx.NonZero
