/* The inference driver's state (infer_ctx.h), the floor of the other three
 * files of the driver: the arena and the sticky error, symbols, scopes (name
 * -> tensor, nested for subgraphs), tensors from the file (types,
 * initializers, value_info), known and unknown dims, and the model-local
 * function a node calls.
 *
 * Reading order: arena and errors -> symbols -> scopes -> tensors -> dims.
 */
#include "infer_ctx.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------ arena and errors */

void *fi_alloc(fi_ctx *cx, size_t bytes) {
    if (cx->failed) return NULL;
    bytes = (bytes + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    if (bytes == 0) bytes = sizeof(max_align_t);
    fi_chunk *c = cx->arena;
    if (!c || c->cap - c->used < bytes) {
        size_t cap = bytes > FI_ARENA_CHUNK ? bytes : FI_ARENA_CHUNK;
        if (cx->arena_total + cap > FI_ARENA_CAP) {
            snprintf(cx->err, cx->errlen,
                     "shape inference needs more than %zu MiB of memory: refused",
                     FI_ARENA_CAP >> 20);
            cx->failed = true;
            return NULL;
        }
        c = xmalloc(sizeof *c + cap);
        c->next = cx->arena;
        c->used = 0;
        c->cap = cap;
        cx->arena = c;
        cx->arena_total += cap;
    }
    void *p = (char *)c->data + c->used;
    c->used += bytes;
    memset(p, 0, bytes);
    return p;
}

static char *fi_strdup(fi_ctx *cx, const char *s) {
    size_t n = strlen(s) + 1;
    char *d = fi_alloc(cx, n);
    if (d) memcpy(d, s, n);
    return d;
}

const char *fi_label(const Onnx__NodeProto *np) {
    return (np->name && np->name[0]) ? np->name : (np->op_type ? np->op_type : "?");
}

/* The one place a failure is recorded: the first one wins (later helpers
 * are no-ops), written after a prefix already in cx->err. */
static int fi_record(fi_ctx *cx, int prefix_len, const char *fmt, va_list ap) {
    cx->failed = true;
    size_t k = prefix_len > 0 ? (size_t)prefix_len : 0;
    if (k < cx->errlen) roamc_verrorf(cx->err + k, cx->errlen - k, NULL, fmt, ap);
    return -1;
}

int fi_fail(fi_node *n, const char *fmt, ...) {
    fi_ctx *cx = n->cx;
    if (cx->failed) return -1;
    int k;
    if (n->index >= 0)
        k = snprintf(cx->err, cx->errlen, "node '%s' (#%d, %s): ", fi_label(n->np), n->index,
                     n->np->op_type);
    else
        k = snprintf(cx->err, cx->errlen, "node '%s' (%s, in a subgraph): ", fi_label(n->np),
                     n->np->op_type);
    va_list ap;
    va_start(ap, fmt);
    fi_record(cx, k, fmt, ap);
    va_end(ap);
    return -1;
}

int fi_ctx_fail(fi_ctx *cx, const char *fmt, ...) {
    if (cx->failed) return -1;
    va_list ap;
    va_start(ap, fmt);
    fi_record(cx, 0, fmt, ap);
    va_end(ap);
    return -1;
}

bool fi_failed(const fi_node *n) {
    return n->cx->failed;
}

/* ---------------------------------------------------------------- symbols */

static int32_t fi_symbol_find(const fi_ctx *cx, const char *name) {
    for (size_t i = 0; i < cx->n_syms; i++)
        if (strcmp(cx->syms[i].name, name) == 0) return (int32_t)i;
    return -1;
}

int64_t fi_flag_dim(const fi_ctx *cx, const char *name) {
    if (!cx->opt) return -1;
    for (size_t i = 0; i < cx->opt->n_dims; i++)
        if (strcmp(cx->opt->dims[i].symbol, name) == 0) return cx->opt->dims[i].value;
    return -1;
}

int32_t fi_symbol_add(fi_ctx *cx, const char *name, int64_t value, int kind, int node) {
    int32_t s = fi_symbol_find(cx, name);
    if (s >= 0) return s;
    if (cx->failed) return -1;
    if (cx->n_syms == cx->cap_syms) {
        size_t cap = cx->cap_syms ? 2 * cx->cap_syms : 16;
        cx->syms = xreallocarray(cx->syms, cap, sizeof *cx->syms);
        cx->cap_syms = cap;
    }
    char *copy = fi_strdup(cx, name);
    if (!copy) return -1;
    cx->syms[cx->n_syms] = (fi_symbol){copy, value, kind, node};
    return (int32_t)cx->n_syms++;
}

size_t fi_symbol_count(const fi_ctx *cx) {
    return cx->n_syms;
}

void fi_symbol_get(const fi_ctx *cx, size_t i, const char **name, int64_t *value, int *kind,
                   int *node) {
    *name = cx->syms[i].name;
    *value = cx->syms[i].value;
    *kind = cx->syms[i].kind;
    *node = cx->syms[i].node;
}

/* ------------------------------------------------------------------ scopes */

/* FNV-1a of a NUL-terminated name: the hash of every name table of the
 * frontend (fi_names and inference's scopes). */
static uint64_t fi_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static size_t fi_names_slot(const fi_names *t, const char *name) {
    size_t mask = t->cap - 1, i = (size_t)fi_hash(name) & mask;
    while (t->name[i] && strcmp(t->name[i], name) != 0) i = (i + 1) & mask;
    return i;
}

int fi_names_get(const fi_names *t, const char *name) {
    if (!t->cap) return -1;
    size_t i = fi_names_slot(t, name);
    return t->name[i] ? t->index[i] : -1;
}

/* Doubles the slots (16 at first) and puts every name again. */
static void fi_names_grow(fi_names *t) {
    fi_names bigger = {.cap = t->cap ? 2 * t->cap : 16, .n = t->n};
    bigger.name = xcalloc(bigger.cap, sizeof *bigger.name);
    bigger.index = xmallocarray(bigger.cap, sizeof *bigger.index);
    for (size_t i = 0; i < t->cap; i++)
        if (t->name[i]) {
            size_t j = fi_names_slot(&bigger, t->name[i]);
            bigger.name[j] = t->name[i];
            bigger.index[j] = t->index[i];
        }
    fi_names_free(t);
    *t = bigger;
}

bool fi_names_put(fi_names *t, const char *name, int index) {
    if (2 * (t->n + 1) > t->cap) fi_names_grow(t);
    size_t i = fi_names_slot(t, name);
    if (t->name[i]) return false;
    t->name[i] = name;
    t->index[i] = index;
    t->n++;
    return true;
}

void fi_names_free(fi_names *t) {
    free(t->name);
    free(t->index);
    memset(t, 0, sizeof *t);
}

fi_scope *fi_scope_new(fi_ctx *cx, fi_scope *parent, size_t expected) {
    fi_scope *s = fi_alloc(cx, sizeof *s);
    if (!s) return NULL;
    s->parent = parent;
    s->cap = 16;
    while (s->cap < 2 * expected + 2) s->cap *= 2;
    s->names = fi_alloc(cx, s->cap * sizeof *s->names);
    s->tensors = fi_alloc(cx, s->cap * sizeof *s->tensors);
    return (s->names && s->tensors) ? s : NULL;
}

size_t fi_scope_slot(const fi_scope *s, const char *name) {
    size_t i = (size_t)fi_hash(name) & (s->cap - 1);
    while (s->names[i] && strcmp(s->names[i], name) != 0) i = (i + 1) & (s->cap - 1);
    return i;
}

fi_tensor *fi_scope_find(const fi_scope *s, const char *name) {
    for (; s; s = s->parent) {
        size_t i = fi_scope_slot(s, name);
        if (s->names[i]) return s->tensors[i];
    }
    return NULL;
}

void fi_scope_put(fi_scope *s, const char *name, fi_tensor *t) {
    size_t i = fi_scope_slot(s, name);
    if (!s->names[i]) s->n++;
    s->names[i] = name;
    s->tensors[i] = t;
}

/* ----------------------------------------------------------------- tensors */

fi_dim *fi_new_dims(fi_node *n, int rank) {
    if (rank < 0 || rank > FI_MAX_RANK) {
        fi_fail(n, "rank %d is out of range", rank);
        return NULL;
    }
    return fi_alloc(n->cx, ((size_t)rank + 1) * sizeof(fi_dim));
}

fi_tensor *fi_new_tensor(fi_node *n) {
    fi_tensor *t = fi_alloc(n->cx, sizeof *t);
    if (!t) return NULL;
    t->rank = -1;
    t->n_const = -1;
    t->blame = -1;
    return t;
}

fi_tensor *fi_tensor_new(fi_ctx *cx) {
    fi_node dummy = {.cx = cx, .index = -1};
    return fi_new_tensor(&dummy);
}

bool fi_is_float_type(int32_t e) {
    switch (e) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
    case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16:
    case 17:
    case 18:
    case 19:
    case 20:
    case 23:
    case 24: /* float8/float4 variants */ return true;
    default: return false;
    }
}

