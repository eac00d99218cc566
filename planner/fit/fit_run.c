/* --fit: the cheapest changed step whose plan fits the budget (issue 27;
 * FIT.md tells the whole of it).
 *
 *   1. plan the unchanged step (the options' order and layout); if its
 *      arena fits, nothing changes;
 *   2. fit_choose: the greedy sequence of recompute/offload actions on that
 *      plan, with the estimated peak after each prefix;
 *   3. a ladder of prefixes fixed by the estimates (fit_ladder), not by
 *      the budget: in order, each rung's changed step is written
 *      (fit_emit), loaded and planned as any other step, until one's real
 *      arena fits; a plan is only ever kept when the pipeline validated
 *      it, so the fitted peak is an arena that exists, and a lower budget
 *      never takes a shorter prefix (monotone added time);
 *   4. on small steps, the MILP's choice (fit_choose_exact) is planned
 *      beside it and reported, as a check;
 *   5. what the change adds is measured on the changed step's own plan:
 *      recompute seconds and FLOPs from the cost model, the host copies on
 *      a stream of their own (fit_simulate), so only what compute does not
 *      hide counts.
 */
#include "fit.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base.h"

/* Rungs of the ladder of prefixes planned for real (fit_ladder): the
 * finest step of added time is about 1/FIT_LADDER of the whole sequence's. */
#define FIT_LADDER 48
#define FIT_MAX_CLOSURE_OPS 64
/* The MILP (fit_by_milp): steps with at most this many candidates, this
 * much work (ilp_fit.h's units; a few seconds), this many tightenings. */
#define FIT_EXACT_MAX_CANDIDATES 120
#define FIT_EXACT_WORK 30000000ull
#define FIT_EXACT_TRIES 4

/* Seconds and FLOPs of every op of g on the device. */
static void fit_op_costs(const graph *g, const fit_device *d, double *seconds, double *flops) {
    graph_op_cost *c = xmallocarray(g->n_ops ? g->n_ops : 1, sizeof *c);
    graph_op_costs(g, c);
    for (size_t i = 0; i < g->n_ops; i++) {
        seconds[i] = fit_op_seconds(d, &c[i]);
        flops[i] = c[i].flops;
    }
    free(c);
}

/* The schedule of p on two streams: compute runs the ops in order; the
 * host copies (Offload, Reload) run in order on a copy stream.  An Offload
 * may start once its input is made and must end before its own step ends
 * (the plan frees the input there); a Reload may start at its own step,
 * once its Offload ended, and its output is ready when it ends, so its
 * readers wait for it.  Returns the step's seconds; *copy_s gets the copy
 * stream's busy seconds. */
static double fit_simulate(const plan *p, const fit_device *d, double *copy_s) {
    const graph *g = p->g;
    const fe_model *m = g->model;
    double *sec = xmallocarray(g->n_ops ? g->n_ops : 1, sizeof *sec);
    double *fl = xmallocarray(g->n_ops ? g->n_ops : 1, sizeof *fl);
    double *ready = xcalloc(m->n_values ? m->n_values : 1, sizeof *ready);
    fit_op_costs(g, d, sec, fl);
    double now = 0, stream = 0;
    *copy_s = 0;
    for (size_t s = 0; s < g->n_ops; s++) {
        const fe_node *n = &m->nodes[p->order[s]];
        double start = now;
        for (size_t i = 0; i < n->n_inputs; i++)
            if (n->inputs[i] >= 0 && ready[n->inputs[i]] > start) start = ready[n->inputs[i]];
        bool off = graph_is_roamc_op(n, "Offload"), rel = graph_is_roamc_op(n, "Reload");
        if (off || rel) {
            int x = n->inputs[0];
            uint64_t bytes = x >= 0 ? m->values[x].bytes : 0;
            double copy = fit_copy_seconds(d, bytes);
            /* an Offload starts when its input was made, a Reload at its step */
            double from = off ? (x >= 0 ? ready[x] : 0) : start;
            double begin = from > stream ? from : stream;
            stream = begin + copy;
            *copy_s += copy;
            for (size_t k = 0; k < n->n_outputs; k++)
                if (n->outputs[k] >= 0) ready[n->outputs[k]] = stream;
            now = off && stream > start ? stream : start; /* the Offload's step ends with it */
            continue;
        }
        now = start + sec[p->order[s]];
        for (size_t k = 0; k < n->n_outputs; k++)
            if (n->outputs[k] >= 0) ready[n->outputs[k]] = now;
    }
    free(sec);
    free(fl);
    free(ready);
    return now;
}

