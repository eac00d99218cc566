/* layout_pytorch.c — a replay of PyTorch's CUDA caching allocator.
 *
 * The rules are those of shared/DESIGN.md (Baselines), taken from
 * c10/cuda/CUDACachingAllocator.cpp:
 *   - request sizes are rounded up to 512 B;
 *   - requests <= 1 MiB come from the small pool, whose segments are 2 MiB;
 *     larger ones from the large pool, whose segments are 20 MiB for requests
 *     below 10 MiB and otherwise the request rounded up to 2 MiB;
 *   - a request takes the free block of its pool with the smallest size, then
 *     the lowest address, that holds it; only when there is none is a new
 *     segment reserved (segments are never given back);
 *   - the block is split when what is left is >= 512 B (small pool) or
 *     > 1 MiB (large pool); otherwise the whole block is handed out;
 *   - a freed block merges with the free blocks next to it in its segment;
 *   - with a device limit: when reserving a segment would pass it, every
 *     segment that is wholly free is given back (release_cached_blocks; in
 *     torch 1.13 release_available_cached_blocks does nothing unless
 *     max_split_size_mb is set) and the reservation is tried once more; if it
 *     still does not fit, the program runs out of memory.
 * Addresses are "segment base + offset in segment", with the segments laid
 * end to end in the order they were reserved (a segment given back keeps
 * its addresses), so the result is a layout.
 */
#include "layout.h"
#include "layout_internal.h"

#include <stdlib.h>
#include <string.h>

#define PT_ROUND 512ULL                  /* kMinBlockSize */
#define PT_SMALL_SIZE (1ULL << 20)       /* kSmallSize: largest small request */
#define PT_SMALL_SEGMENT (2ULL << 20)    /* kSmallBuffer */
#define PT_LARGE_SEGMENT (20ULL << 20)   /* kLargeBuffer */
#define PT_MIN_LARGE_ALLOC (10ULL << 20) /* kMinLargeAlloc */
#define PT_ROUND_LARGE (2ULL << 20)      /* kRoundLarge */

/* A block is a piece of one segment: allocated, or free and in its pool.
 * Blocks of a segment form a doubly linked list in address order. */
typedef struct pt_block {
    uint64_t addr; /* global address: segment base + offset */
    uint64_t size;
    size_t prev, next; /* neighbours in the segment, LAY_NIL at its ends */
    int small;         /* which pool */
    int free;
    int released; /* a whole segment given back to the device */
} pt_block;

typedef struct pt_allocator {
    pt_block *blocks; /* block ids are never reused: at most 2 per request */
    size_t nblocks, cap;
    lay_set pool[2];                  /* free blocks keyed by (size, addr); [1] = small pool */
    uint64_t reserved, reserved_peak; /* now, and the most at any time */
    uint64_t top;                     /* where the next segment's addresses start */
    uint64_t limit;                   /* device memory for segments; 0: no limit */
    uint64_t allocated, allocated_peak;
    size_t segments, released;
    int oom; /* a request found no room under the limit */
} pt_allocator;

static size_t pt_new_block(pt_allocator *a, uint64_t addr, uint64_t size, int small) {
    ROAMC_ASSERT(a->nblocks < a->cap);
    size_t id = a->nblocks++;
    a->blocks[id] = (pt_block){addr, size, LAY_NIL, LAY_NIL, small, 0, 0};
    return id;
}

static void pt_pool_add(pt_allocator *a, size_t id) {
    pt_block *b = &a->blocks[id];
    b->free = 1;
    lay_set_insert(&a->pool[b->small], id, b->size, b->addr);
}

static void pt_pool_remove(pt_allocator *a, size_t id) {
    a->blocks[id].free = 0;
    lay_set_erase(&a->pool[a->blocks[id].small], id);
}

/* Gives every wholly free segment back to the device (emptying the cache,
 * as the allocator does before it reports out of memory). */
static void pt_release_cached(pt_allocator *a) {
    for (size_t id = 0; id < a->nblocks; id++) {
        pt_block *b = &a->blocks[id];
        if (b->free && b->prev == LAY_NIL && b->next == LAY_NIL) {
            pt_pool_remove(a, id);
            b->released = 1;
            a->reserved -= b->size;
            a->released++;
        }
    }
}

/* Returns the block id given out for a request of (rounded) size sz, or
 * LAY_NIL when the device limit leaves no room (a->oom). */
