/* What shard_emit.c and shard_gather.c share (shard_internal.h): the
 * step's parameters, gradients, optimizer state and update nodes, and the
 * small emitters both use. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "edit.h"
#include "shard_internal.h"

const int64_t sh_alias0[1] = {0};

const char *shard_kind_name(int kind) {
    switch (kind) {
    case SHARD_DDP: return "ddp";
    case SHARD_ZERO1: return "zero1";
    case SHARD_ZERO2: return "zero2";
    case SHARD_ZERO3: return "zero3";
    case SHARD_FSDP: return "fsdp";
    default: return "?";
    }
}

int shard_kind_parse(const char *s, int *kind) {
    for (int k = SHARD_DDP; k <= SHARD_FSDP; k++)
        if (strcmp(s, shard_kind_name(k)) == 0) {
            *kind = k;
            return 0;
        }
    return -1;
}

int shard_check(const shard_options *so, char *err, size_t errlen) {
    if (so->kind < SHARD_DDP || so->kind > SHARD_FSDP)
        return roamc_errorf(err, errlen, "--shard is ddp, zero1, zero2, zero3 or fsdp");
    if (so->world < 1 || so->world > SHARD_MAX_WORLD)
        return roamc_errorf(err, errlen, "--world is 1 to %d, not %ld", SHARD_MAX_WORLD, so->world);
    if (so->rank < 0 || so->rank >= so->world)
        return roamc_errorf(err, errlen, "--rank %ld is not a rank of --world %ld (0 to %ld)",
                            so->rank, so->world, so->world - 1);
    if (!(so->bucket_mb > 0) || so->bucket_mb > 1e6)
        return roamc_errorf(err, errlen, "--bucket-mb is above 0 and at most 1000000, not %g",
                            so->bucket_mb);
    if (so->prefetch < 0 || so->prefetch > SHARD_MAX_PREFETCH)
        return roamc_errorf(err, errlen, "--prefetch is 0 to %d, not %ld", SHARD_MAX_PREFETCH,
                            so->prefetch);
    if (so->no_sync && so->kind != SHARD_ZERO2 && so->kind != SHARD_ZERO3 && so->kind != SHARD_FSDP)
        return roamc_errorf(err, errlen,
                            "--no-sync is for --shard zero2, zero3 or fsdp (ddp and zero1 "
                            "reduce an accumulated step's gradients once, after the last "
                            "microbatch, already)");
    if (so->wrap && (so->kind != SHARD_FSDP || !*so->wrap))
        return roamc_errorf(err, errlen, "%s",
                            *so->wrap ? "--wrap PATTERN is fsdp's wrap unit: --shard fsdp only"
                                      : "--wrap needs a pattern of module names");
    return 0;
}

int sh_meta_list(const sh_meta_source *src, const char *key, bool required, int **out, size_t *n) {
    const char *s = fe_meta(src->m, key);
    *out = NULL, *n = 0;
    if (!s || !*s) {
        if (!required) return 0;
        return roamc_errorf(src->err, src->errlen,
                            "%s: %s needs metadata %s (models/export.py's convention, or "
                            "--train): which values are the parameters and their gradients",
                            src->step_name, src->option, key);
    }
    size_t cap = 1;
    for (const char *c = s; *c; c++) cap += *c == ',';
    *out = xmallocarray(cap, sizeof **out);
    char name[SH_NAME];
    for (const char *c = s;;) {
        size_t len = strcspn(c, ",");
        if (len >= sizeof name)
            return roamc_errorf(src->err, src->errlen, "%s: metadata %s: a name of %zu bytes",
                                src->step_name, key, len);
        memcpy(name, c, len);
        name[len] = 0;
        if (len) {
            int v = fe_find_value(src->m, name);
            if (v < 0)
                return roamc_errorf(src->err, src->errlen, "%s: metadata %s names '%s', no value",
                                    src->step_name, key, name);
            (*out)[(*n)++] = v;
        }
        if (!c[len]) break;
        c += len + 1;
    }
    return 0;
}

int sh_meta_values(sh_work *w, const char *key, bool required, int **out, size_t *n) {
    sh_meta_source src = {w->m, w->r->step_name, "--shard", w->err, w->errlen};
    return sh_meta_list(&src, key, required, out, n);
}

/* Marks the storages of the values metadata key names as part (when not
 * marked yet). */
static void sh_mark_part(const graph *g, const char *key, int part, int *of) {
    const char *s = fe_meta(g->model, key);
    if (!s) return;
    char name[SH_NAME];
    for (const char *c = s; *c;) {
        size_t len = strcspn(c, ",");
        if (len && len < sizeof name) {
            memcpy(name, c, len);
            name[len] = 0;
            int v = fe_find_value(g->model, name);
            if (v >= 0 && of[g->storage_of[v]] < 0) of[g->storage_of[v]] = part;
        }
        c += len;
        if (*c) c++;
    }
}

