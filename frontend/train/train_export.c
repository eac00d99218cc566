/* frontend/train/train_export.c — the marks of an inference (eval-mode) export
 * in a forward file given to --train (train_internal.h tr_export_scan), and
 * what the derivation does about each (TRAIN.md, "Inference exports").
 *
 * torch.onnx.export's defaults (model.eval(), do_constant_folding=True) give
 * a file that computes the same logits with less memory than training needs:
 *
 *   BatchNormalization in inference form (training_mode absent or 0; before
 *       opset 14, one output): the file still says where the BatchNorm is, so
 *       it is planned in training mode (running stats updated in place, the
 *       batch statistics saved for the backward), and the report says so;
 *   Dropout with a ratio > 0 and training_mode absent or false: planned in
 *       training mode (a mask saved for the backward), said so;
 *   BatchNorm folded into Conv (torch.onnx's eval-mode fusion): nothing of
 *       the BatchNorm is left to plan, so it is only reported.  The mark used:
 *       in a file whose producer is PyTorch, a Conv weight initializer named
 *       "onnx::..." is a tensor the exporter computed, not a module parameter
 *       (torch.onnx names parameters by their state_dict path); in an eval
 *       export the pass that computes Conv weights is the Conv-BatchNorm
 *       fusion (weight * gamma / sqrt(var + eps));
 *   Dropout dropped (torch.onnx removes every Dropout in eval mode, where a
 *       training-mode export keeps each nn.Dropout, even p = 0): only
 *       reported, where the model has attention (a Softmax read by a MatMul,
 *       where transformers put a dropout) and no Dropout node at all.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "train_internal.h"

static const Onnx__AttributeProto *tx_attr(const tr *T, int ni, const char *name) {
    if (!T->mp || !T->mp->graph || (size_t)ni >= T->mp->graph->n_node) return NULL;
    const Onnx__NodeProto *np = T->mp->graph->node[ni];
    for (size_t a = 0; a < np->n_attribute; a++)
        if (np->attribute[a]->name && !strcmp(np->attribute[a]->name, name))
            return np->attribute[a];
    return NULL;
}

static bool tx_std(const fe_node *n, const char *op) {
    return (!n->domain[0] || !strcmp(n->domain, "ai.onnx")) && !strcmp(n->op_type, op);
}

bool tr_dropout_ratio_zero(const tr *T, int ni) {
    const fe_node *n = &T->f->nodes[ni];
    if (T->f->opset > 0 && T->f->opset < 12) { /* ratio is an attribute, default 0.5 */
        const Onnx__AttributeProto *a = tx_attr(T, ni, "ratio");
        return a && a->f == 0;
    }
    double r;
    if (n->n_explicit_inputs < 2 || n->inputs[1] < 0) return false; /* default 0.5 */
    return tr_const_scalar(T, n->inputs[1], &r) && r == 0;
}

/* A Dropout that the file runs in inference mode: training_mode absent or a constant
 * false (from opset 12); before 12 the mode is not in the node, and torch.onnx's
 * training export writes the mask output, its eval export no Dropout at all. */
static bool tx_dropout_inference(const tr *T, int ni) {
    const fe_node *n = &T->f->nodes[ni];
    if (T->f->opset > 0 && T->f->opset < 12) return n->n_outputs < 2 || n->outputs[1] < 0;
    double tm;
    if (n->n_explicit_inputs < 3 || n->inputs[2] < 0) return true; /* default false */
    return tr_const_scalar(T, n->inputs[2], &tm) && tm == 0;       /* computed: training */
}

/* A BatchNormalization in inference form: training_mode absent or 0 from opset 14; one
 * output (no running stats) from 9 to 13.  Opset 7-8's spatial form is left as it is. */
static bool tx_bn_inference(const tr *T, int ni) {
    const fe_node *n = &T->f->nodes[ni];
    if (n->n_explicit_inputs < 5 || n->inputs[3] < 0 || n->inputs[4] < 0) return false;
    if (T->f->opset > 0 && T->f->opset < 9) return false;
    if (T->f->opset > 0 && T->f->opset < 14) return n->n_outputs < 2 || n->outputs[1] < 0;
    const Onnx__AttributeProto *a = tx_attr(T, ni, "training_mode");
    return !a || a->i == 0;
}

/* Conv node ni's weight is an initializer the exporter made (see the file comment). */
static bool tx_conv_folded(const tr *T, const fe_node *n) {
    if (!T->ex.pytorch || n->n_explicit_inputs < 2 || n->inputs[1] < 0) return false;
    const fe_value *w = &T->f->values[n->inputs[1]];
    return (w->kind & FE_INITIALIZER) && !strncmp(w->name, "onnx::", 6);
}

/* Softmax nodes whose output a MatMul reads (attention probabilities). */
static size_t tx_attention_softmaxes(const tr *T) {
    const fe_model *f = T->f;
    bool *seen = xcalloc(f->n_nodes + 1, 1);
    size_t count = 0;
    for (size_t i = 0; i < f->n_nodes; i++) {
        const fe_node *n = &f->nodes[i];
        if (!tx_std(n, "MatMul")) continue;
        for (size_t k = 0; k < n->n_explicit_inputs && k < 2; k++) {
            int v = n->inputs[k], p = v >= 0 ? f->values[v].producer : -1;
            if (p < 0 || seen[p] || !tx_std(&f->nodes[p], "Softmax")) continue;
            seen[p] = true;
            count++;
        }
    }
    free(seen);
    return count;
}

