/* layout_general.c — layouts of problems beyond intervals
 * (layout_general_solve, layout.h): conflict edges besides lifetimes,
 * buffers without a lifetime, an alignment per buffer, pinned buffers.
 * The library's roamc_layout_* take such problems; the exact searches of
 * this folder take intervals only, so this is a first fit over the
 * conflict graph in three orders, then a local search over orders, with
 * a clique bound to stop at. */
#include "layout.h"
#include "layout_internal.h"

#include <stdlib.h>
#include <string.h>

/* The conflict graph in compressed rows: buffer i's neighbours are
 * adj[start[i] .. start[i + 1]). */
typedef struct gen_graph {
    size_t *start, *adj;
} gen_graph;

static int gen_size_cmp(const void *pa, const void *pb) {
    size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
    return (a > b) - (a < b);
}

/* Builds the conflicts: intersecting lifetimes (a sweep in start order)
 * and the edges given, each pair once; buffers of size 0 conflict with
 * nothing. */
static void gen_graph_build(const layout_general *g, gen_graph *G) {
    size_t n = g->n;
    size_t *deg = xcalloc(n + 1, sizeof *deg);
    lay_key *sorted = xmallocarray(n, sizeof *sorted);
    size_t nb = 0;
    for (size_t i = 0; i < n; i++)
        if (g->first[i] >= 0 && g->size[i])
            sorted[nb++] = (lay_key){(uint64_t)g->first[i], 0, 0, i};
    qsort(sorted, nb, sizeof *sorted, lay_key_cmp);
    size_t *byfirst = xmallocarray(n, sizeof *byfirst);
    for (size_t k = 0; k < nb; k++) byfirst[k] = sorted[k].idx;
    free(sorted);
    /* two passes over the same pairs: count, then fill */
    size_t *fill = NULL;
    G->start = xcalloc(n + 1, sizeof *G->start);
    for (int pass = 0; pass < 2; pass++) {
        for (size_t x = 0; x < nb; x++)
            for (size_t y = x + 1; y < nb && g->first[byfirst[y]] <= g->last[byfirst[x]]; y++) {
                size_t a = byfirst[x], b = byfirst[y];
                if (pass == 0)
                    deg[a]++, deg[b]++;
                else
                    G->adj[fill[a]++] = b, G->adj[fill[b]++] = a;
            }
        for (size_t e = 0; e < g->n_edges; e++) {
            size_t a = g->edges[2 * e], b = g->edges[2 * e + 1];
            if (!g->size[a] || !g->size[b]) continue;
            if (pass == 0)
                deg[a]++, deg[b]++;
            else
                G->adj[fill[a]++] = b, G->adj[fill[b]++] = a;
        }
        if (pass == 0) {
            for (size_t i = 0; i < n; i++) G->start[i + 1] = G->start[i] + deg[i];
            G->adj = xmallocarray(G->start[n], sizeof *G->adj);
            fill = xmallocarray(n, sizeof *fill);
            for (size_t i = 0; i < n; i++) fill[i] = G->start[i];
        }
    }
    /* each neighbour once (the bound counts members by their edges) */
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        size_t from = G->start[i], to = G->start[i + 1];
        qsort(G->adj + from, to - from, sizeof *G->adj, gen_size_cmp);
        G->start[i] = w;
        for (size_t e = from; e < to; e++)
            if (e == from || G->adj[e] != G->adj[e - 1]) G->adj[w++] = G->adj[e];
    }
    G->start[n] = w;
    free(fill);
    free(byfirst);
    free(deg);
}

/* What one first-fit pass needs. */
typedef struct gen_ff {
    const layout_general *g;
    const gen_graph *G;
    uint64_t *off; /* offsets of this pass */
    uint8_t *placed;
    uint64_t (*iv)[2]; /* scratch: neighbours' ranges */
    uint64_t work;     /* neighbour visits so far */
} gen_ff;

static int gen_range_cmp(const void *pa, const void *pb) {
    const uint64_t *a = pa, *b = pb;
    return (a[0] > b[0]) - (a[0] < b[0]);
}

/* Places the unpinned buffers in order at their lowest fitting offsets;
 * returns the height. */
