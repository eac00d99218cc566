/* --shard: the rank's step emitted (shard_emit.c), loaded, planned with the
 * normal pipeline, and its peak split by what holds the bytes. */
#include "shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base.h"
#include "shard_internal.h"

static const char *const shard_part_names[SHARD_N_PARTS] = {
    "parameters", "gradients", "optimizer_state", "communication", "activations", "gathered"};

static bool shard_gathers(int kind) {
    return kind == SHARD_ZERO3 || kind == SHARD_FSDP;
}

/* The peak step of o->plan and the bytes live there, by part. */
static void shard_split(shard_outcome *o) {
    const plan *p = &o->plan;
    const graph *g = p->g;
    static const sh_part_rule rules[] = {{"roamc.gathered", SHARD_GATHERED},
                                         {"roamc.communication", SHARD_COMM},
                                         {"roamc.parameters", SHARD_PARAMETERS},
                                         {"roamc.buffers", SHARD_PARAMETERS},
                                         {"roamc.optimizer_state", SHARD_OPTIMIZER},
                                         /* no_sync: whole gradients kept over microbatches */
                                         {"roamc.accumulated_gradients", SHARD_GRADIENTS}};
    int peak = sh_split_at_peak(p, rules, sizeof rules / sizeof *rules, SHARD_GRADIENTS,
                                SHARD_ACTIVATIONS, o->split);
    uint64_t sum = 0;
    for (int k = 0; k < SHARD_N_PARTS; k++) sum += o->split[k];
    ROAMC_ASSERT(sum == p->theoretical);
    o->peak_step = peak;
    char label[128];
    int op = p->order[peak];
    snprintf(o->peak_op, sizeof o->peak_op, "%s, %s", graph_op_label(g, op, label, sizeof label),
             g->model->nodes[op].op_type);
}

int shard_build(const shard_request *r, shard_outcome *o, char *err, size_t errlen) {
    memset(o, 0, sizeof *o);
    if (shard_emit(r, &o->bytes, &o->len, o, err, errlen)) return -1;
    if (fe_load_bytes(r->emit_name, (fe_bytes){o->bytes, o->len}, r->bindings, &o->model, err,
                      errlen))
        return -1;
    o->have_model = true;
    if (graph_build(&o->model, r->opt->align, &o->graph, err, errlen)) return -1;
    o->have_graph = true;
    return 0;
}

int shard_plan(const shard_request *r, shard_outcome *o, char *err, size_t errlen) {
    if (plan_build(&o->graph, r->opt, &o->plan, err, errlen)) return -1;
    o->have_plan = true;
    shard_split(o);
    return 0;
}

int shard_run(const shard_request *r, shard_outcome *o, char *err, size_t errlen) {
    if (shard_build(r, o, err, errlen)) return -1;
    return shard_plan(r, o, err, errlen);
}

void shard_outcome_free(shard_outcome *o) {
    if (o->have_plan) plan_free(&o->plan);
    if (o->have_graph) graph_free(&o->graph);
    if (o->have_model) fe_free(&o->model);
    free(o->bytes);
    free(o->units);
    memset(o, 0, sizeof *o);
}

static const char *shard_title(int kind) {
    switch (kind) {
    case SHARD_DDP: return "DDP (gradients all-reduced in buckets)";
    case SHARD_ZERO1: return "ZeRO-1 (optimizer state sharded)";
    case SHARD_ZERO2: return "ZeRO-2 (optimizer state and gradients sharded)";
    case SHARD_ZERO3: return "ZeRO-3 (parameters, gradients and optimizer state sharded)";
    case SHARD_FSDP: return "FSDP FULL_SHARD (parameters, gradients and optimizer state sharded)";
    default: return "?";
    }
}

/* zero3, fsdp: the units, what the rank keeps, the largest gather. */
static void shard_report_units(FILE *f, const shard_request *r, const shard_outcome *o) {
    char a[32], b[32], c[32];
    const shard_options *so = &r->so;
    fprintf(f,
            "  set-up        %s, world %ld, rank %ld: %zu parameters (%s) in %zu units, this "
            "rank keeps %s of them and updates %zu\n",
            shard_title(so->kind), so->world, so->rank, o->n_params,
            roamc_bytes_human(o->param_bytes, a, sizeof a), o->n_units,
            roamc_bytes_human(o->owned_bytes, b, sizeof b), o->n_owned);
    const char *unit = so->kind == SHARD_ZERO3 ? "each module with parameters"
                       : so->wrap              ? "modules matching --wrap"
                                               : "each transformer layer";
    fprintf(f,
            "  units         %s%s, prefetch %ld; largest gathered %s; %zu update nodes of "
            "other ranks' ranges left out\n",
            unit, so->kind == SHARD_FSDP ? " and the root" : "", so->prefetch,
            roamc_bytes_human(o->largest_unit_bytes, c, sizeof c), o->n_removed);
}

