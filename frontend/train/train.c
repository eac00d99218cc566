/* frontend/train/train.c — `roamc --train`: one training step derived from a
 * forward-only ONNX graph (frontend.h fe_train; the rules in TRAIN.md): the
 * graph surgery (train_internal.h says what the other two files hold).
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

#include "base.h"
#include "proto.h"
#include "train_internal.h"

/* ------------------------------------------------------------- analysis */

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
        if (T->fused[i] || tr_has_rule(n) || T->gelu_x[i] >= 0 || T->silu_x[i] >= 0) continue;
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

/* Output k of forward node ni as the derived graph has it, or -1. */
static int tr_fwd_out(const tr *T, int ni, size_t k) {
    const tr_fwd *fw = &T->fwd[ni];
    const fe_node *n = &T->f->nodes[ni];
    if (fw->out) return k < fw->n_out ? fw->out[k] : -1;
    return k < n->n_outputs ? n->outputs[k] : -1;
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
        if (!strcmp(op, "BatchNormalization") && T->fwd[i].to_training) {
            /* an inference-form BatchNorm planned in training mode: its running-stat outputs */
            int m = n->inputs[3];
            int64_t c = T->v[m].rank == 1 ? T->v[m].dims[0] : 1;
            tr_fwd_output(T, (int)i, 1, "running_mean", T->v[m].elem, 1, &c);
            tr_fwd_output(T, (int)i, 2, "running_var", T->v[n->inputs[4]].elem, 1, &c);
        }
        if (!strcmp(op, "BatchNormalization") && n->n_explicit_inputs >= 5 &&
            tr_fwd_out(T, (int)i, 1) >= 0 && tr_fwd_out(T, (int)i, 2) >= 0 &&
            (!T->fwd[i].to_training || ((f->values[n->inputs[3]].kind & FE_INITIALIZER) &&
                                        (f->values[n->inputs[4]].kind & FE_INITIALIZER)))) {
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
        } else if (!strcmp(op, "Dropout") && x >= 0 && y >= 0 && tr_dropout_ratio_zero(T, (int)i)) {
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

/* The gradient of the loss value `loss` as loss.backward() seeds it (ones_like).  With
 * --grad-accum K the loss is first divided by K (loss / K, what the step returns: T->loss)
 * and its gradient divided back (DivBackward0); with amp-fp16 GradScaler scales it
 * (scaler.scale(loss).backward(): MulBackward0 multiplies the seed by the scale).  Returns
 * the gradient of `loss`. */
static int tr_seed(tr *T, int loss) {
    int v = loss;
    if (T->accum > 1) v = tr_op(T, "div", loss, 0, TR_VALUES(loss));
    T->loss = v;
    int top = T->scale >= 0 ? tr_op(T, "mul", v, 0, TR_VALUES(v, T->scale)) : v;
    int g = tr_op(T, "ones_like", top, 0, TR_VALUES(top));
    if (T->scale >= 0) g = tr_op(T, "mul", v, 0, TR_VALUES(g, T->scale));
    if (T->accum > 1) g = tr_op(T, "div", loss, 0, TR_VALUES(g));
    return g;
}

/* cross_entropy on [N, C] logits as torch dispatches it: _log_softmax,
 * nll_loss_forward (loss, total_weight); then the seed ones_like(loss),
 * nll_loss_backward, _log_softmax_backward_data.  Returns the gradient of y. */
static int tr_cross_entropy(tr *T, int y, int label, bool nd) {
    const char *fwd = nd ? "nll_loss2d_forward" : "nll_loss_forward";
    int lsm = tr_op(T, "_log_softmax", y, 0, TR_VALUES(y));
    int loss = tr_new_shape(T, fwd, T->v[y].elem, 0, NULL);
    int tw = tr_new_shape(T, fwd, T->v[y].elem, 0, NULL);
    tr_emit(T, fwd, TR_VALUES(lsm, label), TR_VALUES(loss, tw), NULL, 0);
    int seed = tr_seed(T, loss);
    int g = tr_op(T, nd ? "nll_loss2d_backward" : "nll_loss_backward", y, 0,
                  TR_VALUES(seed, lsm, label, -1, tw));
    return tr_op(T, "_log_softmax_backward_data", y, 0, TR_VALUES(g, lsm));
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
    if (T->accum > 1) { /* microbatch k's label: mb<k>.target, as export.py names data inputs */
        char mbname[64];
        snprintf(mbname, sizeof mbname, "mb%d.%s", T->mb, name);
        return T->label = tr_add_value(T, mbname, elem, rank, dims);
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
    /* autocast runs the losses (nll_loss, mse_loss: its fp32 list) on an fp32 copy */
    int yc = y;
    if (kind != FE_LOSS_NONE && tr_precision_amp(T->opt->precision) && elem != 1 && tr_float(elem))
        yc = tr_op(T, "_to_copy", y, 1, TR_VALUES(y));
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
        g = tr_seed(T, y);
    } else if (kind == FE_LOSS_MSE) {
        if (tr_label(T, y, T->v[yc].elem, rank, T->v[y].dims) < 0) return -1;
        int loss = tr_new_shape(T, "mse_loss", T->v[yc].elem, 0, NULL);
        tr_emit(T, "mse_loss", TR_VALUES(yc, T->label), TR_VALUES(loss), NULL, 0);
        int seed = tr_seed(T, loss);
        g = tr_op(T, "mse_loss_backward", yc, 0, TR_VALUES(seed, yc, T->label));
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
            g = tr_cross_entropy(T, yc, T->label, false);
        } else if (rank == 3) {
            /* [B, S, C]: classes last, as language models' logits; flattened as
             * HuggingFace's loss does (logits.view(-1, C), labels.view(-1)) */
            if (tr_label(T, y, 7, 2, T->v[y].dims) < 0) return -1;
            int64_t flat[2] = {T->v[y].dims[0] * T->v[y].dims[1], T->v[y].dims[2]};
            int yv = tr_new_shape(T, "view", T->v[yc].elem, 2, flat);
            tr_emit(T, "view", TR_VALUES(yc), TR_VALUES(yv), (const int[]){0}, 0);
            int lv = tr_new_shape(T, "view", 7, 1, flat);
            tr_emit(T, "view", TR_VALUES(T->label), TR_VALUES(lv), (const int[]){0}, 0);
            T->label_view = lv;
            int g2 = tr_cross_entropy(T, yv, lv, false);
            g = tr_view(T, "view", g2, yc);
        } else {
            /* [N, C, D1, ...]: classes on dim 1, torch's convention (nll_loss2d) */
            for (int d = 0, k = 0; d < rank; d++)
                if (d != 1) dims[k++] = T->v[y].dims[d];
            if (tr_label(T, y, 7, rank - 1, dims) < 0) return -1;
            g = tr_cross_entropy(T, yc, T->label, true);
        }
    }
    if (g < 0) return -1;
    if (yc != y) g = tr_op(T, "_to_copy", y, 0, TR_VALUES(g)); /* ToCopyBackward0 */
    T->grad[y] = g;
    T->shared[y] = false;
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
    /* Adam's state['step'] is a float32 tensor whatever the parameter's dtype */
    int32_t step_elem = T->opt->precision == FE_PREC_FP32 ? T->v[p].elem : 1;
    int s = rank_like_p ? tr_add_value(T, name, T->v[p].elem, T->v[p].rank, T->v[p].dims)
                        : tr_add_value(T, name, step_elem, 0, NULL);
    T->n_state++;
    T->n_state_bytes += tr_bytes(T, s);
    return s;
}

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
            tr_add_final(T, tr_inplace(T, "add_", TR_VALUES(p, g)));
            continue;
        }
        if (kind == FE_OPT_MOMENTUM) {
            int buf = tr_state(T, p, "momentum_buffer", 1);
            tr_push(states, buf);
            int b1 = tr_inplace(T, "mul_", TR_VALUES(buf));
            int b2 = tr_inplace(T, "add_", TR_VALUES(b1, g));
            tr_add_final(T, tr_inplace(T, "add_", TR_VALUES(p, b2)));
            tr_add_final(T, b2);
            continue;
        }
        int step = tr_state(T, p, "step", 0);
        int m = tr_state(T, p, "exp_avg", 1);
        int v = tr_state(T, p, "exp_avg_sq", 1);
        tr_push(states, step);
        tr_push(states, m);
        tr_push(states, v);
        int s1 = tr_inplace(T, "add_", TR_VALUES(step));
        int pw = p;
        if (kind == FE_OPT_ADAMW)
            pw = tr_inplace(T, "mul_", TR_VALUES(p)); /* decoupled weight decay */
        int m1 = tr_inplace(T, "mul_", TR_VALUES(m));
        int m2 = tr_inplace(T, "add_", TR_VALUES(m1, g));
        int v1 = tr_inplace(T, "mul_", TR_VALUES(v));
        int v2 = tr_inplace(T, "addcmul_", TR_VALUES(v1, g, g));
        int d1 = tr_op(T, "sqrt", v2, 0, TR_VALUES(v2));
        int d2 = tr_op(T, "div", d1, 0, TR_VALUES(d1));
        int d3 = tr_inplace(T, "add_", TR_VALUES(d2));
        int p1 = tr_inplace(T, "addcdiv_", TR_VALUES(pw, m2, d3));
        tr_add_final(T, p1);
        tr_add_final(T, s1);
        tr_add_final(T, m2);
        tr_add_final(T, v2);
    }
    T->n_optim = T->nn - before;
}

