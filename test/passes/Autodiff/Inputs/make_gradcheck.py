#!/usr/bin/python3
"""Writes the references of test/passes/Autodiff/gradcheck.test: one tiny
model per VJP rule of passes/Autodiff/OnnxRules.cpp (and per edge case of a
rule), each with its input, its target and PyTorch's autograd gradients of
its parameters under the mean squared error.

    /usr/bin/python3 test/passes/Autodiff/Inputs/make_gradcheck.py [CASE...]

Debian's interpreter: torch 1.13, onnx 1.12, numpy. Per case this writes

    <case>.onnx        the model: input `x`, one output, the parameters as
                       initializers named as torch names them (`p.w`: the
                       dot makes moe-autodiff's `params` take them)
    <case>.x.npy       the input
    <case>.target.npy  the target, of the output's shape
    <case>.grads.npz   d mse_loss(model(x), target) / d parameter, float32,
                       keyed by the initializer's name

Most models are exported by torch.onnx.export (opset 17, training mode, no
constant folding; the MoE blocks as users export them, in eval mode with
constant folding, which keeps their [in, out] weights as they are); where the exporter cannot write the case (Gemm's
transA, negative steps and indices, reductions without axes, the
statistics of LayerNormalization, GatherND, Pad's value from a tensor),
the graph is built with onnx.helper and the gradients come from the same
computation written in torch. Every case checks that the
graph holds the ops it is about and that each parameter is an initializer
of the same name. Two runs write the same bytes.
"""
import io
import os
import sys
import zipfile

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
OPSET = 17


def seeded(seed):
    return torch.Generator().manual_seed(seed)


def randn(seed, *shape):
    return torch.randn(*shape, generator=seeded(seed))


def rand(seed, *shape, low=0.0, high=1.0):
    return low + (high - low) * torch.rand(*shape, generator=seeded(seed))


class Model(torch.nn.Module):
    """The parameters live in a ParameterDict named `p`, so torch names
    them `p.<key>` and so do the ONNX initializers."""

    def __init__(self, forward, **params):
        super().__init__()
        self.p = torch.nn.ParameterDict(
            {k: torch.nn.Parameter(v.clone().float()) for k, v in params.items()})
        self.fn = forward

    def forward(self, x):
        return self.fn(self.p, x)


class Case:
    """A model, its input and the ops its graph must hold.

    `graph`, when given, builds the ONNX graph of the same computation with
    onnx.helper: (params, x, output shape) -> (nodes, extra initializers);
    otherwise torch exports the model. `target` replaces the seeded one.
    """

    def __init__(self, name, forward, x, params, ops, graph=None, target=None,
                 folded=False):
        self.name, self.x, self.ops, self.graph = name, x, ops, graph
        self.target = target
        self.folded = folded
        self.model = Model(forward, **params)


CASES = []


def case(name, x, ops, graph=None, target=None, folded=False, **params):
    def register(forward):
        CASES.append(Case(name, forward, x, params, ops, graph, target, folded))
        return forward
    return register


def node(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, **attrs)


def const(name, array):
    """A Constant node (not an initializer: not a parameter)."""
    return node("Constant", [], [name], value=numpy_helper.from_array(array, name))


# --- Elementwise, with broadcasting ------------------------------------------

@case("add_sub_broadcast", randn(1, 2, 3, 4), ["Add", "Sub"],
      a=randn(2, 3, 1), b=randn(3, 4))
def _(p, x):
    # a stretches along the last dim, b along the batch dim; Sub's
    # right-hand side gets the negated cotangent.
    return (x + p["a"]) - p["b"]


@case("mul_div_broadcast", randn(4, 2, 3, 4), ["Mul", "Div"],
      a=randn(5, 3, 1), b=rand(6, 2, 1, 4, low=0.5, high=2.0))
def _(p, x):
    return (x * p["a"]) / p["b"]


@case("pow_exponents", rand(7, 2, 3, low=0.5, high=1.5), ["Pow"],
      a=randn(8, 2, 3), b=randn(9, 3), c=rand(10, 2, 3, low=0.5, high=2.0))
def _(p, x):
    # Exponents 2 (RMSNorm's square), 3 and 0.5 (a square root).
    return torch.pow(p["a"] * x, 2) + torch.pow(p["b"] * x, 3) + \
        torch.pow(p["c"] * x, 0.5)


@case("unary", rand(11, 2, 3, low=0.5, high=1.5),
      ["Exp", "Log", "Tanh", "Sigmoid", "Erf", "Sqrt", "Reciprocal", "Neg",
       "Sin", "Cos", "Softplus", "Relu", "Abs"],
      exp=randn(12, 2, 3), log=rand(13, 2, 3, low=0.5, high=2.0),
      tanh=randn(14, 2, 3), sigmoid=randn(15, 2, 3), erf=randn(16, 2, 3),
      sqrt=rand(17, 2, 3, low=0.5, high=2.0),
      reciprocal=rand(18, 2, 3, low=0.5, high=2.0), neg=randn(19, 2, 3),
      sin=randn(20, 2, 3), cos=randn(21, 2, 3), softplus=randn(22, 2, 3),
      # Relu at exactly 0 passes no gradient (torch: threshold_backward).
      relu=torch.tensor([[0.0, -1.0, 0.5], [1.5, 0.0, -0.25]]),
      # Abs at exactly 0 passes none (torch: sgn(0) = 0).
      abs=torch.tensor([[0.0, -1.0, 0.5], [1.5, -2.0, 0.0]]))
