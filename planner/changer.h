/* planner/changer.h — the one door for step changers.
 *
 * A step changer writes another training step from the one loaded (--fit:
 * the step that fits; --shard: one rank's step; --pipeline-stages: every
 * stage's step), loads and plans it with the normal pipeline, and reports
 * what it did.  Each is one row of planner_changer, implemented in its own
 * file (fit/fit_changer.c, shard/shard_changer.c, shard/pipe_changer.c);
 * the library dispatches through the table of them (planner/api/
 * api_changers.c, api_changer_find), so a new changer is a new file with
 * one planner_changer and a row of that table.
 *
 * The contract, in the order the library calls it:
 *
 *   state   the library allocates state_size zeroed bytes per run and hands
 *           them to every function; the changer keeps there everything it
 *           needs later (its request, copies of strings and options whose
 *           owners may go away).
 *   build   (may be NULL) writes, loads and builds the changed step(s),
 *           without planning them.  q's step (step_bytes, g) and opt
 *           must outlive the state; the rest is read while build runs.
 *           A changer whose change depends on a plan of the step (fit)
 *           has no build: its plan does everything.
 *   plan    plans what build made (the same q), or without build runs the
 *           whole change from q.
 *           After CHANGER_OK or CHANGER_NO_FIT, view answers.
 *   view    the figures every caller reads the same way (changer_view);
 *           step_graph and step_plan, each changed step's graph and plan.
 *   report_text, report_json
 *           the changer's lines after the plan's report (written: whether
 *           the run wrote the plan or the changed step, which the lines may
 *           say), and its member of a JSON report (the object given),
 *           after plan.
 *   warning (may be NULL) whether the answer deserves a warning on stderr
 *           even where nobody reads the report (--fit: a change that costs
 *           more than the step itself): 1 with the text in buf, else 0.
 *   free    frees what the state holds (not the state itself), after any
 *           return of build or plan, or none.
 *
 * build and plan return a changer_status; on anything but CHANGER_OK the
 * message in err is whole (it names the step), as the library reports it.
 * Plans stay byte-identical across the door: a changer plans with q->opt
 * as given, so the same step and options give the same plans. */
#ifndef ROAMC_CHANGER_H
#define ROAMC_CHANGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "planner.h"

struct json_t;

typedef enum changer_status {
    CHANGER_OK = 0,
    CHANGER_REFUSED, /* the step cannot be changed as asked: bad input */
    CHANGER_FAILED,  /* anything else */
    CHANGER_NO_FIT   /* planned, but no changed step fits the budget (view answers) */
} changer_status;

/* What a changer is given: the step loaded and how to plan. */
typedef struct changer_request {
    const char *step_name;     /* the step, in messages */
    const uint8_t *step_bytes; /* its ONNX bytes */
    size_t step_len;
    const graph *g;             /* its graph, loaded from step_bytes under bindings */
    const fe_options *bindings; /* to load the changed step the same way */
    const planner_options *opt; /* how the changed step is planned; outlives the state */
    const char *emit_path;      /* --emit-train: where the changed step goes, or NULL */
    const void *setup;          /* the changer's own options (fit_setup, shard_options, ...) */
} changer_request;

/* The figures of a planned change. */
typedef struct changer_view {
    plan *main;                /* the plan to report and write */
    const char *plan_model;    /* what that plan names (its "model") */
    const uint8_t *step_bytes; /* the changed step --emit-train writes */
    size_t step_len;
    const char *title; /* main's title in the picture */
    bool write_plan;   /* main may be written */
    /* -1: --budget judges the change (budget_plan and PyTorch's plan of
     * every graph beside it); 0 or 1: the changer judged it itself */
    int fits;
    const plan *budget_plan; /* the plan --budget's verdict is of */
    size_t n_steps;          /* the changed steps: step_graph and step_plan 0..n_steps-1 */
} changer_view;

typedef struct planner_changer {
    const char *name;     /* "fit", "shard", "pipeline": how the library finds it */
    const char *progress; /* the progress stage: a format with one %s, the step's name */
    /* what changed step k is, in messages: a format with at most one %zu
     * (k): "the rank's step", "stage %zu" */
    const char *unit;
    size_t state_size;
    changer_status (*build)(void *state, const changer_request *q, char *err, size_t errlen);
    changer_status (*plan)(void *state, const changer_request *q, char *err, size_t errlen);
    void (*view)(void *state, changer_view *v);
    const graph *(*step_graph)(const void *state, size_t k);
    const plan *(*step_plan)(const void *state, size_t k); /* NULL before plan */
    void (*report_text)(FILE *f, const void *state, bool written);
    void (*report_json)(struct json_t *obj, const void *state);
    int (*warning)(const void *state, char *buf, size_t len);
    void (*free)(void *state);
} planner_changer;

#endif