void tr_export_scan(tr *T) {
    const fe_model *f = T->f;
    tr_export *ex = &T->ex;
    memset(ex, 0, sizeof *ex);
    ex->bn_first = ex->dropout_first = ex->folded_first = -1;
    ex->pytorch = T->mp && T->mp->producer_name && !strcmp(T->mp->producer_name, "pytorch");
    for (size_t i = 0; i < f->n_nodes; i++) {
        const fe_node *n = &f->nodes[i];
        if (tx_std(n, "BatchNormalization")) {
            ex->bn++;
            if (!tx_bn_inference(T, (int)i)) continue;
            if (!ex->bn_inference++) ex->bn_first = (int)i;
            T->fwd[i].to_training = true;
        } else if (tx_std(n, "Dropout")) {
            ex->dropout++;
            if (n->n_explicit_inputs < 1 || n->inputs[0] < 0 || n->n_outputs < 1 ||
                n->outputs[0] < 0 || tr_dropout_ratio_zero(T, (int)i) ||
                !tx_dropout_inference(T, (int)i))
                continue;
            if (!ex->dropout_inference++) ex->dropout_first = (int)i;
            T->fwd[i].to_training = true;
        } else if (tx_std(n, "Conv")) {
            ex->convs++;
            if (tx_conv_folded(T, n) && !ex->convs_folded++) ex->folded_first = (int)i;
        }
    }
    if (ex->pytorch && ex->dropout == 0) ex->attention = tx_attention_softmaxes(T);
    if (ex->dropout_inference && !(f->opset > 0 && f->opset < 12)) {
        /* the training_mode input a converted Dropout reads: one bool initializer */
        snprintf(ex->true_name, sizeof ex->true_name, "roamc.training_mode");
        for (int k = 1; tr_name_used(T, ex->true_name); k++)
            snprintf(ex->true_name, sizeof ex->true_name, "roamc.training_mode.%d", k);
    }
}

const char *tr_export_fix(void) {
    return "torch.onnx.export(model.train(), args, \"fwd.onnx\", "
           "training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False), or "
           "models/export.py --module FILE.py:FUNC for the whole training step";
}

const char *tr_export_misses(void) {
    return "a Dropout outside attention (a classifier head's) dropped by an eval export cannot "
           "be told from a model without one; BatchNorm folded by another exporter (tf2onnx) "
           "or in a PyTorch file whose folded weights kept their names is not seen";
}

#define TX_LINE "  eval export   "

size_t tr_export_summary(const tr *T, char *s, size_t off, size_t cap) {
    const tr_export *ex = &T->ex;
    if (!ex->bn_inference && !ex->dropout_inference && !ex->convs_folded && !ex->attention)
        return off;
#define TX_PUT(...)                                                                                \
    do {                                                                                           \
        if (off < cap) off += (size_t)snprintf(s + off, cap - off, __VA_ARGS__);                   \
    } while (0)
    bool low = ex->convs_folded || ex->attention;
    TX_PUT(TX_LINE "this forward file looks like an inference export (torch.onnx.export's "
                   "defaults: model.eval(), constant folding)%s\n",
           low ? "; the training step below is LOW: what it misses is not in the file"
               : "; planned with the training semantics the file holds");
    if (ex->bn_inference)
        TX_PUT(TX_LINE "%zu of %zu BatchNormalization in inference form (training_mode 0), e.g. "
                       "'%s': planned in training mode (batch statistics saved for the "
                       "backward, running stats updated in place)\n",
               ex->bn_inference, ex->bn, tr_node_label(T, ex->bn_first));
    if (ex->dropout_inference)
        TX_PUT(TX_LINE "%zu Dropout with ratio > 0 but training_mode false or absent, e.g. '%s': "
                       "planned in training mode (a mask saved for the backward)\n",
               ex->dropout_inference, tr_node_label(T, ex->dropout_first));
    if (ex->convs_folded)
        TX_PUT(TX_LINE "%zu of %zu Conv weights are exporter-made constants ('%s'), not module "
                       "parameters: the mark of torch.onnx's eval-mode Conv+BatchNorm fusion; "
                       "missed: each folded BatchNorm's output and the tensors its backward "
                       "keeps\n",
               ex->convs_folded, ex->convs,
               T->f->values[T->f->nodes[ex->folded_first].inputs[1]].name);
    if (ex->attention)
        TX_PUT(TX_LINE "no Dropout node, but %zu attention Softmax%s read by a MatMul (where "
                       "transformers put a dropout; a training-mode export keeps every "
                       "nn.Dropout, even p = 0): missed: each dropout's output and mask\n",
               ex->attention, ex->attention == 1 ? "" : "es");
    TX_PUT(TX_LINE "not seen: %s\n", tr_export_misses());
    TX_PUT(TX_LINE "fix: %s\n", tr_export_fix());
#undef TX_PUT
    return off < cap ? off : cap - 1;
}
