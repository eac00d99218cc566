/* The rank's step: the given step edited (frontend/edit.h) as shard.h
 * describes each set-up.
 *
 * Positions are indices of the given file's graph.node.  New nodes are
 * insertions before a position, applied in ascending (position, sequence)
 * with each index shifted by what was inserted before it (as fit_emit.c
 * does); then the removed optimizer nodes (zero*) go, from the highest index
 * down, each found at its index plus the insertions at or before it; then
 * the broadcasts are appended.
 */
#include "shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "edit.h"

#include "shard_internal.h"

/* ------------------------------------------------------------ metadata */

/* ------------------------------------------------------------- buckets */

static const fe_value *sh_grad(const sh_work *w, int i) {
    return &w->m->values[w->p[i].grad];
}

/* A parameter in ready order: its gradient's producer, then (one op
 * making several) reverse parameter order, as DDP's first buckets. */
typedef struct sh_ready_key {
    int producer, index;
} sh_ready_key;

static int sh_ready_cmp(const void *a, const void *b) {
    const sh_ready_key *x = a, *y = b;
    if (x->producer != y->producer) return x->producer < y->producer ? -1 : 1;
    return y->index - x->index;
}

/* Ready order, then DDP's compute_bucket_assignment_by_size over it: one
 * open bucket per element type, closed once its bytes reach its limit (the
 * first one per type 1 MiB, then bucket_mb MiB). */
static void sh_buckets(sh_work *w) {
    sh_ready_key *key = xmallocarray(w->n, sizeof *key);
    for (size_t i = 0; i < w->n; i++) /* each: as the first microbatch's become ready */
        key[i] = (sh_ready_key){
            w->each ? w->m->values[w->mb_grad[i * w->K]].producer : w->p[i].producer, (int)i};
    qsort(key, w->n, sizeof *key, sh_ready_cmp);
    w->ready = xmallocarray(w->n, sizeof *w->ready);
    for (size_t i = 0; i < w->n; i++) w->ready[i] = key[i].index;
    free(key);
    uint64_t cap = (uint64_t)(w->r->so.bucket_mb * 1024.0 * 1024.0);
    w->b = xcalloc(w->n, sizeof *w->b);
    int *open = xmallocarray(w->n, sizeof *open); /* per element type seen: its open bucket */
    int32_t *types = xmallocarray(w->n, sizeof *types);
    size_t *closed = xcalloc(w->n, sizeof *closed); /* per type: buckets closed so far */
    size_t n_types = 0;
    for (size_t k = 0; k < w->n; k++) {
        int i = w->ready[k];
        int32_t elem = sh_grad(w, i)->elem_type;
        size_t t = 0;
        while (t < n_types && types[t] != elem) t++;
        if (t == n_types) types[n_types] = elem, open[n_types++] = -1;
        if (open[t] < 0) {
            open[t] = (int)w->nb;
            w->b[w->nb++] = (sh_bucket){.elem = elem, .buffer = (int)t};
        }
        sh_bucket *B = &w->b[open[t]];
        w->p[i].bucket = open[t];
        w->p[i].offset = B->numel;
        B->numel += w->p[i].numel;
        B->bytes += w->p[i].bytes;
        B->last = i;
        uint64_t limit = closed[t] == 0 ? SHARD_FIRST_BUCKET_BYTES : cap;
        if (B->bytes >= limit) open[t] = -1, closed[t]++;
    }
    /* zero2: the buckets of one type take turns in one buffer; ddp: one each */
    bool shared = w->r->so.kind == SHARD_ZERO2;
    w->n_buffers = shared ? n_types : w->nb;
    w->buffer_numel = xcalloc(w->n_buffers ? w->n_buffers : 1, sizeof *w->buffer_numel);
    w->buffer_elem = xcalloc(w->n_buffers ? w->n_buffers : 1, sizeof *w->buffer_elem);
    for (size_t b = 0; b < w->nb; b++) {
        if (!shared) w->b[b].buffer = (int)b;
        int f = w->b[b].buffer;
        if (w->b[b].numel > w->buffer_numel[f]) w->buffer_numel[f] = w->b[b].numel;
        w->buffer_elem[f] = w->b[b].elem;
    }
    free(open);
    free(types);
    free(closed);
}

/* ZeroRedundancyOptimizer's partition: by elements, largest first (stable),
 * each to the rank with the fewest elements so far (the lowest on a tie). */
