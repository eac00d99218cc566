/* frontend/train/train_graph.c — the derived step's building blocks, below
 * the graph surgery (train.c), the gradient rules (train_rules.c) and the
 * writer (train_emit.c), which all build with them: errors, the name table,
 * new values, new nodes, gradients handed to the values they belong to,
 * the names of the loss and optimizer choices, and the file's scalar
 * constants (tr_const_scalar).  Calls go from those three files (and
 * train_export.c) down to this one, never back. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "proto.h"
#include "train_internal.h"

int tr_fail(tr *T, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fe_verrorf(T->err, T->errlen, T->path, "--train", fmt, ap);
    va_end(ap);
    return -1;
}

const char *tr_node_label(const tr *T, int ni) {
    const fe_node *n = &T->f->nodes[ni];
    return n->name[0] ? n->name : n->op_type;
}

/* ------------------------------------------------------------ name table */

bool tr_name_used(const tr *T, const char *name) {
    return fi_names_get(&T->names, name) >= 0;
}

/* ---------------------------------------------------------------- values */

static void tr_grow_values(tr *T) {
    if (T->nv < T->cap_v) return;
    size_t cap = T->cap_v ? 2 * T->cap_v : 1024;
    T->v = xreallocarray(T->v, cap, sizeof *T->v);
    T->grad = xreallocarray(T->grad, cap, sizeof *T->grad);
    T->shared = xreallocarray(T->shared, cap, sizeof *T->shared);
    T->cap_v = cap;
}

/* Adds a value named name (made unique with a suffix when taken); returns
 * its index (never fails). */
int tr_add_value(tr *T, const char *name, int32_t elem, int rank, const int64_t *dims) {
    tr_grow_values(T);
    size_t len = strlen(name);
    char *nm = xmalloc(len + 24);
    memcpy(nm, name, len + 1);
    for (unsigned k = 1; tr_name_used(T, nm); k++) snprintf(nm + len, 24, "_%u", k);
    tr_value *v = &T->v[T->nv];
    v->name = nm;
    v->elem = elem;
    v->rank = rank;
    v->tensor = true;
    v->dims = xmallocarray(rank > 0 ? (size_t)rank : 0, sizeof *v->dims);
    if (rank > 0) memcpy(v->dims, dims, (size_t)rank * sizeof *dims);
    T->grad[T->nv] = -1;
    T->shared[T->nv] = false;
    fi_names_put(&T->names, nm, (int)T->nv);
    return (int)T->nv++;
}

/* A new value named after op, shaped like value `like` with element type elem (0: like's). */
int tr_new_like(tr *T, const char *op, int like, int32_t elem) {
    char name[96];
    snprintf(name, sizeof name, "%s_%u", op, T->serial++);
    /* `like` may move when the table grows: copy what is needed first */
    int rank = T->v[like].rank;
    int64_t dims[FI_MAX_RANK];
    memcpy(dims, T->v[like].dims, (size_t)(rank > 0 ? rank : 0) * sizeof *dims);
    return tr_add_value(T, name, elem ? elem : T->v[like].elem, rank, dims);
}

int tr_new_shape(tr *T, const char *op, int32_t elem, int rank, const int64_t *dims) {
    char name[96];
    snprintf(name, sizeof name, "%s_%u", op, T->serial++);
    return tr_add_value(T, name, elem, rank, dims);
}

static bool tr_same_shape(const tr *T, int a, int b) {
    if (T->v[a].rank != T->v[b].rank) return false;
    for (int d = 0; d < T->v[a].rank; d++)
        if (T->v[a].dims[d] != T->v[b].dims[d]) return false;
    return true;
}

int64_t tr_numel(const tr *T, int v) {
    int64_t n = 1;
    for (int d = 0; d < T->v[v].rank; d++) n *= T->v[v].dims[d];
    return n;
}

int64_t tr_bytes(const tr *T, int v) {
    return (int64_t)((tr_numel(T, v) * (int64_t)fe_elem_bits(T->v[v].elem) + 7) / 8);
}

bool tr_float(int32_t e) {
    return fi_is_float_type(e);
}

/* ----------------------------------------------------------------- nodes */

