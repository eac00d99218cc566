/* Will it fit, and how large a batch (--budget, --reserve, --max-batch).
 *
 * The question is asked of two plans of the same step: what PyTorch would
 * do (method pytorch: program order, gradients held to the end of the
 * step, caching-allocator replay; it needs what the allocator reserves)
 * and the plan the options choose (roam by default; it needs its arena,
 * the actual peak).  A plan fits when what it needs plus the reserve (what
 * the device spends outside the arena: CUDA context, workspaces) is at most
 * the budget.
 *
 * The batch search binds the model's batch symbol with --dim, plans both
 * at batch 1, 2, 4, ... until one does not fit, then bisects each one's
 * boundary, planning both at every batch tried so that the table is
 * complete.  It ends with a batch that fits and batch + 1 that does not,
 * for each plan; that this is the largest batch assumes the need grows
 * with the batch, which the table lets one check (a batch above the
 * boundary that fits is reported).
 */
#include "budget.h"
#include "fit.h"
#include "pipeline.h"
#include "shard.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* ------------------------------------------------------------------ sizes */

/* "16GiB": the unit's bytes, or 0 for an unknown unit.  GNU coreutils'
 * suffixes (sort -S, head -c, df -B): K, M, G, T, P are powers of 1024, as
 * KiB, MiB, GiB, TiB, PiB; kB, MB, GB, TB, PB powers of 1000; B is one byte.
 * Letters in any case, since people write "16gb" as often as "16GB". */
static uint64_t budget_unit(const char *u) {
    static const struct {
        const char *name;
        uint64_t bytes;
    } units[] = {
        {"", 1},
        {"b", 1},
        {"kb", 1000ull},
        {"mb", 1000000ull},
        {"gb", 1000000000ull},
        {"tb", 1000000000000ull},
        {"pb", 1000000000000000ull},
        {"k", 1ull << 10},
        {"m", 1ull << 20},
        {"g", 1ull << 30},
        {"t", 1ull << 40},
        {"p", 1ull << 50},
        {"kib", 1ull << 10},
        {"mib", 1ull << 20},
        {"gib", 1ull << 30},
        {"tib", 1ull << 40},
        {"pib", 1ull << 50},
    };
    char low[8];
    size_t n = strlen(u);
    if (n >= sizeof low) return 0;
    for (size_t i = 0; i <= n; i++)
        low[i] = (char)(u[i] >= 'A' && u[i] <= 'Z' ? u[i] - 'A' + 'a' : u[i]);
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(low, units[i].name) == 0) return units[i].bytes;
    return 0;
}

int planner_size_parse(const char *s, uint64_t *out, char *err, size_t errlen) {
    const char *p = s;
    /* the number as an integer mantissa over 10^decimals, so that "1.5GiB"
     * is exact and nothing is rounded */
    uint64_t mant = 0, scale = 1;
    size_t digits = 0;
    bool dot = false;
    for (; (*p >= '0' && *p <= '9') || (*p == '.' && !dot); p++) {
        if (*p == '.') {
            dot = true;
            continue;
        }
        if (__builtin_mul_overflow(mant, 10, &mant) ||
            __builtin_add_overflow(mant, (uint64_t)(*p - '0'), &mant) ||
            (dot && __builtin_mul_overflow(scale, 10, &scale)))
            return roamc_errorf(err, errlen, "'%s' is too large: sizes go up to 2^63 - 1 bytes", s);
        digits++;
    }
    if (digits == 0)
        return roamc_errorf(
            err, errlen,
            "'%s' is not a size: give bytes, or a number with a unit such as 16GiB or 80GB", s);
    uint64_t unit = budget_unit(p);
    if (unit == 0)
        return roamc_errorf(err, errlen,
                            "'%s': unknown unit '%s' (K, M, G, T, P and KiB, MiB, GiB, TiB, PiB "
                            "are powers of 1024; kB, MB, GB, TB, PB powers of 1000; B bytes)",
                            s, p);
    uint64_t hi;
    /* mant * unit / scale without overflow: unit and scale are powers of
     * ten or two, so divide first where it is exact */
    unsigned __int128 v = (unsigned __int128)mant * unit;
    v /= scale; /* "0.9GiB": a fraction of a byte rounds down, to stay within the budget */
    hi = (uint64_t)(v >> 64);
    /* 2^63 - 1 (8 EiB) keeps every size a JSON integer */
    if (hi != 0 || (uint64_t)v > (uint64_t)INT64_MAX)
        return roamc_errorf(err, errlen, "'%s' is too large: sizes go up to 2^63 - 1 bytes", s);
    if (v == 0) return roamc_errorf(err, errlen, "'%s' is zero bytes", s);
    *out = (uint64_t)v;
    return 0;
}

/* "17,179,869,184": bytes with thousands separators, exact. */
static const char *budget_grouped(uint64_t v, char *buf, size_t len) {
    char digits[32];
    int n = snprintf(digits, sizeof digits, "%" PRIu64, v);
    size_t k = 0;
    for (int i = 0; i < n && k + 2 < len; i++) {
        if (i > 0 && (n - i) % 3 == 0) buf[k++] = ',';
        buf[k++] = digits[i];
    }
    buf[k] = 0;
    return buf;
}

/* ------------------------------------------------------------ one verdict */

static bool budget_fits(const planner_budget *b, uint64_t need) {
    return need <= b->budget - b->reserve;
}

/* Margin (positive) or shortfall (negative) in bytes, as a double so that
 * it has a sign for any uint64 pair. */
static double budget_margin(const planner_budget *b, uint64_t need) {
    return (double)(b->budget - b->reserve) - (double)need;
}

static json_t *budget_verdict_json(const planner_budget *b, uint64_t need, uint64_t theoretical) {
    json_t *o = json_object();
    json_object_set_new(o, "theoretical_peak", json_integer((json_int_t)theoretical));
    json_object_set_new(o, "needs", json_integer((json_int_t)need));
    json_object_set_new(o, "fits", json_boolean(budget_fits(b, need)));
    /* the margin is exact in bytes; json_int_t holds it for any budget up to 2^63 */
    int64_t m = budget_fits(b, need) ? (int64_t)(b->budget - b->reserve - need)
                                     : -(int64_t)(need - (b->budget - b->reserve));
    json_object_set_new(o, "margin", json_integer((json_int_t)m));
    json_object_set_new(o, "margin_percent_of_budget",
                        json_real(100.0 * budget_margin(b, need) / (double)b->budget));
    return o;
}

static json_t *budget_echo_json(const planner_budget *b) {
    json_t *o = json_object();
    json_object_set_new(o, "budget", json_integer((json_int_t)b->budget));
    json_object_set_new(o, "budget_text", json_string(b->budget_text));
    json_object_set_new(o, "reserve", json_integer((json_int_t)b->reserve));
    json_object_set_new(o, "reserve_text", json_string(b->reserve_text ? b->reserve_text : "0"));
    json_object_set_new(o, "available", json_integer((json_int_t)(b->budget - b->reserve)));
    return o;
}

