/* Happens-before over several streams and the memory rule (graph_streams.h). */
#include "graph_streams.h"

#include <stdlib.h>
#include <string.h>

#include "base.h"

void graph_hb_init(graph_hb *hb, size_t n_ops, int n_streams) {
    hb->n_ops = n_ops;
    hb->n_pushed = 0;
    hb->n_streams = n_streams;
    hb->step = xmallocarray(n_ops ? n_ops : 1, sizeof *hb->step);
    hb->stream = xmallocarray(n_ops ? n_ops : 1, sizeof *hb->stream);
    hb->pos = xmallocarray(n_ops ? n_ops : 1, sizeof *hb->pos);
    hb->clock = xcalloc(n_ops ? n_ops * (size_t)n_streams : 1, sizeof *hb->clock);
    hb->last = xmallocarray((size_t)n_streams, sizeof *hb->last);
    for (size_t i = 0; i < n_ops; i++) hb->step[i] = -1, hb->stream[i] = 0, hb->pos[i] = 0;
    for (int s = 0; s < n_streams; s++) hb->last[s] = -1;
}

void graph_hb_free(graph_hb *hb) {
    free(hb->step);
    free(hb->stream);
    free(hb->pos);
    free(hb->clock);
    free(hb->last);
}

void graph_hb_push(graph_hb *hb, int op, int stream, const int *waits, size_t n) {
    size_t ns = (size_t)hb->n_streams;
    int32_t *c = hb->clock + (size_t)op * ns;
    int prev = hb->last[stream];
    if (prev >= 0)
        for (size_t i = 0; i < ns; i++) c[i] = hb->clock[(size_t)prev * ns + i];
    for (size_t k = 0; k < n; k++) {
        const int32_t *ca = hb->clock + (size_t)waits[k] * ns;
        for (size_t i = 0; i < ns; i++)
            if (ca[i] > c[i]) c[i] = ca[i];
    }
    c[stream] = prev >= 0 ? hb->pos[prev] + 1 : 1;
    hb->pos[op] = c[stream];
    hb->stream[op] = stream;
    hb->step[op] = (int32_t)hb->n_pushed++;
    hb->last[stream] = op;
}

int graph_hb_build(graph_hb *hb, const graph_hb_order *o, char *err, size_t errlen) {
    size_t n_ops = o->n_ops, n_waits = o->n_waits;
    const int *order = o->order, *stream = o->stream, *waits = o->waits;
    int n_streams = o->n_streams;
    int32_t *step_of = xmallocarray(n_ops ? n_ops : 1, sizeof *step_of);
    for (size_t s = 0; s < n_ops; s++) step_of[order[s]] = (int32_t)s;
    for (size_t s = 0; stream && s < n_ops; s++)
        if (stream[s] < 0 || stream[s] >= n_streams) {
            free(step_of);
            return roamc_errorf(err, errlen, "step %zu is on stream %d, not one of 0..%d", s,
                                stream[s], n_streams - 1);
        }
    /* the waits into each op, as CSR by the waiting op */
    size_t *in_start = xcalloc(n_ops + 1, sizeof *in_start);
    int *in = xmallocarray(n_waits ? n_waits : 1, sizeof *in);
    for (size_t k = 0; k < n_waits; k++) {
        int a = waits[2 * k], b = waits[2 * k + 1];
        if (a < 0 || b < 0 || (size_t)a >= n_ops || (size_t)b >= n_ops) {
            free(step_of), free(in_start), free(in);
            return roamc_errorf(err, errlen, "wait [%d, %d]: not two node indices 0..%zu", a, b,
                                n_ops ? n_ops - 1 : 0);
        }
        if (step_of[a] >= step_of[b]) {
            free(step_of), free(in_start), free(in);
            return roamc_errorf(err, errlen,
                                "wait [%d, %d]: node %d does not come before node %d in the "
                                "schedule",
                                a, b, a, b);
        }
        in_start[b + 1]++;
    }
    for (size_t i = 0; i < n_ops; i++) in_start[i + 1] += in_start[i];
    size_t *fill = xmallocarray(n_ops ? n_ops : 1, sizeof *fill);
    for (size_t i = 0; i < n_ops; i++) fill[i] = in_start[i];
    for (size_t k = 0; k < n_waits; k++) in[fill[waits[2 * k + 1]]++] = waits[2 * k];
    graph_hb_init(hb, n_ops, n_streams);
    for (size_t s = 0; s < n_ops; s++) {
        int op = order[s];
        graph_hb_push(hb, op, stream ? stream[s] : 0, in + in_start[op],
                      in_start[op + 1] - in_start[op]);
    }
    free(step_of);
    free(in_start);
    free(in);
    free(fill);
    return 0;
}

