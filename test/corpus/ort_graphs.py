"""Hand-built ONNX graphs for the importer test corpus: the ONNX Runtime
contrib op com.microsoft.MoE (as the onnxruntime-genai model builder emits
it), its legacy/ambiguous/quantised variants, and the small malformed files
used by the importer's error tests.

Needs onnx and numpy only.  Used by make_corpus.py; `ort_moe_reference` is
also used by check_corpus.py to evaluate MoE nodes.
"""

import numpy as np
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
MS_DOMAIN = "com.microsoft"


def _model(graph, opset=OPSET, ms=False):
    imports = [helper.make_opsetid("", opset)]
    if ms:
        imports.append(helper.make_opsetid(MS_DOMAIN, 1))
    model = helper.make_model(graph, opset_imports=imports, producer_name="moe-mlir test/corpus")
    # ONNX 1.12 would write IR version 8; keep it explicit so that the files
    # do not change with the onnx package.
    model.ir_version = 8
    return model


def _f32(a):
    return np.ascontiguousarray(a, dtype=np.float32)


# --------------------------------------------------------------------------
# Reference semantics of com.microsoft.MoE (moe-semantics.md §1.2, §1.6)
# --------------------------------------------------------------------------


def _softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def _silu(z):
    return z * _sigmoid(z)


def ort_moe_reference(x, router_probs, fc1_w, fc1_b, fc2_w, fc2_b, fc3_w=None, fc3_b=None, *,
                      activation_type="relu", k=1, normalize_routing_weights=0, swiglu_fusion=0,
                      activation_alpha=1.0, activation_beta=0.0, swiglu_limit=None, legacy_layout=False):
    """NumPy (float64) implementation of ORT's MoE op.

    router_probs holds raw logits: softmax over all E, top-k (ties to the
    lower expert index: stable sort), optional renormalisation of the k
    weights; per expert h = x W1^T + b1 (new layout [E, out, in]; legacy
    layout [E, in, out] is x W1 + b1); act; y = a W2^T + b2; out = sum w*y
    (fc2 bias inside the weighted sum).  swiglu: fusion 1 only (interleaved
    g = h[2i], l = h[2i+1]), G = min(g, limit), L = clamp(l, -limit, limit),
    a = G * sigmoid(alpha G) * (L + beta).  silu/gelu/relu with fc3:
    a = act(x W1 + b1) * (x W3 + b3) (the CUDA kernel; the CPU kernel has no
    FC3)."""
    x = np.asarray(x, dtype=np.float64)
    shape = x.shape
    xt = x.reshape(-1, shape[-1])
    logits = np.asarray(router_probs, dtype=np.float64).reshape(xt.shape[0], -1)
    probs = _softmax(logits)
    order = np.argsort(-probs, axis=-1, kind="stable")[:, :k]
    weights = np.take_along_axis(probs, order, axis=-1)
    if normalize_routing_weights:
        weights = weights / weights.sum(axis=-1, keepdims=True)

    def linear(a, w, b):
        w = np.asarray(w, dtype=np.float64)
        y = a @ w if legacy_layout else a @ w.T
        return y if b is None else y + np.asarray(b, dtype=np.float64)

    out = np.zeros_like(xt)
    for t in range(xt.shape[0]):
        for j in range(k):
            e = order[t, j]
            h = linear(xt[t], fc1_w[e], None if fc1_b is None else fc1_b[e])
            if activation_type == "swiglu":
                if swiglu_fusion != 1:
                    raise NotImplementedError("reference implements interleaved SwiGLU (swiglu_fusion=1) only")
                g, lin = h[0::2], h[1::2]
                if swiglu_limit is not None:
                    g = np.minimum(g, swiglu_limit)
                    lin = np.clip(lin, -swiglu_limit, swiglu_limit)
                a = g * _sigmoid(activation_alpha * g) * (lin + activation_beta)
            else:
                act = {"relu": lambda z: np.maximum(z, 0), "silu": _silu, "identity": lambda z: z}[activation_type]
                a = act(h)
                if fc3_w is not None:
                    a = a * linear(xt[t], fc3_w[e], None if fc3_b is None else fc3_b[e])
            y = linear(a, fc2_w[e], None if fc2_b is None else fc2_b[e])
            out[t] += weights[t, j] * y
    return out.reshape(shape)


def _moe_attrs(node):
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if isinstance(attrs.get("activation_type"), bytes):
        attrs["activation_type"] = attrs["activation_type"].decode()
    return attrs


def evaluate_moe_node(node, inputs, fc_layout_legacy=False):
    """Evaluate one com.microsoft.MoE node with `ort_moe_reference`
    (`inputs` in node order, None for "" placeholders)."""
    attrs = _moe_attrs(node)
    padded = list(inputs) + [None] * (8 - len(inputs))
    return ort_moe_reference(*padded, legacy_layout=fc_layout_legacy, **attrs)


# --------------------------------------------------------------------------
# The fused MoE graphs
# --------------------------------------------------------------------------

