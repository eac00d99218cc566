#!/bin/sh
# test_layout_solve.sh ROAMC — `roamc layout` as an exact solver:
#  - gap7 (optimum 17 above the live-size bound 16): --capacity 16 is proved
#    infeasible (exit 3, no output), --capacity 17 fits, without a capacity
#    the height is minimised to 17 and reported optimal with the bound proved;
#  - a zero-slack instance (a 6 x 8 rectangle cut into pieces) is solved at
#    its bound with every pruning rule off in turn (the answer stays exact);
#  - a list larger than the exact search takes stops at once and says why
#    (not "by time"), with the window bound above the live size; the local
#    improvement takes it to its optimum;
#  - bad dev flags exit 2.
set -u
. "$(dirname "$0")/lib.sh"
test_usage 1 1 "ROAMC" "$@"
roamc=$1
[ -x "$roamc" ] || fail_now "roamc binary $roamc not found or not executable"
work=$(mktemp -d) || fail_now "mktemp"
trap 'rm -rf "$work"' EXIT

cat > "$work/gap7.csv" <<'CSV'
id,lower,upper,size
0,4,10,6
1,2,7,5
2,0,2,7
3,7,13,8
4,1,3,5
5,0,1,6
6,1,6,4
CSV
"$roamc" layout "$work/gap7.csv" --capacity 16 -o "$work/out.csv" > "$work/log" 2> "$work/err"
rc=$?
[ $rc -eq 3 ] || fail "capacity 16: exit $rc, expected 3"
grep -q "proved that no layout fits" "$work/err" || fail "capacity 16: no proof message: $(cat "$work/err")"
grep -q "^status: infeasible" "$work/log" || fail "capacity 16: status: $(cat "$work/log")"
[ ! -e "$work/out.csv" ] || fail "capacity 16: output written"
"$roamc" layout "$work/gap7.csv" --capacity 17 -o "$work/out.csv" > "$work/log" 2>&1 || fail "capacity 17: exit $?"
[ -s "$work/out.csv" ] || fail "capacity 17: no output"
"$roamc" layout "$work/gap7.csv" > "$work/log" 2>&1 || fail "minimise: exit $?"
grep -q "^height: 17 bytes" "$work/log" || fail "minimise: $(cat "$work/log")"
grep -q "^status: optimal" "$work/log" || fail "minimise: not optimal: $(cat "$work/log")"
grep -q "^proven lower bound: 17 bytes, gap 0.0000%" "$work/log" || fail "minimise: bound: $(cat "$work/log")"
grep -q "^search: [0-9]* nodes" "$work/log" || fail "minimise: no node count"

# zero slack: capacity 8 x steps 0..5, every step covered exactly
cat > "$work/perfect.csv" <<'CSV'
id,lower,upper,size
a,0,2,3
b,2,6,3
c,0,4,2
d,4,6,2
e,0,1,3
f,1,3,3
g,3,6,1
h,3,6,2
CSV
for flag in "" --no-canonical --no-dominance --no-section --no-monotonic --no-tight --no-floor \
    --no-fit --no-twins --no-decompose --no-reorder --no-mirror --no-hatless --with-energy "--engine bnb" \
    "--engine skyline"; do
    # shellcheck disable=SC2086
    "$roamc" layout "$work/perfect.csv" --capacity 8 $flag --engine bnb > "$work/log" 2>&1 ||
        fail "perfect $flag: exit $?: $(cat "$work/log")"
    # shellcheck disable=SC2086
    "$roamc" layout "$work/gap7.csv" --capacity 16 $flag > "$work/log" 2>&1
    [ $? -eq 3 ] || fail "gap7 16 $flag: not infeasible"
done
# the sweep in time order (dev engine) solves zero slack, and never claims
# a proof: gap7 at 16 is "stopped", exit 3 without the infeasible status
"$roamc" layout "$work/perfect.csv" --capacity 8 --engine sweep > "$work/log" 2>&1 ||
    fail "perfect --engine sweep: exit $?: $(cat "$work/log")"
"$roamc" layout "$work/gap7.csv" --capacity 16 --engine sweep --time-limit 1 > "$work/log" 2>&1
[ $? -eq 3 ] || fail "gap7 16 --engine sweep: not exit 3"
grep -q "^status: infeasible" "$work/log" && fail "gap7 16 --engine sweep: claims a proof"
# the stop reason says the truth: 3000 copies of gap7 (21000 buffers, more
# than the exact search takes) from the heuristics (--engine both: no local
# improvement), within a 60 s limit, stop at once for want of an engine,
# not "by time"; the window bound proves 17, above the live size 16
awk 'BEGIN { print "id,lower,upper,size"; n = split("0,4,10,6 1,2,7,5 2,0,2,7 3,7,13,8 4,1,3,5 5,0,1,6 6,1,6,4", r, " ")
    for (k = 0; k < 3000; k++) for (j = 1; j <= n; j++) { split(r[j], f, ","); printf "g%d_%s,%d,%d,%d\n", k, f[1], f[2] + 13 * k, f[3] + 13 * k, f[4] } }' \
    > "$work/gaps.csv"
"$roamc" layout "$work/gaps.csv" --engine both --time-limit 60 > "$work/log" 2>&1 || fail "gaps: exit $?: $(cat "$work/log")"
grep -q "^status: stopped: no more improvement found (the exact search takes no list this large)" "$work/log" ||
    fail "gaps: stop reason: $(cat "$work/log")"
grep -q "by time" "$work/log" && fail "gaps: says by time: $(cat "$work/log")"
grep -q "^proven lower bound: 17 bytes" "$work/log" || fail "gaps: window bound: $(cat "$work/log")"
grep -q "^window bound: 17 bytes" "$work/log" || fail "gaps: no window bound line: $(cat "$work/log")"
secs=$(sed -n 's/^time: \([0-9]*\)\..*/\1/p' "$work/log")
[ "${secs:-99}" -lt 30 ] || fail "gaps: took $secs s of 60"
# with the local improvement (the default), the optimum 17, proved
"$roamc" layout "$work/gaps.csv" --time-limit 60 > "$work/log" 2>&1 || fail "gaps default: exit $?"
grep -q "^height: 17 bytes" "$work/log" || fail "gaps default: $(cat "$work/log")"
grep -q "^status: optimal" "$work/log" || fail "gaps default: not optimal: $(cat "$work/log")"
"$roamc" layout "$work/perfect.csv" --engine nope > /dev/null 2>&1
[ $? -eq 2 ] || fail "--engine nope: not exit 2"
"$roamc" layout "$work/perfect.csv" --work 0 > /dev/null 2>&1
[ $? -eq 2 ] || fail "--work 0: not exit 2"
test_finish test_layout_solve
