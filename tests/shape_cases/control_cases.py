#!/usr/bin/python3
"""Shape cases for the control family (frontend/infer/infer_control.c): If, Loop,
Scan, NonZero, NonMaxSuppression, TopK, Unique, the random generators and
the Optional operators, in their opset forms, plus hostile models.

usage: /usr/bin/python3 tests/shape_cases/control_cases.py [ROAMC] [--ort] [--only SUBSTR] [-v]

Each case of cases() is {"name", "model", "bindings", "expect"} and
optionally "error" (a substring of the message `roamc shapes` must fail
with), "bound" (names whose size must be marked as an upper bound),
"ort" (input specs for tests/ort_shapes.js) and "timeout" (seconds).
expect maps a value name to (elem_type, dims): dims is None for an
unknown rank, and a dim is an int, None (unknown) or a symbol name.

Where the expected shapes come from: every case with an "ort" entry was
run in ONNX Runtime (onnxruntime-node, `--ort` re-runs it): its shapes
equal the expected ones, or for values marked bound, are at most those.
The upper bounds themselves, and the cases ORT cannot run (unbound data
symbols, errors, opsets onnxruntime-node refuses), come from the ONNX
operator specs by hand; each says so.

--ort also checks the expectations against ORT; the runner exits 1 on any
failure, 77 when onnx is missing.
"""
import json, os, shutil, subprocess, sys, tempfile

try:
    import onnx
    from onnx import helper as h, TensorProto as T, numpy_helper
    import numpy as np
except ImportError:
    print("SKIP: /usr/bin/python3 cannot import onnx")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
F, I64, I32, B = T.FLOAT, T.INT64, T.INT32, T.BOOL
BIG = 1 << 62


# ------------------------------------------------------------- builders

def vi(name, elem, dims=None):
    return h.make_tensor_value_info(name, elem, dims)


def mk(nodes, inputs, outputs, opset, inits=(), ir=None):
    g = h.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)], producer_name="control.py")
    m.ir_version = ir or (3 if opset < 9 else 7 if opset <= 15 else 8)
    return m


def graph(nodes, inputs, outputs, name="body", inits=()):
    return h.make_graph(nodes, name, inputs, outputs, initializer=list(inits))


def const(name, value, elem=None):
    a = np.array(value)
    if elem == B:
        a = a.astype(np.bool_)
    elif elem == F or (elem is None and a.dtype.kind == "f"):
        a = a.astype(np.float32)
    elif elem == I32:
        a = a.astype(np.int32)
    else:
        a = a.astype(np.int64)
    return numpy_helper.from_array(a, name)


def cnode(out, value, elem=None):
    return h.make_node("Constant", [], [out], value=const(out + "_v", value, elem))


def spec(name, dtype, shape, **kw):
    d = {"name": name, "dtype": dtype, "shape": shape}
    d.update(kw)
    return d


def case(name, model, expect, bindings=(), **kw):
    c = {"name": name, "model": model, "bindings": list(bindings), "expect": expect}
    c.update(kw)
    return c


# ------------------------------------------------------------------- If

