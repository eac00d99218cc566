/* Laying out a buffer problem through the API (roamc.h, roamc_layout_*):
 * `roamc layout`'s engine for interval problems (the command runs this
 * code), and a first-fit search with pinned offsets, per-buffer alignment
 * and conflict graphs for the rest. */
#include "api_internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

roamc_layout *roamc_layout_new(void) {
    roamc_layout *l = xcalloc(1, sizeof *l);
    l->time_limit = 10.0;
    l->method = "roam";
    return l;
}

void roamc_layout_free(roamc_layout *l) {
    if (!l) return;
    free(l->size);
    free(l->align);
    free(l->first);
    free(l->last);
    free(l->pinned);
    free(l->pin);
    free(l->edges);
    free(l->offsets);
    free(l);
}

const char *roamc_layout_error(const roamc_layout *l) {
    return l ? l->error : "no layout";
}

static roamc_status lay_fail(roamc_layout *l, roamc_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static roamc_status lay_fail(roamc_layout *l, roamc_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->error, sizeof l->error, fmt, ap);
    va_end(ap);
    return st;
}

static bool lay_pow2(uint64_t a) {
    return a >= 1 && a <= ((uint64_t)1 << 30) && (a & (a - 1)) == 0;
}

/* Adds buffer n (first < 0: no lifetime). */
static roamc_status lay_add(roamc_layout *l, const layout_buffer *b, uint64_t alignment,
                            size_t *index) {
    if (!lay_pow2(alignment))
        return lay_fail(l, ROAMC_BAD_INPUT,
                        "buffer %zu: alignment %llu is not a power of two from 1 to 2^30", l->n,
                        (unsigned long long)alignment);
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->size = xreallocarray(l->size, l->cap, sizeof *l->size);
        l->align = xreallocarray(l->align, l->cap, sizeof *l->align);
        l->first = xreallocarray(l->first, l->cap, sizeof *l->first);
        l->last = xreallocarray(l->last, l->cap, sizeof *l->last);
        l->pinned = xreallocarray(l->pinned, l->cap, sizeof *l->pinned);
        l->pin = xreallocarray(l->pin, l->cap, sizeof *l->pin);
    }
    size_t i = l->n++;
    l->size[i] = b->size, l->align[i] = alignment;
    l->first[i] = b->start, l->last[i] = b->end;
    l->pinned[i] = 0, l->pin[i] = 0;
    if (index) *index = i;
    l->error[0] = 0;
    return ROAMC_OK;
}

roamc_status roamc_layout_add_interval(roamc_layout *l, uint64_t size, uint64_t alignment,
                                       int64_t first, int64_t last, size_t *index) {
    if (!l) return ROAMC_BAD_INPUT;
    if (first < 0 || last < first || last >= INT32_MAX)
        return lay_fail(l, ROAMC_BAD_INPUT,
                        "buffer %zu: lifetime [%lld, %lld] is not 0 <= first <= last < 2^31 - 1",
                        l->n, (long long)first, (long long)last);
    return lay_add(l, &(layout_buffer){size, (int32_t)first, (int32_t)last}, alignment, index);
}

roamc_status roamc_layout_add_buffer(roamc_layout *l, uint64_t size, uint64_t alignment,
                                     size_t *index) {
    if (!l) return ROAMC_BAD_INPUT;
    return lay_add(l, &(layout_buffer){size, -1, -1}, alignment, index);
}

roamc_status roamc_layout_add_conflict(roamc_layout *l, size_t a, size_t b) {
    if (!l) return ROAMC_BAD_INPUT;
    if (a >= l->n || b >= l->n || a == b)
        return lay_fail(l, ROAMC_BAD_INPUT, "conflict (%zu, %zu): not two buffers of the %zu added",
                        a, b, l->n);
    if (l->n_edges == l->cap_edges) {
        l->cap_edges = l->cap_edges ? 2 * l->cap_edges : 16;
        l->edges = xreallocarray(l->edges, 2 * l->cap_edges, sizeof *l->edges);
    }
    l->edges[2 * l->n_edges] = a, l->edges[2 * l->n_edges + 1] = b;
    l->n_edges++;
    return ROAMC_OK;
}

