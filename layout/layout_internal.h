/* layout/ private helpers shared by the files of this part only.
 *
 * lay_set: an ordered set of nodes keyed by a pair (k1, k2), compared
 * lexicographically; keys in the set must be distinct (callers put a unique id
 * in k2 where k1 can repeat).  It is a treap over a caller-sized node pool: the caller
 * names each node by an id in [0, cap) and inserts or erases it; the set never
 * allocates after lay_set_init.  Priorities come from a hash of the id, so the
 * shape (and thus every answer) is deterministic.  O(log n) expected per call.
 *
 * The layout search (layout_search.c) is declared here too: layout_exact and the
 * tests use it; it is not part of the public contract of layout.h.
 */
#ifndef ROAMC_LAYOUT_INTERNAL_H
#define ROAMC_LAYOUT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "base.h" /* roamc_now: the clock of every deadline here */
#include "layout.h"

#define LAY_NIL ((size_t)-1)

typedef struct lay_set_node {
    uint64_t k1, k2;    /* the key */
    size_t left, right; /* children, LAY_NIL when none */
    uint64_t prio;      /* heap priority: larger is nearer the root */
    int in_set;         /* 1 while inserted; catches double inserts */
} lay_set_node;

typedef struct lay_set {
    lay_set_node *nodes; /* cap nodes, indexed by id */
    size_t cap;
    size_t root;
    size_t count;
} lay_set;

/* An empty set of cap nodes.  Never fails. */
void lay_set_init(lay_set *set, size_t cap);
void lay_set_free(lay_set *set);
void lay_set_insert(lay_set *set, size_t id, uint64_t k1, uint64_t k2);
void lay_set_erase(lay_set *set, size_t id);
/* Smallest node with key >= (k1, k2), or LAY_NIL. */
size_t lay_set_ceil(const lay_set *set, uint64_t k1, uint64_t k2);
/* Largest node with key <= (k1, k2), or LAY_NIL. */
size_t lay_set_floor(const lay_set *set, uint64_t k1, uint64_t k2);

/* Sort record with precomputed keys (qsort has no context argument, so the
 * keys travel with the index); lay_key_cmp orders by k1, k2, k3, then idx,
 * so every order is total and deterministic. */
typedef struct lay_key {
    uint64_t k1, k2, k3;
    size_t idx;
} lay_key;

int lay_key_cmp(const void *pa, const void *pb);
/* qsort comparators of plain int64_t and int32_t arrays, ascending. */
int lay_i64_cmp(const void *pa, const void *pb);
int lay_i32_cmp(const void *pa, const void *pb);
/* The index of t in the sorted distinct array v[0..n), which holds it
 * (asserted), by bisection: e.g. v = {0, 3, 7}, t = 3 gives 1.  Inline:
 * the placement index (layout.c) calls it on every placement. */
static inline size_t lay_find_step(const int64_t *v, size_t n, int64_t t) {
    size_t lo = 0, hi = n;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] <= t)
            lo = mid;
        else
            hi = mid;
    }
    ROAMC_ASSERT(v[lo] == t);
    return lo;
}

/* A schedule replay's events: the non-empty buffers' allocations sorted by
 * (start, index) and their frees by (end, index), keys as in lay_key with k1
 * the step (order-preserving for negative steps).  A replay frees every
 * buffer whose end is below the next allocation's start before placing it. */
typedef struct lay_events {
    lay_key *allocs, *frees;
    size_t m; /* entries in each */
} lay_events;

void lay_events_init(const layout_buffer *bufs, size_t n, lay_events *ev);
void lay_events_free(lay_events *ev);

/* x rounded up to a multiple of a (a >= 1). */
static inline uint64_t lay_round_up(uint64_t x, uint64_t a) {
    return (x + a - 1) / a * a;
}

/* A layout problem reduced without loss (layout_reduce.c):
 *  - empty buffers get offset 0 and are left out;
 *  - sizes are rounded up to align and expressed in units of the gcd of all
 *    of them (a pushed-down layout has offsets that are sums of sizes);
 *  - buffers that conflict with every other remaining buffer are stacked at
 *    the bottom in index order (nobody else ever uses their address range,
 *    so in any layout that range can be cut out and moved to the bottom).
 * The remaining buffers are to be placed at base + unit * k. */
