/* The step editor (edit.h).
 *
 * The file is unpacked once (fe_unpack_model_counted) and never changed: it
 * owns the original parts.  The edited model is a shallow copy of it whose
 * lists (nodes, value_info, inputs, outputs, metadata, opset imports) are
 * the editor's own arrays of pointers, to original parts or to new ones
 * made in the writer's arena (onnx_write.h).  A node that changes is copied
 * into the arena first.  Writing points the copy at these arrays and packs
 * it with ow_pack, the writer --train's emission uses.
 */
#include "edit.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "frontend.h"
#include "infer/infer.h"
#include "onnx.pb-c.h"
#include "onnx_write.h"
#include "proto.h"

/* Files above this are refused before reading, as fe_load refuses them. */
#define ED_MAX_FILE_BYTES ((size_t)2 << 30)

/* A growable array of pointers into the model (original or arena parts). */
typedef struct ed_list {
    void **p;
    size_t n, cap;
} ed_list;

struct fe_edit {
    char *name;             /* the file's path or the caller's name, for messages */
    Onnx__ModelProto *orig; /* as unpacked; owns every original part */
    ow_arena A;             /* every new part */
    ed_list nodes, value_info, inputs, outputs, meta, opsets;
    /* names some node, graph input or initializer makes -> 1 (borrowed from
     * orig or A), so that a new node cannot make a value a second time */
    fi_names made;
    bool made_stale; /* a node or input was removed: made is rebuilt before use */
};

static int ed_fail(const fe_edit *e, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int ed_fail(const fe_edit *e, char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fe_verrorf(err, errlen, e->name, "edit", fmt, ap);
    va_end(ap);
    return -1;
}

static void ed_list_insert(ed_list *l, size_t at, void *p) {
    ROAMC_ASSERT(at <= l->n);
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->p = xreallocarray(l->p, l->cap, sizeof *l->p);
    }
    memmove(l->p + at + 1, l->p + at, (l->n - at) * sizeof *l->p);
    l->p[at] = p;
    l->n++;
}

static void ed_list_from(ed_list *l, void *const *p, size_t n) {
    for (size_t k = 0; k < n; k++) ed_list_insert(l, l->n, p[k]);
}

static const char *ed_str(const char *s) {
    return s ? s : "";
}

/* ------------------------------------------------------------------ open */

static void ed_note_made(fe_edit *e, const char *name) {
    if (name && name[0]) fi_names_put(&e->made, name, 1);
}
static void ed_renote_made(fe_edit *e);

int fe_edit_open_bytes(const char *name, const uint8_t *bytes, size_t len, fe_edit **out, char *err,
                       size_t errlen) {
    *out = NULL;
    fe_edit *e = xcalloc(1, sizeof *e);
    e->name = xstrdup(name);
    fe_unpack_drops drops;
    e->orig = len ? fe_unpack_model_counted(bytes, len, &drops) : NULL;
    int rc = 0;
    if (!e->orig || !e->orig->graph)
        rc = ed_fail(e, err, errlen,
                     "not an ONNX ModelProto with a graph (%zu bytes; truncated, not protobuf, or "
                     "nested too deep)",
                     len);
    else if (drops.n)
        rc = ed_fail(e, err, errlen,
                     "%zu tensor payloads are larger than the 64 KiB the editor keeps inline (the "
                     "largest %llu bytes): writing the file back would drop them; edit a training "
                     "step without weight data (parameters as graph inputs)",
                     drops.n, (unsigned long long)drops.largest);
    if (rc) {
        fe_edit_free(e);
        return -1;
    }
    const Onnx__ModelProto *m = e->orig;
    const Onnx__GraphProto *g = m->graph;
    ed_list_from(&e->nodes, (void *const *)g->node, g->n_node);
    ed_list_from(&e->value_info, (void *const *)g->value_info, g->n_value_info);
    ed_list_from(&e->inputs, (void *const *)g->input, g->n_input);
    ed_list_from(&e->outputs, (void *const *)g->output, g->n_output);
    ed_list_from(&e->meta, (void *const *)m->metadata_props, m->n_metadata_props);
    ed_list_from(&e->opsets, (void *const *)m->opset_import, m->n_opset_import);
    for (size_t k = 0; k < g->n_input; k++) ed_note_made(e, g->input[k]->name);
    for (size_t k = 0; k < g->n_initializer; k++) ed_note_made(e, g->initializer[k]->name);
    for (size_t i = 0; i < g->n_node; i++)
        for (size_t k = 0; k < g->node[i]->n_output; k++) ed_note_made(e, g->node[i]->output[k]);
    *out = e;
    return 0;
}