bool fi_is_int_type(int32_t e) {
    switch (e) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64:
    case 21:
    case 22: return true;
    default: return false;
    }
}

/* A dim_param that is a sum of products of symbols and integers, as
 * onnxruntime's symbolic shape inference and `export.py --symbolic-batch`
 * write them: "batch*128", "2*batch+1", "batch_size*sequence_length".
 * Returns false when text is not such an expression (then it is one plain
 * symbol name, whatever characters it holds: "seq-len" stays a name).
 * Otherwise registers every symbol it names and returns true with *dim
 * known when --dim binds them all, else unknown by its first unbound
 * symbol, which is the one the user has to bind. */
static bool fi_dim_expression(fi_ctx *cx, const char *text, fi_dim *dim) {
    if (!strpbrk(text, "*+")) return false;
    /* check the grammar first: term ('+' term)*, term = factor ('*' factor)* */
    for (const char *p = text;;) {
        size_t n = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789");
        bool ident = n > 0 && !(p[0] >= '0' && p[0] <= '9');
        if (n == 0 || (!ident && strspn(p, "0123456789") != n)) return false;
        p += n;
        if (*p == 0) break;
        if ((*p != '*' && *p != '+') || p[1] == 0) return false;
        p++;
    }
    int64_t sum = 0, term = 1;
    int32_t unbound = -1;
    bool overflow = false;
    for (const char *p = text;;) {
        size_t n = strcspn(p, "*+");
        int64_t v;
        if (p[0] >= '0' && p[0] <= '9') {
            v = 0;
            for (size_t i = 0; i < n; i++)
                overflow |=
                    __builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, p[i] - '0', &v);
        } else {
            char name[128];
            if (n >= sizeof name) return false;
            memcpy(name, p, n);
            name[n] = 0;
            v = fi_flag_dim(cx, name);
            int32_t s = fi_symbol_add(cx, name, v, FE_SYMBOL_INPUT, -1);
            if (v < 0 && unbound < 0) unbound = s;
        }
        if (v >= 0) overflow |= __builtin_mul_overflow(term, v, &term);
        p += n;
        if (*p != '*') {
            overflow |= __builtin_add_overflow(sum, term, &sum);
            term = 1;
        }
        if (*p == 0) break;
        p++;
    }
    if (unbound >= 0 || cx->failed)
        *dim = fi_unknown(unbound);
    else if (overflow || sum > FI_MAX_DIM) {
        fi_ctx_fail(cx, "dim '%s' is larger than 2^62 under the bindings given", text);
        *dim = fi_unknown(-1);
    } else
        *dim = fi_known(sum);
    return true;
}

