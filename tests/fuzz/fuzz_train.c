/* libFuzzer target: a forward graph -> fe_train (--train, where the
 * inference-export scan, the BatchNorm/Dropout training semantics, the
 * precisions and accumulation live) -> graph_build of the derived step.
 * The first byte picks the set-up (loss, optimizer, precision, microbatches),
 * the rest is the ONNX file, written to one temporary file per process:
 * fe_train reads a path.  Seeds: tests/fuzz/models with a set-up byte in
 * front (any byte works; see tests/fuzz/CMakeLists.txt). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "frontend.h"
#include "graph.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char fuzz_path[64]; /* the per-process file the model bytes go to */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (!fuzz_path[0])
        snprintf(fuzz_path, sizeof fuzz_path, "/tmp/roamc_fuzz_train_%ld.onnx", (long)getpid());
    uint8_t pick = data[0];
    FILE *f = fopen(fuzz_path, "wb");
    if (!f) return 0;
    size_t wrote = fwrite(data + 1, 1, size - 1, f);
    if (fclose(f) != 0 || wrote != size - 1) return 0;
    fe_train_options t = {.loss = pick & 3,
                          .optimizer = (pick >> 2) % 5,
                          .precision = (pick >> 4) % 5,
                          .grad_accum = (pick & 0x80) ? 2 : 1};
    fe_options opt = {0};
    fe_train_result r;
    char err[2048];
    if (fe_train(fuzz_path, &opt, &t, &r, err, sizeof err) == 0) {
        graph g;
        if (graph_build(&r.model, 512, &g, err, sizeof err) == 0) graph_free(&g);
        fe_free(&r.model);
        free(r.summary);
        free(r.derived);
    }
    return 0;
}
