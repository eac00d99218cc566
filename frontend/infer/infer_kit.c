/* The kit the rule files use (infer.h): a node's attributes and inputs,
 * its outputs set, and dims computed with overflow and symbols kept.
 *
 * Reading order: attributes -> inputs -> outputs -> dims.
 */
#include "infer_ctx.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ attributes */

const Onnx__AttributeProto *fi_attr(const fi_node *n, const char *name) {
    const Onnx__NodeProto *np = n->np;
    for (size_t i = 0; i < np->n_attribute; i++) {
        const Onnx__AttributeProto *a = np->attribute[i];
        if (!a || !a->name || strcmp(a->name, name) != 0) continue;
        if (a->ref_attr_name && a->ref_attr_name[0]) {
            /* inside a function: the caller's attribute of that name */
            if (!n->caller) return NULL;
            fi_node up = *n->caller;
            const Onnx__NodeProto *cp = up.np;
            for (size_t k = 0; k < cp->n_attribute; k++)
                if (cp->attribute[k] && cp->attribute[k]->name &&
                    strcmp(cp->attribute[k]->name, a->ref_attr_name) == 0)
                    return cp->attribute[k];
            return NULL;
        }
        return a;
    }
    return NULL;
}

int64_t fi_attr_int(const fi_node *n, const char *name, int64_t dflt) {
    const Onnx__AttributeProto *a = fi_attr(n, name);
    return a ? a->i : dflt;
}

double fi_attr_float(const fi_node *n, const char *name, double dflt) {
    const Onnx__AttributeProto *a = fi_attr(n, name);
    return a ? a->f : dflt;
}

const char *fi_attr_string(const fi_node *n, const char *name, const char *dflt, char *buf,
                           size_t len) {
    const Onnx__AttributeProto *a = fi_attr(n, name);
    if (!a || !len) return dflt;
    size_t k = a->s.len < len - 1 ? a->s.len : len - 1;
    if (k) memcpy(buf, a->s.data, k);
    buf[k] = '\0';
    return buf;
}

bool fi_attr_ints(const fi_node *n, const char *name, const int64_t **v, size_t *len) {
    const Onnx__AttributeProto *a = fi_attr(n, name);
    if (!a) return false;
    *v = a->ints;
    *len = a->n_ints;
    return true;
}

bool fi_attr_floats(const fi_node *n, const char *name, const float **v, size_t *len) {
    const Onnx__AttributeProto *a = fi_attr(n, name);
    if (!a) return false;
    *v = a->floats;
    *len = a->n_floats;
    return true;
}

/* ---------------------------------------------------------------- inputs */

fi_tensor *fi_in(const fi_node *n, size_t k) {
    return k < n->n_in ? n->in[k] : NULL;
}

bool fi_in_ints(const fi_node *n, size_t k, const int64_t **v, size_t *len) {
    const fi_tensor *t = fi_in(n, k);
    if (!t || t->n_const < 0) return false;
    if (!t->ci) {
        /* a float value asked for as ints: truncate once, cache on the tensor */
        int64_t *ci = fi_alloc(n->cx, (size_t)(t->n_const + 1) * sizeof *ci);
        if (!ci) return false;
        for (int64_t i = 0; i < t->n_const; i++) ci[i] = fi_double_to_int(t->cf[i]);
        ((fi_tensor *)t)->ci = ci;
    }
    *v = t->ci;
    *len = (size_t)t->n_const;
    return true;
}

bool fi_in_floats(const fi_node *n, size_t k, const double **v, size_t *len) {
    const fi_tensor *t = fi_in(n, k);
    if (!t || t->n_const < 0) return false;
    if (!t->cf) {
        double *cf = fi_alloc(n->cx, (size_t)(t->n_const + 1) * sizeof *cf);
        if (!cf) return false;
        for (int64_t i = 0; i < t->n_const; i++) cf[i] = (double)t->ci[i];
        ((fi_tensor *)t)->cf = cf;
    }
    *v = t->cf;
    *len = (size_t)t->n_const;
    return true;
}

bool fi_in_scalar(const fi_node *n, size_t k, int64_t *v) {
    const int64_t *p;
    size_t len;
    if (!fi_in_ints(n, k, &p, &len) || len != 1) return false;
    *v = p[0];
    return true;
}

bool fi_has_rank(const fi_tensor *t) {
    return t && t->rank >= 0;
}

bool fi_all_known(const fi_tensor *t) {
    if (!t || t->rank < 0) return false;
    for (int d = 0; d < t->rank; d++)
        if (t->dims[d].v < 0) return false;
    return true;
}

int64_t fi_numel(const fi_tensor *t) {
    if (!fi_all_known(t)) return -1;
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++)
        if (__builtin_mul_overflow(n, t->dims[d].v, &n) || n > FI_MAX_DIM) return -1;
    return n;
}

int32_t fi_blame(const fi_tensor *t) {
    if (!t) return -1;
    for (int d = 0; d < t->rank; d++)
        if (t->dims[d].v < 0 && t->dims[d].sym >= 0) return t->dims[d].sym;
    return t->blame;
}

