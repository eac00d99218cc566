/* frontend/base/base.h: the out-of-memory policy (the x* allocators end the process
 * with exit status 1 and a message on stderr, never return NULL), the
 * zero-size and overflow cases, and the error formatter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "base.h"

typedef void (*alloc_case)(void);

static void ask_too_much(void) {
    /* no machine has 2^62 bytes: malloc fails (under ASan too, with
     * allocator_may_return_null=1, which ctest sets for this test) */
    volatile size_t n = (size_t)1 << 62;
    free(xmalloc(n));
}
static void ask_overflowing_array(void) {
    free(xmallocarray(SIZE_MAX / 2, 4));
}
static void ask_overflowing_calloc(void) {
    free(xcalloc(SIZE_MAX / 8, 16));
}
static void ask_overflowing_realloc(void) {
    free(xreallocarray(NULL, SIZE_MAX / 3, 5));
}

/* Runs c in a child with stderr into a pipe; returns its exit status (or
 * 128 + signal) and what it wrote in msg. */
static int run_child(alloc_case c, char *msg, size_t len) {
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], STDERR_FILENO);
        c();
        _exit(0); /* not reached when the policy holds */
    }
    close(fd[1]);
    size_t got = 0;
    ssize_t k;
    while (got + 1 < len && (k = read(fd[0], msg + got, len - 1 - got)) > 0) got += (size_t)k;
    msg[got] = 0;
    close(fd[0]);
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void test_out_of_memory_ends_the_process(void **state) {
    (void)state;
    const alloc_case cases[] = {ask_too_much, ask_overflowing_array, ask_overflowing_calloc,
                                ask_overflowing_realloc};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char msg[256];
        int rc = run_child(cases[i], msg, sizeof msg);
        if (rc != 1 || !strstr(msg, "roamc: out of memory (asked for "))
            fail_msg("case %zu: exit %d, stderr \"%s\"", i, rc, msg);
    }
}

static void test_zero_sizes_and_strings(void **state) {
    (void)state;
    void *p = xmalloc(0), *q = xcalloc(0, 8), *r = xmallocarray(0, 8);
    assert_non_null(p);
    assert_non_null(q);
    assert_non_null(r);
    r = xreallocarray(r, 0, 8);
    assert_non_null(r);
    unsigned char *z = xcalloc(16, 4);
    for (size_t i = 0; i < 64; i++) assert_int_equal(z[i], 0);
    char *s = xstrdup("abc"), *e = xstrdup(NULL);
    assert_string_equal(s, "abc");
    assert_string_equal(e, "");
    free(p);
    free(q);
    free(r);
    free(z);
    free(s);
    free(e);
}

static int prefixed(char *err, size_t len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = roamc_verrorf(err, len, "model.onnx: ", fmt, ap);
    va_end(ap);
    return rc;
}

static void test_error_formatter(void **state) {
    (void)state;
    char err[32];
    assert_int_equal(roamc_errorf(err, sizeof err, "bad %s at %d", "dim", 3), -1);
    assert_string_equal(err, "bad dim at 3");
    assert_int_equal(prefixed(err, sizeof err, "node %d", 7), -1);
    assert_string_equal(err, "model.onnx: node 7");
    /* truncated, still terminated */
    assert_int_equal(roamc_errorf(err, 8, "%s", "a long message"), -1);
    assert_string_equal(err, "a long ");
    /* no buffer: only the return */
    assert_int_equal(roamc_errorf(NULL, 0, "x"), -1);
    double t0 = roamc_now(), t1 = roamc_now();
    assert_true(t1 >= t0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_out_of_memory_ends_the_process),
        cmocka_unit_test(test_zero_sizes_and_strings),
        cmocka_unit_test(test_error_formatter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
