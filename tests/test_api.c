/* The public C API (planner/api/roamc.h) through the shared library, as a
 * program that only has roamc.h would use it:
 *
 *   test_api unit   MODELS_DIR            options, errors, bytes = file, accessors,
 *                                         the layout API on conflict graphs and pins
 *   test_api models ROAMC MODELS_DIR OUT  every models/ *.onnx: the API's plan file is
 *                                         the bytes `roamc MODEL -o` writes
 *   test_api layout ROAMC INSTANCES OUT   every instance: the layout API's offsets are
 *                                         `roamc layout --work 10^7`'s (and llfb's, greedy's)
 *   test_api threads MODELS_DIR           8 threads plan 8 models at once: the same
 *                                         plans as one thread
 *   test_api compare ROAMC MODELS_DIR OUT the option compare on a few models: the report
 *                                         is `roamc MODEL --compare --report json`'s (but
 *                                         the times), the rows read through
 *                                         roamc_result_compare_row are its rows, the
 *                                         plan is the one `--compare -o` writes
 *
 * Exit 0 when every check holds, 1 otherwise (each failure printed). */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "roamc.h"

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

/* The whole file at path (NUL-terminated), or NULL. */
static char *api_test_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0, got;
    char *b = malloc(cap + 1);
    while ((got = fread(b + n, 1, cap - n, f)) > 0)
        if ((n += got) == cap) b = realloc(b, (cap *= 2) + 1);
    fclose(f);
    b[n] = 0;
    if (len) *len = n;
    return b;
}

/* The .onnx files of dir, sorted, into names (at most max). */
static size_t api_test_models(const char *dir, char names[][256], size_t max) {
    DIR *d = opendir(dir);
    size_t n = 0;
    for (struct dirent *e; d && (e = readdir(d)) && n < max;) {
        size_t len = strlen(e->d_name);
        if (len > 5 && strcmp(e->d_name + len - 5, ".onnx") == 0)
            snprintf(names[n++], 512, "%s/%.255s", dir, e->d_name);
    }
    if (d) closedir(d);
    qsort(names, n, 256, (int (*)(const void *, const void *))strcmp);
    return n;
}

/* ------------------------------------------------------------------ unit */