size_t graph_hb_uncovered(const graph *g, const graph_hb *hb, int *from, int *to) {
    size_t n = 0;
    for (size_t u = 0; u < g->n_ops; u++)
        for (size_t k = g->succ_start[u]; k < g->succ_start[u + 1]; k++) {
            int v = g->succ[k];
            if (graph_hb_before(hb, (int)u, v)) continue;
            if (!n++) *from = (int)u, *to = v;
        }
    return n;
}

static void graph_hb_touches_alloc(const graph_hb *hb, size_t n_buffers, graph_hb_touches *t) {
    size_t ns = (size_t)hb->n_streams;
    t->n_buffers = n_buffers;
    t->n_streams = hb->n_streams;
    t->first = xmallocarray(n_buffers ? n_buffers : 1, sizeof *t->first);
    t->last = xmallocarray(n_buffers ? n_buffers * ns : 1, sizeof *t->last);
    for (size_t b = 0; b < n_buffers; b++) t->first[b] = -1;
    for (size_t i = 0; i < n_buffers * ns; i++) t->last[i] = -1;
}

/* Records that op touches buffer b. */
static void graph_hb_touch(const graph_hb *hb, graph_hb_touches *t, size_t b, int op) {
    int32_t *f = &t->first[b], *l = &t->last[b * (size_t)t->n_streams + (size_t)hb->stream[op]];
    if (*f < 0 || hb->step[op] < hb->step[*f]) *f = op;
    if (*l < 0 || hb->step[op] > hb->step[*l]) *l = op;
}

void graph_hb_touches_build(const graph_hb *hb, size_t n_buffers, const size_t *start,
                            const int *ops, graph_hb_touches *t) {
    graph_hb_touches_alloc(hb, n_buffers, t);
    for (size_t b = 0; b < n_buffers; b++)
        for (size_t k = start[b]; k < start[b + 1]; k++) graph_hb_touch(hb, t, b, ops[k]);
}

void graph_hb_touches_of_graph(const graph *g, const graph_hb *hb, graph_hb_touches *t) {
    graph_hb_touches_alloc(hb, g->n_storages, t);
    for (size_t op = 0; op < g->n_ops; op++)
        for (size_t k = g->touch_start[op]; k < g->touch_start[op + 1]; k++)
            graph_hb_touch(hb, t, (size_t)g->touch[k], (int)op);
}

void graph_hb_touches_free(graph_hb_touches *t) {
    free(t->first);
    free(t->last);
}

/* A toucher of a that does not happen before b's first toucher, or -1 when
 * a is ordered before b. */
static int graph_hb_unordered_toucher(const graph_hb *hb, const graph_hb_touches *t, int a, int b) {
    int f = t->first[b];
    if (f < 0) return -1;
    const int32_t *la = t->last + (size_t)a * (size_t)t->n_streams;
    for (int s = 0; s < t->n_streams; s++)
        if (la[s] >= 0 && !graph_hb_before(hb, la[s], f)) return la[s];
    return -1;
}

bool graph_hb_ordered(const graph_hb *hb, const graph_hb_touches *t, int a, int b) {
    return graph_hb_unordered_toucher(hb, t, a, b) < 0;
}

