/* libFuzzer target: the shape inference paths.  The first input byte picks
 * the bindings (none, or small values for the symbols exporters use: batch,
 * N, sequence, ...), the rest is an ONNX model loaded as `roamc shapes` loads
 * it (unknown dims allowed) and printed as JSON; then once more as a plan
 * would load it.  Hand-built shape models seed it (tests/fuzz/seeds/shapes).
 *
 * Built only with -DROAMC_FUZZ=ON and clang (tests/fuzz/CMakeLists.txt). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "frontend.h"
#include "planner.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static const char *const symbols[] = {"batch",  "N",     "sequence",   "seq_len",
                                          "height", "width", "batch_size", "unk__0"};
    char err[2048], spec[64];
    fe_options opt = {0};
    uint8_t pick = data[0];
    for (size_t i = 0; i < 8; i++)
        if (pick & (1u << i)) {
            snprintf(spec, sizeof spec, "%s=%zu", symbols[i], i + 1);
            if (fe_options_parse(&opt, "--dim", spec, err, sizeof err)) break;
        }
    static FILE *devnull;
    if (!devnull) devnull = fopen("/dev/null", "w");
    fe_model m;
    opt.allow_unresolved = true;
    if (fe_load_bytes("fuzz.onnx", (fe_bytes){data + 1, size - 1}, &opt, &m, err, sizeof err) ==
        0) {
        if (devnull) planner_shapes_print(devnull, &m, 1);
        fe_free(&m);
    }
    opt.allow_unresolved = false;
    if (fe_load_bytes("fuzz.onnx", (fe_bytes){data + 1, size - 1}, &opt, &m, err, sizeof err) == 0)
        fe_free(&m);
    fe_options_free(&opt);
    return 0;
}