roamc_status roamc_layout_pin(roamc_layout *l, size_t i, uint64_t offset) {
    if (!l) return ROAMC_BAD_INPUT;
    if (i >= l->n) return lay_fail(l, ROAMC_BAD_INPUT, "pin: no buffer %zu (%zu added)", i, l->n);
    if (offset % l->align[i])
        return lay_fail(l, ROAMC_BAD_INPUT,
                        "pin: offset %llu of buffer %zu is not a multiple of its alignment %llu",
                        (unsigned long long)offset, i, (unsigned long long)l->align[i]);
    l->pinned[i] = 1, l->pin[i] = offset;
    return ROAMC_OK;
}

roamc_status roamc_layout_set(roamc_layout *l, const char *name, const char *value) {
    char err[512];
    if (!l) return ROAMC_BAD_INPUT;
    if (!name || !value) return lay_fail(l, ROAMC_BAD_INPUT, "%s", "option: no name or value");
    if (strcmp(name, "capacity") == 0) {
        if (planner_size_parse(value, &l->capacity, err, sizeof err))
            return lay_fail(l, ROAMC_BAD_INPUT, "capacity: %s", err);
        l->has_capacity = true;
    } else if (strcmp(name, "time-limit") == 0) {
        if (planner_time_limit_parse(value, &l->time_limit, err, sizeof err))
            return lay_fail(l, ROAMC_BAD_INPUT, "%s", err);
    } else if (strcmp(name, "work") == 0) {
        char *end;
        double w = strtod(value, &end);
        if (end == value || *end || !(w >= 1 && w <= 1e18))
            return lay_fail(l, ROAMC_BAD_INPUT, "work wants a number of work units >= 1, not '%s'",
                            value);
        l->work = (uint64_t)w;
    } else if (strcmp(name, "method") == 0) {
        static const char *const methods[] = {"roam", "llfb", "greedy", "bestfit", "pytorch"};
        for (size_t k = 0; k < sizeof methods / sizeof methods[0]; k++)
            if (strcmp(value, methods[k]) == 0) {
                l->method = methods[k];
                return ROAMC_OK;
            }
        return lay_fail(l, ROAMC_BAD_INPUT,
                        "unknown method '%s' (choose from roam, llfb, greedy, bestfit, pytorch)",
                        value);
    } else {
        return lay_fail(l, ROAMC_BAD_INPUT, "no layout option named '%s'", name);
    }
    return ROAMC_OK;
}

/* ------------------------------------------------------------------ the interval engine */

/* The largest size the caching-allocator replay takes (layout_pytorch
 * rounds sizes up to segments: this keeps every sum below 2^64). */
#define API_PYTORCH_MAX_SIZE ((uint64_t)1 << 62)

/* The roam method: best heuristic as the warm start, then the exact
 * search: decide the capacity, or minimise the height (`roamc layout`). */
