#!/usr/bin/python3
"""slack_unroll.py IN.csv K OUT.csv -- K training steps of one buffer list, one after another.

IN.csv is a buffer list of one step (`roamc MODEL --dump-buffers`, half-open
lifetimes id,lower,upper,size).  The buffers live over the whole step (the
weights, the optimizer state, the inputs: lower at the first step and upper at
the end) stay one buffer live over all K steps; every other buffer is repeated
K times, step k's copy shifted by k * (the step's length).  That is the layout
problem of a planner that lays out K steps at once (unrolled), with K times the
buffers and the same live-size bound.  Deterministic; used by
tests/bench/slack_lists.sh to reach 10k-100k buffers from our graphs.
"""
import sys


def main(argv):
    if len(argv) != 4:
        sys.stderr.write("usage: slack_unroll.py IN.csv K OUT.csv\n")
        return 2
    src, k, dst = argv[1], int(argv[2]), argv[3]
    rows = []
    with open(src) as f:
        head = f.readline().strip()
        if head != "id,lower,upper,size":
            sys.stderr.write("slack_unroll.py: %s: header %r, want id,lower,upper,size\n" % (src, head))
            return 2
        for line in f:
            i, lo, hi, size = line.strip().split(",")
            rows.append((i, int(lo), int(hi), int(size)))
    first = min(r[1] for r in rows)
    last = max(r[2] for r in rows)
    span = last - first
    with open(dst, "w") as out:
        out.write("id,lower,upper,size\n")
        for i, lo, hi, size in rows:
            if lo == first and hi == last:
                out.write("%s,%d,%d,%d\n" % (i, first, first + k * span, size))
                continue
            for s in range(k):
                out.write("s%d.%s,%d,%d,%d\n" % (s, i, lo + s * span, hi + s * span, size))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
