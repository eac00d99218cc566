/* Planning a model through the API (roamc.h, api_internal.h): the one
 * code path of `roamc MODEL` and of roamc_plan_file/roamc_plan_bytes.
 * Load, plan (one plan, --fit, --shard, --pipeline-stages or --compare,
 * PyTorch's plan beside it under --budget), then the result's files,
 * report and accessors. */
#include "api_internal.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

roamc_result *api_result_new(void) {
    roamc_result *r = xcalloc(1, sizeof *r);
    r->fits = -1;
    return r;
}

roamc_status api_fail(roamc_result *r, roamc_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->error, sizeof r->error, fmt, ap);
    va_end(ap);
    r->status = status;
    return status;
}

static char *api_strdup_or_null(const char *s) {
    return s ? xstrdup(s) : NULL;
}

roamc_status api_load(const api_request *q, roamc_result *r) {
    char err[2048];
    free(r->model_path);
    free(r->emit);
    free(r->plan_model);
    r->model_path = xstrdup(q->model_path);
    r->emit = api_strdup_or_null(q->emit_path);
    /* --train --emit-train alone: the plan is of the file written there */
    api_change change;
    api_change_of(q, &change);
    bool changes = change.changer != NULL;
    r->plan_model = xstrdup(r->emit && !changes ? r->emit : q->model_path);
    planner_load l = {.path = q->model_path,
                      .bytes = q->bytes,
                      .len = q->len,
                      .bindings = q->bindings,
                      .train = q->train,
                      .align = q->opt.align,
                      .summary = q->summary,
                      .keep_bytes = changes};
    if (planner_step_load(&l, &r->step, err, sizeof err))
        return api_fail(r, ROAMC_BAD_INPUT, "%s", err);
    r->have_step = true;
    return ROAMC_OK;
}

/* --budget: PyTorch's plan of g (method pytorch under the device's limit)
 * into r->torch, unless the plan is PyTorch's already.  0, or -1 with a
 * message (what names the step in it). */
static int api_torch(const api_request *q, roamc_result *r, const graph *g, const char *what) {
    const planner_options *opt = &r->opt;
    char err[2048];
    r->torch_p = r->main;
    r->budget_p = r->main;
    if (!q->budget.budget_text) return 0;
    if (r->mode == API_PLAIN && opt->retain_gradients && opt->layout == PLANNER_LAYOUT_PYTORCH &&
        opt->order == PLANNER_ORDER_PROGRAM && opt->device_limit)
        return 0;
    planner_options topt = *opt;
    planner_method_apply(planner_method_find("pytorch"), &topt);
    topt.device_limit = q->budget.budget - q->budget.reserve;
    if (plan_build(g, &topt, &r->torch, err, sizeof err)) {
        api_fail(r, ROAMC_ERROR, "%s: %s: %s", r->mode == API_PLAIN ? r->plan_model : r->model_path,
                 what, err);
        return -1;
    }
    r->have_torch = true;
    r->torch_p = &r->torch;
    return 0;
}

/* One plan of the step as it is. */
static roamc_status api_plan_plain(const api_request *q, roamc_result *r, double load_seconds) {
    char err[2048];
    r->mode = API_PLAIN;
    if (plan_build(&r->step.g, &r->opt, &r->p, err, sizeof err))
        return api_fail(r, ROAMC_ERROR, "%s: %s", r->plan_model, err);
    r->have_p = true;
    r->main = &r->p;
    r->write_plan = true;
    r->p.times.load = load_seconds;
    return api_torch(q, r, &r->step.g, "PyTorch's plan") ? r->status : ROAMC_OK;
}

/* --budget beside a change: PyTorch's plan of the changed step that needs
 * the most under PyTorch (a change fits when every changed step does),
 * beside the plan the verdict is of.  0, or -1 with a message. */
static int api_torch_changed(const api_request *q, roamc_result *r) {
    char err[2048];
    r->budget_p = r->view.budget_plan;
    r->torch_p = r->budget_p;
    if (!q->budget.budget_text) return 0;
    planner_options topt = r->opt;
    planner_method_apply(planner_method_find("pytorch"), &topt);
    topt.device_limit = q->budget.budget - q->budget.reserve;
    topt.progress = 0;
    for (size_t k = 0; k < r->view.n_steps; k++) {
        plan one;
        if (plan_build(r->changer->step_graph(r->changed, k), &topt, &one, err, sizeof err)) {
            char what[64];
            snprintf(what, sizeof what, r->changer->unit, k);
            api_fail(r, ROAMC_ERROR, "%s: PyTorch's plan of %s: %s", r->model_path, what, err);
            return -1;
        }
        if (!r->have_torch || plan_device_bytes(&one) > plan_device_bytes(&r->torch)) {
            if (r->have_torch) plan_free(&r->torch);
            r->torch = one;
            r->have_torch = true;
        } else {
            plan_free(&one);
        }
    }
    r->torch_p = &r->torch;
    return 0;
}

