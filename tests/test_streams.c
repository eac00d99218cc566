/* Unit tests of graph/graph_streams.h: happens-before over several streams,
 * the ordering edges it must cover and the memory rule (shared/DESIGN.md
 * "Several streams"), on hand-built graphs (a missing wait, a reuse across
 * streams, an in-place write on another stream) and, against brute force on
 * random orders, the vector clocks, the extended lifetimes and a layout
 * made on them: it never shares an address between unordered buffers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frontend.h"
#include "graph.h"
#include "graph_streams.h"
#include "layout.h"
#include "testgraph.h"

/* Loads the model t describes and builds its graph (align 1). */
static void streams_load(tg *t, fe_model *m, graph *g) {
    size_t len;
    uint8_t *bytes = tg_pack(t, &len);
    char err[1024];
    if (fe_load_bytes("streams", (fe_bytes){bytes, len}, NULL, m, err, sizeof err))
        fail_msg("%s", err);
    if (graph_build(m, 1, g, err, sizeof err)) fail_msg("%s", err);
    free(bytes);
    tg_free(t);
}

static int streams_op(const fe_model *m, const char *output) {
    int v = fe_find_value(m, output);
    assert_true(v >= 0);
    return m->values[v].producer;
}

/* x -> relu -> a -> neg -> b -> sigmoid -> c, with a's reader on stream 1:
 * the data edges relu->neg and neg->sigmoid cross streams. */
static tg *streams_chain(void) {
    tg *t = tg_new();
    tg_input(t, "x", "64x64");
    tg_node(t, "", "Relu", "x", "a");
    tg_node(t, "", "Neg", "a", "b");
    tg_node(t, "", "Sigmoid", "b", "c");
    tg_node(t, "", "Tanh", "c", "d");
    tg_value(t, "a", "64x64");
    tg_value(t, "b", "64x64");
    tg_value(t, "c", "64x64");
    tg_output(t, "d", "64x64");
    return t;
}

static void test_missing_wait(void **state) {
    (void)state;
    fe_model m;
    graph g;
    streams_load(streams_chain(), &m, &g);
    int order[4] = {0, 1, 2, 3}, stream[4] = {0, 1, 0, 0};
    graph_hb hb;
    char err[256];
    int from = -1, to = -1;
    /* no wait at all: both crossing edges uncovered, the first reported */
    assert_int_equal(
        graph_hb_build(&hb, &(graph_hb_order){4, order, stream, 2, NULL, 0}, err, sizeof err), 0);
    assert_int_equal(graph_hb_uncovered(&g, &hb, &from, &to), 2);
    assert_int_equal(from, 0);
    assert_int_equal(to, 1);
    assert_false(graph_hb_before(&hb, 0, 1));
    assert_true(graph_hb_before(&hb, 0, 2)); /* same stream */
    graph_hb_free(&hb);
    /* one of the two waits */
    int w1[2] = {0, 1};
    assert_int_equal(
        graph_hb_build(&hb, &(graph_hb_order){4, order, stream, 2, w1, 1}, err, sizeof err), 0);
    assert_int_equal(graph_hb_uncovered(&g, &hb, &from, &to), 1);
    assert_int_equal(from, 1);
    assert_int_equal(to, 2);
    graph_hb_free(&hb);
    /* both: covered, and transitively 0 before 3 through stream 1 */
    int w2[4] = {0, 1, 1, 2};
    assert_int_equal(
        graph_hb_build(&hb, &(graph_hb_order){4, order, stream, 2, w2, 2}, err, sizeof err), 0);
    assert_int_equal(graph_hb_uncovered(&g, &hb, &from, &to), 0);
    assert_true(graph_hb_before(&hb, 1, 3));
    assert_false(graph_hb_before(&hb, 3, 1));
    graph_hb_free(&hb);
    /* a wait against the schedule is refused */
    int bad[2] = {2, 1};
    assert_int_equal(
        graph_hb_build(&hb, &(graph_hb_order){4, order, stream, 2, bad, 1}, err, sizeof err), -1);
    assert_non_null(strstr(err, "does not come before"));
    graph_free(&g);
    fe_free(&m);
}

