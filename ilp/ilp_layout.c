/* The layout model (step 3 of layout_exact, layout/layout_exact.c; see
 * ilp_layout.h for the model and its contract).
 *
 * GLPK keeps one environment per thread (it is built with thread-local
 * storage); each call makes and deletes its own glp_prob, so concurrent calls
 * from different threads do not interact.
 */
#include "ilp_layout.h"
#include "base.h" /* roamc_now, xmallocarray */
#include "glpk_backstop.h"

#include <glpk.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void ilp_thread_cleanup(void) {
    glp_free_env();
}

/* Sort record: a buffer by start step. */
typedef struct ilp_start {
    int64_t start;
    size_t a;
} ilp_start;

static int ilp_start_cmp(const void *pa, const void *pb) {
    const ilp_start *x = pa, *y = pb;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return (x->a > y->a) - (x->a < y->a);
}

ilp_layout_pair *ilp_layout_pairs(const int32_t *start, const int32_t *end, size_t n, size_t max,
                                  size_t *np) {
    ilp_layout_pair *pairs = xmallocarray(max, sizeof *pairs);
    ilp_start *order = xmallocarray(n, sizeof *order);
    size_t *live = xmallocarray(n, sizeof *live);
    size_t nlive = 0;
    *np = 0;
    for (size_t a = 0; a < n; a++) order[a] = (ilp_start){start[a], a};
    qsort(order, n, sizeof *order, ilp_start_cmp);
    for (size_t k = 0; k < n; k++) {
        size_t b = order[k].a;
        size_t keep = 0; /* drop the buffers that ended before b starts */
        for (size_t j = 0; j < nlive; j++)
            if (end[live[j]] >= order[k].start) live[keep++] = live[j];
        nlive = keep;
        for (size_t j = 0; j < nlive; j++) {
            if (*np == max) {
                free(pairs);
                pairs = NULL;
                *np = SIZE_MAX;
                goto out;
            }
            size_t a = live[j];
            pairs[(*np)++] = a < b ? (ilp_layout_pair){a, b} : (ilp_layout_pair){b, a};
        }
        live[nlive++] = b;
    }
out:
    free(order);
    free(live);
    return pairs;
}

/* What the GLPK callback needs. */
typedef struct ilp_cb {
    double *warm; /* column values of the incumbent, [1..ncols] */
    int warm_given;
    double target; /* stop when the incumbent objective reaches this */
    uint64_t work; /* work left */
    uint64_t node_cost;
    int out_of_work;
    glpk_backstop time; /* deadline in roamc_now() seconds */
} ilp_cb;

static void ilp_callback(glp_tree *tree, void *info) {
    ilp_cb *cb = info;
    glpk_backstop_check(&cb->time, tree, roamc_now());
    switch (glp_ios_reason(tree)) {
    case GLP_IHEUR:
        /* Hand the incumbent to GLPK once, at the root. */
        if (!cb->warm_given && cb->warm) {
            cb->warm_given = 1;
            glp_ios_heur_sol(tree, cb->warm);
        }
        break;
    case GLP_ISELECT:
        /* A subproblem is about to be solved: charge it, or stop, at the
         * same node on every machine (unlike tm_lim). */
        if (cb->work < cb->node_cost) {
            cb->out_of_work = 1;
            glp_ios_terminate(tree);
        } else {
            cb->work -= cb->node_cost;
        }
        break;
    case GLP_IBINGO:
        /* A new incumbent: stop when it meets the lower bound. */
        if (glp_mip_obj_val(glp_ios_get_prob(tree)) <= cb->target + 0.5) glp_ios_terminate(tree);
        break;
    default: break;
    }
}

/* Work units a GLPK node costs in a model of rows rows: rows^2.5 /
 * ILP_LAYOUT_NODE_DIV, in integers so that it is the same everywhere, and
 * at least 1. */
