/* gen_skyline — writes a zero-slack buffer-list CSV that is NOT a
 * guillotine packing, made as stacks of varying height over time whose
 * tops are filled like a skyline (the address axis is the height).
 *
 *   gen_skyline N SEED [STEPS] [CAPACITY] [SNAP] [SPLIT] > buffers.csv
 *
 * The rectangle [0, STEPS) x [0, CAPACITY) (time x address) is tiled by N
 * buffers, filled from address 0 upwards: the skyline is the height H(t)
 * reached so far at each step.  Repeatedly, the lowest segment of the
 * skyline (the first maximal run of steps [a, b) at the least height h) is
 * cut in time at random points into 1 to SPLIT pieces, and each piece gets
 * one new buffer, living over the piece's steps, placed at h with a random
 * size (so the pieces become stacks of different heights).  The size is
 * drawn so that the remaining area shares out over the remaining buffers
 * (the file has exactly N of them); with probability SNAP percent a piece
 * next to a higher neighbour of the segment takes the size that brings
 * its top level with the neighbour's, so the two merge and a later buffer
 * spans the joint -- the step that makes the packing non-guillotine (a
 * buffer over a joint of two stacks of different depths).  When as many
 * buffers are left as segments below CAPACITY, each segment is finished by
 * one buffer reaching CAPACITY.
 *
 * Every step is covered exactly (live bytes == CAPACITY), so the live-size
 * lower bound is CAPACITY and the tiling has height CAPACITY: the optimum
 * equals the bound, with no slack at any step.  The file holds only the
 * buffers, in creation order (bottom to top), not that layout.  Lifetimes
 * are half-open [lower, upper); ids b0, b1, ...
 *
 * Compared with gen_strip.c (a skyline over the address axis, filled in
 * time order: buffers start when space frees) and gen_brick.c (runs of
 * neighbours end together and are recut), here the packing is built in
 * address order: many buffers start at once at the segment's first step,
 * lifetimes are nested in stacks and crossed at merged joints, and a
 * step's buffers are not made in time order at all.
 *
 * Defaults: STEPS = 4 + N / 3, CAPACITY = 1048576, SNAP = 80, SPLIT = 2.
 * If the draws run out of room (a segment one byte high and one step wide
 * that must take two buffers), the instance is drawn again from the next
 * stream of the same seed, so the same arguments give the same file
 * everywhere (xorshift of bench_rng.h).
 * Build: cc -O2 -o gen_skyline tests/bench/gen_skyline.c
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_rng.h"

typedef struct sky_buf {
    int64_t t0, t1; /* lifetime [t0, t1) */
    uint64_t size;
} sky_buf;

/* The instance being drawn: the skyline and the buffers made so far. */
typedef struct sky {
    size_t n, steps;
    uint64_t capacity, snap, split;
    uint64_t *h; /* skyline height per step */
    sky_buf *b;
    size_t nb;
    bench_rng rng;
} sky;

/* Segments of the skyline below capacity (maximal runs of equal height). */
static size_t sky_open_segments(const sky *s) {
    size_t c = 0;
    for (size_t t = 0; t < s->steps; t++)
        if (s->h[t] < s->capacity && (t == 0 || s->h[t - 1] != s->h[t])) c++;
    return c;
}

/* Area left to fill. */
static uint64_t sky_area_left(const sky *s) {
    uint64_t a = 0;
    for (size_t t = 0; t < s->steps; t++) a += s->capacity - s->h[t];
    return a;
}

static void sky_push(sky *s, size_t t0, size_t t1, uint64_t size) {
    s->b[s->nb++] = (sky_buf){(int64_t)t0, (int64_t)t1, size};
    for (size_t t = t0; t < t1; t++) s->h[t] += size;
}

