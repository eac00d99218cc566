/* --streams: the pass that puts a plan on several streams (streams.h). */
#include "streams.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "graph_streams.h"

/* Stream kinds, in the order their ids are given. */
enum { STREAMS_COMPUTE, STREAMS_H2D, STREAMS_D2H, STREAMS_COMMK, STREAMS_N_KINDS };
static const char *const streams_kind_names[STREAMS_N_KINDS] = {"compute", "h2d", "d2h", "comm"};

/* Work (pair tests) the clique bound may spend. */
#define STREAMS_BOUND_WORK 20000000u

typedef struct streams_state {
    int n_streams;
    int kind_of[STREAMS_N_KINDS]; /* per stream id: its kind */
    int *stream;                  /* per op */
    int *waits;                   /* pairs */
    size_t n_waits, cap_waits;
    double *t_start, *t_end; /* per op, seconds */
    graph_hb hb;
    graph_hb_touches touches;
    int32_t *xend; /* per storage: the layout's lifetime end (graph_hb_extend) */
    /* the report */
    size_t n_on[STREAMS_N_KINDS]; /* ops per kind */
    size_t n_moved, moved_steps;  /* Reloads prefetched, steps moved in all */
    size_t n_ahead, ahead_steps;  /* collectives issued earlier, steps moved in all */
    size_t n_deferred;            /* ops that depend on a collective moved after it */
    size_t n_gathers_ahead, gathers_ahead_steps; /* AllGathers prefetched, steps in all */
    uint64_t one_peak;                           /* theoretical peak of the order before the pass */
    double serial_s, step_s; /* every op one after another; the step on its streams */
    double busy[STREAMS_N_KINDS],
        overlap[STREAMS_N_KINDS]; /* per kind: busy, of it beside compute */
    uint64_t interleaved_peak;    /* live bytes at a step with lifetimes to xend */
    uint64_t bound;               /* graph_hb_clique_bound */
    size_t bound_members;
} streams_state;

int streams_parse(const char *list, streams_options *o, char *err, size_t errlen) {
    o->kinds = 0;
    o->prefetch = true;
    o->comm_ahead = true;
    o->sync_offload = false;
    const char *p = list;
    if (!*p) return roamc_errorf(err, errlen, "--streams wants copy, comm, all or none");
    while (*p) {
        size_t n = strcspn(p, ",");
        if (n == 4 && strncmp(p, "copy", 4) == 0)
            o->kinds |= STREAMS_COPY;
        else if (n == 4 && strncmp(p, "comm", 4) == 0)
            o->kinds |= STREAMS_COMM;
        else if (n == 3 && strncmp(p, "all", 3) == 0)
            o->kinds |= STREAMS_COPY | STREAMS_COMM;
        else if (n == 4 && strncmp(p, "none", 4) == 0)
            ;
        else if (n == 11 && strncmp(p, "no-prefetch", 11) == 0)
            o->prefetch = false;
        else if (n == 13 && strncmp(p, "no-comm-ahead", 13) == 0)
            o->comm_ahead = false;
        else if (n == 12 && strncmp(p, "sync-offload", 12) == 0)
            o->sync_offload = true;
        else
            return roamc_errorf(
                err, errlen,
                "--streams takes copy, comm, all, none, no-prefetch, no-comm-ahead and "
                "sync-offload, comma-separated, not '%.*s'",
                (int)n, p);
        p += n;
        if (*p == ',') p++;
    }
    return 0;
}

/* The kind of stream op runs on under o. */
static int streams_kind_of_op(const fe_node *n, unsigned kinds) {
    if (strcmp(n->domain, GRAPH_ROAMC_DOMAIN) != 0) return STREAMS_COMPUTE;
    if (kinds & STREAMS_COPY) {
        if (strcmp(n->op_type, "Offload") == 0) return STREAMS_D2H;
        if (strcmp(n->op_type, "Reload") == 0) return STREAMS_H2D;
    }
    static const char *const comm[] = {"AllReduce", "AllGather", "ReduceScatter",
                                       "Broadcast", "Send",      "Recv"};
    if (kinds & STREAMS_COMM)
        for (size_t i = 0; i < sizeof comm / sizeof comm[0]; i++)
            if (strcmp(n->op_type, comm[i]) == 0) return STREAMS_COMMK;
    return STREAMS_COMPUTE;
}

/* Seconds of each op on its stream: compute on the device, copies over
 * the host link, collectives over the link between devices (an all-reduce
 * sends and receives its input twice over, as a ring does; the others
 * move the larger of their inputs and outputs once). */
