#!/usr/bin/python3
"""Control flow counted (issue 29): models whose memory sits inside If, Loop
and Scan bodies and model-local functions.

usage: /usr/bin/python3 tests/control_flow_cases.py WORKDIR [ROAMC]

Writes the models and WORKDIR/corpus.json (models/corpus.py's format, so that
tests/shape_oracle.py compares every value, those inside the If branches ONNX
Runtime takes included, with ONNX Runtime).  With ROAMC, also checks what
`roamc shapes --report json` says of each node with a body (how it was
counted, the branch, the working memory in bytes, worked out by hand below)
and prints the lines of the report.  Exit 0 pass, 1 fail.

The cases:
  if_net       the network (MatMul, Relu, MatMul) inside an If whose cond is
               Size(Shape(x)) == 3: folded, the then branch's memory counted;
  nested_ifs   x of rank 3 through two nested shape-only Ifs (Squeeze to rank
               2 when the rank is not 2; inside, Unsqueeze/Identity), then an
               LSTM that needs rank 3: folded at both levels;
  data_if      an If on a data input (cond unknown): the larger branch;
  invalid_if   an If on a data input whose then branch is invalid for the
               input's rank (an LSTM given rank 2): the else branch is taken;
  loop_grow    a Loop of 4 iterations whose carried value grows by a Concat
               of one row per iteration, with a MatMul temporary;
  scan         a Scan over 6 steps with a state and a Tanh temporary;
  function     a model-local function (MatMul, Add, Relu) called twice;
  vad_weights  a voice-activity model's shape (silero VAD style): an If on the
               sample rate (data) whose branches hold their own weights as
               initializers, each with an If nested on a data flag whose
               branches hold initializers too (a Constant in one of them).

With --weights MODEL PLAN: checks that the plan's peak holds at least the
bytes of every initializer and Constant in MODEL, those inside bodies (nested
ones too) included: an inference engine loads every branch's weights
whichever runs (DESIGN.md "Control flow").  Exit 0 pass, 1 fail.
"""
import json, os, subprocess, sys

import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh

F, I64, BOOL = T.FLOAT, T.INT64, T.BOOL
ALIGN = 512


def vi(name, elem, shape=None):
    return h.make_tensor_value_info(name, elem, shape)


def c(name, v, dt=np.int64):
    return nh.from_array(np.asarray(v, dtype=dt), name)


def w(name, *shape):
    return nh.from_array(np.random.RandomState(len(name)).rand(*shape).astype(np.float32), name)


def mk(nodes, inputs, outputs, inits, opset=13, functions=()):
    g = h.make_graph(nodes, "g", inputs, outputs, inits)
    ops = [h.make_opsetid("", opset)] + ([h.make_opsetid("local", 1)] if functions else [])
    return h.make_model(g, opset_imports=ops, ir_version=8, functions=list(functions))


def r(nbytes):
    return (nbytes + ALIGN - 1) // ALIGN * ALIGN


def rank_is(x, k, pre):
    """Nodes computing pre+'c' = (Size(Shape(x)) == k)."""
    return [h.make_node("Shape", [x], [pre + "s"]), h.make_node("Size", [pre + "s"], [pre + "n"]),
            h.make_node("Equal", [pre + "n", "k%d" % k], [pre + "c"])]


def ranks():
    return [c("k2", 2), c("k3", 3), c("ax0", [0])]


