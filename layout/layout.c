/* layout.c — measures of a layout (live peak, height, validation) and the
 * heuristic layouts (LLFB, greedy by size, best fit in schedule order).
 *
 * All three heuristics are one routine, lay_place_in_order: take the buffers
 * in some order and put each one into a gap left by the buffers already
 * placed that it conflicts with (lifetimes intersect).  They differ only in
 * the order and in which gap wins (the lowest, or the tightest).  Conflicting
 * placed buffers are found with a static interval index, so a buffer costs
 * O(log n + k log k) where k is the number of placed buffers it conflicts
 * with, never a scan over all buffers.
 */
#include "layout.h"
#include "layout_internal.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Sorting by precomputed keys (qsort has no context argument, so the keys   */
/* travel with the index).                                                   */

int lay_key_cmp(const void *pa, const void *pb) {
    const lay_key *a = pa, *b = pb;
    if (a->k1 != b->k1) return a->k1 < b->k1 ? -1 : 1;
    if (a->k2 != b->k2) return a->k2 < b->k2 ? -1 : 1;
    if (a->k3 != b->k3) return a->k3 < b->k3 ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

int lay_i64_cmp(const void *pa, const void *pb) {
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return (a > b) - (a < b);
}

int lay_i32_cmp(const void *pa, const void *pb) {
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    return (a > b) - (a < b);
}

/* Maps a signed step to an unsigned key with the same order. */
static uint64_t lay_step_key(int64_t t) {
    return (uint64_t)t ^ 0x8000000000000000ULL;
}

void lay_events_init(const layout_buffer *bufs, size_t n, lay_events *ev) {
    ev->allocs = xmallocarray(n, sizeof *ev->allocs);
    ev->frees = xmallocarray(n, sizeof *ev->frees);
    ev->m = 0;
    for (size_t i = 0; i < n; i++) {
        if (bufs[i].size == 0) continue; /* nothing to allocate */
        ev->allocs[ev->m] = (lay_key){lay_step_key(bufs[i].start), 0, 0, i};
        ev->frees[ev->m] = (lay_key){lay_step_key(bufs[i].end), 0, 0, i};
        ev->m++;
    }
    qsort(ev->allocs, ev->m, sizeof *ev->allocs, lay_key_cmp);
    qsort(ev->frees, ev->m, sizeof *ev->frees, lay_key_cmp);
}

void lay_events_free(lay_events *ev) {
    free(ev->allocs);
    free(ev->frees);
    ev->allocs = ev->frees = NULL;
    ev->m = 0;
}

/* ------------------------------------------------------------------------ */
/* Live peak and height                                                      */

uint64_t layout_live_peak(const layout_buffer *bufs, size_t n) {
    /* Sweep over time: a buffer adds its size at start and removes it at
     * end + 1; removals at a step happen before additions at that step,
     * because a buffer ending at t - 1 is no longer live at t. */
    lay_key *starts = xmallocarray(n, sizeof *starts);
    lay_key *ends = xmallocarray(n, sizeof *ends);
    uint64_t peak = 0;
    for (size_t i = 0; i < n; i++) {
        ROAMC_ASSERT(bufs[i].start <= bufs[i].end);
        starts[i] = (lay_key){lay_step_key(bufs[i].start), 0, 0, i};
        ends[i] = (lay_key){lay_step_key((int64_t)bufs[i].end + 1), 0, 0, i};
    }
    qsort(starts, n, sizeof *starts, lay_key_cmp);
    qsort(ends, n, sizeof *ends, lay_key_cmp);
    uint64_t live = 0;
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        while (j < n && ends[j].k1 <= starts[i].k1) live -= bufs[ends[j++].idx].size;
        live += bufs[starts[i].idx].size;
        if (live > peak) peak = live;
    }
    free(starts);
    free(ends);
    return peak;
}

uint64_t layout_height(const layout_buffer *bufs, size_t n, const uint64_t *offsets) {
    uint64_t h = 0;
    for (size_t i = 0; i < n; i++)
        if (bufs[i].size > 0 && offsets[i] + bufs[i].size > h) h = offsets[i] + bufs[i].size;
    return h;
}

/* ------------------------------------------------------------------------ */
/* Validation                                                                */

/* Do [oa, oa + sa) and [ob, ob + sb) intersect?  Written without oa + sa so
 * that absurd offsets cannot overflow into a false "valid". */
static int lay_addr_overlap(uint64_t oa, uint64_t sa, uint64_t ob, uint64_t sb) {
    if (sa == 0 || sb == 0) return 0;
    return oa <= ob ? ob - oa < sa : oa - ob < sb;
}

