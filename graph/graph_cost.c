/* Per-operator FLOPs and bytes moved, from shapes alone (see graph.h,
 * "operator cost", and graph/COST.md, which this file implements: a rule
 * changed here is changed there). */
#include "graph.h"
#include "base.h"

#include <string.h>

/* Bits of cost_entry.flags. */
enum {
    COST_F_GEMM = 1,       /* K = elements of A / output rows (A may be transposed) */
    COST_F_TRANSPOSED = 2, /* a transposed convolution (ConvTranspose) */
    COST_F_DETECT = 4,     /* aten convolution: transposed or not, told from the shapes */
};

/* One operator's rule.  shape_only: bit i set when input i is read for its
 * shape alone (ones_like's input, the `self` of nll_loss_backward), so its
 * bytes are not counted.  arg: the operand the rule measures (matmul: A;
 * conv: the data input, its weight is arg + 1; gather: the data input;
 * scatter: the source).  bias: the input a matmul or conv adds, or -1. */
typedef struct cost_entry {
    const char *name;
    unsigned char rule;
    unsigned char k; /* FLOPs per element (elementwise, reduce, norm, gather, scatter) */
    unsigned char shape_only;
    signed char arg, bias;
    unsigned char flags;
} cost_entry;

#define EW(n, k)                                                                                   \
    { n, GRAPH_COST_ELEMENTWISE, k, 0, 0, -1, 0 }
#define RED(n, k)                                                                                  \
    { n, GRAPH_COST_REDUCE, k, 0, 0, -1, 0 }
#define NORM(n, k)                                                                                 \
    { n, GRAPH_COST_NORM, k, 0, 0, -1, 0 }
#define COPY(n)                                                                                    \
    { n, GRAPH_COST_COPY, 0, 0, 0, -1, 0 }
#define FILL(n)                                                                                    \
    { n, GRAPH_COST_FILL, 0, 0xff, 0, -1, 0 }
#define ALLOC(n)                                                                                   \
    { n, GRAPH_COST_ALLOC, 0, 0xff, 0, -1, 0 }
#define GATHER(n, k)                                                                               \
    { n, GRAPH_COST_GATHER, k, 0, 0, -1, 0 }

/* org.pytorch.aten, as models/export.py and frontend/train.c write it (the
 * overload after '.' dropped; an in-place "foo_" not listed takes "foo"'s
 * entry). */
