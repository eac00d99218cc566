/* layout_exact.c — the exact layout step of ROAM (paper section IV-B/D).
 *
 * layout_exact runs, within
 * one work budget:
 *   1. the warm start and the heuristics; the best is the incumbent;
 *      done if it meets the live-size lower bound (or the goal);
 *   1a. when the incumbent is within 1% of the bound, the canonical branch
 *      and bound alone (layout_bnb.c) at the lower bound, on a small share
 *      of the work (EXACT_BNB_FIRST_*): on the committed models, every plan
 *      whose layout the search at the bound finds at all, it finds there,
 *      in its first round, at a few percent of the cost of the round
 *      robin's skyline strategies that come first in step 2 (which then
 *      ran out of work on vit_b_16_b1);
 *   1-. under LAYOUT_SHARES_PORTFOLIO (roamc layout; not plans), on lists
 *      of more than LAYOUT_SEARCH_MAX_BUFFERS buffers whose reduced
 *      problem is small enough for steps 2-5, lay_improve
 *      (layout_improve.c) first, on 1/EXACT_IMPROVE_FIRST_DEN of the work:
 *      its windows searched around pinned buffers took
 *      mobilenet_v2 b16 --grad-accum 8 in program order (6128 buffers)
 *      from 0.26% to 0.017% above the bound in 0.5 s, where step 2 ran
 *      10 s without a layout (none of the committed models' lists, the
 *      plans', is this large);
 *   1b. the first EXACT_QUICK_PLACEMENTS placements of step 4's local
 *      search (done if they reach the bound: before step 1a, that is how
 *      most plans got there, in a fraction of the time the exact steps
 *      took; since 1a, on the committed models' 51 plans with a layout
 *      stage, step 1a reaches the bound wherever 1b would);
 *   2. layout_search for a layout at the lower bound (a complete
 *      branch and bound, fast on tight instances);
 *   3. the GLPK model of the paper (ilp_layout.h) when it is small enough
 *      (LAYOUT_ILP_MAX_PAIRS conflicting pairs): an offset per buffer, a
 *      binary per conflicting pair (big-M disjunction), minimize the height,
 *      seeded with the incumbent and stopped as soon as it meets the bound;
 *   4. a local search over the order in which first fit places the
 *      buffers, from the incumbent's (half of the work left);
 *   5. with the work left, a bisection on the height between what is proved
 *      impossible and the incumbent, each probe a layout_search (only on
 *      problems of at most EXACT_BISECT_MAX_BUFFERS buffers, and only
 *      without a goal: its probes lie above the goal).
 *
 * Why work and not time: a plan must be the same on every run and machine.
 * Every step counts what it does (search nodes, GLPK branch-and-bound
 * nodes) against a budget split between the steps in fixed integer shares,
 * so where each step stops does not depend on the clock.  The time limit
 * is kept as a backstop for pathological inputs; when it fires the result
 * says so (layout_result.stopped_by_time).
 * Every answer is checked with layout_validate before it replaces the
 * incumbent, so the result is always a valid layout.
 *
 * Both the ILP and the search work on the reduced problem of lay_reduce
 * (buffers conflicting with all others stacked at the bottom, sizes in
 * units), which has the same optimum and fewer pairs.
 *
 * The GLPK model itself is in ilp/ilp_layout.c (ilp_layout.h: ilp_layout_solve),
 * with the order model; this file translates the reduced problem to it.
 */
#include "layout.h"
#include "layout_internal.h"
#include "ilp_layout.h" /* the GLPK model: ilp_layout_solve */

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Shares of the work budget for steps 2, 3 and 4, as fractions num/den of
 * what is left; step 5 gets the rest, a third of what is left per probe;
 * step 1a may take 1/EXACT_BNB_FIRST_DEN of the whole, and at most
 * EXACT_BNB_FIRST_WORK_PER_BUFFER units a buffer of the reduced problem, and
 * gives back what it does not spend.  Integers, so the split is the same
 * everywhere. */
