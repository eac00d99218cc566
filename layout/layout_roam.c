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

#include <stdlib.h>
#include <string.h>

static uint64_t roam_len(const layout_buffer *b) {
    return (uint64_t)((int64_t)b->end - b->start) + 1;
}

static uint64_t roam_step_key(int32_t t) {
    return (uint64_t)(int64_t)t ^ 0x8000000000000000ULL;
}

/* One group: its buffers (indices into the input) and its window. */
typedef struct roam_group {
    size_t *idx;
    size_t n;
    int32_t lo, hi; /* first start, last end */
    unsigned flags;
    uint64_t low_height; /* height of its long-lived part: what it adds to the base above (eq. 9) */
    uint64_t height;     /* height of its whole layout */
} roam_group;

/* The default long-lived marks of one group: buffers live across the
 * longest stretch between consecutive start/end steps of the group (only
 * when that stretch holds at least one step of its own). */
static void roam_default_low(const layout_buffer *bufs, const roam_group *gr, unsigned char *low) {
    int32_t *ev = xmallocarray(2 * gr->n, sizeof *ev);
    for (size_t k = 0; k < gr->n; k++) {
        ev[2 * k] = bufs[gr->idx[k]].start;
        ev[2 * k + 1] = bufs[gr->idx[k]].end;
    }
    qsort(ev, 2 * gr->n, sizeof *ev, lay_i32_cmp);
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
}

/* One call of layout_roam: its input, the long-lived marks, the work and
 * time left for the groups' exact layouts, and where the group layouts go. */
typedef struct roam_run {
    const layout_buffer *bufs;
    size_t n;
    uint64_t align;
    const layout_roam_input *in;
    const unsigned char *low; /* per buffer: long-lived in its group */
    lay_budget bud;           /* of the exact layouts of all groups; stop is
                                 LAY_STOP_TIME once one hit the backstop */
    uint64_t *rel;            /* per grouped buffer: offset in its group's layout */
    layout_roam_stats *st;
} roam_run;

/* The buffers idx[0..n) of bufs, as a problem of their own. */
static layout_buffer *roam_subset(const layout_buffer *bufs, const size_t *idx, size_t n) {
    layout_buffer *sub = xmallocarray(n, sizeof *sub);
    for (size_t k = 0; k < n; k++) sub[k] = bufs[idx[k]];
    return sub;
}

/* Exact layout of the buffers idx[0..n) at base on share of r's work:
 * writes their offsets into r->rel, returns their height (0 when empty)
 * and takes what it spent from r->bud. */
static uint64_t roam_exact(roam_run *r, const size_t *idx, size_t n, uint64_t share, uint64_t base,
                           int *proven) {
    *proven = 1;
    if (n == 0) return 0;
    layout_buffer *sub = roam_subset(r->bufs, idx, n);
    uint64_t *off = xmallocarray(n, sizeof *off);
    double left = r->bud.deadline - roamc_now();
    /* a work budget of 0 would mean the default: give at least 1 */
    layout_effort e = {share ? share : 1, left > 1e-3 ? left : 1e-3, 0, LAYOUT_SHARES_EQUAL, NULL};
    layout_result res = {0};
    uint64_t h = layout_exact(&(layout_problem){sub, n, r->align}, NULL, &e, off, &res);
    *proven = res.proven_optimal;
    if (res.stopped_by_time) r->bud.stop = LAY_STOP_TIME;
    r->bud.work -= res.work_spent < r->bud.work ? res.work_spent : r->bud.work;
    for (size_t k = 0; k < n; k++) r->rel[idx[k]] = base + off[k];
    free(sub);
    free(off);
    return h;
}

/* The other reading of "activations at the lowest offsets" (Fig. 8:
 * temporaries of the backward pass reuse the space of activations already
 * freed): the long-lived part stays where roam_exact put it, and the group's
 * other buffers (idx[nl..n)) are placed around it, longest first, best fit.
 * When the group is then lower than stacked_height, their offsets in
 * r->rel (relative to base) are replaced.  Returns the group's height
 * either way. */
