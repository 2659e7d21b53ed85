#!/usr/bin/python3
"""Writes ../new-ops-run.mlir: the onnx ops that opset 18-23 exports added
to the lowering (Mod, Softplus, Gelu, Tile, Pad, ReduceMin/Prod/L1/L2/
LogSumExp, bool ReduceMax/Min, ascending TopK with ties, ScatterElements
add, grouped 1-D Conv, RMSNormalization), run with mlir-runner against NumPy
computed here. Float results print as int64 of x * 1000 (truncated), as the
other numeric tests do.

    /usr/bin/python3 test/passes/Conversion/ONNXToLinalg/Inputs/gen_new_ops_run.py
"""

import math
import os

import numpy as np

f32 = np.float32


def dense(a):
    a = np.asarray(a)
    if a.dtype == np.bool_:
        body = np.array2string(a.astype(int), separator=", ").replace("1", "true").replace("0", "false")
    elif a.dtype.kind == "f":
        body = np.array2string(a, separator=", ", floatmode="unique")
    else:
        body = np.array2string(a, separator=", ")
    return "dense<%s>" % body.replace("\n", "")


def ttype(a):
    a = np.asarray(a)
    el = {"f": "f32", "i": "i64", "b": "i1"}[a.dtype.kind]
    return "tensor<%s>" % "x".join([str(d) for d in a.shape] + [el])


cases = []  # (description, mlir lines producing %r<i> as tensor<...xi64>, expected int64 array)
lines = []
checks = []
counter = [0]


args = []  # (name, value): @model's arguments, constants in @main
results = []  # (name, type): what @model returns and @main prints


def const(a):
    """A constant operand (shapes, axes, pads: what the lowering reads)."""
    counter[0] += 1
    name = "%%c%d" % counter[0]
    lines.append("  %s = arith.constant %s : %s" % (name, dense(a), ttype(a)))
    return name


def arg(a):
    """Data, passed in so that the op is lowered rather than folded."""
    name = "%%arg%d" % len(args)
    args.append((name, np.asarray(a)))
    return name


def op(text, result_like):
    counter[0] += 1
    name = "%%v%d" % counter[0]
    lines.append("  %s = %s -> %s" % (name, text, ttype(result_like)))
    return name


def emit(name, value, what):
    """Prints `name` (of `value`'s shape) as int64 (x1000 for floats)."""
    value = np.asarray(value)
    if value.dtype.kind == "f":
        scaled = (value.astype(f32) * f32(1000)).astype(f32)
        frac = np.abs(scaled - np.trunc(scaled))
        assert np.all((frac > 0.01) & (frac < 0.99) | (frac == 0) | (np.abs(scaled) < 0.5)), (what, scaled)
        k = const(np.full(value.shape, 1000.0, f32))
        m = op("onnx.Mul %s, %s : (%s, %s)" % (name, k, ttype(value), ttype(value)), value)
        name = op("onnx.Cast %s {to = 7 : i64} : (%s)" % (m, ttype(value)),
                  np.zeros(value.shape, np.int64))
        expected = np.trunc(scaled).astype(np.int64)
    elif value.dtype == np.bool_:
        name = op("onnx.Cast %s {to = 7 : i64} : (%s)" % (name, ttype(value)),
                  np.zeros(value.shape, np.int64))
        expected = value.astype(np.int64)
    else:
        expected = value.astype(np.int64)
    if expected.ndim != 1:
        flat = expected.reshape(-1)
        shape = const(np.array([-1], np.int64))
        name = op("onnx.Reshape %s, %s : (%s, tensor<1xi64>)" % (name, shape, ttype(expected)), flat)
        expected = flat
    results.append((name, ttype(expected)))
    checks.append("// %s\n// CHECK: sizes = [%d] strides = [1] data =\n// CHECK-NEXT: [%s]" % (
        what, expected.size, ", ".join(str(v) for v in expected)))


# Mod: integers (floored and truncated), floats.
a = np.array([-7, 7, -7, 7, 5], np.int64)
b = np.array([3, -3, -3, 3, -2], np.int64)
ca, cb = arg(a), arg(b)
emit(op("onnx.Mod %s, %s {fmod = 0 : i64} : (%s, %s)" % (ca, cb, ttype(a), ttype(b)), a),
     np.mod(a, b), "Mod fmod=0 (integers): the divisor's sign")
