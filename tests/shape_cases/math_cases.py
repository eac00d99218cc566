#!/usr/bin/python3
"""Shape-inference cases for the math family (frontend/infer/infer_math.c).

usage: /usr/bin/python3 tests/shape_cases/math_cases.py [ROAMC] [--no-ort] [--only SUBSTR] [-v]

cases() returns dicts {"name", "model", "bindings", "expect"} (expect:
{value: (elem_type, [dims])}) and, for malformed models, "fail": a piece of
the message roamc must fail with.  The runner saves each model, runs
`ROAMC shapes MODEL BINDINGS --report json` (ROAMC defaults to
build/roamc) and compares; then, unless --no-ort or the case says
"ort": False, it runs the model in ONNX Runtime (tests/ort_shapes.js, every
expected value made a graph output) and checks that ORT agrees with the
expectation too: the expectations are ORT's, not roamc's.  Cases ORT cannot
check (unknown dims, malformed models, forms ORT does not run) say where
their expectation comes from.

Values: roamc's report has no values, so constant evaluation is checked
through a probe: Equal(value, expected) -> Cast -> ReduceMin gives [1] when
every element matches, [0] otherwise; ReduceSum of a [2,3] tensor over that
axis with keepdims=1 has shape [2,1] or [1,3].  An unknown value leaves the
probe's dims unknown.  ORT runs the same probe, so the expected values are
ORT's as well.
"""
import concurrent.futures, json, os, shutil, subprocess, sys, tempfile

import onnx
from onnx import TensorProto as TP
from onnx import helper as H

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
ORT_RUNNER = os.path.join(REPO, "tests", "ort_shapes.js")

F, D, F16 = TP.FLOAT, TP.DOUBLE, TP.FLOAT16
I64, I32, I8, U8, B = TP.INT64, TP.INT32, TP.INT8, TP.UINT8, TP.BOOL
NUMPY = {F: "float32", D: "float64", I64: "int64", I32: "int32", I8: "int8", U8: "uint8", B: "bool"}

# --------------------------------------------------------------- builders


def ir_for(opset):
    return 7 if opset <= 15 else 8 if opset <= 18 else 9


def mk(nodes, inputs, outputs, opset, inits=()):
    g = H.make_graph(nodes, "g", [H.make_tensor_value_info(n, e, d) for n, e, d in inputs],
                     [H.make_empty_tensor_value_info(o) for o in outputs], initializer=list(inits))
    return H.make_model(g, opset_imports=[H.make_opsetid("", opset)], ir_version=ir_for(opset),
                        producer_name="math-cases")


def const(name, elem, dims, vals):
    return H.make_tensor(name, elem, dims, vals)


def case(name, model, bindings, expect, **kw):
    d = {"name": name, "model": model, "bindings": list(bindings), "expect": expect}
    d.update(kw)
    return d


BIND = ["--dim", "batch=2", "--dim", "w=5"]


def axes_nodes(op, x, y, axes, opset, keepdims=None, tag="", inits=None, since=18, **attrs):
    """A reduction with `axes` as attribute or input, as opset wants."""
    if keepdims is not None:
        attrs["keepdims"] = keepdims
    if axes is None:
        return [H.make_node(op, [x], [y], **attrs)]
    if opset >= since:
        name = tag + "axes_" + y
        inits.append(const(name, I64, [len(axes)], axes))
        return [H.make_node(op, [x, name], [y], **attrs)]
    return [H.make_node(op, [x], [y], axes=axes, **attrs)]


def probe(v, elem, shape, expected, opset, tag):
    """Nodes and initializers that turn value v into the shape of tag+'_p':
    [2,1] when v == expected everywhere, [1,3] otherwise (opset >= 13)."""
    nodes, inits = [], []
    inits.append(const(tag + "_e", elem, shape, expected))
    inits.append(const(tag + "_x", F, [2, 3], [0.0] * 6))
    nodes.append(H.make_node("Equal", [v, tag + "_e"], [tag + "_eq"]))
    nodes.append(H.make_node("Cast", [tag + "_eq"], [tag + "_eqi"], to=I64))
    r = len(shape)
    m1 = tag + "_m1"
    if r == 0:
        inits.append(const(tag + "_z", I64, [1], [0]))
        nodes.append(H.make_node("Add", [tag + "_eqi", tag + "_z"], [m1]))
    else:
        nodes += axes_nodes("ReduceMin", tag + "_eqi", tag + "_m", None, opset, keepdims=1)
        if r == 1:
            m1 = tag + "_m"
        else:
            nodes += axes_nodes("ReduceMin", tag + "_m", m1, list(range(r - 1)), opset, keepdims=0, inits=inits)
    nodes.append(H.make_node("ReduceSum", [tag + "_x", m1], [tag + "_p"], keepdims=1))
    return nodes, inits


def value_case(name, opset, nodes, inits, v, elem, shape, expected, equal=True, inputs=(), bindings=(), **kw):
    """A model computing v from constants, then the probe."""
    pn, pi = probe(v, elem, shape, expected, opset, "pr")
    m = mk(nodes + pn, list(inputs), ["pr_p"], opset, list(inits) + pi)
    return case(name, m, bindings, {"pr_p": (F, [2, 1] if equal else [1, 3])}, **kw)


# ---------------------------------------------------------------- unary

# op -> (first opset, input type, output type or None for the input's, attrs)
UNARY = {
    "Relu": (6, F, None, {}), "Sigmoid": (6, F, None, {}), "Tanh": (6, F, None, {}), "Exp": (6, F, None, {}),
    "Log": (6, F, None, {}), "Sqrt": (6, F, None, {}), "Abs": (6, F, None, {}), "Neg": (6, F, None, {}),
    "Erf": (9, F, None, {}), "Floor": (6, F, None, {}), "Ceil": (6, F, None, {}), "Round": (11, F, None, {}),
    "Reciprocal": (6, F, None, {}), "Sin": (7, F, None, {}), "Cos": (7, F, None, {}), "Tan": (7, F, None, {}),
    "Asin": (7, F, None, {}), "Acos": (7, F, None, {}), "Atan": (7, F, None, {}), "Sinh": (9, F, None, {}),
    "Cosh": (9, F, None, {}), "Asinh": (9, F, None, {}), "Acosh": (9, F, None, {}), "Atanh": (9, F, None, {}),
    "Sign": (9, F, None, {}), "Softplus": (1, F, None, {}), "Softsign": (1, F, None, {}),
    "HardSigmoid": (6, F, None, {"alpha": 0.3}), "HardSwish": (14, F, None, {}),
    "LeakyRelu": (6, F, None, {"alpha": 0.1}), "Elu": (6, F, None, {}), "Selu": (6, F, None, {}),
    "Celu": (12, F, None, {}), "ThresholdedRelu": (10, F, None, {}), "Mish": (18, F, None, {}),
    "Shrink": (9, F, None, {"lambd": 0.2}), "Gelu": (20, F, None, {"approximate": "tanh"}),
    "Not": (1, B, None, {}), "IsNaN": (9, F, B, {}), "IsInf": (10, F, B, {}), "BitwiseNot": (18, I32, None, {}),
    "Softmax": (1, F, None, {}), "LogSoftmax": (1, F, None, {}), "Hardmax": (1, F, None, {}),
    "LpNormalization": (1, F, None, {"p": 1}), "MeanVarianceNormalization": (9, F, None, {}),
}


