/* roamc.h — the public C API of roamc (libroamc): plan a model's memory, or
 * lay out a list of buffers, from a program instead of the command line.
 *
 * The `roamc` command is a client of this library: `roamc MODEL` and
 * `roamc layout` run the same code, so a plan or a layout made here is byte
 * for byte the one the command makes from the same input and options.
 *
 * Conventions, for every function below:
 *   - Handles are opaque (roamc_options, roamc_result, roamc_layout); each
 *     is made by a _new or a run function and freed by its _free function
 *     (NULL is accepted and ignored).
 *   - No global state: calls on distinct handles may run in parallel
 *     threads; one handle is used by one thread at a time.  (A handle is
 *     only read by the run functions: one roamc_options may feed plans in
 *     several threads at once.)
 *   - Memory the library returns is either owned by a handle (pointers into
 *     a result: valid until that handle is freed) or the caller's, freed
 *     with roamc_free (said at each function).
 *   - Functions that can fail return a roamc_status; the handle then holds
 *     a message naming the input, the value and where
 *     (roamc_options_error, roamc_result_error, roamc_layout_error).
 *   - Sizes and offsets are bytes (uint64_t); steps and buffer indices
 *     count from 0.
 *   - Out of memory ends the process with a message (the allocators of the
 *     whole engine do), so no call returns "out of memory".
 *   - Only plain C types cross the interface, so ctypes or cffi can call
 *     it without a compiler.
 *
 * Link: pkg-config --cflags --libs roamc (static: --static), or CMake's
 * find_package(roamc) and the target roamc::roamc.
 */
#ifndef ROAMC_H
#define ROAMC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define ROAMC_API __attribute__((visibility("default")))
#else
#define ROAMC_API
#endif

/* The version of this header; roamc_version() gives the library's. */
#define ROAMC_VERSION_MAJOR 0
#define ROAMC_VERSION_MINOR 1
#define ROAMC_VERSION_PATCH 0
#define ROAMC_VERSION_STRING "0.1.0"

/* What a call gave: the same numbers as the command's exit status. */
typedef enum roamc_status {
    ROAMC_OK = 0,
    ROAMC_ERROR = 1,     /* roamc itself failed: I/O, an internal error */
    ROAMC_BAD_INPUT = 2, /* a bad model, option, value or problem (the message says which) */
    ROAMC_NO_FIT = 3     /* the result is complete, but does not fit the budget or capacity */
} roamc_status;

/* The library's version, "MAJOR.MINOR.PATCH" (static storage). */
ROAMC_API const char *roamc_version(void);
/* "ok", "error", "bad input", "does not fit"; "?" for another value (static storage). */
ROAMC_API const char *roamc_status_name(roamc_status s);
/* Frees memory a roamc_* function returned as the caller's (JSON text). */
ROAMC_API void roamc_free(void *p);

/* ------------------------------------------------------------------ planning a model */

typedef struct roamc_options roamc_options;
typedef struct roamc_result roamc_result;

/* Options with the command's defaults (order roam, layout roam, align 512,
 * node limit 48, delay radius 4, all cores, time limit 240 s, no budget, no
 * --train).  Free with roamc_options_free. */
ROAMC_API roamc_options *roamc_options_new(void);
ROAMC_API void roamc_options_free(roamc_options *o);

