/* layout/ — where each storage lives in the arena.
 *
 * A layout problem is a list of buffers, each with a size in bytes and a
 * closed lifetime [start, end] in steps.  A layout gives every buffer an
 * offset such that two buffers whose lifetimes intersect never intersect in
 * [offset, offset + size).  The height of a layout (the "actual peak") is the
 * largest offset + size; the live-size lower bound is the largest sum of sizes
 * of buffers live at one step (the "theoretical peak"): no layout is lower.
 *
 * This part knows nothing of ONNX or graphs: it works on plain buffer lists,
 * so the same engine serves plans, the buffer-list CSV mode and the tests.
 */
#ifndef ROAMC_LAYOUT_H
#define ROAMC_LAYOUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct layout_buffer {
    uint64_t size; /* bytes; 0 is allowed (such a buffer never conflicts) */
    int32_t start; /* first step the buffer is live */
    int32_t end;   /* last step the buffer is live; start <= end */
} layout_buffer;

/* A layout problem as the exact layouts take it (layout_exact,
 * layout_glpk_exact, layout_solve and the searches of layout_internal.h):
 * the buffers, only read, and the alignment of every offset.  What a
 * search may spend is its own argument (layout_effort, layout_solve_opts),
 * so one problem serves several searches. */
typedef struct layout_problem {
    const layout_buffer *bufs; /* n buffers */
    size_t n;
    uint64_t align; /* offsets are multiples of it; >= 1 */
} layout_problem;

/* Sum of sizes of buffers live at the busiest step: the lower bound of any
 * layout's height.  O(n log n).
 *
 * Memory: this part allocates with frontend/base/base.h's x* allocators, which end
 * the process when the machine is out of memory; results here mean what
 * they say, never "out of memory". */
uint64_t layout_live_peak(const layout_buffer *bufs, size_t n);

/* Height of a layout: max over buffers of offset + size (0 when n == 0). */
uint64_t layout_height(const layout_buffer *bufs, size_t n, const uint64_t *offsets);

/* Checks that no two buffers with intersecting lifetimes intersect in address
 * and that every offset is a multiple of align (align >= 1).  Returns 0 when
 * valid; otherwise -1, and when a and b are not NULL stores the indices of
 * one offending pair (b == a for a misaligned offset).  O(n log n + conflicts
 * found). */
int layout_validate(const layout_buffer *bufs, size_t n, const uint64_t *offsets, uint64_t align,
                    size_t *a, size_t *b);

/* Heuristic layouts.  Each writes one offset per buffer into offsets[n]
 * (multiples of align; sizes are used as given, callers round them up to
 * align beforehand) and returns the height.  All are deterministic: ties
 * are broken by buffer index. */

/* Long-lived first, best fit: buffers by decreasing lifetime length (then
 * decreasing size), each at the lowest-waste gap among buffers already placed
 * that it conflicts with. */
uint64_t layout_llfb(const layout_buffer *bufs, size_t n, uint64_t align, uint64_t *offsets);

/* Greedy by size (TFLite's arena planner): buffers by decreasing size, each
 * at the lowest offset where it fits. */
uint64_t layout_greedy(const layout_buffer *bufs, size_t n, uint64_t align, uint64_t *offsets);

/* Best fit in schedule order: buffers allocated in order of start step (then
 * index), freed after their end step; each goes to the smallest free gap that
 * holds it, or on top. */
uint64_t layout_bestfit(const layout_buffer *bufs, size_t n, uint64_t align, uint64_t *offsets);

/* The lowest of the heuristic layouts, tried in this order: llfb, bestfit,
 * LLFB with first fit, greedy, and (up to 20000 buffers, as they scan every
 * gap of a fragmented address space) size-then-length first fit, size best
 * fit, area (size x length) best fit.  Stops early at the live-size lower
 * bound.  Writes offsets, returns the height and, when name is not NULL,
 * the name of the winner (ties: the first). */
uint64_t layout_best_heuristic(const layout_buffer *bufs, size_t n, uint64_t align,
                               uint64_t *offsets, const char **name);

