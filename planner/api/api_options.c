/* The options handle of roamc.h (roamc_options_set: the command's long
 * options by name) and the public planning calls roamc_plan_file and
 * roamc_plan_bytes, which run api_load and api_plan as `roamc MODEL` does. */
#include "api_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api_pipe.h"

/* The most --frozen patterns, as the command takes. */
#define API_MAX_FROZEN 256

struct roamc_options {
    planner_options opt;
    fe_options bindings;
    bool train;
    bool train_option; /* loss, optimizer, frozen, precision or grad-accum given */
    fe_train_options t;
    char *frozen[API_MAX_FROZEN];
    char *emit;
    planner_budget budget;
    char *budget_text, *reserve_text;
    unsigned fit;
    double max_overhead;
    fit_device device; /* --device or --device-profile, or the H100 */
    bool device_given;
    bool method, order_or_layout;
    shard_options shard;
    char *wrap;
    bool world, shard_option;
    api_pipe_state pipe; /* pipeline-stages and the rest */
    char *cuts;          /* stage-cuts, which pipe.po.cuts points at */
    bool max_batch;
    char *batch_symbol; /* max-batch's value, or NULL: the one symbol left unbound */
    bool compare;
    streams_options streams; /* kinds 0: one stream */
    bool comm_gbps;
    char error[1024];
};

const char *roamc_version(void) {
    return ROAMC_VERSION;
}