def _(p, x):
    return (torch.exp(p["exp"] * x) + torch.log(p["log"] * x)
            + torch.tanh(p["tanh"] * x) + torch.sigmoid(p["sigmoid"] * x)
            + torch.erf(p["erf"] * x) + torch.sqrt(p["sqrt"] * x)
            + torch.reciprocal(p["reciprocal"] * x) + torch.neg(p["neg"] * x)
            + torch.sin(p["sin"] * x) + torch.cos(p["cos"] * x)
            + F.softplus(p["softplus"] * x) + torch.relu(p["relu"]) * x
            + torch.abs(p["abs"]) * x)


def trig_graph(params, x, out_shape):
    # Each parameter through its op, times x, summed; Sign and Round pass
    # no gradient (torch's is zero), Sum and Mean pass it to every operand.
    ops = ["Tan", "Atan", "Asin", "Acos", "Sinh", "Cosh", "Asinh", "Acosh",
           "Atanh", "Sign", "Round"]
    nodes = [node(op, ["p." + op.lower()], [op.lower()]) for op in ops]
    nodes.append(node("Sum", [op.lower() for op in ops[:6]], ["s0"]))
    nodes.append(node("Mean", [op.lower() for op in ops[6:]] + ["p.mean"], ["s1"]))
    nodes += [node("Add", ["s0", "s1"], ["s"]), node("Mul", ["s", "x"], ["y"])]
    return nodes, []


@case("trig_sign_round", rand(25, 2, 3, low=0.5, high=1.5),
      ["Tan", "Atan", "Asin", "Acos", "Sinh", "Cosh", "Asinh", "Acosh",
       "Atanh", "Sign", "Round", "Sum", "Mean"],
      graph=trig_graph,
      tan=rand(26, 2, 3, low=-1.0, high=1.0), atan=randn(27, 2, 3),
      asin=rand(28, 2, 3, low=-0.8, high=0.8),
      acos=rand(29, 2, 3, low=-0.8, high=0.8), sinh=randn(30, 2, 3),
      cosh=randn(31, 2, 3), asinh=randn(32, 2, 3),
      acosh=rand(33, 2, 3, low=1.2, high=3.0),
      atanh=rand(34, 2, 3, low=-0.8, high=0.8),
      sign=randn(35, 2, 3), round=randn(36, 2, 3) * 3, mean=randn(37, 2, 3))
def _(p, x):
    s0 = (torch.tan(p["tan"]) + torch.atan(p["atan"]) + torch.asin(p["asin"])
          + torch.acos(p["acos"]) + torch.sinh(p["sinh"]) + torch.cosh(p["cosh"]))
    s1 = (torch.asinh(p["asinh"]) + torch.acosh(p["acosh"]) + torch.atanh(p["atanh"])
          + torch.sign(p["sign"]) + torch.round(p["round"]) + p["mean"]) / 6
    return (s0 + s1) * x


@case("gelu", randn(23, 2, 5), ["Erf"], w=randn(24, 2, 5))
def _(p, x):
    # torch 1.13 exports the erf form as x * 0.5 * (1 + erf(x / sqrt 2)).
    return F.gelu(p["w"] * x)


@case("gelu_tanh", randn(123, 2, 5), ["Tanh"], w=randn(124, 2, 5))
def _(p, x):
    return F.gelu(p["w"] * x, approximate="tanh")


# Ties: x equals the parameter at some positions; torch.maximum and
# torch.minimum give each side half of the cotangent there.
TIES_X = torch.tensor([[0.5, -1.0, 2.0], [0.25, 0.0, -3.0]])


@case("max_min_ties", TIES_X, ["Max", "Min"],
      a=torch.tensor([0.5, 1.0, 2.0]),
      b=torch.tensor([[0.25, -1.0, 1.0], [0.25, 0.5, -3.0]]))
def _(p, x):
    # a broadcasts over x's rows: its cotangent sums the rows' shares.
    return torch.maximum(p["a"], x) + torch.minimum(x, p["b"])


@case("clip_bounds", randn(25, 2, 4), ["Clip"],
      w=torch.tensor([[-0.5, 0.5, -0.75, 0.75], [0.0, -0.5, 0.5, 0.25]]),
      v=torch.tensor([[0.0, -0.25, 0.25, 0.0], [1.0, -1.0, 0.0, 2.0]]))
def _(p, x):
    # torch.clamp passes the gradient at its bounds (inclusive): w holds
    # values exactly at -0.5 and 0.5, v at the lower bound 0 (no upper).
    return torch.clamp(p["w"], -0.5, 0.5) * x + torch.clamp(p["v"], min=0.0) * x


