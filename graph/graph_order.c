/* Operator orders: LESCEA, block assignments, leaves and their exact
 * solution by dynamic programming over down-sets (see graph.h). */
#include "graph.h"
#include "base.h"
#include "graph_internal.h"

#include <assert.h>
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

/* ------------------------------------------------------------ blocks */

void graph_blocks_init(const graph *g, const int *block, int n_blocks, graph_blocks *B) {
    memset(B, 0, sizeof *B);
    B->n_blocks = n_blocks;
    B->block = block;
    B->first = xmallocarray(g->n_storages, sizeof *B->first);
    B->last = xmallocarray(g->n_storages, sizeof *B->last);
    B->op_start = xcalloc((size_t)n_blocks + 1, sizeof *B->op_start);
    B->ops = xmallocarray(g->n_ops, sizeof *B->ops);
    B->pos = xmallocarray(g->n_ops, sizeof *B->pos);
    B->through = xcalloc((size_t)n_blocks + 1, sizeof *B->through);
    for (size_t i = 0; i < g->n_ops; i++) {
        assert(block[i] >= 0 && block[i] < n_blocks);
        for (size_t k = g->succ_start[i]; k < g->succ_start[i + 1]; k++)
            assert(block[i] <= block[g->succ[k]]);
        B->op_start[block[i] + 1]++;
    }
    for (int b = 0; b < n_blocks; b++) B->op_start[b + 1] += B->op_start[b];
    size_t *pos = xmallocarray((size_t)n_blocks + 1, sizeof *pos);
    memcpy(pos, B->op_start, (size_t)n_blocks * sizeof *pos);
    for (size_t i = 0; i < g->n_ops; i++) {
        B->pos[i] = (int)(pos[block[i]] - B->op_start[block[i]]);
        B->ops[pos[block[i]]++] = (int)i;
    }
    free(pos);
    for (size_t s = 0; s < g->n_storages; s++) {
        const graph_storage *st = &g->storages[s];
        B->first[s] = -1;
        B->last[s] = graph_storage_outlives(g, st) ? INT32_MAX : -1;
    }
    for (size_t i = 0; i < g->n_ops; i++) {
        for (size_t k = g->make_start[i]; k < g->make_start[i + 1]; k++)
            B->first[g->make[k]] = block[i];
        for (size_t k = g->touch_start[i]; k < g->touch_start[i + 1]; k++)
            if (B->last[g->touch[k]] < block[i]) B->last[g->touch[k]] = block[i];
    }
    /* through: a difference array over the blocks strictly inside each
     * storage's span; unsigned wrap-around in the partial sums is harmless,
     * every final value is a true sum of sizes (< 2^62, graph_build) */
    for (size_t s = 0; s < g->n_storages; s++) {
        int64_t lo = (int64_t)B->first[s] + 1,
                hi = B->last[s] < n_blocks ? B->last[s] : n_blocks; /* [lo, hi) */
        if (lo >= hi) continue;
        B->through[lo] += g->storages[s].size;
        B->through[hi] -= g->storages[s].size;
    }
    for (int b = 1; b < n_blocks; b++) B->through[b] += B->through[b - 1];
}

void graph_blocks_free(graph_blocks *B) {
    free(B->first);
    free(B->last);
    free(B->op_start);
    free(B->ops);
    free(B->pos);
    free(B->through);
    memset(B, 0, sizeof *B);
}

/* ------------------------------------------------------------- leaves */

void graph_leaf_free(graph_leaf *L) {
    free(L->ops), free(L->st), free(L->size), free(L->live_in), free(L->live_out);
    free(L->touch_start), free(L->make_start), free(L->pred_start), free(L->succ_start);
    free(L->touch), free(L->make), free(L->pred), free(L->succ);
    memset(L, 0, sizeof *L);
}

/* Local index of global op v in the leaf being built: block b of B, or
 * (B NULL) the whole graph, where local and global indices coincide. */
static int graph_leaf_local_op(const graph_blocks *B, int b, int v) {
    if (!B) return v;
    return B->block[v] == b ? B->pos[v] : -1;
}

