/* frontend/train/train_emit.c — the derived training step as an ONNX
 * ModelProto (train_internal.h tr_pack), written through the one ONNX writer
 * (frontend/onnx_write.h): the file's graph with the nodes and the four value
 * lists replaced, the aten opset added and the roamc.* metadata set.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "onnx_write.h"
#include "train_internal.h"

/* --------------------------------------------------------------- protobuf */

static Onnx__ValueInfoProto *tr_vinfo(ow_arena *a, const tr_value *v) {
    return ow_value_info(a, v->name, v->elem, v->rank, v->dims);
}

/* The alias (INTS) and inplace (INT) attributes of DESIGN.md's convention. */
static void tr_alias_attrs(ow_arena *a, const int *alias, size_t n_out, int inplace,
                           Onnx__AttributeProto **out) {
    int64_t *ints = xmallocarray(n_out, sizeof *ints);
    for (size_t k = 0; k < n_out; k++) ints[k] = alias[k];
    out[0] = ow_attr_ints(a, "alias", ints, n_out);
    out[1] = ow_attr_int(a, "inplace", inplace);
    free(ints);
}

static char *tr_vname(tr *T, int v) {
    ROAMC_ASSERT(v >= -1 && v < (int)T->nv);
    return v >= 0 ? T->v[v].name : "";
}

/* A comma-separated list of value names, in the arena. */
static char *tr_join(tr *T, ow_arena *a, const int *v, size_t n) {
    size_t len = 1;
    for (size_t k = 0; k < n; k++) len += strlen(tr_vname(T, v[k])) + 1;
    char *s = ow_alloc(a, len), *p = s;
    for (size_t k = 0; k < n; k++) {
        size_t l = strlen(tr_vname(T, v[k]));
        if (k) *p++ = ',';
        memcpy(p, tr_vname(T, v[k]), l);
        p += l;
    }
    *p = 0;
    return s;
}

/* Name s of a forward value as microbatch map has it (map NULL: s itself). */
static char *tr_mb_name(tr *T, const int *map, char *s) {
    if (!map || !s || !s[0]) return s;
    int v = fi_names_get(&T->names, s);
    if (v < 0 || (size_t)v >= T->n_fwd_values) return s;
    return T->v[map[v]].name;
}

/* Node c (a copy), an inference-form BatchNormalization or Dropout planned in training mode
 * (train_export.c), says so: BatchNormalization's training_mode attribute is 1 (from opset
 * 14; before, its added running-stat outputs say it), Dropout's training_mode input the true
 * initializer tr_pack_initializers adds (from opset 12; before, its mask output says it). */
static void tr_pack_training_mode(tr *T, ow_arena *A, Onnx__NodeProto *c) {
    int64_t opset = T->f->opset;
    if (!strcmp(c->op_type, "BatchNormalization") && (opset <= 0 || opset >= 14)) {
        Onnx__AttributeProto **at = ow_alloc(A, (c->n_attribute + 1) * sizeof *at);
        size_t na = 0;
        for (size_t a = 0; a < c->n_attribute; a++)
            if (!c->attribute[a]->name || strcmp(c->attribute[a]->name, "training_mode"))
                at[na++] = c->attribute[a];
        at[na++] = ow_attr_int(A, "training_mode", 1);
        c->attribute = at;
        c->n_attribute = na;
    } else if (!strcmp(c->op_type, "Dropout") && T->ex.true_name[0]) {
        size_t ni = c->n_input > 3 ? c->n_input : 3;
        char **ins = ow_alloc(A, ni * sizeof *ins);
        for (size_t k = 0; k < ni; k++) ins[k] = k < c->n_input ? c->input[k] : "";
        ins[2] = T->ex.true_name;
        c->input = ins;
        c->n_input = ni;
    }
}

/* The file's forward nodes into nodes[0 .. n_node): shared as they are, or copied where the
 * derivation added an optional output or alias attributes, or where a --grad-accum
 * microbatch (map, mb) names its own values (mb<k>.NAME). */
