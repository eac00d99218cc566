#!/bin/sh
# slack_lists.sh ROAMC [OLD_ROAMC] [OUT_DIR]
#
# Large buffer lists with slack (issue 31), 6k-45k buffers, made from our
# graphs, and `roamc layout` on each (default --time-limit 10): one table row
# per list with the buffers, the live-size bound, the window bound roamc
# proves (layout_lower_bound), the height of OLD_ROAMC (when given) and of
# ROAMC, the gap to the proven bound and the time.  Nothing is committed:
# the lists go to OUT_DIR (default: a temporary folder).
#
# The lists: training steps exported by models/export.py (--grad-accum K:
# K microbatches in one step; gpt2 with 48 layers) planned with roam and
# program order (`roamc MODEL --order O --dump-buffers`), the committed
# gpt2-xl_b1 in program order, and lists of several steps laid out at once
# (tests/bench/slack_unroll.py: K copies in time, the whole-step buffers
# shared) to pass 10k-40k buffers.  Needs /usr/bin/python3 with torch.
set -eu
roamc=$1
old=${2:-}
out=${3:-$(mktemp -d)}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mkdir -p "$out/onnx"
py=/usr/bin/python3

export_step() { # NAME ARGS...: models/export.py into $out/onnx/NAME.onnx
    name=$1
    shift
    [ -s "$out/onnx/$name.onnx" ] || "$py" "$root/models/export.py" "$@" -q -o "$out/onnx/$name.onnx"
}
dump() { # MODEL ORDER NAME
    [ -s "$out/$3.csv" ] || "$roamc" "$1" -q --order "$2" --dump-buffers "$out/$3.csv"
}
unroll() { # NAME K
    [ -s "$out/$1_x$2.csv" ] || "$py" "$here/slack_unroll.py" "$out/$1.csv" "$2" "$out/$1_x$2.csv"
}

export_step gpt2_l48_b2_ga2 --model gpt2 --layers 48 --batch 2 --seq-len 512 --grad-accum 2
export_step mobilenet_v2_b16_ga8 --model mobilenet_v2 --batch 16 --grad-accum 8
export_step bert-base_b8_ga8 --model bert-base --batch 8 --grad-accum 8
export_step efficientnet_b0_b8_ga8 --model efficientnet_b0 --batch 8 --grad-accum 8
dump "$out/onnx/gpt2_l48_b2_ga2.onnx" roam gpt2_l48_b2_ga2_roam
dump "$out/onnx/gpt2_l48_b2_ga2.onnx" program gpt2_l48_b2_ga2_program
dump "$out/onnx/mobilenet_v2_b16_ga8.onnx" program mobilenet_v2_b16_ga8_program
dump "$out/onnx/bert-base_b8_ga8.onnx" program bert-base_b8_ga8_program
dump "$out/onnx/efficientnet_b0_b8_ga8.onnx" roam efficientnet_b0_b8_ga8_roam
dump "$root/models/gpt2-xl_b1.onnx" program gpt2-xl_b1_program
dump "$root/models/vit_b_16_b32.onnx" program vit_b_16_b32_program
unroll mobilenet_v2_b16_ga8_program 4
unroll bert-base_b8_ga8_program 2
unroll efficientnet_b0_b8_ga8_roam 2
unroll gpt2-xl_b1_program 4
unroll vit_b_16_b32_program 8

field() { sed -n "s/^$1: \([0-9.]*\).*/\1/p" "$2" | head -n 1; }
printf '| list | buffers | live-size bound | window bound | height before | height after | gap to bound | time | stop |\n'
printf '|---|---|---|---|---|---|---|---|---|\n'
for name in gpt2_l48_b2_ga2_roam gpt2_l48_b2_ga2_program bert-base_b8_ga8_program_x2 \
    mobilenet_v2_b16_ga8_program mobilenet_v2_b16_ga8_program_x4 efficientnet_b0_b8_ga8_roam_x2 \
    gpt2-xl_b1_program_x4 vit_b_16_b32_program_x8; do
    csv="$out/$name.csv"
    before=-
    if [ -n "$old" ]; then
        "$old" layout "$csv" > "$out/$name.old.log" 2>&1 || true
        before=$(field height "$out/$name.old.log")
    fi
    "$roamc" layout "$csv" > "$out/$name.log" 2>&1 || true
    n=$(field buffers "$out/$name.log")
    live=$(field "lower bound" "$out/$name.log")
    proven=$(field "proven lower bound" "$out/$name.log")
    h=$(field height "$out/$name.log")
    t=$(field time "$out/$name.log")
    st=$(sed -n 's/^status: //p' "$out/$name.log")
    gap=$(awk -v h="$h" -v b="$proven" 'BEGIN { if (b > 0) printf "%.4f%%", 100 * (h - b) / b; else print "-" }')
    printf '| %s | %s | %s | %s | %s | %s | %s | %s s | %s |\n' "$name" "$n" "$live" "$proven" "$before" \
        "$h" "$gap" "$t" "$st"
done
