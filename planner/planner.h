/* planner/ — the pipeline: loads a model, orders, lays out, validates,
 * and writes the plan file and the report.  What drives it sits above,
 * each folder a floor (tests/test_floors.sh): the step changers (fit/,
 * shard/, behind changer.h), the report engines (report/: check, compare,
 * budget, the pictures), the library (api/) and the command line (cmd/);
 * they include this header, never the other way.
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

#include "base.h"
#include "graph.h"

struct partition; /* partition/partition.h */

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

/* Progress on stderr (planner/progress.c): main starts it unless -q.
 * Every stage that can take more than a second names itself.  On a
 * terminal (enabled PLANNER_PROGRESS_LINE) a ticker thread redraws
 * "roamc: PREFIX: STAGE (N.N s)" in place (not before half a second), and
 * planner_progress_end clears the line: call it before printing anything
 * else to the terminal.  Elsewhere (PLANNER_PROGRESS_LOG: a file, a pipe)
 * each finished stage of a second or more and each note is one plain line,
 * fit for a log.  Without start, every call but planner_progress_note is a
 * no-op. */
enum { PLANNER_PROGRESS_LINE = 1, PLANNER_PROGRESS_LOG = 2 };
void planner_progress_start(int enabled);
/* Something decided ("--max-batch: batch 64: ..."): a log line (a terminal:
 * the line's text until the next task), and kept, whether shown or not,
 * for planner_progress_notes. */
void planner_progress_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The notes an interrupted run prints, one an indented line: *text and
 * its length; all of them, or in log form (each printed already) the
 * last.  Async-signal-safe (read from a signal handler). */
size_t planner_progress_notes(const char **text);
/* Whether the terminal's line holds text now (to clear it from a signal
 * handler). */
int planner_progress_drawn(void);
/* The enclosing task ("--compare: ILP (3/4)", "--max-batch: batch 64");
 * clears the stage.  fmt NULL: none. */
