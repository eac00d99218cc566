/* frontend/train/train.c — `roamc --train`: one training step derived from a
 * forward-only ONNX graph (frontend.h fe_train; the rules in TRAIN.md).
 *
 * Works on two views of the same file: the fe_model (names, element types,
 * shapes from inference) decides what to add; the ModelProto (attributes,
 * small constants) is what the derived graph reuses for the forward nodes.
 * The result is a new ModelProto in DESIGN.md's training-graph convention:
 *
 *   forward nodes      the file's own, in file order (a few get an optional
 *                      output PyTorch's kernel also makes: MaxPool indices,
 *                      Dropout mask, LayerNormalization mean/rstd, the log
 *                      probabilities of SoftmaxCrossEntropyLoss)
 *   loss               org.pytorch.aten ops, as torch's cross_entropy /
 *                      mse_loss dispatch them, against a new label input
 *   backward           one aten op (or a few) per differentiable node, in
 *                      reverse file order (the autograd engine's order: it
 *                      runs the ready node created last), reading the forward
 *                      values PyTorch's autograd saves for that op
 *   optimizer          torch.optim's per-parameter in-place sequence, the
 *                      same ops models/export.py records
 *
 * The ModelProto is packed and loaded with fe_load_bytes, the path a file
 * written by --emit-train takes when read back: the plan of the derived step
 * and the plan of that file cannot differ.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frontend.h"
#include "infer/infer.h"
#include "onnx.pb-c.h"
#include "proto.h"

#define TR_ATEN "org.pytorch.aten"
#define ROAMC_TRAIN_VERSION "1"
#define TR_MAX_IO 4096 /* inputs of a cat, outputs of a split */

/* ------------------------------------------------------------------ state */

typedef struct tr_value {
    char *name;
    int32_t elem;
    int rank;
    int64_t *dims;
    bool tensor; /* a plain tensor with a static shape (forward sequences are not) */
} tr_value;

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
    /* a Dropout that passes its input through (ratio 0 or not training), a Cast to the same type */
    bool identity;
} tr_fwd;

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
    char *err;
    size_t errlen;
} tr;

