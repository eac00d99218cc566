/* layout_solve.c — `roamc layout`'s exact solver: decide a capacity, or
 * minimise the height by probing capacities with lay_search_ex.
 *
 * Minimising: the proven lower bound starts at the live-size bound (rounded
 * up to align: aligned layouts move in steps of align) and the incumbent at
 * the warm start.  The first probe is at the bound, where zero-slack
 * problems are solved; then a binary search between the two.  A probe that
 * finds a layout lowers the incumbent; one that proves none exists raises
 * the bound; one that gives up leaves the bound and moves the search above
 * that capacity (later probes try heights the search can decide).  The
 * answer is optimal when the bound meets the incumbent.
 *
 * Time: each probe may take half of what is left (the first one too), so
 * an undecidable capacity does not eat the whole limit, and the limit is
 * used to the end while the answer is not proven.  A work budget, when
 * given, is shared the same way and makes the answer deterministic.
 */
#include "layout.h"
#include "layout_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void layout_solve_defaults(layout_solve_opts *o) {
    memset(o, 0, sizeof *o);
    o->time_limit_s = 10.0;
    lay_bnb_defaults(&o->rules); /* energy off, as in plans */
}

/* A zero-slack probe (cap at the live-size bound): the sweep in time order
 * first, with half of the time left (all of it when it is the only engine).
 * Only when asked for (--engine sweep): on the zero-slack benchmarks
 * (gen_brick, gen_perfect) it closed nothing the other engines do not, so
 * by default it would only take their time.  Not under a work budget (it
 * stops on the clock only).  Returns 1 when it found a layout (in cand). */
static int solve_sweep(const layout_buffer *bufs, size_t n, uint64_t align, uint64_t cap,
                       const layout_solve_opts *o, double deadline, uint64_t *cand,
                       layout_solve_result *r) {
    if (o->work || !(o->engines & LAYOUT_ENGINE_SWEEP)) return 0;
    double now = roamc_now();
    int alone = o->engines == LAYOUT_ENGINE_SWEEP;
    double dl = isinf(deadline) ? now + 5.0 : alone ? deadline : now + (deadline - now) / 2;
    uint64_t nodes = 0;
    lay_status rc = lay_sweep(bufs, n, align, cap, dl, cand, &nodes);
    r->nodes += nodes;
    return rc == LAY_FOUND && layout_validate(bufs, n, cand, align, NULL, NULL) == 0 &&
           layout_height(bufs, n, cand) <= cap;
}

/* One probe of capacity cap with half of the work and time left. */
static lay_status solve_probe(const layout_buffer *bufs, size_t n, uint64_t align, uint64_t cap,
                              const layout_solve_opts *o, const lay_search_opts *so,
                              uint64_t *work_left, double deadline, uint64_t *cand,
                              layout_solve_result *r, int last) {
    uint64_t w = UINT64_MAX;
    if (o->work) {
        w = last ? *work_left : *work_left / 2;
        *work_left -= w;
    }
    double now = roamc_now();
    double dl = isinf(deadline) || last ? deadline : now + (deadline - now) / 2;
    lay_bnb_stats st;
    int cut = 0;
    uint64_t w0 = w;
    int rc = lay_search_ex(bufs, n, align, cap, &w, dl, 5 * LAYOUT_SEARCH_MAX_BUFFERS, cand, &cut,
                           so, &st);
    if (o->work) *work_left += w; /* unspent */
    (void)w0;
    r->nodes += st.nodes;
    r->probes++;
    if (rc == LAY_GAVE_UP && (cut || roamc_now() > deadline)) r->stopped_by_time = 1;
    return (lay_status)rc;
}