/* (train_internal.h) Appends a node.  in/out end at TR_VALUES_END; alias NULL: no output
 * aliases; otherwise one entry per output. */
void tr_emit(tr *T, const char *op, const int *in, const int *out, const int *alias, int inplace) {
    if (T->nn == T->cap_n) {
        size_t cap = T->cap_n ? 2 * T->cap_n : 1024;
        T->n = xreallocarray(T->n, cap, sizeof *T->n);
        T->cap_n = cap;
    }
    size_t ni = 0, no = 0;
    while (in[ni] != TR_VALUES_END) ni++;
    while (out[no] != TR_VALUES_END) no++;
    /* every value a derived node names exists (-1: omitted) */
    for (size_t k = 0; k < ni; k++) ROAMC_ASSERT(in[k] >= -1 && in[k] < (int)T->nv);
    for (size_t k = 0; k < no; k++) ROAMC_ASSERT(out[k] >= -1 && out[k] < (int)T->nv);
    tr_node *n = &T->n[T->nn];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->in = xmallocarray(ni, sizeof *n->in);
    n->out = xmallocarray(no, sizeof *n->out);
    n->alias = xmallocarray(no, sizeof *n->alias);
    memcpy(n->in, in, ni * sizeof *in);
    memcpy(n->out, out, no * sizeof *out);
    if (T->map) { /* --grad-accum: a forward value means its copy in this microbatch */
        for (size_t k = 0; k < ni; k++)
            if (n->in[k] >= 0 && (size_t)n->in[k] < T->n_fwd_values) n->in[k] = T->map[n->in[k]];
        for (size_t k = 0; k < no; k++)
            if (n->out[k] >= 0 && (size_t)n->out[k] < T->n_fwd_values)
                n->out[k] = T->map[n->out[k]];
    }
    for (size_t k = 0; k < no; k++) n->alias[k] = alias ? alias[k] : -1;
    n->n_in = ni;
    n->n_out = no;
    n->inplace = inplace;
    T->nn++;
}

/* One new output shaped like `like`; returns it. */
int tr_op(tr *T, const char *op, int like, int32_t elem, const int *in) {
    int o = tr_new_like(T, op, like, elem);
    tr_emit(T, op, in, TR_VALUES(o), NULL, 0);
    return o;
}

/* A view of src (shares its storage), shaped like `like`. */
int tr_view(tr *T, const char *op, int src, int like) {
    int o = tr_new_like(T, op, like, T->v[src].elem);
    tr_emit(T, op, TR_VALUES(src), TR_VALUES(o), (const int[]){0}, 0);
    return o;
}

/* An in-place update of in[0]: the new version of its storage. */
int tr_inplace(tr *T, const char *op, const int *in) {
    int o = tr_new_like(T, op, in[0], 0);
    tr_emit(T, op, in, TR_VALUES(o), (const int[]){0}, 1);
    return o;
}

/* -------------------------------------------------------------- gradients */

/* Adds g to the gradient of forward value x.  A g shaped by broadcasting is
 * first summed to x's shape (the engine's sum_to in validate_outputs).  A
 * second contribution is summed out of place, as torch 1.13's InputBuffer
 * does (models/export.py traces show `add`, never `add_`, there).
 * shared: g is also another slot's gradient (a pass-through of Add). */
int tr_give(tr *T, int x, int g, bool shared) {
    if (g < 0) return -1;
    if (!tr_same_shape(T, x, g)) {
        g = tr_op(T, "sum", x, T->v[g].elem, TR_VALUES(g));
        if (g < 0) return -1;
        shared = false;
    }
    if (T->v[g].elem != T->v[x].elem && tr_float(T->v[g].elem) && tr_float(T->v[x].elem)) {
        /* the engine casts a gradient to its input's dtype (validate_outputs): a mixed-type
         * op of --precision amp-* (an fp32 sum of a half operand) */
        g = tr_op(T, "_to_copy", x, 0, TR_VALUES(g));
        shared = false;
    }
    if (T->grad[x] < 0) {
        T->grad[x] = g;
        T->shared[x] = shared;
        return 0;
    }
    int s = tr_op(T, "add", x, 0, TR_VALUES(T->grad[x], g));
    if (s < 0) return -1;
    T->grad[x] = s;
    T->shared[x] = false;
    return 0;
}

