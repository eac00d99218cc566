/* The harness of clirun.h. */
#include "clirun.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

const char *roamc_bin, *check_py, *workdir;
int have_check_py;

char *path_in_work(const char *name) {
    static char buf[8][1024];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", workdir, name);
    return buf[k];
}

int run(const char *tag, char *const argv[]) {
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

char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)(n > 0 ? n : 0) + 1);
    assert_non_null(s);
    size_t got = n > 0 ? fread(s, 1, (size_t)n, f) : 0;
    s[got] = 0;
    fclose(f);
    return s;
}

char *output_of(const char *tag, const char *stream) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s.%s", workdir, tag, stream);
    char *s = slurp(p);
    return s ? s : strdup("");
}

void expect_output(const char *tag, const char *fragment) {
    char *o = output_of(tag, "stdout"), *e = output_of(tag, "stderr");
    if (!strstr(o, fragment) && !strstr(e, fragment))
        fail_msg("%s: expected \"%s\" in:\n%s%s", tag, fragment, o, e);
    free(o);
    free(e);
}

int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

int check_plan_py(const char *tag, const char *model, const char *plan) {
    /* tests/plan_schema.py: the plan file's JSON Schema, then check_plan.py */
    char *argv[] = {"/usr/bin/python3",
                    ROAMC_PLAN_SCHEMA_PY,
                    "--check-plan",
                    (char *)check_py,
                    (char *)model,
                    (char *)plan,
                    NULL};
    return run(tag, argv);
}

int roamc_check(const char *tag, const char *model, const char *plan) {
    char *argv[] = {(char *)roamc_bin, "check", (char *)model, (char *)plan, NULL};
    return run(tag, argv);
}

int clirun_main(int argc, char **argv, const char *name, const struct CMUnitTest *tests,
                size_t n_tests) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s ROAMC CHECK_PLAN_PY WORKDIR\n", name);
        return 2;
    }
    roamc_bin = argv[1];
    check_py = argv[2];
    workdir = argv[3];
    mkdir(workdir, 0777);
    char cmd[1200];
    snprintf(
        cmd, sizeof cmd,
        "test -x /usr/bin/python3 && test -f %s && /usr/bin/python3 -c 'import onnx, jsonschema' "
        "2>/dev/null",
        check_py);
    have_check_py = system(cmd) == 0;
    if (!have_check_py)
        fprintf(stderr, "SKIP: check_plan.py steps (needs /usr/bin/python3 with python3-onnx and "
                        "python3-jsonschema)\n");
    int rc = _cmocka_run_group_tests(name, tests, n_tests, NULL, NULL);
    /* every other check passed, but check_plan.py's did not run: say SKIP
     * (ctest SKIP_RETURN_CODE 77), never a silent pass */
    if (rc == 0 && !have_check_py) {
        fprintf(stderr, "SKIP: the check_plan.py steps did not run (%s)\n", check_py);
        return 77;
    }
    return rc;
}