static void streams_durations(const graph *g, const streams_options *o, const int *kind,
                              double *dur) {
    graph_op_cost *c = xmallocarray(g->n_ops ? g->n_ops : 1, sizeof *c);
    graph_op_costs(g, c);
    const fe_model *m = g->model;
    for (size_t i = 0; i < g->n_ops; i++) {
        const fe_node *n = &m->nodes[i];
        if (c[i].rule == GRAPH_COST_HOST_COPY)
            dur[i] = fit_copy_seconds(&o->device, c[i].bytes);
        else if (kind[i] == STREAMS_COMMK) {
            uint64_t in = 0, out = 0;
            for (size_t k = 0; k < n->n_inputs; k++)
                if (n->inputs[k] >= 0) in += m->values[n->inputs[k]].bytes;
            for (size_t k = 0; k < n->n_outputs; k++)
                if (n->outputs[k] >= 0) out += m->values[n->outputs[k]].bytes;
            double bytes = strcmp(n->op_type, "AllReduce") == 0 ? 2.0 * (double)in
                                                                : (double)(in > out ? in : out);
            dur[i] = bytes / o->comm_bytes_per_s;
        } else
            dur[i] = fit_op_seconds(&o->device, &c[i]);
    }
    free(c);
}

/* Bytes of the storages op makes (a Reload: the value it brings back). */
static uint64_t streams_made_bytes(const graph *g, int op) {
    uint64_t b = 0;
    for (size_t k = g->make_start[op]; k < g->make_start[op + 1]; k++)
        b += g->storages[g->make[k]].size;
    return b;
}

/* Prefetch: each Reload moved up to the step from which the compute ops
 * before its first reader take at least its copy time, but not before its
 * predecessors (its Offload), and not to a step where the value it brings
 * back would raise the schedule's live bytes above their peak (as early as
 * memory allows: the theoretical peak stays the order's).  Rewrites order;
 * counts into st. */
static void streams_prefetch(const graph *g, int *order, const int *kind, const double *dur,
                             streams_state *st) {
    size_t n = g->n_ops;
    int *step_of = xmallocarray(n ? n : 1, sizeof *step_of);
    int *target = xmallocarray(n ? n : 1, sizeof *target);
    uint64_t *live = xmallocarray(n ? n : 1, sizeof *live), cap = 0;
    graph_live_bytes(g, order, live);
    for (size_t s = 0; s < n; s++) cap = live[s] > cap ? live[s] : cap;
    for (size_t s = 0; s < n; s++) step_of[order[s]] = (int)s;
    for (size_t s = 0; s < n; s++) {
        int r = order[s];
        target[r] = -1;
        if (kind[r] != STREAMS_H2D) continue;
        int reader = (int)n, lo = 0;
        for (size_t k = g->succ_start[r]; k < g->succ_start[r + 1]; k++)
            if (step_of[g->succ[k]] < reader) reader = step_of[g->succ[k]];
        for (size_t k = g->pred_start[r]; k < g->pred_start[r + 1]; k++)
            if (step_of[g->pred[k]] + 1 > lo) lo = step_of[g->pred[k]] + 1;
        if (reader == (int)n) continue;
        double acc = 0;
        int at = (int)s;
        uint64_t bytes = streams_made_bytes(g, r);
        for (int q = reader - 1; q >= lo && acc < dur[r]; q--) {
            if (q < (int)s && live[q] + bytes > cap) break;
            if (kind[order[q]] == STREAMS_COMPUTE) acc += dur[order[q]];
            at = q;
        }
        if (at >= (int)s) continue;
        target[r] = at, st->n_moved++, st->moved_steps += s - (size_t)at;
        for (size_t q = (size_t)at; q < s; q++) live[q] += bytes;
    }
    free(live);
    /* the new order: at each step, the Reloads moved there (in their old
     * order), then the op of that step unless it moved */
    size_t *cnt = xcalloc(n + 1, sizeof *cnt);
    for (size_t s = 0; s < n; s++)
        if (target[order[s]] >= 0) cnt[target[order[s]] + 1]++;
    for (size_t s = 0; s < n; s++) cnt[s + 1] += cnt[s];
    int *moved = xmallocarray(n ? n : 1, sizeof *moved);
    size_t *fill = xmallocarray(n + 1, sizeof *fill);
    memcpy(fill, cnt, (n + 1) * sizeof *fill);
    for (size_t s = 0; s < n; s++)
        if (target[order[s]] >= 0) moved[fill[target[order[s]]]++] = order[s];
    int *out = xmallocarray(n ? n : 1, sizeof *out);
    size_t k = 0;
    for (size_t s = 0; s < n; s++) {
        for (size_t i = cnt[s]; i < cnt[s + 1]; i++) out[k++] = moved[i];
        if (target[order[s]] < 0) out[k++] = order[s];
    }
    memcpy(order, out, n * sizeof *order);
    free(step_of), free(target), free(cnt), free(moved), free(fill), free(out);
}

