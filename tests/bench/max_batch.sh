#!/bin/sh
# The largest batch that fits a device budget, PyTorch's plan against
# roamc's (issue "Will it fit"): for each model, a batch-symbolic training
# graph from models/export.py --symbolic-batch, then
#   roamc MODEL --budget B --max-batch --report json
# for each budget; one markdown table with the planning time of the whole
# search (wall and user CPU seconds, from /usr/bin/time).
#
# usage: tests/bench/max_batch.sh [ROAMC] [OUT_DIR]
#   MODELS="resnet50 vit_b_16 bert-base gpt2 gpt2-xl" BUDGETS="16GiB 80GiB"
# Writes OUT_DIR/max_batch.md (default tests/bench/results) and keeps the
# exports and per-run JSON in OUT_DIR/max_batch/ (exports are reused).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
roamc=${1:-$here/../../build/roamc}
out=${2:-$here/results}
models=${MODELS:-resnet50 vit_b_16 bert-base gpt2 gpt2-xl}
budgets=${BUDGETS:-16GiB 80GiB}
work=$out/max_batch
mkdir -p "$work"
py=/usr/bin/python3
table=$out/max_batch.md
{
    echo "# Largest batch that fits, PyTorch vs roamc ($(date -u +%Y-%m-%d), $(nproc) cores)"
    echo
    echo "\`tests/bench/max_batch.sh\`: models/export.py --symbolic-batch training graphs (Adam), then"
    echo "\`roamc MODEL --budget B --max-batch\`. PyTorch: program order, gradients held to the end of the"
    echo "step, caching-allocator replay under the budget (cached segments given back before out of memory)."
    echo "roamc: the default plan (order roam, layout roam). Bound: the largest batch whose lower bound of"
    echo "the theoretical peak fits, so no schedule of this step fits more."
    echo
    echo "| model | budget | PyTorch | roamc | bound | gain | batches tried | wall s | user s |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
} > "$table"
for m in $models; do
    f=$work/${m}_bsym.onnx
    [ -f "$f" ] || $py "$here/../../models/export.py" --model "$m" --symbolic-batch -o "$f" -q
    for b in $budgets; do
        j=$work/${m}_$b.json
        /usr/bin/time -f "%e %U" -o "$work/time.txt" "$roamc" "$f" --budget "$b" --max-batch --report json > "$j" || true
        read -r wall user <<EOF2
$(tail -n 1 "$work/time.txt")
EOF2
        $py - "$j" "$m" "$b" "$wall" "$user" >> "$table" <<'EOF'
import json, sys
j, m, b, wall, user = sys.argv[1:]
try:
    d = json.load(open(j))
except ValueError:
    print("| %s | %s | failed | | | | | %s | %s |" % (m, b, wall, user))
    sys.exit(0)
mb = d["max_batch"]
t, r, lb = mb["pytorch"], mb["plan"], mb["lower_bound"]
gain = "%+.1f%%" % (100.0 * (r - t) / t) if t else "n/a"
cell = lambda v: str(v) if v else "does not fit"
print("| %s | %s | %s | %s | %s | %s | %d | %s | %s |" % (m, b, cell(t), cell(r), cell(lb), gain, len(d["rows"]), wall, user))
EOF
        tail -n 1 "$table" >&2
    done
done
echo "written $table" >&2
