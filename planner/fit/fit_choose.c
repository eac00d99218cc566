/* Which values to recompute or offload (issue 27): the choice, made on the
 * plan of the unchanged step.
 *
 * A candidate is a storage the backward pass reads that the forward pass
 * made: not persistent, not a gradient, every tensor of it written by
 * forward ops only, read by some backward op, and idle in between (its
 * last forward touch comes before its first backward touch, with steps
 * between them).  Dropping it frees its bytes over that gap, at a cost:
 *
 *   recompute  clone the forward ops that wrote it, just before its first
 *              backward reader, from values still live there (persistent
 *              ones, or ones whose lifetime covers that step); an input
 *              that is gone by then is recomputed too, transitively (the
 *              clones' other outputs are short-lived temporaries there);
 *   offload    copy it to host memory after its last forward touch and
 *              back before its first backward one (one tensor of it must
 *              hold all that the backward reads).
 *
 * The choice is greedy on the live-bytes curve of the schedule: while the
 * peak step has a candidate, drop the candidate whose gap covers the peak
 * step with the most bytes freed per second added.  The sequence does not
 * depend on the budget, only where a caller cuts it, so a lower budget
 * never takes less added time than a higher one (monotone).
 */
#include "fit.h"
#include "base.h"

#include <stdlib.h>
#include <string.h>

/* Per storage: its touches under the schedule, split by pass. */
typedef struct fit_span {
    int last_forward;   /* step of the last forward op touching it, -1 */
    int first_backward; /* step of the first backward op touching it, INT32_MAX: none */
    bool written_in_backward;
    int backward_read; /* the one tensor backward ops read, -1 none, -2 several */
} fit_span;

typedef struct fit_work {
    const graph *g;
    const fit_problem *P;
    int *pos;        /* per op: its step */
    bool *forward;   /* per op */
    fit_span *span;  /* per storage */
    uint64_t *live;  /* per step: live bytes under the actions so far */
    bool *dropped;   /* per storage */
    unsigned *stamp; /* per storage: fit_closure's visit mark */
    unsigned cur_stamp;
    int *stack;  /* storages */
    int *ops;    /* fit_closure's ops */
    bool *op_in; /* per op: in the closure being built */
    int *reads;  /* fit_closure: tensors of available storages the clones read */
    size_t n_reads;
} fit_work;

/* The forward pass: the loss op and its ancestors.  Returns the loss op,
 * or -1 when the graph names none and has no scalar output to take. */
static int fit_mark_forward(const graph *g, bool *forward) {
    int loss_op = g->loss_value >= 0 ? g->model->values[g->loss_value].producer : -1;
    uint64_t best = UINT64_MAX;
    for (size_t i = 0; loss_op < 0 && i < g->model->n_outputs; i++) {
        int v = g->model->outputs[i];
        if (v < 0 || g->model->values[v].producer < 0) continue;
        if (g->storages[g->storage_of[v]].has_input) continue;
        if (g->model->values[v].bytes < best)
            best = g->model->values[v].bytes, loss_op = g->model->values[v].producer;
    }
    if (loss_op < 0) return -1;
    int *stack = xmallocarray(g->n_ops, sizeof *stack);
    size_t top = 0;
    forward[loss_op] = true;
    stack[top++] = loss_op;
    while (top) {
        int v = stack[--top];
        for (size_t k = g->pred_start[v]; k < g->pred_start[v + 1]; k++)
            if (!forward[g->pred[k]]) forward[g->pred[k]] = true, stack[top++] = g->pred[k];
    }
    free(stack);
    return loss_op;
}

