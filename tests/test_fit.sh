#!/bin/sh
# Will it fit (--budget, --reserve, --max-batch, --method pytorch), end to end:
#   - budgets just at and just below a bundled model's known peak: exit 0 / 3,
#     and PyTorch's verdict beside the plan's (JSON);
#   - --method pytorch alone gives the --compare PyTorch row;
#   - bad budgets and combinations are usage errors (exit 2), with the reason;
#   - --max-batch on a model without a batch symbol says what to do (exit 2);
#   - on a batch-symbolic export (models/export.py --symbolic-batch): the
#     search is exact (batch B fits, B + 1 does not, both checked again by
#     planning them alone), the plan it writes passes both checkers, the
#     picture is well-formed, and the symbolic graph bound to a batch plans
#     byte for byte like the static export of that batch.
# usage: test_fit.sh ROAMC CHECK_PLAN_PY MODELS_DIR WORK_DIR   (77 = skipped)
set -u
. "$(dirname "$0")/lib.sh"
test_usage 4 4 "ROAMC CHECK_PLAN_PY MODELS_DIR WORK_DIR" "$@"
roamc=$1 checker=$2 models=$3 work=$4
py=/usr/bin/python3
mkdir -p "$work" && cd "$work" || fail_now "cannot make $work"
# expect STATUS GREP_PATTERN CMD...: exit status and a pattern of stderr+stdout
expect() {
    want=$1 pat=$2
    shift 2
    "$@" > out.txt 2>&1
    got=$?
    [ "$got" -eq "$want" ] || fail "exit $got, not $want: $*"
    [ -z "$pat" ] || grep -q -- "$pat" out.txt || fail "no '$pat' in the output of: $*"
}
json() { $py -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

m=$models/alexnet_b1.onnx
"$roamc" "$m" -q --report json > /dev/null || fail "plain plan"
"$roamc" "$m" --report json > plan.json || fail "plan report"
need=$(json plan.json 'd["actual_peak"]')
echo "alexnet_b1: plan needs $need B"
expect 0 "FITS by 0 B" "$roamc" "$m" --budget "$need"
expect 3 "DOES NOT FIT by 1 B" "$roamc" "$m" --budget $((need - 1))
expect 3 "" "$roamc" "$m" -q --budget $((need - 1))
expect 0 "reserve 1GiB" "$roamc" "$m" --budget $((need + 1073741824)) --reserve 1GiB
expect 3 "" "$roamc" "$m" -q --budget $((need + 1073741823)) --reserve 1GiB
# JSON: the same verdicts, PyTorch beside the plan
"$roamc" "$m" --budget "$need" --report json > fit.json
[ "$(json fit.json 'd["budget"]["plan"]["fits"]')" = True ] || fail "json: plan fits at its need"
[ "$(json fit.json 'd["budget"]["plan"]["margin"]')" = 0 ] || fail "json: margin 0 at its need"
[ "$(json fit.json 'd["budget"]["pytorch"]["fits"]')" = False ] || fail "json: PyTorch (more) does not fit"
# units, echoed exactly
expect 0 "16GiB = 17,179,869,184 B" "$roamc" "$m" --budget 16GiB
expect 0 "80GB = 80,000,000,000 B" "$roamc" "$m" --budget 80GB
expect 0 "1.5gib = 1,610,612,736 B" "$roamc" "$m" --budget 1.5gib

# --method pytorch is the --compare PyTorch row
"$roamc" "$m" --compare --time-limit 1 --report json > cmp.json
"$roamc" "$m" --method pytorch --report json > pt.json
[ "$(json cmp.json 'd["rows"][0]["actual_peak"]')" = "$(json pt.json 'd["pytorch_reserved"]')" ] ||
    fail "--method pytorch reserves $(json pt.json 'd["pytorch_reserved"]'), --compare's row $(json cmp.json 'd["rows"][0]["actual_peak"]')"
[ "$(json cmp.json 'd["rows"][0]["theoretical_peak"]')" = "$(json pt.json 'd["theoretical_peak"]')" ] ||
    fail "--method pytorch theoretical differs from --compare's row"

# usage errors, each with its reason
expect 2 "not a size" "$roamc" "$m" --budget -1
expect 2 "zero bytes" "$roamc" "$m" --budget 0
expect 2 "unknown unit 'XB'" "$roamc" "$m" --budget 12XB
expect 2 "unknown unit 'GG'" "$roamc" "$m" --budget 16GG
expect 2 "too large" "$roamc" "$m" --budget 18446744073709551616
expect 2 "too large" "$roamc" "$m" --budget 99999999999999999999999
expect 2 "must be below" "$roamc" "$m" --budget 1GiB --reserve 1GiB
expect 2 "needs --budget" "$roamc" "$m" --reserve 1GiB
expect 2 "needs --budget" "$roamc" "$m" --max-batch
expect 2 "not with --compare" "$roamc" "$m" --budget 1GiB --compare
expect 2 "one or the other" "$roamc" "$m" --method pytorch --order roam
expect 2 "choose from pytorch, heuristics, ilp, roam" "$roamc" "$m" --method torch
expect 2 "symbolic-batch" "$roamc" "$m" --budget 16GiB --max-batch
[ ! -e nofile.json ] || fail "a usage error left a file"

$py -c 'import torch, onnx' 2>/dev/null ||
    skip "the batch search needs /usr/bin/python3 with torch and onnx (Debian) to export a model"
$py "$models/export.py" --model mlp3 --symbolic-batch -o mlp3_bsym.onnx -q || fail "export --symbolic-batch"
$py "$models/export.py" --model mlp3 --batch 48 -o mlp3_b48.onnx -q || fail "export --batch 48"
# the symbolic graph bound to 48 plans like the static export at 48
"$roamc" mlp3_bsym.onnx --dim batch=48 -q -o sym48.json || fail "plan symbolic at 48"
"$roamc" mlp3_b48.onnx -q -o static48.json || fail "plan static 48"
$py - sym48.json static48.json <<'EOF' || fail "symbolic batch 48 plans differently from the static export"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
diff = [k for k in ("schedule", "buffers", "peak") if a[k] != b[k]]
sys.exit("differ: %s" % diff if diff else 0)
EOF
# a budget the plan fits at some batch in the hundreds (24 MiB)
budget=25165824
"$roamc" mlp3_bsym.onnx --budget $budget --max-batch --report json -o best.json --svg batch.svg > search.json ||
    fail_now "max-batch search"
b=$(json search.json 'd["max_batch"]["plan"]')
tb=$(json search.json 'd["max_batch"]["pytorch"]')
echo "mlp3 under $budget B: PyTorch fits batch $tb, the plan batch $b"
[ "$b" -gt 1 ] && [ "$b" -ge "$tb" ] || fail "max batch $b (PyTorch $tb)"
$py - search.json "$b" "$tb" <<'EOF' || fail "the table lacks the boundary rows"
import json, sys
d = json.load(open(sys.argv[1])); b, tb = int(sys.argv[2]), int(sys.argv[3])
rows = {r["batch"]: r for r in d["rows"]}
assert rows[b]["plan"]["fits"] and not rows[b + 1]["plan"]["fits"], "plan rows"
assert rows[tb]["pytorch"]["fits"] and not rows[tb + 1]["pytorch"]["fits"], "pytorch rows"
EOF
# planned alone, B fits and B + 1 does not
expect 0 "FITS" "$roamc" mlp3_bsym.onnx --dim batch="$b" --budget $budget
expect 3 "DOES NOT FIT" "$roamc" mlp3_bsym.onnx --dim batch=$((b + 1)) --budget $budget
expect 2 "binds every one" "$roamc" mlp3_bsym.onnx --dim batch=3 --budget 1GiB --max-batch
expect 2 "no symbolic dim 'seq'" "$roamc" mlp3_bsym.onnx --budget 1GiB --max-batch=seq
expect 3 "does not fit even batch 1" "$roamc" mlp3_bsym.onnx --budget 1MiB --max-batch
$py -c 'import sys, xml.dom.minidom as x; x.parse(sys.argv[1])' batch.svg || fail "batch.svg is not well-formed"
grep -q "budget" batch.svg || fail "batch.svg has no budget line"
"$roamc" check mlp3_bsym.onnx best.json --dim batch="$b" > /dev/null || fail "roamc check of the plan at batch $b"

test_check_plan "$checker" || test_finish test_fit
# check_plan.py sizes values from static shapes only: check the plan against
# the static export of that batch (the same graph, as shown above at 48)
$py "$models/export.py" --model mlp3 --batch "$b" -o "mlp3_b$b.onnx" -q || fail "export --batch $b"
test_check_plan_py "$checker" "mlp3_b$b.onnx" best.json > checker.txt 2>&1 || fail "check_plan.py rejects the plan at batch $b: $(tail -1 checker.txt)"
# and the batch-48 plans (the symbolic one is the static one, compared above)
test_check_plan_py "$checker" mlp3_b48.onnx static48.json > checker.txt 2>&1 || fail "check_plan.py rejects static48.json: $(tail -1 checker.txt)"
test_check_plan_py "$checker" mlp3_b48.onnx sym48.json > checker.txt 2>&1 || fail "check_plan.py rejects sym48.json against the static export: $(tail -1 checker.txt)"
test_finish test_fit
