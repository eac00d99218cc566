/* Unit tests of frontend/: loading ONNX bytes built in memory (tests/models.c)
 * into values and nodes (byte sizes per element type, unused outputs), bad
 * models refused with the file's name and the reason, and truncated, random
 * and bit-flipped bytes that never crash the loader.  What graph/ builds
 * from a loaded model is test_graph.c's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frontend.h"
#include "models.h"

/* Loads the valid test model called name into m (fails the test on an error). */
static void fe_test_load(const char *name, fe_model *m) {
    tg *t = test_model_build(name);
    if (!t) fail_msg("no test model %s", name);
    size_t len;
    uint8_t *bytes = tg_pack(t, &len);
    char err[1024];
    if (fe_load_bytes(name, (fe_bytes){bytes, len}, NULL, m, err, sizeof err)) fail_msg("%s", err);
    free(bytes);
    tg_free(t);
}

static void test_dtype_sizes(void **state) {
    (void)state;
    fe_model m;
    fe_test_load("dtypes", &m);
    struct {
        const char *name;
        uint64_t bytes;
    } want[] = {{"a", 2000}, {"b", 8000},  {"c", 501},  {"d", 160},
                {"s", 4},    {"b8", 1000}, {"dbf", 40}, {"out", 24168}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        assert_int_equal(m.values[fe_find_value(&m, want[i].name)].bytes, want[i].bytes);
    fe_free(&m);
}

static void test_multiout_unused_output(void **state) {
    (void)state;
    fe_model m;
    fe_test_load("multiout", &m);
    int vals = fe_find_value(&m, "vals");
    assert_true(vals >= 0);
    int topk = m.values[vals].producer;
    assert_int_equal(m.nodes[topk].n_outputs, 2);
    assert_int_equal(m.nodes[topk].outputs[1], -1); /* the unused indices output */
    fe_free(&m);
}

/* Each bad model the loader refuses: its message starts with the file and
 * holds the reason.  The ones it loads are refused by graph_build
 * (test_graph.c's test_bad_models_rejected_by_the_graph): together, every
 * bad model is refused. */
static void test_bad_models_rejected_with_names(void **state) {
    (void)state;
    int refused = 0;
    for (const test_bad_model *b = test_models_bad; b->name; b++) {
        tg *t = b->build();
        size_t len;
        uint8_t *bytes = tg_pack(t, &len);
        fe_model m;
        char err[1024] = "";
        if (fe_load_bytes(b->name, (fe_bytes){bytes, len}, NULL, &m, err, sizeof err) == 0) {
            fe_free(&m);
        } else {
            refused++;
            if (!strstr(err, b->message))
                fail_msg("%s: message lacks \"%s\": %s", b->name, b->message, err);
            if (strncmp(err, b->name, strlen(b->name)) != 0)
                fail_msg("%s: message does not start with the file: %s", b->name, err);
        }
        free(bytes);
        tg_free(t);
    }
    assert_true(refused > 0);
}

/* Every prefix of a real model, random bytes and a real model with flipped
 * bytes: loaded or refused, never a crash; most prefixes are refused.  (The
 * same bytes through graph_build: test_graph.c.) */
static void test_truncated_and_random_bytes(void **state) {
    (void)state;
    tg *t = test_model_build("training");
    size_t len;
    uint8_t *bytes = tg_pack(t, &len);
    fe_model m;
    char err[512];
    size_t rejected = 0;
    for (size_t cut = 0; cut < len; cut += 7) {
        if (fe_load_bytes("cut", (fe_bytes){bytes, cut}, NULL, &m, err, sizeof err) == 0)
            fe_free(&m);
        else
            rejected++;
    }
    assert_true(rejected > len / 7 / 2);
    srand(12345);
    for (int trial = 0; trial < 200; trial++) {
        size_t n = (size_t)(rand() % 4096) + 1;
        uint8_t *junk = malloc(n);
        for (size_t i = 0; i < n; i++) junk[i] = (uint8_t)rand();
        if (fe_load_bytes("junk", (fe_bytes){junk, n}, NULL, &m, err, sizeof err) == 0) fe_free(&m);
        uint8_t *flipped = malloc(len);
        memcpy(flipped, bytes, len);
        for (int k = 0; k < 4; k++) flipped[(size_t)rand() % len] ^= (uint8_t)(1 + rand() % 255);
        if (fe_load_bytes("flipped", (fe_bytes){flipped, len}, NULL, &m, err, sizeof err) == 0)
            fe_free(&m);
        free(junk);
        free(flipped);
    }
    free(bytes);
    tg_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_sizes),
        cmocka_unit_test(test_multiout_unused_output),
        cmocka_unit_test(test_bad_models_rejected_with_names),
        cmocka_unit_test(test_truncated_and_random_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