/* Sets one option by the name of the command's long option, without the
 * dashes, and its value as the command line spells it (values are copied):
 *
 *   order (roam program lescea ilp)     layout (roam llfb greedy bestfit pytorch ilp)
 *   method (pytorch heuristics ilp roam; sets order, layout and gradient handling)
 *   align (a power of two, 1 to 2^30; "512", "4KiB")
 *   node-limit, delay-radius, threads, time-limit (seconds, for each run)
 *   budget, reserve (sizes: "16GiB", "80GB", bytes)
 *   input-shape (NAME=D1,D2,...), dim (SYMBOL=V): repeatable bindings
 *   train (value ignored; NULL allowed), loss, optimizer, frozen (repeatable),
 *   precision, grad-accum, emit-train (a path: the step planned is named by it;
 *   written by the run with --train alone, else by roamc_result_write)
 *   fit (recompute offload both; NULL: both), max-overhead ("33%"),
 *   device (h100 a100 l4 4090 gh200), device-profile (a JSON file, read now)
 *   shard (ddp zero1 zero2 zero3 fsdp), world, rank, bucket-mb, wrap, prefetch,
 *   no-sync (value ignored: a --grad-accum step's gradients reduced once)
 *   streams (copy, comm, all, none, no-prefetch, no-comm-ahead,
 *   sync-offload, comma-separated: a version 2 plan on several streams, timed
 *   on the device profile; with shard zero3/fsdp, prefetch also issues each gather that
 *   far ahead), comm-gbps (G: the collectives' GB/s, needs streams comm)
 *   pipeline-stages (P: plan the P stages of a pipeline; the result's plan is
 *   the chosen stage's, roamc_result_stage_peak gives every stage's peaks),
 *   microbatches, schedule (1f1b gpipe), stage-cuts (NAME,...), stage (the
 *   stage written: emit-train and roamc_result_write; default the largest)
 *   max-batch (with budget: search the largest batch that fits instead of
 *   planning one; the value names the batch symbol, NULL: the one input
 *   symbol left unbound; roamc_result_max_batch gives the answer, the report
 *   the table; the result has no plan; a file only, without emit-train)
 *   compare (NULL or "true"; "false" turns it off: plan the model every way
 *   the command's --compare does, PyTorch, Heuristics, ILP and ROAM, each
 *   with its method's order and layout, sharing the time limit; the rows
 *   through roamc_result_compare_row, the report is the comparison's; the
 *   result's plan is the ROAM row's; not with method, budget, fit, shard,
 *   pipeline-stages or max-batch)
 *
 * New options get new names, never new functions, so the ABI stays.
 * Returns ROAMC_OK, or ROAMC_BAD_INPUT for an unknown name or a bad value
 * (the option keeps its previous value; message in roamc_options_error).
 * Options that only go together (fit needs budget, ...) are checked when a
 * plan runs. */
ROAMC_API roamc_status roamc_options_set(roamc_options *o, const char *name, const char *value);
/* The message of the last failed roamc_options_set, or "" (owned by o). */
ROAMC_API const char *roamc_options_error(const roamc_options *o);

/* Plans the model at path with options o (NULL: the defaults): loads it
 * (or derives its training step with the option train), orders, lays out,
 * validates, and with a budget plans PyTorch's way too, to say whether each
 * fits (with fit: changes the step until it fits; with shard: plans one
 * rank's step).  *out always gets a result (free it with
 * roamc_result_free), which holds the plan, or the message of a failure.
 * The time limit counts from this call.  Returns the result's status:
 * ROAMC_OK; ROAMC_NO_FIT (complete, but over the budget: with fit, no
 * changed step fits, or not within max-overhead); ROAMC_BAD_INPUT (the
 * model or the options); ROAMC_ERROR. */
ROAMC_API roamc_status roamc_plan_file(const roamc_options *o, const char *path,
                                       roamc_result **out);
/* The same on an ONNX model in memory (len bytes at data, only read during
 * the call); name names it in messages and in the plan ("model").  The
 * option train needs a file (roamc_plan_file): ROAMC_BAD_INPUT here. */
ROAMC_API roamc_status roamc_plan_bytes(const roamc_options *o, const void *data, size_t len,
                                        const char *name, roamc_result **out);
ROAMC_API void roamc_result_free(roamc_result *r);

/* The status the run returned, and its message ("" for ROAMC_OK; owned by r). */
ROAMC_API roamc_status roamc_result_status(const roamc_result *r);
ROAMC_API const char *roamc_result_error(const roamc_result *r);