/* The smallest prefix, from `from` on, whose estimated peak is at most
 * target; c->n_actions when none is. */
static size_t fit_prefix(const fit_choice *c, size_t from, uint64_t target) {
    for (size_t k = from; k <= c->n_actions; k++)
        if (c->peaks[k] <= target) return k;
    return c->n_actions;
}

/* Writes the first k actions, loads the changed step and plans it into
 * o->changed (a step of its own on the heap: its graph points at its model
 * and its plan at its graph, so it is never copied, only its pointer). */
static int fit_try(const fit_request *r, const fit_choice *c, size_t k, fit_outcome *o, char *err,
                   size_t errlen) {
    fit_step_free(o->changed);
    fit_step *st = o->changed = xcalloc(1, sizeof *st);
    fit_emit_request er = {.g = r->g,
                           .choice = c,
                           .n_actions = k,
                           .step_name = r->step_name,
                           .step_bytes = r->step_bytes,
                           .step_len = r->step_len};
    o->n_actions = k;
    o->plans++;
    if (fit_emit(&er, &st->bytes, &st->len, err, errlen)) return -1;
    if (fe_load_bytes(r->emit_name, (fe_bytes){st->bytes, st->len}, r->bindings, &st->model, err,
                      errlen))
        return -1;
    st->stage = 1;
    if (graph_build(&st->model, r->opt->align, &st->graph, err, errlen)) return -1;
    st->stage = 2;
    if (plan_build(&st->graph, r->opt, &st->plan, err, errlen)) return -1;
    st->stage = 3;
    return 0;
}

/* What the first o->n_actions of c add, measured on the changed plan. */
static void fit_measure(const fit_request *r, const fit_choice *c, fit_outcome *o) {
    const graph *g = r->g;
    o->n_recomputed = o->n_offloaded = o->n_cloned_ops = 0;
    o->bytes_recomputed = o->bytes_offloaded = o->link_bytes = o->added_bytes = o->host_bytes = 0;
    o->added_flops = o->recompute_seconds = 0;
    for (size_t a = 0; a < o->n_actions; a++) {
        const fit_action *A = &c->actions[a];
        uint64_t size = g->storages[A->storage].size;
        if (A->kind == FIT_RECOMPUTE) {
            o->n_recomputed++, o->bytes_recomputed += size, o->n_cloned_ops += A->n_ops;
            o->added_flops += A->flops;
            o->recompute_seconds += A->seconds;
        } else {
            o->n_offloaded++, o->bytes_offloaded += size;
            o->link_bytes += A->moved_bytes;
        }
    }
    graph_op_cost *cost = xmallocarray(g->n_ops ? g->n_ops : 1, sizeof *cost);
    graph_op_costs(g, cost);
    for (size_t a = 0; a < o->n_actions; a++)
        for (size_t k = 0; k < c->actions[a].n_ops; k++)
            o->added_bytes += cost[c->actions[a].ops[k]].bytes;
    free(cost);
    o->added_bytes += o->link_bytes;
    const graph *cg = &o->changed->graph;
    for (size_t s = 0; s < cg->n_storages; s++)
        if (cg->storages[s].host) o->host_bytes += cg->storages[s].host_size;
    double copy_s;
    double changed = fit_simulate(&o->changed->plan, r->device, &copy_s);
    o->copy_seconds = copy_s;
    o->added_seconds = changed - o->step_seconds;
    o->copy_exposed_seconds = o->added_seconds - o->recompute_seconds;
    if (o->copy_exposed_seconds < 0) o->copy_exposed_seconds = 0;
}

