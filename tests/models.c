/* Small models built by the tests (see models.h). */
#include "models.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* a -> (relu, sigmoid) -> add: two branches that can run in either order. */
static tg *m_diamond(void) {
    tg *t = tg_new();
    tg_input(t, "x", "64x64");
    tg_node(t, "", "Relu", "x", "a");
    tg_node(t, "", "Sigmoid", "x", "b");
    tg_node(t, "", "Mul", "a,a", "a2");
    tg_node(t, "", "Add", "a2,b", "c");
    tg_value(t, "a", "64x64");
    tg_value(t, "b", "64x64");
    tg_value(t, "a2", "64x64");
    tg_output(t, "c", "64x64");
    return t;
}

/* Three residual blocks: the skip tensor lives across each block. */
static tg *m_residual(void) {
    tg *t = tg_new();
    tg_input(t, "x0", "32x128");
    tg_initializer(t, "w", "128x128");
    const char *names[][5] = {{"x0", "h1", "h2", "h3", "x1"},
                              {"x1", "g1", "g2", "g3", "x2"},
                              {"x2", "k1", "k2", "k3", "x3"}};
    for (int b = 0; b < 3; b++) {
        char in[64];
        tg_node(t, "", "MatMul", (snprintf(in, sizeof in, "%s,w", names[b][0]), in), names[b][1]);
        tg_node(t, "", "Relu", names[b][1], names[b][2]);
        tg_node(t, "", "MatMul", (snprintf(in, sizeof in, "%s,w", names[b][2]), in), names[b][3]);
        tg_node(t, "", "Add", (snprintf(in, sizeof in, "%s,%s", names[b][3], names[b][0]), in),
                names[b][4]);
        for (int k = 1; k < 5; k++)
            if (b < 2 || k < 4) tg_value(t, names[b][k], "32x128");
    }
    tg_output(t, "x3", "32x128");
    return t;
}

/* Standard views (Reshape, Flatten, Identity) and ATen views without
 * attributes (t, view): each view shares its input's storage. */
static tg *m_views(void) {
    tg *t = tg_new();
    tg_input(t, "x", "8x16x4");
    tg_initializer(t, "shape", "i64:2");
    tg_node(t, "", "Relu", "x", "r");
    tg_node(t, "", "Reshape", "r,shape", "r2");
    tg_node(t, "", "Identity", "r2", "r3");
    tg_node(t, "aten", "t", "r3", "rt");
    tg_node(t, "aten", "mm", "rt,r3", "g");
    tg_node(t, "aten", "view", "g", "gv");
    tg_node(t, "", "Flatten", "x", "xf");
    tg_node(t, "com.example", "Sum", "gv,xf", "out"); /* sized by value_info only */
    tg_value(t, "r", "8x16x4");
    tg_value(t, "r2", "128x4");
    tg_value(t, "r3", "128x4");
    tg_value(t, "rt", "4x128");
    tg_value(t, "g", "4x4");
    tg_value(t, "gv", "16");
    tg_value(t, "xf", "8x64");
    tg_output(t, "out", "8x64");
    return t;
}

/* In-place writes: relu_ with attributes, add_ by the ATen naming default.
 * `s` reads e before relu_ overwrites it and must stay before it. */
static tg *m_inplace(void) {
    tg *t = tg_new();
    tg_input(t, "x", "256x64");
    tg_input(t, "y", "256x64");
    tg_node(t, "", "Exp", "x", "e");
    tg_node(t, "", "Sigmoid", "e", "s");
    int r = tg_node(t, "aten", "relu_", "e", "e2");
    tg_alias(t, r, "0", 1);
    tg_node(t, "aten", "add_", "e2,y", "e3");
    tg_node(t, "", "Mul", "e3,s", "out");
    tg_value(t, "e", "256x64");
    tg_value(t, "s", "256x64");
    tg_value(t, "e2", "256x64");
    tg_value(t, "e3", "256x64");
    tg_output(t, "out", "256x64");
    return t;
}

/* Multi-output nodes, one output unused and one omitted. */
static tg *m_multiout(void) {
    tg *t = tg_new();
    tg_input(t, "x", "96x32");
    tg_initializer(t, "split", "i64:3");
    tg_node(t, "", "Split", "x,split", "p,q,r");
    tg_node(t, "", "TopK", "p,k", "vals,");
    tg_node(t, "aten", "native_batch_norm", "q", "bn,mean,invstd");
    tg_node(t, "com.example", "Concat", "vals,bn,r", "out"); /* sized by value_info only */
    tg_initializer(t, "k", "i64:1");
    tg_value(t, "p", "32x32");
    tg_value(t, "q", "32x32");
    tg_value(t, "r", "32x32");
    tg_value(t, "vals", "32x4");
    tg_value(t, "bn", "32x32");
    tg_value(t, "mean", "32");
    tg_value(t, "invstd", "32");
    tg_output(t, "out", "32x68");
    return t;
}

