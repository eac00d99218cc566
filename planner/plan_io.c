/* The plan file and the report (see planner.h and PLAN_FORMAT.md). */
#include "planner.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "digest.h"
#include "partition.h"

static int plan_value_name_cmp(const void *a, const void *b) {
    return strcmp((*(const fe_value *const *)a)->name, (*(const fe_value *const *)b)->name);
}

void plan_model_digests(const fe_model *m, char model_hex[65], char sizes_hex[65]) {
    fe_hex(m->sha256, sizeof m->sha256, model_hex);
    /* one line per value, "<name length>:<name> <elem type> <dims> <seq> <bytes>\n";
     * the length prefix keeps any bytes a name may hold unambiguous */
    const fe_value **v = xmallocarray(m->n_values, sizeof *v);
    size_t cap = 4096, n = 0;
    char *text = xmalloc(cap);
    for (size_t i = 0; i < m->n_values; i++) v[i] = &m->values[i];
    qsort(v, m->n_values, sizeof *v, plan_value_name_cmp);
    for (size_t i = 0; i < m->n_values; i++) {
        size_t need = strlen(v[i]->name) + 128 + 21 * (size_t)(v[i]->rank > 0 ? v[i]->rank : 0);
        if (n + need > cap) {
            while (n + need > cap) cap *= 2;
            text = xreallocarray(text, cap, 1);
        }
        n += (size_t)sprintf(text + n, "%zu:%s %d ", strlen(v[i]->name), v[i]->name,
                             (int)v[i]->elem_type);
        for (int d = 0; d < v[i]->rank; d++)
            n += (size_t)sprintf(text + n, "%s%lld", d ? "," : "", (long long)v[i]->dims[d].value);
        n += (size_t)sprintf(text + n, " %lld %llu\n", (long long)v[i]->seq_len,
                             (unsigned long long)v[i]->bytes);
    }
    uint8_t d[32];
    fe_sha256(text, n, d);
    fe_hex(d, sizeof d, sizes_hex);
    free(v);
    free(text);
}

/* Everything in the file is a function of the model, the options and the
 * plan: no times, dates or thread counts, so that the same input gives the
 * same bytes. */
static json_t *plan_to_json(const plan *p, const char *model_path) {
    const graph *g = p->g;
    const fe_model *m = g->model;
    json_t *root = json_object();
    json_t *sched = json_array();
    json_t *bufs = json_array(), *host = json_array();
    json_object_set_new(root, "format", json_string("roam-plan"));
    json_object_set_new(root, "version", json_integer(1));
    json_object_set_new(root, "model", json_string(model_path));
    /* which model the plan is for: `roamc check` refuses it for any other */
    char model_hex[65], sizes_hex[65];
    plan_model_digests(m, model_hex, sizes_hex);
    json_object_set_new(root, "model_sha256", json_string(model_hex));
    json_object_set_new(root, "sizes_sha256", json_string(sizes_hex));
    json_object_set_new(root, "graph", json_string(planner_graph_kind(m)));
    json_object_set_new(root, "shapes", planner_shapes_summary_json(m));
    json_object_set_new(root, "align", json_integer((json_int_t)p->opt.align));
    json_object_set_new(root, "order", json_string(planner_order_name(p->opt.order)));
    json_object_set_new(root, "layout", json_string(planner_layout_name(p->opt.layout)));
    for (size_t s = 0; s < g->n_ops; s++) json_array_append_new(sched, json_integer(p->order[s]));
    json_object_set_new(root, "schedule", sched);
    for (size_t s = 0; s < g->n_storages; s++) {
        const graph_storage *st = &g->storages[s];
        json_t *b = json_object();
        json_t *names = json_array();
        for (size_t k = 0; k < st->n_tensors; k++)
            json_array_append_new(names, json_string(m->values[st->tensors[k]].name));
        json_object_set_new(b, "id", json_integer((json_int_t)s));
        json_object_set_new(b, "tensors", names);
        /* host memory (an Offload's output): its bytes, no device offset */
        uint64_t size = st->host ? st->host_size : st->size;
        json_object_set_new(b, "size", json_integer((json_int_t)size));
        json_object_set_new(b, "offset", json_integer((json_int_t)(st->host ? 0 : p->offsets[s])));
        json_object_set_new(b, "start", json_integer(p->start[s]));
        json_object_set_new(b, "end", json_integer(p->end[s]));
        if (st->persistent) json_object_set_new(b, "persistent", json_true());
        json_array_append_new(st->host ? host : bufs, b);
    }
    json_object_set_new(root, "buffers", bufs);
    if (json_array_size(host))
        json_object_set_new(root, "host_buffers", host);
    else
        json_decref(host);
    json_t *peak = json_object();
    json_object_set_new(peak, "theoretical", json_integer((json_int_t)p->theoretical));
    json_object_set_new(peak, "actual", json_integer((json_int_t)p->actual));
    json_object_set_new(peak, "theoretical_without_persistent",
                        json_integer((json_int_t)p->theoretical_np));
    json_object_set_new(peak, "persistent", json_integer((json_int_t)p->persistent));
    json_object_set_new(peak, "lower_bound", json_integer((json_int_t)p->lower_bound));
    json_object_set_new(root, "peak", peak);
    if (p->opt.pass) p->opt.pass->write(p, root);
    return root;
}