/* The prefixes of the greedy sequence that are planned for real: the
 * first prefix whose estimated peak is at most each of FIT_LADDER levels
 * spaced evenly from the unchanged peak down to the lowest estimate.  They
 * do not depend on the budget, so the prefix taken for a budget (the
 * shortest on the ladder whose real arena fits) is never shorter for a
 * lower budget: the added time is monotone even where the real arena of a
 * longer prefix is higher (its recomputes' temporaries).  Returns the
 * number of rungs written to ladder (ascending, distinct). */
static size_t fit_ladder(const fit_choice *c, size_t *ladder) {
    uint64_t top = c->peaks[0], low = top;
    for (size_t k = 0; k <= c->n_actions; k++)
        if (c->peaks[k] < low) low = c->peaks[k];
    size_t n = 0;
    for (int j = 1; j <= FIT_LADDER; j++) {
        uint64_t level = top - (uint64_t)((double)(top - low) * j / FIT_LADDER);
        size_t k = fit_prefix(c, 0, level);
        if (k == 0) continue;
        if (n == 0 || k > ladder[n - 1]) ladder[n++] = k;
    }
    return n;
}

/* The greedy sequence's shortest rung whose changed step fits (o->status
 * FIT_FITTED), or the rung with the lowest arena (FIT_CANNOT, o->least). */
static int fit_by_greedy(const fit_request *r, const fit_problem *P, fit_outcome *o, char *err,
                         size_t errlen) {
    fit_choice c;
    fit_choose(P, &c);
    o->n_candidates = c.n_candidates;
    int rc = 0;
    if (c.loss_op < 0) {
        rc = roamc_errorf(err, errlen,
                          "--fit: no loss found (metadata roamc.loss or a scalar output), so the "
                          "forward pass cannot be told from the backward pass");
        goto done;
    }
    size_t ladder[FIT_LADDER], n = fit_ladder(&c, ladder), best = SIZE_MAX;
    uint64_t least = UINT64_MAX;
    /* --max-overhead: a prefix's recompute seconds bound what it adds from
     * below (copies add, never take away), so once the next rung's are over
     * the cap, no longer rung can fit within it */
    double cap = r->max_overhead >= 0 ? r->max_overhead * o->step_seconds : -1;
    double *least_added = xcalloc(c.n_actions + 1, sizeof *least_added);
    for (size_t a = 0; a < c.n_actions; a++)
        least_added[a + 1] =
            least_added[a] + (c.actions[a].kind == FIT_RECOMPUTE ? c.actions[a].seconds : 0);
    o->status = FIT_CANNOT;
    for (size_t i = 0; i < n; i++) {
        if ((rc = fit_try(r, &c, ladder[i], o, err, errlen))) break;
        uint64_t actual = o->changed->plan.actual;
        if (actual < least) least = actual, best = i;
        if (actual <= r->arena_budget) {
            o->status = FIT_FITTED;
            break;
        }
        if (cap >= 0 && i + 1 < n && least_added[ladder[i + 1]] > cap) {
            o->status = FIT_TOO_SLOW;
            o->over_cap_seconds = least_added[ladder[i + 1]];
            break;
        }
    }
    free(least_added);
    if (rc) goto done;
    if (o->status == FIT_CANNOT) {
        /* the lowest arena any rung reached: what the report calls the least */
        if (best == SIZE_MAX) {
            rc = fit_try(r, &c, 0, o, err, errlen);
            if (rc) goto done;
            least = o->changed->plan.actual;
        } else if (best + 1 != n && (rc = fit_try(r, &c, ladder[best], o, err, errlen))) {
            goto done;
        }
        o->least = least;
    }
    fit_measure(r, &c, o);
    o->method = "greedy";
done:
    fit_choice_free(&c);
    return rc;
}

