/* The leaf order ILP (see ilp_order.h for the model and its determinism). */
#include "ilp_order.h"
#include "base.h" /* roamc_now: one deadline for the whole call; x* allocators */
#include "glpk_backstop.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <glpk.h>
#include <math.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

/* Models with more nonzeros than this are deleted with ilp_delete. */
#define ILP_BIG_NONZEROS 1000000

/* Deletes P.  GLPK frees a model block by block, from the top of the heap
 * down, and glibc gives memory back to the system at each such free (a brk
 * call each): 0.65-0.9 s for the first 20k of the 69k rows of alexnet's
 * whole-graph model, all of it after the deadline.  With trimming held off
 * during the delete and done once after, 0.02-0.08 s.  Leaf models are far
 * below ILP_BIG_NONZEROS and are deleted as they are. */
static void ilp_delete(glp_prob *P) {
#ifdef __GLIBC__
    if (glp_get_num_nz(P) > ILP_BIG_NONZEROS) {
        mallopt(M_TRIM_THRESHOLD, INT32_MAX);
        glp_delete_prob(P);
        mallopt(M_TRIM_THRESHOLD, 128 * 1024); /* glibc's default */
        malloc_trim(0);
        return;
    }
#endif
    glp_delete_prob(P);
}

/* glp_simplex's set-up (not under its tm_lim) against the time it took to
 * build the model, both linear in the nonzeros: measured 0.83-1.22 on the
 * whole-graph model of alexnet in a former formulation that wrote prefix
 * sums out (62k columns, 69k rows, 8.7M nonzeros). */
#define ILP_SETUP_PER_BUILD 1.5

/* Leaves beyond this many ops are never modelled: the live variables alone
 * (storages x steps) would exceed any sensible max_vars. */
#define ILP_MAX_OPS 2000

/* The model's layout: where each op's and storage's columns start. */
typedef struct ilp_model {
    const leaf_graph *L;
    size_t n;
    int *asap, *alap; /* per op: window of steps */
    int *maker;       /* per storage: local op that creates it, -1 when live_in */
    int *lo, *hi;     /* per storage: steps where it may be live */
    int *dcol, *pcol; /* first column of op v's D / storage j's p (1-based) */
    int peak_col, n_cols;
    double scale; /* bytes per objective unit */
} ilp_model;

static void ilp_model_free(ilp_model *m) {
    free(m->asap), free(m->alap), free(m->maker), free(m->lo), free(m->hi), free(m->dcol),
        free(m->pcol);
}

/* graph_closure_join, then the size of v's set. */
static int ilp_count_joined(uint64_t *sets, size_t w, int v, const size_t *start, const int *adj) {
    graph_closure_join(sets, w, v, start, adj);
    int c = 0;
    for (size_t x = 0; x < w; x++) c += __builtin_popcountll(sets[(size_t)v * w + x]);
    return c;
}

/* ASAP/ALAP from ancestor and descendant counts (bitsets, n <= ILP_MAX_OPS)
 * and the column layout. */
