/* layout_bnb.c — exact branch and bound for a layout within a capacity.
 *
 * The search builds canonical layouts: each buffer sits at its minimum
 * offset, the lowest address above every already placed buffer whose
 * lifetime it meets.  Every layout can be pushed down until each buffer
 * rests on 0 or on a buffer it conflicts with; placing the buffers of such
 * a layout in order of (offset, preorder rank) gives each one exactly its
 * minimum offset at its turn, so branching "which unplaced buffer goes
 * next, at its minimum offset" reaches every pushed-down layout and the
 * search is complete.  This is the branching of MiniMalloc (Moffitt, ASPLOS
 * 2023); the rules that cut it down, each switchable in layout_bnb_rules so
 * its worth can be measured:
 *
 *   canonical   the placements go in nondecreasing (offset, rank): a layout
 *               is then reached along one path only;
 *   dominance   no buffer goes at or above the lowest top any unplaced
 *               buffer could have (min offset + size): that buffer could
 *               slide into the gap below, so a layout of least total offset
 *               never does this;
 *   section     the live-size bound per time section: the section's floor
 *               plus the sizes of its unplaced buffers must fit the capacity;
 *   monotonic   with canonical placements nothing later goes below the
 *               offset just used, so every section's floor is at least that;
 *   floor       a section's floor is raised to the lowest minimum offset of
 *               its unplaced buffers (nothing there can go lower): checked
 *               as "some unplaced buffer there has a min offset <= capacity
 *               - unplaced sizes", with the buffer that passed last time
 *               tried first (a witness: no rescan of the section after
 *               each placement, which took 70% of the time at 800
 *               buffers);
 *   tight       a section that can waste nothing (floor + unplaced sizes =
 *               capacity) needs an unplaced buffer that can still sit at
 *               its floor (implied by floor when both are on);
 *   fit         every unplaced buffer must still fit above its minimum
 *               offset (fails a branch before the buffer's turn comes);
 *   twins       buffers with the same lifetime and size are interchangeable:
 *               they are placed in rank order;
 *   decompose   when a placement leaves a time boundary that no unplaced
 *               buffer crosses, the two sides are independent and solved
 *               one after the other, so a failure on one side never
 *               re-opens choices on the other;
 *   reorder     a piece split off by decompose is ranked again, by the
 *               same keys but from the section totals left in it (key T):
 *               MiniMalloc preorders each sub-problem of its dynamic
 *               decomposition afresh.  Any ranking keeps the search
 *               complete (canonical needs distinct ranks within the piece,
 *               twins only a fixed order among twins).  Real compilers'
 *               lists, whose steps are not all at the peak, split often;
 *               the zero-slack generators' rarely;
 *   hatless     (MiniMalloc's name) when no unplaced buffer meets the one
 *               just placed and its subtree fails, the node fails: that
 *               buffer's min offset is final, so every completion puts it
 *               there, and with canonical order the later candidates
 *               cannot come first in one.
 *
 * Pins (lay_reduce_pinned: buffers at fixed offsets, as MiniMalloc's
 * buffers with an offset given) are obstacles: a buffer's minimum offset
 * is the lowest at or above the tops of the placed buffers it meets where
 * its range avoids the pins it meets (a free buffer may go below a pin).
 * Placing a pushed-down layout's buffers in (offset, rank) order still
 * gives each its minimum offset at its turn (the placed ones it meets lie
 * below it, the unplaced ones at or above its top, so a lower free range
 * of the pins would take it lower), so the search stays complete, and
 * every rule above stays valid: rule section counts the bytes the pins
 * leave free in [floor, capacity) of a section, not the whole range;
 * floor and tight need a buffer low enough, which pins only make harder;
 * twins have the same lifetime, so they meet the same pins; decompose
 * splits at a boundary that no unplaced buffer crosses, and pins are
 * placed already.  lay_improve searches its windows so, with the rules
 * of lay_bnb_pinned_defaults and the preorders of bnb_pinned_orders.
 *
 * Which buffer to try first decides how soon a layout is found: several
 * static preorders (by the largest section total along the lifetime, the
 * sections spanned, area, size, lifetime and area in steps, random ties),
 * on the problem and on its mirror image in time, are run round robin
 * with a node limit that doubles every round.
 * A run that ends without reaching its limit is a proof (a layout or none).
 *
 * Work: a node costs 1 + (buffers of its part) / 4 units of
 * layout_effort.work, plus with pins a quarter unit per pin interval and
 * section scanned, so budgets stop the search at the same point on every
 * machine.
 */
#include "layout.h"
#include "layout_internal.h"
#include "layout_sections.h"

#include <stdlib.h>
#include <string.h>

#define BNB_NONE UINT64_MAX
/* Most pin intervals kept over all buffers and sections: above, the search
 * gives up (LAY_STOP_SIZE) rather than take that memory. */
#define BNB_MAX_PIN_INTERVALS ((size_t)1 << 23)

