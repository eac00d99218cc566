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
 * lower bound.
 *
 * The network is contracted before the flow: v's ancestors are joined to
 * the source and its descendants to the sink (infinite paths force them
 * there in every finite cut), so only the ops that can run before or after
 * v are nodes of their own.  Edges inside the source or the sink side go,
 * edges into the source or out of the sink carry no flow and go too, and
 * a storage whose cut is forced (made on the source side, touched on the
 * sink side) is counted outside the flow.  The minimum cut, and so the
 * value, is the same; the flow runs on the part of the graph where the
 * choice is, not on the whole graph, which the max-flow made superlinear. */
#include "graph.h"
#include "base.h"
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

/* Side of op w in the contracted network (node[w]): CUT_ANC for v and its
 * ancestors, CUT_DESC for its descendants, CUT_FREE for the others until
 * they are numbered. */
#define CUT_ANC (-1)
#define CUT_DESC (-2)
#define CUT_FREE (-3)
/* Node numbers: the source, the sink, then free ops, then aux nodes. */
#define CUT_SRC_NODE 0
#define CUT_SINK_NODE 1

/* Marks v's ancestors CUT_ANC and its descendants CUT_DESC in node (every
 * entry CUT_FREE on entry), with stack as scratch (n_ops entries). */
static void cut_sides(const graph *g, int v, int *node, int *stack) {
    size_t top = 0;
    node[v] = CUT_ANC;
    stack[top++] = v;
    while (top) {
        int w = stack[--top];
        for (size_t k = g->pred_start[w]; k < g->pred_start[w + 1]; k++)
            if (node[g->pred[k]] != CUT_ANC) node[g->pred[k]] = CUT_ANC, stack[top++] = g->pred[k];
    }
    for (size_t k = g->succ_start[v]; k < g->succ_start[v + 1]; k++)
        if (node[g->succ[k]] != CUT_DESC) node[g->succ[k]] = CUT_DESC, stack[top++] = g->succ[k];
    while (top) {
        int w = stack[--top];
        for (size_t k = g->succ_start[w]; k < g->succ_start[w + 1]; k++)
            if (node[g->succ[k]] != CUT_DESC)
                node[g->succ[k]] = CUT_DESC, stack[top++] = g->succ[k];
    }
}

/* The network node of op w: the source for an ancestor, the sink for a
 * descendant, else its own. */
static igraph_integer_t cut_node(const int *node, int w) {
    return node[w] == CUT_ANC ? CUT_SRC_NODE : node[w] == CUT_DESC ? CUT_SINK_NODE : node[w];
}

/* What every cut of one graph shares: the graph, who touches each storage,
 * the capacity that stands for infinity (cut_infinity), and scratch: mark
 * n_storages zeros (left zeroed), node and stack n_ops entries each. */
typedef struct cut_work {
    const graph *g;
    const graph_touchers *T;
    double inf;
    unsigned char *mark;
    int *node, *stack;
} cut_work;

/* The minimum over schedules of the bytes live at op v.  Restricted, when asked, to the schedules that run op
 * in_op (>= 0) before v, or the ops out[0..n_out) after v: an infinite edge
 * from the source to the op, or from the op to the sink, puts it on that
 * side (and, through the ordering edges, its ancestors or descendants with
 * it).  Returns UINT64_MAX when igraph fails, or when the restriction cannot hold
 * (in_op a descendant of v, an op of out an ancestor of v). */
static uint64_t cut_min_live_in_out(const cut_work *cw, int v, int in_op, const int *out,
                                    size_t n_out);

/* The edges of storage s (not touched by v) in the network of v whose op
 * sides are node[] (see the top of the file), aux nodes numbered from
 * *next on; a storage whose cut is forced adds its size to *fixed instead.
 * Returns non-zero when igraph fails, 0 otherwise. */