static void ilp_model_init(const leaf_graph *L, ilp_model *m) {
    memset(m, 0, sizeof *m);
    size_t n = L->n_ops, ns = L->n_st, w = (n + 63) / 64;
    m->L = L, m->n = n;
    m->asap = xcalloc(n, sizeof(int)), m->alap = xcalloc(n, sizeof(int));
    m->dcol = xcalloc(n, sizeof(int)), m->pcol = xcalloc(ns, sizeof(int));
    m->maker = xmallocarray(ns, sizeof(int));
    m->lo = xcalloc(ns, sizeof(int)), m->hi = xcalloc(ns, sizeof(int));
    uint64_t *bits = xcalloc(n * w, sizeof *bits);
    int *topo = xmallocarray(n, sizeof *topo), *indeg = xmallocarray(n, sizeof *indeg);
    size_t head = 0, tail = 0;
    for (size_t i = 0; i < n; i++)
        if (!(indeg[i] = (int)(L->pred_start[i + 1] - L->pred_start[i]))) topo[tail++] = (int)i;
    while (head < tail) {
        int v = topo[head++];
        for (size_t k = L->succ_start[v]; k < L->succ_start[v + 1]; k++)
            if (--indeg[L->succ[k]] == 0) topo[tail++] = L->succ[k];
    }
    ROAMC_ASSERT(tail == n);
    for (size_t i = 0; i < n; i++) /* ancestors */
        m->asap[topo[i]] = ilp_count_joined(bits, w, topo[i], L->pred_start, L->pred);
    memset(bits, 0, n * w * sizeof *bits);
    for (size_t i = n; i-- > 0;) /* descendants */
        m->alap[topo[i]] = (int)n - 1 - ilp_count_joined(bits, w, topo[i], L->succ_start, L->succ);
    free(bits), free(topo), free(indeg);
    int col = 1;
    /* D[v,t] for t in asap..alap-1: at alap, v has run (D = 1) */
    for (size_t v = 0; v < n; v++) m->dcol[v] = col, col += m->alap[v] - m->asap[v];
    for (size_t j = 0; j < ns; j++) m->maker[j] = -1, m->hi[j] = 0;
    for (size_t v = 0; v < n; v++)
        for (size_t k = L->make_start[v]; k < L->make_start[v + 1]; k++)
            m->maker[L->make[k]] = (int)v;
    for (size_t v = 0; v < n; v++)
        for (size_t k = L->touch_start[v]; k < L->touch_start[v + 1]; k++)
            if (m->hi[L->touch[k]] < m->alap[v]) m->hi[L->touch[k]] = m->alap[v];
    uint64_t gcd = L->base;
    for (size_t j = 0; j < ns; j++) {
        m->lo[j] = m->maker[j] >= 0 ? m->asap[m->maker[j]] : 0;
        if (L->live_out[j]) m->hi[j] = (int)n - 1;
        m->pcol[j] = col, col += m->hi[j] - m->lo[j] + 1;
        gcd = roamc_gcd(gcd, L->size[j]);
    }
    m->peak_col = col;
    m->n_cols = col;
    m->scale = gcd ? (double)gcd : 1.0;
}

/* Column of D[v,t]: 0 where D is the constant 0 (t < asap), -1 where it is
 * the constant 1 (t >= alap). */
static int ilp_d(const ilp_model *m, int v, int t) {
    if (t < m->asap[v]) return 0;
    if (t >= m->alap[v]) return -1;
    return m->dcol[v] + t - m->asap[v];
}

static int ilp_p(const ilp_model *m, int j, int t) {
    ROAMC_ASSERT(t >= m->lo[j] && t <= m->hi[j]);
    return m->pcol[j] + t - m->lo[j];
}

/* Row buffer: 1-based ind/val as GLPK wants them, and the constant part
 * (moved to the bounds on commit). */
typedef struct ilp_row {
    int *ind;
    double *val;
    int len, cap;
    double cst;
} ilp_row;

static void ilp_row_put(ilp_row *r, int col, double v) {
    if (r->len + 1 >= r->cap) {
        r->cap = r->cap ? 2 * r->cap : 64;
        r->ind = xreallocarray(r->ind, (size_t)r->cap, sizeof *r->ind);
        r->val = xreallocarray(r->val, (size_t)r->cap, sizeof *r->val);
    }
    r->len++;
    r->ind[r->len] = col, r->val[r->len] = v;
}

/* Adds coef * D[v,t] to r ("v has run by step t"; a constant outside v's
 * window). */
static void ilp_row_d(ilp_row *r, const ilp_model *m, int v, int t, double coef) {
    int c = ilp_d(m, v, t);
    if (c > 0)
        ilp_row_put(r, c, coef);
    else if (c < 0)
        r->cst += coef;
}

/* Adds the row (its constant moved to the bounds); returns 1 when the
 * deadline has passed (checked every 64 rows: a large model takes seconds
 * to build), else 0. */
