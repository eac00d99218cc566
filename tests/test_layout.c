/* test_layout.c — unit tests of layout/ (cmocka).
 *
 * Every layout a test gets is checked by check_layout below, an O(n^2)
 * checker written independently of layout_validate (which is itself tested
 * against it).  Random instances come from a fixed xorshift generator, so
 * runs are reproducible. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ilp_layout.h"
#include "layout.h"
#include "layout_internal.h"

#define MIB (1024ULL * 1024ULL)

/* Time-limited entry points over layout_exact and layout_glpk_exact (which
 * plans use and which stop on work): the default work budget with
 * time_limit_s as the backstop (a non-positive limit is kept tiny, not
 * none).  exact_in_time_goal also stops once the height is <= goal;
 * *proven_optimal (may be NULL) is res.proven_optimal.  Only these tests
 * call them, so they live here. */
static uint64_t exact_in_time_goal(const layout_buffer *bufs, size_t n, uint64_t align,
                                   const uint64_t *warm_offsets, double time_limit_s, uint64_t goal,
                                   uint64_t *offsets, int *proven_optimal) {
    layout_effort e = {0, time_limit_s > 0 ? time_limit_s : 1e-9, goal, LAYOUT_SHARES_EQUAL, NULL};
    layout_result res;
    uint64_t h = layout_exact(&(layout_problem){bufs, n, align}, warm_offsets, &e, offsets, &res);
    if (proven_optimal) *proven_optimal = res.proven_optimal;
    return h;
}

static uint64_t exact_in_time(const layout_buffer *bufs, size_t n, uint64_t align,
                              const uint64_t *warm_offsets, double time_limit_s, uint64_t *offsets,
                              int *proven_optimal) {
    return exact_in_time_goal(bufs, n, align, warm_offsets, time_limit_s, 0, offsets,
                              proven_optimal);
}

/* The GLPK model alone (layout_glpk_exact) under a time limit. */
static uint64_t layout_glpk(const layout_buffer *bufs, size_t n, uint64_t align,
                            double time_limit_s, uint64_t *offsets, int *proven_optimal,
                            int *too_large) {
    layout_effort e = {0, time_limit_s > 0 ? time_limit_s : 1e-9, 0, LAYOUT_SHARES_EQUAL, NULL};
    layout_result res;
    uint64_t h = layout_glpk_exact(&(layout_problem){bufs, n, align}, &e, offsets, &res, too_large);
    if (proven_optimal) *proven_optimal = h != UINT64_MAX && res.proven_optimal;
    return h;
}

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rng_next(rng *r) {
    uint64_t x = r->s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return r->s = x;
}

/* Uniform in [lo, hi]. */
static uint64_t rng_in(rng *r, uint64_t lo, uint64_t hi) {
    return lo + rng_next(r) % (hi - lo + 1);
}

static int lifetimes_meet(const layout_buffer *a, const layout_buffer *b) {
    return a->start <= b->end && b->start <= a->end;
}

/* The independent checker: 1 when valid. */
static int check_layout(const layout_buffer *bufs, size_t n, const uint64_t *off, uint64_t align) {
    for (size_t i = 0; i < n; i++) {
        if (off[i] % align != 0) return 0;
        for (size_t j = i + 1; j < n; j++) {
            if (bufs[i].size == 0 || bufs[j].size == 0 || !lifetimes_meet(&bufs[i], &bufs[j]))
                continue;
            if (off[i] < off[j] + bufs[j].size && off[j] < off[i] + bufs[i].size) return 0;
        }
    }
    return 1;
}

/* Live-size lower bound, the slow way: the busiest start step. */
static uint64_t naive_live_peak(const layout_buffer *bufs, size_t n) {
    uint64_t peak = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t live = 0;
        for (size_t j = 0; j < n; j++)
            if (bufs[j].start <= bufs[i].start && bufs[i].start <= bufs[j].end)
                live += bufs[j].size;
        if (live > peak) peak = live;
    }
    return peak;
}

/* A "perfect" instance: a capacity x steps rectangle cut into n pieces by
 * recursive guillotine cuts in time or address (as tests/bench/gen_perfect.c
 * does), so that the optimum is the lower bound, capacity, with no slack. */
static void make_perfect(rng *r, size_t n, int32_t steps, uint64_t capacity, layout_buffer *bufs) {
    typedef struct {
        int32_t t0, t1; /* [t0, t1) */
        uint64_t a0, a1;
    } piece;
    piece *p = malloc(n * sizeof *p);
    assert_non_null(p);
    size_t np = 1;
    p[0] = (piece){0, steps, 0, capacity};
    while (np < n) {
        piece *x = &p[rng_in(r, 0, np - 1)];
        int can_t = x->t1 - x->t0 > 1, can_a = x->a1 - x->a0 > 1;
        if (!can_t && !can_a) continue;
        piece y = *x;
        if (can_t && (!can_a || rng_next(r) % 2)) {
            x->t1 = y.t0 = (int32_t)rng_in(r, (uint64_t)x->t0 + 1, (uint64_t)x->t1 - 1);
        } else {
            x->a1 = y.a0 = rng_in(r, x->a0 + 1, x->a1 - 1);
        }
        p[np++] = y;
    }
    for (size_t i = 0; i < n; i++)
        bufs[i] = (layout_buffer){p[i].a1 - p[i].a0, p[i].t0, p[i].t1 - 1};
    free(p);
}

static char *write_temp(const char *content) {
    char *path = strdup("/tmp/test_layout_XXXXXX");
    assert_non_null(path);
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t len = strlen(content);
    assert_int_equal(write(fd, content, len), (ssize_t)len);
    close(fd);
    return path;
}

/* ------------------------------------------------------------------------ */
/* Measures and validation                                                   */

static const layout_buffer five[] = {
    {4, 0, 2}, {4, 3, 8}, {4, 0, 8}, {4, 9, 20}, {4, 0, 20},
};

static void test_measures(void **state) {
    (void)state;
    uint64_t off[5] = {0};
    assert_int_equal(layout_live_peak(NULL, 0), 0);
    assert_int_equal(layout_height(NULL, 0, off), 0);
    assert_int_equal(layout_validate(NULL, 0, off, 1, NULL, NULL), 0);
    assert_int_equal(layout_live_peak(five, 5), 12);

    /* closed lifetimes: ending at 3 and starting at 3 conflict */
    layout_buffer two[2] = {{4, 0, 3}, {4, 3, 5}};
    size_t a = 9, b = 9;
    assert_int_equal(layout_validate(two, 2, off, 1, &a, &b), -1);
    assert_int_equal(a, 0);
    assert_int_equal(b, 1);
    two[1].start = 4;
    assert_int_equal(layout_validate(two, 2, off, 1, &a, &b), 0);
    assert_int_equal(layout_height(two, 2, off), 4);
    assert_int_equal(layout_live_peak(two, 2), 4);

    /* misaligned offset: a == b */
    uint64_t mis[2] = {0, 4};
    two[1].start = 0;
    assert_int_equal(layout_validate(two, 2, mis, 8, &a, &b), -1);
    assert_int_equal(a, 1);
    assert_int_equal(b, 1);
    assert_int_equal(layout_validate(two, 2, mis, 4, &a, &b), 0);

    /* empty buffers conflict with nothing */
    layout_buffer z[2] = {{0, 0, 5}, {8, 0, 5}};
    uint64_t zo[2] = {4, 0};
    assert_int_equal(layout_validate(z, 2, zo, 1, NULL, NULL), 0);
    assert_int_equal(layout_height(z, 2, zo), 8);
}

/* layout_validate agrees with the independent checker on random layouts,
 * valid ones and ones with a buffer moved at random. */
