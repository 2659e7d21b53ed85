#!/usr/bin/env python3
"""Generates the numeric end-to-end tests in this directory.

Every test is a `func.func @main()` that builds its inputs as
`arith.constant dense<...>`, runs moe ops through `moe-opt
--moe-lower-to-llvm` and `mlir-runner`, and prints the results. The expected
numbers in the CHECK lines come from an independent NumPy reference of the op
semantics in dialects/moe/IR/MoEOps.td and MoEBase.td, computed in float64
(moe_reference.py).

Float results are never printed as floats: the test IR quantizes them,
q = roundeven(x * S) as i32 with S a power of ten given per result, and the
CHECK lines hold the exact integers (mlir_text.py writes the IR and CHECK
lines). Inputs are drawn (fixed seeds; rows are redrawn where a check fails)
so that
  * no reference value x * S lies within MARGIN of a .5 rounding boundary,
  * the same reference run in float32 lands within F32_TOL of it,
  * no selection (top-k, groups, capacity, sparse-mixer thresholds) is a near
    tie: exact ties come only from equal inputs, and go to the lower index.
So float32 noise in the lowering cannot flip a printed digit.

The onnx_*.mlir tests of convert-onnx-to-linalg follow the same rules; they
are built in onnx_tests.py (NumPy's own implementations of the ONNX ops are
their reference).

Usage:
  /usr/bin/python3 gen_tests.py           # (re)write every test file
  /usr/bin/python3 gen_tests.py --check   # exit 1 if a file would change
Only NumPy and the standard library are used; the output is deterministic.
"""

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from mlir_text import (TestFile, bad_quant, bad_rows, emit_weights,  # noqa: E402
                       experts_call, layer_call, shared_call, tensor_type)
from moe_reference import (Act, NearTie, aux_loss, combine,  # noqa: E402
                           dispatch, experts, layer_ref, route_row,
                           router_expert_choice, router_rows,
                           router_sinkhorn, shared_expert, sigmoid, softmax,
                           z_loss)
from onnx_tests import onnx_tests  # noqa: E402


class Reject(Exception):
    """The drawn inputs violate a robustness condition; draw again."""


# What makes a draw fail: the reference's near ties and the tests' own checks.
REJECTED = (Reject, NearTie)


# ===----------------------------------------------------------------------===
# Input drawing
# ===----------------------------------------------------------------------===

def grid(rng, shape, lo, hi, decimals=2):
    """Values on a decimal grid (exactly printable), as float64."""
    scale = 10 ** decimals
    ints = rng.integers(int(round(lo * scale)), int(round(hi * scale)) + 1,
                        size=shape)
    return np.round(ints / scale, decimals)


def f32(a):
    """What the test sees: the float32 value of a constant, as float64."""
    return np.asarray(a, dtype=np.float32).astype(np.float64)


def both(fn):
    """fn(dt) evaluated in float64 and float32."""
    return fn(np.float64), fn(np.float32)


def distinct_ids(rng, T, k, E, p=None):
    """ids [T, k]: k distinct experts per token, drawn with probabilities p."""
    ids = np.zeros((T, k), np.int64)
    for t in range(T):
        ids[t] = rng.choice(E, size=k, replace=False, p=p)
    return ids


def draw_weights(rng, spec):
    """spec: {name: (shape, lo, hi)} -> grid weights."""
    return {k: grid(rng, s, lo, hi) for k, (s, lo, hi) in spec.items()}


def resample(rng, draw, evaluate, n, rounds=500):
    """Draw per-row inputs; redraw the rows that `evaluate` flags.

    draw(rng, idx) -> dict of arrays with leading dim len(idx);
    evaluate(inputs) -> bool array [n] of rows to redraw (or raises Reject
    or NearTie for a whole-input problem)."""
    inputs = draw(rng, np.arange(n))
    for _ in range(rounds):
        bad = evaluate(inputs)
        if not bad.any():
            return inputs
        idx = np.nonzero(bad)[0]
        new = draw(rng, idx)
        for key, v in new.items():
            inputs[key][idx] = v
    raise RuntimeError("resampling did not converge")


def retry(fn, seed, tries=2000):
    """Run fn(rng) with seeds seed, seed+1, ... until it is not rejected."""
    for i in range(tries):
        try:
            return fn(np.random.default_rng(seed + i))
        except REJECTED:
            continue
    raise RuntimeError(f"no seed from {seed} worked")


def row_guard(fn):
    """Per-row evaluation: a Reject or NearTie in row t marks row t bad."""
    def wrapped(T):
        bad = np.zeros(T, bool)
        for t in range(T):
            try:
                fn(t)
            except REJECTED:
                bad[t] = True
        return bad
    return wrapped


# ===----------------------------------------------------------------------===
# Tests
# ===----------------------------------------------------------------------===

def test_router_topk():
    T, E = 8, 6
    bias_rng = np.random.default_rng(101)
    bias = grid(bias_rng, (E,), -0.3, 0.3)

    def draw(rng, idx):
        l = grid(rng, (len(idx), E), -2.0, 2.0)
        for r, t in enumerate(idx):
            if t == 1:
                # experts 1, 2, 4 tie above the rest: top-2 picks 1 and 2
                l[r, [1, 2, 4]] = round(l[r].max() + 0.3, 2)
            if t == 4:
                # experts 0 and 3 tie for first place
                l[r, [0, 3]] = round(l[r].max() + 0.5, 2)
        return {"l": l}

    variants = [
        dict(k=2, scoring="softmax", selection="topk"),
        dict(k=2, scoring="softmax", selection="topk", normalize=True,
             scaling_factor=2.5),
        dict(k=3, scoring="sigmoid", selection="topk", bias=f32(bias),
             normalize=True),
        dict(k=1, scoring="sigmoid", selection="topk", scaling_factor=2.0),
    ]
    scales = [1e4, 1e3, 1e4, 1e4]

    def evaluate(inp):
        l = f32(inp["l"])
        bad = np.zeros(T, bool)
        for v, S in zip(variants, scales):
            def row(t):
                i64, w64 = route_row(l[t], dt=np.float64, **v)
                i32, w32 = route_row(l[t], dt=np.float32, **v)
                if list(i64) != list(i32) or bad_quant(w64, w32, S).any():
                    raise Reject("row")
            bad |= row_guard(row)(T)
        return bad

    inp = resample(np.random.default_rng(100), draw, evaluate, T)
    l = f32(inp["l"])
    f = TestFile("router_topk.mlir", """
moe.router topk: softmax and sigmoid scores, the selection bias (it steers
the choice, the weights stay unbiased), normalize (divide by sum + 1e-20)
and scaling_factor. Ties go to the lower expert: row 1 has logits tied at
experts 1, 2, 4 (top-2 picks 1, 2) and row 4 a tie for first place at
experts 0 and 3. Ids are listed best first.""")
    f.const_f32("logits", inp["l"])
    f.const_f32("bias", bias)
    lt = tensor_type((T, E), "f32")
    heads = [
        ("softmax topk %logits", "softmax top-2"),
        ("softmax topk %logits {normalize, scaling_factor = 2.5}",
         "softmax top-2, normalize, scaling 2.5"),
        ("sigmoid topk %logits bias(%bias) {normalize}",
         "sigmoid top-3 with bias, normalize"),
        ("sigmoid topk %logits {scaling_factor = 2.0}", "sigmoid top-1, scaling 2"),
    ]
    for n, ((text, what), v, S) in enumerate(zip(heads, variants, scales)):
        k = v["k"]
        ty = lt + (", " + tensor_type((E,), "f32") if "bias" in v else "")
        f.line()
        f.line(f"%ids{n}, %w{n} = moe.router {text}")
        f.line(f"    : {ty} -> {tensor_type((T, k), 'i32')}, {tensor_type((T, k), 'f32')}")
        i64, w64 = router_rows(l, dt=np.float64, **v)
        _, w32 = router_rows(l, dt=np.float32, **v)
        f.print_int(f"ids{n}", (T, k), "i32", i64, f"ids, {what}")
        f.print_quant(f"w{n}", (T, k), w64, w32, S, f"weights, {what}")
    return f


