/* layout_roam.c — ROAM's layout by concatenation of group layouts (see
 * layout.h, layout_roam, and the paper's section IV-B).
 *
 * Why groups: an exact layout of every buffer at once is out of reach for
 * training graphs (tens of thousands of buffers), while a group (one leaf
 * subgraph: a forward range with its backward twin) is small enough for
 * layout_exact.  Why long-lived buffers at the bottom of each group: the
 * groups are then stacked with the shorter-lived group on top, at the sum of
 * the long-lived heights below (eq. 9); a group's temporaries, which live
 * before and after the inner groups' window, reuse the inner groups'
 * addresses, and nothing long-lived is left scattered among short gaps.
 * Stacking is exact for perfectly nested windows; whatever it gets wrong
 * is a set of conflicting pairs, repaired by moving the cheaper buffer of
 * each (small and short-lived: the temporaries, Fig. 9).
 */
#include "layout.h"
#include "layout_internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* Sort keys with the index last, so every order is total. */
typedef struct roam_key {
    uint64_t k1, k2, k3;
    size_t idx;
} roam_key;

static int roam_key_cmp(const void *pa, const void *pb)
{
    const roam_key *a = pa, *b = pb;
    if (a->k1 != b->k1)
        return a->k1 < b->k1 ? -1 : 1;
    if (a->k2 != b->k2)
        return a->k2 < b->k2 ? -1 : 1;
    if (a->k3 != b->k3)
        return a->k3 < b->k3 ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

static uint64_t roam_len(const layout_buffer *b)
{
    return (uint64_t)((int64_t)b->end - b->start) + 1;
}

static uint64_t roam_step_key(int32_t t)
{
    return (uint64_t)(int64_t)t ^ 0x8000000000000000ULL;
}

/* One group: its buffers (indices into the input) and its window. */
typedef struct roam_group {
    size_t *idx;
    size_t n;
    int32_t lo, hi; /* first start, last end */
    unsigned flags;
    uint64_t base;      /* eq. 9 */
    uint64_t low_height; /* height of its long-lived part */
} roam_group;

static int roam_i32_cmp(const void *pa, const void *pb)
{
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    return (a > b) - (a < b);
}

/* The default long-lived marks of one group: buffers live across the
 * longest stretch between consecutive start/end steps of the group (only
 * when that stretch holds at least one step of its own). */
static int roam_default_low(const layout_buffer *bufs, const roam_group *gr, unsigned char *low)
{
    int32_t *ev = malloc((2 * gr->n + 1) * sizeof *ev);
    if (!ev)
        return -1;
    for (size_t k = 0; k < gr->n; k++) {
        ev[2 * k] = bufs[gr->idx[k]].start;
        ev[2 * k + 1] = bufs[gr->idx[k]].end;
    }
    qsort(ev, 2 * gr->n, sizeof *ev, roam_i32_cmp);
    int64_t best = 1;
    int32_t a = 0, b = 0;
    for (size_t k = 0; k + 1 < 2 * gr->n; k++)
        if ((int64_t)ev[k + 1] - ev[k] > best)
            best = (int64_t)ev[k + 1] - ev[k], a = ev[k], b = ev[k + 1];
    for (size_t k = 0; k < gr->n; k++) {
        const layout_buffer *x = &bufs[gr->idx[k]];
        low[gr->idx[k]] = best > 1 && x->start <= a && x->end >= b;
    }
    free(ev);
    return 0;
}

/* Exact layout of a subset of the buffers at base, within *work: writes
 * offsets of the subset, returns its height (0 when empty, UINT64_MAX on out
 * of memory) and takes what it spent from *work. */
static uint64_t roam_exact(const layout_buffer *bufs, const size_t *idx, size_t n, uint64_t align, uint64_t *work,
                           uint64_t share, double deadline, uint64_t base, uint64_t *offsets, int *proven,
                           int *timed_out)
{
    *proven = 1;
    if (n == 0)
        return 0;
    layout_buffer *sub = calloc(n, sizeof *sub);
    uint64_t *off = malloc(n * sizeof *off);
    uint64_t h = UINT64_MAX;
    if (sub && off) {
        for (size_t k = 0; k < n; k++)
            sub[k] = bufs[idx[k]];
        double left = deadline - lay_now();
        /* a work budget of 0 would mean the default: give at least 1 */
        layout_effort e = {share ? share : 1, left > 1e-3 ? left : 1e-3, 0};
        layout_result res = {0};
        h = layout_exact(sub, n, align, NULL, &e, off, &res);
        *proven = res.proven_optimal;
        *timed_out |= res.stopped_by_time;
        *work -= res.work_spent < *work ? res.work_spent : *work;
        if (h != UINT64_MAX)
            for (size_t k = 0; k < n; k++)
                offsets[idx[k]] = base + off[k];
    }
    free(sub);
    free(off);
    return h;
}

/* Lays out every group (steps 1-2 of layout_roam): proposed offsets of all
 * grouped buffers.  Returns 0, or -1 on out of memory. */
static int roam_groups(const layout_buffer *bufs, uint64_t align, const layout_roam_input *in, roam_group *grs,
                       const unsigned char *low, uint64_t *proposed, layout_roam_stats *st)
{
    size_t ng = in->n_groups;
    roam_key *ord = malloc((ng ? ng : 1) * sizeof *ord);
    size_t *tmp = NULL, cap = 0;
    if (!ord)
        return -1;
    size_t nonempty = 0;
    for (size_t g = 0; g < ng; g++) {
        /* bottom groups first, then the longest windows */
        uint64_t w = grs[g].n ? (uint64_t)((int64_t)grs[g].hi - grs[g].lo) + 1 : 0;
        ord[g] = (roam_key){(grs[g].flags & LAYOUT_ROAM_BOTTOM) ? 0 : 1, ~w, roam_step_key(grs[g].lo), g};
        nonempty += grs[g].n > 0;
    }
    qsort(ord, ng, sizeof *ord, roam_key_cmp);
    double deadline = in->time_limit_s > 0 ? lay_now() + in->time_limit_s : 1e300;
    uint64_t work = in->work ? in->work : LAYOUT_DEFAULT_WORK;
    uint64_t base = 0;
    int rc = 0;
    size_t left = nonempty;
    for (size_t r = 0; r < ng && rc == 0; r++) {
        roam_group *gr = &grs[ord[r].idx];
        if (gr->n == 0)
            continue;
        if (gr->n > cap) {
            free(tmp);
            cap = gr->n;
            tmp = malloc(cap * sizeof *tmp);
            if (!tmp) {
                rc = -1;
                break;
            }
        }
        /* long-lived part first, then the rest above it */
        size_t nl = 0, ns = 0;
        for (size_t k = 0; k < gr->n; k++)
            if (low[gr->idx[k]])
                tmp[nl++] = gr->idx[k];
        for (size_t k = 0; k < gr->n; k++)
            if (!low[gr->idx[k]])
                tmp[nl + ns++] = gr->idx[k];
        /* an equal share of the work left, split by buffer counts; work
         * (unlike time) keeps the result the same on every machine */
        uint64_t share = work / left--;
        int pl = 1, ps = 1;
        uint64_t sl = (uint64_t)((double)share * (double)nl / (double)gr->n);
        uint64_t hl = roam_exact(bufs, tmp, nl, align, &work, sl, deadline, base, proposed, &pl,
                                 &st->stopped_by_time);
        if (hl != UINT64_MAX)
            hl = lay_round_up(hl, align); /* keeps every base aligned */
        uint64_t ss = share - (sl < share ? sl : share);
        uint64_t hs = hl == UINT64_MAX ? UINT64_MAX
                                       : roam_exact(bufs, tmp + nl, ns, align, &work, ss, deadline, base + hl,
                                                    proposed, &ps, &st->stopped_by_time);
        if (hs == UINT64_MAX) {
            rc = -1;
            break;
        }
        gr->base = base;
        gr->low_height = hl;
        st->groups++;
        st->groups_proven += pl && ps;
        st->low += nl;
        if (base + hl + hs > st->stacked)
            st->stacked = base + hl + hs;
        base += hl; /* eq. 9: the next group starts on top of the long-lived part */
    }
    free(tmp);
    free(ord);
    return rc;
}

/* Steps 3-4 with one order of the re-placed buffers (smallest first when
 * small_first, else largest first): writes offsets, returns the height,
 * UINT64_MAX on out of memory. */
static uint64_t roam_place(const layout_buffer *bufs, size_t n, uint64_t align, const roam_key *keep, size_t nk,
                           const uint64_t *proposed, const roam_key *rest, size_t nr, int small_first,
                           uint64_t *offsets, size_t *repaired)
{
    lay_placer *pl = lay_placer_new(bufs, n, align);
    roam_key *moved = malloc((nk ? nk : 1) * sizeof *moved);
    size_t nm = 0;
    int rc = pl && moved ? 0 : -1;
    for (size_t k = 0; k < nk && rc == 0; k++) {
        size_t i = keep[k].idx;
        int r = lay_placer_try(pl, i, proposed[i]);
        if (r < 0)
            rc = -1;
        else if (r == 1)
            offsets[i] = proposed[i];
        else {
            uint64_t sz = bufs[i].size, len = roam_len(&bufs[i]);
            moved[nm++] = small_first ? (roam_key){sz, len, 0, i} : (roam_key){~sz, ~len, 0, i};
        }
    }
    if (rc == 0)
        qsort(moved, nm, sizeof *moved, roam_key_cmp);
    for (size_t k = 0; k < nm && rc == 0; k++)
        rc = lay_placer_fit(pl, moved[k].idx, 0, &offsets[moved[k].idx]);
    for (size_t k = 0; k < nr && rc == 0; k++)
        rc = lay_placer_fit(pl, rest[k].idx, 1, &offsets[rest[k].idx]);
    lay_placer_free(pl);
    free(moved);
    *repaired = nm;
    return rc == 0 ? layout_height(bufs, n, offsets) : UINT64_MAX;
}

uint64_t layout_roam(const layout_buffer *bufs, size_t n, uint64_t align, const layout_roam_input *in,
                     uint64_t *offsets, layout_roam_stats *stp)
{
    assert(align >= 1 && in && (in->group || n == 0));
    layout_roam_stats local;
    layout_roam_stats *st = stp ? stp : &local;
    memset(st, 0, sizeof *st);
    size_t ng = in->n_groups, n1 = n ? n : 1;
    roam_group *grs = calloc(ng ? ng : 1, sizeof *grs);
    size_t *count = calloc(ng + 1, sizeof *count);
    size_t *pool = malloc(n1 * sizeof *pool);
    unsigned char *low = calloc(n1, 1);
    uint64_t *proposed = calloc(n1, sizeof *proposed), *alt = malloc(n1 * sizeof *alt);
    roam_key *keep = malloc(n1 * sizeof *keep), *rest = malloc(n1 * sizeof *rest);
    uint64_t h = UINT64_MAX;
    int rc = grs && count && pool && low && proposed && alt && keep && rest ? 0 : -1;
    /* buffers by group (counting sort keeps index order within a group) */
    for (size_t i = 0; i < n && rc == 0; i++) {
        assert(in->group[i] >= -1 && (in->group[i] < 0 || (size_t)in->group[i] < ng));
        if (in->group[i] >= 0)
            count[in->group[i] + 1]++;
    }
    for (size_t g = 0; g < ng && rc == 0; g++) {
        count[g + 1] += count[g];
        grs[g].idx = pool + count[g];
        grs[g].flags = in->group_flags ? in->group_flags[g] : 0;
        grs[g].lo = INT32_MAX, grs[g].hi = INT32_MIN;
    }
    size_t nk = 0, nr = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        int g = in->group[i];
        if (g < 0) {
            rest[nr++] = (roam_key){~roam_len(&bufs[i]), ~bufs[i].size, 0, i};
            continue;
        }
        roam_group *gr = &grs[g];
        gr->idx[gr->n++] = i;
        if (bufs[i].start < gr->lo)
            gr->lo = bufs[i].start;
        if (bufs[i].end > gr->hi)
            gr->hi = bufs[i].end;
        if (in->low)
            low[i] = in->low[i] != 0;
    }
    for (size_t g = 0; g < ng && rc == 0 && !in->low; g++)
        if (grs[g].n && roam_default_low(bufs, &grs[g], low))
            rc = -1;
    if (rc == 0)
        rc = roam_groups(bufs, align, in, grs, low, proposed, st);
    if (rc == 0) {
        /* keep order: long-lived first (they are the base of eq. 9), then
         * larger and longer-lived buffers, whose moving would cost most */
        for (size_t i = 0; i < n; i++)
            if (in->group[i] >= 0)
                keep[nk++] = (roam_key){low[i] ? 0 : 1, ~bufs[i].size, ~roam_len(&bufs[i]), i};
        qsort(keep, nk, sizeof *keep, roam_key_cmp);
        qsort(rest, nr, sizeof *rest, roam_key_cmp);
        st->grouped = nk, st->leftovers = nr;
        /* the paper re-places the smallest, shortest-lived first; largest
         * first often packs tighter: both are cheap, keep the lower (ties:
         * the paper's) */
        size_t rep_a = 0, rep_b = 0;
        h = roam_place(bufs, n, align, keep, nk, proposed, rest, nr, 1, offsets, &rep_a);
        uint64_t hb = h == UINT64_MAX ? UINT64_MAX
                                      : roam_place(bufs, n, align, keep, nk, proposed, rest, nr, 0, alt, &rep_b);
        if (h != UINT64_MAX && hb < h) {
            memcpy(offsets, alt, n * sizeof *offsets);
            h = hb;
            rep_a = rep_b;
        }
        st->repaired = rep_a;
        if (hb == UINT64_MAX)
            h = UINT64_MAX;
    }
    if (h != UINT64_MAX && layout_validate(bufs, n, offsets, align, NULL, NULL) != 0) {
        assert(!"layout_roam built an invalid layout");
        st->fallback = 1;
        h = layout_best_heuristic(bufs, n, align, offsets, NULL);
    }
    free(grs);
    free(count);
    free(pool);
    free(low);
    free(proposed);
    free(alt);
    free(keep);
    free(rest);
    return h;
}