static int ilp_row_commit(glp_prob *P, ilp_row *r, int type, double lb, double ub,
                          double deadline) {
    int row = glp_add_rows(P, 1);
    glp_set_row_bnds(P, row, type, lb - r->cst, ub - r->cst);
    glp_set_mat_row(P, row, r->len, r->ind, r->val);
    r->len = 0, r->cst = 0.0;
    return (row & 63) == 0 && roamc_now() > deadline ? 1 : 0;
}

/* Where the rows of ilp_build_rows end (ilp_count_rows counts the same).
 * Every row has at most 3 nonzeros except the step and peak rows. */
static int ilp_prec_hi(const ilp_model *m, int u, int w) { /* last step of u -> w's rows */
    int hi = m->alap[w] - 1;
    return hi < m->alap[u] ? hi : m->alap[u];
}

static int ilp_keep_hi(const ilp_model *m, int j, int u) { /* last step of j's rows for toucher u */
    return m->hi[j] < m->alap[u] ? m->hi[j] : m->alap[u];
}

/* Builds every row.  Returns 0, or 1 when the deadline passed before the
 * model was complete. */
static int ilp_build_rows(glp_prob *P, const ilp_model *m, double deadline) {
    const leaf_graph *L = m->L;
    int n = (int)m->n;
    ilp_row r = {0};
    int rc = 0;
    /* by step t, t + 1 ops have run (one op per step, each once: D[v,.] goes
     * from 0 before asap to 1 at alap) */
    for (int t = 0; t + 1 < n && rc == 0; t++) {
        for (int v = 0; v < n; v++) ilp_row_d(&r, m, v, t, 1.0);
        if (r.len == 0)
            r.cst = 0.0; /* every op fixed at t: nothing to say */
        else
            rc = ilp_row_commit(P, &r, GLP_FX, t + 1.0, t + 1.0, deadline);
    }
    /* D is monotone: D[v,t-1] <= D[v,t] */
    for (int v = 0; v < n && rc == 0; v++)
        for (int t = m->asap[v] + 1; t < m->alap[v] && rc == 0; t++) {
            ilp_row_put(&r, ilp_d(m, v, t - 1), 1.0);
            ilp_row_put(&r, ilp_d(m, v, t), -1.0);
            rc = ilp_row_commit(P, &r, GLP_UP, 0.0, 0.0, deadline);
        }
    /* edge u -> w: by step t, w has run only if u ran before t */
    for (int u = 0; u < n && rc == 0; u++)
        for (size_t k = L->succ_start[u]; k < L->succ_start[u + 1] && rc == 0; k++) {
            int w = L->succ[k], hi = ilp_prec_hi(m, u, w);
            for (int t = m->asap[w]; t <= hi && rc == 0; t++) {
                ilp_row_d(&r, m, w, t, 1.0);
                ilp_row_d(&r, m, u, t - 1, -1.0);
                rc = ilp_row_commit(P, &r, GLP_UP, 0.0, 0.0, deadline);
            }
        }
    /* preserved: p[j,t] >= D[maker,t] - D[u,t-1] for each toucher u (1 for
     * the maker of a live_in storage) */
    for (int u = 0; u < n && rc == 0; u++)
        for (size_t k = L->touch_start[u]; k < L->touch_start[u + 1] && rc == 0; k++) {
            int j = L->touch[k], hi = ilp_keep_hi(m, j, u);
            if (L->live_in[j] && L->live_out[j]) continue; /* fixed to 1 */
            for (int t = m->lo[j]; t <= hi && rc == 0; t++) {
                ilp_row_put(&r, ilp_p(m, j, t), 1.0);
                ilp_row_d(&r, m, u, t - 1, 1.0);
                if (m->maker[j] >= 0)
                    ilp_row_d(&r, m, m->maker[j], t, -1.0);
                else
                    r.cst -= 1.0;
                rc = ilp_row_commit(P, &r, GLP_LO, 0.0, 0.0, deadline);
            }
        }
    /* outputs of the leaf stay live from creation to its end */
    for (size_t j = 0; j < L->n_st && rc == 0; j++) {
        if (!L->live_out[j] || m->maker[j] < 0) continue;
        for (int t = m->lo[j]; t <= m->hi[j] && rc == 0; t++) {
            ilp_row_put(&r, ilp_p(m, (int)j, t), 1.0);
            ilp_row_d(&r, m, m->maker[j], t, -1.0);
            rc = ilp_row_commit(P, &r, GLP_LO, 0.0, 0.0, deadline);
        }
    }
    /* peak >= base + live bytes at every step */
    for (int t = 0; t < n && rc == 0; t++) {
        ilp_row_put(&r, m->peak_col, 1.0);
        for (size_t j = 0; j < L->n_st; j++)
            if (t >= m->lo[j] && t <= m->hi[j])
                ilp_row_put(&r, ilp_p(m, (int)j, t), -(double)L->size[j] / m->scale);
        rc = ilp_row_commit(P, &r, GLP_LO, (double)L->base / m->scale, 0.0, deadline);
    }
    free(r.ind), free(r.val);
    return rc;
}