static void test_validate_random(void **state) {
    (void)state;
    rng r = {12345};
    layout_buffer bufs[40];
    uint64_t off[40];
    for (int it = 0; it < 2000; it++) {
        size_t n = rng_in(&r, 1, 40);
        for (size_t i = 0; i < n; i++) {
            int32_t s = (int32_t)rng_in(&r, 0, 30);
            bufs[i] = (layout_buffer){rng_in(&r, 0, 20), s, s + (int32_t)rng_in(&r, 0, 10)};
        }
        assert_int_not_equal(layout_llfb(bufs, n, 1, off), UINT64_MAX);
        if (it % 2) off[rng_in(&r, 0, n - 1)] = rng_in(&r, 0, 60);
        size_t a, b;
        int ok = layout_validate(bufs, n, off, 1, &a, &b) == 0;
        assert_int_equal(ok, check_layout(bufs, n, off, 1));
        if (!ok) { /* the pair named really is a conflict */
            assert_true(a < b);
            assert_true(lifetimes_meet(&bufs[a], &bufs[b]));
            assert_true(off[a] < off[b] + bufs[b].size && off[b] < off[a] + bufs[a].size);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Heuristics                                                                */

static void test_five_buffers(void **state) {
    (void)state;
    char *path =
        write_temp("id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\nb3,0,9,4\nb4,9,21,4\nb5,0,21,4\n");
    layout_csv csv;
    char err[256];
    assert_int_equal(layout_csv_read(path, &csv, err, sizeof err), 0);
    assert_int_equal(csv.n, 5);
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(csv.bufs[i].size, five[i].size);
        assert_int_equal(csv.bufs[i].start, five[i].start);
        assert_int_equal(csv.bufs[i].end, five[i].end);
    }
    uint64_t warm[5], off[5];
    int proven = 0;
    uint64_t h0 = layout_best_heuristic(csv.bufs, 5, 1, warm, NULL);
    assert_true(check_layout(csv.bufs, 5, warm, 1));
    uint64_t h = exact_in_time(csv.bufs, 5, 1, warm, 5.0, off, &proven);
    assert_int_equal(h, 12);
    assert_true(h <= h0);
    assert_int_equal(proven, 1);
    assert_true(check_layout(csv.bufs, 5, off, 1));
    assert_int_equal(layout_height(csv.bufs, 5, off), 12);
    layout_csv_free(&csv);
    unlink(path);
    free(path);
}

static void test_heuristics_by_hand(void **state) {
    (void)state;
    /* greedy by size: lowest offset where it fits */
    layout_buffer g[4] = {{8, 0, 9}, {4, 0, 4}, {4, 5, 9}, {2, 0, 9}};
    uint64_t off[6];
    assert_int_equal(layout_greedy(g, 4, 1, off), 14);
    assert_int_equal(off[0], 0);
    assert_int_equal(off[1], 8);
    assert_int_equal(off[2], 8);
    assert_int_equal(off[3], 12);

    /* best fit in schedule order: X, Y, Z, W at step 0; X, Z end; then U
     * (2 bytes) takes Z's 2-byte gap, not X's 8-byte one, and V takes X's. */
    layout_buffer f[6] = {{8, 0, 0}, {4, 0, 5}, {2, 0, 0}, {4, 0, 5}, {2, 1, 5}, {8, 1, 5}};
    assert_int_equal(layout_bestfit(f, 6, 1, off), 18);
    assert_int_equal(off[0], 0);
    assert_int_equal(off[1], 8);
    assert_int_equal(off[2], 12);
    assert_int_equal(off[3], 14);
    assert_int_equal(off[4], 12);
    assert_int_equal(off[5], 0);
    assert_true(check_layout(f, 6, off, 1));

    /* long-lived first: the long small buffer goes below the short big one */
    layout_buffer l[2] = {{10, 0, 1}, {2, 0, 9}};
    assert_int_equal(layout_llfb(l, 2, 1, off), 12);
    assert_int_equal(off[1], 0);
    assert_int_equal(off[0], 2);

    /* alignment: offsets are multiples of align */
    layout_buffer al[3] = {{512, 0, 3}, {1024, 1, 2}, {512, 2, 5}};
    assert_int_equal(layout_llfb(al, 3, 512, off), 2048);
    assert_true(check_layout(al, 3, off, 512));
}

typedef uint64_t (*heuristic_fn)(const layout_buffer *, size_t, uint64_t, uint64_t *);

static void test_random_instances(void **state) {
    (void)state;
    static const heuristic_fn fns[] = {layout_llfb, layout_greedy, layout_bestfit};
    static const uint64_t aligns[] = {1, 8, 512};
    rng r = {777};
    enum { N = 120 };
    layout_buffer bufs[N];
    uint64_t off[N], warm[N], again[N];
    for (int it = 0; it < 300; it++) {
        size_t n = rng_in(&r, 0, N);
        uint64_t align = aligns[it % 3];
        int32_t steps = (int32_t)rng_in(&r, 1, 60);
        for (size_t i = 0; i < n; i++) {
            int32_t s = (int32_t)rng_in(&r, 0, (uint64_t)steps - 1);
            uint64_t size = rng_in(&r, 0, 9) == 0 ? 0 : rng_in(&r, 1, 4000);
            bufs[i] = (layout_buffer){lay_round_up(size, align), s,
                                      s + (int32_t)rng_in(&r, 0, (uint64_t)steps / 3)};
        }
        uint64_t lb = layout_live_peak(bufs, n);
        assert_int_equal(lb, naive_live_peak(bufs, n));
        for (size_t f = 0; f < 3; f++) {
            uint64_t h = fns[f](bufs, n, align, off);
            assert_true(check_layout(bufs, n, off, align));
            assert_int_equal(h, layout_height(bufs, n, off));
            assert_true(h >= lb);
            /* deterministic */
            assert_int_equal(fns[f](bufs, n, align, again), h);
            assert_memory_equal(off, again, n * sizeof *off);
        }
        uint64_t hb = layout_best_heuristic(bufs, n, align, warm, NULL);
        assert_true(check_layout(bufs, n, warm, align));
        layout_pytorch_stats st;
        uint64_t hp = layout_pytorch(bufs, n, 0, off, &st);
        assert_true(check_layout(bufs, n, off, 512));
        assert_true(hp >= layout_height(bufs, n, off));
        assert_int_equal(hp, st.reserved_peak);
        assert_true(st.allocated_peak >= lb);
        if (it % 10 == 0) {
            int proven;
            uint64_t h = exact_in_time(bufs, n, align, warm, 0.05, off, &proven);
            assert_true(check_layout(bufs, n, off, align));
            assert_true(h <= hb && h >= lb);
            if (h == lb) assert_int_equal(proven, 1);
        }
    }
}

/* The heuristics as written, O(n^2): buffers in the heuristic's order (LLFB:
 * lifetime length desc, size desc; greedy: size desc; ties by index), each
 * in the lowest (first fit) or tightest (best fit, ties lowest) gap among
 * the placed buffers whose lifetimes meet its own. */
static uint64_t naive_place(const layout_buffer *b, size_t n, uint64_t align, int llfb,
                            uint64_t *off) {
    size_t *ord = malloc((n ? n : 1) * sizeof *ord), np = 0;
    size_t *placed = malloc((n ? n : 1) * sizeof *placed);
    uint64_t(*used)[2] = malloc((n ? n : 1) * sizeof *used);
    assert_non_null(ord);
    assert_non_null(placed);
    assert_non_null(used);
    for (size_t i = 0; i < n; i++) ord[i] = i;
    for (size_t i = 1; i < n; i++) /* insertion sort: stable, so ties stay by index */
        for (size_t j = i; j > 0; j--) {
            const layout_buffer *x = &b[ord[j - 1]], *y = &b[ord[j]];
            uint64_t lx = (uint64_t)(x->end - x->start), ly = (uint64_t)(y->end - y->start);
            int after = llfb ? (ly > lx || (ly == lx && y->size > x->size)) : y->size > x->size;
            if (!after) break;
            size_t t = ord[j];
            ord[j] = ord[j - 1];
            ord[j - 1] = t;
        }
    for (size_t k = 0; k < n; k++) {
        size_t i = ord[k];
        off[i] = 0;
        if (b[i].size == 0) continue;
        uint64_t sz = lay_round_up(b[i].size, align);
        size_t nu = 0;
        for (size_t q = 0; q < np; q++) {
            const layout_buffer *o = &b[placed[q]];
            if (o->start <= b[i].end && b[i].start <= o->end) {
                used[nu][0] = off[placed[q]];
                used[nu][1] = off[placed[q]] + lay_round_up(o->size, align);
                nu++;
            }
        }
        for (size_t x = 1; x < nu; x++) /* by start address */
            for (size_t y = x; y > 0 && used[y][0] < used[y - 1][0]; y--) {
                uint64_t t0 = used[y][0], t1 = used[y][1];
                used[y][0] = used[y - 1][0], used[y][1] = used[y - 1][1];
                used[y - 1][0] = t0, used[y - 1][1] = t1;
            }
        uint64_t top = 0, best = UINT64_MAX, waste = UINT64_MAX;
        for (size_t x = 0; x < nu && !(!llfb && best != UINT64_MAX); x++) {
            if (used[x][0] > top && used[x][0] - top >= sz && used[x][0] - top - sz < waste) {
                waste = used[x][0] - top - sz;
                best = top;
            }
            if (used[x][1] > top) top = used[x][1];
        }
        off[i] = best != UINT64_MAX ? best : top;
        placed[np++] = i;
    }
    free(ord);
    free(placed);
    free(used);
    return layout_height(b, n, off);
}

/* The conflict index behind LLFB and greedy (segment tree of merged range
 * lists, path unions brought up to date by single adds or rebuilt, sub
 * lists kept only where read) gives exactly the naive placements, on
 * deep-network-like instances: nested long lifetimes over hundreds of steps
 * (so the upper levels and their path unions are used), short ones, empty
 * buffers. */
static void test_heuristics_against_naive(void **state) {
    (void)state;
    static const uint64_t aligns[] = {1, 64, 512};
    rng r = {1919};
    enum { N = 700 };
    layout_buffer *bufs = malloc(N * sizeof *bufs);
    uint64_t *off = malloc(N * sizeof *off), *ref = malloc(N * sizeof *ref);
    assert_non_null(bufs);
    assert_non_null(off);
    assert_non_null(ref);
    for (int it = 0; it < 40; it++) {
        size_t n = rng_in(&r, 1, N);
        uint64_t align = aligns[it % 3];
        int32_t steps = (int32_t)rng_in(&r, 2, 2000);
        for (size_t i = 0; i < n; i++) {
            uint64_t size = rng_in(&r, 0, 15) == 0 ? 0 : rng_in(&r, 1, 1 + rng_in(&r, 0, 3) * 3000);
            int32_t s, e;
            if (rng_in(&r, 0, 2) == 0) { /* nested: forward step s, backward step steps-1-s */
                s = (int32_t)rng_in(&r, 0, (uint64_t)(steps - 1) / 2);
                e = steps - 1 - s - (int32_t)rng_in(&r, 0, 2);
                if (e < s) e = s;
            } else {
                s = (int32_t)rng_in(&r, 0, (uint64_t)steps - 1);
                e = s + (int32_t)rng_in(&r, 0, rng_in(&r, 0, 3) == 0 ? (uint64_t)steps / 2 : 8);
            }
            bufs[i] = (layout_buffer){size, s, e};
        }
        for (int llfb = 0; llfb < 2; llfb++) {
            uint64_t h =
                llfb ? layout_llfb(bufs, n, align, off) : layout_greedy(bufs, n, align, off);
            uint64_t hr = naive_place(bufs, n, align, llfb, ref);
            assert_int_equal(h, hr);
            assert_memory_equal(off, ref, n * sizeof *off);
        }
    }
    free(bufs);
    free(off);
    free(ref);
}

/* The heuristics on a training-like problem of 50,000 buffers: parameters
 * live throughout, activations freed in reverse order, short temporaries.
 * An O(n^2) heuristic would not finish in the test's time. */
static void test_large(void **state) {
    (void)state;
    enum { N = 50000, STEPS = 50000 };
    rng r = {4242};
    layout_buffer *bufs = malloc(N * sizeof *bufs);
    uint64_t *off = malloc(N * sizeof *off);
    assert_non_null(bufs);
    assert_non_null(off);
    for (size_t i = 0; i < N; i++) {
        uint64_t size = 512 * rng_in(&r, 1, 256);
        if (i < N / 25) {
            bufs[i] = (layout_buffer){size * 8, 0, STEPS - 1};
        } else if (i < N / 3) {
            int32_t t = (int32_t)rng_in(&r, 0, STEPS / 2 - 2);
            bufs[i] = (layout_buffer){size, t, STEPS - 1 - t - (int32_t)rng_in(&r, 0, 3)};
        } else {
            int32_t t = (int32_t)rng_in(&r, 0, STEPS - 8);
            bufs[i] = (layout_buffer){size, t, t + (int32_t)rng_in(&r, 0, 6)};
        }
    }
    uint64_t lb = layout_live_peak(bufs, N);
    uint64_t h = layout_llfb(bufs, N, 512, off);
    assert_int_equal(layout_validate(bufs, N, off, 512, NULL, NULL), 0);
    assert_true(h >= lb);
    h = layout_bestfit(bufs, N, 512, off);
    assert_int_equal(layout_validate(bufs, N, off, 512, NULL, NULL), 0);
    assert_true(h >= lb);
    layout_pytorch_stats st;
    layout_pytorch(bufs, N, 0, off, &st);
    assert_int_equal(layout_validate(bufs, N, off, 512, NULL, NULL), 0);
    free(bufs);
    free(off);
}

/* ------------------------------------------------------------------------ */
/* Exact layouts                                                             */

/* The smallest height by brute force: offsets of buffer i tried in order. */
static int brute_fits(const layout_buffer *b, size_t n, uint64_t height, uint64_t *off, size_t i) {
    if (i == n) return 1;
    for (uint64_t o = 0; o + b[i].size <= height; o++) {
        int ok = 1;
        for (size_t j = 0; j < i && ok; j++)
            if (lifetimes_meet(&b[i], &b[j]) && off[j] < o + b[i].size && o < off[j] + b[j].size)
                ok = 0;
        off[i] = o;
        if (ok && brute_fits(b, n, height, off, i + 1)) return 1;
    }
    return 0;
}

/* A 7-buffer problem whose optimum (17) is above its lower bound (16). */
static const layout_buffer gap7[7] = {
    {6, 4, 9}, {5, 2, 6}, {7, 0, 1}, {8, 7, 12}, {5, 1, 2}, {6, 0, 0}, {4, 1, 5},
};

static void test_search_against_brute_force(void **state) {
    (void)state;
    rng r = {99};
    layout_buffer b[6];
    uint64_t off[7];
    for (int it = 0; it < 150; it++) {
        size_t n = rng_in(&r, 1, 6);
        for (size_t i = 0; i < n; i++) {
            int32_t s = (int32_t)rng_in(&r, 0, 6);
            b[i] = (layout_buffer){rng_in(&r, 1, 5), s, s + (int32_t)rng_in(&r, 0, 4)};
        }
        uint64_t opt = layout_live_peak(b, n);
        while (!brute_fits(b, n, opt, off, 0)) opt++;
        assert_int_equal(layout_search(&(layout_problem){b, n, 1}, opt, 5.0, 100, off), 1);
        assert_true(check_layout(b, n, off, 1));
        assert_true(layout_height(b, n, off) <= opt);
        assert_int_equal(layout_search(&(layout_problem){b, n, 1}, opt - 1, 5.0, 100, off), 0);
    }
    /* brute force agrees that gap7 needs 17 */
    assert_int_equal(layout_live_peak(gap7, 7), 16);
    assert_false(brute_fits(gap7, 7, 16, off, 0));
    assert_true(brute_fits(gap7, 7, 17, off, 0));
    assert_int_equal(layout_search(&(layout_problem){gap7, 7, 1}, 16, 5.0, 100, off), 0);
    assert_int_equal(layout_search(&(layout_problem){gap7, 7, 1}, 17, 5.0, 100, off), 1);
    assert_true(check_layout(gap7, 7, off, 1));
    /* too many buffers for the limit: gives up */
    assert_int_equal(layout_search(&(layout_problem){gap7, 7, 1}, 17, 5.0, 3, off), -1);
    /* and the budget says why it gave up: the size or the work */
    const layout_problem g7 = {gap7, 7, 1};
    lay_search_opts o;
    lay_search_defaults(&o);
    o.max_buffers = 3;
    lay_budget bud = {UINT64_MAX, 1e300, LAY_STOP_NONE};
    assert_int_equal(lay_search(&g7, 17, &o, &bud, off, NULL), LAY_GAVE_UP);
    assert_int_equal(bud.stop, LAY_STOP_SIZE);
    bud = (lay_budget){1, 1e300, LAY_STOP_NONE};
    assert_int_equal(lay_search(&g7, 17, NULL, &bud, off, NULL), LAY_GAVE_UP);
    assert_int_equal(bud.stop, LAY_STOP_WORK);
    assert_int_equal(bud.work, 1);                        /* a node costs more: nothing spent */
    bud = (lay_budget){UINT64_MAX, 1e300, LAY_STOP_TIME}; /* a stop left from before */
    assert_int_equal(lay_search(&g7, 17, NULL, &bud, off, NULL), LAY_FOUND);
    assert_int_equal(bud.stop, LAY_STOP_NONE);
}

static void test_ilp_optimum_above_bound(void **state) {
    (void)state;
    uint64_t warm[7], off[7];
    int proven = 0, too_large = 1;
    /* the GLPK model alone, from LLFB: proves 17 optimal */
    uint64_t h = layout_glpk(gap7, 7, 1, 10.0, off, &proven, &too_large);
    assert_int_equal(h, 17);
    assert_int_equal(proven, 1);
    assert_int_equal(too_large, 0);
    assert_true(check_layout(gap7, 7, off, 1));
    /* the whole of exact_in_time, from a poor warm start (all stacked) */
    uint64_t top = 0;
    for (size_t i = 0; i < 7; i++) {
        warm[i] = top;
        top += gap7[i].size;
    }
    proven = 0;
    assert_int_equal(exact_in_time(gap7, 7, 1, warm, 10.0, off, &proven), 17);
    assert_int_equal(proven, 1);
    assert_true(check_layout(gap7, 7, off, 1));
    assert_int_equal(exact_in_time(gap7, 7, 1, NULL, 10.0, off, &proven), 17);
    assert_true(check_layout(gap7, 7, off, 1));
    /* an invalid warm start is ignored */
    uint64_t bad[7] = {0};
    assert_int_equal(exact_in_time(gap7, 7, 1, bad, 10.0, off, &proven), 17);
    assert_true(check_layout(gap7, 7, off, 1));
    /* with a goal: stops as soon as the height is <= goal */
    assert_true(exact_in_time_goal(gap7, 7, 1, warm, 10.0, 30, off, &proven) <= 30);
    assert_true(check_layout(gap7, 7, off, 1));
}

/* GLPK alone on a small perfect instance: it improves on LLFB, returns a
 * valid layout; and a problem with too many pairs keeps LLFB. */
static void test_glpk_alone(void **state) {
    (void)state;
    rng r = {5};
    layout_buffer b[12];
    uint64_t llfb[12], off[12];
    make_perfect(&r, 12, 20, 1000, b);
    uint64_t h0 = layout_llfb(b, 12, 1, llfb);
    int proven = 0, too_large = 1;
    uint64_t h = layout_glpk(b, 12, 1, 5.0, off, &proven, &too_large);
    assert_true(check_layout(b, 12, off, 1));
    assert_int_equal(too_large, 0);
    assert_true(h <= h0);
    assert_int_equal(h, 1000);
    assert_int_equal(proven, 1);

    enum { N = 400 }; /* windows of 60 steps: about 24000 pairs */
    layout_buffer *big = malloc(N * sizeof *big);
    uint64_t *o = malloc(N * sizeof *o), *o2 = malloc(N * sizeof *o2);
    assert_non_null(big);
    assert_non_null(o);
    assert_non_null(o2);
    for (size_t i = 0; i < N; i++)
        big[i] = (layout_buffer){rng_in(&r, 1, 100), (int32_t)i, (int32_t)i + 60};
    h = layout_glpk(big, N, 1, 5.0, o, &proven, &too_large);
    assert_true(h > layout_live_peak(big, N)); /* LLFB is not optimal here */
    assert_int_equal(too_large, 1);
    assert_int_equal(h, layout_llfb(big, N, 1, o2));
    assert_memory_equal(o, o2, N * sizeof *o);
    free(big);
    free(o);
    free(o2);
}

/* The branch and bound with every pruning rule off in turn (and all off),
 * and each engine alone (the skyline search with and without its energy
 * rule), finds the brute-force optimum of small random
 * instances and proves that one unit less does not fit: the rules only
 * prune, never lose a layout. */
static void test_bnb_rules_against_brute_force(void **state) {
    (void)state;
    layout_solve_opts d;
    layout_solve_defaults(&d);
    const size_t nrules = sizeof d.rules / sizeof(int);
    rng r = {4711};
    layout_buffer b[7];
    uint64_t off[7];
    for (int it = 0; it < 60; it++) {
        size_t n = rng_in(&r, 2, 7);
        for (size_t i = 0; i < n; i++) {
            int32_t s = (int32_t)rng_in(&r, 0, 5);
            b[i] = (layout_buffer){rng_in(&r, 1, 6), s, s + (int32_t)rng_in(&r, 0, 4)};
        }
        if (it % 3 == 0) /* twins */
            b[n - 1] = b[0];
        uint64_t opt = layout_live_peak(b, n);
        while (!brute_fits(b, n, opt, off, 0)) opt++;
        for (size_t k = 0; k <= nrules + 4; k++) {
            lay_search_opts o;
            lay_search_defaults(&o);
            o.engines = LAYOUT_ENGINE_BNB;
            if (k < nrules)
                ((int *)&o.rules)[k] = 0; /* rule k off */
            else if (k == nrules)
                memset(&o.rules, 0, sizeof o.rules); /* all off */
            else if (k == nrules + 1) {
                o.engines = LAYOUT_ENGINE_SKYLINE;
                o.rules.energy = 1; /* the skyline search's own rule */
            } else if (k == nrules + 2) {
                o.engines = LAYOUT_ENGINE_SKYLINE;
                o.rules.energy = 0;
            } else {
                o.engines = LAYOUT_ENGINE_SKYLINE | LAYOUT_ENGINE_BNB;
                if (k == nrules + 4) /* the portfolio's shares (issue 31) */
                    lay_search_shares(&o, LAYOUT_SHARES_PORTFOLIO);
            }
            o.max_buffers = 100;
            const layout_problem p = {b, n, 1};
            lay_budget bud = {UINT64_MAX, 1e300, LAY_STOP_NONE};
            lay_bnb_stats st;
            assert_int_equal(lay_search(&p, opt, &o, &bud, off, &st), LAY_FOUND);
            assert_true(check_layout(b, n, off, 1));
            assert_true(layout_height(b, n, off) <= opt);
            bud = (lay_budget){UINT64_MAX, 1e300, LAY_STOP_NONE};
            assert_int_equal(lay_search(&p, opt - 1, &o, &bud, off, &st), LAY_INFEASIBLE);
            assert_int_equal(bud.stop, LAY_STOP_NONE);
        }
    }
    /* and gap7 (optimum 17 above the bound 16) with the canonical search alone */
    const layout_problem g7 = {gap7, 7, 1};
    lay_budget bud = {UINT64_MAX, 1e300, LAY_STOP_NONE};
    assert_int_equal(lay_bnb(&(lay_bnb_task){&g7, NULL, 16, NULL}, &bud, off, NULL),
                     LAY_INFEASIBLE);
    assert_int_equal(lay_bnb(&(lay_bnb_task){&g7, NULL, 17, NULL}, &bud, off, NULL), LAY_FOUND);
    assert_true(check_layout(gap7, 7, off, 1));
}

/* lay_sweep (the search in time order, zero-slack problems only): random
 * guillotine tilings of a capacity x steps rectangle (every step covered
 * exactly) are solved at the capacity with a valid layout;
 * gap7 (slack at some step) is not its kind of problem: it gives up. */
static void test_sweep(void **state) {
    (void)state;
    rng r = {99};
    for (int it = 0; it < 200; it++) {
        typedef struct {
            int32_t t0, t1;
            uint64_t a0, a1;
        } piece;
        piece p[12];
        size_t np = 1;
        uint64_t cap = rng_in(&r, 2, 12);
        p[0] = (piece){0, (int32_t)rng_in(&r, 1, 8), 0, cap};
        size_t want = rng_in(&r, 1, 12);
        for (int tries = 0; np < want && tries < 100; tries++) {
            piece *x = &p[rng_in(&r, 0, np - 1)];
            piece y = *x;
            if (rng_in(&r, 0, 1) && x->t1 - x->t0 > 1) {
                int32_t c = x->t0 + (int32_t)rng_in(&r, 1, (uint64_t)(x->t1 - x->t0 - 1));
                x->t1 = c;
                y.t0 = c;
            } else if (x->a1 - x->a0 > 1) {
                uint64_t c = x->a0 + rng_in(&r, 1, x->a1 - x->a0 - 1);
                x->a1 = c;
                y.a0 = c;
            } else {
                continue;
            }
            p[np++] = y;
        }
        layout_buffer b[12];
        uint64_t off[12];
        for (size_t i = 0; i < np; i++)
            b[i] = (layout_buffer){p[i].a1 - p[i].a0, p[i].t0, p[i].t1 - 1};
        uint64_t nodes = 0;
        assert_int_equal(lay_sweep(&(layout_problem){b, np, 1}, cap, 1e300, off, &nodes),
                         LAY_FOUND);
        assert_true(check_layout(b, np, off, 1));
        assert_true(layout_height(b, np, off) <= cap);
    }
    uint64_t off[7];
    assert_int_equal(lay_sweep(&(layout_problem){gap7, 7, 1}, 17, 1e300, off, NULL), LAY_GAVE_UP);
}

/* layout_solve: a zero-slack guillotine instance solved at its bound and
 * reported optimal; gap7 minimised to 17 with the bound proved (16 is
 * infeasible); with capacity 16 it proves infeasibility; a work budget
 * gives the same answer twice. */
static void test_solve(void **state) {
    (void)state;
    rng r = {77};
    enum { N = 120 };
    layout_buffer *b = malloc(N * sizeof *b);
    uint64_t *warm = malloc(N * sizeof *warm), *off = malloc(N * sizeof *off);
    assert_non_null(b);
    assert_non_null(warm);
    assert_non_null(off);
    make_perfect(&r, N, 4 * N, 1 << 20, b);
    layout_best_heuristic(b, N, 1, warm, NULL);
    layout_solve_opts o;
    layout_solve_defaults(&o);
    o.work = 100000000; /* deterministic */
    o.time_limit_s = 15;
    layout_solve_result res;
    assert_int_equal(layout_solve(&(layout_problem){b, N, 1}, warm, &o, off, &res),
                     LAYOUT_SOLVE_OPTIMAL);
    assert_true(check_layout(b, N, off, 1));
    assert_int_equal(res.height, 1 << 20);
    assert_int_equal(res.lower_bound, 1 << 20);
    assert_true(res.nodes > 0);

    uint64_t w7[7], o7[7];
    layout_llfb(gap7, 7, 1, w7);
    assert_int_equal(layout_solve(&(layout_problem){gap7, 7, 1}, w7, &o, o7, &res),
                     LAYOUT_SOLVE_OPTIMAL);
    assert_int_equal(res.height, 17);
    assert_int_equal(res.lower_bound, 17);
    assert_true(check_layout(gap7, 7, o7, 1));
    o.capacity = 16;
    layout_llfb(gap7, 7, 1, w7);
    assert_int_equal(layout_solve(&(layout_problem){gap7, 7, 1}, w7, &o, o7, &res),
                     LAYOUT_SOLVE_INFEASIBLE);
    assert_int_equal(res.lower_bound, 17);
    o.capacity = 17;
    layout_llfb(gap7, 7, 1, w7);
    layout_solve_status st = layout_solve(&(layout_problem){gap7, 7, 1}, w7, &o, o7, &res);
    assert_true(st == LAYOUT_SOLVE_OPTIMAL || st == LAYOUT_SOLVE_FEASIBLE);
    assert_true(res.height <= 17);
    free(b);
    free(warm);
    free(off);
}

static void test_perfect_instances(void **state) {
    (void)state;
    rng r = {2024};
    layout_buffer b[60];
    uint64_t warm[60], off[60];
    for (int it = 0; it < 12; it++) {
        size_t n = 20 + (size_t)it * 40 / 11;
        uint64_t cap = rng_in(&r, 1000, 1000000);
        make_perfect(&r, n, (int32_t)(2 * n), cap, b);
        assert_int_equal(layout_live_peak(b, n), cap);
        layout_best_heuristic(b, n, 1, warm, NULL);
        int proven = 0;
        uint64_t h = exact_in_time(b, n, 1, warm, 5.0, off, &proven);
        assert_true(check_layout(b, n, off, 1));
        assert_int_equal(h, cap);
        assert_int_equal(proven, 1);
    }
}

/* A search cut by its work budget and resumed from its lay_search_pos
 * (what `roamc layout` does between layout_exact's search at the bound and
 * layout_solve's) gives the answer of one uninterrupted search, with
 * fewer nodes: the strategies before the cut one are not run again. */
static void test_search_resume(void **state) {
    (void)state;
    enum { N = 60 };
    layout_buffer b[N];
    uint64_t full_off[N], off[N];
    rng r = {4242};
    int exercised = 0;
    for (int it = 0; it < 40 && exercised < 4; it++) {
        make_perfect(&r, N, 3 * N, 1 << 20, b);
        for (size_t i = 0; i < N; i += 5) b[i].size = b[i].size / 2 + 1; /* slack */
        const layout_problem p = {b, N, 1};
        uint64_t cap = layout_live_peak(b, N) + rng_in(&r, 0, 3);
        lay_search_opts o;
        lay_search_defaults(&o);
        lay_search_shares(&o, LAYOUT_SHARES_PORTFOLIO);
        lay_budget bud = {20000000, 1e300, LAY_STOP_NONE};
        lay_bnb_stats full;
        lay_status rc_full = lay_search(&p, cap, &o, &bud, full_off, &full);
        if (rc_full == LAY_GAVE_UP || full.restarts < 12) continue; /* too hard or too easy */
        uint64_t full_work = 20000000 - bud.work;
        /* cut it at a third of its work, then resume */
        lay_search_pos pos = {0, 0};
        o.pos = &pos;
        lay_budget cut = {full_work / 3, 1e300, LAY_STOP_NONE};
        lay_bnb_stats first, second;
        assert_int_equal(lay_search(&p, cap, &o, &cut, off, &first), LAY_GAVE_UP);
        assert_int_equal(cut.stop, LAY_STOP_WORK);
        assert_true(pos.limit > 0);
        lay_budget rest = {20000000, 1e300, LAY_STOP_NONE};
        lay_status rc = lay_search(&p, cap, &o, &rest, off, &second);
        assert_int_equal(rc, rc_full);
        if (rc == LAY_FOUND) assert_memory_equal(off, full_off, sizeof off);
        /* the cut strategy runs twice, the ones before it once */
        assert_true(second.restarts < full.restarts);
        assert_true(first.restarts + second.restarts == full.restarts + 1);
        /* the same through the API: layout_exact's mark, layout_solve's resume */
        if (rc_full == LAY_FOUND) {
            layout_search_mark mark;
            layout_effort e = {full_work / 2, 0.0, cap, LAYOUT_SHARES_PORTFOLIO, &mark};
            layout_result er;
            uint64_t warm[N];
            layout_llfb(b, N, 1, warm);
            layout_exact(&p, warm, &e, off, &er);
            if (er.height > cap) {
                assert_int_equal(mark.capacity, cap);
                assert_true(mark.limit > 0);
                layout_solve_opts so;
                layout_solve_defaults(&so);
                so.capacity = cap;
                so.work = 20000000;
                layout_solve_result sr_plain, sr_resumed;
                layout_solve(&p, off, &so, warm, &sr_plain);
                so.resume = &mark;
                layout_solve(&p, off, &so, warm, &sr_resumed);
                assert_int_equal(sr_plain.status, sr_resumed.status);
                assert_true(sr_resumed.height <= cap);
                assert_true(check_layout(b, N, warm, 1));
                assert_true(sr_resumed.nodes < sr_plain.nodes);
            }
        }
        exercised++;
    }
    assert_true(exercised >= 1);
}

/* With slack and tiny sizes, branch B raises floors in tiny steps: long
 * chains that once overflowed the stack.  The search must give up or
 * succeed within its time, and exact_in_time must stay valid. */
static void test_search_slack_tiny_sizes(void **state) {
    (void)state;
    rng r = {77};
    enum { N = 300 };
    layout_buffer *b = malloc(N * sizeof *b);
    uint64_t *off = malloc(N * sizeof *off);
    assert_non_null(b);
    assert_non_null(off);
    make_perfect(&r, N, 4 * N, 1048576, b);
    for (size_t i = 0; i < N; i += 7) b[i].size = b[i].size / 2 + 1; /* leave slack and odd sizes */
    uint64_t lb = layout_live_peak(b, N);
    int rc = layout_search(&(layout_problem){b, N, 1}, lb + lb / 100, 0.5,
                           LAYOUT_SEARCH_MAX_BUFFERS, off);
    assert_true(rc == 1 || rc == -1);
    if (rc == 1) {
        assert_true(check_layout(b, N, off, 1));
        assert_true(layout_height(b, N, off) <= lb + lb / 100);
    }
    int proven;
    uint64_t h = exact_in_time(b, N, 1, NULL, 1.0, off, &proven);
    assert_true(check_layout(b, N, off, 1));
    assert_true(h >= lb);
    free(b);
    free(off);
}

/* layout_exact stops on its work budget, not the clock: the same effort
 * gives the same layout and the same work, a tiny budget still gives a
 * valid layout, and a generous one is proved optimal. */
static void test_exact_work_budget(void **state) {
    (void)state;
    rng r = {77};
    enum { N = 300 };
    layout_buffer *b = malloc(N * sizeof *b);
    uint64_t *o1 = malloc(N * sizeof *o1), *o2 = malloc(N * sizeof *o2);
    assert_non_null(b);
    assert_non_null(o1);
    assert_non_null(o2);
    make_perfect(&r, N, 4 * N, 1048576, b);
    for (size_t i = 0; i < N; i += 7)
        b[i].size = b[i].size / 2 + 1; /* slack: the bound is not reached */
    uint64_t lb = layout_live_peak(b, N);
    static const uint64_t works[] = {1, 5000, 200000};
    for (size_t w = 0; w < sizeof works / sizeof works[0]; w++) {
        layout_effort e = {works[w], 0.0, 0, LAYOUT_SHARES_EQUAL, NULL}; /* no backstop */
        layout_result r1, r2;
        uint64_t h1 = layout_exact(&(layout_problem){b, N, 1}, NULL, &e, o1, &r1);
        uint64_t h2 = layout_exact(&(layout_problem){b, N, 1}, NULL, &e, o2, &r2);
        assert_true(check_layout(b, N, o1, 1));
        assert_true(h1 >= lb);
        assert_int_equal(h1, r1.height);
        assert_int_equal(h1, h2);
        assert_memory_equal(o1, o2, N * sizeof *o1);
        assert_int_equal(r1.work_spent, r2.work_spent);
        assert_true(r1.work_spent <= works[w]);
        assert_int_equal(r1.stopped_by_time, 0);
    }
    /* gap7: optimum 17 above the bound 16, proved within a small budget;
     * GLPK alone likewise */
    uint64_t off[7];
    layout_effort e = {1000000, 0.0, 0, LAYOUT_SHARES_EQUAL, NULL};
    layout_result res;
    assert_int_equal(layout_exact(&(layout_problem){gap7, 7, 1}, NULL, &e, off, &res), 17);
    assert_int_equal(res.proven_optimal, 1);
    assert_int_equal(res.stopped_by_time, 0);
    int too_large = 1;
    assert_int_equal(layout_glpk_exact(&(layout_problem){gap7, 7, 1}, &e, off, &res, &too_large),
                     17);
    assert_int_equal(too_large, 0);
    assert_int_equal(res.proven_optimal, 1);
    assert_true(check_layout(gap7, 7, off, 1));
    /* a backstop that has already passed is reported */
    layout_effort late = {LAYOUT_DEFAULT_WORK, 1e-9, 0, LAYOUT_SHARES_EQUAL, NULL};
    layout_exact(&(layout_problem){b, N, 1}, NULL, &late, o1, &res);
    assert_true(check_layout(b, N, o1, 1));
    assert_int_equal(res.stopped_by_time, 1);
    free(b);
    free(o1);
    free(o2);
}

/* Several threads run exact_in_time (and so GLPK) at once. */
typedef struct thread_job {
    uint64_t seed;
    int ok;
} thread_job;

static void *thread_main(void *arg) {
    thread_job *job = arg;
    rng r = {job->seed};
    layout_buffer b[40];
    uint64_t off[40];
    make_perfect(&r, 40, 80, 100000, b);
    int proven = 0;
    uint64_t h = exact_in_time(b, 40, 1, NULL, 10.0, off, &proven);
    int ok = h == 100000 && check_layout(b, 40, off, 1);
    uint64_t off7[7];
    int too_large;
    ok = ok && layout_glpk(gap7, 7, 1, 10.0, off7, &proven, &too_large) == 17 && proven;
    ilp_thread_cleanup(); /* GLPK keeps an environment per thread */
    job->ok = ok;
    return NULL;
}

static void test_threads(void **state) {
    (void)state;
    enum { T = 4 };
    pthread_t th[T];
    thread_job jobs[T];
    for (int t = 0; t < T; t++) {
        jobs[t] = (thread_job){(uint64_t)t + 31, 0};
        assert_int_equal(pthread_create(&th[t], NULL, thread_main, &jobs[t]), 0);
    }
    for (int t = 0; t < T; t++) {
        assert_int_equal(pthread_join(th[t], NULL), 0);
        assert_int_equal(jobs[t].ok, 1);
    }
}

/* ------------------------------------------------------------------------ */
/* PyTorch caching allocator replay                                          */

static layout_pytorch_stats replay(const layout_buffer *b, size_t n, uint64_t *off) {
    layout_pytorch_stats st;
    uint64_t h = layout_pytorch(b, n, 0, off, &st);
    assert_int_equal(h, st.reserved_peak);
    assert_true(check_layout(b, n, off, 512));
    return st;
}

static void test_pytorch_pools(void **state) {
    (void)state;
    uint64_t off[4];
    /* 1000 B -> 1024 B from a 2 MiB small segment; 2 MiB from a 20 MiB
     * large segment laid after it */
    layout_buffer a[2] = {{1000, 0, 5}, {2 * MIB, 0, 5}};
    layout_pytorch_stats st = replay(a, 2, off);
    assert_int_equal(off[0], 0);
    assert_int_equal(off[1], 2 * MIB);
    assert_int_equal(st.segments, 2);
    assert_int_equal(st.reserved_peak, 22 * MIB);
    assert_int_equal(st.allocated_peak, 1024 + 2 * MIB);

    /* exactly 1 MiB is small: two of them share one 2 MiB segment */
    layout_buffer s[2] = {{MIB, 0, 1}, {MIB, 0, 1}};
    st = replay(s, 2, off);
    assert_int_equal(off[1], MIB);
    assert_int_equal(st.segments, 1);
    assert_int_equal(st.reserved_peak, 2 * MIB);

    /* segment sizes: >= 10 MiB is rounded up to 2 MiB, below gets 20 MiB */
    layout_buffer big[1] = {{15 * MIB, 0, 0}};
    st = replay(big, 1, off);
    assert_int_equal(st.reserved_peak, 16 * MIB);
    layout_buffer mid[1] = {{10 * MIB - 512, 0, 0}};
    st = replay(mid, 1, off);
    assert_int_equal(st.reserved_peak, 20 * MIB);

    /* empty buffers are skipped */
    layout_buffer e[2] = {{0, 0, 3}, {512, 0, 3}};
    st = replay(e, 2, off);
    assert_int_equal(off[0], 0);
    assert_int_equal(st.segments, 1);
}

static void test_pytorch_split_rule(void **state) {
    (void)state;
    uint64_t off[3];
    /* large pool: 9 MiB in a 20 MiB segment leaves 11 MiB (> 1 MiB: split);
     * 10.5 MiB then takes that 11 MiB block whole (0.5 MiB left: no split) */
    layout_buffer a[3] = {{9 * MIB, 0, 3}, {10 * MIB + MIB / 2, 0, 3}, {MIB / 2 + 512, 0, 3}};
    layout_pytorch_stats st = replay(a, 2, off);
    assert_int_equal(off[0], 0);
    assert_int_equal(off[1], 9 * MIB);
    assert_int_equal(st.segments, 1);
    assert_int_equal(st.allocated_peak, 20 * MIB);
    /* so the third (large, 0.5 MiB + 512 B is small: <= 1 MiB) goes to a
     * small segment after the large one */
    st = replay(a, 3, off);
    assert_int_equal(off[2], 20 * MIB);
    assert_int_equal(st.segments, 2);

    /* small pool: 1 MiB leaves 1 MiB (split); 1 MiB - 512 B then leaves
     * 512 B, which is split off too (>= 512 B) and serves the 100 B */
    layout_buffer b[3] = {{MIB, 0, 3}, {MIB - 512, 0, 3}, {100, 0, 3}};
    st = replay(b, 3, off);
    assert_int_equal(off[1], MIB);
    assert_int_equal(off[2], 2 * MIB - 512);
    assert_int_equal(st.segments, 1);
    assert_int_equal(st.allocated_peak, 2 * MIB);
}

static void test_pytorch_merge_and_reuse(void **state) {
    (void)state;
    uint64_t off[5];
    /* A, B, C, D of 512 KiB fill one small segment; A, B and D end at step
     * 0; at step 1, A and B have merged into one 1 MiB block, which E
     * (1 MiB) reuses instead of reserving a new segment. */
    layout_buffer m[5] = {
        {512 * 1024, 0, 0}, {512 * 1024, 0, 0}, {512 * 1024, 0, 5}, {512 * 1024, 0, 0}, {MIB, 1, 2},
    };
    layout_pytorch_stats st = replay(m, 5, off);
    assert_int_equal(off[0], 0);
    assert_int_equal(off[1], 512 * 1024);
    assert_int_equal(off[2], MIB);
    assert_int_equal(off[3], MIB + 512 * 1024);
    assert_int_equal(off[4], 0);
    assert_int_equal(st.segments, 1);
    assert_int_equal(st.allocated_peak, 2 * MIB);

    /* a freed large block stays cached and is reused by a later request */
    layout_buffer c[2] = {{3 * MIB, 0, 0}, {5 * MIB, 1, 1}};
    st = replay(c, 2, off);
    assert_int_equal(off[1], 0);
    assert_int_equal(st.segments, 1);
    assert_int_equal(st.reserved_peak, 20 * MIB);
    assert_int_equal(st.allocated_peak, 5 * MIB);

    /* best fit by (size, address): the smaller of two cached blocks */
    layout_buffer d[5] = {
        {4 * MIB, 0, 0}, {MIB + 512, 0, 5}, {2 * MIB, 0, 0}, {MIB + 512, 0, 5}, {2 * MIB, 1, 5},
    };
    st = replay(d, 5, off);
    assert_int_equal(off[4], off[2]);
}

/* ------------------------------------------------------------------------ */
/* CSV                                                                       */

static void test_csv_ok(void **state) {
    (void)state;
    char *path =
        write_temp("buffer , start,end ,size\r\n\r\n x , 0 , 2 , 10 \r\nlong-id,1,5,0\r\n  \n");
    layout_csv csv;
    char err[256];
    assert_int_equal(layout_csv_read(path, &csv, err, sizeof err), 0);
    assert_int_equal(csv.header_kind, 1);
    assert_int_equal(csv.n, 2);
    assert_string_equal(csv.ids[0], "x");
    assert_string_equal(csv.ids[1], "long-id");
    assert_int_equal(csv.bufs[0].start, 0);
    assert_int_equal(csv.bufs[0].end, 1);
    assert_int_equal(csv.bufs[1].size, 0);
    uint64_t off[2] = {0, 512};
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(layout_csv_write(f, &csv, off), 0);
    fclose(f);
    assert_string_equal(text, "buffer,start,end,size,offset\nx,0,2,10,0\nlong-id,1,5,0,512\n");
    free(text);
    layout_csv_free(&csv);
    unlink(path);
    free(path);

    /* the largest numbers allowed */
    path = write_temp("id,lower,upper,size\nb,2147483646,2147483647,18446744073709551615\n");
    assert_int_equal(layout_csv_read(path, &csv, err, sizeof err), 0);
    assert_int_equal(csv.bufs[0].end, 2147483646);
    assert_true(csv.bufs[0].size == UINT64_MAX);
    layout_csv_free(&csv);
    unlink(path);
    free(path);

    /* header only: no buffers */
    path = write_temp("id,lower,upper,size\n");
    assert_int_equal(layout_csv_read(path, &csv, err, sizeof err), 0);
    assert_int_equal(csv.n, 0);
    layout_csv_free(&csv);
    unlink(path);
    free(path);
}

static void test_csv_errors(void **state) {
    (void)state;
    static const struct {
        const char *content;
        const char *where; /* ":line:" or ":line:column:" after the path */
        const char *what;
    } cases[] = {
        {"", ":1:", "empty file"},
        {"\n  \n", ":1:", "empty file"},
        {"foo,bar\n", ":1:1:", "header must be"},
        {"id,lower,upper\n", ":1:", "missing column 'size'"},
        {"id,lower,end,size\n", ":1:10:", "expected 'upper'"},
        {"id,lower,upper,size,extra\n", ":1:21:", "extra column"},
        {"id,lower,upper,size\nb1,0,x,4\n", ":2:6:", "not a non-negative integer"},
        {"id,lower,upper,size\nb1,0,3,4\nb2,-1,3,4\n", ":3:4:", "negative"},
        {"id,lower,upper,size\nb1,0,3,18446744073709551616\n", ":2:8:", "too large"},
        {"id,lower,upper,size\nb1,0,2147483648,4\n", ":2:6:", "too large"},
        {"id,lower,upper,size\nb1,0,3,4\nb1,1,2,4\n",
         ":3:1:", "duplicate id 'b1' (first on line 2)"},
        {"id,lower,upper,size\nb1,3,3,4\n", ":2:6:", "empty lifetime"},
        {"id,lower,upper,size\nb1,4,3,4\n", ":2:6:", "empty lifetime"},
        {"id,lower,upper,size\nb1,0,3\n", ":2:", "missing column 'size'"},
        {"id,lower,upper,size\nb1,0,3,4,5\n", ":2:10:", "too many fields"},
        {"id,lower,upper,size\n ,0,3,4\n", ":2:1:", "id: empty field"},
        {"id,lower,upper,size\nb1,0,,4\n", ":2:6:", "upper: empty field"},
        {"id,lower,upper,size\nb1,0,3,4x\n", ":2:8:", "size: not a non-negative integer"},
        /* control bytes in a quoted field reach the message as '?' */
        {"id,lower,upper,size\rbuf\n", ":1:16:", "column 4 is 'size?buf', expected 'size'"},
        {"id,lower,upper,size\nb1,0,3,4\x1b[2J\n", ":2:8:", "'4?[2J'"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char *path = write_temp(cases[c].content);
        layout_csv csv;
        char err[512] = "";
        assert_int_equal(layout_csv_read(path, &csv, err, sizeof err), -1);
        char expect[512];
        snprintf(expect, sizeof expect, "%s%s", path, cases[c].where);
        if (strncmp(err, expect, strlen(expect)) != 0 || !strstr(err, cases[c].what))
            fail_msg("case %zu: got '%s', want '%s...%s'", c, err, expect, cases[c].what);
        unlink(path);
        free(path);
    }
    layout_csv csv;
    char err[256];
    assert_int_equal(layout_csv_read("/nonexistent/dir/x.csv", &csv, err, sizeof err), -1);
    assert_non_null(strstr(err, "/nonexistent/dir/x.csv"));
}

/* k copies of gap7 one after another in time (13 steps apart), into b. */
static void make_gap7_copies(size_t k, layout_buffer *b) {
    for (size_t c = 0; c < k; c++)
        for (size_t j = 0; j < 7; j++)
            b[7 * c + j] = (layout_buffer){gap7[j].size, gap7[j].start + 13 * (int32_t)c,
                                           gap7[j].end + 13 * (int32_t)c};
}

/* layout_lower_bound: above the live size where the buffers around the
 * busiest steps cannot stack without a hole, and never above the optimum
 * (the exact solve's, on random instances with slack). */
static void test_window_bound(void **state) {
    (void)state;
    layout_bound_stats st;
    /* gap7: live size 16, optimum 17 (test_solve proves it) */
    uint64_t lb = layout_lower_bound(&(layout_problem){gap7, 7, 1}, 18, NULL, &st);
    assert_int_equal(st.live, 16);
    assert_int_equal(lb, 17);
    assert_true(st.raised >= 1);
    /* never above upper: nothing is tried at or above it */
    assert_int_equal(layout_lower_bound(&(layout_problem){gap7, 7, 1}, 16, NULL, NULL), 16);
    /* three copies in time under one buffer that spans them all: 17 + 5 */
    layout_buffer g[22];
    make_gap7_copies(3, g);
    g[21] = (layout_buffer){5, 0, 40};
    assert_int_equal(layout_live_peak(g, 22), 21);
    assert_int_equal(layout_lower_bound(&(layout_problem){g, 22, 1}, 1000, NULL, NULL), 22);
    /* random instances with slack: bound <= optimum, and above the live
     * size on some */
    rng r = {2024};
    enum { N = 11 };
    layout_buffer b[N];
    uint64_t warm[N], off[N];
    int above = 0;
    for (int t = 0; t < 60; t++) {
        uint64_t f = rng_in(&r, 1, 3);
        int32_t t0 = (int32_t)rng_in(&r, 0, 12);
        for (size_t i = 0; i < N; i++) {
            /* gap7 (sizes times f) at a random time, and random buffers
             * around it: some meet it, some raise other steps */
            if (i < 7) {
                b[i] = (layout_buffer){gap7[i].size * f, gap7[i].start + t0, gap7[i].end + t0};
            } else {
                int32_t s = (int32_t)rng_in(&r, 0, 24);
                b[i] = (layout_buffer){rng_in(&r, 1, 12 * f), s, s + (int32_t)rng_in(&r, 0, 6)};
            }
        }
        uint64_t h = layout_best_heuristic(b, N, 1, warm, NULL);
        uint64_t w = layout_lower_bound(&(layout_problem){b, N, 1}, h, NULL, &st);
        uint64_t live = layout_live_peak(b, N);
        assert_true(w >= live);
        assert_true(w <= h);
        if (w == live) continue;
        above++;
        /* confirmed apart from the windows: the exact search on the whole
         * problem proves that nothing fits in w - 1 (capacity mode does not
         * use the window bound), and finds a layout at w here */
        layout_solve_opts o;
        layout_solve_defaults(&o);
        o.work = 20000000;
        o.time_limit_s = 30;
        layout_solve_result res;
        o.capacity = w - 1;
        assert_int_equal(layout_solve(&(layout_problem){b, N, 1}, warm, &o, off, &res),
                         LAYOUT_SOLVE_INFEASIBLE);
        o.capacity = w;
        layout_best_heuristic(b, N, 1, warm, NULL);
        layout_solve_status fs = layout_solve(&(layout_problem){b, N, 1}, warm, &o, off, &res);
        assert_true(fs == LAYOUT_SOLVE_FEASIBLE || fs == LAYOUT_SOLVE_OPTIMAL);
        assert_true(check_layout(b, N, off, 1));
        assert_true(layout_height(b, N, off) <= w);
    }
    assert_true(above >= 3); /* 6 of the 60 at this seed, each at the optimum */
}

/* lay_improve on a list too large for the exact steps' search (21,000
 * buffers: 3000 copies of gap7): from the heuristics' 18 to the optimum 17,
 * valid, deterministic; and layout_exact says why it stopped. */
static void test_improve_large(void **state) {
    (void)state;
    enum { K = 300, N = 7 * K };
    layout_buffer *b = malloc(N * sizeof *b);
    uint64_t *off = malloc(N * sizeof *off), *off2 = malloc(N * sizeof *off2);
    assert_non_null(b);
    assert_non_null(off);
    assert_non_null(off2);
    make_gap7_copies(K, b);
    assert_int_equal(layout_llfb(b, N, 1, off), 18);
    memcpy(off2, off, N * sizeof *off);
    lay_budget bud = {100000000, 1e300, LAY_STOP_NONE};
    lay_improve_stats st;
    assert_int_equal(lay_improve(&(layout_problem){b, N, 1}, off, 16, &bud, 0, &st), 17);
    assert_int_equal(st.start_height, 18);
    assert_int_equal(layout_height(b, N, off), 17);
    assert_true(check_layout(b, N, off, 1));
    assert_int_equal(bud.stop, LAY_STOP_NONE); /* a local optimum, not the budget */
    lay_budget bud2 = {100000000, 1e300, LAY_STOP_NONE};
    lay_improve(&(layout_problem){b, N, 1}, off2, 16, &bud2, 0, NULL);
    assert_memory_equal(off, off2, N * sizeof *off);
    assert_int_equal(bud.work, bud2.work);
    /* with the windows around pins as well: no higher, valid */
    layout_llfb(b, N, 1, off2);
    lay_budget bud3 = {100000000, 1e300, LAY_STOP_NONE};
    assert_true(lay_improve(&(layout_problem){b, N, 1}, off2, 16, &bud3, 1, NULL) <= 17);
    assert_true(check_layout(b, N, off2, 1));
    /* a budget too small stops it on work, and the layout stays valid */
    layout_llfb(b, N, 1, off2);
    lay_budget tiny = {5000, 1e300, LAY_STOP_NONE};
    assert_true(lay_improve(&(layout_problem){b, N, 1}, off2, 16, &tiny, 0, NULL) <= 18);
    assert_int_equal(tiny.stop, LAY_STOP_WORK);
    assert_true(check_layout(b, N, off2, 1));
    free(b);
    free(off);
    free(off2);
}

/* lay_improve with pinned pushes the whole layout down first: the long
 * buffer 12 bytes up goes onto the tallest short one it meets (height 13
 * -> 11, the live peak), valid; a layout it does not lower stays. */
static void test_improve_pushdown(void **state) {
    (void)state;
    static const layout_buffer b[3] = {{10, 0, 4}, {4, 5, 9}, {1, 0, 9}};
    uint64_t off[3] = {0, 0, 12};
    lay_budget bud = {1000000, 1e300, LAY_STOP_NONE};
    lay_improve_stats st;
    assert_int_equal(lay_improve(&(layout_problem){b, 3, 1}, off, 11, &bud, 1, &st), 11);
    assert_int_equal(st.pushed, 1);
    assert_int_equal(off[0], 0);
    assert_int_equal(off[1], 0);
    assert_int_equal(off[2], 10);
    assert_true(check_layout(b, 3, off, 1));
    /* already at its floor everywhere: pushing down changes nothing */
    uint64_t low[3] = {0, 0, 10};
    lay_budget bud2 = {1000000, 1e300, LAY_STOP_NONE};
    assert_int_equal(lay_improve(&(layout_problem){b, 3, 1}, low, 1, &bud2, 1, &st), 11);
    assert_int_equal(st.pushed, 0);
    assert_int_equal(low[2], 10);
    /* past the deadline the push-down stops on time and keeps the layout
     * (it used to run to its end on work alone) */
    uint64_t late[3] = {0, 0, 12};
    lay_budget bud3 = {1000000, 0, LAY_STOP_NONE};
    assert_int_equal(lay_improve(&(layout_problem){b, 3, 1}, late, 11, &bud3, 1, &st), 13);
    assert_int_equal(bud3.stop, LAY_STOP_TIME);
    assert_int_equal(st.pushed, 0);
    assert_int_equal(late[2], 12);
}

/* What stopped a search, told truly: a list larger than the exact search
 * takes ends at once "too large", not "by time"; a proof says proof. */
static void test_stop_reason(void **state) {
    (void)state;
    /* 2700 copies of an 8-piece zero-slack rectangle (6 steps x 8 bytes) */
    static const layout_buffer piece[8] = {{3, 0, 1}, {3, 2, 5}, {2, 0, 3}, {2, 4, 5},
                                           {3, 0, 0}, {3, 1, 2}, {1, 3, 5}, {2, 3, 5}};
    enum { K = 2700, N = 8 * K };
    layout_buffer *b = malloc(N * sizeof *b);
    uint64_t *warm = malloc(N * sizeof *warm), *off = malloc(N * sizeof *off);
    assert_non_null(b);
    assert_non_null(warm);
    assert_non_null(off);
    uint64_t sum = 0;
    for (size_t c = 0; c < K; c++)
        for (size_t j = 0; j < 8; j++) {
            size_t i = 8 * c + j;
            b[i] = (layout_buffer){piece[j].size, piece[j].start + 6 * (int32_t)c,
                                   piece[j].end + 6 * (int32_t)c};
            warm[i] = sum; /* everything stacked: valid, far from the bound */
            sum += piece[j].size;
        }
    assert_int_equal(layout_live_peak(b, N), 8);
    layout_solve_opts o;
    layout_solve_defaults(&o);
    o.time_limit_s = 60;
    layout_solve_result res;
    double t0 = roamc_now();
    assert_int_equal(layout_solve(&(layout_problem){b, N, 1}, warm, &o, off, &res),
                     LAYOUT_SOLVE_STOPPED);
    assert_true(roamc_now() - t0 < 30);
    assert_false(res.stopped_by_time);
    assert_int_equal(res.stop, LAYOUT_STOP_TOO_LARGE);
    assert_true(check_layout(b, 64, off, 1)); /* the warm start, kept */
    /* layout_exact: the heuristics reach the bound, a proof */
    layout_result er;
    layout_effort e = {0, 60, 0, LAYOUT_SHARES_EQUAL, NULL};
    assert_int_equal(layout_exact(&(layout_problem){b, N, 1}, warm, &e, off, &er), 8);
    assert_int_equal(er.stop, LAYOUT_STOP_PROOF);
    assert_true(er.proven_optimal);
    /* gap7 solved: proof */
    uint64_t w7[7], o7[7];
    layout_llfb(gap7, 7, 1, w7);
    layout_solve_defaults(&o);
    assert_int_equal(layout_solve(&(layout_problem){gap7, 7, 1}, w7, &o, o7, &res),
                     LAYOUT_SOLVE_OPTIMAL);
    assert_int_equal(res.stop, LAYOUT_STOP_PROOF);
    assert_int_equal(res.bound.bound, 17);
    free(b);
    free(warm);
    free(off);
}

/* Free buffers around pinned ones, as the tests write them: n free
 * buffers, npins pins at pin_off. */
typedef struct pinned_case {
    const layout_buffer *bufs;
    size_t n;
    const layout_buffer *pins;
    const uint64_t *pin_off;
    size_t npins;
    uint64_t align;
} pinned_case;

/* lay_bnb on q as one problem (the free buffers, then the pins) under
 * rules (NULL: lay_bnb_pinned_defaults), hint (may be NULL) the free
 * buffers' first order; off gets the free buffers' offsets. */
static lay_status pinned_solve(const pinned_case *q, uint64_t cap, lay_budget *bud, uint64_t *off,
                               const layout_bnb_rules *rules, const uint64_t *hint) {
    size_t m = q->n + q->npins;
    layout_buffer *all = malloc(m * sizeof *all);
    uint64_t *at = malloc(m * sizeof *at), *h = malloc(m * sizeof *h),
             *got = malloc(m * sizeof *got);
    for (size_t i = 0; i < q->n; i++) {
        all[i] = q->bufs[i];
        at[i] = LAY_FREE;
        h[i] = hint ? hint[i] : 0;
    }
    for (size_t j = 0; j < q->npins; j++) {
        all[q->n + j] = q->pins[j];
        at[q->n + j] = q->pin_off[j];
        h[q->n + j] = 0;
    }
    layout_bnb_rules pr;
    lay_bnb_pinned_defaults(&pr);
    lay_bnb_task task = {&(layout_problem){all, m, q->align}, &(lay_pins){at, hint ? h : NULL}, cap,
                         rules ? rules : &pr};
    lay_status r = lay_bnb(&task, bud, got, NULL);
    if (r == LAY_FOUND) {
        for (size_t j = 0; j < q->npins; j++) assert_int_equal(got[q->n + j], q->pin_off[j]);
        memcpy(off, got, q->n * sizeof *off);
    }
    free(all), free(at), free(h), free(got);
    return r;
}

/* Do free buffers (offsets off) avoid each other and the pins, all tops
 * within cap? */
static int pinned_layout_ok(const pinned_case *q, const uint64_t *off, uint64_t cap) {
    for (size_t a = 0; a < q->n; a++) {
        const layout_buffer *x = &q->bufs[a];
        if (off[a] % q->align || off[a] + x->size > cap) return 0;
        for (size_t b = a + 1; b < q->n; b++) {
            const layout_buffer *y = &q->bufs[b];
            if (x->start <= y->end && y->start <= x->end && off[a] < off[b] + y->size &&
                off[b] < off[a] + x->size)
                return 0;
        }
        for (size_t j = 0; j < q->npins; j++) {
            const layout_buffer *y = &q->pins[j];
            if (x->start <= y->end && y->start <= x->end && off[a] < q->pin_off[j] + y->size &&
                q->pin_off[j] < off[a] + x->size)
                return 0;
        }
    }
    return 1;
}

/* Is there any layout of the free buffers within cap (every offset tried)? */
static int pinned_brute(const pinned_case *q, uint64_t cap, uint64_t *off, size_t i) {
    if (i == q->n) return pinned_layout_ok(q, off, cap);
    for (off[i] = 0; off[i] + q->bufs[i].size <= cap; off[i]++) {
        pinned_case head = *q;
        head.n = i + 1;
        if (pinned_layout_ok(&head, off, cap) && pinned_brute(q, cap, off, i + 1)) return 1;
    }
    return 0;
}

/* lay_bnb with pins: free buffers around pinned ones.  By hand, a buffer
 * whose only room is below a pin (the window search above the crossing
 * buffers cannot find it); then against brute force on random small
 * instances, under the rules lay_improve uses and under all of them (every
 * rule stays valid with pins: twins, decompose, floor, tight, the mirror
 * image). */
static void test_pinned_search(void **state) {
    (void)state;
    /* pin: 4 bytes at offset 4 over steps 0-9; free: A and B below it,
     * C and D side by side below it, E after it */
    static const layout_buffer pin[1] = {{4, 0, 9}};
    static const uint64_t pin_off[1] = {4};
    static const layout_buffer fr[5] = {{4, 2, 3}, {4, 0, 1}, {2, 5, 6}, {2, 5, 6}, {8, 10, 12}};
    uint64_t off[6];
    lay_budget bud = {1000000, 1e300, LAY_STOP_NONE};
    pinned_case q = {fr, 5, pin, pin_off, 1, 1};
    assert_int_equal(pinned_solve(&q, 8, &bud, off, NULL, NULL), LAY_FOUND);
    assert_true(pinned_layout_ok(&q, off, 8));
    assert_int_equal(off[0], 0); /* below the pin: the only room */
    assert_int_equal(off[1], 0);
    assert_int_equal(off[2] + off[3], 2); /* 0 and 2 */
    /* two 4-byte buffers at steps 2-3: below the pin there is room for one,
     * above it (capacity 8) none: proved infeasible; at 12 one goes above */
    static const layout_buffer two[2] = {{4, 2, 3}, {4, 2, 3}};
    pinned_case q2 = {two, 2, pin, pin_off, 1, 1};
    bud = (lay_budget){1000000, 1e300, LAY_STOP_NONE};
    assert_int_equal(pinned_solve(&q2, 8, &bud, off, NULL, NULL), LAY_INFEASIBLE);
    assert_int_equal(pinned_solve(&q2, 12, &bud, off, NULL, NULL), LAY_FOUND);
    assert_true(pinned_layout_ok(&q2, off, 12));
    assert_true((off[0] == 0 && off[1] == 8) || (off[0] == 8 && off[1] == 0));
    /* align 4: a 2-byte pin at offset 4 leaves [0, 4) and [8, ...) */
    static const layout_buffer pin2[1] = {{2, 0, 3}};
    static const uint64_t pin2_off[1] = {4};
    static const layout_buffer one[2] = {{3, 1, 2}, {4, 0, 0}};
    pinned_case q3 = {one, 2, pin2, pin2_off, 1, 4};
    bud = (lay_budget){1000000, 1e300, LAY_STOP_NONE};
    assert_int_equal(pinned_solve(&q3, 8, &bud, off, NULL, NULL), LAY_FOUND);
    assert_int_equal(off[0], 0);
    assert_int_equal(off[1], 0);
    /* a budget too small: gives up on work */
    bud = (lay_budget){1, 1e300, LAY_STOP_NONE};
    assert_int_equal(pinned_solve(&q, 8, &bud, off, NULL, NULL), LAY_GAVE_UP);
    assert_int_equal(bud.stop, LAY_STOP_WORK);

    /* random: 3 pins and 5 free buffers, sizes 1-4, steps 0-5, pins at
     * random non-overlapping offsets; lay_bnb answers as brute force */
    layout_bnb_rules all;
    lay_bnb_defaults(&all);
    uint64_t seed = 12345;
    int found = 0, infeasible = 0;
    for (int t = 0; t < 300; t++) {
        layout_buffer pins[3], bufs[5];
        uint64_t poff[3], bf[5], hint[5];
        size_t np = 0;
        while (np < 3) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            layout_buffer c = {1 + (seed >> 33) % 4, (int32_t)((seed >> 40) % 6), 0};
            c.end = c.start + (int32_t)((seed >> 20) % 3);
            uint64_t o = (seed >> 50) % 8;
            int clash = 0;
            for (size_t j = 0; j < np; j++)
                clash |= c.start <= pins[j].end && pins[j].start <= c.end &&
                         o < poff[j] + pins[j].size && poff[j] < o + c.size;
            if (clash) continue;
            pins[np] = c;
            poff[np++] = o;
        }
        for (size_t i = 0; i < 5; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            bufs[i] = (layout_buffer){1 + (seed >> 33) % 4, (int32_t)((seed >> 40) % 6), 0};
            bufs[i].end = bufs[i].start + (int32_t)((seed >> 20) % 3);
            hint[i] = (seed >> 8) % 7;
        }
        uint64_t cap = 4 + (uint64_t)(t % 6);
        pinned_case r = {bufs, 5, pins, poff, 3, 1};
        int want = pinned_brute(&r, cap, bf, 0);
        for (int v = 0; v < 3; v++) {
            bud = (lay_budget){10000000, 1e300, LAY_STOP_NONE};
            lay_status got =
                pinned_solve(&r, cap, &bud, off, v == 2 ? &all : NULL, v == 1 ? hint : NULL);
            assert_int_equal(got, want ? LAY_FOUND : LAY_INFEASIBLE);
            if (want) assert_true(pinned_layout_ok(&r, off, cap));
        }
        found += want;
        infeasible += !want;
    }
    assert_true(found > 30 && infeasible > 30); /* both answers exercised */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_measures),
        cmocka_unit_test(test_validate_random),
        cmocka_unit_test(test_five_buffers),
        cmocka_unit_test(test_heuristics_by_hand),
        cmocka_unit_test(test_random_instances),
        cmocka_unit_test(test_heuristics_against_naive),
        cmocka_unit_test(test_large),
        cmocka_unit_test(test_search_against_brute_force),
        cmocka_unit_test(test_ilp_optimum_above_bound),
        cmocka_unit_test(test_glpk_alone),
        cmocka_unit_test(test_perfect_instances),
        cmocka_unit_test(test_bnb_rules_against_brute_force),
        cmocka_unit_test(test_sweep),
        cmocka_unit_test(test_solve),
        cmocka_unit_test(test_window_bound),
        cmocka_unit_test(test_improve_large),
        cmocka_unit_test(test_pinned_search),
        cmocka_unit_test(test_improve_pushdown),
        cmocka_unit_test(test_stop_reason),
        cmocka_unit_test(test_search_slack_tiny_sizes),
        cmocka_unit_test(test_search_resume),
        cmocka_unit_test(test_exact_work_budget),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_pytorch_pools),
        cmocka_unit_test(test_pytorch_split_rule),
        cmocka_unit_test(test_pytorch_merge_and_reuse),
        cmocka_unit_test(test_csv_ok),
        cmocka_unit_test(test_csv_errors),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    ilp_thread_cleanup(); /* GLPK keeps an environment per thread */
    return rc;
}
