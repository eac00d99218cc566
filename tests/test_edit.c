/* Unit tests of frontend/edit.h, the training-step editor: a step derived by
 * fe_train from a small forward graph (tests/testgraph.c) is opened, written
 * back unchanged (every node and value kept, the same bytes), and edited as
 * recompute and offload plans will edit it (a clone with roamc_recompute, an
 * ai.roamc Offload/Reload pair, inputs rewired, value_info, metadata), then
 * read back with fe_load.  Bad edits and files with weight data fail with a
 * message and change nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "edit.h"
#include "frontend.h"
#include "onnx.pb-c.h"
#include "testgraph.h"

typedef struct step {
    char dir[64];
    uint8_t *bytes; /* the derived training step */
    size_t len;
} step;

/* x [4, 8] -> Gemm(w, b) -> h [4, 16] -> Relu -> y [4, 16]: the forward
 * graph, as a tg (the caller frees it). */
static tg *forward_graph(void) {
    tg *t = tg_new();
    tg_input(t, "x", "4x8");
    tg_initializer(t, "w", "8x16");
    tg_initializer(t, "b", "16");
    tg_node(t, "", "Gemm", "x,w,b", "h");
    tg_node(t, "", "Relu", "h", "y");
    tg_value(t, "h", "4x16");
    tg_output(t, "y", "4x16");
    return t;
}

/* The training step fe_train derives from forward_graph (cross-entropy, Adam). */
static int setup_step(void **state) {
    step *s = calloc(1, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "/tmp/roamc_test_edit_XXXXXX");
    if (!mkdtemp(s->dir)) return -1;
    char path[128];
    snprintf(path, sizeof path, "%s/fwd.onnx", s->dir);
    tg *t = forward_graph();
    int rc = tg_write(t, path);
    tg_free(t);
    if (rc) return -1;
    fe_options opt = {0};
    fe_train_options to = {0};
    fe_train_result r;
    char err[1024];
    if (fe_train(path, &opt, &to, &r, err, sizeof err)) {
        fprintf(stderr, "fe_train: %s\n", err);
        return -1;
    }
    fe_free(&r.model);
    free(r.summary);
    s->bytes = r.derived, s->len = r.derived_len;
    *state = s;
    return 0;
}

static int teardown_step(void **state) {
    step *s = *state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->dir);
    if (system(cmd) != 0) return -1;
    free(s->bytes);
    free(s);
    return 0;
}

static void load_bytes(const uint8_t *bytes, size_t len, fe_model *m) {
    char err[1024];
    if (fe_load_bytes("step", (fe_bytes){bytes, len}, NULL, m, err, sizeof err))
        fail_msg("%s", err);
}

static long node_of_op(fe_edit *e, const char *op_type) {
    fe_edit_node_info n;
    for (size_t i = 0; fe_edit_node(e, i, &n); i++)
        if (!strcmp(n.op_type, op_type)) return (long)i;
    fail_msg("no %s node", op_type);
    return -1;
}

/* The slot of node i that reads value, or -1. */
static long slot_of(fe_edit *e, long i, const char *value) {
    fe_edit_node_info n;
    assert_true(fe_edit_node(e, (size_t)i, &n));
    for (size_t k = 0; k < n.n_inputs; k++)
        if (!strcmp(n.inputs[k], value)) return (long)k;
    return -1;
}

static void assert_same_dims(const fe_model *m, const char *a, const char *b) {
    int va = fe_find_value(m, a), vb = fe_find_value(m, b);
    assert_true(va >= 0 && vb >= 0);
    assert_int_equal(m->values[va].rank, m->values[vb].rank);
    assert_int_equal(m->values[va].elem_type, m->values[vb].elem_type);
    for (int d = 0; d < m->values[va].rank; d++)
        assert_int_equal(m->values[va].dims[d].value, m->values[vb].dims[d].value);
}

