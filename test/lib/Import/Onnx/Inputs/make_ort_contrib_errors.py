#!/usr/bin/python3
"""Writes contrib-op graphs that the importer must reject (ort_contrib_errors.mlir):

    make_ort_contrib_errors.py OUT_DIR
"""

import os
import sys

from onnx import TensorProto, helper, save

MS = "com.microsoft"


def model(path, node, inputs, outputs, known_shapes=True):
    def info(name, shape):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT if name != "pos" else
                                             TensorProto.INT64, shape if known_shapes else None)
    graph = helper.make_graph([node], "g", [info(n, s) for n, s in inputs],
                              [info(n, None) for n in outputs])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                helper.make_opsetid(MS, 1)])
    m.ir_version = 8
    save(m, path)


out = sys.argv[1]
qkv = [("q", [2, 4, 16]), ("k", [2, 4, 16]), ("v", [2, 4, 16])]
model(os.path.join(out, "packed_batching.onnx"),
      helper.make_node("RotaryEmbedding", ["x", "pos", "c", "s"], ["y"], "rope", domain=MS,
                       is_packed_batching=1),
      [("x", [2, 4, 16]), ("pos", [1]), ("c", [8, 4]), ("s", [8, 4])], ["y"])
model(os.path.join(out, "key_padding_mask.onnx"),
      helper.make_node("MultiHeadAttention", ["q", "k", "v", "", "mask"], ["y"], "mha",
                       domain=MS, num_heads=2),
      qkv + [("mask", [2, 4])], ["y"])
model(os.path.join(out, "trans_batch.onnx"),
      helper.make_node("FusedMatMul", ["a", "b"], ["y"], "fmm", domain=MS, transBatchA=1),
      [("a", [2, 3, 4]), ("b", [4, 5])], ["y"])
model(os.path.join(out, "unknown_rank.onnx"),
      helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["y"], "mha", domain=MS,
                       num_heads=2),
      qkv, ["y"], known_shapes=False)
model(os.path.join(out, "mean_output.onnx"),
      helper.make_node("SkipLayerNormalization", ["x", "s", "g"], ["y", "mean"], "sln",
                       domain=MS, epsilon=1e-5),
      [("x", [2, 3, 8]), ("s", [2, 3, 8]), ("g", [8])], ["y", "mean"])
model(os.path.join(out, "gqa.onnx"),
      helper.make_node("GroupQueryAttention", ["q", "k", "v"], ["y"], "gqa", domain=MS,
                       num_heads=2, kv_num_heads=2),
      qkv, ["y"])