typedef struct lay_reduced {
    size_t n;          /* buffers left to place */
    size_t *orig;      /* their indices in the input */
    uint64_t *size;    /* their sizes in units */
    uint64_t unit;     /* bytes per unit, a multiple of align */
    uint64_t base;     /* bytes taken at the bottom by the stacked buffers */
    uint64_t *offsets; /* one per input buffer: set for stacked, empty and
                          pinned ones */
    /* lay_reduce_pinned: the non-empty pinned buffers, obstacles the
     * placed ones go around (npins 0 otherwise) */
    size_t npins;
    size_t *pin_orig;   /* their indices in the input */
    uint64_t *pin_at;   /* their offsets in units */
    uint64_t *pin_size; /* their sizes in units */
    uint64_t *hint;     /* NULL, or per buffer left: the hint's offset (lay_pins) */
    int pinned;         /* made by lay_reduce_pinned (even with no pin left):
                           the searches take the preorders for pins */
} lay_reduced;

/* Fills *r (free it with lay_reduced_free).  Never fails. */
void lay_reduce(const layout_buffer *bufs, size_t n, uint64_t align, lay_reduced *r);
void lay_reduced_free(lay_reduced *r);

/* Pins: the buffers of a problem that stay at fixed offsets.  off[i] is
 * buffer i's offset (a multiple of align) or LAY_FREE; pinned buffers may
 * overlap one another (they are where they are) and reach above any
 * capacity.  hint (may be NULL): per buffer, the offsets of a layout of
 * the free ones (say the incumbent's), whose order a search tries first. */
#define LAY_FREE UINT64_MAX
typedef struct lay_pins {
    const uint64_t *off;
    const uint64_t *hint;
} lay_pins;

/* lay_reduce for a problem with pins: empty buffers out (offset 0, or
 * their pin), the pinned ones as obstacles, units the gcd of align, the
 * sizes and the pins' offsets; nothing stacked (the bottom may be
 * pinned). */
void lay_reduce_pinned(const layout_buffer *bufs, size_t n, uint64_t align, const lay_pins *pins,
                       lay_reduced *r);

/* An incremental placer over a fixed buffer list (layout.c): buffers are
 * placed one at a time, each either at a given offset when that range is
 * free among the buffers already placed that it conflicts with, or in the
 * lowest (first fit) or tightest (best fit) gap.  Sizes are rounded up to
 * align; empty buffers never conflict.  O(log n + k log k) a call, k the
 * placed buffers it conflicts with.  The heuristics of layout.h are
 * placements in a fixed order with it. */
typedef struct lay_placer lay_placer;
lay_placer *lay_placer_new(const layout_buffer *bufs, size_t n, uint64_t align);
void lay_placer_free(lay_placer *pl);
/* A copy of pl in its current state, which then goes its own way (what two
 * placements sharing a common start need). */
lay_placer *lay_placer_clone(const lay_placer *pl);
/* Places buffer i at offset (a multiple of align) if it fits there: 1, else
 * 0 (nothing placed). */
int lay_placer_try(lay_placer *pl, size_t i, uint64_t offset);
/* Places buffer i in the lowest gap that holds it (best_fit 0) or the one
 * it fills best (best_fit 1; ties: the lowest) and returns its offset (0
 * for an empty buffer). */
uint64_t lay_placer_fit(lay_placer *pl, size_t i, int best_fit);

/* Outcome of an exact search for a layout within a capacity: the answer.
 * Which limit a search that gave up ran into is its budget's stop. */
typedef enum lay_status {
    LAY_GAVE_UP = -1,   /* node limit, work budget, time backstop or size */
    LAY_INFEASIBLE = 0, /* proved: no layout fits */
    LAY_FOUND = 1       /* a layout fits: offsets written */
} lay_status;

/* Why a search gave up (lay_budget.stop). */
typedef enum lay_stop {
    LAY_STOP_NONE = 0, /* no limit: it found a layout, proved that none fits,
                          or ran out of its own node limits */
    LAY_STOP_WORK,     /* the work budget ran out */
    LAY_STOP_TIME,     /* the deadline (the time backstop) passed */
    LAY_STOP_SIZE      /* more buffers than it takes (lay_search_opts.max_buffers) */
} lay_stop;

/* What an exact search may spend, and which limit stopped it.  work is
 * in the units of layout_effort.work (a search node costs 1 + the sections
 * it scans); the search decreases it by what it spends and gives up when
 * it runs out, at the same point on every machine.  deadline (roamc_now()
 * seconds; INFINITY or 1e300: none) is only a backstop.  A search sets
 * stop when it returns: LAY_STOP_TIME only when the deadline cut it, so
 * the answer may differ on another run. */
typedef struct lay_budget {
    uint64_t work;
    double deadline;
    lay_stop stop;
} lay_budget;

