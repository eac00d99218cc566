/* layout_improve.c — local improvement of a layout too large for the exact
 * searches (lay_improve, layout_internal.h): peak shaving by windows.
 *
 * The height is set by the buffers whose top is the height (the top
 * buffers).  For one of them, x, take a window of time W around its
 * lifetime; the buffers whose whole lifetime lies in W (the movable ones)
 * can be laid out again without touching anything outside W, around the
 * buffers that only cross W (fixed, each where it is).  If some placement
 * order puts every movable buffer below the height, x is no longer a top
 * buffer and no other buffer became one: the number of top buffers fell.
 * When none is left, the height fell.  Windows grow (a fixed buffer that
 * reaches the height must move too, so W takes in its lifetime; then W
 * takes in the lifetimes of the shorter buffers that meet it, a level at
 * a time) up to IMP_MAX_MOVABLE movable buffers.  The orders tried: by
 * current offset with the top buffers first, and the orders of the
 * heuristics of layout.c (size, lifetime length, area, start), first or
 * best fit, then a few offset orders with seeded noise.
 *
 * Every accepted change keeps the layout valid (the placer never overlaps
 * a fixed buffer, and movable buffers meet no buffer outside W) and never
 * raises the height, so the result is never worse than the input.  A pass
 * over the top buffers that moves none ends it ("no more improvement
 * found"): the layout is a local optimum of this neighbourhood.  Work: a
 * buffer put into a window's placer costs IMP_PLACE_WORK units, a buffer
 * looked at by a scan one; so the result is the same on every machine
 * unless the deadline cuts it.
 *
 * A window's buffers are found by lifetime-length classes: the buffers of
 * length in [2^c, 2^(c+1)) sorted by start, those meeting [ws, we] start in
 * [ws - 2^(c+1) + 1, we]; so a query costs about the buffers it returns,
 * not n.
 */
#include "layout.h"
#include "layout_internal.h"
#include "layout_sections.h"

#include <stdlib.h>
#include <string.h>

/* Most buffers a window may move: the placer of a window costs
 * O(k log k) for k buffers, and larger windows rarely succeed where
 * smaller ones failed. */
#define IMP_MAX_MOVABLE 3000
/* Window levels beyond the smallest (each takes in the shorter buffers
 * that meet the last one). */
#define IMP_LEVELS 3
/* Offset orders with seeded noise tried per window after the fixed ones. */
#define IMP_NOISY_ORDERS 3
/* Work units per buffer put into a window's placer (layout_exact's
 * EXACT_PLACE_WORK: a placement costs about a search node). */
#define IMP_PLACE_WORK 16
/* Fewest inside buffers worth an exact layout of a window. */
#define IMP_EXACT_MIN 8
/* Work a search around pins may spend per free buffer of its window. */
#define IMP_PINNED_WORK_PER_BUFFER 16384
/* Most free buffers in a window searched around pins: lay_bnb recurses
 * a few frames (a few hundred bytes) per buffer. */
#define IMP_PINNED_MAX_BUFFERS 12000
#define IMP_CLASSES 34 /* lifetime lengths up to 2^33 steps */

typedef struct imp_class {
    size_t n;
    size_t *idx;    /* buffers of this length class, by (start, index) */
    int64_t *start; /* their starts */
} imp_class;

typedef struct imp {
    const layout_problem *p;
    uint64_t *off; /* the layout being improved (the caller's) */
    uint64_t *sz;  /* sizes rounded up to align */
    imp_class cls[IMP_CLASSES];
    lay_budget *bud;
    uint64_t height; /* of off */
    uint64_t seed;   /* the noisy orders' */
    /* scratch of a window */
    size_t *meet, nmeet;
    unsigned char *seen;
    layout_buffer *local;
    uint64_t *loff;
    lay_key *keys;
    size_t *tops;
    lay_improve_stats *st;
    int pinned; /* search windows around pins too */
} imp;

static uint64_t imp_len(const layout_buffer *b) {
    return (uint64_t)((int64_t)b->end - b->start) + 1;
}

static size_t imp_class_of(uint64_t len) {
    size_t c = 0;
    while (c + 1 < IMP_CLASSES && ((uint64_t)2 << c) <= len) c++;
    return c;
}