#define EXACT_BNB_FIRST_DEN 10
/* Step 1a's cap per buffer: a node limit of 4 a buffer starts the round
 * robin, and a node of the branch and bound costs a few hundred units on
 * the committed models (236 on vit_b_16_b1), so this is about six of the
 * eight strategies of its first round; vit_b_16_b1 needs 3,980 a buffer
 * (its fifth strategy), the others under 300.  Without the cap, on
 * instances that the skyline search solves in its first round (gen_perfect,
 * n = 300) the branch and bound alone went on through later rounds for up
 * to a second before it; with it, about 0.1 s. */
#define EXACT_BNB_FIRST_WORK_PER_BUFFER 6144
/* Step 1a runs only when the incumbent is within 1/100 of the bound.  On
 * the committed models' plans the incumbent (tree layout or heuristics) is
 * within 0.25% of it whenever step 1a runs, and there the branch and bound,
 * which puts each buffer at the lowest offset its neighbours allow, goes
 * to the bound in its first round; on the generated instances (gen_perfect,
 * gen_brick: heuristics 1.8% to 38% above) it wanders, and the work units
 * undercount its time there (2.8M units took 2.6 s on gen_perfect n = 450
 * seed 5, which the skyline search of step 2 solves in milliseconds). */
#define EXACT_BNB_FIRST_GAP_DEN 100
#define EXACT_SEARCH_SHARE_NUM 2
#define EXACT_SEARCH_SHARE_DEN 5
#define EXACT_GLPK_SHARE_NUM 1
#define EXACT_GLPK_SHARE_DEN 2
#define EXACT_REORDER_SHARE_NUM 1
#define EXACT_REORDER_SHARE_DEN 2
#define EXACT_PROBE_SHARE_DEN 3
/* Probes below this much work are not worth starting. */
#define EXACT_MIN_PROBE_WORK 1000
/* Step 5 runs only on problems of at most this many buffers after the
 * reduction.  Its probes search at a capacity with slack above the bound,
 * where the exact engines seldom reach a leaf on large problems: on the
 * committed models planned in roam, program and lescea order, step 5 ran
 * on three plans (vit_b_16_b1 default, efficientnet_b0_b1 and _b32 in
 * program order; 942 and 1291 buffers), none of its 28 probes found a
 * layout, and it took a third of their layout time. */
#define EXACT_BISECT_MAX_BUFFERS 500
/* Step 1-'s share of the work (lay_improve gives back what it leaves). */
#define EXACT_IMPROVE_FIRST_DEN 4

/* A step's budget: num/den of the work left in bud (taken out of it) and
 * bud's deadline.  The step hands back what it did not spend with
 * exact_refund. */
static lay_budget exact_take(lay_budget *bud, uint64_t num, uint64_t den) {
    uint64_t w = bud->work / den * num + bud->work % den * num / den;
    bud->work -= w;
    return (lay_budget){w, bud->deadline, LAY_STOP_NONE};
}

/* Gives the work a step did not spend back to bud, and marks bud cut by
 * the deadline when the step was. */
static void exact_refund(lay_budget *bud, const lay_budget *step) {
    bud->work += step->work;
    if (step->stop == LAY_STOP_TIME) bud->stop = LAY_STOP_TIME;
}

/* The incumbent: the best valid layout so far. */
typedef struct exact_best {
    uint64_t *offsets;
    uint64_t height;
} exact_best;

/* Takes cand when it is valid and lower than the incumbent. */
static void exact_offer(exact_best *best, const layout_problem *p, const uint64_t *cand) {
    if (layout_validate(p->bufs, p->n, cand, p->align, NULL, NULL) != 0) return;
    uint64_t h = layout_height(p->bufs, p->n, cand);
    if (h < best->height) {
        best->height = h;
        memcpy(best->offsets, cand, p->n * sizeof *cand);
    }
}

/* ------------------------------------------------------------------------ */
/* The GLPK model (ilp/ilp_layout.c) on the reduced problem                 */

/* The conflicting pairs of the reduced problem (ilp_layout_pairs): NULL with
 * *np = SIZE_MAX when there are more than LAYOUT_ILP_MAX_PAIRS. */
