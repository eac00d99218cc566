#!/usr/bin/python3
"""A second oracle for roamc's shape inference: ONNX's own backend node tests.

usage: /usr/bin/python3 tests/onnx_node_oracle.py ROAMC WORKDIR [--only SUBSTR] [-v]

python3-onnx ships the generators of its backend node tests: one model per
case plus input/output tensors computed by ONNX's numpy reference.  For each
model this script writes a copy that hides every answer from roamc (graph
output shapes and value_info cleared), runs `roamc shapes --report json` on
it, and compares each graph output's element type and shape (for a
sequence: its length and element shapes) with the reference output.
Inputs: small integer/bool ones and the float inputs that size an output
(SHAPE_SLOTS) become initializers, since shape-like inputs such as Reshape's
`shape`, TopK's K or Resize's scales must have known values; the other
tensors are bound with --input-shape from the test data; a sequence input
is rebuilt by a SequenceConstruct of its elements (no flag binds one).

Classes: PASS; MISMATCH (roamc gives another type or shape: a bug); REFUSED
(roamc exits 2, or leaves an output's shape unknown: a coverage gap);
SKIPPED (not meant for roamc: other domains, opset > 18, optional/map
values, STRING tensors); CRASH (any other exit status, a timeout, or a
sanitizer report).  Tests named test_*_expanded (function bodies inlined)
are summarized separately.
Exit: 0 without MISMATCH or CRASH, 1 otherwise, 77 without onnx/numpy.
"""
import argparse
import collections
import concurrent.futures
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap

MAX_OPSET = 18            # roamc covers opsets 7..18 of the standard domain
MAX_CONST_ELEMS = 65536   # roamc evaluates values of at most this many elements
STD_DOMAINS = ("", "ai.onnx")
# Float inputs that size an output (Resize's scales, OneHot's depth, ...):
# like integer shape inputs they become constants, else no size is knowable.
SHAPE_SLOTS = {"Resize": (1, 2, 3), "Upsample": (1,), "OneHot": (1,),
               "Range": (0, 1, 2), "MelWeightMatrix": (0, 1, 2, 3, 4)}

# The generators use numpy aliases that numpy 1.24 removed.
GENERATE = """
import sys, warnings, numpy as np
warnings.simplefilter("ignore")
for a, v in (("float", float), ("int", int), ("bool", bool), ("object", object),
             ("complex", complex), ("str", str)):
    if not hasattr(np, a): setattr(np, a, v)
from onnx.backend.test import cmd_tools
sys.argv = ["cmd_tools", "generate-data", "-o", sys.argv[1]]
cmd_tools.main()
"""


def generate(workdir):
    """Writes the node tests into WORKDIR/node once; later runs reuse them."""
    node = os.path.join(workdir, "node")
    if not glob.glob(os.path.join(node, "test_*", "model.onnx")):
        subprocess.run([sys.executable, "-c", GENERATE, workdir], check=True,
                       stdout=subprocess.DEVNULL)
    return sorted(glob.glob(os.path.join(node, "test_*")))


def skip_reason(model, onnx):
    """Why roamc is not meant to read this model, or None."""
    domains = {o.domain for o in model.opset_import} | \
              {n.domain for n in model.graph.node}
    odd = sorted(d for d in domains if d not in STD_DOMAINS)
    if odd:
        return "domain " + ",".join(odd)
    opset = max((o.version for o in model.opset_import if o.domain in STD_DOMAINS),
                default=1)
    if opset > MAX_OPSET:
        return "opset > %d" % MAX_OPSET
    for v in list(model.graph.input) + list(model.graph.output):
        kind = v.type.WhichOneof("value")
        if kind in ("optional_type", "map_type", "sparse_tensor_type"):
            return kind.replace("_type", "") + " graph input/output"
        t = v.type.sequence_type.elem_type if kind == "sequence_type" else v.type
        if t.WhichOneof("value") != "tensor_type":
            return "nested sequence graph input/output"
        if t.tensor_type.elem_type == onnx.TensorProto.STRING:
            return "STRING tensor"
    return None


def reference(path, vtype, onnx, numpy_helper):
    """(elem_type, [shapes of the elements], is_sequence) of one .pb file."""
    with open(path, "rb") as f:
        data = f.read()
    if vtype.WhichOneof("value") == "sequence_type":
        seq = onnx.SequenceProto()
        seq.ParseFromString(data)
        return (vtype.sequence_type.elem_type.tensor_type.elem_type,
                [list(numpy_helper.to_array(t).shape) for t in seq.tensor_values], True)
    t = onnx.TensorProto()
    t.ParseFromString(data)
    etype = t.data_type
    if etype == onnx.TensorProto.UINT16 and \
            vtype.tensor_type.elem_type == onnx.TensorProto.BFLOAT16:
        etype = onnx.TensorProto.BFLOAT16  # onnx 1.12 stores bfloat16 data as uint16
    return etype, [list(numpy_helper.to_array(t).shape)], False


