/* frontend/train/train_rules.c — the gradient rule table of --train and the
 * backward pass that applies it (train_internal.h; TRAIN.md lists the rules).
 *
 * A rule reads its forward node's inputs, outputs and output gradients
 * through tr_input, tr_output and tr_output_grad, emits the ATen ops that
 * PyTorch's autograd runs for that op (train.c's tr_op, tr_view, ...), and
 * hands each input its gradient with tr_give.
 */
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "train_internal.h"

/* ------------------------------------------------------------ rule table */

typedef struct tr_ctx {
    tr *T;
    int ni; /* forward node */
    const fe_node *n;
} tr_ctx;

/* The forward node's explicit input k (subgraph reads excluded), or -1. */
static int tr_input(const tr_ctx *c, size_t k) {
    return k < c->n->n_explicit_inputs ? c->n->inputs[k] : -1;
}
/* The forward node's output k as the derived graph has it (with the optional
 * outputs train.c's forward adjustments add), or -1. */
static int tr_output(const tr_ctx *c, size_t k) {
    const tr_fwd *fw = &c->T->fwd[c->ni];
    if (fw->out) return k < fw->n_out ? fw->out[k] : -1;
    return k < c->n->n_outputs ? c->n->outputs[k] : -1;
}
/* The gradient of output k, or -1. */
static int tr_output_grad(const tr_ctx *c, size_t k) {
    int o = tr_output(c, k);
    return o >= 0 && o < (int)c->T->f->n_values ? c->T->grad[o] : -1;
}
/* Input k wants a gradient. */
static bool tr_input_needs_grad(const tr_ctx *c, size_t k) {
    int x = tr_input(c, k);
    return x >= 0 && c->T->req[x] && c->T->useful[x];
}

typedef int (*tr_rule)(tr_ctx *c);

/* x <- op(gY, saved...) shaped like x: the unary pattern of most rules. */
static int tr_unary(tr_ctx *c, const char *op, int saved) {
    if (!tr_input_needs_grad(c, 0)) return 0;
    int gy = tr_output_grad(c, 0), x = tr_input(c, 0);
    int g = saved >= 0 ? tr_op(c->T, op, x, 0, TR_VALUES(gy, saved))
                       : tr_op(c->T, op, x, 0, TR_VALUES(gy));
    return tr_give(c->T, x, g, false);
}

/* ReLU keeps its output (ReluBackward0 saves result), as do sigmoid and tanh. */
static int tr_rule_relu(tr_ctx *c) {
    return tr_unary(c, "threshold_backward", tr_output(c, 0));
}
static int tr_rule_sigmoid(tr_ctx *c) {
    return tr_unary(c, "sigmoid_backward", tr_output(c, 0));
}
static int tr_rule_tanh(tr_ctx *c) {
    return tr_unary(c, "tanh_backward", tr_output(c, 0));
}
/* These keep their input. */
static int tr_rule_gelu(tr_ctx *c) {
    return tr_unary(c, "gelu_backward", tr_input(c, 0));
}
static int tr_rule_leaky(tr_ctx *c) {
    return tr_unary(c, "leaky_relu_backward", tr_input(c, 0));
}
static int tr_rule_elu(tr_ctx *c) {
    return tr_unary(c, "elu_backward", tr_input(c, 0));
}
static int tr_rule_hsig(tr_ctx *c) {
    return tr_unary(c, "hardsigmoid_backward", tr_input(c, 0));
}
static int tr_rule_hswish(tr_ctx *c) {
    return tr_unary(c, "hardswish_backward", tr_input(c, 0));
}
static int tr_rule_softplus(tr_ctx *c) {
    return tr_unary(c, "softplus_backward", tr_input(c, 0));
}
static int tr_rule_mish(tr_ctx *c) {
    return tr_unary(c, "mish_backward", tr_input(c, 0));
}
static int tr_rule_softmax(tr_ctx *c) {
    return tr_unary(c, "_softmax_backward_data", tr_output(c, 0));
}
static int tr_rule_logsoftmax(tr_ctx *c) {
    return tr_unary(c, "_log_softmax_backward_data", tr_output(c, 0));
}
static int tr_rule_exp(tr_ctx *c) {
    return tr_unary(c, "mul", tr_output(c, 0));
}
static int tr_rule_log(tr_ctx *c) {
    return tr_unary(c, "div", tr_input(c, 0));
}
static int tr_rule_neg(tr_ctx *c) {
    return tr_unary(c, "neg", -1);
}
static int tr_rule_identity(tr_ctx *c);
/* A Cast to the value's own type is the value itself (a view, see tr_adjust_nodes). */
static int tr_rule_cast(tr_ctx *c) {
    return c->T->fwd[c->ni].identity ? tr_rule_identity(c) : tr_unary(c, "_to_copy", -1);
}
static int tr_rule_avgpool(tr_ctx *c) {
    return tr_unary(c, "avg_pool2d_backward", tr_input(c, 0));
}
static int tr_rule_pad(tr_ctx *c) {
    return tr_unary(c, "constant_pad_nd", -1);
}
static int tr_rule_slice(tr_ctx *c) {
    return tr_unary(c, "slice_backward", -1);
}
static int tr_rule_tile(tr_ctx *c) {
    return tr_unary(c, "sum", -1);
}
/* Dropout keeps only its mask (native_dropout's second output); one that passes
 * its input through is a view, its gradient passed on. */
