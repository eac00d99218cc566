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
 *   a device, a FIFO    written directly (renaming over /dev/null as root
 *                       would replace the device node with a plain file);
 *   file mode           0666 & ~umask, as any other tool creates files.
 */
#define _DEFAULT_SOURCE /* realpath */
#include "planner.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Opens path directly for writing (stdout for "-"). */
static int output_open_direct(planner_output *o, const char *path) {
    if (strcmp(path, "-") == 0) {
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
    if (strcmp(path, "-") == 0 || (stat(path, &st) == 0 && !S_ISREG(st.st_mode))) return output_open_direct(o, path);
    /* the file a symlink points to, so that the link survives the rename;
     * a dangling link is written through by fopen */
    struct stat lst;
    char *target = NULL;
    if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) {
        target = realpath(path, NULL);
        if (!target) return output_open_direct(o, path);
    } else if (!(target = strdup(path))) {
        return -1;
    }
    size_t n = strlen(target);
    char *tmp = malloc(n + 16);
    if (!tmp) {
        free(target);
        return -1;
    }
    snprintf(tmp, n + 16, "%s.tmp.XXXXXX", target);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        free(target);
        errno = e;
        return -1;
    }
    /* mkstemp makes the file 0600; an output is an ordinary file */
    mode_t mask = umask(0);
    umask(mask);
    if (fchmod(fd, 0666 & ~mask) != 0 || !(o->f = fdopen(fd, "w"))) {
        int e = errno;
        close(fd);
        unlink(tmp);
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
    }
    free(o->tmp);
    free(o->target);
    memset(o, 0, sizeof *o);
    errno = e;
    return rc;
}