int fe_edit_open(const char *path, fe_edit **out, char *err, size_t errlen) {
    *out = NULL;
    fe_edit probe = {.name = (char *)path};
    FILE *f = fopen(path, "rb");
    if (!f) return ed_fail(&probe, err, errlen, "cannot open: %s", strerror(errno));
    uint8_t *buf;
    size_t len;
    int got = roamc_read_all(f, ED_MAX_FILE_BYTES, &buf, &len);
    int rd_errno = got < 0 ? errno : 0;
    fclose(f);
    if (got > 0) return ed_fail(&probe, err, errlen, "more than %zu bytes", ED_MAX_FILE_BYTES);
    if (got < 0) return ed_fail(&probe, err, errlen, "cannot read: %s", strerror(rd_errno));
    int rc = fe_edit_open_bytes(path, buf, len, out, err, errlen);
    free(buf);
    return rc;
}

void fe_edit_free(fe_edit *e) {
    if (!e) return;
    fi_names_free(&e->made);
    ow_arena_free(&e->A);
    ed_list *lists[] = {&e->nodes, &e->value_info, &e->inputs, &e->outputs, &e->meta, &e->opsets};
    for (size_t k = 0; k < sizeof lists / sizeof *lists; k++) free(lists[k]->p);
    if (e->orig) onnx__model_proto__free_unpacked(e->orig, NULL);
    free(e->name);
    free(e);
}

/* ----------------------------------------------------------------- nodes */

static const Onnx__NodeProto *ed_node(const fe_edit *e, size_t i) {
    return i < e->nodes.n ? e->nodes.p[i] : NULL;
}

size_t fe_edit_node_count(const fe_edit *e) {
    return e->nodes.n;
}

bool fe_edit_node(const fe_edit *e, size_t i, fe_edit_node_info *out) {
    const Onnx__NodeProto *n = ed_node(e, i);
    if (!n) return false;
    *out = (fe_edit_node_info){.name = ed_str(n->name),
                               .domain = ed_str(n->domain),
                               .op_type = ed_str(n->op_type),
                               .inputs = (const char *const *)n->input,
                               .n_inputs = n->n_input,
                               .outputs = (const char *const *)n->output,
                               .n_outputs = n->n_output};
    return true;
}

long fe_edit_find_node(const fe_edit *e, const char *name) {
    for (size_t i = 0; i < e->nodes.n; i++)
        if (!strcmp(ed_str(ed_node(e, i)->name), name)) return (long)i;
    return -1;
}

long fe_edit_find_producer(const fe_edit *e, const char *value) {
    for (size_t i = 0; i < e->nodes.n; i++) {
        const Onnx__NodeProto *n = ed_node(e, i);
        for (size_t k = 0; k < n->n_output; k++)
            if (n->output[k] && !strcmp(n->output[k], value)) return (long)i;
    }
    return -1;
}

const char *fe_edit_node_attr_string(fe_edit *e, size_t i, const char *name) {
    const Onnx__NodeProto *n = ed_node(e, i);
    if (!n) return NULL;
    for (size_t a = 0; a < n->n_attribute; a++) {
        const Onnx__AttributeProto *at = n->attribute[a];
        if (!at->name || strcmp(at->name, name) || !at->has_s) continue;
        /* the bytes may hold a NUL or lack the final one: a copy that ends */
        char *s = ow_alloc(&e->A, at->s.len + 1);
        if (at->s.len) memcpy(s, at->s.data, at->s.len);
        return s;
    }
    return NULL;
}

/* The attribute spec a as a protobuf attribute in the arena, or NULL when
 * it has no name or an unknown type. */
static Onnx__AttributeProto *ed_attr(fe_edit *e, const fe_attr_spec *a) {
    if (!a->name || !a->name[0]) return NULL;
    const char *name = ow_strdup(&e->A, a->name);
    switch (a->type) {
    case FE_ATTR_INT: return ow_attr_int(&e->A, name, a->i);
    case FE_ATTR_INTS: return ow_attr_ints(&e->A, name, a->ints, a->n_ints);
    case FE_ATTR_FLOAT: return ow_attr_float(&e->A, name, a->f);
    case FE_ATTR_STRING: return ow_attr_string(&e->A, name, ow_strdup(&e->A, ed_str(a->s)));
    default: return NULL;
    }
}

static char **ed_names(fe_edit *e, const char *const *names, size_t n) {
    char **c = ow_alloc(&e->A, n * sizeof *c);
    for (size_t k = 0; k < n; k++) c[k] = ow_strdup(&e->A, ed_str(names[k]));
    return c;
}