layout_solve_status layout_solve(const layout_buffer *bufs, size_t n, uint64_t align,
                                 const uint64_t *warm_offsets, const layout_solve_opts *o,
                                 uint64_t *offsets, layout_solve_result *r) {
    memset(r, 0, sizeof *r);
    lay_search_opts so;
    lay_search_defaults(&so);
    if (o->engines) so.engines = o->engines & (LAYOUT_ENGINE_SKYLINE | LAYOUT_ENGINE_BNB);
    so.rules = o->rules;
    double deadline = o->time_limit_s > 0 ? roamc_now() + o->time_limit_s : INFINITY;
    uint64_t work_left = o->work;
    uint64_t *cand = xmallocarray(n, sizeof *cand);
    memcpy(offsets, warm_offsets, n * sizeof *offsets);
    uint64_t best = layout_height(bufs, n, offsets);
    uint64_t lb = lay_round_up(layout_live_peak(bufs, n), align);
    r->height = best;
    r->lower_bound = lb;
    int need_work = o->work > 0;

    if (o->capacity > 0) {
        if (best <= o->capacity) {
            r->status = best <= lb ? LAYOUT_SOLVE_OPTIMAL : LAYOUT_SOLVE_FEASIBLE;
        } else if (lb > o->capacity) {
            r->status = LAYOUT_SOLVE_INFEASIBLE;
        } else {
            uint64_t cap = o->capacity / align * align;
            lay_status rc = cap < lb ? LAY_INFEASIBLE
                            : solve_sweep(bufs, n, align, cap, o, deadline, cand, r) ? LAY_FOUND
                            : !so.engines                                            ? LAY_GAVE_UP
                                          : solve_probe(bufs, n, align, cap, o, &so, &work_left,
                                                        deadline, cand, r, 1);
            if (rc == LAY_FOUND && layout_validate(bufs, n, cand, align, NULL, NULL) == 0) {
                memcpy(offsets, cand, n * sizeof *offsets);
                r->height = best = layout_height(bufs, n, cand);
                r->status = best <= lb ? LAYOUT_SOLVE_OPTIMAL : LAYOUT_SOLVE_FEASIBLE;
            } else if (rc == LAY_INFEASIBLE) {
                r->lower_bound = o->capacity + 1;
                r->status = LAYOUT_SOLVE_INFEASIBLE;
            } else {
                r->status = LAYOUT_SOLVE_STOPPED;
            }
        }
        free(cand);
        return r->status;
    }

    /* minimise */
    uint64_t try_lo = lb; /* lowest capacity worth a probe */
    while (lb < best && try_lo < best) {
        if (roamc_now() > deadline) {
            r->stopped_by_time = 1;
            break;
        }
        if (need_work && work_left < 1000) break;
        uint64_t hi = best - align; /* beat the incumbent */
        uint64_t mid = r->probes == 0 ? try_lo : lay_round_up(try_lo + (hi - try_lo) / 2, align);
        if (mid > hi) mid = hi;
        if (mid < try_lo) break;
        lay_status rc =
            r->probes == 0 && solve_sweep(bufs, n, align, mid, o, deadline, cand, r) ? LAY_FOUND
            : !so.engines
                ? LAY_GAVE_UP
                : solve_probe(bufs, n, align, mid, o, &so, &work_left, deadline, cand, r, 0);
        if (!so.engines) r->probes++;
        if (rc == LAY_FOUND && layout_validate(bufs, n, cand, align, NULL, NULL) == 0 &&
            layout_height(bufs, n, cand) < best) {
            memcpy(offsets, cand, n * sizeof *offsets);
            best = layout_height(bufs, n, cand);
        } else if (rc == LAY_INFEASIBLE) {
            if (mid + align > lb) lb = mid + align;
            if (try_lo < lb) try_lo = lb;
        } else {
            try_lo = mid + align; /* undecided: look higher */
        }
    }
    r->height = best;
    r->lower_bound = lb < best ? lb : best;
    r->status = lb >= best ? LAYOUT_SOLVE_OPTIMAL : LAYOUT_SOLVE_STOPPED;
    free(cand);
    return r->status;
}