/* Global storage -> local index while a leaf is built: open addressing over
 * a table sized to the leaf's touches, not to the graph's storages, so that
 * building a leaf costs what the leaf holds. */
typedef struct graph_st_map {
    int *key, *val;
    size_t mask;
} graph_st_map;

static void graph_st_map_init(graph_st_map *m, size_t touches) {
    size_t cap = 16;
    while (cap < 2 * touches + 1) cap *= 2;
    m->key = xmallocarray(cap, sizeof *m->key);
    m->val = xmallocarray(cap, sizeof *m->val);
    m->mask = cap - 1;
    for (size_t i = 0; i < cap; i++) m->key[i] = -1;
}

/* Slot of storage s: key[slot] == s, or -1 there when s is absent. */
static size_t graph_st_map_slot(const graph_st_map *m, int s) {
    size_t h = ((uint64_t)(uint32_t)s * 0x9e3779b97f4a7c15ull) >> 20 & m->mask;
    while (m->key[h] >= 0 && m->key[h] != s) h = (h + 1) & m->mask;
    return h;
}

/* Builds the local structure of a leaf whose global ops are ops[0..n)
 * (ascending): block b of B, or the whole graph when B is NULL. */
static void graph_leaf_build(const graph *g, const int *ops, size_t n, const graph_blocks *B, int b,
                             graph_leaf *L) {
    memset(L, 0, sizeof *L);
    L->n_ops = n;
    size_t nt = 0, ne = 0;
    for (size_t i = 0; i < n; i++) {
        int v = ops[i];
        assert(graph_leaf_local_op(B, b, v) == (int)i);
        nt += g->touch_start[v + 1] - g->touch_start[v];
        for (size_t k = g->succ_start[v]; k < g->succ_start[v + 1]; k++)
            ne += graph_leaf_local_op(B, b, g->succ[k]) >= 0;
    }
    graph_st_map map;
    L->ops = xmallocarray(n, sizeof *L->ops);
    L->st = xmallocarray(nt, sizeof *L->st);
    L->touch_start = xcalloc(n + 1, sizeof(size_t));
    L->make_start = xcalloc(n + 1, sizeof(size_t));
    L->pred_start = xcalloc(n + 1, sizeof(size_t));
    L->succ_start = xcalloc(n + 1, sizeof(size_t));
    L->touch = xmallocarray(nt, sizeof(int));
    L->make = xmallocarray(nt, sizeof(int));
    L->pred = xmallocarray(ne, sizeof(int));
    L->succ = xmallocarray(ne, sizeof(int));
    graph_st_map_init(&map, nt);
    memcpy(L->ops, ops, n * sizeof *ops);
    size_t t = 0, m = 0, e = 0;
    for (size_t i = 0; i < n; i++) {
        int v = ops[i];
        for (size_t k = g->touch_start[v]; k < g->touch_start[v + 1]; k++) {
            int s = g->touch[k];
            size_t h = graph_st_map_slot(&map, s);
            if (map.key[h] < 0) map.key[h] = s, map.val[h] = (int)L->n_st, L->st[L->n_st++] = s;
            L->touch[t++] = map.val[h];
        }
        L->touch_start[i + 1] = t;
        for (size_t k = g->make_start[v]; k < g->make_start[v + 1]; k++) {
            /* a storage made by v is also touched by v (its output) */
            size_t h = graph_st_map_slot(&map, g->make[k]);
            assert(map.key[h] == g->make[k]);
            L->make[m++] = map.val[h];
        }
        L->make_start[i + 1] = m;
        for (size_t k = g->succ_start[v]; k < g->succ_start[v + 1]; k++) {
            int w = graph_leaf_local_op(B, b, g->succ[k]);
            if (w >= 0) L->succ[e++] = w;
        }
        L->succ_start[i + 1] = e;
    }
    /* predecessors: transpose of succ */
    for (size_t i = 0; i < n; i++)
        for (size_t k = L->succ_start[i]; k < L->succ_start[i + 1]; k++)
            L->pred_start[L->succ[k] + 1]++;
    for (size_t i = 0; i < n; i++) L->pred_start[i + 1] += L->pred_start[i];
    size_t *pos = xmallocarray(n, sizeof *pos);
    memcpy(pos, L->pred_start, n * sizeof *pos);
    for (size_t i = 0; i < n; i++)
        for (size_t k = L->succ_start[i]; k < L->succ_start[i + 1]; k++)
            L->pred[pos[L->succ[k]]++] = (int)i;
    free(pos);
    free(map.key), free(map.val);
    L->size = xmallocarray(L->n_st, sizeof *L->size);
    L->live_in = xcalloc(L->n_st, sizeof *L->live_in);
    L->live_out = xcalloc(L->n_st, sizeof *L->live_out);
    for (size_t j = 0; j < L->n_st; j++) {
        L->size[j] = g->storages[L->st[j]].size;
        L->live_in[j] = true;
    }
    for (size_t k = 0; k < L->make_start[n]; k++) L->live_in[L->make[k]] = false;
}