def test_router_grouped():
    def build(rng):
        # DeepSeek-V3 style: sigmoid, bias, 4 groups of 4, keep 2 by top2_sum,
        # top-4, normalize, scaling 2.5. The bias is mostly negative so that
        # some picks have a negative biased score: masking dropped groups
        # with 0 (instead of -inf) would pick from them.
        T, E, G, GT, k = 8, 16, 4, 2, 4
        bias = grid(rng, (E,), -0.9, 0.2)
        v3 = dict(k=k, scoring="sigmoid", selection="grouped_topk",
                  bias=f32(bias), normalize=True, scaling_factor=2.5,
                  num_groups=G, group_topk=GT, group_score="top2_sum")
        # DeepSeek-V2 style: softmax, 4 groups of 2, keep 2 by max, top-3,
        # no normalization, scaling 2.
        E2 = 8
        v2 = dict(k=3, scoring="softmax", selection="grouped_topk",
                  scaling_factor=2.0, num_groups=4, group_topk=2,
                  group_score="max")

        def draw(r, idx):
            return {"l3": grid(r, (len(idx), E), -3.0, 3.0),
                    "l2": grid(r, (len(idx), E2), -2.0, 2.0)}

        def evaluate(inp):
            bad = np.zeros(T, bool)
            for key, v, S in (("l3", v3, 1e4), ("l2", v2, 1e4)):
                l = f32(inp[key])

                def row(t):
                    i64, w64 = route_row(l[t], dt=np.float64, **v)
                    i32, w32 = route_row(l[t], dt=np.float32, **v)
                    if list(i64) != list(i32) or bad_quant(w64, w32, S).any():
                        raise Reject("row")
                bad |= row_guard(row)(T)
            return bad

        inp = resample(rng, draw, evaluate, T)
        l3, l2 = f32(inp["l3"]), f32(inp["l2"])
        ids3, _ = router_rows(l3, dt=np.float64, **v3)
        sel3 = sigmoid(l3, np.float64) + f32(bias)
        # Require: some pick with a negative biased score while a dropped
        # group holds an expert (a 0-masked one would win).
        neg = any(sel3[t, e] < 0 for t in range(T) for e in ids3[t])
        # and the group limit must matter: plain top-k differs somewhere
        plain = router_rows(l3, dt=np.float64, k=k, scoring="sigmoid",
                            selection="topk", bias=f32(bias))[0]
        ids2, _ = router_rows(l2, dt=np.float64, **v2)
        plain2 = router_rows(l2, dt=np.float64, k=3, scoring="softmax",
                             selection="topk")[0]
        if not neg or (plain == ids3).all() or (plain2 == ids2).all():
            raise Reject("not interesting")
        return inp, bias, v3, v2

    inp, bias, v3, v2 = retry(build, 200)
    T = 8
    f = TestFile("router_grouped_topk.mlir", """
moe.router grouped_topk.
DeepSeek-V3: sigmoid scores, selection bias, 16 experts in 4 groups scored
by the sum of their two best biased scores, the best 2 groups kept, top-4 of
the biased scores inside them, weights = unbiased sigmoid, normalized, x 2.5.
The bias is mostly negative: some picks have a negative biased score, so an
implementation that masks dropped groups with 0 instead of excluding them
would choose experts of dropped groups.
DeepSeek-V2: softmax, 8 experts in 4 groups scored by their max, 2 kept,
top-3, not normalized, x 2.""")
    f.const_f32("logits3", inp["l3"])
    f.const_f32("bias", bias)
    f.const_f32("logits2", inp["l2"])
    f.line()
    f.line("%ids3, %w3 = moe.router sigmoid grouped_topk %logits3 bias(%bias) "
           "groups 4 top 2 by top2_sum {normalize, scaling_factor = 2.5}")
    f.line("    : tensor<8x16xf32>, tensor<16xf32> -> tensor<8x4xi32>, tensor<8x4xf32>")
    i64, w64 = router_rows(f32(inp["l3"]), dt=np.float64, **v3)
    _, w32 = router_rows(f32(inp["l3"]), dt=np.float32, **v3)
    f.print_int("ids3", (T, 4), "i32", i64, "ids, DeepSeek-V3 style")
    f.print_quant("w3", (T, 4), w64, w32, 1e4, "weights, DeepSeek-V3 style")
    f.line()
    # Hugging Face's DeepSeek-V3 masks dropped groups with 0.0: on these
    # logits that picks experts of dropped groups.
    hf = dict(v3, masked_score=0.0)
    f.line("%ids3h, %w3h = moe.router sigmoid grouped_topk %logits3 bias(%bias) "
           "groups 4 top 2 by top2_sum masked = 0.0 "
           "{normalize, scaling_factor = 2.5}")
    f.line("    : tensor<8x16xf32>, tensor<16xf32> -> tensor<8x4xi32>, tensor<8x4xf32>")
    h64, hw64 = router_rows(f32(inp["l3"]), dt=np.float64, **hf)
    _, hw32 = router_rows(f32(inp["l3"]), dt=np.float32, **hf)
    assert (h64 != i64).any(), "masking with 0.0 must change a pick here"
    f.print_int("ids3h", (T, 4), "i32", h64, "ids, Hugging Face DeepSeek-V3")
    f.print_quant("w3h", (T, 4), hw64, hw32, 1e4,
                  "weights, Hugging Face DeepSeek-V3")
    f.line()
    f.line("%ids2, %w2 = moe.router softmax grouped_topk %logits2 "
           "groups 4 top 2 by max {scaling_factor = 2.0}")
    f.line("    : tensor<8x8xf32> -> tensor<8x3xi32>, tensor<8x3xf32>")
    i64, w64 = router_rows(f32(inp["l2"]), dt=np.float64, **v2)
    _, w32 = router_rows(f32(inp["l2"]), dt=np.float32, **v2)
    f.print_int("ids2", (T, 3), "i32", i64, "ids, DeepSeek-V2 style")
    f.print_quant("w2", (T, 3), w64, w32, 1e4, "weights, DeepSeek-V2 style")
    return f