static int tr_rule_identity(tr_ctx *c);
static int tr_rule_dropout(tr_ctx *c) {
    if (c->T->fwd[c->ni].identity) return tr_rule_identity(c);
    return tr_unary(c, "native_dropout_backward", tr_output(c, 1));
}
static int tr_rule_maxpool(tr_ctx *c) {
    if (!tr_input_needs_grad(c, 0)) return 0;
    int x = tr_input(c, 0);
    int g = tr_op(c->T, "max_pool2d_with_indices_backward", x, 0,
                  TR_VALUES(tr_output_grad(c, 0), x, tr_output(c, 1)));
    return tr_give(c->T, x, g, false);
}

/* f'(x) as a chain of temporaries, then mul by the gradient: what the
 * autograd formulas dispatch op by op (SqrtBackward0: grad / (2 * result)). */
static int tr_chain(tr_ctx *c, int saved, const char *const *ops, size_t n_ops, const char *last) {
    if (!tr_input_needs_grad(c, 0)) return 0;
    int x = tr_input(c, 0), t = saved, gy = tr_output_grad(c, 0);
    /* the first temporary also reads the gradient: autograd computes the
     * formula when the gradient arrives, and without the edge a planner
     * could hoist it into the forward pass (keeping, say, a bool mask
     * instead of the float input), which PyTorch never does */
    for (size_t k = 0; k < n_ops; k++)
        if ((t = k ? tr_op(c->T, ops[k], x, 0, TR_VALUES(t))
                   : tr_op(c->T, ops[k], x, 0, TR_VALUES(t, gy))) < 0)
            return -1;
    int g = tr_op(c->T, last, x, 0, TR_VALUES(tr_output_grad(c, 0), t));
    return tr_give(c->T, x, g, false);
}
static int tr_rule_sqrt(tr_ctx *c) {
    return tr_chain(c, tr_output(c, 0), (const char *const[]){"mul"}, 1, "div");
}
static int tr_rule_erf(tr_ctx *c) {
    return tr_chain(c, tr_input(c, 0), (const char *const[]){"pow", "neg", "exp", "mul"}, 4, "mul");
}
/* The base: pow_backward_self; a trained exponent (PowBackward1 keeps self,
 * exponent and result): grad * (result * log(self)), reduced to its shape. */