/* a's reader on stream 1 ends nothing the compute stream waits for: the
 * buffer d, made later on stream 0, may not take a's address until a wait
 * orders that reader before d's maker. */
static void test_reuse_across_streams(void **state) {
    (void)state;
    tg *t = tg_new();
    tg_input(t, "x", "64x64");
    tg_node(t, "", "Relu", "x", "a");
    tg_node(t, "", "Neg", "a", "b");
    tg_node(t, "", "Sigmoid", "a", "c");
    tg_node(t, "", "Tanh", "c", "d");
    tg_value(t, "a", "64x64");
    tg_value(t, "c", "64x64");
    tg_output(t, "b", "64x64");
    tg_output(t, "d", "64x64");
    fe_model m;
    graph g;
    streams_load(t, &m, &g);
    int relu = streams_op(&m, "a"), neg = streams_op(&m, "b"), sig = streams_op(&m, "c"),
        tanh_ = streams_op(&m, "d");
    int order[4] = {relu, neg, sig, tanh_}, stream[4] = {0, 1, 0, 0};
    int sa = g.storage_of[fe_find_value(&m, "a")], sd = g.storage_of[fe_find_value(&m, "d")];
    int32_t start[8], end[8], xend[8];
    assert_true(g.n_storages <= 8);
    graph_lifetimes(&g, order, start, end);
    assert_true(end[sa] < start[sd]); /* one stream: a and d may share */
    char err[256];
    for (int with = 0; with < 2; with++) {
        int waits[4] = {relu, neg, neg, tanh_};
        graph_hb hb;
        assert_int_equal(
            graph_hb_build(&hb, &(graph_hb_order){g.n_ops, order, stream, 2, waits, with ? 2 : 1},
                           err, sizeof err),
            0);
        int from, to;
        assert_int_equal(graph_hb_uncovered(&g, &hb, &from, &to), 0);
        graph_hb_touches tt;
        graph_hb_touches_of_graph(&g, &hb, &tt);
        assert_int_equal(graph_hb_may_share(&hb, &tt, sa, sd), with);
        assert_int_equal(graph_hb_ordered(&hb, &tt, sa, sd), with);
        assert_false(graph_hb_ordered(&hb, &tt, sd, sa));
        graph_hb_extend(&hb, &tt, end, xend);
        /* without the wait a lives on (for the layout) past d's start */
        if (with)
            assert_int_equal(xend[sa], end[sa]);
        else
            assert_true(xend[sa] >= start[sd]);
        for (size_t s = 0; s < g.n_storages; s++) assert_true(xend[s] >= end[s]);
        graph_hb_touches_free(&tt);
        graph_hb_free(&hb);
    }
    graph_free(&g);
    fe_free(&m);
}

/* A read of x on stream 1 and, after it in the file, an in-place write of x
 * on stream 0: the mutation order is an ordering edge a wait must cover. */
static void test_inplace_other_stream(void **state) {
    (void)state;
    tg *t = tg_new();
    tg_input(t, "x", "64x64");
    tg_input(t, "one", "64x64");
    tg_node(t, "", "Neg", "x", "r");
    int w = tg_node(t, "aten", "add_", "x,one", "x2");
    tg_alias(t, w, "0", 1);
    tg_output(t, "r", "64x64");
    tg_output(t, "x2", "64x64");
    fe_model m;
    graph g;
    streams_load(t, &m, &g);
    int neg = streams_op(&m, "r"), add = streams_op(&m, "x2");
    int order[2] = {neg, add}, stream[2] = {1, 0};
    graph_hb hb;
    char err[256];
    int from = -1, to = -1;
    assert_int_equal(
        graph_hb_build(&hb, &(graph_hb_order){2, order, stream, 2, NULL, 0}, err, sizeof err), 0);
    assert_int_equal(graph_hb_uncovered(&g, &hb, &from, &to), 1);
    assert_int_equal(from, neg);
    assert_int_equal(to, add);
    graph_hb_free(&hb);
    int waits[2] = {neg, add};
    assert_int_equal(
        graph_hb_build(&hb, &(graph_hb_order){2, order, stream, 2, waits, 1}, err, sizeof err), 0);
    assert_int_equal(graph_hb_uncovered(&g, &hb, &from, &to), 0);
    graph_hb_free(&hb);
    graph_free(&g);
    fe_free(&m);
}

