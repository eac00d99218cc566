#!/bin/sh
# Issue 39, the command-line and report items, one block per item (the
# number in each block's title is the item's in the issue's "Smaller" list
# and the first bullet on silent runs); small models and short runs:
#   - a small MLP with dropout (tests/fit_mlp_module.py; mlp below: at batch
#     64) and mlp3, both exported with a symbolic batch by models/export.py.
# usage: test_cli_report.sh ROAMC SRC_DIR WORK_DIR
# Exit: 0 pass, 1 fail, 77 skipped (no /usr/bin/python3 with torch and onnx
# for the exports).
set -u
. "$(dirname "$0")/lib.sh"
test_usage 3 3 "ROAMC SRC_DIR WORK_DIR" "$@"
roamc=$(realpath "$1") src=$(realpath "$2") work=$3
py=/usr/bin/python3
test_need_python "torch, onnx" "models/export.py exports the test models"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || fail_now "cannot make $work"
# run NAME CMD...: stdout to NAME.out, stderr to NAME.err, status in $rc
run() {
    _n=$1
    shift
    "$@" >"$_n.out" 2>"$_n.err"
    rc=$?
}
mlp="mlpd_bsym.onnx --dim batch=64"
# json FILE EXPR: EXPR of the JSON in FILE (d)
json() { $py -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

echo "exporting the test models (torch, about 10 s each)"
$py "$src/models/export.py" --module "$src/tests/fit_mlp_module.py:make" --symbolic-batch -o mlpd_bsym.onnx -q ||
    fail_now "export of the MLP"
$py "$src/models/export.py" --model mlp3 --symbolic-batch -o mlp3_bsym.onnx -q ||
    fail_now "export of mlp3 with a symbolic batch"

# ---- time: the whole run's seconds under --fit, --shard, --pipeline-stages
for set in "--budget 1000 --fit" "--shard ddp --world 2" "--pipeline-stages 2 --microbatches 2"; do
    m=$mlp
    case $set in --pipeline*) m="mlp3_bsym.onnx --dim batch=8" ;; esac
    # shellcheck disable=SC2086
    run t "$roamc" $m $set --report json
    total=$(json t.out 'd["seconds"]["total"]' 2>/dev/null)
    $py -c "import sys; t = float(sys.argv[1]); sys.exit(0 if t > 0 else 1)" "${total:-0}" ||
        fail "time: seconds.total is ${total:-missing} under $set"
    # shellcheck disable=SC2086
    run t "$roamc" $m $set
    grep -q "^  time          0\.000 s" t.out && fail "time: the text says 0.000 s under $set"
done
[ "$TEST_FAILS" = 0 ] && pass "time: seconds.total and the time line count the run under --fit, --shard, --pipeline-stages"

# ---- MILP infeasible: no objective or bound where the MILP has none
# shellcheck disable=SC2086
run m "$roamc" $mlp --budget 1000 --fit
[ $rc = 3 ] || fail "MILP: a budget of 1000 B should not fit (exit $rc)"
line=$(grep "MILP" m.out)
case $line in
*infeasible*) ;;
*) fail "MILP: the MLP at 1000 B should make the MILP infeasible: $line" ;;
esac
echo "$line" | grep -q "ms" && fail "MILP: an infeasible MILP reports times: $line"
# shellcheck disable=SC2086
run m "$roamc" $mlp --budget 1000 --fit --report json
json m.out '"objective_seconds" not in d["fit"]["milp"] and "bound_seconds" not in d["fit"]["milp"]' |
    grep -q True || fail "MILP: the JSON gives an infeasible MILP an objective or a bound"
[ "$TEST_FAILS" = 0 ] && pass "MILP infeasible: said so, with no objective or bound"