/* ------------------------------------------------ the set-up (grad-accum, scaler) */

/* A value every microbatch shares: an initializer (parameters, buffers, constants). */
static bool tr_mb_shared(const tr *T, size_t v) {
    return v < T->f->n_values && (T->f->values[v].kind & FE_INITIALIZER);
}

/* Starts microbatch mb of a --grad-accum step: a copy of every forward value that is not an
 * initializer, named mb<k>.NAME; an initializer a forward node updates in place (a
 * BatchNormalization's running stats) is read as the version the last microbatch left. */
static void tr_mb_start(tr *T, int mb, int *cur) {
    T->mb = mb;
    for (size_t v = 0; v < T->n_fwd_values; v++) {
        T->grad[v] = -1;
        T->shared[v] = false;
    }
    if (T->accum <= 1) return;
    for (size_t v = 0; v < T->n_fwd_values; v++) {
        if (tr_mb_shared(T, v)) {
            T->map[v] = cur[v];
            continue;
        }
        char name[1024];
        snprintf(name, sizeof name, "mb%d.%s", mb, T->v[v].name);
        int rank = T->v[v].rank;
        int64_t dims[FI_MAX_RANK];
        memcpy(dims, T->v[v].dims, (size_t)(rank > 0 ? rank : 0) * sizeof *dims);
        bool tensor = T->v[v].tensor;
        int w = tr_add_value(T, name, T->v[v].elem, rank, dims);
        T->v[w].tensor = tensor;
        T->map[v] = w;
    }
}