static int tr_fail(tr *T, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int tr_fail(tr *T, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fe_verrorf(T->err, T->errlen, T->path, "--train", fmt, ap);
    va_end(ap);
    return -1;
}

static const char *tr_node_label(const tr *T, int ni) {
    const fe_node *n = &T->f->nodes[ni];
    return n->name[0] ? n->name : n->op_type;
}

/* ------------------------------------------------------------ name table */

static bool tr_name_used(const tr *T, const char *name) {
    return fi_names_get(&T->names, name) >= 0;
}

/* ---------------------------------------------------------------- values */

static void tr_grow_values(tr *T) {
    if (T->nv < T->cap_v) return;
    size_t cap = T->cap_v ? 2 * T->cap_v : 1024;
    T->v = xreallocarray(T->v, cap, sizeof *T->v);
    T->grad = xreallocarray(T->grad, cap, sizeof *T->grad);
    T->shared = xreallocarray(T->shared, cap, sizeof *T->shared);
    T->cap_v = cap;
}

/* Adds a value named name (made unique with a suffix when taken); returns
 * its index (never fails). */
static int tr_add_value(tr *T, const char *name, int32_t elem, int rank, const int64_t *dims) {
    tr_grow_values(T);
    size_t len = strlen(name);
    char *nm = xmalloc(len + 24);
    memcpy(nm, name, len + 1);
    for (unsigned k = 1; tr_name_used(T, nm); k++) snprintf(nm + len, 24, "_%u", k);
    tr_value *v = &T->v[T->nv];
    v->name = nm;
    v->elem = elem;
    v->rank = rank;
    v->tensor = true;
    v->dims = xmallocarray(rank > 0 ? (size_t)rank : 0, sizeof *v->dims);
    if (rank > 0) memcpy(v->dims, dims, (size_t)rank * sizeof *dims);
    T->grad[T->nv] = -1;
    T->shared[T->nv] = false;
    fi_names_put(&T->names, nm, (int)T->nv);
    return (int)T->nv++;
}

/* A new value named after op, shaped like value `like` with element type elem (0: like's). */
static int tr_new_like(tr *T, const char *op, int like, int32_t elem) {
    char name[96];
    snprintf(name, sizeof name, "%s_%u", op, T->serial++);
    /* `like` may move when the table grows: copy what is needed first */
    int rank = T->v[like].rank;
    int64_t dims[FI_MAX_RANK];
    memcpy(dims, T->v[like].dims, (size_t)(rank > 0 ? rank : 0) * sizeof *dims);
    return tr_add_value(T, name, elem ? elem : T->v[like].elem, rank, dims);
}

static int tr_new_shape(tr *T, const char *op, int32_t elem, int rank, const int64_t *dims) {
    char name[96];
    snprintf(name, sizeof name, "%s_%u", op, T->serial++);
    return tr_add_value(T, name, elem, rank, dims);
}

static bool tr_same_shape(const tr *T, int a, int b) {
    if (T->v[a].rank != T->v[b].rank) return false;
    for (int d = 0; d < T->v[a].rank; d++)
        if (T->v[a].dims[d] != T->v[b].dims[d]) return false;
    return true;
}

static int64_t tr_numel(const tr *T, int v) {
    int64_t n = 1;
    for (int d = 0; d < T->v[v].rank; d++) n *= T->v[v].dims[d];
    return n;
}

static int64_t tr_bytes(const tr *T, int v) {
    return (int64_t)((tr_numel(T, v) * (int64_t)fe_elem_bits(T->v[v].elem) + 7) / 8);
}

/* ----------------------------------------------------------------- nodes */

/* Appends a node.  in/out end at the first -2; alias NULL: no output
 * aliases; otherwise one entry per output. */
static void tr_emit(tr *T, const char *op, const int *in, const int *out, const int *alias,
                    int inplace) {
    if (T->nn == T->cap_n) {
        size_t cap = T->cap_n ? 2 * T->cap_n : 1024;
        T->n = xreallocarray(T->n, cap, sizeof *T->n);
        T->cap_n = cap;
    }
    size_t ni = 0, no = 0;
    while (in[ni] != -2) ni++;
    while (out[no] != -2) no++;
    tr_node *n = &T->n[T->nn];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->in = xmallocarray(ni, sizeof *n->in);
    n->out = xmallocarray(no, sizeof *n->out);
    n->alias = xmallocarray(no, sizeof *n->alias);
    memcpy(n->in, in, ni * sizeof *in);
    memcpy(n->out, out, no * sizeof *out);
    for (size_t k = 0; k < no; k++) n->alias[k] = alias ? alias[k] : -1;
    n->n_in = ni;
    n->n_out = no;
    n->inplace = inplace;
    T->nn++;
}

#define END (-2)
#define INS(...) ((const int[]){__VA_ARGS__, END})

/* One new output shaped like `like`; returns it. */
static int tr_op(tr *T, const char *op, int like, int32_t elem, const int *in) {
    int o = tr_new_like(T, op, like, elem);
    tr_emit(T, op, in, INS(o), NULL, 0);
    return o;
}

/* A view of src (shares its storage), shaped like `like`. */
static int tr_view(tr *T, const char *op, int src, int like) {
    int o = tr_new_like(T, op, like, T->v[src].elem);
    tr_emit(T, op, INS(src), INS(o), (const int[]){0}, 0);
    return o;
}

/* An in-place update of in[0]: the new version of its storage. */
static int tr_inplace(tr *T, const char *op, const int *in) {
    int o = tr_new_like(T, op, in[0], 0);
    tr_emit(T, op, in, INS(o), (const int[]){0}, 1);
    return o;
}

/* -------------------------------------------------------------- gradients */

/* Adds g to the gradient of forward value x.  A g shaped by broadcasting is
 * first summed to x's shape (the engine's sum_to in validate_outputs).  A
 * second contribution is summed out of place, as torch 1.13's InputBuffer
 * does (models/export.py traces show `add`, never `add_`, there).
 * shared: g is also another slot's gradient (a pass-through of Add). */
static int tr_give(tr *T, int x, int g, bool shared) {
    if (g < 0) return -1;
    if (!tr_same_shape(T, x, g)) {
        g = tr_op(T, "sum", x, T->v[g].elem, INS(g));
        if (g < 0) return -1;
        shared = false;
    }
    if (T->grad[x] < 0) {
        T->grad[x] = g;
        T->shared[x] = shared;
        return 0;
    }
    int s = tr_op(T, "add", x, 0, INS(T->grad[x], g));
    if (s < 0) return -1;
    T->grad[x] = s;
    T->shared[x] = false;
    return 0;
}

/* ------------------------------------------------------------ rule table */

typedef struct tr_ctx {
    tr *T;
    int ni; /* forward node */
    const fe_node *n;
} tr_ctx;

static int IN(const tr_ctx *c, size_t k) {
    return k < c->n->n_explicit_inputs ? c->n->inputs[k] : -1;
}
static int OUT(const tr_ctx *c, size_t k) {
    const tr_fwd *fw = &c->T->fwd[c->ni];
    if (fw->out) return k < fw->n_out ? fw->out[k] : -1;
    return k < c->n->n_outputs ? c->n->outputs[k] : -1;
}
/* The gradient of output k, or -1. */
static int GY(const tr_ctx *c, size_t k) {
    int o = OUT(c, k);
    return o >= 0 && o < (int)c->T->f->n_values ? c->T->grad[o] : -1;
}
/* Input k wants a gradient. */
static bool NEED(const tr_ctx *c, size_t k) {
    int x = IN(c, k);
    return x >= 0 && c->T->req[x] && c->T->useful[x];
}

typedef int (*tr_rule)(tr_ctx *c);

/* x <- op(gY, saved...) shaped like x: the unary pattern of most rules. */
static int tr_unary(tr_ctx *c, const char *op, int saved) {
    if (!NEED(c, 0)) return 0;
    int gy = GY(c, 0), x = IN(c, 0);
    int g = saved >= 0 ? tr_op(c->T, op, x, 0, INS(gy, saved)) : tr_op(c->T, op, x, 0, INS(gy));
    return tr_give(c->T, x, g, false);
}

/* ReLU keeps its output (ReluBackward0 saves result), as do sigmoid and tanh. */
static int r_relu(tr_ctx *c) {
    return tr_unary(c, "threshold_backward", OUT(c, 0));
}
static int r_sigmoid(tr_ctx *c) {
    return tr_unary(c, "sigmoid_backward", OUT(c, 0));
}
static int r_tanh(tr_ctx *c) {
    return tr_unary(c, "tanh_backward", OUT(c, 0));
}
/* These keep their input. */
static int r_gelu(tr_ctx *c) {
    return tr_unary(c, "gelu_backward", IN(c, 0));
}
static int r_leaky(tr_ctx *c) {
    return tr_unary(c, "leaky_relu_backward", IN(c, 0));
}
static int r_elu(tr_ctx *c) {
    return tr_unary(c, "elu_backward", IN(c, 0));
}
static int r_hsig(tr_ctx *c) {
    return tr_unary(c, "hardsigmoid_backward", IN(c, 0));
}
static int r_hswish(tr_ctx *c) {
    return tr_unary(c, "hardswish_backward", IN(c, 0));
}
static int r_softplus(tr_ctx *c) {
    return tr_unary(c, "softplus_backward", IN(c, 0));
}
static int r_mish(tr_ctx *c) {
    return tr_unary(c, "mish_backward", IN(c, 0));
}
static int r_softmax(tr_ctx *c) {
    return tr_unary(c, "_softmax_backward_data", OUT(c, 0));
}
static int r_logsoftmax(tr_ctx *c) {
    return tr_unary(c, "_log_softmax_backward_data", OUT(c, 0));
}
static int r_exp(tr_ctx *c) {
    return tr_unary(c, "mul", OUT(c, 0));
}
static int r_log(tr_ctx *c) {
    return tr_unary(c, "div", IN(c, 0));
}
static int r_neg(tr_ctx *c) {
    return tr_unary(c, "neg", -1);
}
static int r_identity(tr_ctx *c);
/* A Cast to the value's own type is the value itself (a view, see tr_adjust_nodes). */
static int r_cast(tr_ctx *c) {
    return c->T->fwd[c->ni].identity ? r_identity(c) : tr_unary(c, "_to_copy", -1);
}
static int r_avgpool(tr_ctx *c) {
    return tr_unary(c, "avg_pool2d_backward", IN(c, 0));
}
static int r_pad(tr_ctx *c) {
    return tr_unary(c, "constant_pad_nd", -1);
}
static int r_slice(tr_ctx *c) {
    return tr_unary(c, "slice_backward", -1);
}
static int r_tile(tr_ctx *c) {
    return tr_unary(c, "sum", -1);
}
/* Dropout keeps only its mask (native_dropout's second output); one that passes
 * its input through is a view, its gradient passed on. */
static int r_identity(tr_ctx *c);
static int r_dropout(tr_ctx *c) {
    if (c->T->fwd[c->ni].identity) return r_identity(c);
    return tr_unary(c, "native_dropout_backward", OUT(c, 1));
}
static int r_maxpool(tr_ctx *c) {
    if (!NEED(c, 0)) return 0;
    int x = IN(c, 0);
    int g = tr_op(c->T, "max_pool2d_with_indices_backward", x, 0, INS(GY(c, 0), x, OUT(c, 1)));
    return tr_give(c->T, x, g, false);
}

/* f'(x) as a chain of temporaries, then mul by the gradient: what the
 * autograd formulas dispatch op by op (SqrtBackward0: grad / (2 * result)). */
static int tr_chain(tr_ctx *c, int saved, const char *const *ops, size_t n_ops, const char *last) {
    if (!NEED(c, 0)) return 0;
    int x = IN(c, 0), t = saved, gy = GY(c, 0);
    /* the first temporary also reads the gradient: autograd computes the
     * formula when the gradient arrives, and without the edge a planner
     * could hoist it into the forward pass (keeping, say, a bool mask
     * instead of the float input), which PyTorch never does */
    for (size_t k = 0; k < n_ops; k++)
        if ((t = k ? tr_op(c->T, ops[k], x, 0, INS(t)) : tr_op(c->T, ops[k], x, 0, INS(t, gy))) < 0)
            return -1;
    int g = tr_op(c->T, last, x, 0, INS(GY(c, 0), t));
    return tr_give(c->T, x, g, false);
}
static int r_sqrt(tr_ctx *c) {
    return tr_chain(c, OUT(c, 0), (const char *const[]){"mul"}, 1, "div");
}
static int r_erf(tr_ctx *c) {
    return tr_chain(c, IN(c, 0), (const char *const[]){"pow", "neg", "exp", "mul"}, 4, "mul");
}
/* The base: pow_backward_self; a trained exponent (PowBackward1 keeps self,
 * exponent and result): grad * (result * log(self)), reduced to its shape. */
static int r_pow(tr_ctx *c) {
    if (tr_chain(c, IN(c, 0), (const char *const[]){"pow", "mul"}, 2, "mul")) return -1;
    if (!NEED(c, 1)) return 0;
    int x = IN(c, 0), y = OUT(c, 0), gy = GY(c, 0);
    int t0 = tr_op(c->T, "log", x, 0, INS(x, gy)); /* reads the gradient: see tr_chain */
    int t1 = t0 < 0 ? -1 : tr_op(c->T, "mul", y, 0, INS(y, t0));
    int g = t1 < 0 ? -1 : tr_op(c->T, "mul", y, 0, INS(gy, t1));
    return tr_give(c->T, IN(c, 1), g, false);
}
static int r_abs(tr_ctx *c) {
    return tr_chain(c, IN(c, 0), (const char *const[]){"sgn"}, 1, "mul");
}
static int r_sin(tr_ctx *c) {
    return tr_chain(c, IN(c, 0), (const char *const[]){"cos"}, 1, "mul");
}
static int r_cos(tr_ctx *c) {
    return tr_chain(c, IN(c, 0), (const char *const[]){"sin", "neg"}, 2, "mul");
}
static int r_reciprocal(tr_ctx *c) {
    if (!NEED(c, 0)) return 0;
    int x = IN(c, 0), y = OUT(c, 0);
    int t1 = tr_op(c->T, "neg", x, 0, INS(GY(c, 0)));
    int t2 = t1 < 0 ? -1 : tr_op(c->T, "mul", x, 0, INS(t1, y));
    int g = t2 < 0 ? -1 : tr_op(c->T, "mul", x, 0, INS(t2, y));
    return tr_give(c->T, x, g, false);
}
/* Clip is torch's hardtanh (ReLU6 in MobileNet): hardtanh_backward keeps the input. */
static int r_clip(tr_ctx *c) {
    return tr_unary(c, "hardtanh_backward", IN(c, 0));
}

/* Add and Sum pass the same gradient tensor on (AddBackward0 saves nothing). */
static int r_add(tr_ctx *c) {
    for (size_t k = 0; k < c->n->n_explicit_inputs; k++)
        if (NEED(c, k) && tr_give(c->T, IN(c, k), GY(c, 0), true)) return -1;
    return 0;
}
static int r_sub(tr_ctx *c) {
    if (NEED(c, 0) && tr_give(c->T, IN(c, 0), GY(c, 0), true)) return -1;
    if (NEED(c, 1)) {
        int g = tr_op(c->T, "neg", OUT(c, 0), 0, INS(GY(c, 0)));
        if (tr_give(c->T, IN(c, 1), g, false)) return -1;
    }
    return 0;
}
/* MulBackward0 saves other for self's gradient and self for other's. */
static int r_mul(tr_ctx *c) {
    for (size_t k = 0; k < 2; k++) {
        if (!NEED(c, k)) continue;
        int g = tr_op(c->T, "mul", OUT(c, 0), 0, INS(GY(c, 0), IN(c, 1 - k)));
        if (tr_give(c->T, IN(c, k), g, false)) return -1;
    }
    return 0;
}
/* DivBackward0: grad / other; -grad * ((self / other) / other). */
static int r_div(tr_ctx *c) {
    tr *T = c->T;
    int y = OUT(c, 0), a = IN(c, 0), b = IN(c, 1), gy = GY(c, 0);
    if (NEED(c, 0) && tr_give(T, a, tr_op(T, "div", y, 0, INS(gy, b)), false)) return -1;
    if (NEED(c, 1)) {
        int t0 = tr_op(T, "neg", y, 0, INS(gy));
        int t1 = t0 < 0 ? -1 : tr_op(T, "mul", y, 0, INS(t0, a));
        int t2 = t1 < 0 ? -1 : tr_op(T, "div", y, 0, INS(t1, b));
        int g = t2 < 0 ? -1 : tr_op(T, "div", y, 0, INS(t2, b));
        if (tr_give(T, b, g, false)) return -1;
    }
    return 0;
}
static int r_where(tr_ctx *c) {
    for (size_t k = 1; k < 3; k++) {
        if (!NEED(c, k)) continue;
        int g = tr_op(c->T, "where", OUT(c, 0), 0, INS(IN(c, 0), GY(c, 0)));
        if (tr_give(c->T, IN(c, k), g, false)) return -1;
    }
    return 0;
}

/* MatMul: the batch dims of Y with the last two of the operand. */
static int tr_batched_like(tr *T, const char *op, int y, int x, const int *in) {
    int64_t dims[FI_MAX_RANK];
    int ry = T->v[y].rank, rx = T->v[x].rank;
    if (ry < 2 || rx < 2) return tr_op(T, op, x, 0, in);
    memcpy(dims, T->v[y].dims, (size_t)ry * sizeof *dims);
    dims[ry - 2] = T->v[x].dims[rx - 2];
    dims[ry - 1] = T->v[x].dims[rx - 1];
    int o = tr_new_shape(T, op, T->v[x].elem, ry, dims);
    tr_emit(T, op, in, INS(o), NULL, 0);
    return o;
}
/* MatMul keeps both operands.  A 2-D right operand is torch's folded
 * linear (mm on the flattened left); otherwise bmm, whose result is summed
 * over broadcast batch dims. */
static int r_matmul(tr_ctx *c) {
    tr *T = c->T;
    int a = IN(c, 0), b = IN(c, 1), y = OUT(c, 0), gy = GY(c, 0);
    bool folded = T->v[b].rank <= 2;
    if (NEED(c, 0)) {
        int g =
            folded ? tr_op(T, "mm", a, 0, INS(gy, b)) : tr_batched_like(T, "bmm", y, a, INS(gy, b));
        if (tr_give(T, a, g, false)) return -1;
    }
    if (NEED(c, 1)) {
        int g =
            folded ? tr_op(T, "mm", b, 0, INS(a, gy)) : tr_batched_like(T, "bmm", y, b, INS(a, gy));
        if (tr_give(T, b, g, false)) return -1;
    }
    return 0;
}
/* Gemm as torch's addmm: mm for A, mm for B, a sum for the bias. */
static int r_gemm(tr_ctx *c) {
    tr *T = c->T;
    int gy = GY(c, 0);
    if (NEED(c, 0) && tr_give(T, IN(c, 0), tr_op(T, "mm", IN(c, 0), 0, INS(gy, IN(c, 1))), false))
        return -1;
    if (NEED(c, 1) && tr_give(T, IN(c, 1), tr_op(T, "mm", IN(c, 1), 0, INS(gy, IN(c, 0))), false))
        return -1;
    if (NEED(c, 2) && tr_give(T, IN(c, 2), gy, true)) return -1;
    return 0;
}
/* One backward op that reads ins and has an output per input 0..2 that wants
 * a gradient (-1 for the others), each output given to its input: the shape
 * of convolution_backward, native_batch_norm_backward and
 * native_layer_norm_backward. */
static int tr_grads_of_three(tr_ctx *c, const char *op, const int *ins) {
    tr *T = c->T;
    int o[4] = {-1, -1, -1, END};
    for (size_t k = 0; k < 3; k++)
        if (NEED(c, k)) o[k] = tr_new_like(T, op, IN(c, k), 0);
    if (o[0] < 0 && o[1] < 0 && o[2] < 0) return 0;
    tr_emit(T, op, ins, o, NULL, 0);
    for (size_t k = 0; k < 3; k++)
        if (o[k] >= 0 && tr_give(T, IN(c, k), o[k], false)) return -1;
    return 0;
}
/* convolution_backward keeps input and weight; one op, three outputs. */
static int r_conv(tr_ctx *c) {
    return tr_grads_of_three(c, "convolution_backward", INS(GY(c, 0), IN(c, 0), IN(c, 1)));
}
/* native_batch_norm_backward keeps input, weight and the statistics (the
 * running stats the forward node updates in place stand for the saved
 * mean/invstd, which ONNX's BatchNormalization from opset 14 does not output). */
static int r_batchnorm(tr_ctx *c) {
    int m = OUT(c, 1) >= 0 ? OUT(c, 1) : IN(c, 3), v = OUT(c, 2) >= 0 ? OUT(c, 2) : IN(c, 4);
    return tr_grads_of_three(c, "native_batch_norm_backward",
                             INS(GY(c, 0), IN(c, 0), IN(c, 1), m, v));
}
/* native_layer_norm_backward keeps input, mean, rstd, weight and bias. */
static int r_layernorm(tr_ctx *c) {
    return tr_grads_of_three(c, "native_layer_norm_backward",
                             INS(GY(c, 0), IN(c, 0), OUT(c, 1), OUT(c, 2), IN(c, 1), IN(c, 2)));
}
/* GlobalAveragePool is torch's mean over H, W: it keeps nothing; its
 * backward expands the gradient (a view) and divides (a new tensor). */
static int r_mean(tr_ctx *c) {
    if (!NEED(c, 0)) return 0;
    int x = IN(c, 0);
    int e = tr_view(c->T, "expand", GY(c, 0), x);
    int g = e < 0 ? -1 : tr_op(c->T, "div", x, 0, INS(e));
    return tr_give(c->T, x, g, false);
}
static int r_reducesum(tr_ctx *c) {
    if (!NEED(c, 0)) return 0;
    int x = IN(c, 0);
    return tr_give(c->T, x, tr_view(c->T, "expand", GY(c, 0), x), true);
}
/* Views: the gradient is a view of the output's gradient. */
static int r_view(tr_ctx *c) {
    if (!NEED(c, 0)) return 0;
    int x = IN(c, 0);
    return tr_give(c->T, x, tr_view(c->T, "view", GY(c, 0), x), c->T->shared[OUT(c, 0)]);
}
static int r_identity(tr_ctx *c) {
    if (!NEED(c, 0)) return 0;
    return tr_give(c->T, IN(c, 0), GY(c, 0), true);
}
/* A Transpose of a weight is torch's t() view; of an activation, a copy
 * (permute + contiguous), and so is its backward. */
static int r_transpose(tr_ctx *c) {
    if (!NEED(c, 0)) return 0;
    int x = IN(c, 0);
    if (c->T->fwd[c->ni].has_alias)
        return tr_give(c->T, x, tr_view(c->T, "t", GY(c, 0), x), c->T->shared[OUT(c, 0)]);
    return tr_give(c->T, x, tr_op(c->T, "permute_copy", x, 0, INS(GY(c, 0))), false);
}
/* CatBackward0 narrows the gradient: views. */
static int r_concat(tr_ctx *c) {
    for (size_t k = 0; k < c->n->n_explicit_inputs; k++) {
        if (!NEED(c, k)) continue;
        if (tr_give(c->T, IN(c, k), tr_view(c->T, "slice", GY(c, 0), IN(c, k)), true)) return -1;
    }
    return 0;
}
/* SplitBackward0 concatenates the outputs' gradients, zeros where one has none. */
static int r_split(tr_ctx *c) {
    if (!NEED(c, 0)) return 0;
    tr *T = c->T;
    size_t no = c->n->n_outputs;
    if (no + 1 > TR_MAX_IO)
        return tr_fail(T, "node '%s' (#%d): %zu outputs", tr_node_label(T, c->ni), c->ni, no);
    int *in = xmallocarray(no + 1, sizeof *in);
    size_t k = 0;
    for (; k < no; k++) {
        in[k] = GY(c, k);
        if (in[k] < 0 && OUT(c, k) >= 0) {
            in[k] = tr_new_like(T, "new_zeros", OUT(c, k), 0);
            tr_emit(T, "new_zeros", (const int[]){END}, INS(in[k]), NULL, 0);
        }
    }
    in[k] = END;
    int g = tr_op(T, "cat", IN(c, 0), 0, in);
    free(in);
    return tr_give(T, IN(c, 0), g, false);
}
/* Gather of a weight is an embedding (embedding_dense_backward); of an
 * activation, index_select's backward.  Both keep only the indices. */
static int r_gather(tr_ctx *c) {
    if (!NEED(c, 0)) return 0;
    int x = IN(c, 0);
    const char *op = c->T->param[x] ? "embedding_dense_backward" : "index_select_backward";
    return tr_give(c->T, x, tr_op(c->T, op, x, 0, INS(GY(c, 0), IN(c, 1))), false);
}
static int r_gather_elements(tr_ctx *c) {
    if (!NEED(c, 0)) return 0;
    int x = IN(c, 0);
    return tr_give(c->T, x, tr_op(c->T, "gather_backward", x, 0, INS(GY(c, 0), IN(c, 1))), false);
}
static int r_expand(tr_ctx *c) {
    if (!NEED(c, 0)) return 0;
    return tr_give(c->T, IN(c, 0), GY(c, 0), true);
}
/* SoftmaxCrossEntropyLoss as torch's cross_entropy: nll_loss_backward and
 * _log_softmax_backward_data, keeping the log-probabilities. */
static int r_sce(tr_ctx *c) {
    if (!NEED(c, 0)) return 0;
    tr *T = c->T;
    int lp = OUT(c, 1), x = IN(c, 0);
    bool nd = T->v[x].rank > 2;
    int t = tr_op(T, nd ? "nll_loss2d_backward" : "nll_loss_backward", lp, 0,
                  INS(GY(c, 0), lp, IN(c, 1)));
    int g = t < 0 ? -1 : tr_op(T, "_log_softmax_backward_data", x, 0, INS(t, lp));
    return tr_give(T, x, g, false);
}
static int r_nll(tr_ctx *c) {
    if (!NEED(c, 0)) return 0;
    int x = IN(c, 0);
    bool nd = c->T->v[x].rank > 2;
    return tr_give(c->T, x,
                   tr_op(c->T, nd ? "nll_loss2d_backward" : "nll_loss_backward", x, 0,
                         INS(GY(c, 0), x, IN(c, 1))),
                   false);
}
/* The Erf form of GELU that torch.onnx writes for F.gelu (opset < 20):
 * PyTorch runs one gelu and keeps x; the rule sits on the last Mul. */
static int r_fused_gelu(tr_ctx *c) {
    int x = c->T->gelu_x[c->ni];
    if (!(c->T->req[x] && c->T->useful[x])) return 0;
    return tr_give(c->T, x, tr_op(c->T, "gelu_backward", x, 0, INS(GY(c, 0), x)), false);
}
/* SiLU as torch.onnx writes nn.SiLU / F.silu: Mul(x, Sigmoid(x)).  PyTorch runs one
 * silu and keeps x; op by op the Sigmoid would keep its output and the Mul both
 * factors (efficientnet_b0 b32: +27% on the peak).  The rule sits on the Mul. */
static int r_fused_silu(tr_ctx *c) {
    int x = c->T->silu_x[c->ni];
    if (!(c->T->req[x] && c->T->useful[x])) return 0;
    return tr_give(c->T, x, tr_op(c->T, "silu_backward", x, 0, INS(GY(c, 0), x)), false);
}

/* diff: bit k set = input k can carry a gradient (0: every input). */
typedef struct tr_rule_entry {
    const char *op;
    tr_rule rule;
    unsigned diff;
} tr_rule_entry;

static const tr_rule_entry tr_rules[] = {
    {"Relu", r_relu, 0},
    {"Sigmoid", r_sigmoid, 0},
    {"Tanh", r_tanh, 0},
    {"Gelu", r_gelu, 0},
    {"LeakyRelu", r_leaky, 0},
    {"Elu", r_elu, 0},
    {"Selu", r_elu, 0},
    {"Celu", r_elu, 0},
    {"HardSigmoid", r_hsig, 0},
    {"HardSwish", r_hswish, 0},
    {"Softplus", r_softplus, 0},
    {"Mish", r_mish, 0},
    {"Softmax", r_softmax, 0},
    {"LogSoftmax", r_logsoftmax, 0},
    {"Exp", r_exp, 0},
    {"Log", r_log, 0},
    {"Neg", r_neg, 0},
    {"Cast", r_cast, 1},
    {"Sqrt", r_sqrt, 0},
    {"Erf", r_erf, 0},
    {"Pow", r_pow, 0},
    {"Abs", r_abs, 0},
    {"Sin", r_sin, 0},
    {"Cos", r_cos, 0},
    {"Reciprocal", r_reciprocal, 0},
    {"Clip", r_clip, 1},
    {"Add", r_add, 0},
    {"Sum", r_add, 0},
    {"Sub", r_sub, 0},
    {"Mul", r_mul, 0},
    {"Div", r_div, 0},
    {"Where", r_where, 6},
    {"MatMul", r_matmul, 0},
    {"Gemm", r_gemm, 0},
    {"Conv", r_conv, 0},
    {"ConvTranspose", r_conv, 0},
    {"BatchNormalization", r_batchnorm, 7},
    {"LayerNormalization", r_layernorm, 0},
    {"MaxPool", r_maxpool, 1},
    {"AveragePool", r_avgpool, 1},
    {"GlobalAveragePool", r_mean, 1},
    {"ReduceMean", r_mean, 1},
    {"ReduceSum", r_reducesum, 1},
    {"Reshape", r_view, 1},
    {"Flatten", r_view, 1},
    {"Squeeze", r_view, 1},
    {"Unsqueeze", r_view, 1},
    {"Identity", r_identity, 1},
    {"Transpose", r_transpose, 1},
    {"Concat", r_concat, 0},
    {"Split", r_split, 1},
    {"Slice", r_slice, 1},
    {"Gather", r_gather, 1},
    {"GatherElements", r_gather_elements, 1},
    {"Expand", r_expand, 1},
    {"Tile", r_tile, 1},
    {"Pad", r_pad, 1},
    {"Dropout", r_dropout, 1},
    {"SoftmaxCrossEntropyLoss", r_sce, 1},
    {"NegativeLogLikelihoodLoss", r_nll, 1},
    {NULL, NULL, 0},
};

/* Operators whose outputs carry no gradient: integer results, comparisons,
 * data-dependent indices, random numbers, piecewise-constant functions. */
static const char *const tr_nondiff[] = {
    "Shape",
    "Size",
    "Constant",
    "ConstantOfShape",
    "Equal",
    "Less",
    "LessOrEqual",
    "Greater",
    "GreaterOrEqual",
    "Not",
    "And",
    "Or",
    "Xor",
    "ArgMax",
    "ArgMin",
    "NonZero",
    "Floor",
    "Ceil",
    "Round",
    "Sign",
    "IsNaN",
    "IsInf",
    "Range",
    "RandomNormal",
    "RandomNormalLike",
    "RandomUniform",
    "RandomUniformLike",
    "Bernoulli",
    "Multinomial",
    "EyeLike",
    "OneHot",
    "NonMaxSuppression",
    NULL,
};

static const tr_rule_entry *tr_rule_of(const fe_node *n) {
    if (n->domain[0] && strcmp(n->domain, "ai.onnx") != 0) return NULL;
    for (const tr_rule_entry *r = tr_rules; r->op; r++)
        if (strcmp(r->op, n->op_type) == 0) return r;
    return NULL;
}

static bool tr_is_nondiff(const fe_node *n) {
    if (n->domain[0] && strcmp(n->domain, "ai.onnx") != 0) return false;
    for (const char *const *p = tr_nondiff; *p; p++)
        if (strcmp(*p, n->op_type) == 0) return true;
    return false;
}

/* Input slot k of n can carry a gradient (unknown ops: every slot, so that
 * an unknown op on the gradient path is found and named). */
static bool tr_diff_slot(const fe_node *n, size_t k) {
    if (tr_is_nondiff(n)) return false;
    const tr_rule_entry *r = tr_rule_of(n);
    if (!r || r->diff == 0) return true;
    return k < 32 && (r->diff >> k) & 1u;
}

/* ------------------------------------------------------------- analysis */

static bool tr_float(int32_t e) {
    return fi_is_float_type(e);
}

/* The values of an Erf-GELU, x -> Div(x, c) -> Erf -> Add(., c) -> Mul(x, .)
 * -> Mul(., c), each intermediate read once: gelu_x[last] = x. */
static void tr_find_gelu(tr *T, const int *readers) {
    const fe_model *f = T->f;
    for (size_t i = 0; i < f->n_nodes; i++) {
        const fe_node *n5 = &f->nodes[i];
        if (strcmp(n5->op_type, "Mul") || n5->n_explicit_inputs != 2 || n5->domain[0]) continue;
        for (int s5 = 0; s5 < 2; s5++) {
            int m4v = n5->inputs[s5];
            if (m4v < 0 || f->values[m4v].producer < 0 || readers[m4v] != 1) continue;
            const fe_node *n4 = &f->nodes[f->values[m4v].producer];
            if (strcmp(n4->op_type, "Mul") || n4->n_explicit_inputs != 2) continue;
            for (int s4 = 0; s4 < 2; s4++) {
                int a3v = n4->inputs[s4], x = n4->inputs[1 - s4];
                if (a3v < 0 || x < 0 || f->values[a3v].producer < 0 || readers[a3v] != 1) continue;
                const fe_node *n3 = &f->nodes[f->values[a3v].producer];
                if (strcmp(n3->op_type, "Add") || n3->n_explicit_inputs != 2) continue;
                for (int s3 = 0; s3 < 2; s3++) {
                    int e2v = n3->inputs[s3];
                    if (e2v < 0 || f->values[e2v].producer < 0 || readers[e2v] != 1) continue;
                    const fe_node *n2 = &f->nodes[f->values[e2v].producer];
                    if (strcmp(n2->op_type, "Erf")) continue;
                    int d1v = n2->inputs[0];
                    if (d1v < 0 || f->values[d1v].producer < 0 || readers[d1v] != 1) continue;
                    const fe_node *n1 = &f->nodes[f->values[d1v].producer];
                    if (strcmp(n1->op_type, "Div") || n1->inputs[0] != x) continue;
                    T->gelu_x[i] = x;
                    T->fused[f->values[d1v].producer] = true;
                    T->fused[f->values[e2v].producer] = true;
                    T->fused[f->values[a3v].producer] = true;
                    T->fused[f->values[m4v].producer] = true;
                    goto next;
                }
            }
        }
    next:;
    }
}

/* The values of a SiLU, x -> Sigmoid -> Mul(x, .) with the Sigmoid read once:
 * silu_x[mul] = x. */
static void tr_find_silu(tr *T, const int *readers) {
    const fe_model *f = T->f;
    for (size_t i = 0; i < f->n_nodes; i++) {
        const fe_node *n = &f->nodes[i];
        if (strcmp(n->op_type, "Mul") || n->n_explicit_inputs != 2 || n->domain[0] || T->fused[i] ||
            T->gelu_x[i] >= 0)
            continue;
        for (int s = 0; s < 2; s++) {
            int sv = n->inputs[s], x = n->inputs[1 - s];
            if (sv < 0 || x < 0 || f->values[sv].producer < 0 || readers[sv] != 1) continue;
            const fe_node *sg = &f->nodes[f->values[sv].producer];
            if (strcmp(sg->op_type, "Sigmoid") || sg->domain[0] || sg->inputs[0] != x) continue;
            T->silu_x[i] = x;
            T->fused[f->values[sv].producer] = true;
            break;
        }
    }
}

static bool tr_frozen_name(const fe_train_options *o, const char *name) {
    for (size_t k = 0; k < o->n_frozen; k++)
        if (fnmatch(o->frozen[k], name, 0) == 0) return true;
    return false;
}

/* req (requires grad) forward, useful (the loss depends on it) backward;
 * the parameters are the float initializers with both. */
static int tr_analyse(tr *T) {
    const fe_model *f = T->f;
    size_t nv = f->n_values;
    size_t n_float_init = 0;
    for (size_t v = 0; v < nv; v++) {
        const fe_value *fv = &f->values[v];
        if (!(fv->kind & FE_INITIALIZER) || !tr_float(fv->elem_type)) continue;
        n_float_init++;
        if (tr_frozen_name(T->opt, fv->name))
            T->frozen[v] = true;
        else
            T->req[v] = true;
    }
    if (n_float_init == 0)
        return tr_fail(T, "the graph has no float initializer, so nothing to train (weights given "
                          "as graph inputs "
                          "cannot be told from data; export with the weights inside the file)");
    for (size_t i = 0; i < f->n_nodes; i++) {
        const fe_node *n = &f->nodes[i];
        bool any = false;
        for (size_t k = 0; k < n->n_explicit_inputs; k++)
            if (n->inputs[k] >= 0 && T->req[n->inputs[k]] && tr_diff_slot(n, k)) any = true;
        for (size_t k = 0; k < n->n_outputs; k++) {
            int o = n->outputs[k];
            if (o >= 0 && any && tr_float(f->values[o].elem_type) && f->values[o].seq_len < 0)
                T->req[o] = true;
        }
    }
    T->useful[T->loss_out] = true;
    for (size_t i = f->n_nodes; i-- > 0;) {
        const fe_node *n = &f->nodes[i];
        bool any = false;
        for (size_t k = 0; k < n->n_outputs; k++)
            if (n->outputs[k] >= 0 && T->useful[n->outputs[k]] && T->req[n->outputs[k]]) any = true;
        if (!any) continue;
        for (size_t k = 0; k < n->n_explicit_inputs; k++)
            if (n->inputs[k] >= 0 && T->req[n->inputs[k]] && tr_diff_slot(n, k))
                T->useful[n->inputs[k]] = true;
    }
    /* An operator that the gradient must cross and that has no rule. */
    for (size_t i = f->n_nodes; i-- > 0;) {
        const fe_node *n = &f->nodes[i];
        if (T->fused[i] || tr_rule_of(n) || T->gelu_x[i] >= 0 || T->silu_x[i] >= 0) continue;
        bool out_grad = false, in_req = false;
        for (size_t k = 0; k < n->n_outputs; k++)
            if (n->outputs[k] >= 0 && T->useful[n->outputs[k]] && T->req[n->outputs[k]])
                out_grad = true;
        for (size_t k = 0; k < n->n_explicit_inputs; k++)
            if (n->inputs[k] >= 0 && T->req[n->inputs[k]]) in_req = true;
        if (out_grad && in_req)
            return tr_fail(
                T,
                "node '%s' (#%zu, %s%s%s) is on the gradient path and roamc has no "
                "gradient rule for it "
                "(frontend/train/TRAIN.md lists the operators covered; --frozen can stop the "
                "gradient before it)",
                tr_node_label(T, (int)i), i, n->domain[0] ? n->domain : "",
                n->domain[0] ? "::" : "", n->op_type);
    }
    for (size_t v = 0; v < nv; v++) {
        const fe_value *fv = &f->values[v];
        if (!(fv->kind & FE_INITIALIZER) || !T->req[v]) continue;
        if (T->useful[v]) {
            T->param[v] = true;
            T->n_params++;
            T->n_param_bytes += (int64_t)fv->bytes;
        } else {
            T->req[v] = false; /* a float constant or buffer (BN running stats, a Resize scale) */
        }
    }
    for (size_t v = 0; v < nv; v++)
        if (T->frozen[v]) {
            T->n_frozen++;
            T->n_frozen_bytes += (int64_t)f->values[v].bytes;
        }
    if (T->n_params == 0)
        return tr_fail(T,
                       "no float initializer reaches the loss through differentiable operators%s: "
                       "nothing to train",
                       T->n_frozen ? " (--frozen keeps the others fixed)" : "");
    return 0;
}

/* ---------------------------------------------------- forward adjustments */

/* Output k of forward node ni, added when the file omits it. */
static void tr_fwd_output(tr *T, int ni, size_t k, const char *what, int32_t elem, int rank,
                          const int64_t *dims) {
    const fe_node *n = &T->f->nodes[ni];
    tr_fwd *fw = &T->fwd[ni];
    if (!fw->out || k >= fw->n_out) {
        size_t no = n->n_outputs > k + 1 ? n->n_outputs : k + 1;
        int *out = xreallocarray(fw->out, no, sizeof *out);
        for (size_t j = fw->out ? fw->n_out : 0; j < no; j++)
            out[j] = j < n->n_outputs ? n->outputs[j] : -1;
        fw->out = out;
        fw->n_out = no;
    }
    if (fw->out[k] >= 0) return;
    char name[512];
    snprintf(name, sizeof name, "%s_%s", T->v[fw->out[0]].name, what);
    fw->out[k] = tr_add_value(T, name, elem, rank, dims);
}

/* Element 0 of a constant value (an initializer, or a Constant node's value /
 * value_float / value_int) as a double; false when it is not a constant. */
static bool tr_const_scalar(const tr *T, int v, double *out) {
    if (v < 0 || !T->mp || !T->mp->graph) return false;
    const Onnx__GraphProto *g = T->mp->graph;
    const Onnx__TensorProto *tp = NULL;
    const char *name = T->f->values[v].name;
    int p = T->f->values[v].producer;
    if (p >= 0) {
        const Onnx__NodeProto *np = g->node[p];
        if (!np->op_type || strcmp(np->op_type, "Constant") || (np->domain && np->domain[0]))
            return false;
        for (size_t a = 0; a < np->n_attribute; a++) {
            const Onnx__AttributeProto *at = np->attribute[a];
            if (!at->name) continue;
            if (!strcmp(at->name, "value") && at->t) tp = at->t;
            if (!strcmp(at->name, "value_float")) return *out = at->f, true;
            if (!strcmp(at->name, "value_int")) return *out = (double)at->i, true;
        }
    } else {
        for (size_t k = 0; k < g->n_initializer && !tp; k++)
            if (g->initializer[k]->name && !strcmp(g->initializer[k]->name, name))
                tp = g->initializer[k];
    }
    if (!tp) return false;
    if (tp->has_raw_data) {
        const uint8_t *d = tp->raw_data.data;
        size_t len = tp->raw_data.len;
        if (tp->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && len >= 4) {
            float f;
            memcpy(&f, d, 4);
            return *out = f, true;
        }
        if (tp->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE && len >= 8)
            return memcpy(out, d, 8), true;
        if ((tp->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL ||
             tp->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__UINT8) &&
            len >= 1)
            return *out = d[0], true;
        return false;
    }
    if (tp->n_float_data) return *out = tp->float_data[0], true;
    if (tp->n_double_data) return *out = tp->double_data[0], true;
    if (tp->n_int32_data) return *out = tp->int32_data[0], true; /* bool, uint8, int32 */
    if (tp->n_int64_data) return *out = (double)tp->int64_data[0], true;
    return false;
}

/* A Dropout that returns its input: ratio 0 (torchvision's ViT, whose dropouts
 * are all p = 0.0, exported in training mode) or training_mode absent or false.
 * PyTorch's dropout with p = 0 returns the input itself: no copy, no mask. */
static bool tr_dropout_identity(const tr *T, const fe_node *n) {
    double r = 0.5, tm = 0;
    if (n->n_explicit_inputs < 3 || n->inputs[2] < 0)
        return true;                                          /* training_mode defaults to false */
    if (!tr_const_scalar(T, n->inputs[2], &tm)) return false; /* computed: assume training */
    if (tm == 0) return true;
    if (n->n_explicit_inputs >= 2 && n->inputs[1] >= 0 && !tr_const_scalar(T, n->inputs[1], &r))
        return false;
    return r == 0;
}

static void tr_adjust_nodes(tr *T, bool *bufview);
static void tr_adjust_forward(tr *T) {
    const fe_model *f = T->f;
    /* values that are a non-trained initializer or a view of one */
    bool *bufview = xcalloc(f->n_values, 1);
    for (size_t v = 0; v < f->n_values; v++)
        bufview[v] = (f->values[v].kind & FE_INITIALIZER) && !T->req[v];
    tr_adjust_nodes(T, bufview);
    free(bufview);
}

static void tr_adjust_nodes(tr *T, bool *bufview) {
    const fe_model *f = T->f;
    for (size_t i = 0; i < f->n_nodes; i++) {
        const fe_node *n = &f->nodes[i];
        if (n->domain[0] && strcmp(n->domain, "ai.onnx") != 0) continue;
        int y = n->n_outputs ? n->outputs[0] : -1;
        bool grad_path = y >= 0 && T->req[y] && T->useful[y];
        int x = n->n_explicit_inputs ? n->inputs[0] : -1;
        const char *op = n->op_type;
        if (!strcmp(op, "BatchNormalization") && n->n_outputs >= 3 && n->n_explicit_inputs >= 5 &&
            n->outputs[1] >= 0 && n->outputs[2] >= 0) {
            /* PyTorch updates the running stats in place (native_batch_norm) */
            T->fwd[i].has_alias = true;
            T->fwd[i].alias[0] = -1;
            T->fwd[i].alias[1] = 3;
            T->fwd[i].alias[2] = 4;
            T->fwd[i].inplace = 1;
        } else if (!strcmp(op, "Transpose") && x >= 0 && (f->values[x].kind & FE_INITIALIZER) &&
                   y >= 0) {
            T->fwd[i].has_alias = true; /* w.t() is a view in PyTorch */
            T->fwd[i].alias[0] = 0;
            T->fwd[i].inplace = 0;
        } else if (!strcmp(op, "Slice") && x >= 0 && bufview[x] && y >= 0) {
            /* slicing a buffer (GPT-2's causal mask bias[:, :, k-q:k, :k]) is a view in PyTorch;
             * as a copy, Where's backward would keep 1 MiB of mask per layer alive */
            T->fwd[i].has_alias = true;
            T->fwd[i].alias[0] = 0;
            T->fwd[i].inplace = 0;
            bufview[y] = true;
        } else if (!strcmp(op, "Cast") && x >= 0 && y >= 0 &&
                   f->values[x].elem_type == f->values[y].elem_type) {
            /* x.to(its own dtype) returns x itself in PyTorch (torch.onnx writes a Cast to
             * bool before GPT-2's torch.where) */
            T->fwd[i].has_alias = true;
            T->fwd[i].alias[0] = 0;
            T->fwd[i].inplace = 0;
            T->fwd[i].identity = true;
            bufview[y] = bufview[x];
        } else if (!strcmp(op, "Dropout") && x >= 0 && y >= 0 && tr_dropout_identity(T, n)) {
            T->fwd[i].has_alias =
                true; /* the input itself; a mask the file asks for stays its own */
            T->fwd[i].alias[0] = 0;
            T->fwd[i].alias[1] = -1;
            T->fwd[i].inplace = 0;
            T->fwd[i].identity = true;
        }
        if (y >= 0 && x >= 0 && bufview[x] && !n->domain[0] &&
            (!strcmp(op, "Reshape") || !strcmp(op, "Flatten") || !strcmp(op, "Squeeze") ||
             !strcmp(op, "Unsqueeze") || !strcmp(op, "Identity")))
            bufview[y] = true; /* standard views (graph/ makes them share storage) */
        if (!grad_path) continue;
        /* copies: the table may move while outputs are added */
        int64_t ydims[FI_MAX_RANK], xdims[FI_MAX_RANK];
        int yrank = T->v[y].rank, xrank = x >= 0 ? T->v[x].rank : 0;
        int32_t xelem = x >= 0 ? T->v[x].elem : 1;
        memcpy(ydims, T->v[y].dims, (size_t)(yrank > 0 ? yrank : 0) * sizeof *ydims);
        if (x >= 0) memcpy(xdims, T->v[x].dims, (size_t)(xrank > 0 ? xrank : 0) * sizeof *xdims);
        if (!strcmp(op, "MaxPool"))
            tr_fwd_output(T, (int)i, 1, "indices", 7 /* INT64 */, yrank, ydims);
        else if (!strcmp(op, "Dropout") && !T->fwd[i].identity)
            tr_fwd_output(T, (int)i, 1, "mask", 9 /* BOOL */, yrank, ydims);
        else if (!strcmp(op, "SoftmaxCrossEntropyLoss"))
            tr_fwd_output(T, (int)i, 1, "log_prob", xelem, xrank, xdims);
        else if (!strcmp(op, "LayerNormalization") && x >= 0) {
            /* Mean and InvStdDev: X's dims before axis, 1 after (stash type float) */
            int64_t axis = -1;
            int rank = xrank;
            if (T->mp && T->mp->graph) {
                const Onnx__NodeProto *np = T->mp->graph->node[i];
                for (size_t a = 0; a < np->n_attribute; a++)
                    if (np->attribute[a]->name && !strcmp(np->attribute[a]->name, "axis"))
                        axis = np->attribute[a]->i;
            }
            if (axis < 0) axis += rank;
            if (axis < 0 || axis > rank) axis = rank ? rank - 1 : 0;
            int64_t dims[FI_MAX_RANK];
            for (int d = 0; d < rank; d++) dims[d] = d < axis ? xdims[d] : 1;
            tr_fwd_output(T, (int)i, 1, "mean", 1, rank, dims);
            tr_fwd_output(T, (int)i, 2, "rstd", 1, rank, dims);
        }
    }
}

/* ------------------------------------------------------------------- loss */

static const char *tr_loss_name(int k) {
    switch (k) {
    case FE_LOSS_CROSS_ENTROPY: return "cross-entropy";
    case FE_LOSS_MSE: return "mse";
    case FE_LOSS_NONE: return "none";
    default: return "auto";
    }
}

static const char *tr_optimizer_name(int k) {
    switch (k) {
    case FE_OPT_ADAM: return "adam";
    case FE_OPT_ADAMW: return "adamw";
    case FE_OPT_SGD: return "sgd";
    case FE_OPT_MOMENTUM: return "momentum";
    default: return "none";
    }
}

int fe_train_loss_parse(const char *s, int *loss) {
    for (int k = FE_LOSS_CROSS_ENTROPY; k <= FE_LOSS_NONE; k++)
        if (strcmp(s, tr_loss_name(k)) == 0) return *loss = k, 0;
    if (strcmp(s, "ce") == 0 || strcmp(s, "cross_entropy") == 0)
        return *loss = FE_LOSS_CROSS_ENTROPY, 0;
    return -1;
}

int fe_train_optimizer_parse(const char *s, int *optimizer) {
    for (int k = FE_OPT_ADAM; k <= FE_OPT_NONE; k++)
        if (strcmp(s, tr_optimizer_name(k)) == 0) return *optimizer = k, 0;
    return -1;
}

static void tr_shape_text(const tr *T, int v, char *buf, size_t len) {
    size_t off = 0;
    char eb[32];
    off += (size_t)snprintf(buf, len, "%s [", fe_elem_name(T->v[v].elem, eb, sizeof eb));
    for (int d = 0; d < T->v[v].rank && off < len; d++)
        off += (size_t)snprintf(buf + off, len - off, "%s%lld", d ? ", " : "",
                                (long long)T->v[v].dims[d]);
    if (off < len) snprintf(buf + off, len - off, "]");
}

/* cross_entropy on [N, C] logits as torch dispatches it: _log_softmax,
 * nll_loss_forward (loss, total_weight); then the seed ones_like(loss),
 * nll_loss_backward, _log_softmax_backward_data.  Returns the gradient of y. */
static int tr_cross_entropy(tr *T, int y, int label, bool nd) {
    const char *fwd = nd ? "nll_loss2d_forward" : "nll_loss_forward";
    int lsm = tr_op(T, "_log_softmax", y, 0, INS(y));
    int loss = tr_new_shape(T, fwd, T->v[y].elem, 0, NULL);
    int tw = tr_new_shape(T, fwd, T->v[y].elem, 0, NULL);
    tr_emit(T, fwd, INS(lsm, label), INS(loss, tw), NULL, 0);
    T->loss = loss;
    int seed = tr_op(T, "ones_like", loss, 0, INS(loss));
    int g = tr_op(T, nd ? "nll_loss2d_backward" : "nll_loss_backward", y, 0,
                  INS(seed, lsm, label, -1, tw));
    return tr_op(T, "_log_softmax_backward_data", y, 0, INS(g, lsm));
}

static void tr_dims_text(int rank, const int64_t *dims, char *buf, size_t len) {
    size_t off = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < rank && off < len; d++)
        off += (size_t)snprintf(buf + off, len - off, "%s%lld", d ? ", " : "", (long long)dims[d]);
    if (off < len) snprintf(buf + off, len - off, "]");
}