/* Spends w units; 0 when the budget or the deadline says stop (bud->stop
 * then says which). */
static int imp_spend(imp *m, uint64_t w) {
    if (m->bud->work < w) {
        m->bud->work = 0;
        m->bud->stop = LAY_STOP_WORK;
        return 0;
    }
    m->bud->work -= w;
    return 1;
}

/* 0 when the deadline has passed (bud->stop then says so). */
static int imp_in_time(imp *m) {
    if (roamc_now() <= m->bud->deadline) return 1;
    m->bud->stop = LAY_STOP_TIME;
    return 0;
}

static void imp_init(imp *m, const layout_problem *p, uint64_t *off, lay_budget *bud,
                     lay_improve_stats *st) {
    const size_t n = p->n;
    memset(m, 0, sizeof *m);
    m->p = p;
    m->off = off;
    m->bud = bud;
    m->st = st;
    m->seed = 0x5eed;
    m->sz = xmallocarray(n, sizeof *m->sz);
    for (size_t i = 0; i < n; i++) m->sz[i] = lay_round_up(p->bufs[i].size, p->align);
    size_t count[IMP_CLASSES] = {0};
    for (size_t i = 0; i < n; i++)
        if (m->sz[i]) count[imp_class_of(imp_len(&p->bufs[i]))]++;
    lay_key *k = xmallocarray(n ? n : 1, sizeof *k);
    for (size_t c = 0; c < IMP_CLASSES; c++) {
        imp_class *cl = &m->cls[c];
        cl->idx = xmallocarray(count[c] ? count[c] : 1, sizeof *cl->idx);
        cl->start = xmallocarray(count[c] ? count[c] : 1, sizeof *cl->start);
        size_t q = 0;
        for (size_t i = 0; i < n; i++)
            if (m->sz[i] && imp_class_of(imp_len(&p->bufs[i])) == c)
                k[q++] = (lay_key){(uint64_t)p->bufs[i].start ^ 0x8000000000000000ull, 0, 0, i};
        qsort(k, q, sizeof *k, lay_key_cmp);
        for (size_t j = 0; j < q; j++) {
            cl->idx[j] = k[j].idx;
            cl->start[j] = p->bufs[k[j].idx].start;
        }
        cl->n = q;
    }
    free(k);
    m->meet = xmallocarray(n ? n : 1, sizeof *m->meet);
    m->seen = xcalloc(n ? n : 1, 1);
    m->local = xmallocarray(n ? n : 1, sizeof *m->local);
    m->loff = xmallocarray(n ? n : 1, sizeof *m->loff);
    m->keys = xmallocarray(n ? n : 1, sizeof *m->keys);
    m->tops = xmallocarray(n ? n : 1, sizeof *m->tops);
    m->height = layout_height(p->bufs, n, off);
}

static void imp_free(imp *m) {
    for (size_t c = 0; c < IMP_CLASSES; c++) {
        free(m->cls[c].idx);
        free(m->cls[c].start);
    }
    free(m->sz);
    free(m->meet);
    free(m->seen);
    free(m->local);
    free(m->loff);
    free(m->keys);
    free(m->tops);
}

/* m->meet = the non-empty buffers whose lifetime meets [ws, we], in class
 * then start order.  Returns 0 when the budget stopped it. */
static int imp_query(imp *m, int64_t ws, int64_t we) {
    m->nmeet = 0;
    for (size_t c = 0; c < IMP_CLASSES; c++) {
        const imp_class *cl = &m->cls[c];
        if (cl->n == 0) continue;
        int64_t from = ws - ((int64_t)2 << c) + 1; /* earliest start that can reach ws */
        size_t lo = 0, hi = cl->n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (cl->start[mid] < from)
                lo = mid + 1;
            else
                hi = mid;
        }
        size_t j = lo;
        for (; j < cl->n && cl->start[j] <= we; j++) {
            size_t i = cl->idx[j];
            if (m->p->bufs[i].end >= ws) m->meet[m->nmeet++] = i;
        }
        if (!imp_spend(m, j - lo + 1)) return 0;
    }
    return 1;
}

static uint64_t imp_top(const imp *m, size_t i) {
    return m->sz[i] ? m->off[i] + m->sz[i] : 0;
}