void lay_bnb_defaults(layout_bnb_rules *p) {
    /* energy is off (roamc layout --with-energy turns it on): under the
     * same work budget it saves 0-4% of the nodes on zero-slack instances
     * (gen_perfect, gen_brick) and costs up to 2x the time per node */
    *p = (layout_bnb_rules){.canonical = 1,
                            .dominance = 1,
                            .section = 1,
                            .monotonic = 1,
                            .tight = 1,
                            .floor = 1,
                            .fit = 1,
                            .twins = 1,
                            .decompose = 1,
                            .mirror = 1,
                            .hatless = 1,
                            .reorder = 1,
                            .energy = 0};
}

void lay_bnb_pinned_defaults(layout_bnb_rules *p) {
    /* lay_improve's windows: the rules of its search around pins as it was
     * measured (layout/LAYOUT.md, PINNED); the others are valid with pins
     * too (test_layout: test_pinned_search) */
    *p = (layout_bnb_rules){
        .canonical = 1, .dominance = 1, .section = 1, .monotonic = 1, .fit = 1, .hatless = 1};
}

/* A range [lo, hi) of units taken by pins. */
typedef struct bnb_iv {
    uint64_t lo, hi;
} bnb_iv;

typedef struct bnb {
    layout_bnb_rules p;
    size_t n;
    lay_sections sc;  /* buffers (orig, size in units), sections, live lists */
    size_t *ov_begin; /* buffers whose lifetime meets b's: CSR */
    uint32_t *ov;
    size_t *twin; /* previous buffer (by rank) with same sa, sb, size */
    uint64_t cap; /* units */
    /* pins (lay_reduce_pinned), npins 0 without */
    size_t npins;
    size_t *ob_begin; /* per buffer: the pins it meets, merged and sorted */
    bnb_iv *ob;       /*   (CSR) */
    size_t *so_begin; /* per section: the pins there below cap, merged and */
    bnb_iv *so;       /*   sorted (CSR), */
    uint64_t *so_pre; /*   with prefix sums of their lengths */
    uint64_t *pinned; /* per section: pinned units below cap */
    uint64_t *base;   /* per buffer: the highest top of the placed buffers it meets */
    uint64_t spent;   /* scans of pin intervals and sections not charged yet (4 a unit) */

    /* state */
    uint64_t *off;    /* per buffer, BNB_NONE while unplaced */
    uint64_t *minoff; /* per buffer */
    uint64_t *floor;  /* per section */
    uint64_t *total;  /* per section: units of unplaced buffers */
    uint64_t *cuts;   /* per boundary k|k+1: unplaced buffers crossing it */
    uint64_t *solution;
    uint64_t *rank;       /* per buffer: position in the preorder (of its piece,
                        under rule reorder) */
    const char *keys;     /* the run's preorder keys */
    const uint64_t *hint; /* key H: per buffer, the hint's offset (lay_pins), or NULL */
    uint64_t seed;        /* the run's seed for key R */
    size_t *wit;          /* per section: the last unplaced buffer that passed rule floor there */
    lay_trail trail;      /* undo log of the state */

    long long nodes_left;
    uint64_t *work;
    double deadline;
    int out_of_work, timed_out;
    lay_bnb_stats *st;
} bnb;

typedef enum bnb_rc { BNB_FOUND, BNB_NOTFOUND, BNB_ABORT } bnb_rc;

static void bnb_set(bnb *s, uint64_t *where, uint64_t value) {
    lay_trail_set(&s->trail, where, value);
}

static void bnb_rollback(bnb *s, size_t mark) {
    lay_trail_undo(&s->trail, mark);
}

/* A part of the problem: the buffers listed (some placed already) within
 * sections [lo, hi), which no unplaced buffer crosses. */
typedef struct bnb_part {
    const size_t *buf;
    size_t nbuf;
    size_t lo, hi;
} bnb_part;

static bnb_rc bnb_search(bnb *s, const bnb_part *pt, size_t unplaced, uint64_t last_off,
                         uint64_t last_rank);
static void bnb_rank(bnb *s, const size_t *list, size_t m, int undo);
static bnb_rc bnb_solve_part(bnb *s, const bnb_part *pt);

