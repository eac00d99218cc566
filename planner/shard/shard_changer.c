/* --shard as a step changer (changer.h): one rank's step, built and
 * planned behind the door. */
#include <stdlib.h>

#include "base.h"
#include "shard.h"

typedef struct shard_changed {
    char *step_name, *emit_name, *wrap; /* copies the request points at */
    shard_request r;
    shard_outcome o;
    bool have;
} shard_changed;

static changer_status shard_changer_build(void *state, const changer_request *q, char *err,
                                          size_t errlen) {
    shard_changed *c = state;
    const shard_options *so = q->setup;
    c->step_name = xstrdup(q->step_name);
    c->emit_name = xstrdup(q->emit_path ? q->emit_path : "(the rank's step)");
    c->wrap = so->wrap ? xstrdup(so->wrap) : NULL;
    c->r = (shard_request){.step_name = c->step_name,
                           .step_bytes = q->step_bytes,
                           .step_len = q->step_len,
                           .g = q->g,
                           .bindings = q->bindings,
                           .opt = q->opt,
                           .so = *so,
                           .emit_name = c->emit_name};
    c->r.so.wrap = c->wrap;
    c->have = true;
    char why[2048];
    int failed = shard_build(&c->r, &c->o, why, sizeof why);
    c->r.bindings = NULL; /* the caller's: not read after the build */
    if (!failed) return CHANGER_OK;
    roamc_errorf(err, errlen, "%s: %s", c->step_name, why);
    return CHANGER_FAILED;
}

static changer_status shard_changer_plan(void *state, const changer_request *q, char *err,
                                         size_t errlen) {
    shard_changed *c = state;
    (void)q;
    char why[2048];
    if (shard_plan(&c->r, &c->o, why, sizeof why) == 0) return CHANGER_OK;
    roamc_errorf(err, errlen, "%s: %s", c->step_name, why);
    return CHANGER_FAILED;
}

static void shard_changer_view(void *state, changer_view *v) {
    shard_changed *c = state;
    v->main = &c->o.plan;
    v->plan_model = c->emit_name;
    v->step_bytes = c->o.bytes;
    v->step_len = c->o.len;
    v->title = "one rank's step (--shard)";
    v->write_plan = true;
    v->fits = -1;
    v->budget_plan = v->main;
    v->n_steps = 1;
}

static const graph *shard_changer_graph(const void *state, size_t k) {
    const shard_changed *c = state;
    return k == 0 && c->o.have_graph ? &c->o.graph : NULL;
}

static const plan *shard_changer_step_plan(const void *state, size_t k) {
    const shard_changed *c = state;
    return k == 0 && c->o.have_plan ? &c->o.plan : NULL;
}

static void shard_changer_text(FILE *f, const void *state, bool written) {
    (void)written; /* its lines are the same either way */
    const shard_changed *c = state;
    shard_report_text(f, &c->r, &c->o);
}

static void shard_changer_json(struct json_t *obj, const void *state) {
    const shard_changed *c = state;
    shard_report_json(obj, &c->r, &c->o);
}

static void shard_changer_free(void *state) {
    shard_changed *c = state;
    if (c->have) shard_outcome_free(&c->o);
    free(c->step_name);
    free(c->emit_name);
    free(c->wrap);
}

const planner_changer shard_changer = {.name = "shard",
                                       .progress = "sharding %s",
                                       .unit = "the rank's step",
                                       .state_size = sizeof(shard_changed),
                                       .build = shard_changer_build,
                                       .plan = shard_changer_plan,
                                       .view = shard_changer_view,
                                       .step_graph = shard_changer_graph,
                                       .step_plan = shard_changer_step_plan,
                                       .report_text = shard_changer_text,
                                       .report_json = shard_changer_json,
                                       .free = shard_changer_free};