static void tr_pack_fwd_nodes(tr *T, ow_arena *A, Onnx__NodeProto **nodes, const int *map, int mb) {
    const Onnx__GraphProto *og = T->mp->graph;
    for (size_t i = 0; i < og->n_node; i++) {
        const tr_fwd *fw = &T->fwd[i];
        if (!fw->out && !fw->has_alias && !fw->to_training && !map) {
            nodes[i] = og->node[i];
            continue;
        }
        Onnx__NodeProto *c = ow_alloc(A, sizeof *c);
        *c = *og->node[i];
        if (map) {
            const Onnx__NodeProto *o = og->node[i];
            char **ins = ow_alloc(A, (o->n_input + 1) * sizeof *ins);
            char **outs = ow_alloc(A, (o->n_output + 1) * sizeof *outs);
            for (size_t k = 0; k < o->n_input; k++) ins[k] = tr_mb_name(T, map, o->input[k]);
            for (size_t k = 0; k < o->n_output; k++) outs[k] = tr_mb_name(T, map, o->output[k]);
            c->input = ins;
            c->output = outs;
            if (o->name && o->name[0]) {
                size_t len = strlen(o->name) + 24;
                c->name = ow_alloc(A, len);
                snprintf(c->name, len, "mb%d.%s", mb, o->name);
            }
        }
        if (fw->out) {
            char **outs = ow_alloc(A, fw->n_out * sizeof *outs);
            for (size_t k = 0; k < fw->n_out; k++)
                outs[k] =
                    fw->out[k] >= 0 && map ? tr_vname(T, map[fw->out[k]]) : tr_vname(T, fw->out[k]);
            c->output = outs;
            c->n_output = fw->n_out;
        }
        if (fw->to_training) tr_pack_training_mode(T, A, c);
        if (fw->has_alias) {
            Onnx__AttributeProto **at = ow_alloc(A, (c->n_attribute + 2) * sizeof *at);
            if (c->n_attribute) /* Slice, Cast, Dropout may have none: attribute is NULL */
                memcpy(at, c->attribute, c->n_attribute * sizeof *at);
            size_t no = c->n_output < 3 ? c->n_output : 3;
            tr_alias_attrs(A, fw->alias, no, fw->inplace, at + c->n_attribute);
            c->attribute = at;
            c->n_attribute += 2;
        }
        nodes[i] = c;
    }
}

/* The derived nodes (loss, backward, optimizer) [from, to) into nodes[0 ..), in the aten
 * domain, named train0, train1, ... */
static void tr_pack_train_nodes(tr *T, ow_arena *A, Onnx__NodeProto **nodes, size_t from,
                                size_t to) {
    for (size_t j = from; j < to; j++) {
        const tr_node *n = &T->n[j];
        Onnx__NodeProto **slot = &nodes[j - from];
        char **in = ow_alloc(A, n->n_in * sizeof *in);
        char **outs = ow_alloc(A, n->n_out * sizeof *outs);
        Onnx__AttributeProto **at = ow_alloc(A, 2 * sizeof *at);
        char *name = ow_alloc(A, 32);
        for (size_t k = 0; k < n->n_in; k++) in[k] = tr_vname(T, n->in[k]);
        for (size_t k = 0; k < n->n_out; k++) outs[k] = tr_vname(T, n->out[k]);
        snprintf(name, 32, "train%zu", j);
        tr_alias_attrs(A, n->alias, n->n_out, n->inplace, at);
        *slot = ow_node(A, &(ow_node_parts){.name = name,
                                            .domain = TR_ATEN,
                                            .op_type = n->op,
                                            .inputs = in,
                                            .n_inputs = n->n_in,
                                            .outputs = outs,
                                            .n_outputs = n->n_out,
                                            .attrs = at,
                                            .n_attrs = 2});
    }
}

/* g's inputs: data, label, parameters, optimizer state.  Marks each in is_io, so that the
 * later lists do not declare it again. */
static void tr_pack_inputs(tr *T, const tr_lists *L, ow_arena *A, Onnx__GraphProto *g,
                           bool *is_io) {
    size_t n_in = L->data.n + L->params.n + L->states.n + 1;
    Onnx__ValueInfoProto **inputs = ow_alloc(A, n_in * sizeof *inputs);
    size_t ni = 0;
    const tr_list *in_lists[3] = {&L->data, &L->params, &L->states};
    for (int l = 0; l < 3; l++)
        for (size_t k = 0; k < in_lists[l]->n; k++) {
            int v = in_lists[l]->v[k];
            inputs[ni++] = tr_vinfo(A, &T->v[v]);
            is_io[v] = true;
        }
    g->input = inputs;
    g->n_input = ni;
}