def prepare(test, tmpdir, onnx, numpy_helper):
    """Writes the hidden-answer copy; returns (path, roamc bindings, outputs)."""
    helper = onnx.helper
    model = onnx.load(os.path.join(test, "model.onnx"))
    g = model.graph
    data = os.path.join(test, "test_data_set_0")
    ints = {onnx.TensorProto.BOOL, onnx.TensorProto.INT8, onnx.TensorProto.INT16,
            onnx.TensorProto.INT32, onnx.TensorProto.INT64, onnx.TensorProto.UINT8,
            onnx.TensorProto.UINT16, onnx.TensorProto.UINT32, onnx.TensorProto.UINT64}
    # A test_*_expanded model has its twin's inputs: read the slots there
    # (Range expanded into a Loop still needs start, limit and delta).
    twin = os.path.join(re.sub(r"_expanded$", "", test), "model.onnx")
    nodes = onnx.load(twin).graph.node if os.path.exists(twin) else g.node
    shape_slots = {i for n in nodes for k, i in enumerate(n.input)
                   if k in SHAPE_SLOTS.get(n.op_type, ())}
    init_names = {i.name for i in g.initializer}
    bindings, keep, seq_nodes = [], [], []

    def add_tensor(name, etype, arr):
        """One tensor input: a constant when shape-like, else a binding."""
        if arr.size <= MAX_CONST_ELEMS and (etype in ints or name in shape_slots):
            g.initializer.append(numpy_helper.from_array(arr, name))
            if model.ir_version >= 4:
                return        # IR < 4 wants every initializer listed as an input
        else:
            bindings.extend(["--input-shape", "%s=%s" % (
                name, ",".join(str(d) for d in arr.shape))])
        keep.append(helper.make_tensor_value_info(name, etype, None))

    real_inputs = [v for v in g.input if v.name not in init_names]
    for k, v in enumerate(real_inputs):
        pb = os.path.join(data, "input_%d.pb" % k)
        with open(pb, "rb") as f:
            raw = f.read()
        if v.type.HasField("sequence_type"):
            # No flag binds a sequence: build it from tensors with SequenceConstruct.
            seq = onnx.SequenceProto()
            seq.ParseFromString(raw)
            etype = v.type.sequence_type.elem_type.tensor_type.elem_type
            parts = ["%s.%d" % (v.name, j) for j in range(len(seq.tensor_values))]
            for part, t in zip(parts, seq.tensor_values):
                add_tensor(part, etype, numpy_helper.to_array(t))
            seq_nodes.append(helper.make_node("SequenceConstruct", parts, [v.name]) if parts
                             else helper.make_node("SequenceEmpty", [], [v.name], dtype=etype))
            continue
        t = onnx.TensorProto()
        t.ParseFromString(raw)
        # The declared shape is dropped: the data's dims are the binding (ONNX
        # 1.12's castlike tests declare [3,4] for a [1] input).
        add_tensor(v.name, v.type.tensor_type.elem_type, numpy_helper.to_array(t))
    del g.input[:]
    g.input.extend(keep)
    for n in reversed(seq_nodes):
        g.node.insert(0, n)
    outputs = []
    for k, v in enumerate(g.output):
        outputs.append((v.name, reference(os.path.join(data, "output_%d.pb" % k),
                                          v.type, onnx, numpy_helper)))
        t = v.type.sequence_type.elem_type if v.type.HasField("sequence_type") else v.type
        t.tensor_type.ClearField("shape")     # roamc must infer it, not read it
    del g.value_info[:]
    path = os.path.join(tmpdir, os.path.basename(test) + ".onnx")
    onnx.save(model, path)
    return path, bindings, outputs


def compare(name, ref, values, ops):
    """None when roamc's value agrees with the reference, else (class, why):
    MISMATCH for a wrong answer, REFUSED for no answer (an unknown dim)."""
    etype, shapes, is_seq = ref
    v = values.get(name)
    if v is None:
        return "MISMATCH", "%s: not in roamc's report" % name
    got_shape, bound = v.get("shape"), v.get("bound", False)
    if v.get("elem_type") != etype:
        return "MISMATCH", "%s: elem_type %s, expected %s" % (name, v.get("elem_type"), etype)
    producer = ops[v["producer"]] if 0 <= v.get("producer", -1) < len(ops) else "?"
    known = isinstance(got_shape, list) and all(isinstance(d, int) for d in got_shape)
    if is_seq and "sequence_length" not in v and known:
        # A sequence planned as one element: its storage would be too small.
        return "MISMATCH", "%s: roamc made a tensor %s, expected a sequence of %d" % (
            name, got_shape, len(shapes))
    if is_seq and v.get("sequence_length") is None or not is_seq and not known:
        return "REFUSED", "output left unknown by %s" % producer
    if is_seq:
        if v.get("sequence_length") != len(shapes):
            return "MISMATCH", "%s: sequence length %s, expected %d" % (
                name, v.get("sequence_length"), len(shapes))
        if not shapes:
            return None   # an empty sequence has no element shape to check
        if not known:
            return "REFUSED", "sequence element shape left unknown by %s" % producer
    elif "sequence_length" in v:
        return "MISMATCH", "%s: roamc made a sequence, expected a tensor" % name
    for s in shapes:
        if len(got_shape) != len(s) or not all(
                r <= g if bound else r == g for g, r in zip(got_shape, s)):
            return "MISMATCH", "%s: shape %s%s, expected %s" % (
                name, got_shape, " (bound)" if bound else "",
                shapes if is_seq else s)
    return None