static void api_test_options(void) {
    roamc_options *o = roamc_options_new();
    CHECK(roamc_options_set(o, "order", "lescea") == ROAMC_OK, "%s", roamc_options_error(o));
    CHECK(roamc_options_set(o, "order", "nope") == ROAMC_BAD_INPUT, "bad order accepted");
    CHECK(strstr(roamc_options_error(o), "nope") != NULL, "message: %s", roamc_options_error(o));
    CHECK(roamc_options_set(o, "no-such", "1") == ROAMC_BAD_INPUT, "unknown option accepted");
    CHECK(roamc_options_set(o, "align", "3") == ROAMC_BAD_INPUT, "align 3 accepted");
    CHECK(roamc_options_set(o, "budget", "16GiB") == ROAMC_OK, "%s", roamc_options_error(o));
    CHECK(roamc_options_set(o, "dim", "batch=4") == ROAMC_OK, "%s", roamc_options_error(o));
    CHECK(roamc_options_set(o, "threads", "0") == ROAMC_BAD_INPUT, "threads 0 accepted");
    CHECK(roamc_options_set(o, "streams", "copy,disk") == ROAMC_BAD_INPUT &&
              strstr(roamc_options_error(o), "disk") != NULL,
          "streams copy,disk: %s", roamc_options_error(o));
    CHECK(roamc_options_set(o, "comm-gbps", "0") == ROAMC_BAD_INPUT, "comm-gbps 0 accepted");
    roamc_options_free(o);
    /* streams: comm-gbps needs comm, device goes with streams as with fit */
    o = roamc_options_new();
    CHECK(roamc_options_set(o, "streams", "copy,no-comm-ahead") == ROAMC_OK, "%s",
          roamc_options_error(o));
    CHECK(roamc_options_set(o, "comm-gbps", "100") == ROAMC_OK, "%s", roamc_options_error(o));
    CHECK(roamc_options_set(o, "device", "l4") == ROAMC_OK, "%s", roamc_options_error(o));
    roamc_result *sr = NULL;
    CHECK(roamc_plan_file(o, "/nonexistent.onnx", &sr) == ROAMC_BAD_INPUT &&
              strstr(roamc_result_error(sr), "comm-gbps needs streams comm") != NULL,
          "comm-gbps without comm: %s", roamc_result_error(sr));
    roamc_result_free(sr);
    roamc_options_set(o, "streams", "all");
    CHECK(roamc_options_set(o, "streams", "disk") == ROAMC_BAD_INPUT, "streams disk accepted");
    CHECK(roamc_plan_file(o, "/nonexistent.onnx", &sr) == ROAMC_BAD_INPUT &&
              strstr(roamc_result_error(sr), "/nonexistent.onnx") != NULL,
          "streams all (kept past a bad value), comm-gbps and device: %s", roamc_result_error(sr));
    roamc_result_free(sr);
    roamc_options_free(o);
    /* options that only go together are refused when the plan runs */
    o = roamc_options_new();
    roamc_options_set(o, "fit", NULL);
    roamc_result *r = NULL;
    CHECK(roamc_plan_file(o, "/nonexistent.onnx", &r) == ROAMC_BAD_INPUT, "fit without budget");
    CHECK(strstr(roamc_result_error(r), "budget") != NULL, "message: %s", roamc_result_error(r));
    roamc_result_free(r);
    roamc_options_free(o);
    CHECK(roamc_plan_file(NULL, "/nonexistent.onnx", &r) == ROAMC_BAD_INPUT, "missing file");
    CHECK(strstr(roamc_result_error(r), "/nonexistent.onnx") != NULL, "message: %s",
          roamc_result_error(r));
    size_t n = 1;
    CHECK(roamc_result_schedule(r, &n) == NULL && n == 0, "a failed result has no schedule");
    roamc_result_free(r);
    CHECK(strcmp(roamc_version(), ROAMC_VERSION_STRING) == 0, "version %s", roamc_version());
    /* compare: its values, and the options it does not go with */
    o = roamc_options_new();
    CHECK(roamc_options_set(o, "compare", "maybe") == ROAMC_BAD_INPUT, "compare maybe accepted");
    CHECK(roamc_options_set(o, "compare", NULL) == ROAMC_OK, "%s", roamc_options_error(o));
    roamc_options_set(o, "budget", "1GiB");
    CHECK(roamc_plan_file(o, "/nonexistent.onnx", &r) == ROAMC_BAD_INPUT &&
              strstr(roamc_result_error(r), "compare") != NULL,
          "compare with budget: %s", roamc_result_error(r));
    CHECK(roamc_result_compare_count(r) == 0, "a failed run has no rows");
    roamc_compare_row row;
    CHECK(roamc_result_compare_row(r, 0, &row) == ROAMC_BAD_INPUT, "row 0 of no comparison");
    roamc_result_free(r);
    roamc_options_free(o);
}

/* alexnet_b1 from its bytes equals from its file; the accessors agree with
 * each other; a budget below the peak says ROAMC_NO_FIT. */