static const cost_entry cost_aten[] = {
    /* matrix products */
    {"mm", GRAPH_COST_MATMUL, 0, 0, 0, -1, 0},
    {"bmm", GRAPH_COST_MATMUL, 0, 0, 0, -1, 0},
    {"matmul", GRAPH_COST_MATMUL, 0, 0, 0, -1, 0},
    {"addmm", GRAPH_COST_MATMUL, 0, 0, 1, 0, 0},
    {"baddbmm", GRAPH_COST_MATMUL, 0, 0, 1, 0, 0},
    {"linear", GRAPH_COST_MATMUL, 0, 0, 0, 2, 0},
    /* convolutions */
    {"convolution", GRAPH_COST_CONV, 0, 0, 0, 2, COST_F_DETECT},
    {"_convolution", GRAPH_COST_CONV, 0, 0, 0, 2, COST_F_DETECT},
    {"conv1d", GRAPH_COST_CONV, 0, 0, 0, 2, 0},
    {"conv2d", GRAPH_COST_CONV, 0, 0, 0, 2, 0},
    {"conv3d", GRAPH_COST_CONV, 0, 0, 0, 2, 0},
    {"cudnn_convolution", GRAPH_COST_CONV, 0, 0, 0, -1, 0},
    {"conv_transpose1d", GRAPH_COST_CONV, 0, 0, 0, 2, COST_F_TRANSPOSED},
    {"conv_transpose2d", GRAPH_COST_CONV, 0, 0, 0, 2, COST_F_TRANSPOSED},
    {"conv_transpose3d", GRAPH_COST_CONV, 0, 0, 0, 2, COST_F_TRANSPOSED},
    {"convolution_backward", GRAPH_COST_CONV_BACKWARD, 0, 0, 0, -1, COST_F_DETECT},
    /* normalisation and softmax (k counted from the textbook formula, COST.md) */
    NORM("native_layer_norm", 8),
    NORM("native_batch_norm", 8),
    NORM("_native_batch_norm_legit", 8),
    NORM("native_group_norm", 8),
    NORM("layer_norm", 8),
    NORM("batch_norm", 8),
    NORM("group_norm", 8),
    NORM("instance_norm", 8),
    NORM("native_layer_norm_backward", 13),
    NORM("native_batch_norm_backward", 13),
    NORM("native_group_norm_backward", 13),
    NORM("_softmax", 5),
    NORM("_log_softmax", 5),
    NORM("softmax", 5),
    NORM("log_softmax", 5),
    NORM("_softmax_backward_data", 4),
    NORM("_log_softmax_backward_data", 4),
    /* reductions and pools (the window is not in the IR: one op per element) */
    RED("sum", 1),
    RED("mean", 1),
    RED("amax", 1),
    RED("amin", 1),
    RED("max", 1),
    RED("min", 1),
    RED("prod", 1),
    RED("argmax", 1),
    RED("argmin", 1),
    RED("all", 1),
    RED("any", 1),
    RED("cumsum", 1),
    RED("var", 3),
    RED("std", 3),
    RED("var_mean", 3),
    RED("norm", 2),
    RED("linalg_vector_norm", 2),
    RED("logsumexp", 3),
    RED("max_pool2d_with_indices", 1),
    RED("max_pool3d_with_indices", 1),
    RED("max_pool2d", 1),
    RED("avg_pool2d", 1),
    RED("avg_pool3d", 1),
    RED("_adaptive_avg_pool2d", 1),
    RED("adaptive_avg_pool2d", 1),
    RED("adaptive_max_pool2d", 1),
    /* pool backward: self (input 1) gives the shape only */
    {"_adaptive_avg_pool2d_backward", GRAPH_COST_ELEMENTWISE, 1, 2, 0, -1, 0},
    {"avg_pool2d_backward", GRAPH_COST_ELEMENTWISE, 1, 2, 0, -1, 0},
    {"max_pool2d_with_indices_backward", GRAPH_COST_SCATTER, 1, 2, 0, -1, 0},
    {"max_pool3d_with_indices_backward", GRAPH_COST_SCATTER, 1, 2, 0, -1, 0},
    /* losses and lookups */
    GATHER("nll_loss_forward", 1),
    GATHER("nll_loss2d_forward", 1),
    GATHER("embedding", 0),
    GATHER("index_select", 0),
    GATHER("gather", 0),
    GATHER("index", 0),
    {"nll_loss_backward", GRAPH_COST_SCATTER, 1, 2, 0, -1, 0},
    {"nll_loss2d_backward", GRAPH_COST_SCATTER, 1, 2, 0, -1, 0},
    {"embedding_dense_backward", GRAPH_COST_SCATTER, 1, 0, 0, -1, 0},
    {"index_select_backward", GRAPH_COST_SCATTER, 1, 0, 0, -1, 0},
    {"gather_backward", GRAPH_COST_SCATTER, 1, 0, 0, -1, 0},
    {"scatter_add", GRAPH_COST_SCATTER, 1, 0, 2, -1, 0},
    {"index_add", GRAPH_COST_SCATTER, 1, 0, 2, -1, 0},
    {"mse_loss", GRAPH_COST_REDUCE, 3, 0, 0, -1, 0},
    EW("mse_loss_backward", 3),
    /* elementwise, one op per element */
    EW("add", 1),
    EW("sub", 1),
    EW("rsub", 1),
    EW("mul", 1),
    EW("div", 1),
    EW("neg", 1),
    EW("abs", 1),
    EW("pow", 1),
    EW("sqrt", 1),
    EW("rsqrt", 1),
    EW("reciprocal", 1),
    EW("exp", 1),
    EW("log", 1),
    EW("log1p", 1),
    EW("expm1", 1),
    EW("sin", 1),
    EW("cos", 1),
    EW("tanh", 1),
    EW("sigmoid", 1),
    EW("relu", 1),
    EW("gelu", 1),
    EW("silu", 1),
    EW("mish", 1),
    EW("elu", 1),
    EW("leaky_relu", 1),
    EW("hardtanh", 1),
    EW("hardswish", 1),
    EW("hardsigmoid", 1),
    EW("softplus", 1),
    EW("threshold", 1),
    EW("clamp", 1),
    EW("clamp_min", 1),
    EW("clamp_max", 1),
    EW("sgn", 1),
    EW("sign", 1),
    EW("floor", 1),
    EW("ceil", 1),
    EW("round", 1),
    EW("trunc", 1),
    EW("erf", 1),
    EW("where", 1),
    EW("masked_fill", 1),
    EW("maximum", 1),
    EW("minimum", 1),
    EW("eq", 1),
    EW("ne", 1),
    EW("lt", 1),
    EW("le", 1),
    EW("gt", 1),
    EW("ge", 1),
    EW("logical_not", 1),
    EW("logical_and", 1),
    EW("logical_or", 1),
    EW("bitwise_not", 1),
    EW("bitwise_and", 1),
    EW("bitwise_or", 1),
    EW("addcmul", 3),
    EW("addcdiv", 3),
    EW("lerp", 3),
    /* activation gradients: the derivative and a product */
    EW("threshold_backward", 2),
    EW("gelu_backward", 2),
    EW("silu_backward", 2),
    EW("sigmoid_backward", 2),
    EW("tanh_backward", 2),
    EW("hardtanh_backward", 2),
    EW("elu_backward", 2),
    EW("leaky_relu_backward", 2),
    EW("hardswish_backward", 2),
    EW("hardsigmoid_backward", 2),
    EW("mish_backward", 2),
    EW("softplus_backward", 2),
    /* dropout: a random draw and a scale */
    EW("native_dropout", 2),
    EW("native_dropout_backward", 2),
    /* random fills: one draw per element, self overwritten */
    {"bernoulli", GRAPH_COST_ELEMENTWISE, 1, 1, 0, -1, 0},
    {"uniform", GRAPH_COST_ELEMENTWISE, 1, 1, 0, -1, 0},
    {"normal", GRAPH_COST_ELEMENTWISE, 1, 1, 0, -1, 0},
    {"rand", GRAPH_COST_ELEMENTWISE, 1, 0xff, 0, -1, 0},
    {"randn", GRAPH_COST_ELEMENTWISE, 1, 0xff, 0, -1, 0},
    {"rand_like", GRAPH_COST_ELEMENTWISE, 1, 0xff, 0, -1, 0},
    {"randn_like", GRAPH_COST_ELEMENTWISE, 1, 0xff, 0, -1, 0},
    /* data movement */
    COPY("clone"),
    COPY("_to_copy"),
    COPY("contiguous"),
    COPY("cat"),
    COPY("stack"),
    COPY("constant_pad_nd"),
    COPY("slice_backward"),
    COPY("select_backward"),
    COPY("diagonal_backward"),
    COPY("permute_copy"),
    COPY("transpose_copy"),
    COPY("t_copy"),
    COPY("expand_copy"),
    COPY("view_copy"),
    COPY("lift_fresh_copy"),
    COPY("repeat"),
    COPY("roll"),
    COPY("flip"),
    COPY("tril"),
    COPY("triu"),
    {"copy", GRAPH_COST_COPY, 0, 1, 0, -1, 0}, /* copy_(self, src): self is overwritten */
    /* fills and allocations */
    FILL("full"),
    FILL("full_like"),
    FILL("ones"),
    FILL("ones_like"),
    FILL("zeros"),
    FILL("zeros_like"),
    FILL("new_zeros"),
    FILL("new_ones"),
    FILL("new_full"),
    FILL("scalar_tensor"),
    FILL("zero"),
    FILL("fill"),
    FILL("arange"),
    FILL("linspace"),
    ALLOC("empty"),
    ALLOC("empty_like"),
    ALLOC("empty_strided"),
    ALLOC("new_empty"),
    ALLOC("new_empty_strided"),
    {NULL, 0, 0, 0, 0, 0, 0}};