void graph_leaf_init(const graph *g, const graph_blocks *B, int b, graph_leaf *L) {
    size_t n = B->op_start[b + 1] - B->op_start[b];
    graph_leaf_build(g, B->ops + B->op_start[b], n, B, b, L);
    /* Live through the block but untouched: created before, used after
     * (B->through), less the touched ones, which count as leaf storages. */
    L->base = B->through[b];
    for (size_t j = 0; j < L->n_st; j++) {
        int s = L->st[j];
        L->live_out[j] = B->last[s] > b;
        if (B->first[s] < b && B->last[s] > b) L->base -= g->storages[s].size;
    }
}

void graph_leaf_init_all(const graph *g, graph_leaf *L) {
    int *ops = xmallocarray(g->n_ops, sizeof *ops);
    for (size_t i = 0; i < g->n_ops; i++) ops[i] = (int)i;
    graph_leaf_build(g, ops, g->n_ops, NULL, 0, L);
    for (size_t j = 0; j < L->n_st; j++)
        L->live_out[j] = graph_storage_outlives(g, &g->storages[L->st[j]]);
    free(ops);
}

uint64_t graph_leaf_peak(const graph_leaf *L, const int *order) {
    size_t n = L->n_ops, ns = L->n_st;
    int32_t *start = xcalloc(ns, sizeof *start), *end = xcalloc(ns, sizeof *end);
    int64_t *delta = xcalloc(n + 1, sizeof *delta);
    for (size_t step = 0; step < n; step++) {
        int v = order[step];
        for (size_t k = L->make_start[v]; k < L->make_start[v + 1]; k++)
            start[L->make[k]] = (int32_t)step;
        for (size_t k = L->touch_start[v]; k < L->touch_start[v + 1]; k++)
            end[L->touch[k]] = (int32_t)step;
    }
    for (size_t j = 0; j < ns; j++) {
        if (L->live_out[j]) end[j] = (int32_t)n - 1;
        delta[start[j]] += (int64_t)L->size[j];
        delta[end[j] + 1] -= (int64_t)L->size[j];
    }
    int64_t live = 0;
    uint64_t peak = L->base;
    for (size_t s = 0; s < n; s++) {
        live += delta[s];
        if (L->base + (uint64_t)live > peak) peak = L->base + (uint64_t)live;
    }
    free(start), free(end), free(delta);
    return peak;
}

bool graph_leaf_order_valid(const graph_leaf *L, const int *order) {
    size_t n = L->n_ops;
    int *pos = xmallocarray(n, sizeof *pos);
    for (size_t i = 0; i < n; i++) pos[i] = -1;
    bool ok = true;
    for (size_t s = 0; s < n && ok; s++) {
        int v = order[s];
        if (v < 0 || (size_t)v >= n || pos[v] >= 0)
            ok = false;
        else
            pos[v] = (int)s;
    }
    for (size_t i = 0; i < n && ok; i++)
        for (size_t k = L->succ_start[i]; k < L->succ_start[i + 1]; k++)
            if (pos[i] >= pos[L->succ[k]]) ok = false;
    free(pos);
    return ok;
}