static uint64_t gen_first_fit(gen_ff *F, const size_t *order, size_t n_order) {
    const layout_general *g = F->g;
    const uint64_t *rs = g->size;
    uint64_t height = 0;
    for (size_t i = 0; i < g->n; i++) {
        F->placed[i] = g->pinned[i];
        if (g->pinned[i]) {
            F->off[i] = g->pin[i];
            if (rs[i] && g->pin[i] + rs[i] > height) height = g->pin[i] + rs[i];
        }
    }
    for (size_t k = 0; k < n_order; k++) {
        size_t i = order[k], m = 0;
        for (size_t e = F->G->start[i]; e < F->G->start[i + 1]; e++) {
            size_t j = F->G->adj[e];
            if (F->placed[j]) F->iv[m][0] = F->off[j], F->iv[m][1] = F->off[j] + rs[j], m++;
        }
        F->work += F->G->start[i + 1] - F->G->start[i] + 1;
        qsort(F->iv, m, sizeof *F->iv, gen_range_cmp);
        uint64_t a = g->align[i], x = 0;
        for (size_t k2 = 0; k2 < m; k2++) {
            if (F->iv[k2][1] <= x) continue;
            if (F->iv[k2][0] >= x + rs[i]) break;
            x = lay_round_up(F->iv[k2][1], a);
        }
        F->off[i] = x, F->placed[i] = 1;
        if (rs[i] && x + rs[i] > height) height = x + rs[i];
    }
    return height;
}

/* Sort key of buffer i, larger k1 then larger k2 first, ties by index
 * (lay_key_cmp's ascending order of the complements). */
static lay_key gen_key_desc(uint64_t k1, uint64_t k2, size_t i) {
    return (lay_key){~k1, ~k2, 0, i};
}

/* The lower bound of the general problem: the heaviest step of the
 * buffers with lifetimes, the pinned buffers' ends, and for each of the
 * 64 buffers with the heaviest neighbourhoods a clique grown greedily
 * (heaviest neighbour adjacent to all so far): buffers that pairwise
 * conflict take their sizes' sum. */
static uint64_t gen_bound(const layout_general *g, const gen_graph *G) {
    size_t n = g->n, nb = 0;
    const uint64_t *rs = g->size;
    layout_buffer *bufs = xmallocarray(n, sizeof *bufs);
    uint64_t lb = 0;
    for (size_t i = 0; i < n; i++) {
        if (g->first[i] >= 0) bufs[nb++] = (layout_buffer){rs[i], g->first[i], g->last[i]};
        if (g->pinned[i] && rs[i] && g->pin[i] + rs[i] > lb) lb = g->pin[i] + rs[i];
    }
    uint64_t live = layout_live_peak(bufs, nb);
    free(bufs);
    if (live > lb) lb = live;
    lay_key *keys = xmallocarray(n, sizeof *keys);
    for (size_t i = 0; i < n; i++) {
        uint64_t w = rs[i];
        for (size_t e = G->start[i]; e < G->start[i + 1]; e++) w += rs[G->adj[e]];
        keys[i] = gen_key_desc(w, rs[i], i);
    }
    qsort(keys, n, sizeof *keys, lay_key_cmp);
    size_t *clique = xmallocarray(n, sizeof *clique);
    /* mark[u]: how many members of the clique u is adjacent to */
    uint32_t *mark = xcalloc(n, sizeof *mark);
    for (size_t t = 0; t < n && t < 64; t++) {
        size_t v = keys[t].idx, m = 0;
        uint64_t sum = 0;
        for (size_t w = v; w != (size_t)-1 && m < 256;) {
            clique[m++] = w, sum += rs[w];
            for (size_t e = G->start[w]; e < G->start[w + 1]; e++) mark[G->adj[e]]++;
            /* the heaviest neighbour of v adjacent to every member */
            w = (size_t)-1;
            for (size_t e = G->start[v]; e < G->start[v + 1]; e++) {
                size_t u = G->adj[e];
                if (mark[u] >= m && (w == (size_t)-1 || rs[u] > rs[w])) w = u;
            }
            /* a repeated edge counts twice: a member is never taken again */
            for (size_t c = 0; w != (size_t)-1 && c < m; c++)
                if (clique[c] == w) w = (size_t)-1;
        }
        if (sum > lb) lb = sum;
        for (size_t c = 0; c < m; c++)
            for (size_t e = G->start[clique[c]]; e < G->start[clique[c] + 1]; e++)
                mark[G->adj[e]] = 0;
    }
    free(mark);
    free(clique);
    free(keys);
    return lb;
}

/* Two pinned buffers that conflict and overlap: 1 with *a < *b naming
 * them, else 0. */
static int gen_pins_clash(const layout_general *g, const gen_graph *G, size_t *a, size_t *b) {
    const uint64_t *rs = g->size;
    for (size_t i = 0; i < g->n; i++)
        for (size_t e = G->start[i]; g->pinned[i] && e < G->start[i + 1]; e++) {
            size_t j = G->adj[e];
            if (g->pinned[j] && g->pin[i] < g->pin[j] + rs[j] && g->pin[j] < g->pin[i] + rs[i]) {
                *a = i < j ? i : j;
                *b = i < j ? j : i;
                return 1;
            }
        }
    return 0;
}