/* The standard domain ("" or "ai.onnx"). */
static const cost_entry cost_std[] = {
    {"MatMul", GRAPH_COST_MATMUL, 0, 0, 0, -1, 0},
    {"MatMulInteger", GRAPH_COST_MATMUL, 0, 0, 0, -1, 0},
    {"Gemm", GRAPH_COST_MATMUL, 0, 0, 0, 2, COST_F_GEMM},
    {"Conv", GRAPH_COST_CONV, 0, 0, 0, 2, 0},
    {"ConvInteger", GRAPH_COST_CONV, 0, 0, 0, -1, 0},
    {"ConvTranspose", GRAPH_COST_CONV, 0, 0, 0, 2, COST_F_TRANSPOSED},
    NORM("BatchNormalization", 8),
    NORM("LayerNormalization", 8),
    NORM("InstanceNormalization", 8),
    NORM("GroupNormalization", 8),
    NORM("MeanVarianceNormalization", 8),
    NORM("LpNormalization", 3),
    NORM("Softmax", 5),
    NORM("LogSoftmax", 5),
    NORM("Hardmax", 1),
    RED("ReduceSum", 1),
    RED("ReduceMean", 1),
    RED("ReduceMax", 1),
    RED("ReduceMin", 1),
    RED("ReduceProd", 1),
    RED("ReduceL1", 1),
    RED("ReduceL2", 2),
    RED("ReduceSumSquare", 2),
    RED("ReduceLogSum", 1),
    RED("ReduceLogSumExp", 3),
    RED("ArgMax", 1),
    RED("ArgMin", 1),
    RED("CumSum", 1),
    RED("MaxPool", 1),
    RED("AveragePool", 1),
    RED("LpPool", 2),
    RED("GlobalAveragePool", 1),
    RED("GlobalMaxPool", 1),
    RED("GlobalLpPool", 2),
    RED("SoftmaxCrossEntropyLoss", 6),
    GATHER("Gather", 0),
    GATHER("GatherElements", 0),
    GATHER("GatherND", 0),
    GATHER("NegativeLogLikelihoodLoss", 1),
    EW("Add", 1),
    EW("Sub", 1),
    EW("Mul", 1),
    EW("Div", 1),
    EW("Pow", 1),
    EW("Mod", 1),
    EW("Neg", 1),
    EW("Abs", 1),
    EW("Sqrt", 1),
    EW("Reciprocal", 1),
    EW("Exp", 1),
    EW("Log", 1),
    EW("Sin", 1),
    EW("Cos", 1),
    EW("Tan", 1),
    EW("Tanh", 1),
    EW("Sigmoid", 1),
    EW("Erf", 1),
    EW("Relu", 1),
    EW("LeakyRelu", 1),
    EW("PRelu", 1),
    EW("Elu", 1),
    EW("Selu", 1),
    EW("Celu", 1),
    EW("Gelu", 1),
    EW("Mish", 1),
    EW("HardSigmoid", 1),
    EW("HardSwish", 1),
    EW("Softplus", 1),
    EW("Softsign", 1),
    EW("ThresholdedRelu", 1),
    EW("Shrink", 1),
    EW("Clip", 1),
    EW("Floor", 1),
    EW("Ceil", 1),
    EW("Round", 1),
    EW("Sign", 1),
    EW("Max", 1),
    EW("Min", 1),
    EW("Mean", 1),
    EW("Sum", 1),
    EW("Where", 1),
    EW("Equal", 1),
    EW("Less", 1),
    EW("LessOrEqual", 1),
    EW("Greater", 1),
    EW("GreaterOrEqual", 1),
    EW("And", 1),
    EW("Or", 1),
    EW("Xor", 1),
    EW("Not", 1),
    EW("IsNaN", 1),
    EW("IsInf", 1),
    EW("BitShift", 1),
    EW("QuantizeLinear", 2),
    EW("DequantizeLinear", 2),
    EW("Dropout", 2),
    {"Bernoulli", GRAPH_COST_ELEMENTWISE, 1, 0, 0, -1, 0},
    {"RandomNormalLike", GRAPH_COST_ELEMENTWISE, 1, 0xff, 0, -1, 0},
    {"RandomUniformLike", GRAPH_COST_ELEMENTWISE, 1, 0xff, 0, -1, 0},
    {"RandomNormal", GRAPH_COST_ELEMENTWISE, 1, 0xff, 0, -1, 0},
    {"RandomUniform", GRAPH_COST_ELEMENTWISE, 1, 0xff, 0, -1, 0},
    COPY("Transpose"),
    COPY("Concat"),
    COPY("Split"),
    COPY("Slice"),
    COPY("Tile"),
    COPY("Expand"),
    COPY("Pad"),
    COPY("Cast"),
    COPY("CastLike"),
    COPY("DepthToSpace"),
    COPY("SpaceToDepth"),
    COPY("ReverseSequence"),
    COPY("Trilu"),
    FILL("Constant"),
    FILL("ConstantOfShape"),
    FILL("Range"),
    FILL("EyeLike"),
    FILL("Shape"),
    FILL("Size"),
    {NULL, 0, 0, 0, 0, 0, 0}};

