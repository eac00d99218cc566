/* What is live at the peak step (planner.h, planner_peak_live_build): each
 * storage's kind and module, the largest ones, the bytes per module and per
 * kind, for the report, the JSON report and `roamc explain`. */
#include "planner.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

static const char *const peak_kind_names[PLANNER_N_KINDS] = {
    "parameter", "gradient", "optimizer state", "saved activation",
    "temporary", "input",    "output",          "host copy"};

const char *planner_kind_name(int kind) {
    ROAMC_ASSERT(kind >= 0 && kind < PLANNER_N_KINDS);
    return peak_kind_names[kind];
}

/* Marks in mark[value] (as 1 + the name's position in the list) the values
 * named in a comma-separated metadata list; returns how many names it has. */
static size_t peak_mark_list(const fe_model *m, const char *list, int *mark) {
    if (!list || !*list) return 0;
    size_t pos = 0;
    for (const char *p = list;; pos++) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char *name = xmalloc(len + 1);
        memcpy(name, p, len);
        name[len] = 0;
        int v = fe_find_value(m, name);
        if (v >= 0 && !mark[v]) mark[v] = (int)pos + 1;
        free(name);
        if (!e) return pos + 1;
        p = e + 1;
    }
}

/* The module path a node's name gives: ONNX exporters name nodes by their
 * scope ("/encoder/layer.3/attention/self/query/MatMul" ->
 * "encoder.layer.3.attention.self.query"); a dotted name drops its last part.
 * NULL when the name carries no scope ("n12", "Conv_0", "/Add"). */
static char *peak_module_of_name(const char *name) {
    if (!name || !*name) return NULL;
    const char *last = strrchr(name, '/');
    if (!last) last = strrchr(name, '.');
    if (!last || last == name) return NULL;
    size_t len = (size_t)(last - name);
    char *out = xmalloc(len + 1);
    size_t n = 0;
    /* torch names a container's child by both ("/enc/enc.0/Gemm"): a part
     * that begins with the one before it and a dot replaces it */
    size_t prev = 0; /* where the last part began in out */
    for (size_t i = 0; i < len; i++) {
        if (name[i] == '/') {
            if (n > 0 && out[n - 1] != '.') {
                size_t plen = n - prev, rest = strcspn(name + i + 1, "/");
                if (rest > plen && strncmp(name + i + 1, out + prev, plen) == 0 &&
                    name[i + 1 + plen] == '.') {
                    n = prev; /* the next part starts with this one: drop this one */
                    continue;
                }
                out[n++] = '.';
                prev = n;
            }
            continue;
        }
        out[n++] = name[i];
    }
    while (n && out[n - 1] == '.') n--;
    out[n] = 0;
    if (n == 0) {
        free(out);
        return NULL;
    }
    return out;
}

/* The module of a parameter or state input by its name ("h.3.attn.c_attn.weight"
 * -> "h.3.attn.c_attn"; "fc.weight.exp_avg" -> "fc" when "fc.weight" is
 * marked a parameter); NULL for a name with no dot or one the exporter made
 * up ("onnx::MatMul_12"). */
static char *peak_module_of_input(const fe_model *m, const char *name, const int *param) {
    if (strstr(name, "::") || !strchr(name, '.')) return NULL;
    char *s = xstrdup(name);
    for (char *dot = strrchr(s, '.'); dot; dot = strrchr(s, '.')) {
        *dot = 0;
        int v = fe_find_value(m, s);
        if (v >= 0 && param[v]) {
            char *d = strrchr(s, '.');
            if (d)
                *d = 0;
            else
                break;
            return s;
        }
    }
    free(s);
    s = xstrdup(name);
    *strrchr(s, '.') = 0;
    return s;
}

/* The module of a storage no scope, parameter or producer places: a graph
 * input such as the data or the labels, or what an unscoped node makes of
 * them, which the model's outermost module owns. */
#define PEAK_TOP_LEVEL "(top level)"

/* The group a module belongs to: its parts up to the first that ends in a
 * digit (a layer index: "h.3", "encoder.layer.3", "layer1",
 * "encoder.layers.encoder_layer_3"), else its first part.  Into buf. */
static const char *peak_group_of(const char *module, char *buf, size_t len) {
    if (!module) return PEAK_TOP_LEVEL;
    size_t end = strcspn(module, ".");
    for (size_t i = 0;; i = end + 1) {
        end = i + strcspn(module + i, ".");
        if (end > i && module[end - 1] >= '0' && module[end - 1] <= '9') break;
        if (!module[end]) {
            end = strcspn(module, ".");
            break;
        }
    }
    snprintf(buf, len, "%.*s", (int)end, module);
    return buf;
}

