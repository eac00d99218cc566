/* --pipeline-stages as a step changer (changer.h): every stage's step,
 * cut, built and planned behind the door. */
#include <stdlib.h>

#include "base.h"
#include "pipeline.h"

typedef struct pipe_changed {
    char *step_name, *emit_name, *cuts; /* copies the request points at */
    pipe_request r;
    pipe_outcome o;
    bool have;
} pipe_changed;

static changer_status pipe_changer_build(void *state, const changer_request *q, char *err,
                                         size_t errlen) {
    pipe_changed *c = state;
    const pipe_options *po = q->setup;
    c->step_name = xstrdup(q->step_name);
    c->emit_name = xstrdup(q->emit_path ? q->emit_path : "(the stage's step)");
    c->cuts = po->cuts ? xstrdup(po->cuts) : NULL;
    c->r = (pipe_request){.step_name = c->step_name,
                          .step_bytes = q->step_bytes,
                          .step_len = q->step_len,
                          .g = q->g,
                          .bindings = q->bindings,
                          .opt = q->opt,
                          .po = *po,
                          .emit_name = c->emit_name};
    c->r.po.cuts = c->cuts;
    c->have = true;
    int bad = pipe_build(&c->r, &c->o, err, errlen); /* its messages name the step */
    c->r.bindings = NULL;                            /* the caller's: not read after the build */
    return bad ? CHANGER_REFUSED : CHANGER_OK;
}

static changer_status pipe_changer_plan(void *state, const changer_request *q, char *err,
                                        size_t errlen) {
    pipe_changed *c = state;
    (void)q;
    return pipe_plan(&c->r, &c->o, err, errlen) ? CHANGER_FAILED : CHANGER_OK;
}

static void pipe_changer_view(void *state, changer_view *v) {
    pipe_changed *c = state;
    pipe_stage *st = &c->o.st[c->o.chosen];
    v->main = &st->plan;
    v->plan_model = c->emit_name;
    v->step_bytes = st->bytes;
    v->step_len = st->len;
    v->title = "one pipeline stage's step";
    v->write_plan = true;
    v->fits = -1; /* a pipeline fits when every stage does: the largest decides */
    v->budget_plan = &c->o.st[c->o.largest].plan;
    v->n_steps = c->o.n;
}

static const graph *pipe_changer_graph(const void *state, size_t k) {
    const pipe_changed *c = state;
    return k < c->o.n && c->o.st[k].have_graph ? &c->o.st[k].graph : NULL;
}

static const plan *pipe_changer_step_plan(const void *state, size_t k) {
    const pipe_changed *c = state;
    return k < c->o.n && c->o.st[k].have_plan ? &c->o.st[k].plan : NULL;
}

static void pipe_changer_text(FILE *f, const void *state, bool written) {
    const pipe_changed *c = state;
    pipe_report_text(f, &c->r, &c->o, written);
}

static void pipe_changer_json(struct json_t *obj, const void *state) {
    const pipe_changed *c = state;
    pipe_report_json(obj, &c->r, &c->o);
}

static void pipe_changer_free(void *state) {
    pipe_changed *c = state;
    if (c->have) pipe_outcome_free(&c->o);
    free(c->step_name);
    free(c->emit_name);
    free(c->cuts);
}

const planner_changer pipe_changer = {.name = "pipeline",
                                      .progress = "cutting %s into stages",
                                      .unit = "stage %zu",
                                      .state_size = sizeof(pipe_changed),
                                      .build = pipe_changer_build,
                                      .plan = pipe_changer_plan,
                                      .view = pipe_changer_view,
                                      .step_graph = pipe_changer_graph,
                                      .step_plan = pipe_changer_step_plan,
                                      .report_text = pipe_changer_text,
                                      .report_json = pipe_changer_json,
                                      .free = pipe_changer_free};
