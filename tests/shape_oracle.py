#!/usr/bin/python3
"""Checks `roamc shapes` against ONNX Runtime on every model of a corpus
written by models/corpus.py.

usage: /usr/bin/python3 tests/shape_oracle.py ROAMC CORPUS_DIR [--only SUBSTR] [--ort-only] [-v]

Per model:
 (a) a copy of the model where every value a node of the main graph makes
     is also a graph output (typed with onnx.shape_inference's elem_type,
     else roamc's; no shape, so ORT checks none);
 (b) ONNX Runtime runs the copy (tests/ort_shapes.js) on the inputs that
     corpus.json gives, and reports every output's type and shape;
 (c) `ROAMC shapes MODEL <bindings> --report json` must give the same
     element type and shape for each of those values, and for the graph
     inputs and initializers; a value roamc marks "bound" (a data-dependent
     size planned at an upper bound) passes when ORT's dims are <= roamc's;
 (e) control flow: every If of the main graph whose cond ORT computed is
     replaced by the branch ORT took (its nodes spliced in, an Identity per
     output), again until no If is left that ORT decides; the spliced model
     runs as in (a)-(b), and the values made inside the taken branches must
     agree with roamc's "inner_values" (what roamc inferred inside bodies).
     Loop and Scan bodies are not unrolled: their values are compared only
     through the node's outputs.
 (d) onnx.shape_inference.infer_shapes(data_prop=True), with the same input
     shapes, is run too: how many values it leaves without a static shape,
     and whether roamc resolves all of them.

--ort-only runs (a), (b), (d) without roamc (ROAMC is ignored) and compares
onnx.shape_inference's static shapes with ORT instead: a check of the corpus
and of the harness itself.

Exit 0 when every model passes, 1 on any mismatch or failure, 77 when node,
onnxruntime-node or python3-onnx is missing (the reason is printed).
"""
import json, os, shutil, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RUNNER = os.path.join(HERE, "ort_shapes.js")


def skip(reason):
    print("SKIP: " + reason)
    sys.exit(77)


try:
    import onnx
    from onnx import shape_inference
except ImportError:
    skip("/usr/bin/python3 cannot import onnx (python3-onnx)")


def prerequisites():
    if not shutil.which("node"):
        skip("node is not installed")
    if not os.path.isdir(os.path.join(REPO, "node_modules", "onnxruntime-node")):
        skip("onnxruntime-node is not installed (npm install --ignore-scripts in %s)" % REPO)


# ---------------------------------------------------------------------------

def bind_inputs(model, rec):
    """Sets the graph inputs' dims to the shapes the corpus feeds."""
    shapes = {s["name"]: s["shape"] for s in rec["inputs"]}
    for vi in model.graph.input:
        if vi.name in shapes and vi.type.HasField("tensor_type"):
            shp = vi.type.tensor_type.shape
            shp.ClearField("dim")
            for d in shapes[vi.name]:
                shp.dim.add().dim_value = d


def onnx_inference(model):
    """{value: (elem_type or None, [dims] or None, is_tensor)} from
    onnx.shape_inference; dims hold None for a dim it leaves symbolic.
    Returns (table, error message or None)."""
    try:
        inferred = shape_inference.infer_shapes(model, data_prop=True)
    except Exception as e:
        return {}, str(e).strip().splitlines()[0][:200]
    table = {}
    g = inferred.graph
    for vi in list(g.value_info) + list(g.output) + list(g.input):
        t = vi.type
        if t.HasField("tensor_type"):
            tt = t.tensor_type
            dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim] \
                if tt.HasField("shape") else None
            table[vi.name] = (tt.elem_type or None, dims, True)
        elif t.WhichOneof("value") is not None:
            table[vi.name] = (None, None, False)      # sequence, map, optional
    return table, None


def static(dims):
    return dims is not None and all(isinstance(d, int) for d in dims)


