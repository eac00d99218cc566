/* Memory-insensitive operators, segments, weight-update placement, blocks
 * and the subgraph tree (see partition.h). */
#include "partition.h"
#include "base.h"
#include "leaf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

static const char *const partition_placement_names[] = {"rule", "immediate", "program", "late",
                                                        "reference"};
static const char *const partition_floating_names[] = {"rule", "just-in-time", "early",
                                                       "reference"};
/* a name for every value: checked when it compiles */
_Static_assert(sizeof partition_placement_names / sizeof *partition_placement_names ==
                   PARTITION_PLACE_COUNT,
               "a placement without a name");
_Static_assert(sizeof partition_floating_names / sizeof *partition_floating_names ==
                   PARTITION_FLOAT_COUNT,
               "a floating rule without a name");

const char *partition_placement_name(partition_placement p) {
    return partition_placement_names[p];
}
const char *partition_floating_name(partition_floating f) {
    return partition_floating_names[f];
}

/* --------------------------------------------- memory-insensitive ops
 *
 * In a topological order, op v at position i is fixed in every order iff
 *   (a) every op after v descends from v: each has a predecessor at a
 *       position in [i, its own) (by induction that predecessor is v or
 *       descends from v), i.e. the suffix minimum of "latest predecessor
 *       position" over positions > i is >= i;
 *   (b) symmetrically every op before v is an ancestor: the prefix maximum
 *       of "earliest successor position" over positions < i is <= i.
 * Both are prefix/suffix scans: linear, no n x n bitsets. */
int partition_memory_insensitive(const graph *g, const bool *mask, const int *topo, size_t n,
                                 bool *mi) {
    int *pos = xmallocarray(g->n_ops, sizeof *pos);
    int *latest_pred = xmallocarray(n, sizeof *latest_pred);
    int *earliest_succ = xmallocarray(n, sizeof *earliest_succ);
    for (size_t i = 0; i < g->n_ops; i++) pos[i] = -1, mi[i] = false;
    for (size_t i = 0; i < n; i++) pos[topo[i]] = (int)i;
    for (size_t i = 0; i < n; i++) {
        int v = topo[i], lp = -1, es = (int)n;
        for (size_t k = g->pred_start[v]; k < g->pred_start[v + 1]; k++)
            if ((!mask || mask[g->pred[k]]) && pos[g->pred[k]] > lp) lp = pos[g->pred[k]];
        for (size_t k = g->succ_start[v]; k < g->succ_start[v + 1]; k++)
            if ((!mask || mask[g->succ[k]]) && pos[g->succ[k]] < es) es = pos[g->succ[k]];
        ROAMC_ASSERT(lp < (int)i && es > (int)i); /* topo is a valid order */
        latest_pred[i] = lp, earliest_succ[i] = es;
    }
    /* suffix minimum of latest_pred over positions > i, prefix maximum of
     * earliest_succ over positions < i */
    int count = 0, prefix_max = -1;
    int *suffix_min = pos; /* reuse: pos is no longer needed */
    int run = (int)n;
    for (size_t i = n; i-- > 0;) {
        suffix_min[i] = run;
        if (latest_pred[i] < run) run = latest_pred[i];
    }
    for (size_t i = 0; i < n; i++) {
        if (suffix_min[i] >= (int)i && (i == 0 || prefix_max <= (int)i))
            mi[topo[i]] = true, count++;
        if (earliest_succ[i] > prefix_max) prefix_max = earliest_succ[i];
    }
    free(pos), free(latest_pred), free(earliest_succ);
    return count;
}

/* -------------------------------------------------- update branches */

/* An op writes persistent state in place: an optimizer step. */
static bool partition_is_seed(const graph *g, int op) {
    const fe_node *n = &g->model->nodes[op];
    if (!n->inplace) return false;
    for (size_t k = 0; k < n->n_outputs; k++) {
        if (n->alias[k] < 0 || n->inputs[n->alias[k]] < 0) continue;
        const graph_storage *st = &g->storages[g->storage_of[n->inputs[n->alias[k]]]];
        if (st->persistent && st->has_input) return true;
    }
    return false;
}

/* Update ops.  Candidates: every successor is a candidate, and the op
 * either writes persistent state in place or has successors.  But an op
 * that reads an activation some other op also uses (the gradient's own
 * matmul reads the layer's input and the incoming gradient) belongs to the
 * backward pass: it is not an update op, and neither is anything it needs.
 * Forward ops never are (without that rule, everything in a training graph
 * leads only to updates).  Both passes go in reverse topological order. */
static size_t partition_find_updates(const graph *g, const int *topo, const bool *forward,
                                     bool *update) {
    size_t n = g->n_ops;
    bool *cand = xcalloc(n, sizeof *cand);
    int *outside = xcalloc(g->n_storages, sizeof *outside); /* touchers not candidates */
    for (size_t i = n; i-- > 0;) {
        int v = topo[i];
        size_t ns = g->succ_start[v + 1] - g->succ_start[v];
        bool all = true;
        for (size_t k = g->succ_start[v]; k < g->succ_start[v + 1] && all; k++)
            all = cand[g->succ[k]];
        cand[v] = !forward[v] && all && (ns > 0 || partition_is_seed(g, v));
    }
    for (size_t v = 0; v < n; v++)
        if (!cand[v])
            for (size_t k = g->touch_start[v]; k < g->touch_start[v + 1]; k++)
                outside[g->touch[k]]++;
    size_t count = 0;
    for (size_t i = n; i-- > 0;) {
        int v = topo[i];
        bool ok = cand[v];
        for (size_t k = g->succ_start[v]; k < g->succ_start[v + 1] && ok; k++)
            ok = update[g->succ[k]];
        for (size_t k = g->touch_start[v]; k < g->touch_start[v + 1] && ok; k++) {
            const graph_storage *st = &g->storages[g->touch[k]];
            if (!st->persistent && !st->has_input && outside[g->touch[k]]) ok = false;
        }
        update[v] = ok;
        count += ok;
    }
    free(cand), free(outside);
    return count;
}