emit(op("onnx.Mod %s, %s {fmod = 1 : i64} : (%s, %s)" % (ca, cb, ttype(a), ttype(b)), a),
     np.fmod(a, b), "Mod fmod=1 (integers): the dividend's sign")
fa = np.array([-7.5, 7.5, 5.25, -5.25], f32)
fb = np.array([2.0, -2.0, -2.0, 2.5], f32)
cfa, cfb = arg(fa), arg(fb)
emit(op("onnx.Mod %s, %s {fmod = 1 : i64} : (%s, %s)" % (cfa, cfb, ttype(fa), ttype(fb)), fa),
     np.fmod(fa, fb), "Mod fmod=1 (floats)")
emit(op("onnx.Mod %s, %s {fmod = 0 : i64} : (%s, %s)" % (cfa, cfb, ttype(fa), ttype(fb)), fa),
     np.mod(fa, fb), "Mod fmod=0 (floats)")

# Softplus and Gelu.
x = np.array([-30.0, -1.35, 0.1, 2.2, 30.0], f32)
cx = arg(x)
emit(op("onnx.Softplus %s : (%s)" % (cx, ttype(x)), x),
     np.log1p(np.exp(-np.abs(x.astype(np.float64)))) + np.maximum(x, 0), "Softplus")
g = np.array([-2.1, -0.5, 0.3, 1.1, 3.2], f32)
cg = arg(g)
gd = g.astype(np.float64)
emit(op("onnx.Gelu %s : (%s)" % (cg, ttype(g)), g),
     0.5 * gd * (1 + np.vectorize(math.erf)(gd / math.sqrt(2))), "Gelu")
emit(op('onnx.Gelu %s {approximate = "tanh"} : (%s)' % (cg, ttype(g)), g),
     0.5 * gd * (1 + np.tanh(math.sqrt(2 / math.pi) * (gd + 0.044715 * gd ** 3))),
     "Gelu tanh")

# Tile and Pad.
t = np.arange(6, dtype=np.int64).reshape(2, 3)
ct = arg(t)
reps = const(np.array([2, 2], np.int64))
emit(op("onnx.Tile %s, %s : (%s, tensor<2xi64>)" % (ct, reps, ttype(t)), np.tile(t, (2, 2))),
     np.tile(t, (2, 2)), "Tile")
pads = const(np.array([1, 0, 0, 2], np.int64))
nine = const(np.array(9, np.int64))
padded = np.pad(t, ((1, 0), (0, 2)), constant_values=9)
emit(op("onnx.Pad %s, %s, %s : (%s, tensor<4xi64>, tensor<i64>)" % (ct, pads, nine, ttype(t)), padded),
     padded, "Pad constant")

# Reductions over the last axis.
r = np.array([[0.5, -1.25, 2.0], [3.0, 0.75, -0.5]], f32)
cr = arg(r)
axes = const(np.array([1], np.int64))
rd = r.astype(np.float64)
for name, value in [("ReduceMin", rd.min(1)), ("ReduceProd", rd.prod(1)),
                    ("ReduceL1", np.abs(rd).sum(1)), ("ReduceL2", np.sqrt((rd * rd).sum(1))),
                    ("ReduceLogSumExp", np.log(np.exp(rd).sum(1)))]:
    emit(op("onnx.%s %s, %s {keepdims = 0 : i64} : (%s, tensor<1xi64>)" % (name, cr, axes, ttype(r)), value),
         value, name)
bools = np.array([[False, True, False], [False, False, False]])
cbools = arg(bools)
emit(op("onnx.ReduceMax %s, %s {keepdims = 0 : i64} : (%s, tensor<1xi64>)" % (cbools, axes, ttype(bools)), bools.any(1)),
     bools.any(1), "ReduceMax of booleans: false < true")
emit(op("onnx.ReduceMin %s, %s {keepdims = 0 : i64} : (%s, tensor<1xi64>)" % (cbools, axes, ttype(bools)), bools.all(1)),
     bools.all(1), "ReduceMin of booleans")

# TopK largest=0 as a sort: ties keep the lower index first.
s = np.array([3, 1, 2, 1, 3, 0], np.int64)
cs = arg(s)
k = const(np.array([6], np.int64))
order = np.argsort(s, kind="stable")
counter[0] += 1
topk = "%%t%d" % counter[0]
lines.append("  %s:2 = onnx.TopK %s, %s {axis = -1 : i64, largest = 0 : i64, sorted = 1 : i64} : (%s, tensor<1xi64>) -> (%s, %s)"
             % (topk, cs, k, ttype(s), ttype(s), ttype(s)))