static void budget_echo_text(FILE *f, const planner_budget *b) {
    char g1[40], g2[40], g3[40];
    fprintf(f,
            "  budget        %s = %s B; reserve %s = %s B outside the arena; %s B for the step\n",
            b->budget_text, budget_grouped(b->budget, g1, sizeof g1),
            b->reserve_text ? b->reserve_text : "0", budget_grouped(b->reserve, g2, sizeof g2),
            budget_grouped(b->budget - b->reserve, g3, sizeof g3));
}

static void budget_verdict_text(FILE *f, const planner_budget *b, const char *who, uint64_t need) {
    char h[32], g[40], hm[32];
    bool fits = budget_fits(b, need);
    uint64_t gap = fits ? b->budget - b->reserve - need : need - (b->budget - b->reserve);
    fprintf(f, "  %-13s needs %s (%s B): %s by %s (%.2f%% of the budget)\n", who,
            roamc_bytes_human(need, h, sizeof h), budget_grouped(need, g, sizeof g),
            fits ? "FITS" : "DOES NOT FIT", roamc_bytes_human(gap, hm, sizeof hm),
            100.0 * (double)gap / (double)b->budget);
}

int planner_budget_report(FILE *f, const planner_budget *b, const plan *chosen, const plan *pytorch,
                          json_t *json) {
    if (json) {
        json_t *o = budget_echo_json(b);
        json_object_set_new(
            o, "pytorch", budget_verdict_json(b, plan_device_bytes(pytorch), pytorch->theoretical));
        json_object_set_new(o, "plan",
                            budget_verdict_json(b, plan_device_bytes(chosen), chosen->theoretical));
        json_object_set_new(json, "budget", o);
    } else if (f) {
        budget_echo_text(f, b);
        budget_verdict_text(f, b, "PyTorch", plan_device_bytes(pytorch));
        budget_verdict_text(f, b, "this plan", plan_device_bytes(chosen));
        if (pytorch->pytorch_released)
            fprintf(f,
                    "  note          near the budget PyTorch's allocator gave %zu cached segments "
                    "back to the "
                    "device (as it does before it reports out of memory)\n",
                    pytorch->pytorch_released);
        if (pytorch->pytorch_oom)
            fprintf(f, "  note          PyTorch would stop with out of memory; it needs what it "
                       "reserves with no limit\n");
    }
    return budget_fits(b, plan_device_bytes(chosen)) ? 0 : PLANNER_EXIT_NO_FIT;
}

/* ------------------------------------------------------------ batch search */

/* What is sized at each batch: PyTorch's plan, the chosen plan, and the
 * lower bound of the theoretical peak over every schedule (so no plan at
 * all fits a batch whose bound does not). */
enum { BUDGET_PYTORCH, BUDGET_PLAN, BUDGET_BOUND, BUDGET_N };

/* One batch tried. */
typedef struct budget_row {
    int64_t batch;
    uint64_t theoretical[BUDGET_N], need[BUDGET_N]; /* the bound: both the bound */
    bool fits[BUDGET_N];
    /* how the chosen plan's arena was found: its own layout (exact); the
     * fast llfb layout, which fit already (an upper bound: the chosen
     * layout never does worse); or not at all, the theoretical peak being
     * over the budget (need is then that peak, a lower bound) */
    enum { BUDGET_ARENA_EXACT, BUDGET_ARENA_AT_MOST, BUDGET_ARENA_SKIPPED } arena;
    double seconds;
    /* --time-limit: some plan of this batch was cut short (plan.time_short or time_cut) */
    bool cut;
    /* --fit: the chosen plan did not fit and a changed step was tried:
     * fit_run's status, and what it adds in % of the step's time */
    int fit_status;
    bool fit_tried;
    double fit_added_percent;
} budget_row;

typedef struct budget_search {
    const planner_batch_query *q;
    budget_row *rows;
    size_t n_rows, cap_rows;
    char *err;
    size_t errlen;
    int status; /* exit status of the failure that stopped the search */
} budget_search;

/* q's bindings plus symbol = batch: shares q's strings, owns only its dims
 * array (the caller frees it). */
static fe_options budget_bindings(const planner_batch_query *q, int64_t batch) {
    fe_options o = *q->bindings;
    o.dims = xmallocarray(q->bindings->n_dims + 1, sizeof *o.dims);
    if (q->bindings->n_dims)
        memcpy(o.dims, q->bindings->dims, q->bindings->n_dims * sizeof *o.dims);
    o.dims[o.n_dims++] = (fe_dim_binding){(char *)q->symbol, batch};
    return o;
}

/* Loads the model (or its --train step) with q's bindings and symbol =
 * batch, and builds its graph.  Returns 0, or 2 with a message. */
static int budget_load(const planner_batch_query *q, int64_t batch, planner_step *step, char *err,
                       size_t errlen) {
    fe_options o = budget_bindings(q, batch);
    planner_load l = {.path = q->model_path,
                      .bindings = &o,
                      .train = q->train,
                      .align = q->opt.align,
                      .keep_bytes = q->fit != 0 || q->shard || q->pipe};
    int rc = planner_step_load(&l, step, err, errlen);
    free(o.dims);
    return rc ? 2 : 0;
}

/* Plans g as method pytorch (who BUDGET_PYTORCH) or with q's options
 * (BUDGET_PLAN; with quick, its order and the fast llfb layout).  Returns 0,
 * or 1 with a message. */
static int budget_plan(const planner_batch_query *q, const graph *g, int who, bool quick, plan *p,
                       char *err, size_t errlen) {
    planner_options opt = q->opt;
    if (who == BUDGET_PYTORCH) planner_method_apply(planner_method_find("pytorch"), &opt);
    if (quick) opt.layout = PLANNER_LAYOUT_LLFB;
    if (opt.layout == PLANNER_LAYOUT_PYTORCH)
        opt.device_limit = q->budget->budget - q->budget->reserve;
    opt.progress = 0;
    return plan_build(g, &opt, p, err, errlen) ? 1 : 0;
}

/* fit_run on step, loaded at batch b, into *out (the caller frees it
 * whatever the return); name: what the changed step is called (the file
 * --emit-train writes it to, when it is written).  Returns 0, or -1 with a
 * message. */
