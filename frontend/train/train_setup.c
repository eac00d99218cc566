/* frontend/train/train_setup.c — the training set-up of --train: --precision
 * (the forward graph rewritten in the element types the set-up gives each
 * tensor, before the step is derived from it) and the names of the set-up's
 * options (TRAIN.md, "Set-ups").
 *
 * The rewrite works on the file's ModelProto, with the element types
 * inference gave the fp32 file, and writes a new forward ModelProto that the
 * derivation then reads as if it were the file:
 *
 *   bf16 / fp16        every fp32 tensor in the half type: initializers (their
 *                      data converted), graph inputs and outputs, Constant
 *                      values, Cast to float, ConstantOfShape and the random
 *                      generators' dtype
 *   amp-bf16 / -fp16   CUDA autocast's per-op policy (torch/csrc's
 *                      autocast_mode.cpp lists): Cast nodes where autocast
 *                      casts (lower-precision ops take half copies, one per
 *                      weight, cached as autocast's cache does; fp32 ops take
 *                      fp32 copies of half inputs), and the element types of
 *                      the other ops as PyTorch's type promotion gives them
 *
 * Element types in roamc come from inference, which gives an elementwise op
 * its first input's type; where PyTorch's promotion gives another (a half
 * first operand, an fp32 second one), a commutative op gets its operands
 * swapped and another op a Cast of its first operand (TRAIN.md says what
 * that costs).  The rewritten graph is loaded again and every value's
 * inferred type checked against what the rewrite meant it to be.
 */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "onnx_write.h"
#include "train_internal.h"

#define TP_FLOAT 1
#define TP_FLOAT16 10
#define TP_DOUBLE 11
#define TP_BFLOAT16 16

/* ---------------------------------------------------------------- names */

const char *tr_precision_name(int p) {
    switch (p) {
    case FE_PREC_BF16: return "bf16";
    case FE_PREC_FP16: return "fp16";
    case FE_PREC_AMP_BF16: return "amp-bf16";
    case FE_PREC_AMP_FP16: return "amp-fp16";
    default: return "fp32";
    }
}

int fe_train_precision_parse(const char *s, int *precision) {
    for (int k = FE_PREC_FP32; k <= FE_PREC_AMP_FP16; k++)
        if (strcmp(s, tr_precision_name(k)) == 0) return *precision = k, 0;
    return -1;
}

int fe_train_grad_accum_parse(const char *s, int *k) {
    if (!s || *s < '0' || *s > '9') return -1;
    long v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9') return -1;
        v = v * 10 + (*p - '0');
        if (v > FE_MAX_GRAD_ACCUM) return -1;
    }
    if (v < 1) return -1;
    *k = (int)v;
    return 0;
}

bool tr_precision_amp(int p) {
    return p == FE_PREC_AMP_BF16 || p == FE_PREC_AMP_FP16;
}

int32_t tr_precision_half(int p) {
    return p == FE_PREC_BF16 || p == FE_PREC_AMP_BF16 ? TP_BFLOAT16
           : p == FE_PREC_FP32                        ? TP_FLOAT
                                                      : TP_FLOAT16;
}

/* ------------------------------------------------------ half conversions */

static uint16_t tp_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* NaN stays NaN */
    u += 0x7fffu + ((u >> 16) & 1u);                                          /* nearest even */
    return (uint16_t)(u >> 16);
}

static uint16_t tp_to_fp16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u, mant = u & 0x7fffffu;
    int exp = (int)((u >> 23) & 0xff);
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
    int e = exp - 127 + 15;
    if (e >= 0x1f) return (uint16_t)(sign | 0x7c00u); /* overflow: inf */
    if (e <= 0) {                                     /* subnormal or zero */
        if (e < -10) return (uint16_t)sign;
        mant |= 0x800000u;
        unsigned shift = (unsigned)(14 - e);
        uint32_t half = mant >> shift, rest = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rest > mid || (rest == mid && (half & 1u))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)e << 10) | (mant >> 13), rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) half++; /* may carry into exp: fine */
    return (uint16_t)half;
}

