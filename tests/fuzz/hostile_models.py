#!/usr/bin/python3
"""Writes the hostile shape-inference models of tests/fuzz/regress (committed;
rerun this to regenerate them): shape computations that explode, cycles through
subgraphs, dims nothing binds.  Each must give a clean error (exit 2, the file
named) or a plan, never a crash, a hang or a runaway allocation; the expected
status of each is in regress/cases.

usage: /usr/bin/python3 tests/fuzz/hostile_models.py tests/fuzz/regress
"""
import os
import sys

import onnx
from onnx import TensorProto, helper, numpy_helper
import numpy as np

BIG = 1 << 62


def model(nodes, inputs, outputs, inits=(), opset=17, name="hostile"):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def i64(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def cases():
    out = {}
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)

    # Reshape of 6 elements to 2^62: the element counts disagree
    out["shape_reshape_2e62"] = model([helper.make_node("Reshape", ["x", "s"], ["y"])], [x], [y],
                                      [i64("s", [1 << 31, 1 << 31])])
    # ConstantOfShape of [2^40, 2^40]: 2^80 elements, never materialized
    out["shape_constant_of_shape_bomb"] = model(
        [helper.make_node("ConstantOfShape", ["s"], ["y"])], [], [y], [i64("s", [1 << 40, 1 << 40])])
    # Tile of [2,3] by [2^31, 2^31]: past 2^62 elements
    out["shape_tile_bomb"] = model([helper.make_node("Tile", ["x", "r"], ["y"])], [x], [y],
                                   [i64("r", [1 << 31, 1 << 31])])
    # Range(0, 10^12, 1): 10^12 int64 items, a shape, not a value to compute
    r = helper.make_tensor_value_info("r", TensorProto.INT64, None)
    out["shape_range_1e12"] = model([helper.make_node("Range", ["a", "b", "c"], ["r"])], [], [r],
                                    [numpy_helper.from_array(np.array(0, np.int64), "a"),
                                     numpy_helper.from_array(np.array(10 ** 12, np.int64), "b"),
                                     numpy_helper.from_array(np.array(1, np.int64), "c")])
    # Loop with trip count 2^62 and a scan output of 1024 floats per iteration
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("ConstantOfShape", ["k"], ["scan"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("scan", TensorProto.FLOAT, [1024])],
        initializer=[i64("k", [1024])])
    out["shape_loop_huge_trip_count"] = model(
        [helper.make_node("Loop", ["M", ""], ["ys"], body=body)], [],
        [helper.make_tensor_value_info("ys", TensorProto.FLOAT, None)], [i64("M", BIG)], name="loop")
    # An If whose branch reads the value computed from the If's own output:
    # a cycle through a subgraph
    branch = helper.make_graph([helper.make_node("Identity", ["z"], ["b"])], "branch", [],
                               [helper.make_tensor_value_info("b", TensorProto.FLOAT, None)])
    c = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    out["shape_cycle_through_subgraph"] = model(
        [helper.make_node("If", ["c"], ["w"], then_branch=branch, else_branch=branch),
         helper.make_node("Relu", ["w"], ["z"])],
        [c], [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    # A dim nothing binds: the message must name the symbol and --dim
    xs = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
    out["shape_unbound_symbol"] = model([helper.make_node("Relu", ["x"], ["y"])], [xs], [y])
    # A graph input with no shape at all: the message must name --input-shape
    xn = helper.make_tensor_value_info("x", TensorProto.FLOAT, None)
    out["shape_input_without_shape"] = model([helper.make_node("Relu", ["x"], ["y"])], [xn], [y])
    # Expand of [2,3] to [2^62, 2, 3]: past 2^62 elements
    out["shape_expand_bomb"] = model([helper.make_node("Expand", ["x", "s"], ["y"])], [x], [y],
                                     [i64("s", [BIG, 2, 3])])
    # A Concat chain that doubles a shape value 70 times (Shape -> Concat(s, s) ...):
    # the value outgrows what inference evaluates and must stop there, not explode
    nodes = [helper.make_node("Shape", ["x"], ["s0"])]
    for k in range(70):
        nodes.append(helper.make_node("Concat", ["s%d" % k, "s%d" % k], ["s%d" % (k + 1)], axis=0))
    nodes.append(helper.make_node("ConstantOfShape", ["s70"], ["y"]))
    out["shape_doubling_concat"] = model(nodes, [x], [y])
    return out


def main():
    dest = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "regress")
    for name, m in cases().items():
        onnx.save(m, os.path.join(dest, name + ".onnx"))
        print("wrote", name)


if __name__ == "__main__":
    main()
