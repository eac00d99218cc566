/* frontend/base/base.h: the out-of-memory policy (the x* allocators end the process
 * with exit status 1 and a message on stderr, never return NULL), the
 * zero-size and overflow cases, the error formatter, gcd and xorshift64,
 * and whole files in and out (the read loop's limit, the atomic writer). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

static void test_gcd_and_xorshift(void **state) {
    (void)state;
    assert_int_equal(roamc_gcd(0, 0), 0);
    assert_int_equal(roamc_gcd(0, 512), 512);
    assert_int_equal(roamc_gcd(1536, 0), 1536);
    assert_int_equal(roamc_gcd(1536, 1024), 512);
    assert_int_equal(roamc_gcd(17, 5), 1);
    /* the sequence the layout searches walk from seed 1 (Marsaglia's
     * 13/7/17 triple): it must never change, or plans would */
    uint64_t s = 1;
    assert_true(roamc_xorshift64(&s) == 1082269761ull);
    assert_true(s == 1082269761ull);
    assert_true(roamc_xorshift64(&s) == 1152992998833853505ull);
}

/* A scratch folder for the file tests; removed by the caller. */
static void scratch(char *dir, size_t len) {
    snprintf(dir, len, "/tmp/roamc_test_base_XXXXXX");
    assert_non_null(mkdtemp(dir));
}

static void test_read_all(void **state) {
    (void)state;
    char dir[64], path[128];
    scratch(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/f", dir);
    /* more than the first chunk (64 KiB), so that the buffer grows */
    size_t n = 200000;
    uint8_t *want = xmalloc(n);
    for (size_t i = 0; i < n; i++) want[i] = (uint8_t)(i * 7);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(want, 1, n, f), n);
    fclose(f);
    uint8_t *got;
    size_t len;
    f = fopen(path, "rb");
    assert_int_equal(roamc_read_all(f, (size_t)1 << 30, &got, &len), 0);
    fclose(f);
    assert_int_equal(len, n);
    assert_memory_equal(got, want, n);
    free(got);
    /* over the limit: 1, nothing kept */
    f = fopen(path, "rb");
    assert_int_equal(roamc_read_all(f, 1 << 16, &got, &len), 1);
    fclose(f);
    assert_null(got);
    assert_int_equal(len, 0);
    free(want);
    unlink(path);
    rmdir(dir);
}

static void test_write_file(void **state) {
    (void)state;
    char dir[64], path[128], missing[160];
    scratch(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/out", dir);
    assert_int_equal(roamc_write_file(path, "first", 5), 0);
    assert_int_equal(roamc_write_file(path, "second!", 7), 0);
    FILE *f = fopen(path, "rb");
    char buf[16] = {0};
    assert_int_equal(fread(buf, 1, sizeof buf, f), 7);
    fclose(f);
    assert_string_equal(buf, "second!");
    /* mode 0666 & ~umask, not mkstemp's 0600 */
    mode_t mask = umask(0);
    umask(mask);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0666 & ~mask);
    /* a folder that does not exist: -1, nothing made */
    snprintf(missing, sizeof missing, "%s/no/such", dir);
    assert_int_equal(roamc_write_file(missing, "x", 1), -1);
    /* an output dropped (ok 0) leaves the old file and no temporary */
    roamc_output o;
    assert_int_equal(roamc_output_open(&o, path), 0);
    fputs("half", o.f);
    assert_int_equal(roamc_output_close(&o, 0), -1);
    f = fopen(path, "rb");
    memset(buf, 0, sizeof buf);
    assert_int_equal(fread(buf, 1, sizeof buf, f), 7);
    fclose(f);
    assert_string_equal(buf, "second!");
    unlink(path);
    assert_int_equal(rmdir(dir), 0); /* empty: no temporary left behind */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_out_of_memory_ends_the_process),
        cmocka_unit_test(test_zero_sizes_and_strings),
        cmocka_unit_test(test_error_formatter),
        cmocka_unit_test(test_gcd_and_xorshift),
        cmocka_unit_test(test_read_all),
        cmocka_unit_test(test_write_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