static void fit_spans(fit_work *w) {
    const graph *g = w->g;
    for (size_t s = 0; s < g->n_storages; s++)
        w->span[s] =
            (fit_span){.last_forward = -1, .first_backward = INT32_MAX, .backward_read = -1};
    for (size_t op = 0; op < g->n_ops; op++) {
        int step = w->pos[op];
        for (size_t k = g->touch_start[op]; k < g->touch_start[op + 1]; k++) {
            fit_span *sp = &w->span[g->touch[k]];
            if (w->forward[op]) {
                if (step > sp->last_forward) sp->last_forward = step;
            } else if (step < sp->first_backward)
                sp->first_backward = step;
        }
        if (w->forward[op]) continue;
        const fe_node *n = &g->model->nodes[op];
        for (size_t k = 0; k < n->n_outputs; k++)
            if (n->outputs[k] >= 0) w->span[g->storage_of[n->outputs[k]]].written_in_backward = 1;
        for (size_t k = 0; k < n->n_inputs; k++) {
            int t = n->inputs[k];
            if (t < 0) continue;
            fit_span *sp = &w->span[g->storage_of[t]];
            sp->backward_read = sp->backward_read == -1 || sp->backward_read == t ? t : -2;
        }
    }
}

/* The storage is a candidate: made in forward, idle, then read in backward. */
static bool fit_is_candidate(const fit_work *w, int s) {
    const graph *g = w->g;
    const graph_storage *st = &g->storages[s];
    const fit_span *sp = &w->span[s];
    if (st->persistent || st->gradient || st->has_input || st->has_output) return false;
    if (st->size == 0 || sp->written_in_backward || sp->last_forward < 0) return false;
    if (sp->first_backward == INT32_MAX || sp->first_backward <= sp->last_forward + 1) return false;
    int maker = g->model->values[st->root].producer;
    return maker >= 0 && w->forward[maker];
}

/* Whether storage u holds its value at step `at` with the actions so far:
 * persistent, or live across it and not dropped. */
static bool fit_available(const fit_work *w, int u, int at) {
    const graph_storage *st = &w->g->storages[u];
    if (st->persistent || st->has_input) return true;
    if (w->dropped[u]) return false;
    return w->P->start[u] <= at && w->P->end[u] >= at;
}

static int fit_cmp_pos(const void *a, const void *b, void *ctx) {
    const int *pos = ctx;
    int x = pos[*(const int *)a], y = pos[*(const int *)b];
    return (x > y) - (x < y);
}

/* Insertion sort by step (closures are small; qsort_r is not C11). */
static void fit_sort_by_pos(int *ops, size_t n, const int *pos) {
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && fit_cmp_pos(&ops[j - 1], &ops[j], (void *)pos) > 0; j--) {
            int t = ops[j];
            ops[j] = ops[j - 1], ops[j - 1] = t;
        }
}

/* The recompute of storage s at its first backward step into a: the
 * forward ops to clone (w->ops, in schedule order), their seconds and
 * FLOPs, the bytes they make besides s; w->reads gets the tensors of
 * available storages they read.  Returns false when the closure would pass
 * max_closure_ops or reach an input no forward op makes. */
static bool fit_closure(fit_work *w, int s, fit_action *a) {
    const graph *g = w->g;
    int at = w->span[s].first_backward;
    size_t top = 0, n = 0;
    w->cur_stamp++;
    w->n_reads = 0;
    w->stamp[s] = w->cur_stamp;
    w->stack[top++] = s;
    *a = (fit_action){.storage = s, .kind = FIT_RECOMPUTE, .at = at, .tensor = -1};
    bool ok = true;
    while (top && ok) {
        int u = w->stack[--top];
        const graph_storage *st = &g->storages[u];
        for (size_t k = 0; k < st->n_tensors && ok; k++) {
            int op = g->model->values[st->tensors[k]].producer;
            if (op < 0 || !w->forward[op] || n >= w->P->max_closure_ops) {
                ok = false;
                break;
            }
            if (w->op_in[op]) continue;
            w->op_in[op] = true;
            w->ops[n++] = op;
            a->seconds += w->P->op_seconds[op];
            a->flops += w->P->op_flops[op];
            const fe_node *nd = &g->model->nodes[op];
            for (size_t i = 0; i < nd->n_inputs; i++) {
                int t = nd->inputs[i];
                if (t < 0) continue;
                int v = g->storage_of[t];
                if (fit_available(w, v, at)) {
                    w->reads[w->n_reads++] = t;
                    continue;
                }
                if (w->stamp[v] == w->cur_stamp) continue;
                w->stamp[v] = w->cur_stamp;
                w->stack[top++] = v;
            }
        }
    }
    /* the temporaries: every storage the clones make but s (the
     * recomputed inputs and the clones' other outputs, e.g. a dropout's
     * mask when its output is what is wanted) */
    w->cur_stamp++;
    w->stamp[s] = w->cur_stamp;
    for (size_t i = 0; i < n; i++) {
        const fe_node *nd = &g->model->nodes[w->ops[i]];
        for (size_t k = 0; k < nd->n_outputs; k++) {
            int v = nd->outputs[k] < 0 ? -1 : g->storage_of[nd->outputs[k]];
            if (v < 0 || w->stamp[v] == w->cur_stamp) continue;
            w->stamp[v] = w->cur_stamp;
            a->temp_bytes += g->storages[v].size;
        }
        w->op_in[w->ops[i]] = false;
    }
    a->n_ops = n;
    return ok;
}

