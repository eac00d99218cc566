/* Graph IR: storages, ordering edges, liveness and peaks (see graph.h). */
#include "graph.h"
#include "base.h"
#include "graph_internal.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <igraph.h>

/* The frontend's error message (fe_verrorf) with the model's path. */
/* What a changed step's nodes make (DESIGN.md, "A step that fits"), by
 * the node that makes each storage's root (a view shares its input's
 * storage): an ai.roamc Offload's output lives in host memory (no device
 * bytes; its own size kept apart), a Reload's is reloaded, a recompute
 * clone's (attribute roamc_recompute) recomputed. */
static void graph_mark_changed(graph *g, const fe_model *m) {
    for (size_t s = 0; s < g->n_storages; s++) {
        graph_storage *st = &g->storages[s];
        int p = m->values[st->root].producer;
        if (p < 0) continue;
        const fe_node *n = &m->nodes[p];
        st->recomputed = n->recompute != NULL;
        st->reloaded = graph_is_roamc_op(n, "Reload");
        if (graph_is_roamc_op(n, "Offload"))
            st->host = true, st->host_size = st->size, st->size = 0;
    }
}

/* roamc.loss and roamc.optimizer (graph.h: loss_value, optimizer_moments).
 * Example: "sgd" or "SGD, momentum 0.9" -> 0 moments; "adamw" -> 2. */
static void graph_resolve_training(graph *g, const fe_model *m) {
    const char *loss = fe_meta(m, "roamc.loss");
    int v = loss ? fe_find_value(m, loss) : -1;
    g->loss_value = v >= 0 && m->values[v].producer >= 0 ? v : -1;
    const char *o = fe_meta(m, "roamc.optimizer");
    g->optimizer_moments = !o ? -1 : strncmp(o, "sgd", 3) == 0 || strncmp(o, "SGD", 3) == 0 ? 0 : 2;
}

