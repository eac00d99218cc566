#!/bin/sh
# run_brick.sh ROAMC GEN_BRICK [SIZES] [COUNT] [TIME_LIMIT]
#
# Success rate of `roamc layout --capacity C` on zero-slack non-guillotine
# instances made by gen_brick.c (seeds 1..COUNT of each size in SIZES), each
# with --time-limit TIME_LIMIT.  C is the instance's live-size bound
# (gen_brick's CAPACITY, 1048576), so an instance is solved only when a
# layout with no fragmentation at all is found.  Prints per size: solved
# count, mean and worst wall time (roamc's own `time:` line; an unsolved
# instance counts as its reported time), total search nodes, failed seeds.
# Defaults: SIZES="100 200 400 800", COUNT=20, TIME_LIMIT=10.
# Extra roamc options (e.g. --no-energy, --engine bnb) go in ROAMC_OPTS;
# BRICK_RUN=R passes gen_brick's RUN (default 3; R = LIVE: about one hole
# per step, milder).
# Example:
#   cc -O2 -o /tmp/gen_brick tests/bench/gen_brick.c
#   tests/bench/run_brick.sh build/roamc /tmp/gen_brick
set -eu
roamc=$1
gen=$2
sizes=${3:-"100 200 400 800"}
count=${4:-20}
limit=${5:-10}
capacity=1048576
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for n in $sizes; do
    ok=0 total_time=0 max_time=0 fails="" nodes=0
    seed=1
    while [ "$seed" -le "$count" ]; do
        if [ -n "${BRICK_RUN:-}" ]; then
            "$gen" "$n" "$seed" $((8 + n / 25)) "$capacity" "$BRICK_RUN" > "$work/in.csv"
        else
            "$gen" "$n" "$seed" > "$work/in.csv"
        fi
        # shellcheck disable=SC2086
        "$roamc" layout "$work/in.csv" -o "$work/out.csv" --capacity "$capacity" \
            --time-limit "$limit" ${ROAMC_OPTS:-} > "$work/log" 2>&1 || true
        height=$(sed -n 's/^height: \([0-9]*\).*/\1/p' "$work/log")
        t=$(sed -n 's/^time: \([0-9.]*\).*/\1/p' "$work/log")
        nd=$(sed -n 's/^search: \([0-9]*\) nodes.*/\1/p' "$work/log")
        if [ -n "$height" ] && [ "$height" -le "$capacity" ]; then
            ok=$((ok + 1))
        else
            fails="$fails $seed"
        fi
        nodes=$((nodes + ${nd:-0}))
        total_time=$(echo "$total_time + ${t:-$limit}" | bc -l)
        max_time=$(echo "m=$max_time; t=${t:-$limit}; if (t > m) t else m" | bc -l)
        seed=$((seed + 1))
    done
    printf "n=%s: %d/%d solved at capacity, mean %.2f s, max %.2f s, %s nodes%s\n" "$n" "$ok" "$count" \
        "$(echo "$total_time / $count" | bc -l)" "$max_time" "$nodes" "${fails:+, failed seeds:$fails}"
done
