/* The one way a command reads its model: load (or derive the training step)
 * and build the graph (planner.h, planner_model_load). */
#include "planner.h"

#include <stdlib.h>

int planner_model_load(const char *path, const fe_options *fopt, const fe_train_options *train,
                       uint64_t align, fe_model *m, graph *g, char **summary, char *err,
                       size_t errlen) {
    char *text = NULL;
    if (summary) *summary = NULL;
    int rc = train ? fe_train(path, fopt, train, m, &text, err, errlen)
                   : fe_load(path, fopt, m, err, errlen);
    if (rc) return -1;
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
