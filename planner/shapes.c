/* `roamc shapes MODEL`: what roamc inferred, value by value (see planner.h). */
#include "planner.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

const char *planner_graph_kind(const fe_model *m) {
    for (size_t i = 0; i < m->n_nodes; i++)
        if (m->nodes[i].inplace) return "training";
    return "inference";
}

/* "batch" for an unknown dim that is a symbol, "?" for one that is not. */
static const char *shapes_dim_text(const fe_model *m, const fe_dim *d, char *buf, size_t len) {
    if (d->value >= 0)
        snprintf(buf, len, "%lld", (long long)d->value);
    else if (d->symbol >= 0 && d->exact)
        snprintf(buf, len, "%s", m->symbols[d->symbol].name);
    else if (d->symbol >= 0)
        snprintf(buf, len, "?(%s)", m->symbols[d->symbol].name);
    else
        snprintf(buf, len, "?");
    return buf;
}

static const char *shapes_symbol_kind(int kind) {
    return kind == FE_SYMBOL_DATA ? "data" : "input";
}

static json_t *shapes_symbols_json(const fe_model *m) {
    json_t *a = json_array();
    for (size_t i = 0; i < m->n_symbols; i++) {
        const fe_symbol *s = &m->symbols[i];
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(s->name));
        json_object_set_new(o, "value",
                            s->value >= 0 ? json_integer((json_int_t)s->value) : json_null());
        json_object_set_new(o, "kind", json_string(shapes_symbol_kind(s->kind)));
        json_object_set_new(o, "node", s->node >= 0 ? json_integer(s->node) : json_null());
        json_array_append_new(a, o);
    }
    return a;
}

static const char *const shapes_body_how[] = {"",
                                              "if_taken",
                                              "if_only_valid_branch",
                                              "if_larger_branch",
                                              "loop_iteration",
                                              "scan_iteration",
                                              "function"};

/* The control-flow list (fe_model.bodies), or NULL when there is none. */
static json_t *shapes_bodies_json(const fe_model *m) {
    if (!m->n_bodies) return NULL;
    json_t *a = json_array();
    for (size_t i = 0; i < m->n_bodies; i++) {
        const fe_body *b = &m->bodies[i];
        const fe_node *n = &m->nodes[b->node];
        json_t *o = json_object();
        json_object_set_new(o, "node", json_integer(b->node));
        json_object_set_new(o, "name", json_string(n->name));
        json_object_set_new(o, "op_type", json_string(n->op_type));
        json_object_set_new(o, "counted", json_string(shapes_body_how[b->how]));
        if (b->branch >= 0)
            json_object_set_new(o, "branch", json_string(b->branch ? "else" : "then"));
        json_object_set_new(o, "bytes", json_integer((json_int_t)b->bytes));
        json_object_set_new(o, "value",
                            b->value >= 0 ? json_string(m->values[b->value].name) : json_null());
        json_object_set_new(o, "unsized_values", json_integer((json_int_t)b->unsized));
        json_array_append_new(a, o);
    }
    return a;
}

/* One line per node with a body: how its working memory was counted. */
static void shapes_bodies_text(FILE *f, const fe_model *m) {
    char bytes[32];
    for (size_t i = 0; i < m->n_bodies; i++) {
        const fe_body *b = &m->bodies[i];
        const fe_node *n = &m->nodes[b->node];
        const char *label = n->name[0] ? n->name : n->op_type;
        const char *br = b->branch ? "else" : "then";
        fprintf(f, "  control flow  %s '%s' (#%d): ", n->op_type, label, b->node);
        switch (b->how) {
        case FE_BODY_IF_TAKEN:
            fprintf(f, "folded (condition known from shapes or constants), branch %s", br);
            break;
        case FE_BODY_IF_ONLY_VALID:
            fprintf(f, "condition unknown; branch %s taken, the other is invalid for these shapes",
                    br);
            break;
        case FE_BODY_IF_LARGER:
            fprintf(f, "condition unknown: the larger branch (%s) counted", br);
            break;
        case FE_BODY_LOOP:
        case FE_BODY_SCAN:
            fprintf(f, "body counted per iteration (carried values at their largest known shape)");
            break;
        default: fprintf(f, "function body counted"); break;
        }
        fprintf(f, "; working memory %s (%llu B)", roamc_bytes_human(b->bytes, bytes, sizeof bytes),
                (unsigned long long)b->bytes);
        if (b->unsized) fprintf(f, "; %zu body values of unknown size not counted", b->unsized);
        fputc('\n', f);
    }
}

json_t *planner_shapes_summary_json(const fe_model *m) {
    json_t *o = json_object();
    json_object_set_new(o, "opset", json_integer((json_int_t)m->opset));
    json_object_set_new(o, "values_inferred", json_integer((json_int_t)m->n_inferred));
    json_object_set_new(o, "declared_shapes_contradicted",
                        json_integer((json_int_t)m->n_conflicts));
    json_object_set_new(o, "symbols", shapes_symbols_json(m));
    json_t *bodies = shapes_bodies_json(m);
    if (bodies) json_object_set_new(o, "control_flow", bodies);
    return o;
}

