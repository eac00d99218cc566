/* planner/api/api_internal.h — what is behind roamc.h's handles, for the
 * library's own files and for the `roamc` command (planner/cmd/), which is
 * a client of the same code: it fills an api_request from its command
 * line, runs api_load and api_plan, and prints and writes from the result.
 * Not installed. */
#ifndef ROAMC_API_INTERNAL_H
#define ROAMC_API_INTERNAL_H

#include <stdbool.h>
#include <stdio.h>

#include "budget.h"
#include "changer.h"
#include "compare.h"
#include "files.h"
#include "fit.h"
#include "layout.h"
#include "planner.h"
#include "roamc.h"
#include "pipeline.h"
#include "shard.h"
#include "streams.h"

/* One planning run: the model and every option, resolved. */
typedef struct api_request {
    const char *model_path; /* names the model: messages and the plan's "model" */
    const uint8_t *bytes;   /* the model in memory (len bytes), or NULL: read model_path */
    size_t len;
    const fe_options *bindings;     /* --input-shape/--dim, or NULL */
    const fe_train_options *train;  /* --train, or NULL */
    const char *emit_path;          /* --emit-train (with --train, --fit or --shard), or NULL */
    planner_options opt;            /* deadline set by the caller */
    planner_budget budget;          /* budget_text NULL: no budget */
    unsigned fit;                   /* enum fit_mode bits, 0: no --fit */
    double max_overhead;            /* --fit: < 0 none */
    const fit_device *device;       /* --fit: the profile */
    const shard_options *shard;     /* --shard, or NULL */
    const pipe_options *pipeline;   /* --pipeline-stages: plan every stage (API_PIPE), or NULL */
    bool compare;                   /* --compare: plan every method (API_COMPARE) */
    bool summary;                   /* keep --train's description for the report */
    const streams_options *streams; /* --streams (device: the request's), or NULL */
} api_request;

/* What a run made.  The plan the result describes is `main`. */
struct roamc_result {
    roamc_status status;
    char error[2048];
    planner_options opt;     /* the request's, which fit_request and shard_request point at */
    streams_options streams; /* --streams: the pass's options, held as long as its plans */
    planner_pass streams_pass;
    planner_budget budget;
    char *model_path; /* the name the run was given */
    char *plan_model; /* what the plan names (the --emit-train path, else model_path) */
    char *emit;       /* --emit-train, or NULL */
    planner_step step;
    bool have_step;
    enum { API_PLAIN, API_CHANGED, API_COMPARE } mode;
    plan p; /* API_PLAIN */
    bool have_p;
    plan torch; /* --budget: PyTorch's plan of the same step */
    bool have_torch;
    /* API_CHANGED: the step changer that ran (changer.h), its state, and
     * its figures (view, after its plan); judged: it judged the budget
     * itself and its message of a change that does not fit is in error */
    const planner_changer *changer;
    void *changed;
    changer_view view;
    bool judged;
    plan_comparison cmp; /* API_COMPARE: main is its ROAM row's plan */
    bool have_cmp;
    plan *main; /* the plan to report and write, or NULL */
    const plan
        *budget_p; /* --budget: the plan the verdict is of (main; API_PIPE: the largest stage) */
    const plan *torch_p; /* --budget: PyTorch's plan beside it */
    int64_t batch[2];    /* --max-batch: the largest batch of the chosen plan, of PyTorch's */
    bool have_batch;
    char *batch_json; /* --max-batch through roamc_plan_file: the JSON report */
    bool write_plan;  /* main may be written (--fit: only when the step fits) */
    int fits;         /* 1, 0, or -1 without a budget */
    /* the accessors' arrays, made on first use */
    uint64_t *sizes;
    uint8_t *persistent;
};

/* The step changer q asks for (--fit, --shard, --pipeline-stages; NULL:
 * none), found in the one table of changers (api_changers.c), with the
 * setup it takes (pointing into q, or into *fit for --fit). */
