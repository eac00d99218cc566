/* The one way a command reads its model: load (or derive the training step)
 * and build the graph (planner.h, planner_step_load). */
#include "planner.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --emit-train: the derived model's bytes to path, all or nothing
 * (planner_output_set, as every file roamc writes).  0, or -1 with a
 * message. */
static int load_emit(const char *path, const uint8_t *bytes, size_t len, char *err, size_t errlen) {
    planner_output_set set = {0};
    planner_outputs_add(&set, "--emit-train", path);
    if (planner_outputs_open(&set, err, errlen)) return -1;
    int ok = fwrite(bytes, 1, len, set.slot[0].f) == len;
    if (planner_outputs_commit(&set, ok, err, errlen)) {
        if (!ok) roamc_errorf(err, errlen, "--emit-train %s: cannot write: I/O error", path);
        return -1;
    }
    return 0;
}

/* The whole file at path into *bytes (keep_bytes without --train). */
static int load_read(const char *path, uint8_t **bytes, size_t *len, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) return roamc_errorf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    uint8_t *b = xmalloc(cap);
    for (size_t got; (got = fread(b + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) b = xreallocarray(b, cap *= 2, 1);
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(b);
        return roamc_errorf(err, errlen, "%s: cannot read: I/O error", path);
    }
    *bytes = b, *len = n;
    return 0;
}

/* A step --train derived, with no --emit-train file to name, is named by
 * the forward file, where the --dim bindings applied; the derived graph
 * has their values in its shapes and no symbols left.  Its symbols get the
 * bindings, so that the plan records them (PLAN_FORMAT.md "shapes") and
 * roamc check and explain derive the same step from the plan alone.
 * (--input-shape bindings name no symbol: those are still to be given.) */
static void load_record_dims(fe_model *m, const fe_options *b) {
    if (!b || !b->n_dims) return;
    m->symbols = xreallocarray(m->symbols, m->n_symbols + b->n_dims, sizeof *m->symbols);
    for (size_t k = 0; k < b->n_dims; k++) {
        bool known = false;
        for (size_t i = 0; i < m->n_symbols && !known; i++)
            known = strcmp(m->symbols[i].name, b->dims[k].symbol) == 0;
        if (!known)
            m->symbols[m->n_symbols++] = (fe_symbol){.name = xstrdup(b->dims[k].symbol),
                                                     .value = b->dims[k].value,
                                                     .kind = FE_SYMBOL_INPUT,
                                                     .node = -1};
    }
}

int planner_step_load(const planner_load *l, planner_step *s, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    const fe_train_options *t = l->train;
    bool emit = t && t->emit_path && !l->keep_bytes;
    uint8_t *derived = NULL;
    size_t len = 0;
    int rc = 0;
    if (t) {
        fe_train_result r;
        rc = fe_train(l->path, l->bindings, t, &r, err, errlen);
        s->m = r.model, s->summary = r.summary;
        if (rc == 0 && !t->emit_path) load_record_dims(&s->m, l->bindings);
        if (emit || l->keep_bytes)
            derived = r.derived, len = r.derived_len;
        else
            free(r.derived); /* not wanted */
    } else if (l->bytes) {
        rc = fe_load_bytes(l->path, (fe_bytes){l->bytes, l->len}, l->bindings, &s->m, err, errlen);
        if (rc == 0 && l->keep_bytes) {
            derived = xmalloc(l->len ? l->len : 1);
            memcpy(derived, l->bytes, l->len);
            len = l->len;
        }
    } else if (l->keep_bytes && (rc = load_read(l->path, &derived, &len, err, errlen)) == 0) {
        rc = fe_load_bytes(l->path, (fe_bytes){derived, len}, l->bindings, &s->m, err, errlen);
        if (rc) free(derived), derived = NULL;
    } else if (!l->keep_bytes)
        rc = fe_load(l->path, l->bindings, &s->m, err, errlen);
    if (rc) return -1;
    if (emit) {
        rc = load_emit(t->emit_path, derived, len, err, errlen);
        free(derived);
        derived = NULL;
    }
    if (!l->summary) free(s->summary), s->summary = NULL;
    if (rc == 0) s->bytes = derived, s->len = len;
    if (rc == 0 && graph_build(&s->m, l->align, &s->g, err, errlen) == 0) return 0;
    char *summary = s->summary;
    s->summary = NULL;
    free(s->bytes);
    fe_free(&s->m);
    memset(s, 0, sizeof *s);
    s->summary = summary;
    return -1;
}

void planner_step_free(planner_step *s) {
    graph_free(&s->g);
    fe_free(&s->m);
    free(s->summary);
    free(s->bytes);
    memset(s, 0, sizeof *s);
}
