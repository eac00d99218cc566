/* Shape inference rules of the shape family (see infer.h): constants, the
 * ops that compute or move shapes (Shape, Reshape, Slice, Gather, Concat,
 * ...), gathers and scatters.
 *
 * These are the ops that make shapes computed at run time resolve: besides
 * the output shape, each rule computes the output value whenever its inputs'
 * values are known and the result is small (FI_MAX_CONST_ELEMS), so that
 * Shape -> Gather -> Unsqueeze -> Concat -> Reshape gives Reshape a concrete
 * shape.  When a value stays unknown, the output remembers the symbol that
 * hides it (fi_tensor.blame), so that a message can name the flag to bind.
 *
 * Reading order: small helpers (dims, values, attribute-or-input forms) ->
 * constants -> views (Reshape, Flatten, Squeeze, Unsqueeze) -> data movement
 * (Transpose, Concat, Split, Slice, Expand, Tile, Pad) -> gathers and
 * scatters -> generators (Range, OneHot, EyeLike) -> the table.
 */
#include "infer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FI_INT64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64
#define FI_FLOAT ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define FI_STRING ONNX__TENSOR_PROTO__DATA_TYPE__STRING
/* Room for dims of ranks a rule computes before fi_set_shape checks them
 * against FI_MAX_RANK (Gather: q + r - 1 < 2 * FI_MAX_RANK). */
#define FI_SHAPE_ROOM (2 * FI_MAX_RANK + 2)

/* ------------------------------------------------------------ small helpers */

/* True when the node uses the form of `version` or later.  A model that
 * imports no standard opset (opset 0) gets the newest forms. */
static bool fi_shape_since(const fi_node *n, int64_t version) {
    return n->opset == 0 || n->opset >= version;
}

/* When output k's value stays unknown, the symbol that hides the value of
 * `from` hides it too. */
static void fi_shape_blame(fi_node *n, size_t k, const fi_tensor *from) {
    if (k >= n->n_out || !n->out[k] || !from || n->out[k]->n_const >= 0 || n->out[k]->blame >= 0)
        return;
    n->out[k]->blame = fi_blame(from);
}

/* The length of a 1-D input whose value is unknown, or -1: the rank a
 * shape-like input gives even when its value is unknown. */
static int64_t fi_shape_len(const fi_tensor *t) {
    if (!t || t->rank != 1 || t->dims[0].v < 0) return -1;
    return t->dims[0].v;
}

/* ------------------------------------------------------------ value buffers */

/* An output value being built: ints for integer and bool types, doubles for
 * the others.  At most FI_MAX_CONST_ELEMS elements, so the malloc below is
 * bounded by the check in fi_shape_buf_init and never by the file. */
typedef struct fi_shape_buf {
    bool ints;
    int64_t count;
    int64_t *i;
    double *f;
} fi_shape_buf;

static bool fi_shape_buf_init(fi_shape_buf *b, int32_t elem, int64_t count) {
    memset(b, 0, sizeof *b);
    if (count < 0 || count > FI_MAX_CONST_ELEMS) return false;
    b->ints = !fi_is_float_type(elem);
    b->count = count;
    if (b->ints)
        b->i = xmallocarray((size_t)count, sizeof *b->i);
    else
        b->f = xmallocarray((size_t)count, sizeof *b->f);
    return true;
}

/* Element si of src's value into position pos. */
static void fi_shape_buf_put(fi_shape_buf *b, int64_t pos, const fi_tensor *src, int64_t si) {
    if (b->ints)
        b->i[pos] = src->ci ? src->ci[si] : fi_double_to_int(src->cf[si]);
    else
        b->f[pos] = src->cf ? src->cf[si] : (double)src->ci[si];
}

/* Sets output k to the buffer's value (and frees the buffer). */
static int fi_shape_buf_emit(fi_node *n, size_t k, int32_t elem, int rank, const fi_dim *dims,
                             fi_shape_buf *b) {
    int rc = b->ints ? fi_set_value_ints(n, k, elem, rank, dims, b->i)
                     : fi_set_value_floats(n, k, elem, rank, dims, b->f);
    free(b->i);
    free(b->f);
    b->i = NULL;
    b->f = NULL;
    return rc;
}

static void fi_shape_buf_drop(fi_shape_buf *b) {
    free(b->i);
    free(b->f);
}

/* The number of elements of dims when all are known, else -1. */
static int64_t fi_shape_count(int rank, const fi_dim *dims) {
    int64_t c = 1;
    for (int d = 0; d < rank; d++) {
        if (dims[d].v < 0) return -1;
        if (__builtin_mul_overflow(c, dims[d].v, &c) || c > FI_MAX_DIM) return -1;
    }
    return c;
}

/* Whether src has a value a rule can read: known and non-empty arrays. */
static bool fi_shape_has_value(const fi_tensor *src) {
    return src && src->n_const >= 0 && (src->ci || src->cf);
}

/* Output k with src's value in the same row-major order (Identity and the
 * views: Reshape, Flatten, Squeeze, Unsqueeze), or just the shape when the
 * value is unknown or too large. */
static int fi_shape_emit_same(fi_node *n, size_t k, int32_t elem, int rank, const fi_dim *dims,
                              const fi_tensor *src) {
    int64_t count = fi_shape_count(rank, dims);
    fi_shape_buf b;
    if (!fi_shape_has_value(src) || count != src->n_const || !fi_shape_buf_init(&b, elem, count)) {
        int rc = fi_set_shape(n, k, elem, rank, dims);
        fi_shape_blame(n, k, src);
        return rc;
    }
    for (int64_t i = 0; i < count; i++) fi_shape_buf_put(&b, i, src, i);
    return fi_shape_buf_emit(n, k, elem, rank, dims, &b);
}

/* How an output dim reads the source: output index i reads source index
 * (start + i * step), taken modulo mod when mod > 0, times stride. */
typedef struct fi_shape_axis {
    int64_t start, step, mod, stride;
} fi_shape_axis;

/* Output k whose element at multi-index (i_0, ..., i_r-1) is src's element
 * base + sum over d of ax[d]'s source index (Transpose, Slice, Split,
 * Expand, Tile).  A source index out of range (a bug, or a value that does
 * not fit its shape) keeps the shape only. */
static int fi_shape_emit_map(fi_node *n, size_t k, int32_t elem, int rank, const fi_dim *dims,
                             const fi_tensor *src, int64_t base, const fi_shape_axis *ax) {
    int64_t count = fi_shape_count(rank, dims);
    fi_shape_buf b;
    if (!fi_shape_has_value(src) || !fi_shape_buf_init(&b, elem, count)) {
        int rc = fi_set_shape(n, k, elem, rank, dims);
        fi_shape_blame(n, k, src);
        return rc;
    }
    int64_t idx[FI_SHAPE_ROOM] = {0};
    for (int64_t i = 0; i < count; i++) {
        int64_t si = base;
        for (int d = 0; d < rank; d++) {
            int64_t p = ax[d].start + idx[d] * ax[d].step;
            if (ax[d].mod > 0) p %= ax[d].mod;
            si += p * ax[d].stride;
        }
        if (si < 0 || si >= src->n_const) {
            fi_shape_buf_drop(&b);
            return fi_set_shape(n, k, elem, rank, dims);
        }
        fi_shape_buf_put(&b, i, src, si);
        for (int d = rank - 1; d >= 0 && ++idx[d] == dims[d].v; d--) idx[d] = 0;
    }
    return fi_shape_buf_emit(n, k, elem, rank, dims, &b);
}

/* Row-major strides of t's dims (all known when t has a value). */
static void fi_shape_strides(const fi_tensor *t, int64_t *stride) {
    int64_t s = 1;
    for (int d = t->rank - 1; d >= 0; d--) {
        stride[d] = s;
        s *= t->dims[d].v > 0 ? t->dims[d].v : 1;
    }
}

/* ------------------------------------------------- attribute-or-input forms */

/* A list of ints that old opsets give as an attribute and new ones as an
 * input (axes, pads, split, starts...): whether the node gives it, its
 * value when known, and its length even when the value is not (a 1-D
 * input of known size), which still fixes the output rank. */
typedef struct fi_shape_list {
    const int64_t *v;
    size_t len;
    bool present;          /* the node gives the list (attribute or input) */
    bool known;            /* its value is known */
    int64_t len_known;     /* the length, or -1 */
    const fi_tensor *from; /* the input it comes from, NULL for an attribute */
} fi_shape_list;

