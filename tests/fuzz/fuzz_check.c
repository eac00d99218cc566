/* libFuzzer target: plan JSON through `roamc check MODEL PLAN`
 * (plan_check_file).  The first byte of the input picks one of the
 * committed seed models (tests/fuzz/models/); the rest is the plan file.
 *
 * Built only with -DROAMC_FUZZ=ON and clang (tests/fuzz/CMakeLists.txt). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "frontend.h"
#include "check.h"
#include "planner.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifndef ROAMC_FUZZ_MODELS
#error "ROAMC_FUZZ_MODELS: the folder of the check target's models"
#endif

static const char *const models[] = {"training.onnx", "inplace.onnx", "views.onnx",
                                     "multiout.onnx"};
#define N_MODELS (sizeof models / sizeof models[0])

static char plan_path[512];
static FILE *devnull;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (!devnull) {
        const char *dir = getenv("TMPDIR");
        if (!dir || !*dir) dir = "/tmp";
        snprintf(plan_path, sizeof plan_path, "%s/roamc_fuzz_check_%ld.json", dir, (long)getpid());
        devnull = fopen("/dev/null", "w");
        if (!devnull) abort();
        /* every model must load, or every input would just be "unreadable" */
        for (size_t i = 0; i < N_MODELS; i++) {
            char path[1024], err[1024];
            fe_model m;
            snprintf(path, sizeof path, "%s/%s", ROAMC_FUZZ_MODELS, models[i]);
            if (fe_load(path, NULL, &m, err, sizeof err)) {
                fprintf(stderr, "fuzz_check: %s\n", err);
                abort();
            }
            fe_free(&m);
        }
    }
    char model[1024];
    snprintf(model, sizeof model, "%s/%s", ROAMC_FUZZ_MODELS, models[data[0] % N_MODELS]);
    FILE *f = fopen(plan_path, "wb");
    if (!f) abort();
    if (size > 1 && fwrite(data + 1, 1, size - 1, f) != size - 1) abort();
    if (fclose(f)) abort();
    int rc = plan_check_file(model, NULL, NULL, plan_path, devnull, devnull);
    if (rc < 0 || rc > 2) abort();
    return 0;
}
