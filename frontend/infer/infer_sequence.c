/* Shape inference rules: sequences of tensors (opsets 11-18).
 *
 * A sequence value is planned as one storage that holds all its elements:
 * fi_tensor.seq with the elements' type and shape and seq_len of them.
 * Elements of different shapes are described by the largest dim of each
 * axis (the value is then a bound: seq_len x the largest element is at
 * least what the sequence holds).  torch.onnx writes these for lists of
 * tensors (torch.split into a list, torch.cat/stack of a list).
 *
 * Reading order: element shapes merged -> Empty/Construct/Insert/Erase ->
 * At/Length -> SplitToSequence -> ConcatFromSequence -> table.
 */
#include "infer.h"

#include <string.h>

#define FI_SEQ_INT64 7

/* The element shape of a sequence, built up element by element. */
typedef struct fi_seq_elems {
    int32_t elem;
    int rank; /* -1: unknown (or ranks that differ) */
    fi_dim dims[FI_MAX_RANK];
    bool differ; /* elements of different shapes: the dims are the largest */
    bool any;    /* at least one element seen */
} fi_seq_elems;

/* Adds one element's type and shape to e.  Known dims that differ keep the
 * larger; an unknown dim stays unknown. */
static int fi_seq_add(fi_node *n, fi_seq_elems *e, const fi_tensor *t) {
    if (t->elem) {
        if (e->elem && e->elem != t->elem)
            return fi_fail(n, "a sequence's elements differ in type (%d, %d)", e->elem, t->elem);
        e->elem = t->elem;
    }
    if (!e->any) {
        e->any = true;
        e->rank = t->rank;
        if (t->rank > 0) memcpy(e->dims, t->dims, (size_t)t->rank * sizeof *e->dims);
        e->differ = t->seq && t->bound;
        return 0;
    }
    if (e->rank < 0 || t->rank < 0 || e->rank != t->rank) {
        e->rank = -1;
        return 0;
    }
    for (int d = 0; d < e->rank; d++) {
        fi_dim a = e->dims[d], b = t->dims[d];
        if (a.v >= 0 && b.v >= 0 && a.v != b.v) {
            e->dims[d] = a.v > b.v ? a : b;
            e->differ = true;
        } else if (a.v < 0 || b.v < 0) {
            e->dims[d] = a.v < 0 ? a : b;
        }
    }
    return 0;
}

/* Starts e from a sequence's elements. */
static void fi_seq_from(fi_seq_elems *e, const fi_tensor *s) {
    memset(e, 0, sizeof *e);
    e->rank = -1;
    if (!s) return;
    e->elem = s->elem;
    if (s->rank < 0 && !(s->seq && s->seq_len.v == 0)) {
        e->any = true; /* elements of unknown shape */
        return;
    }
    if (s->seq && s->seq_len.v == 0 && s->rank < 0) return; /* empty: no element yet */
    e->any = true;
    e->rank = s->rank;
    if (s->rank > 0) memcpy(e->dims, s->dims, (size_t)s->rank * sizeof *e->dims);
    e->differ = s->bound;
}

static int fi_seq_emit(fi_node *n, const fi_seq_elems *e, fi_dim len) {
    if (fi_set_sequence(n, 0, e->elem, e->any ? e->rank : -1, e->dims, len)) return -1;
    if (e->differ && n->n_out && n->out[0]) n->out[0]->bound = true;
    return 0;
}

static fi_tensor *fi_seq_input(fi_node *n) {
    fi_tensor *s = fi_in(n, 0);
    if (!s) {
        fi_fail(n, "needs the input sequence");
        return NULL;
    }
    return s;
}

/* A sequence's length as a dim (unknown for a value that is not one). */
static fi_dim fi_seq_len(const fi_tensor *s) {
    return s->seq ? s->seq_len : fi_unknown(fi_blame(s));
}

/* ------------------------------------------- Empty, Construct, Insert, Erase */

