/* layout_search.c — exact search for a layout that fits a capacity.
 *
 * A depth-first branch and bound that builds the layout from the bottom up,
 * like filling a skyline.  Time is cut into sections at every start and
 * end + 1; each section has a floor (the lowest address any unplaced buffer
 * live there can still take) and a total (the size of the unplaced buffers
 * live there).  A section is tight when floor + total == capacity: it can
 * waste nothing, so its lowest free cell must be covered by a buffer sitting
 * exactly at the floor.  At each node, pick a cell to branch on:
 *
 *   - if some valley (a run of sections at one floor m whose neighbours are
 *     higher or finished) holds a tight section, the tight cell with the
 *     fewest buffers that could cover it at m; branch on those buffers;
 *   - otherwise the lowest cell: the leftmost section s with the lowest
 *     floor m.  Branch A: a buffer sits at m over s; it starts at s (the
 *     left side is higher) and ends inside the valley.  Branch B, last: the
 *     cell stays empty; the floor of s rises to the lowest offset any buffer
 *     live there can then take (its floor elsewhere, or m + the smallest
 *     unplaced size it could rest on).
 *
 * Every layout can be pushed down until each buffer sits at 0 or on top of
 * a buffer it conflicts with; such a layout lies on one path of this tree,
 * so the search is complete: when it ends without hitting its node limit,
 * work budget or time backstop and finds nothing, no layout fits.  What
 * prunes it:
 *
 *   - floor + total > capacity in some section;
 *   - a tight section none of whose buffers could sit at its floor (each
 *     meets a higher floor somewhere along its lifetime);
 *   - a valley whose tight sections cannot be covered at its floor by
 *     buffers inside it, end to end in time (a reachability pass);
 *   - symmetry: twins (same lifetime and size) go in index order, and a
 *     buffer never goes right on top of a same-lifetime buffer that comes
 *     later in the preorder (the two could trade places);
 *   - decomposition: when no unplaced buffer crosses a section boundary any
 *     more, the sides are independent and solved separately, so a failure
 *     on one side never re-opens choices on the other; and in a piece with
 *     a flat floor, the buffers spanning all of it are stacked at the
 *     bottom without branching (as lay_reduce does for the whole problem).
 *
 * Which buffer to try first matters a lot: several preorders, on the
 * problem and on its mirror image in time (same layouts, different walk),
 * are tried round robin with a node limit that doubles each round.
 * MiniMalloc (Moffitt, ASPLOS 2023) restarts the same way and inspired the
 * section bounds; its search branches on buffers in offset order instead.
 *
 * Before searching, the problem is reduced without loss by lay_reduce
 * (layout_reduce.c): sizes in units of their gcd, and buffers that conflict
 * with every other one stacked at the bottom.
 */
#include "layout.h"
#include "layout_internal.h"
#include "layout_sections.h"

#include <stdlib.h>
#include <string.h>

#define SRCH_NONE UINT64_MAX /* offset of an unplaced buffer */

typedef enum srch_rc {
    SRCH_FOUND,      /* a layout fits: offsets are in s->solution */
    SRCH_INFEASIBLE, /* proved: nothing fits */
    SRCH_ABORT       /* node limit, work budget or time backstop */
} srch_rc;

/* The reduced problem and the search state. */
typedef struct srch {
    size_t n;            /* buffers in the search */
    lay_sections sc;     /* buffers (orig, size in units), sections, live lists */
    size_t *start_begin; /* buffers starting in section k, in the current */
    size_t *start_buf;   /*   preorder: start_buf[start_begin[k] .. [k+1]) */
    uint64_t cap;        /* capacity in units */

    uint64_t *off;                  /* per buffer: offset, SRCH_NONE while unplaced */
    uint64_t *solution;             /* per buffer: offsets of the layout found */
    uint64_t *floor;                /* per section */
    uint64_t *total;                /* per section: units of unplaced buffers */
    uint64_t *cuts;                 /* per boundary k|k+1: unplaced buffers crossing it */
    unsigned char *reach;           /* per section + 1: scratch of the valley check */
    size_t *count;                  /* per section + 1: scratch, options per cell */
    uint64_t *maxf;                 /* per buffer: scratch, highest floor along it */
    size_t *cover;                  /* per section: the last buffer that could cover it
                                       when tight (a hint, not undone) */
    size_t *twin;                   /* per buffer: the previous one (by index) with the
                            same sections and size, or SIZE_MAX */
    uint64_t *owner;                /* per section: the buffer whose top is the floor,
                            SRCH_NONE after a raise or at the start */
    size_t *rank;                   /* per buffer: position in the current preorder */
    struct srch_pre *pre, *pre_tmp; /* preorder keys, and sort scratch */
    size_t *next;                   /* scratch of srch_preorder */

    lay_trail trail; /* undo log of the state */

    long long nodes_left;
    uint64_t *work; /* work left (shared by both directions): a node
                            costs the sections it scans, 1 + hi - lo */
    int out_of_work;
    double deadline; /* the time backstop */
    int timed_out;
    lay_bnb_stats *st;      /* nodes counted */
    int energy;             /* the energy rule (layout_bnb_rules.energy) */
    struct srch_lift *lift; /* per buffer: scratch of the energy rule */
} srch;

