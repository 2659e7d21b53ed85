#!/usr/bin/env python3
"""Writes the tiny ONNX Runtime contrib-op graphs that ort_contrib*.mlir and
test/e2e/ort_contrib.test read: ort_contrib_<case>.onnx, each graph input as
ort_contrib_<case>.in.<name>.npy and ONNX Runtime's CPU outputs as
ort_contrib_<case>.out.<name>.npy.

Needs onnx and onnxruntime (1.32 made the committed files); run it from any
directory with the corpus venv:

    ~/.cache/moe-mlir/corpus-venv/bin/python test/lib/Import/Onnx/Inputs/make_ort_contrib.py
"""

import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
MS = "com.microsoft"
rng = np.random.default_rng(2026)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def make(case, nodes, inputs, outputs, initializers=None, opset=17):
    """inputs: {name: array}; outputs: {name: elem type}."""
    initializers = initializers or {}
    graph = helper.make_graph(
        nodes, case,
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        [numpy_helper.from_array(a, n) for n, a in initializers.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid(MS, 1)])
    model.ir_version = 8
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    results = session.run(outputs, inputs)
    base = os.path.join(HERE, "ort_contrib_" + case)
    onnx.save(model, base + ".onnx")
    for name, value in inputs.items():
        np.save("%s.in.%s.npy" % (base, name), value)
    for name, value in zip(outputs, results):
        np.save("%s.out.%s.npy" % (base, name), value)


x = f32(2, 3, 8)
make("sln",
     [helper.make_node("SimplifiedLayerNormalization", ["x", "g"], ["y", "inv_std"],
                       axis=-1, epsilon=1e-5, stash_type=1)],
     {"x": x}, ["y", "inv_std"], {"g": f32(8)})
make("skip_sln",
     [helper.make_node("SkipSimplifiedLayerNormalization", ["x", "skip", "g", "b"],
                       ["y", "", "", "sum"], domain=MS, epsilon=1e-6)],
     {"x": x, "skip": f32(3, 8)}, ["y", "sum"], {"g": f32(8), "b": f32(8)})
make("skip_ln",
     [helper.make_node("SkipLayerNormalization", ["x", "skip", "g", "beta", "b"],
                       ["y", "mean", "inv_std", "sum"], domain=MS, epsilon=1e-5)],
     {"x": x, "skip": f32(2, 3, 8)}, ["y", "sum"],
     {"g": f32(8), "beta": f32(8), "b": f32(8)})
make("fused_matmul",
     [helper.make_node("FusedMatMul", ["a", "b"], ["y"], domain=MS, transA=1, transB=1,
                       alpha=0.5)],
     {"a": f32(2, 4, 3)}, ["y"], {"b": f32(5, 4)})
make("gelu",
     [helper.make_node("Gelu", ["x"], ["gelu"], domain=MS),
      helper.make_node("BiasGelu", ["x", "b"], ["bias_gelu"], domain=MS),
      helper.make_node("FastGelu", ["x", "b"], ["fast_gelu"], domain=MS),
      helper.make_node("QuickGelu", ["x"], ["quick_gelu"], domain=MS, alpha=1.5)],
     {"x": x}, ["gelu", "bias_gelu", "fast_gelu", "quick_gelu"], {"b": f32(8)})

cos, sin = f32(8, 4), f32(8, 4)
make("rotary",
     [helper.make_node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], domain=MS,
                       num_heads=2, interleaved=0)],
     {"x": f32(2, 4, 16)}, ["y"],
     {"pos": np.array([1], np.int64), "cos": cos, "sin": sin})
make("rotary_interleaved",
     [helper.make_node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], domain=MS,
                       interleaved=1)],
     {"x": f32(2, 2, 4, 8), "pos": rng.integers(0, 8, (2, 4)).astype(np.int64)}, ["y"],
     {"cos": cos, "sin": sin})
make("rotary_partial",
     [helper.make_node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], domain=MS,
                       num_heads=2, rotary_embedding_dim=4)],
     {"x": f32(2, 4, 16)}, ["y"],
     {"pos": np.array([2], np.int64), "cos": f32(8, 2), "sin": f32(8, 2)})

make("mha",
     [helper.make_node("MultiHeadAttention", ["q", "k", "v", "", "", "attn_bias"], ["y"],
                       domain=MS, num_heads=2)],
     {"q": f32(2, 4, 16), "k": f32(2, 5, 16), "v": f32(2, 5, 16),
      "attn_bias": f32(2, 1, 4, 5)}, ["y"])
make("mha_past",
     [helper.make_node("MultiHeadAttention",
                       ["q", "k", "v", "bias", "", "", "past_k", "past_v"],
                       ["y", "present_k", "present_v"], domain=MS, num_heads=2,
                       scale=0.3, unidirectional=1)],
     {"q": f32(2, 4, 16), "k": f32(2, 4, 16), "v": f32(2, 4, 16),
      "past_k": f32(2, 2, 3, 8), "past_v": f32(2, 2, 3, 8)},
     ["y", "present_k", "present_v"], {"bias": f32(48)})
# Key and value already in heads [B, N, T, H] (BNSH), the mask in the bias.
make("mha_bnsh",
     [helper.make_node("MultiHeadAttention", ["q", "k", "v", "", "", "attn_bias"], ["y"],
                       domain=MS, num_heads=2)],
     {"q": f32(2, 4, 16), "k": f32(2, 2, 5, 8), "v": f32(2, 2, 5, 8),
      "attn_bias": f32(2, 1, 4, 5)}, ["y"])
