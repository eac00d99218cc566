#!/bin/sh
# Sharded and pipelined steps compute the right values: models/run_ranks.py
# runs every rank of a job in one process, each in its plan's order, the
# collectives computed across the ranks, and compares with the unchanged
# step bit for bit.  mlp3 and gpt2-tiny: ddp, zero1, zero2, zero3, fsdp at
# world 1 and 2 (same data on every rank); zero3 and fsdp of a
# --grad-accum 2 step at world 2; mlp3 2-stage pipelines with M=2 and 4
# against export.py's --grad-accum M step, whose loss is divided by M where
# the pipeline's is not (pipeline.h "Not modelled"): the values must differ
# and every accumulated gradient be exactly M times the reference's.  A
# forgotten collective (--break) must fail.
#
# usage: test_run_ranks.sh ROAMC WORKDIR
# Exit 77 (skipped) without /usr/bin/python3 with torch and onnx.
set -u
. "$(dirname "$0")/lib.sh"
test_usage 2 2 "ROAMC WORKDIR" "$@"
ROAMC=$1 W=$2
SRC=$(cd "$(dirname "$0")/.." && pwd)
PY=/usr/bin/python3
{ [ -x $PY ] && $PY -c 'import torch, onnx' 2>/dev/null; } || skip "needs /usr/bin/python3 with torch and onnx"
rm -rf "$W" && mkdir -p "$W" || fail_now "cannot make $W"
RUN="$PY $SRC/models/run_ranks.py"
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
has() {
    grep -qF -- "$2" "$W/$1.out" || { fail "$1: no \"$2\" in:"; sed 's/^/    /' "$W/$1.out" | head -20; }
}
for m in mlp3 gpt2-tiny; do
    expect 0 "export_$m" $PY "$SRC/models/export.py" --model $m --batch 2 -q -o "$W/$m.onnx"
    expect 0 "export_${m}_ga2" $PY "$SRC/models/export.py" --model $m --batch 2 --grad-accum 2 -q \
        -o "$W/${m}_ga2.onnx"
    for k in ddp zero1 zero2 zero3 fsdp; do
        for n in 1 2; do
            expect 0 "${m}_${k}_$n" $RUN "$W/$m.onnx" --roamc "$ROAMC" --shard $k --world $n \
                --workdir "$W/${m}_${k}_$n"
            has "${m}_${k}_$n" "MATCH $k world=$n"
        done
    done
    for k in zero3 fsdp; do
        expect 0 "${m}_${k}_ga2" $RUN "$W/${m}_ga2.onnx" --roamc "$ROAMC" --shard $k --world 2 \
            --workdir "$W/${m}_${k}_ga2"
    done
done
# pipelines: microbatches of 2 samples, the reference accumulates M of them
expect 0 export_mlp3_b2 $PY "$SRC/models/export.py" --model mlp3 --batch 2 -q -o "$W/mlp3_b2.onnx"
for M in 2 4; do
    expect 0 "export_mlp3_ga$M" $PY "$SRC/models/export.py" --model mlp3 --batch 2 --grad-accum $M -q \
        -o "$W/mlp3_ga$M.onnx"
    expect 1 "mlp3_pp2_m$M" $RUN "$W/mlp3_ga$M.onnx" --source "$W/mlp3_b2.onnx" --roamc "$ROAMC" \
        --pipeline-stages 2 --microbatches $M --workdir "$W/mlp3_pp2_m$M"
    for p in fc1.weight fc1.bias fc2.weight fc2.bias fc3.weight fc3.bias; do
        has "mlp3_pp2_m$M" "gradient of $p is exactly $M x the reference's"
    done
    if grep -q "loss '" "$W/mlp3_pp2_m$M.out"; then fail "mlp3_pp2_m$M: the loss differs"; fi
done
# a test of the test: rank 0 of a ddp job forgets its AllReduce
expect 1 broken_ddp $RUN "$W/mlp3.onnx" --roamc "$ROAMC" --shard ddp --world 2 \
    --break roamc.bucket0.all_reduce0 --workdir "$W/broken_ddp"
has broken_ddp "MISMATCH"

[ "$TEST_FAILS" != 0 ] ||
    pass "every rank of ddp/zero1/zero2/zero3/fsdp (world 1, 2) and of 2-stage pipelines run together, bit for bit"
test_finish test_run_ranks
