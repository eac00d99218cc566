#!/usr/bin/env bash
# Plans every committed model (models/*.onnx) with each given order:layout
# pair; every plan must pass `roamc check` and shared/tools/check_plan.py.
# usage: test_models.sh ROAMC CHECK_PLAN_PY MODEL_DIR WORK_DIR "ORDER:LAYOUT ..." [MODEL_GLOB] [-- ROAMC_ARGS...]
set -u
. "$(dirname "$0")/lib.sh"
test_usage 5 999 "ROAMC CHECK_PLAN_PY MODEL_DIR WORK_DIR \"ORDER:LAYOUT ...\" [MODEL_GLOB] [-- ROAMC_ARGS...]" "$@"
roamc=$1 check_py=$2 models=$3 work=$4 pairs=$5
shift 5
glob="*.onnx"
if [ $# -gt 0 ] && [ "$1" != "--" ]; then glob=$1; shift; fi
[ $# -gt 0 ] && [ "$1" = "--" ] && shift
extra=("$@")
mkdir -p "$work" || fail_now "cannot make $work"
have_py=1
test_check_plan "$check_py" || have_py=0
passed=0
shopt -s nullglob
files=("$models"/$glob)
[ ${#files[@]} -gt 0 ] || fail_now "no models match $models/$glob"
for model in "${files[@]}"; do
  name=$(basename "$model" .onnx)
  for pair in $pairs; do
    order=${pair%%:*} layout=${pair#*:}
    plan="$work/$name.$order.$layout.json"
    what="$name --order $order --layout $layout"
    if ! out=$("$roamc" "$model" -o "$plan" --order "$order" --layout "$layout" "${extra[@]}" -q 2>&1); then
      fail "$what: roamc: $out"; continue
    fi
    if ! out=$("$roamc" check "$model" "$plan" 2>&1); then
      fail "$what: roamc check: $out"; continue
    fi
    if [ $have_py = 1 ] && ! out=$(test_check_plan_py "$check_py" "$model" "$plan" 2>&1); then
      fail "$what: check_plan.py: $out"; continue
    fi
    pass "$what: $(echo "$out" | sed 's/^VALID [^:]*: //')"
    passed=$((passed + 1))
    rm -f "$plan"
  done
done
echo "$passed passed, $TEST_FAILS failed"
test_finish test_models