int plan_write_stream(const plan *p, const char *model_path, FILE *f) {
    json_t *root = plan_to_json(p, model_path);
    int ok = json_dumpf(root, f, JSON_COMPACT) == 0 && fputc('\n', f) != EOF;
    json_decref(root);
    return ok ? 0 : -1;
}

int plan_write_tree(const plan *p, FILE *f, char *err, size_t errlen) {
    if (!p->tree)
        return roamc_errorf(err, errlen, "no subgraph tree: the order did not come from roam");
    return partition_dump_tree(p->tree, p->g, f, err, errlen);
}

/* --dump-buffers: the plan's layout problem in the buffer CSV of DESIGN.md,
 * one line per storage (id = storage index, size as laid out, i.e. aligned;
 * lifetime half-open [start, end + 1)), so that `roamc layout` or another
 * static allocator can solve the same problem; its live-size bound is the
 * plan's theoretical peak. */
int plan_write_buffers(const plan *p, FILE *f) {
    const graph *g = p->g;
    /* a pass (--streams) lays out on its own lifetimes: that is the problem solved */
    int32_t *end = xmallocarray(g->n_storages ? g->n_storages : 1, sizeof *end);
    plan_layout_ends(p, end);
    int rc = fprintf(f, "id,lower,upper,size\n") < 0 ? -1 : 0;
    for (size_t s = 0; s < g->n_storages && rc == 0; s++)
        if (fprintf(f, "%zu,%ld,%ld,%llu\n", s, (long)p->start[s], (long)end[s] + 1,
                    (unsigned long long)g->storages[s].size) < 0)
            rc = -1;
    free(end);
    return rc;
}

/* ----------------------------------------------------------------- report */

static double plan_pct(uint64_t num, uint64_t den) {
    return den ? 100.0 * ((double)num - (double)den) / (double)den : 0.0;
}

static size_t plan_n_persistent(const graph *g) {
    size_t k = 0;
    for (size_t s = 0; s < g->n_storages; s++) k += g->storages[s].persistent;
    return k;
}

/* ---- ordering lines (planner/order.c's statistics) ---- */

static void plan_report_order_text(FILE *f, const planner_order_stats *o) {
    char a[32], b[32];
    fprintf(f, "  orders        program %s, lescea %s; chosen: %s%s\n",
            roamc_bytes_human(o->peak_program, a, sizeof a),
            o->peak_lescea ? roamc_bytes_human(o->peak_lescea, b, sizeof b) : "not run",
            o->source ? o->source : "?",
            o->heuristic_kept ? " (the tree/ILP result was not better: heuristic kept)" : "");
    if (o->invalid_order)
        fprintf(f, "  internal      error: the %s order was invalid; a heuristic replaced it\n",
                o->invalid_order);
    if (o->ilp_too_large)
        fprintf(
            f,
            "  ilp           the whole-graph model is too large to build: best heuristic kept\n");
    if (o->leaves && o->n_blocks)
        fprintf(f,
                "  tree          %zu independent, %zu dependent subgraphs; %zu MI ops, %zu update "
                "ops (placement %s); "
                "floating ops %s; %zu blocks, largest leaf %zu ops\n",
                o->n_independent, o->n_dependent, o->n_mi, o->n_update,
                o->placement ? o->placement : "-", o->floating ? o->floating : "-", o->n_blocks,
                o->largest_leaf);
    if (o->leaves)
        fprintf(f,
                "  leaves        %zu: %zu single-op, %zu heuristic optimal, %zu off the peak, %zu "
                "exact DP, %zu ILP optimal, "
                "%zu stopped by budget, %zu stopped by time (%d threads)\n",
                o->leaves, o->leaves_trivial, o->leaves_heuristic_optimal, o->leaves_not_critical,
                o->leaves_dp, o->leaves_ilp_optimal, o->leaves_budget, o->time_stopped, o->threads);
    if (o->t_partition > 0 || o->t_solve > 0)
        fprintf(f, "  order time    partition %.3f s, leaves %.3f s\n", o->t_partition, o->t_solve);
}