static const cost_entry cost_host_copy = {"Offload", GRAPH_COST_HOST_COPY, 0, 0, 0, -1, 0};

static const cost_entry *cost_lookup(const cost_entry *t, const char *name, size_t len) {
    for (; t->name; t++)
        if (strlen(t->name) == len && memcmp(t->name, name, len) == 0) return t;
    return NULL;
}

/* The entry for node n, or NULL (the default rule). */
static const cost_entry *cost_entry_of(const fe_node *n) {
    const char *op = n->op_type, *dom = n->domain;
    if (!dom[0] || strcmp(dom, "ai.onnx") == 0) return cost_lookup(cost_std, op, strlen(op));
    if (strcmp(dom, "ai.roamc") == 0)
        return (strcmp(op, "Offload") == 0 || strcmp(op, "Reload") == 0) ? &cost_host_copy : NULL;
    if (strcmp(dom, "org.pytorch.aten") != 0) return NULL;
    size_t len = strcspn(op, "."); /* "add_.Tensor" -> "add_" */
    const cost_entry *e = cost_lookup(cost_aten, op, len);
    /* an in-place variant: "relu_" costs what "relu" costs (its output is
     * written in place, which the byte count sees through the alias) */
    if (!e && len > 1 && op[len - 1] == '_' && op[0] != '_')
        e = cost_lookup(cost_aten, op, len - 1);
    return e;
}

