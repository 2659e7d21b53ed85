"""Models and inputs for index-errors.test: gathers and scatters whose
indices are constants or graph inputs, in range or not.

  index-errors.py make DIR    writes DIR/<model>.onnx, DIR/<name>.npy inputs
                              and DIR/<name>.expected.npy references
  index-errors.py same A B    exits 1 unless the arrays in A and B are equal
"""

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F32, I64 = TensorProto.FLOAT, TensorProto.INT64


def save(model_graph, path):
    model = helper.make_model(model_graph,
                              opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


def single_op(name, op, inputs, output, initializers=(), **attrs):
    """A graph of one node: `inputs` are (name, type, shape)."""
    node = helper.make_node(op, [i[0] for i in inputs] +
                            [t.name for t in initializers], ["y"], **attrs)
    return helper.make_graph(
        [node], name,
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info("y", *output)],
        initializer=list(initializers))


def make(out):
    data = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.save(f"{out}/data.npy", data)

    # Gather of a constant index past dim 0 (size 4): a compile error.
    save(single_op("gather_const", "Gather", [("data", F32, [4, 3])],
                   (F32, [1, 3]),
                   [numpy_helper.from_array(np.array([7], np.int64), "i")],
                   axis=0), f"{out}/gather_const.onnx")

    # Gather by a graph input: checked at run time.
    save(single_op("gather", "Gather",
                   [("data", F32, [4, 3]), ("indices", I64, [2])],
                   (F32, [2, 3]), axis=0), f"{out}/gather.onnx")
    for name, indices in [("in_range", [2, 0]), ("negative", [-1, -4]),
                          ("too_large", [1, 9]), ("too_small", [-5, 0])]:
        indices = np.array(indices, np.int64)
        np.save(f"{out}/{name}.npy", indices)
        if name in ("in_range", "negative"):
            np.save(f"{out}/{name}.expected.npy", data[indices])

    # GatherElements along dim 1 (size 3) and ScatterElements along dim 0
    # (size 4), indices from graph inputs.
    save(single_op("gather_elements", "GatherElements",
                   [("data", F32, [4, 3]), ("indices", I64, [4, 2])],
                   (F32, [4, 2]), axis=1), f"{out}/gather_elements.onnx")
    np.save(f"{out}/elements_ok.npy",
            np.array([[0, 2], [-1, 1], [2, -3], [1, 1]], np.int64))
    np.save(f"{out}/elements_ok.expected.npy",
            np.take_along_axis(data, np.load(f"{out}/elements_ok.npy") % 3, 1))
    np.save(f"{out}/elements_bad.npy",
            np.array([[0, 2], [-1, 1], [3, 0], [1, 1]], np.int64))

    save(single_op("scatter_elements", "ScatterElements",
                   [("data", F32, [4, 3]), ("indices", I64, [1, 3]),
                    ("updates", F32, [1, 3])],
                   (F32, [4, 3]), axis=0), f"{out}/scatter_elements.onnx")
    np.save(f"{out}/updates.npy", np.full((1, 3), -1, np.float32))
    np.save(f"{out}/scatter_ok.npy", np.array([[3, -4, 1]], np.int64))
    expected = data.copy()
    expected[3, 0] = expected[0, 1] = expected[1, 2] = -1
    np.save(f"{out}/scatter_ok.expected.npy", expected)
    np.save(f"{out}/scatter_bad.npy", np.array([[0, 1, -6]], np.int64))


def same(a, b):
    a, b = np.load(a), np.load(b)
    if a.shape != b.shape or not np.array_equal(a, b):
        print(f"differ:\n{a}\n{b}")
        sys.exit(1)


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        same(sys.argv[2], sys.argv[3])