def if_net():
    # x [B, 64]; then: MatMul(x, W1 [64, 256]) -> Relu -> MatMul(W2 [256, 32]);
    # the If's cond: rank(x) == 2
    then = h.make_graph([h.make_node("MatMul", ["x", "W1"], ["t1"]),
                         h.make_node("Relu", ["t1"], ["t2"]),
                         h.make_node("MatMul", ["t2", "W2"], ["y_then"])],
                        "net", [], [vi("y_then", F)])
    els = h.make_graph([h.make_node("ReduceMean", ["x"], ["y_else"], axes=[0], keepdims=1)],
                       "other", [], [vi("y_else", F)])
    nodes = rank_is("x", 2, "r_") + [h.make_node("If", ["r_c"], ["y"], then_branch=then,
                                                 else_branch=els, name="net_if")]
    m = mk(nodes, [vi("x", F, ["B", 64])], [vi("y", F)], [w("W1", 64, 256), w("W2", 256, 32)] + ranks())
    B = 16
    # t1 and t2 [16, 256] live together at the Relu (t1 is read there); y_then
    # is the If's output, counted in the plan
    want = {"net_if": ("if_taken", "then", 2 * r(B * 256 * 4))}
    return m, [{"name": "x", "dtype": "float32", "shape": [B, 64]}], want


def nested_ifs():
    # x [1, B, 32] (rank 3).  Outer: if rank(x) != 2 -> Squeeze to [B, 32],
    # else Identity.  Then inner (on the outer's result): if rank == 2 ->
    # Unsqueeze back to [1, B, 32] (the LSTM's [seq, batch, in]), else
    # Identity.  An LSTM reads it: only rank 3 is valid.
    inner_then = h.make_graph([h.make_node("Unsqueeze", ["sq", "ax0"], ["u"])], "it", [], [vi("u", F)])
    inner_else = h.make_graph([h.make_node("Identity", ["sq"], ["u2"])], "ie", [], [vi("u2", F)])
    outer_then = h.make_graph(
        [h.make_node("Squeeze", ["x", "ax0"], ["sq"])] + rank_is("sq", 2, "i_") +
        [h.make_node("If", ["i_c"], ["x3a"], then_branch=inner_then, else_branch=inner_else,
                     name="inner_if")],
        "ot", [], [vi("x3a", F)])
    outer_else = h.make_graph([h.make_node("Unsqueeze", ["x", "ax0"], ["x3b"])], "oe", [],
                              [vi("x3b", F)])
    nodes = rank_is("x", 2, "o_") + [
        h.make_node("Not", ["o_c"], ["o_nc"]),
        h.make_node("If", ["o_nc"], ["x3"], then_branch=outer_then, else_branch=outer_else,
                    name="outer_if"),
        h.make_node("LSTM", ["x3", "W", "R"], ["Y", "Yh", "Yc"], hidden_size=16, name="lstm")]
    m = mk(nodes, [vi("x", F, [1, "B", 32])], [vi("Y", F)],
           [w("W", 1, 64, 32), w("R", 1, 64, 16)] + ranks())
    # outer then branch: sq is a view of x (0 B); i_s, i_n, i_c (512 B each,
    # i_s [2] int64); the inner If's branch output is the outer's output
    want = {"outer_if": ("if_taken", "then", 2 * ALIGN)}
    return m, [{"name": "x", "dtype": "float32", "shape": [1, 8, 32]}], want


def data_if():
    # cond from a data input: both branches could run; the larger counted
    big = h.make_graph([h.make_node("Tile", ["x", "reps"], ["t"]),
                        h.make_node("ReduceMean", ["t"], ["yb"], axes=[0], keepdims=1)],
                       "big", [], [vi("yb", F)])
    small = h.make_graph([h.make_node("Neg", ["x"], ["ys"])], "small", [], [vi("ys", F)])
    nodes = [h.make_node("If", ["flag"], ["y"], then_branch=small, else_branch=big, name="sel")]
    m = mk(nodes, [vi("x", F, [4, 256]), vi("flag", BOOL, [])], [vi("y", F)],
           [c("reps", [8, 1])])
    # else: t [32, 256] float = 32 KiB; then: nothing but its output
    want = {"sel": ("if_larger_branch", "else", r(32 * 256 * 4))}
    return m, [{"name": "x", "dtype": "float32", "shape": [4, 256]},
               {"name": "flag", "dtype": "bool", "shape": [], "values": [0]}], want


