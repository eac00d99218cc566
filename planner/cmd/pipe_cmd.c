/* roamc's pipeline options and one pipeline run (pipe_cmd.h). */
#include "pipe_cmd.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base.h"

static int pipe_cmd_usage(const char *fmt, const char *arg) {
    fprintf(stderr, "roamc: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'roamc --help'.\n");
    return -1;
}

/* A decimal count from lo to hi into *out; -1 otherwise. */
static int pipe_cmd_count(const char *s, long lo, long hi, long *out) {
    if (!s || *s < '0' || *s > '9') return -1;
    long v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9') return -1;
        v = v * 10 + (*p - '0');
        if (v > hi) return -1;
    }
    if (v < lo) return -1;
    *out = v;
    return 0;
}

int pipe_cmd_option(pipe_cmd_state *st, int c, const char *arg) {
    pipe_options *po = &st->po;
    ROAMC_ASSERT(c >= PIPE_OPT_STAGES && c <= PIPE_OPT_STAGE);
    st->given[c - PIPE_OPT_STAGES] = true;
    switch (c) {
    case PIPE_OPT_STAGES:
        if (pipe_cmd_count(arg, 1, PIPE_MAX_STAGES, &po->stages))
            return pipe_cmd_usage("--pipeline-stages is a number of stages from 1 to 1024, "
                                  "not '%s'",
                                  arg);
        break;
    case PIPE_OPT_MICROBATCHES:
        if (pipe_cmd_count(arg, 1, PIPE_MAX_MICROBATCHES, &po->microbatches))
            return pipe_cmd_usage("--microbatches is a number from 1 to 1024, not '%s'", arg);
        break;
    case PIPE_OPT_SCHEDULE:
        if (pipe_schedule_parse(arg, &po->schedule))
            return pipe_cmd_usage("--schedule is 1f1b or gpipe, not '%s'", arg);
        break;
    case PIPE_OPT_CUTS:
        if (!*arg) return pipe_cmd_usage("%s", "--stage-cuts needs module names (NAME,NAME,...)");
        po->cuts = arg;
        break;
    default:
        if (pipe_cmd_count(arg, 0, PIPE_MAX_STAGES - 1, &po->stage))
            return pipe_cmd_usage("--stage is a stage from 0 to --pipeline-stages - 1, not '%s'",
                                  arg);
    }
    return 0;
}

bool pipe_cmd_on(const pipe_cmd_state *st) {
    return st->given[0];
}

int pipe_cmd_check(const pipe_cmd_run *c) {
    char err[512];
    if (!pipe_cmd_on(c->state)) {
        for (int k = 1; k < 5; k++)
            if (c->state->given[k])
                return pipe_cmd_usage("%s", "--microbatches, --schedule, --stage-cuts and --stage "
                                            "need --pipeline-stages P");
        return 0;
    }
    if (c->shard)
        return pipe_cmd_usage("%s", "--pipeline-stages with --shard (pipeline and data "
                                    "parallelism together) is not done: plan one or the other");
    if (c->max_batch && (c->out_path || c->emit_path))
        return pipe_cmd_usage("%s", "--pipeline-stages --max-batch writes no plan or step: plan "
                                    "the micro-batch it finds with --dim SYMBOL=B --emit-train "
                                    "FILE -o PLAN");
    if (c->fit || c->compare)
        return pipe_cmd_usage("%s", "--pipeline-stages plans each stage's step: not with --fit "
                                    "or --compare (yet)");
    if (c->out_path && !c->emit_path)
        return pipe_cmd_usage("%s", "--pipeline-stages -o needs --emit-train FILE: the plan names "
                                    "the stage's step, which --emit-train writes");
    if (pipe_check(&c->state->po, err, sizeof err)) return pipe_cmd_usage("%s", err);
    return 0;
}

int pipe_cmd_plan(const pipe_cmd_run *c, const fe_options *fopt, const planner_step *step,
                  const char *model_path, planner_files *files, FILE *report) {
    char err[2048];
    const char *emit = c->emit_path;
    pipe_request r = {.step_name = model_path,
                      .step_bytes = step->bytes,
                      .step_len = step->len,
                      .g = &step->g,
                      .bindings = fopt,
                      .opt = c->opt,
                      .po = c->state->po,
                      .emit_name = emit ? emit : "(the stage's step)"};
    pipe_outcome o;
    planner_progress_stage("cutting %s into stages", model_path);
    int bad = pipe_build(&r, &o, err, sizeof err);
    if (bad || pipe_plan(&r, &o, err, sizeof err)) {
        planner_progress_end();
        fprintf(stderr, "roamc: %s\n", err);
        pipe_outcome_free(&o);
        return bad ? 2 : 1; /* the step cannot be cut so: bad input */
    }
    int rc = 0;
    const pipe_stage *st = &o.st[o.chosen];
    files->step = emit;
    files->step_bytes = st->bytes;
    files->step_len = st->len;
    const plan *plans[1] = {&st->plan};
    const char *titles[1] = {"one pipeline stage's step"};
    planner_files_request fr = {.p = &st->plan,
                                .model_path = r.emit_name,
                                .svg_plans = plans,
                                .titles = titles,
                                .n_svg = 1};
    if (planner_files_write(files, &fr, err, sizeof err)) {
        planner_progress_end();
        fprintf(stderr, "roamc: %s\n", err);
        rc = 1;
    }
    /* --budget (per device): the largest stage, and beside it PyTorch's
     * plan of the stage that needs the most under PyTorch (a pipeline fits
     * when every stage does; --max-batch sizes it so too) */
    const planner_budget *budget = c->budget;
    const pipe_stage *big = &o.st[o.largest];
    plan torch = {0};
    const plan *torch_p = &big->plan;
    if (rc == 0 && budget->budget_text) {
        planner_options topt = *c->opt;
        planner_method_apply(planner_method_find("pytorch"), &topt);
        topt.device_limit = budget->budget - budget->reserve;
        topt.progress = 0;
        for (size_t k = 0; k < o.n && rc == 0; k++) {
            plan one;
            if (plan_build(&o.st[k].graph, &topt, &one, err, sizeof err)) {
                fprintf(stderr, "roamc: %s: PyTorch's plan of stage %zu: %s\n", model_path, k, err);
                rc = 1;
            } else if (k == 0 || plan_device_bytes(&one) > plan_device_bytes(&torch)) {
                plan_free(&torch);
                torch = one;
            } else {
                plan_free(&one);
            }
        }
        torch_p = &torch;
    }
    planner_progress_end();
    int fit = 0;
    if (rc == 0 && report) {
        if (c->json) {
            json_t *extra = json_object();
            pipe_report_json(extra, &r, &o);
            if (budget->budget_text)
                fit = planner_budget_report(NULL, budget, &big->plan, torch_p, extra);
            plan_report_json(report, &st->plan, r.emit_name, files, extra);
            json_decref(extra);
        } else {
            plan_report_text(report, &st->plan, r.emit_name, files);
            pipe_report_text(report, &r, &o);
            if (budget->budget_text)
                fit = planner_budget_report(report, budget, &big->plan, torch_p, NULL);
        }
    } else if (rc == 0 && budget->budget_text) {
        fit = planner_budget_report(NULL, budget, &big->plan, torch_p, NULL);
    }
    plan_free(&torch);
    pipe_outcome_free(&o);
    return rc ? rc : fit;
}
