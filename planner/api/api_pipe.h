/* planner/cmd/pipe_cmd.h — roamc's pipeline options (--pipeline-stages,
 * --microbatches, --schedule, --stage-cuts, --stage): parsing and the
 * combinations refused, for the command line and for roamc_options_set
 * (the library's api_plan plans the stages: planner/shard/pipeline.h does
 * the work). */
#ifndef ROAMC_CMD_PIPE_CMD_H
#define ROAMC_CMD_PIPE_CMD_H

#include <stdbool.h>
#include <stdio.h>

#include "budget.h"
#include "files.h"
#include "pipeline.h"
#include "planner.h"

enum {
    PIPE_OPT_STAGES = 800,
    PIPE_OPT_MICROBATCHES,
    PIPE_OPT_SCHEDULE,
    PIPE_OPT_CUTS,
    PIPE_OPT_STAGE
};

#define PIPE_CMD_OPTIONS                                                                           \
    {"pipeline-stages", required_argument, NULL, PIPE_OPT_STAGES},                                 \
        {"microbatches", required_argument, NULL, PIPE_OPT_MICROBATCHES},                          \
        {"schedule", required_argument, NULL, PIPE_OPT_SCHEDULE},                                  \
        {"stage-cuts", required_argument, NULL, PIPE_OPT_CUTS}, {                                  \
        "stage", required_argument, NULL, PIPE_OPT_STAGE                                           \
    }

/* The pipeline options of one command line, owned by the caller (no
 * state lives in this file, so that several runs may parse at once).
 * Start it with PIPE_CMD_STATE_INIT. */
typedef struct pipe_cmd_state {
    pipe_options po;
    bool given[5]; /* per option, PIPE_OPT_STAGES first */
} pipe_cmd_state;

#define PIPE_CMD_STATE_INIT                                                                        \
    {                                                                                              \
        .po = {.stages = 0, .microbatches = 0, .schedule = PIPE_1F1B, .cuts = NULL, .stage = -1 }  \
    }

/* One option (c, its argument; arg is kept, not copied) into st.  0, or -1
 * with a message in err (st unchanged). */
int pipe_cmd_parse(pipe_cmd_state *st, int c, const char *arg, char *err, size_t errlen);
/* pipe_cmd_parse for the command line: 0, or -1 after a message on stderr. */
int pipe_cmd_option(pipe_cmd_state *st, int c, const char *arg);
/* Whether st has --pipeline-stages. */
bool pipe_cmd_on(const pipe_cmd_state *st);

/* What the run asked for besides the pipeline options. */
typedef struct pipe_cmd_run {
    const pipe_cmd_state *state; /* the pipeline options parsed */
    const planner_options *opt;
    const planner_budget *budget;
    const char *emit_path, *out_path;
    bool json, fit, compare, shard, max_batch;
} pipe_cmd_run;

/* The combinations refused: 0, or -1 with a message in err. */
int pipe_cmd_refusal(const pipe_cmd_run *c, char *err, size_t errlen);
/* pipe_cmd_refusal for the command line: 0, or -1 after a usage message on stderr. */
int pipe_cmd_check(const pipe_cmd_run *c);

#endif
