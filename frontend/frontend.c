/* ONNX loader: protobuf-c ModelProto -> fe_model (see frontend.h).
 *
 * Reading order, top to bottom: file bytes -> protobuf unpack -> value table
 * (inputs, initializers, node outputs) -> node inputs resolved -> shapes from
 * the value_info lists -> aliasing -> checks that every value has a size.
 */
#include "frontend.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "digest.h"
#include "infer/infer.h"
#include "onnx.pb-c.h"
#include "proto.h"

/* Files larger than this are rejected before reading: a training graph with
 * no weight data is a few MB; this only guards against reading a disk image. */
#define FE_MAX_FILE_BYTES ((size_t)2 << 30)

/* ------------------------------------------------------------------ errors */

typedef struct fe_err {
    const char *path;
    char *buf;
    size_t len;
} fe_err;

int fe_verrorf(char *buf, size_t len, const char *path, const char *tag, const char *fmt,
               va_list ap) {
    if (!buf || !len) return -1;
    size_t n = strlen(path) + (tag ? strlen(tag) + 2 : 0) + 3;
    char *prefix = xmalloc(n);
    snprintf(prefix, n, "%s: %s%s", path, tag ? tag : "", tag ? ": " : "");
    roamc_verrorf(buf, len, prefix, fmt, ap);
    free(prefix);
    fe_make_printable(buf);
    return -1;
}

static int fe_fail(const fe_err *e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fe_verrorf(e->buf, e->len, e->path, NULL, fmt, ap);
    va_end(ap);
    return -1;
}

void fe_make_printable(char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

/* Bytes of n elements of bits each, or -1 on overflow. */
static int fe_bytes_of(uint64_t elems, unsigned bits, uint64_t *bytes) {
    if (bits % 8 == 0) return __builtin_mul_overflow(elems, (uint64_t)(bits / 8), bytes) ? -1 : 0;
    *bytes = elems / 2 + elems % 2; /* 4-bit types pack two per byte */
    return 0;
}

/* ---------------------------------------------------------- nesting depth */

/* protobuf-c unpacks a sub-message by recursion, with no depth limit: a file
 * of 150 KB that nests TypeProto in TypeProto (or a graph in an attribute of
 * a node of a graph ...) 20,000 deep overflows the stack.  So before
 * unpacking, the wire format is walked with the same descriptors and nesting
 * deeper than protobuf's own default limit (100, which the ONNX reference
 * parser keeps) is refused.  The walk follows only length-delimited fields
 * that the schema says are messages; anything malformed ends it quietly, as
 * protobuf-c then rejects the bytes itself. */
#define FE_MAX_NESTING 100

static bool fe_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
    uint64_t x = 0;
    for (unsigned shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}

/* Tensor payloads larger than this are dropped before unpacking: planning
 * needs their dims, never their data, and protobuf-c would copy every byte
 * of every weight.  Shape computations read only small constants. */
#define FE_STRIP_BYTES ((uint64_t)64 << 10)

/* The copy being made of the model's bytes (see fe_wire_copy). */
typedef struct fe_wire {
    const uint8_t *base;
    uint8_t *out;
    size_t n;
    size_t deep_at;           /* where nesting went past FE_MAX_NESTING */
    size_t n_dropped;         /* tensor payloads dropped (above FE_STRIP_BYTES) */
    uint64_t largest_dropped; /* the largest of them, in bytes */
} fe_wire;

/* TensorProto fields that hold data: float_data, int32_data, string_data,
 * int64_data, raw_data, double_data, uint64_data. */
static bool fe_is_tensor_data(unsigned field) {
    return (field >= 4 && field <= 7) || field == 9 || field == 10 || field == 11;
}

/* Copies the message [p, end) of type d to w->out, without tensor payloads
 * above FE_STRIP_BYTES (the lengths of the enclosing messages re-encoded).
 * Anything malformed is copied as it is, for protobuf-c to refuse.
 * Returns 1 when messages nest deeper than FE_MAX_NESTING, else 0.  The
 * output grows by at most 10 bytes per nesting level beyond the input. */
static int fe_wire_copy(fe_wire *w, const uint8_t *p, const uint8_t *end,
                        const ProtobufCMessageDescriptor *d, int depth) {
    if (depth > FE_MAX_NESTING) {
        w->deep_at = (size_t)(p - w->base);
        return 1;
    }
    bool tensor = d == &onnx__tensor_proto__descriptor;
    const uint8_t *field = p;
    while (p < end) {
        field = p;
        uint64_t key, len;
        if (!fe_varint(&p, end, &key) || (key >> 3) == 0 || (key >> 3) > UINT32_MAX) goto verbatim;
        const uint8_t *after_key = p;
        switch (key & 7) {
        case 0: /* varint */
            if (!fe_varint(&p, end, &len)) goto verbatim;
            break;
        case 1: /* 64-bit */
            if (end - p < 8) goto verbatim;
            p += 8;
            break;
        case 5: /* 32-bit */
            if (end - p < 4) goto verbatim;
            p += 4;
            break;
        case 2: { /* length-delimited: bytes, string, packed numbers or a message */
            if (!fe_varint(&p, end, &len) || len > (uint64_t)(end - p)) goto verbatim;
            unsigned num = (unsigned)(key >> 3);
            if (tensor && len > FE_STRIP_BYTES && fe_is_tensor_data(num)) {
                w->n_dropped++;
                if (len > w->largest_dropped) w->largest_dropped = len;
                p += len; /* a weight: dropped */
                continue;
            }
            const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(d, num);
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE && f->descriptor) {
                size_t key_len = (size_t)(after_key - field);
                memcpy(w->out + w->n, field, key_len);
                size_t len_at = w->n + key_len, start = len_at + 10;
                w->n = start;
                if (fe_wire_copy(w, p, p + len, f->descriptor, depth + 1)) return 1;
                uint64_t clen = w->n - start;
                uint8_t v[10];
                size_t vl = 0;
                do {
                    v[vl] = (uint8_t)(clen & 0x7f) | (clen >= 0x80 ? 0x80 : 0);
                    clen >>= 7;
                    vl++;
                } while (clen);
                memmove(w->out + len_at + vl, w->out + start, w->n - start);
                memcpy(w->out + len_at, v, vl);
                w->n = len_at + vl + (w->n - start);
                p += len;
                continue;
            }
            p += len;
            break;
        }
        default: goto verbatim; /* groups and unknown wire types: protobuf-c refuses them */
        }
        memcpy(w->out + w->n, field, (size_t)(p - field));
        w->n += (size_t)(p - field);
    }
    return 0;
verbatim:
    memcpy(w->out + w->n, field, (size_t)(end - field));
    w->n += (size_t)(end - field);
    return 0;
}

