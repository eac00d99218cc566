/* `roamc explain PLAN.json [MODEL]`: what is live at the peak of a plan
 * file, against the model plan_model.h finds for it (explain.h). */
#include "explain.h"
#include "plan_model.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

static const char explain_usage[] =
    "usage: roamc explain PLAN.json [MODEL.onnx] [--input-shape ...] [--dim ...]\n"
    "                     [--train [--loss L] [--optimizer O] [--frozen P]] [--top N]\n"
    "                     [--report text|json]\n"
    "\n"
    "What is live at the peak step of PLAN.json: the step and its operator, the\n"
    "bytes per kind (parameter, gradient, optimizer state, saved activation,\n"
    "temporary, input, output, host copy) and per module, and the N largest\n"
    "storages (default 20) with their kind, producer, module and lifetime.\n"
    "MODEL defaults to the plan's \"model\" (from here, else from the plan's folder\n"
    "or one above it); the bindings the plan records are\n"
    "used unless --input-shape/--dim are given; a plan of a step --train derived\n"
    "(without --emit-train) is explained against the step derived again.\n"
    "\n"
    "exit status: 0 ok, 1 write error, 2 unreadable plan or model, or bad usage.\n";

/* Lifetimes per storage from the plan's buffers and host_buffers (-1 where
 * no buffer names one of the storage's tensors); returns how many storages
 * no buffer names. */
static size_t explain_lifetimes(const graph *g, json_t *plan, int32_t *start, int32_t *end) {
    for (size_t s = 0; s < g->n_storages; s++) start[s] = end[s] = -1;
    const char *keys[2] = {"buffers", "host_buffers"};
    for (int k = 0; k < 2; k++) {
        json_t *bufs = json_object_get(plan, keys[k]);
        for (size_t i = 0; i < json_array_size(bufs); i++) {
            json_t *b = json_array_get(bufs, i);
            json_t *js = json_object_get(b, "start"), *je = json_object_get(b, "end");
            json_t *tens = json_object_get(b, "tensors");
            if (!json_is_integer(js) || !json_is_integer(je)) continue;
            json_int_t a = json_integer_value(js), e = json_integer_value(je);
            if (a < 0 || e < a || e >= (json_int_t)g->n_ops) continue;
            for (size_t t = 0; t < json_array_size(tens); t++) {
                json_t *tn = json_array_get(tens, t);
                int v = json_is_string(tn) ? fe_find_value(g->model, json_string_value(tn)) : -1;
                if (v < 0) continue;
                int s = g->storage_of[v];
                if (start[s] < 0) start[s] = (int32_t)a, end[s] = (int32_t)e;
            }
        }
    }
    size_t missing = 0;
    for (size_t s = 0; s < g->n_storages; s++) missing += start[s] < 0;
    return missing;
}

/* The plan's schedule into order (n_ops): 0, or -1 when it is no
 * permutation of the ops. */
static int explain_schedule(const graph *g, json_t *plan, int *order) {
    json_t *sched = json_object_get(plan, "schedule");
    if (!json_is_array(sched) || json_array_size(sched) != g->n_ops) return -1;
    bool *seen = xcalloc(g->n_ops ? g->n_ops : 1, sizeof *seen);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < g->n_ops; i++) {
        json_t *v = json_array_get(sched, i);
        json_int_t x = json_is_integer(v) ? json_integer_value(v) : -1;
        if (x < 0 || x >= (json_int_t)g->n_ops || seen[x])
            rc = -1;
        else
            seen[x] = true, order[i] = (int)x;
    }
    free(seen);
    return rc;
}

/* The plan's identity against the loaded model (PLAN_FORMAT.md): 0, or -1
 * with a message. */
static int explain_identity(const planner_step *step, json_t *plan, const char *plan_path,
                            const char *model_path, char *err, size_t errlen) {
    char model_hex[65], sizes_hex[65];
    plan_model_digests(&step->m, model_hex, sizes_hex);
    const char *ms = plan_json_str(plan, "model_sha256"), *ss = plan_json_str(plan, "sizes_sha256");
    if (ms && strcmp(ms, model_hex) != 0)
        return roamc_errorf(err, errlen,
                            "%s: the plan was made for another model than %s (SHA-256 %.16s... "
                            "against %.16s...): give the model it names",
                            plan_path, model_path, ms, model_hex);
    if (ss && strcmp(ss, sizes_hex) != 0)
        return roamc_errorf(err, errlen,
                            "%s: the plan was made for %s sized otherwise: give the "
                            "--input-shape/--dim bindings it was made with",
                            plan_path, model_path);
    return 0;
}

typedef struct explain_args {
    const char *plan_path, *model_path;
    fe_options bindings;
    fe_train_options train;
    const char *frozen[256];
    bool train_on;
    size_t top;
    int json;
} explain_args;