/* Offload of s into a: the tensor every backward reader reads must be the
 * one the last forward writer of s made.  Returns false otherwise. */
static bool fit_offload(const fit_work *w, int s, fit_action *a) {
    const graph *g = w->g;
    const graph_storage *st = &g->storages[s];
    int t = w->span[s].backward_read;
    if (t < 0 || w->P->link_bytes_per_s <= 0) return false;
    int last = -1;
    for (size_t k = 0; k < st->n_tensors; k++) {
        int op = g->model->values[st->tensors[k]].producer;
        if (op >= 0 && (last < 0 || w->pos[op] > w->pos[last])) last = op;
    }
    if (last != g->model->values[t].producer) return false;
    uint64_t bytes = g->model->values[t].bytes;
    /* both copies counted whole: roam's order of the changed step runs
     * the Offload next to the value's maker and the Reload next to its
     * reader, so compute hides neither (fit_run measures what it does) */
    double copy = (double)bytes / w->P->link_bytes_per_s;
    *a = (fit_action){.storage = s,
                      .kind = FIT_OFFLOAD,
                      .seconds = 2 * copy,
                      .moved_bytes = 2 * bytes,
                      .tensor = t,
                      .after = w->span[s].last_forward,
                      .at = w->span[s].first_backward};
    return true;
}

/* The cheaper action for candidate s under the mode into a (peak: the live
 * curve's peak now); false when neither applies.  A recompute's ops stay in w->ops, its reads in
 * w->reads, until the next call. */
static bool fit_price(fit_work *w, int s, uint64_t peak, fit_action *a) {
    bool have = false;
    if (w->P->mode & FIT_OFFLOAD) have = fit_offload(w, s, a);
    if (w->P->mode & FIT_RECOMPUTE) {
        fit_action r;
        /* a recompute whose temporaries would make a new peak where it runs
         * is left to the offload, which makes none */
        if (fit_closure(w, s, &r) && (!have || r.seconds <= a->seconds) &&
            (!have || w->live[r.at] + r.temp_bytes < peak))
            *a = r, have = true;
    }
    return have;
}

static int fit_peak_step(const fit_work *w, size_t steps) {
    int best = 0;
    for (size_t i = 1; i < steps; i++)
        if (w->live[i] > w->live[best]) best = (int)i;
    return best;
}

/* The best candidate whose gap covers step `at`; storage -1 when none. */
static fit_action fit_best_at(fit_work *w, int at) {
    const graph *g = w->g;
    fit_action best = {.storage = -1};
    double best_score = -1;
    for (size_t s = 0; s < g->n_storages; s++) {
        const fit_span *sp = &w->span[s];
        if (w->dropped[s] || sp->last_forward >= at || sp->first_backward <= at) continue;
        if (!fit_is_candidate(w, (int)s)) continue;
        fit_action a;
        if (!fit_price(w, (int)s, w->live[at], &a)) continue;
        /* bytes freed over the gap per second added (ties: the first
         * storage); the temporaries are short-lived and show in the live
         * curve at a.at, where the next round sees them */
        double score = (double)g->storages[s].size / (a.seconds + 1e-12);
        if (score > best_score) best_score = score, best = a;
    }
    return best;
}

