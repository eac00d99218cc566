/* Unit tests of planner/shard/ through shard.h and pipeline.h: a training
 * step of three parameters built in C, sharded at world 2 (ddp, zero1,
 * zero2, zero3, fsdp) and cut into pipeline stages, every count and size
 * worked by hand from the set-ups shard.h and pipeline.h describe.
 *
 * The step (float32; a chain of three linear layers with momentum SGD):
 *   x 64x512; h.0.weight 512x128 (256 KiB), h.1.weight 128x512 (256 KiB),
 *   h.2.weight 512x512 (1 MiB); one momentum buffer per parameter
 *   forward   z1 = mm(x, W0); a1 = relu(z1); z2 = mm(a1, W1); a2 = relu(z2);
 *             o = mm(a2, W2); loss = sum(o)
 *   backward  go = expand(ones_like(loss)); g2 = mm(t(a2), go);
 *             ga2 = mm(go, t(W2)); gz2 = threshold_backward(ga2, a2);
 *             g1 = mm(t(a1), gz2); ga1 = mm(gz2, t(W1));
 *             gz1 = threshold_backward(ga1, a1); g0 = mm(t(x), gz1)
 *   SGD       m = m * 0.9 + g; W -= m (in place), W2's first
 * Gradients become ready in the order g2 (1 MiB), g1, g0 (256 KiB each). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pipeline.h"
#include "shard.h"
#include "testgraph.h"

#define KIB 1024u
#define MIB (1024u * 1024u)

static void ts_sgd(tg *t, const char *w, const char *m, const char *g) {
    char in[96], out[3][64];
    snprintf(out[0], sizeof out[0], "%s.a", m);
    snprintf(out[1], sizeof out[1], "%s.b", m);
    snprintf(out[2], sizeof out[2], "%s.b", w);
    int n = tg_node(t, "aten", "mul_", m, out[0]);
    tg_alias(t, n, "0", 1);
    snprintf(in, sizeof in, "%s,%s", out[0], g);
    n = tg_node(t, "aten", "add_", in, out[1]);
    tg_alias(t, n, "0", 1);
    snprintf(in, sizeof in, "%s,%s", w, out[1]);
    n = tg_node(t, "aten", "sub_", in, out[2]);
    tg_alias(t, n, "0", 1);
}

static tg *ts_step(void) {
    tg *t = tg_new();
    tg_input(t, "x", "64x512");
    tg_input(t, "h.0.weight", "512x128");
    tg_input(t, "h.1.weight", "128x512");
    tg_input(t, "h.2.weight", "512x512");
    tg_input(t, "h.0.weight.mom", "512x128");
    tg_input(t, "h.1.weight.mom", "128x512");
    tg_input(t, "h.2.weight.mom", "512x512");
    tg_meta(t, "roamc.loss", "loss");
    tg_meta(t, "roamc.parameters", "h.0.weight,h.1.weight,h.2.weight");
    tg_meta(t, "roamc.gradients", "g0,g1,g2");
    tg_meta(t, "roamc.optimizer_state", "h.0.weight.mom,h.1.weight.mom,h.2.weight.mom");
    tg_meta(t, "roamc.data_inputs", "x");
    tg_meta(t, "roamc.optimizer", "sgd");
    tg_node(t, "aten", "mm", "x,h.0.weight", "z1");
    tg_node(t, "aten", "relu", "z1", "a1");
    tg_node(t, "aten", "mm", "a1,h.1.weight", "z2");
    tg_node(t, "aten", "relu", "z2", "a2");
    tg_node(t, "aten", "mm", "a2,h.2.weight", "o");
    tg_node(t, "aten", "sum", "o", "loss");
    tg_node(t, "aten", "ones_like", "loss", "gl");
    tg_node(t, "aten", "expand", "gl", "go");
    tg_node(t, "aten", "t", "a2", "a2T");
    tg_node(t, "aten", "mm", "a2T,go", "g2");
    tg_node(t, "aten", "t", "h.2.weight", "W2T");
    tg_node(t, "aten", "mm", "go,W2T", "ga2");
    tg_node(t, "aten", "threshold_backward", "ga2,a2", "gz2");
    tg_node(t, "aten", "t", "a1", "a1T");
    tg_node(t, "aten", "mm", "a1T,gz2", "g1");
    tg_node(t, "aten", "t", "h.1.weight", "W1T");
    tg_node(t, "aten", "mm", "gz2,W1T", "ga1");
    tg_node(t, "aten", "threshold_backward", "ga1,a1", "gz1");
    tg_node(t, "aten", "t", "x", "xT");
    tg_node(t, "aten", "mm", "xT,gz1", "g0");
    ts_sgd(t, "h.2.weight", "h.2.weight.mom", "g2");
    ts_sgd(t, "h.1.weight", "h.1.weight.mom", "g1");
    ts_sgd(t, "h.0.weight", "h.0.weight.mom", "g0");
    const char *v[][2] = {{"gl", ""},
                          {"a2T", "512x64"},
                          {"W2T", "512x512"},
                          {"a1T", "128x64"},
                          {"W1T", "512x128"},
                          {"xT", "512x64"},
                          {"z1", "64x128"},
                          {"a1", "64x128"},
                          {"z2", "64x512"},
                          {"a2", "64x512"},
                          {"o", "64x512"},
                          {"go", "64x512"},
                          {"g2", "512x512"},
                          {"ga2", "64x512"},
                          {"gz2", "64x512"},
                          {"g1", "128x512"},
                          {"ga1", "64x128"},
                          {"gz1", "64x128"},
                          {"g0", "512x128"},
                          {"h.2.weight.mom.a", "512x512"},
                          {"h.2.weight.mom.b", "512x512"},
                          {"h.2.weight.b", "512x512"},
                          {"h.1.weight.mom.a", "128x512"},
                          {"h.1.weight.mom.b", "128x512"},
                          {"h.1.weight.b", "128x512"},
                          {"h.0.weight.mom.a", "512x128"},
                          {"h.0.weight.mom.b", "512x128"},
                          {"h.0.weight.b", "512x128"}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) tg_value(t, v[i][0], v[i][1]);
    tg_output(t, "loss", "");
    return t;
}

typedef struct ts_ctx {
    uint8_t *bytes;
    size_t len;
    fe_model m;
    graph g;
    planner_options opt;
} ts_ctx;

static void ts_open(ts_ctx *c) {
    tg *t = ts_step();
    c->bytes = tg_pack(t, &c->len);
    tg_free(t);
    char err[2048];
    if (fe_load_bytes("step", (fe_bytes){c->bytes, c->len}, NULL, &c->m, err, sizeof err))
        fail_msg("%s", err);
    if (graph_build(&c->m, 512, &c->g, err, sizeof err)) fail_msg("%s", err);
    c->opt = (planner_options){.align = 512,
                               .order = PLANNER_ORDER_PROGRAM,
                               .layout = PLANNER_LAYOUT_BESTFIT,
                               .node_limit = PLANNER_DEFAULT_NODE_LIMIT,
                               .delay_radius = PLANNER_DEFAULT_DELAY_RADIUS,
                               .threads = 1,
                               .time_limit = PLANNER_DEFAULT_TIME_LIMIT};
}

static void ts_close(ts_ctx *c) {
    graph_free(&c->g);
    fe_free(&c->m);
    free(c->bytes);
}

/* shard_run of kind at world 2, rank rank, bucket_mb. */
static void ts_shard(ts_ctx *c, int kind, long rank, double bucket_mb, shard_outcome *o) {
    shard_request r = {.step_name = "step",
                       .step_bytes = c->bytes,
                       .step_len = c->len,
                       .g = &c->g,
                       .opt = &c->opt,
                       .so = {.kind = kind,
                              .world = 2,
                              .rank = rank,
                              .bucket_mb = bucket_mb,
                              .prefetch = SHARD_DEFAULT_PREFETCH},
                       .emit_name = "rank"};
    char err[2048];
    if (shard_check(&r.so, err, sizeof err)) fail_msg("%s", err);
    if (shard_run(&r, o, err, sizeof err)) fail_msg("%s", err);
}

