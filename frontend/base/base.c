/* The helpers of base.h. */
#include "base.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The one place that handles running out of memory (base.h).  _Exit, not
 * exit: another thread may be in the middle of the planner, and atexit
 * handlers or a flush of half-written stdio buffers would run beside it.
 * The message goes out with write(2), which needs no memory. */
static _Noreturn void base_out_of_memory(size_t n, size_t size) {
    char msg[128];
    int k = size == 1 ? snprintf(msg, sizeof msg, "roamc: out of memory (asked for %zu bytes)\n", n)
                      : snprintf(msg, sizeof msg,
                                 "roamc: out of memory (asked for %zu x %zu bytes)\n", n, size);
    if (k > 0) {
        ssize_t w = write(STDERR_FILENO, msg, (size_t)k < sizeof msg ? (size_t)k : sizeof msg - 1);
        (void)w; /* nothing more can be done if stderr is gone */
    }
    _Exit(1);
}

/* n * size, or the out-of-memory exit when it does not fit a size_t. */
static size_t base_array_bytes(size_t n, size_t size) {
    if (size && n > SIZE_MAX / size) base_out_of_memory(n, size);
    return n * size;
}

void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) base_out_of_memory(n, 1);
    return p;
}

void *xcalloc(size_t n, size_t size) {
    (void)base_array_bytes(n, size);
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) base_out_of_memory(n, size);
    return p;
}

void *xmallocarray(size_t n, size_t size) {
    return xmalloc(base_array_bytes(n, size));
}

void *xreallocarray(void *p, size_t n, size_t size) {
    size_t bytes = base_array_bytes(n, size);
    void *q = realloc(p, bytes ? bytes : 1);
    if (!q) base_out_of_memory(n, size);
    return q;
}

char *xstrdup(const char *s) {
    if (!s) s = "";
    size_t n = strlen(s) + 1;
    return memcpy(xmalloc(n), s, n);
}

double roamc_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *roamc_bytes_human(uint64_t b, char *buf, size_t len) {
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024.0 && u < 4) v /= 1024.0, u++;
    if (u == 0)
        snprintf(buf, len, "%llu B", (unsigned long long)b);
    else
        snprintf(buf, len, "%.2f %s", v, unit[u]);
    return buf;
}

int roamc_verrorf(char *err, size_t errlen, const char *prefix, const char *fmt, va_list ap) {
    if (!err || !errlen) return -1;
    int k = prefix ? snprintf(err, errlen, "%s", prefix) : 0;
    if (k < 0) k = 0;
    if ((size_t)k < errlen) vsnprintf(err + k, errlen - (size_t)k, fmt, ap);
    return -1;
}

int roamc_errorf(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    roamc_verrorf(err, errlen, NULL, fmt, ap);
    va_end(ap);
    return -1;
}

_Noreturn void roamc_assert_fail(const char *file, int line, const char *cond) {
    fprintf(stderr, "roamc: internal error: %s:%d: %s\n", file, line, cond);
    exit(1);
}