/* A dim from the file: a number, a symbol (bound by --dim or not), an
 * expression of symbols, or nothing.  Negative numbers are refused by the
 * caller. */
static fi_dim fi_dim_from_proto(fi_ctx *cx, const Onnx__TensorShapeProto__Dimension *d) {
    if (d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
        d->dim_value >= 0)
        return fi_known(d->dim_value);
    if (d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
        d->dim_param && d->dim_param[0]) {
        fi_dim e;
        if (fi_dim_expression(cx, d->dim_param, &e)) return e;
        int64_t v = fi_flag_dim(cx, d->dim_param);
        int32_t s = fi_symbol_add(cx, d->dim_param, v, FE_SYMBOL_INPUT, -1);
        if (v >= 0) return fi_known(v);
        return fi_unknown(s);
    }
    return fi_unknown(-1);
}

int fi_from_type(fi_ctx *cx, fi_tensor *t, const Onnx__TypeProto *tp, const char *name) {
    if (tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE && tp->sequence_type) {
        /* a sequence: its elements' type; its length is never declared */
        t->seq = true;
        t->seq_len = fi_unknown(-1);
        tp = tp->sequence_type->elem_type;
    }
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) return 0;
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    if (tt->has_elem_type && tt->elem_type) t->elem = tt->elem_type;
    if (!tt->shape) return 0;
    if (tt->shape->n_dim > FI_MAX_RANK)
        return fi_ctx_fail(cx, "value '%s' has rank %zu; roamc handles at most %d", name,
                           tt->shape->n_dim, FI_MAX_RANK);
    fi_dim *dims = fi_alloc(cx, (tt->shape->n_dim + 1) * sizeof *dims);
    if (!dims) return -1;
    for (size_t d = 0; d < tt->shape->n_dim; d++) {
        const Onnx__TensorShapeProto__Dimension *pd = tt->shape->dim[d];
        if (pd && pd->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
            (pd->dim_value < 0 || pd->dim_value > FI_MAX_DIM))
            return fi_ctx_fail(cx, "value '%s' has %s dim %zu: %lld", name,
                               pd->dim_value < 0 ? "negative" : "a too large", d,
                               (long long)pd->dim_value);
        dims[d] = fi_dim_from_proto(cx, pd);
    }
    t->rank = (int)tt->shape->n_dim;
    t->dims = dims;
    t->declared = true;
    return cx->failed ? -1 : 0;
}