/* The label input: named target (labels when the graph uses that name), shaped
 * as the loss on output y needs.  An --input-shape for it must say the same. */
static int tr_label(tr *T, int y, int32_t elem, int rank, const int64_t *dims) {
    const char *name = tr_name_used(T, "target") ? "labels" : "target";
    const fe_input_shape *b = T->label_bind;
    if (b) {
        char want[256], got[256], ys[256];
        tr_dims_text(rank, dims, want, sizeof want);
        int64_t bd[FI_MAX_RANK];
        size_t br = b->rank < FI_MAX_RANK ? b->rank : FI_MAX_RANK;
        for (size_t d = 0; d < br; d++) bd[d] = b->dims[d];
        tr_dims_text((int)br, bd, got, sizeof got);
        tr_shape_text(T, y, ys, sizeof ys);
        if (strcmp(b->name, name) != 0)
            return tr_fail(
                T,
                "--input-shape names '%s', which is neither a graph input nor the label input that "
                "--train adds ('%s' %s)",
                b->name, name, want);
        bool same = b->rank == (size_t)rank;
        for (int d = 0; same && d < rank; d++) same = b->dims[d] == dims[d];
        if (!same)
            return tr_fail(
                T,
                "--input-shape gives the label input '%s' the shape %s, which cannot match the %s "
                "loss on '%s' %s: it needs %s",
                name, got, tr_loss_name(T->loss_kind), T->v[y].name, ys, want);
    }
    return T->label = tr_add_value(T, name, elem, rank, dims);
}

