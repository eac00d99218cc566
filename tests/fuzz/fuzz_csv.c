/* libFuzzer target: a buffer-list CSV through `roamc layout`, exactly as the
 * command line runs it (cmd_layout: layout_csv_read, rounding, every layout
 * method, validation, the atomic writer).  The bytes go to a file in
 * $TMPDIR (cmd_layout reads a path); stdout goes to /dev/null.
 *
 * Built only with -DROAMC_FUZZ=ON and clang (tests/fuzz/CMakeLists.txt). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "layout_cmd.h"
#include "planner.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char in_path[512], out_path[512];

static void fuzz_init(void) {
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    snprintf(in_path, sizeof in_path, "%s/roamc_fuzz_csv_%ld.csv", dir, (long)getpid());
    snprintf(out_path, sizeof out_path, "%s/roamc_fuzz_csv_%ld.out.csv", dir, (long)getpid());
    if (!freopen("/dev/null", "w", stdout)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!in_path[0]) fuzz_init();
    FILE *f = fopen(in_path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    if (fclose(f)) abort();
    /* the method and alignment vary with the input, deterministically */
    static const char *const methods[] = {"roam", "llfb", "greedy", "bestfit", "pytorch"};
    static const char *const aligns[] = {"1", "512", "3"};
    unsigned h = 0;
    for (size_t i = 0; i < size; i++) h = h * 31u + data[i];
    char *argv[] = {"layout",
                    in_path,
                    "-o",
                    out_path,
                    "--method",
                    (char *)methods[h % 5],
                    "--align",
                    (char *)aligns[(h / 5) % 3],
                    "--time-limit",
                    "0.05",
                    NULL};
    (void)cmd_layout(10, argv);
    unlink(out_path);
    return 0;
}
