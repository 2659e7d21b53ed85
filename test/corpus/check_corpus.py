#!/usr/bin/python3
"""Verify the importer test corpus and print what the importers must cover.

    /usr/bin/python3 test/corpus/check_corpus.py

For every file in this directory:
  * .pt: torch.jit.load, run on <name>.in.*.npy, compare with <name>.out.*.npy;
    print the node kinds of the inlined graph (torch._C._jit_pass_inline);
  * .onnx: onnx.checker.check_model, onnx.shape_inference.infer_shapes (strict),
    print the op-type inventory and the values whose shapes stay dynamic; run
    the graph with the small NumPy interpreter below on <name>.in.*.npy and
    compare with <name>.out.*.npy (com.microsoft.MoE is evaluated with
    ort_graphs.ort_moe_reference);
  * bad_*: check that each fails the way README.md says.
Exits non-zero if anything does not hold.
"""

import collections
import glob
import os
import sys
import warnings

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import ort_graphs  # noqa: E402

FAILURES = []
ATOL, RTOL = 1e-5, 1e-4
# The NumPy interpreter computes a bf16 graph in float32; eager rounds every
# step to bf16.
BF16_ATOL, BF16_RTOL = 2e-2, 5e-2


def fail(msg):
    FAILURES.append(msg)
    print("  FAIL " + msg)


def load_io(name):
    ins = {os.path.basename(p)[len(name) + 4:-4]: np.load(p) for p in sorted(glob.glob(os.path.join(HERE, name + ".in.*.npy")))}
    outs = {os.path.basename(p)[len(name) + 5:-4]: np.load(p) for p in sorted(glob.glob(os.path.join(HERE, name + ".out.*.npy")))}
    return ins, outs


def compare(what, got, want, atol=ATOL, rtol=RTOL):
    if got.shape != want.shape:
        fail("%s: shape %s != reference %s" % (what, got.shape, want.shape))
        return
    err = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) if want.size else 0.0
    ok = np.allclose(got, want, atol=atol, rtol=rtol)
    print("  %s: max |diff| %.2e %s" % (what, err, "ok" if ok else "MISMATCH"))
    if not ok:
        fail("%s differs from the reference (max |diff| %.3g)" % (what, err))


# --------------------------------------------------------------------------
# A small NumPy interpreter for the ONNX ops of this corpus (opset 17)
# --------------------------------------------------------------------------


def _attrs(node):
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _np_dtype(onnx_type):
    return onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[onnx_type]


def _reduce(fn, x, axes, keepdims, noop_with_empty_axes=0):
    if axes is None or len(axes) == 0:
        if noop_with_empty_axes:
            return x
        axes = None
    else:
        axes = tuple(int(a) for a in axes)
    return fn(x, axis=axes, keepdims=bool(keepdims))


def _topk(x, k, axis, largest, sorted_):
    # ONNX: ties go to the lower index.  np.argsort(kind="stable") keeps that.
    order = np.argsort(-x if largest else x, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis=axis), idx.astype(np.int64)


def _onehot(indices, depth, values, axis):
    depth = int(np.asarray(depth).reshape(-1)[0])
    indices = np.where(indices < 0, indices + depth, indices).astype(np.int64)
    classes = np.arange(depth).reshape([1] * indices.ndim + [depth])
    hot = indices[..., None] == classes
    out = np.where(hot, values[1], values[0]).astype(values.dtype)
    return np.moveaxis(out, -1, axis) if axis != -1 else out


def _scatter_elements(data, indices, updates, axis, reduction):
    out = data.copy()
    axis = axis % data.ndim
    for pos in np.ndindex(*indices.shape):
        target = list(pos)
        target[axis] = int(indices[pos]) % data.shape[axis]
        target = tuple(target)
        if reduction == "add":
            out[target] += updates[pos]
        elif reduction == "mul":
            out[target] *= updates[pos]
        else:
            out[target] = updates[pos]
    return out


def _reshape(x, shape, allowzero):
    shape = [int(s) for s in shape]
    if not allowzero:
        shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return x.reshape(shape)