static int cut_add_storage(const graph *g, const graph_touchers *T, const int *node, double inf,
                           int s, cut_net *c, igraph_integer_t *next, uint64_t *fixed) {
    const graph_storage *st = &g->storages[s];
    int maker = T->maker[s];
    if (!st->has_input && maker < 0) return 0; /* neither made nor an input: never live */
    igraph_integer_t from = st->has_input ? CUT_SRC_NODE : cut_node(node, maker);
    if (from == CUT_SINK_NODE) return 0; /* made after v: not live at v */
    /* aux -> toucher edges: one into the sink puts aux there */
    bool to_sink = graph_storage_outlives(g, st), any_free = false;
    for (size_t k = T->start[s]; k < T->start[s + 1] && !to_sink; k++) {
        int t = T->ops[k];
        if (!st->has_input && t == maker) continue;
        if (node[t] == CUT_DESC)
            to_sink = true;
        else if (node[t] >= 0)
            any_free = true;
    }
    if (to_sink) { /* live to the end, or read after v */
        if (from != CUT_SRC_NODE) return cut_add(c, from, CUT_SINK_NODE, (double)st->size);
        *fixed += st->size; /* made before v: live at v */
        return 0;
    }
    if (!any_free) return 0; /* all touchers before v: aux joins the source side for free */
    igraph_integer_t aux = (*next)++;
    int bad = cut_add(c, from, aux, (double)st->size);
    for (size_t k = T->start[s]; k < T->start[s + 1] && !bad; k++) {
        int t = T->ops[k];
        if ((st->has_input || t != maker) && node[t] >= 0) bad = cut_add(c, aux, node[t], inf);
    }
    return bad;
}

/* The maximum flow from the source to the sink of c (n_nodes nodes), or
 * UINT64_MAX when igraph fails or the flow is infinite. */
static uint64_t cut_max_flow(const cut_net *c, igraph_integer_t n_nodes, double inf) {
    uint64_t result = UINT64_MAX;
    igraph_t ig;
    if (!igraph_create(&ig, &c->ends, n_nodes, IGRAPH_DIRECTED)) {
        igraph_real_t flow = 0;
        if (!igraph_maxflow_value(&ig, &flow, CUT_SRC_NODE, CUT_SINK_NODE, &c->cap, NULL) &&
            flow >= 0 && flow < inf)
            result = (uint64_t)flow;
        igraph_destroy(&ig);
    }
    return result;
}

static uint64_t cut_min_live(const cut_work *cw, int v) {
    return cut_min_live_in_out(cw, v, -1, NULL, 0);
}

