#!/usr/bin/python3
"""Shape-family cases for roamc's shape inference (frontend/infer/infer_shape.c).

cases() returns dicts {"name", "model", "bindings", "expect"} and, for the
hostile ones, "error": a substring the failure message must hold (the node
is named in each).  expect maps a value name to (elem_type, dims); -1 in
dims is a dim inference must leave unknown.

Where expectations come from: every case marked "ort" (the default) was
checked against ONNX Runtime (onnxruntime-node 1.30) with
    /usr/bin/python3 tests/shape_cases/shape_cases.py --oracle
which runs each model in ORT with the bound shapes ("ort_dims" binds the
symbols left unknown for roamc) and compares every expected value
(-1 dims match anything).  Cases ORT cannot run say why in "oracle" and
were derived by hand from the ONNX spec (docs/Operators.md, Changelog.md):
old opsets ORT has no kernel for, upper bounds of data-dependent sizes,
and sizes too large to allocate.

usage: shape_cases.py [ROAMC] [--oracle] [-k SUBSTRING]
ROAMC is `roamc` (run as `ROAMC shapes MODEL BINDINGS --report json`) or a
driver taking the same arguments; default /work/main/build/roamc.
"""
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile

import onnx
from onnx import TensorProto as T
from onnx import helper as h

F, I64, I32, B, S = T.FLOAT, T.INT64, T.INT32, T.BOOL, T.STRING
BIG = 2**63 - 1
SMALL = -(2**63)