Onnx__ModelProto *fe_unpack_model(const uint8_t *bytes, size_t len) {
    return fe_unpack_model_counted(bytes, len, NULL);
}

Onnx__ModelProto *fe_unpack_model_counted(const uint8_t *bytes, size_t len,
                                          fe_unpack_drops *drops) {
    fe_wire w = {.base = bytes, .out = xmalloc(len + 10 * (FE_MAX_NESTING + 2))};
    Onnx__ModelProto *mp = NULL;
    if (!fe_wire_copy(&w, bytes, bytes + len, &onnx__model_proto__descriptor, 0))
        mp = onnx__model_proto__unpack(NULL, w.n, w.out);
    free(w.out);
    if (drops) *drops = (fe_unpack_drops){w.n_dropped, w.largest_dropped};
    return mp;
}

/* --------------------------------------------------------------- loading */

/* State while building one model: the protobuf, the table, the error sink. */
typedef struct fe_loader {
    const Onnx__ModelProto *mp;
    const Onnx__GraphProto *g;
    fe_model *m;
    fe_err err;
} fe_loader;

static const char *fe_node_label(const Onnx__NodeProto *n) {
    return (n->name && n->name[0]) ? n->name : (n->op_type ? n->op_type : "?");
}

/* Adds a value named name; returns its index, or -1 when it already exists
 * (the caller reports who defined it first).  The value array has room for
 * every value the graph can define (fe_build sizes it up front). */
static int fe_add_value(fe_loader *L, const char *name, int producer, unsigned kind) {
    fe_model *m = L->m;
    fe_value *v = &m->values[m->n_values];
    memset(v, 0, sizeof *v);
    v->name = xstrdup(name);
    if (!fi_names_put(m->names, v->name, (int)m->n_values)) {
        free(v->name);
        v->name = NULL;
        return -1;
    }
    v->producer = producer;
    v->kind = kind;
    return (int)m->n_values++;
}

static int fe_describe_definer(fe_loader *L, int idx, char *buf, size_t len) {
    const fe_value *v = &L->m->values[idx];
    if (v->producer >= 0)
        return snprintf(buf, len, "node '%s' (#%d)", fe_node_label(L->g->node[v->producer]),
                        v->producer);
    return snprintf(buf, len, "%s",
                    (v->kind & FE_INITIALIZER) ? "an initializer" : "a graph input");
}

/* ------------------------------------------------------------- aliasing */

/* Default aliasing, for nodes without an `alias` attribute; the same lists as
 * shared/tools/check_plan.py so that both agree on every file. */
static const char *const fe_std_views[] = {"Reshape",   "Flatten",  "Squeeze",
                                           "Unsqueeze", "Identity", NULL};
static const char *const fe_aten_views[] = {
    "view",         "_unsafe_view",     "reshape",   "_reshape_alias", "t",
    "transpose",    "permute",          "expand",    "detach",         "alias",
    "squeeze",      "unsqueeze",        "slice",     "select",         "as_strided",
    "split",        "split_with_sizes", "unbind",    "narrow",         "diagonal",
    "unfold",       "view_as",          "expand_as", "numpy_T",        "chunk",
    "tensor_split", "movedim",          "flatten",   "unflatten",      NULL};

static bool fe_in_list(const char *const *list, const char *s, size_t len) {
    for (; *list; list++)
        if (strlen(*list) == len && strncmp(*list, s, len) == 0) return true;
    return false;
}

static const Onnx__AttributeProto *fe_attr(const Onnx__NodeProto *n, const char *name) {
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i] && n->attribute[i]->name && strcmp(n->attribute[i]->name, name) == 0)
            return n->attribute[i];
    return NULL;
}