/* The accessors below read the plan of the result (with fit: of the step
 * planned, changed or not; with shard: of the rank's step).  Without a plan
 * (a failed run) the arrays are NULL with *n = 0 and the numbers 0.
 * With compare: of the ROAM row's plan (what the command's -o writes).
 * Arrays are owned by r. */

/* The schedule: *n operator indices (node indices of the model's graph in
 * the order they run). */
ROAMC_API const int32_t *roamc_result_schedule(const roamc_result *r, size_t *n);
/* Per buffer (a storage: the tensors that share memory), *n of each: the
 * offset in the arena, the size (rounded up to align; 0 for a host copy),
 * the closed lifetime [start, end] in steps of the schedule, and 1 for a
 * persistent buffer (parameters, optimizer state, inputs and outputs). */
ROAMC_API const uint64_t *roamc_result_offsets(const roamc_result *r, size_t *n);
ROAMC_API const uint64_t *roamc_result_sizes(const roamc_result *r, size_t *n);
ROAMC_API const int32_t *roamc_result_starts(const roamc_result *r, size_t *n);
ROAMC_API const int32_t *roamc_result_ends(const roamc_result *r, size_t *n);
ROAMC_API const uint8_t *roamc_result_persistent(const roamc_result *r, size_t *n);
/* The name of buffer i's first tensor (owned by r), or NULL when i is out of range. */
ROAMC_API const char *roamc_result_buffer_name(const roamc_result *r, size_t i);

/* The peaks: theoretical (live bytes at the busiest step), actual (the
 * arena's size: theoretical plus fragmentation), the lower bound of the
 * theoretical peak over every schedule, the persistent bytes, and what the
 * device needs (the arena, or with layout pytorch what the caching
 * allocator reserves). */
ROAMC_API uint64_t roamc_result_theoretical_peak(const roamc_result *r);
ROAMC_API uint64_t roamc_result_actual_peak(const roamc_result *r);
ROAMC_API uint64_t roamc_result_lower_bound(const roamc_result *r);
ROAMC_API uint64_t roamc_result_persistent_bytes(const roamc_result *r);
ROAMC_API uint64_t roamc_result_device_bytes(const roamc_result *r);
/* With a budget: 1 when the plan fits it, 0 when not; -1 without a budget. */
ROAMC_API int roamc_result_fits(const roamc_result *r);

/* With max-batch: the largest batch at which the plan fits the budget (0:
 * not even batch 1), and in *pytorch (may be NULL) the largest at which
 * PyTorch's plan does; -1 for a result of another run. */
ROAMC_API int64_t roamc_result_max_batch(const roamc_result *r, int64_t *pytorch);
/* With pipeline-stages: the number of stages (0 for another run), and stage
 * i's theoretical and actual peaks (either pointer may be NULL; ROAMC_OK, or
 * ROAMC_BAD_INPUT for i out of range).  The plan the other accessors read
 * is the chosen stage's (the option stage, else the largest). */
ROAMC_API size_t roamc_result_stage_count(const roamc_result *r);
ROAMC_API roamc_status roamc_result_stage_peak(const roamc_result *r, size_t i,
                                               uint64_t *theoretical, uint64_t *actual);

/* With compare: one row per method the comparison planned, in the order
 * of the command's table (PyTorch first, ROAM last).  Strings are static
 * or owned by the result (valid until roamc_result_free).  The struct
 * only changes with ROAMC_VERSION_MINOR, which the library's SONAME
 * carries. */
