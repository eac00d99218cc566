/* graph/ — the IR every later stage works on.
 *
 * Built from a loaded fe_model: operators are its nodes (same indices),
 * tensors are its values (same indices).  graph adds what planning needs:
 *   - storages: alias groups (a view or in-place output shares its input's
 *     storage), each sized to its largest tensor rounded up to align;
 *   - ordering edges: data edges plus, for an in-place write of x, an edge
 *     from every other reader of x to the writer;
 *   - per operator, the storages it touches;
 *   - liveness and the theoretical peak of any schedule, in O(ops + edges).
 *
 * The graph borrows the fe_model: keep the model alive until graph_free.
 *
 * Threads: everything here is reentrant except graph_build, graph_min_live
 * and graph_min_live_split, which call igraph (not thread-safe as Debian
 * builds it): call those from one thread at a time.  The planner does;
 * only its leaf orders run in parallel.
 */
#ifndef ROAMC_GRAPH_H
#define ROAMC_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "frontend.h"

typedef struct graph_storage {
    int *tensors; /* value indices, ascending */
    size_t n_tensors;
    uint64_t size;   /* largest tensor, rounded up to align */
    int root;        /* the tensor the others alias (an input or the first produced) */
    bool has_input;  /* holds a graph input or initializer: live from step 0 */
    bool has_output; /* holds a graph output: live to the last step */
    bool persistent; /* lives for the whole step (see graph_build) */
    bool gradient;   /* holds a parameter's gradient (metadata roamc.gradients) */
} graph_storage;

typedef struct graph {
    const fe_model *model;
    size_t n_ops, n_tensors, n_storages;
    uint64_t align;
    int *storage_of; /* per tensor */
    graph_storage *storages;
    /* Ordering edges as CSR, deduplicated and sorted: successors of op i are
     * succ[succ_start[i] .. succ_start[i+1]), predecessors likewise. */
    size_t *succ_start, *pred_start;
    int *succ, *pred;
    size_t n_edges;
    /* Storages op i reads or writes, deduplicated: touch[touch_start[i]..). */
    size_t *touch_start;
    int *touch;
    /* Storages op i creates (the first producer of the storage's root):
     * make[make_start[i] .. make_start[i+1]). */
    size_t *make_start;
    int *make;
    /* When true, gradient storages live to the last step, as eager PyTorch
     * keeps each .grad until the next zero_grad (graph_build sets false;
     * set it before planning to model what PyTorch really holds). */
    bool retain_gradients;
} graph;

/* Builds the IR.  align >= 1 rounds storage sizes.  Persistent storages: a
 * storage holding a graph input that some node writes in place (parameters
 * and optimizer state), a storage named in the metadata keys roamc.parameters
 * or roamc.optimizer_state, an initializer, or a graph output.  Returns 0, or
 * -1 with "PATH: what (where)" in err for a cycle in the ordering edges (the
 * message names operators on it), an in-place write whose other readers
 * cannot run before it, or storages (rounded up to align) that add up to
 * more than 2^62 bytes, so that every sum of sizes later fits in 64 bits. */
int graph_build(const fe_model *m, uint64_t align, graph *g, char *err, size_t errlen);
void graph_free(graph *g);

/* One pair of the mutation order of a storage written in place
 * (shared/DESIGN.md "Ordering edges"): op `before` must run before op
 * `after`.  One of the two is `writer`, which overwrites value `written`
 * of the storage in place; the other accesses the storage through value
 * `read` (the written value itself, or a view of the storage made before or
 * after the write).  For two writes in a row, writer is the first and read
 * is what the second reads. */
typedef struct graph_mutation {
    int before, after;
    int storage;
    int writer;
    int written, read;
} graph_mutation;

/* Called once per pair; a non-zero return stops the walk and is returned. */
typedef int (*graph_mutation_fn)(void *ctx, const graph_mutation *mu);

/* Walks the mutation order of every storage written in place, taking the
 * file's node order as the program's meaning: a node that reads a storage
 * between two in-place writes of it gives the pairs (first write, node) and
 * (node, second write); consecutive writes give (first, second).  The pairs
 * come in file order of `after` and may repeat a (before, after) pair seen
 * through another value.  graph_build makes these pairs ordering edges;
 * `roamc check` tests a schedule against them.  O(ops + accesses).
 * Returns 0, or fn's non-zero value. */
int graph_mutation_order(const graph *g, graph_mutation_fn fn, void *ctx);

/* Display name of op i: its node name, else "op_type#i".  Never NULL. */
const char *graph_op_label(const graph *g, int op, char *buf, size_t len);

