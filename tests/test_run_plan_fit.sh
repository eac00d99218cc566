#!/bin/sh
# Changed steps that run (issue 27, "Proof that it computes the same"):
# tests/make_fit_step.py changes a models/export.py training step of a small
# MLP with dropout p = 0.3 (tests/fit_mlp_module.py) the way DESIGN.md's "A
# step that fits" says roamc's emitter will: recompute nodes (a chain of two
# saved activations, one of them a dropout), Offload/Reload of saved
# activations, and both.  roamc plans each, check_plan.py validates the plan
# and models/run_plan.py --reference runs it in an arena of exactly its
# actual peak (Offload a real copy to host memory outside the arena) and
# proves it bit for bit equal to eager PyTorch on the UNCHANGED step.
# Broken changes are caught: a recomputed dropout without roamc_recompute
# (or naming the wrong value) draws a new mask (MISMATCH); a Reload moved
# before its Offload or after its reader, and a read of an offloaded value
# after its device copy was freed, are rejected by check_plan.py and the
# runner; a device op reading a host value is rejected by the runner.
#
# Until roamc writes host_buffers itself, `make_fit_step.py plan fix-host`
# moves the Offload outputs roamc leaves in `buffers` into `host_buffers`
# (a no-op once roamc writes them); roamc check does not know host_buffers
# yet, so its verdicts are printed as NOTEs, not tested.
#
# usage: test_run_plan_fit.sh ROAMC CHECK_PLAN_PY WORKDIR   (77 = skipped)
. "$(dirname "$0")/lib.sh"
test_usage 3 3 "ROAMC CHECK_PLAN_PY WORKDIR" "$@"
ROAMC=$1 CHECK=$2 W=$3
SRC=$(cd "$(dirname "$0")/.." && pwd)
PY=/usr/bin/python3
test_need_python "torch, onnx" "the runner replays steps with torch"
check_ran=0
test_check_plan_runs "$CHECK" && check_ran=1
rm -rf "$W" && mkdir -p "$W"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
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
# checked STATUS TAG MODEL PLAN: check_plan.py's verdict (skipped without it)
checked() {
    [ $check_ran -eq 1 ] || { echo "SKIP: $2 (no $CHECK)"; return; }
    expect "$1" "$2" test_check_plan_py "$CHECK" "$3" "$4"
}
# note_roamc_check MODEL PLAN: roamc check's verdict, reported, not tested
note_roamc_check() {
    v=$("$ROAMC" check "$1" "$2" 2>&1 | head -1)
    echo "NOTE: roamc check $(basename "$2"): $v"
}
MK="$PY $SRC/tests/make_fit_step.py"
RUN="$PY $SRC/models/run_plan.py"

O=$W/dmlp.onnx
expect 0 export $PY "$SRC/models/export.py" --module "$SRC/tests/fit_mlp_module.py:make" --batch 8 -o "$O" -q
expect 0 plan_orig "$ROAMC" "$O" -q -o "$W/dmlp.json"
expect 0 run_orig $RUN "$O" "$W/dmlp.json"
has run_orig "MATCH $W/dmlp.json: loss,"

# fit NAME MAKE_ARGS...: change the step, plan it, host buffers as DESIGN.md
# wants, check the plan, run it against the unchanged step
fit() {
    name=$1
    shift
    expect 0 "make_$name" $MK step "$O" "$W/$name.onnx" "$@"
    expect 0 "plan_$name" "$ROAMC" "$W/$name.onnx" -q -o "$W/${name}_raw.json"
    expect 0 "host_$name" $MK plan fix-host "$W/$name.onnx" "$W/${name}_raw.json" "$W/$name.json"
    if grep -q "moved from buffers" "$W/host_$name.out"; then
        echo "NOTE: roamc left Offload outputs of $name in device buffers: $(cat "$W/host_$name.out")"
    fi
    checked 0 "check_$name" "$W/$name.onnx" "$W/$name.json"
    note_roamc_check "$W/$name.onnx" "$W/$name.json"
}

