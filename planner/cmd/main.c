/* roamc: command line.  Parses options, runs one of the four commands:
 *   roamc MODEL.onnx [-o PLAN.json] [options]   plan a training step or an inference pass
 *   roamc check MODEL.onnx PLAN.json            validate a plan
 *   roamc shapes MODEL.onnx                     print the inferred types and shapes
 *   roamc layout BUFFERS.csv -o OUT.csv         lay out a buffer list
 * Exit codes: 0 success, 1 failure inside roamc (I/O, internal error),
 * 2 bad input or usage; `check` returns 1 for an invalid plan and `layout`
 * 3 when the buffers cannot fit the capacity.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "frontend.h"
#include "graph.h"
#include "planner.h"

#include "api_internal.h"
#include "budget.h"
#include "check.h"
#include "explain.h"
#include "files.h"
#include "layout_cmd.h"
#include "fit.h"
#include "streams.h"
#include "api_pipe.h"
#include "shard.h"

static const char usage_text[] =
    "usage: roamc MODEL.onnx [-o PLAN.json] [options]\n"
    "       roamc check MODEL.onnx PLAN.json [--input-shape ...] [--dim ...]\n"
    "       roamc shapes MODEL.onnx [--input-shape ...] [--dim ...] [--report json]\n"
    "       roamc layout BUFFERS.csv [-o OUT.csv] [--capacity B] [--time-limit S]\n"
    "       roamc explain PLAN.json [MODEL.onnx] [--top N] [--report json]\n"
    "       roamc help [plan|check|shapes|layout]\n"
    "\n"
    "Plans one training step (or, for a graph that updates nothing, one\n"
    "inference pass) of MODEL.onnx: an operator order and an offset for every\n"
    "storage in one arena, written as a roam-plan v1 file, with a report on\n"
    "stdout.  Shapes come from roamc's own inference; bind the model's\n"
    "symbolic dims with --input-shape or --dim.\n"
    "\n"
    "options:\n"
    "      --input-shape NAME=D1,D2,...  shape of graph input NAME (repeatable; also\n"
    "                        NAME:D1xD2 as TensorRT spells it)\n"
    "      --dim SYMBOL=V    bind the symbolic dim SYMBOL (e.g. batch) everywhere, or\n"
    "                        set the upper bound of a data-dependent size the report names\n"
    "  -o, --output FILE     write the plan to FILE ('-': standard output, the report\n"
    "                        then goes to stderr)\n"
    "      --train           MODEL is a forward-only graph: derive one training step\n"
    "                        (loss, backward, optimizer; README, section --train) and plan it\n"
    "      --loss NAME       --train: cross-entropy, mse or none (the output is the loss);\n"
    "                        default: none for a scalar output, else cross-entropy\n"
    "      --optimizer NAME  --train: adam (default), adamw, sgd, momentum, none\n"
    "      --frozen PATTERN  --train: float initializers matching PATTERN (fnmatch, e.g.\n"
    "                        'encoder.*') stay fixed (repeatable)\n"
    "      --precision P     --train: fp32 (default), bf16, fp16 (every float tensor in\n"
    "                        that type), amp-bf16, amp-fp16 (autocast's casts, fp32 master\n"
    "                        weights; amp-fp16 adds GradScaler's state)\n"
    "      --grad-accum K    --train: K microbatches (inputs mb0.NAME ...), gradients\n"
    "                        accumulated in place, one optimizer step\n"
    "      --emit-train FILE --train: also write the derived training graph to FILE; the\n"
    "                        plan and report then name FILE; --fit: write the step planned\n"
    "                        (the changed step, or the unchanged one when it fits) to FILE\n"
    "      --method NAME     plan as one row of --compare: pytorch (what eager PyTorch\n"
    "                        does: program order, gradients held to the end of the step,\n"
    "                        caching-allocator replay), heuristics (lescea + llfb), ilp\n"
    "                        (whole-graph ILPs, never worse than the heuristics), roam (default)\n"
    "      --order NAME      operator order: roam (default), program, lescea, ilp\n"
    "      --layout NAME     layout: roam (default), llfb, greedy, bestfit, pytorch, ilp\n"
    "      --node-limit N    roam: most operators in a leaf of the subgraph tree\n"
    "                        (1 to 100000, default 48)\n"
    "      --delay-radius R  roam: segments a weight update may be delayed (0 to 100000,\n"
    "                        default 4)\n"
    "      --threads N       roam: leaf solver threads (1 to 1024, default: all cores);\n"
    "                        the plan does not depend on it\n"
    "      --time-limit S    seconds for the whole command, loading and writing included\n"
    "                        (above 0, at most 1000000; default 240): see 'time limit' below\n"
    "      --dump-tree FILE  roam: write the subgraph tree as JSON to FILE\n"
    "      --dump-buffers FILE  write the layout problem as a buffer CSV (id,lower,upper,\n"
    "                        size; one line per storage, half-open lifetimes) for\n"
    "                        roamc layout or another static allocator\n"
    "      --compare         plan four ways (PyTorch, Heuristics, ILP, ROAM) and print one\n"
    "                        table; -o writes the ROAM plan, --svg draws PyTorch above ROAM\n"
    "      --budget SIZE     device memory (16G or 16GiB, 80GB, 24000000000; K/M/G/T and\n"
    "                        KiB/MiB/GiB/TiB are powers of 1024, kB/MB/GB/TB of 1000):\n"
    "                        say whether the plan and PyTorch's (--method pytorch) fit,\n"
    "                        and by how much\n"
    "      --reserve SIZE    memory the device spends outside the arena (CUDA context,\n"
    "                        workspaces), taken off the budget (default: 0)\n"
    "      --max-batch[=SYM] with --budget: the largest batch at which PyTorch's plan and\n"
    "                        this plan fit, searching the symbolic dim SYM (default: the\n"
    "                        one left unbound); -o writes the plan at that batch (--fit:\n"
    "                        of the step planned there, which --emit-train FILE writes)\n"
    "      --fit[=HOW]       with --budget: when the plan does not fit, change the step\n"
    "                        at the least added time: recompute or offload to host memory\n"
    "                        values the backward pass reads (HOW: recompute, offload,\n"
    "                        both; default both); -o then needs --emit-train FILE\n"
    "      --max-overhead P  --fit: add at most P% of the step's time (e.g. 33%); default:\n"
    "                        no cap, and a warning when the change adds more than the\n"
    "                        step's own time\n"
    "      --device NAME     --fit, --streams: the device profile its costs use: h100\n"
    "                        (default), a100, l4, 4090 or gh200\n"
    "      --device-profile FILE  --fit, --streams: a device profile file (JSON, the\n"
    "                        fields of the built-in ones; README, section --fit)\n"
    "      --streams LIST    plan on several streams (a version 2 plan): copy (Offload\n"
    "                        on d2h, Reload on h2d, prefetched), comm (collectives,\n"
    "                        Send, Recv; each issued once its inputs are ready,\n"
    "                        its readers after the compute that covers it), all,\n"
    "                        none (default), no-prefetch, no-comm-ahead (collectives\n"
    "                        and readers as ordered: less in flight), sync-offload\n"
    "                        (free offloaded values where one stream\n"
    "                        would: time for memory); the report gives step time,\n"
    "                        overlap and its memory\n"
    "      --comm-gbps G     --streams comm: collectives' bandwidth, GB/s (default 25)\n"
    "      --shard KIND      plan one rank of a data-parallel job: ddp, zero1, zero2,\n"
    "                        zero3 or fsdp\n"
    "                        (README, section --shard); needs --world; -o needs\n"
    "                        --emit-train FILE (the rank's step, which the plan names)\n"
    "      --world N         --shard: ranks in the job (1 to 65536)\n"
    "      --rank R          --shard: the rank planned (0 to N-1, default 0)\n"
    "      --bucket-mb MB    --shard: DDP's bucket_cap_mb (default 25; the first bucket\n"
    "                        closes at 1 MiB)\n"
    "      --wrap PATTERN    --shard fsdp: the wrap unit, modules whose name matches\n"
    "                        PATTERN (fnmatch, '*' within one name part: 'h.*'\n"
    "                        is h.0, h.1, ...; default: each transformer layer, the\n"
    "                        name up to its first number)\n"
    "      --prefetch D      --shard zero3|fsdp: units gathered ahead in the backward\n"
    "                        pass (default 1, FSDP's BACKWARD_PRE; 0: none); with\n"
    "                        --streams comm, each gather issued that many ahead\n"
    "      --no-sync         --shard zero2|zero3|fsdp, a step with --grad-accum: keep\n"
    "                        the whole gradients over the microbatches and reduce them\n"
    "                        once after the last (FSDP's no_sync()); default: reduce-\n"
    "                        scatter each microbatch's into the rank's shard (DeepSpeed's\n"
    "                        and FSDP's default)\n"
    "      --pipeline-stages P  plan the P stages of a pipeline (README, section\n"
    "                        --pipeline-stages); -o needs --emit-train FILE\n"
    "      --microbatches M  --pipeline-stages: microbatches per step (default P)\n"
    "      --schedule S      --pipeline-stages: 1f1b (default) or gpipe\n"
    "      --stage-cuts NAMES  --pipeline-stages: cut before these P-1 modules\n"
    "                        (default: balanced by time)\n"
    "      --stage S         --pipeline-stages: the stage written (default: the\n"
    "                        largest peak)\n"
    "      --align B         round sizes and offsets to B bytes, a power of two from 1\n"
    "                        to 2^30 (default: 512)\n"
    "      --report FMT      report as text (default) or json\n"
    "      --svg FILE        draw the layout and the live-memory curve into FILE\n"
    "  -q, --quiet           no report and no progress line; --report json and\n"
    "                        --max-batch still print their answer\n"
    "  -h, --help            this text (roamc help COMMAND: that command's)\n"
    "  -V, --version         the version\n"
    "\n"
    "files: every output (-o, --svg, --dump-tree, --emit-train) is checked before any\n"
    "work (a writable folder, not the model, not another output) and all are written\n"
    "together at the end, or none; a symlink is written through, a device or FIFO\n"
    "directly; new files get mode 0666 minus the umask.\n"
    "\n"
    "time limit: --time-limit S bounds the whole command, from start to exit; the\n"
    "same rule holds for roamc layout.  The solvers stop on work budgets, so plans\n"
    "do not depend on machine speed, and use the limit as a backstop: when it cuts\n"
    "a stage (ordering, layout, a --compare method, a --max-batch probe) the report\n"
    "says which.  --compare and --max-batch share S among their plans.  When S is\n"
    "shorter than the fastest valid plan needs (load, program order, bestfit layout,\n"
    "the self-check), roamc gives that plan and says the limit was too short.\n"
    "\n"
    "report terms: 'MI ops' (memory-insensitive) run at the same step in every order\n"
    "and cut the graph into segments; 'off the peak': leaves whose heuristic order\n"
    "stays below a peak other parts reach anyway, so solving them gains nothing;\n"
    "'floating ops': operators that may run far from where their result is used\n"
    "(an input copy, a view of a parameter), left out of that cut and placed after\n"
    "it; 'rule' names the placement that won (early when they read more than twice\n"
    "what they create, else just in time); 'placement': where the weight updates\n"
    "go ('rule': the paper's memory-aware rule, eqs. 4-6).\n"
    "\n"
    "progress: on a terminal, a line on stderr for stages that take a while, redrawn\n"
    "in place and cleared at the end; elsewhere (a file, a pipe) plain lines on\n"
    "stderr: one per stage that took a second or more, one per --max-batch batch\n"
    "decided.  -q silences both.\n"
    "\n"
    "interrupt: SIGINT or SIGTERM stops roamc with no output file written in part;\n"
    "it prints what was decided so far (--max-batch: each batch tried, its\n"
    "verdicts, the largest fitting so far) and dies by the signal (status 130\n"
    "or 143 as a shell reports it).\n"
    "\n"
    "exit status: 0 ok, 1 roamc failed, 2 bad input or usage, 3 the plan does not fit\n"
    "--budget (--max-batch: not even at batch 1; --fit: no changed step fits, or not\n"
    "within --max-overhead).\n";

static const char check_usage[] =
    "usage: roamc check MODEL.onnx PLAN.json [--input-shape NAME=D1,D2,...] [--dim SYMBOL=V]\n"
    "                   [--train [--loss L] [--optimizer O] [--frozen P]]\n"
    "\n"
    "Checks PLAN.json (roam-plan v1) against MODEL.onnx, sized under the same\n"
    "bindings as the plan was made with (without --input-shape/--dim: those the\n"
    "plan records; a plan made with --train and no --emit-train is checked\n"
    "against the step --train derives from MODEL, with its defaults unless\n"
    "--train and its options are given): a valid topological schedule keeping\n"
    "every in-place write's order, every tensor in one large-enough buffer live\n"
    "wherever it is used, no two live buffers overlapping, aligned offsets, and\n"
    "peaks equal to what the buffers give.  Prints VALID, or the first problems.\n"
    "\n"
    "exit status: 0 valid, 1 invalid, 2 unreadable model or plan, or bad usage.\n";

static const char shapes_usage[] =
    "usage: roamc shapes MODEL.onnx [--input-shape NAME=D1,D2,...] [--dim SYMBOL=V] [--report "
    "text|json]\n"
    "\n"
    "Prints every value's element type and shape as roamc infers them (unbound\n"
    "dims by their symbol), the producer, and whether the shape came from the\n"
    "file or from inference; --report json gives bytes, symbols and upper bounds.\n"
    "\n"
    "exit status: 0 ok, 1 write error, 2 unreadable model or bad usage.\n";

/* One message for a getopt failure (opterr is 0: getopt prints nothing,
 * so every message carries the one program name "roamc").  c is what
 * getopt_long returned: ':' for a missing value, '?' for an unknown or
 * ambiguous option. */
