/* Unit tests of the cost model (graph/graph_cost.c, planner/fit/): FLOPs
 * and bytes of matmul, conv, conv backward, elementwise, view, in-place and
 * unknown ops on models built in memory, alexnet's forward FLOPs against
 * the hand count, device profiles (lookup by name, profile files good and
 * bad, an op's seconds).
 *
 * Also the measuring driver of graph/COST.md's table:
 *   test_cost --report [--device-profile FILE.json] MODEL.onnx...
 *       per model: ops, kernels, FLOPs (forward and step), bytes, ops per
 *       rule, default-rule op types, and the estimated step seconds on
 *       every built-in device (and FILE's, named "file").
 *   test_cost --devices   the built-in profiles with every source. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base.h"
#include "fit.h"
#include "frontend.h"
#include "graph.h"
#include "testgraph.h"

/* Loads a model built in memory; the tg is freed. */
static void load_tg(tg *t, fe_model *m) {
    size_t len;
    uint8_t *bytes = tg_pack(t, &len);
    char err[1024];
    int rc = fe_load_bytes("cost_test", (fe_bytes){bytes, len}, NULL, m, err, sizeof err);
    free(bytes);
    tg_free(t);
    if (rc) fail_msg("%s", err);
}

static graph_op_cost cost_of_output(const fe_model *m, const char *output) {
    int v = fe_find_value(m, output);
    assert_true(v >= 0);
    assert_true(m->values[v].producer >= 0);
    return graph_op_cost_of(m, m->values[v].producer);
}

static void assert_rule(const graph_op_cost *c, int rule) {
    if (c->rule != rule)
        fail_msg("rule %s, expected %s", graph_cost_rule_name(c->rule), graph_cost_rule_name(rule));
}

static void test_matmul_and_gemm(void **state) {
    (void)state;
    tg *t = tg_new();
    tg_input(t, "x", "4x8");
    tg_initializer(t, "w", "8x16");
    tg_initializer(t, "c", "16");
    tg_initializer(t, "wt", "16x8");
    tg_node(t, "", "MatMul", "x,w", "y");
    tg_node(t, "", "Gemm", "x,w,c", "z");
    tg_input(t, "xb", "3x4x8");
    tg_node(t, "", "MatMul", "xb,w", "yb"); /* batched, broadcast B */
    tg_output(t, "y", "4x16");
    tg_output(t, "z", "4x16");
    tg_output(t, "yb", "3x4x16");
    fe_model m;
    load_tg(t, &m);
    graph_op_cost c = cost_of_output(&m, "y");
    assert_rule(&c, GRAPH_COST_MATMUL);
    assert_true(c.tensor_op);
    assert_int_equal(c.elem_type, 1);
    assert_true(c.flops == 2.0 * 4 * 16 * 8);
    assert_int_equal(c.bytes, (4 * 8 + 8 * 16 + 4 * 16) * 4);
    c = cost_of_output(&m, "z"); /* + the bias add */
    assert_rule(&c, GRAPH_COST_MATMUL);
    assert_true(c.flops == 2.0 * 4 * 16 * 8 + 4 * 16);
    assert_int_equal(c.bytes, (4 * 8 + 8 * 16 + 16 + 4 * 16) * 4);
    c = cost_of_output(&m, "yb");
    assert_true(c.flops == 2.0 * 3 * 4 * 16 * 8);
    fe_free(&m);
}

static void test_conv_onnx(void **state) {
    (void)state;
    tg *t = tg_new();
    tg_input(t, "x", "2x3x8x8");
    tg_initializer(t, "w", "4x3x3x3");
    tg_initializer(t, "b", "4");
    tg_node(t, "", "Conv", "x,w,b", "y"); /* no pads, stride 1: 2x4x6x6 */
    tg_node(t, "", "Conv", "x,w", "y2");
    tg_output(t, "y", "2x4x6x6");
    tg_output(t, "y2", "2x4x6x6");
    fe_model m;
    load_tg(t, &m);
    graph_op_cost c = cost_of_output(&m, "y");
    assert_rule(&c, GRAPH_COST_CONV);
    assert_true(c.tensor_op);
    double out = 2 * 4 * 6 * 6;
    assert_true(c.flops == 2 * out * 3 * 3 * 3 + out);
    assert_int_equal(c.bytes, (2 * 3 * 64 + 4 * 27 + 4 + 2 * 4 * 36) * 4);
    c = cost_of_output(&m, "y2");
    assert_true(c.flops == 2 * out * 27);
    fe_free(&m);
}

