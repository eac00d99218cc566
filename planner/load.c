/* The one way a command reads its model: load (or derive the training step)
 * and build the graph (planner.h, planner_model_load). */
#include "planner.h"

#include <stdlib.h>

/* --emit-train: the derived model's bytes to path, all or nothing
 * (planner_output_set, as every file roamc writes).  0, or -1 with a
 * message. */
static int load_emit(const char *path, const uint8_t *bytes, size_t len, char *err, size_t errlen) {
    planner_output_set set = {0};
    planner_outputs_add(&set, "--emit-train", path);
    if (planner_outputs_open(&set, err, errlen)) return -1;
    int ok = fwrite(bytes, 1, len, set.slot[0].f) == len;
    if (planner_outputs_commit(&set, ok, err, errlen)) {
        if (!ok) roamc_errorf(err, errlen, "--emit-train %s: cannot write: I/O error", path);
        return -1;
    }
    return 0;
}

int planner_model_load(const char *path, const fe_options *fopt, const fe_train_options *train,
                       uint64_t align, fe_model *m, graph *g, char **summary, char *err,
                       size_t errlen) {
    char *text = NULL;
    uint8_t *derived = NULL;
    size_t len = 0;
    if (summary) *summary = NULL;
    int rc = train ? fe_train(path, fopt, train, m, &text, train->emit_path ? &derived : NULL, &len,
                              err, errlen)
                   : fe_load(path, fopt, m, err, errlen);
    if (rc) return -1;
    if (derived) {
        rc = load_emit(train->emit_path, derived, len, err, errlen);
        free(derived);
        if (rc) {
            fe_free(m);
            free(text);
            return -1;
        }
    }
    if (summary)
        *summary = text;
    else
        free(text);
    if (graph_build(m, align, g, err, errlen)) {
        fe_free(m);
        return -1;
    }
    return 0;
}