static int budget_fit_run(const planner_batch_query *q, const planner_step *step, int64_t b,
                          const char *name, fit_outcome *out, char *err, size_t errlen) {
    planner_options opt = q->opt;
    opt.progress = 0;
    /* the changed step keeps the batch the step was loaded at: its value_info
     * holds every shape, so it needs the same bindings */
    fe_options o = budget_bindings(q, b);
    fit_request r = {.step_name = q->model_path,
                     .step_bytes = step->bytes,
                     .step_len = step->len,
                     .g = &step->g,
                     .bindings = &o,
                     .opt = &opt,
                     .arena_budget = q->budget->budget - q->budget->reserve,
                     .mode = q->fit,
                     .max_overhead = q->max_overhead,
                     .device = q->device,
                     .emit_name = name};
    int rc = fit_run(&r, out, err, errlen);
    free(o.dims);
    return rc;
}

/* --fit at batch b, whose chosen plan does not fit: the changed step's
 * arena becomes the row's need, and it fits when fit_run fits it within
 * --max-overhead.  Returns 0, or 1 with a message. */
static int budget_fit(const planner_batch_query *q, const planner_step *step, int64_t b,
                      budget_row *row, char *err, size_t errlen) {
    char name[64];
    snprintf(name, sizeof name, "(the changed step at batch %" PRId64 ")", b);
    fit_outcome out;
    int rc = budget_fit_run(q, step, b, name, &out, err, errlen);
    if (rc == 0 && out.status != FIT_ALREADY) {
        row->fit_tried = true;
        row->fit_status = out.status;
        row->fit_added_percent =
            out.step_seconds > 0 ? 100.0 * out.added_seconds / out.step_seconds : 0;
        row->need[BUDGET_PLAN] = out.status == FIT_CANNOT ? out.least : out.changed->plan.actual;
        row->theoretical[BUDGET_PLAN] = out.changed->plan.theoretical;
        row->arena = BUDGET_ARENA_EXACT;
        row->fits[BUDGET_PLAN] = out.status == FIT_FITTED;
    }
    fit_outcome_free(&out);
    return rc ? 1 : 0;
}

/* What is sized at one batch: the step itself, one rank's step of it
 * (--shard), or every stage of it (--pipeline-stages): n graphs, the batch
 * fitting when each does. */
typedef struct budget_sized {
    const graph **g;
    size_t n;
    fe_options bindings; /* the rank's or the stages' (dims malloc'd) */
    shard_outcome rank;
    pipe_outcome stages;
    bool have_rank, have_stages;
} budget_sized;

static void budget_sized_free(budget_sized *d) {
    if (d->have_rank) shard_outcome_free(&d->rank);
    if (d->have_stages) pipe_outcome_free(&d->stages);
    free(d->bindings.dims);
    free(d->g);
}

/* The graphs to size of step (loaded at batch b) into *d: --shard, the
 * rank's step (shard_build); --pipeline-stages, every stage's step
 * (pipe_build), each loaded under q's bindings and symbol = b; else the
 * step.  The caller frees *d (budget_sized_free) whatever the return.
 * Returns 0, or 1 with a message. */
static int budget_derive(const planner_batch_query *q, const planner_step *step, int64_t b,
                         budget_sized *d, char *err, size_t errlen) {
    memset(d, 0, sizeof *d);
    if (!q->shard && !q->pipe) {
        d->g = xmallocarray(1, sizeof *d->g);
        d->g[d->n++] = &step->g;
        return 0;
    }
    d->bindings = budget_bindings(q, b);
    planner_options opt = q->opt;
    opt.progress = 0;
    char name[64];
    snprintf(name, sizeof name, "(the %s step at batch %" PRId64 ")",
             q->shard ? "rank's" : "stage's", b);
    if (q->shard) {
        shard_request r = {.step_name = q->model_path,
                           .step_bytes = step->bytes,
                           .step_len = step->len,
                           .g = &step->g,
                           .bindings = &d->bindings,
                           .opt = &opt,
                           .so = *q->shard,
                           .emit_name = name};
        d->have_rank = true;
        if (shard_build(&r, &d->rank, err, errlen)) return 1;
        d->g = xmallocarray(1, sizeof *d->g);
        d->g[d->n++] = &d->rank.graph;
        return 0;
    }
    pipe_request r = {.step_name = q->model_path,
                      .step_bytes = step->bytes,
                      .step_len = step->len,
                      .g = &step->g,
                      .bindings = &d->bindings,
                      .opt = &opt,
                      .po = *q->pipe,
                      .emit_name = name};
    d->have_stages = true;
    if (pipe_build(&r, &d->stages, err, errlen)) return 1;
    d->g = xmallocarray(d->stages.n ? d->stages.n : 1, sizeof *d->g);
    for (size_t k = 0; k < d->stages.n; k++) d->g[d->n++] = &d->stages.st[k].graph;
    return 0;
}

/* Plans g as `who` into one's figures: its need and theoretical peak and
 * (the chosen plan) the lower bound and how its arena was found.  Returns
 * 0, or 1 with a message. */
static int budget_size_one(const planner_batch_query *q, const graph *g, int who, budget_row *one,
                           char *err, size_t errlen) {
    planner_layout chosen = q->opt.layout;
    bool slow_layout = chosen == PLANNER_LAYOUT_ROAM || chosen == PLANNER_LAYOUT_ILP;
    plan p;
    /* The slow layout only where it decides: its arena is at least the
     * theoretical peak, which the order alone gives, and at most what
     * llfb gives (it starts from the best heuristic), so only a batch
     * with peak <= budget < llfb's arena needs it. */
    bool quick = who == BUDGET_PLAN && slow_layout;
    for (;;) {
        if (budget_plan(q, g, who, quick, &p, err, errlen)) return 1;
        if (!quick) break;
        if (!budget_fits(q->budget, p.theoretical)) {
            one->arena = BUDGET_ARENA_SKIPPED;
            break;
        }
        if (budget_fits(q->budget, p.actual)) {
            one->arena = BUDGET_ARENA_AT_MOST;
            break;
        }
        plan_free(&p);
        quick = false;
    }
    one->cut |= p.time_short || p.time_cut[0];
    one->theoretical[who] = p.theoretical;
    one->need[who] = who == BUDGET_PLAN && one->arena == BUDGET_ARENA_SKIPPED
                         ? p.theoretical
                         : plan_device_bytes(&p);
    /* the chosen plan's graph frees each gradient after its last use;
     * PyTorch's holds them to the end, so its bound is another one */
    if (who == BUDGET_PLAN)
        one->theoretical[BUDGET_BOUND] = one->need[BUDGET_BOUND] = p.lower_bound;
    plan_free(&p);
    return 0;
}

/* A batch decided, as a progress note (a log line off a terminal, and what
 * an interrupted search prints): both verdicts, and the largest batch each
 * plan fits among those tried so far. */