/* Elements of value v (a sequence counts all its tensors); 0 when unknown. */
static double cost_elems(const fe_model *m, int v) {
    if (v < 0) return 0;
    const fe_value *x = &m->values[v];
    if (x->rank < 0) return 0;
    double e = 1;
    for (int d = 0; d < x->rank; d++) {
        if (x->dims[d].value < 0) return 0;
        e *= (double)x->dims[d].value;
    }
    return x->seq_len >= 0 ? e * (double)x->seq_len : e;
}

static bool cost_is_float(int32_t t) {
    /* FLOAT, FLOAT16, DOUBLE, BFLOAT16, the FLOAT8 kinds, FLOAT4E2M1 */
    return t == 1 || t == 10 || t == 11 || t == 16 || (t >= 17 && t <= 20) || t == 23;
}

/* The input of n at position i when it is there and read for its data. */
static int cost_input(const fe_node *n, const cost_entry *e, int i) {
    if (i < 0 || (size_t)i >= n->n_explicit_inputs) return -1;
    if (e && i < 8 && (e->shape_only >> i) & 1) return -1;
    return n->inputs[i];
}

static bool cost_output_is_view(const fe_node *n, size_t k) {
    return n->alias[k] >= 0 && !n->inplace;
}

/* What every rule starts from: bytes read (each value once, shape-only
 * inputs left out), bytes written (view outputs left out), and the largest
 * element count among them. */