/* Replay of PyTorch's CUDA caching allocator (shared/DESIGN.md, Baselines)
 * over the buffers in schedule order: at each step, first the buffers whose
 * lifetime ended at the previous step are freed, then the buffers starting at
 * this step are allocated in index order.  Offsets are block addresses with
 * the segments laid end to end in the order they were reserved, so the layout
 * is valid; its height is the bytes of all segments ever reserved.
 * limit > 0 is the device memory segments may take: when reserving one
 * would pass it, the wholly free segments are given back and the
 * reservation tried again, as PyTorch does before it reports out of memory.
 * Returns the height, or UINT64_MAX (and stats->oom) when a request found
 * no room under the limit. */
typedef struct layout_pytorch_stats {
    uint64_t reserved_peak;  /* most bytes of segments held at once (without a limit: == height) */
    uint64_t allocated_peak; /* max over time of bytes in allocated blocks */
    size_t segments;         /* segments reserved */
    size_t released;         /* segments given back under the limit */
    int oom;                 /* the replay ran out of device memory under the limit */
} layout_pytorch_stats;

uint64_t layout_pytorch(const layout_buffer *bufs, size_t n, uint64_t limit, uint64_t *offsets,
                        layout_pytorch_stats *stats);

/* Largest number of conflicting pairs (after buffers that conflict with all
 * others are stacked at the bottom) for which layout_exact builds the GLPK
 * model: one binary and two rows per pair; GLPK's branch and bound stalls
 * beyond a few thousand.  Larger problems skip the model and use the
 * exact search only. */
#define LAYOUT_ILP_MAX_PAIRS 3000

/* Exact layout, the one plans use: the incumbent is the lower of the warm
 * start and layout_best_heuristic; then a search for a layout at the
 * live-size bound (the canonical branch and bound of layout_bnb.c alone
 * first when the incumbent is within 1% of the bound, then it and the
 * skyline search of layout_search.c round robin);
 * then the GLPK model (an offset per buffer, a binary per conflicting
 * pair, objective = height) when there are at most LAYOUT_ILP_MAX_PAIRS
 * conflicting pairs; then a local search over first-fit placement orders;
 * then (up to 500 buffers) a bisection on the height with the exact
 * search.  Problems with
 * more than 4000 buffers (after those conflicting with all are stacked)
 * keep the incumbent.  Proofs assume sizes are multiples of align.
 * layout_exact and layout_glpk_exact stop on a work budget, so the same
 * input and effort give the same layout on every machine and every run,
 * unless the time backstop fires first, which res->stopped_by_time
 * reports.  (The exact search under them, lay_search of
 * layout_internal.h, takes its work and deadline as a lay_budget.)  GLPK
 * keeps an environment per thread: a thread that ran either and is about
 * to exit calls ilp_thread_cleanup (ilp_layout.h).
 *
 * Work units: a layout_search node costs 1 + the sections (time intervals
 * between lifetime boundaries) it scans; a GLPK branch-and-bound node (the
 * root LP counts as one) costs rows^2.5 / ILP_LAYOUT_NODE_DIV (ilp_layout.h) for a
 * model of that many rows, which is how the time of its LP re-solves grows
 * (measured from 900 to 5000 rows).  Both are calibrated so that 10^7
 * units take about a second on one core of a 2020s x86 machine.
 * The budget is split in a fixed way between the steps: at most 10% (and
 * 6144 units a buffer) for the branch and bound alone at the bound, then
 * of what is left
 * 40% for the search at the bound, half of what is left for GLPK, half of
 * the rest for a local search over first-fit placement orders (a placement
 * costs 16 units a buffer), the rest for the bisection (each probe a third
 * of what is left); a step that finishes early leaves its unspent work to
 * the next ones.  The first 256 placements of the local search (at most a
 * seventh of the budget) run between the branch and bound alone and the
 * round robin, and the exact steps are skipped when they reach it. */
#define LAYOUT_DEFAULT_WORK 100000000ull

/* How the exact searches share each round's node limit among the members
 * of their portfolio (layout/LAYOUT.md, PORTFOLIO).  LAYOUT_SHARES_EQUAL:
 * every member at the full limit, main's round robin from 0778970 on; the
 * plans' layout stage keeps it, so plans stay as they were.
 * LAYOUT_SHARES_PORTFOLIO: 169a928's skyline search first at the full
 * limit, the others at a fraction; roamc layout's default.  Only under it
 * does layout_exact use the search around pinned buffers (lay_improve's
 * windows with their crossing buffers pinned, and lay_improve first on
 * lists of more than LAYOUT_SEARCH_MAX_BUFFERS buffers): on gpt2-xl_b1 in
 * program order it spends the whole budget (9 s) for 18 KB. */