# (a) recompute a chain of two saved activations: relu_6 and the dropout
# made from it (both its outputs, the value and the mask, are saved)
fit rc --recompute relu_6,native_dropout_7_0
expect 0 run_rc $RUN "$W/rc.onnx" "$W/rc.json" --reference "$O"
has run_rc "MATCH $W/rc.json: loss,"
grep -q 'roamc_recompute' "$W/rc.onnx" || fail "rc.onnx: no roamc_recompute attribute"
# (b) offload/reload one saved activation
fit off --offload relu_2
expect 0 run_off $RUN "$W/off.onnx" "$W/off.json" --reference "$O"
has run_off "MATCH $W/off.json: loss,"
has run_off "host 2048 B"
# (c) both, two offloads; two steps in one reused arena and host memory
fit both --recompute native_dropout_7_0 --offload relu_2,native_dropout_3_0
expect 0 run_both $RUN "$W/both.onnx" "$W/both.json" --reference "$O" --steps 2
has run_both "MATCH $W/both.json step 2: loss,"

# a recomputed dropout without roamc_recompute draws a new mask
fit noattr --recompute native_dropout_7_0 --no-attr
expect 1 run_noattr $RUN "$W/noattr.onnx" "$W/noattr.json" --reference "$O"
has run_noattr "MISMATCH $W/noattr.json"
has run_noattr "fc2.weight differs"
# ... and so does one that names another forward value
fit wrongattr --recompute native_dropout_7_0 --attr-names native_dropout_3_0
expect 1 run_wrongattr $RUN "$W/wrongattr.onnx" "$W/wrongattr.json" --reference "$O"
has run_wrongattr "MISMATCH $W/wrongattr.json"
# ... a name the reference does not make: bad input
fit noname --recompute native_dropout_7_0 --attr-names no_such_value
expect 2 run_noname $RUN "$W/noname.onnx" "$W/noname.json" --reference "$O"
has run_noname "names 'no_such_value', which the reference step"

# a Reload moved before its Offload, or after its reader
expect 0 break_before $MK plan reload-before-offload "$W/off.onnx" "$W/off.json" "$W/before.json"
checked 1 check_before "$W/off.onnx" "$W/before.json"
[ $check_ran -eq 1 ] && has check_before "reads 'relu_2_host' before its producer runs"
expect 1 run_before $RUN "$W/off.onnx" "$W/before.json" --reference "$O"
has run_before "Reload) reads 'relu_2_host' before anything produced it"
expect 0 break_after $MK plan reload-after-reader "$W/off.onnx" "$W/off.json" "$W/after.json"
checked 1 check_after "$W/off.onnx" "$W/after.json"
[ $check_ran -eq 1 ] && has check_after "reads 'relu_2_rl' before its producer runs"
expect 1 run_after $RUN "$W/off.onnx" "$W/after.json" --reference "$O"
has run_after "threshold_backward) reads 'relu_2_rl' before anything produced it"

# a reader of the offloaded value after its device buffer ends at the Offload
fit keep --offload relu_2 --keep-reader relu_2
expect 0 run_keep $RUN "$W/keep.onnx" "$W/keep.json" --reference "$O"
has run_keep "MATCH $W/keep.json: loss,"
expect 0 break_free $MK plan free-after-offload "$W/keep.onnx" "$W/keep.json" "$W/free.json"
checked 1 check_free "$W/keep.onnx" "$W/free.json"
[ $check_ran -eq 1 ] && has check_free "tensor 'relu_2' is used at step"
expect 1 run_free $RUN "$W/keep.onnx" "$W/free.json" --reference "$O"
has run_free "reads 'relu_2' outside its buffer"
has run_free "its device copy freed: a reader after that must read its Reload"
# without the guards the freed (poisoned) bytes show in the values
expect 1 run_free_trust $RUN "$W/keep.onnx" "$W/free.json" --reference "$O" --trust-plan
has run_free_trust "MISMATCH $W/free.json"

# a device op reading a host value: the runner rejects the step
fit hostread --offload relu_2 --host-read relu_2
expect 1 run_hostread $RUN "$W/hostread.onnx" "$W/hostread.json" --reference "$O"
has run_hostread "reads 'relu_2_host', a host value"
# a host value left in a device buffer (roamc's raw plan, while it does so)
if grep -q "moved from buffers" "$W/host_off.out"; then
    checked 1 check_raw "$W/off.onnx" "$W/off_raw.json"
    expect 1 run_raw $RUN "$W/off.onnx" "$W/off_raw.json" --reference "$O"
    has run_raw "it belongs in host_buffers"
fi

# bad input: a reference that is another step
expect 0 export_mlp3 $PY "$SRC/models/export.py" --model mlp3 --batch 8 -o "$W/mlp3.onnx" -q
expect 2 run_foreign $RUN "$W/rc.onnx" "$W/rc.json" --reference "$W/mlp3.onnx"
has run_foreign "is not a changed version of the reference step"

test_finish test_run_plan_fit $fails $check_ran