static ilp_layout_pair *exact_pairs(const layout_buffer *bufs, const lay_reduced *r, size_t *np) {
    int32_t *start = xmallocarray(r->n, sizeof *start);
    int32_t *end = xmallocarray(r->n, sizeof *end);
    for (size_t a = 0; a < r->n; a++) {
        start[a] = bufs[r->orig[a]].start;
        end[a] = bufs[r->orig[a]].end;
    }
    ilp_layout_pair *pairs = ilp_layout_pairs(start, end, r->n, LAYOUT_ILP_MAX_PAIRS, np);
    free(start);
    free(end);
    return pairs;
}

/* Runs the GLPK model on the reduced problem r of p with its conflicting
 * pairs and the lower bound lb (bytes), seeded with the incumbent, on bud
 * (its work decreased by what GLPK spends; its stop set to LAY_STOP_TIME
 * when the deadline cut GLPK, else left).  Offers GLPK's answer to best;
 * returns 1 when GLPK proved optimality, else 0. */
static int exact_glpk(const layout_problem *p, const lay_reduced *r, const ilp_layout_pair *pairs,
                      size_t np, uint64_t lb, lay_budget *bud, exact_best *best) {
    uint64_t *units = xmallocarray(r->n, sizeof *units);
    uint64_t *found = xmallocarray(r->n, sizeof *found);
    for (size_t a = 0; a < r->n; a++) units[a] = (best->offsets[r->orig[a]] - r->base) / r->unit;
    ilp_layout_problem ip = {.n = r->n,
                             .size = r->size,
                             .pairs = pairs,
                             .np = np,
                             .lower_bound = (lb > r->base ? lb - r->base : 0) / r->unit,
                             .incumbent = units};
    int cut = 0;
    ilp_layout_status st = ilp_layout_solve(&ip, &bud->work, bud->deadline, &cut, found);
    if (cut) bud->stop = LAY_STOP_TIME;
    if (st != ILP_LAYOUT_NONE) {
        uint64_t *cand = xmallocarray(p->n, sizeof *cand);
        memcpy(cand, best->offsets, p->n * sizeof *cand);
        for (size_t a = 0; a < r->n; a++) cand[r->orig[a]] = r->base + found[a] * r->unit;
        exact_offer(best, p, cand);
        free(cand);
    }
    free(units);
    free(found);
    return st == ILP_LAYOUT_OPTIMAL;
}

/* ------------------------------------------------------------------------ */
/* Local search over placement orders                                        */

/* Placements of the walk run before the exact steps (1b of layout_exact):
 * enough for the plans whose incumbent the walk took to the bound before
 * step 1a existed (194 on mnasnet1_0_b1, 1 on mobilenet_v2_b32,
 * mnasnet1_0_b32 and efficientnet_b0_b32), a few hundred ms on 2000
 * buffers. */
#define EXACT_QUICK_PLACEMENTS 256

/* Work units of one buffer placed by exact_first_fit (a placement of all buffers
 * then costs about what as many search nodes over a few sections do). */
#define EXACT_PLACE_WORK 16

/* Places the buffers in order, each in the lowest gap that holds it.
 * Returns the height.
 * Two shortcuts that give the same offsets as placing all from scratch
 * (the walk then takes the same path, only faster): the first keep
 * buffers of order go where known[] says (the offsets first fit gave them
 * in an earlier placement of the same prefix: first fit of a prefix does
 * not depend on what follows), and the placement stops as soon as a top
 * passes give_up (the caller rejects such an order anyway); it then
 * returns that top, and off[] is incomplete. */
static uint64_t exact_first_fit(const layout_problem *p, const size_t *order, uint64_t *off,
                                const uint64_t *known, size_t keep, uint64_t give_up) {
    const layout_buffer *bufs = p->bufs;
    const size_t n = p->n;
    const uint64_t align = p->align;
    lay_placer *pl = lay_placer_new(bufs, n, align);
    uint64_t h = 0;
    for (size_t k = 0; k < n; k++) {
        size_t i = order[k];
        if (k < keep && lay_placer_try(pl, i, known[i]))
            off[i] = known[i];
        else
            off[i] = lay_placer_fit(pl, i, 0);
        uint64_t top = bufs[i].size ? off[i] + lay_round_up(bufs[i].size, align) : 0;
        if (top > h) h = top;
        if (h > give_up) break;
    }
    lay_placer_free(pl);
    return h;
}