typedef struct cost_io {
    uint64_t read, written;
    double max_elems, out_elems; /* out_elems: summed over written outputs */
} cost_io;

static cost_io cost_measure(const fe_model *m, const fe_node *n, const cost_entry *e) {
    cost_io io = {0, 0, 0, 0};
    for (size_t i = 0; i < n->n_explicit_inputs; i++) {
        int v = cost_input(n, e, (int)i);
        if (v < 0) continue;
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++) seen = cost_input(n, e, (int)j) == v;
        if (seen) continue;
        io.read += m->values[v].bytes;
        double el = cost_elems(m, v);
        if (el > io.max_elems) io.max_elems = el;
    }
    for (size_t k = 0; k < n->n_outputs; k++) {
        int v = n->outputs[k];
        if (v < 0 || cost_output_is_view(n, k)) continue;
        io.written += m->values[v].bytes;
        double el = cost_elems(m, v);
        io.out_elems += el;
        if (el > io.max_elems) io.max_elems = el;
    }
    return io;
}

/* Multiply-adds of a convolution with data input in, weight w, output out.
 * A convolution's weight is [Cout, Cin/groups, k...], each output element
 * takes Cin/groups x k of them; a transposed one's is [Cin, Cout/groups,
 * k...], each input element spreads over Cout/groups x k outputs.  Told
 * apart from the shapes when the IR cannot say (aten's `transposed`
 * attribute is not kept): the channel count that matches w's first dim,
 * and when both do, a larger output than input means transposed (an
 * upsampling layer).  Returns -1 when the ranks do not fit a convolution. */
static double cost_conv_macs(const fe_model *m, int in, int w, int out, unsigned flags) {
    if (in < 0 || w < 0 || out < 0) return -1;
    const fe_value *vi = &m->values[in], *vw = &m->values[w], *vo = &m->values[out];
    if (vw->rank < 2 || vi->rank < 2 || vo->rank < 2 || vw->dims[0].value <= 0) return -1;
    double per = cost_elems(m, w) / (double)vw->dims[0].value;
    bool transposed = (flags & COST_F_TRANSPOSED) != 0;
    if (flags & COST_F_DETECT) {
        int64_t c0 = vw->dims[0].value;
        bool normal_fits = vo->dims[1].value == c0, transposed_fits = vi->dims[1].value == c0;
        double in_sp = cost_elems(m, in) / (double)(vi->dims[1].value ? vi->dims[1].value : 1);
        double out_sp = cost_elems(m, out) / (double)(vo->dims[1].value ? vo->dims[1].value : 1);
        transposed = transposed_fits && (!normal_fits || out_sp > in_sp);
    }
    return per * (transposed ? cost_elems(m, in) : cost_elems(m, out));
}