static void api_test_plan(const char *models) {
    char path[512];
    snprintf(path, sizeof path, "%s/alexnet_b1.onnx", models);
    size_t len = 0;
    char *bytes = api_test_slurp(path, &len);
    CHECK(bytes != NULL, "cannot read %s", path);
    if (!bytes) return;
    roamc_result *a = NULL, *b = NULL;
    CHECK(roamc_plan_file(NULL, path, &a) == ROAMC_OK, "%s", roamc_result_error(a));
    CHECK(roamc_plan_bytes(NULL, bytes, len, path, &b) == ROAMC_OK, "%s", roamc_result_error(b));
    char *ja = NULL, *jb = NULL;
    CHECK(roamc_result_plan_json(a, &ja, NULL) == ROAMC_OK, "plan json");
    CHECK(roamc_result_plan_json(b, &jb, NULL) == ROAMC_OK, "plan json");
    CHECK(ja && jb && strcmp(ja, jb) == 0, "the plan of the bytes differs from the file's");
    size_t ns = 0, nb = 0, n2 = 0;
    const int32_t *sched = roamc_result_schedule(a, &ns);
    const uint64_t *off = roamc_result_offsets(a, &nb);
    const uint64_t *size = roamc_result_sizes(a, &n2);
    const int32_t *st = roamc_result_starts(a, NULL), *en = roamc_result_ends(a, NULL);
    CHECK(sched && ns == 217, "217 operators, got %zu", ns);
    CHECK(off && size && nb == n2 && nb > 0, "buffers");
    uint64_t top = 0;
    for (size_t i = 0; off && size && i < nb; i++)
        if (off[i] + size[i] > top) top = off[i] + size[i];
    CHECK(top == roamc_result_actual_peak(a), "height %llu, actual peak %llu",
          (unsigned long long)top, (unsigned long long)roamc_result_actual_peak(a));
    /* no two buffers live at one step overlap */
    for (size_t i = 0; off && i < nb; i++)
        for (size_t j = i + 1; j < nb; j++)
            if (size[i] && size[j] && st[i] <= en[j] && st[j] <= en[i])
                CHECK(off[i] + size[i] <= off[j] || off[j] + size[j] <= off[i],
                      "buffers %zu and %zu overlap", i, j);
    CHECK(roamc_result_buffer_name(a, 0) != NULL && roamc_result_buffer_name(a, nb) == NULL,
          "buffer names");
    CHECK(roamc_result_lower_bound(a) <= roamc_result_theoretical_peak(a) &&
              roamc_result_theoretical_peak(a) <= roamc_result_actual_peak(a),
          "bound <= theoretical <= actual");
    CHECK(roamc_result_fits(a) == -1, "no budget: fits -1");
    char *rep = NULL;
    CHECK(roamc_result_report_json(a, &rep, NULL) == ROAMC_OK && rep && rep[0] == '{',
          "report json");
    roamc_free(rep);
    roamc_free(ja);
    roamc_free(jb);
    /* a budget below the arena: complete, but does not fit */
    roamc_options *o = roamc_options_new();
    roamc_options_set(o, "budget", "100MiB");
    roamc_result *c = NULL;
    CHECK(roamc_plan_file(o, path, &c) == ROAMC_NO_FIT, "status %d: %s", roamc_result_status(c),
          roamc_result_error(c));
    CHECK(roamc_result_fits(c) == 0 && roamc_result_actual_peak(c) > 0, "no fit, yet a plan");
    roamc_result_free(c);
    roamc_options_free(o);
    roamc_result_free(a);
    roamc_result_free(b);
    free(bytes);
}

/* Offsets of l valid: aligned, pins kept, no two conflicting buffers
 * overlap (conflicts: intersecting lifetimes and the edges). */
typedef struct api_test_buf {
    uint64_t size, align;
    int64_t first, last; /* first -1: none */
    int pinned;
    uint64_t pin;
} api_test_buf;

static uint64_t api_test_round(uint64_t s, uint64_t a) {
    return (s + a - 1) / a * a;
}

static int api_test_layout_valid(const api_test_buf *b, size_t n, const size_t (*edges)[2],
                                 size_t n_edges, const uint64_t *off) {
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        if (off[i] % b[i].align) ok = 0, fprintf(stderr, "buffer %zu misaligned\n", i);
        if (b[i].pinned && off[i] != b[i].pin) ok = 0, fprintf(stderr, "pin %zu moved\n", i);
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++) {
            int conflict = b[i].first >= 0 && b[j].first >= 0 && b[i].first <= b[j].last &&
                           b[j].first <= b[i].last;
            for (size_t e = 0; e < n_edges; e++)
                if ((edges[e][0] == i && edges[e][1] == j) ||
                    (edges[e][0] == j && edges[e][1] == i))
                    conflict = 1;
            uint64_t si = api_test_round(b[i].size, b[i].align),
                     sj = api_test_round(b[j].size, b[j].align);
            if (conflict && si && sj && off[i] < off[j] + sj && off[j] < off[i] + si)
                ok = 0, fprintf(stderr, "buffers %zu and %zu overlap\n", i, j);
        }
    return ok;
}