static void budget_note(const budget_search *s, const budget_row *row) {
    int64_t most[2] = {0, 0};
    for (size_t i = 0; i < s->n_rows; i++)
        for (int w = 0; w < 2; w++)
            if (s->rows[i].fits[w] && s->rows[i].batch > most[w]) most[w] = s->rows[i].batch;
    char fit[48] = "";
    if (row->fit_tried && row->fit_status == FIT_CANNOT)
        snprintf(fit, sizeof fit, " (--fit: no change fits)");
    else if (row->fit_tried)
        snprintf(fit, sizeof fit, " (--fit: changed, +%.1f%% time)", row->fit_added_percent);
    planner_progress_note("--max-batch: batch %" PRId64 ": PyTorch %s, roamc's plan %s%s (%.2f s); "
                          "largest fitting so far: PyTorch %" PRId64 ", roamc's plan %" PRId64,
                          row->batch, row->fits[0] ? "fits" : "does not fit",
                          row->fits[1] ? "fits" : "does not fit", fit, row->seconds, most[0],
                          most[1]);
}

/* The row of batch b, planned now if it was not yet.  NULL on an error
 * (message in s->err); a model too large to size at this batch is a row
 * that does not fit. */
static const budget_row *budget_probe(budget_search *s, int64_t b) {
    for (size_t i = 0; i < s->n_rows; i++)
        if (s->rows[i].batch == b) return &s->rows[i];
    if (s->n_rows == s->cap_rows) {
        size_t cap = s->cap_rows ? 2 * s->cap_rows : 32;
        s->rows = xreallocarray(s->rows, cap, sizeof *s->rows);
        s->cap_rows = cap;
    }
    budget_row *row = &s->rows[s->n_rows];
    memset(row, 0, sizeof *row);
    row->batch = b;
    double t0 = roamc_now();
    planner_progress_prefix("--max-batch: batch %" PRId64, b);
    planner_step step;
    char why[1024];
    /* the batch stays below PLANNER_MAX_BATCH, far from sizes roamc cannot
     * represent: any failure is the model's, reported */
    if ((s->status = budget_load(s->q, b, &step, why, sizeof why)))
        return roamc_errorf(s->err, s->errlen, "at %s=%" PRId64 ": %s", s->q->symbol, b, why), NULL;
    /* --shard: the rank's step; --pipeline-stages: every stage, the
     * largest deciding (in the enum's order, a stage not laid out decides
     * over one at most, one at most over an exact one) */
    budget_sized d;
    if ((s->status = budget_derive(s->q, &step, b, &d, why, sizeof why))) {
        budget_sized_free(&d);
        planner_step_free(&step);
        return roamc_errorf(s->err, s->errlen, "at %s=%" PRId64 ": %s", s->q->symbol, b, why), NULL;
    }
    for (int who = BUDGET_PYTORCH; who <= BUDGET_PLAN && s->status == 0; who++)
        for (size_t k = 0; k < d.n && s->status == 0; k++) {
            budget_row one = {0};
            if ((s->status = budget_size_one(s->q, d.g[k], who, &one, why, sizeof why))) break;
            row->cut |= one.cut;
            if (who == BUDGET_PLAN && one.arena > row->arena) row->arena = one.arena;
            int ws[2] = {who, BUDGET_BOUND};
            for (int j = 0; j < (who == BUDGET_PLAN ? 2 : 1); j++) {
                if (one.need[ws[j]] > row->need[ws[j]]) row->need[ws[j]] = one.need[ws[j]];
                if (one.theoretical[ws[j]] > row->theoretical[ws[j]])
                    row->theoretical[ws[j]] = one.theoretical[ws[j]];
            }
            row->fits[who] = budget_fits(s->q->budget, row->need[who]);
        }
    if (s->status == 0 && s->q->fit && !row->fits[BUDGET_PLAN])
        s->status = budget_fit(s->q, &step, b, row, why, sizeof why);
    budget_sized_free(&d);
    planner_step_free(&step);
    if (s->status)
        return roamc_errorf(s->err, s->errlen, "at %s=%" PRId64 ": %s", s->q->symbol, b, why), NULL;
    row->fits[BUDGET_BOUND] = budget_fits(s->q->budget, row->need[BUDGET_BOUND]);
    row->seconds = roamc_now() - t0;
    s->n_rows++;
    budget_note(s, row);
    return row;
}

/* Largest batch at which plan `who` fits (0 when batch 1 does not), by
 * doubling then bisection; -1 on an error. */
