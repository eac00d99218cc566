/* base.h — the few helpers every part of roamc uses, one of each: memory
 * allocation, a clock, an error formatter, two small pieces of arithmetic
 * (gcd, a reproducible random sequence) and whole files in and out.
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
#include <stdio.h>

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

/* The greatest common divisor of a and b; gcd(a, 0) is a. */
static inline uint64_t roamc_gcd(uint64_t a, uint64_t b) {
    while (b) {
        uint64_t t = a % b;
        a = b, b = t;
    }
    return a;
}

/* xorshift64 (Marsaglia): the next number of the sequence *state walks
 * (state must not start at 0).  Searches that draw from it from a fixed
 * seed make the same moves on every machine, so their plans are too.
 * Inline: the local searches draw it in their innermost loops. */
static inline uint64_t roamc_xorshift64(uint64_t *state) {
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

/* ------------------------------------------------- files (base_file.c) */

/* Reads f to its end into a new buffer: 0 with *buf (the caller frees it)
 * and *len; 1 when f holds more than max bytes; -1 on a read error with
 * errno set.  Nothing is kept on 1 or -1; f stays open. */
int roamc_read_all(FILE *f, size_t max, uint8_t **buf, size_t *len);

/* An output file written all or nothing, the one way roamc writes a file:
 * regular files through a temporary beside the target (mode 0666 & ~umask)
 * renamed over it at the end; symlinks written through; "-" is stdout;
 * devices and FIFOs are written directly. */
typedef struct roamc_output {
    FILE *f;      /* write here */
    char *tmp;    /* the temporary file, or NULL when written directly */
    char *target; /* what the temporary is renamed over (symlinks resolved) */
    int is_stdout;
} roamc_output;
/* Opens path for writing.  Returns 0, or -1 with errno set. */
int roamc_output_open(roamc_output *o, const char *path);
/* Opens path for writing in place, no temporary (stdout for "-" or a name
 * of the file stdout already is).  Returns 0, or -1 with errno set. */
int roamc_output_open_direct(roamc_output *o, const char *path);
/* Finishes the file: when ok and every write succeeded, the temporary is
 * renamed over the target; otherwise it is removed and the target is left
 * as it was.  Returns 0 when path now holds the complete file, else -1
 * with errno set (0 for a write that failed earlier with ok == 0). */
int roamc_output_close(roamc_output *o, int ok);
/* Removes every temporary an open output still has (not yet renamed into
 * place): for a run interrupted by a signal, so that it leaves no partial
 * file.  Async-signal-safe. */
void roamc_outputs_abandon(void);
/* "-", /dev/... or /proc/...: a name of something the shell or the system
 * opened, written directly, never through a temporary renamed over it. */
int roamc_output_is_direct_name(const char *path);
/* "-", or a name of the file standard output already is. */
int roamc_output_is_stdout(const char *path);
/* len bytes into path, all or nothing (roamc_output).  Returns 0, or -1
 * with errno set and path as it was. */
int roamc_write_file(const char *path, const void *bytes, size_t len);

#endif
