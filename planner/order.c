/* The ordering driver: program, LESCEA, ROAM (subgraph tree + leaves
 * solved in parallel) and the whole-graph ILP (see planner.h).
 *
 * ROAM here:
 *   1. partition/ analyses the graph and builds a block assignment for
 *      each candidate placement of the weight updates (the eqs. 4-6 rule,
 *      immediately, as the program does, all at the end) and of the
 *      floating ops (by rule, just in time, early), plus the placements
 *      that program order and LESCEA make.  Each candidate is scored by
 *      the peak of its blocks ordered by the cheap heuristics (program
 *      order, LESCEA restricted to the block, LESCEA within the block); the
 *      lowest wins, ties to the earlier candidate.  With the last two
 *      candidates the score is at most the program / LESCEA peak, so the
 *      tree starts no worse than either heuristic;
 *   2. the target: a peak the winner's blocks reach whatever their orders
 *      (order_target).  Blocks whose heuristic order stays at or below it
 *      cannot lower the peak and keep that order;
 *   3. every other block with two or more ops is a leaf, solved on a
 *      thread pool: the exact DP over down-sets within a state budget; if
 *      that runs out, a beam of the same search, then (small leaves) the
 *      leaf ILP within a node budget, warm-started from the best order;
 *   4. leaf orders are concatenated in block order (eq. 3); each leaf is
 *      never worse than its heuristic order, and the leaf peaks are exact,
 *      so the result is at most the winner's score;
 *   5. as a last guard against bugs, a heuristic order of the whole graph
 *      replaces a worse (or invalid) result, and the report says so.
 *
 * Determinism: every budget above counts work (states, beam width, nodes),
 * so the order does not depend on --threads or machine load.  Only the
 * time backstops (a leaf ILP running past time_limit/4, or leaves reached
 * after 80% of the time limit) depend on timing; the report counts them
 * as "stopped by time", and on the evaluation models none fires.
 */
#include "planner.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ilp_order.h"
#include "leaf.h"
#include "partition.h"

/* Work budgets of one leaf: deterministic, unlike time. */
#define ORDER_DP_STATES 100000
#define ORDER_ILP_NODES 20
#define ORDER_ILP_MAX_OPS 40
#define ORDER_ILP_MAX_VARS 200000
/* --order ilp: the share of --time-limit the whole-graph ILP may use (the
 * leaves of roam stop at the same share, order_roam) */
#define ORDER_ILP_SHARE 0.8
#define ORDER_BEAM_WIDTH 1000
/* graph_order_lower_bound's bitsets: 20k ops take 50 MB */
#define ORDER_LB_MAX_OPS 20000
/* order_tighten_bound: max-flows at the highest steps of the chosen order */
#define ORDER_CUT_OPS 8
/* Candidate ops per peak op for graph_min_live_split (2 max-flows each). */
#define ORDER_SPLIT_CANDIDATES 64

/* How a leaf was solved. */
typedef enum order_how {
    ORDER_TRIVIAL,  /* one op */
    ORDER_HEUR_OPT, /* a heuristic met the lower bound */
    ORDER_SKIP,     /* a heuristic is below the peak other blocks reach anyway */
    ORDER_DP,       /* exact DP */
    ORDER_ILP_OPT,  /* ILP proved optimal */
    ORDER_BUDGET,   /* best found within the budgets */
    ORDER_TIME,     /* deadline passed: heuristic kept */
} order_how;

/* How the blocks of one assignment are ordered (order_block). */
typedef struct order_blocks_problem {
    const graph *g;
    const leaf_blocks *B;
    const int *const *ref_pos; /* program and LESCEA positions */
    bool exact;                /* improve on the heuristics (DP, beam, leaf ILP) */
    uint64_t target;           /* a peak the blocks reach whatever their orders: see order_target */
    double deadline;           /* no leaf ILP starts after it */
    double time_limit;         /* of one leaf ILP */
} order_blocks_problem;

/* Orders block b of pb: the better of the program and LESCEA orders of the
 * leaf, improved when pb->exact is set.  Writes global op ids into out. */
