/* base.h — the few helpers every part of roamc uses, one of each: memory
 * allocation, a clock and an error formatter.
 *
 * They sit in their own library (roamc_base, frontend/base/), the floor
 * under the whole pipeline: every part may include this header, and it
 * includes nothing of roamc.
 *
 * Out-of-memory policy: the x* allocators never return NULL.  When the
 * system has no memory left they print "roamc: out of memory" with the
 * size asked for on stderr and end the process with exit status 1 (roamc
 * failed), as ggml's allocator asserts: no caller checks, no caller can
 * forget to.  Sizes that come from the *input* (a shape, a count in a
 * file) are still checked against limits by the caller before it
 * allocates, and bad input still gets an error return with the file and
 * the place: the abort is only for a machine that is out of memory. */
#ifndef ROAMC_BASE_H
#define ROAMC_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* malloc(n), never NULL; n == 0 gives a valid pointer to free. */
void *xmalloc(size_t n);
/* calloc(n, size), never NULL; also ends the process when n * size
 * overflows (a caller bug or an unchecked input size). */
void *xcalloc(size_t n, size_t size);
/* malloc(n * size) unzeroed, with the same overflow check. */
void *xmallocarray(size_t n, size_t size);
/* realloc(p, n * size), never NULL, with the same overflow check; p may be
 * NULL. */
void *xreallocarray(void *p, size_t n, size_t size);
/* strdup(s), never NULL; s NULL gives "". */
char *xstrdup(const char *s);

/* An invariant that holds whatever the input: on failure, prints
 * "roamc: internal error: FILE:LINE: COND" on stderr and ends the process
 * with exit status 1 (roamc failed), in every build type, as ggml's
 * GGML_ASSERT.  For roamc's own bugs only; bad input is an error return.
 * Example: ROAMC_ASSERT(offset % align == 0); */
#define ROAMC_ASSERT(cond) ((cond) ? (void)0 : roamc_assert_fail(__FILE__, __LINE__, #cond))
_Noreturn void roamc_assert_fail(const char *file, int line, const char *cond);

/* Monotonic seconds since an arbitrary start: for deadlines and timings,
 * never for anything that must be the same on every run. */
double roamc_now(void);

/* Human-readable bytes into buf: "512 B", "987.25 MiB", "1.22 GiB" (B, KiB,
 * MiB, GiB or TiB with 2 decimals).  Returns buf. */
const char *roamc_bytes_human(uint64_t b, char *buf, size_t len);

/* Writes a printf-style message into err (errlen bytes; err may be NULL or
 * errlen 0, then nothing is written) and returns -1, so that a failing
 * function can `return roamc_errorf(err, errlen, "...")`. */
int roamc_errorf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* roamc_errorf with a prefix ("model.onnx: "; NULL: none) and a va_list. */
int roamc_verrorf(char *err, size_t errlen, const char *prefix, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

#endif