/* Fails unless outputs[0..n) are n >= 1 names, new to the model and to
 * each other. */
static int ed_check_outputs(const fe_edit *e, const char *const *outputs, size_t n, char *err,
                            size_t errlen) {
    if (n == 0) return ed_fail(e, err, errlen, "a new node needs at least one output");
    size_t named = 0;
    for (size_t k = 0; k < n; k++) {
        const char *o = ed_str(outputs[k]);
        if (!o[0]) continue;
        named++;
        if (fi_names_get(&e->made, o) >= 0)
            return ed_fail(e, err, errlen,
                           "output '%s' is made already (by a node or as a graph "
                           "input or initializer)",
                           o);
        for (size_t j = 0; j < k; j++)
            if (!strcmp(ed_str(outputs[j]), o))
                return ed_fail(e, err, errlen, "output '%s' is named twice", o);
    }
    if (!named) return ed_fail(e, err, errlen, "a new node needs at least one named output");
    return 0;
}

/* Imports domain at version 1 unless the model imports it already. */
static void ed_import_domain(fe_edit *e, const char *domain) {
    if (!domain || !domain[0]) return;
    for (size_t k = 0; k < e->opsets.n; k++) {
        const Onnx__OperatorSetIdProto *op = e->opsets.p[k];
        if (op->domain && !strcmp(op->domain, domain)) return;
    }
    Onnx__OperatorSetIdProto *op = ow_alloc(&e->A, sizeof *op);
    *op = (Onnx__OperatorSetIdProto)ONNX__OPERATOR_SET_ID_PROTO__INIT;
    op->domain = ow_strdup(&e->A, domain);
    op->has_version = 1;
    op->version = 1;
    ed_list_insert(&e->opsets, e->opsets.n, op);
}

/* Puts node n at position and notes what it makes. */
static void ed_place(fe_edit *e, size_t position, Onnx__NodeProto *n) {
    ed_list_insert(&e->nodes, position, n);
    for (size_t k = 0; k < n->n_output; k++) ed_note_made(e, n->output[k]);
    ed_import_domain(e, n->domain);
}

int fe_edit_insert_node(fe_edit *e, size_t position, const fe_node_spec *spec, char *err,
                        size_t errlen) {
    if (position > e->nodes.n)
        return ed_fail(e, err, errlen, "position %zu is past the %zu nodes", position, e->nodes.n);
    if (!spec->op_type || !spec->op_type[0])
        return ed_fail(e, err, errlen, "a new node needs an op_type");
    ed_renote_made(e);
    if (ed_check_outputs(e, spec->outputs, spec->n_outputs, err, errlen)) return -1;
    for (size_t k = 0; k < spec->n_attrs; k++) {
        const fe_attr_spec *a = &spec->attrs[k];
        if (!a->name || !a->name[0] || a->type < FE_ATTR_INT || a->type > FE_ATTR_STRING)
            return ed_fail(e, err, errlen, "attribute %zu of the new %s node: %s", k, spec->op_type,
                           !a->name || !a->name[0] ? "no name" : "unknown type");
    }
    Onnx__AttributeProto **attrs = ow_alloc(&e->A, spec->n_attrs * sizeof *attrs);
    for (size_t k = 0; k < spec->n_attrs; k++) attrs[k] = ed_attr(e, &spec->attrs[k]);
    ow_node_parts parts = {.name = ow_strdup(&e->A, ed_str(spec->name)),
                           .domain = spec->domain ? ow_strdup(&e->A, spec->domain) : NULL,
                           .op_type = ow_strdup(&e->A, spec->op_type),
                           .inputs = ed_names(e, spec->inputs, spec->n_inputs),
                           .n_inputs = spec->n_inputs,
                           .outputs = ed_names(e, spec->outputs, spec->n_outputs),
                           .n_outputs = spec->n_outputs,
                           .attrs = attrs,
                           .n_attrs = spec->n_attrs};
    ed_place(e, position, ow_node(&e->A, &parts));
    return 0;
}