/* A buffer live in a section, by the lowest offset it can still take. */
typedef struct srch_lift {
    uint64_t low, size;
} srch_lift;

/* ------------------------------------------------------------------------ */
/* Undo log                                                                  */

static void srch_set(srch *s, uint64_t *where, uint64_t value) {
    lay_trail_set(&s->trail, where, value);
}

static void srch_rollback(srch *s, size_t mark) {
    lay_trail_undo(&s->trail, mark);
}

/* Places b at offset o (through the undo log). */
static void srch_place(srch *s, size_t b, uint64_t o) {
    srch_set(s, &s->off[b], o);
    for (size_t k = s->sc.sa[b]; k < s->sc.sb[b]; k++) {
        ROAMC_ASSERT(s->floor[k] <= o);
        srch_set(s, &s->floor[k], o + s->sc.size[b]);
        srch_set(s, &s->owner[k], b);
        srch_set(s, &s->total[k], s->total[k] - s->sc.size[b]);
        if (k + 1 < s->sc.sb[b]) srch_set(s, &s->cuts[k], s->cuts[k] - 1);
    }
}

static int srch_active(const srch *s, size_t k) {
    return s->total[k] > 0;
}

static int srch_tight(const srch *s, size_t k) {
    return s->floor[k] + s->total[k] == s->cap;
}

/* ------------------------------------------------------------------------ */
/* Choosing the cell to branch on                                            */

/* A cell: section k at its floor m, in the valley [a, z) of sections at m. */
typedef struct srch_cell {
    size_t k, a, z;
    uint64_t m;
    size_t options; /* buffers that could cover it at m */
    int tight;      /* 1: it cannot stay empty */
} srch_cell;

/* Does unplaced buffer b fit at m inside the valley [a, z)? */
static int srch_fits(const srch *s, size_t b, size_t a, size_t z, uint64_t m) {
    return s->off[b] == SRCH_NONE && s->sc.sa[b] >= a && s->sc.sb[b] <= z &&
           m + s->sc.size[b] <= s->cap;
}

/* Checks the valley [a, z) at floor m, whose neighbours are higher or have
 * nothing left, so that a buffer placed at m over any of its sections lies
 * inside it.  A tight section there must be covered at m, by buffers that
 * do not overlap in time; returns 0 when that is impossible:
 *   - some tight section has no buffer that could cover it;
 *   - no chain of such buffers reaches from a to z, stepping over sections
 *     that are not tight.
 * Otherwise offers its most constrained tight cell to *best (fewest
 * options; ties: the leftmost found first). */
static int srch_valley(srch *s, size_t a, size_t z, uint64_t m, srch_cell *best) {
    int any_tight = 0;
    for (size_t k = a; k < z && !any_tight; k++) any_tight = srch_tight(s, k);
    if (!any_tight) return 1;
    /* options per section: a difference array over the buffers that fit */
    memset(s->count + a, 0, (z + 1 - a) * sizeof *s->count);
    memset(s->reach + a, 0, z + 1 - a);
    s->reach[a] = 1;
    size_t running = 0;
    for (size_t k = a; k < z; k++) {
        for (size_t i = s->start_begin[k]; i < s->start_begin[k + 1]; i++) {
            size_t b = s->start_buf[i];
            if (!srch_fits(s, b, a, z, m)) continue;
            running++;
            s->count[s->sc.sb[b]]++; /* ends before section sb */
            if (s->reach[k]) s->reach[s->sc.sb[b]] = 1;
        }
        running -= s->count[k];
        if (s->reach[k] && !srch_tight(s, k)) s->reach[k + 1] = 1;
        if (srch_tight(s, k)) {
            if (running == 0) return 0;
            if (best->k == SIZE_MAX || running < best->options)
                *best = (srch_cell){k, a, z, m, running, 1};
        }
    }
    return s->reach[z];
}

/* Does no section along b's lifetime have a floor above m?  (Asked only
 * for the buffers of a tight section at floor m, so each scan stops at the
 * first higher floor; cheaper than every buffer's highest floor per node.) */
static int srch_flat(const srch *s, size_t b, uint64_t m) {
    for (size_t q = s->sc.sa[b]; q < s->sc.sb[b]; q++)
        if (s->floor[q] > m) return 0;
    return 1;
}

/* Highest lowest offset first. */
static int srch_lift_cmp(const void *pa, const void *pb) {
    const srch_lift *x = pa, *y = pb;
    return (x->low < y->low) - (x->low > y->low);
}