int layout_validate(const layout_buffer *bufs, size_t n, const uint64_t *offsets, uint64_t align,
                    size_t *a, size_t *b) {
    ROAMC_ASSERT(align >= 1);
    for (size_t i = 0; i < n; i++) {
        if (offsets[i] % align != 0 ||
            (bufs[i].size > 0 && offsets[i] > UINT64_MAX - bufs[i].size)) {
            if (a && b) *a = *b = i;
            return -1;
        }
    }
    /* Sweep over time keeping the live buffers in a set ordered by offset.
     * While the live set has no overlap, a new buffer can only overlap its
     * neighbours in that order: the one at or below its offset and the
     * first one above it.  So each insertion checks two buffers. */
    lay_key *starts = xmallocarray(n, sizeof *starts);
    lay_key *ends = xmallocarray(n, sizeof *ends);
    lay_set live;
    int rc = 0;
    lay_set_init(&live, n);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (bufs[i].size == 0) continue; /* occupies no address, conflicts with nothing */
        starts[m] = (lay_key){lay_step_key(bufs[i].start), 0, 0, i};
        ends[m] = (lay_key){lay_step_key((int64_t)bufs[i].end + 1), 0, 0, i};
        m++;
    }
    qsort(starts, m, sizeof *starts, lay_key_cmp);
    qsort(ends, m, sizeof *ends, lay_key_cmp);
    size_t j = 0;
    for (size_t k = 0; k < m && rc == 0; k++) {
        while (j < m && ends[j].k1 <= starts[k].k1) {
            lay_set_erase(&live, ends[j].idx);
            j++;
        }
        size_t x = starts[k].idx;
        uint64_t ox = offsets[x], sx = bufs[x].size;
        size_t below = lay_set_floor(&live, ox, UINT64_MAX);
        size_t above = lay_set_ceil(&live, ox, UINT64_MAX);
        size_t hit = LAY_NIL;
        if (below != LAY_NIL && lay_addr_overlap(offsets[below], bufs[below].size, ox, sx))
            hit = below;
        else if (above != LAY_NIL && lay_addr_overlap(offsets[above], bufs[above].size, ox, sx))
            hit = above;
        if (hit != LAY_NIL) {
            if (a && b) {
                *a = hit < x ? hit : x;
                *b = hit < x ? x : hit;
            }
            rc = -1;
            break;
        }
        lay_set_insert(&live, x, ox, x);
    }
    lay_set_free(&live);
    free(starts);
    free(ends);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Conflict index: the address ranges taken by the placed buffers whose      */
/* lifetime meets [s, e].                                                    */
/*                                                                           */
/* A segment tree over the distinct steps.  A placed buffer is filed under  */
/* the O(log T) nodes that cover its lifetime exactly ("canonical" nodes).  */
/* Each node keeps two lists of address ranges, merged into sorted disjoint */
/* blocks (ranges that touch or overlap become one):                        */
/*   own: the ranges of the buffers filed at this node;                      */
/*   sub: the ranges of the buffers filed anywhere in its subtree.          */
/* A placed buffer meets [s, e] exactly when it is filed at a node inside    */
/* one of the canonical nodes of [s, e] (found in their sub), or at a node   */
/* that contains step s or step e (found in own along the two leaf-to-root   */
/* paths).  A query reads O(log T) lists whose merged blocks are few in     */
/* practice (buffers stacked next to each other cost one block), instead of */
/* one range per conflicting buffer.                                         */

/* An address range [lo, hi). */
typedef struct lay_span {
    uint64_t lo, hi;
} lay_span;

/* A growing array of ranges. */
typedef struct lay_spans {
    lay_span *v;
    size_t n, cap;
} lay_spans;

/* Storage of an index's lists.  A deep network's index has 100,000s of
 * short lists; with a malloc each, allocating and freeing them was a tenth
 * of the layout stage.  Arrays come from big chunks instead, in sizes
 * 4 * 2^k; an array given up when its list grows goes to a free list of
 * its size for the next list that needs one; everything is freed at once. */
typedef struct lay_chunk {
    struct lay_chunk *next;
    size_t used, cap; /* in spans */
    lay_span v[];
} lay_chunk;

#define LAY_SIZE_CLASSES 48

typedef struct lay_arena {
    lay_chunk *chunks;
    lay_span *spare[LAY_SIZE_CLASSES]; /* free arrays by class; the first
                                          span of each holds the next */
} lay_arena;

static size_t lay_size_class(size_t cap) {
    size_t k = 0;
    while ((size_t)4 << k < cap) k++;
    return k;
}

/* An array of cap spans (cap = 4 * 2^k). */
static lay_span *lay_arena_take(lay_arena *a, size_t cap) {
    size_t k = lay_size_class(cap);
    ROAMC_ASSERT(k < LAY_SIZE_CLASSES && (size_t)4 << k == cap);
    lay_span *v = a->spare[k];
    if (v) {
        /* the free list's link lives in the array itself */
        memcpy(&a->spare[k], (const void *)v, sizeof a->spare[k]);
        return v;
    }
    lay_chunk *c = a->chunks;
    if (!c || c->cap - c->used < cap) {
        size_t ccap = c && c->cap < ((size_t)1 << 20) ? 2 * c->cap : c ? c->cap : 256;
        if (ccap < cap) ccap = cap;
        c = xmalloc(sizeof *c + ccap * sizeof(lay_span));
        c->next = a->chunks;
        c->used = 0;
        c->cap = ccap;
        a->chunks = c;
    }
    v = c->v + c->used;
    c->used += cap;
    return v;
}

static void lay_arena_give(lay_arena *a, lay_span *v, size_t cap) {
    size_t k = lay_size_class(cap);
    memcpy((void *)v, &a->spare[k], sizeof a->spare[k]);
    a->spare[k] = v;
}

static void lay_arena_free(lay_arena *a) {
    while (a->chunks) {
        lay_chunk *c = a->chunks;
        a->chunks = c->next;
        free(c);
    }
}

static void lay_spans_reserve(lay_arena *a, lay_spans *s, size_t more) {
    if (s->n + more <= s->cap) return;
    size_t cap = s->cap ? s->cap : 4;
    while (cap < s->n + more) cap *= 2;
    lay_span *v = lay_arena_take(a, cap);
    if (s->n) memcpy(v, s->v, s->n * sizeof *v);
    if (s->cap) lay_arena_give(a, s->v, s->cap);
    s->v = v;
    s->cap = cap;
}