/* The smallest window around [*ws, *we] in which every buffer that reaches
 * the height is movable: grows it over such buffers' lifetimes.  Returns
 * the movable count (buffers inside), or SIZE_MAX when it passes
 * IMP_MAX_MOVABLE or the budget stops. */
static size_t imp_close(imp *m, int64_t *ws, int64_t *we, size_t most) {
    for (;;) {
        if (!imp_query(m, *ws, *we)) return SIZE_MAX;
        int grew = 0;
        size_t inside = 0;
        const layout_buffer *b = m->p->bufs;
        for (size_t k = 0; k < m->nmeet; k++) {
            size_t i = m->meet[k];
            int in = b[i].start >= *ws && b[i].end <= *we;
            inside += in;
            if (!in && imp_top(m, i) >= m->height) {
                if (b[i].start < *ws) *ws = b[i].start;
                if (b[i].end > *we) *we = b[i].end;
                grew = 1;
            }
        }
        if (inside > most) return SIZE_MAX;
        if (!grew) return inside;
    }
}

/* The next level's window: [ws, we] grown over the lifetimes of the
 * buffers meeting it that are no longer than it (m->meet holds them). */
static void imp_widen(const imp *m, int64_t *ws, int64_t *we) {
    const layout_buffer *b = m->p->bufs;
    uint64_t span = (uint64_t)(*we - *ws) + 1;
    int64_t a = *ws, z = *we;
    for (size_t k = 0; k < m->nmeet; k++) {
        size_t i = m->meet[k];
        if (imp_len(&b[i]) > span) continue;
        if (b[i].start < a) a = b[i].start;
        if (b[i].end > z) z = b[i].end;
    }
    *ws = a;
    *we = z;
}

/* The movable buffers' order number o (local indices in m->keys[0..nm)),
 * and whether it places by best fit. */
static int imp_order(imp *m, size_t nm, int o) {
    for (size_t k = 0; k < nm; k++) {
        const layout_buffer *b = &m->local[m->keys[k].idx];
        uint64_t off = m->loff[m->keys[k].idx], len = imp_len(b), size = b->size;
        lay_key *key = &m->keys[k];
        key->k2 = key->k3 = 0;
        switch (o) {
        case 0: /* by offset, the buffers at the height first */
            key->k1 = off + size >= m->height ? 0 : 1;
            key->k2 = off;
            break;
        case 1: key->k1 = ~size; break;
        case 2: key->k1 = ~size; break;
        case 3:
            key->k1 = ~len;
            key->k2 = ~size;
            break;
        case 4: {
            double area = (double)size * (double)len;
            uint64_t bits;
            memcpy(&bits, &area, sizeof bits);
            key->k1 = ~bits;
            key->k2 = ~size;
            break;
        }
        case 5: key->k1 = (uint64_t)b->start ^ 0x8000000000000000ull; break;
        default: /* offset with noise of up to a quarter of the height */
            key->k1 = off + roamc_xorshift64(&m->seed) % (m->height / 4 + 1);
            break;
        }
    }
    qsort(m->keys, nm, sizeof *m->keys, lay_key_cmp);
    return o == 2 || o == 3 || o == 4 || o == 5;
}

/* Lays out the window [ws, we] again (m->meet: its buffers).  Returns 1
 * when some order puts every movable buffer below the height (m->off
 * updated), else 0. */
