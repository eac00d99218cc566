/* bench_rng.h — the random numbers of the instance generators (gen_brick.c,
 * gen_perfect.c, gen_strip.c): xorshift64, seeded from the command line, so that a seed
 * names the same instance on every machine.  Header only: each generator
 * is one file built with `cc -O2 -o gen gen.c`. */
#ifndef ROAMC_BENCH_RNG_H
#define ROAMC_BENCH_RNG_H

#include <stdint.h>
#include <stdlib.h>

typedef struct bench_rng {
    uint64_t state; /* never 0 */
} bench_rng;

/* The generator for seed (a decimal string, as given on the command line). */
static inline bench_rng bench_rng_seed(const char *seed) {
    return (bench_rng){strtoull(seed, NULL, 10) * 0x9e3779b97f4a7c15ULL + 1};
}

static inline uint64_t bench_rng_next(bench_rng *r) {
    uint64_t x = r->state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return r->state = x;
}

/* Uniform in [lo, hi), hi > lo (up to the bias of a modulo). */
static inline uint64_t bench_rng_range(bench_rng *r, uint64_t lo, uint64_t hi) {
    return lo + bench_rng_next(r) % (hi - lo);
}

/* qsort comparator of uint64_t, ascending. */
static inline int bench_cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Cuts [a0, a1) at m - 1 distinct random points into `cuts` (m + 1 bounds,
 * a0 first and a1 last); 1 <= m <= a1 - a0.  Example: a0 = 0, a1 = 10,
 * m = 3 gives cuts = {0, c1, c2, 10} with 0 < c1 < c2 < 10. */
static inline void bench_cut_interval(bench_rng *r, uint64_t a0, uint64_t a1, size_t m,
                                      uint64_t *cuts) {
    cuts[0] = a0;
    size_t k = 1;
    while (k < m) {
        uint64_t c = bench_rng_range(r, a0 + 1, a1);
        int dup = 0;
        for (size_t i = 1; i < k; i++) dup |= cuts[i] == c;
        if (!dup) cuts[k++] = c;
    }
    qsort(cuts + 1, m - 1, sizeof *cuts, bench_cmp_u64);
    cuts[m] = a1;
}

#endif
