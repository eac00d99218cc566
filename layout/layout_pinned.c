/* layout_pinned.c — exact search for a layout of free buffers around
 * pinned ones (lay_pinned, layout_internal.h).
 *
 * lay_improve re-lays windows of a large layout: the buffers whose whole
 * lifetime lies in the window are free, those that cross its ends stay
 * where they are.  Placing the free ones only above the highest crossing
 * buffer (what lay_search can do, as it knows no fixed buffers) wastes the
 * holes between the crossing ones; this search places them anywhere around
 * the pins.
 *
 * It is the canonical branch and bound of layout_bnb.c (MiniMalloc's
 * branching) with obstacles.  A layout is pushed down when no buffer can
 * move to a lower free range.  Every feasible instance has one (lowering a
 * buffer lowers the sum of the offsets).  Place its free buffers in order
 * of (offset, rank): at its turn a buffer b sits at the lowest offset at or
 * above the tops of the placed free buffers it meets that avoids the pins
 * it meets (its minimum offset): the placed ones it meets lie below it;
 * the unplaced ones it meets lie at or above its top; so any free range of
 * the pins lower than its offset would take it lower.  Hence branching on
 * "which unplaced buffer goes next, at its minimum offset", in
 * nondecreasing (offset, rank), reaches every pushed-down layout, and the
 * search is complete.  The rules that cut it, each valid with pins:
 *
 *   fit        every unplaced buffer must fit below the capacity at its
 *              minimum offset (which only rises);
 *   dominance  nothing goes at or above the lowest top an unplaced buffer
 *              could have: that buffer's range stays free (later
 *              placements go higher), so the layout is not pushed down;
 *   section    in each time section the unplaced buffers go at or above
 *              the section's floor (the placed tops there) and the offset
 *              just used: their sizes must fit in the bytes the pins leave
 *              free between that and the capacity;
 *   hatless    when nothing unplaced meets the buffer just placed and its
 *              subtree fails, the node fails (layout_bnb.c).
 *
 * Preorders (the hint's offsets when given: a layout near the incumbent
 * first; size; lifetime; area; the busiest section along the lifetime)
 * run round robin with doubling node limits.  A node costs
 * 1 + (free buffers + sections scanned) / 4 work units.
 */
#include "layout.h"
#include "layout_internal.h"
#include "layout_sections.h"

#include <stdlib.h>
#include <string.h>

#define PIN_NONE UINT64_MAX
/* Most obstacle intervals kept over all free buffers and sections: above,
 * the search gives up (LAY_STOP_SIZE) rather than take that memory. */
#define PIN_MAX_INTERVALS ((size_t)1 << 23)

typedef struct pin_iv {
    uint64_t lo, hi; /* [lo, hi) */
} pin_iv;

typedef enum pin_rc { PIN_FOUND, PIN_NOTFOUND, PIN_ABORT } pin_rc;

typedef struct pin_search {
    const lay_pinned_problem *q;
    size_t n, nsec;
    uint64_t cap;
    uint64_t *sz;     /* sizes rounded up to align */
    size_t *sa, *sb;  /* section range [sa, sb) of each free buffer */
    uint64_t *steps;  /* lifetime in steps */
    size_t *ob_begin; /* per free buffer: the pins it meets, merged */
    pin_iv *ob;       /* and sorted (CSR) */
    size_t *so_begin; /* per section: the pins there below cap, */
    pin_iv *so;       /* merged and sorted (CSR), */
    uint64_t *so_pre; /* with prefix sums of their lengths */
    size_t *ov_begin; /* free buffers meeting each (CSR) */
    uint32_t *ov;
    /* state */
    uint64_t *off, *base, *minoff, *floor, *total, *rank, *solution;
    lay_trail trail;
    uint64_t *pinned; /* per section: pinned bytes below cap */
    long long nodes_left;
    uint64_t spent; /* work of first fits and checks not charged yet (4 a unit) */
    lay_budget *bud;
    int out_of_work, timed_out;
    uint64_t nodes;
} pin_search;

static uint64_t pin_align_up(const pin_search *s, uint64_t x) {
    return lay_round_up(x, s->q->align);
}

/* The lowest offset >= from (aligned) where b's range avoids the pins it
 * meets. */