/* Program order: the file's node order when it is topological, else the
 * topological order that keeps file order wherever the edges allow.
 * Writes n_ops op indices into order. */
void graph_program_order(const graph *g, int *order);

/* Checks that order is a permutation of the ops that respects every ordering
 * edge.  Returns 0, or -1 with a message in err (may be NULL). */
int graph_check_schedule(const graph *g, const int *order, char *err, size_t errlen);

/* Lifetimes of all storages under a schedule (shared/DESIGN.md "Lifetime"):
 * start[s], end[s] in steps, closed.  order must be a valid schedule.  With
 * g->retain_gradients, gradient storages end at the last step. */
void graph_lifetimes(const graph *g, const int *order, int32_t *start, int32_t *end);

/* Theoretical peak of a schedule: max over steps of the bytes of live
 * storages.  *without_persistent (may be NULL) gets the same maximum over
 * non-persistent storages only; *peak_step (may be NULL) the first step that
 * reaches the peak.  O(ops + touches). */
uint64_t graph_peak(const graph *g, const int *order, uint64_t *without_persistent, int *peak_step);

/* The bytes of live storages at each step of a schedule: live[0..n_ops),
 * whose maximum is graph_peak's.  O(ops + storages). */
void graph_live_bytes(const graph *g, const int *order, uint64_t *live);

/* Bytes of the persistent storages. */
uint64_t graph_persistent_bytes(const graph *g);

/* A lower bound of the theoretical peak over all schedules: persistent bytes
 * plus, at the op whose own working set is largest, the non-persistent
 * storages it touches (they must all be live while it runs). */
uint64_t graph_lower_bound(const graph *g);

/* ------------------------------------------------ operator orders (graph_order.c)
 *
 * A "leaf" is a set of operators that runs as one contiguous stretch of a
 * schedule, with everything else fixed around it: a block of a block
 * assignment.  A block assignment gives every op a block number such that
 * block[u] <= block[v] for every ordering edge u -> v; concatenating valid
 * orders of the blocks, in block order, is a valid schedule, and its
 * theoretical peak is the largest peak of a block (ROAM eq. 1-3). */

/* LESCEA list scheduling over the whole graph: at each step, the ready op
 * with the least net memory increase (bytes of the storages it creates
 * minus bytes of the storages whose last remaining use it is); ties go to
 * the lowest op index (program order).  Writes n_ops op indices into order. */
void graph_order_lescea(const graph *g, int *order);

/* One step of a transitive closure over bitsets (w 64-bit words per op):
 * adds to op v's set (sets + v * w) every neighbour u in adj[start[v] ..
 * start[v+1]) and u's own set.  Called for every op in topological order
 * with predecessors as neighbours (a graph's pred_start/pred, or a leaf's)
 * it gives the ancestors; in reverse order with successors, the
 * descendants.  O(neighbours x w). */
void graph_closure_join(uint64_t *sets, size_t w, int v, const size_t *start, const int *adj);

/* A lower bound of the theoretical peak over all schedules, at least
 * graph_lower_bound: at every op v, the storages live in every order: those
 * v touches, the persistent ones, and every storage made by an ancestor of
 * v (or an input) that a descendant of v touches (or that must outlive the
 * step).  Descendant sets as bitsets: O(n^2 / 8) bytes and
 * O(n * touches) time; graphs above max_ops get graph_lower_bound. */
uint64_t graph_order_lower_bound(const graph *g, size_t max_ops);

/* The least bytes live while an op runs, over every valid schedule: exact
 * per op, by a minimum s-t cut over the down-sets that can have run before
 * it (igraph's max-flow; the network is described in graph_cut.c).  Returns
 * the largest of these minima over ops[0..n): a lower bound of the
 * theoretical peak, usually tighter than graph_order_lower_bound where it is
 * taken at the steps a schedule peaks.  O(ops + edges + touches) memory and
 * one max-flow per given op.  Returns 0 when the bytes would not be exact
 * in igraph's doubles (over 2^51), UINT64_MAX when igraph fails. */
uint64_t graph_min_live(const graph *g, const int *ops, size_t n);

/* A lower bound of the theoretical peak of every schedule, at least
 * graph_min_live(g, &v, 1): where the least live set at v leaves out a
 * storage that some op w must still touch, running w before v may cost
 * more at w's own step than keeping the storage live at v.  The bound is
 * min(least live at v with the ops of W after v, min over w in W of
 * max(least live at v with w before v, least live at w with v after w)),
 * each case also conditioned on the members of W before w running after
 * v, for W chosen greedily among the first max_candidates such ops
 * (graph_cut.c says why it holds for every schedule).  Up to 3 max-flows
 * per candidate and 1 more.
 * Returns 0 when the bytes would not be exact in igraph's doubles,
 * UINT64_MAX when igraph fails. */