static int imp_window(imp *m, int64_t ws, int64_t we) {
    const layout_buffer *b = m->p->bufs;
    const size_t k = m->nmeet;
    size_t nm = 0;
    /* local problem: movable buffers first (their lifetimes), then fixed
     * ones clipped to the window (nothing outside it matters here) */
    for (size_t j = 0; j < k; j++) {
        size_t i = m->meet[j];
        if (b[i].start >= ws && b[i].end <= we) {
            m->local[nm] = (layout_buffer){m->sz[i], b[i].start, b[i].end};
            m->loff[nm] = m->off[i];
            m->keys[nm] = (lay_key){0, 0, 0, nm};
            m->tops[nm++] = i;
        }
    }
    if (nm == 0) return 0;
    size_t nl = nm;
    for (size_t j = 0; j < k; j++) {
        size_t i = m->meet[j];
        if (b[i].start >= ws && b[i].end <= we) continue;
        int32_t s = b[i].start < ws ? (int32_t)ws : b[i].start;
        int32_t e = b[i].end > we ? (int32_t)we : b[i].end;
        m->local[nl] = (layout_buffer){m->sz[i], s, e};
        m->loff[nl++] = m->off[i];
    }
    if (!imp_spend(m, (uint64_t)IMP_PLACE_WORK * (nl - nm))) return 0;
    lay_placer *fixed = lay_placer_new(m->local, nl, m->p->align);
    for (size_t j = nm; j < nl; j++) {
        int ok = lay_placer_try(fixed, j, m->loff[j]);
        ROAMC_ASSERT(ok); /* the layout is valid */
    }
    uint64_t *cand = xmallocarray(nm, sizeof *cand);
    int won = 0;
    for (int o = 0; o < 6 + IMP_NOISY_ORDERS && !won; o++) {
        if (!imp_spend(m, (uint64_t)IMP_PLACE_WORK * nm) || !imp_in_time(m)) break;
        int best_fit = imp_order(m, nm, o);
        lay_placer *pl = lay_placer_clone(fixed);
        uint64_t top = 0;
        for (size_t q = 0; q < nm && top < m->height; q++) {
            size_t l = m->keys[q].idx;
            cand[l] = lay_placer_fit(pl, l, best_fit);
            if (cand[l] + m->local[l].size > top) top = cand[l] + m->local[l].size;
        }
        lay_placer_free(pl);
        m->st->orders++;
        if (top < m->height) {
            for (size_t l = 0; l < nm; l++) m->off[m->tops[l]] = cand[l];
            won = 1;
        }
    }
    free(cand);
    lay_placer_free(fixed);
    return won;
}

/* The buffers meeting [ws, we] (m->meet) that cross one of its ends: the
 * highest of their tops (0 when none), and in *hs, *he the lifetime of
 * one buffer reaching it (the last in m->meet). */
static uint64_t imp_floor(const imp *m, int64_t ws, int64_t we, size_t *inside, int64_t *hs,
                          int64_t *he) {
    const layout_buffer *b = m->p->bufs;
    uint64_t floor = 0;
    *inside = 0;
    for (size_t j = 0; j < m->nmeet; j++) {
        size_t i = m->meet[j];
        if (b[i].start >= ws && b[i].end <= we) {
            ++*inside;
        } else if (imp_top(m, i) >= floor) {
            floor = imp_top(m, i);
            *hs = b[i].start;
            *he = b[i].end;
        }
    }
    return floor;
}

/* An exact layout (the best heuristic, then lay_search) of the buffers
 * inside [ws, we] (m->meet
 * holds those meeting it), above floor (the highest top of the buffers
 * that cross its ends), below the height.  Inside buffers meet nothing
 * outside the window, and above the floor none of the buffers crossing
 * it: any layout of them there is valid.  Returns 1 when it put every
 * inside buffer's top under the height (m->off updated). */
static int imp_exact(imp *m, int64_t ws, int64_t we, uint64_t floor) {
    const layout_buffer *b = m->p->bufs;
    const uint64_t align = m->p->align;
    if (floor + align >= m->height) return 0;
    size_t k = 0;
    for (size_t j = 0; j < m->nmeet; j++) {
        size_t i = m->meet[j];
        if (b[i].start >= ws && b[i].end <= we) {
            m->local[k] = (layout_buffer){m->sz[i], b[i].start, b[i].end};
            m->tops[k++] = i;
        }
    }
    uint64_t goal = (m->height - 1 - floor) / align * align; /* every top under the height */
    if (layout_live_peak(m->local, k) > goal) return 0;
    lay_budget share = {m->bud->work / 4, m->bud->deadline, LAY_STOP_NONE};
    if (share.work < 1000) {
        m->bud->stop = LAY_STOP_WORK;
        return 0;
    }
    /* the best heuristic, then the exact search at the goal (lay_search;
     * not layout_exact, which calls this file) */
    uint64_t *cand = xmallocarray(k, sizeof *cand);
    const layout_problem sub = {m->local, k, align};
    int won = layout_best_heuristic(m->local, k, align, cand, NULL) <= goal;
    if (!won) {
        lay_search_opts o;
        lay_search_defaults(&o);
        m->bud->work -= share.work;
        won = lay_search(&sub, goal, &o, &share, cand, NULL) == LAY_FOUND &&
              layout_validate(m->local, k, cand, align, NULL, NULL) == 0 &&
              layout_height(m->local, k, cand) <= goal;
        m->bud->work += share.work;
        if (share.stop == LAY_STOP_TIME) m->bud->stop = LAY_STOP_TIME;
    }
    m->st->exact++;
    if (won)
        for (size_t l = 0; l < k; l++) m->off[m->tops[l]] = floor + cand[l];
    free(cand);
    return won;
}