@case("where_broadcast", randn(26, 2, 1, 4), ["Where"],
      a=randn(27, 3, 4), b=randn(28, 4))
def _(p, x):
    # The condition [2, 1, 4] broadcasts against a [3, 4] and b [4].
    return torch.where(x > 0, p["a"], p["b"])


def dyadic(seed, shape, scale):
    """Seeded multiples of 1/scale in [-2, 2): exact in f16."""
    return torch.round(rand(seed, *shape, low=-2.0, high=2.0) * scale) / scale


@case("cast_f16", dyadic(29, (2, 4), 4), ["Cast"], w=dyadic(30, (2, 4), 8),
      target=dyadic(31, (2, 4), 8))
def _(p, x):
    # f32 -> f16 -> f32, the cotangent cast back the same way. The values
    # (multiples of 1/32 in the forward, of 1/128 in the cotangent: 8
    # elements) are exact in f16, so the case checks the rule's casts and
    # not the rounding, which moe-compile's CPU code drops: the fast-math
    # flags let arith fold extf(truncf(x)) to x.
    return (p["w"] * x).half().float()


# --- Contractions -------------------------------------------------------------

@case("matmul_broadcast", randn(31, 2, 3, 4), ["MatMul"],
      w=randn(32, 4, 5), a=randn(33, 3, 3))
def _(p, x):
    # w [4, 5] and a [3, 3] broadcast over x's batch: their cotangents sum
    # over it.
    return p["a"] @ (x @ p["w"])


@case("matmul_vector", randn(34, 3, 4), ["MatMul"], v=randn(35, 4),
      u=randn(36, 3))
def _(p, x):
    # A 1-d right operand (matrix-vector), then a 1-d left one.
    return x * (x @ p["v"]).unsqueeze(1) + p["u"] @ x


@case("gemm_linear", randn(37, 3, 4), ["Gemm"],
      weight=randn(38, 5, 4), bias=randn(39, 5))
def _(p, x):
    # nn.Linear's export: Gemm with transB=1 and a broadcast bias.
    return F.linear(x, p["weight"], p["bias"])


def gemm_graph(transA, transB, alpha, beta):
    def build(params, x, out_shape):
        nodes = [node("Gemm", ["p.a", "p.b", "p.c"], ["g"], transA=transA,
                      transB=transB, alpha=alpha, beta=beta),
                 node("Mul", ["g", "x"], ["y"])]
        return nodes, []
    return build


@case("gemm_transa_transb", randn(40, 3, 5), ["Gemm"],
      graph=gemm_graph(1, 1, 0.5, 2.0),
      a=randn(41, 4, 3), b=randn(42, 5, 4), c=randn(43, 5))
def _(p, x):
    return (0.5 * p["a"].t() @ p["b"].t() + 2.0 * p["c"]) * x


@case("gemm_transa", randn(44, 3, 5), ["Gemm"],
      graph=gemm_graph(1, 0, -1.5, 0.25),
      a=randn(45, 4, 3), b=randn(46, 4, 5), c=randn(47, 3, 1))
def _(p, x):
    return (-1.5 * p["a"].t() @ p["b"] + 0.25 * p["c"]) * x


# --- Reductions ---------------------------------------------------------------

# Rows with tied maxima and minima: amax/amin split the cotangent evenly.
TIED = torch.tensor([[1.0, 3.0, 3.0, -2.0],
                     [2.0, 2.0, 2.0, 2.0],
                     [-1.0, 0.5, -1.0, 0.5]])


@case("reduce_max_min_ties", randn(48, 3), ["ReduceMax", "ReduceMin"],
      w=TIED, v=TIED.clone(), u=TIED.clone())
def _(p, x):
    return (torch.amax(p["w"], dim=1) * x           # keepdims=0
            + torch.amin(p["v"], dim=-1, keepdim=True).squeeze(1) * x
            + torch.amax(p["u"], dim=(0, 1)) * x)       # every axis


@case("reduce_keepdims0", randn(49, 3), ["ReduceSum", "ReduceMean",
                                         "ReduceLogSumExp"],
      w=randn(50, 2, 3, 4), v=randn(51, 3, 2, 4), u=randn(52, 4, 3))
def _(p, x):
    return (p["w"].sum(dim=(0, 2)) * x
            + p["v"].mean(dim=(-1, 1)) * x
            + torch.logsumexp(p["u"], dim=0) * x)


@case("reduce_keepdims1", randn(53, 2, 1, 4), ["ReduceSum", "ReduceMean"],
      w=randn(54, 2, 3, 4), v=randn(55, 2, 5, 4))
def _(p, x):
    return p["w"].sum(dim=1, keepdim=True) * x + \
        p["v"].mean(dim=-2, keepdim=True) * x