/* The first block of b (sorted and disjoint, so their ends increase) that
 * ends above x; b->n when none does. */
static size_t lay_spans_ending_after(const lay_spans *b, uint64_t x) {
    size_t i = 0, r = b->n;
    while (i < r) {
        size_t mid = i + (r - i) / 2;
        if (b->v[mid].hi <= x)
            i = mid + 1;
        else
            r = mid;
    }
    return i;
}

/* Adds [lo, hi) to a sorted array of disjoint blocks (a union: the blocks it
 * touches or overlaps are merged with it). */
static void lay_blocks_add(lay_arena *a, lay_spans *b, uint64_t lo, uint64_t hi) {
    size_t i =
        lo ? lay_spans_ending_after(b, lo - 1) : 0; /* first block that ends at or after lo */
    size_t j = i;                                   /* blocks [i, j) merge with the new one */
    while (j < b->n && b->v[j].lo <= hi) {
        if (b->v[j].lo < lo) lo = b->v[j].lo;
        if (b->v[j].hi > hi) hi = b->v[j].hi;
        j++;
    }
    if (j == i) { /* nothing to merge: insert */
        lay_spans_reserve(a, b, 1);
        memmove(&b->v[i + 1], &b->v[i], (b->n - i) * sizeof *b->v);
        b->n++;
    } else if (j > i + 1) { /* replace blocks [i, j) by one */
        memmove(&b->v[i + 1], &b->v[j], (b->n - j) * sizeof *b->v);
        b->n -= j - i - 1;
    } /* else block i grows in place */
    b->v[i] = (lay_span){lo, hi};
}

typedef struct lay_index {
    int64_t *steps; /* sorted distinct starts and ends: the leaves */
    size_t nsteps;
    size_t cap;     /* leaves, a power of two >= nsteps */
    lay_spans *own; /* 2 * cap nodes (1 = root) */
    lay_spans *sub;
    size_t *stamp; /* per node: last insertion that updated its sub */
    size_t inserts;
    /* read[v]: 1 when v is a canonical node of some non-empty buffer's
     * lifetime, the only nodes whose sub a query reads (queries come from
     * the buffers the index was made for).  The others' sub is not kept:
     * 4 in 10 sub updates on a deep network. */
    unsigned char *read;
    lay_arena arena; /* the arrays of own, sub and pu */
    /* Path unions, a cache: pu[v] = the union of own[u] over v and all its
     * ancestors u, for nodes LAY_PU_TAIL levels or more above the leaves.
     * A query needs the union of own along a leaf's path (the buffers live
     * at that step); read list by list, the own lists of a deep network's
     * upper nodes each hold a scattered subset of the stacked activations,
     * so every query walked all of them (linear per query, quadratic in
     * all).  The path union is merged into few blocks where they stack.
     * pu_at[v]: 1 + the insertion count when pu[v] was last brought up to
     * date (0: never); own_at[v]: the insertion count when own[v] last
     * changed.  An out-of-date pu[v] takes the ranges added to own on its
     * path since (log[u] of each node u at or above that level: every
     * range added to own[u], in insertion order) when they are few, else
     * it is rebuilt from its parent's: a deep network's long buffers land
     * on the upper nodes one after another, and rebuilding long unions for
     * every one of them was quadratic. */
    lay_spans *pu;
    size_t *pu_at, *own_at;
    struct lay_log *log; /* nodes v < pu_lim */
    size_t pu_lim;
} lay_index;

/* A range added to an own list, and when. */
typedef struct lay_log_entry {
    uint64_t lo, hi;
    size_t at; /* the insertion count */
} lay_log_entry;

typedef struct lay_log {
    lay_log_entry *v;
    size_t n, cap;
} lay_log;

/* Levels above the leaves without a path union: their own lists hold short
 * buffers, few, and every insertion there would invalidate the cache. */
#define LAY_PU_TAIL 7

static void lay_index_free(lay_index *ix) {
    for (size_t v = 0; ix->log && v < ix->pu_lim; v++) free(ix->log[v].v);
    free(ix->log);
    lay_arena_free(&ix->arena);
    free(ix->own);
    free(ix->sub);
    free(ix->stamp);
    free(ix->read);
    free(ix->steps);
    free(ix->pu);
    free(ix->pu_at);
    free(ix->own_at);
}

static size_t lay_index_leaf(const lay_index *ix, int64_t t);