/* --fit, --shard, --pipeline-stages: the step changer c through the door
 * (changer.h): build, plan, then its view; PyTorch's plans beside it under
 * --budget unless it judged the budget itself. */
static roamc_status api_plan_changed(const api_request *q, roamc_result *r, const api_change *c) {
    static const roamc_status statuses[] = {[CHANGER_OK] = ROAMC_OK,
                                            [CHANGER_REFUSED] = ROAMC_BAD_INPUT,
                                            [CHANGER_FAILED] = ROAMC_ERROR,
                                            [CHANGER_NO_FIT] = ROAMC_NO_FIT};
    char err[2048];
    r->mode = API_CHANGED;
    r->changer = c->changer;
    r->changed = xcalloc(1, c->changer->state_size);
    changer_request cq = {.step_name = r->model_path,
                          .step_bytes = r->step.bytes,
                          .step_len = r->step.len,
                          .g = &r->step.g,
                          .bindings = q->bindings,
                          .opt = &r->opt,
                          .emit_path = r->emit,
                          .setup = c->setup};
    planner_progress_stage(c->changer->progress, r->model_path);
    changer_status st =
        c->changer->build ? c->changer->build(r->changed, &cq, err, sizeof err) : CHANGER_OK;
    if (st == CHANGER_OK) st = c->changer->plan(r->changed, &cq, err, sizeof err);
    if (st != CHANGER_OK && st != CHANGER_NO_FIT) return api_fail(r, statuses[st], "%s", err);
    c->changer->view(r->changed, &r->view);
    r->main = r->view.main;
    free(r->plan_model);
    r->plan_model = xstrdup(r->view.plan_model);
    r->write_plan = r->view.write_plan;
    r->fits = r->view.fits;
    r->judged = r->view.fits >= 0;
    if (st == CHANGER_NO_FIT) return api_fail(r, ROAMC_NO_FIT, "%s", err);
    if (r->judged) return ROAMC_OK;
    return api_torch_changed(q, r) ? r->status : ROAMC_OK;
}

/* --compare: r->step planned from r->opt by every method
 * (plan_compare_run, planner/report/compare.c) into r->cmp; r->main is the
 * ROAM row's plan, which -o writes. */
static roamc_status api_plan_compare(roamc_result *r) {
    char err[2048];
    r->mode = API_COMPARE;
    if (plan_compare_run(&r->step.g, &r->opt, &r->cmp, err, sizeof err))
        return api_fail(r, ROAMC_ERROR, "%s: %s", r->plan_model, err);
    r->have_cmp = true;
    r->main = &r->cmp.rows[r->cmp.n - 1].p;
    r->write_plan = true;
    return ROAMC_OK;
}

roamc_status api_plan(const api_request *q, roamc_result *r) {
    ROAMC_ASSERT(r->have_step);
    r->opt = q->opt;
    r->budget = q->budget;
    if (q->streams) { /* the result holds the pass's options: its plans report with them */
        r->streams = *q->streams;
        r->streams.device = *q->device;
        /* a gathered set-up's prefetch also issues each gather that far ahead, as the command */
        if (q->shard && (q->shard->kind == SHARD_ZERO3 || q->shard->kind == SHARD_FSDP))
            r->streams.gather_ahead = q->shard->prefetch;
        streams_pass_init(&r->streams_pass, &r->streams);
        r->opt.pass = &r->streams_pass;
    }
    double load_seconds = roamc_now() - (q->opt.deadline - q->opt.time_limit);
    roamc_status st;
    api_change change;
    api_change_of(q, &change);
    if (change.changer)
        st = api_plan_changed(q, r, &change);
    else if (q->compare)
        st = api_plan_compare(r);
    else
        st = api_plan_plain(q, r, load_seconds);
    /* the plan reported is one of several made (--fit, --shard,
     * --pipeline-stages): the load is the run's all the same */
    if (r->main && r->mode == API_CHANGED) r->main->times.load = load_seconds;
    if (st == ROAMC_OK && q->budget.budget_text && !r->judged) {
        r->fits = planner_budget_report(NULL, &r->budget, r->budget_p, r->torch_p, NULL) == 0;
        if (!r->fits) {
            char need[64];
            api_fail(r, ROAMC_NO_FIT, "%s: the plan needs %s, over the budget %s", r->plan_model,
                     roamc_bytes_human(plan_device_bytes(r->budget_p), need, sizeof need),
                     q->budget.budget_text);
        }
    }
    return r->status;
}