/* Counts the rows ilp_build_rows adds, without building them, to refuse
 * models that are too big. */
static size_t ilp_count_rows(const ilp_model *m) {
    const leaf_graph *L = m->L;
    size_t rows = m->n, n = m->n;
    for (size_t t = 0; t + 1 < n; t++) { /* step rows: some op not fixed at t */
        size_t free_at = 0;
        for (size_t v = 0; v < n && !free_at; v++)
            free_at = (int)t >= m->asap[v] && (int)t < m->alap[v];
        rows += free_at;
    }
    for (size_t u = 0; u < n; u++) {
        if (m->alap[u] - m->asap[u] > 1) rows += (size_t)(m->alap[u] - m->asap[u] - 1);
        for (size_t k = L->succ_start[u]; k < L->succ_start[u + 1]; k++) {
            int w = L->succ[k], hi = ilp_prec_hi(m, (int)u, w);
            if (hi >= m->asap[w]) rows += (size_t)(hi - m->asap[w] + 1);
        }
        for (size_t k = L->touch_start[u]; k < L->touch_start[u + 1]; k++) {
            int j = L->touch[k], hi = ilp_keep_hi(m, j, (int)u);
            if (!(L->live_in[j] && L->live_out[j]) && hi >= m->lo[j])
                rows += (size_t)(hi - m->lo[j] + 1);
        }
    }
    for (size_t j = 0; j < L->n_st; j++)
        if (L->live_out[j] && m->maker[j] >= 0) rows += (size_t)(m->hi[j] - m->lo[j] + 1);
    return rows;
}

typedef struct ilp_cb {
    const double *warm; /* 1-based column values of the warm start */
    bool warm_given;
    double goal; /* the leaf's lower bound, scaled: stop when met */
    long nodes, budget;
    bool bound_met, budget_spent;
    glpk_backstop time; /* deadline in roamc_now() seconds */
} ilp_cb;

static void ilp_callback(glp_tree *T, void *info) {
    ilp_cb *cb = info;
    glpk_backstop_check(&cb->time, T, roamc_now());
    switch (glp_ios_reason(T)) {
    case GLP_IHEUR:
        if (!cb->warm_given) {
            cb->warm_given = true;
            glp_ios_heur_sol(T, cb->warm);
        }
        break;
    case GLP_ISELECT:
        if (++cb->nodes > cb->budget) {
            cb->budget_spent = true;
            glp_ios_terminate(T);
        }
        break;
    default: break;
    }
    glp_prob *P = glp_ios_get_prob(T);
    if (!cb->bound_met && glp_mip_status(P) == GLP_FEAS && glp_mip_obj_val(P) <= cb->goal + 1e-6) {
        cb->bound_met = true;
        glp_ios_terminate(T);
    }
}