/* Open and write with no edit: the same bytes, every node and value kept. */
static void test_round_trip_keeps_everything(void **state) {
    step *s = *state;
    fe_edit *e;
    char err[1024];
    if (fe_edit_open_bytes("step", s->bytes, s->len, &e, err, sizeof err)) fail_msg("%s", err);
    uint8_t *out;
    size_t len;
    fe_edit_bytes(e, &out, &len);
    fe_edit_free(e);
    assert_int_equal(len, s->len);
    assert_memory_equal(out, s->bytes, len);
    fe_model a, b;
    load_bytes(s->bytes, s->len, &a);
    load_bytes(out, len, &b);
    assert_int_equal(a.n_nodes, b.n_nodes);
    assert_int_equal(a.n_values, b.n_values);
    assert_true(a.n_nodes > 10); /* forward, loss, backward, Adam */
    for (size_t i = 0; i < a.n_nodes; i++) {
        assert_string_equal(a.nodes[i].op_type, b.nodes[i].op_type);
        assert_string_equal(a.nodes[i].domain, b.nodes[i].domain);
        assert_int_equal(a.nodes[i].n_inputs, b.nodes[i].n_inputs);
        for (size_t k = 0; k < a.nodes[i].n_inputs; k++)
            assert_int_equal(a.nodes[i].inputs[k], b.nodes[i].inputs[k]);
        for (size_t k = 0; k < a.nodes[i].n_outputs; k++)
            assert_int_equal(a.nodes[i].alias[k], b.nodes[i].alias[k]);
    }
    for (size_t v = 0; v < a.n_values; v++) {
        assert_string_equal(a.values[v].name, b.values[v].name);
        assert_int_equal(a.values[v].bytes, b.values[v].bytes);
        assert_int_equal(a.values[v].kind, b.values[v].kind);
    }
    assert_int_equal(a.n_meta, b.n_meta);
    fe_free(&a);
    fe_free(&b);
    free(out);
}

/* A recompute clone of Relu and an Offload/Reload pair of h, written to a
 * file and loaded: the nodes where they were put, their shapes, the
 * attribute, the rewired inputs and the metadata. */
