/* Output files, all or nothing: the one way roamc writes a file.
 *
 * A regular file (or a path that does not exist yet) is written to a
 * temporary file in the same folder and renamed over the target only when
 * every write succeeded, so the target is either the complete new file or
 * untouched.  The rules around that:
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
#define _DEFAULT_SOURCE /* realpath */
#include "planner.h"

#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Standard output, /dev/... and /proc/... (e.g. /dev/stdout, /dev/fd/3):
 * names of something the shell or the system opened, written directly:
 * renaming a temporary over what /dev/stdout resolves to would detach the
 * file the shell redirected into. */
static int output_is_direct_name(const char *path) {
    return strcmp(path, "-") == 0 || strncmp(path, "/dev/", 5) == 0 ||
           strncmp(path, "/proc/", 6) == 0;
}

/* "-", or a name of the file standard output already is (/dev/stdout,
 * /dev/fd/1, or the file the shell redirected into): opening it again
 * would start a second file offset at 0, over what stdout writes. */
static int output_is_stdout(const char *path) {
    if (strcmp(path, "-") == 0) return 1;
    struct stat a, b;
    return stat(path, &a) == 0 && fstat(STDOUT_FILENO, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

/* The temporaries not yet renamed into place or removed: what an
 * interrupted run removes (planner_outputs_abandon, from a signal handler,
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

void planner_outputs_abandon(void) {
    for (size_t i = 0; i < OUTPUT_LIVE_MAX; i++) {
        char *tmp = atomic_load(&output_live[i]);
        if (tmp) unlink(tmp);
    }
}

/* Opens path directly for writing (stdout for "-"). */
static int output_open_direct(planner_output *o, const char *path) {
    if (output_is_stdout(path)) {
        o->f = stdout;
        o->is_stdout = 1;
        return 0;
    }
    o->f = fopen(path, "w");
    return o->f ? 0 : -1;
}

int planner_output_open(planner_output *o, const char *path) {
    memset(o, 0, sizeof *o);
    struct stat st;
    if (output_is_direct_name(path) || output_is_stdout(path) ||
        (stat(path, &st) == 0 && !S_ISREG(st.st_mode)))
        return output_open_direct(o, path);
    /* the file a symlink points to, so that the link survives the rename;
     * a dangling link is written through by fopen */
    struct stat lst;
    char *target = NULL;
    if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) {
        target = realpath(path, NULL);
        if (!target) return output_open_direct(o, path);
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

int planner_output_close(planner_output *o, int ok) {
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

/* ------------------------------------------------------------ output sets */

/* The folder of path ("." for a bare name), in buf. */
static void output_dirname(const char *path, char *buf, size_t len) {
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(buf, len, ".");
    else if (slash == path)
        snprintf(buf, len, "/");
    else
        snprintf(buf, len, "%.*s", (int)(slash - path), path);
}

/* What a path will name once written, to compare outputs with each other:
 * the file's device and inode when it exists (through symlinks), else the
 * real path of its folder and its base name. */
typedef struct output_key {
    int exists;
    dev_t dev;
    ino_t ino;
    char *name; /* when it does not exist: realpath(folder) + "/" + base */
} output_key;

/* Fills k for path; 0, or -1 with a reason in why. */
static int output_key_of(const char *path, output_key *k, char *why, size_t whylen) {
    memset(k, 0, sizeof *k);
    struct stat st;
    if (stat(path, &st) == 0) {
        k->exists = 1, k->dev = st.st_dev, k->ino = st.st_ino;
        if (S_ISDIR(st.st_mode)) return roamc_errorf(why, whylen, "it is a folder");
        if (S_ISREG(st.st_mode) && !output_is_direct_name(path)) {
            /* renamed over: the folder of the file (a symlink's target) must take a new file */
            char *real = realpath(path, NULL), dir[PATH_MAX];
            if (!real) return roamc_errorf(why, whylen, "%s", strerror(errno));
            output_dirname(real, dir, sizeof dir);
            free(real);
            if (access(dir, W_OK | X_OK) != 0)
                return roamc_errorf(why, whylen, "cannot create a file in %s: %s", dir,
                                    strerror(errno));
        } else if (access(path, W_OK) != 0) {
            return roamc_errorf(why, whylen, "%s", strerror(errno));
        }
        return 0;
    }
    if (errno != ENOENT) return roamc_errorf(why, whylen, "%s", strerror(errno));
    /* a new file, or a dangling symlink (fopen creates its target) */
    char link[PATH_MAX], target[2 * PATH_MAX + 2], dir[2 * PATH_MAX + 2];
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n > 0) {
        link[n] = 0;
        if (link[0] != '/') {
            char link_dir[PATH_MAX];
            output_dirname(path, link_dir, sizeof link_dir);
            snprintf(target, sizeof target, "%s/%s", link_dir, link);
        } else {
            snprintf(target, sizeof target, "%s", link);
        }
        path = target;
    }
    output_dirname(path, dir, sizeof dir);
    struct stat dst;
    if (stat(dir, &dst) != 0)
        return roamc_errorf(why, whylen, "folder %s: %s", dir, strerror(errno));
    if (!S_ISDIR(dst.st_mode)) return roamc_errorf(why, whylen, "%s is not a folder", dir);
    if (access(dir, W_OK | X_OK) != 0)
        return roamc_errorf(why, whylen, "cannot create a file in %s: %s", dir, strerror(errno));
    char *real = realpath(dir, NULL);
    if (!real) return roamc_errorf(why, whylen, "folder %s: %s", dir, strerror(errno));
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t len = strlen(real) + strlen(base) + 2;
    k->name = xmalloc(len);
    snprintf(k->name, len, "%s/%s", real, base);
    free(real);
    return 0;
}

static int output_key_same(const output_key *a, const output_key *b) {
    if (a->exists != b->exists) return 0;
    return a->exists ? a->dev == b->dev && a->ino == b->ino : strcmp(a->name, b->name) == 0;
}

int planner_outputs_add(planner_output_set *s, const char *what, const char *path) {
    if (!path) return -1;
    if (s->n == PLANNER_MAX_OUTPUTS) return -1;
    s->slot[s->n] = (planner_output_slot){.what = what, .path = path};
    return (int)s->n++;
}

int planner_outputs_check(const planner_output_set *s, const char *const *inputs, size_t n_inputs,
                          char *err, size_t errlen) {
    output_key keys[PLANNER_MAX_OUTPUTS];
    size_t made = 0;
    int rc = 0, n_stdout = 0;
    char why[2 * PATH_MAX + 256];
    for (size_t i = 0; i < s->n && rc == 0; i++, made++) {
        const planner_output_slot *o = &s->slot[i];
        memset(&keys[i], 0, sizeof keys[i]);
        if (!*o->path) {
            rc = roamc_errorf(err, errlen, "%s: an empty file name", o->what);
            break;
        }
        if (output_is_stdout(o->path)) {
            if (n_stdout++)
                rc = roamc_errorf(err, errlen, "%s %s: only one output can go to standard output",
                                  o->what, o->path);
            continue;
        }
        if (output_key_of(o->path, &keys[i], why, sizeof why)) {
            rc = roamc_errorf(err, errlen, "%s %s: cannot write there: %s", o->what, o->path, why);
            break;
        }
        for (size_t j = 0; j < n_inputs && rc == 0; j++) {
            struct stat in;
            if (inputs[j] && keys[i].exists && stat(inputs[j], &in) == 0 &&
                in.st_dev == keys[i].dev && in.st_ino == keys[i].ino)
                rc = roamc_errorf(err, errlen,
                                  "%s %s: that is the input %s; refusing to overwrite it", o->what,
                                  o->path, inputs[j]);
        }
        for (size_t j = 0; j < i && rc == 0; j++)
            if (!output_is_stdout(s->slot[j].path) && output_key_same(&keys[i], &keys[j]))
                rc = roamc_errorf(err, errlen,
                                  "%s %s and %s %s are the same file: give each output its own",
                                  s->slot[j].what, s->slot[j].path, o->what, o->path);
    }
    for (size_t i = 0; i < made && i < s->n; i++) free(keys[i].name);
    return rc;
}

int planner_outputs_uses_stdout(const planner_output_set *s) {
    for (size_t i = 0; i < s->n; i++)
        if (output_is_stdout(s->slot[i].path)) return 1;
    return 0;
}

/* Drops every open output: temporaries removed, buffers freed. */
static void output_set_abort(planner_output_set *s) {
    for (size_t i = 0; i < s->n; i++) {
        planner_output_slot *o = &s->slot[i];
        if (o->buf_f) fclose(o->buf_f);
        free(o->buf);
        o->buf_f = NULL, o->buf = NULL, o->buf_len = 0;
        if (o->out.f) planner_output_close(&o->out, 0);
        o->f = NULL;
    }
}

int planner_outputs_open(planner_output_set *s, char *err, size_t errlen) {
    for (size_t i = 0; i < s->n; i++) {
        planner_output_slot *o = &s->slot[i];
        struct stat st;
        /* written directly at commit, from memory: a device or FIFO cannot
         * be taken back if another output fails */
        o->direct = output_is_direct_name(o->path) || output_is_stdout(o->path) ||
                    (stat(o->path, &st) == 0 && !S_ISREG(st.st_mode));
        if (o->direct) {
            o->buf_f = open_memstream(&o->buf, &o->buf_len);
            o->f = o->buf_f;
        } else if (planner_output_open(&o->out, o->path) == 0) {
            o->f = o->out.f;
        }
        if (!o->f) {
            int e = errno;
            output_set_abort(s);
            return roamc_errorf(err, errlen, "%s %s: cannot write there: %s", o->what, o->path,
                                strerror(e));
        }
    }
    return 0;
}

/* Writes len bytes of buf to path directly (stdout for "-"); 0 or -1. */
static int output_write_direct(const char *path, const char *buf, size_t len) {
    planner_output d;
    memset(&d, 0, sizeof d);
    if (output_open_direct(&d, path)) return -1;
    int ok = fwrite(buf, 1, len, d.f) == len;
    return planner_output_close(&d, ok);
}

int planner_outputs_commit(planner_output_set *s, int ok, char *err, size_t errlen) {
    if (!ok) {
        output_set_abort(s);
        return -1;
    }
    /* 1. every stream complete: memory buffers closed, temporaries flushed */
    for (size_t i = 0; i < s->n; i++) {
        planner_output_slot *o = &s->slot[i];
        int bad = ferror(o->f) != 0;
        if (o->buf_f) {
            bad |= fclose(o->buf_f) != 0;
            o->buf_f = NULL;
        } else {
            bad |= fflush(o->f) != 0;
        }
        o->f = NULL;
        if (bad) {
            int e = errno;
            output_set_abort(s);
            return roamc_errorf(err, errlen, "%s %s: cannot write: %s", o->what, o->path,
                                e ? strerror(e) : "I/O error");
        }
    }
    /* 2. direct targets, which cannot be taken back, before any rename */
    for (size_t i = 0; i < s->n; i++) {
        planner_output_slot *o = &s->slot[i];
        if (!o->direct) continue;
        if (output_write_direct(o->path, o->buf, o->buf_len)) {
            int e = errno;
            output_set_abort(s);
            return roamc_errorf(err, errlen, "%s %s: cannot write: %s", o->what, o->path,
                                e ? strerror(e) : "I/O error");
        }
        free(o->buf);
        o->buf = NULL;
    }
    /* 3. the temporaries renamed into place */
    int rc = 0;
    for (size_t i = 0; i < s->n; i++) {
        planner_output_slot *o = &s->slot[i];
        if (o->direct || !o->out.f) continue;
        if (planner_output_close(&o->out, rc == 0) && rc == 0) {
            int e = errno;
            rc = roamc_errorf(err, errlen, "%s %s: cannot write: %s", o->what, o->path,
                              e ? strerror(e) : "I/O error");
        }
    }
    return rc;
}
