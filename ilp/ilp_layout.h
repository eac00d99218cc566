/* ilp/ilp_layout.h — the GLPK model of a layout (offsets of buffers).
 *
 * The layout model (paper section IV-B; step 3 of layout_exact in
 * layout/layout_exact.c, and the whole of layout_glpk_exact).
 *
 * Offsets of buffers with fixed sizes and lifetimes: an integer offset k_a
 * per buffer, the height H, and per pair of buffers live at the same time a
 * binary z (big-M disjunction: one below the other); minimize H.  Seeded
 * with the caller's incumbent (its height is also the big M and H's upper
 * bound), stopped as soon as an incumbent meets the lower bound.
 *
 * It says nothing of graphs, leaves or ONNX: it is declared on plain data (sizes in units, lifetimes, pairs, the lower
 * bound, a work budget, a deadline) with no layout.h type: layout/ links
 * roamc_ilp and calls it, ilp/ knows nothing of layout/, so the data flows
 * one way and the headers have no cycle; layout_exact translates its
 * reduced problem (units of lay_reduce) to these arrays and back.
 *
 * Determinism: a branch-and-bound node (the root LP counts as one) costs
 * rows^2.5 / ILP_LAYOUT_NODE_DIV work units (how the time of GLPK's LP
 * re-solves grows, measured from 900 to 5000 rows; about 10^7 units a
 * second, as layout_search's nodes), charged before GLPK solves it, so the
 * search stops at the same node on every machine; the deadline is only a
 * backstop (glpk_backstop.h) and *timed_out says when it fired. */
#ifndef ROAMC_ILP_LAYOUT_H
#define ROAMC_ILP_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

/* Frees GLPK's per-thread state of the calling thread (either model). */
void ilp_thread_cleanup(void);

#define ILP_LAYOUT_NODE_DIV 600

typedef struct ilp_layout_pair {
    size_t i, j; /* buffer indices, i < j */
} ilp_layout_pair;

/* The pairs of buffers whose closed lifetimes [start[a], end[a]] (steps)
 * overlap, each with i < j, by a sweep over start steps: O(n log n +
 * pairs).  Returns them (the caller frees; *np of them), or NULL with
 * *np = SIZE_MAX when there are more than max.  Never fails otherwise. */
ilp_layout_pair *ilp_layout_pairs(const int32_t *start, const int32_t *end, size_t n, size_t max,
                                  size_t *np);

typedef struct ilp_layout_problem {
    size_t n;                     /* buffers */
    const uint64_t *size;         /* [n] sizes in units */
    const ilp_layout_pair *pairs; /* [np] the buffers that may not overlap */
    size_t np;
    uint64_t lower_bound;      /* no layout is lower than this (units) */
    const uint64_t *incumbent; /* [n] a valid layout, offsets in units */
} ilp_layout_problem;

typedef enum ilp_layout_status {
    ILP_LAYOUT_NONE,    /* no layout from GLPK: offsets untouched */
    ILP_LAYOUT_FOUND,   /* offsets hold GLPK's best layout (the caller validates it) */
    ILP_LAYOUT_OPTIMAL, /* as FOUND, and GLPK proved it optimal */
} ilp_layout_status;

/* Solves p with GLPK, spending at most *work (decreased by what it spends)
 * before deadline (roamc_now() seconds; INFINITY: none).  Does nothing when
 * n is 0 or *work is below one node.  Sets *timed_out to 1 when the
 * deadline cut it (also when less than 0.05 s was left at the call).
 * Writes offsets in units into offsets[n] unless it returns
 * ILP_LAYOUT_NONE.  Never fails otherwise.  Thread-safe as the order model
 * (ilp_thread_cleanup). */
ilp_layout_status ilp_layout_solve(const ilp_layout_problem *p, uint64_t *work, double deadline,
                                   int *timed_out, uint64_t *offsets);

#endif