int fe_edit_clone_node(fe_edit *e, const fe_clone_spec *spec, char *err, size_t errlen) {
    const Onnx__NodeProto *src = ed_node(e, spec->node);
    if (!src)
        return ed_fail(e, err, errlen, "node %zu to clone is past the %zu nodes", spec->node,
                       e->nodes.n);
    if (spec->position > e->nodes.n)
        return ed_fail(e, err, errlen, "position %zu is past the %zu nodes", spec->position,
                       e->nodes.n);
    if (spec->n_outputs != src->n_output)
        return ed_fail(e, err, errlen,
                       "the clone of node %zu ('%s', %s) needs %zu outputs, not %zu", spec->node,
                       ed_str(src->name), ed_str(src->op_type), src->n_output, spec->n_outputs);
    ed_renote_made(e);
    if (ed_check_outputs(e, spec->outputs, spec->n_outputs, err, errlen)) return -1;
    bool extra = spec->extra.name != NULL;
    if (extra && (!spec->extra.name[0] || spec->extra.type < FE_ATTR_INT ||
                  spec->extra.type > FE_ATTR_STRING))
        return ed_fail(e, err, errlen, "the clone's extra attribute: %s",
                       !spec->extra.name[0] ? "no name" : "unknown type");
    Onnx__NodeProto *c = ow_alloc(&e->A, sizeof *c);
    *c = *src; /* inputs and the node's own attributes are shared, never changed in place */
    char name[512];
    snprintf(name, sizeof name, "%s_recompute", ed_str(src->name));
    c->name = ow_strdup(&e->A, spec->name ? spec->name : name);
    c->output = ed_names(e, spec->outputs, spec->n_outputs);
    c->n_output = spec->n_outputs;
    if (extra) {
        Onnx__AttributeProto **at = ow_alloc(&e->A, (src->n_attribute + 1) * sizeof *at);
        if (src->n_attribute) memcpy(at, src->attribute, src->n_attribute * sizeof *at);
        at[src->n_attribute] = ed_attr(e, &spec->extra);
        c->attribute = at;
        c->n_attribute = src->n_attribute + 1;
    }
    ed_place(e, spec->position, c);
    return 0;
}

int fe_edit_replace_input(fe_edit *e, size_t node, size_t slot, const char *value, char *err,
                          size_t errlen) {
    const Onnx__NodeProto *n = ed_node(e, node);
    if (!n) return ed_fail(e, err, errlen, "node %zu is past the %zu nodes", node, e->nodes.n);
    if (slot >= n->n_input)
        return ed_fail(e, err, errlen, "node %zu ('%s', %s) has %zu inputs, no input %zu", node,
                       ed_str(n->name), ed_str(n->op_type), n->n_input, slot);
    if (!value || !value[0])
        return ed_fail(e, err, errlen, "node %zu: input %zu replaced by an empty name", node, slot);
    Onnx__NodeProto *c = ow_alloc(&e->A, sizeof *c);
    *c = *n;
    c->input = ow_alloc(&e->A, n->n_input * sizeof *c->input);
    memcpy(c->input, n->input, n->n_input * sizeof *c->input);
    c->input[slot] = ow_strdup(&e->A, value);
    e->nodes.p[node] = c;
    return 0;
}

/* The names made now, from scratch (fi_names cannot forget a name), when
 * a removal made the table stale. */
static void ed_renote_made(fe_edit *e) {
    if (!e->made_stale) return;
    e->made_stale = false;
    fi_names_free(&e->made);
    const Onnx__GraphProto *g = e->orig->graph;
    for (size_t k = 0; k < e->inputs.n; k++)
        ed_note_made(e, ((const Onnx__ValueInfoProto *)e->inputs.p[k])->name);
    for (size_t k = 0; k < g->n_initializer; k++) ed_note_made(e, g->initializer[k]->name);
    for (size_t i = 0; i < e->nodes.n; i++) {
        const Onnx__NodeProto *n = e->nodes.p[i];
        for (size_t k = 0; k < n->n_output; k++) ed_note_made(e, n->output[k]);
    }
}

static void ed_list_remove(ed_list *l, size_t at) {
    ROAMC_ASSERT(at < l->n);
    memmove(l->p + at, l->p + at + 1, (l->n - at - 1) * sizeof *l->p);
    l->n--;
}

int fe_edit_remove_node(fe_edit *e, size_t i, char *err, size_t errlen) {
    if (i >= e->nodes.n)
        return ed_fail(e, err, errlen, "node %zu to remove is past the %zu nodes", i, e->nodes.n);
    ed_list_remove(&e->nodes, i);
    e->made_stale = true;
    return 0;
}

/* Removes every entry of l named name. */
static void ed_remove_named(ed_list *l, const char *name) {
    for (size_t k = l->n; k-- > 0;) {
        const Onnx__ValueInfoProto *v = l->p[k];
        if (v->name && !strcmp(v->name, name)) ed_list_remove(l, k);
    }
}

void fe_edit_remove_value(fe_edit *e, const char *name) {
    size_t inputs = e->inputs.n;
    ed_remove_named(&e->inputs, name);
    ed_remove_named(&e->outputs, name);
    ed_remove_named(&e->value_info, name);
    if (e->inputs.n != inputs) e->made_stale = true;
}

/* ---------------------------------------------------------------- values */

