"""NumPy reference semantics of the moe dialect's ops.

An independent re-implementation of the ops specified in
dialects/moe/IR/MoEOps.td and MoEBase.td, written to be read, not to be
fast (Python loops over tokens). Only NumPy and the standard library.

Conventions:
  * every function that does float math takes `dt`, the NumPy float type to
    compute in: np.float64 for expected values, np.float32 to estimate the
    rounding noise of a float32 implementation;
  * weights are nn.Linear style, [out, in]; expert weights carry a leading
    expert dimension [E, out, in];
  * ids and slots are int64 arrays, -1 meaning "none".

Decisions (top-k, groups, capacity, sparse-mixer thresholds) raise NearTie
when two candidates are too close to call (relative gap below GAP), so that a
choice the reference makes is the one a float32 implementation makes too.
Exactly equal candidates are not near ties: they go to the lower index.
"""

import math
from dataclasses import dataclass

import numpy as np

GAP = 1e-3         # min relative gap between distinct selection scores


class NearTie(Exception):
    """A decision of the reference is too close to call under float noise."""


def _check_gaps(vals):
    """Consecutive values of a descending list: equal, or clearly apart."""
    for a, b in zip(vals, vals[1:]):
        d = float(a) - float(b)
        if d != 0.0 and d < GAP * max(abs(float(a)), 1.0):
            raise NearTie("near tie")


# ===----------------------------------------------------------------------===
# Routing
# ===----------------------------------------------------------------------===

def softmax(l, dt):
    """Softmax over the last axis (the row max is subtracted first)."""
    l = np.asarray(l, dt)
    m = l.max(axis=-1, keepdims=True)
    e = np.exp(l - m)
    return e / e.sum(axis=-1, keepdims=True)


def sigmoid(x, dt):
    """Elementwise 1 / (1 + exp(-x))."""
    x = np.asarray(x, dt)
    return dt(1) / (dt(1) + np.exp(-x))


def scores(l, scoring, dt):
    """Router scores of logits [..., E]: "softmax" or (else) "sigmoid"."""
    return softmax(l, dt) if scoring == "softmax" else sigmoid(l, dt)


def topk_select(sel, k, allowed=None):
    """Indices of the k largest of `sel` (ties: lower index), descending.

    allowed: optional per-index booleans; other indices are never chosen."""
    n = len(sel)
    cand = [i for i in range(n) if allowed is None or allowed[i]]
    order = sorted(cand, key=lambda i: (-float(sel[i]), i))
    _check_gaps([sel[i] for i in order[:k + 1]])
    return order[:k]


def finish_weights(w, normalize, scaling_factor, dt):
    """Routing weights from the chosen scores: / (sum + 1e-20) if normalize,
    then * scaling_factor."""
    w = np.asarray(w, dt)
    if normalize:
        w = w / (w.sum() + dt(1e-20))
    return w * dt(scaling_factor)