def test_router_sinkhorn():
    T, E = 8, 4

    def build(rng):
        # Columns with different popularity, so that balancing changes picks.
        l = grid(rng, (T, E), -1.5, 1.5) + np.array([1.2, 0.4, 0.0, -0.6])
        l = np.round(l, 2)
        lf = f32(l)
        out = {}
        for name, k, scoring, maxit in (("a", 2, "softmax", 10000),
                                        ("b", 1, "sigmoid", 10000),
                                        ("c", 2, "softmax", 1)):
            i64, w64, rounds = router_sinkhorn(lf, k, scoring, np.float64,
                                               max_iterations=maxit)
            i32, w32, _ = router_sinkhorn(lf, k, scoring, np.float32,
                                          max_iterations=maxit)
            if maxit > 1:
                # the choice must not depend on stopping a round earlier or later
                for extra in (rounds - 1, rounds + 1):
                    ie, _, _ = router_sinkhorn(lf, k, scoring, np.float64,
                                               tol=0.0, max_iterations=extra)
                    if (ie != i64).any():
                        raise Reject("sinkhorn unstable")
            if (i64 != i32).any() or bad_quant(w64, w32, 1e4).any():
                raise Reject("noise")
            plain = np.argsort(-lf, axis=1, kind="stable")[:, :k]
            if (plain == i64).all():
                raise Reject("sinkhorn changes nothing")
            out[name] = (i64, w64, w32, k, rounds)
        if (out["a"][0] == out["c"][0]).all():
            raise Reject("iteration cap changes nothing")
        return l, out

    l, out = retry(build, 300)
    f = TestFile("router_sinkhorn.mlir", f"""
moe.router sinkhorn: Megatron's sinkhorn on exp(logits) (row scaling d0,
column scaling d1, eps 1e-8, until mean|d1_old - d1| <= tolerance 1e-4),
top-k of d1 * cost * d0; the weights are the scores (softmax or sigmoid) of
the chosen experts. The logits favour expert 0, so balancing moves tokens
away from it (plain top-k would choose differently). The reference
converges in {out['a'][4]} rounds; the choice is the same one round earlier
or later. The last router stops after one round (sinkhorn_max_iterations).""")
    f.const_f32("logits", l)
    lt = tensor_type((T, E), "f32")
    for name, text, what in (
            ("a", "softmax sinkhorn %logits", "softmax, top-2"),
            ("b", "sigmoid sinkhorn %logits", "sigmoid, top-1"),
            ("c", "softmax sinkhorn %logits {sinkhorn_max_iterations = 1}",
             "softmax, top-2, one round")):
        i64, w64, w32, k, _ = out[name]
        f.line()
        f.line(f"%ids_{name}, %w_{name} = moe.router {text}")
        f.line(f"    : {lt} -> {tensor_type((T, k), 'i32')}, {tensor_type((T, k), 'f32')}")
        f.print_int(f"ids_{name}", (T, k), "i32", i64, f"ids, {what}")
        f.print_quant(f"w_{name}", (T, k), w64, w32, 1e4, f"weights, {what}")
    return f


def test_router_expert_choice():
    T, E, C = 8, 4, 3

    def build(rng):
        l = grid(rng, (T, E), -2.0, 2.0)
        l[5] = l[2]          # equal tokens: a tie across tokens
        lf = f32(l)
        out = {}
        for scoring in ("softmax", "sigmoid"):
            i64, w64 = router_expert_choice(lf, C, scoring, np.float64)
            i32, w32 = router_expert_choice(lf, C, scoring, np.float32)
            if (i64 != i32).any() or bad_quant(w64, w32, 1e4).any():
                raise Reject("noise")
            out[scoring] = (i64, w64, w32)
        # the tie must decide something: for some expert, token 2 is taken
        # as the last one and token 5 (same scores) is not.
        s = softmax(lf, np.float64)
        ok = False
        for e in range(E):
            order = sorted(range(T), key=lambda t: (-s[t, e], t))
            if order[C - 1] == 2 and order[C] == 5:
                ok = True
        if not ok:
            raise Reject("tie not at the capacity boundary")
        return l, out

    l, out = retry(build, 400)
    f = TestFile("router_expert_choice.mlir", """
moe.router expert_choice, capacity 3: every expert takes the 3 tokens with
the largest score in its column. Results are [T, E]: column e holds e for
the tokens taken and -1 elsewhere, with weight s[t, e] or 0. Tokens 2 and 5
have equal logits, and for the softmax router one expert's capacity ends
between them: the lower token (2) wins.""")
    f.const_f32("logits", l)
    for scoring in ("softmax", "sigmoid"):
        i64, w64, w32 = out[scoring]
        f.line()
        f.line(f"%ids_{scoring}, %w_{scoring} = moe.router {scoring} expert_choice %logits capacity 3")
        f.line("    : tensor<8x4xf32> -> tensor<8x4xi32>, tensor<8x4xf32>")
        f.print_int(f"ids_{scoring}", (T, E), "i32", i64, f"ids, {scoring}")
        f.print_quant(f"w_{scoring}", (T, E), w64, w32, 1e4, f"weights, {scoring}")
    return f


def test_router_sparse_mixer():
    T, E = 8, 8

    def draw(rng, idx):
        l = grid(rng, (len(idx), E), -1.0, 2.5)
        for r, t in enumerate(idx):
            m = l[r].max()
            if t % 2 == 0:
                # some experts within the 2 * eps relative band of the top
                for e in rng.choice(E, size=2, replace=False):
                    if l[r, e] != m:
                        l[r, e] = round(m - float(rng.integers(1, 4)) * 0.01, 2)
            if t == 3:
                l[r, 6] = l[r, 1] = round(m + 0.2, 2)   # tie for the top
        return {"l": l}

    variants = [dict(jitter_eps=0.01), dict(jitter_eps=0.05)]

    def evaluate(inp):
        l = f32(inp["l"])
        bad = np.zeros(T, bool)
        for v in variants:
            def row(t):
                i64, w64 = route_row(l[t], 2, "softmax", "sparse_mixer",
                                     np.float64, **v)
                i32, w32 = route_row(l[t], 2, "softmax", "sparse_mixer",
                                     np.float32, **v)
                if list(i64) != list(i32) or bad_quant(w64, w32, 1e4).any():
                    raise Reject("row")
            bad |= row_guard(row)(T)
        return bad

    inp = resample(np.random.default_rng(500), draw, evaluate, T)
    l = f32(inp["l"])
    f = TestFile("router_sparse_mixer.mlir", """
moe.router sparse_mixer (Phi-3.5-MoE inference sparsemixer), top-2 on the
raw logits s. First: e1 = argmax s, w1 = softmax at e1 over the experts e
with (s[e1] - s[e]) <= 2 eps max(|s[e]|, s[e1]). Second: the same with e1
excluded and e2 = argmax of the rest. No renormalization. Even rows have
experts inside the threshold band; row 3 ties for the top (experts 1 and 6,
the lower is first). jitter_eps 0.01 (default) and 0.05.""")
    f.const_f32("logits", inp["l"])
    for n, (v, text) in enumerate(zip(variants, ["", " {jitter_eps = 5.0e-2}"])):
        f.line()
        f.line(f"%ids{n}, %w{n} = moe.router softmax sparse_mixer %logits{text}")
        f.line("    : tensor<8x8xf32> -> tensor<8x2xi32>, tensor<8x2xf32>")
        i64, w64 = router_rows(l, 2, np.float64, scoring="softmax",
                               selection="sparse_mixer", **v)
        _, w32 = router_rows(l, 2, np.float32, scoring="softmax",
                             selection="sparse_mixer", **v)
        f.print_int(f"ids{n}", (T, 2), "i32", i64, f"ids, jitter_eps {v['jitter_eps']}")
        f.print_quant(f"w{n}", (T, 2), w64, w32, 1e4, f"weights, jitter_eps {v['jitter_eps']}")
    return f