typedef enum layout_shares { LAYOUT_SHARES_EQUAL = 0, LAYOUT_SHARES_PORTFOLIO } layout_shares;

typedef struct layout_effort {
    uint64_t work;        /* work budget; 0 means LAYOUT_DEFAULT_WORK */
    double time_limit_s;  /* backstop in seconds; <= 0 means none */
    uint64_t goal;        /* also stop once the height is <= goal (0: only the
                             live-size lower bound stops early) */
    layout_shares shares; /* the exact searches' shares (0: equal) */
    /* NULL, or out: where the search at the bound (step 2) gave up, for
     * layout_solve to continue from (layout_search_mark) */
    struct layout_search_mark *mark;
} layout_effort;

/* What ended a layout search, for its report: it must say the truth (a
 * search that ran out of ideas in 2 s of a 60 s limit was not stopped by
 * time). */
typedef enum layout_stop {
    LAYOUT_STOP_PROOF = 0,      /* the height is proved minimal (or the goal met) */
    LAYOUT_STOP_WORK,           /* the work budget ran out */
    LAYOUT_STOP_TIME,           /* the time limit (backstop) cut a step */
    LAYOUT_STOP_NO_IMPROVEMENT, /* every step ran to its own end (node limits,
                                   a local optimum) without a lower layout or
                                   a proof, with work and time left */
    LAYOUT_STOP_TOO_LARGE       /* as NO_IMPROVEMENT, and the exact search was
                                   not run: more buffers than it takes */
} layout_stop;

/* The words of a layout_stop for a report ("work budget", ...). */
const char *layout_stop_name(layout_stop s);

typedef struct layout_result {
    uint64_t height;     /* of the layout written */
    int proven_optimal;  /* the height is the lower bound or proved minimal */
    int stopped_by_time; /* 1: the time backstop cut a step, so another run
                             may give a different layout */
    uint64_t work_spent; /* work units used, <= the budget */
    layout_stop stop;    /* what ended it (LAYOUT_STOP_PROOF when proven_optimal) */
} layout_result;

/* Always a valid layout in offsets, never worse than warm_offsets (which
 * may be NULL); deterministic unless res->stopped_by_time.  effort->goal > 0
 * also stops it as soon as the height is <= goal.  effort NULL means the
 * defaults with no backstop.  Returns res->height. */
uint64_t layout_exact(const layout_problem *p, const uint64_t *warm_offsets,
                      const layout_effort *effort, uint64_t *offsets, layout_result *res);

/* The GLPK layout model alone (the MODeL-like whole-graph baseline, what
 * --layout ilp plans with), warm-started from LLFB, on a work budget (all
 * of it for GLPK), deterministic unless res->stopped_by_time.  Writes the
 * better of LLFB and GLPK's answer; *too_large = 1 (and LLFB is kept) when
 * the model would have more than LAYOUT_ILP_MAX_PAIRS conflicting pairs.
 * Returns the height. */
uint64_t layout_glpk_exact(const layout_problem *p, const layout_effort *effort, uint64_t *offsets,
                           layout_result *res, int *too_large);

/* Buffer-list CSV (shared/DESIGN.md): header `id,lower,upper,size` or
 * `buffer,start,end,size`, one buffer a line, half-open lifetime
 * [lower, upper).  On success returns 0 and fills *out (n entries, closed
 * lifetimes [lower, upper-1]) and *ids (the id strings); the caller frees
 * both with layout_csv_free.  On error returns -1 and writes a message naming
 * the file, line and column into err (errlen bytes). */
typedef struct layout_csv {
    layout_buffer *bufs;
    char **ids;
    size_t n;
    int header_kind; /* 0: id,lower,upper,size; 1: buffer,start,end,size */
} layout_csv;

int layout_csv_read(const char *path, layout_csv *out, char *err, size_t errlen);
/* Writes the input columns plus `offset` to f. Returns 0, or -1 on I/O error. */
int layout_csv_write(FILE *f, const layout_csv *csv, const uint64_t *offsets);
void layout_csv_free(layout_csv *csv);