static int tr_build_loss(tr *T) {
    int y = T->loss_out;
    int rank = T->v[y].rank;
    int64_t n = tr_numel(T, y);
    int32_t elem = T->v[y].elem;
    char shape[256];
    tr_shape_text(T, y, shape, sizeof shape);
    int kind = T->opt->loss;
    if (kind == FE_LOSS_AUTO) kind = n == 1 && rank <= 1 ? FE_LOSS_NONE : FE_LOSS_CROSS_ENTROPY;
    T->loss_kind = kind;
    if (!tr_float(elem))
        return tr_fail(T, "the loss needs a float output, and '%s' is %s", T->v[y].name, shape);
    int64_t dims[FI_MAX_RANK];
    int g = -1;
    if (kind == FE_LOSS_NONE) {
        if (T->label_bind)
            return tr_fail(T,
                           "--input-shape names '%s', which is not a graph input (and --loss none "
                           "adds no label "
                           "input)",
                           T->label_bind->name);
        if (n != 1)
            return tr_fail(
                T,
                "--loss none wants the graph's output to be the loss, a scalar; '%s' is %s "
                "(use --loss cross-entropy or mse)",
                T->v[y].name, shape);
        T->loss = y;
        g = tr_op(T, "ones_like", y, 0, INS(y));
    } else if (kind == FE_LOSS_MSE) {
        if (tr_label(T, y, elem, rank, T->v[y].dims) < 0) return -1;
        int loss = tr_new_shape(T, "mse_loss", elem, 0, NULL);
        tr_emit(T, "mse_loss", INS(y, T->label), INS(loss), NULL, 0);
        T->loss = loss;
        int seed = tr_op(T, "ones_like", loss, 0, INS(loss));
        g = tr_op(T, "mse_loss_backward", y, 0, INS(seed, y, T->label));
    } else {
        if (rank < 2)
            return tr_fail(
                T,
                "cross-entropy wants logits [N, C] (or [B, S, C], [N, C, H, W]); '%s' is %s "
                "(--loss none if it is already the loss, --loss mse for a regression)",
                T->v[y].name, shape);
        if (T->v[y].dims[rank - 1] < 1 || n == 0)
            return tr_fail(T, "'%s' is %s: no classes", T->v[y].name, shape);
        if (rank == 2) {
            if (tr_label(T, y, 7, 1, T->v[y].dims) < 0) return -1;
            g = tr_cross_entropy(T, y, T->label, false);
        } else if (rank == 3) {
            /* [B, S, C]: classes last, as language models' logits; flattened as
             * HuggingFace's loss does (logits.view(-1, C), labels.view(-1)) */
            if (tr_label(T, y, 7, 2, T->v[y].dims) < 0) return -1;
            int64_t flat[2] = {T->v[y].dims[0] * T->v[y].dims[1], T->v[y].dims[2]};
            int yv = tr_new_shape(T, "view", elem, 2, flat);
            tr_emit(T, "view", INS(y), INS(yv), (const int[]){0}, 0);
            int lv = tr_new_shape(T, "view", 7, 1, flat);
            tr_emit(T, "view", INS(T->label), INS(lv), (const int[]){0}, 0);
            T->label_view = lv;
            int g2 = tr_cross_entropy(T, yv, lv, false);
            g = tr_view(T, "view", g2, y);
        } else {
            /* [N, C, D1, ...]: classes on dim 1, torch's convention (nll_loss2d) */
            for (int d = 0, k = 0; d < rank; d++)
                if (d != 1) dims[k++] = T->v[y].dims[d];
            if (tr_label(T, y, 7, rank - 1, dims) < 0) return -1;
            g = tr_cross_entropy(T, y, T->label, true);
        }
    }
    if (g < 0) return -1;
    T->grad[y] = g;
    T->shared[y] = false;
    return 0;
}

