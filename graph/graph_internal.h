/* graph_internal.h — helpers shared by the files of the graph part, not part
 * of its interface (graph.h). */
#ifndef ROAMC_GRAPH_INTERNAL_H
#define ROAMC_GRAPH_INTERNAL_H

#include "graph.h"

/* The inverse of the graph's per-op lists, per storage: maker[s] is the op
 * that creates s (-1 for an input), and the ops touching s are
 * ops[start[s] .. start[s+1]), in op order.  Both lower bounds walk a
 * storage's touchers; the graph itself only keeps them per op. */
typedef struct graph_touchers {
    int *maker;
    size_t *start;
    int *ops;
} graph_touchers;

/* Fills *t from g. */
void graph_touchers_build(const graph *g, graph_touchers *t);
void graph_touchers_free(graph_touchers *t);

/* Enters igraph: one thread at a time, with igraph returning error codes
 * instead of aborting (graph.c says why).  Every igraph call, igraph_vector
 * ones included, sits between graph_igraph_lock and graph_igraph_unlock. */
void graph_igraph_lock(void);
void graph_igraph_unlock(void);

#endif