static void api_test_layout_general(void) {
    /* a compiler's list: a pinned input, mixed alignments, one conflict edge */
    api_test_buf b[] = {{1000, 64, 0, 2, 1, 0},     {4096, 256, 1, 3, 0, 0}, {100, 1, 2, 4, 0, 0},
                        {2048, 512, 3, 5, 0, 0},    {700, 16, -1, -1, 0, 0}, {300, 8, 0, 5, 0, 0},
                        {5000, 4096, 4, 6, 1, 8192}};
    size_t n = sizeof b / sizeof b[0];
    const size_t edges[][2] = {{4, 0}, {4, 3}, {4, 5}};
    roamc_layout *l = roamc_layout_new();
    for (size_t i = 0; i < n; i++) {
        size_t idx = 99;
        roamc_status st = b[i].first >= 0 ? roamc_layout_add_interval(l, b[i].size, b[i].align,
                                                                      b[i].first, b[i].last, &idx)
                                          : roamc_layout_add_buffer(l, b[i].size, b[i].align, &idx);
        CHECK(st == ROAMC_OK && idx == i, "add %zu: %s", i, roamc_layout_error(l));
        if (b[i].pinned)
            CHECK(roamc_layout_pin(l, i, b[i].pin) == ROAMC_OK, "%s", roamc_layout_error(l));
    }
    for (size_t e = 0; e < 3; e++) roamc_layout_add_conflict(l, edges[e][0], edges[e][1]);
    CHECK(roamc_layout_add_conflict(l, 2, 2) == ROAMC_BAD_INPUT, "a self conflict accepted");
    CHECK(roamc_layout_pin(l, 1, 100) == ROAMC_BAD_INPUT, "a misaligned pin accepted");
    CHECK(roamc_layout_add_interval(l, 8, 3, 0, 1, NULL) == ROAMC_BAD_INPUT, "alignment 3");
    CHECK(roamc_layout_set(l, "work", "1000000") == ROAMC_OK, "%s", roamc_layout_error(l));
    CHECK(roamc_layout_solve(l) == ROAMC_OK, "%s", roamc_layout_error(l));
    size_t no = 0;
    const uint64_t *off = roamc_layout_offsets(l, &no);
    CHECK(off && no == n, "offsets");
    if (off) CHECK(api_test_layout_valid(b, n, edges, 3, off), "invalid layout");
    CHECK(roamc_layout_lower_bound(l) <= roamc_layout_height(l) &&
              roamc_layout_proven_bound(l) <= roamc_layout_height(l),
          "bounds above the height");
    CHECK(roamc_layout_lower_bound(l) >= 8192 + 8192, "the pinned buffer's end is a bound");
    /* a capacity below the bound: no fit */
    CHECK(roamc_layout_set(l, "capacity", "4096") == ROAMC_OK, "capacity");
    CHECK(roamc_layout_solve(l) == ROAMC_NO_FIT, "capacity 4096 met?");
    roamc_layout_free(l);

    /* two pinned buffers that conflict and overlap */
    l = roamc_layout_new();
    roamc_layout_add_interval(l, 100, 1, 0, 1, NULL);
    roamc_layout_add_interval(l, 100, 1, 1, 2, NULL);
    roamc_layout_pin(l, 0, 0);
    roamc_layout_pin(l, 1, 50);
    CHECK(roamc_layout_solve(l) == ROAMC_BAD_INPUT, "overlapping pins accepted");
    roamc_layout_free(l);

    /* found by fuzz_layout_api: a pinned buffer of size 0 adds nothing to
     * the height nor to the bound */
    l = roamc_layout_new();
    roamc_layout_add_buffer(l, 8704, 4096, NULL);
    roamc_layout_add_interval(l, 0, 1, 0, 10, NULL);
    roamc_layout_pin(l, 1, 15145);
    CHECK(roamc_layout_solve(l) == ROAMC_OK && roamc_layout_height(l) == 12288 &&
              roamc_layout_lower_bound(l) == 12288,
          "zero-size pin: height %llu bound %llu", (unsigned long long)roamc_layout_height(l),
          (unsigned long long)roamc_layout_lower_bound(l));
    roamc_layout_free(l);

    /* found by fuzz_layout_api: the allocator replay on a size near 2^64
     * (roamc layout --method pytorch answered height 0) */
    l = roamc_layout_new();
    roamc_layout_add_interval(l, UINT64_MAX - 36248, 1024, 38, 43, NULL);
    roamc_layout_set(l, "method", "pytorch");
    CHECK(roamc_layout_solve(l) == ROAMC_BAD_INPUT, "pytorch on 2^64 - 36249 bytes");
    roamc_layout_free(l);

    /* a triangle of conflicts, sizes 3, 4, 5: the clique bound 12 is met */
    l = roamc_layout_new();
    for (uint64_t s = 3; s <= 5; s++) roamc_layout_add_buffer(l, s, 1, NULL);
    roamc_layout_add_conflict(l, 0, 1);
    roamc_layout_add_conflict(l, 1, 2);
    roamc_layout_add_conflict(l, 0, 2);
    roamc_layout_add_conflict(l, 0, 2); /* a repeated edge counts once */
    CHECK(roamc_layout_solve(l) == ROAMC_OK, "%s", roamc_layout_error(l));
    CHECK(roamc_layout_height(l) == 12 && roamc_layout_lower_bound(l) == 12 &&
              roamc_layout_stop_reason(l) == ROAMC_STOP_OPTIMAL && roamc_layout_gap(l) == 0.0,
          "triangle: height %llu bound %llu stop %d", (unsigned long long)roamc_layout_height(l),
          (unsigned long long)roamc_layout_lower_bound(l), (int)roamc_layout_stop_reason(l));
    roamc_layout_free(l);
}

