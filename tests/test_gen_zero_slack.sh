#!/bin/sh
# test_gen_zero_slack.sh GEN ROAMC — a zero-slack instance generator of
# tests/bench (gen_brick.c, gen_strip.c, gen_skyline.c: `GEN N SEED`) writes what it
# promises: for several sizes and seeds the live bytes equal the capacity
# (1048576) at every step, the buffer count is N, and `roamc layout` reads
# the file back with its live-size bound at the capacity.  Same arguments
# give the same file.
set -u
. "$(dirname "$0")/lib.sh"
test_usage 2 2 "GEN ROAMC" "$@"
gen=$1
roamc=$2
name=$(basename "$gen")
work=$(mktemp -d) || fail_now "mktemp"
trap 'rm -rf "$work"' EXIT
for n in 1 7 100 800; do
    for seed in 1 2 3; do
        "$gen" "$n" "$seed" > "$work/in.csv" || { fail "$name $n $seed: exit $?"; continue; }
        res=$(awk -F, 'NR == 1 { next }
            { if ($3 <= $2 || $4 < 1) bad_line++; for (t = $2; t < $3; t++) live[t] += $4; if ($3 > T) T = $3; c++ }
            END { bad = 0; for (t = 0; t < T; t++) if (live[t] != 1048576) bad++; print c, bad, bad_line + 0 }' "$work/in.csv")
        [ "$res" = "$n 0 0" ] || fail "$name $n $seed: buffers, uncovered steps, bad lines = $res"
        "$roamc" layout "$work/in.csv" --method bestfit > "$work/log" 2>&1
        grep -q "^lower bound: 1048576 bytes" "$work/log" || fail "$name $n $seed: roamc layout: $(cat "$work/log")"
    done
done
"$gen" 100 5 > "$work/a.csv" && "$gen" 100 5 > "$work/b.csv" && cmp -s "$work/a.csv" "$work/b.csv" || fail "not deterministic"
"$gen" 100 > /dev/null 2>&1 && fail "missing seed accepted"
test_finish "$name (zero-slack instances)"
