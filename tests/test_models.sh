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
rm -f "$work/plans.list"
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
    # check_plan.py: every plan in one process, below
    [ $have_py = 1 ] && test_plan_line "$work/plans.list" "$what" "$model" "$plan"
    pass "$what: $(echo "$out" | sed 's/^VALID [^:]*: //')"
    passed=$((passed + 1))
  done
done
if [ $have_py = 1 ] && [ -s "$work/plans.list" ]; then
  step "check_plan.py on the $(wc -l < "$work/plans.list") plans"
  if ! test_check_plans "$check_py" "$work/plans.list" > "$work/plans.check" 2>&1; then
    # each failed check: its tag, then its output up to the next check
    awk '/^== .*: FAILED/ {on = 1; print; next} /^== / {on = 0} on' "$work/plans.check" | head -60
    n=$(grep -c '^== .*: FAILED' "$work/plans.check")
    fail "check_plan.py rejects $n plans"
    passed=$((passed - n))
  fi
fi
rm -f "$work"/*.json "$work/plans.list"
echo "$passed passed, $TEST_FAILS failed"
test_finish test_models
