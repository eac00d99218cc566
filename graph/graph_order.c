/* A lower bound of the theoretical peak over all orders (see graph.h); the
 * per-storage touchers and the bitset closure it and the cuts share. */
#include "graph.h"
#include "base.h"
#include "graph_internal.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------ lower bound */

void graph_touchers_build(const graph *g, graph_touchers *t) {
    size_t n = g->n_ops, ns = g->n_storages;
    t->maker = xmallocarray(ns, sizeof *t->maker);
    t->start = xcalloc(ns + 1, sizeof *t->start);
    t->ops = xmallocarray(g->touch_start[n], sizeof *t->ops);
    size_t *pos = xmallocarray(ns, sizeof *pos);
    for (size_t s = 0; s < ns; s++) t->maker[s] = -1;
    for (size_t v = 0; v < n; v++) {
        for (size_t k = g->make_start[v]; k < g->make_start[v + 1]; k++)
            t->maker[g->make[k]] = (int)v;
        for (size_t k = g->touch_start[v]; k < g->touch_start[v + 1]; k++)
            t->start[g->touch[k] + 1]++;
    }
    for (size_t s = 0; s < ns; s++) t->start[s + 1] += t->start[s];
    memcpy(pos, t->start, ns * sizeof *pos);
    for (size_t v = 0; v < n; v++)
        for (size_t k = g->touch_start[v]; k < g->touch_start[v + 1]; k++)
            t->ops[pos[g->touch[k]]++] = (int)v;
    free(pos);
}

void graph_touchers_free(graph_touchers *t) {
    free(t->maker), free(t->start), free(t->ops);
    memset(t, 0, sizeof *t);
}

void graph_closure_join(uint64_t *sets, size_t w, int v, const size_t *start, const int *adj) {
    uint64_t *b = sets + (size_t)v * w;
    for (size_t k = start[v]; k < start[v + 1]; k++) {
        int u = adj[k];
        const uint64_t *bu = sets + (size_t)u * w;
        for (size_t x = 0; x < w; x++) b[x] |= bu[x];
        b[u / 64] |= 1ull << (u % 64);
    }
}

/* The sum below is taken per storage, not per op: for each storage the
 * set of ops where it counts is a bitset expression (descendants of its
 * maker, and ancestors of one of its touchers, less its touchers), whose
 * members get its size.  Per op and storage, as the rule reads, it was
 * O(n x (storages + touches)), most of the time of a 12k-op plan; this is
 * O(n x storages / 64) word operations plus one addition per (op, storage)
 * counted.  Sums of sizes are exact, so the bound is the same. */
uint64_t graph_order_lower_bound(const graph *g, size_t max_ops) {
    uint64_t weak = graph_lower_bound(g);
    size_t n = g->n_ops, ns = g->n_storages, w = (n + 63) / 64;
    if (n == 0 || n > max_ops) return weak;
    int *topo = xmallocarray(n, sizeof *topo);
    uint64_t *desc = xcalloc(n * w, sizeof *desc); /* desc[v]: v's descendants */
    uint64_t *anc = xcalloc(n * w, sizeof *anc);   /* anc[v]: v's ancestors */
    uint64_t *mask = xmallocarray(w, sizeof *mask), *live = xcalloc(n, sizeof *live);
    graph_touchers T;
    graph_touchers_build(g, &T);
    graph_program_order(g, topo);
    for (size_t i = n; i-- > 0;) graph_closure_join(desc, w, topo[i], g->succ_start, g->succ);
    for (size_t i = 0; i < n; i++) graph_closure_join(anc, w, topo[i], g->pred_start, g->pred);
    /* at v: the storages v touches, and every other storage s made before
     * v (an input, or made by an ancestor of v) that is used after v (it
     * outlives the step, or a descendant of v touches it) */
    uint64_t everywhere = 0; /* storages counted at every op but their touchers */
    for (size_t v = 0; v < n; v++)
        for (size_t k = g->touch_start[v]; k < g->touch_start[v + 1]; k++)
            live[v] += g->storages[g->touch[k]].size;
    for (size_t s = 0; s < ns; s++) {
        const graph_storage *st = &g->storages[s];
        int mk = T.maker[s];
        bool after_always = graph_storage_outlives(g, st);
        if (!st->has_input && mk < 0) continue; /* never made: never before any op */
        if (st->has_input && after_always) {
            everywhere += st->size;
            for (size_t k = T.start[s]; k < T.start[s + 1]; k++) live[T.ops[k]] -= st->size;
            continue;
        }
        if (st->has_input)
            memset(mask, 0xff, w * sizeof *mask);
        else
            memcpy(mask, desc + (size_t)mk * w, w * sizeof *mask);
        if (!after_always) /* and an ancestor of one of its touchers */
            for (size_t x = 0; x < w; x++) {
                uint64_t any = 0;
                for (size_t k = T.start[s]; k < T.start[s + 1]; k++)
                    any |= anc[(size_t)T.ops[k] * w + x];
                mask[x] &= any;
            }
        for (size_t k = T.start[s]; k < T.start[s + 1]; k++)
            mask[T.ops[k] / 64] &= ~(1ull << (T.ops[k] % 64));
        if (n % 64) mask[w - 1] &= (1ull << (n % 64)) - 1;
        for (size_t x = 0; x < w; x++)
            for (uint64_t b = mask[x]; b; b &= b - 1)
                live[x * 64 + (size_t)__builtin_ctzll(b)] += st->size;
    }
    uint64_t best = weak;
    for (size_t v = 0; v < n; v++)
        if (live[v] + everywhere > best) best = live[v] + everywhere;
    free(topo), free(desc), free(anc), free(mask), free(live), graph_touchers_free(&T);
    return best;
}
