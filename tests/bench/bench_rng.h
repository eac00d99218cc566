/* bench_rng.h — the random numbers of the instance generators (gen_brick.c,
 * gen_perfect.c): xorshift64, seeded from the command line, so that a seed
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

#endif