def unary_cases():
    out = []
    for op, (since, elem, oelem, attrs) in UNARY.items():
        last = 20 if op == "Gelu" else 18
        for opset in sorted({max(since, 7), 13 if since <= 13 else last, last}):
            m = mk([H.make_node(op, ["x"], ["y"], **attrs)], [("x", elem, ["batch", 3, "w", 4])], ["y"], opset)
            out.append(case("%s-%d" % (op, opset), m, BIND, {"y": (oelem or elem, [2, 3, 5, 4])}))
    # --input-shape instead of --dim; rank 1
    m = mk([H.make_node("Relu", ["x"], ["y"])], [("x", F, ["n"])], ["y"], 14)
    out.append(case("Relu-14 --input-shape", m, ["--input-shape", "x=7"], {"y": (F, [7])}))
    # softmax family: old default axis 1, new -1, explicit negative axes
    for op in ("Softmax", "LogSoftmax", "Hardmax"):
        m = mk([H.make_node(op, ["x"], ["y"], axis=-2)], [("x", F, ["batch", 3, "w"])], ["y"], 13)
        out.append(case("%s-13 axis=-2" % op, m, BIND, {"y": (F, [2, 3, 5])}))
        m = mk([H.make_node(op, ["x"], ["y"], axis=2)], [("x", F, ["batch", 3, "w"])], ["y"], 11)
        out.append(case("%s-11 axis=2" % op, m, BIND, {"y": (F, [2, 3, 5])}))
    return out


# ------------------------------------------------------------- broadcast

BINARY = {  # op -> (first opset >= 7, input type, output type)
    "Add": (7, F, F), "Sub": (7, F, F), "Mul": (7, F, F), "Div": (7, F, F), "Pow": (7, F, F),
    "And": (7, B, B), "Or": (7, B, B), "Xor": (7, B, B), "Equal": (11, F, B), "Less": (9, F, B),
    "Greater": (9, F, B), "LessOrEqual": (12, F, B), "GreaterOrEqual": (12, F, B),
    "BitwiseAnd": (18, I32, I32), "BitwiseOr": (18, I32, I32), "BitwiseXor": (18, I32, I32),
}


def broadcast_cases():
    out = []
    for op, (since, elem, oelem) in BINARY.items():
        for opset in sorted({since, 13 if since <= 13 else 18, 18}):
            m = mk([H.make_node(op, ["a", "b"], ["y"])], [("a", elem, ["batch", 1, 4]), ("b", elem, [3, 1])], ["y"],
                   opset)
            out.append(case("%s-%d" % (op, opset), m, BIND, {"y": (oelem, [2, 3, 4])}))
    # Equal-7 on ints; Pow with an int exponent (12 on); Mod in both modes
    m = mk([H.make_node("Equal", ["a", "b"], ["y"])], [("a", I64, [3, 1]), ("b", I64, ["batch"])], ["y"], 7)
    out.append(case("Equal-7 int64", m, BIND, {"y": (B, [3, 2])}))
    m = mk([H.make_node("Pow", ["a", "b"], ["y"])], [("a", F, ["batch", 1]), ("b", I64, [4])], ["y"], 15)
    out.append(case("Pow-15 float^int64", m, BIND, {"y": (F, [2, 4])}))
    m = mk([H.make_node("Mod", ["a", "b"], ["y"])], [("a", I64, ["batch", 1]), ("b", I64, [1, 4])], ["y"], 13)
    out.append(case("Mod-13 int", m, BIND, {"y": (I64, [2, 4])},
                    feeds={"b": {"low": 1, "high": 5}}))
    m = mk([H.make_node("Mod", ["a", "b"], ["y"], fmod=1)], [("a", F, ["batch", 1]), ("b", F, [4])], ["y"], 10)
    out.append(case("Mod-10 fmod=1 float", m, BIND, {"y": (F, [2, 4])}))
    m = mk([H.make_node("BitShift", ["a", "b"], ["y"], direction="LEFT")], [("a", U8, ["batch", 1]), ("b", U8, [3])],
           ["y"], 11)
    out.append(case("BitShift-11", m, BIND, {"y": (U8, [2, 3])}))
    # rank 0 with rank 0; rank 0 with rank 2; zero-size dims
    m = mk([H.make_node("Add", ["a", "b"], ["y"])], [("a", F, []), ("b", F, [])], ["y"], 14)
    out.append(case("Add-14 scalars", m, [], {"y": (F, [])}))
    m = mk([H.make_node("Mul", ["a", "b"], ["y"])], [("a", F, []), ("b", F, ["batch", 3])], ["y"], 14)
    out.append(case("Mul-14 scalar x matrix", m, BIND, {"y": (F, [2, 3])}))
    m = mk([H.make_node("Sub", ["a", "b"], ["y"])], [("a", F, [0, 1]), ("b", F, [1, 3])], ["y"], 14)
    out.append(case("Sub-14 empty", m, [], {"y": (F, [0, 3])}))
    # variadic
    for op in ("Sum", "Mean", "Min", "Max"):
        for opset in (8, 13):
            m = mk([H.make_node(op, ["a", "b", "c"], ["y"])],
                   [("a", F, ["batch", 1, 1]), ("b", F, [3, 1]), ("c", F, [4])], ["y"], opset)
            out.append(case("%s-%d three inputs" % (op, opset), m, BIND, {"y": (F, [2, 3, 4])}))
        m = mk([H.make_node(op, ["a"], ["y"])], [("a", F, ["batch", 3])], ["y"], 13)
        out.append(case("%s-13 one input" % op, m, BIND, {"y": (F, [2, 3])}))
        m = mk([H.make_node(op, ["a", "b"], ["y"])], [("a", F, ["batch", 3]), ("b", F, ["batch", 3])], ["y"], 7)
        out.append(case("%s-7 (6) same shapes" % op, m, BIND, {"y": (F, [2, 3])}))
    # Where
    for opset in (9, 16):
        m = mk([H.make_node("Where", ["c", "x", "y"], ["z"])],
               [("c", B, ["batch", 1]), ("x", F, [1, 4]), ("y", F, [])], ["z"], opset)
        out.append(case("Where-%d" % opset, m, BIND, {"z": (F, [2, 4])}))
    m = mk([H.make_node("Where", ["c", "x", "y"], ["z"])],
           [("c", B, [3, 1, 1]), ("x", I64, ["batch", 1]), ("y", I64, [4])], ["z"], 16)
    out.append(case("Where-16 int64 3-way", m, BIND, {"z": (I64, [3, 2, 4])}))
    # PRelu: slope broadcasts onto X
    for opset, sshape in ((7, [3, 1, 1]), (9, [1]), (16, [3, 1, 4])):
        m = mk([H.make_node("PRelu", ["x", "s"], ["y"])], [("x", F, ["batch", 3, "w", 4]), ("s", F, sshape)], ["y"],
               opset)
        out.append(case("PRelu-%d slope %s" % (opset, sshape), m, BIND, {"y": (F, [2, 3, 5, 4])}))
    # legacy (opset 6) broadcast attribute: B onto A at axis.  ORT has no
    # opset-6 Add kernel: expectation from the Add-6 spec ("output has A's shape").
    m = mk([H.make_node("Add", ["a", "b"], ["y"], broadcast=1, axis=1)], [("a", F, [2, 3, 4]), ("b", F, [3])], ["y"], 6)
    out.append(case("Add-6 broadcast=1 axis=1 (spec)", m, [], {"y": (F, [2, 3, 4])}, ort=False))
    # an unknown dim against a known one learns it; unbound symbols stay
    m = mk([H.make_node("Add", ["a", "b"], ["y"])], [("a", F, ["n", 1]), ("b", F, [1, "k"])], ["y"], 14)
    out.append(case("Add-14 unbound symbols (spec)", m, [], {"y": (F, ["n", "k"])}, ort=False))
    return out