static int main_getopt_error(int c, char **argv, const char *cmd) {
    const char *arg = argv[optind - 1];
    char shortopt[3] = {'-', (char)optopt, 0};
    if (optopt && strncmp(arg, "--", 2) != 0) arg = shortopt;
    if (c == ':')
        fprintf(stderr, "roamc: option '%s' needs a value\n", arg);
    else
        fprintf(stderr, "roamc: unknown option '%s'\n", arg);
    fprintf(stderr, "Try 'roamc %s%s--help'.\n", cmd ? cmd : "", cmd ? " " : "");
    return 2;
}

/* When the command started: --time-limit counts from here. */
static double main_t_start;

/* The options every command that reads a model takes. */
enum { OPT_INPUT_SHAPE = 512, OPT_DIM };
#define MAIN_BINDING_OPTIONS                                                                       \
    {"input-shape", required_argument, NULL, OPT_INPUT_SHAPE}, {                                   \
        "dim", required_argument, NULL, OPT_DIM                                                    \
    }

/* Adds one --input-shape or --dim; returns 0, or 2 after a usage message. */
static int main_binding(fe_options *fopt, int c, const char *arg) {
    char err[512];
    if (fe_options_parse(fopt, c == OPT_DIM ? "--dim" : "--input-shape", arg, err, sizeof err) == 0)
        return 0;
    fprintf(stderr, "roamc: %s\nTry 'roamc --help'.\n", err);
    return 2;
}

