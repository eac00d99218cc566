/* frontend/ — ONNX bytes in, a resolved model description out.
 *
 * fe_load parses an ONNX ModelProto (protobuf-c types generated at build time
 * from Debian's onnx.proto), names every value once, gives it an element
 * type and a static shape (from roamc's own shape inference, infer/, with
 * the input shapes and symbols the caller binds; the file's own value_info
 * fills in what inference cannot know, e.g. operators of other domains),
 * resolves every node input and output to a value index, and decides which
 * outputs share storage with an input (the `alias` and `inplace`
 * attributes, else the default view and in-place ops).  It knows nothing of
 * schedules or memory: graph/ builds the IR from this.
 *
 * Untrusted input: every failure returns an error message that names the
 * file and the value or node at fault; nothing here aborts on bad bytes.
 */
#ifndef ROAMC_FRONTEND_H
#define ROAMC_FRONTEND_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bindings.h"
#include "elem.h"

enum fe_value_kind {
    FE_GRAPH_INPUT = 1u << 0,  /* listed in graph.input */
    FE_INITIALIZER = 1u << 1,  /* listed in graph.initializer */
    FE_GRAPH_OUTPUT = 1u << 2, /* listed in graph.output */
};

/* One dim of a value.  value >= 0, except with fe_options.allow_unresolved,
 * where -1 means unknown; symbol is then the symbol it is (exact) or
 * depends on, or -1. */
typedef struct fe_dim {
    int64_t value;
    int32_t symbol; /* index into fe_model.symbols, or -1 */
    bool exact;     /* unknown and equal to the symbol itself (not a function of it) */
} fe_dim;

typedef struct fe_value {
    char *name;
    int32_t elem_type; /* onnx.TensorProto.DataType; 0 when unknown (allow_unresolved) */
    uint64_t bytes; /* product of dims x element size (packed for 4-bit types); 0 when unresolved */
    int producer;   /* index of the producing node, -1 for inputs/initializers */
    unsigned kind;  /* fe_value_kind bits */
    int rank;       /* -1 when unknown (allow_unresolved only) */
    fe_dim *dims;   /* rank entries */
    bool upper_bound; /* the size depends on data: bytes is an upper bound */
    int64_t seq_len;  /* a sequence of seq_len tensors of this type and shape (bytes
                          counts them all); -1 for a tensor, -2 for a sequence of
                          unknown length (allow_unresolved only) */
    bool inferred;    /* the shape comes from roamc's inference, not from the file */
} fe_value;

typedef struct fe_symbol {
    char *name;    /* "batch"; data symbols: "NODE:what", e.g. "NonZero#12:count" */
    int64_t value; /* bound value (data symbols: the upper bound), -1 when unbound */
    int kind;      /* enum fe_symbol_kind (bindings.h) */
    int node;      /* data symbols: the node of the main graph that made it, or -1 */
} fe_symbol;

typedef struct fe_node {
    char *name; /* "" when the file gives none */
    char *op_type;
    char *domain; /* "" for the standard domain */
    int *inputs;  /* value indices; -1 for an omitted optional input */
    size_t n_inputs;
    size_t n_explicit_inputs; /* inputs[n_explicit_inputs..] are outer values read by subgraphs */
    int *outputs;             /* value indices; -1 for an omitted output */
    size_t n_outputs;         /* the last may be the node's working memory (fe_body) */
    int *alias;  /* per output: index into inputs of the value it shares storage with, or -1 */
    int inplace; /* 1: the aliased outputs are written in place; 0: pure views */
    /* the STRING attribute roamc_recompute (DESIGN.md "A step that fits"):
     * the forward output this clone recomputes; NULL when absent */
    char *recompute;
} fe_node;

/* How the working memory of a node with a body was counted (fe_body). */
enum fe_body_how {
    FE_BODY_IF_TAKEN = 1,  /* If whose cond shapes or constants decide: the branch taken */
    FE_BODY_IF_ONLY_VALID, /* If, cond unknown: the only branch valid for these shapes */
    FE_BODY_IF_LARGER,     /* If, cond unknown: the larger branch */
    FE_BODY_LOOP,          /* Loop: one iteration of the body */
    FE_BODY_SCAN,          /* Scan: one iteration of the body */
    FE_BODY_FUNCTION,      /* a call of a model-local function: its body */
};

