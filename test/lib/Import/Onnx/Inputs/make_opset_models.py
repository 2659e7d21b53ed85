"""Writes the tiny models of opset_forms.mlir and opset_errors.mlir: the
same operators in the forms of opsets 13 and 18+, which the importer gives
one form each, and attribute values it refuses. Needs onnx >= 1.18 (opset
23); the corpus venv has it:

    ~/.cache/moe-mlir/corpus-venv/bin/python \
        test/lib/Import/Onnx/Inputs/make_opset_models.py test/lib/Import/Onnx/Inputs
"""

import os
import sys

import onnx
from onnx import TensorProto, helper

F = TensorProto.FLOAT
I64 = TensorProto.INT64


def ints(name, values):
    return helper.make_tensor(name, I64, [len(values)], values)


def save(directory, name, nodes, inputs, outputs, inits=(), opset=20):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    path = os.path.join(directory, name + ".onnx")
    onnx.save(model, path)


def x(shape, name="x", elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def y(name, elem=F):
    return helper.make_tensor_value_info(name, elem, None)


def main(directory):
    # Opset 13: axes attributes and Split into equal parts without sizes.
    save(directory, "opset13_forms", [
        helper.make_node("ReduceMean", ["x"], ["mean"], axes=[-1], keepdims=1, name="mean"),
        helper.make_node("ReduceMax", ["x"], ["max"], keepdims=0, name="max"),
        helper.make_node("ReduceL2", ["x"], ["l2"], axes=[0, 2], keepdims=0, name="l2"),
        helper.make_node("Split", ["x"], ["s0", "s1"], axis=2, name="split"),
        helper.make_node("Reshape", ["x", "shape"], ["r"], name="reshape"),
    ], [x([2, 3, 8])], [y("mean"), y("max"), y("l2"), y("s0"), y("s1"), y("r")],
        [ints("shape", [6, 8])], opset=13)

    # Opset 20 (what transformers' exporter writes): axes inputs, Split's
    # num_outputs with a smaller last part, Reshape allowzero without a 0,
    # Cast saturate, Gelu, Mod, Pad with axes (18).
    save(directory, "opset20_forms", [
        helper.make_node("ReduceMean", ["x", "axes"], ["mean"], keepdims=1, name="mean"),
        helper.make_node("ReduceMin", ["x"], ["min"], keepdims=0, name="min"),
        helper.make_node("Split", ["x"], ["s0", "s1", "s2"], axis=2, num_outputs=3, name="split"),
        helper.make_node("Reshape", ["x", "shape"], ["r"], allowzero=1, name="reshape"),
        helper.make_node("Cast", ["x"], ["c"], to=F, saturate=0, name="cast"),
        helper.make_node("Gelu", ["x"], ["g"], approximate="tanh", name="gelu"),
        helper.make_node("Mod", ["x", "x"], ["m"], fmod=1, name="mod"),
        helper.make_node("Pad", ["x", "pads", "", "pad_axes"], ["p"], mode="constant", name="pad"),
        helper.make_node("ScatterElements", ["x", "idx", "x"], ["sc"], axis=0, reduction="none",
                         name="scatter"),
    ], [x([2, 3, 8]), x([2, 3, 8], "idx", I64)],
        [y("mean"), y("min"), y("s0"), y("s1"), y("s2"), y("r"), y("c"), y("g"), y("m"), y("p"),
         y("sc")],
        [ints("axes", [-1]), ints("shape", [6, 8]), ints("pads", [1, 2, 0, 3]),
         ints("pad_axes", [0, 2])], opset=20)

    # Opset 23: RMSNormalization.
    save(directory, "opset23_rmsnorm", [
        helper.make_node("RMSNormalization", ["x", "scale"], ["n"], axis=-1, epsilon=1e-6,
                         name="rms"),
    ], [x([2, 3, 8]), x([8], "scale")], [y("n")], opset=23)

    # Refused: a 0 in a Reshape with allowzero=1, a Pad mode, a Gelu approximation.
    save(directory, "opset20_allowzero", [
        helper.make_node("Reshape", ["x", "shape"], ["r"], allowzero=1, name="reshape"),
    ], [x([2, 0, 8])], [y("r")], [ints("shape", [2, 0, 8])])
    save(directory, "opset20_pad_reflect", [
        helper.make_node("Pad", ["x", "pads"], ["p"], mode="reflect", name="pad"),
    ], [x([2, 8])], [y("p")], [ints("pads", [0, 1, 0, 1])])
    save(directory, "opset20_gelu_sigmoid", [
        helper.make_node("Gelu", ["x"], ["g"], approximate="sigmoid", name="gelu"),
    ], [x([2, 8])], [y("g")])
    save(directory, "opset20_scatter_reduction", [
        helper.make_node("ScatterND", ["x", "idx", "u"], ["s"], reduction="max", name="scatter"),
        helper.make_node("ScatterND", ["s", "idx", "u"], ["t"], reduction="mean", name="bad"),
    ], [x([4]), x([2, 1], "idx", I64), x([2], "u")], [y("t")])


if __name__ == "__main__":
    main(sys.argv[1])