B, S, H, E, F, K = 2, 4, 16, 4, 32, 2
GPT_OSS_ATTRS = dict(activation_type="swiglu", k=K, normalize_routing_weights=1, swiglu_fusion=1,
                     activation_alpha=1.702, activation_beta=1.0, swiglu_limit=7.0)
# The input is scaled by INPUT_SCALE so that swiglu_limit really clamps some
# gate (upper) and linear (both sides) values; see make_ort_moe's report.
INPUT_SCALE = 5.0


def _router(graph_nodes, inits, wr):
    """onnxruntime-genai builder router: MatMul(x, Wr^T) -> Reshape [-1, E]."""
    inits.append(numpy_helper.from_array(_f32(wr.T), "router.weight_t"))  # [H, E]
    inits.append(numpy_helper.from_array(np.array([-1, wr.shape[0]], dtype=np.int64), "router.shape"))
    graph_nodes.append(helper.make_node("MatMul", ["input", "router.weight_t"], ["router_logits_3d"], name="router/MatMul"))
    graph_nodes.append(helper.make_node("Reshape", ["router_logits_3d", "router.shape"], ["router_logits"],
                                        name="router/Reshape"))


def make_ort_moe(seed=5):
    """ort_moe: router MatMul + one com.microsoft.MoE node, GPT-OSS attributes
    (interleaved fused SwiGLU, alpha 1.702, beta 1, limit 7, biases).
    Returns (model, inputs, outputs, info)."""
    rng = np.random.RandomState(seed)
    wr = rng.normal(0, 0.2, (E, H))
    fc1_w = rng.normal(0, 0.2, (E, 2 * F, H))  # rows interleaved: gate 2i, linear 2i+1
    fc1_b = rng.normal(0, 0.2, (E, 2 * F))
    fc2_w = rng.normal(0, 0.2, (E, H, F))
    fc2_b = rng.normal(0, 0.2, (E, H))
    x = _f32(rng.normal(0, 1, (B, S, H)) * INPUT_SCALE)

    nodes, inits = [], []
    _router(nodes, inits, wr)
    for name, arr in [("fc1_experts_weights", fc1_w), ("fc1_experts_bias", fc1_b),
                      ("fc2_experts_weights", fc2_w), ("fc2_experts_bias", fc2_b)]:
        inits.append(numpy_helper.from_array(_f32(arr), name))
    nodes.append(helper.make_node(
        "MoE", ["input", "router_logits", "fc1_experts_weights", "fc1_experts_bias",
                "fc2_experts_weights", "fc2_experts_bias"],
        ["output"], name="moe/MoE", domain=MS_DOMAIN, **GPT_OSS_ATTRS))
    graph = helper.make_graph(
        nodes, "ort_moe",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [B, S, H])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [B, S, H])],
        initializer=inits)
    model = _model(graph, ms=True)

    # Reference from the float32 values that are stored in the graph.
    f = lambda a: _f32(a).astype(np.float64)
    logits = x.astype(np.float64).reshape(-1, H) @ f(wr).T
    ref = ort_moe_reference(x, logits, f(fc1_w), f(fc1_b), f(fc2_w), f(fc2_b), **GPT_OSS_ATTRS)
    h = np.einsum("th,efh->tef", x.reshape(-1, H).astype(np.float64), f(fc1_w)) + f(fc1_b)[None]
    info = "swiglu_limit clamps (over all T x E): gate>7: %d, |linear|>7: %d" % (
        int((h[..., 0::2] > 7).sum()), int((np.abs(h[..., 1::2]) > 7).sum()))
    return model, {"input": x}, {"output": _f32(ref)}, info


def make_ort_moe_legacy(seed=6):
    """ort_moe_legacy: legacy weight layout fc1 [E, H, F], fc2 [E, F, H],
    fc3 [E, H, F]; non-fused silu with fc3 (Mixtral through the old CUDA
    kernel); hidden 16 != inter 32, so moe_helper.h's heuristic
    (fc2.dims[1] == inter) identifies the layout."""
    rng = np.random.RandomState(seed)
    wr = rng.normal(0, 0.2, (E, H))
    fc1_w = rng.normal(0, 0.2, (E, H, F))
    fc2_w = rng.normal(0, 0.2, (E, F, H))
    fc3_w = rng.normal(0, 0.2, (E, H, F))
    x = _f32(rng.normal(0, 1, (B, S, H)))
    nodes, inits = [], []
    _router(nodes, inits, wr)
    for name, arr in [("fc1_experts_weights", fc1_w), ("fc2_experts_weights", fc2_w), ("fc3_experts_weights", fc3_w)]:
        inits.append(numpy_helper.from_array(_f32(arr), name))
    attrs = dict(activation_type="silu", k=K, normalize_routing_weights=1)
    nodes.append(helper.make_node(
        "MoE", ["input", "router_logits", "fc1_experts_weights", "", "fc2_experts_weights", "", "fc3_experts_weights"],
        ["output"], name="moe/MoE", domain=MS_DOMAIN, **attrs))
    graph = helper.make_graph(
        nodes, "ort_moe_legacy",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [B, S, H])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [B, S, H])],
        initializer=inits)
    f = lambda a: _f32(a).astype(np.float64)
    logits = x.astype(np.float64).reshape(-1, H) @ f(wr).T
    ref = ort_moe_reference(x, logits, f(fc1_w), None, f(fc2_w), None, f(fc3_w), None, legacy_layout=True, **attrs)
    return _model(graph, ms=True), {"input": x}, {"output": _f32(ref)}