/* The memory a node with a body (If, Loop, Scan, a model-local function
 * call) uses while it runs: its body planned as a nested arena
 * (frontend/infer/infer.h "memory of bodies"), its peak held by one more
 * output of the node, the value `value` named "NODE#body" (UINT8
 * [bytes]), which nothing reads: it lives during the node's step alone. */
typedef struct fe_body {
    int node;       /* main-graph node */
    int value;      /* the value holding it; -1 when bytes is 0 */
    uint64_t bytes; /* the nested arena's peak */
    int how;        /* enum fe_body_how */
    int branch;     /* If: 0 then_branch, 1 else_branch; -1 otherwise */
    size_t unsized; /* body values of unknown size, counted as 0 */
} fe_body;

typedef struct fe_model {
    char *path;
    fe_value *values;
    size_t n_values;
    fe_node *nodes; /* in file order: the program order */
    size_t n_nodes;
    int *inputs; /* graph inputs and initializers, value indices */
    size_t n_inputs;
    int *outputs; /* graph outputs, value indices */
    size_t n_outputs;
    char **meta_keys, **meta_values; /* metadata_props */
    size_t n_meta;
    int64_t ir_version;
    int64_t opset;      /* version of the default domain, 0 when not imported */
    fe_symbol *symbols; /* dims bound or still unbound, and data-dependent sizes */
    size_t n_symbols;
    size_t n_inferred;     /* values sized by inference rather than by the file */
    size_t n_conflicts;    /* static shapes of the file that inference contradicted */
    char *first_conflict;  /* the first such, described; NULL when none */
    bool has_upper_bounds; /* some value is sized at an upper bound */
    /* SHA-256 of the bytes loaded: the file as `sha256sum` reads it
     * (external data files are not part of it).  A plan names its model by
     * it (planner/PLAN_FORMAT.md "model_sha256"). */
    uint8_t sha256[32];
    /* nodes with a body, in node order (see fe_body) */
    fe_body *bodies;
    size_t n_bodies;
    /* values made inside bodies (not planned: their memory is in the
     * bodies' peaks), for `roamc shapes`: producer is the main-graph node
     * whose body makes them; a function call's values are "CALL/NAME" */
    fe_value *inner;
    size_t n_inner;
    /* the loader's table of value names, kept for fe_find_value (O(1));
     * NULL in a model not made by fe_load */
    struct fi_names *names;
} fe_model;

/* Loads path with the bindings of opt (NULL: none).  Returns 0 and fills
 * *m, or -1 with *m zeroed and a message "PATH: what (where)" in err.
 * Rejects: unreadable files, bytes that are not a ModelProto (truncated,
 * random, another message), a graph without nodes, a value read but
 * produced by nothing, a value produced twice, a value whose shape neither
 * inference nor the file gives (the message names the value, its node, the
 * symbol that is unbound and the flag that binds it), element types with no
 * byte size (STRING), negative dims, dims or products beyond 2^62, shape
 * computations that fail (the node named), alias attributes that point
 * outside the node's inputs, and protobuf messages nested more than 100 deep
 * (protobuf-c would recurse until the stack ends).  Weight data (inline or
 * external) is never copied or read: only shapes are needed. */
int fe_load(const char *path, const fe_options *opt, fe_model *m, char *err, size_t errlen);

/* A view of bytes in memory: len bytes at data, owned by the caller. */
typedef struct fe_bytes {
    const uint8_t *data;
    size_t len;
} fe_bytes;

/* Same as fe_load on the bytes of a file already in memory (read, not kept); path
 * names them in messages. */
int fe_load_bytes(const char *path, fe_bytes file, const fe_options *opt, fe_model *m, char *err,
                  size_t errlen);

void fe_free(fe_model *m);

/* Replaces each control byte of s (below 0x20, and 0x7f) by '?', in place.
 * Names in a model are arbitrary bytes; a message that quotes them goes
 * through this before it reaches a terminal, so a name cannot move the
 * cursor, clear the screen or hide the rest of the message. */
void fe_make_printable(char *s);

/* The frontend's error message: "PATH: TAG: message" (no "TAG: " when tag
 * is NULL) into buf (len bytes; buf may be NULL), made printable.  Returns
 * -1, so that a failing function can return it. */
int fe_verrorf(char *buf, size_t len, const char *path, const char *tag, const char *fmt,
               va_list ap);

/* The metadata value for key, or NULL. */
const char *fe_meta(const fe_model *m, const char *key);

