/* The drop-selection MILP of --fit (see ilp_fit.h for the model). */
#include "ilp_fit.h"
#include "base.h" /* roamc_now, x* allocators */
#include "glpk_backstop.h"

#include <glpk.h>
#include <math.h>
#include <stdlib.h>

/* Units of the model: bytes in MiB and seconds in milliseconds, so that
 * GLPK's simplex sees coefficients near 1 (bytes of 10^9 beside seconds of
 * 10^-3 made it fail). */
#define FIT_BYTES_UNIT (1024.0 * 1024.0)
#define FIT_SECONDS_UNIT 1e-3

/* A node of a model with r rows costs r^2.5 / FIT_NODE_DIV work units (the
 * layout model's measure of how GLPK's LP re-solves grow), at least 1. */
#define FIT_NODE_DIV 600

typedef struct fit_cb {
    uint64_t work, node_cost;
    long nodes;
    glpk_backstop time;
} fit_cb;

static void fit_callback(glp_tree *tree, void *info) {
    fit_cb *cb = info;
    glpk_backstop_check(&cb->time, tree, roamc_now());
    if (glp_ios_reason(tree) != GLP_ISELECT) return;
    /* charged before the node is solved: the same node stops the search on
     * every machine */
    if (cb->work < cb->node_cost) {
        glp_ios_terminate(tree);
        return;
    }
    cb->work -= cb->node_cost;
    cb->nodes++;
}

static uint64_t fit_node_cost(uint64_t rows) {
    uint64_t root = 0;
    while ((root + 1) * (root + 1) <= rows) root++;
    uint64_t c = rows * rows * root / FIT_NODE_DIV;
    return c ? c : 1;
}

/* Columns: the choices 1..nc, then the chains nc+1..nc+nh.  Rows: one per
 * candidate (at most one choice), one per chain, one per plan row. */
static glp_prob *fit_model(const ilp_fit_problem *p) {
    size_t nc = p->n_choices, nh = p->n_chains;
    glp_prob *lp = glp_create_prob();
    glp_set_obj_dir(lp, GLP_MIN);
    glp_add_cols(lp, (int)(nc + nh));
    for (size_t c = 0; c < nc; c++) {
        glp_set_col_kind(lp, (int)c + 1, GLP_BV);
        glp_set_obj_coef(lp, (int)c + 1, p->choices[c].cost / FIT_SECONDS_UNIT);
    }
    for (size_t h = 0; h < nh; h++) {
        /* z takes its lower bound at an optimum: continuous in [0, 1] */
        glp_set_col_bnds(lp, (int)(nc + h) + 1, GLP_DB, 0.0, 1.0);
        glp_set_obj_coef(lp, (int)(nc + h) + 1, p->chains[h].cost / FIT_SECONDS_UNIT);
    }
    /* one choice per candidate */
    size_t *count = xcalloc(p->n_candidates ? p->n_candidates : 1, sizeof *count);
    for (size_t c = 0; c < nc; c++) count[p->choices[c].candidate]++;
    int *ind = xmallocarray(nc + nh + 2, sizeof *ind);
    double *val = xmallocarray(nc + nh + 2, sizeof *val);
    for (size_t u = 0; u < p->n_candidates; u++) {
        if (count[u] < 2) continue;
        int k = 0;
        for (size_t c = 0; c < nc; c++)
            if (p->choices[c].candidate == u) ind[++k] = (int)c + 1, val[k] = 1.0;
        int row = glp_add_rows(lp, 1);
        glp_set_mat_row(lp, row, k, ind, val);
        glp_set_row_bnds(lp, row, GLP_UP, 0.0, 1.0);
    }
    /* z_h - x_c - sum x(u) >= -1 */
    for (size_t h = 0; h < nh; h++) {
        int k = 0;
        ind[++k] = (int)(nc + h) + 1, val[k] = 1.0;
        ind[++k] = (int)p->chains[h].choice + 1, val[k] = -1.0;
        for (size_t c = 0; c < nc; c++)
            if (p->choices[c].candidate == p->chains[h].candidate)
                ind[++k] = (int)c + 1, val[k] = -1.0;
        int row = glp_add_rows(lp, 1);
        glp_set_mat_row(lp, row, k, ind, val);
        glp_set_row_bnds(lp, row, GLP_LO, -1.0, 0.0);
    }
    /* the plan's rows that need freeing, or that a temporary could push over */
    for (size_t r = 0; r < p->n_rows; r++) {
        int k = 0;
        for (size_t c = 0; c < nc; c++) {
            const ilp_fit_choice *ch = &p->choices[c];
            double v = ch->lo <= r && r < ch->hi ? (double)ch->size : 0.0;
            if (ch->temp && ch->temp_row == r) v -= (double)ch->temp;
            v /= FIT_BYTES_UNIT;
            if (v != 0.0) ind[++k] = (int)c + 1, val[k] = v;
        }
        for (size_t h = 0; h < nh; h++)
            if (p->chains[h].temp && p->chains[h].row == r)
                ind[++k] = (int)(nc + h) + 1, val[k] = -(double)p->chains[h].temp / FIT_BYTES_UNIT;
        if (k == 0 && p->need[r] <= 0) continue;
        int row = glp_add_rows(lp, 1);
        if (k) glp_set_mat_row(lp, row, k, ind, val);
        glp_set_row_bnds(lp, row, GLP_LO, p->need[r] / FIT_BYTES_UNIT, 0.0);
    }
    free(count);
    free(ind);
    free(val);
    return lp;
}

