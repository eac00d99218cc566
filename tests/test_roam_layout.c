/* test_roam_layout.c — ROAM's layout by concatenation (layout_roam) and the
 * layout groups of the subgraph tree (partition_layout_groups), cmocka.
 *
 * Every layout is checked by check_layout, an O(n^2) checker written apart
 * from layout_validate.  Random instances come from a fixed xorshift
 * generator.  ROAMC_MODELS_DIR (set by tests/CMakeLists.txt; argv[1]
 * overrides it) is the folder of the committed models: the end-to-end test
 * plans one with order roam and layout roam. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend.h"
#include "graph.h"
#include "ilp_layout.h"
#include "layout.h"
#include "partition.h"
#include "planner.h"

static const char *models_dir;

/* Independent checker: every pair with intersecting lifetimes is disjoint in
 * address, offsets aligned; returns the height. */
static uint64_t check_layout(const layout_buffer *b, size_t n, const uint64_t *off,
                             uint64_t align) {
    uint64_t h = 0;
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(off[i] % align, 0);
        if (b[i].size && off[i] + b[i].size > h) h = off[i] + b[i].size;
        for (size_t j = i + 1; j < n; j++) {
            if (!b[i].size || !b[j].size) continue;
            bool time = b[i].start <= b[j].end && b[j].start <= b[i].end;
            bool addr = off[i] < off[j] + b[j].size && off[j] < off[i] + b[i].size;
            if (time && addr)
                fail_msg("buffers %zu [%d,%d] @%llu+%llu and %zu [%d,%d] @%llu+%llu overlap", i,
                         b[i].start, b[i].end, (unsigned long long)off[i],
                         (unsigned long long)b[i].size, j, b[j].start, b[j].end,
                         (unsigned long long)off[j], (unsigned long long)b[j].size);
        }
    }
    return h;
}

/* Two nested subgraphs: the inner one runs while the outer one's
 * activation is live, between the outer one's forward and backward
 * temporaries.  Stacked per eq. 9, the inner layout starts on top of the
 * outer activation and shares addresses with the outer temporaries. */
static void test_nested_groups_share_addresses(void **state) {
    (void)state;
    layout_buffer b[] = {
        {100, 0, 10}, /* 0: outer activation */
        {50, 0, 1},   /* 1: outer forward temporary */
        {50, 9, 10},  /* 2: outer backward temporary */
        {80, 3, 7},   /* 3: inner activation */
        {40, 4, 5},   /* 4: inner temporary */
    };
    int group[] = {0, 0, 0, 1, 1};
    unsigned char low[] = {1, 0, 0, 1, 0};
    layout_roam_input in = {.group = group, .low = low, .n_groups = 2};
    uint64_t off[5];
    layout_roam_stats st;
    uint64_t h = layout_roam(b, 5, 1, &in, off, &st);
    assert_int_equal(check_layout(b, 5, off, 1), h);
    assert_int_equal(h, 220); /* the live-size bound: 100 + 80 + 40 */
    assert_int_equal(h, layout_live_peak(b, 5));
    assert_int_equal(off[0], 0);
    assert_int_equal(off[3], 100);    /* base = the outer activations (eq. 9) */
    assert_int_equal(off[1], off[3]); /* not live together: same addresses */
    assert_int_equal(st.groups, 2);
    assert_int_equal(st.low, 2);
    assert_int_equal(st.repaired, 0);
    assert_int_equal(st.leftovers, 0);
    assert_int_equal(st.fallback, 0);
    /* the default marks (NULL) find the same activations: they span the
     * gap between the forward and the backward side of each group */
    in.low = NULL;
    uint64_t off2[5];
    assert_int_equal(layout_roam(b, 5, 1, &in, off2, &st), 220);
    assert_int_equal(st.low, 2);
    assert_memory_equal(off, off2, sizeof off);
    /* filling around the activations cannot do better than the bound */
    in.fill = 1;
    assert_int_equal(layout_roam(b, 5, 1, &in, off2, &st), 220);
    assert_int_equal(check_layout(b, 5, off2, 1), 220);
}

/* Fill: a backward temporary of a group reuses the space of an activation
 * of the same group that is already freed, instead of sitting above all of
 * them (Fig. 8). */
