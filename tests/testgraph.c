/* Small ONNX model builder for tests (see testgraph.h). */
#include "testgraph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"

typedef struct tg_vi {
    char *name, *dims;
} tg_vi;

/* An attribute besides alias/inplace: INT (i), INTS (csv) or GRAPH (body). */
typedef struct tg_at {
    char *name;
    int type; /* Onnx__AttributeProto__AttributeType */
    int64_t i;
    char *csv;
    tg *body;
} tg_at;

#define TG_MAX_ATTRS 8

typedef struct tg_nd {
    char *domain, *op_type, *inputs, *outputs, *alias;
    int inplace, has_alias;
    tg_at attrs[TG_MAX_ATTRS];
    size_t n_attrs;
} tg_nd;

struct tg {
    tg_vi inputs[256], values[1024], outputs[64], inits[64];
    size_t n_inputs, n_values, n_outputs, n_inits;
    tg_nd nodes[1024];
    size_t n_nodes;
    char *meta_k[16], *meta_v[16];
    size_t n_meta;
};

static char *tg_dup(const char *s) {
    char *d = malloc(strlen(s) + 1);
    strcpy(d, s);
    return d;
}

tg *tg_new(void) {
    return calloc(1, sizeof(tg));
}

static void tg_vi_free(tg_vi *v, size_t n) {
    for (size_t i = 0; i < n; i++) free(v[i].name), free(v[i].dims);
}

void tg_free(tg *t) {
    if (!t) return;
    tg_vi_free(t->inputs, t->n_inputs);
    tg_vi_free(t->values, t->n_values);
    tg_vi_free(t->outputs, t->n_outputs);
    tg_vi_free(t->inits, t->n_inits);
    for (size_t i = 0; i < t->n_nodes; i++) {
        tg_nd *n = &t->nodes[i];
        free(n->domain), free(n->op_type), free(n->inputs), free(n->outputs), free(n->alias);
        for (size_t k = 0; k < n->n_attrs; k++)
            free(n->attrs[k].name), free(n->attrs[k].csv), tg_free(n->attrs[k].body);
    }
    for (size_t i = 0; i < t->n_meta; i++) free(t->meta_k[i]), free(t->meta_v[i]);
    free(t);
}

void tg_input(tg *t, const char *name, const char *dims) {
    t->inputs[t->n_inputs++] = (tg_vi){tg_dup(name), tg_dup(dims)};
}
void tg_value(tg *t, const char *name, const char *dims) {
    t->values[t->n_values++] = (tg_vi){tg_dup(name), tg_dup(dims)};
}
void tg_output(tg *t, const char *name, const char *dims) {
    t->outputs[t->n_outputs++] = (tg_vi){tg_dup(name), tg_dup(dims)};
}
void tg_initializer(tg *t, const char *name, const char *dims) {
    t->inits[t->n_inits++] = (tg_vi){tg_dup(name), tg_dup(dims)};
}
void tg_meta(tg *t, const char *key, const char *value) {
    t->meta_k[t->n_meta] = tg_dup(key);
    t->meta_v[t->n_meta++] = tg_dup(value);
}

int tg_node(tg *t, const char *domain, const char *op_type, const char *inputs,
            const char *outputs) {
    tg_nd *n = &t->nodes[t->n_nodes];
    n->domain = tg_dup(strcmp(domain, "aten") == 0 ? "org.pytorch.aten" : domain);
    n->op_type = tg_dup(op_type);
    n->inputs = tg_dup(inputs);
    n->outputs = tg_dup(outputs);
    return (int)t->n_nodes++;
}

void tg_alias(tg *t, int idx, const char *alias_csv, int inplace) {
    tg_nd *n = &t->nodes[idx];
    free(n->alias);
    n->alias = tg_dup(alias_csv);
    n->inplace = inplace;
    n->has_alias = 1;
}

static tg_at *tg_attr_add(tg *t, int idx, const char *name, int type) {
    tg_nd *n = &t->nodes[idx];
    if (n->n_attrs == TG_MAX_ATTRS) abort(); /* a test asking too much: its bug */
    tg_at *a = &n->attrs[n->n_attrs++];
    *a = (tg_at){.name = tg_dup(name), .type = type};
    return a;
}

void tg_attr_int(tg *t, int idx, const char *name, int64_t v) {
    tg_attr_add(t, idx, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)->i = v;
}

void tg_attr_ints(tg *t, int idx, const char *name, const char *csv) {
    tg_attr_add(t, idx, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS)->csv = tg_dup(csv);
}

