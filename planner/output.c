/* Output sets: all the files one command writes, checked before any work
 * and committed together (planner.h), each through base.h's atomic writer
 * (roamc_output, frontend/base/base_file.c).
 */
#define _DEFAULT_SOURCE /* realpath */
#include "planner.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
        if (S_ISREG(st.st_mode) && !roamc_output_is_direct_name(path)) {
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
        if (roamc_output_is_stdout(o->path)) {
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
            if (!roamc_output_is_stdout(s->slot[j].path) && output_key_same(&keys[i], &keys[j]))
                rc = roamc_errorf(err, errlen,
                                  "%s %s and %s %s are the same file: give each output its own",
                                  s->slot[j].what, s->slot[j].path, o->what, o->path);
    }
    for (size_t i = 0; i < made && i < s->n; i++) free(keys[i].name);
    return rc;
}

int planner_outputs_uses_stdout(const planner_output_set *s) {
    for (size_t i = 0; i < s->n; i++)
        if (roamc_output_is_stdout(s->slot[i].path)) return 1;
    return 0;
}

/* Drops every open output: temporaries removed, buffers freed. */
static void output_set_abort(planner_output_set *s) {
    for (size_t i = 0; i < s->n; i++) {
        planner_output_slot *o = &s->slot[i];
        if (o->buf_f) fclose(o->buf_f);
        free(o->buf);
        o->buf_f = NULL, o->buf = NULL, o->buf_len = 0;
        if (o->out.f) roamc_output_close(&o->out, 0);
        o->f = NULL;
    }
}

int planner_outputs_open(planner_output_set *s, char *err, size_t errlen) {
    for (size_t i = 0; i < s->n; i++) {
        planner_output_slot *o = &s->slot[i];
        struct stat st;
        /* written directly at commit, from memory: a device or FIFO cannot
         * be taken back if another output fails */
        o->direct = roamc_output_is_direct_name(o->path) || roamc_output_is_stdout(o->path) ||
                    (stat(o->path, &st) == 0 && !S_ISREG(st.st_mode));
        if (o->direct) {
            o->buf_f = open_memstream(&o->buf, &o->buf_len);
            o->f = o->buf_f;
        } else if (roamc_output_open(&o->out, o->path) == 0) {
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
    roamc_output d;
    memset(&d, 0, sizeof d);
    if (roamc_output_open_direct(&d, path)) return -1;
    int ok = fwrite(buf, 1, len, d.f) == len;
    return roamc_output_close(&d, ok);
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
        if (roamc_output_close(&o->out, rc == 0) && rc == 0) {
            int e = errno;
            rc = roamc_errorf(err, errlen, "%s %s: cannot write: %s", o->what, o->path,
                              e ? strerror(e) : "I/O error");
        }
    }
    return rc;
}
