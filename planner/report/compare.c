/* `roamc MODEL --compare`: the same graph planned four ways, side by side.
 *
 *   PyTorch     program order, gradients held to the end of the step (as
 *               eager PyTorch holds .grad until the next zero_grad), and the
 *               caching-allocator replay (its actual peak is the memory the
 *               allocator reserves)
 *   Heuristics  LESCEA order, LLFB layout
 *   ILP         whole-graph order ILP, whole-graph layout ILP (time-limited;
 *               each falls back to its best heuristic when too large)
 *   ROAM        roam order, roam layout
 */
#include "compare.h"
#include "files.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

typedef plan_compare_row compare_row;

static const char *compare_human(uint64_t b, char *buf, size_t len) {
    if (b >= (1ull << 30))
        snprintf(buf, len, "%.2f GiB", (double)b / (1024.0 * 1024 * 1024));
    else
        snprintf(buf, len, "%.1f MiB", (double)b / (1024.0 * 1024));
    return buf;
}

/* Sizes of one column in one unit (GiB when the largest is one, else MiB)
 * with as many decimals, 2 to 6, as tell every two different sizes apart
 * (a "1.22 GiB" row beside a different "1.22 GiB" row hides the saving).
 * Into text[i] (32 bytes each). */
static void compare_column(const uint64_t *v, size_t n, char (*text)[32]) {
    uint64_t top = 0;
    for (size_t i = 0; i < n; i++) top = v[i] > top ? v[i] : top;
    double unit = top >= (1ull << 30) ? 1024.0 * 1024 * 1024 : 1024.0 * 1024;
    const char *name = top >= (1ull << 30) ? "GiB" : "MiB";
    for (int d = top >= (1ull << 30) ? 2 : 1; d <= 6; d++) {
        for (size_t i = 0; i < n; i++)
            snprintf(text[i], sizeof text[i], "%.*f %s", d, (double)v[i] / unit, name);
        bool apart = true;
        for (size_t i = 0; i < n && apart; i++)
            for (size_t j = i + 1; j < n && apart; j++)
                apart = v[i] == v[j] || strcmp(text[i], text[j]) != 0;
        if (apart) return;
    }
}

const char *plan_compare_order_ran(const plan_compare_row *w) {
    return w->p.ostats && w->p.ostats->source ? w->p.ostats->source
                                              : planner_order_name(w->m->order);
}

const char *plan_compare_layout_ran(const plan_compare_row *w) {
    return w->p.layout_kept ? w->p.layout_kept : planner_layout_name(w->m->layout);
}

/* The order and layout a row ran, as the table prints them: the ones the
 * ILPs fell back to marked '*'. */
static void compare_ran(const compare_row *w, char *order, char *layout, size_t len) {
    const char *o = plan_compare_order_ran(w);
    bool o_fell = strcmp(o, planner_order_name(w->m->order)) != 0;
    snprintf(order, len, "%s%s", o, o_fell ? "*" : "");
    if (w->p.layout_kept)
        snprintf(layout, len, "%s*", w->p.layout_kept);
    else
        snprintf(layout, len, "%s", planner_layout_name(w->m->layout));
}

static double compare_pct(double num, double den) {
    return den > 0 ? 100.0 * (num - den) / den : 0.0;
}

double plan_compare_fragmentation(const plan_comparison *c, size_t i) {
    ROAMC_ASSERT(i < c->n);
    return compare_pct((double)c->rows[i].actual, (double)c->rows[i].p.theoretical);
}

double plan_compare_vs_pytorch(const plan_comparison *c, size_t i) {
    ROAMC_ASSERT(i < c->n);
    return i == 0 ? 0.0 : -compare_pct((double)c->rows[i].actual, (double)c->rows[0].actual);
}

/* Fills the note of a row: what fell back, what ran out of time. */
static void compare_note(compare_row *r) {
    r->note[0] = 0;
    /* why the ILPs stopped, and whether a heuristic plan replaced theirs */
    if (r->p.ilp_note[0]) snprintf(r->note, sizeof r->note, "%s", r->p.ilp_note);
    if (r->p.time_short) {
        size_t k = strlen(r->note);
        snprintf(r->note + k, sizeof r->note - k,
                 "%stime limit too short: the fastest valid plan (program order, %s layout)",
                 k ? "; " : "", planner_layout_name(r->p.opt.layout));
    } else if (r->p.time_cut[0]) {
        size_t k = strlen(r->note);
        snprintf(r->note + k, sizeof r->note - k, "%stime limit cut %s", k ? "; " : "",
                 r->p.time_cut);
    }
    if (r->p.layout_note[0] && !r->p.ilp_note[0]) {
        size_t k = strlen(r->note);
        snprintf(r->note + k, sizeof r->note - k, "%s%s", k ? "; " : "", r->p.layout_note);
    }
}

