/* planner/ — drives the pipeline and owns the plan file.
 *
 *   model (frontend) -> graph -> order -> lifetimes -> layout -> validate
 *   -> plan file (roam-plan v1, written atomically) and report.
 *
 * A plan is only ever written after plan_validate accepted it: roamc never
 * writes an invalid plan.
 */
#ifndef ROAMC_PLANNER_H
#define ROAMC_PLANNER_H

#include <stdint.h>
#include <stdio.h>

#include "graph.h"

typedef enum planner_order {
    PLANNER_ORDER_PROGRAM, /* node order of the file */
    PLANNER_ORDER_LESCEA,  /* list scheduling, least memory increase first */
    PLANNER_ORDER_ROAM,    /* subgraph tree, leaves solved exactly or by ILP (planner/order.c) */
    PLANNER_ORDER_ILP,     /* one GLPK model for the whole graph */
} planner_order;

typedef enum planner_layout {
    PLANNER_LAYOUT_BESTFIT, /* allocation in schedule order, best fit */
    PLANNER_LAYOUT_LLFB,
    PLANNER_LAYOUT_GREEDY,
    PLANNER_LAYOUT_PYTORCH,
    PLANNER_LAYOUT_ROAM, /* best heuristic, then exact search and the layout ILP */
    PLANNER_LAYOUT_ILP,  /* one GLPK model for all storages (the MODeL-like baseline) */
} planner_layout;

/* Writes a printf-style message into err (errlen bytes; err may be NULL) and
 * returns -1, so that a failing function can `return planner_errorf(...)`. */
int planner_errorf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Monotonic wall-clock seconds, for the report's timings. */
double planner_now(void);

const char *planner_order_name(planner_order o);
const char *planner_layout_name(planner_layout l);
/* Parses a name; returns 0 and sets *out, or -1 for an unknown name. */
int planner_order_parse(const char *s, planner_order *out);
int planner_layout_parse(const char *s, planner_layout *out);

typedef struct planner_options {
    uint64_t align;       /* storage sizes and offsets, bytes; >= 1 */
    planner_order order;
    planner_layout layout;
    /* operator ordering (planner/order.c) */
    int node_limit;      /* most ops in a leaf of the subgraph tree */
    int delay_radius;    /* r of the weight-update rule, in segments */
    int threads;         /* leaf solver threads; 0: all cores */
    double time_limit;   /* seconds for the whole ordering; backstop of the ILPs */
    const char *dump_tree; /* write the subgraph tree as JSON here, or NULL */
    int progress;        /* a progress line on stderr (main sets it when a tty) */
} planner_options;

/* Wall-clock seconds of each stage. */
typedef struct planner_times {
    double load, order, layout, total;
} planner_times;

/* Layout roam after order roam (plan.c): ROAM's tree-based layout (the
 * storages grouped by the leaf subgraphs of the order's tree, layout_roam),
 * then the global exact layout warm-started from it; the lower one is kept. */
typedef struct planner_tree_layout {
    int used;                 /* 1 when the tree-based layout ran */
    uint64_t tree_height;     /* height of the tree-based layout */
    uint64_t global_height;   /* height of the global exact layout warm-started from it */
    const char *winner;       /* "tree" (the global layout found nothing lower) or "global" */
    size_t groups, groups_proven, repaired, leftovers;
    const char *stacking;     /* the stacking order that won (layout_roam_stats) */
    double seconds;           /* time of the tree-based layout */
} planner_tree_layout;

typedef struct plan {
    const graph *g;
    planner_options opt;
    int *order;       /* n_ops op indices: the schedule */
    int32_t *start;   /* per storage: closed lifetime under the schedule */
    int32_t *end;
    uint64_t *offsets; /* per storage */
    uint64_t theoretical, theoretical_np; /* peak, and without persistent storages */
    uint64_t actual;      /* layout height */
    uint64_t lower_bound; /* graph_lower_bound */
    uint64_t persistent;  /* bytes of persistent storages */
    uint64_t pytorch_reserved; /* layout pytorch: bytes of reserved segments, else 0 */
    int layout_optimal;        /* the layout's height is proven minimal for this order */
    char layout_note[160];     /* a fallback or time limit the layout ran into, else "" */
    planner_tree_layout tree_layout; /* layout roam after order roam, else all 0 */
    planner_times times;
    struct planner_order_stats *ostats; /* order roam/ilp: how the order was found, else NULL */
} plan;