static fi_shape_list fi_shape_list_get(const fi_node *n, bool attr_form, const char *attr,
                                       size_t k) {
    fi_shape_list l = {.len_known = -1};
    if (attr_form) {
        l.present = fi_attr_ints(n, attr, &l.v, &l.len);
        l.known = l.present;
    } else if (fi_in(n, k)) {
        l.present = true;
        l.from = fi_in(n, k);
        l.known = fi_in_ints(n, k, &l.v, &l.len);
    }
    if (l.known)
        l.len_known = (int64_t)l.len;
    else if (l.present)
        l.len_known = fi_shape_len(l.from);
    return l;
}

/* Normalizes axes against rank into out (room FI_SHAPE_ROOM), refusing
 * out-of-range and repeated axes. */
static int fi_shape_axes(fi_node *n, const int64_t *axes, size_t len, int rank, int *out) {
    if (len > FI_SHAPE_ROOM) return fi_fail(n, "%zu axes for rank %d", len, rank);
    bool seen[FI_SHAPE_ROOM] = {false};
    for (size_t i = 0; i < len; i++) {
        if (fi_axis(n, axes[i], rank, &out[i])) return -1;
        if (seen[out[i]]) return fi_fail(n, "axis %lld is repeated", (long long)axes[i]);
        seen[out[i]] = true;
    }
    return 0;
}

/* ---------------------------------------------------------------- constants */

/* Reads element 0 of a TensorProto (ConstantOfShape's `value`) as an int or
 * a double; false when the type has no plain layout (float16...) or there
 * is no data. */
static bool fi_shape_tp_first(const Onnx__TensorProto *tp, int64_t *iv, double *fv) {
    *iv = 0;
    *fv = 0;
    if (tp->has_raw_data) {
        unsigned bytes = fe_elem_bits(tp->data_type) / 8;
        if (bytes == 0 || bytes > 8 || tp->raw_data.len < bytes) return false;
        uint64_t u = 0;
        for (unsigned b = 0; b < bytes; b++) u |= (uint64_t)tp->raw_data.data[b] << (8 * b);
        switch (tp->data_type) {
        case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: {
            uint32_t w = (uint32_t)u;
            float f;
            memcpy(&f, &w, 4);
            *fv = f;
            return true;
        }
        case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: memcpy(fv, &u, 8); return true;
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: *iv = (int8_t)u; return true;
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: *iv = (int16_t)u; return true;
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: *iv = (int32_t)u; return true;
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: *iv = (int64_t)u; return true;
        case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64:
            *iv = u > INT64_MAX ? INT64_MAX : (int64_t)u;
            return true;
        case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
        case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16:
        case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32:
        case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: *iv = (int64_t)u; return true;
        default: return false;
        }
    }
    if (tp->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && tp->n_float_data)
        *fv = tp->float_data[0];
    else if (tp->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE && tp->n_double_data)
        *fv = tp->double_data[0];
    else if (tp->n_int64_data)
        *iv = tp->int64_data[0];
    else if (fi_is_int_type(tp->data_type) && tp->n_int32_data)
        *iv = tp->int32_data[0];
    else if (tp->n_uint64_data)
        *iv = tp->uint64_data[0] > INT64_MAX ? INT64_MAX : (int64_t)tp->uint64_data[0];
    else
        return false;
    return true;
}

/* The dims of a TensorProto must multiply to at most 2^62: infer.c checks
 * each dim, not the product. */
static int fi_shape_tp_check(fi_node *n, const int64_t *dims, size_t rank, const char *what) {
    int64_t c = 1;
    for (size_t d = 0; d < rank; d++) {
        if (dims[d] < 0 || dims[d] > FI_MAX_DIM)
            return fi_fail(n, "%s has dim %zu = %lld", what, d, (long long)dims[d]);
        if (__builtin_mul_overflow(c, dims[d], &c) || c > FI_MAX_DIM)
            return fi_fail(n, "%s would have more than 2^62 elements", what);
    }
    return 0;
}

static int fi_shape_constant(fi_node *n) {
    const Onnx__AttributeProto *a;
    if ((a = fi_attr(n, "value"))) {
        if (!a->t) return fi_fail(n, "attribute 'value' holds no tensor");
        if (fi_shape_tp_check(n, a->t->dims, a->t->n_dims, "the value")) return -1;
        return fi_set_from_tensor_proto(n, 0, a->t);
    }
    if ((a = fi_attr(n, "sparse_value"))) {
        /* only the dense shape matters; the values are never read */
        const Onnx__SparseTensorProto *sp = a->sparse_tensor;
        if (!sp) return fi_fail(n, "attribute 'sparse_value' holds no tensor");
        if (sp->n_dims > FI_MAX_RANK) return fi_fail(n, "sparse value of rank %zu", sp->n_dims);
        if (fi_shape_tp_check(n, sp->dims, sp->n_dims, "the sparse value")) return -1;
        fi_dim dims[FI_MAX_RANK];
        for (size_t d = 0; d < sp->n_dims; d++) dims[d] = fi_known(sp->dims[d]);
        int32_t elem = sp->values ? sp->values->data_type : 0;
        return fi_set_shape(n, 0, elem, (int)sp->n_dims, dims);
    }
    if ((a = fi_attr(n, "value_int"))) return fi_set_value_ints(n, 0, FI_INT64, 0, NULL, &a->i);
    if ((a = fi_attr(n, "value_ints"))) {
        fi_dim d = fi_known((int64_t)a->n_ints);
        return fi_set_value_ints(n, 0, FI_INT64, 1, &d, a->ints);
    }
    if ((a = fi_attr(n, "value_float"))) {
        double f = a->f;
        return fi_set_value_floats(n, 0, FI_FLOAT, 0, NULL, &f);
    }
    if ((a = fi_attr(n, "value_floats"))) {
        fi_dim d = fi_known((int64_t)a->n_floats);
        fi_shape_buf b;
        if (!fi_shape_buf_init(&b, FI_FLOAT, (int64_t)a->n_floats))
            return fi_set_shape(n, 0, FI_FLOAT, 1, &d);
        for (size_t i = 0; i < a->n_floats; i++) b.f[i] = a->floats[i];
        return fi_shape_buf_emit(n, 0, FI_FLOAT, 1, &d, &b);
    }
    if (fi_attr(n, "value_string")) return fi_set_shape(n, 0, FI_STRING, 0, NULL);
    if ((a = fi_attr(n, "value_strings"))) {
        fi_dim d = fi_known((int64_t)a->n_strings);
        return fi_set_shape(n, 0, FI_STRING, 1, &d);
    }
    return fi_fail(
        n,
        "no value attribute (value, sparse_value, value_int(s), value_float(s), value_string(s))");
}

static int fi_shape_constant_of_shape(fi_node *n) {
    int32_t elem = FI_FLOAT;
    int64_t iv = 0;
    double fv = 0;
    bool have_fill = true;
    const Onnx__AttributeProto *a = fi_attr(n, "value");
    if (a) {
        if (!a->t) return fi_fail(n, "attribute 'value' holds no tensor");
        elem = a->t->data_type;
        have_fill = fi_shape_tp_first(a->t, &iv, &fv);
        if (fi_is_float_type(elem) && !fv && iv) fv = (double)iv;
        if (fi_is_int_type(elem) && !iv && fv) iv = fi_double_to_int(fv);
    }
    const fi_tensor *s = fi_in(n, 0);
    if (!s) return fi_fail(n, "needs a shape input");
    const int64_t *v;
    size_t len;
    if (!fi_in_ints(n, 0, &v, &len)) {
        int64_t r = fi_shape_len(s);
        if (r < 0) return fi_set_type(n, 0, elem);
        if (r > FI_MAX_RANK) return fi_fail(n, "shape of length %lld", (long long)r);
        fi_dim dims[FI_MAX_RANK];
        for (int64_t d = 0; d < r; d++) dims[d] = fi_unknown_derived(fi_blame(s));
        return fi_set_shape(n, 0, elem, (int)r, dims);
    }
    if (len > FI_MAX_RANK)
        return fi_fail(n, "shape of length %zu; roamc handles rank %d at most", len, FI_MAX_RANK);
    fi_dim dims[FI_MAX_RANK];
    for (size_t d = 0; d < len; d++) {
        if (v[d] < 0) return fi_fail(n, "negative dim %lld in the shape", (long long)v[d]);
        dims[d] = fi_known(v[d]);
    }
    /* fi_set_shape refuses more than 2^62 elements before anything is
     * allocated; only then is the value filled, when small */
    if (fi_set_shape(n, 0, elem, (int)len, dims)) return -1;
    int64_t count = fi_shape_count((int)len, dims);
    fi_shape_buf b;
    if (!have_fill || !fi_shape_buf_init(&b, elem, count)) return 0;
    for (int64_t i = 0; i < count; i++) {
        if (b.ints)
            b.i[i] = iv;
        else
            b.f[i] = fv;
    }
    return fi_shape_buf_emit(n, 0, elem, (int)len, dims, &b);
}