static int fe_node_alias(fe_loader *L, size_t ni, fe_node *fn) {
    const Onnx__NodeProto *n = L->g->node[ni];
    for (size_t k = 0; k < fn->n_outputs; k++) fn->alias[k] = -1;
    fn->inplace = 0;
    const Onnx__AttributeProto *a = fe_attr(n, "alias");
    if (a) {
        if (a->n_ints > fn->n_outputs)
            return fe_fail(&L->err,
                           "node '%s' (#%zu): attribute alias has %zu entries for %zu outputs",
                           fe_node_label(n), ni, a->n_ints, fn->n_outputs);
        for (size_t k = 0; k < a->n_ints; k++) {
            int64_t j = a->ints[k];
            if (j < -1 || j >= (int64_t)fn->n_explicit_inputs || (j >= 0 && fn->inputs[j] < 0))
                return fe_fail(
                    &L->err,
                    "node '%s' (#%zu): alias[%zu] = %lld does not name one of its %zu inputs",
                    fe_node_label(n), ni, k, (long long)j, fn->n_explicit_inputs);
            fn->alias[k] = (int)j;
        }
        const Onnx__AttributeProto *ip = fe_attr(n, "inplace");
        fn->inplace = (ip && ip->i) ? 1 : 0;
        return 0;
    }
    const char *dom = fn->domain;
    const char *op = fn->op_type;
    if ((dom[0] == '\0' || strcmp(dom, "ai.onnx") == 0) &&
        fe_in_list(fe_std_views, op, strlen(op))) {
        if (fn->n_outputs && fn->n_explicit_inputs && fn->inputs[0] >= 0) fn->alias[0] = 0;
    } else if (strcmp(dom, "org.pytorch.aten") == 0) {
        size_t base = strcspn(op, "."); /* "add_.Tensor" -> "add_" */
        if (fe_in_list(fe_aten_views, op, base)) {
            if (fn->n_explicit_inputs && fn->inputs[0] >= 0)
                for (size_t k = 0; k < fn->n_outputs; k++) fn->alias[k] = 0;
        } else if (base > 1 && op[base - 1] == '_' && op[0] != '_') {
            if (fn->n_outputs && fn->n_explicit_inputs && fn->inputs[0] >= 0) {
                fn->alias[0] = 0;
                fn->inplace = 1;
            }
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ shapes */

/* The input symbols no binding sets that dims of the graph inputs are,
 * each once, as "--dim batch=N --dim seq=N" into buf.  Returns how many. */
static size_t fe_unbound_inputs(const fe_loader *L, const fi_ctx *cx, char *buf, size_t len) {
    const fe_model *m = L->m;
    bool *seen = xcalloc(m->n_symbols + 1, sizeof *seen);
    size_t n = 0, off = 0;
    buf[0] = 0;
    for (size_t k = 0; k < m->n_inputs; k++) {
        const fe_value *v = &m->values[m->inputs[k]];
        if (!(v->kind & FE_GRAPH_INPUT) || (v->kind & FE_INITIALIZER)) continue;
        const fi_tensor *t = fi_lookup(cx, v->name);
        for (int d = 0; t && d < t->rank; d++) {
            int32_t sym = t->dims[d].sym;
            if (t->dims[d].v >= 0 || sym < 0 || (size_t)sym >= m->n_symbols || seen[sym]) continue;
            const fe_symbol *s = &m->symbols[sym];
            if (s->kind != FE_SYMBOL_INPUT || s->value >= 0) continue;
            seen[sym] = true;
            n++;
            if (off < len)
                off +=
                    (size_t)snprintf(buf + off, len - off, "%s--dim %s=N", off ? " " : "", s->name);
        }
    }
    free(seen);
    return n;
}

/* Describes why dim d of value v is unknown, and the flag that fixes it;
 * for a symbol of the inputs, every input symbol left unbound at once. */
static int fe_unknown_dim_fail(fe_loader *L, const fi_ctx *cx, const fe_value *v,
                               const fi_tensor *t, int d) {
    char where[320];
    if (v->producer >= 0) {
        const Onnx__NodeProto *np = L->g->node[v->producer];
        snprintf(where, sizeof where, "output of node '%s' #%d, %s", fe_node_label(np), v->producer,
                 np->op_type);
    } else {
        snprintf(where, sizeof where, "%s",
                 (v->kind & FE_INITIALIZER) ? "initializer" : "graph input");
    }
    const fe_model *m = L->m;
    int32_t sym = t && d >= 0                       ? t->dims[d].sym
                  : t && t->seq && t->seq_len.v < 0 ? t->seq_len.sym
                                                    : fi_blame(t);
    if (sym >= 0 && (size_t)sym < m->n_symbols) {
        const fe_symbol *s = &m->symbols[sym];
        if (s->kind == FE_SYMBOL_DATA)
            return fe_fail(
                &L->err,
                "value '%s' (%s): dim %d depends on data (symbol '%s') and no upper bound is "
                "known; set one with --dim '%s'=N",
                v->name, where, d, s->name, s->name);
        char all[768];
        size_t n_all = fe_unbound_inputs(L, cx, all, sizeof all);
        char more[1024] = "";
        if (n_all > 1)
            snprintf(more, sizeof more, "; the graph inputs leave %zu symbols unbound: %s", n_all,
                     all);
        if (v->producer < 0 && t && d >= 0 && t->dims[d].exact)
            return fe_fail(
                &L->err,
                "graph input '%s' dim %d is the symbol '%s', which nothing binds; bind it with "
                "--dim %s=N (or --input-shape %s=D1,D2,...)%s",
                v->name, d, s->name, s->name, v->name, more);
        return fe_fail(
            &L->err,
            "value '%s' (%s): dim %d %s the symbol '%s', which nothing binds; bind it with "
            "--dim %s=N (or the input's shape with --input-shape NAME=D1,D2,...)%s",
            v->name, where, d, t && d >= 0 && t->dims[d].exact ? "is" : "depends on", s->name,
            s->name, more);
    }
    if (v->producer < 0)
        return fe_fail(
            &L->err,
            "graph input '%s' has no %s in the file; give it with --input-shape %s=D1,D2,...",
            v->name, t && t->elem ? "static shape" : "tensor type", v->name);
    const Onnx__NodeProto *np = L->g->node[v->producer];
    if (!fi_rule_exists(np->domain, np->op_type))
        return fe_fail(
            &L->err,
            "value '%s' (%s) has no static %s: roamc has no shape inference for operator %s%s%s "
            "and the file gives no shape for it (frontend/infer/SHAPES.md lists what is covered)",
            v->name, where, t && t->elem ? "shape" : "type",
            np->domain && np->domain[0] ? np->domain : "", np->domain && np->domain[0] ? "::" : "",
            np->op_type);
    return fe_fail(
        &L->err,
        "value '%s' (%s) has no static %s: shape inference could not determine it from the "
        "node's inputs",
        v->name, where, t && t->elem ? "shape" : "type");
}

/* ------------------------------------------------------------ bodies */

/* A value roamc adds for node i: "LABEL#WHAT" (LABEL the node's name, or
 * its op_type; a number after WHAT when the file uses the name), UINT8
 * [bytes], made by producer (-1: none) with the kind bits.  The value array
 * must have room.  Returns its index. */
static int fe_add_bytes_value(fe_loader *L, size_t i, const char *what, int producer, unsigned kind,
                              uint64_t bytes) {
    fe_model *m = L->m;
    const fe_node *fn = &m->nodes[i];
    const char *label = fn->name[0] ? fn->name : fn->op_type;
    char name[512];
    int idx = -1;
    for (int k = 1; idx < 0; k++) { /* a name the file does not use */
        if (k == 1)
            snprintf(name, sizeof name, "%s#%s", label, what);
        else
            snprintf(name, sizeof name, "%s#%s%d", label, what, k);
        idx = fe_add_value(L, name, producer, kind);
    }
    fe_value *v = &m->values[idx];
    v->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__UINT8;
    v->bytes = bytes;
    v->rank = 1;
    v->dims = xmalloc(sizeof *v->dims);
    v->dims[0] = (fe_dim){(int64_t)bytes, -1, false};
    return idx;
}

/* The working memory of every node with a body (fe_body): a value of that
 * many bytes, one more output of the node. */
static void fe_add_bodies(fe_loader *L, const fi_ctx *cx) {
    fe_model *m = L->m;
    size_t n = 0, extra = 0;
    fi_body_use u;
    for (size_t i = 0; i < m->n_nodes; i++)
        if (fi_main_body(cx, i, &u)) {
            n++;
            extra += u.bytes > 0;
        }
    if (!n) return;
    m->bodies = xcalloc(n, sizeof *m->bodies);
    m->values = xreallocarray(m->values, m->n_values + extra, sizeof *m->values);
    for (size_t i = 0; i < m->n_nodes; i++) {
        if (!fi_main_body(cx, i, &u)) continue;
        fe_body *b = &m->bodies[m->n_bodies++];
        *b = (fe_body){(int)i, -1, u.bytes, u.how, u.branch, u.unsized};
        if (!u.bytes) continue;
        fe_node *fn = &m->nodes[i];
        int idx = fe_add_bytes_value(L, i, "body", (int)i, 0, u.bytes);
        m->values[idx].inferred = true;
        m->n_inferred++;
        fn->outputs = xreallocarray(fn->outputs, fn->n_outputs + 1, sizeof *fn->outputs);
        fn->alias = xreallocarray(fn->alias, fn->n_outputs + 1, sizeof *fn->alias);
        fn->outputs[fn->n_outputs] = idx;
        fn->alias[fn->n_outputs++] = -1;
        b->value = idx;
    }
}

/* The weights inside every node's subgraphs (fi_body_weights): a value
 * of that many bytes named "NODE#weights", an initializer no node lists,
 * so that the plan holds it for the whole step as it holds the main
 * graph's weights.  Nothing reads it: the node's body reads its own. */
static void fe_add_body_weights(fe_loader *L) {
    fe_model *m = L->m;
    size_t extra = 0;
    for (size_t i = 0; i < m->n_nodes; i++) extra += fi_body_weights(L->g->node[i], NULL) > 0;
    if (!extra) return;
    m->values = xreallocarray(m->values, m->n_values + extra, sizeof *m->values);
    for (size_t i = 0; i < m->n_nodes; i++) {
        uint64_t bytes = fi_body_weights(L->g->node[i], NULL);
        if (!bytes) continue;
        int idx = fe_add_bytes_value(L, i, "weights", -1, FE_INITIALIZER, bytes);
        m->values[idx].seq_len = -1;
        m->values[idx].inferred = true; /* sized by roamc, not declared by the file */
        m->n_inferred++;
    }
}

/* The values made inside bodies, for `roamc shapes` (fe_model.inner). */
static void fe_copy_inner(fe_loader *L, const fi_ctx *cx) {
    fe_model *m = L->m;
    size_t n = fi_inner_count(cx);
    if (!n) return;
    m->inner = xcalloc(n, sizeof *m->inner);
    for (size_t i = 0; i < n; i++) {
        const char *name;
        const fi_tensor *t;
        int node;
        fi_inner_get(cx, i, &name, &t, &node);
        fe_value *v = &m->inner[m->n_inner++];
        v->name = xstrdup(name);
        v->producer = node;
        v->elem_type = t->elem;
        v->rank = t->rank;
        v->upper_bound = t->bound;
        v->inferred = !t->declared;
        v->seq_len = !t->seq ? -1 : t->seq_len.v >= 0 ? t->seq_len.v : -2;
        if (t->rank > 0) v->dims = xmallocarray((size_t)t->rank, sizeof *v->dims);
        uint64_t elems = 1;
        bool known = t->rank >= 0 && fe_elem_bits(t->elem) > 0;
        for (int d = 0; d < t->rank; d++) {
            v->dims[d] = (fe_dim){t->dims[d].v, t->dims[d].sym, t->dims[d].exact};
            if (t->dims[d].v < 0 || __builtin_mul_overflow(elems, (uint64_t)t->dims[d].v, &elems))
                known = false;
        }
        if (known && v->seq_len >= 0 && __builtin_mul_overflow(elems, (uint64_t)v->seq_len, &elems))
            known = false;
        if (known && v->seq_len != -2 && fe_bytes_of(elems, fe_elem_bits(t->elem), &v->bytes))
            v->bytes = 0;
    }
}

/* Gives every value its type, shape and bytes from inference (which has
 * merged in what the file declares). */
static int fe_apply_shapes(fe_loader *L, const fe_options *opt) {
    fe_model *m = L->m;
    char msg[1024];
    fi_ctx *cx;
    if (fi_infer_model(L->mp, opt, &cx, msg, sizeof msg)) return fe_fail(&L->err, "%s", msg);
    int rc = 0;
    m->n_symbols = fi_symbol_count(cx);
    m->symbols = xcalloc(m->n_symbols, sizeof *m->symbols);
    for (size_t i = 0; i < m->n_symbols; i++) {
        const char *name;
        fe_symbol *s = &m->symbols[i];
        fi_symbol_get(cx, i, &name, &s->value, &s->kind, &s->node);
        s->name = xstrdup(name);
    }
    const char *first;
    m->n_conflicts = fi_conflicts(cx, &first);
    if (m->n_conflicts) m->first_conflict = xstrdup(first);
    bool allow = opt && opt->allow_unresolved;
    for (size_t i = 0; rc == 0 && i < m->n_values; i++) {
        fe_value *v = &m->values[i];
        const fi_tensor *t = fi_lookup(cx, v->name);
        v->rank = t ? t->rank : -1;
        v->elem_type = t ? t->elem : 0;
        v->upper_bound = t && t->bound;
        v->inferred = t && !t->declared;
        if (v->inferred) m->n_inferred++;
        if (v->upper_bound) m->has_upper_bounds = true;
        if (v->rank >= 0) {
            v->dims = xmallocarray((size_t)v->rank, sizeof *v->dims);
            for (int d = 0; d < v->rank; d++)
                v->dims[d] = (fe_dim){t->dims[d].v, t->dims[d].sym, t->dims[d].exact};
        }
        v->seq_len = !t || !t->seq ? -1 : t->seq_len.v >= 0 ? t->seq_len.v : -2;
        int unknown = v->rank < 0 || !v->elem_type ? -1 : -2;
        for (int d = 0; unknown == -2 && d < v->rank; d++)
            if (t->dims[d].v < 0) unknown = d;
        if (unknown != -2) {
            if (!allow) rc = fe_unknown_dim_fail(L, cx, v, t, unknown);
            continue;
        }
        unsigned bits = fe_elem_bits(v->elem_type);
        if (bits == 0) {
            char eb[32];
            if (!allow)
                rc = fe_fail(&L->err,
                             "value '%s' has element type %s (%d), which has no fixed byte size",
                             v->name, fe_elem_name(v->elem_type, eb, sizeof eb), (int)v->elem_type);
            continue;
        }
        uint64_t elems = 1;
        for (int d = 0; d < v->rank; d++)
            if (__builtin_mul_overflow(elems, (uint64_t)t->dims[d].v, &elems))
                rc = fe_fail(&L->err, "value '%s': the product of its dims overflows 64 bits",
                             v->name);
        if (v->seq_len == -2) { /* a sequence whose length nothing tells */
            if (!allow) rc = fe_unknown_dim_fail(L, cx, v, t, -1);
            continue;
        }
        if (rc == 0 && v->seq_len >= 0 &&
            __builtin_mul_overflow(elems, (uint64_t)v->seq_len, &elems))
            rc = fe_fail(&L->err, "value '%s': a sequence whose elements add up past 64 bits",
                         v->name);
        if (rc == 0 && fe_bytes_of(elems, bits, &v->bytes))
            rc = fe_fail(&L->err, "value '%s': its size in bytes overflows 64 bits", v->name);
    }
    if (rc == 0) fe_add_bodies(L, cx);
    if (rc == 0) fe_add_body_weights(L);
    if (rc == 0) fe_copy_inner(L, cx);
    fi_free(cx);
    return rc;
}

/* ---------------------------------------------------------------- main */

/* The value table: every value is a graph input, an initializer or a node
 * output, each defined once.  Returns 0, or -1 with a message. */
static int fe_build_values(fe_loader *L) {
    const Onnx__GraphProto *g = L->g;
    fe_model *m = L->m;
    size_t cap = g->n_input + g->n_initializer;
    for (size_t i = 0; i < g->n_node; i++) {
        if (!g->node[i]) return fe_fail(&L->err, "node #%zu is empty", i);
        cap += g->node[i]->n_output;
    }
    m->values = xcalloc(cap, sizeof *m->values);
    m->inputs = xcalloc(cap, sizeof *m->inputs);
    m->names = xcalloc(1, sizeof *m->names);
    char who[256];

    for (size_t i = 0; i < g->n_input; i++) {
        const Onnx__ValueInfoProto *vi = g->input[i];
        if (!vi || !vi->name || !vi->name[0])
            return fe_fail(&L->err, "graph input #%zu has no name", i);
        int idx = fe_add_value(L, vi->name, -1, FE_GRAPH_INPUT);
        if (idx < 0) return fe_fail(&L->err, "graph input '%s' is listed twice", vi->name);
        m->inputs[m->n_inputs++] = idx;
    }
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        if (!t || !t->name || !t->name[0])
            return fe_fail(&L->err, "initializer #%zu has no name", i);
        int idx = fi_names_get(L->m->names, t->name);
        if (idx >= 0 && (m->values[idx].kind & FE_INITIALIZER))
            return fe_fail(&L->err, "initializer '%s' is listed twice", t->name);
        if (idx < 0) { /* IR >= 4: initializers need not be graph inputs */
            idx = fe_add_value(L, t->name, -1, 0); /* not there: cannot fail */
            m->inputs[m->n_inputs++] = idx;
        }
        m->values[idx].kind |= FE_INITIALIZER;
    }
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        for (size_t k = 0; k < n->n_output; k++) {
            const char *name = n->output[k];
            if (!name || !name[0]) continue;
            int idx = fe_add_value(L, name, (int)i, 0);
            if (idx < 0) {
                fe_describe_definer(L, fi_names_get(L->m->names, name), who, sizeof who);
                return fe_fail(&L->err,
                               "value '%s' is produced twice: by %s and by node '%s' (#%zu)", name,
                               who, fe_node_label(n), i);
            }
        }
    }
    return 0;
}

/* Node i with its inputs (those its subgraphs read from outside last) and
 * outputs resolved to value indices, and its aliasing.  Returns 0, or -1
 * with a message. */
static int fe_build_node(fe_loader *L, size_t i) {
    const Onnx__NodeProto *n = L->g->node[i];
    fe_node *fn = &L->m->nodes[i];
    fn->name = xstrdup(n->name);
    fn->op_type = xstrdup(n->op_type);
    fn->domain = xstrdup(n->domain);
    if (!fn->op_type[0])
        return fe_fail(&L->err, "node '%s' (#%zu) has no op_type", fe_node_label(n), i);
    const Onnx__AttributeProto *rec = fe_attr(n, "roamc_recompute");
    if (rec && rec->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING)
        return fe_fail(&L->err, "node '%s' (#%zu): attribute roamc_recompute is not a STRING",
                       fe_node_label(n), i);
    if (rec) { /* the bytes may hold a NUL or lack the final one: a copy that ends */
        fn->recompute = xmalloc(rec->s.len + 1);
        if (rec->s.len) memcpy(fn->recompute, rec->s.data, rec->s.len);
        fn->recompute[rec->s.len] = '\0';
    }
    const char **outer = NULL;
    size_t n_outer = 0;
    if (fi_outer_reads(n, &outer, &n_outer))
        return fe_fail(&L->err, "node '%s' (#%zu): subgraphs nested too deep", fe_node_label(n), i);
    fn->n_explicit_inputs = n->n_input;
    fn->n_inputs = n->n_input + n_outer;
    fn->inputs = xmallocarray(fn->n_inputs, sizeof *fn->inputs);
    fn->n_outputs = n->n_output;
    fn->outputs = xmallocarray(fn->n_outputs, sizeof *fn->outputs);
    fn->alias = xmallocarray(fn->n_outputs, sizeof *fn->alias);
    for (size_t k = 0; k < fn->n_inputs; k++) {
        const char *name = k < n->n_input ? n->input[k] : outer[k - n->n_input];
        if (!name || !name[0]) {
            fn->inputs[k] = -1;
            continue;
        }
        int idx = fi_names_get(L->m->names, name);
        if (idx < 0) {
            int rc = fe_fail(&L->err,
                             "node '%s' (#%zu) reads '%s'%s, which no node, graph input or "
                             "initializer produces",
                             fe_node_label(n), i, name, k < n->n_input ? "" : " in a subgraph");
            free(outer);
            return rc;
        }
        fn->inputs[k] = idx;
    }
    free(outer);
    for (size_t k = 0; k < fn->n_outputs; k++)
        fn->outputs[k] =
            (n->output[k] && n->output[k][0]) ? fi_names_get(L->m->names, n->output[k]) : -1;
    return fe_node_alias(L, i, fn);
}

/* The graph outputs (listing one twice is harmless).  Returns 0, or -1
 * with a message. */
static int fe_build_outputs(fe_loader *L) {
    const Onnx__GraphProto *g = L->g;
    fe_model *m = L->m;
    m->outputs = xcalloc(g->n_output, sizeof *m->outputs);
    for (size_t i = 0; i < g->n_output; i++) {
        const Onnx__ValueInfoProto *vi = g->output[i];
        if (!vi || !vi->name || !vi->name[0])
            return fe_fail(&L->err, "graph output #%zu has no name", i);
        int idx = fi_names_get(L->m->names, vi->name);
        if (idx < 0)
            return fe_fail(&L->err,
                           "graph output '%s' is produced by no node, graph input or initializer",
                           vi->name);
        if (m->values[idx].kind & FE_GRAPH_OUTPUT) continue; /* listed twice: harmless */
        m->values[idx].kind |= FE_GRAPH_OUTPUT;
        m->outputs[m->n_outputs++] = idx;
    }
    return 0;
}

/* What graph/ relies on in a resolved model, checked always (a loader bug,
 * not bad input, breaks these: bad input is refused before): every value
 * index in range, each made value's producer the node that lists it, each
 * alias naming a present explicit input. */
static void fe_assert_resolved(const fe_model *m) {
    const int nv = (int)m->n_values;
    for (size_t v = 0; v < m->n_values; v++)
        ROAMC_ASSERT(m->values[v].producer >= -1 && m->values[v].producer < (int)m->n_nodes);
    for (size_t k = 0; k < m->n_inputs; k++) ROAMC_ASSERT(m->inputs[k] >= 0 && m->inputs[k] < nv);
    for (size_t k = 0; k < m->n_outputs; k++)
        ROAMC_ASSERT(m->outputs[k] >= 0 && m->outputs[k] < nv);
    for (size_t i = 0; i < m->n_nodes; i++) {
        const fe_node *n = &m->nodes[i];
        ROAMC_ASSERT(n->n_explicit_inputs <= n->n_inputs);
        for (size_t k = 0; k < n->n_inputs; k++)
            ROAMC_ASSERT(n->inputs[k] >= -1 && n->inputs[k] < nv);
        for (size_t k = 0; k < n->n_outputs; k++) {
            int o = n->outputs[k], a = n->alias[k];
            ROAMC_ASSERT(o >= -1 && o < nv && (o < 0 || m->values[o].producer == (int)i));
            ROAMC_ASSERT(a >= -1 && a < (int)n->n_explicit_inputs && (a < 0 || n->inputs[a] >= 0));
        }
    }
}

/* The model from the protobuf: values, nodes, outputs, then the shapes. */
static int fe_build(fe_loader *L, const fe_options *opt) {
    if (fe_build_values(L)) return -1;
    L->m->nodes = xcalloc(L->g->n_node, sizeof *L->m->nodes);
    L->m->n_nodes = L->g->n_node;
    for (size_t i = 0; i < L->g->n_node; i++)
        if (fe_build_node(L, i)) return -1;
    if (fe_build_outputs(L)) return -1;
    fe_assert_resolved(L->m);
    return fe_apply_shapes(L, opt);
}

static void fe_copy_header(fe_model *m, const Onnx__ModelProto *mp) {
    m->ir_version = mp->has_ir_version ? mp->ir_version : 0;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *op = mp->opset_import[i];
        if (op && (!op->domain || !op->domain[0] || strcmp(op->domain, "ai.onnx") == 0) &&
            op->has_version)
            m->opset = op->version;
    }
    if (mp->n_metadata_props) {
        m->meta_keys = xcalloc(mp->n_metadata_props, sizeof *m->meta_keys);
        m->meta_values = xcalloc(mp->n_metadata_props, sizeof *m->meta_values);
        for (size_t i = 0; i < mp->n_metadata_props; i++) {
            const Onnx__StringStringEntryProto *e = mp->metadata_props[i];
            m->meta_keys[i] = xstrdup(e ? e->key : "");
            m->meta_values[i] = xstrdup(e ? e->value : "");
            m->n_meta++;
        }
    }
}