/* Ends microbatch mb: its gradients not accumulated yet (a parameter whose first reader gave
 * it none) are, its map is kept for the file, and in-place forward updates move cur on. */
static void tr_mb_end(tr *T, int mb, int *cur) {
    if (T->accum <= 1) {
        T->mb_end[mb] = T->nn;
        return;
    }
    for (size_t v = 0; v < T->f->n_values; v++)
        if (T->param[v]) tr_accumulate(T, (int)v);
    T->mb_end[mb] = T->nn;
    T->mb_map[mb] = xmallocarray(T->n_fwd_values, sizeof **T->mb_map);
    memcpy(T->mb_map[mb], T->map, T->n_fwd_values * sizeof *T->map);
    tr_push(T->labels, T->label);
    const fe_model *f = T->f;
    for (size_t i = 0; i < f->n_nodes; i++) {
        const tr_fwd *fw = &T->fwd[i];
        if (!fw->has_alias || !fw->inplace) continue;
        size_t no = fw->out ? fw->n_out : f->nodes[i].n_outputs; /* with the outputs added */
        for (size_t j = 0; j < 3 && j < no; j++) {
            int a = fw->alias[j];
            int o = fw->out ? (j < fw->n_out ? fw->out[j] : -1) : f->nodes[i].outputs[j];
            if (a < 0 || o < 0 || (size_t)a >= f->nodes[i].n_explicit_inputs) continue;
            int x = f->nodes[i].inputs[a];
            if (x >= 0 && tr_mb_shared(T, (size_t)x)) cur[x] = T->map[o];
        }
    }
}