/* ------------------------------------------------------------------ models */

/* The API's plan of path with the options set from argv-like pairs. */
static char *api_test_plan_json(const char *path, const char *const *opts, size_t n_opts) {
    roamc_options *o = roamc_options_new();
    for (size_t k = 0; k + 1 < n_opts; k += 2)
        if (roamc_options_set(o, opts[k], opts[k + 1]))
            fprintf(stderr, "option %s: %s\n", opts[k], roamc_options_error(o));
    roamc_result *r = NULL;
    char *json = NULL;
    if (roamc_plan_file(o, path, &r) != ROAMC_OK)
        fprintf(stderr, "%s: %s\n", path, roamc_result_error(r));
    else
        roamc_result_plan_json(r, &json, NULL);
    roamc_result_free(r);
    roamc_options_free(o);
    return json;
}

static void api_test_models_cmd(const char *roamc, const char *models, const char *out) {
    static char names[256][256];
    size_t n = api_test_models(models, names, 256);
    CHECK(n > 0, "no model in %s", models);
    /* as same_plans.sh plans them: the defaults and two other orders and layouts */
    static const char *const sets[][4] = {{"", "", "", ""},
                                          {"--order", "program", "--layout", "pytorch"},
                                          {"--layout", "llfb", "", ""}};
    size_t same = 0, total = 0;
    for (size_t m = 0; m < n; m++)
        for (size_t s = 0; s < sizeof sets / sizeof sets[0]; s++) {
            char cmd[2048], file[512];
            snprintf(file, sizeof file, "%s/cli_%zu_%zu.json", out, m, s);
            snprintf(cmd, sizeof cmd, "'%s' '%s' %s %s %s %s --threads 2 -q -o '%s'", roamc,
                     names[m], sets[s][0], sets[s][1], sets[s][2], sets[s][3], file);
            int rc = system(cmd);
            const char *opts[] = {sets[s][0] + (*sets[s][0] ? 2 : 0),
                                  sets[s][1],
                                  sets[s][2] + (*sets[s][2] ? 2 : 0),
                                  sets[s][3],
                                  "threads",
                                  "2"};
            const char *flat[6];
            size_t k = 0;
            for (size_t i = 0; i + 1 < 6; i += 2)
                if (*opts[i]) flat[k++] = opts[i], flat[k++] = opts[i + 1];
            char *api = api_test_plan_json(names[m], flat, k);
            char *cli = rc == 0 ? api_test_slurp(file, NULL) : NULL;
            total++;
            CHECK(cli && api && strcmp(cli, api) == 0,
                  "%s %s %s: the API's plan differs from "
                  "roamc's (exit %d)",
                  names[m], sets[s][1], sets[s][3], rc);
            same += cli && api && strcmp(cli, api) == 0;
            free(cli);
            roamc_free(api);
        }
    printf("models: %zu of %zu plans byte-identical to roamc's (%zu models)\n", same, total, n);
}

