/* planner/report/budget.h — will it fit, and at what batch (--budget, --reserve,
 * --max-batch). */
#ifndef ROAMC_REPORT_BUDGET_H
#define ROAMC_REPORT_BUDGET_H

#include <stdint.h>
#include <stdio.h>

#include "planner.h"

struct json_t;

/* Exit status of a plan that does not fit its --budget (0: it fits). */
#define PLANNER_EXIT_NO_FIT 3
/* --max-batch stops doubling here: 2^20 samples. */
#define PLANNER_MAX_BATCH ((int64_t)1 << 20)

/* Parses a byte count as people write one, with GNU coreutils' suffixes:
 * digits, an optional fraction and a unit, K, M, G, T, P or KiB, MiB, GiB,
 * TiB, PiB (powers of 1024), kB, MB, GB, TB, PB (powers of 1000) or B, in
 * any letter case: "24000000000", "80GB", "16G", "16GiB", "1.5TiB"; a
 * fraction of a byte rounds down ("0.9GiB").  Every size option takes this
 * syntax (--budget, --reserve, --align, roamc layout --capacity/--align).
 * Refuses zero, signs, unknown units and values above 2^63 - 1 (8 EiB;
 * sizes stay JSON integers).  Returns 0, or -1 with a message quoting s. */
int planner_size_parse(const char *s, uint64_t *out, char *err, size_t errlen);

/* A device memory budget: the step fits when what it needs plus reserve
 * is at most budget.  reserve < budget. */
typedef struct planner_budget {
    uint64_t budget;          /* bytes of device memory */
    uint64_t reserve;         /* spent outside the arena: CUDA context, workspaces */
    const char *budget_text;  /* as the user wrote them, echoed in reports */
    const char *reserve_text; /* NULL when not given (0) */
} planner_budget;

/* The verdict of --budget on one plan next to PyTorch's plan of the same
 * step (method pytorch): each fits or not, by how much.  Text lines to f,
 * or (json != NULL) a "budget" member added to json.  Returns 0 when
 * `chosen` fits, PLANNER_EXIT_NO_FIT when it does not. */
int planner_budget_report(FILE *f, const planner_budget *b, const plan *chosen, const plan *pytorch,
                          struct json_t *json);

/* --max-batch: what to search. */
typedef struct planner_batch_query {
    const char *model_path;
    const fe_options *bindings; /* the user's --input-shape/--dim; must leave the batch unbound */
    const char *symbol;         /* the batch dim, or NULL: the one input symbol left unbound */
    /* plan the training step derived from the model (--train), or NULL */
    const fe_train_options *train;
    planner_options opt; /* the plan to size against PyTorch's (method pytorch) */
    const planner_budget *budget;
    const char *out_path; /* write the plan at the largest batch that fits, or NULL */
    /* --fit: write the step planned at that batch (changed, or as it is
     * where it fits) to this file, which the plan then names; or NULL */
    const char *emit_path;
    const char *svg_path; /* draw need against batch, or NULL */
    int json;             /* the table as one JSON object */
    int quiet;            /* -q: text gives the answer alone (the largest batches), no table */
    int progress;         /* a line per batch on stderr */
    /* --fit: where the chosen plan does not fit a batch, the cheapest
     * changed step (fit_run) does, when within max_overhead (fit: enum
     * fit_mode bits, 0: no --fit) */
    unsigned fit;
    double max_overhead;
    const struct fit_device *device;
    /* --shard: size one rank's step (shard_build) at each batch, the batch
     * being the micro-batch per device and the budget per device; NULL:
     * the step as it is */
    const struct shard_options *shard;
    /* --pipeline-stages: cut the step into stages (pipe_build) at each
     * batch, the batch being the micro-batch and the budget per device:
     * a batch fits when every stage fits; NULL: no pipeline (not with
     * shard) */
    const struct pipe_options *pipe;
    /* out, or NULL: the largest batch that fits, [0] of the chosen plan,
     * [1] of PyTorch's (0: not even batch 1), as the report gives them */
    int64_t *found;
} planner_batch_query;

/* Finds, for PyTorch's plan and for the chosen one, the largest batch that
 * fits the budget (doubling, then bisection; both plans at every batch
 * tried) and prints the table of every batch tried to out (NULL: quiet).
 * Returns the exit status: 0 when the chosen plan fits batch 1 at least,
 * PLANNER_EXIT_NO_FIT when it does not, 2 when the model has no batch
 * symbol to search or a binding is wrong, 1 on another failure (message in
 * err for 1 and 2). */
int planner_max_batch(const planner_batch_query *q, FILE *out, char *err, size_t errlen);

#endif