static uint64_t roam_fill(roam_run *r, const size_t *idx, size_t nl, size_t n, uint64_t base,
                          uint64_t stacked_height) {
    uint64_t *rel = r->rel;
    layout_buffer *sub = roam_subset(r->bufs, idx, n);
    uint64_t *off = xmallocarray(n, sizeof *off);
    lay_key *ord = xmallocarray(n - nl, sizeof *ord);
    lay_placer *pl = lay_placer_new(sub, n, r->align);
    for (size_t k = 0; k < nl; k++) {
        off[k] = rel[idx[k]] - base;
        int placed = lay_placer_try(pl, k, off[k]);
        ROAMC_ASSERT(placed); /* an exact layout of the long-lived part is valid */
    }
    for (size_t k = nl; k < n; k++) ord[k - nl] = (lay_key){~roam_len(&sub[k]), ~sub[k].size, 0, k};
    qsort(ord, n - nl, sizeof *ord, lay_key_cmp);
    for (size_t k = 0; k < n - nl; k++) off[ord[k].idx] = lay_placer_fit(pl, ord[k].idx, 1);
    uint64_t h = layout_height(sub, n, off);
    if (h < stacked_height)
        for (size_t k = nl; k < n; k++) rel[idx[k]] = base + off[k];
    else
        h = stacked_height;
    lay_placer_free(pl);
    free(sub);
    free(off);
    free(ord);
    return h;
}

/* Lays out one group (step 1 of layout_roam), with share of the work:
 * its long-lived part first, then the rest above it (or around it:
 * in->fill), the share split by buffer counts.  r->rel gets the offsets of
 * its buffers within the group's layout; tmp is scratch for gr->n
 * indices. */
static void roam_group_layout(roam_run *r, roam_group *gr, uint64_t share, size_t *tmp) {
    const unsigned char *low = r->low;
    const uint64_t base = 0;
    size_t nl = 0, ns = 0;
    for (size_t k = 0; k < gr->n; k++)
        if (low[gr->idx[k]]) tmp[nl++] = gr->idx[k];
    for (size_t k = 0; k < gr->n; k++)
        if (!low[gr->idx[k]]) tmp[nl + ns++] = gr->idx[k];
    int pl = 1, ps = 1;
    uint64_t sl = (uint64_t)((double)share * (double)nl / (double)gr->n);
    uint64_t hl = roam_exact(r, tmp, nl, sl, base, &pl);
    hl = lay_round_up(hl, r->align); /* keeps every base aligned */
    uint64_t ss = share - (sl < share ? sl : share);
    uint64_t hs = roam_exact(r, tmp + nl, ns, ss, base + hl, &ps);
    gr->low_height = hl;
    /* may be below hl when filling uses the rounding slack */
    gr->height = r->in->fill ? roam_fill(r, tmp, nl, gr->n, base, hl + hs) : hl + hs;
    layout_roam_stats *st = r->st;
    st->groups++;
    st->groups_proven += pl && ps;
    st->low += nl;
}

/* Lays out every group on its own (step 1 of layout_roam): r->rel gets the
 * offsets of all grouped buffers within their group's layout.  Groups are
 * solved in the paper's stacking order, which only decides how the work
 * budget is shared. */