# ---- by module: what no module owns is "(top level)", never "-"
# shellcheck disable=SC2086
run b "$roamc" $mlp
grep "by module" b.out | grep -q -- " - " && fail "by module: a module named '-': $(grep 'by module' b.out)"
grep "by module" b.out | grep -q "(top level) " || fail "by module: no (top level) group: $(grep 'by module' b.out)"
grep -q "module -," b.out && fail "by module: a largest storage in module '-'"
# shellcheck disable=SC2086
run b "$roamc" $mlp --report json
json b.out '[g["module"] for g in d["live_at_peak"]["by_module"]]' | grep -q "'-'" &&
    fail "by module: '-' in the JSON"
[ "$TEST_FAILS" = 0 ] && pass "by module: (top level) for the inputs no module owns"

# ---- pipeline stages: "(written)" only when written; "1 microbatch"
p="mlp3_bsym.onnx --dim batch=8 --pipeline-stages 2 --microbatches 1"
# shellcheck disable=SC2086
run p "$roamc" $p
[ $rc = 0 ] || fail "pipeline: exit $rc: $(cat p.err)"
grep -q "(written)" p.out && fail "pipeline: a stage '(written)' with nothing written"
grep -q "1 microbatches" p.out && fail "pipeline: '1 microbatches'"
grep -q "1 microbatch," p.out || fail "pipeline: no '1 microbatch,': $(grep set-up p.out)"
# shellcheck disable=SC2086
run p "$roamc" $p --emit-train st.onnx -o st.json
grep -q "(written)" p.out && [ -s st.json ] || fail "pipeline: the stage written is not said so"
[ "$TEST_FAILS" = 0 ] && pass "pipeline: (written) only with -o/--emit-train; 1 microbatch"

# ---- the --max-batch --fit table: every row as wide as the header, the
# fit column explained
run mb "$roamc" mlpd_bsym.onnx --budget 2MiB --max-batch --fit
[ $rc = 0 ] || fail "--max-batch --fit: exit $rc: $(cat mb.err)"
awk '/^ +batch +PyTorch/ { h = length($0); next }
     h && /^ +[0-9]+ / { n++; if (length($0) != h) bad++ }
     END { exit (n == 0 || bad > 0) }' mb.out ||
    fail "--max-batch --fit: table rows not as wide as the header: $(grep -E '^ +(batch|[0-9]+) ' mb.out | head -40)"
grep -qE '^ +[0-9]+ .* yes +\+[0-9.]+% ' mb.out || fail "--max-batch --fit: no fitted row with its added time"
grep -q "fit time .* in % of the unchanged step's" mb.out || fail "--max-batch --fit: the fit figure is not explained"
[ "$TEST_FAILS" = 0 ] && pass "--max-batch --fit: the table aligned, the fit column explained"

# ---- --max-batch --fit -o: the plan at the largest batch, of the step
# --emit-train writes there (changed), both checked; -o alone asks for it
run mo "$roamc" mlpd_bsym.onnx --budget 2MiB --max-batch --fit -o mb.json --emit-train mb_step.onnx
[ $rc = 0 ] && [ -s mb.json ] && [ -s mb_step.onnx ] || fail "--max-batch --fit -o: exit $rc: $(cat mo.err)"
best=$(grep "roamc --fit .*fits batch" mo.out | sed 's/.*fits batch \([0-9]*\).*/\1/')
grep -q "plan written  mb.json (batch .*of the step written to mb_step.onnx)" mo.out &&
    grep -q "step written  mb_step.onnx (batch .*changed by --fit)" mo.out ||
    fail "--max-batch --fit -o: the report does not say what was written: $(tail -3 mo.out)"
[ "$(json mb.json 'd["model"]')" = mb_step.onnx ] || fail "--max-batch --fit -o: the plan does not name the step"
run mc "$roamc" check mb_step.onnx mb.json
grep -q "^VALID" mc.out && grep -q "batch=$best\$" mc.out ||
    fail "--max-batch --fit -o: roamc check at batch $best: $(cat mc.out mc.err)"