/* ROAM's layout by concatenation (the paper's section IV-B, eqs. 7-9).
 * The caller splits the buffers into groups (for plans: the leaf subgraphs
 * of the subgraph tree, planner/plan.c) and marks the long-lived buffers of
 * each group (activations that outlive the group's window).  Then:
 *   1. each group is laid out on its own with layout_exact, its long-lived
 *      buffers first at its lowest offsets, its other buffers above them
 *      (no interleaving of activations and temporaries, Fig. 5b);
 *   2. groups are stacked: LAYOUT_ROAM_BOTTOM groups first, then by
 *      decreasing window (first start to last end of its buffers), so the
 *      shorter-lived layout sits on top; the base of a group is the sum of
 *      the long-lived heights of the groups below (eq. 9), so layouts of
 *      groups that are not live at the same time share addresses.  Windows
 *      that do not nest collide less in other orders: by first step, and
 *      by last step (descending) are tried too, through steps 3-4;
 *   3. buffers that conflict after stacking are re-placed: long-lived ones
 *      and then larger, longer-lived ones keep their offsets, the others
 *      (smaller, shorter-lived) go to the lowest offset where they fit;
 *   4. leftovers (group -1) last, longest first, best fit;
 *   the lowest result over the stacking orders and the two orders of the
 *   re-placed buffers (smallest first, the paper's; largest first) wins.
 * The result is checked with layout_validate; should it fail (a bug), the
 * answer is layout_best_heuristic's.  Deterministic (work budgets) unless a
 * group's exact layout hits the time backstop.  Returns the height and
 * fills *st when not NULL. */
#define LAYOUT_ROAM_BOTTOM 1u /* group flag: stacked first (persistent buffers) */

typedef struct layout_roam_input {
    const int *group;         /* per buffer: 0..n_groups-1, or -1: a leftover */
    const unsigned char *low; /* per buffer, may be NULL: long-lived in its group.
                                    NULL: those live across the longest stretch of
                                    steps where none of the group's buffers starts
                                    or ends (the gap between a forward range and
                                    its backward twin) */
    size_t n_groups;
    const unsigned *group_flags; /* per group, may be NULL: LAYOUT_ROAM_BOTTOM */
    uint64_t work;               /* work budget (layout_effort units) of the exact
                                    layouts of all groups together; 0: LAYOUT_DEFAULT_WORK */
    double time_limit_s;         /* their time backstop; <= 0: none */
    int fill;                    /* 1: a group's other buffers may also go below the
                                    top of its long-lived part where that is free
                                    (placed around it, best fit), when that makes
                                    the group lower than stacking them above it */
} layout_roam_input;

typedef struct layout_roam_stats {
    size_t groups;             /* non-empty groups laid out */
    size_t groups_proven;      /* of them, both parts proven minimal by layout_exact */
    size_t grouped, leftovers; /* buffers in a group, in none */
    size_t low;                /* long-lived buffers */
    size_t repaired;           /* grouped buffers re-placed after stacking */
    uint64_t stacked;          /* height of the stacked groups before the repair */
    int stacking;              /* the stacking order that won: 0 by window (the
                                 paper's), 1 by first step, 2 by last step */
    int fallback;              /* 1: invalid result, layout_best_heuristic returned */
    int stopped_by_time;       /* 1: a group's exact layout hit the time backstop */
} layout_roam_stats;

uint64_t layout_roam(const layout_buffer *bufs, size_t n, uint64_t align,
                     const layout_roam_input *in, uint64_t *offsets, layout_roam_stats *st);

/* Exact solver for a buffer list (`roamc layout`).  The searches behind it
 * are two complete branch and bounds run round robin: the skyline search
 * (layout_search.c: fills the lowest or most constrained cell) and the
 * canonical branch and bound (layout_bnb.c: each buffer at the lowest
 * offset its placed neighbours allow, in nondecreasing offset order).  The
 * rules that prune the latter can be switched off one by one (1 = on;
 * every combination stays exact, only slower) to measure each one's worth:
 * layout_bnb.c explains them. */