/* Applies a: the live curve, the spans of what its clones read (they now
 * read it at a.at), and the action's own copy of its ops. */
static void fit_apply(fit_work *w, fit_action *a) {
    const graph *g = w->g;
    fit_span *sp = &w->span[a->storage];
    uint64_t size = g->storages[a->storage].size;
    for (int t = sp->last_forward + 1; t < sp->first_backward; t++) w->live[t] -= size;
    w->live[a->at] += a->temp_bytes;
    w->dropped[a->storage] = true;
    if (a->kind != FIT_RECOMPUTE) return;
    fit_action again;
    ROAMC_ASSERT(fit_closure(w, a->storage, &again) && again.n_ops == a->n_ops);
    a->ops = xmallocarray(a->n_ops, sizeof *a->ops);
    memcpy(a->ops, w->ops, a->n_ops * sizeof *a->ops);
    fit_sort_by_pos(a->ops, a->n_ops, w->pos);
    for (size_t i = 0; i < w->n_reads; i++) {
        int t = w->reads[i], v = g->storage_of[t];
        fit_span *rs = &w->span[v];
        if (g->storages[v].persistent || g->storages[v].has_input) continue;
        if (a->at < rs->first_backward) rs->first_backward = a->at;
        rs->backward_read = rs->backward_read == -1 || rs->backward_read == t ? t : -2;
    }
}

void fit_choose(const fit_problem *P, fit_choice *c) {
    const graph *g = P->g;
    size_t n = g->n_ops, ns = g->n_storages;
    fit_work w = {.g = g, .P = P};
    memset(c, 0, sizeof *c);
    w.pos = xmallocarray(n, sizeof *w.pos);
    w.forward = c->forward = xcalloc(n, sizeof *w.forward);
    w.span = xmallocarray(ns, sizeof *w.span);
    w.live = xcalloc(n, sizeof *w.live);
    w.dropped = xcalloc(ns, sizeof *w.dropped);
    w.stamp = xcalloc(ns, sizeof *w.stamp);
    w.stack = xmallocarray(ns, sizeof *w.stack);
    size_t n_inputs = 0;
    for (size_t i = 0; i < n; i++) n_inputs += g->model->nodes[i].n_inputs;
    w.reads = xmallocarray(n_inputs, sizeof *w.reads);
    w.ops = xmallocarray(n, sizeof *w.ops);
    w.op_in = xcalloc(n, sizeof *w.op_in);
    for (size_t i = 0; i < n; i++) w.pos[P->order[i]] = (int)i;
    c->loss_op = fit_mark_forward(g, w.forward);
    fit_spans(&w);
    for (size_t s = 0; s < ns; s++)
        for (int32_t t = P->start[s]; t <= P->end[s]; t++) w.live[t] += g->storages[s].size;
    for (size_t s = 0; s < ns; s++) c->n_candidates += fit_is_candidate(&w, (int)s);
    if (c->loss_op < 0) c->n_candidates = 0;
    c->actions = xmallocarray(c->n_candidates, sizeof *c->actions);
    c->peaks = xmallocarray(c->n_candidates + 1, sizeof *c->peaks);
    c->peaks[0] = n ? w.live[fit_peak_step(&w, n)] : 0;
    while (n && c->n_actions < c->n_candidates) {
        fit_action a = fit_best_at(&w, fit_peak_step(&w, n));
        if (a.storage < 0) break;
        fit_apply(&w, &a);
        c->actions[c->n_actions++] = a;
        c->peaks[c->n_actions] = w.live[fit_peak_step(&w, n)];
    }
    free(w.pos), free(w.span), free(w.live), free(w.dropped), free(w.stamp);
    free(w.stack), free(w.reads), free(w.ops), free(w.op_in);
}

void fit_choice_free(fit_choice *c) {
    for (size_t i = 0; i < c->n_actions; i++) free(c->actions[i].ops);
    free(c->actions);
    free(c->peaks);
    free(c->forward);
    memset(c, 0, sizeof *c);
}