/* Per storage: its kind (enum planner_kind) and module (an index into
 * strs, -1: none). */
typedef struct peak_classes {
    unsigned char *kind;
    int *module;
    char **strs;
    size_t n_strs;
    int *maker; /* per storage: the op that makes it, -1 for inputs */
} peak_classes;

static int peak_add_str(peak_classes *c, char *s) {
    if (!s) return -1;
    c->strs[c->n_strs] = s;
    return (int)c->n_strs++;
}

/* The ops that run before the loss is computed: the ancestors of the loss's
 * producer through data edges, and the producer itself. */
static bool *peak_forward_ops(const graph *g) {
    const fe_model *m = g->model;
    bool *fwd = xcalloc(g->n_ops ? g->n_ops : 1, sizeof *fwd);
    if (g->loss_value < 0 || m->values[g->loss_value].producer < 0) return fwd;
    int *stack = xmallocarray(g->n_ops, sizeof *stack);
    size_t n = 0;
    stack[n++] = m->values[g->loss_value].producer;
    fwd[stack[0]] = true;
    while (n) {
        const fe_node *nd = &m->nodes[stack[--n]];
        for (size_t k = 0; k < nd->n_inputs; k++) {
            int v = nd->inputs[k];
            int p = v >= 0 ? m->values[v].producer : -1;
            if (p >= 0 && !fwd[p]) fwd[p] = true, stack[n++] = p;
        }
    }
    free(stack);
    return fwd;
}

/* Kinds and modules of every storage (see planner_peak_live_build). */
static void peak_classify(const graph *g, peak_classes *c) {
    const fe_model *m = g->model;
    size_t ns = g->n_storages, nv = m->n_values;
    int *param = xcalloc(nv ? nv : 1, sizeof *param), *state = xcalloc(nv ? nv : 1, sizeof *state),
        *grad = xcalloc(nv ? nv : 1, sizeof *grad);
    size_t n_params = peak_mark_list(m, fe_meta(m, "roamc.parameters"), param);
    peak_mark_list(m, fe_meta(m, "roamc.optimizer_state"), state);
    size_t n_grads = peak_mark_list(m, fe_meta(m, "roamc.gradients"), grad);
    /* gradient i is parameter i's (models/README.md, roamc.gradients) */
    int *param_at = xcalloc(n_params + 1, sizeof *param_at);
    for (size_t v = 0; v < nv; v++)
        if (param[v]) param_at[param[v] - 1] = (int)v;
    c->kind = xcalloc(ns ? ns : 1, 1);
    c->module = xmallocarray(ns ? ns : 1, sizeof *c->module);
    c->maker = xmallocarray(ns ? ns : 1, sizeof *c->maker);
    c->strs = xcalloc(ns + g->n_ops + 1, sizeof *c->strs);
    c->n_strs = 0;
    for (size_t s = 0; s < ns; s++) c->module[s] = -1, c->maker[s] = -1;
    for (size_t i = 0; i < g->n_ops; i++)
        for (size_t k = g->make_start[i]; k < g->make_start[i + 1]; k++)
            if (c->maker[g->make[k]] < 0) c->maker[g->make[k]] = (int)i;
    bool *fwd = peak_forward_ops(g);
    bool *in_backward = xcalloc(ns ? ns : 1, sizeof *in_backward);
    for (size_t i = 0; i < g->n_ops; i++)
        if (!fwd[i])
            for (size_t k = g->touch_start[i]; k < g->touch_start[i + 1]; k++)
                in_backward[g->touch[k]] = true;
    bool no_meta = n_params == 0;
    /* inputs first: parameters, state, data; their modules from their names */
    for (size_t s = 0; s < ns; s++) {
        const graph_storage *st = &g->storages[s];
        int r = st->root;
        const fe_value *v = &m->values[r];
        if (st->host)
            c->kind[s] = PLANNER_KIND_HOST;
        else if (st->gradient)
            c->kind[s] = PLANNER_KIND_GRADIENT;
        else if (st->has_input && state[r])
            c->kind[s] = PLANNER_KIND_STATE;
        else if (st->has_input &&
                 (param[r] || (no_meta && ((v->kind & FE_INITIALIZER) || st->persistent))))
            c->kind[s] = PLANNER_KIND_PARAMETER;
        else if (st->has_input)
            c->kind[s] = PLANNER_KIND_INPUT;
        else if (st->has_output)
            c->kind[s] = PLANNER_KIND_OUTPUT;
        else if (c->maker[s] >= 0 && fwd[c->maker[s]] && in_backward[s])
            c->kind[s] = PLANNER_KIND_SAVED;
        else
            c->kind[s] = PLANNER_KIND_TEMPORARY;
        if (st->has_input) c->module[s] = peak_add_str(c, peak_module_of_input(m, v->name, param));
    }
    /* ops in program order: the scope of the node's name, else the module of
     * a parameter it reads (through any view of it), else that of its input
     * made last (the layer the data comes from) */
    int *order = xmallocarray(g->n_ops ? g->n_ops : 1, sizeof *order);
    int *pos = xmallocarray(g->n_ops ? g->n_ops : 1, sizeof *pos);
    int *op_module = xmallocarray(g->n_ops ? g->n_ops : 1, sizeof *op_module);
    graph_program_order(g, order);
    for (size_t i = 0; i < g->n_ops; i++) pos[order[i]] = (int)i, op_module[i] = -1;
    for (size_t i = 0; i < g->n_ops; i++) {
        int op = order[i];
        const fe_node *nd = &m->nodes[op];
        int mod = peak_add_str(c, peak_module_of_name(nd->name));
        int latest = -1;
        for (size_t k = 0; mod < 0 && k < nd->n_inputs; k++) {
            int v = nd->inputs[k];
            if (v < 0) continue;
            int s = g->storage_of[v];
            unsigned char kd = c->kind[s];
            if ((kd == PLANNER_KIND_PARAMETER || kd == PLANNER_KIND_STATE) && c->module[s] >= 0)
                mod = c->module[s];
            int p = m->values[v].producer;
            if (p >= 0 && op_module[p] >= 0 && (latest < 0 || pos[p] > pos[latest])) latest = p;
        }
        if (mod < 0 && latest >= 0) mod = op_module[latest];
        op_module[op] = mod;
    }
    for (size_t s = 0; s < ns; s++)
        if (c->module[s] < 0 && c->maker[s] >= 0) c->module[s] = op_module[c->maker[s]];
    /* a gradient belongs to its parameter's module */
    for (size_t v = 0; v < nv; v++) {
        if (!grad[v] || (size_t)grad[v] > n_params || grad[v] > (int)n_grads) continue;
        int ps = g->storage_of[param_at[grad[v] - 1]];
        if (c->module[ps] >= 0) c->module[g->storage_of[v]] = c->module[ps];
    }
    free(order);
    free(pos);
    free(op_module);
    free(fwd);
    free(in_backward);
    free(param);
    free(state);
    free(grad);
    free(param_at);
}