/* 2 x output elements x K; -1 when the operands' ranks do not fit. */
static double cost_matmul_flops(const fe_model *m, const fe_node *n, const cost_entry *e) {
    int a = cost_input(n, e, e->arg), out = n->n_outputs ? n->outputs[0] : -1;
    if (a < 0 || out < 0) return -1;
    const fe_value *va = &m->values[a], *vo = &m->values[out];
    if (va->rank < 1) return -1;
    double k = (double)va->dims[va->rank - 1].value, oe = cost_elems(m, out);
    if (e->flags & COST_F_GEMM) {
        /* Gemm's transA is not in the IR; A holds M x K elements either way */
        if (vo->rank != 2 || vo->dims[0].value <= 0) return -1;
        k = cost_elems(m, a) / (double)vo->dims[0].value;
    }
    double f = 2 * oe * k;
    if (cost_input(n, e, e->bias) >= 0) f += oe;
    return f;
}

static double cost_conv_flops(const fe_model *m, const fe_node *n, const cost_entry *e) {
    int out = n->n_outputs ? n->outputs[0] : -1;
    double macs =
        cost_conv_macs(m, cost_input(n, e, e->arg), cost_input(n, e, e->arg + 1), out, e->flags);
    if (macs < 0) return -1;
    return 2 * macs + (cost_input(n, e, e->bias) >= 0 ? cost_elems(m, out) : 0);
}

/* convolution_backward(grad_out, input, weight) -> (grad_input, grad_weight,
 * grad_bias), an output omitted where output_mask leaves it out: each of
 * the first two costs the forward's FLOPs, grad_bias one add per element of
 * grad_out. */
static double cost_conv_backward_flops(const fe_model *m, const fe_node *n, const cost_entry *e) {
    if (n->n_explicit_inputs < 3) return -1;
    int go = cost_input(n, e, 0);
    double macs = cost_conv_macs(m, cost_input(n, e, 1), cost_input(n, e, 2), go, e->flags);
    if (macs < 0) return -1;
    double f = 0;
    for (size_t k = 0; k < n->n_outputs && k < 2; k++)
        if (n->outputs[k] >= 0) f += 2 * macs;
    if (n->n_outputs > 2 && n->outputs[2] >= 0) f += cost_elems(m, go);
    return f;
}

/* The element type that sets the op's rate (graph_op_cost.elem_type). */
static int32_t cost_rate_type(const fe_model *m, const fe_node *n, const cost_entry *e,
                              bool tensor_op) {
    if (tensor_op) {
        int a = cost_input(n, e, e->arg);
        if (a >= 0) return m->values[a].elem_type;
    }
    for (size_t i = 0; i < n->n_explicit_inputs; i++) {
        int v = cost_input(n, e, (int)i);
        if (v >= 0 && cost_is_float(m->values[v].elem_type)) return m->values[v].elem_type;
    }
    for (size_t k = 0; k < n->n_outputs; k++)
        if (n->outputs[k] >= 0) return m->values[n->outputs[k]].elem_type;
    return 0;
}

static bool cost_all_views(const fe_node *n) {
    size_t present = 0;
    for (size_t k = 0; k < n->n_outputs; k++) {
        if (n->outputs[k] < 0) continue;
        if (!cost_output_is_view(n, k)) return false;
        present++;
    }
    return present > 0;
}

