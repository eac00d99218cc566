/* leaf.h — the one home of leaf ordering: the blocks of a block
 * assignment as leaves with local indices, and the orders searched on them
 * (program order and LESCEA restricted to a leaf, the exact DP over
 * down-sets and its beam, the leaf's peak and lower bound).
 *
 * A "leaf" is a set of operators that runs as one contiguous stretch of a
 * schedule, with everything else fixed around it: a block of a block
 * assignment.  A block assignment gives every op a block number such that
 * block[u] <= block[v] for every ordering edge u -> v; concatenating valid
 * orders of the blocks, in block order, is a valid schedule, and its
 * theoretical peak is the largest peak of a block (ROAM eq. 1-3).
 *
 * Where it sits in the one-way flow (frontend -> graph -> partition ->
 * ilp | layout -> planner): it reads the graph IR (graph.h) and keeps no
 * state there; partition.c cuts oversized blocks along these orders;
 * ilp/ilp_order.c models a leaf_graph as an ILP; planner/order.c drives
 * them (its leaf pool calls leaf_* and ilp_order_leaf, never graph/ for
 * leaf state).  Every function here is reentrant: leaves are ordered in
 * parallel.
 */
#ifndef ROAMC_LEAF_H
#define ROAMC_LEAF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph.h"

/* Per-storage block span of a block assignment, computed once and shared by
 * every leaf of it.  first[s]: block that creates s (-1 for an input);
 * last[s]: last block that touches s (INT32_MAX when s must outlive the
 * step: persistent, a graph output, or a gradient under retain_gradients,
 * as graph_lifetimes has it). */
typedef struct leaf_blocks {
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
} leaf_blocks;

/* block[op] in 0..n_blocks-1 must be monotone along ordering edges (asserted).
 * O(ops + edges + touches + storages + n_blocks). */
void leaf_blocks_init(const graph *g, const int *block, int n_blocks, leaf_blocks *B);
void leaf_blocks_free(leaf_blocks *B);

/* One leaf, with local indices: local op i is global op ops[i] (ascending,
 * so local index order is program order); local storage j is global storage
 * st[j], one of those its ops touch.  A leaf order is a permutation of
 * 0..n_ops-1 (local op indices). */
typedef struct leaf_graph {
    size_t n_ops, n_st;
    int *ops, *st;
    uint64_t *size; /* per local storage */
    bool *live_in;  /* live when the leaf starts: not created by a leaf op */
    bool *live_out; /* live when it ends: touched by a later block, or it outlives the step */
    uint64_t base;  /* bytes live through the whole leaf that no leaf op touches */
    size_t *touch_start, *make_start, *pred_start, *succ_start;
    int *touch, *make, *pred, *succ; /* local storages / local ops, CSR */
} leaf_graph;

/* The leaf of block b of B, in O(its ops' touches + edges): independent of
 * the size of the graph, so a tree of many small leaves costs linear time in
 * all. */
void leaf_init(const graph *g, const leaf_blocks *B, int b, leaf_graph *L);
/* The whole graph as one leaf: inputs are live_in, the storages that outlive
 * the step (as graph_lifetimes has them) live_out, base 0. */
void leaf_init_all(const graph *g, leaf_graph *L);
void leaf_free(leaf_graph *L);

/* Peak bytes (including base) of a valid leaf order.  O(ops + touches). */
uint64_t leaf_peak(const leaf_graph *L, const int *local_order);
/* 1 when local_order is a permutation that respects the leaf's edges. */
bool leaf_order_valid(const leaf_graph *L, const int *local_order);
/* A lower bound of leaf_peak over all orders of the leaf: base plus
 * the storages live through it, plus the largest working set of one op. */
uint64_t leaf_lower_bound(const leaf_graph *L);
/* Leaf orders.  leaf_program: the leaf's ops sorted by program_pos
 * (per global op: its step in graph_program_order), which is valid.
 * leaf_lescea: LESCEA (see leaf_lescea_graph) within the leaf. */
void leaf_program(const leaf_graph *L, const int *program_pos, int *local_order);
void leaf_lescea(const leaf_graph *L, int *local_order);

/* Exact minimum-peak order of a leaf by dynamic programming over its
 * down-sets (sets of ops closed under predecessors), pruned by the bound
 * upper (the peak of a known order; pass UINT64_MAX for none).  A
 * deterministic work budget: gives up after max_states states.  Returns 1
 * and the optimal order and its peak, or 0 when the budget ran out (outputs
 * untouched).  Leaves of at most 512 ops. */
int leaf_exact(const leaf_graph *L, uint64_t upper, size_t max_states, int *local_order,
               uint64_t *peak);

/* The same search keeping only the best `width` states of each layer (by
 * peak so far, then live bytes): a deterministic heuristic for leaves too
 * wide for leaf_exact, O(n * width * n) work.  Returns 1 with an
 * order and its peak, or 0 when no order within upper survived. */
int leaf_beam(const leaf_graph *L, uint64_t upper, size_t width, int *local_order, uint64_t *peak);

/* LESCEA list scheduling over the whole graph (one leaf of all ops): at each
 * step, the ready op with the least net memory increase (bytes of the
 * storages it creates minus bytes of the storages whose last remaining use
 * it is); ties go to the lowest op index (program order).  Writes n_ops op
 * indices into order. */
void leaf_lescea_graph(const graph *g, int *order);

#endif
