/* Unit tests of frontend/infer/ (shape and type inference) through its
 * header: small graphs built in C (testgraph.h, attributes and If branches
 * included), inferred with fi_infer_model, every shape, type and known
 * value checked against the ONNX operator definitions worked by hand.  A
 * symbol left unbound is the loader's message (fe_load_bytes). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frontend.h"
#include "infer/infer.h"
#include "testgraph.h"

enum { T_FLOAT = 1, T_INT64 = 7, T_BOOL = 9 };

/* A model and what inference found in it (the context may point into the
 * model, so both live until ti_free). */
typedef struct ti {
    Onnx__ModelProto *mp;
    fi_ctx *cx;
    char err[1024];
} ti;

/* Infers t under opt (may be NULL) into r; returns fi_infer_model's code. */
static int ti_run(const tg *t, const fe_options *opt, ti *r) {
    size_t len;
    uint8_t *bytes = tg_pack(t, &len);
    r->mp = onnx__model_proto__unpack(NULL, len, bytes);
    free(bytes);
    if (!r->mp) fail_msg("test model does not unpack");
    r->cx = NULL;
    r->err[0] = 0;
    return fi_infer_model(r->mp, opt, &r->cx, r->err, sizeof r->err);
}

/* ti_run that must succeed. */
static void ti_ok(const tg *t, const fe_options *opt, ti *r) {
    if (ti_run(t, opt, r)) fail_msg("inference failed: %s", r->err);
}

static void ti_free(ti *r) {
    if (r->cx) fi_free(r->cx);
    onnx__model_proto__free_unpacked(r->mp, NULL);
}

/* The dims of t as "2x12" ("?" for an unknown dim, "" for a scalar,
 * "unranked" when the rank is unknown). */
static const char *ti_dims(const fi_tensor *t, char *buf, size_t len) {
    if (t->rank < 0) return "unranked";
    size_t off = 0;
    buf[0] = 0;
    for (int i = 0; i < t->rank && off < len; i++) {
        const char *sep = i ? "x" : "";
        off += t->dims[i].v >= 0
                   ? (size_t)snprintf(buf + off, len - off, "%s%lld", sep, (long long)t->dims[i].v)
                   : (size_t)snprintf(buf + off, len - off, "%s?", sep);
    }
    return buf;
}

/* Value name's element type and dims are exactly elem and dims. */
static const fi_tensor *ti_expect(const ti *r, const char *name, int32_t elem, const char *dims) {
    const fi_tensor *t = fi_lookup(r->cx, name);
    if (!t) fail_msg("no value '%s' inferred", name);
    char buf[256];
    const char *got = ti_dims(t, buf, sizeof buf);
    if (strcmp(got, dims) != 0) fail_msg("'%s': dims %s, expected %s", name, got, dims);
    if (t->elem != elem) fail_msg("'%s': type %d, expected %d", name, (int)t->elem, (int)elem);
    return t;
}

/* Value name's known integer value is exactly v[0..n). */
static void ti_expect_ints(const ti *r, const char *name, const int64_t *v, int64_t n) {
    const fi_tensor *t = fi_lookup(r->cx, name);
    if (!t || !t->ci) fail_msg("'%s': value not known", name);
    assert_int_equal(t->n_const, n);
    for (int64_t i = 0; i < n; i++)
        if (t->ci[i] != v[i])
            fail_msg("'%s'[%lld] = %lld, expected %lld", name, (long long)i, (long long)t->ci[i],
                     (long long)v[i]);
}

/* A Constant node making a 1-D int64 value from csv. */
static void ti_const_ints(tg *t, const char *name, const char *csv) {
    int n = tg_node(t, "", "Constant", "", name);
    tg_attr_ints(t, n, "value_ints", csv);
}

/* A Constant node making an int64 scalar. */
static void ti_const_int(tg *t, const char *name, int64_t v) {
    int n = tg_node(t, "", "Constant", "", name);
    tg_attr_int(t, n, "value_int", v);
}

/* Numpy broadcasting: trailing dims aligned, 1 stretched, the rank the
 * largest; the type of the inputs; dims that differ and are not 1 fail. */
