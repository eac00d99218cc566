#!/usr/bin/python3
"""Benchmark roamc on the model zoo, like the ROAM paper's evaluation.

    tests/bench/bench.py [--roamc build/roamc] [--models models]
                         [--out tests/bench/results] [--quick] [--time-limit S]

Runs `roamc MODEL --compare --report json` on every models/*.onnx (one at a
time, so that the planning times are not disturbed by each other) and writes
into the out dir:

    results.csv               one row per model x method, exact bytes
    fig11_actual.md           actual peaks and ROAM's reductions (Fig. 11:
                              order and layout together)
    fig12_theoretical.md      theoretical peaks and ROAM's reductions (Fig. 12:
                              operator order alone)
    headroom.md               the most any plan could save (lower bound of the
                              theoretical peak) next to what ROAM saves
    table1_fragmentation.md   fragmentation per model and method (Table I)
    time.md                   planning time and graph sizes
    summary.md                the headline numbers, the machine, the date
    time_vs_operators.{png,svg,dat,gp}  planning time against operator count

Progress goes to stderr, the summary to stdout. Exit status: 0 all models
planned, 1 some model failed (the others still run), 2 bad usage.
Standard library only; the plot needs gnuplot (skipped with a warning without).
"""

import argparse
import csv
import datetime
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The methods of `roamc --compare`, in the order of its rows.
METHODS = ["pytorch", "heuristics", "ilp", "roam"]
TITLES = {"pytorch": "PyTorch", "heuristics": "Heuristics", "ilp": "ILP", "roam": "ROAM"}
ROW_FIELDS = ["name", "order", "layout", "theoretical_peak", "actual_peak",
              "fragmentation_percent", "reduction_vs_pytorch_percent", "seconds", "note"]
CSV_FIELDS = ["model", "file", "status", "operators", "tensors", "storages", "lower_bound",
              "persistent_bytes", "method",
              "order", "layout", "theoretical_peak", "actual_peak", "fragmentation_percent",
              "reduction_vs_pytorch_percent", "seconds", "note", "model_wall_seconds"]
QUICK_COUNT = 5
QUICK_TIME_LIMIT = 2.0  # --quick without --time-limit: seconds per solve
MIN_PLOT_SECONDS = 1e-4  # log axis: times below this are drawn at this value


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def natural_key(s):
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", s)]


def human(nbytes):
    """Bytes as MiB or GiB with 2 decimals; '—' when unknown."""
    if nbytes is None:
        return "—"
    if abs(nbytes) >= 1 << 30:
        return "%.2f GiB" % (nbytes / float(1 << 30))
    return "%.2f MiB" % (nbytes / float(1 << 20))


def pct(x, digits=2):
    if x is None:
        return "—"
    if abs(x) < 0.5 * 10 ** -digits:
        x = 0.0  # no "-0.00%"
    return "%.*f%%" % (digits, x)


def secs(x):
    if x is None:
        return "—"
    if x < 0.01:
        return "%.4f" % x
    if x < 10:
        return "%.3f" % x
    return "%.1f" % x


def reduction(base, new):
    """How much smaller `new` is than `base`, in percent of `base`."""
    if base is None or new is None or base <= 0:
        return None
    return 100.0 * (base - new) / base


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def md_table(header, rows, align=None):
    align = align or (["l"] + ["r"] * (len(header) - 1))
    sep = ["---:" if a == "r" else ":---" for a in align]
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join(sep) + " |"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out) + "\n"


def parse_json_report(text):
    """The first JSON object with a 'rows' list in roamc's stdout (anything
    printed before it, such as warnings, is skipped)."""
    dec = json.JSONDecoder()
    start = text.find("{")
    while start >= 0:
        try:
            obj, _ = dec.raw_decode(text[start:])
            if isinstance(obj, dict) and isinstance(obj.get("rows"), list):
                return obj
        except ValueError:
            pass
        start = text.find("{", start + 1)
    raise ValueError("no JSON object with 'rows' on stdout")