/* g's initializers: the file's, less the parameters (now inputs without data), plus the
 * bool true a Dropout planned in training mode reads (tr_pack_training_mode). */
static void tr_pack_initializers(tr *T, ow_arena *A, Onnx__GraphProto *g, bool *is_io) {
    const Onnx__GraphProto *og = T->mp->graph;
    Onnx__TensorProto **inits = ow_alloc(A, (og->n_initializer + 1) * sizeof *inits);
    size_t nini = 0;
    for (size_t k = 0; k < og->n_initializer; k++) {
        const char *iname = og->initializer[k]->name ? og->initializer[k]->name : "";
        int v = fi_names_get(&T->names, iname);
        if (v >= 0 && T->param[v]) continue;
        if (v >= 0) is_io[v] = true;
        inits[nini++] = og->initializer[k];
    }
    if (T->ex.true_name[0]) {
        Onnx__TensorProto *t = ow_alloc(A, sizeof *t);
        *t = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
        t->name = T->ex.true_name;
        t->has_data_type = 1;
        t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
        uint8_t *one = ow_alloc(A, 1);
        *one = 1;
        t->has_raw_data = 1;
        t->raw_data.data = one;
        t->raw_data.len = 1;
        inits[nini++] = t;
    }
    g->initializer = inits;
    g->n_initializer = nini;
}

/* g's outputs: the loss, then the final versions of parameters and state not declared yet. */
static void tr_pack_outputs(tr *T, ow_arena *A, Onnx__GraphProto *g, bool *is_io) {
    Onnx__ValueInfoProto **outputs = ow_alloc(A, (T->n_final + 1) * sizeof *outputs);
    size_t no = 0;
    outputs[no++] = tr_vinfo(A, &T->v[T->loss]);
    is_io[T->loss] = true;
    for (size_t k = 0; k < T->n_final; k++) {
        int v = fi_names_get(&T->names, T->final[k]);
        if (v < 0 || is_io[v]) continue;
        outputs[no++] = tr_vinfo(A, &T->v[v]);
        is_io[v] = true;
    }
    g->output = outputs;
    g->n_output = no;
}

/* g's value_info: every other tensor a node makes, forward nodes first. */
static void tr_pack_value_info(tr *T, ow_arena *A, Onnx__GraphProto *g, bool *is_io) {
    const fe_model *f = T->f;
    const Onnx__GraphProto *og = T->mp->graph;
    Onnx__ValueInfoProto **vis = ow_alloc(A, T->nv * sizeof *vis);
    size_t nvi = 0;
    for (int mb = 0; mb < T->accum; mb++)
        for (size_t i = 0; i < og->n_node; i++) {
            const tr_fwd *fw = &T->fwd[i];
            size_t nout = fw->out ? fw->n_out : f->nodes[i].n_outputs;
            for (size_t k = 0; k < nout; k++) {
                int v = fw->out ? fw->out[k] : f->nodes[i].outputs[k];
                if (v >= 0 && T->accum > 1) v = T->mb_map[mb][v];
                if (v < 0 || is_io[v] || !T->v[v].tensor) continue;
                vis[nvi++] = tr_vinfo(A, &T->v[v]);
                is_io[v] = true;
            }
        }
    for (size_t j = 0; j < T->nn; j++)
        for (size_t k = 0; k < T->n[j].n_out; k++) {
            int v = T->n[j].out[k];
            if (v < 0 || is_io[v]) continue;
            vis[nvi++] = tr_vinfo(A, &T->v[v]);
            is_io[v] = true;
        }
    g->value_info = vis;
    g->n_value_info = nvi;
}

/* The derived graph: the file's graph with the nodes and the four value lists replaced.  The
 * lists are filled in this order because each declares a value only once (is_io). */