/* The ai.roamc nodes of the rank's step in file order, each as
 * "OP:BYTES" (its first output's bytes), space-separated. */
static const char *ts_collectives(const shard_outcome *o, char *buf, size_t len) {
    const fe_model *m = &o->model;
    size_t off = 0;
    buf[0] = 0;
    for (size_t i = 0; i < m->n_nodes && off < len; i++) {
        const fe_node *n = &m->nodes[i];
        if (strcmp(n->domain, "ai.roamc") != 0) continue;
        unsigned long long bytes = n->n_outputs ? m->values[n->outputs[0]].bytes : 0;
        off +=
            (size_t)snprintf(buf + off, len - off, "%s%s:%llu", off ? " " : "", n->op_type, bytes);
    }
    return buf;
}

/* The split at the peak sums to the plan's theoretical peak. */
static void ts_check_split(const shard_outcome *o) {
    uint64_t sum = 0;
    for (int k = 0; k < SHARD_N_PARTS; k++) sum += o->split[k];
    assert_int_equal(sum, o->plan.theoretical);
}

typedef struct ts_want {
    size_t n_params, n_owned, n_buckets, n_removed;
    uint64_t param_bytes, owned_bytes, bucket_bytes;
    uint64_t optimizer; /* split: optimizer state at the peak (all of the rank's) */
    const char *collectives;
} ts_want;