def reduce_all_graph(params, x, out_shape):
    # No axes: every axis, at opset 17 (axes an attribute of ReduceMax,
    # ReduceMean and ReduceLogSumExp, an input of ReduceSum); ReduceSum
    # with noop_with_empty_axes=1 is the identity.
    nodes = [
        node("ReduceMax", ["p.w"], ["m"], keepdims=0),
        node("ReduceSum", ["p.v"], ["s"], keepdims=1),
        node("ReduceMean", ["p.u"], ["a"], keepdims=0),
        node("ReduceLogSumExp", ["p.t"], ["l"], keepdims=1),
        node("ReduceSum", ["p.n"], ["n"], noop_with_empty_axes=1),
        node("Add", ["m", "s"], ["ms"]),
        node("Add", ["a", "l"], ["al"]),
        node("Add", ["ms", "al"], ["sum"]),
        node("Mul", ["sum", "x"], ["sx"]),
        node("Mul", ["n", "x"], ["nx"]),
        node("Add", ["sx", "nx"], ["y"]),
    ]
    return nodes, []


@case("reduce_all_axes", randn(125, 3, 4), ["ReduceMax", "ReduceSum",
                                            "ReduceMean", "ReduceLogSumExp"],
      graph=reduce_all_graph, w=TIED, v=randn(126, 2, 3),
      u=randn(127, 2, 2, 2), t=randn(128, 5), n=randn(129, 3, 4))
def _(p, x):
    everything = (torch.amax(p["w"]) + p["v"].sum()
                  + p["u"].mean() + torch.logsumexp(p["t"], dim=0))
    return everything * x + p["n"] * x


# --- Normalisations and softmax ----------------------------------------------

@case("layernorm_axes", randn(56, 2, 3, 4), ["LayerNormalization"],
      s=rand(57, 4, low=0.5, high=1.5),
      weight=rand(58, 3, 4, low=0.5, high=1.5), bias=randn(59, 3, 4))
def _(p, x):
    # Normalised over the last two axes (axis=-2): the cotangent reaches the
    # input (through s), the scale and the bias.
    return F.layer_norm(x * p["s"], (3, 4), p["weight"], p["bias"], 1e-5)


def layernorm_stats_graph(params, x, out_shape):
    # The Mean and InvStdDev results used too (shape [2, 1]).
    nodes = [
        node("Mul", ["x", "p.s"], ["xs"]),
        node("LayerNormalization", ["xs", "p.weight"], ["n", "mean", "rstd"],
             axis=-1, epsilon=1e-3),
        node("Add", ["n", "mean"], ["nm"]),
        node("Mul", ["nm", "rstd"], ["y"]),
    ]
    return nodes, []


@case("layernorm_stats", randn(130, 2, 5), ["LayerNormalization"],
      graph=layernorm_stats_graph, s=rand(131, 5, low=0.5, high=1.5),
      weight=rand(132, 5, low=0.5, high=1.5))
def _(p, x):
    xs = x * p["s"]
    mean = xs.mean(dim=-1, keepdim=True)
    rstd = torch.rsqrt(xs.var(dim=-1, unbiased=False, keepdim=True) + 1e-3)
    n = F.layer_norm(xs, (5,), p["weight"], None, 1e-3)
    return (n + mean) * rstd


@case("softmax_axis", randn(60, 2, 3, 4), ["Softmax"], w=randn(61, 3, 1))
def _(p, x):
    return torch.softmax(x * p["w"], dim=1)


@case("log_softmax", randn(62, 2, 3, 4), ["LogSoftmax"], w=randn(63, 3, 4))
def _(p, x):
    # The importer expands LogSoftmax into its ONNX function body.
    return torch.log_softmax(x * p["w"], dim=0)


# --- Shapes -------------------------------------------------------------------

@case("shapes", randn(64, 4, 6), ["Transpose", "Reshape", "Unsqueeze",
                                  "Squeeze", "Flatten"],
      w=randn(65, 2, 3, 4), v=randn(66, 4, 1, 6), u=randn(67, 4, 2, 3))
def _(p, x):
    return (p["w"].permute(2, 0, 1).reshape(4, 6) * x
            + p["v"].squeeze(1) * x
            + torch.flatten(p["u"], 1).unsqueeze(0).squeeze(0) * x)


@case("expand_tile", randn(68, 2, 3, 4), ["Expand", "Tile"],
      w=randn(69, 3, 1), v=randn(70, 4), u=randn(71, 1, 3, 2))
def _(p, x):
    return (p["w"].expand(2, 3, 4) * x + p["v"].expand(2, 3, 4) * x
            + p["u"].repeat(2, 1, 2) * x)


@case("concat_negative_axis", randn(72, 2, 3), ["Concat"],
      a=randn(73, 2, 2), b=randn(74, 2, 4))
def _(p, x):
    return torch.cat([p["a"], x, p["b"]], dim=-1)


@case("split_outputs", randn(75, 3, 2), ["Split"], w=randn(76, 3, 8))
def _(p, x):
    # Four outputs, three used (one twice), one unused: its cotangent is 0.
    a, b, c, d = torch.split(p["w"], 2, dim=1)
    return a * b * x + d * x + d


