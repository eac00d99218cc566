/* layout_bound.c — a lower bound on the height stronger than the live size
 * (layout_lower_bound, layout.h): exact sub-problems at the busiest steps.
 *
 * Why it holds.  Take a window of time [ta, tb] and the buffers whose
 * lifetime meets it, each cut to the window.  Any layout of the whole
 * problem, restricted to those buffers, is a layout of the cut problem
 * with the same offsets and no greater height (two cut buffers that meet
 * met before the cut).  So when the exact search (lay_search) proves that
 * no layout of the cut problem fits in c bytes, none of the whole problem
 * does either.  Heights: every offset and size is a multiple of align, and
 * a layout pushed down (each buffer at 0 or on a buffer it meets) is no
 * higher and has a height that is a sum of sizes, a multiple of their gcd
 * (lay_reduce's unit); so the minimum is at least c + 1 rounded up to that
 * unit.
 *
 * Where it helps.  The live-size bound is the largest load of one step;
 * a window never lowers it, and it rises above it when the buffers around
 * a busy step cannot be stacked without a hole (a buffer that must sit
 * above one that ends, below one that starts: the classic gaps of dynamic
 * storage allocation).  The windows tried are centred on the busiest
 * sections, by decreasing load (ties: earlier first), widened by a quarter
 * (a section at least) on each side while they hold at most LB_MAX_BUFFERS buffers; a
 * window whose cut problem fits at the current bound is widened (more
 * buffers, perhaps a contradiction); one whose search gives up ends the
 * centre (wider is harder).  Each search gets a share of the work, so the
 * bound is the same on every machine unless the deadline cuts it.
 *
 * What it costs: a scan of the buffers per window (O(n)), and the searches
 * on at most LB_MAX_BUFFERS buffers.
 */
#include "layout.h"
#include "layout_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Most buffers of a window's cut problem: the search must be able to prove
 * infeasibility there, which it does on tens of buffers with slack, rarely
 * on hundreds. */
#define LB_MAX_BUFFERS 160
/* Busiest sections used as centres. */
#define LB_CENTRES 8
/* A search's share of the work left: 1/LB_SHARE_DEN. */
#define LB_SHARE_DEN 8

/* The time sections of p's non-empty buffers and their loads. */
typedef struct lb_sections {
    int64_t *bp; /* nsec + 1 boundaries: section k is steps [bp[k], bp[k+1]) */
    size_t nsec;
    uint64_t *load; /* per section: rounded sizes live there */
} lb_sections;

static void lb_sections_init(lb_sections *s, const layout_problem *p) {
    const size_t n = p->n;
    memset(s, 0, sizeof *s);
    s->bp = xmallocarray(2 * n + 1, sizeof *s->bp);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (p->bufs[i].size == 0) continue;
        s->bp[m++] = p->bufs[i].start;
        s->bp[m++] = (int64_t)p->bufs[i].end + 1;
    }
    qsort(s->bp, m, sizeof *s->bp, lay_i64_cmp);
    size_t nb = 0;
    for (size_t i = 0; i < m; i++)
        if (nb == 0 || s->bp[nb - 1] != s->bp[i]) s->bp[nb++] = s->bp[i];
    s->nsec = nb > 0 ? nb - 1 : 0;
    uint64_t *diff = xcalloc(nb + 1, sizeof *diff);
    for (size_t i = 0; i < n; i++) {
        if (p->bufs[i].size == 0) continue;
        uint64_t sz = lay_round_up(p->bufs[i].size, p->align);
        diff[lay_find_step(s->bp, nb, p->bufs[i].start)] += sz;
        diff[lay_find_step(s->bp, nb, (int64_t)p->bufs[i].end + 1)] -= sz; /* wraps back */
    }
    s->load = xmallocarray(s->nsec ? s->nsec : 1, sizeof *s->load);
    uint64_t run = 0;
    for (size_t k = 0; k < s->nsec; k++) {
        run += diff[k];
        s->load[k] = run;
    }
    free(diff);
}

static void lb_sections_free(lb_sections *s) {
    free(s->bp);
    free(s->load);
}

/* The cut problem of sections [a, b] into sub (its buffers, at most cap):
 * returns their number, or SIZE_MAX when more than cap meet the window. */
static size_t lb_cut(const layout_problem *p, const lb_sections *s, size_t a, size_t b,
                     layout_buffer *sub, size_t cap) {
    int64_t ta = s->bp[a], tb = s->bp[b + 1] - 1;
    size_t k = 0;
    for (size_t i = 0; i < p->n; i++) {
        const layout_buffer *x = &p->bufs[i];
        if (x->size == 0 || x->end < ta || x->start > tb) continue;
        if (k == cap) return SIZE_MAX;
        sub[k++] = (layout_buffer){lay_round_up(x->size, p->align),
                                   (int32_t)(x->start < ta ? ta : x->start),
                                   (int32_t)(x->end > tb ? tb : x->end)};
    }
    return k;
}

