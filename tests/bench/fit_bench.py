#!/usr/bin/python3
"""Issue 27 ("Make it fit"): the target table from one run.

usage: tests/bench/fit_bench.py [--roamc PATH] [--out DIR] [--work DIR]
                                [--models a,b,...] [--sweep N]
                                [--no-baselines] [--no-max-batch]

(tests/bench/fit_bench.sh runs it with the repository's defaults.)

For each model (resnet50 b32, vit_b_16 b32, bert-base b32 seq 128, gpt2 b8
seq 1024, training steps with Adam as models/export.py writes them):

1. the unfitted plan (roamc M -q -o P.json): peak.actual, peak.persistent;
2. the least budget roamc reaches with --fit: the "least" of a --fit run far
   below it (--report json's fit member), confirmed by fitting at least
   (exit 0) and at least - 1 (exit 3); where that fails (least - 1 fits
   too, or least does not), bisection on --budget between the largest budget
   seen failing and the smallest seen fitting (exit 0 = reached), to 1 MiB
   or 0.1% of the non-persistent part;
3. budgets keeping 75%, 50%, 35% of the non-persistent part
   (persistent + f x (actual - persistent)) and the least:
   roamc M --budget B --fit --emit-train S.onnx -o S.json --report json,
   timed (wall and CPU seconds), checked with check_plan.py;
4. a sweep of N budgets (default 20) from the unfitted actual peak down to
   the least, each checked, with every violation of "fitted peak <= budget,
   added time never falls as the budget falls, every budget >= least fits"
   listed;
5. baselines: models/fit_baselines.py (sqrt(n) checkpoint_sequential and
   functorch's min-cut partitioner, on CPU) at a size the 2-core machine
   can run, roamc --fit at the same size with each baseline's peak as the
   budget, and a roamc sweep at that size for the chart;
6. the largest batch under 16 GiB with --fit --max-overhead 33% (roamc
   --max-batch --fit if it exists, else bisection on --dim batch=B of a
   --symbolic-batch export) against roamc --max-batch without fit;
7. a chart (SVG, written by hand): peak against added time for every sweep
   and baseline point.

Writes OUT/fit.md (tables, commands, date), fit.csv (one row per roamc
run of the target table), fit_sweep.csv, fit_baselines.csv,
fit_max_batch.csv and fit_curve.svg.  Exports, changed steps and plans go
to WORK (default $TMPDIR/roamc_fit_bench; reused exports are kept).
Exit status: 0 every run done (violations and failures are reported, not
fatal); 2 bad usage.
"""
import argparse
import csv
import datetime
import json
import math
import os
import platform
import re
import resource
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
PY = "/usr/bin/python3"
GiB = float(1 << 30)
MiB = float(1 << 20)

# The H100 SXM profile roamc's cost model uses by default (planner/fit/DEVICES.md,
# "Built-in profiles"): fp32 matmuls at the fp32 rate (allow_tf32 False for
# matmul, PyTorch's default), fp32 convolutions at the TF32 rate (cudnn
# allow_tf32 True), every other op memory-bound at the HBM bandwidth.
H100 = {"fp32": 67e12, "tf32": 494.5e12, "hbm": 3350e9}

# name: target export, baseline size (CPU), symbolic export (max batch)
MODELS = {
    "resnet50": dict(label="resnet50 b32", target=["--batch", "32"], committed=None,
                     base=["--batch", "8"], base_label="b8", sym=[], conv=True),
    "vit_b_16": dict(label="vit_b_16 b32", target=["--batch", "32"], committed="models/vit_b_16_b32.onnx",
                     base=["--batch", "8"], base_label="b8", sym=[], conv=False),
    "bert-base": dict(label="bert-base b32 seq 128", target=["--batch", "32"],
                      committed="models/bert-base_b32.onnx", base=["--batch", "8", "--seq-len", "128"],
                      base_label="b8 seq 128", sym=[], conv=False),
    "gpt2": dict(label="gpt2 b8 seq 1024", target=["--batch", "8", "--seq-len", "1024"], committed=None,
                 base=["--batch", "1", "--seq-len", "512"], base_label="b1 seq 512",
                 sym=["--seq-len", "1024"], conv=False),
}
FRACTIONS = (0.75, 0.50, 0.35)


