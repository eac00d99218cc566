/* ilp/ilp_order.h — the GLPK model of a leaf's operator order.
 *
 * Order of a leaf (ilp_order_leaf): a time-indexed model in the style of
 * MODeL, written with cumulative variables.  Steps 0..n-1 of the leaf; for
 * each op v and step t in asap(v)..alap(v)-1 a binary D[v,t] "v has run by
 * step t" (0 before asap, 1 from alap on: constants, not columns); for each
 * storage j and step t where it may be live a variable p[j,t] "j is live at
 * t" in [0,1].  Rows: sum_v D[v,t] = t + 1 (one op per step);
 * D[v,t-1] <= D[v,t]; D[w,t] <= D[u,t-1] for each edge u -> w;
 * p[j,t] >= D[maker,t] - D[u,t-1] for each op u that touches j (1 in place
 * of D[maker,t] for a live_in storage); p[j,t] >= D[maker,t] for a
 * live_out one; peak >= base + sum_j size_j p[j,t] for every t, the
 * objective.  "v runs at t" is D[v,t] - D[v,t-1]: the same integer
 * solutions and the same LP relaxation as the model with a binary per op
 * and step whose rows write those prefix sums out, but every row except the
 * step and peak rows has at most 3 nonzeros (alexnet's whole-graph model:
 * 0.30M nonzeros instead of 8.7M).  max_vars bounds the columns, and the
 * rows at 4 * max_vars.
 *
 * Determinism: the search is bounded by a count of branch-and-bound nodes,
 * not by time, so a leaf gives the same answer on any machine load or
 * thread count.  The time limit is only a backstop for pathological LPs
 * (and the bound of the whole-graph baseline); when it fires the result
 * says so (ILP_TIME) and may depend on timing.
 *
 * Time: the whole call keeps to time_limit, not only GLPK's solvers: the
 * model is built under it (a whole-graph model of millions of nonzeros
 * takes seconds), the root LP does not start when GLPK's set-up of it (not
 * under GLPK's tm_lim) would not fit, and the branch and bound stops
 * before a step (a node's LP, a branching) that is not expected to end in
 * time.  On alexnet's whole-graph model the call ended at most 0.03 s
 * after its deadline in the runs measured (8.7M nonzeros, the former
 * formulation), and before it with this one (--time-limit 2, 5, 30).
 *
 * Thread safety: each call builds its own glp_prob and silences GLPK's
 * terminal output for the calling thread; a thread that called
 * ilp_order_leaf should call ilp_thread_cleanup before it exits.
 */
#ifndef ROAMC_ILP_ORDER_H
#define ROAMC_ILP_ORDER_H

#include <stddef.h>
#include <stdint.h>

#include "ilp_layout.h" /* ilp_thread_cleanup */
#include "leaf.h"

typedef enum ilp_status {
    ILP_OPTIMAL,   /* proven optimal, or met the lower bound or the goal */
    ILP_BUDGET,    /* node budget spent: best order found so far */
    ILP_TIME,      /* time backstop fired: best order found so far */
    ILP_TOO_LARGE, /* the model would exceed max_vars: the warm start is returned */
    ILP_FAILED,    /* GLPK failed: the warm start is returned */
} ilp_status;

typedef struct ilp_order_options {
    long node_budget;  /* branch-and-bound nodes to explore at most */
    double time_limit; /* seconds from the call, for all of it; <= 0: none */
    size_t max_vars;   /* larger models are not built (ILP_TOO_LARGE) */
    uint64_t goal;     /* stop once an order's peak is at most this (0: the leaf's
                         * lower bound); the caller's own bound, e.g. a peak that
                         * other leaves reach anyway */
} ilp_order_options;

typedef struct ilp_order_result {
    ilp_status status;
    uint64_t peak; /* leaf_peak of the returned order */
    size_t n_vars, n_rows;
    long nodes; /* branch-and-bound nodes explored */
} ilp_order_result;

/* Orders leaf L to minimize its peak.  warm: a valid leaf order (local
 * indices) to start from.  Writes a valid leaf order, never worse than warm,
 * into order and fills *r. */
void ilp_order_leaf(const leaf_graph *L, const int *warm, const ilp_order_options *o, int *order,
                    ilp_order_result *r);

#endif