int api_files_write(const roamc_result *r, planner_files *files, char *err, size_t errlen) {
    if (!r->main || !r->write_plan) return roamc_errorf(err, errlen, "no plan to write");
    if (r->mode == API_COMPARE) { /* the ROAM plan, and PyTorch's above it in the picture */
        char why[2048];
        if (plan_compare_write(&r->cmp, r->plan_model, files, why, sizeof why) == 0) return 0;
        return roamc_errorf(err, errlen, "%s: %s", r->plan_model, why);
    }
    char title[256];
    const char *t = title;
    if (r->mode == API_PLAIN) {
        const char *base = strrchr(r->plan_model, '/');
        snprintf(title, sizeof title, "%s (order %s, layout %s)", base ? base + 1 : r->plan_model,
                 planner_order_name(r->main->opt.order), planner_layout_name(r->main->opt.layout));
    } else {
        t = r->view.title;
        files->step = r->emit;
        files->step_bytes = r->view.step_bytes;
        files->step_len = r->view.step_len;
    }
    const plan *plans[1] = {r->main};
    const char *titles[1] = {t};
    planner_files_request fr = {r->main, r->plan_model, plans, titles, 1};
    return planner_files_write(files, &fr, err, errlen);
}

void api_report(FILE *f, const roamc_result *r, const planner_files *files, int json) {
    const planner_budget *budget = &r->budget;
    planner_files none = {0};
    if (r->mode == API_COMPARE) {
        plan_compare_report(f, &r->cmp, r->plan_model, files, json);
        return;
    }
    if (!r->write_plan) files = &none;
    bool changed = r->mode == API_CHANGED;
    json_t *extra = json ? json_object() : NULL;
    if (changed && json) r->changer->report_json(extra, r->changed);
    if (!r->judged && json && budget->budget_text)
        planner_budget_report(NULL, budget, r->budget_p, r->torch_p, extra);
    if (json) {
        plan_report_json(f, r->main, r->plan_model, files, extra);
    } else {
        plan_report_text(f, r->main, r->plan_model, files);
        if (changed) r->changer->report_text(f, r->changed, files->plan || files->step);
        if (!r->judged && budget->budget_text)
            planner_budget_report(f, budget, r->budget_p, r->torch_p, NULL);
    }
    json_decref(extra);
}

/* ------------------------------------------------------------------ the public result */

void roamc_result_free(roamc_result *r) {
    if (!r) return;
    if (r->have_p) plan_free(&r->p);
    if (r->have_torch) plan_free(&r->torch);
    if (r->changed) r->changer->free(r->changed);
    free(r->changed);
    if (r->have_cmp) plan_comparison_free(&r->cmp);
    if (r->have_step) planner_step_free(&r->step);
    free(r->step.summary); /* a load that failed after the model loaded */
    free(r->model_path);
    free(r->plan_model);
    free(r->emit);
    free(r->batch_json);
    free(r->sizes);
    free(r->persistent);
    free(r);
}

roamc_status roamc_result_status(const roamc_result *r) {
    return r ? r->status : ROAMC_BAD_INPUT;
}

const char *roamc_result_error(const roamc_result *r) {
    return r ? r->error : "no result";
}

static const plan *api_main(const roamc_result *r, size_t *n, size_t count_of_main) {
    (void)count_of_main;
    if (n) *n = 0;
    return r ? r->main : NULL;
}

const int32_t *roamc_result_schedule(const roamc_result *r, size_t *n) {
    const plan *p = api_main(r, n, 0);
    if (!p) return NULL;
    _Static_assert(sizeof(int) == sizeof(int32_t), "the schedule is handed out as int32_t");
    if (n) *n = p->g->n_ops;
    return (const int32_t *)p->order;
}

const uint64_t *roamc_result_offsets(const roamc_result *r, size_t *n) {
    const plan *p = api_main(r, n, 0);
    if (!p) return NULL;
    if (n) *n = p->g->n_storages;
    return p->offsets;
}

/* The per-buffer arrays the plan keeps only in its graph, made once. */
static void api_buffer_arrays(const roamc_result *cr) {
    roamc_result *r = (roamc_result *)cr; /* a cache: same answers before and after */
    if (r->sizes || !r->main) return;
    const graph *g = r->main->g;
    r->sizes = xmallocarray(g->n_storages ? g->n_storages : 1, sizeof *r->sizes);
    r->persistent = xmallocarray(g->n_storages ? g->n_storages : 1, sizeof *r->persistent);
    for (size_t i = 0; i < g->n_storages; i++) {
        r->sizes[i] = g->storages[i].size;
        r->persistent[i] = g->storages[i].persistent;
    }
}

