#!/usr/bin/python3
"""Two tables beside tests/bench/fit_bench.sh's (tests/bench/results/fit.md):

  fit_checks.py offload ROAMC   roamc --fit=offload (the greedy swap) beside --fit at 75% and 50% of the
                                non-persistent part of the four models fit_bench.sh exports into
                                $TMPDIR/roamc_fit_bench (run fit_bench.sh first);
  fit_checks.py milp ROAMC MODEL the greedy against the MILP check (steps of at most 120 candidates) over
                                19 budgets from the peak of MODEL down to its persistent bytes.
"""
import sys

if len(sys.argv) < 3 or sys.argv[1] not in ("offload", "milp"):
    sys.exit("usage: fit_checks.py offload ROAMC | milp ROAMC MODEL")
if sys.argv[1] == "offload":
    sys.argv = [sys.argv[0], sys.argv[2]]
    import json, subprocess, sys, time
    roamc = sys.argv[1]
    import os
    W = os.path.join(os.environ.get("TMPDIR", "/tmp"), "roamc_fit_bench")
    models = [("resnet50 b32", W + "/resnet50_batch_32.onnx"), ("vit_b_16 b32", "models/vit_b_16_b32.onnx"),
              ("bert-base b32", "models/bert-base_b32.onnx"), ("gpt2 b8 s1024", W + "/gpt2_batch_8_seq-len_1024.onnx")]
    def run(args):
        t = time.time()
        p = subprocess.run([roamc] + args + ["--report", "json"], capture_output=True, text=True)
        return p.returncode, (json.loads(p.stdout) if p.stdout.strip().startswith("{") else {}), time.time() - t
    print("| model | keeps | budget GiB | both: status, added % | offload: status, peak GiB, added %, host MiB | offload plan s |")
    print("|---|---:|---:|---|---|---:|")
    for name, m in models:
        subprocess.run([roamc, m, "-q", "-o", "/tmp/x_plain.json"], check=True)
        pk = json.load(open("/tmp/x_plain.json"))["peak"]
        for f in (75, 50):
            b = pk["persistent"] + f * (pk["actual"] - pk["persistent"]) // 100
            _, jb, _ = run([m, "--budget", str(b), "--fit"])
            _, jo, to = run([m, "--budget", str(b), "--fit=offload"])
            fb, fo = jb.get("fit", {}), jo.get("fit", {})
            def cell(x, host=False):
                if x.get("status") != "fits changed":
                    return "%s (least %.3f GiB)" % (x.get("status"), x.get("least", 0) / 2**30) if x.get("least") else str(x.get("status"))
                s = "fits, %.3f GiB, +%.1f%%" % (x["actual_after"] / 2**30, x["added_percent"])
                return s + (", %.0f MiB" % (x["host_bytes"] / 2**20) if host else "")
            print("| %s | %d%% | %.3f | %s | %s | %.1f |" % (name, f, b / 2**30, cell(fb), cell(fo, True), to))
else:
    sys.argv = [sys.argv[0]] + sys.argv[2:]
    import json, subprocess, sys
    roamc, m = sys.argv[1], sys.argv[2]
    subprocess.run([roamc, m, "-q", "-o", "/tmp/x_r18.json"], check=True)
    pk = json.load(open("/tmp/x_r18.json"))["peak"]
    per, act = pk["persistent"], pk["actual"]
    print("| budget B | greedy: status, added us | MILP: status, model us, bound us | MILP's step planned: added us | gap, % of step |")
    print("|---:|---|---|---|---:|")
    for i in range(1, 20):
        b = per + (act - per) * (20 - i) // 20
        p = subprocess.run([roamc, m, "--budget", str(b), "--fit", "--report", "json"], capture_output=True, text=True)
        f = json.loads(p.stdout)["fit"]
        x = f.get("milp", {})
        g = f.get("added_seconds", 0) * 1e6 if f["status"] == "fits changed" else None
        ms = x.get("planned_added_seconds")
        gap = "%.2f%%" % (100 * (g - ms * 1e6) / (f["step_seconds"] * 1e6)) if g is not None and ms is not None else "-"
        print("| %d | %s | %s, %.2f, %.2f | %s | %s |" % (b, f["status"] + (", %.2f" % g if g is not None else ""),
              x.get("status", "-"), x.get("objective_seconds", 0) * 1e6, x.get("bound_seconds", 0) * 1e6,
              "%.2f" % (ms * 1e6) if ms is not None else "does not fit", gap))
