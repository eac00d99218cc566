/* Unit tests of planner/fit/ through fit.h: fit_run on a small training
 * step built in C whose answer is known by hand, on device profiles written
 * for the purpose (figures picked so that one price dominates).
 *
 * The step (every activation 64x64 float, 16 KiB; w1, w2 64x64 parameters):
 *   forward   h = mm(x, w1); a = relu(h); o = mm(a, w2); r = relu(o);
 *             loss = sum(r)
 *   backward  g4 = add(r, r); g3 = threshold_backward(g4, o);
 *             gw2 = mm(a, g3); g2 = mm(g3, w2);
 *             g1 = threshold_backward(g2, h); gw1 = mm(x, g1)
 *   SGD       w1 -= gw1; w2 -= gw2 (in place)
 * (the transposes of a real backward left out: all is square, and a view
 * would let the order read a early).  Planned in program order, the step's
 * arena is x, w1, w2 (48 KiB), loss (512 B) and the 80 KiB live at steps 5
 * and 6 (h, a, o, r, g4 / h, a, o, g4, g3): 131584 B.  Idle over those
 * steps are h (made by an mm, next read at step 9), a (made by a relu,
 * next read at step 7); o is read at step 6.  So one drop of 16 KiB meets
 * a budget of 131584 - 16384 B: on a device where FLOPs are dear and the
 * host link slow, the cheapest is recomputing a (one relu: 4096 FLOPs,
 * 4.096 us at 1 GFLOP/s, against 524288 FLOPs for an mm); where memory
 * bandwidth is dear and the host link fast, every recompute costs more
 * than a host round trip of 16 KiB, so one value is offloaded instead. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fit.h"
#include "testgraph.h"

#define ACT_BYTES 16384u /* one 64x64 float activation */

static tg *tf_step(void) {
    tg *t = tg_new();
    tg_input(t, "x", "64x64");
    tg_input(t, "w1", "64x64");
    tg_input(t, "w2", "64x64");
    tg_meta(t, "roamc.loss", "loss");
    tg_meta(t, "roamc.parameters", "w1,w2");
    tg_meta(t, "roamc.gradients", "gw1,gw2");
    tg_meta(t, "roamc.optimizer_state", "");
    tg_meta(t, "roamc.data_inputs", "x");
    tg_meta(t, "roamc.optimizer", "sgd");
    tg_node(t, "aten", "mm", "x,w1", "h");
    tg_node(t, "aten", "relu", "h", "a");
    tg_node(t, "aten", "mm", "a,w2", "o");
    tg_node(t, "aten", "relu", "o", "r");
    tg_node(t, "aten", "sum", "r", "loss");
    tg_node(t, "aten", "add", "r,r", "g4");
    tg_node(t, "aten", "threshold_backward", "g4,o", "g3");
    tg_node(t, "aten", "mm", "a,g3", "gw2");
    tg_node(t, "aten", "mm", "g3,w2", "g2");
    tg_node(t, "aten", "threshold_backward", "g2,h", "g1");
    tg_node(t, "aten", "mm", "x,g1", "gw1");
    int n = tg_node(t, "aten", "sub_", "w1,gw1", "w1b");
    tg_alias(t, n, "0", 1);
    n = tg_node(t, "aten", "sub_", "w2,gw2", "w2b");
    tg_alias(t, n, "0", 1);
    const char *v[] = {"h", "a", "o", "r", "g4", "g3", "gw2", "g2", "g1", "gw1", "w1b", "w2b"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) tg_value(t, v[i], "64x64");
    tg_output(t, "loss", "");
    return t;
}

/* The step loaded and built, and its bytes, as fit_run takes them. */
typedef struct tf_ctx {
    uint8_t *bytes;
    size_t len;
    fe_model m;
    graph g;
    planner_options opt;
    fit_device dev;
} tf_ctx;