uint64_t graph_leaf_lower_bound(const graph_leaf *L) {
    uint64_t always = L->base;
    for (size_t j = 0; j < L->n_st; j++)
        if (L->live_in[j] && L->live_out[j]) always += L->size[j];
    uint64_t best = always;
    for (size_t i = 0; i < L->n_ops; i++) {
        uint64_t w = always;
        for (size_t k = L->touch_start[i]; k < L->touch_start[i + 1]; k++) {
            int j = L->touch[k];
            if (!(L->live_in[j] && L->live_out[j])) w += L->size[j];
        }
        if (w > best) best = w;
    }
    return best;
}

/* ------------------------------------------------------- heuristics */

static int graph_key_cmp(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

void graph_leaf_program(const graph_leaf *L, const int *program_pos, int *order) {
    /* key = program position, then local index: both fit in 31 bits */
    size_t n = L->n_ops;
    int64_t *key = xmallocarray(n, sizeof *key);
    for (size_t i = 0; i < n; i++) key[i] = ((int64_t)program_pos[L->ops[i]] << 31) | (int64_t)i;
    qsort(key, n, sizeof *key, graph_key_cmp);
    for (size_t i = 0; i < n; i++) order[i] = (int)(key[i] & INT32_MAX);
    free(key);
}

/* LESCEA's ready set as a binary heap of (delta, op) entries, smallest
 * first: the same choice as scanning the ready set for the least delta,
 * ties to the lowest op, in O(log n) instead of O(ready) a step (the whole
 * graph's ready set holds every pending weight update: tens of thousands).
 * A ready op's delta only falls (when it becomes the last toucher of a
 * storage), so a fall pushes a new entry and the old one is skipped when
 * popped. */
typedef struct graph_heap_entry {
    int64_t delta;
    int op;
} graph_heap_entry;

static bool graph_heap_less(const graph_heap_entry *a, const graph_heap_entry *b) {
    return a->delta < b->delta || (a->delta == b->delta && a->op < b->op);
}

static void graph_heap_push(graph_heap_entry *h, size_t *n, graph_heap_entry e) {
    size_t i = (*n)++;
    while (i > 0 && graph_heap_less(&e, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = e;
}

static graph_heap_entry graph_heap_pop(graph_heap_entry *h, size_t *n) {
    graph_heap_entry top = h[0], e = h[--*n];
    size_t i = 0, m = *n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && graph_heap_less(&h[c + 1], &h[c])) c++;
        if (!graph_heap_less(&h[c], &e)) break;
        h[i] = h[c];
        i = c;
    }
    if (m) h[i] = e;
    return top;
}

void graph_leaf_lescea(const graph_leaf *L, int *order) {
    size_t n = L->n_ops, ns = L->n_st, nt = L->touch_start[n];
    int *indeg = xmallocarray(n, sizeof *indeg);
    int *remaining = xcalloc(ns, sizeof *remaining);  /* touchers not yet run */
    int64_t *delta = xmallocarray(n, sizeof *delta);  /* of ready ops */
    unsigned char *state = xcalloc(n, 1);             /* 1 ready, 2 run */
    size_t *tstart = xcalloc(ns + 1, sizeof *tstart); /* touchers of each storage */
    int *tops = xmallocarray(nt, sizeof *tops);
    /* every op is pushed once when ready and once more per storage it
     * becomes the last toucher of */
    graph_heap_entry *heap = xmallocarray(n + ns + 1, sizeof *heap);
    for (size_t k = 0; k < nt; k++) remaining[L->touch[k]]++, tstart[L->touch[k] + 1]++;
    for (size_t j = 0; j < ns; j++) tstart[j + 1] += tstart[j];
    for (size_t i = 0; i < n; i++)
        for (size_t k = L->touch_start[i]; k < L->touch_start[i + 1]; k++)
            tops[tstart[L->touch[k]]++] = (int)i;
    for (size_t j = ns; j > 0; j--) tstart[j] = tstart[j - 1]; /* shifted back by the fill */
    tstart[0] = 0;
    size_t n_heap = 0;
    /* net memory increase of running v now: what it creates, minus what
     * it is the last remaining toucher of */
#define GRAPH_LESCEA_READY(v)                                                                      \
    do {                                                                                           \
        int64_t d_ = 0;                                                                            \
        for (size_t k_ = L->make_start[v]; k_ < L->make_start[(v) + 1]; k_++)                      \
            d_ += (int64_t)L->size[L->make[k_]];                                                   \
        for (size_t k_ = L->touch_start[v]; k_ < L->touch_start[(v) + 1]; k_++) {                  \
            int j_ = L->touch[k_];                                                                 \
            if (remaining[j_] == 1 && !L->live_out[j_]) d_ -= (int64_t)L->size[j_];                \
        }                                                                                          \
        delta[v] = d_, state[v] = 1;                                                               \
        graph_heap_push(heap, &n_heap, (graph_heap_entry){d_, (int)(v)});                          \
    } while (0)
    for (size_t i = 0; i < n; i++) {
        indeg[i] = (int)(L->pred_start[i + 1] - L->pred_start[i]);
        if (!indeg[i]) GRAPH_LESCEA_READY(i);
    }
    for (size_t step = 0; step < n; step++) {
        graph_heap_entry e;
        do {
            assert(n_heap > 0);
            e = graph_heap_pop(heap, &n_heap);
        } while (state[e.op] != 1 || e.delta != delta[e.op]);
        int v = e.op;
        state[v] = 2;
        order[step] = v;
        for (size_t k = L->touch_start[v]; k < L->touch_start[v + 1]; k++) {
            int j = L->touch[k];
            if (--remaining[j] != 1 || L->live_out[j]) continue;
            /* one toucher left: if it is ready, running it now frees j */
            for (size_t q = tstart[j]; q < tstart[j + 1]; q++) {
                int u = tops[q];
                if (state[u] == 2) continue;
                if (state[u] == 1) {
                    delta[u] -= (int64_t)L->size[j];
                    graph_heap_push(heap, &n_heap, (graph_heap_entry){delta[u], u});
                }
                break;
            }
        }
        for (size_t k = L->succ_start[v]; k < L->succ_start[v + 1]; k++) {
            int u = L->succ[k];
            if (--indeg[u] == 0) GRAPH_LESCEA_READY(u);
        }
    }
#undef GRAPH_LESCEA_READY
    free(indeg), free(remaining), free(delta), free(state), free(tstart), free(tops), free(heap);
}

void graph_order_lescea(const graph *g, int *order) {
    graph_leaf L;
    graph_leaf_init_all(g, &L);
    graph_leaf_lescea(&L, order); /* local index i is op i for the whole graph */
    graph_leaf_free(&L);
}

/* ------------------------------------------- exact: DP over down-sets
 *
 * A state is the set S of ops already run (closed under predecessors).
 * resident(S) = bytes of leaf storages alive between steps; running a ready
 * op v costs base + resident(S) + bytes v creates, and leads to S + v.  The
 * best peak to reach each state is a min-max path problem over the layers
 * |S| = 0..n; each layer is a hash set of states.  Transitions above the
 * upper bound are pruned, so a good heuristic keeps the layers thin. */

typedef struct graph_dp {
    size_t words;    /* 64-bit words per state bitset */
    uint64_t *bits;  /* states' bitsets, contiguous */
    uint64_t *cost;  /* best peak to reach the state */
    uint64_t *res;   /* resident bytes at the state */
    int32_t *parent; /* state index it was reached from, -1 for the empty set */
    int32_t *via;    /* op run to reach it */
    size_t n, cap;
} graph_dp;

static uint64_t graph_dp_hash(const uint64_t *b, size_t w) {
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < w; i++) {
        h ^= b[i] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
        h *= 0xff51afd7ed558ccdull;
    }
    return h ^ (h >> 33);
}