typedef struct layout_bnb_rules {
    int canonical; /* placements in nondecreasing (offset, rank) */
    int dominance; /* nothing above a gap an unplaced buffer could fill */
    int section;   /* per section: floor + unplaced sizes <= capacity */
    int monotonic; /* floors at least the offset of the last placement
                       (needs canonical, ignored without it) */
    int tight;     /* a section with no room to waste can be covered */
    int floor;     /* floor raised to the lowest min offset live there */
    int fit;       /* every unplaced buffer fits above its min offset */
    int twins;     /* same lifetime and size: placed in rank order */
    int decompose; /* independent time ranges solved apart */
    int mirror;    /* also search the problem mirrored in time */
    int hatless;   /* a failed placement of a buffer that no unplaced
                       buffer meets ends its node (needs canonical) */
    int reorder;   /* a piece split off by decompose is preordered again
                       by its own section totals */
    int energy;    /* skyline search, per section: the unplaced buffers
                       whose lowest possible offset is >= h fit in [h, cap)
                       for every such h (layout_search.c); off by
                       default: it costs more than it prunes */
} layout_bnb_rules;

/* A lower bound on the height at least the live size (layout_bound.c):
 * the buffers that meet a window of time around the busiest steps, cut to
 * it, are a sub-problem whose minimum no layout of p can be under; the
 * exact search proves, window by window (up to 160 buffers each), that a
 * sub-problem does not fit at the bound so far, which raises it to the
 * next possible height.  upper: a known height (the incumbent's), above
 * which nothing is tried.  effort: work (0: LAYOUT_DEFAULT_WORK / 10) and
 * time backstop (<= 0: none); effort->goal is unused; NULL: the defaults.
 * Deterministic unless the backstop fires (st->stop == LAY_STOP_TIME's
 * public twin, LAYOUT_STOP_TIME).  Returns the bound (0 for no non-empty
 * buffer): live size rounded up to the sizes' gcd, or higher; never above
 * the optimum.  st may be NULL. */
typedef struct layout_bound_stats {
    uint64_t live;         /* the live-size bound */
    uint64_t bound;        /* what was returned */
    size_t centres;        /* busy sections tried */
    size_t searches;       /* exact searches of cut problems */
    size_t raised;         /* of them, proofs that raised the bound */
    size_t window_buffers; /* the last raising window: its buffers */
    int64_t window_start;  /*   and its steps [start, end] */
    int64_t window_end;
    uint64_t work_spent;
    int stop; /* 0: ran to its end; else what stopped it (layout_stop) */
} layout_bound_stats;

uint64_t layout_lower_bound(const layout_problem *p, uint64_t upper, const layout_effort *effort,
                            layout_bound_stats *st);

#define LAYOUT_ENGINE_SKYLINE 1
#define LAYOUT_ENGINE_BNB 2
#define LAYOUT_ENGINE_SWEEP 4 /* layout_solve only, on request: zero-slack problems in time order */

/* Where an exact search of a problem at one capacity gave up on work or
 * time (layout/LAYOUT.md, PORTFOLIO, "Resuming").  The portfolio's
 * strategies are deterministic, so a later search of the same problem at
 * the same capacity with the same engines, shares and rules would repeat
 * every strategy that gave up at its node limit: it continues from the one
 * that was cut instead.  capacity 0: nothing recorded. */
typedef struct layout_search_mark {
    uint64_t capacity; /* bytes, as the search was given it */
    int engines;       /* LAYOUT_ENGINE_SKYLINE / _BNB bits it ran */
    layout_shares shares;
    layout_bnb_rules rules;
    long long limit; /* the cut strategy's round (its node limit) */
    unsigned next;   /* and its position in the round */
} layout_search_mark;

typedef enum layout_solve_status {
    LAYOUT_SOLVE_OPTIMAL,    /* height proved minimal (or within capacity and
                                equal to the proven lower bound) */
    LAYOUT_SOLVE_FEASIBLE,   /* capacity mode: a layout within it */
    LAYOUT_SOLVE_INFEASIBLE, /* capacity mode: proved that none fits */
    LAYOUT_SOLVE_STOPPED     /* time or work ran out before a proof */
} layout_solve_status;