void tg_attr_graph(tg *t, int idx, const char *name, tg *body) {
    tg_attr_add(t, idx, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->body = body;
}

/* ---- building the protobuf: everything is allocated here and freed by
 * tg_model_free, never by protobuf-c (the structs are ours). */

/* Splits a comma-separated list; empty entries are kept (optional slots). */
static char **tg_split(const char *s, size_t *n) {
    *n = 0;
    if (!s[0]) return NULL;
    size_t cap = 1;
    for (const char *p = s; *p; p++) cap += *p == ',';
    char **out = calloc(cap, sizeof *out);
    const char *p = s;
    for (;;) {
        const char *q = strchr(p, ',');
        size_t len = q ? (size_t)(q - p) : strlen(p);
        out[*n] = malloc(len + 1);
        memcpy(out[*n], p, len);
        out[(*n)++][len] = 0;
        if (!q) break;
        p = q + 1;
    }
    return out;
}

static void tg_parse_dims(const char *spec, int32_t *elem, int64_t *dims, size_t *nd) {
    *elem = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    const char *colon = strchr(spec, ':');
    if (colon) {
        static const struct {
            const char *k;
            int32_t v;
        } types[] = {{"f32", 1},  {"u8", 2},   {"i8", 3},    {"u16", 4},   {"i16", 5},  {"i32", 6},
                     {"i64", 7},  {"str", 8},  {"bool", 9},  {"f16", 10},  {"f64", 11}, {"u32", 12},
                     {"u64", 13}, {"c64", 14}, {"c128", 15}, {"bf16", 16}, {"u4", 21},  {"i4", 22}};
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
            if (strlen(types[i].k) == (size_t)(colon - spec) &&
                strncmp(spec, types[i].k, (size_t)(colon - spec)) == 0)
                *elem = types[i].v;
        spec = colon + 1;
    }
    *nd = 0;
    while (*spec) {
        if (*spec == '?') { /* symbolic dim */
            dims[(*nd)++] = INT64_MIN;
            spec++;
        } else {
            char *end;
            dims[(*nd)++] = strtoll(spec, &end, 10);
            spec = end;
        }
        if (*spec == 'x') spec++;
    }
}

static Onnx__ValueInfoProto *tg_make_vi(const tg_vi *v) {
    Onnx__ValueInfoProto *vi = calloc(1, sizeof *vi);
    onnx__value_info_proto__init(vi);
    vi->name = v->name;
    if (strcmp(v->dims, "none") == 0) return vi; /* no type at all */
    Onnx__TypeProto *tp = calloc(1, sizeof *tp);
    onnx__type_proto__init(tp);
    Onnx__TypeProto__Tensor *tt = calloc(1, sizeof *tt);
    onnx__type_proto__tensor__init(tt);
    Onnx__TensorShapeProto *sh = calloc(1, sizeof *sh);
    onnx__tensor_shape_proto__init(sh);
    int64_t dims[16];
    size_t nd;
    tg_parse_dims(v->dims, &tt->elem_type, dims, &nd);
    tt->has_elem_type = 1;
    sh->n_dim = nd;
    sh->dim = calloc(nd ? nd : 1, sizeof *sh->dim);
    for (size_t i = 0; i < nd; i++) {
        Onnx__TensorShapeProto__Dimension *d = calloc(1, sizeof *d);
        onnx__tensor_shape_proto__dimension__init(d);
        if (dims[i] == INT64_MIN) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = "N";
        } else {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = dims[i];
        }
        sh->dim[i] = d;
    }
    tt->shape = sh;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    vi->type = tp;
    return vi;
}

static void tg_free_vi(Onnx__ValueInfoProto *vi) {
    if (vi->type) {
        Onnx__TensorShapeProto *sh = vi->type->tensor_type->shape;
        for (size_t i = 0; i < sh->n_dim; i++) free(sh->dim[i]);
        free(sh->dim);
        free(sh);
        free(vi->type->tensor_type);
        free(vi->type);
    }
    free(vi);
}

typedef struct tg_built {
    Onnx__ModelProto model;
    Onnx__GraphProto graph;
    Onnx__OperatorSetIdProto opsets[2], *opset_ptrs[2];
    Onnx__ValueInfoProto **in, **val, **out;
    Onnx__TensorProto *inits, **init_ptrs;
    int64_t *init_dims;
    Onnx__NodeProto *nodes, **node_ptrs;
    Onnx__AttributeProto *attrs; /* TG_MAX_ATTRS + 2 per node */
    Onnx__AttributeProto **attr_ptrs;
    int64_t *attr_ints;       /* TG_MAX_ATTRS * 16 per node */
    struct tg_built **bodies; /* TG_MAX_ATTRS per node, NULL where no GRAPH */
    int64_t *alias_ints;
    char ***node_in, ***node_out;
    size_t *n_in, *n_out;
    Onnx__StringStringEntryProto *meta, **meta_ptrs;
} tg_built;

static void tg_build(const tg *t, tg_built *b);

