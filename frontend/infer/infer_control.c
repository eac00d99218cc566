/* Shape inference rules, family control (see infer.h): If, Loop and Scan,
 * whose bodies run through fi_run_subgraph; the operators whose output size
 * depends on the data (NonZero, NonMaxSuppression, TopK with a computed K,
 * Unique), planned at an upper bound; the random generators; the trivial
 * Optional operators.
 *
 * A data-dependent size becomes a data symbol (fi_data_dim) bound by what
 * the input shapes allow.  When that bound is itself unknown because an
 * input dim hides a symbol, the dim stays unknown and depends on that
 * symbol instead, so that the loader's message names the flag that really
 * unblocks it (--dim batch=N) rather than a data symbol.
 */
#include "infer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FI_CTL_BOOL ONNX__TENSOR_PROTO__DATA_TYPE__BOOL
#define FI_CTL_INT32 ONNX__TENSOR_PROTO__DATA_TYPE__INT32
#define FI_CTL_INT64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64
#define FI_CTL_FLOAT ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT

/* ------------------------------------------------------------- helpers */

static void fi_ctl_mark(fi_node *n, size_t k, bool bound) {
    if (k < n->n_out && n->out[k]) n->out[k]->bound = bound;
}

/* A size known only up to `upper`: exactly 0 when upper is 0 (nothing to
 * choose from), a data symbol bound by upper when upper is known, else an
 * unknown that depends on what hides upper. */
static fi_dim fi_ctl_bounded(fi_node *n, const char *what, fi_dim upper) {
    if (upper.v == 0) return fi_known(0);
    if (upper.v > 0) return fi_data_dim(n, what, upper.v);
    return fi_unknown_derived(upper.sym);
}

/* The element count of t as a dim (1 for a scalar): any 0 dim makes it 0,
 * else an unknown dim makes it unknown (depending on that dim's symbol). */
static fi_dim fi_ctl_numel_dim(fi_node *n, const fi_tensor *t) {
    fi_dim p = fi_known(1);
    for (int d = 0; d < t->rank; d++) p = fi_dim_mul(n, p, t->dims[d]);
    return p;
}

/* Output k := src: type, shape, value when known and the bound flag.
 * fi_set_shape copies the dims, so that merging the file's declaration
 * into the output later cannot write into src (a branch may output a
 * value of the enclosing graph itself). */
static int fi_ctl_copy_out(fi_node *n, size_t k, const fi_tensor *src) {
    if (k >= n->n_out || !n->out[k] || !src) return fi_failed(n) ? -1 : 0;
    bool as_int = src->ci && (fi_is_int_type(src->elem) || !src->cf);
    int rc;
    if (src->rank >= 0 && src->n_const >= 0 && as_int)
        rc = fi_set_value_ints(n, k, src->elem, src->rank, src->dims, src->ci);
    else if (src->rank >= 0 && src->n_const >= 0 && src->cf)
        rc = fi_set_value_floats(n, k, src->elem, src->rank, src->dims, src->cf);
    else
        rc = fi_set_shape(n, k, src->elem, src->rank, src->dims);
    if (rc) return -1;
    n->out[k]->seq = src->seq; /* a branch's (or an optional's) sequence stays one */
    n->out[k]->seq_len = src->seq_len;
    n->out[k]->bound = src->bound;
    n->out[k]->blame = src->blame;
    return 0;
}

/* Output k := s with the dims ins[0..n_ins) inserted before position pos
 * (Loop's and Scan's stacked outputs, Scan-8's batch dim).  pos may be
 * negative, counted from the end of the result. */
static int fi_ctl_insert(fi_node *n, size_t k, const fi_tensor *s, int64_t pos, const fi_dim *ins,
                         int n_ins) {
    if (s->rank < 0) return fi_set_type(n, k, s->elem);
    int r = s->rank + n_ins, at;
    if (r > FI_MAX_RANK)
        return fi_fail(n, "output %zu would have rank %d; roamc handles at most %d", k, r,
                       FI_MAX_RANK);
    if (fi_axis(n, pos, r - n_ins + 1, &at)) return -1;
    fi_dim dims[FI_MAX_RANK];
    for (int d = 0; d < at; d++) dims[d] = s->dims[d];
    for (int d = 0; d < n_ins; d++) dims[at + d] = ins[d];
    for (int d = at; d < s->rank; d++) dims[d + n_ins] = s->dims[d];
    return fi_set_shape(n, k, s->elem, r, dims);
}

/* The single element of a scalar-like input (cond, M, K): 1 with *v when
 * known, 0 when unknown, -1 after failing the node when it has another
 * number of elements. */
static int fi_ctl_scalar_in(fi_node *n, size_t k, const char *what, int64_t *v) {
    const fi_tensor *t = fi_in(n, k);
    int64_t count = fi_numel(t);
    if (count >= 0 && count != 1)
        return fi_fail(n, "%s has %lld elements, not 1", what, (long long)count);
    return fi_in_scalar(n, k, v) ? 1 : 0;
}

static int fi_ctl_want_type(fi_node *n, size_t k, const char *what, int32_t elem) {
    const fi_tensor *t = fi_in(n, k);
    if (t && t->elem && t->elem != elem) {
        char a[32], b[32];
        return fi_fail(n, "%s has element type %s, not %s", what,
                       fe_elem_name(t->elem, a, sizeof a), fe_elem_name(elem, b, sizeof b));
    }
    return 0;
}

/* ----------------------------------------------------------------- If */

/* Whether output k of an If whose cond is unknown is sized at a bound:
 * a branch is, or the branches disagree on a known dim. */
static bool fi_ctl_if_bound(const fi_tensor *a, const fi_tensor *b) {
    if (a->bound || b->bound) return true;
    for (int d = 0; a->rank >= 0 && a->rank == b->rank && d < a->rank; d++)
        if (a->dims[d].v >= 0 && b->dims[d].v >= 0 && a->dims[d].v != b->dims[d].v) return true;
    return false;
}