static void roam_groups(roam_run *r, roam_group *grs) {
    size_t ng = r->in->n_groups;
    lay_key *ord = xmallocarray(ng, sizeof *ord);
    size_t nonempty = 0, largest = 0;
    for (size_t g = 0; g < ng; g++) {
        /* bottom groups first, then the longest windows */
        uint64_t w = grs[g].n ? (uint64_t)((int64_t)grs[g].hi - grs[g].lo) + 1 : 0;
        ord[g] =
            (lay_key){(grs[g].flags & LAYOUT_ROAM_BOTTOM) ? 0 : 1, ~w, roam_step_key(grs[g].lo), g};
        nonempty += grs[g].n > 0;
        if (grs[g].n > largest) largest = grs[g].n;
    }
    qsort(ord, ng, sizeof *ord, lay_key_cmp);
    size_t *tmp = xmallocarray(largest, sizeof *tmp);
    size_t left = nonempty;
    for (size_t k = 0; k < ng; k++) {
        roam_group *gr = &grs[ord[k].idx];
        if (gr->n == 0) continue;
        /* an equal share of the work left; work (unlike time) keeps the
         * result the same on every machine */
        uint64_t share = r->bud.work / left--;
        roam_group_layout(r, gr, share, tmp);
    }
    free(tmp);
    free(ord);
}

/* The stacking orders tried (step 2 of layout_roam).  The paper's puts the
 * shorter-lived layout on top, which is exact when windows nest; the
 * subgraphs of a split independent subgraph do not nest, and there the
 * order by first or by last step often collides less. */
typedef enum roam_stacking {
    ROAM_STACK_WINDOW, /* longest window first (the paper) */
    ROAM_STACK_START,  /* earliest first step first */
    ROAM_STACK_END,    /* latest last step first */
    ROAM_STACK_COUNT
} roam_stacking;

/* Stacks the groups in one order (eq. 9): proposed[i] = base of i's group
 * + rel[i] for every grouped buffer.  Returns the stacked height (before
 * any repair). */
static uint64_t roam_stack(const roam_group *grs, size_t ng, roam_stacking how, const int *group,
                           size_t n, const uint64_t *rel, uint64_t *proposed) {
    lay_key *ord = xmallocarray(ng, sizeof *ord);
    uint64_t *base = xmallocarray(ng, sizeof *base);
    for (size_t g = 0; g < ng; g++) {
        const roam_group *gr = &grs[g];
        uint64_t bottom =
            (gr->flags & LAYOUT_ROAM_BOTTOM) ? 0 : 1; /* bottom groups first in every order */
        uint64_t w = gr->n ? (uint64_t)((int64_t)gr->hi - gr->lo) + 1 : 0;
        switch (how) {
        case ROAM_STACK_WINDOW: ord[g] = (lay_key){bottom, ~w, roam_step_key(gr->lo), g}; break;
        case ROAM_STACK_START: ord[g] = (lay_key){bottom, roam_step_key(gr->lo), ~w, g}; break;
        default: ord[g] = (lay_key){bottom, ~roam_step_key(gr->hi), ~w, g}; break;
        }
    }
    qsort(ord, ng, sizeof *ord, lay_key_cmp);
    uint64_t b = 0, top = 0;
    for (size_t r = 0; r < ng; r++) {
        const roam_group *gr = &grs[ord[r].idx];
        base[ord[r].idx] = b;
        if (gr->n && b + gr->height > top) top = b + gr->height;
        b += gr->low_height; /* eq. 9: the next group starts on top of the long-lived part */
    }
    for (size_t i = 0; i < n; i++)
        if (group[i] >= 0) proposed[i] = base[group[i]] + rel[i];
    free(ord);
    free(base);
    return top;
}

/* The buffers of steps 3-4: the grouped ones in the order in which they
 * keep their stacked offsets (keep), and the leftovers in their order of
 * step 4 (rest). */
typedef struct roam_order {
    const lay_key *keep;
    size_t nk;
    const lay_key *rest;
    size_t nr;
} roam_order;

/* Fits the re-placed buffers (moved, in order) and the ungrouped ones
 * (ord->rest) into pl; returns the height. */
static uint64_t roam_fit_rest(lay_placer *pl, const roam_run *r, const lay_key *moved, size_t nm,
                              const roam_order *ord, uint64_t *offsets) {
    for (size_t k = 0; k < nm; k++) offsets[moved[k].idx] = lay_placer_fit(pl, moved[k].idx, 0);
    for (size_t k = 0; k < ord->nr; k++)
        offsets[ord->rest[k].idx] = lay_placer_fit(pl, ord->rest[k].idx, 1);
    return layout_height(r->bufs, r->n, offsets);
}