/* Whether a collective may be issued as soon as its inputs are ready: those
 * that send what the step made.  An AllGather or a Recv makes its buffer
 * from nothing, so issued early it would only hold memory longer (a
 * gather's place is --prefetch's). */
static bool streams_sends_made(const fe_node *n) {
    static const char *const sends[] = {"AllReduce", "ReduceScatter", "Broadcast", "Send"};
    for (size_t i = 0; i < sizeof sends / sizeof sends[0]; i++)
        if (strcmp(n->op_type, sends[i]) == 0) return true;
    return false;
}

/* Gathers ahead (streams.h): the AllGathers in schedule order, each moved
 * to just before the first op that followed the one `ahead` before it in
 * the first order (where that unit starts), or to the step after its last
 * predecessor if that is later.  Anchors follow the gathers' order, so the
 * gathers keep theirs on the comm stream.  Rewrites order; counts into st. */
static void streams_gathers_ahead(const graph *g, int *order, long ahead, streams_state *st) {
    size_t n = g->n_ops, ng = 0;
    int *gat = xmallocarray(n ? n : 1, sizeof *gat),
        *anchor = xmallocarray(n ? n : 1, sizeof *anchor);
    int *step_of = xmallocarray(n ? n : 1, sizeof *step_of);
    for (size_t k = 0; k < n; k++)
        if (strcmp(g->model->nodes[order[k]].op_type, "AllGather") == 0 &&
            strcmp(g->model->nodes[order[k]].domain, GRAPH_ROAMC_DOMAIN) == 0) {
            /* the gathers of one place share the op after them */
            size_t a = k + 1; /* the first op after it that is not a gather */
            while (a < n && strcmp(g->model->nodes[order[a]].op_type, "AllGather") == 0) a++;
            anchor[ng] = a < n ? order[a] : -1;
            gat[ng++] = order[k];
        }
    for (size_t j = (size_t)ahead; ahead > 0 && j < ng; j++) {
        int c = gat[j], at = anchor[j - (size_t)ahead];
        if (at < 0) continue;
        for (size_t k = 0; k < n; k++) step_of[order[k]] = (int)k;
        size_t s = (size_t)step_of[c], to = (size_t)step_of[at];
        for (size_t e = g->pred_start[c]; e < g->pred_start[c + 1]; e++)
            if ((size_t)step_of[g->pred[e]] + 1 > to) to = (size_t)step_of[g->pred[e]] + 1;
        if (to >= s) continue;
        memmove(order + to + 1, order + to, (s - to) * sizeof *order);
        order[to] = c, st->n_gathers_ahead++, st->gathers_ahead_steps += s - to;
    }
    free(gat), free(anchor), free(step_of);
}

/* Collectives ahead (streams.h): for each op on the comm stream, in
 * schedule order, moved up to the step after its last predecessor when it
 * sends what the step made, then the ops after it that depend on it (its
 * cone: an op is in it when a predecessor is, a forward sweep since
 * predecessors come first) moved after those that do not, up to the step
 * where the compute of the latter covers its time.  Ops outside the cone
 * never depend on one in it, and the cone keeps its order, so the order
 * stays valid.  Rewrites order; counts into st. */