/* Improves the incumbent when the search cannot: with slack above the
 * bound the search rarely reaches a leaf, but a first-fit placement in
 * the incumbent's offset order gives the incumbent back (or lower), and
 * moving a buffer that touches the top earlier in that order often lowers
 * it.  A move is kept when the height does not grow (plateaus are walked).
 * The walk is resumable: layout_exact runs its first EXACT_QUICK_PLACEMENTS
 * placements before the exact steps (on most plans they reach the bound
 * and the exact steps are skipped) and continues the same walk, from the
 * same state, in step 4; so where the quick part does not reach the bound
 * the walk is the one a single run from the same incumbent would be. */
typedef struct exact_walk {
    size_t n;
    size_t *order, *trial, *tops;
    uint64_t *cur, *off;
    uint64_t h;    /* height of cur, the placement of order */
    uint64_t seed; /* xorshift state */
    int ready;     /* order, cur and h hold a walk in progress */
} exact_walk;

static void exact_walk_init(exact_walk *wk, size_t n) {
    *wk = (exact_walk){.n = n,
                       .order = xmallocarray(n, sizeof(size_t)),
                       .trial = xmallocarray(n, sizeof(size_t)),
                       .tops = xmallocarray(n, sizeof(size_t)),
                       .cur = xmallocarray(n, sizeof(uint64_t)),
                       .off = xmallocarray(n, sizeof(uint64_t))};
}

static void exact_walk_free(exact_walk *wk) {
    free(wk->order);
    free(wk->trial);
    free(wk->tops);
    free(wk->cur);
    free(wk->off);
}

/* Walks over first-fit placements of p from the incumbent's order (or
 * resumes the walk in progress) until the incumbent is at stop_at or
 * bud's work is spent (EXACT_PLACE_WORK a buffer placed); bud->stop is set
 * to LAY_STOP_TIME when the deadline cut it, else left. */
static void exact_walk_run(exact_walk *wk, exact_best *best, const layout_problem *p,
                           uint64_t stop_at, lay_budget *bud) {
    const layout_buffer *bufs = p->bufs;
    const uint64_t align = p->align;
    const size_t n = wk->n;
    if (n < 2) return;
    const uint64_t cost = (uint64_t)EXACT_PLACE_WORK * n;
    if (!wk->ready) {
        if (bud->work < cost) return;
        /* the buffers by incumbent offset, then index */
        lay_key *at = xmallocarray(n, sizeof *at);
        for (size_t i = 0; i < n; i++) at[i] = (lay_key){best->offsets[i], 0, 0, i};
        qsort(at, n, sizeof *at, lay_key_cmp);
        for (size_t k = 0; k < n; k++) wk->order[k] = at[k].idx;
        free(at);
        bud->work -= cost;
        wk->h = exact_first_fit(p, wk->order, wk->cur, NULL, 0, UINT64_MAX);
        exact_offer(best, p, wk->cur);
        /* Any fixed seed keeps the walk deterministic; the walk's luck varies
         * with it (of four seeds tried, two took vit_b_16_b1 under 0.1%). */
        wk->seed = 3;
        wk->ready = 1;
    }
    size_t *order = wk->order, *trial = wk->trial, *tops = wk->tops;
    while (best->height > stop_at && bud->work >= cost) {
        if (roamc_now() > bud->deadline) {
            bud->stop = LAY_STOP_TIME;
            break;
        }
        /* positions in the order of the buffers whose top is the height */
        size_t ntops = 0;
        for (size_t k = 0; k < n; k++) {
            size_t i = order[k];
            if (k > 0 && bufs[i].size && wk->cur[i] + lay_round_up(bufs[i].size, align) == wk->h)
                tops[ntops++] = k;
        }
        bud->work -= cost;
        if (ntops == 0) break; /* only the first buffer reaches the top: nothing to move */
        size_t j = tops[roamc_xorshift64(&wk->seed) % ntops];
        size_t to = (size_t)(roamc_xorshift64(&wk->seed) % j);
        memcpy(trial, order, n * sizeof *trial);
        memmove(trial + to + 1, trial + to, (j - to) * sizeof *trial);
        trial[to] = order[j];
        uint64_t th = exact_first_fit(p, trial, wk->off, wk->cur, to, wk->h);
        if (th <= wk->h) {
            wk->h = th;
            memcpy(order, trial, n * sizeof *order);
            memcpy(wk->cur, wk->off, n * sizeof *wk->cur);
            if (th < best->height) exact_offer(best, p, wk->cur);
        }
    }
}