def model(nodes, inputs, outputs, opset, inits=()):
    """inputs: (name, elem, dims); outputs: names (types left to inference)."""
    g = h.make_graph(
        nodes, "g", [h.make_tensor_value_info(n, e, d) for n, e, d in inputs],
        [onnx.ValueInfoProto(name=o) for o in outputs], initializer=list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 7 if opset <= 15 else 8
    return m


def i64(name, vals, dims=None):
    return h.make_tensor(name, I64, [len(vals)] if dims is None else dims, vals)


def f32(name, vals, dims=None):
    return h.make_tensor(name, F, [len(vals)] if dims is None else dims, vals)


def N(op, ins, outs, name=None, **attrs):
    return h.make_node(op, ins, outs, name=name or outs[0], **attrs)


def case(name, m, expect, bindings=(), **kw):
    d = {"name": name, "model": m, "bindings": list(bindings), "expect": expect}
    d.update(kw)
    return d


def shape_chain(opset):
    """x[batch, seq, 64] -> Shape -> Gather(0) -> Unsqueeze -> Concat with
    [-1, 8] -> Reshape: the run-time shape computation of every export."""
    if opset >= 13:
        unsq = [N("Unsqueeze", ["b", "ax0"], ["bu"])]
        inits = [i64("ax0", [0])]
    else:
        unsq = [N("Unsqueeze", ["b"], ["bu"], axes=[0])]
        inits = []
    nodes = [N("Shape", ["x"], ["s"]), N("Gather", ["s", "zero"], ["b"], axis=0)] + unsq + [
        N("Concat", ["bu", "rest"], ["shp"], axis=0), N("Reshape", ["x", "shp"], ["y"])]
    inits += [h.make_tensor("zero", I64, [], [0]), i64("rest", [-1, 8])]
    return model(nodes, [("x", F, ["batch", "seq", 64])], ["s", "b", "bu", "shp", "y"], opset, inits)


def constants():
    out = []
    m = model([N("Constant", [], ["c"], value=i64("v", [1, 2, 3, 4, 5, 6], [2, 3]))], [], ["c"], 9)
    out.append(case("constant_value_9", m, {"c": (I64, [2, 3])}))
    m = model([N("Constant", [], ["c"], value_ints=[2, -1]), N("Reshape", ["x", "c"], ["y"])],
              [("x", F, [4, 3])], ["c", "y"], 13)
    out.append(case("constant_value_ints_reshape_13", m, {"c": (I64, [2]), "y": (F, [2, 6])}))
    m = model([N("Constant", [], ["a"], value_int=3), N("Constant", [], ["b"], value_float=1.5),
               N("Constant", [], ["c"], value_floats=[1.0, 2.0])], [], ["a", "b", "c"], 12)
    out.append(case("constant_scalars_12", m, {"a": (I64, []), "b": (F, []), "c": (F, [2])}))
    sp = h.make_sparse_tensor(f32("vals", [5.0, 6.0]), i64("idx", [1, 7]), [3, 4])
    m = model([N("Constant", [], ["c"], sparse_value=sp)], [], ["c"], 13)
    out.append(case("constant_sparse_13", m, {"c": (F, [3, 4])},
                    oracle="ORT returns a sparse tensor it cannot report: spec, the dense shape is dims"))
    m = model([N("Constant", [], ["a"], value_string="hi"), N("Constant", [], ["b"], value_strings=["x", "y", "z"])],
              [], ["a", "b"], 13)
    out.append(case("constant_strings_13", m, {"a": (S, []), "b": (S, [3])}))
    # ConstantOfShape: default FLOAT 0, a typed value, a scalar from an empty shape
    m = model([N("Shape", ["x"], ["s"]), N("ConstantOfShape", ["s"], ["c"]),
               N("ConstantOfShape", ["s"], ["ci"], value=i64("v", [7], [1])),
               N("ConstantOfShape", ["e"], ["sc"], value=h.make_tensor("w", I32, [1], [1]))],
              [("x", F, ["n", 3])], ["c", "ci", "sc"], 9, [i64("e", [], [0])])
    out.append(case("constant_of_shape_9", m, {"c": (F, [2, 3]), "ci": (I64, [2, 3]), "sc": (I32, [])},
                    ["--input-shape", "x=2,3"]))
    # its value feeds a Reshape: ones [2] * 3 -> ... via Concat
    m = model([N("ConstantOfShape", ["two"], ["c"], value=i64("v", [3], [1])), N("Reshape", ["x", "c"], ["y"])],
              [("x", F, [9])], ["c", "y"], 13, [i64("two", [2])])
    out.append(case("constant_of_shape_value_13", m, {"c": (I64, [2]), "y": (F, [3, 3])}))
    return out


def shapes_and_views():
    out = []
    for opset in (11, 13):
        out.append(case(f"shape_chain_reshape_{opset}", shape_chain(opset),
                        {"s": (I64, [3]), "b": (I64, []), "bu": (I64, [1]), "shp": (I64, [3]), "y": (F, [2, 48, 8])},
                        ["--input-shape", "x=2,6,64"]))
    out.append(case("shape_chain_dim_flag_13", shape_chain(13), {"y": (F, [3, 40, 8])},
                    ["--dim", "batch=3", "--dim", "seq=5"]))
    # unbound batch: Reshape keeps the rank; the dims stay unknown
    out.append(case("shape_chain_unbound_13", shape_chain(13), {"s": (I64, [3]), "y": (F, [-1, -1, -1])},
                    ["--dim", "seq=5"], ort_dims={"batch": 2}))
    m = model([N("Shape", ["x"], ["a"], start=1), N("Shape", ["x"], ["b"], end=-1),
               N("Shape", ["x"], ["c"], start=-10, end=10), N("Shape", ["x"], ["d"], start=2, end=1),
               N("Shape", ["x"], ["e"], start=1, end=2), N("ConstantOfShape", ["a"], ["y"])],
              [("x", F, ["n", 3, 4])], ["a", "b", "c", "d", "e", "y"], 15)
    out.append(case("shape_start_end_15", m, {"a": (I64, [2]), "b": (I64, [2]), "c": (I64, [3]), "d": (I64, [0]),
                                              "e": (I64, [1]), "y": (F, [3, 4])}, ["--dim", "n=2"]))
    m = model([N("Size", ["x"], ["s"]), N("Reshape", ["x", "s1"], ["y"]), N("Unsqueeze", ["s"], ["s1"], axes=[0]),
               N("Identity", ["s1"], ["t"]), N("Shape", ["sc"], ["ss"]), N("Size", ["sc"], ["zs"])],
              [("x", F, ["n", 3]), ("sc", F, [])], ["s", "y", "t", "ss", "zs"], 11)
    out.append(case("size_identity_11", m, {"s": (I64, []), "y": (F, [6]), "t": (I64, [1]), "ss": (I64, [0]),
                                            "zs": (I64, [])}, ["--input-shape", "x=2,3"]))
    # dim_param expressions as ORT's symbolic shape inference and export.py
    # --symbolic-batch write them; "seq-len" and "a*" stay plain names
    m = model([N("Identity", ["x"], ["y"]), N("Identity", ["z"], ["w"])],
              [("x", F, ["batch*128", "2*batch+1", "batch*heads"]), ("z", F, ["seq-len", "a*"])], ["y", "w"], 13)
    out.append(case("dim_param_expression_13", m, {"y": (F, [384, 7, 12]), "w": (F, [5, 6])},
                    ["--dim", "batch=3", "--dim", "heads=4", "--dim", "seq-len=5", "--dim", "a*=6"]))
    out.append(case("dim_param_expression_unbound_13", m, {"y": (F, [384, 7, -1])},
                    ["--dim", "batch=3", "--dim", "seq-len=5", "--dim", "a*=6"], ort_dims={"heads": 4}))
    # Reshape: attribute form (opset 1-4), 0 copies, allowzero, symbol cancelling
    m = model([N("Reshape", ["x"], ["y"], shape=[0, -1])], [("x", F, [2, 3, 4])], ["y"], 4)
    out.append(case("reshape_attr_4", m, {"y": (F, [2, 12])}))
    m = model([N("Reshape", ["x", "s"], ["y"])], [("x", F, ["batch", 12, 64])], ["y"], 13,
              [i64("s", [0, 0, 4, -1])])
    out.append(case("reshape_zero_copies_unknown_13", m, {"y": (F, [-1, 12, 4, 16])}, ort_dims={"batch": 2}))
    m = model([N("Reshape", ["x", "s"], ["y"], allowzero=1), N("Reshape", ["x", "s2"], ["z"])],
              [("x", F, [0, 4])], ["y", "z"], 14, [i64("s", [4, 0]), i64("s2", [0, 2, 2])])
    out.append(case("reshape_allowzero_14", m, {"y": (F, [4, 0]), "z": (F, [0, 2, 2])}))
    m = model([N("Reshape", ["x", "s"], ["y"])], [("x", F, [])], ["y"], 13, [i64("s", [1, 1])])
    out.append(case("reshape_scalar_13", m, {"y": (F, [1, 1])}))
    # Flatten
    m = model([N("Flatten", ["x"], ["a"], axis=0), N("Flatten", ["x"], ["b"]), N("Flatten", ["x"], ["c"], axis=3)],
              [("x", F, [2, 3, 4])], ["a", "b", "c"], 9)
    out.append(case("flatten_9", m, {"a": (F, [1, 24]), "b": (F, [2, 12]), "c": (F, [24, 1])}))
    m = model([N("Flatten", ["x"], ["a"], axis=-1), N("Flatten", ["x"], ["b"], axis=-3)],
              [("x", F, [2, 3, 4])], ["a", "b"], 13)
    out.append(case("flatten_negative_13", m, {"a": (F, [6, 4]), "b": (F, [1, 24])}))
    # Squeeze / Unsqueeze: attribute before 13, input from 13, negative axes
    m = model([N("Squeeze", ["x"], ["a"], axes=[-1]), N("Squeeze", ["x"], ["b"]),
               N("Unsqueeze", ["x"], ["c"], axes=[0, -1]), N("Squeeze", ["x"], ["d"], axes=[1])],
              [("x", F, [3, 1, 2, 1])], ["a", "b", "c", "d"], 11)
    out.append(case("squeeze_unsqueeze_11", m, {"a": (F, [3, 1, 2]), "b": (F, [3, 2]), "c": (F, [1, 3, 1, 2, 1, 1]),
                                                "d": (F, [3, 2, 1])}))
    m = model([N("Squeeze", ["x", "ax"], ["a"]), N("Squeeze", ["x"], ["b"]), N("Unsqueeze", ["x", "ux"], ["c"]),
               N("Unsqueeze", ["sc", "z"], ["d"])],
              [("x", F, [3, 1, 2, 1]), ("sc", F, [])], ["a", "b", "c", "d"], 13,
              [i64("ax", [1, -1]), i64("ux", [1, -2]), i64("z", [0])])
    out.append(case("squeeze_unsqueeze_13", m, {"a": (F, [3, 2]), "b": (F, [3, 2]), "c": (F, [3, 1, 1, 2, 1, 1]),
                                                "d": (F, [1])}))
    m = model([N("Squeeze", ["x"], ["a"], axes=[0])], [("x", F, [1, 5])], ["a"], 1)
    out.append(case("squeeze_1", m, {"a": (F, [5])}))
    return out


def movement():
    out = []
    # Transpose: default reverse, perm; the value permuted feeds a Reshape
    m = model([N("Transpose", ["x"], ["a"]), N("Transpose", ["x"], ["b"], perm=[1, 0, 2]),
               N("Transpose", ["m"], ["mt"]), N("Flatten", ["mt"], ["mf"], axis=0), N("Squeeze", ["mf"], ["ms"], axes=[0]),
               N("Reshape", ["y", "ms"], ["r"])],
              [("x", F, [2, 3, 4]), ("y", F, [24])], ["a", "b", "mt", "r"], 11, [i64("m", [1, 2, 3, 4], [2, 2])])
    out.append(case("transpose_value_11", m, {"a": (F, [4, 3, 2]), "b": (F, [3, 2, 4]), "mt": (I64, [2, 2]),
                                              "r": (F, [1, 3, 2, 4])}))
    # Concat: shapes (axis -1), 300 inputs, value concatenated
    m = model([N("Concat", ["x", "y"], ["a"], axis=-1), N("Concat", ["x", "x"], ["b"], axis=0)],
              [("x", F, ["n", 3]), ("y", F, ["n", 5])], ["a", "b"], 11)
    out.append(case("concat_11", m, {"a": (F, [2, 8]), "b": (F, [4, 3])}, ["--dim", "n=2"]))
    m = model([N("Concat", ["one"] * 300, ["c"], axis=0), N("Slice", ["c", "st", "en"], ["c2"]),
               N("Reshape", ["x", "c2"], ["e"])],
              [("x", F, [1])], ["c", "e"], 13, [i64("one", [1]), i64("st", [298]), i64("en", [BIG])])
    out.append(case("concat_300_inputs_13", m, {"c": (I64, [300]), "e": (F, [1, 1])}))
    m = model([N("Concat", ["x", "x"], ["a"])], [("x", F, [2, 3])], ["a"], 1)
    out.append(case("concat_default_axis_1", m, {"a": (F, [2, 6])}, oracle="ORT has no Concat-1 kernel: spec, axis defaults to 1"))
    m = model([N("Concat", ["x", "e"], ["a"], axis=0)], [("x", F, [2, 3]), ("e", F, [0, 3])], ["a"], 13)
    out.append(case("concat_empty_13", m, {"a": (F, [2, 3])}))
    # Split: attribute (2-12), input (13+), equal, num_outputs (18), values
    m = model([N("Split", ["x"], ["a", "b"], axis=1, split=[1, 3]), N("Split", ["x"], ["c", "d"], axis=-1)],
              [("x", F, [2, 4, 6])], ["a", "b", "c", "d"], 11)
    out.append(case("split_attr_11", m, {"a": (F, [2, 1, 6]), "b": (F, [2, 3, 6]), "c": (F, [2, 4, 3]), "d": (F, [2, 4, 3])}))
    m = model([N("Split", ["x"], ["a", "b"], split=[1, 1])], [("x", F, [2, 4])], ["a", "b"], 2)
    out.append(case("split_attr_2", m, {"a": (F, [1, 4]), "b": (F, [1, 4])}))
    m = model([N("Split", ["x", "sp"], ["a", "b", "c"], axis=0), N("Shape", ["x"], ["s"]),
               N("Split", ["s", "sp2"], ["s0", "s1"]), N("Reshape", ["y", "s1"], ["r"])],
              [("x", F, [6, 4, 5])], ["a", "b", "c", "s0", "s1", "r"], 13, [i64("sp", [1, 2, 3]), i64("sp2", [1, 2])])
    m.graph.input.append(h.make_tensor_value_info("y", F, [20]))
    out.append(case("split_input_value_13", m, {"a": (F, [1, 4, 5]), "b": (F, [2, 4, 5]), "c": (F, [3, 4, 5]),
                                                "s0": (I64, [1]), "s1": (I64, [2]), "r": (F, [4, 5])}))
    m = model([N("Split", ["x"], ["a", "b", "c"], axis=1, num_outputs=3)], [("x", F, [2, 7])], ["a", "b", "c"], 18)
    out.append(case("split_num_outputs_18", m, {"a": (F, [2, 3]), "b": (F, [2, 3]), "c": (F, [2, 1])}))
    # Slice: attributes (1-9), inputs (10+), clamping, negative steps
    m = model([N("Slice", ["x"], ["a"], starts=[1, 0], ends=[1000, -1]), N("Slice", ["x"], ["b"], axes=[1], starts=[-2], ends=[BIG])],
              [("x", F, [4, 5])], ["a", "b"], 9)
    out.append(case("slice_attr_9", m, {"a": (F, [3, 4]), "b": (F, [4, 2])}))
    m = model([N("Slice", ["x", "st", "en", "ax", "sp"], ["a"]), N("Slice", ["x", "st2", "en2"], ["b"]),
               N("Slice", ["x", "st3", "en3", "ax3", "sp3"], ["c"]), N("Slice", ["x", "st4", "en4", "ax4", "sp4"], ["d"])],
              [("x", F, [10, 6])], ["a", "b", "c", "d"], 13,
              [i64("st", [BIG, SMALL]), i64("en", [SMALL, BIG]), i64("ax", [0, -1]), i64("sp", [-1, 2]),
               i64("st2", [SMALL]), i64("en2", [BIG]),
               i64("st3", [-1]), i64("en3", [SMALL]), i64("ax3", [1]), i64("sp3", [-2]),
               i64("st4", [SMALL]), i64("en4", [SMALL]), i64("ax4", [0]), i64("sp4", [-1])])
    out.append(case("slice_extremes_13", m, {"a": (F, [10, 3]), "b": (F, [10, 6]), "c": (F, [10, 3]), "d": (F, [1, 6])}))
    m = model([N("Shape", ["x"], ["s"]), N("Slice", ["s", "one", "big"], ["t"]), N("Concat", ["m1", "t"], ["shp"], axis=0),
               N("Reshape", ["x", "shp"], ["y"]), N("Slice", ["s", "m1", "sm", "zero", "m1"], ["rev"]),
               N("Reshape", ["x", "rev"], ["yr"])],
              [("x", F, ["b", 3, 4])], ["t", "shp", "y", "rev", "yr"], 13,
              [i64("one", [1]), i64("big", [BIG]), i64("m1", [-1]), i64("sm", [SMALL]), i64("zero", [0])])
    out.append(case("slice_shape_value_13", m, {"t": (I64, [2]), "shp": (I64, [3]), "y": (F, [2, 3, 4]),
                                                "rev": (I64, [3]), "yr": (F, [4, 3, 2])}, ["--dim", "b=2"]))
    m = model([N("Slice", ["x", "st", "en"], ["a"])], [("x", F, ["n", 4])], ["a"], 10,
              [i64("st", [0, 1]), i64("en", [BIG, 3])])
    out.append(case("slice_unknown_whole_10", m, {"a": (F, [-1, 2])}, ort_dims={"n": 3}))
    # Expand / Tile / Pad
    m = model([N("Expand", ["x", "s"], ["a"]), N("Shape", ["y"], ["ys"]), N("Expand", ["x", "ys"], ["b"]),
               N("Expand", ["z", "one"], ["c"])],
              [("x", F, [3, 1]), ("y", F, ["n", 3, 6]), ("z", F, [4, 5])], ["a", "b", "c"], 13,
              [i64("s", [2, 1, 6]), i64("one", [1, 1])])
    out.append(case("expand_13", m, {"a": (F, [2, 3, 6]), "b": (F, [2, 3, 6]), "c": (F, [4, 5])}, ["--dim", "n=2"]))
    m = model([N("Expand", ["x", "s"], ["a"])], [("x", F, [3, 1])], ["a"], 8, [i64("s", [2, 1, 1])])
    out.append(case("expand_8", m, {"a": (F, [2, 3, 1])}))
    m = model([N("Tile", ["x", "r"], ["a"]), N("Shape", ["x"], ["s"]), N("Tile", ["s", "two"], ["ss"]),
               N("Reshape", ["y", "ss"], ["b"])],
              [("x", F, [2, 3]), ("y", F, [36])], ["a", "ss", "b"], 13, [i64("r", [2, 1]), i64("two", [2])])
    out.append(case("tile_13", m, {"a": (F, [4, 3]), "ss": (I64, [4]), "b": (F, [2, 3, 2, 3])}))
    m = model([N("Tile", ["x", "t", "ax"], ["a"])], [("x", F, [2, 3])], ["a"], 1,
              [h.make_tensor("t", I64, [], [3]), h.make_tensor("ax", I64, [], [1])])
    out.append(case("tile_1", m, {"a": (F, [2, 9])}, oracle="ORT has no Tile-1 kernel: spec, tiles copies along axis"))
    m = model([N("Pad", ["x"], ["a"], pads=[1, 0, 1, 2])], [("x", F, [2, 3])], ["a"], 2)
    out.append(case("pad_attr_2", m, {"a": (F, [4, 5])}))
    m = model([N("Pad", ["x"], ["a"], paddings=[1, 0, 1, 2])], [("x", F, [2, 3])], ["a"], 1)
    out.append(case("pad_attr_1", m, {"a": (F, [4, 5])}, oracle="ORT has no Pad-1 kernel: spec, paddings as Pad-2's pads"))
    m = model([N("Pad", ["x", "p"], ["a"], mode="reflect"), N("Pad", ["x", "q", "v"], ["b"])],
              [("x", F, [4, 5])], ["a", "b"], 11, [i64("p", [1, 2, 1, 2]), i64("q", [0, -1, 2, -2]), f32("v", [1.0], [])])
    out.append(case("pad_input_11", m, {"a": (F, [6, 9]), "b": (F, [6, 2])}))
    m = model([N("Pad", ["x", "p", "", "ax"], ["a"])], [("x", F, [4, 5, 6])], ["a"], 18,
              [i64("p", [1, 3, 2, 0]), i64("ax", [-1, 0])])
    out.append(case("pad_axes_18", m, {"a": (F, [7, 5, 9])}))
    m = model([N("CenterCropPad", ["x", "s"], ["a"], axes=[0, -1])], [("x", F, [4, 5, 6])], ["a"], 18, [i64("s", [2, 9])])
    out.append(case("center_crop_pad_18", m, {"a": (F, [2, 5, 9])}))
    return out


def gathers():
    out = []
    m = model([N("Gather", ["x", "i"], ["a"], axis=1), N("Gather", ["x", "j"], ["b"]), N("Shape", ["x"], ["s"]),
               N("Gather", ["s", "k"], ["g"]), N("Reshape", ["y", "g"], ["r"])],
              [("x", F, ["n", 5, 6]), ("y", F, [12])], ["a", "b", "g", "r"], 11,
              [i64("i", [0, -1, 2, 1], [2, 2]), h.make_tensor("j", I64, [], [-1]), i64("k", [-1, 0])])
    out.append(case("gather_11", m, {"a": (F, [2, 2, 2, 6]), "b": (F, [5, 6]), "g": (I64, [2]), "r": (F, [6, 2])},
                    ["--dim", "n=2"]))
    m = model([N("Gather", ["x", "i"], ["a"], axis=1)], [("x", F, [3, 4]), ("i", I32, [2, 5])], ["a"], 13)
    out.append(case("gather_runtime_indices_13", m, {"a": (F, [3, 2, 5])},
                    ort_inputs=[{"name": "x", "dtype": "float32", "shape": [3, 4]},
                                {"name": "i", "dtype": "int32", "shape": [2, 5], "low": 0, "high": 4}]))
    m = model([N("GatherElements", ["x", "i"], ["a"], axis=1), N("GatherElements", ["c", "ci"], ["cv"]),
               N("Reshape", ["y", "cv"], ["r"])],
              [("x", F, [3, 4])], ["a", "cv", "r"], 13,
              [i64("i", [0, 1, 2, 3, 3, 2], [3, 2]), i64("c", [2, 3, 4, 5]), i64("ci", [3, 0]), f32("y", [0.0] * 10, [10])])
    out.append(case("gather_elements_13", m, {"a": (F, [3, 2]), "cv": (I64, [2]), "r": (F, [5, 2])}))
    m = model([N("GatherND", ["x", "i"], ["a"]), N("GatherND", ["x", "j"], ["b"], batch_dims=1)],
              [("x", F, [2, 3, 4])], ["a", "b"], 12, [i64("i", [0, 1, 1, 2], [2, 2]), i64("j", [0, 1, 2, 0], [2, 2, 1])])
    out.append(case("gather_nd_12", m, {"a": (F, [2, 4]), "b": (F, [2, 2, 4])}))
    m = model([N("ScatterElements", ["x", "i", "u"], ["a"], axis=1, reduction="add"), N("ScatterND", ["x", "j", "v"], ["b"])],
              [("x", F, [3, 4])], ["a", "b"], 16,
              [i64("i", [0, 1, 2], [3, 1]), f32("u", [1.0, 2.0, 3.0], [3, 1]), i64("j", [1], [1, 1]), f32("v", [0.0] * 4, [1, 4])])
    out.append(case("scatter_16", m, {"a": (F, [3, 4]), "b": (F, [3, 4])}))
    m = model([N("Scatter", ["x", "i", "u"], ["c"])], [("x", F, [3, 4])], ["c"], 9,
              [i64("i", [0, 1, 2], [3, 1]), f32("u", [1.0, 2.0, 3.0], [3, 1])])
    out.append(case("scatter_9", m, {"c": (F, [3, 4])}))
    m = model([N("Compress", ["x", "c"], ["a"], axis=1), N("Compress", ["x", "c"], ["b"])], [("x", F, [3, 4])], ["a", "b"], 11,
              [h.make_tensor("c", B, [3], [1, 0, 1])])
    out.append(case("compress_known_11", m, {"a": (F, [3, 2]), "b": (F, [2])}))
    m = model([N("Compress", ["x", "c"], ["a"], axis=0), N("Compress", ["x", "c"], ["b"])], [("x", F, [3, 4]), ("c", B, [3])],
              ["a", "b"], 11)
    out.append(case("compress_data_bound_11", m, {"a": (F, [3, 4]), "b": (F, [3])},
                    oracle="data-dependent: roamc plans the upper bound (axis length / condition length), ORT gives the actual count"))
    return out


def generators():
    out = []
    m = model([N("Range", ["s", "l", "d"], ["a"]), N("Range", ["fs", "fl", "fd"], ["b"]), N("Range", ["l", "s", "m"], ["c"]),
               N("Range", ["s", "s", "d"], ["e"])],
              [], ["a", "b", "c", "e"], 11,
              [h.make_tensor(n, I64, [], [v]) for n, v in (("s", 0), ("l", 10), ("d", 3), ("m", -4))] +
              [h.make_tensor(n, F, [], [v]) for n, v in (("fs", 1.0), ("fl", 2.0), ("fd", 0.3))])
    out.append(case("range_11", m, {"a": (I64, [4]), "b": (F, [4]), "c": (I64, [3]), "e": (I64, [0])}))
    # Range from a shape, its value reshaped
    m = model([N("Shape", ["x"], ["s"]), N("Gather", ["s", "z"], ["n"]), N("Range", ["one", "n", "one"], ["r"]),
               N("Reshape", ["y", "r"], ["yr"])],
              [("x", F, ["b", 7]), ("y", F, [6])], ["r", "yr"], 11,
              [h.make_tensor("z", I64, [], [0]), h.make_tensor("one", I64, [], [1])])
    out.append(case("range_from_shape_11", m, {"r": (I64, [3]), "yr": (F, [1, 2, 3])}, ["--dim", "b=4"]))
    m = model([N("Range", ["s", "l", "d"], ["a"])], [], ["a"], 11,
              [h.make_tensor(n, I64, [], [v]) for n, v in (("s", 0), ("l", 10**12), ("d", 1))])
    out.append(case("range_1e12_11", m, {"a": (I64, [10**12])}, oracle="8 TB to run: spec by hand"))
    m = model([N("OneHot", ["i", "d", "v"], ["a"]), N("OneHot", ["i", "d", "v"], ["b"], axis=0)],
              [("i", I64, [2, 3])], ["a", "b"], 11, [h.make_tensor("d", F, [], [5.0]), f32("v", [0.0, 1.0])])
    out.append(case("one_hot_11", m, {"a": (F, [2, 3, 5]), "b": (F, [5, 2, 3])}))
    m = model([N("EyeLike", ["x"], ["a"], dtype=I64, k=1), N("EyeLike", ["x"], ["b"])], [("x", F, [3, 4])], ["a", "b"], 9)
    out.append(case("eye_like_9", m, {"a": (I64, [3, 4]), "b": (F, [3, 4])}))
    m = model([N("Trilu", ["x"], ["a"], upper=0), N("ReverseSequence", ["x", "l"], ["b"], batch_axis=1, time_axis=0)],
              [("x", F, [3, 4])], ["a", "b"], 14, [i64("l", [1, 2, 3, 3])])
    out.append(case("trilu_reverse_sequence_14", m, {"a": (F, [3, 4]), "b": (F, [3, 4])}))
    return out


def hostile():
    """Each must fail cleanly, naming the node, without allocating."""
    out = []

    def bad(name, m, error, opset_note=""):
        out.append(case(name, m, {}, error=error, oracle="a failure: ORT refuses too or cannot run it" + opset_note))

    m = model([N("ConstantOfShape", ["s"], ["c"], name="huge_cos")], [], ["c"], 9, [i64("s", [2**40, 2**40])])
    bad("hostile_constant_of_shape_2^80", m, "huge_cos")
    m = model([N("Reshape", ["x", "s"], ["y"], name="big_reshape")], [("x", F, [2, 3])], ["y"], 13, [i64("s", [2**31, 2**31])])
    bad("hostile_reshape_2^62", m, "big_reshape")
    m = model([N("Reshape", ["x", "s"], ["y"], name="bad_reshape")], [("x", F, [2, 3])], ["y"], 13, [i64("s", [4, -1])])
    bad("hostile_reshape_mismatch", m, "bad_reshape")
    m = model([N("Tile", ["x", "r"], ["y"], name="huge_tile")], [("x", F, [4, 4])], ["y"], 13, [i64("r", [2**40, 2**40])])
    bad("hostile_tile_huge", m, "huge_tile")
    m = model([N("Range", ["s", "l", "d"], ["a"], name="huge_range")], [], ["a"], 11,
              [h.make_tensor(n, I64, [], [v]) for n, v in (("s", SMALL), ("l", BIG), ("d", 1))])
    bad("hostile_range_2^64", m, "huge_range")
    m = model([N("Range", ["s", "l", "d"], ["a"], name="zero_delta")], [], ["a"], 11,
              [h.make_tensor(n, I64, [], [v]) for n, v in (("s", 0), ("l", 5), ("d", 0))])
    bad("hostile_range_zero_delta", m, "zero_delta")
    m = model([N("Gather", ["x", "i"], ["y"], name="oob_gather")], [("x", F, [3, 4])], ["y"], 13, [i64("i", [0, 3])])
    bad("hostile_gather_out_of_range", m, "oob_gather")
    m = model([N("Gather", ["x", "i"], ["y"], name="neg_gather", axis=1)], [("x", F, [3, 4])], ["y"], 13, [i64("i", [-5])])
    bad("hostile_gather_negative_out_of_range", m, "neg_gather")
    m = model([N("Gather", ["x", "i"], ["y"], name="scalar_gather")], [("x", F, [])], ["y"], 13, [i64("i", [0])])
    bad("hostile_gather_scalar", m, "scalar_gather")
    m = model([N("Reshape", [], ["y"], name="no_inputs")], [], ["y"], 13)
    bad("hostile_reshape_no_inputs", m, "no_inputs")
    m = model([N("Squeeze", ["x"], ["y"], name="sq_not_one", axes=[0])], [("x", F, [3, 1])], ["y"], 11)
    bad("hostile_squeeze_not_one", m, "sq_not_one")
    m = model([N("Unsqueeze", ["x", "a"], ["y"], name="unsq_dup")], [("x", F, [3])], ["y"], 13, [i64("a", [0, 0])])
    bad("hostile_unsqueeze_repeated", m, "unsq_dup")
    m = model([N("Transpose", ["x"], ["y"], name="bad_perm", perm=[0, 0])], [("x", F, [3, 1])], ["y"], 13)
    bad("hostile_transpose_bad_perm", m, "bad_perm")
    m = model([N("Split", ["x", "s"], ["a", "b"], name="bad_split")], [("x", F, [5])], ["a", "b"], 13, [i64("s", [2, 2])])
    bad("hostile_split_sum", m, "bad_split")
    m = model([N("Split", ["x"], ["a", "b"], name="odd_split")], [("x", F, [5])], ["a", "b"], 13)
    bad("hostile_split_uneven_13", m, "odd_split")
    m = model([N("Flatten", ["x"], ["y"], name="flat_axis", axis=4)], [("x", F, [2, 3])], ["y"], 13)
    bad("hostile_flatten_axis", m, "flat_axis")
    m = model([N("ConstantOfShape", ["s"], ["c"], name="neg_cos")], [], ["c"], 9, [i64("s", [2, -3])])
    bad("hostile_constant_of_shape_negative", m, "neg_cos")
    m = model([N("Constant", [], ["c"], name="empty_const")], [], ["c"], 13)
    bad("hostile_constant_no_value", m, "empty_const")
    m = model([N("Pad", ["x", "p"], ["y"], name="crop_too_much")], [("x", F, [2, 3])], ["y"], 13, [i64("p", [0, -2, 0, -2])])
    bad("hostile_pad_negative_size", m, "crop_too_much")
    m = model([N("Pad", ["x", "p"], ["y"], name="pad_2^63")], [("x", F, [2, 3])], ["y"], 13, [i64("p", [2**62, 0, 2**62, 0])])
    bad("hostile_pad_huge", m, "pad_2^63")
    m = model([N("Slice", ["x", "s", "e", "a", "st"], ["y"], name="slice_min_step")], [("x", T.UINT8, [2**61])], ["y"], 13,
              [i64("s", [BIG]), i64("e", [SMALL]), i64("a", [0]), i64("st", [SMALL])])
    out.append(case("slice_int64_min_step_13", m, {"y": (T.UINT8, [1])}, oracle="2^61 bytes: spec by hand"))
    m = model([N("Expand", ["x", "s"], ["y"], name="neg_expand")], [("x", F, [3])], ["y"], 13, [i64("s", [-2, 3])])
    bad("hostile_expand_negative", m, "neg_expand")
    m = model([N("Slice", ["x", "s", "e", "a", "st"], ["y"], name="zero_step")], [("x", F, [3])], ["y"], 13,
              [i64("s", [0]), i64("e", [3]), i64("a", [0]), i64("st", [0])])
    bad("hostile_slice_zero_step", m, "zero_step")
    m = model([N("Concat", ["x", "y"], ["z"], name="rank_mix", axis=0)], [("x", F, [3]), ("y", F, [3, 1])], ["z"], 13)
    bad("hostile_concat_rank_mismatch", m, "rank_mix")
    m = model([N("Unsqueeze", ["x", "a"], ["y"], name="deep_unsq")], [("x", F, [1] * 30)], ["y"], 13, [i64("a", list(range(30)))])
    bad("hostile_unsqueeze_rank_60", m, "deep_unsq")
    huge = onnx.TensorProto(name="v", data_type=F, dims=[2**40, 2**40])
    m = model([N("Constant", [], ["c"], name="huge_const", value=huge)], [], ["c"], 13)
    bad("hostile_constant_2^80_no_data", m, "huge_const")
    # degenerate but valid: empty tensors and scalars keep their shapes
    m = model([N("Slice", ["x", "s", "e"], ["a"]), N("Transpose", ["x"], ["b"]), N("Tile", ["x", "r"], ["c"]),
               N("Shape", ["x"], ["d"]), N("Expand", ["x", "es"], ["f"])],
              [("x", F, [0, 3])], ["a", "b", "c", "d", "f"], 13,
              [i64("s", [0, 1]), i64("e", [5, 2]), i64("r", [5, 2]), i64("es", [4, 0, 3])])
    out.append(case("empty_tensors_13", m, {"a": (F, [0, 1]), "b": (F, [3, 0]), "c": (F, [0, 6]), "d": (I64, [2]),
                                            "f": (F, [4, 0, 3])}))
    return out


OPS = ["CenterCropPad", "Compress", "Concat", "Constant", "ConstantOfShape", "Expand", "EyeLike", "Flatten", "Gather",
       "GatherElements", "GatherND", "Identity", "OneHot", "Pad", "Range", "Reshape", "ReverseSequence", "Scatter",
       "ScatterElements", "ScatterND", "Shape", "Size", "Slice", "Split", "Squeeze", "Tile", "Transpose", "Trilu",
       "Unsqueeze"]

WEIRD = dict(axis=2**40, axes=[SMALL, 0], perm=[99, 0], split=[-1, 2], num_outputs=0, pads=[-(2**62), 2**62],
             paddings=[BIG, 0], start=SMALL, end=BIG, starts=[BIG], ends=[SMALL], shape=[-7, 0], batch_dims=-3,
             dtype=999, k=BIG, allowzero=1, time_axis=5, batch_axis=-9)


def malformed():
    """Every op with missing, scalar, empty, huge, unknown and extreme
    inputs and attributes, in old and new opsets: the only requirement is
    no crash (a clean failure or unknown outputs)."""
    out = []
    variants = {
        "none": ([], []),
        "scalars": ([("i0", F, []), ("i1", I64, []), ("i2", I64, []), ("i3", I64, [])], []),
        "unknown": ([("i0", F, None), ("i1", I64, None), ("i2", I64, None), ("i3", I64, None)], []),
        "empty": ([("i0", F, [0, 0]), ("i1", I64, [0]), ("i2", I64, [0]), ("i3", I64, [0])], []),
        "huge": ([("i0", F, [2**62, 1]), ("i1", I64, [2**31, 2**31]), ("i2", I64, [1]), ("i3", I64, [1])], []),
        "extreme_values": ([("i0", F, [3, 4])], [i64("i1", [SMALL, BIG]), i64("i2", [BIG, -1]), i64("i3", [SMALL, -1])]),
        "scalar_values": ([("i0", F, [3, 4])], [h.make_tensor(n, I64, [], [-1]) for n in ("i1", "i2", "i3")]),
    }
    for op in OPS:
        for vname, (ins, inits) in variants.items():
            for opset in (1, 11, 18):
                names = [n for n, _, _ in ins] + [t.name for t in inits]
                attrs = {} if vname != "extreme_values" else WEIRD
                node = h.make_node(op, names, ["o0", "o1"] if op == "Split" else ["o0"], name="n_" + op, **attrs)
                m = model([node], ins, ["o0"], opset, inits)
                out.append(case("malformed_%s_%s_%d" % (op, vname, opset), m, {}, no_crash=True,
                                oracle="malformed: only checked not to crash"))
    return out


def unknown_values():
    """Shape-like inputs whose values are unknown (graph inputs): the rank
    still follows from their length, the dims stay unknown."""
    out = []

    def vals(name, v):
        return {"name": name, "dtype": "int64", "shape": [len(v)], "values": v}

    m = model([N("Reshape", ["x", "s"], ["a"]), N("ConstantOfShape", ["s"], ["b"]), N("Expand", ["y", "s"], ["c"])],
              [("x", F, [24]), ("s", I64, [3]), ("y", F, [3, 1])], ["a", "b", "c"], 13)
    out.append(case("unknown_shape_values_13", m, {"a": (F, [-1, -1, -1]), "b": (F, [-1, -1, -1]), "c": (F, [-1, 3, -1])},
                    ort_inputs=[{"name": "x", "dtype": "float32", "shape": [24]}, vals("s", [2, 3, 4]),
                                {"name": "y", "dtype": "float32", "shape": [3, 1]}]))
    m = model([N("OneHot", ["i", "d", "v"], ["a"]), N("Tile", ["x", "r"], ["b"]), N("Squeeze", ["x", "ax"], ["c"])],
              [("i", I64, [2, 3]), ("d", I64, []), ("x", F, [1, 0, 1]), ("r", I64, [3]), ("ax", I64, [2])],
              ["a", "b", "c"], 13, [f32("v", [0.0, 1.0])])
    out.append(case("unknown_depth_repeats_axes_13", m, {"a": (F, [2, 3, -1]), "b": (F, [-1, 0, -1]), "c": (F, [-1])},
                    ort_inputs=[{"name": "i", "dtype": "int64", "shape": [2, 3]},
                                {"name": "d", "dtype": "int64", "shape": [], "values": [4]},
                                {"name": "x", "dtype": "float32", "shape": [1, 0, 1]}, vals("r", [2, 5, 3]),
                                vals("ax", [0, 2])]))
    m = model([N("Slice", ["x", "st", "en"], ["a"]), N("Slice", ["x", "st", "en", "ax"], ["b"])],
              [("x", F, [5, 6, 7]), ("st", I64, [2]), ("en", I64, [2]), ("ax", I64, [2])], ["a", "b"], 13)
    out.append(case("unknown_slice_bounds_13", m, {"a": (F, [-1, -1, 7]), "b": (F, [-1, -1, -1])},
                    ort_inputs=[{"name": "x", "dtype": "float32", "shape": [5, 6, 7]}, vals("st", [1, 2]),
                                vals("en", [3, 4]), vals("ax", [0, 2])]))
    m = model([N("Slice", ["x"], ["a"], starts=[0, 1], ends=[BIG, 3])], [("x", F, ["n", 4])], ["a"], 1)
    out.append(case("slice_attr_unknown_dim_1", m, {"a": (F, [-1, 2])},
                    oracle="ORT has no Slice-1 kernel: spec, x[0:BIG] keeps n whole, [1:3] gives 2"))
    m = model([N("Range", ["s", "l", "d"], ["a"], name="r")], [("s", I64, []), ("l", I64, []), ("d", I64, [])], ["a"], 11)
    out.append(case("range_data_bound_flag_11", m, {"a": (I64, [5])}, ["--dim", "a:count=5"],
                    oracle="data-dependent count bound with --dim a:count (named after the output): spec by hand"))
    m = model([N("Split", ["x", "sp"], ["a", "b"], axis=1)], [("x", F, [2, 5])], ["a", "b"], 1, [i64("sp", [2, 3])])
    out.append(case("split_input_1", m, {"a": (F, [2, 2]), "b": (F, [2, 3])},
                    oracle="ORT has no Split-1 kernel: spec, the optional second input gives the lengths"))
    m = model([N("Shape", ["x"], ["s"]), N("Split", ["s"], ["s0", "s1", "s2"], num_outputs=3), N("Reshape", ["y", "s0"], ["r"])],
              [("x", F, [4, 6, 1, 2, 3]), ("y", F, [24])], ["s0", "s1", "s2", "r"], 18)
    out.append(case("split_num_outputs_value_18", m, {"s0": (I64, [2]), "s1": (I64, [2]), "s2": (I64, [1]),
                                                      "r": (F, [4, 6])}))
    return out


def cases():
    return unknown_values() + constants() + shapes_and_views() + movement() + gathers() + generators() + hostile() + malformed()


# --------------------------------------------------------------- runner

def parse_report(text):
    """name -> (elem, dims); dims None for an unknown rank, -1 for unknown dims.
    Accepts {"values": [{"name", "elem_type"|"type", "dims"|"shape"}]} or
    {name: {"type"|"elem_type", "shape"|"dims"}}."""
    doc = json.loads(text)
    rows = doc.get("values", doc) if isinstance(doc, dict) else doc
    if isinstance(rows, dict):
        rows = [dict(v, name=k) for k, v in rows.items() if isinstance(v, dict)]
    out = {}
    for r in rows:
        elem = r.get("elem_type", r.get("type", r.get("elem", 0)))
        dims = r.get("dims", r.get("shape"))
        if dims is not None:
            dims = [d if isinstance(d, int) and d >= 0 else (d.get("value", -1) if isinstance(d, dict) else -1) for d in dims]
            dims = [d if isinstance(d, int) and d >= 0 else -1 for d in dims]
        out[r["name"]] = (elem, dims)
    return out


def run_roamc(roamc, path, c):
    cmd = [roamc, "shapes", path] + c["bindings"] + ["--report", "json"]
    if not os.path.basename(roamc).startswith("roamc"):
        cmd = [roamc, path] + c["bindings"] + ["--report", "json"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def check_case(roamc, tmp, c):
    path = os.path.join(tmp, c["name"] + ".onnx")
    onnx.save(c["model"], path)
    rc, out, err = run_roamc(roamc, path, c)
    if c.get("no_crash"):
        if rc > 2 or "Sanitizer" in err or "runtime error" in err:
            return "crashed (rc %d): %s" % (rc, err.strip()[-600:])
        return None
    if "error" in c:
        if rc == 0:
            return "expected a failure naming %r, got success" % c["error"]
        if rc > 2 or "Sanitizer" in err or "runtime error" in err:
            return "crashed (rc %d): %s" % (rc, err.strip()[-400:])
        if c["error"] not in err:
            return "failure does not name %r: %s" % (c["error"], err.strip())
        return None
    if rc != 0:
        return "rc %d: %s" % (rc, err.strip()[-400:])
    got = parse_report(out)
    for name, (elem, dims) in c["expect"].items():
        if name not in got:
            return "no value %s in the report" % name
        ge, gd = got[name]
        if ge != elem or gd != dims:
            return "%s: expected (%s, %s), got (%s, %s)" % (name, elem, dims, ge, gd)
    return None


def ort_inputs(c):
    if "ort_inputs" in c:
        return c["ort_inputs"]
    binds, dims = {}, dict(c.get("ort_dims", {}))
    b = c["bindings"]
    for flag, spec in zip(b[::2], b[1::2]):
        k, v = spec.rsplit("=", 1)
        if flag == "--input-shape":
            binds[k] = [int(x) for x in v.split(",")]
        else:
            dims[k] = int(v)
    inits = {t.name for t in c["model"].graph.initializer}
    names = {F: "float32", I64: "int64", I32: "int32", B: "bool"}
    specs = []
    for vi in c["model"].graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        shape = binds.get(vi.name) or [d.dim_value if d.HasField("dim_value") else dims[d.dim_param] for d in tt.shape.dim]
        specs.append({"name": vi.name, "dtype": names[tt.elem_type], "shape": shape, "low": 0, "high": 2})
    return specs


def oracle_case(tmp, c):
    """Runs the case in ONNX Runtime; returns a mismatch, None, or 'skip'."""
    if "oracle" in c or c.get("skip_ort"):
        return "skip"
    path = os.path.join(tmp, c["name"] + ".ort.onnx")
    onnx.save(c["model"], path)
    spec = os.path.join(tmp, c["name"] + ".json")
    with open(spec, "w") as f:
        json.dump(ort_inputs(c), f)
    js = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ort_shapes.js")
    p = subprocess.run(["node", js, path, spec], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        return "ORT failed: " + p.stderr.strip()[-300:]
    got = json.loads(p.stdout)
    for name, (elem, dims) in c["expect"].items():
        g = got.get(name)
        if g is None:
            return "ORT has no output " + name
        ok = g["type"] == elem and len(g["shape"]) == len(dims) and all(d < 0 or d == x for d, x in zip(dims, g["shape"]))
        if not ok:
            return "%s: expected (%s, %s), ORT (%s, %s)" % (name, elem, dims, g["type"], g["shape"])
    return None


def main(argv):
    args = [a for a in argv[1:]]
    oracle = "--oracle" in args
    pick = None
    if "-k" in args:
        pick = args[args.index("-k") + 1]
        del args[args.index("-k"):args.index("-k") + 2]
    args = [a for a in args if a != "--oracle"]
    roamc = args[0] if args else "/work/main/build/roamc"
    fails = skipped = 0
    all_cases = [c for c in cases() if not pick or pick in c["name"]]
    with tempfile.TemporaryDirectory() as tmp, concurrent.futures.ThreadPoolExecutor(8) as pool:
        run = (lambda c: oracle_case(tmp, c)) if oracle else (lambda c: check_case(roamc, tmp, c))
        for c, why in zip(all_cases, pool.map(run, all_cases)):
            if why == "skip":
                skipped += 1
                print("SKIP %s (%s)" % (c["name"], c.get("oracle", "not run in ORT")))
            elif why:
                fails += 1
                print("FAIL %s: %s" % (c["name"], why))
            else:
                print("PASS %s" % c["name"])
    what = "ORT agrees" if oracle else "passed"
    print("%d/%d %s, %d failed, %d skipped" % (len(all_cases) - fails - skipped, len(all_cases), what, fails, skipped))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