def test_dispatch_capacity():
    T, k, E, C, H = 8, 2, 4, 3, 4

    def build(rng):
        x = grid(rng, (T, H), -1.0, 1.0)
        ids = distinct_ids(rng, T, k, E, p=[0.45, 0.3, 0.15, 0.1])
        ids[6, 1] = -1                            # an unrouted pair
        w = grid(rng, (T, k), 0.05, 0.6, decimals=1)
        pos = dispatch(x, ids, E, C, "position")
        prob = dispatch(x, ids, E, C, "probs", w)
        if pos[3] < 2 or (pos[1] == prob[1]).all():
            raise Reject("not interesting")
        # a weight tie decided at some capacity boundary (lower token wins)
        tie = False
        for e in range(E):
            p = [(t, j) for t in range(T) for j in range(k) if ids[t, j] == e]
            if len(p) > C:
                best = sorted(p, key=lambda tj: (-w[tj], tj))
                if w[best[C - 1]] == w[best[C]]:
                    tie = True
        if not tie:
            raise Reject("no tie")
        return x, ids, w, pos, prob

    x, ids, w, pos, prob = retry(build, 600)
    f = TestFile("dispatch_capacity.mlir", """
moe.dispatch with capacity 3 per expert (8 tokens, top-2, 4 experts, one
unrouted pair). Policy position keeps the first 3 pairs of each expert in
token order; policy probs keeps the 3 with the largest weights (ties: lower
token; there is a tie at a capacity boundary), laid out in token order.
Slots are e * C + c or -1; unused rows are zero; dropped counts the pairs
lost to capacity (not the unrouted one). Rows are printed x 100 (the inputs
are multiples of 0.01).""")
    f.const_f32("x", x)
    f.const_i32("ids", ids)
    f.const_f32("w", w, decimals=1)
    res = "(tensor<4x3x4xf32>, tensor<8x2xi32>, tensor<4xi32>, tensor<i64>)"
    for name, text, r, ins in (
            ("pos", "capacity 3 drop position", pos,
             "(tensor<8x4xf32>, tensor<8x2xi32>)"),
            ("prob", "capacity 3 drop probs by %w", prob,
             "(tensor<8x4xf32>, tensor<8x2xi32>, tensor<8x2xf32>)")):
        f.line()
        f.line(f"%rows_{name}, %slots_{name}, %counts_{name}, %dropped_{name} = "
               f"moe.dispatch %x, %ids {text}")
        f.line(f"    : {ins} -> {res}")
        f.print_quant(f"rows_{name}", (E, C, H), r[0], r[0], 100, f"rows, {name}")
        f.print_int(f"slots_{name}", (T, k), "i32", r[1], f"slots, {name}")
        f.print_int(f"counts_{name}", (E,), "i32", r[2], f"counts, {name}")
        f.print_int(f"dropped_{name}", (), "i64", np.array(r[3]), f"dropped, {name}")
    return f


def test_dispatch_dropless():
    T, k, E, H = 8, 2, 4, 4
    rng = np.random.default_rng(700)
    x = grid(rng, (T, H), -1.0, 1.0)
    ids = distinct_ids(rng, T, k, E, p=[0.1, 0.4, 0.2, 0.3])
    ids2 = ids.copy()
    ids2[1, 0] = -1          # unrouted
    ids2[4, 1] = 4           # out of range: unrouted
    ids2[6, 0] = -3          # out of range: unrouted
    a = dispatch(x, ids, E)
    b = dispatch(x, ids2, E)
    f = TestFile("dispatch_dropless.mlir", """
moe.dispatch without capacity (dropless): rows [T*k, H] grouped by expert
in expert order, in (token, slot) order within an expert; slots hold the
row index; counts the rows per expert; dropped is 0. The second dispatch
has an id -1 and two ids outside [-1, E) (4 and -3): all three are unrouted
(slot -1, no row), and the rows after the last group are zero. Rows are
printed x 100 (the inputs are multiples of 0.01).""")
    f.const_f32("x", x)
    f.const_i32("ids", ids)
    f.const_i32("ids2", ids2)
    for name, idv, r in (("a", "ids", a), ("b", "ids2", b)):
        f.line()
        f.line(f"%rows_{name}, %slots_{name}, %counts_{name}, %dropped_{name} = "
               f"moe.dispatch %x, %{idv}")
        f.line("    : (tensor<8x4xf32>, tensor<8x2xi32>) -> "
               "(tensor<16x4xf32>, tensor<8x2xi32>, tensor<4xi32>, tensor<i64>)")
        f.print_quant(f"rows_{name}", (T * k, H), r[0], r[0], 100, f"rows, {name}")
        f.print_int(f"slots_{name}", (T, k), "i32", r[1], f"slots, {name}")
        f.print_int(f"counts_{name}", (E,), "i32", r[2], f"counts, {name}")
        f.print_int(f"dropped_{name}", (), "i64", np.array(r[3]), f"dropped, {name}")
    return f


