/* `roamc check` on plans that only running them would otherwise show wrong
 * (issue 16): schedules that break the mutation order of a storage through
 * a view (made before the write, and after it), and plans made for another
 * model or for the same file sized by other bindings.  Each plan with a
 * broken schedule is also given to shared/tools/check_plan.py, which must
 * reject it too (it ignores the digests: plans with them must still pass).
 *
 * usage: test_check ROAMC CHECK_PLAN_PY WORKDIR
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "clirun.h"
#include "digest.h"
#include "frontend.h"
#include "testgraph.h"

/* A weight written in place twice (an optimizer's two updates), read by a
 * matmul through a view made before the first write (t(w), as a backward
 * mm reads a forward weight) and by one through a view made after it:
 *   0 wt = t(w)   1 y = mm(x, wt)   2 w2 = add_(w, c)
 *   3 v = t(w2)   4 z = mm(x, v)    5 w3 = mul_(w2, c)
 * Data edges alone allow 2 before 1 and 5 before 4. */
static tg *m_mutation(void) {
    tg *t = tg_new();
    tg_input(t, "w", "64x64");
    tg_input(t, "c", "64x64");
    tg_input(t, "x", "32x64");
    tg_alias(t, tg_node(t, "aten", "t", "w", "wt"), "0", 0);
    tg_node(t, "aten", "mm", "x,wt", "y");
    tg_alias(t, tg_node(t, "aten", "add_", "w,c", "w2"), "0", 1);
    tg_alias(t, tg_node(t, "aten", "t", "w2", "v"), "0", 0);
    tg_node(t, "aten", "mm", "x,v", "z");
    tg_alias(t, tg_node(t, "aten", "mul_", "w2,c", "w3"), "0", 1);
    tg_value(t, "wt", "64x64");
    tg_value(t, "w2", "64x64");
    tg_value(t, "v", "64x64");
    tg_value(t, "w3", "64x64");
    tg_output(t, "y", "32x64");
    tg_output(t, "z", "32x64");
    return t;
}

static void write_tg(tg *t, const char *path) {
    assert_int_equal(tg_write(t, path), 0);
    tg_free(t);
}

/* plan_src with its schedule replaced by sched[0..n), written to out. */
static void with_schedule(const char *plan_src, const int *sched, size_t n, const char *out) {
    json_error_t je;
    json_t *plan = json_load_file(plan_src, 0, &je);
    assert_non_null(plan);
    json_t *s = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(s, json_integer(sched[i]));
    json_object_set_new(plan, "schedule", s);
    assert_int_equal(json_dump_file(plan, out, JSON_COMPACT), 0);
    json_decref(plan);
}

/* Both checkers reject `plan` (exit 1); roamc's message holds each of
 * the fragments (NULL-terminated). */
static void expect_rejected(const char *tag, const char *model, const char *plan,
                            const char *const *fragments) {
    char *argv[] = {(char *)roamc_bin, "check", (char *)model, (char *)plan, NULL};
    int rc = run(tag, argv);
    if (rc != 1) {
        char *o = output_of(tag, "stdout");
        fail_msg("%s: roamc check exited %d, want 1:\n%s", tag, rc, o);
    }
    for (size_t i = 0; fragments[i]; i++) expect_output(tag, fragments[i]);
    if (have_check_py) {
        char pytag[256];
        snprintf(pytag, sizeof pytag, "%s_py", tag);
        char *py[] = {"/usr/bin/python3", (char *)check_py, (char *)model, (char *)plan, NULL};
        rc = run(pytag, py);
        if (rc != 1) fail_msg("%s: check_plan.py exited %d, want 1", tag, rc);
    }
}