static int64_t budget_search_one(budget_search *s, int who, bool *capped) {
    int64_t lo = 0, hi = 1;
    for (;;) {
        const budget_row *r = budget_probe(s, hi);
        if (!r) return -1;
        if (!r->fits[who]) break;
        lo = hi;
        if (hi >= PLANNER_MAX_BATCH) {
            *capped = true;
            return lo;
        }
        hi *= 2;
    }
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        const budget_row *r = budget_probe(s, mid);
        if (!r) return -1;
        if (r->fits[who])
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* The arena column: "16.00 GiB", "<=16.02 GiB" or "-" (see budget_row);
 * buf holds at least 32 bytes. */
static const char *budget_arena_text(const budget_row *r, char *buf, size_t len) {
    if (r->arena == BUDGET_ARENA_SKIPPED) return snprintf(buf, len, "-"), buf;
    size_t k = r->arena == BUDGET_ARENA_AT_MOST ? 2 : 0;
    memcpy(buf, "<=", k);
    roamc_bytes_human(r->need[BUDGET_PLAN], buf + k, len - k);
    return buf;
}

/* The --fit column: what the changed step adds to the step's time, in %
 * ("+6.2%"); "cannot" where no change fits; "-" where the step fits as it
 * is (nothing tried).  buf holds at least 16 bytes. */
static const char *budget_fit_text(const budget_row *r, char *buf, size_t len) {
    if (!r->fit_tried)
        snprintf(buf, len, "-");
    else if (r->fit_status == FIT_CANNOT)
        snprintf(buf, len, "cannot");
    else
        snprintf(buf, len, "+%.1f%%", r->fit_added_percent);
    return buf;
}

static int budget_row_cmp(const void *a, const void *b) {
    int64_t x = ((const budget_row *)a)->batch, y = ((const budget_row *)b)->batch;
    return (x > y) - (x < y);
}

/* x position of batch b on the chart's log2 axis */
static double budget_svg_x(int64_t b, int64_t top) {
    return 80 + 900.0 * (top > 1 ? __builtin_log2((double)b) / __builtin_log2((double)top) : 0.5);
}

/* Peak against batch, both plans and the budget line. */
static void budget_svg(const budget_search *s, const int64_t best[BUDGET_N], FILE *f) {
    const planner_batch_query *q = s->q;
    int64_t top = 2;
    uint64_t ymax = q->budget->budget;
    for (size_t i = 0; i < s->n_rows; i++) {
        if (s->rows[i].batch > top) top = s->rows[i].batch;
        for (int w = 0; w < BUDGET_N; w++)
            if (s->rows[i].need[w] > ymax) ymax = s->rows[i].need[w];
    }
    ymax += ymax / 10;
    const double H = 400, Y0 = 60;
#define BUDGET_Y(v) (Y0 + H - H * (double)(v) / (double)ymax)
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
            "width=\"1100\" "
            "height=\"540\" viewBox=\"0 0 1100 540\">\n<rect width=\"100%%\" height=\"100%%\" "
            "fill=\"white\"/>\n"
            "<style>text{font-family:sans-serif;font-size:12px}.t{font-size:14px;font-weight:bold}"
            ".ax{stroke:#888}.b{stroke:#e15759;stroke-dasharray:6 4}</style>\n");
    const char *base = strrchr(q->model_path, '/');
    char h1[32], h2[32];
    fprintf(f, "<text class=\"t\" x=\"80\" y=\"24\">");
    for (const char *c = base ? base + 1 : q->model_path; *c; c++) {
        if (*c == '<' || *c == '>' || *c == '&' || *c == '"')
            fprintf(f, "&#%d;", *c);
        else
            fputc(*c, f);
    }
    fprintf(f,
            ": device memory against batch '%s'; budget %s (reserve %s): PyTorch fits %" PRId64
            ", roamc's plan %" PRId64 "</text>\n",
            q->symbol, roamc_bytes_human(q->budget->budget, h1, sizeof h1),
            roamc_bytes_human(q->budget->reserve, h2, sizeof h2), best[0], best[1]);
    /* axes with ticks: bytes up (5 ticks), batch across (powers of two) */
    fprintf(f, "<line class=\"ax\" x1=\"80\" y1=\"%.1f\" x2=\"990\" y2=\"%.1f\"/>\n", Y0 + H,
            Y0 + H);
    fprintf(f, "<line class=\"ax\" x1=\"80\" y1=\"%.1f\" x2=\"80\" y2=\"%.1f\"/>\n", Y0, Y0 + H);
    /* round ticks: 1, 2 or 5 times a power of ten, in GiB or MiB */
    double unit = ymax >= (1ull << 30) ? (double)(1ull << 30) : (double)(1ull << 20),
           raw = (double)ymax / unit / 5, step = 1;
    while (step * 10 <= raw) step *= 10;
    step *= raw > 5 * step ? 10 : raw > 2 * step ? 5 : raw > step ? 2 : 1;
    for (double v = 0; v * unit <= (double)ymax; v += step)
        fprintf(f,
                "<text x=\"74\" y=\"%.1f\" text-anchor=\"end\">%g %s</text><line class=\"ax\" "
                "x1=\"76\" "
                "y1=\"%.1f\" x2=\"80\" y2=\"%.1f\"/>\n",
                BUDGET_Y(v * unit) + 4, v, unit > (double)(1ull << 20) ? "GiB" : "MiB",
                BUDGET_Y(v * unit), BUDGET_Y(v * unit));
    for (int64_t b = 1; b <= top; b *= 2)
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%" PRId64 "</text>\n",
                budget_svg_x(b, top), Y0 + H + 16, b);
    fprintf(f, "<text x=\"535\" y=\"%.1f\" text-anchor=\"middle\">batch (log scale)</text>\n",
            Y0 + H + 34);
    /* budget line: what the step may use, the reserve taken off */
    fprintf(f,
            "<line class=\"b\" x1=\"80\" y1=\"%.1f\" x2=\"990\" y2=\"%.1f\"/><text x=\"994\" "
            "y=\"%.1f\" "
            "fill=\"#e15759\">budget</text>\n",
            BUDGET_Y(q->budget->budget - q->budget->reserve),
            BUDGET_Y(q->budget->budget - q->budget->reserve),
            BUDGET_Y(q->budget->budget - q->budget->reserve) + 4);
    static const char *const colors[BUDGET_N] = {"#f28e2b", "#4e79a7", "#bab0ac"};
    static const char *const names[BUDGET_N] = {"PyTorch (allocator reserves)",
                                                "roamc plan (arena)", "lower bound (any plan)"};
    /* the bound first, dashed, so that the plan drawn over it stays visible */
    for (int w = BUDGET_N - 1; w >= 0; w--) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\" points=\"", colors[w],
                w == BUDGET_BOUND ? "1.5\" stroke-dasharray=\"5 3" : "2");
        for (size_t i = 0; i < s->n_rows; i++)
            fprintf(f, "%.1f,%.1f ", budget_svg_x(s->rows[i].batch, top),
                    BUDGET_Y(s->rows[i].need[w]));
        fprintf(f, "\"/>\n");
        for (size_t i = 0; i < s->n_rows; i++)
            fprintf(f,
                    "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%s\" fill=\"%s\"><title>batch %" PRId64
                    ": %s</title></circle>\n",
                    budget_svg_x(s->rows[i].batch, top), BUDGET_Y(s->rows[i].need[w]),
                    s->rows[i].batch == best[w] ? "5"
                    : w == BUDGET_BOUND         ? "1.5"
                                                : "2.5",
                    colors[w], s->rows[i].batch,
                    roamc_bytes_human(s->rows[i].need[w], h1, sizeof h1));
        fprintf(f,
                "<rect x=\"%d\" y=\"36\" width=\"14\" height=\"4\" fill=\"%s\"/><text x=\"%d\" "
                "y=\"42\">%s: "
                "largest batch %" PRId64 "</text>\n",
                80 + 340 * w, colors[w], 98 + 340 * w, names[w], best[w]);
    }
#undef BUDGET_Y
    fputs("</svg>\n", f);
}

/* The symbol to search: q->symbol when given (it must be a dim of the
 * model left unbound), else the one input symbol the bindings leave
 * unbound.  Returns 0 with *sym (owned by the caller), or -1. */
