#!/bin/sh
# Pipeline stages (issue 28 item 4): roamc --pipeline-stages against the CPU harness.
#   - tests/bench/pipeline_check.py exports mlp3 (batch 32) and gpt2-tiny (batch 4, the
#     2-layer transformer), runs models/dist_harness.py --setup pipeline (2 stages, 1F1B,
#     M=4, gloo, one process a stage) and plans both stages of each, cut where the harness
#     cuts (--stage-cuts fc3 / h.1), with --method pytorch and roam; check_plan.py accepts
#     every plan; each stage's predicted peak (program order, the data held) is within 3%
#     of the harness's measured peak;
#   - balanced cuts (no --stage-cuts), gpipe, 3 stages: planned and checked; gpipe keeps
#     every microbatch in flight, 1F1B min(P-s, M); --budget takes the largest stage;
#   - --max-batch: the largest micro-batch at which every stage fits, against fixed batches;
#   - bad combinations exit 2 with a message and write nothing.
# usage: test_pipeline.sh ROAMC CHECK_PLAN_PY MODELS_DIR WORK_DIR   (77 = skipped)
set -u
. "$(dirname "$0")/lib.sh"
test_usage 4 4 "ROAMC CHECK_PLAN_PY MODELS_DIR WORK_DIR" "$@"
roamc=$1 checker=$2 models=$3 work=$4
py=/usr/bin/python3
test_need_python "torch, onnx" "models/export.py and models/dist_harness.py need them"
test_check_plan_runs "$checker" || { echo "SKIP: cannot run $checker"; exit 77; }
mkdir -p "$work" && cd "$work" || exit 1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

step "pipeline_check.py: stage peaks against the 2-stage 1F1B harness"
$py "$(dirname "$0")/bench/pipeline_check.py" "$roamc" "$checker" "$work" mlp3 gpt2-tiny ||
    fail "pipeline_check.py: predicted stage peaks against the harness"

# balanced cuts, gpipe and 1f1b, 2 and 3 stages: every stage written, planned and checked
for model in mlp3 gpt2-tiny; do
    step "$model: balanced cuts, gpipe and 1f1b, 2 and 3 stages"
    for setup in "2 1f1b 4" "3 gpipe 2" "3 1f1b 3"; do
        set -- $setup
        s=0
        while [ $s -lt "$1" ]; do
            l=${model}_p$1_$2_s$s
            "$roamc" "$model.onnx" --pipeline-stages "$1" --schedule "$2" --microbatches "$3" \
                --stage $s --emit-train "$l.onnx" -o "$l.json" --report json > "$l.rep" 2> "$l.err" ||
                { fail "$l"; cat "$l.err"; s=$((s + 1)); continue; }
            $py "$checker" "$l.onnx" "$l.json" > "$l.chk" 2>&1 || { fail "$l: check_plan.py"; tail -3 "$l.chk"; }
            $py - "$l.rep" "$1" "$2" "$3" "$s" <<'PY' || fail "$l: report"
import json, sys
rep, P, sched, M, s = json.load(open(sys.argv[1])), int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
pp = rep["pipeline"]
assert pp["stages"] == P and pp["microbatches"] == M and pp["schedule"] == sched and pp["written"] == s
st = pp["per_stage"]
for k, x in enumerate(st):
    want = M if sched == "gpipe" else min(P - k, M)
    assert x["in_flight"] == want, (k, x["in_flight"], want)
    assert sum(x["split"].values()) == x["theoretical_peak"], x
assert pp["peak"] == max(x["theoretical_peak"] for x in st) == st[pp["largest"]]["theoretical_peak"]
assert rep["theoretical_peak"] == st[s]["theoretical_peak"]
assert st[0]["first_op"] == 0 and all(st[k]["first_op"] < st[k + 1]["first_op"] for k in range(P - 1))
PY
            s=$((s + 1))
        done
    done
done
# --budget: the largest stage's peak decides (exit 0 fits, 3 does not)
peak=$($py -c "import json; print(json.load(open('mlp3_p2_1f1b_s0.rep'))['pipeline']['peak'])")
"$roamc" mlp3.onnx --pipeline-stages 2 --microbatches 4 --budget $((peak * 2)) -q; rc=$?
[ $rc -eq 0 ] || fail "--budget twice the largest stage: exit $rc"
"$roamc" mlp3.onnx --pipeline-stages 2 --microbatches 4 --budget $((peak / 2)) -q; rc=$?
[ $rc -eq 3 ] || fail "--budget half the largest stage: exit $rc, want 3"

