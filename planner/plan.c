/* Building and validating a plan (see planner.h). */
#include "planner.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "leaf.h"
#include "partition.h"

static const char *const planner_order_names[] = {"program", "lescea", "roam", "ilp"};
static const char *const planner_layout_names[] = {"bestfit", "llfb", "greedy",
                                                   "pytorch", "roam", "ilp"};

#define PLANNER_COUNT(a) (sizeof(a) / sizeof((a)[0]))

const char *planner_order_name(planner_order o) {
    return planner_order_names[o];
}
const char *planner_layout_name(planner_layout l) {
    return planner_layout_names[l];
}

int planner_order_parse(const char *s, planner_order *out) {
    for (size_t i = 0; i < PLANNER_COUNT(planner_order_names); i++)
        if (strcmp(s, planner_order_names[i]) == 0) return *out = (planner_order)i, 0;
    return -1;
}

int planner_layout_parse(const char *s, planner_layout *out) {
    for (size_t i = 0; i < PLANNER_COUNT(planner_layout_names); i++)
        if (strcmp(s, planner_layout_names[i]) == 0) return *out = (planner_layout)i, 0;
    return -1;
}

const planner_method planner_methods[] = {
    {"pytorch", "PyTorch", PLANNER_ORDER_PROGRAM, PLANNER_LAYOUT_PYTORCH, 1},
    {"heuristics", "Heuristics", PLANNER_ORDER_LESCEA, PLANNER_LAYOUT_LLFB, 0},
    {"ilp", "ILP", PLANNER_ORDER_ILP, PLANNER_LAYOUT_ILP, 0},
    {"roam", "ROAM", PLANNER_ORDER_ROAM, PLANNER_LAYOUT_ROAM, 0},
};
const size_t planner_n_methods = PLANNER_COUNT(planner_methods);

const planner_method *planner_method_find(const char *name) {
    for (size_t i = 0; i < planner_n_methods; i++)
        if (strcmp(name, planner_methods[i].name) == 0) return &planner_methods[i];
    return NULL;
}

const char *planner_method_names(void) {
    return "pytorch, heuristics, ilp, roam";
}

void planner_method_apply(const planner_method *m, planner_options *opt) {
    opt->order = m->order;
    opt->layout = m->layout;
    opt->retain_gradients = m->retain_gradients;
}

uint64_t plan_device_bytes(const plan *p) {
    return p->pytorch_reserved ? p->pytorch_reserved : p->actual;
}

int planner_time_limit_parse(const char *s, double *out, char *err, size_t errlen) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || end == s || !(v > 0 && v <= PLANNER_MAX_TIME_LIMIT))
        return roamc_errorf(err, errlen,
                            "--time-limit wants seconds above 0 and at most %.0f, not '%s'",
                            PLANNER_MAX_TIME_LIMIT, s);
    *out = v;
    return 0;
}

void plan_free(plan *p) {
    if (!p) return;
    free(p->order);
    free(p->start);
    free(p->end);
    free(p->offsets);
    free(p->ostats);
    if (p->tree) partition_free(p->tree);
    free(p->tree);
    if (p->pass_state && p->opt.pass) p->opt.pass->free_state(p->pass_state);
    if (p->own_graph) graph_free(p->own_graph);
    free(p->own_graph);
    memset(p, 0, sizeof *p);
}

/* The layout problem of a plan: one buffer per storage. */
static layout_buffer *plan_buffers(const plan *p) {
    const graph *g = p->g;
    layout_buffer *b = xmallocarray(g->n_storages, sizeof *b);
    for (size_t s = 0; s < g->n_storages; s++)
        b[s] = (layout_buffer){g->storages[s].size, p->start[s], p->end[s]};
    return b;
}

/* Appends a formatted note to buf (cap bytes), "; " after any note already
 * there; what does not fit is cut. */