void planner_progress_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A new stage ("ordering (roam)", "layout (roam)"), its clock from now. */
void planner_progress_stage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* New text for the same stage ("ordering: leaves 12/117"), its clock running on. */
void planner_progress_count(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void planner_progress_end(void);
/* Clears the line for a message (the ticker draws it again later). */
void planner_progress_clear(void);

/* --time-limit S (every command): seconds for the whole command, above 0
 * and at most PLANNER_MAX_TIME_LIMIT (11.6 days).  Returns 0, or -1 with a
 * message stating the range. */
#define PLANNER_MAX_TIME_LIMIT 1e6
int planner_time_limit_parse(const char *s, double *out, char *err, size_t errlen);

const char *planner_order_name(planner_order o);
const char *planner_layout_name(planner_layout l);
/* Parses a name; returns 0 and sets *out, or -1 for an unknown name. */
int planner_order_parse(const char *s, planner_order *out);
int planner_layout_parse(const char *s, planner_layout *out);

struct planner_pass; /* below */
struct json_t;       /* jansson's */

typedef struct planner_options {
    uint64_t align; /* storage sizes and offsets, bytes; >= 1 */
    planner_order order;
    planner_layout layout;
    /* operator ordering (planner/order.c) */
    int node_limit;    /* most ops in a leaf of the subgraph tree */
    int delay_radius;  /* r of the weight-update rule, in segments */
    int threads;       /* leaf solver threads; 0: all cores */
    double time_limit; /* --time-limit: seconds for the whole command (the report states it) */
    /* when the time is up, on roamc_now()'s clock: the command's start +
     * time_limit (main sets it); 0: time_limit from the start of plan_build */
    double deadline;
    /* set by plan_build when the time was up before the ordering: program
     * order without LESCEA and the costly bounds (the fastest valid plan) */
    int fastest;
    int progress; /* progress on stderr: PLANNER_PROGRESS_LINE or _LOG (main sets it) */
    /* gradients held to the end of the step, as eager PyTorch holds .grad
     * until the next zero_grad (method pytorch); plan_build then plans a
     * copy of the graph built that way */
    int retain_gradients;
    /* layout pytorch: device memory its segments may take (0: no limit);
     * near it the allocator gives cached segments back before it fails */
    uint64_t device_limit;
    /* a pass between the order and the layout (--streams), or NULL */
    const struct planner_pass *pass;
} planner_options;

/* The ways to plan a model that --compare sets side by side; each one is
 * also a single plan with --method NAME, so a row of the table can be
 * reproduced (and written, drawn, checked) on its own. */
typedef struct planner_method {
    const char *name;  /* "pytorch", "heuristics", "ilp", "roam" */
    const char *title; /* "PyTorch", as the table prints it */
    planner_order order;
    planner_layout layout;
    int retain_gradients;
} planner_method;
extern const planner_method planner_methods[];
extern const size_t planner_n_methods;
/* The method called name, or NULL. */
const planner_method *planner_method_find(const char *name);
/* "pytorch, heuristics, ilp, roam": for messages listing the choices. */
const char *planner_method_names(void);
/* Sets the order, layout and gradient handling of opt to those of m. */
void planner_method_apply(const planner_method *m, planner_options *opt);

/* Wall-clock seconds of each stage. */
typedef struct planner_times {
    double load, order, layout, total;
} planner_times;

/* Layout roam after order roam (plan.c): ROAM's tree-based layout (the
 * storages grouped by the leaf subgraphs of the order's tree, layout_roam),
 * then the global exact layout warm-started from it; the lower one is kept. */
typedef struct planner_tree_layout {
    int used;               /* 1 when the tree-based layout ran */
    uint64_t tree_height;   /* height of the tree-based layout */
    uint64_t global_height; /* height of the global exact layout warm-started from it */
    const char *winner;     /* "tree" (the global layout found nothing lower) or "global" */
    size_t groups, groups_proven, repaired, leftovers;
    const char *stacking; /* the stacking order that won (layout_roam_stats) */
    double seconds;       /* time of the tree-based layout */
} planner_tree_layout;

typedef struct plan {
    const graph *g;
    planner_options opt;
    int *order;     /* n_ops op indices: the schedule */
    int32_t *start; /* per storage: closed lifetime under the schedule */
    int32_t *end;
    uint64_t *offsets;                    /* per storage */
    uint64_t theoretical, theoretical_np; /* peak, and without persistent storages */
    uint64_t actual;                      /* layout height */
    uint64_t lower_bound;                 /* graph_lower_bound */
    uint64_t persistent;                  /* bytes of persistent storages */
    uint64_t pytorch_reserved; /* layout pytorch: most bytes of segments held at once, else 0 */
    size_t pytorch_released;   /* layout pytorch: segments given back under opt.device_limit */
    int pytorch_oom;           /* layout pytorch: out of memory under opt.device_limit (the
                                  layout and pytorch_reserved are then the replay without it) */
    int layout_optimal;        /* the layout's height is proven minimal for this order */
    char layout_note[160];     /* a fallback or time limit the layout ran into, else "" */
    /* order or layout ilp: why each solver stopped ("order ILP: ...; layout
     * ILP: ...") and, when a heuristic plan was lower than the ILPs' and
     * replaced it, which (the ILP baselines never lose to a heuristic) */
    char ilp_note[320];
    /* the ILP fell back to a heuristic plan (plan_ilp_fallback): the layout
     * that made it ("llfb", "greedy", ...); else NULL (the options' layout ran) */
    const char *layout_kept;
    planner_tree_layout tree_layout; /* layout roam after order roam, else all 0 */
    planner_times times;
    /* --time-limit: the time was up before the ordering, so this is the
     * fastest valid plan (opt then says program order, bestfit layout) */
    int time_short;
    char time_cut[256]; /* the stages the time limit cut short, "; "-separated, or "" */
    struct planner_order_stats *ostats; /* how the order was found (planner_order_run) */
    /* order roam: the subgraph tree the order was built on (layout roam's
     * groups, --dump-tree), else NULL; freed with the plan */
    struct partition *tree;
    graph *own_graph; /* opt.retain_gradients: the graph built for it (g), freed with the plan */
    void *pass_state; /* opt.pass's state (its free_state frees it with the plan), or NULL */
} plan;

/* A pass that changes what a plan is between its order and its layout,
 * set by an option in planner_options.pass (--streams: planner/streams/
 * puts operators on several streams).  plan_build, plan_validate, the plan
 * file and the report call it; the planner itself knows nothing of what
 * it does.  Its state hangs on the plan (plan.pass_state). */
typedef struct planner_pass {
    const void *ctx; /* the pass's options */
    /* After the order: may change p->order (to another valid schedule) and
     * sets p->pass_state.  0, or -1 with a message. */
    int (*order)(const struct planner_pass *pass, plan *p, char *err, size_t errlen);
    /* The lifetimes the layout must respect: end[s] (p->end on entry) may
     * only grow. */
    void (*lifetimes)(const plan *p, int32_t *end);
    /* After the layout: its own figures for the report. */
    void (*finish)(plan *p);
    /* What plan_validate adds: 0, or -1 with a message. */
    int (*validate)(const plan *p, char *err, size_t errlen);
    /* The plan file's fields (root: the plan object). */
    void (*write)(const plan *p, struct json_t *root);
    /* The report's lines, and its JSON members (into report). */
    void (*report_text)(FILE *f, const plan *p);
    void (*report_json)(const plan *p, struct json_t *report);
    void (*free_state)(void *state);
} planner_pass;

/* Bytes of device memory the plan needs: the arena (actual peak), or for
 * layout pytorch what the caching allocator reserves in segments. */
uint64_t plan_device_bytes(const plan *p);

/* Plans g with the given options (with opt->retain_gradients, a copy of g
 * built from g->model with gradients retained).  g must outlive the plan.
 * Returns 0 and a validated plan, or -1 with a message in err.  Free with
 * plan_free. */
int plan_build(const graph *g, const planner_options *opt, plan *p, char *err, size_t errlen);
void plan_free(plan *p);

/* The closed lifetime ends the layout respects, per storage: p->end, or
 * what opt.pass lengthens it to (--streams). */
void plan_layout_ends(const plan *p, int32_t *end);

/* Checks a plan in memory against the graph: the same rules as `roamc
 * check`.  Returns 0 when valid, else -1 with the first problem in err. */
int plan_validate(const plan *p, char *err, size_t errlen);

/* What a plan names its model by (PLAN_FORMAT.md): model_hex gets the
 * SHA-256 of the model file's bytes, sizes_hex the SHA-256 of the sizes
 * the model was loaded with (every value's name, element type, dims and
 * bytes, sorted by name), which the --input-shape/--dim bindings decide;
 * equal sizes give equal digests whichever flags spelled them.  Each is 64
 * hex digits and a NUL. */
void plan_model_digests(const fe_model *m, char model_hex[65], char sizes_hex[65]);

/* The files one planning run writes, each NULL when not asked for. */
typedef struct planner_files {
    const char *plan, *svg, *tree;
    const char *buffers; /* --dump-buffers: the layout problem as a buffer CSV */
    /* --fit --emit-train: the step the plan is of, written with it */
    const char *step;
    const uint8_t *step_bytes;
    size_t step_len;
} planner_files;
/* The same file into f (an output of a planner_output_set).  Returns 0, -1
 * on a write error. */
int plan_write_stream(const plan *p, const char *model_path, FILE *f);
/* --dump-buffers: the plan's layout problem as a buffer CSV (DESIGN.md:
 * id,lower,upper,size; one line per storage, aligned sizes, half-open
 * lifetimes) into f.  Returns 0, -1 on a write error. */
int plan_write_buffers(const plan *p, FILE *f);
/* --dump-tree: the subgraph tree of a plan ordered by roam (p->tree) as JSON
 * into f.  Returns 0, or -1 with a message. */
int plan_write_tree(const plan *p, FILE *f, char *err, size_t errlen);

/* All the files one command writes (plan, picture, subgraph tree, CSV),
 * all or nothing: checked before any work (planner_outputs_check), written
 * after it (planner_outputs_open, then the caller writes slot[i].f) and
 * committed together (planner_outputs_commit): regular files go to
 * temporaries renamed into place only when every output was complete;
 * stdout, devices and FIFOs are held in memory and written at the commit,
 * before any rename, so that a failure leaves every regular file as it
 * was.  Message prefixes name the output by `what` ("-o", "--svg"). */
#define PLANNER_MAX_OUTPUTS 6
typedef struct planner_output_slot {
    const char *what, *path;
    FILE *f;     /* after planner_outputs_open: write here */
    int direct;  /* stdout, a device, a FIFO: buffered, written at the commit */
    FILE *buf_f; /* the memory stream of a direct output */
    char *buf;
    size_t buf_len;
    roamc_output out; /* a regular file's temporary (base.h) */
} planner_output_slot;
typedef struct planner_output_set {
    size_t n;
    planner_output_slot slot[PLANNER_MAX_OUTPUTS];
} planner_output_set;
/* Adds an output (path NULL: none); returns its slot, or -1 for none. */
int planner_outputs_add(planner_output_set *s, const char *what, const char *path);
/* Before any work: every output can be written (an existing folder that
 * takes a new file, or a writable device/FIFO), none is a folder, none is
 * one of the inputs (same device and inode, through symlinks), no two are
 * the same file, at most one is "-".  Creates nothing.  Returns 0, or -1
 * with a message naming the option, the path and the reason. */
int planner_outputs_check(const planner_output_set *s, const char *const *inputs, size_t n_inputs,
                          char *err, size_t errlen);
/* 1 when some output is "-" (the report then goes to stderr). */
int planner_outputs_uses_stdout(const planner_output_set *s);
/* Opens every output for writing.  Returns 0, or -1 with a message and
 * nothing left behind. */
int planner_outputs_open(planner_output_set *s, char *err, size_t errlen);
/* ok: every write the caller made succeeded.  Then commits every output
 * (see above) and returns 0; else (or on a failure, with a message)
 * removes every temporary, writes nothing more and returns -1. */
int planner_outputs_commit(planner_output_set *s, int ok, char *err, size_t errlen);

/* The report: text for people, or one JSON object (with the members of
 * extra added, when not NULL; the caller keeps its reference). */
struct json_t;
void plan_report_text(FILE *f, const plan *p, const char *model_path, const planner_files *files);
void plan_report_json(FILE *f, const plan *p, const char *model_path, const planner_files *files,
                      struct json_t *extra);

/* ------------------------------------------------ what is live at the peak (planner/peak.c)
 *
 * The kind of a storage: from the graph (graph_storage.gradient, .host,
 * inputs and outputs), the metadata lists roamc.parameters and
 * roamc.optimizer_state (without them, initializers and inputs the step
 * updates are parameters), and forward against backward: a storage made by
 * an ancestor of the loss (the forward pass) and touched after it is a
 * saved activation; every other one an op makes is a temporary. */
enum planner_kind {
    PLANNER_KIND_PARAMETER,
    PLANNER_KIND_GRADIENT,
    PLANNER_KIND_STATE, /* optimizer state */
    PLANNER_KIND_SAVED, /* saved activation */
    PLANNER_KIND_TEMPORARY,
    PLANNER_KIND_INPUT,  /* data and other graph inputs that are no parameter or state */
    PLANNER_KIND_OUTPUT, /* a graph output of no other kind */
    PLANNER_KIND_HOST,   /* an Offload's copy in host memory (not in the device peak) */
    PLANNER_N_KINDS
};
/* "parameter", "saved activation", ... */
const char *planner_kind_name(int kind);

/* One storage live at the peak step. */
typedef struct planner_live_item {
    int storage;
    uint64_t bytes; /* device bytes (host_size for a host copy) */
    int kind;       /* enum planner_kind */
    int maker;      /* the op that makes it, -1 for a graph input or initializer */
    /* the module path: from the maker's node name when it carries a scope
     * ("/encoder/layer.3/attention/MatMul" -> "encoder.layer.3.attention"),
     * else from the parameter the maker reads, else from the input it reads
     * that was made last; a parameter's from its name, a gradient's from its
     * parameter's (roamc.gradients).  NULL when none is known; owned. */
    char *module;
    int32_t start, end;
} planner_live_item;

/* Bytes per group of modules: a module's parts up to the first that ends
 * in a digit (a layer: "h.3", "encoder.layer.3", "layer1"), else its first
 * part; "-" for storages of no module. */
typedef struct planner_live_group {
    char *name;
    uint64_t bytes;
    size_t count;
} planner_live_group;

typedef struct planner_peak_live {
    int step, op;   /* the first step with the most live device bytes, and its op */
    uint64_t bytes; /* device bytes live then (the theoretical peak for a plan's lifetimes) */
    uint64_t kind_bytes[PLANNER_N_KINDS];
    size_t kind_count[PLANNER_N_KINDS];
    uint64_t host_bytes;      /* host copies live at the step (not in bytes) */
    planner_live_item *items; /* every storage live at the step, largest first */
    size_t n_items;
    planner_live_group *groups; /* largest first; device storages only */
    size_t n_groups;
} planner_peak_live;

/* What is live at the peak of a schedule (order, n_ops ops) with the
 * closed lifetimes start/end per storage (-1: a storage the caller has no
 * lifetime for, left out).  O(ops + storages + node inputs).  Returns 0,
 * or -1 for a graph with no op (out is then empty).  Free with
 * planner_peak_live_free. */
int planner_peak_live_build(const graph *g, const int *order, const int32_t *start,
                            const int32_t *end, planner_peak_live *out);
void planner_peak_live_free(planner_peak_live *pl);
/* The kind (enum planner_kind) of every storage of g, classified as
 * planner_peak_live_build classifies them, into *kinds (g->n_storages entries), and the op
 * that makes each into *makers (-1 for a graph input or initializer); the caller frees
 * both.  O(ops + storages + node inputs). */
void planner_storage_classes(const graph *g, unsigned char **kinds, int **makers);
/* The report's lines: the step, bytes per kind, the top_groups largest
 * module groups, the top largest storages. */
void planner_peak_live_text(FILE *f, const graph *g, const planner_peak_live *pl, size_t top,
                            size_t top_groups);
/* The same as a JSON object (every kind and group, the top largest
 * storages); the caller owns the reference. */
struct json_t *planner_peak_live_json(const graph *g, const planner_peak_live *pl, size_t top);

/* How a command reads its model (planner_step_load). */
typedef struct planner_load {
    const char *path;
    /* the model in memory (len bytes, read during the call only), or NULL:
     * read path, which then only names the model; not with train */
    const uint8_t *bytes;
    size_t len;
    const fe_options *bindings; /* --input-shape/--dim, or NULL */
    /* derive the training step (fe_train) when not NULL; it is written to
     * train->emit_path when that is set and keep_bytes is not */
    const fe_train_options *train;
    uint64_t align;  /* graph_build's */
    bool summary;    /* keep fe_train's description */
    bool keep_bytes; /* keep the step's ONNX bytes (the file's, or the derived step's) */
} planner_load;

/* A loaded step: its model, graph, and what planner_load asked to keep. */
typedef struct planner_step {
    fe_model m;
    graph g;
    char *summary;  /* fe_train's description, or NULL */
    uint8_t *bytes; /* keep_bytes: the step's ONNX bytes, or NULL */
    size_t len;
} planner_step;

/* Loads (or derives) the step and builds its graph (graph_build).  Returns
 * 0 (free s with planner_step_free), or -1 with a message in err; s->summary
 * is set once the model loaded, even when the graph build then fails (the
 * caller prints it; planner_step_free frees it either way). */
int planner_step_load(const planner_load *l, planner_step *s, char *err, size_t errlen);
void planner_step_free(planner_step *s);

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
 * every committed model plans in well under a second (README's benchmark
 * table), so the time limit is only a backstop.  A node limit or time limit of 0 in the planner_options given
 * to plan_build means the default (plan_build sets them). */
#define PLANNER_DEFAULT_NODE_LIMIT 48
#define PLANNER_DEFAULT_DELAY_RADIUS 4
#define PLANNER_DEFAULT_TIME_LIMIT 240.0

typedef struct planner_order_stats {
    uint64_t peak_program, peak_lescea, peak_chosen; /* theoretical peaks */
    uint64_t lower_bound;  /* graph_order_lower_bound: valid for every schedule */
    const char *source;    /* what gave the chosen order: "roam", "ilp", "program", "lescea" */
    const char *placement; /* weight-update placement that won (roam) */
    const char *floating;  /* floating-op placement that won (roam) */
    int heuristic_kept;    /* the tree / ILP result was not better than a heuristic */
    int ilp_too_large;     /* order ilp: the model was too large, heuristic kept */
    size_t ilp_vars;       /* order ilp: columns of the model (0: not built) */
    long ilp_nodes;        /* order ilp: branch-and-bound nodes explored */
    /* an internal error the report names: the order ("roam", "ilp") that
     * failed its check and was replaced by a heuristic, or NULL */
    const char *invalid_order;
    size_t n_mi, n_update, n_blocks, n_independent, n_dependent, largest_leaf;
    size_t leaves, leaves_trivial, leaves_heuristic_optimal, leaves_not_critical, leaves_dp,
        leaves_ilp_optimal;
    size_t leaves_budget, time_stopped;
    size_t candidates,
        candidates_tried; /* roam: partition candidates, and how many the time limit let run */
    int threads;
    double t_partition, t_solve; /* seconds */
} planner_order_stats;

/* Orders g by opt->order (PROGRAM, LESCEA, ROAM or ILP) into order (n_ops
 * ops); st (may be NULL) gets the statistics.  Never worse than the better
 * of program order and LESCEA for ROAM and ILP.  opt as plan_build passes
 * it: node_limit >= 1, delay_radius >= 0, deadline set (roamc_now()'s
 * clock).  tree (may be NULL): with order ROAM, *tree gets the partition
 * (subgraph tree) the order was built on, which the caller owns (free it
 * with partition_free, then free); with any other order, NULL. */
void planner_order_run(const graph *g, const planner_options *opt, int *order,
                       planner_order_stats *st, struct partition **tree);

#endif
