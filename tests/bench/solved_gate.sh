#!/usr/bin/env bash
# solved_gate.sh ROAMC [LIST]
#
# The layout engine's no-give-up gate (issue 40): every zero-slack instance
# that some main of roamc has solved (a layout at the live-size bound,
# `roamc layout --capacity BOUND`) must still be solved.  LIST (default
# tests/bench/solved_list.txt, next to this script) names them, one a line:
#
#   NAME  SECONDS  SOLVED_BY  SOURCE...
#
# NAME: the instance's name; SECONDS: the time limit the gate gives it
# (at least twice what the main that solved it took, so a loaded machine
# does not fail it); SOLVED_BY: the main(s) that solved it (commit@limit),
# for the record; SOURCE: a generator of tests/bench and its arguments
# (gen_perfect 450 1: deterministic, so nothing large is committed), or
# `file X.csv` for a list of tests/bench/instances.  Lines starting with #
# are comments.  When a main solves an instance the list lacks (say in
# layout_families.sh), add a line: the list only grows.
#
# Prints one line per instance and a summary; exit 0 when every instance
# is solved, 1 when some main solved one that ROAMC does not (the lines
# say which), 2 on bad usage or a bad line.  Environment: SCALE (multiply
# every SECONDS, default 1), CC (default cc), KEEP (a folder to keep the
# instances and logs in).
set -u
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $0 ROAMC [LIST]" >&2; exit 2; }
roamc=$1
here=$(cd "$(dirname "$0")" && pwd)
list=${2:-$here/solved_list.txt}
[ -x "$roamc" ] || { echo "$0: $roamc: not executable" >&2; exit 2; }
[ -r "$list" ] || { echo "$0: $list: cannot read" >&2; exit 2; }
scale=${SCALE:-1}
work=${KEEP:-$(mktemp -d)}
mkdir -p "$work"
[ -n "${KEEP:-}" ] || trap 'rm -rf "$work"' EXIT

# make_instance NAME SOURCE... -> the instance's path (built on demand)
make_instance() {
    local name=$1 gen=$2
    shift 2
    if [ "$gen" = file ]; then
        echo "$here/instances/$1"
        return
    fi
    [ -r "$here/$gen.c" ] || return 1
    [ -x "$work/$gen" ] || ${CC:-cc} -O2 -o "$work/$gen" "$here/$gen.c" || return 1
    [ -s "$work/$name.csv" ] || "$work/$gen" "$@" > "$work/$name.csv" || return 1
    echo "$work/$name.csv"
}

n=0 solved=0 lost=0
while read -r name secs by gen args; do
    case $name in '' | '#'*) continue ;; esac
    # shellcheck disable=SC2086
    f=$(make_instance "$name" "$gen" $args) && [ -s "$f" ] ||
        { echo "$0: $list: $name: cannot make the instance ($gen $args)" >&2; exit 2; }
    lb=$("$roamc" layout "$f" --method llfb 2>/dev/null < /dev/null | sed -n 's/^lower bound: \([0-9]*\).*/\1/p')
    [ -n "$lb" ] || { echo "$0: $name: no live-size bound from $roamc" >&2; exit 2; }
    limit=$(echo "$secs * $scale" | bc -l)
    "$roamc" layout "$f" --capacity "$lb" --time-limit "$limit" < /dev/null > "$work/$name.log" 2>&1
    h=$(sed -n 's/^height: \([0-9]*\).*/\1/p' "$work/$name.log")
    t=$(sed -n 's/^time: \([0-9.]*\).*/\1/p' "$work/$name.log")
    n=$((n + 1))
    if [ -n "$h" ] && [ "$h" -le "$lb" ]; then
        solved=$((solved + 1))
        echo "ok    $name ${t:-?} s (limit $limit s; solved by $by)"
    else
        lost=$((lost + 1))
        echo "LOST  $name: no layout at the bound $lb in $limit s; solved by $by"
    fi
done < "$list"
echo "solved $solved of $n listed instances, $lost lost"
[ "$lost" = 0 ]
