/* clirun.h — the harness of the tests that run the roamc binary (test_cli,
 * test_check): each is started as `TEST ROAMC CHECK_PLAN_PY WORKDIR`, runs
 * commands with their output captured in WORKDIR/TAG.{stdout,stderr}, and
 * reads the output back.  Test code only: it keeps its state in the globals
 * below, set once by clirun_main. */
#ifndef ROAMC_TESTS_CLIRUN_H
#define ROAMC_TESTS_CLIRUN_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>

#include <cmocka.h>

extern const char *roamc_bin, *check_py, *workdir;
extern int have_check_py; /* /usr/bin/python3 with onnx and jsonschema, and check_plan.py there */

/* WORKDIR/name, in one of 8 rotating static buffers. */
char *path_in_work(const char *name);
/* Runs argv (argv[0] a path) with stdout and stderr into WORKDIR/tag.stdout
 * and .stderr; returns the exit status, or 128 + signal when killed. */
int run(const char *tag, char *const argv[]);
/* The whole file, NUL-terminated (free it), or NULL when it cannot be read. */
char *slurp(const char *path);
/* What run(tag) wrote to stream ("stdout" or "stderr"); "" when nothing. */
char *output_of(const char *tag, const char *stream);
/* Fails the test unless fragment is in run(tag)'s stdout or stderr. */
void expect_output(const char *tag, const char *fragment);
int exists(const char *path);
/* check_plan.py MODEL PLAN (after the plan file's JSON Schema, tests/plan_schema.py) and
 * roamc check MODEL PLAN, as run(tag). */
int check_plan_py(const char *tag, const char *model, const char *plan);
int roamc_check(const char *tag, const char *model, const char *plan);

/* The main of such a test: reads the arguments (usage "NAME ROAMC
 * CHECK_PLAN_PY WORKDIR", exit 2 when wrong), makes WORKDIR, finds out
 * whether check_plan.py can run, and runs the group.  Returns 77 (ctest's
 * SKIP) when every test passed but check_plan.py's steps could not run:
 * never a silent pass. */
int clirun_main(int argc, char **argv, const char *name, const struct CMUnitTest *tests,
                size_t n_tests);

#endif