/* ------------------------------------------------------------- build */

void partition_free(partition *P) {
    if (!P) return;
    free(P->update), free(P->mi), free(P->forward), free(P->block);
    for (size_t i = 0; P->nodes && i < P->n_nodes; i++)
        free(P->nodes[i].ops), free(P->nodes[i].boundary);
    free(P->nodes);
    memset(P, 0, sizeof *P);
}

/* Working state of one partition_build call. */
typedef struct partition_work {
    const graph *g;
    const partition_options *opt;
    partition *P;
    int *topo;      /* all ops in program order */
    int *main_topo; /* anchored ops (neither update nor floating), program order */
    size_t n_main;
    int *mi_list; /* MI ops in order; k of them */
    int k;
    int *coarse;        /* per op: coarse block (partition_segment_block, partition_mi_block) */
    bool *floating;     /* per op: left out of the MI analysis (see partition_find_floating) */
    int *ref_mi_before; /* per op: MI ops before it in the reference order, or NULL */
    size_t n_floating;
    int n_coarse; /* 2k + 1 */
    int pivot;    /* number of forward MI ops */
} partition_work;

/* Coarse blocks interleave the k + 1 segments and the k MI ops in order:
 * segment i is block 2i, MI op i is block 2i + 1 (n_coarse = 2k + 1).  Only
 * the functions from here to partition_mi_block_outer know that
 * encoding. */
static int partition_segment_block(int segment) {
    return 2 * segment;
}
static int partition_mi_block(int mi) {
    return 2 * mi + 1;
}
/* The MI index of MI block c; the segment of segment block c. */
static int partition_block_mi(int c) {
    ROAMC_ASSERT(c & 1);
    return c / 2;
}
static int partition_block_segment(int c) {
    ROAMC_ASSERT(!(c & 1));
    return c / 2;
}
/* The first segment an op may run in when it follows block c (c >= 0):
 * c's own for a segment, the next one for an MI op. */
static int partition_segment_after(int c) {
    return (c + 1) / 2;
}
/* The last segment an op may run in when it precedes block c: c's own for
 * a segment, segment i for MI op i (it runs after segment i). */
static int partition_segment_before(int c) {
    return c / 2;
}
/* The next MI block outwards from MI block c, towards the start (dir -1,
 * -1 when none is left) or the end (dir +1, nc when none is left). */
static int partition_mi_block_outer(int c, int dir, int nc) {
    int next = c + 2 * dir;
    return next < -1 ? -1 : next > nc ? nc : next;
}

/* Eq. 5's alpha: the gradient and the optimizer state an update touches,
 * in gradient sizes (unknown optimizer: assume the common case, Adam). */
static double partition_alpha(const graph *g) {
    return g->optimizer_moments < 0 ? 3.0 : 1.0 + g->optimizer_moments;
}

/* Segment (0..k) or MI index of every main op, from its MI ancestors. */
static void partition_segments(partition_work *w) {
    partition *P = w->P;
    int seen = 0;
    for (size_t i = 0; i < w->n_main; i++) {
        int v = w->main_topo[i];
        if (P->mi[v]) {
            w->mi_list[seen] = v;
            w->coarse[v] = partition_mi_block(seen);
            seen++;
        } else
            w->coarse[v] = partition_segment_block(seen);
    }
    ROAMC_ASSERT(seen == w->k);
}

/* Floating ops.  A main op that can run far from where it is used (the
 * first op on the data, a view of a parameter, a copy of the labels that
 * only the loss reads, the gradient of a tied weight that is only summed
 * at the end) would make every op within its reach movable and leave no
 * MI op there.  They are analysed without and placed afterwards, each in a
 * segment between its anchored ancestors and descendants.
 *
 * Floating: no predecessor; or a view / in-place op (creates nothing) of
 * floating ops only; or slack (ALAP level - ASAP level over the main DAG's
 * longest paths) above PARTITION_SLACK.  Small slack (the short side of a
 * residual block) stays: those ops are what leaves order. */
#define PARTITION_SLACK 6

static void partition_find_floating(partition_work *w) {
    const graph *g = w->g;
    const partition *P = w->P;
    size_t n = g->n_ops;
    int *asap = xcalloc(n, sizeof *asap), *alap = xmallocarray(n, sizeof *alap);
    int depth = 0;
    for (size_t i = 0; i < n; i++) {
        int v = w->topo[i];
        if (P->update[v]) continue;
        for (size_t q = g->pred_start[v]; q < g->pred_start[v + 1]; q++)
            if (!P->update[g->pred[q]] && asap[g->pred[q]] + 1 > asap[v])
                asap[v] = asap[g->pred[q]] + 1;
        if (asap[v] > depth) depth = asap[v];
    }
    for (size_t i = n; i-- > 0;) {
        int v = w->topo[i];
        alap[v] = depth;
        if (P->update[v]) continue;
        for (size_t q = g->succ_start[v]; q < g->succ_start[v + 1]; q++)
            if (!P->update[g->succ[q]] && alap[g->succ[q]] - 1 < alap[v])
                alap[v] = alap[g->succ[q]] - 1;
    }
    for (size_t i = 0; i < n; i++) {
        int v = w->topo[i];
        if (P->update[v]) continue;
        bool source = g->pred_start[v + 1] == g->pred_start[v];
        bool view_of_floating = g->make_start[v + 1] == g->make_start[v];
        for (size_t q = g->pred_start[v]; q < g->pred_start[v + 1] && view_of_floating; q++)
            view_of_floating = w->floating[g->pred[q]];
        w->floating[v] = source || view_of_floating || alap[v] - asap[v] > PARTITION_SLACK;
        w->n_floating += w->floating[v];
    }
    free(asap), free(alap);
}

