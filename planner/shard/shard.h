/* planner/shard/ — one rank of a data-parallel job (issue 28; shared/DESIGN.md
 * "Several devices and real training set-ups").
 *
 * From a training step (models/export.py's convention: metadata
 * roamc.parameters, roamc.gradients (one per parameter, same order) and
 * roamc.optimizer_state; or the step --train derives) shard_emit writes the
 * step ONE rank runs, through the step editor (frontend/edit.h), and
 * shard_run plans it with the normal pipeline.  What each set-up adds (the
 * frameworks' defaults, torch 1.13 unless said):
 *
 *   ddp    DistributedDataParallel, gradient_as_bucket_view=False: gradients
 *          go, in the order they become ready (their producers' file order,
 *          ties in reverse parameter order), into flat buckets (graph inputs
 *          "roamc.bucket<k>", persistent: DDP allocates them once); the
 *          first bucket closes at 1 MiB, the others at --bucket-mb (default
 *          25) MiB, one set per element type.  Per gradient: a view of its
 *          place in the bucket (aten as_strided) and an in-place copy_ into
 *          it, right after the gradient is made; per full bucket: div_ by
 *          the world size and an ai.roamc AllReduce in place; at the end of
 *          the backward pass (before the first optimizer node) each
 *          gradient is copied back from its bucket view (copy_ in place).
 *          .grad stays a storage of its own.
 *   zero1  ddp + ZeroRedundancyOptimizer: parameters are owned whole, the
 *          largest first, each by the rank with the fewest elements so far
 *          (lowest rank on a tie); the rank keeps the optimizer state and
 *          update nodes of the parameters it owns only; after the updates
 *          every parameter is broadcast in place from its owner (an
 *          ai.roamc Broadcast node with INT attributes root and world: the
 *          owner's reads the parameter, the others' write it).
 *   zero2  zero1 with gradients partitioned: one bucket buffer as large as
 *          the largest bucket, reused by every bucket in turn (DeepSpeed's
 *          reduce bucket); per full bucket an ai.roamc ReduceScatter in
 *          place, then the rank copies back only the gradients it owns;
 *          the others' gradients are dead once copied into the bucket
 *          (roamc.gradients names the owned ones only).
 *   zero3  DeepSpeed's ZeRO-3 as the graph can say it: the wrap unit is
 *          each module that owns parameters directly (the parameter's name
 *          up to its last '.'); see "Gathered set-ups" below.
 *   fsdp   FullyShardedDataParallel (FULL_SHARD): the wrap unit is each
 *          transformer layer (the name up to its first numeric component,
 *          "h.7", "model.layers.12") or, with --wrap PATTERN, each module
 *          whose name matches PATTERN (fnmatch, a '*' never crossing a '.':
 *          "h.*" is h.0, h.1, ..., not h.0.attn; the innermost match owns a
 *          parameter, as nested FSDP units do); the parameters in no unit
 *          form the root unit, gathered once before the forward pass and
 *          kept to the end of the backward pass (FSDP does not reshard the
 *          root after its forward).
 *
 * Gathered set-ups (zero3, fsdp).  Per unit, its parameters flattened in
 * roamc.parameters order, N elements padded to world * S: the rank keeps
 * S elements ("roamc.param<u>", a persistent graph input).  Before the
 * unit's first forward read an ai.roamc AllGather makes the full flat
 * buffer (new, world * S); each parameter read in the forward pass reads an
 * as_strided view of it, so the buffer dies after the unit's last forward
 * read.  Before the unit's backward (its first backward read or gradient,
 * whichever is first) a second AllGather; with prefetch depth D (default
 * 1, FSDP's BACKWARD_PRE) it is issued where the backward of the unit D
 * places earlier in backward order starts, held there by an ai.roamc
 * Depend node (output: a view of its first input; its second input only
 * orders it) on that unit's first backward op.  Views of a parameter made
 * in the forward pass and read in the backward pass are made again from
 * the backward gather (FSDP re-fills the freed storage they view).  After
 * the unit's last gradient: a flat gradient buffer (aten new_zeros of the
 * gathered buffer, so the gathered parameters live until then, as FSDP's
 * post-backward reshard), each gradient copied in (as_strided + copy_),
 * div_ by the world size, and an ai.roamc ReduceScatter into the rank's
 * gradient shard ("roamc.grad<u>", S elements, new).  The optimizer updates
 * only the rank's range of each parameter: its update nodes read
 * as_strided views of the parameter and gradient shards, their values and
 * the parameter's optimizer state take that range's shape; a parameter
 * with no element in the rank's range loses its update nodes and state.
 * Buffers (roamc.buffers) stay whole.
 *
 * Gradient accumulation (a step with roamc.grad_accum K: K microbatches,
 * export.py --grad-accum or --train --grad-accum): each microbatch's
 * forward and backward pass gathers every unit again, as above (one
 * forward and one backward AllGather per unit and microbatch, views
 * "NAME.mb<k>.gathered"; prefetch within the microbatch's backward pass;
 * a unit is gathered for each microbatch's backward pass whether that pass
 * reads its parameters or not, as FSDP's pre-backward hook does).  The
 * step's accumulated gradient is a chain of in-place add_(sum so far,
 * microbatch k's own gradient).  Default (DeepSpeed's ZeRO-2/3 with
 * gradient_accumulation_steps, FSDP outside no_sync): after each
 * microbatch's last gradient of a unit, its own gradients go into a flat
 * buffer ("roamc.gradflat<instance>", instance = k * units + u) and a
 * ReduceScatter; the first microbatch's makes the shard, each later one's
 * a "roamc.gradpart<instance>" added in place (add_) into the shard, as
 * FSDP's _saved_grad_shard += output; the add_ chain of whole gradients is
 * left out, so no whole gradient outlives its microbatch (roamc.shard ends
 * "grad_accum=K per_microbatch").  zero2 alike: per microbatch each own
 * gradient bucketed as it is ready (never before the buffer's previous
 * bucket is reduced), a ReduceScatter per bucket, the owned gradients
 * copied back (first microbatch) or added into their sums (the others).
 * With so.no_sync (--no-sync, FSDP's no_sync()): the whole gradients are
 * accumulated in place as the step does and reduced once, after the last
 * microbatch ("grad_accum=K no_sync"; metadata
 * roamc.accumulated_gradients names them, and the split counts them as
 * gradients).  ddp and zero1 reduce an accumulated step's gradients once,
 * after the last microbatch (DDP's per-microbatch all-reduce is not
 * written).  Not modelled: DeepSpeed's
 * persistence threshold (parameters under 1e5 elements kept whole),
 * prefetch bucket and reuse distance, FSDP's forward prefetch (off by
 * default) and limit_all_gathers.
 *
 * Every new node has explicit alias/inplace attributes and every new value a
 * value_info, so roamc, roamc check and check_plan.py read the rank's step
 * as any other.  Metadata added: roamc.shard ("zero1 world=2 rank=0
 * bucket_mb=25"), roamc.communication (the buffers' names), roamc.owned
 * (zero1/2: the parameters this rank updates); roamc.optimizer_state
 * (and roamc.gradients for zero2) narrowed to the rank's; zero3/fsdp:
 * roamc.parameters and roamc.gradients name the shards, roamc.gathered the
 * gathered buffers.
 */