static int fi_shape_shape(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x) return fi_fail(n, "needs an input");
    if (!fi_has_rank(x)) {
        if (fi_set_shape(n, 0, FI_INT64, 1, (fi_dim[]){fi_unknown(-1)})) return -1;
        fi_shape_blame(n, 0, x);
        return 0;
    }
    int64_t r = x->rank, start = 0, end = r;
    if (fi_shape_since(n, 15)) {
        start = fi_attr_int(n, "start", 0);
        end = fi_attr_int(n, "end", r);
        if (start < 0) start = start < -r ? 0 : start + r;
        if (end < 0) end = end < -r ? 0 : end + r;
        if (start > r) start = r;
        if (end > r) end = r;
        if (end < start) end = start;
    }
    fi_dim len = fi_known(end - start);
    int64_t vals[FI_MAX_RANK];
    for (int64_t d = start; d < end; d++) {
        if (x->dims[d].v < 0) {
            if (fi_set_shape(n, 0, FI_INT64, 1, &len)) return -1;
            if (n->n_out && n->out[0]) n->out[0]->blame = x->dims[d].sym;
            return 0;
        }
        vals[d - start] = x->dims[d].v;
    }
    return fi_set_value_ints(n, 0, FI_INT64, 1, &len, vals);
}

static int fi_shape_size(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x) return fi_fail(n, "needs an input");
    int64_t c = fi_numel(x);
    if (c < 0) {
        if (fi_set_shape(n, 0, FI_INT64, 0, NULL)) return -1;
        fi_shape_blame(n, 0, x);
        return 0;
    }
    return fi_set_value_ints(n, 0, FI_INT64, 0, NULL, &c);
}

static int fi_shape_identity(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x) return fi_fail(n, "needs an input");
    if (x->seq) return fi_set_sequence(n, 0, x->elem, x->rank, x->dims, x->seq_len); /* 16+ */
    if (!fi_has_rank(x)) return fi_set_type(n, 0, x->elem);                          /* unknown */
    return fi_shape_emit_same(n, 0, x->elem, x->rank, x->dims, x);
}

/* -------------------------------------------------------------------- views */

/* Reshape's -1 when the rest is known or cancels: the input dims that a 0
 * copies cancel against themselves, so [batch, 12, 64] -> [0, -1] gives
 * [batch, 768] with batch unknown.  Returns the dim (unknown when the
 * remaining input dims are not all known); fails on a count that does not
 * divide. */
static fi_dim fi_shape_reshape_infer(fi_node *n, const fi_tensor *x, const fi_dim *od, int rank,
                                     int minus, const bool *copied) {
    int64_t in_rest = 1, out_rest = 1;
    int32_t sym = -1;
    for (int d = 0; d < x->rank; d++) {
        if (d < rank && copied[d]) continue;
        if (x->dims[d].v < 0) {
            if (sym < 0) sym = x->dims[d].sym >= 0 ? x->dims[d].sym : -2;
            continue;
        }
        if (__builtin_mul_overflow(in_rest, x->dims[d].v, &in_rest)) in_rest = -1;
    }
    if (sym != -1 || in_rest < 0) return fi_unknown_derived(sym >= 0 ? sym : -1);
    for (int d = 0; d < rank; d++)
        if (d != minus && !copied[d] && __builtin_mul_overflow(out_rest, od[d].v, &out_rest))
            out_rest = -1;
    if (out_rest <= 0) {
        fi_fail(n, "cannot infer the -1 dim: the other dims multiply to %lld", (long long)out_rest);
        return fi_known(0);
    }
    if (in_rest % out_rest) {
        fi_fail(n, "cannot reshape %lld elements into a shape whose known dims multiply to %lld",
                (long long)in_rest, (long long)out_rest);
        return fi_known(0);
    }
    return fi_known(in_rest / out_rest);
}

static int fi_shape_reshape(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x) return fi_fail(n, "needs a data input");
    bool attr_form = !fi_shape_since(n, 5);
    if (!attr_form && !fi_in(n, 1)) return fi_fail(n, "needs a shape input");
    fi_shape_list s = fi_shape_list_get(n, attr_form, "shape", 1);
    if (!s.present) return fi_fail(n, "needs a shape attribute");
    bool allowzero = fi_shape_since(n, 14) && fi_attr_int(n, "allowzero", 0) != 0;
    if (!s.known) {
        if (s.len_known < 0) return fi_set_type(n, 0, x->elem);
        if (s.len_known > FI_MAX_RANK)
            return fi_fail(n, "shape of length %lld", (long long)s.len_known);
        fi_dim od[FI_MAX_RANK];
        for (int64_t d = 0; d < s.len_known; d++) od[d] = fi_unknown_derived(fi_blame(s.from));
        return fi_set_shape(n, 0, x->elem, (int)s.len_known, od);
    }
    if (s.len > FI_MAX_RANK)
        return fi_fail(n, "shape of length %zu; roamc handles rank %d at most", s.len, FI_MAX_RANK);
    int rank = (int)s.len, minus = -1;
    fi_dim od[FI_MAX_RANK];
    bool copied[FI_MAX_RANK] = {false}, has_zero = false;
    for (int d = 0; d < rank; d++) {
        int64_t v = s.v[d];
        if (v == -1) {
            if (minus >= 0) return fi_fail(n, "the shape has more than one -1");
            minus = d;
            od[d] = fi_known(1);
        } else if (v < -1) {
            return fi_fail(n, "the shape has %lld at %d", (long long)v, d);
        } else if (v == 0 && !allowzero) {
            if (!fi_has_rank(x)) return fi_set_type(n, 0, x->elem);
            if (d >= x->rank)
                return fi_fail(n, "the shape copies dim %d (a 0) of a rank-%d input", d, x->rank);
            od[d] = x->dims[d];
            copied[d] = true;
        } else {
            if (v > FI_MAX_DIM) return fi_fail(n, "the shape has %lld at %d", (long long)v, d);
            has_zero |= v == 0;
            od[d] = fi_known(v);
        }
    }
    if (minus >= 0 && has_zero) return fi_fail(n, "the shape has both 0 (allowzero) and -1");
    if (minus >= 0) {
        if (!fi_has_rank(x))
            od[minus] = fi_unknown_derived(fi_blame(x));
        else
            od[minus] = fi_shape_reshape_infer(n, x, od, rank, minus, copied);
        if (fi_failed(n)) return -1;
    } else {
        int64_t in_c = fi_numel(x), out_c = fi_shape_count(rank, od);
        if (in_c >= 0 && out_c >= 0 && in_c != out_c)
            return fi_fail(n, "cannot reshape %lld elements into %lld", (long long)in_c,
                           (long long)out_c);
    }
    return fi_shape_emit_same(n, 0, x->elem, rank, od, x);
}

static int fi_shape_flatten(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x) return fi_fail(n, "needs an input");
    if (!fi_has_rank(x)) return fi_set_type(n, 0, x->elem);
    int64_t axis = fi_attr_int(n, "axis", 1);
    if (axis < 0 && fi_shape_since(n, 11)) axis += x->rank;
    if (axis < 0 || axis > x->rank)
        return fi_fail(n, "axis %lld out of range for rank %d",
                       (long long)fi_attr_int(n, "axis", 1), x->rank);
    fi_dim od[2] = {fi_known(1), fi_known(1)};
    for (int d = 0; d < x->rank; d++) od[d >= axis] = fi_dim_mul(n, od[d >= axis], x->dims[d]);
    if (fi_failed(n)) return -1;
    return fi_shape_emit_same(n, 0, x->elem, 2, od, x);
}

