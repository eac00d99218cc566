/* Shape and type inference: the driver (see infer.h).
 *
 * Reading order: the arena and the sticky error -> symbols -> scopes (name
 * -> tensor, nested for subgraphs) -> tensors from the file (types,
 * initializers, value_info) -> one node (rule or model-local function) ->
 * one graph in topological order -> the model -> helpers the rules use.
 */
#include "infer.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* All inference memory comes from one arena with a cap: a model whose
 * shape computations would need more is refused, not swapped to death. */
#define FI_ARENA_CAP ((size_t)1 << 30)
#define FI_ARENA_CHUNK ((size_t)1 << 20)

typedef struct fi_chunk {
    struct fi_chunk *next;
    size_t used, cap;
    max_align_t data[];
} fi_chunk;

typedef struct fi_symbol {
    char *name;
    int64_t value; /* -1: unbound */
    int kind;      /* FE_SYMBOL_INPUT or FE_SYMBOL_DATA */
    int node;      /* data symbols: main-graph node, or -1 */
} fi_symbol;

/* Name -> tensor, open addressing; one per graph scope. */
typedef struct fi_scope {
    struct fi_scope *parent;
    const char **names;
    fi_tensor **tensors;
    size_t cap, n; /* cap: power of two */
} fi_scope;

struct fi_ctx {
    const Onnx__ModelProto *mp;
    const fe_options *opt;
    fi_chunk *arena;
    size_t arena_total;
    fi_symbol *syms;
    size_t n_syms, cap_syms;
    const fi_rule **rules; /* sorted by op_type */
    size_t n_rules;
    fi_scope *main_scope;
    fi_scope *cur; /* the scope of the graph whose nodes run now */
    int depth;
    char *err;
    size_t errlen;
    bool failed;
    size_t n_conflicts; /* declared shapes that inference contradicted */
    size_t node_runs;   /* nodes inferred so far (FI_MAX_NODE_RUNS) */
    char conflict[512]; /* the first of them, for the report */
    /* Working memory of bodies (infer.h "memory of bodies"): a pointer map
     * from a GraphProto (its peak) or a NodeProto (its working memory) to
     * bytes and the values left unsized, open addressing, malloc'ed. */
    const void **pm_key;
    uint64_t *pm_bytes;
    size_t *pm_unsized;
    size_t pm_cap, pm_n;
    fi_body_use *main_use; /* per main-graph node */
    size_t n_main;
    int cur_main;          /* the main-graph node being inferred, -1 outside */
    const int *last_order; /* the order of the nodes fi_run_nodes ran last */
    /* values made inside bodies (fi_inner_get), malloc'ed arrays */
    const char **in_name;
    fi_tensor **in_t;
    int *in_node;
    size_t n_in, cap_in;
    fi_names in_idx;
};

/* ------------------------------------------------------ arena and errors */