static int graph_fail(const graph *g, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int graph_fail(const graph *g, char *err, size_t errlen, const char *fmt, ...) {
    const char *path = g->model && g->model->path ? g->model->path : "?";
    va_list ap;
    va_start(ap, fmt);
    fe_verrorf(err, errlen, path, NULL, fmt, ap);
    va_end(ap);
    return -1;
}

const char *graph_op_label(const graph *g, int op, char *buf, size_t len) {
    const fe_node *n = &g->model->nodes[op];
    if (n->name[0])
        snprintf(buf, len, "%s", n->name);
    else
        snprintf(buf, len, "%s#%d", n->op_type, op);
    return buf;
}

/* x rounded up to a multiple of align; UINT64_MAX when that overflows (then
 * graph_check_sizes refuses the model). */
static uint64_t graph_round_up(uint64_t x, uint64_t align) {
    uint64_t r = x % align;
    if (r && x > UINT64_MAX - (align - r)) return UINT64_MAX;
    return r ? x + (align - r) : x;
}

/* Sizes, their sums and their differences are 64-bit integers all through
 * the planner (signed where they are live-byte deltas, as in graph_peak), so
 * the storages of one model may add up to at most 2^62 bytes: every such sum
 * then fits, with room for the allocator's rounding.  (4 EiB: no step of a
 * real model comes near; a model that claims more is refused, not planned
 * with wrapped numbers.) */
#define GRAPH_MAX_TOTAL_BYTES ((uint64_t)1 << 62)

static int graph_check_sizes(const graph *g, char *err, size_t errlen) {
    uint64_t total = 0;
    for (size_t s = 0; s < g->n_storages; s++) {
        const graph_storage *st = &g->storages[s];
        if (st->size <= GRAPH_MAX_TOTAL_BYTES - total) {
            total += st->size;
            continue;
        }
        /* name the largest tensor of the storage that crosses the limit */
        int big = st->root;
        for (size_t k = 0; k < st->n_tensors; k++)
            if (g->model->values[st->tensors[k]].bytes > g->model->values[big].bytes)
                big = st->tensors[k];
        return graph_fail(g, err, errlen,
                          "value '%s' (%llu bytes): the storages add up to more than 2^62 bytes, "
                          "too large to plan",
                          g->model->values[big].name,
                          (unsigned long long)g->model->values[big].bytes);
    }
    return 0;
}

/* ------------------------------------------------------------- storages */

static int graph_uf_find(int *parent, int x) {
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

/* Sets mark[v] for every value v named in the comma-separated list (names
 * not in the model are ignored: metadata is advice); fe_find_value looks
 * each up through the loader's name hash. */
static void graph_mark_listed(const fe_model *m, const char *list, bool *mark) {
    char name[1024];
    for (const char *p = list; p && *p;) {
        const char *q = strchr(p, ',');
        size_t len = q ? (size_t)(q - p) : strlen(p);
        while (len && *p == ' ') p++, len--;
        while (len && p[len - 1] == ' ') len--;
        if (len && len < sizeof name) {
            memcpy(name, p, len);
            name[len] = 0;
            int v = fe_find_value(m, name);
            if (v >= 0) mark[v] = true;
        }
        if (!q) break;
        p = q + 1;
    }
}

static void graph_build_storages(graph *g) {
    const fe_model *m = g->model;
    size_t nt = m->n_values;
    int *parent = xmallocarray(nt, sizeof *parent);
    int *sid = xmallocarray(nt, sizeof *sid);
    for (size_t t = 0; t < nt; t++) parent[t] = (int)t;
    /* Each value is produced once, so it has at most one alias parent: the
     * alias relation is a forest whose roots are the storage owners. */
    for (size_t i = 0; i < m->n_nodes; i++) {
        const fe_node *n = &m->nodes[i];
        for (size_t k = 0; k < n->n_outputs; k++) {
            if (n->alias[k] < 0 || n->outputs[k] < 0) continue;
            int in = n->inputs[n->alias[k]];
            parent[graph_uf_find(parent, n->outputs[k])] = graph_uf_find(parent, in);
        }
    }
    size_t ns = 0;
    for (size_t t = 0; t < nt; t++) sid[t] = -1;
    for (size_t t = 0; t < nt; t++) {
        int r = graph_uf_find(parent, (int)t);
        if (sid[r] < 0) sid[r] = (int)ns++;
        g->storage_of[t] = sid[r];
    }
    g->n_storages = ns;
    g->storages = xcalloc(ns, sizeof *g->storages);
    size_t *fill = xcalloc(ns, sizeof *fill);
    for (size_t t = 0; t < nt; t++) g->storages[g->storage_of[t]].n_tensors++;
    for (size_t s = 0; s < ns; s++)
        g->storages[s].tensors = xmallocarray(g->storages[s].n_tensors, sizeof(int));
    /* metadata: parameters and optimizer state persist; gradients are marked */
    bool *state = xcalloc(nt, sizeof *state), *grad = xcalloc(nt, sizeof *grad);
    graph_mark_listed(m, fe_meta(m, "roamc.parameters"), state);
    graph_mark_listed(m, fe_meta(m, "roamc.optimizer_state"), state);
    graph_mark_listed(m, fe_meta(m, "roamc.gradients"), grad);
    graph_resolve_training(g, m);
    for (size_t t = 0; t < nt; t++) {
        graph_storage *st = &g->storages[g->storage_of[t]];
        const fe_value *v = &m->values[t];
        st->tensors[fill[g->storage_of[t]]++] = (int)t;
        if (graph_uf_find(parent, (int)t) == (int)t) st->root = (int)t;
        uint64_t sz = graph_round_up(v->bytes, g->align);
        if (sz > st->size) st->size = sz;
        if (v->kind & (FE_GRAPH_INPUT | FE_INITIALIZER)) st->has_input = true;
        if (v->kind & FE_GRAPH_OUTPUT) st->has_output = true;
        if (grad[t]) st->gradient = true;
        if ((v->kind & FE_INITIALIZER) || (v->kind & FE_GRAPH_OUTPUT) || state[t])
            st->persistent = true;
    }
    free(state);
    free(grad);
    /* An input written in place is state the step updates: it persists. */
    for (size_t i = 0; i < m->n_nodes; i++) {
        const fe_node *n = &m->nodes[i];
        if (!n->inplace) continue;
        for (size_t k = 0; k < n->n_outputs; k++) {
            if (n->alias[k] < 0) continue;
            graph_storage *st = &g->storages[g->storage_of[n->inputs[n->alias[k]]]];
            if (st->has_input) st->persistent = true;
        }
    }
    graph_mark_changed(g, m);
    free(parent);
    free(sid);
    free(fill);
}

/* ---------------------------------------------------------------- edges */

typedef struct graph_edge {
    int from, to;
} graph_edge;

static int graph_edge_cmp(const void *a, const void *b) {
    const graph_edge *x = a, *y = b;
    if (x->from != y->from) return x->from < y->from ? -1 : 1;
    return (x->to > y->to) - (x->to < y->to);
}

/* Fills a CSR (start has n+1 entries) from (key, val) pairs sorted by key. */
static void graph_csr(size_t n, const graph_edge *e, size_t ne, bool by_from, size_t **start,
                      int **vals) {
    *start = xcalloc(n + 1, sizeof **start);
    *vals = xmallocarray(ne, sizeof **vals);
    for (size_t i = 0; i < ne; i++) (*start)[(by_from ? e[i].from : e[i].to) + 1]++;
    for (size_t i = 0; i < n; i++) (*start)[i + 1] += (*start)[i];
    size_t *pos = xmallocarray(n, sizeof *pos);
    memcpy(pos, *start, n * sizeof *pos);
    for (size_t i = 0; i < ne; i++) {
        int k = by_from ? e[i].from : e[i].to;
        (*vals)[pos[k]++] = by_from ? e[i].to : e[i].from;
    }
    free(pos);
}

/* Names ops on one cycle: walks predecessors among the ops Kahn's algorithm
 * could not order until one repeats. */
static void graph_describe_cycle(const graph *g, const int *indeg, char *msg, size_t len) {
    int start = -1;
    for (size_t i = 0; i < g->n_ops && start < 0; i++)
        if (indeg[i] > 0) start = (int)i;
    if (start < 0) {
        snprintf(msg, len, "?");
        return;
    }
    int *seen = xcalloc(g->n_ops, sizeof *seen);
    int v = start, step = 1;
    while (!seen[v]) {
        seen[v] = step++;
        int next = -1;
        for (size_t k = g->pred_start[v]; k < g->pred_start[v + 1]; k++)
            if (indeg[g->pred[k]] > 0) {
                next = g->pred[k];
                break;
            }
        ROAMC_ASSERT(next >= 0); /* an unordered op always has an unordered predecessor */
        v = next;
    }
    /* v is on the cycle: list it and its cycle predecessors (at most 6). */
    size_t off = 0;
    int u = v;
    char lab[128];
    for (int count = 0; count < 6; count++) {
        int w = snprintf(msg + off, len - off, "%s'%s'", count ? " <- " : "",
                         graph_op_label(g, u, lab, sizeof lab));
        if (w < 0 || (size_t)w >= len - off) break;
        off += (size_t)w;
        int next = -1;
        for (size_t k = g->pred_start[u]; k < g->pred_start[u + 1]; k++)
            if (indeg[g->pred[k]] > 0 && seen[g->pred[k]]) {
                next = g->pred[k];
                break;
            }
        if (next < 0 || next == v) break;
        u = next;
    }
    free(seen);
}

/* Debian's igraph 0.10 is built without IGRAPH_THREAD_SAFE: its error
 * handler and its FINALLY stack (which every igraph function pushes onto)
 * are process-wide.  So the handler, whose default aborts the process, is
 * set once to return error codes instead (pthread_once: whichever thread
 * comes first), and igraph is entered by one thread at a time: without the
 * lock, libroamc's callers planning on several threads at once corrupted
 * the stack ("Corrupt finally stack", ctest test_api_threads, 1 run in 6). */
static pthread_once_t graph_igraph_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t graph_igraph_mutex = PTHREAD_MUTEX_INITIALIZER;

static void graph_igraph_install(void) {
    igraph_set_error_handler(igraph_error_handler_ignore);
}

void graph_igraph_lock(void) {
    pthread_once(&graph_igraph_once, graph_igraph_install);
    pthread_mutex_lock(&graph_igraph_mutex);
}

void graph_igraph_unlock(void) {
    pthread_mutex_unlock(&graph_igraph_mutex);
}

/* igraph decides acyclicity; a cycle is then named by a Kahn pass. */
static int graph_check_acyclic(const graph *g, char *err, size_t errlen) {
    igraph_vector_int_t ev;
    igraph_t ig;
    igraph_bool_t dag = 0;
    graph_igraph_lock();
    int rc = igraph_vector_int_init(&ev, (igraph_integer_t)(2 * g->n_edges));
    if (rc) {
        graph_igraph_unlock();
        return graph_fail(g, err, errlen, "igraph could not hold the edges (error %d)", rc);
    }
    for (size_t i = 0, e = 0; i < g->n_ops; i++)
        for (size_t k = g->succ_start[i]; k < g->succ_start[i + 1]; k++, e++) {
            VECTOR(ev)[2 * e] = (igraph_integer_t)i;
            VECTOR(ev)[2 * e + 1] = g->succ[k];
        }
    rc = igraph_create(&ig, &ev, (igraph_integer_t)g->n_ops, IGRAPH_DIRECTED);
    igraph_vector_int_destroy(&ev);
    if (rc == 0) {
        rc = igraph_is_dag(&ig, &dag);
        igraph_destroy(&ig);
        graph_igraph_unlock();
        if (rc)
            return graph_fail(g, err, errlen, "igraph could not check acyclicity (error %d)", rc);
    } else {
        graph_igraph_unlock();
        return graph_fail(g, err, errlen, "igraph could not build the graph (error %d)", rc);
    }
    if (dag) return 0;

    int *indeg = xmallocarray(g->n_ops, sizeof *indeg);
    int *queue = xmallocarray(g->n_ops, sizeof *queue);
    size_t head = 0, tail = 0;
    for (size_t i = 0; i < g->n_ops; i++) {
        indeg[i] = (int)(g->pred_start[i + 1] - g->pred_start[i]);
        if (!indeg[i]) queue[tail++] = (int)i;
    }
    while (head < tail) {
        int v = queue[head++];
        for (size_t k = g->succ_start[v]; k < g->succ_start[v + 1]; k++)
            if (--indeg[g->succ[k]] == 0) queue[tail++] = g->succ[k];
    }
    char cyc[768];
    graph_describe_cycle(g, indeg, cyc, sizeof cyc);
    free(indeg);
    free(queue);
    return graph_fail(g, err, errlen,
                      "the graph has a cycle (data edges plus in-place ordering edges): %s "
                      "(each op must run after the one to its right)",
                      cyc);
}

/* Mutation order within a storage.  The value-level edges only order the
 * readers of the very tensor an in-place op overwrites; but a view of that
 * storage (say t(w), read by a backward matmul) sees the write too.  So for
 * each storage that is written in place, every access keeps its place
 * relative to the writes in file order: a reader between two writes runs
 * after the first and before the second.  Linear in the accesses: each
 * write is tied to the reads since the previous write, each read to the
 * previous write.  graph_build adds these pairs as edges; `roamc check`
 * walks the same pairs to name the write, the reader and the view a
 * schedule breaks (one definition of the rule for both). */
int graph_mutation_order(const graph *g, graph_mutation_fn fn, void *ctx) {
    const fe_model *m = g->model;
    size_t ns = g->n_storages;
    int *last_writer = xmallocarray(ns, sizeof *last_writer);
    int *last_written = xmallocarray(ns, sizeof *last_written); /* the value it overwrote */
    bool *written = xcalloc(ns, sizeof *written);
    /* readers since the last write, per storage: a linked list through
     * links, and its head */
    int *head = xmallocarray(ns, sizeof *head);
    /* writer[s] == i: op i writes s in place (set per op, so that an op with
     * many inputs and outputs costs inputs + outputs, not their product);
     * writer_value[s]: the value of s it overwrites */
    int *writer = xmallocarray(ns, sizeof *writer);
    int *writer_value = xmallocarray(ns, sizeof *writer_value);
    size_t cap_links = 16, n_links = 0;
    int(*links)[3] = xmallocarray(cap_links, sizeof *links); /* {op, value read, next} */
    int rc = 0;
    for (size_t s = 0; s < ns; s++)
        last_writer[s] = -1, last_written[s] = -1, head[s] = -1, writer[s] = -1;
    for (size_t i = 0; i < m->n_nodes; i++) {
        const fe_node *n = &m->nodes[i];
        if (!n->inplace) continue;
        for (size_t k = 0; k < n->n_outputs; k++)
            if (n->alias[k] >= 0 && n->inputs[n->alias[k]] >= 0)
                written[g->storage_of[n->inputs[n->alias[k]]]] = true;
    }
    for (size_t i = 0; i < m->n_nodes && rc == 0; i++) {
        const fe_node *n = &m->nodes[i];
        for (size_t o = 0; n->inplace && o < n->n_outputs; o++)
            if (n->alias[o] >= 0 && n->inputs[n->alias[o]] >= 0) {
                int s = g->storage_of[n->inputs[n->alias[o]]];
                writer[s] = (int)i;
                writer_value[s] = n->inputs[n->alias[o]];
            }
        for (size_t k = 0; k < n->n_inputs && rc == 0; k++) {
            int v = n->inputs[k];
            if (v < 0) continue;
            int s = g->storage_of[v];
            if (!written[s]) continue;
            bool writes = writer[s] == (int)i;
            if (last_writer[s] == (int)i) continue; /* this op already handled s */
            if (!writes && head[s] >= 0 && links[head[s]][0] == (int)i)
                continue; /* already read s */
            if (last_writer[s] >= 0) {
                graph_mutation e = {last_writer[s], (int)i, s, last_writer[s], last_written[s], v};
                if ((rc = fn(ctx, &e))) break;
            }
            if (writes) {
                for (int r = head[s]; r >= 0 && rc == 0; r = links[r][2])
                    if (links[r][0] != (int)i) {
                        graph_mutation e = {links[r][0], (int)i,          s,
                                            (int)i,      writer_value[s], links[r][1]};
                        rc = fn(ctx, &e);
                    }
                head[s] = -1;
                last_writer[s] = (int)i;
                last_written[s] = writer_value[s];
            } else {
                if (n_links == cap_links) {
                    cap_links *= 2;
                    links = xreallocarray(links, cap_links, sizeof *links);
                }
                links[n_links][0] = (int)i;
                links[n_links][1] = v;
                links[n_links][2] = head[s];
                head[s] = (int)n_links++;
            }
        }
    }
    free(last_writer), free(last_written), free(written), free(head), free(writer),
        free(writer_value), free(links);
    return rc;
}

/* graph_mutation_order's pairs as ordering edges, appended to a growing
 * array. */
typedef struct graph_edge_sink {
    graph_edge *e;
    size_t n, cap;
} graph_edge_sink;

static int graph_sink_edge(void *ctx, const graph_mutation *mu) {
    graph_edge_sink *k = ctx;
    if (k->n == k->cap) {
        k->cap = k->cap ? 2 * k->cap : 16;
        k->e = xreallocarray(k->e, k->cap, sizeof *k->e);
    }
    k->e[k->n++] = (graph_edge){mu->before, mu->after};
    return 0;
}

static void graph_add_storage_order(graph *g, graph_edge **edges, size_t *n_edges) {
    graph_edge_sink k = {*edges, *n_edges, *n_edges};
    (void)graph_mutation_order(g, graph_sink_edge, &k); /* graph_sink_edge never stops it */
    *edges = k.e;
    *n_edges = k.n;
}

/* Communication order (shared/DESIGN.md "Several devices"): the ranks of a
 * job issue their collectives (ai.roamc AllReduce, ReduceScatter,
 * AllGather, Broadcast) on one communicator, so every rank must issue them
 * in the same order, the file's; Sends and Recvs are matched in the order
 * both peers issue them, so a rank keeps its Sends and Recvs in the file's
 * order too.  Each such node is ordered after the previous one of its kind
 * (collective; point-to-point): without these edges each rank's schedule
 * could put them in a different order and the job would hang or mix buffers
 * (models/run_ranks.py runs the ranks together and stops on it). */
static bool graph_is_collective(const fe_node *n) {
    return graph_is_roamc_op(n, "AllReduce") || graph_is_roamc_op(n, "ReduceScatter") ||
           graph_is_roamc_op(n, "AllGather") || graph_is_roamc_op(n, "Broadcast");
}

static void graph_add_comm_order(const graph *g, graph_edge **edges, size_t *n_edges) {
    const fe_model *m = g->model;
    graph_edge_sink k = {*edges, *n_edges, *n_edges};
    int last_collective = -1, last_p2p = -1;
    for (size_t i = 0; i < m->n_nodes; i++) {
        const fe_node *n = &m->nodes[i];
        int *last = NULL;
        if (graph_is_collective(n))
            last = &last_collective;
        else if (graph_is_roamc_op(n, "Send") || graph_is_roamc_op(n, "Recv"))
            last = &last_p2p;
        if (!last) continue;
        if (*last >= 0) graph_sink_edge(&k, &(graph_mutation){.before = *last, .after = (int)i});
        *last = (int)i;
    }
    *edges = k.e;
    *n_edges = k.n;
}

static int graph_build_edges(graph *g, char *err, size_t errlen) {
    const fe_model *m = g->model;
    size_t nv = m->n_values, no = m->n_nodes;
    /* readers of each value, CSR */
    size_t *rstart = xcalloc(nv + 1, sizeof *rstart);
    size_t ne_cap = 0;
    for (size_t i = 0; i < no; i++)
        for (size_t k = 0; k < m->nodes[i].n_inputs; k++)
            if (m->nodes[i].inputs[k] >= 0) rstart[m->nodes[i].inputs[k] + 1]++, ne_cap++;
    for (size_t v = 0; v < nv; v++) rstart[v + 1] += rstart[v];
    int *readers = xmallocarray(ne_cap, sizeof *readers);
    size_t *pos = xmallocarray(nv, sizeof *pos);
    memcpy(pos, rstart, nv * sizeof *pos);
    for (size_t i = 0; i < no; i++)
        for (size_t k = 0; k < m->nodes[i].n_inputs; k++)
            if (m->nodes[i].inputs[k] >= 0) readers[pos[m->nodes[i].inputs[k]]++] = (int)i;
    free(pos);

    /* data edges, then ordering edges for in-place writes */
    size_t extra = 0;
    for (size_t i = 0; i < no; i++) {
        const fe_node *n = &m->nodes[i];
        if (!n->inplace) continue;
        for (size_t k = 0; k < n->n_outputs; k++)
            if (n->alias[k] >= 0) {
                int x = n->inputs[n->alias[k]];
                extra += rstart[x + 1] - rstart[x];
            }
    }
    graph_edge *e = xmallocarray(ne_cap + extra, sizeof *e);
    size_t ne = 0;
    for (size_t i = 0; i < no; i++) {
        const fe_node *n = &m->nodes[i];
        for (size_t k = 0; k < n->n_inputs; k++) {
            int v = n->inputs[k];
            if (v >= 0 && m->values[v].producer >= 0)
                e[ne++] = (graph_edge){m->values[v].producer, (int)i};
        }
        if (!n->inplace) continue;
        for (size_t k = 0; k < n->n_outputs; k++) {
            if (n->alias[k] < 0) continue;
            int x = n->inputs[n->alias[k]];
            for (size_t r = rstart[x]; r < rstart[x + 1]; r++)
                if (readers[r] != (int)i) e[ne++] = (graph_edge){readers[r], (int)i};
        }
    }
    free(rstart);
    free(readers);
    graph_add_storage_order(g, &e, &ne);
    graph_add_comm_order(g, &e, &ne);
    qsort(e, ne, sizeof *e, graph_edge_cmp);
    size_t u = 0;
    for (size_t i = 0; i < ne; i++)
        if (u == 0 || e[i].from != e[u - 1].from || e[i].to != e[u - 1].to) e[u++] = e[i];
    ne = u;
    g->n_edges = ne;
    graph_csr(no, e, ne, true, &g->succ_start, &g->succ);
    /* predecessors: the same pairs sorted by target keep sources ascending */
    for (size_t i = 0; i < ne; i++) {
        int t = e[i].from;
        e[i].from = e[i].to;
        e[i].to = t;
    }
    qsort(e, ne, sizeof *e, graph_edge_cmp);
    graph_csr(no, e, ne, true, &g->pred_start, &g->pred);
    free(e);
    for (size_t i = 0; i < no; i++)
        for (size_t k = g->succ_start[i]; k < g->succ_start[i + 1]; k++)
            if (g->succ[k] == (int)i) {
                char lab[128];
                return graph_fail(g, err, errlen, "node '%s' (#%zu) reads its own output: a cycle",
                                  graph_op_label(g, (int)i, lab, sizeof lab), i);
            }
    return graph_check_acyclic(g, err, errlen);
}

/* Storages each op touches (deduplicated) and those it creates. */
static void graph_build_touches(graph *g) {
    const fe_model *m = g->model;
    size_t no = m->n_nodes, total = 0;
    for (size_t i = 0; i < no; i++) total += m->nodes[i].n_inputs + m->nodes[i].n_outputs;
    g->touch_start = xcalloc(no + 1, sizeof *g->touch_start);
    g->touch = xmallocarray(total, sizeof *g->touch);
    g->make_start = xcalloc(no + 1, sizeof *g->make_start);
    g->make = xmallocarray(g->n_storages, sizeof *g->make);
    /* seen[s] == i: op i already touches s (linear in the touches even for an
     * op with thousands of inputs) */
    int *seen = xmallocarray(g->n_storages, sizeof *seen);
    for (size_t s = 0; s < g->n_storages; s++) seen[s] = -1;
    size_t n = 0;
    for (size_t i = 0; i < no; i++) {
        const fe_node *nd = &m->nodes[i];
        for (size_t k = 0; k < nd->n_inputs + nd->n_outputs; k++) {
            int v = k < nd->n_inputs ? nd->inputs[k] : nd->outputs[k - nd->n_inputs];
            if (v < 0) continue;
            int s = g->storage_of[v];
            if (seen[s] != (int)i) g->touch[n++] = s;
            seen[s] = (int)i;
        }
        g->touch_start[i + 1] = n;
    }
    free(seen);
    /* make: storages without an input, created by the producer of the root */
    for (size_t s = 0; s < g->n_storages; s++) {
        const graph_storage *st = &g->storages[s];
        if (!st->has_input) g->make_start[m->values[st->root].producer + 1]++;
    }
    for (size_t i = 0; i < no; i++) g->make_start[i + 1] += g->make_start[i];
    size_t *pos = xmallocarray(no, sizeof *pos);
    memcpy(pos, g->make_start, no * sizeof *pos);
    for (size_t s = 0; s < g->n_storages; s++) {
        const graph_storage *st = &g->storages[s];
        if (!st->has_input) g->make[pos[m->values[st->root].producer]++] = (int)s;
    }
    free(pos);
}

int graph_build(const fe_model *m, uint64_t align, graph *g, char *err, size_t errlen) {
    memset(g, 0, sizeof *g);
    g->model = m;
    g->align = align ? align : 1;
    g->n_ops = m->n_nodes;
    g->n_tensors = m->n_values;
    g->storage_of = xmallocarray(m->n_values, sizeof *g->storage_of);
    graph_build_storages(g);
    if (graph_check_sizes(g, err, errlen) || graph_build_edges(g, err, errlen)) {
        graph_free(g);
        return -1;
    }
    graph_build_touches(g);
    return 0;
}

void graph_free(graph *g) {
    if (!g) return;
    for (size_t s = 0; g->storages && s < g->n_storages; s++) free(g->storages[s].tensors);
    free(g->storages);
    free(g->storage_of);
    free(g->succ_start);
    free(g->succ);
    free(g->pred_start);
    free(g->pred);
    free(g->touch_start);
    free(g->touch);
    free(g->make_start);
    free(g->make);
    memset(g, 0, sizeof *g);
}

/* ---------------------------------------------------------- schedules */

/* Min-heap of op indices: Kahn's algorithm that always takes the smallest
 * ready index keeps file order wherever the edges allow. */
typedef struct graph_heap {
    int *a;
    size_t n;
} graph_heap;

static void graph_heap_push(graph_heap *h, int v) {
    size_t i = h->n++;
    while (i && h->a[(i - 1) / 2] > v) {
        h->a[i] = h->a[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->a[i] = v;
}

static int graph_heap_pop(graph_heap *h) {
    int top = h->a[0], last = h->a[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && h->a[c + 1] < h->a[c]) c++;
        if (h->a[c] >= last) break;
        h->a[i] = h->a[c];
        i = c;
    }
    if (h->n) h->a[i] = last;
    return top;
}

void graph_program_order(const graph *g, int *order) {
    size_t n = g->n_ops;
    int *indeg = xmallocarray(n, sizeof *indeg);
    graph_heap h = {xmallocarray(n, sizeof(int)), 0};
    for (size_t i = 0; i < n; i++) {
        indeg[i] = (int)(g->pred_start[i + 1] - g->pred_start[i]);
        if (!indeg[i]) graph_heap_push(&h, (int)i);
    }
    size_t k = 0;
    while (h.n) {
        int v = graph_heap_pop(&h);
        order[k++] = v;
        for (size_t e = g->succ_start[v]; e < g->succ_start[v + 1]; e++)
            if (--indeg[g->succ[e]] == 0) graph_heap_push(&h, g->succ[e]);
    }
    ROAMC_ASSERT(k == n); /* graph_build rejected cycles */
    free(indeg);
    free(h.a);
}

int graph_check_schedule(const graph *g, const int *order, char *err, size_t errlen) {
    size_t n = g->n_ops;
    int *step = xmallocarray(n, sizeof *step);
    for (size_t i = 0; i < n; i++) step[i] = -1;
    int rc = 0;
    for (size_t s = 0; s < n && rc == 0; s++) {
        int op = order[s];
        if (op < 0 || (size_t)op >= n)
            rc = graph_fail(g, err, errlen, "schedule step %zu names op %d, not in 0..%zu", s, op,
                            n - 1);
        else if (step[op] >= 0)
            rc = graph_fail(g, err, errlen, "schedule runs op %d twice (steps %d and %zu)", op,
                            step[op], s);
        else
            step[op] = (int)s;
    }
    for (size_t i = 0; i < n && rc == 0; i++)
        for (size_t k = g->succ_start[i]; k < g->succ_start[i + 1] && rc == 0; k++)
            if (step[i] >= step[g->succ[k]]) {
                char a[128], b[128];
                rc = graph_fail(
                    g, err, errlen,
                    "schedule runs '%s' (step %d) before '%s' (step %d), which must precede it",
                    graph_op_label(g, g->succ[k], a, sizeof a), step[g->succ[k]],
                    graph_op_label(g, (int)i, b, sizeof b), step[i]);
            }
    free(step);
    return rc;
}

void graph_lifetimes(const graph *g, const int *order, int32_t *start, int32_t *end) {
    int32_t last = (int32_t)g->n_ops - 1;
    for (size_t s = 0; s < g->n_storages; s++) {
        start[s] = g->storages[s].has_input ? 0 : INT32_MAX;
        end[s] = -1;
    }
    for (size_t step = 0; step < g->n_ops; step++) {
        int op = order[step];
        for (size_t k = g->make_start[op]; k < g->make_start[op + 1]; k++)
            start[g->make[k]] = (int32_t)step;
        for (size_t k = g->touch_start[op]; k < g->touch_start[op + 1]; k++)
            end[g->touch[k]] = (int32_t)step;
    }
    for (size_t s = 0; s < g->n_storages; s++) {
        const graph_storage *st = &g->storages[s];
        if (graph_storage_outlives(g, st)) end[s] = last;
        if (end[s] < start[s]) end[s] = start[s]; /* an input nothing reads: live at step 0 only */
        ROAMC_ASSERT(start[s] != INT32_MAX);
    }
}

/* Adds each storage's size to delta[start] and takes it off at delta[end+1]
 * (persistent ones too unless skip_persistent): the running sum of delta is
 * the live bytes per step. */
static void graph_live_deltas(const graph *g, const int32_t *start, const int32_t *end,
                              bool skip_persistent, int64_t *delta) {
    for (size_t s = 0; s < g->n_storages; s++) {
        if (skip_persistent && g->storages[s].persistent) continue;
        delta[start[s]] += (int64_t)g->storages[s].size;
        delta[end[s] + 1] -= (int64_t)g->storages[s].size;
    }
}

uint64_t graph_peak(const graph *g, const int *order, uint64_t *without_persistent,
                    int *peak_step) {
    size_t ns = g->n_storages, n = g->n_ops;
    int32_t *start = xmallocarray(ns, sizeof *start);
    int32_t *end = xmallocarray(ns, sizeof *end);
    int64_t *delta = xcalloc(n + 1, sizeof *delta);
    int64_t *delta_np = xcalloc(n + 1, sizeof *delta_np);
    graph_lifetimes(g, order, start, end);
    graph_live_deltas(g, start, end, false, delta);
    graph_live_deltas(g, start, end, true, delta_np);
    int64_t live = 0, live_np = 0;
    uint64_t peak = 0, best_np = 0;
    int best_step = 0;
    for (size_t s = 0; s < n; s++) {
        live += delta[s];
        live_np += delta_np[s];
        if ((uint64_t)live > peak) peak = (uint64_t)live, best_step = (int)s;
        if ((uint64_t)live_np > best_np) best_np = (uint64_t)live_np;
    }
    if (without_persistent) *without_persistent = best_np;
    if (peak_step) *peak_step = best_step;
    free(start);
    free(end);
    free(delta);
    free(delta_np);
    return peak;
}

void graph_live_bytes(const graph *g, const int *order, uint64_t *live) {
    size_t ns = g->n_storages, n = g->n_ops;
    int32_t *start = xmallocarray(ns, sizeof *start);
    int32_t *end = xmallocarray(ns, sizeof *end);
    int64_t *delta = xcalloc(n + 1, sizeof *delta);
    graph_lifetimes(g, order, start, end);
    graph_live_deltas(g, start, end, false, delta);
    int64_t sum = 0;
    for (size_t t = 0; t < n; t++) live[t] = (uint64_t)(sum += delta[t]);
    free(start);
    free(end);
    free(delta);
}

uint64_t graph_persistent_bytes(const graph *g) {
    uint64_t total = 0;
    for (size_t s = 0; s < g->n_storages; s++)
        if (g->storages[s].persistent) total += g->storages[s].size;
    return total;
}

uint64_t graph_lower_bound(const graph *g) {
    /* Storages live at every step: persistent ones that hold an input. */
    uint64_t always = 0, outputs = 0;
    for (size_t s = 0; s < g->n_storages; s++) {
        const graph_storage *st = &g->storages[s];
        if (st->persistent && st->has_input)
            always += st->size;
        else if (st->has_output)
            outputs += st->size;
    }
    /* At the last step every output storage is live. */
    uint64_t best = always + outputs;
    for (size_t i = 0; i < g->n_ops; i++) {
        uint64_t work = always;
        for (size_t k = g->touch_start[i]; k < g->touch_start[i + 1]; k++) {
            const graph_storage *st = &g->storages[g->touch[k]];
            if (!(st->persistent && st->has_input)) work += st->size;
        }
        if (work > best) best = work;
    }
    return best;
}