static void lay_roam(roamc_layout *l, const layout_problem *p, double t_start) {
    size_t n = p->n;
    uint64_t *offsets = l->offsets;
    l->h0 = layout_best_heuristic(p->bufs, n, p->align, offsets, &l->winner);
    double left =
        0.9 * (t_start + l->time_limit - roamc_now()); /* a tenth for checking and writing */
    /* The plans' exact layout first (search at the bound, GLPK on small
     * problems, local search over first-fit orders), with at most half of
     * the time: on the committed models' buffer lists its local search
     * reaches the live-size bound where the searches below alone do not
     * (mnasnet1_0, mobilenet_v2_b32, efficientnet_b0_b32, vit_b_16_b1).
     * Its search at the bound leaves a mark where it gave up, and
     * layout_solve's probe at that capacity continues from there instead of
     * repeating the strategies that already failed (before, a search that
     * needed most of the time started twice and got half of it).  Not
     * under a work limit (which is the exact search's own budget) nor for
     * dev engines. */
    layout_search_mark mark = {0};
    if (!l->work && !l->engines && left > 1e-3) {
        layout_effort e = {0, 0.5 * left, l->has_capacity ? l->capacity : 0,
                           LAYOUT_SHARES_PORTFOLIO, &mark};
        layout_result er;
        uint64_t *warm = xmallocarray(n ? n : 1, sizeof *warm);
        memcpy(warm, offsets, n * sizeof *warm);
        layout_exact(p, warm, &e, offsets, &er);
        free(warm);
        left = 0.9 * (t_start + l->time_limit - roamc_now());
    }
    layout_solve_opts so;
    layout_solve_defaults(&so);
    so.capacity = l->has_capacity ? (l->capacity ? l->capacity : 1) : 0;
    so.work = l->work;
    so.time_limit_s = left > 1e-3 ? left : 1e-3;
    so.engines = l->engines;
    if (l->rules) so.rules = *l->rules;
    so.resume = mark.capacity ? &mark : NULL;
    l->have_solve = true;
    layout_solve(p, offsets, &so, offsets, &l->sr);
    l->height = l->sr.height;
    l->timed_out = l->sr.stopped_by_time;
    l->detail = l->height < l->h0 ? "improved on" : "no better than";
}

/* Every buffer has a lifetime, nothing is pinned, no edge, one alignment:
 * the engine of `roamc layout`.  bufs: the sizes rounded up to align. */
static roamc_status lay_intervals(roamc_layout *l, layout_buffer *bufs, double t_start) {
    size_t n = l->n;
    uint64_t align = n ? l->align[0] : 1;
    const char *m = l->method;
    layout_problem p = {bufs, n, align};
    l->interval_engine = true;
    l->stop = ROAMC_STOP_HEURISTIC;
    if (strcmp(m, "llfb") == 0) {
        l->height = layout_llfb(bufs, n, align, l->offsets);
    } else if (strcmp(m, "greedy") == 0) {
        l->height = layout_greedy(bufs, n, align, l->offsets);
    } else if (strcmp(m, "bestfit") == 0) {
        l->height = layout_bestfit(bufs, n, align, l->offsets);
    } else if (strcmp(m, "pytorch") == 0) {
        /* the allocator sees the sizes as given and rounds them itself, up
         * to its 2 MiB segments and beyond: far from 2^64 */
        for (size_t i = 0; i < n; i++)
            if (l->size[i] > API_PYTORCH_MAX_SIZE)
                return lay_fail(l, ROAMC_BAD_INPUT,
                                "method pytorch: buffer %zu's size %llu is above 2^62 bytes", i,
                                (unsigned long long)l->size[i]);
        layout_buffer *raw = xmallocarray(n ? n : 1, sizeof *raw);
        for (size_t i = 0; i < n; i++)
            raw[i] = (layout_buffer){l->size[i], l->first[i], l->last[i]};
        l->height = layout_pytorch(raw, n, 0, l->offsets, &l->pt);
        size_t a = 0, b = 0;
        int bad = layout_validate(raw, n, l->offsets, 1, &a, &b);
        free(raw);
        if (bad) {
            l->bad_a = a, l->bad_b = b;
            return lay_fail(l, ROAMC_ERROR, "internal error: invalid layout (buffers %zu and %zu)",
                            a, b);
        }
        return ROAMC_OK;
    } else if (roamc_now() >= t_start + l->time_limit) {
        /* no time left: the fastest valid layout */
        l->height = layout_bestfit(bufs, n, align, l->offsets);
        l->too_short = true;
        l->stop = ROAMC_STOP_TIME;
    } else {
        lay_roam(l, &p, t_start);
        static const roamc_layout_stop stops[] = {ROAMC_STOP_OPTIMAL, ROAMC_STOP_FEASIBLE,
                                                  ROAMC_STOP_INFEASIBLE};
        l->stop = l->sr.status != LAYOUT_SOLVE_STOPPED ? stops[l->sr.status]
                  : l->sr.stopped_by_time || !l->work  ? ROAMC_STOP_TIME
                                                       : ROAMC_STOP_WORK;
        l->proven = l->sr.lower_bound;
    }
    size_t a = 0, b = 0;
    if (layout_validate(bufs, n, l->offsets, align, &a, &b)) {
        l->bad_a = a, l->bad_b = b;
        return lay_fail(l, ROAMC_ERROR, "internal error: invalid layout (buffers %zu and %zu)", a,
                        b);
    }
    return ROAMC_OK;
}