/* layout_improve.c: local improvement of a layout (offsets, valid for p,
 * changed in place) by re-placing, window by window, the buffers around
 * those that reach the height, until it is at stop_at, bud runs out
 * (bud->stop: LAY_STOP_WORK or LAY_STOP_TIME), or a pass over the top
 * buffers moves none (bud->stop stays LAY_STOP_NONE: a local optimum).
 * Never raises the height; deterministic unless the deadline fires.
 * Scales to 100,000s of buffers (a window costs about its own buffers).
 * pinned: also search windows with their crossing buffers pinned
 * (lay_bnb with pins), when the windows above them fail, and push the whole
 * layout down (each buffer onto the placed ones it meets, lowest first)
 * at the start and when the windows stop after moving some: lower
 * layouts, but it may spend the whole budget on small gains.
 * Returns the height; st (may be NULL) gets the counts. */
typedef struct lay_improve_stats {
    uint64_t start_height, height;
    size_t windows; /* windows laid out again */
    size_t orders;  /* placement orders tried in them */
    size_t lowered; /* times the height went down */
    size_t exact;   /* clean windows laid out by layout_exact */
    size_t pinned;  /* windows searched around their crossing buffers (lay_bnb with pins) */
    size_t pushed;  /* times pushing the whole layout down lowered it (with pinned) */
} lay_improve_stats;

uint64_t lay_improve(const layout_problem *p, uint64_t *offsets, uint64_t stop_at, lay_budget *bud,
                     int pinned, lay_improve_stats *st);

/* layout_sweep.c: the search in time order for problems with no slack at
 * any step (capacity == live size at every step from the first start to
 * the last end): LAY_FOUND with offsets, or LAY_GAVE_UP (not such a
 * problem, deadline, or its search exhausted: it never proves
 * infeasibility).  It counts no work (layout_solve runs it only without a
 * work budget): deadline (roamc_now() seconds) alone stops it.
 * *nodes_out (may be NULL): placements tried.  Used by layout_solve
 * only. */
lay_status lay_sweep(const layout_problem *p, uint64_t capacity, double deadline, uint64_t *offsets,
                     uint64_t *nodes_out);

/* The pruning rules of lay_bnb (layout_bnb_rules of layout.h): all on
 * but energy (the skyline search's rule, which costs more than it
 * prunes). */
void lay_bnb_defaults(layout_bnb_rules *p);
/* The rules lay_improve searches its windows around pins with: canonical,
 * dominance, section, monotonic, fit and hatless (every rule is valid with
 * pins; these are the ones measured there, layout/LAYOUT.md, PINNED). */
void lay_bnb_pinned_defaults(layout_bnb_rules *p);

typedef struct lay_bnb_stats {
    uint64_t nodes;      /* search nodes explored (all restarts) */
    uint64_t backtracks; /* nodes all of whose branches failed */
    uint64_t splits;     /* decompositions into independent pieces */
    uint64_t restarts;   /* runs of the round robin started */
} lay_bnb_stats;

/* Exact branch and bound for a layout of p no higher than capacity (sizes
 * are rounded up to p->align), its pinned buffers (pins, may be NULL)
 * where they are: every free buffer's top at most capacity; pins may
 * reach above it.  LAY_FOUND with all p->n offsets written,
 * LAY_INFEASIBLE when it proved none exists, LAY_GAVE_UP when bud (not
 * NULL; bud->stop says which limit; LAY_STOP_SIZE: the pins' ranges
 * passed the search's memory cap) ran out first.  rules NULL:
 * lay_bnb_defaults; st may be NULL.  Deterministic unless the deadline
 * fires.  Memory: the pairs of buffers whose lifetimes meet, and with
 * pins the ranges of those each buffer and each section meets. */
typedef struct lay_bnb_task {
    const layout_problem *p;
    const lay_pins *pins; /* NULL: none pinned */
    uint64_t capacity;
    const layout_bnb_rules *rules; /* NULL: lay_bnb_defaults */
} lay_bnb_task;
lay_status lay_bnb(const lay_bnb_task *t, lay_budget *bud, uint64_t *offsets, lay_bnb_stats *st);

/* lay_bnb in steps, for round robins shared with other searches: a context
 * for the reduced problem red (which it keeps a pointer to) of p's
 * buffers, and of mirror (the same buffers with time reversed, may be
 * NULL); each run is one strategy h (0 .. lay_bnb_strategies - 1: a
 * preorder and a direction) with a node limit.  A run sets bud->stop: a
 * run that ends by its node limit returns LAY_GAVE_UP with LAY_STOP_NONE;
 * LAY_FOUND writes all p->n offsets.  Counts go to *st (not NULL), which
 * the caller zeroes.  red may carry pins (lay_reduce_pinned); lay_bnb_new
 * returns NULL only when their ranges pass the search's memory cap (out
 * of memory ends the process). */