static void order_block(const order_blocks_problem *pb, int b, int *out, order_how *how) {
    const graph *g = pb->g;
    const leaf_blocks *B = pb->B;
    const int *const *ref_pos = pb->ref_pos;
    uint64_t target = pb->target;
    size_t n = B->op_start[b + 1] - B->op_start[b];
    if (n == 1) {
        out[0] = B->ops[B->op_start[b]];
        *how = ORDER_TRIVIAL;
        return;
    }
    leaf_graph L;
    leaf_init(g, B, b, &L);
    /* heuristic orders: program order and global LESCEA restricted to the
     * leaf (a, d), LESCEA within the leaf (c); the best is the start */
    int *a = xmallocarray(n, sizeof *a), *c = xmallocarray(n, sizeof *c),
        *d = xmallocarray(n, sizeof *d);
    leaf_program(&L, ref_pos[0], a);
    leaf_lescea(&L, c);
    leaf_program(&L, ref_pos[1], d);
    uint64_t pa = leaf_peak(&L, a), pc = leaf_peak(&L, c), pd = leaf_peak(&L, d);
    if (pd < pa) memcpy(a, d, n * sizeof *a), pa = pd;
    int *best = pc < pa ? c : a;
    uint64_t peak = pc < pa ? pc : pa;
    *how = ORDER_BUDGET;
    if (peak <= leaf_lower_bound(&L))
        *how = ORDER_HEUR_OPT;
    else if (peak <= target)
        *how = ORDER_SKIP;
    else if (pb->exact && n <= 512) {
        uint64_t dp_peak;
        if (leaf_exact(&L, peak, ORDER_DP_STATES, d, &dp_peak)) {
            *how = ORDER_DP;
            if (dp_peak < peak) best = d, peak = dp_peak;
        } else {
            /* too wide for the exact search: a beam of the same search */
            uint64_t beam_peak; /* d is scratch here */
            if (leaf_beam(&L, peak, ORDER_BEAM_WIDTH, d, &beam_peak) && beam_peak < peak) {
                memcpy(c, d, n * sizeof *c); /* c is the warm start from here on */
                best = c, peak = beam_peak;
            }
        }
        if (*how == ORDER_BUDGET && n <= ORDER_ILP_MAX_OPS && peak > target) {
            if (roamc_now() > pb->deadline)
                *how = ORDER_TIME;
            else {
                ilp_order_options io = {.node_budget = ORDER_ILP_NODES,
                                        .time_limit = pb->time_limit,
                                        .max_vars = ORDER_ILP_MAX_VARS,
                                        .goal = target};
                ilp_order_result ir;
                ilp_order_leaf(&L, best, &io, d, &ir);
                best = d;
                *how = ir.status == ILP_OPTIMAL ? ORDER_ILP_OPT
                       : ir.status == ILP_TIME  ? ORDER_TIME
                                                : ORDER_BUDGET;
            }
        }
    }
    for (size_t i = 0; i < n; i++) out[i] = L.ops[best[i]];
    free(a), free(c), free(d);
    leaf_free(&L);
}

/* ------------------------------------------------------- thread pool */

typedef struct order_pool {
    order_blocks_problem pb; /* the leaves, solved exactly */
    int *tasks;              /* blocks with >= 2 ops, in block order */
    size_t n_tasks, next, done;
    int *out; /* schedule: block b's ops go to out[op_start[b]..] */
    order_how *how;
    uint64_t best_peak; /* the best whole-graph peak known before the leaves, for progress */
    pthread_mutex_t lock;
} order_pool;

static void *order_worker(void *arg) {
    order_pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        if (p->next >= p->n_tasks) {
            pthread_mutex_unlock(&p->lock);
            break;
        }
        int b = p->tasks[p->next++];
        pthread_mutex_unlock(&p->lock);
        order_how how;
        order_block(&p->pb, b, p->out + p->pb.B->op_start[b], &how);
        pthread_mutex_lock(&p->lock);
        p->how[b] = how;
        p->done++;
        planner_progress_count("ordering (roam): leaves %zu/%zu, best peak so far %.1f MiB",
                               p->done, p->n_tasks, (double)p->best_peak / (1024.0 * 1024.0));
        pthread_mutex_unlock(&p->lock);
    }
    ilp_thread_cleanup();
    return NULL;
}