static size_t pt_malloc(pt_allocator *a, uint64_t sz) {
    int small = sz <= PT_SMALL_SIZE;
    size_t id = lay_set_ceil(&a->pool[small], sz, 0); /* best fit: (size, addr) */
    if (id != LAY_NIL) {
        pt_pool_remove(a, id);
    } else {
        uint64_t seg = small                     ? PT_SMALL_SEGMENT
                       : sz < PT_MIN_LARGE_ALLOC ? PT_LARGE_SEGMENT
                                                 : lay_round_up(sz, PT_ROUND_LARGE);
        if (a->limit && a->reserved + seg > a->limit) pt_release_cached(a);
        if (a->limit && a->reserved + seg > a->limit) {
            a->oom = 1;
            return LAY_NIL;
        }
        id = pt_new_block(a, a->top, seg, small);
        a->top += seg;
        a->reserved += seg;
        if (a->reserved > a->reserved_peak) a->reserved_peak = a->reserved;
        a->segments++;
    }
    pt_block *b = &a->blocks[id];
    ROAMC_ASSERT(b->size >= sz);
    uint64_t rest = b->size - sz;
    int split = small ? rest >= PT_ROUND : rest > PT_SMALL_SIZE;
    if (split) {
        size_t r = pt_new_block(a, b->addr + sz, rest, small);
        b = &a->blocks[id]; /* (the array does not move, but keep it obvious) */
        a->blocks[r].prev = id;
        a->blocks[r].next = b->next;
        if (b->next != LAY_NIL) a->blocks[b->next].prev = r;
        b->next = r;
        b->size = sz;
        pt_pool_add(a, r);
    }
    a->allocated += b->size;
    if (a->allocated > a->allocated_peak) a->allocated_peak = a->allocated;
    return id;
}

static void pt_free(pt_allocator *a, size_t id) {
    pt_block *b = &a->blocks[id];
    ROAMC_ASSERT(!b->free);
    a->allocated -= b->size;
    /* Absorb a free neighbour into b: b keeps its id, the neighbour's id is
     * dropped from the list and from the pool. */
    size_t nb = b->prev;
    if (nb != LAY_NIL && a->blocks[nb].free) {
        pt_pool_remove(a, nb);
        b->addr = a->blocks[nb].addr;
        b->size += a->blocks[nb].size;
        b->prev = a->blocks[nb].prev;
        if (b->prev != LAY_NIL) a->blocks[b->prev].next = id;
    }
    nb = b->next;
    if (nb != LAY_NIL && a->blocks[nb].free) {
        pt_pool_remove(a, nb);
        b->size += a->blocks[nb].size;
        b->next = a->blocks[nb].next;
        if (b->next != LAY_NIL) a->blocks[b->next].prev = id;
    }
    pt_pool_add(a, id);
}

uint64_t layout_pytorch(const layout_buffer *bufs, size_t n, uint64_t limit, uint64_t *offsets,
                        layout_pytorch_stats *stats) {
    pt_allocator a;
    memset(&a, 0, sizeof a);
    a.limit = limit;
    a.cap = 2 * n + 1;
    a.blocks = xmallocarray(a.cap, sizeof *a.blocks);
    lay_events ev;
    lay_events_init(bufs, n, &ev);
    size_t *block_of = xmallocarray(n, sizeof *block_of);
    for (int k = 0; k < 2; k++) lay_set_init(&a.pool[k], a.cap);
    for (size_t i = 0; i < n; i++) offsets[i] = 0; /* empty buffers: nothing to allocate */
    size_t f = 0;
    for (size_t k = 0; k < ev.m; k++) {
        size_t i = ev.allocs[k].idx;
        /* free what ended before this step, before allocating at it */
        while (f < ev.m && ev.frees[f].k1 < ev.allocs[k].k1)
            pt_free(&a, block_of[ev.frees[f++].idx]);
        uint64_t sz = lay_round_up(bufs[i].size, PT_ROUND);
        block_of[i] = pt_malloc(&a, sz);
        if (block_of[i] == LAY_NIL) break;
        offsets[i] = a.blocks[block_of[i]].addr;
    }
    uint64_t result = a.oom ? UINT64_MAX : a.top;
    if (stats) {
        stats->reserved_peak = a.reserved_peak;
        stats->allocated_peak = a.allocated_peak;
        stats->segments = a.segments;
        stats->released = a.released;
        stats->oom = a.oom;
    }
    for (int k = 0; k < 2; k++) lay_set_free(&a.pool[k]);
    free(a.blocks);
    lay_events_free(&ev);
    free(block_of);
    return result;
}
