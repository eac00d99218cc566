/* planner/fit/ — a step that fits its budget (--fit; FIT.md): device
 * profiles and the seconds an operator takes on one (fit_device.c), which
 * values to recompute or offload (fit_choose.c), the changed step
 * (fit_emit.c) and the driver with its report (fit_run.c).  Conventions:
 * shared/DESIGN.md "A step that fits", "Cost".
 *
 * An operator's seconds on a device: max(FLOPs / peak rate, bytes / memory
 * bandwidth), the rate picked by the op's element type (fit_op_rate); a
 * copy to or from the host: bytes / host-link bandwidth, on a stream of its
 * own.  FLOPs and bytes come from graph_op_cost_of (graph/graph.h, rules in
 * graph/COST.md).  Peak rates are dense (no 2:4 sparsity) vendor figures, so
 * estimates are lower bounds of what kernels reach.
 *
 * Built-in profiles (fit_device_find, case-insensitive; planner/fit/DEVICES.md
 * has every figure and its source):
 *   h100   NVIDIA H100 SXM5 80GB   (aliases h100-sxm, h100-sxm5, h100-80gb)
 *   a100   NVIDIA A100 SXM4 80GB   (a100-sxm, a100-80gb, a100-sxm4)
 *   l4     NVIDIA L4 24GB          (nvidia-l4)
 *   4090   NVIDIA GeForce RTX 4090 (rtx4090, rtx-4090, geforce-rtx-4090)
 *   gh200  NVIDIA GH200 96GB       (grace-hopper, gh200-96gb): NVLink-C2C to host
 *
 * Profile file (--device-profile FILE.json), one JSON object; every figure
 * is {"value": positive number, "source": "where it comes from"}:
 *   {
 *     "name": "My GPU",                                   required, 1-95 bytes
 *     "fp32_tflops":    {"value": 67,    "source": "..."}, fp32 on CUDA cores
 *     "tf32_tflops":    {"value": 494.5, "source": "..."}, tensor cores, dense
 *     "bf16_tflops":    {"value": 989.5, "source": "..."}, tensor cores, dense,
 *     "fp16_tflops":    {"value": 989.5, "source": "..."},   fp32 accumulate
 *     "fp64_tflops":    {"value": 34,    "source": "..."}, fp64 on CUDA cores
 *     "memory_gbps":    {"value": 3350,  "source": "..."}, device memory, GB/s
 *     "host_link_gbps": {"value": 50,    "source": "..."}, one direction, effective
 *     "memory_gib":     {"value": 80,    "source": "..."}, device memory size
 *     "tf32_matmul": false,   optional (default false): fp32 matmuls on TF32
 *     "tf32_conv": true       optional (default true): fp32 convolutions on TF32
 *   }
 * (TFLOP/s are 10^12 FLOP/s, GB/s 10^9 B/s, GiB 2^30 B.)  Every field is
 * required unless marked optional; an unknown field is an error (a typo
 * would otherwise fall back silently); a source is 1-255 bytes.  The two
 * flags are PyTorch's defaults: torch.backends.cuda.matmul.allow_tf32 is
 * False since 1.12, torch.backends.cudnn.allow_tf32 True. */
#ifndef ROAMC_FIT_H
#define ROAMC_FIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "graph.h"
#include "ilp_fit.h"
#include "changer.h"
#include "planner.h"

enum fit_figure {
    FIT_FP32,      /* FLOP/s */
    FIT_TF32,      /* FLOP/s */
    FIT_BF16,      /* FLOP/s */
    FIT_FP16,      /* FLOP/s */
    FIT_FP64,      /* FLOP/s */
    FIT_MEMORY_BW, /* bytes/s */
    FIT_HOST_BW,   /* bytes/s, one direction */
    FIT_MEMORY,    /* bytes */
    FIT_N_FIGURES
};

typedef struct fit_device {
    char key[16];  /* the name fit_device_find takes ("h100"); "" for a loaded file */
    char name[96]; /* "NVIDIA H100 SXM5 80GB" */
    double figure[FIT_N_FIGURES]; /* in SI units (above), each > 0 */
    char source[FIT_N_FIGURES][256];
    bool tf32_matmul, tf32_conv;
} fit_device;

/* The JSON field of a figure ("fp32_tflops"); NULL outside the enum. */
const char *fit_figure_field(int figure);