/* Quick order of a block assignment: heuristics only, single thread. */
static void order_blocks_quick(const graph *g, const leaf_blocks *B, const int *const *ref_pos,
                               int *out) {
    order_blocks_problem pb = {
        .g = g, .B = B, .ref_pos = ref_pos, .exact = false, .target = UINT64_MAX};
    for (int b = 0; b < B->n_blocks; b++) {
        order_how how;
        if (B->op_start[b + 1] == B->op_start[b]) continue;
        order_block(&pb, b, out + B->op_start[b], &how);
    }
}

/* A peak that any order with these blocks reaches: the largest lower
 * bound of a multi-op block, and the exact live bytes at every single-op
 * block (its step's live set does not depend on the other blocks' orders).
 * A leaf whose heuristic order stays at or below it cannot lower the peak,
 * so it is not worth solving: most leaves of a training graph are such. */
static uint64_t order_target(const graph *g, const leaf_blocks *B, const int *quick) {
    uint64_t *live = xmallocarray(g->n_ops, sizeof *live);
    uint64_t target = 0;
    graph_live_bytes(g, quick, live);
    for (int b = 0; b < B->n_blocks; b++) {
        size_t len = B->op_start[b + 1] - B->op_start[b];
        if (len == 1 && live[B->op_start[b]] > target) target = live[B->op_start[b]];
        if (len > 1) {
            leaf_graph L;
            leaf_init(g, B, b, &L);
            uint64_t lb = leaf_lower_bound(&L);
            if (lb > target) target = lb;
            leaf_free(&L);
        }
    }
    free(live);
    return target;
}

/* When the ordering stage ends: ORDER_ILP_SHARE of the time from t_start
 * (when the ordering started) to the command's deadline, the rest left
 * for the bounds, the layout and writing. */
static double order_stage_deadline(const planner_options *opt, double t_start) {
    return t_start + ORDER_ILP_SHARE * (opt->deadline - t_start);
}

