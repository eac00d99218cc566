#!/bin/sh
# dump_models.sh ROAMC [OUT_DIR] [MODEL...]
#
# Writes the layout problem of the default plan of each model (every
# models/*.onnx unless given) as a buffer CSV (`roamc MODEL --dump-buffers`):
# OUT_DIR/NAME.csv, one line per storage, half-open lifetimes, aligned sizes.
# Its live-size bound is the plan's theoretical peak, so `roamc layout
# NAME.csv --capacity BOUND` asks for a layout with no fragmentation, and the
# same lists can go to other static allocators.  Then runs `roamc layout` on
# each at its bound (--time-limit 10) and prints one line per model.
# Default OUT_DIR: tests/bench/instances.
set -eu
roamc=$1
out=${2:-tests/bench/instances}
shift; [ $# -gt 0 ] && shift
[ $# -gt 0 ] || set -- models/*.onnx
for m in "$@"; do
    name=$(basename "$m" .onnx)
    "$roamc" "$m" -q --dump-buffers "$out/$name.csv"
    bound=$("$roamc" layout "$out/$name.csv" --time-limit 1 | sed -n 's/^lower bound: \([0-9]*\).*/\1/p')
    log=$("$roamc" layout "$out/$name.csv" --capacity "$bound" --time-limit 10 2>&1 || true)
    n=$(echo "$log" | sed -n 's/^buffers: //p')
    st=$(echo "$log" | sed -n 's/^status: //p')
    t=$(echo "$log" | sed -n 's/^time: //p')
    echo "$name: $n buffers, bound $bound, status ${st:-?}, time ${t:-?}"
done