def run_roamc(roamc, path, rec):
    """roamc's report as {value name: entry}, or raises RuntimeError."""
    cmd = [roamc, "shapes", path] + rec["roamc_args"] + ["--report", "json"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError("roamc shapes exited %d: %s" % (p.returncode, (p.stderr or p.stdout).strip()[:300]))
    try:
        report = json.loads(p.stdout)
    except ValueError as e:
        raise RuntimeError("roamc shapes printed no JSON (%s): %r" % (e, p.stdout[:200]))
    values = {}
    for v in report.get("values", []):
        values[v["name"]] = v
    return report, values


def inner_values(report):
    """roamc's values made inside bodies ("inner_values"), by name."""
    return {v["name"]: v for v in report.get("inner_values", [])}


def run_ort(path, rec, tmp):
    inputs = os.path.join(tmp, "inputs.json")
    with open(inputs, "w") as f:
        json.dump(rec["inputs"], f)
    p = subprocess.run(["node", RUNNER, path, inputs], capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        raise RuntimeError((p.stderr or p.stdout).strip().splitlines()[-1][:400] if (p.stderr or p.stdout).strip()
                           else "ort_shapes.js exited %d" % p.returncode)
    return json.loads(p.stdout)


def all_outputs_copy(model, onnx_types, roamc_values):
    """(a): every main-graph node output becomes a graph output.  Returns
    (copy, {name: why it was left out}) for values with no tensor type."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    left_out = {}
    for node in m.graph.node:
        for name in node.output:
            if not name or name in have:
                continue
            have.add(name)
            elem, _, is_tensor = onnx_types.get(name, (None, None, True))
            if not is_tensor:
                left_out[name] = "not a tensor (onnx infers a sequence/map/optional type)"
                continue
            if not elem and name in roamc_values:
                elem = roamc_values[name].get("elem_type")
            if not elem:
                left_out[name] = "no element type from onnx.shape_inference or roamc"
                continue
            m.graph.output.append(onnx.helper.make_tensor_value_info(name, elem, None))
    return m, left_out


def splice_taken_ifs(model, ort):
    """(e): model with each If whose cond ORT computed replaced by the taken
    branch.  Returns (copy, number of Ifs spliced)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    nodes, spliced = [], 0
    for node in g.node:
        c = ort.get(node.input[0]) if node.op_type == "If" and node.domain in ("", "ai.onnx") else None
        if c is None or "value" not in c:
            nodes.append(node)
            continue
        attrs = {a.name: a.g for a in node.attribute}
        br = attrs["then_branch" if c["value"] else "else_branch"]
        nodes.extend(br.node)
        g.initializer.extend(br.initializer)
        for o_if, o_br in zip(node.output, br.output):
            if o_if:
                nodes.append(onnx.helper.make_node("Identity", [o_br.name], [o_if]))
        spliced += 1
    del g.node[:]
    g.node.extend(nodes)
    return m, spliced


def compare(name, ort, rv):
    """None when roamc's entry for NAME agrees with ORT's, else why not."""
    if rv is None:
        return "missing from roamc's report"
    if ort["type"] != rv.get("elem_type"):
        return "type %s, ORT %s" % (rv.get("elem_type"), ort["type"])
    want, got = ort["shape"], rv.get("shape")
    if not isinstance(got, list) or len(got) != len(want):
        return "shape %s, ORT %s" % (got, want)
    if rv.get("bound"):
        if all(isinstance(g, int) and w <= g for w, g in zip(want, got)):
            return None
        return "bound %s does not cover ORT's %s" % (got, want)
    return None if got == want else "shape %s, ORT %s" % (got, want)


def check_taken_branches(model, rec, corpus, ort, roamc_values, res):
    """(e): the values inside the If branches ORT takes, against roamc's
    inner values.  Ifs nested in a taken branch are spliced in the next
    round, with the conds ORT computes on the spliced model."""
    inner = res.setdefault("inner", {})
    cur, total = model, 0
    for _ in range(16):
        cur, n = splice_taken_ifs(cur, ort)
        if not n:
            break
        total += n
        copy, _ = all_outputs_copy(cur, {}, dict(roamc_values, **inner))
        tmp = tempfile.mkdtemp(prefix="oracle_")
        copy_path = os.path.join(corpus, ".oracle_if_" + rec["file"])
        try:
            onnx.save(copy, copy_path)
            ort = run_ort(copy_path, rec, tmp)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            res["mismatches"].append(("(taken branches)", "ORT cannot run the spliced model: %s" % e))
            return
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            if os.path.exists(copy_path):
                os.remove(copy_path)
    res["notes"].append("%d If nodes spliced for ORT" % total)
    main_values = {o for n in model.graph.node for o in n.output if o}
    for name, o in ort.items():
        if name in main_values or o["shape"] is None or name not in res["inner"]:
            continue
        res["compared"] += 1
        res["inner_compared"] = res.get("inner_compared", 0) + 1
        why = compare(name, o, res["inner"][name])
        if why:
            res["mismatches"].append((name + " (in a branch)", why))


def check_model(roamc, corpus, rec, ort_only, verbose):
    """Returns a dict of counts and the mismatch list for one model."""
    path = os.path.join(corpus, rec["file"])
    res = {"name": rec["name"], "compared": 0, "mismatches": [], "error": None,
           "onnx_unresolved": 0, "roamc_resolves": 0, "notes": []}
    model = onnx.load(path, load_external_data=False)   # weights stay on disk
    bind_inputs(model, rec)
    onnx_types, onnx_err = onnx_inference(model)
    if onnx_err:
        res["notes"].append("onnx.shape_inference failed: " + onnx_err)

    roamc_values = {}
    if not ort_only:
        try:
            report, roamc_values = run_roamc(roamc, path, rec)
            res["inner"] = inner_values(report)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            res["error"] = str(e)
            return res

    copy, left_out = all_outputs_copy(model, onnx_types, roamc_values)
    for n, why in left_out.items():
        if "no element type" in why and not ort_only:   # without roamc, a gap of the harness
            res["mismatches"].append((n, why))
        else:
            res["notes"].append("%s: %s, not compared" % (n, why))
    # beside the model, so that relative external-data locations resolve
    tmp = tempfile.mkdtemp(prefix="oracle_")
    copy_path = os.path.join(corpus, ".oracle_" + rec["file"])
    try:
        onnx.save(copy, copy_path)
        try:
            ort = run_ort(copy_path, rec, tmp)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            # (a)'s declared types, or the model itself?
            try:
                run_ort(path, rec, tmp)
                res["error"] = "ORT rejects the copy with every value an output " \
                               "(a declared output type?): %s" % e
            except (RuntimeError, subprocess.TimeoutExpired) as e2:
                res["error"] = "ORT cannot run the model: %s" % e2
            return res
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if os.path.exists(copy_path):
            os.remove(copy_path)

    if not ort_only and any(n.op_type == "If" for n in model.graph.node):
        check_taken_branches(model, rec, corpus, ort, roamc_values, res)

    produced = {o for n in model.graph.node for o in n.output if o}
    for name, o in ort.items():
        if o["shape"] is None:
            res["notes"].append("%s: ORT returned a %s, not compared" % (name, o["type"]))
            continue
        elem, dims, _ = onnx_types.get(name, (None, None, True))
        unresolved = name in produced and not static(dims)
        res["onnx_unresolved"] += unresolved
        if ort_only:
            # the harness's own check: onnx's static shapes must agree with ORT
            res["compared"] += 1
            if static(dims) and (dims != o["shape"] or (elem and elem != o["type"])):
                res["mismatches"].append((name, "onnx.shape_inference %s/%s, ORT %s/%s"
                                          % (elem, dims, o["type"], o["shape"])))
            continue
        res["compared"] += 1
        rv = roamc_values.get(name)
        why = compare(name, o, rv)
        if why:
            res["mismatches"].append((name, why))
        elif unresolved and static(rv.get("shape")):
            res["roamc_resolves"] += 1

    if not ort_only:
        # graph inputs as fed, initializers as stored
        fed = {s["name"]: s for s in rec["inputs"]}
        for init in model.graph.initializer:
            res["compared"] += 1
            why = compare(init.name, {"type": init.data_type, "shape": list(init.dims)},
                          roamc_values.get(init.name))
            if why:
                res["mismatches"].append((init.name, why))
        for vi in model.graph.input:
            if vi.name in fed:
                res["compared"] += 1
                elem = vi.type.tensor_type.elem_type
                why = compare(vi.name, {"type": elem, "shape": fed[vi.name]["shape"]},
                              roamc_values.get(vi.name))
                if why:
                    res["mismatches"].append((vi.name, why))
    return res


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("-")]
    only = None
    if "--only" in argv:
        only = argv[argv.index("--only") + 1]
        args.remove(only)
    ort_only, verbose = "--ort-only" in argv, "-v" in argv
    if len(args) != 2:
        print(__doc__)
        return 2
    roamc, corpus = args
    prerequisites()
    if not ort_only and not os.access(roamc, os.X_OK):
        print("FAIL: roamc binary %s not found or not executable" % roamc)
        return 1
    with open(os.path.join(corpus, "corpus.json")) as f:
        recs = json.load(f)["models"]
    recs = [r for r in recs if r.get("oracle", True) and (not only or only in r["name"])]

    total = {"models": 0, "failed": 0, "compared": 0, "mismatches": 0, "unresolved_models": 0,
             "roamc_resolves_all": 0}
    for rec in recs:
        r = check_model(roamc, corpus, rec, ort_only, verbose)
        total["models"] += 1
        total["compared"] += r["compared"]
        total["mismatches"] += len(r["mismatches"])
        if r["onnx_unresolved"]:
            total["unresolved_models"] += 1
            total["roamc_resolves_all"] += r["roamc_resolves"] == r["onnx_unresolved"] and not r["error"]
        bad = r["error"] or r["mismatches"]
        total["failed"] += bool(bad)
        line = "%s %-42s %5d values" % ("FAIL" if bad else "PASS", r["name"], r["compared"])
        if r["onnx_unresolved"]:
            line += ", onnx leaves %d unresolved" % r["onnx_unresolved"]
            if not ort_only:
                line += " (roamc resolves %d)" % r["roamc_resolves"]
        if r["error"]:
            line += ": " + r["error"]
        elif r["mismatches"]:
            line += ", %d mismatches: " % len(r["mismatches"]) + \
                "; ".join("%s: %s" % m for m in r["mismatches"][:4])
        print(line, flush=True)
        for n in r["notes"] if verbose else []:
            print("    note: " + n)
    print("shape_oracle: %d models (%d failed), %d values compared, %d mismatches; "
          "onnx.shape_inference leaves values unresolved in %d models%s"
          % (total["models"], total["failed"], total["compared"], total["mismatches"],
             total["unresolved_models"],
             "" if ort_only else ", roamc resolves all of them in %d" % total["roamc_resolves_all"]))
    return 1 if total["failed"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