/* The first forward node reading each value: where a parameter's gradient is complete in
 * the backward pass (it runs in reverse).  A --grad-accum step cannot copy a subgraph. */
static int tr_mb_prepare(tr *T) {
    const fe_model *f = T->f;
    T->accum = T->opt->grad_accum > 1 ? T->opt->grad_accum : 1;
    T->n_fwd_values = T->nv;
    T->mb_end = xcalloc((size_t)T->accum, sizeof *T->mb_end);
    if (T->accum <= 1) return 0;
    T->map = xmallocarray(T->n_fwd_values, sizeof *T->map);
    T->mb_map = xcalloc((size_t)T->accum, sizeof *T->mb_map);
    T->acc = xmallocarray(T->n_fwd_values, sizeof *T->acc);
    T->acc_mb = xmallocarray(T->n_fwd_values, sizeof *T->acc_mb);
    T->first_reader = xmallocarray(T->n_fwd_values, sizeof *T->first_reader);
    T->labels = xcalloc(1, sizeof *T->labels);
    for (size_t v = 0; v < T->n_fwd_values; v++) T->acc[v] = T->acc_mb[v] = T->first_reader[v] = -1;
    for (size_t i = 0; i < f->n_nodes; i++) {
        const fe_node *n = &f->nodes[i];
        if (n->n_inputs != n->n_explicit_inputs)
            return tr_fail(T,
                           "--grad-accum: node '%s' (#%zu, %s) has a subgraph that reads outer "
                           "values; roamc cannot copy it per microbatch",
                           tr_node_label(T, (int)i), i, n->op_type);
        for (size_t k = 0; k < n->n_explicit_inputs; k++) {
            int x = n->inputs[k];
            if (x >= 0 && T->first_reader[x] < 0) T->first_reader[x] = (int)i;
        }
    }
    return 0;
}

/* The forward graph, loss and backward pass of each microbatch in turn. */
static int tr_microbatches(tr *T) {
    int *cur = xmallocarray(T->n_fwd_values + 1, sizeof *cur);
    for (size_t v = 0; v < T->n_fwd_values; v++) cur[v] = (int)v;
    int rc = 0;
    for (int mb = 0; mb < T->accum && rc == 0; mb++) {
        tr_mb_start(T, mb, cur);
        if (tr_build_loss(T) || tr_backward(T))
            rc = -1;
        else
            tr_mb_end(T, mb, cur);
    }
    free(cur);
    free(T->map);
    T->map = NULL; /* the optimizer reads the parameters themselves */
    return rc;
}

/* amp-fp16: GradScaler.unscale_ before the step: inv_scale = 1 / scale, found_inf = 0, then
 * _amp_foreach_non_finite_check_and_unscale_ multiplies every gradient by inv_scale in place
 * and sets found_inf.  The step the scaler skips when found_inf is set is emitted as taken. */
