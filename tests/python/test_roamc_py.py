"""Tests of the roamc Python package (planner/python) against the roamc command.

  test_roamc_py.py plans  ROAMC MODELS WORK   roamc.plan's plan files equal `roamc MODEL -o`'s
                                              byte for byte (a few committed models, options,
                                              a budget, bytes = file), and the Python objects
                                              agree with the plan file; errors are roamc.Error;
                                              roamc.compare's rows, report and plan are
                                              `roamc MODEL --compare`'s
  test_roamc_py.py layout ROAMC INSTANCES WORK  roamc.layout's offsets equal `roamc layout
                                              --work 10^7`'s on one instance; pins, conflicts
  test_roamc_py.py torch  ROAMC EXPORT_PY WORK  roamc.torch.plan on tests/python/tiny_module.py
                                              writes the step and plan `export.py --module` and
                                              roamc write; the module given is not changed

The package is imported from planner/python (PYTHONPATH) with ROAMC_LIBRARY naming the
build's libroamc.so.  Exit 77 (SKIP) when what a mode needs is absent (torch, onnx).
"""
import json
import os
import subprocess
import sys

FAILS = []


def check(ok, what):
    if not ok:
        FAILS.append(what)
        print("FAIL: %s" % what)


def run(cmd, cwd=None):
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if r.returncode not in (0, 3):
        print("command failed (%d): %s\n%s" % (r.returncode, " ".join(cmd), r.stderr))
        sys.exit(1)
    return r