graph_op_cost graph_op_cost_of(const fe_model *m, int op) {
    ROAMC_ASSERT(op >= 0 && (size_t)op < m->n_nodes);
    const fe_node *n = &m->nodes[op];
    graph_op_cost c = {0, 0, GRAPH_COST_DEFAULT, 0, false};
    if (cost_all_views(n)) {
        c.rule = GRAPH_COST_VIEW;
        c.elem_type = cost_rate_type(m, n, NULL, false);
        return c;
    }
    const cost_entry *e = cost_entry_of(n);
    cost_io io = cost_measure(m, n, e);
    c.bytes = io.read + io.written;
    int rule = e ? e->rule : GRAPH_COST_DEFAULT;
    double f = 0;
    switch (rule) {
    case GRAPH_COST_ALLOC: c.bytes = 0; break;
    case GRAPH_COST_FILL:
    case GRAPH_COST_HOST_COPY: c.bytes = io.written; break;
    case GRAPH_COST_COPY: break;
    case GRAPH_COST_ELEMENTWISE:
    case GRAPH_COST_REDUCE:
    case GRAPH_COST_NORM: f = e->k * io.max_elems; break;
    case GRAPH_COST_GATHER: {
        /* the data input is read only where indexed: as many elements as
         * the largest index input or output holds */
        int d = cost_input(n, e, e->arg);
        if (d < 0) {
            rule = GRAPH_COST_DEFAULT;
            break;
        }
        double gathered = 0;
        for (size_t i = 0; i < n->n_explicit_inputs; i++) {
            int v = cost_input(n, e, (int)i);
            if (v >= 0 && v != d && cost_elems(m, v) > gathered) gathered = cost_elems(m, v);
        }
        for (size_t k = 0; k < n->n_outputs; k++)
            if (n->outputs[k] >= 0 && cost_elems(m, n->outputs[k]) > gathered)
                gathered = cost_elems(m, n->outputs[k]);
        const fe_value *vd = &m->values[d];
        double de = cost_elems(m, d);
        double part =
            de > 0 && gathered < de ? (double)vd->bytes * (gathered / de) : (double)vd->bytes;
        c.bytes = io.read - vd->bytes + (uint64_t)part + io.written;
        f = e->k * gathered;
        break;
    }
    case GRAPH_COST_SCATTER: f = e->k * cost_elems(m, cost_input(n, e, e->arg)); break;
    case GRAPH_COST_MATMUL: f = cost_matmul_flops(m, n, e); break;
    case GRAPH_COST_CONV: f = cost_conv_flops(m, n, e); break;
    case GRAPH_COST_CONV_BACKWARD: f = cost_conv_backward_flops(m, n, e); break;
    default: rule = GRAPH_COST_DEFAULT; break;
    }
    if (f < 0) rule = GRAPH_COST_DEFAULT; /* operands that do not fit the rule */
    if (rule == GRAPH_COST_DEFAULT) {
        e = NULL;
        io = cost_measure(m, n, NULL);
        c.bytes = io.read + io.written;
        f = io.out_elems;
    }
    c.rule = rule;
    c.flops = f;
    c.tensor_op =
        rule == GRAPH_COST_MATMUL || rule == GRAPH_COST_CONV || rule == GRAPH_COST_CONV_BACKWARD;
    c.elem_type = cost_rate_type(m, n, e, c.tensor_op);
    return c;
}

void graph_op_costs(const graph *g, graph_op_cost *out) {
    for (size_t i = 0; i < g->n_ops; i++) out[i] = graph_op_cost_of(g->model, (int)i);
}

const char *graph_cost_rule_name(int rule) {
    static const char *const names[GRAPH_COST_N_RULES] = {
        [GRAPH_COST_VIEW] = "view",
        [GRAPH_COST_ALLOC] = "alloc",
        [GRAPH_COST_FILL] = "fill",
        [GRAPH_COST_COPY] = "copy",
        [GRAPH_COST_ELEMENTWISE] = "elementwise",
        [GRAPH_COST_REDUCE] = "reduce",
        [GRAPH_COST_NORM] = "norm",
        [GRAPH_COST_GATHER] = "gather",
        [GRAPH_COST_SCATTER] = "scatter",
        [GRAPH_COST_MATMUL] = "matmul",
        [GRAPH_COST_CONV] = "conv",
        [GRAPH_COST_CONV_BACKWARD] = "conv_backward",
        [GRAPH_COST_HOST_COPY] = "host_copy",
        [GRAPH_COST_DEFAULT] = "default",
    };
    _Static_assert(sizeof names / sizeof names[0] == GRAPH_COST_N_RULES, "a name per rule");
    if (rule < 0 || rule >= GRAPH_COST_N_RULES || !names[rule]) return "?";
    return names[rule];
}