static int main_usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "roamc: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'roamc --help'.\n");
    return 2;
}

/* Parses a positive integer that fits in uint64; -1 on anything else. */
static int main_parse_u64(const char *s, uint64_t *out) {
    if (!s || !*s || *s == '-') return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v == 0) return -1;
    *out = v;
    return 0;
}

/* --train and its options (frontend/train/train.c derives the step). */
enum {
    OPT_TRAIN = 400,
    OPT_LOSS,
    OPT_OPTIMIZER,
    OPT_FROZEN,
    OPT_EMIT_TRAIN,
    OPT_PRECISION,
    OPT_GRAD_ACCUM
};
#define MAIN_TRAIN_OPTIONS                                                                         \
    {"train", no_argument, NULL, OPT_TRAIN}, {"loss", required_argument, NULL, OPT_LOSS},          \
        {"optimizer", required_argument, NULL, OPT_OPTIMIZER},                                     \
        {"frozen", required_argument, NULL, OPT_FROZEN},                                           \
        {"precision", required_argument, NULL, OPT_PRECISION},                                     \
        {"grad-accum", required_argument, NULL, OPT_GRAD_ACCUM}, {                                 \
        "emit-train", required_argument, NULL, OPT_EMIT_TRAIN                                      \
    }
#define MAIN_MAX_FROZEN 256
typedef struct main_train {
    bool on, derive; /* --train given; --loss, --optimizer or --frozen given */
    fe_train_options t;
    const char *frozen[MAIN_MAX_FROZEN];
} main_train;

/* One --train option; returns 0, or 2 after a usage message. */
static int main_train_option(main_train *tr, int c, const char *arg) {
    if (c == OPT_TRAIN) tr->on = true;
    if (c == OPT_LOSS || c == OPT_OPTIMIZER || c == OPT_FROZEN || c == OPT_PRECISION ||
        c == OPT_GRAD_ACCUM)
        tr->derive = true;
    if (c == OPT_LOSS && fe_train_loss_parse(arg, &tr->t.loss))
        return main_usage_error("--loss is cross-entropy, mse or none, not '%s'", arg);
    if (c == OPT_OPTIMIZER && fe_train_optimizer_parse(arg, &tr->t.optimizer))
        return main_usage_error("--optimizer is adam, adamw, sgd, momentum or none, not '%s'", arg);
    if (c == OPT_PRECISION && fe_train_precision_parse(arg, &tr->t.precision))
        return main_usage_error("--precision is fp32, bf16, fp16, amp-bf16 or amp-fp16, not '%s'",
                                arg);
    if (c == OPT_GRAD_ACCUM && fe_train_grad_accum_parse(arg, &tr->t.grad_accum))
        return main_usage_error(
            "--grad-accum is a number of microbatches from 1 to 1024 (FE_MAX_GRAD_ACCUM), not '%s'",
            arg);
    if (c == OPT_FROZEN) {
        if (tr->t.n_frozen == MAIN_MAX_FROZEN)
            return main_usage_error("%s", "at most 256 --frozen patterns");
        tr->frozen[tr->t.n_frozen++] = arg;
        tr->t.frozen = tr->frozen;
    }
    if (c == OPT_EMIT_TRAIN) tr->t.emit_path = arg;
    return 0;
}

/* Loads the model, or with --train derives its training step (and prints
 * what was derived to report, when not NULL), and builds its graph: the
 * library's api_load, as roamc_plan_file runs it.  0, or 2 after a
 * message. */
static int main_load(const api_request *q, roamc_result *res, FILE *report) {
    roamc_status st = api_load(q, res);
    if (res->step.summary && report) {
        planner_progress_clear();
        fprintf(report, "roamc --train: %s\n%s", q->model_path, res->step.summary);
    }
    if (st != ROAMC_OK) {
        planner_progress_end();
        fprintf(stderr, "roamc: %s\n", res->error);
        return 2;
    }
    return 0;
}

/* What `roamc MODEL` was asked to do: its options, parsed and checked.
 * Not copied once parsed: train.t.frozen points into train. */
typedef struct main_plan_args {
    planner_options opt;
    const char *model_path, *out_path, *svg_path, *tree_path, *buffers_path, *method, *batch_symbol;
    planner_budget budget;
    int json_report, quiet, compare, order_or_layout, max_batch;
    main_train train;
    /* --fit: its mode (fit_mode bits, 0: no --fit), --max-overhead as a
     * fraction (< 0: none), the device profile */
    unsigned fit;
    double max_overhead;
    const char *device_name, *device_profile;
    api_pipe_state pipe; /* --pipeline-stages and the rest (api_pipe.h) */
} main_plan_args;

/* What an option parser returns to go on; any other value is the exit
 * status of the command, its message printed. */
enum { MAIN_CONTINUE = -1 };

static int main_plan_parse(int argc, char **argv, const struct option *longopts, fe_options *fopt,
                           main_plan_args *a);
static int main_plan_run(main_plan_args *a, const fe_options *fopt);

enum {
    OPT_ORDER = 256,
    OPT_LAYOUT,
    OPT_ALIGN,
    OPT_REPORT,
    OPT_SVG,
    OPT_NODE_LIMIT,
    OPT_DELAY_RADIUS,
    OPT_THREADS,
    OPT_TIME_LIMIT,
    OPT_DUMP_TREE,
    OPT_COMPARE,
    OPT_METHOD,
    OPT_BUDGET,
    OPT_RESERVE,
    OPT_MAX_BATCH,
    OPT_DUMP_BUFFERS,
    OPT_FIT,
    OPT_MAX_OVERHEAD,
    OPT_DEVICE,
    OPT_DEVICE_PROFILE
};
/* --shard and its options (planner/shard/) */
enum { OPT_SHARD = 700, OPT_WORLD, OPT_RANK, OPT_BUCKET_MB, OPT_WRAP, OPT_PREFETCH, OPT_NO_SYNC };
/* --streams and --comm-gbps (planner/streams/) */
enum { OPT_STREAMS = 720, OPT_COMM_GBPS };