static int tr_unscale(tr *T, tr_list *grads) {
    int inv = tr_op(T, "reciprocal", T->scale, 0, TR_VALUES(T->scale));
    int found = tr_new_like(T, "full", T->scale, 0);
    tr_emit(T, "full", (const int[]){TR_VALUES_END}, TR_VALUES(found), NULL, 0);
    size_t per = TR_MAX_IO - 8; /* one call takes every gradient; a huge model in chunks */
    for (size_t k0 = 0; k0 < grads->n; k0 += per) {
        size_t n = 0;
        int *in = xmallocarray(per + 3, sizeof *in), *out = xmallocarray(per + 2, sizeof *out),
            *alias = xmallocarray(per + 2, sizeof *alias);
        size_t idx[TR_MAX_IO];
        for (size_t k = k0; k < grads->n && k < k0 + per; k++)
            if (grads->v[k] >= 0) {
                idx[n] = k;
                in[n] = grads->v[k];
                out[n] = tr_new_like(T, "_amp_foreach_non_finite_check_and_unscale_", in[n], 0);
                alias[n] = (int)n;
                n++;
            }
        in[n] = found;
        in[n + 1] = inv;
        in[n + 2] = TR_VALUES_END;
        int found2 = tr_new_like(T, "_amp_foreach_non_finite_check_and_unscale_", found, 0);
        out[n] = found2;
        out[n + 1] = TR_VALUES_END;
        alias[n] = (int)n;
        tr_emit(T, "_amp_foreach_non_finite_check_and_unscale_", in, out, alias, 1);
        for (size_t j = 0; j < n; j++) grads->v[idx[j]] = out[j];
        found = found2;
        free(in);
        free(out);
        free(alias);
    }
    return found;
}

/* amp-fp16: GradScaler.update after the step: _amp_update_scale_ updates the scale and the
 * growth tracker in place from found_inf. */
static void tr_update_scale(tr *T, int found) {
    int s2 = tr_new_like(T, "_amp_update_scale_", T->scale, 0);
    int g2 = tr_new_like(T, "_amp_update_scale_", T->growth, 0);
    tr_emit(T, "_amp_update_scale_", TR_VALUES(T->scale, T->growth, found), TR_VALUES(s2, g2),
            (const int[]){0, 1}, 1);
    tr_add_final(T, s2);
    tr_add_final(T, g2);
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
    if (T->mb_map)
        for (int k = 0; k < T->accum; k++) free(T->mb_map[k]);
    free(T->mb_map);
    free(T->mb_end);
    free(T->map);
    free(T->acc);
    free(T->acc_mb);
    free(T->first_reader);
    if (T->labels) free(T->labels->v);
    free(T->labels);
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
    const size_t cap = 8192;
    char *s = xmalloc(cap);
    char shape[256], lshape[256], pb[32], sb[32], fb[32];
    tr_shape_text(T, T->loss_out, shape, sizeof shape);
    tr_human(T->n_param_bytes, pb, sizeof pb);
    tr_human(T->n_state_bytes, sb, sizeof sb);
    tr_human(T->n_frozen_bytes, fb, sizeof fb);
    size_t off = 0;
    if (T->opt->precision != FE_PREC_FP32 || T->accum > 1) {
        /* the set-up first, in one line */
        const char *what = tr_precision_amp(T->opt->precision)
                               ? "autocast's per-op casts, fp32 master weights, gradients and "
                                 "optimizer state"
                           : T->opt->precision == FE_PREC_FP32
                               ? "the file's types"
                               : "every float tensor, parameters and optimizer state too";
        off += (size_t)snprintf(s + off, cap - off, "  set-up        precision %s (%s",
                                tr_precision_name(T->opt->precision), what);
        if (T->n_casts) off += (size_t)snprintf(s + off, cap - off, "; %zu Cast nodes", T->n_casts);
        if (T->scale >= 0)
            off += (size_t)snprintf(s + off, cap - off,
                                    "; GradScaler state 'scaler.scale', "
                                    "'scaler.growth_tracker'");
        if (T->accum > 1)
            off += (size_t)snprintf(s + off, cap - off,
                                    "), grad-accum %d (%d microbatches mb0..mb%d, gradients "
                                    "accumulated in place, loss / %d, one optimizer step)\n",
                                    T->accum, T->accum, T->accum - 1, T->accum);
        else
            off += (size_t)snprintf(s + off, cap - off, "), grad-accum 1\n");
    }
    if (T->label >= 0) {
        tr_shape_text(T, T->label, lshape, sizeof lshape);
        off += (size_t)snprintf(
            s + off, cap - off, "  train         loss %s on '%s' %s; label input '%s' %s\n",
            tr_loss_name(T->loss_kind), T->v[T->loss_out].name, shape, T->v[T->label].name, lshape);
    } else {
        off += (size_t)snprintf(s + off, cap - off,
                                "  train         loss: the graph's own output '%s' %s\n",
                                T->v[T->loss_out].name, shape);
    }
    off += (size_t)snprintf(
        s + off, cap - off,
        "  parameters    %zu float initializers trained (%s), %zu frozen (%s), %zu kept constant "
        "(buffers, constants)\n",
        T->n_params, pb, T->n_frozen, fb, L->buffers.n - T->n_frozen);
    size_t no_grad = 0;
    for (size_t k = 0; k < L->grads.n; k++) no_grad += L->grads.v[k] < 0;
    off += (size_t)snprintf(s + off, cap - off,
                            "  optimizer     %s: %zu state inputs (%s); added %zu backward and %zu "
                            "optimizer ops to %zu forward ops%s\n",
                            tr_optimizer_name(T->opt->optimizer), T->n_state, sb, T->n_backward,
                            T->n_optim, T->f->n_nodes,
                            no_grad ? " (some parameters got no gradient)" : "");
    tr_export_summary(T, s, off, cap);
    return s;
}