static void sh_partition(sh_work *w) {
    int *order = xmallocarray(w->n, sizeof *order);
    for (size_t i = 0; i < w->n; i++) order[i] = (int)i;
    for (size_t i = 1; i < w->n; i++) /* insertion sort: stable, descending numel */
        for (size_t j = i; j > 0 && w->p[order[j]].numel > w->p[order[j - 1]].numel; j--) {
            int t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
    size_t world = (size_t)w->r->so.world;
    uint64_t *size = xcalloc(world, sizeof *size);
    for (size_t k = 0; k < w->n; k++) {
        size_t best = 0;
        for (size_t q = 1; q < world; q++)
            if (size[q] < size[best]) best = q;
        w->p[order[k]].owner = (int)best;
        size[best] += w->p[order[k]].numel;
    }
    free(size);
    free(order);
}

/* ------------------------------------------------ gradient accumulation */

/* roamc.grad_accum K; zero2 without --no-sync and K > 1 (w->each): each
 * parameter's accumulated gradient is a chain of K - 1 in-place add_(sum
 * so far, microbatch k's own), the first microbatch's gradient innermost
 * (models/export.py's and --train's steps): w->mb_grad and w->acc_op.
 * Returns 0, or -1 with a message. */
static int sh_accumulation(sh_work *w) {
    const fe_model *m = w->m;
    if (sh_grad_accum(w, &w->K)) return -1;
    w->each = w->K > 1 && w->r->so.kind == SHARD_ZERO2 && !w->r->so.no_sync;
    if (!w->each) return 0;
    w->mb_grad = xmallocarray(w->n * w->K, sizeof *w->mb_grad);
    w->acc_op = xcalloc(w->g->n_ops ? w->g->n_ops : 1, sizeof *w->acc_op);
    for (size_t i = 0; i < w->n; i++) {
        int v = w->p[i].grad;
        for (size_t h = w->K - 1; h >= 1; h--) {
            int op = m->values[v].producer;
            const fe_node *nd = op >= 0 ? &m->nodes[op] : NULL;
            if (!nd || strcmp(nd->op_type, "add_") != 0 || nd->n_inputs < 2 || nd->inputs[0] < 0 ||
                nd->inputs[1] < 0)
                return roamc_errorf(w->err, w->errlen,
                                    "%s: --shard zero2: the accumulated gradient '%s' of '%s' "
                                    "is not one add_ per microbatch (roamc.grad_accum %zu) of "
                                    "that microbatch's own gradient: reducing each "
                                    "microbatch's gradients needs them; --no-sync reduces the "
                                    "accumulated ones once",
                                    w->r->step_name, m->values[w->p[i].grad].name,
                                    m->values[w->p[i].value].name, w->K);
            w->acc_op[op] = true;
            w->mb_grad[i * w->K + h] = nd->inputs[1];
            v = nd->inputs[0];
        }
        w->mb_grad[i * w->K] = v;
        for (size_t h = 0; h < w->K; h++) {
            int pr = m->values[w->mb_grad[i * w->K + h]].producer;
            int before = h ? m->values[w->mb_grad[i * w->K + h - 1]].producer : -1;
            if (pr < 0 || pr <= before)
                return roamc_errorf(w->err, w->errlen,
                                    "%s: --shard zero2: microbatch %zu's gradient '%s' of '%s' "
                                    "is made %s",
                                    w->r->step_name, h, m->values[w->mb_grad[i * w->K + h]].name,
                                    m->values[w->p[i].value].name,
                                    pr < 0 ? "by no node" : "before the microbatch before it's");
        }
    }
    return 0;
}

/* ------------------------------------------- the optimizer's nodes (zero*) */

/* ------------------------------------------------------------ emission */

static void sh_add_insert_mb(sh_work *w, size_t position, int kind, int index, int mb) {
    if (kind == SH_COPY_OUT) w->p[index].copy_out = position;
    if (w->n_ins == w->cap_ins) {
        w->cap_ins = w->cap_ins ? 2 * w->cap_ins : 64;
        w->ins = xreallocarray(w->ins, w->cap_ins, sizeof *w->ins);
    }
    w->ins[w->n_ins] = (sh_insert){position, w->n_ins, kind, index, mb};
    w->n_ins++;
}

static void sh_add_insert(sh_work *w, size_t position, int kind, int index) {
    sh_add_insert_mb(w, position, kind, index, 0);
}

static int sh_insert_cmp(const void *pa, const void *pb) {
    const sh_insert *x = pa, *y = pb;
    if (x->position != y->position) return x->position < y->position ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* The insertions in program order: per gradient in ready order its copy
 * into the bucket; once a bucket is full its reduction (zero2: then the
 * owned gradients copied back); ddp and zero1: every gradient copied back
 * where the backward pass ends. */
static void sh_plan_inserts(sh_work *w) {
    bool zero2 = w->r->so.kind == SHARD_ZERO2;
    for (size_t k = 0; k < w->n; k++) {
        int i = w->ready[k];
        size_t at = (size_t)w->p[i].producer + 1;
        sh_add_insert(w, at, SH_COPY_IN, i);
        int b = w->p[i].bucket;
        if (w->b[b].last != i) continue;
        sh_add_insert(w, at, SH_REDUCE, b);
        if (!zero2) continue;
        for (size_t j = 0; j < w->n; j++)
            if (w->p[w->ready[j]].bucket == b && w->p[w->ready[j]].owner == w->r->so.rank)
                sh_add_insert(w, at, SH_COPY_OUT, w->ready[j]);
    }
    if (!zero2)
        for (size_t k = 0; k < w->n; k++) sh_add_insert(w, w->opt_start, SH_COPY_OUT, w->ready[k]);
    qsort(w->ins, w->n_ins, sizeof *w->ins, sh_insert_cmp);
}

/* zero2, each microbatch's gradients reduced (w->each): per microbatch,
 * per bucket, its gradients copied in as they become ready (never before
 * the buffer's previous bucket is reduced: the buckets take turns in it),
 * the reduction after the last, then the owned ones copied back (the
 * first microbatch) or added into the accumulated gradient (the others). */
static void sh_plan_inserts_each(sh_work *w) {
    size_t *free_at = xcalloc(w->n_buffers ? w->n_buffers : 1, sizeof *free_at);
    for (size_t k = 0; k < w->K; k++)
        for (size_t b = 0; b < w->nb; b++) {
            int f = w->b[b].buffer;
            size_t red = free_at[f];
            for (size_t j = 0; j < w->n; j++) {
                int i = w->ready[j];
                if (w->p[i].bucket != (int)b) continue;
                size_t at = (size_t)w->m->values[w->mb_grad[(size_t)i * w->K + k]].producer + 1;
                if (at < free_at[f]) at = free_at[f];
                sh_add_insert_mb(w, at, SH_COPY_IN, i, (int)k);
                if (at > red) red = at;
            }
            sh_add_insert_mb(w, red, SH_REDUCE, (int)b, (int)k);
            for (size_t j = 0; j < w->n; j++)
                if (w->p[w->ready[j]].bucket == (int)b && w->p[w->ready[j]].owner == w->r->so.rank)
                    sh_add_insert_mb(w, red, SH_COPY_OUT, w->ready[j], (int)k);
            free_at[f] = red;
        }
    free(free_at);
    qsort(w->ins, w->n_ins, sizeof *w->ins, sh_insert_cmp);
}

/* The accumulated gradient of parameter i once microbatch k's is in it
 * (w->each): "G.reduced", G microbatch k's own gradient. */
static void sh_acc_name(const sh_work *w, int i, size_t k, char *buf, size_t len) {
    snprintf(buf, len, "%s.reduced", w->m->values[w->mb_grad[(size_t)i * w->K + k]].name);
}

static void sh_buffer_name(const sh_work *w, int buffer, char *buf, size_t len) {
    (void)w;
    snprintf(buf, len, "roamc.bucket%d", buffer);
}

/* div_ of the bucket's buffer by the world size, then the collective in
 * place (AllReduce; zero2: ReduceScatter).  Inserts 2 nodes at `at`;
 * *last gets the collective's output name. */
static int sh_emit_reduce(sh_work *w, fe_edit *e, size_t at, const sh_insert *in, const char *now,
                          char *last, size_t lastlen) {
    char *err = w->err;
    size_t errlen = w->errlen;
    char buffer[64], div[SH_NAME], mb[32] = "";
    int b = in->index;
    bool zero2 = w->r->so.kind == SHARD_ZERO2;
    if (in->mb > 0) snprintf(mb, sizeof mb, ".mb%d", in->mb); /* the bucket's k-th reduction */
    sh_buffer_name(w, w->b[b].buffer, buffer, sizeof buffer);
    snprintf(div, sizeof div, "%s.div%d%s", buffer, b, mb);
    snprintf(last, lastlen, "%s.%s%d%s", buffer, zero2 ? "reduce_scatter" : "all_reduce", b, mb);
    /* overload: the ATen call a runner replays (models/run_plan.py), as
     * models/export.py records bucket.div_(world) */
    fe_attr_spec da[] = {{.name = "other", .type = FE_ATTR_FLOAT, .f = (float)w->r->so.world},
                         SH_VIEW_ATTRS(1),
                         {.name = "overload", .type = FE_ATTR_STRING, .s = "Tensor"}};
    fe_attr_spec ra[] = {{.name = "world", .type = FE_ATTR_INT, .i = w->r->so.world},
                         {.name = "rank", .type = FE_ATTR_INT, .i = w->r->so.rank},
                         SH_VIEW_ATTRS(1)};
    sh_node dn = {"org.pytorch.aten", "div_", {now}, 1, div, da, 4};
    sh_node rn = {GRAPH_ROAMC_DOMAIN, zero2 ? "ReduceScatter" : "AllReduce", {div}, 1, last, ra, 4};
    if (sh_put(e, at, &dn, err, errlen) || sh_put(e, at + 1, &rn, err, errlen)) return -1;
    int64_t dims[1] = {(int64_t)w->buffer_numel[w->b[b].buffer]};
    if (sh_value_info(e, div, w->b[b].elem, &(sh_dims){NULL, dims, 1}, err, errlen)) return -1;
    return sh_value_info(e, last, w->b[b].elem, &(sh_dims){NULL, dims, 1}, err, errlen);
}

/* The insertions, in order: each lands at its position plus what was
 * inserted before it (shift[j]: the nodes inserted before original node j).
 * A buffer is read by its latest name: an in-place write consumes the
 * name it writes, so later readers read the write's output. */
static int sh_apply_inserts(sh_work *w, fe_edit *e, size_t *shift) {
    size_t added = 0, k = 0;
    char *reduced = xcalloc(w->nb ? w->nb : 1, SH_NAME); /* per bucket: its collective's output */
    char *cur = xcalloc(w->n_buffers ? w->n_buffers : 1, SH_NAME); /* per buffer: its name now */
    for (size_t f = 0; f < w->n_buffers; f++) sh_buffer_name(w, (int)f, cur + f * SH_NAME, SH_NAME);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < w->n_ins; i++) {
        const sh_insert *in = &w->ins[i];
        for (; k < in->position && k < w->g->n_ops; k++) shift[k] = added;
        size_t at = in->position + added;
        int b = in->kind == SH_REDUCE ? in->index : w->p[in->index].bucket;
        char *now = cur + (size_t)w->b[b].buffer * SH_NAME;
        if (in->kind == SH_REDUCE) {
            rc = sh_emit_reduce(w, e, at, in, now, reduced + (size_t)b * SH_NAME, SH_NAME);
            if (rc == 0) memcpy(now, reduced + (size_t)b * SH_NAME, SH_NAME);
        } else if (w->each) { /* microbatch in->mb's own gradient in; back: into the sum */
            int i = in->index;
            char acc[SH_NAME];
            bool copy_in = in->kind == SH_COPY_IN;
            sh_copy c = {.param = i,
                         .value = w->mb_grad[(size_t)i * w->K + (size_t)in->mb],
                         .in = copy_in,
                         .buffer = copy_in ? now : reduced + (size_t)b * SH_NAME};
            if (!c.in && in->mb > 0) {
                sh_acc_name(w, i, (size_t)in->mb - 1, acc, sizeof acc);
                c.dst = acc, c.add = true;
            }
            rc = sh_emit_copy_of(w, e, at, &c);
        } else {
            bool copy_in = in->kind == SH_COPY_IN;
            rc = sh_emit_copy(w, e, at, in->index, copy_in,
                              copy_in ? now : reduced + (size_t)b * SH_NAME);
        }
        added += 2;
    }
    for (; k < w->g->n_ops; k++) shift[k] = added;
    free(reduced);
    free(cur);
    return rc;
}

/* The original nodes from a gradient's copy back on read what the copy
 * wrote ("g.reduced"): the copy consumed the name "g". */
static int sh_rewire(sh_work *w, fe_edit *e, const size_t *shift, char *err, size_t errlen) {
    const fe_model *m = w->m;
    int *param_of = sh_param_of_grad(w);
    int rc = 0;
    for (size_t op = 0; rc == 0 && op < w->g->n_ops; op++) {
        const fe_node *nd = &m->nodes[op];
        for (size_t s = 0; rc == 0 && s < nd->n_inputs; s++) {
            int i = nd->inputs[s] >= 0 ? param_of[nd->inputs[s]] : -1;
            if (i < 0 || w->p[i].copy_out == SIZE_MAX || op < w->p[i].copy_out) continue;
            char name[SH_NAME];
            snprintf(name, sizeof name, "%s.reduced", m->values[w->p[i].grad].name);
            rc = fe_edit_replace_input(e, op + shift[op], s, name, err, errlen);
        }
    }
    free(param_of);
    return rc;
}

/* w->each: the optimizer reads the owned gradients' sums (the others'
 * update nodes go); nothing else may read the whole gradients' sums.
 * Before sh_remove_updates (indices as shift[] says). */
static int sh_rewire_each(sh_work *w, fe_edit *e, const size_t *shift) {
    const fe_model *m = w->m;
    int *param_of = sh_param_of_grad(w);
    int rc = 0;
    for (size_t op = 0; rc == 0 && op < w->g->n_ops; op++) {
        bool goes = op > w->last_grad && w->op_tag[op] >= 0 &&
                    w->p[w->op_tag[op]].owner != w->r->so.rank; /* sh_remove_updates */
        if (w->acc_op[op] || goes) continue;
        const fe_node *nd = &m->nodes[op];
        for (size_t s = 0; rc == 0 && s < nd->n_inputs; s++) {
            int v = nd->inputs[s];
            if (v < 0 || m->values[v].producer < 0 || !w->acc_op[m->values[v].producer]) continue;
            int i = param_of[v];
            if (i < 0 || op <= w->last_grad || w->p[i].owner != w->r->so.rank) {
                rc = roamc_errorf(w->err, w->errlen,
                                  "%s: --shard zero2: node #%zu (%s) reads '%s', a whole "
                                  "gradient accumulated over microbatches, which the rank does "
                                  "not keep when each microbatch's gradients are reduced; "
                                  "--no-sync keeps them",
                                  w->r->step_name, op, nd->op_type, m->values[v].name);
                break;
            }
            char acc[SH_NAME];
            sh_acc_name(w, i, w->K - 1, acc, sizeof acc);
            rc = fe_edit_replace_input(e, op + shift[op], s, acc, w->err, w->errlen);
        }
    }
    free(param_of);
    return rc;
}

/* w->each: the add_ nodes that summed the whole gradients go.  After
 * sh_remove_updates (later nodes, removed from the highest index down). */
static int sh_drop_accumulation(sh_work *w, fe_edit *e, const size_t *shift) {
    const fe_model *m = w->m;
    int rc = 0;
    for (size_t op = w->g->n_ops; rc == 0 && op-- > 0;) {
        if (!w->acc_op[op]) continue;
        rc = fe_edit_remove_node(e, op + shift[op], w->err, w->errlen);
        for (size_t k = 0; rc == 0 && k < m->nodes[op].n_outputs; k++)
            if (m->nodes[op].outputs[k] >= 0)
                fe_edit_remove_value(e, m->values[m->nodes[op].outputs[k]].name);
    }
    return rc;
}

/* zero*: the other ranks' update ops go (with their state inputs and the
 * graph outputs they made); roamc.optimizer_state narrows to the rank's. */
static int sh_remove_updates(sh_work *w, fe_edit *e, const size_t *shift, char *err,
                             size_t errlen) {
    const fe_model *m = w->m;
    for (size_t op = w->g->n_ops; op-- > w->last_grad + 1;) {
        int t = w->op_tag[op];
        if (t < 0 || w->p[t].owner == w->r->so.rank) continue;
        w->removed[op] = true;
        if (fe_edit_remove_node(e, op + shift[op], err, errlen)) return -1;
        for (size_t k = 0; k < m->nodes[op].n_outputs; k++)
            if (m->nodes[op].outputs[k] >= 0)
                fe_edit_remove_value(e, m->values[m->nodes[op].outputs[k]].name);
    }
    bool *keep = xcalloc(w->n_states ? w->n_states : 1, sizeof *keep);
    for (size_t k = 0; k < w->n_states; k++) {
        keep[k] = w->state_of[k] < 0 || w->p[w->state_of[k]].owner == w->r->so.rank;
        if (!keep[k]) fe_edit_remove_value(e, m->values[w->states[k]].name);
    }
    char *s = sh_join(m, w->states, w->n_states, keep);
    fe_edit_set_meta(e, "roamc.optimizer_state", s);
    free(s);
    free(keep);
    return 0;
}

/* zero*: every parameter broadcast in place from its owner, by rank, each
 * rank's in partition order (ZeroRedundancyOptimizer._sync_params). */
static int sh_broadcasts(sh_work *w, fe_edit *e, char *err, size_t errlen) {
    for (long q = 0; q < w->r->so.world; q++)
        for (size_t i = 0; i < w->n; i++) {
            const sh_param *P = &w->p[i];
            if (P->owner != q) continue;
            const fe_value *pv = &w->m->values[P->value];
            const char *src = pv->name;
            if (q == w->r->so.rank && P->last_update >= 0) {
                const fe_node *nd = &w->m->nodes[P->last_update];
                for (size_t k = 0; k < nd->n_outputs; k++)
                    if (nd->outputs[k] >= 0 &&
                        w->g->storage_of[nd->outputs[k]] == w->g->storage_of[P->value])
                        src = w->m->values[nd->outputs[k]].name;
            }
            char out[SH_NAME];
            snprintf(out, sizeof out, "%s.broadcast", pv->name);
            fe_attr_spec ba[] = {{.name = "root", .type = FE_ATTR_INT, .i = q},
                                 {.name = "world", .type = FE_ATTR_INT, .i = w->r->so.world},
                                 SH_VIEW_ATTRS(1)};
            sh_node bn = {GRAPH_ROAMC_DOMAIN, "Broadcast", {src}, 1, out, ba, 4};
            if (sh_put(e, fe_edit_node_count(e), &bn, err, errlen)) return -1;
            if (sh_value_info(e, out, pv->elem_type, &(sh_dims){pv, NULL, 0}, err, errlen))
                return -1;
        }
    return 0;
}

/* The buffers as graph inputs, and the metadata that says what was done. */
static int sh_declare(sh_work *w, fe_edit *e, char *err, size_t errlen) {
    const shard_options *so = &w->r->so;
    size_t len = 1;
    char name[SH_NAME];
    for (size_t f = 0; f < w->n_buffers; f++) len += strlen("roamc.bucket") + 24;
    char *comm = xcalloc(len, 1), *c = comm;
    for (size_t f = 0; f < w->n_buffers; f++) {
        sh_buffer_name(w, (int)f, name, sizeof name);
        int64_t dims[1] = {(int64_t)w->buffer_numel[f]};
        fe_value_spec v = {name, w->buffer_elem[f], 1, dims};
        if (fe_edit_set_input(e, &v, err, errlen)) {
            free(comm);
            return -1;
        }
        c += sprintf(c, "%s%s", f ? "," : "", name);
    }
    fe_edit_set_meta(e, "roamc.communication", comm);
    free(comm);
    char setup[256];
    snprintf(setup, sizeof setup, "%s world=%ld rank=%ld bucket_mb=%g", shard_kind_name(so->kind),
             so->world, so->rank, so->bucket_mb);
    if (w->K > 1 && so->kind == SHARD_ZERO2)
        snprintf(setup + strlen(setup), sizeof setup - strlen(setup), " grad_accum=%zu %s", w->K,
                 w->each ? "per_microbatch" : "no_sync");
    fe_edit_set_meta(e, "roamc.shard", setup);
    if (!w->zero) return 0;
    int *pv = xmallocarray(w->n, sizeof *pv), *gv = xmallocarray(w->n, sizeof *gv);
    bool *mine = xcalloc(w->n, sizeof *mine);
    for (size_t i = 0; i < w->n; i++) {
        pv[i] = w->p[i].value, gv[i] = w->p[i].grad;
        mine[i] = w->p[i].owner == so->rank;
    }
    char *s = sh_join(w->m, pv, w->n, mine);
    fe_edit_set_meta(e, "roamc.owned", s);
    free(s);
    if (so->kind == SHARD_ZERO2 && w->each) { /* the owned gradients' sums */
        char *list = xcalloc(1, 1), acc[SH_NAME];
        for (size_t i = 0; i < w->n; i++) {
            if (!mine[i]) continue;
            sh_acc_name(w, (int)i, w->K - 1, acc, sizeof acc);
            size_t at = strlen(list);
            list = xreallocarray(list, at + strlen(acc) + 2, 1);
            sprintf(list + at, "%s%s", at ? "," : "", acc);
        }
        fe_edit_set_meta(e, "roamc.gradients", list);
        free(list);
    } else if (so->kind == SHARD_ZERO2) {
        s = sh_join(w->m, gv, w->n, mine);
        fe_edit_set_meta(e, "roamc.gradients", s);
        free(s);
        if (w->K > 1) { /* no_sync: every whole gradient kept over the microbatches */
            s = sh_join(w->m, gv, w->n, NULL);
            fe_edit_set_meta(e, "roamc.accumulated_gradients", s);
            free(s);
        }
    }
    free(pv);
    free(gv);
    free(mine);
    return 0;
}

int shard_emit(const shard_request *r, uint8_t **bytes, size_t *len, shard_outcome *o, char *err,
               size_t errlen) {
    sh_work w = {.r = r,
                 .g = r->g,
                 .m = r->g->model,
                 .zero = r->so.kind >= SHARD_ZERO1 && r->so.kind <= SHARD_FSDP,
                 .err = err,
                 .errlen = errlen};
    *bytes = NULL, *len = 0;
    size_t n_ops = r->g->n_ops;
    w.op_tag = xmallocarray(n_ops ? n_ops : 1, sizeof *w.op_tag);
    w.removed = xcalloc(n_ops ? n_ops : 1, sizeof *w.removed);
    for (size_t op = 0; op < n_ops; op++) w.op_tag[op] = -1;
    fe_edit *e = NULL;
    size_t *shift = xcalloc(n_ops ? n_ops : 1, sizeof *shift);
    int rc = shard_check(&r->so, err, errlen);
    if (rc == 0) rc = sh_params(&w);
    if (rc == 0) rc = sh_states(&w);
    if (rc == 0 && r->so.kind == SHARD_ZERO2) rc = sh_accumulation(&w);
    bool gathered = r->so.kind == SHARD_ZERO3 || r->so.kind == SHARD_FSDP;
    if (rc == 0 && gathered) {
        sh_passes(&w);
        rc = sh_tag_updates(&w);
        if (rc == 0) rc = shard_emit_gathered(&w, bytes, len, o);
        free(shift);
        sh_work_free(&w);
        return rc;
    }
    if (rc == 0) {
        sh_passes(&w);
        if (w.zero) sh_partition(&w);
        sh_buckets(&w);
        if (w.zero) rc = sh_tag_updates(&w);
    }
    if (rc == 0) {
        if (w.each)
            sh_plan_inserts_each(&w);
        else
            sh_plan_inserts(&w);
        rc = fe_edit_open_bytes(r->step_name, r->step_bytes, r->step_len, &e, err, errlen);
    }
    if (rc == 0) rc = sh_apply_inserts(&w, e, shift);
    if (rc == 0) rc = w.each ? sh_rewire_each(&w, e, shift) : sh_rewire(&w, e, shift, err, errlen);
    if (rc == 0 && w.zero) rc = sh_remove_updates(&w, e, shift, err, errlen);
    if (rc == 0 && w.each) rc = sh_drop_accumulation(&w, e, shift);
    if (rc == 0 && w.zero) rc = sh_broadcasts(&w, e, err, errlen);
    if (rc == 0) rc = sh_declare(&w, e, err, errlen);
    if (rc == 0) fe_edit_bytes(e, bytes, len);
    if (rc == 0 && o) {
        o->n_params = w.n, o->n_buckets = w.nb;
        for (size_t i = 0; i < w.n; i++) {
            o->param_bytes += w.p[i].bytes;
            if (!w.zero || w.p[i].owner == r->so.rank) o->n_owned++, o->owned_bytes += w.p[i].bytes;
        }
        for (size_t f = 0; f < w.n_buffers; f++)
            o->bucket_bytes += w.buffer_numel[f] * fe_elem_bits(w.buffer_elem[f]) / 8;
        for (size_t op = 0; op < n_ops; op++) o->n_removed += w.removed[op];
    }
    fe_edit_free(e);
    free(shift);
    sh_work_free(&w);
    return rc;
}