const char *roamc_status_name(roamc_status s) {
    static const char *const names[] = {"ok", "error", "bad input", "does not fit"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "?";
}

roamc_options *roamc_options_new(void) {
    roamc_options *o = xcalloc(1, sizeof *o);
    o->opt = (planner_options){.align = 512,
                               .order = PLANNER_ORDER_ROAM,
                               .layout = PLANNER_LAYOUT_ROAM,
                               .node_limit = PLANNER_DEFAULT_NODE_LIMIT,
                               .delay_radius = PLANNER_DEFAULT_DELAY_RADIUS,
                               .time_limit = PLANNER_DEFAULT_TIME_LIMIT};
    o->max_overhead = -1;
    o->device = *fit_device_find("h100");
    o->shard =
        (shard_options){.bucket_mb = SHARD_DEFAULT_BUCKET_MB, .prefetch = SHARD_DEFAULT_PREFETCH};
    o->pipe = (api_pipe_state)API_PIPE_STATE_INIT;
    o->streams = (streams_options){
        .prefetch = true, .comm_ahead = true, .comm_bytes_per_s = STREAMS_DEFAULT_COMM_GBPS * 1e9};
    return o;
}

void roamc_options_free(roamc_options *o) {
    if (!o) return;
    fe_options_free(&o->bindings);
    for (size_t i = 0; i < o->t.n_frozen; i++) free(o->frozen[i]);
    free(o->emit);
    free(o->budget_text);
    free(o->reserve_text);
    free(o->wrap);
    free(o->cuts);
    free(o->batch_symbol);
    free(o);
}

const char *roamc_options_error(const roamc_options *o) {
    return o ? o->error : "no options";
}

static roamc_status api_opt_fail(roamc_options *o, const char *name, const char *value,
                                 const char *want) {
    snprintf(o->error, sizeof o->error, "option %s: %s, not '%s'", name, want,
             value ? value : "(none)");
    return ROAMC_BAD_INPUT;
}

/* A decimal integer in [lo, hi]; 0, or -1. */
static int api_parse_long(const char *s, long lo, long hi, long *out) {
    if (!s || !*s || *s == '+' || *s == ' ') return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

/* A non-negative real with an optional '%'; 0, or -1. */
static int api_parse_real(const char *s, bool percent, double *out) {
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (percent && end != s && *end == '%') end++;
    if (end == s || *end || errno || !(v >= 0 && v <= 1e6)) return -1;
    *out = v;
    return 0;
}

/* order, layout, method. */
static roamc_status api_set_method(roamc_options *o, const char *name, const char *v) {
    if (strcmp(name, "order") == 0) {
        if (!v || planner_order_parse(v, &o->opt.order))
            return api_opt_fail(o, name, v, "roam, program, lescea or ilp");
        o->order_or_layout = true;
    } else if (strcmp(name, "layout") == 0) {
        if (!v || planner_layout_parse(v, &o->opt.layout))
            return api_opt_fail(o, name, v, "roam, llfb, greedy, bestfit, pytorch or ilp");
        o->order_or_layout = true;
    } else {
        const planner_method *m = v ? planner_method_find(v) : NULL;
        if (!m) return api_opt_fail(o, name, v, planner_method_names());
        planner_method_apply(m, &o->opt);
        o->method = true;
    }
    return ROAMC_OK;
}

/* align, node-limit, delay-radius, threads, time-limit, budget, reserve. */
static roamc_status api_set_number(roamc_options *o, const char *name, const char *v) {
    char err[512];
    long num;
    uint64_t size;
    if (strcmp(name, "align") == 0) {
        if (!v || planner_size_parse(v, &size, err, sizeof err) || size > ((uint64_t)1 << 30) ||
            (size & (size - 1)))
            return api_opt_fail(o, name, v, "a power of two from 1 to 2^30 bytes");
        o->opt.align = size;
    } else if (strcmp(name, "node-limit") == 0) {
        if (api_parse_long(v, 1, 100000, &num)) return api_opt_fail(o, name, v, "1 to 100000");
        o->opt.node_limit = (int)num;
    } else if (strcmp(name, "delay-radius") == 0) {
        if (api_parse_long(v, 0, 100000, &num)) return api_opt_fail(o, name, v, "0 to 100000");
        o->opt.delay_radius = (int)num;
    } else if (strcmp(name, "threads") == 0) {
        if (api_parse_long(v, 1, 1024, &num)) return api_opt_fail(o, name, v, "1 to 1024");
        o->opt.threads = (int)num;
    } else if (strcmp(name, "time-limit") == 0) {
        if (!v || planner_time_limit_parse(v, &o->opt.time_limit, err, sizeof err))
            return api_opt_fail(o, name, v, "seconds above 0, at most 1000000");
    } else {
        bool budget = strcmp(name, "budget") == 0;
        if (!v || planner_size_parse(v, &size, err, sizeof err)) {
            if (budget || !v || strspn(v, "0") != strlen(v) || !*v)
                return api_opt_fail(o, name, v, "a size (16GiB, 80GB, bytes)");
            size = 0; /* reserve 0: the default */
        }
        *(budget ? &o->budget.budget : &o->budget.reserve) = size;
        char **text = budget ? &o->budget_text : &o->reserve_text;
        free(*text);
        *text = xstrdup(v);
        *(budget ? &o->budget.budget_text : &o->budget.reserve_text) = *text;
    }
    return ROAMC_OK;
}

/* train, loss, optimizer, frozen, precision, grad-accum, emit-train. */
static roamc_status api_set_train(roamc_options *o, const char *name, const char *v) {
    if (strcmp(name, "train") == 0) {
        o->train = true;
        return ROAMC_OK;
    }
    if (strcmp(name, "emit-train") == 0) {
        if (!v || !*v || strcmp(v, "-") == 0) return api_opt_fail(o, name, v, "a file name");
        free(o->emit);
        o->emit = xstrdup(v);
        o->t.emit_path = o->emit;
        return ROAMC_OK;
    }
    if (strcmp(name, "loss") == 0 && (!v || fe_train_loss_parse(v, &o->t.loss)))
        return api_opt_fail(o, name, v, "cross-entropy, mse or none");
    if (strcmp(name, "optimizer") == 0 && (!v || fe_train_optimizer_parse(v, &o->t.optimizer)))
        return api_opt_fail(o, name, v, "adam, adamw, sgd, momentum or none");
    if (strcmp(name, "precision") == 0 && (!v || fe_train_precision_parse(v, &o->t.precision)))
        return api_opt_fail(o, name, v, "fp32, bf16, fp16, amp-bf16 or amp-fp16");
    if (strcmp(name, "grad-accum") == 0 && (!v || fe_train_grad_accum_parse(v, &o->t.grad_accum)))
        return api_opt_fail(o, name, v, "a number of microbatches from 1 to 1024");
    if (strcmp(name, "frozen") == 0) {
        if (!v) return api_opt_fail(o, name, v, "an fnmatch pattern");
        if (o->t.n_frozen == API_MAX_FROZEN)
            return api_opt_fail(o, name, v, "at most 256 patterns");
        o->frozen[o->t.n_frozen++] = xstrdup(v);
        o->t.frozen = (const char **)o->frozen;
    }
    o->train_option = true;
    return ROAMC_OK;
}

/* fit, max-overhead, device, device-profile. */
static roamc_status api_set_fit(roamc_options *o, const char *name, const char *v) {
    char err[900];
    if (strcmp(name, "fit") == 0) {
        if (!v || strcmp(v, "both") == 0)
            o->fit = FIT_BOTH;
        else if (strcmp(v, "recompute") == 0)
            o->fit = FIT_RECOMPUTE;
        else if (strcmp(v, "offload") == 0)
            o->fit = FIT_OFFLOAD;
        else
            return api_opt_fail(o, name, v, "recompute, offload or both");
    } else if (strcmp(name, "max-overhead") == 0) {
        double p;
        if (api_parse_real(v, true, &p))
            return api_opt_fail(o, name, v, "a percentage from 0 to 1000000 (33%)");
        o->max_overhead = p / 100.0;
    } else if (strcmp(name, "device") == 0) {
        const fit_device *d = v ? fit_device_find(v) : NULL;
        if (!d) return api_opt_fail(o, name, v, "h100, a100, l4, 4090 or gh200");
        o->device = *d;
        o->device_given = true;
    } else {
        fit_device d;
        if (!v || fit_device_load(v, &d, err, sizeof err)) {
            snprintf(o->error, sizeof o->error, "option device-profile: %s",
                     v ? err : "needs a file");
            return ROAMC_BAD_INPUT;
        }
        o->device = d;
        o->device_given = true;
    }
    return ROAMC_OK;
}

/* shard, world, rank, bucket-mb, wrap, prefetch, no-sync (value ignored). */
static roamc_status api_set_shard(roamc_options *o, const char *name, const char *v) {
    long num;
    double mb;
    if (strcmp(name, "shard") == 0) {
        if (!v || shard_kind_parse(v, &o->shard.kind))
            return api_opt_fail(o, name, v, "ddp, zero1, zero2, zero3 or fsdp");
        return ROAMC_OK;
    }
    if (strcmp(name, "world") == 0) {
        if (api_parse_long(v, 1, SHARD_MAX_WORLD, &num))
            return api_opt_fail(o, name, v, "the number of ranks, 1 to 65536");
        o->shard.world = num, o->world = true;
    } else if (strcmp(name, "rank") == 0) {
        if (api_parse_long(v, 0, SHARD_MAX_WORLD - 1, &num))
            return api_opt_fail(o, name, v, "a rank from 0 to world - 1");
        o->shard.rank = num;
    } else if (strcmp(name, "prefetch") == 0) {
        if (api_parse_long(v, 0, SHARD_MAX_PREFETCH, &num))
            return api_opt_fail(o, name, v, "0 to 1024 units");
        o->shard.prefetch = num;
    } else if (strcmp(name, "no-sync") == 0) {
        o->shard.no_sync = true;
    } else if (strcmp(name, "bucket-mb") == 0) {
        if (api_parse_real(v, false, &mb) || !(mb > 0))
            return api_opt_fail(o, name, v, "a size in MiB above 0, at most 1000000");
        o->shard.bucket_mb = mb;
    } else {
        if (!v) return api_opt_fail(o, name, v, "an fnmatch pattern");
        free(o->wrap);
        o->wrap = xstrdup(v);
        o->shard.wrap = o->wrap;
    }
    o->shard_option = true;
    return ROAMC_OK;
}

/* streams (streams_parse's list), comm-gbps. */
static roamc_status api_set_streams(roamc_options *o, const char *name, const char *v) {
    if (strcmp(name, "streams") == 0) {
        char err[512];
        streams_options parsed = o->streams; /* a bad value leaves the option as it was */
        if (!v || streams_parse(v, &parsed, err, sizeof err)) {
            snprintf(o->error, sizeof o->error, "option streams: %s",
                     v ? err : "wants copy, comm, all or none");
            return ROAMC_BAD_INPUT;
        }
        o->streams = parsed;
        return ROAMC_OK;
    }
    double g;
    if (api_parse_real(v, false, &g) || !(g > 0))
        return api_opt_fail(o, name, v, "GB/s above 0, at most 1000000");
    o->streams.comm_bytes_per_s = g * 1e9;
    o->comm_gbps = true;
    return ROAMC_OK;
}

/* pipeline-stages, microbatches, schedule, stage-cuts, stage: the
 * command's parser (api_pipe.h), its messages. */
static roamc_status api_set_pipeline(roamc_options *o, const char *name, const char *v) {
    static const char *const names[] = {"pipeline-stages", "microbatches", "schedule", "stage-cuts",
                                        "stage"};
    int c = API_PIPE_OPT_STAGES;
    while (strcmp(names[c - API_PIPE_OPT_STAGES], name) != 0) c++;
    char *copy = c == API_PIPE_OPT_CUTS && v ? xstrdup(v) : NULL; /* kept: the options own it */
    if (api_pipe_parse(&o->pipe, c, copy ? copy : v, o->error, sizeof o->error)) {
        free(copy);
        return ROAMC_BAD_INPUT;
    }
    if (copy) {
        free(o->cuts);
        o->cuts = copy;
    }
    return ROAMC_OK;
}

roamc_status roamc_options_set(roamc_options *o, const char *name, const char *value) {
    if (!o) return ROAMC_BAD_INPUT;
    o->error[0] = 0;
    if (!name) name = "";
    static const char *const groups[][8] = {
        {"order", "layout", "method"},
        {"align", "node-limit", "delay-radius", "threads", "time-limit", "budget", "reserve"},
        {"train", "loss", "optimizer", "frozen", "precision", "grad-accum", "emit-train"},
        {"fit", "max-overhead", "device", "device-profile"},
        {"shard", "world", "rank", "bucket-mb", "wrap", "prefetch", "no-sync"},
        {"pipeline-stages", "microbatches", "schedule", "stage-cuts", "stage"},
        {"streams", "comm-gbps"}};
    roamc_status (*const setters[])(roamc_options *, const char *, const char *) = {
        api_set_method, api_set_number,   api_set_train,  api_set_fit,
        api_set_shard,  api_set_pipeline, api_set_streams};
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
        for (size_t k = 0; k < 8 && groups[g][k]; k++)
            if (strcmp(name, groups[g][k]) == 0) return setters[g](o, name, value);
    if (strcmp(name, "max-batch") == 0) {
        if (value && !*value) return api_opt_fail(o, name, value, "a symbol name, or NULL");
        free(o->batch_symbol);
        o->batch_symbol = value ? xstrdup(value) : NULL;
        o->max_batch = true;
        return ROAMC_OK;
    }
    if (strcmp(name, "compare") == 0) {
        if (value && strcmp(value, "true") != 0 && strcmp(value, "false") != 0)
            return api_opt_fail(o, name, value, "NULL, true or false");
        o->compare = !value || value[0] == 't';
        return ROAMC_OK;
    }
    if (strcmp(name, "input-shape") == 0 || strcmp(name, "dim") == 0) {
        char err[512];
        bool dim = name[0] == 'd';
        if (!value || fe_options_parse(&o->bindings, dim ? "--dim" : "--input-shape", value, err,
                                       sizeof err)) {
            snprintf(o->error, sizeof o->error, "option %s: %s", name,
                     value ? err : "needs a value");
            return ROAMC_BAD_INPUT;
        }
        return ROAMC_OK;
    }
    snprintf(o->error, sizeof o->error, "no option named '%s'", name);
    return ROAMC_BAD_INPUT;
}

/* The options that only go together, as the command checks them; 0, or
 * -1 with a message in r. */
static int api_options_check(const roamc_options *o, bool in_memory, roamc_result *r) {
    char err[512];
    const char *why = NULL;
    bool shard = o->shard.kind != 0;
    if (o->method && o->order_or_layout)
        why = "method sets the order and the layout: give one or the other";
    else if (o->budget.reserve_text && !o->budget.budget_text)
        why = "reserve needs budget";
    else if (o->budget.budget_text && o->budget.reserve >= o->budget.budget)
        why = "reserve must be below budget";
    else if (!o->train &&
             (o->train_option || (o->emit && !o->fit && !shard && !api_pipe_on(&o->pipe))))
        why = "loss, optimizer, frozen, precision, grad-accum and emit-train need train";
    else if (o->fit && !o->budget.budget_text)
        why = "fit needs budget";
    else if (!o->fit && o->max_overhead >= 0)
        why = "max-overhead needs fit";
    else if (!o->fit && !o->streams.kinds && o->device_given)
        why = "device and device-profile need fit or streams";
    else if (o->comm_gbps && !(o->streams.kinds & STREAMS_COMM))
        why = "comm-gbps needs streams comm (or all)";
    else if (!shard && (o->shard_option || o->world))
        why = "world, rank, bucket-mb, wrap, prefetch and no-sync need shard";
    else if (shard && !o->world)
        why = "shard needs world (the ranks in the job)";
    else if (shard && o->fit)
        why = "shard plans one rank's step: not with fit";
    else if (in_memory && o->train)
        why = "train derives the step from a file: give its path (roamc_plan_file)";
    else if (o->compare && o->method)
        why = "compare plans every method: drop method";
    else if (o->compare && o->budget.budget_text)
        why = "budget works on one plan, not with compare";
    else if (o->compare && o->fit)
        why = "fit changes one step: not with compare";
    else if (o->compare && shard)
        why = "shard plans one rank's step: not with compare";
    else if (o->max_batch && !o->budget.budget_text)
        why = "max-batch needs budget";
    else if (o->max_batch && o->emit)
        why = "emit-train writes one step: give it without max-batch (bind the batch with dim)";
    else if (o->max_batch && in_memory)
        why = "max-batch plans the model at several batches: give its path (roamc_plan_file)";
    else if (shard && shard_check(&o->shard, err, sizeof err))
        why = err;
    else if (api_pipe_refusal(&(api_pipe_run){.state = &o->pipe,
                                              .opt = &o->opt,
                                              .budget = &o->budget,
                                              .emit_path = o->emit,
                                              .fit = o->fit != 0,
                                              .compare = o->compare,
                                              .shard = shard,
                                              .max_batch = o->max_batch},
                              err, sizeof err))
        why = err;
    if (!why) return 0;
    api_fail(r, ROAMC_BAD_INPUT, "%s", why);
    return -1;
}

/* max-batch: the search of q's model (api_max_batch, as the command runs
 * it), its JSON report kept in r->batch_json. */
static roamc_status api_plan_max_batch(const roamc_options *o, const api_request *q,
                                       roamc_result *r) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return api_fail(r, ROAMC_ERROR, "%s", "cannot open a memory stream");
    api_batch_run b = {.q = {.model_path = q->model_path,
                             .bindings = q->bindings,
                             .symbol = o->batch_symbol,
                             .opt = q->opt,
                             .budget = &q->budget,
                             .json = 1,
                             .quiet = 1,
                             .train = q->train,
                             .fit = q->fit,
                             .max_overhead = q->max_overhead,
                             .device = q->fit ? q->device : NULL,
                             .shard = q->shard,
                             .pipe = q->pipeline},
                       .report = f};
    roamc_status st = api_max_batch(&b, r);
    if (fclose(f) != 0 && (st == ROAMC_OK || st == ROAMC_NO_FIT))
        st = api_fail(r, ROAMC_ERROR, "%s", "cannot write the report to memory");
    if (st == ROAMC_OK || st == ROAMC_NO_FIT)
        r->batch_json = text;
    else
        free(text);
    return st;
}

/* Plans the model named name (at data, len bytes, or the file name). */
static roamc_status api_plan_model(const roamc_options *o, const void *data, size_t len,
                                   const char *name, roamc_result **out) {
    double t_start = roamc_now();
    roamc_options *defaults = o ? NULL : roamc_options_new();
    if (!o) o = defaults;
    roamc_result *r = api_result_new();
    if (out) *out = r;
    roamc_status st;
    if (!name) {
        st = api_fail(r, ROAMC_BAD_INPUT, "%s", "no model given");
    } else if (api_options_check(o, data != NULL, r)) {
        st = r->status;
    } else {
        api_request q = {.model_path = name,
                         .bytes = data,
                         .len = len,
                         .bindings = &o->bindings,
                         .train = o->train ? &o->t : NULL,
                         .emit_path = o->emit,
                         .opt = o->opt,
                         .budget = o->budget,
                         .fit = o->fit,
                         .max_overhead = o->max_overhead,
                         .device = &o->device,
                         .shard = o->shard.kind ? &o->shard : NULL,
                         .pipeline = api_pipe_on(&o->pipe) ? &o->pipe.po : NULL,
                         .compare = o->compare,
                         .summary = true,
                         .streams = o->streams.kinds ? &o->streams : NULL};
        /* as the command: the time limit counts from the start, the
         * allocator replay sees the device's limit */
        q.opt.deadline = t_start + q.opt.time_limit;
        if (q.budget.budget_text && q.opt.layout == PLANNER_LAYOUT_PYTORCH)
            q.opt.device_limit = q.budget.budget - q.budget.reserve;
        if (o->max_batch)
            st = api_plan_max_batch(o, &q, r);
        else if ((st = api_load(&q, r)) == ROAMC_OK)
            st = api_plan(&q, r);
        /* the report's total, as the command takes it after its files */
        if (r->main && r->mode == API_PLAIN) r->main->times.total = roamc_now() - t_start;
    }
    roamc_options_free(defaults);
    if (!out) roamc_result_free(r);
    return st;
}

roamc_status roamc_plan_file(const roamc_options *o, const char *path, roamc_result **out) {
    return api_plan_model(o, NULL, 0, path, out);
}

roamc_status roamc_plan_bytes(const roamc_options *o, const void *data, size_t len,
                              const char *name, roamc_result **out) {
    if (!data) {
        roamc_result *r = api_result_new();
        api_fail(r, ROAMC_BAD_INPUT, "%s", "no model bytes given");
        if (out)
            *out = r;
        else
            roamc_result_free(r);
        return ROAMC_BAD_INPUT;
    }
    return api_plan_model(o, data, len, name ? name : "(model in memory)", out);
}