/* Output k of an If whose cond is unknown: a value either branch may give.
 * Equal dims stay; known dims that differ become a data dim bounded by the
 * larger (an upper bound: the buffer must hold either); a dim one branch
 * does not know depends on that branch's symbol; ranks that differ leave
 * the shape unknown. */
/* One dim of two branches merged: equal dims stay, known ones that differ
 * are the data dim `what` bounded by the larger, an unknown one stays
 * unknown (depending on its symbol). */
static fi_dim fi_ctl_merge_dim(fi_node *n, fi_dim x, fi_dim y, const char *what) {
    if (x.v >= 0 && y.v >= 0) return x.v == y.v ? x : fi_data_dim(n, what, x.v > y.v ? x.v : y.v);
    if (x.v < 0 && y.v < 0 && x.exact && y.exact && x.sym == y.sym) return x;
    return fi_unknown_derived(x.v < 0 ? x.sym : y.sym);
}

static int fi_ctl_if_merge(fi_node *n, size_t k, const fi_tensor *a, const fi_tensor *b) {
    if (k >= n->n_out || !n->out[k]) return 0;
    if (a->elem && b->elem && a->elem != b->elem)
        return fi_fail(n, "output %zu has element type %d in then_branch and %d in else_branch", k,
                       (int)a->elem, (int)b->elem);
    int32_t elem = a->elem ? a->elem : b->elem;
    if (a->seq != b->seq)
        return fi_fail(n, "output %zu is a sequence in one branch and a tensor in the other", k);
    char what[64];
    fi_dim len = fi_unknown(-1);
    if (a->seq) {
        snprintf(what, sizeof what, "out%zu.length", k);
        len = fi_ctl_merge_dim(n, a->seq_len, b->seq_len, what);
    }
    if (a->rank < 0 || a->rank != b->rank)
        return a->seq ? fi_set_sequence(n, k, elem, -1, NULL, len) : fi_set_type(n, k, elem);
    fi_dim dims[FI_MAX_RANK];
    for (int d = 0; d < a->rank; d++) {
        snprintf(what, sizeof what, "out%zu.dim%d", k, d);
        dims[d] = fi_ctl_merge_dim(n, a->dims[d], b->dims[d], what);
    }
    return a->seq ? fi_set_sequence(n, k, elem, a->rank, dims, len)
                  : fi_set_shape(n, k, elem, a->rank, dims);
}

/* If (1, 11, 13, 16, 19): a known cond runs only the taken branch and
 * passes its outputs on, values included (shape computations often branch
 * on a shape).  The branch not taken is not inferred at all: it never runs,
 * and a failure in it (it may be shape-invalid for the inputs at hand,
 * which is often why the model guards it) must not refuse the model.  An
 * unknown cond runs both and merges them (fi_ctl_if_merge). */
static int fi_ctl_if(fi_node *n) {
    const Onnx__AttributeProto *ta = fi_attr(n, "then_branch"), *ea = fi_attr(n, "else_branch");
    if (!ta || !ta->g || !ea || !ea->g)
        return fi_fail(n, "needs the graph attributes then_branch and else_branch");
    if (!fi_in(n, 0)) return fi_fail(n, "needs the input cond");
    if (fi_ctl_want_type(n, 0, "cond", FI_CTL_BOOL)) return -1;
    const Onnx__GraphProto *g[2] = {ta->g, ea->g};
    static const char *const names[2] = {"then_branch", "else_branch"};
    for (int b = 0; b < 2; b++)
        if (g[b]->n_output != n->n_out)
            return fi_fail(n, "%s has %zu outputs; the node has %zu", names[b], g[b]->n_output,
                           n->n_out);
    int64_t c = 0;
    int known = fi_ctl_scalar_in(n, 0, "cond", &c);
    if (known < 0) return -1;
    int first = known && !c ? 1 : 0, last = known ? first : 1;
    fi_tensor **out[2] = {NULL, NULL};
    int rc = 0;
    bool valid[2] = {false, false};
    fi_try before, failed_with;
    fi_try_save(n, &before);
    for (int b = first; b <= last; b++) {
        out[b] = xcalloc(n->n_out + 1, sizeof *out[b]);
        valid[b] = fi_run_subgraph(n, g[b], NULL, 0, out[b]) == 0;
        /* cond unknown: a branch the shapes at hand make invalid is not the
         * one that runs (ONNX Runtime would fail in it), so the other one is
         * taken; only both failing fails the node */
        if (!valid[b] && !known && !before.failed) {
            fi_try_save(n, &failed_with);
            fi_try_restore(n, &before);
        }
    }
    int taken = known ? first : valid[0] && valid[1] ? -1 : valid[0] ? 0 : valid[1] ? 1 : -2;
    if (taken == -2) {
        fi_try_restore(n, &failed_with);
        rc = -1;
    } else if (known && !valid[first]) {
        rc = -1;
    }
    for (size_t k = 0; rc == 0 && k < n->n_out; k++)
        rc = taken >= 0 ? fi_ctl_copy_out(n, k, out[taken][k])
                        : fi_ctl_if_merge(n, k, out[0][k], out[1][k]);
    /* fi_data_dim marked every output; only those merged at a bound are */
    for (size_t k = 0; rc == 0 && taken < 0 && k < n->n_out; k++)
        fi_ctl_mark(n, k, fi_ctl_if_bound(out[0][k], out[1][k]));
    if (rc == 0) {
        size_t u[2] = {0, 0};
        uint64_t p[2] = {0, 0};
        for (int b = 0; b < 2; b++)
            if (valid[b]) p[b] = fi_body_peak_of(n->cx, g[b], &u[b]);
        int br = taken >= 0 ? taken : p[1] > p[0] ? 1 : 0;
        fi_body_use use = {p[br],
                           known        ? FI_BODY_IF_TAKEN
                           : taken >= 0 ? FI_BODY_IF_ONLY_VALID
                                        : FI_BODY_IF_LARGER,
                           br, u[br]};
        fi_note_body(n, &use);
    }
    free(out[0]);
    free(out[1]);
    return rc;
}