/* values[0..n) as the JSON list of `roamc shapes --report json`. */
static json_t *shapes_values_json(const fe_model *m, const fe_value *values, size_t n) {
    json_t *vals = json_array();
    char type[32];
    for (size_t i = 0; i < n; i++) {
        const fe_value *v = &values[i];
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(v->name));
        json_object_set_new(o, "elem_type", json_integer(v->elem_type));
        json_object_set_new(o, "type", json_string(fe_elem_name(v->elem_type, type, sizeof type)));
        if (v->rank < 0) {
            json_object_set_new(o, "shape", json_null());
        } else {
            json_t *s = json_array();
            for (int d = 0; d < v->rank; d++) {
                const fe_dim *dd = &v->dims[d];
                if (dd->value >= 0)
                    json_array_append_new(s, json_integer((json_int_t)dd->value));
                else if (dd->symbol >= 0 && dd->exact)
                    json_array_append_new(s, json_string(m->symbols[dd->symbol].name));
                else
                    json_array_append_new(s, json_null());
            }
            json_object_set_new(o, "shape", s);
        }
        if (v->seq_len != -1)
            json_object_set_new(o, "sequence_length",
                                v->seq_len >= 0 ? json_integer((json_int_t)v->seq_len)
                                                : json_null());
        json_object_set_new(o, "bytes", json_integer((json_int_t)v->bytes));
        json_object_set_new(o, "producer", json_integer(v->producer));
        json_object_set_new(o, "bound", json_boolean(v->upper_bound));
        json_object_set_new(o, "inferred", json_boolean(v->inferred));
        json_array_append_new(vals, o);
    }
    return vals;
}

static void shapes_json(FILE *f, const fe_model *m) {
    json_t *r = planner_shapes_summary_json(m);
    json_object_set_new(r, "model", json_string(m->path));
    json_object_set_new(r, "graph", json_string(planner_graph_kind(m)));
    if (m->first_conflict)
        json_object_set_new(r, "first_contradiction", json_string(m->first_conflict));
    json_t *vals = shapes_values_json(m, m->values, m->n_values);
    json_object_set_new(r, "values", vals);
    if (m->n_inner)
        json_object_set_new(r, "inner_values", shapes_values_json(m, m->inner, m->n_inner));
    json_dumpf(r, f, JSON_COMPACT | JSON_PRESERVE_ORDER);
    fputc('\n', f);
    json_decref(r);
}

/* An unbound symbol matters only when some dim still waits for it; the
 * file's value_info often names symbols that inference made moot. */
static bool shapes_symbol_used(const fe_model *m, size_t sym) {
    if (m->symbols[sym].value >= 0) return true;
    for (size_t i = 0; i < m->n_values; i++)
        for (int d = 0; d < m->values[i].rank; d++)
            if (m->values[i].dims[d].value < 0 && m->values[i].dims[d].symbol == (int32_t)sym)
                return true;
    return false;
}

void planner_shapes_text_summary(FILE *f, const fe_model *m) {
    size_t n_data = 0, n_input = 0;
    for (size_t i = 0; i < m->n_symbols; i++)
        if (shapes_symbol_used(m, i))
            *(m->symbols[i].kind == FE_SYMBOL_DATA ? &n_data : &n_input) += 1;
    fprintf(f, "  shapes        %zu of %zu values inferred by roamc (the rest from the file)",
            m->n_inferred, m->n_values);
    if (m->n_conflicts)
        fprintf(f, "; %zu shapes of the file contradicted (first: %s)", m->n_conflicts,
                m->first_conflict);
    fputc('\n', f);
    shapes_bodies_text(f, m);
    if (n_input) {
        fprintf(f, "  symbols      ");
        for (size_t i = 0; i < m->n_symbols; i++)
            if (m->symbols[i].kind != FE_SYMBOL_DATA && shapes_symbol_used(m, i)) {
                if (m->symbols[i].value >= 0)
                    fprintf(f, " %s=%lld", m->symbols[i].name, (long long)m->symbols[i].value);
                else
                    fprintf(f, " %s unbound", m->symbols[i].name);
            }
        fputc('\n', f);
    }
    if (n_data) {
        fprintf(f, "  upper bounds  sizes that depend on data are planned at their bound (--dim "
                   "NAME=V sets one):");
        for (size_t i = 0; i < m->n_symbols; i++)
            if (m->symbols[i].kind == FE_SYMBOL_DATA && shapes_symbol_used(m, i)) {
                if (m->symbols[i].value >= 0)
                    fprintf(f, " %s<=%lld", m->symbols[i].name, (long long)m->symbols[i].value);
                else
                    fprintf(f, " %s unbounded", m->symbols[i].name);
            }
        fputc('\n', f);
    }
}

static void shapes_text(FILE *f, const fe_model *m) {
    fprintf(f, "roamc %s: %s (opset %lld, %s graph)\n", ROAMC_VERSION, m->path, (long long)m->opset,
            planner_graph_kind(m));
    planner_shapes_text_summary(f, m);
    char type[32], dim[160];
    for (size_t i = 0; i < m->n_values; i++) {
        const fe_value *v = &m->values[i];
        fprintf(f, "  %s  %s", v->name,
                v->elem_type ? fe_elem_name(v->elem_type, type, sizeof type) : "?");
        if (v->rank < 0)
            fputs("[?]", f);
        else {
            fputc('[', f);
            for (int d = 0; d < v->rank; d++)
                fprintf(f, "%s%s", d ? "," : "", shapes_dim_text(m, &v->dims[d], dim, sizeof dim));
            fputc(']', f);
        }
        if (v->seq_len >= 0)
            fprintf(f, " x %lld (sequence)", (long long)v->seq_len);
        else if (v->seq_len == -2)
            fputs(" x ? (sequence)", f);
        if (v->producer >= 0)
            fprintf(f, "  %s #%d", m->nodes[v->producer].op_type, v->producer);
        else
            fprintf(f, "  %s", (v->kind & FE_INITIALIZER) ? "initializer" : "input");
        if (v->upper_bound) fputs("  (upper bound)", f);
        if (!v->inferred) fputs("  (from the file)", f);
        fputc('\n', f);
    }
}

int planner_shapes_print(FILE *f, const fe_model *m, int json) {
    if (json)
        shapes_json(f, m);
    else
        shapes_text(f, m);
    return ferror(f) ? -1 : 0;
}