def invalid_if():
    # flag is data, but the then branch runs an LSTM on a rank-2 x: invalid
    # for these shapes, so only the else branch can run.  x's shape is not in
    # the file (--input-shape gives it), as ONNX Runtime loads the model only
    # when its own inference cannot see the rank
    bad = h.make_graph([h.make_node("LSTM", ["x", "W", "R"], ["Yb", "", ""], hidden_size=16)],
                       "bad", [], [vi("Yb", F)])
    good = h.make_graph([h.make_node("Relu", ["x"], ["g1"]), h.make_node("Neg", ["g1"], ["Yg"])],
                        "good", [], [vi("Yg", F)])
    nodes = [h.make_node("If", ["flag"], ["y"], then_branch=bad, else_branch=good, name="guard")]
    m = mk(nodes, [vi("x", F, None), vi("flag", BOOL, [])], [vi("y", F)],
           [w("W", 1, 64, 32), w("R", 1, 64, 16)])
    want = {"guard": ("if_only_valid_branch", "else", r(8 * 32 * 4))}
    return m, [{"name": "x", "dtype": "float32", "shape": [8, 32]},
               {"name": "flag", "dtype": "bool", "shape": [], "values": [0]}], want


def loop_grow():
    # carried acc [k, 64] grows by one row a step (Concat); a MatMul
    # temporary [1, 256] per iteration; 4 iterations
    body = h.make_graph(
        [h.make_node("Identity", ["cond_in"], ["cond_out"]),
         h.make_node("MatMul", ["row", "Wl"], ["hid"]),
         h.make_node("ReduceMean", ["hid"], ["m"], axes=[1], keepdims=1),
         h.make_node("Mul", ["row", "m"], ["nrow"]),
         h.make_node("Concat", ["acc_in", "nrow"], ["acc_out"], axis=0)],
        "body", [vi("i", I64, []), vi("cond_in", BOOL, []), vi("acc_in", F, None)],
        [vi("cond_out", BOOL), vi("acc_out", F)])
    nodes = [h.make_node("Loop", ["trips", "", "x"], ["acc"], body=body, name="grow")]
    m = mk(nodes, [vi("x", F, [1, 64]), vi("row", F, [1, 64])], [vi("acc", F)],
           [c("trips", 4), w("Wl", 64, 256)])
    # per iteration, at the Concat: acc_in + nrow (512 B) + acc_out + cond_out
    # (512 B, a body output), the carried value at the bound inference gives
    # it (1 + 4 = 5 rows in, 6 out: one row more than the last iteration
    # really holds); hid [1, 256] is freed after the ReduceMean
    want = {"grow": ("loop_iteration", None, r(5 * 64 * 4) + ALIGN + r(6 * 64 * 4) + ALIGN)}
    return m, [{"name": "x", "dtype": "float32", "shape": [1, 64]},
               {"name": "row", "dtype": "float32", "shape": [1, 64]}], want


def scan():
    body = h.make_graph([h.make_node("Tanh", ["x_t"], ["th"]),
                         h.make_node("Add", ["s_in", "th"], ["s_out"]),
                         h.make_node("Mul", ["s_out", "th"], ["y_t"])],
                        "scan_body", [vi("s_in", F, [128]), vi("x_t", F, [128])],
                        [vi("s_out", F), vi("y_t", F)])
    nodes = [h.make_node("Scan", ["s0", "x"], ["s_final", "ys"], body=body, num_scan_inputs=1,
                         name="scan")]
    m = mk(nodes, [vi("s0", F, [128]), vi("x", F, ["L", 128])], [vi("s_final", F), vi("ys", F)], [],
           opset=11)
    # x_t dies at the Tanh, s_in at the Add: th, s_out and y_t (512 B each)
    # are live at the Mul
    want = {"scan": ("scan_iteration", None, 3 * ALIGN)}
    return m, [{"name": "s0", "dtype": "float32", "shape": [128]},
               {"name": "x", "dtype": "float32", "shape": [6, 128]}], want


