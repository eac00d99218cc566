/* zero3 and fsdp: the rank's step with parameters gathered per wrap unit
 * (shard.h, "Gathered set-ups").
 *
 * The edits are planned on the given step's graph, then applied as
 * shard_emit.c applies its own: insertions before original positions in
 * ascending (position, sequence), each at its position plus what was
 * inserted before it (shift[]); then the rewired inputs of original nodes;
 * then the removed update nodes, from the highest index down; then the
 * declarations (inputs, value_info, metadata).
 */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "edit.h"
#include "shard_internal.h"

/* One wrap unit: its parameters flattened in roamc.parameters order. */
typedef struct gu_unit {
    char *name;      /* the module ("h.7"); "" for the root */
    bool root;       /* fsdp's root: one gather for both passes */
    int32_t elem;    /* its parameters' element type */
    uint64_t numel;  /* N: its parameters' elements */
    uint64_t shard;  /* S = ceil(N / world): the rank's elements */
    size_t fwd_at;   /* the first forward read of a parameter; SIZE_MAX: none */
    size_t bwd_at;   /* where its backward gather goes; SIZE_MAX: none (root) */
    size_t bwd_from; /* its backward's first op: first backward read or gradient */
    size_t grad_at;  /* after its last gradient: where the gradients are reduced */
    size_t red_at;   /* after its own microbatch's gradients: where they are reduced when
                      * each microbatch's are (gu_work.each) */
} gu_unit;

enum gu_kind { GU_GATHER = 1, GU_CLONE, GU_DEPEND, GU_REDUCE, GU_MINE };

typedef struct gu_insert {
    size_t position, seq;
    int kind;    /* enum gu_kind */
    size_t seg;  /* clone: the microbatch whose backward reads it */
    int index;   /* unit (gather, depend, reduce), parameter (mine) or value (clone) */
    bool bwd;    /* gather: the backward one */
    char *a, *b; /* depend: what it reads, its output (owned) */
    int like;    /* depend: the original value it stands for (type, shape) */
} gu_insert;

/* One input of an original node read under another name. */
typedef struct gu_rewire {
    size_t op, slot;
    char *name; /* owned */
} gu_rewire;

/* With gradient accumulation (roamc.grad_accum K) the step runs K
 * microbatches, each its forward and backward pass, then the optimizer:
 * each unit is gathered for each microbatch's forward and backward pass.
 * u[] holds one instance per unit and microbatch: instance seg * nb + b is
 * unit b in microbatch seg (K = 1: the units themselves). */
typedef struct gu_work {
    sh_work *w;
    gu_unit *u;
    size_t nu;                 /* instances: nb * K */
    size_t nb, K;              /* the units; the microbatches */
    size_t *seg_start;         /* per microbatch: its first node */
    size_t *seg_fwd_end;       /* per microbatch: its loss's producer */
    int *unit_of;              /* per parameter */
    uint64_t *own_lo, *own_hi; /* per parameter: its elements in the rank's range */
    int *param_of_storage;     /* per storage: the parameter it holds, -1 */
    char **clone;              /* per value: its backward remake's name, or NULL */
    gu_insert *ins;
    size_t n_ins, cap_ins;
    gu_rewire *rw;
    size_t n_rw, cap_rw;
    /* K > 1 without no_sync: each microbatch's gradients reduce-scattered
     * after its backward pass and added into the rank's shard */
    bool each;
    int *mb_grad; /* per parameter i and microbatch k, [i * K + k]: k's own gradient, -1 */
    bool *acc_op; /* per op: an add_ accumulating whole gradients over microbatches */
} gu_work;

static void gu_add_insert(gu_work *G, gu_insert in) {
    if (G->n_ins == G->cap_ins) {
        G->cap_ins = G->cap_ins ? 2 * G->cap_ins : 64;
        G->ins = xreallocarray(G->ins, G->cap_ins, sizeof *G->ins);
    }
    in.seq = G->n_ins;
    G->ins[G->n_ins++] = in;
}

static void gu_add_rewire(gu_work *G, size_t op, size_t slot, const char *name) {
    for (size_t k = 0; k < G->n_rw; k++)
        if (G->rw[k].op == op && G->rw[k].slot == slot) {
            free(G->rw[k].name);
            G->rw[k].name = xstrdup(name);
            return;
        }
    if (G->n_rw == G->cap_rw) {
        G->cap_rw = G->cap_rw ? 2 * G->cap_rw : 256;
        G->rw = xreallocarray(G->rw, G->cap_rw, sizeof *G->rw);
    }
    G->rw[G->n_rw++] = (gu_rewire){op, slot, xstrdup(name)};
}

/* What original node op reads in slot now (after the rewires so far). */
static const char *gu_reads(const gu_work *G, size_t op, size_t slot) {
    for (size_t k = 0; k < G->n_rw; k++)
        if (G->rw[k].op == op && G->rw[k].slot == slot) return G->rw[k].name;
    return G->w->m->values[G->w->m->nodes[op].inputs[slot]].name;
}

/* ------------------------------------------------------------- the units */

/* The unit a parameter named pn belongs to, into buf: the module that owns
 * it (zero3), the innermost module matching the wrap pattern (fsdp --wrap),
 * or its transformer layer (fsdp): the name up to its first all-digit
 * component.  "" (the root) when none. */
static void gu_unit_name(const shard_options *so, const char *pn, char *buf, size_t len) {
    buf[0] = 0;
    size_t n = strlen(pn);
    if (so->kind == SHARD_ZERO3) {
        const char *dot = strrchr(pn, '.');
        if (dot && (size_t)(dot - pn) < len) memcpy(buf, pn, (size_t)(dot - pn)), buf[dot - pn] = 0;
        return;
    }
    if (so->wrap) {
        /* '*' stays within one component: names and pattern with '/' for
         * '.', matched with FNM_PATHNAME */
        char pat[SH_NAME], mod[SH_NAME];
        snprintf(pat, sizeof pat, "%s", so->wrap);
        for (char *c = pat; *c; c++)
            if (*c == '.') *c = '/';
        for (size_t k = n; k-- > 0;) /* longest prefix first: the innermost module */
            if (pn[k] == '.' && k < len && k < sizeof mod) {
                memcpy(buf, pn, k);
                buf[k] = 0;
                memcpy(mod, pn, k);
                mod[k] = 0;
                for (char *c = mod; *c; c++)
                    if (*c == '.') *c = '/';
                if (fnmatch(pat, mod, FNM_PATHNAME) == 0) return;
            }
        buf[0] = 0;
        return;
    }
    for (size_t s = 0; s < n;) { /* each component [s, e) */
        size_t e = s + strcspn(pn + s, ".");
        bool digits = e > s && e < n;
        for (size_t k = s; k < e && digits; k++) digits = pn[k] >= '0' && pn[k] <= '9';
        if (digits && e < len) {
            memcpy(buf, pn, e);
            buf[e] = 0;
            return;
        }
        s = e + 1;
    }
}