static json_t *plan_order_json(const planner_order_stats *o) {
    json_t *j = json_object();
    json_object_set_new(j, "source", json_string(o->source ? o->source : ""));
    json_object_set_new(j, "theoretical_peak_program", json_integer((json_int_t)o->peak_program));
    json_object_set_new(j, "theoretical_peak_lescea", json_integer((json_int_t)o->peak_lescea));
    json_object_set_new(j, "heuristic_kept", json_boolean(o->heuristic_kept));
    if (o->invalid_order) /* an internal error: absent from every sound report */
        json_object_set_new(j, "invalid_order", json_string(o->invalid_order));
    json_object_set_new(j, "ilp_too_large", json_boolean(o->ilp_too_large));
    json_object_set_new(j, "placement", o->placement ? json_string(o->placement) : json_null());
    json_object_set_new(j, "floating", o->floating ? json_string(o->floating) : json_null());
    json_object_set_new(j, "memory_insensitive_ops", json_integer((json_int_t)o->n_mi));
    json_object_set_new(j, "update_ops", json_integer((json_int_t)o->n_update));
    json_object_set_new(j, "blocks", json_integer((json_int_t)o->n_blocks));
    json_object_set_new(j, "independent_subgraphs", json_integer((json_int_t)o->n_independent));
    json_object_set_new(j, "dependent_subgraphs", json_integer((json_int_t)o->n_dependent));
    json_object_set_new(j, "largest_leaf", json_integer((json_int_t)o->largest_leaf));
    json_object_set_new(j, "leaves", json_integer((json_int_t)o->leaves));
    json_object_set_new(j, "leaves_single_op", json_integer((json_int_t)o->leaves_trivial));
    json_object_set_new(j, "leaves_heuristic_optimal",
                        json_integer((json_int_t)o->leaves_heuristic_optimal));
    json_object_set_new(j, "leaves_off_peak", json_integer((json_int_t)o->leaves_not_critical));
    json_object_set_new(j, "leaves_exact_dp", json_integer((json_int_t)o->leaves_dp));
    json_object_set_new(j, "leaves_ilp_optimal", json_integer((json_int_t)o->leaves_ilp_optimal));
    json_object_set_new(j, "leaves_stopped_by_budget", json_integer((json_int_t)o->leaves_budget));
    json_object_set_new(j, "leaves_stopped_by_time", json_integer((json_int_t)o->time_stopped));
    json_object_set_new(j, "seconds_partition", json_real(o->t_partition));
    json_object_set_new(j, "seconds_leaves", json_real(o->t_solve));
    return j;
}

/* The report's "live at the peak" lines: this many largest storages and
 * module groups (roamc explain shows more). */
#define PLAN_REPORT_TOP 5
#define PLAN_REPORT_TOP_GROUPS 6
#define PLAN_REPORT_JSON_TOP 20

