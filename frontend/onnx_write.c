/* The ONNX writer (onnx_write.h): messages in an arena, packed by protobuf-c.
 * Packing writes fields in field-number order whatever the order they were
 * set in, so two writers that set the same fields write the same bytes. */
#include "onnx_write.h"

#include <stdlib.h>
#include <string.h>

#include "base.h"

void *ow_alloc(ow_arena *a, size_t size) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 4096;
        a->p = xreallocarray(a->p, cap, sizeof *a->p);
        a->cap = cap;
    }
    return a->p[a->n++] = xcalloc(1, size);
}

char *ow_strdup(ow_arena *a, const char *s) {
    size_t len = strlen(s);
    char *c = ow_alloc(a, len + 1);
    memcpy(c, s, len + 1);
    return c;
}

void ow_arena_free(ow_arena *a) {
    for (size_t i = 0; i < a->n; i++) free(a->p[i]);
    free(a->p);
    memset(a, 0, sizeof *a);
}

Onnx__ValueInfoProto *ow_value_info(ow_arena *a, const char *name, int32_t elem, int rank,
                                    const int64_t *dims) {
    Onnx__ValueInfoProto *vi = ow_alloc(a, sizeof *vi);
    Onnx__TypeProto *tp = ow_alloc(a, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = ow_alloc(a, sizeof *tt);
    Onnx__TensorShapeProto *sp = ow_alloc(a, sizeof *sp);
    size_t n_dims = (size_t)(rank > 0 ? rank : 0);
    Onnx__TensorShapeProto__Dimension **dv = ow_alloc(a, n_dims * sizeof *dv);
    *vi = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
    *tp = (Onnx__TypeProto)ONNX__TYPE_PROTO__INIT;
    *tt = (Onnx__TypeProto__Tensor)ONNX__TYPE_PROTO__TENSOR__INIT;
    *sp = (Onnx__TensorShapeProto)ONNX__TENSOR_SHAPE_PROTO__INIT;
    for (size_t d = 0; d < n_dims; d++) {
        Onnx__TensorShapeProto__Dimension *dm = ow_alloc(a, sizeof *dm);
        *dm = (Onnx__TensorShapeProto__Dimension)ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
        dm->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        dm->dim_value = dims[d];
        dv[d] = dm;
    }
    sp->n_dim = n_dims;
    sp->dim = dv;
    tt->has_elem_type = 1;
    tt->elem_type = elem;
    tt->shape = sp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    vi->name = (char *)name;
    vi->type = tp;
    return vi;
}

/* An attribute of the given name and type, its value still to set. */
static Onnx__AttributeProto *ow_attr(ow_arena *a, const char *name,
                                     Onnx__AttributeProto__AttributeType type) {
    Onnx__AttributeProto *at = ow_alloc(a, sizeof *at);
    *at = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
    at->name = (char *)name;
    at->has_type = 1;
    at->type = type;
    return at;
}

Onnx__AttributeProto *ow_attr_int(ow_arena *a, const char *name, int64_t v) {
    Onnx__AttributeProto *at = ow_attr(a, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    at->has_i = 1;
    at->i = v;
    return at;
}

Onnx__AttributeProto *ow_attr_ints(ow_arena *a, const char *name, const int64_t *v, size_t n) {
    Onnx__AttributeProto *at = ow_attr(a, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    int64_t *ints = ow_alloc(a, n * sizeof *ints);
    if (n) memcpy(ints, v, n * sizeof *ints);
    at->n_ints = n;
    at->ints = ints;
    return at;
}

Onnx__AttributeProto *ow_attr_float(ow_arena *a, const char *name, float v) {
    Onnx__AttributeProto *at = ow_attr(a, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    at->has_f = 1;
    at->f = v;
    return at;
}

Onnx__AttributeProto *ow_attr_string(ow_arena *a, const char *name, const char *s) {
    Onnx__AttributeProto *at = ow_attr(a, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    at->has_s = 1;
    at->s.len = strlen(s);
    at->s.data = (uint8_t *)s;
    return at;
}

Onnx__NodeProto *ow_node(ow_arena *a, const ow_node_parts *p) {
    Onnx__NodeProto *n = ow_alloc(a, sizeof *n);
    *n = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
    n->name = (char *)p->name;
    n->op_type = (char *)p->op_type;
    n->domain = p->domain && p->domain[0] ? (char *)p->domain : NULL;
    n->input = p->inputs;
    n->n_input = p->n_inputs;
    n->output = p->outputs;
    n->n_output = p->n_outputs;
    n->attribute = p->attrs;
    n->n_attribute = p->n_attrs;
    return n;
}

Onnx__StringStringEntryProto *ow_meta_entry(ow_arena *a, const char *key, const char *value) {
    Onnx__StringStringEntryProto *e = ow_alloc(a, sizeof *e);
    *e = (Onnx__StringStringEntryProto)ONNX__STRING_STRING_ENTRY_PROTO__INIT;
    e->key = ow_strdup(a, key);
    e->value = ow_strdup(a, value);
    return e;
}

void ow_pack(const Onnx__ModelProto *m, uint8_t **bytes, size_t *len) {
    *len = onnx__model_proto__get_packed_size(m);
    *bytes = xmalloc(*len);
    onnx__model_proto__pack(m, *bytes);
}