/* Segment of each floating op: between base (after its anchored ancestors)
 * and lim (before its anchored descendants), by the floating mode; then
 * pushed after its floating predecessors, which keeps it within lim. */
static void partition_place_floating(partition_work *w) {
    const graph *g = w->g;
    const partition *P = w->P;
    size_t n = g->n_ops;
    int *base = xcalloc(n, sizeof *base), *lim = xmallocarray(n, sizeof *lim);
    for (size_t i = 0; i < n; i++) { /* base: topological order */
        int v = w->topo[i];
        if (P->update[v] || !w->floating[v]) continue;
        for (size_t q = g->pred_start[v]; q < g->pred_start[v + 1]; q++) {
            int p = g->pred[q];
            if (P->update[p]) continue;
            int seg = w->floating[p] ? base[p] : partition_segment_after(w->coarse[p]);
            if (seg > base[v]) base[v] = seg;
        }
    }
    for (size_t i = n; i-- > 0;) { /* lim: reverse order */
        int v = w->topo[i];
        lim[v] = w->k;
        if (P->update[v] || !w->floating[v]) continue;
        for (size_t q = g->succ_start[v]; q < g->succ_start[v + 1]; q++) {
            int s = g->succ[q];
            if (P->update[s]) continue;
            int seg = w->floating[s] ? lim[s] : partition_segment_before(w->coarse[s]);
            if (seg < lim[v]) lim[v] = seg;
        }
    }
    for (size_t i = 0; i < n; i++) {
        int v = w->topo[i];
        if (P->update[v] || !w->floating[v]) continue;
        ROAMC_ASSERT(base[v] <= lim[v]);
        int seg = lim[v];
        if (w->opt->floating == PARTITION_FLOAT_EARLY)
            seg = base[v];
        else if (w->opt->floating == PARTITION_FLOAT_REFERENCE && w->ref_mi_before) {
            seg = w->ref_mi_before[v];
            if (seg < base[v]) seg = base[v];
            if (seg > lim[v]) seg = lim[v];
        } else if (w->opt->floating == PARTITION_FLOAT_RULE) {
            /* early when it reads more than it creates (it may free its
             * inputs), else just in time */
            uint64_t made = 0, read = 0;
            for (size_t q = g->make_start[v]; q < g->make_start[v + 1]; q++)
                made += g->storages[g->make[q]].size;
            for (size_t q = g->touch_start[v]; q < g->touch_start[v + 1]; q++) {
                const graph_storage *st = &g->storages[g->touch[q]];
                if (!st->persistent) read += st->size;
            }
            if (read > 2 * made) seg = base[v];
        }
        for (size_t q = g->pred_start[v]; q < g->pred_start[v + 1]; q++) {
            int p = g->pred[q];
            if (!P->update[p] && w->floating[p] && partition_block_segment(w->coarse[p]) > seg)
                seg = partition_block_segment(w->coarse[p]);
        }
        ROAMC_ASSERT(seg <= lim[v]);
        w->coarse[v] = partition_segment_block(seg);
    }
    free(base), free(lim);
}

/* MI ops before each op in the reference order: the segment that order
 * runs the op in. */
static void partition_reference(partition_work *w) {
    const graph *g = w->g;
    size_t n = g->n_ops;
    int *ref = xmallocarray(n, sizeof *ref);
    w->ref_mi_before = xmallocarray(n, sizeof *w->ref_mi_before);
    for (size_t v = 0; v < n; v++) ref[w->opt->reference_pos[v]] = (int)v;
    int seen = 0;
    for (size_t i = 0; i < n; i++) {
        int v = ref[i];
        w->ref_mi_before[v] = seen;
        if (w->P->mi[v]) seen++;
    }
    free(ref);
}

/* Span of a storage over coarse blocks, from the ops with the given filter.
 * first = block of its maker (-1 without one), last = last toucher. */
static void partition_spans(const partition_work *w, bool main_only, int32_t *first,
                            int32_t *last) {
    const graph *g = w->g;
    for (size_t s = 0; s < g->n_storages; s++) first[s] = -1, last[s] = -1;
    for (size_t v = 0; v < g->n_ops; v++) {
        if (main_only && w->P->update[v]) continue;
        int b = w->coarse[v];
        for (size_t k = g->make_start[v]; k < g->make_start[v + 1]; k++) first[g->make[k]] = b;
        for (size_t k = g->touch_start[v]; k < g->touch_start[v + 1]; k++)
            if (last[g->touch[k]] < b) last[g->touch[k]] = b;
    }
}

/* The loss, before anything else: from metadata roamc.loss, else the
 * producer of the smallest graph output that is not persistent state (a
 * scalar loss), ties to the earliest.  forward = the loss op and its
 * ancestors. */