/* Windows for the exact layout: from x's lifetime, take in the crossing
 * buffer with the highest top, again and again, which lowers the floor;
 * lay out the inside buffers exactly when they have doubled since the
 * last try (from IMP_EXACT_MIN), and at the largest window of at most
 * LAYOUT_SEARCH_MAX_BUFFERS inside.  Returns 1 when one try won. */
static int imp_exact_windows(imp *m, size_t x) {
    int64_t ws = m->p->bufs[x].start, we = m->p->bufs[x].end;
    size_t tried = 0, inside = 0;
    int64_t last_ws = ws, last_we = we;
    int have_last = 0;
    for (;;) {
        if (!imp_query(m, ws, we)) return 0;
        int64_t hs = ws, he = we;
        uint64_t floor = imp_floor(m, ws, we, &inside, &hs, &he);
        if (inside > LAYOUT_SEARCH_MAX_BUFFERS) break;
        if (inside >= IMP_EXACT_MIN && inside >= 2 * tried) {
            tried = inside;
            have_last = 0;
            if (imp_exact(m, ws, we, floor)) return 1;
            if (m->bud->stop != LAY_STOP_NONE) return 0;
        } else {
            last_ws = ws;
            last_we = we;
            have_last = 1;
        }
        if (floor == 0) break; /* nothing crosses: the window is all there is */
        if (hs < ws) ws = hs;
        if (he > we) we = he;
    }
    if (!have_last) return 0;
    if (!imp_query(m, last_ws, last_we)) return 0;
    int64_t hs, he;
    uint64_t floor = imp_floor(m, last_ws, last_we, &inside, &hs, &he);
    return imp_exact(m, last_ws, last_we, floor);
}

/* The window [ws, we] (m->meet: the buffers meeting it) laid out by the
 * exact search around pins (lay_bnb with pins): the inside buffers free,
 * the crossing ones pinned where they are (clipped to the window), every
 * top under the height, the incumbent's order tried first.  Returns 1
 * when it found such a layout (m->off updated). */
static int imp_pinned(imp *m, int64_t ws, int64_t we) {
    const layout_buffer *b = m->p->bufs;
    const uint64_t align = m->p->align;
    if (m->height <= align) return 0;
    /* the inside buffers first (m->tops: their indices), then the pins */
    layout_buffer *all = m->local;
    uint64_t *at = xmallocarray(m->nmeet, sizeof *at);
    size_t k = 0, np = 0;
    for (size_t j = 0; j < m->nmeet; j++) {
        size_t i = m->meet[j];
        if (b[i].start >= ws && b[i].end <= we) {
            all[k] = (layout_buffer){m->sz[i], b[i].start, b[i].end};
            m->loff[k] = m->off[i];
            at[k] = LAY_FREE;
            m->tops[k++] = i;
        }
    }
    for (size_t j = 0; j < m->nmeet; j++) {
        size_t i = m->meet[j];
        if (b[i].start >= ws && b[i].end <= we) continue;
        all[k + np] = (layout_buffer){m->sz[i], b[i].start < ws ? (int32_t)ws : b[i].start,
                                      b[i].end > we ? (int32_t)we : b[i].end};
        at[k + np++] = m->off[i];
    }
    uint64_t goal = (m->height - 1) / align * align; /* every top under the height */
    int won = 0;
    lay_budget share = {m->bud->work / 4, m->bud->deadline, LAY_STOP_NONE};
    /* a window that fails costs its whole share: at most
     * IMP_PINNED_WORK_PER_BUFFER a free buffer (the windows that won on
     * the slack lists took far less; larger windows get more) */
    if (share.work > (uint64_t)IMP_PINNED_WORK_PER_BUFFER * k)
        share.work = (uint64_t)IMP_PINNED_WORK_PER_BUFFER * k;
    if (m->bud->work < 1000) {
        m->bud->stop = LAY_STOP_WORK;
    } else {
        uint64_t *cand = xmallocarray(k + np, sizeof *cand);
        layout_bnb_rules rules;
        lay_bnb_pinned_defaults(&rules);
        m->bud->work -= share.work;
        lay_bnb_task task = {&(layout_problem){all, k + np, align}, &(lay_pins){at, m->loff}, goal,
                             &rules};
        won = lay_bnb(&task, &share, cand, NULL) == LAY_FOUND;
        m->bud->work += share.work;
        if (share.stop == LAY_STOP_TIME) m->bud->stop = LAY_STOP_TIME;
        m->st->pinned++;
        if (won) {
            for (size_t l = 0; l < k; l++) {
                ROAMC_ASSERT(cand[l] % align == 0 && cand[l] + all[l].size <= goal);
                m->off[m->tops[l]] = cand[l];
            }
        }
        free(cand);
    }
    free(at);
    return won;
}