static int main_plan(int argc, char **argv) {
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'},
        {"order", required_argument, NULL, OPT_ORDER},
        {"layout", required_argument, NULL, OPT_LAYOUT},
        {"align", required_argument, NULL, OPT_ALIGN},
        {"report", required_argument, NULL, OPT_REPORT},
        {"svg", required_argument, NULL, OPT_SVG},
        {"quiet", no_argument, NULL, 'q'},
        {"node-limit", required_argument, NULL, OPT_NODE_LIMIT},
        {"delay-radius", required_argument, NULL, OPT_DELAY_RADIUS},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"time-limit", required_argument, NULL, OPT_TIME_LIMIT},
        {"dump-tree", required_argument, NULL, OPT_DUMP_TREE},
        {"dump-buffers", required_argument, NULL, OPT_DUMP_BUFFERS},
        {"compare", no_argument, NULL, OPT_COMPARE},
        {"method", required_argument, NULL, OPT_METHOD},
        {"budget", required_argument, NULL, OPT_BUDGET},
        {"reserve", required_argument, NULL, OPT_RESERVE},
        {"max-batch", optional_argument, NULL, OPT_MAX_BATCH},
        {"fit", optional_argument, NULL, OPT_FIT},
        {"max-overhead", required_argument, NULL, OPT_MAX_OVERHEAD},
        {"device", required_argument, NULL, OPT_DEVICE},
        {"device-profile", required_argument, NULL, OPT_DEVICE_PROFILE},
        {"shard", required_argument, NULL, OPT_SHARD},
        {"world", required_argument, NULL, OPT_WORLD},
        {"rank", required_argument, NULL, OPT_RANK},
        {"bucket-mb", required_argument, NULL, OPT_BUCKET_MB},
        {"wrap", required_argument, NULL, OPT_WRAP},
        {"prefetch", required_argument, NULL, OPT_PREFETCH},
        {"no-sync", no_argument, NULL, OPT_NO_SYNC},
        {"streams", required_argument, NULL, OPT_STREAMS},
        {"comm-gbps", required_argument, NULL, OPT_COMM_GBPS},
        API_PIPE_OPTIONS,
        MAIN_BINDING_OPTIONS,
        MAIN_TRAIN_OPTIONS,
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0}};
    fe_options fopt = {0};
    main_plan_args a;
    int rc = main_plan_parse(argc, argv, longopts, &fopt, &a);
    if (rc == MAIN_CONTINUE) rc = main_plan_run(&a, &fopt);
    fe_options_free(&fopt);
    return rc;
}

/* --order, --layout or --method; MAIN_CONTINUE, or 2 after a usage message. */
static int main_plan_method_option(main_plan_args *a, int c, const char *arg) {
    if (c == OPT_ORDER) {
        if (planner_order_parse(arg, &a->opt.order))
            return main_usage_error("unknown order '%s' (choose from roam, program, lescea, ilp)",
                                    arg);
        a->order_or_layout = 1;
    } else if (c == OPT_LAYOUT) {
        if (planner_layout_parse(arg, &a->opt.layout))
            return main_usage_error(
                "unknown layout '%s' (choose from roam, llfb, greedy, bestfit, pytorch, ilp)", arg);
        a->order_or_layout = 1;
    } else {
        const planner_method *m = planner_method_find(arg);
        if (!m) {
            fprintf(stderr, "roamc: unknown method '%s' (choose from %s)\nTry 'roamc --help'.\n",
                    arg, planner_method_names());
            return 2;
        }
        planner_method_apply(m, &a->opt);
        a->method = arg;
    }
    return MAIN_CONTINUE;
}

/* --budget or --reserve; MAIN_CONTINUE, or 2 after a usage message. */
static int main_plan_budget_option(main_plan_args *a, int c, const char *arg) {
    char err[2048];
    planner_budget *b = &a->budget;
    if (c == OPT_RESERVE && strspn(arg, "0") == strlen(arg) && *arg)
        b->reserve = 0; /* "0" is the default */
    else if (planner_size_parse(arg, c == OPT_BUDGET ? &b->budget : &b->reserve, err, sizeof err))
        return main_usage_error(c == OPT_BUDGET ? "--budget: %s" : "--reserve: %s", err);
    *(c == OPT_BUDGET ? &b->budget_text : &b->reserve_text) = arg;
    return MAIN_CONTINUE;
}

/* --streams LIST and --comm-gbps G: the pass the plans go through
 * (planner/streams/streams.h), set up by main_plan_run. */
static struct {
    streams_options opt;
    planner_pass pass;
    const char *comm_text;
} main_streams = {.opt = {.prefetch = true, .comm_bytes_per_s = STREAMS_DEFAULT_COMM_GBPS * 1e9}};

/* One --streams option; MAIN_CONTINUE, or 2 after a usage message. */
static int main_streams_option(int c, const char *arg) {
    char err[512];
    if (c == OPT_STREAMS) {
        if (streams_parse(arg, &main_streams.opt, err, sizeof err))
            return main_usage_error("%s", err);
        return MAIN_CONTINUE;
    }
    char *end;
    errno = 0;
    double g = strtod(arg, &end);
    if (end == arg || *end || errno || !(g > 0 && g <= 1e6))
        return main_usage_error("--comm-gbps wants GB/s above 0 and at most 1000000, not '%s'",
                                arg);
    main_streams.opt.comm_bytes_per_s = g * 1e9;
    main_streams.comm_text = arg;
    return MAIN_CONTINUE;
}

/* --fit[=HOW], --max-overhead P, --device NAME or --device-profile FILE;
 * MAIN_CONTINUE, or 2 after a usage message. */
static int main_plan_fit_option(main_plan_args *a, int c, const char *arg) {
    if (c == OPT_FIT) {
        if (!arg || strcmp(arg, "both") == 0)
            a->fit = FIT_BOTH;
        else if (strcmp(arg, "recompute") == 0)
            a->fit = FIT_RECOMPUTE;
        else if (strcmp(arg, "offload") == 0)
            a->fit = FIT_OFFLOAD;
        else
            return main_usage_error("--fit is recompute, offload or both, not '%s'", arg);
    } else if (c == OPT_MAX_OVERHEAD) {
        char *end;
        errno = 0;
        double p = strtod(arg, &end);
        if (end != arg && *end == '%') end++;
        if (end == arg || *end || errno || !(p >= 0 && p <= 1e6))
            return main_usage_error("--max-overhead is a percentage from 0 to 1000000 (33%%), "
                                    "not '%s'",
                                    arg);
        a->max_overhead = p / 100.0;
    } else if (c == OPT_DEVICE)
        a->device_name = arg;
    else
        a->device_profile = arg;
    return MAIN_CONTINUE;
}

/* --align, --node-limit, --delay-radius, --threads or --time-limit;
 * MAIN_CONTINUE, or 2 after a usage message. */