static void streams_comm_ahead(const graph *g, int *order, const int *kind, const double *dur,
                               streams_state *st) {
    size_t n = g->n_ops;
    int *step_of = xmallocarray(n ? n : 1, sizeof *step_of);
    int *mark = xmallocarray(n ? n : 1, sizeof *mark);
    int *rest = xmallocarray(n ? n : 1, sizeof *rest),
        *cone = xmallocarray(n ? n : 1, sizeof *cone);
    int *comm = xmallocarray(n ? n : 1, sizeof *comm);
    size_t nc = 0;
    for (size_t k = 0; k < n; k++) {
        mark[k] = -1;
        if (kind[order[k]] == STREAMS_COMMK) comm[nc++] = order[k];
    }
    for (size_t i = 0; i < nc; i++) {
        int c = comm[i];
        for (size_t k = 0; k < n; k++) step_of[order[k]] = (int)k;
        size_t s = (size_t)step_of[c];
        if (streams_sends_made(&g->model->nodes[c])) {
            size_t lo = 0;
            for (size_t e = g->pred_start[c]; e < g->pred_start[c + 1]; e++)
                if ((size_t)step_of[g->pred[e]] + 1 > lo) lo = (size_t)step_of[g->pred[e]] + 1;
            if (lo < s) {
                memmove(order + lo + 1, order + lo, (s - lo) * sizeof *order);
                order[lo] = c, st->n_ahead++, st->ahead_steps += s - lo, s = lo;
            }
        }
        mark[c] = (int)i;
        size_t nr = 0, nk = 0, q = s + 1;
        double acc = 0;
        for (; q < n && acc < dur[c]; q++) {
            int v = order[q];
            bool in = false;
            for (size_t e = g->pred_start[v]; e < g->pred_start[v + 1] && !in; e++)
                in = mark[g->pred[e]] == (int)i;
            if (in) {
                mark[v] = (int)i, cone[nk++] = v;
            } else {
                rest[nr++] = v;
                if (kind[v] == STREAMS_COMPUTE) acc += dur[v];
            }
        }
        /* the cone's ops up to where the others' compute covers c's time
         * go after those others */
        if (nk && nr) {
            memcpy(order + s + 1, rest, nr * sizeof *order);
            memcpy(order + s + 1 + nr, cone, nk * sizeof *order);
            st->n_deferred += nk;
        }
    }
    free(step_of), free(mark), free(rest), free(cone), free(comm);
}

static void streams_add_wait(streams_state *st, int a, int b) {
    if (st->n_waits == st->cap_waits) {
        st->cap_waits = st->cap_waits ? 2 * st->cap_waits : 64;
        st->waits = xreallocarray(st->waits, 2 * st->cap_waits, sizeof *st->waits);
    }
    st->waits[2 * st->n_waits] = a, st->waits[2 * st->n_waits + 1] = b;
    st->n_waits++;
}

/* The clock v would get from its stream's last op and the waits chosen so
 * far (clk, n_streams entries), joined with u's. */
static void streams_join(const graph_hb *hb, int32_t *clk, int u) {
    const int32_t *cu = hb->clock + (size_t)u * (size_t)hb->n_streams;
    for (int i = 0; i < hb->n_streams; i++)
        if (cu[i] > clk[i]) clk[i] = cu[i];
}

/* Whether u happens before the op whose clock so far is clk. */
static bool streams_covered(const graph_hb *hb, const int32_t *clk, int u) {
    return clk[hb->stream[u]] >= hb->pos[u];
}

/* sync-offload: for each compute op, the Offloads it waits for: those
 * whose value's last compute use (or the Offload itself) is the latest
 * step before it, as sync[start[v] .. start[v+1]).  Returns start, or NULL
 * when there is none. */
static size_t *streams_sync_points(const graph *g, const int *order, const streams_state *st,
                                   int **sync) {
    size_t n = g->n_ops;
    int32_t *last = xmallocarray(g->n_storages ? g->n_storages : 1, sizeof *last);
    int *next = xmallocarray(n + 1, sizeof *next), *at = xmallocarray(n ? n : 1, sizeof *at);
    for (size_t s = 0; s < g->n_storages; s++) last[s] = -1;
    for (size_t k = 0; k < n; k++) {
        int v = order[k];
        if (st->kind_of[st->stream[v]] != STREAMS_COMPUTE) continue;
        for (size_t e = g->touch_start[v]; e < g->touch_start[v + 1]; e++)
            last[g->touch[e]] = (int32_t)k;
    }
    next[n] = -1; /* the first compute op at or after each step */
    for (size_t k = n; k-- > 0;)
        next[k] = st->kind_of[st->stream[order[k]]] == STREAMS_COMPUTE ? order[k] : next[k + 1];
    size_t *start = xcalloc(n + 1, sizeof *start), found = 0;
    for (size_t k = 0; k < n; k++) {
        int o = order[k];
        at[o] = -1;
        if (st->kind_of[st->stream[o]] != STREAMS_D2H) continue;
        size_t after = k;
        for (size_t e = g->touch_start[o]; e < g->touch_start[o + 1]; e++)
            if (last[g->touch[e]] > (int32_t)after) after = (size_t)last[g->touch[e]];
        if ((at[o] = next[after + 1]) >= 0) start[at[o] + 1]++, found++;
    }
    *sync = NULL;
    if (!found) {
        free(start), start = NULL;
    } else {
        for (size_t v = 0; v < n; v++) start[v + 1] += start[v];
        size_t *fill = xmallocarray(n + 1, sizeof *fill);
        memcpy(fill, start, (n + 1) * sizeof *fill);
        *sync = xmallocarray(found, sizeof **sync);
        for (size_t k = 0; k < n; k++)
            if (at[order[k]] >= 0) (*sync)[fill[at[order[k]]]++] = order[k];
        free(fill);
    }
    free(last), free(next), free(at);
    return start;
}