/* Column values of an order: D, p (live under the order) and the peak. */
static void ilp_order_to_cols(const ilp_model *m, const int *order, double *cols) {
    const leaf_graph *L = m->L;
    size_t n = m->n;
    int *start = xcalloc(L->n_st, sizeof *start), *end = xcalloc(L->n_st, sizeof *end);
    memset(cols, 0, (size_t)(m->n_cols + 1) * sizeof *cols);
    for (size_t s = 0; s < n; s++) {
        int v = order[s];
        for (int t = (int)s; t < m->alap[v]; t++) cols[ilp_d(m, v, t)] = 1.0;
        for (size_t k = L->make_start[v]; k < L->make_start[v + 1]; k++) start[L->make[k]] = (int)s;
        for (size_t k = L->touch_start[v]; k < L->touch_start[v + 1]; k++)
            end[L->touch[k]] = (int)s;
    }
    for (size_t j = 0; j < L->n_st; j++) {
        if (L->live_out[j]) end[j] = (int)n - 1;
        for (int t = start[j]; t <= end[j]; t++) cols[ilp_p(m, (int)j, t)] = 1.0;
    }
    cols[m->peak_col] = (double)leaf_peak(L, order) / m->scale;
    free(start), free(end);
}

/* The columns of m in a new GLPK problem: D binary, p in [0, 1] (1 for a
 * storage live through the leaf), the peak >= 0 as the objective. */
static glp_prob *ilp_create_columns(const ilp_model *m) {
    const leaf_graph *L = m->L;
    glp_prob *P = glp_create_prob();
    glp_set_obj_dir(P, GLP_MIN);
    glp_add_cols(P, m->n_cols);
    for (int c = 1; c < m->peak_col; c++) glp_set_col_bnds(P, c, GLP_DB, 0.0, 1.0);
    for (size_t v = 0; v < m->n; v++)
        for (int t = m->asap[v]; t < m->alap[v]; t++)
            glp_set_col_kind(P, ilp_d(m, (int)v, t), GLP_BV);
    for (size_t j = 0; j < L->n_st; j++)
        if (L->live_in[j] && L->live_out[j])
            for (int t = m->lo[j]; t <= m->hi[j]; t++)
                glp_set_col_bnds(P, ilp_p(m, (int)j, t), GLP_FX, 1.0, 1.0);
    glp_set_col_bnds(P, m->peak_col, GLP_LO, 0.0, 0.0);
    glp_set_obj_coef(P, m->peak_col, 1.0);
    return P;
}

/* GLPK's incumbent as a leaf order (each op's step is the first where
 * D = 1), taken into order and r->peak when it is a valid order with a
 * lower peak than r->peak. */
static void ilp_take_incumbent(glp_prob *P, const ilp_model *m, int *order, ilp_order_result *r) {
    size_t n = m->n;
    /* two ops on one step leave another step at -1, which
     * leaf_order_valid rejects */
    int *cand = xmallocarray(n, sizeof *cand);
    for (size_t s = 0; s < n; s++) cand[s] = -1;
    for (size_t v = 0; v < n; v++) {
        int t = m->asap[v];
        while (t < m->alap[v] && glp_mip_col_val(P, ilp_d(m, (int)v, t)) < 0.5) t++;
        cand[t] = (int)v;
    }
    if (leaf_order_valid(m->L, cand)) {
        uint64_t pk = leaf_peak(m->L, cand);
        if (pk < r->peak) {
            r->peak = pk;
            memcpy(order, cand, n * sizeof *order);
        }
    }
    free(cand);
}

/* The root LP, under what is left of the time before deadline less the
 * set-up glp_simplex does before its own clock starts (it copies the whole
 * matrix: on a model of millions of nonzeros as long as building it took);
 * not started when not even the set-up would fit.  Returns glp_simplex's
 * code (GLP_ETMLIM when not started). */
static int ilp_root_lp(glp_prob *P, double deadline, double t_built, double setup) {
    double left = deadline - t_built;
    glp_smcp sp;
    glp_init_smcp(&sp);
    sp.msg_lev = GLP_MSG_OFF;
    sp.tm_lim = glpk_tm_lim(left - setup, 1);
    return left > setup ? glp_simplex(P, &sp) : GLP_ETMLIM;
}