typedef struct layout_solve_opts {
    uint64_t capacity;   /* > 0: find a layout within it or prove none;
                              0: minimise the height */
    uint64_t work;       /* work budget (layout_effort units); 0: none */
    double time_limit_s; /* > 0: stop after it; used to the end unless
                              proved earlier */
    int engines;         /* LAYOUT_ENGINE_* bits; 0: skyline and bnb (the
                              sweep only when its bit is given) */
    layout_bnb_rules rules;
    layout_shares shares; /* the probes' portfolio shares; PORTFOLIO by
                             default */
    /* NULL, or where an earlier search of the same problem gave up
     * (layout_exact's effort.mark): the first probe at its capacity with the
     * same engines, shares and rules continues from it */
    const layout_search_mark *resume;
} layout_solve_opts;

typedef struct layout_solve_result {
    layout_solve_status status;
    uint64_t height;          /* of the layout in offsets (the warm start's when
                              nothing better was found) */
    uint64_t lower_bound;     /* proved: no layout is lower (>= live size) */
    uint64_t nodes;           /* search nodes, all probes */
    unsigned probes;          /* capacities searched */
    int stopped_by_time;      /* the clock, not the work, stopped a probe */
    layout_stop stop;         /* what ended it: PROOF when status is not STOPPED;
                             else TIME when the clock cut a probe or the
                             loop, WORK when o->work ran out, TOO_LARGE when
                             the search takes no list this large, else
                             NO_IMPROVEMENT (every probe ended by its own
                             node limits) */
    layout_bound_stats bound; /* minimising: the window bound's run
                                 (layout_lower_bound), folded into lower_bound */
} layout_solve_result;

/* Defaults: minimise, no work budget, 10 s, skyline and bnb engines, all
 * rules on but energy, LAYOUT_SHARES_PORTFOLIO. */
void layout_solve_defaults(layout_solve_opts *o);

/* Minimises the height (binary search over capacities between the proven
 * lower bound and the incumbent, the first probe at the live-size bound),
 * or decides o->capacity.  warm_offsets: a valid layout (required) that
 * seeds the incumbent; offsets receives the best layout found (the warm
 * one when nothing better is).  Sizes are rounded up to align.  Returns
 * r->status.  Deterministic when only o->work stops it. */
layout_solve_status layout_solve(const layout_problem *p, const uint64_t *warm_offsets,
                                 const layout_solve_opts *o, uint64_t *offsets,
                                 layout_solve_result *r);

/* A layout problem beyond intervals (layout_general.c, the library's
 * roamc_layout_* for what `roamc layout`'s engine does not take): buffer
 * i conflicts with j when both have lifetimes and they meet, or when an
 * edge joins them; buffers of size 0 conflict with nothing; a pinned
 * buffer stays at its offset. */
typedef struct layout_general {
    size_t n;
    const uint64_t *size;        /* bytes, each a multiple of its alignment */
    const uint64_t *align;       /* per buffer, >= 1 */
    const int32_t *first, *last; /* closed lifetime; first < 0: none */
    const uint8_t *pinned;       /* 1: buffer i sits at pin[i] */
    const uint64_t *pin;
    const size_t *edges; /* n_edges pairs a, b */
    size_t n_edges;
} layout_general;

typedef struct layout_general_result {
    uint64_t height;
    uint64_t bound;          /* lower bound: live size, pins' tops, greedy cliques */
    layout_stop stop;        /* PROOF: height == bound; WORK, TIME; NO_IMPROVEMENT:
                         at most one free buffer, nothing to search */
    size_t clash_a, clash_b; /* when it returns -1 */
} layout_general_result;

/* The default work of layout_general_solve: neighbour visits of the first
 * fits. */
#define LAYOUT_GENERAL_WORK 20000000

/* First fit of the free buffers in three orders, then a local search over
 * orders (move one buffer earlier; keep no higher), until the bound, work
 * (0: LAYOUT_GENERAL_WORK) or the deadline (roamc_now() seconds).
 * offsets: n, every pinned buffer at its pin.  Deterministic unless the
 * deadline fires.  Returns 0, or -1 when two pinned buffers conflict and
 * overlap (r->clash_a < r->clash_b; offsets not written). */
int layout_general_solve(const layout_general *g, uint64_t work, double deadline, uint64_t *offsets,
                         layout_general_result *r);

#endif