# ---------------------------------------------------------- Clip and Cast


def clip_cast_cases():
    out = []
    m = mk([H.make_node("Clip", ["x"], ["y"], min=-1.0, max=1.0)], [("x", F, ["batch", 3])], ["y"], 6)
    out.append(case("Clip-6 attributes", m, BIND, {"y": (F, [2, 3])}))
    inits = [const("lo", F, [], [-0.5])]
    m = mk([H.make_node("Clip", ["x", "lo"], ["y"])], [("x", F, ["batch", 3])], ["y"], 11, inits)
    out.append(case("Clip-11 min input", m, BIND, {"y": (F, [2, 3])}))
    inits = [const("hi", I64, [], [3])]
    m = mk([H.make_node("Clip", ["x", "", "hi"], ["y"])], [("x", I64, ["batch", 3])], ["y"], 13, inits)
    out.append(case("Clip-13 int64 max only", m, BIND, {"y": (I64, [2, 3])}))
    for opset, to in ((7, I64), (9, B), (13, I32), (13, F16), (19, F)):
        m = mk([H.make_node("Cast", ["x"], ["y"], to=to)], [("x", F, ["batch", "w"])], ["y"], opset)
        out.append(case("Cast-%d to %s" % (opset, TP.DataType.Name(to)), m, BIND, {"y": (to, [2, 5])}))
    # Cast-1: `to` is the type's name (ORT has no Cast-1 kernel: spec)
    m = mk([H.make_node("Cast", ["x"], ["y"], to="INT32")], [("x", F, ["batch", "w"])], ["y"], 5)
    out.append(case("Cast-1 to='INT32' (spec)", m, BIND, {"y": (I32, [2, 5])}, ort=False))
    m = mk([H.make_node("CastLike", ["x", "t"], ["y"])], [("x", F, ["batch", 3]), ("t", I32, [1])], ["y"], 15)
    out.append(case("CastLike-15", m, BIND, {"y": (I32, [2, 3])}))
    return out


# ------------------------------------------------------------- reductions

REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
          "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]


def reduce_cases():
    out = []
    x = [("x", F, ["batch", 3, "w", 4])]
    for op in REDUCE:
        since = 13 if op == "ReduceSum" else 18
        for opset in sorted({11, since - 1, since, 18}):
            for axes, keep, dims in (([1, -1], 1, [2, 1, 5, 1]), ([1, -1], 0, [2, 5]), (None, 1, [1, 1, 1, 1]),
                                     (None, 0, [])):
                inits = []
                nodes = axes_nodes(op, "x", "y", axes, opset, keepdims=keep, inits=inits, since=since)
                m = mk(nodes, x, ["y"], opset, inits)
                out.append(case("%s-%d axes=%s keepdims=%d" % (op, opset, axes, keep), m, BIND, {"y": (F, dims)}))
        # noop_with_empty_axes, explicit empty axes
        inits = [const("none", I64, [0], [])]
        m = mk([H.make_node(op, ["x"], ["y"], noop_with_empty_axes=1),
                H.make_node(op, ["x", "none"], ["z"], keepdims=0)], x, ["y", "z"], 18, inits)
        out.append(case("%s-18 noop_with_empty_axes / empty axes" % op, m, BIND,
                        {"y": (F, [2, 3, 5, 4]), "z": (F, [])}))
    # axes computed at run time (Shape of another input): rank-preserving
    # keepdims=1 form with unknown axes is checked by hand below
    m = mk([H.make_node("ReduceSum", ["x", "ax"], ["y"], keepdims=1)],
           [("x", F, ["batch", 1, "w"]), ("ax", I64, [1])], ["y"], 13)
    out.append(case("ReduceSum-13 unknown axes keepdims=1 (spec)", m, BIND, {"y": (F, [None, 1, None])}, ort=False))
    m = mk([H.make_node("ReduceSum", ["x", "ax"], ["y"], keepdims=0)],
           [("x", F, ["batch", 1, "w"]), ("ax", I64, [1])], ["y"], 13)
    out.append(case("ReduceSum-13 unknown axes keepdims=0 (spec)", m, BIND, {"y": (F, None)}, ort=False))
    for op in ("ArgMax", "ArgMin"):
        for opset, attrs, dims in ((7, {"axis": 1}, [2, 1, 5]), (11, {"axis": -1, "keepdims": 0}, [2, 3]),
                                   (12, {"axis": 0, "select_last_index": 1}, [1, 3, 5]),
                                   (13, {"keepdims": 0}, [3, 5])):
            m = mk([H.make_node(op, ["x"], ["y"], **attrs)], [("x", F, ["batch", 3, "w"])], ["y"], opset)
            out.append(case("%s-%d %s" % (op, opset, attrs), m, BIND, {"y": (I64, dims)}))
    for opset in (11, 14):
        inits = [const("ax", I32, [], [-1])]
        m = mk([H.make_node("CumSum", ["x", "ax"], ["y"], exclusive=1, reverse=1)], [("x", F, ["batch", 3])], ["y"],
               opset, inits)
        out.append(case("CumSum-%d" % opset, m, BIND, {"y": (F, [2, 3])}))
    return out