/* Built-in profiles: fit_device_count() of them, fit_device_builtin(i) for
 * i below it (NULL beyond).  Static storage: never freed. */
size_t fit_device_count(void);
const fit_device *fit_device_builtin(size_t i);

/* The built-in profile whose key or alias is name, ignoring case (the
 * aliases are listed at the top of this file); NULL when none is. */
const fit_device *fit_device_find(const char *name);

/* Loads the profile file path into *d (see the format above).  Returns 0,
 * or -1 with "PATH: what" in err: unreadable, not JSON (jansson's message,
 * line and column), not an object, a missing or unknown field, a figure
 * that is not {"value": positive finite number, "source": string} (the
 * field named, e.g. "field 'memory_gbps.value': must be a number above 0,
 * got -3"), a name or source empty or too long.  *d is unspecified on
 * error. */
int fit_device_load(const char *path, fit_device *d, char *err, size_t errlen);

/* One line per built-in profile (key, name, peak fp32/tf32/bf16 TFLOP/s,
 * memory GB/s, host link GB/s, memory GiB): for `roamc devices` or --help. */
void fit_device_list(FILE *f);

/* Every figure of d with its source, one per line, each indented by indent. */
void fit_device_print(FILE *f, const fit_device *d, const char *indent);

/* The FLOP/s an op of cost c runs at on d: tensor ops (matmul, conv) by
 * element type: bf16 and fp16 at their tensor rates, fp8 at the bf16 rate,
 * fp32 at tf32 when d's flag for that op kind says so, else at fp32; fp64 at
 * fp64; every other op at the fp64 rate when it is fp64, else at fp32. */
double fit_op_rate(const fit_device *d, const graph_op_cost *c);

/* Seconds of one op on d: max(flops / fit_op_rate, bytes / memory
 * bandwidth); 0 for a view or an allocation; a host copy (ai.roamc
 * Offload / Reload) takes no compute-stream time here: see
 * fit_copy_seconds. */
double fit_op_seconds(const fit_device *d, const graph_op_cost *c);

/* Seconds to copy bytes over d's host link (one direction). */
double fit_copy_seconds(const fit_device *d, uint64_t bytes);

/* A step's totals on a device. */
typedef struct fit_step_cost {
    double flops;            /* summed over ops */
    uint64_t bytes;          /* summed over ops (host copies left out) */
    double compute_s;        /* sum of fit_op_seconds: ops one after another */
    double copy_s;           /* sum of the host copies' fit_copy_seconds */
    uint64_t copy_bytes;     /* bytes copied over the host link */
    size_t n_ops, n_default; /* ops; those no rule knew (GRAPH_COST_DEFAULT) */
    /* ops that run a kernel on the compute stream (all but views, allocations
     * and host copies): what a per-launch overhead would multiply.  Eager
     * PyTorch spends ~14-17 us of host time per op (DEVICES.md), which no
     * figure here counts. */
    size_t n_kernels;
    size_t n_rule[GRAPH_COST_N_RULES]; /* ops per rule */
    double rule_s[GRAPH_COST_N_RULES]; /* compute seconds per rule */
} fit_step_cost;

/* Totals of costs[0 .. n) on d into *out. */
void fit_step_sum(const fit_device *d, const graph_op_cost *costs, size_t n, fit_step_cost *out);

/* fit_step_sum over every op of g (computes the costs itself). */
void fit_step_estimate(const fit_device *d, const graph *g, fit_step_cost *out);

/* ------------------------------------------------ the choice (fit_choose.c) */

/* What may be done to a value the backward pass reads. */
enum fit_mode { FIT_RECOMPUTE = 1, FIT_OFFLOAD = 2, FIT_BOTH = 3 };

/* The unchanged step, planned, and what each op and copy costs. */
typedef struct fit_problem {
    const graph *g;
    const int *order;           /* its schedule: n_ops op indices */
    const int32_t *start, *end; /* its storages' closed lifetimes under order */
    const double *op_seconds;   /* per op: seconds on the device (fit_op_seconds) */
    const double *op_flops;     /* per op: FLOPs (graph_op_cost_of) */
    double link_bytes_per_s;    /* the host link, one direction; 0: no offload */
    unsigned mode;              /* enum fit_mode bits */
    size_t max_closure_ops;     /* most forward ops one recompute may clone */
} fit_problem;