static int peak_item_cmp(const void *a, const void *b) {
    const planner_live_item *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
    return x->storage - y->storage;
}

/* strcmp with runs of digits compared as numbers: "h.2" before "h.10". */
static int peak_natural_cmp(const char *a, const char *b) {
    while (*a && *b) {
        if (*a >= '0' && *a <= '9' && *b >= '0' && *b <= '9') {
            const char *x = a, *y = b;
            while (*x == '0') x++;
            while (*y == '0') y++;
            size_t nx = strspn(x, "0123456789"), ny = strspn(y, "0123456789");
            if (nx != ny) return nx < ny ? -1 : 1;
            int c = strncmp(x, y, nx);
            if (c) return c;
            a = x + nx, b = y + ny;
            continue;
        }
        if (*a != *b) return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
        a++, b++;
    }
    return *a ? 1 : *b ? -1 : 0;
}

static int peak_group_cmp(const void *a, const void *b) {
    const planner_live_group *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
    int c = peak_natural_cmp(x->name, y->name);
    return c ? c : strcmp(x->name, y->name);
}

static int peak_group_name_cmp(const void *a, const void *b) {
    return strcmp(((const planner_live_group *)a)->name, ((const planner_live_group *)b)->name);
}

int planner_peak_live_build(const graph *g, const int *order, const int32_t *start,
                            const int32_t *end, planner_peak_live *out) {
    memset(out, 0, sizeof *out);
    out->step = -1;
    out->op = -1;
    size_t n = g->n_ops, ns = g->n_storages;
    if (n == 0) return -1;
    /* the first step with the most live device bytes (graph_peak's) */
    uint64_t *delta = xcalloc(n + 1, sizeof *delta), *minus = xcalloc(n + 1, sizeof *minus);
    for (size_t s = 0; s < ns; s++) {
        if (start[s] < 0 || end[s] < start[s] || (size_t)end[s] >= n) continue;
        delta[start[s]] += g->storages[s].size;
        minus[end[s] + 1] += g->storages[s].size;
    }
    uint64_t live = 0;
    for (size_t t = 0; t < n; t++) {
        live += delta[t];
        live -= minus[t];
        if (out->step < 0 || live > out->bytes) out->step = (int)t, out->bytes = live;
    }
    free(delta);
    free(minus);
    out->op = order[out->step];
    peak_classes c;
    peak_classify(g, &c);
    out->items = xmallocarray(ns ? ns : 1, sizeof *out->items);
    for (size_t s = 0; s < ns; s++) {
        if (start[s] < 0 || start[s] > out->step || end[s] < out->step) continue;
        const graph_storage *st = &g->storages[s];
        uint64_t bytes = st->host ? st->host_size : st->size;
        if (st->host) {
            out->host_bytes += bytes;
        } else {
            out->kind_bytes[c.kind[s]] += bytes;
            out->kind_count[c.kind[s]]++;
        }
        out->items[out->n_items++] =
            (planner_live_item){.storage = (int)s,
                                .bytes = bytes,
                                .kind = c.kind[s],
                                .maker = c.maker[s],
                                .module = c.module[s] >= 0 ? xstrdup(c.strs[c.module[s]]) : NULL,
                                .start = start[s],
                                .end = end[s]};
    }
    qsort(out->items, out->n_items, sizeof *out->items, peak_item_cmp);
    /* bytes per group of modules: device storages only */
    planner_live_group *gr = xmallocarray(out->n_items ? out->n_items : 1, sizeof *gr);
    size_t ng = 0;
    char buf[512];
    for (size_t i = 0; i < out->n_items; i++) {
        if (g->storages[out->items[i].storage].host) continue;
        gr[ng++] = (planner_live_group){
            .name = xstrdup(peak_group_of(out->items[i].module, buf, sizeof buf)),
            .bytes = out->items[i].bytes,
            .count = 1};
    }
    qsort(gr, ng, sizeof *gr, peak_group_name_cmp);
    size_t k = 0;
    for (size_t i = 0; i < ng; i++) {
        if (k && strcmp(gr[k - 1].name, gr[i].name) == 0) {
            gr[k - 1].bytes += gr[i].bytes;
            gr[k - 1].count++;
            free(gr[i].name);
        } else {
            gr[k++] = gr[i];
        }
    }
    qsort(gr, k, sizeof *gr, peak_group_cmp);
    out->groups = gr;
    out->n_groups = k;
    for (size_t i = 0; i < c.n_strs; i++) free(c.strs[i]);
    free(c.strs);
    free(c.kind);
    free(c.module);
    free(c.maker);
    return 0;
}