static void lay_index_init(lay_index *ix, const layout_buffer *bufs, size_t n) {
    memset(ix, 0, sizeof *ix);
    ix->steps = xmallocarray(2 * n, sizeof *ix->steps);
    for (size_t i = 0; i < n; i++) {
        ix->steps[2 * i] = bufs[i].start;
        ix->steps[2 * i + 1] = bufs[i].end;
    }
    qsort(ix->steps, 2 * n, sizeof *ix->steps, lay_i64_cmp);
    for (size_t i = 0; i < 2 * n; i++)
        if (ix->nsteps == 0 || ix->steps[ix->nsteps - 1] != ix->steps[i])
            ix->steps[ix->nsteps++] = ix->steps[i];
    ix->cap = 1;
    while (ix->cap < ix->nsteps) ix->cap *= 2;
    ix->own = xcalloc(2 * ix->cap, sizeof *ix->own);
    ix->sub = xcalloc(2 * ix->cap, sizeof *ix->sub);
    ix->stamp = xcalloc(2 * ix->cap, sizeof *ix->stamp);
    ix->pu = xcalloc(2 * ix->cap, sizeof *ix->pu);
    ix->pu_at = xcalloc(2 * ix->cap, sizeof *ix->pu_at);
    ix->own_at = xcalloc(2 * ix->cap, sizeof *ix->own_at);
    ix->read = xcalloc(2 * ix->cap, sizeof *ix->read);
    ix->pu_lim = (2 * ix->cap) >> LAY_PU_TAIL; /* the nodes at or above the path unions' level */
    ix->log = xcalloc(ix->pu_lim, sizeof *ix->log);
    for (size_t i = 0; i < n; i++) {
        if (bufs[i].size == 0) continue; /* never queried */
        size_t l = lay_index_leaf(ix, bufs[i].start), r = lay_index_leaf(ix, bufs[i].end) + 1;
        for (; l < r; l /= 2, r /= 2) {
            if (l & 1) ix->read[l++] = 1;
            if (r & 1) ix->read[--r] = 1;
        }
    }
}

/* dst = a deep copy of src (its lists in arrays of its own arena). */
static void lay_index_clone(lay_index *dst, const lay_index *src) {
    memset(dst, 0, sizeof *dst);
    size_t nodes = 2 * src->cap;
    dst->nsteps = src->nsteps;
    dst->cap = src->cap;
    dst->inserts = src->inserts;
    dst->steps = xmallocarray(src->nsteps, sizeof *dst->steps);
    dst->own = xcalloc(nodes, sizeof *dst->own);
    dst->sub = xcalloc(nodes, sizeof *dst->sub);
    dst->stamp = xmallocarray(nodes, sizeof *dst->stamp);
    dst->pu = xcalloc(nodes, sizeof *dst->pu);
    dst->pu_at = xmallocarray(nodes, sizeof *dst->pu_at);
    dst->own_at = xmallocarray(nodes, sizeof *dst->own_at);
    dst->read = xmallocarray(nodes, sizeof *dst->read);
    dst->pu_lim = src->pu_lim;
    dst->log = xcalloc(src->pu_lim, sizeof *dst->log);
    memcpy(dst->steps, src->steps, src->nsteps * sizeof *dst->steps);
    memcpy(dst->stamp, src->stamp, nodes * sizeof *dst->stamp);
    memcpy(dst->pu_at, src->pu_at, nodes * sizeof *dst->pu_at);
    memcpy(dst->own_at, src->own_at, nodes * sizeof *dst->own_at);
    memcpy(dst->read, src->read, nodes * sizeof *dst->read);
    for (size_t v = 0; v < src->pu_lim; v++) {
        const lay_log *from = &src->log[v];
        if (from->n == 0) continue;
        dst->log[v].v = xmallocarray(from->n, sizeof *from->v);
        memcpy(dst->log[v].v, from->v, from->n * sizeof *from->v);
        dst->log[v].n = dst->log[v].cap = from->n;
    }
    for (size_t v = 0; v < nodes; v++) {
        const lay_spans *from[3] = {&src->own[v], &src->sub[v], &src->pu[v]};
        lay_spans *to[3] = {&dst->own[v], &dst->sub[v], &dst->pu[v]};
        for (int k = 0; k < 3; k++) {
            if (from[k]->n == 0) continue;
            lay_spans_reserve(&dst->arena, to[k], from[k]->n);
            memcpy(to[k]->v, from[k]->v, from[k]->n * sizeof *to[k]->v);
            to[k]->n = from[k]->n;
        }
    }
}

/* Leaf node of step t, which is one of the steps of the index. */
static size_t lay_index_leaf(const lay_index *ix, int64_t t) {
    return lay_find_step(ix->steps, ix->nsteps, t) + ix->cap;
}

/* Records a buffer with lifetime [s, e] as placed at addresses [lo, hi). */
static void lay_index_place(lay_index *ix, int64_t s, int64_t e, uint64_t lo, uint64_t hi) {
    ix->inserts++;
    size_t l = lay_index_leaf(ix, s), r = lay_index_leaf(ix, e) + 1;
    for (; l < r; l /= 2, r /= 2) {
        size_t canon[2], nc = 0;
        if (l & 1) canon[nc++] = l++;
        if (r & 1) canon[nc++] = --r;
        for (size_t c = 0; c < nc; c++) {
            lay_blocks_add(&ix->arena, &ix->own[canon[c]], lo, hi);
            ix->own_at[canon[c]] = ix->inserts;
            if (canon[c] < ix->pu_lim) {
                lay_log *lg = &ix->log[canon[c]];
                if (lg->n == lg->cap) {
                    lg->cap = lg->cap ? 2 * lg->cap : 8;
                    lg->v = xreallocarray(lg->v, lg->cap, sizeof *lg->v);
                }
                lg->v[lg->n++] = (lay_log_entry){lo, hi, ix->inserts};
            }
            /* sub of the node and its ancestors, each once, where read */
            for (size_t v = canon[c]; v >= 1 && ix->stamp[v] != ix->inserts; v /= 2) {
                ix->stamp[v] = ix->inserts;
                if (ix->read[v]) lay_blocks_add(&ix->arena, &ix->sub[v], lo, hi);
            }
        }
    }
}

/* The lists a query reads: at most 4 per tree level. */
typedef struct lay_lists {
    const lay_spans **v;
    size_t n, cap;
} lay_lists;

