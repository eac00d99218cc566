/* frontend/train/train_internal.h — what the three files of --train share
 * (private to frontend/train/; the entry, fe_train, is in frontend.h).
 *
 *   train.c        the graph surgery: the value and node tables, the
 *                  analysis (what requires a gradient, what reaches the
 *                  loss), the forward adjustments, the loss, the optimizer,
 *                  and fe_train, which runs them in that order
 *   train_rules.c  the gradient rule table (one rule per forward operator)
 *                  and the backward pass that applies it in reverse order
 *   train_emit.c   the derived step as an ONNX ModelProto, through the one
 *                  ONNX writer (frontend/onnx_write.h)
 *   train_export.c the marks of an inference (eval-mode) export in the
 *                  forward file, what --train does about each, the report
 *
 * Values and nodes are named by their index in tr's tables; a list of
 * value indices (a node's inputs or outputs) ends at TR_VALUES_END and is
 * most often written TR_VALUES(a, b, c).
 */
#ifndef ROAMC_FRONTEND_TRAIN_INTERNAL_H
#define ROAMC_FRONTEND_TRAIN_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "frontend.h"
#include "infer/infer.h"
#include "onnx.pb-c.h"

#define TR_ATEN "org.pytorch.aten"
#define ROAMC_TRAIN_VERSION "1"
#define TR_MAX_IO 4096 /* inputs of a cat, outputs of a split */

/* The end of a list of value indices (-1 is an omitted value, so -2). */
#define TR_VALUES_END (-2)
/* A list of value indices as a compound literal, ended by TR_VALUES_END. */
#define TR_VALUES(...) ((const int[]){__VA_ARGS__, TR_VALUES_END})

typedef struct tr_value {
    char *name;
    int32_t elem;
    int rank;
    int64_t *dims;
    bool tensor; /* a plain tensor with a static shape (forward sequences are not) */
} tr_value;

typedef struct tr_list {
    int *v;
    size_t n, cap;
} tr_list;

/* A node the derivation adds (loss, backward, optimizer). */
typedef struct tr_node {
    const char *op; /* static string: an ATen op name */
    int *in;        /* value indices, -1 for an omitted optional input */
    size_t n_in;
    int *out; /* value indices, -1 for an omitted output */
    size_t n_out;
    int *alias; /* per output: the input it shares storage with, or -1 */
    int inplace;
} tr_node;

/* How a forward node changes in the derived graph. */
typedef struct tr_fwd {
    int *out; /* its outputs, extended where an optional one is added; NULL: unchanged */
    size_t n_out;
    /* BatchNormalization: running stats updated in place; Transpose of a weight: a view */
    int alias[3];
    bool has_alias;
    int inplace;
    /* a Dropout that passes its input through (ratio 0), a Cast to the same type */
    bool identity;
    /* a BatchNormalization or Dropout in inference form planned in training mode
     * (train_export.c): the derived file's node says training_mode = 1 */
    bool to_training;
} tr_fwd;

/* What the forward file says about how it was exported (train_export.c). */
typedef struct tr_export {
    bool pytorch;                      /* producer_name "pytorch" */
    size_t bn, bn_inference;           /* BatchNormalization nodes; those in inference form */
    size_t dropout, dropout_inference; /* Dropout nodes; those with ratio > 0 not training */
    size_t convs, convs_folded;        /* Conv nodes; those whose weight the exporter made */
    size_t attention; /* Softmax outputs read by a MatMul, with no Dropout at all */
    int bn_first, dropout_first, folded_first; /* first node of each finding, or -1 */
    char true_name[64]; /* the bool initializer a converted Dropout reads as training_mode, or "" */
} tr_export;

