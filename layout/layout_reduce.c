/* layout_reduce.c — the reductions done before any exact search
 * (lay_reduce, layout_internal.h): empty buffers out, sizes rounded up to
 * align and counted in units of their gcd, and buffers that conflict with
 * every other one stacked at the bottom.  Kept apart from the searches
 * (layout_search.c, layout_bnb.c, layout_sweep.c), which all start from it.
 */
#include "layout.h"
#include "layout_internal.h"

#include <stdlib.h>
#include <string.h>

void lay_reduce(const layout_buffer *bufs, size_t n, uint64_t align, lay_reduced *r) {
    ROAMC_ASSERT(align >= 1);
    memset(r, 0, sizeof *r);
    r->orig = xmallocarray(n, sizeof *r->orig);
    r->size = xmallocarray(n, sizeof *r->size);
    r->offsets = xcalloc(n, sizeof *r->offsets);
    for (size_t i = 0; i < n; i++) {
        if (bufs[i].size == 0) continue;
        r->unit = roamc_gcd(r->unit, lay_round_up(bufs[i].size, align));
        r->orig[r->n++] = i;
    }
    if (r->unit == 0) r->unit = align;
    /* One buffer conflicts with all others when it starts no later than the
     * earliest end and ends no earlier than the latest start.  Taking those
     * out can make more of them, so repeat. */
    for (int changed = 1; changed && r->n > 0;) {
        changed = 0;
        int64_t min_end = INT64_MAX, max_start = INT64_MIN;
        for (size_t b = 0; b < r->n; b++) {
            const layout_buffer *x = &bufs[r->orig[b]];
            if (x->end < min_end) min_end = x->end;
            if (x->start > max_start) max_start = x->start;
        }
        size_t keep = 0;
        for (size_t b = 0; b < r->n; b++) {
            size_t i = r->orig[b];
            if (bufs[i].start <= min_end && bufs[i].end >= max_start) {
                r->offsets[i] = r->base;
                r->base += lay_round_up(bufs[i].size, align);
                changed = 1;
            } else {
                r->orig[keep++] = i;
            }
        }
        r->n = keep;
    }
    for (size_t b = 0; b < r->n; b++)
        r->size[b] = lay_round_up(bufs[r->orig[b]].size, align) / r->unit;
}

void lay_reduce_pinned(const layout_buffer *bufs, size_t n, uint64_t align, const lay_pins *pins,
                       lay_reduced *r) {
    ROAMC_ASSERT(align >= 1);
    memset(r, 0, sizeof *r);
    r->orig = xmallocarray(n, sizeof *r->orig);
    r->size = xmallocarray(n, sizeof *r->size);
    r->offsets = xcalloc(n, sizeof *r->offsets);
    r->pin_orig = xmallocarray(n, sizeof *r->pin_orig);
    r->pin_at = xmallocarray(n, sizeof *r->pin_at);
    r->pin_size = xmallocarray(n, sizeof *r->pin_size);
    if (pins->hint) r->hint = xmallocarray(n, sizeof *r->hint);
    r->unit = align;
    r->pinned = 1;
    for (size_t i = 0; i < n; i++) {
        uint64_t at = pins->off[i];
        if (at != LAY_FREE) {
            ROAMC_ASSERT(at % align == 0);
            r->offsets[i] = at;
        }
        if (bufs[i].size == 0) continue;
        r->unit = roamc_gcd(r->unit, lay_round_up(bufs[i].size, align));
        if (at == LAY_FREE) {
            if (r->hint) r->hint[r->n] = pins->hint[i];
            r->orig[r->n++] = i;
        } else {
            r->unit = roamc_gcd(r->unit, at);
            r->pin_orig[r->npins++] = i;
        }
    }
    for (size_t b = 0; b < r->n; b++)
        r->size[b] = lay_round_up(bufs[r->orig[b]].size, align) / r->unit;
    for (size_t j = 0; j < r->npins; j++) {
        size_t i = r->pin_orig[j];
        r->pin_at[j] = pins->off[i] / r->unit;
        r->pin_size[j] = lay_round_up(bufs[i].size, align) / r->unit;
    }
}

void lay_reduced_free(lay_reduced *r) {
    free(r->orig);
    free(r->size);
    free(r->offsets);
    free(r->pin_orig);
    free(r->pin_at);
    free(r->pin_size);
    free(r->hint);
    memset(r, 0, sizeof *r);
}