json mb.json 'd["peak"]["actual"] <= 2 * 1024 * 1024' | grep -q True || fail "--max-batch --fit -o: the plan is over the budget"
rm -f mb2.json
run mo "$roamc" mlpd_bsym.onnx --budget 2MiB --max-batch --fit -o mb2.json
[ $rc = 2 ] && [ ! -e mb2.json ] && grep -q "needs --emit-train" mo.err || fail "--max-batch --fit -o without --emit-train: exit $rc, $(cat mo.err)"
[ "$TEST_FAILS" = 0 ] && pass "--max-batch --fit -o --emit-train: the plan of the changed step at batch $best, valid"

# ---- --fit=offload far below the peak: fits, exit 0, but says what it costs
# (more than the step's own time) and how to cap it
# shellcheck disable=SC2086
run fo "$roamc" $mlp --budget 155000 --fit=offload
pct=$(grep "fit time" fo.out | sed 's/.*(+\([0-9.]*\)%).*/\1/')
[ $rc = 0 ] && $py -c "import sys; sys.exit(0 if float(sys.argv[1]) > 100 else 1)" "${pct:-0}" ||
    fail "--fit=offload at 155000 B: exit $rc, added ${pct:-?}% (the case needs a fit adding over 100%)"
grep -q "^  fit warning   .*--max-overhead" fo.out || fail "--fit=offload: no 'fit warning' line in the report"
grep -q "^roamc: warning: --fit: .*--max-overhead" fo.err || fail "--fit=offload: no warning on stderr: $(cat fo.err)"
# shellcheck disable=SC2086
run fo "$roamc" $mlp --budget 155000 --fit=offload --max-overhead 1000%
[ $rc = 0 ] && ! grep -q "warning" fo.out fo.err || fail "--fit with --max-overhead: warned all the same"
# shellcheck disable=SC2086
run fo "$roamc" $mlp --budget 155000 --fit=offload --max-overhead 50%
[ $rc = 3 ] || fail "--fit=offload --max-overhead 50%: exit $rc, want 3"
[ "$TEST_FAILS" = 0 ] && pass "--fit adding ${pct}% of the step: a warning (report, stderr), exit 0; none under --max-overhead"

# ---- a --train plan without --emit-train records its --dim: explain and
# check derive the step from the plan alone
$py - <<'PY' 2>/dev/null || fail_now "torch.onnx.export of a forward module"
import torch, torch.nn as nn
class M(nn.Module):
    def __init__(s):
        super().__init__()
        s.enc = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 32))
        s.head = nn.Linear(32, 10)
    def forward(s, x):
        return s.head(s.enc(x))
