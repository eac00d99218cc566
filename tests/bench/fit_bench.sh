#!/bin/sh
# Issue 27 ("Make it fit"): the target table from one run.
#
# usage: tests/bench/fit_bench.sh [fit_bench.py options]
#   --roamc PATH   (default build/roamc)     --out DIR (default tests/bench/results)
#   --work DIR     (default $TMPDIR/roamc_fit_bench: exports, changed steps, plans)
#   --models resnet50,vit_b_16,bert-base,gpt2   --sweep N (default 20)
#   --no-baselines --no-max-batch
#
# For resnet50 b32, vit_b_16 b32, bert-base b32 and gpt2 b8 seq 1024 it fits
# the step with roamc --fit at 75%, 50%, 35% of the non-persistent part and at
# the least budget roamc reaches, checks every changed step with
# check_plan.py, sweeps N budgets for monotonicity, runs
# models/fit_baselines.py (sqrt(n) checkpointing, functorch min-cut) at CPU
# sizes side by side with roamc at the same size, finds the largest batch
# under 16 GiB with --fit --max-overhead 33%, and draws the memory/overhead
# curve.  Writes OUT/fit.md, fit.csv, fit_sweep.csv, fit_baselines.csv,
# fit_max_batch.csv, fit_curve.svg.  See fit_bench.py's docstring.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
exec /usr/bin/python3 "$here/fit_bench.py" "$@"