/* The first fits of the three starting orders of the free buffers (by
 * size, by lifetime, by neighbourhood weight): the best one's order in
 * best_order, its offsets in offsets; returns its height. */
static uint64_t gen_start(gen_ff *F, size_t nfree, size_t *order, size_t *best_order,
                          uint64_t *offsets) {
    const layout_general *g = F->g;
    const gen_graph *G = F->G;
    const uint64_t *rs = g->size;
    lay_key *keys = xmallocarray(nfree, sizeof *keys);
    uint64_t best = UINT64_MAX;
    for (int rule = 0; rule < 3; rule++) {
        size_t m = 0;
        for (size_t i = 0; i < g->n; i++) {
            if (g->pinned[i]) continue;
            uint64_t life = g->first[i] >= 0 ? (uint64_t)(g->last[i] - g->first[i]) + 1 : 0;
            uint64_t nb = 0;
            for (size_t e = G->start[i]; e < G->start[i + 1]; e++) nb += rs[G->adj[e]];
            keys[m++] = rule == 0   ? gen_key_desc(rs[i], life, i)
                        : rule == 1 ? gen_key_desc(life, rs[i], i)
                                    : gen_key_desc(nb + rs[i], rs[i], i);
        }
        qsort(keys, m, sizeof *keys, lay_key_cmp);
        for (size_t k = 0; k < m; k++) order[k] = keys[k].idx;
        uint64_t h = gen_first_fit(F, order, m);
        if (h < best) {
            best = h;
            memcpy(best_order, order, m * sizeof *order);
            memcpy(offsets, F->off, g->n * sizeof *F->off);
        }
    }
    free(keys);
    return best;
}

int layout_general_solve(const layout_general *g, uint64_t work, double deadline, uint64_t *offsets,
                         layout_general_result *r) {
    size_t n = g->n;
    memset(r, 0, sizeof *r);
    gen_graph G;
    gen_graph_build(g, &G);
    if (gen_pins_clash(g, &G, &r->clash_a, &r->clash_b)) {
        free(G.start), free(G.adj);
        return -1;
    }
    r->bound = gen_bound(g, &G);
    size_t maxdeg = 0, nfree = 0;
    for (size_t i = 0; i < n; i++) {
        if (G.start[i + 1] - G.start[i] > maxdeg) maxdeg = G.start[i + 1] - G.start[i];
        nfree += !g->pinned[i];
    }
    gen_ff F = {g,
                &G,
                xmallocarray(n, sizeof(uint64_t)),
                xmallocarray(n, 1),
                xmallocarray(maxdeg, sizeof *F.iv),
                0};
    size_t *order = xmallocarray(nfree, sizeof *order);
    size_t *best_order = xmallocarray(nfree, sizeof *best_order);
    uint64_t best = gen_start(&F, nfree, order, best_order, offsets);
    /* local search: move one buffer earlier in the best order; keep a
     * change that is no higher (plateaus let it drift) */
    r->stop = best <= r->bound ? LAYOUT_STOP_PROOF : LAYOUT_STOP_WORK;
    uint64_t budget = work ? work : LAYOUT_GENERAL_WORK, seed = 0x9e3779b97f4a7c15ull;
    for (uint64_t it = 0; best > r->bound && nfree > 1; it++) {
        if (F.work >= budget) break;
        if ((it & 15) == 0 && roamc_now() >= deadline) {
            r->stop = LAYOUT_STOP_TIME;
            break;
        }
        memcpy(order, best_order, nfree * sizeof *order);
        size_t a = (size_t)(roamc_xorshift64(&seed) % nfree),
               b = (size_t)(roamc_xorshift64(&seed) % nfree);
        if (a == b) continue;
        if (a > b) {
            size_t t = a;
            a = b, b = t;
        }
        size_t moved = order[b];
        memmove(order + a + 1, order + a, (b - a) * sizeof *order);
        order[a] = moved;
        uint64_t h = gen_first_fit(&F, order, nfree);
        if (h <= best) {
            best = h;
            memcpy(best_order, order, nfree * sizeof *order);
            memcpy(offsets, F.off, n * sizeof *F.off);
        }
    }
    if (best <= r->bound)
        r->stop = LAYOUT_STOP_PROOF;
    else if (nfree <= 1)
        r->stop = LAYOUT_STOP_NO_IMPROVEMENT; /* one order only: nothing to search */
    r->height = best;
    free(order), free(best_order);
    free(F.off), free(F.placed), free(F.iv);
    free(G.start), free(G.adj);
    return 0;
}