def test_experts_swiglu():
    R, H, F, M, E = 8, 4, 4, 4, 3
    counts = np.array([3, 0, 4])          # expert 1 empty, one padding row

    def build(rng):
        cfg = [
            ("separate", Act("swiglu"), {
                "w1": ((E, F, H), -0.8, 0.8), "w3": ((E, F, H), -0.8, 0.8),
                "w2": ((E, M, F), -0.8, 0.8)}, 1.0, 1e4),
            ("interleaved", Act("swiglu", "interleaved"), {
                "w1": ((E, 2 * F, H), -0.8, 0.8), "w2": ((E, M, F), -0.8, 0.8)},
             1.0, 1e4),
            ("concatenated", Act("swiglu", "concatenated"), {
                "w1": ((E, 2 * F, H), -0.8, 0.8), "w2": ((E, M, F), -0.8, 0.8)},
             1.0, 1e4),
            # GPT-OSS: interleaved, alpha 1.702, beta 1, limit 7, biases;
            # inputs large enough that both clamps bite.
            ("gptoss", Act("swiglu", "interleaved", 1.702, 1.0, 7.0), {
                "w1": ((E, 2 * F, H), -1.0, 1.0), "b1": ((E, 2 * F), -2.0, 2.0),
                "w2": ((E, M, F), -0.3, 0.3), "b2": ((E, M), -0.5, 0.5)},
             4.0, 1e2),
        ]
        out = []
        for name, act, spec, xs, S in cfg:
            w = draw_weights(rng, spec)
            wf = {k: f32(v) for k, v in w.items()}

            def draw(r, idx):
                return {"x": grid(r, (len(idx), H), -xs, xs)}

            def evaluate(inp):
                xf = f32(inp["x"])
                y64 = experts(xf, counts, act, wf, np.float64)
                y32 = experts(xf, counts, act, wf, np.float32)
                return bad_rows(y64, y32, S)

            inp = resample(rng, draw, evaluate, R)
            xf = f32(inp["x"])
            stats = []
            y64 = experts(xf, counts, act, wf, np.float64, stats=stats)
            y32 = experts(xf, counts, act, wf, np.float32)
            if name == "gptoss":
                g = np.concatenate([s[0].ravel() for s in stats])
                lin = np.concatenate([s[1].ravel() for s in stats])
                if not ((g > 7.5).any() and (lin > 7.5).any() and (lin < -7.5).any()):
                    raise Reject("limit does not bite")
            out.append((name, act, w, inp["x"], y64, y32, S))
        return out

    out = retry(build, 800)
    f = TestFile("experts_swiglu.mlir", """
moe.experts with SwiGLU, G * sigmoid(alpha G) * (L + beta) with
G = min(g, limit), L = clamp(l, -limit, limit), in each layout: separate
(g from fc1, l from fc3), interleaved (g = h1[2i], l = h1[2i+1]),
concatenated (g = h1[:F], l = h1[F:]), and GPT-OSS (interleaved, alpha
1.702, beta 1, limit 7, fc1 and fc2 biases; the inputs drive g above 7 and
l beyond +-7). Dropless rows [8, 4], counts [3, 0, 4]: expert 1 is empty and
the last row is padding (zero output). Weights are [E, out, in].""")
    f.const_i32("counts", counts)
    for name, act, w, x, y64, y32, S in out:
        f.line()
        f.comment(f"--- {name}")
        xn = f.const_f32(f"x_{name}", x)
        names = emit_weights(f, name, w)
        experts_call(f, f"y_{name}", xn, (R, H), "counts", E, w, names, act, (R, M))
        f.print_quant(f"y_{name}", (R, M), y64, y32, S, f"output, {name}")
    return f


def test_experts_activations():
    R, H, F, M, E = 8, 4, 4, 4, 3
    counts = np.array([2, 3, 2])          # one padding row at the end

    def build(rng):
        cfg = [
            ("identity", Act("identity"), False),
            ("relu", Act("relu"), False),
            ("gelu", Act("gelu"), False),
            ("gelu_tanh", Act("gelu_tanh"), False),
            ("silu", Act("silu"), False),
            ("gelu_fc3", Act("gelu"), True),
        ]
        out = []
        for name, act, gated in cfg:
            spec = {"w1": ((E, F, H), -1.0, 1.0), "b1": ((E, F), -0.5, 0.5),
                    "w2": ((E, M, F), -0.8, 0.8), "b2": ((E, M), -0.5, 0.5)}
            if gated:
                spec["w3"] = ((E, F, H), -1.0, 1.0)
                spec["b3"] = ((E, F), -0.5, 0.5)
            w = draw_weights(rng, spec)
            wf = {k: f32(v) for k, v in w.items()}

            def draw(r, idx):
                return {"x": grid(r, (len(idx), H), -1.5, 1.5)}

            def evaluate(inp):
                xf = f32(inp["x"])
                return bad_rows(experts(xf, counts, act, wf, np.float64),
                                experts(xf, counts, act, wf, np.float32), 1e4)

            inp = resample(rng, draw, evaluate, R)
            xf = f32(inp["x"])
            out.append((name, act, w, inp["x"],
                        experts(xf, counts, act, wf, np.float64),
                        experts(xf, counts, act, wf, np.float32)))
        return out

    out = retry(build, 900)
    f = TestFile("experts_activations.mlir", """
moe.experts with the other activations, all with fc1 and fc2 biases:
act(x W1^T + b1) W2^T + b2 for identity, relu, gelu (erf), gelu_tanh
(tanh approximation), silu, and gated gelu with fc3 and its bias:
gelu(x W1^T + b1) * (x W3^T + b3). Dropless rows [8, 4], counts [2, 3, 2]:
the last row is padding and gives zeros (no fc2 bias).""")
    f.const_i32("counts", counts)
    for name, act, w, x, y64, y32 in out:
        f.line()
        f.comment(f"--- {name}")
        xn = f.const_f32(f"x_{name}", x)
        names = emit_weights(f, name, w)
        experts_call(f, f"y_{name}", xn, (R, H), "counts", E, w, names, act, (R, M))
        f.print_quant(f"y_{name}", (R, M), y64, y32, 1e4, f"output, {name}")
    return f


