#!/usr/bin/env bash
# `roamc --compare --report json` keeps its promises, and tests/bench/bench.py
# still runs end to end (on two small models, so the suite stays fast).
# usage: test_bench.sh ROAMC CHECK_PLAN_PY MODEL_DIR WORK_DIR
# Exit 77 (skipped) without /usr/bin/python3, or when check_plan.py cannot run.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
test_usage 4 4 "ROAMC CHECK_PLAN_PY MODEL_DIR WORK_DIR" "$@"
roamc=$1 check_py=$2 models=$3 work=$4
[ -x /usr/bin/python3 ] || skip "needs /usr/bin/python3"
rm -rf "$work" && mkdir -p "$work/models" || fail_now "cannot make $work"

# 1. --compare on each model: four rows, consistent numbers, and the ROAM
#    plan it writes passes both checkers.
for name in mobilenet_v2_b1 vgg16_b1; do
  model="$models/$name.onnx"
  failed_before=$TEST_FAILS
  cp "$model" "$work/models/" || fail_now "cannot copy $model"
  if ! "$roamc" "$model" --compare --report json --time-limit 2 -o "$work/$name.plan.json" \
      > "$work/$name.json" 2> "$work/$name.err"; then
    fail "$name: roamc --compare: $(cat "$work/$name.err")"
    continue
  fi
  /usr/bin/python3 - "$work/$name.json" <<'EOF' || fail "$name: --compare report"
import json, sys
r = json.load(open(sys.argv[1]))
rows = {x["name"]: x for x in r["rows"]}
assert list(rows) == ["pytorch", "heuristics", "ilp", "roam"], list(rows)
lb, pers = r["lower_bound"], r["persistent_bytes"]
assert 0 < pers <= lb, (pers, lb)
torch = rows["pytorch"]["actual_peak"]
for name, x in rows.items():
    th, act = x["theoretical_peak"], x["actual_peak"]
    # no order beats the bound; no layout beats its order
    assert lb <= th <= act, (name, lb, th, act)
    assert abs(x["fragmentation_percent"] - 100.0 * (act - th) / th) < 1e-6, name
    assert abs(x["reduction_vs_pytorch_percent"] - 100.0 * (torch - act) / torch) < 1e-6, name
    assert x["seconds"] >= 0, name
roam = rows["roam"]["actual_peak"]
assert all(roam <= x["actual_peak"] for x in rows.values()), "ROAM above another method"
# eager PyTorch holds gradients: its theoretical peak is not below program order's
assert rows["pytorch"]["theoretical_peak"] >= rows["roam"]["theoretical_peak"]
EOF
  "$roamc" check "$model" "$work/$name.plan.json" > /dev/null || fail "$name: roamc check of the --compare plan"
  if test_check_plan "$check_py"; then
    test_check_plan_py "$check_py" "$model" "$work/$name.plan.json" > /dev/null \
        || fail "$name: check_plan.py of the --compare plan"
  fi
  [ "$TEST_FAILS" != "$failed_before" ] || pass "$name --compare"
done

# 2. bench.py on those two models writes every table, and its headline agrees
#    with the CSV.
/usr/bin/python3 "$here/bench/bench.py" --roamc "$roamc" --models "$work/models" \
    --out "$work/results" --time-limit 2 > "$work/bench.out" 2> "$work/bench.err" \
    || fail_now "bench.py: $(tail -n 5 "$work/bench.err")"
failed_before=$TEST_FAILS
for f in results.csv fig11_actual.md fig12_theoretical.md headroom.md table1_fragmentation.md \
         time.md summary.md time_vs_operators.dat time_vs_operators.gp; do
  [ -s "$work/results/$f" ] || fail "bench.py wrote no $f"
done
grep -q "Models: 2, 2 planned, 0 failed" "$work/results/summary.md" || fail "summary: $(cat "$work/results/summary.md")"
/usr/bin/python3 - "$work/results" <<'EOF' || fail "bench.py headline does not match its CSV"
import csv, os, re, sys
d = sys.argv[1]
rows = list(csv.DictReader(open(os.path.join(d, "results.csv"))))
assert len(rows) == 8, len(rows)
act = {(r["model"], r["method"]): int(r["actual_peak"]) for r in rows}
lb = {r["model"]: int(r["lower_bound"]) for r in rows}
models = sorted(lb)
red = lambda a, b: 100.0 * (a - b) / a
mean = lambda xs: sum(xs) / len(xs)
want_pt = mean([red(act[m, "pytorch"], act[m, "roam"]) for m in models])
want_cap = mean([red(act[m, "pytorch"], lb[m]) for m in models])
text = open(os.path.join(d, "summary.md")).read()
got_pt = float(re.search(r"actual peak vs PyTorch: \*\*([-0-9.]+)%", text).group(1))
got_cap = float(re.search(r"mean: \*\*([-0-9.]+)%\*\* vs PyTorch", text).group(1))
assert abs(got_pt - want_pt) < 0.006 and abs(got_cap - want_cap) < 0.006, (got_pt, want_pt, got_cap, want_cap)
assert got_cap >= got_pt - 0.006, "ROAM saved more than the bound allows"
EOF
[ "$TEST_FAILS" != "$failed_before" ] || pass "bench.py on 2 models"
test_finish test_bench