static int fi_shape_squeeze(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x) return fi_fail(n, "needs an input");
    fi_shape_list l = fi_shape_list_get(n, !fi_shape_since(n, 13), "axes", 1);
    if (!fi_has_rank(x)) return fi_set_type(n, 0, x->elem);
    bool drop[FI_MAX_RANK] = {false};
    if (l.present && !l.known) {
        /* the rank is known (each axis drops one dim), not which dims stay */
        if (l.len_known < 0 || l.len_known > x->rank) return fi_set_type(n, 0, x->elem);
        fi_dim od[FI_MAX_RANK];
        for (int d = 0; d < x->rank - l.len_known; d++)
            od[d] = fi_unknown_derived(fi_blame(l.from));
        return fi_set_shape(n, 0, x->elem, x->rank - (int)l.len_known, od);
    }
    if (l.present) {
        int axes[FI_SHAPE_ROOM];
        if (fi_shape_axes(n, l.v, l.len, x->rank, axes)) return -1;
        for (size_t i = 0; i < l.len; i++) {
            const fi_dim *d = &x->dims[axes[i]];
            if (d->v >= 0 && d->v != 1)
                return fi_fail(n, "cannot squeeze axis %d of size %lld", axes[i], (long long)d->v);
            drop[axes[i]] = true;
        }
    } else {
        /* without axes every 1 goes: an unknown dim might be 1 */
        for (int d = 0; d < x->rank; d++) {
            if (x->dims[d].v < 0) return fi_set_type(n, 0, x->elem);
            drop[d] = x->dims[d].v == 1;
        }
    }
    fi_dim od[FI_MAX_RANK];
    int r = 0;
    for (int d = 0; d < x->rank; d++)
        if (!drop[d]) od[r++] = x->dims[d];
    return fi_shape_emit_same(n, 0, x->elem, r, od, x);
}

static int fi_shape_unsqueeze(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x) return fi_fail(n, "needs an input");
    bool attr_form = !fi_shape_since(n, 13);
    fi_shape_list l = fi_shape_list_get(n, attr_form, "axes", 1);
    if (!l.present)
        return fi_fail(n, attr_form ? "needs an axes attribute" : "needs an axes input");
    if (!fi_has_rank(x)) return fi_set_type(n, 0, x->elem);
    if (!l.known) {
        if (l.len_known < 0) return fi_set_type(n, 0, x->elem);
        if (x->rank + l.len_known > FI_MAX_RANK)
            return fi_fail(n, "output would have rank %lld", (long long)(x->rank + l.len_known));
        fi_dim od[FI_MAX_RANK];
        for (int d = 0; d < x->rank + l.len_known; d++)
            od[d] = fi_unknown_derived(fi_blame(l.from));
        return fi_set_shape(n, 0, x->elem, x->rank + (int)l.len_known, od);
    }
    if ((int64_t)l.len + x->rank > FI_MAX_RANK)
        return fi_fail(n, "output would have rank %zu", l.len + (size_t)x->rank);
    int r = x->rank + (int)l.len, axes[FI_SHAPE_ROOM];
    if (fi_shape_axes(n, l.v, l.len, r, axes)) return -1;
    bool ins[FI_MAX_RANK] = {false};
    for (size_t i = 0; i < l.len; i++) ins[axes[i]] = true;
    fi_dim od[FI_MAX_RANK];
    for (int d = 0, k = 0; d < r; d++) od[d] = ins[d] ? fi_known(1) : x->dims[k++];
    return fi_shape_emit_same(n, 0, x->elem, r, od, x);
}

/* ------------------------------------------------------------ data movement */

static int fi_shape_transpose(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x) return fi_fail(n, "needs an input");
    if (!fi_has_rank(x)) return fi_set_type(n, 0, x->elem);
    const int64_t *perm;
    size_t len;
    int p[FI_SHAPE_ROOM];
    if (fi_attr_ints(n, "perm", &perm, &len)) {
        if (len != (size_t)x->rank)
            return fi_fail(n, "perm has %zu entries for rank %d", len, x->rank);
        if (fi_shape_axes(n, perm, len, x->rank, p)) return -1;
    } else {
        for (int d = 0; d < x->rank; d++) p[d] = x->rank - 1 - d;
    }
    fi_dim od[FI_MAX_RANK];
    fi_shape_axis ax[FI_MAX_RANK];
    int64_t stride[FI_MAX_RANK];
    fi_shape_strides(x, stride);
    for (int d = 0; d < x->rank; d++) {
        od[d] = x->dims[p[d]];
        ax[d] = (fi_shape_axis){0, 1, 0, stride[p[d]]};
    }
    return fi_shape_emit_map(n, 0, x->elem, x->rank, od, x, 0, ax);
}

static int fi_shape_concat(fi_node *n) {
    if (n->n_in == 0) return fi_fail(n, "needs at least one input");
    const fi_tensor *first = NULL;
    int32_t elem = 0;
    for (size_t i = 0; i < n->n_in; i++) {
        const fi_tensor *t = fi_in(n, i);
        if (!t) return fi_fail(n, "input %zu is missing", i);
        if (!elem) elem = t->elem;
        if (!first && fi_has_rank(t)) first = t;
    }
    if (!first) return fi_set_type(n, 0, elem);
    const Onnx__AttributeProto *a = fi_attr(n, "axis");
    if (!a && fi_shape_since(n, 4)) return fi_fail(n, "needs an axis attribute");
    int axis;
    if (first->rank == 0) return fi_fail(n, "cannot concatenate scalars");
    if (fi_axis(n, a ? a->i : 1, first->rank, &axis)) return -1;
    fi_dim od[FI_MAX_RANK];
    memcpy(od, first->dims, (size_t)first->rank * sizeof *od);
    od[axis] = fi_known(0);
    for (size_t i = 0; i < n->n_in; i++) {
        const fi_tensor *t = fi_in(n, i);
        if (!fi_has_rank(t)) {
            od[axis] = fi_unknown_derived(fi_blame(t));
            continue;
        }
        if (t->rank != first->rank)
            return fi_fail(n, "input %zu has rank %d, input 0 rank %d", i, t->rank, first->rank);
        for (int d = 0; d < t->rank; d++)
            od[d] = d == axis ? fi_dim_add(n, od[d], t->dims[d])
                              : fi_dim_merge(n, od[d], t->dims[d], "input dims");
        if (fi_failed(n)) return -1;
    }
    int64_t count = fi_shape_count(first->rank, od);
    fi_shape_buf b;
    bool all = true;
    for (size_t i = 0; i < n->n_in && all; i++)
        all = fi_shape_has_value(fi_in(n, i)) && fi_all_known(fi_in(n, i));
    if (!all || !fi_shape_buf_init(&b, elem, count)) {
        if (fi_set_shape(n, 0, elem, first->rank, od)) return -1;
        for (size_t i = 0; i < n->n_in; i++)
            if (fi_in(n, i)->n_const < 0) fi_shape_blame(n, 0, fi_in(n, i));
        return 0;
    }
    /* outer blocks of the dims before axis; each input gives a run of
     * dims[axis] * inner elements per block */
    int64_t outer = 1, inner = 1, pos = 0;
    for (int d = 0; d < axis; d++) outer *= od[d].v;
    for (int d = axis + 1; d < first->rank; d++) inner *= od[d].v;
    for (int64_t o = 0; o < outer; o++)
        for (size_t i = 0; i < n->n_in; i++) {
            const fi_tensor *t = fi_in(n, i);
            int64_t run = t->dims[axis].v * inner;
            for (int64_t e = 0; e < run && pos < count; e++)
                fi_shape_buf_put(&b, pos++, t, o * run + e);
        }
    return fi_shape_buf_emit(n, 0, elem, first->rank, od, &b);
}

/* Output k of a split: x restricted to [start, start + len) along axis. */
static int fi_shape_emit_part(fi_node *n, size_t k, const fi_tensor *x, int axis, int64_t start,
                              fi_dim len) {
    fi_dim od[FI_MAX_RANK];
    fi_shape_axis ax[FI_MAX_RANK];
    int64_t stride[FI_MAX_RANK];
    fi_shape_strides(x, stride);
    for (int d = 0; d < x->rank; d++) {
        od[d] = d == axis ? len : x->dims[d];
        ax[d] = (fi_shape_axis){d == axis ? start : 0, 1, 0, stride[d]};
    }
    return fi_shape_emit_map(n, k, x->elem, x->rank, od, x, 0, ax);
}

