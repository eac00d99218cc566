#!/bin/bash
# roamc's shape inference against ONNX Runtime, and plans of ONNX files that
# follow no convention of ours, on the --quick corpus of models/corpus.py.
#
# usage: tests/test_shapes_ort.sh ROAMC WORKDIR [CHECK_PLAN_PY]
#
# 1. writes the --quick corpus into WORKDIR (kept while WORKDIR/corpus.json
#    is newer than models/corpus.py and models/corpus_handbuilt.py);
# 2. tests/shape_oracle.py: every value's type and shape from `roamc shapes`
#    equals what ONNX Runtime computes (upper bounds: not below it);
# 3. every model is planned (`roamc MODEL <bindings> -o PLAN -q`) and the
#    plan passes shared/tools/check_plan.py and `roamc check`.
# Exit 0 pass, 1 fail, 77 (SKIP) without node, onnxruntime-node (npm install
# --ignore-scripts in the repository root) or /usr/bin/python3 with torch.
set -u

. "$(dirname "$0")/lib.sh"
test_usage 2 3 "ROAMC WORKDIR [CHECK_PLAN_PY]" "$@"
ROAMC=$1
WORK=$2
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$HERE")
CHECK=${3:-$REPO/../shared/tools/check_plan.py}
PY=/usr/bin/python3

command -v node >/dev/null 2>&1 || skip "node is not installed"
[ -d "$REPO/node_modules/onnxruntime-node" ] ||
    skip "onnxruntime-node is not installed (cd $REPO && npm install --ignore-scripts)"
test_need_python "torch, torchvision, onnx"
[ -x "$ROAMC" ] || fail_now "roamc binary $ROAMC not found or not executable"

mkdir -p "$WORK" || fail_now "cannot make $WORK"
INDEX=$WORK/corpus.json
if [ ! "$INDEX" -nt "$REPO/models/corpus.py" ] || [ ! "$INDEX" -nt "$REPO/models/corpus_handbuilt.py" ]; then
    rm -f "$INDEX"
    step "models/corpus.py --quick: the corpus, once per checkout"
    "$PY" "$REPO/models/corpus.py" "$WORK" --quick || fail_now "models/corpus.py"
fi

step "shape_oracle.py: roamc's shapes against ONNX Runtime's"
"$PY" "$HERE/shape_oracle.py" "$ROAMC" "$WORK" || fail "shape_oracle.py: roamc's shapes differ from ONNX Runtime's"

# without check_plan.py, plans are checked by roamc check alone (and the test ends SKIP)
have_check=1
test_check_plan "$CHECK" || have_check=0
# one line per model: name, file, roamc's bindings, the --input-shape form
models=$("$PY" -c '
import json, sys
for m in json.load(open(sys.argv[1]))["models"]:
    shapes = " ".join("--input-shape " + s for s in m["input_shapes"])
    print("\t".join([m["name"], m["file"], " ".join(m["roamc_args"]), shapes]))
' "$INDEX") || fail_now "cannot read $INDEX"
planned=0
while IFS=$'\t' read -r name file bind shapes; do
    model=$WORK/$file plan=$WORK/$name.plan.json
    # shellcheck disable=SC2086  # bindings are words without spaces
    "$ROAMC" "$model" $bind -o "$plan" --report json --time-limit 30 > "$WORK/$name.report.json"
    rc=$?
    if [ $rc -ne 0 ]; then
        fail "plan $name: roamc exited $rc"; continue
    fi
    # roam's order is never worse than program order or LESCEA
    if ! "$PY" -c '
import json, sys
r = json.load(open(sys.argv[1])); o = r["ordering"]
sys.exit(0 if r["theoretical_peak"] <= min(o["theoretical_peak_program"], o["theoretical_peak_lescea"]) else 1)
' "$WORK/$name.report.json"; then
        fail "plan $name: roam's theoretical peak is above program order's or LESCEA's"; continue
    fi
    # check_plan.py cannot parse a scalar's empty dims ("NAME="): a scalar
    # input's shape needs no binding, so it is left out
    shapes=$(printf '%s' "$shapes" | sed -E 's/--input-shape [^ =]+=( |$)//g')
    # shellcheck disable=SC2086
    if [ $have_check = 1 ] && ! test_check_plan_py "$CHECK" "$model" "$plan" $shapes --quiet; then
        fail "plan $name: check_plan.py rejected it"; continue
    fi
    # shellcheck disable=SC2086
    if ! "$ROAMC" check "$model" "$plan" $bind >/dev/null; then
        fail "plan $name: roamc check rejected it"; continue
    fi
    planned=$((planned + 1))
done <<< "$models"
pass "$planned plans valid"
test_finish test_shapes_ort