def slice_graph(params, x, out_shape):
    # Rows 1:6:2; columns from the last backwards by 2 ([4, 2, 0]);
    # then a step-1 slice on a negative axis.
    nodes = [
        const("s0", np.array([1, -1], np.int64)),
        const("e0", np.array([6, -100], np.int64)),
        const("a0", np.array([0, 1], np.int64)),
        const("t0", np.array([2, -2], np.int64)),
        node("Slice", ["p.w", "s0", "e0", "a0", "t0"], ["ws"]),
        const("s1", np.array([1], np.int64)),
        const("e1", np.array([-1], np.int64)),
        const("a1", np.array([-1], np.int64)),
        node("Slice", ["p.v", "s1", "e1", "a1"], ["vs"]),
        node("Add", ["ws", "vs"], ["sum"]),
        node("Mul", ["sum", "x"], ["y"]),
    ]
    return nodes, []


@case("slice_strided", randn(77, 3, 3), ["Slice"], graph=slice_graph,
      w=randn(78, 6, 5), v=randn(79, 3, 5))
def _(p, x):
    return (p["w"][1:6:2][:, [4, 2, 0]] + p["v"][:, 1:-1]) * x


@case("flip", randn(80, 3, 4), ["Slice"], w=randn(81, 3, 4))
def _(p, x):
    # torch.flip exports as Slice with step -1 from the end.
    return torch.flip(p["w"], dims=[0, 1]) * x


def pad_graph(params, x, out_shape):
    # Rows: 1 before, 2 after; columns: 3 after. The second Pad's value is
    # the mean of a parameter: its cotangent is the padding's.
    nodes = [
        const("pads", np.array([1, 0, 2, 3], np.int64)),
        const("half", np.array(0.5, np.float32)),
        node("Pad", ["p.w", "pads", "half"], ["pw"], mode="constant"),
        node("ReduceMean", ["p.c"], ["value"], keepdims=0),
        node("Pad", ["p.v", "pads", "value"], ["pv"], mode="constant"),
        node("Add", ["pw", "pv"], ["padded"]),
        node("Mul", ["padded", "x"], ["y"]),
    ]
    return nodes, []


@case("pad", randn(133, 5, 7), ["Pad"], graph=pad_graph, w=randn(134, 2, 4),
      v=randn(149, 2, 4), c=randn(150, 2))
def _(p, x):
    inside = F.pad(torch.ones(2, 4), (0, 3, 1, 2))
    return (F.pad(p["w"], (0, 3, 1, 2), value=0.5)
            + F.pad(p["v"], (0, 3, 1, 2)) + (1 - inside) * p["c"].mean()) * x


def cumsum_graph(params, x, out_shape):
    nodes = [
        const("axis1", np.array(1, np.int64)),
        node("CumSum", ["p.a", "axis1"], ["c0"]),
        const("axis0", np.array(-2, np.int64)),
        node("CumSum", ["p.b", "axis0"], ["c1"], exclusive=1, reverse=1),
        node("Add", ["c0", "c1"], ["c"]),
        node("Mul", ["c", "x"], ["y"]),
    ]
    return nodes, []


@case("cumsum", randn(135, 3, 4), ["CumSum"], graph=cumsum_graph,
      a=randn(136, 3, 4), b=randn(137, 3, 4))
def _(p, x):
    # b: exclusive and reversed along the rows, sum_{j > i} b_j.
    b = torch.flip(p["b"], dims=[0])
    after = torch.flip(b.cumsum(dim=0) - b, dims=[0])
    return (p["a"].cumsum(dim=1) + after) * x


@case("trilu", randn(138, 2, 3, 4), ["Trilu"], w=randn(139, 3, 4),
      v=randn(140, 2, 3, 4))
def _(p, x):
    return torch.triu(p["w"], diagonal=1) * x + torch.tril(p["v"], -1) * x


# --- Indexing -----------------------------------------------------------------

GATHER_IDX = np.array([[0, -1], [2, -5], [-1, 1]], np.int64)


def gather_graph(params, x, out_shape):
    # Gather on axis 0 with the input's (negative, repeated) indices and on
    # axis 1 with constant ones.
    nodes = [
        node("Gather", ["p.table", "x"], ["rows"], axis=0),
        const("cols", np.array([-1, 0, -1], np.int64)),
        node("Gather", ["p.w", "cols"], ["picked"], axis=1),
        # A scalar index drops the axis: s[:, -2] is [3].
        const("col", np.array(-2, np.int64)),
        node("Gather", ["p.s", "col"], ["column"], axis=1),
        node("Add", ["rows", "picked"], ["sum"]),
        node("Add", ["sum", "column"], ["y"]),
    ]
    return nodes, []


@case("gather_negative", torch.tensor(GATHER_IDX), ["Gather"],
      graph=gather_graph, table=randn(82, 5, 3), w=randn(83, 2, 4),
      s=randn(141, 3, 4))
def _(p, x):
    return p["table"][x] + p["w"][:, [-1, 0, -1]] + p["s"][:, -2]


GATHER_ELEMENTS_IDX = np.array([[2, -1, 0, -3], [1, 1, -2, 2]], np.int64)