/* Loads the forward graph. An --input-shape for 'target'/'labels' that the
 * forward graph does not have binds the label input --train adds: held back
 * from the forward load, checked against the loss (tr_label); *label_bind is
 * that binding, or NULL. */
static int tr_load_forward(const char *path, const uint8_t *bytes, size_t len,
                           const fe_options *opt, fe_model *f, const fe_input_shape **label_bind,
                           char *err, size_t errlen) {
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
    int lrc = bytes ? fe_load_bytes(path, (fe_bytes){bytes, len}, &fopt, f, err, errlen)
                    : fe_load(path, &fopt, f, err, errlen);
    if (!lrc && *label_bind && fe_find_value(f, (*label_bind)->name) >= 0) {
        /* the graph has that input: the binding is its own */
        fe_free(f);
        *label_bind = NULL;
        lrc = bytes ? fe_load_bytes(path, (fe_bytes){bytes, len}, opt, f, err, errlen)
                    : fe_load(path, opt, f, err, errlen);
    }
    free(shapes);
    return lrc ? -1 : 0;
}

/* --precision: the forward graph rewritten (train_setup.c), loaded again as the derivation's
 * forward graph *f, its proto T->mp. */
static int tr_apply_precision(tr *T, const char *path, const fe_options *opt, fe_model *f) {
    tr_rewrite rw;
    tr_precision_rewrite(path, f, T->mp, T->opt, &rw);
    fe_model g;
    const fe_input_shape *bind;
    int rc = -1;
    if (tr_load_forward(path, rw.bytes, rw.len, opt, &g, &bind, T->err, T->errlen)) {
        char inner[1024];
        snprintf(inner, sizeof inner, "%s", T->err);
        tr_fail(T, "internal error: --precision %s: the rewritten forward graph does not load: %s",
                tr_precision_name(T->opt->precision), inner);
        goto out;
    }
    if (tr_precision_verify(path, f, &rw, &g, T->err, T->errlen)) {
        fe_free(&g);
        goto out;
    }
    Onnx__ModelProto *mp = fe_unpack_model(rw.bytes, rw.len);
    if (!mp || !mp->graph || mp->graph->n_node != g.n_nodes) {
        if (mp) onnx__model_proto__free_unpacked(mp, NULL);
        fe_free(&g);
        tr_fail(T, "internal error: --precision: the rewritten graph does not unpack");
        goto out;
    }
    onnx__model_proto__free_unpacked((Onnx__ModelProto *)T->mp, NULL);
    T->mp = mp;
    fe_free(f);
    *f = g;
    T->n_casts = rw.n_casts;
    rc = 0;
out:
    free(rw.bytes);
    free(rw.ty);
    return rc;
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
        ROAMC_ASSERT(index == (int)v); /* the forward indices stay valid in T */
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
            if (T->accum > 1) {
                tr_push(&L->params, v);
                tr_push(&L->grads, T->acc[v]);
                continue;
            }
            if (g >= 0 && T->shared[v])
                g = tr_op(T, "clone", v, 0,
                          TR_VALUES(g)); /* AccumulateGrad copies a shared gradient */
            tr_push(&L->params, v);
            tr_push(&L->grads, g);
        } else if (fv->kind & FE_INITIALIZER) {
            if (tr_float(fv->elem_type)) tr_push(&L->buffers, v);
            if (T->frozen[v]) tr_push(&L->frozen, v);
        } else if (T->accum <= 1) {
            tr_push(&L->data, v);
        }
    }
    if (T->accum <= 1) {
        if (T->label >= 0) tr_push(&L->data, T->label);
        return;
    }
    for (int mb = 0; mb < T->accum; mb++) { /* mb0.x, mb0.target, mb1.x, ... */
        for (size_t k = 0; k < f->n_inputs; k++)
            if (!(f->values[f->inputs[k]].kind & FE_INITIALIZER))
                tr_push(&L->data, T->mb_map[mb][f->inputs[k]]);
        if (T->labels->n > (size_t)mb && T->labels->v[mb] >= 0) tr_push(&L->data, T->labels->v[mb]);
    }
}