/* A predecessor on another stream, and its step. */
typedef struct streams_pred {
    int32_t step;
    int op;
} streams_pred;

static int streams_pred_later_first(const void *x, const void *y) {
    const streams_pred *a = x, *b = y;
    return (a->step < b->step) - (a->step > b->step);
}

/* Waits and times, op by op in schedule order (streams.h says which waits). */
static void streams_schedule(const graph *g, const int *order, const double *dur, bool sync_offload,
                             streams_state *st) {
    size_t n = g->n_ops, ns = (size_t)st->n_streams;
    graph_hb *hb = &st->hb;
    graph_hb_init(hb, n, st->n_streams);
    int32_t *clk = xmallocarray(ns, sizeof *clk);
    double *free_at = xcalloc(ns, sizeof *free_at);
    int **list = xcalloc(ns, sizeof *list); /* per stream: its ops so far */
    size_t *len = xcalloc(ns, sizeof *len), *joined = xcalloc(ns, sizeof *joined);
    for (size_t s = 0; s < ns; s++) list[s] = xmallocarray(n ? n : 1, sizeof *list[s]);
    streams_pred *pred = xmallocarray(n ? n : 1, sizeof *pred);
    int *w = xmallocarray(2 * n + ns + 1, sizeof *w);
    int *sync = NULL;
    size_t *sync_start = sync_offload ? streams_sync_points(g, order, st, &sync) : NULL;
    for (size_t k = 0; k < n; k++) {
        int v = order[k], sv = st->stream[v];
        size_t nw = 0;
        int last = hb->last[sv];
        for (size_t i = 0; i < ns; i++) clk[i] = last >= 0 ? hb->clock[(size_t)last * ns + i] : 0;
        /* a side-stream op is issued after the compute op before it */
        int issue = hb->last[0];
        if (sv != 0 && issue >= 0 && !streams_covered(hb, clk, issue))
            w[nw++] = issue, streams_join(hb, clk, issue);
        /* predecessors on other streams, latest first: one wait often covers the rest */
        size_t np = 0;
        for (size_t e = g->pred_start[v]; e < g->pred_start[v + 1]; e++)
            if (st->stream[g->pred[e]] != sv)
                pred[np++] = (streams_pred){hb->step[g->pred[e]], g->pred[e]};
        qsort(pred, np, sizeof *pred, streams_pred_later_first);
        for (size_t a = 0; a < np; a++)
            if (!streams_covered(hb, clk, pred[a].op))
                w[nw++] = pred[a].op, streams_join(hb, clk, pred[a].op);
        for (size_t a = sync_start ? sync_start[v] : 0; sync_start && a < sync_start[v + 1]; a++)
            if (!streams_covered(hb, clk, sync[a]))
                w[nw++] = sync[a], streams_join(hb, clk, sync[a]);
        double start = free_at[sv];
        for (size_t a = 0; a < nw; a++)
            if (st->t_end[w[a]] > start) start = st->t_end[w[a]];
        /* a compute op joins the side-stream ops that have ended by its start:
         * their memory is free again from here on, at no cost in time */
        for (size_t s = 1; sv == 0 && s < ns; s++) {
            while (joined[s] < len[s] && st->t_end[list[s][joined[s]]] <= start) joined[s]++;
            if (joined[s] == 0) continue;
            int x = list[s][joined[s] - 1];
            if (!streams_covered(hb, clk, x)) w[nw++] = x, streams_join(hb, clk, x);
        }
        for (size_t a = 0; a < nw; a++) streams_add_wait(st, w[a], v);
        graph_hb_push(hb, v, sv, w, nw);
        st->t_start[v] = start;
        st->t_end[v] = start + dur[v];
        free_at[sv] = st->t_end[v];
        list[sv][len[sv]++] = v;
        st->serial_s += dur[v];
        if (st->t_end[v] > st->step_s) st->step_s = st->t_end[v];
        st->busy[st->kind_of[sv]] += dur[v];
    }
    /* time each side stream runs beside compute: both lists are in time order */
    for (size_t s = 1; s < ns; s++) {
        size_t c = 0;
        for (size_t i = 0; i < len[s]; i++) {
            double a = st->t_start[list[s][i]], b = st->t_end[list[s][i]];
            while (c < len[0] && st->t_end[list[0][c]] <= a) c++;
            for (size_t j = c; j < len[0] && st->t_start[list[0][j]] < b; j++) {
                double lo = st->t_start[list[0][j]] > a ? st->t_start[list[0][j]] : a;
                double hi = st->t_end[list[0][j]] < b ? st->t_end[list[0][j]] : b;
                if (hi > lo) st->overlap[st->kind_of[s]] += hi - lo;
            }
        }
    }
    free(sync), free(sync_start);
    for (size_t s = 0; s < ns; s++) free(list[s]);
    free(list), free(len), free(joined), free(clk), free(free_at), free(pred), free(w);
}