static void test_broadcast(void **state) {
    (void)state;
    tg *t = tg_new();
    tg_input(t, "a", "3x1x5");
    tg_input(t, "b", "4x1");
    tg_input(t, "c", "5");
    tg_input(t, "k", "i64:2x1");
    tg_input(t, "j", "i64:");
    tg_node(t, "", "Add", "a,b", "ab");
    tg_node(t, "", "Mul", "ab,c", "abc");
    tg_node(t, "", "Sub", "k,j", "kj");
    tg_node(t, "", "Where", "cond,a,b", "w");
    tg_input(t, "cond", "bool:7x1x1x1");
    tg_node(t, "", "Less", "a,b", "lt");
    ti r;
    ti_ok(t, NULL, &r);
    ti_expect(&r, "ab", T_FLOAT, "3x4x5");
    ti_expect(&r, "abc", T_FLOAT, "3x4x5");
    ti_expect(&r, "kj", T_INT64, "2x1");
    ti_expect(&r, "w", T_FLOAT, "7x3x4x5");
    ti_expect(&r, "lt", T_BOOL, "3x4x5");
    ti_free(&r);
    tg_free(t);

    t = tg_new();
    tg_input(t, "a", "3x2");
    tg_input(t, "b", "4");
    tg_node(t, "", "Add", "a,b", "ab");
    assert_int_equal(ti_run(t, NULL, &r), -1);
    if (!strstr(r.err, "Add") || !strstr(r.err, "broadcast"))
        fail_msg("unexpected message: %s", r.err);
    ti_free(&r);
    tg_free(t);
}

/* Reshape: 0 copies the input's dim, -1 takes what is left; both at once;
 * a -1 that does not divide fails. */
static void test_reshape(void **state) {
    (void)state;
    tg *t = tg_new();
    tg_input(t, "x", "2x3x4");
    ti_const_ints(t, "s1", "0,-1");
    ti_const_ints(t, "s2", "-1,0,2");
    ti_const_ints(t, "s3", "4,0,2");
    tg_node(t, "", "Reshape", "x,s1", "r1");
    tg_node(t, "", "Reshape", "x,s2", "r2");
    tg_node(t, "", "Reshape", "x,s3", "r3");
    ti r;
    ti_ok(t, NULL, &r);
    ti_expect(&r, "s1", T_INT64, "2");
    ti_expect(&r, "r1", T_FLOAT, "2x12");
    ti_expect(&r, "r2", T_FLOAT, "4x3x2");
    ti_expect(&r, "r3", T_FLOAT, "4x3x2");
    ti_free(&r);
    tg_free(t);

    t = tg_new();
    tg_input(t, "x", "2x3x4");
    ti_const_ints(t, "s", "5,-1");
    tg_node(t, "", "Reshape", "x,s", "y");
    assert_int_equal(ti_run(t, NULL, &r), -1);
    if (!strstr(r.err, "Reshape")) fail_msg("unexpected message: %s", r.err);
    ti_free(&r);
    tg_free(t);
}

/* A shape computed at run time: Shape -> Gather -> Concat -> Reshape, each
 * step's value known, so the Reshape has a static result. */
static void test_shape_chain(void **state) {
    (void)state;
    tg *t = tg_new();
    tg_input(t, "x", "2x3x4");
    tg_node(t, "", "Shape", "x", "s");
    ti_const_ints(t, "i0", "0");
    int g = tg_node(t, "", "Gather", "s,i0", "batch");
    tg_attr_int(t, g, "axis", 0);
    ti_const_ints(t, "m1", "-1");
    int c = tg_node(t, "", "Concat", "batch,m1", "shape");
    tg_attr_int(t, c, "axis", 0);
    tg_node(t, "", "Reshape", "x,shape", "y");
    ti_const_int(t, "last", -1);
    tg_node(t, "", "Gather", "s,last", "d_last");
    ti r;
    ti_ok(t, NULL, &r);
    ti_expect(&r, "s", T_INT64, "3");
    ti_expect_ints(&r, "s", (const int64_t[]){2, 3, 4}, 3);
    ti_expect(&r, "batch", T_INT64, "1");
    ti_expect_ints(&r, "batch", (const int64_t[]){2}, 1);
    ti_expect(&r, "shape", T_INT64, "2");
    ti_expect_ints(&r, "shape", (const int64_t[]){2, -1}, 2);
    ti_expect(&r, "y", T_FLOAT, "2x12");
    /* a scalar index gives a scalar; -1 is the last */
    ti_expect(&r, "d_last", T_INT64, "");
    ti_expect_ints(&r, "d_last", (const int64_t[]){4}, 1);
    ti_free(&r);
    tg_free(t);
}