double tr_half_value(int32_t elem, uint16_t h) {
    if (elem == TP_BFLOAT16) {
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    double v = exp == 0    ? mant / 1024.0 / 16384.0
               : exp == 31 ? (mant ? 0.0 / 0.0 : 1.0 / 0.0)
                           : (1.0 + mant / 1024.0) * (double)(1u << exp) / 32768.0;
    return h & 0x8000 ? -v : v;
}

/* ------------------------------------------------------------ the rewrite */

typedef struct tp_ctx {
    const fe_model *f;
    const Onnx__ModelProto *mp;
    const fe_train_options *opt;
    int32_t half;
    bool amp;
    ow_arena *A;
    int32_t *ty;   /* per value of f: its element type in the rewritten graph */
    char **cached; /* per value of f: the name of its cached half copy (amp), or NULL */
    int *readers;  /* per value of f: how many nodes read it */
    Onnx__NodeProto **nodes;
    size_t n_nodes, cap_nodes;
    Onnx__ValueInfoProto **vis; /* value_info of the values the rewrite adds */
    size_t n_vis, cap_vis;
    unsigned serial;
    size_t n_casts;
} tp_ctx;

static bool tp_float(int32_t e) {
    return e == TP_FLOAT || e == TP_FLOAT16 || e == TP_BFLOAT16 || e == TP_DOUBLE;
}

static int32_t tp_wider(int32_t a, int32_t b) {
    if (!tp_float(a)) return b;
    if (!tp_float(b)) return a;
    if (a == b) return a;
    if (a == TP_DOUBLE || b == TP_DOUBLE) return TP_DOUBLE;
    return TP_FLOAT; /* fp32 with a half type, or bf16 with fp16 */
}

static void tp_push_node(tp_ctx *c, Onnx__NodeProto *n) {
    if (c->n_nodes == c->cap_nodes) {
        c->cap_nodes = c->cap_nodes ? 2 * c->cap_nodes : 256;
        c->nodes = xreallocarray(c->nodes, c->cap_nodes, sizeof *c->nodes);
    }
    c->nodes[c->n_nodes++] = n;
}

static void tp_push_vi(tp_ctx *c, Onnx__ValueInfoProto *vi) {
    if (c->n_vis == c->cap_vis) {
        c->cap_vis = c->cap_vis ? 2 * c->cap_vis : 64;
        c->vis = xreallocarray(c->vis, c->cap_vis, sizeof *c->vis);
    }
    c->vis[c->n_vis++] = vi;
}

static const char *tp_type_tag(int32_t e) {
    return e == TP_BFLOAT16 ? "bf16" : e == TP_FLOAT16 ? "fp16" : e == TP_DOUBLE ? "fp64" : "fp32";
}

/* A Cast of value x of f to elem, before the node being rewritten; returns the new value's name
 * (in the arena).  Its value_info is declared (the file's shape of x, the new type). */
static char *tp_cast(tp_ctx *c, int x, int32_t elem) {
    const fe_value *fv = &c->f->values[x];
    char *name = ow_alloc(c->A, strlen(fv->name) + 48);
    do sprintf(name, "%s.%s_%u", fv->name, tp_type_tag(elem), c->serial++);
    while (fe_find_value(c->f, name) >= 0);
    char *nname = ow_alloc(c->A, 32);
    snprintf(nname, 32, "autocast_%zu", c->n_casts++);
    char **in = ow_alloc(c->A, sizeof *in), **out = ow_alloc(c->A, sizeof *out);
    in[0] = fv->name;
    out[0] = name;
    Onnx__AttributeProto **at = ow_alloc(c->A, sizeof *at);
    at[0] = ow_attr_int(c->A, "to", elem);
    tp_push_node(c, ow_node(c->A, &(ow_node_parts){.name = nname,
                                                   .op_type = "Cast",
                                                   .inputs = in,
                                                   .n_inputs = 1,
                                                   .outputs = out,
                                                   .n_outputs = 1,
                                                   .attrs = at,
                                                   .n_attrs = 1}));
    int rank = fv->rank > 0 ? fv->rank : 0;
    int64_t dims[FI_MAX_RANK];
    for (int d = 0; d < rank && d < FI_MAX_RANK; d++) dims[d] = fv->dims[d].value;
    tp_push_vi(c, ow_value_info(c->A, name, elem, rank, dims));
    return name;
}

/* Autocast's cache holds the half copies of leaf tensors that require grad: the weights
 * (float initializers --frozen does not keep fixed), and here their transposes. */
static bool tp_cacheable(const tp_ctx *c, int x) {
    const fe_value *fv = &c->f->values[x];
    if (fv->producer >= 0 && !strcmp(c->f->nodes[fv->producer].op_type, "Transpose") &&
        c->f->nodes[fv->producer].n_explicit_inputs == 1 &&
        c->f->nodes[fv->producer].inputs[0] >= 0)
        /* torch.onnx writes F.linear's weight as Transpose(w): w.t() is a view of the weight in
         * PyTorch, whose cast autocast caches */
        return tp_cacheable(c, c->f->nodes[fv->producer].inputs[0]);
    if (!(fv->kind & FE_INITIALIZER)) return false;
    for (size_t k = 0; k < c->opt->n_frozen; k++)
        if (fnmatch(c->opt->frozen[k], fv->name, 0) == 0) return false;
    return true;
}

/* x as elem for the node being rewritten: x's own name, its cached half copy, or a new Cast. */
static char *tp_as(tp_ctx *c, int x, int32_t elem) {
    if (c->ty[x] == elem) return c->f->values[x].name;
    bool cache = elem == c->half && tp_cacheable(c, x);
    if (cache && c->cached[x]) return c->cached[x];
    char *n = tp_cast(c, x, elem);
    if (cache) c->cached[x] = n;
    return n;
}

static bool tp_in(const char *op, const char *const *list) {
    for (; *list; list++)
        if (!strcmp(op, *list)) return true;
    return false;
}

/* CUDA autocast's lower_precision_fp list, as ONNX spells those ops. */
static const char *const tp_lowp_ops[] = {"MatMul", "Gemm",   "Conv", "ConvTranspose",
                                          "PRelu",  "Einsum", NULL};
/* CUDA autocast's fp32 and fp32_set_opt_dtype lists, as ONNX spells those ops. */
static const char *const tp_fp32_ops[] = {"Softmax",
                                          "LogSoftmax",
                                          "LayerNormalization",
                                          "GroupNormalization",
                                          "ReduceSum",
                                          "ReduceProd",
                                          "ReduceLogSumExp",
                                          "ReduceL1",
                                          "ReduceL2",
                                          "CumSum",
                                          "Exp",
                                          "Log",
                                          "Pow",
                                          "Reciprocal",
                                          "Softplus",
                                          "Acos",
                                          "Asin",
                                          "Cosh",
                                          "Sinh",
                                          "Tan",
                                          "NegativeLogLikelihoodLoss",
                                          "SoftmaxCrossEntropyLoss",
                                          NULL};
/* Elementwise ops with several float operands: PyTorch's type promotion. */
static const char *const tp_promote_ops[] = {"Add", "Sub", "Mul",  "Div", "Where", "Max",
                                             "Min", "Sum", "Mean", "Mod", NULL};
static const char *const tp_commutative_ops[] = {"Add", "Mul", "Max", "Min", "Sum", "Mean", NULL};

/* A wrapped number in PyTorch's promotion (it does not promote a tensor with dims): a rank-0
 * value, or a one-element constant (torch.onnx writes Python scalars as either). */
static bool tp_scalar_like(const tp_ctx *c, int x) {
    const fe_value *fv = &c->f->values[x];
    if (fv->rank == 0) return true;
    int64_t n = 1;
    for (int d = 0; d < fv->rank; d++) n *= fv->dims[d].value;
    if (n != 1) return false;
    if (fv->kind & FE_INITIALIZER) return true;
    return fv->producer >= 0 && !strcmp(c->f->nodes[fv->producer].op_type, "Constant");
}

/* The node's proto copied, with inputs replaced by names[] (NULL: unchanged). */
static Onnx__NodeProto *tp_with_inputs(tp_ctx *c, const Onnx__NodeProto *np, char **names) {
    Onnx__NodeProto *n = ow_alloc(c->A, sizeof *n);
    *n = *np;
    n->input = ow_alloc(c->A, np->n_input * sizeof *n->input);
    for (size_t k = 0; k < np->n_input; k++) n->input[k] = names[k] ? names[k] : np->input[k];
    return n;
}

/* The type each float output of node i has: the first float input's (what inference gives
 * the ops not rewritten), with the exceptions of ops whose outputs have their own type. */
static void tp_output_types(tp_ctx *c, size_t i, int32_t out_elem) {
    const fe_node *n = &c->f->nodes[i];
    int32_t first = 0;
    for (size_t k = 0; k < n->n_explicit_inputs && !first; k++)
        if (n->inputs[k] >= 0 && tp_float(c->ty[n->inputs[k]])) first = c->ty[n->inputs[k]];
    for (size_t k = 0; k < n->n_outputs; k++) {
        int o = n->outputs[k];
        if (o < 0 || !tp_float(c->f->values[o].elem_type)) continue;
        int32_t e = out_elem ? out_elem : first ? first : c->f->values[o].elem_type;
        if (!strcmp(n->op_type, "Cast") || !strcmp(n->op_type, "EyeLike") ||
            (!strcmp(n->op_type, "LayerNormalization") && k > 0))
            e = c->f->values[o].elem_type;
        else if (!strcmp(n->op_type, "BatchNormalization") && k > 0 &&
                 k + 2 < n->n_explicit_inputs && n->inputs[k + 2] >= 0)
            e = c->ty[n->inputs[k + 2]];
        else if (!strcmp(n->op_type, "CastLike") && n->n_explicit_inputs > 1 && n->inputs[1] >= 0)
            e = c->ty[n->inputs[1]];
        c->ty[o] = e;
    }
}

/* An Add that is a linear layer's bias (torch.onnx writes F.linear on a 3-D input as MatMul,
 * Add): the MatMul's output read only here and a rank-1 float initializer.  PyTorch ran one
 * linear, which autocast gave a half copy of the bias; *bias is the bias slot. */
static bool tp_linear_bias(const tp_ctx *c, const fe_node *n, int *bias) {
    if (strcmp(n->op_type, "Add") || n->n_explicit_inputs != 2) return false;
    for (int s = 0; s < 2; s++) {
        int m = n->inputs[s], b = n->inputs[1 - s];
        if (m < 0 || b < 0 || c->readers[m] != 1 || c->f->values[m].producer < 0) continue;
        if (strcmp(c->f->nodes[c->f->values[m].producer].op_type, "MatMul")) continue;
        const fe_value *bv = &c->f->values[b];
        if (!(bv->kind & FE_INITIALIZER) || bv->rank != 1 || c->ty[b] != TP_FLOAT) continue;
        if (c->ty[m] != c->half) continue;
        *bias = 1 - s;
        return true;
    }
    return false;
}

/* One forward node under autocast: the casts it needs, then the node (perhaps with other
 * inputs), and the types of its outputs. */
static void tp_amp_node(tp_ctx *c, size_t i) {
    const fe_node *n = &c->f->nodes[i];
    const Onnx__NodeProto *np = c->mp->graph->node[i];
    size_t ni = np->n_input;
    char **names = ow_alloc(c->A, (ni + 1) * sizeof *names);
    bool changed = false;
    int32_t out = 0;
    const char *op = n->op_type;
    bool std = !n->domain[0] || !strcmp(n->domain, "ai.onnx");
    int bias = -1;
    if (std && tp_in(op, tp_lowp_ops)) {
        /* lower precision: every fp32 input as a half copy (a double stays: autocast casts
         * only fp32 tensors) */
        for (size_t k = 0; k < n->n_explicit_inputs && k < ni; k++) {
            int x = n->inputs[k];
            if (x < 0 || c->ty[x] != TP_FLOAT) continue;
            names[k] = tp_as(c, x, c->half);
            changed = true;
        }
        for (size_t k = 0; k < n->n_explicit_inputs && !out; k++)
            if (n->inputs[k] >= 0 && tp_float(c->ty[n->inputs[k]]))
                out = c->ty[n->inputs[k]] == TP_DOUBLE ? TP_DOUBLE : c->half;
    } else if (std && tp_in(op, tp_fp32_ops)) {
        for (size_t k = 0; k < n->n_explicit_inputs && k < ni; k++) {
            int x = n->inputs[k];
            if (x < 0 || (c->ty[x] != TP_FLOAT16 && c->ty[x] != TP_BFLOAT16)) continue;
            names[k] = tp_as(c, x, TP_FLOAT);
            changed = true;
            out = TP_FLOAT;
        }
    } else if (std && tp_linear_bias(c, n, &bias)) {
        names[bias] = tp_as(c, n->inputs[bias], c->half);
        changed = true;
        out = c->half;
    } else if (std && (tp_in(op, tp_promote_ops) || !strcmp(op, "Concat"))) {
        bool concat = !strcmp(op, "Concat");
        size_t first = !strcmp(op, "Where") ? 1 : 0;
        int32_t dimd = 0, all = 0;
        for (size_t k = first; k < n->n_explicit_inputs; k++) {
            int x = n->inputs[k];
            if (x < 0 || !tp_float(c->ty[x])) continue;
            all = tp_wider(all, c->ty[x]);
            if (concat || !tp_scalar_like(c, x)) dimd = tp_wider(dimd, c->ty[x]);
        }
        int32_t want = dimd ? dimd : all;
        int x0 = first < n->n_explicit_inputs ? n->inputs[first] : -1;
        if (want && concat) {
            for (size_t k = 0; k < n->n_explicit_inputs && k < ni; k++) {
                int x = n->inputs[k];
                if (x >= 0 && c->ty[x] != want) names[k] = tp_as(c, x, want), changed = true;
            }
        } else if (want && x0 >= 0 && c->ty[x0] != want) {
            size_t swap = 0;
            if (tp_in(op, tp_commutative_ops))
                for (size_t k = 1; k < n->n_explicit_inputs && !swap; k++)
                    if (n->inputs[k] >= 0 && c->ty[n->inputs[k]] == want) swap = k;
            if (swap) { /* inference types the op by its first operand: put a wide one first */
                names[0] = np->input[swap];
                names[swap] = np->input[0];
            } else {
                names[first] = tp_as(c, x0, want);
            }
            changed = true;
        }
        out = want;
    }
    tp_push_node(c, changed ? tp_with_inputs(c, np, names) : (Onnx__NodeProto *)np);
    tp_output_types(c, i, out);
}

/* -------------------------------------------------------- pure half types */

/* A copy of tensor t in the half type (its data converted when present). */
static Onnx__TensorProto *tp_half_tensor(tp_ctx *c, const Onnx__TensorProto *t) {
    Onnx__TensorProto *h = ow_alloc(c->A, sizeof *h);
    *h = *t;
    h->data_type = c->half;
    size_t n = 1;
    for (size_t d = 0; d < t->n_dims; d++) n *= (size_t)(t->dims[d] > 0 ? t->dims[d] : 0);
    const float *src = NULL;
    float *tmp = NULL;
    if (t->n_float_data == n) {
        src = t->float_data;
    } else if (t->has_raw_data && t->raw_data.len == 4 * n) {
        tmp = xmallocarray(n ? n : 1, sizeof *tmp);
        memcpy(tmp, t->raw_data.data, 4 * n);
        src = tmp;
    }
    h->n_float_data = 0;
    h->float_data = NULL;
    h->has_raw_data = 0;
    h->raw_data.len = 0;
    h->raw_data.data = NULL;
    h->n_external_data = 0; /* fp32 bytes elsewhere: not this tensor's any more */
    h->has_data_location = 0;
    if (src) {
        uint8_t *raw = ow_alloc(c->A, 2 * n);
        for (size_t k = 0; k < n; k++) {
            uint16_t v = c->half == TP_BFLOAT16 ? tp_to_bf16(src[k]) : tp_to_fp16(src[k]);
            raw[2 * k] = (uint8_t)v;
            raw[2 * k + 1] = (uint8_t)(v >> 8);
        }
        h->has_raw_data = 1;
        h->raw_data.data = raw;
        h->raw_data.len = 2 * n;
    }
    free(tmp);
    return h;
}

static Onnx__ValueInfoProto *tp_half_vi(tp_ctx *c, Onnx__ValueInfoProto *vi) {
    if (!vi->type || !vi->type->tensor_type || vi->type->tensor_type->elem_type != TP_FLOAT)
        return vi;
    Onnx__ValueInfoProto *v = ow_alloc(c->A, sizeof *v);
    Onnx__TypeProto *tp = ow_alloc(c->A, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = ow_alloc(c->A, sizeof *tt);
    *v = *vi;
    *tp = *vi->type;
    *tt = *vi->type->tensor_type;
    tt->elem_type = c->half;
    tp->tensor_type = tt;
    v->type = tp;
    return v;
}

static Onnx__ValueInfoProto **tp_half_vis(tp_ctx *c, Onnx__ValueInfoProto **v, size_t n) {
    Onnx__ValueInfoProto **out = ow_alloc(c->A, (n + 1) * sizeof *out);
    for (size_t k = 0; k < n; k++) out[k] = tp_half_vi(c, v[k]);
    return out;
}

/* One node of a pure-half graph: the float types its attributes name become the half type. */
static Onnx__NodeProto *tp_half_node(tp_ctx *c, const Onnx__NodeProto *np) {
    const char *op = np->op_type ? np->op_type : "";
    if (np->domain && np->domain[0] && strcmp(np->domain, "ai.onnx")) return (Onnx__NodeProto *)np;
    bool cast = !strcmp(op, "Cast"), cos = !strcmp(op, "ConstantOfShape"),
         dtype = !strncmp(op, "Random", 6) || !strcmp(op, "EyeLike") || !strcmp(op, "Bernoulli"),
         constant = !strcmp(op, "Constant");
    if (!cast && !cos && !dtype && !constant) return (Onnx__NodeProto *)np;
    Onnx__NodeProto *n = ow_alloc(c->A, sizeof *n);
    *n = *np;
    n->attribute = ow_alloc(c->A, (np->n_attribute + 1) * sizeof *n->attribute);
    bool has_value = false, has_dtype = false;
    for (size_t a = 0; a < np->n_attribute; a++) {
        Onnx__AttributeProto *at = np->attribute[a];
        const char *an = at->name ? at->name : "";
        n->attribute[a] = at;
        if ((cast && !strcmp(an, "to")) || (dtype && !strcmp(an, "dtype"))) {
            has_dtype = true;
            if (at->i == TP_FLOAT) n->attribute[a] = ow_attr_int(c->A, an, c->half);
        } else if ((constant || cos) && !strcmp(an, "value") && at->t) {
            has_value = true;
            if (at->t->data_type == TP_FLOAT) {
                Onnx__AttributeProto *na = ow_alloc(c->A, sizeof *na);
                *na = *at;
                na->t = tp_half_tensor(c, at->t);
                n->attribute[a] = na;
            }
        } else if (constant && !strcmp(an, "value_float")) {
            Onnx__TensorProto *t = ow_alloc(c->A, sizeof *t);
            *t = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
            t->data_type = TP_FLOAT;
            t->n_float_data = 1;
            t->float_data = ow_alloc(c->A, sizeof(float));
            t->float_data[0] = at->f;
            Onnx__AttributeProto *na = ow_alloc(c->A, sizeof *na);
            *na = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
            na->name = "value";
            na->has_type = 1;
            na->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
            na->t = tp_half_tensor(c, t);
            n->attribute[a] = na;
        }
    }
    if (cos && !has_value) { /* the default value is a float 0 */
        Onnx__TensorProto *t = ow_alloc(c->A, sizeof *t);
        *t = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
        t->data_type = c->half;
        t->n_dims = 1;
        t->dims = ow_alloc(c->A, sizeof *t->dims);
        t->dims[0] = 1;
        t->has_raw_data = 1;
        t->raw_data.len = 2;
        t->raw_data.data = ow_alloc(c->A, 2);
        Onnx__AttributeProto *na = ow_alloc(c->A, sizeof *na);
        *na = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
        na->name = "value";
        na->has_type = 1;
        na->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
        na->t = t;
        n->attribute[n->n_attribute++] = na;
    }
    if (dtype && !has_dtype && strstr(op, "Like") == NULL && strcmp(op, "Bernoulli"))
        n->attribute[n->n_attribute++] = ow_attr_int(c->A, "dtype", c->half); /* default float */
    return n;
}

/* ------------------------------------------------------------------ entry */

/* The check after loading: each value of the file has the type the rewrite meant. */
static int tp_verify(const tp_ctx *c, const fe_model *g, char *err, size_t errlen,
                     const char *path) {
    for (size_t v = 0; v < c->f->n_values; v++) {
        if (!tp_float(c->f->values[v].elem_type) || c->f->values[v].seq_len >= 0) continue;
        int w = fe_find_value(g, c->f->values[v].name);
        if (w < 0 || g->values[w].elem_type == c->ty[v]) continue;
        char a[32], b[32];
        snprintf(err, errlen,
                 "%s: --train: internal error: --precision %s: '%s' is %s after the rewrite, "
                 "not %s",
                 path, tr_precision_name(c->opt->precision), c->f->values[v].name,
                 fe_elem_name(g->values[w].elem_type, a, sizeof a),
                 fe_elem_name(c->ty[v], b, sizeof b));
        return -1;
    }
    return 0;
}

int tr_precision_rewrite(const char *path, const fe_model *f, const Onnx__ModelProto *mp,
                         const fe_train_options *opt, tr_rewrite *out) {
    memset(out, 0, sizeof *out);
    ow_arena A = {0};
    tp_ctx c = {.f = f,
                .mp = mp,
                .opt = opt,
                .half = tr_precision_half(opt->precision),
                .amp = tr_precision_amp(opt->precision),
                .A = &A};
    const Onnx__GraphProto *og = mp->graph;
    Onnx__GraphProto *g = ow_alloc(&A, sizeof *g);
    *g = *og;
    c.ty = xcalloc(f->n_values + 1, sizeof *c.ty);
    c.cached = xcalloc(f->n_values + 1, sizeof *c.cached);
    c.readers = xcalloc(f->n_values + 1, sizeof *c.readers);
    for (size_t v = 0; v < f->n_values; v++) c.ty[v] = f->values[v].elem_type;
    for (size_t i = 0; i < f->n_nodes; i++)
        for (size_t k = 0; k < f->nodes[i].n_inputs; k++)
            if (f->nodes[i].inputs[k] >= 0) c.readers[f->nodes[i].inputs[k]]++;
    if (c.amp) {
        for (size_t i = 0; i < og->n_node; i++) tp_amp_node(&c, i);
        Onnx__ValueInfoProto **vis = ow_alloc(&A, (og->n_value_info + c.n_vis + 1) * sizeof *vis);
        /* the file's declarations of values whose type changed would contradict inference */
        size_t nv = 0;
        for (size_t k = 0; k < og->n_value_info; k++) {
            int v = og->value_info[k]->name ? fe_find_value(f, og->value_info[k]->name) : -1;
            if (v >= 0 && c.ty[v] != f->values[v].elem_type) continue;
            vis[nv++] = og->value_info[k];
        }
        if (c.n_vis) memcpy(vis + nv, c.vis, c.n_vis * sizeof *vis); /* c.vis NULL when none */
        g->value_info = vis;
        g->n_value_info = nv + c.n_vis;
        Onnx__ValueInfoProto **outs = ow_alloc(&A, (og->n_output + 1) * sizeof *outs);
        for (size_t k = 0; k < og->n_output; k++) {
            int v = og->output[k]->name ? fe_find_value(f, og->output[k]->name) : -1;
            outs[k] = og->output[k];
            if (v >= 0 && c.ty[v] != f->values[v].elem_type) {
                int rank = f->values[v].rank > 0 ? f->values[v].rank : 0;
                int64_t dims[FI_MAX_RANK];
                for (int d = 0; d < rank && d < FI_MAX_RANK; d++)
                    dims[d] = f->values[v].dims[d].value;
                outs[k] = ow_value_info(&A, og->output[k]->name, c.ty[v], rank, dims);
            }
        }
        g->output = outs;
    } else {
        for (size_t i = 0; i < og->n_node; i++) tp_push_node(&c, tp_half_node(&c, og->node[i]));
        Onnx__TensorProto **inits = ow_alloc(&A, (og->n_initializer + 1) * sizeof *inits);
        for (size_t k = 0; k < og->n_initializer; k++)
            inits[k] = og->initializer[k]->data_type == TP_FLOAT
                           ? tp_half_tensor(&c, og->initializer[k])
                           : og->initializer[k];
        g->initializer = inits;
        g->input = tp_half_vis(&c, og->input, og->n_input);
        g->output = tp_half_vis(&c, og->output, og->n_output);
        g->value_info = tp_half_vis(&c, og->value_info, og->n_value_info);
        for (size_t v = 0; v < f->n_values; v++)
            if (f->values[v].elem_type == TP_FLOAT) c.ty[v] = c.half;
        /* LayerNormalization's Mean and InvStdDev keep their stash type (float) */
        for (size_t i = 0; i < f->n_nodes; i++)
            if (!strcmp(f->nodes[i].op_type, "LayerNormalization"))
                for (size_t k = 1; k < f->nodes[i].n_outputs; k++)
                    if (f->nodes[i].outputs[k] >= 0) c.ty[f->nodes[i].outputs[k]] = TP_FLOAT;
    }
    g->node = c.nodes;
    g->n_node = c.n_nodes;
    Onnx__ModelProto m = *mp;
    m.graph = g;
    ow_pack(&m, &out->bytes, &out->len);
    out->n_casts = c.n_casts;
    out->opt = opt;
    out->ty = c.ty;
    ow_arena_free(&A);
    free(c.nodes);
    free(c.vis);
    free(c.cached);
    free(c.readers);
    (void)path;
    return 0;
}

int tr_precision_verify(const char *path, const fe_model *f, const tr_rewrite *rw,
                        const fe_model *g, char *err, size_t errlen) {
    tp_ctx c = {.f = f, .opt = rw->opt, .ty = rw->ty};
    return tp_verify(&c, g, err, errlen, path);
}
