#!/usr/bin/python3
"""Writes one ONNX model of the standard operators that exporters emit
outside the MoE blocks and that the importer maps one to one (Sign, Round,
the inverse and hyperbolic trigonometric functions, IsNaN, IsInf, Sum, Mean,
Xor, the Bitwise ops, ArgMin, Dropout in its inference form), its input and
NumPy's results, for run_onnx_model.py:

    make_onnx_ops.py DIR   # DIR/onnx_ops.onnx, .in.<name>.npy, .out.<name>.npy

Inputs are data (graph inputs), so nothing is folded at compile time.
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

OPSET = 18  # the Bitwise operators are opset 18

f32 = np.float32
rng = np.random.default_rng(7)
x = rng.uniform(-0.9, 0.9, (3, 4)).astype(f32)     # inside every domain
big = (1.2 + rng.uniform(0, 2, (3, 4))).astype(f32)  # Acosh: >= 1
halves = np.array([[-2.5, -1.5, -0.5, 0.5], [1.5, 2.5, 0.49, -0.51],
                   [3.5, -3.5, 0.0, 7.25]], f32)
signs = np.array([[-2.0, 0.0, 3.5, -0.25], [1e-3, -1e-3, 0.0, 4.0],
                  [-7.0, 7.0, 0.5, -0.5]], f32)
ints = np.array([[5, -3, 12, 0], [7, 1, -8, 255], [-1, 64, 3, 9]], np.int64)
other = np.array([[3, 6, -4, 1], [2, 7, 15, -9], [0, 1, 5, 100]], np.int64)
flags = np.array([[True, False, True, False]] * 3)
other_flags = np.array([[True, True, False, False]] * 3)
# Division by zero gives inf, -inf and nan as data.
num = np.array([[1.0, -1.0, 0.0, 2.0]] * 3, f32)
den = np.array([[0.0, 0.0, 0.0, 4.0]] * 3, f32)
ties = np.array([[3.0, 1.0, 1.0, 2.0], [0.5, 0.5, 0.5, 0.5],
                 [4.0, -1.0, 2.0, -1.0]], f32)

inputs = {"x": x, "big": big, "halves": halves, "signs": signs, "ints": ints,
          "other": other, "flags": flags, "other_flags": other_flags,
          "num": num, "den": den, "ties": ties}
nodes, outputs = [], {}


def node(op, ins, name, **attrs):
    nodes.append(helper.make_node(op, ins, [name], **attrs))
    return name


def out(name, value):
    outputs[name] = value


xd = x.astype(np.float64)
for op, fn in [("Tan", np.tan), ("Atan", np.arctan), ("Asin", np.arcsin),
               ("Acos", np.arccos), ("Sinh", np.sinh), ("Cosh", np.cosh),
               ("Asinh", np.arcsinh), ("Atanh", np.arctanh)]:
    out(node(op, ["x"], op.lower()), fn(xd).astype(f32))
out(node("Acosh", ["big"], "acosh"), np.arccosh(big.astype(np.float64)).astype(f32))
out(node("Round", ["halves"], "round"), np.round(halves))  # halves to even
out(node("Sign", ["signs"], "sign"), np.sign(signs))
out(node("Sign", ["ints"], "sign_int"), np.sign(ints))
node("Div", ["num", "den"], "ratio")
out(node("IsNaN", ["ratio"], "isnan"), np.array([[False, False, True, False]] * 3))
out(node("IsInf", ["ratio"], "isinf"), np.array([[True, True, False, False]] * 3))
out(node("IsInf", ["ratio"], "isinf_neg", detect_positive=0),
    np.array([[False, True, False, False]] * 3))
out(node("Sum", ["x", "big", "signs"], "sum"), x + big + signs)
out(node("Mean", ["x", "halves"], "mean"), (x + halves) / f32(2))
out(node("Xor", ["flags", "other_flags"], "xor"), flags ^ other_flags)
out(node("BitwiseAnd", ["ints", "other"], "bit_and"), ints & other)
out(node("BitwiseOr", ["ints", "other"], "bit_or"), ints | other)
out(node("BitwiseXor", ["ints", "other"], "bit_xor"), ints ^ other)
out(node("BitwiseNot", ["ints"], "bit_not"), ~ints)
# ArgMin: the first minimum, or the last with select_last_index.
out(node("ArgMin", ["ties"], "argmin", axis=1, keepdims=0), np.argmin(ties, axis=1))
last = ties.shape[1] - 1 - np.argmin(ties[:, ::-1], axis=1)
out(node("ArgMin", ["ties"], "argmin_last", axis=1, keepdims=1,
         select_last_index=1), last[:, None])
# Dropout in eval form: the data, and an all-true mask.
nodes.append(helper.make_node("Constant", [], ["ratio_half"],
                              value=numpy_helper.from_array(np.array(0.5, f32))))
nodes.append(helper.make_node("Constant", [], ["not_training"],
                              value=numpy_helper.from_array(np.array(False))))
nodes.append(helper.make_node("Dropout", ["x", "ratio_half", "not_training"],
                              ["dropout", "dropout_mask"]))
out("dropout", x)
out("dropout_mask", np.ones(x.shape, bool))

ELEMENT = {np.dtype(f32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
           np.dtype(bool): TensorProto.BOOL, np.dtype(np.float64): TensorProto.FLOAT}
graph = helper.make_graph(
    nodes, "onnx_ops",
    [helper.make_tensor_value_info(k, ELEMENT[v.dtype], list(v.shape)) for k, v in inputs.items()],
    [helper.make_tensor_value_info(k, ELEMENT[np.asarray(v).dtype], list(np.shape(v)))
     for k, v in outputs.items()])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
model.ir_version = 8

work = sys.argv[1]
os.makedirs(work, exist_ok=True)
with open(os.path.join(work, "onnx_ops.onnx"), "wb") as f:
    f.write(model.SerializeToString())
for k, v in inputs.items():
    np.save(os.path.join(work, "onnx_ops.in.%s.npy" % k), v)
for k, v in outputs.items():
    v = np.asarray(v)
    np.save(os.path.join(work, "onnx_ops.out.%s.npy" % k),
            v.astype(f32) if v.dtype == np.float64 else v)