/* Steps 3-4 with both orders of the re-placed buffers: smallest first
 * into off[0] (height h[0]) and largest first into off[1] (h[1]).  The
 * kept buffers are the same in both, so they are placed once and the
 * placer is copied for the second order (the keep pass is most of the
 * work).  *repaired gets the number re-placed. */
static void roam_place(const roam_run *r, const roam_order *ord, const uint64_t *proposed,
                       uint64_t *off[2], uint64_t h[2], size_t *repaired) {
    const layout_buffer *bufs = r->bufs;
    lay_placer *pl = lay_placer_new(bufs, r->n, r->align);
    lay_key *moved = xmallocarray(ord->nk, sizeof *moved);
    size_t nm = 0;
    for (size_t k = 0; k < ord->nk; k++) {
        size_t i = ord->keep[k].idx;
        if (lay_placer_try(pl, i, proposed[i]))
            off[0][i] = off[1][i] = proposed[i];
        else
            moved[nm++] = (lay_key){bufs[i].size, roam_len(&bufs[i]), 0, i};
    }
    lay_placer *pl2 = lay_placer_clone(pl);
    qsort(moved, nm, sizeof *moved, lay_key_cmp);
    h[0] = roam_fit_rest(pl, r, moved, nm, ord, off[0]);
    lay_placer_free(pl);
    for (size_t k = 0; k < nm; k++) /* largest first: complemented keys */
        moved[k] = (lay_key){~moved[k].k1, ~moved[k].k2, 0, moved[k].idx};
    qsort(moved, nm, sizeof *moved, lay_key_cmp);
    h[1] = roam_fit_rest(pl2, r, moved, nm, ord, off[1]);
    lay_placer_free(pl2);
    free(moved);
    *repaired = nm;
}

/* The buffers by group (step 0 of layout_roam): grs[g] gets its buffers in
 * index order (a counting sort into pool), its window and flags, low the
 * long-lived marks (in->low's, or roam_default_low's), rest the leftovers
 * in their order of step 4 (longest first); returns how many. */
static size_t roam_collect(const layout_buffer *bufs, size_t n, const layout_roam_input *in,
                           roam_group *grs, size_t *pool, unsigned char *low, lay_key *rest) {
    size_t ng = in->n_groups;
    size_t *count = xcalloc(ng + 1, sizeof *count);
    for (size_t i = 0; i < n; i++) {
        ROAMC_ASSERT(in->group[i] >= -1 && (in->group[i] < 0 || (size_t)in->group[i] < ng));
        if (in->group[i] >= 0) count[in->group[i] + 1]++;
    }
    for (size_t g = 0; g < ng; g++) {
        count[g + 1] += count[g];
        grs[g].idx = pool + count[g];
        grs[g].flags = in->group_flags ? in->group_flags[g] : 0;
        grs[g].lo = INT32_MAX, grs[g].hi = INT32_MIN;
    }
    free(count);
    size_t nr = 0;
    for (size_t i = 0; i < n; i++) {
        int g = in->group[i];
        if (g < 0) {
            rest[nr++] = (lay_key){~roam_len(&bufs[i]), ~bufs[i].size, 0, i};
            continue;
        }
        roam_group *gr = &grs[g];
        gr->idx[gr->n++] = i;
        if (bufs[i].start < gr->lo) gr->lo = bufs[i].start;
        if (bufs[i].end > gr->hi) gr->hi = bufs[i].end;
        if (in->low) low[i] = in->low[i] != 0;
    }
    for (size_t g = 0; g < ng && !in->low; g++)
        if (grs[g].n) roam_default_low(bufs, &grs[g], low);
    qsort(rest, nr, sizeof *rest, lay_key_cmp);
    return nr;
}