static void partition_find_loss(const graph *g, partition *P) {
    const fe_model *m = g->model;
    P->loss_op = -1;
    if (g->loss_value >= 0)
        P->loss_op = m->values[g->loss_value].producer, P->loss_from_metadata = true;
    if (P->loss_op < 0) {
        uint64_t best = UINT64_MAX;
        for (size_t i = 0; i < m->n_outputs; i++) {
            int v = m->outputs[i];
            if (v < 0 || m->values[v].producer < 0 || g->storages[g->storage_of[v]].has_input)
                continue;
            if (m->values[v].bytes < best)
                best = m->values[v].bytes, P->loss_op = m->values[v].producer;
        }
    }
    if (P->loss_op < 0) return;
    int *stack = xmallocarray(g->n_ops, sizeof *stack);
    size_t top = 0;
    stack[top++] = P->loss_op;
    P->forward[P->loss_op] = true;
    while (top) {
        int v = stack[--top];
        for (size_t k = g->pred_start[v]; k < g->pred_start[v + 1]; k++)
            if (!P->forward[g->pred[k]]) P->forward[g->pred[k]] = true, stack[top++] = g->pred[k];
    }
    free(stack);
}

/* Segment index of each update op (eqs. 4-6 or a fixed rule); coarse
 * blocks of update ops are set from it. */
static void partition_place_updates(partition_work *w, const int32_t *first, const int32_t *last) {
    const graph *g = w->g;
    partition *P = w->P;
    int k = w->k;
    /* mem_atvs per segment (eq. 5): main storages that may be alive in it */
    int64_t *atvs = xcalloc((size_t)k + 2, sizeof *atvs);
    /* MI ops before each op in program order */
    int *mi_before = xmallocarray(g->n_ops, sizeof *mi_before);
    uint64_t esti_pm = 0; /* eq. 4: activations, made in forward and read in backward */
    for (size_t s = 0; s < g->n_storages; s++) {
        const graph_storage *st = &g->storages[s];
        if (st->persistent || st->has_input || first[s] < 0) continue;
        /* the segments it may be alive in */
        int a = partition_segment_after(first[s]), b = partition_segment_before(last[s]);
        atvs[a] += (int64_t)st->size;
        atvs[b + 1] -= (int64_t)st->size;
        int maker = g->model->values[st->root].producer;
        if (maker >= 0 && P->forward[maker] && last[s] >= 0 &&
            last[s] > partition_segment_block(w->pivot))
            esti_pm += st->size;
    }
    int64_t run = 0, max_atvs = 0;
    for (int s = 0; s <= k; s++) {
        run += atvs[s];
        atvs[s] = run;
        if (run > max_atvs) max_atvs = run;
    }
    if (esti_pm == 0) esti_pm = (uint64_t)max_atvs;
    {
        int seen = 0;
        for (size_t i = 0; i < g->n_ops; i++) {
            int v = w->topo[i];
            if (!P->update[v] && P->mi[v]) seen++;
            mi_before[v] = seen;
        }
    }
    for (size_t i = 0; i < g->n_ops; i++) {
        int u = w->topo[i];
        if (!P->update[u]) continue;
        /* earliest segment: after every predecessor */
        int e = 0;
        for (size_t q = g->pred_start[u]; q < g->pred_start[u + 1]; q++) {
            int seg = partition_segment_after(w->coarse[g->pred[q]]);
            if (seg > e) e = seg;
        }
        ROAMC_ASSERT(e <= k);
        int chosen = e;
        switch (w->opt->placement) {
        case PARTITION_PLACE_IMMEDIATE: chosen = e; break;
        case PARTITION_PLACE_LATE: chosen = k; break;
        case PARTITION_PLACE_PROGRAM: chosen = mi_before[u] > e ? mi_before[u] : e; break;
        case PARTITION_PLACE_REFERENCE:
            chosen = w->ref_mi_before && w->ref_mi_before[u] > e ? w->ref_mi_before[u] : e;
            break;
        case PARTITION_PLACE_RULE: {
            /* eq. 6: mem_used_t = mem_atvs_t + alpha * size_grad, with
             * size_grad the bytes of non-persistent storages the op touches.
             * Delay only when running now would exceed the estimated peak
             * (eq. 4), by at most delay_radius segments, and charge a delay
             * with what it costs: the op's inputs from the main graph stay
             * live past their last main use until it runs. */
            uint64_t grad = 0;
            for (size_t q = g->touch_start[u]; q < g->touch_start[u + 1]; q++) {
                const graph_storage *st = &g->storages[g->touch[q]];
                if (!st->persistent && !st->has_input) grad += st->size;
            }
            double extra = P->alpha * (double)grad;
            if ((double)atvs[e] + extra <= (double)esti_pm) break;
            int hi = e + w->opt->delay_radius < k ? e + w->opt->delay_radius : k;
            double best_cost = (double)atvs[e] + extra, held_max = 0;
            for (int b = e + 1; b <= hi; b++) {
                /* segment b-1 is now passed with the inputs held */
                double held = (double)atvs[b - 1];
                for (size_t q = g->touch_start[u]; q < g->touch_start[u + 1]; q++) {
                    int sid = g->touch[q];
                    const graph_storage *st = &g->storages[sid];
                    if (st->persistent || st->has_input || first[sid] < 0) continue;
                    if (last[sid] < partition_segment_block(b - 1)) held += (double)st->size;
                }
                if (b - 1 > e && held > held_max) held_max = held;
                if (b - 1 == e) held_max = held > held_max ? held : held_max;
                double cost = (double)atvs[b] + extra;
                if (held_max > cost) cost = held_max;
                if (cost < best_cost) best_cost = cost, chosen = b;
            }
            break;
        }
        case PARTITION_PLACE_COUNT: ROAMC_ASSERT(w->opt->placement != PARTITION_PLACE_COUNT); break;
        }
        w->coarse[u] = partition_segment_block(chosen);
    }
    free(atvs), free(mi_before);
}