/* Units in order of their first parameter; each parameter's offset in its
 * unit's flat buffer (p[].offset) and its elements in the rank's range. */
static int gu_units(gu_work *G) {
    sh_work *w = G->w;
    const shard_options *so = &w->r->so;
    G->u = xcalloc(w->n, sizeof *G->u);
    G->unit_of = xmallocarray(w->n, sizeof *G->unit_of);
    G->own_lo = xcalloc(w->n, sizeof *G->own_lo);
    G->own_hi = xcalloc(w->n, sizeof *G->own_hi);
    char name[SH_NAME];
    bool any_match = false;
    for (size_t i = 0; i < w->n; i++) {
        const fe_value *pv = &w->m->values[w->p[i].value];
        gu_unit_name(so, pv->name, name, sizeof name);
        any_match |= name[0] != 0;
        size_t k = 0;
        while (k < G->nu && strcmp(G->u[k].name, name) != 0) k++;
        if (k == G->nu)
            G->u[G->nu++] = (gu_unit){.name = xstrdup(name),
                                      .root = so->kind == SHARD_FSDP && !name[0],
                                      .elem = pv->elem_type,
                                      .fwd_at = SIZE_MAX,
                                      .bwd_at = SIZE_MAX,
                                      .bwd_from = SIZE_MAX};
        gu_unit *U = &G->u[k];
        if (U->elem != pv->elem_type)
            return roamc_errorf(w->err, w->errlen,
                                "%s: --shard %s: unit '%s' holds parameters of two element types "
                                "('%s' is not the type of the unit's first): a flat parameter "
                                "has one",
                                w->r->step_name, shard_kind_name(so->kind), U->name, pv->name);
        G->unit_of[i] = (int)k;
        w->p[i].offset = U->numel;
        U->numel += w->p[i].numel;
    }
    if (so->kind == SHARD_FSDP && so->wrap && !any_match)
        return roamc_errorf(w->err, w->errlen,
                            "%s: --wrap '%s' matches no module that holds parameters (a "
                            "module is a parameter's name up to a '.': parameter '%s')",
                            w->r->step_name, so->wrap,
                            w->n ? w->m->values[w->p[0].value].name : "?");
    uint64_t world = (uint64_t)so->world, rank = (uint64_t)so->rank;
    for (size_t k = 0; k < G->nu; k++) G->u[k].shard = (G->u[k].numel + world - 1) / world;
    for (size_t i = 0; i < w->n; i++) {
        const gu_unit *U = &G->u[G->unit_of[i]];
        uint64_t lo = rank * U->shard, hi = lo + U->shard;
        uint64_t a = w->p[i].offset, b = a + w->p[i].numel;
        if (a < lo) a = lo;
        if (b > hi) b = hi;
        G->own_lo[i] = a < b ? a - w->p[i].offset : 0;
        G->own_hi[i] = a < b ? b - w->p[i].offset : 0;
    }
    return 0;
}

/* --------------------------------------------------------------- reads */

enum { GU_FWD, GU_BWD, GU_OPT };

/* The microbatch node op belongs to. */
static size_t gu_seg(const gu_work *G, size_t op) {
    size_t k = G->K - 1;
    while (k > 0 && op < G->seg_start[k]) k--;
    return k;
}

/* The name of parameter pn's view of a gather in microbatch seg:
 * "PN.gathered" (forward) or "PN.regathered" (backward), "PN.mb<k>..." from
 * the second microbatch on. */
static void gu_view_name(const char *pn, size_t seg, bool bwd, char *buf, size_t len) {
    const char *what = bwd ? "regathered" : "gathered";
    if (seg == 0)
        snprintf(buf, len, "%s.%s", pn, what);
    else
        snprintf(buf, len, "%s.mb%zu.%s", pn, seg, what);
}

static int gu_phase(const gu_work *G, size_t op) {
    const sh_work *w = G->w;
    if (op <= G->seg_fwd_end[gu_seg(G, op)]) return GU_FWD;
    if (op > w->last_grad && w->op_tag[op] >= 0) return GU_OPT;
    return GU_BWD;
}

/* The name of v made again from the backward gather (v: a parameter's
 * forward view), planning the clones it needs before `at`. */
static const char *gu_remake(gu_work *G, int v, size_t at) {
    sh_work *w = G->w;
    if (G->clone[v]) return G->clone[v];
    char name[SH_NAME];
    snprintf(name, sizeof name, "%s.regathered", w->m->values[v].name);
    int p = w->m->values[v].producer;
    ROAMC_ASSERT(p >= 0 && gu_phase(G, (size_t)p) == GU_FWD);
    /* the producer's other outputs are remade with it */
    const fe_node *nd = &w->m->nodes[p];
    for (size_t k = 0; k < nd->n_outputs; k++)
        if (nd->outputs[k] >= 0) {
            snprintf(name, sizeof name, "%s.regathered", w->m->values[nd->outputs[k]].name);
            G->clone[nd->outputs[k]] = xstrdup(name);
        }
    for (size_t s = 0; s < nd->n_inputs; s++) {
        int x = nd->inputs[s];
        if (x < 0 || G->param_of_storage[w->g->storage_of[x]] < 0) continue;
        if (x != w->p[G->param_of_storage[w->g->storage_of[x]]].value) gu_remake(G, x, at);
    }
    gu_add_insert(G,
                  (gu_insert){.position = at, .kind = GU_CLONE, .index = v, .seg = gu_seg(G, at)});
    return G->clone[v];
}

/* Every read of a parameter's storage by an original node: forward reads
 * of the parameter read the forward gather's view, backward reads the
 * backward gather's (views made in the forward pass made again), update
 * nodes the rank's range.  Sets the units' positions. */