def num(v):
    """A number from the report, or None (null, missing, not a number)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return v


def run_bounded(cmd, timeout, stderr=subprocess.PIPE):
    """Runs cmd in its own process group, so that a timeout (or ^C) ends it
    and anything it started.  Returns (returncode, stdout, stderr), with
    returncode None on a timeout; raises OSError when cmd cannot start."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=stderr, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout if timeout and timeout > 0 else None)
    except (subprocess.TimeoutExpired, KeyboardInterrupt) as e:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        p.communicate()
        if isinstance(e, KeyboardInterrupt):
            raise
        return None, b"", b""
    return p.returncode, out, err or b""


def run_model(roamc, path, time_limit, timeout):
    """Plans one model; returns a result dict with status 'ok' or 'failed'."""
    name = os.path.splitext(os.path.basename(path))[0]
    shown = os.path.relpath(path, REPO) if os.path.abspath(path).startswith(REPO + os.sep) \
        else path
    res = {"model": name, "file": shown, "status": "failed", "error": "",
           "operators": None, "tensors": None, "storages": None, "lower_bound": None,
           "persistent_bytes": None, "rows": {}, "wall": 0.0}
    cmd = [roamc, path, "--compare", "--report", "json"]
    if time_limit is not None:
        cmd += ["--time-limit", str(time_limit)]
    t0 = time.monotonic()
    try:
        rc, out, err = run_bounded(cmd, timeout)
    except OSError as e:
        res["error"] = "cannot run %s: %s" % (roamc, e)
        return res
    if rc is None:
        res["wall"] = time.monotonic() - t0
        res["error"] = "timed out after %g s" % timeout
        return res
    res["wall"] = time.monotonic() - t0
    stderr = err.decode("utf-8", "replace").strip()
    if rc != 0:
        last = stderr.splitlines()[-1] if stderr else ""
        res["error"] = "exit status %d%s" % (rc, (": " + last) if last else "")
        return res
    try:
        rep = parse_json_report(out.decode("utf-8", "replace"))
    except ValueError as e:
        res["error"] = "bad report: %s" % e
        return res
    for k in ("operators", "tensors", "storages", "lower_bound", "persistent_bytes"):
        res[k] = num(rep.get(k))
    for row in rep["rows"]:
        if not isinstance(row, dict) or not isinstance(row.get("name"), str):
            continue
        r = {k: row.get(k) for k in ROW_FIELDS}
        for k in ("theoretical_peak", "actual_peak", "fragmentation_percent",
                  "reduction_vs_pytorch_percent", "seconds"):
            r[k] = num(r[k])
        for k in ("order", "layout", "note"):
            r[k] = "" if r[k] is None else str(r[k])
        res["rows"][row["name"]] = r
    if not res["rows"]:
        res["error"] = "bad report: no rows"
        return res
    res["status"] = "ok"
    return res


def methods_of(results):
    """The known methods first, then any other row name roamc reported."""
    seen = list(METHODS)
    for r in results:
        for m in r["rows"]:
            if m not in seen:
                seen.append(m)
    return seen


def title(m):
    return TITLES.get(m, m)


def row_val(res, m, key):
    r = res["rows"].get(m)
    return None if r is None else r.get(key)


def write_csv(path, results, methods):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS, lineterminator="\n")
        w.writeheader()
        for res in results:
            names = methods if res["status"] != "ok" else \
                [m for m in methods if m in res["rows"]]
            for m in names:
                r = res["rows"].get(m, {})
                line = {"model": res["model"], "file": res["file"], "status": res["status"],
                        "operators": res["operators"], "tensors": res["tensors"],
                        "storages": res["storages"], "lower_bound": res["lower_bound"],
                        "persistent_bytes": res["persistent_bytes"], "method": m,
                        "model_wall_seconds": "%.3f" % res["wall"]}
                for k in ROW_FIELDS[1:]:
                    v = r.get(k)
                    line[k] = "" if v is None else (repr(v) if isinstance(v, float) else v)
                if res["status"] != "ok":
                    line["note"] = res["error"]
                w.writerow({k: ("" if v is None else v) for k, v in line.items()})


def notes_section(results, methods):
    """Footnotes: the notes roamc attached to rows (one line per method and
    note, listing the models), and the failures."""
    lines = []
    grouped = {}
    for res in results:
        if res["status"] != "ok":
            lines.append("- **%s**: FAILED (%s)" % (res["model"], res["error"]))
            continue
        for m in methods:
            note = row_val(res, m, "note")
            if note:
                grouped.setdefault((methods.index(m), note), []).append(res["model"])
    for (mi, note), models in sorted(grouped.items()):
        lines.append("- %s: %s (%s)" % (title(methods[mi]), note,
                                        "all models" if len(models) == len(results)
                                        else ", ".join(models)))
    return ("\nNotes:\n\n" + "\n".join(lines) + "\n") if lines else ""