static int fi_shape_split(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x) return fi_fail(n, "needs an input");
    if (n->n_out == 0) return fi_fail(n, "has no outputs");
    for (size_t k = 0; k < n->n_out; k++) fi_set_type(n, k, x->elem);
    if (!fi_has_rank(x)) return 0;
    if (x->rank == 0) return fi_fail(n, "cannot split a scalar");
    int axis;
    if (fi_axis(n, fi_attr_int(n, "axis", 0), x->rank, &axis)) return -1;
    fi_dim dim = x->dims[axis];
    /* split lengths: input 1 in opset 1 and from 13, the attribute between */
    fi_shape_list l = {.len_known = -1};
    if (fi_shape_since(n, 13) || (n->opset == 1 && fi_in(n, 1)))
        l = fi_shape_list_get(n, false, NULL, 1);
    if (!l.present) l = fi_shape_list_get(n, true, "split", 0);
    size_t parts = n->n_out;
    if (l.present && l.len_known >= 0 && (size_t)l.len_known != parts)
        return fi_fail(n, "split has %lld lengths for %zu outputs", (long long)l.len_known, parts);
    if (l.present && !l.known) {
        for (size_t k = 0; k < parts; k++) {
            fi_dim len = fi_unknown_derived(fi_blame(l.from));
            if (fi_shape_emit_part(n, k, x, axis, 0, len)) return -1;
        }
        return 0;
    }
    int64_t start = 0;
    if (l.present) {
        int64_t sum = 0;
        for (size_t k = 0; k < parts; k++) {
            if (l.v[k] < 0 || l.v[k] > FI_MAX_DIM)
                return fi_fail(n, "split length %lld", (long long)l.v[k]);
            sum += l.v[k];
            if (sum > FI_MAX_DIM) return fi_fail(n, "split lengths add up beyond 2^62");
        }
        if (dim.v >= 0 && sum != dim.v)
            return fi_fail(n, "split lengths add up to %lld, the axis has %lld", (long long)sum,
                           (long long)dim.v);
        for (size_t k = 0; k < parts; k++) {
            if (fi_shape_emit_part(n, k, x, axis, start, fi_known(l.v[k]))) return -1;
            start += l.v[k];
        }
        return 0;
    }
    int64_t num = (int64_t)parts;
    bool uneven = false;
    if (fi_shape_since(n, 18) && fi_attr(n, "num_outputs")) {
        num = fi_attr_int(n, "num_outputs", 0);
        if (num != (int64_t)parts)
            return fi_fail(n, "num_outputs is %lld, the node has %zu outputs", (long long)num,
                           parts);
        uneven = true;
    }
    for (size_t k = 0; k < parts; k++) {
        fi_dim len = fi_dim_div_ceil(n, dim, num);
        if (dim.v >= 0) {
            if (!uneven && dim.v % num)
                return fi_fail(n, "cannot split %lld evenly into %lld parts", (long long)dim.v,
                               (long long)num);
            /* from 18 the last part takes what is left */
            if (k + 1 == parts) {
                if (dim.v - start < 0)
                    return fi_fail(n, "cannot split %lld into %lld parts of %lld", (long long)dim.v,
                                   (long long)num, (long long)len.v);
                len = fi_known(dim.v - start);
            }
        }
        if (fi_shape_emit_part(n, k, x, axis, start, len)) return -1;
        if (len.v >= 0) start += len.v;
    }
    return 0;
}

/* One axis of a slice: clamps start and end (after adding dim to negative
 * ones) as the spec says, and gives the output length.  dim must be known. */
static int64_t fi_shape_slice_axis(int64_t dim, int64_t *start, int64_t end, int64_t step) {
    int64_t s = *start, e = end;
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    if (step > 0) {
        s = s < 0 ? 0 : s > dim ? dim : s;
        e = e < 0 ? 0 : e > dim ? dim : e;
        *start = s;
        return e > s ? (e - s - 1) / step + 1 : 0;
    }
    s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
    e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
    *start = s;
    int64_t mag = step == INT64_MIN ? INT64_MAX : -step;
    return s > e ? (s - e - 1) / mag + 1 : 0;
}

/* A slice whose bounds are not all known: the rank stays, the sliced axes
 * become unknown (all of them when the axes themselves are unknown). */
static int fi_shape_slice_unknown(fi_node *n, const fi_tensor *x, const fi_shape_list *st,
                                  const fi_shape_list *en, const fi_shape_list *ax,
                                  const fi_shape_list *sp) {
    fi_dim od[FI_MAX_RANK];
    memcpy(od, x->dims, (size_t)x->rank * sizeof *od);
    const fi_tensor *why = !st->known   ? st->from
                           : !en->known ? en->from
                           : !ax->known ? ax->from
                                        : sp->from;
    bool hit[FI_MAX_RANK] = {false};
    if (ax->present && ax->known) {
        int axes[FI_SHAPE_ROOM];
        if (fi_shape_axes(n, ax->v, ax->len, x->rank, axes)) return -1;
        for (size_t i = 0; i < ax->len; i++) hit[axes[i]] = true;
    }
    int64_t n_axes = st->len_known >= 0 ? st->len_known : en->len_known;
    for (int d = 0; d < x->rank; d++) {
        if (!ax->known) hit[d] = ax->present || n_axes < 0 || d < n_axes;
        if (hit[d]) od[d] = fi_unknown_derived(fi_blame(why));
    }
    if (fi_set_shape(n, 0, x->elem, x->rank, od)) return -1;
    fi_shape_blame(n, 0, why);
    return 0;
}

static int fi_shape_slice(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x) return fi_fail(n, "needs a data input");
    bool attr_form = !fi_shape_since(n, 10);
    if (!attr_form && (!fi_in(n, 1) || !fi_in(n, 2)))
        return fi_fail(n, "needs starts and ends inputs");
    fi_shape_list st = fi_shape_list_get(n, attr_form, "starts", 1);
    fi_shape_list en = fi_shape_list_get(n, attr_form, "ends", 2);
    fi_shape_list ax = fi_shape_list_get(n, attr_form, "axes", 3);
    fi_shape_list sp =
        attr_form ? (fi_shape_list){.len_known = -1} : fi_shape_list_get(n, false, NULL, 4);
    if (!st.present || !en.present) return fi_fail(n, "needs starts and ends");
    if (!fi_has_rank(x)) return fi_set_type(n, 0, x->elem);
    fi_dim od[FI_MAX_RANK];
    memcpy(od, x->dims, (size_t)x->rank * sizeof *od);
    bool known = st.known && en.known && (!ax.present || ax.known) && (!sp.present || sp.known);
    if (!known) return fi_shape_slice_unknown(n, x, &st, &en, &ax, &sp);
    size_t len = st.len;
    if (en.len != len || (ax.present && ax.len != len) || (sp.present && sp.len != len))
        return fi_fail(n, "starts, ends, axes and steps differ in length");
    int axes[FI_SHAPE_ROOM];
    int64_t default_axes[FI_SHAPE_ROOM];
    if (len > FI_SHAPE_ROOM) return fi_fail(n, "%zu axes for rank %d", len, x->rank);
    for (size_t i = 0; i < len; i++) default_axes[i] = (int64_t)i;
    if (fi_shape_axes(n, ax.present ? ax.v : default_axes, len, x->rank, axes)) return -1;
    int64_t stride[FI_MAX_RANK];
    fi_shape_axis map[FI_MAX_RANK];
    fi_shape_strides(x, stride);
    for (int d = 0; d < x->rank; d++) map[d] = (fi_shape_axis){0, 1, 0, stride[d]};
    for (size_t i = 0; i < len; i++) {
        int d = axes[i];
        int64_t step = sp.present ? sp.v[i] : 1, s = st.v[i], e = en.v[i];
        if (step == 0) return fi_fail(n, "step 0 on axis %d", d);
        if (x->dims[d].v < 0) {
            /* x[0:BIG] keeps an unknown dim whole; anything else depends on it */
            bool whole = step == 1 && s == 0 && e >= FI_MAX_DIM;
            od[d] = whole ? x->dims[d] : fi_unknown_derived(x->dims[d].sym);
            continue;
        }
        od[d] = fi_known(fi_shape_slice_axis(x->dims[d].v, &s, e, step));
        map[d] = (fi_shape_axis){s, step, 0, stride[d]};
    }
    return fi_shape_emit_map(n, 0, x->elem, x->rank, od, x, 0, map);
}

/* Output k: x broadcast to dims od of rank r (Expand), or x repeated
 * (Tile: tile = true, od[d] a multiple of x's dim d). */
