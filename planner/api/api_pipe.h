/* planner/api/api_pipe.h — roamc's pipeline options (--pipeline-stages,
 * --microbatches, --schedule, --stage-cuts, --stage): parsing and the
 * combinations refused, for the command line and for roamc_options_set
 * (the library's api_plan plans the stages: planner/shard/pipeline.h does
 * the work). */
#ifndef ROAMC_API_PIPE_H
#define ROAMC_API_PIPE_H

#include <stdbool.h>
#include <stdio.h>

#include "budget.h"
#include "files.h"
#include "pipeline.h"
#include "planner.h"

enum {
    API_PIPE_OPT_STAGES = 800,
    API_PIPE_OPT_MICROBATCHES,
    API_PIPE_OPT_SCHEDULE,
    API_PIPE_OPT_CUTS,
    API_PIPE_OPT_STAGE
};

#define API_PIPE_OPTIONS                                                                           \
    {"pipeline-stages", required_argument, NULL, API_PIPE_OPT_STAGES},                             \
        {"microbatches", required_argument, NULL, API_PIPE_OPT_MICROBATCHES},                      \
        {"schedule", required_argument, NULL, API_PIPE_OPT_SCHEDULE},                              \
        {"stage-cuts", required_argument, NULL, API_PIPE_OPT_CUTS}, {                              \
        "stage", required_argument, NULL, API_PIPE_OPT_STAGE                                       \
    }

/* The pipeline options of one command line, owned by the caller (no
 * state lives in this file, so that several runs may parse at once).
 * Start it with API_PIPE_STATE_INIT. */
typedef struct api_pipe_state {
    pipe_options po;
    bool given[5]; /* per option, API_PIPE_OPT_STAGES first */
} api_pipe_state;

#define API_PIPE_STATE_INIT                                                                        \
    {                                                                                              \
        .po = {.stages = 0, .microbatches = 0, .schedule = PIPE_1F1B, .cuts = NULL, .stage = -1 }  \
    }

/* One option (c, its argument; arg is kept, not copied) into st.  0, or -1
 * with a message in err (st unchanged). */
int api_pipe_parse(api_pipe_state *st, int c, const char *arg, char *err, size_t errlen);
/* api_pipe_parse for the command line: 0, or -1 after a message on stderr. */
int api_pipe_option(api_pipe_state *st, int c, const char *arg);
/* Whether st has --pipeline-stages. */
bool api_pipe_on(const api_pipe_state *st);

/* What the run asked for besides the pipeline options. */
typedef struct api_pipe_run {
    const api_pipe_state *state; /* the pipeline options parsed */
    const planner_options *opt;
    const planner_budget *budget;
    const char *emit_path, *out_path;
    bool json, fit, compare, shard, max_batch;
} api_pipe_run;

/* The combinations refused: 0, or -1 with a message in err. */
int api_pipe_refusal(const api_pipe_run *c, char *err, size_t errlen);
/* api_pipe_refusal for the command line: 0, or -1 after a usage message on stderr. */
int api_pipe_check(const api_pipe_run *c);

#endif
