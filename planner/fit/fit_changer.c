/* --fit as a step changer (changer.h): fit_run behind the door, its
 * verdict on the budget and what the library writes and reports. */
#include <stdlib.h>

#include "base.h"
#include "fit.h"

typedef struct fit_changed {
    fit_device device; /* the setup's, which r.device points at */
    char *step_name, *emit_name, *plan_model;
    fit_request r;
    fit_outcome o;
    bool have;
} fit_changed;

/* The message of a change that does not fit, into err. */
static void fit_changer_no_fit(const fit_changed *c, const fit_setup *s, char *err, size_t errlen) {
    if (c->o.status == FIT_CANNOT) {
        roamc_errorf(err, errlen,
                     "%s: cannot fit: needs at least %llu B, the least arena --fit reaches "
                     "(budget %s: %llu B for the arena)",
                     c->step_name, (unsigned long long)c->o.least, s->budget_text,
                     (unsigned long long)c->r.arena_budget);
        return;
    }
    roamc_errorf(
        err, errlen,
        "%s: does not fit within --max-overhead %.1f%%: it adds at least %.1f%% of the step's "
        "time",
        c->step_name, 100.0 * s->max_overhead,
        100.0 * (c->o.over_cap_seconds > 0 ? c->o.over_cap_seconds : c->o.added_seconds) /
            c->o.step_seconds);
}

static changer_status fit_changer_plan(void *state, const changer_request *q, char *err,
                                       size_t errlen) {
    fit_changed *c = state;
    const fit_setup *s = q->setup;
    c->device = *s->device; /* the state outlives the options */
    c->step_name = xstrdup(q->step_name);
    c->emit_name = xstrdup(q->emit_path ? q->emit_path : "(the changed step)");
    c->plan_model = xstrdup(q->emit_path ? q->emit_path : q->step_name);
    c->r = (fit_request){.step_name = c->step_name,
                         .step_bytes = q->step_bytes,
                         .step_len = q->step_len,
                         .g = q->g,
                         .bindings = q->bindings,
                         .opt = q->opt,
                         .arena_budget = s->arena_budget,
                         .mode = s->mode,
                         .max_overhead = s->max_overhead,
                         .device = &c->device,
                         .emit_name = c->emit_name};
    c->have = true;
    char why[2048];
    int failed = fit_run(&c->r, &c->o, why, sizeof why);
    c->r.bindings = NULL; /* the caller's: not read after the run */
    if (failed) {
        roamc_errorf(err, errlen, "%s: %s", c->step_name, why);
        return CHANGER_FAILED;
    }
    if (c->o.status != FIT_CANNOT && c->o.status != FIT_TOO_SLOW) return CHANGER_OK;
    fit_changer_no_fit(c, s, err, errlen);
    return CHANGER_NO_FIT;
}

static void fit_changer_view(void *state, changer_view *v) {
    fit_changed *c = state;
    bool changed = c->o.status != FIT_ALREADY;
    v->main = changed ? &c->o.changed->plan : &c->o.before;
    v->plan_model = c->plan_model;
    v->step_bytes = changed ? c->o.changed->bytes : c->r.step_bytes;
    v->step_len = changed ? c->o.changed->len : c->r.step_len;
    v->title = changed ? "the changed step (--fit)" : "the step (--fit: unchanged)";
    v->write_plan = c->o.status == FIT_ALREADY || c->o.status == FIT_FITTED;
    v->fits = v->write_plan;
    v->budget_plan = v->main;
    v->n_steps = 0;
}

static const graph *fit_changer_graph(const void *state, size_t k) {
    (void)state, (void)k;
    return NULL;
}

static const plan *fit_changer_step_plan(const void *state, size_t k) {
    (void)state, (void)k;
    return NULL;
}

static void fit_changer_text(FILE *f, const void *state, bool written) {
    (void)written; /* its lines are the same either way */
    const fit_changed *c = state;
    fit_report_text(f, &c->r, &c->o);
}

static void fit_changer_json(struct json_t *obj, const void *state) {
    const fit_changed *c = state;
    fit_report_json(obj, &c->r, &c->o);
}

static int fit_changer_warning(const void *state, char *buf, size_t len) {
    const fit_changed *c = state;
    return fit_overhead_warning(&c->r, &c->o, buf, len) != NULL;
}

static void fit_changer_free(void *state) {
    fit_changed *c = state;
    if (c->have) fit_outcome_free(&c->o);
    free(c->step_name);
    free(c->emit_name);
    free(c->plan_model);
}

const planner_changer fit_changer = {.name = "fit",
                                     .progress = "fitting %s",
                                     .unit = "the changed step",
                                     .state_size = sizeof(fit_changed),
                                     .build = NULL,
                                     .plan = fit_changer_plan,
                                     .view = fit_changer_view,
                                     .step_graph = fit_changer_graph,
                                     .step_plan = fit_changer_step_plan,
                                     .report_text = fit_changer_text,
                                     .report_json = fit_changer_json,
                                     .warning = fit_changer_warning,
                                     .free = fit_changer_free};
