/* Unit tests of graph/: storages, ordering edges, lifetimes, peaks and the
 * lower bound, on models built in memory (tests/models.c) and loaded by
 * frontend/ (whose own checks are test_frontend.c's); bad models the
 * loader accepts are refused by graph_build, and whatever the loader makes
 * of truncated, random or bit-flipped bytes never crashes it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frontend.h"
#include "graph.h"
#include "models.h"

/* Loads a test model and builds its graph with align 512. */
static void load(const char *name, fe_model *m, graph *g) {
    tg *t = test_model_build(name);
    if (!t) fail_msg("no test model %s", name);
    size_t len;
    uint8_t *bytes = tg_pack(t, &len);
    char err[1024];
    int rc = fe_load_bytes(name, (fe_bytes){bytes, len}, NULL, m, err, sizeof err);
    if (rc) fail_msg("%s", err);
    rc = graph_build(m, 512, g, err, sizeof err);
    if (rc) fail_msg("%s", err);
    free(bytes);
    tg_free(t);
}

static int op_named(const fe_model *m, const char *output) {
    int v = fe_find_value(m, output);
    assert_true(v >= 0);
    return m->values[v].producer;
}

static void test_diamond_peak_by_hand(void **state) {
    (void)state;
    fe_model m;
    graph g;
    load("diamond", &m, &g);
    assert_int_equal(g.n_ops, 4);
    assert_int_equal(g.n_storages, 5);
    int order[4];
    graph_program_order(&g, order);
    for (int i = 0; i < 4; i++) assert_int_equal(order[i], i);
    /* 64x64 floats = 16384 B each; steps: {x,a} {x,a,b} {a,b,a2} {b,a2,c} */
    uint64_t np;
    int at;
    assert_int_equal(graph_peak(&g, order, &np, &at), 3 * 16384);
    assert_int_equal(at, 1);
    assert_int_equal(np, 3 * 16384); /* c (persistent: a graph output) is live only at step 3 */
    assert_int_equal(graph_lower_bound(&g), 3 * 16384);
    /* sigmoid first, then relu: the peak is the same here */
    int other[4] = {1, 0, 2, 3};
    assert_int_equal(graph_check_schedule(&g, other, NULL, 0), 0);
    int bad[4] = {2, 0, 1, 3}; /* mul before relu */
    char err[512];
    assert_int_equal(graph_check_schedule(&g, bad, err, sizeof err), -1);
    assert_non_null(strstr(err, "before"));
    graph_free(&g);
    fe_free(&m);
}

static void test_views_share_storage(void **state) {
    (void)state;
    fe_model m;
    graph g;
    load("views", &m, &g);
    /* {x, xf}, {shape}, {r, r2, r3, rt}, {g, gv}, {out} */
    assert_int_equal(g.n_storages, 5);
    int r = fe_find_value(&m, "r"), rt = fe_find_value(&m, "rt"), x = fe_find_value(&m, "x");
    int xf = fe_find_value(&m, "xf"), gg = fe_find_value(&m, "g"), gv = fe_find_value(&m, "gv");
    assert_int_equal(g.storage_of[r], g.storage_of[rt]);
    assert_int_equal(g.storage_of[x], g.storage_of[xf]);
    assert_int_equal(g.storage_of[gg], g.storage_of[gv]);
    assert_int_not_equal(g.storage_of[x], g.storage_of[r]);
    assert_int_equal(g.storages[g.storage_of[r]].root, r);
    assert_int_equal(g.storages[g.storage_of[r]].size, 8 * 16 * 4 * 4);
    graph_free(&g);
    fe_free(&m);
}

static void test_inplace_orders_readers_first(void **state) {
    (void)state;
    fe_model m;
    graph g;
    load("inplace", &m, &g);
    int e = fe_find_value(&m, "e"), e3 = fe_find_value(&m, "e3");
    assert_int_equal(g.storage_of[e], g.storage_of[e3]);
    int sig = op_named(&m, "s"), relu_ = op_named(&m, "e2");
    bool edge = false;
    for (size_t k = g.succ_start[sig]; k < g.succ_start[sig + 1]; k++) edge |= g.succ[k] == relu_;
    assert_true(edge);
    /* exp, relu_, sigmoid, add_, mul: the sigmoid would read the overwritten e */
    int bad[5] = {0, 2, 1, 3, 4};
    assert_int_equal(graph_check_schedule(&g, bad, NULL, 0), -1);
    graph_free(&g);
    fe_free(&m);
}