def _slice(x, starts, ends, axes, steps):
    axes = list(range(len(starts))) if axes is None else [int(a) % x.ndim for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    index = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        dim = x.shape[a]
        s, e, st = int(s), int(e), int(st)
        s = max(min(s + dim if s < 0 else s, dim), 0) if st > 0 else max(min(s + dim if s < 0 else s, dim - 1), -1)
        e = max(min(e + dim if e < 0 else e, dim), 0) if st > 0 else max(min(e + dim if e < 0 else e, dim), -1)
        index[a] = slice(s, e if e >= 0 else None, st)
    return x[tuple(index)]


def _div(a, b):
    if np.issubdtype(a.dtype, np.integer):
        return np.trunc(a / b).astype(a.dtype)
    return (a / b).astype(a.dtype)


def _sigmoid(x):
    return (1.0 / (1.0 + np.exp(-x))).astype(x.dtype)


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(x.dtype)


def run_node(node, args, model):
    a = _attrs(node)
    op = node.op_type
    if node.domain == "com.microsoft":
        if op != "MoE":
            raise NotImplementedError("com.microsoft." + op)
        hidden, fc2 = args[0].shape[-1], args[4]
        # moe_helper.h: new layout fc2 [E, hidden, inter], legacy [E, inter, hidden].
        if fc2.shape[1] == fc2.shape[2] == hidden and a.get("swiglu_fusion", 0) == 0:
            raise ValueError("MoE weight layout is ambiguous (hidden == inter, no fused SwiGLU)")
        legacy = fc2.shape[1] != hidden
        return [ort_graphs.evaluate_moe_node(node, args, fc_layout_legacy=legacy).astype(args[0].dtype)]
    x = args[0] if args else None
    if op == "Constant":
        return [numpy_helper.to_array(a["value"])]
    if op == "ConstantOfShape":
        value = numpy_helper.to_array(a["value"]) if "value" in a else np.zeros(1, np.float32)
        return [np.full([int(s) for s in x], value.reshape(-1)[0], dtype=value.dtype)]
    binary = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": _div, "Pow": np.power,
              "Equal": np.equal, "Greater": np.greater, "Less": np.less, "LessOrEqual": np.less_equal,
              "GreaterOrEqual": np.greater_equal, "And": np.logical_and, "Or": np.logical_or}
    if op in binary:
        out = binary[op](args[0], args[1])
        if op in ("Add", "Sub", "Mul", "Pow"):
            out = out.astype(args[0].dtype)
        return [out]
    unary = {"Sigmoid": _sigmoid, "Relu": lambda v: np.maximum(v, 0).astype(v.dtype), "Sqrt": np.sqrt,
             "Ceil": np.ceil, "Not": np.logical_not, "Neg": np.negative, "Exp": np.exp,
             "Reciprocal": lambda v: (1 / v).astype(v.dtype), "Identity": lambda v: v}
    if op in unary:
        return [unary[op](x)]
    if op == "Cast":
        return [x.astype(_np_dtype(a["to"]))]
    if op == "MatMul":
        return [np.matmul(args[0], args[1])]
    if op == "Einsum":
        return [np.einsum(a["equation"].decode(), *args).astype(args[0].dtype)]
    if op == "Softmax":
        return [_softmax(x, a.get("axis", -1))]
    if op == "Shape":
        return [np.array(x.shape, dtype=np.int64)]
    if op == "Reshape":
        return [_reshape(x, args[1], a.get("allowzero", 0))]
    if op == "Flatten":
        axis = a.get("axis", 1) % max(x.ndim, 1)
        return [x.reshape(int(np.prod(x.shape[:axis])), -1)]
    if op == "Transpose":
        return [np.transpose(x, a.get("perm"))]
    if op == "Unsqueeze":
        out = x
        for ax in sorted(int(v) % (x.ndim + len(args[1])) for v in args[1]):
            out = np.expand_dims(out, ax)
        return [out]
    if op == "Squeeze":
        axes = None if len(args) < 2 else tuple(int(v) % x.ndim for v in args[1])
        return [np.squeeze(x, axis=axes)]
    if op == "Concat":
        return [np.concatenate(args, axis=a["axis"])]
    if op == "Split":
        axis = a.get("axis", 0)
        sizes = args[1] if len(args) > 1 and args[1] is not None else [x.shape[axis] // len(node.output)] * len(node.output)
        if sum(int(s) for s in sizes) != x.shape[axis]:
            raise ValueError("Split sizes %s do not add up to %d" % (list(sizes), x.shape[axis]))
        return np.split(x, np.cumsum([int(s) for s in sizes])[:-1], axis=axis)
    if op == "Slice":
        return [_slice(x, args[1], args[2], args[3] if len(args) > 3 else None, args[4] if len(args) > 4 else None)]
    if op == "Gather":
        axis = a.get("axis", 0)
        idx = np.where(args[1] < 0, args[1] + x.shape[axis], args[1])
        return [np.take(x, idx, axis=axis)]
    if op == "GatherElements":
        return [np.take_along_axis(x, args[1], axis=a.get("axis", 0))]
    if op == "Expand":
        return [np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(int(s) for s in args[1]))).copy()]
    if op == "Where":
        return [np.where(args[0], args[1], args[2])]
    if op == "Clip":
        low = args[1] if len(args) > 1 and args[1] is not None else None
        high = args[2] if len(args) > 2 and args[2] is not None else None
        return [np.clip(x, low, high).astype(x.dtype)]
    if op == "NonZero":
        return [np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)]
    if op == "TopK":
        return list(_topk(x, int(args[1].reshape(-1)[0]), a.get("axis", -1), a.get("largest", 1), a.get("sorted", 1)))
    if op == "ArgMax":
        axis = a.get("axis", 0)
        if a.get("select_last_index", 0):
            out = x.shape[axis] - 1 - np.argmax(np.flip(x, axis), axis=axis)
        else:
            out = np.argmax(x, axis=axis)
        return [np.expand_dims(out, axis).astype(np.int64) if a.get("keepdims", 1) else out.astype(np.int64)]
    if op == "ReduceSum":
        return [_reduce(np.sum, x, args[1] if len(args) > 1 else None, a.get("keepdims", 1),
                        a.get("noop_with_empty_axes", 0)).astype(x.dtype)]
    if op in ("ReduceMax", "ReduceMean"):
        fn = np.max if op == "ReduceMax" else np.mean
        return [_reduce(fn, x, a.get("axes"), a.get("keepdims", 1)).astype(x.dtype)]
    if op == "CumSum":
        axis = int(np.asarray(args[1]).reshape(-1)[0])
        v = np.flip(x, axis) if a.get("reverse", 0) else x
        out = np.cumsum(v, axis=axis).astype(x.dtype)
        if a.get("exclusive", 0):
            out = out - v
        return [np.flip(out, axis) if a.get("reverse", 0) else out]
    if op == "OneHot":
        return [_onehot(x, args[1], args[2], a.get("axis", -1))]
    if op == "ScatterElements":
        return [_scatter_elements(x, args[1], args[2], a.get("axis", 0), a.get("reduction", b"none").decode()
                                  if isinstance(a.get("reduction", b"none"), bytes) else a.get("reduction"))]
    raise NotImplementedError(op)