int64_t fi_double_to_int(double f) {
    return isnan(f) ? 0 : f >= 9.2e18 ? INT64_MAX : f <= -9.2e18 ? INT64_MIN : (int64_t)f;
}

/* Reads little-endian element i of raw bytes of type elem into an int or a
 * double.  Types without a plain byte layout give 0. */
static void fi_raw_elem(const uint8_t *p, int32_t elem, int64_t *iv, double *fv) {
    uint64_t u = 0;
    unsigned bytes = fe_elem_bits(elem) / 8;
    for (unsigned b = 0; b < bytes && b < 8; b++) u |= (uint64_t)p[b] << (8 * b);
    *iv = 0;
    *fv = 0;
    switch (elem) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: {
        float f;
        uint32_t w = (uint32_t)u;
        memcpy(&f, &w, 4);
        *fv = f;
        break;
    }
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: {
        double d;
        memcpy(&d, &u, 8);
        *fv = d;
        break;
    }
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: *iv = (int8_t)u; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: *iv = (int16_t)u; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: *iv = (int32_t)u; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: *iv = (int64_t)u; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: *iv = (int64_t)u; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: *iv = u > INT64_MAX ? INT64_MAX : (int64_t)u; break;
    default: break; /* float16 and friends: values not needed for shapes */
    }
}

