/* The least memory live while one operator runs, over every schedule, as a
 * minimum s-t cut (see graph_min_live in graph.h).
 *
 * When op v runs, the ops already run form a down-set E (closed under
 * predecessors) that holds v and its ancestors and none of v's descendants;
 * every such E is the prefix of some valid schedule.  A storage is live at
 * v's step when it is made in E (or is an input) and is touched at or after
 * v (or must outlive the step).  Choosing E to minimise the live bytes is a
 * closure problem, which a minimum cut solves exactly: E is the source side.
 *
 *   - ordering edge u -> w:  w -> u, infinite (w in E forces u in E)
 *   - source -> v, infinite; every successor of v -> sink, infinite
 *   - storage s that must outlive the step, made by m:  m -> sink, size(s)
 *   - any other storage s, made by m (the source for an input):
 *         m -> a_s, size(s) and a_s -> t, infinite, for each toucher t != m;
 *     a_s must sit on the sink side when some toucher is outside E, and then
 *     m -> a_s is cut exactly when m is in E: s is live.
 *
 * Storages v itself touches are live whatever E is; they and the inputs
 * that must outlive the step are added outside the cut.  An input nothing
 * reads is live at step 0 only and is left out, which keeps the value a
 * lower bound. */
#include "graph.h"
#include "graph_internal.h"

#include <igraph.h>
#include <stdlib.h>

typedef struct cut_net {
    igraph_vector_int_t ends; /* edge e: ends[2e] -> ends[2e+1] */
    igraph_vector_t cap;
    igraph_integer_t n_edges;
} cut_net;

static int cut_add(cut_net *c, igraph_integer_t from, igraph_integer_t to, double cap) {
    if (igraph_vector_int_push_back(&c->ends, from) || igraph_vector_int_push_back(&c->ends, to) ||
        igraph_vector_push_back(&c->cap, cap))
        return -1;
    c->n_edges++;
    return 0;
}

/* The minimum over schedules of the bytes live at op v; mark a scratch
 * array of n_storages zeros (left zeroed).  Returns UINT64_MAX on failure. */
static uint64_t cut_min_live(const graph *g, int v, const graph_touchers *T, double inf, unsigned char *mark) {
    size_t n = g->n_ops, ns = g->n_storages;
    igraph_integer_t src = (igraph_integer_t)(n + ns), sink = src + 1;
    uint64_t fixed = 0;
    for (size_t k = g->touch_start[v]; k < g->touch_start[v + 1]; k++) {
        mark[g->touch[k]] = 1;
        fixed += g->storages[g->touch[k]].size;
    }
    cut_net c = {.n_edges = 0};
    bool ok = !igraph_vector_int_init(&c.ends, 0);
    if (ok && igraph_vector_init(&c.cap, 0)) {
        igraph_vector_int_destroy(&c.ends);
        ok = false;
    }
    if (!ok) {
        for (size_t k = g->touch_start[v]; k < g->touch_start[v + 1]; k++) mark[g->touch[k]] = 0;
        return UINT64_MAX;
    }
    int bad = 0;
    for (size_t w = 0; w < n && !bad; w++)
        for (size_t k = g->pred_start[w]; k < g->pred_start[w + 1] && !bad; k++)
            bad = cut_add(&c, (igraph_integer_t)w, g->pred[k], inf);
    if (!bad) bad = cut_add(&c, src, v, inf);
    for (size_t k = g->succ_start[v]; k < g->succ_start[v + 1] && !bad; k++) bad = cut_add(&c, g->succ[k], sink, inf);
    for (size_t s = 0; s < ns && !bad; s++) {
        const graph_storage *st = &g->storages[s];
        if (mark[s]) continue;
        igraph_integer_t from = st->has_input ? src : T->maker[s];
        if (from < 0) continue; /* neither made nor an input: never live */
        if (graph_storage_outlives(g, st)) {
            if (st->has_input) fixed += st->size;
            else bad = cut_add(&c, from, sink, (double)st->size);
            continue;
        }
        igraph_integer_t aux = (igraph_integer_t)(n + s);
        bad = cut_add(&c, from, aux, (double)st->size);
        for (size_t k = T->start[s]; k < T->start[s + 1] && !bad; k++)
            if (T->ops[k] != from) bad = cut_add(&c, aux, T->ops[k], inf);
    }
    for (size_t k = g->touch_start[v]; k < g->touch_start[v + 1]; k++) mark[g->touch[k]] = 0;

    uint64_t result = UINT64_MAX;
    igraph_t ig;
    if (!bad && !igraph_create(&ig, &c.ends, sink + 1, IGRAPH_DIRECTED)) {
        igraph_real_t flow = 0;
        if (!igraph_maxflow_value(&ig, &flow, src, sink, &c.cap, NULL) && flow >= 0 && flow < inf)
            result = fixed + (uint64_t)flow;
        igraph_destroy(&ig);
    }
    igraph_vector_int_destroy(&c.ends);
    igraph_vector_destroy(&c.cap);
    return result;
}

uint64_t graph_min_live(const graph *g, const int *ops, size_t n_given) {
    size_t ns = g->n_storages;
    /* Capacities are doubles in igraph: every sum must stay an exact integer. */
    double total = 0;
    for (size_t s = 0; s < ns; s++) total += (double)g->storages[s].size;
    if (total >= 9007199254740992.0 / 4) return 0;
    double inf = 2 * total + 1;

    graph_touchers T = {0};
    unsigned char *mark = calloc(ns ? ns : 1, 1);
    uint64_t best = 0;
    if (!mark || graph_touchers_build(g, &T)) best = UINT64_MAX;
    else {
        igraph_set_error_handler(igraph_error_handler_ignore);
        for (size_t i = 0; i < n_given && best != UINT64_MAX; i++) {
            uint64_t live = cut_min_live(g, ops[i], &T, inf, mark);
            if (live == UINT64_MAX || live > best) best = live;
        }
    }
    graph_touchers_free(&T);
    free(mark);
    return best;
}