/* ------------------------------------------------------------------------ */

/* The time backstop of an effort, as a roamc_now() deadline. */
static double exact_deadline(const layout_effort *effort) {
    if (!effort || !(effort->time_limit_s > 0)) return INFINITY;
    return roamc_now() + effort->time_limit_s;
}

static uint64_t exact_work(const layout_effort *effort) {
    return effort && effort->work ? effort->work : LAYOUT_DEFAULT_WORK;
}

/* The state of one layout_exact call, shared by its steps. */
typedef struct exact_run {
    const layout_problem *p;
    lay_budget bud; /* the work left and the deadline; stop is
                                           LAY_STOP_TIME once the deadline cut a step */
    exact_best best;
    uint64_t *cand;                     /* scratch layout for the searches */
    uint64_t lb;                        /* the live-size lower bound */
    uint64_t goal;                      /* effort->goal */
    layout_shares shares;               /* effort->shares, for every lay_search */
    layout_search_mark *mark;           /* effort->mark: where step 2 gave up */
    lay_reduced red;                    /* the reduced problem of steps 2-5 */
    exact_walk walk;                    /* step 4's walk, begun in step 1b */
    uint64_t quick_spent, quick_height; /* step 1b's work and result */
    uint64_t target;                    /* step 2's height: the bound (or goal), aligned */
    uint64_t known_bad;                 /* heights below this are proved impossible */
    int all_proofs;                     /* every failed probe was a proof */
    int too_large;                      /* the exact steps were skipped: only
                                           lay_improve ran */
} exact_run;

/* The incumbent meets the lower bound or the goal: nothing more to do. */
static int exact_reached(const exact_run *x) {
    return x->best.height <= x->lb || x->best.height <= x->goal;
}

/* 1b. The first EXACT_QUICK_PLACEMENTS placements of step 4's walk: on most
 * plans the incumbent is a few buffers off the bound, which the walk closes
 * in a few placements where the search at the bound takes seconds to fail
 * or to succeed.  Its work counts as part of step 4's share (it is not
 * taken from x->bud here), so that the steps in between get the same
 * budgets as without it, and step 4 resumes the same walk (exact_walk):
 * where it does not reach the bound, the layout is the one the steps give
 * without it. */
static void exact_quick_walk(exact_run *x) {
    exact_walk_init(&x->walk, x->p->n);
    /* At most a seventh of the work: step 4's share is at least
     * (1 - 2/5) / 2 / 2 = 3/20 of it, whatever steps 2-3 spend, so the
     * quick placements always fit in it. */
    uint64_t q = (uint64_t)EXACT_QUICK_PLACEMENTS * EXACT_PLACE_WORK * x->p->n;
    if (q > x->bud.work / 7) q = x->bud.work / 7;
    lay_budget quick = {q, x->bud.deadline, LAY_STOP_NONE};
    exact_walk_run(&x->walk, &x->best, x->p, x->lb > x->goal ? x->lb : x->goal, &quick);
    if (quick.stop == LAY_STOP_TIME) x->bud.stop = LAY_STOP_TIME;
    x->quick_spent = q - quick.work;
    x->quick_height = x->best.height;
}

/* A search for a layout at the lower bound (or at the goal, if higher)
 * with the given engines (LAYOUT_ENGINE_*), on num/den of the work left
 * and at most cap.  The search works with sizes rounded up to align, so
 * its target is the bound rounded up too: heights of aligned layouts move
 * in steps.  Returns 0 when it gave up; 1 when the target is decided (a
 * layout at it, or a proof that none exists, now or before) or there is
 * nothing to decide (the incumbent is at it). */