def route_row(l, k, scoring, selection, dt, bias=None, normalize=False,
              scaling_factor=1.0, num_groups=None, group_topk=None,
              group_score=None, masked_score=None, jitter_eps=0.01):
    """Routing of one token, logits l [E] -> (ids [k] best first, weights [k]).

    selection "topk": the k best of scores + bias (the bias only steers the
    choice; the weights are the unbiased scores). "grouped_topk": the experts
    in num_groups equal groups, each group scored by its best biased score
    (group_score "max") or the sum of its two best ("top2_sum"); top-k inside
    the group_topk best groups; with masked_score (HF DeepSeek: 0.0) the other
    groups' experts take that score instead of being excluded. "sparse_mixer":
    see sparse_mixer_row (scoring,
    bias, normalize and scaling_factor are not used)."""
    l = np.asarray(l, dt)
    E = l.shape[0]
    if selection == "sparse_mixer":
        return sparse_mixer_row(l, jitter_eps, dt)
    s = scores(l[None, :], scoring, dt)[0]
    sel = s if bias is None else s + np.asarray(bias, dt)
    allowed = None
    if selection == "grouped_topk":
        size = E // num_groups
        gscore = []
        for g in range(num_groups):
            part = sorted((float(v) for v in sel[g * size:(g + 1) * size]),
                          reverse=True)
            if group_score == "max":
                gscore.append(dt(part[0]))
            else:
                gscore.append(dt(part[0]) + dt(part[1]))
        kept = topk_select(gscore, group_topk)
        allowed = [(e // size) in kept for e in range(E)]
        if masked_score is not None:
            sel = np.where(allowed, sel, dt(masked_score))
            allowed = None
    ids = topk_select(sel, k, allowed)
    w = finish_weights([s[e] for e in ids], normalize, scaling_factor, dt)
    return ids, w


def sparse_mixer_row(s, eps, dt):
    """Phi-3.5-MoE inference sparsemixer (HF modeling_phimoe), top-2.

    s: the raw logits of one token [E]; returns ([e1, e2], weights [2])."""
    E = s.shape[0]
    two_eps = dt(2 * eps)

    def masked_softmax_at(m, e_sel, excluded):
        total = dt(0)
        for e in range(E):
            if e in excluded:
                continue
            factor = max(abs(s[e]), m)
            lhs, rhs = m - s[e], two_eps * factor
            if e != e_sel and abs(float(lhs) - float(rhs)) < 1e-3 * max(1.0, abs(float(factor))):
                raise NearTie("sparse mixer threshold")
            if not lhs > rhs:
                total = total + np.exp(s[e] - m)
        return np.exp(s[e_sel] - m) / total

    order = sorted(range(E), key=lambda e: (-float(s[e]), e))
    _check_gaps([s[e] for e in order[:3]])
    e1, e2 = order[0], order[1]
    w1 = masked_softmax_at(s[e1], e1, ())
    w2 = masked_softmax_at(s[e2], e2, (e1,))
    return [e1, e2], np.array([w1, w2], dt)


def router_rows(logits, k, dt, **kw):
    """moe.router topk / grouped_topk / sparse_mixer on logits [T, E].

    kw: scoring, selection and the options of route_row. Returns ids [T, k]
    (int64) and weights [T, k]."""
    T = logits.shape[0]
    ids = np.zeros((T, k), np.int64)
    w = np.zeros((T, k), dt)
    for t in range(T):
        i, wt = route_row(logits[t], k, dt=dt, **kw)
        ids[t], w[t] = i, wt
    return ids, w


def sinkhorn(l, tol, max_iterations, dt):
    """Megatron moe_utils.sinkhorn, with an iteration cap.

    Balances cost = exp(l) [T, E]; returns (d1 * cost * d0, rounds run)."""
    cost = np.exp(np.asarray(l, dt))
    T, E = cost.shape
    d0 = np.ones(T, dt)
    d1 = np.ones(E, dt)
    d1_old = d1
    eps = dt(1e-8)
    rounds = 0
    for _ in range(max_iterations):
        d0 = (dt(1) / dt(T)) / (cost @ d1 + eps)
        d1 = (dt(1) / dt(E)) / (d0 @ cost + eps)
        err = np.mean(np.abs(d1_old - d1))
        d1_old = d1
        rounds += 1
        if err <= tol:
            break
    return d1[None, :] * cost * d0[:, None], rounds


def router_sinkhorn(logits, k, scoring, dt, tol=1e-4, max_iterations=10000):
    """moe.router sinkhorn: top-k of the balanced matrix, weighted by the
    plain scores of the chosen experts. Returns ids, weights, rounds."""
    m, rounds = sinkhorn(logits, tol, max_iterations, dt)
    s = scores(logits, scoring, dt)
    T = logits.shape[0]
    ids = np.zeros((T, k), np.int64)
    w = np.zeros((T, k), dt)
    for t in range(T):
        order = sorted(range(m.shape[1]), key=lambda e: (-float(m[t, e]), e))
        vals = [m[t, e] for e in order[:k + 1]]
        for a, b in zip(vals, vals[1:]):
            if float(a) - float(b) < 2e-3 * float(a):
                raise NearTie("sinkhorn near tie")
        ids[t] = order[:k]
        w[t] = [s[t, e] for e in order[:k]]
    return ids, w, rounds


def router_expert_choice(logits, capacity, scoring, dt):
    """moe.router expert_choice: each expert takes the `capacity` tokens with
    the largest score. Returns ids and weights [T, E]: column e holds e and
    the score for the tokens taken, -1 and 0 elsewhere."""
    s = scores(logits, scoring, dt)
    T, E = s.shape
    ids = np.full((T, E), -1, np.int64)
    w = np.zeros((T, E), dt)
    for e in range(E):
        order = sorted(range(T), key=lambda t: (-float(s[t, e]), t))
        _check_gaps([s[t, e] for t in order[:capacity + 1]])
        for t in order[:capacity]:
            ids[t, e] = e
            w[t, e] = s[t, e]
    return ids, w


# ===----------------------------------------------------------------------===
# Losses
# ===----------------------------------------------------------------------===

def aux_loss(logits, ids, scoring, coeff, dt, seq_len=None):
    """moe.aux_loss: coeff * E * sum_e f_e * P_e, averaged over sequences.

    f_e = count of id e / (L * k), P_e = mean score (softmax, or sigmoid
    normalized per token) over each L = seq_len (default T) token sequence.
    Returns a 0-d array."""
    T, E = logits.shape
    k = ids.shape[1]
    if scoring == "softmax":
        p = softmax(logits, dt)
    else:
        p = sigmoid(logits, dt)
        p = p / p.sum(axis=1, keepdims=True)
    L = seq_len or T
    losses = []
    for b in range(T // L):
        rows = slice(b * L, (b + 1) * L)
        counts = np.array([(ids[rows] == e).sum() for e in range(E)], dt)
        f = counts / dt(L * k)
        P = p[rows].mean(axis=0)
        losses.append(dt(coeff) * dt(E) * (f * P).sum())
    return np.asarray(np.mean(np.array(losses, dt)), dt)


def z_loss(logits, coeff, dt):
    """moe.z_loss: coeff * mean_t logsumexp(logits[t])^2, as a 0-d array."""
    l = np.asarray(logits, dt)
    m = l.max(axis=1)
    lse = m + np.log(np.exp(l - m[:, None]).sum(axis=1))
    return np.asarray(dt(coeff) * np.mean(lse * lse), dt)


# ===----------------------------------------------------------------------===
# Dispatch, experts, combine
# ===----------------------------------------------------------------------===

def dispatch(x, ids, E, capacity=None, policy=None, weights=None):
    """moe.dispatch: rows, slots, counts, dropped (exact, no float math).

    x [T, H], ids [T, k]; ids outside [0, E) are unrouted (slot -1).
    Dropless (capacity None): rows [T*k, H] grouped by expert, (token, slot)
    order within an expert, zero after the last group; slots hold the row.
    With capacity C: rows [E, C, H], slot e * C + c; policy "position" keeps
    the first C pairs of an expert in token order, "probs" the C with the
    largest `weights` [T, k] (ties: lower token), laid out in token order.
    counts [E] are the rows per expert, dropped the pairs lost to capacity."""
    T, k = ids.shape
    H = x.shape[1]
    pairs = {e: [] for e in range(E)}
    for t in range(T):
        for j in range(k):
            e = int(ids[t, j])
            if 0 <= e < E:
                pairs[e].append((t, j))
    slots = np.full((T, k), -1, np.int64)
    counts = np.zeros(E, np.int64)
    dropped = 0
    if capacity is None:
        rows = np.zeros((T * k, H))
        r = 0
        for e in range(E):
            for (t, j) in pairs[e]:
                rows[r] = x[t]
                slots[t, j] = r
                r += 1
            counts[e] = len(pairs[e])
        return rows, slots, counts, 0
    C = capacity
    rows = np.zeros((E, C, H))
    for e in range(E):
        p = pairs[e]
        if policy == "position":
            kept = p[:C]
        else:
            best = sorted(p, key=lambda tj: (-float(weights[tj]), tj))
            if len(best) > C:
                # A weight tie across the capacity boundary must be a real
                # tie (equal inputs) that the lower token wins.
                _check_gaps([weights[tj] for tj in best[:C + 1]])
            kept = sorted(best[:C])
        for c, (t, j) in enumerate(kept):
            rows[e, c] = x[t]
            slots[t, j] = e * C + c
        counts[e] = len(kept)
        dropped += len(p) - len(kept)
    return rows, slots, counts, dropped


def gelu_erf(x, dt):
    """GELU, exact: 0.5 x (1 + erf(x / sqrt 2))."""
    erf = np.vectorize(math.erf, otypes=[np.float64])
    return (dt(0.5) * x * (dt(1) + erf(np.asarray(x / dt(math.sqrt(2)), np.float64)).astype(dt))).astype(dt)


def gelu_tanh(x, dt):
    """GELU, tanh approximation."""
    c = dt(math.sqrt(2 / math.pi))
    return dt(0.5) * x * (dt(1) + np.tanh(c * (x + dt(0.044715) * x * x * x)))


def activation(kind, h, dt):
    """An ungated activation by name: identity, relu, gelu, gelu_tanh, silu."""
    if kind == "identity":
        return h
    if kind == "relu":
        return np.maximum(h, dt(0))
    if kind == "gelu":
        return gelu_erf(h, dt)
    if kind == "gelu_tanh":
        return gelu_tanh(h, dt)
    if kind == "silu":
        return h * sigmoid(h, dt)
    raise ValueError(kind)


@dataclass(frozen=True)
class Act:
    """A #moe.activation: a kind, and for "swiglu" its fc1 layout
    ("separate", "interleaved", "concatenated"), alpha, beta and limit."""

    kind: str
    layout: str = "separate"
    alpha: float = 1.0
    beta: float = 0.0
    limit: "float | None" = None


def ffn(x, act, w1, w2, dt, b1=None, w3=None, b3=None, b2=None, stats=None):
    """One FFN, nn.Linear weights [out, in]: rows x [n, H] -> [n, M].

    SwiGLU: G * sigmoid(alpha G) * (L + beta) with G = min(g, limit) and
    L = clamp(l, -limit, limit), g and l taken from fc1 and fc3 or from fc1
    by act.layout. Other kinds: act(fc1), times fc3 where given.
    stats: a list that receives (g, l) before clamping, for SwiGLU."""
    x = np.asarray(x, dt)
    h1 = x @ np.asarray(w1, dt).T
    if b1 is not None:
        h1 = h1 + np.asarray(b1, dt)
    h3 = None
    if w3 is not None:
        h3 = x @ np.asarray(w3, dt).T
        if b3 is not None:
            h3 = h3 + np.asarray(b3, dt)
    if act.kind == "swiglu":
        if act.layout == "separate":
            g, lin = h1, h3
        elif act.layout == "interleaved":
            g, lin = h1[:, 0::2], h1[:, 1::2]
        else:
            F = h1.shape[1] // 2
            g, lin = h1[:, :F], h1[:, F:]
        if stats is not None:
            stats.append((g.copy(), lin.copy()))
        if act.limit is not None:
            lim = dt(act.limit)
            g = np.minimum(g, lim)
            lin = np.clip(lin, -lim, lim)
        a = g * sigmoid(dt(act.alpha) * g, dt) * (lin + dt(act.beta))
    else:
        a = activation(act.kind, h1, dt)
        if h3 is not None:
            a = a * h3
    y = a @ np.asarray(w2, dt).T
    if b2 is not None:
        y = y + np.asarray(b2, dt)
    return y


def experts(rows, counts, act, w, dt, stats=None):
    """moe.experts. `w` holds w1, w2 and optionally b1, w3, b3, b2 ([E, ...]).

    rows: dropless [R, H] (group g is the next counts[g] rows) or capacity
    blocks [G, C, H] (the first counts[g] rows of block g); group g is run by
    expert g mod E, padding rows give zeros. stats: as for ffn."""
    E = w["w1"].shape[0]
    M = w["w2"].shape[1]

    def expert(e, x):
        return ffn(x, act, w["w1"][e], w["w2"][e], dt,
                   b1=None if "b1" not in w else w["b1"][e],
                   w3=None if "w3" not in w else w["w3"][e],
                   b3=None if "b3" not in w else w["b3"][e],
                   b2=None if "b2" not in w else w["b2"][e], stats=stats)

    if rows.ndim == 2:
        out = np.zeros((rows.shape[0], M), dt)
        r = 0
        for g, n in enumerate(counts):
            if n:
                out[r:r + n] = expert(g % E, rows[r:r + n])
            r += n
        return out
    out = np.zeros(rows.shape[:2] + (M,), dt)
    for g, n in enumerate(counts):
        if n:
            out[g, :n] = expert(g % E, rows[g, :n])
    return out


def combine(rows, slots, weights, dt):
    """moe.combine: out[t] = sum_j weights[t, j] * rows[slots[t, j]] over
    the slots that are not -1; rows [R, M] or blocks [G, C, M] (flattened)."""
    flat = np.asarray(rows, dt).reshape(-1, rows.shape[-1])
    T, k = slots.shape
    out = np.zeros((T, flat.shape[1]), dt)
    for t in range(T):
        for j in range(k):
            if slots[t, j] >= 0:
                out[t] = out[t] + dt(weights[t, j]) * flat[slots[t, j]]
    return out


def shared_expert(x, act, w, dt):
    """moe.shared_expert: ffn on every token of x [T, H]; with w["gate"]
    [1, H], scaled by sigmoid(x gate^T)."""
    y = ffn(x, act, w["w1"], w["w2"], dt, b1=w.get("b1"), w3=w.get("w3"),
            b3=w.get("b3"), b2=w.get("b2"))
    if "gate" in w:
        y = sigmoid(np.asarray(x, dt) @ np.asarray(w["gate"], dt).T, dt) * y
    return y


def layer_ref(x, logits, k, route, act, w, dt, shared=None, capacity=None,
              policy=None):
    """moe.layer by composition of the references: router_rows (route: its
    keyword arguments), dispatch, experts, combine, plus the shared expert
    (weights `shared`, same activation) when given."""
    E = logits.shape[1]
    ids, rw = router_rows(logits, k, dt, **route)
    rows, slots, counts, _ = dispatch(x, ids, E, capacity, policy, rw)
    y = experts(np.asarray(rows, dt), counts, act, w, dt)
    out = combine(y, slots, rw, dt)
    if shared is not None:
        out = out + shared_expert(x, act, shared, dt)
    return out
