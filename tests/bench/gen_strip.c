/* gen_strip — writes a zero-slack buffer-list CSV that is NOT a guillotine
 * packing, made as a random rectangle packing of a CAPACITY x time strip.
 *
 *   gen_strip N SEED [LIVE] [CAPACITY] [REUSE] [MERGE] [DROP] > buffers.csv
 *
 * The strip [0, CAPACITY) x time is filled from the left (time 0) like a
 * skyline over the address axis: each address segment holds one buffer
 * and is free again when that buffer ends.  A buffer's lifetime is drawn
 * when it starts (1 to 2 LIVE steps, uniform), independently of its
 * neighbours', so buffers end one or a few at a time, as in a program.
 * At the earliest time t at which some segments are free, each run of
 * neighbouring free segments is filled again by 1 to 4 new buffers that
 * start at t and cover it exactly; the run's joints are kept as cut points
 * with probability REUSE percent each (a new buffer then often has the size
 * of the one it replaces, as tensors of one shape are freed and allocated
 * again), the other cut points are random.  Before filling, with
 * probability MERGE percent a live neighbour of a run is trimmed: its
 * lifetime is cut short to end at t, and its segment joins the run (the
 * only way segments merge, so that sizes do not only shrink).
 *
 * Every step is covered exactly (live bytes == CAPACITY; DROP below
 * relaxes it), so the live-size lower bound is CAPACITY and the packing
 * the skyline built has height CAPACITY: the optimum equals the bound,
 * with no slack at any step.  The
 * new cuts cross the old joints, so the packing is not guillotine in
 * general.  The file holds only the buffers, not that layout.  Lifetimes
 * are half-open [lower, upper); ids b0, b1, ...  When N buffers exist, the
 * live ones all end at the same last step.
 *
 * DROP (percent, default 0) leaves each buffer that starts after step 0
 * out of the file with that probability: the packing of the rest is still
 * there, step 0 is still covered exactly (so the bound is still CAPACITY
 * and reached), but the other steps get slack where a buffer was dropped:
 * zero slack at the peak only, as in a program's buffer list.  N counts
 * the buffers written.
 *
 * Compared with gen_brick.c, whose bricks end by a coin flip per step in
 * runs of 1 to 3 neighbours (several holes at once, recut at random points
 * only), few segments free at a time here, and new buffers often reuse
 * the freed sizes.
 *
 * Defaults: LIVE = 8 + N / 25, CAPACITY = 1048576, REUSE = 50, MERGE = 30,
 * DROP = 0.
 * The random generator is a fixed xorshift (bench_rng.h), so the same
 * arguments give the same file everywhere.
 * Build: cc -O2 -o gen_strip tests/bench/gen_strip.c
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_rng.h"

typedef struct strip_buf {
    int64_t t0, t1; /* lifetime [t0, t1): t1 is the planned end while live */
    uint64_t size;
    int kept; /* written to the file (DROP) */
} strip_buf;

/* A segment of the skyline: addresses [a0, a1) held by buffer b. */
typedef struct seg {
    uint64_t a0, a1;
    size_t b;
} seg;

static bench_rng rng; /* one generator per run */