static int exact_search_at_bound(exact_run *x, int engines, uint64_t num, uint64_t den,
                                 uint64_t cap) {
    x->target = lay_round_up(x->lb > x->goal ? x->lb : x->goal, x->p->align);
    if (x->target >= x->best.height || x->known_bad > x->target) return 1;
    lay_search_opts o;
    lay_search_defaults(&o);
    lay_search_shares(&o, x->shares);
    o.engines = engines;
    lay_search_pos pos = {0, 0};
    int marked = x->mark && engines == (LAYOUT_ENGINE_SKYLINE | LAYOUT_ENGINE_BNB);
    if (marked) o.pos = &pos;
    lay_budget step = exact_take(&x->bud, num, den);
    if (step.work > cap) {
        x->bud.work += step.work - cap;
        step.work = cap;
    }
    lay_status rc = lay_search(x->p, x->target, &o, &step, x->cand, NULL);
    if (marked && rc == LAY_GAVE_UP && (step.stop == LAY_STOP_WORK || step.stop == LAY_STOP_TIME))
        *x->mark =
            (layout_search_mark){x->target, engines, x->shares, o.rules, pos.limit, pos.next};
    exact_refund(&x->bud, &step);
    if (rc == LAY_FOUND)
        exact_offer(&x->best, x->p, x->cand);
    else if (rc == LAY_INFEASIBLE)
        x->known_bad = x->target + 1;
    return rc == LAY_FOUND || rc == LAY_INFEASIBLE;
}

/* 1a. The canonical branch and bound alone at the bound (see the top of
 * the file), when the incumbent is within 1/EXACT_BNB_FIRST_GAP_DEN of the
 * bound.  What it proves stays proved; when it gives up, step 2 runs as it
 * would without it, on the work left. */
static void exact_bnb_first(exact_run *x) {
    if (x->best.height - x->lb > x->lb / EXACT_BNB_FIRST_GAP_DEN) return;
    exact_search_at_bound(x, LAYOUT_ENGINE_BNB, 1, EXACT_BNB_FIRST_DEN,
                          EXACT_BNB_FIRST_WORK_PER_BUFFER * x->red.n);
}

/* 2. Both engines round robin at the bound. */
static void exact_search_bound(exact_run *x) {
    if (!exact_search_at_bound(x, LAYOUT_ENGINE_SKYLINE | LAYOUT_ENGINE_BNB, EXACT_SEARCH_SHARE_NUM,
                               EXACT_SEARCH_SHARE_DEN, UINT64_MAX))
        x->all_proofs = 0;
}

/* 3. The GLPK model, when small.  Returns 1 when GLPK proved optimality. */
static int exact_glpk_step(exact_run *x) {
    size_t np = 0;
    ilp_layout_pair *pairs = exact_pairs(x->p->bufs, &x->red, &np);
    if (!pairs) return 0;
    lay_budget step = exact_take(&x->bud, EXACT_GLPK_SHARE_NUM, EXACT_GLPK_SHARE_DEN);
    int proven = exact_glpk(x->p, &x->red, pairs, np, x->lb, &step, &x->best);
    exact_refund(&x->bud, &step);
    free(pairs);
    return proven;
}

/* 4. Local search over placement orders from the incumbent: the search
 * alone seldom gets anywhere when the bound is out of reach. */
static void exact_walk_step(exact_run *x) {
    lay_budget step = exact_take(&x->bud, EXACT_REORDER_SHARE_NUM, EXACT_REORDER_SHARE_DEN);
    /* the quick placements were the start of this walk's share */
    uint64_t q = x->quick_spent < step.work ? x->quick_spent : step.work;
    step.work -= q;
    x->quick_spent -= q;
    if (x->best.height < x->quick_height)
        x->walk.ready = 0; /* GLPK moved the incumbent: walk from it */
    exact_walk_run(&x->walk, &x->best, x->p, x->lb > x->goal ? x->lb : x->goal, &step);
    exact_refund(&x->bud, &step);
}

/* 5. Bisection on the height with the search, in steps of align, while the
 * work lasts (the deadline is the backstop).  Returns 1 when every height
 * below the incumbent was proved impossible. */