/* Splits coarse blocks larger than node_limit into windows of the better of
 * their program and LESCEA orders; fills P->block. */
static void partition_blocks(partition_work *w, const int *program_pos) {
    const graph *g = w->g;
    partition *P = w->P;
    size_t limit = (size_t)w->opt->node_limit;
    leaf_blocks B;
    leaf_blocks_init(g, w->coarse, w->n_coarse, &B);
    int next = 0;
    for (int c = 0; c < w->n_coarse; c++) {
        size_t n = B.op_start[c + 1] - B.op_start[c];
        if (n == 0) continue;
        if (n <= limit) {
            for (size_t i = B.op_start[c]; i < B.op_start[c + 1]; i++) P->block[B.ops[i]] = next;
            next++;
            continue;
        }
        leaf_graph L;
        leaf_init(g, &B, c, &L);
        int *a = xmallocarray(n, sizeof *a), *b = xmallocarray(n, sizeof *b);
        bool along_reference = w->ref_mi_before && w->opt->placement == PARTITION_PLACE_REFERENCE;
        leaf_program(&L, along_reference ? w->opt->reference_pos : program_pos, a);
        leaf_lescea(&L, b);
        const int *best = !along_reference && leaf_peak(&L, b) < leaf_peak(&L, a) ? b : a;
        size_t parts = (n + limit - 1) / limit, chunk = (n + parts - 1) / parts;
        for (size_t i = 0; i < n; i++) P->block[L.ops[best[i]]] = next + (int)(i / chunk);
        next += (int)((n + chunk - 1) / chunk);
        free(a), free(b);
        leaf_free(&L);
    }
    leaf_blocks_free(&B);
    P->n_blocks = next;
}

/* Appends a tree node of kind under parent: its ops (n) and its boundary
 * MI ops (nb); cap is the capacity of P->nodes. */
static void partition_add_node(partition *P, partition_node_kind kind, int parent, const int *ops,
                               size_t n, const int *boundary, size_t nb, size_t *cap) {
    if (P->n_nodes == *cap) {
        *cap = *cap ? 2 * *cap : 16;
        P->nodes = xreallocarray(P->nodes, *cap, sizeof *P->nodes);
    }
    partition_node *nd = &P->nodes[P->n_nodes];
    memset(nd, 0, sizeof *nd);
    nd->kind = kind, nd->parent = parent;
    nd->ops = xmallocarray(n, sizeof *nd->ops);
    nd->boundary = xmallocarray(nb, sizeof *nd->boundary);
    memcpy(nd->ops, ops, n * sizeof *ops);
    if (nb) memcpy(nd->boundary, boundary, nb * sizeof *boundary);
    nd->n_ops = n, nd->n_boundary = nb;
    if (parent >= 0) P->nodes[parent].n_children++;
    P->n_nodes++;
}