/* aten convolution keeps no `groups` or `transposed` in the IR: the weight's
 * shape gives Cin/groups, the channel counts tell a transposed one. */
static void test_conv_aten_groups_transposed_backward(void **state) {
    (void)state;
    tg *t = tg_new();
    tg_input(t, "x", "2x8x10x10");
    tg_initializer(t, "dw", "8x1x3x3"); /* depthwise: groups 8 */
    tg_node(t, "aten", "convolution", "x,dw", "y");
    tg_value(t, "y", "2x8x10x10");
    tg_input(t, "u", "1x4x5x5");
    tg_initializer(t, "tw", "4x2x3x3"); /* transposed: Cin 4 -> Cout 2 */
    tg_node(t, "aten", "convolution", "u,tw", "v");
    tg_value(t, "v", "1x2x7x7");
    tg_input(t, "gy", "2x8x10x10");
    /* output_mask [1, 1, 0]: grad_bias omitted */
    tg_node(t, "aten", "convolution_backward", "gy,x,dw", "gx,gw,");
    tg_value(t, "gx", "2x8x10x10");
    tg_value(t, "gw", "8x1x3x3");
    tg_node(t, "aten", "convolution_backward", "gy,x,dw", ",gw1,gb1");
    tg_value(t, "gw1", "8x1x3x3");
    tg_value(t, "gb1", "8");
    tg_node(t, "aten", "add", "y,gx", "s");
    tg_node(t, "aten", "add", "gw,gw1", "s2");
    tg_output(t, "s", "2x8x10x10");
    tg_output(t, "s2", "8x1x3x3");
    tg_output(t, "v", "1x2x7x7");
    tg_output(t, "gb1", "8");
    fe_model m;
    load_tg(t, &m);
    graph_op_cost c = cost_of_output(&m, "y");
    assert_rule(&c, GRAPH_COST_CONV);
    double macs = 2.0 * 8 * 100 * 9;
    assert_true(c.flops == 2 * macs);
    c = cost_of_output(&m, "v");
    assert_true(c.flops == 2.0 * (4 * 25) * (2 * 9)); /* each input element x Cout/g x k */
    c = cost_of_output(&m, "gx");
    assert_rule(&c, GRAPH_COST_CONV_BACKWARD);
    assert_true(c.flops == 2 * (2 * macs)); /* grad_input and grad_weight */
    c = cost_of_output(&m, "gw1");
    assert_true(c.flops == 2 * macs + 2.0 * 8 * 100); /* grad_weight and grad_bias */
    fe_free(&m);
}