static int main_plan_number_option(main_plan_args *a, int c, const char *arg) {
    char err[2048];
    uint64_t num;
    planner_options *opt = &a->opt;
    switch (c) {
    case OPT_ALIGN:
        /* offsets are multiples of align: a power of two, as every allocator's */
        if (planner_size_parse(arg, &opt->align, err, sizeof err) ||
            opt->align > ((uint64_t)1 << 30) || (opt->align & (opt->align - 1)))
            return main_usage_error(
                "--align wants a power of two from 1 to 2^30 (1G) bytes, not '%s'", arg);
        break;
    case OPT_NODE_LIMIT:
        if (main_parse_u64(arg, &num) || num > 100000)
            return main_usage_error("--node-limit wants 1 to 100000, not '%s'", arg);
        opt->node_limit = (int)num;
        break;
    case OPT_DELAY_RADIUS:
        if (strcmp(arg, "0") == 0)
            opt->delay_radius = 0;
        else if (main_parse_u64(arg, &num) || num > 100000)
            return main_usage_error("--delay-radius wants 0 to 100000, not '%s'", arg);
        else
            opt->delay_radius = (int)num;
        break;
    case OPT_THREADS:
        if (main_parse_u64(arg, &num) || num > 1024)
            return main_usage_error("--threads wants 1 to 1024, not '%s'", arg);
        opt->threads = (int)num;
        break;
    case OPT_TIME_LIMIT:
        if (planner_time_limit_parse(arg, &opt->time_limit, err, sizeof err))
            return main_usage_error("%s", err);
        break;
    }
    return MAIN_CONTINUE;
}

/* --shard, --world, --rank, --bucket-mb: the set-up, and which were given. */
typedef struct main_shard_args {
    shard_options so;
    bool world, rank, bucket, prefetch;
} main_shard_args;
static main_shard_args main_shard = {
    .so = {.bucket_mb = SHARD_DEFAULT_BUCKET_MB, .prefetch = SHARD_DEFAULT_PREFETCH}};

/* One --shard option; MAIN_CONTINUE, or 2 after a usage message. */
static int main_shard_option(int c, const char *arg) {
    uint64_t num;
    char *end;
    switch (c) {
    case OPT_SHARD:
        if (shard_kind_parse(arg, &main_shard.so.kind))
            return main_usage_error("--shard is ddp, zero1, zero2, zero3 or fsdp, not '%s'", arg);
        break;
    case OPT_WORLD:
        if (main_parse_u64(arg, &num) || num > SHARD_MAX_WORLD)
            return main_usage_error("--world is the number of ranks, 1 to 65536, not '%s'", arg);
        main_shard.so.world = (long)num, main_shard.world = true;
        break;
    case OPT_RANK:
        if (strcmp(arg, "0") != 0 && (main_parse_u64(arg, &num) || num >= SHARD_MAX_WORLD))
            return main_usage_error("--rank is a rank from 0 to --world - 1, not '%s'", arg);
        main_shard.so.rank = strcmp(arg, "0") == 0 ? 0 : (long)num, main_shard.rank = true;
        break;
    case OPT_WRAP: main_shard.so.wrap = arg; break;
    case OPT_NO_SYNC: main_shard.so.no_sync = true; break;
    case OPT_PREFETCH:
        if (strcmp(arg, "0") != 0 && (main_parse_u64(arg, &num) || num > SHARD_MAX_PREFETCH))
            return main_usage_error("--prefetch is 0 to 1024 units, not '%s'", arg);
        main_shard.so.prefetch = strcmp(arg, "0") == 0 ? 0 : (long)num, main_shard.prefetch = true;
        break;
    default:
        errno = 0;
        main_shard.so.bucket_mb = strtod(arg, &end);
        if (end == arg || *end || errno || !(main_shard.so.bucket_mb > 0) ||
            main_shard.so.bucket_mb > 1e6)
            return main_usage_error("--bucket-mb is a size in MiB above 0, at most 1000000, "
                                    "not '%s'",
                                    arg);
        main_shard.bucket = true;
    }
    return MAIN_CONTINUE;
}

/* The options --shard does not go with; MAIN_CONTINUE, or 2 after a
 * usage message. */
static int main_shard_check(const main_plan_args *a) {
    char err[512];
    const main_shard_args *s = &main_shard;
    if (!s->so.kind &&
        (s->world || s->rank || s->bucket || s->prefetch || s->so.wrap || s->so.no_sync))
        return main_usage_error("%s", "--world, --rank, --bucket-mb, --wrap, --prefetch and "
                                      "--no-sync need --shard KIND");
    if (s->prefetch && s->so.kind != SHARD_ZERO3 && s->so.kind != SHARD_FSDP)
        return main_usage_error("%s", "--prefetch is for --shard zero3 or fsdp (gathered units)");
    if (!s->so.kind) return MAIN_CONTINUE;
    if (!s->world) return main_usage_error("%s", "--shard needs --world N (the ranks in the job)");
    if (a->fit || a->compare)
        return main_usage_error("%s", "--shard plans one rank's step: not with --fit or --compare "
                                      "(yet)");
    if (a->out_path && !a->train.t.emit_path)
        return main_usage_error("%s", "--shard -o needs --emit-train FILE: the plan names the "
                                      "rank's step, which --emit-train writes");
    if (shard_check(&s->so, err, sizeof err)) return main_usage_error("%s", err);
    return MAIN_CONTINUE;
}

/* One option, c as getopt_long returned it; MAIN_CONTINUE, or the exit
 * status (0 after --help or --version, 2 after a usage message). */
static int main_plan_option(main_plan_args *a, fe_options *fopt, int c, char **argv) {
    switch (c) {
    case 'o': a->out_path = optarg; break;
    case OPT_TRAIN:
    case OPT_LOSS:
    case OPT_OPTIMIZER:
    case OPT_FROZEN:
    case OPT_PRECISION:
    case OPT_GRAD_ACCUM:
    case OPT_EMIT_TRAIN:
        if (main_train_option(&a->train, c, optarg)) return 2;
        break;
    case 'q': a->quiet = 1; break;
    case 'h': fputs(usage_text, stdout); return 0;
    case 'V': printf("roamc %s\n", ROAMC_VERSION); return 0;
    case OPT_ORDER:
    case OPT_LAYOUT:
    case OPT_METHOD: return main_plan_method_option(a, c, optarg);
    case OPT_BUDGET:
    case OPT_RESERVE: return main_plan_budget_option(a, c, optarg);
    case OPT_MAX_BATCH:
        a->max_batch = 1;
        a->batch_symbol = optarg;
        break;
    case OPT_FIT:
    case OPT_MAX_OVERHEAD:
    case OPT_DEVICE:
    case OPT_DEVICE_PROFILE: return main_plan_fit_option(a, c, optarg);
    case OPT_SHARD:
    case OPT_WORLD:
    case OPT_RANK:
    case OPT_BUCKET_MB:
    case OPT_WRAP:
    case OPT_PREFETCH:
    case OPT_NO_SYNC: return main_shard_option(c, optarg);
    case OPT_STREAMS:
    case OPT_COMM_GBPS: return main_streams_option(c, optarg);
    case API_PIPE_OPT_STAGES:
    case API_PIPE_OPT_MICROBATCHES:
    case API_PIPE_OPT_SCHEDULE:
    case API_PIPE_OPT_CUTS:
    case API_PIPE_OPT_STAGE: return api_pipe_option(&a->pipe, c, optarg) ? 2 : MAIN_CONTINUE;
    case OPT_ALIGN:
    case OPT_NODE_LIMIT:
    case OPT_DELAY_RADIUS:
    case OPT_THREADS:
    case OPT_TIME_LIMIT: return main_plan_number_option(a, c, optarg);
    case OPT_SVG: a->svg_path = optarg; break;
    case OPT_DUMP_TREE: a->tree_path = optarg; break;
    case OPT_DUMP_BUFFERS: a->buffers_path = optarg; break;
    case OPT_COMPARE: a->compare = 1; break;
    case OPT_INPUT_SHAPE:
    case OPT_DIM:
        if (main_binding(fopt, c, optarg)) return 2;
        break;
    case OPT_REPORT:
        if (strcmp(optarg, "json") == 0)
            a->json_report = 1;
        else if (strcmp(optarg, "text") == 0)
            a->json_report = 0;
        else
            return main_usage_error("--report is text or json, not '%s'", optarg);
        break;
    default: return main_getopt_error(c, argv, NULL);
    }
    return MAIN_CONTINUE;
}

