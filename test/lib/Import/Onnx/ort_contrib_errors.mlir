// Contrib nodes the importer cannot expand exactly are one error naming the
// node, the operator and what is unsupported.
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %S/Inputs/make_ort_contrib_errors.py %t
// RUN: not moe-translate --import-onnx %t/packed_batching.onnx 2>&1 | FileCheck %s --check-prefix=PACKED --implicit-check-not=error:
// RUN: not moe-translate --import-onnx %t/key_padding_mask.onnx 2>&1 | FileCheck %s --check-prefix=MASK --implicit-check-not=error:
// RUN: not moe-translate --import-onnx %t/trans_batch.onnx 2>&1 | FileCheck %s --check-prefix=BATCH --implicit-check-not=error:
// RUN: not moe-translate --import-onnx %t/unknown_rank.onnx 2>&1 | FileCheck %s --check-prefix=RANK --implicit-check-not=error:
// RUN: not moe-translate --import-onnx %t/mean_output.onnx 2>&1 | FileCheck %s --check-prefix=MEAN --implicit-check-not=error:
// RUN: not moe-translate --import-onnx %t/gqa.onnx 2>&1 | FileCheck %s --check-prefix=GQA --implicit-check-not=error:

// PACKED: error: node 'rope' (com.microsoft.RotaryEmbedding): attribute 'is_packed_batching' = 1 is not supported
// MASK: error: node 'mha' (com.microsoft.MultiHeadAttention): input 4 ('mask') is not supported by the MultiHeadAttention expansion
// BATCH: error: node 'fmm' (com.microsoft.FusedMatMul): attribute 'transBatchA' = 1 is not supported
// RANK: error: node 'mha' (com.microsoft.MultiHeadAttention): the rank of query 'q' is unknown (the graph has no value_info for it)
// MEAN: error: node 'sln' (com.microsoft.SkipLayerNormalization): output 1 ('mean') is not computed by ONNX Runtime's kernels
// GQA: error: node 'gqa' (com.microsoft.GroupQueryAttention): this attention operator is not supported; only MultiHeadAttention is expanded