static void test_elementwise_view_inplace_default(void **state) {
    (void)state;
    tg *t = tg_new();
    tg_input(t, "x", "64x64");
    tg_input(t, "b", "64");
    tg_node(t, "", "Relu", "x", "r");
    tg_node(t, "", "Add", "r,b", "a"); /* broadcast: one op per output element */
    tg_node(t, "", "Reshape", "a,shape", "v");
    tg_initializer(t, "shape", "i64:1");
    int ip = tg_node(t, "aten", "mul_", "v,x", "w"); /* in place: reads v and x, writes w */
    tg_alias(t, ip, "0", 1);
    tg_node(t, "aten", "frobnicate", "w", "f"); /* no rule knows it */
    tg_value(t, "r", "64x64");
    tg_value(t, "a", "64x64");
    tg_value(t, "v", "4096");
    tg_value(t, "w", "4096");
    tg_output(t, "f", "2x4096");
    fe_model m;
    load_tg(t, &m);
    const uint64_t full = 64 * 64 * 4;
    graph_op_cost c = cost_of_output(&m, "r");
    assert_rule(&c, GRAPH_COST_ELEMENTWISE);
    assert_false(c.tensor_op);
    assert_true(c.flops == 4096);
    assert_int_equal(c.bytes, 2 * full);
    c = cost_of_output(&m, "a");
    assert_true(c.flops == 4096);
    assert_int_equal(c.bytes, 2 * full + 64 * 4);
    c = cost_of_output(&m, "v");
    assert_rule(&c, GRAPH_COST_VIEW);
    assert_true(c.flops == 0);
    assert_int_equal(c.bytes, 0);
    c = cost_of_output(&m, "w");
    assert_rule(&c, GRAPH_COST_ELEMENTWISE); /* mul_ takes mul's rule */
    assert_int_equal(c.bytes, 3 * full);
    c = cost_of_output(&m, "f");
    assert_rule(&c, GRAPH_COST_DEFAULT);
    assert_true(c.flops == 2 * 4096);
    assert_int_equal(c.bytes, full + 2 * full);
    assert_string_equal(graph_cost_rule_name(GRAPH_COST_DEFAULT), "default");
    assert_string_equal(graph_cost_rule_name(-1), "?");
    assert_string_equal(graph_cost_rule_name(GRAPH_COST_N_RULES), "?");
    fe_free(&m);
}

/* embedding reads the rows it gathers, not the whole table; ones_like reads
 * nothing; empty writes nothing. */
static void test_gather_fill_alloc(void **state) {
    (void)state;
    tg *t = tg_new();
    tg_initializer(t, "table", "1000x16");
    tg_input(t, "ids", "i64:2x5");
    tg_node(t, "aten", "embedding", "table,ids", "e");
    tg_value(t, "e", "2x5x16");
    tg_node(t, "aten", "ones_like", "e", "o");
    tg_value(t, "o", "2x5x16");
    tg_node(t, "aten", "empty", "", "z");
    tg_value(t, "z", "2x5x16");
    tg_node(t, "aten", "add", "e,o", "s");
    tg_node(t, "aten", "add", "s,z", "s2");
    tg_value(t, "s", "2x5x16");
    tg_output(t, "s2", "2x5x16");
    fe_model m;
    load_tg(t, &m);
    graph_op_cost c = cost_of_output(&m, "e");
    assert_rule(&c, GRAPH_COST_GATHER);
    assert_int_equal(c.bytes, 10 * 8 + 160 * 4 + 160 * 4);
    c = cost_of_output(&m, "o");
    assert_rule(&c, GRAPH_COST_FILL);
    assert_int_equal(c.bytes, 160 * 4);
    c = cost_of_output(&m, "z");
    assert_rule(&c, GRAPH_COST_ALLOC);
    assert_int_equal(c.bytes, 0);
    fe_free(&m);
}

/* AlexNet (models/alexnet_b1.onnx): the forward convolutions and linear
 * layers against the hand count of torchvision's alexnet (224x224 input):
 * conv MACs 64*55*55*3*11*11 + 192*27*27*64*5*5 + 384*13*13*192*3*3 +
 * 256*13*13*384*3*3 + 256*13*13*256*3*3 = 655,566,528 and linear MACs
 * 9216*4096 + 4096*4096 + 4096*1000 = 58,621,952. */
