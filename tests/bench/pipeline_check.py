#!/usr/bin/python3
"""Predicted pipeline-stage peaks against models/dist_harness.py's pipeline (issue 28 item 4).

usage: pipeline_check.py ROAMC CHECK_PLAN_PY WORK_DIR MODEL [MODEL...]
           [--microbatches M] [--tolerance PERMILLE] [--harness FILE.jsonl]

MODEL is one of the harness's models (mlp3, gpt2-tiny, resnet50, gpt2-4l).  For each:
  - models/export.py exports the step at the harness's per-stage batch;
  - roamc --pipeline-stages 2 --microbatches M --schedule 1f1b --stage-cuts CUT plans each
    stage twice: --method pytorch (the stage's step in program order, gradients held as eager
    .grad holds them: what the harness runs) and roam (the default); check_plan.py accepts
    every plan of every stage's step;
  - CUT is where the harness cuts (dist_harness.split_stages): mlp3 before fc3, a GPT-2 of L
    layers before h.(L/2), resnet50 before net.layer3;
  - models/dist_harness.py --setup pipeline runs the 2 stages for real (gloo, one process a
    stage) and reports each stage's peak of live tensor bytes; --harness FILE reads those
    lines from FILE instead (committed numbers);
  - the harness's caller holds every microbatch's data for the whole step, the graph frees
    each after its last use: the pytorch plan's peak with the data inputs held (its live curve
    without them, plus their bytes) is what the harness measures.  It must be within
    PERMILLE (default 30 = the issue's 3%) of the harness's peak.
Prints one table row per stage; exit 1 when a check fails.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "..", "models")
PY = "/usr/bin/python3"
# model -> (export.py arguments, the harness's cut as --stage-cuts)
SPECS = {
    "mlp3": (["--model", "mlp3", "--batch", "32"], "fc3"),
    "gpt2-tiny": (["--model", "gpt2-tiny", "--batch", "4"], "h.1"),
    "resnet50": (["--model", "resnet50", "--batch", "2", "--image-size", "224"], "net.layer3"),
    "gpt2-4l": (["--model", "gpt2", "--layers", "4", "--batch", "1", "--seq-len", "128"], "h.2"),
}


def run(cmd, out=None):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if out:
        open(out, "w").write(r.stdout)
    return r


def held_peak(plan, data):
    """The plan's peak with the buffers holding data live for the whole step."""
    n = len(plan["schedule"])
    live = [0] * n
    held = 0
    for b in plan["buffers"]:
        if data & set(b["tensors"]):
            held += b["size"]
            continue
        for t in range(b["start"], b["end"] + 1):
            live[t] += b["size"]
    return max(live) + held


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("roamc")
    ap.add_argument("checker")
    ap.add_argument("work")
    ap.add_argument("models", nargs="+")
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--tolerance", type=int, default=30)
    ap.add_argument("--harness", default=None)
    a = ap.parse_args()
    a.roamc, a.checker = os.path.abspath(a.roamc), os.path.abspath(a.checker)
    if a.harness:
        a.harness = os.path.abspath(a.harness)
    os.makedirs(a.work, exist_ok=True)
    os.chdir(a.work)
    fails = 0
    rows = []
    for model in a.models:
        args, cut = SPECS[model]
        f = model + ".onnx"
        r = run([PY, os.path.join(MODELS, "export.py")] + args + ["-o", f, "-q"])
        if r.returncode:
            print("FAIL: %s: export: %s" % (model, r.stderr.strip()[-300:]))
            fails += 1
            continue
        if a.harness:
            lines = [json.loads(x) for x in open(a.harness)]
        else:
            r = run([PY, os.path.join(MODELS, "dist_harness.py"), "--model", model, "--setup",
                     "pipeline", "--microbatches", str(a.microbatches)], model + ".harness")
            lines = [json.loads(x) for x in r.stdout.splitlines() if x.strip()]
        got = {h["rank"]: h for h in lines if h["model"] == model and h["setup"] == "pipeline"}
        for s in (0, 1):
            h = got.get(s)
            if not h or "error" in h:
                print("FAIL: %s stage %d: no harness result (%s)" % (model, s, h))
                fails += 1
                continue
            res = {}
            for method in ("pytorch", "roam"):
                l = "%s_s%d_%s" % (model, s, method)
                cmd = [a.roamc, f, "--method", method, "--pipeline-stages", "2", "--microbatches",
                       str(a.microbatches), "--schedule", "1f1b", "--stage-cuts", cut,
                       "--stage", str(s), "--emit-train", l + ".onnx", "-o", l + ".json",
                       "--report", "json"]
                r = run(cmd, l + ".rep")
                if r.returncode:
                    print("FAIL: %s: %s" % (" ".join(cmd), r.stderr.strip()[-400:]))
                    fails += 1
                    break
                c = run([PY, a.checker, l + ".onnx", l + ".json"])
                if c.returncode:
                    print("FAIL: check_plan.py rejects %s.json: %s" % (l, c.stdout.strip()[-300:]))
                    fails += 1
                rep = json.load(open(l + ".rep"))
                pipe = rep["pipeline"]
                st = pipe["per_stage"][s]
                assert pipe["written"] == s and st["theoretical_peak"] == rep["theoretical_peak"]
                assert sum(st["split"].values()) == st["theoretical_peak"], st
                meta = {}
                import onnx
                m = onnx.load(l + ".onnx")
                meta = {p.key: p.value for p in m.metadata_props}
                assert meta["roamc.pipeline"].startswith("stage=%d stages=2 microbatches=%d "
                                                         "schedule=1f1b" % (s, a.microbatches))
                data = set(x for x in meta["roamc.data_inputs"].split(",") if x)
                plan = json.load(open(l + ".json"))
                res[method] = (rep["theoretical_peak"], held_peak(plan, data), st["in_flight"])
            if len(res) < 2:
                continue
            peak = h["peak_bytes"]
            pt, pt_held, inflight = res["pytorch"]
            d = pt_held - peak
            ok = abs(d) * 1000 <= a.tolerance * peak
            rows.append((model, s, inflight, peak, pt, pt_held, d, 100.0 * d / peak, res["roam"][0]))
            if not ok:
                print("FAIL: %s stage %d: predicted %d B, harness %d B (%+.3f%%)"
                      % (model, s, pt_held, peak, 100.0 * d / peak))
                fails += 1
    print("| model | stage | in flight | harness peak | roamc pytorch | + data held | difference | "
          "roamc roam |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for m, s, k, peak, pt, held, d, pct, roam in rows:
        print("| %s | %d | %d | %s | %s | %s | %+d B (%+.3f%%) | %s |"
              % (m, s, k, format(peak, ","), format(pt, ","), format(held, ","), d, pct,
                 format(roam, ",")))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