static int tr_rule_pow(tr_ctx *c) {
    if (tr_chain(c, tr_input(c, 0), (const char *const[]){"pow", "mul"}, 2, "mul")) return -1;
    if (!tr_input_needs_grad(c, 1)) return 0;
    int x = tr_input(c, 0), y = tr_output(c, 0), gy = tr_output_grad(c, 0);
    int t0 = tr_op(c->T, "log", x, 0, TR_VALUES(x, gy)); /* reads the gradient: see tr_chain */
    int t1 = t0 < 0 ? -1 : tr_op(c->T, "mul", y, 0, TR_VALUES(y, t0));
    int g = t1 < 0 ? -1 : tr_op(c->T, "mul", y, 0, TR_VALUES(gy, t1));
    return tr_give(c->T, tr_input(c, 1), g, false);
}
static int tr_rule_abs(tr_ctx *c) {
    return tr_chain(c, tr_input(c, 0), (const char *const[]){"sgn"}, 1, "mul");
}
static int tr_rule_sin(tr_ctx *c) {
    return tr_chain(c, tr_input(c, 0), (const char *const[]){"cos"}, 1, "mul");
}
static int tr_rule_cos(tr_ctx *c) {
    return tr_chain(c, tr_input(c, 0), (const char *const[]){"sin", "neg"}, 2, "mul");
}
static int tr_rule_reciprocal(tr_ctx *c) {
    if (!tr_input_needs_grad(c, 0)) return 0;
    int x = tr_input(c, 0), y = tr_output(c, 0);
    int t1 = tr_op(c->T, "neg", x, 0, TR_VALUES(tr_output_grad(c, 0)));
    int t2 = t1 < 0 ? -1 : tr_op(c->T, "mul", x, 0, TR_VALUES(t1, y));
    int g = t2 < 0 ? -1 : tr_op(c->T, "mul", x, 0, TR_VALUES(t2, y));
    return tr_give(c->T, x, g, false);
}
/* Clip is torch's hardtanh (ReLU6 in MobileNet): hardtanh_backward keeps the input. */
static int tr_rule_clip(tr_ctx *c) {
    return tr_unary(c, "hardtanh_backward", tr_input(c, 0));
}

