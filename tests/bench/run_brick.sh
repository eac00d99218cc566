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
here=$(cd "$(dirname "$0")" && pwd)
if [ -n "${BRICK_RUN:-}" ]; then
    # LIVE grows with n as gen_brick's default does; RUN from BRICK_RUN
    GEN_ARGS_PER_N="echo \$((8 + \$1 / 25)) 1048576 $BRICK_RUN"
    export GEN_ARGS_PER_N
fi
exec "$here/gen_rate.sh" capacity "$1" "$2" "${3:-100 200 400 800}" "${4:-20}" "${5:-10}"