/* ------------------------------------------------------- loop bodies */

/* A Loop's or Scan's working memory: one iteration of its body (the body's
 * nested arena, the largest over the runs inference made, which see the
 * carried values at their largest known shapes).  Iterations run one after
 * another and reuse it; what grows with the trip count (the stacked scan
 * outputs, carried values that grow) is in the node's outputs and in the
 * carried shapes inference bounds. */
static void fi_ctl_note_iteration(fi_node *n, const Onnx__GraphProto *g, int how) {
    fi_body_use use = {0, how, -1, 0};
    use.bytes = fi_body_peak_of(n->cx, g, &use.unsized);
    fi_note_body(n, &use);
}

/* A body input: src's type and shape without dims [from, from + count)
 * (the scanned axis, Scan-8's batch); the value is forgotten, since it
 * changes from iteration to iteration. */
static fi_tensor *fi_ctl_slice(fi_node *n, const fi_tensor *src, int from, int count) {
    fi_tensor *t = fi_new_tensor(n);
    if (!t) return NULL;
    t->elem = src->elem;
    t->bound = src->bound;
    t->blame = fi_blame(src);
    if (src->rank < 0) return t;
    if (count == 0) {
        t->rank = src->rank;
        t->dims = src->dims; /* shared: nothing writes a tensor's dims in place */
        return t;
    }
    if (from + count > src->rank) {
        fi_fail(n, "an input of rank %d has no dim %d to scan", src->rank, from + count - 1);
        return NULL;
    }
    t->dims = fi_new_dims(n, src->rank - count);
    if (!t->dims) return NULL;
    t->rank = src->rank - count;
    for (int d = 0, o = 0; d < src->rank; d++)
        if (d < from || d >= from + count) t->dims[o++] = src->dims[d];
    return t;
}

/* A scalar body input (Loop's iteration number and condition), with the
 * value *v when v is given. */
static fi_tensor *fi_ctl_scalar(fi_node *n, int32_t elem, int64_t *v) {
    fi_tensor *t = fi_new_tensor(n);
    if (!t || !(t->dims = fi_new_dims(n, 0))) return NULL;
    t->elem = elem;
    t->rank = 0;
    if (v) {
        t->ci = v;
        t->n_const = 1;
    }
    return t;
}

/* A Loop or Scan body being run: carried value i goes in as in[in0 + i]
 * and comes out as out[out0 + i]; the outputs after the carried ones are
 * the per-iteration scan outputs. */
typedef struct fi_ctl_body {
    const Onnx__GraphProto *g;
    fi_tensor **in, **out; /* g->n_input, g->n_output entries */
    size_t in0, out0, n_carried;
    const char *kind;  /* "carried" or "state": names the data symbols */
    fi_tensor **first; /* the carried values after the first iteration */
} fi_ctl_body;

/* Carried value i after any number of iterations, from what went in (a)
 * and what one iteration made of it (c).  Equal dims are settled; known
 * dims that differ move from iteration to iteration, and two samples
 * cannot bound where they end (a Concat in the body grows the value every
 * time), so they become a data dim with no bound: planning then asks for
 * --dim.  A dim either side does not know depends on its symbol.  *moved
 * is set when the next iteration may see another shape. */
static fi_tensor *fi_ctl_settle(fi_node *n, fi_ctl_body *b, size_t i, bool *moved) {
    const fi_tensor *a = b->in[b->in0 + i], *c = b->out[b->out0 + i];
    if (a->elem && c->elem && a->elem != c->elem) {
        fi_fail(n, "%s value %zu goes into the body as element type %d and comes out as %d",
                b->kind, i, (int)a->elem, (int)c->elem);
        return NULL;
    }
    fi_tensor *t = fi_new_tensor(n);
    if (!t) return NULL;
    t->elem = a->elem ? a->elem : c->elem;
    t->bound = a->bound || c->bound;
    t->blame = fi_blame(a) >= 0 ? fi_blame(a) : fi_blame(c);
    if (a->rank < 0) return t;
    if (c->rank != a->rank) {
        *moved = true;
        return t;
    }
    if (!(t->dims = fi_new_dims(n, a->rank))) return NULL;
    t->rank = a->rank;
    for (int d = 0; d < a->rank; d++) {
        fi_dim x = a->dims[d], y = c->dims[d];
        char what[64];
        snprintf(what, sizeof what, "%s%zu.dim%d", b->kind, i, d);
        if (x.v >= 0 && y.v >= 0 && x.v != y.v) {
            *moved = true;
            t->bound = true;
            t->dims[d] = fi_data_dim(n, what, -1);
        } else if (x.v >= 0 || (y.v < 0 && x.exact && y.exact && x.sym == y.sym)) {
            t->dims[d] = x.v >= 0 && y.v < 0 ? fi_unknown_derived(y.sym) : x;
        } else {
            t->dims[d] = fi_unknown_derived(x.sym);
        }
    }
    return t;
}

/* Runs the body (in[] filled by the caller) and settles the carried
 * values into fin[0..n_carried).  When one moved, the body runs once more
 * with the settled shapes, so that the scan outputs (out[] of that last
 * run) see the generalized carried values too.  Two runs at most: nested
 * loops cost 2^depth runs at worst, and the protobuf nesting limit of the
 * loader keeps depth near 30; the arena cap ends anything worse. */