/* Conv and pools: out = floor((in + pad_begin + pad_end - dilation*(k-1) - 1)
 * / stride) + 1 (ceil with ceil_mode). */
static void test_conv_pool(void **state) {
    (void)state;
    tg *t = tg_new();
    tg_input(t, "x", "1x3x32x32");
    tg_input(t, "w", "8x3x3x3");
    tg_input(t, "wg", "6x1x5x5");
    tg_input(t, "p", "1x3x7x7");
    /* (32 + 2 - 2*2 - 1) / 2 + 1 = 15 */
    int n = tg_node(t, "", "Conv", "x,w", "c1");
    tg_attr_ints(t, n, "strides", "2,2");
    tg_attr_ints(t, n, "pads", "1,1,1,1");
    tg_attr_ints(t, n, "dilations", "2,2");
    /* no attributes: (32 - 3) + 1 = 30; pads H 0+2, W 1+0: 32 and 31 */
    tg_node(t, "", "Conv", "x,w", "c2");
    n = tg_node(t, "", "Conv", "x,w", "c3");
    tg_attr_ints(t, n, "pads", "0,1,2,0");
    /* group 3 with 6 filters of 1 channel each, kernel 5, stride 3: (32 - 5) / 3 + 1 = 10 */
    n = tg_node(t, "", "Conv", "x,wg", "c4");
    tg_attr_int(t, n, "group", 3);
    tg_attr_ints(t, n, "strides", "3,3");
    /* MaxPool k2 s2 on 7: floor(5/2)+1 = 3; ceil_mode: ceil(5/2)+1 = 4 */
    n = tg_node(t, "", "MaxPool", "p", "mp_floor");
    tg_attr_ints(t, n, "kernel_shape", "2,2");
    tg_attr_ints(t, n, "strides", "2,2");
    n = tg_node(t, "", "MaxPool", "p", "mp_ceil");
    tg_attr_ints(t, n, "kernel_shape", "2,2");
    tg_attr_ints(t, n, "strides", "2,2");
    tg_attr_int(t, n, "ceil_mode", 1);
    /* AveragePool k3 s1 pads 1: 7 */
    n = tg_node(t, "", "AveragePool", "p", "ap");
    tg_attr_ints(t, n, "kernel_shape", "3,3");
    tg_attr_ints(t, n, "pads", "1,1,1,1");
    tg_node(t, "", "GlobalAveragePool", "p", "gap");
    ti r;
    ti_ok(t, NULL, &r);
    ti_expect(&r, "c1", T_FLOAT, "1x8x15x15");
    ti_expect(&r, "c2", T_FLOAT, "1x8x30x30");
    ti_expect(&r, "c3", T_FLOAT, "1x8x32x31");
    ti_expect(&r, "c4", T_FLOAT, "1x6x10x10");
    ti_expect(&r, "mp_floor", T_FLOAT, "1x3x3x3");
    ti_expect(&r, "mp_ceil", T_FLOAT, "1x3x4x4");
    ti_expect(&r, "ap", T_FLOAT, "1x3x7x7");
    ti_expect(&r, "gap", T_FLOAT, "1x3x1x1");
    ti_free(&r);
    tg_free(t);
}

/* Negative indices count from the end: Gather's indices and axis, Slice's
 * starts, ends and axes (ends clamped to the dim). */