static void plan_note_add(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void plan_note_add(char *buf, size_t cap, const char *fmt, ...) {
    size_t k = strlen(buf);
    if (k && k + 2 < cap) k += (size_t)snprintf(buf + k, cap - k, "; ");
    if (k >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + k, cap - k, fmt, ap);
    va_end(ap);
}
/* A stage that the time limit cut, and why a solver of the ILPs stopped. */
#define plan_time_cut(p, ...) plan_note_add((p)->time_cut, sizeof(p)->time_cut, __VA_ARGS__)
#define plan_ilp_note(p, ...) plan_note_add((p)->ilp_note, sizeof(p)->ilp_note, __VA_ARGS__)

/* The ordering's solvers that the time limit stopped. */
static void plan_time_cuts_order(plan *p) {
    const planner_order_stats *o = p->ostats;
    if (!o || p->time_short) return;
    if (o->candidates_tried < o->candidates)
        plan_time_cut(p, "ordering: %zu of %zu partition candidates tried", o->candidates_tried,
                      o->candidates);
    if (p->opt.order == PLANNER_ORDER_ILP && o->time_stopped)
        plan_time_cut(p, "ordering: the order ILP stopped");
    else if (o->time_stopped)
        plan_time_cut(p, "ordering: %zu leaves kept their heuristic order", o->time_stopped);
}

/* Why the order ILP stopped, for the report. */
static void plan_order_ilp_note(plan *p) {
    const planner_order_stats *o = p->ostats;
    if (!o || p->opt.order != PLANNER_ORDER_ILP) return;
    if (o->ilp_too_large)
        plan_ilp_note(p, "order ILP: too large to build, %s order kept", o->source);
    else if (o->leaves_ilp_optimal)
        plan_ilp_note(p, "order ILP: proven optimal");
    else if (o->time_stopped)
        plan_ilp_note(p, "order ILP: stopped by the time limit after %ld nodes (%zu columns)%s",
                      o->ilp_nodes, o->ilp_vars,
                      o->heuristic_kept ? ", nothing better than the heuristic warm start" : "");
    else
        plan_ilp_note(p, "order ILP: stopped without proof after %ld nodes (%zu columns)%s",
                      o->ilp_nodes, o->ilp_vars,
                      o->heuristic_kept ? ", nothing better than the heuristic warm start" : "");
}

/* The ILP baselines fall back to the best heuristic plan they had
 * (DESIGN.md: "fall back to the heuristic answer"): with order ilp, the
 * program and LESCEA orders with the best heuristic layout; with layout
 * ilp, the best heuristic layout of the same order.  A lower one replaces
 * the plan, and ilp_note says so. */
static void plan_ilp_fallback(plan *p) {
    const graph *g = p->g;
    size_t n = g->n_ops, ns = g->n_storages;
    int *ord = xmallocarray(n, sizeof *ord);
    int32_t *st = xmallocarray(ns, sizeof *st), *en = xmallocarray(ns, sizeof *en);
    uint64_t *off = xmallocarray(ns, sizeof *off);
    layout_buffer *b = xmallocarray(ns, sizeof *b);
    int tries = p->opt.order == PLANNER_ORDER_ILP ? 2 : 1;
    uint64_t ilp_actual = p->actual;
    const char *kept_order = NULL, *kept_layout = NULL;
    for (int k = 0; k < tries; k++) {
        const char *order_name = "the same";
        if (p->opt.order != PLANNER_ORDER_ILP)
            memcpy(ord, p->order, n * sizeof *ord);
        else if (k == 0)
            graph_program_order(g, ord), order_name = "program";
        else
            leaf_lescea_graph(g, ord), order_name = "lescea";
        graph_lifetimes(g, ord, st, en);
        for (size_t s = 0; s < g->n_storages; s++)
            b[s] = (layout_buffer){g->storages[s].size, st[s], en[s]};
        const char *winner = "?";
        uint64_t h = layout_best_heuristic(b, g->n_storages, p->opt.align, off, &winner);
        if (h < p->actual) {
            kept_order = order_name, kept_layout = winner;
            memcpy(p->order, ord, n * sizeof *ord);
            memcpy(p->start, st, g->n_storages * sizeof *st);
            memcpy(p->end, en, g->n_storages * sizeof *en);
            memcpy(p->offsets, off, g->n_storages * sizeof *off);
            p->actual = h;
            p->theoretical = graph_peak(g, p->order, &p->theoretical_np, NULL);
            p->layout_optimal = h <= p->theoretical;
            if (p->ostats && p->opt.order == PLANNER_ORDER_ILP)
                p->ostats->source = order_name, p->ostats->heuristic_kept = 1;
        }
    }
    if (kept_order) p->layout_kept = kept_layout;
    if (kept_order)
        plan_ilp_note(
            p, "the ILPs' plan (%llu B) was above %s order with the %s layout (%llu B): kept that",
            (unsigned long long)ilp_actual, kept_order, kept_layout, (unsigned long long)p->actual);
    free(ord), free(st), free(en), free(off), free(b);
}

/* ROAM's tree-based layout (paper IV-B): each storage in the group of the
 * leaf subgraph partition_layout_groups gives it, persistent ones at the
 * bottom, laid out by layout_roam within work (seconds: backstop).  Writes
 * offsets and returns the height. */
static uint64_t plan_tree_layout(plan *p, const layout_buffer *b, uint64_t work, double seconds,
                                 uint64_t *offsets) {
    const graph *g = p->g;
    size_t ns = g->n_storages;
    int *group = xmallocarray(ns, sizeof *group);
    bool *act = xmallocarray(ns, sizeof *act);
    unsigned char *low = xmalloc(ns);
    partition_schedule sched = {.order = p->order, .start = p->start, .end = p->end};
    int ng = partition_layout_groups(g, p->tree, &sched, group, act);
    unsigned *flags = xcalloc((size_t)ng, sizeof *flags);
    flags[ng - 1] = LAYOUT_ROAM_BOTTOM; /* the persistent group */
    for (size_t s = 0; s < g->n_storages; s++) low[s] = act[s];
    layout_roam_input in = {.group = group,
                            .low = low,
                            .n_groups = (size_t)ng,
                            .group_flags = flags,
                            .work = work,
                            .time_limit_s = seconds,
                            .fill = 1};
    layout_roam_stats st;
    uint64_t h = layout_roam(b, g->n_storages, p->opt.align, &in, offsets, &st);
    p->tree_layout.groups = st.groups, p->tree_layout.groups_proven = st.groups_proven;
    p->tree_layout.repaired = st.repaired, p->tree_layout.leftovers = st.leftovers;
    static const char *const stackings[] = {"window", "first step", "last step"};
    p->tree_layout.stacking = st.stacking >= 0 && st.stacking < 3 ? stackings[st.stacking] : "?";
    if (st.stopped_by_time) {
        snprintf(p->layout_note, sizeof p->layout_note,
                 "tree layout stopped by the time limit, not by its work budget: another run "
                 "may differ");
        plan_time_cut(p, "layout: the tree layout stopped");
    }
    free(group), free(act), free(low), free(flags);
    return h;
}

/* Layout pytorch: the replay of PyTorch's caching allocator.  The replay
 * rounds to 512 B itself and its segments start at multiples of 2 MiB, so
 * any align dividing 512 keeps offsets aligned (plan_layout checks it).
 * The plan's actual peak is where the highest block ends; the memory
 * PyTorch would reserve (whole segments) is reported apart.  Returns the
 * height. */
static uint64_t plan_layout_pytorch(plan *p, const layout_buffer *b) {
    size_t n = p->g->n_storages;
    layout_pytorch_stats st;
    if (layout_pytorch(b, n, p->opt.device_limit, p->offsets, &st) == UINT64_MAX) {
        /* PyTorch would stop with out-of-memory (st.oom): the plan still
         * needs a layout, the replay without the limit, whose reserved
         * bytes (above the limit) say by how much it does not fit */
        p->pytorch_oom = 1;
        layout_pytorch(b, n, 0, p->offsets, &st);
    }
    p->pytorch_reserved = st.reserved_peak;
    p->pytorch_released = st.released;
    return layout_height(b, n, p->offsets);
}

/* Layout roam: after order roam, ROAM's tree-based layout first (half the
 * time backstop; its work budget apart), then the global engine
 * warm-started from it, which never returns anything higher.  A work
 * budget, so that the plan does not depend on machine speed; budget
 * seconds are only the backstop.  Returns the height. */
static uint64_t plan_layout_roam(plan *p, const layout_buffer *b, double budget) {
    const graph *g = p->g;
    layout_effort e = {LAYOUT_DEFAULT_WORK, budget, 0, LAYOUT_SHARES_EQUAL, NULL};
    layout_result lr;
    uint64_t *tree = NULL, th = UINT64_MAX;
    if (p->tree) {
        tree = xmallocarray(g->n_storages, sizeof *tree);
        double t0 = roamc_now();
        th = plan_tree_layout(p, b, LAYOUT_DEFAULT_WORK, budget / 2, tree);
        p->tree_layout.seconds = roamc_now() - t0;
        e.time_limit_s =
            budget - p->tree_layout.seconds > 0.1 ? budget - p->tree_layout.seconds : 0.1;
    }
    layout_problem lp = {b, g->n_storages, p->opt.align};
    uint64_t h = layout_exact(&lp, tree, &e, p->offsets, &lr);
    p->layout_optimal = lr.proven_optimal;
    if (tree) {
        p->tree_layout.used = 1;
        p->tree_layout.tree_height = th;
        p->tree_layout.global_height = h;
        if (h > th) { /* not expected: layout_exact keeps its warm start */
            memcpy(p->offsets, tree, g->n_storages * sizeof *tree);
            h = th;
        }
        p->tree_layout.winner = h < th ? "global" : "tree";
    }
    free(tree);
    if (lr.stopped_by_time) {
        snprintf(
            p->layout_note, sizeof p->layout_note,
            "layout stopped by the time limit, not by its work budget: another run may differ");
        plan_time_cut(p, "layout: the exact search stopped");
    }
    return h;
}

/* Layout ilp: the GLPK model alone, warm-started from LLFB as MODeL would
 * be from its heuristic; too many conflicting pairs keep LLFB.  Returns
 * the height. */
static uint64_t plan_layout_ilp(plan *p, const layout_buffer *b, double budget) {
    int too_large = 0;
    layout_effort e = {LAYOUT_DEFAULT_WORK, budget, 0, LAYOUT_SHARES_EQUAL, NULL};
    layout_result lr;
    layout_problem lp = {b, p->g->n_storages, p->opt.align};
    uint64_t h = layout_glpk_exact(&lp, &e, p->offsets, &lr, &too_large);
    p->layout_optimal = lr.proven_optimal;
    plan_ilp_note(p, "layout ILP: %s",
                  lr.proven_optimal    ? "proven minimal"
                  : too_large          ? "too large (too many overlapping pairs), LLFB kept"
                  : lr.stopped_by_time ? "stopped by the time limit"
                                       : "stopped by its work budget, not proven minimal");
    if (too_large)
        snprintf(p->layout_note, sizeof p->layout_note, "layout ILP too large, kept LLFB");
    else if (lr.stopped_by_time) {
        snprintf(p->layout_note, sizeof p->layout_note,
                 "layout ILP stopped by the time limit, not by its work budget: another run "
                 "may differ");
        plan_time_cut(p, "layout: the layout ILP stopped");
    }
    return h;
}

void plan_layout_ends(const plan *p, int32_t *end) {
    memcpy(end, p->end, p->g->n_storages * sizeof *end);
    if (p->opt.pass) p->opt.pass->lifetimes(p, end);
}

/* The layout problem's lifetimes as the pass lengthens them. */
static void plan_pass_lifetimes(const plan *p, layout_buffer *b) {
    size_t ns = p->g->n_storages;
    int32_t *end = xmallocarray(ns ? ns : 1, sizeof *end);
    plan_layout_ends(p, end);
    for (size_t s = 0; s < ns; s++) b[s].end = end[s];
    free(end);
}

/* budget: seconds for the exact layouts (roam, ilp), a backstop only: they
 * stop on work budgets (LAYOUT_DEFAULT_WORK) first. */
static int plan_layout(plan *p, double budget, char *err, size_t errlen) {
    const graph *g = p->g;
    if (p->opt.layout == PLANNER_LAYOUT_PYTORCH && 512 % p->opt.align)
        return roamc_errorf(err, errlen,
                            "layout pytorch places blocks at multiples of 512 B; use an "
                            "--align that divides 512");
    layout_buffer *b = plan_buffers(p);
    if (p->opt.pass) plan_pass_lifetimes(p, b);
    uint64_t h = 0;
    switch (p->opt.layout) {
    case PLANNER_LAYOUT_BESTFIT:
        h = layout_bestfit(b, g->n_storages, p->opt.align, p->offsets);
        break;
    case PLANNER_LAYOUT_LLFB: h = layout_llfb(b, g->n_storages, p->opt.align, p->offsets); break;
    case PLANNER_LAYOUT_GREEDY:
        h = layout_greedy(b, g->n_storages, p->opt.align, p->offsets);
        break;
    case PLANNER_LAYOUT_PYTORCH: h = plan_layout_pytorch(p, b); break;
    case PLANNER_LAYOUT_ROAM: h = plan_layout_roam(p, b, budget); break;
    case PLANNER_LAYOUT_ILP: h = plan_layout_ilp(p, b, budget); break;
    }
    free(b);
    if ((p->opt.layout == PLANNER_LAYOUT_ROAM || p->opt.layout == PLANNER_LAYOUT_ILP) &&
        !p->layout_optimal && !p->layout_note[0])
        snprintf(p->layout_note, sizeof p->layout_note,
                 "%llu B (%.4f%%) above the live-size bound; stopped by its work budget, not "
                 "proven minimal",
                 (unsigned long long)(h - p->theoretical),
                 p->theoretical
                     ? 100.0 * ((double)h - (double)p->theoretical) / (double)p->theoretical
                     : 0.0);
    p->actual = h;
    return 0;
}

int plan_build(const graph *g, const planner_options *opt, plan *p, char *err, size_t errlen) {
    memset(p, 0, sizeof *p);
    if (opt->retain_gradients && !g->retain_gradients) {
        /* lifetimes are the graph's: plan a copy that keeps gradients */
        p->own_graph = xcalloc(1, sizeof *p->own_graph);
        if (graph_build(g->model, g->align, p->own_graph, err, errlen)) {
            free(p->own_graph);
            p->own_graph = NULL;
            return -1;
        }
        p->own_graph->retain_gradients = true;
        g = p->own_graph;
    }
    p->g = g;
    p->opt = *opt;
    double t0 = roamc_now();
    /* --time-limit bounds the whole command: one deadline for every stage.
     * Already past it, the fastest valid plan (program order, bestfit
     * layout, no costly bounds), and the report says the limit was too short. */
    if (!(p->opt.time_limit > 0)) p->opt.time_limit = PLANNER_DEFAULT_TIME_LIMIT;
    if (p->opt.node_limit <= 0) p->opt.node_limit = PLANNER_DEFAULT_NODE_LIMIT;
    if (!(p->opt.deadline > 0)) p->opt.deadline = t0 + p->opt.time_limit;
    if (t0 >= p->opt.deadline) {
        p->time_short = 1;
        p->opt.fastest = 1;
        p->opt.order = PLANNER_ORDER_PROGRAM;
        if (p->opt.layout != PLANNER_LAYOUT_PYTORCH) p->opt.layout = PLANNER_LAYOUT_BESTFIT;
    }
    opt = &p->opt;
    size_t ns = g->n_storages;
    p->order = xmallocarray(g->n_ops, sizeof *p->order);
    p->start = xmallocarray(ns, sizeof *p->start);
    p->end = xmallocarray(ns, sizeof *p->end);
    p->offsets = xmallocarray(ns, sizeof *p->offsets);
    planner_progress_stage("ordering (%s)", planner_order_name(opt->order));
    /* Every order goes through the ordering driver (planner/order.c), which
     * also measures program order and LESCEA for the report. */
    p->ostats = xcalloc(1, sizeof *p->ostats);
    planner_order_run(g, opt, p->order, p->ostats, &p->tree);
    if (opt->pass && opt->pass->order(opt->pass, p, err, errlen)) {
        plan_free(p);
        return -1;
    }
    graph_lifetimes(g, p->order, p->start, p->end);
    p->theoretical = graph_peak(g, p->order, &p->theoretical_np, NULL);
    p->lower_bound = graph_lower_bound(g);
    if (p->ostats->lower_bound > p->lower_bound) p->lower_bound = p->ostats->lower_bound;
    p->persistent = graph_persistent_bytes(g);
    double t1 = roamc_now();
    plan_time_cuts_order(p);
    plan_order_ilp_note(p);
    /* The exact layouts stop on work budgets; their time backstop is most
     * of what the ordering left (a tenth kept for the self-check and
     * writing).  With nothing left, the fastest layout. */
    double budget = 0.9 * (p->opt.deadline - t1);
    if (budget <= 0 &&
        (p->opt.layout == PLANNER_LAYOUT_ROAM || p->opt.layout == PLANNER_LAYOUT_ILP)) {
        plan_time_cut(p, "layout: bestfit, not %s (no time left after the ordering)",
                      planner_layout_name(p->opt.layout));
        p->opt.layout = PLANNER_LAYOUT_BESTFIT;
    }
    if (budget < 1e-3) budget = 1e-3;
    planner_progress_stage("layout (%s) of %zu storages", planner_layout_name(p->opt.layout),
                           g->n_storages);
    if (plan_layout(p, budget, err, errlen)) {
        plan_free(p);
        return -1;
    }
    /* the fallback plans other orders on one stream: not with a pass */
    if ((p->opt.order == PLANNER_ORDER_ILP || p->opt.layout == PLANNER_LAYOUT_ILP) && !p->opt.pass)
        plan_ilp_fallback(p);
    if (p->opt.pass) p->opt.pass->finish(p);
    double t2 = roamc_now();
    p->times.order = t1 - t0;
    p->times.layout = t2 - t1;
    planner_progress_stage("checking the plan");
    if (plan_validate(p, err, errlen)) {
        /* A bug, not bad input: say so plainly rather than write the plan. */
        char why[512];
        snprintf(why, sizeof why, "%s", err);
        plan_free(p);
        return roamc_errorf(err, errlen, "internal error, refusing to write an invalid plan: %s",
                            why);
    }
    return 0;
}

int plan_validate(const plan *p, char *err, size_t errlen) {
    const graph *g = p->g;
    if (graph_check_schedule(g, p->order, err, errlen)) return -1;
    /* Lifetimes must cover every use; recompute and compare. */
    size_t ns = g->n_storages;
    int32_t *start = xmallocarray(ns, sizeof *start), *end = xmallocarray(ns, sizeof *end);
    layout_buffer *b = plan_buffers(p);
    int rc = 0;
    graph_lifetimes(g, p->order, start, end);
    for (size_t s = 0; s < g->n_storages && rc == 0; s++)
        if (start[s] != p->start[s] || end[s] != p->end[s])
            rc = roamc_errorf(err, errlen,
                              "storage %zu: lifetime [%d,%d] differs from the schedule's [%d,%d]",
                              s, p->start[s], p->end[s], start[s], end[s]);
    size_t x = 0, y = 0;
    if (rc == 0 && layout_validate(b, g->n_storages, p->offsets, p->opt.align, &x, &y)) {
        if (x == y)
            rc = roamc_errorf(err, errlen, "storage %zu: offset %llu is not a multiple of %llu", x,
                              (unsigned long long)p->offsets[x], (unsigned long long)p->opt.align);
        else
            rc = roamc_errorf(err, errlen,
                              "storages %zu [%llu,+%llu) steps [%d,%d] and %zu [%llu,+%llu) "
                              "steps [%d,%d] overlap",
                              x, (unsigned long long)p->offsets[x], (unsigned long long)b[x].size,
                              b[x].start, b[x].end, y, (unsigned long long)p->offsets[y],
                              (unsigned long long)b[y].size, b[y].start, b[y].end);
    }
    if (rc == 0) {
        uint64_t live = layout_live_peak(b, g->n_storages),
                 h = layout_height(b, g->n_storages, p->offsets);
        if (live != p->theoretical || h != p->actual)
            rc = roamc_errorf(err, errlen,
                              "peaks disagree: theoretical %llu vs %llu, actual %llu vs %llu",
                              (unsigned long long)p->theoretical, (unsigned long long)live,
                              (unsigned long long)p->actual, (unsigned long long)h);
    }
    free(start);
    free(end);
    free(b);
    if (rc == 0 && p->opt.pass) rc = p->opt.pass->validate(p, err, errlen);
    return rc;
}
