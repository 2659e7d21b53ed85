"""Small ONNX models for the importer tests that test/corpus does not cover.

    make_model.py KIND OUT [key=value ...]

KIND:
  features   ONNX constructs: Constant forms, typed *_data fields, bool and
             fp16 tensors, an initializer listed as a graph input, an omitted
             optional input, a tensor attribute, an unnamed node.
  moe        one com.microsoft.MoE node with logits as the second graph input.
             Node attributes (activation_type, k, normalize_routing_weights,
             use_sparse_mixer, swiglu_fusion, swiglu_limit, activation_alpha,
             activation_beta, num_shared_experts) are given as key=value;
             structure keys: hidden, inter, experts, tokens, layout
             (current|legacy), fc3 (0|1), bias (0|1), rank (2|3),
             dynamic (0|1: dynamic token dimension), dtype (f32|f16|f64),
             ms_version (com.microsoft opset).
  external   an initializer in external data: variant=ok|missing|short|escape.
  error      small invalid models: variant=<name>, see ERRORS below.

Needs onnx and numpy (Debian's /usr/bin/python3).
"""

import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

MS = "com.microsoft"
DTYPES = {"f32": (TensorProto.FLOAT, np.float32), "f16": (TensorProto.FLOAT16, np.float16),
          "f64": (TensorProto.DOUBLE, np.float64)}


def model(nodes, inputs, outputs, inits=(), opset=17, ms_version=None, extra_opsets=()):
    imports = [helper.make_opsetid("", opset)]
    if ms_version is not None:
        imports.append(helper.make_opsetid(MS, ms_version))
    imports += [helper.make_opsetid(d, v) for d, v in extra_opsets]
    graph = helper.make_graph(nodes, "test", inputs, outputs, initializer=list(inits))
    m = helper.make_model(graph, opset_imports=imports)
    m.ir_version = 8
    return m


