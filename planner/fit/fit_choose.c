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
#include "ilp_fit.h"

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

/* The work state on P's plan: positions, passes, spans, the live curve;
 * c gets the forward flags (it owns them), the loss op and the count of
 * candidates, and room for that many actions. */
static void fit_work_init(fit_work *w, const fit_problem *P, fit_choice *c) {
    const graph *g = P->g;
    size_t n = g->n_ops, ns = g->n_storages;
    *w = (fit_work){.g = g, .P = P};
    memset(c, 0, sizeof *c);
    w->pos = xmallocarray(n, sizeof *w->pos);
    w->forward = c->forward = xcalloc(n, sizeof *w->forward);
    w->span = xmallocarray(ns, sizeof *w->span);
    w->live = xcalloc(n, sizeof *w->live);
    w->dropped = xcalloc(ns, sizeof *w->dropped);
    w->stamp = xcalloc(ns, sizeof *w->stamp);
    w->stack = xmallocarray(ns, sizeof *w->stack);
    size_t n_inputs = 0;
    for (size_t i = 0; i < n; i++) n_inputs += g->model->nodes[i].n_inputs;
    w->reads = xmallocarray(n_inputs, sizeof *w->reads);
    w->ops = xmallocarray(n, sizeof *w->ops);
    w->op_in = xcalloc(n, sizeof *w->op_in);
    for (size_t i = 0; i < n; i++) w->pos[P->order[i]] = (int)i;
    c->loss_op = fit_mark_forward(g, w->forward);
    fit_spans(w);
    for (size_t s = 0; s < ns; s++)
        for (int32_t t = P->start[s]; t <= P->end[s]; t++) w->live[t] += g->storages[s].size;
    for (size_t s = 0; s < ns; s++) c->n_candidates += fit_is_candidate(w, (int)s);
    if (c->loss_op < 0) c->n_candidates = 0;
    c->actions = xmallocarray(c->n_candidates, sizeof *c->actions);
    c->peaks = xmallocarray(c->n_candidates + 1, sizeof *c->peaks);
    c->peaks[0] = n ? w->live[fit_peak_step(w, n)] : 0;
}

static void fit_work_free(fit_work *w) {
    free(w->pos), free(w->span), free(w->live), free(w->dropped), free(w->stamp);
    free(w->stack), free(w->reads), free(w->ops), free(w->op_in);
}

void fit_choose(const fit_problem *P, fit_choice *c) {
    fit_work w;
    fit_work_init(&w, P, c);
    size_t n = P->g->n_ops;
    while (n && c->n_actions < c->n_candidates) {
        fit_action a = fit_best_at(&w, fit_peak_step(&w, n));
        if (a.storage < 0) break;
        fit_apply(&w, &a);
        c->actions[c->n_actions++] = a;
        c->peaks[c->n_actions] = w.live[fit_peak_step(&w, n)];
    }
    fit_work_free(&w);
}

/* ------------------------------------------------------- the exact choice */

/* The MILP of ilp_fit.h on w's plan: candidates, their choices priced with
 * nothing else dropped, the chains between them, the rows. */
typedef struct fit_milp {
    int *cand; /* candidate index -> storage */
    size_t n_cand;
    ilp_fit_choice *ch; /* choices */
    int *kind;          /* per choice: FIT_RECOMPUTE or FIT_OFFLOAD */
    size_t n_ch;
    ilp_fit_chain *chain;
    size_t n_chain, cap_chain;
    int32_t *cuts; /* row r = steps [cuts[r], cuts[r+1]) */
    double *need;
    size_t n_rows;
} fit_milp;