static void test_training_persistent_and_view_order(void **state) {
    (void)state;
    fe_model m;
    graph g;
    load("training", &m, &g);
    const char *persistent[] = {"w1", "w2", "m1", "m2", "loss"};
    for (size_t i = 0; i < 5; i++)
        assert_true(g.storages[g.storage_of[fe_find_value(&m, persistent[i])]].persistent);
    assert_false(g.storages[g.storage_of[fe_find_value(&m, "x")]].persistent);
    assert_false(g.storages[g.storage_of[fe_find_value(&m, "h")]].persistent);
    /* mm(gd, w2T) reads w2 through a view: it must precede sub_(w2). */
    int mm = op_named(&m, "ga"), upd = op_named(&m, "w2b");
    bool edge = false;
    for (size_t k = g.succ_start[mm]; k < g.succ_start[mm + 1]; k++) edge |= g.succ[k] == upd;
    assert_true(edge);
    int order[32];
    graph_program_order(&g, order);
    uint64_t np;
    uint64_t peak = graph_peak(&g, order, &np, NULL);
    uint64_t pers = graph_persistent_bytes(&g);
    assert_true(peak >= graph_lower_bound(&g));
    assert_true(np < peak);
    /* parameters and momenta: 2 x (256x512 + 512x10) floats, plus the loss */
    assert_int_equal(pers, 2 * (256 * 512 * 4 + 20480) + 512);
    int32_t start[64], end[64];
    graph_lifetimes(&g, order, start, end);
    int w1 = g.storage_of[fe_find_value(&m, "w1")], x = g.storage_of[fe_find_value(&m, "x")];
    assert_int_equal(start[w1], 0);
    assert_int_equal(end[w1], (int)g.n_ops - 1);
    assert_int_equal(start[x], 0);
    assert_true(end[x] < (int)g.n_ops - 1); /* data inputs are freed after their last read */
    /* gradients die after the optimizer reads them, unless retained as
     * eager PyTorch retains .grad */
    int gw1 = g.storage_of[fe_find_value(&m, "gw1")];
    assert_true(g.storages[gw1].gradient);
    assert_false(g.storages[g.storage_of[fe_find_value(&m, "ga")]].gradient);
    assert_true(end[gw1] < (int)g.n_ops - 1);
    g.retain_gradients = true;
    graph_lifetimes(&g, order, start, end);
    assert_int_equal(end[gw1], (int)g.n_ops - 1);
    assert_true(graph_peak(&g, order, NULL, NULL) >= peak);
    /* (the leaves and blocks keep it too: test_order.c's
     * test_leaves_keep_retained_gradients) */
    graph_free(&g);
    fe_free(&m);
}

static void test_storage_sizes_aligned(void **state) {
    (void)state;
    fe_model m;
    graph g;
    load("dtypes", &m, &g);
    /* c holds 501 bytes (test_frontend.c): storages are rounded up to the alignment */
    assert_int_equal(g.storages[g.storage_of[fe_find_value(&m, "c")]].size, 512);
    graph_free(&g);
    fe_free(&m);
}

static void test_multiout_unused_output(void **state) {
    (void)state;
    fe_model m;
    graph g;
    load("multiout", &m, &g);
    /* topk's indices output is unused (test_frontend.c) */
    int order[8];
    graph_program_order(&g, order);
    int32_t start[16], end[16];
    graph_lifetimes(&g, order, start, end);
    int mean = g.storage_of[fe_find_value(&m, "mean")];
    assert_int_equal(start[mean], end[mean]); /* nothing reads it */
    graph_free(&g);
    fe_free(&m);
}

/* Each bad model the loader accepts is refused by graph_build, with the
 * file and the reason (the ones the loader refuses: test_frontend.c). */
static void test_bad_models_rejected_by_the_graph(void **state) {
    (void)state;
    for (const test_bad_model *b = test_models_bad; b->name; b++) {
        tg *t = b->build();
        size_t len;
        uint8_t *bytes = tg_pack(t, &len);
        fe_model m;
        graph g;
        char err[1024] = "";
        if (fe_load_bytes(b->name, (fe_bytes){bytes, len}, NULL, &m, err, sizeof err) == 0) {
            int rc = graph_build(&m, 512, &g, err, sizeof err);
            if (rc == 0) graph_free(&g);
            fe_free(&m);
            if (rc == 0) fail_msg("%s was accepted", b->name);
            if (!strstr(err, b->message))
                fail_msg("%s: message lacks \"%s\": %s", b->name, b->message, err);
            if (strncmp(err, b->name, strlen(b->name)) != 0)
                fail_msg("%s: message does not start with the file: %s", b->name, err);
        }
        free(bytes);
        tg_free(t);
    }
}

/* Every prefix of a real model, random bytes and the model with flipped
 * bytes (the same ones as test_frontend.c's): what the loader accepts,
 * graph_build builds or refuses, never a crash (the loader's own verdicts:
 * test_frontend.c). */
static void test_truncated_and_random_bytes(void **state) {
    (void)state;
    tg *t = test_model_build("training");
    size_t len;
    uint8_t *bytes = tg_pack(t, &len);
    fe_model m;
    char err[512];
    for (size_t cut = 0; cut < len; cut += 7) {
        if (fe_load_bytes("cut", (fe_bytes){bytes, cut}, NULL, &m, err, sizeof err) == 0) {
            graph g;
            if (graph_build(&m, 512, &g, err, sizeof err) == 0) graph_free(&g);
            fe_free(&m);
        }
    }
    srand(12345);
    for (int trial = 0; trial < 200; trial++) {
        size_t n = (size_t)(rand() % 4096) + 1;
        uint8_t *junk = malloc(n);
        for (size_t i = 0; i < n; i++) junk[i] = (uint8_t)rand();
        if (fe_load_bytes("junk", (fe_bytes){junk, n}, NULL, &m, err, sizeof err) == 0) {
            graph g;
            if (graph_build(&m, 512, &g, err, sizeof err) == 0) graph_free(&g);
            fe_free(&m);
        }
        uint8_t *flipped = malloc(len);
        memcpy(flipped, bytes, len);
        for (int k = 0; k < 4; k++) flipped[(size_t)rand() % len] ^= (uint8_t)(1 + rand() % 255);
        if (fe_load_bytes("flipped", (fe_bytes){flipped, len}, NULL, &m, err, sizeof err) == 0) {
            graph g;
            if (graph_build(&m, 512, &g, err, sizeof err) == 0) graph_free(&g);
            fe_free(&m);
        }
        free(junk);
        free(flipped);
    }
    free(bytes);
    tg_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_diamond_peak_by_hand),
        cmocka_unit_test(test_views_share_storage),
        cmocka_unit_test(test_inplace_orders_readers_first),
        cmocka_unit_test(test_training_persistent_and_view_order),
        cmocka_unit_test(test_storage_sizes_aligned),
        cmocka_unit_test(test_multiout_unused_output),
        cmocka_unit_test(test_bad_models_rejected_by_the_graph),
        cmocka_unit_test(test_truncated_and_random_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