def refusal(stderr):
    """A short, groupable reason for an exit-2 refusal."""
    m = re.search(r"no shape inference for (?:operator )?'?([\w.:-]+)'?", stderr)
    if m:
        return "no shape inference for " + m.group(1)
    lines = [l for l in stderr.strip().splitlines() if not l.startswith("Try ")]
    line = lines[-1] if lines else "(no message)"
    # Drop the path and value names so similar failures group together.
    return re.sub(r"'[^']*'", "'_'", re.sub(r"^roamc: [^:]*: ", "", line))[:160]


def run_test(test, roamc, tmpdir, onnx, numpy_helper):
    """Returns (class, detail)."""
    model = onnx.load(os.path.join(test, "model.onnx"))
    why = skip_reason(model, onnx)
    if why:
        return "SKIPPED", why
    path, bindings, outputs = prepare(test, tmpdir, onnx, numpy_helper)
    cmd = [roamc, "shapes", path] + bindings + ["--report", "json"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return "CRASH", "timeout after 20 s: " + " ".join(cmd)
    if re.search(r"Sanitizer|runtime error:", p.stderr) or p.returncode not in (0, 2):
        return "CRASH", "exit %d: %s\n%s" % (p.returncode, " ".join(cmd), p.stderr[-3000:])
    if p.returncode == 2:
        return "REFUSED", refusal(p.stderr)
    values = {v["name"]: v for v in json.loads(p.stdout)["values"]}
    ops = [n.op_type for n in onnx.load(path).graph.node]
    bad = [r for r in (compare(n, ref, values, ops) for n, ref in outputs) if r]
    if any(c == "MISMATCH" for c, _ in bad):
        return "MISMATCH", "; ".join(d for _, d in bad) + "\n    " + " ".join(cmd[1:])
    if bad:
        return "REFUSED", bad[0][1]
    return "PASS", ""


def ops_of(test, onnx):
    m = onnx.load(os.path.join(test, "model.onnx"))
    return sorted({n.op_type for n in m.graph.node}) or ["(none)"]


def summarize(title, results, onnx):
    print("\n== %s: %d tests" % (title, len(results)))
    by_class = collections.Counter(c for _, c, _ in results)
    print("   " + ", ".join("%s %d" % (c, by_class[c]) for c in
                            ("PASS", "MISMATCH", "REFUSED", "SKIPPED", "CRASH")))
    for cls in ("REFUSED", "SKIPPED"):
        groups = collections.defaultdict(list)
        for t, c, d in results:
            if c == cls:
                groups[d].append(os.path.basename(t))
        for why, tests in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            print("   %s %3d  %s  [%s]" % (cls, len(tests), why,
                                         " ".join(tests[:4]) + (" ..." if len(tests) > 4 else "")))
    # Per operator (the node types of each model): passes / tests run.
    per_op = collections.defaultdict(lambda: [0, 0])
    for t, c, _ in results:
        if c != "SKIPPED":
            for op in ops_of(t, onnx):
                per_op[op][1] += 1
                per_op[op][0] += c == "PASS"
    cells = ["%s %d/%d" % (op, p, n) for op, (p, n) in sorted(per_op.items())]
    print(textwrap.fill("per operator (PASS/run): " + ", ".join(cells), 100,
                        initial_indent="   ", subsequent_indent="     "))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("roamc")
    ap.add_argument("workdir")
    ap.add_argument("--only", help="run only tests whose name contains this")
    ap.add_argument("-v", "--verbose", action="store_true", help="print PASS lines too")
    a = ap.parse_args()
    try:
        import numpy  # noqa: F401
        import onnx
        from onnx import numpy_helper
    except ImportError as e:
        print("SKIP: %s needs onnx and numpy (%s)" % (sys.executable, e))
        return 77
    tests = generate(a.workdir)
    if a.only:
        tests = [t for t in tests if a.only in os.path.basename(t)]
    roamc = os.path.abspath(a.roamc)
    with tempfile.TemporaryDirectory() as tmp, \
            concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        classes = list(pool.map(lambda t: run_test(t, roamc, tmp, onnx, numpy_helper), tests))
    results = [(t, c, d) for t, (c, d) in zip(tests, classes)]
    for t, c, d in results:
        if c != "PASS" or a.verbose:
            print("%-8s %s  %s" % (c, os.path.basename(t), d))
    expanded = [r for r in results if r[0].endswith("_expanded")]
    summarize("node tests", [r for r in results if not r[0].endswith("_expanded")], onnx)
    summarize("function-expanded tests (test_*_expanded)", expanded, onnx)
    failed = [r for r in results if r[1] in ("MISMATCH", "CRASH")]
    print("\n%s: %d tests, %d MISMATCH/CRASH" % ("FAIL" if failed else "OK",
                                                 len(results), len(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
