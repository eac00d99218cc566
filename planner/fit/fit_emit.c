/* The changed step: the first n actions of a fit_choice written into the
 * unchanged step's ONNX (frontend/edit.h), as DESIGN.md "A step that fits"
 * spells them.
 *
 *   recompute  the action's forward ops cloned (STRING attribute
 *              roamc_recompute naming the forward output each recomputes),
 *              in schedule order, as one block just before the first node
 *              (in file order) that reads the dropped storage in backward;
 *              the clones' outputs get fresh names ("x" -> "x.rc3" for
 *              action 3);
 *   offload    ai.roamc Offload(x) -> "x.host" just after the last forward
 *              node touching the storage, Reload("x.host") -> "x.rl" just
 *              before its first backward reader.
 *
 * Every backward reader of a dropped storage then reads the new names.  A
 * clone of an earlier action may read a storage a later action drops (it
 * was live there when the earlier action was chosen): the later action's
 * block goes before it, and the clone reads the later action's names.
 *
 * Positions are indices of the unchanged file's graph.node; insertions
 * are applied in ascending (position, order) with each index shifted by
 * what was inserted before it, so the clone of node q is found at q plus
 * the insertions at or before q.
 */
#include "fit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "edit.h"

/* One node to insert. */
typedef struct emit_insert {
    size_t position; /* before node `position` of the unchanged file */
    size_t key;      /* order among insertions at one position (ascending) */
    int action;      /* index into the choice */
    int op;          /* recompute: the forward op to clone; -1: Offload or Reload */
    int reload;      /* 1: the Reload, 0: the Offload */
    int scratch;     /* >= 0: not the clone but the scratch of its input slot `scratch` */
} emit_insert;

typedef struct emit_work {
    const graph *g;
    const fit_choice *c;
    size_t n;            /* actions taken */
    int *dropped_by;     /* per storage: the action that drops it, -1 */
    size_t *block_at;    /* per action: position of its clones / Reload */
    const bool *forward; /* per op */
} emit_work;

#define EMIT_NAME 1024

/* The name a tensor of a dropped storage has after action a: "x.rc3",
 * "x.rl3" (the Reload), "x.host3" (the Offload's output), into buf. */
static const char *emit_name(const emit_work *w, int t, int a, const char *what, char *buf,
                             size_t len) {
    snprintf(buf, len, "%s.%s%d", w->g->model->values[t].name, what, a);
    return buf;
}

/* Whether action A clones the op that makes tensor t. */
static bool emit_made_by(const emit_work *w, const fit_action *A, int t) {
    int op = w->g->model->values[t].producer;
    for (size_t i = 0; op >= 0 && i < A->n_ops; i++)
        if (A->ops[i] == op) return true;
    return false;
}

/* What tensor t is called where it is read by a clone of action self
 * (NULL: by a node of the unchanged step, after the blocks): self's own
 * clone of it, the name the action dropping its storage gave it, or its
 * own name.  Example: "h" dropped by action 2 (recompute) reads "h.rc2". */
static const char *emit_read_name(const emit_work *w, int t, const fit_action *self, int self_index,
                                  char *buf, size_t len) {
    if (self && emit_made_by(w, self, t)) return emit_name(w, t, self_index, "rc", buf, len);
    int a = w->dropped_by[w->g->storage_of[t]];
    if (a < 0) return w->g->model->values[t].name;
    return emit_name(w, t, a, w->c->actions[a].kind == FIT_OFFLOAD ? "rl" : "rc", buf, len);
}

/* Whether the clone of nd for action A needs a scratch for input slot i:
 * the op writes that input in place (an output aliases it) and the input is
 * not one the block makes, so the clone would write into a storage outside
 * the recompute, e.g. a training-mode batch norm's running statistics, which
 * a recompute must not update twice.  The clone then writes into a fresh
 * `empty` of the same type and shape: in training mode the op's wanted
 * outputs do not read what it updates, so they come out bit for bit the
 * same. */
static bool emit_needs_scratch(const emit_work *w, const fit_action *A, const fe_node *nd,
                               size_t i) {
    if (!nd->inplace || nd->inputs[i] < 0 || emit_made_by(w, A, nd->inputs[i])) return false;
    for (size_t k = 0; k < nd->n_outputs; k++)
        if (nd->alias[k] == (int)i) return true;
    return false;
}

