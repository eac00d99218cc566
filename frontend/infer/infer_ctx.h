/* infer_ctx.h — the inference driver's state, shared by the driver's own
 * files and by no rule file (those see infer.h alone).  Calls run one way,
 * down this list:
 *   infer.c       the driver: rule lookup, one node, one graph, the model;
 *   infer_body.c  bodies: what they read from enclosing graphs and the
 *                 memory they work in (infer.h "memory of bodies");
 *   infer_kit.c   the kit the rule files use: attributes, inputs, outputs,
 *                 dims arithmetic;
 *   infer_core.c  the state: the arena and the sticky error, symbols,
 *                 scopes, tensors from the file, known/unknown dims.
 */
#ifndef ROAMC_INFER_CTX_H
#define ROAMC_INFER_CTX_H

#include "infer.h"

/* All inference memory comes from one arena with a cap: a model whose
 * shape computations would need more is refused, not swapped to death. */
#define FI_ARENA_CAP ((size_t)1 << 30)
#define FI_ARENA_CHUNK ((size_t)1 << 20)

typedef struct fi_chunk {
    struct fi_chunk *next;
    size_t used, cap;
    max_align_t data[];
} fi_chunk;

typedef struct fi_symbol {
    char *name;
    int64_t value; /* -1: unbound */
    int kind;      /* FE_SYMBOL_INPUT or FE_SYMBOL_DATA */
    int node;      /* data symbols: main-graph node, or -1 */
} fi_symbol;

/* Name -> tensor, open addressing; one per graph scope. */
typedef struct fi_scope {
    struct fi_scope *parent;
    const char **names;
    fi_tensor **tensors;
    size_t cap, n; /* cap: power of two */
} fi_scope;

struct fi_ctx {
    const Onnx__ModelProto *mp;
    const fe_options *opt;
    fi_chunk *arena;
    size_t arena_total;
    fi_symbol *syms;
    size_t n_syms, cap_syms;
    const fi_rule **rules; /* sorted by op_type */
    size_t n_rules;
    fi_scope *main_scope;
    fi_scope *cur; /* the scope of the graph whose nodes run now */
    int depth;
    char *err;
    size_t errlen;
    bool failed;
    size_t n_conflicts; /* declared shapes that inference contradicted */
    size_t node_runs;   /* nodes inferred so far (FI_MAX_NODE_RUNS) */
    char conflict[512]; /* the first of them, for the report */
    /* Working memory of bodies (infer.h "memory of bodies"): a pointer map
     * from a GraphProto (its peak) or a NodeProto (its working memory) to
     * bytes and the values left unsized, open addressing, malloc'ed. */
    const void **pm_key;
    uint64_t *pm_bytes;
    size_t *pm_unsized;
    size_t pm_cap, pm_n;
    fi_body_use *main_use; /* per main-graph node */
    size_t n_main;
    int cur_main;          /* the main-graph node being inferred, -1 outside */
    const int *last_order; /* the order of the nodes fi_run_nodes ran last */
    /* values made inside bodies (fi_inner_get), malloc'ed arrays */
    const char **in_name;
    fi_tensor **in_t;
    int *in_node;
    size_t n_in, cap_in;
    fi_names in_idx;
};

/* ----------------------------------------- infer_core.c, for the others */

/* Arena memory (NULL once inference failed: the caller stops). */
void *fi_alloc(fi_ctx *cx, size_t bytes);
/* Fails inference outside any node (the model, a graph); returns -1. */
int fi_ctx_fail(fi_ctx *cx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The node's name, or its op_type when it has none. */
const char *fi_label(const Onnx__NodeProto *np);
/* The --dim value for a symbol, or -1. */
int64_t fi_flag_dim(const fi_ctx *cx, const char *name);
/* The symbol named name, added (value, kind, node) when new; -1 after a
 * failure. */
int32_t fi_symbol_add(fi_ctx *cx, const char *name, int64_t value, int kind, int node);
/* The slot of name in s itself (empty when absent). */
size_t fi_scope_slot(const fi_scope *s, const char *name);
/* A scope nested in parent (NULL: none) with room for expected names, or
 * NULL after a failure. */
fi_scope *fi_scope_new(fi_ctx *cx, fi_scope *parent, size_t expected);
/* The tensor named name in s or an enclosing scope, or NULL. */
fi_tensor *fi_scope_find(const fi_scope *s, const char *name);
/* Binds name in s (replacing an earlier binding in s). */
void fi_scope_put(fi_scope *s, const char *name, fi_tensor *t);
/* A tensor with nothing known, or NULL after a failure. */
fi_tensor *fi_tensor_new(fi_ctx *cx);
/* Fills t from a TypeProto.  Non-tensor types (sequence, map, optional)
 * leave t unknown.  Returns -1 on a negative or too large dim. */
int fi_from_type(fi_ctx *cx, fi_tensor *t, const Onnx__TypeProto *tp, const char *name);
/* Fills t with the type, shape and (when small and stored in the file
 * itself) the value of a TensorProto.  External data is never read: only
 * its shape matters.  Returns -1 on bad dims. */
int fi_from_tensor_proto(fi_ctx *cx, fi_tensor *t, const Onnx__TensorProto *tp, const char *name);
/* The model-local function a node calls, or NULL. */
const Onnx__FunctionProto *fi_function_find(const fi_ctx *cx, const Onnx__NodeProto *np);

/* ---------------------------------------------- infer_body.c, for infer.c */

/* After a body ran in scope s (cx->last_order its order): its nested
 * arena's peak, recorded under g (a subgraph) or as the working memory of
 * the call (a function, call != NULL), and its values for fi_inner_get. */
void fi_body_record(fi_ctx *cx, fi_scope *s, const Onnx__GraphProto *g, fi_node *call);

#endif