static void test_mutation_order_through_views(void **state) {
    (void)state;
    const char *model = path_in_work("mutation.onnx"), *ok = path_in_work("mutation_ok.json");
    write_tg(m_mutation(), model);
    char *plan[] = {(char *)roamc_bin, (char *)model, "--order", "program", "-q", "-o",
                    (char *)ok,        NULL};
    assert_int_equal(run("mutation_plan", plan), 0);
    char *check[] = {(char *)roamc_bin, "check", (char *)model, (char *)ok, NULL};
    assert_int_equal(run("mutation_ok", check), 0);
    /* roamc's own orders keep the mutation order */
    const char *orders[] = {"roam", "lescea", "ilp"};
    for (size_t i = 0; i < 3; i++) {
        const char *p = path_in_work("mutation_order.json");
        char *pl[] = {(char *)roamc_bin, (char *)model, "--order", (char *)orders[i], "-q", "-o",
                      (char *)p,         NULL};
        assert_int_equal(run("mutation_plan2", pl), 0);
        char *ck[] = {(char *)roamc_bin, "check", (char *)model, (char *)p, NULL};
        if (run("mutation_check2", ck) != 0) fail_msg("--order %s: plan rejected", orders[i]);
    }

    /* the first write before the mm that reads w through the view made before it */
    const int before[] = {0, 2, 1, 3, 4, 5};
    const char *bad1 = path_in_work("mutation_view_before.json");
    with_schedule(ok, before, 6, bad1);
    const char *f1[] = {
        "node 2 (add_) overwrites 'w' in place at step 1, before node 1 (mm) reads that storage "
        "through the view 'wt' at step 2",
        NULL};
    expect_rejected("view_before", model, bad1, f1);

    /* the second write before the mm that reads through the view made after the first */
    const int after[] = {0, 1, 2, 3, 5, 4};
    const char *bad2 = path_in_work("mutation_view_after.json");
    with_schedule(ok, after, 6, bad2);
    const char *f2[] = {
        "node 5 (mul_) overwrites 'w2' in place at step 4, before node 4 (mm) reads that storage "
        "through the view 'v' at step 5",
        NULL};
    expect_rejected("view_after", model, bad2, f2);
}