/* ------------------------------------------------------------------ compare */

/* The rows of a --compare JSON report without their times (what cannot
 * repeat), or NULL when text is not one. */
static json_t *api_test_rows(const char *text) {
    json_t *j = text ? json_loads(text, 0, NULL) : NULL;
    json_t *rows = json_object_get(j, "rows");
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row) json_object_del(row, "seconds");
    return j;
}

static const char *api_test_str(json_t *row, const char *key) {
    const char *s = json_string_value(json_object_get(row, key));
    return s ? s : "(absent)";
}

/* Row i of the API against the CLI's row (JSON): every field. */
static int api_test_row_equal(const roamc_compare_row *w, json_t *row) {
    return strcmp(w->name, api_test_str(row, "name")) == 0 &&
           strcmp(w->order, api_test_str(row, "order")) == 0 &&
           strcmp(w->layout, api_test_str(row, "layout")) == 0 &&
           strcmp(w->order_ran, api_test_str(row, "order_ran")) == 0 &&
           strcmp(w->layout_ran, api_test_str(row, "layout_ran")) == 0 &&
           strcmp(w->note, api_test_str(row, "note")) == 0 &&
           (json_int_t)w->theoretical_peak ==
               json_integer_value(json_object_get(row, "theoretical_peak")) &&
           (json_int_t)w->actual_peak == json_integer_value(json_object_get(row, "actual_peak")) &&
           w->fragmentation_percent ==
               json_real_value(json_object_get(row, "fragmentation_percent")) &&
           w->reduction_vs_pytorch_percent ==
               json_real_value(json_object_get(row, "reduction_vs_pytorch_percent")) &&
           w->seconds >= 0;
}