def gather_elements_graph(params, x, out_shape):
    nodes = [
        const("idx", GATHER_ELEMENTS_IDX),
        node("GatherElements", ["p.w", "idx"], ["g0"], axis=0),
        const("idx1", np.array([[0, 0, 3], [-1, 2, 1]], np.int64)),
        node("GatherElements", ["p.v", "idx1"], ["g1"], axis=-1),
        node("Mul", ["g0", "x"], ["m0"]),
        const("zero", np.array([0], np.int64)),
        const("three", np.array([3], np.int64)),
        const("one", np.array([1], np.int64)),
        node("Slice", ["m0", "zero", "three", "one"], ["m0s"]),
        node("Add", ["m0s", "g1"], ["y"]),
    ]
    return nodes, []


@case("gather_elements", randn(84, 2, 4), ["GatherElements"],
      graph=gather_elements_graph, w=randn(85, 3, 4), v=randn(86, 2, 4))
def _(p, x):
    # Repeated and negative indices (torch.gather takes them modulo here).
    g0 = torch.gather(p["w"], 0, torch.tensor(GATHER_ELEMENTS_IDX) % 3)
    g1 = torch.gather(p["v"], 1, torch.tensor([[0, 0, 3], [3, 2, 1]]))
    return (g0 * x)[:, :3] + g1


def scatter_nd_graph(params, x, out_shape):
    nodes = [
        const("rows", np.array([[2], [0]], np.int64)),
        node("ScatterND", ["p.d", "rows", "p.u"], ["s0"]),
        const("cells", np.array([[1, 3], [0, 0], [1, 3]], np.int64)),
        node("ScatterND", ["p.e", "cells", "p.v"], ["s1"], reduction="add"),
        node("Add", ["s0", "s1"], ["s"]),
        node("Mul", ["s", "x"], ["y"]),
    ]
    return nodes, []


@case("scatter_nd", randn(87, 3, 4), ["ScatterND"], graph=scatter_nd_graph,
      d=randn(88, 3, 4), u=randn(89, 2, 4), e=randn(90, 3, 4),
      v=randn(91, 3))
def _(p, x):
    # Rows 2 and 0 of d overwritten by u; v added into e at (1, 3) twice
    # and (0, 0).
    s0 = p["d"].index_put((torch.tensor([2, 0]),), p["u"])
    s1 = p["e"].index_put((torch.tensor([1, 0, 1]), torch.tensor([3, 0, 3])),
                          p["v"], accumulate=True)
    return (s0 + s1) * x


@case("index_put", randn(92, 4, 3), ["ScatterND"], w=randn(93, 4, 3),
      u=randn(94, 2, 3))
def _(p, x):
    # The exporter's form of `y[idx] = u`.
    y = p["w"] * x
    y = y.index_put((torch.tensor([3, 1]),), p["u"])
    return y


def gather_nd_graph(params, x, out_shape):
    nodes = [
        const("idx", np.array([[0, -1], [2, 1], [0, 3]], np.int64)),
        node("GatherND", ["p.w", "idx"], ["g"]),
        node("Mul", ["g", "x"], ["y"]),
    ]
    return nodes, []


@case("gather_nd", randn(142, 3, 2), ["GatherND"], graph=gather_nd_graph,
      w=randn(143, 3, 4, 2))
def _(p, x):
    # (0, -1) and (0, 3) are the same pair: its cotangents add up.
    return p["w"][torch.tensor([0, 2, 0]), torch.tensor([-1, 1, 3])] * x


def scatter_elements_graph(params, x, out_shape):
    nodes = [
        const("cols", np.array([[1, -1], [0, 2], [3, -4]], np.int64)),
        node("ScatterElements", ["p.d", "cols", "p.u"], ["s0"], axis=1),
        const("rows", np.array([[2, 0, 2, 1]], np.int64)),
        node("ScatterElements", ["p.e", "rows", "p.v"], ["s1"], axis=0,
             reduction="add"),
        node("Add", ["s0", "s1"], ["s"]),
        node("Mul", ["s", "x"], ["y"]),
    ]
    return nodes, []


@case("scatter_elements", randn(144, 3, 4), ["ScatterElements"],
      graph=scatter_elements_graph, d=randn(145, 3, 4), u=randn(146, 3, 2),
      e=randn(147, 3, 4), v=randn(148, 1, 4))
def _(p, x):
    # Negative columns count from the end; the rows of `add` may repeat.
    s0 = p["d"].scatter(1, torch.tensor([[1, 3], [0, 2], [3, 0]]), p["u"])
    s1 = p["e"].scatter_add(0, torch.tensor([[2, 0, 2, 1]]), p["v"])
    return (s0 + s1) * x


@case("topk_values", randn(95, 3, 5), ["TopK"], w=randn(96, 3, 5),
      v=randn(97, 4, 3))
def _(p, x):
    largest = torch.topk(p["w"] * x, 2, dim=1).values
    smallest = torch.topk(p["v"], 2, dim=0, largest=False).values
    return largest * smallest.t()