/* The options that do not go together, and the one model; sets what
 * follows from the options together (the device limit, the deadline,
 * progress).  MAIN_CONTINUE, or 2 after a usage message. */
static int main_plan_check_args(main_plan_args *a, int argc, char **argv) {
    planner_options *opt = &a->opt;
    const planner_budget *budget = &a->budget;
    if (optind != argc - 1)
        return main_usage_error("%s", optind >= argc ? "no model given" : "one model at a time");
    if (a->method && a->order_or_layout)
        return main_usage_error("%s",
                                "--method sets the order and the layout: give one or the other");
    if (a->method && a->compare)
        return main_usage_error("%s", "--compare plans every method: drop --method");
    if (budget->reserve_text && !budget->budget_text)
        return main_usage_error("%s", "--reserve needs --budget");
    if (a->max_batch && !budget->budget_text)
        return main_usage_error("%s", "--max-batch needs --budget SIZE");
    if (budget->budget_text && a->compare)
        return main_usage_error("%s", "--budget works on one plan, not with --compare");
    if (a->max_batch && a->tree_path)
        return main_usage_error("%s", "--dump-tree draws one plan's tree, not with --max-batch");
    if (a->max_batch && a->buffers_path)
        return main_usage_error("%s",
                                "--dump-buffers writes one plan's buffers, not with --max-batch");
    if (budget->reserve >= budget->budget && budget->budget_text)
        return main_usage_error("%s", "--reserve must be below --budget");
    /* the allocator replay sees the device's limit, as PyTorch does */
    if (budget->budget_text && opt->layout == PLANNER_LAYOUT_PYTORCH)
        opt->device_limit = budget->budget - budget->reserve;
    if (a->batch_symbol && !*a->batch_symbol)
        return main_usage_error("%s", "--max-batch= needs a symbol name");
    if (!a->train.on && (a->train.derive || (a->train.t.emit_path && !a->fit &&
                                             !main_shard.so.kind && !api_pipe_on(&a->pipe))))
        return main_usage_error("%s",
                                "--loss, --optimizer, --frozen, --precision, --grad-accum and "
                                "--emit-train need --train");
    if (a->fit && !budget->budget_text) return main_usage_error("%s", "--fit needs --budget SIZE");
    if (a->fit && a->compare)
        return main_usage_error("%s", "--fit changes one step: not with --compare");
    if (a->fit && a->out_path && !a->train.t.emit_path)
        return main_usage_error("%s", "--fit -o needs --emit-train FILE: the plan names the step "
                                      "it plans, which --fit may change");
    if (!a->fit && a->max_overhead >= 0)
        return main_usage_error("%s", "--max-overhead needs --fit");
    if (!a->fit && !main_streams.opt.kinds && (a->device_name || a->device_profile))
        return main_usage_error("%s", "--device and --device-profile need --fit or --streams");
    if (main_streams.comm_text && !(main_streams.opt.kinds & STREAMS_COMM))
        return main_usage_error("%s", "--comm-gbps needs --streams comm (or all)");
    if (a->device_name && a->device_profile)
        return main_usage_error("%s", "--device or --device-profile: give one");
    if (a->train.t.emit_path && a->max_batch && !a->fit)
        return main_usage_error("%s", "--emit-train writes one step: give it without --max-batch "
                                      "(bind the batch with --dim)");
    /* --time-limit bounds the whole command, from its start */
    opt->deadline = main_t_start + opt->time_limit;
    if (a->tree_path && !a->compare && opt->order != PLANNER_ORDER_ROAM)
        return main_usage_error(
            "%s",
            "--dump-tree writes the subgraph tree of order roam: give --order roam or --compare");
    /* off a terminal (a log, a pipe), lines that stay rather than a line
     * redrawn in place */
    opt->progress = a->quiet                ? 0
                    : isatty(STDERR_FILENO) ? PLANNER_PROGRESS_LINE
                                            : PLANNER_PROGRESS_LOG;
    a->model_path = argv[optind];
    return MAIN_CONTINUE;
}

/* Parses the command line into a (bindings into fopt) and checks it.
 * MAIN_CONTINUE to run, or the exit status, its message printed. */
static int main_plan_parse(int argc, char **argv, const struct option *longopts, fe_options *fopt,
                           main_plan_args *a) {
    *a = (main_plan_args){.opt = {.align = 512,
                                  .order = PLANNER_ORDER_ROAM,
                                  .layout = PLANNER_LAYOUT_ROAM,
                                  .node_limit = PLANNER_DEFAULT_NODE_LIMIT,
                                  .delay_radius = PLANNER_DEFAULT_DELAY_RADIUS,
                                  .time_limit = PLANNER_DEFAULT_TIME_LIMIT},
                          .max_overhead = -1,
                          .pipe = API_PIPE_STATE_INIT};
    int c, rc;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:qhV", longopts, NULL)) != -1)
        if ((rc = main_plan_option(a, fopt, c, argv)) != MAIN_CONTINUE) return rc;
    return main_plan_check_args(a, argc, argv);
}

/* The device profile --fit costs with: --device-profile FILE, --device
 * NAME, or the H100.  NULL after a message. */
static const fit_device *main_fit_device(const main_plan_args *a, fit_device *loaded) {
    char err[2048];
    if (a->device_profile) {
        if (fit_device_load(a->device_profile, loaded, err, sizeof err)) {
            fprintf(stderr, "roamc: --device-profile %s\n", err);
            return NULL;
        }
        return loaded;
    }
    const fit_device *d = fit_device_find(a->device_name ? a->device_name : "h100");
    if (!d)
        fprintf(stderr, "roamc: --device: no profile named '%s' (h100, a100, l4, 4090, gh200)\n",
                a->device_name);
    return d;
}

/* --max-batch: the largest batch that fits the budget, reported to report
 * (the library's api_max_batch, as roamc_plan_file runs it).  Its exit
 * status. */