static void test_fill_reuses_freed_activations(void **state) {
    (void)state;
    layout_buffer b[] = {
        {100, 0, 10}, /* 0: activation, freed last */
        {100, 1, 6},  /* 1: activation, freed at 6 */
        {100, 7, 9},  /* 2: backward temporary, after 1 is freed */
    };
    int group[] = {0, 0, 0};
    unsigned char low[] = {1, 1, 0};
    layout_roam_input in = {.group = group, .low = low, .n_groups = 1};
    uint64_t off[3];
    layout_roam_stats st;
    assert_int_equal(layout_roam(b, 3, 1, &in, off, &st), 300); /* strictly above the activations */
    assert_int_equal(st.stacked, 300);
    in.fill = 1;
    assert_int_equal(layout_roam(b, 3, 1, &in, off, &st), 200);
    assert_int_equal(check_layout(b, 3, off, 1), 200);
    assert_int_equal(off[2], off[1]);
}

/* Windows that are not nested: after stacking, the inner group's layout
 * collides with an outer temporary that is still live; the smaller,
 * shorter-lived buffer moves, and leftovers go last. */
static void test_conflicts_repaired(void **state) {
    (void)state;
    layout_buffer b[] = {
        {100, 0, 10}, /* 0: outer activation */
        {50, 0, 5},   /* 1: outer temporary, still live when the inner group starts */
        {60, 2, 8},   /* 2: inner activation: stacked at 100, meets 1 in [2, 5] */
        {10, 3, 4},   /* 3: inner temporary */
        {30, 0, 10},  /* 4: leftover */
        {20, 6, 7},   /* 5: leftover */
    };
    int group[] = {0, 0, 1, 1, -1, -1};
    unsigned char low[] = {1, 0, 1, 0, 0, 0};
    unsigned flags[] = {0, 0};
    layout_roam_input in = {.group = group, .low = low, .n_groups = 2, .group_flags = flags};
    uint64_t off[6];
    layout_roam_stats st;
    uint64_t h = layout_roam(b, 6, 8, &in, off, &st);
    assert_int_equal(check_layout(b, 6, off, 8), h);
    assert_true(h >= layout_live_peak(b, 6));
    assert_int_equal(st.repaired, 1);
    assert_int_equal(st.leftovers, 2);
    assert_int_equal(off[0], 0);
    assert_int_equal(off[2], 104); /* long-lived kept its stacked place (100 rounded to 8) */
    assert_true(off[1] != 104);    /* the temporary moved */
    /* a bottom group goes first whatever its window */
    int group2[] = {1, 1, 0, 0, -1, -1};
    unsigned flags2[] = {0, LAYOUT_ROAM_BOTTOM};
    in.group = group2, in.group_flags = flags2;
    h = layout_roam(b, 6, 8, &in, off, &st);
    assert_int_equal(check_layout(b, 6, off, 8), h);
    assert_int_equal(off[0], 0);
}

/* Random groups, marks and leftovers: always valid, never below the live
 * bound, deterministic. */
static uint64_t xs = 88172645463325252ULL;
static uint64_t rnd(uint64_t n) {
    xs ^= xs << 13, xs ^= xs >> 7, xs ^= xs << 17;
    return xs % n;
}

static void test_random_valid(void **state) {
    (void)state;
    for (int it = 0; it < 200; it++) {
        size_t n = 1 + rnd(60), ng = 1 + rnd(6);
        uint64_t align = it % 3 == 0 ? 1 : 64;
        layout_buffer *b = malloc(n * sizeof *b);
        int *group = malloc(n * sizeof *group);
        unsigned char *low = malloc(n);
        unsigned *flags = calloc(ng, sizeof *flags);
        uint64_t *off = malloc(n * sizeof *off), *off2 = malloc(n * sizeof *off2);
        for (size_t i = 0; i < n; i++) {
            int32_t s = (int32_t)rnd(40), len = (int32_t)rnd(it % 2 ? 40 : 8);
            b[i] = (layout_buffer){(rnd(10) == 0 ? 0 : 1 + rnd(1000)) * (align == 1 ? 1 : align), s,
                                   s + len};
            group[i] = (int)rnd(ng + 1) - 1;
            low[i] = rnd(3) == 0;
        }
        flags[0] = rnd(2) ? LAYOUT_ROAM_BOTTOM : 0;
        layout_roam_input in = {.group = group,
                                .low = it % 4 ? low : NULL,
                                .n_groups = ng,
                                .group_flags = flags,
                                .fill = it % 5 < 2};
        layout_roam_stats st;
        uint64_t h = layout_roam(b, n, align, &in, off, &st);
        assert_int_not_equal(h, UINT64_MAX);
        assert_int_equal(check_layout(b, n, off, align), h);
        assert_true(h >= layout_live_peak(b, n));
        assert_int_equal(st.fallback, 0);
        assert_int_equal(st.grouped + st.leftovers, n);
        assert_int_equal(layout_roam(b, n, align, &in, off2, &st), h);
        assert_memory_equal(off, off2, n * sizeof *off);
        free(b), free(group), free(low), free(flags), free(off), free(off2);
    }
}