static int exact_bisect(exact_run *x) {
    const uint64_t align = x->p->align;
    uint64_t lo = x->known_bad > x->target ? x->known_bad : x->target;
    int all_proofs = x->all_proofs;
    /* Not run on big problems; nor towards a goal: its probes lie between
     * the goal (the target) and the incumbent, and a layout there does not
     * reach the goal (roamc layout --capacity: the time is the search's). */
    int run = x->red.n <= EXACT_BISECT_MAX_BUFFERS && x->goal == 0;
    if (!run) all_proofs = 0; /* nothing proved above lo */
    while (lo < x->best.height && run &&
           x->bud.work / EXACT_PROBE_SHARE_DEN >= EXACT_MIN_PROBE_WORK) {
        if (roamc_now() > x->bud.deadline) {
            x->bud.stop = LAY_STOP_TIME;
            break;
        }
        uint64_t hi = x->best.height - 1; /* try to beat the incumbent */
        uint64_t mid = lay_round_up(lo + (hi - lo) / 2, align);
        if (mid > hi) mid = hi / align * align;
        if (mid < lo) break;
        lay_budget step = exact_take(&x->bud, 1, EXACT_PROBE_SHARE_DEN);
        lay_search_opts o;
        lay_search_defaults(&o);
        lay_search_shares(&o, x->shares);
        lay_status rc = lay_search(x->p, mid, &o, &step, x->cand, NULL);
        exact_refund(&x->bud, &step);
        if (rc == LAY_FOUND) {
            exact_offer(&x->best, x->p, x->cand);
        } else {
            if (rc != LAY_INFEASIBLE) all_proofs = 0;
            lo = mid + 1;
        }
    }
    return all_proofs && lo >= x->best.height;
}

/* Large problems (more than LAYOUT_SEARCH_MAX_BUFFERS buffers after the
 * reduction): lay_improve on the incumbent with all the work, down to the
 * bound or the goal.  Records why it ended in x->why. */
static void exact_improve(exact_run *x) {
    x->too_large = 1;
    lay_budget step = x->bud;
    step.stop = LAY_STOP_NONE;
    exact_best *b = &x->best;
    memcpy(x->cand, b->offsets, x->p->n * sizeof *x->cand);
    lay_improve(x->p, x->cand, x->lb > x->goal ? x->lb : x->goal, &step,
                x->shares == LAYOUT_SHARES_PORTFOLIO, NULL);
    exact_offer(b, x->p, x->cand);
    x->bud.work = step.work;
    if (step.stop != LAY_STOP_NONE) x->bud.stop = step.stop;
}

/* 1-. lay_improve on 1/EXACT_IMPROVE_FIRST_DEN of the work (the top of
 * the file says when). */
static void exact_improve_first(exact_run *x) {
    lay_budget step = exact_take(&x->bud, 1, EXACT_IMPROVE_FIRST_DEN);
    memcpy(x->cand, x->best.offsets, x->p->n * sizeof *x->cand);
    lay_improve(x->p, x->cand, x->lb > x->goal ? x->lb : x->goal, &step,
                x->shares == LAYOUT_SHARES_PORTFOLIO, NULL);
    exact_offer(&x->best, x->p, x->cand);
    exact_refund(&x->bud, &step);
}

/* Steps 1 to 5 (the comment at the top of the file), each skipped once the
 * incumbent reaches the bound or the goal.  Returns 1 when a step proved the
 * incumbent optimal, else 0. */
static int exact_steps(exact_run *x, const uint64_t *warm_offsets) {
    const layout_problem *p = x->p;
    /* 1. Incumbent: the warm start or the best heuristic, whichever is lower. */
    if (warm_offsets) exact_offer(&x->best, p, warm_offsets);
    layout_best_heuristic(p->bufs, p->n, p->align, x->cand, NULL);
    exact_offer(&x->best, p, x->cand);
    x->lb = layout_live_peak(p->bufs, p->n);
    if (exact_reached(x)) return 0;
    lay_reduce(p->bufs, p->n, p->align, &x->red);
    /* Problems too big for the search: local improvement of the
     * incumbent (layout_improve.c), which scales to them, on all the work. */
    if (x->red.n > LAYOUT_SEARCH_MAX_BUFFERS) {
        exact_improve(x);
        return 0;
    }
    if (p->n > LAYOUT_SEARCH_MAX_BUFFERS && x->shares == LAYOUT_SHARES_PORTFOLIO) {
        exact_improve_first(x);
        if (exact_reached(x)) return 0;
    }
    exact_bnb_first(x);
    if (exact_reached(x)) return 0;
    exact_quick_walk(x);
    if (exact_reached(x)) return 0;
    exact_search_bound(x);
    if (exact_reached(x)) return 0;
    if (exact_glpk_step(x)) return 1;
    if (exact_reached(x)) return 0;
    exact_walk_step(x);
    if (exact_reached(x)) return 0;
    return exact_bisect(x);
}

