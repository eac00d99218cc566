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
#include <string.h>

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
    /* made by an ai.roamc Offload: lives in host memory, so size is 0 (it
     * takes no device bytes) and host_size is what it holds */
    bool host;
    uint64_t host_size;
    /* made (graph.h make) by a recompute clone (fe_node.recompute set) or by
     * an ai.roamc Reload: what --svg marks in a fitted step */
    bool recomputed;
    bool reloaded;
} graph_storage;

/* The domain of roamc's own nodes (Offload, Reload, the collectives). */
#define GRAPH_ROAMC_DOMAIN "ai.roamc"

/* Whether node n is roamc's own op_type ("Offload": graph_is_roamc_op(n,
 * "Offload")). */
static inline bool graph_is_roamc_op(const fe_node *n, const char *op_type) {
    return strcmp(n->domain, GRAPH_ROAMC_DOMAIN) == 0 && strcmp(n->op_type, op_type) == 0;
}

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
    /* What the training metadata says, resolved by graph_build so that
     * later parts read no ONNX metadata: the loss value (metadata
     * roamc.loss, when it names a produced value; -1 otherwise) and the
     * optimizer's state tensors per parameter (roamc.optimizer: 0 for
     * SGD, 2 for Adam and the like, -1 when the metadata does not say). */
    int loss_value;
    int optimizer_moments;
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

/* Whether s stays live to the end of the step once made (so its lifetime
 * ends at the last op whatever the order), as graph_lifetimes has it. */
static inline bool graph_storage_outlives(const graph *g, const graph_storage *st) {
    return st->persistent || st->has_output || (g->retain_gradients && st->gradient);
}

/* Bytes of the persistent storages. */
uint64_t graph_persistent_bytes(const graph *g);

/* A lower bound of the theoretical peak over all schedules: persistent bytes
 * plus, at the op whose own working set is largest, the non-persistent
 * storages it touches (they must all be live while it runs). */
uint64_t graph_lower_bound(const graph *g);

/* ------------------------------- bounds over all orders (graph_order.c, graph_cut.c)
 *
 * Leaves, block assignments and the orders searched on them are
 * partition/leaf.h's. */

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

/* ------------------------------- operator cost (graph_cost.c; the rules: graph/COST.md)
 *
 * What running one operator takes, from the inferred shapes and element
 * types alone: FLOPs (multiply and add count one each, so a multiply-add is
 * 2) and bytes moved (bytes read + bytes written, each value once, a view
 * output nothing).  planner/fit/fit.h turns these into seconds on a device.
 * The IR keeps no node attributes, so every rule works from shapes: a
 * convolution's FLOPs come from its weight's shape, a pooling window is not
 * known (COST.md says what each rule assumes). */

enum graph_cost_rule {
    GRAPH_COST_VIEW,          /* every output a view of an input: no kernel, 0 FLOPs, 0 bytes */
    GRAPH_COST_ALLOC,         /* memory handed out, nothing written (empty): 0, 0 */
    GRAPH_COST_FILL,          /* writes a constant or a shape's metadata: 0 FLOPs */
    GRAPH_COST_COPY,          /* moves or converts data: 0 FLOPs */
    GRAPH_COST_ELEMENTWISE,   /* k FLOPs per element (k per op: COST.md) */
    GRAPH_COST_REDUCE,        /* reductions and pools: k FLOPs per element */
    GRAPH_COST_NORM,          /* normalisations, softmax: k FLOPs per element */
    GRAPH_COST_GATHER,        /* reads only the indexed rows of its data input */
    GRAPH_COST_SCATTER,       /* writes its whole output, adds k x input 0 */
    GRAPH_COST_MATMUL,        /* 2 x output elements x K */
    GRAPH_COST_CONV,          /* 2 x output elements x (Cin / groups) x kernel */
    GRAPH_COST_CONV_BACKWARD, /* the forward's FLOPs per gradient made */
    GRAPH_COST_HOST_COPY,     /* ai.roamc Offload / Reload: bytes over the host link */
    GRAPH_COST_DEFAULT,       /* an op no rule knows: 1 FLOP per output element */
    GRAPH_COST_N_RULES
};

typedef struct graph_op_cost {
    double flops;      /* a double: sums reach 1e13 (a GPT-2 XL step) */
    uint64_t bytes;    /* read + written (HOST_COPY: the bytes copied) */
    int rule;          /* enum graph_cost_rule */
    int32_t elem_type; /* the element type that sets the rate: the first float input
                           it reads (matmul, conv: the data operand), else output 0's */
    bool tensor_op;    /* matmul / conv / conv backward: may run on tensor cores */
} graph_op_cost;

/* The cost of node op of m (shapes resolved, as fe_load leaves a model it
 * plans).  Pure; never fails: an op no rule knows gets GRAPH_COST_DEFAULT,
 * a rule whose operands lack the ranks it needs falls back to it too. */
graph_op_cost graph_op_cost_of(const fe_model *m, int op);

/* graph_op_cost_of for every op of g: out[0 .. g->n_ops). */
void graph_op_costs(const graph *g, graph_op_cost *out);

/* The rule's name as COST.md spells it ("matmul", "default", ...); never
 * NULL ("?" outside the enum). */
const char *graph_cost_rule_name(int rule);

#endif