/* Scans sections [lo, hi): returns 0 when the bound fails somewhere, else 1
 * with *cell the cell to branch on (k == SIZE_MAX: nothing left): the most
 * constrained tight cell, or else the lowest cell (leftmost on ties). */
static int srch_scan(srch *s, size_t lo, size_t hi, srch_cell *cell) {
    size_t low = SIZE_MAX;
    for (size_t q = lo; q < hi; q++) {
        if (!srch_active(s, q)) continue;
        if (s->floor[q] + s->total[q] > s->cap) return 0;
        if (low == SIZE_MAX || s->floor[q] < s->floor[low]) low = q;
    }
    cell->k = SIZE_MAX;
    if (low == SIZE_MAX) return 1;
    /* A tight section k must get a buffer at exactly its floor, and such a
     * buffer finds no floor above that along its lifetime. */
    for (size_t j = s->start_begin[lo]; s->energy && j < s->start_begin[hi]; j++) {
        size_t b = s->start_buf[j];
        if (s->off[b] != SRCH_NONE) continue;
        uint64_t f = 0;
        for (size_t q = s->sc.sa[b]; q < s->sc.sb[b]; q++)
            if (s->floor[q] > f) f = s->floor[q];
        s->maxf[b] = f;
    }
    /* Energy: a buffer cannot go below its highest floor maxf, so for every
     * h the unplaced buffers live in q with maxf >= h must fit in [h, cap).
     * The section bound is the case h = floor[q]; floors that differ along
     * lifetimes make the others bite (a zero-slack problem whose low
     * sections fill unevenly fails here long before its sections run out
     * of room). */
    for (size_t q = lo; s->energy && q < hi; q++) {
        if (!srch_active(s, q)) continue;
        size_t nl = 0;
        uint64_t all = 0, top = 0;
        for (size_t j = s->sc.live_begin[q]; j < s->sc.live_begin[q + 1]; j++) {
            size_t b = s->sc.live_buf[j];
            if (s->off[b] == SRCH_NONE && s->maxf[b] > s->floor[q]) {
                s->lift[nl++] = (srch_lift){s->maxf[b], s->sc.size[b]};
                all += s->sc.size[b];
                if (s->maxf[b] > top) top = s->maxf[b];
            }
        }
        /* all of them fit above the highest of their floors: every h
         * passes, no need to sort */
        if (nl == 0 || top + all <= s->cap) continue;
        qsort(s->lift, nl, sizeof *s->lift, srch_lift_cmp);
        uint64_t sum = 0;
        for (size_t i = 0; i < nl; i++) {
            sum += s->lift[i].size;
            if (s->lift[i].low + sum > s->cap) return 0;
        }
    }
    /* The buffer that covered a tight section last time is asked first:
     * it often still can (on zero-slack problems every section is tight,
     * and scanning them all took 55% of the search's time). */
    for (size_t q = lo; q < hi; q++) {
        if (!srch_active(s, q) || !srch_tight(s, q)) continue;
        size_t w = s->cover[q];
        if (s->off[w] == SRCH_NONE && srch_flat(s, w, s->floor[q])) continue;
        int coverable = 0;
        for (size_t j = s->sc.live_begin[q]; j < s->sc.live_begin[q + 1] && !coverable; j++) {
            size_t b = s->sc.live_buf[j];
            coverable = s->off[b] == SRCH_NONE && srch_flat(s, b, s->floor[q]);
            if (coverable) s->cover[q] = b;
        }
        if (!coverable) return 0;
    }
    /* valleys: maximal runs of active sections at one floor whose
     * neighbours are higher or have nothing left */
    for (size_t a = lo; a < hi;) {
        if (!srch_active(s, a)) {
            a++;
            continue;
        }
        uint64_t m = s->floor[a];
        size_t z = a + 1;
        while (z < hi && srch_active(s, z) && s->floor[z] == m) z++;
        int left_ok = a == lo || !srch_active(s, a - 1) || s->floor[a - 1] > m;
        int right_ok = z == hi || !srch_active(s, z) || s->floor[z] > m;
        if (left_ok && right_ok && !srch_valley(s, a, z, m, cell)) return 0;
        a = z;
    }
    if (cell->k == SIZE_MAX) {
        /* no tight cell: the lowest one; its valley is a local minimum */
        size_t z = low + 1;
        while (z < hi && srch_active(s, z) && s->floor[z] == s->floor[low]) z++;
        *cell = (srch_cell){low, low, z, s->floor[low], 0, 0};
    }
    return 1;
}

/* ------------------------------------------------------------------------ */
/* The search                                                                */

static srch_rc srch_dfs(srch *s, size_t lo, size_t hi);
static srch_rc srch_solve_range(srch *s, size_t lo, size_t hi);

