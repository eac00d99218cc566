/* Bodies (If branches, Loop and Scan bodies, model-local functions): the
 * names they read from enclosing graphs, and the memory they work in, kept
 * per node and per body (infer.h "memory of bodies").
 *
 * Reading order: the map of bodies' peaks and nodes' working memory -> the
 * values made inside bodies (for `roamc shapes`) -> recording a body after
 * it ran -> outer reads -> the nested arena of one body -> the weights
 * bodies hold.
 */
#include "infer_ctx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void fi_body_record(fi_ctx *cx, fi_scope *s, const Onnx__GraphProto *g, fi_node *call) {
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
                       .count_io = g && g->n_input > 0,
                       .consts_are_weights = g != NULL};
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

/* A Constant node of the standard domain. */
static bool fi_is_constant(const Onnx__NodeProto *np) {
    return (!np->domain || !np->domain[0] || strcmp(np->domain, "ai.onnx") == 0) && np->op_type &&
           strcmp(np->op_type, "Constant") == 0;
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
        /* a subgraph's Constant is one of its weights (fi_body_weights):
         * held for the whole step, not in the nested arena */
        bool weight = b->consts_are_weights && fi_is_constant(np);
        for (size_t k = 0; k < np->n_output; k++) {
            const char *o = np->output[k];
            if (!o || !o[0]) continue;
            if (weight)
                fb_add(&a, o, 0, s, -1);
            else if (k == 0 && view_of != -1)
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

/* ----------------------------------------------------- weights of bodies */

/* a + b, capped at FI_MAX_DIM (sizes a file claims, not memory at hand) */
static uint64_t fw_add(uint64_t a, uint64_t b) {
    return a > (uint64_t)FI_MAX_DIM - b ? (uint64_t)FI_MAX_DIM : a + b;
}

/* n elements of elem, rounded up to FI_BODY_ALIGN; 0 for a type with no
 * fixed size (strings) or an unknown one. */
static uint64_t fw_bytes(int32_t elem, uint64_t n) {
    unsigned bits = fe_elem_bits(elem);
    if (!bits) return 0;
    uint64_t b;
    if (bits % 8 == 0) {
        if (__builtin_mul_overflow(n, (uint64_t)(bits / 8), &b) || b > (uint64_t)FI_MAX_DIM)
            b = (uint64_t)FI_MAX_DIM;
    } else {
        b = n / 2 + n % 2;
    }
    return (b + FI_BODY_ALIGN - 1) / FI_BODY_ALIGN * FI_BODY_ALIGN;
}

/* The product of dims (1 for none), capped at FI_MAX_DIM; 0 when a dim is
 * negative (a broken file holds nothing). */
static uint64_t fw_numel(const int64_t *dims, size_t rank) {
    uint64_t n = 1;
    for (size_t d = 0; d < rank; d++) {
        if (dims[d] < 0) return 0;
        if (__builtin_mul_overflow(n, (uint64_t)dims[d], &n) || n > (uint64_t)FI_MAX_DIM)
            return (uint64_t)FI_MAX_DIM;
    }
    return n;
}

static uint64_t fw_tensor(const Onnx__TensorProto *t) {
    return t ? fw_bytes(t->data_type, fw_numel(t->dims, t->n_dims)) : 0;
}

static uint64_t fw_sparse(const Onnx__SparseTensorProto *t) {
    return t && t->values ? fw_bytes(t->values->data_type, fw_numel(t->dims, t->n_dims)) : 0;
}

/* The value a Constant node holds (its one value attribute). */
static uint64_t fw_constant(const Onnx__NodeProto *np) {
    for (size_t i = 0; i < np->n_attribute; i++) {
        const Onnx__AttributeProto *a = np->attribute[i];
        if (!a || !a->name) continue;
        if (strcmp(a->name, "value") == 0) return fw_tensor(a->t);
        if (strcmp(a->name, "sparse_value") == 0) return fw_sparse(a->sparse_tensor);
        if (strcmp(a->name, "value_float") == 0)
            return fw_bytes(ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1);
        if (strcmp(a->name, "value_floats") == 0)
            return fw_bytes(ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, a->n_floats);
        if (strcmp(a->name, "value_int") == 0)
            return fw_bytes(ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1);
        if (strcmp(a->name, "value_ints") == 0)
            return fw_bytes(ONNX__TENSOR_PROTO__DATA_TYPE__INT64, a->n_ints);
    }
    return 0;
}

static uint64_t fw_node(const Onnx__NodeProto *n, size_t *count, int depth);

/* Subgraph g's initializers and Constants, and those of its nodes' own
 * subgraphs. */
static uint64_t fw_graph(const Onnx__GraphProto *g, size_t *count, int depth) {
    uint64_t sum = 0;
    for (size_t i = 0; i < g->n_initializer; i++, ++*count)
        sum = fw_add(sum, fw_tensor(g->initializer[i]));
    for (size_t i = 0; i < g->n_sparse_initializer; i++, ++*count)
        sum = fw_add(sum, fw_sparse(g->sparse_initializer[i]));
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *np = g->node[i];
        if (!np) continue;
        if (fi_is_constant(np)) {
            sum = fw_add(sum, fw_constant(np));
            ++*count;
        }
        sum = fw_add(sum, fw_node(np, count, depth));
    }
    return sum;
}

/* The weights of n's subgraphs; nesting past FI_MAX_DEPTH is not walked
 * (inference refuses such a model before the loader asks). */
static uint64_t fw_node(const Onnx__NodeProto *n, size_t *count, int depth) {
    if (depth >= FI_MAX_DEPTH) return 0;
    uint64_t sum = 0;
    for (size_t i = 0; i < n->n_attribute; i++) {
        const Onnx__AttributeProto *a = n->attribute[i];
        if (!a) continue;
        if (a->g) sum = fw_add(sum, fw_graph(a->g, count, depth + 1));
        for (size_t k = 0; k < a->n_graphs; k++)
            if (a->graphs[k]) sum = fw_add(sum, fw_graph(a->graphs[k], count, depth + 1));
    }
    return sum;
}

uint64_t fi_body_weights(const Onnx__NodeProto *n, size_t *count) {
    size_t c = 0;
    uint64_t sum = fw_node(n, &c, 0);
    if (count) *count = c;
    return sum;
}