static void ts_expect(int kind, long rank, double bucket_mb, const ts_want *w) {
    ts_ctx c;
    ts_open(&c);
    shard_outcome o;
    ts_shard(&c, kind, rank, bucket_mb, &o);
    assert_int_equal(o.n_params, w->n_params);
    assert_int_equal(o.n_owned, w->n_owned);
    assert_int_equal(o.n_buckets, w->n_buckets);
    assert_int_equal(o.n_removed, w->n_removed);
    assert_int_equal(o.param_bytes, w->param_bytes);
    assert_int_equal(o.owned_bytes, w->owned_bytes);
    assert_int_equal(o.bucket_bytes, w->bucket_bytes);
    assert_int_equal(o.split[SHARD_OPTIMIZER], w->optimizer);
    char buf[2048];
    assert_string_equal(ts_collectives(&o, buf, sizeof buf), w->collectives);
    ts_check_split(&o);
    shard_outcome_free(&o);
    ts_close(&c);
}

/* DDP: every parameter, gradient and state whole on each rank.  Buckets in
 * the order gradients become ready: g2 (1 MiB) closes the first bucket (1
 * MiB, torch's first-bucket cap); g1 and g0 (512 KiB) fit the 25 MiB cap,
 * one bucket; each bucket divided by the world and all-reduced in place. */
static void test_ddp(void **state) {
    (void)state;
    for (long rank = 0; rank < 2; rank++)
        ts_expect(SHARD_DDP, rank, 25,
                  &(ts_want){3, 3, 2, 0, 3 * 512 * KIB, 3 * 512 * KIB, 3 * 512 * KIB, 3 * 512 * KIB,
                             "AllReduce:1048576 AllReduce:524288"});
}

/* A cap of 0.25 MiB closes a bucket at each 256 KiB gradient: three buckets. */
static void test_ddp_bucket_cap(void **state) {
    (void)state;
    ts_expect(SHARD_DDP, 0, 0.25,
              &(ts_want){3, 3, 3, 0, 3 * 512 * KIB, 3 * 512 * KIB, 3 * 512 * KIB, 3 * 512 * KIB,
                         "AllReduce:1048576 AllReduce:262144 AllReduce:262144"});
}