def peak_figure(results, methods, key, heading, intro):
    """Peaks per model and method, then ROAM's reduction against every other."""
    others = [m for m in methods if m != "roam"]
    header = ["Model"] + [title(m) for m in methods] + \
        ["ROAM vs %s" % title(m) for m in others]
    rows = []
    red = {m: [] for m in others}
    for res in results:
        if res["status"] != "ok":
            rows.append(["%s" % res["model"]] + ["FAILED"] * len(methods) +
                        ["—"] * len(others))
            continue
        roam = row_val(res, "roam", key)
        line = [res["model"]] + [human(row_val(res, m, key)) for m in methods]
        for m in others:
            x = reduction(row_val(res, m, key), roam)
            red[m].append(x)
            line.append(pct(x))
        rows.append(line)
    rows.append(["**mean**"] + [""] * len(methods) + ["**%s**" % pct(mean(red[m])) for m in others])
    text = "# %s\n\n%s\n\n" % (heading, intro)
    text += md_table(header, rows)
    text += ("\nReduction = (other - ROAM) / other, in percent; positive means ROAM "
             "needs less memory. The mean is the arithmetic mean over the models "
             "where both numbers exist.\n")
    return text + notes_section(results, methods)


def headroom(res, base):
    """(ceiling, saved, plannable) of ROAM against method `base` on one model:
    the most any plan can save (its actual peak down to the lower bound of the
    theoretical peak), what ROAM saves, and what ROAM saves of the part above
    the persistent storages (the part an order and a layout can change); in
    percent, None where a number is missing."""
    other, roam = row_val(res, base, "actual_peak"), row_val(res, "roam", "actual_peak")
    lb, pers = res["lower_bound"], res["persistent_bytes"]
    plannable = None
    if other is not None and roam is not None and pers is not None:
        plannable = reduction(other - pers, roam - pers)
    return reduction(other, lb), reduction(other, roam), plannable


def headroom_table(results):
    bases = ["pytorch", "heuristics"]
    header = ["Model", "Persistent", "Lower bound", "ROAM actual"]
    for b in bases:
        header += ["best possible vs %s" % title(b), "ROAM vs %s" % title(b),
                   "ROAM vs %s, non-persistent part" % title(b)]
    rows, cols = [], [[] for _ in range(3 * len(bases))]
    for res in results:
        if res["status"] != "ok":
            rows.append([res["model"]] + ["FAILED"] * (len(header) - 1))
            continue
        line = [res["model"], human(res["persistent_bytes"]), human(res["lower_bound"]),
                human(row_val(res, "roam", "actual_peak"))]
        for i, b in enumerate(bases):
            for j, x in enumerate(headroom(res, b)):
                cols[3 * i + j].append(x)
                line.append(pct(x))
        rows.append(line)
    rows.append(["**mean**", "", "", ""] + ["**%s**" % pct(mean(c)) for c in cols])
    text = ("# Headroom: the most any plan could save, and what ROAM saves\n\n"
            "No single-stream plan of these graphs (without recomputation or "
            "offloading) has a theoretical peak below roamc's lower bound, and no "
            "layout has an actual peak below its theoretical peak. So "
            "*best possible* = (other's actual peak - lower bound) / other's actual "
            "peak caps every planner's saving. *Non-persistent part* = the same "
            "saving measured on the memory above the persistent storages "
            "(parameters, optimizer state, graph outputs), which no plan can "
            "shrink: (other - ROAM) / (other - persistent).\n\n")
    return text + md_table(header, rows)


def fragmentation_table(results, methods):
    header = ["Model"] + [title(m) for m in methods]
    rows = []
    for res in results:
        if res["status"] != "ok":
            rows.append([res["model"]] + ["FAILED"] * len(methods))
            continue
        rows.append([res["model"]] + [pct(row_val(res, m, "fragmentation_percent"))
                                      for m in methods])
    rows.append(["**mean**"] + ["**%s**" % pct(mean(
        [row_val(r, m, "fragmentation_percent") for r in results if r["status"] == "ok"]))
        for m in methods])
    text = ("# Table I: memory fragmentation\n\n"
            "Fragmentation = (actual peak - theoretical peak) / theoretical peak of the "
            "same plan, in percent. For PyTorch the actual peak is what its caching "
            "allocator would reserve.\n\n")
    return text + md_table(header, rows) + notes_section(results, methods)