/* --------------------------------------------------------------- outputs */

int fi_set_type(fi_node *n, size_t k, int32_t elem) {
    if (k >= n->n_out || !n->out[k] || n->cx->failed) return n->cx->failed ? -1 : 0;
    n->out[k]->elem = elem;
    return 0;
}

int fi_set_shape(fi_node *n, size_t k, int32_t elem, int rank, const fi_dim *dims) {
    if (n->cx->failed) return -1;
    if (k >= n->n_out || !n->out[k]) return 0;
    fi_tensor *t = n->out[k];
    if (elem) t->elem = elem;
    if (rank < 0) return 0;
    if (rank > FI_MAX_RANK)
        return fi_fail(n, "output %zu would have rank %d; roamc handles at most %d", k, rank,
                       FI_MAX_RANK);
    fi_dim *d = fi_alloc(n->cx, ((size_t)rank + 1) * sizeof *d);
    if (!d) return -1;
    int64_t numel = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i].v > FI_MAX_DIM)
            return fi_fail(n, "output %zu dim %d = %lld is out of range", k, i,
                           (long long)dims[i].v);
        d[i] = dims[i];
        if (dims[i].v >= 0 && numel >= 0 &&
            (__builtin_mul_overflow(numel, dims[i].v, &numel) || numel > FI_MAX_DIM))
            return fi_fail(n, "output %zu: the product of its dims overflows 2^62 elements", k);
    }
    t->rank = rank;
    t->dims = d;
    t->n_const = -1;
    t->ci = NULL;
    t->cf = NULL;
    return 0;
}

int fi_set_sequence(fi_node *n, size_t k, int32_t elem, int rank, const fi_dim *dims, fi_dim len) {
    if (fi_set_shape(n, k, elem, rank, dims)) return -1;
    if (k < n->n_out && n->out[k]) {
        n->out[k]->seq = true;
        n->out[k]->seq_len = len;
    }
    return 0;
}

int fi_set_like(fi_node *n, size_t k, const fi_tensor *src) {
    if (!src) return n->cx->failed ? -1 : 0;
    return fi_set_shape(n, k, src->elem, src->rank, src->dims);
}

static int fi_set_value(fi_node *n, size_t k, int32_t elem, int rank, const fi_dim *dims,
                        const int64_t *vi, const double *vf) {
    if (fi_set_shape(n, k, elem, rank, dims)) return -1;
    if (k >= n->n_out || !n->out[k]) return 0;
    fi_tensor *t = n->out[k];
    int64_t count = fi_numel(t);
    if (count < 0 || count > FI_MAX_CONST_ELEMS) return 0; /* too large to keep: shape only */
    if (fi_is_int_type(elem) || (!fi_is_float_type(elem) && vi)) {
        int64_t *c = fi_alloc(n->cx, (size_t)(count + 1) * sizeof *c);
        if (!c) return -1;
        for (int64_t i = 0; i < count; i++) c[i] = vi ? vi[i] : fi_double_to_int(vf[i]);
        t->ci = c;
    } else {
        double *c = fi_alloc(n->cx, (size_t)(count + 1) * sizeof *c);
        if (!c) return -1;
        for (int64_t i = 0; i < count; i++) c[i] = vf ? vf[i] : (double)vi[i];
        t->cf = c;
    }
    t->n_const = count;
    return 0;
}

int fi_set_value_ints(fi_node *n, size_t k, int32_t elem, int rank, const fi_dim *dims,
                      const int64_t *v) {
    return fi_set_value(n, k, elem, rank, dims, v, NULL);
}

int fi_set_value_floats(fi_node *n, size_t k, int32_t elem, int rank, const fi_dim *dims,
                        const double *v) {
    return fi_set_value(n, k, elem, rank, dims, NULL, v);
}

int fi_set_from_tensor_proto(fi_node *n, size_t k, const Onnx__TensorProto *tp) {
    if (n->cx->failed) return -1;
    if (k >= n->n_out || !n->out[k]) return 0;
    if (fi_from_tensor_proto(n->cx, n->out[k], tp, n->np->output[k])) return -1;
    n->out[k]->declared = false; /* a node's output, inferred from its attribute */
    return 0;
}

/* ------------------------------------------------------------------- dims */

static fi_dim fi_derived(fi_dim a, fi_dim b) {
    return fi_unknown_derived(a.v < 0 && a.sym >= 0 ? a.sym : b.v < 0 ? b.sym : -1);
}

fi_dim fi_dim_add(fi_node *n, fi_dim a, fi_dim b) {
    if (a.v < 0 || b.v < 0) return fi_derived(a, b);
    int64_t r;
    if (__builtin_add_overflow(a.v, b.v, &r) || r > FI_MAX_DIM) {
        fi_fail(n, "a dim would exceed 2^62 (%lld + %lld)", (long long)a.v, (long long)b.v);
        return fi_known(0);
    }
    return fi_known(r);
}