static uint64_t pin_first_fit(pin_search *s, size_t b, uint64_t from) {
    uint64_t p = pin_align_up(s, from);
    size_t lo = s->ob_begin[b], hi = s->ob_begin[b + 1];
    while (lo < hi) { /* first interval ending above p */
        size_t mid = lo + (hi - lo) / 2;
        if (s->ob[mid].hi <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t j = lo;
    for (; j < s->ob_begin[b + 1] && s->ob[j].lo < p + s->sz[b]; j++)
        if (s->ob[j].hi > p) p = pin_align_up(s, s->ob[j].hi);
    s->spent += j - lo;
    return p;
}

/* Bytes of section k the pins leave free in [f, cap). */
static uint64_t pin_room(const pin_search *s, size_t k, uint64_t f) {
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

static void pin_set(pin_search *s, uint64_t *where, uint64_t v) {
    lay_trail_set(&s->trail, where, v);
}

/* Places b at o; returns the unplaced buffers meeting it. */
static size_t pin_place(pin_search *s, size_t b, uint64_t o) {
    uint64_t top = o + s->sz[b];
    pin_set(s, &s->off[b], o);
    for (size_t k = s->sa[b]; k < s->sb[b]; k++) {
        if (top > s->floor[k]) pin_set(s, &s->floor[k], top);
        pin_set(s, &s->total[k], s->total[k] - s->sz[b]);
    }
    size_t over = 0;
    for (size_t j = s->ov_begin[b]; j < s->ov_begin[b + 1]; j++) {
        size_t c = s->ov[j];
        if (s->off[c] != PIN_NONE) continue;
        over++;
        if (s->base[c] < top) {
            pin_set(s, &s->base[c], top);
            uint64_t m = pin_first_fit(s, c, top);
            if (m != s->minoff[c]) pin_set(s, &s->minoff[c], m);
        }
    }
    return over;
}

/* Rule section over [lo, hi): 0 when some section cannot hold its
 * unplaced buffers above max(floor, o).  *scanned counts the sections. */
static int pin_check(pin_search *s, size_t lo, size_t hi, uint64_t o) {
    s->spent += hi - lo;
    for (size_t k = lo; k < hi; k++) {
        if (s->total[k] == 0) continue;
        uint64_t f = s->floor[k] > o ? s->floor[k] : o;
        if (f >= s->cap) return 0;
        /* room >= cap - f - all pinned bytes: most sections pass so */
        if (s->total[k] + s->pinned[k] <= s->cap - f) continue;
        s->spent += 4;
        if (s->total[k] > pin_room(s, k, f)) return 0;
    }
    return 1;
}

static int pin_charge(pin_search *s, uint64_t cost) {
    if (s->nodes_left-- <= 0) return 0;
    cost += s->spent / 4;
    s->spent = 0;
    if (s->bud->work < cost) {
        s->out_of_work = 1;
        return 0;
    }
    s->bud->work -= cost;
    s->nodes++;
    if ((s->nodes & 255) == 0 && roamc_now() > s->bud->deadline) {
        s->timed_out = 1;
        return 0;
    }
    return 1;
}

static pin_rc pin_dfs(pin_search *s, uint64_t last_off, uint64_t last_rank, size_t left) {
    if (left == 0) return PIN_FOUND;
    if (!pin_charge(s, 1 + s->n / 4)) return PIN_ABORT;
    uint64_t min_top = PIN_NONE;
    size_t nc = 0;
    lay_key *cand = xmallocarray(left, sizeof *cand);
    for (size_t b = 0; b < s->n; b++) {
        if (s->off[b] != PIN_NONE) continue;
        uint64_t o = s->minoff[b], t = o + s->sz[b];
        if (t > s->cap) { /* rule fit */
            free(cand);
            return PIN_NOTFOUND;
        }
        if (t < min_top) min_top = t;
        if (o < last_off || (o == last_off && s->rank[b] < last_rank)) continue;
        cand[nc++] = (lay_key){o, s->rank[b], 0, b};
    }
    size_t kept = 0; /* rule dominance */
    for (size_t i = 0; i < nc; i++)
        if (cand[i].k1 < min_top) cand[kept++] = cand[i];
    nc = kept;
    qsort(cand, nc, sizeof *cand, lay_key_cmp);
    pin_rc rc = PIN_NOTFOUND;
    for (size_t i = 0; i < nc && rc == PIN_NOTFOUND; i++) {
        size_t b = cand[i].idx;
        uint64_t o = cand[i].k1;
        size_t mark = s->trail.len;
        size_t over = pin_place(s, b, o);
        /* the offset rose: every section's bound may have tightened;
         * else only b's sections changed */
        int ok = o > last_off ? pin_check(s, 0, s->nsec, o) : pin_check(s, s->sa[b], s->sb[b], o);
        if (ok) {
            rc = pin_dfs(s, o, s->rank[b], left - 1);
            if (rc == PIN_FOUND) s->solution[b] = o;
        }
        lay_trail_undo(&s->trail, mark);
        if (rc == PIN_NOTFOUND && over == 0) break; /* rule hatless */
    }
    free(cand);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Setting up                                                                */

/* Merges v[0..m), sorted by lo (touching intervals join); returns the
 * count. */
static size_t pin_merge(pin_iv *v, size_t m) {
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

static int pin_meets(const layout_buffer *a, const layout_buffer *b) {
    return a->start <= b->end && b->start <= a->end;
}

/* Sections, overlaps and obstacle lists.  Returns 0 when the obstacle
 * lists pass PIN_MAX_INTERVALS. */
static int pin_setup(pin_search *s, const lay_pinned_problem *q, uint64_t capacity) {
    const size_t n = q->n;
    memset(s, 0, sizeof *s);
    s->q = q;
    s->n = n;
    s->cap = capacity;
    s->sz = xmallocarray(n, sizeof *s->sz);
    s->steps = xmallocarray(n, sizeof *s->steps);
    for (size_t b = 0; b < n; b++) {
        ROAMC_ASSERT(q->bufs[b].size > 0 && q->bufs[b].start <= q->bufs[b].end);
        s->sz[b] = lay_round_up(q->bufs[b].size, q->align);
        s->steps[b] = (uint64_t)((int64_t)q->bufs[b].end - q->bufs[b].start) + 1;
    }
    /* section boundaries: starts and ends + 1 of the free buffers */
    int64_t *pt = xmallocarray(2 * n, sizeof *pt);
    for (size_t b = 0; b < n; b++) {
        pt[2 * b] = q->bufs[b].start;
        pt[2 * b + 1] = (int64_t)q->bufs[b].end + 1;
    }
    qsort(pt, 2 * n, sizeof *pt, lay_i64_cmp);
    size_t np = 0;
    for (size_t i = 0; i < 2 * n; i++)
        if (np == 0 || pt[i] != pt[np - 1]) pt[np++] = pt[i];
    s->nsec = np - 1;
    s->sa = xmallocarray(n, sizeof *s->sa);
    s->sb = xmallocarray(n, sizeof *s->sb);
    for (size_t b = 0; b < n; b++) {
        const int64_t *at = bsearch(&(int64_t){q->bufs[b].start}, pt, np, sizeof *pt, lay_i64_cmp);
        const int64_t *to =
            bsearch(&(int64_t){(int64_t)q->bufs[b].end + 1}, pt, np, sizeof *pt, lay_i64_cmp);
        s->sa[b] = (size_t)(at - pt);
        s->sb[b] = (size_t)(to - pt);
    }
    /* overlaps among the free buffers: sweep by start */
    lay_key *by = xmallocarray(n, sizeof *by);
    for (size_t b = 0; b < n; b++) by[b] = (lay_key){s->sa[b], s->sb[b], 0, b};
    qsort(by, n, sizeof *by, lay_key_cmp);
    s->ov_begin = xcalloc(n + 1, sizeof *s->ov_begin);
    size_t pairs = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n && by[j].k1 < by[i].k2; j++) {
            s->ov_begin[by[i].idx + 1]++;
            s->ov_begin[by[j].idx + 1]++;
            pairs++;
        }
    for (size_t b = 0; b < n; b++) s->ov_begin[b + 1] += s->ov_begin[b];
    s->ov = xmallocarray(2 * pairs + 1, sizeof *s->ov);
    size_t *pos = xmallocarray(n + 1, sizeof *pos);
    for (size_t b = 0; b < n; b++) pos[b] = s->ov_begin[b];
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n && by[j].k1 < by[i].k2; j++) {
            s->ov[pos[by[i].idx]++] = (uint32_t)by[j].idx;
            s->ov[pos[by[j].idx]++] = (uint32_t)by[i].idx;
        }
    free(pos);
    free(by);
    /* obstacles per free buffer and per section, from the pins in offset
     * order (sorted once: merging then needs no sort) */
    pin_iv *tmp = xmallocarray(q->npins + 1, sizeof *tmp);
    lay_key *po = xmallocarray(q->npins + 1, sizeof *po);
    for (size_t j = 0; j < q->npins; j++)
        po[j] = (lay_key){q->pin_off[j], lay_round_up(q->pins[j].size, q->align), 0, j};
    qsort(po, q->npins, sizeof *po, lay_key_cmp);
    size_t total = 0, capb = 1024, caps = 1024;
    s->ob_begin = xcalloc(n + 1, sizeof *s->ob_begin);
    s->ob = xmallocarray(capb, sizeof *s->ob);
    int ok = 1;
    for (size_t b = 0; b < n && ok; b++) {
        size_t m = 0;
        for (size_t r = 0; r < q->npins; r++) {
            size_t j = po[r].idx;
            if (po[r].k2 && pin_meets(&q->pins[j], &q->bufs[b]))
                tmp[m++] = (pin_iv){po[r].k1, po[r].k1 + po[r].k2};
        }
        m = pin_merge(tmp, m);
        if (total + m > PIN_MAX_INTERVALS) ok = 0;
        while (total + m > capb) capb *= 2;
        s->ob = xreallocarray(s->ob, capb, sizeof *s->ob);
        memcpy(s->ob + total, tmp, m * sizeof *tmp);
        total += m;
        s->ob_begin[b + 1] = total;
    }
    s->so_begin = xcalloc(s->nsec + 1, sizeof *s->so_begin);
    s->so = xmallocarray(caps, sizeof *s->so);
    size_t ts = 0;
    for (size_t k = 0; k < s->nsec && ok; k++) {
        layout_buffer sec = {1, (int32_t)pt[k], (int32_t)(pt[k + 1] - 1)};
        size_t m = 0;
        for (size_t r = 0; r < q->npins && po[r].k1 < capacity; r++) {
            size_t j = po[r].idx;
            if (po[r].k2 && pin_meets(&q->pins[j], &sec)) {
                uint64_t hi = po[r].k1 + po[r].k2;
                tmp[m++] = (pin_iv){po[r].k1, hi < capacity ? hi : capacity};
            }
        }
        m = pin_merge(tmp, m);
        if (total + ts + m > PIN_MAX_INTERVALS) ok = 0;
        while (ts + m > caps) caps *= 2;
        s->so = xreallocarray(s->so, caps, sizeof *s->so);
        memcpy(s->so + ts, tmp, m * sizeof *tmp);
        ts += m;
        s->so_begin[k + 1] = ts;
    }
    free(tmp);
    free(po);
    free(pt);
    s->so_pre = xmallocarray(ts + 1, sizeof *s->so_pre);
    s->so_pre[0] = 0;
    for (size_t i = 0; i < ts; i++) s->so_pre[i + 1] = s->so_pre[i] + (s->so[i].hi - s->so[i].lo);
    s->pinned = xmallocarray(s->nsec + 1, sizeof *s->pinned);
    for (size_t k = 0; k < s->nsec; k++)
        s->pinned[k] = s->so_pre[s->so_begin[k + 1]] - s->so_pre[s->so_begin[k]];
    s->off = xmallocarray(n, sizeof *s->off);
    s->base = xmallocarray(n, sizeof *s->base);
    s->minoff = xmallocarray(n, sizeof *s->minoff);
    s->rank = xmallocarray(n, sizeof *s->rank);
    s->solution = xmallocarray(n, sizeof *s->solution);
    s->floor = xmallocarray(s->nsec + 1, sizeof *s->floor);
    s->total = xmallocarray(s->nsec + 1, sizeof *s->total);
    return ok;
}

static void pin_free(pin_search *s) {
    free(s->sz);
    free(s->steps);
    free(s->sa);
    free(s->sb);
    free(s->ob_begin);
    free(s->ob);
    free(s->so_begin);
    free(s->so);
    free(s->so_pre);
    free(s->pinned);
    free(s->ov_begin);
    free(s->ov);
    free(s->off);
    free(s->base);
    free(s->minoff);
    free(s->rank);
    free(s->solution);
    free(s->floor);
    free(s->total);
    free(s->trail.log);
}

/* The preorders: 0 the hint's offsets (when given), 1 size, 2 lifetime,
 * 3 area, 4 the busiest section along the lifetime; ties by size, then
 * index. */
#define PIN_ORDERS 5

static void pin_rank(pin_search *s, int order) {
    lay_key *k = xmallocarray(s->n, sizeof *k);
    for (size_t b = 0; b < s->n; b++) {
        uint64_t busiest = 0;
        for (size_t c = s->sa[b]; c < s->sb[b]; c++)
            if (s->total[c] > busiest) busiest = s->total[c];
        double area = (double)s->sz[b] * (double)s->steps[b];
        uint64_t abits = area < 1.8e19 ? (uint64_t)area : UINT64_MAX;
        switch (order) {
        case 0: k[b] = (lay_key){s->q->hint[b], ~s->sz[b], 0, b}; break;
        case 1: k[b] = (lay_key){~s->sz[b], ~s->steps[b], 0, b}; break;
        case 2: k[b] = (lay_key){~s->steps[b], ~s->sz[b], 0, b}; break;
        case 3: k[b] = (lay_key){~abits, ~s->sz[b], 0, b}; break;
        default: k[b] = (lay_key){~busiest, ~s->steps[b], ~s->sz[b], b}; break;
        }
    }
    qsort(k, s->n, sizeof *k, lay_key_cmp);
    for (size_t i = 0; i < s->n; i++) s->rank[k[i].idx] = i;
    free(k);
}

static void pin_reset(pin_search *s) {
    for (size_t k = 0; k < s->nsec; k++) s->floor[k] = s->total[k] = 0;
    for (size_t b = 0; b < s->n; b++) {
        s->off[b] = PIN_NONE;
        s->base[b] = 0;
        s->minoff[b] = pin_first_fit(s, b, 0);
        for (size_t k = s->sa[b]; k < s->sb[b]; k++) s->total[k] += s->sz[b];
    }
    s->trail.len = 0;
}

lay_status lay_pinned(const lay_pinned_problem *q, uint64_t capacity, lay_budget *bud,
                      uint64_t *offsets, uint64_t *nodes) {
    ROAMC_ASSERT(q->align >= 1);
    bud->stop = LAY_STOP_NONE;
    if (nodes) *nodes = 0;
    if (q->n == 0) return LAY_FOUND;
    pin_search s;
    /* setting up scans every (free buffer, pin) pair */
    uint64_t setup = (uint64_t)(q->n + 1) * (q->npins + 1) / 16 + q->n;
    if (bud->work < setup) {
        bud->work = 0;
        bud->stop = LAY_STOP_WORK;
        return LAY_GAVE_UP;
    }
    bud->work -= setup;
    if (!pin_setup(&s, q, capacity)) {
        pin_free(&s);
        bud->stop = LAY_STOP_SIZE;
        return LAY_GAVE_UP;
    }
    s.bud = bud;
    lay_status result = LAY_GAVE_UP;
    int first = q->hint ? 0 : 1;
    for (long long limit = 2 * (long long)q->n; result == LAY_GAVE_UP; limit *= 2) {
        for (int h = first; h < PIN_ORDERS && result == LAY_GAVE_UP; h++) {
            pin_reset(&s);
            pin_rank(&s, h);
            s.nodes_left = limit;
            pin_rc rc = pin_dfs(&s, 0, 0, s.n);
            if (rc == PIN_FOUND) {
                memcpy(offsets, s.solution, s.n * sizeof *offsets);
                result = LAY_FOUND;
            } else if (rc == PIN_NOTFOUND) {
                result = LAY_INFEASIBLE;
            } else if (s.out_of_work || s.timed_out || roamc_now() > bud->deadline) {
                bud->stop = s.out_of_work ? LAY_STOP_WORK : LAY_STOP_TIME;
                goto done;
            }
        }
        if (limit > (1LL << 52)) break;
    }
done:
    if (nodes) *nodes = s.nodes;
    pin_free(&s);
    return result;
}