/* Position of each action's block: before the first node (file order)
 * that reads the storage outside the forward pass, or before an earlier
 * action's block whose clones read it. */
static void emit_blocks(emit_work *w) {
    const graph *g = w->g;
    for (size_t a = 0; a < w->n; a++) w->block_at[a] = g->n_ops;
    for (size_t op = 0; op < g->n_ops; op++) {
        if (w->forward[op]) continue;
        const fe_node *nd = &g->model->nodes[op];
        for (size_t i = 0; i < nd->n_inputs; i++) {
            if (nd->inputs[i] < 0) continue;
            int a = w->dropped_by[g->storage_of[nd->inputs[i]]];
            if (a >= 0 && op < w->block_at[a]) w->block_at[a] = op;
        }
    }
    /* an earlier action's clones reading a later action's storage: the
     * later block no later than the earlier one (actions in order, so
     * each earlier block is final when a later one is looked at) */
    for (size_t b = 0; b < w->n; b++) {
        for (size_t a = 0; a < b; a++) {
            const fit_action *A = &w->c->actions[a];
            for (size_t k = 0; k < A->n_ops; k++) {
                const fe_node *nd = &g->model->nodes[A->ops[k]];
                for (size_t i = 0; i < nd->n_inputs; i++)
                    if (nd->inputs[i] >= 0 &&
                        w->dropped_by[g->storage_of[nd->inputs[i]]] == (int)b &&
                        w->block_at[a] < w->block_at[b])
                        w->block_at[b] = w->block_at[a];
            }
        }
    }
}

/* The last forward node (file order) touching storage s: the Offload
 * goes after it. */
static size_t emit_last_forward(const emit_work *w, int s) {
    const graph *g = w->g;
    size_t last = 0;
    for (size_t op = 0; op < g->n_ops; op++) {
        if (!w->forward[op]) continue;
        for (size_t k = g->touch_start[op]; k < g->touch_start[op + 1]; k++)
            if (g->touch[k] == s) last = op;
    }
    return last;
}

static int emit_insert_cmp(const void *pa, const void *pb) {
    const emit_insert *x = pa, *y = pb;
    if (x->position != y->position) return x->position < y->position ? -1 : 1;
    return (x->key > y->key) - (x->key < y->key);
}

/* The insertions: blocks at one position with later actions first (their
 * storages are read by the earlier ones' clones), each block's clones in
 * schedule order. */
static emit_insert *emit_plan(emit_work *w, size_t *n_ins) {
    size_t cap = 0;
    for (size_t a = 0; a < w->n; a++) {
        const fit_action *A = &w->c->actions[a];
        cap += A->kind == FIT_RECOMPUTE ? 0 : 2;
        for (size_t k = 0; A->kind == FIT_RECOMPUTE && k < A->n_ops; k++)
            cap += 1 + w->g->model->nodes[A->ops[k]].n_inputs;
    }
    emit_insert *ins = xmallocarray(cap ? cap : 1, sizeof *ins);
    size_t n = 0;
    for (size_t a = 0; a < w->n; a++) {
        const fit_action *A = &w->c->actions[a];
        /* later actions sort first; within one, each clone after its scratches */
        size_t base = (w->n - a) * (w->g->n_ops + 2) * 64, at = w->block_at[a];
        if (A->kind == FIT_RECOMPUTE) {
            for (size_t k = 0; k < A->n_ops; k++) {
                const fe_node *nd = &w->g->model->nodes[A->ops[k]];
                for (size_t i = 0; i < nd->n_inputs && i < 63; i++)
                    if (emit_needs_scratch(w, A, nd, i))
                        ins[n++] =
                            (emit_insert){at, base + 64 * k + i, (int)a, A->ops[k], 0, (int)i};
                ins[n++] = (emit_insert){at, base + 64 * k + 63, (int)a, A->ops[k], 0, -1};
            }
        } else {
            size_t after = emit_last_forward(w, A->storage) + 1;
            ins[n++] = (emit_insert){after, 0, (int)a, -1, 0, -1};
            ins[n++] = (emit_insert){at, base, (int)a, -1, 1, -1};
        }
    }
    qsort(ins, n, sizeof *ins, emit_insert_cmp);
    *n_ins = n;
    return ins;
}