/* One draw of the whole instance; 0 when it ran out of room. */
static int sky_draw(sky *s) {
    memset(s->h, 0, s->steps * sizeof *s->h);
    s->nb = 0;
    size_t cuts_cap = s->split + 1;
    uint64_t cuts[16];
    if (cuts_cap > 16) return 0;
    while (s->nb < s->n) {
        size_t left = s->n - s->nb;
        size_t open = sky_open_segments(s);
        if (open == 0) return 0; /* filled with buffers to spare */
        /* the lowest segment [a, z) at height lo */
        uint64_t lo = UINT64_MAX;
        size_t a = 0;
        for (size_t t = 0; t < s->steps; t++)
            if (s->h[t] < lo) lo = s->h[t], a = t;
        size_t z = a;
        while (z < s->steps && s->h[z] == lo) z++;
        uint64_t room = s->capacity - lo;
        if (left == open) { /* one buffer per segment from now on */
            sky_push(s, a, z, room);
            continue;
        }
        /* pieces: at most what the buffers left allow (every piece may
         * stay an open segment of its own) */
        size_t m = 1 + bench_rng_range(&s->rng, 0, s->split);
        size_t most = (left - open + 1) / 2;
        if (m > most) m = most;
        if (m > z - a) m = z - a;
        if (m < 1) m = 1;
        bench_cut_interval(&s->rng, a, z, m, cuts);
        uint64_t share = sky_area_left(s) / left; /* area per buffer left */
        uint64_t left_top = a > 0 ? s->h[a - 1] : s->capacity;
        uint64_t right_top = z < s->steps ? s->h[z] : s->capacity;
        for (size_t q = 0; q < m; q++) {
            size_t t0 = cuts[q], t1 = cuts[q + 1];
            uint64_t w = t1 - t0;
            uint64_t mean = share / w;
            if (mean < 1) mean = 1;
            uint64_t size = mean / 2 + bench_rng_range(&s->rng, 0, mean + 1);
            if (size < 1) size = 1;
            /* level with a higher neighbour (not the capacity: that is
             * the finishing rule's) */
            uint64_t nb_top = q == 0 && q + 1 == m ? (left_top < right_top ? left_top : right_top)
                              : q == 0             ? left_top
                              : q + 1 == m         ? right_top
                                                   : 0;
            if (nb_top > lo && nb_top < s->capacity && bench_rng_range(&s->rng, 0, 100) < s->snap)
                size = nb_top - lo;
            /* never finish a piece here: the segments left must stay at
             * most the buffers left */
            if (size >= room) {
                if (room < 2) return 0;
                size = room - 1 - bench_rng_range(&s->rng, 0, room / 4 + 1) % (room - 1);
            }
            sky_push(s, t0, t1, size);
        }
    }
    return sky_open_segments(s) == 0;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 7) {
        fprintf(stderr, "usage: gen_skyline N SEED [STEPS] [CAPACITY] [SNAP] [SPLIT]\n");
        return 2;
    }
    sky s = {0};
    s.n = strtoull(argv[1], NULL, 10);
    s.steps = argc > 3 ? strtoull(argv[3], NULL, 10) : 4 + s.n / 3;
    s.capacity = argc > 4 ? strtoull(argv[4], NULL, 10) : 1048576;
    s.snap = argc > 5 ? strtoull(argv[5], NULL, 10) : 80;
    s.split = argc > 6 ? strtoull(argv[6], NULL, 10) : 2;
    if (s.n < 1 || s.steps < 1 || s.capacity < 2 || s.snap > 100 || s.split < 1 || s.split > 8) {
        fprintf(stderr, "gen_skyline: N, STEPS >= 1, CAPACITY >= 2, SNAP a percentage, "
                        "1 <= SPLIT <= 8\n");
        return 2;
    }
    s.h = malloc(s.steps * sizeof *s.h);
    s.b = malloc((s.n + 1) * sizeof *s.b);
    if (!s.h || !s.b) return 1;
    bench_rng base = bench_rng_seed(argv[2]);
    int ok = 0;
    for (uint64_t stream = 0; stream < 100000 && !ok; stream++) {
        s.rng.state = base.state ^ (stream * 0xd1b54a32d192ed03ULL);
        if (s.rng.state == 0) s.rng.state = 1;
        ok = sky_draw(&s) && s.nb == s.n;
    }
    if (!ok) {
        fprintf(stderr, "gen_skyline: no instance of %zu buffers over %zu steps found\n", s.n,
                s.steps);
        return 1;
    }
    printf("id,lower,upper,size\n");
    for (size_t i = 0; i < s.nb; i++)
        printf("b%zu,%" PRId64 ",%" PRId64 ",%" PRIu64 "\n", i, s.b[i].t0, s.b[i].t1, s.b[i].size);
    free(s.h);
    free(s.b);
    return 0;
}