/* The MILP's choice (fit_choose_exact) for the budget, tightened by the
 * overshoot while its changed step does not fit (a few times at most):
 * into alt when it fits (alt->status FIT_FITTED), else alt->status stays
 * FIT_CANNOT.  Its end, however it came out, goes to o->exact. */
static int fit_by_milp(const fit_request *r, const fit_problem *P, fit_outcome *o, fit_outcome *alt,
                       char *err, size_t errlen) {
    fit_exact_budget b = {.work = FIT_EXACT_WORK, .deadline = r->opt->deadline};
    uint64_t target = r->arena_budget;
    alt->status = FIT_CANNOT;
    alt->step_seconds = o->step_seconds;
    for (int tries = 0; tries < FIT_EXACT_TRIES; tries++) {
        fit_choice c;
        fit_choose_exact(P, target, &b, &c, &o->exact);
        o->exact_tried = true;
        int rc = 0;
        bool solved = o->exact.status == ILP_FIT_FOUND || o->exact.status == ILP_FIT_OPTIMAL;
        if (solved && c.n_actions && (rc = fit_try(r, &c, c.n_actions, alt, err, errlen)) == 0) {
            uint64_t actual = alt->changed->plan.actual;
            if (actual <= r->arena_budget) {
                alt->status = FIT_FITTED;
                fit_measure(r, &c, alt);
                alt->method = "MILP";
            } else {
                target -= actual - r->arena_budget < target ? actual - r->arena_budget : target;
            }
        }
        fit_choice_free(&c);
        if (rc) return rc;
        if (!solved || alt->status == FIT_FITTED) break;
    }
    return 0;
}

int fit_run(const fit_request *r, fit_outcome *o, char *err, size_t errlen) {
    memset(o, 0, sizeof *o);
    const graph *g = r->g;
    if (plan_build(g, r->opt, &o->before, err, errlen)) return -1;
    o->have_before = true;
    double copy_s;
    o->step_seconds = fit_simulate(&o->before, r->device, &copy_s);
    if (o->before.actual <= r->arena_budget) {
        o->status = FIT_ALREADY;
        return 0;
    }
    double *sec = xmallocarray(g->n_ops ? g->n_ops : 1, sizeof *sec);
    double *fl = xmallocarray(g->n_ops ? g->n_ops : 1, sizeof *fl);
    fit_op_costs(g, r->device, sec, fl);
    fit_problem P = {.g = g,
                     .order = o->before.order,
                     .start = o->before.start,
                     .end = o->before.end,
                     .op_seconds = sec,
                     .op_flops = fl,
                     .link_bytes_per_s = r->device->figure[FIT_HOST_BW],
                     .mode = r->mode,
                     .max_closure_ops = FIT_MAX_CLOSURE_OPS};
    int rc = fit_by_greedy(r, &P, o, err, errlen);
    /* small enough for the MILP: its choice, planned and measured beside
     * the greedy's, as a check of how far the greedy is from the model's
     * optimum (the greedy's step is kept: its prefixes make the added time
     * monotone in the budget, which a per-budget optimum does not promise) */
    if (rc == 0 && o->n_candidates <= FIT_EXACT_MAX_CANDIDATES) {
        fit_outcome alt = {0};
        rc = fit_by_milp(r, &P, o, &alt, err, errlen);
        o->plans += alt.plans;
        o->exact_seconds = alt.status == FIT_FITTED ? alt.added_seconds : -1;
        fit_step_free(alt.changed);
    }
    if (o->status == FIT_FITTED && r->max_overhead >= 0 &&
        o->added_seconds > r->max_overhead * o->step_seconds)
        o->status = FIT_TOO_SLOW;
    free(sec);
    free(fl);
    return rc;
}