int sh_split_at_peak(const plan *p, const sh_part_rule *rules, size_t n_rules, int grad_part,
                     int act_part, uint64_t *split) {
    const graph *g = p->g;
    uint64_t *live = xmallocarray(g->n_ops ? g->n_ops : 1, sizeof *live);
    graph_live_bytes(g, p->order, live);
    int peak = 0;
    for (size_t t = 1; t < g->n_ops; t++)
        if (live[t] > live[peak]) peak = (int)t;
    free(live);
    int *of = xmallocarray(g->n_storages ? g->n_storages : 1, sizeof *of);
    for (size_t s = 0; s < g->n_storages; s++) of[s] = -1;
    for (size_t k = 0; k < n_rules; k++) sh_mark_part(g, rules[k].key, rules[k].part, of);
    for (size_t s = 0; s < g->n_storages; s++) {
        if (of[s] < 0) of[s] = g->storages[s].gradient ? grad_part : act_part;
        if (p->start[s] <= peak && peak <= p->end[s]) split[of[s]] += g->storages[s].size;
    }
    free(of);
    return peak;
}

uint64_t sh_numel(const fe_value *v) {
    uint64_t n = 1;
    for (int d = 0; d < v->rank; d++) n *= (uint64_t)v->dims[d].value;
    return n;
}

size_t sh_contiguous(const fe_value *v, int64_t *size, int64_t *stride) {
    size_t rank = v->rank > 0 ? (size_t)v->rank : 0;
    ROAMC_ASSERT(rank <= 64);
    int64_t st = 1;
    for (size_t d = rank; d-- > 0;) {
        size[d] = v->dims[d].value;
        stride[d] = st;
        st *= size[d] > 0 ? size[d] : 1;
    }
    return rank;
}

int sh_grad_accum(sh_work *w, size_t *K) {
    const char *accum = fe_meta(w->m, "roamc.grad_accum");
    long k = accum ? strtol(accum, NULL, 10) : 1;
    if (k < 1 || k > 65536)
        return roamc_errorf(w->err, w->errlen,
                            "%s: metadata roamc.grad_accum is '%s', not a number of "
                            "microbatches",
                            w->r->step_name, accum);
    *K = (size_t)k;
    return 0;
}

int *sh_param_of_grad(const sh_work *w) {
    const fe_model *m = w->m;
    int *param_of = xmallocarray(m->n_values ? m->n_values : 1, sizeof *param_of);
    for (size_t v = 0; v < m->n_values; v++) param_of[v] = -1;
    for (size_t i = 0; i < w->n; i++) param_of[w->p[i].grad] = (int)i;
    return param_of;
}

/* Parameters and gradients, one gradient per parameter. */
int sh_params(sh_work *w) {
    int *pv, *gv;
    size_t np, ng;
    gv = NULL, ng = 0;
    int rc = sh_meta_values(w, "roamc.parameters", true, &pv, &np);
    if (rc == 0) rc = sh_meta_values(w, "roamc.gradients", true, &gv, &ng);
    if (rc == 0 && np != ng)
        rc = roamc_errorf(w->err, w->errlen,
                          "%s: metadata roamc.parameters names %zu values, roamc.gradients %zu: "
                          "--shard needs one gradient per parameter, in the same order",
                          w->r->step_name, np, ng);
    if (rc == 0 && np == 0)
        rc = roamc_errorf(w->err, w->errlen, "%s: no parameters to shard", w->r->step_name);
    w->n = rc == 0 ? np : 0;
    w->p = xcalloc(w->n ? w->n : 1, sizeof *w->p);
    for (size_t i = 0; rc == 0 && i < np; i++) {
        sh_param *P = &w->p[i];
        const fe_value *gvv = &w->m->values[gv[i]];
        P->value = pv[i], P->grad = gv[i], P->producer = gvv->producer;
        P->numel = sh_numel(gvv), P->bytes = gvv->bytes;
        P->owner = 0, P->last_update = -1, P->copy_out = SIZE_MAX;
        if (P->producer < 0)
            rc = roamc_errorf(w->err, w->errlen,
                              "%s: gradient '%s' of parameter '%s' is made by no node",
                              w->r->step_name, gvv->name, w->m->values[pv[i]].name);
        else if (w->m->values[pv[i]].bytes != gvv->bytes)
            rc = roamc_errorf(w->err, w->errlen,
                              "%s: gradient '%s' (%llu B) is not the size of parameter '%s' "
                              "(%llu B)",
                              w->r->step_name, gvv->name, (unsigned long long)gvv->bytes,
                              w->m->values[pv[i]].name,
                              (unsigned long long)w->m->values[pv[i]].bytes);
    }
    free(pv);
    free(gv);
    return rc;
}

