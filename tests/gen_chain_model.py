#!/usr/bin/python3
"""Writes a synthetic ONNX graph of N standard-domain Add nodes, each output
a storage of its own: x_i = x_{i-1} + x_{i-1-d_i} with d_i in 0..12, so
lifetimes vary in length.  For scale tests (many storages) without a huge
exported model.  usage: gen_chain_model.py N OUT.onnx"""
import sys

import onnx
from onnx import TensorProto, helper


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: gen_chain_model.py N OUT.onnx")
    n, out = int(sys.argv[1]), sys.argv[2]
    shape = [64, 64]
    nodes, values = [], []
    for i in range(1, n + 1):
        back = max(0, i - 1 - (i * 7919) % 13)
        nodes.append(helper.make_node("Add", ["x%d" % (i - 1), "x%d" % back], ["x%d" % i],
                                      name="n%d" % i))
        if i < n:
            values.append(helper.make_tensor_value_info("x%d" % i, TensorProto.FLOAT, shape))
    graph = helper.make_graph(nodes, "chain%d" % n,
                              [helper.make_tensor_value_info("x0", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("x%d" % n, TensorProto.FLOAT, shape)],
                              value_info=values)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), out)


if __name__ == "__main__":
    main()