void fit_step_free(fit_step *st) {
    if (!st) return;
    if (st->stage >= 3) plan_free(&st->plan);
    if (st->stage >= 2) graph_free(&st->graph);
    if (st->stage >= 1) fe_free(&st->model);
    free(st->bytes);
    free(st);
}

void fit_outcome_free(fit_outcome *o) {
    fit_step_free(o->changed);
    if (o->have_before) plan_free(&o->before);
    memset(o, 0, sizeof *o);
}

const char *fit_status_name(int status) {
    switch (status) {
    case FIT_ALREADY: return "fits unchanged";
    case FIT_FITTED: return "fits changed";
    case FIT_CANNOT: return "cannot fit";
    case FIT_TOO_SLOW: return "over --max-overhead";
    default: return "?";
    }
}

const char *fit_overhead_warning(const fit_request *r, const fit_outcome *o, char *buf,
                                 size_t len) {
    if (o->status != FIT_FITTED || r->max_overhead >= 0 || o->added_seconds <= o->step_seconds)
        return NULL;
    snprintf(buf, len,
             "the changed step takes %.1fx the step's time (+%.2f%%): --fit sets no cap by "
             "default; --max-overhead P%% refuses a change that adds more than P%%",
             (o->step_seconds + o->added_seconds) / o->step_seconds,
             100.0 * o->added_seconds / o->step_seconds);
    return buf;
}

static const char *fit_mode_name(unsigned mode) {
    return mode == FIT_BOTH        ? "recompute and offload"
           : mode == FIT_RECOMPUTE ? "recompute"
                                   : "offload";
}

static const char *fit_exact_status_name(int status) {
    switch (status) {
    case ILP_FIT_OPTIMAL: return "optimal";
    case ILP_FIT_FOUND: return "feasible, not proven optimal (work budget)";
    case ILP_FIT_INFEASIBLE: return "infeasible";
    default: return "no solution within its work budget";
    }
}

/* Whether the MILP's result holds a solution (its objective), and a
 * lower bound (the LP relaxation was solved, or the optimum proven). */
static bool fit_exact_has_objective(const fit_outcome *o) {
    return o->exact.status == ILP_FIT_OPTIMAL || o->exact.status == ILP_FIT_FOUND;
}
static bool fit_exact_has_bound(const fit_outcome *o) {
    return fit_exact_has_objective(o) || (o->exact.status == ILP_FIT_NONE && o->exact.bound > 0);
}

/* Which chose the step, and how the MILP ended when it ran: its objective
 * and bound only where it has them (an infeasible model has neither). */
static void fit_report_exact_text(FILE *f, const fit_outcome *o) {
    if (!o->exact_tried) {
        fprintf(f, "  fit chosen by greedy (%zu candidates: the MILP runs at most %d)\n",
                o->n_candidates, FIT_EXACT_MAX_CANDIDATES);
        return;
    }
    fprintf(f, "  fit chosen by %s; MILP %s", o->method ? o->method : "-",
            fit_exact_status_name(o->exact.status));
    if (o->exact.status == ILP_FIT_INFEASIBLE)
        fprintf(f, ": no choice of its candidates frees enough at every step of its model");
    if (fit_exact_has_objective(o))
        fprintf(f, ": %.3f ms in its model (bound %.3f ms; ", 1e3 * o->exact.objective,
                1e3 * o->exact.bound);
    else if (fit_exact_has_bound(o))
        fprintf(f, " (its LP relaxation's bound %.3f ms; ", 1e3 * o->exact.bound);
    else
        fprintf(f, " (");
    fprintf(f, "%zu choices, %zu chains, %zu rows, %ld nodes)", o->exact.n_choices,
            o->exact.n_chains, o->exact.n_rows, o->exact.nodes);
    if (fit_exact_has_objective(o) && o->exact_seconds >= 0)
        fprintf(f, "; its step, planned: +%.3f ms", 1e3 * o->exact_seconds);
    else if (fit_exact_has_objective(o))
        fprintf(f, "; its step, planned, does not fit");
    fputc('\n', f);
}

