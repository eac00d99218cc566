/* gen_brick — writes a zero-slack buffer-list CSV that is NOT a guillotine
 * packing.
 *
 *   gen_brick N SEED [LIVE] [CAPACITY] [RUN] > buffers.csv
 *
 * The address range [0, CAPACITY) is kept exactly covered by the live
 * buffers at every step, like a brick wall built over time.  At step 0 it is
 * cut at random points into about LIVE buffers.  Then, one step at a time, a
 * random run of 1 to 3 buffers that are neighbours in address ends at that
 * step, and the address range they freed (their union, a single interval) is
 * cut again at NEW random points into 1 to 4 buffers that start at that step
 * (more pieces when fewer than LIVE buffers are live, fewer when more).
 * Because a new cut crosses the old joints, the packing has no guillotine
 * structure in general (gen_perfect.c makes only guillotine ones, which a
 * greedy can unwind cut by cut).  When N buffers exist, every live buffer
 * lives to the last step.
 *
 * Every step is covered exactly, so the live-size lower bound is CAPACITY
 * and the layout the cuts describe has height CAPACITY: the optimum equals
 * the bound, with no slack at any step.  The file holds only the buffers,
 * not that layout.  Lifetimes are half-open [lower, upper); ids b0, b1, ...
 *
 * Each live buffer starts such a run with probability 1/RUN, so about
 * LIVE / (2 RUN) runs end at each step: with the default RUN = 3 many
 * buffers start at each step and must be shared out among several holes
 * (hard: the search has to match them); RUN = LIVE gives about one hole
 * per step (milder, closer to a program that frees and allocates a few
 * buffers per operator).
 *
 * Defaults: LIVE = 8 + N / 25, CAPACITY = 1048576, RUN = 3.  The random generator is
 * a fixed xorshift, so the same arguments give the same file everywhere.
 * Build: cc -O2 -o gen_brick tests/bench/gen_brick.c
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_rng.h"

typedef struct brick {
    int64_t t0, t1;  /* lifetime [t0, t1); t1 < 0 while live */
    uint64_t a0, a1; /* addresses [a0, a1) */
} brick;

static bench_rng rng; /* one generator per run */

int main(int argc, char **argv) {
    if (argc < 3 || argc > 6) {
        fprintf(stderr, "usage: gen_brick N SEED [LIVE] [CAPACITY] [RUN]\n");
        return 2;
    }
    size_t n = strtoull(argv[1], NULL, 10);
    rng = bench_rng_seed(argv[2]);
    size_t live_target = argc > 3 ? strtoull(argv[3], NULL, 10) : 8 + n / 25;
    uint64_t capacity = argc > 4 ? strtoull(argv[4], NULL, 10) : 1048576;
    uint64_t run = argc > 5 ? strtoull(argv[5], NULL, 10) : 3;
    if (n < 1 || live_target < 1 || capacity < live_target || capacity < 4 || run < 1) {
        fprintf(stderr, "gen_brick: N, LIVE and RUN must be >= 1, CAPACITY >= max(LIVE, 4)\n");
        return 2;
    }
    if (live_target > n) live_target = n;
    brick *b = malloc(n * sizeof *b);
    size_t *live = malloc(n * sizeof *live); /* live bricks in address order */
    uint64_t cuts[8];
    uint64_t *first = malloc((live_target + 1) * sizeof *first);
    if (!b || !live || !first) return 1;
    bench_cut_interval(&rng, 0, capacity, live_target, first);
    size_t nb = 0, nl = 0;
    for (size_t i = 0; i < live_target; i++) {
        b[nb] = (brick){0, -1, first[i], first[i + 1]};
        live[nl++] = nb++;
    }
    free(first);
    size_t *next = malloc(n * sizeof *next);
    if (!next) return 1;
    int64_t t = 0;
    while (nb < n) {
        t++;
        /* Walk the live bricks in address order: each one starts, with
         * probability 1/RUN, a run of 1 to 3 neighbours that ends at t; the
         * address range a run frees (one interval) is cut again at new random
         * points into m bricks that start at t.  Several runs end at the same
         * step, so the bricks that start at t must be shared out among
         * several holes. */
        size_t nn = 0, i = 0;
        while (i < nl) {
            if (nb >= n || bench_rng_next(&rng) % run != 0) {
                next[nn++] = live[i++];
                continue;
            }
            size_t r = 1 + bench_rng_range(&rng, 0, 3);
            if (r > nl - i) r = nl - i;
            uint64_t a0 = b[live[i]].a0, a1 = b[live[i + r - 1]].a1;
            for (size_t k = i; k < i + r; k++) b[live[k]].t1 = t;
            size_t now = nn + (nl - i - r); /* live count without this run's new bricks */
            size_t m = 1 + bench_rng_range(&rng, 0, 4);
            if (now + m < live_target && m < 4)
                m++;
            else if (now + m > live_target && m > 1)
                m--;
            if (m > n - nb) m = n - nb;
            if (m > a1 - a0) m = (size_t)(a1 - a0);
            bench_cut_interval(&rng, a0, a1, m, cuts);
            for (size_t k = 0; k < m; k++) {
                b[nb] = (brick){t, -1, cuts[k], cuts[k + 1]};
                next[nn++] = nb++;
            }
            i += r;
        }
        memcpy(live, next, nn * sizeof *live);
        nl = nn;
    }
    free(next);
    for (size_t i = 0; i < nl; i++) b[live[i]].t1 = t + 1;
    printf("id,lower,upper,size\n");
    for (size_t i = 0; i < nb; i++)
        printf("b%zu,%" PRId64 ",%" PRId64 ",%" PRIu64 "\n", i, b[i].t0, b[i].t1,
               b[i].a1 - b[i].a0);
    free(b);
    free(live);
    return 0;
}
