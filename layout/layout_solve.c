/* layout_solve.c — `roamc layout`'s exact solver: decide a capacity, or
 * minimise the height by probing capacities with lay_search.
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
    o->shares = LAYOUT_SHARES_PORTFOLIO;
}

/* One call of layout_solve: its problem, options, what is left of the
 * work and the time, the scratch layout of the probes and the result. */
typedef struct solve_run {
    const layout_problem *p;
    const layout_solve_opts *o;
    lay_search_opts so; /* the engines and rules of o */
    uint64_t work_left; /* of o->work, when given */
    double deadline;    /* of o->time_limit_s; INFINITY: none */
    uint64_t *cand;     /* a probe's layout */
    layout_solve_result *r;
    int too_large;   /* a probe gave up at once: more buffers than the search takes */
    int out_of_work; /* a probe ran out of o->work */
    int resumed;     /* o->resume was used (by the first probe at its capacity) */
} solve_run;

/* What ended an unproven run (layout_solve_result.stop): the clock when
 * it cut a probe or the loop, the work when it ran out, else the search's
 * own limits (size, node limits): no more improvement found. */
static layout_stop solve_why(const solve_run *x, int work_short) {
    if (x->r->stopped_by_time) return LAYOUT_STOP_TIME;
    if (x->out_of_work || work_short) return LAYOUT_STOP_WORK;
    return x->too_large ? LAYOUT_STOP_TOO_LARGE : LAYOUT_STOP_NO_IMPROVEMENT;
}

/* Where the probe at cap starts: o->resume's strategy when the earlier
 * search it records was of this capacity with the same engines, shares
 * and rules (and no probe used it yet), else the first strategy. */
static lay_search_pos solve_start(solve_run *x, uint64_t cap) {
    const layout_search_mark *m = x->o->resume;
    lay_search_pos pos = {0, 0};
    if (!m || x->resumed || m->capacity != cap || m->engines != x->so.engines ||
        m->shares != x->o->shares || memcmp(&m->rules, &x->so.rules, sizeof m->rules) != 0)
        return pos;
    x->resumed = 1;
    return (lay_search_pos){m->limit, m->next};
}

/* A probe's layout in cand is valid and within cap. */
static int solve_fits(const solve_run *x, uint64_t cap) {
    const layout_problem *p = x->p;
    return layout_validate(p->bufs, p->n, x->cand, p->align, NULL, NULL) == 0 &&
           layout_height(p->bufs, p->n, x->cand) <= cap;
}

/* A zero-slack probe (cap at the live-size bound): the sweep in time order
 * first, with half of the time left (all of it when it is the only engine).
 * Only when asked for (--engine sweep): on the zero-slack benchmarks
 * (gen_brick, gen_perfect) it closed nothing the other engines do not, so
 * by default it would only take their time.  Not under a work budget (it
 * stops on the clock only).  Returns 1 when it found a layout (in cand). */
static int solve_sweep(solve_run *x, uint64_t cap) {
    const layout_solve_opts *o = x->o;
    if (o->work || !(o->engines & LAYOUT_ENGINE_SWEEP)) return 0;
    double now = roamc_now();
    int alone = o->engines == LAYOUT_ENGINE_SWEEP;
    double dl = isinf(x->deadline) ? now + 5.0
                : alone            ? x->deadline
                                   : now + (x->deadline - now) / 2;
    uint64_t nodes = 0;
    lay_status rc = lay_sweep(x->p, cap, dl, x->cand, &nodes);
    x->r->nodes += nodes;
    return rc == LAY_FOUND && solve_fits(x, cap);
}

/* One probe of capacity cap with half of the work and time left (all of
 * it when last). */
static lay_status solve_probe(solve_run *x, uint64_t cap, int last) {
    const int metered = x->o->work > 0;
    lay_budget bud = {UINT64_MAX, x->deadline, LAY_STOP_NONE};
    if (metered) {
        bud.work = last ? x->work_left : x->work_left / 2;
        x->work_left -= bud.work;
    }
    double now = roamc_now();
    if (!isinf(x->deadline) && !last) bud.deadline = now + (x->deadline - now) / 2;
    lay_bnb_stats st;
    lay_search_pos pos = solve_start(x, cap);
    x->so.pos = &pos;
    lay_status rc = lay_search(x->p, cap, &x->so, &bud, x->cand, &st);
    x->so.pos = NULL;
    if (metered) x->work_left += bud.work; /* unspent */
    x->r->nodes += st.nodes;
    x->r->probes++;
    if (rc == LAY_GAVE_UP && (bud.stop == LAY_STOP_TIME || roamc_now() > x->deadline))
        x->r->stopped_by_time = 1;
    if (rc == LAY_GAVE_UP && bud.stop == LAY_STOP_SIZE) x->too_large = 1;
    if (rc == LAY_GAVE_UP && bud.stop == LAY_STOP_WORK) x->out_of_work = 1;
    return rc;
}