/* Parses a comma-separated list of at most 16 integers into v. */
static size_t tg_parse_ints(const char *csv, int64_t *v) {
    size_t n;
    char **parts = tg_split(csv, &n);
    for (size_t k = 0; k < n; k++) {
        v[k] = strtoll(parts[k], NULL, 10);
        free(parts[k]);
    }
    free(parts);
    return n;
}

/* Node i's attributes from src->attrs, after the alias pair when there is
 * one; a GRAPH attribute's body is built (and later unbuilt) with it. */
static void tg_build_attrs(const tg_nd *src, size_t i, tg_built *b, Onnx__NodeProto *n) {
    size_t first = src->has_alias ? 2 : 0;
    for (size_t k = 0; k < src->n_attrs; k++) {
        const tg_at *at = &src->attrs[k];
        Onnx__AttributeProto *a = &b->attrs[(TG_MAX_ATTRS + 2) * i + first + k];
        onnx__attribute_proto__init(a);
        a->name = at->name;
        a->has_type = 1;
        a->type = (Onnx__AttributeProto__AttributeType)at->type;
        if (at->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT) {
            a->has_i = 1;
            a->i = at->i;
        } else if (at->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS) {
            a->ints = b->attr_ints + 16 * (TG_MAX_ATTRS * i + k);
            a->n_ints = tg_parse_ints(at->csv, a->ints);
        } else {
            tg_built *sub = calloc(1, sizeof *sub);
            tg_build(at->body, sub);
            b->bodies[TG_MAX_ATTRS * i + k] = sub;
            a->g = &sub->graph;
        }
        b->attr_ptrs[(TG_MAX_ATTRS + 2) * i + first + k] = a;
    }
    if (src->n_attrs || src->has_alias) {
        n->n_attribute = first + src->n_attrs;
        n->attribute = &b->attr_ptrs[(TG_MAX_ATTRS + 2) * i];
    }
}

static void tg_build(const tg *t, tg_built *b) {
    memset(b, 0, sizeof *b);
    onnx__model_proto__init(&b->model);
    onnx__graph_proto__init(&b->graph);
    b->model.has_ir_version = 1;
    b->model.ir_version = 8;
    b->model.producer_name = "roamc-tests";
    for (int i = 0; i < 2; i++) {
        onnx__operator_set_id_proto__init(&b->opsets[i]);
        b->opsets[i].has_version = 1;
        b->opset_ptrs[i] = &b->opsets[i];
    }
    b->opsets[0].domain = "";
    b->opsets[0].version = 17;
    b->opsets[1].domain = "org.pytorch.aten";
    b->opsets[1].version = 1;
    b->model.n_opset_import = 2;
    b->model.opset_import = b->opset_ptrs;
    b->graph.name = "test";
    b->in = calloc(t->n_inputs + 1, sizeof *b->in);
    b->val = calloc(t->n_values + 1, sizeof *b->val);
    b->out = calloc(t->n_outputs + 1, sizeof *b->out);
    for (size_t i = 0; i < t->n_inputs; i++) b->in[i] = tg_make_vi(&t->inputs[i]);
    for (size_t i = 0; i < t->n_values; i++) b->val[i] = tg_make_vi(&t->values[i]);
    for (size_t i = 0; i < t->n_outputs; i++) b->out[i] = tg_make_vi(&t->outputs[i]);
    b->graph.n_input = t->n_inputs, b->graph.input = b->in;
    b->graph.n_value_info = t->n_values, b->graph.value_info = b->val;
    b->graph.n_output = t->n_outputs, b->graph.output = b->out;

    b->inits = calloc(t->n_inits + 1, sizeof *b->inits);
    b->init_ptrs = calloc(t->n_inits + 1, sizeof *b->init_ptrs);
    b->init_dims = calloc(16 * (t->n_inits + 1), sizeof *b->init_dims);
    for (size_t i = 0; i < t->n_inits; i++) {
        Onnx__TensorProto *tp = &b->inits[i];
        onnx__tensor_proto__init(tp);
        tp->name = t->inits[i].name;
        tp->has_data_type = 1;
        tg_parse_dims(t->inits[i].dims, &tp->data_type, b->init_dims + 16 * i, &tp->n_dims);
        tp->dims = b->init_dims + 16 * i;
        b->init_ptrs[i] = tp;
    }
    b->graph.n_initializer = t->n_inits, b->graph.initializer = b->init_ptrs;

    size_t nn = t->n_nodes;
    b->nodes = calloc(nn + 1, sizeof *b->nodes);
    b->node_ptrs = calloc(nn + 1, sizeof *b->node_ptrs);
    b->attrs = calloc((TG_MAX_ATTRS + 2) * nn + 1, sizeof *b->attrs);
    b->attr_ptrs = calloc((TG_MAX_ATTRS + 2) * nn + 1, sizeof *b->attr_ptrs);
    b->attr_ints = calloc(16 * TG_MAX_ATTRS * nn + 1, sizeof *b->attr_ints);
    b->bodies = calloc(TG_MAX_ATTRS * nn + 1, sizeof *b->bodies);
    b->alias_ints = calloc(16 * (nn + 1), sizeof *b->alias_ints);
    b->node_in = calloc(nn + 1, sizeof *b->node_in);
    b->node_out = calloc(nn + 1, sizeof *b->node_out);
    b->n_in = calloc(nn + 1, sizeof *b->n_in);
    b->n_out = calloc(nn + 1, sizeof *b->n_out);
    for (size_t i = 0; i < nn; i++) {
        const tg_nd *src = &t->nodes[i];
        Onnx__NodeProto *n = &b->nodes[i];
        onnx__node_proto__init(n);
        n->op_type = src->op_type;
        n->domain = src->domain;
        b->node_in[i] = tg_split(src->inputs, &b->n_in[i]);
        b->node_out[i] = tg_split(src->outputs, &b->n_out[i]);
        n->input = b->node_in[i], n->n_input = b->n_in[i];
        n->output = b->node_out[i], n->n_output = b->n_out[i];
        if (src->has_alias) {
            Onnx__AttributeProto *a = &b->attrs[(TG_MAX_ATTRS + 2) * i];
            Onnx__AttributeProto *ip = a + 1;
            onnx__attribute_proto__init(a);
            onnx__attribute_proto__init(ip);
            a->name = "alias";
            a->has_type = 1;
            a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
            a->ints = b->alias_ints + 16 * i;
            a->n_ints = tg_parse_ints(src->alias, a->ints);
            ip->name = "inplace";
            ip->has_type = 1;
            ip->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
            ip->has_i = 1;
            ip->i = src->inplace;
            b->attr_ptrs[(TG_MAX_ATTRS + 2) * i] = a;
            b->attr_ptrs[(TG_MAX_ATTRS + 2) * i + 1] = ip;
        }
        tg_build_attrs(src, i, b, n);
        b->node_ptrs[i] = n;
    }
    b->graph.n_node = nn, b->graph.node = b->node_ptrs;
    b->meta = calloc(t->n_meta + 1, sizeof *b->meta);
    b->meta_ptrs = calloc(t->n_meta + 1, sizeof *b->meta_ptrs);
    for (size_t i = 0; i < t->n_meta; i++) {
        onnx__string_string_entry_proto__init(&b->meta[i]);
        b->meta[i].key = t->meta_k[i];
        b->meta[i].value = t->meta_v[i];
        b->meta_ptrs[i] = &b->meta[i];
    }
    b->model.n_metadata_props = t->n_meta, b->model.metadata_props = b->meta_ptrs;
    b->model.graph = &b->graph;
}