/* Parameter p's gradient of this microbatch, now complete, into its .grad: AccumulateGrad
 * steals it (a copy when another slot holds it too) the first time and adds it in place
 * (add_) after, when its node runs: as soon as the gradient is ready (the engine runs
 * AccumulateGrad nodes first). */
void tr_accumulate(tr *T, int p) {
    int g = T->grad[p];
    if (g < 0 || T->acc_mb[p] == T->mb) return;
    T->acc_mb[p] = T->mb;
    if (T->acc[p] < 0) {
        T->acc[p] = T->shared[p] ? tr_op(T, "clone", p, 0, TR_VALUES(g)) : g;
        return;
    }
    T->acc[p] = tr_inplace(T, "add_", TR_VALUES(T->acc[p], g));
}

/* (train_internal.h) */
void tr_accumulate_at(tr *T, int ni) {
    if (T->accum <= 1) return;
    const fe_node *n = &T->f->nodes[ni];
    for (size_t k = 0; k < n->n_explicit_inputs; k++) {
        int x = n->inputs[k];
        if (x >= 0 && T->param[x] && T->first_reader[x] == ni) tr_accumulate(T, x);
    }
}

const char *tr_loss_name(int k) {
    switch (k) {
    case FE_LOSS_CROSS_ENTROPY: return "cross-entropy";
    case FE_LOSS_MSE: return "mse";
    case FE_LOSS_NONE: return "none";
    default: return "auto";
    }
}

const char *tr_optimizer_name(int k) {
    switch (k) {
    case FE_OPT_ADAM: return "adam";
    case FE_OPT_ADAMW: return "adamw";
    case FE_OPT_SGD: return "sgd";
    case FE_OPT_MOMENTUM: return "momentum";
    default: return "none";
    }
}

/* (train_internal.h) A constant's element 0: an initializer's data or a Constant node's
 * value, read from the proto (the fe_model keeps no data). */
bool tr_const_scalar(const tr *T, int v, double *out) {
    if (v < 0 || !T->mp || !T->mp->graph) return false;
    const Onnx__GraphProto *g = T->mp->graph;
    const Onnx__TensorProto *tp = NULL;
    const char *name = T->f->values[v].name;
    int p = T->f->values[v].producer;
    if (p >= 0) {
        const Onnx__NodeProto *np = g->node[p];
        if (!np->op_type || strcmp(np->op_type, "Constant") || (np->domain && np->domain[0]))
            return false;
        for (size_t a = 0; a < np->n_attribute; a++) {
            const Onnx__AttributeProto *at = np->attribute[a];
            if (!at->name) continue;
            if (!strcmp(at->name, "value") && at->t) tp = at->t;
            if (!strcmp(at->name, "value_float")) return *out = at->f, true;
            if (!strcmp(at->name, "value_int")) return *out = (double)at->i, true;
        }
    } else {
        for (size_t k = 0; k < g->n_initializer && !tp; k++)
            if (g->initializer[k]->name && !strcmp(g->initializer[k]->name, name))
                tp = g->initializer[k];
    }
    if (!tp) return false;
    if (tp->has_raw_data) {
        const uint8_t *d = tp->raw_data.data;
        size_t len = tp->raw_data.len;
        if (tp->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && len >= 4) {
            float f;
            memcpy(&f, d, 4);
            return *out = f, true;
        }
        if (tp->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE && len >= 8)
            return memcpy(out, d, 8), true;
        if ((tp->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16 ||
             tp->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16) &&
            len >= 2) /* --precision bf16 / fp16 converted the file's constants */
            return *out = tr_half_value(tp->data_type, (uint16_t)(d[0] | d[1] << 8)), true;
        if ((tp->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL ||
             tp->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__UINT8) &&
            len >= 1)
            return *out = d[0], true;
        return false;
    }
    if (tp->n_float_data) return *out = tp->float_data[0], true;
    if (tp->n_double_data) return *out = tp->double_data[0], true;
    if (tp->n_int32_data) return *out = tp->int32_data[0], true; /* bool, uint8, int32 */
    if (tp->n_int64_data) return *out = (double)tp->int64_data[0], true;
    return false;
}
