/* lay_set: the ordered set of layout_internal.h, a treap.
 *
 * A treap is a binary search tree on the keys that is also a heap on random
 * priorities, which keeps it balanced in expectation.  Insert and erase are
 * written with split and merge, the shortest correct formulation. */
#include "layout_internal.h"

#include <stdlib.h>

/* splitmix64: a good 64-bit mix, so priorities of consecutive ids are
 * unrelated and the tree stays balanced whatever the insertion order. */
static uint64_t set_hash(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Is the key of node a less than the key (k1, k2)? */
static int set_less(const lay_set_node *a, uint64_t k1, uint64_t k2) {
    return a->k1 < k1 || (a->k1 == k1 && a->k2 < k2);
}

void lay_set_init(lay_set *set, size_t cap) {
    set->nodes = xcalloc(cap, sizeof *set->nodes);
    set->cap = cap;
    set->root = LAY_NIL;
    set->count = 0;
    for (size_t i = 0; i < cap; i++) set->nodes[i].prio = set_hash(i);
}

void lay_set_free(lay_set *set) {
    free(set->nodes);
    set->nodes = NULL;
    set->cap = set->count = 0;
    set->root = LAY_NIL;
}

/* Splits tree t into nodes with key < (k1, k2) (*lo) and the rest (*hi). */
static void set_split(lay_set_node *nodes, size_t t, uint64_t k1, uint64_t k2, size_t *lo,
                      size_t *hi) {
    if (t == LAY_NIL) {
        *lo = *hi = LAY_NIL;
    } else if (set_less(&nodes[t], k1, k2)) {
        set_split(nodes, nodes[t].right, k1, k2, &nodes[t].right, hi);
        *lo = t;
    } else {
        set_split(nodes, nodes[t].left, k1, k2, lo, &nodes[t].left);
        *hi = t;
    }
}

/* Joins trees a and b where every key of a is below every key of b. */
static size_t set_merge(lay_set_node *nodes, size_t a, size_t b) {
    if (a == LAY_NIL) return b;
    if (b == LAY_NIL) return a;
    if (nodes[a].prio > nodes[b].prio) {
        nodes[a].right = set_merge(nodes, nodes[a].right, b);
        return a;
    }
    nodes[b].left = set_merge(nodes, a, nodes[b].left);
    return b;
}

void lay_set_insert(lay_set *set, size_t id, uint64_t k1, uint64_t k2) {
    ROAMC_ASSERT(id < set->cap && !set->nodes[id].in_set);
    lay_set_node *x = &set->nodes[id];
    x->k1 = k1;
    x->k2 = k2;
    x->left = x->right = LAY_NIL;
    x->in_set = 1;
    size_t lo, hi;
    set_split(set->nodes, set->root, k1, k2, &lo, &hi);
    set->root = set_merge(set->nodes, set_merge(set->nodes, lo, id), hi);
    set->count++;
}

void lay_set_erase(lay_set *set, size_t id) {
    ROAMC_ASSERT(id < set->cap && set->nodes[id].in_set);
    lay_set_node *nodes = set->nodes;
    /* Find the link that points at id, then replace it by its children. */
    size_t *link = &set->root;
    while (*link != id) {
        ROAMC_ASSERT(*link != LAY_NIL);
        const lay_set_node *t = &nodes[*link];
        link = set_less(t, nodes[id].k1, nodes[id].k2) ? &nodes[*link].right : &nodes[*link].left;
    }
    *link = set_merge(nodes, nodes[id].left, nodes[id].right);
    nodes[id].in_set = 0;
    set->count--;
}

size_t lay_set_ceil(const lay_set *set, uint64_t k1, uint64_t k2) {
    size_t best = LAY_NIL;
    for (size_t t = set->root; t != LAY_NIL;) {
        if (set_less(&set->nodes[t], k1, k2)) {
            t = set->nodes[t].right;
        } else {
            best = t;
            t = set->nodes[t].left;
        }
    }
    return best;
}

size_t lay_set_floor(const lay_set *set, uint64_t k1, uint64_t k2) {
    size_t best = LAY_NIL;
    for (size_t t = set->root; t != LAY_NIL;) {
        const lay_set_node *x = &set->nodes[t];
        if (x->k1 < k1 || (x->k1 == k1 && x->k2 <= k2)) {
            best = t;
            t = x->right;
        } else {
            t = x->left;
        }
    }
    return best;
}
