#!/bin/sh
# Issue 28's target table: roamc's per-rank peaks against the same set-up run for real
# on this CPU (models/dist_harness.py: gloo processes, CPU autocast, accumulation), for
# resnet50 (batch 2 per rank, 224x224) and GPT-2 with 4 layers (batch 1, sequence 128):
#   DDP and ZeRO-1 at world 2 and 4 (every rank), bf16 autocast at world 1, gradient
#   accumulation K=4.  The comparisons are tests/setup_compare.py's, as ctest's
#   test_shard and test_setups make them on mlp3 and gpt2-tiny; every plan passes
#   check_plan.py.
# usage: tests/bench/setups_bench.sh ROAMC [WORK_DIR]    (prints the lines of the table)
# Takes about 15 minutes on 2 cores.
set -u
[ $# -ge 1 ] || { echo "usage: $0 ROAMC [WORK_DIR]" >&2; exit 2; }
roamc=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${2:-/tmp/setups_bench}
py=/usr/bin/python3
checker=$root/../shared/tools/check_plan.py
tol=30
mkdir -p "$work" && cd "$work" || exit 1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# label harness-model export-args
while read -r label hmodel args; do
    # shellcheck disable=SC2086
    [ -s "$label.onnx" ] || $py "$root/models/export.py" $args -o "$label.onnx" -q ||
        fail "export $label"
done <<'LIST'
resnet50 resnet50 --model resnet50 --batch 2
resnet50_amp resnet50 --model resnet50 --batch 2 --amp bf16
resnet50_ga4 resnet50 --model resnet50 --batch 2 --grad-accum 4
gpt2-4l gpt2-4l --model gpt2 --layers 4 --seq-len 128 --batch 1
gpt2-4l_amp gpt2-4l --model gpt2 --layers 4 --seq-len 128 --batch 1 --amp bf16
gpt2-4l_ga4 gpt2-4l --model gpt2 --layers 4 --seq-len 128 --batch 1 --grad-accum 4
LIST

echo "## DDP and ZeRO-1, every rank (harness peak; roamc with the data held as the harness holds it)"
echo "model setup world rank harness roamc roamc+data-held diff"
$py "$root/models/dist_harness.py" --model resnet50,gpt2-4l --setup ddp,zero1 --world 2,4 \
    > shard.jsonl 2> shard.err || { fail "dist_harness.py"; tail -3 shard.err; }
$py -c '
import json, sys
for line in open(sys.argv[1]):
    h = json.loads(line)
    assert "error" not in h, h
    print(h["model"], h["setup"], h["world"], h["rank"], h["peak_bytes"])
' shard.jsonl > ranks.txt || fail "harness output"
while read -r model setup world rank peak; do
    l=${model}_${setup}_w${world}_r$rank
    "$roamc" "$model.onnx" --method pytorch --shard "$setup" --world "$world" --rank "$rank" \
        --emit-train "$l.onnx" -o "$l.json" --report json > "$l.rep" 2> "$l.err" ||
        { fail "$l: roamc --shard"; cat "$l.err"; continue; }
    $py "$checker" "$l.onnx" "$l.json" > "$l.chk" 2>&1 || fail "$l: check_plan.py rejects the plan"
    $py "$root/tests/setup_compare.py" rank "$l" "$model" "$setup" "$world" "$rank" "$peak" "$tol" ||
        fail "$l: more than $tol per mille apart"
done < ranks.txt

echo "## One process: bf16 autocast, and accumulation over 4 microbatches"
for model in resnet50 gpt2-4l; do
    for s in amp:amp-bf16 ga4:grad-accum; do
        l=${model}_${s%%:*}
        "$roamc" "$l.onnx" --order program --layout llfb -o "$l.llfb.json" --report json \
            > "$l.llfb.rep" || fail "$l: roamc --layout llfb"
        "$roamc" "$l.onnx" --method pytorch -o "$l.pt.json" --report json > "$l.pt.rep" ||
            fail "$l: roamc --method pytorch"
        for p in llfb pt; do
            $py "$checker" "$l.onnx" "$l.$p.json" > "$l.$p.chk" 2>&1 ||
                fail "$l: check_plan.py rejects the $p plan"
        done
        $py "$root/models/dist_harness.py" --model "$model" --setup "${s#*:}" --grad-accum 4 \
            > "$l.harness" 2> "$l.harness.err" || { fail "$l: dist_harness.py"; continue; }
        $py "$root/tests/setup_compare.py" one "$l" "$l.harness" "$tol" ||
            fail "$l: more than $tol per mille apart"
    done
done
echo "failures: $fails"
[ "$fails" -eq 0 ]