/* Windows for the search around pins: from x's lifetime, closed over the
 * crossing buffers that reach the height (they cannot stay pinned), then
 * widened a level at a time (imp_widen), up to LAYOUT_SEARCH_MAX_BUFFERS
 * inside; tried when the inside buffers have doubled since the last try.
 * Returns 1 when one try won. */
static int imp_pinned_windows(imp *m, size_t x) {
    int64_t ws = m->p->bufs[x].start, we = m->p->bufs[x].end;
    size_t tried = 0;
    for (int level = 0;; level++) {
        if (level > 0) {
            int64_t a = ws, z = we;
            imp_widen(m, &ws, &we);
            if (ws == a && we == z) break; /* nothing shorter left to take in */
        }
        size_t inside = imp_close(m, &ws, &we, IMP_PINNED_MAX_BUFFERS);
        if (inside == SIZE_MAX) break;
        if (inside >= IMP_EXACT_MIN && inside >= 2 * tried) {
            tried = inside;
            if (imp_pinned(m, ws, we)) return 1;
            if (m->bud->stop != LAY_STOP_NONE) return 0;
        }
    }
    return 0;
}

/* Tries to take buffer x below the height.  Returns 1 when it did. */
static int imp_one(imp *m, size_t x) {
    int64_t ws = m->p->bufs[x].start, we = m->p->bufs[x].end;
    for (int level = 0; level <= IMP_LEVELS; level++) {
        if (level > 0) imp_widen(m, &ws, &we);
        if (imp_close(m, &ws, &we, IMP_MAX_MOVABLE) == SIZE_MAX) break;
        m->st->windows++;
        if (imp_window(m, ws, we)) return 1;
        if (m->bud->stop != LAY_STOP_NONE) return 0;
    }
    if (imp_exact_windows(m, x)) return 1;
    if (m->bud->stop != LAY_STOP_NONE || !m->pinned) return 0;
    return imp_pinned_windows(m, x);
}

/* ------------------------------------------------------------------------ */
/* Push-down of the whole layout                                             */

/* The tops of imp_pushdown: over time sections, the highest top placed
 * there.  A placement raises its whole range to a value above everything
 * there, so a section's top only rises and is the largest tag on its path
 * to the root: a bottom-up tree, no pushing down.  mx[i]: at most the
 * highest top under node i and at least its tags at i and below. */
typedef struct imp_tops {
    uint64_t *mx, *tag;
    size_t size;     /* leaves, a power of two */
    uint64_t visits; /* nodes visited (the work) */
} imp_tops;

static uint64_t imp_max(uint64_t a, uint64_t b) {
    return a > b ? a : b;
}