static int fi_shape_emit_spread(fi_node *n, const fi_tensor *x, int r, const fi_dim *od,
                                bool tile) {
    fi_shape_axis map[FI_MAX_RANK];
    int64_t stride[FI_MAX_RANK];
    fi_shape_strides(x, stride);
    for (int d = 0; d < r; d++) {
        int xd = d - (r - x->rank);
        int64_t len = xd >= 0 ? x->dims[xd].v : 1;
        if (xd < 0 || len == 1)
            map[d] = (fi_shape_axis){0, 0, 0, 0};
        else
            map[d] = (fi_shape_axis){0, 1, tile ? len : 0, stride[xd]};
    }
    return fi_shape_emit_map(n, 0, x->elem, r, od, x, 0, map);
}

static int fi_shape_expand(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0), *s = fi_in(n, 1);
    if (!x || !s) return fi_fail(n, "needs an input and a shape");
    const int64_t *v;
    size_t len;
    bool known = fi_in_ints(n, 1, &v, &len);
    int64_t slen = known ? (int64_t)len : fi_shape_len(s);
    if (!fi_has_rank(x) || slen < 0) return fi_set_type(n, 0, x->elem);
    if (slen > FI_MAX_RANK) return fi_fail(n, "shape of length %lld", (long long)slen);
    int r = x->rank > slen ? x->rank : (int)slen;
    fi_dim od[FI_MAX_RANK];
    for (int d = 0; d < r; d++) {
        int xd = d - (r - x->rank), sd = d - (r - (int)slen);
        fi_dim a = xd >= 0 ? x->dims[xd] : fi_known(1);
        fi_dim b = sd < 0 ? fi_known(1) : known ? fi_known(v[sd]) : fi_unknown_derived(fi_blame(s));
        if (known && sd >= 0 && (v[sd] < 0 || v[sd] > FI_MAX_DIM))
            return fi_fail(n, "shape has %lld at %d", (long long)v[sd], sd);
        /* an unknown shape entry is 1 or equal to x's dim: a known x dim
         * other than 1 wins either way */
        if (b.v < 0 && a.v >= 0 && a.v != 1)
            od[d] = a;
        else
            od[d] = fi_dim_broadcast(n, a, b);
    }
    if (fi_failed(n)) return -1;
    int rc = fi_shape_emit_spread(n, x, r, od, false);
    fi_shape_blame(n, 0, s);
    return rc;
}

static int fi_shape_tile(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x || !fi_in(n, 1)) return fi_fail(n, "needs an input and repeats");
    if (!fi_has_rank(x)) return fi_set_type(n, 0, x->elem);
    fi_dim od[FI_MAX_RANK];
    memcpy(od, x->dims, (size_t)x->rank * sizeof *od);
    if (!fi_shape_since(n, 6)) {
        /* Tile-1: `tiles` copies along one `axis`, both scalar inputs */
        int64_t tiles, axis;
        int a;
        if (!fi_in(n, 2)) return fi_fail(n, "needs an axis input");
        if (!fi_in_scalar(n, 2, &axis)) return fi_set_type(n, 0, x->elem);
        if (fi_axis(n, axis, x->rank, &a)) return -1;
        if (!fi_in_scalar(n, 1, &tiles))
            od[a] = fi_unknown_derived(fi_blame(fi_in(n, 1)));
        else if (tiles < 0)
            return fi_fail(n, "negative tiles %lld", (long long)tiles);
        else
            od[a] = fi_dim_mul(n, od[a], fi_known(tiles));
        if (fi_failed(n)) return -1;
        return fi_shape_emit_spread(n, x, x->rank, od, true);
    }
    const int64_t *v;
    size_t len;
    if (!fi_in_ints(n, 1, &v, &len)) {
        int64_t rl = fi_shape_len(fi_in(n, 1));
        if (rl >= 0 && rl != x->rank)
            return fi_fail(n, "repeats has %lld entries for rank %d", (long long)rl, x->rank);
        for (int d = 0; d < x->rank; d++)
            if (od[d].v != 0) od[d] = fi_unknown_derived(fi_blame(fi_in(n, 1)));
        return fi_set_shape(n, 0, x->elem, x->rank, od);
    }
    if (len != (size_t)x->rank)
        return fi_fail(n, "repeats has %zu entries for rank %d", len, x->rank);
    for (int d = 0; d < x->rank; d++) {
        if (v[d] < 0) return fi_fail(n, "negative repeat %lld on axis %d", (long long)v[d], d);
        od[d] = fi_dim_mul(n, od[d], fi_known(v[d]));
    }
    if (fi_failed(n)) return -1;
    return fi_shape_emit_spread(n, x, x->rank, od, true);
}

/* Pads: `paddings` attribute in opset 1, `pads` attribute until 10, the
 * pads input from 11, and the axes input (which dims they pad) from 18.
 * Negative pads crop. */
static int fi_shape_pad(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x) return fi_fail(n, "needs a data input");
    bool attr_form = !fi_shape_since(n, 11);
    fi_shape_list p =
        fi_shape_list_get(n, attr_form, fi_shape_since(n, 2) ? "pads" : "paddings", 1);
    if (!p.present) return fi_fail(n, "needs pads");
    if (!fi_has_rank(x)) return fi_set_type(n, 0, x->elem);
    fi_shape_list a = fi_shape_since(n, 18) ? fi_shape_list_get(n, false, NULL, 3)
                                            : (fi_shape_list){.len_known = -1};
    fi_dim od[FI_MAX_RANK];
    memcpy(od, x->dims, (size_t)x->rank * sizeof *od);
    int axes[FI_SHAPE_ROOM];
    size_t n_axes = (size_t)x->rank;
    if (a.present && a.known) {
        if (fi_shape_axes(n, a.v, a.len, x->rank, axes)) return -1;
        n_axes = a.len;
    } else {
        for (int d = 0; d < x->rank; d++) axes[d] = d;
    }
    if (!p.known || (a.present && !a.known)) {
        const fi_tensor *why = !p.known ? p.from : a.from;
        for (size_t i = 0; i < n_axes; i++) od[axes[i]] = fi_unknown_derived(fi_blame(why));
        return fi_set_shape(n, 0, x->elem, x->rank, od);
    }
    if (p.len != 2 * n_axes) return fi_fail(n, "%zu pads for %zu axes", p.len, n_axes);
    for (size_t i = 0; i < n_axes; i++) {
        int64_t b = p.v[i], e = p.v[i + n_axes], sum, r;
        if (__builtin_add_overflow(b, e, &sum) || sum < -FI_MAX_DIM || sum > FI_MAX_DIM)
            return fi_fail(n, "pads %lld, %lld out of range", (long long)b, (long long)e);
        fi_dim d = od[axes[i]];
        if (d.v < 0) {
            if (sum != 0) od[axes[i]] = fi_unknown_derived(d.sym);
            continue;
        }
        if (__builtin_add_overflow(d.v, sum, &r) || r > FI_MAX_DIM)
            return fi_fail(n, "pads %lld, %lld make axis %d of size %lld too large", (long long)b,
                           (long long)e, axes[i], (long long)d.v);
        if (r < 0)
            return fi_fail(n, "pads %lld, %lld leave axis %d of size %lld negative", (long long)b,
                           (long long)e, axes[i], (long long)d.v);
        od[axes[i]] = fi_known(r);
    }
    return fi_set_shape(n, 0, x->elem, x->rank, od);
}

/* Shape and value of CenterCropPad (18): the dims of `axes` become the
 * values of the shape input. */
static int fi_shape_center_crop_pad(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0), *s = fi_in(n, 1);
    if (!x || !s) return fi_fail(n, "needs an input and a shape");
    if (!fi_has_rank(x)) return fi_set_type(n, 0, x->elem);
    int axes[FI_SHAPE_ROOM];
    const int64_t *av;
    size_t n_axes = (size_t)x->rank;
    if (fi_attr_ints(n, "axes", &av, &n_axes)) {
        if (fi_shape_axes(n, av, n_axes, x->rank, axes)) return -1;
    } else {
        for (int d = 0; d < x->rank; d++) axes[d] = d;
    }
    const int64_t *v;
    size_t len;
    fi_dim od[FI_MAX_RANK];
    memcpy(od, x->dims, (size_t)x->rank * sizeof *od);
    bool known = fi_in_ints(n, 1, &v, &len);
    if (known && len != n_axes)
        return fi_fail(n, "shape has %zu entries for %zu axes", len, n_axes);
    for (size_t i = 0; i < n_axes; i++) {
        if (known && (v[i] < 0 || v[i] > FI_MAX_DIM))
            return fi_fail(n, "shape has %lld", (long long)v[i]);
        od[axes[i]] = known ? fi_known(v[i]) : fi_unknown_derived(fi_blame(s));
    }
    return fi_set_shape(n, 0, x->elem, x->rank, od);
}