def function():
    lin = h.make_function("local", "LinearRelu", ["x", "w", "b"], ["y"],
                          [h.make_node("MatMul", ["x", "w"], ["xw"]),
                           h.make_node("Add", ["xw", "b"], ["z"]),
                           h.make_node("Relu", ["z"], ["y"])], [h.make_opsetid("", 13)])
    nodes = [h.make_node("LinearRelu", ["x", "W1", "b1"], ["h1"], domain="local", name="l1"),
             h.make_node("LinearRelu", ["h1", "W2", "b2"], ["y"], domain="local", name="l2")]
    m = mk(nodes, [vi("x", F, ["B", 64])], [vi("y", F)],
           [w("W1", 64, 512), w("b1", 512), w("W2", 512, 16), w("b2", 16)], functions=[lin])
    B = 32
    # l1: xw and z [32, 512] both live at the Add; y is the call's output
    want = {"l1": ("function", None, 2 * r(B * 512 * 4)), "l2": ("function", None, 2 * r(B * 16 * 4))}
    return m, [{"name": "x", "dtype": "float32", "shape": [B, 64]}], want


def vad_weights():
    # x [1, 64]; sr (int64, data): 16 kHz or 8 kHz; flag (bool, data).
    # then (16 kHz): h = x @ W16a [64, 128]; inner If on flag: h @ W16b
    # [128, 32], or h @ W16c [128, 32] + Constant c16 [32]; else (8 kHz):
    # h = x @ W8a [64, 96]; inner If on flag: h @ W8b or h @ W8c [96, 32]
    def inner(pre, rows, const):
        nodes = [h.make_node("MatMul", ["h" + pre, "W%sc" % pre], ["e" + pre])]
        if const:
            nodes = [h.make_node("Constant", [], ["c" + pre], value=w("c" + pre, 32))] + nodes + [
                h.make_node("Add", ["e" + pre, "c" + pre], ["ye" + pre])]
        out_else = "ye" + pre if const else "e" + pre
        then = h.make_graph([h.make_node("MatMul", ["h" + pre, "W%sb" % pre], ["yt" + pre])],
                            "t" + pre, [], [vi("yt" + pre, F)], [w("W%sb" % pre, rows, 32)])
        els = h.make_graph(nodes, "e" + pre, [], [vi(out_else, F)], [w("W%sc" % pre, rows, 32)])
        return h.make_node("If", ["flag"], ["y" + pre], then_branch=then, else_branch=els,
                           name="inner" + pre)

    def rate(pre, rows):
        return h.make_graph([h.make_node("MatMul", ["x", "W%sa" % pre], ["h" + pre]),
                             inner(pre, rows, pre == "16")],
                            "r" + pre, [], [vi("y" + pre, F)], [w("W%sa" % pre, 64, rows)])
    nodes = [h.make_node("Equal", ["sr", "k16000"], ["is16"]),
             h.make_node("If", ["is16"], ["y"], then_branch=rate("16", 128),
                         else_branch=rate("8", 96), name="sr_if")]
    m = mk(nodes, [vi("x", F, [1, 64]), vi("sr", I64, []), vi("flag", BOOL, [])], [vi("y", F)],
           [c("k16000", 16000)])
    # the 16 kHz branch is the larger (h16 [1, 128] and its inner If's)
    want = {"sr_if": ("if_larger_branch", "then", None)}
    return m, [{"name": "x", "dtype": "float32", "shape": [1, 64]},
               {"name": "sr", "dtype": "int64", "shape": [], "values": [16000]},
               {"name": "flag", "dtype": "bool", "shape": [], "values": [0]}], want