torch.onnx.export(M(), (torch.randn(4, 16),), "fwd.onnx", input_names=["x"], output_names=["y"],
                  dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
PY
run tr "$roamc" fwd.onnx --train --dim batch=32 -q -o tp.json
[ $rc = 0 ] || fail "--train --dim batch=32 -o: exit $rc: $(cat tr.err)"
json tp.json '[(s["name"], s["value"]) for s in d["shapes"]["symbols"]]' | grep -q "('batch', 32)" ||
    fail "--train: the plan records no batch=32: $(json tp.json 'd["shapes"]')"
run tr "$roamc" explain tp.json
[ $rc = 0 ] && grep -q "bindings from the plan: --dim batch=32" tr.out || fail "explain of the --train plan: exit $rc: $(cat tr.err)"
run tr "$roamc" check fwd.onnx tp.json
[ $rc = 0 ] && grep -q "^VALID" tr.out || fail "check of the --train plan: exit $rc: $(cat tr.out tr.err)"
[ "$TEST_FAILS" = 0 ] && pass "--train without --emit-train: the plan records --dim batch=32; explain and check need nothing else"

# ---- silent runs: off a terminal, plain progress lines on stderr (one per
# --max-batch batch, no redrawing); SIGINT and SIGTERM print what was
# decided (each batch, the largest fitting so far), leave no output file,
# and end by the signal (130, 143 in a shell)
run lg "$roamc" mlpd_bsym.onnx --budget 1MiB --max-batch --fit
[ $rc = 0 ] || fail "log: --max-batch --fit: exit $rc"
grep -q "^roamc: --max-batch: batch 1: PyTorch .*, roamc's plan fits" lg.err ||
    fail "log: no line for batch 1 on stderr: $(head -3 lg.err)"
[ "$(grep -c '^roamc: --max-batch: batch [0-9]*:' lg.err)" -ge 5 ] || fail "log: fewer than 5 batch lines"
grep -v '^roamc: ' lg.err | grep -q . && fail "log: a stderr line without 'roamc: ': $(grep -v '^roamc: ' lg.err | head -2)"
tr -d '\n' <lg.err | grep -q "$(printf '[\r\033]')" && fail "log: carriage returns or escapes off a terminal"
# SIGINT once batch lines appear (a launcher gives roamc SIGINT's default
# action, which a shell's background job would have ignored)
$py - "$roamc" <<'PY' || fail "SIGINT during --max-batch --fit"
import os, signal, subprocess, sys
p = subprocess.Popen([sys.argv[1], "mlpd_bsym.onnx", "--budget", "2MiB", "--max-batch", "--fit",
                      "-o", "int.json", "--emit-train", "int.onnx"], stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
seen = []
for line in p.stderr:
    seen.append(line.decode())
    if "--max-batch: batch 16:" in seen[-1]:
        p.send_signal(signal.SIGINT)
        break
rest = p.stderr.read().decode()
p.wait()
err = "".join(seen) + rest
bad = []
if p.returncode != -signal.SIGINT: bad.append("ended %s, not by SIGINT" % p.returncode)
if "roamc: interrupted by SIGINT" not in rest: bad.append("no 'interrupted by SIGINT'")
if "largest fitting so far: PyTorch 16, roamc's plan 16" not in rest: bad.append("no standing after the interrupt")
left = [f for f in os.listdir(".") if f.startswith("int.")]
if left: bad.append("left %s" % left)
for b in bad: print("SIGINT: %s; stderr ends: %s" % (b, err[-400:]))
sys.exit(1 if bad else 0)
PY
"$roamc" mlpd_bsym.onnx --budget 2MiB --max-batch --fit -o term.json --emit-train term.onnx >term.out 2>term.err &
pid=$!
i=0
while ! grep -q "batch 16:" term.err && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
kill -TERM $pid
wait $pid
rc=$?
[ $rc = 143 ] && grep -q "^roamc: interrupted by SIGTERM" term.err && [ ! -e term.json ] && [ ! -e term.onnx ] ||
    fail "SIGTERM: status $rc, $(tail -2 term.err), $(ls term.*)"
ls -a | grep -q '\.tmp\.' && fail "a temporary file was left: $(ls -a | grep tmp)"
[ "$TEST_FAILS" = 0 ] && pass "off a terminal: a line per batch; SIGINT/SIGTERM: the standing, no file, status 130/143"

# ---- explain of a plan made in another folder, written below it: the model
# is found from the plan's folder up, from anywhere; the plan is unchanged
mkdir -p made/plans m elsewhere/deep && cp mlpd_bsym.onnx m/
(cd made && "$roamc" ../m/mlpd_bsym.onnx --dim batch=64 -q -o plans/p.json) || fail "explain: the plan in made/plans"
[ "$(json made/plans/p.json 'd["model"]')" = ../m/mlpd_bsym.onnx ] || fail "explain: the plan's model is not the path as given"
run ex sh -c "cd elsewhere/deep && '$roamc' explain ../../made/plans/p.json"
[ $rc = 0 ] && grep -q "live at peak" ex.out || fail "explain from another folder: exit $rc: $(cat ex.err)"
run ex sh -c "cd / && '$roamc' explain '$PWD/made/plans/p.json'"
[ $rc = 0 ] && grep -q "live at peak" ex.out || fail "explain from /: exit $rc: $(cat ex.err)"
[ "$TEST_FAILS" = 0 ] && pass "explain finds the model of a plan made in another folder"

test_finish test_cli_report