layout_solve_status layout_solve(const layout_problem *p, const uint64_t *warm_offsets,
                                 const layout_solve_opts *o, uint64_t *offsets,
                                 layout_solve_result *r) {
    const layout_buffer *bufs = p->bufs;
    const size_t n = p->n;
    const uint64_t align = p->align;
    memset(r, 0, sizeof *r);
    solve_run x = {.p = p,
                   .o = o,
                   .work_left = o->work,
                   .deadline = o->time_limit_s > 0 ? roamc_now() + o->time_limit_s : INFINITY,
                   .cand = xmallocarray(n, sizeof(uint64_t)),
                   .r = r};
    lay_search_defaults(&x.so);
    if (o->engines) x.so.engines = o->engines & (LAYOUT_ENGINE_SKYLINE | LAYOUT_ENGINE_BNB);
    x.so.rules = o->rules;
    lay_search_shares(&x.so, o->shares);
    x.so.max_buffers = 5 * LAYOUT_SEARCH_MAX_BUFFERS;
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
            lay_status rc = cap < lb               ? LAY_INFEASIBLE
                            : solve_sweep(&x, cap) ? LAY_FOUND
                            : !x.so.engines        ? LAY_GAVE_UP
                                                   : solve_probe(&x, cap, 1);
            if (rc == LAY_FOUND && layout_validate(bufs, n, x.cand, align, NULL, NULL) == 0) {
                memcpy(offsets, x.cand, n * sizeof *offsets);
                r->height = best = layout_height(bufs, n, x.cand);
                r->status = best <= lb ? LAYOUT_SOLVE_OPTIMAL : LAYOUT_SOLVE_FEASIBLE;
            } else if (rc == LAY_INFEASIBLE) {
                r->lower_bound = o->capacity + 1;
                r->status = LAYOUT_SOLVE_INFEASIBLE;
            } else {
                r->status = LAYOUT_SOLVE_STOPPED;
                r->stop = solve_why(&x, 0);
            }
        }
        free(x.cand);
        return r->status;
    }

    /* minimise: first the window bound (layout_bound.c) on a tenth of the
     * work or time, which may prove the incumbent optimal or spare the
     * probes below it */
    if (lb < best) {
        layout_effort be = {o->work ? o->work / 10 : 0, 0, 0, LAYOUT_SHARES_EQUAL, NULL};
        if (!isinf(x.deadline)) be.time_limit_s = (x.deadline - roamc_now()) / 10;
        if (!(be.time_limit_s > 0) && !isinf(x.deadline)) be.time_limit_s = 1e-9;
        uint64_t wb = layout_lower_bound(p, best, &be, &r->bound);
        if (o->work) x.work_left -= r->bound.work_spent;
        if (r->bound.stop == LAYOUT_STOP_TIME) r->stopped_by_time = 1;
        if (wb > lb) lb = wb;
    }
    uint64_t try_lo = lb; /* lowest capacity worth a probe */
    int work_short = 0;   /* the loop ended for want of work */
    while (lb < best && try_lo < best) {
        if (roamc_now() > x.deadline) {
            r->stopped_by_time = 1;
            break;
        }
        if (need_work && x.work_left < 1000) {
            work_short = 1;
            break;
        }
        uint64_t hi = best - align; /* beat the incumbent */
        uint64_t mid = r->probes == 0 ? try_lo : lay_round_up(try_lo + (hi - try_lo) / 2, align);
        if (mid > hi) mid = hi;
        if (mid < try_lo) break;
        lay_status rc = r->probes == 0 && solve_sweep(&x, mid) ? LAY_FOUND
                        : !x.so.engines                        ? LAY_GAVE_UP
                                                               : solve_probe(&x, mid, 0);
        if (!x.so.engines) r->probes++;
        if (rc == LAY_FOUND && layout_validate(bufs, n, x.cand, align, NULL, NULL) == 0 &&
            layout_height(bufs, n, x.cand) < best) {
            memcpy(offsets, x.cand, n * sizeof *offsets);
            best = layout_height(bufs, n, x.cand);
        } else if (rc == LAY_INFEASIBLE) {
            if (mid + align > lb) lb = mid + align;
            if (try_lo < lb) try_lo = lb;
        } else if (x.too_large) {
            break; /* every probe would give up the same way */
        } else {
            try_lo = mid + align; /* undecided: look higher */
        }
    }
    r->height = best;
    r->lower_bound = lb < best ? lb : best;
    r->status = lb >= best ? LAYOUT_SOLVE_OPTIMAL : LAYOUT_SOLVE_STOPPED;
    r->stop = r->status == LAYOUT_SOLVE_OPTIMAL ? LAYOUT_STOP_PROOF : solve_why(&x, work_short);
    free(x.cand);
    return r->status;
}