void plan_report_text(FILE *f, const plan *p, const char *model_path, const planner_files *files) {
    const graph *g = p->g;
    char a[32], b[32], c[32];
    fprintf(f, "roamc %s: %s\n", ROAMC_VERSION, model_path);
    fprintf(f, "  graph         %zu operators, %zu tensors, %zu storages (%zu persistent, %s)\n",
            g->n_ops, g->n_tensors, g->n_storages, plan_n_persistent(g),
            roamc_bytes_human(p->persistent, a, sizeof a));
    if (strcmp(planner_graph_kind(g->model), "training") == 0)
        fprintf(f, "  kind          training step (nodes update parameters or state in place)\n");
    else
        fprintf(f, "  kind          inference pass (updates nothing: initializers and outputs "
                   "persist, the rest lives "
                   "as its readers need)\n");
    if (g->model->n_inferred || g->model->n_symbols || g->model->n_bodies)
        planner_shapes_text_summary(f, g->model);
    fprintf(f, "  plan          order %s, layout %s, align %llu%s\n",
            planner_order_name(p->opt.order), planner_layout_name(p->opt.layout),
            (unsigned long long)p->opt.align,
            p->opt.retain_gradients
                ? "; gradients held to the end of the step, as eager PyTorch holds .grad"
                : "");
    fprintf(f, "  theoretical   %s (%llu B); without persistent storages %s\n",
            roamc_bytes_human(p->theoretical, a, sizeof a), (unsigned long long)p->theoretical,
            roamc_bytes_human(p->theoretical_np, b, sizeof b));
    fprintf(f, "  lower bound   %s (%llu B); the plan is at most %.2f%% above the best schedule\n",
            roamc_bytes_human(p->lower_bound, c, sizeof c), (unsigned long long)p->lower_bound,
            plan_pct(p->theoretical, p->lower_bound));
    if (p->ostats) plan_report_order_text(f, p->ostats);
    fprintf(f, "  actual peak   %s (%llu B); fragmentation %.3f%%\n",
            roamc_bytes_human(p->actual, a, sizeof a), (unsigned long long)p->actual,
            plan_pct(p->actual, p->theoretical));
    if (p->layout_optimal)
        fprintf(f, "  layout        proven minimal for this order\n");
    else if (p->layout_note[0])
        fprintf(f, "  layout        %s\n", p->layout_note);
    if (p->ilp_note[0]) fprintf(f, "  ILP           %s\n", p->ilp_note);
    if (p->tree_layout.used)
        fprintf(f,
                "  tree layout   %s (%zu groups, %zu proven, stacked by %s, %zu repaired, %zu "
                "leftovers, %.3f s); "
                "global from it %s; kept: %s\n",
                roamc_bytes_human(p->tree_layout.tree_height, a, sizeof a), p->tree_layout.groups,
                p->tree_layout.groups_proven, p->tree_layout.stacking, p->tree_layout.repaired,
                p->tree_layout.leftovers, p->tree_layout.seconds,
                roamc_bytes_human(p->tree_layout.global_height, b, sizeof b),
                p->tree_layout.winner);
    if (p->pytorch_reserved)
        fprintf(f, "  reserved      %s (%llu B) in segments by the PyTorch caching allocator\n",
                roamc_bytes_human(p->pytorch_reserved, a, sizeof a),
                (unsigned long long)p->pytorch_reserved);
    fprintf(f, "  time          %.3f s (load %.3f, order %.3f, layout %.3f)\n", p->times.total,
            p->times.load, p->times.order, p->times.layout);
    if (p->time_short)
        fprintf(f,
                "  time limit    %g s was too short: this is the fastest valid plan (program "
                "order, bestfit "
                "layout, no LESCEA, simple lower bound), which took %.3f s\n",
                p->opt.time_limit, p->times.total);
    else if (p->time_cut[0])
        fprintf(f, "  time limit    %g s cut %s; another run may differ\n", p->opt.time_limit,
                p->time_cut);
    if (p->opt.pass) p->opt.pass->report_text(f, p);
#define PLAN_NAME(path) (strcmp(path, "-") == 0 ? "standard output" : path)
    if (files->plan) fprintf(f, "  plan written  %s\n", PLAN_NAME(files->plan));
    if (files->tree) fprintf(f, "  tree written  %s\n", PLAN_NAME(files->tree));
    if (files->svg) fprintf(f, "  picture written %s\n", PLAN_NAME(files->svg));
#undef PLAN_NAME
    planner_peak_live pl;
    if (planner_peak_live_build(g, p->order, p->start, p->end, &pl) == 0)
        planner_peak_live_text(f, g, &pl, PLAN_REPORT_TOP, PLAN_REPORT_TOP_GROUPS);
    planner_peak_live_free(&pl);
}

static int plan_cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* {"count", "bytes"} of the graph inputs named in the comma-separated list. */
static json_t *plan_named_inputs_json(const fe_model *m, const char *list) {
    size_t n = 0, cap = 1;
    for (const char *c = list; *c; c++) cap += *c == ',';
    char *copy = xstrdup(list);
    char **names = xmallocarray(cap, sizeof *names);
    uint64_t bytes = 0;
    char *save = NULL; /* strtok_r: plans are made in several threads at once (libroamc) */
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        names[n++] = tok;
    qsort(names, n, sizeof *names, plan_cmp_str);
    for (size_t k = 0; k < m->n_inputs; k++) {
        const fe_value *v = &m->values[m->inputs[k]];
        const char *key = v->name;
        if (n && bsearch(&key, names, n, sizeof *names, plan_cmp_str)) bytes += v->bytes;
    }
    json_t *o = json_object();
    json_object_set_new(o, "count", json_integer((json_int_t)n));
    json_object_set_new(o, "bytes", json_integer((json_int_t)bytes));
    free(names);
    free(copy);
    return o;
}

