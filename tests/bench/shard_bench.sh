#!/bin/sh
# shard_bench.sh ROAMC [WORK_DIR] [OUT.md]
#
# The per-GPU table of issue 28: gpt2-xl and llama-7b (models/export.py, bf16 autocast,
# Adam) as one rank of an 8-GPU job under ZeRO-1, ZeRO-2, ZeRO-3 and FSDP:
#   - the rank's peak at micro-batch 1 (roamc's plan of the rank's step, rank 0) with its
#     split, PyTorch's plan of the same step (program order, caching allocator: what it
#     reserves), the planning time, and check_plan.py's verdict on the plan;
#   - the largest micro-batch per GPU at 24, 40 and 80 GiB (--max-batch --shard on the
#     batch-symbolic export), roamc's plan and PyTorch's;
#   - beside DeepSpeed's model-state estimators (estimate_zero2/3_model_states_mem_needs,
#     offload none; ZeRO-1 has none, the ZeRO paper's 4P + 12P/N stands in) and
#     Korthikanti et al.'s activations, sbh(34 + 5as/h) bytes per layer; the differences
#     measured on the plan (tests/bench/shard_table.py) and explained.
# Writes OUT.md (default tests/bench/results/shard.md).  Takes ~15 min on 2 cores.
set -eu
roamc=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
here=$(cd "$(dirname "$0")" && pwd)
work=${2:-/tmp/shard_bench}
out=${3:-$here/results/shard.md}
py=/usr/bin/python3
checker=${CHECK_PLAN:-$here/../../../shared/tools/check_plan.py}
[ -f "$checker" ] || checker=/work/shared/tools/check_plan.py
mkdir -p "$work"
cd "$work"
WORLD=8
for m in gpt2-xl llama-7b; do
    [ -f ${m}_b1.onnx ] || $py "$here/../../models/export.py" --model $m --amp bf16 --batch 1 -o ${m}_b1.onnx -q
    [ -f ${m}_bsym.onnx ] || $py "$here/../../models/export.py" --model $m --amp bf16 --symbolic-batch -o ${m}_bsym.onnx -q
    for k in zero1 zero2 zero3 fsdp; do
        l=${m}_$k
        # micro-batch 1: the plan, timed, with PyTorch's plan beside it (--budget's verdict)
        t0=$(date +%s.%N)
        "$roamc" ${m}_b1.onnx --shard $k --world $WORLD --budget 80GiB --emit-train $l.onnx \
            -o $l.json --report json > $l.rep || [ $? -eq 3 ]
        t1=$(date +%s.%N)
        echo "$t0 $t1" | awk '{ printf "%.2f\n", $2 - $1 }' > $l.seconds
        $py "$checker" $l.onnx $l.json > $l.chk 2>&1 || true
        for gib in 24 40 80; do
            "$roamc" ${m}_bsym.onnx --max-batch --budget ${gib}GiB --shard $k --world $WORLD \
                --report json > ${l}_mb$gib.rep || [ $? -eq 3 ]
        done
        echo "$l: $(cat $l.seconds) s, $(tail -1 $l.chk)"
    done
done
nproc > cores.txt
$py "$here/shard_table.py" "$work" $WORLD > "$out"
echo "wrote $out"