uint64_t graph_min_live_split(const graph *g, int v, size_t max_candidates);

/* Per-storage block span of a block assignment, computed once and shared by
 * every leaf of it.  first[s]: block that creates s (-1 for an input);
 * last[s]: last block that touches s (INT32_MAX when s must outlive the
 * step: persistent, a graph output, or a gradient under retain_gradients,
 * as graph_lifetimes has it). */
typedef struct graph_blocks {
    int n_blocks;
    const int *block; /* per op, borrowed */
    int32_t *first, *last;
    size_t *op_start; /* ops of block b: ops[op_start[b] .. op_start[b+1]), ascending */
    int *ops;
    int *pos; /* per op: its index in its block's ops (its local index in a leaf) */
    /* per block b: bytes of the storages with first < b < last, live through
     * the whole block (so that a leaf finds its base without a pass over
     * every storage) */
    uint64_t *through;
} graph_blocks;

/* block[op] in 0..n_blocks-1 must be monotone along ordering edges (asserted).
 * O(ops + edges + touches + storages + n_blocks). */
void graph_blocks_init(const graph *g, const int *block, int n_blocks, graph_blocks *B);
void graph_blocks_free(graph_blocks *B);

/* One leaf, with local indices: local op i is global op ops[i] (ascending,
 * so local index order is program order); local storage j is global storage
 * st[j], one of those its ops touch.  A leaf order is a permutation of
 * 0..n_ops-1 (local op indices). */
typedef struct graph_leaf {
    size_t n_ops, n_st;
    int *ops, *st;
    uint64_t *size; /* per local storage */
    bool *live_in;  /* live when the leaf starts: not created by a leaf op */
    bool *live_out; /* live when it ends: touched by a later block, persistent or an output */
    uint64_t base;  /* bytes live through the whole leaf that no leaf op touches */
    size_t *touch_start, *make_start, *pred_start, *succ_start;
    int *touch, *make, *pred, *succ; /* local storages / local ops, CSR */
} graph_leaf;

/* The leaf of block b of B, in O(its ops' touches + edges): independent of
 * the size of the graph, so a tree of many small leaves costs linear time in
 * all. */
void graph_leaf_init(const graph *g, const graph_blocks *B, int b, graph_leaf *L);
/* The whole graph as one leaf: inputs are live_in, the storages that outlive
 * the step (as graph_lifetimes has them) live_out, base 0. */
void graph_leaf_init_all(const graph *g, graph_leaf *L);
void graph_leaf_free(graph_leaf *L);

/* Peak bytes (including base) of a valid leaf order.  O(ops + touches). */
uint64_t graph_leaf_peak(const graph_leaf *L, const int *local_order);
/* 1 when local_order is a permutation that respects the leaf's edges. */
bool graph_leaf_order_valid(const graph_leaf *L, const int *local_order);
/* A lower bound of graph_leaf_peak over all orders of the leaf: base plus
 * the storages live through it, plus the largest working set of one op. */
uint64_t graph_leaf_lower_bound(const graph_leaf *L);
/* Leaf orders.  graph_leaf_program: the leaf's ops sorted by program_pos
 * (per global op: its step in graph_program_order), which is valid.
 * graph_leaf_lescea: LESCEA (see graph_order_lescea) within the leaf. */
void graph_leaf_program(const graph_leaf *L, const int *program_pos, int *local_order);
void graph_leaf_lescea(const graph_leaf *L, int *local_order);

/* Exact minimum-peak order of a leaf by dynamic programming over its
 * down-sets (sets of ops closed under predecessors), pruned by the bound
 * upper (the peak of a known order; pass UINT64_MAX for none).  A
 * deterministic work budget: gives up after max_states states.  Returns 1
 * and the optimal order and its peak, or 0 when the budget ran out (outputs
 * untouched).  Leaves of at most 512 ops. */
int graph_leaf_exact(const graph_leaf *L, uint64_t upper, size_t max_states, int *local_order,
                     uint64_t *peak);

/* The same search keeping only the best `width` states of each layer (by
 * peak so far, then live bytes): a deterministic heuristic for leaves too
 * wide for graph_leaf_exact, O(n * width * n) work.  Returns 1 with an
 * order and its peak, or 0 when no order within upper survived. */
int graph_leaf_beam(const graph_leaf *L, uint64_t upper, size_t width, int *local_order,
                    uint64_t *peak);

#endif
