# tests/lib.sh — what the shell tests share; sourced, never run:
# shellcheck shell=sh
#   . "$(dirname "$0")/lib.sh"
# POSIX sh (the tests run under sh and bash alike).
#
# One vocabulary for every shell test; exit codes follow ctest: 0 pass,
# 1 fail, 2 bad usage, 77 SKIP (SKIP_RETURN_CODE 77 in tests/CMakeLists.txt).
#   fail WHAT       a check failed: "FAIL: WHAT"; the test goes on and ends FAILED
#   fail_now WHAT   a check failed that the rest needs (no output to check): ends now, exit 1
#   skip WHY        the test cannot run here (no torch, no node, ...): "SKIP: WHY", exit 77,
#                   or exit 1 when a check already failed (a failure is never hidden)
#   skip_part WHY   some checks cannot run here: "SKIP: WHY"; the rest goes on, and a test
#                   that passes everything else ends SKIP (77), never a silent pass
#   pass WHAT       a check or a block of them passed: "ok   WHAT"
#   step WHAT       a long step starts: "--   WHAT (N s in)"
#   test_finish NAME  the verdict and the exit: 1 after any fail, else 77 after any
#                   skip_part, else 0
# A test counts in TEST_FAILS and TEST_SKIPS, so fail and skip_part must run in the
# test's own shell (not in a pipeline's subshell or $(...)).

TEST_FAILS=0
TEST_SKIPS=0

fail() {
    echo "FAIL: $*"
    TEST_FAILS=$((TEST_FAILS + 1))
}

fail_now() {
    fail "$@"
    test_finish "$(basename "$0" .sh)"
}

skip() {
    echo "SKIP: $*"
    [ "$TEST_FAILS" = 0 ] || test_finish "$(basename "$0" .sh)"
    exit 77
}

skip_part() {
    echo "SKIP: $*"
    TEST_SKIPS=$((TEST_SKIPS + 1))
}

pass() {
    echo "ok   $*"
}

# step WHAT: "--   WHAT (N s in)" before a step that takes a while, so that a
# test killed at its ctest TIMEOUT shows where it stood and how long the
# steps before took (ctest --output-on-failure prints a timed-out test's output).
_test_start=$(date +%s)
step() {
    echo "--   $* ($(($(date +%s) - _test_start)) s in)"
}

# test_usage COUNT_MIN COUNT_MAX "ARGS" "$@": exit 2 with "usage: $0 ARGS"
# unless the test got COUNT_MIN..COUNT_MAX arguments.
test_usage() {
    _min=$1 _max=$2 _args=$3
    shift 3
    if [ $# -lt "$_min" ] || [ $# -gt "$_max" ]; then
        echo "usage: $0 $_args" >&2
        exit 2
    fi
}

# test_need_python "MODULE, ..." [WHY]: skip (77) unless Debian's
# /usr/bin/python3 imports the modules, e.g. test_need_python "onnx, numpy".
test_need_python() {
    /usr/bin/python3 -c "import $1" >/dev/null 2>&1 && return 0
    skip "/usr/bin/python3 cannot import $1${2:+ ($2)}"
}

# test_check_plan_runs CHECK_PLAN_PY: true when shared/tools/check_plan.py
# is there and /usr/bin/python3 can run it (it needs onnx) and the schema
# check before it (test_check_plan_py; python3-jsonschema).
test_check_plan_runs() {
    [ -f "$1" ] && /usr/bin/python3 -c "import onnx, jsonschema" >/dev/null 2>&1
}

# test_check_plan_py CHECK_PLAN_PY MODEL PLAN [ARGS...]: the plan checks every
# test runs, in one command: PLAN against the plan file's JSON Schema
# (planner/plan.schema.json, by tests/plan_schema.py; "SCHEMA INVALID ..." and
# status 1 when it does not conform), then CHECK_PLAN_PY MODEL PLAN ARGS, whose
# output and status it gives.  For tests in tests/ (beside plan_schema.py).
test_check_plan_py() {
    /usr/bin/python3 "$_test_lib_dir/plan_schema.py" --check-plan "$@"
}
# test_check_plans CHECK_PLAN_PY LIST: test_check_plan_py for each line of LIST,
# in one Python process (plan_schema.py --check-plans: "== TAG: ok" or
# "== TAG: FAILED (exit N)" and the checker's output for each; status 1 when
# any failed).  Lines are added by test_plan_line.
test_check_plans() {
    /usr/bin/python3 "$_test_lib_dir/plan_schema.py" --check-plans "$@"
}
# test_plan_line LIST TAG MODEL PLAN [ARGS...]: one check for test_check_plans
test_plan_line() {
    _list=$1
    shift
    (
        IFS=$(printf '\t')
        echo "$*"
    ) >>"$_list"
}
# the test's folder, absolute: taken when the test sources this file, before it may cd
_test_lib_dir=$(cd "$(dirname "$0")" && pwd)

# test_check_plan CHECK_PLAN_PY: test_check_plan_runs, and when it cannot
# run, one skip_part saying so (once per test): the caller skips its
# check_plan.py steps and the test ends SKIP, not pass.
test_check_plan() {
    test_check_plan_runs "$1" && return 0
    if [ -z "${_test_check_plan_said:-}" ]; then
        skip_part "the check_plan.py steps (needs $1 and /usr/bin/python3 with python3-onnx and python3-jsonschema)"
        _test_check_plan_said=1
    fi
    return 1
}

# test_finish NAME [FAILURES [CHECK_RAN]]: the verdict, and the exit: 1 after
# any fail (or FAILURES not 0); 77 (SKIP) after any skip_part (or CHECK_RAN
# 0: check_plan.py's steps did not run): never a silent pass; else 0.
test_finish() {
    [ "${2:-0}" = 0 ] || TEST_FAILS=$((TEST_FAILS + 1))
    [ "${3:-1}" != 0 ] || TEST_SKIPS=$((TEST_SKIPS + 1))
    if [ "$TEST_FAILS" != 0 ]; then
        echo "$1: FAILED ($TEST_FAILS failed)"
        exit 1
    fi
    if [ "$TEST_SKIPS" != 0 ]; then
        echo "SKIP: $1: passed, but $TEST_SKIPS part(s) could not run here (SKIP lines above)"
        exit 77
    fi
    echo "$1: passed"
    exit 0
}