typedef struct tr {
    const char *path;
    const fe_model *f;
    const Onnx__ModelProto *mp;
    const fe_train_options *opt;
    tr_value *v;
    size_t nv, cap_v;
    tr_node *n;
    size_t nn, cap_n;
    tr_fwd *fwd; /* per forward node */
    /* per value (grown with v) */
    int *grad;    /* the gradient accumulated so far, or -1 */
    bool *shared; /* that gradient is a tensor another slot also holds */
    /* per forward value */
    bool *req;    /* requires grad */
    bool *useful; /* the loss depends on it through differentiable slots */
    bool *param;  /* a trained parameter */
    bool *frozen; /* a float initializer --frozen keeps fixed */
    int *gelu_x;  /* per forward node: the x of an Erf-GELU ending here, else -1 */
    int *silu_x;  /* per forward node: the x of a SiLU x * Sigmoid(x) ending here, else -1 */
    bool *fused;  /* per forward node: inside an Erf-GELU or a SiLU (its rule is the last node's) */
    fi_names names; /* names in use: v[].name -> index */
    unsigned serial;
    /* the derived step, for the summary and metadata */
    int loss_out, loss, label, label_view;
    int loss_kind;
    const fe_input_shape *label_bind; /* --input-shape for the label input --train adds, or NULL */
    int64_t n_param_bytes, n_state_bytes, n_frozen_bytes;
    size_t n_params, n_frozen, n_state, n_buffers, n_backward, n_optim;
    char **final; /* graph outputs besides the loss */
    size_t n_final, cap_final;
    /* the set-up (--precision, --grad-accum; train_setup.c) */
    int accum;         /* microbatches (1: one batch) */
    int mb;            /* the microbatch being derived */
    int scale, growth; /* amp-fp16: GradScaler's scale and growth tracker (inputs), else -1 */
    size_t n_casts;    /* Cast nodes the precision rewrite added */
    size_t
        n_fwd_values; /* the forward values (the file's and the adjustments'): one per microbatch */
    int *map;         /* per forward value: its value in the microbatch derived now; NULL: itself */
    int **mb_map;     /* per microbatch: its map (accum > 1) */
    size_t *mb_end;   /* per microbatch: the end of its derived nodes in n */
    int *acc;         /* per forward value: a parameter's accumulated gradient, or -1 */
    int *acc_mb;      /* per forward value: the microbatch whose gradient acc holds, or -1 */
    int *first_reader; /* per forward value: the first forward node that reads it, or -1 */
    tr_list *labels;   /* the label input of each microbatch */
    tr_export ex;      /* the marks of an inference export (train_export.c) */
    char *err;
    size_t errlen;
} tr;

typedef struct tr_lists {
    tr_list data, params, grads, states, buffers, frozen;
} tr_lists;

/* ------------------------------------------------ train.c (graph surgery) */