static void test_recompute_and_offload(void **state) {
    step *s = *state;
    fe_edit *e;
    char err[1024];
    if (fe_edit_open_bytes("step", s->bytes, s->len, &e, err, sizeof err)) fail_msg("%s", err);
    size_t n0 = fe_edit_node_count(e);
    assert_int_equal(fe_edit_find_producer(e, "h"), 0);
    assert_int_equal(fe_edit_find_producer(e, "y"), 1);
    long tb = node_of_op(e, "threshold_backward"); /* Relu's backward reads y */
    long tb_slot = slot_of(e, tb, "y");
    assert_true(tb > 1 && tb_slot >= 0);
    int64_t hd[2] = {4, 16};
    /* Offload(h) right after Gemm; Reload before the first backward reader */
    const char *const h_in[] = {"h"}, *const host[] = {"h_host"}, *const dev[] = {"h_dev"};
    fe_attr_spec bytes_attr = {.name = "bytes", .type = FE_ATTR_INT, .i = 4 * 16 * 4};
    fe_node_spec off = {.domain = "ai.roamc",
                        .op_type = "Offload",
                        .name = "offload_h",
                        .inputs = h_in,
                        .n_inputs = 1,
                        .outputs = host,
                        .n_outputs = 1,
                        .attrs = &bytes_attr,
                        .n_attrs = 1};
    assert_int_equal(fe_edit_insert_node(e, 1, &off, err, sizeof err), 0);
    tb++; /* everything at 1 or after moved one place on */
    fe_node_spec rel = {.domain = "ai.roamc",
                        .op_type = "Reload",
                        .name = "reload_h",
                        .inputs = host,
                        .n_inputs = 1,
                        .outputs = dev,
                        .n_outputs = 1};
    assert_int_equal(fe_edit_insert_node(e, (size_t)tb, &rel, err, sizeof err), 0);
    tb++;
    /* the clone of Relu (node 2 now) after the Reload, reading h_dev */
    const char *const yrc[] = {"y_rc"};
    fe_clone_spec cl = {.node = 2,
                        .position = (size_t)tb,
                        .name = "relu_recompute",
                        .outputs = yrc,
                        .n_outputs = 1,
                        .extra = {.name = "roamc_recompute", .type = FE_ATTR_STRING, .s = "y"}};
    if (fe_edit_clone_node(e, &cl, err, sizeof err)) fail_msg("%s", err);
    long clone = tb++;
    assert_int_equal(fe_edit_replace_input(e, (size_t)clone, 0, "h_dev", err, sizeof err), 0);
    assert_int_equal(fe_edit_replace_input(e, (size_t)tb, (size_t)tb_slot, "y_rc", err, sizeof err),
                     0);
    const char *names[] = {"h_host", "h_dev", "y_rc"};
    for (size_t k = 0; k < 3; k++) {
        fe_value_spec v = {.name = names[k], .elem_type = 1, .rank = 2, .dims = hd};
        assert_int_equal(fe_edit_add_value_info(e, &v, err, sizeof err), 0);
        assert_int_equal(fe_edit_add_value_info(e, &v, err, sizeof err), 0); /* replaced */
    }
    fe_value_spec out = {.name = "h_host", .elem_type = 1, .rank = 2, .dims = hd};
    assert_int_equal(fe_edit_set_output(e, &out, err, sizeof err), 0);
    assert_string_equal(fe_edit_meta(e, "roamc.optimizer"), "adam");
    fe_edit_set_meta(e, "roamc.plan", "recompute y, offload h");
    fe_edit_set_meta(e, "roamc.optimizer", "adam (edited)");
    assert_int_equal(fe_edit_node_count(e), n0 + 3);

    char path[128];
    snprintf(path, sizeof path, "%s/edited.onnx", s->dir);
    if (fe_edit_write(e, path, err, sizeof err)) fail_msg("%s", err);
    fe_edit_free(e);

    fe_model m;
    if (fe_load(path, NULL, &m, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(m.n_nodes, n0 + 3);
    assert_string_equal(m.nodes[1].op_type, "Offload");
    assert_string_equal(m.nodes[1].domain, "ai.roamc");
    assert_string_equal(m.nodes[clone - 1].op_type, "Reload");
    assert_string_equal(m.nodes[clone].op_type, "Relu");
    assert_int_equal(m.nodes[clone].inputs[0], fe_find_value(&m, "h_dev"));
    assert_int_equal(m.nodes[tb].inputs[tb_slot], fe_find_value(&m, "y_rc"));
    assert_int_equal(m.values[fe_find_value(&m, "y_rc")].producer, clone);
    assert_same_dims(&m, "h_host", "h");
    assert_same_dims(&m, "h_dev", "h");
    assert_same_dims(&m, "y_rc", "y");
    assert_true(m.values[fe_find_value(&m, "h_host")].kind & FE_GRAPH_OUTPUT);
    assert_string_equal(fe_meta(&m, "roamc.plan"), "recompute y, offload h");
    assert_string_equal(fe_meta(&m, "roamc.optimizer"), "adam (edited)");
    assert_non_null(fe_meta(&m, "roamc.loss"));
    fe_free(&m);

    /* the attribute, read back by the editor */
    if (fe_edit_open(path, &e, err, sizeof err)) fail_msg("%s", err);
    assert_string_equal(fe_edit_node_attr_string(e, (size_t)clone, "roamc_recompute"), "y");
    assert_null(fe_edit_node_attr_string(e, 2, "roamc_recompute"));
    assert_int_equal(fe_edit_find_node(e, "offload_h"), 1);
    assert_int_equal(fe_edit_find_node(e, "relu_recompute"), clone);
    fe_edit_free(e);
}

/* A node inserted and removed again, its output undeclared: the step loads
 * as it was (same nodes, no trace of the value), the name may be made
 * again; a removal out of range fails and changes nothing; a graph input
 * removed while a node still reads it makes a file fe_load refuses. */
static void test_remove_node_and_value(void **state) {
    step *s = *state;
    fe_edit *e;
    char err[1024];
    if (fe_edit_open_bytes("step", s->bytes, s->len, &e, err, sizeof err)) fail_msg("%s", err);
    size_t n0 = fe_edit_node_count(e);
    int64_t hd[2] = {4, 16};
    const char *const h_in[] = {"h"}, *const host[] = {"h_host"};
    fe_node_spec off = {.domain = "ai.roamc",
                        .op_type = "Offload",
                        .inputs = h_in,
                        .n_inputs = 1,
                        .outputs = host,
                        .n_outputs = 1};
    assert_int_equal(fe_edit_insert_node(e, 1, &off, err, sizeof err), 0);
    fe_value_spec v = {.name = "h_host", .elem_type = 1, .rank = 2, .dims = hd};
    assert_int_equal(fe_edit_add_value_info(e, &v, err, sizeof err), 0);
    assert_int_equal(fe_edit_set_output(e, &v, err, sizeof err), 0);
    assert_int_equal(fe_edit_remove_node(e, n0 + 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "past the"));
    assert_int_equal(fe_edit_node_count(e), n0 + 1);
    assert_int_equal(fe_edit_remove_node(e, 1, err, sizeof err), 0);
    fe_edit_remove_value(e, "h_host");
    fe_edit_remove_value(e, "no_such_value"); /* nothing there is fine */
    assert_int_equal(fe_edit_node_count(e), n0);
    assert_int_equal(fe_edit_find_producer(e, "h_host"), -1);
    assert_int_equal(fe_edit_find_producer(e, "y"), 1);
    uint8_t *bytes;
    size_t len;
    fe_edit_bytes(e, &bytes, &len);
    fe_model m;
    if (fe_load_bytes("removed", (fe_bytes){bytes, len}, NULL, &m, err, sizeof err))
        fail_msg("%s", err);
    free(bytes);
    assert_int_equal(m.n_nodes, n0);
    assert_int_equal(fe_find_value(&m, "h_host"), -1);
    fe_free(&m);
    /* the name is free again */
    assert_int_equal(fe_edit_insert_node(e, 1, &off, err, sizeof err), 0);
    assert_int_equal(fe_edit_remove_node(e, 1, err, sizeof err), 0);
    /* a graph input still read: the file no longer loads */
    fe_edit_remove_value(e, "w");
    fe_edit_bytes(e, &bytes, &len);
    assert_int_equal(fe_load_bytes("no_w", (fe_bytes){bytes, len}, NULL, &m, err, sizeof err), -1);
    free(bytes);
    fe_edit_free(e);
}

/* A step models/export.py wrote (the committed zoo): written back unchanged
 * and loaded the same, its metadata read. */
static void test_export_file_round_trip(void **state) {
    (void)state;
    const char *path = ROAMC_MODELS_DIR "/alexnet_b1.onnx";
    fe_edit *e;
    char err[1024];
    if (fe_edit_open(path, &e, err, sizeof err)) fail_msg("%s", err);
    assert_non_null(fe_edit_meta(e, "roamc.parameters"));
    uint8_t *out;
    size_t len;
    fe_edit_bytes(e, &out, &len);
    fe_model a, b;
    if (fe_load(path, NULL, &a, err, sizeof err)) fail_msg("%s", err);
    load_bytes(out, len, &b);
    assert_int_equal(fe_edit_node_count(e), a.n_nodes);
    assert_int_equal(a.n_nodes, b.n_nodes);
    assert_int_equal(a.n_values, b.n_values);
    for (size_t v = 0; v < a.n_values; v++) {
        assert_string_equal(a.values[v].name, b.values[v].name);
        assert_int_equal(a.values[v].bytes, b.values[v].bytes);
    }
    assert_memory_equal(a.sha256, b.sha256, 32); /* the same bytes */
    fe_free(&a);
    fe_free(&b);
    free(out);
    fe_edit_free(e);
}

/* Bad edits fail with a message and leave the model as it was. */
static void test_bad_edits_refused(void **state) {
    step *s = *state;
    fe_edit *e;
    char err[1024];
    if (fe_edit_open_bytes("step", s->bytes, s->len, &e, err, sizeof err)) fail_msg("%s", err);
    size_t n0 = fe_edit_node_count(e);
    const char *const in[] = {"h"}, *const y[] = {"y"}, *const fresh[] = {"z"};
    fe_node_spec made = {
        .op_type = "Relu", .inputs = in, .n_inputs = 1, .outputs = y, .n_outputs = 1};
    assert_int_equal(fe_edit_insert_node(e, 0, &made, err, sizeof err), -1);
    assert_non_null(strstr(err, "'y' is made already"));
    fe_node_spec ok = {
        .op_type = "Relu", .inputs = in, .n_inputs = 1, .outputs = fresh, .n_outputs = 1};
    assert_int_equal(fe_edit_insert_node(e, n0 + 1, &ok, err, sizeof err), -1);
    assert_non_null(strstr(err, "past the"));
    fe_node_spec noop = {.inputs = in, .n_inputs = 1, .outputs = fresh, .n_outputs = 1};
    assert_int_equal(fe_edit_insert_node(e, 0, &noop, err, sizeof err), -1);
    fe_clone_spec two = {.node = 1, .position = 2, .outputs = y, .n_outputs = 2};
    assert_int_equal(fe_edit_clone_node(e, &two, err, sizeof err), -1);
    assert_non_null(strstr(err, "needs 1 outputs"));
    assert_int_equal(fe_edit_replace_input(e, 1, 5, "h", err, sizeof err), -1);
    assert_non_null(strstr(err, "no input 5"));
    assert_int_equal(fe_edit_replace_input(e, n0, 0, "h", err, sizeof err), -1);
    int64_t neg = -3;
    fe_value_spec bad = {.name = "q", .elem_type = 1, .rank = 1, .dims = &neg};
    assert_int_equal(fe_edit_add_value_info(e, &bad, err, sizeof err), -1);
    assert_int_equal(fe_edit_node_count(e), n0);
    uint8_t *out;
    size_t len;
    fe_edit_bytes(e, &out, &len);
    assert_int_equal(len, s->len);
    assert_memory_equal(out, s->bytes, len);
    free(out);
    fe_edit_free(e);
}

/* A file with a weight payload over 64 KiB, and bytes that are no model. */
static void test_weights_and_garbage_refused(void **state) {
    (void)state;
    tg *t = forward_graph();
    size_t len;
    uint8_t *bytes = tg_pack(t, &len);
    tg_free(t);
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, len, bytes);
    assert_non_null(mp);
    size_t big = (size_t)80 << 10; /* 80 KiB of weight data */
    uint8_t *w = calloc(1, big);
    Onnx__TensorProto *init = mp->graph->initializer[0];
    init->has_raw_data = 1;
    init->raw_data.len = big;
    init->raw_data.data = w;
    size_t wl = onnx__model_proto__get_packed_size(mp);
    uint8_t *wb = malloc(wl);
    onnx__model_proto__pack(mp, wb);
    init->has_raw_data = 0, init->raw_data.len = 0, init->raw_data.data = NULL;
    onnx__model_proto__free_unpacked(mp, NULL);
    free(w);
    fe_edit *e;
    char err[1024];
    assert_int_equal(fe_edit_open_bytes("weights.onnx", wb, wl, &e, err, sizeof err), -1);
    assert_null(e);
    assert_non_null(
        strstr(err, "weights.onnx: edit: 1 tensor payloads are larger than the 64 KiB"));
    /* the same graph without the payload opens */
    assert_int_equal(fe_edit_open_bytes("fwd.onnx", bytes, len, &e, err, sizeof err), 0);
    fe_edit_free(e);
    assert_int_equal(
        fe_edit_open_bytes("junk", (const uint8_t *)"not a model", 11, &e, err, sizeof err), -1);
    assert_non_null(strstr(err, "junk: edit: not an ONNX ModelProto"));
    assert_int_equal(fe_edit_open("/nonexistent/step.onnx", &e, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot open"));
    free(wb);
    free(bytes);
}

/* fe_edit_write goes through base.h's one atomic writer: a symlink stays a
 * link (the file it points to is replaced; before, the link itself was
 * renamed over), and a write that cannot happen fails with a message. */
static void test_write_is_atomic(void **state) {
    step *s = *state;
    fe_edit *e;
    char err[1024], real[160], link[160], bad[160];
    if (fe_edit_open_bytes("step", s->bytes, s->len, &e, err, sizeof err)) fail_msg("%s", err);
    snprintf(real, sizeof real, "%s/real.onnx", s->dir);
    snprintf(link, sizeof link, "%s/link.onnx", s->dir);
    FILE *f = fopen(real, "wb");
    assert_non_null(f);
    fputs("old", f);
    fclose(f);
    assert_int_equal(symlink("real.onnx", link), 0);
    if (fe_edit_write(e, link, err, sizeof err)) fail_msg("%s", err);
    struct stat st;
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(stat(real, &st), 0);
    assert_int_equal((size_t)st.st_size, s->len);
    snprintf(bad, sizeof bad, "%s/no/such.onnx", s->dir);
    assert_int_equal(fe_edit_write(e, bad, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot write"));
    fe_edit_free(e);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_keeps_everything),
        cmocka_unit_test(test_recompute_and_offload),
        cmocka_unit_test(test_bad_edits_refused),
        cmocka_unit_test(test_remove_node_and_value),
        cmocka_unit_test(test_export_file_round_trip),
        cmocka_unit_test(test_weights_and_garbage_refused),
        cmocka_unit_test(test_write_is_atomic),
    };
    return cmocka_run_group_tests(tests, setup_step, teardown_step);
}