void fit_report_text(FILE *f, const fit_request *r, const fit_outcome *o) {
    char a[32], b[32], c[32], d[32];
    fprintf(f, "  fit           %s (%s; device %s)\n", fit_status_name(o->status),
            fit_mode_name(r->mode), r->device->name);
    fprintf(f, "  fit budget    arena at most %s (%llu B)\n",
            roamc_bytes_human(r->arena_budget, a, sizeof a), (unsigned long long)r->arena_budget);
    if (o->status == FIT_ALREADY) {
        fprintf(f, "  fit change    none: the unchanged step's arena %s fits\n",
                roamc_bytes_human(o->before.actual, a, sizeof a));
        return;
    }
    uint64_t after = o->changed->plan.actual;
    fprintf(f, "  fit peak      %s -> %s actual (%llu -> %llu B); theoretical %s -> %s\n",
            roamc_bytes_human(o->before.actual, a, sizeof a), roamc_bytes_human(after, b, sizeof b),
            (unsigned long long)o->before.actual, (unsigned long long)after,
            roamc_bytes_human(o->before.theoretical, c, sizeof c),
            roamc_bytes_human(o->changed->plan.theoretical, d, sizeof d));
    fprintf(f,
            "  fit values    %zu recomputed (%s, %zu ops cloned), %zu offloaded (%s); %zu of %zu "
            "candidates\n",
            o->n_recomputed, roamc_bytes_human(o->bytes_recomputed, a, sizeof a), o->n_cloned_ops,
            o->n_offloaded, roamc_bytes_human(o->bytes_offloaded, b, sizeof b), o->n_actions,
            o->n_candidates);
    fprintf(f, "  fit adds      %.3g FLOP, %s moved (%s over the host link); host memory %s\n",
            o->added_flops, roamc_bytes_human(o->added_bytes, a, sizeof a),
            roamc_bytes_human(o->link_bytes, b, sizeof b),
            roamc_bytes_human(o->host_bytes, c, sizeof c));
    fprintf(f,
            "  fit time      +%.3f ms on a %.3f ms step (+%.2f%%): recompute %.3f ms, copies not "
            "hidden %.3f ms of %.3f ms\n",
            1e3 * o->added_seconds, 1e3 * o->step_seconds,
            o->step_seconds > 0 ? 100.0 * o->added_seconds / o->step_seconds : 0.0,
            1e3 * o->recompute_seconds, 1e3 * o->copy_exposed_seconds, 1e3 * o->copy_seconds);
    fit_report_exact_text(f, o);
    if (o->status == FIT_CANNOT)
        fprintf(f,
                "  fit verdict   cannot fit: needs at least %llu B (%s): the least arena --fit "
                "reaches (no value live across its peak step is left to recompute or offload)\n",
                (unsigned long long)o->least, roamc_bytes_human(o->least, a, sizeof a));
    else if (o->status == FIT_TOO_SLOW && o->over_cap_seconds > 0)
        fprintf(f,
                "  fit verdict   cannot fit within --max-overhead %.2f%%: a change that could fit "
                "adds at least %.2f%% (its recomputes alone)\n",
                100.0 * r->max_overhead, 100.0 * o->over_cap_seconds / o->step_seconds);
    else if (o->status == FIT_TOO_SLOW)
        fprintf(f,
                "  fit verdict   fits, but adds %.2f%% of the step, over --max-overhead %.2f%%\n",
                100.0 * o->added_seconds / o->step_seconds, 100.0 * r->max_overhead);
    else
        fprintf(f, "  fit slack     %llu B (%s) under the budget; %zu changed steps planned\n",
                (unsigned long long)(r->arena_budget - after),
                roamc_bytes_human(r->arena_budget - after, a, sizeof a), o->plans);
    char w[256];
    if (fit_overhead_warning(r, o, w, sizeof w)) fprintf(f, "  fit warning   %s\n", w);
}