void ilp_fit_solve(const ilp_fit_problem *p, uint64_t *work, double deadline, unsigned char *chosen,
                   ilp_fit_result *r) {
    *r = (ilp_fit_result){.status = ILP_FIT_NONE};
    glp_term_out(GLP_OFF);
    glp_prob *lp = fit_model(p);
    fit_cb cb = {.work = *work,
                 .node_cost = fit_node_cost((uint64_t)glp_get_num_rows(lp)),
                 .time = {.deadline = deadline}};
    double seconds = deadline - roamc_now();
    if (cb.work < cb.node_cost || seconds < 0.05) {
        r->timed_out = seconds < 0.05;
        glp_delete_prob(lp);
        return;
    }
    cb.work -= cb.node_cost; /* the root LP */
    glp_scale_prob(lp, GLP_SF_AUTO);
    glp_smcp sm;
    glp_init_smcp(&sm);
    sm.msg_lev = GLP_MSG_OFF;
    sm.tm_lim = glpk_tm_lim(seconds, 50);
    double t_lp = roamc_now();
    int sret = glp_simplex(lp, &sm);
    double lp_seconds = roamc_now() - t_lp;
    glpk_backstop_calibrate(&cb.time, lp_seconds, lp_seconds, glp_get_it_cnt(lp));
    if (sret == GLP_ETMLIM) r->timed_out = true;
    int lp_status = sret == 0 ? glp_get_status(lp) : GLP_UNDEF;
    /* the relaxation's optimum bounds every solution's cost from below */
    if (lp_status == GLP_OPT) r->bound = glp_get_obj_val(lp) * FIT_SECONDS_UNIT;
    if (lp_status == GLP_NOFEAS) r->status = ILP_FIT_INFEASIBLE;
    if (lp_status == GLP_OPT) {
        glp_iocp io;
        glp_init_iocp(&io);
        io.msg_lev = GLP_MSG_OFF;
        io.presolve = GLP_OFF; /* the callback speaks of the original columns */
        io.cb_func = fit_callback;
        io.cb_info = &cb;
        io.tm_lim = glpk_tm_lim(deadline - roamc_now(), 10);
        io.mip_gap = 0.0;
        io.br_tech = GLP_BR_DTH;
        io.bt_tech = GLP_BT_BLB;
        int ret = glp_intopt(lp, &io);
        if (ret == GLP_ETMLIM || cb.time.fired) r->timed_out = true;
        int st = glp_mip_status(lp);
        if (st == GLP_NOFEAS) r->status = ILP_FIT_INFEASIBLE;
        if (st == GLP_OPT || st == GLP_FEAS) {
            for (size_t c = 0; c < p->n_choices; c++)
                chosen[c] = glp_mip_col_val(lp, (int)c + 1) > 0.5;
            r->objective = glp_mip_obj_val(lp) * FIT_SECONDS_UNIT;
            r->status = ret == 0 && st == GLP_OPT ? ILP_FIT_OPTIMAL : ILP_FIT_FOUND;
        }
        if (r->status == ILP_FIT_OPTIMAL) r->bound = r->objective;
    }
    r->nodes = cb.nodes;
    *work = cb.work;
    glp_delete_prob(lp);
}