static void lay_lists_push(lay_lists *l, const lay_spans *x) {
    ROAMC_ASSERT(l->n < l->cap);
    if (x->n > 0) l->v[l->n++] = x;
}

/* out = the union of the sorted block lists a and b (a may be NULL),
 * blocks that touch or overlap merged, as lay_blocks_add keeps them. */
static void lay_spans_union(lay_arena *arena, lay_spans *out, const lay_spans *a,
                            const lay_spans *b) {
    size_t na = a ? a->n : 0;
    out->n = 0;
    lay_spans_reserve(arena, out, na + b->n);
    size_t i = 0, j = 0;
    while (i < na || j < b->n) {
        lay_span x = j == b->n || (i < na && a->v[i].lo < b->v[j].lo) ? a->v[i++] : b->v[j++];
        if (out->n && x.lo <= out->v[out->n - 1].hi) {
            if (x.hi > out->v[out->n - 1].hi) out->v[out->n - 1].hi = x.hi;
        } else
            out->v[out->n++] = x;
    }
}

/* Ranges added to own on a path since a path union was brought up to date
 * that it takes one by one; more, and it is rebuilt. */
#define LAY_PU_ADD_MAX 64

/* The path union of node a (see lay_index), brought up to date top-down:
 * each node on the path that is out of date takes the ranges added on its
 * path since, or is rebuilt from its parent's (current by then). */
static const lay_spans *lay_index_pu(lay_index *ix, size_t a) {
    size_t path[64], from[64], d = 0;
    for (size_t v = a; v >= 1; v /= 2) path[d++] = v; /* leaf-most first */
    ROAMC_ASSERT(a < ix->pu_lim);
    size_t changed = 0; /* latest change to own on the path so far */
    for (size_t k = d; k-- > 0;) {
        size_t v = path[k];
        lay_spans *pu = &ix->pu[v];
        if (ix->own_at[v] > changed) changed = ix->own_at[v];
        if (ix->pu_at[v] != 0 && ix->pu_at[v] - 1 >= changed) continue; /* current */
        size_t pending = SIZE_MAX;
        if (ix->pu_at[v] != 0) {
            size_t done = ix->pu_at[v] - 1;
            pending = 0;
            for (size_t j = k; j < d && pending <= LAY_PU_ADD_MAX; j++) {
                const lay_log *lg = &ix->log[path[j]];
                from[j] = lg->n;
                if (ix->own_at[path[j]] <= done) continue;
                size_t lo = 0, hi = lg->n; /* first entry after done */
                while (lo < hi) {
                    size_t mid = lo + (hi - lo) / 2;
                    if (lg->v[mid].at <= done)
                        lo = mid + 1;
                    else
                        hi = mid;
                }
                from[j] = lo;
                pending += lg->n - lo;
            }
        }
        if (pending <= LAY_PU_ADD_MAX) {
            for (size_t j = k; j < d; j++)
                for (size_t e = from[j]; e < ix->log[path[j]].n; e++)
                    lay_blocks_add(&ix->arena, pu, ix->log[path[j]].v[e].lo,
                                   ix->log[path[j]].v[e].hi);
        } else {
            lay_spans_union(&ix->arena, pu, k + 1 < d ? &ix->pu[path[k + 1]] : NULL, &ix->own[v]);
        }
        ix->pu_at[v] = ix->inserts + 1;
    }
    return &ix->pu[a];
}

/* Collects the lists holding the ranges of the placed buffers whose
 * lifetime meets [s, e]: own along the paths of s and e, sub on the
 * canonical nodes of [s, e].  Their union is the space taken.  With merged,
 * the path's upper levels come as one path union (the lowest LAY_PU_TAIL
 * levels list by list): for a caller that walks every block; a caller that
 * only binary-searches each list (lay_range_free) gains nothing from it and
 * would rebuild unions that every insertion invalidates. */
static void lay_index_query(lay_index *ix, int64_t s, int64_t e, lay_lists *out, int merged) {
    size_t ls = lay_index_leaf(ix, s), le = lay_index_leaf(ix, e);
    out->n = 0;
    for (int side = 0; side < 2; side++) {
        size_t leaf = side ? le : ls;
        if (side && le == ls) break;
        size_t v = leaf;
        for (int lev = 0; (lev < LAY_PU_TAIL || !merged) && v >= 1; lev++, v /= 2)
            lay_lists_push(out, &ix->own[v]);
        if (v >= 1) lay_lists_push(out, lay_index_pu(ix, v));
    }
    for (size_t l = ls, r = le + 1; l < r; l /= 2, r /= 2) {
        if (l & 1) lay_lists_push(out, &ix->sub[l++]);
        if (r & 1) lay_lists_push(out, &ix->sub[--r]);
    }
}

/* ------------------------------------------------------------------------ */
/* The placement routine shared by the heuristics                            */

typedef enum lay_fit {
    LAY_FIRST_FIT, /* the lowest gap that holds the buffer */
    LAY_BEST_FIT   /* the gap that wastes least (ties: the lowest) */
} lay_fit;

/* A cursor into one sorted list, for the merge below. */
typedef struct lay_cursor {
    const lay_span *at, *end;
} lay_cursor;