static int fi_ctl_iterate(fi_node *n, fi_ctl_body *b, fi_tensor **fin) {
    for (int run = 0; run < 2; run++) {
        if (fi_run_subgraph(n, b->g, b->in, b->g->n_input, b->out)) return -1;
        if (run == 0)
            for (size_t i = 0; i < b->n_carried; i++) b->first[i] = b->out[b->out0 + i];
        bool moved = false;
        for (size_t i = 0; i < b->n_carried; i++)
            if (!(fin[i] = fi_ctl_settle(n, b, i, &moved))) return -1;
        if (!moved) break;
        for (size_t i = 0; i < b->n_carried; i++) b->in[b->in0 + i] = fin[i];
    }
    return 0;
}

static void fi_ctl_body_alloc(fi_ctl_body *b, fi_tensor ***fin) {
    b->in = xcalloc(b->g->n_input + 1, sizeof *b->in);
    b->out = xcalloc(b->g->n_output + 1, sizeof *b->out);
    *fin = xcalloc(b->n_carried + 1, sizeof **fin);
    b->first = xcalloc(b->n_carried + 1, sizeof *b->first);
}

static void fi_ctl_body_free(fi_ctl_body *b, fi_tensor **fin) {
    free(b->in);
    free(b->out);
    free(b->first);
    free(fin);
}

/* A carried dim that moved (a data dim with no bound, fi_ctl_settle) but
 * grew by the same g in the first two iterations (a -> a + g, then the
 * body run on a + g gives a + 2g: a list appended to, a Concat of one row
 * per iteration) is planned at a + trips x g when the trip count is at
 * most `trips`; the body then runs once more on those shapes, so the scan
 * outputs see them.  Growth that is not constant stays unbounded, and
 * so does growth in a Loop inside a subgraph (see fi_ctl_loop). */
static int fi_ctl_grow_bound(fi_node *n, fi_ctl_body *b, fi_tensor **fin, fi_tensor *const *init,
                             int64_t trips) {
    if (trips < 0) return 0;
    fi_tensor **probe = xcalloc(b->g->n_output + 1, sizeof *probe);
    for (size_t i = 0; i < b->n_carried; i++) b->in[b->in0 + i] = b->first[i];
    int rc = fi_run_subgraph(n, b->g, b->in, b->g->n_input, probe);
    bool bounded = false;
    for (size_t i = 0; rc == 0 && i < b->n_carried; i++) {
        const fi_tensor *a = init[i], *c = b->first[i], *e = probe[b->out0 + i];
        if (!fin[i] || fin[i]->rank < 0 || a->rank != fin[i]->rank || c->rank != a->rank ||
            e->rank != a->rank)
            continue;
        for (int d = 0; d < a->rank; d++) {
            int64_t x = a->dims[d].v, y = c->dims[d].v, z = e->dims[d].v, g = y - x, grown;
            if (fin[i]->dims[d].v >= 0 || x < 0 || y <= x || z != y + g) continue;
            if (__builtin_mul_overflow(g, trips, &grown) ||
                __builtin_add_overflow(grown, x, &grown) || grown > FI_MAX_DIM)
                continue;
            char what[64];
            snprintf(what, sizeof what, "%s%zu.dim%d", b->kind, i, d);
            fin[i]->dims[d] = fi_data_dim(n, what, grown);
            bounded = true;
        }
    }
    free(probe);
    for (size_t i = 0; i < b->n_carried; i++) b->in[b->in0 + i] = fin[i];
    if (rc || !bounded) return rc;
    return fi_run_subgraph(n, b->g, b->in, b->g->n_input, b->out);
}

/* --------------------------------------------------------------- Loop */

/* What is known of a Loop's trip count: exactly `exact` (>= 0), else at
 * most `upper` (-1: no bound), or it depends on the symbol `blame` that
 * hides M's value. */
typedef struct fi_ctl_trips {
    int64_t exact, upper;
    int32_t blame;
} fi_ctl_trips;

/* cond_out: the body's condition output computed with cond_in = true (an
 * iteration runs only when its cond input is true, so that is every
 * iteration when the Loop has a cond). */
static fi_ctl_trips fi_ctl_loop_trips(fi_node *n, bool m_known, int64_t m, int cond,
                                      const fi_tensor *cond_out) {
    fi_ctl_trips t = {-1, -1, -1};
    const fi_tensor *mt = fi_in(n, 0);
    if (!m_known && mt) t.blame = fi_blame(mt);
    int64_t limit = m_known ? m : -1; /* -1: no M, or M unknown */
    if (cond == 0 || limit == 0) {    /* the body never runs */
        t.exact = 0;
        return t;
    }
    if (cond < 0) { /* no cond: a for loop (or an endless one) */
        t.exact = limit;
        return t;
    }
    int64_t out_known = cond_out && cond_out->n_const == 1 && cond_out->ci ? cond_out->ci[0] : -1;
    if (out_known == 0)
        limit = limit < 0 || limit > 1 ? 1 : limit; /* stops after the first iteration */
    t.upper = limit;
    if (cond == 1 && out_known >= 0) t.exact = limit; /* nothing in the data can stop it earlier */
    return t;
}

static fi_dim fi_ctl_trips_dim(fi_node *n, const fi_ctl_trips *t) {
    if (t->exact >= 0) return fi_known(t->exact);
    if (t->blame >= 0) return fi_unknown_derived(t->blame); /* known once M is */
    /* M = INT64_MAX with a cond is how exporters spell "while": no bound */
    return fi_data_dim(n, "trips", t->upper <= FI_MAX_DIM ? t->upper : -1);
}

/* Loop (1, 11, 13, 16, 19): inputs M, cond (both optional), the initial
 * carried values; body inputs (iteration number, cond, carried values),
 * body outputs (cond, carried values, scan outputs); node outputs: the
 * final carried values and the scan outputs stacked over the iterations.
 * The trip count is never iterated: M = 2^62 only multiplies shapes. */