/* --------------------------------------------------------------- backward */

static int tr_backward(tr *T) {
    const fe_model *f = T->f;
    size_t before = T->nn;
    for (size_t i = f->n_nodes; i-- > 0;) {
        const fe_node *n = &f->nodes[i];
        if (T->fused[i]) continue;
        tr_ctx c = {T, (int)i, n};
        bool any = false;
        for (size_t k = 0; k < n->n_outputs; k++)
            if (GY(&c, k) >= 0) any = true;
        if (!any) continue;
        tr_rule rule = NULL;
        if (T->gelu_x[i] >= 0)
            rule = r_fused_gelu;
        else if (T->silu_x[i] >= 0)
            rule = r_fused_silu;
        else if (tr_rule_of(n))
            rule = tr_rule_of(n)->rule;
        if (rule && rule(&c)) return -1;
    }
    T->n_backward = T->nn - before;
    return 0;
}

/* -------------------------------------------------------------- optimizer */

static void tr_add_final(tr *T, int v) {
    if (T->n_final == T->cap_final) {
        size_t cap = T->cap_final ? 2 * T->cap_final : 256;
        T->final = xreallocarray(T->final, cap, sizeof *T->final);
        T->cap_final = cap;
    }
    T->final[T->n_final++] = T->v[v].name;
}