# --- An MoE block whose activation no kind names -------------------------------
#
# transformers' MixtralSparseMoeBlock loop (test/corpus/models.py) with one
# Linear per expert, raised to moe.layer with a custom activation: the
# experts' VJP differentiates the activation's body in forward mode.

MOE_E, MOE_H, MOE_F, MOE_K = 3, 6, 5, 2


def moe_params(seed, gated):
    params = {"gate": randn(seed, MOE_H, MOE_E)}
    for e in range(MOE_E):
        # [in, out]: x @ W exports as a MatMul on the initializer itself.
        params["w1_%d" % e] = 0.5 * randn(seed + 1 + 3 * e, MOE_H, MOE_F)
        params["w2_%d" % e] = 0.5 * randn(seed + 2 + 3 * e, MOE_F, MOE_H)
        if gated:
            params["w3_%d" % e] = 0.5 * randn(seed + 3 + 3 * e, MOE_H, MOE_F)
    return params


def moe_block(p, x, act, gated):
    weights = F.softmax(x @ p["gate"], dim=1, dtype=torch.float)
    weights, selected = torch.topk(weights, MOE_K, dim=-1)
    weights = weights / weights.sum(dim=-1, keepdim=True)
    out = torch.zeros_like(x)
    mask = F.one_hot(selected, num_classes=MOE_E).permute(2, 1, 0)
    for e in range(MOE_E):
        idx, top_x = torch.where(mask[e])
        rows = x[None, top_x].reshape(-1, MOE_H)
        h = act(rows @ p["w1_%d" % e])
        if gated:
            h = h * (rows @ p["w3_%d" % e])
        y = (h @ p["w2_%d" % e]) * weights[top_x, idx, None]
        out = out.index_add(0, top_x, y)
    return out


@case("moe_relu2", randn(150, 8, MOE_H), ["TopK", "NonZero", "Relu", "Pow"],
      folded=True, **moe_params(151, gated=False))
def _(p, x):
    # Nemotron-H's experts: relu(x W1^T)^2 W2^T.
    return moe_block(p, x, lambda h: torch.relu(h) ** 2, gated=False)


@case("moe_relu2_unfolded", randn(150, 8, MOE_H),
      ["TopK", "NonZero", "Relu", "Pow"], **moe_params(151, gated=False))
def _(p, x):
    # The same block exported without constant folding (training mode): k
    # and the shapes are computed from constants.
    return moe_block(p, x, lambda h: torch.relu(h) ** 2, gated=False)


@case("moe_gated_mish", randn(160, 8, MOE_H),
      ["TopK", "NonZero", "Softplus", "Tanh"], folded=True,
      **moe_params(161, gated=True))
def _(p, x):
    # A gated FFN with mish (x tanh(softplus(x))), which no kind names.
    return moe_block(p, x, lambda h: h * torch.tanh(F.softplus(h)), gated=True)


@case("einsum_contractions", randn(170, 4, 3), ["Einsum"], folded=True,
      a=randn(171, 4), m=randn(172, 4, 3), l=randn(173, 4, 5),
      w=randn(174, 3, 5, 2), v=randn(175, 3, 5))
def _(p, x):
    # GShard's einsums: a per-token scale, an outer product, a contraction
    # of two letters, a reduction of a product; and a letter (c) that only
    # one operand has, summed out of it alone.
    g = torch.einsum("s,se->se", p["a"], x * p["m"])
    h = torch.einsum("se,sc->sec", g, p["l"])
    y = torch.einsum("sec,ecm->sm", h, p["w"])
    r = torch.einsum("se,se->s", g, x) + torch.einsum("se,ec->s", x, p["v"])
    # The exporter infers no shape for an Einsum: a Reshape gives it.
    return (y + r[:, None]).reshape(4, 2)


@torch.jit.script
def gshard_capacity(gates: torch.Tensor, min_capacity: int) -> torch.Tensor:
    capacity = torch.ceil(torch.tensor(gates.shape[0] / gates.shape[1])).to(torch.int64)
    if capacity < min_capacity:
        capacity = torch.tensor(min_capacity, dtype=torch.int64)
    return capacity


@case("moe_gshard_top2", randn(180, 16, MOE_H), ["If", "ArgMax", "CumSum", "Einsum"],
      folded=True, wg=randn(181, MOE_H, MOE_E), wi=0.5 * randn(182, MOE_E, MOE_F, MOE_H),
      wo=0.5 * randn(183, MOE_E, MOE_H, MOE_F))