/* Each optimizer-state value's parameter: the longest parameter name that
 * is its name's prefix before a '.' ("fc.weight.exp_avg"). */
int sh_states(sh_work *w) {
    if (sh_meta_values(w, "roamc.optimizer_state", false, &w->states, &w->n_states)) return -1;
    w->state_of = xmallocarray(w->n_states ? w->n_states : 1, sizeof *w->state_of);
    for (size_t k = 0; k < w->n_states; k++) {
        const char *s = w->m->values[w->states[k]].name;
        int best = -1;
        size_t best_len = 0;
        for (size_t i = 0; i < w->n; i++) {
            const char *pn = w->m->values[w->p[i].value].name;
            size_t len = strlen(pn);
            if (len > best_len && strncmp(s, pn, len) == 0 && s[len] == '.')
                best = (int)i, best_len = len;
        }
        if (best < 0 && w->zero)
            return roamc_errorf(
                w->err, w->errlen,
                "%s: optimizer state '%s' is named after no parameter (PARAM.what): "
                "--shard %s cannot tell which rank keeps it",
                w->r->step_name, s, shard_kind_name(w->r->so.kind));
        w->state_of[k] = best;
    }
    return 0;
}

/* The ops after the last gradient producer, each tagged with the one
 * parameter whose gradient, state or storage it reads (flowing through the
 * storages it makes); an op reading two parameters' is refused. */
int sh_tag_updates(sh_work *w) {
    const graph *g = w->g;
    int *tag = xmallocarray(g->n_storages ? g->n_storages : 1, sizeof *tag);
    for (size_t s = 0; s < g->n_storages; s++) tag[s] = -1;
    for (size_t i = 0; i < w->n; i++) {
        tag[g->storage_of[w->p[i].value]] = (int)i;
        tag[g->storage_of[w->p[i].grad]] = (int)i;
    }
    for (size_t k = 0; k < w->n_states; k++)
        if (w->state_of[k] >= 0) tag[g->storage_of[w->states[k]]] = w->state_of[k];
    int rc = 0;
    for (size_t op = w->last_grad + 1; rc == 0 && op < g->n_ops; op++) {
        const fe_node *nd = &w->m->nodes[op];
        int t = -1;
        for (size_t i = 0; i < nd->n_inputs && t != -2; i++) {
            if (nd->inputs[i] < 0) continue;
            int s = tag[g->storage_of[nd->inputs[i]]];
            if (s >= 0 && t >= 0 && s != t)
                t = -2;
            else if (s >= 0)
                t = s;
        }
        for (size_t k = 0; k < nd->n_outputs && t != -2; k++) {
            if (nd->outputs[k] < 0) continue;
            int *s = &tag[g->storage_of[nd->outputs[k]]];
            if (*s >= 0 && t >= 0 && *s != t)
                t = -2;
            else if (*s >= 0)
                t = *s;
            else
                *s = t;
        }
        if (t == -2) {
            char label[160];
            rc = roamc_errorf(w->err, w->errlen,
                              "%s: node %s (#%zu, %s) after the backward pass reads the "
                              "gradients or state of several parameters (a fused or foreach "
                              "optimizer, gradient clipping): --shard %s needs each parameter's "
                              "update on its own",
                              w->r->step_name, graph_op_label(g, (int)op, label, sizeof label), op,
                              nd->op_type, shard_kind_name(w->r->so.kind));
            break;
        }
        w->op_tag[op] = t;
        if (t < 0) continue;
        for (size_t k = 0; k < nd->n_outputs; k++)
            if (nd->outputs[k] >= 0 &&
                g->storage_of[nd->outputs[k]] == g->storage_of[w->p[t].value])
                w->p[t].last_update = (int)op;
    }
    free(tag);
    return rc;
}

/* The last gradient producer, and the first op after it that touches a
 * parameter, a gradient or an optimizer state: where the backward pass
 * ends (DDP copies the reduced gradients back there). */
void sh_passes(sh_work *w) {
    const graph *g = w->g;
    w->last_grad = 0;
    for (size_t i = 0; i < w->n; i++)
        if ((size_t)w->p[i].producer > w->last_grad) w->last_grad = (size_t)w->p[i].producer;
    bool *mark = xcalloc(g->n_storages ? g->n_storages : 1, sizeof *mark);
    for (size_t i = 0; i < w->n; i++)
        mark[g->storage_of[w->p[i].value]] = mark[g->storage_of[w->p[i].grad]] = true;
    for (size_t k = 0; k < w->n_states; k++) mark[g->storage_of[w->states[k]]] = true;
    w->opt_start = g->n_ops;
    for (size_t op = w->last_grad + 1; op < g->n_ops && w->opt_start == g->n_ops; op++)
        for (size_t k = g->touch_start[op]; k < g->touch_start[op + 1]; k++)
            if (mark[g->touch[k]]) {
                w->opt_start = op;
                break;
            }
    free(mark);
}