static int gu_reads_plan(gu_work *G) {
    sh_work *w = G->w;
    const graph *g = w->g;
    const fe_model *m = w->m;
    char name[SH_NAME];
    for (size_t op = 0; op < g->n_ops; op++) {
        const fe_node *nd = &m->nodes[op];
        int ph = gu_phase(G, op);
        for (size_t s = 0; s < nd->n_inputs; s++) {
            int v = nd->inputs[s];
            if (v < 0) continue;
            int i = G->param_of_storage[g->storage_of[v]];
            if (i < 0) continue;
            size_t seg = gu_seg(G, op);
            gu_unit *U = &G->u[seg * G->nb + (size_t)G->unit_of[i]];
            bool direct = v == w->p[i].value;
            const char *pn = m->values[w->p[i].value].name;
            if (ph == GU_OPT) {
                if (w->op_tag[op] != i)
                    return roamc_errorf(w->err, w->errlen,
                                        "%s: node #%zu (%s) updates one parameter and reads "
                                        "'%s' of another",
                                        w->r->step_name, op, nd->op_type, m->values[v].name);
                if (direct) {
                    snprintf(name, sizeof name, "%s.mine", pn);
                    gu_add_rewire(G, op, s, name);
                }
                continue;
            }
            bool fwd = ph == GU_FWD || U->root;
            if (direct) {
                gu_view_name(pn, seg, !fwd, name, sizeof name);
                gu_add_rewire(G, op, s, name);
                if (fwd && op < U->fwd_at) U->fwd_at = op;
            } else if (!fwd && m->values[v].producer >= 0 &&
                       gu_phase(G, (size_t)m->values[v].producer) == GU_FWD) {
                if (op < U->bwd_from) U->bwd_from = op;
                gu_add_rewire(G, op, s, gu_remake(G, v, op));
            }
            if (!fwd && direct && op < U->bwd_from) U->bwd_from = op;
        }
        if (ph == GU_OPT) /* the gradient's reads: the rank's range of it */
            for (size_t s = 0; s < nd->n_inputs; s++) {
                int i = w->op_tag[op];
                if (nd->inputs[s] != w->p[i].grad) continue;
                snprintf(name, sizeof name, "%s.mine", m->values[w->p[i].grad].name);
                gu_add_rewire(G, op, s, name);
            }
    }
    for (size_t i = 0; i < w->n; i++) {
        /* each microbatch's gradient: the accumulated one is a chain of
         * in-place add_(sum so far, microbatch k's) ending in the first
         * microbatch's; the unit is gathered for the backward pass of each
         * microbatch (FSDP's pre-backward hook), whether that pass reads the
         * parameters or not */
        int v = w->p[i].grad, p = w->p[i].producer;
        for (int hops = 0; p >= 0 && hops <= (int)G->K; hops++) {
            const fe_node *nd = &m->nodes[p];
            bool chain = G->K > 1 && strcmp(nd->op_type, "add_") == 0 && nd->n_inputs >= 2 &&
                         nd->inputs[0] >= 0 && nd->inputs[1] >= 0 &&
                         gu_phase(G, (size_t)p) == GU_BWD;
            int own = chain ? nd->inputs[1] : v; /* this microbatch's own gradient */
            int mine = chain ? m->values[own].producer : p;
            if (mine >= 0) {
                size_t seg = gu_seg(G, (size_t)mine);
                gu_unit *U = &G->u[seg * G->nb + (size_t)G->unit_of[i]];
                if ((size_t)mine < U->bwd_from) U->bwd_from = (size_t)mine;
                if ((size_t)mine + 1 > U->red_at) U->red_at = (size_t)mine + 1;
                int *slot = &G->mb_grad[i * G->K + seg];
                *slot = *slot == -1 ? own : -2; /* -2: two in one microbatch */
            }
            if (hops == 0) { /* the accumulated gradient: reduced after it */
                gu_unit *U = &G->u[gu_seg(G, (size_t)p) * G->nb + (size_t)G->unit_of[i]];
                if ((size_t)p < U->bwd_from) U->bwd_from = (size_t)p;
                if ((size_t)p + 1 > U->grad_at) U->grad_at = (size_t)p + 1;
            }
            if (!chain) break;
            G->acc_op[p] = true;
            v = nd->inputs[0];
            p = m->values[v].producer;
        }
        for (size_t k = 0; G->each && k < G->K; k++)
            if (G->mb_grad[i * G->K + k] < 0)
                return roamc_errorf(w->err, w->errlen,
                                    "%s: --shard %s: the accumulated gradient '%s' of '%s' is "
                                    "not one add_ per microbatch of that microbatch's own "
                                    "gradient (microbatch %zu: %s): reducing each microbatch's "
                                    "gradients needs them; --no-sync reduces the accumulated "
                                    "ones once",
                                    w->r->step_name, shard_kind_name(w->r->so.kind),
                                    m->values[w->p[i].grad].name, m->values[w->p[i].value].name, k,
                                    G->mb_grad[i * G->K + k] == -1 ? "none" : "two");
    }
    return 0;
}

/* Units in backward order (by bwd_from); each one's backward gather where
 * the unit `prefetch` places earlier starts, held there by a Depend on that
 * unit's first backward op. */
static int gu_backward_plan(gu_work *G) {
    sh_work *w = G->w;
    int *order = xmallocarray(G->nu ? G->nu : 1, sizeof *order);
    size_t n = 0;
    for (size_t k = 0; k < G->nu; k++) /* an instance whose backward reads no parameter: none */
        if (!G->u[k].root && G->u[k].bwd_from != SIZE_MAX) order[n++] = (int)k;
    for (size_t a = 1; a < n; a++) /* insertion sort: few units, stable */
        for (size_t b = a; b > 0 && G->u[order[b]].bwd_from < G->u[order[b - 1]].bwd_from; b--) {
            int t = order[b];
            order[b] = order[b - 1], order[b - 1] = t;
        }
    size_t depth = (size_t)w->r->so.prefetch;
    char out[SH_NAME];
    int rc = 0;
    for (size_t k = 0; k < n && rc == 0; k++) {
        gu_unit *U = &G->u[order[k]];
        /* prefetched within its microbatch's backward pass only */
        size_t lo = k;
        while (lo > 0 && k - lo < depth &&
               (size_t)order[lo - 1] / G->nb == (size_t)order[k] / G->nb)
            lo--;
        const gu_unit *at = &G->u[order[lo]];
        U->bwd_at = at->bwd_from;
        gu_add_insert(
            G,
            (gu_insert){.position = U->bwd_at, .kind = GU_GATHER, .index = order[k], .bwd = true});
        if (at == U) continue;
        /* the op that starts `at`'s backward reads one input through a
         * Depend on this unit's gather: this gather comes before it */
        size_t op = at->bwd_from;
        const fe_node *nd = &w->m->nodes[op];
        size_t slot = nd->n_inputs;
        for (size_t s = nd->n_inputs; s-- > 0 && slot == nd->n_inputs;)
            if (nd->inputs[s] >= 0) slot = s;
        if (slot == nd->n_inputs) {
            rc = roamc_errorf(w->err, w->errlen,
                              "%s: node #%zu (%s), where unit '%s' starts its backward, reads "
                              "nothing: no place to prefetch unit '%s' before it",
                              w->r->step_name, op, nd->op_type, at->name, U->name);
            break;
        }
        snprintf(out, sizeof out, "roamc.depend%d", order[k]);
        gu_insert in = {.position = op, .kind = GU_DEPEND, .index = order[k]};
        in.like = nd->inputs[slot];
        in.a = xstrdup(gu_reads(G, op, slot));
        in.b = xstrdup(out);
        gu_add_insert(G, in);
        gu_add_rewire(G, op, slot, out);
    }
    free(order);
    return rc;
}