/* Index of the value named name, or -1: O(1) expected in a model fe_load
 * made (its name hash), O(n) in one built by hand. */
int fe_find_value(const fe_model *m, const char *name);

/* ------------------------------------------------------------ --train (train/)
 * Derives one training step from a forward-only graph, in DESIGN.md's
 * training-graph convention (see frontend/train/TRAIN.md for the rules). */

enum fe_loss { FE_LOSS_AUTO = 0, FE_LOSS_CROSS_ENTROPY, FE_LOSS_MSE, FE_LOSS_NONE };
enum fe_optimizer { FE_OPT_ADAM = 0, FE_OPT_ADAMW, FE_OPT_SGD, FE_OPT_MOMENTUM, FE_OPT_NONE };
/* --precision: fp32 (the file's types); bf16 / fp16 (every float tensor, parameters and optimizer
 * state included, in that type); amp-bf16 / amp-fp16 (CUDA autocast's per-op casts, fp32 master
 * weights, gradients and optimizer state; amp-fp16 adds GradScaler's state) */
enum fe_precision {
    FE_PREC_FP32 = 0,
    FE_PREC_BF16,
    FE_PREC_FP16,
    FE_PREC_AMP_BF16,
    FE_PREC_AMP_FP16
};
/* The most microbatches --grad-accum takes. */
#define FE_MAX_GRAD_ACCUM 1024

typedef struct fe_train_options {
    int loss;            /* enum fe_loss; AUTO: none for a scalar output, else cross-entropy */
    int optimizer;       /* enum fe_optimizer */
    const char **frozen; /* fnmatch(3) patterns: float initializers they match stay fixed */
    size_t n_frozen;
    /* --emit-train: the path that names the derived graph (the caller
     * writes it, from fe_train_result.derived), or NULL */
    const char *emit_path;
    int precision;  /* enum fe_precision */
    int grad_accum; /* --grad-accum K: K microbatches, one optimizer step; 0 or 1: one batch */
} fe_train_options;

/* Parses --loss / --optimizer values; 0, or -1 for an unknown name. */
int fe_train_loss_parse(const char *s, int *loss);
int fe_train_optimizer_parse(const char *s, int *optimizer);
/* Parses a --precision value (fp32, bf16, fp16, amp-bf16, amp-fp16); 0, or -1 for another. */
int fe_train_precision_parse(const char *s, int *precision);
/* Parses a --grad-accum value: a decimal integer 1..FE_MAX_GRAD_ACCUM; 0, or -1 otherwise. */
int fe_train_grad_accum_parse(const char *s, int *k);

/* What fe_train makes; the caller owns all of it (fe_free(&model), free
 * summary and derived). */
typedef struct fe_train_result {
    fe_model model;   /* the step, as fe_load loads the derived file */
    char *summary;    /* malloc'd report lines ("  train ...\n") */
    uint8_t *derived; /* malloc'd: the derived file's bytes, derived_len of them */
    size_t derived_len;
} fe_train_result;

/* Loads the forward graph at path with the bindings of opt, derives the
 * training step and loads that into r->model, exactly as fe_load would load
 * the bytes of the derived file, which r->derived gets for the caller to
 * write (--emit-train: the frontend writes no file) or free.  With
 * t->emit_path the model is named by that path, so a plan of it checks
 * against the file written there.
 * The step: the graph's first float output gets the loss (a label input is
 * added for cross-entropy and mse), the float initializers that reach it
 * through differentiable operators are the parameters (less those t->frozen
 * matches), the backward pass keeps what PyTorch's autograd keeps, and the
 * optimizer updates each parameter in place with torch.optim's op sequence.
 * r->summary gets a few report lines naming the label input, the
 * parameters, the frozen ones and the optimizer.
 * Returns 0, or -1 with *r zeroed (nothing to free) and a message in err:
 * the fe_load errors, and a graph with no float initializer,
 * no float output, no parameter that reaches the loss, a loss that does not
 * fit the output (cross-entropy on a scalar or an integer output, --loss none
 * on a non-scalar), an operator on the gradient path with no gradient rule
 * (the node named), an emit path that is the input file or a directory.
 * opt may bind the label input (--input-shape target=... or labels=..., when
 * the graph has no input of that name): it must equal the shape the loss
 * needs, else an error names both shapes. */
int fe_train(const char *path, const fe_options *opt, const fe_train_options *t, fe_train_result *r,
             char *err, size_t errlen);

#endif