static void test_negative_indices(void **state) {
    (void)state;
    tg *t = tg_new();
    tg_input(t, "x", "5x6x7");
    ti_const_ints(t, "idx", "-1,0,-2");
    int n = tg_node(t, "", "Gather", "x,idx", "g_axis_neg");
    tg_attr_int(t, n, "axis", -2);
    ti_const_int(t, "one", -1);
    n = tg_node(t, "", "Gather", "x,one", "g_scalar");
    tg_attr_int(t, n, "axis", 0);
    /* axis -1 (7): from -5 to -1 = 4 elements */
    ti_const_ints(t, "st", "-5");
    ti_const_ints(t, "en", "-1");
    ti_const_ints(t, "ax", "-1");
    tg_node(t, "", "Slice", "x,st,en,ax", "s_neg");
    /* axis 0 (5): from -3 to a huge end, clamped: 3 elements */
    ti_const_ints(t, "st2", "-3");
    ti_const_ints(t, "en2", "1000");
    ti_const_ints(t, "ax2", "0");
    tg_node(t, "", "Slice", "x,st2,en2,ax2", "s_clamp");
    /* backwards over axis 1 (6): -1 down to (not including) -5, step -2: 5, 3 */
    ti_const_ints(t, "st3", "-1");
    ti_const_ints(t, "en3", "-5");
    ti_const_ints(t, "ax3", "1");
    ti_const_ints(t, "sp3", "-2");
    tg_node(t, "", "Slice", "x,st3,en3,ax3,sp3", "s_step");
    /* the values too: the last two dims of Shape(x) */
    tg_node(t, "", "Shape", "x", "shape");
    ti_const_ints(t, "st4", "-2");
    ti_const_ints(t, "en4", "3");
    tg_node(t, "", "Slice", "shape,st4,en4", "tail");
    ti r;
    ti_ok(t, NULL, &r);
    ti_expect(&r, "g_axis_neg", T_FLOAT, "5x3x7");
    ti_expect(&r, "g_scalar", T_FLOAT, "6x7");
    ti_expect(&r, "s_neg", T_FLOAT, "5x6x4");
    ti_expect(&r, "s_clamp", T_FLOAT, "3x6x7");
    ti_expect(&r, "s_step", T_FLOAT, "5x2x7");
    ti_expect(&r, "tail", T_INT64, "2");
    ti_expect_ints(&r, "tail", (const int64_t[]){6, 7}, 2);
    ti_free(&r);
    tg_free(t);

    /* an index out of range fails the node */
    t = tg_new();
    tg_input(t, "x", "5x6");
    n = tg_node(t, "", "Gather", "x,i", "y");
    tg_attr_int(t, n, "axis", -3);
    tg_input(t, "i", "i64:2");
    assert_int_equal(ti_run(t, NULL, &r), -1);
    if (!strstr(r.err, "axis -3 out of range")) fail_msg("unexpected message: %s", r.err);
    ti_free(&r);
    tg_free(t);
}

/* x's first dim is the symbol N (testgraph's "?"): unknown but exact
 * through Relu, derived through Reshape; --dim N=4 binds every use. */
static tg *ti_symbolic(void) {
    tg *t = tg_new();
    tg_input(t, "x", "?x8");
    tg_node(t, "", "Relu", "x", "y");
    ti_const_ints(t, "s", "-1");
    tg_node(t, "", "Reshape", "y,s", "flat");
    tg_output(t, "flat", "none");
    return t;
}

static void test_symbol_bound(void **state) {
    (void)state;
    tg *t = ti_symbolic();
    fe_options opt = {0};
    char err[256];
    if (fe_options_parse(&opt, "--dim", "N=4", err, sizeof err)) fail_msg("%s", err);
    ti r;
    ti_ok(t, &opt, &r);
    ti_expect(&r, "y", T_FLOAT, "4x8");
    ti_expect(&r, "flat", T_FLOAT, "32");
    ti_free(&r);
    fe_options_free(&opt);

    /* unbound: inference keeps the symbol, exact on y, derived on flat */
    ti_ok(t, NULL, &r);
    const fi_tensor *y = ti_expect(&r, "y", T_FLOAT, "?x8");
    assert_true(y->dims[0].exact);
    assert_true(y->dims[0].sym >= 0);
    const fi_tensor *flat = ti_expect(&r, "flat", T_FLOAT, "?");
    assert_false(flat->dims[0].exact);
    assert_int_equal(flat->dims[0].sym, y->dims[0].sym);
    const char *name;
    int64_t value;
    int kind, node;
    fi_symbol_get(r.cx, (size_t)y->dims[0].sym, &name, &value, &kind, &node);
    assert_string_equal(name, "N");
    assert_true(value < 0);
    ti_free(&r);

    /* and the loader refuses it, naming the symbol and the flag */
    size_t len;
    uint8_t *bytes = tg_pack(t, &len);
    fe_model m;
    char msg[2048];
    assert_int_equal(fe_load_bytes("sym.onnx", (fe_bytes){bytes, len}, NULL, &m, msg, sizeof msg),
                     -1);
    if (!strstr(msg, "sym.onnx") || !strstr(msg, "graph input 'x' dim 0 is the symbol 'N'") ||
        !strstr(msg, "--dim N=N"))
        fail_msg("unexpected message: %s", msg);
    free(bytes);
    tg_free(t);
}

