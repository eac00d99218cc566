#!/bin/sh
# Plans that run (issue 16): models/run_plan.py executes roamc's ROAM and
# program-order plans of an mlp3 export in one arena, bit for bit equal to
# eager program order; plans broken on purpose (a write reordered before a
# reader through a view, two live buffers overlapping) are rejected by
# roamc check, by check_plan.py and by the runner (with its guards, and
# with --trust-plan by the values alone); alexnet_b1 with node 171 before
# node 50 (the issue's case) is rejected by both checkers and by the
# runner; bad input exits 2.
#
# usage: test_run_plan.sh ROAMC CHECK_PLAN_PY MODELS_DIR WORKDIR
# Exit 77 (skipped) without /usr/bin/python3 with torch and onnx.
set -u
. "$(dirname "$0")/lib.sh"
test_usage 4 4 "ROAMC CHECK_PLAN_PY MODELS_DIR WORKDIR" "$@"
ROAMC=$1 CHECK=$2 MODELS=$3 W=$4
SRC=$(cd "$(dirname "$0")/.." && pwd)
PY=/usr/bin/python3
{ [ -x $PY ] && $PY -c 'import torch, onnx' 2>/dev/null; } || skip "needs /usr/bin/python3 with torch and onnx"
rm -rf "$W" && mkdir -p "$W" || fail_now "cannot make $W"
# checked STATUS TAG ARGS...: check_plan.py on ARGS wants exit STATUS.
# check_plan.py (../shared) may be absent from a clone: its steps are then
# skipped and the test ends as SKIP (77) rather than passing without them
checked() {
    test_check_plan "$CHECK" || return 0
    want=$1 tag=$2
    shift 2
    expect "$want" "$tag" test_check_plan_py "$CHECK" "$@"
}
# expect STATUS TAG CMD...: runs CMD, output into $W/TAG.out, wants exit STATUS
expect() {
    want=$1 tag=$2
    shift 2
    step "$tag"
    "$@" >"$W/$tag.out" 2>&1
    rc=$?
    if [ $rc -ne "$want" ]; then
        fail "$tag: exit $rc, want $want"
        sed 's/^/    /' "$W/$tag.out" | head -20
    fi
}
# has TAG TEXT: TEXT in the output of TAG
has() {
    grep -qF -- "$2" "$W/$1.out" || { fail "$1: no \"$2\" in:"; sed 's/^/    /' "$W/$1.out" | head -20; }
}

M=$W/mlp3.onnx
expect 0 export $PY "$SRC/models/export.py" --model mlp3 --batch 8 -o "$M"
expect 0 plan_roam "$ROAMC" "$M" -q -o "$W/roam.json"
expect 0 plan_program "$ROAMC" "$M" -q --order program -o "$W/program.json"
expect 0 run $PY "$SRC/models/run_plan.py" "$M" "$W/roam.json" "$W/program.json"
has run "MATCH $W/roam.json: loss,"
has run "MATCH $W/program.json: loss,"
# three training steps in one reused arena, each compared
expect 0 run_steps $PY "$SRC/models/run_plan.py" "$M" "$W/roam.json" --steps 3
has run_steps "MATCH $W/roam.json step 3: loss,"

# a write reordered before a reader (buffers made consistent with the new
# order, so only the values can tell)
expect 0 break_reorder $PY "$SRC/tests/break_plan.py" reorder "$M" "$W/roam.json" "$W/reorder.json"
expect 1 check_reorder "$ROAMC" check "$M" "$W/reorder.json"
has check_reorder "(addcdiv_) overwrites 'fc"
has check_reorder "(mm) reads that storage through the view 't_"
checked 1 py_reorder "$M" "$W/reorder.json"
expect 1 run_reorder $PY "$SRC/models/run_plan.py" "$M" "$W/reorder.json"
has run_reorder "MISMATCH"
has run_reorder ".weight differs"

# two live buffers at one offset: the guard, and the values alone
expect 0 break_overlap $PY "$SRC/tests/break_plan.py" overlap "$M" "$W/roam.json" "$W/overlap.json"
expect 1 check_overlap "$ROAMC" check "$M" "$W/overlap.json"
has check_overlap "overlap in address while both live"
checked 1 py_overlap "$M" "$W/overlap.json"
expect 1 run_overlap $PY "$SRC/models/run_plan.py" "$M" "$W/overlap.json"
has run_overlap "the plan broke a guard: step"
expect 1 run_overlap_trust $PY "$SRC/models/run_plan.py" "$M" "$W/overlap.json" --trust-plan
has run_overlap_trust "differs"

# the issue's case on alexnet_b1: Adam's addcdiv_ (node 171) before the
# backward mm (node 50) that reads the weight through t(weight)
if [ -f "$MODELS/alexnet_b1.onnx" ]; then
    A=$MODELS/alexnet_b1.onnx
    expect 0 plan_alexnet "$ROAMC" "$A" -q --order program --layout bestfit -o "$W/alexnet.json"
    expect 0 break_alexnet $PY "$SRC/tests/break_plan.py" reorder "$A" "$W/alexnet.json" "$W/alexnet_171.json" 171 50
    expect 1 check_alexnet "$ROAMC" check "$A" "$W/alexnet_171.json"
    has check_alexnet "node 171 (addcdiv_) overwrites 'net.classifier.1.weight' in place at step"
    has check_alexnet "before node 50 (mm) reads that storage through the view 't_49'"
    checked 1 py_alexnet "$A" "$W/alexnet_171.json"
    expect 1 run_alexnet $PY "$SRC/models/run_plan.py" "$A" "$W/alexnet_171.json"
    has run_alexnet "MISMATCH"
    has run_alexnet "addcdiv__81 differs"
else
    skip_part "$MODELS/alexnet_b1.onnx not found: the issue's case did not run"
fi

# bad input: exit 2
if [ -f "$MODELS/alexnet_b1.onnx" ]; then
    expect 2 run_other $PY "$SRC/models/run_plan.py" "$MODELS/alexnet_b1.onnx" "$W/roam.json"
    has run_other "was made for another model"
fi
printf '{not json' >"$W/garbage.json"
expect 2 run_garbage $PY "$SRC/models/run_plan.py" "$M" "$W/garbage.json"
has run_garbage "not a readable JSON plan"

[ "$TEST_FAILS" != 0 ] ||
    pass "plans run bit for bit equal to eager; broken plans rejected by roamc check, check_plan.py and the runner"
test_finish test_run_plan