/* ZeRO-1: the largest parameter first, to the rank with the fewest
 * elements: h.2 (1 MiB) to rank 0, then h.0 and h.1 (256 KiB each) to rank
 * 1.  Rank 0 keeps h.2's state and update (6 update nodes removed), rank 1
 * the other two (3 removed); after the updates each parameter is broadcast
 * from its owner. */
static void test_zero1(void **state) {
    (void)state;
    const char *coll = "AllReduce:1048576 AllReduce:524288 Broadcast:1048576 Broadcast:262144 "
                       "Broadcast:262144";
    ts_expect(SHARD_ZERO1, 0, 25,
              &(ts_want){3, 1, 2, 6, 3 * 512 * KIB, MIB, 3 * 512 * KIB, MIB, coll});
    ts_expect(SHARD_ZERO1, 1, 25,
              &(ts_want){3, 2, 2, 3, 3 * 512 * KIB, 512 * KIB, 3 * 512 * KIB, 512 * KIB, coll});
}

/* ZeRO-2: one bucket buffer as large as the largest bucket (1 MiB), reused
 * by both buckets, each reduce-scattered in place. */
static void test_zero2(void **state) {
    (void)state;
    const char *coll = "ReduceScatter:1048576 ReduceScatter:1048576 Broadcast:1048576 "
                       "Broadcast:262144 Broadcast:262144";
    ts_expect(SHARD_ZERO2, 0, 25, &(ts_want){3, 1, 2, 6, 3 * 512 * KIB, MIB, MIB, MIB, coll});
    ts_expect(SHARD_ZERO2, 1, 25,
              &(ts_want){3, 2, 2, 3, 3 * 512 * KIB, 512 * KIB, MIB, 512 * KIB, coll});
}

/* ZeRO-3 (unit: the module, "h.0") and FSDP (unit: the layer, "h.0" too):
 * each unit's parameter flattened and split in two: shards of 128, 128 and
 * 512 KiB (768 KiB on each rank, and the state alike).  Per unit an
 * AllGather before the forward (256 KiB, 256 KiB, 1 MiB), one before the
 * backward (h.2's at once; h.1's and h.0's one unit ahead, each held by a
 * Depend on the backward value the previous unit starts from), and after
 * its gradient a ReduceScatter of the flat gradient into the rank's shard. */
static void test_gathered(void **state) {
    (void)state;
    const char *coll = "AllGather:262144 AllGather:262144 AllGather:1048576 AllGather:1048576 "
                       "AllGather:262144 Depend:131072 ReduceScatter:524288 AllGather:262144 "
                       "Depend:131072 ReduceScatter:131072 ReduceScatter:131072";
    for (int kind = SHARD_ZERO3; kind <= SHARD_FSDP; kind++)
        for (long rank = 0; rank < 2; rank++)
            ts_expect(kind, rank, 25,
                      &(ts_want){3, 3, 3, 0, 3 * 512 * KIB, 768 * KIB, MIB, 768 * KIB, coll});
}

/* Set-ups refused before any work: world, rank, bucket size. */
static void test_shard_check(void **state) {
    (void)state;
    char err[256];
    shard_options so = {.kind = SHARD_DDP, .world = 2, .rank = 2, .bucket_mb = 25};
    assert_int_equal(shard_check(&so, err, sizeof err), -1);
    so.rank = 1;
    so.bucket_mb = 0;
    assert_int_equal(shard_check(&so, err, sizeof err), -1);
    so.bucket_mb = 25;
    so.world = SHARD_MAX_WORLD + 1;
    assert_int_equal(shard_check(&so, err, sizeof err), -1);
    so.world = 2;
    assert_int_equal(shard_check(&so, err, sizeof err), 0);
    int kind;
    assert_int_equal(shard_kind_parse("zero2", &kind), 0);
    assert_int_equal(kind, SHARD_ZERO2);
    assert_int_equal(shard_kind_parse("zero4", &kind), -1);
}

