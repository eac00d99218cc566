/* Shape and type inference: the driver (see infer.h): the rule of each
 * node, a node run (rule or model-local function), a graph run in
 * topological order, the model.  It sits on the three other files of the
 * driver (infer_ctx.h): infer_core.c (the state), infer_kit.c (what the
 * rules use) and infer_body.c (bodies).
 *
 * Reading order: rule lookup -> one node -> one graph -> the model.
 */
#include "infer_ctx.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