const uint64_t *roamc_result_sizes(const roamc_result *r, size_t *n) {
    const plan *p = api_main(r, n, 0);
    if (!p) return NULL;
    api_buffer_arrays(r);
    if (n) *n = p->g->n_storages;
    return r->sizes;
}

const int32_t *roamc_result_starts(const roamc_result *r, size_t *n) {
    const plan *p = api_main(r, n, 0);
    if (!p) return NULL;
    if (n) *n = p->g->n_storages;
    return p->start;
}

const int32_t *roamc_result_ends(const roamc_result *r, size_t *n) {
    const plan *p = api_main(r, n, 0);
    if (!p) return NULL;
    if (n) *n = p->g->n_storages;
    return p->end;
}

const uint8_t *roamc_result_persistent(const roamc_result *r, size_t *n) {
    const plan *p = api_main(r, n, 0);
    if (!p) return NULL;
    api_buffer_arrays(r);
    if (n) *n = p->g->n_storages;
    return r->persistent;
}

const char *roamc_result_buffer_name(const roamc_result *r, size_t i) {
    const plan *p = api_main(r, NULL, 0);
    if (!p || i >= p->g->n_storages) return NULL;
    const graph_storage *s = &p->g->storages[i];
    return p->g->model->values[s->tensors[0]].name;
}

uint64_t roamc_result_theoretical_peak(const roamc_result *r) {
    return r && r->main ? r->main->theoretical : 0;
}
uint64_t roamc_result_actual_peak(const roamc_result *r) {
    return r && r->main ? r->main->actual : 0;
}
uint64_t roamc_result_lower_bound(const roamc_result *r) {
    return r && r->main ? r->main->lower_bound : 0;
}
uint64_t roamc_result_persistent_bytes(const roamc_result *r) {
    return r && r->main ? r->main->persistent : 0;
}
uint64_t roamc_result_device_bytes(const roamc_result *r) {
    return r && r->main ? plan_device_bytes(r->main) : 0;
}
int roamc_result_fits(const roamc_result *r) {
    return r ? r->fits : -1;
}

/* Text made by write into a new string for the caller.  ROAMC_OK, or
 * ROAMC_ERROR when the stream fails. */
typedef struct api_text {
    const roamc_result *r;
    int report; /* 1: the JSON report, 0: the plan file */
} api_text;

static roamc_status api_text_make(const api_text *t, char **json, size_t *len) {
    const roamc_result *r = t->r;
    *json = NULL;
    if (len) *len = 0;
    if (r && t->report && !r->main && r->batch_json) { /* --max-batch: its table */
        *json = xstrdup(r->batch_json);
        if (len) *len = strlen(r->batch_json);
        return ROAMC_OK;
    }
    if (!r || !r->main) return ROAMC_BAD_INPUT;
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) return ROAMC_ERROR;
    int bad = 0;
    if (t->report) {
        planner_files none = {0};
        api_report(f, r, &none, 1);
    } else {
        bad = plan_write_stream(r->main, r->plan_model, f) != 0;
    }
    bad |= fclose(f) != 0;
    if (bad) {
        free(buf);
        return ROAMC_ERROR;
    }
    *json = buf;
    if (len) *len = n;
    return ROAMC_OK;
}

roamc_status roamc_result_report_json(const roamc_result *r, char **json, size_t *len) {
    return api_text_make(&(api_text){r, 1}, json, len);
}

roamc_status roamc_result_plan_json(const roamc_result *r, char **json, size_t *len) {
    return api_text_make(&(api_text){r, 0}, json, len);
}

roamc_status roamc_result_write(roamc_result *r, const char *path) {
    char err[2048];
    if (!r) return ROAMC_BAD_INPUT;
    if (!r->main || !r->write_plan || !path)
        return api_fail(r, ROAMC_BAD_INPUT, "%s",
                        "no plan to write (the run failed, or --fit found "
                        "no step that fits)");
    planner_files files = {.plan = path};
    planner_output_set outs = {0};
    planner_outputs_add(&outs, "plan", path);
    /* --train --emit-train alone (and with --compare) wrote its step at
     * the load; the steps --fit, --shard and --pipeline-stages change are
     * written here */
    bool step = r->mode == API_CHANGED;
    planner_outputs_add(&outs, "emit-train", step ? r->emit : NULL);
    const char *inputs[1] = {r->model_path};
    if (planner_outputs_check(&outs, inputs, 1, err, sizeof err))
        return api_fail(r, ROAMC_BAD_INPUT, "%s", err);
    if (api_files_write(r, &files, err, sizeof err)) return api_fail(r, ROAMC_ERROR, "%s", err);
    return ROAMC_OK;
}

void roamc_free(void *p) {
    free(p);
}