#ifndef ROAMC_SHARD_H
#define ROAMC_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "graph.h"
#include "changer.h"
#include "planner.h"

enum shard_kind { SHARD_NONE = 0, SHARD_DDP, SHARD_ZERO1, SHARD_ZERO2, SHARD_ZERO3, SHARD_FSDP };

#define SHARD_DEFAULT_BUCKET_MB 25.0
#define SHARD_FIRST_BUCKET_BYTES ((uint64_t)1 << 20) /* torch's _DEFAULT_FIRST_BUCKET_BYTES */
#define SHARD_MAX_WORLD 65536
#define SHARD_DEFAULT_PREFETCH 1 /* FSDP's BACKWARD_PRE: the next unit gathered */
#define SHARD_MAX_PREFETCH 1024

/* The set-up asked for. */
typedef struct shard_options {
    int kind;         /* enum shard_kind */
    long world, rank; /* 0 < world <= SHARD_MAX_WORLD, 0 <= rank < world */
    double bucket_mb; /* DDP's bucket_cap_mb, > 0 */
    /* zero3, fsdp: units gathered ahead in the backward pass (0 to
     * SHARD_MAX_PREFETCH) */
    long prefetch;
    /* fsdp: the wrap unit, an fnmatch pattern of module names; NULL: each
     * transformer layer */
    const char *wrap;
    /* zero2, zero3, fsdp with gradient accumulation: FSDP's no_sync(), the
     * whole gradients accumulated over the microbatches and reduced once
     * after the last; false (the frameworks' default): each microbatch's
     * gradients reduce-scattered and added into the rank's shard */
    bool no_sync;
} shard_options;