enum {
    EXPLAIN_OPT_INPUT_SHAPE = 900,
    EXPLAIN_OPT_DIM,
    EXPLAIN_OPT_TRAIN,
    EXPLAIN_OPT_LOSS,
    EXPLAIN_OPT_OPTIMIZER,
    EXPLAIN_OPT_FROZEN,
    EXPLAIN_OPT_TOP,
    EXPLAIN_OPT_REPORT
};

static int explain_usage_error(const char *msg, const char *arg) {
    fprintf(stderr, "roamc: ");
    fprintf(stderr, msg, arg);
    fprintf(stderr, "\nTry 'roamc explain --help'.\n");
    return 2;
}

/* One option; -1 to go on, else the exit status (its message printed). */
static int explain_option(explain_args *a, int c, const char *arg) {
    char err[512];
    char *end;
    switch (c) {
    case 'h': fputs(explain_usage, stdout); return 0;
    case EXPLAIN_OPT_INPUT_SHAPE:
    case EXPLAIN_OPT_DIM:
        if (fe_options_parse(&a->bindings, c == EXPLAIN_OPT_DIM ? "--dim" : "--input-shape", arg,
                             err, sizeof err))
            return explain_usage_error("%s", err);
        return -1;
    case EXPLAIN_OPT_TRAIN: a->train_on = true; return -1;
    case EXPLAIN_OPT_LOSS:
        if (fe_train_loss_parse(arg, &a->train.loss))
            return explain_usage_error("--loss is cross-entropy, mse or none, not '%s'", arg);
        return -1;
    case EXPLAIN_OPT_OPTIMIZER:
        if (fe_train_optimizer_parse(arg, &a->train.optimizer))
            return explain_usage_error(
                "--optimizer is adam, adamw, sgd, momentum or none, not '%s'", arg);
        return -1;
    case EXPLAIN_OPT_FROZEN:
        if (a->train.n_frozen == sizeof a->frozen / sizeof a->frozen[0])
            return explain_usage_error("%s", "at most 256 --frozen patterns");
        a->frozen[a->train.n_frozen++] = arg;
        a->train.frozen = a->frozen;
        return -1;
    case EXPLAIN_OPT_TOP:
        errno = 0;
        a->top = (size_t)strtoul(arg, &end, 10);
        if (!*arg || *arg == '-' || *end || errno || a->top > 100000)
            return explain_usage_error("--top wants 0 to 100000, not '%s'", arg);
        return -1;
    case EXPLAIN_OPT_REPORT:
        if (strcmp(arg, "json") != 0 && strcmp(arg, "text") != 0)
            return explain_usage_error("--report is text or json, not '%s'", arg);
        a->json = arg[0] == 'j';
        return -1;
    case ':': return explain_usage_error("option '%s' needs a value", arg);
    default: return explain_usage_error("unknown option '%s'", arg);
    }
}