/* ------------------------------------------------------------ emission */

static const int64_t gu_fresh[1] = {-1};
#define GU_FRESH_ATTRS                                                                             \
    {.name = "alias", .type = FE_ATTR_INTS, .ints = gu_fresh, .n_ints = 1}, {                      \
        .name = "inplace", .type = FE_ATTR_INT, .i = 0                                             \
    }

static void gu_buffer_name(const char *what, int u, char *buf, size_t len) {
    snprintf(buf, len, "roamc.%s%d", what, u);
}

/* as_strided of buffer: numel elements from offset, flat (dims NULL) or
 * shaped like v. */
static int gu_view(gu_work *G, fe_edit *e, size_t at, const char *buffer, const char *out,
                   const fe_value *v, uint64_t numel, uint64_t offset) {
    sh_work *w = G->w;
    int64_t size[64], stride[64];
    size_t rank = 1;
    size[0] = (int64_t)numel, stride[0] = 1;
    if (v) rank = sh_contiguous(v, size, stride);
    fe_attr_spec va[] = {{.name = "size", .type = FE_ATTR_INTS, .ints = size, .n_ints = rank},
                         {.name = "stride", .type = FE_ATTR_INTS, .ints = stride, .n_ints = rank},
                         {.name = "storage_offset", .type = FE_ATTR_INT, .i = (int64_t)offset},
                         SH_VIEW_ATTRS(0)};
    sh_node vn = {"org.pytorch.aten", "as_strided", {buffer}, 1, out, va, 5};
    if (sh_put(e, at, &vn, w->err, w->errlen)) return -1;
    int32_t elem = v ? v->elem_type : 0;
    if (!v) { /* the buffer's element type: a declared value */
        int b = fe_find_value(w->m, buffer);
        elem = b >= 0 ? w->m->values[b].elem_type : G->u[0].elem;
    }
    return sh_value_info(e, out, elem, &(sh_dims){v, v ? NULL : size, rank}, w->err, w->errlen);
}

/* AllGather of unit u's shard into a new full buffer, and a view of it for
 * each parameter read in that pass.  Returns the nodes inserted, -1. */
static long gu_emit_gather(gu_work *G, fe_edit *e, size_t at, int u, bool bwd) {
    sh_work *w = G->w;
    const gu_unit *U = &G->u[u];
    char shard[64], full[64], view[SH_NAME];
    int base = u % (int)G->nb;
    size_t seg = (size_t)u / G->nb;
    gu_buffer_name("param", base, shard, sizeof shard);
    gu_buffer_name(bwd ? "regathered" : "gathered", u, full, sizeof full);
    fe_attr_spec ga[] = {{.name = "world", .type = FE_ATTR_INT, .i = w->r->so.world},
                         {.name = "rank", .type = FE_ATTR_INT, .i = w->r->so.rank},
                         GU_FRESH_ATTRS};
    sh_node gn = {GRAPH_ROAMC_DOMAIN, "AllGather", {shard}, 1, full, ga, 4};
    if (sh_put(e, at, &gn, w->err, w->errlen)) return -1;
    int64_t dims[1] = {(int64_t)(U->shard * (uint64_t)w->r->so.world)};
    if (sh_value_info(e, full, U->elem, &(sh_dims){NULL, dims, 1}, w->err, w->errlen)) return -1;
    long added = 1;
    for (size_t i = 0; i < w->n; i++) {
        if (G->unit_of[i] != base) continue;
        const fe_value *pv = &w->m->values[w->p[i].value];
        gu_view_name(pv->name, seg, bwd, view, sizeof view);
        if (gu_view(G, e, at + (size_t)added, full, view, pv, 0, w->p[i].offset)) return -1;
        added++;
    }
    return added;
}

/* The name of unit b's gradient shard once microbatch k's gradients are
 * in it (gu_work.each): "roamc.grad<b>" after the last microbatch, which
 * the optimizer's views read; "roamc.grad<b>.mb<k>" before. */
static void gu_grad_name(const gu_work *G, int b, size_t k, char *buf, size_t len) {
    if (k + 1 >= G->K)
        snprintf(buf, len, "roamc.grad%d", b);
    else
        snprintf(buf, len, "roamc.grad%d.mb%zu", b, k);
}

/* After unit u's last gradient: the flat gradient (new_zeros of the
 * gathered buffer: it lives until here), each gradient copied in, div_ by
 * the world and the ReduceScatter into the rank's gradient shard.  Each
 * microbatch's (gu_work.each): instance u's own gradients copied in, into
 * flat buffer "roamc.gradflat<u>"; the first microbatch's ReduceScatter
 * makes the shard, each later one's makes "roamc.gradpart<u>", added into
 * the shard in place (FSDP's _saved_grad_shard += output; DeepSpeed's
 * grad partition add_). */
