/* planner/shard/pipeline.h — the stages of a pipeline-parallel job (issue
 * 28 item 4; shared/DESIGN.md "Several devices and real training set-ups").
 *
 * From a training step (models/export.py's convention: metadata roamc.loss,
 * roamc.parameters, roamc.gradients (one per parameter, same order),
 * roamc.optimizer_state, roamc.data_inputs; or the step --train derives)
 * pipe_build writes the step each of P stages runs, through the step editor
 * (frontend/edit.h), and pipe_run plans every stage with the normal
 * pipeline.
 *
 * The cut.  The forward pass (the file's nodes up to the loss's producer)
 * is cut into P runs of consecutive nodes.  Every backward node goes to the
 * stage of the latest forward node whose values (or parameters) it reads,
 * directly or through the backward values it reads (so a convolution's
 * backward goes with its weight, a ReLU's with its output); an optimizer
 * node goes with its parameter.  The cut points are chosen (P-1 of them)
 * so that the stages' seconds on the h100 profile (graph/COST.md, planner/fit/
 * DEVICES.md), forward and backward nodes together, are balanced: each cut
 * where the running sum passes k/P of the whole.  --stage-cuts NAME,...
 * cuts instead before the first forward node that reads a parameter whose
 * name starts with NAME (a module: "fc3", "h.2", "net.layer3"), one name per
 * cut, in forward order.  A parameter the forward passes of two stages read
 * (a tied embedding) is held whole by both, each with its own gradient (the
 * part its stage computes: the step's gradient must be one add of the two)
 * and optimizer state, as Megatron keeps the last stage's copy; after its
 * last task each of the two stages all-reduces its accumulated part with the
 * other's (Megatron's embedding-group all-reduce) and updates its copy with
 * the sum: a gate ("gate<2M>") waits for what the last task left, its Sends
 * included, then an ai.roamc AllReduce in place, output
 * "<PARAM>.grad.all_reduce", INT world 2 and rank (0: the earlier stage),
 * INTS group (the two stages, in order: the collective involves only them),
 * one per tied parameter in parameter order.  Summed so, the gradient equals
 * eager accumulation's up to the order of the float adds (each stage's parts
 * over the microbatches first, then the two sums; eager adds each
 * microbatch's two parts, then accumulates): models/run_ranks.py proves the
 * rest bit for bit.
 *
 * A stage's step.  The stage runs its M microbatches (--microbatches) in the
 * schedule's order: GPipe, every forward then every backward; 1F1B
 * (PipeDream-Flush, Megatron's non-interleaved schedule, what
 * models/dist_harness.py runs), stage s runs min(P-s-1, M) forwards, then
 * forward/backward pairs, then the rest of the backwards, so it keeps at
 * most min(P-s, M) microbatches' saved activations live.  Each task
 * (one microbatch's forward or backward on this stage) is a copy of the
 * stage's forward or backward nodes with the microbatch's values named
 * "mb<i>.NAME" (data inputs too: one set per microbatch, graph inputs).  A
 * value another stage makes arrives through an ai.roamc Recv node (input: an
 * ordering token; output: a new buffer, listed in roamc.communication); a
 * value another stage reads leaves through an ai.roamc Send (output: a view
 * of what it sends, INT attribute peer).  Tasks run one after another: from
 * the second task on, an ai.roamc Depend node opens each task; it reads what
 * the previous task left for later (its values read by later tasks, its
 * Sends) and what this task reads from outside it, and its outputs are an
 * ordering token (a new 4-byte value, read by the task's Recvs) and a view of
 * each outside value, which the task's nodes read instead.  Gradients
 * accumulate as eager .grad does: the first microbatch's gradient is the
 * accumulator, each later one is added in place (aten add_) and dies.  With
 * M > 1 each microbatch's loss is divided by M, as models/export.py's
 * --grad-accum, Megatron and models/dist_harness.py divide it: the last
 * stage's forward task adds "mb<i>.LOSS.div" (aten div, INT other M) after
 * the loss, the backward's seed (the ones_like of the loss, or of a backward
 * value made from it) is divided by M too ("mb<i>.SEED.div", DivBackward0),
 * and the backward reads both instead (no ones_like seed in the loss's
 * stage: an error).  The stage's optimizer nodes run once, after the last
 * backward, on the accumulated gradients.  Not modelled: the interleaved
 * (virtual-stage) schedule, the communication library's own buffers.
 *
 * Metadata of a stage's step: roamc.pipeline ("stage=1 stages=2
 * microbatches=4 schedule=1f1b in_flight=1"), roamc.parameters,
 * roamc.gradients (the accumulated ones), roamc.optimizer_state,
 * roamc.buffers and roamc.data_inputs narrowed to the stage's,
 * roamc.communication (the received buffers), roamc.loss (the last stage:
 * the first microbatch's loss, "mb0.LOSS", before the division; the others:
 * empty). */