void shard_report_text(FILE *f, const shard_request *r, const shard_outcome *o) {
    char a[32], b[32], c[32];
    const shard_options *so = &r->so;
    if (shard_gathers(so->kind)) {
        shard_report_units(f, r, o);
    } else {
        fprintf(f,
                "  set-up        %s, world %ld, rank %ld: %zu parameters (%s), %zu updated here "
                "(%s)\n",
                shard_title(so->kind), so->world, so->rank, o->n_params,
                roamc_bytes_human(o->param_bytes, a, sizeof a), o->n_owned,
                roamc_bytes_human(o->owned_bytes, b, sizeof b));
        fprintf(f,
                "  buckets       %zu (first closes at 1 MiB, then %g MiB)%s, buffers %s; %zu "
                "optimizer nodes of other ranks left out\n",
                o->n_buckets, so->bucket_mb,
                so->kind == SHARD_ZERO2 ? " taking turns in one buffer per type" : "",
                roamc_bytes_human(o->bucket_bytes, c, sizeof c), o->n_removed);
    }
    fprintf(f, "  rank peak     %s (%llu B) at step %d (%s):",
            roamc_bytes_human(o->plan.theoretical, a, sizeof a),
            (unsigned long long)o->plan.theoretical, o->peak_step, o->peak_op);
    int parts = shard_gathers(so->kind) ? SHARD_N_PARTS : SHARD_GATHERED;
    for (int k = 0; k < parts; k++)
        fprintf(f, "%s %s %s", k ? "," : "", shard_part_names[k],
                roamc_bytes_human(o->split[k], a, sizeof a));
    fprintf(f, "\n");
}

void shard_report_json(struct json_t *obj, const shard_request *r, const shard_outcome *o) {
    json_t *j = json_object();
    json_object_set_new(j, "setup", json_string(shard_kind_name(r->so.kind)));
    json_object_set_new(j, "world", json_integer(r->so.world));
    json_object_set_new(j, "rank", json_integer(r->so.rank));
    json_object_set_new(j, "bucket_mb", json_real(r->so.bucket_mb));
    json_object_set_new(j, "parameters", json_integer((json_int_t)o->n_params));
    json_object_set_new(j, "parameter_bytes", json_integer((json_int_t)o->param_bytes));
    json_object_set_new(j, "updated", json_integer((json_int_t)o->n_owned));
    json_object_set_new(j, "updated_bytes", json_integer((json_int_t)o->owned_bytes));
    json_object_set_new(j, "buckets", json_integer((json_int_t)o->n_buckets));
    json_object_set_new(j, "buffer_bytes", json_integer((json_int_t)o->bucket_bytes));
    json_object_set_new(j, "removed_nodes", json_integer((json_int_t)o->n_removed));
    if (shard_gathers(r->so.kind)) {
        json_object_set_new(j, "prefetch", json_integer(r->so.prefetch));
        json_object_set_new(j, "wrap",
                            json_string(r->so.kind == SHARD_ZERO3 ? "module"
                                        : r->so.wrap              ? r->so.wrap
                                                                  : "layer"));
        json_object_set_new(j, "units", json_integer((json_int_t)o->n_units));
        json_object_set_new(j, "unit_names", json_string(o->units ? o->units : ""));
        json_object_set_new(j, "largest_unit_bytes",
                            json_integer((json_int_t)o->largest_unit_bytes));
    }
    json_object_set_new(j, "peak", json_integer((json_int_t)o->plan.theoretical));
    json_object_set_new(j, "peak_step", json_integer(o->peak_step));
    json_object_set_new(j, "peak_op", json_string(o->peak_op));
    json_t *split = json_object();
    int parts = shard_gathers(r->so.kind) ? SHARD_N_PARTS : SHARD_GATHERED;
    for (int k = 0; k < parts; k++)
        json_object_set_new(split, shard_part_names[k], json_integer((json_int_t)o->split[k]));
    json_object_set_new(j, "split", split);
    json_object_set_new(obj, "shard", j);
}
