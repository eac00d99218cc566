# tests/lib.sh — what the shell tests share; sourced, never run:
#   . "$(dirname "$0")/lib.sh"
# Exit codes follow ctest: 0 pass, 1 fail, 2 bad usage, 77 SKIP.

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

# test_need_python "MODULE, ..." [WHY]: SKIP (77) unless Debian's
# /usr/bin/python3 imports the modules, e.g. test_need_python "onnx, numpy".
test_need_python() {
    /usr/bin/python3 -c "import $1" >/dev/null 2>&1 && return 0
    echo "SKIP: /usr/bin/python3 cannot import $1${2:+ ($2)}"
    exit 77
}

# test_check_plan_runs CHECK_PLAN_PY: true when shared/tools/check_plan.py
# is there and /usr/bin/python3 can run it (it needs onnx).
test_check_plan_runs() {
    [ -f "$1" ] && /usr/bin/python3 -c "import onnx" >/dev/null 2>&1
}

# test_finish NAME FAILURES CHECK_RAN: the verdict, and the exit: 1 when
# FAILURES is not 0; 77 (SKIP) when everything passed but CHECK_RAN is 0
# (check_plan.py's steps did not run): never a silent pass; else 0.
test_finish() {
    if [ "$2" != 0 ]; then
        echo "$1: FAILED"
        exit 1
    fi
    if [ "$3" = 0 ]; then
        echo "SKIP: $1: passed, but the check_plan.py steps did not run"
        exit 77
    fi
    echo "$1: passed"
    exit 0
}