/* pipe_build of the step into P = 2 stages, M = 2 microbatches. */
static int ts_pipe(ts_ctx *c, int schedule, const char *cuts, pipe_outcome *o, char *err,
                   size_t errlen) {
    pipe_request r = {
        .step_name = "step",
        .step_bytes = c->bytes,
        .step_len = c->len,
        .g = &c->g,
        .opt = &c->opt,
        .po = {.stages = 2, .microbatches = 2, .schedule = schedule, .cuts = cuts, .stage = -1},
        .emit_name = "stage"};
    if (pipe_check(&r.po, err, errlen)) fail_msg("%s", err);
    int rc = pipe_build(&r, o, err, errlen);
    if (rc == 0 && pipe_plan(&r, o, err, errlen)) fail_msg("%s", err);
    return rc;
}

/* A stage's Sends and Recvs in file order, "OP:NAME" space-separated. */
static const char *ts_transfers(const pipe_stage *st, char *buf, size_t len) {
    const fe_model *m = &st->model;
    size_t off = 0;
    buf[0] = 0;
    for (size_t i = 0; i < m->n_nodes && off < len; i++) {
        const fe_node *n = &m->nodes[i];
        if (strcmp(n->domain, "ai.roamc") != 0 || strcmp(n->op_type, "Depend") == 0) continue;
        off += (size_t)snprintf(buf + off, len - off, "%s%s:%s", off ? " " : "", n->op_type,
                                m->values[n->outputs[0]].name);
    }
    return buf;
}

typedef struct ts_stage_want {
    size_t first_op, end_op, n_params;
    uint64_t param_bytes;
    size_t n_recv, n_send;
    uint64_t recv_bytes, send_bytes; /* per microbatch */
    int in_flight;
    const char *transfers;
} ts_stage_want;

static void ts_expect_stage(const pipe_stage *st, const ts_stage_want *w) {
    assert_int_equal(st->first_op, w->first_op);
    assert_int_equal(st->end_op, w->end_op);
    assert_int_equal(st->n_params, w->n_params);
    assert_int_equal(st->param_bytes, w->param_bytes);
    assert_int_equal(st->n_recv, w->n_recv);
    assert_int_equal(st->n_send, w->n_send);
    assert_int_equal(st->recv_bytes, w->recv_bytes);
    assert_int_equal(st->send_bytes, w->send_bytes);
    assert_int_equal(st->in_flight, w->in_flight);
    char buf[1024];
    assert_string_equal(ts_transfers(st, buf, sizeof buf), w->transfers);
    uint64_t sum = 0;
    for (int k = 0; k < PIPE_N_PARTS; k++) sum += st->split[k];
    assert_int_equal(sum, st->plan.theoretical);
}

/* Balanced on h100 seconds: the forward mms take 8.4, 8.4 and 33.6 MFLOP,
 * so half the forward time is passed inside h.2's mm (node 4), and the cut
 * goes before it, as --stage-cuts h.2 puts it.  Stage 0 (nodes 0-3, h.0
 * and h.1: 512 KiB) sends a2 (64x512, 128 KiB) and receives its gradient
 * ga2 per microbatch; stage 1 (nodes 4-5, h.2: 1 MiB) the reverse.  1F1B:
 * stage 0 runs one forward ahead (F0 F1 B0 B1, 2 microbatches in flight),
 * stage 1 none (F0 B0 F1 B1, 1 in flight). */