static void streams_state_free(void *state) {
    streams_state *st = state;
    if (!st) return;
    free(st->stream);
    free(st->waits);
    free(st->t_start);
    free(st->t_end);
    graph_hb_free(&st->hb);
    if (st->touches.first) graph_hb_touches_free(&st->touches);
    free(st->xend);
    free(st);
}

static int streams_order(const planner_pass *pass, plan *p, char *err, size_t errlen) {
    (void)err, (void)errlen;
    const streams_options *o = pass->ctx;
    const graph *g = p->g;
    size_t n = g->n_ops;
    streams_state *st = xcalloc(1, sizeof *st);
    p->pass_state = st;
    /* stream ids: compute, then the kinds asked for, in DESIGN's order */
    int id_of[STREAMS_N_KINDS];
    st->kind_of[st->n_streams] = STREAMS_COMPUTE, id_of[STREAMS_COMPUTE] = st->n_streams++;
    if (o->kinds & STREAMS_COPY) {
        st->kind_of[st->n_streams] = STREAMS_H2D, id_of[STREAMS_H2D] = st->n_streams++;
        st->kind_of[st->n_streams] = STREAMS_D2H, id_of[STREAMS_D2H] = st->n_streams++;
    }
    if (o->kinds & STREAMS_COMM)
        st->kind_of[st->n_streams] = STREAMS_COMMK, id_of[STREAMS_COMMK] = st->n_streams++;
    int *kind = xmallocarray(n ? n : 1, sizeof *kind);
    st->stream = xmallocarray(n ? n : 1, sizeof *st->stream);
    for (size_t i = 0; i < n; i++) {
        kind[i] = streams_kind_of_op(&g->model->nodes[i], o->kinds);
        st->stream[i] = id_of[kind[i]];
        st->n_on[kind[i]]++;
    }
    double *dur = xmallocarray(n ? n : 1, sizeof *dur);
    streams_durations(g, o, kind, dur);
    st->one_peak = graph_peak(g, p->order, NULL, NULL);
    if (o->prefetch && st->n_on[STREAMS_H2D]) streams_prefetch(g, p->order, kind, dur, st);
    if (o->gather_ahead > 0 && st->n_on[STREAMS_COMMK])
        streams_gathers_ahead(g, p->order, o->gather_ahead, st);
    if (o->comm_ahead && st->n_on[STREAMS_COMMK]) streams_comm_ahead(g, p->order, kind, dur, st);
    st->t_start = xcalloc(n ? n : 1, sizeof *st->t_start);
    st->t_end = xcalloc(n ? n : 1, sizeof *st->t_end);
    streams_schedule(g, p->order, dur, o->sync_offload, st);
    free(kind);
    free(dur);
    return 0;
}

static void streams_lifetimes(const plan *p, int32_t *end) {
    streams_state *st = p->pass_state;
    if (!st->touches.first) graph_hb_touches_of_graph(p->g, &st->hb, &st->touches);
    graph_hb_extend(&st->hb, &st->touches, end, end);
    free(st->xend);
    st->xend = xmallocarray(p->g->n_storages ? p->g->n_storages : 1, sizeof *st->xend);
    memcpy(st->xend, end, p->g->n_storages * sizeof *end);
}