def tensor(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def weights(name, shape, dtype=np.float32, seed=0):
    rng = np.random.RandomState(seed + len(name))
    return numpy_helper.from_array(rng.normal(0, 0.2, shape).astype(dtype), name)


def features(args):
    f32 = TensorProto.FLOAT
    inits = [
        weights("w", (16, 4)),
        # Typed float_data (not raw_data), large enough for a resource.
        helper.make_tensor("typed", f32, [4, 8], np.arange(32, dtype=np.float32).tolist()),
        # fp16 in int32_data (make_tensor stores the bits), small: inline.
        helper.make_tensor("half", TensorProto.FLOAT16, [2], [1.5, -2.0]),
        numpy_helper.from_array(np.array([True, False, True, True]), "mask"),
        # Also listed as a graph input below: not an argument.
        numpy_helper.from_array(np.array([0.5], np.float32), "scale"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="matmul"),
        helper.make_node("Constant", [], ["c_tensor"], name="c_tensor",
                         value=numpy_helper.from_array(np.ones((4, 8), np.float32))),
        helper.make_node("Constant", [], ["c_float"], name="c_float", value_float=6.0),
        helper.make_node("Constant", [], ["c_floats"], name="c_floats", value_floats=[1.0, 2.0]),
        helper.make_node("Constant", [], ["c_int"], name="c_int", value_int=3),
        helper.make_node("Constant", [], ["c_ints"], name="c_ints", value_ints=[1, -1]),
        helper.make_node("Clip", ["h", "", "c_float"], ["clipped"], name="clip"),
        helper.make_node("Mul", ["clipped", "scale"], ["scaled"], name="mul"),
        helper.make_node("Relu", ["scaled"], ["relu"]),  # unnamed: "Relu_8"
        helper.make_node("Where", ["mask", "relu", "relu"], ["selected"], name="where"),
        helper.make_node("MatMul", ["selected", "typed"], ["wide"], name="matmul2"),
        helper.make_node("Add", ["wide", "c_tensor"], ["sum"], name="add"),
        helper.make_node("Shape", ["sum"], ["shape"], name="shape"),
        helper.make_node("ConstantOfShape", ["shape"], ["zeros"], name="zeros",
                         value=numpy_helper.from_array(np.array([0], np.int64))),
        helper.make_node("Cast", ["half"], ["half32"], name="cast", to=f32),
    ]
    return model(nodes,
                 [tensor("x", f32, ["batch", 16]), tensor("scale", f32, [1])],
                 [tensor("sum", f32, None), tensor("zeros", TensorProto.INT64, None),
                  tensor("half32", f32, None), tensor("c_ints", TensorProto.INT64, None),
                  tensor("c_floats", f32, None), tensor("c_int", TensorProto.INT64, None)],
                 inits)


MOE_ATTRS = {"activation_type": str, "k": int, "normalize_routing_weights": int, "use_sparse_mixer": int,
             "swiglu_fusion": int, "swiglu_limit": float, "activation_alpha": float,
             "activation_beta": float, "num_shared_experts": int}


def moe(args):
    cfg = dict(hidden=16, inter=32, experts=4, tokens=8, layout="current", fc3=0, bias=0, rank=2,
               dynamic=0, dtype="f32", ms_version=1)
    attrs = {}
    for key, value in args.items():
        if key in MOE_ATTRS:
            attrs[key] = MOE_ATTRS[key](value)
        else:
            cfg[key] = value if key in ("layout", "dtype") else int(value)
    elem, dtype = DTYPES[cfg["dtype"]]
    h, f, e, t = cfg["hidden"], cfg["inter"], cfg["experts"], cfg["tokens"]
    fused = attrs.get("activation_type") == "swiglu" and attrs.get("swiglu_fusion", 0) != 0
    f1 = 2 * f if fused else f
    legacy = cfg["layout"] == "legacy"

    def w(name, out, inp):
        return weights(name, (e, inp, out) if legacy else (e, out, inp), dtype)

    inits = [w("fc1", f1, h), w("fc2", h, f)]
    bias = "_bias" if cfg["bias"] else None
    if bias:
        inits += [weights("fc1_bias", (e, f1), dtype), weights("fc2_bias", (e, h), dtype)]
    names = ["x", "logits", "fc1", "fc1_bias" if bias else "", "fc2", "fc2_bias" if bias else ""]
    if cfg["fc3"]:
        inits.append(w("fc3", f, h))
        names.append("fc3")
    while not names[-1]:
        names.pop()
    tokens = "tokens" if cfg["dynamic"] else t
    x_shape = [tokens, h] if cfg["rank"] == 2 else [2, "seq" if cfg["dynamic"] else t // 2, h]
    node = helper.make_node("MoE", names, ["y"], name="moe", domain=MS, **attrs)
    return model([node], [tensor("x", elem, x_shape), tensor("logits", elem, [tokens, e])],
                 [tensor("y", elem, None)], inits, ms_version=cfg["ms_version"])


def external(args, out):
    variant = args.get("variant", "ok")
    data = np.arange(64, dtype=np.float32).reshape(16, 4)
    w = numpy_helper.from_array(data, "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    location = {"escape": "../w.bin"}.get(variant, os.path.basename(out) + ".data")
    entries = [("location", location), ("offset", "8"), ("length", str(data.nbytes))]
    for key, value in entries:
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    path = os.path.join(os.path.dirname(out), location)
    if variant == "ok":
        # 8 bytes of padding, then the tensor: an offset of 8 keeps alignment.
        with open(path, "wb") as f:
            f.write(b"\0" * 8 + data.tobytes())
    elif variant == "short":
        with open(path, "wb") as f:
            f.write(b"\0" * 8 + data.tobytes()[:100])
    elif variant == "missing" and os.path.exists(path):
        os.remove(path)
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name="matmul")
    return model([node], [tensor("x", TensorProto.FLOAT, [2, 16])], [tensor("y", TensorProto.FLOAT, None)], [w])


def _relu(**node_kwargs):
    node = helper.make_node("Relu", ["x"], ["y"], name="relu", **node_kwargs)
    return [node], [tensor("x", TensorProto.FLOAT, [4])], [tensor("y", TensorProto.FLOAT, None)]


ERRORS = {
    # A node of a domain other than the default and com.microsoft.
    "unknown_domain": lambda: model(*_relu(domain="ai.onnx.ml"), extra_opsets=[("ai.onnx.ml", 3)]),
    # An unused import of another domain is fine.
    "unused_domain": lambda: model(*_relu(), extra_opsets=[("ai.onnx.ml", 3)]),
    # A contrib op that the importer neither expands (OrtContrib) nor reads.
    "ms_other_op": lambda: model([helper.make_node("QAttention", ["x"], ["y"], name="qattn", domain=MS)],
                                 [tensor("x", TensorProto.FLOAT, [4])], [tensor("y", TensorProto.FLOAT, None)],
                                 ms_version=1),
    "ms_opset2": lambda: model(*_relu(), ms_version=2),
    "opset99": lambda: model(*_relu(), opset=99),
    "no_ms_opset": lambda: moe_without_ms_import(),
    "string_input": lambda: model([helper.make_node("Identity", ["x"], ["y"], name="id")],
                                  [tensor("x", TensorProto.STRING, [4])], [tensor("y", TensorProto.STRING, None)]),
    "uint16_initializer": lambda: model([helper.make_node("Identity", ["w"], ["y"], name="id")], [],
                                        [tensor("y", TensorProto.UINT16, None)],
                                        [numpy_helper.from_array(np.zeros(4, np.uint16), "w")]),
    "uint16_output": lambda: model([helper.make_node("Cast", ["x"], ["y"], name="cast", to=TensorProto.UINT16)],
                                   [tensor("x", TensorProto.FLOAT, [4])], [tensor("y", TensorProto.UINT16, None)]),
    "attr_type": lambda: model([helper.make_node("Softmax", ["x"], ["y"], name="softmax", axis=1.5)],
                               [tensor("x", TensorProto.FLOAT, [4])], [tensor("y", TensorProto.FLOAT, None)]),
    "constant_string": lambda: model([helper.make_node("Constant", [], ["y"], name="c", value_string="s")], [],
                                     [tensor("y", TensorProto.STRING, None)]),
    # A Loop (If is imported: see if-nodes.test).
    "control_flow": lambda: model([helper.make_node(
        "Loop", ["n", "c", "x"], ["y"], name="loop",
        body=helper.make_graph(
            [helper.make_node("Identity", ["c_in"], ["c_out"]), helper.make_node("Relu", ["v_in"], ["v_out"])],
            "body", [tensor("i", TensorProto.INT64, []), tensor("c_in", TensorProto.BOOL, []),
                     tensor("v_in", TensorProto.FLOAT, [4])],
            [tensor("c_out", TensorProto.BOOL, []), tensor("v_out", TensorProto.FLOAT, [4])]))],
        [tensor("n", TensorProto.INT64, []), tensor("c", TensorProto.BOOL, []), tensor("x", TensorProto.FLOAT, [4])],
        [tensor("y", TensorProto.FLOAT, None)]),
    "no_shape": lambda: model(*_relu_unranked()),
    "wrong_data_size": lambda: model([helper.make_node("Identity", ["w"], ["y"], name="id")], [],
                                     [tensor("y", TensorProto.FLOAT, None)], [short_tensor()]),
    "undefined_input": lambda: model([helper.make_node("Relu", ["z"], ["y"], name="relu")],
                                     [tensor("x", TensorProto.FLOAT, [4])], [tensor("y", TensorProto.FLOAT, None)]),
    "no_graph": lambda: no_graph(),
    "missing_attribute": lambda: model([helper.make_node("Cast", ["x"], ["y"], name="cast")],
                                       [tensor("x", TensorProto.FLOAT, [4])], [tensor("y", TensorProto.FLOAT, None)]),
    "defined_twice": lambda: model([helper.make_node("Relu", ["x"], ["y"], name="relu1"),
                                    helper.make_node("Relu", ["x"], ["y"], name="relu2")],
                                   [tensor("x", TensorProto.FLOAT, [4])], [tensor("y", TensorProto.FLOAT, None)]),
    "moe_4_inputs": lambda: moe_with_inputs(["x", "logits", "fc1", "fc2"]),
    "moe_empty_required": lambda: moe_with_inputs(["x", "logits", "", "", "fc2"]),
}


def moe_with_inputs(names):
    m = moe({})
    del m.graph.node[0].input[:]
    m.graph.node[0].input.extend(names)
    return m


def _relu_unranked():
    nodes, _, outputs = _relu()
    return nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)], outputs


def short_tensor():
    """A [4] float tensor with 12 bytes of raw data."""
    w = helper.make_tensor("w", TensorProto.FLOAT, [4], b"\0" * 16, raw=True)
    w.raw_data = b"\0" * 12
    return w


def moe_without_ms_import():
    m = moe({})
    del m.opset_import[1]
    return m


def no_graph():
    m = model(*_relu())
    m.ClearField("graph")
    return m


def main():
    kind, out = sys.argv[1], sys.argv[2]
    args = dict(arg.split("=", 1) for arg in sys.argv[3:])
    if kind == "features":
        m = features(args)
    elif kind == "moe":
        m = moe(args)
    elif kind == "external":
        m = external(args, out)
    elif kind == "error":
        m = ERRORS[args["variant"]]()
    else:
        raise SystemExit("unknown kind " + kind)
    save(m, out)


if __name__ == "__main__":
    main()