typedef struct roamc_compare_row {
    const char *name;          /* the method, as the option method names it: "pytorch", ... */
    const char *title;         /* as the table prints it: "PyTorch", "Heuristics", "ILP", "ROAM" */
    const char *order;         /* the method's order ("program", "lescea", "ilp", "roam") */
    const char *layout;        /* the method's layout ("pytorch", "llfb", "ilp", "roam") */
    const char *order_ran;     /* what ran: the ILPs may fall back to a heuristic (note says why) */
    const char *layout_ran;    /* the same for the layout */
    uint64_t theoretical_peak; /* live bytes at the busiest step of its order */
    uint64_t actual_peak;      /* what it needs: the arena, or what PyTorch's allocator reserves */
    double fragmentation_percent;        /* actual over theoretical */
    double reduction_vs_pytorch_percent; /* saving in actual peak against the PyTorch row */
    double seconds;                      /* its planning time (not repeatable) */
    const char *note;                    /* "" or what fell back, what ran out of time */
} roamc_compare_row;
/* The number of rows (0 for a result of another run or a failed one). */
ROAMC_API size_t roamc_result_compare_count(const roamc_result *r);
/* Fills *row with row i: ROAMC_OK, or ROAMC_BAD_INPUT for i out of range
 * or row NULL (*row untouched). */
ROAMC_API roamc_status roamc_result_compare_row(const roamc_result *r, size_t i,
                                                roamc_compare_row *row);

/* The report as one JSON object (what `roamc MODEL --report json` prints;
 * the members that name output files are absent): *json gets a
 * NUL-terminated string the caller frees with roamc_free, *len (may be
 * NULL) its length (with max-batch: the search's table, what `roamc MODEL
 * --max-batch --report json` prints; with compare: the comparison, what
 * `roamc MODEL --compare --report json` prints).  The plan file itself: roamc_result_plan_json, the same
 * bytes `roamc MODEL -o FILE` writes.  Return ROAMC_OK, or ROAMC_BAD_INPUT
 * for a result without a plan (*json NULL). */
ROAMC_API roamc_status roamc_result_report_json(const roamc_result *r, char **json, size_t *len);
ROAMC_API roamc_status roamc_result_plan_json(const roamc_result *r, char **json, size_t *len);
/* Writes the plan file (roam-plan v1) to path, and with fit or shard and
 * the option emit-train also the step it plans to that path, all or
 * nothing, as the command writes its files (a temporary renamed over the
 * target).  Returns ROAMC_OK, ROAMC_BAD_INPUT (no plan, or a path that
 * cannot be written) or ROAMC_ERROR (I/O); on failure the result's status
 * and message (roamc_result_status, roamc_result_error) become the
 * write's, and nothing is written. */
ROAMC_API roamc_status roamc_result_write(roamc_result *r, const char *path);

/* ------------------------------------------------------------------ laying out buffers
 *
 * A static allocation problem as compilers state it: buffers with a size
 * and an alignment, which conflict (must not share bytes) when their
 * lifetimes intersect (intervals, as TFLite and IREE give them) or when an
 * edge says so (a conflict graph, as TVM's planner takes it), or both.  A
 * buffer occupies [offset, offset + size rounded up to its alignment);
 * a buffer of size 0 occupies nothing (it conflicts with none, and adds
 * nothing to the height, even pinned).
 *
 * Which engine runs: when no buffer is pinned, every buffer has a
 * lifetime, no conflict edge was added and all alignments are equal, the
 * problem goes to the engine of `roamc layout --align A` (best heuristic,
 * the exact search and the layout ILP, or the method asked for), and the
 * offsets are the command's.  Otherwise pinned buffers keep their offsets
 * and the rest are placed first-fit (lowest aligned offset free of every
 * conflicting placed buffer) in several orders (largest first, longest
 * lived first, most conflicts first), then in orders changed by a local
 * search until the work or time limit; the lowest is kept. */

typedef struct roamc_layout roamc_layout;

/* Why the solver stopped (roamc_layout_stop). */
typedef enum roamc_layout_stop {
    ROAMC_STOP_OPTIMAL = 0,    /* height proved minimal (equal to the proven bound) */
    ROAMC_STOP_FEASIBLE = 1,   /* with a capacity: a layout within it (not minimised further) */
    ROAMC_STOP_INFEASIBLE = 2, /* with a capacity: proved that none fits */
    ROAMC_STOP_WORK = 3,       /* the work limit ran out before a proof */
    ROAMC_STOP_TIME = 4,       /* the time limit ran out before a proof */
    ROAMC_STOP_HEURISTIC = 5   /* a heuristic method: no search ran, nothing proved */
} roamc_layout_stop;

