// TorchScript traces saved by torch 2.15 of transformers 5 MoE blocks raise
// to the same moe.layer as the ONNX exports of the same modules: the default
// grouped_mm experts (sort, histc, _grouped_mm, index_put, which the importer
// translates into masked dense groups) and the eager loop (select of the
// fused parameters, chunk, index_add_).
// RUN: moe-translate --import-torchscript %corpus/hf/mixtral.block.trace.pt --input-shape hidden_states=2x8x16 | moe-opt --moe-raise --canonicalize | FileCheck %s --check-prefix=MIXTRAL
// RUN: moe-translate --import-torchscript %corpus/hf/mixtral.block.trace_eager.pt --input-shape hidden_states=2x8x16 | moe-opt --moe-raise --canonicalize | FileCheck %s --check-prefix=MIXTRAL
// RUN: moe-translate --import-onnx %corpus/hf/mixtral.block.legacy.onnx | moe-opt --moe-raise --canonicalize | FileCheck %s --check-prefix=MIXTRAL
// MIXTRAL: moe.layer softmax topk k 2 %{{.*}}, %{{.*}} fc1(%{{.*}}) fc2(%{{.*}}) activation <swiglu, concatenated> {normalize} : (tensor<16x16xf32>, tensor<16x4xf32>, tensor<4x64x16xf32>, tensor<4x16x32xf32>) -> tensor<16x16xf32>
// MIXTRAL-NOT: onnx.TopK
// MIXTRAL-NOT: onnx.Where
//
// GPT-OSS (biases gathered by sorted id, the clamped interleaved SwiGLU),
// PhiMoE (the sparse mixer) and DeepSeek-V3 (sigmoid, group-limited).
// RUN: moe-translate --import-torchscript %corpus/hf/gpt_oss.block.trace.pt --input-shape hidden_states=2x8x16 | moe-opt --moe-raise --canonicalize | FileCheck %s --check-prefix=GPTOSS
// GPTOSS: moe.layer softmax topk k 2 %{{.*}}, %{{.*}} fc1(%{{.*}}, %{{.*}}) fc2(%{{.*}}, %{{.*}}) activation <swiglu, interleaved, alpha = 1.70{{[0-9]*}}, beta = 1.000000e+00, limit = 7.000000e+00> {normalize}
// RUN: moe-translate --import-torchscript %corpus/hf/phimoe.block.trace.pt --input-shape hidden_states=2x8x16 | moe-opt --moe-raise --canonicalize | FileCheck %s --check-prefix=PHI
// PHI: moe.layer softmax sparse_mixer k 2
// RUN: moe-translate --import-torchscript %corpus/hf/deepseek_v3.block.trace.pt --input-shape hidden_states=2x8x16 | moe-opt --moe-raise --canonicalize | FileCheck %s --check-prefix=DSV3
// DSV3: moe.layer sigmoid grouped_topk k 2 %{{.*}}, %{{.*}} bias(%{{.*}}) groups 4 top 2 by top2_sum
