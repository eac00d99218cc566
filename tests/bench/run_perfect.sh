#!/bin/sh
# run_perfect.sh ROAMC GEN_PERFECT [SIZES] [COUNT] [TIME_LIMIT]
#
# Success rate of `roamc layout` (default method) on perfect instances:
# COUNT instances (seeds 1..COUNT) of each size in SIZES made by
# gen_perfect.c, each solved with --time-limit TIME_LIMIT.  An instance is a
# success when the height equals the lower bound (no fragmentation).
# Defaults: SIZES="150 300 450", COUNT=20, TIME_LIMIT=10.
# Example:
#   cc -O2 -o /tmp/gen_perfect tests/bench/gen_perfect.c
#   tests/bench/run_perfect.sh build/roamc /tmp/gen_perfect
set -eu
roamc=$1
gen=$2
sizes=${3:-"150 300 450"}
count=${4:-20}
limit=${5:-10}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for n in $sizes; do
    ok=0 total_time=0 max_time=0 fails=""
    seed=1
    while [ "$seed" -le "$count" ]; do
        "$gen" "$n" "$seed" > "$work/in.csv"
        "$roamc" layout "$work/in.csv" -o "$work/out.csv" --time-limit "$limit" > "$work/log" 2>&1 || true
        height=$(sed -n 's/^height: \([0-9]*\).*/\1/p' "$work/log")
        lb=$(sed -n 's/^lower bound: \([0-9]*\).*/\1/p' "$work/log")
        t=$(sed -n 's/^time: \([0-9.]*\).*/\1/p' "$work/log")
        if [ -n "$height" ] && [ "$height" = "$lb" ]; then
            ok=$((ok + 1))
        else
            fails="$fails $seed"
        fi
        total_time=$(echo "$total_time + ${t:-$limit}" | bc -l)
        max_time=$(echo "m=$max_time; t=${t:-$limit}; if (t > m) t else m" | bc -l)
        seed=$((seed + 1))
    done
    printf "n=%s: %d/%d at the lower bound, mean %.2f s, max %.2f s%s\n" "$n" "$ok" "$count" \
        "$(echo "$total_time / $count" | bc -l)" "$max_time" "${fails:+, failed seeds:$fails}"
done