/* Each stream's ops in order: ops[start[s] .. start[s+1]). */
static void graph_hb_stream_lists(const graph_hb *hb, size_t **start, int **ops) {
    size_t ns = (size_t)hb->n_streams;
    size_t *st = xcalloc(ns + 1, sizeof *st);
    int *o = xmallocarray(hb->n_ops ? hb->n_ops : 1, sizeof *o);
    for (size_t i = 0; i < hb->n_ops; i++)
        if (hb->step[i] >= 0) st[hb->stream[i] + 1]++;
    for (size_t s = 0; s < ns; s++) st[s + 1] += st[s];
    for (size_t i = 0; i < hb->n_ops; i++)
        if (hb->step[i] >= 0) o[st[hb->stream[i]] + (size_t)hb->pos[i] - 1] = (int)i;
    *start = st;
    *ops = o;
}

/* The index (within the ops list[0 .. n) of one stream u) of the first op
 * that x happens before: clocks only grow along a stream, so a bisection. */
static size_t graph_hb_first_after(const graph_hb *hb, const int *list, size_t n, int u, int x) {
    if (hb->stream[x] == u) return (size_t)hb->pos[x];
    size_t ns = (size_t)hb->n_streams, sx = (size_t)hb->stream[x], lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (hb->clock[(size_t)list[mid] * ns + sx] >= hb->pos[x])
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

void graph_hb_extend(const graph_hb *hb, const graph_hb_touches *t, const int32_t *end,
                     int32_t *xend) {
    size_t *st;
    int *ops;
    graph_hb_stream_lists(hb, &st, &ops);
    size_t ns = (size_t)hb->n_streams;
    for (size_t b = 0; b < t->n_buffers; b++) {
        int32_t e = end[b];
        const int32_t *lb = t->last + b * ns;
        for (size_t u = 0; u < ns; u++) {
            const int *list = ops + st[u];
            size_t n = st[u + 1] - st[u], j = 0;
            for (size_t s = 0; s < ns; s++) {
                if (lb[s] < 0) continue;
                size_t jx = graph_hb_first_after(hb, list, n, (int)u, lb[s]);
                if (jx > j) j = jx;
            }
            if (j > 0 && hb->step[list[j - 1]] > e) e = hb->step[list[j - 1]];
        }
        xend[b] = e;
    }
    free(st);
    free(ops);
}

/* Buffers a and b may not share an address: live together in the
 * schedule, or unordered. */
static bool graph_hb_conflict(const graph_hb *hb, const graph_hb_touches *t, const int32_t *start,
                              const int32_t *end, int a, int b) {
    if (start[a] <= end[b] && start[b] <= end[a]) return true;
    return !graph_hb_may_share(hb, t, a, b);
}

typedef struct graph_hb_sized {
    uint64_t size;
    int b;
} graph_hb_sized;

static int graph_hb_by_size_desc(const void *x, const void *y) {
    const graph_hb_sized *a = x, *b = y;
    if (a->size != b->size) return a->size > b->size ? -1 : 1;
    return a->b - b->b;
}

uint64_t graph_hb_clique_bound(const graph_hb *hb, const graph_hb_touches *t,
                               const graph_hb_buffers *bufs, int at, uint64_t work,
                               size_t *members) {
    size_t n_buffers = t->n_buffers;
    const uint64_t *size = bufs->size;
    const int32_t *start = bufs->start, *end = bufs->end;
    int *set = xmallocarray(n_buffers ? n_buffers : 1, sizeof *set);
    graph_hb_sized *rest = xmallocarray(n_buffers ? n_buffers : 1, sizeof *rest);
    size_t n_set = 0, n_rest = 0;
    uint64_t bytes = 0;
    for (size_t b = 0; b < n_buffers; b++) {
        if (!size[b]) continue;
        if (start[b] <= at && at <= end[b])
            set[n_set++] = (int)b, bytes += size[b];
        else
            rest[n_rest++] = (graph_hb_sized){size[b], (int)b};
    }
    qsort(rest, n_rest, sizeof *rest, graph_hb_by_size_desc);
    uint64_t spent = 0;
    for (size_t i = 0; i < n_rest && spent < work; i++) {
        int c = rest[i].b;
        bool all = true;
        for (size_t k = 0; k < n_set && all; k++, spent++)
            all = graph_hb_conflict(hb, t, start, end, c, set[k]);
        if (all) set[n_set++] = c, bytes += size[c];
    }
    if (members) *members = n_set;
    free(set);
    free(rest);
    return bytes;
}

/* One piece of the address space and the buffer that last held it. */
typedef struct graph_hb_seg {
    uint64_t lo, hi;
    int holder;
} graph_hb_seg;

typedef struct graph_hb_key {
    int32_t start, first_step;
    int b;
} graph_hb_key;

static int graph_hb_key_cmp(const void *x, const void *y) {
    const graph_hb_key *a = x, *b = y;
    if (a->start != b->start) return a->start < b->start ? -1 : 1;
    if (a->first_step != b->first_step) return a->first_step < b->first_step ? -1 : 1;
    return a->b - b->b;
}

/* The first segment of segs[0 .. n) (disjoint, by address) that ends above lo. */
static size_t graph_hb_seg_find(const graph_hb_seg *segs, size_t n, uint64_t lo) {
    size_t a = 0, b = n;
    while (a < b) {
        size_t mid = a + (b - a) / 2;
        if (segs[mid].hi <= lo)
            a = mid + 1;
        else
            b = mid;
    }
    return a;
}

int graph_hb_check_layout(const graph_hb *hb, const graph_hb_touches *t,
                          const graph_hb_buffers *bufs, graph_hb_clash_fn fn, void *ctx) {
    const uint64_t *size = bufs->size, *offset = bufs->offset;
    const int32_t *start = bufs->start;
    size_t n = t->n_buffers, nk = 0, n_segs = 0;
    graph_hb_key *keys = xmallocarray(n ? n : 1, sizeof *keys);
    for (size_t b = 0; b < n; b++)
        if (size[b])
            keys[nk++] =
                (graph_hb_key){start[b], t->first[b] >= 0 ? hb->step[t->first[b]] : -1, (int)b};
    qsort(keys, nk, sizeof *keys, graph_hb_key_cmp);
    /* each buffer adds at most two pieces net */
    graph_hb_seg *segs = xmallocarray(2 * nk + 1, sizeof *segs);
    int *seen = xmallocarray(n ? n : 1, sizeof *seen);
    for (size_t b = 0; b < n; b++) seen[b] = -1;
    int rc = 0;
    for (size_t k = 0; k < nk && !rc; k++) {
        int b = keys[k].b;
        uint64_t lo = offset[b], hi = offset[b] + size[b];
        size_t i = graph_hb_seg_find(segs, n_segs, lo), j = i;
        for (; j < n_segs && segs[j].lo < hi; j++) {
            int a = segs[j].holder;
            if (seen[a] == b) continue;
            seen[a] = b;
            int x = graph_hb_unordered_toucher(hb, t, a, b);
            if (x >= 0 && (rc = fn(ctx, a, b, x, t->first[b]))) break;
        }
        if (rc) break;
        graph_hb_seg pieces[3];
        size_t np = 0;
        if (i < j && segs[i].lo < lo) pieces[np++] = (graph_hb_seg){segs[i].lo, lo, segs[i].holder};
        pieces[np++] = (graph_hb_seg){lo, hi, b};
        if (i < j && segs[j - 1].hi > hi)
            pieces[np++] = (graph_hb_seg){hi, segs[j - 1].hi, segs[j - 1].holder};
        memmove(segs + i + np, segs + j, (n_segs - j) * sizeof *segs);
        memcpy(segs + i, pieces, np * sizeof *pieces);
        n_segs = n_segs - (j - i) + np;
    }
    free(keys);
    free(segs);
    free(seen);
    return rc;
}