static void test_alexnet_forward_flops(void **state) {
    (void)state;
    const char *path = ROAMC_MODELS_DIR "/alexnet_b1.onnx";
    if (access(path, R_OK) != 0) fail_msg("%s is not there (a committed model)", path);
    fe_model m;
    graph g;
    char err[1024];
    if (fe_load(path, NULL, &m, err, sizeof err)) fail_msg("%s", err);
    if (graph_build(&m, 512, &g, err, sizeof err)) fail_msg("%s", err);
    graph_op_cost *c = calloc(g.n_ops, sizeof *c);
    graph_op_costs(&g, c);
    double conv = 0, addmm = 0, conv_bias = 0, linear_bias = 0;
    size_t n_default = 0;
    for (size_t i = 0; i < g.n_ops; i++) {
        const fe_node *n = &m.nodes[i];
        if (c[i].rule == GRAPH_COST_DEFAULT) n_default++;
        if (c[i].rule == GRAPH_COST_CONV) {
            conv += c[i].flops;
            conv_bias += m.values[n->outputs[0]].bytes / 4;
        }
        if (strcmp(n->op_type, "addmm") == 0) {
            addmm += c[i].flops;
            linear_bias += m.values[n->outputs[0]].bytes / 4;
        }
    }
    assert_true(conv == 2 * 655566528.0 + conv_bias);
    assert_true(addmm == 2 * 58621952.0 + linear_bias);
    /* every op of export.py's alexnet step has a rule */
    assert_int_equal(n_default, 0);
    fit_step_cost s;
    fit_step_sum(fit_device_find("h100"), c, g.n_ops, &s);
    assert_int_equal(s.n_ops, g.n_ops);
    assert_int_equal(s.n_default, 0);
    assert_true(s.compute_s > 0 && s.flops > 2 * (conv + addmm)); /* backward ~ 2x forward */
    free(c);
    graph_free(&g);
    fe_free(&m);
}

/* ------------------------------------------------------------ devices */

static void test_device_lookup(void **state) {
    (void)state;
    assert_true(fit_device_count() >= 4);
    const char *names[] = {"h100", "H100", "h100-sxm", "A100",     "a100-80gb",
                           "l4",   "4090", "RTX4090",  "rtx-4090", "gh200"};
    const char *keys[] = {"h100", "h100", "h100", "a100", "a100",
                          "l4",   "4090", "4090", "4090", "gh200"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const fit_device *d = fit_device_find(names[i]);
        assert_non_null(d);
        assert_string_equal(d->key, keys[i]);
    }
    assert_null(fit_device_find("h200"));
    assert_null(fit_device_find(""));
    assert_null(fit_device_builtin(fit_device_count()));
    for (size_t i = 0; i < fit_device_count(); i++) {
        const fit_device *d = fit_device_builtin(i);
        for (int f = 0; f < FIT_N_FIGURES; f++) {
            assert_true(d->figure[f] > 0);
            assert_true(strlen(d->source[f]) > 10);
        }
        /* tensor rates are at least the fp32 rate, 16-bit at least tf32 */
        assert_true(d->figure[FIT_TF32] >= d->figure[FIT_FP32]);
        assert_true(d->figure[FIT_BF16] >= d->figure[FIT_TF32]);
    }
    const fit_device *h = fit_device_find("h100");
    assert_true(h->figure[FIT_MEMORY_BW] == 3350e9);
    assert_true(h->figure[FIT_BF16] == 989.5e12);
}

