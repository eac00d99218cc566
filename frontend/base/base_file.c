/* Files in and out, whole: the one read loop for a stream of unknown
 * length and the one atomic writer (base.h).
 *
 * Output files are written all or nothing.  A regular file (or a path that
 * does not exist yet) is written to a temporary file in the same folder and
 * renamed over the target only when every write succeeded, so the target is
 * either the complete new file or untouched.  The rules around that:
 *   "-"                 standard output, written directly;
 *   a symlink           written through: the temporary goes beside the file
 *                       the link points to, which is renamed over, and the
 *                       link stays a link;
 *   a device, a FIFO,   written directly (renaming over /dev/null as root
 *   /dev/..., /proc/... would replace the device node with a plain file, and
 *                       over what /dev/stdout resolves to would detach the
 *                       file the shell redirected into);
 *   file mode           0666 & ~umask, as any other tool creates files.
 */
#define _DEFAULT_SOURCE /* realpath, fchmod, mkstemp */
#include "base.h"

#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int roamc_read_all(FILE *f, size_t max, uint8_t **buf, size_t *len) {
    uint8_t *b = NULL;
    size_t n = 0, cap = 0;
    *buf = NULL, *len = 0;
    for (;;) {
        if (n == cap) {
            if (cap >= max) {
                free(b);
                return 1;
            }
            cap = cap ? 2 * cap : 1 << 16;
            b = xreallocarray(b, cap, 1);
        }
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        int e = errno;
        free(b);
        errno = e;
        return -1;
    }
    *buf = b, *len = n;
    return 0;
}

/* Standard output, /dev/... and /proc/... (e.g. /dev/stdout, /dev/fd/3):
 * names of something the shell or the system opened, written directly:
 * renaming a temporary over what /dev/stdout resolves to would detach the
 * file the shell redirected into. */
int roamc_output_is_direct_name(const char *path) {
    return strcmp(path, "-") == 0 || strncmp(path, "/dev/", 5) == 0 ||
           strncmp(path, "/proc/", 6) == 0;
}

/* "-", or a name of the file standard output already is (/dev/stdout,
 * /dev/fd/1, or the file the shell redirected into): opening it again
 * would start a second file offset at 0, over what stdout writes. */
int roamc_output_is_stdout(const char *path) {
    if (strcmp(path, "-") == 0) return 1;
    struct stat a, b;
    return stat(path, &a) == 0 && fstat(STDOUT_FILENO, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

/* The temporaries not yet renamed into place or removed: what an
 * interrupted run removes (roamc_outputs_abandon, from a signal handler,
 * so lock-free slots).  A path is listed from just after mkstemp until
 * after its rename or unlink; more at once than the slots go unlisted. */
#define OUTPUT_LIVE_MAX 64
static _Atomic(char *) output_live[OUTPUT_LIVE_MAX];

static void output_live_add(char *tmp) {
    for (size_t i = 0; i < OUTPUT_LIVE_MAX; i++) {
        char *none = NULL;
        if (atomic_compare_exchange_strong(&output_live[i], &none, tmp)) return;
    }
}

static void output_live_remove(char *tmp) {
    for (size_t i = 0; i < OUTPUT_LIVE_MAX; i++) {
        char *was = tmp;
        if (atomic_compare_exchange_strong(&output_live[i], &was, NULL)) return;
    }
}

void roamc_outputs_abandon(void) {
    for (size_t i = 0; i < OUTPUT_LIVE_MAX; i++) {
        char *tmp = atomic_load(&output_live[i]);
        if (tmp) unlink(tmp);
    }
}

/* Opens path directly for writing (stdout for "-"). */
int roamc_output_open_direct(roamc_output *o, const char *path) {
    if (roamc_output_is_stdout(path)) {
        o->f = stdout;
        o->is_stdout = 1;
        return 0;
    }
    o->f = fopen(path, "w");
    return o->f ? 0 : -1;
}

int roamc_output_open(roamc_output *o, const char *path) {
    memset(o, 0, sizeof *o);
    struct stat st;
    if (roamc_output_is_direct_name(path) || roamc_output_is_stdout(path) ||
        (stat(path, &st) == 0 && !S_ISREG(st.st_mode)))
        return roamc_output_open_direct(o, path);
    /* the file a symlink points to, so that the link survives the rename;
     * a dangling link is written through by fopen */
    struct stat lst;
    char *target = NULL;
    if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) {
        target = realpath(path, NULL);
        if (!target) return roamc_output_open_direct(o, path);
    } else {
        target = xstrdup(path);
    }
    size_t n = strlen(target);
    char *tmp = xmalloc(n + 16);
    snprintf(tmp, n + 16, "%s.tmp.XXXXXX", target);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        free(target);
        errno = e;
        return -1;
    }
    output_live_add(tmp);
    /* mkstemp makes the file 0600; an output is an ordinary file */
    mode_t mask = umask(0);
    umask(mask);
    if (fchmod(fd, 0666 & ~mask) != 0 || !(o->f = fdopen(fd, "w"))) {
        int e = errno;
        close(fd);
        unlink(tmp);
        output_live_remove(tmp);
        free(tmp);
        free(target);
        errno = e;
        return -1;
    }
    o->tmp = tmp;
    o->target = target;
    return 0;
}

int roamc_output_close(roamc_output *o, int ok) {
    int rc = ok ? 0 : -1;
    if (!o->f) return -1;
    if (ferror(o->f)) rc = -1;
    if (o->is_stdout) {
        if (fflush(o->f) != 0) rc = -1;
    } else if (fclose(o->f) != 0) {
        rc = -1;
    }
    int e = errno;
    if (o->tmp) {
        if (rc == 0 && rename(o->tmp, o->target) != 0) {
            e = errno;
            rc = -1;
        }
        if (rc != 0) unlink(o->tmp);
        output_live_remove(o->tmp); /* after the rename or unlink: never a moment unlisted */
    }
    free(o->tmp);
    free(o->target);
    memset(o, 0, sizeof *o);
    errno = e;
    return rc;
}

int roamc_write_file(const char *path, const void *bytes, size_t len) {
    roamc_output o;
    if (roamc_output_open(&o, path)) return -1;
    int ok = fwrite(bytes, 1, len, o.f) == len;
    return roamc_output_close(&o, ok);
}