/* Plans g with each of the nrows methods of rows, in order, stopping at the
 * first failure (its message in err).  Returns 0 or -1. */
static int compare_plan_methods(const graph *g, const planner_options *base, compare_row *rows,
                                size_t nrows, char *err, size_t errlen) {
    for (size_t i = 0; i < nrows; i++) {
        planner_options opt = *base;
        planner_method_apply(rows[i].m, &opt);
        /* --time-limit bounds the whole command: each method gets an equal
         * share of what is left (PyTorch and Heuristics take little, so the
         * ILP and ROAM get most of it) */
        if (base->deadline > 0) {
            double now = roamc_now();
            opt.deadline = now + (base->deadline - now) / (double)(nrows - i);
        }
        double t0 = roamc_now();
        planner_progress_prefix("--compare: %s (%zu/%zu)", rows[i].m->title, i + 1, nrows);
        if (plan_build(g, &opt, &rows[i].p, err, errlen)) return -1;
        rows[i].seconds = roamc_now() - t0;
        rows[i].actual = plan_device_bytes(&rows[i].p);
        compare_note(&rows[i]);
    }
    return 0;
}

/* Writes the ROAM plan (and its tree) and the picture of PyTorch's and
 * ROAM's plans, all or nothing.  Returns 0 or -1 with err set. */
static int compare_write_files(const planner_files *files, const char *model_path,
                               const compare_row *torch, const compare_row *roam, char *err,
                               size_t errlen) {
    const plan *plans[2] = {&torch->p, &roam->p};
    const char *base_name = strrchr(model_path, '/');
    base_name = base_name ? base_name + 1 : model_path;
    char t1[256], t2[256], r1[32];
    /* the same units as the picture's own numbers ("actual 1.22 GiB") */
    snprintf(t1, sizeof t1, "%s, PyTorch (program order, caching allocator; reserves %s)",
             base_name, compare_human(torch->actual, r1, sizeof r1));
    snprintf(t2, sizeof t2, "%s, ROAM (roam order, roam layout)", base_name);
    const char *titles[2] = {t1, t2};
    planner_files_request r = {
        .p = &roam->p, .model_path = model_path, .svg_plans = plans, .titles = titles, .n_svg = 2};
    return planner_files_write(files, &r, err, errlen) ? -1 : 0;
}

/* `--report json`: the graph's sizes, ROAM's bounds, one object per row. */
static void compare_print_json(const graph *g, const char *model_path, const compare_row *rows,
                               size_t nrows, FILE *out) {
    const compare_row *torch = &rows[0], *roam = &rows[nrows - 1];
    json_t *r = json_object();
    json_object_set_new(r, "model", json_string(model_path));
    json_object_set_new(r, "operators", json_integer((json_int_t)g->n_ops));
    json_object_set_new(r, "tensors", json_integer((json_int_t)g->n_tensors));
    json_object_set_new(r, "storages", json_integer((json_int_t)g->n_storages));
    json_object_set_new(r, "lower_bound", json_integer((json_int_t)roam->p.lower_bound));
    json_object_set_new(r, "persistent_bytes", json_integer((json_int_t)roam->p.persistent));
    json_t *arr = json_array();
    for (size_t i = 0; i < nrows; i++) {
        const compare_row *w = &rows[i];
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(w->m->name));
        json_object_set_new(o, "order", json_string(planner_order_name(w->m->order)));
        json_object_set_new(o, "layout", json_string(planner_layout_name(w->m->layout)));
        /* what ran: the ILPs may have fallen back to a heuristic */
        json_object_set_new(o, "order_ran", json_string(plan_compare_order_ran(w)));
        json_object_set_new(o, "layout_ran", json_string(plan_compare_layout_ran(w)));
        json_object_set_new(o, "theoretical_peak", json_integer((json_int_t)w->p.theoretical));
        json_object_set_new(o, "actual_peak", json_integer((json_int_t)w->actual));
        json_object_set_new(o, "fragmentation_percent",
                            json_real(compare_pct((double)w->actual, (double)w->p.theoretical)));
        json_object_set_new(
            o, "reduction_vs_pytorch_percent",
            json_real(i == 0 ? 0.0 : -compare_pct((double)w->actual, (double)torch->actual)));
        json_object_set_new(o, "seconds", json_real(w->seconds));
        json_object_set_new(o, "note", json_string(w->note));
        json_array_append_new(arr, o);
    }
    json_object_set_new(r, "rows", arr);
    json_dumpf(r, out, JSON_INDENT(2));
    fputc('\n', out);
    json_decref(r);
}