/* ------------------------------------------------------ gathers and scatters */

static int fi_shape_gather(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0), *ix = fi_in(n, 1);
    if (!x || !ix) return fi_fail(n, "needs data and indices");
    if (!fi_has_rank(x) || !fi_has_rank(ix)) return fi_set_type(n, 0, x->elem);
    if (x->rank == 0) return fi_fail(n, "cannot gather from a scalar");
    int axis;
    if (fi_axis(n, fi_attr_int(n, "axis", 0), x->rank, &axis)) return -1;
    const int64_t *iv;
    size_t ilen;
    bool idx_known = fi_in_ints(n, 1, &iv, &ilen);
    int64_t dim = x->dims[axis].v;
    for (size_t i = 0; idx_known && dim >= 0 && i < ilen; i++)
        if (iv[i] < -dim || iv[i] >= dim)
            return fi_fail(n, "index %lld out of range for axis %d of size %lld", (long long)iv[i],
                           axis, (long long)dim);
    fi_dim od[FI_SHAPE_ROOM];
    int r = 0;
    for (int d = 0; d < axis; d++) od[r++] = x->dims[d];
    for (int d = 0; d < ix->rank; d++) od[r++] = ix->dims[d];
    for (int d = axis + 1; d < x->rank; d++) od[r++] = x->dims[d];
    int64_t count = fi_shape_count(r, od);
    fi_shape_buf b;
    if (!idx_known || !fi_shape_has_value(x) || !fi_all_known(x) || (int64_t)ilen != fi_numel(ix) ||
        !fi_shape_buf_init(&b, x->elem, count)) {
        if (fi_set_shape(n, 0, x->elem, r, od)) return -1;
        fi_shape_blame(n, 0, idx_known ? x : ix);
        return 0;
    }
    int64_t outer = 1, inner = 1, pos = 0;
    for (int d = 0; d < axis; d++) outer *= x->dims[d].v;
    for (int d = axis + 1; d < x->rank; d++) inner *= x->dims[d].v;
    for (int64_t o = 0; o < outer; o++)
        for (size_t j = 0; j < ilen; j++) {
            int64_t k = iv[j] < 0 ? iv[j] + dim : iv[j];
            for (int64_t e = 0; e < inner && pos < count; e++)
                fi_shape_buf_put(&b, pos++, x, (o * dim + k) * inner + e);
        }
    return fi_shape_buf_emit(n, 0, x->elem, r, od, &b);
}

/* GatherElements: the shape of the indices; the value when both are known. */
static int fi_shape_gather_elements(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0), *ix = fi_in(n, 1);
    if (!x || !ix) return fi_fail(n, "needs data and indices");
    if (!fi_has_rank(ix)) return fi_set_type(n, 0, x->elem);
    if (fi_has_rank(x) && x->rank != ix->rank)
        return fi_fail(n, "data has rank %d, indices rank %d", x->rank, ix->rank);
    int axis;
    if (fi_axis(n, fi_attr_int(n, "axis", 0), ix->rank, &axis)) return -1;
    const int64_t *iv;
    size_t ilen;
    int64_t count = fi_numel(ix);
    fi_shape_buf b;
    if (!fi_in_ints(n, 1, &iv, &ilen) || !fi_shape_has_value(x) || !fi_all_known(x) ||
        (int64_t)ilen != count || !fi_shape_buf_init(&b, x->elem, count))
        return fi_set_shape(n, 0, x->elem, ix->rank, ix->dims);
    int64_t xs[FI_MAX_RANK], is[FI_MAX_RANK];
    fi_shape_strides(x, xs);
    fi_shape_strides(ix, is);
    int64_t dim = x->dims[axis].v;
    for (int64_t i = 0; i < count; i++) {
        int64_t k = iv[i] < 0 ? iv[i] + dim : iv[i], si = 0, rest = i;
        if (k < 0 || k >= dim) {
            fi_shape_buf_drop(&b);
            return fi_fail(n, "index %lld out of range for axis %d of size %lld", (long long)iv[i],
                           axis, (long long)dim);
        }
        for (int d = 0; d < ix->rank; d++) {
            int64_t c = rest / is[d];
            rest %= is[d];
            if (d != axis && c >= x->dims[d].v) {
                fi_shape_buf_drop(&b);
                return fi_set_shape(n, 0, x->elem, ix->rank, ix->dims);
            }
            si += (d == axis ? k : c) * xs[d];
        }
        fi_shape_buf_put(&b, i, x, si);
    }
    return fi_shape_buf_emit(n, 0, x->elem, ix->rank, ix->dims, &b);
}

/* GatherND: indices.shape[:-1] + data.shape[batch_dims + indices.shape[-1]:]. */
static int fi_shape_gather_nd(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0), *ix = fi_in(n, 1);
    if (!x || !ix) return fi_fail(n, "needs data and indices");
    if (!fi_has_rank(x) || !fi_has_rank(ix)) return fi_set_type(n, 0, x->elem);
    int64_t b = fi_shape_since(n, 12) ? fi_attr_int(n, "batch_dims", 0) : 0;
    if (x->rank < 1 || ix->rank < 1) return fi_fail(n, "data and indices need rank 1 or more");
    if (b < 0 || b >= x->rank || b >= ix->rank)
        return fi_fail(n, "batch_dims %lld for ranks %d and %d", (long long)b, x->rank, ix->rank);
    int64_t k = ix->dims[ix->rank - 1].v;
    if (k < 0) return fi_set_type(n, 0, x->elem);
    if (k < 1 || k > x->rank - b)
        return fi_fail(n, "indices' last dim %lld for data of rank %d (batch_dims %lld)",
                       (long long)k, x->rank, (long long)b);
    fi_dim od[FI_SHAPE_ROOM];
    int r = 0;
    for (int d = 0; d < ix->rank - 1; d++)
        od[r++] = d < b ? fi_dim_merge(n, ix->dims[d], x->dims[d], "batch dims") : ix->dims[d];
    for (int64_t d = b + k; d < x->rank; d++) od[r++] = x->dims[d];
    if (fi_failed(n)) return -1;
    return fi_set_shape(n, 0, x->elem, r, od);
}

/* Scatter, ScatterElements, ScatterND: the shape of the data. */
static int fi_shape_scatter(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x || !fi_in(n, 1) || !fi_in(n, 2)) return fi_fail(n, "needs data, indices and updates");
    if (!fi_has_rank(x)) return fi_set_type(n, 0, x->elem);
    return fi_set_like(n, 0, x);
}

/* ---------------------------------------------------------------- same shape */

/* The input's type and shape, for inputs of rank min_rank or more. */
static int fi_shape_like_input(fi_node *n, int min_rank) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x) return fi_fail(n, "needs an input");
    if (!fi_has_rank(x)) return fi_set_type(n, 0, x->elem);
    if (x->rank < min_rank) return fi_fail(n, "needs rank %d or more, not %d", min_rank, x->rank);
    return fi_set_like(n, 0, x);
}

static int fi_shape_trilu(fi_node *n) {
    return fi_shape_like_input(n, 2);
}

/* ReverseSequence: batch_axis and time_axis are 0 and 1, in either order. */
static int fi_shape_reverse_sequence(fi_node *n) {
    int64_t b = fi_attr_int(n, "batch_axis", 1), t = fi_attr_int(n, "time_axis", 0);
    if ((b != 0 && b != 1) || (t != 0 && t != 1) || b == t)
        return fi_fail(n, "batch_axis %lld and time_axis %lld must be 0 and 1", (long long)b,
                       (long long)t);
    return fi_shape_like_input(n, 2);
}

static int fi_shape_eye_like(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x) return fi_fail(n, "needs an input");
    int32_t elem = (int32_t)fi_attr_int(n, "dtype", x->elem);
    if (!fi_has_rank(x)) return fi_set_type(n, 0, elem);
    if (x->rank != 2) return fi_fail(n, "needs rank 2, not %d", x->rank);
    return fi_set_shape(n, 0, elem, 2, x->dims);
}