/* A committed model: the groups follow the rule of partition.h, and the
 * plan with order roam and layout roam ran the tree-based layout, kept the
 * lower of it and the global layout, and is valid. */
static void test_model_groups_and_plan(void **state) {
    (void)state;
    if (!models_dir) {
        print_message("SKIP: no models folder given\n");
        return;
    }
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/mobilenet_v2_b1.onnx", models_dir);
    fe_model m;
    graph g;
    if (fe_load(path, NULL, &m, err, sizeof err)) fail_msg("%s", err);
    if (graph_build(&m, 512, &g, err, sizeof err)) fail_msg("%s", err);
    planner_options o = {
        .align = 512, .order = PLANNER_ORDER_ROAM, .layout = PLANNER_LAYOUT_ROAM, .threads = 2};
    plan p;
    if (plan_build(&g, &o, &p, err, sizeof err)) fail_msg("%s", err);
    assert_true(p.tree_layout.used);
    assert_true(p.tree_layout.groups > 1);
    assert_true(p.actual <= p.tree_layout.tree_height);
    assert_true(p.actual == p.tree_layout.global_height || p.actual == p.tree_layout.tree_height);
    assert_int_equal(plan_validate(&p, err, sizeof err), 0);

    assert_non_null(p.tree);
    const partition *P = p.tree;
    int *group = malloc(g.n_storages * sizeof *group);
    bool *act = malloc(g.n_storages * sizeof *act);
    partition_schedule sched = {.order = p.order, .start = p.start, .end = p.end};
    int ng = partition_layout_groups(&g, P, &sched, group, act);
    assert_true(ng >= 2);
    /* leaf of every op, from the tree */
    int *leaf = malloc(g.n_ops * sizeof *leaf);
    for (size_t v = 0; v < g.n_ops; v++) leaf[v] = -1;
    int nl = 0;
    for (size_t i = 0; i < P->n_nodes; i++)
        if (P->nodes[i].n_children == 0 && (i > 0 || P->n_nodes == 1)) {
            for (size_t k = 0; k < P->nodes[i].n_ops; k++) leaf[P->nodes[i].ops[k]] = nl;
            nl++;
        }
    assert_int_equal(ng, nl + 1);
    size_t shared = 0;
    for (size_t s = 0; s < g.n_storages; s++) {
        if (g.storages[s].persistent) {
            assert_int_equal(group[s], ng - 1);
            continue;
        }
        int c = p.order[p.start[s]], f = p.order[p.end[s]];
        int want = leaf[c] == leaf[f] ? leaf[c]
                   : !P->forward[c]   ? leaf[c]
                   : !P->forward[f]   ? leaf[f]
                                      : -1;
        assert_int_equal(group[s], want);
        assert_int_equal(act[s], P->forward[c] && !P->forward[f]);
        shared += leaf[c] != leaf[f];
    }
    print_message(
        "mobilenet_v2_b1: %d groups, %zu shared storages; tree %llu, global %llu, kept %s\n", ng,
        shared, (unsigned long long)p.tree_layout.tree_height,
        (unsigned long long)p.tree_layout.global_height, p.tree_layout.winner);
    free(group), free(act), free(leaf);
    plan_free(&p);
    graph_free(&g);
    fe_free(&m);
}

int main(int argc, char **argv) {
#ifdef ROAMC_MODELS_DIR
    models_dir = ROAMC_MODELS_DIR;
#endif
    if (argc > 1) models_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nested_groups_share_addresses),
        cmocka_unit_test(test_fill_reuses_freed_activations),
        cmocka_unit_test(test_conflicts_repaired),
        cmocka_unit_test(test_random_valid),
        cmocka_unit_test(test_model_groups_and_plan),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    ilp_thread_cleanup(); /* GLPK keeps an environment per thread */
    return rc;
}
