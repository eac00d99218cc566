#!/bin/sh
# roamc --fit (issue 27): a step that does not fit its budget, changed by
# recomputing or offloading what the backward pass reads.
#
# usage: test_fit_step.sh ROAMC CHECK_PLAN_PY SRC_DIR WORK_DIR
#
# - a small MLP with dropout (tests/fit_mlp_module.py, exported by
#   models/export.py) fitted with --fit=recompute, =offload and =both: each
#   changed step's plan passes check_plan.py and roamc check, and
#   models/run_plan.py --reference runs it in an arena of exactly its peak,
#   bit for bit equal to the unchanged step run eagerly (a recomputed dropout
#   keeps its mask);
# - a step that already fits is not changed (the step written is the input);
# - a budget below what any change reaches: "cannot fit: needs at least N B",
#   exit 3, no file written;
# - --max-batch --fit finds a larger batch than the plan alone;
# - over 12 budgets from the MLP's peak down to the least --fit reaches:
#   every fitted arena is within its budget and the added time never falls
#   as the budget falls;
# - bad options get a message and exit 2.
. "$(dirname "$0")/lib.sh"
test_usage 4 4 "ROAMC CHECK_PLAN_PY SRC_DIR WORK_DIR" "$@"
ROAMC=$1 CHECK=$2 SRC=$3 W=$4
test_need_python "torch, onnx" "the exporter and the runner"
test_check_plan_runs "$CHECK" || { echo "SKIP: $CHECK cannot run"; exit 77; }
PY=/usr/bin/python3
rm -rf "$W" && mkdir -p "$W"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# peak FIELD PLAN: one member of the plan's "peak"
peak() { $PY -c "import json,sys; print(json.load(open(sys.argv[2]))['peak'][sys.argv[1]])" "$1" "$2"; }

$PY "$SRC/models/export.py" --module "$SRC/tests/fit_mlp_module.py:make" --batch 64 \
    -o "$W/mlp.onnx" -q || { fail "export"; test_finish test_fit_step "$failures" 1; }
"$ROAMC" "$W/mlp.onnx" -q -o "$W/mlp.json" || fail "plan of the unchanged step"
actual=$(peak actual "$W/mlp.json")

# each mode, at a budget it reaches (found by stepping down from the peak)
for mode in recompute offload both; do
    step "--fit=$mode: the budget it reaches, plan, run_plan.py"
    b=$actual fitted=""
    while [ "$b" -gt 0 ]; do
        b=$((b - 4096))
        if "$ROAMC" "$W/mlp.onnx" --budget "$b" --fit="$mode" --emit-train "$W/$mode.onnx" \
            -o "$W/$mode.json" >"$W/$mode.out" 2>&1; then fitted=$b; else break; fi
    done
    [ -n "$fitted" ] || { fail "$mode: no budget below the peak fits"; continue; }
    "$ROAMC" "$W/mlp.onnx" --budget "$fitted" --fit="$mode" --emit-train "$W/$mode.onnx" \
        -o "$W/$mode.json" >"$W/$mode.out" 2>&1 || fail "$mode: budget $fitted"
    grep -q "fits changed" "$W/$mode.out" || fail "$mode: report does not say the step changed"
    [ "$(peak actual "$W/$mode.json")" -le "$fitted" ] || fail "$mode: arena above the budget"
    test_check_plan_py "$CHECK" "$W/$mode.onnx" "$W/$mode.json" | grep -q '^VALID' || fail "$mode: check_plan.py"
    "$ROAMC" check "$W/$mode.onnx" "$W/$mode.json" | grep -q '^VALID' || fail "$mode: roamc check"
    $PY "$SRC/models/run_plan.py" "$W/$mode.onnx" "$W/$mode.json" --reference "$W/mlp.onnx" \
        >"$W/$mode.run" 2>&1 || { cat "$W/$mode.run"; fail "$mode: run_plan.py"; }
    grep -q '^MATCH' "$W/$mode.run" || fail "$mode: run_plan.py does not say MATCH"
    echo "$mode: fits $fitted B (unchanged $actual B): $(grep 'fit values' "$W/$mode.out")"
done
grep -q 'roamc_recompute' "$W/recompute.onnx" || fail "recompute: no roamc_recompute node"
grep -q 'Reload' "$W/offload.onnx" || fail "offload: no Reload node"
grep -q 'host_buffers' "$W/offload.json" || fail "offload: no host_buffers in the plan"
# a recomputed dropout keeps its mask: the recompute step clones native_dropout
$PY -c "
import onnx, sys
m = onnx.load(sys.argv[1])
ok = any(n.op_type == 'native_dropout' and any(a.name == 'roamc_recompute' for a in n.attribute)
         for n in m.graph.node)