void planner_storage_classes(const graph *g, unsigned char **kinds, int **makers) {
    peak_classes c;
    peak_classify(g, &c);
    for (size_t i = 0; i < c.n_strs; i++) free(c.strs[i]);
    free(c.strs);
    free(c.module);
    *kinds = c.kind;
    *makers = c.maker;
}

void planner_peak_live_free(planner_peak_live *pl) {
    for (size_t i = 0; i < pl->n_items; i++) free(pl->items[i].module);
    for (size_t i = 0; i < pl->n_groups; i++) free(pl->groups[i].name);
    free(pl->items);
    free(pl->groups);
    memset(pl, 0, sizeof *pl);
}

/* "mm 'n1871' (#1871)", or "graph input" for a storage no op makes. */
static const char *peak_maker_text(const graph *g, int op, int root, char *buf, size_t len) {
    const fe_model *m = g->model;
    if (op < 0)
        snprintf(buf, len, "%s",
                 (m->values[root].kind & FE_INITIALIZER) ? "initializer" : "graph input");
    else if (m->nodes[op].name[0])
        snprintf(buf, len, "%s '%s' (#%d)", m->nodes[op].op_type, m->nodes[op].name, op);
    else
        snprintf(buf, len, "%s #%d", m->nodes[op].op_type, op);
    return buf;
}