static void *fi_alloc(fi_ctx *cx, size_t bytes) {
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

static const char *fi_label(const Onnx__NodeProto *np) {
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

static int fi_ctx_fail(fi_ctx *cx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fi_ctx_fail(fi_ctx *cx, const char *fmt, ...) {
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

/* The --dim value for a symbol, or -1. */
static int64_t fi_flag_dim(const fi_ctx *cx, const char *name) {
    if (!cx->opt) return -1;
    for (size_t i = 0; i < cx->opt->n_dims; i++)
        if (strcmp(cx->opt->dims[i].symbol, name) == 0) return cx->opt->dims[i].value;
    return -1;
}

static int32_t fi_symbol_add(fi_ctx *cx, const char *name, int64_t value, int kind, int node) {
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

static fi_scope *fi_scope_new(fi_ctx *cx, fi_scope *parent, size_t expected) {
    fi_scope *s = fi_alloc(cx, sizeof *s);
    if (!s) return NULL;
    s->parent = parent;
    s->cap = 16;
    while (s->cap < 2 * expected + 2) s->cap *= 2;
    s->names = fi_alloc(cx, s->cap * sizeof *s->names);
    s->tensors = fi_alloc(cx, s->cap * sizeof *s->tensors);
    return (s->names && s->tensors) ? s : NULL;
}

static size_t fi_scope_slot(const fi_scope *s, const char *name) {
    size_t i = (size_t)fi_hash(name) & (s->cap - 1);
    while (s->names[i] && strcmp(s->names[i], name) != 0) i = (i + 1) & (s->cap - 1);
    return i;
}

/* The tensor named name in s or an enclosing scope, or NULL. */
static fi_tensor *fi_scope_find(const fi_scope *s, const char *name) {
    for (; s; s = s->parent) {
        size_t i = fi_scope_slot(s, name);
        if (s->names[i]) return s->tensors[i];
    }
    return NULL;
}

/* Binds name in s (replacing an earlier binding in s). */
static void fi_scope_put(fi_scope *s, const char *name, fi_tensor *t) {
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

static fi_tensor *fi_tensor_new(fi_ctx *cx) {
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

/* Fills t from a TypeProto.  Non-tensor types (sequence, map, optional)
 * leave t unknown.  Returns -1 on a negative or too large dim. */
static int fi_from_type(fi_ctx *cx, fi_tensor *t, const Onnx__TypeProto *tp, const char *name) {
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

/* Fills t with the type, shape and (when small and stored in the file
 * itself) the value of a TensorProto.  External data is never read: only
 * its shape matters.  Returns -1 on bad dims. */
static int fi_from_tensor_proto(fi_ctx *cx, fi_tensor *t, const Onnx__TensorProto *tp,
                                const char *name) {
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

/* ------------------------------------------------------------ rule lookup */

static const fi_rule *const fi_tables[] = {fi_rules_math,    fi_rules_nn,       fi_rules_shape,
                                           fi_rules_control, fi_rules_sequence, fi_rules_llm};

static int fi_rule_cmp(const void *a, const void *b) {
    return strcmp((*(const fi_rule *const *)a)->op_type, (*(const fi_rule *const *)b)->op_type);
}

static int fi_rules_init(fi_ctx *cx) {
    size_t n = 0;
    for (size_t t = 0; t < sizeof fi_tables / sizeof *fi_tables; t++)
        for (const fi_rule *r = fi_tables[t]; r->op_type; r++) n++;
    cx->rules = fi_alloc(cx, (n + 1) * sizeof *cx->rules);
    if (!cx->rules) return -1;
    for (size_t t = 0; t < sizeof fi_tables / sizeof *fi_tables; t++)
        for (const fi_rule *r = fi_tables[t]; r->op_type; r++) cx->rules[cx->n_rules++] = r;
    qsort(cx->rules, cx->n_rules, sizeof *cx->rules, fi_rule_cmp);
    return 0;
}

static const fi_rule *fi_rule_find(const fi_ctx *cx, const char *op) {
    size_t lo = 0, hi = cx->n_rules;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(cx->rules[mid]->op_type, op);
        if (c == 0) return cx->rules[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static bool fi_std_domain(const char *d) {
    return !d || !d[0] || strcmp(d, "ai.onnx") == 0;
}

/* The rule of an operator of a domain other than the standard one, or NULL:
 * com.microsoft's few contrib operators, searched in place. */
static const fi_rule *fi_rule_of_domain(const char *domain, const char *op_type) {
    if (!domain || strcmp(domain, "com.microsoft") != 0) return NULL;
    for (const fi_rule *r = fi_rules_com_microsoft; r->op_type; r++)
        if (strcmp(r->op_type, op_type) == 0) return r;
    return NULL;
}

bool fi_rule_exists(const char *domain, const char *op_type) {
    if (!fi_std_domain(domain)) return fi_rule_of_domain(domain, op_type) != NULL;
    for (size_t t = 0; t < sizeof fi_tables / sizeof *fi_tables; t++)
        for (const fi_rule *r = fi_tables[t]; r->op_type; r++)
            if (strcmp(r->op_type, op_type) == 0) return true;
    return false;
}

/* The version a list of opset imports gives domain, or 0. */
static int64_t fi_opset_of(Onnx__OperatorSetIdProto *const *ops, size_t n, const char *domain) {
    for (size_t i = 0; i < n; i++) {
        const Onnx__OperatorSetIdProto *o = ops[i];
        if (!o || !o->has_version) continue;
        const char *d = o->domain ? o->domain : "";
        if ((fi_std_domain(d) && fi_std_domain(domain)) || strcmp(d, domain ? domain : "") == 0)
            return o->version;
    }
    return 0;
}

static const Onnx__FunctionProto *fi_function_find(const fi_ctx *cx, const Onnx__NodeProto *np) {
    for (size_t i = 0; i < cx->mp->n_functions; i++) {
        const Onnx__FunctionProto *f = cx->mp->functions[i];
        if (f && f->name && strcmp(f->name, np->op_type) == 0 &&
            strcmp(f->domain ? f->domain : "", np->domain ? np->domain : "") == 0)
            return f;
    }
    return NULL;
}

/* ------------------------------------------------------------- one graph */

static int fi_run_nodes(fi_ctx *cx, fi_scope *scope, Onnx__NodeProto *const *nodes, size_t n_nodes,
                        Onnx__OperatorSetIdProto *const *ops, size_t n_ops, const fi_node *caller,
                        bool main_graph);

/* Merges what a rule inferred (t) with what the file declared (decl):
 * inference wins where it knows a dim, the declaration fills the rest;
 * a contradiction is counted (and the first one kept for the report). */
static void fi_merge_declared(fi_ctx *cx, fi_tensor *t, const fi_tensor *decl, const char *name) {
    if (!decl) return;
    if (!t->elem) t->elem = decl->elem;
    if (decl->rank < 0) return;
    if (t->rank < 0) { /* no rule, or one that could not tell: the file's shape */
        t->rank = decl->rank;
        t->dims = decl->dims;
        t->declared = decl->declared;
        return;
    }
    if (t->rank != decl->rank) {
        if (cx->n_conflicts++ == 0)
            snprintf(cx->conflict, sizeof cx->conflict, "'%s': the file says rank %d, inference %d",
                     name, decl->rank, t->rank);
        return;
    }
    for (int d = 0; d < t->rank; d++) {
        /* a size that depends on data is only a bound: the file's own
         * static dim (what the exporter saw) is better */
        if ((t->dims[d].v < 0 || t->bound) && decl->dims[d].v >= 0)
            t->dims[d] = decl->dims[d];
        else if (t->dims[d].v >= 0 && decl->dims[d].v >= 0 && t->dims[d].v != decl->dims[d].v &&
                 cx->n_conflicts++ == 0)
            snprintf(cx->conflict, sizeof cx->conflict,
                     "'%s' dim %d: the file says %lld, inference %lld", name, d,
                     (long long)decl->dims[d].v, (long long)t->dims[d].v);
    }
}

/* --------------------------------------------------- memory of bodies */

static size_t fi_pm_slot(const fi_ctx *cx, const void *key) {
    size_t i = (size_t)(((uintptr_t)key >> 4) * 0x9E3779B97F4A7C15ull) & (cx->pm_cap - 1);
    while (cx->pm_key[i] && cx->pm_key[i] != key) i = (i + 1) & (cx->pm_cap - 1);
    return i;
}

/* key's entry := the larger of it and (bytes, unsized). */
static void fi_pm_max(fi_ctx *cx, const void *key, uint64_t bytes, size_t unsized) {
    if (2 * (cx->pm_n + 1) > cx->pm_cap) {
        size_t old = cx->pm_cap;
        const void **k = cx->pm_key;
        uint64_t *b = cx->pm_bytes;
        size_t *u = cx->pm_unsized;
        cx->pm_cap = old ? 2 * old : 64;
        cx->pm_key = xcalloc(cx->pm_cap, sizeof *cx->pm_key);
        cx->pm_bytes = xcalloc(cx->pm_cap, sizeof *cx->pm_bytes);
        cx->pm_unsized = xcalloc(cx->pm_cap, sizeof *cx->pm_unsized);
        for (size_t i = 0; i < old; i++)
            if (k[i]) {
                size_t j = fi_pm_slot(cx, k[i]);
                cx->pm_key[j] = k[i];
                cx->pm_bytes[j] = b[i];
                cx->pm_unsized[j] = u[i];
            }
        free(k);
        free(b);
        free(u);
    }
    size_t i = fi_pm_slot(cx, key);
    if (!cx->pm_key[i]) {
        cx->pm_key[i] = key;
        cx->pm_n++;
    }
    if (bytes > cx->pm_bytes[i]) cx->pm_bytes[i] = bytes;
    if (unsized > cx->pm_unsized[i]) cx->pm_unsized[i] = unsized;
}

static bool fi_pm_get(const fi_ctx *cx, const void *key, uint64_t *bytes, size_t *unsized) {
    if (!cx->pm_cap) return false;
    size_t i = fi_pm_slot(cx, key);
    if (!cx->pm_key[i]) return false;
    *bytes = cx->pm_bytes[i];
    if (unsized) *unsized = cx->pm_unsized[i];
    return true;
}

uint64_t fi_node_body_bytes(const fi_ctx *cx, const Onnx__NodeProto *np) {
    uint64_t b = 0;
    return fi_pm_get(cx, np, &b, NULL) ? b : 0;
}

uint64_t fi_body_peak_of(const fi_ctx *cx, const Onnx__GraphProto *g, size_t *unsized) {
    uint64_t b = 0;
    size_t u = 0;
    fi_pm_get(cx, g, &b, &u);
    if (unsized) *unsized = u;
    return b;
}

void fi_note_body(fi_node *n, const fi_body_use *u) {
    fi_ctx *cx = n->cx;
    fi_pm_max(cx, n->np, u->bytes, u->unsized);
    if (n->index >= 0 && (size_t)n->index < cx->n_main) {
        fi_body_use *m = &cx->main_use[n->index];
        if (m->how == FI_BODY_NONE || u->bytes >= m->bytes) *m = *u;
    }
}

bool fi_main_body(const fi_ctx *cx, size_t i, fi_body_use *u) {
    if (i >= cx->n_main || cx->main_use[i].how == FI_BODY_NONE) return false;
    *u = cx->main_use[i];
    return true;
}

const fi_tensor *fi_body_find(const void *scope, const char *name) {
    const fi_scope *s = scope;
    size_t i = fi_scope_slot(s, name);
    return s->names[i] ? s->tensors[i] : NULL;
}

size_t fi_inner_count(const fi_ctx *cx) {
    return cx->n_in;
}

void fi_inner_get(const fi_ctx *cx, size_t i, const char **name, const fi_tensor **t, int *node) {
    ROAMC_ASSERT(i < cx->n_in);
    *name = cx->in_name[i];
    *t = cx->in_t[i];
    *node = cx->in_node[i];
}

/* Keeps t as what inference found for the inner value name (the last run
 * of a body wins). */
static void fi_inner_put(fi_ctx *cx, const char *name, fi_tensor *t) {
    int i = fi_names_get(&cx->in_idx, name);
    if (i < 0) {
        if (cx->n_in == cx->cap_in) {
            cx->cap_in = cx->cap_in ? 2 * cx->cap_in : 64;
            cx->in_name = xreallocarray(cx->in_name, cx->cap_in, sizeof *cx->in_name);
            cx->in_t = xreallocarray(cx->in_t, cx->cap_in, sizeof *cx->in_t);
            cx->in_node = xreallocarray(cx->in_node, cx->cap_in, sizeof *cx->in_node);
        }
        i = (int)cx->n_in++;
        cx->in_name[i] = name;
        fi_names_put(&cx->in_idx, name, i);
    }
    cx->in_t[i] = t;
    cx->in_node[i] = cx->cur_main;
}

/* After a body ran in scope s (cx->last_order its order): its nested
 * arena's peak, recorded under g (a subgraph) or as the working memory of
 * the call (a function, call != NULL), and its values for fi_inner_get. */
static void fi_body_record(fi_ctx *cx, fi_scope *s, const Onnx__GraphProto *g, fi_node *call) {
    const Onnx__FunctionProto *f = call ? fi_function_find(cx, call->np) : NULL;
    Onnx__NodeProto *const *nodes = g ? g->node : f->node;
    size_t n_nodes = g ? g->n_node : f->n_node;
    const char **ins = NULL, **outs = NULL;
    size_t n_ins = g ? g->n_input : 0, n_outs = g ? g->n_output : f->n_output;
    ins = xcalloc(n_ins + 1, sizeof *ins);
    outs = xcalloc(n_outs + 1, sizeof *outs);
    for (size_t k = 0; k < n_ins; k++) ins[k] = g->input[k] ? g->input[k]->name : NULL;
    for (size_t k = 0; k < n_outs; k++)
        outs[k] = g ? (g->output[k] ? g->output[k]->name : NULL) : f->output[k];
    fi_body_graph b = {.cx = cx,
                       .scope = s,
                       .nodes = nodes,
                       .n_nodes = n_nodes,
                       .order = cx->last_order,
                       .inputs = ins,
                       .n_inputs = n_ins,
                       .outputs = outs,
                       .n_outputs = n_outs,
                       .count_io = g && g->n_input > 0};
    size_t unsized = 0;
    uint64_t peak = fi_body_peak(&b, &unsized);
    free(ins);
    free(outs);
    if (g) {
        fi_pm_max(cx, g, peak, unsized);
    } else {
        fi_body_use u = {peak, FI_BODY_FUNCTION, -1, unsized};
        fi_note_body(call, &u);
    }
    /* the values: a function's names are its own, so they take the call's */
    const char *prefix = call ? fi_label(call->np) : NULL;
    for (size_t i = 0; i < n_nodes; i++)
        for (size_t k = 0; k < nodes[i]->n_output; k++) {
            const char *o = nodes[i]->output[k];
            fi_tensor *t = o && o[0] ? fi_scope_find(s, o) : NULL;
            if (!t) continue;
            if (prefix) {
                size_t len = strlen(prefix) + strlen(o) + 2;
                char *name = fi_alloc(cx, len);
                if (!name) return;
                snprintf(name, len, "%s/%s", prefix, o);
                o = name;
            }
            fi_inner_put(cx, o, t);
        }
}

void fi_try_save(const fi_node *n, fi_try *t) {
    t->failed = n->cx->failed;
    snprintf(t->err, sizeof t->err, "%s", n->cx->errlen ? n->cx->err : "");
}

void fi_try_restore(fi_node *n, const fi_try *t) {
    n->cx->failed = t->failed;
    if (n->cx->errlen) snprintf(n->cx->err, n->cx->errlen, "%s", t->err);
}

/* Runs a model-local function: its body in a fresh scope (functions see
 * nothing from outside) with the formal inputs bound to the actual ones. */
static int fi_run_function(fi_node *n, const Onnx__FunctionProto *f) {
    fi_ctx *cx = n->cx;
    if (cx->depth >= FI_MAX_DEPTH)
        return fi_fail(n, "functions nested more than %d deep", FI_MAX_DEPTH);
    fi_scope *s = fi_scope_new(cx, NULL, f->n_input + f->n_node * 2);
    if (!s) return -1;
    for (size_t k = 0; k < f->n_input; k++) {
        fi_tensor *t = k < n->n_in && n->in[k] ? n->in[k] : fi_tensor_new(cx);
        if (!t) return -1;
        if (f->input[k] && f->input[k][0]) fi_scope_put(s, f->input[k], t);
    }
    cx->depth++;
    int rc = fi_run_nodes(cx, s, f->node, f->n_node, f->opset_import, f->n_opset_import, n, false);
    cx->depth--;
    if (rc) return -1;
    fi_body_record(cx, s, NULL, n);
    if (cx->failed) return -1;
    for (size_t k = 0; k < n->n_out && k < f->n_output; k++) {
        if (!n->out[k]) continue;
        const fi_tensor *r = f->output[k] ? fi_scope_find(s, f->output[k]) : NULL;
        if (r) {
            fi_tensor keep = *n->out[k];
            *n->out[k] = *r;
            n->out[k]->declared = keep.declared;
        }
    }
    return 0;
}

/* Runs one node: its rule, or its function; an operator roamc has no rule
 * for leaves its outputs as the file declares them. */
static int fi_run_node(fi_ctx *cx, fi_scope *scope, const Onnx__NodeProto *np,
                       Onnx__OperatorSetIdProto *const *ops, size_t n_ops, const fi_node *caller,
                       int index) {
    if (++cx->node_runs > FI_MAX_NODE_RUNS)
        return fi_ctx_fail(
            cx,
            "shape inference would infer more than %zu nodes (subgraph bodies run again for every "
            "enclosing Loop or Scan): refused",
            FI_MAX_NODE_RUNS);
    fi_tensor *in_buf[16], *out_buf[16];
    fi_tensor **in = np->n_input <= 16 ? in_buf : fi_alloc(cx, np->n_input * sizeof *in);
    fi_tensor **out = np->n_output <= 16 ? out_buf : fi_alloc(cx, np->n_output * sizeof *out);
    if (!in || !out) return -1;
    fi_node n = {.cx = cx,
                 .np = np,
                 .opset = fi_opset_of(ops, n_ops, np->domain),
                 .n_in = np->n_input,
                 .n_out = np->n_output,
                 .in = in,
                 .out = out,
                 .caller = caller,
                 .index = index};
    bool bound = false;
    for (size_t k = 0; k < np->n_input; k++) {
        in[k] = (np->input[k] && np->input[k][0]) ? fi_scope_find(scope, np->input[k]) : NULL;
        if (in[k] && in[k]->bound) bound = true;
    }
    /* Outputs start from what the file declares for them (value_info,
     * already in the scope), else unknown. */
    fi_tensor *decl_buf[16];
    fi_tensor **decl = np->n_output <= 16 ? decl_buf : fi_alloc(cx, np->n_output * sizeof *decl);
    if (!decl) return -1;
    for (size_t k = 0; k < np->n_output; k++) {
        out[k] = NULL;
        decl[k] = NULL;
        if (!np->output[k] || !np->output[k][0]) continue;
        decl[k] = fi_scope_find(scope, np->output[k]);
        out[k] = fi_tensor_new(cx);
        if (!out[k]) return -1;
    }
    const Onnx__FunctionProto *f = fi_std_domain(np->domain) ? NULL : fi_function_find(cx, np);
    const fi_rule *r = fi_std_domain(np->domain) ? fi_rule_find(cx, np->op_type)
                                                 : fi_rule_of_domain(np->domain, np->op_type);
    if (!f && fi_std_domain(np->domain) && !r)
        f = fi_function_find(cx, np); /* a local function in "" */
    int rc = 0;
    if (f)
        rc = fi_run_function(&n, f);
    else if (r)
        rc = r->fn(&n);
    if (rc || cx->failed) {
        if (!cx->failed) fi_fail(&n, "shape inference failed");
        return -1;
    }
    for (size_t k = 0; k < np->n_output; k++) {
        if (!out[k]) continue;
        fi_merge_declared(cx, out[k], decl[k], np->output[k]);
        if (bound) out[k]->bound = true;
        fi_scope_put(scope, np->output[k], out[k]);
    }
    return 0;
}

/* Names the node's subgraphs read from enclosing graphs. */
typedef struct fi_name_list {
    const char **s;
    size_t n, cap;
} fi_name_list;

static int fi_name_list_add(fi_ctx *cx, fi_name_list *v, const char *s) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 8;
        const char **p = fi_alloc(cx, cap * sizeof *p);
        if (!p) return -1;
        if (v->n) memcpy(p, v->s, v->n * sizeof *p);
        v->s = p;
        v->cap = cap;
    }
    v->s[v->n++] = s;
    return 0;
}

/* Topological order of nodes (file order where the file is topological):
 * Kahn's algorithm over the data edges within this graph, counting the
 * values a node's subgraphs read from this graph as its inputs too.
 * Returns the order, or NULL after failing (a cycle names its nodes). */
static int *fi_topo(fi_ctx *cx, Onnx__NodeProto *const *nodes, size_t n_nodes) {
    /* producer of each name in this graph */
    fi_scope *prod = fi_scope_new(cx, NULL, n_nodes * 2);
    int *order = fi_alloc(cx, (n_nodes + 1) * sizeof *order);
    size_t *missing = fi_alloc(cx, (n_nodes + 1) * sizeof *missing);
    fi_tensor *idx =
        fi_alloc(cx, (n_nodes + 1) * sizeof *idx); /* idx[i].rank holds i: a name -> node map */
    if (!prod || !order || !missing || !idx) return NULL;
    for (size_t i = 0; i < n_nodes; i++) {
        idx[i].rank = (int)i;
        for (size_t k = 0; k < nodes[i]->n_output; k++)
            if (nodes[i]->output[k] && nodes[i]->output[k][0])
                fi_scope_put(prod, nodes[i]->output[k], &idx[i]);
    }
    /* consumers as CSR over (producer, consumer) pairs */
    size_t n_pairs = 0, cap_pairs = 64;
    int *pa = xmallocarray(cap_pairs, sizeof *pa), *pb = xmallocarray(cap_pairs, sizeof *pb);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n_nodes; i++) {
        const Onnx__NodeProto *np = nodes[i];
        fi_name_list reads = {0};
        for (size_t k = 0; k < np->n_input; k++)
            if (np->input[k] && np->input[k][0] && fi_name_list_add(cx, &reads, np->input[k]))
                rc = -1;
        const char **outer = NULL;
        size_t n_outer = 0;
        if (rc == 0 && fi_outer_reads(np, &outer, &n_outer)) rc = -1;
        for (size_t k = 0; rc == 0 && k < n_outer; k++)
            if (fi_name_list_add(cx, &reads, outer[k])) rc = -1;
        free(outer);
        for (size_t k = 0; rc == 0 && k < reads.n; k++) {
            fi_tensor *p = fi_scope_find(prod, reads.s[k]);
            if (!p) continue;
            if (n_pairs == cap_pairs) {
                cap_pairs *= 2;
                pa = xreallocarray(pa, cap_pairs, sizeof *pa);
                pb = xreallocarray(pb, cap_pairs, sizeof *pb);
            }
            pa[n_pairs] = p->rank;
            pb[n_pairs++] = (int)i;
            missing[i]++;
        }
    }
    size_t *start = xcalloc(n_nodes + 2, sizeof *start);
    int *cons = xmallocarray(n_pairs, sizeof *cons);
    if (rc == 0) {
        for (size_t e = 0; e < n_pairs; e++) start[pa[e] + 2]++;
        for (size_t i = 0; i < n_nodes; i++) start[i + 2] += start[i + 1];
        for (size_t e = 0; e < n_pairs; e++) cons[start[pa[e] + 1]++] = pb[e];
    }
    size_t head = 0, tail = 0;
    /* A min-heap would keep file order exactly; a FIFO seeded in file order
     * keeps it for files that are already topological, which is all the
     * loader needs (inference does not depend on the order). */
    for (size_t i = 0; rc == 0 && i < n_nodes; i++)
        if (missing[i] == 0) order[tail++] = (int)i;
    while (rc == 0 && head < tail) {
        int v = order[head++];
        for (size_t e = start[v]; e < start[v + 1]; e++)
            if (--missing[cons[e]] == 0) order[tail++] = cons[e];
    }
    free(pa);
    free(pb);
    free(start);
    free(cons);
    if (rc) {
        fi_ctx_fail(cx, "subgraphs nested more than %d deep", FI_MAX_DEPTH);
        return NULL;
    }
    if (tail < n_nodes) {
        for (size_t i = 0; i < n_nodes; i++)
            if (missing[i]) {
                fi_ctx_fail(cx,
                            "node '%s' (#%zu) is on a cycle: it reads a value that it (or a node "
                            "after it) produces",
                            fi_label(nodes[i]), i);
                break;
            }
        return NULL;
    }
    return order;
}

static int fi_run_nodes(fi_ctx *cx, fi_scope *scope, Onnx__NodeProto *const *nodes, size_t n_nodes,
                        Onnx__OperatorSetIdProto *const *ops, size_t n_ops, const fi_node *caller,
                        bool main_graph) {
    for (size_t i = 0; i < n_nodes; i++)
        if (!nodes[i] || !nodes[i]->op_type) return fi_ctx_fail(cx, "node #%zu is empty", i);
    int *order = fi_topo(cx, nodes, n_nodes);
    if (!order) return -1;
    fi_scope *saved = cx->cur;
    cx->cur = scope;
    int rc = 0;
    for (size_t s = 0; rc == 0 && s < n_nodes; s++) {
        int i = order[s];
        if (main_graph) cx->cur_main = i;
        rc = fi_run_node(cx, scope, nodes[i], ops, n_ops, caller, main_graph ? i : -1);
    }
    if (main_graph) cx->cur_main = -1;
    cx->cur = saved;
    cx->last_order = order;
    return rc;
}

/* Declares a graph's inputs, initializers and value_info in scope. */
static int fi_declare_graph(fi_ctx *cx, fi_scope *scope, const Onnx__GraphProto *g,
                            fi_tensor *const *in, size_t n_in) {
    for (size_t i = 0; i < g->n_input; i++) {
        const Onnx__ValueInfoProto *vi = g->input[i];
        if (!vi || !vi->name || !vi->name[0]) continue;
        fi_tensor *t;
        if (i < n_in && in && in[i])
            t = in[i];
        else {
            t = fi_tensor_new(cx);
            if (!t || fi_from_type(cx, t, vi->type, vi->name)) return -1;
        }
        fi_scope_put(scope, vi->name, t);
    }
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *tp = g->initializer[i];
        if (!tp || !tp->name || !tp->name[0]) continue;
        fi_tensor *t = fi_tensor_new(cx);
        if (!t || fi_from_tensor_proto(cx, t, tp, tp->name)) return -1;
        fi_scope_put(scope, tp->name, t);
    }
    /* value_info and outputs: declarations that node outputs merge with */
    for (size_t l = 0; l < 2; l++) {
        Onnx__ValueInfoProto *const *vis = l ? g->output : g->value_info;
        size_t n = l ? g->n_output : g->n_value_info;
        for (size_t i = 0; i < n; i++) {
            const Onnx__ValueInfoProto *vi = vis[i];
            if (!vi || !vi->name || !vi->name[0]) continue;
            size_t slot = fi_scope_slot(scope, vi->name);
            if (scope->names[slot]) continue; /* an input or initializer: already known */
            fi_tensor *t = fi_tensor_new(cx);
            if (!t || fi_from_type(cx, t, vi->type, vi->name)) return -1;
            fi_scope_put(scope, vi->name, t);
        }
    }
    return cx->failed ? -1 : 0;
}

int fi_run_subgraph(fi_node *n, const Onnx__GraphProto *g, fi_tensor *const *in, size_t n_in,
                    fi_tensor **out) {
    fi_ctx *cx = n->cx;
    if (!g) return fi_fail(n, "missing subgraph");
    if (cx->depth >= FI_MAX_DEPTH)
        return fi_fail(n, "subgraphs nested more than %d deep", FI_MAX_DEPTH);
    /* The body sees the scope of the graph the node is in (cx->cur). */
    fi_scope *s =
        fi_scope_new(cx, cx->cur, g->n_input + g->n_initializer + g->n_value_info + 2 * g->n_node);
    if (!s) return -1;
    if (fi_declare_graph(cx, s, g, in, n_in)) return -1;
    const Onnx__ModelProto *mp = cx->mp;
    cx->depth++;
    int rc = fi_run_nodes(cx, s, g->node, g->n_node, mp->opset_import, mp->n_opset_import,
                          n->caller, false);
    cx->depth--;
    if (rc) return -1;
    fi_body_record(cx, s, g, NULL);
    for (size_t k = 0; k < g->n_output; k++) {
        const char *name = g->output[k] ? g->output[k]->name : NULL;
        out[k] = name ? fi_scope_find(s, name) : NULL;
        if (!out[k]) {
            out[k] = fi_tensor_new(cx);
            if (!out[k]) return -1;
        }
    }
    return 0;
}

/* ---------------------------------------------------- subgraph outer reads */

/* A set of borrowed names in insertion order, hashed, so that a subgraph
 * with 100,000 names costs 100,000 steps. */
typedef struct fi_strset {
    const char **s;
    size_t n, cap;
    fi_names where; /* name -> position in s */
} fi_strset;

static bool fi_strset_has(const fi_strset *set, const char *name) {
    return fi_names_get(&set->where, name) >= 0;
}

static void fi_strset_add(fi_strset *set, const char *name) {
    if (!fi_names_put(&set->where, name, (int)set->n)) return;
    if (set->n == set->cap) {
        set->cap = set->cap ? 2 * set->cap : 8;
        set->s = xreallocarray(set->s, set->cap, sizeof *set->s);
    }
    set->s[set->n++] = name;
}

static void fi_strset_free(fi_strset *set) {
    free(set->s);
    fi_names_free(&set->where);
    memset(set, 0, sizeof *set);
}

static int fi_collect_graph(const Onnx__GraphProto *g, fi_strset *defined, fi_strset *used,
                            int depth);

static int fi_collect_node_subgraphs(const Onnx__NodeProto *n, fi_strset *defined, fi_strset *used,
                                     int depth) {
    if (depth > FI_MAX_DEPTH) return -1; /* absurd nesting: refuse rather than recurse forever */
    for (size_t i = 0; i < n->n_attribute; i++) {
        const Onnx__AttributeProto *a = n->attribute[i];
        if (!a) continue;
        if (a->g && fi_collect_graph(a->g, defined, used, depth + 1)) return -1;
        for (size_t k = 0; k < a->n_graphs; k++)
            if (a->graphs[k] && fi_collect_graph(a->graphs[k], defined, used, depth + 1)) return -1;
    }
    return 0;
}

static int fi_collect_graph(const Onnx__GraphProto *g, fi_strset *defined, fi_strset *used,
                            int depth) {
    for (size_t i = 0; i < g->n_input; i++)
        if (g->input[i] && g->input[i]->name) fi_strset_add(defined, g->input[i]->name);
    for (size_t i = 0; i < g->n_initializer; i++)
        if (g->initializer[i] && g->initializer[i]->name)
            fi_strset_add(defined, g->initializer[i]->name);
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *n = g->node[i];
        if (!n) continue;
        for (size_t k = 0; k < n->n_output; k++)
            if (n->output[k] && n->output[k][0]) fi_strset_add(defined, n->output[k]);
        for (size_t k = 0; k < n->n_input; k++)
            if (n->input[k] && n->input[k][0]) fi_strset_add(used, n->input[k]);
        if (fi_collect_node_subgraphs(n, defined, used, depth)) return -1;
    }
    for (size_t i = 0; i < g->n_output; i++)
        if (g->output[i] && g->output[i]->name) fi_strset_add(used, g->output[i]->name);
    return 0;
}

int fi_outer_reads(const Onnx__NodeProto *n, const char ***names, size_t *count) {
    *names = NULL;
    *count = 0;
    bool any = false;
    for (size_t i = 0; i < n->n_attribute && !any; i++)
        any = n->attribute[i] && (n->attribute[i]->g || n->attribute[i]->n_graphs);
    if (!any) return 0;
    fi_strset defined = {0}, used = {0}, outer = {0};
    int rc = fi_collect_node_subgraphs(n, &defined, &used, 0);
    for (size_t i = 0; rc == 0 && i < used.n; i++)
        if (!fi_strset_has(&defined, used.s[i])) fi_strset_add(&outer, used.s[i]);
    fi_strset_free(&defined);
    fi_strset_free(&used);
    fi_names_free(&outer.where);
    if (rc) {
        free(outer.s);
        return -1;
    }
    *names = outer.s;
    *count = outer.n;
    return 0;
}

/* ----------------------------------------------------------------- model */

int fi_infer_model(const Onnx__ModelProto *mp, const fe_options *opt, fi_ctx **out, char *err,
                   size_t errlen) {
    *out = NULL;
    fi_ctx *cx = xcalloc(1, sizeof *cx);
    cx->mp = mp;
    cx->opt = opt;
    cx->err = err;
    cx->errlen = errlen;
    const Onnx__GraphProto *g = mp->graph;
    /* --dim symbols first, so the report lists them even when unused */
    for (size_t i = 0; opt && i < opt->n_dims; i++)
        fi_symbol_add(cx, opt->dims[i].symbol, opt->dims[i].value, FE_SYMBOL_INPUT, -1);
    cx->cur_main = -1;
    cx->n_main = g->n_node;
    cx->main_use = xcalloc(g->n_node + 1, sizeof *cx->main_use);
    int rc = fi_rules_init(cx);
    if (rc == 0) {
        cx->main_scope =
            fi_scope_new(cx, NULL, g->n_input + g->n_initializer + g->n_value_info + 2 * g->n_node);
        rc = cx->main_scope ? fi_declare_graph(cx, cx->main_scope, g, NULL, 0) : -1;
    }
    /* --input-shape: replaces the declared shape of a graph input; a dim
     * the file fixes must agree. */
    for (size_t i = 0; rc == 0 && opt && i < opt->n_shapes; i++) {
        const fe_input_shape *b = &opt->shapes[i];
        const Onnx__ValueInfoProto *vi = NULL;
        for (size_t k = 0; k < g->n_input && !vi; k++)
            if (g->input[k] && g->input[k]->name && strcmp(g->input[k]->name, b->name) == 0)
                vi = g->input[k];
        if (!vi) {
            rc = fi_ctx_fail(cx, "--input-shape names '%s', which is not a graph input", b->name);
            break;
        }
        fi_tensor *t = fi_scope_find(cx->main_scope, b->name);
        if (t->rank >= 0 && (size_t)t->rank != b->rank) {
            rc = fi_ctx_fail(cx, "--input-shape %s has %zu dims; the graph input has rank %d",
                             b->name, b->rank, t->rank);
            break;
        }
        fi_dim *dims = fi_alloc(cx, (b->rank + 1) * sizeof *dims);
        if (!dims) {
            rc = -1;
            break;
        }
        for (size_t d = 0; d < b->rank; d++) {
            if (t->rank >= 0 && t->dims[d].v >= 0 && t->dims[d].v != b->dims[d]) {
                rc = fi_ctx_fail(cx, "--input-shape %s: dim %zu is %lld in the file, not %lld",
                                 b->name, d, (long long)t->dims[d].v, (long long)b->dims[d]);
                break;
            }
            dims[d] = fi_known(b->dims[d]);
            /* the symbol the file names here takes the value everywhere */
            if (t->rank >= 0 && t->dims[d].v < 0 && t->dims[d].exact && t->dims[d].sym >= 0) {
                fi_symbol *s = &cx->syms[t->dims[d].sym];
                if (s->value >= 0 && s->value != b->dims[d]) {
                    rc = fi_ctx_fail(
                        cx, "--input-shape %s: dim %zu is the symbol '%s' = %lld, not %lld",
                        b->name, d, s->name, (long long)s->value, (long long)b->dims[d]);
                    break;
                }
                s->value = b->dims[d];
            }
        }
        t->rank = (int)b->rank;
        t->dims = dims;
    }
    /* Symbols bound by --input-shape: declared dims that name them become known. */
    if (rc == 0) {
        fi_scope *s = cx->main_scope;
        for (size_t i = 0; i < s->cap; i++) {
            fi_tensor *t = s->names[i] ? s->tensors[i] : NULL;
            for (int d = 0; t && d < t->rank; d++)
                if (t->dims[d].v < 0 && t->dims[d].exact && t->dims[d].sym >= 0 &&
                    cx->syms[t->dims[d].sym].value >= 0)
                    t->dims[d] = fi_known(cx->syms[t->dims[d].sym].value);
        }
        cx->cur = cx->main_scope;
        rc = fi_run_nodes(cx, cx->main_scope, g->node, g->n_node, mp->opset_import,
                          mp->n_opset_import, NULL, true);
    }
    if (rc || cx->failed) {
        if (!cx->failed) snprintf(err, errlen, "shape inference failed");
        fi_free(cx);
        return -1;
    }
    *out = cx;
    return 0;
}

void fi_free(fi_ctx *cx) {
    if (!cx) return;
    for (fi_chunk *c = cx->arena, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(cx->syms);
    free(cx->pm_key);
    free(cx->pm_bytes);
    free(cx->pm_unsized);
    free(cx->main_use);
    free(cx->in_name);
    free(cx->in_t);
    free(cx->in_node);
    fi_names_free(&cx->in_idx);
    free(cx);
}

const fi_tensor *fi_lookup(const fi_ctx *cx, const char *name) {
    size_t i = fi_scope_slot(cx->main_scope, name);
    return cx->main_scope->names[i] ? cx->main_scope->tensors[i] : NULL;
}

size_t fi_conflicts(const fi_ctx *cx, const char **first) {
    *first = cx->conflict;
    return cx->n_conflicts;
}

/* ------------------------------------------------------------ attributes */

const Onnx__AttributeProto *fi_attr(const fi_node *n, const char *name) {
    const Onnx__NodeProto *np = n->np;
    for (size_t i = 0; i < np->n_attribute; i++) {
        const Onnx__AttributeProto *a = np->attribute[i];
        if (!a || !a->name || strcmp(a->name, name) != 0) continue;
        if (a->ref_attr_name && a->ref_attr_name[0]) {
            /* inside a function: the caller's attribute of that name */
            if (!n->caller) return NULL;
            fi_node up = *n->caller;
            const Onnx__NodeProto *cp = up.np;
            for (size_t k = 0; k < cp->n_attribute; k++)
                if (cp->attribute[k] && cp->attribute[k]->name &&
                    strcmp(cp->attribute[k]->name, a->ref_attr_name) == 0)
                    return cp->attribute[k];
            return NULL;
        }
        return a;
    }
    return NULL;
}

int64_t fi_attr_int(const fi_node *n, const char *name, int64_t dflt) {
    const Onnx__AttributeProto *a = fi_attr(n, name);
    return a ? a->i : dflt;
}

double fi_attr_float(const fi_node *n, const char *name, double dflt) {
    const Onnx__AttributeProto *a = fi_attr(n, name);
    return a ? a->f : dflt;
}

const char *fi_attr_string(const fi_node *n, const char *name, const char *dflt, char *buf,
                           size_t len) {
    const Onnx__AttributeProto *a = fi_attr(n, name);
    if (!a || !len) return dflt;
    size_t k = a->s.len < len - 1 ? a->s.len : len - 1;
    if (k) memcpy(buf, a->s.data, k);
    buf[k] = '\0';
    return buf;
}

bool fi_attr_ints(const fi_node *n, const char *name, const int64_t **v, size_t *len) {
    const Onnx__AttributeProto *a = fi_attr(n, name);
    if (!a) return false;
    *v = a->ints;
    *len = a->n_ints;
    return true;
}

bool fi_attr_floats(const fi_node *n, const char *name, const float **v, size_t *len) {
    const Onnx__AttributeProto *a = fi_attr(n, name);
    if (!a) return false;
    *v = a->floats;
    *len = a->n_floats;
    return true;
}

/* ---------------------------------------------------------------- inputs */

fi_tensor *fi_in(const fi_node *n, size_t k) {
    return k < n->n_in ? n->in[k] : NULL;
}

bool fi_in_ints(const fi_node *n, size_t k, const int64_t **v, size_t *len) {
    const fi_tensor *t = fi_in(n, k);
    if (!t || t->n_const < 0) return false;
    if (!t->ci) {
        /* a float value asked for as ints: truncate once, cache on the tensor */
        int64_t *ci = fi_alloc(n->cx, (size_t)(t->n_const + 1) * sizeof *ci);
        if (!ci) return false;
        for (int64_t i = 0; i < t->n_const; i++) ci[i] = fi_double_to_int(t->cf[i]);
        ((fi_tensor *)t)->ci = ci;
    }
    *v = t->ci;
    *len = (size_t)t->n_const;
    return true;
}

bool fi_in_floats(const fi_node *n, size_t k, const double **v, size_t *len) {
    const fi_tensor *t = fi_in(n, k);
    if (!t || t->n_const < 0) return false;
    if (!t->cf) {
        double *cf = fi_alloc(n->cx, (size_t)(t->n_const + 1) * sizeof *cf);
        if (!cf) return false;
        for (int64_t i = 0; i < t->n_const; i++) cf[i] = (double)t->ci[i];
        ((fi_tensor *)t)->cf = cf;
    }
    *v = t->cf;
    *len = (size_t)t->n_const;
    return true;
}

bool fi_in_scalar(const fi_node *n, size_t k, int64_t *v) {
    const int64_t *p;
    size_t len;
    if (!fi_in_ints(n, k, &p, &len) || len != 1) return false;
    *v = p[0];
    return true;
}

bool fi_has_rank(const fi_tensor *t) {
    return t && t->rank >= 0;
}

bool fi_all_known(const fi_tensor *t) {
    if (!t || t->rank < 0) return false;
    for (int d = 0; d < t->rank; d++)
        if (t->dims[d].v < 0) return false;
    return true;
}

int64_t fi_numel(const fi_tensor *t) {
    if (!fi_all_known(t)) return -1;
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++)
        if (__builtin_mul_overflow(n, t->dims[d].v, &n) || n > FI_MAX_DIM) return -1;
    return n;
}

int32_t fi_blame(const fi_tensor *t) {
    if (!t) return -1;
    for (int d = 0; d < t->rank; d++)
        if (t->dims[d].v < 0 && t->dims[d].sym >= 0) return t->dims[d].sym;
    return t->blame;
}

/* --------------------------------------------------------------- outputs */

int fi_set_type(fi_node *n, size_t k, int32_t elem) {
    if (k >= n->n_out || !n->out[k] || n->cx->failed) return n->cx->failed ? -1 : 0;
    n->out[k]->elem = elem;
    return 0;
}

int fi_set_shape(fi_node *n, size_t k, int32_t elem, int rank, const fi_dim *dims) {
    if (n->cx->failed) return -1;
    if (k >= n->n_out || !n->out[k]) return 0;
    fi_tensor *t = n->out[k];
    if (elem) t->elem = elem;
    if (rank < 0) return 0;
    if (rank > FI_MAX_RANK)
        return fi_fail(n, "output %zu would have rank %d; roamc handles at most %d", k, rank,
                       FI_MAX_RANK);
    fi_dim *d = fi_alloc(n->cx, ((size_t)rank + 1) * sizeof *d);
    if (!d) return -1;
    int64_t numel = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i].v > FI_MAX_DIM)
            return fi_fail(n, "output %zu dim %d = %lld is out of range", k, i,
                           (long long)dims[i].v);
        d[i] = dims[i];
        if (dims[i].v >= 0 && numel >= 0 &&
            (__builtin_mul_overflow(numel, dims[i].v, &numel) || numel > FI_MAX_DIM))
            return fi_fail(n, "output %zu: the product of its dims overflows 2^62 elements", k);
    }
    t->rank = rank;
    t->dims = d;
    t->n_const = -1;
    t->ci = NULL;
    t->cf = NULL;
    return 0;
}

int fi_set_sequence(fi_node *n, size_t k, int32_t elem, int rank, const fi_dim *dims, fi_dim len) {
    if (fi_set_shape(n, k, elem, rank, dims)) return -1;
    if (k < n->n_out && n->out[k]) {
        n->out[k]->seq = true;
        n->out[k]->seq_len = len;
    }
    return 0;
}

int fi_set_like(fi_node *n, size_t k, const fi_tensor *src) {
    if (!src) return n->cx->failed ? -1 : 0;
    return fi_set_shape(n, k, src->elem, src->rank, src->dims);
}

static int fi_set_value(fi_node *n, size_t k, int32_t elem, int rank, const fi_dim *dims,
                        const int64_t *vi, const double *vf) {
    if (fi_set_shape(n, k, elem, rank, dims)) return -1;
    if (k >= n->n_out || !n->out[k]) return 0;
    fi_tensor *t = n->out[k];
    int64_t count = fi_numel(t);
    if (count < 0 || count > FI_MAX_CONST_ELEMS) return 0; /* too large to keep: shape only */
    if (fi_is_int_type(elem) || (!fi_is_float_type(elem) && vi)) {
        int64_t *c = fi_alloc(n->cx, (size_t)(count + 1) * sizeof *c);
        if (!c) return -1;
        for (int64_t i = 0; i < count; i++) c[i] = vi ? vi[i] : fi_double_to_int(vf[i]);
        t->ci = c;
    } else {
        double *c = fi_alloc(n->cx, (size_t)(count + 1) * sizeof *c);
        if (!c) return -1;
        for (int64_t i = 0; i < count; i++) c[i] = vf ? vf[i] : (double)vi[i];
        t->cf = c;
    }
    t->n_const = count;
    return 0;
}

int fi_set_value_ints(fi_node *n, size_t k, int32_t elem, int rank, const fi_dim *dims,
                      const int64_t *v) {
    return fi_set_value(n, k, elem, rank, dims, v, NULL);
}

int fi_set_value_floats(fi_node *n, size_t k, int32_t elem, int rank, const fi_dim *dims,
                        const double *v) {
    return fi_set_value(n, k, elem, rank, dims, NULL, v);
}

int fi_set_from_tensor_proto(fi_node *n, size_t k, const Onnx__TensorProto *tp) {
    if (n->cx->failed) return -1;
    if (k >= n->n_out || !n->out[k]) return 0;
    if (fi_from_tensor_proto(n->cx, n->out[k], tp, n->np->output[k])) return -1;
    n->out[k]->declared = false; /* a node's output, inferred from its attribute */
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

static fi_dim fi_derived(fi_dim a, fi_dim b) {
    return fi_unknown_derived(a.v < 0 && a.sym >= 0 ? a.sym : b.v < 0 ? b.sym : -1);
}

fi_dim fi_dim_add(fi_node *n, fi_dim a, fi_dim b) {
    if (a.v < 0 || b.v < 0) return fi_derived(a, b);
    int64_t r;
    if (__builtin_add_overflow(a.v, b.v, &r) || r > FI_MAX_DIM) {
        fi_fail(n, "a dim would exceed 2^62 (%lld + %lld)", (long long)a.v, (long long)b.v);
        return fi_known(0);
    }
    return fi_known(r);
}

fi_dim fi_dim_sub(fi_node *n, fi_dim a, fi_dim b) {
    if (a.v < 0 || b.v < 0) return fi_derived(a, b);
    if (a.v < b.v) {
        fi_fail(n, "a dim would be negative (%lld - %lld)", (long long)a.v, (long long)b.v);
        return fi_known(0);
    }
    return fi_known(a.v - b.v);
}

fi_dim fi_dim_mul(fi_node *n, fi_dim a, fi_dim b) {
    if (a.v == 0 || b.v == 0) return fi_known(0);
    if (a.v < 0 || b.v < 0) return fi_derived(a, b);
    int64_t r;
    if (__builtin_mul_overflow(a.v, b.v, &r) || r > FI_MAX_DIM) {
        fi_fail(n, "a dim would exceed 2^62 (%lld x %lld)", (long long)a.v, (long long)b.v);
        return fi_known(0);
    }
    return fi_known(r);
}

fi_dim fi_dim_div_floor(fi_node *n, fi_dim a, int64_t b) {
    if (b <= 0) {
        fi_fail(n, "division of a dim by %lld", (long long)b);
        return fi_known(0);
    }
    if (a.v < 0) return fi_derived(a, a);
    return fi_known(a.v / b);
}

fi_dim fi_dim_div_ceil(fi_node *n, fi_dim a, int64_t b) {
    if (b <= 0) {
        fi_fail(n, "division of a dim by %lld", (long long)b);
        return fi_known(0);
    }
    if (a.v < 0) return fi_derived(a, a);
    return fi_known(a.v / b + (a.v % b != 0));
}

fi_dim fi_dim_merge(fi_node *n, fi_dim a, fi_dim b, const char *what) {
    if (a.v >= 0 && b.v >= 0 && a.v != b.v) {
        fi_fail(n, "%s differ: %lld and %lld", what, (long long)a.v, (long long)b.v);
        return a;
    }
    if (a.v >= 0) return a;
    if (b.v >= 0) return b;
    return a.sym >= 0 ? a : b;
}

fi_dim fi_dim_broadcast(fi_node *n, fi_dim a, fi_dim b) {
    if (a.v == 1) return b;
    if (b.v == 1) return a;
    if (a.v >= 0 && b.v >= 0) {
        if (a.v != b.v)
            fi_fail(n, "cannot broadcast dims %lld and %lld", (long long)a.v, (long long)b.v);
        return a;
    }
    /* an unknown against a known non-1: the unknown must be that or 1 */
    if (a.v >= 0) return a;
    if (b.v >= 0) return b;
    return a.sym >= 0 ? a : b;
}

int fi_broadcast(fi_node *n, fi_tensor *const *inputs, size_t count, int *rank, fi_dim *dims) {
    int r = 0;
    for (size_t i = 0; i < count; i++) {
        if (!inputs[i]) continue;
        if (inputs[i]->rank < 0) return 1;
        if (inputs[i]->rank > r) r = inputs[i]->rank;
    }
    for (int d = 0; d < r; d++) dims[d] = fi_known(1);
    for (size_t i = 0; i < count; i++) {
        const fi_tensor *t = inputs[i];
        if (!t) continue;
        for (int d = 0; d < t->rank; d++) {
            int o = r - t->rank + d;
            dims[o] = fi_dim_broadcast(n, dims[o], t->dims[d]);
        }
    }
    *rank = r;
    return n->cx->failed ? -1 : 0;
}

int fi_axis(fi_node *n, int64_t axis, int rank, int *out) {
    if (axis < -rank || axis >= rank)
        return fi_fail(n, "axis %lld out of range for rank %d", (long long)axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return 0;
}

fi_dim fi_data_dim(fi_node *n, const char *what, int64_t upper) {
    /* Named after the first output, unique in its graph (node names need
     * not be, and nodes in subgraphs have no index): two data sizes never
     * share a symbol, so one never takes the other's bound. */
    char name[512];
    const char *out =
        n->np->n_output && n->np->output[0] && n->np->output[0][0] ? n->np->output[0] : NULL;
    if (out)
        snprintf(name, sizeof name, "%s:%s", out, what);
    else
        snprintf(name, sizeof name, "%s#%d:%s", n->np->op_type, n->index, what);
    int64_t flag = fi_flag_dim(n->cx, name);
    int64_t v = flag >= 0 ? flag : upper;
    int32_t s = fi_symbol_add(n->cx, name, v, FE_SYMBOL_DATA, n->index);
    if (s >= 0) { /* --dim made it first, as an input symbol: it is this node's */
        n->cx->syms[s].kind = FE_SYMBOL_DATA;
        n->cx->syms[s].node = n->index;
        if (n->cx->syms[s].value < 0 && v >= 0) n->cx->syms[s].value = v;
    }
    for (size_t k = 0; k < n->n_out; k++)
        if (n->out[k]) n->out[k]->bound = true;
    if (s >= 0 && n->cx->syms[s].value >= 0) return fi_known(n->cx->syms[s].value);
    return fi_unknown(s);
}

/* ------------------------------------------- nested arena of a body
 *
 * The working memory of a body (If branch, Loop/Scan body, function) as a
 * nested arena: see infer.h "memory of bodies".  The body's values live
 * from the step that makes them to the last step that reads them (a read
 * by a nested body counts at the nested node's step); the peak is the
 * largest sum of live values at one step plus that step's own nested
 * working memory. */

/* One storage of the nested arena: a value, or (for a view) the value it
 * shares storage with (root). */
typedef struct fb_entry {
    uint64_t bytes;
    size_t first, last;
    int root;
} fb_entry;

typedef struct fb_arena {
    fb_entry *e;
    size_t n, cap;
    fi_names idx; /* name -> entry */
} fb_arena;

static const char *const fb_views[] = {"Reshape",   "Flatten",  "Squeeze",
                                       "Unsqueeze", "Identity", NULL};

static bool fb_is_view(const Onnx__NodeProto *np) {
    if (np->domain && np->domain[0] && strcmp(np->domain, "ai.onnx") != 0) return false;
    for (const char *const *v = fb_views; *v; v++)
        if (strcmp(np->op_type, *v) == 0) return true;
    return false;
}

/* Bytes of t rounded up to FI_BODY_ALIGN, or 0 with ++*unsized when its
 * type or a dim is unknown. */
static uint64_t fb_bytes(const fi_tensor *t, size_t *unsized) {
    unsigned bits = t ? fe_elem_bits(t->elem) : 0;
    if (!t || bits == 0 || t->rank < 0 || (t->seq && t->seq_len.v < 0)) {
        ++*unsized;
        return 0;
    }
    uint64_t n = 1;
    for (int d = 0; d < t->rank; d++) {
        if (t->dims[d].v < 0) {
            ++*unsized;
            return 0;
        }
        if (__builtin_mul_overflow(n, (uint64_t)t->dims[d].v, &n)) return UINT64_MAX;
    }
    if (t->seq && __builtin_mul_overflow(n, (uint64_t)t->seq_len.v, &n)) return UINT64_MAX;
    uint64_t b;
    if (bits % 8 == 0) {
        if (__builtin_mul_overflow(n, (uint64_t)(bits / 8), &b)) return UINT64_MAX;
    } else {
        b = n / 2 + n % 2;
    }
    if (b > UINT64_MAX - FI_BODY_ALIGN) return UINT64_MAX;
    return (b + FI_BODY_ALIGN - 1) / FI_BODY_ALIGN * FI_BODY_ALIGN;
}

static int fb_root(const fb_arena *a, int i) {
    while (a->e[i].root != i) i = a->e[i].root;
    return i;
}

static int fb_add(fb_arena *a, const char *name, uint64_t bytes, size_t step, int root) {
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 16;
        a->e = xreallocarray(a->e, a->cap, sizeof *a->e);
    }
    int i = (int)a->n++;
    a->e[i] = (fb_entry){bytes, step, step, root >= 0 ? root : i};
    /* a name made twice (a body that is not SSA): the first keeps the name,
     * the second is still counted */
    (void)fi_names_put(&a->idx, name, i);
    return i;
}

/* A read of name at step s: its storage lives at least to s. */
static void fb_read(fb_arena *a, const char *name, size_t s) {
    if (!name || !name[0]) return;
    int i = fi_names_get(&a->idx, name);
    if (i < 0) return; /* read from an enclosing graph, or not made here */
    int r = fb_root(a, i);
    if (a->e[r].last < s) a->e[r].last = s;
}

uint64_t fi_body_peak(const fi_body_graph *b, size_t *unsized) {
    fb_arena a = {0};
    size_t steps = b->n_nodes ? b->n_nodes : 1;
    for (size_t k = 0; b->count_io && k < b->n_inputs; k++)
        if (b->inputs[k] && b->inputs[k][0])
            fb_add(&a, b->inputs[k], fb_bytes(fi_body_find(b->scope, b->inputs[k]), unsized), 0,
                   -1);
    uint64_t *nested = xcalloc(steps, sizeof *nested);
    for (size_t s = 0; s < b->n_nodes; s++) {
        const Onnx__NodeProto *np = b->nodes[b->order[s]];
        for (size_t k = 0; k < np->n_input; k++) fb_read(&a, np->input[k], s);
        const char **outer = NULL;
        size_t n_outer = 0;
        if (fi_outer_reads(np, &outer, &n_outer) == 0)
            for (size_t k = 0; k < n_outer; k++) fb_read(&a, outer[k], s);
        free(outer);
        nested[s] = fi_node_body_bytes(b->cx, np);
        int view_of = -1;
        if (fb_is_view(np) && np->n_input && np->input[0] && np->input[0][0]) {
            int i = fi_names_get(&a.idx, np->input[0]);
            view_of = i >= 0 ? fb_root(&a, i) : -2; /* -2: a view of an outer value */
        }
        for (size_t k = 0; k < np->n_output; k++) {
            const char *o = np->output[k];
            if (!o || !o[0]) continue;
            if (k == 0 && view_of != -1)
                fb_add(&a, o, 0, s, view_of >= 0 ? view_of : -1);
            else
                fb_add(&a, o, fb_bytes(fi_body_find(b->scope, o), unsized), s, -1);
        }
    }
    for (size_t k = 0; k < b->n_outputs; k++) {
        int i = b->outputs[k] && b->outputs[k][0] ? fi_names_get(&a.idx, b->outputs[k]) : -1;
        if (i < 0) continue;
        int r = fb_root(&a, i);
        if (b->count_io)
            a.e[r].last = steps - 1;
        else
            a.e[r].bytes = 0; /* the node's own output: the enclosing plan holds it */
    }
    /* sizes are at most 2^62 each (fb_bytes saturates higher), so 128-bit
     * sums cannot wrap */
    unsigned __int128 *delta = xcalloc(steps + 1, sizeof *delta);
    unsigned __int128 *gone = xcalloc(steps + 1, sizeof *gone);
    for (size_t i = 0; i < a.n; i++) {
        if (a.e[i].root != (int)i || a.e[i].bytes == 0) continue;
        uint64_t by = a.e[i].bytes > FI_MAX_DIM ? (uint64_t)FI_MAX_DIM : a.e[i].bytes;
        delta[a.e[i].first] += by;
        gone[a.e[i].last + 1] += by;
    }
    unsigned __int128 live = 0, peak = 0;
    for (size_t s = 0; s < steps; s++) {
        live = live + delta[s] - gone[s];
        unsigned __int128 here = live + nested[s];
        if (here > peak) peak = here;
    }
    free(delta);
    free(gone);
    free(nested);
    free(a.e);
    fi_names_free(&a.idx);
    return peak > UINT64_MAX ? UINT64_MAX : (uint64_t)peak;
}
