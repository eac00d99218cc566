/* partition/ — the structure of a training graph that ROAM's ordering uses
 * (shared/DESIGN.md "ROAM in brief", the paper's sections IV-A and IV-C).
 *
 *   - weight-update branches: ops whose every successor is an update op and
 *     that lead to an in-place write of persistent state (the optimizer);
 *   - memory-insensitive (MI) operators of the rest: ops with the same step
 *     in every valid order, found in linear time;
 *   - independent segments between consecutive MI ops;
 *   - the forward pass (ancestors of the loss, from metadata roamc.loss or
 *     found structurally) and the backward pass;
 *   - placement of each update op into a segment (eqs. 4-6, or a fixed rule);
 *   - a block assignment: the order of the whole graph is the concatenation
 *     of an order of each block (eq. 3), and its peak the largest block peak
 *     (eq. 1), so blocks are solved independently;
 *   - the subgraph tree of Algorithm 1: independent subgraphs (a forward
 *     range paired with its backward twin range, such that no activation
 *     crosses them) split into dependent subgraphs of at most node_limit ops.
 */
#ifndef ROAMC_PARTITION_H
#define ROAMC_PARTITION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "graph.h"

/* Memory-insensitive ops of the sub-DAG induced by the ops with mask[op]
 * (mask NULL: all ops): mi[op] is true when every other masked op is an
 * ancestor or a descendant of op within the sub-DAG, i.e. op has the same
 * step in every valid order of it.  topo lists the masked ops in a valid
 * order (n entries).  O(n + edges).  Returns the count. */
int partition_memory_insensitive(const graph *g, const bool *mask, const int *topo, size_t n,
                                 bool *mi);

/* Where update ops go. */
typedef enum partition_placement {
    PARTITION_PLACE_RULE,      /* the memory-aware rule of eqs. 4-6 */
    PARTITION_PLACE_IMMEDIATE, /* the first segment after the gradient is ready */
    PARTITION_PLACE_PROGRAM,   /* the segment where program order runs it */
    PARTITION_PLACE_LATE,      /* after the whole backward pass */
    PARTITION_PLACE_REFERENCE, /* the segment where the reference order runs it */
    PARTITION_PLACE_COUNT
} partition_placement;

/* The name of p in reports (a static string). */
const char *partition_placement_name(partition_placement p);

/* Where floating ops go (ops analysed apart from the MI ops, see
 * partition.c): between their anchored ancestors and descendants. */
typedef enum partition_floating {
    /* early when it reads more than twice what it creates, else just in time */
    PARTITION_FLOAT_RULE,
    PARTITION_FLOAT_LATE,      /* just before the first anchored consumer */
    PARTITION_FLOAT_EARLY,     /* just after the last anchored producer */
    PARTITION_FLOAT_REFERENCE, /* the segment where the reference order runs it */
    PARTITION_FLOAT_COUNT
} partition_floating;

/* The name of f in reports (a static string). */
const char *partition_floating_name(partition_floating f);

typedef struct partition_options {
    int node_limit;   /* most ops in a leaf; a graph this small is one leaf */
    int delay_radius; /* r: how many segments an update may be delayed */
    partition_placement placement;
    partition_floating floating;
    /* With PARTITION_PLACE_REFERENCE / PARTITION_FLOAT_REFERENCE: per op,
     * its step in a valid order (e.g. LESCEA's).  The blocks are then
     * consistent with that order (it runs them one after another), and
     * blocks larger than node_limit are cut along it, so that order
     * restricted to each block is a candidate no worse than it globally. */
    const int *reference_pos;
} partition_options;

typedef enum partition_node_kind {
    PARTITION_ROOT,
    PARTITION_INDEPENDENT,
    PARTITION_DEPENDENT,
} partition_node_kind;

typedef struct partition_node {
    partition_node_kind kind;
    int parent; /* node index, -1 for the root */
    int *ops;   /* op indices, ascending */
    size_t n_ops;
    int *boundary; /* MI ops that bound it (outer_fwd, outer_bwd), if any */
    size_t n_boundary;
    int n_children;
} partition_node;

typedef struct partition {
    size_t n_ops;
    bool *update;  /* per op: in a weight-update branch */
    bool *mi;      /* per op: memory-insensitive among the non-update ops */
    bool *forward; /* per op: in the forward pass (ancestor of the loss, or it) */
    int loss_op;   /* the op that produces the loss, -1 when none was found */
    bool loss_from_metadata;
    double alpha; /* gradient multiplier of the rule: 3 adam/adamw, 1 sgd */
    size_t n_mi, n_update, n_segments, n_floating;
    /* Block assignment: block[op] in 0..n_blocks-1, monotone along edges. */
    int *block;
    int n_blocks;
    /* The tree: nodes[0] is the root; children follow their parent. */
    partition_node *nodes;
    size_t n_nodes;
    size_t n_independent, n_dependent, largest_leaf;
} partition;

/* Analyses g and builds blocks and tree.  program_pos: per op, its step in
 * graph_program_order.  Free P with partition_free. */
void partition_build(const graph *g, const partition_options *opt, const int *program_pos,
                     partition *P);
void partition_free(partition *P);

/* A final schedule: order[i] the op run at step i (n_ops ops, any valid
 * schedule, not necessarily one built from a partition), and the storages'
 * closed lifetimes under it, start[s] and end[s] (graph_lifetimes). */
typedef struct partition_schedule {
    const int *order;
    const int32_t *start, *end;
} partition_schedule;

/* Layout groups of the subgraph tree (the paper's section IV-B, Fig. 8):
 * which leaf subgraph's layout each storage belongs to, for the schedule
 * sched.  A storage is created by the op at step start[s] and freed after
 * the op at step end[s]; with leaf(op) the leaf node holding op:
 *   - both ops in one leaf: that leaf;
 *   - created in forward, freed in backward or elsewhere (COFI): the leaf
 *     where it is freed;
 *   - created in backward (CIFO): the leaf where it is created;
 *   - created and freed in forward in different leaves (COFO for the
 *     leaves between), or an op outside every leaf: no group (-1), laid out
 *     afterwards with the other leftovers.
 * Leaves are the tree nodes without children (the root alone when the graph
 * is one leaf), numbered 0.. in node order; persistent storages go to one
 * more group, numbered after the leaves, meant for the bottom of the arena.
 * Writes group[s] (n_storages entries) and, when activation is not NULL,
 * activation[s]: a non-persistent storage created in forward and freed in
 * backward (an activation, long-lived in its group), or a persistent one.
 * Returns the number of groups (leaves + 1: the last is the persistent
 * group, possibly empty). */
int partition_layout_groups(const graph *g, const partition *P, const partition_schedule *sched,
                            int *group, bool *activation);

/* Writes the tree as JSON to f: {"nodes": [{"id", "kind", "parent",
 * "operators": [...], "boundary": [...]}, ...], plus the counts} (the
 * caller owns f: roamc's --dump-tree is one of a run's all-or-nothing
 * outputs).  Returns 0, or -1 with a message in err. */
int partition_dump_tree(const partition *P, const graph *g, FILE *f, char *err, size_t errlen);

#endif
