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

command -v node >/dev/null 2>&1 || { echo "SKIP: node is not installed"; exit 77; }
[ -d "$REPO/node_modules/onnxruntime-node" ] ||
    { echo "SKIP: onnxruntime-node is not installed (cd $REPO && npm install --ignore-scripts)"; exit 77; }
test_need_python "torch, torchvision, onnx"
[ -x "$ROAMC" ] || { echo "FAIL: roamc binary $ROAMC not found or not executable"; exit 1; }

mkdir -p "$WORK" || exit 1
INDEX=$WORK/corpus.json
if [ ! "$INDEX" -nt "$REPO/models/corpus.py" ] || [ ! "$INDEX" -nt "$REPO/models/corpus_handbuilt.py" ]; then
    rm -f "$INDEX"
    "$PY" "$REPO/models/corpus.py" "$WORK" --quick || { echo "FAIL: models/corpus.py"; exit 1; }
fi

fail=0
"$PY" "$HERE/shape_oracle.py" "$ROAMC" "$WORK" || fail=1

[ -f "$CHECK" ] || echo "note: $CHECK not found; plans are checked by roamc check alone"
# one line per model: name, file, roamc's bindings, the --input-shape form
models=$("$PY" -c '
import json, sys
for m in json.load(open(sys.argv[1]))["models"]:
    shapes = " ".join("--input-shape " + s for s in m["input_shapes"])
    print("\t".join([m["name"], m["file"], " ".join(m["roamc_args"]), shapes]))
' "$INDEX") || exit 1
planned=0
while IFS=$'\t' read -r name file bind shapes; do
    model=$WORK/$file plan=$WORK/$name.plan.json
    # shellcheck disable=SC2086  # bindings are words without spaces
    "$ROAMC" "$model" $bind -o "$plan" --report json --time-limit 30 > "$WORK/$name.report.json"
    rc=$?
    if [ $rc -ne 0 ]; then
        echo "FAIL plan $name: roamc exited $rc"; fail=1; continue
    fi
    # roam's order is never worse than program order or LESCEA
    if ! "$PY" -c '
import json, sys
r = json.load(open(sys.argv[1])); o = r["ordering"]
sys.exit(0 if r["theoretical_peak"] <= min(o["theoretical_peak_program"], o["theoretical_peak_lescea"]) else 1)
' "$WORK/$name.report.json"; then
        echo "FAIL plan $name: roam's theoretical peak is above program order's or LESCEA's"; fail=1; continue
    fi
    # check_plan.py cannot parse a scalar's empty dims ("NAME="): a scalar
    # input's shape needs no binding, so it is left out
    shapes=$(printf '%s' "$shapes" | sed -E 's/--input-shape [^ =]+=( |$)//g')
    # shellcheck disable=SC2086
    if [ -f "$CHECK" ] && ! "$PY" "$CHECK" "$model" "$plan" $shapes --quiet; then
        echo "FAIL plan $name: check_plan.py rejected it"; fail=1; continue
    fi
    # shellcheck disable=SC2086
    if ! "$ROAMC" check "$model" "$plan" $bind >/dev/null; then
        echo "FAIL plan $name: roamc check rejected it"; fail=1; continue
    fi
    planned=$((planned + 1))
done <<< "$models"
echo "test_shapes_ort: $planned plans valid"

test_finish test_shapes_ort "$fail" "$(test_check_plan_runs "$CHECK" && echo 1 || echo 0)"
