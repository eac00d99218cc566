/* glpk_backstop.h — a time backstop for GLPK's branch and bound, shared by
 * the order model (ilp_order.c) and the layout model (ilp_layout.c).
 * Private to ilp/: no other part includes it.
 *
 * GLPK checks tm_lim once per node, and neither a node's LP (its set-up is
 * not under tm_lim: seconds on a model of millions of nonzeros) nor the
 * branching (Driebeck-Tomlin: a tableau row per candidate) can be cut
 * short.  So the callback stops the search at a call when the work that
 * follows is not expected to end before the deadline: as long as the
 * longest step seen after a call of the same reason, else the longest step
 * seen at all; before the first branching, GLPK_BRANCH_ROW_COST root LP
 * iterations per fractional variable. */
#ifndef ROAMC_GLPK_BACKSTOP_H
#define ROAMC_GLPK_BACKSTOP_H

#include <stdbool.h>
#include <stdint.h>

#include <glpk.h>

/* Root LP iterations a branching costs per fractional variable (a tableau
 * row each): measured 1.8 (release build) and 7 (ASan, whose malloc GLPK's
 * calls go through) on alexnet's layout model, 1032 candidates. */
#define GLPK_BRANCH_ROW_COST 8.0

typedef struct glpk_backstop {
    double deadline; /* seconds on the caller's monotonic clock */
    double guess;    /* the longest step seen (at first: the caller's estimate) */
    double after[8]; /* per reason (GLP_IROWGEN..GLP_IPREPRO are 1..7): the
                           * longest step seen after it, 0: none yet */
    double last;     /* the clock at the previous call, 0: none */
    int last_reason;
    double per_candidate; /* seconds per fractional variable at the first branching */
    bool fired;           /* the search was stopped by the backstop */
} glpk_backstop;

/* GLPK's tm_lim (milliseconds) for seconds: at least floor_ms, and
 * INT32_MAX from 2e6 s on, where the milliseconds would overflow an int.
 * Example: glpk_tm_lim(0.0004, 1) == 1, glpk_tm_lim(2.5, 1) == 2500. */
static inline int glpk_tm_lim(double seconds, int floor_ms) {
    if (seconds > 2e6) return INT32_MAX;
    return seconds * 1000.0 >= floor_ms ? (int)(seconds * 1000.0) : floor_ms;
}

/* Sets the estimates from the root LP: a node's step takes about guess
 * seconds; the root LP took lp_seconds for lp_iterations. */
static inline void glpk_backstop_calibrate(glpk_backstop *b, double guess, double lp_seconds,
                                           int lp_iterations) {
    b->guess = guess;
    b->per_candidate = GLPK_BRANCH_ROW_COST * lp_seconds / (lp_iterations > 0 ? lp_iterations : 1);
}

/* Call first thing in the glp_intopt callback, with the clock's now: stops
 * the search (glp_ios_terminate) when the next step would end past the
 * deadline, and then sets b->fired. */
static inline void glpk_backstop_check(glpk_backstop *b, glp_tree *tree, double now) {
    int reason = glp_ios_reason(tree);
    int slot = reason >= 1 && reason <= 7 ? reason : 0;
    if (b->last > 0) {
        double step = now - b->last;
        if (step > b->after[b->last_reason]) b->after[b->last_reason] = step;
        if (step > b->guess) b->guess = step;
    }
    b->last = now, b->last_reason = slot;
    if (b->fired) return;
    double next = b->after[slot] > 0 ? b->after[slot] : b->guess;
    if (reason == GLP_IBRANCH && !(b->after[slot] > 0)) {
        int nc = glp_get_num_cols(glp_ios_get_prob(tree)), nf = 0;
        for (int j = 1; j <= nc; j++) nf += glp_ios_can_branch(tree, j);
        if (nf * b->per_candidate > next) next = nf * b->per_candidate;
    }
    if (now + next > b->deadline) {
        b->fired = true;
        glp_ios_terminate(tree);
    }
}

#endif
