/* layout_sections.c — time sections, twins and the mirror image of a
 * reduced layout problem, for the exact searches (layout_sections.h). */
#include "layout_sections.h"
#include "layout_internal.h"

#include <stdlib.h>
#include <string.h>

void lay_sections_sweep(lay_sections *sc, const layout_buffer *bufs, const size_t *orig,
                        const uint64_t *size, size_t n) {
    ROAMC_ASSERT(n >= 1);
    memset(sc, 0, sizeof *sc);
    sc->n = n;
    sc->orig = xmallocarray(n, sizeof *sc->orig);
    memcpy(sc->orig, orig, n * sizeof *sc->orig);
    if (size) {
        sc->size = xmallocarray(n, sizeof *sc->size);
        memcpy(sc->size, size, n * sizeof *sc->size);
    }
    /* sections lie between consecutive distinct values of start, end + 1 */
    int64_t *bp = xmallocarray(2 * n, sizeof *bp);
    for (size_t b = 0; b < n; b++) {
        bp[2 * b] = bufs[orig[b]].start;
        bp[2 * b + 1] = (int64_t)bufs[orig[b]].end + 1;
    }
    qsort(bp, 2 * n, sizeof *bp, lay_i64_cmp);
    size_t nbp = 0;
    for (size_t i = 0; i < 2 * n; i++)
        if (nbp == 0 || bp[nbp - 1] != bp[i]) bp[nbp++] = bp[i];
    sc->nsec = nbp - 1;
    sc->sa = xmallocarray(n, sizeof *sc->sa);
    sc->sb = xmallocarray(n, sizeof *sc->sb);
    sc->steps = xmallocarray(n, sizeof *sc->steps);
    for (size_t b = 0; b < n; b++) {
        const layout_buffer *x = &bufs[orig[b]];
        sc->sa[b] = lay_find_step(bp, nbp, x->start);
        sc->sb[b] = lay_find_step(bp, nbp, (int64_t)x->end + 1);
        sc->steps[b] = (uint64_t)((int64_t)x->end + 1 - x->start);
    }
    sc->bound = bp;
}

void lay_sections_init(lay_sections *sc, const layout_buffer *bufs, const lay_reduced *red) {
    lay_sections_sweep(sc, bufs, red->orig, red->size, red->n);
    const size_t n = sc->n;
    size_t spans = 0;
    for (size_t b = 0; b < n; b++) spans += sc->sb[b] - sc->sa[b];
    /* live lists: counts, prefix sums, fill (CSR) */
    size_t ns = sc->nsec;
    sc->live_begin = xcalloc(ns + 1, sizeof *sc->live_begin);
    sc->live_buf = xmallocarray(spans, sizeof *sc->live_buf);
    size_t *fill = xcalloc(ns + 1, sizeof *fill);
    for (size_t b = 0; b < n; b++)
        for (size_t k = sc->sa[b]; k < sc->sb[b]; k++) sc->live_begin[k + 1]++;
    for (size_t k = 0; k < ns; k++) sc->live_begin[k + 1] += sc->live_begin[k];
    for (size_t b = 0; b < n; b++)
        for (size_t k = sc->sa[b]; k < sc->sb[b]; k++)
            sc->live_buf[sc->live_begin[k] + fill[k]++] = b;
    free(fill);
}

void lay_sections_free(lay_sections *sc) {
    free(sc->orig);
    free(sc->size);
    free(sc->sa);
    free(sc->sb);
    free(sc->steps);
    free(sc->live_begin);
    free(sc->live_buf);
    free(sc->bound);
    memset(sc, 0, sizeof *sc);
}

void lay_sections_overlaps(const lay_sections *sc, size_t **begin, uint32_t **ov) {
    const size_t n = sc->n;
    lay_key *by = xmallocarray(n, sizeof *by);
    size_t *ob = xcalloc(n + 1, sizeof *ob);
    for (size_t b = 0; b < n; b++) by[b] = (lay_key){sc->sa[b], sc->sb[b], 0, b};
    qsort(by, n, sizeof *by, lay_key_cmp);
    /* count, then fill: pairs (i < j in sweep order) with sa[j] < sb[i] */
    size_t pairs = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n && by[j].k1 < by[i].k2; j++) {
            ob[by[i].idx + 1]++;
            ob[by[j].idx + 1]++;
            pairs++;
        }
    for (size_t b = 0; b < n; b++) ob[b + 1] += ob[b];
    uint32_t *o = xmallocarray(2 * pairs, sizeof *o);
    size_t *pos = xmallocarray(n, sizeof *pos);
    for (size_t b = 0; b < n; b++) pos[b] = ob[b];
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n && by[j].k1 < by[i].k2; j++) {
            o[pos[by[i].idx]++] = (uint32_t)by[j].idx;
            o[pos[by[j].idx]++] = (uint32_t)by[i].idx;
        }
    free(pos);
    free(by);
    *begin = ob;
    *ov = o;
}

void lay_sections_totals(const lay_sections *sc, uint64_t *total, uint64_t *cuts) {
    const uint64_t *size = sc->size;
    for (size_t k = 0; k < sc->nsec; k++) total[k] = cuts[k] = 0;
    for (size_t b = 0; b < sc->n; b++)
        for (size_t k = sc->sa[b]; k < sc->sb[b]; k++) {
            total[k] += size[b];
            if (k + 1 < sc->sb[b]) cuts[k]++;
        }
}

void lay_sections_twins(const lay_sections *sc, const uint64_t *key, size_t *twin) {
    const uint64_t *size = sc->size;
    lay_key *v = xmallocarray(sc->n, sizeof *v);
    for (size_t b = 0; b < sc->n; b++)
        v[b] = (lay_key){((uint64_t)sc->sa[b] << 32) | sc->sb[b], size[b], key ? key[b] : b, b};
    qsort(v, sc->n, sizeof *v, lay_key_cmp);
    for (size_t i = 0; i < sc->n; i++) {
        int same = i > 0 && v[i - 1].k1 == v[i].k1 && v[i - 1].k2 == v[i].k2;
        twin[v[i].idx] = same ? v[i - 1].idx : SIZE_MAX;
    }
    free(v);
}

layout_buffer *lay_mirror(const layout_buffer *bufs, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (bufs[i].start == INT32_MIN) return NULL;
    layout_buffer *m = xmallocarray(n, sizeof *m);
    for (size_t i = 0; i < n; i++)
        m[i] = (layout_buffer){bufs[i].size, -bufs[i].end, -bufs[i].start};
    return m;
}

void lay_merge_sort(void *base, void *tmp, size_t n, size_t size,
                    int (*before)(const void *x, const void *y, const void *ctx), const void *ctx) {
    if (n < 2) return;
    size_t h = n / 2;
    char *v = base, *t = tmp;
    lay_merge_sort(v, tmp, h, size, before, ctx);
    lay_merge_sort(v + h * size, tmp, n - h, size, before, ctx);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        size_t from = before(v + j * size, v + i * size, ctx) ? j++ : i++;
        memcpy(t + k++ * size, v + from * size, size);
    }
    memcpy(t + k * size, v + i * size, (h - i) * size);
    k += h - i;
    memcpy(t + k * size, v + j * size, (n - j) * size);
    memcpy(v, t, n * size);
}