/* ------------------------------------------------------------------ the general search */

/* The conflict graph in compressed rows: buffer i's neighbours are
 * adj[start[i] .. start[i + 1]). */
typedef struct lay_graph {
    size_t *start, *adj;
} lay_graph;

/* A buffer by the first step of its lifetime, ties by index. */
typedef struct lay_by_first {
    int32_t first;
    size_t i;
} lay_by_first;

static int lay_cmp_first(const void *pa, const void *pb) {
    const lay_by_first *a = pa, *b = pb;
    if (a->first != b->first) return a->first < b->first ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

static int lay_cmp_size(const void *pa, const void *pb) {
    size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
    return (a > b) - (a < b);
}

/* Builds the conflicts: intersecting lifetimes (a sweep in start order)
 * and the edges given, each pair once; buffers of size 0 conflict with
 * nothing. */
static void lay_graph_build(const roamc_layout *l, lay_graph *G) {
    size_t n = l->n;
    size_t *deg = xcalloc(n + 1, sizeof *deg);
    lay_by_first *sorted = xmallocarray(n ? n : 1, sizeof *sorted);
    size_t nb = 0;
    for (size_t i = 0; i < n; i++)
        if (l->first[i] >= 0 && l->size[i]) sorted[nb++] = (lay_by_first){l->first[i], i};
    qsort(sorted, nb, sizeof *sorted, lay_cmp_first);
    size_t *byfirst = xmallocarray(n ? n : 1, sizeof *byfirst);
    for (size_t k = 0; k < nb; k++) byfirst[k] = sorted[k].i;
    free(sorted);
    /* two passes over the same pairs: count, then fill */
    size_t *fill = NULL;
    G->start = xcalloc(n + 1, sizeof *G->start);
    for (int pass = 0; pass < 2; pass++) {
        for (size_t x = 0; x < nb; x++)
            for (size_t y = x + 1; y < nb && l->first[byfirst[y]] <= l->last[byfirst[x]]; y++) {
                size_t a = byfirst[x], b = byfirst[y];
                if (pass == 0)
                    deg[a]++, deg[b]++;
                else
                    G->adj[fill[a]++] = b, G->adj[fill[b]++] = a;
            }
        for (size_t e = 0; e < l->n_edges; e++) {
            size_t a = l->edges[2 * e], b = l->edges[2 * e + 1];
            if (!l->size[a] || !l->size[b]) continue;
            if (pass == 0)
                deg[a]++, deg[b]++;
            else
                G->adj[fill[a]++] = b, G->adj[fill[b]++] = a;
        }
        if (pass == 0) {
            for (size_t i = 0; i < n; i++) G->start[i + 1] = G->start[i] + deg[i];
            G->adj = xmallocarray(G->start[n] ? G->start[n] : 1, sizeof *G->adj);
            fill = xmallocarray(n ? n : 1, sizeof *fill);
            for (size_t i = 0; i < n; i++) fill[i] = G->start[i];
        }
    }
    /* each neighbour once (the bound counts members by their edges) */
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        size_t from = G->start[i], to = G->start[i + 1];
        qsort(G->adj + from, to - from, sizeof *G->adj, lay_cmp_size);
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
typedef struct lay_ff {
    const roamc_layout *l;
    const lay_graph *G;
    const uint64_t *rs; /* rounded sizes */
    uint64_t *off;      /* offsets of this pass */
    uint8_t *placed;
    uint64_t (*iv)[2]; /* scratch: neighbours' ranges */
    uint64_t work;     /* neighbour visits so far */
} lay_ff;

static int lay_cmp_range(const void *pa, const void *pb) {
    const uint64_t *a = pa, *b = pb;
    return (a[0] > b[0]) - (a[0] < b[0]);
}

/* Places the unpinned buffers in order at their lowest fitting offsets;
 * returns the height. */
static uint64_t lay_first_fit(lay_ff *F, const size_t *order, size_t n_order) {
    const roamc_layout *l = F->l;
    uint64_t height = 0;
    for (size_t i = 0; i < l->n; i++) {
        F->placed[i] = l->pinned[i];
        if (l->pinned[i]) {
            F->off[i] = l->pin[i];
            if (F->rs[i] && l->pin[i] + F->rs[i] > height) height = l->pin[i] + F->rs[i];
        }
    }
    for (size_t k = 0; k < n_order; k++) {
        size_t i = order[k], m = 0;
        for (size_t e = F->G->start[i]; e < F->G->start[i + 1]; e++) {
            size_t j = F->G->adj[e];
            if (F->placed[j]) F->iv[m][0] = F->off[j], F->iv[m][1] = F->off[j] + F->rs[j], m++;
        }
        F->work += F->G->start[i + 1] - F->G->start[i] + 1;
        qsort(F->iv, m, sizeof *F->iv, lay_cmp_range);
        uint64_t a = l->align[i], x = 0;
        for (size_t k2 = 0; k2 < m; k2++) {
            if (F->iv[k2][1] <= x) continue;
            if (F->iv[k2][0] >= x + F->rs[i]) break;
            x = (F->iv[k2][1] + a - 1) / a * a;
        }
        F->off[i] = x, F->placed[i] = 1;
        if (F->rs[i] && x + F->rs[i] > height) height = x + F->rs[i];
    }
    return height;
}

/* A sort key per buffer, larger first, ties by index. */
typedef struct lay_key {
    uint64_t k1, k2;
    size_t i;
} lay_key;

static int lay_cmp_key(const void *pa, const void *pb) {
    const lay_key *a = pa, *b = pb;
    if (a->k1 != b->k1) return a->k1 < b->k1 ? 1 : -1;
    if (a->k2 != b->k2) return a->k2 < b->k2 ? 1 : -1;
    return (a->i > b->i) - (a->i < b->i);
}

/* The lower bound of the general problem: the heaviest step of the
 * buffers with lifetimes, the pinned buffers' ends, and for each of the
 * 64 buffers with the heaviest neighbourhoods a clique grown greedily
 * (heaviest neighbour adjacent to all so far): buffers that pairwise
 * conflict take their sizes' sum. */
static uint64_t lay_bound(const roamc_layout *l, const lay_graph *G, const uint64_t *rs) {
    size_t n = l->n, nb = 0;
    layout_buffer *bufs = xmallocarray(n ? n : 1, sizeof *bufs);
    uint64_t lb = 0;
    for (size_t i = 0; i < n; i++) {
        if (l->first[i] >= 0) bufs[nb++] = (layout_buffer){rs[i], l->first[i], l->last[i]};
        if (l->pinned[i] && rs[i] && l->pin[i] + rs[i] > lb) lb = l->pin[i] + rs[i];
    }
    uint64_t live = layout_live_peak(bufs, nb);
    free(bufs);
    if (live > lb) lb = live;
    lay_key *keys = xmallocarray(n ? n : 1, sizeof *keys);
    for (size_t i = 0; i < n; i++) {
        uint64_t w = rs[i];
        for (size_t e = G->start[i]; e < G->start[i + 1]; e++) w += rs[G->adj[e]];
        keys[i] = (lay_key){w, rs[i], i};
    }
    qsort(keys, n, sizeof *keys, lay_cmp_key);
    size_t *clique = xmallocarray(n ? n : 1, sizeof *clique);
    /* mark[u]: how many members of the clique u is adjacent to */
    uint32_t *mark = xcalloc(n ? n : 1, sizeof *mark);
    for (size_t t = 0; t < n && t < 64; t++) {
        size_t v = keys[t].i, m = 0;
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

/* The general problem: pinned buffers where they are, the rest first fit
 * in three orders, then a local search over orders. */
static roamc_status lay_general(roamc_layout *l, const uint64_t *rs, double t_start) {
    size_t n = l->n;
    lay_graph G;
    lay_graph_build(l, &G);
    /* pinned buffers that conflict must not overlap */
    for (size_t i = 0; i < n; i++)
        for (size_t e = G.start[i]; l->pinned[i] && e < G.start[i + 1]; e++) {
            size_t j = G.adj[e];
            if (l->pinned[j] && l->pin[i] < l->pin[j] + rs[j] && l->pin[j] < l->pin[i] + rs[i]) {
                free(G.start), free(G.adj);
                return lay_fail(l, ROAMC_BAD_INPUT,
                                "pinned buffers %zu and %zu conflict and overlap", i < j ? i : j,
                                i < j ? j : i);
            }
        }
    l->live_bound = lay_bound(l, &G, rs);
    l->proven = l->live_bound;
    size_t maxdeg = 0, nfree = 0;
    for (size_t i = 0; i < n; i++) {
        if (G.start[i + 1] - G.start[i] > maxdeg) maxdeg = G.start[i + 1] - G.start[i];
        nfree += !l->pinned[i];
    }
    lay_ff F = {l,
                &G,
                rs,
                xmallocarray(n ? n : 1, sizeof(uint64_t)),
                xmallocarray(n ? n : 1, 1),
                xmallocarray(maxdeg ? maxdeg : 1, sizeof *F.iv),
                0};
    lay_key *keys = xmallocarray(nfree ? nfree : 1, sizeof *keys);
    size_t *order = xmallocarray(nfree ? nfree : 1, sizeof *order);
    size_t *best_order = xmallocarray(nfree ? nfree : 1, sizeof *best_order);
    uint64_t best = UINT64_MAX;
    for (int rule = 0; rule < 3; rule++) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            if (l->pinned[i]) continue;
            uint64_t life = l->first[i] >= 0 ? (uint64_t)(l->last[i] - l->first[i]) + 1 : 0;
            uint64_t nb = 0;
            for (size_t e = G.start[i]; e < G.start[i + 1]; e++) nb += rs[G.adj[e]];
            keys[m++] = rule == 0   ? (lay_key){rs[i], life, i}
                        : rule == 1 ? (lay_key){life, rs[i], i}
                                    : (lay_key){nb + rs[i], rs[i], i};
        }
        qsort(keys, m, sizeof *keys, lay_cmp_key);
        for (size_t k = 0; k < m; k++) order[k] = keys[k].i;
        uint64_t h = lay_first_fit(&F, order, m);
        if (h < best) {
            best = h;
            memcpy(best_order, order, m * sizeof *order);
            memcpy(l->offsets, F.off, n * sizeof *F.off);
        }
    }
    /* local search: move one buffer earlier in the best order; keep a
     * change that is no higher (plateaus let it drift) */
    l->stop = best <= l->live_bound ? ROAMC_STOP_OPTIMAL : ROAMC_STOP_WORK;
    uint64_t budget = l->work ? l->work : 20000000, seed = 0x9e3779b97f4a7c15ull;
    double deadline = t_start + l->time_limit;
    for (uint64_t it = 0; best > l->live_bound && nfree > 1; it++) {
        if (F.work >= budget) break;
        if ((it & 15) == 0 && roamc_now() >= deadline) {
            l->stop = ROAMC_STOP_TIME;
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
        uint64_t h = lay_first_fit(&F, order, nfree);
        if (h <= best) {
            best = h;
            memcpy(best_order, order, nfree * sizeof *order);
            memcpy(l->offsets, F.off, n * sizeof *F.off);
        }
    }
    if (best <= l->live_bound)
        l->stop = ROAMC_STOP_OPTIMAL;
    else if (nfree <= 1)
        l->stop = ROAMC_STOP_HEURISTIC; /* one order only: nothing to search */
    l->height = best;
    free(keys), free(order), free(best_order);
    free(F.off), free(F.placed), free(F.iv);
    free(G.start), free(G.adj);
    return ROAMC_OK;
}

roamc_status roamc_layout_solve(roamc_layout *l) {
    if (!l) return ROAMC_BAD_INPUT;
    double t_start = l->t_start ? l->t_start : roamc_now();
    size_t n = l->n;
    l->error[0] = 0;
    free(l->offsets);
    l->offsets = xcalloc(n ? n : 1, sizeof *l->offsets);
    l->height = l->live_bound = l->proven = 0;
    l->detail = "", l->winner = NULL, l->h0 = 0;
    l->timed_out = l->too_short = l->have_solve = l->interval_engine = false;
    l->sr = (layout_solve_result){0};
    l->pt = (layout_pytorch_stats){0};
    /* sizes rounded up to their alignment; every offset and height stays
     * below their sum */
    uint64_t *rs = xmallocarray(n ? n : 1, sizeof *rs), sum = 0;
    bool intervals = l->n_edges == 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t a = l->align[i], s = l->size[i];
        if (s % a && s > UINT64_MAX - a) {
            free(rs);
            return lay_fail(l, ROAMC_BAD_INPUT,
                            "size of buffer %zu overflows when rounded up to %llu", i,
                            (unsigned long long)a);
        }
        rs[i] = (s + a - 1) / a * a;
        uint64_t top = rs[i] + (l->pinned[i] ? l->pin[i] : 0);
        if (top < rs[i] || top > UINT64_MAX - sum) {
            free(rs);
            return lay_fail(l, ROAMC_BAD_INPUT, "the sizes add up to more than 2^64 bytes");
        }
        sum += top;
        intervals = intervals && l->first[i] >= 0 && !l->pinned[i] && a == l->align[0];
    }
    roamc_status st;
    if (intervals) {
        layout_buffer *bufs = xmallocarray(n ? n : 1, sizeof *bufs);
        for (size_t i = 0; i < n; i++) bufs[i] = (layout_buffer){rs[i], l->first[i], l->last[i]};
        l->live_bound = layout_live_peak(bufs, n);
        if (l->has_capacity && l->live_bound > l->capacity) {
            free(bufs), free(rs);
            l->stop = ROAMC_STOP_INFEASIBLE;
            l->proven = l->live_bound;
            return lay_fail(l, ROAMC_NO_FIT,
                            "cannot fit: the live-size lower bound is %llu bytes, above the "
                            "capacity of %llu bytes",
                            (unsigned long long)l->live_bound, (unsigned long long)l->capacity);
        }
        st = lay_intervals(l, bufs, t_start);
        free(bufs);
    } else if (strcmp(l->method, "roam") != 0) {
        st = lay_fail(l, ROAMC_BAD_INPUT,
                      "method %s takes intervals of one alignment, nothing pinned and no conflict "
                      "edge: this problem takes method roam",
                      l->method);
    } else {
        st = lay_general(l, rs, t_start);
    }
    free(rs);
    if (l->proven < l->live_bound) l->proven = l->live_bound;
    if (st == ROAMC_OK && l->has_capacity && l->height > l->capacity)
        st = lay_fail(l, ROAMC_NO_FIT,
                      "no layout within the capacity of %llu bytes (best height %llu bytes, "
                      "lower bound %llu)",
                      (unsigned long long)l->capacity, (unsigned long long)l->height,
                      (unsigned long long)l->proven);
    return st;
}

const uint64_t *roamc_layout_offsets(const roamc_layout *l, size_t *n) {
    if (n) *n = l && l->offsets ? l->n : 0;
    return l ? l->offsets : NULL;
}

uint64_t roamc_layout_height(const roamc_layout *l) {
    return l ? l->height : 0;
}

uint64_t roamc_layout_lower_bound(const roamc_layout *l) {
    return l ? l->live_bound : 0;
}

uint64_t roamc_layout_proven_bound(const roamc_layout *l) {
    return l ? l->proven : 0;
}

double roamc_layout_gap(const roamc_layout *l) {
    if (!l || !l->proven || l->height <= l->proven) return 0.0;
    return (double)(l->height - l->proven) / (double)l->proven;
}

roamc_layout_stop roamc_layout_stop_reason(const roamc_layout *l) {
    return l ? l->stop : ROAMC_STOP_HEURISTIC;
}