/* An If whose cond is unknown: the output has the branches' shape, and the
 * node's working memory is the larger branch's nested arena.  Then branch:
 * t1 = Relu(x), t2 = t1 + t1, out = t2 + t1: t1 and t2 (4x256 float, 4096
 * B each) are live together, 8192 B; the output is the node's, not counted.
 * Else branch: out = Neg(x), nothing but the output: 0 B. */
static void test_if_body_memory(void **state) {
    (void)state;
    tg *then_b = tg_new();
    tg_node(then_b, "", "Relu", "x", "t1");
    tg_node(then_b, "", "Add", "t1,t1", "t2");
    tg_node(then_b, "", "Add", "t2,t1", "then_out");
    tg_output(then_b, "then_out", "4x256");
    tg *else_b = tg_new();
    tg_node(else_b, "", "Neg", "x", "else_out");
    tg_output(else_b, "else_out", "4x256");
    tg *t = tg_new();
    tg_input(t, "x", "4x256");
    tg_input(t, "cond", "bool:");
    int n = tg_node(t, "", "If", "cond", "y");
    tg_attr_graph(t, n, "then_branch", then_b);
    tg_attr_graph(t, n, "else_branch", else_b);
    tg_output(t, "y", "none");
    ti r;
    ti_ok(t, NULL, &r);
    ti_expect(&r, "y", T_FLOAT, "4x256");
    fi_body_use u;
    assert_true(fi_main_body(r.cx, 0, &u));
    assert_int_equal(u.bytes, 8192);
    assert_int_equal(u.how, FI_BODY_IF_LARGER);
    assert_int_equal(u.branch, 0);
    assert_int_equal(u.unsized, 0);
    ti_free(&r);
    tg_free(t);
}

/* NonZero: [rank, N] int64, N a data symbol bound by the element count
 * (12); what is computed from it is a bound too; --dim binds it lower. */
static void test_nonzero_bound(void **state) {
    (void)state;
    tg *t = tg_new();
    tg_input(t, "x", "3x4");
    tg_node(t, "", "NonZero", "x", "nz");
    tg_node(t, "", "Transpose", "nz", "nzt");
    tg_output(t, "nzt", "none");
    ti r;
    ti_ok(t, NULL, &r);
    const fi_tensor *nz = ti_expect(&r, "nz", T_INT64, "2x12");
    assert_true(nz->bound);
    const fi_tensor *nzt = ti_expect(&r, "nzt", T_INT64, "12x2");
    assert_true(nzt->bound);
    int found = 0;
    for (size_t i = 0; i < fi_symbol_count(r.cx); i++) {
        const char *name;
        int64_t value;
        int kind, node;
        fi_symbol_get(r.cx, i, &name, &value, &kind, &node);
        if (strncmp(name, "nz:", 3) == 0) {
            found++;
            assert_int_equal(value, 12);
            assert_int_equal(node, 0);
        }
    }
    assert_int_equal(found, 1);
    ti_free(&r);
    tg_free(t);
}

/* One node each of the common operators, each shape worked from the ONNX
 * definition (opset 17). */