static int fi_ctl_loop(fi_node *n) {
    const Onnx__AttributeProto *ba = fi_attr(n, "body");
    if (!ba || !ba->g) return fi_fail(n, "needs the graph attribute body");
    const Onnx__GraphProto *g = ba->g;
    size_t nc = n->n_in > 2 ? n->n_in - 2 : 0;
    if (g->n_input != nc + 2)
        return fi_fail(n,
                       "body has %zu inputs; with %zu carried values it needs %zu (iteration "
                       "number, cond, carried)",
                       g->n_input, nc, nc + 2);
    if (g->n_output < nc + 1)
        return fi_fail(n, "body has %zu outputs; it needs cond and %zu carried values", g->n_output,
                       nc);
    size_t ns = g->n_output - 1 - nc;
    if (n->n_out != nc + ns)
        return fi_fail(n, "has %zu outputs; its body gives %zu carried values and %zu scan outputs",
                       n->n_out, nc, ns);
    for (size_t i = 0; i < nc; i++)
        if (!fi_in(n, 2 + i)) return fi_fail(n, "carried value %zu has no initial value", i);
    if (fi_ctl_want_type(n, 0, "M", FI_CTL_INT64) || fi_ctl_want_type(n, 1, "cond", FI_CTL_BOOL))
        return -1;
    int64_t m = 0, c = 0;
    int m_known = fi_in(n, 0) ? fi_ctl_scalar_in(n, 0, "M", &m) : 0;
    int c_known = fi_in(n, 1) ? fi_ctl_scalar_in(n, 1, "cond", &c) : 0;
    if (m_known < 0 || c_known < 0) return -1;
    if (m < 0) m = 0;
    int cond = !fi_in(n, 1) ? -1 : c_known ? (c != 0) : 2;

    fi_ctl_body b = {.g = g, .in0 = 2, .out0 = 1, .n_carried = nc, .kind = "carried"};
    fi_tensor **fin = NULL;
    int64_t cond_true = 1;
    fi_ctl_body_alloc(&b, &fin);
    int rc = 0;
    if (rc == 0) {
        b.in[0] = fi_ctl_scalar(n, FI_CTL_INT64, NULL);
        b.in[1] = fi_ctl_scalar(n, FI_CTL_BOOL, cond >= 0 ? &cond_true : NULL);
        for (size_t i = 0; i < nc; i++) b.in[2 + i] = fi_ctl_slice(n, fi_in(n, 2 + i), 0, 0);
        rc = fi_failed(n) ? -1 : fi_ctl_iterate(n, &b, fin);
    }
    fi_ctl_trips t =
        rc == 0 ? fi_ctl_loop_trips(n, m_known, m, cond, b.out[0]) : (fi_ctl_trips){0, 0, -1};
    if (rc == 0 && ns && t.exact > FI_MAX_DIM)
        rc = fi_fail(n, "runs %lld times; its scan outputs would exceed 2^62 elements",
                     (long long)t.exact);
    /* main-graph Loops only: two more body runs per nesting level would
     * make nested loops cost 4^depth runs */
    if (rc == 0 && t.exact != 0 && n->index >= 0) {
        fi_tensor **init = xcalloc(nc + 1, sizeof *init);
        for (size_t i = 0; i < nc; i++) init[i] = fi_in(n, 2 + i);
        rc = fi_ctl_grow_bound(n, &b, fin, init, t.exact >= 0 ? t.exact : t.upper);
        free(init);
    }
    fi_dim trips = rc == 0 && ns ? fi_ctl_trips_dim(n, &t) : fi_known(0);
    /* no iteration: the carried values come out as they went in */
    for (size_t i = 0; rc == 0 && i < nc; i++)
        rc = fi_ctl_copy_out(n, i, t.exact == 0 ? fi_in(n, 2 + i) : fin[i]);
    for (size_t j = 0; rc == 0 && j < ns; j++) {
        const fi_tensor *s = b.out[1 + nc + j];
        rc = fi_ctl_insert(n, nc + j, s, 0, &trips, 1);
        fi_ctl_mark(n, nc + j, s->bound || (t.exact < 0));
    }
    fi_ctl_body_free(&b, fin);
    if (rc == 0) fi_ctl_note_iteration(n, g, FI_BODY_LOOP);
    return rc;
}

/* --------------------------------------------------------------- Scan */

/* Reads an optional INTS attribute of `want` entries (scan axes,
 * directions): *v stays NULL when absent. */
static int fi_ctl_scan_ints(fi_node *n, const char *name, size_t want, const int64_t **v) {
    size_t len = 0;
    *v = NULL;
    if (!fi_attr_ints(n, name, v, &len)) return 0;
    if (len != want) return fi_fail(n, "%s has %zu entries; the node has %zu", name, len, want);
    return 0;
}

/* The body input of scan input x: x without its scanned axis (and, at
 * opset 8, its batch dim); merges the sequence length into *len and the
 * batch into *batch. */
static fi_tensor *fi_ctl_scan_slice(fi_node *n, const fi_tensor *x, int64_t axis, bool v8,
                                    fi_dim *len, fi_dim *batch) {
    if (x->rank < 0) return fi_ctl_slice(n, x, 0, 0);
    if (v8) {
        if (x->rank < 2) {
            fi_fail(n, "a scan input has rank %d; opset 8 wants [batch, sequence, ...]", x->rank);
            return NULL;
        }
        *batch = fi_dim_merge(n, *batch, x->dims[0], "batch dims");
        *len = fi_dim_merge(n, *len, x->dims[1], "scan input lengths");
        return fi_ctl_slice(n, x, 0, 2);
    }
    int a;
    if (fi_axis(n, axis, x->rank, &a)) return NULL;
    *len = fi_dim_merge(n, *len, x->dims[a], "scan input lengths");
    return fi_ctl_slice(n, x, a, 1);
}

