/* Leaves of a block assignment and their orders: program order, LESCEA,
 * the exact DP over down-sets and its beam (see leaf.h). */
#include "leaf.h"
#include "base.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ blocks */

void leaf_blocks_init(const graph *g, const int *block, int n_blocks, leaf_blocks *B) {
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
        ROAMC_ASSERT(block[i] >= 0 && block[i] < n_blocks);
        for (size_t k = g->succ_start[i]; k < g->succ_start[i + 1]; k++)
            ROAMC_ASSERT(block[i] <= block[g->succ[k]]);
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

void leaf_blocks_free(leaf_blocks *B) {
    free(B->first);
    free(B->last);
    free(B->op_start);
    free(B->ops);
    free(B->pos);
    free(B->through);
    memset(B, 0, sizeof *B);
}

/* ------------------------------------------------------------- leaves */

void leaf_free(leaf_graph *L) {
    free(L->ops), free(L->st), free(L->size), free(L->live_in), free(L->live_out);
    free(L->touch_start), free(L->make_start), free(L->pred_start), free(L->succ_start);
    free(L->touch), free(L->make), free(L->pred), free(L->succ);
    memset(L, 0, sizeof *L);
}

/* Local index of global op v in the leaf being built: block b of B, or
 * (B NULL) the whole graph, where local and global indices coincide. */
static int leaf_local_op(const leaf_blocks *B, int b, int v) {
    if (!B) return v;
    return B->block[v] == b ? B->pos[v] : -1;
}

/* Global storage -> local index while a leaf is built: open addressing over
 * a table sized to the leaf's touches, not to the graph's storages, so that
 * building a leaf costs what the leaf holds. */
typedef struct leaf_st_map {
    int *key, *val;
    size_t mask;
} leaf_st_map;

static void leaf_st_map_init(leaf_st_map *m, size_t touches) {
    size_t cap = 16;
    while (cap < 2 * touches + 1) cap *= 2;
    m->key = xmallocarray(cap, sizeof *m->key);
    m->val = xmallocarray(cap, sizeof *m->val);
    m->mask = cap - 1;
    for (size_t i = 0; i < cap; i++) m->key[i] = -1;
}

/* Slot of storage s: key[slot] == s, or -1 there when s is absent. */
static size_t leaf_st_map_slot(const leaf_st_map *m, int s) {
    size_t h = ((uint64_t)(uint32_t)s * 0x9e3779b97f4a7c15ull) >> 20 & m->mask;
    while (m->key[h] >= 0 && m->key[h] != s) h = (h + 1) & m->mask;
    return h;
}

/* Builds the local structure of a leaf whose global ops are ops[0..n)
 * (ascending): block b of B, or the whole graph when B is NULL. */
static void leaf_build(const graph *g, const int *ops, size_t n, const leaf_blocks *B, int b,
                       leaf_graph *L) {
    memset(L, 0, sizeof *L);
    L->n_ops = n;
    size_t nt = 0, ne = 0;
    for (size_t i = 0; i < n; i++) {
        int v = ops[i];
        ROAMC_ASSERT(leaf_local_op(B, b, v) == (int)i);
        nt += g->touch_start[v + 1] - g->touch_start[v];
        for (size_t k = g->succ_start[v]; k < g->succ_start[v + 1]; k++)
            ne += leaf_local_op(B, b, g->succ[k]) >= 0;
    }
    leaf_st_map map;
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
    leaf_st_map_init(&map, nt);
    memcpy(L->ops, ops, n * sizeof *ops);
    size_t t = 0, m = 0, e = 0;
    for (size_t i = 0; i < n; i++) {
        int v = ops[i];
        for (size_t k = g->touch_start[v]; k < g->touch_start[v + 1]; k++) {
            int s = g->touch[k];
            size_t h = leaf_st_map_slot(&map, s);
            if (map.key[h] < 0) map.key[h] = s, map.val[h] = (int)L->n_st, L->st[L->n_st++] = s;
            L->touch[t++] = map.val[h];
        }
        L->touch_start[i + 1] = t;
        for (size_t k = g->make_start[v]; k < g->make_start[v + 1]; k++) {
            /* a storage made by v is also touched by v (its output) */
            size_t h = leaf_st_map_slot(&map, g->make[k]);
            ROAMC_ASSERT(map.key[h] == g->make[k]);
            L->make[m++] = map.val[h];
        }
        L->make_start[i + 1] = m;
        for (size_t k = g->succ_start[v]; k < g->succ_start[v + 1]; k++) {
            int w = leaf_local_op(B, b, g->succ[k]);
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

void leaf_init(const graph *g, const leaf_blocks *B, int b, leaf_graph *L) {
    size_t n = B->op_start[b + 1] - B->op_start[b];
    leaf_build(g, B->ops + B->op_start[b], n, B, b, L);
    /* Live through the block but untouched: created before, used after
     * (B->through), less the touched ones, which count as leaf storages. */
    L->base = B->through[b];
    for (size_t j = 0; j < L->n_st; j++) {
        int s = L->st[j];
        L->live_out[j] = B->last[s] > b;
        if (B->first[s] < b && B->last[s] > b) L->base -= g->storages[s].size;
    }
}

void leaf_init_all(const graph *g, leaf_graph *L) {
    int *ops = xmallocarray(g->n_ops, sizeof *ops);
    for (size_t i = 0; i < g->n_ops; i++) ops[i] = (int)i;
    leaf_build(g, ops, g->n_ops, NULL, 0, L);
    for (size_t j = 0; j < L->n_st; j++)
        L->live_out[j] = graph_storage_outlives(g, &g->storages[L->st[j]]);
    free(ops);
}

uint64_t leaf_peak(const leaf_graph *L, const int *order) {
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

bool leaf_order_valid(const leaf_graph *L, const int *order) {
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

uint64_t leaf_lower_bound(const leaf_graph *L) {
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

static int leaf_key_cmp(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

void leaf_program(const leaf_graph *L, const int *program_pos, int *order) {
    /* key = program position, then local index: both fit in 31 bits */
    size_t n = L->n_ops;
    int64_t *key = xmallocarray(n, sizeof *key);
    for (size_t i = 0; i < n; i++) key[i] = ((int64_t)program_pos[L->ops[i]] << 31) | (int64_t)i;
    qsort(key, n, sizeof *key, leaf_key_cmp);
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
typedef struct leaf_heap_entry {
    int64_t delta;
    int op;
} leaf_heap_entry;

static bool leaf_heap_less(const leaf_heap_entry *a, const leaf_heap_entry *b) {
    return a->delta < b->delta || (a->delta == b->delta && a->op < b->op);
}

static void leaf_heap_push(leaf_heap_entry *h, size_t *n, leaf_heap_entry e) {
    size_t i = (*n)++;
    while (i > 0 && leaf_heap_less(&e, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = e;
}

static leaf_heap_entry leaf_heap_pop(leaf_heap_entry *h, size_t *n) {
    leaf_heap_entry top = h[0], e = h[--*n];
    size_t i = 0, m = *n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && leaf_heap_less(&h[c + 1], &h[c])) c++;
        if (!leaf_heap_less(&h[c], &e)) break;
        h[i] = h[c];
        i = c;
    }
    if (m) h[i] = e;
    return top;
}

void leaf_lescea(const leaf_graph *L, int *order) {
    size_t n = L->n_ops, ns = L->n_st, nt = L->touch_start[n];
    int *indeg = xmallocarray(n, sizeof *indeg);
    int *remaining = xcalloc(ns, sizeof *remaining);  /* touchers not yet run */
    int64_t *delta = xmallocarray(n, sizeof *delta);  /* of ready ops */
    unsigned char *state = xcalloc(n, 1);             /* 1 ready, 2 run */
    size_t *tstart = xcalloc(ns + 1, sizeof *tstart); /* touchers of each storage */
    int *tops = xmallocarray(nt, sizeof *tops);
    /* every op is pushed once when ready and once more per storage it
     * becomes the last toucher of */
    leaf_heap_entry *heap = xmallocarray(n + ns + 1, sizeof *heap);
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
#define LEAF_LESCEA_READY(v)                                                                       \
    do {                                                                                           \
        int64_t d_ = 0;                                                                            \
        for (size_t k_ = L->make_start[v]; k_ < L->make_start[(v) + 1]; k_++)                      \
            d_ += (int64_t)L->size[L->make[k_]];                                                   \
        for (size_t k_ = L->touch_start[v]; k_ < L->touch_start[(v) + 1]; k_++) {                  \
            int j_ = L->touch[k_];                                                                 \
            if (remaining[j_] == 1 && !L->live_out[j_]) d_ -= (int64_t)L->size[j_];                \
        }                                                                                          \
        delta[v] = d_, state[v] = 1;                                                               \
        leaf_heap_push(heap, &n_heap, (leaf_heap_entry){d_, (int)(v)});                            \
    } while (0)
    for (size_t i = 0; i < n; i++) {
        indeg[i] = (int)(L->pred_start[i + 1] - L->pred_start[i]);
        if (!indeg[i]) LEAF_LESCEA_READY(i);
    }
    for (size_t step = 0; step < n; step++) {
        leaf_heap_entry e;
        do {
            ROAMC_ASSERT(n_heap > 0);
            e = leaf_heap_pop(heap, &n_heap);
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
                    leaf_heap_push(heap, &n_heap, (leaf_heap_entry){delta[u], u});
                }
                break;
            }
        }
        for (size_t k = L->succ_start[v]; k < L->succ_start[v + 1]; k++) {
            int u = L->succ[k];
            if (--indeg[u] == 0) LEAF_LESCEA_READY(u);
        }
    }
#undef LEAF_LESCEA_READY
    free(indeg), free(remaining), free(delta), free(state), free(tstart), free(tops), free(heap);
}

void leaf_lescea_graph(const graph *g, int *order) {
    leaf_graph L;
    leaf_init_all(g, &L);
    leaf_lescea(&L, order); /* local index i is op i for the whole graph */
    leaf_free(&L);
}

/* ------------------------------------------- exact: DP over down-sets
 *
 * A state is the set S of ops already run (closed under predecessors).
 * resident(S) = bytes of leaf storages alive between steps; running a ready
 * op v costs base + resident(S) + bytes v creates, and leads to S + v.  The
 * best peak to reach each state is a min-max path problem over the layers
 * |S| = 0..n; each layer is a hash set of states.  Transitions above the
 * upper bound are pruned, so a good heuristic keeps the layers thin. */

typedef struct leaf_dp_states {
    size_t words;    /* 64-bit words per state bitset */
    uint64_t *bits;  /* states' bitsets, contiguous */
    uint64_t *cost;  /* best peak to reach the state */
    uint64_t *res;   /* resident bytes at the state */
    int32_t *parent; /* state index it was reached from, -1 for the empty set */
    int32_t *via;    /* op run to reach it */
    size_t n, cap;
} leaf_dp_states;

static uint64_t leaf_dp_hash(const uint64_t *b, size_t w) {
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < w; i++) {
        h ^= b[i] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
        h *= 0xff51afd7ed558ccdull;
    }
    return h ^ (h >> 33);
}

static void leaf_dp_grow(leaf_dp_states *d) {
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
typedef struct leaf_beam_key {
    uint64_t cost, res;
    size_t idx;
} leaf_beam_key;

static int leaf_beam_cmp(const void *a, const void *b) {
    const leaf_beam_key *x = a, *y = b;
    if (x->cost != y->cost) return x->cost < y->cost ? -1 : 1;
    if (x->res != y->res) return x->res < y->res ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

static void leaf_beam_cut(leaf_dp_states *d, size_t lo, size_t width) {
    size_t n = d->n - lo;
    if (n <= width) return;
    leaf_beam_key *k = xmallocarray(n, sizeof *k);
    for (size_t i = 0; i < n; i++) k[i] = (leaf_beam_key){d->cost[lo + i], d->res[lo + i], lo + i};
    qsort(k, n, sizeof *k, leaf_beam_cmp);
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
        ROAMC_ASSERT(dst <= src);
        memmove(d->bits + dst * d->words, d->bits + src * d->words, d->words * sizeof *d->bits);
        d->cost[dst] = d->cost[src], d->res[dst] = d->res[src];
        d->parent[dst] = d->parent[src], d->via[dst] = d->via[src];
    }
    d->n = lo + width;
    free(k), free(keep);
}

static int leaf_dp(const leaf_graph *L, uint64_t upper, size_t max_states, size_t beam, int *order,
                   uint64_t *peak_out);

int leaf_exact(const leaf_graph *L, uint64_t upper, size_t max_states, int *order,
               uint64_t *peak_out) {
    return leaf_dp(L, upper, max_states, 0, order, peak_out);
}

int leaf_beam(const leaf_graph *L, uint64_t upper, size_t width, int *order, uint64_t *peak_out) {
    ROAMC_ASSERT(width > 0);
    return leaf_dp(L, upper, SIZE_MAX, width, order, peak_out);
}

/* The leaf's edges and touches as bitsets of w words: predmask[v] holds
 * v's predecessors, touchers[j] the ops touching storage j; made[v]: the
 * bytes op v creates. */
typedef struct leaf_dp_masks {
    size_t w;
    uint64_t *predmask, *touchers, *made;
} leaf_dp_masks;

static void leaf_dp_masks_init(const leaf_graph *L, size_t w, leaf_dp_masks *M) {
    M->w = w;
    M->touchers = xcalloc(L->n_st * w, sizeof *M->touchers);
    M->predmask = xcalloc(L->n_ops * w, sizeof *M->predmask);
    M->made = xcalloc(L->n_ops, sizeof *M->made);
    for (size_t i = 0; i < L->n_ops; i++) {
        for (size_t k = L->make_start[i]; k < L->make_start[i + 1]; k++)
            M->made[i] += L->size[L->make[k]];
        for (size_t k = L->touch_start[i]; k < L->touch_start[i + 1]; k++)
            M->touchers[(size_t)L->touch[k] * w + i / 64] |= 1ull << (i % 64);
        for (size_t k = L->pred_start[i]; k < L->pred_start[i + 1]; k++)
            M->predmask[i * w + (size_t)L->pred[k] / 64] |= 1ull << (L->pred[k] % 64);
    }
}

/* Can op v run from state S (the ops run so far): not run yet, and every
 * predecessor run? */
static bool leaf_dp_ready(const leaf_dp_masks *M, const uint64_t *S, size_t v) {
    size_t w = M->w;
    if (S[v / 64] >> (v % 64) & 1) return false;
    for (size_t x = 0; x < w; x++)
        if (M->predmask[v * w + x] & ~S[x]) return false;
    return true;
}

/* Runs ready op v from state S: cand = S + v; returns the bytes of the
 * storages whose last toucher v is (freed after v). */
static uint64_t leaf_dp_run(const leaf_graph *L, const leaf_dp_masks *M, const uint64_t *S,
                            size_t v, uint64_t *cand) {
    size_t w = M->w;
    for (size_t x = 0; x < w; x++) cand[x] = S[x];
    cand[v / 64] |= 1ull << (v % 64);
    uint64_t freed = 0;
    for (size_t k = L->touch_start[v]; k < L->touch_start[v + 1]; k++) {
        int j = L->touch[k];
        if (L->live_out[j]) continue;
        bool done = true;
        for (size_t x = 0; x < w && done; x++)
            done = (M->touchers[(size_t)j * w + x] & ~cand[x]) == 0;
        if (done) freed += L->size[j];
    }
    return freed;
}

/* Fills table (hc slots, a power of two) with the states [from, d->n). */
static void leaf_dp_rehash(const leaf_dp_states *d, int32_t *table, size_t hc, size_t from) {
    for (size_t i = 0; i < hc; i++) table[i] = -1;
    for (size_t s2 = from; s2 < d->n; s2++) {
        size_t h2 = (size_t)leaf_dp_hash(d->bits + s2 * d->words, d->words) & (hc - 1);
        while (table[h2] >= 0) h2 = (h2 + 1) & (hc - 1);
        table[h2] = (int32_t)s2;
    }
}

static int leaf_dp(const leaf_graph *L, uint64_t upper, size_t max_states, size_t beam, int *order,
                   uint64_t *peak_out) {
    size_t n = L->n_ops, ns = L->n_st;
    ROAMC_ASSERT(n <= 512);
    if (n == 0) {
        *peak_out = L->base;
        return 1;
    }
    size_t w = (n + 63) / 64;
    leaf_dp_states d = {.words = w};
    leaf_dp_masks M;
    leaf_dp_masks_init(L, w, &M);
    uint64_t *cand = xmallocarray(w, sizeof *cand);
    size_t hcap = 0;
    int32_t *table = NULL;
    leaf_dp_grow(&d);
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
                if (!leaf_dp_ready(&M, d.bits + si * w, v)) continue;
                /* the bound first: the storages v frees cost a scan */
                uint64_t step = L->base + d.res[si] + M.made[v];
                uint64_t cost = step > d.cost[si] ? step : d.cost[si];
                if (cost > upper) continue;
                uint64_t res = d.res[si] + M.made[v] - leaf_dp_run(L, &M, d.bits + si * w, v, cand);
                size_t h = (size_t)leaf_dp_hash(cand, w) & mask;
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
                if (d.n == d.cap) leaf_dp_grow(&d);
                memcpy(d.bits + d.n * w, cand, w * sizeof *cand);
                d.cost[d.n] = cost, d.res[d.n] = res, d.parent[d.n] = (int32_t)si,
                d.via[d.n] = (int32_t)v;
                table[h] = (int32_t)d.n++;
                if (++next_count * 2 > hc) {
                    /* keep the load factor under 1/2: rehash the layer */
                    hc *= 2, mask = hc - 1, hcap = hc;
                    table = xreallocarray(table, hc, sizeof *table);
                    leaf_dp_rehash(&d, table, hc, layer_hi);
                }
            }
        }
        if (result == 1 && beam) leaf_beam_cut(&d, layer_hi, beam);
        layer_lo = layer_hi, layer_hi = d.n;
        /* pruning by the bound can empty a layer only when upper is below
         * every order's peak */
        if (result == 1 && layer_lo == layer_hi) result = 0;
    }
    if (result == 1) {
        ROAMC_ASSERT(layer_hi - layer_lo == 1); /* the full set */
        int32_t s = (int32_t)layer_lo;
        *peak_out = d.cost[s];
        for (size_t step = n; step-- > 0;) {
            order[step] = d.via[s];
            s = d.parent[s];
        }
        ROAMC_ASSERT(s == 0);
    }
    free(M.touchers), free(M.predmask), free(M.made), free(cand), free(table);
    free(d.bits), free(d.cost), free(d.res), free(d.parent), free(d.via);
    return result;
}