static void tg_unbuild(const tg *t, tg_built *b) {
    for (size_t i = 0; i < t->n_inputs; i++) tg_free_vi(b->in[i]);
    for (size_t i = 0; i < t->n_values; i++) tg_free_vi(b->val[i]);
    for (size_t i = 0; i < t->n_outputs; i++) tg_free_vi(b->out[i]);
    for (size_t i = 0; i < t->n_nodes; i++) {
        for (size_t k = 0; k < b->n_in[i]; k++) free(b->node_in[i][k]);
        for (size_t k = 0; k < b->n_out[i]; k++) free(b->node_out[i][k]);
        free(b->node_in[i]);
        free(b->node_out[i]);
        for (size_t k = 0; k < t->nodes[i].n_attrs; k++) {
            tg_built *sub = b->bodies[TG_MAX_ATTRS * i + k];
            if (sub) tg_unbuild(t->nodes[i].attrs[k].body, sub), free(sub);
        }
    }
    free(b->in), free(b->val), free(b->out), free(b->inits), free(b->init_ptrs), free(b->init_dims);
    free(b->nodes), free(b->node_ptrs), free(b->attrs), free(b->attr_ptrs), free(b->alias_ints);
    free(b->attr_ints), free(b->bodies);
    free(b->node_in), free(b->node_out), free(b->n_in), free(b->n_out), free(b->meta),
        free(b->meta_ptrs);
}

uint8_t *tg_pack(const tg *t, size_t *len) {
    tg_built b;
    tg_build(t, &b);
    *len = onnx__model_proto__get_packed_size(&b.model);
    uint8_t *buf = malloc(*len ? *len : 1);
    onnx__model_proto__pack(&b.model, buf);
    tg_unbuild(t, &b);
    return buf;
}

int tg_write(const tg *t, const char *path) {
    size_t len;
    uint8_t *buf = tg_pack(t, &len);
    FILE *f = fopen(path, "wb");
    int rc = (f && fwrite(buf, 1, len, f) == len) ? 0 : -1;
    if (f && fclose(f)) rc = -1;
    free(buf);
    return rc;
}