/* Branch and bound from the solved root LP (solved at t_root, in
 * t_root - t_built seconds after a set-up of about setup) under cb's node
 * budget, goal and deadline; takes a better incumbent into order and sets
 * r->status and r->nodes. */
static void ilp_branch_and_bound(glp_prob *P, const ilp_model *m, ilp_cb *cb, double t_built,
                                 double t_root, double setup, int *order, ilp_order_result *r) {
    glp_iocp ip;
    glp_init_iocp(&ip);
    ip.msg_lev = GLP_MSG_OFF;
    /* GLPK's own presolver would solve the root LP again, under no limit at
     * all; the root LP is solved already */
    ip.presolve = GLP_OFF;
    double left = cb->time.deadline - t_root;
    ip.tm_lim = glpk_tm_lim(left, 1);
    /* the first node LP re-solves the root from its optimal basis: at most
     * the set-up, and not longer than the root LP took */
    glpk_backstop_calibrate(&cb->time, t_root - t_built < setup ? t_root - t_built : setup,
                            t_root - t_built, glp_get_it_cnt(P));
    ip.cb_func = ilp_callback;
    ip.cb_info = cb;
    ip.mip_gap = 0.0;
    int ret = glp_intopt(P, &ip);
    r->nodes = cb->nodes;
    int ms = glp_mip_status(P);
    if (ms == GLP_OPT || ms == GLP_FEAS) ilp_take_incumbent(P, m, order, r);
    if (ms == GLP_OPT || cb->bound_met)
        r->status = ILP_OPTIMAL;
    else if (ret == GLP_ETMLIM || cb->time.fired)
        r->status = ILP_TIME;
    else if (cb->budget_spent)
        r->status = ILP_BUDGET;
    else
        r->status = ILP_FAILED;
}

void ilp_order_leaf(const leaf_graph *L, const int *warm, const ilp_order_options *o, int *order,
                    ilp_order_result *r) {
    size_t n = L->n_ops;
    memset(r, 0, sizeof *r);
    memcpy(order, warm, n * sizeof *order);
    r->peak = leaf_peak(L, warm);
    r->status = ILP_TOO_LARGE;
    if (n > ILP_MAX_OPS) return;
    uint64_t goal = leaf_lower_bound(L);
    if (o->goal > goal) goal = o->goal;
    if (n <= 1 || r->peak <= goal) {
        r->status = ILP_OPTIMAL;
        return;
    }
    /* one deadline for everything below, model building included */
    const double t_call = roamc_now();
    const double deadline =
        o->time_limit > 0 && o->time_limit < 2e6 ? t_call + o->time_limit : INFINITY;
    ilp_model m;
    ilp_model_init(L, &m);
    r->n_vars = (size_t)m.n_cols;
    r->n_rows = ilp_count_rows(&m);
    if (r->n_vars > o->max_vars || r->n_rows > 4 * o->max_vars) {
        ilp_model_free(&m);
        return;
    }
    glp_term_out(GLP_OFF);
    glp_prob *P = ilp_create_columns(&m);
    double *cols = xmallocarray((size_t)m.n_cols + 1, sizeof *cols);
    if (ilp_build_rows(P, &m, deadline)) /* the deadline passed while building */
        r->status = ILP_TIME;            /* the warm start stands */
    else {
        ilp_order_to_cols(&m, warm, cols);
        double t_built = roamc_now();
        double setup = ILP_SETUP_PER_BUILD * (t_built - t_call);
        ilp_cb cb = {.warm = cols,
                     .goal = (double)goal / m.scale,
                     .budget = o->node_budget,
                     .time = {.deadline = deadline}};
        int lp = ilp_root_lp(P, deadline, t_built, setup);
        double t_root = roamc_now();
        if (lp != 0 || glp_get_status(P) != GLP_OPT)
            r->status = lp == GLP_ETMLIM ? ILP_TIME : ILP_FAILED;
        else
            ilp_branch_and_bound(P, &m, &cb, t_built, t_root, setup, order, r);
    }
    ilp_delete(P);
    free(cols);
    ilp_model_free(&m);
}