/* Element types of every width, 4-bit included. */
static tg *m_dtypes(void) {
    tg *t = tg_new();
    tg_input(t, "a", "f16:1000");
    tg_input(t, "b", "i64:1000");
    tg_input(t, "c", "u4:1001");
    tg_input(t, "d", "c128:10");
    tg_input(t, "s", "");
    /* operators of another domain: each value is sized by its value_info */
    tg_node(t, "com.example", "Cast", "a", "a32");
    tg_node(t, "com.example", "Cast", "b", "b8");
    tg_node(t, "com.example", "Cast", "c", "cb");
    tg_node(t, "com.example", "Cast", "d", "dbf");
    tg_node(t, "com.example", "Concat", "a32,b8,cb,dbf,s", "out");
    tg_value(t, "a32", "1000");
    tg_value(t, "b8", "bool:1000");
    tg_value(t, "cb", "i8:1001");
    tg_value(t, "dbf", "bf16:20");
    tg_output(t, "out", "f64:3021");
    return t;
}

/* One training step of a 2-layer MLP: forward, loss, backward, and SGD with
 * momentum updating parameters and momenta in place. */
static tg *m_training(void) {
    tg *t = tg_new();
    tg_input(t, "x", "64x256");
    tg_input(t, "y", "64x10");
    tg_input(t, "w1", "256x512");
    tg_input(t, "w2", "512x10");
    tg_input(t, "m1", "256x512");
    tg_input(t, "m2", "512x10");
    tg_meta(t, "roamc.loss", "loss");
    tg_meta(t, "roamc.parameters", "w1,w2");
    tg_meta(t, "roamc.optimizer_state", "m1,m2");
    tg_meta(t, "roamc.data_inputs", "x,y");
    tg_meta(t, "roamc.optimizer", "sgd");
    tg_meta(t, "roamc.gradients", "gw1,gw2");
    /* forward */
    tg_node(t, "aten", "mm", "x,w1", "h");
    tg_node(t, "aten", "relu", "h", "a");
    tg_node(t, "aten", "mm", "a,w2", "o");
    tg_node(t, "aten", "sub", "o,y", "d");
    tg_node(t, "aten", "mul", "d,d", "sq");
    tg_node(t, "aten", "sum", "sq", "loss");
    /* backward */
    tg_node(t, "aten", "add", "d,d", "gd");
    tg_node(t, "aten", "t", "a", "aT");
    tg_node(t, "aten", "mm", "aT,gd", "gw2");
    tg_node(t, "aten", "t", "w2", "w2T");
    tg_node(t, "aten", "mm", "gd,w2T", "ga");
    tg_node(t, "aten", "threshold_backward", "ga,a", "gh");
    tg_node(t, "aten", "t", "x", "xT");
    tg_node(t, "aten", "mm", "xT,gh", "gw1");
    /* SGD with momentum: m = 0.9 m + g; w -= lr m */
    int n;
    n = tg_node(t, "aten", "mul_", "m2", "m2a");
    tg_alias(t, n, "0", 1);
    n = tg_node(t, "aten", "add_", "m2a,gw2", "m2b");
    tg_alias(t, n, "0", 1);
    n = tg_node(t, "aten", "sub_", "w2,m2b", "w2b");
    tg_alias(t, n, "0", 1);
    n = tg_node(t, "aten", "mul_", "m1", "m1a");
    tg_alias(t, n, "0", 1);
    n = tg_node(t, "aten", "add_", "m1a,gw1", "m1b");
    tg_alias(t, n, "0", 1);
    n = tg_node(t, "aten", "sub_", "w1,m1b", "w1b");
    tg_alias(t, n, "0", 1);
    const char *v[][2] = {
        {"h", "64x512"},    {"a", "64x512"},    {"o", "64x10"},    {"d", "64x10"},
        {"sq", "64x10"},    {"gd", "64x10"},    {"aT", "512x64"},  {"gw2", "512x10"},
        {"w2T", "10x512"},  {"ga", "64x512"},   {"gh", "64x512"},  {"xT", "256x64"},
        {"gw1", "256x512"}, {"m2a", "512x10"},  {"m2b", "512x10"}, {"w2b", "512x10"},
        {"m1a", "256x512"}, {"m1b", "256x512"}, {"w1b", "256x512"}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) tg_value(t, v[i][0], v[i][1]);
    tg_output(t, "loss", "");
    return t;
}

const test_model test_models_valid[] = {
    {"diamond", m_diamond},   {"residual", m_residual},
    {"views", m_views},       {"inplace", m_inplace},
    {"multiout", m_multiout}, {"dtypes", m_dtypes},
    {"training", m_training}, {NULL, NULL},
};

tg *test_model_build(const char *name) {
    for (const test_model *m = test_models_valid; m->name; m++)
        if (strcmp(m->name, name) == 0) return m->build();
    return NULL;
}

/* ------------------------------------------------------------- bad ones */

