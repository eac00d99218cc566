/* frontend/infer/infer.h — shape and type inference, private to frontend/.
 *
 * The loader (frontend.c) asks infer.c for the element type and shape of
 * every value of the main graph; infer.c walks the graph in topological
 * order and runs one rule per operator (the rule files infer_math.c,
 * infer_nn.c, infer_shape.c, infer_control.c and infer_sequence.c, one op
 * family each, through the kit of infer_kit.c); infer_body.c keeps what
 * bodies read and the memory they work in.  A rule reads its inputs'
 * types, shapes and, for small integer tensors, their values (a shape
 * computed at run time: Shape -> Gather -> Concat -> Reshape), and sets its
 * outputs' types, shapes and values.
 *
 * Dims are concrete numbers or unknown.  An unknown dim remembers the symbol
 * it is (`batch`) or depends on (`batch * 196`), so that a message can name
 * the flag that binds it.  Sizes that depend on data (NonZero, TopK with a
 * computed K, Loop outputs) are planned at an upper bound: the rule makes a
 * "data symbol" with that bound (fi_data_dim) and every value computed from
 * it is marked as a bound.
 *
 * Out of memory, arithmetic overflow and broken models are all "sticky": the
 * first failure is recorded in the context and every later helper returns a
 * harmless value, so a rule never checks more than its own return code
 * (the ggml-alloc habit: one place handles failure).
 *
 * Includes run one way: the loader (frontend.c) and --train (train/)
 * include this header; inference includes only base.h and the two files
 * below the loader (bindings.h, elem.h), never frontend.h.
 */
#ifndef ROAMC_FRONTEND_INFER_H
#define ROAMC_FRONTEND_INFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "bindings.h"
#include "elem.h"
#include "onnx.pb-c.h"

/* The most dims a value may have; deeper ranks are refused with a message. */
#define FI_MAX_RANK 32
/* Values (of Shape, Range, ConstantOfShape, ...) are evaluated only up to
 * this many elements: shape computations are small; bigger results keep
 * their shape but not their data. */
#define FI_MAX_CONST_ELEMS 65536
/* Dims and element counts above this are refused: every size then stays
 * far from int64 overflow, and no real tensor comes near it. */
#define FI_MAX_DIM ((int64_t)1 << 62)
/* Subgraphs inside subgraphs, and functions calling functions. */
#define FI_MAX_DEPTH 64
/* Nodes inferred in all, subgraph bodies counted each time they run: Loops
 * nested in Loops may run their bodies twice each, 2^depth in all. */
#define FI_MAX_NODE_RUNS ((size_t)1 << 22)

typedef struct fi_ctx fi_ctx;

/* One dim.  v >= 0: known.  v < 0: unknown; sym is the symbol it is
 * (exact) or depends on (!exact), or -1 when nothing is known of it. */
typedef struct fi_dim {
    int64_t v;
    int32_t sym;
    bool exact;
} fi_dim;

/* What inference knows of one value.  elem 0 and rank -1 mean unknown. */
typedef struct fi_tensor {
    int32_t elem; /* onnx TensorProto.DataType */
    int rank;     /* -1: unknown */
    fi_dim *dims; /* rank entries (context arena) */
    /* The value itself, when known and at most FI_MAX_CONST_ELEMS elements:
     * ints for integer and bool types, floats (as double) for the others;
     * n_const elements in row-major order, n_const == -1 when unknown. */
    int64_t n_const;
    int64_t *ci;
    double *cf;
    int32_t blame; /* when the value is unknown: the symbol that hides it, or -1 */
    /* A sequence of tensors (SplitToSequence, SequenceConstruct, ...):
     * elem, rank and dims describe its elements (the largest, when they
     * differ, which marks it a bound) and seq_len counts them. */
    bool seq;
    fi_dim seq_len;
    bool bound;    /* the size is an upper bound (depends on data) */
    bool declared; /* the shape came from the file (value_info / graph input) */
} fi_tensor;

/* A node being inferred: its inputs and outputs (NULL where omitted) and
 * the opset version of its domain. */