typedef struct api_change {
    const planner_changer *changer;
    const void *setup;
    fit_setup fit;
} api_change;
void api_change_of(const api_request *q, api_change *c);
/* The changer of that name in the table ("fit", "shard", "pipeline"), or NULL. */
const planner_changer *api_changer_find(const char *name);

/* An empty result (status ROAMC_OK, nothing made); free with roamc_result_free. */
roamc_result *api_result_new(void);
/* Sets r's status and message ("fmt" as printf); returns status. */
roamc_status api_fail(roamc_result *r, roamc_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Loads (or derives with --train) the model of q into r->step.  Returns
 * ROAMC_OK, or ROAMC_BAD_INPUT with a message; r->step.summary is set
 * when the model loaded, even when the graph build failed. */
roamc_status api_load(const api_request *q, roamc_result *r);
/* Plans r->step as q says (one plan, --fit, --shard, every stage of
 * --pipeline-stages, or every method of --compare; with --budget,
 * PyTorch's plan beside it and the verdict in r->fits).  Returns ROAMC_OK, ROAMC_NO_FIT (over --budget;
 * --fit: no changed step fits, or not within --max-overhead; r->main is
 * then the unchanged step's plan), ROAMC_BAD_INPUT (the step cannot be cut
 * into stages as asked) or ROAMC_ERROR with a message. */
roamc_status api_plan(const api_request *q, roamc_result *r);
/* --max-batch: the search (planner/report/budget.h) and where its report goes. */
typedef struct api_batch_run {
    planner_batch_query q; /* q.found is set by api_max_batch */
    FILE *report;          /* the table (q.json: one JSON object), or NULL */
} api_batch_run;
/* Searches the largest batch that fits (planner_max_batch), the answer in
 * r->batch (r has no plan: r->main stays NULL).  Returns ROAMC_OK (the
 * chosen plan fits batch 1 at least), ROAMC_NO_FIT (not even batch 1),
 * ROAMC_BAD_INPUT (no batch symbol to search, a bad binding) or
 * ROAMC_ERROR, with a message. */
roamc_status api_max_batch(const api_batch_run *b, roamc_result *r);
/* Writes r->main to files->plan (and the tree, buffers, picture and, with
 * --fit or --shard, the step) all or nothing.  0, or -1 with a message. */
int api_files_write(const roamc_result *r, planner_files *files, char *err, size_t errlen);
/* The report of r to f: text, or (json) one JSON object; files names the
 * files written (or none). */
void api_report(FILE *f, const roamc_result *r, const planner_files *files, int json);

/* A buffer problem (roamc_layout_*).  The command (`roamc layout`) fills
 * it from its CSV, sets the fields marked "command" and reads the report's
 * figures from it after roamc_layout_solve. */
struct roamc_layout {
    size_t n, cap;
    uint64_t *size, *align; /* as given */
    int32_t *first, *last;  /* closed lifetimes; first -1: none */
    uint8_t *pinned;
    uint64_t *pin;
    size_t n_edges, cap_edges;
    size_t *edges; /* pairs a, b */
    uint64_t capacity;
    bool has_capacity;
    double time_limit; /* seconds */
    uint64_t work;     /* 0: none */
    const char *method;
    /* command: dev engines and pruning rules (0 / NULL: the defaults), and
     * when --time-limit started counting (0: at roamc_layout_solve) */
    int engines;
    const layout_bnb_rules *rules;
    double t_start;
    /* the answer */
    uint64_t *offsets;
    uint64_t height, live_bound, proven;
    roamc_layout_stop stop;
    bool interval_engine; /* `roamc layout`'s engine ran (else the general first-fit search) */
    /* the engine's figures, for the command's report */
    const char *detail; /* roam: "improved on" or "no better than" the heuristic */
    const char *winner; /* roam: the best heuristic */
    uint64_t h0;
    bool timed_out, too_short, have_solve;
    layout_solve_result sr;
    layout_pytorch_stats pt;
    size_t bad_a, bad_b; /* an invalid layout's pair (an internal error) */
    char error[1024];
};

#endif