def same_file(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


def mode_plans(roamc_bin, models, work):
    import roamc
    cases = [
        ("alexnet_b1.onnx", [], {}),
        ("mobilenet_v2_b1.onnx", [], {}),
        ("alexnet_b1.onnx", ["--order", "lescea", "--layout", "llfb", "--align", "4096"],
         dict(order="lescea", layout="llfb", align=4096)),
        ("mobilenet_v2_b1.onnx", ["--budget", "40MiB"], dict(budget="40MiB")),
        ("vgg16_b1.onnx", ["--method", "pytorch"], dict(method="pytorch")),
    ]
    for k, (model, args, kw) in enumerate(cases):
        path = os.path.join(models, model)
        cli = os.path.join(work, "cli_%d.json" % k)
        py = os.path.join(work, "py_%d.json" % k)
        run([roamc_bin, path, "-o", cli, "-q"] + args)
        p = roamc.plan(path, **kw)
        p.write(py)
        check(same_file(cli, py), "%s %s: the Python plan differs from roamc's" % (model, args))
        with open(cli) as f:
            text = f.read()
        check(p.json() == text, "%s %s: Plan.json() is not the plan file" % (model, args))
        doc = json.loads(text)
        check(p.schedule == doc["schedule"], "%s: schedule" % model)
        want = [(b["tensors"][0], b["offset"], b["size"], b["start"], b["end"]) for b in doc["buffers"]]
        got = [(b.name, b.offset, b.size, b.start, b.end) for b in p.buffers]
        check(got == want, "%s: Plan.buffers are not the plan file's buffers" % model)
        check(p.peak == p.actual_peak and p.lower_bound <= p.theoretical_peak <= p.actual_peak,
              "%s: bound <= theoretical <= actual" % model)
        check(p.report.get("model") == path and p.report.get("actual_peak") == p.actual_peak
              and p.report.get("lower_bound") == p.lower_bound, "%s: the report's figures" % model)
        check((doc["peak"]["theoretical"], doc["peak"]["actual"], doc["peak"]["lower_bound"],
               doc["peak"]["persistent"]) == (p.theoretical_peak, p.actual_peak, p.lower_bound,
                                              p.persistent_bytes), "%s: the peaks" % model)
        check(all(b.start <= b.end for b in p.buffers), "%s: lifetimes" % model)
        check(all(b.offset + b.size <= p.actual_peak for b in p.buffers), "%s: inside the arena" % model)
        if "budget" in kw:
            r = run([roamc_bin, path, "-q"] + args)
            check(p.fits == (r.returncode == 0), "%s: fits %s, roamc exit %d"
                  % (model, p.fits, r.returncode))
        else:
            check(p.fits is None, "%s: fits without a budget" % model)
    # --pipeline-stages through the API: the chosen stage's plan and step, every stage's peaks
    path = os.path.join(models, "alexnet_b1.onnx")
    args = ["--pipeline-stages", "3", "--schedule", "gpipe", "--microbatches", "4", "--budget", "1GiB"]
    cli_step, py_step = os.path.join(work, "cli_stage.onnx"), os.path.join(work, "py_stage.onnx")
    rep = json.loads(run([roamc_bin, path, "-o", os.path.join(work, "cli_pipe.json"), "--emit-train",
                          cli_step, "--report", "json"] + args).stdout)
    p = roamc.plan(path, pipeline_stages=3, schedule="gpipe", microbatches=4, budget="1GiB",
                   emit_train=py_step)
    p.write(os.path.join(work, "py_pipe.json"))
    with open(os.path.join(work, "py_pipe.json")) as f:
        doc = json.load(f)
    doc["model"] = cli_step  # the plan names the step written: the one path differs
    with open(os.path.join(work, "cli_pipe.json")) as f:
        check(doc == json.load(f), "--pipeline-stages: the Python plan differs from roamc's")
    check(same_file(cli_step, py_step), "--pipeline-stages: the stage's step differs from roamc's")
    per = rep["pipeline"]["per_stage"]
    check([(s.theoretical_peak, s.actual_peak) for s in p.stages] ==
          [(s["theoretical_peak"], s["actual_peak"]) for s in per] if per and "actual_peak" in per[0]
          else [s.theoretical_peak for s in p.stages] == [s["theoretical_peak"] for s in per],
          "--pipeline-stages: the stages' peaks are not the report's")
    check(len(p.stages) == 3 and p.peak == max(s.actual_peak for s in p.stages),
          "--pipeline-stages: 3 stages, the plan the largest's")
    check(p.fits is True, "--pipeline-stages --budget 1GiB: fits %s" % p.fits)
    print("  pipeline of 3: stage peaks %s" % [s.actual_peak for s in p.stages])
    # --compare through the API: the rows, the report (but the times) and the ROAM plan
    for model in ("vgg16_b1.onnx", "mnasnet1_0_b1.onnx"):
        path = os.path.join(models, model)
        cli_plan = os.path.join(work, "cli_compare.json")
        rep = json.loads(run([roamc_bin, path, "--compare", "--threads", "2", "--report", "json",
                              "-o", cli_plan]).stdout)
        rows = roamc.compare(path, threads=2)
        want = [dict(r) for r in rep["rows"]]
        got = [w._asdict() for w in rows]
        for r in want + got:
            r.pop("seconds")
        for r in got:
            r.pop("title")
        check(got == want, "%s --compare: roamc.compare's rows differ from roamc's: %s vs %s"
              % (model, got, want))
        check([w.title for w in rows] == ["PyTorch", "Heuristics", "ILP", "ROAM"],
              "%s --compare: titles %s" % (model, [w.title for w in rows]))
        for r in [rep] + [rows.report]:
            for w in r.get("rows", []):
                w.pop("seconds")
        check(rows.report == rep, "%s --compare: Comparison.report differs from roamc's" % model)
        check(rows.lower_bound == rep["lower_bound"] and
              rows.persistent_bytes == rep["persistent_bytes"], "%s --compare: bounds" % model)
        py_plan = os.path.join(work, "py_compare.json")
        rows.write(py_plan)
        check(same_file(cli_plan, py_plan), "%s --compare: the ROAM plan differs from -o's" % model)
        check(rows.row("roam") is rows[-1] and rows.json() == open(cli_plan).read(),
              "%s --compare: row('roam'), json()" % model)
        print("  compare %s: %s" % (model, ", ".join("%s %d" % (w.name, w.actual_peak) for w in rows)))
    for kw in (dict(budget="1GiB"), dict(method="roam")):
        try:
            roamc.compare(os.path.join(models, "vgg16_b1.onnx"), **kw)
            check(False, "compare %s: no roamc.Error" % kw)
        except roamc.Error as e:
            check(e.code == 2 and "compare" in e.message, "compare %s: %r" % (kw, e.message))
    none_is_the_default(roamc_bin, work)
    # bytes = file (the plan names what it is told)
    path = os.path.join(models, "alexnet_b1.onnx")
    with open(path, "rb") as f:
        pb = roamc.plan(f.read(), name=path)
    py = os.path.join(work, "py_bytes.json")
    pb.write(py)
    check(same_file(os.path.join(work, "cli_0.json"), py), "bytes: the plan differs from the file's")
    # bindings: a committed batch-symbolic model, if any, else an input shape that is refused
    for bad, kw in (("nonexistent.onnx", {}), (path, dict(order="bogus")),
                    (path, dict(input_shapes={"nosuch": [1, 2]})), (path, dict(nosuch_option=1))):
        try:
            roamc.plan(bad, **kw)
            check(False, "%s %s: no roamc.Error" % (bad, kw))
        except roamc.Error as e:
            check(e.code == 2 and e.message, "%s %s: code %d, message %r" % (bad, kw, e.code, e.message))
            print("  refused as it should: %s" % e)


def none_is_the_default(roamc_bin, work):
    """Issue 39: None for a keyword is its default as NULL is in roamc.h (train=None and
    fit=None turn them on, fit with "both"; max_batch's symbol=None the one unbound), and
    for a keyword that takes a value it is the same as not giving it; never dropped."""
    import roamc
    here = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run([sys.executable, os.path.join(here, "..", "gen_train_models.py"), work],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print("SKIP: None keywords: tests/gen_train_models.py needs onnx and numpy (%s)"
              % r.stderr.strip().splitlines()[-1:])
        return False
    mlp = os.path.join(work, "mlp_dyn.onnx")  # a forward-only graph, batch symbol N
    want = json.loads(run([roamc_bin, mlp, "--train", "--budget", "64KiB", "--max-batch",
                           "--report", "json"]).stdout)["max_batch"]["plan"]
    got = {t: roamc.max_batch(mlp, "64KiB", train=t).batch for t in (None, True, False)}
    check(got[None] == got[True] == want and got[False] != want,
          "max_batch(train=None): %s, train=True %s, --train %s, train=False %s"
          % (got[None], got[True], want, got[False]))
    print("  max_batch train=None %d = --train %d (inference: %d)" % (got[None], want, got[False]))
    kw = dict(train=True, dims={"N": 600}, budget=85000)  # 89,600 B unfitted: fits only fitted
    cli = json.loads(run([roamc_bin, mlp, "--train", "--dim", "N=600", "--budget", "85000", "--fit",
                          "--report", "json"]).stdout)["actual_peak"]
    fitted = {f: roamc.plan(mlp, fit=f, **kw) for f in (None, "both", False)}
    check(fitted[None].fits is True and fitted[None].json() == fitted["both"].json() and
          fitted[None].peak == cli,
          "plan(fit=None): fits %s, peak %d; fit='both' %d" % (fitted[None].fits, fitted[None].peak,
                                                              fitted["both"].peak))
    check(fitted[False].fits is False and fitted[False].peak > fitted[None].peak,
          "plan(fit=False): fits %s, peak %d" % (fitted[False].fits, fitted[False].peak))
    print("  plan fit=None peak %d = --fit (without: %d, over 85000)" % (fitted[None].peak,
                                                                         fitted[False].peak))
    # a keyword that takes a value: None is its default, the plan as without it
    base = roamc.plan(mlp, train=True, dims={"N": 8}).json()
    for k in ("budget", "order", "layout", "align", "time_limit", "threads", "emit_train",
              "optimizer", "loss", "frozen", "precision", "grad_accum", "reserve", "input_shapes",
              "method", "node_limit", "delay_radius", "name"):
        try:
            same = roamc.plan(mlp, train=True, dims={"N": 8}, **{k: None}).json() == base
            check(same, "plan(%s=None) is not the plan without %s" % (k, k))
        except roamc.Error as e:
            check(False, "plan(%s=None) raised: %s" % (k, e))
    check(roamc.plan(mlp, train=True, dims={"N": 8}, frozen=[None]).json() == base,
          "frozen=[None] is not the plan without frozen")
    for k, v in (("max_batch", None), ("compare", None), ("nosuch_option", None)):
        try:
            roamc.plan(mlp, train=True, dims={"N": 8}, **{k: v})
            check(False, "plan(%s=None): no roamc.Error" % k)
        except roamc.Error as e:
            check(e.code == 2, "plan(%s=None): code %d" % (k, e.code))
    m = roamc.max_batch(mlp, "64KiB", symbol=None, train=None, dims=None, input_shapes=None)
    check(m.batch == want, "max_batch(symbol=None, ...): %d, want %d" % (m.batch, want))
    return True


def mode_layout(roamc_bin, instances, work):
    import roamc
    inst = os.path.join(instances, "mobilenet_v2_b1.csv")
    out = os.path.join(work, "layout_cli.csv")
    run([roamc_bin, "layout", inst, "-o", out, "--work", "10000000"])
    with open(inst) as f:
        rows = [ln.strip().split(",") for ln in f if ln.strip()][1:]
    buffers = [(int(r[3]), int(r[1]), int(r[2]) - 1) for r in rows]  # [lower, upper) -> closed
    with open(out) as f:
        lines = [ln.strip().split(",") for ln in f if ln.strip()]
    col = lines[0].index("offset")
    want = [int(r[col]) for r in lines[1:]]
    r = roamc.layout(buffers, work=10000000)
    check(r.offsets == want, "mobilenet_v2_b1.csv: roamc.layout's offsets are not roamc layout's")
    height = max(o + b[0] for o, b in zip(want, buffers))
    check(r.height == height, "height %d, roamc layout's %d" % (r.height, height))
    check(r.lower_bound <= r.proven_bound <= r.height, "bounds")
    check(r.stop in ("optimal", "work", "time"), "stop %s" % r.stop)
    print("  mobilenet_v2_b1.csv: %d buffers, height %d, bound %d, gap %g, %s"
          % (len(buffers), r.height, r.proven_bound, r.gap, r.stop))
    # a compiler's problem: a pinned input, mixed alignment, a conflict graph edge
    bufs = [dict(size=1000, first=0, last=2, alignment=64), (3000, 1, 3), (500, 2, 4, 256), 700]
    r = roamc.layout(bufs, pinned={0: 4096}, conflicts=[(3, 1)], alignment=128, work=1000000)
    check(r.offsets[0] == 4096 and r.offsets[2] % 256 == 0 and r.offsets[1] % 128 == 0,
          "pins and alignment: %s" % r.offsets)
    lo3, hi3 = r.offsets[3], r.offsets[3] + 768
    lo1, hi1 = r.offsets[1], r.offsets[1] + 3072
    check(hi3 <= lo1 or hi1 <= lo3, "the conflict edge is kept: %s" % r.offsets)
    r = roamc.layout([(4096, 0, 1), (4096, 1, 2)], capacity=4096)
    check(r.fits is False and r.stop == "infeasible", "capacity: fits %s, %s" % (r.fits, r.stop))
    # None is the default (issue 39): alignment 1, a buffer's own alignment the default one
    plain = roamc.layout([(1000, 0, 2), (3000, 1, 3), 700], conflicts=[(2, 1)], work=1000000)
    nones = roamc.layout([dict(size=1000, first=0, last=2, alignment=None), (3000, 1, 3, None), 700],
                         conflicts=[(2, 1)], work=1000000, alignment=None, capacity=None,
                         time_limit=None, pinned=None, method=None)
    check(nones.offsets == plain.offsets and nones.height == plain.height,
          "layout with None keywords: %s, without %s" % (nones.offsets, plain.offsets))
    try:
        roamc.layout([(100, 0, None)])
        check(False, "a buffer with first and no last accepted")
    except roamc.Error as e:
        print("  refused as it should: %s" % e)
    try:
        roamc.layout([(100, 0, 1), (100, 1, 2)], pinned={0: 0, 1: 50})
        check(False, "overlapping pins accepted")
    except roamc.Error as e:
        print("  refused as it should: %s" % e)


def mode_torch(roamc_bin, export_py, work):
    try:
        import torch  # noqa: F401
        import onnx  # noqa: F401
    except ImportError as e:
        print("SKIP: roamc.torch needs torch and onnx (%s)" % e)
        sys.exit(77)
    import roamc
    import roamc.torch
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    import tiny_module
    a, b = os.path.join(work, "exporter"), os.path.join(work, "inprocess")
    for d in (a, b):
        os.makedirs(d, exist_ok=True)
    # the exporter's route, and the one of roamc.torch, each writing step.onnx in its folder
    subprocess.run([sys.executable, export_py, "--module",
                    os.path.join(here, "tiny_module.py") + ":make", "-o", "step.onnx", "-q"],
                   cwd=a, check=True)
    run([roamc_bin, "step.onnx", "-o", "plan.json", "-q"], cwd=a)
    step = tiny_module.make()
    before = {k: v.clone() for k, v in step["model"].state_dict().items()}
    cwd = os.getcwd()
    os.chdir(b)
    try:
        p = roamc.torch.plan(step["model"], step["inputs"], step["loss_fn"], targets=step["targets"],
                             name="tiny_module.py:make", onnx_path="step.onnx")
        p.write("plan.json")
    finally:
        os.chdir(cwd)
    check(same_file(os.path.join(a, "step.onnx"), os.path.join(b, "step.onnx")),
          "roamc.torch's step differs from export.py --module's")
    check(same_file(os.path.join(a, "plan.json"), os.path.join(b, "plan.json")),
          "roamc.torch.plan's plan differs from export.py + roamc's")
    after = step["model"].state_dict()
    check(all(after[k].device.type == "cpu" and torch.equal(before[k], after[k]) for k in before),
          "roamc.torch.plan changed the module given")
    q = roamc.torch.plan(step["model"], step["inputs"], step["loss_fn"], targets=step["targets"],
                         optimizer="sgd", budget="1MiB")
    check(q.fits is True and q.peak < p.peak, "sgd in memory: fits %s, peak %d (adam %d)"
          % (q.fits, q.peak, p.peak))
    n = roamc.torch.plan(step["model"], step["inputs"], step["loss_fn"], targets=step["targets"],
                         name="tiny_module.py:make", optimizer=None, grad_accum=None, amp=None)
    check(n.json() == roamc.torch.plan(step["model"], step["inputs"], step["loss_fn"],
                                       targets=step["targets"], name="tiny_module.py:make").json(),
          "roamc.torch.plan(optimizer=None, grad_accum=None): not the default step's plan")
    print("  tiny module: adam peak %d, sgd peak %d" % (p.peak, q.peak))
    # --max-batch through the API, on a batch-symbolic step the exporter writes
    subprocess.run([sys.executable, export_py, "--model", "mlp3", "--symbolic-batch", "-o",
                    "mlp3_bsym.onnx", "-q"], cwd=a, check=True)
    bsym = os.path.join(a, "mlp3_bsym.onnx")
    for args, kw in (([], {}), (["--pipeline-stages", "2"], dict(pipeline_stages=2))):
        rep = json.loads(run([roamc_bin, bsym, "--max-batch", "--budget", "64MiB", "--report", "json"]
                             + args).stdout)
        m = roamc.max_batch(bsym, "64MiB", **kw)
        check((m.batch, m.pytorch_batch) == (rep["max_batch"]["plan"], rep["max_batch"]["pytorch"]),
              "max_batch %s: %s, roamc's %s" % (args, m, rep["max_batch"]))
        check([r["batch"] for r in m.report["rows"]] == [r["batch"] for r in rep["rows"]],
              "max_batch %s: the batches tried differ" % args)
        print("  max_batch %s: %d (PyTorch %d)" % (args, m.batch, m.pytorch_batch))
    m = roamc.max_batch(bsym, "1KiB")
    check(m.batch == 0 and not m.fits, "max_batch under 1KiB: %s" % m)
    try:
        roamc.torch.plan(step["model"], {"x": torch.randn(3, 5)}, step["loss_fn"],
                         targets=step["targets"])
        check(False, "a shape mismatch gave no roamc.Error")
    except roamc.Error as e:
        check("training step failed" in e.message, "message %r" % e.message)
        print("  refused as it should: %s" % e)


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in ("plans", "layout", "torch"):
        print(__doc__)
        return 2
    mode, roamc_bin, where, work = \
        (sys.argv[1],) + tuple(os.path.abspath(a) for a in sys.argv[2:])
    os.makedirs(work, exist_ok=True)
    {"plans": mode_plans, "layout": mode_layout, "torch": mode_torch}[mode](roamc_bin, where, work)
    print("%s: %s" % (mode, "FAIL (%d)" % len(FAILS) if FAILS else "ok"))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
