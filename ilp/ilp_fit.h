/* ilp/ilp_fit.h — which values a step drops to fit a budget, as a GLPK
 * MILP on plain data (issue 27; planner/fit/ builds it from a plan).
 *
 * Each candidate value may be kept or dropped by one of its choices
 * (recompute, offload).  A choice frees `size` bytes on the rows of its gap
 * [lo, hi), adds `temp` bytes on row `temp_row` (what a recompute makes
 * besides the value, where it runs) and costs `cost` seconds.  A chain
 * (choice c reads candidate u where it runs) costs more when u is dropped
 * too: then c also recomputes u, for `cost` seconds and `temp` bytes on
 * `row`.  Rows are the plan's steps, merged where no gap starts or ends;
 * need[r] is what must be freed on row r (its live bytes less the target).
 *
 *   minimize  sum cost_c x_c + sum cost_h z_h
 *   subject   sum over candidates of its x_c <= 1
 *             z_h >= x_c + (x of u's choices) - 1          for chain h = (c, u)
 *             sum_{c: lo_c <= r < hi_c} size_c x_c
 *               - sum_{c: temp_row_c = r} temp_c x_c
 *               - sum_{h: row_h = r} temp_h z_h >= need[r]  for every row r
 *
 * It says nothing of graphs or plans.  Determinism: as the layout model,
 * a branch-and-bound node costs work units charged before GLPK solves it,
 * so the search stops at the same node on every machine; the deadline is a
 * backstop (glpk_backstop.h) and the result says when it fired. */
#ifndef ROAMC_ILP_FIT_H
#define ROAMC_ILP_FIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ilp_fit_choice {
    size_t candidate; /* < n_candidates */
    double cost;      /* seconds it adds */
    uint64_t size;    /* bytes it frees on rows [lo, hi) */
    size_t lo, hi;
    size_t temp_row; /* where its temporaries live (ignored when temp is 0) */
    uint64_t temp;
} ilp_fit_choice;

typedef struct ilp_fit_chain {
    size_t choice;    /* the recompute that reads u */
    size_t candidate; /* u */
    double cost;      /* seconds to recompute u as well */
    size_t row;
    uint64_t temp;
} ilp_fit_chain;

typedef struct ilp_fit_problem {
    size_t n_candidates;
    const ilp_fit_choice *choices;
    size_t n_choices;
    const ilp_fit_chain *chains;
    size_t n_chains;
    const double *need; /* [n_rows] bytes to free on each row */
    size_t n_rows;
} ilp_fit_problem;

typedef enum ilp_fit_status {
    ILP_FIT_NONE,       /* no solution: infeasible, or none found within the work */
    ILP_FIT_FOUND,      /* chosen holds a feasible solution (work or time ran out) */
    ILP_FIT_OPTIMAL,    /* chosen holds a proven optimum of the model */
    ILP_FIT_INFEASIBLE, /* proven: no choice of drops meets every row */
} ilp_fit_status;

typedef struct ilp_fit_result {
    ilp_fit_status status;
    double objective; /* seconds of the solution (status FOUND or OPTIMAL) */
    double bound;     /* a lower bound of the optimum: the LP relaxation's, or the optimum */
    bool timed_out;   /* the deadline cut the search */
    long nodes;       /* branch-and-bound nodes solved */
} ilp_fit_result;

/* Solves p within *work units (decreased by what it spends) before
 * deadline (roamc_now() seconds).  chosen[n_choices] gets 1 for each choice
 * taken (status FOUND or OPTIMAL), else is left untouched.  Never fails
 * otherwise.  Thread-safe as the other models (ilp_thread_cleanup). */
void ilp_fit_solve(const ilp_fit_problem *p, uint64_t *work, double deadline, unsigned char *chosen,
                   ilp_fit_result *r);

#endif
