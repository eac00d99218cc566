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
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/gen_rate.sh" bound "$1" "$2" "${3:-150 300 450}" "${4:-20}" "${5:-10}"