static void test_op_table(void **state) {
    (void)state;
    tg *t = tg_new();
    tg_input(t, "a", "2x3x4");
    tg_input(t, "m", "4x5");
    tg_input(t, "bm", "7x1x4x5");
    tg_input(t, "v", "6");
    tg_input(t, "sc", "4");
    tg_input(t, "img", "2x8x6x6");
    tg_input(t, "ch", "8");
    tg_input(t, "lbl", "i64:2x3");
    /* MatMul broadcasts the batch dims: 2x3x4 @ 7x1x4x5 = 7x2x3x5 */
    tg_node(t, "", "MatMul", "a,bm", "mm");
    /* Gemm transA: (4x5)^T = 5x4 times 4x5 = 5x5 */
    int n = tg_node(t, "", "Gemm", "m,m", "gemm");
    tg_attr_int(t, n, "transA", 1);
    n = tg_node(t, "", "Transpose", "a", "tr");
    tg_attr_ints(t, n, "perm", "2,0,1");
    tg_node(t, "", "Transpose", "a", "tr_default");
    ti_const_ints(t, "ax0", "0,-1");
    tg_node(t, "", "Unsqueeze", "a,ax0", "unsq");
    ti_const_ints(t, "ax1", "0");
    tg_node(t, "", "Squeeze", "unsq,ax1", "sq");
    n = tg_node(t, "", "Flatten", "a", "flat");
    tg_attr_int(t, n, "axis", 2);
    ti_const_ints(t, "parts", "1,3");
    n = tg_node(t, "", "Split", "a,parts", "sp0,sp1");
    tg_attr_int(t, n, "axis", -1);
    ti_const_ints(t, "eshape", "5,1,1");
    tg_node(t, "", "Expand", "sc,eshape", "ex");
    ti_const_ints(t, "reps", "2,1,3");
    tg_node(t, "", "Tile", "a,reps", "tile");
    ti_const_ints(t, "pads", "0,1,2,0,0,1");
    tg_node(t, "", "Pad", "a,pads", "pad");
    ti_const_ints(t, "rax", "1");
    tg_node(t, "", "ReduceSum", "a,rax", "rsum");
    /* opset 17: ReduceSum's axes are an input, the others' an attribute */
    n = tg_node(t, "", "ReduceMean", "a", "rmean");
    tg_attr_ints(t, n, "axes", "1");
    tg_attr_int(t, n, "keepdims", 0);
    n = tg_node(t, "", "ReduceMax", "a", "rmax");
    tg_attr_ints(t, n, "axes", "-1");
    n = tg_node(t, "", "ArgMax", "a", "argmax");
    tg_attr_int(t, n, "axis", 1);
    tg_attr_int(t, n, "keepdims", 0);
    n = tg_node(t, "", "Softmax", "a", "softmax");
    tg_attr_int(t, n, "axis", -1);
    tg_node(t, "", "LayerNormalization", "a,sc,sc", "ln");
    tg_node(t, "", "BatchNormalization", "img,ch,ch,ch,ch", "bn");
    n = tg_node(t, "", "Cast", "a", "cast");
    tg_attr_int(t, n, "to", 10);
    tg_node(t, "", "CastLike", "a,lbl", "castlike");
    ti_const_ints(t, "cshape", "3,2");
    tg_node(t, "", "ConstantOfShape", "cshape", "cos");
    ti_const_int(t, "r0", 2);
    ti_const_int(t, "r1", 11);
    ti_const_int(t, "r2", 3);
    tg_node(t, "", "Range", "r0,r1,r2", "range");
    ti_const_ints(t, "k", "2");
    tg_node(t, "", "TopK", "a,k", "topv,topi");
    n = tg_node(t, "", "DepthToSpace", "img", "d2s");
    tg_attr_int(t, n, "blocksize", 2);
    n = tg_node(t, "", "SpaceToDepth", "img", "s2d");
    tg_attr_int(t, n, "blocksize", 3);
    tg_node(t, "", "GlobalMaxPool", "img", "gmp");
    n = tg_node(t, "", "OneHot", "lbl,r1,v", "onehot");
    tg_attr_int(t, n, "axis", -1);
    tg_node(t, "", "Size", "a", "size");
    tg_node(t, "", "Identity", "a", "ident");
    tg_node(t, "", "Dropout", "a", "drop,dmask");
    n = tg_node(t, "", "CumSum", "a,r0", "cumsum");
    tg_node(t, "", "Equal", "a,sc", "eq");
    tg_node(t, "", "Clip", "a", "clip");
    tg_node(t, "", "Gelu", "a", "gelu");
    n = tg_node(t, "", "GatherElements", "lbl,lbl", "ge");
    tg_attr_int(t, n, "axis", 1);
    tg_node(t, "", "Trilu", "m", "trilu");
    tg_node(t, "", "EyeLike", "m", "eye");
    ti r;
    ti_ok(t, NULL, &r);
    ti_expect(&r, "mm", T_FLOAT, "7x2x3x5");
    ti_expect(&r, "gemm", T_FLOAT, "5x5");
    ti_expect(&r, "tr", T_FLOAT, "4x2x3");
    ti_expect(&r, "tr_default", T_FLOAT, "4x3x2");
    ti_expect(&r, "unsq", T_FLOAT, "1x2x3x4x1");
    ti_expect(&r, "sq", T_FLOAT, "2x3x4x1");
    ti_expect(&r, "flat", T_FLOAT, "6x4");
    ti_expect(&r, "sp0", T_FLOAT, "2x3x1");
    ti_expect(&r, "sp1", T_FLOAT, "2x3x3");
    ti_expect(&r, "ex", T_FLOAT, "5x1x4");
    ti_expect(&r, "tile", T_FLOAT, "4x3x12");
    ti_expect(&r, "pad", T_FLOAT, "2x4x7");
    ti_expect(&r, "rsum", T_FLOAT, "2x1x4");
    ti_expect(&r, "rmean", T_FLOAT, "2x4");
    ti_expect(&r, "rmax", T_FLOAT, "2x3x1");
    ti_expect(&r, "argmax", T_INT64, "2x4");
    ti_expect(&r, "softmax", T_FLOAT, "2x3x4");
    ti_expect(&r, "ln", T_FLOAT, "2x3x4");
    ti_expect(&r, "bn", T_FLOAT, "2x8x6x6");
    ti_expect(&r, "cast", 10, "2x3x4");
    ti_expect(&r, "castlike", T_INT64, "2x3x4");
    ti_expect(&r, "cos", T_FLOAT, "3x2");
    /* 2, 5, 8 */
    ti_expect(&r, "range", T_INT64, "3");
    ti_expect_ints(&r, "range", (const int64_t[]){2, 5, 8}, 3);
    ti_expect(&r, "topv", T_FLOAT, "2x3x2");
    ti_expect(&r, "topi", T_INT64, "2x3x2");
    ti_expect(&r, "d2s", T_FLOAT, "2x2x12x12");
    ti_expect(&r, "s2d", T_FLOAT, "2x72x2x2");
    ti_expect(&r, "gmp", T_FLOAT, "2x8x1x1");
    ti_expect(&r, "onehot", T_FLOAT, "2x3x11");
    ti_expect(&r, "size", T_INT64, "");
    ti_expect_ints(&r, "size", (const int64_t[]){24}, 1);
    ti_expect(&r, "ident", T_FLOAT, "2x3x4");
    ti_expect(&r, "drop", T_FLOAT, "2x3x4");
    ti_expect(&r, "dmask", T_BOOL, "2x3x4");
    ti_expect(&r, "cumsum", T_FLOAT, "2x3x4");
    ti_expect(&r, "eq", T_BOOL, "2x3x4");
    ti_expect(&r, "clip", T_FLOAT, "2x3x4");
    ti_expect(&r, "gelu", T_FLOAT, "2x3x4");
    ti_expect(&r, "ge", T_INT64, "2x3");
    ti_expect(&r, "trilu", T_FLOAT, "4x5");
    ti_expect(&r, "eye", T_FLOAT, "4x5");
    ti_free(&r);
    tg_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_broadcast),        cmocka_unit_test(test_reshape),
        cmocka_unit_test(test_shape_chain),      cmocka_unit_test(test_conv_pool),
        cmocka_unit_test(test_negative_indices), cmocka_unit_test(test_symbol_bound),
        cmocka_unit_test(test_if_body_memory),   cmocka_unit_test(test_nonzero_bound),
        cmocka_unit_test(test_op_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