static int fi_seq_rule_empty(fi_node *n) {
    fi_seq_elems e = {.elem = (int32_t)fi_attr_int(n, "dtype", 1), .rank = -1};
    return fi_seq_emit(n, &e, fi_known(0));
}

static int fi_seq_rule_construct(fi_node *n) {
    if (n->n_in == 0) return fi_fail(n, "needs at least one input");
    fi_seq_elems e = {.rank = -1};
    for (size_t k = 0; k < n->n_in; k++) {
        const fi_tensor *t = fi_in(n, k);
        if (!t) return fi_fail(n, "input %zu is missing", k);
        if (fi_seq_add(n, &e, t)) return -1;
    }
    return fi_seq_emit(n, &e, fi_known((int64_t)n->n_in));
}

static int fi_seq_rule_insert(fi_node *n) {
    fi_tensor *s = fi_seq_input(n), *t = fi_in(n, 1);
    if (!s) return -1;
    if (!t) return fi_fail(n, "needs the tensor to insert");
    fi_seq_elems e;
    fi_seq_from(&e, s);
    if (fi_seq_add(n, &e, t)) return -1;
    return fi_seq_emit(n, &e, fi_dim_add(n, fi_seq_len(s), fi_known(1)));
}

static int fi_seq_rule_erase(fi_node *n) {
    fi_tensor *s = fi_seq_input(n);
    if (!s) return -1;
    fi_seq_elems e;
    fi_seq_from(&e, s);
    fi_dim len = fi_seq_len(s);
    if (len.v == 0) return fi_fail(n, "erases from an empty sequence");
    return fi_seq_emit(n, &e, fi_dim_sub(n, len, fi_known(1)));
}

/* ------------------------------------------------------------ At, Length */

static int fi_seq_rule_at(fi_node *n) {
    fi_tensor *s = fi_seq_input(n);
    if (!s) return -1;
    if (!fi_in(n, 1)) return fi_fail(n, "needs the position");
    if (s->seq && s->seq_len.v == 0) return fi_fail(n, "reads from an empty sequence");
    if (fi_set_shape(n, 0, s->elem, s->rank, s->dims)) return -1;
    if (s->bound && n->out[0]) n->out[0]->bound = true; /* one element: at most the largest */
    return 0;
}

static int fi_seq_rule_length(fi_node *n) {
    fi_tensor *s = fi_seq_input(n);
    if (!s) return -1;
    fi_dim len = fi_seq_len(s);
    if (len.v >= 0) return fi_set_value_ints(n, 0, FI_SEQ_INT64, 0, NULL, &len.v);
    return fi_set_shape(n, 0, FI_SEQ_INT64, 0, NULL);
}

/* --------------------------------------------------------- SplitToSequence */

/* SplitToSequence(input, split?): no split: one element per index of
 * `axis` (that axis dropped unless keepdims); a scalar split s: chunks of
 * s (the last may be shorter); a 1-D split: one element per entry. */