def if_cases():
    cs = []
    # Known cond: only the taken branch, values passed on (the Reshape's shape).
    for opset in (7, 11, 13, 16, 18):
        then_g = graph([cnode("s1", [2, 3])], [], [vi("s1", I64, None)], "then")
        else_g = graph([cnode("s2", [3, 2])], [], [vi("s2", I64, None)], "else")
        m = mk([h.make_node("If", ["c"], ["s"], then_branch=then_g, else_branch=else_g),
                h.make_node("Reshape", ["x", "s"], ["y"])],
               [vi("x", F, [6])], [vi("s", I64), vi("y", F)], opset, [const("c", True, B)])
        cs.append(case("if_known_cond_v%d" % opset, m, {"s": (I64, [2]), "y": (F, [2, 3])},
                       ort=[spec("x", "float32", [6])] if opset <= 17 else None))
    # Unknown cond, branches reading outer values, same shape.
    then_g = graph([h.make_node("Relu", ["x"], ["a"])], [], [vi("a", F)], "then")
    else_g = graph([h.make_node("Neg", ["x"], ["b"])], [], [vi("b", F)], "else")
    m = mk([h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
           [vi("c", B, []), vi("x", F, ["batch", 4])], [vi("y", F)], 13)
    cs.append(case("if_outer_same", m, {"y": (F, [2, 4])}, ["--dim", "batch=2"],
                   ort=[spec("c", "bool", []), spec("x", "float32", [2, 4])], bound={"y": False}))
    # Unknown cond, dims that differ: the larger as a data dim (spec: either
    # branch may run, the buffer holds the larger); ranks that differ: unknown.
    then_g = graph([h.make_node("Identity", ["x"], ["a"]), h.make_node("Identity", ["x"], ["a2"])], [],
                   [vi("a", F), vi("a2", F)], "then")
    else_g = graph([h.make_node("Concat", ["x", "x"], ["b"], axis=0),
                    h.make_node("Unsqueeze", ["x", "ax"], ["b2"])], [], [vi("b", F), vi("b2", F)], "else",
                   [const("ax", [0])])
    m = mk([h.make_node("If", ["c"], ["y", "z"], then_branch=then_g, else_branch=else_g, name="sel")],
           [vi("c", B, []), vi("x", F, [2, 3])], [vi("y", F), vi("z", F)], 13)
    cs.append(case("if_differ", m, {"y": (F, [4, 3]), "z": (F, None)}, bound={"y": True},
                   symbols={"y:out0.dim0": 4}))
    cs.append(case("if_differ_dim_flag", m, {"y": (F, [3, 3])}, ["--dim", "y:out0.dim0=3"], bound={"y": True}))
    # Constant cond whose branch not taken is shape-invalid (TopK k > dim):
    # roamc infers only the taken branch, so the model loads.
    bad = graph([h.make_node("TopK", ["x"], ["v", "i"], k=9, axis=0)], [], [vi("v", F)], "then")
    good = graph([h.make_node("Identity", ["x"], ["w"])], [], [vi("w", F)], "else")
    m = mk([h.make_node("If", ["c"], ["y"], then_branch=bad, else_branch=good)],
           [vi("x", F, [2, 3])], [vi("y", F)], 9, [const("c", False, B)])
    cs.append(case("if_untaken_invalid", m, {"y": (F, [2, 3])}))
    m2 = mk([h.make_node("If", ["c"], ["y"], then_branch=bad, else_branch=good)],
            [vi("x", F, [2, 3]), vi("c", B, [])], [vi("y", F)], 9)
    # cond unknown: the then branch cannot run at these shapes (ORT would
    # fail in it), so the else branch is the one taken (issue 29)
    cs.append(case("if_unknown_cond_invalid_branch", m2, {"y": (F, [2, 3])}))
    # Hostile: cond with 2 elements, missing branch, output counts.
    m = mk([h.make_node("If", ["c"], ["y"], then_branch=good, else_branch=good)],
           [vi("x", F, [2, 3])], [vi("y", F)], 11, [const("c", [True, False], B)])
    cs.append(case("if_cond_two_elems", m, {}, error="cond has 2 elements"))
    m = mk([h.make_node("If", ["c"], ["y"], then_branch=good)],
           [vi("x", F, [2, 3]), vi("c", B, [])], [vi("y", F)], 11)
    cs.append(case("if_no_else", m, {}, error="else_branch"))
    m = mk([h.make_node("If", ["c"], ["y", "y2"], then_branch=good, else_branch=good)],
           [vi("x", F, [2, 3]), vi("c", B, [])], [vi("y", F), vi("y2", F)], 11)
    cs.append(case("if_output_count", m, {}, error="then_branch has 1 outputs"))
    m = mk([h.make_node("If", ["c"], ["y"], then_branch=good, else_branch=good)],
           [vi("x", F, [2, 3]), vi("c", F, [])], [vi("y", F)], 11)
    cs.append(case("if_cond_float", m, {}, error="cond has element type float32, not bool"))
    # A branch reading a value the node after the If makes: a cycle.
    cyc = graph([h.make_node("Identity", ["later"], ["w"])], [], [vi("w", F)], "then")
    m = mk([h.make_node("If", ["c"], ["y"], then_branch=cyc, else_branch=good),
            h.make_node("Relu", ["y"], ["later"])],
           [vi("x", F, [2, 3]), vi("c", B, [])], [vi("later", F)], 11)
    cs.append(case("if_shape_cycle", m, {}, error="cycle"))
    # A branch reading a value produced later in the file (no cycle): topological order.
    late = graph([h.make_node("Identity", ["r"], ["w"])], [], [vi("w", F)], "then")
    m = mk([h.make_node("If", ["c"], ["y"], then_branch=late, else_branch=late),
            h.make_node("Relu", ["x"], ["r"])],
           [vi("x", F, [2, 3]), vi("c", B, [])], [vi("y", F)], 11)
    cs.append(case("if_reads_later_value", m, {"y": (F, [2, 3])},
                   ort=[spec("x", "float32", [2, 3]), spec("c", "bool", [])]))
    # Two unnamed NonZero inside a branch: each keeps its own bound (6 and 10).
    then_g = graph([h.make_node("NonZero", ["x"], ["n1"]), h.make_node("NonZero", ["z"], ["n2"]),
                    h.make_node("Concat", ["n1", "n2"], ["t"], axis=1)], [], [vi("t", I64)], "then")
    else_g = graph([h.make_node("NonZero", ["x"], ["e"])], [], [vi("e", I64)], "else")
    m = mk([h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
           [vi("c", B, []), vi("x", F, [2, 3]), vi("z", F, [2, 5])], [vi("y", I64)], 13)
    # spec by hand: then [2, 6 + 10], else [2, 6] -> [2, 16]
    cs.append(case("if_subgraph_data_symbols", m, {"y": (I64, [2, 16])}, bound={"y": True},
                   symbols={"n1:count": 6, "n2:count": 10},
                   ort=[spec("c", "bool", [], values=[1]), spec("x", "float32", [2, 3]), spec("z", "float32", [2, 5])]))
    return cs


def nested_ifs(depth):
    """An If whose then_branch holds an If ... depth deep; the innermost reads x."""
    inner = graph([h.make_node("Relu", ["x"], ["o%d" % depth])], [], [vi("o%d" % depth, F)], "leaf")
    for d in range(depth - 1, -1, -1):
        other = graph([h.make_node("Neg", ["x"], ["e%d" % d])], [], [vi("e%d" % d, F)], "other")
        node = h.make_node("If", ["c"], ["o%d" % d], then_branch=inner, else_branch=other)
        if d == 0:
            return mk([node], [vi("x", F, [2, 3]), vi("c", B, [])], [vi("o0", F)], 13)
        inner = graph([node], [], [vi("o%d" % d, F)], "lvl%d" % d)


def nesting_cases():
    return [
        case("nest_if_30", nested_ifs(30), {"o0": (F, [2, 3])}),
        # 100 levels: the loader refuses the protobuf nesting before anything recurses
        case("nest_if_100", nested_ifs(100), {}, error="nested more than"),
        case("nest_loops_growing_14", nested_growing_loops(14), {"y0": (F, [None])}, timeout=120),
    ]


# ----------------------------------------------------------------- Loop

def loop_body(nodes, carried, scans, inits=(), extra_inputs=()):
    ins = [vi("i", I64, []), vi("cin", B, [])] + [vi(n, e) for n, e in extra_inputs]
    outs = [vi("cout", B, [])] + [vi(n, e) for n, e in carried] + [vi(n, e) for n, e in scans]
    return graph(nodes, ins, outs, "body", inits)


def nested_growing_loops(depth):
    """Loops nested depth deep, each carrying a value that grows (Concat):
    every level runs its body twice; must end quickly and cleanly."""
    body = None
    for d in range(depth - 1, -1, -1):
        nodes = [h.make_node("Identity", ["cin"], ["cout"]),
                 h.make_node("Concat", ["v%d" % d, "v%d" % d], ["g%d" % d], axis=0)]
        outs = [vi("cout", B, []), vi("y%d" % d if d else "y0b", F)]
        # the carried value doubles at every level, and every level runs the next
        nodes.append(h.make_node("Identity", ["g%d" % d], ["y%d" % d if d else "y0b"]))
        if body is not None:
            inner_outs = ["in%d" % (d + 1)] + (["is%d" % (d + 1)] if len(body.output) > 2 else [])
            nodes.append(h.make_node("Loop", ["m", "", "x"], inner_outs, body=body))
            outs.append(vi("s%d" % d, F))
            nodes.append(h.make_node("Identity", ["in%d" % (d + 1)], ["s%d" % d]))
        ins = [vi("i", I64, []), vi("cin", B, []), vi("v%d" % d, F)]
        if d == 0:
            return mk([h.make_node("Loop", ["m", "", "x"], ["y0", "sc"], body=graph(nodes, ins, outs))],
                      [vi("x", F, [2])], [vi("y0", F), vi("sc", F)], 13, [const("m", 2)])
        body = graph(nodes, ins, outs)


def loop_cases():
    cs = []
    # For loop: M known, no cond: exact trips; a carried value and a scan output.
    for opset in (9, 11, 13, 16):
        body = loop_body([h.make_node("Identity", ["cin"], ["cout"]),
                          h.make_node("Add", ["v", "one"], ["vo"]),
                          h.make_node("Identity", ["v"], ["sc"])],
                         [("vo", F)], [("sc", F)], [const("one", 1.0)], [("v", F)])
        m = mk([h.make_node("Loop", ["M", "", "x"], ["xf", "scan"], body=body)],
               [vi("x", F, ["batch", 3])], [vi("xf", F), vi("scan", F)], opset, [const("M", 4)])
        cs.append(case("loop_for_v%d" % opset, m, {"xf": (F, [2, 3]), "scan": (F, [4, 2, 3])},
                       ["--input-shape", "x=2,3"], ort=[spec("x", "float32", [2, 3])],
                       bound={"scan": False, "xf": False}))
    # While loop: M known, cond unknown: trips <= M (spec: upper bound M).
    body = loop_body([h.make_node("ReduceSum", ["v"], ["s"], keepdims=0),
                      h.make_node("Less", ["s", "lim"], ["cout"]),
                      h.make_node("Add", ["v", "v"], ["vo"]),
                      h.make_node("Identity", ["v"], ["sc"])],
                     [("vo", F)], [("sc", F)], [const("lim", 100.0)], [("v", F)])
    m = mk([h.make_node("Loop", ["M", "c", "x"], ["xf", "scan"], body=body, name="L")],
           [vi("x", F, [2]), vi("c", B, [])], [vi("xf", F), vi("scan", F)], 13, [const("M", 5)])
    cs.append(case("loop_while_bounded", m, {"xf": (F, [2]), "scan": (F, [5, 2])},
                   ort=[spec("x", "float32", [2], values=[1, 2]), spec("c", "bool", [], values=[1])],
                   bound={"scan": True, "xf": False}, symbols={"xf:trips": 5}))
    # PyTorch's while: M = INT64_MAX, cond true, body cond computed: no bound;
    # planning must ask for --dim xf:trips.
    m = mk([h.make_node("Loop", ["M", "c", "x"], ["xf", "scan"], body=body, name="L")],
           [vi("x", F, [2])], [vi("xf", F), vi("scan", F)], 13,
           [const("M", (1 << 63) - 1), const("c", True, B)])
    cs.append(case("loop_while_unbounded", m, {"xf": (F, [2]), "scan": (F, ["xf:trips", 2])}, bound={"scan": True},
                   symbols={"xf:trips": None}))
    cs.append(case("loop_while_dim_flag", m, {"scan": (F, [7, 2])}, ["--dim", "xf:trips=7"], bound={"scan": True},
                   ort=[spec("x", "float32", [2], values=[1, 2])], ort_le=True))
    # cond true and the body passes it on: exactly M iterations.
    body2 = loop_body([h.make_node("Identity", ["cin"], ["cout"]),
                       h.make_node("Identity", ["v"], ["vo"]),
                       h.make_node("Shape", ["v"], ["sc"])],
                      [("vo", F)], [("sc", I64)], extra_inputs=[("v", F)])
    m = mk([h.make_node("Loop", ["M", "c", "x"], ["xf", "scan"], body=body2)],
           [vi("x", F, [2, 5])], [vi("xf", F), vi("scan", I64)], 11, [const("M", 3), const("c", True, B)])
    cs.append(case("loop_cond_true_passthrough", m, {"xf": (F, [2, 5]), "scan": (I64, [3, 2])},
                   ort=[spec("x", "float32", [2, 5])], bound={"scan": False}))
    # M = 0 (or cond false): no iteration; carried values come out as they went in.
    m = mk([h.make_node("Loop", ["M", "", "x"], ["xf", "scan"], body=body2)],
           [vi("x", F, [2, 5])], [vi("xf", F), vi("scan", I64)], 11, [const("M", 0)])
    # (ORT reports [0, 0] for the empty scan output: no bytes either way)
    cs.append(case("loop_zero_trips", m, {"xf": (F, [2, 5]), "scan": (I64, [0, 2])},
                   ort=[spec("x", "float32", [2, 5])], ort_le=True))
    # Body reading an outer value, with an If inside the body reading outer values too.
    then_g = graph([h.make_node("Add", ["v", "w"], ["t"])], [], [vi("t", F)], "then")
    else_g = graph([h.make_node("Sub", ["v", "w"], ["e"])], [], [vi("e", F)], "else")
    body3 = loop_body([h.make_node("Identity", ["cin"], ["cout"]),
                       h.make_node("Greater", ["i", "two"], ["big"]),
                       h.make_node("If", ["big"], ["vo"], then_branch=then_g, else_branch=else_g),
                       h.make_node("Mul", ["vo", "w"], ["sc"])],
                      [("vo", F)], [("sc", F)], [const("two", 2)], [("v", F)])
    m = mk([h.make_node("Loop", ["M", "", "x"], ["xf", "scan"], body=body3)],
           [vi("x", F, [3, 4]), vi("w", F, [4])], [vi("xf", F), vi("scan", F)], 13, [const("M", 5)])
    cs.append(case("loop_outer_and_nested_if", m, {"xf": (F, [3, 4]), "scan": (F, [5, 3, 4])},
                   ort=[spec("x", "float32", [3, 4]), spec("w", "float32", [4])]))
    # A carried value that grows every iteration (Concat): two samples cannot
    # bound it; unknown until --dim binds it (ORT gives [2 * 2^3] = [16]).
    body4 = loop_body([h.make_node("Identity", ["cin"], ["cout"]),
                       h.make_node("Concat", ["v", "v"], ["vo"], axis=0),
                       h.make_node("ReduceSum", ["vo"], ["sc"], keepdims=1)],
                      [("vo", F)], [("sc", F)], extra_inputs=[("v", F)])
    m = mk([h.make_node("Loop", ["M", "", "x"], ["xf", "scan"], body=body4, name="G")],
           [vi("x", F, [2])], [vi("xf", F), vi("scan", F)], 11, [const("M", 3)])
    cs.append(case("loop_growing", m, {"xf": (F, [None]), "scan": (F, [3, 1])}, bound={"xf": True},
                   symbols={"xf:carried0.dim0": None}))
    cs.append(case("loop_growing_dim_flag", m, {"xf": (F, [16]), "scan": (F, [3, 1])},
                   ["--dim", "xf:carried0.dim0=16"], bound={"xf": True},
                   ort=[spec("x", "float32", [2])]))
    # A carried value that grows by the same row every iteration (a list
    # appended to): a -> a + 1 -> a + 2 is constant growth, planned at
    # a + M x 1 (ORT: [2 + 3] = [5]); a bound, since a cond could stop it.
    body5 = loop_body([h.make_node("Identity", ["cin"], ["cout"]),
                       h.make_node("Concat", ["v", "one"], ["vo"], axis=0),
                       h.make_node("ReduceSum", ["vo"], ["sc"], keepdims=1)],
                      [("vo", F)], [("sc", F)], extra_inputs=[("v", F)])
    body5.initializer.append(numpy_helper.from_array(np.array([1.0], dtype=np.float32), "one"))
    m = mk([h.make_node("Loop", ["M", "", "x"], ["xf", "scan"], body=body5, name="A")],
           [vi("x", F, [2])], [vi("xf", F), vi("scan", F)], 11, [const("M", 3)])
    cs.append(case("loop_appending", m, {"xf": (F, [5]), "scan": (F, [3, 1])}, bound={"xf": True},
                   symbols={"xf:carried0.dim0": 5}, ort=[spec("x", "float32", [2])]))
    # M from a shape computation: Shape -> Gather gives M's value.
    m = mk([h.make_node("Shape", ["x"], ["sh"]),
            h.make_node("Gather", ["sh", "zero"], ["M"], axis=0),
            h.make_node("Loop", ["M", "", "x"], ["xf", "scan"], body=body2)],
           [vi("x", F, ["n", 5])], [vi("xf", F), vi("scan", I64)], 13, [const("zero", 0)])
    cs.append(case("loop_computed_M", m, {"xf": (F, [6, 5]), "scan": (I64, [6, 2])}, ["--dim", "n=6"],
                   ort=[spec("x", "float32", [6, 5])]))
    cs.append(case("loop_computed_M_unbound", m, {"scan": (I64, [None, 2])}))
    # M = 2^62 with scan outputs: never iterates, fails on the size.
    m = mk([h.make_node("Loop", ["M", "", "x"], ["xf", "scan"], body=body2)],
           [vi("x", F, [2, 5])], [vi("xf", F), vi("scan", I64)], 13, [const("M", BIG)])
    cs.append(case("loop_huge_M", m, {}, error="2^62", timeout=20))
    body5 = loop_body([h.make_node("Identity", ["cin"], ["cout"]), h.make_node("Identity", ["v"], ["vo"]),
                       h.make_node("ReduceSum", ["v"], ["sc"], keepdims=0)],
                      [("vo", F)], [("sc", F)], extra_inputs=[("v", F)])
    m = mk([h.make_node("Loop", ["M", "", "x"], ["xf", "scan"], body=body5)],
           [vi("x", F, [2, 5])], [vi("xf", F), vi("scan", F)], 13, [const("M", BIG)])
    cs.append(case("loop_huge_M_scalar_scan", m, {}, error="overflows", timeout=20))
    m = mk([h.make_node("Loop", ["M", "", "x"], ["xf", "scan"], body=body5)],
           [vi("x", F, [2, 5])], [vi("xf", F), vi("scan", F)], 13, [const("M", (1 << 63) - 1)])
    cs.append(case("loop_int64_max_no_cond", m, {}, error="2^62", timeout=20))
    # Hostile: body input count, node output count, M with 2 elements.
    m = mk([h.make_node("Loop", ["M", "", "x"], ["xf"], body=graph([], [vi("i", I64, [])], []))],
           [vi("x", F, [2])], [vi("xf", F)], 13, [const("M", 2)])
    cs.append(case("loop_bad_body_inputs", m, {}, error="body has 1 inputs"))
    m = mk([h.make_node("Loop", ["M", "", "x"], ["xf", "s", "extra"], body=body2)],
           [vi("x", F, [2, 5])], [vi("xf", F)], 13, [const("M", 2)])
    cs.append(case("loop_bad_outputs", m, {}, error="has 3 outputs"))
    m = mk([h.make_node("Loop", ["M", "", "x"], ["xf", "s"], body=body2)],
           [vi("x", F, [2, 5])], [vi("xf", F)], 13, [const("M", [2, 3])])
    cs.append(case("loop_M_two_elems", m, {}, error="M has 2 elements"))
    # No M and no cond: endless (or stopped by an error); scan outputs unbounded.
    m = mk([h.make_node("Loop", ["", "", "x"], ["xf", "scan"], body=body2, name="E")],
           [vi("x", F, [2, 5])], [vi("xf", F), vi("scan", I64)], 13)
    cs.append(case("loop_no_M_no_cond", m, {"xf": (F, [2, 5]), "scan": (I64, ["xf:trips", 2])}))
    # cond known false: no iteration.
    m = mk([h.make_node("Loop", ["M", "c", "x"], ["xf", "scan"], body=body2)],
           [vi("x", F, [2, 5])], [vi("xf", F), vi("scan", I64)], 13, [const("M", 9), const("c", False, B)])
    cs.append(case("loop_cond_false", m, {"xf": (F, [2, 5]), "scan": (I64, [0, 2])},
                   ort=[spec("x", "float32", [2, 5])], ort_le=True))
    # Body cond computes false from true: one iteration at most (spec by hand).
    body6 = loop_body([h.make_node("Not", ["cin"], ["cout"]), h.make_node("Identity", ["v"], ["vo"]),
                       h.make_node("Shape", ["v"], ["sc"])], [("vo", F)], [("sc", I64)], extra_inputs=[("v", F)])
    m = mk([h.make_node("Loop", ["M", "c", "x"], ["xf", "scan"], body=body6)],
           [vi("x", F, [2, 5])], [vi("xf", F), vi("scan", I64)], 13, [const("M", 9), const("c", True, B)])
    cs.append(case("loop_cond_not", m, {"scan": (I64, [1, 2])}, ort=[spec("x", "float32", [2, 5])]))
    # Hostile: no body, no carried initial, cond of 0 elements.
    m = mk([h.make_node("Loop", ["M", ""], [])], [vi("x", F, [2])], [vi("x", F)], 13, [const("M", 2)])
    cs.append(case("loop_no_body", m, {}, error="needs the graph attribute body"))
    m = mk([h.make_node("Loop", ["M", "c", "x"], ["xf", "scan"], body=body2)],
           [vi("x", F, [2, 5])], [vi("xf", F)], 13, [const("M", 2), const("c", np.zeros((0,)), B)])
    cs.append(case("loop_cond_empty", m, {}, error="cond has 0 elements"))
    return cs


# ----------------------------------------------------------------- Scan

def scan_cases():
    cs = []
    # Opset 9+: running sum; state [2], scan input [5, 2] along axis 0.
    body = graph([h.make_node("Add", ["s", "xi"], ["so"]), h.make_node("Identity", ["so"], ["yo"])],
                 [vi("s", F), vi("xi", F)], [vi("so", F), vi("yo", F)])
    for opset in (9, 11, 16):
        m = mk([h.make_node("Scan", ["s0", "x"], ["sf", "ys"], body=body, num_scan_inputs=1)],
               [vi("s0", F, [2]), vi("x", F, ["seq", 2])], [vi("sf", F), vi("ys", F)], opset)
        cs.append(case("scan_v%d" % opset, m, {"sf": (F, [2]), "ys": (F, [5, 2])}, ["--dim", "seq=5"],
                       ort=[spec("s0", "float32", [2]), spec("x", "float32", [5, 2])]))
    # Axes: scan along axis 1, stack along the last axis (negative: opset 11).
    m = mk([h.make_node("Scan", ["s0", "x"], ["sf", "ys"], body=body, num_scan_inputs=1,
                        scan_input_axes=[1], scan_output_axes=[-1])],
           [vi("s0", F, [2]), vi("x", F, [2, 7])], [vi("sf", F), vi("ys", F)], 11)
    cs.append(case("scan_axes", m, {"sf": (F, [2]), "ys": (F, [2, 7])},
                   ort=[spec("s0", "float32", [2]), spec("x", "float32", [2, 7])]))
    # Two scan inputs of different lengths: refused.
    body2 = graph([h.make_node("Add", ["s", "xi"], ["s1"]), h.make_node("Add", ["s1", "zi"], ["so"])],
                  [vi("s", F), vi("xi", F), vi("zi", F)], [vi("so", F)])
    m = mk([h.make_node("Scan", ["s0", "x", "z"], ["sf"], body=body2, num_scan_inputs=2)],
           [vi("s0", F, [2]), vi("x", F, [3, 2]), vi("z", F, [4, 2])], [vi("sf", F)], 11)
    cs.append(case("scan_length_mismatch", m, {}, error="scan input lengths differ"))
    # Opset 8: batch dim first, optional sequence_lens (spec; ORT checked).
    m = mk([h.make_node("Scan", ["", "s0", "x"], ["sf", "ys"], body=body, num_scan_inputs=1)],
           [vi("s0", F, [3, 2]), vi("x", F, [3, 5, 2])], [vi("sf", F), vi("ys", F)], 8)
    cs.append(case("scan_v8", m, {"sf": (F, [3, 2]), "ys": (F, [3, 5, 2])},
                   ort=[spec("s0", "float32", [3, 2]), spec("x", "float32", [3, 5, 2])]))
    # A state that grows (Concat): unknown until bound.
    body3 = graph([h.make_node("Concat", ["s", "xi"], ["so"], axis=0), h.make_node("Identity", ["xi"], ["yo"])],
                  [vi("s", F), vi("xi", F)], [vi("so", F), vi("yo", F)])
    m = mk([h.make_node("Scan", ["s0", "x"], ["sf", "ys"], body=body3, num_scan_inputs=1, name="S")],
           [vi("s0", F, [2]), vi("x", F, [4, 2])], [vi("sf", F), vi("ys", F)], 11)
    cs.append(case("scan_growing_state", m, {"sf": (F, [None]), "ys": (F, [4, 2])}, bound={"sf": True}))
    # (ORT refuses a Scan state that changes shape; roamc plans it at the bound given)
    cs.append(case("scan_growing_state_flag", m, {"sf": (F, [10]), "ys": (F, [4, 2])},
                   ["--dim", "sf:state0.dim0=10"]))
    # Opset 8 with sequence_lens given.
    m = mk([h.make_node("Scan", ["sl", "s0", "x"], ["sf", "ys"], body=body, num_scan_inputs=1, directions=[1])],
           [vi("sl", I32, [3]), vi("s0", F, [3, 2]), vi("x", F, [3, 5, 2])], [vi("sf", F), vi("ys", F)], 8)
    cs.append(case("scan_v8_lens", m, {"sf": (F, [3, 2]), "ys": (F, [3, 5, 2])}))
    m = mk([h.make_node("Scan", ["", "s0", "x"], ["sf", "ys"], body=body, num_scan_inputs=1)],
           [vi("s0", F, [3, 2]), vi("x", F, [4, 5, 2])], [vi("sf", F), vi("ys", F)], 8)
    cs.append(case("scan_v8_batch_mismatch", m, {}, error="batch dims differ"))
    # Hostile: num_scan_inputs too large, a scalar scan input, bad axes count.
    m = mk([h.make_node("Scan", ["s0", "x"], ["sf", "ys"], body=body, num_scan_inputs=5)],
           [vi("s0", F, [2]), vi("x", F, [4, 2])], [vi("sf", F), vi("ys", F)], 11)
    cs.append(case("scan_too_many_scan_inputs", m, {}, error="num_scan_inputs is 5"))
    m = mk([h.make_node("Scan", ["s0", "x"], ["sf", "ys"], body=body, num_scan_inputs=1)],
           [vi("s0", F, [2]), vi("x", F, [])], [vi("sf", F), vi("ys", F)], 11)
    cs.append(case("scan_scalar_input", m, {}, error="out of range for rank 0"))
    m = mk([h.make_node("Scan", ["s0", "x"], ["sf", "ys"], body=body, num_scan_inputs=1, scan_input_axes=[0, 1])],
           [vi("s0", F, [2]), vi("x", F, [4, 2])], [vi("sf", F), vi("ys", F)], 11)
    cs.append(case("scan_axes_count", m, {}, error="scan_input_axes has 2 entries"))
    return cs


# ----------------------------------------------------- data-dependent ops

def data_cases():
    cs = []
    # NonZero: [rank, N], N <= numel (spec: upper bound; ORT's N <= it).
    for opset in (9, 13):
        m = mk([h.make_node("NonZero", ["x"], ["nz"], name="nzn")], [vi("x", F, [3, 4])], [vi("nz", I64)], opset)
        cs.append(case("nonzero_v%d" % opset, m, {"nz": (I64, [2, 12])}, bound={"nz": True},
                       ort=[spec("x", "float32", [3, 4])], ort_le=True, symbols={"nz:count": 12}))
    # A known input: exact, and its value feeds a shape (Shape of the indices).
    m = mk([h.make_node("NonZero", ["k"], ["nz"]), h.make_node("Shape", ["nz"], ["s"])],
           [vi("x", F, [1])], [vi("nz", I64), vi("s", I64)], 13, [const("k", [[0, 3, 0], [1, 0, 2]])])
    cs.append(case("nonzero_known", m, {"nz": (I64, [2, 3]), "s": (I64, [2])}, bound={"nz": False},
                   ort=[spec("x", "float32", [1])]))
    m = mk([h.make_node("NonZero", ["x"], ["nz"])], [vi("x", F, [0, 3])], [vi("nz", I64)], 13)
    cs.append(case("nonzero_empty", m, {"nz": (I64, [2, 0])}, ort=[spec("x", "float32", [0, 3])]))
    m = mk([h.make_node("NonZero", ["x"], ["nz"])], [vi("x", F, ["n", 3])], [vi("nz", I64)], 13)
    cs.append(case("nonzero_unbound", m, {"nz": (I64, [2, None])}))
    # NonMaxSuppression: [N, 3], N <= batches * classes * min(max per class, boxes).
    for opset in (10, 11):
        m = mk([h.make_node("NonMaxSuppression", ["boxes", "scores", "mo", "iou", "st"], ["sel"])],
               [vi("boxes", F, [2, 6, 4]), vi("scores", F, [2, 3, 6])], [vi("sel", I64)], opset,
               [const("mo", [4]), const("iou", [0.5]), const("st", [0.0])])
        cs.append(case("nms_v%d" % opset, m, {"sel": (I64, [24, 3])}, bound={"sel": True},
                       ort=[spec("boxes", "float32", [2, 6, 4]), spec("scores", "float32", [2, 3, 6])], ort_le=True))
    m = mk([h.make_node("NonMaxSuppression", ["boxes", "scores", "mo"], ["sel"])],
           [vi("boxes", F, [2, 6, 4]), vi("scores", F, [2, 3, 6])], [vi("sel", I64)], 11, [const("mo", [100])])
    cs.append(case("nms_max_above_boxes", m, {"sel": (I64, [36, 3])}, bound={"sel": True}))
    m = mk([h.make_node("NonMaxSuppression", ["boxes", "scores"], ["sel"])],
           [vi("boxes", F, [2, 6, 4]), vi("scores", F, [2, 3, 6])], [vi("sel", I64)], 11)
    cs.append(case("nms_no_max", m, {"sel": (I64, [0, 3])},
                   ort=[spec("boxes", "float32", [2, 6, 4]), spec("scores", "float32", [2, 3, 6])]))
    m = mk([h.make_node("NonMaxSuppression", ["boxes", "scores", "mo"], ["sel"])],
           [vi("boxes", F, [2, 6, 4]), vi("scores", F, [2, 3, 6]), vi("mo", I64, [1])], [vi("sel", I64)], 11)
    cs.append(case("nms_max_unknown", m, {"sel": (I64, [36, 3])}, bound={"sel": True}))
    m = mk([h.make_node("NonMaxSuppression", ["boxes", "scores", "mo"], ["sel"])],
           [vi("boxes", F, [2, 6, 5]), vi("scores", F, [2, 3, 6])], [vi("sel", I64)], 11, [const("mo", [4])])
    cs.append(case("nms_bad_boxes", m, {}, error="not 4"))
    # TopK: attribute k before 10, input K from 10; a computed K (Shape ->
    # Gather) is exact; an unknown K is at most the axis dim.
    m = mk([h.make_node("TopK", ["x"], ["v", "i"], k=2, axis=1)], [vi("x", F, [3, 5])],
           [vi("v", F), vi("i", I64)], 9)
    cs.append(case("topk_v1_attr", m, {"v": (F, [3, 2]), "i": (I64, [3, 2])}, ort=[spec("x", "float32", [3, 5])]))
    for opset in (10, 11):
        m = mk([h.make_node("TopK", ["x", "k"], ["v", "i"])], [vi("x", F, [3, 5])],
               [vi("v", F), vi("i", I64)], opset, [const("k", [4])])
        cs.append(case("topk_v%d_input" % opset, m, {"v": (F, [3, 4]), "i": (I64, [3, 4])},
                       ort=[spec("x", "float32", [3, 5])], bound={"v": False}))
    m = mk([h.make_node("Shape", ["y"], ["sh"]), h.make_node("Slice", ["sh", "st", "en"], ["k"]),
            h.make_node("TopK", ["x", "k"], ["v", "i"], axis=0)],
           [vi("x", F, [6, 2]), vi("y", F, ["m", 3])], [vi("v", F), vi("i", I64)], 13,
           [const("st", [0]), const("en", [1])])
    cs.append(case("topk_computed_k", m, {"v": (F, [4, 2]), "i": (I64, [4, 2])}, ["--dim", "m=4"],
                   ort=[spec("x", "float32", [6, 2]), spec("y", "float32", [4, 3])], bound={"v": False}))
    cs.append(case("topk_computed_k_unbound", m, {"v": (F, [None, 2])}))
    m = mk([h.make_node("TopK", ["x", "k"], ["v", "i"], name="tk")], [vi("x", F, [3, 5]), vi("k", I64, [1])],
           [vi("v", F), vi("i", I64)], 11)
    cs.append(case("topk_unknown_k", m, {"v": (F, [3, 5]), "i": (I64, [3, 5])}, bound={"v": True, "i": True},
                   symbols={"v:k": 5}))
    m = mk([h.make_node("TopK", ["x"], ["v", "i"], k=9)], [vi("x", F, [3, 5])], [vi("v", F), vi("i", I64)], 9)
    cs.append(case("topk_k_too_big", m, {}, error="exceeds the axis dim"))
    m = mk([h.make_node("TopK", ["x"], ["v", "i"], k=-1)], [vi("x", F, [3, 5])], [vi("v", F), vi("i", I64)], 9)
    cs.append(case("topk_k_negative", m, {}, error="k is -1"))
    m = mk([h.make_node("TopK", ["x", "k"], ["v", "i"])], [vi("x", F, [3, 5])], [vi("v", F), vi("i", I64)], 11,
           [const("k", [1, 2])])
    cs.append(case("topk_k_two_elems", m, {}, error="K has 2 elements"))
    m = mk([h.make_node("TopK", ["x"], ["v", "i"])], [vi("x", F, [3, 5])], [vi("v", F), vi("i", I64)], 11)
    cs.append(case("topk_no_k", m, {}, error="needs the input K"))
    m = mk([h.make_node("TopK", ["x", "k"], ["v", "i"])], [vi("x", F, [])], [vi("v", F), vi("i", I64)], 11,
           [const("k", [1])])
    cs.append(case("topk_scalar", m, {}, error="out of range for rank 0"))
    # Unique: flat (N <= numel) or along an axis (N <= that dim); spec bounds.
    m = mk([h.make_node("Unique", ["x"], ["y", "idx", "inv", "cnt"])], [vi("x", F, [2, 3])],
           [vi("y", F), vi("idx", I64), vi("inv", I64), vi("cnt", I64)], 11)
    cs.append(case("unique_flat", m, {"y": (F, [6]), "idx": (I64, [6]), "inv": (I64, [6]), "cnt": (I64, [6])},
                   bound={"y": True, "inv": False}, ort=[spec("x", "float32", [2, 3], values=[1, 2, 1, 3, 3, 2])],
                   ort_le=True))
    m = mk([h.make_node("Unique", ["x"], ["y", "idx", "inv", "cnt"], axis=1, sorted=0)], [vi("x", F, [2, 4])],
           [vi("y", F), vi("idx", I64), vi("inv", I64), vi("cnt", I64)], 11)
    cs.append(case("unique_axis", m, {"y": (F, [2, 4]), "idx": (I64, [4]), "inv": (I64, [4]), "cnt": (I64, [4])},
                   bound={"y": True}, ort=[spec("x", "float32", [2, 4], values=[1, 1, 2, 2, 3, 3, 4, 4])], ort_le=True))
    m = mk([h.make_node("Unique", ["x"], ["y", "idx", "inv", "cnt"], axis=3)], [vi("x", F, [2, 4])],
           [vi("y", F)], 11)
    cs.append(case("unique_bad_axis", m, {}, error="axis 3 out of range"))
    return cs


# ------------------------------------------------------ random, optional

def random_cases():
    cs = []
    m = mk([h.make_node("RandomNormal", [], ["r"], shape=[2, 3], dtype=T.DOUBLE),
            h.make_node("RandomUniform", [], ["u"], shape=[4])], [vi("x", F, [1])],
           [vi("r", T.DOUBLE), vi("u", F)], 13)
    cs.append(case("random", m, {"r": (T.DOUBLE, [2, 3]), "u": (F, [4])}, ort=[spec("x", "float32", [1])]))
    m = mk([h.make_node("RandomNormalLike", ["x"], ["r"]),
            h.make_node("RandomUniformLike", ["x"], ["u"], dtype=T.DOUBLE)], [vi("x", F, ["b", 3])],
           [vi("r", F), vi("u", T.DOUBLE)], 13)
    cs.append(case("random_like", m, {"r": (F, [2, 3]), "u": (T.DOUBLE, [2, 3])}, ["--dim", "b=2"],
                   ort=[spec("x", "float32", [2, 3])]))
    m = mk([h.make_node("Multinomial", ["x"], ["s"], sample_size=5),
            h.make_node("Multinomial", ["x"], ["s64"], dtype=I64)], [vi("x", F, [2, 4])],
           [vi("s", I32), vi("s64", I64)], 13)
    cs.append(case("multinomial", m, {"s": (I32, [2, 5]), "s64": (I64, [2, 1])}, ort=[spec("x", "float32", [2, 4])]))
    m = mk([h.make_node("Bernoulli", ["x"], ["b"]), h.make_node("Bernoulli", ["x"], ["bb"], dtype=B)],
           [vi("x", F, [2, 4])], [vi("b", F), vi("bb", B)], 15)
    cs.append(case("bernoulli", m, {"b": (F, [2, 4]), "bb": (B, [2, 4])}, ort=[spec("x", "float32", [2, 4])]))
    m = mk([h.make_node("RandomNormal", [], ["r"], shape=[2, -3])], [vi("x", F, [1])], [vi("r", F)], 13)
    cs.append(case("random_negative_shape", m, {}, error="shape dim 1 is -3"))
    m = mk([h.make_node("RandomNormal", [], ["r"], shape=[BIG, 4])], [vi("x", F, [1])], [vi("r", F)], 13)
    cs.append(case("random_huge_shape", m, {}, error="2^62"))
    m = mk([h.make_node("RandomUniform", [], ["r"], shape=[2], dtype=I64)], [vi("x", F, [1])], [vi("r", F)], 13)
    cs.append(case("random_int_dtype", m, {}, error="dtype 7"))
    m = mk([h.make_node("Multinomial", ["x"], ["s"])], [vi("x", F, [2, 4, 1])], [vi("s", I32)], 13)
    cs.append(case("multinomial_rank3", m, {}, error="rank 3"))
    # Optional (spec: an optional is planned as the tensor it holds).
    m = mk([h.make_node("Optional", ["x"], ["o"]), h.make_node("OptionalHasElement", ["o"], ["has"]),
            h.make_node("OptionalGetElement", ["o"], ["g"])], [vi("x", F, [2, 3])],
           [vi("has", B), vi("g", F)], 15, ir=8)
    cs.append(case("optional", m, {"has": (B, []), "g": (F, [2, 3])}, ort=[spec("x", "float32", [2, 3])]))
    return cs


def cases():
    return if_cases() + loop_cases() + scan_cases() + data_cases() + random_cases() + nesting_cases()


# --------------------------------------------------------------- runner

def norm_dim(d):
    return d if isinstance(d, int) or d is None else str(d)


def check_roamc(roamc, c, path):
    """Returns a list of problems (empty: pass)."""
    try:
        p = subprocess.run([roamc, "shapes", path] + c["bindings"] + ["--report", "json"], capture_output=True,
                           text=True, timeout=c.get("timeout", 60))
    except subprocess.TimeoutExpired:
        return ["timed out"]
    if "error" in c:
        if p.returncode == 0:
            return ["expected an error containing %r, got success" % c["error"]]
        if c["error"] not in p.stderr:
            return ["expected an error containing %r, got: %s" % (c["error"], p.stderr.strip())]
        if "AddressSanitizer" in p.stderr or "runtime error" in p.stderr:
            return ["sanitizer: " + p.stderr[-2000:]]
        return []
    if p.returncode != 0:
        return ["roamc failed (%d): %s" % (p.returncode, p.stderr.strip()[-2000:])]
    if "runtime error" in p.stderr:
        return ["sanitizer: " + p.stderr[-2000:]]
    rep = json.loads(p.stdout)
    vals = {v["name"]: v for v in rep["values"]}
    syms = {s["name"]: s["value"] for s in rep.get("symbols", [])}
    bad = []
    for name, (elem, dims) in c["expect"].items():
        v = vals.get(name)
        if v is None:
            bad.append("%s: not reported" % name)
            continue
        got = None if v["shape"] is None else [norm_dim(d) for d in v["shape"]]
        if v["elem_type"] != elem or got != dims:
            bad.append("%s: expected %s %s, got %s %s" % (name, elem, dims, v["elem_type"], got))
    for name, want in c.get("bound", {}).items():
        if name in vals and vals[name]["bound"] != want:
            bad.append("%s: bound is %s, expected %s" % (name, vals[name]["bound"], want))
    for name, want in c.get("symbols", {}).items():
        if name not in syms:
            bad.append("symbol %s missing (have %s)" % (name, sorted(syms)))
        elif syms[name] != want:
            bad.append("symbol %s = %s, expected %s" % (name, syms[name], want))
    return bad


def check_ort(c, path, tmp):
    """The oracle: ORT's shapes equal the expected ones (or are at most
    them where the case says ort_le or the value is a bound)."""
    specs = os.path.join(tmp, c["name"] + ".inputs.json")
    with open(specs, "w") as f:
        json.dump(c["ort"], f)
    p = subprocess.run(["node", os.path.join(REPO, "tests", "ort_shapes.js"), path, specs], capture_output=True,
                       text=True, timeout=120)
    if p.returncode != 0:
        return ["ORT failed: " + p.stderr.strip()[-1000:]]
    got = json.loads(p.stdout)
    bad = []
    for name, (elem, dims) in c["expect"].items():
        if name not in got:
            continue
        o = got[name]
        le = c.get("ort_le") or c.get("bound", {}).get(name)
        ok = o["type"] == elem and dims is not None and len(o["shape"]) == len(dims) and all(
            d is None or (g <= d if le else g == d) for g, d in zip(o["shape"], dims))
        if not ok:
            bad.append("ORT %s: %s %s vs expected %s %s" % (name, o["type"], o["shape"], elem, dims))
    return bad


def main(argv):
    roamc = os.path.join(REPO, "build", "roamc")
    use_ort, only, verbose = False, None, False
    args = argv[1:]
    while args:
        a = args.pop(0)
        if a == "--ort":
            use_ort = True
        elif a == "--only":
            only = args.pop(0)
        elif a == "-v":
            verbose = True
        else:
            roamc = a
    if use_ort and not (shutil.which("node") and os.path.isdir(os.path.join(REPO, "node_modules", "onnxruntime-node"))):
        print("note: node or onnxruntime-node missing; --ort ignored")
        use_ort = False
    n_pass = n_fail = 0
    with tempfile.TemporaryDirectory() as tmp:
        for c in cases():
            if only and only not in c["name"]:
                continue
            path = os.path.join(tmp, c["name"] + ".onnx")
            with open(path, "wb") as f:
                f.write(c["model"].SerializeToString())
            bad = check_roamc(roamc, c, path)
            if use_ort and c.get("ort"):
                bad += check_ort(c, path, tmp)
            if bad:
                n_fail += 1
                print("FAIL %s\n  %s" % (c["name"], "\n  ".join(bad)))
            else:
                n_pass += 1
                if verbose:
                    print("PASS %s" % c["name"])
    print("control: %d passed, %d failed" % (n_pass, n_fail))
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
