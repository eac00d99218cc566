/* planner/report/compare.h — `roamc MODEL --compare`: the engine (plan every
 * method) and the report, apart, so that the library (planner/api, the
 * option compare) runs the comparison and its callers print it. */
#ifndef ROAMC_REPORT_COMPARE_H
#define ROAMC_REPORT_COMPARE_H

#include <stdio.h>

#include "files.h"
#include "planner.h"

/* The most rows a comparison holds (planner_n_methods is at most this). */
#define PLAN_COMPARE_MAX_ROWS 8

/* One row: one method's plan of the graph. */
typedef struct plan_compare_row {
    const planner_method *m;
    plan p;
    double seconds;
    uint64_t actual; /* what this method needs: reserved memory for PyTorch */
    char note[768];  /* what fell back, what ran out of time; "" for nothing */
} plan_compare_row;

/* The graph g planned by every method of planner_methods, in their order:
 * PyTorch first, ROAM last (rows[n - 1]).  g is the caller's and must
 * outlive the comparison (the plans point into it). */
typedef struct plan_comparison {
    const graph *g;
    size_t n;
    plan_compare_row rows[PLAN_COMPARE_MAX_ROWS];
} plan_comparison;

/* Plans g as PyTorch (program order, allocator replay), Heuristics
 * (LESCEA, LLFB), ILP (whole-graph order and layout ILPs) and ROAM, each
 * from the options base with its method's order and layout, sharing what
 * is left of base->deadline among them.  Fills *c (which the caller frees
 * with plan_comparison_free).  Returns 0, or -1 with a message (c then
 * holds nothing, and freeing it is harmless). */
int plan_compare_run(const graph *g, const planner_options *base, plan_comparison *c, char *err,
                     size_t errlen);
/* Writes the ROAM plan (and its tree and buffers) and the picture of
 * PyTorch's and ROAM's plans to the files asked for, all or nothing; the
 * plan names model_path.  Returns 0, or -1 with a message. */
int plan_compare_write(const plan_comparison *c, const char *model_path, const planner_files *files,
                       char *err, size_t errlen);
/* Prints the comparison to out: the table (json 0; with files, the files
 * written), or one JSON object (json != 0). */
void plan_compare_report(FILE *out, const plan_comparison *c, const char *model_path,
                         const planner_files *files, int json);
/* The order and layout row w ran (static or w's storage): its method's,
 * or the heuristic the ILPs fell back to. */
const char *plan_compare_order_ran(const plan_compare_row *w);
const char *plan_compare_layout_ran(const plan_compare_row *w);
/* Row i's fragmentation (actual over theoretical) and saving in actual
 * peak against PyTorch's row, in percent, as the report gives them. */
double plan_compare_fragmentation(const plan_comparison *c, size_t i);
double plan_compare_vs_pytorch(const plan_comparison *c, size_t i);
void plan_comparison_free(plan_comparison *c);

#endif