/* A state input named after parameter p ("fc.weight.exp_avg"). */
static int tr_state(tr *T, int p, const char *suffix, int rank_like_p) {
    char name[1024];
    snprintf(name, sizeof name, "%s.%s", T->v[p].name, suffix);
    int s = rank_like_p ? tr_add_value(T, name, T->v[p].elem, T->v[p].rank, T->v[p].dims)
                        : tr_add_value(T, name, T->v[p].elem, 0, NULL);
    T->n_state++;
    T->n_state_bytes += tr_bytes(T, s);
    return s;
}

typedef struct tr_list {
    int *v;
    size_t n, cap;
} tr_list;

static void tr_push(tr_list *l, int v) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 256;
        l->v = xreallocarray(l->v, cap, sizeof *l->v);
        l->cap = cap;
    }
    l->v[l->n++] = v;
}

/* torch.optim with foreach=False, per parameter, the ops models/export.py
 * records (Adam: step += 1; exp_avg.mul_(b1).add_(g, 1-b1);
 * exp_avg_sq.mul_(b2).addcmul_(g, g, 1-b2); denom = (exp_avg_sq.sqrt() /
 * bias_correction2_sqrt).add_(eps); p.addcdiv_(exp_avg, denom, -step_size)). */
static void tr_optimizer(tr *T, tr_list *params, tr_list *grads, tr_list *states) {
    size_t before = T->nn;
    int kind = T->opt->optimizer;
    for (size_t k = 0; k < params->n; k++) {
        int p = params->v[k], g = grads->v[k];
        if (g < 0) {
            tr_add_final(T, p);
            continue;
        }
        if (kind == FE_OPT_NONE) {
            tr_add_final(T, p);
            tr_add_final(T, g);
            continue;
        }
        if (kind == FE_OPT_SGD) {
            tr_add_final(T, tr_inplace(T, "add_", INS(p, g)));
            continue;
        }
        if (kind == FE_OPT_MOMENTUM) {
            int buf = tr_state(T, p, "momentum_buffer", 1);
            tr_push(states, buf);
            int b1 = tr_inplace(T, "mul_", INS(buf));
            int b2 = tr_inplace(T, "add_", INS(b1, g));
            tr_add_final(T, tr_inplace(T, "add_", INS(p, b2)));
            tr_add_final(T, b2);
            continue;
        }
        int step = tr_state(T, p, "step", 0);
        int m = tr_state(T, p, "exp_avg", 1);
        int v = tr_state(T, p, "exp_avg_sq", 1);
        tr_push(states, step);
        tr_push(states, m);
        tr_push(states, v);
        int s1 = tr_inplace(T, "add_", INS(step));
        int pw = p;
        if (kind == FE_OPT_ADAMW) pw = tr_inplace(T, "mul_", INS(p)); /* decoupled weight decay */
        int m1 = tr_inplace(T, "mul_", INS(m));
        int m2 = tr_inplace(T, "add_", INS(m1, g));
        int v1 = tr_inplace(T, "mul_", INS(v));
        int v2 = tr_inplace(T, "addcmul_", INS(v1, g, g));
        int d1 = tr_op(T, "sqrt", v2, 0, INS(v2));
        int d2 = tr_op(T, "div", d1, 0, INS(d1));
        int d3 = tr_inplace(T, "add_", INS(d2));
        int p1 = tr_inplace(T, "addcdiv_", INS(pw, m2, d3));
        tr_add_final(T, p1);
        tr_add_final(T, s1);
        tr_add_final(T, m2);
        tr_add_final(T, v2);
    }
    T->n_optim = T->nn - before;
}

/* --------------------------------------------------------------- protobuf */

/* Everything the derived ModelProto owns: freed together after packing. */
typedef struct tr_arena {
    void **p;
    size_t n, cap;
} tr_arena;

static void *tr_mem(tr_arena *a, size_t size) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 4096;
        a->p = xreallocarray(a->p, cap, sizeof *a->p);
        a->cap = cap;
    }
    return a->p[a->n++] = xcalloc(1, size);
}

static void tr_arena_free(tr_arena *a) {
    for (size_t i = 0; i < a->n; i++) free(a->p[i]);
    free(a->p);
}