static void streams_finish(plan *p) {
    streams_state *st = p->pass_state;
    const graph *g = p->g;
    size_t ns = g->n_storages;
    if (!st->xend) { /* a layout that took no lifetimes from the pass: none does today */
        int32_t *end = xmallocarray(ns ? ns : 1, sizeof *end);
        memcpy(end, p->end, ns * sizeof *end);
        streams_lifetimes(p, end);
        free(end);
    }
    uint64_t *size = xmallocarray(ns ? ns : 1, sizeof *size);
    int64_t *delta = xcalloc(g->n_ops + 1, sizeof *delta);
    for (size_t s = 0; s < ns; s++) {
        size[s] = g->storages[s].size;
        delta[p->start[s]] += (int64_t)size[s];
        delta[st->xend[s] + 1] -= (int64_t)size[s];
    }
    int64_t live = 0;
    for (size_t k = 0; k < g->n_ops; k++) {
        live += delta[k];
        if ((uint64_t)live > st->interleaved_peak) st->interleaved_peak = (uint64_t)live;
    }
    int at = 0;
    graph_peak(g, p->order, NULL, &at);
    ROAMC_ASSERT(st->touches.n_buffers == ns); /* the bound reads the touches' count */
    st->bound = graph_hb_clique_bound(&st->hb, &st->touches,
                                      &(graph_hb_buffers){size, p->start, p->end, NULL}, at,
                                      STREAMS_BOUND_WORK, &st->bound_members);
    free(size);
    free(delta);
}

/* Reports the first clash of the memory rule into err. */
typedef struct streams_clash_ctx {
    const plan *p;
    char *err;
    size_t errlen;
} streams_clash_ctx;

static int streams_clash(void *ctx, int earlier, int later, int n, int f) {
    streams_clash_ctx *c = ctx;
    const streams_state *st = c->p->pass_state;
    roamc_errorf(c->err, c->errlen,
                 "storages %d and %d share addresses, but op %d (stream %d) is not ordered "
                 "before op %d (stream %d)",
                 earlier, later, n, st->stream[n], f, st->stream[f]);
    return 1;
}

static int streams_validate(const plan *p, char *err, size_t errlen) {
    streams_state *st = p->pass_state;
    const graph *g = p->g;
    int from = -1, to = -1;
    size_t un = graph_hb_uncovered(g, &st->hb, &from, &to);
    if (un)
        return roamc_errorf(err, errlen,
                            "%zu ordering edges between streams have no wait, e.g. op %d "
                            "(stream %d) before op %d (stream %d)",
                            un, from, st->stream[from], to, st->stream[to]);
    if (!st->touches.first) graph_hb_touches_of_graph(g, &st->hb, &st->touches);
    uint64_t *size = xmallocarray(g->n_storages ? g->n_storages : 1, sizeof *size);
    for (size_t s = 0; s < g->n_storages; s++) size[s] = g->storages[s].size;
    streams_clash_ctx c = {p, err, errlen};
    int rc = graph_hb_check_layout(&st->hb, &st->touches,
                                   &(graph_hb_buffers){size, p->start, NULL, p->offsets},
                                   streams_clash, &c);
    free(size);
    return rc ? -1 : 0;
}

static void streams_write(const plan *p, json_t *root) {
    const streams_state *st = p->pass_state;
    const graph *g = p->g;
    json_object_set_new(root, "version", json_integer(2));
    json_t *decl = json_array(), *per = json_array(), *waits = json_array(), *times = json_array();
    for (int s = 0; s < st->n_streams; s++)
        json_array_append_new(
            decl, json_pack("{s:i,s:s}", "id", s, "kind", streams_kind_names[st->kind_of[s]]));
    for (size_t k = 0; k < g->n_ops; k++) {
        int v = p->order[k];
        json_array_append_new(per, json_integer(st->stream[v]));
        json_array_append_new(times, json_pack("[f,f]", st->t_start[v], st->t_end[v]));
    }
    for (size_t k = 0; k < st->n_waits; k++)
        json_array_append_new(waits, json_pack("[i,i]", st->waits[2 * k], st->waits[2 * k + 1]));
    json_object_set_new(root, "streams", decl);
    json_object_set_new(root, "stream", per);
    json_object_set_new(root, "waits", waits);
    json_object_set_new(root, "times", times);
}

