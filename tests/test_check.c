/* `roamc check` on plans that only running them would otherwise show wrong
 * (issue 16): schedules that break the mutation order of a storage through
 * a view (made before the write, and after it), and plans made for another
 * model.  Each broken plan is also given to shared/tools/check_plan.py,
 * which must reject it too.
 *
 * usage: test_check ROAMC CHECK_PLAN_PY WORKDIR
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "testgraph.h"

static const char *roamc_bin, *check_py, *workdir;
static int have_check_py; /* /usr/bin/python3 with onnx */

static char *path_in_work(const char *name) {
    static char buf[8][1024];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", workdir, name);
    return buf[k];
}

/* Runs argv with stdout and stderr into WORKDIR/tag.{stdout,stderr};
 * returns the exit status (128 + signal when killed). */
static int run(const char *tag, char *const argv[]) {
    char out[1024], err[1024];
    snprintf(out, sizeof out, "%s/%s.stdout", workdir, tag);
    snprintf(err, sizeof err, "%s/%s.stderr", workdir, tag);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(out, "w", stdout) || !freopen(err, "w", stderr)) _exit(127);
        execv(argv[0], argv);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static char *output_of(const char *tag, const char *stream) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s.%s", workdir, tag, stream);
    FILE *f = fopen(p, "rb");
    if (!f) return strdup("");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = 0;
    fclose(f);
    return s;
}

/* Expects `fragment` in the output of tag (stdout and stderr). */
static void expect_output(const char *tag, const char *fragment) {
    char *o = output_of(tag, "stdout"), *e = output_of(tag, "stderr");
    if (!strstr(o, fragment) && !strstr(e, fragment))
        fail_msg("%s: expected \"%s\" in:\n%s%s", tag, fragment, o, e);
    free(o);
    free(e);
}

/* A weight written in place twice (an optimizer's two updates), read by a
 * matmul through a view made before the first write (t(w), as a backward
 * mm reads a forward weight) and by one through a view made after it:
 *   0 wt = t(w)   1 y = mm(x, wt)   2 w2 = add_(w, c)
 *   3 v = t(w2)   4 z = mm(x, v)    5 w3 = mul_(w2, c)
 * Data edges alone allow 2 before 1 and 5 before 4. */
static tg *m_mutation(void) {
    tg *t = tg_new();
    tg_input(t, "w", "64x64");
    tg_input(t, "c", "64x64");
    tg_input(t, "x", "32x64");
    tg_alias(t, tg_node(t, "aten", "t", "w", "wt"), "0", 0);
    tg_node(t, "aten", "mm", "x,wt", "y");
    tg_alias(t, tg_node(t, "aten", "add_", "w,c", "w2"), "0", 1);
    tg_alias(t, tg_node(t, "aten", "t", "w2", "v"), "0", 0);
    tg_node(t, "aten", "mm", "x,v", "z");
    tg_alias(t, tg_node(t, "aten", "mul_", "w2,c", "w3"), "0", 1);
    tg_value(t, "wt", "64x64");
    tg_value(t, "w2", "64x64");
    tg_value(t, "v", "64x64");
    tg_value(t, "w3", "64x64");
    tg_output(t, "y", "32x64");
    tg_output(t, "z", "32x64");
    return t;
}

static void write_tg(tg *t, const char *path) {
    assert_int_equal(tg_write(t, path), 0);
    tg_free(t);
}

/* plan_src with its schedule replaced by sched[0..n), written to out. */
static void with_schedule(const char *plan_src, const int *sched, size_t n, const char *out) {
    json_error_t je;
    json_t *plan = json_load_file(plan_src, 0, &je);
    assert_non_null(plan);
    json_t *s = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(s, json_integer(sched[i]));
    json_object_set_new(plan, "schedule", s);
    assert_int_equal(json_dump_file(plan, out, JSON_COMPACT), 0);
    json_decref(plan);
}

/* Both checkers reject `plan` (exit 1); roamc's message holds each of
 * the fragments (NULL-terminated). */
static void expect_rejected(const char *tag, const char *model, const char *plan, const char *const *fragments) {
    char *argv[] = {(char *)roamc_bin, "check", (char *)model, (char *)plan, NULL};
    int rc = run(tag, argv);
    if (rc != 1) {
        char *o = output_of(tag, "stdout");
        fail_msg("%s: roamc check exited %d, want 1:\n%s", tag, rc, o);
    }
    for (size_t i = 0; fragments[i]; i++) expect_output(tag, fragments[i]);
    if (have_check_py) {
        char pytag[256];
        snprintf(pytag, sizeof pytag, "%s_py", tag);
        char *py[] = {"/usr/bin/python3", (char *)check_py, (char *)model, (char *)plan, NULL};
        rc = run(pytag, py);
        if (rc != 1) fail_msg("%s: check_plan.py exited %d, want 1", tag, rc);
    }
}

static void test_mutation_order_through_views(void **state) {
    (void)state;
    const char *model = path_in_work("mutation.onnx"), *ok = path_in_work("mutation_ok.json");
    write_tg(m_mutation(), model);
    char *plan[] = {(char *)roamc_bin, (char *)model, "--order", "program", "-q", "-o", (char *)ok, NULL};
    assert_int_equal(run("mutation_plan", plan), 0);
    char *check[] = {(char *)roamc_bin, "check", (char *)model, (char *)ok, NULL};
    assert_int_equal(run("mutation_ok", check), 0);
    /* roamc's own orders keep the mutation order */
    const char *orders[] = {"roam", "lescea", "ilp"};
    for (size_t i = 0; i < 3; i++) {
        const char *p = path_in_work("mutation_order.json");
        char *pl[] = {(char *)roamc_bin, (char *)model, "--order", (char *)orders[i], "-q", "-o", (char *)p, NULL};
        assert_int_equal(run("mutation_plan2", pl), 0);
        char *ck[] = {(char *)roamc_bin, "check", (char *)model, (char *)p, NULL};
        if (run("mutation_check2", ck) != 0) fail_msg("--order %s: plan rejected", orders[i]);
    }

    /* the first write before the mm that reads w through the view made before it */
    const int before[] = {0, 2, 1, 3, 4, 5};
    const char *bad1 = path_in_work("mutation_view_before.json");
    with_schedule(ok, before, 6, bad1);
    const char *f1[] = {"node 2 (add_) overwrites 'w' in place at step 1, before node 1 (mm) reads that storage "
                        "through the view 'wt' at step 2",
                        NULL};
    expect_rejected("view_before", model, bad1, f1);

    /* the second write before the mm that reads through the view made after the first */
    const int after[] = {0, 1, 2, 3, 5, 4};
    const char *bad2 = path_in_work("mutation_view_after.json");
    with_schedule(ok, after, 6, bad2);
    const char *f2[] = {"node 5 (mul_) overwrites 'w2' in place at step 4, before node 4 (mm) reads that storage "
                        "through the view 'v' at step 5",
                        NULL};
    expect_rejected("view_after", model, bad2, f2);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: test_check ROAMC CHECK_PLAN_PY WORKDIR\n");
        return 2;
    }
    roamc_bin = argv[1];
    check_py = argv[2];
    workdir = argv[3];
    mkdir(workdir, 0777);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "test -x /usr/bin/python3 && test -f %s && /usr/bin/python3 -c 'import onnx' 2>/dev/null",
             check_py);
    have_check_py = system(cmd) == 0;
    if (!have_check_py) fprintf(stderr, "SKIP: check_plan.py steps (needs /usr/bin/python3 with python3-onnx)\n");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mutation_order_through_views),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
