#!/usr/bin/env bash
# Plans every committed model (models/*.onnx) with each given order:layout
# pair; every plan must pass `roamc check` and shared/tools/check_plan.py.
# usage: test_models.sh ROAMC CHECK_PLAN_PY MODEL_DIR WORK_DIR "ORDER:LAYOUT ..." [MODEL_GLOB] [-- ROAMC_ARGS...]
set -u
roamc=$1 check_py=$2 models=$3 work=$4 pairs=$5
shift 5
glob="*.onnx"
if [ $# -gt 0 ] && [ "$1" != "--" ]; then glob=$1; shift; fi
[ $# -gt 0 ] && [ "$1" = "--" ] && shift
extra=("$@")
mkdir -p "$work"
. "$(dirname "$0")/lib.sh"
have_py=1
if ! test_check_plan_runs "$check_py"; then
  have_py=0
  echo "SKIP: check_plan.py steps (needs /usr/bin/python3 with python3-onnx and $check_py)"
fi
passed=0 failed=0
shopt -s nullglob
files=("$models"/$glob)
[ ${#files[@]} -gt 0 ] || { echo "no models match $models/$glob"; exit 1; }
for model in "${files[@]}"; do
  name=$(basename "$model" .onnx)
  for pair in $pairs; do
    order=${pair%%:*} layout=${pair#*:}
    plan="$work/$name.$order.$layout.json"
    what="$name --order $order --layout $layout"
    if ! out=$("$roamc" "$model" -o "$plan" --order "$order" --layout "$layout" "${extra[@]}" -q 2>&1); then
      echo "FAIL $what: roamc: $out"; failed=$((failed + 1)); continue
    fi
    if ! out=$("$roamc" check "$model" "$plan" 2>&1); then
      echo "FAIL $what: roamc check: $out"; failed=$((failed + 1)); continue
    fi
    if [ $have_py = 1 ] && ! out=$(/usr/bin/python3 "$check_py" "$model" "$plan" 2>&1); then
      echo "FAIL $what: check_plan.py: $out"; failed=$((failed + 1)); continue
    fi
    echo "ok   $what: $(echo "$out" | sed 's/^VALID [^:]*: //')"
    passed=$((passed + 1))
    rm -f "$plan"
  done
done
echo "$passed passed, $failed failed"
test_finish test_models "$failed" "$have_py"
