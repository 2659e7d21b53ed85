"""Tiny ONNX models for the importer's bounds tests (ir_version, --input-shape,
sizes).

    make_bounds_models.py KIND OUT [N]

KIND:
  ir_version  y = Relu(x), x: [2, 4, 16], with ir_version N.
  shapes      y = Relu(x), x: [batch, 4, 16] (dim 0 dynamic);
              w = Relu(z), z: [2, 4, 16] (all static).
  huge        y = Relu(x), x: [2^40, 2^40] declared by the model.

Needs onnx (Debian's /usr/bin/python3).
"""

import sys

from onnx import TensorProto, helper, save


def relu_model(inputs, outputs, ir_version=8):
    nodes = [helper.make_node("Relu", [i.name], [o.name], name="relu_" + i.name)
             for i, o in zip(inputs, outputs)]
    graph = helper.make_graph(nodes, "bounds", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = ir_version
    return model


def value(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def main():
    kind, out = sys.argv[1], sys.argv[2]
    if kind == "ir_version":
        model = relu_model([value("x", [2, 4, 16])], [value("y", [2, 4, 16])],
                           ir_version=int(sys.argv[3]))
    elif kind == "shapes":
        model = relu_model([value("x", ["batch", 4, 16]), value("z", [2, 4, 16])],
                           [value("y", ["batch", 4, 16]), value("w", [2, 4, 16])])
    elif kind == "huge":
        model = relu_model([value("x", [2**40, 2**40])], [value("y", [2**40, 2**40])])
    else:
        sys.exit("unknown kind " + kind)
    save(model, out)


if __name__ == "__main__":
    main()
