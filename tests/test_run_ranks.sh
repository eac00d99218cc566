#!/bin/sh
# Sharded and pipelined steps compute the right values: models/run_ranks.py
# runs every rank of a job in one process, each in its plan's order, the
# collectives computed across the ranks, and compares with the unchanged
# step bit for bit.  mlp3 and gpt2-tiny: ddp, zero1, zero2, zero3, fsdp at
# world 1 and 2 (same data on every rank); zero2, zero3 and fsdp of a
# --grad-accum 2 step at world 2, each microbatch's gradients reduced (the
# default) and with --no-sync; 2-stage pipelines with M=2 and 4 against
# export.py's --grad-accum M step (each microbatch's loss divided by M on
# both sides), gpt2-tiny's tied embedding all-reduced between the stages.
# A forgotten collective (--break) must fail.
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
    step "$tag"
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
    # each microbatch's gradients reduced (the default) and --no-sync's one reduction
    for k in zero2 zero3 fsdp; do
        for v in "" --no-sync; do
            expect 0 "${m}_${k}_ga2$v" $RUN "$W/${m}_ga2.onnx" --roamc "$ROAMC" --shard $k --world 2 \
                $v --workdir "$W/${m}_${k}_ga2$v"
            has "${m}_${k}_ga2$v" "MATCH $k world=2"
        done
    done
done
# pipelines: microbatches of 2 samples, the reference accumulates M of them
# (export.py --grad-accum M: each microbatch's loss divided by M, as the
# pipeline divides it): bit for bit.  gpt2-tiny's tied wte (embedding and LM
# head) is all-reduced between the stages once, after the microbatches
# (Megatron): its gradient is the reference's, summed in that order, which
# run_ranks.py proves by running the reference again with it.
for m in mlp3 gpt2-tiny; do
    for M in 2 4; do
        expect 0 "export_${m}_ga$M" $PY "$SRC/models/export.py" --model $m --batch 2 --grad-accum $M -q \
            -o "$W/${m}_ga$M.onnx"
        expect 0 "${m}_pp2_m$M" $RUN "$W/${m}_ga$M.onnx" --source "$W/$m.onnx" --roamc "$ROAMC" \
            --pipeline-stages 2 --microbatches $M --workdir "$W/${m}_pp2_m$M"
        has "${m}_pp2_m$M" "MATCH stage=0 stages=2 microbatches=$M schedule=1f1b"
    done
done
has mlp3_pp2_m4 "(31 tensors) bit for bit equal to $W/mlp3_ga4.onnx"
if grep -q "summed in the pipeline's order" "$W/mlp3_pp2_m4.out"; then fail "mlp3_pp2_m4: no tied parameter"; fi
has gpt2-tiny_pp2_m4 "with the gradient of the tied wte.weight summed in the pipeline's order"
# a test of the test: stage 0 forgets the tied AllReduce (stage 1 waits for it)
expect 1 broken_tied $RUN "$W/gpt2-tiny_ga2.onnx" --source "$W/gpt2-tiny.onnx" --roamc "$ROAMC" \
    --pipeline-stages 2 --microbatches 2 --break wte.weight.grad.all_reduce --workdir "$W/broken_tied"
has broken_tied "rank 1: AllReduce -> 'wte.weight.grad.all_reduce'"
# a test of the test: rank 0 of a ddp job forgets its AllReduce; rank 0 of a zero3 job
# with accumulation forgets to add microbatch 1's reduced gradients into unit 0's shard
expect 1 broken_ddp $RUN "$W/mlp3.onnx" --roamc "$ROAMC" --shard ddp --world 2 \
    --break roamc.bucket0.all_reduce0 --workdir "$W/broken_ddp"
has broken_ddp "MISMATCH"
expect 1 broken_accum $RUN "$W/mlp3_ga2.onnx" --roamc "$ROAMC" --shard zero3 --world 2 \
    --break roamc.grad0 --workdir "$W/broken_accum"
has broken_accum "MISMATCH"

[ "$TEST_FAILS" != 0 ] ||
    pass "every rank of ddp/zero1/zero2/zero3/fsdp (world 1, 2) and of 2-stage pipelines (mlp3, gpt2-tiny) run together, bit for bit"
test_finish test_run_ranks