/* FIPS 180-4 / NIST example vectors, and the padding edges around 55/56/64 bytes. */
static void test_sha256_vectors(void **state) {
    (void)state;
    struct {
        const char *msg;
        size_t repeat;
        const char *hex;
    } v[] = {
        {"", 1, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", 1, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 1,
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrl"
         "mnopqrsmnopqrst"
         "nopqrstu",
         1, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
        {"a", 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
        {"a", 55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
        {"a", 56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
        {"a", 64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        size_t len = strlen(v[i].msg) * v[i].repeat;
        char *buf = malloc(len + 1);
        for (size_t r = 0; r < v[i].repeat; r++)
            memcpy(buf + r * strlen(v[i].msg), v[i].msg, strlen(v[i].msg));
        uint8_t d[32];
        char hex[65];
        fe_sha256(buf, len, d);
        fe_hex(d, 32, hex);
        if (strcmp(hex, v[i].hex) != 0) fail_msg("vector %zu: %s, want %s", i, hex, v[i].hex);
        free(buf);
    }
}

static const char *plan_string(const char *plan, const char *key, char *buf, size_t len) {
    json_error_t je;
    json_t *p = json_load_file(plan, 0, &je);
    assert_non_null(p);
    json_t *v = json_object_get(p, key);
    snprintf(buf, len, "%s", json_is_string(v) ? json_string_value(v) : "");
    json_decref(p);
    return buf;
}

/* plan_src with `key` set to `value` (NULL: removed), written to out. */
static void with_field(const char *plan_src, const char *key, const char *value, const char *out) {
    json_error_t je;
    json_t *plan = json_load_file(plan_src, 0, &je);
    assert_non_null(plan);
    if (value)
        json_object_set_new(plan, key, json_string(value));
    else
        json_object_del(plan, key);
    assert_int_equal(json_dump_file(plan, out, JSON_COMPACT), 0);
    json_decref(plan);
}

/* A plan names its model: the SHA-256 of the file (what sha256sum prints)
 * and of the sizes; check refuses it for another file, and for the same
 * file sized by other bindings, but not for the same sizes spelled by
 * other flags; a plan without the fields gets a note and the other checks. */
static void test_plan_names_its_model(void **state) {
    (void)state;
    const char *model = path_in_work("mutation.onnx"), *plan = path_in_work("digest.json");
    write_tg(m_mutation(), model);
    char *mk[] = {(char *)roamc_bin, (char *)model, "-q", "-o", (char *)plan, NULL};
    assert_int_equal(run("digest_plan", mk), 0);
    /* model_sha256 is the file's SHA-256 */
    FILE *f = fopen(model, "rb");
    assert_non_null(f);
    uint8_t bytes[1 << 16];
    size_t n = fread(bytes, 1, sizeof bytes, f);
    fclose(f);
    uint8_t d[32];
    char hex[65], got[128];
    fe_sha256(bytes, n, d);
    fe_hex(d, 32, hex);
    assert_string_equal(plan_string(plan, "model_sha256", got, sizeof got), hex);
    assert_int_equal(strlen(plan_string(plan, "sizes_sha256", got, sizeof got)), 64);

    /* another model (the same graph with one more output) */
    const char *other = path_in_work("mutation_other.onnx");
    tg *t = m_mutation();
    tg_output(t, "w3", "64x64");
    write_tg(t, other);
    char *ck[] = {(char *)roamc_bin, "check", (char *)other, (char *)plan, NULL};
    assert_int_equal(run("digest_other", ck), 1);
    expect_output("digest_other", "the plan was made for another model: it names '");
    expect_output("digest_other", "mutation_other.onnx has SHA-256");

    /* a malformed digest */
    const char *bad = path_in_work("digest_bad.json");
    with_field(plan, "model_sha256", "xyz", bad);
    char *ckb[] = {(char *)roamc_bin, "check", (char *)model, (char *)bad, NULL};
    assert_int_equal(run("digest_bad", ckb), 1);
    expect_output("digest_bad", "model_sha256 must be 64 lowercase hex digits");

    /* no digest: a note, then the other checks (here: valid) */
    const char *old = path_in_work("digest_none.json"), *old2 = path_in_work("digest_none2.json");
    with_field(plan, "model_sha256", NULL, old2);
    with_field(old2, "sizes_sha256", NULL, old);
    char *cko[] = {(char *)roamc_bin, "check", (char *)model, (char *)old, NULL};
    assert_int_equal(run("digest_none", cko), 0);
    expect_output("digest_none",
                  "records no model_sha256 (written by an older roamc or another tool)");
    expect_output("digest_none", "VALID");

    /* check_plan.py ignores the new fields */
    if (have_check_py) {
        char *py[] = {"/usr/bin/python3", (char *)check_py, (char *)model, (char *)plan, NULL};
        if (run("digest_py", py) != 0) fail_msg("check_plan.py rejects a plan with digests");
    }

    /* sizes: a symbolic batch bound two ways gives one plan; another batch is refused */
    const char *sym = path_in_work("digest_symbolic.onnx"), *p5 = path_in_work("digest_n5.json");
    t = tg_new();
    tg_input(t, "x", "?x256"); /* dim 0 is the symbol N */
    tg_node(t, "", "Relu", "x", "h");
    tg_output(t, "h", "none");
    write_tg(t, sym);
    char *b5[] = {(char *)roamc_bin, (char *)sym, "--dim", "N=5", "-q", "-o", (char *)p5, NULL};
    assert_int_equal(run("digest_n5", b5), 0);
    char *c5[] = {(char *)roamc_bin, "check",   (char *)sym, (char *)p5,
                  "--input-shape",   "x=5,256", NULL};
    assert_int_equal(run("digest_c5", c5), 0);
    char *c6[] = {(char *)roamc_bin, "check", (char *)sym, (char *)p5, "--dim", "N=6", NULL};
    assert_int_equal(run("digest_c6", c6), 1);
    expect_output("digest_c6", "sized otherwise (other --input-shape/--dim bindings)");
    expect_output("digest_c6", "(input symbols: N=6)");

#ifdef ROAMC_MODELS_DIR
    /* the case: alexnet_b32's plan against alexnet_b1 */
    const char *b32 = ROAMC_MODELS_DIR "/alexnet_b32.onnx",
               *b1 = ROAMC_MODELS_DIR "/alexnet_b1.onnx";
    if (access(b32, R_OK) == 0 && access(b1, R_OK) == 0) {
        const char *p32 = path_in_work("alexnet_b32.json");
        char *m32[] = {(char *)roamc_bin, (char *)b32, "--order", "program",   "--layout",
                       "bestfit",         "-q",        "-o",      (char *)p32, NULL};
        assert_int_equal(run("alexnet_b32", m32), 0);
        char *c1[] = {(char *)roamc_bin, "check", (char *)b1, (char *)p32, NULL};
        assert_int_equal(run("alexnet_b32_vs_b1", c1), 1);
        expect_output("alexnet_b32_vs_b1", "the plan was made for another model: it names '");
        expect_output("alexnet_b32_vs_b1", "alexnet_b32.onnx'");
    } else {
        print_message("SKIP: alexnet_b1/b32 not in %s\n", ROAMC_MODELS_DIR);
    }
#endif
}

/* plan_src made a version 2 plan: stream[] per step, waits[0 .. 2*nw) as
 * pairs, and (when set) the buffer holding tensor `moved` put at the offset
 * of the one holding `onto`; written to out. */
static void as_v2(const char *plan_src, const int *stream, size_t n, const int *waits, size_t nw,
                  const char *moved, const char *onto, const char *out) {
    json_error_t je;
    json_t *plan = json_load_file(plan_src, 0, &je);
    assert_non_null(plan);
    json_object_set_new(plan, "version", json_integer(2));
    json_t *st = json_array(), *decl = json_array(), *w = json_array();
    int most = 0;
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(st, json_integer(stream[i]));
        if (stream[i] > most) most = stream[i];
    }
    for (int i = 0; i <= most; i++)
        json_array_append_new(decl,
                              json_pack("{s:i,s:s}", "id", i, "kind", i ? "comm" : "compute"));
    for (size_t k = 0; k < nw; k++)
        json_array_append_new(w, json_pack("[i,i]", waits[2 * k], waits[2 * k + 1]));
    json_object_set_new(plan, "stream", st);
    json_object_set_new(plan, "streams", decl);
    json_object_set_new(plan, "waits", w);
    json_t *to = NULL, *from = NULL, *bufs = json_object_get(plan, "buffers");
    for (size_t b = 0; moved && b < json_array_size(bufs); b++) {
        json_t *B = json_array_get(bufs, b), *tens = json_object_get(B, "tensors");
        for (size_t k = 0; k < json_array_size(tens); k++) {
            const char *name = json_string_value(json_array_get(tens, k));
            if (strcmp(name, moved) == 0) from = B;
            if (strcmp(name, onto) == 0) to = B;
        }
    }
    if (moved) {
        assert_non_null(from);
        assert_non_null(to);
        json_object_set(from, "offset", json_object_get(to, "offset"));
        /* the arena may have grown: the peak the buffers give */
        json_int_t top = 0;
        for (size_t b = 0; b < json_array_size(bufs); b++) {
            json_t *B = json_array_get(bufs, b);
            json_int_t e = json_integer_value(json_object_get(B, "offset")) +
                           json_integer_value(json_object_get(B, "size"));
            if (e > top) top = e;
        }
        json_object_set_new(json_object_get(plan, "peak"), "actual", json_integer(top));
    }
    assert_int_equal(json_dump_file(plan, out, JSON_COMPACT), 0);
    json_decref(plan);
}

/* Both checkers accept `plan`. */
static void expect_valid(const char *tag, const char *model, const char *plan) {
    char *argv[] = {(char *)roamc_bin, "check", (char *)model, (char *)plan, NULL};
    if (run(tag, argv) != 0)
        fail_msg("%s: roamc check rejects:\n%s", tag, output_of(tag, "stdout"));
    if (have_check_py) {
        char pytag[256];
        snprintf(pytag, sizeof pytag, "%s_py", tag);
        char *py[] = {"/usr/bin/python3", (char *)check_py, (char *)model, (char *)plan, NULL};
        if (run(pytag, py) != 0)
            fail_msg("%s: check_plan.py rejects:\n%s", tag, output_of(pytag, "stdout"));
    }
}

/* Version 2 plans (DESIGN.md "Several streams"): the mm reading the weight
 * through t(w) moved to stream 1 needs a wait for its input and one before
 * the in-place write that follows it in the file; a wait removed is
 * INVALID for both checkers. */
static void test_streams_waits(void **state) {
    (void)state;
    const char *model = path_in_work("streams_mut.onnx"), *ok = path_in_work("streams_mut.json");
    write_tg(m_mutation(), model);
    char *plan[] = {(char *)roamc_bin, (char *)model, "--order", "program", "-q", "-o",
                    (char *)ok,        NULL};
    assert_int_equal(run("streams_plan", plan), 0);
    const int stream[] = {0, 1, 0, 0, 0, 0};
    const int waits[] = {0, 1, 1, 2};
    const char *v2 = path_in_work("streams_v2.json");
    as_v2(ok, stream, 6, waits, 2, NULL, NULL, v2);
    expect_valid("streams_v2_ok", model, v2);
    /* the wait before the write removed */
    const char *bad = path_in_work("streams_v2_nowrite.json");
    as_v2(ok, stream, 6, waits, 1, NULL, NULL, bad);
    const char *f1[] = {"node 2 (add_) overwrites 'w' in place at step 2, before node 1 (mm)",
                        "(streams 1 and 0: no wait orders them)", NULL};
    expect_rejected("streams_v2_nowrite", model, bad, f1);
    /* the wait for the input removed */
    as_v2(ok, stream, 6, waits + 2, 1, NULL, NULL, bad);
    const char *f2[] = {"node 1 (step 1) reads 'wt' before its producer runs (streams 0 and 1",
                        NULL};
    expect_rejected("streams_v2_noread", model, bad, f2);
    /* version 1 with streams, a wait against the schedule */
    as_v2(ok, stream, 6, waits, 2, NULL, NULL, bad);
    json_error_t je;
    json_t *p = json_load_file(bad, 0, &je);
    json_object_set_new(p, "version", json_integer(1));
    assert_int_equal(json_dump_file(p, bad, JSON_COMPACT), 0);
    json_decref(p);
    const char *f3[] = {"streams and waits need version 2", NULL};
    expect_rejected("streams_v1", model, bad, f3);
    const int backwards[] = {2, 1};
    as_v2(ok, stream, 6, backwards, 1, NULL, NULL, bad);
    const char *f4[] = {"wait [2, 1]: node 2 does not come before node 1 in the schedule", NULL};
    expect_rejected("streams_backwards", model, bad, f4);
}

/* x -> relu -> a; a -> neg -> b (stream 1); a -> sigmoid -> c -> tanh -> d:
 * d put at a's address after a's last step is fine on one stream, but neg
 * still reads a on stream 1 unless tanh waits for it (the memory rule). */
static void test_streams_memory_rule(void **state) {
    (void)state;
    tg *t = tg_new();
    tg_input(t, "x", "64x64");
    tg_node(t, "", "Relu", "x", "a");
    tg_node(t, "", "Neg", "a", "b");
    tg_node(t, "", "Sigmoid", "a", "c");
    tg_node(t, "", "Tanh", "c", "d");
    tg_value(t, "a", "64x64");
    tg_value(t, "c", "64x64");
    tg_output(t, "b", "64x64");
    tg_output(t, "d", "64x64");
    const char *model = path_in_work("streams_mem.onnx"), *ok = path_in_work("streams_mem.json");
    write_tg(t, model);
    char *plan[] = {(char *)roamc_bin, (char *)model, "--order", "program", "-q", "-o",
                    (char *)ok,        NULL};
    assert_int_equal(run("streams_mem_plan", plan), 0);
    const int stream[] = {0, 1, 0, 0};
    const int waits[] = {0, 1, 1, 3};
    const char *v2 = path_in_work("streams_mem_v2.json");
    as_v2(ok, stream, 4, waits, 2, "d", "a", v2);
    expect_valid("streams_mem_ok", model, v2);
    as_v2(ok, stream, 4, waits, 1, "d", "a", v2);
    const char *f[] = {"share addresses, but node 1 (stream 1, touching",
                       "is not ordered before node 3 (stream 0", NULL};
    expect_rejected("streams_mem_nowait", model, v2, f);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mutation_order_through_views), cmocka_unit_test(test_sha256_vectors),
        cmocka_unit_test(test_plan_names_its_model),         cmocka_unit_test(test_streams_waits),
        cmocka_unit_test(test_streams_memory_rule),
    };
    return clirun_main(argc, argv, "test_check", tests, sizeof tests / sizeof tests[0]);
}