static long gu_emit_reduce(gu_work *G, fe_edit *e, size_t at, int u) {
    sh_work *w = G->w;
    const gu_unit *U = &G->u[u];
    char full[64], flat[64], div[80], shard[64], acc[64], sum[64];
    int base = u % (int)G->nb;
    size_t seg = (size_t)u / G->nb;
    gu_buffer_name(U->root || U->bwd_at == SIZE_MAX ? "gathered" : "regathered", u, full,
                   sizeof full);
    gu_buffer_name("gradflat", G->each ? u : base, flat, sizeof flat);
    if (!G->each)
        gu_buffer_name("grad", base, shard, sizeof shard);
    else if (seg == 0)
        gu_grad_name(G, base, 0, shard, sizeof shard);
    else
        gu_buffer_name("gradpart", u, shard, sizeof shard);
    snprintf(div, sizeof div, "%s.div", flat);
    int64_t dims[1] = {(int64_t)(U->shard * (uint64_t)w->r->so.world)};
    int64_t sdims[1] = {(int64_t)U->shard};
    fe_attr_spec za[] = {{.name = "size", .type = FE_ATTR_INTS, .ints = dims, .n_ints = 1},
                         GU_FRESH_ATTRS};
    sh_node zn = {"org.pytorch.aten", "new_zeros", {full}, 1, flat, za, 3};
    if (sh_put(e, at, &zn, w->err, w->errlen)) return -1;
    if (sh_value_info(e, flat, U->elem, &(sh_dims){NULL, dims, 1}, w->err, w->errlen)) return -1;
    long added = 1;
    for (size_t i = 0; i < w->n; i++) {
        if (G->unit_of[i] != base) continue;
        sh_copy c = {.param = (int)i, .value = -1, .in = true, .buffer = flat};
        if (G->each) c.value = G->mb_grad[i * G->K + seg];
        if (sh_emit_copy_of(w, e, at + (size_t)added, &c)) return -1;
        added += 2;
    }
    /* overload: the ATen call a runner replays (models/run_plan.py) */
    fe_attr_spec da[] = {{.name = "other", .type = FE_ATTR_FLOAT, .f = (float)w->r->so.world},
                         SH_VIEW_ATTRS(1),
                         {.name = "overload", .type = FE_ATTR_STRING, .s = "Tensor"}};
    fe_attr_spec ra[] = {{.name = "world", .type = FE_ATTR_INT, .i = w->r->so.world},
                         {.name = "rank", .type = FE_ATTR_INT, .i = w->r->so.rank},
                         GU_FRESH_ATTRS};
    sh_node dn = {"org.pytorch.aten", "div_", {flat}, 1, div, da, 4};
    sh_node rn = {GRAPH_ROAMC_DOMAIN, "ReduceScatter", {div}, 1, shard, ra, 4};
    if (sh_put(e, at + (size_t)added, &dn, w->err, w->errlen) ||
        sh_put(e, at + (size_t)added + 1, &rn, w->err, w->errlen))
        return -1;
    if (sh_value_info(e, div, U->elem, &(sh_dims){NULL, dims, 1}, w->err, w->errlen) ||
        sh_value_info(e, shard, U->elem, &(sh_dims){NULL, sdims, 1}, w->err, w->errlen))
        return -1;
    added += 2;
    if (!G->each || seg == 0) return added;
    gu_grad_name(G, base, seg - 1, acc, sizeof acc);
    gu_grad_name(G, base, seg, sum, sizeof sum);
    fe_attr_spec aa[] = {SH_VIEW_ATTRS(1),
                         {.name = "overload", .type = FE_ATTR_STRING, .s = "Tensor"}};
    sh_node an = {"org.pytorch.aten", "add_", {acc, shard}, 2, sum, aa, 3};
    if (sh_put(e, at + (size_t)added, &an, w->err, w->errlen) ||
        sh_value_info(e, sum, U->elem, &(sh_dims){NULL, sdims, 1}, w->err, w->errlen))
        return -1;
    return added + 1;
}

/* Before parameter i's first update node: flat views of the rank's range
 * of its parameter and gradient shards. */
static long gu_emit_mine(gu_work *G, fe_edit *e, size_t at, int i) {
    sh_work *w = G->w;
    int u = G->unit_of[i];
    uint64_t k = G->own_hi[i] - G->own_lo[i];
    uint64_t off = w->p[i].offset + G->own_lo[i] - (uint64_t)w->r->so.rank * G->u[u].shard;
    char shard[64], gshard[64], pv[SH_NAME], gv[SH_NAME];
    gu_buffer_name("param", u, shard, sizeof shard);
    gu_buffer_name("grad", u, gshard, sizeof gshard);
    snprintf(pv, sizeof pv, "%s.mine", w->m->values[w->p[i].value].name);
    snprintf(gv, sizeof gv, "%s.mine", w->m->values[w->p[i].grad].name);
    if (gu_view(G, e, at, shard, pv, NULL, k, off) ||
        gu_view(G, e, at + 1, gshard, gv, NULL, k, off))
        return -1;
    return 2;
}

/* A forward view of a parameter made again after the backward gather:
 * its producer cloned, reading what the backward pass reads. */
static long gu_emit_clone(gu_work *G, fe_edit *e, size_t at, const gu_insert *in,
                          const size_t *shift) {
    int v = in->index;
    sh_work *w = G->w;
    const fe_model *m = w->m;
    int p = m->values[v].producer;
    const fe_node *nd = &m->nodes[p];
    const char *outs[16];
    if (nd->n_outputs > 16)
        return roamc_errorf(w->err, w->errlen, "%s: node #%d makes %zu views of a parameter",
                            w->r->step_name, p, nd->n_outputs);
    for (size_t k = 0; k < nd->n_outputs; k++)
        outs[k] = nd->outputs[k] >= 0 ? G->clone[nd->outputs[k]] : "";
    fe_clone_spec cs = {
        .node = (size_t)p + shift[p], .position = at, .outputs = outs, .n_outputs = nd->n_outputs};
    char name[SH_NAME];
    snprintf(name, sizeof name, "%s.regathered", m->values[v].name);
    cs.name = name;
    if (fe_edit_clone_node(e, &cs, w->err, w->errlen)) return -1;
    for (size_t s = 0; s < nd->n_inputs; s++) {
        int x = nd->inputs[s];
        if (x < 0) continue;
        int i = G->param_of_storage[w->g->storage_of[x]];
        if (i < 0) continue;
        char pn[SH_NAME];
        gu_view_name(m->values[x].name, in->seg, true, pn, sizeof pn);
        if (fe_edit_replace_input(e, at, s, x == w->p[i].value ? pn : G->clone[x], w->err,
                                  w->errlen))
            return -1;
    }
    for (size_t k = 0; k < nd->n_outputs; k++)
        if (nd->outputs[k] >= 0 &&
            sh_value_info(e, outs[k], m->values[nd->outputs[k]].elem_type,
                          &(sh_dims){&m->values[nd->outputs[k]], NULL, 0}, w->err, w->errlen))
            return -1;
    return 1;
}

/* Depend: a view of what the node reads (in->a, shaped like value
 * in->like), ordered after unit in->index's backward gather. */
static long gu_emit_depend(gu_work *G, fe_edit *e, size_t at, const gu_insert *in) {
    sh_work *w = G->w;
    char full[64];
    gu_buffer_name("regathered", in->index, full, sizeof full);
    fe_attr_spec da[] = {SH_VIEW_ATTRS(0)};
    sh_node dn = {GRAPH_ROAMC_DOMAIN, "Depend", {in->a, full}, 2, in->b, da, 2};
    if (sh_put(e, at, &dn, w->err, w->errlen)) return -1;
    const fe_value *like = &w->m->values[in->like];
    return sh_value_info(e, in->b, like->elem_type, &(sh_dims){like, NULL, 0}, w->err, w->errlen)
               ? -1
               : 1;
}

static int gu_insert_rank(int kind) {
    /* at one position: gathers, then the clones reading them, the Depends
     * reading both, the reductions, the views of the shards they make */
    return kind;
}