static int main_plan_max_batch(const main_plan_args *a, const fe_options *fopt, FILE *report) {
    fit_device loaded;
    const fit_device *device = a->fit ? main_fit_device(a, &loaded) : NULL;
    if (a->fit && !device) return 2;
    api_batch_run b = {.q = {.model_path = a->model_path,
                             .bindings = fopt,
                             .symbol = a->batch_symbol,
                             .opt = a->opt,
                             .budget = &a->budget,
                             .out_path = a->out_path,
                             .emit_path = a->fit ? a->train.t.emit_path : NULL,
                             .svg_path = a->svg_path,
                             .json = a->json_report,
                             .quiet = a->quiet,
                             .progress = a->opt.progress,
                             .train = a->train.on ? &a->train.t : NULL,
                             .fit = a->fit,
                             .max_overhead = a->max_overhead,
                             .device = device,
                             .shard = main_shard.so.kind ? &main_shard.so : NULL,
                             .pipe = api_pipe_on(&a->pipe) ? &a->pipe.po : NULL},
                       .report = report};
    roamc_result *res = api_result_new();
    roamc_status st = api_max_batch(&b, res);
    planner_progress_end();
    if (st == ROAMC_ERROR || st == ROAMC_BAD_INPUT) fprintf(stderr, "roamc: %s\n", res->error);
    roamc_result_free(res);
    return (int)st; /* roamc_status: the exit status */
}

/* Plans the loaded step (the library's api_plan, as roamc_plan_file runs
 * it: one plan, --fit, --shard, --pipeline-stages or --compare, with
 * --budget's verdict beside PyTorch's plan), writes the files and prints
 * the report.  Its exit status: 0, 1 or 2 after a message, or
 * PLANNER_EXIT_NO_FIT (the plan does not fit --budget; --fit: no changed
 * step fits, or not within --max-overhead). */
static int main_plan_result(const main_plan_args *a, api_request *q, roamc_result *res,
                            planner_files *files, FILE *report) {
    char err[2048];
    fit_device loaded;
    if (a->fit && !(q->device = main_fit_device(a, &loaded))) return 2;
    roamc_status st = api_plan(q, res);
    if (st != ROAMC_OK && st != ROAMC_NO_FIT) {
        planner_progress_end();
        fprintf(stderr, "roamc: %s\n", res->error);
        return st == ROAMC_BAD_INPUT ? 2 : 1; /* bad input: a step that cannot be cut so */
    }
    int rc = 0;
    if (res->write_plan) {
        /* plan, tree, picture and step together, or none of them */
        if (res->mode == API_PLAIN) planner_progress_prefix("%s", "writing");
        if (res->mode == API_COMPARE) planner_progress_prefix("%s", "--compare: writing");
        if (api_files_write(res, files, err, sizeof err)) {
            planner_progress_end();
            fprintf(stderr, "roamc: %s\n", err);
            rc = 1;
        }
    }
    /* the whole command's seconds: --fit, --shard and --pipeline-stages plan
     * more than the plan written, whose own clocks count only it */
    if (res->mode != API_COMPARE && res->main) res->main->times.total = roamc_now() - main_t_start;
    planner_progress_end();
    if (rc == 0 && report) api_report(report, res, files, a->json_report);
    /* a costly answer is still an answer (exit 0), but one a log must show
     * even where nobody reads the report */
    char warn[256];
    if (rc == 0 && res->mode == API_CHANGED && res->changer->warning && !a->quiet &&
        report != stderr && res->changer->warning(res->changed, warn, sizeof warn))
        fprintf(stderr, "roamc: warning: --%s: %s\n", res->changer->name, warn);
    if (rc == 0 && st == ROAMC_NO_FIT) {
        if (res->judged) fprintf(stderr, "roamc: %s\n", res->error);
        rc = PLANNER_EXIT_NO_FIT;
    }
    return rc;
}

/* Runs the parsed command: checks every output, then searches the
 * largest batch, or loads the model and plans it once or every way
 * (--compare).  Its exit status. */
static int main_plan_run(main_plan_args *a, const fe_options *fopt) {
    char err[2048];
    const char *model_path = a->model_path;
    int shard_rc = main_shard_check(a);
    if (shard_rc != MAIN_CONTINUE) return shard_rc;
    if (main_streams.opt.kinds) {
        /* every plan of the command goes through the pass: the device it times with */
        fit_device loaded;
        const fit_device *d = main_fit_device(a, &loaded);
        if (!d) return 2;
        main_streams.opt.device = *d;
        /* a gathered set-up's --prefetch also issues each gather that far ahead */
        if (main_shard.so.kind == SHARD_ZERO3 || main_shard.so.kind == SHARD_FSDP)
            main_streams.opt.gather_ahead = main_shard.so.prefetch;
        streams_pass_init(&main_streams.pass, &main_streams.opt);
        a->opt.pass = &main_streams.pass;
    }
    api_pipe_run pipe = {.state = &a->pipe,
                         .opt = &a->opt,
                         .budget = &a->budget,
                         .emit_path = a->train.t.emit_path,
                         .out_path = a->out_path,
                         .json = a->json_report,
                         .fit = a->fit != 0,
                         .compare = a->compare != 0,
                         .shard = main_shard.so.kind != 0,
                         .max_batch = a->max_batch != 0};
    if (api_pipe_check(&pipe)) return 2;
    /* Every output checked before any work: a bad path costs nothing and
     * never clobbers the model or another output. */
    planner_output_set outs = {0};
    planner_outputs_add(&outs, "-o", a->out_path);
    planner_outputs_add(&outs, "--svg", a->svg_path);
    planner_outputs_add(&outs, "--dump-tree", a->tree_path);
    planner_outputs_add(&outs, "--dump-buffers", a->buffers_path);
    planner_outputs_add(&outs, "--emit-train", a->train.t.emit_path);
    const char *inputs[1] = {model_path};
    if (planner_outputs_check(&outs, inputs, 1, err, sizeof err)) {
        fprintf(stderr, "roamc: %s\n", err);
        return 2;
    }
    if (a->train.t.emit_path && strcmp(a->train.t.emit_path, "-") == 0)
        return main_usage_error(
            "%s", "--emit-train writes a file the plan names: give a file name, not -");
    /* with an output on stdout, the report goes to stderr; -q keeps the
     * answer of --report json and --max-batch (no progress, no table) */
    FILE *report = a->quiet && !a->json_report && !a->max_batch ? NULL
                   : planner_outputs_uses_stdout(&outs)         ? stderr
                                                                : stdout;
    planner_files files = {
        .plan = a->out_path, .svg = a->svg_path, .tree = a->tree_path, .buffers = a->buffers_path};

    planner_progress_start(a->opt.progress);
    if (a->max_batch) return main_plan_max_batch(a, fopt, report);
    planner_progress_stage("loading %s", model_path);
    /* the same request roamc_plan_file makes of its options */
    api_request q = {.model_path = model_path,
                     .bindings = fopt,
                     .train = a->train.on ? &a->train.t : NULL,
                     .emit_path = a->train.t.emit_path,
                     .opt = a->opt,
                     .budget = a->budget,
                     .fit = a->fit,
                     .max_overhead = a->max_overhead,
                     .shard = main_shard.so.kind ? &main_shard.so : NULL,
                     .pipeline = api_pipe_on(&a->pipe) ? &a->pipe.po : NULL,
                     .compare = a->compare != 0,
                     .summary = true};
    roamc_result *res = api_result_new();
    int rc = main_load(&q, res, a->json_report ? NULL : report);
    if (rc == 0) rc = main_plan_result(a, &q, res, &files, report);
    roamc_result_free(res);
    return rc;
}