/* ---------------------------------------------------------------- generators */

/* Range's length: max(ceil((limit - start) / delta), 0), exact in int64. */
static int64_t fi_shape_range_count_i(int64_t start, int64_t limit, int64_t delta) {
    uint64_t c = 0;
    if (delta > 0 && limit > start)
        c = ((uint64_t)limit - (uint64_t)start - 1) / (uint64_t)delta + 1;
    if (delta < 0 && start > limit)
        c = ((uint64_t)start - (uint64_t)limit - 1) / ((uint64_t)(-(delta + 1)) + 1) + 1;
    return c > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)c;
}

static int fi_shape_range(fi_node *n) {
    const fi_tensor *s = fi_in(n, 0), *l = fi_in(n, 1), *d = fi_in(n, 2);
    if (!s || !l || !d) return fi_fail(n, "needs start, limit and delta");
    int32_t elem = s->elem ? s->elem : l->elem ? l->elem : d->elem;
    for (size_t k = 0; k < 3; k++) {
        const fi_tensor *t = fi_in(n, k);
        if (fi_has_rank(t) && fi_numel(t) >= 0 && fi_numel(t) != 1)
            return fi_fail(n, "input %zu is not a scalar", k);
    }
    const double *fs, *fl, *fd;
    size_t len;
    bool known = fi_in_floats(n, 0, &fs, &len) && len == 1 && fi_in_floats(n, 1, &fl, &len) &&
                 len == 1 && fi_in_floats(n, 2, &fd, &len) && len == 1;
    if (!known) {
        int32_t why = fi_blame(s) >= 0 ? fi_blame(s) : fi_blame(l) >= 0 ? fi_blame(l) : fi_blame(d);
        /* bounds that come from data: a symbol the user can bind with --dim */
        fi_dim c = why >= 0 ? fi_unknown_derived(why) : fi_data_dim(n, "count", -1);
        if (fi_failed(n)) return -1;
        if (fi_set_shape(n, 0, elem, 1, &c)) return -1;
        if (n->out[0] && why >= 0) n->out[0]->blame = why;
        return 0;
    }
    fi_shape_buf b;
    if (!fi_is_float_type(elem)) {
        int64_t is = 0, il = 0, id = 0;
        fi_in_scalar(n, 0, &is);
        fi_in_scalar(n, 1, &il);
        fi_in_scalar(n, 2, &id);
        if (id == 0) return fi_fail(n, "delta is 0");
        int64_t count = fi_shape_range_count_i(is, il, id);
        if (count > FI_MAX_DIM)
            return fi_fail(n, "would have %lld elements, more than 2^62", (long long)count);
        fi_dim c = fi_known(count);
        if (!fi_shape_buf_init(&b, elem, count)) return fi_set_shape(n, 0, elem, 1, &c);
        for (int64_t i = 0, v = is; i < count; i++) {
            b.i[i] = v;
            if (i + 1 < count && __builtin_add_overflow(v, id, &v)) break;
        }
        return fi_shape_buf_emit(n, 0, elem, 1, &c, &b);
    }
    if (fd[0] == 0) return fi_fail(n, "delta is 0");
    double q = ceil((fl[0] - fs[0]) / fd[0]);
    if (isnan(q) || q > (double)FI_MAX_DIM)
        return fi_fail(n, "would have %g elements, more than 2^62", q);
    int64_t count = q > 0 ? (int64_t)q : 0;
    fi_dim c = fi_known(count);
    if (!fi_shape_buf_init(&b, elem, count)) return fi_set_shape(n, 0, elem, 1, &c);
    for (int64_t i = 0; i < count; i++) b.f[i] = fs[0] + (double)i * fd[0];
    return fi_shape_buf_emit(n, 0, elem, 1, &c, &b);
}

static int fi_shape_one_hot(fi_node *n) {
    const fi_tensor *ix = fi_in(n, 0), *dep = fi_in(n, 1), *vals = fi_in(n, 2);
    if (!ix || !dep || !vals) return fi_fail(n, "needs indices, depth and values");
    if (!fi_has_rank(ix)) return fi_set_type(n, 0, vals->elem);
    int r = ix->rank + 1, axis;
    if (r > FI_MAX_RANK) return fi_fail(n, "output would have rank %d", r);
    if (fi_axis(n, fi_attr_int(n, "axis", -1), r, &axis)) return -1;
    const double *dv;
    size_t len;
    fi_dim depth;
    if (fi_in_floats(n, 1, &dv, &len) && len == 1) {
        int64_t d = fi_double_to_int(dv[0]);
        if (d < 0 || d > FI_MAX_DIM) return fi_fail(n, "depth %lld", (long long)d);
        depth = fi_known(d);
    } else if (fi_has_rank(dep) && fi_numel(dep) >= 0 && fi_numel(dep) != 1) {
        return fi_fail(n, "depth is not a scalar");
    } else {
        depth = fi_unknown_derived(fi_blame(dep));
    }
    fi_dim od[FI_MAX_RANK];
    for (int d = 0, k = 0; d < r; d++) od[d] = d == axis ? depth : ix->dims[k++];
    return fi_set_shape(n, 0, vals->elem, r, od);
}

/* Compress: the slices where the condition holds.  With the condition
 * known the count is exact; otherwise it depends on data and is planned at
 * its upper bound, the axis length (or the condition's, when shorter). */
static int fi_shape_compress(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0), *c = fi_in(n, 1);
    if (!x || !c) return fi_fail(n, "needs an input and a condition");
    if (!fi_has_rank(x)) return fi_set_type(n, 0, x->elem);
    if (fi_has_rank(c) && c->rank != 1) return fi_fail(n, "condition has rank %d, not 1", c->rank);
    const Onnx__AttributeProto *a = fi_attr(n, "axis");
    int axis = -1;
    if (a && fi_axis(n, a->i, x->rank, &axis)) return -1;
    fi_dim od[FI_MAX_RANK];
    int r = 1;
    if (a) {
        memcpy(od, x->dims, (size_t)x->rank * sizeof *od);
        r = x->rank;
    }
    int64_t avail = a ? x->dims[axis].v : fi_numel(x);
    const int64_t *cv;
    size_t len;
    fi_dim count;
    if (fi_in_ints(n, 1, &cv, &len)) {
        int64_t k = 0, lim = avail >= 0 && (int64_t)len > avail ? avail : (int64_t)len;
        for (int64_t i = 0; i < lim; i++) k += cv[i] != 0;
        count = fi_known(k);
    } else {
        int64_t clen = fi_shape_len(c), bound = avail;
        if (clen >= 0 && (bound < 0 || clen < bound)) bound = clen;
        count = fi_data_dim(n, "count", bound);
        if (fi_failed(n)) return -1;
    }
    od[a ? axis : 0] = count;
    return fi_set_shape(n, 0, x->elem, r, od);
}

/* ------------------------------------------------------------------- table */

const fi_rule fi_rules_shape[] = {
    {"CenterCropPad", fi_shape_center_crop_pad},
    {"Compress", fi_shape_compress},
    {"Concat", fi_shape_concat},
    {"Constant", fi_shape_constant},
    {"ConstantOfShape", fi_shape_constant_of_shape},
    {"Expand", fi_shape_expand},
    {"EyeLike", fi_shape_eye_like},
    {"Flatten", fi_shape_flatten},
    {"Gather", fi_shape_gather},
    {"GatherElements", fi_shape_gather_elements},
    {"GatherND", fi_shape_gather_nd},
    {"Identity", fi_shape_identity},
    {"OneHot", fi_shape_one_hot},
    {"Pad", fi_shape_pad},
    {"Range", fi_shape_range},
    {"Reshape", fi_shape_reshape},
    {"ReverseSequence", fi_shape_reverse_sequence},
    {"Scatter", fi_shape_scatter},
    {"ScatterElements", fi_shape_scatter},
    {"ScatterND", fi_shape_scatter},
    {"Shape", fi_shape_shape},
    {"Size", fi_shape_size},
    {"Slice", fi_shape_slice},
    {"Split", fi_shape_split},
    {"Squeeze", fi_shape_squeeze},
    {"Tile", fi_shape_tile},
    {"Transpose", fi_shape_transpose},
    {"Trilu", fi_shape_trilu},
    {"Unsqueeze", fi_shape_unsqueeze},
    {NULL, NULL},
};