static Onnx__GraphProto *tr_pack_graph(tr *T, const tr_lists *L, ow_arena *A) {
    const Onnx__GraphProto *og = T->mp->graph;
    Onnx__GraphProto *g = ow_alloc(A, sizeof *g);
    size_t nn = (size_t)T->accum * og->n_node + T->nn;
    Onnx__NodeProto **nodes = ow_alloc(A, nn * sizeof *nodes);
    bool *is_io = ow_alloc(A, T->nv * sizeof *is_io);
    *g = *og;
    /* each microbatch's forward nodes then its loss and backward; the optimizer last */
    size_t pos = 0, from = 0;
    for (int mb = 0; mb < T->accum; mb++) {
        tr_pack_fwd_nodes(T, A, nodes + pos, T->accum > 1 ? T->mb_map[mb] : NULL, mb);
        pos += og->n_node;
        tr_pack_train_nodes(T, A, nodes + pos, from, T->mb_end[mb]);
        pos += T->mb_end[mb] - from;
        from = T->mb_end[mb];
    }
    tr_pack_train_nodes(T, A, nodes + pos, from, T->nn);
    ROAMC_ASSERT(pos + T->nn - from == nn);
    g->node = nodes;
    g->n_node = nn;
    tr_pack_inputs(T, L, A, g, is_io);
    tr_pack_initializers(T, A, g, is_io);
    tr_pack_outputs(T, A, g, is_io);
    tr_pack_value_info(T, A, g, is_io);
    return g;
}

/* m's opset imports: the file's, plus the aten domain the derived nodes use unless the file
 * imports it already. */
static void tr_pack_opsets(tr *T, ow_arena *A, Onnx__ModelProto *m) {
    const Onnx__ModelProto *mp = T->mp;
    bool has_aten = false;
    for (size_t k = 0; k < mp->n_opset_import; k++)
        if (mp->opset_import[k]->domain && !strcmp(mp->opset_import[k]->domain, TR_ATEN))
            has_aten = true;
    Onnx__OperatorSetIdProto **ops = ow_alloc(A, (mp->n_opset_import + 1) * sizeof *ops);
    Onnx__OperatorSetIdProto *aten = ow_alloc(A, sizeof *aten);
    memcpy(ops, mp->opset_import, mp->n_opset_import * sizeof *ops);
    m->opset_import = ops;
    if (!has_aten) {
        *aten = (Onnx__OperatorSetIdProto)ONNX__OPERATOR_SET_ID_PROTO__INIT;
        aten->domain = TR_ATEN;
        aten->has_version = 1;
        aten->version = 1;
        ops[m->n_opset_import++] = aten;
    }
}

/* The marks of an inference export (train_export.c), only when the file has one (so that a
 * training-mode export's step stays byte-equal): roamc.eval_export, counts as
 * "key=N,..."; roamc.eval_export_fix, roamc.eval_export_misses. */
static void tr_pack_export_metadata(tr *T, ow_arena *A, Onnx__StringStringEntryProto **meta,
                                    size_t *nm) {
    const tr_export *ex = &T->ex;
    if (!ex->bn_inference && !ex->dropout_inference && !ex->convs_folded && !ex->attention) return;
    char *buf = ow_alloc(A, 256);
    snprintf(buf, 256,
             "batchnorm=%zu,batchnorm_inference=%zu,dropout=%zu,dropout_inference=%zu,convs=%zu,"
             "convs_folded=%zu,attention_without_dropout=%zu",
             ex->bn, ex->bn_inference, ex->dropout, ex->dropout_inference, ex->convs,
             ex->convs_folded, ex->attention);
    meta[(*nm)++] = ow_meta_entry(A, "roamc.eval_export", buf);
    meta[(*nm)++] = ow_meta_entry(A, "roamc.eval_export_fix", tr_export_fix());
    meta[(*nm)++] = ow_meta_entry(A, "roamc.eval_export_misses", tr_export_misses());
}

/* m's metadata: the file's, less any roamc.* keys (a step derived again replaces them), then
 * the roamc.* keys that let a later run (--report, the planner) read the step's roles. */