static void test_op_seconds(void **state) {
    (void)state;
    const fit_device *h = fit_device_find("h100");
    /* a large fp32 matmul: compute-bound, at the fp32 rate (no tf32 for matmul) */
    graph_op_cost mm = {2.0 * 8192 * 8192 * 8192, 3ull * 8192 * 8192 * 4, GRAPH_COST_MATMUL, 1,
                        true};
    assert_true(fit_op_rate(h, &mm) == h->figure[FIT_FP32]);
    assert_true(fit_op_seconds(h, &mm) == mm.flops / 67e12);
    mm.elem_type = 16; /* bf16 */
    assert_true(fit_op_rate(h, &mm) == 989.5e12);
    mm.elem_type = 10; /* fp16 */
    assert_true(fit_op_rate(h, &mm) == h->figure[FIT_FP16]);
    graph_op_cost conv = {1e12, 1e6, GRAPH_COST_CONV, 1, true}; /* fp32 conv: tf32 */
    assert_true(fit_op_rate(h, &conv) == h->figure[FIT_TF32]);
    /* an elementwise op: memory-bound */
    graph_op_cost ew = {1e6, 8000000, GRAPH_COST_ELEMENTWISE, 1, false};
    assert_true(fit_op_seconds(h, &ew) == 8000000 / 3350e9);
    graph_op_cost f64 = {1e9, 8, GRAPH_COST_ELEMENTWISE, 11, false};
    assert_true(fit_op_rate(h, &f64) == h->figure[FIT_FP64]);
    /* a host copy: none on the compute stream, bytes / link on its own */
    graph_op_cost hc = {0, 1000000000, GRAPH_COST_HOST_COPY, 1, false};
    assert_true(fit_op_seconds(h, &hc) == 0);
    assert_true(fit_copy_seconds(h, 1000000000) == 1e9 / 50e9);
    graph_op_cost all[3] = {mm, ew, hc};
    fit_step_cost s;
    fit_step_sum(h, all, 3, &s);
    assert_true(s.compute_s == fit_op_seconds(h, &mm) + fit_op_seconds(h, &ew));
    assert_true(s.copy_s == 0.02);
    assert_int_equal(s.copy_bytes, 1000000000);
    assert_int_equal(s.n_rule[GRAPH_COST_MATMUL], 1);
    assert_int_equal(s.n_kernels, 2); /* the host copy runs no kernel */
    assert_int_equal(s.n_default, 0);
}

#define GOOD_PROFILE                                                                               \
    "{\"name\": \"Test GPU\",\n"                                                                   \
    " \"fp32_tflops\": {\"value\": 10, \"source\": \"sheet A\"},\n"                                \
    " \"tf32_tflops\": {\"value\": 20, \"source\": \"sheet B\"},\n"                                \
    " \"bf16_tflops\": {\"value\": 40, \"source\": \"sheet C\"},\n"                                \
    " \"fp16_tflops\": {\"value\": 40, \"source\": \"sheet C\"},\n"                                \
    " \"fp64_tflops\": {\"value\": 0.5, \"source\": \"sheet D\"},\n"                               \
    " \"memory_gbps\": {\"value\": 500, \"source\": \"sheet E\"},\n"                               \
    " \"host_link_gbps\": {\"value\": 25, \"source\": \"PCIe 4.0 x16\"},\n"                        \
    " \"memory_gib\": {\"value\": 16, \"source\": \"sheet F\"},\n"                                 \
    " \"tf32_matmul\": true}\n"

static char profile_path[256];

static void write_profile(const char *text) {
    FILE *f = fopen(profile_path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Loads text as a profile file, expects failure with every fragment in err. */
static void expect_bad_profile(const char *text, const char *frag1, const char *frag2) {
    write_profile(text);
    fit_device d;
    char err[1024] = "";
    if (fit_device_load(profile_path, &d, err, sizeof err) != -1)
        fail_msg("accepted a bad profile:\n%s", text);
    if (!strstr(err, profile_path) || !strstr(err, frag1) || (frag2 && !strstr(err, frag2)))
        fail_msg("message '%s' lacks the path, '%s' or '%s'", err, frag1, frag2 ? frag2 : "");
}

/* text with the first occurrence of from replaced by to (static buffer). */
static const char *edited(const char *text, const char *from, const char *to) {
    static char buf[4096];
    const char *p = strstr(text, from);
    assert_non_null(p);
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)(p - text), text, to, p + strlen(from));
    return buf;
}