static tg *b_cycle(void) {
    tg *t = tg_new();
    tg_input(t, "x", "4");
    tg_node(t, "", "Add", "x,z", "y");
    tg_node(t, "", "Relu", "y", "z");
    tg_value(t, "y", "4");
    tg_value(t, "z", "4");
    tg_output(t, "z", "4");
    return t;
}

/* y = x + name, where nothing produces name */
static tg *b_reads_unproduced(const char *name) {
    char inputs[64];
    snprintf(inputs, sizeof inputs, "x,%s", name);
    tg *t = tg_new();
    tg_input(t, "x", "4");
    tg_node(t, "", "Add", inputs, "y");
    tg_output(t, "y", "4");
    return t;
}

static tg *b_unproduced(void) {
    return b_reads_unproduced("ghost");
}

/* a name that would clear the terminal if printed as is */
static tg *b_control_name(void) {
    return b_reads_unproduced("gh\x1b[2Jost");
}

static tg *b_twice(void) {
    tg *t = tg_new();
    tg_input(t, "x", "4");
    tg_node(t, "", "Relu", "x", "y");
    tg_node(t, "", "Sigmoid", "x", "y");
    tg_output(t, "y", "4");
    return t;
}

static tg *b_no_shape(void) {
    tg *t = tg_new();
    tg_input(t, "x", "4");
    /* an operator of another domain: no inference, and no value_info */
    tg_node(t, "com.example", "Mystery", "x", "hidden_value");
    tg_node(t, "", "Relu", "hidden_value", "y");
    tg_output(t, "y", "4");
    return t;
}

static tg *b_symbolic(void) {
    tg *t = tg_new();
    tg_input(t, "batch_x", "?x4");
    tg_node(t, "", "Relu", "batch_x", "y");
    tg_output(t, "y", "4");
    return t;
}

static tg *b_overflow(void) {
    tg *t = tg_new();
    tg_input(t, "huge", "4294967296x4294967296x16");
    tg_node(t, "", "Relu", "huge", "y");
    tg_output(t, "y", "4");
    return t;
}

static tg *b_bytes_overflow(void) {
    tg *t = tg_new();
    tg_input(t, "x", "4");
    tg_node(t, "com.example", "Widen", "x", "wide"); /* sized by its value_info only */
    tg_value(t, "wide", "f64:4611686018427387904");  /* 2^62 elements x 8 bytes */
    tg_output(t, "wide", "f64:4611686018427387904");
    return t;
}

static tg *b_negative(void) {
    tg *t = tg_new();
    tg_input(t, "neg", "-3x4");
    tg_node(t, "", "Relu", "neg", "y");
    tg_output(t, "y", "4");
    return t;
}

static tg *b_string(void) {
    tg *t = tg_new();
    tg_input(t, "words", "str:4");
    tg_node(t, "", "Identity", "words", "y");
    tg_output(t, "y", "str:4");
    return t;
}

static tg *b_bad_alias(void) {
    tg *t = tg_new();
    tg_input(t, "x", "4");
    int n = tg_node(t, "aten", "relu_", "x", "y");
    tg_alias(t, n, "5", 1);
    tg_output(t, "y", "4");
    return t;
}

/* r must read x before the in-place write, yet it reads the write's output. */
static tg *b_inplace_conflict(void) {
    tg *t = tg_new();
    tg_input(t, "x", "4");
    int n = tg_node(t, "aten", "add_", "x,x", "x2");
    tg_alias(t, n, "0", 1);
    tg_node(t, "", "Add", "x,x2", "r");
    tg_value(t, "x2", "4");
    tg_output(t, "r", "4");
    return t;
}

static tg *b_no_nodes(void) {
    tg *t = tg_new();
    tg_input(t, "x", "4");
    tg_output(t, "x", "4");
    return t;
}

static tg *b_untyped(void) {
    tg *t = tg_new();
    tg_input(t, "x", "4");
    tg_node(t, "com.example", "Mystery", "x", "y");
    tg_value(t, "y", "none");
    tg_output(t, "y", "none");
    return t;
}

const test_bad_model test_models_bad[] = {
    {"cycle", b_cycle, "cycle"},
    {"unproduced", b_unproduced, "'ghost'"},
    {"control_name", b_control_name, "'gh?[2Jost'"},
    {"produced_twice", b_twice, "'y' is produced twice"},
    {"no_shape", b_no_shape, "'hidden_value'"},
    {"symbolic_dim", b_symbolic, "'batch_x'"},
    {"dims_overflow", b_overflow, "overflows"},
    {"bytes_overflow", b_bytes_overflow, "overflows"},
    {"negative_dim", b_negative, "negative"},
    {"string_tensor", b_string, "no fixed byte size"},
    {"bad_alias", b_bad_alias, "alias"},
    {"inplace_conflict", b_inplace_conflict, "cycle"},
    {"no_nodes", b_no_nodes, "no nodes"},
    {"untyped", b_untyped, "'y'"},
    {NULL, NULL, NULL},
};