/* The text report: one line per row, the lower bound, what "PyTorch"
 * means for this graph, the rows' notes and the files written. */
static void compare_print_table(const graph *g, const char *model_path, const planner_files *files,
                                const compare_row *rows, size_t nrows, FILE *out) {
    const compare_row *torch = &rows[0], *roam = &rows[nrows - 1];
    char a[32], b[32], ord[32], lay[32];
    uint64_t th[8] = {0}, ac[8] = {0};
    char th_text[8][32], ac_text[8][32];
    bool fell = false;
    for (size_t i = 0; i < nrows; i++) th[i] = rows[i].p.theoretical, ac[i] = rows[i].actual;
    compare_column(th, nrows, th_text);
    compare_column(ac, nrows, ac_text);
    fprintf(out, "roamc %s --compare: %s (%zu operators, %zu tensors, %zu storages)\n",
            ROAMC_VERSION, model_path, g->n_ops, g->n_tensors, g->n_storages);
    fprintf(out, "  %-11s %-8s %-8s %14s %14s %8s %11s %9s\n", "method", "order", "layout",
            "theoretical", "actual", "frag", "vs PyTorch", "time");
    for (size_t i = 0; i < nrows; i++) {
        const compare_row *w = &rows[i];
        compare_ran(w, ord, lay, sizeof ord);
        fell |= strchr(ord, '*') || strchr(lay, '*');
        fprintf(out, "  %-11s %-8s %-8s %14s %14s %7.3f%% %10.3f%% %8.2fs\n", w->m->title, ord, lay,
                th_text[i], ac_text[i], compare_pct((double)w->actual, (double)w->p.theoretical),
                i == 0 ? 0.0 : -compare_pct((double)w->actual, (double)torch->actual), w->seconds);
    }
    if (fell)
        fprintf(out,
                "  *: what ran, where the ILPs fell back to a heuristic (the note says why)\n");
    /* The bound caps what any plan can save: tells a user whether a
     * small saving is ROAM's limit or the model's. */
    fprintf(out,
            "  lower bound of the theoretical peak: %s (no plan saves more than %.2f%% vs "
            "PyTorch); "
            "persistent %s\n",
            compare_human(roam->p.lower_bound, a, sizeof a),
            -compare_pct((double)roam->p.lower_bound, (double)torch->actual),
            compare_human(roam->p.persistent, b, sizeof b));
    if (strcmp(planner_graph_kind(g->model), "training") == 0)
        fprintf(out, "  PyTorch: program order, gradients held to the end of the step as eager "
                     "PyTorch holds .grad,\n"
                     "  actual peak = what its caching allocator reserves; vs PyTorch = saving "
                     "in actual peak.\n");
    else
        fprintf(out, "  PyTorch: program order of this inference graph, actual peak = what its "
                     "caching allocator\n"
                     "  reserves (initializers included); vs PyTorch = saving in actual peak.\n");
    for (size_t i = 0; i < nrows; i++)
        if (rows[i].note[0]) fprintf(out, "  note: %s: %s\n", rows[i].m->title, rows[i].note);
    if (files->plan) fprintf(out, "  ROAM plan written  %s\n", files->plan);
    if (files->svg) fprintf(out, "  picture written    %s\n", files->svg);
}

int plan_compare_run(const graph *g, const planner_options *base, plan_comparison *c, char *err,
                     size_t errlen) {
    *c = (plan_comparison){.g = g, .n = planner_n_methods};
    ROAMC_ASSERT(c->n <= PLAN_COMPARE_MAX_ROWS);
    for (size_t i = 0; i < c->n; i++) c->rows[i].m = &planner_methods[i];
    if (compare_plan_methods(g, base, c->rows, c->n, err, errlen) == 0) return 0;
    plan_comparison_free(c);
    return -1;
}

int plan_compare_write(const plan_comparison *c, const char *model_path, const planner_files *files,
                       char *err, size_t errlen) {
    ROAMC_ASSERT(c->n >= 2);
    return compare_write_files(files, model_path, &c->rows[0], &c->rows[c->n - 1], err, errlen);
}

void plan_compare_report(FILE *out, const plan_comparison *c, const char *model_path,
                         const planner_files *files, int json) {
    ROAMC_ASSERT(c->n >= 2);
    if (json)
        compare_print_json(c->g, model_path, c->rows, c->n, out);
    else
        compare_print_table(c->g, model_path, files, c->rows, c->n, out);
}

void plan_comparison_free(plan_comparison *c) {
    for (size_t i = 0; i < c->n; i++) plan_free(&c->rows[i].p);
    c->n = 0;
}