def make_ort_moe_ambiguous(seed=7):
    """ort_moe_ambiguous: hidden == inter == 16, non-fused silu with fc3:
    [E, 16, 16] weights read the same in both layouts, so the layout (and the
    result) depends on the producer's ORT version.  No reference output."""
    rng = np.random.RandomState(seed)
    wr = rng.normal(0, 0.2, (E, H))
    nodes, inits = [], []
    _router(nodes, inits, wr)
    for name in ["fc1_experts_weights", "fc2_experts_weights", "fc3_experts_weights"]:
        inits.append(numpy_helper.from_array(_f32(rng.normal(0, 0.2, (E, H, H))), name))
    nodes.append(helper.make_node(
        "MoE", ["input", "router_logits", "fc1_experts_weights", "", "fc2_experts_weights", "", "fc3_experts_weights"],
        ["output"], name="moe/MoE", domain=MS_DOMAIN, activation_type="silu", k=K, normalize_routing_weights=1))
    graph = helper.make_graph(
        nodes, "ort_moe_ambiguous",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [B, S, H])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [B, S, H])],
        initializer=inits)
    return _model(graph, ms=True)


def make_ort_qmoe(seed=8):
    """ort_qmoe: a com.microsoft.QMoE node (int4, per-row scales, GPT-OSS
    swiglu attributes), which the importer must reject."""
    rng = np.random.RandomState(seed)
    wr = rng.normal(0, 0.2, (E, H))
    nodes, inits = [], []
    _router(nodes, inits, wr)
    inits += [
        numpy_helper.from_array(rng.randint(0, 256, (E, 2 * F, H // 2)).astype(np.uint8), "fc1_experts_weights"),
        numpy_helper.from_array(_f32(rng.uniform(0.01, 0.05, (E, 2 * F))), "fc1_scales"),
        numpy_helper.from_array(rng.randint(0, 256, (E, H, F // 2)).astype(np.uint8), "fc2_experts_weights"),
        numpy_helper.from_array(_f32(rng.uniform(0.01, 0.05, (E, H))), "fc2_scales"),
    ]
    nodes.append(helper.make_node(
        "QMoE", ["input", "router_logits", "fc1_experts_weights", "fc1_scales", "",
                 "fc2_experts_weights", "fc2_scales"],
        ["output"], name="moe/QMoE", domain=MS_DOMAIN, expert_weight_bits=4, quant_type="int", **GPT_OSS_ATTRS))
    graph = helper.make_graph(
        nodes, "ort_qmoe",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [B, S, H])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [B, S, H])],
        initializer=inits)
    return _model(graph, ms=True)


# --------------------------------------------------------------------------
# Small malformed or unsupported files
# --------------------------------------------------------------------------


def make_bad_unknown_op():
    """A node of op type FooBar in the default domain (opset 17)."""
    node = helper.make_node("FooBar", ["x"], ["y"], name="foobar")
    graph = helper.make_graph([node], "bad_unknown_op",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])])
    return _model(graph)


def make_bad_unsupported_attr():
    """Softmax (opset 17, which defines only `axis`) with an extra attribute
    `bogus=1` that the op does not define; onnx.checker rejects it
    ("Unrecognized attribute: bogus for operator Softmax")."""
    node = helper.make_node("Softmax", ["x"], ["y"], name="softmax", axis=-1, bogus=1)
    graph = helper.make_graph([node], "bad_unsupported_attr",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])])
    return _model(graph)


def make_bad_opset9(seed=9):
    """A valid router-like model (MatMul + Softmax) that declares opset 9,
    older than the importer supports.  Passes onnx.checker."""
    rng = np.random.RandomState(seed)
    w = numpy_helper.from_array(_f32(rng.normal(0, 0.2, (8, 4))), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["logits"], name="matmul"),
             helper.make_node("Softmax", ["logits"], ["y"], name="softmax", axis=1)]
    graph = helper.make_graph(nodes, "bad_opset9",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])],
                              initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)], producer_name="moe-mlir test/corpus")
    model.ir_version = 4
    return model


def make_bad_inconsistent_shapes():
    """MatMul of declared shapes [4, 8] x [6, 3]: inner dimensions 8 != 6.
    onnx.checker (without full_check) passes; shape inference in strict mode
    fails."""
    node = helper.make_node("MatMul", ["a", "b"], ["y"], name="matmul")
    graph = helper.make_graph([node], "bad_inconsistent_shapes",
                              [helper.make_tensor_value_info("a", TensorProto.FLOAT, [4, 8]),
                               helper.make_tensor_value_info("b", TensorProto.FLOAT, [6, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3])])
    return _model(graph)
