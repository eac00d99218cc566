/* planner/cmd/compare.h — `roamc MODEL --compare`. */
#ifndef ROAMC_CMD_COMPARE_H
#define ROAMC_CMD_COMPARE_H

#include <stdio.h>

#include "planner.h"

/* What --compare is asked: the graph g of the model at model_path, planned
 * from the options base (each method sets its own order and layout), the
 * files to write, and where the comparison goes. */
typedef struct plan_compare_request {
    const graph *g;
    const planner_options *base;
    const char *model_path;
    const planner_files *files;
    int json;  /* JSON rather than the table */
    FILE *out; /* NULL: nothing printed */
} plan_compare_request;

/* `roamc MODEL --compare`: plans r->g as PyTorch (program order, allocator
 * replay), Heuristics (LESCEA, LLFB), ILP (whole-graph order and layout
 * ILPs) and ROAM, and prints one table (or JSON when r->json != 0) to
 * r->out.  Writes the ROAM plan (and its tree) and the PyTorch and ROAM
 * layouts to the files asked for, all or nothing.  Returns 0, or -1 with a
 * message. */
int plan_compare(const plan_compare_request *r, char *err, size_t errlen);

#endif