static void test_profile_file(void **state) {
    (void)state;
    snprintf(profile_path, sizeof profile_path, "/tmp/roamc_test_cost_%d.json", (int)getpid());
    write_profile(GOOD_PROFILE);
    fit_device d;
    char err[1024];
    if (fit_device_load(profile_path, &d, err, sizeof err)) fail_msg("%s", err);
    assert_string_equal(d.name, "Test GPU");
    assert_string_equal(d.key, "");
    assert_true(d.figure[FIT_FP32] == 10e12);
    assert_true(d.figure[FIT_MEMORY_BW] == 500e9);
    assert_true(d.figure[FIT_MEMORY] == 16.0 * 1073741824.0);
    assert_string_equal(d.source[FIT_HOST_BW], "PCIe 4.0 x16");
    assert_true(d.tf32_matmul);
    assert_true(d.tf32_conv); /* the default */
    graph_op_cost mm = {40e12, 0, GRAPH_COST_MATMUL, 1, true};
    assert_true(fit_op_seconds(&d, &mm) == 2.0); /* at tf32: the file says so */

    expect_bad_profile(edited(GOOD_PROFILE,
                              " \"memory_gbps\": {\"value\": 500, \"source\": "
                              "\"sheet E\"},\n",
                              ""),
                       "field 'memory_gbps'", "missing");
    expect_bad_profile(edited(GOOD_PROFILE, "\"value\": 20", "\"value\": -3"),
                       "field 'tf32_tflops.value'", "-3");
    expect_bad_profile(edited(GOOD_PROFILE, "\"value\": 20", "\"value\": 0"),
                       "field 'tf32_tflops.value'", "above 0");
    expect_bad_profile(edited(GOOD_PROFILE, "\"value\": 20", "\"value\": \"20\""),
                       "field 'tf32_tflops.value'", "got a string");
    expect_bad_profile(edited(GOOD_PROFILE, ", \"source\": \"sheet A\"", ""),
                       "field 'fp32_tflops.source'", "missing");
    expect_bad_profile(edited(GOOD_PROFILE, "\"sheet A\"", "\"\""), "field 'fp32_tflops.source'",
                       "1 to 255 bytes");
    expect_bad_profile(edited(GOOD_PROFILE,
                              "\"fp64_tflops\": {\"value\": 0.5, \"source\": "
                              "\"sheet D\"}",
                              "\"fp64_tflops\": 0.5"),
                       "field 'fp64_tflops'", "got a number");
    expect_bad_profile(edited(GOOD_PROFILE, "\"tf32_matmul\": true", "\"tf32_matmal\": true"),
                       "field 'tf32_matmal'", "unknown");
    expect_bad_profile(edited(GOOD_PROFILE, "\"tf32_matmul\": true", "\"tf32_matmul\": 1"),
                       "field 'tf32_matmul'", "true or false");
    expect_bad_profile(edited(GOOD_PROFILE, "{\"name\": \"Test GPU\",\n", "{"), "field 'name'",
                       "missing");
    expect_bad_profile(edited(GOOD_PROFILE, "\"Test GPU\"", "7"), "field 'name'",
                       "must be a string");
    expect_bad_profile("this is not json", "not a JSON device profile", "line 1");
    expect_bad_profile("", "not a JSON device profile", NULL);
    expect_bad_profile("[1, 2]", "a JSON object", "an array");
    expect_bad_profile(edited(GOOD_PROFILE, "}\n", ""), "not a JSON device profile", "line");
    unlink(profile_path);
    char missing[300];
    snprintf(missing, sizeof missing, "%s.none", profile_path);
    assert_int_equal(fit_device_load(missing, &d, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot read the device profile"));
    assert_non_null(strstr(err, missing));
}

/* ------------------------------------------------------------ --report */

/* The op types that fell to the default rule, with counts, on one line. */
static void report_defaults(const fe_model *m, const graph_op_cost *c, size_t n) {
    const char **names = calloc(n, sizeof *names);
    size_t *counts = calloc(n, sizeof *counts), k = 0;
    for (size_t i = 0; i < n; i++) {
        if (c[i].rule != GRAPH_COST_DEFAULT) continue;
        size_t j = 0;
        while (j < k && strcmp(names[j], m->nodes[i].op_type)) j++;
        if (j == k) names[k++] = m->nodes[i].op_type;
        counts[j]++;
    }
    printf("  default rule:");
    for (size_t j = 0; j < k; j++) printf(" %s x%zu", names[j], counts[j]);
    printf("%s\n", k ? "" : " none");
    free(names);
    free(counts);
}

static int report(int argc, char **argv) {
    /* --device-profile FILE: that profile too, after the built-in ones */
    fit_device extra;
    bool has_extra = false;
    if (argc >= 2 && strcmp(argv[0], "--device-profile") == 0) {
        char err[1024];
        if (fit_device_load(argv[1], &extra, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 2;
        }
        has_extra = true;
        argc -= 2, argv += 2;
    }
    for (int a = 0; a < argc; a++) {
        fe_model m;
        graph g;
        char err[1024];
        if (fe_load(argv[a], NULL, &m, err, sizeof err) ||
            graph_build(&m, 512, &g, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 2;
        }
        graph_op_cost *c = calloc(g.n_ops, sizeof *c);
        double t0 = roamc_now();
        graph_op_costs(&g, c);
        double t1 = roamc_now();
        /* the forward pass: nodes up to the loss (export.py's order) */
        size_t loss = g.n_ops;
        for (size_t i = 0; i < g.n_ops && loss == g.n_ops; i++)
            if (strstr(m.nodes[i].op_type, "nll_loss_forward") ||
                strstr(m.nodes[i].op_type, "mse_loss"))
                loss = i;
        double fwd = 0;
        for (size_t i = 0; i < loss && i < g.n_ops; i++) fwd += c[i].flops;
        fit_step_cost s;
        fit_step_sum(fit_device_find("h100"), c, g.n_ops, &s);
        printf("%s: %zu ops, costs in %.1f ms\n", argv[a], g.n_ops, (t1 - t0) * 1e3);
        printf("  kernels %zu\n", s.n_kernels);
        printf("  FLOPs: forward %.4g, step %.4g (%.2fx forward); bytes moved %.4g\n", fwd, s.flops,
               fwd > 0 ? s.flops / fwd : 0.0, (double)s.bytes);
        printf("  ops per rule:");
        for (int r = 0; r < GRAPH_COST_N_RULES; r++)
            if (s.n_rule[r]) printf(" %s %zu", graph_cost_rule_name(r), s.n_rule[r]);
        printf("\n");
        report_defaults(&m, c, g.n_ops);
        for (size_t d = 0; d < fit_device_count() + has_extra; d++) {
            const fit_device *dev = d < fit_device_count() ? fit_device_builtin(d) : &extra;
            fit_step_sum(dev, c, g.n_ops, &s);
            printf("  %-5s step %.4f s (matmul %.4f, conv %.4f, conv_backward %.4f, rest %.4f)\n",
                   dev->key[0] ? dev->key : "file", s.compute_s, s.rule_s[GRAPH_COST_MATMUL],
                   s.rule_s[GRAPH_COST_CONV], s.rule_s[GRAPH_COST_CONV_BACKWARD],
                   s.compute_s - s.rule_s[GRAPH_COST_MATMUL] - s.rule_s[GRAPH_COST_CONV] -
                       s.rule_s[GRAPH_COST_CONV_BACKWARD]);
        }
        free(c);
        graph_free(&g);
        fe_free(&m);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--report") == 0) return report(argc - 2, argv + 2);
    if (argc > 1 && strcmp(argv[1], "--devices") == 0) {
        fit_device_list(stdout);
        for (size_t i = 0; i < fit_device_count(); i++)
            fit_device_print(stdout, fit_device_builtin(i), "");
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_and_gemm),
        cmocka_unit_test(test_conv_onnx),
        cmocka_unit_test(test_conv_aten_groups_transposed_backward),
        cmocka_unit_test(test_elementwise_view_inplace_default),
        cmocka_unit_test(test_gather_fill_alloc),
        cmocka_unit_test(test_alexnet_forward_flops),
        cmocka_unit_test(test_device_lookup),
        cmocka_unit_test(test_op_seconds),
        cmocka_unit_test(test_profile_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