# --max-batch: the largest micro-batch at which every stage fits --budget (per device).  The
# search (a batch-symbolic export, every stage planned at each batch) against fixed-batch
# exports at the largest batch and the one above: the same largest stage's theoretical peak,
# the same PyTorch need (the stage that needs most), and --budget's verdict agrees (exit 0
# fits, 3 does not).
BUDGET=12MB
$py "$models/export.py" --model mlp3 --symbolic-batch -o mlp3_bsym.onnx -q || fail "export mlp3 --symbolic-batch"
"$roamc" mlp3_bsym.onnx --max-batch --budget $BUDGET --pipeline-stages 2 --microbatches 4 \
    --report json > mb.rep 2> mb.err || { fail "--max-batch --pipeline-stages"; cat mb.err; }
best=$($py -c "import json,sys; r=json.load(open('mb.rep')); assert r['pipeline']['stages']==2; print(r['max_batch']['plan'])") ||
    { fail "--max-batch --pipeline-stages: report"; best=0; }
if [ "$best" -ge 1 ]; then
    for b in $best $((best + 1)); do
        $py "$models/export.py" --model mlp3 --batch $b -o mlp3_b$b.onnx -q || fail "export b$b"
        "$roamc" mlp3_b$b.onnx --pipeline-stages 2 --microbatches 4 --budget $BUDGET --report json > mbd_$b.rep 2>&1
        rc=$?
        want=0; [ $b -gt $best ] && want=3
        [ $rc -eq $want ] || fail "--pipeline-stages --budget $BUDGET at batch $b: exit $rc, want $want"
        $py - mb.rep mbd_$b.rep $b <<'PY' || fail "--max-batch --pipeline-stages: batch $b"
import json, sys
search, direct, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
row = [r for r in search["rows"] if r["batch"] == b]
assert row, "batch %d not tried" % b
row = row[0]
assert row["plan"]["theoretical_peak"] == direct["theoretical_peak"], (row["plan"], direct["theoretical_peak"])
assert row["pytorch"]["needs"] == direct["budget"]["pytorch"]["needs"], (row["pytorch"], direct["budget"])
print("--max-batch --pipeline-stages 2: batch %d, search %d B = largest stage %d B (PyTorch %d B)" % (
    b, row["plan"]["theoretical_peak"], direct["theoretical_peak"], row["pytorch"]["needs"]))
PY
    done
else
    fail "--max-batch --pipeline-stages: batch $best"
fi

# bad combinations: exit 2, one message, nothing written
bad() {
    want=$1
    shift
    rm -f bad.json bad.onnx
    "$roamc" mlp3.onnx "$@" > bad.txt 2>&1
    rc=$?
    [ $rc -eq 2 ] && grep -q -- "$want" bad.txt && [ ! -e bad.json ] && [ ! -e bad.onnx ] ||
        { fail "roamc $* (exit $rc): want exit 2 and '$want'"; cat bad.txt; }
}
bad "not '0'" --pipeline-stages 0
bad "fewer than the stages" --pipeline-stages 50 --emit-train bad.onnx -o bad.json
bad "is not a stage of --pipeline-stages 2" --pipeline-stages 2 --stage 5
bad "with --shard" --pipeline-stages 2 --shard ddp --world 2
bad "need --pipeline-stages" --microbatches 4
bad "is no module" --pipeline-stages 2 --stage-cuts nope --emit-train bad.onnx -o bad.json
bad "needs 2" --pipeline-stages 3 --stage-cuts fc3
bad "1f1b or gpipe" --pipeline-stages 2 --schedule pipedream
bad "needs --emit-train" --pipeline-stages 2 -o bad.json
bad "not with --fit" --pipeline-stages 2 --budget 1GB --fit
bad "writes no plan or step" --pipeline-stages 2 --budget 1GB --max-batch -o bad.json
test_finish test_pipeline "$fails" 1
