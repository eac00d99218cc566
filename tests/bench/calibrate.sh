#!/bin/sh
# calibrate.sh ROAMC MINIMALLOC TIME_LIMIT FILE.csv...
#
# Runs `roamc layout` and a dedicated static-allocation solver, minimalloc
# (github.com/google/minimalloc, ASPLOS 2023; not part of this project: build
# it yourself and give the path of its binary), on the same buffer CSVs at
# their live-size bound (the most bytes live at any step: zero slack), each
# with TIME_LIMIT seconds, one run at a time, and prints one line per file:
#
#   FILE BUFFERS BOUND  roamc: ok|--  SECONDS  minimalloc: ok|--  SECONDS
#
# then the solved counts of both.  Buffers of size 0 are left out of
# minimalloc's copy of the file.  ok: a layout within the bound was found
# (roamc's `height:` at most the bound; minimalloc's exit 0 with its own
# `--validate` passing).  An unsolved run counts as its reported time.  The
# time of each is what the solver itself reports (roamc's `time:` line,
# minimalloc's "Elapsed time").  Both read the CSV of DESIGN.md (header
# id,lower,upper,size; half-open lifetimes).
#
# MINIMALLOC may be `-` (or a path that is not an executable): then only
# roamc runs and the script says SKIP for minimalloc.  ROAMC_OPTS passes
# more options to roamc.
#
# Example (make the instances first, e.g. with gen_brick / gen_perfect):
#   tests/bench/calibrate.sh build/roamc /tmp/minimalloc/mm 10 tests/bench/instances/*.csv
set -eu
roamc=$1
mm=$2
limit=$3
shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ "$mm" = - ] || [ ! -x "$mm" ]; then
    echo "calibrate.sh: SKIP minimalloc (no executable at '$mm'): roamc only" >&2
    mm=""
fi
n_files=0 r_ok=0 m_ok=0 r_total=0 m_total=0
for f in "$@"; do
    # live-size bound: the most bytes live at one step (lifetimes [lower, upper))
    bound=$(awk -F, 'NR > 1 { d[$2] += $4; d[$3] -= $4; if (!($2 in s)) { s[$2] = 1; t[++n] = $2 }
                              if (!($3 in s)) { s[$3] = 1; t[++n] = $3 } }
        END { m = 0; for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (t[j] + 0 < t[i] + 0) { x = t[i]; t[i] = t[j]; t[j] = x }
              live = 0; for (i = 1; i <= n; i++) { live += d[t[i]]; if (live > m) m = live } printf "%.0f", m }' "$f")
    nbuf=$(($(wc -l < "$f") - 1))
    # shellcheck disable=SC2086
    "$roamc" layout "$f" --capacity "$bound" --time-limit "$limit" ${ROAMC_OPTS:-} > "$work/r.log" 2>&1 || true
    h=$(sed -n 's/^height: \([0-9]*\).*/\1/p' "$work/r.log")
    rt=$(sed -n 's/^time: \([0-9.]*\).*/\1/p' "$work/r.log")
    rt=${rt:-$limit}
    if [ -n "$h" ] && [ "$h" -le "$bound" ]; then rs=ok; r_ok=$((r_ok + 1)); else rs=--; fi
    r_total=$(echo "$r_total + $rt" | bc -l)
    if [ -n "$mm" ]; then
        # minimalloc mishandles empty buffers (it "proves" efficientnet_b0_b1
        # infeasible with them): they need no memory, so they are left out
        awk -F, 'NR == 1 || $4 > 0' "$f" > "$work/m_in.csv"
        if "$mm" --input="$work/m_in.csv" --capacity="$bound" --timeout="${limit}s" --validate \
            --output="$work/m.csv" > "$work/m.log" 2>&1 && grep -q "Validation PASS" "$work/m.log"; then
            ms=ok; m_ok=$((m_ok + 1))
        else
            ms=--
        fi
        mt=$(sed -n 's/.*Elapsed time \([0-9.]*\)s.*/\1/p' "$work/m.log")
        mt=${mt:-$limit}
        m_total=$(echo "$m_total + $mt" | bc -l)
    else
        ms=SKIP mt=0
    fi
    n_files=$((n_files + 1))
    printf "%s %d %d  roamc: %s %.2f  minimalloc: %s %.2f\n" "$(basename "$f" .csv)" "$nbuf" "$bound" \
        "$rs" "$rt" "$ms" "$mt"
done
if [ -n "$mm" ]; then m_ok="$m_ok/$n_files"; else m_ok=SKIP; fi
printf "solved: roamc %d/%d (mean %.2f s), minimalloc %s (mean %.2f s)\n" "$r_ok" "$n_files" \
    "$(echo "$r_total / ($n_files + ($n_files == 0))" | bc -l)" "$m_ok" \
    "$(echo "$m_total / ($n_files + ($n_files == 0))" | bc -l)"