def _(p, x):
    # GShard's top-2 with capacity ceil(16 / 3) = 6 (at least 4) as
    # DeepSpeed's top2gating writes it
    # (test/corpus/models.py GShardTop2MoE): the gates of the kept choices
    # renormalised after the drops, so the router's gradient runs through
    # the program's own routing ops.
    logits = x @ p["wg"]
    gates = F.softmax(logits, dim=1)
    capacity = gshard_capacity(gates, 4)
    mask1 = F.one_hot(torch.argmax(gates, dim=1), num_classes=MOE_E)
    second = torch.argmax(logits.masked_fill(mask1.bool(), float("-inf")), dim=1)
    mask2 = F.one_hot(second, num_classes=MOE_E)
    locations1 = torch.cumsum(mask1, dim=0) - 1
    locations2 = torch.cumsum(mask2, dim=0) - 1 + torch.sum(mask1, dim=0, keepdim=True)
    mask1 = mask1 * torch.lt(locations1, capacity)
    mask2 = mask2 * torch.lt(locations2, capacity)
    slots1 = F.one_hot(torch.sum(locations1 * mask1, dim=1), num_classes=int(capacity)).float()
    slots2 = F.one_hot(torch.sum(locations2 * mask2, dim=1), num_classes=int(capacity)).float()
    gates1 = torch.einsum("se,se->s", gates, mask1.float())
    gates2 = torch.einsum("se,se->s", gates, mask2.float())
    denom = torch.clamp(gates1 + gates2, min=torch.finfo(gates.dtype).eps)
    combine = (torch.einsum("se,sc->sec", torch.einsum("s,se->se", gates1 / denom, mask1.float()), slots1)
               + torch.einsum("se,sc->sec", torch.einsum("s,se->se", gates2 / denom, mask2.float()), slots2))
    dispatched = torch.einsum("sec,sm->ecm", combine.bool().type_as(x), x)
    h = torch.relu(torch.einsum("ecm,efm->ecf", dispatched, p["wi"]))
    y = torch.einsum("sec,ecm->sm", combine, torch.einsum("ecf,emf->ecm", h, p["wo"]))
    return y.reshape(16, MOE_H)


# --- Writing ------------------------------------------------------------------

def save_npz(path, arrays):
    """np.savez with fixed timestamps, so that two runs give one file."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for key in sorted(arrays):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(arrays[key]),
                                      allow_pickle=False)
            info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, buf.getvalue())


def np_type(array):
    return {np.dtype(np.float32): TensorProto.FLOAT,
            np.dtype(np.int64): TensorProto.INT64}[array.dtype]


def export(c, x, y):
    model = c.model
    if c.graph is None:
        buf = io.BytesIO()
        torch.onnx.export(model, (x,), buf, input_names=["x"],
                          output_names=["y"], opset_version=OPSET,
                          do_constant_folding=c.folded,
                          training=torch.onnx.TrainingMode.EVAL if c.folded
                          else torch.onnx.TrainingMode.TRAINING)
        return onnx.load_from_string(buf.getvalue())
    params = {name: p.detach().numpy() for name, p in model.named_parameters()}
    nodes, extra = c.graph(params, x, tuple(y.shape))
    xa = x.numpy()
    graph = helper.make_graph(
        nodes, c.name,
        [helper.make_tensor_value_info("x", np_type(xa), list(xa.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y.shape))],
        initializer=[numpy_helper.from_array(v, k) for k, v in params.items()]
        + extra)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                          producer_name="make_gradcheck.py")
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def write(c):
    torch.manual_seed(0)
    x = c.x
    y = c.model(x)
    target = c.target if c.target is not None else \
        randn(1000 + len(c.name), *y.shape)
    loss = F.mse_loss(y, target, reduction="mean")
    grads = torch.autograd.grad(loss, list(c.model.parameters()),
                                allow_unused=True)
    named = {}
    for (name, _), g in zip(c.model.named_parameters(), grads):
        # A parameter the loss does not reach gets no gradient.
        if g is not None:
            named[name] = g.detach().numpy().astype(np.float32)

    m = export(c, x, y)
    initializers = {t.name for t in m.graph.initializer}
    for name, p in c.model.named_parameters():
        assert "." in name, name
        assert p.numel() >= 2, f"{c.name}: {name} has fewer than 2 elements"
        assert name in initializers, \
            f"{c.name}: parameter {name} is not an initializer ({initializers})"
    ops = {n.op_type for n in m.graph.node}
    for op in c.ops:
        assert op in ops, f"{c.name}: no {op} in the graph ({sorted(ops)})"
    assert [o.name for o in m.graph.output] == ["y"], c.name
    # The graph's output has the shape of torch's.
    out = m.graph.output[0].type.tensor_type.shape.dim
    assert [d.dim_value for d in out] == list(y.shape), (c.name, out)

    base = os.path.join(HERE, c.name)
    onnx.save(m, base + ".onnx")
    np.save(base + ".x.npy", x.numpy())
    np.save(base + ".target.npy", target.numpy().astype(np.float32))
    save_npz(base + ".grads.npz", named)
    print(c.name, sorted(named), sorted(ops))


def main():
    wanted = set(sys.argv[1:])
    names = [c.name for c in CASES]
    assert len(names) == len(set(names)), names
    unknown = wanted - set(names)
    if unknown:
        sys.exit(f"unknown cases: {sorted(unknown)}; known: {names}")
    for c in CASES:
        if not wanted or c.name in wanted:
            write(c)


if __name__ == "__main__":
    main()