/* Scan (8, 9, 11, 16, 19).  Opset 8: inputs sequence_lens (optional), N
 * states [batch, ...], M scan inputs [batch, sequence, ...]; outputs N
 * states [batch, ...] and K scan outputs [batch, sequence, ...].  Opset
 * 9+: no batch; scan inputs are scanned along scan_input_axes, scan
 * outputs stacked along scan_output_axes (negative from 11, counted
 * against the output's rank).  Directions do not change shapes. */
static int fi_ctl_scan(fi_node *n) {
    const Onnx__AttributeProto *ba = fi_attr(n, "body");
    if (!ba || !ba->g) return fi_fail(n, "needs the graph attribute body");
    const Onnx__GraphProto *g = ba->g;
    bool v8 = n->opset < 9;
    size_t lead = v8 ? 1 : 0;
    int64_t m = fi_attr_int(n, "num_scan_inputs", -1);
    if (m < 1 || n->n_in < lead || (uint64_t)m > n->n_in - lead)
        return fi_fail(n, "num_scan_inputs is %lld; the node has %zu inputs", (long long)m,
                       n->n_in);
    size_t ms = (size_t)m, nst = n->n_in - lead - ms;
    if (g->n_input != nst + ms)
        return fi_fail(n, "body has %zu inputs; %zu states and %zu scan inputs need %zu",
                       g->n_input, nst, ms, nst + ms);
    if (g->n_output < nst)
        return fi_fail(n, "body has %zu outputs; it needs %zu states", g->n_output, nst);
    size_t ks = g->n_output - nst;
    if (n->n_out != nst + ks)
        return fi_fail(n, "has %zu outputs; its body gives %zu states and %zu scan outputs",
                       n->n_out, nst, ks);
    const int64_t *in_axes, *out_axes, *dirs;
    if (fi_ctl_scan_ints(n, v8 ? "directions" : "scan_input_directions", ms, &dirs) ||
        fi_ctl_scan_ints(n, "scan_output_directions", ks, &dirs) ||
        fi_ctl_scan_ints(n, "scan_input_axes", ms, &in_axes) ||
        fi_ctl_scan_ints(n, "scan_output_axes", ks, &out_axes))
        return -1;
    for (size_t i = 0; i < nst + ms; i++)
        if (!fi_in(n, lead + i)) return fi_fail(n, "input %zu is omitted", lead + i);

    fi_ctl_body b = {.g = g, .in0 = 0, .out0 = 0, .n_carried = nst, .kind = "state"};
    fi_tensor **fin = NULL;
    fi_dim len = fi_unknown(-1), batch = fi_unknown(-1);
    fi_ctl_body_alloc(&b, &fin);
    int rc = 0;
    for (size_t j = 0; rc == 0 && j < ms; j++) {
        b.in[nst + j] = fi_ctl_scan_slice(n, fi_in(n, lead + nst + j), in_axes ? in_axes[j] : 0, v8,
                                          &len, &batch);
        if (!b.in[nst + j]) rc = -1;
    }
    for (size_t i = 0; rc == 0 && i < nst; i++) {
        const fi_tensor *s = fi_in(n, lead + i);
        if (v8 && s->rank == 0)
            rc = fi_fail(n, "state %zu is a scalar; opset 8 wants [batch, ...]", i);
        else if (v8 && s->rank > 0)
            batch = fi_dim_merge(n, batch, s->dims[0], "batch dims");
        if (rc == 0 && !(b.in[i] = fi_ctl_slice(n, s, 0, v8 && s->rank > 0 ? 1 : 0))) rc = -1;
    }
    if (rc == 0 && !fi_failed(n))
        rc = fi_ctl_iterate(n, &b, fin);
    else
        rc = -1;
    fi_dim both[2] = {batch, len};
    for (size_t i = 0; rc == 0 && i < nst; i++) {
        if (len.v == 0)
            rc = fi_ctl_copy_out(n, i, fi_in(n, lead + i)); /* no iteration */
        else if (v8)
            rc = fi_ctl_insert(n, i, fin[i], 0, &batch, 1);
        else
            rc = fi_ctl_copy_out(n, i, fin[i]);
        fi_ctl_mark(n, i, len.v == 0 ? fi_in(n, lead + i)->bound : fin[i]->bound);
    }
    for (size_t j = 0; rc == 0 && j < ks; j++) {
        const fi_tensor *s = b.out[nst + j];
        rc = v8 ? fi_ctl_insert(n, nst + j, s, 0, both, 2)
                : fi_ctl_insert(n, nst + j, s, out_axes ? out_axes[j] : 0, &len, 1);
        fi_ctl_mark(n, nst + j, s->bound);
    }
    fi_ctl_body_free(&b, fin);
    if (rc == 0) fi_ctl_note_iteration(n, g, FI_BODY_SCAN);
    return rc;
}

/* ------------------------------------------------- data-dependent sizes */

/* NonZero (9, 13): [rank, N] INT64 indices, N <= the element count.  A
 * known input gives the exact indices (a scalar counts as rank 1, as
 * numpy and onnxruntime treat it). */
static int fi_ctl_nonzero(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x) return fi_fail(n, "needs the input X");
    if (x->rank < 0) return fi_set_type(n, 0, FI_CTL_INT64);
    int r = x->rank ? x->rank : 1;
    const double *v;
    size_t len;
    fi_dim dims[2] = {fi_known(r), fi_known(0)};
    if (fi_in_floats(n, 0, &v, &len) && (int64_t)len == fi_numel(x)) {
        int64_t count = 0;
        for (size_t i = 0; i < len; i++) count += v[i] != 0;
        dims[1] = fi_known(count);
        if (count * r > FI_MAX_CONST_ELEMS) return fi_set_shape(n, 0, FI_CTL_INT64, 2, dims);
        int64_t *idx = xmallocarray((size_t)(count * r), sizeof *idx);
        for (size_t i = 0, j = 0; i < len; i++) {
            if (v[i] == 0) continue;
            int64_t rest = (int64_t)i; /* row-major: the last dim varies fastest */
            for (int d = x->rank - 1; d >= 0; d--) {
                idx[d * count + (int64_t)j] = rest % x->dims[d].v;
                rest /= x->dims[d].v;
            }
            if (x->rank == 0) idx[j] = 0;
            j++;
        }
        int rc = fi_set_value_ints(n, 0, FI_CTL_INT64, 2, dims, idx);
        free(idx);
        return rc;
    }
    dims[1] = fi_ctl_bounded(n, "count", fi_ctl_numel_dim(n, x));
    if (fi_set_shape(n, 0, FI_CTL_INT64, 2, dims)) return -1;
    fi_ctl_mark(n, 0, true);
    return 0;
}