fi_dim fi_dim_sub(fi_node *n, fi_dim a, fi_dim b) {
    if (a.v < 0 || b.v < 0) return fi_derived(a, b);
    if (a.v < b.v) {
        fi_fail(n, "a dim would be negative (%lld - %lld)", (long long)a.v, (long long)b.v);
        return fi_known(0);
    }
    return fi_known(a.v - b.v);
}

fi_dim fi_dim_mul(fi_node *n, fi_dim a, fi_dim b) {
    if (a.v == 0 || b.v == 0) return fi_known(0);
    if (a.v < 0 || b.v < 0) return fi_derived(a, b);
    int64_t r;
    if (__builtin_mul_overflow(a.v, b.v, &r) || r > FI_MAX_DIM) {
        fi_fail(n, "a dim would exceed 2^62 (%lld x %lld)", (long long)a.v, (long long)b.v);
        return fi_known(0);
    }
    return fi_known(r);
}

fi_dim fi_dim_div_floor(fi_node *n, fi_dim a, int64_t b) {
    if (b <= 0) {
        fi_fail(n, "division of a dim by %lld", (long long)b);
        return fi_known(0);
    }
    if (a.v < 0) return fi_derived(a, a);
    return fi_known(a.v / b);
}

fi_dim fi_dim_div_ceil(fi_node *n, fi_dim a, int64_t b) {
    if (b <= 0) {
        fi_fail(n, "division of a dim by %lld", (long long)b);
        return fi_known(0);
    }
    if (a.v < 0) return fi_derived(a, a);
    return fi_known(a.v / b + (a.v % b != 0));
}

fi_dim fi_dim_merge(fi_node *n, fi_dim a, fi_dim b, const char *what) {
    if (a.v >= 0 && b.v >= 0 && a.v != b.v) {
        fi_fail(n, "%s differ: %lld and %lld", what, (long long)a.v, (long long)b.v);
        return a;
    }
    if (a.v >= 0) return a;
    if (b.v >= 0) return b;
    return a.sym >= 0 ? a : b;
}

fi_dim fi_dim_broadcast(fi_node *n, fi_dim a, fi_dim b) {
    if (a.v == 1) return b;
    if (b.v == 1) return a;
    if (a.v >= 0 && b.v >= 0) {
        if (a.v != b.v)
            fi_fail(n, "cannot broadcast dims %lld and %lld", (long long)a.v, (long long)b.v);
        return a;
    }
    /* an unknown against a known non-1: the unknown must be that or 1 */
    if (a.v >= 0) return a;
    if (b.v >= 0) return b;
    return a.sym >= 0 ? a : b;
}

int fi_broadcast(fi_node *n, fi_tensor *const *inputs, size_t count, int *rank, fi_dim *dims) {
    int r = 0;
    for (size_t i = 0; i < count; i++) {
        if (!inputs[i]) continue;
        if (inputs[i]->rank < 0) return 1;
        if (inputs[i]->rank > r) r = inputs[i]->rank;
    }
    for (int d = 0; d < r; d++) dims[d] = fi_known(1);
    for (size_t i = 0; i < count; i++) {
        const fi_tensor *t = inputs[i];
        if (!t) continue;
        for (int d = 0; d < t->rank; d++) {
            int o = r - t->rank + d;
            dims[o] = fi_dim_broadcast(n, dims[o], t->dims[d]);
        }
    }
    *rank = r;
    return n->cx->failed ? -1 : 0;
}

int fi_axis(fi_node *n, int64_t axis, int rank, int *out) {
    if (axis < -rank || axis >= rank)
        return fi_fail(n, "axis %lld out of range for rank %d", (long long)axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return 0;
}

fi_dim fi_data_dim(fi_node *n, const char *what, int64_t upper) {
    /* Named after the first output, unique in its graph (node names need
     * not be, and nodes in subgraphs have no index): two data sizes never
     * share a symbol, so one never takes the other's bound. */
    char name[512];
    const char *out =
        n->np->n_output && n->np->output[0] && n->np->output[0][0] ? n->np->output[0] : NULL;
    if (out)
        snprintf(name, sizeof name, "%s:%s", out, what);
    else
        snprintf(name, sizeof name, "%s#%d:%s", n->np->op_type, n->index, what);
    int64_t flag = fi_flag_dim(n->cx, name);
    int64_t v = flag >= 0 ? flag : upper;
    int32_t s = fi_symbol_add(n->cx, name, v, FE_SYMBOL_DATA, n->index);
    if (s >= 0) { /* --dim made it first, as an input symbol: it is this node's */
        n->cx->syms[s].kind = FE_SYMBOL_DATA;
        n->cx->syms[s].node = n->index;
        if (n->cx->syms[s].value < 0 && v >= 0) n->cx->syms[s].value = v;
    }
    for (size_t k = 0; k < n->n_out; k++)
        if (n->out[k]) n->out[k]->bound = true;
    if (s >= 0 && n->cx->syms[s].value >= 0) return fi_known(n->cx->syms[s].value);
    return fi_unknown(s);
}
