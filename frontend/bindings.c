/* The caller's shape bindings: --input-shape and --dim parsed (bindings.h). */
#include "bindings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

/* Parses a dim: a decimal integer from 0 to 2^62. */
static int fe_parse_dim(const char *s, size_t len, int64_t *out) {
    if (len == 0 || len > 19) return -1;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v > ((int64_t)1 << 62)) return -1;
    *out = v;
    return 0;
}

/* Splits NAME=REST at the last '=', else at the last ':'. */
static const char *fe_split_binding(const char *spec) {
    const char *eq = strrchr(spec, '=');
    return eq ? eq : strrchr(spec, ':');
}

int fe_options_parse(fe_options *o, const char *flag, const char *spec, char *err, size_t errlen) {
    const char *sep = fe_split_binding(spec);
    bool dim = strcmp(flag, "--dim") == 0;
    if (!sep || sep == spec || (dim && !sep[1])) {
        snprintf(err, errlen, "%s wants %s, not '%s'", flag,
                 dim ? "SYMBOL=VALUE" : "NAME=D1,D2,...", spec);
        return -1;
    }
    size_t name_len = (size_t)(sep - spec);
    char *name = xmalloc(name_len + 1);
    memcpy(name, spec, name_len);
    name[name_len] = '\0';
    if (dim) {
        int64_t v;
        for (size_t i = 0; i < o->n_dims; i++)
            if (strcmp(o->dims[i].symbol, name) == 0) {
                snprintf(err, errlen, "--dim %s is given twice", name);
                free(name);
                return -1;
            }
        if (fe_parse_dim(sep + 1, strlen(sep + 1), &v)) {
            snprintf(err, errlen, "--dim %s wants an integer from 0 to 2^62, not '%s'", name,
                     sep + 1);
            free(name);
            return -1;
        }
        o->dims = xreallocarray(o->dims, o->n_dims + 1, sizeof *o->dims);
        o->dims[o->n_dims++] = (fe_dim_binding){name, v};
        return 0;
    }
    for (size_t i = 0; i < o->n_shapes; i++)
        if (strcmp(o->shapes[i].name, name) == 0) {
            snprintf(err, errlen, "--input-shape %s is given twice", name);
            free(name);
            return -1;
        }
    /* dims separated by ',' (onnxruntime) or 'x' (TensorRT); an empty
     * list is a scalar */
    const char *p = sep + 1;
    size_t cap = 1;
    for (const char *q = p; *q; q++) cap += (*q == ',' || *q == 'x');
    int64_t *dims = xmallocarray(cap, sizeof *dims);
    size_t rank = 0;
    int bad = 0;
    if (*p) {
        while (!bad) {
            size_t len = strcspn(p, ",x");
            bad = fe_parse_dim(p, len, &dims[rank]);
            if (!bad) rank++;
            if (!p[len]) break;
            p += len + 1;
        }
    }
    if (bad) {
        snprintf(err, errlen,
                 "--input-shape %s wants dims from 0 to 2^62 separated by ',' (or 'x'), not '%s'",
                 name, sep + 1);
        free(name);
        free(dims);
        return -1;
    }
    o->shapes = xreallocarray(o->shapes, o->n_shapes + 1, sizeof *o->shapes);
    o->shapes[o->n_shapes++] = (fe_input_shape){name, dims, rank};
    return 0;
}

void fe_options_free(fe_options *o) {
    for (size_t i = 0; i < o->n_shapes; i++) {
        free(o->shapes[i].name);
        free(o->shapes[i].dims);
    }
    for (size_t i = 0; i < o->n_dims; i++) free(o->dims[i].symbol);
    free(o->shapes);
    free(o->dims);
    memset(o, 0, sizeof *o);
}