/* Declares name with element type elem and shape's dims (its dims NULL:
 * those of its value). */
int sh_value_info(fe_edit *e, const char *name, int32_t elem, const sh_dims *shape, char *err,
                  size_t errlen) {
    const fe_value *v = shape->like;
    const int64_t *dims = shape->dims;
    size_t rank = shape->rank;
    int64_t d[64];
    if (!dims) {
        rank = v->rank > 0 ? (size_t)v->rank : 0;
        ROAMC_ASSERT(rank <= 64);
        for (size_t k = 0; k < rank; k++) d[k] = v->dims[k].value;
        dims = d;
    }
    fe_value_spec spec = {name, elem, rank, dims};
    return fe_edit_add_value_info(e, &spec, err, errlen);
}

int sh_put(fe_edit *e, size_t at, const sh_node *n, char *err, size_t errlen) {
    fe_node_spec spec = {.domain = n->domain,
                         .op_type = n->op,
                         .name = n->out,
                         .inputs = n->in,
                         .n_inputs = n->n_in,
                         .outputs = &n->out,
                         .n_outputs = 1,
                         .attrs = n->attrs,
                         .n_attrs = n->n_attrs};
    return fe_edit_insert_node(e, at, &spec, err, errlen);
}

/* view = as_strided(buffer) at parameter i's place, then copy_ (in place)
 * from src into dst: into the bucket (copy in) or into the gradient (copy
 * out).  Inserts 2 nodes at `at`. */
int sh_emit_copy(sh_work *w, fe_edit *e, size_t at, int i, bool in, const char *buffer) {
    return sh_emit_copy_of(w, e, at,
                           &(sh_copy){.param = i, .value = -1, .in = in, .buffer = buffer});
}

int sh_emit_copy_of(sh_work *w, fe_edit *e, size_t at, const sh_copy *c) {
    char *err = w->err;
    size_t errlen = w->errlen;
    const sh_param *P = &w->p[c->param];
    const fe_value *gv = &w->m->values[c->value >= 0 ? c->value : P->grad];
    bool in = c->in;
    int64_t size[64], stride[64];
    size_t rank = sh_contiguous(gv, size, stride);
    char view[SH_NAME], out[SH_NAME];
    snprintf(view, sizeof view, "%s.%s", gv->name, in ? "bucket" : "reduced_view");
    snprintf(out, sizeof out, "%s.%s", gv->name, in ? "bucketed" : "reduced");
    fe_attr_spec va[] = {{.name = "size", .type = FE_ATTR_INTS, .ints = size, .n_ints = rank},
                         {.name = "stride", .type = FE_ATTR_INTS, .ints = stride, .n_ints = rank},
                         {.name = "storage_offset", .type = FE_ATTR_INT, .i = (int64_t)P->offset},
                         SH_VIEW_ATTRS(0)};
    /* add_: the overload a runner replays (models/run_plan.py) */
    fe_attr_spec ca[] = {SH_VIEW_ATTRS(1),
                         {.name = "overload", .type = FE_ATTR_STRING, .s = "Tensor"}};
    sh_node vn = {"org.pytorch.aten", "as_strided", {c->buffer}, 1, view, va, 5};
    sh_node cn = {"org.pytorch.aten", "copy_", {view, gv->name}, 2, out, ca, 2};
    if (!in) {
        cn.in[0] = c->dst ? c->dst : gv->name, cn.in[1] = view;
        if (c->add) cn.op = "add_", cn.n_attrs = 3;
    }
    if (sh_put(e, at, &vn, err, errlen) || sh_put(e, at + 1, &cn, err, errlen)) return -1;
    if (sh_value_info(e, view, gv->elem_type, &(sh_dims){gv, NULL, 0}, err, errlen)) return -1;
    return sh_value_info(e, out, gv->elem_type, &(sh_dims){gv, NULL, 0}, err, errlen);
}

/* A comma-separated list of value names into a malloc'd string. */
char *sh_join(const fe_model *m, const int *v, size_t n, const bool *keep) {
    size_t len = 1;
    for (size_t k = 0; k < n; k++) len += strlen(m->values[v[k]].name) + 1;
    char *s = xmalloc(len), *p = s;
    *p = 0;
    for (size_t k = 0; k < n; k++) {
        if (keep && !keep[k]) continue;
        p += sprintf(p, "%s%s", p == s ? "" : ",", m->values[v[k]].name);
    }
    return s;
}

void sh_work_free(sh_work *w) {
    free(w->p);
    free(w->ready);
    free(w->b);
    free(w->buffer_numel);
    free(w->buffer_elem);
    free(w->states);
    free(w->state_of);
    free(w->op_tag);
    free(w->removed);
    free(w->ins);
    free(w->mb_grad);
    free(w->acc_op);
}