/* One centre: widens the window around section c while the cut problem
 * fits at *bound and stays small; raises *bound while the search proves
 * the cut problem does not fit in it.  Returns 0 when the budget ran out
 * (bud->stop says which). */
static int lb_centre(const layout_problem *p, const lb_sections *s, size_t c, uint64_t unit,
                     uint64_t upper, uint64_t *bound, lay_budget *bud, layout_bound_stats *st) {
    layout_buffer *sub = xmallocarray(LB_MAX_BUFFERS, sizeof *sub);
    uint64_t *off = xmallocarray(LB_MAX_BUFFERS, sizeof *off);
    size_t a = c, b = c, last = 0;
    int ok = 1;
    for (;;) {
        size_t k = lb_cut(p, s, a, b, sub, LB_MAX_BUFFERS);
        if (k == SIZE_MAX) break;
        if (k > last) { /* a window with new buffers: search it */
            last = k;
            lay_search_opts o;
            lay_search_defaults(&o);
            lay_status rc = LAY_FOUND;
            while (*bound < upper) {
                lay_budget step = {bud->work / LB_SHARE_DEN, bud->deadline, LAY_STOP_NONE};
                if (step.work < 1000) {
                    bud->stop = LAY_STOP_WORK;
                    ok = 0;
                    break;
                }
                bud->work -= step.work;
                rc = lay_search(&(layout_problem){sub, k, p->align}, *bound, &o, &step, off, NULL);
                bud->work += step.work;
                st->searches++;
                if (step.stop == LAY_STOP_TIME) {
                    bud->stop = LAY_STOP_TIME;
                    ok = 0;
                }
                if (rc != LAY_INFEASIBLE) break;
                *bound = lay_round_up(*bound + 1, unit);
                st->raised++;
                st->window_buffers = k;
                st->window_start = s->bp[a];
                st->window_end = s->bp[b + 1] - 1;
            }
            if (!ok || rc == LAY_GAVE_UP || *bound >= upper) break;
        }
        if (a == 0 && b + 1 >= s->nsec) break;
        /* an eighth wider on each side (a section at least), a quarter in
         * all: few scans of the buffers per centre */
        size_t r = (b - a) / 8 + 1;
        a = a > r ? a - r : 0;
        b = b + r < s->nsec ? b + r : s->nsec - 1;
    }
    free(sub);
    free(off);
    return ok;
}

uint64_t layout_lower_bound(const layout_problem *p, uint64_t upper, const layout_effort *effort,
                            layout_bound_stats *st) {
    layout_bound_stats dummy;
    if (!st) st = &dummy;
    memset(st, 0, sizeof *st);
    uint64_t unit = 0;
    for (size_t i = 0; i < p->n; i++)
        if (p->bufs[i].size) unit = roamc_gcd(unit, lay_round_up(p->bufs[i].size, p->align));
    if (unit == 0) return 0;
    uint64_t bound = lay_round_up(layout_live_peak(p->bufs, p->n), unit);
    st->live = layout_live_peak(p->bufs, p->n);
    lay_budget bud = {effort && effort->work ? effort->work : LAYOUT_DEFAULT_WORK / 10,
                      effort && effort->time_limit_s > 0 ? roamc_now() + effort->time_limit_s
                                                         : INFINITY,
                      LAY_STOP_NONE};
    const uint64_t work0 = bud.work;
    if (bound < upper) {
        lb_sections s;
        lb_sections_init(&s, p);
        /* centres: the busiest sections, by load then time */
        lay_key *by = xmallocarray(s.nsec ? s.nsec : 1, sizeof *by);
        for (size_t k = 0; k < s.nsec; k++) by[k] = (lay_key){~s.load[k], 0, 0, k};
        qsort(by, s.nsec, sizeof *by, lay_key_cmp);
        for (size_t j = 0; j < s.nsec && j < LB_CENTRES && bound < upper; j++) {
            st->centres++;
            if (!lb_centre(p, &s, by[j].idx, unit, upper, &bound, &bud, st)) break;
        }
        free(by);
        lb_sections_free(&s);
    }
    st->stop = bud.stop == LAY_STOP_TIME   ? LAYOUT_STOP_TIME
               : bud.stop == LAY_STOP_WORK ? LAYOUT_STOP_WORK
                                           : 0;
    st->work_spent = work0 - bud.work;
    st->bound = bound;
    return bound;
}

const char *layout_stop_name(layout_stop s) {
    switch (s) {
    case LAYOUT_STOP_PROOF: return "proof";
    case LAYOUT_STOP_WORK: return "work budget";
    case LAYOUT_STOP_TIME: return "time limit";
    case LAYOUT_STOP_NO_IMPROVEMENT: return "no more improvement found";
    case LAYOUT_STOP_TOO_LARGE:
        return "no more improvement found (the exact search takes no list this large)";
    }
    return "?";
}
