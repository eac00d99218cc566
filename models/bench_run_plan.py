#!/usr/bin/python3
"""Runs roamc's ROAM plan and program-order plan of every committed model
(all but gpt2-xl, which does not fit this machine's memory) with
models/run_plan.py and prints one markdown table: whether each plan ran bit
for bit equal to eager program order, the arena (= the plan's actual peak),
and the times.

usage: models/bench_run_plan.py ROAMC [--models-dir DIR] [--work DIR]
                                [--extra-exports] [--only SUBSTRING]...

--extra-exports also exports mlp3 (batch 32) and resnet18 (batch 1 and 32)
with models/export.py and runs them the same way.  Exit 0 when every plan
matched, 1 otherwise.
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"


def sh(cmd):
    t = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr, time.time() - t


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("roamc")
    ap.add_argument("--models-dir", default=HERE)
    ap.add_argument("--work", default="/tmp/roamc_run_plan_bench")
    ap.add_argument("--extra-exports", action="store_true")
    ap.add_argument("--only", action="append", default=[])
    a = ap.parse_args(argv[1:])
    os.makedirs(a.work, exist_ok=True)
    models = sorted(m for m in glob.glob(os.path.join(a.models_dir, "*.onnx"))
                    if not os.path.basename(m).startswith("gpt2-xl"))
    if a.extra_exports:
        for name, batch in (("mlp3", 32), ("resnet18", 1), ("resnet18", 32)):
            out = os.path.join(a.work, "%s_b%d.onnx" % (name, batch))
            if not os.path.exists(out):
                rc, txt, _ = sh([PY, os.path.join(HERE, "export.py"), "--model", name, "--batch", str(batch),
                                 "-o", out])
                if rc:
                    sys.exit("export %s: %s" % (name, txt))
            models.append(out)
    if a.only:
        models = [m for m in models if any(s in os.path.basename(m) for s in a.only)]
    print("| model | nodes | plan | arena (actual peak) | roamc plan s | run s | reference s | result |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | --- |")
    sys.stdout.flush()
    ok = True
    for m in models:
        base = os.path.splitext(os.path.basename(m))[0]
        plans, plan_s = [], {}
        for order in ("roam", "program"):
            p = os.path.join(a.work, "%s.%s.json" % (base, order))
            rc, txt, dt = sh([a.roamc, m, "-q", "--order", order, "-o", p])
            if rc:
                print("| %s | | %s | | | | | roamc failed: %s |" % (base, order, txt.strip()[:80]))
                ok = False
                continue
            plans.append((order, p))
            plan_s[order] = dt
        rc, txt, dt = sh([PY, os.path.join(HERE, "run_plan.py"), m] + [p for _, p in plans])
        ref = re.search(r"reference .*: (\d+) nodes .*, ([\d.]+) s \(setup ([\d.]+) s\)", txt)
        for order, p in plans:
            line = re.search(r"^(MATCH|MISMATCH) %s: .*" % re.escape(p), txt, re.M)
            arena = re.search(r"arena (\d+) B, plan run ([\d.]+) s", line.group(0)) if line else None
            verdict = line.group(1) if line else "ERROR (exit %d)" % rc
            if verdict != "MATCH":
                ok = False
            print("| %s | %s | %s | %s | %.1f | %s | %s | %s |" % (
                base, ref.group(1) if ref else "?", order,
                "{:,}".format(int(arena.group(1))) if arena else "?", plan_s[order],
                arena.group(2) if arena else "?", ref.group(2) if ref else "?",
                "bitwise equal" if verdict == "MATCH" else verdict))
        if rc not in (0, 1) or not ref:
            sys.stderr.write("%s: run_plan.py exit %d:\n%s\n" % (base, rc, txt[-2000:]))
        sys.stdout.flush()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
