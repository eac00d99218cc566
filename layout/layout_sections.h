/* layout_sections.h — what the exact searches of layout/ (layout_search.c,
 * layout_bnb.c) and the improvement (layout_improve.c) share: the one sweep
 * of a problem into time sections (with its overlaps and cuts), its mirror
 * image in time, twins, and an undo trail.  Private to layout/.
 *
 * Sections: the distinct values of start and end + 1 over the buffers cut
 * time into sections; a buffer is live in the sections [sa, sb) and in all
 * of each.  The live-size bound holds per section, and a boundary that no
 * unplaced buffer crosses splits a problem into independent pieces.
 */
#ifndef ROAMC_LAYOUT_SECTIONS_H
#define ROAMC_LAYOUT_SECTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "base.h" /* x* allocators */
#include "layout.h"
#include "layout_internal.h" /* lay_reduced */

typedef struct lay_sections {
    size_t n;           /* buffers */
    size_t *orig;       /* per buffer: its index in the input */
    uint64_t *size;     /* per buffer: size in units (lay_reduced) */
    size_t nsec;        /* sections */
    int64_t *bound;     /* nsec + 1: section k is the steps [bound[k], bound[k + 1]) */
    size_t *sa, *sb;    /* per buffer: the sections it is live in, [sa, sb) */
    uint64_t *steps;    /* per buffer: lifetime length in steps */
    size_t *live_begin; /* per section + 1: the buffers live in section k are */
    size_t *live_buf;   /*   live_buf[live_begin[k] .. live_begin[k + 1]) */
} lay_sections;

/* The sweep alone: the sections of the n buffers orig[0..n) of bufs
 * (n >= 1), each buffer's [sa, sb) and steps, sizes copied from size (may
 * be NULL: then sc->size is NULL); no live lists (live_begin NULL: they
 * cost the sections each buffer spans, too much for a whole long list).
 * lay_improve's push-down reads it.  Free with lay_sections_free. */
void lay_sections_sweep(lay_sections *sc, const layout_buffer *bufs, const size_t *orig,
                        const uint64_t *size, size_t n);

/* The buffers left in red (red->n >= 1; buffer b is input buffer
 * red->orig[b] of bufs, whose lifetimes are read: they may be mirrored),
 * their sizes in units, and their sections.  Free with lay_sections_free. */
void lay_sections_init(lay_sections *sc, const layout_buffer *bufs, const lay_reduced *red);
void lay_sections_free(lay_sections *sc);

/* The pairs of buffers whose lifetimes meet (their section ranges
 * intersect), in compressed rows: the buffers meeting b are
 * (*ov)[(*begin)[b] .. (*begin)[b + 1]).  Found by a sweep in order of
 * first section, so the cost is the pairs, not n^2. */
void lay_sections_overlaps(const lay_sections *sc, size_t **begin, uint32_t **ov);

/* Nothing placed: total[k] = the sizes live in section k, cuts[k] = the
 * buffers live on both sides of the boundary between k and k + 1. */
void lay_sections_totals(const lay_sections *sc, uint64_t *total, uint64_t *cuts);

/* twin[b]: the buffer before b (in the order of key, a distinct value per
 * buffer; NULL: the buffers' own order) with the same sections and size,
 * SIZE_MAX for none.  Twins can trade places in any layout, so a search
 * places them in that order. */
void lay_sections_twins(const lay_sections *sc, const uint64_t *key, size_t *twin);

/* Key R of the searches' preorders for buffer b: a hash of b and seed, so
 * that each seed breaks ties differently, and every run alike. */
static inline uint64_t lay_random_tie(size_t b, uint64_t seed) {
    uint64_t x = ((uint64_t)b + 1) * 0x9e3779b97f4a7c15ull ^ seed * 0xbf58476d1ce4e5b9ull;
    x ^= x >> 31;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 29);
}

/* Stable merge sort of n records of size bytes at base (tmp: scratch of n
 * records): a record goes before another when before(x, y, ctx) says so.
 * (qsort is not stable and has no context argument for the preorders'
 * keys.) */
void lay_merge_sort(void *base, void *tmp, size_t n, size_t size,
                    int (*before)(const void *x, const void *y, const void *ctx), const void *ctx);

/* bufs with time reversed (start -> -end, end -> -start): the same layouts,
 * walked differently by a search.  NULL when some start is INT32_MIN (it
 * cannot be negated). */
layout_buffer *lay_mirror(const layout_buffer *bufs, size_t n);

/* An undo trail: every change of the search state goes through
 * lay_trail_set, and lay_trail_undo restores the state of a mark (the
 * trail's length then). */
typedef struct lay_trail_entry {
    uint64_t *where;
    uint64_t old;
} lay_trail_entry;

typedef struct lay_trail {
    lay_trail_entry *log;
    size_t len, cap;
} lay_trail;

static inline void lay_trail_set(lay_trail *t, uint64_t *where, uint64_t value) {
    if (t->len == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 4096;
        t->log = xreallocarray(t->log, t->cap, sizeof *t->log);
    }
    t->log[t->len++] = (lay_trail_entry){where, *where};
    *where = value;
}

static inline void lay_trail_undo(lay_trail *t, size_t mark) {
    while (t->len > mark) {
        t->len--;
        *t->log[t->len].where = t->log[t->len].old;
    }
}

#endif