def run_graph(graph, values, model):
    """Runs `graph`'s nodes over `values` (its outer scope, updated in
    place); an If runs the branch its condition picks."""
    values.update({i.name: numpy_helper.to_array(i) for i in graph.initializer})
    for node in graph.node:
        if node.op_type == "If":
            branch = _attrs(node)["then_branch" if bool(values[node.input[0]].reshape(-1)[0]) else "else_branch"]
            inner = dict(values)
            run_graph(branch, inner, model)
            outs = [inner[o.name] for o in branch.output]
        else:
            outs = run_node(node, [values[n] for n in node.input], model)
        for name, v in zip(node.output, outs):
            values[name] = v


def run_onnx(model, feeds, all_values=False):
    values = dict(feeds)
    values[""] = None
    run_graph(model.graph, values, model)
    if all_values:
        return values
    return {o.name: values[o.name] for o in model.graph.output}


# --------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------


def inventory(model):
    counts = collections.Counter(
        (n.op_type if n.domain in ("", "ai.onnx") else n.domain + "." + n.op_type) for n in model.graph.node)
    return ", ".join("%s %d" % kv for kv in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


# Inputs whose *values* set the shape of the output.
SHAPE_OPERANDS = {"Reshape": [1], "Expand": [1], "ConstantOfShape": [0], "Slice": [1, 2, 3, 4], "Split": [1],
                  "OneHot": [1], "TopK": [1], "Range": [0, 1, 2], "Tile": [1], "Squeeze": [1], "Unsqueeze": [1],
                  "ReduceSum": [1]}
DATA_DEPENDENT, SYMBOLIC_INPUT, NOT_INFERRED = (
    "data-dependent (downstream of NonZero)", "symbolic input dimension (dynamic_axes)",
    "static, but not inferred by onnx shape inference")


def shape_sources(model):
    """For every value, the reasons its shape can vary: NonZero (data) or a
    symbolic graph-input dimension.  `shape_of` tracks shapes, `value_of`
    tracks integer values computed from shapes (Shape -> Gather -> Concat)."""
    shape_of, value_of = collections.defaultdict(set), collections.defaultdict(set)
    for inp in model.graph.input:
        if any(not d.HasField("dim_value") for d in inp.type.tensor_type.shape.dim):
            shape_of[inp.name].add(SYMBOLIC_INPUT)
    for node in model.graph.node:
        ins = [i for i in node.input if i]
        shape_ops = [node.input[i] for i in SHAPE_OPERANDS.get(node.op_type, []) if i < len(node.input) and node.input[i]]
        if node.op_type == "Shape":
            out_shape, out_value = set(), set(shape_of[ins[0]])
        elif node.op_type == "ScatterElements":
            out_shape, out_value = set(shape_of[ins[0]]), set()
        else:
            out_shape = set().union(*[shape_of[i] for i in ins], *[value_of[i] for i in shape_ops])
            out_value = set().union(*[value_of[i] for i in ins])
            if node.op_type == "NonZero":
                out_shape.add(DATA_DEPENDENT)
        for o in node.output:
            shape_of[o], value_of[o] = out_shape, out_value
    return shape_of


def dynamic_values(model, data_prop=False):
    """The node outputs without a fully static inferred shape, by reason."""
    inferred = shape_inference.infer_shapes(model, strict_mode=True, data_prop=data_prop)
    g = inferred.graph
    typed = {v.name: v for v in list(g.input) + list(g.output) + list(g.value_info)}
    sources = shape_sources(model)
    total, dynamic, static = 0, collections.defaultdict(list), {}
    for node in g.node:
        for name in node.output:
            total += 1
            v = typed.get(name)
            shape = None
            if v is not None and v.type.tensor_type.HasField("shape"):
                shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
                         for d in v.type.tensor_type.shape.dim]
            if shape is None or any(not isinstance(d, int) for d in shape):
                src = sources[name]
                reason = DATA_DEPENDENT if DATA_DEPENDENT in src else SYMBOLIC_INPUT if src else NOT_INFERRED
                dynamic[reason].append((node.op_type, name, "[no shape]" if shape is None else str(shape)))
            else:
                static[name] = tuple(shape)
    return total, dynamic, static