static Onnx__ValueInfoProto *ed_value_info(fe_edit *e, const fe_value_spec *v, char *err,
                                           size_t errlen) {
    if (!v->name || !v->name[0]) {
        ed_fail(e, err, errlen, "a value needs a name");
        return NULL;
    }
    if (v->rank > FI_MAX_RANK) {
        ed_fail(e, err, errlen, "value '%s': rank %zu is above %d", v->name, v->rank, FI_MAX_RANK);
        return NULL;
    }
    for (size_t d = 0; d < v->rank; d++)
        if (v->dims[d] < 0) {
            ed_fail(e, err, errlen, "value '%s': dim %zu is %lld", v->name, d,
                    (long long)v->dims[d]);
            return NULL;
        }
    return ow_value_info(&e->A, ow_strdup(&e->A, v->name), v->elem_type, (int)v->rank, v->dims);
}

/* Replaces the entry of vi's name in l, else appends vi. */
static void ed_put_value(ed_list *l, Onnx__ValueInfoProto *vi) {
    for (size_t k = 0; k < l->n; k++) {
        const Onnx__ValueInfoProto *old = l->p[k];
        if (old->name && !strcmp(old->name, vi->name)) {
            l->p[k] = vi;
            return;
        }
    }
    ed_list_insert(l, l->n, vi);
}

int fe_edit_add_value_info(fe_edit *e, const fe_value_spec *v, char *err, size_t errlen) {
    Onnx__ValueInfoProto *vi = ed_value_info(e, v, err, errlen);
    if (!vi) return -1;
    ed_put_value(&e->value_info, vi);
    return 0;
}

int fe_edit_set_input(fe_edit *e, const fe_value_spec *v, char *err, size_t errlen) {
    Onnx__ValueInfoProto *vi = ed_value_info(e, v, err, errlen);
    if (!vi) return -1;
    ed_put_value(&e->inputs, vi);
    ed_renote_made(e);
    ed_note_made(e, vi->name);
    return 0;
}

int fe_edit_set_output(fe_edit *e, const fe_value_spec *v, char *err, size_t errlen) {
    Onnx__ValueInfoProto *vi = ed_value_info(e, v, err, errlen);
    if (!vi) return -1;
    ed_put_value(&e->outputs, vi);
    return 0;
}

/* -------------------------------------------------------------- metadata */

const char *fe_edit_meta(const fe_edit *e, const char *key) {
    for (size_t k = 0; k < e->meta.n; k++) {
        const Onnx__StringStringEntryProto *m = e->meta.p[k];
        if (m->key && !strcmp(m->key, key)) return ed_str(m->value);
    }
    return NULL;
}

void fe_edit_set_meta(fe_edit *e, const char *key, const char *value) {
    Onnx__StringStringEntryProto *entry = ow_meta_entry(&e->A, key, value);
    for (size_t k = 0; k < e->meta.n; k++) {
        const Onnx__StringStringEntryProto *m = e->meta.p[k];
        if (m->key && !strcmp(m->key, key)) {
            e->meta.p[k] = entry;
            return;
        }
    }
    ed_list_insert(&e->meta, e->meta.n, entry);
}

/* ----------------------------------------------------------------- write */

void fe_edit_bytes(const fe_edit *e, uint8_t **bytes, size_t *len) {
    Onnx__ModelProto m = *e->orig;
    Onnx__GraphProto g = *e->orig->graph;
    g.node = (Onnx__NodeProto **)e->nodes.p;
    g.n_node = e->nodes.n;
    g.value_info = (Onnx__ValueInfoProto **)e->value_info.p;
    g.n_value_info = e->value_info.n;
    g.input = (Onnx__ValueInfoProto **)e->inputs.p;
    g.n_input = e->inputs.n;
    g.output = (Onnx__ValueInfoProto **)e->outputs.p;
    g.n_output = e->outputs.n;
    m.graph = &g;
    m.metadata_props = (Onnx__StringStringEntryProto **)e->meta.p;
    m.n_metadata_props = e->meta.n;
    m.opset_import = (Onnx__OperatorSetIdProto **)e->opsets.p;
    m.n_opset_import = e->opsets.n;
    ow_pack(&m, bytes, len);
}

int fe_edit_write(const fe_edit *e, const char *path, char *err, size_t errlen) {
    uint8_t *bytes;
    size_t len;
    fe_edit_bytes(e, &bytes, &len);
    int rc = 0;
    if (roamc_write_file(path, bytes, len))
        rc = ed_fail(e, err, errlen, "cannot write '%s': %s", path, strerror(errno));
    free(bytes);
    return rc;
}