static uint64_t ilp_node_cost(uint64_t rows) {
    uint64_t root = 0; /* floor(sqrt(rows)) */
    while ((root + 1) * (root + 1) <= rows) root++;
    uint64_t c = rows * rows * root / ILP_LAYOUT_NODE_DIV;
    return c ? c : 1;
}

/* Height of the incumbent in units: the model's big M and upper bound. */
static uint64_t ilp_incumbent_height(const ilp_layout_problem *p) {
    uint64_t ub = 0;
    for (size_t a = 0; a < p->n; a++)
        if (p->incumbent[a] + p->size[a] > ub) ub = p->incumbent[a] + p->size[a];
    return ub;
}

/* Builds the model: columns k_a (offset of buffer a), H (height), z_p (pair
 * p: 1 means i below j); rows H - k_a >= size_a and, per pair, the big-M
 * disjunction
 *   k_i - k_j + M z <= M - size_i
 *   k_j - k_i - M z <= -size_j
 * with M = ub, the incumbent's height. */
static glp_prob *ilp_layout_model(const ilp_layout_problem *p, uint64_t ub) {
    const double M = (double)ub;
    const size_t n = p->n, np = p->np;
    size_t ncols = n + 1 + np; /* k_a, H, z_p */
    size_t hcol = n + 1;
    glp_prob *lp = glp_create_prob();
    glp_set_obj_dir(lp, GLP_MIN);
    glp_add_cols(lp, (int)ncols);
    for (size_t a = 0; a < n; a++) {
        glp_set_col_kind(lp, (int)a + 1, GLP_IV);
        if (ub > p->size[a])
            glp_set_col_bnds(lp, (int)a + 1, GLP_DB, 0.0, (double)(ub - p->size[a]));
        else
            glp_set_col_bnds(lp, (int)a + 1, GLP_FX, 0.0, 0.0);
    }
    if (p->lower_bound < ub)
        glp_set_col_bnds(lp, (int)hcol, GLP_DB, (double)p->lower_bound, M);
    else
        glp_set_col_bnds(lp, (int)hcol, GLP_FX, M, M);
    glp_set_obj_coef(lp, (int)hcol, 1.0);
    for (size_t q = 0; q < np; q++) glp_set_col_kind(lp, (int)(hcol + 1 + q), GLP_BV);

    glp_add_rows(lp, (int)(n + 2 * np));
    int ind[4];
    double val[4];
    for (size_t a = 0; a < n; a++) {
        int row = (int)a + 1;
        glp_set_row_bnds(lp, row, GLP_LO, (double)p->size[a], 0.0);
        ind[1] = (int)hcol, val[1] = 1.0;
        ind[2] = (int)a + 1, val[2] = -1.0;
        glp_set_mat_row(lp, row, 2, ind, val);
    }
    for (size_t q = 0; q < np; q++) {
        const ilp_layout_pair *pr = &p->pairs[q];
        int row = (int)(n + 2 * q) + 1;
        int ki = (int)pr->i + 1, kj = (int)pr->j + 1, z = (int)(hcol + 1 + q);
        glp_set_row_bnds(lp, row, GLP_UP, 0.0, M - (double)p->size[pr->i]);
        ind[1] = ki, val[1] = 1.0;
        ind[2] = kj, val[2] = -1.0;
        ind[3] = z, val[3] = M;
        glp_set_mat_row(lp, row, 3, ind, val);
        glp_set_row_bnds(lp, row + 1, GLP_UP, 0.0, -(double)p->size[pr->j]);
        ind[1] = kj, val[1] = 1.0;
        ind[2] = ki, val[2] = -1.0;
        ind[3] = z, val[3] = -M;
        glp_set_mat_row(lp, row + 1, 3, ind, val);
    }
    return lp;
}