uint64_t layout_exact(const layout_problem *p, const uint64_t *warm_offsets,
                      const layout_effort *effort, uint64_t *offsets, layout_result *res) {
    ROAMC_ASSERT(p->align >= 1);
    const size_t n = p->n;
    exact_run x = {.p = p,
                   .bud = {exact_work(effort), exact_deadline(effort), LAY_STOP_NONE},
                   .best = {xmallocarray(n, sizeof(uint64_t)), UINT64_MAX},
                   .cand = xmallocarray(n, sizeof(uint64_t)),
                   .goal = effort ? effort->goal : 0,
                   .shares = effort ? effort->shares : LAYOUT_SHARES_EQUAL,
                   .mark = effort ? effort->mark : NULL,
                   .quick_height = UINT64_MAX,
                   .all_proofs = 1};
    const uint64_t work0 = x.bud.work;
    if (x.mark) memset(x.mark, 0, sizeof *x.mark);
    int proven = exact_steps(&x, warm_offsets) || x.best.height <= x.lb;
    memcpy(offsets, x.best.offsets, n * sizeof *offsets);
    /* quick placements not charged to step 4 (the steps before it closed
     * the gap) still count as work spent */
    layout_stop why = proven || exact_reached(&x)   ? LAYOUT_STOP_PROOF
                      : x.bud.stop == LAY_STOP_TIME ? LAYOUT_STOP_TIME
                      : x.bud.stop == LAY_STOP_WORK || x.bud.work < EXACT_MIN_PROBE_WORK
                          ? LAYOUT_STOP_WORK
                      : x.too_large ? LAYOUT_STOP_TOO_LARGE
                                    : LAYOUT_STOP_NO_IMPROVEMENT;
    if (res)
        *res = (layout_result){x.best.height, proven, x.bud.stop == LAY_STOP_TIME,
                               work0 - x.bud.work + x.quick_spent, why};
    exact_walk_free(&x.walk);
    lay_reduced_free(&x.red);
    free(x.cand);
    free(x.best.offsets);
    return x.best.height;
}

uint64_t layout_glpk_exact(const layout_problem *p, const layout_effort *effort, uint64_t *offsets,
                           layout_result *res, int *too_large) {
    const size_t n = p->n;
    exact_best best = {xmallocarray(n, sizeof(uint64_t)), UINT64_MAX};
    uint64_t *warm = xmallocarray(n, sizeof *warm);
    lay_reduced red;
    int proven = 0;
    lay_budget bud = {exact_work(effort), exact_deadline(effort), LAY_STOP_NONE};
    const uint64_t work0 = bud.work;
    *too_large = 0;
    layout_llfb(p->bufs, n, p->align, warm);
    lay_reduce(p->bufs, n, p->align, &red);
    exact_offer(&best, p, warm);
    ROAMC_ASSERT(best.height != UINT64_MAX); /* LLFB is valid */
    uint64_t lb = layout_live_peak(p->bufs, n);
    size_t np = 0;
    ilp_layout_pair *pairs = best.height > lb ? exact_pairs(p->bufs, &red, &np) : NULL;
    if (pairs) {
        proven = exact_glpk(p, &red, pairs, np, lb, &bud, &best);
        free(pairs);
    } else if (np == SIZE_MAX) {
        *too_large = 1;
    }
    if (best.height <= lb) proven = 1;
    if (res)
        *res = (layout_result){best.height, proven, bud.stop == LAY_STOP_TIME, work0 - bud.work,
                               proven                      ? LAYOUT_STOP_PROOF
                               : bud.stop == LAY_STOP_TIME ? LAYOUT_STOP_TIME
                               : *too_large                ? LAYOUT_STOP_TOO_LARGE
                                                           : LAYOUT_STOP_WORK};
    memcpy(offsets, best.offsets, n * sizeof *offsets);
    uint64_t h = best.height;
    free(best.offsets);
    free(warm);
    lay_reduced_free(&red);
    return h;
}