typedef struct fi_node {
    fi_ctx *cx;
    const Onnx__NodeProto *np;
    int64_t opset;
    size_t n_in, n_out;
    fi_tensor **in, **out;
    /* Inside a model-local function: the calling node, whose attributes
     * an attribute with ref_attr_name refers to. */
    const struct fi_node *caller;
    int index; /* node index in the main graph, -1 inside a subgraph */
} fi_node;

typedef int (*fi_rule_fn)(fi_node *n);
/* One operator of the standard domain.  A rule handles every opset form
 * from `since` on itself (n->opset tells which form the file uses). */
typedef struct fi_rule {
    const char *op_type;
    fi_rule_fn fn;
} fi_rule;

/* Rule tables, one per family (NULL-terminated), listed in infer.c. */
/* infer_math.c: elementwise, reductions, activations, norms */
extern const fi_rule fi_rules_math[];
/* infer_nn.c: conv, pool, matmul, gemm, einsum, resize */
extern const fi_rule fi_rules_nn[];
/* infer_shape.c: shape ops, gather/scatter, constants */
extern const fi_rule fi_rules_shape[];
/* infer_control.c: If, Loop, Scan, data-dependent ops */
extern const fi_rule fi_rules_control[];
/* infer_sequence.c: sequences of tensors */
extern const fi_rule fi_rules_sequence[];
/* infer_llm.c: opset 23 Attention, RotaryEmbedding */
extern const fi_rule fi_rules_llm[];
/* infer_llm.c: the com.microsoft contrib operators of LLM decoders */
extern const fi_rule fi_rules_com_microsoft[];

/* ---------------------------------------------------------------- driver */

/* The name table of the loader and of train/: borrowed names to int
 * indices (inference's scopes keep theirs in its budgeted arena), open
 * addressing over fi_hash with linear probing, at most half full, growing
 * as names are added.  It never copies a name: each must outlive the table.
 * Example: after fi_names_put(&t, "x", 7), fi_names_get(&t, "x") == 7 and
 * fi_names_get(&t, "y") == -1.  A zeroed fi_names is an empty table. */
typedef struct fi_names {
    const char **name; /* per slot, NULL when empty */
    int *index;        /* per slot */
    size_t cap, n;     /* cap: 0 or a power of two */
} fi_names;

/* The index put under name, or -1. */
int fi_names_get(const fi_names *t, const char *name);
/* Maps name to index; returns false, changing nothing, when name is there. */
bool fi_names_put(fi_names *t, const char *name, int index);
/* Frees the slots (not the names): t is an empty table again. */
void fi_names_free(fi_names *t);

/* True when roamc has a rule for the operator. */
bool fi_rule_exists(const char *domain, const char *op_type);

/* Infers the main graph of mp.  opt may be NULL.  Returns 0 and an owned
 * context (free with fi_free), or -1 with a message "what (where)" in err
 * (no path prefix: the loader adds it). */
int fi_infer_model(const Onnx__ModelProto *mp, const fe_options *opt, fi_ctx **out, char *err,
                   size_t errlen);
void fi_free(fi_ctx *cx);
/* What inference found for a value of the main graph, or NULL. */
const fi_tensor *fi_lookup(const fi_ctx *cx, const char *name);
/* The symbols made: input symbols (dim_param) and data symbols, in order of
 * creation.  Filled into the model by the loader. */
size_t fi_symbol_count(const fi_ctx *cx);
void fi_symbol_get(const fi_ctx *cx, size_t i, const char **name, int64_t *value, int *kind,
                   int *node);
/* How many shapes the file declares that inference contradicted (the
 * inferred one is used); *first describes the first. */
size_t fi_conflicts(const fi_ctx *cx, const char **first);

/* The names n's subgraphs (If/Loop/Scan bodies) read from enclosing graphs:
 * everything read inside and not defined inside.  *names is a malloc'ed
 * array of names borrowed from n (free it); 0, or -1 on nesting deeper
 * than FI_MAX_DEPTH. */