/* The incumbent as column values [1..ncols], for glp_ios_heur_sol. */
static double *ilp_layout_warm(const ilp_layout_problem *p, uint64_t ub) {
    size_t hcol = p->n + 1;
    double *warm = xmallocarray(p->n + 1 + p->np + 1, sizeof *warm);
    warm[hcol] = (double)ub;
    for (size_t a = 0; a < p->n; a++) warm[a + 1] = (double)p->incumbent[a];
    for (size_t q = 0; q < p->np; q++)
        warm[hcol + 1 + q] = warm[p->pairs[q].i + 1] < warm[p->pairs[q].j + 1] ? 1.0 : 0.0;
    return warm;
}

/* The branch and bound from the root LP's optimum, within cb's work and
 * deadline; writes the best layout found into offsets. */
static ilp_layout_status ilp_layout_branch(glp_prob *lp, const ilp_layout_problem *p,
                                           double deadline, ilp_cb *cb, int *timed_out,
                                           uint64_t *offsets) {
    double left = deadline - roamc_now();
    glp_iocp io;
    glp_init_iocp(&io);
    io.msg_lev = GLP_MSG_OFF;
    io.presolve = GLP_OFF; /* the callback speaks of the original columns */
    io.cb_func = ilp_callback;
    io.cb_info = cb;
    io.tm_lim = glpk_tm_lim(left, 10);
    io.mip_gap = 0.0;
    io.br_tech = GLP_BR_DTH;
    io.bt_tech = GLP_BT_BLB;
    int ret = glp_intopt(lp, &io);
    if (ret == GLP_ETMLIM || cb->time.fired) *timed_out = 1;
    int st = glp_mip_status(lp);
    if (st != GLP_OPT && st != GLP_FEAS) return ILP_LAYOUT_NONE;
    for (size_t a = 0; a < p->n; a++) {
        double k = floor(glp_mip_col_val(lp, (int)a + 1) + 0.5);
        offsets[a] = (uint64_t)(k < 0 ? 0 : k);
    }
    return ret == 0 && st == GLP_OPT ? ILP_LAYOUT_OPTIMAL : ILP_LAYOUT_FOUND;
}

ilp_layout_status ilp_layout_solve(const ilp_layout_problem *p, uint64_t *work, double deadline,
                                   int *timed_out, uint64_t *offsets) {
    double seconds = deadline - roamc_now();
    uint64_t node_cost = ilp_node_cost(p->n + 2 * p->np);
    if (p->n == 0 || *work < node_cost) return ILP_LAYOUT_NONE;
    if (seconds < 0.05) {
        *timed_out = 1;
        return ILP_LAYOUT_NONE;
    }
    /* The root LP is charged as one node. */
    *work -= node_cost;
    uint64_t ub = ilp_incumbent_height(p);
    glp_term_out(GLP_OFF);
    glp_prob *lp = ilp_layout_model(p, ub);
    ilp_cb cb = {.warm = ilp_layout_warm(p, ub),
                 .target = (double)p->lower_bound,
                 .work = *work,
                 .node_cost = node_cost,
                 .time = {.deadline = deadline}};

    ilp_layout_status status = ILP_LAYOUT_NONE;
    glp_smcp sm;
    glp_init_smcp(&sm);
    sm.msg_lev = GLP_MSG_OFF;
    sm.tm_lim = glpk_tm_lim(seconds, 50); /* seconds >= 0.05 here */
    double t_lp = roamc_now();
    int sret = glp_simplex(lp, &sm);
    /* a node's LP takes at most about as long as the root's */
    double lp_seconds = roamc_now() - t_lp;
    glpk_backstop_calibrate(&cb.time, lp_seconds, lp_seconds, glp_get_it_cnt(lp));
    if (sret == GLP_ETMLIM) *timed_out = 1;
    if (sret == 0 && glp_get_status(lp) == GLP_OPT) {
        status = ilp_layout_branch(lp, p, deadline, &cb, timed_out, offsets);
        *work = cb.work;
    }
    free(cb.warm);
    glp_delete_prob(lp);
    return status;
}