/* roamc.eval_export's counts ("key=N,...", frontend/train/train_export.c) as members, with
 * what --train did about each, the fix and what the marks cannot see. */
static json_t *plan_eval_export_json(const char *counts, const char *fix, const char *misses) {
    json_t *o = json_object();
    const char *p = counts;
    while (*p) {
        const char *eq = strchr(p, '='), *end = strchr(p, ',');
        if (!end) end = p + strlen(p);
        if (eq && eq < end) {
            char key[64];
            size_t len = (size_t)(eq - p) < sizeof key - 1 ? (size_t)(eq - p) : sizeof key - 1;
            memcpy(key, p, len);
            key[len] = 0;
            json_object_set_new(o, key, json_integer((json_int_t)strtoll(eq + 1, NULL, 10)));
        }
        p = *end ? end + 1 : end;
    }
    bool low = json_integer_value(json_object_get(o, "convs_folded")) > 0 ||
               json_integer_value(json_object_get(o, "attention_without_dropout")) > 0;
    json_object_set_new(o, "step_low", json_boolean(low));
    json_object_set_new(o, "planned_in_training_mode",
                        json_string("BatchNormalization and Dropout (ratio > 0) in inference "
                                    "form: batch statistics and masks saved for the backward"));
    json_object_set_new(o, "missed",
                        json_string("BatchNorm folded into Conv (convs_folded) and Dropout "
                                    "removed (attention_without_dropout): not in the file, so "
                                    "the step is low"));
    json_object_set_new(o, "not_seen", json_string(misses));
    json_object_set_new(o, "fix", json_string(fix));
    return o;
}

/* What roamc --train derived (the metadata of the derived step, also when the
 * file --emit-train wrote is read back), or NULL for any other model. */
static json_t *plan_train_json(const fe_model *m) {
    const char *from = fe_meta(m, "roamc.derived_from");
    if (!from) return NULL;
    const char *none = "";
#define META(k) (fe_meta(m, k) ? fe_meta(m, k) : none)
    json_t *t = json_object();
    json_object_set_new(t, "derived_from", json_string(from));
    json_object_set_new(t, "loss", json_string(META("roamc.loss_kind")));
    json_object_set_new(t, "loss_value", json_string(META("roamc.loss")));
    int lv = *META("roamc.label") ? fe_find_value(m, META("roamc.label")) : -1;
    if (lv >= 0) {
        const fe_value *v = &m->values[lv];
        char eb[32];
        json_t *l = json_object(), *shape = json_array();
        for (int d = 0; d < v->rank; d++)
            json_array_append_new(shape, json_integer((json_int_t)v->dims[d].value));
        json_object_set_new(l, "name", json_string(v->name));
        json_object_set_new(l, "dtype", json_string(fe_elem_name(v->elem_type, eb, sizeof eb)));
        json_object_set_new(l, "shape", shape);
        json_object_set_new(t, "label", l);
    } else {
        json_object_set_new(t, "label", json_null());
    }
    json_object_set_new(t, "parameters", plan_named_inputs_json(m, META("roamc.parameters")));
    json_object_set_new(t, "frozen", plan_named_inputs_json(m, META("roamc.frozen")));
    json_object_set_new(t, "optimizer", json_string(META("roamc.optimizer")));
    json_object_set_new(t, "optimizer_state",
                        plan_named_inputs_json(m, META("roamc.optimizer_state")));
    if (*META("roamc.eval_export"))
        json_object_set_new(t, "eval_export",
                            plan_eval_export_json(META("roamc.eval_export"),
                                                  META("roamc.eval_export_fix"),
                                                  META("roamc.eval_export_misses")));
#undef META
    return t;
}