/* `roamc check MODEL PLAN [bindings]` and `roamc shapes MODEL [bindings]
 * [--report json]`: argv[0] is the command. */
static int main_check_or_shapes(int argc, char **argv) {
    static const struct option longopts[] = {MAIN_BINDING_OPTIONS,
                                             MAIN_TRAIN_OPTIONS,
                                             {"report", required_argument, NULL, OPT_REPORT},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    bool check = strcmp(argv[0], "check") == 0;
    fe_options fopt = {.allow_unresolved = !check};
    main_train tr = {0};
    int json = 0, c, rc = 0;
    optind = 1;
    opterr = 0;
    while (rc == 0 && (c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h':
            fputs(check ? check_usage : shapes_usage, stdout);
            fe_options_free(&fopt);
            return 0;
        case OPT_INPUT_SHAPE:
        case OPT_DIM: rc = main_binding(&fopt, c, optarg); break;
        case OPT_TRAIN: /* check: the plan is of the step --train derives */
        case OPT_LOSS:
        case OPT_OPTIMIZER:
        case OPT_FROZEN:
            rc = check ? main_train_option(&tr, c, optarg) : main_getopt_error('?', argv, argv[0]);
            break;
        case OPT_EMIT_TRAIN:
            rc = main_usage_error("%s", "--emit-train writes a step: check reads one (give the "
                                        "file --emit-train wrote as MODEL.onnx)");
            break;
        case OPT_REPORT:
            if (!check && (strcmp(optarg, "json") == 0 || strcmp(optarg, "text") == 0))
                json = optarg[0] == 'j';
            else
                rc = check ? main_usage_error(
                                 "%s", "check prints VALID or INVALID lines: it takes no --report")
                           : main_usage_error("--report is text or json, not '%s'", optarg);
            break;
        default: rc = main_getopt_error(c, argv, argv[0]); break;
        }
    }
    if (rc == 0 && argc - optind != (check ? 2 : 1))
        rc = main_usage_error("%s", check ? "check wants MODEL.onnx PLAN.json"
                                          : "shapes wants one MODEL.onnx");
    if (rc == 0 && check && !tr.on && tr.derive)
        rc = main_usage_error("%s", "--loss, --optimizer and --frozen need --train");
    if (rc == 0 && check)
        rc = plan_check_file(argv[optind], &fopt, tr.on ? &tr.t : NULL, argv[optind + 1], stdout,
                             stderr);
    else if (rc == 0) {
        char err[2048];
        fe_model m;
        if (fe_load(argv[optind], &fopt, &m, err, sizeof err)) {
            fprintf(stderr, "roamc: %s\n", err);
            rc = 2;
        } else {
            if (planner_shapes_print(stdout, &m, json)) rc = 1;
            fe_free(&m);
        }
    }
    fe_options_free(&fopt);
    return rc;
}

/* `roamc help [COMMAND]`: the help of the command (plan: the main one). */
static int main_help(int argc, char **argv) {
    const char *cmd = argc >= 2 ? argv[1] : "plan";
    if (argc > 2)
        return main_usage_error("%s",
                                "help takes one command: plan, check, shapes, layout or explain");
    if (strcmp(cmd, "plan") == 0)
        fputs(usage_text, stdout);
    else if (strcmp(cmd, "check") == 0)
        fputs(check_usage, stdout);
    else if (strcmp(cmd, "shapes") == 0)
        fputs(shapes_usage, stdout);
    else if (strcmp(cmd, "layout") == 0) {
        char *args[] = {"layout", "--help", NULL};
        return cmd_layout(2, args);
    } else if (strcmp(cmd, "explain") == 0) {
        char *args[] = {"explain", "--help", NULL};
        return cmd_explain(2, args);
    } else {
        fprintf(stderr,
                "roamc: no command '%s' (choose from plan, check, shapes, layout, explain)\nTry "
                "'roamc --help'.\n",
                cmd);
        return 2;
    }
    return 0;
}

/* SIGINT, SIGTERM: removes the temporaries of outputs not yet written (no
 * partial file), says so and prints what the run had decided (the
 * progress notes: for --max-batch, each batch's verdicts and the largest
 * fitting so far), then dies by the signal as the default action would
 * (a shell reports 128 + N: 130, 143).  Async-signal-safe calls only. */
static void main_interrupted(int sig) {
    int saved = errno;
    roamc_outputs_abandon();
    const char *notes;
    size_t n = planner_progress_notes(&notes);
    static const char clear[] = "\r\033[K";
    static const char head_int[] = "roamc: interrupted by SIGINT",
                      head_term[] = "roamc: interrupted by SIGTERM";
    static const char tail[] = ": stopped, no output file left partly written\n",
                      decided[] = "roamc: decided before the interrupt:\n";
    ssize_t w = 0;
    if (planner_progress_drawn()) w += write(STDERR_FILENO, clear, sizeof clear - 1);
    if (sig == SIGINT)
        w += write(STDERR_FILENO, head_int, sizeof head_int - 1);
    else
        w += write(STDERR_FILENO, head_term, sizeof head_term - 1);
    w += write(STDERR_FILENO, tail, sizeof tail - 1);
    if (n) {
        w += write(STDERR_FILENO, decided, sizeof decided - 1);
        w += write(STDERR_FILENO, notes, n);
    }
    (void)w; /* nothing to do about a failed write here */
    errno = saved;
    raise(sig); /* SA_RESETHAND: the default action, now */
}

int main(int argc, char **argv) {
    main_t_start = roamc_now();
    struct sigaction sa = {.sa_handler = main_interrupted, .sa_flags = SA_RESETHAND | SA_NODEFER},
                     was;
    sigemptyset(&sa.sa_mask);
    /* a signal ignored from the start stays so (a shell's `roamc ... &`
     * ignores SIGINT, so that ^C stops the foreground job alone) */
    int sigs[2] = {SIGINT, SIGTERM};
    for (int i = 0; i < 2; i++)
        if (sigaction(sigs[i], NULL, &was) == 0 && was.sa_handler != SIG_IGN)
            sigaction(sigs[i], &sa, NULL);
    /* jansson allocates through base.h's allocators, so the out-of-memory
     * policy (end the process with a message) covers every JSON value too:
     * the plan, the reports, --dump-tree, roamc check's parse. */
    json_set_alloc_funcs(xmalloc, free);
    int rc;
    if (argc >= 2 && strcmp(argv[1], "help") == 0)
        rc = main_help(argc - 1, argv + 1);
    else if (argc >= 2 && (strcmp(argv[1], "check") == 0 || strcmp(argv[1], "shapes") == 0))
        rc = main_check_or_shapes(argc - 1, argv + 1);
    else if (argc >= 2 && strcmp(argv[1], "layout") == 0)
        rc = cmd_layout(argc - 1, argv + 1);
    else if (argc >= 2 && strcmp(argv[1], "explain") == 0)
        rc = cmd_explain(argc - 1, argv + 1);
    else
        rc = main_plan(argc, argv);
    planner_progress_end(); /* the progress line never outlives the command */
    return rc;
}