def file_weights(model):
    """Bytes of every initializer and Constant node in the model, and of
    those inside bodies (any depth)."""
    def elem_bytes(dt):
        return np.dtype(onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[dt]).itemsize

    def tensor_bytes(t):
        n = int(np.prod(t.dims)) if len(t.dims) else 1
        return n * elem_bytes(t.data_type)

    def constant_bytes(node):
        for a in node.attribute:
            if a.name == "value":
                return tensor_bytes(a.t)
            if a.name == "sparse_value":
                v = a.sparse_tensor.values
                n = int(np.prod(a.sparse_tensor.dims)) if len(a.sparse_tensor.dims) else 1
                return n * elem_bytes(v.data_type)
            if a.name in ("value_float", "value_int"):
                return 4 if a.name == "value_float" else 8
            if a.name in ("value_floats", "value_ints"):
                return (4 if a.name == "value_floats" else 8) * len(a.floats or a.ints)
        return 0

    def walk(g, inside):
        total = body = 0
        for t in g.initializer:
            total += tensor_bytes(t)
            body += tensor_bytes(t) if inside else 0
        for node in g.node:
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
                b = constant_bytes(node)
                total += b
                body += b if inside else 0
            for a in node.attribute:
                for sub in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                    t, b = walk(sub, True)
                    total += t
                    body += b
        return total, body
    return walk(model.graph, False)


def check_weights(model_path, plan_path):
    total, body = file_weights(onnx.load(model_path, load_external_data=False))
    with open(plan_path) as f:
        peak = json.load(f)["peak"]["theoretical"]
    ok = peak >= total
    print("%s weights %s: %d B of initializers and constants (%d B inside bodies), planned "
          "peak %d B" % ("PASS" if ok else "FAIL", os.path.basename(model_path), total, body, peak))
    return 0 if ok else 1


CASES = [if_net, nested_ifs, data_if, invalid_if, loop_grow, scan, function, vad_weights]


def record(name, inputs):
    # invalid_if: with x's shape bound in the file (as shape_oracle.py binds
    # it), ONNX Runtime's own inference refuses the then branch at load
    oracle = name != "invalid_if"
    shapes = ["%s=%s" % (s["name"], ",".join(map(str, s["shape"]))) for s in inputs]
    args = [a for s in shapes for a in ("--input-shape", s)]
    return {"name": name, "file": name + ".onnx", "tag": "control", "opset": 13, "inputs": inputs,
            "input_shapes": shapes, "dims": {}, "roamc_args": args, "oracle": oracle}


def main(argv):
    if len(argv) == 4 and argv[1] == "--weights":
        return check_weights(argv[2], argv[3])
    if len(argv) not in (2, 3):
        print(__doc__)
        return 2
    work = argv[1]
    os.makedirs(work, exist_ok=True)
    recs, wants = [], {}
    for case in CASES:
        m, inputs, want = case()
        onnx.save(m, os.path.join(work, case.__name__ + ".onnx"))
        recs.append(record(case.__name__, inputs))
        wants[case.__name__] = want
    with open(os.path.join(work, "corpus.json"), "w") as f:
        json.dump({"models": recs}, f, indent=1)
    if len(argv) == 2:
        return 0
    roamc, bad = argv[2], 0
    for rec in recs:
        p = subprocess.run([roamc, "shapes", os.path.join(work, rec["file"])] + rec["roamc_args"]
                           + ["--report", "json"], capture_output=True, text=True)
        if p.returncode:
            print("FAIL %s: roamc shapes exited %d: %s" % (rec["name"], p.returncode, p.stderr.strip()))
            bad += 1
            continue
        got = {b["name"]: b for b in json.loads(p.stdout).get("control_flow", [])}
        for node, (how, branch, nbytes) in wants[rec["name"]].items():
            b = got.get(node)
            why = None
            if not b:
                why = "no control_flow entry"
            elif b["counted"] != how or b.get("branch") != branch:
                why = "counted %s/%s, want %s/%s" % (b["counted"], b.get("branch"), how, branch)
            elif nbytes is not None and b["bytes"] != nbytes:
                why = "working memory %d B, want %d B" % (b["bytes"], nbytes)
            elif nbytes is None and b["bytes"] <= 0:
                why = "working memory 0 B"
            print("%s %s %s: %s, %d B%s" % ("FAIL" if why else "PASS", rec["name"], node,
                                            b["counted"] if b else "-", b["bytes"] if b else 0,
                                            ": " + why if why else ""))
            bad += bool(why)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