static const planner_options tf_planner = {.align = 512,
                                           .order = PLANNER_ORDER_PROGRAM,
                                           .layout = PLANNER_LAYOUT_ROAM,
                                           .node_limit = PLANNER_DEFAULT_NODE_LIMIT,
                                           .delay_radius = PLANNER_DEFAULT_DELAY_RADIUS,
                                           .threads = 1,
                                           .time_limit = PLANNER_DEFAULT_TIME_LIMIT};

/* A device profile with the figures given (TFLOP/s for every rate, GB/s). */
static void tf_profile(fit_device *d, double tflops, double memory_gbps, double host_gbps) {
    char path[256], err[1024];
    snprintf(path, sizeof path, "/tmp/roamc_test_fit_%d.json", (int)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "{\"name\": \"Test device\"");
    const char *rates[] = {"fp32_tflops", "tf32_tflops", "bf16_tflops", "fp16_tflops",
                           "fp64_tflops"};
    for (size_t i = 0; i < 5; i++)
        fprintf(f, ", \"%s\": {\"value\": %g, \"source\": \"test\"}", rates[i], tflops);
    fprintf(f,
            ", \"memory_gbps\": {\"value\": %g, \"source\": \"test\"}"
            ", \"host_link_gbps\": {\"value\": %g, \"source\": \"test\"}"
            ", \"memory_gib\": {\"value\": 1, \"source\": \"test\"}}\n",
            memory_gbps, host_gbps);
    fclose(f);
    int rc = fit_device_load(path, d, err, sizeof err);
    unlink(path);
    if (rc) fail_msg("%s", err);
}

static void tf_open(tf_ctx *c) {
    tg *t = tf_step();
    c->bytes = tg_pack(t, &c->len);
    tg_free(t);
    char err[2048];
    if (fe_load_bytes("fit_step", (fe_bytes){c->bytes, c->len}, NULL, &c->m, err, sizeof err))
        fail_msg("%s", err);
    if (graph_build(&c->m, 512, &c->g, err, sizeof err)) fail_msg("%s", err);
    c->opt = tf_planner;
}

static void tf_close(tf_ctx *c) {
    graph_free(&c->g);
    fe_free(&c->m);
    free(c->bytes);
}

/* fit_run under budget (arena bytes) and max_overhead; returns fit_run's code. */
static int tf_run(tf_ctx *c, uint64_t budget, double max_overhead, fit_outcome *o, char *err,
                  size_t errlen) {
    fit_request r = {.step_name = "fit_step",
                     .step_bytes = c->bytes,
                     .step_len = c->len,
                     .g = &c->g,
                     .bindings = NULL,
                     .opt = &c->opt,
                     .arena_budget = budget,
                     .mode = FIT_BOTH,
                     .max_overhead = max_overhead,
                     .device = &c->dev,
                     .emit_name = "fitted"};
    return fit_run(&r, o, err, errlen);
}