static int fit_cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The row holding step t (binary search over the cuts). */
static size_t fit_row_of(const fit_milp *M, int32_t t) {
    size_t lo = 0, hi = M->n_rows;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (M->cuts[mid] <= t)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* Rows: the steps cut wherever a candidate's gap starts or ends and around
 * each first backward step (where temporaries live); need = the largest
 * live bytes of the row less the target. */
static void fit_milp_rows(fit_milp *M, const fit_work *w, uint64_t target) {
    size_t n = w->g->n_ops, k = 0;
    M->cuts = xmallocarray(3 * M->n_cand + 2, sizeof *M->cuts);
    M->cuts[k++] = 0;
    for (size_t i = 0; i < M->n_cand; i++) {
        const fit_span *sp = &w->span[M->cand[i]];
        M->cuts[k++] = sp->last_forward + 1;
        M->cuts[k++] = sp->first_backward;
        M->cuts[k++] = sp->first_backward + 1;
    }
    qsort(M->cuts, k, sizeof *M->cuts, fit_cmp_i32);
    size_t u = 0;
    for (size_t i = 0; i < k; i++)
        if (M->cuts[i] < (int32_t)n && (u == 0 || M->cuts[i] != M->cuts[u - 1]))
            M->cuts[u++] = M->cuts[i];
    M->n_rows = u;
    M->need = xmallocarray(u ? u : 1, sizeof *M->need);
    for (size_t r = 0; r < u; r++) {
        int32_t end = r + 1 < u ? M->cuts[r + 1] : (int32_t)n;
        uint64_t most = 0;
        for (int32_t t = M->cuts[r]; t < end; t++)
            if (w->live[t] > most) most = w->live[t];
        M->need[r] = (double)most - (double)target;
    }
}

/* The candidates and their choices; a recompute's reads of other
 * candidates, live where it runs, become chains. */
static void fit_milp_choices(fit_milp *M, fit_work *w) {
    const graph *g = w->g;
    int *index_of = xmallocarray(g->n_storages, sizeof *index_of);
    for (size_t s = 0; s < g->n_storages; s++) {
        index_of[s] = -1;
        if (fit_is_candidate(w, (int)s))
            index_of[s] = (int)M->n_cand, M->cand[M->n_cand++] = (int)s;
    }
    M->ch = xmallocarray(2 * M->n_cand + 1, sizeof *M->ch);
    M->kind = xmallocarray(2 * M->n_cand + 1, sizeof *M->kind);
    double *alone = xmallocarray(M->n_cand + 1, sizeof *alone); /* recompute seconds */
    uint64_t *alone_temp = xcalloc(M->n_cand + 1, sizeof *alone_temp);
    for (size_t i = 0; i < M->n_cand; i++) {
        int s = M->cand[i];
        const fit_span *sp = &w->span[s];
        uint64_t size = g->storages[s].size;
        size_t lo = fit_row_of(M, sp->last_forward + 1), hi = fit_row_of(M, sp->first_backward);
        fit_action a;
        alone[i] = -1;
        if ((w->P->mode & FIT_OFFLOAD) && fit_offload(w, s, &a)) {
            M->ch[M->n_ch] = (ilp_fit_choice){i, a.seconds, size, lo, hi, 0, 0};
            M->kind[M->n_ch++] = FIT_OFFLOAD;
        }
        if ((w->P->mode & FIT_RECOMPUTE) && fit_closure(w, s, &a)) {
            alone[i] = a.seconds, alone_temp[i] = a.temp_bytes + size;
            size_t at = fit_row_of(M, a.at);
            M->ch[M->n_ch] = (ilp_fit_choice){i, a.seconds, size, lo, hi, at, a.temp_bytes};
            M->kind[M->n_ch++] = FIT_RECOMPUTE;
            for (size_t k = 0; k < w->n_reads; k++) {
                int u = g->storage_of[w->reads[k]];
                if (index_of[u] < 0 || (int)i == index_of[u]) continue;
                if (M->n_chain == M->cap_chain) {
                    M->cap_chain = M->cap_chain ? 2 * M->cap_chain : 64;
                    M->chain = xreallocarray(M->chain, M->cap_chain, sizeof *M->chain);
                }
                M->chain[M->n_chain++] =
                    (ilp_fit_chain){M->n_ch - 1, (size_t)index_of[u], 0, at, 0};
            }
        }
    }
    /* a chain costs what recomputing u alone costs (offload-only u: its
     * producer cannot be cloned, so the chain cannot be paid: forbid it by
     * a cost no solution takes) */
    for (size_t h = 0; h < M->n_chain; h++) {
        size_t u = M->chain[h].candidate;
        M->chain[h].cost = alone[u] >= 0 ? alone[u] : 1e9;
        M->chain[h].temp = alone_temp[u];
    }
    free(alone);
    free(alone_temp);
    free(index_of);
}

void fit_choose_exact(const fit_problem *P, uint64_t target, fit_exact_budget *b, fit_choice *c,
                      fit_exact *x) {
    fit_work w;
    fit_work_init(&w, P, c);
    memset(x, 0, sizeof *x);
    fit_milp M = {0};
    M.cand = xmallocarray(c->n_candidates + 1, sizeof *M.cand);
    if (c->n_candidates) {
        /* candidates first (rows need their spans), then rows, then prices */
        for (size_t s = 0; s < P->g->n_storages; s++)
            if (fit_is_candidate(&w, (int)s)) M.cand[M.n_cand++] = (int)s;
        fit_milp_rows(&M, &w, target);
        M.n_cand = 0;
        fit_milp_choices(&M, &w);
    }
    ilp_fit_problem ip = {.n_candidates = M.n_cand,
                          .choices = M.ch,
                          .n_choices = M.n_ch,
                          .chains = M.chain,
                          .n_chains = M.n_chain,
                          .need = M.need,
                          .n_rows = M.n_rows};
    unsigned char *chosen = xcalloc(M.n_ch + 1, 1);
    ilp_fit_result r = {0};
    if (M.n_ch) ilp_fit_solve(&ip, &b->work, b->deadline, chosen, &r);
    x->status = r.status, x->objective = r.objective, x->bound = r.bound;
    x->nodes = r.nodes, x->timed_out = r.timed_out;
    x->n_choices = M.n_ch, x->n_chains = M.n_chain, x->n_rows = M.n_rows;
    /* the chosen drops as actions, deepest first (largest first backward
     * step), so that a recompute reaching a value dropped too recomputes it
     * as the model's chain does */
    int *sel = xmallocarray(M.n_ch + 1, sizeof *sel);
    size_t n_sel = 0;
    if (r.status == ILP_FIT_FOUND || r.status == ILP_FIT_OPTIMAL)
        for (size_t k = 0; k < M.n_ch; k++)
            if (chosen[k]) sel[n_sel++] = (int)k;
    for (size_t i = 1; i < n_sel; i++)
        for (size_t j = i; j > 0; j--) {
            int a = M.cand[M.ch[sel[j - 1]].candidate], bb = M.cand[M.ch[sel[j]].candidate];
            if (w.span[a].first_backward >= w.span[bb].first_backward) break;
            int t = sel[j];
            sel[j] = sel[j - 1], sel[j - 1] = t;
        }
    size_t n = P->g->n_ops;
    for (size_t i = 0; i < n_sel; i++) {
        int s = M.cand[M.ch[sel[i]].candidate];
        fit_action a;
        bool ok = M.kind[sel[i]] == FIT_OFFLOAD ? fit_offload(&w, s, &a) : fit_closure(&w, s, &a);
        if (!ok || (M.kind[sel[i]] == FIT_OFFLOAD && w.span[s].backward_read < 0)) continue;
        fit_apply(&w, &a);
        c->actions[c->n_actions++] = a;
        c->peaks[c->n_actions] = w.live[fit_peak_step(&w, n)];
    }
    free(sel);
    free(chosen);
    free(M.cand), free(M.ch), free(M.kind), free(M.chain), free(M.cuts), free(M.need);
    fit_work_free(&w);
}

void fit_choice_free(fit_choice *c) {
    for (size_t i = 0; i < c->n_actions; i++) free(c->actions[i].ops);
    free(c->actions);
    free(c->peaks);
    free(c->forward);
    memset(c, 0, sizeof *c);
}