/* The highest top in sections [a, b), a < b. */
static uint64_t imp_tops_max(imp_tops *t, size_t a, size_t b) {
    uint64_t r = 0;
    for (size_t l = a + t->size, h = b + t->size; l < h; l /= 2, h /= 2) {
        if (l & 1) r = imp_max(r, t->mx[l++]);
        if (h & 1) r = imp_max(r, t->mx[--h]);
        t->visits++;
    }
    /* the tags above the nodes taken lie on the paths of the end leaves */
    for (size_t l = (a + t->size) / 2, h = (b - 1 + t->size) / 2; l >= 1; l /= 2, h /= 2) {
        r = imp_max(r, imp_max(t->tag[l], t->tag[h]));
        t->visits++;
    }
    return r;
}

/* Raises sections [a, b), a < b, to v, which is above all of them. */
static void imp_tops_raise(imp_tops *t, size_t a, size_t b, uint64_t v) {
    for (size_t l = a + t->size, h = b + t->size; l < h; l /= 2, h /= 2) {
        if (l & 1) {
            t->tag[l] = v;
            t->mx[l++] = v;
        }
        if (h & 1) {
            t->tag[--h] = v;
            t->mx[h] = v;
        }
        t->visits++;
    }
    /* every node on the end leaves' paths holds a raised section */
    for (size_t l = a + t->size, h = b - 1 + t->size; l >= 1; l /= 2, h /= 2) {
        t->mx[l] = imp_max(t->mx[l], v);
        t->mx[h] = imp_max(t->mx[h], v);
        t->visits++;
    }
}

static int imp_key_before(const lay_key *x, const lay_key *y) {
    if (x->k1 != y->k1) return x->k1 < y->k1;
    if (x->k2 != y->k2) return x->k2 < y->k2;
    return x->idx < y->idx;
}