def test_experts_groups():
    H, F, M, E = 4, 4, 4, 2
    # G = 2E groups (rows from two ranks, source-major): group g -> expert g % E.
    counts_d = np.array([2, 1, 0, 3])     # dropless rows [8, H]: 2 padding rows
    counts_c = np.array([2, 3, 0, 1])     # capacity rows [4, 3, H]
    act = Act("silu")

    def build(rng):
        w = draw_weights(rng, {"w1": ((E, F, H), -1.0, 1.0),
                               "w3": ((E, F, H), -1.0, 1.0),
                               "w2": ((E, M, F), -0.8, 0.8),
                               "b2": ((E, M), -0.5, 0.5)})
        wf = {k: f32(v) for k, v in w.items()}

        def draw_d(r, idx):
            return {"x": grid(r, (len(idx), H), -1.5, 1.5)}

        def eval_d(inp):
            xf = f32(inp["x"])
            return bad_rows(experts(xf, counts_d, act, wf, np.float64),
                            experts(xf, counts_d, act, wf, np.float32), 1e4)

        d = resample(rng, draw_d, eval_d, 8)

        def draw_c(r, idx):
            return {"x": grid(r, (len(idx), 3, H), -1.5, 1.5)}

        def eval_c(inp):
            xf = f32(inp["x"])
            return bad_rows(experts(xf, counts_c, act, wf, np.float64),
                            experts(xf, counts_c, act, wf, np.float32), 1e4)

        c = resample(rng, draw_c, eval_c, 4)
        return w, d["x"], c["x"]

    w, xd, xc = retry(build, 1000)
    wf = {k: f32(v) for k, v in w.items()}
    f = TestFile("experts_groups.mlir", """
moe.experts with more groups than experts (G = 4 groups, E = 2 experts, as
rows received from two ranks): group g belongs to expert g mod E. Gated silu
(fc3) with an fc2 bias. Dropless rows [8, 4] with counts [2, 1, 0, 3] (the
last 2 rows are padding), and capacity rows [4, 3, 4] with counts
[2, 3, 0, 1] (rows past counts[g] in block g are padding). Padding rows give
zeros.""")
    names = emit_weights(f, "w", w)
    f.const_f32("xd", xd)
    f.const_i32("counts_d", counts_d)
    f.const_f32("xc", xc)
    f.const_i32("counts_c", counts_c)
    experts_call(f, "yd", "xd", (8, H), "counts_d", 4, w, names, act, (8, M))
    f.print_quant("yd", (8, M), experts(f32(xd), counts_d, act, wf, np.float64),
                  experts(f32(xd), counts_d, act, wf, np.float32), 1e4,
                  "output, dropless rows")
    experts_call(f, "yc", "xc", (4, 3, H), "counts_c", 4, w, names, act, (4, 3, M))
    f.print_quant("yc", (4, 3, M), experts(f32(xc), counts_c, act, wf, np.float64),
                  experts(f32(xc), counts_c, act, wf, np.float32), 1e4,
                  "output, capacity rows")
    return f


def test_aux_loss():
    T, E, k = 8, 4, 2
    cases = [
        ("softmax", 1e-2, None, "softmax %logits, %ids {coeff = 1.0e-2}"),
        ("softmax", 1e-2, 4, "softmax %logits, %ids {coeff = 1.0e-2, seq_len = 4}"),
        ("sigmoid", 1e-3, None, "sigmoid %logits, %ids {coeff = 1.0e-3}"),
        ("sigmoid", 1e-3, 2, "sigmoid %logits, %ids {coeff = 1.0e-3, seq_len = 2}"),
    ]
    scales = [1e6, 1e6, 1e7, 1e7]

    def build(rng):
        l = grid(rng, (T, E), -2.0, 2.0)
        ids = distinct_ids(rng, T, k, E, p=[0.4, 0.3, 0.2, 0.1])
        ids[3, 1] = -1
        lf = f32(l)
        vals = []
        for (sc, coeff, L, _), S in zip(cases, scales):
            a, b = both(lambda dt: aux_loss(lf, ids, sc, coeff, dt, L))
            if bad_quant(a, b, S).any() or abs(a * S) < 1000:
                raise Reject("quant")
            vals.append((a, b))
        return l, ids, vals

    l, ids, vals = retry(build, 1100)
    f = TestFile("aux_loss.mlir", """
moe.aux_loss: coeff * E * sum_e f_e * P_e with f_e = count_e / (T * k) (the
-1 id counts for no expert) and P_e the mean score: softmax, or sigmoid
normalized per token. With seq_len = L: the loss of each L-token sequence,
averaged over the sequences.""")
    f.const_f32("logits", l)
    f.const_i32("ids", ids)
    for n, ((sc, coeff, L, text), (a, b), S) in enumerate(zip(cases, vals, scales)):
        f.line()
        f.line(f"%loss{n} = moe.aux_loss {text} : tensor<8x4xf32>, tensor<8x2xi32> -> tensor<f32>")
        f.print_quant(f"loss{n}", (), a, b, S,
                      f"{sc}, coeff {coeff}" + (f", seq_len {L}" if L else ""))
    return f


def test_z_loss():
    T, E = 8, 4

    def build(rng):
        l = grid(rng, (T, E), -3.0, 3.0)
        lf = f32(l)
        a, b = both(lambda dt: z_loss(lf, 1e-3, dt))
        a2, b2 = both(lambda dt: z_loss(lf, 0.5, dt))
        if bad_quant(a, b, 1e6).any() or bad_quant(a2, b2, 1e3).any():
            raise Reject("quant")
        return l, (a, b), (a2, b2)

    l, v1, v2 = retry(build, 1200)
    f = TestFile("z_loss.mlir", """
moe.z_loss: coeff * mean_t (logsumexp_e logits[t, e])^2.""")
    f.const_f32("logits", l)
    f.line()
    f.line("%z0 = moe.z_loss %logits {coeff = 1.0e-3} : tensor<8x4xf32> -> tensor<f32>")
    f.print_quant("z0", (), v1[0], v1[1], 1e6, "coeff 1e-3")
    f.line()
    f.line("%z1 = moe.z_loss %logits {coeff = 0.5} : tensor<8x4xf32> -> tensor<f32>")
    f.print_quant("z1", (), v2[0], v2[1], 1e3, "coeff 0.5")
    return f


def test_large_logits():
    """Softmax-based ops on logits around 100: exp overflows float32 unless
    the implementation subtracts the row max (as torch does)."""
    T, E = 4, 4

    def build(rng):
        l = grid(rng, (T, E), 95.0, 105.0)
        lf = f32(l)
        v = dict(k=2, scoring="softmax", selection="topk", normalize=True)
        bad = row_guard(lambda t: route_row(lf[t], dt=np.float64, **v))(T)
        if bad.any():
            raise Reject("tie")
        ids, w64 = router_rows(lf, dt=np.float64, **v)
        _, w32 = router_rows(lf, dt=np.float32, **v)
        z = both(lambda dt: z_loss(lf, 1e-3, dt))
        a = both(lambda dt: aux_loss(lf, ids, "softmax", 1e-2, dt))
        if (bad_quant(w64, w32, 1e4).any() or bad_quant(*z, 1e3).any()
                or bad_quant(*a, 1e6).any()):
            raise Reject("quant")
        return l, ids, (w64, w32), z, a

    l, ids, w, z, a = retry(build, 1300)
    f = TestFile("large_logits.mlir", """
Numerical robustness: router logits around 100, where exp overflows float32
unless softmax and logsumexp subtract the row max first (as torch does). The
.td does not spell this out; softmax top-2 normalized, z_loss and aux_loss.""")
    f.const_f32("logits", l)
    f.line()
    f.line("%ids, %w = moe.router softmax topk %logits {normalize}")
    f.line("    : tensor<4x4xf32> -> tensor<4x2xi32>, tensor<4x2xf32>")
    f.print_int("ids", (T, 2), "i32", ids, "ids")
    f.print_quant("w", (T, 2), w[0], w[1], 1e4, "weights")
    f.line()
    f.line("%z = moe.z_loss %logits {coeff = 1.0e-3} : tensor<4x4xf32> -> tensor<f32>")
    f.print_quant("z", (), z[0], z[1], 1e3, "z_loss")
    f.line()
    f.line("%aux = moe.aux_loss softmax %logits, %ids {coeff = 1.0e-2} "
           ": tensor<4x4xf32>, tensor<4x2xi32> -> tensor<f32>")
    f.print_quant("aux", (), a[0], a[1], 1e6, "aux_loss")
    return f