int fe_load_bytes(const char *path, fe_bytes file, const fe_options *opt, fe_model *m, char *err,
                  size_t errlen) {
    const uint8_t *bytes = file.data;
    size_t len = file.len;
    memset(m, 0, sizeof *m);
    fe_loader L = {.m = m, .err = {path, err, errlen}};
    if (len == 0) return fe_fail(&L.err, "empty file, not an ONNX model");
    fe_wire w = {.base = bytes, .out = xmalloc(len + 10 * (FE_MAX_NESTING + 2))};
    if (fe_wire_copy(&w, bytes, bytes + len, &onnx__model_proto__descriptor, 0)) {
        free(w.out);
        return fe_fail(
            &L.err,
            "not an ONNX model roamc can read: protobuf messages nested more than %d deep "
            "(at byte %zu)",
            FE_MAX_NESTING, w.deep_at);
    }
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, w.n, w.out);
    free(w.out);
    if (!mp)
        return fe_fail(&L.err,
                       "not an ONNX ModelProto: protobuf decoding failed (truncated or not "
                       "protobuf, %zu bytes)",
                       len);
    int rc = 0;
    /* Random bytes sometimes decode as a protobuf message; a real model has
     * an IR version and a graph with nodes. */
    if (!mp->has_ir_version || mp->ir_version <= 0 || !mp->graph)
        rc = fe_fail(&L.err, "not an ONNX ModelProto: %s",
                     !mp->graph ? "no graph" : "no IR version");
    else if (mp->graph->n_node == 0)
        rc = fe_fail(&L.err, "the graph has no nodes: nothing to plan");
    if (rc == 0) {
        L.g = mp->graph;
        L.mp = mp;
        m->path = xstrdup(path);
        fe_copy_header(m, mp);
        rc = fe_build(&L, opt);
    }
    onnx__model_proto__free_unpacked(mp, NULL);
    if (rc) {
        fe_free(m);
    } else {
        fe_sha256(bytes, len, m->sha256);
    }
    return rc;
}

