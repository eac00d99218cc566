/* planner/cmd/compare.h — `roamc MODEL --compare`. */
#ifndef ROAMC_CMD_COMPARE_H
#define ROAMC_CMD_COMPARE_H

#include <stdio.h>

#include "planner.h"

/* `roamc MODEL --compare`: plans g as PyTorch (program order, allocator
 * replay), Heuristics (LESCEA, LLFB), ILP (whole-graph order and layout
 * ILPs) and ROAM, and prints one table (or JSON when json != 0) to out.
 * Writes the ROAM plan (and its tree) and the PyTorch and ROAM layouts to
 * the files asked for, all or nothing.  Returns 0, or -1 with a message. */
int plan_compare(const graph *g, const planner_options *base, const char *model_path,
                 const planner_files *files, int json, FILE *out, char *err, size_t errlen);

#endif