/* The lowest offset >= from where b's range avoids the pins it meets. */
static uint64_t bnb_first_fit(bnb *s, size_t b, uint64_t from) {
    uint64_t p = from;
    size_t lo = s->ob_begin[b], hi = s->ob_begin[b + 1];
    while (lo < hi) { /* the first interval ending above p */
        size_t mid = lo + (hi - lo) / 2;
        if (s->ob[mid].hi <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t j = lo;
    for (; j < s->ob_begin[b + 1] && s->ob[j].lo < p + s->sc.size[b]; j++)
        if (s->ob[j].hi > p) p = s->ob[j].hi;
    s->spent += j - lo;
    return p;
}

/* Units of section k the pins leave free in [f, cap). */
static uint64_t bnb_room(const bnb *s, size_t k, uint64_t f) {
    if (f >= s->cap) return 0;
    size_t lo = s->so_begin[k], hi = s->so_begin[k + 1], end = hi;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->so[mid].hi <= f)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint64_t pinned = s->so_pre[end] - s->so_pre[lo];
    if (lo < end && s->so[lo].lo < f) pinned -= f - s->so[lo].lo;
    return s->cap - f - pinned;
}

/* b's minimum offset now that a buffer it meets has its top at top. */
static void bnb_raise(bnb *s, size_t c, uint64_t top) {
    if (!s->npins) {
        if (s->minoff[c] < top) bnb_set(s, &s->minoff[c], top);
        return;
    }
    if (s->base[c] >= top) return;
    bnb_set(s, &s->base[c], top);
    uint64_t m = bnb_first_fit(s, c, top);
    if (m != s->minoff[c]) bnb_set(s, &s->minoff[c], m);
}

/* Places b at o and updates floors, totals, cuts (read by rule decompose
 * only: the undo log's traffic is most of a node's time on long lifetimes)
 * and minimum offsets (all through the undo log).  Returns the unplaced
 * buffers whose lifetimes meet b's. */
static size_t bnb_place(bnb *s, size_t b, uint64_t o) {
    uint64_t top = o + s->sc.size[b];
    bnb_set(s, &s->off[b], o);
    for (size_t k = s->sc.sa[b]; k < s->sc.sb[b]; k++) {
        if (top > s->floor[k]) bnb_set(s, &s->floor[k], top);
        bnb_set(s, &s->total[k], s->total[k] - s->sc.size[b]);
        if (s->p.decompose && k + 1 < s->sc.sb[b]) bnb_set(s, &s->cuts[k], s->cuts[k] - 1);
    }
    size_t over = 0;
    for (size_t j = s->ov_begin[b]; j < s->ov_begin[b + 1]; j++) {
        size_t c = s->ov[j];
        if (s->off[c] != BNB_NONE) continue;
        over++;
        bnb_raise(s, c, top);
    }
    return over;
}

/* The bounds after placing b at offset o (the last placement was at
 * last_off): returns 0 when some section of the part can no longer hold
 * its unplaced buffers. */
static int bnb_check(bnb *s, const bnb_part *pt, size_t b, uint64_t o, uint64_t last_off) {
    if (!s->p.section) return 1;
    size_t lo = pt->lo, hi = pt->hi;
    /* Without rules floor and tight (which read minimum offsets that b
     * raised elsewhere), a placement at the last offset changes only b's
     * sections: the others passed this check before (a window of 12000
     * buffers has some 24000 sections). */
    if (!s->p.floor && !s->p.tight && o == last_off) {
        if (s->sc.sa[b] > lo) lo = s->sc.sa[b];
        if (s->sc.sb[b] < hi) hi = s->sc.sb[b];
    }
    if (s->npins) s->spent += hi - lo;
    uint64_t mono = s->p.monotonic && s->p.canonical ? o : 0;
    for (size_t k = lo; k < hi; k++) {
        if (s->total[k] == 0) continue;
        uint64_t f = s->floor[k] > mono ? s->floor[k] : mono;
        if (f + s->total[k] > s->cap) return 0;
        /* with pins: the bytes they leave free above f (room >= cap - f -
         * all pinned units: most sections pass so) */
        if (s->npins && s->total[k] + s->pinned[k] > s->cap - f) {
            s->spent += 4;
            if (s->total[k] > bnb_room(s, k, f)) return 0;
        }
        if (s->p.floor) {
            /* Rule floor: nothing live in k goes below the lowest min
             * offset of its unplaced buffers, so one of them must have a
             * min offset <= cap - total.  (This also covers rule tight: at
             * f + total == cap that is a buffer that can sit at f.)  The
             * last buffer found is tried first: min offsets only rise
             * and totals only fall along a path, so it often still
             * holds. */
            uint64_t room = s->cap - s->total[k];
            size_t w = s->wit[k];
            if (s->off[w] != BNB_NONE || s->minoff[w] > room) {
                size_t i = s->sc.live_begin[k];
                w = BNB_NONE;
                for (; i < s->sc.live_begin[k + 1]; i++) {
                    size_t d = s->sc.live_buf[i];
                    if (s->off[d] == BNB_NONE && s->minoff[d] <= room) {
                        w = d;
                        break;
                    }
                }
                if (w == BNB_NONE) return 0;
                s->wit[k] = w;
            }
        } else if (s->p.tight && f + s->total[k] == s->cap) {
            /* no room to waste: the cell at f must be covered by a buffer
             * at exactly f, so one of them must still be able to go that
             * low (its minimum offset only rises from here) */
            int coverable = 0;
            size_t i = s->sc.live_begin[k];
            for (; i < s->sc.live_begin[k + 1] && !coverable; i++) {
                size_t d = s->sc.live_buf[i];
                coverable = s->off[d] == BNB_NONE && s->minoff[d] <= f;
            }
            if (!coverable) return 0;
        }
    }
    return 1;
}

/* Charges a node; returns 0 when the node limit, the work or the time is
 * out. */
static int bnb_charge(bnb *s, uint64_t cost) {
    if (s->nodes_left-- <= 0) return 0;
    cost += s->spent / 4;
    s->spent = 0;
    if (*s->work < cost) {
        s->out_of_work = 1;
        return 0;
    }
    *s->work -= cost;
    s->st->nodes++;
    if ((s->st->nodes & 255) == 0 && roamc_now() > s->deadline) {
        s->timed_out = 1;
        return 0;
    }
    return 1;
}

/* After b was placed (unplaced: the part's buffers unplaced before): did
 * it free a boundary inside the part?  Then the
 * part falls apart and each piece is solved alone. */
static bnb_rc bnb_after_place(bnb *s, const bnb_part *pt, size_t unplaced, size_t b, uint64_t o) {
    if (s->p.decompose) {
        int split = 0;
        for (size_t k = s->sc.sa[b]; k + 1 < s->sc.sb[b] && !split; k++)
            split = k + 1 > pt->lo && k + 1 < pt->hi && s->cuts[k] == 0;
        if (split) return bnb_solve_part(s, pt);
    }
    return bnb_search(s, pt, unplaced - 1, o, s->rank[b]);
}

/* unplaced: the part's unplaced buffers (the candidates' room: a window of
 * lay_improve lists 12000 buffers, most of them placed deep down). */
static bnb_rc bnb_search(bnb *s, const bnb_part *pt, size_t unplaced, uint64_t last_off,
                         uint64_t last_rank) {
    uint64_t cost = 1 + pt->nbuf / 4;
    if (!bnb_charge(s, cost)) return BNB_ABORT;
    /* With rules section, monotonic and canonical, a placement at o fails
     * bnb_check when some section of the part holds more than cap - o
     * unplaced: a section b leaves alone keeps its total under a floor of
     * at least o, and one of b's gets a floor of at least o + size(b) over
     * its total less size(b).  Most placements tried failed so (one to two
     * dozen per node at 450 buffers, each placed, checked and undone):
     * they are left out of the candidates, with the same answer. */
    uint64_t most = 0;
    if (s->p.section && s->p.monotonic && s->p.canonical)
        for (size_t k = pt->lo; k < pt->hi; k++)
            if (s->total[k] > most) most = s->total[k];
    /* One pass over the part's buffers: the lowest top any unplaced one
     * can have (rule dominance), the buffers that fit at all (rule fit),
     * and the candidates but for rule dominance, which needs the lowest
     * top of all (two passes took half of the time once the failing
     * placements were gone); in (minimum offset, rank) order after the
     * sort: ranks are distinct. */
    uint64_t min_top = BNB_NONE;
    size_t left = 0, nc = 0;
    lay_key *cand = xmallocarray(unplaced, sizeof *cand);
    for (size_t i = 0; i < pt->nbuf; i++) {
        size_t b = pt->buf[i];
        if (s->off[b] != BNB_NONE) continue;
        left++;
        ROAMC_ASSERT(left <= unplaced);
        uint64_t o = s->minoff[b], t = o + s->sc.size[b];
        if (t > s->cap) {
            if (!s->p.fit) continue;
            free(cand);
            return BNB_NOTFOUND;
        }
        if (t < min_top) min_top = t;
        if (o + most > s->cap) continue;
        if (s->p.canonical && (o < last_off || (o == last_off && s->rank[b] < last_rank))) continue;
        if (s->p.twins && s->twin[b] != SIZE_MAX && s->off[s->twin[b]] == BNB_NONE) continue;
        cand[nc++] = (lay_key){o, s->rank[b], 0, b};
    }
    if (left == 0) {
        free(cand);
        return BNB_FOUND;
    }
    if (s->p.dominance) {
        size_t kept = 0;
        for (size_t i = 0; i < nc; i++)
            if (cand[i].k1 < min_top) cand[kept++] = cand[i];
        nc = kept;
    }
    qsort(cand, nc, sizeof *cand, lay_key_cmp);
    bnb_rc rc = BNB_NOTFOUND;
    for (size_t i = 0; i < nc && rc == BNB_NOTFOUND; i++) {
        size_t b = cand[i].idx;
        uint64_t o = cand[i].k1;
        size_t mark = s->trail.len;
        size_t over = bnb_place(s, b, o);
        if (bnb_check(s, pt, b, o, last_off)) {
            rc = bnb_after_place(s, pt, unplaced, b, o);
            if (rc == BNB_FOUND) s->solution[b] = o;
        }
        bnb_rollback(s, mark);
        /* Rule hatless: nothing unplaced meets b, so its min offset is
         * final and every completion puts b at o; with canonical order
         * the next placement of any completion has a key <= (o, rank b),
         * so the later candidates cannot start one. */
        if (rc == BNB_NOTFOUND && over == 0 && s->p.canonical && s->p.hatless) break;
    }
    free(cand);
    if (rc == BNB_NOTFOUND) s->st->backtracks++;
    return rc;
}

/* Solves part pt piece by piece: pieces are maximal runs of sections
 * joined by unplaced buffers that cross their boundaries. */
static bnb_rc bnb_solve_part(bnb *s, const bnb_part *pt) {
    size_t *sub = xmallocarray(pt->nbuf, sizeof *sub);
    bnb_rc rc = BNB_FOUND;
    for (size_t a = pt->lo; a < pt->hi && rc == BNB_FOUND;) {
        size_t z = a + 1;
        while (z < pt->hi && s->cuts[z - 1] > 0) z++;
        bnb_part q = {sub, 0, a, z};
        for (size_t i = 0; i < pt->nbuf; i++) {
            size_t b = pt->buf[i];
            if (s->off[b] == BNB_NONE && s->sc.sa[b] >= a && s->sc.sb[b] <= z) sub[q.nbuf++] = b;
        }
        if (q.nbuf > 0) {
            if (pt->hi - pt->lo > z - a) {
                s->st->splits++;
                if (s->p.reorder && q.nbuf > 1) bnb_rank(s, q.buf, q.nbuf, 1);
            }
            rc = bnb_search(s, &q, q.nbuf, 0, 0);
        }
        a = z;
    }
    free(sub);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Setting up                                                                */

typedef struct bnb_pre {
    uint64_t total, width, size, steps, rnd, hint;
    double area, tarea;
    size_t b;
} bnb_pre;

static int bnb_pre_cmp_keys(const bnb_pre *x, const bnb_pre *y, const char *keys) {
    for (const char *k = keys; *k; k++) {
        if (*k == 'T' && x->total != y->total) return x->total > y->total ? -1 : 1;
        if (*k == 'W' && x->width != y->width) return x->width > y->width ? -1 : 1;
        if (*k == 'Z' && x->size != y->size) return x->size > y->size ? -1 : 1;
        if (*k == 'A' && x->area != y->area) return x->area > y->area ? -1 : 1;
        if (*k == 'w' && x->steps != y->steps) return x->steps > y->steps ? -1 : 1;
        if (*k == 'a' && x->tarea != y->tarea) return x->tarea > y->tarea ? -1 : 1;
        if (*k == 'R' && x->rnd != y->rnd) return x->rnd > y->rnd ? -1 : 1;
        if (*k == 'H' && x->hint != y->hint) return x->hint < y->hint ? -1 : 1;
    }
    return (x->b > y->b) - (x->b < y->b);
}

/* Is x tried before y under keys (a lay_merge_sort comparator)? */
static int bnb_pre_before(const void *x, const void *y, const void *keys) {
    return bnb_pre_cmp_keys(x, y, keys) < 0;
}

static void bnb_free(bnb *s) {
    lay_sections_free(&s->sc);
    free(s->ov_begin);
    free(s->ov);
    free(s->twin);
    free(s->off);
    free(s->minoff);
    free(s->floor);
    free(s->total);
    free(s->cuts);
    free(s->solution);
    free(s->rank);
    free(s->wit);
    free(s->ob_begin);
    free(s->ob);
    free(s->so_begin);
    free(s->so);
    free(s->so_pre);
    free(s->pinned);
    free(s->base);
    free(s->trail.log);
    memset(s, 0, sizeof *s);
}

/* Merges v[0..m), sorted by lo (touching ranges join); returns the
 * count. */
static size_t bnb_merge(bnb_iv *v, size_t m) {
    size_t k = 0;
    for (size_t i = 0; i < m; i++) {
        if (k > 0 && v[i].lo <= v[k - 1].hi) {
            if (v[i].hi > v[k - 1].hi) v[k - 1].hi = v[i].hi;
        } else {
            v[k++] = v[i];
        }
    }
    return k;
}

/* Appends the merged ranges v[0..m) to a CSR list (*list, *len, *cap
 * entries); 0 when the lists of the search pass BNB_MAX_PIN_INTERVALS
 * (*total counts them all). */
static int bnb_append(bnb_iv **list, size_t *len, size_t *cap, bnb_iv *v, size_t m, size_t *total) {
    m = bnb_merge(v, m);
    *total += m;
    while (*len + m > *cap) *cap = *cap ? 2 * *cap : 1024;
    *list = xreallocarray(*list, *cap, sizeof **list);
    memcpy(*list + *len, v, m * sizeof *v);
    *len += m;
    return *total <= BNB_MAX_PIN_INTERVALS;
}

/* Does the lifetime [a, z] meet pin j's (in the lifetimes of bufs)? */
static int bnb_pin_meets(const layout_buffer *bufs, const lay_reduced *red, size_t j, int64_t a,
                         int64_t z) {
    const layout_buffer *x = &bufs[red->pin_orig[j]];
    return x->start <= z && a <= x->end;
}

/* The pins as ranges: per buffer those it meets, per section those there
 * below cap (clipped to it), from the pins in offset order (so merging
 * needs no sort).  Returns 0 when they pass BNB_MAX_PIN_INTERVALS. */
static int bnb_setup_pins(bnb *s, const layout_buffer *bufs, const lay_reduced *red) {
    const size_t n = s->n, ns = s->sc.nsec, np = red->npins;
    lay_key *po = xmallocarray(np, sizeof *po);
    for (size_t j = 0; j < np; j++) po[j] = (lay_key){red->pin_at[j], red->pin_size[j], 0, j};
    qsort(po, np, sizeof *po, lay_key_cmp);
    bnb_iv *tmp = xmallocarray(np, sizeof *tmp);
    size_t len = 0, cap = 0, total = 0;
    int ok = 1;
    s->ob_begin = xcalloc(n + 1, sizeof *s->ob_begin);
    for (size_t b = 0; b < n && ok; b++) {
        const layout_buffer *x = &bufs[s->sc.orig[b]];
        size_t m = 0;
        for (size_t r = 0; r < np; r++)
            if (bnb_pin_meets(bufs, red, po[r].idx, x->start, x->end))
                tmp[m++] = (bnb_iv){po[r].k1, po[r].k1 + po[r].k2};
        ok = bnb_append(&s->ob, &len, &cap, tmp, m, &total);
        s->ob_begin[b + 1] = len;
    }
    size_t slen = 0, scap = 0;
    s->so_begin = xcalloc(ns + 1, sizeof *s->so_begin);
    for (size_t k = 0; k < ns && ok; k++) {
        size_t m = 0;
        for (size_t r = 0; r < np && po[r].k1 < s->cap; r++)
            if (bnb_pin_meets(bufs, red, po[r].idx, s->sc.bound[k], s->sc.bound[k + 1] - 1)) {
                uint64_t hi = po[r].k1 + po[r].k2;
                tmp[m++] = (bnb_iv){po[r].k1, hi < s->cap ? hi : s->cap};
            }
        ok = bnb_append(&s->so, &slen, &scap, tmp, m, &total);
        s->so_begin[k + 1] = slen;
    }
    free(tmp);
    free(po);
    if (!ok) return 0;
    s->so_pre = xmallocarray(slen + 1, sizeof *s->so_pre);
    s->so_pre[0] = 0;
    for (size_t i = 0; i < slen; i++) s->so_pre[i + 1] = s->so_pre[i] + (s->so[i].hi - s->so[i].lo);
    s->pinned = xmallocarray(ns, sizeof *s->pinned);
    for (size_t k = 0; k < ns; k++)
        s->pinned[k] = s->so_pre[s->so_begin[k + 1]] - s->so_pre[s->so_begin[k]];
    s->base = xmallocarray(n, sizeof *s->base);
    return 1;
}

/* Builds sections, overlap lists and section lists of the reduced problem
 * red of bufs (lifetimes read from bufs, which may be mirrored), and its
 * pins' ranges.  The live lists only when a rule reads them (live: floor or
 * tight; a window of lay_improve's spans thousands of sections with some of
 * its buffers).  Returns 0 when the pins' ranges pass
 * BNB_MAX_PIN_INTERVALS. */
static int bnb_setup(bnb *s, const layout_buffer *bufs, const lay_reduced *red, uint64_t capacity,
                     int live) {
    memset(s, 0, sizeof *s);
    size_t n = s->n = red->n;
    s->cap = (capacity - red->base) / red->unit;
    if (live)
        lay_sections_init(&s->sc, bufs, red);
    else
        lay_sections_sweep(&s->sc, bufs, red->orig, red->size, red->n);
    size_t ns = s->sc.nsec;
    lay_sections_overlaps(&s->sc, &s->ov_begin, &s->ov);

    s->twin = xmallocarray(n, sizeof *s->twin);
    s->off = xmallocarray(n, sizeof *s->off);
    s->minoff = xmallocarray(n, sizeof *s->minoff);
    s->floor = xmallocarray(ns, sizeof *s->floor);
    s->total = xmallocarray(ns, sizeof *s->total);
    s->cuts = xmallocarray(ns, sizeof *s->cuts);
    s->solution = xmallocarray(n, sizeof *s->solution);
    s->rank = xmallocarray(n, sizeof *s->rank);
    /* witnesses start as any buffer live in the section (a section with
     * none has total 0 and is never checked) */
    s->wit = xcalloc(ns, sizeof *s->wit);
    for (size_t k = 0; live && k < ns; k++)
        if (s->sc.live_begin[k] < s->sc.live_begin[k + 1])
            s->wit[k] = s->sc.live_buf[s->sc.live_begin[k]];
    s->npins = red->npins;
    return !s->npins || bnb_setup_pins(s, bufs, red);
}

static void bnb_reset(bnb *s) {
    for (size_t b = 0; b < s->n; b++) {
        s->off[b] = BNB_NONE;
        s->minoff[b] = s->npins ? bnb_first_fit(s, b, 0) : 0;
        if (s->npins) s->base[b] = 0;
    }
    for (size_t k = 0; k < s->sc.nsec; k++) s->floor[k] = 0;
    lay_sections_totals(&s->sc, s->total, s->cuts);
    s->trail.len = 0;
}

/* Ranks the m buffers of list by the run's keys, from the section totals
 * of now (for key T), as ranks 0 .. m - 1; through the undo trail when
 * undo is set. */
static void bnb_rank(bnb *s, const size_t *list, size_t m, int undo) {
    bnb_pre *v = xmallocarray(m, sizeof *v), *tmp = xmallocarray(m, sizeof *tmp);
    for (size_t i = 0; i < m; i++) {
        size_t b = list[i];
        uint64_t t = 0;
        for (size_t k = s->sc.sa[b]; k < s->sc.sb[b]; k++)
            if (s->total[k] > t) t = s->total[k];
        uint64_t width = s->sc.sb[b] - s->sc.sa[b];
        v[i] = (bnb_pre){.total = t,
                         .width = width,
                         .size = s->sc.size[b],
                         .steps = s->sc.steps[b],
                         /* area in sections x size keeps mirrored runs alike */
                         .area = (double)s->sc.size[b] * (double)width,
                         .tarea = (double)s->sc.size[b] * (double)s->sc.steps[b],
                         .b = b};
        v[i].rnd = lay_random_tie(b, s->seed);
        v[i].hint = s->hint ? s->hint[b] : 0;
    }
    lay_merge_sort(v, tmp, m, sizeof *v, bnb_pre_before, s->keys);
    for (size_t i = 0; i < m; i++) {
        if (undo)
            bnb_set(s, &s->rank[v[i].b], i);
        else
            s->rank[v[i].b] = i;
    }
    free(v);
    free(tmp);
}

/* Ranks all buffers by keys (seed: the R key's) and finds twins (same
 * sections and size; placed in rank order). */
static void bnb_preorder(bnb *s, const char *keys, uint64_t seed) {
    s->keys = keys;
    s->seed = seed;
    size_t *all = xmallocarray(s->n, sizeof *all);
    for (size_t b = 0; b < s->n; b++) all[b] = b;
    bnb_rank(s, all, s->n, 0);
    free(all);
    lay_sections_twins(&s->sc, s->rank, s->twin);
}

/* The round robin's strategies: the preorders, each on the problem as
 * given and on its mirror image in time.  'w' and 'a' (lifetime and area
 * in steps) give MiniMalloc's first preorder (WAT), which closes
 * zero-slack instances the others do not (gen_strip DROP 20, 800 buffers,
 * seed 2: 0.7 s; without it, stopped at 5 s).  TR and WR break ties at
 * random ('R': a hash of the buffer and the round's node limit), so each
 * round restarts them differently, as the skyline search's TR and WR.
 * Twa is MiniMalloc's third (TWA: its W and A count steps, not
 * sections); last, because in place of TWA and TAW it cost gen_strip
 * DROP 20 800/1 6 s where it took 0.5 s. */
static const char *const bnb_orders[] = {"waT", "TWA", "WTA", "TAW", "TR", "WR", "Twa"};
#define BNB_NORDERS (sizeof bnb_orders / sizeof bnb_orders[0])

/* With pins, lay_improve's windows: the incumbent's order first (key H:
 * the hint's offsets; left out without a hint), then size, lifetime,
 * area and the busiest section along the lifetime (the preorders of the
 * search around pins as measured, layout/LAYOUT.md). */
static const char *const bnb_pinned_orders[] = {"HZ", "Zw", "wZ", "aZ", "TwZ"};
#define BNB_NPINNED_ORDERS (sizeof bnb_pinned_orders / sizeof bnb_pinned_orders[0])

struct lay_bnb_ctx {
    layout_bnb_rules p;
    bnb dir[2];
    size_t ndir;
    const char *const *orders; /* the preorders: bnb_orders, or with pins
                                  bnb_pinned_orders from the first that applies */
    size_t norders;
    size_t *all;
    const lay_reduced *red;
    size_t n;
    lay_bnb_stats *st;
};

void lay_bnb_free(lay_bnb_ctx *c) {
    if (!c) return;
    for (size_t d = 0; d < c->ndir; d++) bnb_free(&c->dir[d]);
    free(c->all);
    free(c);
}

lay_bnb_ctx *lay_bnb_new(const layout_problem *p, const layout_buffer *mirror,
                         const lay_reduced *red, uint64_t capacity, const layout_bnb_rules *rules,
                         lay_bnb_stats *st) {
    ROAMC_ASSERT(red->n > 0 && red->base <= capacity);
    lay_bnb_ctx *c = xcalloc(1, sizeof *c);
    if (rules)
        c->p = *rules;
    else
        lay_bnb_defaults(&c->p);
    c->red = red;
    c->n = p->n;
    c->st = st;
    c->orders = bnb_orders;
    c->norders = BNB_NORDERS;
    if (red->pinned) {
        size_t first = red->hint ? 0 : 1;
        c->orders = bnb_pinned_orders + first;
        c->norders = BNB_NPINNED_ORDERS - first;
    }
    if (!c->p.mirror) mirror = NULL;
    int ok = 1;
    for (; ok && c->ndir < (mirror ? 2u : 1u); c->ndir++) {
        ok = bnb_setup(&c->dir[c->ndir], c->ndir ? mirror : p->bufs, red, capacity,
                       c->p.floor || c->p.tight);
        c->dir[c->ndir].hint = red->hint;
    }
    if (!ok) {
        lay_bnb_free(c);
        return NULL;
    }
    c->all = xmallocarray(red->n, sizeof *c->all);
    for (size_t b = 0; b < red->n; b++) c->all[b] = b;
    return c;
}

size_t lay_bnb_strategies(const lay_bnb_ctx *c) {
    return c->norders * c->ndir;
}

lay_status lay_bnb_run(lay_bnb_ctx *c, size_t h, long long limit, lay_budget *bud,
                       uint64_t *offsets) {
    bnb *s = &c->dir[h % c->ndir];
    s->p = c->p;
    bnb_reset(s);
    bnb_preorder(s, c->orders[(h / c->ndir) % c->norders], (uint64_t)limit);
    s->nodes_left = limit;
    s->work = &bud->work;
    s->deadline = bud->deadline;
    s->out_of_work = s->timed_out = 0;
    s->st = c->st;
    c->st->restarts++;
    bnb_part whole = {c->all, c->red->n, 0, s->sc.nsec};
    bnb_rc rc = bnb_solve_part(s, &whole);
    bud->stop = LAY_STOP_NONE;
    if (rc == BNB_FOUND) {
        memcpy(offsets, c->red->offsets, c->n * sizeof *offsets);
        for (size_t b = 0; b < s->n; b++)
            offsets[s->sc.orig[b]] = c->red->base + s->solution[b] * c->red->unit;
        return LAY_FOUND;
    }
    if (rc == BNB_NOTFOUND) return LAY_INFEASIBLE;
    bud->stop = s->out_of_work                                ? LAY_STOP_WORK
                : s->timed_out || roamc_now() > bud->deadline ? LAY_STOP_TIME
                                                              : LAY_STOP_NONE;
    return LAY_GAVE_UP;
}

/* Charges setting up the pins' ranges (a scan of every pair of a buffer
 * and a pin): 0, with bud->stop set, when the work is short. */
static int bnb_charge_pins(const lay_reduced *red, lay_budget *bud) {
    uint64_t setup = (uint64_t)(red->n + 1) * (red->npins + 1) / 16 + red->n;
    if (bud->work < setup) {
        bud->work = 0;
        bud->stop = LAY_STOP_WORK;
        return 0;
    }
    bud->work -= setup;
    return 1;
}

lay_status lay_bnb(const lay_bnb_task *t, lay_budget *bud, uint64_t *offsets, lay_bnb_stats *st) {
    const layout_problem *p = t->p;
    const lay_pins *pins = t->pins;
    uint64_t capacity = t->capacity;
    const layout_bnb_rules *rules = t->rules;
    lay_bnb_stats local;
    if (!st) st = &local;
    memset(st, 0, sizeof *st);
    const size_t n = p->n;
    lay_reduced red;
    if (pins)
        lay_reduce_pinned(p->bufs, n, p->align, pins, &red);
    else
        lay_reduce(p->bufs, n, p->align, &red);
    lay_status result = LAY_GAVE_UP;
    layout_buffer *mirror = NULL;
    lay_bnb_ctx *c = NULL;
    bud->stop = LAY_STOP_NONE;
    if (red.pinned && red.n && !bnb_charge_pins(&red, bud)) goto done;
    if (red.base > capacity) {
        result = LAY_INFEASIBLE;
        goto done;
    }
    if (red.n == 0) {
        memcpy(offsets, red.offsets, n * sizeof *offsets);
        result = LAY_FOUND;
        goto done;
    }
    mirror = lay_mirror(p->bufs, n);
    c = lay_bnb_new(p, mirror, &red, capacity, rules, st);
    if (!c) {
        bud->stop = LAY_STOP_SIZE;
        goto done;
    }
    for (long long limit = 2 * (long long)red.n;
         result == LAY_GAVE_UP && bud->stop == LAY_STOP_NONE; limit *= 2) {
        for (size_t h = 0;
             h < lay_bnb_strategies(c) && result == LAY_GAVE_UP && bud->stop == LAY_STOP_NONE; h++)
            result = lay_bnb_run(c, h, limit, bud, offsets);
        if (limit > (1LL << 52)) break;
    }
done:
    lay_bnb_free(c);
    free(mirror);
    lay_reduced_free(&red);
    return result;
}