#ifndef ROAMC_PIPELINE_H
#define ROAMC_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "graph.h"
#include "changer.h"
#include "planner.h"

enum pipe_schedule { PIPE_1F1B = 0, PIPE_GPIPE };

#define PIPE_MAX_STAGES 1024
#define PIPE_MAX_MICROBATCHES 1024

/* The set-up asked for. */
typedef struct pipe_options {
    long stages;       /* P: 1 .. PIPE_MAX_STAGES */
    long microbatches; /* M: 1 .. PIPE_MAX_MICROBATCHES; 0: P */
    int schedule;      /* enum pipe_schedule */
    const char *cuts;  /* --stage-cuts: P-1 comma-separated module names; NULL: balanced */
    long stage;        /* the stage written (--emit-train, -o); -1: the largest peak */
} pipe_options;

/* "1f1b", "gpipe". */
const char *pipe_schedule_name(int schedule);
/* The schedule named s into *schedule; -1 when s names none. */
int pipe_schedule_parse(const char *s, int *schedule);
/* Checks po (ranges).  0, or -1 with a message. */
int pipe_check(const pipe_options *po, char *err, size_t errlen);

/* What to cut: the step and how to plan each stage's. */
typedef struct pipe_request {
    const char *step_name;     /* the step, in messages */
    const uint8_t *step_bytes; /* its ONNX bytes */
    size_t step_len;
    const graph *g;             /* its graph, loaded from step_bytes under bindings */
    const fe_options *bindings; /* to load each stage's step the same way */
    const planner_options *opt; /* how each stage's step is planned */
    pipe_options po;
    const char *emit_name; /* names the written stage's step: the plan's "model" */
} pipe_request;

/* Bytes at a stage's peak step, by what holds them. */
enum pipe_part {
    PIPE_PARAMETERS,
    PIPE_GRADIENTS,
    PIPE_OPTIMIZER,
    PIPE_COMM,
    PIPE_ACTIVATIONS,
    PIPE_N_PARTS
};

typedef struct pipe_stage {
    uint8_t *bytes; /* the stage's step (ONNX) */
    size_t len;
    fe_model model;
    graph graph;
    plan plan;
    bool have_model, have_graph, have_plan;
    size_t first_op, end_op; /* its forward nodes in the step: [first_op, end_op) */
    char first_name[160];    /* the first of them, as the report names it */
    size_t n_params;
    uint64_t param_bytes;
    size_t n_recv, n_send;
    uint64_t recv_bytes, send_bytes; /* per microbatch */
    int in_flight;                   /* microbatches whose saved activations it keeps at most */
    double seconds;                  /* its forward and backward nodes, one microbatch, h100 */
    uint64_t split[PIPE_N_PARTS];    /* at its peak step; sums to plan.theoretical */
    int peak_step;
    char peak_op[160];
} pipe_stage;

typedef struct pipe_outcome {
    pipe_stage *st; /* n stages */
    size_t n;
    long microbatches;
    size_t largest; /* the stage with the largest theoretical peak (pipe_run) */
    size_t chosen;  /* the stage written: po.stage, or largest */
} pipe_outcome;

/* Cuts the step and writes every stage's step, loaded and built into o
 * (no plans; free o with pipe_outcome_free whatever the return).  Returns
 * 0, or -1 with a message: metadata missing, fewer forward nodes than
 * stages, a --stage-cuts name that reads no parameter or cuts out of order,
 * an optimizer node updating several parameters, a value a stage would read
 * from a later stage's backward pass, an editor failure. */
int pipe_build(const pipe_request *r, pipe_outcome *o, char *err, size_t errlen);
/* Every stage of o (pipe_build's) planned, with its split at its peak, the
 * largest and the chosen stage.  Returns 0, or -1 with a message. */
int pipe_plan(const pipe_request *r, pipe_outcome *o, char *err, size_t errlen);
/* pipe_build, then pipe_plan. */
int pipe_run(const pipe_request *r, pipe_outcome *o, char *err, size_t errlen);
void pipe_outcome_free(pipe_outcome *o);

/* The report's set-up line, one line per stage and the largest (written:
 * whether -o or --emit-train wrote the chosen stage); the "pipeline"
 * member of a JSON report. */
void pipe_report_text(FILE *f, const pipe_request *r, const pipe_outcome *o, bool written);
struct json_t;
void pipe_report_json(struct json_t *obj, const pipe_request *r, const pipe_outcome *o);

/* --pipeline-stages behind the door (changer.h, pipe_changer.c): setup is
 * a pipe_options; build is pipe_build (a step that cannot be cut so is
 * CHANGER_REFUSED), plan pipe_plan; the changed steps are the stages. */
extern const planner_changer pipe_changer;

#endif