void fit_report_json(struct json_t *obj, const fit_request *r, const fit_outcome *o) {
    json_t *j = json_object();
    json_object_set_new(j, "status", json_string(fit_status_name(o->status)));
    json_object_set_new(j, "mode", json_string(fit_mode_name(r->mode)));
    json_object_set_new(j, "device", json_string(r->device->name));
    json_object_set_new(j, "arena_budget", json_integer((json_int_t)r->arena_budget));
    json_object_set_new(j, "actual_before", json_integer((json_int_t)o->before.actual));
    json_object_set_new(j, "theoretical_before", json_integer((json_int_t)o->before.theoretical));
    json_object_set_new(j, "step_seconds", json_real(o->step_seconds));
    if (o->status != FIT_ALREADY) {
        json_object_set_new(j, "actual_after", json_integer((json_int_t)o->changed->plan.actual));
        json_object_set_new(j, "theoretical_after",
                            json_integer((json_int_t)o->changed->plan.theoretical));
        json_object_set_new(j, "recomputed", json_integer((json_int_t)o->n_recomputed));
        json_object_set_new(j, "recomputed_bytes", json_integer((json_int_t)o->bytes_recomputed));
        json_object_set_new(j, "cloned_ops", json_integer((json_int_t)o->n_cloned_ops));
        json_object_set_new(j, "offloaded", json_integer((json_int_t)o->n_offloaded));
        json_object_set_new(j, "offloaded_bytes", json_integer((json_int_t)o->bytes_offloaded));
        json_object_set_new(j, "candidates", json_integer((json_int_t)o->n_candidates));
        json_object_set_new(j, "added_flops", json_real(o->added_flops));
        json_object_set_new(j, "added_bytes", json_integer((json_int_t)o->added_bytes));
        json_object_set_new(j, "link_bytes", json_integer((json_int_t)o->link_bytes));
        json_object_set_new(j, "host_bytes", json_integer((json_int_t)o->host_bytes));
        json_object_set_new(j, "added_seconds", json_real(o->added_seconds));
        json_object_set_new(
            j, "added_percent",
            json_real(o->step_seconds > 0 ? 100.0 * o->added_seconds / o->step_seconds : 0));
        json_object_set_new(j, "recompute_seconds", json_real(o->recompute_seconds));
        json_object_set_new(j, "copy_seconds", json_real(o->copy_seconds));
        json_object_set_new(j, "copy_exposed_seconds", json_real(o->copy_exposed_seconds));
        json_object_set_new(j, "plans", json_integer((json_int_t)o->plans));
        json_object_set_new(j, "method", json_string(o->method ? o->method : ""));
        if (o->exact_tried) {
            json_t *x = json_object();
            json_object_set_new(x, "status", json_string(fit_exact_status_name(o->exact.status)));
            /* absent where the MILP has none (infeasible: neither) */
            if (fit_exact_has_objective(o))
                json_object_set_new(x, "objective_seconds", json_real(o->exact.objective));
            if (fit_exact_has_bound(o))
                json_object_set_new(x, "bound_seconds", json_real(o->exact.bound));
            json_object_set_new(x, "nodes", json_integer(o->exact.nodes));
            json_object_set_new(x, "planned_added_seconds",
                                o->exact_seconds >= 0 ? json_real(o->exact_seconds) : json_null());
            json_object_set_new(j, "milp", x);
        }
    }
    if (o->status == FIT_FITTED)
        json_object_set_new(j, "slack",
                            json_integer((json_int_t)(r->arena_budget - o->changed->plan.actual)));
    if (o->status == FIT_CANNOT)
        json_object_set_new(j, "least", json_integer((json_int_t)o->least));
    char w[256];
    if (fit_overhead_warning(r, o, w, sizeof w)) json_object_set_new(j, "warning", json_string(w));
    json_object_set_new(obj, "fit", j);
}