/* An empty problem (alignment 1, no capacity, method roam, time limit 10 s,
 * no work limit).  Free with roamc_layout_free. */
ROAMC_API roamc_layout *roamc_layout_new(void);
ROAMC_API void roamc_layout_free(roamc_layout *l);

/* Adds a buffer of size bytes whose offset must be a multiple of alignment
 * (a power of two, 1 to 2^30), live in the closed step range [first, last]
 * (0 <= first <= last < 2^31 - 1).  *index (may be NULL) gets its index
 * (0, 1, ... in the order added).  Returns ROAMC_OK or ROAMC_BAD_INPUT. */
ROAMC_API roamc_status roamc_layout_add_interval(roamc_layout *l, uint64_t size, uint64_t alignment,
                                                 int64_t first, int64_t last, size_t *index);
/* Adds a buffer without a lifetime: it conflicts only with the buffers
 * roamc_layout_add_conflict names. */
ROAMC_API roamc_status roamc_layout_add_buffer(roamc_layout *l, uint64_t size, uint64_t alignment,
                                               size_t *index);
/* Buffers a and b (added before, a != b) must not share bytes. */
ROAMC_API roamc_status roamc_layout_add_conflict(roamc_layout *l, size_t a, size_t b);
/* Buffer i sits at offset (a multiple of its alignment), chosen ahead of
 * time (a model input the runtime places).  Two pinned buffers that
 * conflict must not overlap: checked by roamc_layout_solve. */
ROAMC_API roamc_status roamc_layout_pin(roamc_layout *l, size_t i, uint64_t offset);
/* Options by name, as `roamc layout` spells them: capacity (a size: the
 * layout must fit it, else ROAMC_NO_FIT), time-limit (seconds), work (work
 * units of the exact search, 10^7 ~ 1 s; the answer then does not depend
 * on the machine), method (roam llfb greedy bestfit pytorch; the
 * heuristics and pytorch only for the command's engine).  ROAMC_OK or
 * ROAMC_BAD_INPUT. */
ROAMC_API roamc_status roamc_layout_set(roamc_layout *l, const char *name, const char *value);

/* Solves the problem: ROAMC_OK with offsets for every buffer; ROAMC_NO_FIT
 * when a capacity was set and the buffers provably do not fit it or no
 * layout within it was found in time (the best layout found is still
 * readable); ROAMC_BAD_INPUT (pinned buffers that overlap, a method the
 * problem's engine does not take, sizes that overflow; method pytorch: a
 * size above 2^62). */
ROAMC_API roamc_status roamc_layout_solve(roamc_layout *l);
/* The message of the last failed call on l, or "" (owned by l). */
ROAMC_API const char *roamc_layout_error(const roamc_layout *l);
/* After roamc_layout_solve: *n offsets, one per buffer in the order added
 * (owned by l; NULL before a solve). */
ROAMC_API const uint64_t *roamc_layout_offsets(const roamc_layout *l, size_t *n);
/* The height (largest offset + rounded size), the live-size lower bound
 * (the heaviest step, or for a conflict graph the heaviest clique found and
 * the pinned buffers' ends), the proven lower bound (>= it; what the exact
 * search proved), the gap (height - proven) / proven, and why it stopped. */
ROAMC_API uint64_t roamc_layout_height(const roamc_layout *l);
ROAMC_API uint64_t roamc_layout_lower_bound(const roamc_layout *l);
ROAMC_API uint64_t roamc_layout_proven_bound(const roamc_layout *l);
ROAMC_API double roamc_layout_gap(const roamc_layout *l);
ROAMC_API roamc_layout_stop roamc_layout_stop_reason(const roamc_layout *l);

#ifdef __cplusplus
}
#endif

#endif