static Onnx__ValueInfoProto *tr_vinfo(tr_arena *a, const tr_value *v) {
    Onnx__ValueInfoProto *vi = tr_mem(a, sizeof *vi);
    Onnx__TypeProto *tp = tr_mem(a, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = tr_mem(a, sizeof *tt);
    Onnx__TensorShapeProto *sp = tr_mem(a, sizeof *sp);
    Onnx__TensorShapeProto__Dimension **dims =
        tr_mem(a, (size_t)(v->rank > 0 ? v->rank : 0) * sizeof *dims);
    *vi = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
    *tp = (Onnx__TypeProto)ONNX__TYPE_PROTO__INIT;
    *tt = (Onnx__TypeProto__Tensor)ONNX__TYPE_PROTO__TENSOR__INIT;
    *sp = (Onnx__TensorShapeProto)ONNX__TENSOR_SHAPE_PROTO__INIT;
    for (int d = 0; d < v->rank; d++) {
        Onnx__TensorShapeProto__Dimension *dm = tr_mem(a, sizeof *dm);
        *dm = (Onnx__TensorShapeProto__Dimension)ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
        dm->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        dm->dim_value = v->dims[d];
        dims[d] = dm;
    }
    sp->n_dim = (size_t)(v->rank > 0 ? v->rank : 0);
    sp->dim = dims;
    tt->has_elem_type = 1;
    tt->elem_type = v->elem;
    tt->shape = sp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    vi->name = v->name;
    vi->type = tp;
    return vi;
}

/* The alias (INTS) and inplace (INT) attributes of DESIGN.md's convention. */
static void tr_alias_attrs(tr_arena *a, const int *alias, size_t n_out, int inplace,
                           Onnx__AttributeProto **out) {
    Onnx__AttributeProto *al = tr_mem(a, sizeof *al), *ip = tr_mem(a, sizeof *ip);
    int64_t *ints = tr_mem(a, n_out * sizeof *ints);
    *al = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
    *ip = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
    for (size_t k = 0; k < n_out; k++) ints[k] = alias[k];
    al->name = "alias";
    al->has_type = 1;
    al->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    al->n_ints = n_out;
    al->ints = ints;
    ip->name = "inplace";
    ip->has_type = 1;
    ip->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    ip->has_i = 1;
    ip->i = inplace;
    out[0] = al;
    out[1] = ip;
}

static char *tr_vname(tr *T, int v) {
    return v >= 0 ? T->v[v].name : "";
}

static Onnx__StringStringEntryProto *tr_meta(tr_arena *a, const char *key, const char *value) {
    Onnx__StringStringEntryProto *e = tr_mem(a, sizeof *e);
    size_t kl = strlen(key), vl = strlen(value);
    char *k = tr_mem(a, kl + 1), *v = tr_mem(a, vl + 1);
    memcpy(k, key, kl + 1);
    memcpy(v, value, vl + 1);
    *e = (Onnx__StringStringEntryProto)ONNX__STRING_STRING_ENTRY_PROTO__INIT;
    e->key = k;
    e->value = v;
    return e;
}

/* A comma-separated list of value names, in the arena. */
static char *tr_join(tr *T, tr_arena *a, const int *v, size_t n) {
    size_t len = 1;
    for (size_t k = 0; k < n; k++) len += strlen(tr_vname(T, v[k])) + 1;
    char *s = tr_mem(a, len), *p = s;
    for (size_t k = 0; k < n; k++) {
        size_t l = strlen(tr_vname(T, v[k]));
        if (k) *p++ = ',';
        memcpy(p, tr_vname(T, v[k]), l);
        p += l;
    }
    *p = 0;
    return s;
}

typedef struct tr_lists {
    tr_list data, params, grads, states, buffers, frozen;
} tr_lists;

/* The file's forward nodes into nodes[0 .. n_node): shared as they are, or copied where the
 * derivation added an optional output or alias attributes. */
static void tr_pack_fwd_nodes(tr *T, tr_arena *A, Onnx__NodeProto **nodes) {
    const Onnx__GraphProto *og = T->mp->graph;
    for (size_t i = 0; i < og->n_node; i++) {
        const tr_fwd *fw = &T->fwd[i];
        if (!fw->out && !fw->has_alias) {
            nodes[i] = og->node[i];
            continue;
        }
        Onnx__NodeProto *c = tr_mem(A, sizeof *c);
        *c = *og->node[i];
        if (fw->out) {
            char **outs = tr_mem(A, fw->n_out * sizeof *outs);
            for (size_t k = 0; k < fw->n_out; k++) outs[k] = tr_vname(T, fw->out[k]);
            c->output = outs;
            c->n_output = fw->n_out;
        }
        if (fw->has_alias) {
            Onnx__AttributeProto **at = tr_mem(A, (c->n_attribute + 2) * sizeof *at);
            if (c->n_attribute) /* Slice, Cast, Dropout may have none: attribute is NULL */
                memcpy(at, og->node[i]->attribute, c->n_attribute * sizeof *at);
            size_t no = c->n_output < 3 ? c->n_output : 3;
            tr_alias_attrs(A, fw->alias, no, fw->inplace, at + c->n_attribute);
            c->attribute = at;
            c->n_attribute += 2;
        }
        nodes[i] = c;
    }
}

/* The derived nodes (loss, backward, optimizer) into nodes[0 .. T->nn), in the aten domain,
 * named train0, train1, ... */
static void tr_pack_train_nodes(tr *T, tr_arena *A, Onnx__NodeProto **nodes) {
    for (size_t j = 0; j < T->nn; j++) {
        const tr_node *n = &T->n[j];
        Onnx__NodeProto *c = tr_mem(A, sizeof *c);
        char **in = tr_mem(A, n->n_in * sizeof *in);
        char **outs = tr_mem(A, n->n_out * sizeof *outs);
        Onnx__AttributeProto **at = tr_mem(A, 2 * sizeof *at);
        char *name = tr_mem(A, 32);
        *c = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
        for (size_t k = 0; k < n->n_in; k++) in[k] = tr_vname(T, n->in[k]);
        for (size_t k = 0; k < n->n_out; k++) outs[k] = tr_vname(T, n->out[k]);
        snprintf(name, 32, "train%zu", j);
        c->name = name;
        c->op_type = (char *)n->op;
        c->domain = TR_ATEN;
        c->input = in;
        c->n_input = n->n_in;
        c->output = outs;
        c->n_output = n->n_out;
        tr_alias_attrs(A, n->alias, n->n_out, n->inplace, at);
        c->attribute = at;
        c->n_attribute = 2;
        nodes[j] = c;
    }
}

/* g's inputs: data, label, parameters, optimizer state.  Marks each in is_io, so that the
 * later lists do not declare it again. */
static void tr_pack_inputs(tr *T, const tr_lists *L, tr_arena *A, Onnx__GraphProto *g,
                           bool *is_io) {
    size_t n_in = L->data.n + L->params.n + L->states.n + 1;
    Onnx__ValueInfoProto **inputs = tr_mem(A, n_in * sizeof *inputs);
    size_t ni = 0;
    const tr_list *in_lists[3] = {&L->data, &L->params, &L->states};
    for (int l = 0; l < 3; l++)
        for (size_t k = 0; k < in_lists[l]->n; k++) {
            int v = in_lists[l]->v[k];
            inputs[ni++] = tr_vinfo(A, &T->v[v]);
            is_io[v] = true;
        }
    g->input = inputs;
    g->n_input = ni;
}

/* g's initializers: the file's, less the parameters (now inputs without data). */
static void tr_pack_initializers(tr *T, tr_arena *A, Onnx__GraphProto *g, bool *is_io) {
    const Onnx__GraphProto *og = T->mp->graph;
    Onnx__TensorProto **inits = tr_mem(A, og->n_initializer * sizeof *inits);
    size_t nini = 0;
    for (size_t k = 0; k < og->n_initializer; k++) {
        const char *iname = og->initializer[k]->name ? og->initializer[k]->name : "";
        int v = fi_names_get(&T->names, iname);
        if (v >= 0 && T->param[v]) continue;
        if (v >= 0) is_io[v] = true;
        inits[nini++] = og->initializer[k];
    }
    g->initializer = inits;
    g->n_initializer = nini;
}

/* g's outputs: the loss, then the final versions of parameters and state not declared yet. */
static void tr_pack_outputs(tr *T, tr_arena *A, Onnx__GraphProto *g, bool *is_io) {
    Onnx__ValueInfoProto **outputs = tr_mem(A, (T->n_final + 1) * sizeof *outputs);
    size_t no = 0;
    outputs[no++] = tr_vinfo(A, &T->v[T->loss]);
    is_io[T->loss] = true;
    for (size_t k = 0; k < T->n_final; k++) {
        int v = fi_names_get(&T->names, T->final[k]);
        if (v < 0 || is_io[v]) continue;
        outputs[no++] = tr_vinfo(A, &T->v[v]);
        is_io[v] = true;
    }
    g->output = outputs;
    g->n_output = no;
}

/* g's value_info: every other tensor a node makes, forward nodes first. */
static void tr_pack_value_info(tr *T, tr_arena *A, Onnx__GraphProto *g, bool *is_io) {
    const fe_model *f = T->f;
    const Onnx__GraphProto *og = T->mp->graph;
    Onnx__ValueInfoProto **vis = tr_mem(A, T->nv * sizeof *vis);
    size_t nvi = 0;
    for (size_t i = 0; i < og->n_node; i++) {
        const tr_fwd *fw = &T->fwd[i];
        size_t nout = fw->out ? fw->n_out : f->nodes[i].n_outputs;
        for (size_t k = 0; k < nout; k++) {
            int v = fw->out ? fw->out[k] : f->nodes[i].outputs[k];
            if (v < 0 || is_io[v] || !T->v[v].tensor) continue;
            vis[nvi++] = tr_vinfo(A, &T->v[v]);
            is_io[v] = true;
        }
    }
    for (size_t j = 0; j < T->nn; j++)
        for (size_t k = 0; k < T->n[j].n_out; k++) {
            int v = T->n[j].out[k];
            if (v < 0 || is_io[v]) continue;
            vis[nvi++] = tr_vinfo(A, &T->v[v]);
            is_io[v] = true;
        }
    g->value_info = vis;
    g->n_value_info = nvi;
}

/* The derived graph: the file's graph with the nodes and the four value lists replaced.  The
 * lists are filled in this order because each declares a value only once (is_io). */
static Onnx__GraphProto *tr_pack_graph(tr *T, const tr_lists *L, tr_arena *A) {
    const Onnx__GraphProto *og = T->mp->graph;
    Onnx__GraphProto *g = tr_mem(A, sizeof *g);
    size_t nn = og->n_node + T->nn;
    Onnx__NodeProto **nodes = tr_mem(A, nn * sizeof *nodes);
    bool *is_io = tr_mem(A, T->nv * sizeof *is_io);
    *g = *og;
    tr_pack_fwd_nodes(T, A, nodes);
    tr_pack_train_nodes(T, A, nodes + og->n_node);
    g->node = nodes;
    g->n_node = nn;
    tr_pack_inputs(T, L, A, g, is_io);
    tr_pack_initializers(T, A, g, is_io);
    tr_pack_outputs(T, A, g, is_io);
    tr_pack_value_info(T, A, g, is_io);
    return g;
}

/* m's opset imports: the file's, plus the aten domain the derived nodes use unless the file
 * imports it already. */
static void tr_pack_opsets(tr *T, tr_arena *A, Onnx__ModelProto *m) {
    const Onnx__ModelProto *mp = T->mp;
    bool has_aten = false;
    for (size_t k = 0; k < mp->n_opset_import; k++)
        if (mp->opset_import[k]->domain && !strcmp(mp->opset_import[k]->domain, TR_ATEN))
            has_aten = true;
    Onnx__OperatorSetIdProto **ops = tr_mem(A, (mp->n_opset_import + 1) * sizeof *ops);
    Onnx__OperatorSetIdProto *aten = tr_mem(A, sizeof *aten);
    memcpy(ops, mp->opset_import, mp->n_opset_import * sizeof *ops);
    m->opset_import = ops;
    if (!has_aten) {
        *aten = (Onnx__OperatorSetIdProto)ONNX__OPERATOR_SET_ID_PROTO__INIT;
        aten->domain = TR_ATEN;
        aten->has_version = 1;
        aten->version = 1;
        ops[m->n_opset_import++] = aten;
    }
}

/* m's metadata: the file's, less any roamc.* keys (a step derived again replaces them), then
 * the roamc.* keys that let a later run (--report, the planner) read the step's roles. */
static void tr_pack_metadata(tr *T, const tr_lists *L, tr_arena *A, Onnx__ModelProto *m) {
    const Onnx__ModelProto *mp = T->mp;
    Onnx__StringStringEntryProto **meta = tr_mem(A, (mp->n_metadata_props + 16) * sizeof *meta);
    size_t nm = 0;
    for (size_t k = 0; k < mp->n_metadata_props; k++)
        if (mp->metadata_props[k]->key && strncmp(mp->metadata_props[k]->key, "roamc.", 6) != 0)
            meta[nm++] = mp->metadata_props[k];
    char buf[256];
    snprintf(buf, sizeof buf, "%s", tr_optimizer_name(T->opt->optimizer));
    const char *kv[][2] = {
        {"roamc.loss", T->v[T->loss].name},
        {"roamc.parameters", tr_join(T, A, L->params.v, L->params.n)},
        {"roamc.optimizer_state", tr_join(T, A, L->states.v, L->states.n)},
        {"roamc.data_inputs", tr_join(T, A, L->data.v, L->data.n)},
        {"roamc.buffers", tr_join(T, A, L->buffers.v, L->buffers.n)},
        {"roamc.frozen", tr_join(T, A, L->frozen.v, L->frozen.n)},
        {"roamc.gradients", tr_join(T, A, L->grads.v, L->grads.n)},
        {"roamc.optimizer", buf},
        {"roamc.loss_kind", tr_loss_name(T->loss_kind)},
        {"roamc.label", T->label >= 0 ? T->v[T->label].name : ""},
        {"roamc.derived_from", T->path},
        {"roamc.exporter", "roamc --train " ROAMC_TRAIN_VERSION},
    };
    for (size_t k = 0; k < sizeof kv / sizeof kv[0]; k++)
        meta[nm++] = tr_meta(A, kv[k][0], kv[k][1]);
    m->metadata_props = meta;
    m->n_metadata_props = nm;
}

/* Packs the derived model into *bytes (malloc'd).  The model shares the file's unchanged
 * parts (nodes, initializers, metadata) and holds the new ones in an arena freed after. */
static void tr_pack(tr *T, tr_lists *L, uint8_t **bytes, size_t *len) {
    tr_arena A = {0};
    Onnx__ModelProto m = *T->mp;
    m.graph = tr_pack_graph(T, L, &A);
    m.n_training_info = 0;
    m.training_info = NULL;
    tr_pack_opsets(T, &A, &m);
    tr_pack_metadata(T, L, &A, &m);
    *len = onnx__model_proto__get_packed_size(&m);
    *bytes = xmalloc(*len);
    onnx__model_proto__pack(&m, *bytes);
    tr_arena_free(&A);
}

/* ------------------------------------------------------------------ entry */

/* Refuses an emit path that is a directory or the input file itself. */
static int tr_check_emit(tr *T, const char *in, const char *out) {
    struct stat so, si;
    if (stat(out, &so) == 0) {
        if (S_ISDIR(so.st_mode)) return tr_fail(T, "--emit-train '%s' is a directory", out);
        if (stat(in, &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino)
            return tr_fail(
                T, "--emit-train '%s' is the input file; it would overwrite the forward graph",
                out);
    }
    return 0;
}

static int tr_read_proto(tr *T) {
    int fd = open(T->path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size <= 0) {
        if (fd >= 0) close(fd);
        return tr_fail(T, "cannot read the file again as a regular file");
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return tr_fail(T, "cannot read: %s", strerror(errno));
    T->mp = fe_unpack_model(map, (size_t)st.st_size);
    munmap(map, (size_t)st.st_size);
    if (!T->mp || !T->mp->graph || T->mp->graph->n_node != T->f->n_nodes)
        return tr_fail(T, "the file changed while it was read");
    return 0;
}

static void tr_free(tr *T) {
    for (size_t k = 0; k < T->nv; k++) {
        free(T->v[k].name);
        free(T->v[k].dims);
    }
    free(T->v);
    for (size_t k = 0; k < T->nn; k++) {
        free(T->n[k].in);
        free(T->n[k].out);
        free(T->n[k].alias);
    }
    free(T->n);
    if (T->fwd)
        for (size_t i = 0; i < T->f->n_nodes; i++) free(T->fwd[i].out);
    free(T->fwd);
    free(T->grad);
    free(T->shared);
    free(T->req);
    free(T->useful);
    free(T->param);
    free(T->frozen);
    free(T->gelu_x);
    free(T->silu_x);
    free(T->fused);
    fi_names_free(&T->names);
    free(T->final);
    if (T->mp) onnx__model_proto__free_unpacked((Onnx__ModelProto *)T->mp, NULL);
}

static void tr_human(int64_t b, char *buf, size_t len) {
    if (b >= (int64_t)1 << 30)
        snprintf(buf, len, "%.2f GiB", (double)b / (1 << 30));
    else if (b >= 1 << 20)
        snprintf(buf, len, "%.2f MiB", (double)b / (1 << 20));
    else
        snprintf(buf, len, "%.1f KiB", (double)b / 1024);
}

static char *tr_summary(tr *T, const tr_lists *L) {
    char *s = xmalloc(2048);
    char shape[256], lshape[256], pb[32], sb[32], fb[32];
    tr_shape_text(T, T->loss_out, shape, sizeof shape);
    tr_human(T->n_param_bytes, pb, sizeof pb);
    tr_human(T->n_state_bytes, sb, sizeof sb);
    tr_human(T->n_frozen_bytes, fb, sizeof fb);
    size_t off = 0;
    if (T->label >= 0) {
        tr_shape_text(T, T->label, lshape, sizeof lshape);
        off += (size_t)snprintf(
            s + off, 2048 - off, "  train         loss %s on '%s' %s; label input '%s' %s\n",
            tr_loss_name(T->loss_kind), T->v[T->loss_out].name, shape, T->v[T->label].name, lshape);
    } else {
        off += (size_t)snprintf(s + off, 2048 - off,
                                "  train         loss: the graph's own output '%s' %s\n",
                                T->v[T->loss_out].name, shape);
    }
    off += (size_t)snprintf(
        s + off, 2048 - off,
        "  parameters    %zu float initializers trained (%s), %zu frozen (%s), %zu kept constant "
        "(buffers, constants)\n",
        T->n_params, pb, T->n_frozen, fb, L->buffers.n - T->n_frozen);
    size_t no_grad = 0;
    for (size_t k = 0; k < L->grads.n; k++) no_grad += L->grads.v[k] < 0;
    off += (size_t)snprintf(s + off, 2048 - off,
                            "  optimizer     %s: %zu state inputs (%s); added %zu backward and %zu "
                            "optimizer ops to %zu forward ops%s\n",
                            tr_optimizer_name(T->opt->optimizer), T->n_state, sb, T->n_backward,
                            T->n_optim, T->f->n_nodes,
                            no_grad ? " (some parameters got no gradient)" : "");
    (void)off;
    return s;
}

/* Loads the forward graph. An --input-shape for 'target'/'labels' that the
 * forward graph does not have binds the label input --train adds: held back
 * from the forward load, checked against the loss (tr_label); *label_bind is
 * that binding, or NULL. */
static int tr_load_forward(const char *path, const fe_options *opt, fe_model *f,
                           const fe_input_shape **label_bind, char *err, size_t errlen) {
    fe_options fopt = *opt;
    fe_input_shape *shapes = NULL;
    *label_bind = NULL;
    for (size_t k = 0; k < opt->n_shapes; k++)
        if (!strcmp(opt->shapes[k].name, "target") || !strcmp(opt->shapes[k].name, "labels"))
            *label_bind = &opt->shapes[k];
    if (*label_bind) {
        shapes = xmallocarray(opt->n_shapes, sizeof *shapes);
        fopt.n_shapes = 0;
        fopt.shapes = shapes;
        for (size_t k = 0; k < opt->n_shapes; k++)
            if (&opt->shapes[k] != *label_bind) shapes[fopt.n_shapes++] = opt->shapes[k];
    }
    int lrc = fe_load(path, &fopt, f, err, errlen);
    if (!lrc && *label_bind && fe_find_value(f, (*label_bind)->name) >= 0) {
        /* the graph has that input: the binding is its own */
        fe_free(f);
        *label_bind = NULL;
        lrc = fe_load(path, opt, f, err, errlen);
    }
    free(shapes);
    return lrc ? -1 : 0;
}

/* Allocates the per-value and per-node marks the derivation fills (tr_free
 * frees them); no node is a fused GELU or SiLU yet. */
static void tr_alloc_marks(tr *T) {
    size_t nv = T->f->n_values, nn = T->f->n_nodes;
    T->req = xcalloc(nv + 1, 1);
    T->useful = xcalloc(nv + 1, 1);
    T->param = xcalloc(nv + 1, 1);
    T->frozen = xcalloc(nv + 1, 1);
    T->fused = xcalloc(nn + 1, 1);
    T->gelu_x = xmallocarray(nn + 1, sizeof *T->gelu_x);
    T->silu_x = xmallocarray(nn + 1, sizeof *T->silu_x);
    T->fwd = xcalloc(nn + 1, sizeof *T->fwd);
    for (size_t i = 0; i < nn; i++) {
        T->gelu_x[i] = -1;
        T->silu_x[i] = -1;
    }
}

/* Copies the forward values into T's value table, keeping their indices
 * (the table starts empty, and a name given twice gets a suffix, not a new
 * index). */
static void tr_copy_values(tr *T) {
    const fe_model *f = T->f;
    for (size_t v = 0; v < f->n_values; v++) {
        const fe_value *fv = &f->values[v];
        int64_t dims[FI_MAX_RANK];
        int rank = fv->rank > 0 ? fv->rank : 0;
        for (int d = 0; d < rank && d < FI_MAX_RANK; d++) dims[d] = fv->dims[d].value;
        int index = tr_add_value(T, fv->name, fv->elem_type, rank, dims);
        assert(index == (int)v);
        (void)index;
        T->v[v].tensor = fv->seq_len < 0 && fv->rank >= 0;
    }
}

/* The loss goes on the first float tensor output. */
static int tr_pick_loss_output(tr *T) {
    const fe_model *f = T->f;
    T->loss_out = -1;
    for (size_t k = 0; k < f->n_outputs && T->loss_out < 0; k++)
        if (tr_float(f->values[f->outputs[k]].elem_type) && f->values[f->outputs[k]].seq_len < 0)
            T->loss_out = f->outputs[k];
    if (T->loss_out < 0) {
        char eb[32];
        return tr_fail(
            T, "the graph has no float output to put a loss on (its first output '%s' is %s)",
            f->n_outputs ? f->values[f->outputs[0]].name : "?",
            f->n_outputs ? fe_elem_name(f->values[f->outputs[0]].elem_type, eb, sizeof eb)
                         : "missing");
    }
    return 0;
}

/* Finds the GELU and SiLU patterns, which need each value's reader count. */
static void tr_find_fusions(tr *T) {
    const fe_model *f = T->f;
    int *readers = xcalloc(f->n_values + 1, sizeof *readers);
    for (size_t i = 0; i < f->n_nodes; i++)
        for (size_t k = 0; k < f->nodes[i].n_inputs; k++)
            if (f->nodes[i].inputs[k] >= 0) readers[f->nodes[i].inputs[k]]++;
    tr_find_gelu(T, readers);
    tr_find_silu(T, readers);
    free(readers);
}

/* Sorts the forward inputs into parameters (with their gradients), buffers,
 * frozen weights and data; the label --train adds is data too. */
static void tr_sort_inputs(tr *T, tr_lists *L) {
    const fe_model *f = T->f;
    for (size_t k = 0; k < f->n_inputs; k++) {
        int v = f->inputs[k];
        const fe_value *fv = &f->values[v];
        if (T->param[v]) {
            int g = T->grad[v];
            if (g >= 0 && T->shared[v])
                g = tr_op(T, "clone", v, 0, INS(g)); /* AccumulateGrad copies a shared gradient */
            tr_push(&L->params, v);
            tr_push(&L->grads, g);
        } else if (fv->kind & FE_INITIALIZER) {
            if (tr_float(fv->elem_type)) tr_push(&L->buffers, v);
            if (T->frozen[v]) tr_push(&L->frozen, v);
        } else {
            tr_push(&L->data, v);
        }
    }
    if (T->label >= 0) tr_push(&L->data, T->label);
}

/* Loads the packed training graph into m, as the planner will read it. */
static int tr_load_derived(tr *T, const char *name, const uint8_t *bytes, size_t len, fe_model *m) {
    if (fe_load_bytes(name, bytes, len, NULL, m, T->err, T->errlen)) {
        /* a derivation bug, not bad input: say so */
        char inner[1024];
        snprintf(inner, sizeof inner, "%s", T->err);
        return tr_fail(T, "internal error: the derived training graph does not load: %s", inner);
    }
    return 0;
}

int fe_train(const char *path, const fe_options *opt, const fe_train_options *t, fe_model *m,
             char **summary, uint8_t **derived, size_t *derived_len, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    *summary = NULL;
    if (derived) *derived = NULL, *derived_len = 0;
    fe_model f;
    const fe_input_shape *label_bind;
    if (tr_load_forward(path, opt, &f, &label_bind, err, errlen)) return -1;
    tr T = {.path = path,
            .f = &f,
            .opt = t,
            .err = err,
            .errlen = errlen,
            .label = -1,
            .loss = -1,
            .label_view = -1,
            .label_bind = label_bind};
    tr_lists L = {0};
    uint8_t *bytes = NULL;
    size_t len = 0;
    int rc = -1;
    if (t->emit_path && tr_check_emit(&T, path, t->emit_path)) goto out;
    if (tr_read_proto(&T)) goto out;
    tr_alloc_marks(&T);
    tr_copy_values(&T);
    if (tr_pick_loss_output(&T)) goto out;
    tr_find_fusions(&T);
    if (tr_analyse(&T)) goto out;
    tr_adjust_forward(&T);
    if (tr_build_loss(&T) || tr_backward(&T)) goto out;
    tr_sort_inputs(&T, &L);
    tr_optimizer(&T, &L.params, &L.grads, &L.states);
    tr_pack(&T, &L, &bytes, &len);
    if (tr_load_derived(&T, t->emit_path ? t->emit_path : path, bytes, len, m)) goto out;
    *summary = tr_summary(&T, &L);
    if (derived) { /* the caller writes it (--emit-train) */
        *derived = bytes, *derived_len = len;
        bytes = NULL;
    }
    rc = 0;
out:
    free(bytes);
    free(L.data.v);
    free(L.params.v);
    free(L.grads.v);
    free(L.states.v);
    free(L.buffers.v);
    free(L.frozen.v);
    tr_free(&T);
    fe_free(&f);
    return rc;
}