int fe_load(const char *path, const fe_options *opt, fe_model *m, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    fe_err e = {path, err, errlen};
    int fd = open(path, O_RDONLY);
    if (fd < 0) return fe_fail(&e, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        close(fd);
        return fe_fail(&e, "cannot read: %s", strerror(EISDIR));
    }
    /* A regular file is mapped, not read: the pages of the weights, which
     * the copy in fe_load_bytes skips, are then never touched. */
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
        if ((uint64_t)st.st_size > FE_MAX_FILE_BYTES) {
            close(fd);
            return fe_fail(&e,
                           "file of %lld bytes: an ONNX file holds at most 2 GiB (larger weights "
                           "live in external data)",
                           (long long)st.st_size);
        }
        void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        close(fd);
        if (map == MAP_FAILED) return fe_fail(&e, "cannot read: %s", strerror(errno));
        int rc = fe_load_bytes(path, (fe_bytes){map, (size_t)st.st_size}, opt, m, err, errlen);
        munmap(map, (size_t)st.st_size);
        return rc;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return fe_fail(&e, "cannot open: %s", strerror(errno));
    }
    uint8_t *buf;
    size_t len;
    int got = roamc_read_all(f, FE_MAX_FILE_BYTES, &buf, &len);
    int rd_errno = got < 0 ? errno : 0;
    fclose(f);
    if (got > 0)
        return fe_fail(&e, "more than %zu bytes: an ONNX file holds at most 2 GiB",
                       FE_MAX_FILE_BYTES);
    if (got < 0) return fe_fail(&e, "cannot read: %s", strerror(rd_errno));
    int rc = fe_load_bytes(path, (fe_bytes){buf, len}, opt, m, err, errlen);
    free(buf);
    return rc;
}