def test_combine():
    T, k, M = 6, 2, 4
    rng0 = np.random.default_rng(1400)
    rows2 = grid(rng0, (12, M), -1.0, 1.0)
    rows3 = grid(rng0, (3, 4, M), -1.0, 1.0)
    slots = np.array([[0, 5], [3, -1], [-1, -1], [11, 2], [7, 8], [1, 10]])

    def draw(rng, idx):
        return {"w": grid(rng, (len(idx), k), 0.0, 1.0, decimals=3)}

    def evaluate(inp):
        wf = f32(inp["w"])
        bad = np.zeros(T, bool)
        for r in (rows2, rows3):
            bad |= bad_rows(combine(f32(r), slots, wf, np.float64),
                            combine(f32(r), slots, wf, np.float32), 1e4)
        return bad

    inp = resample(np.random.default_rng(1401), draw, evaluate, T)
    w = inp["w"]
    f = TestFile("combine.mlir", """
moe.combine: output[t] = sum_j weights[t, j] * rows[slots[t, j]] over the
slots that are not -1 (token 2 has none: a zero row). Rows as a flat
[12, 4] list and as capacity blocks [3, 4, 4] (read as [12, 4]).""")
    f.const_f32("rows2", rows2)
    f.const_f32("rows3", rows3)
    f.const_i32("slots", slots)
    f.const_f32("w", w, decimals=3)
    for name, r, shp in (("flat", rows2, (12, M)), ("blocks", rows3, (3, 4, M))):
        f.line()
        f.line(f"%out_{name} = moe.combine %{'rows2' if name == 'flat' else 'rows3'}, %slots, %w")
        f.line(f"    : ({tensor_type(shp, 'f32')}, tensor<6x2xi32>, tensor<6x2xf32>) -> tensor<6x4xf32>")
        f.print_quant(f"out_{name}", (T, M), combine(f32(r), slots, f32(w), np.float64),
                      combine(f32(r), slots, f32(w), np.float32), 1e4, f"output, {name} rows")
    return f


SHARED_T, SHARED_H, SHARED_F, SHARED_M = 6, 4, 6, 4


def test_shared_expert(fname, seed, cfg, doc):
    """cfg: (name, Act, weight spec, input range, scale S) per call."""
    T, H, M = SHARED_T, SHARED_H, SHARED_M

    def build(rng):
        out = []
        for name, act, spec, xs, S in cfg:
            w = draw_weights(rng, spec)
            wf = {k: f32(v) for k, v in w.items()}

            def draw(r, idx):
                return {"x": grid(r, (len(idx), H), -xs, xs)}

            def evaluate(inp):
                xf = f32(inp["x"])
                return bad_rows(shared_expert(xf, act, wf, np.float64),
                                shared_expert(xf, act, wf, np.float32), S)

            inp = resample(rng, draw, evaluate, T)
            xf = f32(inp["x"])
            out.append((name, act, w, inp["x"], shared_expert(xf, act, wf, np.float64),
                        shared_expert(xf, act, wf, np.float32), S))
        return out

    out = retry(build, seed)
    f = TestFile(fname, doc)
    for name, act, w, x, y64, y32, S in out:
        f.line()
        f.comment(f"--- {name}")
        xn = f.const_f32(f"x_{name}", x)
        names = emit_weights(f, name, w)
        shared_call(f, f"y_{name}", xn, T, H, w, names, act, M)
        f.print_quant(f"y_{name}", (T, M), y64, y32, S, f"output, {name}")
    return f


def test_shared_expert_plain():
    H, F, M = SHARED_H, SHARED_F, SHARED_M
    return test_shared_expert("shared_expert.mlir", 1500, [
        ("swiglu_gate", Act("swiglu"), {
            "w1": ((F, H), -1.0, 1.0), "b1": ((F,), -0.5, 0.5),
            "w3": ((F, H), -1.0, 1.0), "b3": ((F,), -0.5, 0.5),
            "w2": ((M, F), -0.8, 0.8), "b2": ((M,), -0.5, 0.5),
            "gate": ((1, H), -1.0, 1.0)}, 1.5, 1e4),
        ("gelu_tanh", Act("gelu_tanh"), {
            "w1": ((F, H), -1.0, 1.0), "b1": ((F,), -0.5, 0.5),
            "w2": ((M, F), -0.8, 0.8), "b2": ((M,), -0.5, 0.5)}, 1.5, 1e4),
    ], """
moe.shared_expert: one FFN on every token, optionally scaled by the gate
sigmoid(x g^T) (Qwen2-MoE's shared_expert_gate). A separate SwiGLU (fc1,
fc3) with all three biases and a gate; gelu_tanh with biases and no gate.""")


def test_shared_expert_fused():
    H, F, M = SHARED_H, SHARED_F, SHARED_M
    return test_shared_expert("shared_expert_fused_swiglu.mlir", 1550, [
        ("concat_gate", Act("swiglu", "concatenated"), {
            "w1": ((2 * F, H), -1.0, 1.0), "w2": ((M, F), -0.8, 0.8),
            "gate": ((1, H), -1.0, 1.0)}, 1.5, 1e4),
        ("interleaved_gptoss", Act("swiglu", "interleaved", 1.702, 1.0, 7.0), {
            "w1": ((2 * F, H), -1.0, 1.0), "b1": ((2 * F,), -2.0, 2.0),
            "w2": ((M, F), -0.3, 0.3), "b2": ((M,), -0.5, 0.5)}, 4.0, 1e2),
    ], """
moe.shared_expert with a fused SwiGLU (fc1 [2F, H], no fc3): concatenated
(g = h1[:F], l = h1[F:]) behind a gate, and interleaved (g = h1[2i],
l = h1[2i+1]) with the GPT-OSS parameters (alpha 1.702, beta 1, limit 7)
and fc1, fc2 biases.""")