/* Fails the derivation: "PATH: --train: message" into T->err; returns -1. */
int tr_fail(tr *T, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The name of forward node ni, else its op type (for messages). */
const char *tr_node_label(const tr *T, int ni);
/* Whether a value of the derived step is called name already. */
bool tr_name_used(const tr *T, const char *name);
/* A new value named name (made unique with a suffix when taken) with the
 * element type and shape given; returns its index (never fails). */
int tr_add_value(tr *T, const char *name, int32_t elem, int rank, const int64_t *dims);
/* Elements and bytes of value v; whether element type e is a float type. */
int64_t tr_numel(const tr *T, int v);
int64_t tr_bytes(const tr *T, int v);
bool tr_float(int32_t e);
/* A new value named after op, shaped like value `like` with element type
 * elem (0: like's); returns its index (never fails). */
int tr_new_like(tr *T, const char *op, int like, int32_t elem);
/* A new value named after op with the element type and shape given. */
int tr_new_shape(tr *T, const char *op, int32_t elem, int rank, const int64_t *dims);
/* Appends a derived node.  in/out end at TR_VALUES_END; alias NULL: no output
 * aliases; otherwise one entry per output. */
void tr_emit(tr *T, const char *op, const int *in, const int *out, const int *alias, int inplace);
/* A node op(in) with one new output shaped like `like`; returns the output. */
int tr_op(tr *T, const char *op, int like, int32_t elem, const int *in);
/* A view of src (shares its storage), shaped like `like`; returns it. */
int tr_view(tr *T, const char *op, int src, int like);
/* An in-place update of in[0]: returns the new version of its storage. */
int tr_inplace(tr *T, const char *op, const int *in);
/* Adds gradient g to forward value x (summed to x's shape when broadcast;
 * shared: g is also another slot's gradient).  0, or -1 when g < 0. */
int tr_give(tr *T, int x, int g, bool shared);
/* With --grad-accum: called after the rule of forward node ni ran; the parameters whose
 * gradient is complete there (ni is their first reader) are accumulated (train.c). */
void tr_accumulate_at(tr *T, int ni);
/* Parameter p's gradient of this microbatch, now complete, into its .grad
 * (train_graph.c says how). */
void tr_accumulate(tr *T, int p);
/* Element 0 of a constant value (an initializer, or a Constant node's value /
 * value_float / value_int) as a double; false when it is not a constant. */
bool tr_const_scalar(const tr *T, int v, double *out);
/* The names of enum fe_loss / fe_optimizer values, as the options spell them. */
const char *tr_loss_name(int loss);
const char *tr_optimizer_name(int optimizer);

/* ------------------------------------------ train_rules.c (the rule table) */

/* True when roamc has a gradient rule for forward node n's operator. */
bool tr_has_rule(const fe_node *n);
/* Input slot k of n can carry a gradient (unknown ops: every slot, so that
 * an unknown op on the gradient path is found and named). */
bool tr_diff_slot(const fe_node *n, size_t k);
/* The backward pass: each forward node with an output gradient, in reverse
 * file order, through its rule.  0, or -1 with the message in T->err. */
int tr_backward(tr *T);

/* ------------------------------------ train_setup.c (precision, set-up) */

/* The forward graph rewritten for --precision (train_setup.c). */
typedef struct tr_rewrite {
    uint8_t *bytes; /* the packed ModelProto (malloc'd) */
    size_t len;
    size_t n_casts; /* Cast nodes the rewrite added (autocast's casts) */
    int32_t *ty;    /* per value of the file's model: the element type meant for it (malloc'd) */
    const fe_train_options *opt; /* the options it was made for (borrowed) */
} tr_rewrite;

/* The name of an enum fe_precision value, as --precision spells it. */
const char *tr_precision_name(int precision);
/* precision is amp-bf16 or amp-fp16. */
bool tr_precision_amp(int precision);
/* The ONNX element type of precision's half type (BFLOAT16 or FLOAT16; FLOAT for fp32). */
int32_t tr_precision_half(int precision);
/* A bfloat16 / float16 (elem) bit pattern as a double. */
double tr_half_value(int32_t elem, uint16_t h);
/* Rewrites the forward model (f: the file as fe_load read it, mp: its proto) for
 * opt->precision (not fp32) into *out (train_setup.c says how).  Returns 0 (never fails:
 * what cannot be rewritten is caught by tr_precision_verify). */
int tr_precision_rewrite(const char *path, const fe_model *f, const Onnx__ModelProto *mp,
                         const fe_train_options *opt, tr_rewrite *out);
/* Checks that g (rw's bytes as loaded) gives every float value of f the type rw meant: 0, or
 * -1 with an internal-error message naming the first value that differs. */
int tr_precision_verify(const char *path, const fe_model *f, const tr_rewrite *rw,
                        const fe_model *g, char *err, size_t errlen);

/* ------------------------------ train_export.c (inference-export marks) */

/* Reads the forward file's marks of an inference export into T->ex and sets
 * fwd[i].to_training on each BatchNormalization / Dropout in inference form
 * whose training semantics the file holds (train_export.c says which). */
void tr_export_scan(tr *T);
/* Dropout node ni returns its input: its ratio is a constant 0. */
bool tr_dropout_ratio_zero(const tr *T, int ni);
/* Appends the report lines of T->ex ("  eval export   ...\n") at s + off (cap bytes in
 * all); returns the new offset.  Nothing when the file shows no mark. */
size_t tr_export_summary(const tr *T, char *s, size_t off, size_t cap);
/* The export call that gives a training-mode forward file (a static string). */
const char *tr_export_fix(void);
/* What the heuristics cannot see (a static string). */
const char *tr_export_misses(void);

/* ------------------------------------------- train_emit.c (the ONNX file) */

/* Packs the derived model into *bytes (malloc'd, *len bytes). */
void tr_pack(tr *T, tr_lists *L, uint8_t **bytes, size_t *len);

#endif