static int partition_int_cmp(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Dependent subgraphs of an independent one: its final blocks in order
 * (the forward side, then the backward side), grouped greedily into runs of
 * at most node_limit ops. */
static void partition_split(partition *P, int ig, const int *ops_by_block,
                            const size_t *block_start, const int *blist, size_t nbl, size_t limit,
                            size_t *cap) {
    int *buf = xmallocarray(P->nodes[ig].n_ops, sizeof *buf);
    size_t n = 0;
    for (size_t i = 0; i <= nbl; i++) {
        size_t sz = i < nbl ? block_start[blist[i] + 1] - block_start[blist[i]] : 0;
        bool side_break = i < nbl && i > 0 && blist[i] != blist[i - 1] + 1;
        if (n && (i == nbl || n + sz > limit || side_break)) {
            qsort(buf, n, sizeof *buf, partition_int_cmp);
            partition_add_node(P, PARTITION_DEPENDENT, ig, buf, n, NULL, 0, cap);
            n = 0;
        }
        if (i < nbl)
            for (size_t j = block_start[blist[i]]; j < block_start[blist[i] + 1]; j++)
                buf[n++] = ops_by_block[j];
    }
    free(buf);
}

/* Ops by coarse block and by final block, and the storages' coarse spans,
 * for partition_tree. */
typedef struct partition_tree_index {
    int nc, nb;              /* coarse and final blocks */
    size_t *cstart, *bstart; /* ops of coarse block c: cops[cstart[c] .. cstart[c+1]) */
    int *cops, *bops;        /* and of final block b: bops[bstart[b] .. bstart[b+1]) */
    /* first final block of each coarse block: partition_blocks numbers the
     * final blocks in coarse order, so the members of a coarse range are a
     * range of final blocks, found without a pass over all of them for each
     * independent subgraph (a graph with many has as many passes) */
    int *cblock;
    int32_t *first, *last; /* partition_spans over all ops */
} partition_tree_index;

static void partition_tree_index_init(const partition_work *w, partition_tree_index *x) {
    const graph *g = w->g;
    const partition *P = w->P;
    int nc = x->nc = w->n_coarse, nb = x->nb = P->n_blocks;
    x->cstart = xcalloc((size_t)nc + 1, sizeof *x->cstart);
    x->bstart = xcalloc((size_t)nb + 1, sizeof *x->bstart);
    x->cops = xmallocarray(g->n_ops, sizeof *x->cops);
    x->bops = xmallocarray(g->n_ops, sizeof *x->bops);
    x->cblock = xmallocarray((size_t)nc + 1, sizeof *x->cblock);
    x->first = xmallocarray(g->n_storages + 1, sizeof *x->first);
    x->last = xmallocarray(g->n_storages + 1, sizeof *x->last);
    int *coarse_of_block = xmallocarray((size_t)nb + 1, sizeof *coarse_of_block);
    for (size_t v = 0; v < g->n_ops; v++)
        x->cstart[w->coarse[v] + 1]++, x->bstart[P->block[v] + 1]++;
    for (int c = 0; c < nc; c++) x->cstart[c + 1] += x->cstart[c];
    for (int b = 0; b < nb; b++) x->bstart[b + 1] += x->bstart[b];
    size_t *cp = xcalloc((size_t)nc + 1, sizeof *cp), *bp = xcalloc((size_t)nb + 1, sizeof *bp);
    memcpy(cp, x->cstart, (size_t)nc * sizeof *cp), memcpy(bp, x->bstart, (size_t)nb * sizeof *bp);
    for (size_t v = 0; v < g->n_ops; v++) {
        x->cops[cp[w->coarse[v]]++] = (int)v;
        x->bops[bp[P->block[v]]++] = (int)v;
        coarse_of_block[P->block[v]] = w->coarse[v];
    }
    free(cp), free(bp);
    partition_spans(w, false, x->first, x->last);
    for (int c = 0, b = 0; c <= nc; c++) {
        while (b < nb && coarse_of_block[b] < c) b++;
        x->cblock[c] = b;
    }
    for (int b = 1; b < nb; b++) ROAMC_ASSERT(coarse_of_block[b - 1] <= coarse_of_block[b]);
    free(coarse_of_block);
}

static void partition_tree_index_free(partition_tree_index *x) {
    free(x->cstart), free(x->bstart), free(x->cops), free(x->bops), free(x->cblock);
    free(x->first), free(x->last);
}

/* Extends [*lo, *hi] over the coarse spans of the activations (storages
 * neither persistent nor inputs) that the ops of coarse block c touch. */
static void partition_reach(const graph *g, const partition_tree_index *x, int c, int *lo,
                            int *hi) {
    for (size_t j = x->cstart[c]; j < x->cstart[c + 1]; j++) {
        int v = x->cops[j];
        for (size_t q = g->touch_start[v]; q < g->touch_start[v + 1]; q++) {
            int s = g->touch[q];
            const graph_storage *st = &g->storages[s];
            if (st->persistent || st->has_input) continue;
            if (x->first[s] < *lo) *lo = x->first[s];
            if (x->last[s] > *hi) *hi = x->last[s];
        }
    }
}

/* One independent subgraph of Algorithm 1 as it grows: the coarse blocks
 * strictly between the outer MI blocks fo and bo (-1 and nc: none) less
 * those that the subgraphs found before cover, [prev_lo, prev_hi] (empty
 * when prev_lo > prev_hi). */
typedef struct partition_ring {
    int fo, bo;
    int prev_lo, prev_hi;
} partition_ring;

/* Moves the outer MI blocks r->fo and r->bo outwards, one MI op at a time
 * on the side that needs it, until no activation touched between them (the
 * new coarse blocks outside [prev_lo, prev_hi], covered already) reaches
 * past them. */
static void partition_widen(const graph *g, const partition_tree_index *x, partition_ring *r) {
    int lo_need = INT32_MAX, hi_need = -1, added_lo = r->prev_lo, added_hi = r->prev_hi;
    for (;;) {
        for (int c = added_lo - 1; c > r->fo; c--) partition_reach(g, x, c, &lo_need, &hi_need);
        for (int c = added_hi + 1; c < r->bo; c++) partition_reach(g, x, c, &lo_need, &hi_need);
        added_lo = r->fo + 1, added_hi = r->bo - 1;
        bool grow_f = r->fo >= 0 && lo_need < r->fo, grow_b = r->bo < x->nc && hi_need > r->bo;
        if (!grow_f && !grow_b) break;
        if (grow_f) r->fo = partition_mi_block_outer(r->fo, -1, x->nc);
        if (grow_b) r->bo = partition_mi_block_outer(r->bo, +1, x->nc);
    }
}

/* Adds the independent subgraph of ring r, the coarse blocks (fo, prev_lo)
 * and (prev_hi, bo), bounded by the MI ops of fo and bo, and its dependent
 * subgraphs when it has more than node_limit ops.  members and blist are
 * scratch (n_ops and n_blocks entries). */
static void partition_emit_independent(partition_work *w, const partition_tree_index *x,
                                       const partition_ring *r, int *members, int *blist,
                                       size_t *cap) {
    partition *P = w->P;
    int fo = r->fo, bo = r->bo, prev_lo = r->prev_lo, prev_hi = r->prev_hi;
    size_t limit = (size_t)w->opt->node_limit, n = 0, nbl = 0;
    int ranges[2][2] = {{x->cblock[fo + 1], x->cblock[prev_lo]},
                        {x->cblock[prev_hi + 1], x->cblock[bo]}};
    for (int r = 0; r < 2; r++)
        for (int b = ranges[r][0]; b < ranges[r][1]; b++) {
            blist[nbl++] = b;
            for (size_t j = x->bstart[b]; j < x->bstart[b + 1]; j++) members[n++] = x->bops[j];
        }
    if (!n) return;
    int bnd[2];
    size_t nbd = 0;
    if (fo >= 0) bnd[nbd++] = w->mi_list[partition_block_mi(fo)];
    if (bo < x->nc) bnd[nbd++] = w->mi_list[partition_block_mi(bo)];
    qsort(members, n, sizeof *members, partition_int_cmp);
    int ig = (int)P->n_nodes;
    partition_add_node(P, PARTITION_INDEPENDENT, 0, members, n, bnd, nbd, cap);
    P->n_independent++;
    if (n > limit) {
        size_t before = P->n_nodes;
        partition_split(P, ig, x->bops, x->bstart, blist, nbl, limit, cap);
        P->n_dependent += P->n_nodes - before;
        for (size_t i = before; i < P->n_nodes; i++)
            if (P->nodes[i].n_ops > P->largest_leaf) P->largest_leaf = P->nodes[i].n_ops;
    } else if (n > P->largest_leaf)
        P->largest_leaf = n;
}

/* Algorithm 1: widen from the loss outwards until no activation crosses
 * the range [fo, bo] of coarse blocks (fo, bo: the outer MI boundaries),
 * emit that independent subgraph, continue outside it. */
static void partition_tree(partition_work *w) {
    const graph *g = w->g;
    partition *P = w->P;
    size_t cap = 0;
    int *all = xmallocarray(g->n_ops, sizeof *all);
    for (size_t i = 0; i < g->n_ops; i++) all[i] = (int)i;
    partition_add_node(P, PARTITION_ROOT, -1, all, g->n_ops, NULL, 0, &cap);
    free(all);
    if (g->n_ops <= (size_t)w->opt->node_limit) {
        P->largest_leaf = g->n_ops;
        return;
    }
    partition_tree_index x;
    partition_tree_index_init(w, &x);
    int *members = xmallocarray(g->n_ops, sizeof *members);
    int *blist = xmallocarray((size_t)x.nb + 1, sizeof *blist);
    /* the outer MI blocks, the last forward and the first backward one; -1
     * and nc: none */
    int nc = x.nc;
    partition_ring r = {.fo = partition_mi_block(w->pivot - 1), .bo = partition_mi_block(w->pivot)};
    if (r.fo < -1) r.fo = -1;
    if (r.bo > nc) r.bo = nc;
    r.prev_lo = (r.fo + r.bo) / 2 + 1, r.prev_hi = r.prev_lo - 1; /* covered so far: empty */
    for (;;) {
        partition_widen(g, &x, &r);
        partition_emit_independent(w, &x, &r, members, blist, &cap);
        if (r.fo < 0 && r.bo >= nc) break;
        r.prev_lo = r.fo + 1, r.prev_hi = r.bo - 1;
        r.fo = partition_mi_block_outer(r.fo, -1, nc);
        r.bo = partition_mi_block_outer(r.bo, +1, nc);
    }
    free(members), free(blist);
    partition_tree_index_free(&x);
}

void partition_build(const graph *g, const partition_options *opt, const int *program_pos,
                     partition *P) {
    memset(P, 0, sizeof *P);
    size_t n = g->n_ops;
    P->n_ops = n;
    P->update = xcalloc(n, sizeof *P->update);
    P->mi = xcalloc(n, sizeof *P->mi);
    P->forward = xcalloc(n, sizeof *P->forward);
    P->block = xcalloc(n, sizeof *P->block);
    P->alpha = partition_alpha(g);
    partition_work w = {.g = g, .opt = opt, .P = P};
    w.topo = xmallocarray(n, sizeof *w.topo);
    w.main_topo = xmallocarray(n, sizeof *w.main_topo);
    w.mi_list = xmallocarray(n, sizeof *w.mi_list);
    w.coarse = xmallocarray(n, sizeof *w.coarse);
    w.floating = xcalloc(n, sizeof *w.floating);
    bool *mask = xcalloc(n, sizeof *mask);
    int32_t *first = xmallocarray(g->n_storages + 1, sizeof *first),
            *last = xmallocarray(g->n_storages + 1, sizeof *last);
    for (size_t v = 0; v < n; v++) w.topo[program_pos[v]] = (int)v;
    partition_find_loss(g, P);
    P->n_update = partition_find_updates(g, w.topo, P->forward, P->update);
    partition_find_floating(&w);
    P->n_floating = w.n_floating;
    for (size_t i = 0; i < n; i++)
        if (!P->update[w.topo[i]] && !w.floating[w.topo[i]]) w.main_topo[w.n_main++] = w.topo[i];
    for (size_t v = 0; v < n; v++) mask[v] = !P->update[v] && !w.floating[v];
    int k = partition_memory_insensitive(g, mask, w.main_topo, w.n_main, P->mi);
    w.k = k, w.n_coarse = 2 * k + 1;
    P->n_mi = (size_t)k, P->n_segments = (size_t)k + 1;
    partition_segments(&w);
    if (opt->reference_pos) partition_reference(&w);
    partition_place_floating(&w);
    for (size_t v = 0; v < n; v++)
        if (P->update[v]) w.coarse[v] = 0; /* placed below; spans use main ops only */
    partition_spans(&w, true, first, last);
    w.pivot = 0;
    for (int i = 0; i < w.k; i++) w.pivot += P->forward[w.mi_list[i]];
    partition_place_updates(&w, first, last);
    if (n <= (size_t)opt->node_limit)
        P->n_blocks = 1; /* the whole graph is one leaf: block 0 */
    else
        partition_blocks(&w, program_pos);
    partition_tree(&w);
    free(w.topo), free(w.main_topo), free(w.mi_list), free(w.coarse), free(w.floating),
        free(w.ref_mi_before), free(mask), free(first), free(last);
}

/* ------------------------------------------------------- layout groups */

/* Leaf index of every op (-1: in no leaf).  Leaves are numbered in node
 * order; returns how many there are. */
static int partition_leaf_of(const partition *P, int *leaf_of) {
    for (size_t v = 0; v < P->n_ops; v++) leaf_of[v] = -1;
    int n_leaves = 0;
    for (size_t i = 0; i < P->n_nodes; i++) {
        const partition_node *nd = &P->nodes[i];
        /* the root is a leaf only when the graph was not split */
        if (nd->n_children != 0 || (i == 0 && P->n_nodes > 1)) continue;
        for (size_t k = 0; k < nd->n_ops; k++) {
            ROAMC_ASSERT(nd->ops[k] >= 0 && (size_t)nd->ops[k] < P->n_ops);
            ROAMC_ASSERT(leaf_of[nd->ops[k]] == -1); /* leaves are disjoint */
            leaf_of[nd->ops[k]] = n_leaves;
        }
        n_leaves++;
    }
    return n_leaves;
}

int partition_layout_groups(const graph *g, const partition *P, const partition_schedule *sched,
                            int *group, bool *activation) {
    const int *order = sched->order;
    const int32_t *start = sched->start, *end = sched->end;
    ROAMC_ASSERT(g->n_ops == P->n_ops);
    int *leaf_of = xmallocarray(g->n_ops, sizeof *leaf_of);
    int n_leaves = partition_leaf_of(P, leaf_of);
    for (size_t s = 0; s < g->n_storages; s++) {
        bool act = false;
        if (g->storages[s].persistent) {
            group[s] = n_leaves, act = true;
        } else {
            ROAMC_ASSERT(start[s] >= 0 && start[s] <= end[s] && (size_t)end[s] < g->n_ops);
            int c = order[start[s]], f = order[end[s]];
            int lc = leaf_of[c], lf = leaf_of[f];
            bool fwd_c = P->forward[c], fwd_f = P->forward[f];
            act = fwd_c && !fwd_f;
            if (lc == lf)
                group[s] = lc; /* its whole life in one subgraph */
            else if (!fwd_c)
                group[s] = lc; /* CIFO: temporaries of the backward pass */
            else if (!fwd_f)
                group[s] = lf; /* COFI: activations, where the backward frees them */
            else
                group[s] = -1; /* forward to forward across subgraphs: a leftover */
        }
        if (activation) activation[s] = act;
    }
    free(leaf_of);
    return n_leaves + 1;
}

/* --------------------------------------------------------------- dump */

int partition_dump_tree(const partition *P, const graph *g, FILE *f, char *err, size_t errlen) {
    static const char *const kinds[] = {"root", "independent", "dependent"};
    json_t *root = json_object(), *nodes = json_array();
    for (size_t i = 0; i < P->n_nodes; i++) {
        const partition_node *nd = &P->nodes[i];
        json_t *o = json_object(), *ops = json_array(), *bnd = json_array();
        for (size_t k = 0; k < nd->n_ops; k++) json_array_append_new(ops, json_integer(nd->ops[k]));
        for (size_t k = 0; k < nd->n_boundary; k++)
            json_array_append_new(bnd, json_integer(nd->boundary[k]));
        json_object_set_new(o, "id", json_integer((json_int_t)i));
        json_object_set_new(o, "kind", json_string(kinds[nd->kind]));
        json_object_set_new(o, "parent", json_integer(nd->parent));
        json_object_set_new(o, "leaf", json_boolean(nd->n_children == 0));
        json_object_set_new(o, "operators", ops);
        /* the forward part of a pair (Fig. 8): the rest is its backward twin */
        size_t n_fwd = 0;
        for (size_t k = 0; k < nd->n_ops; k++) n_fwd += P->forward[nd->ops[k]];
        json_object_set_new(o, "forward_operators", json_integer((json_int_t)n_fwd));
        json_object_set_new(o, "boundary", bnd);
        json_array_append_new(nodes, o);
    }
    json_t *mi = json_array(), *upd = json_array();
    for (size_t v = 0; v < P->n_ops; v++) {
        if (P->mi[v]) json_array_append_new(mi, json_integer((json_int_t)v));
        if (P->update[v]) json_array_append_new(upd, json_integer((json_int_t)v));
    }
    json_object_set_new(root, "model", json_string(g->model->path ? g->model->path : ""));
    json_object_set_new(root, "operators", json_integer((json_int_t)g->n_ops));
    json_object_set_new(root, "loss_op", json_integer(P->loss_op));
    json_object_set_new(root, "memory_insensitive", mi);
    json_object_set_new(root, "update_ops", upd);
    json_object_set_new(root, "blocks", json_integer(P->n_blocks));
    json_object_set_new(root, "floating_ops", json_integer((json_int_t)P->n_floating));
    json_object_set_new(root, "alpha", json_real(P->alpha));
    json_object_set_new(root, "nodes", nodes);
    int rc = json_dumpf(root, f, JSON_COMPACT) == 0 && fputc('\n', f) != EOF ? 0 : -1;
    json_decref(root);
    if (rc) return roamc_errorf(err, errlen, "cannot write the subgraph tree");
    return 0;
}