/* Plans g with the given options.  Returns 0 and a validated plan, or -1
 * with a message in err.  Free with plan_free. */
int plan_build(const graph *g, const planner_options *opt, plan *p, char *err, size_t errlen);
void plan_free(plan *p);

/* Checks a plan in memory against the graph: the same rules as `roamc
 * check`.  Returns 0 when valid, else -1 with the first problem in err. */
int plan_validate(const plan *p, char *err, size_t errlen);

/* What a plan names its model by (PLAN_FORMAT.md): model_hex gets the
 * SHA-256 of the model file's bytes, sizes_hex the SHA-256 of the sizes
 * the model was loaded with (every value's name, element type, dims and
 * bytes, sorted by name), which the --input-shape/--dim bindings decide;
 * equal sizes give equal digests whichever flags spelled them.  Each is 64
 * hex digits and a NUL.  Returns 0, -1 on out of memory. */
int plan_model_digests(const fe_model *m, char model_hex[65], char sizes_hex[65]);

/* Writes the roam-plan v1 file for p to path atomically: a temporary file in
 * the same folder, renamed over path only when complete.  model_path is
 * recorded as given.  Returns 0, or -1 with a message (no file is left). */
int plan_write(const plan *p, const char *model_path, const char *path, char *err, size_t errlen);

/* An output file written all or nothing (planner/output.c), the one way
 * roamc writes a file: regular files through a temporary beside the target
 * (mode 0666 & ~umask) renamed over it at the end; symlinks written through;
 * "-" is stdout; devices and FIFOs are written directly. */
typedef struct planner_output {
    FILE *f;      /* write here */
    char *tmp;    /* the temporary file, or NULL when written directly */
    char *target; /* what the temporary is renamed over (symlinks resolved) */
    int is_stdout;
} planner_output;
/* Opens path for writing.  Returns 0, or -1 with errno set. */
int planner_output_open(planner_output *o, const char *path);
/* Finishes the file: when ok and every write succeeded, the temporary is
 * renamed over the target; otherwise it is removed and the target is left
 * as it was.  Returns 0 when path now holds the complete file, else -1
 * with errno set (0 for a write that failed earlier with ok == 0). */
int planner_output_close(planner_output *o, int ok);

/* The report: text for people, or one JSON object. */
void plan_report_text(FILE *f, const plan *p, const char *model_path, const char *out_path);
void plan_report_json(FILE *f, const plan *p, const char *model_path, const char *out_path);

/* Draws n plans of the same graph one above the other on one scale (time
 * across, address up, one rectangle per storage, persistent storages shaded
 * apart, the actual peak marked, the live-bytes curve under each) into an SVG
 * file, written atomically.  Storages below a pixel are merged, so the file
 * stays small for 10,000+ storages.  Returns 0, or -1 with a message. */
int plan_write_svg(const plan *const *plans, const char *const *titles, size_t n, const char *path, char *err,
                   size_t errlen);

/* `roamc MODEL --compare`: plans g as PyTorch (program order, allocator
 * replay), Heuristics (LESCEA, LLFB), ILP (whole-graph order and layout
 * ILPs) and ROAM, and prints one table (or JSON when json != 0) to out.
 * Writes the ROAM plan to out_path and the PyTorch and ROAM layouts to
 * svg_path when they are not NULL.  Returns 0, or -1 with a message. */
int plan_compare(const graph *g, const planner_options *base, const char *model_path, const char *out_path,
                 const char *svg_path, int json, FILE *out, char *err, size_t errlen);

/* `roamc layout BUFFERS.csv [-o OUT.csv] [--capacity B] [--time-limit S]
 * [--align B] [--method roam|llfb|greedy|bestfit|pytorch]` (cmd_layout.c):
 * the layout engine alone on a buffer-list CSV.  argv[0] is "layout".
 * Prints the height, the live-size lower bound, the fragmentation and the
 * time.  Returns the exit status: 0 success; 1 I/O or memory error; 2 bad
 * usage or bad input (message on stderr, no output file); 3 --capacity given
 * and no layout fits it (proved by the lower bound, or none found in time;
 * no output file). */
int cmd_layout(int argc, char **argv);