def check_onnx(path):
    name = os.path.basename(path)[:-5]
    print("%s" % os.path.basename(path))
    model = onnx.load(path)
    try:
        onnx.checker.check_model(model)
        print("  checker: ok")
    except Exception as e:  # noqa: BLE001
        fail("%s: checker: %s" % (name, str(e).splitlines()[0]))
    print("  opset: %s" % ", ".join("%s %d" % (o.domain or "ai.onnx", o.version) for o in model.opset_import))
    print("  ops (%d nodes): %s" % (len(model.graph.node), inventory(model)))
    total, dynamic, static = dynamic_values(model)
    ndyn = sum(len(v) for v in dynamic.values())
    ndyn_prop = sum(len(v) for v in dynamic_values(model, data_prop=True)[1].values())
    print("  shapes: %d of %d node outputs static (%d with data_prop=True)" % (total - ndyn, total, total - ndyn_prop))
    for reason, entries in sorted(dynamic.items()):
        ops = collections.Counter(op for op, _, _ in entries)
        print("    %d %s: by producer %s" % (len(entries), reason, ", ".join("%s %d" % kv for kv in sorted(ops.items()))))
        print("      e.g. " + "; ".join("%s %s" % (name, shape) for _, name, shape in entries[:3]))
    io_name = "mixtral" if name == "mixtral_external" else name
    ins, outs = load_io(io_name)
    if outs:
        values = run_onnx(model, ins, all_values=True)
        wrong = [(n, s, values[n].shape) for n, s in static.items() if tuple(values[n].shape) != s]
        if wrong:
            fail("%s: inferred static shapes differ from the NumPy run: %s" % (name, wrong[:3]))
        bf16 = any(t.data_type == onnx.TensorProto.BFLOAT16 for t in model.graph.initializer)
        for out_name, want in outs.items():
            compare("numpy run of %s vs %s.out.%s.npy" % (os.path.basename(path), io_name, out_name),
                    np.asarray(values[out_name], np.float32), want,
                    *((BF16_ATOL, BF16_RTOL) if bf16 else (ATOL, RTOL)))
    return model


