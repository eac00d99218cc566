/* base.h — the few helpers every part of roamc uses, one of each: memory
 * allocation, a clock and an error formatter.
 *
 * They sit in their own library (roamc_base), below the whole pipeline, so
 * that frontend/ and layout/, which do not link the graph IR, can use them
 * too.
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

/* Monotonic seconds since an arbitrary start: for deadlines and timings,
 * never for anything that must be the same on every run. */
double roamc_now(void);

/* Writes a printf-style message into err (errlen bytes; err may be NULL or
 * errlen 0, then nothing is written) and returns -1, so that a failing
 * function can `return roamc_errorf(err, errlen, "...")`. */
int roamc_errorf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* roamc_errorf with a prefix ("model.onnx: "; NULL: none) and a va_list. */
int roamc_verrorf(char *err, size_t errlen, const char *prefix, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

#endif