static int budget_find_symbol(const planner_batch_query *q, char **sym, char *err, size_t errlen) {
    fe_options o = *q->bindings;
    o.allow_unresolved = true;
    fe_model m;
    if (fe_load(q->model_path, &o, &m, err, errlen)) return -1;
    char names[512] = "";
    size_t n_unbound = 0, len = 0;
    const char *only = NULL;
    const fe_symbol *bound = NULL; /* an input symbol --dim binds */
    int rc = 0;
    /* only the symbols of the graph inputs: an exporter names output dims
     * too (torch.onnx.export's dynamic output axes, 'Addlogits_dim_1'),
     * which the inputs decide */
    bool *on_input = xcalloc(m.n_symbols + 1, sizeof *on_input);
    for (size_t k = 0; k < m.n_inputs; k++) {
        const fe_value *v = &m.values[m.inputs[k]];
        if (!(v->kind & FE_GRAPH_INPUT) || (v->kind & FE_INITIALIZER)) continue;
        for (int d = 0; d < v->rank; d++)
            if (v->dims[d].symbol >= 0 && (size_t)v->dims[d].symbol < m.n_symbols)
                on_input[v->dims[d].symbol] = true;
    }
    for (size_t i = 0; i < m.n_symbols; i++) {
        const fe_symbol *s = &m.symbols[i];
        if (s->kind != FE_SYMBOL_INPUT) continue;
        if (s->value < 0 && !on_input[i] && !(q->symbol && strcmp(s->name, q->symbol) == 0))
            continue;
        if (q->symbol && strcmp(s->name, q->symbol) == 0) {
            if (s->value >= 0)
                rc = roamc_errorf(err, errlen,
                                  "%s: --max-batch searches '%s', which --dim binds to %" PRId64
                                  "; leave it unbound",
                                  q->model_path, q->symbol, s->value);
            only = s->name;
            n_unbound = 1;
            break;
        }
        if (s->value >= 0) {
            if (!bound) bound = s;
            continue;
        }
        if (len < sizeof names)
            len += (size_t)snprintf(names + len, sizeof names - len, "%s'%s'",
                                    n_unbound ? ", " : "", s->name);
        only = s->name;
        n_unbound++;
    }
    if (rc == 0 && q->symbol && !(only && strcmp(only, q->symbol) == 0))
        rc = roamc_errorf(err, errlen, "%s: the model has no symbolic dim '%s'%s%s", q->model_path,
                          q->symbol, n_unbound ? "; its unbound symbols: " : "", names);
    else if (rc == 0 && n_unbound == 0 && bound)
        rc = roamc_errorf(
            err, errlen,
            "%s: --max-batch searches a symbolic dim, and --dim binds every one ('%s' to %" PRId64
            "): leave the batch unbound",
            q->model_path, bound->name, bound->value);
    else if (rc == 0 && n_unbound == 0)
        rc = roamc_errorf(
            err, errlen,
            "%s: --max-batch needs a symbolic batch dim, and the model has none left unbound (its "
            "input "
            "shapes are fixed). Export it with one: torch.onnx.export(..., dynamic_axes={'INPUT': "
            "{0: "
            "'batch'}}), or for a training step `models/export.py --model NAME --symbolic-batch`",
            q->model_path);
    else if (rc == 0 && n_unbound > 1)
        rc = roamc_errorf(err, errlen,
                          "%s: the model has %zu unbound symbols (%s); bind all but the batch "
                          "with --dim SYMBOL=V, "
                          "or name the batch: --max-batch=SYMBOL",
                          q->model_path, n_unbound, names);
    if (rc == 0) *sym = xstrdup(only);
    free(on_input);
    fe_free(&m);
    return rc;
}

/* What the search found for each of BUDGET_N: the largest batch that fits,
 * whether the search stopped at PLANNER_MAX_BATCH, and a batch above that
 * one that fits too (0 when none was tried) */
typedef struct budget_result {
    int64_t best[BUDGET_N];
    bool capped[BUDGET_N];
    int64_t above[BUDGET_N];
    double seconds; /* the whole search */
} budget_result;

/* The plan at the largest batch, held for -o until the report is written;
 * with --fit, of the changed step where the step does not fit as it is. */
typedef struct budget_chosen {
    plan p;
    planner_step step;
    bool have;
    fit_outcome fo; /* have_fit: --fit's run at that batch */
    bool have_fit;
    const plan *out;         /* the plan written: p, or fo's changed step's */
    const uint8_t *step_out; /* the step --emit-train writes, out's */
    size_t step_len;
} budget_chosen;

static void budget_chosen_free(budget_chosen *c) {
    if (c->have_fit) fit_outcome_free(&c->fo);
    if (c->have) {
        plan_free(&c->p);
        planner_step_free(&c->step);
    }
    memset(c, 0, sizeof *c);
}

/* Searches the largest batch of each of BUDGET_N in turn (rows shared, so a
 * batch is planned once), then sorts the rows by batch and notes a batch
 * above each boundary that fits.  Returns 0, or the exit status of the
 * failure (message in s->err). */
static int budget_search_all(budget_search *s, budget_result *res) {
    double t0 = roamc_now();
    int rc = 0;
    for (int w = 0; w < BUDGET_N && rc == 0; w++)
        if ((res->best[w] = budget_search_one(s, w, &res->capped[w])) < 0)
            rc = s->status ? s->status : 1;
    res->seconds = roamc_now() - t0;
    planner_progress_prefix("%s", "--max-batch: writing");
    if (rc) return rc;
    qsort(s->rows, s->n_rows, sizeof *s->rows, budget_row_cmp);
    /* a batch above the boundary that fits: the need is not monotone */
    for (size_t i = 0; i < s->n_rows; i++)
        for (int w = 0; w < BUDGET_N; w++)
            if (s->rows[i].fits[w] && s->rows[i].batch > res->best[w] && !res->above[w])
                res->above[w] = s->rows[i].batch;
    return 0;
}

/* Plans the model at batch with q's options into c (c->have set); with
 * --fit, where that plan does not fit, the changed step the search found
 * (c->have_fit).  Returns 0, or the exit status with a message; c holds
 * nothing then. */
static int budget_plan_at(const planner_batch_query *q, int64_t batch, budget_chosen *c, char *err,
                          size_t errlen) {
    int rc = budget_load(q, batch, &c->step, err, errlen);
    if (rc) return rc;
    if ((rc = budget_plan(q, &c->step.g, BUDGET_PLAN, false, &c->p, err, errlen))) {
        planner_step_free(&c->step);
        return rc;
    }
    c->have = true;
    c->out = &c->p;
    c->step_out = c->step.bytes;
    c->step_len = c->step.len;
    if (!q->fit || budget_fits(q->budget, plan_device_bytes(&c->p))) return 0;
    char why[1024];
    c->have_fit = true;
    if (budget_fit_run(q, &c->step, batch, q->emit_path, &c->fo, why, sizeof why)) {
        budget_chosen_free(c);
        return roamc_errorf(err, errlen, "at %s=%" PRId64 ": %s", q->symbol, batch, why), 1;
    }
    if (c->fo.status != FIT_FITTED) { /* the search fitted it with the same options */
        budget_chosen_free(c);
        return roamc_errorf(err, errlen, "at %s=%" PRId64 ": --fit %s, where the search fitted it",
                            q->symbol, batch, fit_status_name(c->fo.status)),
               1;
    }
    c->out = &c->fo.changed->plan;
    c->step_out = c->fo.changed->bytes;
    c->step_len = c->fo.changed->len;
    return 0;
}

/* Writes -o (the chosen plan, when c has one), --emit-train (--fit: its
 * step) and --svg (the chart), all or none (planner_output_set).  The plan
 * names the step written, when one is.  Returns 0, or 1 with a message. */