/* NonMaxSuppression (10, 11): selected_indices [N, 3] INT64, N <= batches x
 * classes x min(max_output_boxes_per_class, boxes).  max_output_boxes_per
 * _class omitted means 0: nothing is selected. */
static int fi_ctl_nms(fi_node *n) {
    const fi_tensor *boxes = fi_in(n, 0), *scores = fi_in(n, 1);
    if (!boxes || !scores) return fi_fail(n, "needs the inputs boxes and scores");
    if ((boxes->rank >= 0 && boxes->rank != 3) || (scores->rank >= 0 && scores->rank != 3))
        return fi_fail(n, "boxes and scores must have rank 3 (they have %d and %d)", boxes->rank,
                       scores->rank);
    if (boxes->rank == 3 && boxes->dims[2].v >= 0 && boxes->dims[2].v != 4)
        return fi_fail(n, "boxes has %lld coordinates per box, not 4", (long long)boxes->dims[2].v);
    int64_t per = 0;
    int known = fi_in(n, 2) ? fi_ctl_scalar_in(n, 2, "max_output_boxes_per_class", &per) : 1;
    if (known < 0) return -1;
    fi_dim dims[2] = {fi_known(0), fi_known(3)};
    if (known && per <= 0) return fi_set_shape(n, 0, FI_CTL_INT64, 2, dims);
    if (boxes->rank < 0 || scores->rank < 0) {
        dims[0] = fi_unknown_derived(fi_blame(boxes->rank < 0 ? boxes : scores));
    } else {
        fi_dim batches =
            fi_dim_merge(n, boxes->dims[0], scores->dims[0], "batch dims of boxes and scores");
        fi_dim spatial =
            fi_dim_merge(n, boxes->dims[1], scores->dims[2], "box counts of boxes and scores");
        /* exporters write INT64_MAX for "no limit": the box count bounds it */
        if (known && per <= FI_MAX_DIM && (spatial.v < 0 || per < spatial.v))
            spatial = fi_known(per);
        fi_dim upper = fi_dim_mul(n, fi_dim_mul(n, batches, scores->dims[1]), spatial);
        dims[0] = fi_ctl_bounded(n, "count", upper);
    }
    if (fi_set_shape(n, 0, FI_CTL_INT64, 2, dims)) return -1;
    fi_ctl_mark(n, 0, true);
    return 0;
}

/* TopK (1, 10, 11): values and INT64 indices, the input's shape with the
 * axis dim replaced by K (attribute k before 10, input K from 10).  A K
 * that is not known is at most the axis dim. */
static int fi_ctl_topk(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x) return fi_fail(n, "needs the input X");
    int64_t k = -1;
    int known;
    if (n->opset < 10) {
        if (!fi_attr(n, "k"))
            return fi_fail(n, "needs the attribute k (opset %lld)", (long long)n->opset);
        k = fi_attr_int(n, "k", -1);
        known = 1;
    } else {
        if (!fi_in(n, 1)) return fi_fail(n, "needs the input K (opset %lld)", (long long)n->opset);
        known = fi_ctl_scalar_in(n, 1, "K", &k);
        if (known < 0) return -1;
    }
    if (known && k < 0) return fi_fail(n, "k is %lld", (long long)k);
    if (x->rank < 0) {
        fi_set_type(n, 0, x->elem);
        return fi_set_type(n, 1, FI_CTL_INT64);
    }
    int a;
    if (fi_axis(n, fi_attr_int(n, "axis", -1), x->rank, &a)) return -1;
    fi_dim len = x->dims[a], dims[FI_MAX_RANK];
    if (known && len.v >= 0 && k > len.v)
        return fi_fail(n, "k = %lld exceeds the axis dim %lld", (long long)k, (long long)len.v);
    memcpy(dims, x->dims, (size_t)x->rank * sizeof *dims);
    int32_t hides = known ? -1 : fi_blame(fi_in(n, 1));
    /* a K that a symbol hides becomes known once the symbol is bound */
    dims[a] = known                      ? fi_known(k)
              : hides >= 0 && len.v != 0 ? fi_unknown_derived(hides)
                                         : fi_ctl_bounded(n, "k", len);
    if (fi_set_shape(n, 0, x->elem, x->rank, dims) ||
        fi_set_shape(n, 1, FI_CTL_INT64, x->rank, dims))
        return -1;
    fi_ctl_mark(n, 0, !known);
    fi_ctl_mark(n, 1, !known);
    return 0;
}

/* Unique (11): Y, indices, inverse_indices, counts.  Without axis: Y is
 * flat, [N] with N <= the element count, and inverse_indices has one entry
 * per element; with axis: Y is the input with the axis dim N <= that dim,
 * and inverse_indices has one entry per slice. */
