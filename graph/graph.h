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
    uint64_t size; /* largest tensor, rounded up to align */
    int root;      /* the tensor the others alias (an input or the first produced) */
    bool has_input;   /* holds a graph input or initializer: live from step 0 */
    bool has_output;  /* holds a graph output: live to the last step */
    bool persistent;  /* lives for the whole step (see graph_build) */
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
} graph;

/* Builds the IR.  align >= 1 rounds storage sizes.  Persistent storages: a
 * storage holding a graph input that some node writes in place (parameters
 * and optimizer state), a storage named in the metadata keys roamc.parameters
 * or roamc.optimizer_state, an initializer, or a graph output.  Returns 0, or
 * -1 with "PATH: what (where)" in err for a cycle in the ordering edges (the
 * message names operators on it) or an in-place write whose other readers
 * cannot run before it. */
int graph_build(const fe_model *m, uint64_t align, graph *g, char *err, size_t errlen);
void graph_free(graph *g);

/* Display name of op i: its node name, else "op_type#i".  Never NULL. */
const char *graph_op_label(const graph *g, int op, char *buf, size_t len);

/* Program order: the file's node order when it is topological, else the
 * topological order that keeps file order wherever the edges allow.
 * Writes n_ops op indices into order. Returns 0, -1 on out of memory. */
int graph_program_order(const graph *g, int *order);

/* Checks that order is a permutation of the ops that respects every ordering
 * edge.  Returns 0, or -1 with a message in err (may be NULL). */
int graph_check_schedule(const graph *g, const int *order, char *err, size_t errlen);

/* Lifetimes of all storages under a schedule (shared/DESIGN.md "Lifetime"):
 * start[s], end[s] in steps, closed.  order must be a valid schedule. */
void graph_lifetimes(const graph *g, const int *order, int32_t *start, int32_t *end);

/* Theoretical peak of a schedule: max over steps of the bytes of live
 * storages.  *without_persistent (may be NULL) gets the same maximum over
 * non-persistent storages only; *peak_step (may be NULL) the first step that
 * reaches the peak.  O(ops + touches).  Returns UINT64_MAX on out of memory. */
uint64_t graph_peak(const graph *g, const int *order, uint64_t *without_persistent, int *peak_step);

/* Bytes of the persistent storages. */
uint64_t graph_persistent_bytes(const graph *g);

/* A lower bound of the theoretical peak over all schedules: persistent bytes
 * plus, at the op whose own working set is largest, the non-persistent
 * storages it touches (they must all be live while it runs). */
uint64_t graph_lower_bound(const graph *g);

#endif