/* Add and Sum pass the same gradient tensor on (AddBackward0 saves nothing). */
static int tr_rule_add(tr_ctx *c) {
    for (size_t k = 0; k < c->n->n_explicit_inputs; k++)
        if (tr_input_needs_grad(c, k) && tr_give(c->T, tr_input(c, k), tr_output_grad(c, 0), true))
            return -1;
    return 0;
}
static int tr_rule_sub(tr_ctx *c) {
    if (tr_input_needs_grad(c, 0) && tr_give(c->T, tr_input(c, 0), tr_output_grad(c, 0), true))
        return -1;
    if (tr_input_needs_grad(c, 1)) {
        int g = tr_op(c->T, "neg", tr_output(c, 0), 0, TR_VALUES(tr_output_grad(c, 0)));
        if (tr_give(c->T, tr_input(c, 1), g, false)) return -1;
    }
    return 0;
}
/* MulBackward0 saves other for self's gradient and self for other's. */
static int tr_rule_mul(tr_ctx *c) {
    for (size_t k = 0; k < 2; k++) {
        if (!tr_input_needs_grad(c, k)) continue;
        int g = tr_op(c->T, "mul", tr_output(c, 0), 0,
                      TR_VALUES(tr_output_grad(c, 0), tr_input(c, 1 - k)));
        if (tr_give(c->T, tr_input(c, k), g, false)) return -1;
    }
    return 0;
}
/* DivBackward0: grad / other; -grad * ((self / other) / other). */
static int tr_rule_div(tr_ctx *c) {
    tr *T = c->T;
    int y = tr_output(c, 0), a = tr_input(c, 0), b = tr_input(c, 1), gy = tr_output_grad(c, 0);
    if (tr_input_needs_grad(c, 0) && tr_give(T, a, tr_op(T, "div", y, 0, TR_VALUES(gy, b)), false))
        return -1;
    if (tr_input_needs_grad(c, 1)) {
        int t0 = tr_op(T, "neg", y, 0, TR_VALUES(gy));
        int t1 = t0 < 0 ? -1 : tr_op(T, "mul", y, 0, TR_VALUES(t0, a));
        int t2 = t1 < 0 ? -1 : tr_op(T, "div", y, 0, TR_VALUES(t1, b));
        int g = t2 < 0 ? -1 : tr_op(T, "div", y, 0, TR_VALUES(t2, b));
        if (tr_give(T, b, g, false)) return -1;
    }
    return 0;
}
static int tr_rule_where(tr_ctx *c) {
    for (size_t k = 1; k < 3; k++) {
        if (!tr_input_needs_grad(c, k)) continue;
        int g = tr_op(c->T, "where", tr_output(c, 0), 0,
                      TR_VALUES(tr_input(c, 0), tr_output_grad(c, 0)));
        if (tr_give(c->T, tr_input(c, k), g, false)) return -1;
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
    tr_emit(T, op, in, TR_VALUES(o), NULL, 0);
    return o;
}
/* MatMul keeps both operands.  A 2-D right operand is torch's folded
 * linear (mm on the flattened left); otherwise bmm, whose result is summed
 * over broadcast batch dims. */
static int tr_rule_matmul(tr_ctx *c) {
    tr *T = c->T;
    int a = tr_input(c, 0), b = tr_input(c, 1), y = tr_output(c, 0), gy = tr_output_grad(c, 0);
    bool folded = T->v[b].rank <= 2;
    if (tr_input_needs_grad(c, 0)) {
        int g = folded ? tr_op(T, "mm", a, 0, TR_VALUES(gy, b))
                       : tr_batched_like(T, "bmm", y, a, TR_VALUES(gy, b));
        if (tr_give(T, a, g, false)) return -1;
    }
    if (tr_input_needs_grad(c, 1)) {
        int g = folded ? tr_op(T, "mm", b, 0, TR_VALUES(a, gy))
                       : tr_batched_like(T, "bmm", y, b, TR_VALUES(a, gy));
        if (tr_give(T, b, g, false)) return -1;
    }
    return 0;
}
/* Gemm as torch's addmm: mm for A, mm for B, a sum for the bias. */
static int tr_rule_gemm(tr_ctx *c) {
    tr *T = c->T;
    int gy = tr_output_grad(c, 0);
    if (tr_input_needs_grad(c, 0) &&
        tr_give(T, tr_input(c, 0), tr_op(T, "mm", tr_input(c, 0), 0, TR_VALUES(gy, tr_input(c, 1))),
                false))
        return -1;
    if (tr_input_needs_grad(c, 1) &&
        tr_give(T, tr_input(c, 1), tr_op(T, "mm", tr_input(c, 1), 0, TR_VALUES(gy, tr_input(c, 0))),
                false))
        return -1;
    if (tr_input_needs_grad(c, 2) && tr_give(T, tr_input(c, 2), gy, true)) return -1;
    return 0;
}
/* One backward op that reads ins and has an output per input 0..2 that wants
 * a gradient (-1 for the others), each output given to its input: the shape
 * of convolution_backward, native_batch_norm_backward and
 * native_layer_norm_backward. */
static int tr_grads_of_three(tr_ctx *c, const char *op, const int *ins) {
    tr *T = c->T;
    int o[4] = {-1, -1, -1, TR_VALUES_END};
    for (size_t k = 0; k < 3; k++)
        if (tr_input_needs_grad(c, k)) o[k] = tr_new_like(T, op, tr_input(c, k), 0);
    if (o[0] < 0 && o[1] < 0 && o[2] < 0) return 0;
    tr_emit(T, op, ins, o, NULL, 0);
    for (size_t k = 0; k < 3; k++)
        if (o[k] >= 0 && tr_give(T, tr_input(c, k), o[k], false)) return -1;
    return 0;
}
/* convolution_backward keeps input and weight; one op, three outputs. */
static int tr_rule_conv(tr_ctx *c) {
    return tr_grads_of_three(c, "convolution_backward",
                             TR_VALUES(tr_output_grad(c, 0), tr_input(c, 0), tr_input(c, 1)));
}
/* native_batch_norm_backward keeps input, weight and the statistics (the
 * running stats the forward node updates in place stand for the saved
 * mean/invstd, which ONNX's BatchNormalization from opset 14 does not output). */
static int tr_rule_batchnorm(tr_ctx *c) {
    int m = tr_output(c, 1) >= 0 ? tr_output(c, 1) : tr_input(c, 3),
        v = tr_output(c, 2) >= 0 ? tr_output(c, 2) : tr_input(c, 4);
    return tr_grads_of_three(c, "native_batch_norm_backward",
                             TR_VALUES(tr_output_grad(c, 0), tr_input(c, 0), tr_input(c, 1), m, v));
}
/* native_layer_norm_backward keeps input, mean, rstd, weight and bias. */
static int tr_rule_layernorm(tr_ctx *c) {
    return tr_grads_of_three(c, "native_layer_norm_backward",
                             TR_VALUES(tr_output_grad(c, 0), tr_input(c, 0), tr_output(c, 1),
                                       tr_output(c, 2), tr_input(c, 1), tr_input(c, 2)));
}
/* GlobalAveragePool is torch's mean over H, W: it keeps nothing; its
 * backward expands the gradient (a view) and divides (a new tensor). */
static int tr_rule_mean(tr_ctx *c) {
    if (!tr_input_needs_grad(c, 0)) return 0;
    int x = tr_input(c, 0);
    int e = tr_view(c->T, "expand", tr_output_grad(c, 0), x);
    int g = e < 0 ? -1 : tr_op(c->T, "div", x, 0, TR_VALUES(e));
    return tr_give(c->T, x, g, false);
}
static int tr_rule_reducesum(tr_ctx *c) {
    if (!tr_input_needs_grad(c, 0)) return 0;
    int x = tr_input(c, 0);
    return tr_give(c->T, x, tr_view(c->T, "expand", tr_output_grad(c, 0), x), true);
}
/* Views: the gradient is a view of the output's gradient. */
static int tr_rule_view(tr_ctx *c) {
    if (!tr_input_needs_grad(c, 0)) return 0;
    int x = tr_input(c, 0);
    return tr_give(c->T, x, tr_view(c->T, "view", tr_output_grad(c, 0), x),
                   c->T->shared[tr_output(c, 0)]);
}
static int tr_rule_identity(tr_ctx *c) {
    if (!tr_input_needs_grad(c, 0)) return 0;
    return tr_give(c->T, tr_input(c, 0), tr_output_grad(c, 0), true);
}
/* A Transpose of a weight is torch's t() view; of an activation, a copy
 * (permute + contiguous), and so is its backward. */
static int tr_rule_transpose(tr_ctx *c) {
    if (!tr_input_needs_grad(c, 0)) return 0;
    int x = tr_input(c, 0);
    if (c->T->fwd[c->ni].has_alias)
        return tr_give(c->T, x, tr_view(c->T, "t", tr_output_grad(c, 0), x),
                       c->T->shared[tr_output(c, 0)]);
    return tr_give(c->T, x, tr_op(c->T, "permute_copy", x, 0, TR_VALUES(tr_output_grad(c, 0))),
                   false);
}
/* CatBackward0 narrows the gradient: views. */
static int tr_rule_concat(tr_ctx *c) {
    for (size_t k = 0; k < c->n->n_explicit_inputs; k++) {
        if (!tr_input_needs_grad(c, k)) continue;
        if (tr_give(c->T, tr_input(c, k),
                    tr_view(c->T, "slice", tr_output_grad(c, 0), tr_input(c, k)), true))
            return -1;
    }
    return 0;
}
/* SplitBackward0 concatenates the outputs' gradients, zeros where one has none. */
static int tr_rule_split(tr_ctx *c) {
    if (!tr_input_needs_grad(c, 0)) return 0;
    tr *T = c->T;
    size_t no = c->n->n_outputs;
    if (no + 1 > TR_MAX_IO)
        return tr_fail(T, "node '%s' (#%d): %zu outputs", tr_node_label(T, c->ni), c->ni, no);
    int *in = xmallocarray(no + 1, sizeof *in);
    size_t k = 0;
    for (; k < no; k++) {
        in[k] = tr_output_grad(c, k);
        if (in[k] < 0 && tr_output(c, k) >= 0) {
            in[k] = tr_new_like(T, "new_zeros", tr_output(c, k), 0);
            tr_emit(T, "new_zeros", (const int[]){TR_VALUES_END}, TR_VALUES(in[k]), NULL, 0);
        }
    }
    in[k] = TR_VALUES_END;
    int g = tr_op(T, "cat", tr_input(c, 0), 0, in);
    free(in);
    return tr_give(T, tr_input(c, 0), g, false);
}
/* Gather of a weight is an embedding (embedding_dense_backward); of an
 * activation, index_select's backward.  Both keep only the indices. */
static int tr_rule_gather(tr_ctx *c) {
    if (!tr_input_needs_grad(c, 0)) return 0;
    int x = tr_input(c, 0);
    const char *op = c->T->param[x] ? "embedding_dense_backward" : "index_select_backward";
    return tr_give(c->T, x, tr_op(c->T, op, x, 0, TR_VALUES(tr_output_grad(c, 0), tr_input(c, 1))),
                   false);
}
static int tr_rule_gather_elements(tr_ctx *c) {
    if (!tr_input_needs_grad(c, 0)) return 0;
    int x = tr_input(c, 0);
    return tr_give(
        c->T, x,
        tr_op(c->T, "gather_backward", x, 0, TR_VALUES(tr_output_grad(c, 0), tr_input(c, 1))),
        false);
}
static int tr_rule_expand(tr_ctx *c) {
    if (!tr_input_needs_grad(c, 0)) return 0;
    return tr_give(c->T, tr_input(c, 0), tr_output_grad(c, 0), true);
}
/* SoftmaxCrossEntropyLoss as torch's cross_entropy: nll_loss_backward and
 * _log_softmax_backward_data, keeping the log-probabilities. */
static int tr_rule_sce(tr_ctx *c) {
    if (!tr_input_needs_grad(c, 0)) return 0;
    tr *T = c->T;
    int lp = tr_output(c, 1), x = tr_input(c, 0);
    bool nd = T->v[x].rank > 2;
    int t = tr_op(T, nd ? "nll_loss2d_backward" : "nll_loss_backward", lp, 0,
                  TR_VALUES(tr_output_grad(c, 0), lp, tr_input(c, 1)));
    int g = t < 0 ? -1 : tr_op(T, "_log_softmax_backward_data", x, 0, TR_VALUES(t, lp));
    return tr_give(T, x, g, false);
}
static int tr_rule_nll(tr_ctx *c) {
    if (!tr_input_needs_grad(c, 0)) return 0;
    int x = tr_input(c, 0);
    bool nd = c->T->v[x].rank > 2;
    return tr_give(c->T, x,
                   tr_op(c->T, nd ? "nll_loss2d_backward" : "nll_loss_backward", x, 0,
                         TR_VALUES(tr_output_grad(c, 0), x, tr_input(c, 1))),
                   false);
}
/* The Erf form of GELU that torch.onnx writes for F.gelu (opset < 20):
 * PyTorch runs one gelu and keeps x; the rule sits on the last Mul. */
static int tr_rule_fused_gelu(tr_ctx *c) {
    int x = c->T->gelu_x[c->ni];
    if (!(c->T->req[x] && c->T->useful[x])) return 0;
    return tr_give(c->T, x, tr_op(c->T, "gelu_backward", x, 0, TR_VALUES(tr_output_grad(c, 0), x)),
                   false);
}
/* SiLU as torch.onnx writes nn.SiLU / F.silu: Mul(x, Sigmoid(x)).  PyTorch runs one
 * silu and keeps x; op by op the Sigmoid would keep its output and the Mul both
 * factors (efficientnet_b0 b32: +27% on the peak).  The rule sits on the Mul. */
static int tr_rule_fused_silu(tr_ctx *c) {
    int x = c->T->silu_x[c->ni];
    if (!(c->T->req[x] && c->T->useful[x])) return 0;
    return tr_give(c->T, x, tr_op(c->T, "silu_backward", x, 0, TR_VALUES(tr_output_grad(c, 0), x)),
                   false);
}

/* diff: bit k set = input k can carry a gradient (0: every input). */
typedef struct tr_rule_entry {
    const char *op;
    tr_rule rule;
    unsigned diff;
} tr_rule_entry;

static const tr_rule_entry tr_rules[] = {
    {"Relu", tr_rule_relu, 0},
    {"Sigmoid", tr_rule_sigmoid, 0},
    {"Tanh", tr_rule_tanh, 0},
    {"Gelu", tr_rule_gelu, 0},
    {"LeakyRelu", tr_rule_leaky, 0},
    {"Elu", tr_rule_elu, 0},
    {"Selu", tr_rule_elu, 0},
    {"Celu", tr_rule_elu, 0},
    {"HardSigmoid", tr_rule_hsig, 0},
    {"HardSwish", tr_rule_hswish, 0},
    {"Softplus", tr_rule_softplus, 0},
    {"Mish", tr_rule_mish, 0},
    {"Softmax", tr_rule_softmax, 0},
    {"LogSoftmax", tr_rule_logsoftmax, 0},
    {"Exp", tr_rule_exp, 0},
    {"Log", tr_rule_log, 0},
    {"Neg", tr_rule_neg, 0},
    {"Cast", tr_rule_cast, 1},
    {"Sqrt", tr_rule_sqrt, 0},
    {"Erf", tr_rule_erf, 0},
    {"Pow", tr_rule_pow, 0},
    {"Abs", tr_rule_abs, 0},
    {"Sin", tr_rule_sin, 0},
    {"Cos", tr_rule_cos, 0},
    {"Reciprocal", tr_rule_reciprocal, 0},
    {"Clip", tr_rule_clip, 1},
    {"Add", tr_rule_add, 0},
    {"Sum", tr_rule_add, 0},
    {"Sub", tr_rule_sub, 0},
    {"Mul", tr_rule_mul, 0},
    {"Div", tr_rule_div, 0},
    {"Where", tr_rule_where, 6},
    {"MatMul", tr_rule_matmul, 0},
    {"Gemm", tr_rule_gemm, 0},
    {"Conv", tr_rule_conv, 0},
    {"ConvTranspose", tr_rule_conv, 0},
    {"BatchNormalization", tr_rule_batchnorm, 7},
    {"LayerNormalization", tr_rule_layernorm, 0},
    {"MaxPool", tr_rule_maxpool, 1},
    {"AveragePool", tr_rule_avgpool, 1},
    {"GlobalAveragePool", tr_rule_mean, 1},
    {"ReduceMean", tr_rule_mean, 1},
    {"ReduceSum", tr_rule_reducesum, 1},
    {"Reshape", tr_rule_view, 1},
    {"Flatten", tr_rule_view, 1},
    {"Squeeze", tr_rule_view, 1},
    {"Unsqueeze", tr_rule_view, 1},
    {"Identity", tr_rule_identity, 1},
    {"Transpose", tr_rule_transpose, 1},
    {"Concat", tr_rule_concat, 0},
    {"Split", tr_rule_split, 1},
    {"Slice", tr_rule_slice, 1},
    {"Gather", tr_rule_gather, 1},
    {"GatherElements", tr_rule_gather_elements, 1},
    {"Expand", tr_rule_expand, 1},
    {"Tile", tr_rule_tile, 1},
    {"Pad", tr_rule_pad, 1},
    {"Dropout", tr_rule_dropout, 1},
    {"SoftmaxCrossEntropyLoss", tr_rule_sce, 1},
    {"NegativeLogLikelihoodLoss", tr_rule_nll, 1},
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

bool tr_has_rule(const fe_node *n) {
    return tr_rule_of(n) != NULL;
}

/* (train_internal.h) */
bool tr_diff_slot(const fe_node *n, size_t k) {
    if (tr_is_nondiff(n)) return false;
    const tr_rule_entry *r = tr_rule_of(n);
    if (!r || r->diff == 0) return true;
    return k < 32 && (r->diff >> k) & 1u;
}

/* --------------------------------------------------------------- backward */

/* (train_internal.h) */
int tr_backward(tr *T) {
    const fe_model *f = T->f;
    size_t before = T->nn;
    for (size_t i = f->n_nodes; i-- > 0;) {
        const fe_node *n = &f->nodes[i];
        if (T->fused[i]) {
            tr_accumulate_at(T, (int)i);
            continue;
        }
        tr_ctx c = {T, (int)i, n};
        bool any = false;
        for (size_t k = 0; k < n->n_outputs; k++)
            if (tr_output_grad(&c, k) >= 0) any = true;
        if (!any) {
            tr_accumulate_at(T, (int)i);
            continue;
        }
        tr_rule rule = NULL;
        if (T->gelu_x[i] >= 0)
            rule = tr_rule_fused_gelu;
        else if (T->silu_x[i] >= 0)
            rule = tr_rule_fused_silu;
        else if (tr_rule_of(n))
            rule = tr_rule_of(n)->rule;
        if (rule && rule(&c)) return -1;
        tr_accumulate_at(T, (int)i);
    }
    T->n_backward += T->nn - before; /* every microbatch's */
    return 0;
}