# --------------------------------------------------------- normalizations


def norm_cases():
    out = []
    x = ("x", F, ["batch", 3, "w", 4])
    stats = [(n, F, [3]) for n in ("s", "b", "m", "v")]
    for opset in (7, 9, 14, 15):
        m = mk([H.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])], [x] + stats, ["y"], opset)
        out.append(case("BatchNormalization-%d inference" % opset, m, BIND, {"y": (F, [2, 3, 5, 4])},
                        feeds={"v": {"low": 0.5, "high": 1}}))
    # training forms: ORT's CPU build has no training BatchNormalization;
    # onnx.shape_inference agrees for 14/15 (checked in --onnx mode); the
    # opset 7/9 running statistics and saved_* have the mean's shape (spec).
    for opset in (14, 15):
        st = [("s", F, [3]), ("b", F, [3]), ("m", D if opset == 15 else F, [3]), ("v", D if opset == 15 else F, [3])]
        if opset == 14:
            st = [(n, F, [3]) for n in ("s", "b")] + [(n, D, [3]) for n in ("m", "v")]
        m = mk([H.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"], training_mode=1)],
               [x] + st, ["y", "rm", "rv"], opset)
        out.append(case("BatchNormalization-%d training (spec)" % opset, m, BIND,
                        {"y": (F, [2, 3, 5, 4]), "rm": (D, [3]), "rv": (D, [3])}, ort=False))
    for opset in (7, 9):
        m = mk([H.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv", "sm", "sv"])],
               [x] + stats, ["y", "rm", "rv", "sm", "sv"], opset)
        out.append(case("BatchNormalization-%d five outputs (spec)" % opset, m, BIND,
                        {"y": (F, [2, 3, 5, 4]), "rm": (F, [3]), "rv": (F, [3]), "sm": (F, [3]), "sv": (F, [3])},
                        ort=False))
    m = mk([H.make_node("InstanceNormalization", ["x", "s", "b"], ["y"])], [x] + stats[:2], ["y"], 7)
    out.append(case("InstanceNormalization-6", m, BIND, {"y": (F, [2, 3, 5, 4])}))
    for axis, mdims in ((-1, [2, 3, 5, 1]), (1, [2, 1, 1, 1]), (0, [1, 1, 1, 1])):
        sc = ("sc", F, {-1: [4], 1: [3, "w", 4], 0: ["batch", 3, "w", 4]}[axis])  # X's dims from axis on
        m = mk([H.make_node("LayerNormalization", ["x", "sc"], ["y", "mean", "isd"], axis=axis)], [x, sc],
               ["y", "mean", "isd"], 17)
        out.append(case("LayerNormalization-17 axis=%d" % axis, m, BIND,
                        {"y": (F, [2, 3, 5, 4]), "mean": (F, mdims), "isd": (F, mdims)}))
    m = mk([H.make_node("LayerNormalization", ["x", "sc", "bb"], ["y"])], [("x", D, ["batch", 3]), ("sc", D, [3]),
                                                                           ("bb", D, [3])], ["y"], 17)
    out.append(case("LayerNormalization-17 double, bias", m, BIND, {"y": (D, [2, 3])}))
    m = mk([H.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3)], [x, ("s", F, [3]),
                                                                                      ("b", F, [3])], ["y"], 18)
    out.append(case("GroupNormalization-18", m, BIND, {"y": (F, [2, 3, 5, 4])}))
    m = mk([H.make_node("MeanVarianceNormalization", ["x"], ["y"], axes=[0, 2])], [("x", F, ["batch", 3, "w"])],
           ["y"], 13)
    out.append(case("MeanVarianceNormalization-13 axes", m, BIND, {"y": (F, [2, 3, 5])}))
    m = mk([H.make_node("LpNormalization", ["x"], ["y"], axis=0, p=2)], [("x", F, ["batch", 3])], ["y"], 7)
    out.append(case("LpNormalization-1 axis=0", m, BIND, {"y": (F, [2, 3])}))
    # Dropout: mask T in 7-9 (the spec's type list; ORT declares it so too),
    # bool from 10; ratio / training_mode inputs from 12
    for opset, mask in ((7, F), (10, B), (12, B), (13, B)):
        m = mk([H.make_node("Dropout", ["x"], ["y", "mask"])], [("x", F, ["batch", 3])], ["y", "mask"], opset)
        out.append(case("Dropout-%d with mask" % opset, m, BIND, {"y": (F, [2, 3]), "mask": (mask, [2, 3])}))
    inits = [const("r", F, [], [0.25]), const("t", B, [], [False])]
    m = mk([H.make_node("Dropout", ["x", "r", "t"], ["y", "mask"])], [("x", F, ["batch", 3])], ["y", "mask"], 13, inits)
    out.append(case("Dropout-13 ratio, training_mode inputs", m, BIND, {"y": (F, [2, 3]), "mask": (B, [2, 3])}))
    # the losses torch.onnx writes for cross_entropy / nll_loss (opset 12 on);
    # (spec): ORT needs labels below C, which the runner's random ints are not
    for red, shape in (("mean", []), ("none", [2, 5])):
        m = mk([H.make_node("SoftmaxCrossEntropyLoss", ["s", "l"], ["loss", "logp"], reduction=red)],
               [("s", F, ["batch", 7, "w"]), ("l", I64, ["batch", "w"])], ["loss", "logp"], 13)
        out.append(case("SoftmaxCrossEntropyLoss-13 %s" % red, m, BIND,
                        {"loss": (F, shape), "logp": (F, [2, 7, 5])}, ort=False))
        m = mk([H.make_node("NegativeLogLikelihoodLoss", ["s", "l"], ["loss"], reduction=red)],
               [("s", F, ["batch", 7, "w"]), ("l", I64, ["batch", "w"])], ["loss"], 13)
        out.append(case("NegativeLogLikelihoodLoss-13 %s" % red, m, BIND, {"loss": (F, shape)}, ort=False))
    return out


# ------------------------------------------------------ constant values


def iv(name, vals, elem=I64, dims=None):
    return const(name, elem, [len(vals)] if dims is None else dims, vals)


def values_cases():
    out = []
    a, b = [7, -7, 7, -7], [2, 2, -2, -2]
    ints = [iv("a", a), iv("b", b)]
    for opset in (13, 18):
        # integer Div truncates toward zero (ORT: C++ '/'); numpy would floor
        for op, exp, attrs in (("Add", [9, -5, 5, -9], {}), ("Sub", [5, -9, 9, -5], {}),
                               ("Mul", [14, -14, -14, 14], {}), ("Div", [3, -3, -3, 3], {}),
                               ("Mod", [1, 1, -1, -1], {}), ("Mod", [1, -1, 1, -1], {"fmod": 1}),
                               ("Pow", [49, 49, 0, 0], {}), ("Min", [2, -7, -2, -7], {}), ("Max", [7, 2, 7, -2], {})):
            if op == "Pow":  # negative int exponents: ORT computes them through double; use 2 and 0
                inits = [iv("a", a), iv("b", [2, 2, 0, 0])]
                exp = [49, 49, 1, 1]
            else:
                inits = ints
            out.append(value_case("value %s-%d int64 %s" % (op, opset, attrs), opset,
                                  [H.make_node(op, ["a", "b"], ["v"], **attrs)], inits, "v", I64, [4], exp))
        for op, exp in (("Equal", [0, 0, 0, 0]), ("Less", [0, 1, 0, 1]), ("Greater", [1, 0, 1, 0]),
                        ("LessOrEqual", [0, 1, 0, 1]), ("GreaterOrEqual", [1, 0, 1, 0])):
            out.append(value_case("value %s-%d" % (op, opset), opset, [H.make_node(op, ["a", "b"], ["v"])], ints,
                                  "v", B, [4], exp))
    # floats: broadcast [2,1] x [3] -> [2,3]
    fa, fb = [1.5, -2.5], [2.0, -0.5, 4.0]
    finits = [const("a", F, [2, 1], fa), const("b", F, [3], fb)]
    for op, fn in (("Add", lambda x, y: x + y), ("Sub", lambda x, y: x - y), ("Mul", lambda x, y: x * y),
                   ("Div", lambda x, y: x / y), ("Pow", lambda x, y: x ** y if x > 0 else x ** int(y)),
                   ("Min", min), ("Max", max)):
        if op == "Pow":
            inits = [const("a", F, [2, 1], [1.5, 2.0]), const("b", F, [3], [2.0, -1.0, 3.0])]
            exp = [x ** y for x in (1.5, 2.0) for y in (2.0, -1.0, 3.0)]
        else:
            inits = finits
            exp = [fn(x, y) for x in fa for y in fb]
        out.append(value_case("value %s-14 float broadcast" % op, 14, [H.make_node(op, ["a", "b"], ["v"])], inits,
                              "v", F, [2, 3], exp))
    out.append(value_case("value Mod-13 float fmod=1", 13,
                          [H.make_node("Mod", ["a", "b"], ["v"], fmod=1)],
                          [const("a", F, [2], [7.5, -7.5]), const("b", F, [2], [2.0, 2.0])], "v", F, [2], [1.5, -1.5]))
    # variadic with three inputs
    three = [iv("a", [1, 5]), iv("b", [4], dims=[1]), const("c", I64, [2, 1], [3, -3])]
    for op, exp in (("Min", [1, 3, -3, -3]), ("Max", [4, 5, 4, 5])):
        out.append(value_case("value %s-13 three int64 inputs" % op, 13, [H.make_node(op, ["a", "b", "c"], ["v"])],
                              three, "v", I64, [2, 2], exp))
    three = [const("a", F, [2], [1, 5]), const("b", F, [1], [4]), const("c", F, [2, 1], [3, -3])]
    out.append(value_case("value Sum-13 three float inputs", 13, [H.make_node("Sum", ["a", "b", "c"], ["v"])],
                          three, "v", F, [2, 2], [8, 12, 2, 6]))
    out.append(value_case("value Mean-13 float", 13, [H.make_node("Mean", ["a", "b", "c"], ["v"])],
                          [const("a", F, [2], [1.0, 2.0]), const("b", F, [2], [3.0, 5.0]),
                           const("c", F, [1], [2.0])], "v", F, [2], [2.0, 3.0]))
    # unary
    fx = [-2.5, -0.5, 0.0, 1.5, 4.0]
    for op, exp in (("Neg", [2.5, 0.5, -0.0, -1.5, -4.0]), ("Abs", [2.5, 0.5, 0.0, 1.5, 4.0]),
                    ("Floor", [-3.0, -1.0, 0.0, 1.0, 4.0]), ("Ceil", [-2.0, -0.0, 0.0, 2.0, 4.0]),
                    ("Sign", [-1.0, -1.0, 0.0, 1.0, 1.0]), ("Relu", [0.0, 0.0, 0.0, 1.5, 4.0])):
        out.append(value_case("value %s-13 float" % op, 13, [H.make_node(op, ["a"], ["v"])],
                              [const("a", F, [5], fx)], "v", F, [5], exp))
    out.append(value_case("value Sqrt-13", 13, [H.make_node("Sqrt", ["a"], ["v"])],
                          [const("a", F, [3], [4.0, 9.0, 0.25])], "v", F, [3], [2.0, 3.0, 0.5]))
    for op, exp in (("Neg", [-3, 0, 5]), ("Abs", [3, 0, 5]), ("Sign", [1, 0, -1])):
        out.append(value_case("value %s-13 int64" % op, 13, [H.make_node(op, ["a"], ["v"])], [iv("a", [3, 0, -5])],
                              "v", I64, [3], exp))
    bools = [const("p", B, [4], [1, 1, 0, 0]), const("q", B, [4], [1, 0, 1, 0])]
    for op, exp in (("And", [1, 0, 0, 0]), ("Or", [1, 1, 1, 0]), ("Xor", [0, 1, 1, 0])):
        out.append(value_case("value %s-7 bool" % op, 13, [H.make_node(op, ["p", "q"], ["v"])], bools, "v", B, [4], exp))
    out.append(value_case("value Not-1", 13, [H.make_node("Not", ["p"], ["v"])], bools, "v", B, [4], [0, 0, 1, 1]))
    # Where, 3-way broadcast
    out.append(value_case("value Where-16 int64", 16, [H.make_node("Where", ["c", "x", "y"], ["v"])],
                          [const("c", B, [2, 1], [1, 0]), iv("x", [1, 2, 3]), iv("y", [9], dims=[])], "v", I64, [2, 3],
                          [1, 2, 3, 9, 9, 9]))
    out.append(value_case("value Where-9 float", 13, [H.make_node("Where", ["c", "x", "y"], ["v"])],
                          [const("c", B, [3], [1, 0, 1]), const("x", F, [1], [0.5]), const("y", F, [3], [1, 2, 3])],
                          "v", F, [3], [0.5, 2.0, 0.5]))
    # Cast: float -> int truncates toward zero; int -> float; -> bool; int64 -> int32
    out.append(value_case("value Cast-13 float->int64", 13, [H.make_node("Cast", ["a"], ["v"], to=I64)],
                          [const("a", F, [4], [-2.7, -0.5, 2.7, 3.0])], "v", I64, [4], [-2, 0, 2, 3]))
    out.append(value_case("value Cast-13 int64->float", 13, [H.make_node("Cast", ["a"], ["v"], to=F)],
                          [iv("a", [-3, 0, 1 << 20])], "v", F, [3], [-3.0, 0.0, float(1 << 20)]))
    out.append(value_case("value Cast-13 ->bool", 13, [H.make_node("Cast", ["a"], ["v"], to=B)],
                          [const("a", F, [3], [0.0, -0.5, 2.0])], "v", B, [3], [0, 1, 1]))
    out.append(value_case("value Cast-13 bool->int32", 13, [H.make_node("Cast", ["p"], ["v"], to=I32)], bools,
                          "v", I32, [4], [1, 1, 0, 0]))
    out.append(value_case("value CastLike-15 int64->int32", 15, [H.make_node("CastLike", ["a", "t"], ["v"])],
                          [iv("a", [5, -6]), const("t", I32, [1], [0])], "v", I32, [2], [5, -6]))
    # Clip with inputs (11+); omitted min
    out.append(value_case("value Clip-13 int64", 13, [H.make_node("Clip", ["a", "lo", "hi"], ["v"])],
                          [iv("a", [-5, 0, 5, 9]), iv("lo", [-1], dims=[]), iv("hi", [6], dims=[])], "v", I64, [4],
                          [-1, 0, 5, 6]))
    out.append(value_case("value Clip-13 float max only", 13, [H.make_node("Clip", ["a", "", "hi"], ["v"])],
                          [const("a", F, [3], [-5.0, 0.5, 5.0]), const("hi", F, [], [1.0])], "v", F, [3],
                          [-5.0, 0.5, 1.0]))
    # reductions over any axes, attribute and input forms
    x23 = [iv("x", [1, 2, 3, 4, 5, 6], dims=[2, 3])]
    for op, axes, keep, shape, exp in (("ReduceSum", [1], 0, [2], [6, 15]), ("ReduceSum", None, 1, [1, 1], [21]),
                                       ("ReduceProd", [0], 1, [1, 3], [4, 10, 18]),
                                       ("ReduceMax", [-1], 0, [2], [3, 6]), ("ReduceMin", [0, 1], 0, [], [1])):
        for opset in (13, 18):
            inits = list(x23)
            nodes = axes_nodes(op, "x", "v", axes, opset, keepdims=keep, inits=inits,
                               since=13 if op == "ReduceSum" else 18)
            out.append(value_case("value %s-%d axes=%s keepdims=%d" % (op, opset, axes, keep), opset, nodes, inits,
                                  "v", I64, shape, exp))
    # the probe can say "no": a deliberately wrong expectation
    out.append(value_case("value probe says no", 13, [H.make_node("Add", ["a", "b"], ["v"])], ints, "v", I64, [4],
                          [0, 0, 0, 0], equal=False))
    # values flowing through a shape computation (needs the shape family's
    # Shape and Reshape): [batch, 6] -> Reshape to Shape * [2, 1] / [1, 2] ... cast through float
    nodes = [H.make_node("Shape", ["x"], ["s"]), H.make_node("Cast", ["s"], ["sf"], to=F),
             H.make_node("Div", ["sf", "k"], ["q"]), H.make_node("Floor", ["q"], ["fq"]),
             H.make_node("Mul", ["fq", "k2"], ["r"]), H.make_node("Cast", ["r"], ["ri"], to=I64),
             H.make_node("Reshape", ["x", "ri"], ["y"])]
    m = mk(nodes, [("x", F, ["batch", 6])], ["y"], 14, [const("k", F, [2], [1.0, 4.0]), const("k2", F, [2], [3.0, 2.0])])
    out.append(case("chain Shape->Cast->Div->Floor->Mul->Cast->Reshape", m, BIND, {"y": (F, [6, 2])}))
    # int64 overflow: the value stays unknown, so the probe's dims do too
    # (ORT wraps around: not comparable)
    big = [iv("a", [(1 << 63) - 1]), iv("b", [1])]
    pn, pi = probe("v", I64, [1], [0], 13, "pr")
    m = mk([H.make_node("Add", ["a", "b"], ["v"])] + pn, [], ["pr_p"], 13, big + pi)
    out.append(case("value int64 overflow stays unknown (spec)", m, [], {"pr_p": (F, [None, None])}, ort=False))
    pn, pi = probe("v", I64, [1], [0], 13, "pr")
    m = mk([H.make_node("Div", ["a", "z"], ["v"])] + pn, [], ["pr_p"], 13, [iv("a", [5]), iv("z", [0])] + pi)
    out.append(case("value int division by zero stays unknown (spec)", m, [], {"pr_p": (F, [None, None])}, ort=False))
    return out


# ------------------------------------------------------ malformed models


def hostile_cases():
    out = []

    def bad(name, nodes, inputs, outputs, opset, msg, inits=()):
        out.append(case(name, mk(nodes, inputs, outputs, opset, inits), [], {}, fail=msg, ort=False))

    x = [("x", F, [2, 3])]
    bad("Add with one input", [H.make_node("Add", ["x"], ["y"])], x, ["y"], 14, "takes 2 inputs")
    bad("Add incompatible dims", [H.make_node("Add", ["x", "b"], ["y"])], x + [("b", F, [4])], ["y"], 14,
        "cannot broadcast")
    bad("Relu with two outputs", [H.make_node("Relu", ["x"], ["y", "z"])], x, ["y"], 14, "outputs")
    bad("Where with an omitted input", [H.make_node("Where", ["c", "", "x"], ["y"])], x + [("c", B, [2, 3])], ["y"],
        16, "input 1 is missing")
    bad("ReduceSum axis out of range", [H.make_node("ReduceSum", ["x"], ["y"], axes=[2])], x, ["y"], 11,
        "axis 2 out of range")
    bad("ReduceMax-18 axes input out of range", [H.make_node("ReduceMax", ["x", "ax"], ["y"])], x, ["y"], 18,
        "axis -3 out of range", [iv("ax", [-3])])
    bad("ReduceSum-13 axes attribute and input", [H.make_node("ReduceSum", ["x", "ax"], ["y"], axes=[0])], x, ["y"],
        13, "both", [iv("ax", [0])])
    bad("ArgMax axis out of range", [H.make_node("ArgMax", ["x"], ["y"], axis=5)], x, ["y"], 13, "axis 5")
    bad("ArgMax of a scalar", [H.make_node("ArgMax", ["s"], ["y"])], [("s", F, [])], ["y"], 13, "out of range")
    bad("Softmax of a scalar", [H.make_node("Softmax", ["s"], ["y"])], [("s", F, [])], ["y"], 13, "scalar")
    bad("Softmax axis out of range", [H.make_node("Softmax", ["x"], ["y"], axis=-3)], x, ["y"], 13, "axis -3")
    bad("SoftmaxCrossEntropyLoss labels of the wrong rank",
        [H.make_node("SoftmaxCrossEntropyLoss", ["s", "l"], ["y"])], [("s", F, [2, 3]), ("l", I64, [2, 3])], ["y"], 13,
        "rank 1")
    bad("Cast without to", [H.make_node("Cast", ["x"], ["y"])], x, ["y"], 13, "'to'")
    bad("Cast to=999", [H.make_node("Cast", ["x"], ["y"], to=999)], x, ["y"], 13, "not an element type")
    bad("Cast-1 to='FLOAT99'", [H.make_node("Cast", ["x"], ["y"], to="FLOAT99")], x, ["y"], 5, "FLOAT99")
    bad("Cast to=-1", [H.make_node("Cast", ["x"], ["y"], to=-1)], x, ["y"], 13, "not an element type")
    bad("LayerNormalization axis out of range", [H.make_node("LayerNormalization", ["x", "s"], ["y"], axis=2)],
        x + [("s", F, [3])], ["y"], 17, "axis 2")
    bad("BatchNormalization scale rank 2", [H.make_node("BatchNormalization", ["x", "s", "s1", "s1", "s1"], ["y"])],
        [("x", F, [2, 3, 4]), ("s", F, [3, 1]), ("s1", F, [3])], ["y"], 15, "rank 1")
    bad("BatchNormalization channel mismatch",
        [H.make_node("BatchNormalization", ["x", "s1", "s1", "s1", "s4"], ["y"])],
        [("x", F, [2, 3, 4]), ("s1", F, [3]), ("s4", F, [4])], ["y"], 15, "channel")
    bad("BatchNormalization-14 training with 1 output",
        [H.make_node("BatchNormalization", ["x", "s1", "s1", "s1", "s1"], ["y"], training_mode=1)],
        [("x", F, [2, 3, 4]), ("s1", F, [3])], ["y"], 14, "3 outputs")
    bad("Mod float without fmod", [H.make_node("Mod", ["x", "x"], ["y"])], x, ["y"], 13, "fmod=1")
    bad("Dropout-7 with a ratio input", [H.make_node("Dropout", ["x", "x"], ["y"])], x, ["y"], 7, "takes 1 input")
    bad("Clip-6 with a min input", [H.make_node("Clip", ["x", "x"], ["y"])], x, ["y"], 6, "takes 1 input")
    bad("PRelu slope of higher rank", [H.make_node("PRelu", ["x", "s"], ["y"])], x + [("s", F, [1, 2, 3])], ["y"], 16,
        "slope")
    bad("CumSum axis not a scalar", [H.make_node("CumSum", ["x", "ax"], ["y"])], x + [("ax", I64, [2])], ["y"], 14,
        "scalar")
    bad("CumSum axis out of range", [H.make_node("CumSum", ["x", "ax"], ["y"])], x, ["y"], 14, "axis 7",
        [iv("ax", [7], dims=[])])
    bad("Add overflowing 2^62 elements", [H.make_node("Add", ["a", "b"], ["y"])],
        [("a", F, [1 << 40, 1]), ("b", F, [1, 1 << 40])], ["y"], 14, "2^62")
    bad("Sum with no inputs", [H.make_node("Sum", [], ["y"])], x, ["y"], 13, "at least 1 input")
    # not failures: huge dims that fit, empty tensors, negative keepdims,
    # values too large to keep
    m = mk([H.make_node("Add", ["a", "b"], ["y"])], [("a", F, [1 << 30, 1]), ("b", F, [1, 1 << 30])], ["y"], 14)
    out.append(case("Add 2^60 elements (spec)", m, [], {"y": (F, [1 << 30, 1 << 30])}, ort=False))
    # keepdims and noop_with_empty_axes are true only when exactly 1 (ORT)
    m = mk([H.make_node("ReduceSum", ["x"], ["y"], keepdims=-1, axes=[1])], x, ["y"], 11)
    out.append(case("ReduceSum keepdims=-1 is false", m, [], {"y": (F, [2])}))
    m = mk([H.make_node("ReduceMax", ["x"], ["y"], noop_with_empty_axes=2)], x, ["y"], 18)
    out.append(case("ReduceMax-18 noop_with_empty_axes=2 is false", m, [], {"y": (F, [1, 1])}))
    m = mk([H.make_node("ArgMin", ["x"], ["y"], keepdims=2)], x, ["y"], 13)
    out.append(case("ArgMin keepdims=2 is false", m, [], {"y": (I64, [3])}))
    m = mk([H.make_node("ReduceMax", ["x"], ["y"], axes=[0], keepdims=0)], [("x", F, [0, 3])], ["y"], 13)
    out.append(case("ReduceMax over an empty axis (spec)", m, [], {"y": (F, [3])}, ort=False))
    inits = [const("e", I64, [0, 3], [])]
    m = mk([H.make_node("ReduceMax", ["e"], ["y"], axes=[0], keepdims=0),
            H.make_node("ReduceProd", ["e"], ["z"], axes=[0], keepdims=1),
            H.make_node("Add", ["e", "e"], ["w"])], [], ["y", "z", "w"], 13, inits)
    out.append(case("empty constant values (spec)", m, [], {"y": (I64, [3]), "z": (I64, [1, 3]), "w": (I64, [0, 3])},
                    ort=False))
    m = mk([H.make_node("Relu", ["x"], ["y"])], [("x", F, None)], ["y"], 14)
    out.append(case("Relu of a rank-unknown input (spec)", m, [], {"y": (F, None)}, ort=False))
    return out


def cases():
    return unary_cases() + broadcast_cases() + clip_cast_cases() + reduce_cases() + norm_cases() + values_cases() + \
        hostile_cases()


# ------------------------------------------------------------------ runner


def bound_inputs(c):
    """{input: concrete dims} from the model's declarations and the bindings."""
    dims_of, shapes = {}, {}
    b = c["bindings"]
    for flag, spec in zip(b[::2], b[1::2]):
        name, _, val = spec.rpartition("=")
        if flag == "--dim":
            dims_of[name] = int(val)
        else:
            shapes[name] = [int(v) for v in val.split(",") if v != ""]
    init = {t.name for t in c["model"].graph.initializer}
    out = {}
    for vi in c["model"].graph.input:
        if vi.name in init:
            continue
        tt = vi.type.tensor_type
        if vi.name in shapes:
            out[vi.name] = (tt.elem_type, shapes[vi.name])
        else:
            out[vi.name] = (tt.elem_type, [d.dim_value if d.HasField("dim_value") else dims_of[d.dim_param]
                                           for d in tt.shape.dim])
    return out


def run_roamc(roamc, path, c):
    p = subprocess.run([roamc, "shapes", path] + c["bindings"] + ["--report", "json"], capture_output=True, text=True,
                       timeout=120)
    if "fail" in c:
        if p.returncode == 0:
            return "expected a failure mentioning %r; roamc succeeded" % c["fail"]
        err = p.stderr.strip()
        if p.returncode >= 128 or p.returncode < 0 or "Sanitizer" in err or "runtime error" in err:
            return "crashed (rc %d): %s" % (p.returncode, err[-400:])
        return None if c["fail"] in err else "message %r lacks %r" % (err[:300], c["fail"])
    if p.returncode != 0 or "runtime error" in p.stderr:
        return "roamc shapes exited %d: %s" % (p.returncode, p.stderr.strip()[:400])
    vals = {v["name"]: v for v in json.loads(p.stdout)["values"]}
    bad = []
    for name, (elem, dims) in c["expect"].items():
        v = vals.get(name)
        got = None if v is None else (v["elem_type"], v["shape"])
        if got != (elem, dims):
            bad.append("%s: got %s, want %s" % (name, got, (elem, dims)))
    return "; ".join(bad) or None


def run_ort(path, c, tmp):
    m = onnx.ModelProto()
    m.CopyFrom(c["model"])
    del m.graph.output[:]
    for name, (elem, _) in c["expect"].items():
        m.graph.output.append(H.make_tensor_value_info(name, elem, None))
    mpath = os.path.join(tmp, "ort.onnx")
    onnx.save(m, mpath)
    specs = []
    for name, (elem, dims) in bound_inputs(c).items():
        s = {"name": name, "dtype": NUMPY[elem], "shape": dims}
        s.update(c.get("feeds", {}).get(name, {}))
        specs.append(s)
    ipath = os.path.join(tmp, "inputs.json")
    with open(ipath, "w") as f:
        json.dump(specs, f)
    p = subprocess.run(["node", ORT_RUNNER, mpath, ipath], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        return "ORT failed: %s" % (p.stderr.strip().splitlines() or ["?"])[-1][:300]
    got = json.loads(p.stdout)
    bad = []
    for name, (elem, dims) in c["expect"].items():
        g = got.get(name)
        if g is None or g["type"] != elem or g["shape"] != dims:
            bad.append("%s: ORT %s, want %s" % (name, g and (g["type"], g["shape"]), (elem, dims)))
    return "; ".join(bad) or None


def main(argv):
    args = [a for a in argv if not a.startswith("-")]
    roamc = args[0] if args else os.path.join(REPO, "build", "roamc")
    verbose = "-v" in argv
    only = argv[argv.index("--only") + 1] if "--only" in argv else None
    use_ort = "--no-ort" not in argv and shutil.which("node") and \
        os.path.isdir(os.path.join(REPO, "node_modules", "onnxruntime-node"))
    if only:
        args = [a for a in args if a != only]
        roamc = args[0] if args else os.path.join(REPO, "build", "roamc")
    if not use_ort:
        print("note: ONNX Runtime not used (--no-ort, or node / onnxruntime-node missing)")
    todo = [c for c in cases() if not only or only in c["name"]]
    tmp = tempfile.mkdtemp(prefix="math_cases_")

    def check(i):
        c = todo[i]
        d = os.path.join(tmp, str(i))
        os.mkdir(d)
        path = os.path.join(d, "case.onnx")
        onnx.save(c["model"], path)
        why = run_roamc(roamc, path, c)
        ort = why is None and use_ort and c.get("ort", True)
        if ort:
            why = run_ort(path, c, d)
        return why, ort

    failed, n_ort = 0, 0
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as ex:
            for c, (why, ort) in zip(todo, ex.map(check, range(len(todo)))):
                n_ort += ort
                if why:
                    failed += 1
                    print("FAIL %s: %s" % (c["name"], why))
                elif verbose:
                    print("PASS %s" % c["name"])
        print("math cases: %d passed, %d failed of %d (%d checked against ONNX Runtime too)" %
              (len(todo) - failed, failed, len(todo), n_ort))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