static void tr_pack_metadata(tr *T, const tr_lists *L, ow_arena *A, Onnx__ModelProto *m) {
    const Onnx__ModelProto *mp = T->mp;
    Onnx__StringStringEntryProto **meta = ow_alloc(A, (mp->n_metadata_props + 28) * sizeof *meta);
    size_t nm = 0;
    for (size_t k = 0; k < mp->n_metadata_props; k++)
        if (mp->metadata_props[k]->key && strncmp(mp->metadata_props[k]->key, "roamc.", 6) != 0)
            meta[nm++] = mp->metadata_props[k];
    char buf[256];
    snprintf(buf, sizeof buf, "%s", tr_optimizer_name(T->opt->optimizer));
    const char *kv[][2] = {
        {"roamc.loss", T->v[T->loss].name},
        {"roamc.parameters", tr_join(T, A, L->params.v, L->params.n)},
        {"roamc.optimizer_state", tr_join(T, A, L->states.v, L->states.n)},
        {"roamc.data_inputs", tr_join(T, A, L->data.v, L->data.n)},
        {"roamc.buffers", tr_join(T, A, L->buffers.v, L->buffers.n)},
        {"roamc.frozen", tr_join(T, A, L->frozen.v, L->frozen.n)},
        {"roamc.gradients", tr_join(T, A, L->grads.v, L->grads.n)},
        {"roamc.optimizer", buf},
        {"roamc.loss_kind", tr_loss_name(T->loss_kind)},
        {"roamc.label", T->label >= 0 ? T->v[T->label].name : ""},
        {"roamc.derived_from", T->path},
        {"roamc.exporter", "roamc --train " ROAMC_TRAIN_VERSION},
    };
    for (size_t k = 0; k < sizeof kv / sizeof kv[0]; k++)
        meta[nm++] = ow_meta_entry(A, kv[k][0], kv[k][1]);
    /* the set-up: only when there is one, so that an fp32 one-batch step stays byte-equal */
    if (T->opt->precision != FE_PREC_FP32) {
        meta[nm++] = ow_meta_entry(A, "roamc.precision", tr_precision_name(T->opt->precision));
        if (tr_precision_amp(T->opt->precision))
            meta[nm++] = ow_meta_entry(
                A, "roamc.amp_impl",
                "roamc --train: CUDA autocast's lists (torch autocast_mode.cpp): matmul, linear, "
                "conv, bmm, prelu in the half type; softmax, log_softmax, layer_norm, group_norm, "
                "sum, prod, cumsum, exp, log, pow, reciprocal, softplus and the losses in fp32; "
                "other ops in their inputs' promoted type; one half copy per weight per "
                "microbatch (autocast's cache); fp32 master weights, gradients and optimizer "
                "state");
    }
    if (T->scale >= 0)
        meta[nm++] = ow_meta_entry(A, "roamc.loss_scale",
                                   "GradScaler: scaler.scale (fp32 [1]) multiplies the loss; "
                                   "_amp_foreach_non_finite_check_and_unscale_ unscales the "
                                   "gradients and sets found_inf; _amp_update_scale_ updates "
                                   "scaler.scale and scaler.growth_tracker (int32 [1]); the step "
                                   "is emitted as taken");
    tr_pack_export_metadata(T, A, meta, &nm);
    if (T->accum > 1) {
        snprintf(buf, sizeof buf, "%d", T->accum);
        meta[nm++] = ow_meta_entry(A, "roamc.grad_accum", buf);
        snprintf(buf, sizeof buf,
                 "%d microbatches (data inputs mb<k>.<name>), loss/%d, gradients accumulated "
                 "in place (add_) as each is ready, one optimizer step",
                 T->accum, T->accum);
        meta[nm++] = ow_meta_entry(A, "roamc.grad_accum_impl", buf);
    }
    m->metadata_props = meta;
    m->n_metadata_props = nm;
}

/* Packs the derived model into *bytes (malloc'd) (train_internal.h).  The model shares the file's unchanged
 * parts (nodes, initializers, metadata) and holds the new ones in an arena freed after. */
void tr_pack(tr *T, tr_lists *L, uint8_t **bytes, size_t *len) {
    ow_arena A = {0};
    Onnx__ModelProto m = *T->mp;
    m.graph = tr_pack_graph(T, L, &A);
    m.n_training_info = 0;
    m.training_info = NULL;
    tr_pack_opsets(T, &A, &m);
    tr_pack_metadata(T, L, &A, &m);
    ow_pack(&m, bytes, len);
    ow_arena_free(&A);
}
