/* The model a plan file was made for, found and sized as the plan records
 * (plan_model.h): what roamc check and roamc explain both read. */
#include "plan_model.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "digest.h"

json_t *plan_json_read(const char *plan_path, char *err, size_t errlen) {
    json_error_t jerr;
    json_t *plan = json_load_file(plan_path, 0, &jerr);
    if (!plan && jerr.line < 0) { /* no position: the file itself could not be read */
        roamc_errorf(err, errlen, "%s: not a readable JSON plan: %s", plan_path, jerr.text);
        return NULL;
    }
    if (!plan) {
        roamc_errorf(err, errlen, "%s: not a readable JSON plan: %s (line %d, column %d)",
                     plan_path, jerr.text, jerr.line, jerr.column);
        return NULL;
    }
    if (!json_is_object(plan)) {
        json_decref(plan);
        roamc_errorf(err, errlen, "%s: a plan is a JSON object", plan_path);
        return NULL;
    }
    return plan;
}

const char *plan_json_str(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* The bindings a plan records: --dim NAME=V for every input symbol with a
 * value (PLAN_FORMAT.md "shapes"), into o; their text ("batch=4 seq=128")
 * into text.  Returns how many. */
static size_t plan_model_recorded_bindings(json_t *plan, fe_options *o, char *text, size_t len) {
    json_t *syms = json_object_get(json_object_get(plan, "shapes"), "symbols");
    size_t n = 0, off = 0;
    char spec[512], msg[256];
    text[0] = 0;
    for (size_t i = 0; i < json_array_size(syms); i++) {
        json_t *s = json_array_get(syms, i);
        const char *name = plan_json_str(s, "name"), *kind = plan_json_str(s, "kind");
        json_t *v = json_object_get(s, "value");
        if (!name || !kind || strcmp(kind, "input") != 0 || !json_is_integer(v)) continue;
        snprintf(spec, sizeof spec, "%s=%" JSON_INTEGER_FORMAT, name, json_integer_value(v));
        if (fe_options_parse(o, "--dim", spec, msg, sizeof msg)) continue;
        if (off < len) off += (size_t)snprintf(text + off, len - off, "%s%s", n ? " " : "", spec);
        n++;
    }
    return n;
}

/* Whether a and b name the same file. */
static bool plan_model_same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

/* The model's path: r->model_path, else the plan's "model" as written:
 * from here, else from the plan's folder or a folder above it.  "model" is
 * the path as given where the plan was made (PLAN_FORMAT.md), and a plan
 * is mostly written below that folder (-o plans/p.json): one of the plan's
 * folder's ancestors is where it was made.  The nearest that holds the
 * file wins; explain and check then compare its SHA-256 with the plan's.
 * Into buf. */
static int plan_model_model_path(const plan_model_request *r, char *buf, size_t len, char *err,
                                 size_t errlen) {
    if (r->model_path) {
        snprintf(buf, len, "%s", r->model_path);
        return 0;
    }
    const char *named = plan_json_str(r->plan, "model");
    if (!named)
        return roamc_errorf(err, errlen, "%s: the plan names no model: give it (MODEL.onnx)",
                            r->plan_path);
    snprintf(buf, len, "%s", named);
    struct stat st;
    if (stat(buf, &st) == 0 || named[0] == '/') return 0;
    const char *slash = strrchr(r->plan_path, '/');
    char base[4096];
    snprintf(base, sizeof base, "%.*s", slash ? (int)(slash - r->plan_path) : 1,
             slash ? r->plan_path : ".");
    /* the plan's folder, then each above it ("DIR/..", "DIR/../.."), as
     * many as the folder has parts, plus one for a plan made in a folder
     * the plan's path does not name */
    size_t ups = 1;
    for (const char *c = base; *c; c++) ups += *c == '/';
    for (size_t k = 0; k <= ups; k++) {
        size_t n = (size_t)snprintf(buf, len, "%s", base);
        for (size_t u = 0; u < k && n < len; u++) n += (size_t)snprintf(buf + n, len - n, "/..");
        if (n < len) snprintf(buf + n, len - n, "/%s", named);
        if (stat(buf, &st) == 0 && S_ISREG(st.st_mode)) return 0;
    }
    return roamc_errorf(err, errlen,
                        "%s: the plan's model '%s' is not found (from here, nor from the plan's "
                        "folder or one above it): give it (MODEL.onnx)",
                        r->plan_path, named);
}

int plan_model_load(const plan_model_request *r, planner_step *step, const plan_model_found *found,
                    char *err, size_t errlen) {
    char *path = found->path, *note = found->note;
    size_t len = found->len;
    note[0] = 0;
    if (plan_model_model_path(r, path, len, err, errlen)) return -1;
    fe_options recorded = {0};
    const fe_options *b = r->bindings;
    char text[512] = "";
    if (!b || (b->n_shapes == 0 && b->n_dims == 0)) {
        if (plan_model_recorded_bindings(r->plan, &recorded, text, sizeof text))
            snprintf(note, len, "bindings from the plan: --dim %s", text);
        b = &recorded;
    }
    /* a plan of the step --train derived (without --emit-train) names the
     * forward file and records the derived step's SHA-256, which depends on
     * the path as it was written: derive from that spelling */
    const char *named = plan_json_str(r->plan, "model");
    const char *derive_path = named && plan_model_same_file(named, path) ? named : path;
    planner_load l = {.path = path, .bindings = b, .train = r->train, .align = r->align};
    if (r->train) l.path = derive_path;
    int rc = planner_step_load(&l, step, err, errlen);
    const char *kind = plan_json_str(r->plan, "graph"),
               *sha = plan_json_str(r->plan, "model_sha256");
    bool plan_training = kind && strcmp(kind, "training") == 0;
    char hex[65] = "";
    if (rc == 0) fe_hex(step->m.sha256, sizeof step->m.sha256, hex);
    if (!r->train && plan_training &&
        (rc != 0 || (strcmp(planner_graph_kind(&step->m), "inference") == 0 && sha &&
                     strcmp(sha, hex) != 0))) {
        /* the plan is of a training step, the file a forward graph: the
         * step --train derives with its defaults */
        if (rc == 0) planner_step_free(step);
        fe_train_options defaults = {0};
        l.path = derive_path;
        l.train = &defaults;
        char why[1024] = "";
        rc = planner_step_load(&l, step, why, sizeof why);
        if (rc == 0) fe_hex(step->m.sha256, sizeof step->m.sha256, hex);
        const char *give = b->n_dims || b->n_shapes
                               ? "the --train options it was made with"
                               : "the --train options and --dim/--input-shape bindings it was "
                                 "made with (a plan of a derived step records its --dim bindings, "
                                 "not --input-shape)";
        if (rc == 0 && (!sha || strcmp(sha, hex) == 0)) {
            size_t off = strlen(note);
            snprintf(note + off, len - off,
                     "%sthe plan is of the training step --train derives from %s (default "
                     "--loss and --optimizer, no --frozen)",
                     off ? "; " : "", derive_path);
        } else if (rc == 0) {
            planner_step_free(step);
            rc = roamc_errorf(err, errlen,
                              "%s: the plan is of a training step, and the step --train derives "
                              "from %s with its defaults is another: give %s, or the file "
                              "--emit-train wrote",
                              r->plan_path, derive_path, give);
        } else {
            rc = roamc_errorf(err, errlen,
                              "%s: the plan is of a training step; deriving it from %s with "
                              "--train failed: %s; give %s, or the file --emit-train wrote",
                              r->plan_path, derive_path, why, give);
        }
    }
    fe_options_free(&recorded);
    return rc;
}
