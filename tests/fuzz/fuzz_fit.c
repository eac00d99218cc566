/* libFuzzer target: ONNX bytes through --fit's path.  The step editor
 * (frontend/edit.h) opens the bytes, writes them back unchanged and with a
 * clone of node 0 and an ai.roamc Offload/Reload pair, and the loader reads
 * what it wrote; a model that loads and builds is also fitted (fit_run, at
 * half its arena) when it is small.  Nothing here may crash, leak or write
 * bytes the loader then refuses for a reason of the editor's making.
 *
 * Built only with -DROAMC_FUZZ=ON and clang (tests/fuzz/CMakeLists.txt). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "edit.h"
#include "fit.h"
#include "frontend.h"
#include "graph.h"
#include "planner.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The editor on data: a round trip and a few edits, each result loaded. */
static void fuzz_edit(const uint8_t *data, size_t size) {
    char err[2048];
    fe_edit *e;
    if (fe_edit_open_bytes("fuzz.onnx", data, size, &e, err, sizeof err)) return;
    fe_edit_node_info n0;
    if (fe_edit_node(e, 0, &n0) && n0.n_outputs > 0 && n0.n_outputs <= 8) {
        char names[8][32];
        const char *outs[8];
        for (size_t k = 0; k < n0.n_outputs; k++) {
            snprintf(names[k], sizeof names[k], "fuzz.rc%zu", k);
            outs[k] = names[k];
        }
        fe_clone_spec c = {.node = 0,
                           .position = fe_edit_node_count(e),
                           .outputs = outs,
                           .n_outputs = n0.n_outputs,
                           .extra = {.name = "roamc_recompute", .type = FE_ATTR_STRING, .s = "x"}};
        (void)fe_edit_clone_node(e, &c, err, sizeof err);
        if (n0.outputs[0][0]) {
            const char *in = n0.outputs[0], *host = "fuzz.host", *back = "fuzz.back";
            fe_node_spec off = {.domain = "ai.roamc",
                                .op_type = "Offload",
                                .inputs = &in,
                                .n_inputs = 1,
                                .outputs = &host,
                                .n_outputs = 1};
            fe_node_spec rel = {.domain = "ai.roamc",
                                .op_type = "Reload",
                                .inputs = &host,
                                .n_inputs = 1,
                                .outputs = &back,
                                .n_outputs = 1};
            if (fe_edit_insert_node(e, 1, &off, err, sizeof err) == 0)
                (void)fe_edit_insert_node(e, 2, &rel, err, sizeof err);
        }
    }
    uint8_t *bytes;
    size_t len;
    fe_edit_bytes(e, &bytes, &len);
    fe_edit_free(e);
    fe_model m;
    if (fe_load_bytes("fuzz-edited.onnx", (fe_bytes){bytes, len}, NULL, &m, err, sizeof err) == 0)
        fe_free(&m);
    free(bytes);
}

/* --fit on a small model that loads: half its arena as the budget. */
static void fuzz_fit(const uint8_t *data, size_t size) {
    char err[2048];
    fe_model m;
    if (fe_load_bytes("fuzz.onnx", (fe_bytes){data, size}, NULL, &m, err, sizeof err)) return;
    graph g;
    if (graph_build(&m, 512, &g, err, sizeof err) == 0) {
        if (g.n_ops <= 64) {
            planner_options opt = {.align = 512,
                                   .order = PLANNER_ORDER_PROGRAM,
                                   .layout = PLANNER_LAYOUT_BESTFIT,
                                   .node_limit = PLANNER_DEFAULT_NODE_LIMIT,
                                   .delay_radius = PLANNER_DEFAULT_DELAY_RADIUS,
                                   .threads = 1,
                                   .time_limit = 5};
            plan p;
            if (plan_build(&g, &opt, &p, err, sizeof err) == 0) {
                fit_request r = {.step_name = "fuzz.onnx",
                                 .step_bytes = data,
                                 .step_len = size,
                                 .g = &g,
                                 .opt = &opt,
                                 .arena_budget = p.actual / 2,
                                 .mode = FIT_BOTH,
                                 .max_overhead = -1,
                                 .device = fit_device_find("h100"),
                                 .emit_name = "fuzz-fit.onnx"};
                fit_outcome o;
                (void)fit_run(&r, &o, err, sizeof err);
                fit_outcome_free(&o);
                plan_free(&p);
            }
        }
        graph_free(&g);
    }
    fe_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_edit(data, size);
    fuzz_fit(data, size);
    return 0;
}