/* Places b at m and searches on. */
static srch_rc srch_try(srch *s, size_t lo, size_t hi, size_t b, uint64_t m) {
    size_t mark = s->trail.len;
    srch_place(s, b, m);
    /* Did b free a boundary inside its lifetime?  Then [lo, hi) falls
     * apart into independent pieces. */
    int split = 0;
    for (size_t k = s->sc.sa[b]; k + 1 < s->sc.sb[b] && !split; k++) split = s->cuts[k] == 0;
    srch_rc rc = split ? srch_solve_range(s, lo, hi) : srch_dfs(s, lo, hi);
    if (rc == SRCH_FOUND) s->solution[b] = m;
    srch_rollback(s, mark);
    return rc;
}

/* The smallest unplaced size in the part [lo, hi): the least a buffer that
 * does not go at a cell's floor rises by when it rests on a buffer placed
 * later. */
static uint64_t srch_min_size(const srch *s, size_t lo, size_t hi) {
    uint64_t min_size = SRCH_NONE;
    for (size_t j = s->start_begin[lo]; j < s->start_begin[hi]; j++) {
        size_t c = s->start_buf[j];
        if (s->off[c] == SRCH_NONE && s->sc.size[c] < min_size) min_size = s->sc.size[c];
    }
    return min_size;
}

/* Branch B, the lowest cell (section k at floor m) stays empty: returns
 * the floor k can be raised to, the lowest offset any buffer live there
 * can then take (min_size: srch_min_size of the part). */
static uint64_t srch_waste_level(const srch *s, size_t k, uint64_t m, uint64_t min_size) {
    /* Each buffer live in k goes at least to its highest floor, or, when
     * that is m too (nothing placed under it reaches above m), onto a buffer
     * placed later: to m + min_size at least. */
    uint64_t level = SRCH_NONE;
    for (size_t j = s->sc.live_begin[k]; j < s->sc.live_begin[k + 1]; j++) {
        size_t b = s->sc.live_buf[j];
        if (s->off[b] != SRCH_NONE) continue;
        uint64_t highest = 0;
        for (size_t q = s->sc.sa[b]; q < s->sc.sb[b]; q++)
            if (s->floor[q] > highest) highest = s->floor[q];
        uint64_t lb = highest > m ? highest : m + min_size;
        if (lb < level) level = lb;
    }
    ROAMC_ASSERT(level != SRCH_NONE && level > m);
    return level;
}

/* Candidates for a cell, in preorder. */
typedef struct srch_cand {
    size_t rank, b;
} srch_cand;