static void streams_report_text(FILE *f, const plan *p) {
    const streams_state *st = p->pass_state;
    char a[32], b[32], c[32], d[32], e[32];
    fprintf(f, "  streams       %d (compute", st->n_streams);
    for (int s = 1; s < st->n_streams; s++) fprintf(f, ", %s", streams_kind_names[st->kind_of[s]]);
    fprintf(f, "): %zu ops on copy streams, %zu on comm; %zu waits",
            st->n_on[STREAMS_H2D] + st->n_on[STREAMS_D2H], st->n_on[STREAMS_COMMK], st->n_waits);
    if (st->n_on[STREAMS_H2D])
        fprintf(f, "; %zu of %zu Reloads issued earlier (prefetch, %.1f steps ahead on average)",
                st->n_moved, st->n_on[STREAMS_H2D],
                st->n_moved ? (double)st->moved_steps / (double)st->n_moved : 0.0);
    if (st->n_on[STREAMS_COMMK])
        fprintf(f,
                "; %zu collectives issued earlier (%zu steps in all), %zu ops after them deferred",
                st->n_ahead, st->ahead_steps, st->n_deferred);
    if (st->n_gathers_ahead)
        fprintf(f, "; %zu gathers prefetched (%zu steps in all)", st->n_gathers_ahead,
                st->gathers_ahead_steps);
    fputc('\n', f);
    fprintf(f,
            "  step time     %.6g s on the streams, %.6g s one op after another; compute busy %.6g "
            "s, waiting %.6g s\n",
            st->step_s, st->serial_s, st->busy[STREAMS_COMPUTE],
            st->step_s - st->busy[STREAMS_COMPUTE]);
    for (int k = 1; k < STREAMS_N_KINDS; k++)
        if (st->busy[k] > 0)
            fprintf(f, "  overlap       %s busy %.6g s, %.6g s of it beside compute (%.1f%%)\n",
                    streams_kind_names[k], st->busy[k], st->overlap[k],
                    100.0 * st->overlap[k] / st->busy[k]);
    fprintf(f,
            "  stream memory one stream: theoretical %s; on streams: theoretical %s (schedule "
            "order), %s live in some interleaving, actual %s; bound %s (%zu buffers pairwise "
            "live together or unordered)\n",
            roamc_bytes_human(st->one_peak, a, sizeof a),
            roamc_bytes_human(p->theoretical, b, sizeof b),
            roamc_bytes_human(st->interleaved_peak, c, sizeof c),
            roamc_bytes_human(p->actual, d, sizeof d), roamc_bytes_human(st->bound, e, sizeof e),
            st->bound_members);
}

static void streams_report_json(const plan *p, json_t *report) {
    const streams_state *st = p->pass_state;
    json_t *r = json_object(), *busy = json_object(), *over = json_object();
    json_object_set_new(r, "streams", json_integer(st->n_streams));
    json_object_set_new(r, "waits", json_integer((json_int_t)st->n_waits));
    json_object_set_new(r, "ops_h2d", json_integer((json_int_t)st->n_on[STREAMS_H2D]));
    json_object_set_new(r, "ops_d2h", json_integer((json_int_t)st->n_on[STREAMS_D2H]));
    json_object_set_new(r, "ops_comm", json_integer((json_int_t)st->n_on[STREAMS_COMMK]));
    json_object_set_new(r, "reloads_prefetched", json_integer((json_int_t)st->n_moved));
    json_object_set_new(r, "collectives_ahead", json_integer((json_int_t)st->n_ahead));
    json_object_set_new(r, "ops_deferred", json_integer((json_int_t)st->n_deferred));
    json_object_set_new(r, "gathers_prefetched", json_integer((json_int_t)st->n_gathers_ahead));
    json_object_set_new(r, "step_seconds", json_real(st->step_s));
    json_object_set_new(r, "serial_seconds", json_real(st->serial_s));
    for (int k = 0; k < STREAMS_N_KINDS; k++) {
        json_object_set_new(busy, streams_kind_names[k], json_real(st->busy[k]));
        if (k) json_object_set_new(over, streams_kind_names[k], json_real(st->overlap[k]));
    }
    json_object_set_new(r, "busy_seconds", busy);
    json_object_set_new(r, "beside_compute_seconds", over);
    json_object_set_new(r, "one_stream_theoretical", json_integer((json_int_t)st->one_peak));
    json_object_set_new(r, "theoretical", json_integer((json_int_t)p->theoretical));
    json_object_set_new(r, "interleaved_live", json_integer((json_int_t)st->interleaved_peak));
    json_object_set_new(r, "actual", json_integer((json_int_t)p->actual));
    json_object_set_new(r, "lower_bound", json_integer((json_int_t)st->bound));
    json_object_set_new(report, "streams", r);
}

void streams_pass_init(planner_pass *pass, const streams_options *o) {
    *pass = (planner_pass){.ctx = o,
                           .order = streams_order,
                           .lifetimes = streams_lifetimes,
                           .finish = streams_finish,
                           .validate = streams_validate,
                           .write = streams_write,
                           .report_text = streams_report_text,
                           .report_json = streams_report_json,
                           .free_state = streams_state_free};
}