/* Declares value `name` with t's type and shape. */
static int emit_value_info(fe_edit *e, const fe_value *v, const char *name, char *err,
                           size_t errlen) {
    int64_t dims[64];
    size_t rank = v->rank > 0 ? (size_t)v->rank : 0;
    ROAMC_ASSERT(rank <= 64);
    for (size_t d = 0; d < rank; d++) dims[d] = v->dims[d].value;
    fe_value_spec spec = {name, v->elem_type, rank, dims};
    return fe_edit_add_value_info(e, &spec, err, errlen);
}

/* The clone of in->op for its action at index `at` of the editor, the
 * source being at index src. */
static int emit_clone(fe_edit *e, const emit_work *w, const emit_insert *in, size_t at, size_t src,
                      char *err, size_t errlen) {
    const fe_model *m = w->g->model;
    const fe_node *nd = &m->nodes[in->op];
    const fit_action *A = &w->c->actions[in->action];
    size_t no = nd->n_outputs ? nd->n_outputs : 1;
    char(*names)[EMIT_NAME] = xcalloc(no, sizeof *names);
    const char **outs = xcalloc(no, sizeof *outs);
    int first = -1;
    for (size_t k = 0; k < nd->n_outputs; k++) {
        int t = nd->outputs[k];
        outs[k] = t < 0 ? "" : emit_name(w, t, in->action, "rc", names[k], EMIT_NAME);
        if (t >= 0 && first < 0) first = t;
    }
    fe_clone_spec spec = {.node = src,
                          .position = at,
                          .outputs = outs,
                          .n_outputs = nd->n_outputs,
                          .extra = {.name = "roamc_recompute",
                                    .type = FE_ATTR_STRING,
                                    .s = first >= 0 ? m->values[first].name : ""}};
    int rc = fe_edit_clone_node(e, &spec, err, errlen);
    for (size_t k = 0; rc == 0 && k < nd->n_outputs; k++)
        if (nd->outputs[k] >= 0)
            rc = emit_value_info(e, &m->values[nd->outputs[k]], outs[k], err, errlen);
    for (size_t i = 0; rc == 0 && i < nd->n_inputs; i++) {
        int t = nd->inputs[i];
        char buf[EMIT_NAME];
        const char *name = t < 0 ? NULL
                           : emit_needs_scratch(w, A, nd, i)
                               ? emit_name(w, t, in->action, "scratch", buf, sizeof buf)
                               : emit_read_name(w, t, A, in->action, buf, sizeof buf);
        if (name && strcmp(name, m->values[t].name) != 0)
            rc = fe_edit_replace_input(e, at, i, name, err, errlen);
    }
    free(names);
    free(outs);
    return rc;
}

/* The scratch of input slot in->scratch of in->op's clone at index `at`:
 * an ATen `empty` of the input's type and shape (emit_needs_scratch). */
static int emit_scratch(fe_edit *e, const emit_work *w, const emit_insert *in, size_t at, char *err,
                        size_t errlen) {
    const fe_node *nd = &w->g->model->nodes[in->op];
    const fe_value *v = &w->g->model->values[nd->inputs[in->scratch]];
    char name[EMIT_NAME], dtype[32];
    emit_name(w, nd->inputs[in->scratch], in->action, "scratch", name, sizeof name);
    int64_t dims[64];
    size_t rank = v->rank > 0 ? (size_t)v->rank : 0;
    ROAMC_ASSERT(rank <= 64);
    for (size_t d = 0; d < rank; d++) dims[d] = v->dims[d].value;
    fe_attr_spec attrs[4] = {{.name = "size", .type = FE_ATTR_INTS, .ints = dims, .n_ints = rank},
                             {.name = "dtype",
                              .type = FE_ATTR_STRING,
                              .s = fe_elem_name(v->elem_type, dtype, sizeof dtype)},
                             {.name = "layout", .type = FE_ATTR_STRING, .s = "strided"},
                             {.name = "overload", .type = FE_ATTR_STRING, .s = "memory_format"}};
    const char *out = name;
    fe_node_spec spec = {.domain = "org.pytorch.aten",
                         .op_type = "empty",
                         .outputs = &out,
                         .n_outputs = 1,
                         .attrs = attrs,
                         .n_attrs = 4};
    if (fe_edit_insert_node(e, at, &spec, err, errlen)) return -1;
    return emit_value_info(e, v, name, err, errlen);
}

