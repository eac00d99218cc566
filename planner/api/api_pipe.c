/* roamc's pipeline options: parsing and the combinations refused (api_pipe.h). */
#include "api_pipe.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

static int api_pipe_usage(const char *msg) {
    fprintf(stderr, "roamc: %s\nTry 'roamc --help'.\n", msg);
    return -1;
}

/* A decimal count from lo to hi into *out; -1 otherwise. */
static int api_pipe_count(const char *s, long lo, long hi, long *out) {
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

int api_pipe_parse(api_pipe_state *st, int c, const char *arg, char *err, size_t errlen) {
    pipe_options *po = &st->po;
    ROAMC_ASSERT(c >= API_PIPE_OPT_STAGES && c <= API_PIPE_OPT_STAGE);
    const char *why = NULL;
    switch (c) {
    case API_PIPE_OPT_STAGES:
        if (api_pipe_count(arg, 1, PIPE_MAX_STAGES, &po->stages))
            why = "--pipeline-stages is a number of stages from 1 to 1024";
        break;
    case API_PIPE_OPT_MICROBATCHES:
        if (api_pipe_count(arg, 1, PIPE_MAX_MICROBATCHES, &po->microbatches))
            why = "--microbatches is a number from 1 to 1024";
        break;
    case API_PIPE_OPT_SCHEDULE:
        if (!arg || pipe_schedule_parse(arg, &po->schedule)) why = "--schedule is 1f1b or gpipe";
        break;
    case API_PIPE_OPT_CUTS:
        if (!arg || !*arg)
            return roamc_errorf(err, errlen, "%s",
                                "--stage-cuts needs module names (NAME,NAME,...)");
        po->cuts = arg;
        break;
    default:
        if (api_pipe_count(arg, 0, PIPE_MAX_STAGES - 1, &po->stage))
            why = "--stage is a stage from 0 to --pipeline-stages - 1";
    }
    if (why) return roamc_errorf(err, errlen, "%s, not '%s'", why, arg ? arg : "(none)");
    st->given[c - API_PIPE_OPT_STAGES] = true;
    return 0;
}

int api_pipe_option(api_pipe_state *st, int c, const char *arg) {
    char err[512];
    return api_pipe_parse(st, c, arg, err, sizeof err) ? api_pipe_usage(err) : 0;
}

bool api_pipe_on(const api_pipe_state *st) {
    return st->given[0];
}

int api_pipe_refusal(const api_pipe_run *c, char *err, size_t errlen) {
    if (!api_pipe_on(c->state)) {
        for (int k = 1; k < 5; k++)
            if (c->state->given[k])
                return roamc_errorf(err, errlen, "%s",
                                    "--microbatches, --schedule, --stage-cuts and --stage need "
                                    "--pipeline-stages P");
        return 0;
    }
    const char *why = NULL;
    if (c->shard)
        why = "--pipeline-stages with --shard (pipeline and data parallelism together) is not "
              "done: plan one or the other";
    else if (c->max_batch && (c->out_path || c->emit_path))
        why = "--pipeline-stages --max-batch writes no plan or step: plan the micro-batch it "
              "finds with --dim SYMBOL=B --emit-train FILE -o PLAN";
    else if (c->fit || c->compare)
        why = "--pipeline-stages plans each stage's step: not with --fit or --compare (yet)";
    else if (c->out_path && !c->emit_path)
        why = "--pipeline-stages -o needs --emit-train FILE: the plan names the stage's step, "
              "which --emit-train writes";
    if (why) return roamc_errorf(err, errlen, "%s", why);
    return pipe_check(&c->state->po, err, errlen);
}

int api_pipe_check(const api_pipe_run *c) {
    char err[512];
    return api_pipe_refusal(c, err, sizeof err) ? api_pipe_usage(err) : 0;
}