static int budget_write_outputs(const budget_search *s, const budget_result *res,
                                const budget_chosen *c, char *err, size_t errlen) {
    const planner_batch_query *q = s->q;
    planner_output_set set = {0};
    int i_plan = planner_outputs_add(&set, "-o", c->have ? q->out_path : NULL);
    int i_step = planner_outputs_add(&set, "--emit-train", c->have ? q->emit_path : NULL);
    int i_svg = planner_outputs_add(&set, "--svg", q->svg_path);
    if (planner_outputs_open(&set, err, errlen)) return 1;
    const char *named = q->emit_path ? q->emit_path : q->model_path;
    int ok = i_plan < 0 || plan_write_stream(c->out, named, set.slot[i_plan].f) == 0;
    if (!ok) roamc_errorf(err, errlen, "-o %s: cannot write the plan: I/O error", q->out_path);
    if (ok && i_step >= 0 && fwrite(c->step_out, 1, c->step_len, set.slot[i_step].f) != c->step_len)
        ok = 0, roamc_errorf(err, errlen, "--emit-train %s: cannot write the step: I/O error",
                             q->emit_path);
    if (ok && i_svg >= 0) budget_svg(s, res->best, set.slot[i_svg].f);
    return planner_outputs_commit(&set, ok, ok ? err : NULL, errlen) ? 1 : 0;
}

/* The --report json report: the verdicts, every batch tried, and the plan
 * written (null when none). */
static void budget_report_json(FILE *out, const budget_search *s, const budget_result *res,
                               bool have_plan) {
    const planner_batch_query *q = s->q;
    static const char *const keys[BUDGET_N] = {"pytorch", "plan", "lower_bound"};
    json_t *r = json_object();
    json_object_set_new(r, "model", json_string(q->model_path));
    json_object_set_new(r, "batch_symbol", json_string(q->symbol));
    json_object_set_new(r, "budget", budget_echo_json(q->budget));
    json_object_set_new(r, "order", json_string(planner_order_name(q->opt.order)));
    json_object_set_new(r, "layout", json_string(planner_layout_name(q->opt.layout)));
    if (q->shard) { /* the batch is the micro-batch per device */
        json_t *sh = json_object();
        json_object_set_new(sh, "setup", json_string(shard_kind_name(q->shard->kind)));
        json_object_set_new(sh, "world", json_integer(q->shard->world));
        json_object_set_new(sh, "rank", json_integer(q->shard->rank));
        json_object_set_new(r, "shard", sh);
    }
    if (q->pipe) { /* the batch is the micro-batch, every stage within the budget */
        json_t *pp = json_object();
        json_object_set_new(pp, "stages", json_integer(q->pipe->stages));
        json_object_set_new(
            pp, "microbatches",
            json_integer(q->pipe->microbatches > 0 ? q->pipe->microbatches : q->pipe->stages));
        json_object_set_new(pp, "schedule", json_string(pipe_schedule_name(q->pipe->schedule)));
        json_object_set_new(r, "pipeline", pp);
    }
    json_t *mb = json_object(), *cap = json_object(), *nm = json_object();
    for (int w = 0; w < BUDGET_N; w++) {
        json_object_set_new(mb, keys[w], json_integer(res->best[w]));
        json_object_set_new(cap, keys[w], json_boolean(res->capped[w]));
        json_object_set_new(nm, keys[w], res->above[w] ? json_integer(res->above[w]) : json_null());
    }
    json_object_set_new(r, "max_batch", mb);
    json_object_set_new(r, "stopped_at_search_limit", cap);
    json_object_set_new(r, "fits_above_max_batch", nm);
    json_object_set_new(r, "search_limit", json_integer(PLANNER_MAX_BATCH));
    json_t *rows = json_array();
    for (size_t i = 0; i < s->n_rows; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "batch", json_integer(s->rows[i].batch));
        for (int w = 0; w < BUDGET_N; w++)
            json_object_set_new(
                o, keys[w],
                budget_verdict_json(q->budget, s->rows[i].need[w], s->rows[i].theoretical[w]));
        static const char *const arena[] = {"exact", "at_most", "not_laid_out"};
        json_object_set_new(json_object_get(o, "plan"), "arena",
                            json_string(arena[s->rows[i].arena]));
        json_object_set_new(o, "seconds", json_real(s->rows[i].seconds));
        json_object_set_new(o, "time_limit_cut", json_boolean(s->rows[i].cut));
        if (s->rows[i].fit_tried) {
            json_t *f = json_object();
            json_object_set_new(f, "status", json_string(fit_status_name(s->rows[i].fit_status)));
            json_object_set_new(f, "added_percent", json_real(s->rows[i].fit_added_percent));
            json_object_set_new(json_object_get(o, "plan"), "fit", f);
        }
        json_array_append_new(rows, o);
    }
    json_object_set_new(r, "rows", rows);
    json_object_set_new(r, "seconds", json_real(res->seconds));
    json_object_set_new(r, "plan",
                        have_plan && q->out_path ? json_string(q->out_path) : json_null());
    json_object_set_new(r, "step",
                        have_plan && q->emit_path ? json_string(q->emit_path) : json_null());
    json_dumpf(r, out, JSON_INDENT(2));
    fputc('\n', out);
    json_decref(r);
}

/* The text report: one table row per batch tried, then the verdicts and
 * notes on how they were found. */