void planner_peak_live_text(FILE *f, const graph *g, const planner_peak_live *pl, size_t top,
                            size_t top_groups) {
    const fe_model *m = g->model;
    char a[32], b[640];
    if (pl->step < 0) return;
    fprintf(f, "  live at peak  step %d of %zu, %s: %s in %zu storages\n", pl->step, g->n_ops,
            peak_maker_text(g, pl->op, 0, b, sizeof b), roamc_bytes_human(pl->bytes, a, sizeof a),
            pl->n_items);
    fprintf(f, "    by kind    ");
    int shown = 0;
    for (int k = 0; k < PLANNER_N_KINDS; k++) {
        if (k == PLANNER_KIND_HOST || !pl->kind_count[k]) continue;
        fprintf(f, "%s %s %s (%zu)", shown++ ? ";" : "", peak_kind_names[k],
                roamc_bytes_human(pl->kind_bytes[k], a, sizeof a), pl->kind_count[k]);
    }
    if (pl->host_bytes)
        fprintf(f, "; host copies %s (host memory, not in the peak)",
                roamc_bytes_human(pl->host_bytes, a, sizeof a));
    fputc('\n', f);
    /* six groups a line */
    uint64_t rest = 0;
    for (size_t i = 0; i < pl->n_groups; i++) {
        if (i >= top_groups) {
            rest += pl->groups[i].bytes;
            continue;
        }
        fprintf(f, "%s %s %s",
                i == 0       ? "    by module  "
                : i % 6 == 0 ? ",\n               "
                             : ",",
                pl->groups[i].name, roamc_bytes_human(pl->groups[i].bytes, a, sizeof a));
    }
    if (pl->n_groups > top_groups)
        fprintf(f, ", %zu more %s", pl->n_groups - top_groups,
                roamc_bytes_human(rest, a, sizeof a));
    if (pl->n_groups) fputc('\n', f);
    for (size_t i = 0; i < pl->n_items && i < top; i++) {
        const planner_live_item *it = &pl->items[i];
        const graph_storage *st = &g->storages[it->storage];
        fprintf(f, "    %-10s %10s  %-16s '%s'%s, %s, module %s, steps %d-%d\n",
                i == 0 ? "largest" : "", roamc_bytes_human(it->bytes, a, sizeof a),
                peak_kind_names[it->kind], m->values[st->root].name,
                st->n_tensors > 1 ? " (+views)" : "",
                peak_maker_text(g, it->maker, st->root, b, sizeof b),
                it->module ? it->module : PEAK_TOP_LEVEL, it->start, it->end);
    }
}

struct json_t *planner_peak_live_json(const graph *g, const planner_peak_live *pl, size_t top) {
    const fe_model *m = g->model;
    json_t *o = json_object();
    if (pl->step < 0) return o;
    json_object_set_new(o, "step", json_integer(pl->step));
    json_object_set_new(o, "node", json_integer(pl->op));
    json_object_set_new(o, "op_type", json_string(m->nodes[pl->op].op_type));
    json_object_set_new(o, "bytes", json_integer((json_int_t)pl->bytes));
    json_object_set_new(o, "storages", json_integer((json_int_t)pl->n_items));
    json_t *kinds = json_object();
    for (int k = 0; k < PLANNER_N_KINDS; k++)
        json_object_set_new(kinds, peak_kind_names[k],
                            json_integer((json_int_t)(k == PLANNER_KIND_HOST ? pl->host_bytes
                                                                             : pl->kind_bytes[k])));
    json_object_set_new(o, "by_kind", kinds);
    json_t *mods = json_array();
    for (size_t i = 0; i < pl->n_groups; i++) {
        json_t *e = json_object();
        json_object_set_new(e, "module", json_string(pl->groups[i].name));
        json_object_set_new(e, "bytes", json_integer((json_int_t)pl->groups[i].bytes));
        json_object_set_new(e, "storages", json_integer((json_int_t)pl->groups[i].count));
        json_array_append_new(mods, e);
    }
    json_object_set_new(o, "by_module", mods);
    json_t *items = json_array();
    for (size_t i = 0; i < pl->n_items && i < top; i++) {
        const planner_live_item *it = &pl->items[i];
        const graph_storage *st = &g->storages[it->storage];
        json_t *e = json_object(), *names = json_array();
        for (size_t k = 0; k < st->n_tensors; k++)
            json_array_append_new(names, json_string(m->values[st->tensors[k]].name));
        json_object_set_new(e, "tensor", json_string(m->values[st->root].name));
        json_object_set_new(e, "tensors", names);
        json_object_set_new(e, "bytes", json_integer((json_int_t)it->bytes));
        json_object_set_new(e, "kind", json_string(peak_kind_names[it->kind]));
        if (it->maker >= 0) {
            json_t *p = json_object();
            json_object_set_new(p, "node", json_integer(it->maker));
            json_object_set_new(p, "name", json_string(m->nodes[it->maker].name));
            json_object_set_new(p, "op_type", json_string(m->nodes[it->maker].op_type));
            json_object_set_new(e, "producer", p);
        } else {
            json_object_set_new(e, "producer", json_null());
        }
        json_object_set_new(e, "module", it->module ? json_string(it->module) : json_null());
        json_object_set_new(e, "start", json_integer(it->start));
        json_object_set_new(e, "end", json_integer(it->end));
        json_array_append_new(items, e);
    }
    json_object_set_new(o, "largest", items);
    return o;
}
