/* graph_streams.h — happens-before of a schedule run on several streams
 * (shared/DESIGN.md "Several streams (roam-plan v2)").
 *
 * a happens before b when they share a stream and a comes first, when [a, b]
 * is a wait, or through a chain of these.  Kept as vector clocks, as
 * shared/tools/check_plan.py keeps it: clock[b][s] counts the ops of stream
 * s that happen before b or are b, so a (on stream s, its pos-th op) happens
 * before b exactly when clock[b][s] >= pos(a).  O(ops x streams) memory and
 * time to build, O(1) per query: never quadratic in ops.
 *
 * The memory rule: two buffers may share an address only when ordered, i.e.
 * every op touching the earlier happens before the first op touching the
 * later.  Per buffer it is enough to keep its first toucher and its last
 * toucher on each stream (same-stream order covers the others).
 *
 * Buffers here are anything with a list of touching ops (a graph's storages,
 * a plan's buffers, a test's random sets): touch lists in CSR form. */
#ifndef ROAMC_GRAPH_STREAMS_H
#define ROAMC_GRAPH_STREAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph.h"

typedef struct graph_hb {
    size_t n_ops, n_pushed;
    int n_streams;
    int32_t *step;   /* per op: its step, -1 until pushed */
    int32_t *stream; /* per op */
    int32_t *pos;    /* per op: 1-based position on its stream */
    int32_t *clock;  /* per op: n_streams counts (see above) */
    int32_t *last;   /* per stream: the last op pushed on it, -1 for none */
} graph_hb;

/* An empty order over n_ops ops and n_streams >= 1 streams. */
void graph_hb_init(graph_hb *hb, size_t n_ops, int n_streams);
void graph_hb_free(graph_hb *hb);

/* Appends op as the next step, on stream (0 .. n_streams-1), after the ops
 * waits[0 .. n) (each pushed already).  O(streams x (1 + n)). */
void graph_hb_push(graph_hb *hb, int op, int stream, const int *waits, size_t n);

/* Whether a happens before b (both pushed; false when a == b). */
static inline bool graph_hb_before(const graph_hb *hb, int a, int b) {
    return a != b &&
           hb->clock[(size_t)b * (size_t)hb->n_streams + (size_t)hb->stream[a]] >= hb->pos[a];
}

/* The whole order of a plan: order[0 .. n_ops) the schedule, stream[s] the
 * stream of step s (NULL: all on stream 0), waits n_waits pairs [a, b] as
 * waits[2k], waits[2k+1].  Returns 0, or -1 with a message for a stream id
 * out of 0 .. n_streams-1 or a wait whose ops are out of range or not in
 * schedule order (a before b). */
typedef struct graph_hb_order {
    size_t n_ops;
    const int *order;  /* the schedule: n_ops ops */
    const int *stream; /* per step, or NULL: all on stream 0 */
    int n_streams;
    const int *waits; /* n_waits pairs */
    size_t n_waits;
} graph_hb_order;
int graph_hb_build(graph_hb *hb, const graph_hb_order *o, char *err, size_t errlen);

/* The ordering edges of g (data edges and the mutation order) that the
 * order does not cover: returns how many, the first one (in op order of the
 * source) in *from, *to (untouched when none).  O(edges). */
size_t graph_hb_uncovered(const graph *g, const graph_hb *hb, int *from, int *to);

/* Per buffer: the first op touching it (-1: none) and the last op touching
 * it on each stream (-1: none on that stream). */
typedef struct graph_hb_touches {
    size_t n_buffers;
    int n_streams;
    int32_t *first;
    int32_t *last; /* n_buffers x n_streams */
} graph_hb_touches;

/* From touch lists: buffer b is touched by ops[start[b] .. start[b+1]). */
void graph_hb_touches_build(const graph_hb *hb, size_t n_buffers, const size_t *start,
                            const int *ops, graph_hb_touches *t);
/* The same for the storages of g (each op's g->touch). */
void graph_hb_touches_of_graph(const graph *g, const graph_hb *hb, graph_hb_touches *t);
void graph_hb_touches_free(graph_hb_touches *t);

/* Whether buffer a is ordered before buffer b: every op touching a happens
 * before the first op touching b (true when either is touched by no op).
 * O(streams). */
bool graph_hb_ordered(const graph_hb *hb, const graph_hb_touches *t, int a, int b);

/* Whether a and b may share an address under the memory rule: ordered one
 * way or the other. */
static inline bool graph_hb_may_share(const graph_hb *hb, const graph_hb_touches *t, int a, int b) {
    return graph_hb_ordered(hb, t, a, b) || graph_hb_ordered(hb, t, b, a);
}

/* Lifetimes that make the memory rule a lifetime rule: xend[b] >= end[b] is
 * the last step of an op that is not ordered after every toucher of b.  A
 * buffer whose first toucher runs at its start step after xend[a] is then
 * ordered after a, so a layout in which buffers whose [start, xend]
 * intervals overlap never share an address obeys the memory rule (and the
 * single-stream rule, as xend >= end).  A buffer touched on one stream only,
 * whose touchers every other stream's later ops wait for, keeps its end.
 * start[b] must be the step of b's first toucher or earlier.
 * O(buffers x streams^2 x log ops). */
void graph_hb_extend(const graph_hb *hb, const graph_hb_touches *t, const int32_t *end,
                     int32_t *xend);

/* A lower bound of the arena of every layout obeying both rules: the bytes
 * of a set of buffers that pairwise conflict (lifetimes [start, end]
 * overlap, or unordered).  The set: the buffers live at step `at`, then,
 * largest first, every other buffer in conflict with all of the set, while
 * at most `work` pair tests are spent (a clique of the conflict graph,
 * greedy: the exact one, a maximum-weight antichain of the buffers' order,
 * is not computed).  *members (may be NULL) gets the set's size. */
typedef struct graph_hb_buffers {
    const uint64_t *size;   /* per buffer (t->n_buffers of them) */
    const int32_t *start;   /* lifetimes [start, end], steps */
    const int32_t *end;     /* (graph_hb_check_layout: not read) */
    const uint64_t *offset; /* (graph_hb_clique_bound: not read) */
} graph_hb_buffers;
uint64_t graph_hb_clique_bound(const graph_hb *hb, const graph_hb_touches *t,
                               const graph_hb_buffers *bufs, int at, uint64_t work,
                               size_t *members);

/* The memory rule checked on a layout, exactly (a layout need not come from
 * graph_hb_extend): buffers by start[b] (then their first toucher's step),
 * each against the buffers that last held each of its addresses
 * (offset[b] .. offset[b] + size[b]; size 0 holds none), as
 * shared/tools/check_plan.py checks it; the order is transitive, so earlier
 * occupants need no test.  For each pair that breaks the rule, fn(ctx,
 * earlier, later, n, f): n touches the earlier buffer and does not happen
 * before f, the later one's first toucher; a non-zero return stops the walk
 * and is returned.  Returns 0 when the layout obeys the rule. */
typedef int (*graph_hb_clash_fn)(void *ctx, int earlier, int later, int n, int f);
int graph_hb_check_layout(const graph_hb *hb, const graph_hb_touches *t,
                          const graph_hb_buffers *bufs, graph_hb_clash_fn fn, void *ctx);

#endif