static int fi_seq_rule_split(fi_node *n) {
    fi_tensor *x = fi_in(n, 0), *split = fi_in(n, 1);
    if (!x) return fi_fail(n, "needs the input");
    fi_seq_elems e = {.elem = x->elem, .rank = -1, .any = true};
    if (!fi_has_rank(x)) return fi_seq_emit(n, &e, fi_unknown(fi_blame(x)));
    int axis;
    if (x->rank == 0) return fi_fail(n, "cannot split a scalar");
    if (fi_axis(n, fi_attr_int(n, "axis", 0), x->rank, &axis)) return -1;
    fi_dim len_axis = x->dims[axis];
    e.rank = x->rank;
    memcpy(e.dims, x->dims, (size_t)x->rank * sizeof *e.dims);
    fi_dim len;
    if (!split) {
        len = len_axis;
        if (fi_attr_int(n, "keepdims", 1) == 0) {
            memmove(e.dims + axis, e.dims + axis + 1,
                    (size_t)(x->rank - axis - 1) * sizeof *e.dims);
            e.rank--;
        } else {
            e.dims[axis] = fi_known(1);
        }
        return fi_seq_emit(n, &e, len);
    }
    const int64_t *v;
    size_t nv;
    if (!fi_in_ints(n, 1, &v, &nv)) {
        /* sizes unknown: the count depends on data, each piece at most the axis */
        e.dims[axis] = len_axis;
        e.differ = true;
        return fi_seq_emit(n, &e,
                           split->rank == 1 && split->dims[0].v >= 0
                               ? split->dims[0]
                               : fi_data_dim(n, "count", len_axis.v));
    }
    if (split->rank == 0) {
        if (v[0] <= 0) return fi_fail(n, "split %lld is not positive", (long long)v[0]);
        len = fi_dim_div_ceil(n, len_axis, v[0]);
        e.dims[axis] = len_axis.v >= 0 && len_axis.v < v[0] ? len_axis : fi_known(v[0]);
        e.differ = len_axis.v < 0 || len_axis.v % v[0] != 0;
        return fi_seq_emit(n, &e, len);
    }
    int64_t sum = 0, big = 0;
    for (size_t i = 0; i < nv; i++) {
        if (v[i] < 0 || v[i] > FI_MAX_DIM)
            return fi_fail(n, "split entry %lld is out of range", (long long)v[i]);
        sum += v[i];
        if (sum > FI_MAX_DIM) return fi_fail(n, "split entries add up past 2^62");
        if (v[i] != v[0]) e.differ = true;
        if (v[i] > big) big = v[i];
    }
    if (len_axis.v >= 0 && sum != len_axis.v)
        return fi_fail(n, "split entries add up to %lld, the axis has %lld", (long long)sum,
                       (long long)len_axis.v);
    e.dims[axis] = fi_known(big);
    return fi_seq_emit(n, &e, fi_known((int64_t)nv));
}

/* ------------------------------------------------------- ConcatFromSequence */

/* new_axis 0: the elements joined along axis (len x the element's dim, a
 * bound when they differ); new_axis 1: stacked along a new axis. */
static int fi_seq_rule_concat(fi_node *n) {
    fi_tensor *s = fi_seq_input(n);
    if (!s) return -1;
    bool stack = fi_attr_int(n, "new_axis", 0) == 1;
    if (!fi_has_rank(s)) return fi_set_type(n, 0, s->elem);
    int rank = s->rank + (stack ? 1 : 0), axis;
    if (rank == 0) return fi_fail(n, "cannot concatenate scalars without new_axis");
    if (fi_axis(n, fi_attr_int(n, "axis", 0), rank, &axis)) return -1;
    fi_dim dims[FI_MAX_RANK], len = fi_seq_len(s);
    for (int d = 0, i = 0; d < rank; d++) {
        if (stack && d == axis)
            dims[d] = len;
        else if (d == axis)
            dims[d] = fi_dim_mul(n, len, s->dims[i++]);
        else
            dims[d] = s->dims[i++];
    }
    if (fi_set_shape(n, 0, s->elem, rank, dims)) return -1;
    if (s->bound && n->out[0]) n->out[0]->bound = true;
    return 0;
}

/* ------------------------------------------------------------------ table */

const fi_rule fi_rules_sequence[] = {
    {"SequenceEmpty", fi_seq_rule_empty},
    {"SequenceConstruct", fi_seq_rule_construct},
    {"SequenceInsert", fi_seq_rule_insert},
    {"SequenceErase", fi_seq_rule_erase},
    {"SequenceAt", fi_seq_rule_at},
    {"SequenceLength", fi_seq_rule_length},
    {"SplitToSequence", fi_seq_rule_split},
    {"ConcatFromSequence", fi_seq_rule_concat},
    {NULL, NULL},
};