static uint64_t cut_min_live_in_out(const cut_work *cw, int v, int in_op, const int *out,
                                    size_t n_out) {
    const graph *g = cw->g;
    const graph_touchers *T = cw->T;
    double inf = cw->inf;
    unsigned char *mark = cw->mark;
    int *node = cw->node, *stack = cw->stack;
    size_t n = g->n_ops, ns = g->n_storages;
    uint64_t fixed = 0;
    for (size_t k = g->touch_start[v]; k < g->touch_start[v + 1]; k++) {
        mark[g->touch[k]] = 1;
        fixed += g->storages[g->touch[k]].size;
    }
    for (size_t w = 0; w < n; w++) node[w] = CUT_FREE;
    cut_sides(g, v, node, stack);
    igraph_integer_t next = 2; /* free ops, then aux nodes as needed */
    for (size_t w = 0; w < n; w++)
        if (node[w] == CUT_FREE) node[w] = (int)next++;
    cut_net c = {.n_edges = 0};
    graph_igraph_lock();
    bool ok = !igraph_vector_int_init(&c.ends, 0);
    if (ok && igraph_vector_init(&c.cap, 0)) {
        igraph_vector_int_destroy(&c.ends);
        ok = false;
    }
    if (!ok) {
        graph_igraph_unlock();
        for (size_t k = g->touch_start[v]; k < g->touch_start[v + 1]; k++) mark[g->touch[k]] = 0;
        return UINT64_MAX;
    }
    /* ordering edges w -> pred between free ops: a pred of an ancestor is
     * one, a free op has no descendant of v as pred, and the rest are
     * edges into the source or out of the sink */
    int bad = 0;
    for (size_t w = 0; w < n && !bad; w++) {
        if (node[w] < 0) continue;
        for (size_t k = g->pred_start[w]; k < g->pred_start[w + 1] && !bad; k++)
            if (node[g->pred[k]] >= 0) bad = cut_add(&c, node[w], node[g->pred[k]], inf);
    }
    for (size_t s = 0; s < ns && !bad; s++)
        if (!mark[s]) bad = cut_add_storage(g, T, node, inf, (int)s, &c, &next, &fixed);
    for (size_t k = g->touch_start[v]; k < g->touch_start[v + 1]; k++) mark[g->touch[k]] = 0;
    if (in_op >= 0 && !bad) {
        if (node[in_op] == CUT_DESC)
            bad = 1;
        else if (node[in_op] >= 0)
            bad = cut_add(&c, CUT_SRC_NODE, node[in_op], inf);
    }
    for (size_t k = 0; k < n_out && !bad; k++) {
        if (node[out[k]] == CUT_ANC)
            bad = 1;
        else if (node[out[k]] >= 0)
            bad = cut_add(&c, node[out[k]], CUT_SINK_NODE, inf);
    }

    uint64_t result = UINT64_MAX;
    if (!bad && c.n_edges == 0)
        result = fixed;
    else if (!bad) {
        uint64_t flow = cut_max_flow(&c, next, inf);
        if (flow != UINT64_MAX) result = fixed + flow;
    }
    igraph_vector_int_destroy(&c.ends);
    igraph_vector_destroy(&c.cap);
    graph_igraph_unlock();
    return result;
}

/* The capacity that stands for infinity: above every cut of finite
 * edges.  Capacities are doubles in igraph, so every sum must stay an exact
 * integer: 0 when the storages add up to 2^51 or more. */
static double cut_infinity(const graph *g) {
    double total = 0;
    for (size_t s = 0; s < g->n_storages; s++) total += (double)g->storages[s].size;
    return total >= 9007199254740992.0 / 4 ? 0 : 2 * total + 1;
}

uint64_t graph_min_live(const graph *g, const int *ops, size_t n_given) {
    size_t ns = g->n_storages;
    double inf = cut_infinity(g);
    if (inf == 0) return 0;

    graph_touchers T;
    graph_touchers_build(g, &T);
    unsigned char *mark = xcalloc(ns, 1);
    int *node = xmallocarray(g->n_ops, sizeof *node),
        *stack = xmallocarray(g->n_ops, sizeof *stack);
    cut_work cw = {.g = g, .T = &T, .inf = inf, .mark = mark, .node = node, .stack = stack};
    uint64_t best = 0;
    for (size_t i = 0; i < n_given && best != UINT64_MAX; i++) {
        uint64_t live = cut_min_live(&cw, ops[i]);
        if (live == UINT64_MAX || live > best) best = live;
    }
    graph_touchers_free(&T);
    free(mark), free(node), free(stack);
    return best;
}

/* A case split on the ops that can run on either side of v (graph.h).
 * Why it is a lower bound of every schedule's peak: let E be what a
 * schedule runs before v.  If no op of W is in E, the bytes live at v are
 * at least A = (least live at v with W after v).  Otherwise some w of W runs
 * before v: then the bytes live at v are at least (least live at v with w
 * before it), and at w's own step v has not run, so the bytes live there are
 * at least (least live at w with v after it); the peak is at least the larger
 * of the two, B_w.  So every schedule's peak is >= min(A, min over W of B_w),
 * whatever W is.  Sharper, with W as a list w_1..w_k: split the schedules
 * by the first w_j of the list that runs before v (w_1..w_j-1 then run after
 * v, so also after w_j); case j is bounded by the larger of the least live
 * at v with w_j before it and w_1..w_j-1 after it, and the least live at
 * w_j with v and w_1..w_j-1 after it; the last case (none before v) by A.
 * W is built greedily among the candidates: free ops touching a storage
 * that the plain cut may drop (made before v or an input, not touched by
 * v, no toucher among v's descendants, not outliving the step), i.e. the
 * ops whose place decides whether such a storage is live at v; a candidate
 * joins when the bound with it is higher than without. */