void fe_free(fe_model *m) {
    if (!m) return;
    for (size_t i = 0; i < m->n_values; i++) {
        free(m->values[i].name);
        free(m->values[i].dims);
    }
    for (size_t i = 0; i < m->n_symbols; i++) free(m->symbols[i].name);
    free(m->symbols);
    if (m->names) fi_names_free(m->names);
    free(m->names);
    free(m->first_conflict);
    for (size_t i = 0; i < m->n_nodes; i++) {
        fe_node *n = &m->nodes[i];
        free(n->name);
        free(n->op_type);
        free(n->domain);
        free(n->inputs);
        free(n->outputs);
        free(n->alias);
        free(n->recompute);
    }
    for (size_t i = 0; i < m->n_meta; i++) {
        free(m->meta_keys[i]);
        free(m->meta_values[i]);
    }
    free(m->meta_keys);
    free(m->meta_values);
    for (size_t i = 0; i < m->n_inner; i++) {
        free(m->inner[i].name);
        free(m->inner[i].dims);
    }
    free(m->inner);
    free(m->bodies);
    free(m->values);
    free(m->nodes);
    free(m->inputs);
    free(m->outputs);
    free(m->path);
    memset(m, 0, sizeof *m);
}

const char *fe_meta(const fe_model *m, const char *key) {
    for (size_t i = 0; i < m->n_meta; i++)
        if (strcmp(m->meta_keys[i], key) == 0) return m->meta_values[i];
    return NULL;
}

int fe_find_value(const fe_model *m, const char *name) {
    if (m->names) return fi_names_get(m->names, name);
    for (size_t i = 0; i < m->n_values; i++)
        if (strcmp(m->values[i].name, name) == 0) return (int)i;
    return -1;
}
