#!/bin/sh
# gen_rate.sh MODE ROAMC GEN SIZES COUNT TIME_LIMIT — the loop that
# run_brick.sh and run_perfect.sh share: for each size n in SIZES and seed
# 1..COUNT, `GEN n seed` writes an instance (a buffer CSV) and `roamc layout`
# solves it with --time-limit TIME_LIMIT.
#   MODE capacity: with --capacity 1048576 (the generators' default
#     capacity, which is the instance's live-size bound): solved when the
#     height is at most that;
#   MODE bound: minimising the height: solved when it equals the lower bound
#     roamc reports.
# Prints per size: solved count, mean and worst time (roamc's own `time:`
# line; an unsolved instance counts as its reported time), search nodes,
# failed seeds.  ROAMC_OPTS: more roamc options; GEN_ARGS_PER_N: a command
# that prints the generator's arguments after N SEED for size n ($1), e.g.
# 'echo $((8 + $1 / 25)) 1048576 30'.
set -eu
mode=$1
roamc=$2
gen=$3
sizes=$4
count=$5
limit=$6
capacity=1048576
case "$mode" in
capacity) capacity_opt="--capacity $capacity" ;;
bound) capacity_opt="" ;;
*) echo "gen_rate.sh: MODE is capacity or bound, not '$mode'" >&2; exit 2 ;;
esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for n in $sizes; do
    ok=0 total_time=0 max_time=0 fails="" nodes=0
    extra=""
    if [ -n "${GEN_ARGS_PER_N:-}" ]; then extra=$(sh -c "$GEN_ARGS_PER_N" gen_args "$n"); fi
    seed=1
    while [ "$seed" -le "$count" ]; do
        # shellcheck disable=SC2086
        "$gen" "$n" "$seed" $extra > "$work/in.csv"
        # shellcheck disable=SC2086
        "$roamc" layout "$work/in.csv" -o "$work/out.csv" $capacity_opt \
            --time-limit "$limit" ${ROAMC_OPTS:-} > "$work/log" 2>&1 || true
        height=$(sed -n 's/^height: \([0-9]*\).*/\1/p' "$work/log")
        lb=$(sed -n 's/^lower bound: \([0-9]*\).*/\1/p' "$work/log")
        t=$(sed -n 's/^time: \([0-9.]*\).*/\1/p' "$work/log")
        nd=$(sed -n 's/^search: \([0-9]*\) nodes.*/\1/p' "$work/log")
        if [ "$mode" = capacity ]; then goal=$capacity; else goal=${lb:-0}; fi
        if [ -n "$height" ] && [ "$height" -le "$goal" ]; then
            ok=$((ok + 1))
        else
            fails="$fails $seed"
        fi
        nodes=$((nodes + ${nd:-0}))
        total_time=$(echo "$total_time + ${t:-$limit}" | bc -l)
        max_time=$(echo "m=$max_time; t=${t:-$limit}; if (t > m) t else m" | bc -l)
        seed=$((seed + 1))
    done
    if [ "$mode" = capacity ]; then what="solved at capacity"; else what="at the lower bound"; fi
    printf "n=%s: %d/%d %s, mean %.2f s, max %.2f s, %s nodes%s\n" "$n" "$ok" "$count" "$what" \
        "$(echo "$total_time / $count" | bc -l)" "$max_time" "$nodes" "${fails:+, failed seeds:$fails}"
done