static int srch_cand_cmp(const void *pa, const void *pb) {
    const srch_cand *x = pa, *y = pb;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Would placing b now only repeat a layout found from another branch?
 *  - b has an unplaced twin (same lifetime and size) of lower index: twins
 *    can trade places, so they are placed in index order;
 *  - b would sit right on top of a buffer with the same lifetime that
 *    comes after it in the preorder: two such buffers can trade places too
 *    (the lower one moves up by the size of the other), so stacks of
 *    same-lifetime buffers go in preorder from the bottom, the order in
 *    which candidates are tried.  (Twins tie in every preorder key, so
 *    their preorder is their index order too.) */
static int srch_symmetric(const srch *s, size_t b) {
    if (s->twin[b] != SIZE_MAX && s->off[s->twin[b]] == SRCH_NONE) return 1;
    uint64_t below = s->owner[s->sc.sa[b]];
    return below != SRCH_NONE && s->rank[below] > s->rank[b] && s->sc.sa[below] == s->sc.sa[b] &&
           s->sc.sb[below] == s->sc.sb[b] &&
           s->off[below] + s->sc.size[below] == s->floor[s->sc.sa[b]];
}

/* Solves the unplaced buffers of sections [lo, hi) (none crosses lo or hi).
 * Branch B (the cell stays empty) is the last alternative of a node, so it
 * is a loop here rather than a recursion: raise the floor, look again. */
static srch_rc srch_dfs(srch *s, size_t lo, size_t hi) {
    size_t mark = s->trail.len;
    srch_rc rc = SRCH_INFEASIBLE;
    uint64_t min_size = SRCH_NONE; /* of the part, once Branch B needs it */
    for (;;) {
        if (s->nodes_left-- <= 0) {
            rc = SRCH_ABORT;
            break;
        }
        /* The work budget, not the clock, is what normally stops the
         * search, so that the answer does not depend on machine speed. */
        uint64_t cost = 1 + (uint64_t)(hi - lo);
        if (*s->work < cost) {
            s->out_of_work = 1;
            rc = SRCH_ABORT;
            break;
        }
        *s->work -= cost;
        s->st->nodes++;
        if ((s->nodes_left & 63) == 0 && roamc_now() > s->deadline) {
            s->timed_out = 1;
            rc = SRCH_ABORT;
            break;
        }
        srch_cell c;
        if (!srch_scan(s, lo, hi, &c)) {
            rc = SRCH_INFEASIBLE;
            break;
        }
        if (c.k == SIZE_MAX) {
            rc = SRCH_FOUND; /* nothing left here */
            break;
        }
        /* Branch A: the buffers that can cover the cell at m, inside the
         * valley, over k.  For the lowest cell they all start at k (the
         * left side is higher). */
        size_t first = c.tight ? c.a : c.k;
        size_t cap = s->start_begin[c.k + 1] - s->start_begin[first];
        srch_cand *cand = xmallocarray(cap, sizeof *cand);
        size_t nc = 0;
        for (size_t i = s->start_begin[first]; i < s->start_begin[c.k + 1]; i++) {
            size_t b = s->start_buf[i];
            if (s->sc.sb[b] > c.k && srch_fits(s, b, c.a, c.z, c.m) && !srch_symmetric(s, b))
                cand[nc++] = (srch_cand){s->rank[b], b};
        }
        qsort(cand, nc, sizeof *cand, srch_cand_cmp);
        rc = SRCH_INFEASIBLE;
        for (size_t i = 0; i < nc && rc == SRCH_INFEASIBLE; i++)
            rc = srch_try(s, lo, hi, cand[i].b, c.m);
        free(cand);
        if (rc != SRCH_INFEASIBLE || srch_tight(s, c.k)) break; /* done, or no room to waste */
        /* Branch B */
        /* the part's buffers stay unplaced from one Branch B to the next
         * (Branch A undoes its placements), so its smallest size does too:
         * scanned once per call, not once per empty cell */
        if (min_size == SRCH_NONE) min_size = srch_min_size(s, lo, hi);
        uint64_t level = srch_waste_level(s, c.k, c.m, min_size);
        if (level + s->total[c.k] > s->cap) break;
        srch_set(s, &s->floor[c.k], level);
        srch_set(s, &s->owner[c.k], SRCH_NONE);
    }
    srch_rollback(s, mark);
    return rc;
}

/* Solves the piece [a, z), which no unplaced buffer crosses.  When its
 * floor is flat, the buffers that span all of it conflict with all others
 * there, and no other buffer can use their addresses: in any layout their
 * ranges can be cut out and moved to the bottom.  So they are stacked at
 * the floor first, without branching. */
static srch_rc srch_solve_piece(srch *s, size_t a, size_t z) {
    size_t mark = s->trail.len;
    int flat = 1;
    for (size_t k = a + 1; k < z && flat; k++) flat = s->floor[k] == s->floor[a];
    srch_rc rc = SRCH_INFEASIBLE;
    for (size_t i = s->start_begin[a]; flat && i < s->start_begin[a + 1]; i++) {
        size_t b = s->start_buf[i];
        if (s->off[b] != SRCH_NONE || s->sc.sb[b] != z) continue;
        uint64_t m = s->floor[a];
        if (m + s->sc.size[b] > s->cap) goto out; /* rc: infeasible */
        srch_place(s, b, m);
        s->solution[b] = m;
    }
    /* placing them freed no boundary: they cross none inside the piece */
    rc = srch_dfs(s, a, z);
out:
    srch_rollback(s, mark);
    return rc;
}

/* Solves sections [lo, hi), split at boundaries no unplaced buffer crosses. */
static srch_rc srch_solve_range(srch *s, size_t lo, size_t hi) {
    srch_rc rc = SRCH_FOUND;
    for (size_t a = lo; a < hi && rc == SRCH_FOUND;) {
        size_t z = a + 1; /* the piece is [a, z) */
        while (z < hi && s->cuts[z - 1] > 0) z++;
        rc = srch_solve_piece(s, a, z);
        a = z;
    }
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Preorders                                                                 */

/* The keys of one buffer for the preorders. */
typedef struct srch_pre { /* (the struct tag is used in srch) */
    uint64_t total;       /* T: the largest section total along its lifetime */
    uint64_t width;       /* W: sections spanned */
    uint64_t size;        /* Z */
    uint64_t rnd;         /* R: a hash of the buffer and the round (see lay_search) */
    size_t b;
} srch_pre;

/* Is x tried before y under the keys (each descending; ties by index)?
 * A lay_merge_sort comparator: x, y are srch_pre, ctx the keys. */
static int srch_pre_before(const void *px, const void *py, const void *ctx) {
    const srch_pre *x = px, *y = py;
    for (const char *k = ctx; *k; k++) {
        if (*k == 'T' && x->total != y->total) return x->total > y->total;
        if (*k == 'W' && x->width != y->width) return x->width > y->width;
        if (*k == 'Z' && x->size != y->size) return x->size > y->size;
        if (*k == 'R' && x->rnd != y->rnd) return x->rnd > y->rnd;
    }
    return x->b < y->b;
}

/* Sorts pre (n records) by keys and fills the start lists in that order;
 * tmp (n records) and next (nsec entries) are scratch. */
static void srch_preorder(srch *s, srch_pre *pre, srch_pre *tmp, size_t *next, const char *keys) {
    lay_merge_sort(pre, tmp, s->n, sizeof *pre, srch_pre_before, keys);
    for (size_t k = 0; k < s->sc.nsec; k++) next[k] = s->start_begin[k];
    for (size_t i = 0; i < s->n; i++) {
        size_t b = pre[i].b;
        s->rank[b] = i;
        s->start_buf[next[s->sc.sa[b]]++] = b;
    }
}

/* ------------------------------------------------------------------------ */
/* Setting up                                                                */

static void srch_free(srch *s) {
    lay_sections_free(&s->sc);
    free(s->start_begin);
    free(s->start_buf);
    free(s->off);
    free(s->solution);
    free(s->floor);
    free(s->total);
    free(s->cuts);
    free(s->reach);
    free(s->count);
    free(s->maxf);
    free(s->twin);
    free(s->cover);
    free(s->owner);
    free(s->rank);
    free(s->pre);
    free(s->pre_tmp);
    free(s->next);
    free(s->trail.log);
    free(s->lift);
}

/* Resets the state to "nothing placed". */
static void srch_reset(srch *s) {
    for (size_t b = 0; b < s->n; b++) s->off[b] = SRCH_NONE;
    for (size_t k = 0; k < s->sc.nsec; k++) {
        s->floor[k] = 0;
        s->owner[k] = SRCH_NONE;
    }
    lay_sections_totals(&s->sc, s->total, s->cuts);
    s->trail.len = 0;
}

/* Sets up s for the reduced problem red of bufs (whose steps may be
 * mirrored: only the lifetimes are read from bufs). */
static void srch_setup(srch *s, const layout_buffer *bufs, const lay_reduced *red,
                       uint64_t capacity) {
    memset(s, 0, sizeof *s);
    size_t n = s->n = red->n;
    s->cap = (capacity - red->base) / red->unit;
    lay_sections_init(&s->sc, bufs, red);
    size_t ns = s->sc.nsec;
    /* start lists: counts here, filled in preorder by srch_preorder */
    s->start_begin = xcalloc(ns + 1, sizeof *s->start_begin);
    s->start_buf = xmallocarray(n, sizeof *s->start_buf);
    for (size_t b = 0; b < n; b++) s->start_begin[s->sc.sa[b] + 1]++;
    for (size_t k = 0; k < ns; k++) s->start_begin[k + 1] += s->start_begin[k];
    s->off = xmallocarray(n, sizeof *s->off);
    s->solution = xmallocarray(n, sizeof *s->solution);
    s->floor = xmallocarray(ns, sizeof *s->floor);
    s->total = xmallocarray(ns, sizeof *s->total);
    s->cuts = xmallocarray(ns, sizeof *s->cuts);
    s->reach = xmallocarray(ns + 1, 1);
    s->count = xmallocarray(ns + 1, sizeof *s->count);
    s->maxf = xmallocarray(n, sizeof *s->maxf);
    s->owner = xmallocarray(ns, sizeof *s->owner);
    s->rank = xmallocarray(n, sizeof *s->rank);
    s->cover = xcalloc(ns, sizeof *s->cover);
    for (size_t k = 0; k < ns; k++) /* any buffer live there (an empty section is never active) */
        if (s->sc.live_begin[k] < s->sc.live_begin[k + 1])
            s->cover[k] = s->sc.live_buf[s->sc.live_begin[k]];
    s->twin = xmallocarray(n, sizeof *s->twin); /* twins in index order */
    lay_sections_twins(&s->sc, NULL, s->twin);
    s->pre = xmallocarray(n, sizeof *s->pre);
    s->pre_tmp = xmallocarray(n, sizeof *s->pre_tmp);
    s->next = xmallocarray(ns + 1, sizeof *s->next);
    s->lift = xmallocarray(n, sizeof *s->lift);
    srch_reset(s);
    for (size_t b = 0; b < n; b++) {
        uint64_t t = 0;
        for (size_t k = s->sc.sa[b]; k < s->sc.sb[b]; k++)
            if (s->total[k] > t) t = s->total[k];
        s->pre[b] = (srch_pre){
            .total = t, .width = s->sc.sb[b] - s->sc.sa[b], .size = s->sc.size[b], .b = b};
    }
}

lay_status layout_search(const layout_problem *p, uint64_t capacity, double time_limit_s,
                         size_t max_buffers, uint64_t *offsets) {
    lay_search_opts o;
    lay_search_defaults(&o);
    o.max_buffers = max_buffers;
    lay_budget bud = {UINT64_MAX, roamc_now() + time_limit_s, LAY_STOP_NONE};
    return lay_search(p, capacity, &o, &bud, offsets, NULL);
}

void lay_search_defaults(lay_search_opts *o) {
    o->engines = LAYOUT_ENGINE_SKYLINE | LAYOUT_ENGINE_BNB;
    lay_bnb_defaults(&o->rules);
    o->max_buffers = LAYOUT_SEARCH_MAX_BUFFERS;
    o->pos = NULL;
    lay_search_shares(o, LAYOUT_SHARES_EQUAL);
}

void lay_search_shares(lay_search_opts *o, layout_shares which) {
    /* LAYOUT_SHARES_EQUAL: every member at the round's full limit, the
     * round robin of main from 0778970 to 4369fe9.  PORTFOLIO: the
     * skyline search of 169a928 at the full limit, first; the random-tie
     * preorders and the branch and bound at a half (its nodes cost about
     * three skyline nodes; at a quarter it lost MiniMalloc's I and K). */
    static const unsigned equal[LAY_SEARCH_MEMBERS] = {1, 1, 1};
    static const unsigned portfolio[LAY_SEARCH_MEMBERS] = {1, 2, 2};
    memcpy(o->share_den, which == LAYOUT_SHARES_EQUAL ? equal : portfolio, sizeof o->share_den);
}

/* One strategy of the round robin: the search restarted from scratch under
 * preorder `order` (fresh random ties for its R key, drawn from the round's
 * node limit), at most `limit` nodes, spending bud's work. */
static srch_rc srch_run_strategy(srch *s, const char *order, long long limit, lay_budget *bud,
                                 lay_bnb_stats *st) {
    srch_reset(s);
    for (size_t i = 0; i < s->n; i++) s->pre[i].rnd = lay_random_tie(s->pre[i].b, (uint64_t)limit);
    srch_preorder(s, s->pre, s->pre_tmp, s->next, order);
    s->deadline = bud->deadline;
    s->st = st;
    st->restarts++;
    s->nodes_left = limit;
    s->work = &bud->work;
    s->out_of_work = 0;
    s->timed_out = 0;
    return srch_solve_range(s, 0, s->sc.nsec);
}

/* The portfolio (layout/LAYOUT.md, section PORTFOLIO): the members, in
 * the order they run in each round.  A member's strategies are restarts of
 * one engine under fixed preorders, on the problem and on its mirror; in
 * round k each of them gets the round's node limit 4 n 2^k divided by the
 * member's share_den (lay_search_opts.share_den).  Node limits, never the
 * clock, decide what runs when, so a run under a work budget gives the same
 * answer on every machine and thread count.  Members by where they come
 * from:
 *   0 skyline, preorders WZ ZW W TWZ: the default search of 169a928 (and of
 *     every main before the branch and bound), which wins on zero-slack
 *     instances built in address order (gen_skyline);
 *   1 skyline, preorders TR WR (random ties redrawn per round, 5a72ce5);
 *   2 the canonical branch and bound's 7 strategies (0b3369f, 5a72ce5,
 *     0778970): wins where sections keep some slack (gen_strip DROP,
 *     MiniMalloc's A-K). */
static const char *const srch_orders_169[] = {"WZ", "ZW", "W", "TWZ"};
static const char *const srch_orders_rnd[] = {"TR", "WR"};

/* One member's round at node limit `limit` (already divided by its
 * share); LAY_GAVE_UP with *stop set when a limit other than the node
 * limit stopped it. */
typedef struct srch_round {
    srch *dir; /* skyline directions (ndir of them) */
    size_t ndir;
    lay_bnb_ctx *bnb;
    lay_budget *bud;
    lay_bnb_stats *st;
    lay_reduced *red;
    uint64_t *offsets;
    size_t n;
    unsigned idx;  /* the next strategy's position in the round */
    unsigned skip; /* strategies of the round before this one are skipped
                      (they gave up at this limit in an earlier search) */
} srch_round;

static lay_status srch_skyline_round(srch_round *r, const char *const *orders, size_t norders,
                                     long long limit, lay_stop *stop) {
    for (size_t h = 0; h < norders * r->ndir; h++, r->idx++) {
        if (r->idx < r->skip) continue;
        srch *s = &r->dir[h % r->ndir];
        srch_rc rc = srch_run_strategy(s, orders[h / r->ndir], limit, r->bud, r->st);
        if (rc == SRCH_FOUND) {
            for (size_t b = 0; b < s->n; b++)
                r->red->offsets[s->sc.orig[b]] = r->red->base + s->solution[b] * r->red->unit;
            memcpy(r->offsets, r->red->offsets, r->n * sizeof *r->offsets);
            return LAY_FOUND;
        }
        if (rc == SRCH_INFEASIBLE) return LAY_INFEASIBLE;
        if (s->out_of_work) {
            *stop = LAY_STOP_WORK;
            return LAY_GAVE_UP;
        }
        if (s->timed_out || roamc_now() > r->bud->deadline) {
            *stop = LAY_STOP_TIME;
            return LAY_GAVE_UP;
        }
    }
    return LAY_GAVE_UP;
}

static lay_status srch_bnb_round(srch_round *r, long long limit, lay_stop *stop) {
    for (size_t h = 0; h < lay_bnb_strategies(r->bnb); h++, r->idx++) {
        if (r->idx < r->skip) continue;
        lay_status rc = lay_bnb_run(r->bnb, h, limit, r->bud, r->offsets);
        if (rc != LAY_GAVE_UP) return rc;
        if (r->bud->stop != LAY_STOP_NONE) {
            *stop = r->bud->stop;
            return LAY_GAVE_UP;
        }
    }
    return LAY_GAVE_UP;
}

/* Round k of the whole portfolio at the round's limit: each member in
 * turn, with its share of the limit (at least one node). */
static lay_status srch_portfolio_round(srch_round *r, const lay_search_opts *o, long long limit,
                                       lay_stop *stop) {
    lay_status rc = LAY_GAVE_UP;
    for (size_t m = 0; m < LAY_SEARCH_MEMBERS && rc == LAY_GAVE_UP && *stop == LAY_STOP_NONE; m++) {
        unsigned den = o->share_den[m];
        if (den == 0) continue;
        long long lim = limit / den > 0 ? limit / den : 1;
        if (m == LAY_MEMBER_SKYLINE_169 && r->ndir)
            rc = srch_skyline_round(r, srch_orders_169, 4, lim, stop);
        else if (m == LAY_MEMBER_SKYLINE_RANDOM && r->ndir)
            rc = srch_skyline_round(r, srch_orders_rnd, 2, lim, stop);
        else if (m == LAY_MEMBER_BNB && r->bnb)
            rc = srch_bnb_round(r, lim, stop);
    }
    return rc;
}

lay_status lay_search(const layout_problem *p, uint64_t capacity, const lay_search_opts *opts,
                      lay_budget *bud, uint64_t *offsets, lay_bnb_stats *st) {
    ROAMC_ASSERT(bud != NULL);
    const layout_buffer *bufs = p->bufs;
    const size_t n = p->n;
    lay_search_opts defaults;
    if (!opts) {
        lay_search_defaults(&defaults);
        opts = &defaults;
    }
    lay_bnb_stats local_st;
    if (!st) st = &local_st;
    memset(st, 0, sizeof *st);
    lay_bnb_ctx *bnb = NULL;
    srch dir[2]; /* the problem as given, and with time running backwards */
    size_t ndir = 0;
    layout_buffer *mirror = NULL;
    lay_reduced red;
    int too_large = 0;
    lay_stop stop = LAY_STOP_NONE;
    lay_reduce(bufs, n, p->align, &red);
    lay_status result;
    if (red.base > capacity) {
        result = LAY_INFEASIBLE; /* the buffers that conflict with all others alone */
        goto done;
    }
    if (red.n == 0) {
        memcpy(offsets, red.offsets, n * sizeof *offsets);
        result = LAY_FOUND;
        goto done;
    }
    if (red.n > opts->max_buffers) {
        result = LAY_GAVE_UP;
        too_large = 1;
        goto done;
    }
    /* Time reversed is the same problem (same layouts) but the search walks
     * it differently: a second chance for free. */
    mirror = lay_mirror(bufs, n);
    for (; ndir < (opts->engines & LAYOUT_ENGINE_SKYLINE ? (mirror ? 2u : 1u) : 0u); ndir++) {
        srch_setup(&dir[ndir], ndir ? mirror : bufs, &red, capacity);
        dir[ndir].energy = opts->rules.energy;
    }
    if (opts->engines & LAYOUT_ENGINE_BNB)
        bnb = lay_bnb_new(p, mirror, &red, capacity, &opts->rules, st);

    /* The portfolio's rounds, doubling the node limit each round; a resumed
     * search starts at the strategy where the one before it was cut. */
    srch_round r = {dir, ndir, bnb, bud, st, &red, offsets, n, 0, 0};
    long long limit = 4 * (long long)red.n;
    if (opts->pos && opts->pos->limit >= limit) {
        limit = opts->pos->limit;
        r.skip = opts->pos->next;
    }
    result = LAY_GAVE_UP;
    for (; result == LAY_GAVE_UP && stop == LAY_STOP_NONE; limit *= 2) {
        r.idx = 0;
        result = srch_portfolio_round(&r, opts, limit, &stop);
        if (result == LAY_GAVE_UP && stop != LAY_STOP_NONE && opts->pos) {
            /* the strategy that was cut (r.idx: the loops stop on it) */
            opts->pos->limit = limit;
            opts->pos->next = r.idx;
        }
        r.skip = 0;
        if (limit > (1LL << 50)) break;
    }
done:
    lay_bnb_free(bnb);
    bud->stop = result != LAY_GAVE_UP ? LAY_STOP_NONE : too_large ? LAY_STOP_SIZE : stop;
    for (size_t d = 0; d < ndir; d++) srch_free(&dir[d]);
    free(mirror);
    lay_reduced_free(&red);
    return result;
}