/* The unchanged step's arena (its plan under a budget it meets). */
static uint64_t tf_arena(tf_ctx *c) {
    fit_outcome o;
    char err[2048];
    if (tf_run(c, UINT64_MAX / 2, -1, &o, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(o.status, FIT_ALREADY);
    assert_null(o.changed);
    uint64_t arena = o.before.actual;
    fit_outcome_free(&o);
    return arena;
}

#define ARENA 131584u /* the unchanged step's arena, by hand (above) */
#define LEAST 115200u /* the least any change reaches: step 9 (h, gw2, g2, g1) */

/* FLOPs dear (1 GFLOP/s), memory fast (1000 GB/s), host link slow (1 MB/s). */
static void tf_flops_dear(fit_device *d) {
    tf_profile(d, 0.001, 1000, 0.001);
}

static void test_unchanged_arena(void **state) {
    (void)state;
    tf_ctx c;
    tf_open(&c);
    tf_flops_dear(&c.dev);
    assert_int_equal(tf_arena(&c), ARENA);
    tf_close(&c);
}

/* One drop is needed; the cheapest is recomputing a (a relu): 16 KiB
 * recomputed, 4096 FLOPs and 4.096 us added, nothing offloaded. */
static void test_cheapest_recompute(void **state) {
    (void)state;
    tf_ctx c;
    tf_open(&c);
    tf_flops_dear(&c.dev);
    fit_outcome o;
    char err[2048];
    if (tf_run(&c, ARENA - ACT_BYTES, -1, &o, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(o.status, FIT_FITTED);
    assert_int_equal(o.n_recomputed, 1);
    assert_int_equal(o.n_offloaded, 0);
    assert_int_equal(o.n_cloned_ops, 1);
    assert_int_equal(o.bytes_recomputed, ACT_BYTES);
    assert_true(o.added_flops == 4096.0);
    assert_true(o.added_seconds > 4.0959e-6 && o.added_seconds < 4.0961e-6);
    assert_non_null(o.changed);
    assert_int_equal(o.changed->plan.actual, ARENA - ACT_BYTES);
    /* the changed step holds one relu more, marked as recomputing a */
    assert_int_equal(o.changed->graph.n_ops, c.g.n_ops + 1);
    fit_outcome_free(&o);
    tf_close(&c);
}

/* Memory bandwidth dear (1 MB/s: a relu moves 32 KiB, 32 ms) and the host
 * link fast (1000 GB/s: 16 KiB out and back, 32 ns): offload wins. */
static void test_offload_when_recompute_dearer(void **state) {
    (void)state;
    tf_ctx c;
    tf_open(&c);
    tf_profile(&c.dev, 1000, 0.001, 1000);
    fit_outcome o;
    char err[2048];
    if (tf_run(&c, ARENA - ACT_BYTES, -1, &o, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(o.status, FIT_FITTED);
    assert_int_equal(o.n_recomputed, 0);
    assert_int_equal(o.n_offloaded, 1);
    assert_int_equal(o.bytes_offloaded, ACT_BYTES);
    assert_int_equal(o.host_bytes, ACT_BYTES);
    assert_int_equal(o.link_bytes, 2 * ACT_BYTES);
    assert_true(o.added_flops == 0.0);
    assert_true(o.changed->plan.actual <= ARENA - ACT_BYTES);
    fit_outcome_free(&o);
    tf_close(&c);
}

/* Below the least any change reaches: "cannot fit", with that least. */
static void test_infeasible_budget(void **state) {
    (void)state;
    tf_ctx c;
    tf_open(&c);
    tf_flops_dear(&c.dev);
    fit_outcome o;
    char err[2048];
    if (tf_run(&c, LEAST - 4096, -1, &o, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(o.status, FIT_CANNOT);
    assert_int_equal(o.least, LEAST);
    assert_string_equal(fit_status_name(o.status), "cannot fit");
    fit_outcome_free(&o);
    tf_close(&c);
}

/* The relu adds 4.096 us to a step of about 2.66 ms (five 64x64x64 mms at
 * 524.288 us each, the rest elementwise): 0.15%.  --max-overhead 0.1%
 * refuses it, 0.2% takes it. */
static void test_max_overhead(void **state) {
    (void)state;
    tf_ctx c;
    tf_open(&c);
    tf_flops_dear(&c.dev);
    fit_outcome o;
    char err[2048];
    if (tf_run(&c, ARENA - ACT_BYTES, 0.001, &o, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(o.status, FIT_TOO_SLOW);
    assert_true(o.step_seconds > 5 * 524.288e-6 && o.step_seconds < 2.7e-3);
    double share = (o.over_cap_seconds > 0 ? o.over_cap_seconds : o.added_seconds) / o.step_seconds;
    assert_true(share > 0.001 && share < 0.002);
    fit_outcome_free(&o);
    if (tf_run(&c, ARENA - ACT_BYTES, 0.002, &o, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(o.status, FIT_FITTED);
    assert_int_equal(o.n_recomputed, 1);
    fit_outcome_free(&o);
    tf_close(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unchanged_arena),
        cmocka_unit_test(test_cheapest_recompute),
        cmocka_unit_test(test_offload_when_recompute_dearer),
        cmocka_unit_test(test_infeasible_budget),
        cmocka_unit_test(test_max_overhead),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