def test_layer(name, seed, T, H, E, F, k, route, doc, shared_F=None,
               capacity=None, policy=None, act=Act("swiglu"), S=1e4,
               wrange=0.8, extra_w=None, bias_range=None, shared_gate=True):
    def build(rng):
        route_b = dict(route)
        bias = None
        if bias_range:
            bias = grid(rng, (E,), *bias_range)
            route_b["bias"] = f32(bias)
        spec = {"w1": ((E, F, H), -wrange, wrange), "w2": ((E, H, F), -wrange, wrange)}
        if act.kind == "swiglu":
            spec["w3"] = ((E, F, H), -wrange, wrange)
        spec.update(extra_w or {})
        w = draw_weights(rng, spec)
        wf = {kk: f32(v) for kk, v in w.items()}
        sh = shf = None
        if shared_F:
            sspec = {"w1": ((shared_F, H), -0.8, 0.8),
                     "w3": ((shared_F, H), -0.8, 0.8),
                     "w2": ((H, shared_F), -0.8, 0.8)}
            if shared_gate:
                sspec["gate"] = ((1, H), -1.0, 1.0)
            sh = draw_weights(rng, sspec)
            shf = {kk: f32(v) for kk, v in sh.items()}

        def draw(r, idx):
            return {"x": grid(r, (len(idx), H), -1.5, 1.5),
                    "l": grid(r, (len(idx), E), -2.0, 2.0)}

        def evaluate(inp):
            xf, lf = f32(inp["x"]), f32(inp["l"])

            def row(t):
                i64, _ = route_row(lf[t], k, dt=np.float64, **route_b)
                i32, _ = route_row(lf[t], k, dt=np.float32, **route_b)
                if list(i64) != list(i32):
                    raise Reject("ids")
            bad = row_guard(row)(T)
            if bad.any():
                return bad
            y64 = layer_ref(xf, lf, k, route_b, act, wf, np.float64, shf, capacity, policy)
            y32 = layer_ref(xf, lf, k, route_b, act, wf, np.float32, shf, capacity, policy)
            return bad_rows(y64, y32, S)

        inp = resample(rng, draw, evaluate, T)
        if capacity:
            ids, rw = router_rows(f32(inp["l"]), k, np.float64, **route_b)
            if dispatch(f32(inp["x"]), ids, E, capacity, policy, rw)[3] == 0:
                raise Reject("nothing dropped")
        if route.get("selection") == "grouped_topk":
            ids = router_rows(f32(inp["l"]), k, np.float64, **route_b)[0]
            plain = router_rows(f32(inp["l"]), k, np.float64,
                                scoring=route["scoring"], selection="topk",
                                bias=route_b.get("bias"))[0]
            if (ids == plain).all():
                raise Reject("group limit changes nothing")
        return w, sh, inp, bias, route_b

    w, sh, inp, bias, route = retry(build, seed)
    wf = {kk: f32(v) for kk, v in w.items()}
    shf = None if sh is None else {kk: f32(v) for kk, v in sh.items()}
    xf, lf = f32(inp["x"]), f32(inp["l"])
    f = TestFile(name, doc)
    f.const_f32("x", inp["x"])
    f.const_f32("logits", inp["l"])
    if bias is not None:
        f.const_f32("bias", bias)
    names = emit_weights(f, "w", w)
    snames = emit_weights(f, "s", sh) if sh else {}
    layer_call(f, "y", T, H, E, k, w, names, act, route,
               bias=None if bias is None else "bias", shared=sh,
               snames=snames, capacity=capacity, policy=policy)
    y64 = layer_ref(xf, lf, k, route, act, wf, np.float64, shf, capacity, policy)
    y32 = layer_ref(xf, lf, k, route, act, wf, np.float32, shf, capacity, policy)
    f.print_quant("y", (T, H), y64, y32, S, "output")
    return f


def all_tests():
    return [
        test_router_topk(),
        test_router_grouped(),
        test_router_sinkhorn(),
        test_router_expert_choice(),
        test_router_sparse_mixer(),
        test_dispatch_capacity(),
        test_dispatch_dropless(),
        test_experts_swiglu(),
        test_experts_activations(),
        test_experts_groups(),
        test_aux_loss(),
        test_z_loss(),
        test_large_logits(),
        test_combine(),
        test_shared_expert_plain(),
        test_shared_expert_fused(),
        test_layer(
            "layer_mixtral.mlir", 1600, T=8, H=4, E=8, F=6, k=2,
            route=dict(scoring="softmax", selection="topk", normalize=True),
            doc="""
A Mixtral-style moe.layer, decomposed by the pipeline (moe-decompose):
softmax top-2 of 8 experts, renormalized, dropless, separate SwiGLU experts
(w1, w3, w2, no biases). 8 tokens, hidden 4, expert width 6.
Reference: sum_j w_j * w2(silu(w1 x) * w3 x) over the chosen experts."""),
        test_layer(
            "layer_qwen2.mlir", 1700, T=8, H=4, E=8, F=4, k=4, shared_F=8,
            route=dict(scoring="softmax", selection="topk"),
            doc="""
A Qwen2-MoE-style moe.layer, decomposed by the pipeline: softmax top-4 of 8
experts, not renormalized (norm_topk_prob = false), dropless, separate
SwiGLU experts, plus a shared SwiGLU expert of width 8 behind the sigmoid
gate sigmoid(x g^T). 8 tokens, hidden 4, expert width 4."""),
        test_layer(
            "layer_switch.mlir", 1800, T=8, H=4, E=4, F=6, k=1, capacity=2,
            policy="position", act=Act("relu"),
            route=dict(scoring="softmax", selection="topk"),
            extra_w={"b1": ((4, 6), -0.5, 0.5), "b2": ((4, 4), -0.5, 0.5)},
            doc="""
A Switch-style moe.layer with capacity: softmax top-1 of 4 experts,
capacity 2 per expert, policy position (the first 2 tokens of an expert are
kept, later ones dropped: their output row is 0), relu FFN with fc1 and fc2
biases (the fc2 bias is scaled by the routing weight)."""),
        test_layer(
            "layer_deepseek_v3.mlir", 1900, T=8, H=4, E=8, F=4, k=3,
            shared_F=6, shared_gate=False, bias_range=(-0.5, 0.3),
            route=dict(scoring="sigmoid", selection="grouped_topk",
                       normalize=True, scaling_factor=2.5, num_groups=4,
                       group_topk=2, group_score="top2_sum"),
            doc="""
A DeepSeek-V3-style moe.layer, decomposed by the pipeline: sigmoid scores
with a selection bias, 8 experts in 4 groups scored by top2_sum, 2 groups
kept, top-3, normalized and x 2.5, dropless, separate SwiGLU experts, plus
an ungated shared SwiGLU expert of width 6. The group limit changes the
choice of some tokens."""),
    ]


# ===----------------------------------------------------------------------===
# onnx ops (convert-onnx-to-linalg)
# ===----------------------------------------------------------------------===

def all_onnx_tests():
    """The onnx_*.mlir tests (onnx_tests.py)."""
    return onnx_tests()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="exit 1 if any generated file differs from disk")
    ap.add_argument("--out", default=HERE, help="output directory")
    args = ap.parse_args()
    changed = []
    for t in all_tests() + all_onnx_tests():
        text = t.render()
        path = os.path.join(args.out, t.name)
        old = None
        if os.path.exists(path):
            with open(path) as fh:
                old = fh.read()
        if old != text:
            changed.append(t.name)
            if not args.check:
                with open(path, "w") as fh:
                    fh.write(text)
    if args.check:
        if changed:
            print("out of date: " + ", ".join(changed))
            return 1
        print("all generated tests are up to date")
        return 0
    print(f"wrote {len(changed)} file(s)" + (": " + ", ".join(changed) if changed else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
