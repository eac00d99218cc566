#!/bin/bash
# Control flow counted (issue 29): tests/control_flow_cases.py writes models
# whose memory sits in If/Loop/Scan bodies and a model-local function, and
# checks how roamc counts each body's working memory (bytes worked out by
# hand); tests/shape_oracle.py compares every value, those inside the If
# branches ONNX Runtime takes included, with ONNX Runtime; every model is
# planned, the plan passes check_plan.py and `roamc check`, and its peak
# holds every initializer and Constant of the file, those inside bodies
# included (control_flow_cases.py --weights; issue 39).
#
# usage: tests/test_control_flow.sh ROAMC WORKDIR [CHECK_PLAN_PY]
# Exit 0 pass, 1 fail, 77 (SKIP) without /usr/bin/python3 with onnx, node or
# onnxruntime-node.
set -u

. "$(dirname "$0")/lib.sh"
test_usage 2 3 "ROAMC WORKDIR [CHECK_PLAN_PY]" "$@"
ROAMC=$1
WORK=$2
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$HERE")
CHECK=${3:-$REPO/../shared/tools/check_plan.py}
PY=/usr/bin/python3

"$PY" -c 'import onnx' 2>/dev/null || skip "/usr/bin/python3 cannot import onnx"
command -v node >/dev/null 2>&1 || skip "node is not installed"
[ -d "$REPO/node_modules/onnxruntime-node" ] ||
    skip "onnxruntime-node is not installed (cd $REPO && npm install --ignore-scripts)"
[ -x "$ROAMC" ] || fail_now "roamc binary $ROAMC not found or not executable"
mkdir -p "$WORK" || fail_now "cannot make $WORK"

"$PY" "$HERE/control_flow_cases.py" "$WORK" "$ROAMC" || fail "control_flow_cases.py: working memory counted wrong"
"$PY" "$HERE/shape_oracle.py" "$ROAMC" "$WORK" || fail "shape_oracle.py: roamc's shapes differ from ONNX Runtime's"

have_check=1
test_check_plan "$CHECK" || have_check=0
models=$("$PY" -c '
import json, sys
for m in json.load(open(sys.argv[1]))["models"]:
    print("\t".join([m["name"], " ".join(m["roamc_args"])]))
' "$WORK/corpus.json") || fail_now "cannot read corpus.json"
planned=0
while IFS=$'\t' read -r name bind; do
    model=$WORK/$name.onnx plan=$WORK/$name.plan.json
    # shellcheck disable=SC2086  # bindings are words without spaces
    if ! "$ROAMC" "$model" $bind -o "$plan" -q; then
        fail "plan $name: roamc failed"; continue
    fi
    shapes=$(printf '%s' "$bind" | sed -E 's/--input-shape [^ =]+=( |$)//g')
    # shellcheck disable=SC2086
    if [ $have_check = 1 ] && ! "$PY" "$CHECK" "$model" "$plan" $shapes --quiet; then
        fail "plan $name: check_plan.py rejected it"; continue
    fi
    # shellcheck disable=SC2086
    if ! "$ROAMC" check "$model" "$plan" $bind >/dev/null; then
        fail "plan $name: roamc check rejected it"; continue
    fi
    if ! "$PY" "$HERE/control_flow_cases.py" --weights "$model" "$plan"; then
        fail "plan $name: the peak does not hold the file's weights"; continue
    fi
    planned=$((planned + 1))
done <<< "$models"
pass "$planned plans valid"
test_finish test_control_flow