def check_pt(path):
    import torch

    name = os.path.basename(path)[:-3]
    print(os.path.basename(path))
    module = torch.jit.load(path)
    graph = module.graph.copy()
    torch._C._jit_pass_inline(graph)
    kinds = collections.Counter()

    def walk(block):
        for node in block.nodes():
            kinds[node.kind()] += 1
            for sub in node.blocks():
                walk(sub)

    walk(graph)
    print("  node kinds (%d): %s" % (sum(kinds.values()),
                                     ", ".join("%s %d" % kv for kv in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))))
    ins, outs = load_io(name)
    # The float32 .npy inputs in the parameters' type (bf16 models).
    dtype = next((p.dtype for p in module.parameters() if p.is_floating_point()), torch.float32)
    with torch.no_grad():
        got = module(*[torch.from_numpy(v).to(dtype) for v in ins.values()])
    for out_name, want in outs.items():
        compare("torch.jit.load(%s) vs %s.out.%s.npy" % (os.path.basename(path), name, out_name),
                got.float().numpy(), want)
    return kinds


def expect_failure(what, fn, needle=""):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        msg = " ".join(str(e).split())[:150]
        if needle and needle not in str(e):
            fail("%s failed, but not with '%s': %s" % (what, needle, msg))
        else:
            print("  %s fails as expected: %s: %s" % (what, type(e).__name__, msg))
        return
    fail("%s did not fail" % what)


def check_bad():
    import torch

    p = lambda f: os.path.join(HERE, f)  # noqa: E731
    print("bad_truncated.onnx")
    expect_failure("onnx.load", lambda: onnx.load(p("bad_truncated.onnx")))
    print("bad_corrupted.onnx")
    expect_failure("onnx.load", lambda: onnx.load(p("bad_corrupted.onnx")))
    print("bad_truncated.pt")
    expect_failure("torch.jit.load", lambda: torch.jit.load(p("bad_truncated.pt")))
    print("bad_unknown_op.onnx")
    expect_failure("onnx.checker", lambda: onnx.checker.check_model(onnx.load(p("bad_unknown_op.onnx"))), "FooBar")
    print("bad_unsupported_attr.onnx")
    expect_failure("onnx.checker", lambda: onnx.checker.check_model(onnx.load(p("bad_unsupported_attr.onnx"))), "bogus")
    print("bad_opset9.onnx")
    m = onnx.load(p("bad_opset9.onnx"))
    onnx.checker.check_model(m)
    print("  checker: ok; opset %s; ops: %s" % (m.opset_import[0].version, inventory(m)))
    print("bad_inconsistent_shapes.onnx")
    m = onnx.load(p("bad_inconsistent_shapes.onnx"))
    onnx.checker.check_model(m)
    print("  checker: ok")
    expect_failure("infer_shapes(strict_mode=True)", lambda: shape_inference.infer_shapes(m, strict_mode=True))