void plan_report_json(FILE *f, const plan *p, const char *model_path, const planner_files *files,
                      json_t *extra) {
    const graph *g = p->g;
    json_t *r = json_object();
    json_object_set_new(r, "model", json_string(model_path));
    json_object_set_new(r, "plan", files->plan ? json_string(files->plan) : json_null());
    json_object_set_new(r, "picture", files->svg ? json_string(files->svg) : json_null());
    json_object_set_new(r, "tree", files->tree ? json_string(files->tree) : json_null());
    json_object_set_new(r, "graph", json_string(planner_graph_kind(g->model)));
    json_t *train = plan_train_json(g->model);
    if (train) json_object_set_new(r, "train", train);
    json_object_set_new(r, "shapes", planner_shapes_summary_json(g->model));
    json_object_set_new(r, "operators", json_integer((json_int_t)g->n_ops));
    json_object_set_new(r, "tensors", json_integer((json_int_t)g->n_tensors));
    json_object_set_new(r, "storages", json_integer((json_int_t)g->n_storages));
    json_object_set_new(r, "persistent_storages", json_integer((json_int_t)plan_n_persistent(g)));
    json_object_set_new(r, "persistent_bytes", json_integer((json_int_t)p->persistent));
    json_object_set_new(r, "order", json_string(planner_order_name(p->opt.order)));
    json_object_set_new(r, "layout", json_string(planner_layout_name(p->opt.layout)));
    json_object_set_new(r, "align", json_integer((json_int_t)p->opt.align));
    json_object_set_new(r, "retain_gradients", json_boolean(p->opt.retain_gradients));
    json_object_set_new(r, "theoretical_peak", json_integer((json_int_t)p->theoretical));
    json_object_set_new(r, "theoretical_peak_without_persistent",
                        json_integer((json_int_t)p->theoretical_np));
    json_object_set_new(r, "lower_bound", json_integer((json_int_t)p->lower_bound));
    json_object_set_new(r, "gap_to_lower_bound_percent",
                        json_real(plan_pct(p->theoretical, p->lower_bound)));
    if (p->ostats) json_object_set_new(r, "ordering", plan_order_json(p->ostats));
    json_object_set_new(r, "actual_peak", json_integer((json_int_t)p->actual));
    json_object_set_new(r, "fragmentation_percent", json_real(plan_pct(p->actual, p->theoretical)));
    json_object_set_new(r, "layout_optimal", json_boolean(p->layout_optimal));
    json_object_set_new(r, "layout_note", json_string(p->layout_note));
    json_object_set_new(r, "ilp_note", json_string(p->ilp_note));
    if (p->tree_layout.used) {
        const planner_tree_layout *tl = &p->tree_layout;
        json_t *t = json_object();
        json_object_set_new(t, "tree_height", json_integer((json_int_t)tl->tree_height));
        json_object_set_new(t, "global_height", json_integer((json_int_t)tl->global_height));
        json_object_set_new(t, "winner", json_string(tl->winner));
        json_object_set_new(t, "groups", json_integer((json_int_t)tl->groups));
        json_object_set_new(t, "groups_proven", json_integer((json_int_t)tl->groups_proven));
        json_object_set_new(t, "stacking", json_string(tl->stacking));
        json_object_set_new(t, "repaired", json_integer((json_int_t)tl->repaired));
        json_object_set_new(t, "leftovers", json_integer((json_int_t)tl->leftovers));
        json_object_set_new(t, "seconds", json_real(tl->seconds));
        json_object_set_new(r, "tree_layout", t);
    }
    if (p->pytorch_reserved)
        json_object_set_new(r, "pytorch_reserved", json_integer((json_int_t)p->pytorch_reserved));
    json_t *t = json_object();
    json_object_set_new(t, "load", json_real(p->times.load));
    json_object_set_new(t, "order", json_real(p->times.order));
    json_object_set_new(t, "layout", json_real(p->times.layout));
    json_object_set_new(t, "total", json_real(p->times.total));
    json_object_set_new(r, "seconds", t);
    json_t *tl = json_object();
    json_object_set_new(tl, "seconds", json_real(p->opt.time_limit));
    json_object_set_new(tl, "too_short", json_boolean(p->time_short));
    json_object_set_new(tl, "cut", json_string(p->time_cut));
    json_object_set_new(r, "time_limit", tl);
    planner_peak_live pl;
    if (planner_peak_live_build(g, p->order, p->start, p->end, &pl) == 0)
        json_object_set_new(r, "live_at_peak",
                            planner_peak_live_json(g, &pl, PLAN_REPORT_JSON_TOP));
    planner_peak_live_free(&pl);
    if (p->opt.pass) p->opt.pass->report_json(p, r);
    if (extra) json_object_update(r, extra);
    json_dumpf(r, f, JSON_INDENT(2));
    fputc('\n', f);
    json_decref(r);
}