int main(int argc, char **argv) {
    if (argc < 3 || argc > 8) {
        fprintf(stderr, "usage: gen_strip N SEED [LIVE] [CAPACITY] [REUSE] [MERGE] [DROP]\n");
        return 2;
    }
    size_t n = strtoull(argv[1], NULL, 10);
    rng = bench_rng_seed(argv[2]);
    size_t live = argc > 3 ? strtoull(argv[3], NULL, 10) : 8 + n / 25;
    uint64_t capacity = argc > 4 ? strtoull(argv[4], NULL, 10) : 1048576;
    uint64_t reuse = argc > 5 ? strtoull(argv[5], NULL, 10) : 50;
    uint64_t merge = argc > 6 ? strtoull(argv[6], NULL, 10) : 30;
    uint64_t drop = argc > 7 ? strtoull(argv[7], NULL, 10) : 0;
    if (n < 1 || live < 1 || capacity < live || capacity < 4 || reuse > 100 || merge > 100 ||
        drop >= 100) {
        fprintf(stderr, "gen_strip: N, LIVE >= 1, CAPACITY >= max(LIVE, 4), REUSE and MERGE "
                        "percentages\n");
        return 2;
    }
    if (live > n) live = n;
    size_t bcap = 2 * n;
    strip_buf *b = malloc(bcap * sizeof *b); /* every buffer made, kept or dropped */
    seg *sk = malloc(n * sizeof *sk);        /* the skyline, in address order */
    seg *next = malloc(n * sizeof *next);    /* the skyline being rebuilt */
    uint64_t *cuts = malloc((n + 8) * sizeof *cuts);
    if (!b || !sk || !next || !cuts) return 1;
    int64_t dmax = 2 * (int64_t)live;
    size_t nb = 0, ns = 0, nkept = 0;

    /* time 0: [0, capacity) cut at live - 1 random points */
    bench_cut_interval(&rng, 0, capacity, live, cuts);
    for (size_t i = 0; i < live; i++) {
        b[nb] = (strip_buf){0, (int64_t)bench_rng_range(&rng, 1, (uint64_t)dmax + 1),
                            cuts[i + 1] - cuts[i], 1};
        nkept++;
        sk[ns++] = (seg){cuts[i], cuts[i + 1], nb++};
    }

    int64_t t = 0;
    while (nkept < n) {
        t = INT64_MAX;
        for (size_t i = 0; i < ns; i++)
            if (b[sk[i].b].t1 < t) t = b[sk[i].b].t1;
        /* free[i]: segment i is free at t (its buffer ends at t, or is
         * trimmed to) */
        unsigned char *fr = calloc(ns, 1);
        if (!fr) return 1;
        for (size_t i = 0; i < ns; i++) fr[i] = b[sk[i].b].t1 == t;
        for (size_t i = 0; i < ns; i++) {
            if (!fr[i] || (i > 0 && fr[i - 1] == 1)) continue; /* first of a run */
            size_t j = i;
            while (j + 1 < ns && fr[j + 1] == 1) j++;
            /* trim a live neighbour into the run (marked 2: joined, so it
             * does not start a run of its own) */
            if (bench_rng_range(&rng, 0, 100) < merge) {
                int left = bench_rng_next(&rng) % 2;
                size_t nbh = left ? i - 1 : j + 1;
                if (left && i > 0 && !fr[i - 1] && b[sk[i - 1].b].t0 < t)
                    fr[nbh] = 2;
                else if (!left && j + 1 < ns && !fr[j + 1] && b[sk[j + 1].b].t0 < t)
                    fr[nbh] = 2;
            }
            i = j;
        }
        size_t nn = 0;
        for (size_t i = 0; i < ns;) {
            if (!fr[i]) {
                next[nn++] = sk[i++];
                continue;
            }
            size_t j = i;
            while (j < ns && fr[j]) j++; /* run [i, j) */
            if (nkept == n) {
                /* no buffer left to fill it: its buffers live on to the
                 * last step instead */
                while (i < j) next[nn++] = sk[i++];
                continue;
            }
            for (size_t q = i; q < j; q++) b[sk[q].b].t1 = t;
            uint64_t a0 = sk[i].a0, a1 = sk[j - 1].a1;
            /* live count without this run's new buffers steers m */
            size_t now = nn + (ns - j);
            size_t m = 1 + bench_rng_range(&rng, 0, 4);
            if (now + m < live && m < 4)
                m++;
            else if (now + m > live && m > 1)
                m--;
            if (m > n - nkept) m = n - nkept;
            if (m > a1 - a0) m = (size_t)(a1 - a0);
            /* cut points: the run's joints kept with probability reuse,
             * then random ones up to m - 1 */
            size_t nc = 0;
            for (size_t q = i + 1; q < j && nc + 1 < m; q++)
                if (bench_rng_range(&rng, 0, 100) < reuse) cuts[1 + nc++] = sk[q].a0;
            while (nc + 1 < m) {
                uint64_t c = bench_rng_range(&rng, a0 + 1, a1);
                int dup = 0;
                for (size_t q = 1; q <= nc; q++) dup |= cuts[q] == c;
                if (!dup) cuts[1 + nc++] = c;
            }
            qsort(cuts + 1, nc, sizeof *cuts, bench_cmp_u64);
            cuts[0] = a0;
            cuts[nc + 1] = a1;
            for (size_t q = 0; q <= nc; q++) {
                int64_t d = (int64_t)bench_rng_range(&rng, 1, (uint64_t)dmax + 1);
                int kept = bench_rng_range(&rng, 0, 100) >= drop;
                if (nb == bcap) {
                    bcap *= 2;
                    b = realloc(b, bcap * sizeof *b);
                    if (!b) return 1;
                }
                b[nb] = (strip_buf){t, t + d, cuts[q + 1] - cuts[q], kept};
                nkept += kept;
                next[nn++] = (seg){cuts[q], cuts[q + 1], nb++};
            }
            i = j;
        }
        free(fr);
        memcpy(sk, next, nn * sizeof *sk);
        ns = nn;
    }
    /* the live buffers all end one step after the last start */
    for (size_t i = 0; i < ns; i++) b[sk[i].b].t1 = t + 1;
    printf("id,lower,upper,size\n");
    for (size_t i = 0, id = 0; i < nb; i++)
        if (b[i].kept)
            printf("b%zu,%" PRId64 ",%" PRId64 ",%" PRIu64 "\n", id++, b[i].t0, b[i].t1, b[i].size);
    free(b);
    free(sk);
    free(next);
    free(cuts);
    return 0;
}