typedef struct lay_bnb_ctx lay_bnb_ctx;
lay_bnb_ctx *lay_bnb_new(const layout_problem *p, const layout_buffer *mirror,
                         const lay_reduced *red, uint64_t capacity, const layout_bnb_rules *rules,
                         lay_bnb_stats *st);
size_t lay_bnb_strategies(const lay_bnb_ctx *c);
lay_status lay_bnb_run(lay_bnb_ctx *c, size_t h, long long limit, lay_budget *bud,
                       uint64_t *offsets);
void lay_bnb_free(lay_bnb_ctx *c);

/* Which searches lay_search runs round robin, and how: engines is a bit
 * set of LAYOUT_ENGINE_SKYLINE (the skyline search of layout_search.c,
 * branching on the most constrained cell) and LAYOUT_ENGINE_BNB (the
 * canonical branch and bound of layout_bnb.c). */
/* The members of lay_search's portfolio, in the order they run in each
 * round (layout_search.c lists them; layout/LAYOUT.md, PORTFOLIO). */
enum {
    LAY_MEMBER_SKYLINE_169 = 0, /* skyline, preorders WZ ZW W TWZ (169a928) */
    LAY_MEMBER_SKYLINE_RANDOM,  /* skyline, preorders TR WR */
    LAY_MEMBER_BNB,             /* the canonical branch and bound */
    LAY_SEARCH_MEMBERS
};

/* A strategy of lay_search's portfolio: the round (by its node limit) and
 * its position in the round (members in order, then their strategies). */
typedef struct lay_search_pos {
    long long limit; /* 0: the first round */
    unsigned next;
} lay_search_pos;

typedef struct lay_search_opts {
    int engines;                            /* LAYOUT_ENGINE_* bits; both by default */
    unsigned share_den[LAY_SEARCH_MEMBERS]; /* per member: its node limit is
                               the round's divided by this; 0: left out */
    layout_bnb_rules rules;                 /* the branch and bound's rules */
    size_t max_buffers;                     /* more buffers left after those that conflict
                               with all others are stacked: gives up
                               (LAY_STOP_SIZE); LAYOUT_SEARCH_MAX_BUFFERS
                               by default */
    lay_search_pos *pos;                    /* NULL, or in: the strategy to
                               start at (the ones before it gave up at their
                               node limits in an earlier search of the same
                               problem, capacity, engines, shares and rules:
                               the portfolio is deterministic, so they would
                               again); out, when work or time stopped the
                               search: the strategy they cut */
} lay_search_opts;

/* Fills o with the defaults: both engines, lay_bnb_defaults' rules,
 * LAYOUT_SEARCH_MAX_BUFFERS, LAYOUT_SHARES_EQUAL (the plans' shares). */
void lay_search_defaults(lay_search_opts *o);
/* Sets o's share_den to those of a share set (layout.h). */
void lay_search_shares(lay_search_opts *o, layout_shares which);

/* The exact search for a layout of p no higher than capacity, on a budget:
 * the portfolio of opts (NULL: the defaults): in rounds of doubling node
 * limits, each member of LAY_MEMBER_* whose engine is in opts->engines, in
 * that order, with its share of the limit.  bud (not NULL)
 * is spent and its stop set as lay_budget says; nodes are counted into *st
 * (may be NULL; zeroed first).  Returns a lay_status, offsets written when
 * LAY_FOUND. */
lay_status lay_search(const layout_problem *p, uint64_t capacity, const lay_search_opts *opts,
                      lay_budget *bud, uint64_t *offsets, lay_bnb_stats *st);

/* Exact search for a layout no higher than capacity: a depth-first branch
 * and bound that fills the address x time plane from the bottom, at the
 * most constrained free cell (layout_search.c explains the branching and
 * the pruning), restarted round robin over several buffer orders and over
 * the mirror image in time with doubling node limits.  Sizes are rounded up
 * to align.  Returns LAY_FOUND and writes offsets when it finds a layout;
 * LAY_INFEASIBLE when it proved that none exists; LAY_GAVE_UP when it gave
 * up (time_limit_s ran out, or more than max_buffers buffers are left
 * after those that conflict with all others are stacked at the bottom).
 * No work budget: lay_search with the defaults but max_buffers, on the
 * clock (the tests' entry point).
 * Sections and twins come from layout_sections.c.  A node costs
 * O(n + sections spanned); the recursion is about 3 frames (a few hundred
 * bytes) per buffer deep, hence LAYOUT_SEARCH_MAX_BUFFERS for threads with
 * small stacks.  Deterministic except where the time limit cuts it. */
#define LAYOUT_SEARCH_MAX_BUFFERS 4000
lay_status layout_search(const layout_problem *p, uint64_t capacity, double time_limit_s,
                         size_t max_buffers, uint64_t *offsets);

#endif