/* Steps 2-4 of layout_roam over the group layouts in r->rel: every
 * stacking order, each with the re-placed buffers smallest first (the
 * paper) and largest first (often tighter), all cheap next to the group
 * layouts; the lowest goes to offsets (ties: the first).  rest: the
 * leftovers in their order of step 4.  Returns its height. */
static uint64_t roam_best_stacking(const roam_run *r, const roam_group *grs, const lay_key *rest,
                                   size_t nr, uint64_t *offsets) {
    const layout_buffer *bufs = r->bufs;
    const size_t n = r->n;
    const layout_roam_input *in = r->in;
    layout_roam_stats *st = r->st;
    uint64_t *proposed = xcalloc(n, sizeof *proposed);
    uint64_t *alt[2] = {xmallocarray(n, sizeof(uint64_t)), xmallocarray(n, sizeof(uint64_t))};
    lay_key *keep = xmallocarray(n, sizeof *keep);
    /* keep order: long-lived first (they are the base of eq. 9), then
     * larger and longer-lived buffers, whose moving would cost most */
    size_t nk = 0;
    for (size_t i = 0; i < n; i++)
        if (in->group[i] >= 0)
            keep[nk++] = (lay_key){r->low[i] ? 0 : 1, ~bufs[i].size, ~roam_len(&bufs[i]), i};
    qsort(keep, nk, sizeof *keep, lay_key_cmp);
    st->grouped = nk, st->leftovers = nr;
    const roam_order ord = {keep, nk, rest, nr};
    uint64_t h = UINT64_MAX;
    for (int how = 0; how < ROAM_STACK_COUNT; how++) {
        uint64_t stacked =
            roam_stack(grs, in->n_groups, (roam_stacking)how, in->group, n, r->rel, proposed);
        uint64_t hh[2];
        size_t rep = 0;
        roam_place(r, &ord, proposed, alt, hh, &rep);
        for (int v = 0; v < 2; v++) { /* smallest first, then largest first */
            if (hh[v] < h) {
                h = hh[v];
                memcpy(offsets, alt[v], n * sizeof *offsets);
                st->repaired = rep, st->stacked = stacked, st->stacking = how;
            }
        }
    }
    free(proposed);
    free(alt[0]);
    free(alt[1]);
    free(keep);
    return h;
}

uint64_t layout_roam(const layout_buffer *bufs, size_t n, uint64_t align,
                     const layout_roam_input *in, uint64_t *offsets, layout_roam_stats *stp) {
    ROAMC_ASSERT(align >= 1 && in && (in->group || n == 0));
    layout_roam_stats local;
    layout_roam_stats *st = stp ? stp : &local;
    memset(st, 0, sizeof *st);
    roam_group *grs = xcalloc(in->n_groups, sizeof *grs);
    size_t *pool = xmallocarray(n, sizeof *pool);
    unsigned char *low = xcalloc(n, 1);
    uint64_t *rel = xcalloc(n, sizeof *rel);
    lay_key *rest = xmallocarray(n, sizeof *rest);
    size_t nr = roam_collect(bufs, n, in, grs, pool, low, rest);
    roam_run r = {.bufs = bufs,
                  .n = n,
                  .align = align,
                  .in = in,
                  .low = low,
                  .bud = {in->work ? in->work : LAYOUT_DEFAULT_WORK,
                          in->time_limit_s > 0 ? roamc_now() + in->time_limit_s : 1e300,
                          LAY_STOP_NONE},
                  .rel = rel,
                  .st = st};
    roam_groups(&r, grs);
    st->stopped_by_time = r.bud.stop == LAY_STOP_TIME;
    uint64_t h = roam_best_stacking(&r, grs, rest, nr, offsets);
    if (layout_validate(bufs, n, offsets, align, NULL, NULL) != 0) {
        /* a bug, which the contract answers with the heuristic (and which
         * st->fallback reports) rather than an exit */
        st->fallback = 1;
        h = layout_best_heuristic(bufs, n, align, offsets, NULL);
    }
    free(grs);
    free(pool);
    free(low);
    free(rel);
    free(rest);
    return h;
}