sys.exit(0 if ok else 1)" "$W/recompute.onnx" || echo "NOTE: no dropout was recomputed at this budget"

# already fits: nothing changes, the step written is the model itself
"$ROAMC" "$W/mlp.onnx" --budget "$actual" --fit --emit-train "$W/same.onnx" -o "$W/same.json" \
    >"$W/same.out" 2>&1 || fail "already fits: exit $?"
grep -q "fits unchanged" "$W/same.out" || fail "already fits: report"
cmp -s "$W/mlp.onnx" "$W/same.onnx" || fail "already fits: the step written differs from the model"
[ "$(peak actual "$W/same.json")" = "$actual" ] || fail "already fits: another arena"

# cannot fit: exit 3, the least reachable named, no file written
"$ROAMC" "$W/mlp.onnx" --budget 1000 --fit --emit-train "$W/no.onnx" -o "$W/no.json" \
    >"$W/no.out" 2>&1
rc=$?
[ "$rc" = 3 ] || fail "cannot fit: exit $rc, not 3"
grep -q "cannot fit: needs at least [0-9]* B" "$W/no.out" || fail "cannot fit: message"
[ ! -e "$W/no.onnx" ] && [ ! -e "$W/no.json" ] || fail "cannot fit: a file was written"

# monotone: 12 budgets from the MLP's peak down to its least (the four
# models of tests/bench/results/fit.md are swept by tests/bench/fit_bench.sh)
"$ROAMC" "$W/mlp.onnx" --budget 1 --fit --report json >"$W/least.json" 2>/dev/null
floor=$($PY -c "import json,sys; print(json.load(open(sys.argv[1]))['fit']['least'])" "$W/least.json") ||
    fail "the least arena of --fit"
top=$actual last_time=-1 i=0
while [ $i -le 11 ] && [ -n "$floor" ]; do
    b=$((floor + (top - floor) * (11 - i) / 11))
    "$ROAMC" "$W/mlp.onnx" --budget "$b" --fit --report json >"$W/sweep.$i.json" 2>"$W/sweep.$i.err"
    rc=$?
    [ "$rc" = 0 ] || fail "budget $b (between the peak and the least): exit $rc"
    t=$($PY -c "
import json, sys
f = json.load(open(sys.argv[1]))['fit']
need = f['actual_after'] if 'actual_after' in f else f['actual_before']
assert need <= int(sys.argv[2]), (need, sys.argv[2])
print(f.get('added_seconds', 0.0))" "$W/sweep.$i.json" "$b") || { fail "budget $b: over"; break; }
    $PY -c "import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) else 1)" "$t" "$last_time" ||
        fail "added time fell from $last_time to $t s as the budget fell to $b"
    last_time=$t i=$((i + 1))
done
echo "monotone: $i budgets from $top B down to $floor B, added time at the least $last_time s"

# --max-batch --fit: a larger batch than the plan alone fits, at no more
# than --max-overhead, beside PyTorch's
$PY "$SRC/models/export.py" --module "$SRC/tests/fit_mlp_module.py:make" --symbolic-batch \
    -o "$W/mlp_bsym.onnx" -q || fail "export --symbolic-batch"
"$ROAMC" "$W/mlp_bsym.onnx" --budget 4MiB --max-batch --fit --max-overhead 50% --report json \
    >"$W/batch.json" 2>"$W/batch.err" || fail "--max-batch --fit: exit $?"
$PY -c "
import json, sys
r = json.load(open(sys.argv[1]))
fit, torch = r['max_batch']['plan'], r['max_batch']['pytorch']
rows = [x for x in r['rows'] if 'fit' in x['plan']]
assert fit > torch, (fit, torch)
assert rows and all(x['plan']['fit']['added_percent'] <= 50 or not x['plan']['fits'] for x in rows), rows
print('--max-batch --fit: batch', fit, 'against PyTorch', torch)" "$W/batch.json" ||
    fail "--max-batch --fit: no larger batch, or one over --max-overhead"

# bad options
expect_usage() {
    "$ROAMC" "$W/mlp.onnx" "$@" >"$W/bad.out" 2>&1
    rc=$?
    [ "$rc" = 2 ] || fail "roamc $*: exit $rc, not 2"
    [ -s "$W/bad.out" ] || fail "roamc $*: no message"
}
expect_usage --fit
expect_usage --budget 1GB --fit -o "$W/x.json"
expect_usage --budget 1GB --fit=sideways
expect_usage --budget 1GB --fit --max-overhead lots
expect_usage --budget 1GB --fit --device nosuchgpu
expect_usage --budget 1GB --max-overhead 10%
expect_usage --budget 1GB --fit --compare
expect_usage --budget 1GB --fit --max-batch -o "$W/x.json"

test_finish test_fit_step "$failures" 1