static void api_test_compare_cmd(const char *roamc, const char *models, const char *out) {
    /* small ones: the ILP rows stop on their work budgets, never on the time limit */
    static const char *const pick[] = {"vgg16_b1", "mobilenet_v2_b1", "mnasnet1_0_b1"};
    size_t same = 0, n = sizeof pick / sizeof pick[0];
    for (size_t m = 0; m < n; m++) {
        char path[512], cmd[2048], rep[512], file[512];
        snprintf(path, sizeof path, "%s/%s.onnx", models, pick[m]);
        snprintf(rep, sizeof rep, "%s/compare_%zu.json", out, m);
        snprintf(file, sizeof file, "%s/compare_%zu.plan.json", out, m);
        snprintf(cmd, sizeof cmd, "'%s' '%s' --compare --threads 2 --report json -o '%s' > '%s'",
                 roamc, path, file, rep);
        int rc = system(cmd);
        char *cli_text = rc == 0 ? api_test_slurp(rep, NULL) : NULL;
        char *cli_plan = rc == 0 ? api_test_slurp(file, NULL) : NULL;
        roamc_options *o = roamc_options_new();
        roamc_options_set(o, "compare", "true");
        roamc_options_set(o, "threads", "2");
        roamc_result *r = NULL;
        roamc_status st = roamc_plan_file(o, path, &r);
        CHECK(st == ROAMC_OK, "%s: %s", path, roamc_result_error(r));
        char *api_text = NULL, *api_plan = NULL;
        roamc_result_report_json(r, &api_text, NULL);
        roamc_result_plan_json(r, &api_plan, NULL);
        json_t *cli = api_test_rows(cli_text), *api = api_test_rows(api_text);
        int ok = cli && api && json_equal(cli, api);
        CHECK(ok, "%s: the API's --compare report differs from roamc's (exit %d)", path, rc);
        json_t *rows = json_object_get(cli, "rows");
        size_t count = roamc_result_compare_count(r);
        CHECK(count == 4 && count == json_array_size(rows), "%s: %zu rows, roamc's %zu", path,
              count, json_array_size(rows));
        for (size_t i = 0; i < count; i++) {
            roamc_compare_row w;
            int eq = roamc_result_compare_row(r, i, &w) == ROAMC_OK &&
                     api_test_row_equal(&w, json_array_get(rows, i));
            CHECK(eq, "%s: row %zu read through roamc_result_compare_row differs from roamc's",
                  path, i);
            ok &= eq;
        }
        CHECK(roamc_result_compare_row(r, count, &(roamc_compare_row){0}) == ROAMC_BAD_INPUT,
              "row %zu of %zu", count, count);
        /* the result's plan is the ROAM row's: the file --compare -o writes */
        int plan_eq = cli_plan && api_plan && strcmp(cli_plan, api_plan) == 0;
        CHECK(plan_eq, "%s: the API's ROAM plan differs from roamc --compare -o's", path);
        CHECK(json_integer_value(json_object_get(cli, "lower_bound")) ==
                  (json_int_t)roamc_result_lower_bound(r),
              "%s: lower bound", path);
        same += ok && plan_eq;
        json_decref(cli);
        json_decref(api);
        roamc_free(api_text);
        roamc_free(api_plan);
        free(cli_text);
        free(cli_plan);
        roamc_result_free(r);
        roamc_options_free(o);
    }
    printf("compare: %zu of %zu comparisons equal to roamc --compare's (rows, plan)\n", same, n);
}

/* ------------------------------------------------------------------ layout instances */

/* id,lower,upper,size rows of a CSV (half-open lifetimes), at most max;
 * with offsets (a file roamc layout wrote), the fifth column too. */
static size_t api_test_csv(const char *path, uint64_t (*rows)[5], size_t max, int with_offset) {
    char *text = api_test_slurp(path, NULL);
    if (!text) return 0;
    size_t n = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line == text || n == max) continue; /* the header */
        char *c = strchr(line, ',');
        unsigned long long v[4] = {0};
        int got = c ? sscanf(c + 1, "%llu,%llu,%llu,%llu", &v[0], &v[1], &v[2], &v[3]) : 0;
        if (got < 3 + with_offset) continue;
        for (int k = 0; k < 4; k++) rows[n][k] = v[k];
        n++;
    }
    free(text);
    return n;
}

static void api_test_layout_cmd(const char *roamc, const char *dir, const char *out) {
    static char names[64][512];
    DIR *d = opendir(dir);
    size_t n = 0;
    for (struct dirent *e; d && (e = readdir(d)) && n < 64;)
        if (strstr(e->d_name, ".csv")) snprintf(names[n++], 512, "%s/%.255s", dir, e->d_name);
    if (d) closedir(d);
    CHECK(n > 0, "no instance in %s", dir);
    static uint64_t in[20000][5], cli[20000][5];
    static const char *const methods[] = {"roam", "llfb", "greedy"};
    size_t same = 0, total = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t m = 0; m < 3; m++) {
            char cmd[2048], file[512];
            snprintf(file, sizeof file, "%s/layout_%zu_%zu.csv", out, i, m);
            snprintf(cmd, sizeof cmd,
                     "'%s' layout '%s' --work 10000000 --align 512 --method %s -o '%s' >/dev/null",
                     roamc, names[i], methods[m], file);
            int rc = system(cmd);
            size_t nb = api_test_csv(names[i], in, 20000, 0);
            size_t nc = rc == 0 ? api_test_csv(file, cli, 20000, 1) : 0;
            roamc_layout *l = roamc_layout_new();
            for (size_t k = 0; k < nb; k++)
                roamc_layout_add_interval(l, in[k][2], 512, (int64_t)in[k][0],
                                          (int64_t)in[k][1] - 1, NULL);
            roamc_layout_set(l, "work", "10000000");
            roamc_layout_set(l, "method", methods[m]);
            roamc_status st = roamc_layout_solve(l);
            size_t no = 0;
            const uint64_t *off = roamc_layout_offsets(l, &no);
            int equal = st == ROAMC_OK && nc == nb && no == nb && nb > 0;
            for (size_t k = 0; equal && k < nb; k++) equal = off[k] == cli[k][3];
            total++;
            same += equal;
            CHECK(equal, "%s --method %s: the API's offsets differ from roamc layout's (exit %d)",
                  names[i], methods[m], rc);
            if (m == 0)
                CHECK(roamc_layout_stop_reason(l) == ROAMC_STOP_OPTIMAL ||
                          roamc_layout_stop_reason(l) == ROAMC_STOP_WORK,
                      "%s: stop %d", names[i], (int)roamc_layout_stop_reason(l));
            roamc_layout_free(l);
        }
    printf("layout: %zu of %zu layouts equal to roamc layout's (%zu instances)\n", same, total, n);
}

