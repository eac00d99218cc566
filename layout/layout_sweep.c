/* layout_sweep.c — a search in time order for zero-slack problems.
 *
 * When the capacity equals the live size at EVERY step (no step may waste a
 * byte), a layout is an exact tiling of the capacity x time strip, and it
 * can be built in time order: at each step where buffers start, the
 * address ranges not held by buffers placed earlier and still live (the
 * holes) must be tiled exactly by the buffers that start there.  So each
 * starting buffer sits at the bottom of a hole or right on top of another
 * one starting at the same step; the search fills the holes from the lowest
 * address up, trying at each position the starting buffers that still fit
 * in that hole.  This is complete for such problems (every layout is one
 * of these tilings), and it sees a bad arrangement at the step where it
 * bites, instead of at the address where the skyline search gets to it.
 *
 * What prunes it:
 *   - a hole whose rest is smaller than every buffer left to start there;
 *   - buffers with the same size and end are interchangeable: one of them
 *     is tried per position;
 *   - failed configurations: what happens after step t depends only on the
 *     buffers live at t and their offsets, so a configuration whose search
 *     was exhausted is remembered (a 64-bit hash of it and t) and not
 *     searched again when reached by another path.  Because of the hash
 *     the sweep never claims that nothing fits: when it runs out it gives
 *     up and the other engines (which prove) get the rest of the time.
 * Restarts with a doubling node limit vary the order in which the starting
 * buffers are tried (by size, then shuffled).
 *
 * Used by `roamc layout` (layout_solve) only, never by plans.
 */
#include "layout.h"
#include "layout_internal.h"

#include <stdlib.h>
#include <string.h>

#define SWP_NONE UINT64_MAX

typedef struct swp_buf {
    uint64_t size, off;
    int32_t start, end; /* closed lifetime */
    uint64_t zob;       /* hash key of the buffer (mixed with its offset) */
} swp_buf;

typedef struct swp {
    size_t n;
    swp_buf *b;
    uint64_t cap;
    int32_t *times; /* distinct start times, ascending */
    size_t nt;
    size_t *st_begin; /* starters of times[i]: st_buf[st_begin[i] .. [i+1]) */
    size_t *st_buf;
    size_t *stack; /* live lists of the levels, one after another */
    size_t stack_cap;
    uint64_t *fail; /* open addressing set of failed (t, live) hashes */
    size_t fail_mask, fail_n;
    long long nodes_left;
    uint64_t nodes;
    double deadline;
    int aborted;
    uint64_t rnd;
} swp;

static uint64_t swp_mix(uint64_t x) {
    x ^= x >> 31;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 32;
    return x;
}

static int swp_fail_has(const swp *s, uint64_t key) {
    key |= 1; /* 0 marks an empty slot */
    for (size_t i = key & s->fail_mask;; i = (i + 1) & s->fail_mask) {
        if (s->fail[i] == 0) return 0;
        if (s->fail[i] == key) return 1;
    }
}

static void swp_fail_add(swp *s, uint64_t key) {
    if (s->fail_n * 2 > s->fail_mask) return; /* full enough: stop remembering */
    key |= 1;
    size_t i = key & s->fail_mask;
    while (s->fail[i] != 0 && s->fail[i] != key) i = (i + 1) & s->fail_mask;
    if (s->fail[i] == 0) {
        s->fail[i] = key;
        s->fail_n++;
    }
}

/* Insertion sort of the live list by offset (lists are short and mostly
 * sorted: the previous level's order plus the new starters). */
