#!/bin/sh
# Version 2 plans that run (issue 36, "Proof that it runs"): valid v1 plans
# converted to several streams by tests/make_streams_plan.py (Offload on a
# d2h stream, Reload on h2d, collectives on comm, the least waits for data,
# mutation order and reused addresses), checked VALID by check_plan.py, and
# run by models/run_plan.py (models/run_streams.py) under 50 seeded
# interleavings each, bit for bit equal to eager PyTorch:
#   - mlp3 b8 with three activations offloaded (tests/make_fit_step.py);
#   - resnet18's shape at small width (tests/small_resnet_module.py), b16,
#     changed by roamc --fit=offload itself (dozens of Offload/Reload pairs),
#     and the same with the optimizer's nodes on a second compute stream;
#   - a 2-rank zero2 step of mlp3 (roamc --shard, models/run_ranks.py runs
#     both ranks, the ReduceScatter/Broadcast on each rank's comm stream).
# With one wait removed, check_plan.py says INVALID and the runner fails
# some interleavings: with its guards (a buffer reused while another stream
# still uses its address, a read before the maker finished) and with
# --trust-plan by the values alone (poisoned or overwritten bytes, torn reads).
# The plans are checked with check_plan.py alone: planner/plan.schema.json
# describes version 1 plans only.
#
# usage: test_run_plan_streams.sh ROAMC CHECK_PLAN_PY WORKDIR   (77 = skipped)
set -u
. "$(dirname "$0")/lib.sh"
test_usage 3 3 "ROAMC CHECK_PLAN_PY WORKDIR" "$@"
ROAMC=$1 CHECK=$2 W=$3
SRC=$(cd "$(dirname "$0")/.." && pwd)
PY=/usr/bin/python3
test_need_python "torch, onnx, torchvision" "the runner replays steps with torch"
# every step here needs check_plan.py's verdict: without it, nothing proves the plans valid
[ -f "$CHECK" ] || skip "needs $CHECK (../shared/tools/check_plan.py)"
rm -rf "$W" && mkdir -p "$W" || fail_now "cannot make $W"
# expect STATUS TAG CMD...: runs CMD, output into $W/TAG.out, wants exit STATUS
expect() {
    want=$1 tag=$2
    shift 2
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
MK="$PY $SRC/tests/make_streams_plan.py"
RUN="$PY $SRC/models/run_plan.py"

# streams NAME MODEL V1PLAN REFERENCE KIND: convert, check, 50 interleavings;
# then drop a wait of KIND: INVALID, and the runner fails (guards, values)
streams() {
    name=$1 model=$2 v1=$3 ref=$4 kind=$5
    expect 0 "check_v1_$name" $PY "$CHECK" "$model" "$v1"
    expect 0 "convert_$name" $MK convert "$model" "$v1" "$W/${name}_v2.json"
    has "convert_$name" "waits ("
    expect 0 "check_$name" $PY "$CHECK" "$model" "$W/${name}_v2.json"
    has "check_$name" "VALID"
    expect 0 "run_$name" $RUN "$model" "$W/${name}_v2.json" --reference "$ref"
    has "run_$name" "MATCH $W/${name}_v2.json: 50 interleavings of streams"
    expect 0 "drop_$name" $MK drop-wait "$model" "$W/${name}_v2.json" "$W/${name}_drop.json" "$kind"
    has "drop_$name" "removed ($kind"
    expect 1 "check_drop_$name" $PY "$CHECK" "$model" "$W/${name}_drop.json"
    has "check_drop_$name" "INVALID"
    expect 1 "run_drop_$name" $RUN "$model" "$W/${name}_drop.json" --reference "$ref"
    has "run_drop_$name" "MISMATCH $W/${name}_drop.json:"
    has "run_drop_$name" "the plan broke a guard"
    expect 1 "run_drop_trust_$name" $RUN "$model" "$W/${name}_drop.json" --reference "$ref" --trust-plan
    has "run_drop_trust_$name" "MISMATCH $W/${name}_drop.json:"
}

# mlp3 with three activations offloaded
M=$W/mlp3.onnx
expect 0 export_mlp3 $PY "$SRC/models/export.py" --model mlp3 --batch 8 -q -o "$M"
expect 0 make_moff $PY "$SRC/tests/make_fit_step.py" step "$M" "$W/moff.onnx" --offload relu_2,relu_5,_log_softmax_8
expect 0 plan_moff "$ROAMC" "$W/moff.onnx" -q -o "$W/moff_raw.json"
expect 0 host_moff $PY "$SRC/tests/make_fit_step.py" plan fix-host "$W/moff.onnx" "$W/moff_raw.json" "$W/moff.json"
streams mlp3_offload "$W/moff.onnx" "$W/moff.json" "$M" memory
has convert_mlp3_offload "1 h2d (3), 2 d2h (3)"
# the values alone show the reuse: a differing tensor or a torn read
grep -qE "differ|torn read" "$W/run_drop_trust_mlp3_offload.out" ||
    fail "run_drop_trust_mlp3_offload: neither a difference nor a torn read"

# a small resnet18, offloaded by roamc --fit=offload
R=$W/resnet.onnx
expect 0 export_resnet $PY "$SRC/models/export.py" --module "$SRC/tests/small_resnet_module.py:make" --batch 16 -q -o "$R"
expect 0 fit_resnet "$ROAMC" "$R" -q --budget 5000000 --fit=offload --emit-train "$W/roff.onnx" -o "$W/roff.json"
streams resnet_offload "$W/roff.onnx" "$W/roff.json" "$R" memory
grep -qE "h2d \([1-9][0-9]+\), 2 d2h \([1-9][0-9]+\)" "$W/convert_resnet_offload.out" ||
    fail "convert_resnet_offload: fewer than 10 Offload/Reload pairs: $(cat "$W/convert_resnet_offload.out")"
# the optimizer on a second compute stream too: Adam's in-place updates overlap
# the backward pass and the copies, hundreds of waits between four streams
expect 0 convert_resnet_update $MK convert "$W/roff.onnx" "$W/roff.json" "$W/resnet_update_v2.json" --update-stream
has convert_resnet_update "4 compute ("
expect 0 check_resnet_update $PY "$CHECK" "$W/roff.onnx" "$W/resnet_update_v2.json"
expect 0 run_resnet_update $RUN "$W/roff.onnx" "$W/resnet_update_v2.json" --reference "$R"
has run_resnet_update "MATCH $W/resnet_update_v2.json: 50 interleavings of streams"

# a 2-rank zero2 step: roamc writes each rank's step and v1 plan, run_ranks
# proves them in plan order, then with streams under 50 interleavings
# roamc's own version 2 plan of the same offloaded step (--streams copy:
# Reloads prefetched, the layout on lifetimes that hold under every
# interleaving): VALID, and bit for bit under 50 interleavings in its arena
expect 0 streams_roamc "$ROAMC" "$W/roff.onnx" -q --streams copy -o "$W/resnet_roamc_v2.json"
expect 0 check_resnet_roamc $PY "$CHECK" "$W/roff.onnx" "$W/resnet_roamc_v2.json"
has check_resnet_roamc "VALID"
expect 0 run_resnet_roamc $RUN "$W/roff.onnx" "$W/resnet_roamc_v2.json" --reference "$R"
has run_resnet_roamc "MATCH $W/resnet_roamc_v2.json: 50 interleavings of streams"

M2=$W/mlp3_b2.onnx
RR="$PY $SRC/models/run_ranks.py"
expect 0 export_mlp3_b2 $PY "$SRC/models/export.py" --model mlp3 --batch 2 -q -o "$M2"
expect 0 zero2_v1 $RR "$M2" --roamc "$ROAMC" --shard zero2 --world 2 --workdir "$W/zero2"
has zero2_v1 "MATCH zero2 world=2"
for r in 0 1; do
    expect 0 "zero2_convert_$r" $MK convert "$W/zero2/rank$r.onnx" "$W/zero2/rank$r.json" "$W/zero2/rank${r}_v2.json"
    has "zero2_convert_$r" "3 comm ("
    expect 0 "zero2_check_$r" $PY "$CHECK" "$W/zero2/rank$r.onnx" "$W/zero2/rank${r}_v2.json"
done
expect 0 zero2_run $RR "$M2" --steps "$W/zero2/rank0.onnx:$W/zero2/rank0_v2.json" \
    "$W/zero2/rank1.onnx:$W/zero2/rank1_v2.json"
has zero2_run "MATCH zero2 world=2; 2 ranks: 50 interleavings of each rank's streams"
# rank 1's ReduceScatter no longer waits for its bucket to be filled
expect 0 zero2_drop $MK drop-wait "$W/zero2/rank1.onnx" "$W/zero2/rank1_v2.json" "$W/zero2/rank1_drop.json" data
has zero2_drop "ReduceScatter on stream 3"
expect 1 zero2_check_drop $PY "$CHECK" "$W/zero2/rank1.onnx" "$W/zero2/rank1_drop.json"
has zero2_check_drop "INVALID"
expect 1 zero2_run_drop $RR "$M2" --steps "$W/zero2/rank0.onnx:$W/zero2/rank0_v2.json" \
    "$W/zero2/rank1.onnx:$W/zero2/rank1_drop.json"
has zero2_run_drop "MISMATCH zero2 world=2; 2 ranks:"
has zero2_run_drop "before its maker"

# bad input: a wait against the schedule (the streams could deadlock): exit 2
$PY -c "
import json, sys
p = json.load(open(sys.argv[1]))
a, b = p['waits'][0]
p['waits'][0] = [b, a]
json.dump(p, open(sys.argv[2], 'w'))" "$W/mlp3_offload_v2.json" "$W/backwards.json" || fail "backwards.json"
expect 2 run_backwards $RUN "$W/moff.onnx" "$W/backwards.json"
has run_backwards "does not come before node"
expect 2 run_zero $RUN "$W/moff.onnx" "$W/mlp3_offload_v2.json" --interleavings 0
has run_zero "--interleavings must be at least 1"

[ "$TEST_FAILS" != 0 ] ||
    pass "v2 plans run bit for bit under 50 interleavings; a plan without one of its waits is INVALID and fails"
test_finish test_run_plan_streams