static int fi_ctl_unique(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x) return fi_fail(n, "needs the input X");
    if (x->rank < 0) {
        for (size_t k = 0; k < 4; k++) fi_set_type(n, k, k ? FI_CTL_INT64 : x->elem);
        return fi_failed(n) ? -1 : 0;
    }
    fi_dim all, count, ydims[FI_MAX_RANK];
    int yrank = 1;
    if (fi_attr(n, "axis")) {
        int a;
        if (fi_axis(n, fi_attr_int(n, "axis", 0), x->rank, &a)) return -1;
        all = x->dims[a];
        count = fi_ctl_bounded(n, "count", all);
        yrank = x->rank;
        memcpy(ydims, x->dims, (size_t)x->rank * sizeof *ydims);
        ydims[a] = count;
    } else {
        all = fi_ctl_numel_dim(n, x);
        count = ydims[0] = fi_ctl_bounded(n, "count", all);
    }
    if (fi_set_shape(n, 0, x->elem, yrank, ydims) || fi_set_shape(n, 1, FI_CTL_INT64, 1, &count) ||
        fi_set_shape(n, 2, FI_CTL_INT64, 1, &all) || fi_set_shape(n, 3, FI_CTL_INT64, 1, &count))
        return -1;
    for (size_t k = 0; k < 4; k++) fi_ctl_mark(n, k, k != 2 && count.v != 0);
    return 0;
}

/* ------------------------------------------------------------- random */

/* The dtype attribute of the random generators: a floating type (the
 * spec's list) unless any is allowed; dflt when absent. */
static int fi_ctl_dtype(fi_node *n, int32_t dflt, bool any, int32_t *out) {
    int64_t t = fi_attr_int(n, "dtype", dflt);
    bool ok = any ? fi_is_float_type((int32_t)t) || fi_is_int_type((int32_t)t)
                  : fi_is_float_type((int32_t)t);
    if (t != (int32_t)t || !ok)
        return fi_fail(n, "dtype %lld is not one this operator makes", (long long)t);
    *out = (int32_t)t;
    return 0;
}

/* RandomNormal, RandomUniform (1): the shape attribute, dtype (FLOAT). */
static int fi_ctl_random(fi_node *n) {
    const int64_t *shape;
    size_t rank;
    int32_t elem = 0;
    if (!fi_attr_ints(n, "shape", &shape, &rank)) return fi_fail(n, "needs the attribute shape");
    if (rank > FI_MAX_RANK)
        return fi_fail(n, "shape has %zu dims; roamc handles at most %d", rank, FI_MAX_RANK);
    if (fi_ctl_dtype(n, FI_CTL_FLOAT, false, &elem)) return -1;
    fi_dim dims[FI_MAX_RANK];
    for (size_t d = 0; d < rank; d++) {
        if (shape[d] < 0) return fi_fail(n, "shape dim %zu is %lld", d, (long long)shape[d]);
        dims[d] = fi_known(shape[d]);
    }
    return fi_set_shape(n, 0, elem, (int)rank, dims);
}

/* RandomNormalLike, RandomUniformLike (1), Bernoulli (15): the input's
 * shape; dtype defaults to the input's type (Bernoulli may make ints and
 * bools too). */
static int fi_ctl_random_like(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0);
    int32_t elem = 0;
    if (!x) return fi_fail(n, "needs an input");
    if (fi_attr(n, "dtype") && fi_ctl_dtype(n, 0, strcmp(n->np->op_type, "Bernoulli") == 0, &elem))
        return -1;
    return fi_set_shape(n, 0, elem ? elem : x->elem, x->rank, x->dims);
}

/* Multinomial (7): [batch, sample_size] of dtype INT32 (or INT64). */
static int fi_ctl_multinomial(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x) return fi_fail(n, "needs the input");
    int64_t dtype = fi_attr_int(n, "dtype", FI_CTL_INT32),
            samples = fi_attr_int(n, "sample_size", 1);
    if (dtype != FI_CTL_INT32 && dtype != FI_CTL_INT64)
        return fi_fail(n, "dtype %lld is not int32 or int64", (long long)dtype);
    if (samples < 0 || samples > FI_MAX_DIM)
        return fi_fail(n, "sample_size is %lld", (long long)samples);
    if (x->rank >= 0 && x->rank != 2)
        return fi_fail(n, "input has rank %d; it must be [batch, classes]", x->rank);
    if (x->rank < 0) return fi_set_type(n, 0, (int32_t)dtype);
    fi_dim dims[2] = {x->dims[0], fi_known(samples)};
    return fi_set_shape(n, 0, (int32_t)dtype, 2, dims);
}

/* ----------------------------------------------------------- optional */

/* Optional (15) with an input, OptionalGetElement (15, 18): the element's
 * type and shape (an optional is planned as the tensor it holds). */
static int fi_ctl_optional_pass(fi_node *n) {
    return fi_ctl_copy_out(n, 0, fi_in(n, 0));
}

/* OptionalHasElement (15, 18): a BOOL scalar; false when the input is
 * omitted (allowed from 18). */
static int fi_ctl_optional_has(fi_node *n) {
    fi_dim none[1] = {{0, -1, false}};
    int64_t no = 0;
    if (n->np->n_input == 0 || !n->np->input[0] || !n->np->input[0][0])
        return fi_set_value_ints(n, 0, FI_CTL_BOOL, 0, none, &no);
    return fi_set_shape(n, 0, FI_CTL_BOOL, 0, none);
}

const fi_rule fi_rules_control[] = {
    {"Bernoulli", fi_ctl_random_like},
    {"If", fi_ctl_if},
    {"Loop", fi_ctl_loop},
    {"Multinomial", fi_ctl_multinomial},
    {"NonMaxSuppression", fi_ctl_nms},
    {"NonZero", fi_ctl_nonzero},
    {"Optional", fi_ctl_optional_pass},
    {"OptionalGetElement", fi_ctl_optional_pass},
    {"OptionalHasElement", fi_ctl_optional_has},
    {"RandomNormal", fi_ctl_random},
    {"RandomNormalLike", fi_ctl_random_like},
    {"RandomUniform", fi_ctl_random},
    {"RandomUniformLike", fi_ctl_random_like},
    {"Scan", fi_ctl_scan},
    {"TopK", fi_ctl_topk},
    {"Unique", fi_ctl_unique},
    {NULL, NULL},
};