emit(topk + "#0", s[order], "TopK largest=0: values")
emit(topk + "#1", order, "TopK largest=0: indices, ties lower first")

# ScatterElements add: repeated indices accumulate.
data = np.zeros(4, f32)
idx = np.array([0, 2, 0, 3, 2, 0], np.int64)
upd = np.array([1.5, 2.25, 3.0, 4.5, 5.0, 6.25], f32)
acc = data.copy()
np.add.at(acc, idx, upd)
emit(op('onnx.ScatterElements %s, %s, %s {axis = 0 : i64, reduction = "add"} : (%s, %s, %s)'
        % (arg(data), arg(idx), arg(upd), ttype(data), ttype(idx), ttype(upd)), acc),
     acc, "ScatterElements reduction=add")

# Depthwise causal 1-D Conv (Mamba / gated DeltaNet): group = channels.
X = np.array([[[0.5, -1.0, 2.0, 0.25, 1.5], [1.0, 0.5, -0.5, 2.5, -1.5]]], f32)
W = np.array([[[0.25, -0.5, 1.0]], [[1.5, 0.75, -0.25]]], f32)
B = np.array([0.125, -0.375], f32)
Xp = np.pad(X.astype(np.float64), ((0, 0), (0, 0), (2, 0)))
Y = np.zeros((1, 2, 5))
for c in range(2):
    for l in range(5):
        Y[0, c, l] = B[c] + sum(Xp[0, c, l + j] * W[c, 0, j] for j in range(3))
emit(op("onnx.Conv %s, %s, %s {group = 2 : i64, kernel_shape = array<i64: 3>, pads = array<i64: 2, 0>} : (%s, %s, %s)"
        % (arg(X), arg(W), arg(B), ttype(X), ttype(W), ttype(B)), Y.astype(f32)),
     Y, "Conv 1-D depthwise, causal padding")

# RMSNormalization (opset 23).
scale = np.array([1.0, 0.5, 2.0], f32)
rms = rd / np.sqrt((rd * rd).mean(1, keepdims=True) + 1e-5) * scale
emit(op("onnx.RMSNormalization %s, %s {axis = -1 : i64, epsilon = 9.99999974E-6 : f32} : (%s, %s)"
        % (cr, arg(scale), ttype(r), ttype(scale)), r), rms, "RMSNormalization")

here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "..", "new-ops-run.mlir"), "w") as out:
    out.write("// Generated by Inputs/gen_new_ops_run.py; do not edit.\n")
    out.write("// RUN: moe-opt %s --moe-lower-to-llvm | mlir-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s\n//\n")
    out.write("// The ops that current exports use beyond opset 17, lowered and run;\n")
    out.write("// floats print as int64 of x * 1000 (truncated). Reference: NumPy.\n\n")
    out.write("func.func private @printMemrefI64(tensor<*xi64> {bufferization.access = \"read\"})\n\n")
    out.write("func.func @model(%s) -> (%s) {\n" % (
        ", ".join("%s: %s" % (n, ttype(v)) for n, v in args),
        ", ".join(t for _, t in results)))
    out.write("\n".join(lines))
    out.write("\n  return %s : %s\n}\n\n" % (
        ", ".join(n for n, _ in results), ", ".join(t for _, t in results)))
    out.write("func.func @main() {\n")
    for i, (n, v) in enumerate(args):
        out.write("  %%in%d = arith.constant %s : %s\n" % (i, dense(v), ttype(v)))
    out.write("  %%r:%d = call @model(%s) : (%s) -> (%s)\n" % (
        len(results), ", ".join("%%in%d" % i for i in range(len(args))),
        ", ".join(ttype(v) for _, v in args), ", ".join(t for _, t in results)))
    for i, (_, t) in enumerate(results):
        out.write("  %%p%d = tensor.cast %%r#%d : %s to tensor<*xi64>\n" % (i, i, t))
        out.write("  call @printMemrefI64(%%p%d) : (tensor<*xi64>) -> ()\n" % i)
    out.write("  return\n}\n\n")
    out.write("\n".join(checks) + "\n")