static void swp_sort_live(const swp *s, size_t *v, size_t k) {
    for (size_t i = 1; i < k; i++) {
        size_t x = v[i];
        size_t j = i;
        while (j > 0 && s->b[v[j - 1]].off > s->b[x].off) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
}

typedef enum { SWP_FOUND, SWP_FAILED, SWP_ABORT } swp_rc;

static swp_rc swp_step(swp *s, size_t ti, size_t live0, size_t nlive_prev);

/* Fills the holes of step ti (nh [a, z) pairs in hv, ascending) from hole
 * h at address p on.  live0: where the step's live list starts in the
 * stack, nlive its length (the starters placed so far appended). */
static swp_rc swp_fill(swp *s, size_t ti, size_t live0, size_t nlive, const uint64_t *hv, size_t nh,
                       size_t h, uint64_t p) {
    while (h < nh && p >= hv[2 * h + 1]) {
        h++;
        if (h < nh) p = hv[2 * h];
    }
    if (h == nh) return swp_step(s, ti + 1, live0, nlive);
    if (--s->nodes_left < 0 || ((s->nodes & 1023) == 0 && roamc_now() > s->deadline)) {
        s->aborted = 1;
        return SWP_ABORT;
    }
    s->nodes++;
    uint64_t rest = hv[2 * h + 1] - p;
    size_t a = s->st_begin[ti], z = s->st_begin[ti + 1];
    uint64_t min_size = SWP_NONE;
    for (size_t i = a; i < z; i++)
        if (s->b[s->st_buf[i]].off == SWP_NONE && s->b[s->st_buf[i]].size < min_size)
            min_size = s->b[s->st_buf[i]].size;
    if (min_size == SWP_NONE || min_size > rest) return SWP_FAILED;
    swp_rc rc = SWP_FAILED;
    for (size_t i = a; i < z && rc == SWP_FAILED; i++) {
        size_t c = s->st_buf[i];
        swp_buf *x = &s->b[c];
        if (x->off != SWP_NONE || x->size > rest) continue;
        int seen = 0; /* an interchangeable one tried already here */
        for (size_t j = a; j < i && !seen; j++) {
            const swp_buf *y = &s->b[s->st_buf[j]];
            seen = y->off == SWP_NONE && y->size == x->size && y->end == x->end;
        }
        if (seen) continue;
        x->off = p;
        s->stack[live0 + nlive] = c;
        rc = swp_fill(s, ti, live0, nlive + 1, hv, nh, h, p + x->size);
        if (rc != SWP_FOUND) x->off = SWP_NONE;
    }
    return rc;
}

/* Enters step ti: the buffers of the previous live list (at prev0, nprev
 * long) still live at times[ti] form the new live list; computes the holes
 * and fills them. */
static swp_rc swp_step(swp *s, size_t ti, size_t prev0, size_t nprev) {
    if (ti == s->nt) return SWP_FOUND;
    int32_t t = s->times[ti];
    size_t live0 = prev0 + nprev;
    size_t nstart = s->st_begin[ti + 1] - s->st_begin[ti];
    /* Cannot happen: the previous live list and the starts at t are
     * disjoint (<= n together) and each step's list lies above the one
     * before, so step ti ends below (ti + 2) n <= stack_cap.  Kept as a
     * guard that gives up rather than writing past the stack. */
    if (live0 + nprev + nstart > s->stack_cap) return SWP_ABORT;
    size_t nlive = 0;
    uint64_t key = swp_mix((uint64_t)(uint32_t)t + 0x9e3779b97f4a7c15ull);
    for (size_t i = 0; i < nprev; i++) {
        size_t b = s->stack[prev0 + i];
        if (s->b[b].end >= t) {
            s->stack[live0 + nlive++] = b;
            key ^= swp_mix(s->b[b].zob ^ s->b[b].off * 0xd6e8feb86659fd93ull);
        }
    }
    if (swp_fail_has(s, key)) return SWP_FAILED;
    swp_sort_live(s, s->stack + live0, nlive);
    /* holes: the gaps between the live buffers, in address order */
    size_t nh = 0;
    uint64_t *hv = xmallocarray(2 * (nlive + 1), sizeof *hv);
    uint64_t at = 0, free_sum = 0;
    for (size_t i = 0; i <= nlive; i++) {
        uint64_t lo = i < nlive ? s->b[s->stack[live0 + i]].off : s->cap;
        if (lo > at) {
            hv[2 * nh] = at;
            hv[2 * nh + 1] = lo;
            free_sum += lo - at;
            nh++;
        }
        if (i < nlive) {
            uint64_t top = s->b[s->stack[live0 + i]].off + s->b[s->stack[live0 + i]].size;
            if (top > at) at = top;
        }
    }
    uint64_t start_sum = 0;
    for (size_t i = s->st_begin[ti]; i < s->st_begin[ti + 1]; i++)
        start_sum += s->b[s->st_buf[i]].size;
    swp_rc rc;
    if (free_sum != start_sum) {
        rc = SWP_FAILED; /* not zero slack here (checked before the search) */
    } else {
        rc = swp_fill(s, ti, live0, nlive, hv, nh, 0, nh ? hv[0] : 0);
    }
    free(hv);
    if (rc == SWP_FAILED) swp_fail_add(s, key);
    return rc;
}

/* Orders the starters of each time: by size descending (round 0), or
 * shuffled (later rounds). */
static void swp_order(swp *s, unsigned round) {
    for (size_t ti = 0; ti < s->nt; ti++) {
        size_t *v = s->st_buf + s->st_begin[ti];
        size_t k = s->st_begin[ti + 1] - s->st_begin[ti];
        if (round == 0) {
            for (size_t i = 1; i < k; i++) { /* insertion sort, size desc */
                size_t x = v[i], j = i;
                while (j > 0 && s->b[v[j - 1]].size < s->b[x].size) {
                    v[j] = v[j - 1];
                    j--;
                }
                v[j] = x;
            }
        } else {
            for (size_t i = k; i > 1; i--) {
                s->rnd = swp_mix(s->rnd + 0x9e3779b97f4a7c15ull);
                size_t j = (size_t)(s->rnd % i);
                size_t x = v[i - 1];
                v[i - 1] = v[j];
                v[j] = x;
            }
        }
    }
}

lay_status lay_sweep(const layout_problem *p, uint64_t capacity, double deadline, uint64_t *offsets,
                     uint64_t *nodes_out) {
    if (nodes_out) *nodes_out = 0;
    const layout_buffer *bufs = p->bufs;
    const size_t n = p->n;
    lay_reduced red;
    lay_reduce(bufs, n, p->align, &red);
    lay_status result = LAY_GAVE_UP;
    swp s;
    memset(&s, 0, sizeof s);
    if (red.base > capacity) goto done;
    s.n = red.n;
    s.cap = (capacity - red.base) / red.unit;
    if ((capacity - red.base) % red.unit != 0 && red.n > 0) goto done;
    if (red.n == 0) {
        memcpy(offsets, red.offsets, n * sizeof *offsets);
        result = LAY_FOUND;
        goto done;
    }
    s.b = xmallocarray(s.n, sizeof *s.b);
    s.times = xmallocarray(s.n, sizeof *s.times);
    s.st_begin = xmallocarray(s.n + 1, sizeof *s.st_begin);
    s.st_buf = xmallocarray(s.n, sizeof *s.st_buf);
    for (size_t i = 0; i < s.n; i++) {
        const layout_buffer *x = &bufs[red.orig[i]];
        s.b[i] = (swp_buf){red.size[i], SWP_NONE, x->start, x->end,
                           swp_mix(i * 0x9e3779b97f4a7c15ull + 7)};
        s.times[i] = x->start;
    }
    qsort(s.times, s.n, sizeof *s.times, lay_i32_cmp);
    s.nt = 0;
    for (size_t i = 0; i < s.n; i++)
        if (s.nt == 0 || s.times[s.nt - 1] != s.times[i]) s.times[s.nt++] = s.times[i];
    /* zero slack everywhere: the live size is the capacity at every step
     * from the first start to the last end (steps where it changes are
     * starts and ends + 1) */
    {
        int32_t *ev = xmallocarray(2 * s.n, sizeof *ev);
        for (size_t i = 0; i < s.n; i++) {
            ev[2 * i] = s.b[i].start;
            ev[2 * i + 1] = s.b[i].end == INT32_MAX ? INT32_MAX : s.b[i].end + 1;
        }
        qsort(ev, 2 * s.n, sizeof *ev, lay_i32_cmp);
        int32_t last = ev[2 * s.n - 1];
        int ok = 1;
        for (size_t e = 0; e < 2 * s.n && ok; e++) {
            if ((e > 0 && ev[e] == ev[e - 1]) || ev[e] == last) continue;
            uint64_t live = 0;
            for (size_t i = 0; i < s.n; i++)
                if (s.b[i].start <= ev[e] && ev[e] <= s.b[i].end) live += s.b[i].size;
            ok = live == s.cap;
        }
        free(ev);
        if (!ok) goto done; /* gave up: not a zero-slack problem */
    }
    size_t k = 0;
    for (size_t ti = 0; ti < s.nt; ti++) {
        s.st_begin[ti] = k;
        for (size_t i = 0; i < s.n; i++)
            if (s.b[i].start == s.times[ti]) s.st_buf[k++] = i;
    }
    s.st_begin[s.nt] = k;
    /* the live lists: each level at most n long, levels at most nt + 1 */
    s.stack_cap = (s.nt + 2) * s.n;
    if (s.stack_cap / (s.nt + 2) != s.n || s.stack_cap > ((size_t)1 << 26)) {
        goto done; /* too large for this simple stack: give up */
    }
    s.stack = xmallocarray(s.stack_cap, sizeof *s.stack);
    s.fail_mask = ((size_t)1 << 20) - 1;
    s.fail = xcalloc(s.fail_mask + 1, sizeof *s.fail);
    s.deadline = deadline;
    s.rnd = 12345;
    for (unsigned round = 0; roamc_now() < deadline; round++) {
        swp_order(&s, round);
        s.nodes_left = (long long)(1000 * (s.n + 1)) << (round < 20 ? round : 20);
        s.aborted = 0;
        for (size_t i = 0; i < s.n; i++) s.b[i].off = SWP_NONE;
        swp_rc rc = swp_step(&s, 0, 0, 0);
        if (rc == SWP_FOUND) {
            for (size_t i = 0; i < s.n; i++)
                red.offsets[red.orig[i]] = red.base + s.b[i].off * red.unit;
            memcpy(offsets, red.offsets, n * sizeof *offsets);
            result = LAY_FOUND;
            break;
        }
        if (rc == SWP_FAILED) break; /* exhausted (up to the hash): leave the proof to the others */
    }
done:
    if (nodes_out) *nodes_out = s.nodes;
    free(s.b);
    free(s.times);
    free(s.st_begin);
    free(s.st_buf);
    free(s.stack);
    free(s.fail);
    lay_reduced_free(&red);
    return result;
}