/* "ddp", "zero1", ...; "?" outside the enum. */
const char *shard_kind_name(int kind);
/* The kind named s into *kind; -1 when s names none. */
int shard_kind_parse(const char *s, int *kind);

/* What to shard: the step and how to plan the rank's. */
typedef struct shard_request {
    const char *step_name;     /* the step, in messages */
    const uint8_t *step_bytes; /* its ONNX bytes */
    size_t step_len;
    const graph *g;             /* its graph, loaded from step_bytes under bindings */
    const fe_options *bindings; /* to load the rank's step the same way */
    const planner_options *opt; /* how the rank's step is planned */
    shard_options so;
    const char *emit_name; /* names the rank's step: the plan's "model" */
} shard_request;

/* Bytes at the rank's peak step, by what holds them. */
enum shard_part {
    SHARD_PARAMETERS,  /* roamc.parameters and roamc.buffers */
    SHARD_GRADIENTS,   /* roamc.gradients */
    SHARD_OPTIMIZER,   /* roamc.optimizer_state */
    SHARD_COMM,        /* roamc.communication */
    SHARD_ACTIVATIONS, /* everything else: activations, temporaries, data */
    SHARD_GATHERED,    /* roamc.gathered (zero3, fsdp): full parameters gathered */
    SHARD_N_PARTS
};

typedef struct shard_outcome {
    uint8_t *bytes; /* the rank's step (ONNX) */
    size_t len;
    fe_model model;
    graph graph;
    plan plan;
    bool have_model, have_graph, have_plan;
    size_t n_params, n_owned, n_buckets, n_removed;
    uint64_t param_bytes, owned_bytes; /* parameters, and those this rank updates */
    uint64_t bucket_bytes;             /* communication buffers, element bytes */
    /* zero3, fsdp: wrap units (n_buckets counts them too), the largest
     * unit's gathered bytes, and the units' names ("h.0,h.1,...", malloc'd) */
    size_t n_units;
    uint64_t largest_unit_bytes;
    char *units;
    uint64_t split[SHARD_N_PARTS]; /* at the peak step; sums to plan.theoretical */
    int peak_step;
    char peak_op[160];
} shard_outcome;

/* Checks so (kind, world, rank, bucket size, prefetch).  0, or -1 with a message. */
int shard_check(const shard_options *so, char *err, size_t errlen);

/* The rank's step as ONNX bytes into *bytes (malloc'd, *len; the caller
 * frees); o (may be NULL) gets the counts (params, owned, buckets, removed
 * nodes).  Returns 0, or -1 with a message: metadata missing or not one
 * gradient per parameter, an optimizer node that updates several
 * parameters at once (zero*), an editor failure. */
int shard_emit(const shard_request *r, uint8_t **bytes, size_t *len, shard_outcome *o, char *err,
               size_t errlen);

/* Emits, loads and builds the rank's step into o (no plan; free it with
 * shard_outcome_free whatever the return).  Returns 0, or -1 with a
 * message. */
int shard_build(const shard_request *r, shard_outcome *o, char *err, size_t errlen);
/* Plans the rank's step shard_build made in o, with the split at its
 * peak.  Returns 0, or -1 with a message. */
int shard_plan(const shard_request *r, shard_outcome *o, char *err, size_t errlen);
/* shard_build, then shard_plan (free o with shard_outcome_free whatever
 * the return). */
int shard_run(const shard_request *r, shard_outcome *o, char *err, size_t errlen);
void shard_outcome_free(shard_outcome *o);

/* The report's set-up line and split; the "shard" member of a JSON report. */
void shard_report_text(FILE *f, const shard_request *r, const shard_outcome *o);
struct json_t;
void shard_report_json(struct json_t *obj, const shard_request *r, const shard_outcome *o);

/* --shard behind the door (changer.h, shard_changer.c): setup is a
 * shard_options; build is shard_build, plan shard_plan. */
extern const planner_changer shard_changer;

#endif