def time_table(results, methods):
    header = ["Model", "Operators", "Tensors", "Storages"] + \
        ["%s (s)" % title(m) for m in methods] + ["Wall, all methods (s)"]
    rows = []
    for res in results:
        cnt = [("—" if res[k] is None else res[k]) for k in ("operators", "tensors", "storages")]
        if res["status"] != "ok":
            rows.append([res["model"]] + cnt + ["FAILED"] * len(methods) + [secs(res["wall"])])
            continue
        rows.append([res["model"]] + cnt + [secs(row_val(res, m, "seconds")) for m in methods] +
                    [secs(res["wall"])])
    text = ("# Planning time\n\n"
            "Seconds each method took to plan one training step (as reported by roamc), "
            "and the wall time of the whole `roamc --compare` run as measured by bench.py "
            "(loading the model, all methods, writing the report). See "
            "`time_vs_operators.png` for the plot.\n\n")
    return text + md_table(header, rows) + notes_section(results, methods)


def write_plot(out, results, methods):
    """Planning time against operator count, log-log, one series per method."""
    dat = os.path.join(out, "time_vs_operators.dat")
    gp = os.path.join(out, "time_vs_operators.gp")
    series = []
    with open(dat, "w") as f:
        f.write("# planning time (s) against operator count; one block per method\n")
        for m in methods:
            pts = sorted((res["operators"], max(row_val(res, m, "seconds"), MIN_PLOT_SECONDS),
                          res["model"])
                         for res in results
                         if res["status"] == "ok" and res["operators"]
                         and row_val(res, m, "seconds") is not None)
            if not pts:
                continue
            f.write("%s# %s\n" % ("\n\n" if series else "", title(m)))
            for ops, s, name in pts:
                f.write("%d %.6g %s\n" % (ops, s, name))
            series.append(m)
    if not series:
        return "no data to plot"
    plots = ", ".join(
        "'time_vs_operators.dat' index %d using 1:2 with points pt %d ps 1.5 title '%s'"
        % (i, (i % 7) + 1, title(m)) for i, m in enumerate(series))
    script = (
        "# gnuplot time_vs_operators.gp (from the results dir) redraws the plot.\n"
        "set logscale xy\n"
        "set grid xtics ytics mxtics mytics lc rgb '#dddddd'\n"
        "set xlabel 'operators in the training graph'\n"
        "set ylabel 'planning time (s)'\n"
        "set title 'roamc planning time against graph size'\n"
        "set key outside right top box\n"
        "set terminal pngcairo size 1000,600 font 'sans,11'\n"
        "set output 'time_vs_operators.png'\n"
        "plot %s\n"
        "set terminal svg size 1000,600 font 'sans,11' enhanced\n"
        "set output 'time_vs_operators.svg'\n"
        "replot\n"
        "unset output\n" % plots)
    with open(gp, "w") as f:
        f.write(script)
    gnuplot = shutil.which("gnuplot")
    if not gnuplot:
        return "gnuplot not found; wrote %s and %s only" % (dat, gp)
    try:
        p = subprocess.run([gnuplot, "time_vs_operators.gp"], cwd=out, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "gnuplot failed: %s" % e
    if p.returncode != 0:
        return "gnuplot failed: %s" % p.stderr.decode("utf-8", "replace").strip()
    return None


def machine():
    mem = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return os.cpu_count(), mem, cpu


def roamc_version(roamc):
    try:
        rc, out, _ = run_bounded([roamc, "--version"], 5, stderr=subprocess.STDOUT)
    except OSError:
        return "unknown"
    lines = out.decode("utf-8", "replace").strip().splitlines()
    return lines[0] if lines and rc == 0 else "unknown"


def git_head():
    """The commit built, with -dirty when the sources differ from it; the
    bench's own results directory does not count (it is what a run writes)."""
    def git(*a):
        p = subprocess.run(["git", "-C", REPO] + list(a), stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, timeout=10)
        return p.returncode, p.stdout.decode().strip()
    try:
        rc, head = git("rev-parse", "--short", "HEAD")
        if rc != 0 or not head:
            return "unknown"
        rc, changed = git("status", "--porcelain", "--untracked-files=no", "--", ".",
                          ":(exclude)tests/bench/results")
        return head + ("-dirty" if rc != 0 or changed else "")
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def summary(results, methods, args, wall, started, plot_error):
    ok = [r for r in results if r["status"] == "ok"]
    failed = [r for r in results if r["status"] != "ok"]
    vs_pt = mean([reduction(row_val(r, "pytorch", "actual_peak"), row_val(r, "roam", "actual_peak"))
                  for r in ok])
    vs_h = mean([reduction(row_val(r, "heuristics", "actual_peak"),
                           row_val(r, "roam", "actual_peak")) for r in ok])
    vs_pt_t = mean([reduction(row_val(r, "pytorch", "theoretical_peak"),
                              row_val(r, "roam", "theoretical_peak")) for r in ok])
    vs_h_t = mean([reduction(row_val(r, "heuristics", "theoretical_peak"),
                             row_val(r, "roam", "theoretical_peak")) for r in ok])
    cap_pt = mean([headroom(r, "pytorch")[0] for r in ok])
    cap_h = mean([headroom(r, "heuristics")[0] for r in ok])
    np_pt = mean([headroom(r, "pytorch")[2] for r in ok])
    np_h = mean([headroom(r, "heuristics")[2] for r in ok])
    # Is ROAM's actual peak <= every other method's on every model?
    worse = []
    for r in ok:
        roam = row_val(r, "roam", "actual_peak")
        if roam is None:
            worse.append("%s: ROAM has no actual peak" % r["model"])
            continue
        for m in methods:
            other = row_val(r, m, "actual_peak")
            if m != "roam" and other is not None and roam > other:
                worse.append("%s: ROAM %s > %s %s (+%s)" % (
                    r["model"], human(roam), title(m), human(other),
                    human(roam - other)))
    cores, mem, cpu = machine()
    lines = [
        "# roamc benchmark summary",
        "",
        "- Date: %s" % started.strftime("%Y-%m-%d %H:%M:%S UTC"),
        "- Machine: %s cores%s, %s memory (%s, %s)" % (
            cores, (" (" + cpu + ")") if cpu else "", human(mem) if mem else "unknown",
            platform.system(), platform.machine()),
        "- roamc: `%s` (%s), tree %s" % (args.roamc, roamc_version(args.roamc), git_head()),
        "- Models: %d%s, %d planned, %d failed%s" % (
            len(results), " (--quick)" if args.quick else "", len(ok), len(failed),
            (" (" + ", ".join(r["model"] for r in failed) + ")") if failed else ""),
        "- Time limit per solve: %s" % (("%g s" % args.time_limit) if args.time_limit is not None
                                        else "roamc's default"),
        "- Total wall time of the run: %.1f s" % wall,
        "",
        "## Headline",
        "",
        "- Mean reduction of ROAM's actual peak vs PyTorch: **%s** (theoretical: %s)" % (
            pct(vs_pt), pct(vs_pt_t)),
        "- Mean reduction of ROAM's actual peak vs Heuristics: **%s** (theoretical: %s)" % (
            pct(vs_h), pct(vs_h_t)),
        "- The most any plan could save (down to the lower bound), mean: **%s** vs "
        "PyTorch, **%s** vs Heuristics" % (pct(cap_pt), pct(cap_h)),
        "- Mean reduction of the non-persistent part of the actual peak: %s vs "
        "PyTorch, %s vs Heuristics" % (pct(np_pt), pct(np_h)),
        "- ROAM's actual peak <= every other method's on every model (where both "
        "exist): **%s**" % (
            "yes" if not worse and ok else "no"),
    ]
    for w in worse:
        lines.append("  - %s" % w)
    if failed:
        lines += ["", "## Failed models", ""]
        lines += ["- %s: %s" % (r["model"], r["error"]) for r in failed]
    if plot_error:
        lines += ["", "Plot: %s" % plot_error]
    lines += ["", "Details: fig11_actual.md, fig12_theoretical.md, headroom.md, "
              "table1_fragmentation.md, time.md, results.csv, time_vs_operators.png.", ""]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(
        description="Run roamc --compare on every model and write the paper-style tables.")
    ap.add_argument("--roamc", default=os.path.join(REPO, "build", "roamc"),
                    help="the roamc binary (default: build/roamc)")
    ap.add_argument("--models", default=os.path.join(REPO, "models"),
                    help="folder of *.onnx models (default: models)")
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "bench", "results"),
                    help="output folder (default: tests/bench/results)")
    ap.add_argument("--quick", action="store_true",
                    help="only the %d smallest model files, with --time-limit %g unless "
                         "given" % (QUICK_COUNT, QUICK_TIME_LIMIT))
    ap.add_argument("--time-limit", type=float, default=None, metavar="S",
                    help="passed to roamc --compare --time-limit (default: roamc's)")
    ap.add_argument("--timeout", type=float, default=0, metavar="S",
                    help="kill roamc after S seconds per model and count it failed "
                         "(default 0: no limit)")
    args = ap.parse_args()

    if os.sep not in args.roamc and not os.path.exists(args.roamc):
        args.roamc = shutil.which(args.roamc) or args.roamc
    if not (os.path.isfile(args.roamc) and os.access(args.roamc, os.X_OK)):
        log("bench.py: %s is not an executable roamc (build it, or pass --roamc)" % args.roamc)
        return 2
    if not os.path.isdir(args.models):
        log("bench.py: no models folder %s" % args.models)
        return 2
    files = [os.path.join(args.models, f) for f in os.listdir(args.models)
             if f.endswith(".onnx") and os.path.isfile(os.path.join(args.models, f))]
    if not files:
        log("bench.py: no *.onnx in %s" % args.models)
        return 2
    if args.quick and args.time_limit is None:
        args.time_limit = QUICK_TIME_LIMIT
    if args.quick:
        files = sorted(files, key=lambda p: (os.path.getsize(p), p))[:QUICK_COUNT]
    files.sort(key=lambda p: natural_key(os.path.basename(p)))
    os.makedirs(args.out, exist_ok=True)

    started = datetime.datetime.now(datetime.timezone.utc)
    t0 = time.monotonic()
    results = []
    for i, path in enumerate(files, 1):
        name = os.path.splitext(os.path.basename(path))[0]
        log("[%d/%d] %s ..." % (i, len(files), name))
        res = run_model(args.roamc, path, args.time_limit, args.timeout)
        results.append(res)
        if res["status"] == "ok":
            roam = row_val(res, "roam", "actual_peak")
            pt = row_val(res, "pytorch", "actual_peak")
            log("[%d/%d] %s: ok in %.1f s, %s operators, ROAM actual %s, PyTorch %s (%s)" % (
                i, len(files), name, res["wall"], res["operators"], human(roam), human(pt),
                pct(reduction(pt, roam))))
        else:
            log("[%d/%d] %s: FAILED after %.1f s: %s" % (i, len(files), name, res["wall"],
                                                        res["error"]))
    methods = methods_of(results)

    write_csv(os.path.join(args.out, "results.csv"), results, methods)
    docs = {
        "fig11_actual.md": peak_figure(
            results, methods, "actual_peak",
            "Fig. 11: actual peak memory (operator order and memory layout)",
            "Actual peak = the arena size the layout needs (for PyTorch: what its caching "
            "allocator would reserve), per model and method, then how much lower ROAM's is."),
        "fig12_theoretical.md": peak_figure(
            results, methods, "theoretical_peak",
            "Fig. 12: theoretical peak memory (operator order alone)",
            "Theoretical peak = the largest sum of live storages at any step of the "
            "operator order (parameters and optimizer state included), per model and "
            "method, then how much lower ROAM's is."),
        "headroom.md": headroom_table(results),
        "table1_fragmentation.md": fragmentation_table(results, methods),
        "time.md": time_table(results, methods),
    }
    for fname, text in docs.items():
        with open(os.path.join(args.out, fname), "w") as f:
            f.write(text)
    plot_error = write_plot(args.out, results, methods)
    if plot_error:
        log("bench.py: plot: %s" % plot_error)
    wall = time.monotonic() - t0
    text = summary(results, methods, args, wall, started, plot_error)
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write(text)
    sys.stdout.write(text)
    log("bench.py: wrote %s" % args.out)
    return 1 if any(r["status"] != "ok" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
