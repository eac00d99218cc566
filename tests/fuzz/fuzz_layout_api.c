/* libFuzzer target: the layout API (roamc.h, roamc_layout_*) on problems
 * read from the bytes: buffers with sizes, alignments (any value: bad ones
 * must be refused), lifetimes or none, conflict edges (indices out of range
 * and self edges included), pins (misaligned, overlapping), a capacity, and
 * every method.  Every answer of a solve that returns ROAMC_OK or
 * ROAMC_NO_FIT with offsets is checked: aligned, pins kept, no two
 * conflicting buffers overlap, the height their top, the bounds below it.
 *
 * Built only with -DROAMC_FUZZ=ON and clang (tests/fuzz/CMakeLists.txt). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "roamc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reads the next little-endian value of n bytes (0 past the end). */
static uint64_t fz_take(const uint8_t **p, const uint8_t *end, int n) {
    uint64_t v = 0;
    for (int k = 0; k < n && *p < end; k++) v |= (uint64_t) * (*p)++ << (8 * k);
    return v;
}

enum { FZ_MAX = 64 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *p = data, *end = data + size;
    roamc_layout *l = roamc_layout_new();
    uint64_t sz[FZ_MAX], al[FZ_MAX], pin[FZ_MAX];
    int64_t first[FZ_MAX], last[FZ_MAX];
    int pinned[FZ_MAX] = {0};
    size_t n = 0, edges[4 * FZ_MAX][2], ne = 0;
    unsigned flags = (unsigned)fz_take(&p, end, 1);
    while (p < end && n < FZ_MAX) {
        unsigned op = (unsigned)fz_take(&p, end, 1);
        if (op % 4 != 3) { /* a buffer */
            uint64_t s = fz_take(&p, end, op & 4 ? 8 : 2);
            uint64_t a = (uint64_t)1 << (fz_take(&p, end, 1) % 14);
            if (op & 8) a = fz_take(&p, end, 1); /* any alignment, often bad */
            int64_t f = (int64_t)fz_take(&p, end, 1) - (op & 16 ? 3 : 0);
            int64_t t = f + (int64_t)fz_take(&p, end, 1) % 16 - (op & 32 ? 2 : 0);
            size_t idx;
            roamc_status st = op % 4 == 2 ? roamc_layout_add_buffer(l, s, a, &idx)
                                          : roamc_layout_add_interval(l, s, a, f, t, &idx);
            if (st != ROAMC_OK) continue;
            sz[n] = s, al[n] = a, first[n] = op % 4 == 2 ? -1 : f, last[n] = t;
            if (op & 64) {
                uint64_t off = fz_take(&p, end, 2) * (op & 128 ? a : 1);
                if (roamc_layout_pin(l, idx, off) == ROAMC_OK) pinned[n] = 1, pin[n] = off;
            }
            n++;
        } else { /* a conflict edge */
            size_t a = (size_t)fz_take(&p, end, 1), b = (size_t)fz_take(&p, end, 1);
            if (roamc_layout_add_conflict(l, a, b) == ROAMC_OK && ne < 4 * FZ_MAX)
                edges[ne][0] = a, edges[ne][1] = b, ne++;
        }
    }
    static const char *const methods[] = {"roam", "llfb", "greedy", "bestfit", "pytorch"};
    roamc_layout_set(l, "method", methods[flags % 5]);
    roamc_layout_set(l, "work", "20000");
    roamc_layout_set(l, "time-limit", "0.05");
    if (flags & 8) {
        char cap[32];
        snprintf(cap, sizeof cap, "%u", 1u + (flags >> 4) * 4096u);
        roamc_layout_set(l, "capacity", cap);
    }
    roamc_status st = roamc_layout_solve(l);
    size_t no = 0;
    const uint64_t *off = roamc_layout_offsets(l, &no);
    int pytorch = flags % 5 == 4;
    if ((st == ROAMC_OK || (st == ROAMC_NO_FIT && roamc_layout_height(l))) && !pytorch) {
        if (no != n) abort();
        uint64_t top = 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t r = (sz[i] + al[i] - 1) / al[i] * al[i];
            if (off[i] % al[i]) abort();
            if (pinned[i] && off[i] != pin[i]) abort();
            if (r && off[i] + r > top) top = off[i] + r;
            for (size_t j = i + 1; j < n; j++) {
                uint64_t q = (sz[j] + al[j] - 1) / al[j] * al[j];
                int c =
                    first[i] >= 0 && first[j] >= 0 && first[i] <= last[j] && first[j] <= last[i];
                for (size_t e = 0; e < ne && !c; e++)
                    c = (edges[e][0] == i && edges[e][1] == j) ||
                        (edges[e][0] == j && edges[e][1] == i);
                if (c && r && q && off[i] < off[j] + q && off[j] < off[i] + r) abort();
            }
        }
        if (roamc_layout_height(l) != top) abort();
        if (roamc_layout_lower_bound(l) > top || roamc_layout_proven_bound(l) > top) abort();
    }
    roamc_layout_free(l);
    return 0;
}