static int gu_insert_cmp(const void *pa, const void *pb) {
    const gu_insert *x = pa, *y = pb;
    if (x->position != y->position) return x->position < y->position ? -1 : 1;
    int kx = gu_insert_rank(x->kind), ky = gu_insert_rank(y->kind);
    if (kx != ky) return kx < ky ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* The insertions in order; shift[j]: nodes inserted before original j. */
static int gu_apply(gu_work *G, fe_edit *e, size_t *shift) {
    size_t n_ops = G->w->g->n_ops, added = 0, k = 0;
    qsort(G->ins, G->n_ins, sizeof *G->ins, gu_insert_cmp);
    for (size_t q = 0; q < G->n_ins; q++) {
        const gu_insert *in = &G->ins[q];
        for (; k < in->position && k < n_ops; k++) shift[k] = added;
        size_t at = in->position + added;
        long n = -1;
        switch (in->kind) {
        case GU_GATHER: n = gu_emit_gather(G, e, at, in->index, in->bwd); break;
        case GU_CLONE: n = gu_emit_clone(G, e, at, in, shift); break;
        case GU_DEPEND: n = gu_emit_depend(G, e, at, in); break;
        case GU_REDUCE: n = gu_emit_reduce(G, e, at, in->index); break;
        case GU_MINE: n = gu_emit_mine(G, e, at, in->index); break;
        default: ROAMC_ASSERT(0);
        }
        if (n < 0) return -1;
        added += (size_t)n;
    }
    for (; k < n_ops; k++) shift[k] = added;
    for (size_t q = 0; q < G->n_rw; q++) {
        const gu_rewire *r = &G->rw[q];
        if (fe_edit_replace_input(e, r->op + shift[r->op], r->slot, r->name, G->w->err,
                                  G->w->errlen))
            return -1;
    }
    return 0;
}

/* Resizes value v (made by an update node of parameter i, or its state)
 * to the rank's range when it has the parameter's elements. */
static int gu_resize(gu_work *G, fe_edit *e, int v, int i) {
    sh_work *w = G->w;
    const fe_value *val = &w->m->values[v];
    if (sh_numel(val) != w->p[i].numel || val->rank < 1) return 0;
    int64_t dims[1] = {(int64_t)(G->own_hi[i] - G->own_lo[i])};
    fe_value_spec spec = {val->name, val->elem_type, 1, dims};
    if ((val->kind & FE_GRAPH_INPUT) && fe_edit_set_input(e, &spec, w->err, w->errlen)) return -1;
    if ((val->kind & FE_GRAPH_OUTPUT) && fe_edit_set_output(e, &spec, w->err, w->errlen)) return -1;
    return fe_edit_add_value_info(e, &spec, w->err, w->errlen);
}

/* The update nodes: a parameter with no element in the rank's range loses
 * them (and its state); the others' values take the range's shape. */
static int gu_updates(gu_work *G, fe_edit *e, const size_t *shift, size_t *n_removed) {
    sh_work *w = G->w;
    const fe_model *m = w->m;
    for (size_t op = w->g->n_ops; op-- > w->last_grad + 1;) {
        int i = w->op_tag[op];
        if (i < 0) continue;
        const fe_node *nd = &m->nodes[op];
        if (G->own_hi[i] > G->own_lo[i]) {
            for (size_t k = 0; k < nd->n_outputs; k++)
                if (nd->outputs[k] >= 0 && gu_resize(G, e, nd->outputs[k], i)) return -1;
            continue;
        }
        w->removed[op] = true;
        (*n_removed)++;
        if (fe_edit_remove_node(e, op + shift[op], w->err, w->errlen)) return -1;
        for (size_t k = 0; k < nd->n_outputs; k++)
            if (nd->outputs[k] >= 0) fe_edit_remove_value(e, m->values[nd->outputs[k]].name);
    }
    bool *keep = xcalloc(w->n_states ? w->n_states : 1, sizeof *keep);
    int rc = 0;
    for (size_t k = 0; k < w->n_states && rc == 0; k++) {
        int i = w->state_of[k];
        keep[k] = i < 0 || G->own_hi[i] > G->own_lo[i];
        if (!keep[k])
            fe_edit_remove_value(e, m->values[w->states[k]].name);
        else if (i >= 0)
            rc = gu_resize(G, e, w->states[k], i);
    }
    char *s = sh_join(m, w->states, w->n_states, keep);
    fe_edit_set_meta(e, "roamc.optimizer_state", s);
    free(s);
    free(keep);
    return rc;
}

/* gu_work.each: the add_ nodes that accumulated the whole gradients over
 * the microbatches go (each microbatch's are reduced and added into the
 * shard instead); only the optimizer may read what they made, through the
 * shard's views (gu_reads_plan rewired it). */
static int gu_drop_accumulation(gu_work *G, fe_edit *e, const size_t *shift) {
    sh_work *w = G->w;
    const fe_model *m = w->m;
    for (size_t op = 0; op < w->g->n_ops; op++) {
        if (G->acc_op[op] || w->removed[op]) continue;
        const fe_node *nd = &m->nodes[op];
        for (size_t s = 0; s < nd->n_inputs; s++) {
            int v = nd->inputs[s], i = w->op_tag[op];
            if (v < 0 || m->values[v].producer < 0 || !G->acc_op[m->values[v].producer]) continue;
            if (gu_phase(G, op) == GU_OPT && i >= 0 && v == w->p[i].grad) continue;
            return roamc_errorf(w->err, w->errlen,
                                "%s: --shard %s: node #%zu (%s) reads '%s', a whole gradient "
                                "accumulated over microbatches, which no rank keeps when each "
                                "microbatch's gradients are reduced; --no-sync keeps them",
                                w->r->step_name, shard_kind_name(w->r->so.kind), op, nd->op_type,
                                m->values[v].name);
        }
    }
    for (size_t op = w->g->n_ops; op-- > 0;) {
        if (!G->acc_op[op]) continue;
        if (fe_edit_remove_node(e, op + shift[op], w->err, w->errlen)) return -1;
        const fe_node *nd = &m->nodes[op];
        for (size_t k = 0; k < nd->n_outputs; k++)
            if (nd->outputs[k] >= 0) fe_edit_remove_value(e, m->values[nd->outputs[k]].name);
    }
    return 0;
}

/* A comma-separated list "roamc.WHAT<u>" of the first n units or instances
 * (those with a backward gather when bwd_only). */
static char *gu_names(const gu_work *G, const char *what, bool bwd_only, size_t n) {
    char *s = xmalloc(n * (strlen(what) + 32) + 1), *p = s;
    *p = 0;
    for (size_t u = 0; u < n; u++) {
        if (bwd_only && G->u[u].bwd_at == SIZE_MAX) continue;
        p += sprintf(p, "%sroamc.%s%zu", p == s ? "" : ",", what, u);
    }
    return s;
}

/* The parameters go; the shards come in; the metadata says what is what. */
static int gu_declare(gu_work *G, fe_edit *e) {
    sh_work *w = G->w;
    const shard_options *so = &w->r->so;
    for (size_t i = 0; i < w->n; i++) fe_edit_remove_value(e, w->m->values[w->p[i].value].name);
    char name[64];
    for (size_t u = 0; u < G->nb; u++) {
        gu_buffer_name("param", (int)u, name, sizeof name);
        int64_t dims[1] = {(int64_t)G->u[u].shard};
        fe_value_spec v = {name, G->u[u].elem, 1, dims};
        if (fe_edit_set_input(e, &v, w->err, w->errlen)) return -1;
    }
    char *s = gu_names(G, "param", false, G->nb);
    fe_edit_set_meta(e, "roamc.parameters", s);
    free(s);
    s = gu_names(G, "grad", false, G->nb);
    fe_edit_set_meta(e, "roamc.gradients", s);
    free(s);
    s = gu_names(G, "gradflat", false, G->each ? G->nu : G->nb);
    if (G->each) { /* and each later microbatch's reduced part */
        char *parts = gu_names(G, "gradpart", false, G->nu);
        const char *tail = parts;
        for (size_t u = 0; u < G->nb; u++) tail += strcspn(tail, ","), tail += *tail == ',';
        char *both = xmalloc(strlen(s) + strlen(tail) + 2);
        sprintf(both, "%s%s%s", s, *tail ? "," : "", tail);
        free(s);
        free(parts);
        s = both;
    }
    fe_edit_set_meta(e, "roamc.communication", s);
    free(s);
    if (G->K > 1 && !G->each) { /* no_sync: the whole gradients kept over the microbatches */
        int *gv = xmallocarray(w->n, sizeof *gv);
        for (size_t i = 0; i < w->n; i++) gv[i] = w->p[i].grad;
        s = sh_join(w->m, gv, w->n, NULL);
        fe_edit_set_meta(e, "roamc.accumulated_gradients", s);
        free(s);
        free(gv);
    }
    char *f = gu_names(G, "gathered", false, G->nu), *b = gu_names(G, "regathered", true, G->nu);
    s = xmalloc(strlen(f) + strlen(b) + 2);
    sprintf(s, "%s%s%s", f, *f && *b ? "," : "", b);
    fe_edit_set_meta(e, "roamc.gathered", s);
    free(s);
    free(f);
    free(b);
    char setup[SH_NAME];
    snprintf(setup, sizeof setup, "%s world=%ld rank=%ld prefetch=%ld wrap=%s units=%zu",
             shard_kind_name(so->kind), so->world, so->rank, so->prefetch,
             so->kind == SHARD_ZERO3 ? "module"
             : so->wrap              ? so->wrap
                                     : "layer",
             G->nb);
    if (G->K > 1) /* no_sync: whole gradients accumulated, one reduction */
        snprintf(setup + strlen(setup), sizeof setup - strlen(setup), " grad_accum=%zu %s", G->K,
                 G->each ? "per_microbatch" : "no_sync");
    fe_edit_set_meta(e, "roamc.shard", setup);
    return 0;
}

static void gu_free(gu_work *G) {
    for (size_t u = 0; u < G->nu; u++) free(G->u[u].name);
    free(G->u);
    free(G->unit_of);
    free(G->own_lo);
    free(G->own_hi);
    free(G->param_of_storage);
    free(G->seg_start);
    free(G->seg_fwd_end);
    if (G->clone)
        for (size_t v = 0; v < G->w->m->n_values; v++) free(G->clone[v]);
    free(G->clone);
    for (size_t k = 0; k < G->n_ins; k++) free(G->ins[k].a), free(G->ins[k].b);
    free(G->ins);
    for (size_t k = 0; k < G->n_rw; k++) free(G->rw[k].name);
    free(G->rw);
    free(G->mb_grad);
    free(G->acc_op);
}

/* The microbatches of a step with gradient accumulation (roamc.grad_accum
 * K): each value's microbatch is the highest k of the data inputs
 * "mb<k>.NAME" it is made from; microbatch k starts right after the last
 * node of microbatch k-1 before the first node of microbatch k.  Every
 * microbatch runs the same forward nodes (export.py's and --train's
 * steps), so microbatch k's loss is made as many nodes into it as the
 * last's (metadata roamc.loss) is into the last; checked by operator.
 * Returns 0, or -1 with a message. */
static int gu_segments(gu_work *G, size_t last_fwd_end) {
    sh_work *w = G->w;
    const fe_model *m = w->m;
    size_t n_ops = w->g->n_ops;
    long *tag = xmallocarray(m->n_values ? m->n_values : 1, sizeof *tag);
    for (size_t v = 0; v < m->n_values; v++) {
        const char *nm = m->values[v].name;
        char *end;
        tag[v] = -1;
        if (strncmp(nm, "mb", 2) == 0 && nm[2] >= '0' && nm[2] <= '9') {
            long k = strtol(nm + 2, &end, 10);
            if (*end == '.' && (m->values[v].kind & FE_GRAPH_INPUT)) tag[v] = k;
        }
    }
    long *op_tag = xmallocarray(n_ops ? n_ops : 1, sizeof *op_tag);
    for (size_t op = 0; op < n_ops; op++) {
        const fe_node *nd = &m->nodes[op];
        long t = -1;
        for (size_t s = 0; s < nd->n_inputs; s++)
            if (nd->inputs[s] >= 0 && tag[nd->inputs[s]] > t) t = tag[nd->inputs[s]];
        op_tag[op] = t;
        for (size_t k = 0; k < nd->n_outputs; k++)
            if (nd->outputs[k] >= 0) tag[nd->outputs[k]] = t;
    }
    int rc = 0;
    G->seg_start[0] = 0;
    for (size_t k = 1; k < G->K && rc == 0; k++) {
        size_t first = 0;
        while (first < n_ops && op_tag[first] != (long)k) first++;
        size_t start = first;
        while (start > G->seg_start[k - 1] && op_tag[start - 1] != (long)k - 1) start--;
        if (first == n_ops || start <= G->seg_start[k - 1])
            rc = roamc_errorf(w->err, w->errlen,
                              "%s: --shard %s: roamc.grad_accum is %zu and no node reads "
                              "microbatch %zu's data (mb%zu.*) after microbatch %zu's",
                              w->r->step_name, shard_kind_name(w->r->so.kind), G->K, k, k, k - 1);
        G->seg_start[k] = start;
    }
    size_t last = G->seg_start[G->K - 1];
    if (rc == 0 && last_fwd_end < last)
        rc = roamc_errorf(w->err, w->errlen,
                          "%s: --shard %s: the loss (roamc.loss) is made before the last "
                          "microbatch starts (node #%zu)",
                          w->r->step_name, shard_kind_name(w->r->so.kind), last);
    for (size_t k = 0; k < G->K && rc == 0; k++) {
        G->seg_fwd_end[k] = G->seg_start[k] + (last_fwd_end - last);
        bool same = G->seg_fwd_end[k] < n_ops;
        for (size_t d = 0; same && d <= last_fwd_end - last; d++)
            same = strcmp(m->nodes[G->seg_start[k] + d].op_type, m->nodes[last + d].op_type) == 0;
        if (!same)
            rc = roamc_errorf(w->err, w->errlen,
                              "%s: --shard %s: microbatch %zu's forward pass (from node #%zu) "
                              "does not run the last microbatch's nodes: roamc cannot find "
                              "its loss",
                              w->r->step_name, shard_kind_name(w->r->so.kind), k, G->seg_start[k]);
    }
    free(op_tag);
    free(tag);
    return rc;
}

/* The forward pass ends at the loss's producer (metadata roamc.loss); with
 * gradient accumulation, each microbatch's at its own (gu_segments). */
static int gu_forward_end(gu_work *G) {
    sh_work *w = G->w;
    const char *loss = fe_meta(w->m, "roamc.loss");
    int v = loss ? fe_find_value(w->m, loss) : -1;
    if (v < 0 || w->m->values[v].producer < 0)
        return roamc_errorf(w->err, w->errlen,
                            "%s: --shard %s needs metadata roamc.loss naming the loss a node "
                            "makes: the forward pass ends there, and each unit is gathered again "
                            "for the backward pass",
                            w->r->step_name, shard_kind_name(w->r->so.kind));
    if (sh_grad_accum(w, &G->K)) return -1;
    G->seg_start = xcalloc(G->K, sizeof *G->seg_start);
    G->seg_fwd_end = xcalloc(G->K, sizeof *G->seg_fwd_end);
    G->seg_fwd_end[0] = (size_t)w->m->values[v].producer;
    return G->K > 1 ? gu_segments(G, (size_t)w->m->values[v].producer) : 0;
}

/* One instance of each unit per microbatch (gu_work): the units are the
 * first nb, each later microbatch's a copy of them, positions unset. */
static void gu_instances(gu_work *G) {
    G->nb = G->nu;
    if (G->K <= 1) return;
    G->u = xreallocarray(G->u, G->nb * G->K, sizeof *G->u);
    for (size_t k = 1; k < G->K; k++)
        for (size_t b = 0; b < G->nb; b++) {
            gu_unit *U = &G->u[k * G->nb + b];
            *U = G->u[b];
            U->name = xstrdup(G->u[b].name);
        }
    G->nu = G->nb * G->K;
}

int shard_emit_gathered(sh_work *w, uint8_t **bytes, size_t *len, shard_outcome *o) {
    gu_work G = {.w = w};
    const graph *g = w->g;
    fe_edit *e = NULL;
    size_t *shift = xcalloc(g->n_ops ? g->n_ops : 1, sizeof *shift);
    size_t n_removed = 0;
    int rc = gu_forward_end(&G);
    if (rc == 0) rc = gu_units(&G);
    if (rc == 0) gu_instances(&G);
    if (rc == 0) {
        G.each = G.K > 1 && !w->r->so.no_sync;
        G.mb_grad = xmallocarray(w->n * G.K, sizeof *G.mb_grad);
        for (size_t k = 0; k < w->n * G.K; k++) G.mb_grad[k] = -1;
        G.acc_op = xcalloc(g->n_ops ? g->n_ops : 1, sizeof *G.acc_op);
        G.param_of_storage = xmallocarray(g->n_storages ? g->n_storages : 1, sizeof(int));
        for (size_t s = 0; s < g->n_storages; s++) G.param_of_storage[s] = -1;
        for (size_t i = 0; i < w->n; i++) G.param_of_storage[g->storage_of[w->p[i].value]] = (int)i;
        G.clone = xcalloc(w->m->n_values ? w->m->n_values : 1, sizeof *G.clone);
        rc = gu_reads_plan(&G);
    }
    for (size_t u = 0; rc == 0 && u < G.nu; u++) {
        gu_unit *U = &G.u[u];
        if (U->root && U->fwd_at == SIZE_MAX) U->fwd_at = U->bwd_from;
        if (U->fwd_at != SIZE_MAX)
            gu_add_insert(&G,
                          (gu_insert){.position = U->fwd_at, .kind = GU_GATHER, .index = (int)u});
        /* each microbatch's gradients reduced after its backward pass, or
         * (no_sync) the accumulated ones once after the last microbatch */
        if (G.each || u / G.nb == G.K - 1)
            gu_add_insert(&G, (gu_insert){.position = G.each ? U->red_at : U->grad_at,
                                          .kind = GU_REDUCE,
                                          .index = (int)u});
    }
    if (rc == 0) rc = gu_backward_plan(&G);
    for (size_t i = 0; rc == 0 && i < w->n; i++) {
        if (G.own_hi[i] <= G.own_lo[i]) continue;
        size_t first = SIZE_MAX;
        for (size_t op = w->last_grad + 1; op < g->n_ops && first == SIZE_MAX; op++)
            if (w->op_tag[op] == (int)i) first = op;
        if (first != SIZE_MAX)
            gu_add_insert(&G, (gu_insert){.position = first, .kind = GU_MINE, .index = (int)i});
    }
    if (rc == 0)
        rc = fe_edit_open_bytes(w->r->step_name, w->r->step_bytes, w->r->step_len, &e, w->err,
                                w->errlen);
    if (rc == 0) rc = gu_apply(&G, e, shift);
    if (rc == 0) rc = gu_updates(&G, e, shift, &n_removed);
    if (rc == 0 && G.each) rc = gu_drop_accumulation(&G, e, shift);
    if (rc == 0) rc = gu_declare(&G, e);
    if (rc == 0) fe_edit_bytes(e, bytes, len);
    if (rc == 0 && o) {
        uint64_t world = (uint64_t)w->r->so.world;
        o->n_params = w->n, o->n_units = o->n_buckets = G.nb, o->n_removed = n_removed;
        size_t ulen = 1;
        for (size_t u = 0; u < G.nb; u++) ulen += strlen(G.u[u].name) + 8;
        o->units = xmalloc(ulen);
        char *p = o->units;
        *p = 0;
        for (size_t u = 0; u < G.nb; u++) {
            uint64_t eb = fe_elem_bits(G.u[u].elem) / 8;
            uint64_t full = G.u[u].shard * world * eb;
            o->owned_bytes += G.u[u].shard * eb;
            if (full > o->largest_unit_bytes) o->largest_unit_bytes = full;
            p += sprintf(p, "%s%s", u ? "," : "", G.u[u].name[0] ? G.u[u].name : "(root)");
        }
        o->bucket_bytes = o->largest_unit_bytes;
        for (size_t i = 0; i < w->n; i++) {
            o->param_bytes += w->p[i].bytes;
            o->n_owned += G.own_hi[i] > G.own_lo[i];
        }
    }
    fe_edit_free(e);
    free(shift);
    gu_free(&G);
    return rc;
}