int fi_outer_reads(const Onnx__NodeProto *n, const char ***names, size_t *count);

/* -------------------------------------------------------- rule helpers */

/* Fails the node: "node 'NAME' (#I, OP): message"; returns -1. */
int fi_fail(fi_node *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* True once anything failed (then every helper is a no-op). */
bool fi_failed(const fi_node *n);

/* Attributes (through ref_attr_name inside functions).  The getters return
 * the default when the attribute is absent. */
const Onnx__AttributeProto *fi_attr(const fi_node *n, const char *name);
int64_t fi_attr_int(const fi_node *n, const char *name, int64_t dflt);
double fi_attr_float(const fi_node *n, const char *name, double dflt);
/* A STRING attribute as a NUL-terminated copy in buf (truncated), or dflt. */
const char *fi_attr_string(const fi_node *n, const char *name, const char *dflt, char *buf,
                           size_t len);
/* INTS: true with *v (borrowed) and *len when present. */
bool fi_attr_ints(const fi_node *n, const char *name, const int64_t **v, size_t *len);
bool fi_attr_floats(const fi_node *n, const char *name, const float **v, size_t *len);

/* Input k, or NULL when omitted (or beyond the node's inputs). */
fi_tensor *fi_in(const fi_node *n, size_t k);
/* Input k's value as integers: true with *v (borrowed) and *len when the
 * input is present and its value known (any numeric type; floats are
 * truncated). */
bool fi_in_ints(const fi_node *n, size_t k, const int64_t **v, size_t *len);
/* Input k's value as doubles (any numeric type), into a context buffer. */
bool fi_in_floats(const fi_node *n, size_t k, const double **v, size_t *len);
/* Input k's value as one integer (a scalar or a 1-element tensor): true
 * with *v when known. */
bool fi_in_scalar(const fi_node *n, size_t k, int64_t *v);
/* A double as int64, saturating, NaN as 0 (values can be anything). */
int64_t fi_double_to_int(double f);
/* Shape known (rank and every dim; dims may still be unknown-with-symbol
 * when only_rank). */
bool fi_has_rank(const fi_tensor *t);
bool fi_all_known(const fi_tensor *t);
/* Number of elements when every dim is known, else -1. */
int64_t fi_numel(const fi_tensor *t);

/* Outputs.  Each returns 0, or -1 after failing the node (bad rank, dims
 * out of range, out of memory).  Omitted outputs (NULL) are skipped. */
int fi_set_type(fi_node *n, size_t k, int32_t elem);
int fi_set_shape(fi_node *n, size_t k, int32_t elem, int rank, const fi_dim *dims);
/* Output k is a sequence of len tensors of the element type and shape
 * given (rank -1: unknown). */
int fi_set_sequence(fi_node *n, size_t k, int32_t elem, int rank, const fi_dim *dims, fi_dim len);
/* Same type and shape as t (value not copied). */
int fi_set_like(fi_node *n, size_t k, const fi_tensor *t);
/* Known value of rank `rank`: ints (for integer/bool elem) or floats. */
int fi_set_value_ints(fi_node *n, size_t k, int32_t elem, int rank, const fi_dim *dims,
                      const int64_t *v);
int fi_set_value_floats(fi_node *n, size_t k, int32_t elem, int rank, const fi_dim *dims,
                        const double *v);
/* Type, shape and (when small and inside the file) value of a TensorProto
 * (Constant's `value`, ConstantOfShape's). */
int fi_set_from_tensor_proto(fi_node *n, size_t k, const Onnx__TensorProto *tp);

/* Dims.  Arithmetic on unknowns gives an unknown that depends on the same
 * symbol; results above FI_MAX_DIM fail the node. */
fi_dim fi_known(int64_t v);
fi_dim fi_unknown(int32_t sym);
/* An unknown dim that depends on sym (a function of it, not sym itself). */
fi_dim fi_unknown_derived(int32_t sym);
fi_dim fi_dim_add(fi_node *n, fi_dim a, fi_dim b);
fi_dim fi_dim_sub(fi_node *n, fi_dim a, fi_dim b); /* fails the node when negative */
fi_dim fi_dim_mul(fi_node *n, fi_dim a, fi_dim b);
fi_dim fi_dim_div_floor(fi_node *n, fi_dim a, int64_t b);
fi_dim fi_dim_div_ceil(fi_node *n, fi_dim a, int64_t b);
/* Two dims that must be equal (Concat axes, MatMul inner): the known one
 * wins; two different known dims fail the node with what (e.g. "inner dims"). */
fi_dim fi_dim_merge(fi_node *n, fi_dim a, fi_dim b, const char *what);
/* Numpy broadcasting of dims a and b: 1 stretches; unknown vs known
 * non-1 gives the known one. */
fi_dim fi_dim_broadcast(fi_node *n, fi_dim a, fi_dim b);
/* The unknown-dim symbol of a tensor: the first unknown dim's, else its
 * blame; -1 when nothing. */
int32_t fi_blame(const fi_tensor *t);

/* Multidirectional broadcasting of inputs[0..count) (Add, Where, Max...):
 * fills *rank and dims (FI_MAX_RANK room).  Returns 0, 1 when a rank is
 * unknown (outputs stay unknown), -1 after failing the node. */
int fi_broadcast(fi_node *n, fi_tensor *const *inputs, size_t count, int *rank, fi_dim *dims);

/* Normalizes a possibly negative axis against rank: 0 with *out, -1 after
 * failing the node ("axis 5 out of range for rank 4"). */
int fi_axis(fi_node *n, int64_t axis, int rank, int *out);

/* A data-dependent dim: the symbol named "OUT:what" (OUT = the node's first
 * output, unique in its graph), bound to upper (or to --dim OUT:what=V).  upper
 * < 0: no bound is known, so the dim stays unknown until --dim sets it.
 * Marks every output of n as a bound. */
fi_dim fi_data_dim(fi_node *n, const char *what, int64_t upper);

/* Runs a subgraph (If branch, Loop/Scan body) in a scope nested in the
 * node's: values it reads from outside resolve to the enclosing graphs'.
 * in[0..n_in) override the types/shapes the body's inputs declare (NULL:
 * keep the declaration).  On return out[k] (k < g->n_output) point to what
 * was inferred for the body's outputs (valid until the context is freed).
 * Returns 0, -1 after failing the node. */
int fi_run_subgraph(fi_node *n, const Onnx__GraphProto *g, fi_tensor *const *in, size_t n_in,
                    fi_tensor **out);

/* A tensor in the context arena (rank -1, unknown), for rules that build
 * subgraph inputs; NULL after failing the node. */
fi_tensor *fi_new_tensor(fi_node *n);
/* Room for rank dims in the context arena (freed with it); NULL after
 * failing the node. */
fi_dim *fi_new_dims(fi_node *n, int rank);

/* ------------------------------------- memory of bodies (infer_body.c)
 *
 * While an If, Loop or Scan node (or a call of a model-local function)
 * runs, the values of its body need memory the main graph does not list.
 * Each time a body is inferred, its working memory is planned as a nested
 * arena in the body's own order: the sum of the body's values live at each
 * of its steps (each rounded up to FI_BODY_ALIGN; standard views share
 * their input's storage; a nested node adds its own working memory at its
 * step), the largest such sum being the body's peak.  Values read from an
 * enclosing graph are not counted (the enclosing plan holds them).  An If
 * branch's and a function's outputs are the node's outputs (counted where
 * the node is planned); a Loop or Scan body's inputs and outputs are the
 * per-iteration copies of the carried values and the scan slices, counted
 * for the whole body step. */

#define FI_BODY_ALIGN 512

/* How a node's working memory was counted. */
enum fi_body_how {
    FI_BODY_NONE = 0,
    FI_BODY_IF_TAKEN,      /* cond known: the branch taken */
    FI_BODY_IF_ONLY_VALID, /* cond unknown, the other branch is invalid for these shapes */
    FI_BODY_IF_LARGER,     /* cond unknown: the larger branch */
    FI_BODY_LOOP,          /* one iteration of the body */
    FI_BODY_SCAN,          /* one iteration of the body */
    FI_BODY_FUNCTION,      /* the function's body */
};

/* A node's working memory: bytes (the peak of its body's nested arena),
 * how it was counted, the If branch (0 then, 1 else; -1 for others), the
 * body values left unsized (counted as 0). */
typedef struct fi_body_use {
    uint64_t bytes;
    int how;
    int branch;
    size_t unsized;
} fi_body_use;

/* Records u as n's working memory, keeping the largest over the times n is
 * inferred (a body inside a Loop runs twice).  Main-graph nodes keep it for
 * fi_main_body. */
void fi_note_body(fi_node *n, const fi_body_use *u);
/* The peak of body g's nested arena, the largest over its runs so far (0
 * when it never ran), with *unsized (may be NULL) the values it left
 * unsized. */
uint64_t fi_body_peak_of(const fi_ctx *cx, const Onnx__GraphProto *g, size_t *unsized);
/* Main-graph node i's working memory: true with *u when it has a body that
 * ran. */
bool fi_main_body(const fi_ctx *cx, size_t i, fi_body_use *u);
/* The values made inside bodies, the last run's shape of each: name
 * ("CALL/NAME" inside a function call), what inference found, and the
 * main-graph node whose body holds it.  For `roamc shapes`. */
size_t fi_inner_count(const fi_ctx *cx);
void fi_inner_get(const fi_ctx *cx, size_t i, const char **name, const fi_tensor **t, int *node);

/* A failure that may be undone: an If whose cond is unknown tries each
 * branch, and a branch that fails for the shapes at hand cannot be the one
 * that runs.  fi_try_save keeps the failure state; fi_try_restore puts it
 * back (the failure recorded since is forgotten). */
typedef struct fi_try {
    bool failed;
    char err[512];
} fi_try;
void fi_try_save(const fi_node *n, fi_try *t);
void fi_try_restore(fi_node *n, const fi_try *t);

/* The nested arena of one body (infer_body.c), computed from what
 * inference found in the body's scope. */
typedef struct fi_body_graph {
    fi_ctx *cx;
    const void *scope; /* the scope the body ran in (fi_body_find) */
    Onnx__NodeProto *const *nodes;
    size_t n_nodes;
    const int *order;          /* the order the body ran in */
    const char *const *inputs; /* counted from the body's first step */
    size_t n_inputs;
    const char *const *outputs;
    size_t n_outputs;
    bool count_io; /* false: inputs not counted, outputs are the node's (not counted) */
    /* a subgraph: its Constants are weights (fi_body_weights), not working
     * memory; a function's are made at each call */
    bool consts_are_weights;
} fi_body_graph;
/* The body's peak; *unsized gets the values of unknown size (counted 0). */
uint64_t fi_body_peak(const fi_body_graph *b, size_t *unsized);
/* What inference found for name in scope itself (not its parents), or NULL. */
const fi_tensor *fi_body_find(const void *scope, const char *name);
/* The working memory recorded for a node (fi_note_body), 0 when none. */
uint64_t fi_node_body_bytes(const fi_ctx *cx, const Onnx__NodeProto *np);

/* The weights of n's subgraphs (If branches, Loop/Scan bodies, any depth):
 * their initializers and Constant nodes, each rounded up to FI_BODY_ALIGN;
 * 0 when it has none.  An inference engine loads them all when it loads the
 * model, whichever branch runs (DESIGN.md "Control flow"), so the loader
 * holds them for the whole step, as the main graph's initializers.  Bytes
 * come from the dims the file declares (capped at FI_MAX_DIM); strings
 * count 0.  *count (may be NULL) gets how many tensors that is. */
uint64_t fi_body_weights(const Onnx__NodeProto *n, size_t *count);

/* ONNX type classes (the size of an element: elem.h). */
bool fi_is_float_type(int32_t elem);
bool fi_is_int_type(int32_t elem); /* integer or bool */

#endif