/* One storage dropped from the gap between its last forward and first
 * backward touch, by recomputing it or by a host round trip. */
typedef struct fit_action {
    int storage;
    int kind;             /* FIT_RECOMPUTE or FIT_OFFLOAD */
    double seconds;       /* estimated seconds added (copies: the part not hidden) */
    double flops;         /* recompute: FLOPs of the cloned ops */
    uint64_t temp_bytes;  /* recompute: bytes the clones make besides the storage */
    uint64_t moved_bytes; /* offload: bytes over the host link, both ways */
    int tensor;           /* offload: the tensor copied out and back */
    int at;               /* the clones / the Reload run before the op at this step */
    int *ops;             /* recompute: forward ops to clone, in schedule order */
    size_t n_ops;
} fit_action;

/* The greedy sequence of actions: peaks[k] is the estimated theoretical
 * peak (the schedule's live bytes) after the first k actions, so that any
 * budget takes the shortest prefix that meets it; the sequence does not
 * depend on the budget, so a lower budget never takes less time. */
typedef struct fit_choice {
    fit_action *actions;
    size_t n_actions;
    uint64_t *peaks; /* n_actions + 1 */
    size_t n_candidates;
    int loss_op;   /* -1: no loss found, nothing was chosen */
    bool *forward; /* per op: in the forward pass (the loss and its ancestors) */
} fit_choice;

/* Runs the greedy to its end: until the peak step has no candidate left.
 * Free with fit_choice_free. */
void fit_choose(const fit_problem *P, fit_choice *c);
void fit_choice_free(fit_choice *c);

/* The exact choice: the MILP of ilp/ilp_fit.h (keep, recompute or offload
 * each candidate; every row of the live curve at most target; a recompute
 * that reads a value dropped too pays for recomputing it) on P's plan,
 * solved by GLPK within the work budget.  Each choice is priced with
 * nothing else dropped and a chain one level deep: it is the optimum of
 * that model, which the changed step's own plan then measures.  c gets the
 * chosen drops as actions (deepest first; peaks as fit_choose's); x says
 * how the MILP ended. */
typedef struct fit_exact_budget {
    uint64_t work;   /* work units (ilp_fit.h), decreased by what is spent */
    double deadline; /* roamc_now() seconds: a backstop */
} fit_exact_budget;
typedef struct fit_exact {
    int status;              /* enum ilp_fit_status */
    double objective, bound; /* seconds: the solution's, a lower bound of the optimum */
    long nodes;
    bool timed_out;
    size_t n_choices, n_chains, n_rows;
} fit_exact;
void fit_choose_exact(const fit_problem *P, uint64_t target, fit_exact_budget *b, fit_choice *c,
                      fit_exact *x);

/* ------------------------------------------------ the changed step (fit_emit.c) */

/* The first n_actions of choice, written into the unchanged step. */
typedef struct fit_emit_request {
    const graph *g;           /* the unchanged step's graph, loaded from step_bytes */
    const fit_choice *choice; /* made on g */
    size_t n_actions;         /* <= choice->n_actions */
    const char *step_name;    /* names the step in messages */
    const uint8_t *step_bytes;
    size_t step_len;
} fit_emit_request;

/* The changed step as ONNX bytes into *bytes (malloc'd, *len; the caller
 * frees): recompute clones with attribute roamc_recompute, ai.roamc
 * Offload/Reload pairs, backward readers rewired (fit_emit.c says where
 * each goes).  Returns 0, or -1 with the editor's message. */
int fit_emit(const fit_emit_request *r, uint8_t **bytes, size_t *len, char *err, size_t errlen);

/* ------------------------------------------------ --fit (fit_run.c) */

/* What --fit is asked: the unchanged step and what the changed one may take. */
typedef struct fit_request {
    const char *step_name;     /* the unchanged step, in messages */
    const uint8_t *step_bytes; /* its ONNX bytes (the file's, or --train's derived step) */
    size_t step_len;
    const graph *g;             /* its graph, loaded from step_bytes under bindings */
    const fe_options *bindings; /* to load the changed step the same way */
    const planner_options *opt; /* how both steps are planned */
    uint64_t arena_budget;      /* the changed step's arena (actual peak) must be at most this */
    unsigned mode;              /* enum fit_mode bits */
    double max_overhead;        /* most added seconds, as a fraction of the step's; < 0: no cap */
    const fit_device *device;
    const char *emit_name; /* names the changed step: the plan's "model" */
} fit_request;

