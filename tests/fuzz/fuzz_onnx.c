/* libFuzzer target: ONNX bytes -> fe_load_bytes -> graph_build, then the
 * cheap consumers of the graph that `roamc MODEL.onnx` runs on every model
 * (program order, LESCEA, liveness, peaks, lower bounds) and, for small
 * graphs, a whole plan (program order, best-fit layout, validated).
 *
 * Built only with -DROAMC_FUZZ=ON and clang (tests/fuzz/CMakeLists.txt). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "frontend.h"
#include "graph.h"
#include "leaf.h"
#include "planner.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[2048];
    fe_model m;
    if (fe_load_bytes("fuzz.onnx", (fe_bytes){data, size}, NULL, &m, err, sizeof err)) return 0;
    graph g;
    if (graph_build(&m, 512, &g, err, sizeof err)) {
        fe_free(&m);
        return 0;
    }
    int *order = xmallocarray(g.n_ops, sizeof *order);
    graph_program_order(&g, order);
    (void)graph_check_schedule(&g, order, err, sizeof err);
    (void)graph_peak(&g, order, NULL, NULL);
    leaf_lescea_graph(&g, order);
    (void)graph_peak(&g, order, NULL, NULL);
    free(order);
    (void)graph_lower_bound(&g);
    (void)graph_persistent_bytes(&g);
    if (g.n_ops <= 64) {
        (void)graph_order_lower_bound(&g, 64);
        planner_options opt = {.align = 512,
                               .order = PLANNER_ORDER_PROGRAM,
                               .layout = PLANNER_LAYOUT_BESTFIT,
                               .node_limit = PLANNER_DEFAULT_NODE_LIMIT,
                               .delay_radius = PLANNER_DEFAULT_DELAY_RADIUS,
                               .threads = 1,
                               .time_limit = 5};
        plan p;
        if (plan_build(&g, &opt, &p, err, sizeof err) == 0) plan_free(&p);
    }
    graph_free(&g);
    fe_free(&m);
    return 0;
}