static void test_pipeline_balanced(void **state) {
    (void)state;
    const char *cuts[] = {NULL, "h.2"};
    for (int i = 0; i < 2; i++) {
        ts_ctx c;
        ts_open(&c);
        pipe_outcome o;
        char err[2048];
        if (ts_pipe(&c, PIPE_1F1B, cuts[i], &o, err, sizeof err)) fail_msg("%s", err);
        assert_int_equal(o.n, 2);
        assert_int_equal(o.microbatches, 2);
        ts_expect_stage(&o.st[0],
                        &(ts_stage_want){0, 4, 2, 512 * KIB, 2, 2, 128 * KIB, 128 * KIB, 2,
                                         "Send:mb0.a2.to1 Send:mb1.a2.to1 Recv:mb0.ga2 "
                                         "Recv:mb1.ga2"});
        ts_expect_stage(&o.st[1], &(ts_stage_want){4, 6, 1, MIB, 2, 2, 128 * KIB, 128 * KIB, 1,
                                                   "Recv:mb0.a2 Send:mb0.ga2.to0 Recv:mb1.a2 "
                                                   "Send:mb1.ga2.to0"});
        assert_string_equal(o.st[1].first_name, "mm#4");
        pipe_outcome_free(&o);
        ts_close(&c);
    }
}

/* --stage-cuts h.1: stage 0 is nodes 0-1 (h.0, 256 KiB) and sends a1 (64x128,
 * 32 KiB); GPipe: every forward, then every backward, 2 in flight on both. */
static void test_pipeline_cut_gpipe(void **state) {
    (void)state;
    ts_ctx c;
    ts_open(&c);
    pipe_outcome o;
    char err[2048];
    if (ts_pipe(&c, PIPE_GPIPE, "h.1", &o, err, sizeof err)) fail_msg("%s", err);
    ts_expect_stage(&o.st[0], &(ts_stage_want){0, 2, 1, 256 * KIB, 2, 2, 32 * KIB, 32 * KIB, 2,
                                               "Send:mb0.a1.to1 Send:mb1.a1.to1 Recv:mb0.ga1 "
                                               "Recv:mb1.ga1"});
    ts_expect_stage(&o.st[1], &(ts_stage_want){2, 6, 2, 1280 * KIB, 2, 2, 32 * KIB, 32 * KIB, 2,
                                               "Recv:mb0.a1 Recv:mb1.a1 Send:mb0.ga1.to0 "
                                               "Send:mb1.ga1.to0"});
    pipe_outcome_free(&o);
    ts_close(&c);
}

/* A cut naming no module, and set-ups out of range. */
static void test_pipeline_bad(void **state) {
    (void)state;
    ts_ctx c;
    ts_open(&c);
    pipe_outcome o;
    char err[2048];
    assert_int_equal(ts_pipe(&c, PIPE_1F1B, "h.9", &o, err, sizeof err), -1);
    if (!strstr(err, "'h.9' is no module")) fail_msg("unexpected message: %s", err);
    pipe_outcome_free(&o);
    ts_close(&c);
    pipe_options po = {.stages = 0, .microbatches = 1};
    assert_int_equal(pipe_check(&po, err, sizeof err), -1);
    po.stages = PIPE_MAX_STAGES + 1;
    assert_int_equal(pipe_check(&po, err, sizeof err), -1);
    po.stages = 2;
    po.microbatches = PIPE_MAX_MICROBATCHES + 1;
    assert_int_equal(pipe_check(&po, err, sizeof err), -1);
    int sched;
    assert_int_equal(pipe_schedule_parse("gpipe", &sched), 0);
    assert_int_equal(sched, PIPE_GPIPE);
    assert_int_equal(pipe_schedule_parse("zigzag", &sched), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ddp),
        cmocka_unit_test(test_ddp_bucket_cap),
        cmocka_unit_test(test_zero1),
        cmocka_unit_test(test_zero2),
        cmocka_unit_test(test_gathered),
        cmocka_unit_test(test_shard_check),
        cmocka_unit_test(test_pipeline_balanced),
        cmocka_unit_test(test_pipeline_cut_gpipe),
        cmocka_unit_test(test_pipeline_bad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
