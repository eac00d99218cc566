/* gen_perfect — writes a buffer-list CSV whose optimal layout has no slack.
 *
 *   gen_perfect N SEED [STEPS] [CAPACITY] > buffers.csv
 *
 * A CAPACITY x STEPS rectangle (address x time) is cut into N pieces by
 * recursive guillotine cuts: a random piece is cut in two, either in time
 * (two buffers with the same address range, one after the other) or in
 * address (two buffers with the same lifetime, one above the other).  Every
 * step is then covered exactly, so the live-size lower bound is CAPACITY and
 * a layout of height CAPACITY exists (the one the cuts describe): the
 * optimum equals the lower bound, with no slack anywhere.  The file holds
 * only the buffers, not that layout.
 *
 * Defaults: STEPS = 4 N, CAPACITY = 1048576.  The random generator is a
 * fixed xorshift, so the same arguments give the same file everywhere.
 * Build: cc -O2 -o gen_perfect tests/bench/gen_perfect.c
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_rng.h"

typedef struct piece {
    int64_t t0, t1;  /* lifetime [t0, t1) */
    uint64_t a0, a1; /* addresses [a0, a1) */
} piece;

static bench_rng rng; /* one generator per run */

int main(int argc, char **argv) {
    if (argc < 3 || argc > 5) {
        fprintf(stderr, "usage: gen_perfect N SEED [STEPS] [CAPACITY]\n");
        return 2;
    }
    size_t n = strtoull(argv[1], NULL, 10);
    rng = bench_rng_seed(argv[2]);
    int64_t steps = argc > 3 ? strtoll(argv[3], NULL, 10) : 4 * (int64_t)n;
    uint64_t capacity = argc > 4 ? strtoull(argv[4], NULL, 10) : 1048576;
    if (n < 1 || steps < 1 || capacity < 1) {
        fprintf(stderr, "gen_perfect: N, STEPS and CAPACITY must be >= 1\n");
        return 2;
    }
    piece *p = malloc(n * sizeof *p);
    if (!p) return 1;
    size_t np = 1;
    p[0] = (piece){0, steps, 0, capacity};
    size_t tries = 0;
    while (np < n && tries < 1000 * n) {
        tries++;
        piece *x = &p[bench_rng_range(&rng, 0, np)];
        int can_time = x->t1 - x->t0 > 1, can_addr = x->a1 - x->a0 > 1;
        if (!can_time && !can_addr) continue;
        int in_time = can_time && (!can_addr || bench_rng_next(&rng) % 2);
        piece y = *x;
        if (in_time) {
            int64_t cut = (int64_t)bench_rng_range(&rng, (uint64_t)x->t0 + 1, (uint64_t)x->t1);
            x->t1 = cut;
            y.t0 = cut;
        } else {
            uint64_t cut = bench_rng_range(&rng, x->a0 + 1, x->a1);
            x->a1 = cut;
            y.a0 = cut;
        }
        p[np++] = y;
    }
    printf("id,lower,upper,size\n");
    for (size_t i = 0; i < np; i++)
        printf("b%zu,%" PRId64 ",%" PRId64 ",%" PRIu64 "\n", i, p[i].t0, p[i].t1,
               p[i].a1 - p[i].a0);
    free(p);
    return 0;
}