static void imp_heap_push(lay_key *h, size_t *len, lay_key k) {
    size_t i = (*len)++;
    while (i > 0 && imp_key_before(&k, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = k;
}

/* Puts k in place of the heap's least entry. */
static void imp_heap_replace(lay_key *h, size_t len, lay_key k) {
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= len) break;
        if (c + 1 < len && imp_key_before(&h[c + 1], &h[c])) c++;
        if (!imp_key_before(&h[c], &k)) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = k;
}

/* The whole layout pushed down: the buffers placed one at a time, each
 * time the one whose lowest offset above the placed buffers it meets (its
 * floor) is least, ties by its current offset (then index), at that floor
 * (the first dive of lay_bnb's canonical search, without pins, on the
 * whole list, where lay_bnb would need every pair of buffers that meet).
 * Every buffer goes above the placed ones it meets, so the layout is
 * valid; floors only rise, so a buffer whose floor rose since it was
 * queued is queued again.  On gpt2-xl_b1 in program order it frees
 * holes that windows do not reach: 6 MB of the layout windows leave, 15
 * MB of the best heuristic's (the stacks of long-lived buffers that
 * windows lower 512 bytes at a time).  Returns 1 when the layout it gives
 * is lower (m->off, m->height updated). */
static int imp_pushdown(imp *m) {
    const layout_problem *p = m->p;
    const size_t n = p->n;
    if (n == 0) return 0;
    size_t *live = xmallocarray(n, sizeof *live), nl = 0;
    for (size_t i = 0; i < n; i++)
        if (m->sz[i]) live[nl++] = i;
    if (!imp_spend(m, 2 * n) || nl == 0) {
        free(live);
        return 0;
    }
    /* the sections of the non-empty buffers (queue entries name them by
     * their place in the sweep, in index order) */
    lay_sections sc;
    lay_sections_sweep(&sc, p->bufs, live, NULL, nl);
    free(live);
    imp_tops t = {0};
    for (t.size = 1; t.size < sc.nsec + 1; t.size *= 2) {}
    t.mx = xcalloc(2 * t.size, sizeof *t.mx);
    t.tag = xcalloc(2 * t.size, sizeof *t.tag);
    const size_t *sa = sc.sa, *sb = sc.sb;
    lay_key *heap = xmallocarray(nl, sizeof *heap);
    uint64_t *out = xmallocarray(n, sizeof *out);
    memcpy(out, m->off, n * sizeof *out);
    size_t len = 0;
    for (size_t b = 0; b < nl; b++)
        imp_heap_push(heap, &len, (lay_key){0, m->off[sc.orig[b]], 0, b});
    /* at most half of the work left: on the gpt2-xl_b1 x4 list (22484
     * buffers) a push-down pops 9.9 M queue entries (each long-lived
     * buffer about once for every rise of its floor) in 1.15 s */
    const uint64_t most = m->bud->work / 2;
    uint64_t height = 0, pops = 0, spent = 0;
    int ok = 1;
    while (len > 0 && ok) {
        lay_key k = heap[0];
        size_t b = k.idx, i = sc.orig[b];
        uint64_t f = lay_round_up(imp_tops_max(&t, sa[b], sb[b]), p->align);
        if (f != k.k1) { /* the floor rose since: queued again */
            ROAMC_ASSERT(f > k.k1);
            k.k1 = f;
            imp_heap_replace(heap, len, k);
        } else {
            len--;
            if (len > 0) imp_heap_replace(heap, len, heap[len]);
            out[i] = f;
            if (f + m->sz[i] > height) height = f + m->sz[i];
            imp_tops_raise(&t, sa[b], sb[b], f + m->sz[i]);
        }
        /* a pop (a heap step down, about 27 tree nodes) costs a unit, 64
         * tree nodes one more: 14 M units for the 1.15 s above, against
         * the budget's 10^7 units a second */
        if ((++pops & 1023) == 0) {
            uint64_t w = 1024 + t.visits / 64;
            t.visits = 0;
            spent += w;
            /* the deadline too: on lists of 17k-35k buffers the
             * push-down alone ran 2-4 times past roamc layout's 10 s
             * on 2 loaded cores */
            ok = spent <= most && imp_spend(m, w) && height < m->height && imp_in_time(m);
        }
    }
    spent += t.visits / 64;
    ok = ok && spent <= most && imp_spend(m, t.visits / 64) && height < m->height && imp_in_time(m);
    if (ok) {
        memcpy(m->off, out, n * sizeof *out);
        m->height = height;
    }
    lay_sections_free(&sc);
    free(t.mx);
    free(t.tag);
    free(heap);
    free(out);
    return ok;
}

uint64_t lay_improve(const layout_problem *p, uint64_t *offsets, uint64_t stop_at, lay_budget *bud,
                     int pinned, lay_improve_stats *st) {
    lay_improve_stats dummy;
    if (!st) st = &dummy;
    memset(st, 0, sizeof *st);
    imp m;
    imp_init(&m, p, offsets, bud, st);
    m.pinned = pinned;
    st->start_height = m.height;
    int push = 1, changed = 0; /* push down next; windows moved since */
    while (m.height > stop_at && bud->stop == LAY_STOP_NONE) {
        /* the whole layout pushed down, first and after the windows
         * changed it (it gives the same layout again otherwise) */
        if (pinned && push && imp_pushdown(&m)) {
            st->pushed++;
            push = 0;
            continue;
        }
        push = 0;
        if (bud->stop != LAY_STOP_NONE || !imp_spend(&m, p->n)) break;
        size_t ntops = 0;
        for (size_t i = 0; i < p->n; i++)
            if (m.sz[i] && imp_top(&m, i) == m.height) m.tops[ntops++] = i;
        /* imp_window reuses m.tops: keep the top set apart */
        size_t *tops = xmallocarray(ntops, sizeof *tops);
        memcpy(tops, m.tops, ntops * sizeof *tops);
        size_t moved = 0, left = 0;
        for (size_t t = 0; t < ntops && bud->stop == LAY_STOP_NONE; t++) {
            size_t x = tops[t];
            if (imp_top(&m, x) < m.height) continue; /* moved with an earlier window */
            if (imp_one(&m, x))
                moved++;
            else
                left++;
        }
        free(tops);
        if (moved) changed = 1;
        if (left == 0 && bud->stop == LAY_STOP_NONE) {
            m.height = layout_height(p->bufs, p->n, offsets);
            st->lowered++;
        } else if (moved == 0 && changed && bud->stop == LAY_STOP_NONE) {
            push = 1; /* a local optimum of the windows: push down again */
            changed = 0;
        } else if (moved == 0) {
            break; /* a local optimum */
        }
    }
    st->height = m.height;
    imp_free(&m);
    return st->height;
}