/* ------------------------------------------------ random orders against brute force */

static uint64_t streams_rand_state;
static uint32_t streams_rand(void) {
    streams_rand_state = streams_rand_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(streams_rand_state >> 33);
}

#define RN 14 /* ops */
#define RB 10 /* buffers */

/* The closure of same-stream order and waits, by brute force: before[a][b]. */
static void streams_brute_hb(const int *order, const int *stream_of_op, const int *waits,
                             size_t n_waits, bool before[RN][RN]) {
    memset(before, 0, sizeof(bool) * RN * RN);
    for (int i = 0; i < RN; i++)
        for (int j = i + 1; j < RN; j++)
            if (stream_of_op[order[i]] == stream_of_op[order[j]]) before[order[i]][order[j]] = 1;
    for (size_t k = 0; k < n_waits; k++) before[waits[2 * k]][waits[2 * k + 1]] = 1;
    for (int k = 0; k < RN; k++)
        for (int i = 0; i < RN; i++)
            for (int j = 0; j < RN; j++)
                if (before[i][k] && before[k][j]) before[i][j] = 1;
}

/* Stops the walk at the first clash. */
static int streams_clash(void *ctx, int earlier, int later, int n, int f) {
    (void)ctx, (void)earlier, (void)later, (void)n, (void)f;
    return 1;
}