/* ------------------------------------------------------------------ threads */

typedef struct api_test_job {
    const char *path;
    char *json;
} api_test_job;

static void *api_test_thread(void *arg) {
    api_test_job *j = arg;
    const char *opts[] = {"threads", "1"};
    j->json = api_test_plan_json(j->path, opts, 2);
    return NULL;
}

static void api_test_threads_cmd(const char *models) {
    /* eight different models, small ones first (the ASan build runs this) */
    static const char *const pick[] = {"alexnet_b1",   "alexnet_b32",       "vgg16_b1",
                                       "vgg16_b32",    "mnasnet1_0_b1",     "mobilenet_v2_b1",
                                       "bert-base_b1", "efficientnet_b0_b1"};
    enum { N = 8 };
    char paths[N][512];
    api_test_job one[N], many[N];
    for (int i = 0; i < N; i++) {
        snprintf(paths[i], sizeof paths[i], "%s/%s.onnx", models, pick[i]);
        one[i] = (api_test_job){paths[i], NULL};
        many[i] = one[i];
        api_test_thread(&one[i]);
    }
    pthread_t t[N];
    for (int i = 0; i < N; i++)
        CHECK(pthread_create(&t[i], NULL, api_test_thread, &many[i]) == 0, "thread");
    for (int i = 0; i < N; i++) pthread_join(t[i], NULL);
    int same = 0;
    for (int i = 0; i < N; i++) {
        int eq = one[i].json && many[i].json && strcmp(one[i].json, many[i].json) == 0;
        CHECK(eq, "%s: the plan made beside 7 other threads differs from one thread's", pick[i]);
        same += eq;
        roamc_free(one[i].json);
        roamc_free(many[i].json);
    }
    printf("threads: %d of %d plans made by 8 threads at once equal one thread's\n", same, N);
}

int main(int argc, char **argv) {
    const char *cmd = argc > 1 ? argv[1] : "";
    if (strcmp(cmd, "unit") == 0 && argc == 3) {
        api_test_options();
        api_test_plan(argv[2]);
        api_test_layout_general();
    } else if (strcmp(cmd, "models") == 0 && argc == 5) {
        api_test_models_cmd(argv[2], argv[3], argv[4]);
    } else if (strcmp(cmd, "layout") == 0 && argc == 5) {
        api_test_layout_cmd(argv[2], argv[3], argv[4]);
    } else if (strcmp(cmd, "threads") == 0 && argc == 3) {
        api_test_threads_cmd(argv[2]);
    } else if (strcmp(cmd, "compare") == 0 && argc == 5) {
        api_test_compare_cmd(argv[2], argv[3], argv[4]);
    } else {
        fprintf(stderr, "usage: test_api unit MODELS | models ROAMC MODELS OUT | layout ROAMC "
                        "INSTANCES OUT | threads MODELS | compare ROAMC MODELS OUT\n");
        return 2;
    }
    if (failures) fprintf(stderr, "%d checks failed\n", failures);
    return failures ? 1 : 0;
}