/* Restores the heap order (smallest at->lo on top) below position i. */
static void lay_heap_down(lay_cursor *h, size_t n, size_t i) {
    for (;;) {
        size_t m = i, l = 2 * i + 1, r = l + 1;
        if (l < n && h[l].at->lo < h[m].at->lo) m = l;
        if (r < n && h[r].at->lo < h[m].at->lo) m = r;
        if (m == i) return;
        lay_cursor t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

/* The first block at or after p (within [p, end)) that ends above covered:
 * blocks of one list are disjoint and sorted, so their ends increase, and
 * an exponential then binary search finds it in O(log skipped). */
static const lay_span *lay_skip_covered(const lay_span *p, const lay_span *end, uint64_t covered) {
    if (p == end || p->hi > covered) return p;
    size_t step = 1; /* p->hi <= covered holds throughout */
    while (step < (size_t)(end - p) && p[step].hi <= covered) {
        p += step;
        step *= 2;
    }
    const lay_span *hi =
        step < (size_t)(end - p) ? p + step : end; /* hi == end or hi->hi > covered */
    while (hi - p > 1) {
        const lay_span *mid = p + (hi - p) / 2;
        if (mid->hi <= covered)
            p = mid;
        else
            hi = mid;
    }
    return hi;
}

/* Returns the offset for a buffer of rounded size sz, given the lists of
 * used ranges (each sorted, possibly overlapping one another).  Walks the
 * union in address order with a heap over the lists; the gaps are the holes
 * in the union, plus the unbounded space above it.  First fit stops at the
 * first gap that holds sz.  heap has room for lists->n cursors.
 *
 * A list's blocks that end at or below the union walked so far (covered)
 * cannot open a gap or extend it: once the heap's top block is taken, its
 * list skips them in one search instead of passing each through the heap.
 * (Without that, the walk was linear in the live buffers for every query,
 * quadratic in all for a deep network: each index node's list holds a
 * scattered subset of the stacked activations.)  The gaps, and so the
 * answer, are the same. */
static uint64_t lay_choose_gap(const lay_lists *lists, lay_cursor *heap, uint64_t sz, lay_fit fit) {
    size_t n = 0;
    for (size_t i = 0; i < lists->n; i++)
        heap[n++] = (lay_cursor){lists->v[i]->v, lists->v[i]->v + lists->v[i]->n};
    for (size_t i = n / 2; i-- > 0;) lay_heap_down(heap, n, i);
    uint64_t covered = 0; /* the union so far ends here */
    uint64_t best = UINT64_MAX, best_waste = UINT64_MAX;
    while (n > 0) {
        const lay_span *r = heap[0].at;
        if (r->lo > covered) {
            uint64_t gap = r->lo - covered;
            if (gap >= sz) {
                if (fit == LAY_FIRST_FIT || gap == sz)
                    return covered; /* first fit, or a perfect fit */
                if (gap - sz < best_waste) {
                    best_waste = gap - sz;
                    best = covered;
                }
            }
        }
        if (r->hi > covered) covered = r->hi;
        heap[0].at = lay_skip_covered(heap[0].at + 1, heap[0].end, covered);
        if (heap[0].at == heap[0].end) heap[0] = heap[--n];
        lay_heap_down(heap, n, 0);
    }
    return best != UINT64_MAX ? best : covered;
}

/* ------------------------------------------------------------------------ */
/* An incremental placer (layout_internal.h): the index with the scratch    */
/* lists of a query, for callers that place buffers one at a time, at an    */
/* offset of their choice or in the lowest / tightest gap.  The heuristics  */
/* below are its simplest caller.                                            */

struct lay_placer {
    const layout_buffer *bufs;
    size_t n;
    uint64_t align;
    lay_index ix;
    lay_lists lists; /* what a query reads: at most 4 lists per tree level */
    lay_cursor *heap;
};

/* The query scratch of pl, for an index of pl->ix.cap leaves. */
static void lay_placer_scratch(lay_placer *pl) {
    size_t levels = 1;
    for (size_t c = pl->ix.cap; c > 1; c /= 2) levels++;
    pl->lists = (lay_lists){xmallocarray(4 * levels, sizeof *pl->lists.v), 0, 4 * levels};
    pl->heap = xmallocarray(4 * levels, sizeof *pl->heap);
}

lay_placer *lay_placer_new(const layout_buffer *bufs, size_t n, uint64_t align) {
    ROAMC_ASSERT(align >= 1);
    lay_placer *pl = xcalloc(1, sizeof *pl);
    pl->bufs = bufs;
    pl->n = n;
    pl->align = align;
    lay_index_init(&pl->ix, bufs, n);
    lay_placer_scratch(pl);
    return pl;
}

lay_placer *lay_placer_clone(const lay_placer *pl) {
    lay_placer *c = xcalloc(1, sizeof *c);
    c->bufs = pl->bufs;
    c->n = pl->n;
    c->align = pl->align;
    lay_index_clone(&c->ix, &pl->ix);
    lay_placer_scratch(c);
    return c;
}

void lay_placer_free(lay_placer *pl) {
    if (!pl) return;
    free(pl->lists.v);
    free(pl->heap);
    lay_index_free(&pl->ix);
    free(pl);
}

/* 1 when [lo, hi) meets none of the ranges in the lists (each sorted and
 * disjoint, so one binary search per list). */
static int lay_range_free(const lay_lists *lists, uint64_t lo, uint64_t hi) {
    for (size_t i = 0; i < lists->n; i++) {
        const lay_spans *b = lists->v[i];
        size_t a = lay_spans_ending_after(b, lo);
        if (a < b->n && b->v[a].lo < hi) return 0;
    }
    return 1;
}

int lay_placer_try(lay_placer *pl, size_t i, uint64_t offset) {
    ROAMC_ASSERT(i < pl->n && offset % pl->align == 0);
    const layout_buffer *b = &pl->bufs[i];
    if (b->size == 0) return 1;
    uint64_t sz = lay_round_up(b->size, pl->align);
    lay_index_query(&pl->ix, b->start, b->end, &pl->lists, 0);
    if (!lay_range_free(&pl->lists, offset, offset + sz)) return 0;
    lay_index_place(&pl->ix, b->start, b->end, offset, offset + sz);
    return 1;
}

static uint64_t lay_placer_put(lay_placer *pl, size_t i, lay_fit fit) {
    ROAMC_ASSERT(i < pl->n);
    const layout_buffer *b = &pl->bufs[i];
    if (b->size == 0) return 0;
    uint64_t sz = lay_round_up(b->size, pl->align);
    lay_index_query(&pl->ix, b->start, b->end, &pl->lists, 1);
    uint64_t offset = lay_choose_gap(&pl->lists, pl->heap, sz, fit);
    ROAMC_ASSERT(offset % pl->align == 0);
    lay_index_place(&pl->ix, b->start, b->end, offset, offset + sz);
    return offset;
}

uint64_t lay_placer_fit(lay_placer *pl, size_t i, int best_fit) {
    return lay_placer_put(pl, i, best_fit ? LAY_BEST_FIT : LAY_FIRST_FIT);
}

/* Places the buffers in the given order (a permutation of 0..n-1). */
static uint64_t lay_place_in_order(const layout_buffer *bufs, size_t n, uint64_t align,
                                   const lay_key *order, lay_fit fit, uint64_t *offsets) {
    lay_placer *pl = lay_placer_new(bufs, n, align);
    for (size_t k = 0; k < n; k++) offsets[order[k].idx] = lay_placer_put(pl, order[k].idx, fit);
    lay_placer_free(pl);
    return layout_height(bufs, n, offsets);
}

/* Builds the order for one heuristic and places the buffers in it. */
typedef enum lay_order {
    LAY_ORDER_LONG_FIRST, /* lifetime length desc, size desc */
    LAY_ORDER_SIZE,       /* size desc */
    LAY_ORDER_START,      /* start asc (the schedule) */
    LAY_ORDER_AREA,       /* size * length desc, size desc */
    LAY_ORDER_SIZE_LONG   /* size desc, length desc */
} lay_order;

static uint64_t lay_heuristic(const layout_buffer *bufs, size_t n, uint64_t align, lay_order how,
                              lay_fit fit, uint64_t *offsets) {
    lay_key *order = xmallocarray(n, sizeof *order);
    for (size_t i = 0; i < n; i++) {
        uint64_t len = (uint64_t)((int64_t)bufs[i].end - bufs[i].start) + 1;
        uint64_t size = bufs[i].size;
        /* descending keys are stored complemented */
        lay_key *k = &order[i];
        *k = (lay_key){0, 0, 0, i};
        switch (how) {
        case LAY_ORDER_LONG_FIRST:
            k->k1 = ~len;
            k->k2 = ~size;
            break;
        case LAY_ORDER_SIZE: k->k1 = ~size; break;
        case LAY_ORDER_START: k->k1 = lay_step_key(bufs[i].start); break;
        case LAY_ORDER_AREA: {
            /* size * len can overflow 64 bits: compare in floating point,
             * whose order is monotone, then exactly by size. */
            double area = (double)size * (double)len;
            uint64_t bits;
            memcpy(&bits, &area, sizeof bits); /* positive doubles sort as integers */
            k->k1 = ~bits;
            k->k2 = ~size;
            break;
        }
        case LAY_ORDER_SIZE_LONG:
            k->k1 = ~size;
            k->k2 = ~len;
            break;
        }
    }
    qsort(order, n, sizeof *order, lay_key_cmp);
    uint64_t h = lay_place_in_order(bufs, n, align, order, fit, offsets);
    free(order);
    return h;
}

uint64_t layout_llfb(const layout_buffer *bufs, size_t n, uint64_t align, uint64_t *offsets) {
    return lay_heuristic(bufs, n, align, LAY_ORDER_LONG_FIRST, LAY_BEST_FIT, offsets);
}

uint64_t layout_greedy(const layout_buffer *bufs, size_t n, uint64_t align, uint64_t *offsets) {
    return lay_heuristic(bufs, n, align, LAY_ORDER_SIZE, LAY_FIRST_FIT, offsets);
}

/* Best fit in schedule order is a plain allocator with a free list, so it
 * gets its own O(n log n) routine: the free gaps below the top of the live
 * buffers sit in two ordered sets, by (size, address) to find the tightest
 * and by address to merge a freed range with its neighbours.  It gives the
 * same layout as lay_place_in_order with the start order and best fit
 * would, where the live buffers at a start step are exactly the placed
 * buffers that conflict. */
typedef struct lay_free_list {
    lay_set by_size, by_addr; /* the same gap ids in both */
    uint64_t *lo, *hi;        /* per gap id */
    size_t *spare;            /* unused gap ids, a stack */
    size_t nspare;
    uint64_t top; /* end of the highest live range */
} lay_free_list;

static void lay_gap_add(lay_free_list *f, uint64_t lo, uint64_t hi) {
    ROAMC_ASSERT(f->nspare > 0 && lo < hi);
    size_t id = f->spare[--f->nspare];
    f->lo[id] = lo;
    f->hi[id] = hi;
    lay_set_insert(&f->by_size, id, hi - lo, lo);
    lay_set_insert(&f->by_addr, id, lo, 0);
}

static void lay_gap_remove(lay_free_list *f, size_t id) {
    lay_set_erase(&f->by_size, id);
    lay_set_erase(&f->by_addr, id);
    f->spare[f->nspare++] = id;
}

/* Returns the offset of a new range of sz bytes. */
static uint64_t lay_fl_alloc(lay_free_list *f, uint64_t sz) {
    size_t id = lay_set_ceil(&f->by_size, sz, 0);
    if (id == LAY_NIL) {
        uint64_t o = f->top;
        f->top += sz;
        return o;
    }
    uint64_t lo = f->lo[id], hi = f->hi[id];
    lay_gap_remove(f, id);
    if (hi - lo > sz) lay_gap_add(f, lo + sz, hi);
    return lo;
}

static void lay_fl_free(lay_free_list *f, uint64_t lo, uint64_t hi) {
    size_t left = lay_set_floor(&f->by_addr, lo, 0);
    if (left != LAY_NIL && f->hi[left] == lo) {
        lo = f->lo[left];
        lay_gap_remove(f, left);
    }
    size_t right = lay_set_ceil(&f->by_addr, hi, 0);
    if (right != LAY_NIL && f->lo[right] == hi) {
        hi = f->hi[right];
        lay_gap_remove(f, right);
    }
    if (hi == f->top)
        f->top = lo; /* the space above the live ranges is not a gap */
    else
        lay_gap_add(f, lo, hi);
}

uint64_t layout_bestfit(const layout_buffer *bufs, size_t n, uint64_t align, uint64_t *offsets) {
    ROAMC_ASSERT(align >= 1);
    lay_events ev;
    lay_events_init(bufs, n, &ev);
    lay_free_list f = {0};
    f.lo = xmallocarray(n + 1, sizeof *f.lo);
    f.hi = xmallocarray(n + 1, sizeof *f.hi);
    f.spare = xmallocarray(n + 1, sizeof *f.spare);
    lay_set_init(&f.by_size, n + 1);
    lay_set_init(&f.by_addr, n + 1);
    for (size_t id = 0; id <= n; id++) f.spare[f.nspare++] = n - id;
    for (size_t i = 0; i < n; i++) offsets[i] = 0;
    size_t j = 0;
    for (size_t k = 0; k < ev.m; k++) {
        size_t i = ev.allocs[k].idx;
        /* free what ended before this start step */
        while (j < ev.m && ev.frees[j].k1 < ev.allocs[k].k1) {
            size_t d = ev.frees[j++].idx;
            lay_fl_free(&f, offsets[d], offsets[d] + lay_round_up(bufs[d].size, align));
        }
        offsets[i] = lay_fl_alloc(&f, lay_round_up(bufs[i].size, align));
    }
    uint64_t rc = layout_height(bufs, n, offsets);
    lay_set_free(&f.by_size);
    lay_set_free(&f.by_addr);
    free(f.lo);
    free(f.hi);
    free(f.spare);
    lay_events_free(&ev);
    return rc;
}

/* The heuristics tried by layout_best_heuristic, in tie-breaking order.
 * The ones marked extra walk every gap of a fragmented address space (best
 * fit after a size order): they are skipped above LAY_EXTRA_MAX_N buffers,
 * where they cost tens of seconds and rarely win. */
#define LAY_EXTRA_MAX_N 20000
static const struct {
    const char *name;
    lay_order order;
    lay_fit fit;
    int extra;
} lay_candidates[] = {
    {"llfb", LAY_ORDER_LONG_FIRST, LAY_BEST_FIT, 0},
    {"bestfit", LAY_ORDER_START, LAY_BEST_FIT, 0},
    {"llfb-firstfit", LAY_ORDER_LONG_FIRST, LAY_FIRST_FIT, 0},
    {"greedy", LAY_ORDER_SIZE, LAY_FIRST_FIT, 0},
    {"size-long-firstfit", LAY_ORDER_SIZE_LONG, LAY_FIRST_FIT, 1},
    {"size-bestfit", LAY_ORDER_SIZE, LAY_BEST_FIT, 1},
    {"area-bestfit", LAY_ORDER_AREA, LAY_BEST_FIT, 1},
};

uint64_t layout_best_heuristic(const layout_buffer *bufs, size_t n, uint64_t align,
                               uint64_t *offsets, const char **name) {
    uint64_t *tmp = xmallocarray(n, sizeof *tmp);
    uint64_t best = UINT64_MAX;
    if (name) *name = NULL;
    uint64_t lb = layout_live_peak(bufs, n);
    for (size_t c = 0; c < sizeof lay_candidates / sizeof lay_candidates[0] && best > lb; c++) {
        if (lay_candidates[c].extra && n > LAY_EXTRA_MAX_N) continue;
        uint64_t h =
            lay_candidates[c].order == LAY_ORDER_START && lay_candidates[c].fit == LAY_BEST_FIT
                ? layout_bestfit(bufs, n, align, tmp)
                : lay_heuristic(bufs, n, align, lay_candidates[c].order, lay_candidates[c].fit,
                                tmp);
        if (h < best) {
            best = h;
            memcpy(offsets, tmp, n * sizeof *tmp);
            if (name) *name = lay_candidates[c].name;
        }
    }
    free(tmp);
    return best;
}