static void test_random_against_brute_force(void **state) {
    (void)state;
    streams_rand_state = 36;
    for (int round = 0; round < 400; round++) {
        int ns = 1 + (int)(streams_rand() % 3);
        int order[RN], stream[RN], stream_of_op[RN], step_of[RN];
        for (int i = 0; i < RN; i++) order[i] = i;
        for (int i = RN - 1; i > 0; i--) {
            int j = (int)(streams_rand() % (uint32_t)(i + 1)), x = order[i];
            order[i] = order[j], order[j] = x;
        }
        for (int s = 0; s < RN; s++) {
            stream[s] = (int)(streams_rand() % (uint32_t)ns);
            stream_of_op[order[s]] = stream[s];
            step_of[order[s]] = s;
        }
        int waits[2 * RN];
        size_t n_waits = streams_rand() % RN;
        for (size_t k = 0; k < n_waits; k++) {
            int a = (int)(streams_rand() % (RN - 1));
            int b = a + 1 + (int)(streams_rand() % (uint32_t)(RN - 1 - a));
            waits[2 * k] = order[a], waits[2 * k + 1] = order[b];
        }
        graph_hb hb;
        char err[256];
        assert_int_equal(graph_hb_build(&hb,
                                        &(graph_hb_order){RN, order, stream, ns, waits, n_waits},
                                        err, sizeof err),
                         0);
        bool before[RN][RN];
        streams_brute_hb(order, stream_of_op, waits, n_waits, before);
        for (int a = 0; a < RN; a++)
            for (int b = 0; b < RN; b++) assert_int_equal(graph_hb_before(&hb, a, b), before[a][b]);
        /* buffers: a run of 1-3 ops each, lifetimes from their touchers */
        size_t tstart[RB + 1] = {0};
        int tops[RB * 3];
        uint64_t size[RB];
        int32_t start[RB], end[RB], xend[RB];
        for (int b = 0; b < RB; b++) {
            int k = 1 + (int)(streams_rand() % 3);
            start[b] = RN, end[b] = -1;
            for (int i = 0; i < k; i++) {
                int op = (int)(streams_rand() % RN);
                tops[tstart[b] + (size_t)i] = op;
                if (step_of[op] < start[b]) start[b] = step_of[op];
                if (step_of[op] > end[b]) end[b] = step_of[op];
            }
            tstart[b + 1] = tstart[b] + (size_t)k;
            size[b] = 1 + streams_rand() % 100;
        }
        graph_hb_touches tt;
        graph_hb_touches_build(&hb, RB, tstart, tops, &tt);
        bool ordered[RB][RB];
        for (int a = 0; a < RB; a++)
            for (int b = 0; b < RB; b++) {
                bool all = true;
                int f = -1;
                for (size_t k = tstart[b]; k < tstart[b + 1]; k++)
                    if (f < 0 || step_of[tops[k]] < step_of[f]) f = tops[k];
                for (size_t k = tstart[a]; k < tstart[a + 1]; k++) all &= before[tops[k]][f];
                ordered[a][b] = all;
                assert_int_equal(graph_hb_ordered(&hb, &tt, a, b), all);
            }
        graph_hb_extend(&hb, &tt, end, xend);
        layout_buffer lb[RB];
        for (int b = 0; b < RB; b++) lb[b] = (layout_buffer){size[b], start[b], xend[b]};
        uint64_t off[RB];
        uint64_t h = layout_llfb(lb, RB, 1, off);
        /* conflicts, by brute force: never at overlapping addresses */
        bool conflict[RB][RB];
        for (int a = 0; a < RB; a++)
            for (int b = 0; b < RB; b++) {
                bool live = start[a] <= end[b] && start[b] <= end[a];
                conflict[a][b] = a != b && (live || !(ordered[a][b] || ordered[b][a]));
                bool addr = off[a] < off[b] + size[b] && off[b] < off[a] + size[a];
                if (conflict[a][b] && addr)
                    fail_msg("round %d: buffers %d and %d conflict but share addresses", round, a,
                             b);
            }
        /* the clique bound: at most the heaviest clique (brute force), which is
         * at most the layout's height */
        uint64_t best = 0;
        for (unsigned mask = 1; mask < (1u << RB); mask++) {
            uint64_t w = 0;
            bool ok = true;
            for (int a = 0; a < RB && ok; a++) {
                if (!(mask >> a & 1)) continue;
                w += size[a];
                for (int b = a + 1; b < RB && ok; b++)
                    if (mask >> b & 1) ok = conflict[a][b];
            }
            if (ok && w > best) best = w;
        }
        for (int at = 0; at < RN; at++) {
            uint64_t lbd = graph_hb_clique_bound(
                &hb, &tt, &(graph_hb_buffers){size, start, end, NULL}, at, 1000, NULL);
            assert_true(lbd <= best);
        }
        assert_true(best <= h);
        assert_int_equal(graph_hb_check_layout(&hb, &tt,
                                               &(graph_hb_buffers){size, start, NULL, off},
                                               streams_clash, NULL),
                         0);
        /* random offsets: the exact check finds a clash exactly when some pair
         * sharing an address is unordered */
        for (int b = 0; b < RB; b++) off[b] = streams_rand() % 200;
        bool clash = false;
        for (int a = 0; a < RB; a++)
            for (int b = a + 1; b < RB; b++)
                if (off[a] < off[b] + size[b] && off[b] < off[a] + size[a] &&
                    !(ordered[a][b] || ordered[b][a]))
                    clash = true;
        int found = graph_hb_check_layout(&hb, &tt, &(graph_hb_buffers){size, start, NULL, off},
                                          streams_clash, NULL);
        assert_int_equal(found, clash);
        graph_hb_touches_free(&tt);
        graph_hb_free(&hb);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_missing_wait),
        cmocka_unit_test(test_reuse_across_streams),
        cmocka_unit_test(test_inplace_other_stream),
        cmocka_unit_test(test_random_against_brute_force),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
