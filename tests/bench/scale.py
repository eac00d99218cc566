#!/usr/bin/python3
"""Scale benchmark: roamc's planning time and memory against the operator count.

usage:
  tests/bench/scale.py [--roamc build/roamc] [--layers 48,100,200,400,800]
                       [--model gpt2] [--seq-len 256] [--work DIR] [--out DIR]
                       [--repeat N] [--check]

Makes GPT-2 training graphs of growing depth with models/export.py --layers
(batch 1, sequence 256: about 248 operators a layer, so the default depths
give about 12k, 25k, 50k, 100k and 200k operators), plans each with
`roamc MODEL --report json -o PLAN` under /usr/bin/time -v, and writes:

  OUT/results.csv  one row per graph: operators, tensors, storages, the stage
                   times roamc reports (load, partition, leaves, order, tree
                   layout, layout, total; wall seconds), user and system CPU
                   seconds, wall seconds and peak RSS from /usr/bin/time,
                   theoretical peak, lower bound and the gap between them
  OUT/summary.md   the same as a table, plus the fitted exponents
  OUT/scale.svg    log-log plot of time against operators, one series per
                   stage, with the least-squares line and exponent of each

The fitted exponent is the slope of log(seconds) against log(operators) by
least squares over all sizes.  Exported graphs are cached in --work (they
take 10 s to 3 min each to export); plans go to --out.  Needs only Debian's
/usr/bin/python3 (torch for the exporter) and /usr/bin/time.  Not part of
ctest: the 200k graph alone takes minutes.  See tests/bench/README.md.
"""
import argparse
import csv
import json
import math
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# (label, key in the row) of the series drawn and fitted
SERIES = [
    ("total (roamc)", "total_s"),
    ("user CPU", "user_s"),
    ("load", "load_s"),
    ("partition", "partition_s"),
    ("order (all)", "order_s"),
    ("layout", "layout_s"),
]
COLORS = ["#000000", "#777777", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"]


def log(msg):
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def export(args, layers, path):
    if os.path.exists(path):
        return
    cmd = ["/usr/bin/python3", os.path.join(REPO, "models", "export.py"), "--model", args.model,
           "--layers", str(layers), "--seq-len", str(args.seq_len), "--batch", "1", "-q", "-o", path]
    log("exporting %s (%d layers) ..." % (os.path.basename(path), layers))
    t0 = time.time()
    subprocess.run(cmd, check=True)
    log("  %.0f s" % (time.time() - t0))


def parse_time_v(text):
    """user, sys, wall seconds and max RSS (KiB) from /usr/bin/time -v."""
    def grab(pat):
        m = re.search(pat, text)
        return m.group(1) if m else None
    user = float(grab(r"User time \(seconds\): ([\d.]+)"))
    sys_ = float(grab(r"System time \(seconds\): ([\d.]+)"))
    wall = grab(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)")
    parts = [float(x) for x in wall.split(":")]
    secs = 0.0
    for p in parts:
        secs = secs * 60 + p
    rss = int(grab(r"Maximum resident set size \(kbytes\): (\d+)"))
    return user, sys_, secs, rss


def plan_one(args, model, layers):
    plan = os.path.join(args.out, "plan_L%d.json" % layers)
    cmd = ["/usr/bin/time", "-v", args.roamc, model, "--report", "json", "-o", plan]
    best = None
    for _ in range(args.repeat):
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            raise RuntimeError("roamc failed on %s: %s" % (model, p.stderr[-2000:]))
        rep = json.loads(p.stdout)
        user, sys_, wall, rss = parse_time_v(p.stderr)
        sec = rep["seconds"]
        o = rep.get("ordering", {})
        row = dict(
            layers=layers, model=os.path.basename(model),
            operators=rep["operators"], tensors=rep["tensors"], storages=rep["storages"],
            load_s=sec["load"], partition_s=o.get("seconds_partition", 0.0),
            leaves_s=o.get("seconds_leaves", 0.0), order_s=sec["order"],
            tree_layout_s=rep.get("tree_layout", {}).get("seconds", 0.0), layout_s=sec["layout"],
            total_s=sec["total"], user_s=user, sys_s=sys_, wall_s=wall, rss_mib=rss / 1024.0,
            theoretical_peak=rep["theoretical_peak"], lower_bound=rep["lower_bound"],
            gap_percent=rep["gap_to_lower_bound_percent"], actual_peak=rep["actual_peak"],
            fragmentation_percent=rep["fragmentation_percent"])
        # the repeat with the least user CPU: the machine may be shared
        if best is None or row["user_s"] < best["user_s"]:
            best = row
    if args.check:
        c = subprocess.run(["/usr/bin/python3", "/work/shared/tools/check_plan.py", model, plan],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        best["check"] = "ok" if c.returncode == 0 else "FAILED"
        if c.returncode:
            log(c.stdout[-2000:])
    return best


def fit(xs, ys):
    """Least-squares slope and intercept of log y against log x."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x > 0 and y > 0]
    if len(pts) < 2:
        return float("nan"), float("nan")
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    sxy = sum((p[0] - mx) * (p[1] - my) for p in pts)
    b = sxy / sxx if sxx else float("nan")
    return b, my - b * mx


def svg_plot(rows, fits, path, title):
    """A small log-log plot, hand-written SVG (no plotting library needed)."""
    W, H, L, R, T, B = 760, 520, 70, 220, 40, 55
    xs = [r["operators"] for r in rows]
    ys = [r[k] for r in rows for _, k in SERIES if r[k] > 0]
    x0, x1 = math.floor(math.log10(min(xs))), math.ceil(math.log10(max(xs)))
    y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    if x1 == x0:
        x1 += 1
    if y1 == y0:
        y1 += 1

    def px(x):
        return L + (math.log10(x) - x0) / (x1 - x0) * (W - L - R)

    def py(y):
        return H - B - (math.log10(y) - y0) / (y1 - y0) * (H - T - B)

    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
           'font-size="12">' % (W, H),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="22" font-size="14">%s</text>' % (L, title)]
    def log_ticks(lo, hi):
        """(value, mantissa) of the grid lines 1..9 x 10^e between 10^lo and
        10^hi, e.g. log_ticks(0, 1) -> (1, 1), (2, 2), ..., (10, 1)."""
        for e in range(lo, hi + 1):
            for m in range(1, 10):
                v = m * 10 ** e
                if 10 ** lo <= v <= 10 ** hi:
                    yield v, m

    for v, m in log_ticks(x0, x1):
        X = px(v)
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>' %
                   (X, T, X, H - B, "#cccccc" if m == 1 else "#eeeeee"))
        if m in (1, 2, 5):
            out.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>' %
                       (X, H - B + 16, "{:,}".format(v)))
    for v, m in log_ticks(y0, y1):
        Y = py(v)
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>' %
                   (L, Y, W - R, Y, "#cccccc" if m == 1 else "#eeeeee"))
        if m == 1:
            out.append('<text x="%d" y="%.1f" text-anchor="end">%g s</text>' % (L - 6, Y + 4, v))
    out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="black"/>' %
               (L, T, W - L - R, H - T - B))
    out.append('<text x="%d" y="%d" text-anchor="middle">operators</text>' % ((L + W - R) / 2, H - 18))
    out.append('<text x="16" y="%d" transform="rotate(-90 16 %d)" text-anchor="middle">seconds</text>' %
               ((T + H - B) / 2, (T + H - B) / 2))
    for i, (label, key) in enumerate(SERIES):
        c = COLORS[i % len(COLORS)]
        pts = [(r["operators"], r[key]) for r in rows if r[key] > 0]
        if not pts:
            continue
        out.append('<polyline fill="none" stroke="%s" stroke-width="1" stroke-dasharray="4,3" points="%s"/>' %
                   (c, " ".join("%.1f,%.1f" % (px(x), py(y)) for x, y in pts)))
        for x, y in pts:
            out.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>' % (px(x), py(y), c))
        b, a = fits[key]
        if not math.isnan(b):
            xa, xb = min(xs), max(xs)
            out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>' %
                       (px(xa), py(math.exp(a) * xa ** b), px(xb), py(math.exp(a) * xb ** b), c))
        ly = T + 14 + 18 * i
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>' %
                   (W - R + 12, ly - 4, W - R + 32, ly - 4, c))
        out.append('<text x="%d" y="%d">%s: n^%.2f</text>' % (W - R + 38, ly, label, b))
    out.append('</svg>')
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--roamc", default=os.path.join(REPO, "build", "roamc"))
    ap.add_argument("--model", default="gpt2", help="a BERT or GPT-2 configuration of export.py")
    ap.add_argument("--layers", default="48,100,200,400,800", help="comma-separated depths")
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--work", default="/tmp/roamc_scale_models",
                    help="where the exported graphs are cached")
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "bench", "scale_results"))
    ap.add_argument("--repeat", type=int, default=1, help="plans per graph; the least user CPU is kept")
    ap.add_argument("--check", action="store_true", help="also run shared/tools/check_plan.py on each plan")
    args = ap.parse_args(argv)
    if not os.access(args.roamc, os.X_OK):
        log("scale.py: no roamc binary at %s (build it, or give --roamc)" % args.roamc)
        return 2
    if not os.access("/usr/bin/time", os.X_OK):
        log("scale.py: /usr/bin/time is needed for CPU time and peak RSS (Debian package time)")
        return 2
    layers = [int(x) for x in args.layers.split(",") if x]
    os.makedirs(args.work, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for n in layers:
        model = os.path.join(args.work, "%s_L%d_s%d_b1.onnx" % (args.model, n, args.seq_len))
        export(args, n, model)
        row = plan_one(args, model, n)
        rows.append(row)
        log("%6d ops: total %.2f s (load %.2f, partition %.2f, order %.2f, layout %.2f), user %.2f s, "
            "wall %.2f s, RSS %.0f MiB, gap %.4f%%" % (row["operators"], row["total_s"], row["load_s"],
                                                     row["partition_s"], row["order_s"], row["layout_s"],
                                                     row["user_s"], row["wall_s"], row["rss_mib"],
                                                     row["gap_percent"]))
    keys = list(rows[0].keys())
    with open(os.path.join(args.out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for r in rows:
            w.writerow(r)
    ops = [r["operators"] for r in rows]
    fits = {k: fit(ops, [r[k] for r in rows]) for _, k in SERIES}
    for extra in ("leaves_s", "tree_layout_s", "wall_s"):
        fits[extra] = fit(ops, [r[extra] for r in rows])
    lines = ["# roamc scale benchmark (%s, batch 1, sequence %d)" % (args.model, args.seq_len), "",
             "%s, roamc %s, %d cores (os.cpu_count), %s UTC." % (
                 os.uname().nodename, args.roamc, os.cpu_count(), time.strftime("%Y-%m-%d %H:%M", time.gmtime())),
             "Stage times are roamc's own (--report json, wall seconds); user/sys CPU, wall and peak RSS from "
             "/usr/bin/time -v.  On a shared machine wall times include waiting for a core: compare user CPU.",
             "",
             "| layers | operators | storages | load s | partition s | leaves s | order s | tree layout s | "
             "layout s | total s | user CPU s | wall s | peak RSS MiB | gap to bound % |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append("| %d | %d | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.0f | %.4f |" % (
            r["layers"], r["operators"], r["storages"], r["load_s"], r["partition_s"], r["leaves_s"], r["order_s"],
            r["tree_layout_s"], r["layout_s"], r["total_s"], r["user_s"], r["wall_s"], r["rss_mib"],
            r["gap_percent"]))
    lines += ["", "Fitted exponent b of seconds ~ operators^b (least squares on log-log, all sizes):", ""]
    for label, k in SERIES + [("leaves", "leaves_s"), ("tree layout", "tree_layout_s"), ("wall (time -v)", "wall_s")]:
        lines.append("- %s: %.3f" % (label, fits[k][0]))
    if args.check:
        lines += ["", "check_plan.py: " + ", ".join("%d ops %s" % (r["operators"], r.get("check")) for r in rows)]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write(text)
    svg_plot(rows, fits, os.path.join(args.out, "scale.svg"),
             "roamc planning time vs operators (%s --layers, seq %d)" % (args.model, args.seq_len))
    sys.stdout.write(text)
    return 0 if all(r.get("check", "ok") == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