/* Loads the packed training graph into m, as the planner will read it. */
static int tr_load_derived(tr *T, const char *name, const uint8_t *bytes, size_t len, fe_model *m) {
    if (fe_load_bytes(name, (fe_bytes){bytes, len}, NULL, m, T->err, T->errlen)) {
        /* a derivation bug, not bad input: say so */
        char inner[1024];
        snprintf(inner, sizeof inner, "%s", T->err);
        return tr_fail(T, "internal error: the derived training graph does not load: %s", inner);
    }
    return 0;
}

int fe_train(const char *path, const fe_options *opt, const fe_train_options *t, fe_train_result *r,
             char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    fe_model f;
    const fe_input_shape *label_bind;
    if (tr_load_forward(path, NULL, 0, opt, &f, &label_bind, err, errlen)) return -1;
    tr T = {.path = path,
            .f = &f,
            .opt = t,
            .err = err,
            .errlen = errlen,
            .label = -1,
            .loss = -1,
            .label_view = -1,
            .scale = -1,
            .growth = -1,
            .label_bind = label_bind};
    tr_lists L = {0};
    uint8_t *bytes = NULL;
    size_t len = 0;
    int rc = -1;
    if (t->emit_path && tr_check_emit(&T, path, t->emit_path)) goto out;
    if (tr_read_proto(&T)) goto out;
    if (t->precision != FE_PREC_FP32 && tr_apply_precision(&T, path, opt, &f)) goto out;
    tr_alloc_marks(&T);
    tr_copy_values(&T);
    tr_export_scan(&T);
    if (tr_pick_loss_output(&T)) goto out;
    tr_find_fusions(&T);
    if (tr_analyse(&T)) goto out;
    tr_adjust_forward(&T);
    if (tr_mb_prepare(&T)) goto out;
    if (t->precision == FE_PREC_AMP_FP16) { /* GradScaler's state: _scale fp32 [1], int32 [1] */
        T.scale = tr_add_value(&T, "scaler.scale", 1 /* FLOAT */, 1, (const int64_t[]){1});
        T.growth =
            tr_add_value(&T, "scaler.growth_tracker", 6 /* INT32 */, 1, (const int64_t[]){1});
    }
    if (tr_microbatches(&T)) goto out;
    tr_sort_inputs(&T, &L);
    int found_inf = T.scale >= 0 ? tr_unscale(&T, &L.grads) : -1;
    tr_optimizer(&T, &L.params, &L.grads, &L.states);
    if (T.scale >= 0) {
        tr_update_scale(&T, found_inf);
        tr_push(&L.states, T.scale);
        tr_push(&L.states, T.growth);
        T.n_state += 2;
        T.n_state_bytes += tr_bytes(&T, T.scale) + tr_bytes(&T, T.growth);
    }
    tr_pack(&T, &L, &bytes, &len);
    if (tr_load_derived(&T, t->emit_path ? t->emit_path : path, bytes, len, &r->model)) goto out;
    r->summary = tr_summary(&T, &L);
    r->derived = bytes, r->derived_len = len; /* the caller writes it (--emit-train) */
    bytes = NULL;
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