def check_lost_experts():
    """The traced mixtral_lost_experts graphs compute the right thing on the
    sample only.  Show it on an input that routes to every expert."""
    import torch

    print("mixtral_lost_experts on another input")
    module = torch.jit.load(os.path.join(HERE, "mixtral_lost_experts.pt"))
    params = sorted({n.split(".")[1] for n, _ in module.named_parameters() if n.startswith("experts.")})
    used = set()
    g = module.inlined_graph
    for node in g.nodes():
        if node.kind() == "prim::GetAttr" and node.output().type().str().endswith("MixtralBlockSparseTop2MLP"):
            used.add(node.s("name"))
    print("  .pt holds the parameters of experts %s; its graph uses experts %s" % (params, sorted(used)))
    onnx_model = onnx.load(os.path.join(HERE, "mixtral_lost_experts.onnx"))
    print("  .onnx keeps %d initializers (gate + 3 per expert: %d experts)" % (
        len(onnx_model.graph.initializer), (len(onnx_model.graph.initializer) - 1) // 3))
    x = np.random.RandomState(0).normal(0, 1, (2, 4, 16)).astype(np.float32)
    expect_failure("the .pt on a random input", lambda: module(torch.from_numpy(x)))
    expect_failure("the .onnx (NumPy) on a random input", lambda: run_onnx(onnx_model, {"hidden_states": x}))

    # Channel 0 = -3 routes every token to experts {0, 2}: two experts hit, as
    # in the sample, so the graphs run, silently using experts 1 and 3's weights.
    import make_corpus

    eager, sample = make_corpus.make_mixtral_lost_experts()[:2]
    x = sample.numpy().copy()
    x[..., 0] = -3.0
    with torch.no_grad():
        want = eager(torch.from_numpy(x)).numpy()
        got_pt = module(torch.from_numpy(x)).numpy()
    got_onnx = run_onnx(onnx_model, {"hidden_states": x})["output"]
    for what, got in ((".pt", got_pt), (".onnx (NumPy)", got_onnx)):
        err = float(np.max(np.abs(got - want)))
        if err < 1e-3:
            fail("mixtral_lost_experts%s matches eager on experts {0, 2}" % what)
        print("  the %s on an input that hits experts {0, 2} runs and is silently wrong: max |diff| vs eager %.3f"
              % (what, err))


def check_other_inputs():
    """The exported graphs (except mixtral_lost_experts) must also be right on
    inputs other than the sample: eager (rebuilt by make_corpus) vs .pt vs the
    NumPy run of .onnx on seeded random inputs; switch also on other token
    counts (capacity 2 and 6), gshard_top2 on 8 tokens (its If's other
    branch)."""
    import torch

    import make_corpus

    print("other inputs (eager vs .pt vs .onnx)")
    warnings.filterwarnings("ignore", message="nn.functional.sigmoid is deprecated")  # Qwen2-MoE's HF code
    builders = {"mixtral": make_corpus.make_mixtral, "qwen2_moe": make_corpus.make_qwen2_moe,
                "switch": make_corpus.make_switch, "deepseek_v3": make_corpus.make_deepseek_v3,
                "decoder_layer": make_corpus.make_decoder_layer,
                "deepseek_reference": make_corpus.make_deepseek_reference,
                "gshard_top2": make_corpus.make_gshard_top2}
    rng = np.random.RandomState(1234)
    for name, build in builders.items():
        module, sample = build()[:2]
        shapes = [tuple(sample.shape)] * 3
        if name == "switch":
            shapes = [(8, 16), (24, 16), (16, 16)]
        if name == "gshard_top2":
            # The trace keeps the sample's slot count (4, a constant depth of
            # the slot one-hots): 8 tokens take the min_capacity branch to it.
            shapes = [(8, 16), (16, 16), (16, 16)]
        traced = torch.jit.load(os.path.join(HERE, name + ".pt"))
        model = onnx.load(os.path.join(HERE, name + ".onnx"))
        worst = 0.0
        for shape in shapes:
            x = rng.normal(0, 1, shape).astype(np.float32)
            with torch.no_grad():
                want = module(torch.from_numpy(x)).numpy()
                got_pt = traced(torch.from_numpy(x)).numpy()
            got_onnx = run_onnx(model, {"hidden_states": x})["output"]
            for got in (got_pt, got_onnx):
                worst = max(worst, float(np.max(np.abs(got - want))))
                if got.shape != want.shape or not np.allclose(got, want, atol=ATOL, rtol=RTOL):
                    fail("%s on a random input %s: graph differs from eager" % (name, shape))
        print("  %s: %d inputs %s, max |diff| %.2e" % (name, len(shapes), sorted(set(shapes)), worst))


# Files of today's exporters (ONNX IR 10, opset 20), which the onnx 1.12
# here cannot check; export_dynamo.py checks them with ONNX Runtime.
NEWER = {"gshard_top2_dynamo.onnx"}


def main():
    files = sorted(os.listdir(HERE))
    for f in files:
        if f.endswith(".onnx") and not f.startswith("bad_") and f not in NEWER:
            check_onnx(os.path.join(HERE, f))
    all_kinds = collections.Counter()
    for f in files:
        if f.endswith(".pt") and not f.startswith("bad_"):
            all_kinds.update(check_pt(os.path.join(HERE, f)))
    print("TorchScript node kinds over all .pt files: %s" % ", ".join(sorted(all_kinds)))
    check_other_inputs()
    check_bad()
    check_lost_experts()
    size = sum(os.path.getsize(os.path.join(HERE, f)) for f in files)
    print("corpus directory: %d files, %d bytes" % (len(files), size))
    if FAILURES:
        print("%d FAILURES" % len(FAILURES))
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