uint64_t graph_min_live_split(const graph *g, int v, size_t max_candidates) {
    size_t n = g->n_ops, ns = g->n_storages;
    double inf = cut_infinity(g);
    if (inf == 0) return 0;

    graph_touchers T;
    graph_touchers_build(g, &T);
    unsigned char *mark = xcalloc(ns, 1), *cand_flag = xcalloc(n, 1);
    int *node = xmallocarray(n, sizeof *node), *stack = xmallocarray(n, sizeof *stack);
    int *side = xmallocarray(n, sizeof *side), *cands = xmallocarray(n, sizeof *cands);
    int *w_set = xmallocarray(n, sizeof *w_set);
    cut_work cw = {.g = g, .T = &T, .inf = inf, .mark = mark, .node = node, .stack = stack};
    uint64_t plain = cut_min_live(&cw, v);
    uint64_t result = plain;
    if (plain == UINT64_MAX) goto out;

    for (size_t w = 0; w < n; w++) side[w] = CUT_FREE;
    cut_sides(g, v, side, stack);
    for (size_t k = g->touch_start[v]; k < g->touch_start[v + 1]; k++) mark[g->touch[k]] = 1;
    size_t n_cands = 0;
    for (size_t s = 0; s < ns; s++) {
        const graph_storage *st = &g->storages[s];
        int maker = T.maker[s];
        if (mark[s] || graph_storage_outlives(g, st)) continue;
        if (!st->has_input && (maker < 0 || side[maker] != CUT_ANC)) continue;
        bool forced = false;
        for (size_t k = T.start[s]; k < T.start[s + 1]; k++) forced |= side[T.ops[k]] == CUT_DESC;
        if (forced) continue;
        for (size_t k = T.start[s]; k < T.start[s + 1]; k++) {
            int t = T.ops[k];
            if (side[t] == CUT_FREE && !cand_flag[t]) cand_flag[t] = 1, n_cands++;
        }
    }
    for (size_t k = g->touch_start[v]; k < g->touch_start[v + 1]; k++) mark[g->touch[k]] = 0;
    /* the first max_candidates in op order: any subset keeps the bound valid */
    size_t m = 0;
    for (size_t w = 0; w < n && m < max_candidates; w++)
        if (cand_flag[w]) cands[m++] = (int)w;

    /* W grows one candidate at a time, kept only when it raises the bound;
     * each case is conditioned on the members before it (see above). */
    size_t n_w = 0;
    uint64_t min_b = UINT64_MAX, best = plain;
    for (size_t i = 0; i < m; i++) {
        int w = cands[i];
        uint64_t a = cut_min_live_in_out(&cw, v, w, w_set, n_w);
        w_set[n_w] = v; /* at w's step: v and the members before w not run */
        uint64_t b = cut_min_live_in_out(&cw, w, -1, w_set, n_w + 1);
        if (a == UINT64_MAX || b == UINT64_MAX) continue; /* a failure only makes W smaller */
        if (b > a) a = b;                                 /* B_w */
        if (a <= best) continue;
        w_set[n_w] = w;
        uint64_t all_after = cut_min_live_in_out(&cw, v, -1, w_set, n_w + 1);
        if (all_after == UINT64_MAX) continue;
        uint64_t mb = a < min_b ? a : min_b;
        uint64_t bound = all_after < mb ? all_after : mb;
        if (bound <= best) continue;
        n_w++, min_b = mb, best = bound;
    }
    result = best;
out:
    graph_touchers_free(&T);
    free(mark), free(cand_flag), free(node), free(stack), free(side), free(cands), free(w_set);
    return result;
}