enum fit_status {
    FIT_ALREADY,  /* the unchanged step fits: nothing changed */
    FIT_FITTED,   /* the changed step's plan fits */
    FIT_CANNOT,   /* no changed step found fits: least is the lowest arena reached */
    FIT_TOO_SLOW, /* it fits only adding more than max_overhead (over_cap_seconds > 0:
                   * the search stopped where even the recomputes passed it) */
};

/* A changed step: its bytes, model, graph and validated plan (stage says
 * how far it got: 1 model, 2 graph, 3 plan).  On the heap: its graph
 * points at its model and its plan at its graph. */
typedef struct fit_step {
    uint8_t *bytes;
    size_t len;
    fe_model model;
    graph graph;
    plan plan;
    int stage;
} fit_step;
void fit_step_free(fit_step *st);

typedef struct fit_outcome {
    int status;  /* enum fit_status */
    plan before; /* the unchanged step's plan */
    bool have_before;
    fit_step *changed;  /* status other than FIT_ALREADY: the changed step */
    const char *method; /* what chose it: "greedy" or "MILP" */
    size_t n_actions, n_candidates, n_recomputed, n_offloaded, n_cloned_ops;
    uint64_t bytes_recomputed, bytes_offloaded;
    uint64_t host_bytes;  /* host memory the offloaded values take */
    uint64_t link_bytes;  /* bytes over the host link, both ways */
    uint64_t added_bytes; /* memory traffic the change adds: clones' bytes and the copies */
    double added_flops;   /* the clones' FLOPs */
    double step_seconds;  /* the unchanged step on the device */
    double added_seconds; /* what the changed step takes more (fit_simulate) */
    double recompute_seconds, copy_seconds, copy_exposed_seconds;
    uint64_t least;          /* FIT_CANNOT: the lowest arena a changed step reached */
    double over_cap_seconds; /* FIT_TOO_SLOW, stopped early: what the next change adds at least */
    size_t plans;            /* changed steps planned */
    /* the MILP, when the step was small enough to try it: how it ended, and
     * the added seconds of its step planned (-1: it did not fit) */
    bool exact_tried;
    fit_exact exact;
    double exact_seconds;
} fit_outcome;

/* Runs --fit (the steps are in fit_run.c).  Returns 0 with o filled (free
 * it with fit_outcome_free whatever the status), or -1 with a message: a
 * plan failed, the changed step could not be written or loaded, or the
 * graph has no loss to tell its passes apart. */
int fit_run(const fit_request *r, fit_outcome *o, char *err, size_t errlen);
void fit_outcome_free(fit_outcome *o);
/* "fits unchanged", "fits changed", "cannot fit", "over --max-overhead". */
const char *fit_status_name(int status);
/* A changed step that fits but takes more than twice the step's time, with
 * no --max-overhead to cap it: the warning, into buf (the report's "fit
 * warning" line and roamc's stderr say it), else NULL.  Not a failure:
 * the answer fits; the warning says what it costs and how to cap it. */
const char *fit_overhead_warning(const fit_request *r, const fit_outcome *o, char *buf, size_t len);
/* The report's fit lines; the "fit" member of a JSON report. */
void fit_report_text(FILE *f, const fit_request *r, const fit_outcome *o);
struct json_t;
void fit_report_json(struct json_t *obj, const fit_request *r, const fit_outcome *o);

/* ------------------------------------------------ the door (fit_changer.c) */

/* --fit's own options, the setup of a changer_request (changer.h). */
typedef struct fit_setup {
    unsigned mode;            /* enum fit_mode bits */
    double max_overhead;      /* as fit_request's */
    const fit_device *device; /* copied by the changer */
    uint64_t arena_budget;    /* the budget less the reserve */
    const char *budget_text;  /* the budget as the user wrote it, in messages */
} fit_setup;

/* --fit behind the door: no build (the change depends on the step's plan);
 * plan runs fit_run and judges the budget itself (CHANGER_NO_FIT). */
extern const planner_changer fit_changer;

#endif