def log(msg):
    print("[fit_bench %s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


def rel(p):
    """p relative to the repository root where it lies inside it (for the commands shown)."""
    p = os.path.abspath(p)
    return os.path.relpath(p, ROOT) if p.startswith(ROOT + os.sep) else p


def show(cmd):
    return shlex.join(rel(c) if os.path.isabs(c) else c for c in cmd)


def run(cmd):
    """Runs cmd from the repository root; returns (rc, stdout, stderr, wall s, cpu s)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return p.returncode, p.stdout, p.stderr, wall, cpu


def gib(b):
    return "" if b is None else "%.3f" % (b / GiB)


def pct(x, nd=1):
    return "" if x is None else ("%." + str(nd) + "f%%") % x


class Bench:
    def __init__(self, a):
        self.a = a
        self.roamc = os.path.abspath(a.roamc)
        self.check = a.check
        self.work = os.path.abspath(a.work)
        os.makedirs(self.work, exist_ok=True)
        self.commands = []  # (what, command) shown in fit.md
        self.slowest = {}  # model file: [slowest wall s, --fit runs, its command]

    # ------------------------------------------------------------------ helpers

    def export(self, name, args, out, committed=None):
        if committed and os.path.exists(os.path.join(ROOT, committed)):
            return os.path.join(ROOT, committed), "committed %s" % committed
        cmd = [PY, os.path.join(ROOT, "models", "export.py"), "--model", name] + args + ["-o", out, "-q"]
        self.commands.append(("export %s" % rel(out), show(cmd)))
        if not os.path.exists(out):
            rc, so, se, wall, _ = run(cmd)
            if rc != 0:
                raise RuntimeError("export failed: %s\n%s" % (show(cmd), se[-2000:]))
            log("exported %s in %.1f s" % (rel(out), wall))
        return out, show(cmd)

    def plan(self, model, extra=()):
        p = os.path.join(self.work, os.path.basename(model)[:-5] + ".plain.json")
        cmd = [self.roamc, model] + list(extra) + ["-q", "-o", p]
        rc, so, se, wall, cpu = run(cmd)
        if rc != 0:
            raise RuntimeError("%s: exit %d: %s" % (show(cmd), rc, se.strip()))
        pk = json.load(open(p))["peak"]
        return dict(actual=pk["actual"], persistent=pk["persistent"], lower_bound=pk.get("lower_bound"),
                    wall=wall, cpu=cpu, cmd=show(cmd))

    def fit(self, model, budget, mode="both", emit=True, extra=(), tag="fit"):
        """One roamc --fit run; with emit the changed step and its plan are
        written and checked with check_plan.py."""
        stem = os.path.join(self.work, "%s.%s" % (os.path.basename(model)[:-5], tag))
        cmd = [self.roamc, model] + list(extra) + ["--budget", str(budget),
                                                   "--fit" if mode == "both" else "--fit=" + mode]
        if emit:
            cmd += ["--emit-train", stem + ".onnx", "-o", stem + ".json"]
        cmd += ["--report", "json"]
        for f in (stem + ".onnx", stem + ".json"):
            if emit and os.path.exists(f):
                os.remove(f)
        rc, so, se, wall, cpu = run(cmd)
        slow = self.slowest.setdefault(model, [0.0, 0, ""])
        slow[1] += 1
        if wall > slow[0]:
            slow[0], slow[2] = wall, show(cmd)
        row = dict(budget=budget, mode=mode, rc=rc, wall=wall, cpu=cpu, cmd=show(cmd),
                   error=se.strip().split("\n")[0] if rc not in (0,) else "")
        try:
            fit = json.loads(so)["fit"]
        except (ValueError, KeyError, TypeError):
            fit = {}
        row["fit"] = fit
        st = fit.get("status", "")
        row["status"] = st if st else ("roamc failed (exit %d)" % rc)
        if st == "fits changed":
            row["peak"] = fit.get("actual_after")
        elif st == "fits unchanged":
            row["peak"] = fit.get("actual_before")
        else:
            row["peak"] = None
        for k in ("step_seconds", "added_seconds", "added_percent", "added_flops", "recomputed", "offloaded",
                  "recomputed_bytes", "offloaded_bytes", "host_bytes", "least", "actual_before", "slack"):
            row[k] = fit.get(k)
        if st == "fits unchanged":
            for k in ("added_seconds", "added_percent", "added_flops", "recomputed", "offloaded", "host_bytes"):
                row[k] = 0
        row["check"] = ""
        if emit and rc == 0:
            crc, cso, cse, cwall, _ = run([PY, self.check, stem + ".onnx", stem + ".json"])
            line = (cso.strip().split("\n") or [""])[-1] if crc == 0 else (cso + cse).strip().split("\n")[-1]
            row["check"] = "VALID" if crc == 0 and line.startswith("VALID") else "INVALID: " + line[:200]
            if crc == 0 and row["peak"] is not None:
                # the plan file's own peak, cross-checked against the report
                plan_actual = json.load(open(stem + ".json"))["peak"]["actual"]
                if plan_actual != row["peak"]:
                    row["check"] += " (plan says actual %d, report %d)" % (plan_actual, row["peak"])
        return row

    def least(self, model, base, mode):
        """The least budget --fit reaches: (bytes, how found, probes)."""
        pers, act = base["persistent"], base["actual"]
        probes = []
        r = self.fit(model, pers, mode, emit=False, tag="probe")
        probes.append(r)
        cand = r["least"] if r["rc"] == 3 else None
        note = ""
        if cand is not None:
            ok = self.fit(model, cand, mode, emit=False, tag="probe")
            below = self.fit(model, cand - 1, mode, emit=False, tag="probe")
            probes += [ok, below]
            if ok["rc"] == 0 and below["rc"] == 3:
                return cand, "report's least (fit at %d: exit 0, at %d: exit 3)" % (cand, cand - 1), probes
            note = "; the report's least %d did not confirm (fit at %d: %s; at %d: %s)" % (
                cand, cand, ok["status"], cand - 1, below["status"])
        # bisection between the largest budget known not to fit below the
        # smallest known to fit (the unfitted actual fits unchanged)
        hi = min([p["budget"] for p in probes if p["rc"] == 0] + [act])
        lo = max(p["budget"] for p in probes if p["rc"] != 0 and p["budget"] < hi)
        tol = max(1 << 20, (act - pers) // 1000)
        while hi - lo > tol:
            mid = (lo + hi) // 2
            p = self.fit(model, mid, mode, emit=False, tag="probe")
            probes.append(p)
            if p["rc"] == 0:
                hi = mid
            else:
                lo = mid
        how = "bisection on --budget (exit 0 = reached; %d probes, to %.1f MiB)%s" % (len(probes), tol / MiB, note)
        failed = [p for p in probes if p["rc"] not in (0, 3)]
        if failed:
            how += "; %d probe(s) below it failed outright (exit %d), so this is where roamc stops working, " \
                "not what the step needs" % (len(failed), failed[0]["rc"])
        return hi, how, probes

    def sweep(self, model, base, least, mode, n, tag):
        act = base["actual"]
        budgets = [act - (act - least) * i // (n - 1) for i in range(n)]
        rows = []
        for i, b in enumerate(budgets):
            r = self.fit(model, b, mode, emit=True, tag="%s%02d" % (tag, i))
            rows.append(r)
        viol = []
        prev = None
        for i, r in enumerate(rows):
            b = r["budget"]
            if r["rc"] != 0:
                viol.append("budget %d (%s GiB): %s%s" % (b, gib(b), r["status"],
                                                         (": " + r["error"]) if r["error"] else ""))
                continue
            if r["peak"] is not None and r["peak"] > b:
                viol.append("budget %d: fitted peak %d exceeds it by %d B" % (b, r["peak"], r["peak"] - b))
            if r["check"] != "VALID":
                viol.append("budget %d: check_plan.py %s" % (b, r["check"]))
            if prev is not None and r["added_seconds"] < prev["added_seconds"]:
                viol.append("budget %d -> %d: added time fell from %.9g s to %.9g s" %
                            (prev["budget"], b, prev["added_seconds"], r["added_seconds"]))
            prev = r
        return rows, viol

    # ------------------------------------------------------------------ parts

    def target(self, name):
        spec = MODELS[name]
        out = os.path.join(self.work, "%s_%s.onnx" % (name, "_".join(spec["target"]).replace("--", "")))
        model, how = self.export(name, spec["target"], out, spec["committed"])
        base = self.plan(model)
        self.commands.append(("unfitted plan, %s" % spec["label"], base["cmd"]))
        log("%s: unfitted actual %s GiB, persistent %s GiB (plan %.2f s)" %
            (name, gib(base["actual"]), gib(base["persistent"]), base["wall"]))
        res = dict(name=name, label=spec["label"], model=model, export=how, base=base, modes={})
        modes = ["both"]
        i = 0
        while i < len(modes):
            mode = modes[i]
            i += 1
            least, least_how, probes = self.least(model, base, mode)
            log("%s [%s]: least %s GiB (%s)" % (name, mode, gib(least), least_how))
            rows = []
            for f in FRACTIONS:
                b = base["persistent"] + int(f * (base["actual"] - base["persistent"]))
                r = self.fit(model, b, mode, tag="%s_k%d" % (mode, int(f * 100)))
                r["target"] = "%d%%" % int(round(f * 100))
                rows.append(r)
            r = self.fit(model, least, mode, tag="%s_least" % mode)
            r["target"] = "least"
            rows.append(r)
            self.commands.append(("fit at the least budget, %s, %s" % (spec["label"], mode), r["cmd"]))
            for r in rows:
                log("  %s %s: %s peak %s GiB added %s %.2f s %s" %
                    (r["target"], gib(r["budget"]), r["status"], gib(r["peak"]), pct(r["added_percent"]),
                     r["wall"], r["check"]))
            sw, viol = self.sweep(model, base, least, mode, self.a.sweep, "%s_sw" % mode)
            log("%s [%s]: sweep of %d, %d violations" % (name, mode, len(sw), len(viol)))
            res["modes"][mode] = dict(least=least, least_how=least_how, probes=len(probes), rows=rows, sweep=sw,
                                      violations=viol)
            if mode == "both" and any(r["rc"] == 1 for r in rows + sw + probes):
                # --fit (recompute and offload) failed outright: show what offload alone does
                modes.append("offload")
        return res

    def baseline(self, name):
        spec = MODELS[name]
        # fit_baselines.py takes --batch and --seq-len as export.py does
        cmd = [PY, os.path.join(ROOT, "models", "fit_baselines.py"), "--model", name] + spec["base"]
        rc, so, se, wall, cpu = run(cmd)
        self.commands.append(("baselines %s %s" % (name, spec["base_label"]), show(cmd)))
        rows = []
        for line in so.splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                pass
        log("%s baselines %s: %d rows in %.0f s (exit %d)" % (name, spec["base_label"], len(rows), wall, rc))
        out = os.path.join(self.work, "%s_base_%s.onnx" % (name, "_".join(spec["base"]).replace("--", "")))
        model, how = self.export(name, spec["base"], out)
        base = self.plan(model)
        unchanged = self.fit(model, base["actual"], emit=False, tag="probe")
        step = unchanged["step_seconds"]
        res = dict(name=name, size=spec["base_label"], cmd=show(cmd), rc=rc, wall=wall, cpu=cpu,
                   stderr=se.strip().split("\n")[-1] if rc else "", model=model, export=how, base=base,
                   step=step, rows=[])
        rate = H100["tf32"] if spec["conv"] else H100["fp32"]
        for b in rows:
            r = dict(method=b["method"], error=b.get("error", ""))
            if not r["error"]:
                r["peak"] = b["peak"]
                r["persistent"] = b["persistent"]
                af = b.get("added_flops", 0)
                ae = b.get("added_other_elems", 0)
                r["added_flops"] = af
                r["added_other_elems"] = ae
                r["sec_matrix"] = af / rate
                r["sec"] = af / rate + max(ae, 0) * 8 / H100["hbm"]
                r["pct"] = 100.0 * r["sec"] / step if step else None
                r["cpu_step_s"] = b.get("step_s")
                f = self.fit(model, b["peak"], tag="base_%s" % b["method"])
                r["roamc"] = f
            res["rows"].append(r)
        least, least_how, _ = self.least(model, base, "both")
        sw, viol = self.sweep(model, base, least, "both", self.a.sweep, "base_sw")
        res.update(least=least, least_how=least_how, sweep=sw, violations=viol)
        log("%s at %s: least %s GiB, sweep violations %d" % (name, spec["base_label"], gib(least), len(viol)))
        return res

    def max_batch(self, name, budget="16GiB", overhead="33%"):
        spec = MODELS[name]
        out = os.path.join(self.work, "%s_bsym%s.onnx" % (name, "_".join(spec["sym"]).replace("--", "_")))
        model, how = self.export(name, spec["sym"] + ["--symbolic-batch"], out)
        res = dict(name=name, export=how, model=model)
        cmd = [self.roamc, model, "--budget", budget, "--max-batch", "--report", "json"]
        rc, so, se, wall, cpu = run(cmd)
        mb = json.loads(so)["max_batch"] if rc in (0, 3) else {}
        res.update(pytorch=mb.get("pytorch"), plan=mb.get("plan"), bound=mb.get("lower_bound"),
                   mb_cmd=show(cmd), mb_wall=wall)
        cmd = [self.roamc, model, "--budget", budget, "--max-batch", "--fit", "--max-overhead", overhead,
               "--report", "json"]
        rc, so, se, wall, cpu = run(cmd)
        res["native_cmd"] = show(cmd)
        if rc == 0:
            d = json.loads(so)
            res["native"] = d.get("max_batch", {}).get("plan")
            res["how"] = "roamc --max-batch --fit"
        else:
            res["native"] = None
            res["native_error"] = "exit %d: %s" % (rc, se.strip().split("\n")[0])
        # bisection on the batch with --dim batch=B, whatever the native answer
        t0 = time.monotonic()
        probes = {}

        def probe(b):
            if b not in probes:
                probes[b] = self.fit(model, budget, extra=["--dim", "batch=%d" % b, "--max-overhead", overhead],
                                     emit=False, tag="probe")
            return probes[b]["rc"] == 0

        lo = max(1, res["plan"] or 1)
        if not probe(lo):
            lo = 0
            hi = max(1, res["plan"] or 1)
        else:
            hi = lo * 2
            while probe(hi):
                lo, hi = hi, hi * 2
                if hi > (1 << 16):
                    break
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if probe(mid):
                lo = mid
            else:
                hi = mid
        res["fit_batch"] = lo
        res["probes"] = len(probes)
        res["bisect_wall"] = time.monotonic() - t0
        res["fail_above"] = probes.get(lo + 1, {}).get("status") if lo + 1 in probes else None
        res["fail_above_error"] = probes.get(lo + 1, {}).get("error", "") if lo + 1 in probes else ""
        if lo:
            f = self.fit(model, budget, extra=["--dim", "batch=%d" % lo, "--max-overhead", overhead],
                         tag="maxbatch")
            res["final"] = f
        res["probe_cmd"] = show([self.roamc, rel(model), "--dim", "batch=B", "--budget", budget, "--fit",
                                 "--max-overhead", overhead, "--report", "json"])
        log("%s max batch under %s: pytorch %s, roamc %s, roamc --fit %s" %
            (name, budget, res["pytorch"], res["plan"], lo))
        return res


# ---------------------------------------------------------------------- output

def fit_row_cells(r):
    ok = r["rc"] == 0
    f = r["fit"]
    return [
        gib(r["budget"]),
        r["status"] + ("" if ok or r["rc"] == 3 else ": " + r["error"][:160]),
        gib(r["peak"]) if ok else ("least %s" % gib(r["least"]) if r.get("least") else ""),
        ("yes" if r["peak"] <= r["budget"] else "**NO**") if ok and r["peak"] is not None else "",
        r["check"],
        str(r["recomputed"]) if ok else "",
        str(r["offloaded"]) if ok else "",
        "%.1f" % (r["host_bytes"] / MiB) if ok and r["host_bytes"] is not None else "",
        "%.1f" % (r["added_flops"] / 1e9) if ok and r["added_flops"] is not None else "",
        "%.3f" % (r["added_seconds"] * 1e3) if ok and r["added_seconds"] is not None else "",
        pct(r["added_percent"]) if ok else "",
        "%.2f / %.2f" % (r["wall"], r["cpu"]),
        "" if not f else ("yes" if r["wall"] <= 30 else "**no**"),
    ]


def write_md(path, b, targets, bases, mbs, meta):
    L = []
    w = L.append
    w("# Make it fit: the targets of issue 27 (%s)" % meta["date"])
    w("")
    w("One run of `%s` (%s; %s; %s at git %s). Total wall time %.0f s." %
      (meta["cmd"], meta["machine"], meta["cpus"], meta["version"], meta["git"], meta["wall"]))
    w("Device profile: roamc's default, H100 SXM5 80GB (planner/fit/DEVICES.md). Sizes in GiB (2^30 B),")
    w("added time in ms on that profile and in % of the step's estimated time. Planning time: wall / CPU")
    w("seconds of the one roamc command (2 shared cores, other work running on the machine).")
    w("")
    w("## Models")
    w("")
    w("| model | file | unfitted actual peak | persistent | plan wall s | step on H100 (ms) "
      "| --fit runs | slowest --fit wall s |")
    w("|---|---|---:|---:|---:|---:|---:|---:|")
    for t in targets:
        rs = t["modes"]["both"]["rows"]
        step = next((r["step_seconds"] for r in rs if r.get("step_seconds")), None)
        slow = b.slowest.get(t["model"], [0.0, 0, ""])
        w("| %s | `%s` | %s | %s | %.2f | %s | %d | %.2f |" % (
            t["label"], t["export"], gib(t["base"]["actual"]), gib(t["base"]["persistent"]), t["base"]["wall"],
            "%.2f" % (step * 1e3) if step else "", slow[1], slow[0]))
    w("")
    w("'--fit runs' counts every roamc --fit run on the model (probes for the least, targets, sweep);")
    w("the slowest is the planning time that matters for the issue's <= 30 s target.")
    w("")
    w("Unfitted plan: `roamc MODEL -q -o P.json` (its `peak.actual`, `peak.persistent`). Each fit:")
    w("`roamc MODEL --budget B --fit --emit-train S.onnx -o S.json --report json`, then")
    w("`/usr/bin/python3 /work/shared/tools/check_plan.py S.onnx S.json`. Every command with its")
    w("budget is in `fit.csv`.")
    w("")
    w("## Target budgets")
    w("")
    w("Budget = persistent + f x (actual - persistent) for f = 75%, 50%, 35%, and the least budget roamc")
    w("reaches (how it was found below the table). 'cannot fit' is roamc's exit 3; its 'fitted peak' column")
    w("shows the 'least' roamc reports then (the peak with every candidate changed: not always the least")
    w("budget that fits, see below the table).")
    w("")
    hdr = ("| model | mode | keeps | budget | status | fitted peak | <= budget | check_plan | recomputed | "
           "offloaded | host MiB | added GFLOP | added ms | % of step | plan wall / CPU s | <= 30 s |")
    w(hdr)
    w("|" + "---|" * 2 + "---:|" * 2 + "---|" + "---:|" + "---|" * 2 + "---:|" * 7 + "---|")
    for t in targets:
        for mode, m in t["modes"].items():
            for r in m["rows"]:
                keep = r["target"]
                if keep == "least":
                    nonp = t["base"]["actual"] - t["base"]["persistent"]
                    keep = "least (%.1f%%)" % (100.0 * (r["budget"] - t["base"]["persistent"]) / nonp)
                w("| %s | %s | %s | %s |" % (t["label"], mode, keep, " | ".join(fit_row_cells(r))))
    w("")
    for t in targets:
        for mode, m in t["modes"].items():
            w("- %s, %s: least %d B (%s GiB): %s." % (t["label"], mode, m["least"], gib(m["least"]),
                                                     m["least_how"]))
    fails = [(t, mode, r) for t in targets for mode, m in t["modes"].items() for r in m["rows"] + m["sweep"]
             if r["rc"] not in (0, 3)]
    if fails:
        w("")
        w("roamc failures (exit other than 0 or 3), as printed:")
        w("")
        def gist(r):  # the message without its file names and node names
            return re.sub(r"'[^']*'", "'.'", r["error"].split(".onnx: ")[-1])

        seen = set()
        for t, mode, r in fails:
            key = (t["name"], mode, gist(r))
            if key in seen:
                continue
            seen.add(key)
            n = sum(1 for t2, m2, r2 in fails if (t2["name"], m2, gist(r2)) == key)
            w("- %s, %s, %d run(s) (targets and sweep), e.g. `%s`: exit %d, `%s`" % (
                t["label"], mode, n, r["cmd"], r["rc"], r["error"]))
    w("")
    w("## Monotonicity: %d budgets from the unfitted actual peak down to the least" % b.a.sweep)
    w("")
    w("Budgets evenly spaced, both ends included; every fit written and checked. A violation is a budget")
    w(">= the least that does not fit (or fails), a fitted peak above its budget, a plan check_plan.py")
    w("rejects, or an added time lower than at the previous (larger) budget. Full rows: `fit_sweep.csv`.")
    w("")
    w("| model | mode | budgets | fit | VALID | max fitted peak / budget | added % at least | slowest plan s "
      "| violations |")
    w("|---|---|---:|---:|---:|---:|---:|---:|---|")
    sweeps = [(t["label"], mode, m) for t in targets for mode, m in t["modes"].items()]
    sweeps += [("%s %s (baseline size)" % (s["name"], s["size"]), "both", s) for s in bases]
    for label, mode, m in sweeps:
        sw = m["sweep"]
        okr = [r for r in sw if r["rc"] == 0]
        ratio = max((r["peak"] / r["budget"] for r in okr if r["peak"] is not None), default=None)
        last = sw[-1]
        w("| %s | %s | %d | %d | %d | %s | %s | %.2f | %s |" %
          (label, mode, len(sw), len(okr), sum(1 for r in sw if r["check"] == "VALID"),
           "%.4f" % ratio if ratio is not None else "", pct(last["added_percent"]) if last["rc"] == 0 else "",
           max(r["wall"] for r in sw), "none" if not m["violations"] else "%d (below)" % len(m["violations"])))
    for label, mode, m in sweeps:
        if m["violations"]:
            w("")
            w("Violations, %s, %s:" % (label, mode))
            w("")
            for v in m["violations"]:
                w("- %s" % v)
    w("")
    w("## Baselines side by side (CPU-measured, smaller sizes)")
    w("")
    w("models/fit_baselines.py runs one eager training step on this machine's CPU (torch 1.13) per")
    w("method: `none` (plain), `sqrt` (checkpoint_sequential, round(sqrt(n)) segments) and `mincut`")
    w("(functorch's min_cut_rematerialization_partition); peak = live ATen storages (512 B rounding).")
    w("The target sizes take too long and too much memory for 2 shared cores and 24 GB (gpt2 b8 seq 1024")
    w("alone needs ~26 GB), so they run at the sizes named, and roamc is run on an export of the same")
    w("size with each baseline's measured peak as its --budget (roamc's budget bounds the arena, i.e.")
    w("roamc's peak is never above the baseline's: an equal or smaller peak).")
    w("Baseline seconds on roamc's H100 profile: added matrix FLOPs at the rate roamc gives them (resnet50:")
    w("convolutions at TF32, 494.5 TFLOP/s; transformers: fp32 matmuls, 67 TFLOP/s) plus 8 B (one fp32")
    w("read and write) per added non-matrix output element at 3350 GB/s. This is a lower bound of what")
    w("roamc's cost model would charge (a matmul's or convolution's own bytes and extra reads of binary")
    w("ops are not counted), so it favours the baselines. % of step: of roamc's estimated step at that size.")
    w("")
    w("| model | size | method | baseline peak | added GFLOP | added M elems | baseline ms | % of step "
      "| roamc peak at that budget | roamc added ms | % of step | roamc <= baseline | check_plan |")
    w("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for s in bases:
        if not s["rows"]:
            w("| %s | %s | all | fit_baselines.py produced no rows (exit %d: %s) | | | | | | | | | |" %
              (s["name"], s["size"], s["rc"], s["stderr"]))
        for r in s["rows"]:
            if r["error"]:
                w("| %s | %s | %s | cannot run: %s | | | | | | | | | |" % (s["name"], s["size"], r["method"],
                                                                        r["error"]))
                continue
            f = r["roamc"]
            ok = f["rc"] == 0
            better = ""
            if ok:
                better = "yes" if f["added_seconds"] <= r["sec"] + 1e-12 else "**no**"
            w("| %s | %s | %s | %s | %.1f | %.1f | %.3f | %s | %s | %s | %s | %s | %s |" %
              (s["name"], s["size"], r["method"], gib(r["peak"]), r["added_flops"] / 1e9,
               r["added_other_elems"] / 1e6, r["sec"] * 1e3, pct(r["pct"]),
               gib(f["peak"]) if ok else f["status"] + (" (least %s)" % gib(f["least"]) if f["least"] else ""),
               "%.3f" % (f["added_seconds"] * 1e3) if ok else "", pct(f["added_percent"]) if ok else "",
               better, f["check"]))
    w("")
    for s in bases:
        w("- %s %s: `%s` (exit %d, %.0f s wall); roamc on `%s`: unfitted actual %s GiB, persistent %s GiB, "
          "least %s GiB (%s), step %.3f ms." % (s["name"], s["size"], s["cmd"], s["rc"], s["wall"], s["export"],
                                              gib(s["base"]["actual"]), gib(s["base"]["persistent"]),
                                              gib(s["least"]), s["least_how"], s["step"] * 1e3))
    w("")
    w("## Largest batch under 16 GiB with --fit --max-overhead 33%")
    w("")
    if mbs:
        m0 = mbs[0]
        if m0.get("native") is None:
            w("`%s` is not there yet (%s), so the batch is bisected: `%s` (exit 0 = fits within 33%%), on a "
              "`models/export.py --symbolic-batch` export; PyTorch and roamc without fit from `roamc MODEL "
              "--budget 16GiB --max-batch --report json`." % (m0["native_cmd"], m0.get("native_error", ""),
                                                               m0["probe_cmd"]))
        w("")
        w("| model | PyTorch (no recompute) | roamc, no fit | bound, no fit | roamc --fit <= 33% | x PyTorch "
          "| fitted peak | added % | recomputed / offloaded | check_plan | batch + 1 | probes | bisect s |")
        w("|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|---:|---:|")
        for m in mbs:
            f = m.get("final") or {}
            ok = f.get("rc") == 0
            w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %.1f |" %
              (m["name"], m["pytorch"], m["plan"], m["bound"], m["fit_batch"],
               "%.2fx" % (m["fit_batch"] / m["pytorch"]) if m["pytorch"] else "",
               gib(f.get("peak")) if ok else "", pct(f.get("added_percent")) if ok else "",
               "%s / %s" % (f.get("recomputed"), f.get("offloaded")) if ok else "", f.get("check", ""),
               m["fail_above"] or "", m["probes"], m["bisect_wall"]))
        w("")
        for m in mbs:
            w("- %s: `%s`" % (m["name"], m["export"]))
    w("")
    w("## Memory / overhead curve")
    w("")
    w("![peak against added time](fit_curve.svg)")
    w("")
    w("`fit_curve.svg`: one panel per model; x = added time in % of the step (H100 profile), y = peak in %")
    w("of roamc's unfitted actual peak at that size. Lines: roamc's sweeps (target size; baseline size);")
    w("points: the baselines at the baseline size (their CPU-measured live peak over roamc's unfitted")
    w("actual peak at that size, their converted seconds over roamc's step).")
    w("")
    w("## Commands")
    w("")
    for what, c in b.commands:
        w("- %s: `%s`" % (what, c))
    open(path, "w").write("\n".join(L) + "\n")


def write_csvs(out, targets, bases, mbs):
    cols = ["model", "mode", "target", "budget", "rc", "status", "peak", "check", "recomputed", "offloaded",
            "recomputed_bytes", "offloaded_bytes", "host_bytes", "added_flops", "added_seconds",
            "added_percent", "step_seconds", "least", "wall", "cpu", "cmd", "error"]
    with open(os.path.join(out, "fit.csv"), "w", newline="") as fh:
        c = csv.writer(fh)
        c.writerow(cols)
        for t in targets:
            for mode, m in t["modes"].items():
                for r in m["rows"]:
                    c.writerow([t["label"]] + [r.get(k) for k in cols[1:]])
    with open(os.path.join(out, "fit_sweep.csv"), "w", newline="") as fh:
        c = csv.writer(fh)
        c.writerow(["model", "size"] + cols[1:2] + ["i"] + cols[3:])
        for t in targets:
            for mode, m in t["modes"].items():
                for i, r in enumerate(m["sweep"]):
                    c.writerow([t["name"], "target", mode, i] + [r.get(k) for k in cols[3:]])
        for s in bases:
            for i, r in enumerate(s["sweep"]):
                c.writerow([s["name"], s["size"], "both", i] + [r.get(k) for k in cols[3:]])
    with open(os.path.join(out, "fit_baselines.csv"), "w", newline="") as fh:
        c = csv.writer(fh)
        c.writerow(["model", "size", "method", "peak", "persistent", "added_flops", "added_other_elems",
                    "baseline_seconds", "baseline_seconds_matrix", "baseline_percent", "cpu_step_s",
                    "roamc_budget", "roamc_rc", "roamc_peak", "roamc_added_seconds", "roamc_added_percent",
                    "roamc_check", "roamc_cmd", "error"])
        for s in bases:
            for r in s["rows"]:
                f = r.get("roamc") or {}
                c.writerow([s["name"], s["size"], r["method"], r.get("peak"), r.get("persistent"),
                            r.get("added_flops"), r.get("added_other_elems"), r.get("sec"), r.get("sec_matrix"),
                            r.get("pct"), r.get("cpu_step_s"), f.get("budget"), f.get("rc"), f.get("peak"),
                            f.get("added_seconds"), f.get("added_percent"), f.get("check"), f.get("cmd"),
                            r["error"]])
    with open(os.path.join(out, "fit_max_batch.csv"), "w", newline="") as fh:
        c = csv.writer(fh)
        c.writerow(["model", "pytorch", "roamc", "bound", "roamc_fit_33pct", "fitted_peak", "added_percent",
                    "check", "probes", "probe_cmd", "native_cmd", "native_error"])
        for m in mbs:
            f = m.get("final") or {}
            c.writerow([m["name"], m["pytorch"], m["plan"], m["bound"], m["fit_batch"], f.get("peak"),
                        f.get("added_percent"), f.get("check"), m["probes"], m["probe_cmd"], m["native_cmd"],
                        m.get("native_error", "")])


def nice_ticks(lo, hi, n=5):
    """Round tick values covering [lo, hi]: (first, step, last)."""
    raw = (hi - lo) / n if hi > lo else 1.0
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    last = math.ceil(hi / step) * step
    return first, step, last


def write_svg(path, targets, bases):
    """Small multiples, one panel per model, drawn by hand."""
    names = [t["name"] for t in targets] or [s["name"] for s in bases]
    bymodel = {s["name"]: s for s in bases}
    pw, ph, ml, mr, mt, mb = 620, 300, 58, 240, 30, 44  # mr: the legend, right of the plot
    cols = 2
    rows = (len(names) + cols - 1) // cols
    W, H = max(cols * pw, 1000), rows * ph + 56
    o = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
         'font-family="sans-serif" font-size="11">' % (W, H, W, H),
         '<rect width="100%" height="100%" fill="white"/>']
    colors = {"both": "#1f77b4", "offload": "#9467bd", "base": "#2ca02c"}
    marks = {"none": ("circle", "#555555"), "sqrt": ("triangle", "#d62728"), "mincut": ("square", "#ff7f0e")}
    XCAP = 100.0  # added time (% of step) beyond which points are left off and counted

    def mark(kind, x, y, col):
        if kind == "circle":
            return '<circle cx="%.1f" cy="%.1f" r="4.5" fill="%s"/>' % (x, y, col)
        if kind == "square":
            return '<rect x="%.1f" y="%.1f" width="8" height="8" fill="%s"/>' % (x - 4, y - 4, col)
        return '<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="%s"/>' % (x, y - 5.5, x - 5, y + 4, x + 5,
                                                                               y + 4, col)

    for k, name in enumerate(names):
        ox, oy = (k % cols) * pw, (k // cols) * ph
        series = []  # (label, color, dash, [(x, y)], points left off)
        t = next((t for t in targets if t["name"] == name), None)
        if t:
            for mode, m in t["modes"].items():
                pts = [(r["added_percent"], 100.0 * r["peak"] / t["base"]["actual"]) for r in m["sweep"]
                       if r["rc"] == 0 and r["peak"] is not None]
                series.append(("roamc %s, %s" % (MODELS[name]["label"].split(" ", 1)[1], mode),
                               colors.get(mode, "#000"), "", [p for p in pts if p[0] <= XCAP],
                               sum(1 for p in pts if p[0] > XCAP)))
        pts_b = []
        s = bymodel.get(name)
        if s:
            pts = [(r["added_percent"], 100.0 * r["peak"] / s["base"]["actual"]) for r in s["sweep"]
                   if r["rc"] == 0 and r["peak"] is not None]
            series.append(("roamc %s, both" % s["size"], colors["base"], "5,3", [p for p in pts if p[0] <= XCAP],
                           sum(1 for p in pts if p[0] > XCAP)))
            for r in s["rows"]:
                if not r["error"] and r.get("pct") is not None:
                    pts_b.append((r["method"], r["pct"], 100.0 * r["peak"] / s["base"]["actual"]))
        xs = [p[0] for se in series for p in se[3]] + [p[1] for p in pts_b]
        ys = [p[1] for se in series for p in se[3]] + [p[2] for p in pts_b]
        _, xstep, xmax = nice_ticks(0.0, max(xs + [1.0]) * 1.04)
        ymin, ystep, ymax = nice_ticks(min(ys + [100.0]) - 2, max(ys + [100.0]) + 2)
        x0, y0, x1, y1 = ox + ml, oy + mt, ox + pw - mr, oy + ph - mb

        def X(v):
            return x0 + v / xmax * (x1 - x0)

        def Y(v):
            return y1 - (v - ymin) / (ymax - ymin) * (y1 - y0)

        o.append('<text x="%.1f" y="%.1f" font-size="13" font-weight="bold">%s</text>' % (x0, oy + 18, name))
        o.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#333"/>' %
                 (x0, y0, x1 - x0, y1 - y0))
        xv = 0.0
        while xv <= xmax + 1e-9:
            o.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>' % (X(xv), y0, X(xv), y1))
            o.append('<text x="%.1f" y="%.1f" text-anchor="middle">%g</text>' % (X(xv), y1 + 14, round(xv, 6)))
            xv += xstep
        yv = ymin
        while yv <= ymax + 1e-9:
            o.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>' % (x0, Y(yv), x1, Y(yv)))
            o.append('<text x="%.1f" y="%.1f" text-anchor="end">%g</text>' % (x0 - 4, Y(yv) + 4, round(yv, 6)))
            yv += ystep
        o.append('<text x="%.1f" y="%.1f" text-anchor="middle">added time, %% of step</text>' %
                 ((x0 + x1) / 2, y1 + 30))
        o.append('<text transform="translate(%.1f,%.1f) rotate(-90)" text-anchor="middle">peak, %% of unfitted'
                 '</text>' % (ox + 16, (y0 + y1) / 2))
        for label, col, dash, ps, off in series:
            if ps:
                d = " ".join("%.1f,%.1f" % (X(x), Y(y)) for x, y in sorted(ps, key=lambda p: -p[1]))
                o.append('<polyline points="%s" fill="none" stroke="%s" stroke-width="1.6"%s/>' %
                         (d, col, ' stroke-dasharray="%s"' % dash if dash else ""))
            for x, y in ps:
                o.append('<circle cx="%.1f" cy="%.1f" r="2.2" fill="%s"/>' % (X(x), Y(y), col))
        for meth, x, y in pts_b:
            kind, col = marks.get(meth, ("circle", "#000"))
            o.append(mark(kind, X(x), Y(y), col))
        # legend right of the plot
        entries = [(label + (" (%d > %g%%: off)" % (off, XCAP) if off else ""), col, dash, None)
                   for label, col, dash, ps, off in series]
        entries += [("%s %s" % (meth, s["size"]), marks.get(meth, ("circle", "#000"))[1], "",
                     marks.get(meth, ("circle", "#000"))[0]) for meth, _, _ in pts_b]
        ly = y0 + 10
        lx = x1 + 10
        for label, col, dash, kind in entries:
            if kind:
                o.append(mark(kind, lx + 10, ly - 4, col))
            else:
                o.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>' %
                         (lx, ly - 4, lx + 20, ly - 4, col, ' stroke-dasharray="%s"' % dash if dash else ""))
            o.append('<text x="%.1f" y="%.1f">%s</text>' % (lx + 26, ly, label))
            ly += 13
    o.append('<text x="10" y="%d">x: added time on roamc\'s H100 profile, %% of the step; y: peak, %% of roamc\'s '
             'unfitted actual peak at the same size (roamc: actual arena peak of the changed step).</text>' % (H - 30))
    o.append('<text x="10" y="%d">Baseline points (models/fit_baselines.py, CPU): live-storage peak; added FLOPs '
             'and pointwise elements converted on the same profile (fit.md).</text>' % (H - 14))
    o.append('</svg>')
    open(path, "w").write("\n".join(o) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="fit_bench.py", description=__doc__.split("\n")[0])
    ap.add_argument("--roamc", default=os.path.join(ROOT, "build", "roamc"))
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--work", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "roamc_fit_bench"))
    ap.add_argument("--check", default="/work/shared/tools/check_plan.py")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--sweep", type=int, default=20)
    ap.add_argument("--no-baselines", action="store_true")
    ap.add_argument("--no-max-batch", action="store_true")
    ap.add_argument("--render", metavar="RESULTS.json",
                    help="only rewrite the tables and the chart from a run's WORK/fit_results.json")
    a = ap.parse_args(argv)
    if a.render:
        d = json.load(open(a.render))
        b = Bench.__new__(Bench)
        b.a, b.commands, b.slowest = argparse.Namespace(**d["args"]), d["commands"], d["slowest"]
        os.makedirs(a.out, exist_ok=True)
        render(a.out, b, d["targets"], d["bases"], d["mbs"], d["meta"])
        return 0
    names = [m for m in a.models.split(",") if m]
    for m in names:
        if m not in MODELS:
            ap.error("unknown model %r (%s)" % (m, ", ".join(MODELS)))
    if not os.access(a.roamc, os.X_OK):
        ap.error("no roamc binary at %s (build it first)" % a.roamc)
    if not os.path.exists(a.check):
        ap.error("no check_plan.py at %s" % a.check)
    if a.sweep < 2:
        ap.error("--sweep needs at least 2 budgets")
    os.makedirs(a.out, exist_ok=True)
    t0 = time.monotonic()
    b = Bench(a)
    targets = [b.target(n) for n in names]
    bases = [] if a.no_baselines else [b.baseline(n) for n in names]
    mbs = [] if a.no_max_batch else [b.max_batch(n) for n in names]
    git = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    ver = subprocess.run([b.roamc, "--version"], capture_output=True, text=True).stdout.strip()
    mem = next((ln.split()[1] for ln in open("/proc/meminfo") if ln.startswith("MemTotal")), "0")
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "")
    meta = dict(date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                cmd="tests/bench/fit_bench.sh" + ("" if argv is None and len(sys.argv) == 1 else
                                                  " " + " ".join(sys.argv[1:] if argv is None else argv)),
                machine="%s, %.0f GiB" % (cpu or platform.machine(), int(mem) / (1 << 20)),
                cpus="%d cores" % os.cpu_count(), version=ver, git=git + ("+dirty" if dirty else ""),
                wall=time.monotonic() - t0)
    with open(os.path.join(b.work, "fit_results.json"), "w") as fh:
        json.dump(dict(args=vars(a), commands=b.commands, slowest=b.slowest, targets=targets, bases=bases,
                       mbs=mbs, meta=meta), fh)
    render(a.out, b, targets, bases, mbs, meta)
    log("written %s/fit.md (%.0f s); all results in %s" % (rel(a.out), meta["wall"],
                                                          os.path.join(b.work, "fit_results.json")))
    return 0


def render(out, b, targets, bases, mbs, meta):
    write_md(os.path.join(out, "fit.md"), b, targets, bases, mbs, meta)
    write_csvs(out, targets, bases, mbs)
    write_svg(os.path.join(out, "fit_curve.svg"), targets, bases)


if __name__ == "__main__":
    sys.exit(main())