static void graph_dp_grow(graph_dp *d) {
    d->cap = d->cap ? 2 * d->cap : 1024;
    d->bits = xreallocarray(d->bits, d->cap * d->words, sizeof *d->bits);
    d->cost = xreallocarray(d->cost, d->cap, sizeof *d->cost);
    d->res = xreallocarray(d->res, d->cap, sizeof *d->res);
    d->parent = xreallocarray(d->parent, d->cap, sizeof *d->parent);
    d->via = xreallocarray(d->via, d->cap, sizeof *d->via);
}

/* Beam selection: keeps the best `width` states of the layer [lo, d->n)
 * by (cost, resident bytes, creation index), moved to the front of the
 * layer.  Deterministic: the key is total. */
typedef struct graph_beam_key {
    uint64_t cost, res;
    size_t idx;
} graph_beam_key;

static int graph_beam_cmp(const void *a, const void *b) {
    const graph_beam_key *x = a, *y = b;
    if (x->cost != y->cost) return x->cost < y->cost ? -1 : 1;
    if (x->res != y->res) return x->res < y->res ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

static void graph_beam_cut(graph_dp *d, size_t lo, size_t width) {
    size_t n = d->n - lo;
    if (n <= width) return;
    graph_beam_key *k = xmallocarray(n, sizeof *k);
    for (size_t i = 0; i < n; i++) k[i] = (graph_beam_key){d->cost[lo + i], d->res[lo + i], lo + i};
    qsort(k, n, sizeof *k, graph_beam_cmp);
    /* kept states in index order, so copying forward never overwrites one
     * not yet copied */
    size_t *keep = xmallocarray(width, sizeof *keep);
    for (size_t i = 0; i < width; i++) keep[i] = k[i].idx;
    for (size_t i = 1; i < width; i++) { /* insertion sort: width is small */
        size_t x = keep[i], j = i;
        while (j > 0 && keep[j - 1] > x) keep[j] = keep[j - 1], j--;
        keep[j] = x;
    }
    for (size_t i = 0; i < width; i++) {
        size_t src = keep[i], dst = lo + i;
        assert(dst <= src);
        memmove(d->bits + dst * d->words, d->bits + src * d->words, d->words * sizeof *d->bits);
        d->cost[dst] = d->cost[src], d->res[dst] = d->res[src];
        d->parent[dst] = d->parent[src], d->via[dst] = d->via[src];
    }
    d->n = lo + width;
    free(k), free(keep);
}

static int graph_leaf_dp(const graph_leaf *L, uint64_t upper, size_t max_states, size_t beam,
                         int *order, uint64_t *peak_out);

int graph_leaf_exact(const graph_leaf *L, uint64_t upper, size_t max_states, int *order,
                     uint64_t *peak_out) {
    return graph_leaf_dp(L, upper, max_states, 0, order, peak_out);
}

int graph_leaf_beam(const graph_leaf *L, uint64_t upper, size_t width, int *order,
                    uint64_t *peak_out) {
    assert(width > 0);
    return graph_leaf_dp(L, upper, SIZE_MAX, width, order, peak_out);
}

static int graph_leaf_dp(const graph_leaf *L, uint64_t upper, size_t max_states, size_t beam,
                         int *order, uint64_t *peak_out) {
    size_t n = L->n_ops, ns = L->n_st;
    assert(n <= 512);
    if (n == 0) {
        *peak_out = L->base;
        return 1;
    }
    size_t w = (n + 63) / 64;
    graph_dp d = {.words = w};
    /* per storage: bitset of its touchers in the leaf */
    uint64_t *touchers = xcalloc(ns * w, sizeof *touchers);
    uint64_t *predmask = xcalloc(n * w, sizeof *predmask);
    uint64_t *cand = xmallocarray(w, sizeof *cand);
    size_t hcap = 0;
    int32_t *table = NULL;
    for (size_t i = 0; i < n; i++) {
        for (size_t k = L->touch_start[i]; k < L->touch_start[i + 1]; k++)
            touchers[(size_t)L->touch[k] * w + i / 64] |= 1ull << (i % 64);
        for (size_t k = L->pred_start[i]; k < L->pred_start[i + 1]; k++)
            predmask[i * w + (size_t)L->pred[k] / 64] |= 1ull << (L->pred[k] % 64);
    }
    graph_dp_grow(&d);
    size_t layer_lo = 0, layer_hi = 1;
    uint64_t res0 = 0;
    for (size_t j = 0; j < ns; j++)
        if (L->live_in[j]) res0 += L->size[j];
    memset(d.bits, 0, w * sizeof *d.bits);
    d.cost[0] = L->base + res0, d.res[0] = res0, d.parent[0] = -1, d.via[0] = -1;
    d.n = 1;
    int result = 1;
    for (size_t layer = 0; layer < n && result == 1; layer++) {
        /* hash table for the next layer: open addressing, power of two */
        size_t want = 2 * (layer_hi - layer_lo) * 4 + 16, hc = 16;
        while (hc < want) hc *= 2;
        if (hc > hcap) table = xreallocarray(table, hc, sizeof *table), hcap = hc;
        size_t mask = hc - 1, next_count = 0;
        for (size_t i = 0; i < hc; i++) table[i] = -1;
        for (size_t si = layer_lo; si < layer_hi && result == 1; si++) {
            for (size_t v = 0; v < n; v++) {
                const uint64_t *S = d.bits + si * w;
                if (S[v / 64] >> (v % 64) & 1) continue;
                bool ready = true;
                for (size_t x = 0; x < w && ready; x++) ready = (predmask[v * w + x] & ~S[x]) == 0;
                if (!ready) continue;
                uint64_t made = 0, freed = 0;
                for (size_t k = L->make_start[v]; k < L->make_start[v + 1]; k++)
                    made += L->size[L->make[k]];
                for (size_t x = 0; x < w; x++) cand[x] = S[x];
                cand[v / 64] |= 1ull << (v % 64);
                for (size_t k = L->touch_start[v]; k < L->touch_start[v + 1]; k++) {
                    int j = L->touch[k];
                    if (L->live_out[j]) continue;
                    bool done = true;
                    for (size_t x = 0; x < w && done; x++)
                        done = (touchers[(size_t)j * w + x] & ~cand[x]) == 0;
                    if (done) freed += L->size[j];
                }
                uint64_t step = L->base + d.res[si] + made;
                uint64_t cost = step > d.cost[si] ? step : d.cost[si];
                if (cost > upper) continue;
                uint64_t res = d.res[si] + made - freed;
                size_t h = (size_t)graph_dp_hash(cand, w) & mask;
                while (table[h] >= 0 &&
                       memcmp(d.bits + (size_t)table[h] * w, cand, w * sizeof *cand) != 0)
                    h = (h + 1) & mask;
                if (table[h] >= 0) {
                    size_t t = (size_t)table[h];
                    if (cost < d.cost[t])
                        d.cost[t] = cost, d.parent[t] = (int32_t)si, d.via[t] = (int32_t)v;
                    continue;
                }
                if (d.n >= max_states) {
                    result = 0;
                    break;
                }
                if (d.n == d.cap) graph_dp_grow(&d);
                memcpy(d.bits + d.n * w, cand, w * sizeof *cand);
                d.cost[d.n] = cost, d.res[d.n] = res, d.parent[d.n] = (int32_t)si,
                d.via[d.n] = (int32_t)v;
                table[h] = (int32_t)d.n++;
                if (++next_count * 2 > hc) {
                    /* keep the load factor under 1/2: rehash the layer */
                    hc *= 2, mask = hc - 1, hcap = hc;
                    table = xreallocarray(table, hc, sizeof *table);
                    for (size_t i = 0; i < hc; i++) table[i] = -1;
                    for (size_t s2 = layer_hi; s2 < d.n; s2++) {
                        size_t h2 = (size_t)graph_dp_hash(d.bits + s2 * w, w) & mask;
                        while (table[h2] >= 0) h2 = (h2 + 1) & mask;
                        table[h2] = (int32_t)s2;
                    }
                }
            }
        }
        if (result == 1 && beam) graph_beam_cut(&d, layer_hi, beam);
        layer_lo = layer_hi, layer_hi = d.n;
        /* pruning by the bound can empty a layer only when upper is below
         * every order's peak */
        if (result == 1 && layer_lo == layer_hi) result = 0;
    }
    if (result == 1) {
        assert(layer_hi - layer_lo == 1); /* the full set */
        int32_t s = (int32_t)layer_lo;
        *peak_out = d.cost[s];
        for (size_t step = n; step-- > 0;) {
            order[step] = d.via[s];
            s = d.parent[s];
        }
        assert(s == 0);
    }
    free(touchers), free(predmask), free(cand), free(table);
    free(d.bits), free(d.cost), free(d.res), free(d.parent), free(d.via);
    return result;
}