static int explain_parse(int argc, char **argv, explain_args *a) {
    static const struct option longopts[] = {
        {"input-shape", required_argument, NULL, EXPLAIN_OPT_INPUT_SHAPE},
        {"dim", required_argument, NULL, EXPLAIN_OPT_DIM},
        {"train", no_argument, NULL, EXPLAIN_OPT_TRAIN},
        {"loss", required_argument, NULL, EXPLAIN_OPT_LOSS},
        {"optimizer", required_argument, NULL, EXPLAIN_OPT_OPTIMIZER},
        {"frozen", required_argument, NULL, EXPLAIN_OPT_FROZEN},
        {"top", required_argument, NULL, EXPLAIN_OPT_TOP},
        {"report", required_argument, NULL, EXPLAIN_OPT_REPORT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int c, rc;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1)
        if ((rc = explain_option(a, c, c == ':' || c == '?' ? argv[optind - 1] : optarg)) >= 0)
            return rc;
    if (a->train.n_frozen || a->train.loss || a->train.optimizer)
        if (!a->train_on)
            return explain_usage_error("%s", "--loss, --optimizer and --frozen need --train");
    if (argc - optind < 1 || argc - optind > 2)
        return explain_usage_error("%s", "explain wants PLAN.json and, optionally, MODEL.onnx");
    a->plan_path = argv[optind];
    a->model_path = argc - optind == 2 ? argv[optind + 1] : NULL;
    return -1;
}

/* Explains the plan of a loaded step: what is live at its peak, to stdout. */
static int explain_print(const explain_args *a, const planner_step *step, json_t *plan,
                         const char *model_path, const char *note) {
    const graph *g = &step->g;
    int *order = xmallocarray(g->n_ops ? g->n_ops : 1, sizeof *order);
    int32_t *start = xmallocarray(g->n_storages ? g->n_storages : 1, sizeof *start);
    int32_t *end = xmallocarray(g->n_storages ? g->n_storages : 1, sizeof *end);
    int rc = 0;
    if (explain_schedule(g, plan, order)) {
        fprintf(stderr,
                "roamc: %s: the schedule is not a permutation of the %zu nodes of %s: roamc check "
                "says what is wrong\n",
                a->plan_path, g->n_ops, model_path);
        rc = 2;
    }
    size_t missing = rc ? 0 : explain_lifetimes(g, plan, start, end);
    planner_peak_live pl = {0};
    if (rc == 0 && planner_peak_live_build(g, order, start, end, &pl)) {
        fprintf(stderr, "roamc: %s: %s has no operator\n", a->plan_path, model_path);
        rc = 2;
    }
    json_t *peak = json_object_get(plan, "peak");
    json_t *jt = json_object_get(peak, "theoretical"), *ja = json_object_get(peak, "actual");
    long long claimed = json_is_integer(jt) ? (long long)json_integer_value(jt) : -1;
    long long actual = json_is_integer(ja) ? (long long)json_integer_value(ja) : -1;
    if (rc == 0 && a->json) {
        json_t *r = json_object();
        json_object_set_new(r, "plan", json_string(a->plan_path));
        json_object_set_new(r, "model", json_string(model_path));
        json_object_set_new(r, "note", json_string(note));
        json_object_set_new(r, "theoretical_peak", json_integer(claimed));
        json_object_set_new(r, "actual_peak", json_integer(actual));
        json_object_set_new(r, "storages_without_buffer", json_integer((json_int_t)missing));
        json_object_set_new(r, "live_at_peak", planner_peak_live_json(g, &pl, a->top));
        json_dumpf(r, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
        json_decref(r);
    } else if (rc == 0) {
        char h1[32], h2[32];
        const char *order_name = plan_json_str(plan, "order"),
                   *layout = plan_json_str(plan, "layout");
        printf("roamc explain: %s (model %s)\n", a->plan_path, model_path);
        if (note[0]) printf("  note          %s\n", note);
        printf("  plan          order %s, layout %s; theoretical %s, actual %s\n",
               order_name ? order_name : "?", layout ? layout : "?",
               claimed >= 0 ? roamc_bytes_human((uint64_t)claimed, h1, sizeof h1) : "?",
               actual >= 0 ? roamc_bytes_human((uint64_t)actual, h2, sizeof h2) : "?");
        if ((long long)pl.bytes != claimed)
            printf("  note          the buffers give a theoretical peak of %llu B, the plan claims "
                   "%lld B: roamc check says what is wrong\n",
                   (unsigned long long)pl.bytes, claimed);
        if (missing)
            printf("  note          %zu storages are in no buffer of the plan: left out\n",
                   missing);
        planner_peak_live_text(stdout, g, &pl, a->top, a->top < 12 ? 12 : a->top);
    }
    planner_peak_live_free(&pl);
    free(order);
    free(start);
    free(end);
    if (rc == 0 && (fflush(stdout) || ferror(stdout))) {
        fprintf(stderr, "roamc: explain: cannot write the output: %s\n", strerror(errno));
        rc = 1;
    }
    return rc;
}

int cmd_explain(int argc, char **argv) {
    explain_args a = {.top = 20};
    int rc = explain_parse(argc, argv, &a);
    if (rc >= 0) {
        fe_options_free(&a.bindings);
        return rc;
    }
    char err[2048], path[4096], note[1024];
    json_t *plan = plan_json_read(a.plan_path, err, sizeof err);
    if (!plan) {
        fprintf(stderr, "roamc: %s\n", err);
        fe_options_free(&a.bindings);
        return 2;
    }
    json_t *al = json_object_get(plan, "align");
    plan_model_request r = {.plan_path = a.plan_path,
                            .plan = plan,
                            .model_path = a.model_path,
                            .bindings = &a.bindings,
                            .train = a.train_on ? &a.train : NULL,
                            .align = json_is_integer(al) && json_integer_value(al) > 0
                                         ? (uint64_t)json_integer_value(al)
                                         : 1};
    planner_step step;
    rc = 2;
    plan_model_found found = {path, note, sizeof path < sizeof note ? sizeof path : sizeof note};
    if (plan_model_load(&r, &step, &found, err, sizeof err)) {
        fprintf(stderr, "roamc: %s\n", err);
    } else {
        if (explain_identity(&step, plan, a.plan_path, path, err, sizeof err))
            fprintf(stderr, "roamc: %s\n", err);
        else
            rc = explain_print(&a, &step, plan, path, note);
        planner_step_free(&step);
    }
    json_decref(plan);
    fe_options_free(&a.bindings);
    return rc;
}
