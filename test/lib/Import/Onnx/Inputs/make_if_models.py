"""Writes the If models of if-nodes.test into the directory given:
  if.onnx         y = x * (if c: a constant [2] else: x + 1), c an input;
  if_nested.onnx  the else branch is itself an If on the same condition;
  if_shapes.onnx  the branches give [2] and [3]: not one type."""
import os
import sys

from onnx import TensorProto as T, helper

out = sys.argv[1]


def branch(name, nodes, output, shape):
    return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(output, T.FLOAT, shape)])


def constant(name, values):
    return helper.make_node("Constant", [], [name], value=helper.make_tensor(name, T.FLOAT, [len(values)], values))


def model(if_node, name):
    graph = helper.make_graph(
        [if_node, helper.make_node("Mul", ["x", "picked"], ["y"])], "g",
        [helper.make_tensor_value_info("x", T.FLOAT, [2]), helper.make_tensor_value_info("c", T.BOOL, [1])],
        [helper.make_tensor_value_info("y", T.FLOAT, [2])])
    with open(os.path.join(out, name), "wb") as f:
        f.write(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())


then_branch = branch("then", [constant("seven", [7.0, 7.0])], "seven", [2])
else_branch = branch("else", [constant("one", [1.0]), helper.make_node("Add", ["x", "one"], ["plus"])], "plus", [2])
model(helper.make_node("If", ["c"], ["picked"], then_branch=then_branch, else_branch=else_branch), "if.onnx")

inner = helper.make_node("If", ["c"], ["inner"], then_branch=then_branch, else_branch=else_branch)
nested_else = branch("nested_else", [inner], "inner", [2])
model(helper.make_node("If", ["c"], ["picked"], then_branch=then_branch, else_branch=nested_else), "if_nested.onnx")

wide = branch("wide", [constant("three", [1.0, 2.0, 3.0])], "three", [3])
model(helper.make_node("If", ["c"], ["picked"], then_branch=then_branch, else_branch=wide), "if_shapes.onnx")