static void budget_report_text(FILE *out, const budget_search *s, const budget_result *res,
                               const budget_chosen *chosen) {
    bool have_plan = chosen->have;
    const planner_batch_query *q = s->q;
    const int64_t *best = res->best;
    const char *who[BUDGET_N] = {"PyTorch", q->fit ? "roamc --fit" : "roamc's plan",
                                 "the lower bound"};
    char h1[32], h2[32], h3[32], h4[32];
    char g1[40], h5[32];
    bool slow = false;
    for (size_t i = 0; i < s->n_rows; i++) slow |= s->rows[i].arena != BUDGET_ARENA_EXACT;
    if (q->quiet) { /* -q: the answer alone */
        for (int w = 0; w < BUDGET_N; w++)
            fprintf(out, "%s: largest batch %" PRId64 "%s\n", who[w], best[w],
                    best[w] == 0     ? " (not even batch 1 fits)"
                    : res->capped[w] ? " (the search stops there)"
                                     : "");
        return;
    }
    fprintf(out, "roamc %s --max-batch: %s, batch symbol '%s'\n", ROAMC_VERSION, q->model_path,
            q->symbol);
    if (q->shard)
        fprintf(out,
                "  set-up        one rank of --shard %s, world %ld, rank %ld: the batch is the "
                "micro-batch per device, the budget per device\n",
                shard_kind_name(q->shard->kind), q->shard->world, q->shard->rank);
    long mb = q->pipe && q->pipe->microbatches > 0 ? q->pipe->microbatches
              : q->pipe                            ? q->pipe->stages
                                                   : 0;
    if (q->pipe)
        fprintf(out,
                "  set-up        pipeline of %ld stages, %ld microbatch%s, %s schedule: the batch "
                "is the micro-batch, the budget per device; a batch fits when every stage "
                "does (each column: the largest stage)\n",
                q->pipe->stages, mb, mb == 1 ? "" : "es", pipe_schedule_name(q->pipe->schedule));
    budget_echo_text(out, q->budget);
    /* --fit: a column of its own for the time a changed step adds, so
     * that every row keeps the columns' widths */
    fprintf(out, "  %8s  %11s %11s %-4s  %11s %13s %-4s %*s%s %11s %-4s %7s\n", "batch",
            "PyTorch th.", "reserved", "fits", "plan th.", "arena", "fits", q->fit ? 8 : 0,
            q->fit ? "fit time" : "", q->fit ? " " : "", "lower bound", "fits", "time");
    for (size_t i = 0; i < s->n_rows; i++) {
        const budget_row *r = &s->rows[i];
        char ft[32];
        fprintf(out, "  %8" PRId64 "  %11s %11s %-4s  %11s %13s %-4s %*s%s %11s %-4s %6.2fs\n",
                r->batch, roamc_bytes_human(r->theoretical[0], h1, sizeof h1),
                roamc_bytes_human(r->need[0], h2, sizeof h2), r->fits[0] ? "yes" : "no",
                roamc_bytes_human(r->theoretical[1], h3, sizeof h3),
                budget_arena_text(r, h4, sizeof h4), r->fits[1] ? "yes" : "no", q->fit ? 8 : 0,
                q->fit ? budget_fit_text(r, ft, sizeof ft) : "", q->fit ? " " : "",
                roamc_bytes_human(r->need[2], h5, sizeof h5), r->fits[2] ? "yes" : "no",
                r->seconds);
    }
    for (int w = 0; w < BUDGET_N; w++) {
        if (best[w] == 0)
            fprintf(out, "  %-15s does not fit even batch 1\n", who[w]);
        else if (res->capped[w])
            fprintf(out, "  %-15s fits batch %" PRId64 " (the search stops there)\n", who[w],
                    best[w]);
        else
            fprintf(out, "  %-15s fits batch %" PRId64 " and not %" PRId64 "\n", who[w], best[w],
                    best[w] + 1);
        if (res->above[w])
            fprintf(out,
                    "  note: %s also fits batch %" PRId64
                    ", above that: its need does not grow with the "
                    "batch everywhere, so a larger batch may fit\n",
                    who[w], res->above[w]);
    }
    if (best[0] > 0 && best[1] > 0)
        fprintf(out,
                "  PyTorch fits batch %" PRId64
                ", roamc's plan (order %s, layout %s%s) fits batch %" PRId64
                " (%+.1f%% against PyTorch); no plan of this step fits more than batch %" PRId64
                " (the lower bound)%s\n",
                best[0], planner_order_name(q->opt.order), planner_layout_name(q->opt.layout),
                q->fit ? ", --fit where the step does not fit as it is" : "", best[1],
                100.0 * ((double)best[1] - (double)best[0]) / (double)best[0], best[2],
                q->fit ? " unless, as --fit does, the step is changed" : "");
    fprintf(out, "  search        %zu batches, each planned both ways, in %.2f s\n", s->n_rows,
            res->seconds);
    if (slow)
        fprintf(out,
                "  arena         laid out by layout %s where that decides the fit; <=: llfb's "
                "arena, which fits "
                "already (layout %s does no worse); -: not laid out, the theoretical peak is "
                "over the budget\n",
                planner_layout_name(q->opt.layout), planner_layout_name(q->opt.layout));
    if (q->fit)
        fprintf(out,
                "  fit time      --fit where the plan alone does not fit: the time the changed "
                "step adds, in %% of the unchanged step's on the %s (the arena column is then "
                "the changed step's; fits no: over --max-overhead); cannot: no change fits; -: "
                "the step fits as it is\n",
                q->device ? q->device->name : "device");
    size_t n_cut = 0;
    for (size_t i = 0; i < s->n_rows; i++) n_cut += s->rows[i].cut;
    if (n_cut)
        fprintf(out,
                "  time limit    %g s cut the plans of %zu of the %zu batches (the fastest "
                "valid plan, or solvers "
                "stopped early): the boundary may move with more time\n",
                q->opt.time_limit, n_cut, s->n_rows);
    if (have_plan && q->out_path) /* --fit -o needs --emit-train: the plan names that step */
        fprintf(out, "  plan written  %s (batch %s%s%s)\n", q->out_path,
                budget_grouped((uint64_t)best[1], g1, sizeof g1),
                q->emit_path ? ", of the step written to " : "", q->emit_path ? q->emit_path : "");
    if (have_plan && q->emit_path)
        fprintf(out, "  step written  %s (batch %s, %s)\n", q->emit_path,
                budget_grouped((uint64_t)best[1], g1, sizeof g1),
                chosen->have_fit ? "changed by --fit" : "unchanged: it fits as it is");
    if (q->svg_path) fprintf(out, "  picture written %s\n", q->svg_path);
}

int planner_max_batch(const planner_batch_query *query, FILE *out, char *err, size_t errlen) {
    planner_batch_query q = *query;
    char *sym = NULL;
    if (budget_find_symbol(&q, &sym, err, errlen)) return 2;
    q.symbol = sym;
    budget_search s = {.q = &q, .err = err, .errlen = errlen};
    budget_result res = {0};
    int rc = budget_search_all(&s, &res);
    budget_chosen chosen = {0};
    if (rc == 0 && (q.out_path || q.emit_path) && res.best[BUDGET_PLAN] > 0)
        rc = budget_plan_at(&q, res.best[BUDGET_PLAN], &chosen, err, errlen);
    if (rc == 0 && (chosen.have || q.svg_path))
        rc = budget_write_outputs(&s, &res, &chosen, err, errlen);
    planner_progress_end();
    if (rc == 0 && q.found) {
        q.found[0] = res.best[BUDGET_PLAN];
        q.found[1] = res.best[BUDGET_PYTORCH];
    }
    if (rc == 0 && out && q.json)
        budget_report_json(out, &s, &res, chosen.have);
    else if (rc == 0 && out)
        budget_report_text(out, &s, &res, &chosen);
    budget_chosen_free(&chosen);
    free(s.rows);
    free(sym);
    if (rc) return rc;
    return res.best[BUDGET_PLAN] > 0 ? 0 : PLANNER_EXIT_NO_FIT;
}