int fi_from_tensor_proto(fi_ctx *cx, fi_tensor *t, const Onnx__TensorProto *tp, const char *name) {
    if (tp->n_dims > FI_MAX_RANK)
        return fi_ctx_fail(cx, "tensor '%s' has rank %zu; roamc handles at most %d", name,
                           tp->n_dims, FI_MAX_RANK);
    fi_dim *dims = fi_alloc(cx, (tp->n_dims + 1) * sizeof *dims);
    if (!dims) return -1;
    int64_t n = 1;
    for (size_t d = 0; d < tp->n_dims; d++) {
        if (tp->dims[d] < 0 || tp->dims[d] > FI_MAX_DIM)
            return fi_ctx_fail(cx, "tensor '%s' has %s dim %zu: %lld", name,
                               tp->dims[d] < 0 ? "negative" : "a too large", d,
                               (long long)tp->dims[d]);
        dims[d] = fi_known(tp->dims[d]);
        if (n >= 0 && __builtin_mul_overflow(n, tp->dims[d], &n)) n = -1;
    }
    if (n < 0 || n > FI_MAX_DIM)
        return fi_ctx_fail(cx, "tensor '%s': the product of its dims overflows 2^62 elements",
                           name);
    t->elem = tp->data_type;
    t->rank = (int)tp->n_dims;
    t->dims = dims;
    t->declared = true;
    bool external =
        tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    if (external || n > FI_MAX_CONST_ELEMS) return 0;
    bool is_int = fi_is_int_type(t->elem), is_float = fi_is_float_type(t->elem);
    if (!is_int && !is_float) return 0;
    int64_t *ci = is_int ? fi_alloc(cx, (size_t)(n + 1) * sizeof *ci) : NULL;
    double *cf = is_float ? fi_alloc(cx, (size_t)(n + 1) * sizeof *cf) : NULL;
    if (!ci && !cf) return -1;
    unsigned bytes = fe_elem_bits(t->elem) / 8;
    for (int64_t i = 0; i < n; i++) {
        int64_t iv = 0;
        double fv = 0;
        size_t k = (size_t)i;
        if (tp->has_raw_data) {
            if (bytes == 0 || tp->raw_data.len < (size_t)n * bytes)
                return 0; /* short or packed: no value */
            fi_raw_elem(tp->raw_data.data + k * bytes, t->elem, &iv, &fv);
        } else if (k < tp->n_int64_data)
            iv = tp->int64_data[k];
        else if (k < tp->n_int32_data)
            iv = tp->int32_data[k];
        else if (k < tp->n_uint64_data)
            iv = tp->uint64_data[k] > INT64_MAX ? INT64_MAX : (int64_t)tp->uint64_data[k];
        else if (k < tp->n_float_data)
            fv = tp->float_data[k];
        else if (k < tp->n_double_data)
            fv = tp->double_data[k];
        else
            return 0; /* no data (or float16 bits in int32_data): value unknown */
        if (ci) ci[i] = iv ? iv : fi_double_to_int(fv);
        if (cf) cf[i] = fv != 0 ? fv : (double)iv;
    }
    t->ci = ci;
    t->cf = cf;
    t->n_const = n;
    return 0;
}

/* ------------------------------------------------------------------- dims */

fi_dim fi_known(int64_t v) {
    return (fi_dim){v, -1, false};
}
fi_dim fi_unknown(int32_t sym) {
    return (fi_dim){-1, sym, sym >= 0};
}

fi_dim fi_unknown_derived(int32_t sym) {
    return (fi_dim){-1, sym, false};
}

/* ------------------------------------------------------- model functions */

const Onnx__FunctionProto *fi_function_find(const fi_ctx *cx, const Onnx__NodeProto *np) {
    for (size_t i = 0; i < cx->mp->n_functions; i++) {
        const Onnx__FunctionProto *f = cx->mp->functions[i];
        if (f && f->name && strcmp(f->name, np->op_type) == 0 &&
            strcmp(f->domain ? f->domain : "", np->domain ? np->domain : "") == 0)
            return f;
    }
    return NULL;
}