static int order_threads(const planner_options *opt) {
    if (opt->threads > 0) return opt->threads;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* Step 1 of order roam: builds a partition for every candidate placement
 * of the update and floating ops (the rules, then the placements of
 * program order and of LESCEA), scores each by the peak of its blocks'
 * quick orders, and returns the lowest (ties: the earlier), its peak in
 * *best_peak.  After the stage deadline (from t0) the best so far stands. */
static partition order_pick_partition(const graph *g, const planner_options *opt,
                                      const int *const *ref_pos, double t0, planner_order_stats *st,
                                      uint64_t *best_peak) {
    partition_options po = {.node_limit = opt->node_limit, .delay_radius = opt->delay_radius};
    partition best_p = {0};
    *best_peak = UINT64_MAX;
    int *cand = xmallocarray(g->n_ops, sizeof *cand);
    const int n_rules = PARTITION_PLACE_REFERENCE * PARTITION_FLOAT_REFERENCE;
    st->candidates = (size_t)n_rules + 2;
    for (int cand_i = 0; cand_i < n_rules + 2; cand_i++) {
        /* the time limit (--time-limit bounds the whole command): the best
         * candidate so far stands, and the report says how many were tried */
        if (*best_peak != UINT64_MAX && roamc_now() > order_stage_deadline(opt, t0)) break;
        st->candidates_tried++;
        int pl = cand_i < n_rules ? cand_i % PARTITION_PLACE_REFERENCE : PARTITION_PLACE_REFERENCE;
        int fl = cand_i < n_rules ? cand_i / PARTITION_PLACE_REFERENCE : PARTITION_FLOAT_REFERENCE;
        po.placement = (partition_placement)pl;
        po.floating = (partition_floating)fl;
        po.reference_pos = cand_i < n_rules ? NULL : ref_pos[cand_i - n_rules];
        partition P;
        partition_build(g, &po, ref_pos[0], &P);
        leaf_blocks B;
        leaf_blocks_init(g, P.block, P.n_blocks, &B);
        order_blocks_quick(g, &B, ref_pos, cand);
        uint64_t peak = graph_peak(g, cand, NULL, NULL);
        leaf_blocks_free(&B);
        if (peak < *best_peak) {
            partition_free(&best_p);
            best_p = P, *best_peak = peak;
            st->placement = cand_i < n_rules    ? partition_placement_name((partition_placement)pl)
                            : cand_i == n_rules ? "as program order"
                                                : "as LESCEA";
            st->floating = partition_floating_name((partition_floating)fl);
        } else
            partition_free(&P);
    }
    free(cand);
    return best_p;
}

/* Steps 2-3: the blocks of two or more ops that the pool solves
 * (pool->tasks), single-op blocks written to pool->out directly. */
static void order_pool_tasks(order_pool *pool) {
    const leaf_blocks *B = pool->pb.B;
    pool->tasks = xmallocarray((size_t)B->n_blocks + 1, sizeof *pool->tasks);
    pool->how = xcalloc((size_t)B->n_blocks + 1, sizeof *pool->how);
    for (int b = 0; b < B->n_blocks; b++) {
        size_t n = B->op_start[b + 1] - B->op_start[b];
        if (n == 1)
            pool->out[B->op_start[b]] = B->ops[B->op_start[b]], pool->how[b] = ORDER_TRIVIAL;
        else if (n > 1)
            pool->tasks[pool->n_tasks++] = b;
    }
}

/* Runs the pool's tasks on up to opt's threads (here when none starts);
 * returns the number of threads asked for. */
static int order_pool_run(order_pool *pool, const planner_options *opt) {
    pthread_mutex_init(&pool->lock, NULL);
    int nt = order_threads(opt);
    if ((size_t)nt > pool->n_tasks) nt = pool->n_tasks ? (int)pool->n_tasks : 1;
    pthread_t *th = xmallocarray((size_t)nt, sizeof *th);
    int started = 0;
    for (; started < nt; started++)
        if (pthread_create(&th[started], NULL, order_worker, pool)) break;
    if (started == 0) order_worker(pool); /* no threads: do it here */
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    free(th);
    pthread_mutex_destroy(&pool->lock);
    return nt;
}

/* How each non-empty block was solved, into the leaf counts of st. */
static void order_count_leaves(const leaf_blocks *B, const order_how *how,
                               planner_order_stats *st) {
    for (int b = 0; b < B->n_blocks; b++) {
        if (B->op_start[b + 1] == B->op_start[b]) continue;
        st->leaves++;
        switch (how[b]) {
        case ORDER_TRIVIAL: st->leaves_trivial++; break;
        case ORDER_HEUR_OPT: st->leaves_heuristic_optimal++; break;
        case ORDER_SKIP: st->leaves_not_critical++; break;
        case ORDER_DP: st->leaves_dp++; break;
        case ORDER_ILP_OPT: st->leaves_ilp_optimal++; break;
        case ORDER_BUDGET: st->leaves_budget++; break;
        case ORDER_TIME: st->time_stopped++; break;
        }
    }
}

/* Order roam (steps 1-4 of the comment at the top).  Returns the winning
 * partition (the caller frees it). */
static partition *order_roam(const graph *g, const planner_options *opt, const int *const *ref_pos,
                             int *order, planner_order_stats *st) {
    double t0 = roamc_now();
    uint64_t best_peak;
    partition *P = xmalloc(sizeof *P);
    *P = order_pick_partition(g, opt, ref_pos, t0, st, &best_peak);
    st->n_mi = P->n_mi, st->n_update = P->n_update, st->n_blocks = (size_t)P->n_blocks;
    st->n_independent = P->n_independent, st->n_dependent = P->n_dependent,
    st->largest_leaf = P->largest_leaf;
    double t1 = roamc_now();
    st->t_partition = t1 - t0;
    /* 2-3. the target, then the leaves on a thread pool */
    leaf_blocks B;
    leaf_blocks_init(g, P->block, P->n_blocks, &B);
    order_pool pool = {.pb = {.g = g, .B = &B, .ref_pos = ref_pos, .exact = true},
                       .out = order,
                       .best_peak = best_peak};
    /* the quick order of the winner gives the target */
    int *quick = xmallocarray(g->n_ops, sizeof *quick);
    order_blocks_quick(g, &B, ref_pos, quick);
    pool.pb.target = order_target(g, &B, quick);
    free(quick);
    order_pool_tasks(&pool);
    /* The deadline leaves a fifth of what is left for layout and writing. */
    pool.pb.deadline = order_stage_deadline(opt, t0);
    pool.pb.time_limit = (opt->deadline - roamc_now()) / 4;
    if (pool.pb.time_limit < 1e-6) pool.pb.time_limit = 1e-6;
    st->threads = order_pool_run(&pool, opt);
    order_count_leaves(&B, pool.how, st);
    free(pool.tasks), free(pool.how);
    leaf_blocks_free(&B);
    st->t_solve = roamc_now() - t1;
    return P;
}

/* t_run: when planner_order_run started. */
static void order_whole_ilp(const graph *g, const planner_options *opt, double t_run,
                            const int *warm, int *order, planner_order_stats *st) {
    double t0 = roamc_now();
    leaf_graph L;
    leaf_init_all(g, &L);
    /* The whole-graph baseline runs until ORDER_ILP_SHARE of the time left
     * at the start of the ordering (no node budget): the rest is for the
     * bounds, the layout (the layout ILP too) and writing.  The ILP keeps
     * to its deadline, model building included (ilp_order.h). */
    double left = order_stage_deadline(opt, t_run) - roamc_now();
    ilp_order_options io = {.node_budget = 1L << 40,
                            .time_limit = left > 1e-6 ? left : 1e-6,
                            .max_vars = ORDER_ILP_MAX_VARS};
    ilp_order_result ir;
    ilp_order_leaf(&L, warm, &io, order, &ir);
    ilp_thread_cleanup();
    leaf_free(&L);
    st->ilp_too_large = ir.status == ILP_TOO_LARGE;
    st->ilp_vars = ir.n_vars, st->ilp_nodes = ir.nodes;
    st->leaves = 1;
    st->largest_leaf = g->n_ops;
    st->leaves_ilp_optimal = ir.status == ILP_OPTIMAL;
    st->time_stopped = ir.status == ILP_TIME;
    st->leaves_budget = ir.status == ILP_BUDGET || ir.status == ILP_FAILED;
    st->t_solve = roamc_now() - t0;
}

/* Raises st->lower_bound with the exact least live bytes (graph_min_live)
 * at the steps where order is highest: a bound can only prove a schedule
 * optimal at its own peak.  At most ORDER_CUT_OPS max-flows, chosen by live
 * bytes then step, so the bound is deterministic. */
static void order_tighten_bound(const graph *g, const int *order, planner_order_stats *st) {
    size_t n = g->n_ops;
    uint64_t *live = xmallocarray(n, sizeof *live);
    int picked[ORDER_CUT_OPS];
    size_t n_picked = 0;
    uint64_t peak = 0;
    graph_live_bytes(g, order, live);
    for (size_t i = 0; i < n; i++)
        if (live[i] > peak) peak = live[i];
    /* the ORDER_CUT_OPS highest steps above the bound, by selection: each
     * pass takes the highest step not yet picked */
    for (; n_picked < ORDER_CUT_OPS; n_picked++) {
        size_t best = n;
        for (size_t i = 0; i < n; i++)
            if (live[i] > st->lower_bound && (best == n || live[i] > live[best])) best = i;
        if (best == n) break;
        picked[n_picked] = order[best];
        live[best] = 0; /* taken */
    }
    free(live);
    if (n_picked == 0) return;
    uint64_t cut = graph_min_live(g, picked, n_picked);
    if (cut != UINT64_MAX && cut > st->lower_bound) st->lower_bound = cut;
    /* Still below the order's peak: the case split on the ops that can run
     * on either side of a peak op (graph_min_live_split; e.g. vgg16_b32's
     * classifier weight-gradient mm's, whose inputs the plain cut frees by
     * running them before the peak, where their outputs would cost more). */
    for (size_t i = 0; i < n_picked && st->lower_bound < peak; i++) {
        uint64_t split = graph_min_live_split(g, picked[i], ORDER_SPLIT_CANDIDATES);
        if (split != UINT64_MAX && split > st->lower_bound) st->lower_bound = split;
    }
}

void planner_order_run(const graph *g, const planner_options *opt, int *order,
                       planner_order_stats *stp, partition **tree) {
    ROAMC_ASSERT(opt->node_limit >= 1 && opt->delay_radius >= 0 && opt->deadline > 0);
    double t_run = roamc_now(); /* the ordering's share of the time counts from here */
    planner_order_stats local;
    planner_order_stats *st = stp ? stp : &local;
    memset(st, 0, sizeof *st);
    if (tree) *tree = NULL;
    size_t n = g->n_ops;
    int *prog = xmallocarray(n, sizeof *prog), *pos = xmallocarray(n, sizeof *pos);
    int *les = xmallocarray(n, sizeof *les), *les_pos = xmallocarray(n, sizeof *les_pos);
    graph_program_order(g, prog);
    /* opt->fastest (the time limit is up): program order without LESCEA
     * or the costly bounds, the fastest valid order there is */
    if (opt->fastest)
        memcpy(les, prog, n * sizeof *les);
    else
        leaf_lescea_graph(g, les);
    for (size_t i = 0; i < n; i++) pos[prog[i]] = (int)i, les_pos[les[i]] = (int)i;
    const int *ref_pos[2] = {pos, les_pos};
    st->peak_program = graph_peak(g, prog, NULL, NULL);
    st->peak_lescea = opt->fastest ? 0 : graph_peak(g, les, NULL, NULL);
    const int *best_heur = !opt->fastest && st->peak_lescea < st->peak_program ? les : prog;
    uint64_t best_heur_peak = best_heur == les ? st->peak_lescea : st->peak_program;
    switch (opt->order) {
    case PLANNER_ORDER_PROGRAM:
        memcpy(order, prog, n * sizeof *order), st->source = "program";
        break;
    case PLANNER_ORDER_LESCEA: memcpy(order, les, n * sizeof *order), st->source = "lescea"; break;
    case PLANNER_ORDER_ROAM: {
        partition *P = order_roam(g, opt, ref_pos, order, st);
        if (tree)
            *tree = P;
        else
            partition_free(P), free(P);
        st->source = "roam";
        break;
    }
    case PLANNER_ORDER_ILP:
        order_whole_ilp(g, opt, t_run, best_heur, order, st);
        /* The ILP hands back its warm start when it finds nothing better
         * (too large, failed, stopped by budget or time): name that order. */
        if (memcmp(order, best_heur, n * sizeof *order) == 0) {
            st->source = best_heur == les ? "lescea" : "program";
            st->heuristic_kept = !st->ilp_too_large;
        } else
            st->source = "ilp";
        break;
    }
    if (opt->order == PLANNER_ORDER_ROAM || opt->order == PLANNER_ORDER_ILP) {
        /* Never worse than a heuristic: a bug in a leaf must not cost memory
         * either, so an invalid order is also replaced, and the report says
         * so (st->invalid_order): library code prints nothing itself. */
        uint64_t peak = graph_check_schedule(g, order, NULL, 0) == 0
                            ? graph_peak(g, order, NULL, NULL)
                            : UINT64_MAX;
        if (peak == UINT64_MAX) st->invalid_order = st->source;
        if (peak > best_heur_peak) {
            memcpy(order, best_heur, n * sizeof *order);
            st->heuristic_kept = 1;
            st->source = best_heur == les ? "lescea" : "program";
        }
    }
    st->peak_chosen = graph_peak(g, order, NULL, NULL);
    st->lower_bound = opt->fastest ? UINT64_MAX : graph_order_lower_bound(g, ORDER_LB_MAX_OPS);
    if (st->lower_bound == UINT64_MAX) st->lower_bound = graph_lower_bound(g);
    if (!opt->fastest) order_tighten_bound(g, order, st);
    free(prog), free(pos), free(les), free(les_pos);
}