/* The Offload or the Reload of action in->action at index `at`. */
static int emit_copy(fe_edit *e, const emit_work *w, const emit_insert *in, size_t at, char *err,
                     size_t errlen) {
    const fit_action *A = &w->c->actions[in->action];
    const fe_value *v = &w->g->model->values[A->tensor];
    char host[EMIT_NAME], back[EMIT_NAME];
    emit_name(w, A->tensor, in->action, "host", host, sizeof host);
    emit_name(w, A->tensor, in->action, "rl", back, sizeof back);
    const char *in_name = in->reload ? host : v->name, *out_name = in->reload ? back : host;
    fe_node_spec spec = {.domain = GRAPH_ROAMC_DOMAIN,
                         .op_type = in->reload ? "Reload" : "Offload",
                         .inputs = &in_name,
                         .n_inputs = 1,
                         .outputs = &out_name,
                         .n_outputs = 1};
    if (fe_edit_insert_node(e, at, &spec, err, errlen)) return -1;
    return emit_value_info(e, v, out_name, err, errlen);
}

/* The unchanged nodes that read a dropped storage outside the forward
 * pass read its new names (before any insertion: original indices). */
static int emit_rewire(fe_edit *e, const emit_work *w, char *err, size_t errlen) {
    const fe_model *m = w->g->model;
    for (size_t op = 0; op < w->g->n_ops; op++) {
        if (w->forward[op]) continue;
        const fe_node *nd = &m->nodes[op];
        for (size_t i = 0; i < nd->n_inputs; i++) {
            int t = nd->inputs[i];
            if (t < 0 || w->dropped_by[w->g->storage_of[t]] < 0) continue;
            char buf[EMIT_NAME];
            if (fe_edit_replace_input(e, op, i, emit_read_name(w, t, NULL, -1, buf, sizeof buf),
                                      err, errlen))
                return -1;
        }
    }
    return 0;
}

int fit_emit(const fit_emit_request *r, uint8_t **bytes, size_t *len, char *err, size_t errlen) {
    const graph *g = r->g;
    emit_work w = {.g = g, .c = r->choice, .n = r->n_actions, .forward = r->choice->forward};
    ROAMC_ASSERT(r->n_actions <= r->choice->n_actions);
    w.dropped_by = xmallocarray(g->n_storages, sizeof *w.dropped_by);
    w.block_at = xmallocarray(w.n ? w.n : 1, sizeof *w.block_at);
    for (size_t s = 0; s < g->n_storages; s++) w.dropped_by[s] = -1;
    for (size_t a = 0; a < w.n; a++) w.dropped_by[r->choice->actions[a].storage] = (int)a;
    emit_blocks(&w);
    size_t n_ins;
    emit_insert *ins = emit_plan(&w, &n_ins);
    fe_edit *e = NULL;
    int rc = fe_edit_open_bytes(r->step_name, r->step_bytes, r->step_len, &e, err, errlen);
    if (rc == 0) rc = emit_rewire(e, &w, err, errlen);
    /* ascending: insertion i lands at its position plus the i before it */
    for (size_t i = 0; rc == 0 && i < n_ins; i++) {
        size_t at = ins[i].position + i;
        if (ins[i].op < 0 || ins[i].scratch >= 0) {
            rc = ins[i].op < 0 ? emit_copy(e, &w, &ins[i], at, err, errlen)
                               : emit_scratch(e, &w, &ins[i], at, err, errlen);
            continue;
        }
        size_t q = (size_t)ins[i].op, before = 0; /* insertions so far at or before q */
        while (before < i && ins[before].position <= q) before++;
        rc = emit_clone(e, &w, &ins[i], at, q + before, err, errlen);
    }
    if (rc == 0) fe_edit_bytes(e, bytes, len);
    fe_edit_free(e);
    free(ins);
    free(w.dropped_by);
    free(w.block_at);
    return rc;
}