/* `roamc check MODEL PLAN [--input-shape ...] [--dim ...]`: the checks of
 * shared/tools/check_plan.py, with the model sized under the bindings of
 * fopt (NULL: none).  Prints "VALID ..." or up to 20 "INVALID: ..." lines to
 * out and returns 0 (valid), 1 (invalid) or 2 (unreadable model or plan;
 * message to err). */
int plan_check_file(const char *model_path, const fe_options *fopt, const char *plan_path, FILE *out, FILE *err);

/* ------------------------------------------------ what was inferred (planner/shapes.c) */

/* "training" when some node writes in place (a step that updates state),
 * else "inference": a graph that updates nothing, planned as one pass. */
const char *planner_graph_kind(const fe_model *m);
/* `roamc shapes`: every value's element type and shape (unknown dims by
 * their symbol) and the symbols, as text or (json != 0) one JSON object.
 * Returns 0, -1 on a write error. */
int planner_shapes_print(FILE *f, const fe_model *m, int json);
/* The report's lines on shapes: values inferred, symbols bound, sizes
 * planned at an upper bound. */
void planner_shapes_text_summary(FILE *f, const fe_model *m);
/* The same as a JSON object (graph kind, opset, symbols, counts) for the
 * plan file and the JSON report; the caller owns the reference. */
struct json_t;
struct json_t *planner_shapes_summary_json(const fe_model *m);

/* ------------------------------------------------ operator ordering (planner/order.c)
 *
 * Every order is deterministic: the same model and options give the same
 * schedule whatever --threads is, because each leaf is solved under a work
 * budget (DP states, branch-and-bound nodes), not a time budget.  The time
 * limit is a backstop: a leaf solved after the deadline keeps its heuristic
 * order, and the report counts such leaves (time_stopped); only then can
 * the result depend on timing. */

/* Defaults.  With a node limit of 48 the exact DP settles most leaves of
 * the evaluation models and no leaf ILP grows past a few thousand columns;
 * every model of up to 15k ops orders in under 2 s on 2 cores (gpt2-xl:
 * about 1.2 s), far inside the 60 s target, so the time limit is only a
 * backstop.  A node limit or time limit of 0 in planner_options means the
 * default. */
#define PLANNER_DEFAULT_NODE_LIMIT 48
#define PLANNER_DEFAULT_DELAY_RADIUS 4
#define PLANNER_DEFAULT_TIME_LIMIT 240.0

typedef struct planner_order_stats {
    uint64_t peak_program, peak_lescea, peak_chosen; /* theoretical peaks */
    uint64_t lower_bound;    /* graph_order_lower_bound: valid for every schedule */
    const char *source;      /* what gave the chosen order: "roam", "ilp", "program", "lescea" */
    const char *placement;   /* weight-update placement that won (roam) */
    const char *floating;    /* floating-op placement that won (roam) */
    int heuristic_kept;      /* the tree / ILP result was not better than a heuristic */
    int ilp_too_large;       /* order ilp: the model was too large, heuristic kept */
    size_t n_mi, n_update, n_blocks, n_independent, n_dependent, largest_leaf;
    size_t leaves, leaves_trivial, leaves_heuristic_optimal, leaves_not_critical, leaves_dp, leaves_ilp_optimal;
    size_t leaves_budget, time_stopped;
    int threads;
    double t_partition, t_solve; /* seconds */
    /* order roam: the winning candidate partition, for planner_order_partition */
    int has_partition;
    int part_placement, part_floating; /* partition_placement, partition_floating */
    int part_reference;                /* its reference order: -1 none, 0 program, 1 LESCEA */
} planner_order_stats;

/* Orders g by opt->order (PROGRAM, LESCEA, ROAM or ILP) into order (n_ops
 * ops); st (may be NULL) gets the statistics.  Never worse than the better
 * of program order and LESCEA for ROAM and ILP.  Returns 0, or -1 with a
 * message in err. */
int planner_order_run(const graph *g, const planner_options *opt, int *order, planner_order_stats *st, char *err,
                      size_t errlen);

/* The partition (subgraph tree) that order roam chose, rebuilt from st (a
 * planner_order_run result with st->has_partition) with the same options:
 * the same tree, deterministically.  The caller frees it with
 * partition_free (partition/partition.h).  Returns 0, or -1 with a message
 * in err. */
struct partition;
int planner_order_partition(const graph *g, const planner_options *opt, const planner_order_stats *st,
                            struct partition *P, char *err, size_t errlen);

#endif
