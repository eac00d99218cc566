/* Shape inference rules, family nn (see infer.h): convolutions, pooling,
 * matrix products, Einsum, Resize/Upsample, the recurrent ops and the
 * quantization ops.
 *
 * Reading order: small helpers (attributes, output with blame) -> sliding
 * windows (one place computes every Conv/Pool output size) -> Conv family
 * -> pools -> ROI ops -> matrix products -> Einsum -> Resize/Upsample ->
 * layout ops -> recurrent ops -> quantization -> the table.
 *
 * Where ONNX's reference inference and ONNX Runtime disagree on a size, the
 * rule follows Runtime (the models run there): the pooling window rule of
 * ceil_mode, ConvTranspose with auto_pad SAME.  Each place says so.
 */
#include "infer.h"

#include <math.h>
#include <string.h>

/* onnx TensorProto.DataType values this family produces */
enum {
    FI_NN_FLOAT = 1,
    FI_NN_UINT8 = 2,
    FI_NN_INT32 = 6,
    FI_NN_INT64 = 7,
};

/* ------------------------------------------------------------ helpers */

/* Output k gets a type but no shape; blame names the symbol that hides
 * the shape, so that the loader's message can name the flag to set. */
static int fi_nn_type_only(fi_node *n, size_t k, int32_t elem, int32_t blame) {
    if (fi_set_type(n, k, elem)) return -1;
    if (k < n->n_out && n->out[k] && n->out[k]->rank < 0) n->out[k]->blame = blame;
    return 0;
}

static int32_t fi_nn_elem(const fi_tensor *t) {
    return t ? t->elem : 0;
}

/* A dim computed from an unknown one: unknown, depending on its symbol. */
static fi_dim fi_nn_derived(fi_node *n, fi_dim a) {
    return fi_dim_add(n, a, fi_known(0));
}

/* INTS attribute name into out[want]: dflt everywhere when absent; when
 * present it must have exactly want entries, each in [min, FI_MAX_DIM].
 * Returns 1 when present, 0 when absent, -1 after failing the node. */
static int fi_nn_ints(fi_node *n, const char *name, size_t want, int64_t dflt, int64_t min,
                      int64_t *out) {
    const int64_t *v;
    size_t len;
    if (!fi_attr_ints(n, name, &v, &len)) {
        for (size_t i = 0; i < want; i++) out[i] = dflt;
        return 0;
    }
    if (len != want)
        return fi_fail(n, "attribute %s has %zu values, expected %zu", name, len, want);
    for (size_t i = 0; i < want; i++) {
        if (v[i] < min || v[i] > FI_MAX_DIM)
            return fi_fail(n, "attribute %s[%zu] = %lld is out of range", name, i, (long long)v[i]);
        out[i] = v[i];
    }
    return 1;
}

/* The rank of t, required to be at least min (and known): -1 after
 * failing, 0 when unknown (callers leave outputs unknown), else the rank. */
static int fi_nn_rank_at_least(fi_node *n, const fi_tensor *t, int min, const char *what) {
    if (!fi_has_rank(t)) return 0;
    if (t->rank < min)
        return fi_fail(n, "%s has rank %d; at least %d expected", what, t->rank, min);
    return t->rank;
}

/* t's dim d when its rank is known, else unknown blamed on t. */
static fi_dim fi_nn_dim_or_unknown(const fi_tensor *t, int d) {
    if (fi_has_rank(t) && d >= 0 && d < t->rank) return t->dims[d];
    return fi_unknown(fi_blame(t));
}

/* ----------------------------------------------------- sliding windows */

enum fi_nn_pad { FI_NN_NOTSET, FI_NN_SAME_UPPER, FI_NN_SAME_LOWER, FI_NN_VALID };

/* What a Conv/Pool node says about its window, per spatial dim.  k[i] < 0:
 * the kernel extent is unknown (taken from a weight of unknown shape). */
typedef struct fi_nn_win {
    int ns; /* spatial dims */
    int64_t k[FI_MAX_RANK], s[FI_MAX_RANK], d[FI_MAX_RANK];
    int64_t pads[2 * FI_MAX_RANK]; /* begins then ends */
    int pad_mode;
    bool ceil_mode;
} fi_nn_win;

static int fi_nn_auto_pad(fi_node *n, int *mode) {
    char buf[32];
    const char *s = fi_attr_string(n, "auto_pad", "NOTSET", buf, sizeof buf);
    if (!strcmp(s, "NOTSET") || !s[0])
        *mode = FI_NN_NOTSET;
    else if (!strcmp(s, "SAME_UPPER"))
        *mode = FI_NN_SAME_UPPER;
    else if (!strcmp(s, "SAME_LOWER"))
        *mode = FI_NN_SAME_LOWER;
    else if (!strcmp(s, "VALID"))
        *mode = FI_NN_VALID;
    else
        return fi_fail(n, "auto_pad '%s' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID", s);
    return 0;
}

/* Reads strides, dilations (when has_dil), pads, auto_pad and ceil_mode
 * (when has_ceil) for ns spatial dims; w->k must be filled by the caller. */
static int fi_nn_read_win(fi_node *n, fi_nn_win *w, bool has_dil, bool has_ceil) {
    size_t ns = (size_t)w->ns;
    if (fi_nn_ints(n, "strides", ns, 1, 1, w->s) < 0) return -1;
    if (has_dil && fi_nn_ints(n, "dilations", ns, 1, 1, w->d) < 0) return -1;
    for (size_t i = 0; !has_dil && i < ns; i++) w->d[i] = 1;
    if (fi_nn_ints(n, "pads", 2 * ns, 0, 0, w->pads) < 0) return -1;
    if (fi_nn_auto_pad(n, &w->pad_mode)) return -1;
    w->ceil_mode = has_ceil && fi_attr_int(n, "ceil_mode", 0) != 0;
    return 0;
}

/* (k - 1) * d + 1, or -1 when it would exceed FI_MAX_DIM. */
static int64_t fi_nn_extent(int64_t k, int64_t d) {
    int64_t e;
    if (__builtin_mul_overflow(k - 1, d, &e) || e >= FI_MAX_DIM) return -1;
    return e + 1;
}

/* Output size of a forward window (Conv, pools) along spatial dim i.
 * SAME gives ceil(in / stride) (ORT pads until that holds, whatever the
 * kernel); VALID is NOTSET with zero pads.  ceil_mode drops a last window
 * that would start in the end padding, as ORT and PyTorch do (the ONNX
 * formula alone would keep it). */
static fi_dim fi_nn_window_out(fi_node *n, const fi_nn_win *w, int i, fi_dim in) {
    int64_t s = w->s[i];
    if (w->pad_mode == FI_NN_SAME_UPPER || w->pad_mode == FI_NN_SAME_LOWER)
        return s == 1 ? in : fi_dim_div_ceil(n, in, s);
    if (w->k[i] < 0 || in.v < 0) return fi_nn_derived(n, in);
    int64_t pb = 0, pe = 0;
    if (w->pad_mode == FI_NN_NOTSET) {
        pb = w->pads[i];
        pe = w->pads[w->ns + i];
    }
    int64_t ext = fi_nn_extent(w->k[i], w->d[i]);
    if (ext < 0) {
        fi_fail(n, "kernel %lld with dilation %lld is too large", (long long)w->k[i],
                (long long)w->d[i]);
        return fi_known(0);
    }
    fi_dim total = fi_dim_add(n, fi_dim_add(n, in, fi_known(pb)), fi_known(pe));
    if (fi_failed(n)) return fi_known(0);
    if (total.v < ext) {
        fi_fail(
            n,
            "spatial dim %d: input %lld with pads %lld+%lld is smaller than the kernel extent %lld",
            i, (long long)in.v, (long long)pb, (long long)pe, (long long)ext);
        return fi_known(0);
    }
    int64_t span = total.v - ext, out = span / s + 1;
    if (w->ceil_mode) {
        out = span / s + (span % s != 0) + 1;
        if ((out - 1) * s >= in.v + pb) out--;
    }
    return fi_known(out);
}

/* The N and C dims plus every windowed spatial dim of x into dims. */
static int fi_nn_window_dims(fi_node *n, const fi_nn_win *w, const fi_tensor *x, fi_dim c,
                             fi_dim *dims) {
    dims[0] = x->dims[0];
    dims[1] = c;
    for (int i = 0; i < w->ns; i++) dims[2 + i] = fi_nn_window_out(n, w, i, x->dims[2 + i]);
    return fi_failed(n) ? -1 : 0;
}

/* ------------------------------------------------------------ Conv */

/* Spatial rank of a Conv-like node: from x, else w, else kernel_shape;
 * -1 when nothing tells (outputs stay unknown), -2 after failing. */
static int fi_nn_conv_ns(fi_node *n, const fi_tensor *x, const fi_tensor *w) {
    int rx = fi_nn_rank_at_least(n, x, 3, "input X");
    int rw = fi_nn_rank_at_least(n, w, 3, "weight W");
    if (rx < 0 || rw < 0) return -2;
    if (rx && rw && rx != rw) {
        fi_fail(n, "input X has rank %d but weight W rank %d", rx, rw);
        return -2;
    }
    if (rx) return rx - 2;
    if (rw) return rw - 2;
    const int64_t *v;
    size_t len;
    if (fi_attr_ints(n, "kernel_shape", &v, &len) && len > 0 && len <= FI_MAX_RANK - 2)
        return (int)len;
    return -1;
}

/* kernel_shape, else the weight's dims from 2 on (unknown ones: -1). */
static int fi_nn_conv_kernel(fi_node *n, const fi_tensor *w, fi_nn_win *win) {
    int got = fi_nn_ints(n, "kernel_shape", (size_t)win->ns, -1, 1, win->k);
    if (got < 0) return -1;
    for (int i = 0; i < win->ns; i++) {
        fi_dim kd = fi_nn_dim_or_unknown(w, 2 + i);
        if (got == 0)
            win->k[i] = kd.v;
        else if (kd.v >= 0 && kd.v != win->k[i])
            return fi_fail(n, "kernel_shape[%d] = %lld but the weight has %lld", i,
                           (long long)win->k[i], (long long)kd.v);
    }
    return 0;
}

/* Output spatial dim i of ConvTranspose (ORT's rules): output_shape wins;
 * SAME pads the full result down to in * stride (never pads negatively);
 * VALID is no padding. */
static fi_dim fi_nn_convt_out(fi_node *n, const fi_nn_win *w, int i, fi_dim in,
                              const int64_t *adj) {
    if (w->k[i] < 0 || in.v < 0) return fi_nn_derived(n, in);
    int64_t ext = fi_nn_extent(w->k[i], w->d[i]);
    if (ext < 0) {
        fi_fail(n, "kernel %lld with dilation %lld is too large", (long long)w->k[i],
                (long long)w->d[i]);
        return fi_known(0);
    }
    if (in.v == 0) {
        fi_fail(n, "spatial dim %d of the input is 0", i);
        return fi_known(0);
    }
    fi_dim full = fi_dim_mul(n, fi_known(in.v - 1), fi_known(w->s[i]));
    full = fi_dim_add(n, fi_dim_add(n, full, fi_known(adj[i])), fi_known(ext));
    if (fi_failed(n)) return fi_known(0);
    if (w->pad_mode == FI_NN_SAME_UPPER || w->pad_mode == FI_NN_SAME_LOWER) {
        fi_dim target = fi_dim_mul(n, in, fi_known(w->s[i]));
        return target.v < full.v ? target : full;
    }
    if (w->pad_mode == FI_NN_VALID) return full;
    return fi_dim_sub(n, full, fi_dim_add(n, fi_known(w->pads[i]), fi_known(w->pads[w->ns + i])));
}

/* Conv, ConvInteger, QLinearConv (transpose false) and ConvTranspose:
 * x [N, C, D...], w [M, C/group, K...] (transposed: [C, M/group, K...]),
 * optional bias b [M]; output k 0 of type elem. */
static int fi_nn_conv_core(fi_node *n, const fi_tensor *x, const fi_tensor *w, const fi_tensor *b,
                           int32_t elem, bool transpose) {
    int ns = fi_nn_conv_ns(n, x, w);
    if (ns == -2) return -1;
    if (ns < 0) return fi_nn_type_only(n, 0, elem, fi_blame(x));
    int64_t group = fi_attr_int(n, "group", 1);
    if (group < 1 || group > FI_MAX_DIM)
        return fi_fail(n, "group %lld must be at least 1", (long long)group);
    fi_nn_win win = {.ns = ns};
    if (fi_nn_conv_kernel(n, w, &win) || fi_nn_read_win(n, &win, true, false)) return -1;
    /* x of unknown rank: the weight still gives the rank and channels */
    fi_tensor xu = {.rank = -1};
    fi_dim xd[FI_MAX_RANK];
    if (!fi_has_rank(x)) {
        for (int d = 0; d < ns + 2; d++) xd[d] = fi_unknown(fi_blame(x));
        xu.rank = ns + 2;
        xu.dims = xd;
        x = &xu;
    }
    /* channels: x's C against w, and the output channels */
    fi_dim wc = fi_nn_dim_or_unknown(w, transpose ? 0 : 1),
           wm = fi_nn_dim_or_unknown(w, transpose ? 1 : 0);
    fi_dim c_need = transpose ? wc : fi_dim_mul(n, wc, fi_known(group));
    fi_dim_merge(n, x->dims[1], c_need,
                 transpose ? "input channels and the weight's dim 0"
                           : "input channels and weight channels x group");
    fi_dim m = transpose ? fi_dim_mul(n, wm, fi_known(group)) : wm;
    if (m.v < 0 && !fi_has_rank(w)) m = fi_unknown(fi_blame(w));
    if (b && fi_has_rank(b)) {
        if (b->rank != 1) return fi_fail(n, "bias B has rank %d; 1 expected", b->rank);
        m = fi_dim_merge(n, m, b->dims[0], "output channels and bias length");
    }
    if (fi_failed(n)) return -1;
    fi_dim dims[FI_MAX_RANK];
    if (!transpose) {
        if (fi_nn_window_dims(n, &win, x, m, dims)) return -1;
        return fi_set_shape(n, 0, elem, x->rank, dims);
    }
    int64_t adj[FI_MAX_RANK], oshape[FI_MAX_RANK + 2];
    if (fi_nn_ints(n, "output_padding", (size_t)ns, 0, 0, adj) < 0) return -1;
    const int64_t *os;
    size_t os_len;
    bool has_os = fi_attr_ints(n, "output_shape", &os, &os_len);
    if (has_os) {
        /* ORT reads the last ns entries: the spatial shape, or N, C first */
        if (os_len != (size_t)ns && os_len != (size_t)ns + 2)
            return fi_fail(n, "output_shape has %zu values for %d spatial dims", os_len, ns);
        if (fi_nn_ints(n, "output_shape", os_len, 0, 0, oshape) < 0) return -1;
    }
    dims[0] = x->dims[0];
    dims[1] = m;
    for (int i = 0; i < ns; i++)
        dims[2 + i] = has_os ? fi_known(oshape[os_len - (size_t)ns + (size_t)i])
                             : fi_nn_convt_out(n, &win, i, x->dims[2 + i], adj);
    if (fi_failed(n)) return -1;
    return fi_set_shape(n, 0, elem, x->rank, dims);
}

static int fi_nn_conv(fi_node *n) {
    if (n->n_in < 2) return fi_fail(n, "expects inputs X and W");
    return fi_nn_conv_core(n, fi_in(n, 0), fi_in(n, 1), fi_in(n, 2), fi_nn_elem(fi_in(n, 0)),
                           false);
}

static int fi_nn_conv_transpose(fi_node *n) {
    if (n->n_in < 2) return fi_fail(n, "expects inputs X and W");
    return fi_nn_conv_core(n, fi_in(n, 0), fi_in(n, 1), fi_in(n, 2), fi_nn_elem(fi_in(n, 0)), true);
}

/* x, w, x_zero_point, w_zero_point -> INT32 */
static int fi_nn_conv_integer(fi_node *n) {
    if (n->n_in < 2) return fi_fail(n, "expects inputs x and w");
    return fi_nn_conv_core(n, fi_in(n, 0), fi_in(n, 1), NULL, FI_NN_INT32, false);
}

/* x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B: y has y_zp's type */
static int fi_nn_qlinear_conv(fi_node *n) {
    if (n->n_in < 8) return fi_fail(n, "expects 8 or 9 inputs, has %zu", n->n_in);
    int32_t elem = fi_nn_elem(fi_in(n, 7));
    if (!elem) elem = fi_nn_elem(fi_in(n, 0));
    return fi_nn_conv_core(n, fi_in(n, 0), fi_in(n, 3), fi_in(n, 8), elem, false);
}

/* --------------------------------------------------------------- pools */

/* MaxPool, AveragePool, LpPool: ceil_mode and dilations exist from the
 * opsets the caller gives; MaxPool's second output (Indices) is INT64. */
static int fi_nn_pool(fi_node *n, int64_t ceil_since, int64_t dil_since) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x) return fi_fail(n, "expects input X");
    int r = fi_nn_rank_at_least(n, x, 3, "input X");
    if (r < 0) return -1;
    if (r == 0) {
        if (fi_nn_type_only(n, 0, x->elem, fi_blame(x))) return -1;
        return fi_nn_type_only(n, 1, FI_NN_INT64, fi_blame(x));
    }
    fi_nn_win win = {.ns = r - 2};
    if (!fi_attr(n, "kernel_shape")) return fi_fail(n, "attribute kernel_shape is required");
    if (fi_nn_ints(n, "kernel_shape", (size_t)win.ns, 1, 1, win.k) < 0) return -1;
    if (fi_nn_read_win(n, &win, n->opset >= dil_since, n->opset >= ceil_since)) return -1;
    fi_dim dims[FI_MAX_RANK];
    if (fi_nn_window_dims(n, &win, x, x->dims[1], dims)) return -1;
    if (fi_set_shape(n, 0, x->elem, r, dims)) return -1;
    return fi_set_shape(n, 1, FI_NN_INT64, r, dims);
}

static int fi_nn_max_pool(fi_node *n) {
    return fi_nn_pool(n, 10, 10);
}
static int fi_nn_average_pool(fi_node *n) {
    return fi_nn_pool(n, 10, 19);
}
static int fi_nn_lp_pool(fi_node *n) {
    return fi_nn_pool(n, 18, 18);
}

/* GlobalAveragePool, GlobalMaxPool, GlobalLpPool: [N, C, 1, ...]. */
static int fi_nn_global_pool(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x) return fi_fail(n, "expects input X");
    int r = fi_nn_rank_at_least(n, x, 2, "input X");
    if (r <= 0) return r < 0 ? -1 : fi_nn_type_only(n, 0, x->elem, fi_blame(x));
    fi_dim dims[FI_MAX_RANK];
    for (int d = 0; d < r; d++) dims[d] = d < 2 ? x->dims[d] : fi_known(1);
    return fi_set_shape(n, 0, x->elem, r, dims);
}

/* MaxUnpool: X [N, C, D...], I like X, optional output_shape (a value). */
static int fi_nn_max_unpool(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0), *os = fi_in(n, 2);
    if (!x || !fi_in(n, 1)) return fi_fail(n, "expects inputs X and I");
    int r = fi_nn_rank_at_least(n, x, 3, "input X");
    if (r < 0) return -1;
    if (os) {
        const int64_t *v;
        size_t len;
        if (!fi_in_ints(n, 2, &v, &len)) {
            /* rank from X or from output_shape's length; dims unknown */
            int rank = r ? r
                       : (fi_has_rank(os) && os->rank == 1 && os->dims[0].v >= 0)
                           ? (int)os->dims[0].v
                           : -1;
            if (rank < 0 || rank > FI_MAX_RANK) return fi_nn_type_only(n, 0, x->elem, fi_blame(os));
            fi_dim dims[FI_MAX_RANK];
            for (int d = 0; d < rank; d++) dims[d] = fi_unknown(fi_blame(os));
            return fi_set_shape(n, 0, x->elem, rank, dims);
        }
        if (r && len != (size_t)r)
            return fi_fail(n, "output_shape has %zu values for an input of rank %d", len, r);
        if (len > FI_MAX_RANK) return fi_fail(n, "output_shape has %zu values", len);
        fi_dim dims[FI_MAX_RANK];
        for (size_t d = 0; d < len; d++) {
            if (v[d] < 0)
                return fi_fail(n, "output_shape[%zu] = %lld is negative", d, (long long)v[d]);
            dims[d] = fi_known(v[d]);
        }
        return fi_set_shape(n, 0, x->elem, (int)len, dims);
    }
    if (r == 0) return fi_nn_type_only(n, 0, x->elem, fi_blame(x));
    fi_nn_win win = {.ns = r - 2};
    if (!fi_attr(n, "kernel_shape")) return fi_fail(n, "attribute kernel_shape is required");
    if (fi_nn_ints(n, "kernel_shape", (size_t)win.ns, 1, 1, win.k) < 0 ||
        fi_nn_read_win(n, &win, false, false))
        return -1;
    fi_dim dims[FI_MAX_RANK];
    dims[0] = x->dims[0];
    dims[1] = x->dims[1];
    for (int i = 0; i < win.ns; i++) {
        fi_dim in = x->dims[2 + i];
        if (in.v < 0) {
            dims[2 + i] = fi_nn_derived(n, in);
            continue;
        }
        if (in.v == 0) return fi_fail(n, "spatial dim %d of X is 0", i);
        fi_dim o = fi_dim_add(n, fi_dim_mul(n, fi_known(in.v - 1), fi_known(win.s[i])),
                              fi_known(win.k[i]));
        dims[2 + i] =
            fi_dim_sub(n, o, fi_dim_add(n, fi_known(win.pads[i]), fi_known(win.pads[win.ns + i])));
    }
    if (fi_failed(n)) return -1;
    return fi_set_shape(n, 0, x->elem, r, dims);
}

/* ------------------------------------------------------------- ROI ops */

/* [num_rois, C, h, w] from X [N, C, H, W] and rois [num_rois, cols]. */
static int fi_nn_roi_out(fi_node *n, const fi_tensor *x, const fi_tensor *rois, int64_t cols,
                         int64_t h, int64_t w) {
    if (h < 1 || w < 1 || h > FI_MAX_DIM || w > FI_MAX_DIM)
        return fi_fail(n, "output size %lld x %lld is out of range", (long long)h, (long long)w);
    if (fi_has_rank(x) && x->rank != 4)
        return fi_fail(n, "input X has rank %d; 4 expected", x->rank);
    if (fi_has_rank(rois) && rois->rank != 2)
        return fi_fail(n, "rois has rank %d; 2 expected", rois->rank);
    if (fi_has_rank(rois)) fi_dim_merge(n, rois->dims[1], fi_known(cols), "rois columns");
    fi_dim dims[4] = {fi_nn_dim_or_unknown(rois, 0), fi_nn_dim_or_unknown(x, 1), fi_known(h),
                      fi_known(w)};
    const fi_tensor *bi = fi_in(n, 2);
    if (cols == 4 && fi_has_rank(bi)) {
        if (bi->rank != 1) return fi_fail(n, "batch_indices has rank %d; 1 expected", bi->rank);
        dims[0] = fi_dim_merge(n, dims[0], bi->dims[0], "number of rois and of batch_indices");
    }
    if (fi_failed(n)) return -1;
    return fi_set_shape(n, 0, fi_nn_elem(x), 4, dims);
}

static int fi_nn_max_roi_pool(fi_node *n) {
    if (n->n_in < 2 || !fi_in(n, 0) || !fi_in(n, 1)) return fi_fail(n, "expects inputs X and rois");
    int64_t ps[2] = {0, 0};
    if (!fi_attr(n, "pooled_shape")) return fi_fail(n, "attribute pooled_shape is required");
    if (fi_nn_ints(n, "pooled_shape", 2, 1, 1, ps) < 0) return -1;
    return fi_nn_roi_out(n, fi_in(n, 0), fi_in(n, 1), 5, ps[0], ps[1]);
}

static int fi_nn_roi_align(fi_node *n) {
    if (n->n_in < 3 || !fi_in(n, 0) || !fi_in(n, 1) || !fi_in(n, 2))
        return fi_fail(n, "expects inputs X, rois and batch_indices");
    return fi_nn_roi_out(n, fi_in(n, 0), fi_in(n, 1), 4, fi_attr_int(n, "output_height", 1),
                         fi_attr_int(n, "output_width", 1));
}

/* ------------------------------------------------------ matrix products */

/* Numpy matmul of a and b (1-D operands promoted then dropped, batch dims
 * broadcast) into output 0 of type elem. */
static int fi_nn_matmul_core(fi_node *n, const fi_tensor *a, const fi_tensor *b, int32_t elem) {
    if (!a || !b) return fi_fail(n, "expects two matrix inputs");
    if (!fi_has_rank(a) || !fi_has_rank(b))
        return fi_nn_type_only(n, 0, elem, fi_has_rank(a) ? fi_blame(b) : fi_blame(a));
    if (a->rank == 0 || b->rank == 0) return fi_fail(n, "a matrix input is a scalar");
    fi_dim ad[FI_MAX_RANK + 1], bd[FI_MAX_RANK + 1];
    int ra = a->rank, rb = b->rank;
    memcpy(ad, a->dims, (size_t)ra * sizeof *ad);
    memcpy(bd, b->dims, (size_t)rb * sizeof *bd);
    if (ra == 1) { /* [K] -> [1, K] */
        ad[1] = ad[0];
        ad[0] = fi_known(1);
        ra = 2;
    }
    if (rb == 1) bd[rb++] = fi_known(1); /* [K] -> [K, 1] */
    fi_dim_merge(n, ad[ra - 1], bd[rb - 2], "inner dims");
    int batch = (ra > rb ? ra : rb) - 2;
    fi_dim dims[FI_MAX_RANK + 2];
    for (int i = 0; i < batch; i++) {
        int ia = i - (batch - (ra - 2)), ib = i - (batch - (rb - 2));
        fi_dim da = ia >= 0 ? ad[ia] : fi_known(1), db = ib >= 0 ? bd[ib] : fi_known(1);
        dims[i] = fi_dim_broadcast(n, da, db);
    }
    int r = batch;
    if (a->rank > 1) dims[r++] = ad[ra - 2];
    if (b->rank > 1) dims[r++] = bd[rb - 1];
    if (fi_failed(n)) return -1;
    return fi_set_shape(n, 0, elem, r, dims);
}

static int fi_nn_matmul(fi_node *n) {
    return fi_nn_matmul_core(n, fi_in(n, 0), fi_in(n, 1), fi_nn_elem(fi_in(n, 0)));
}

/* A, B, a_zero_point, b_zero_point -> INT32 */
static int fi_nn_matmul_integer(fi_node *n) {
    return fi_nn_matmul_core(n, fi_in(n, 0), fi_in(n, 1), FI_NN_INT32);
}

/* a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp: y has y_zp's type */
static int fi_nn_qlinear_matmul(fi_node *n) {
    if (n->n_in < 8) return fi_fail(n, "expects 8 inputs, has %zu", n->n_in);
    int32_t elem = fi_nn_elem(fi_in(n, 7));
    if (!elem) elem = fi_nn_elem(fi_in(n, 0));
    return fi_nn_matmul_core(n, fi_in(n, 0), fi_in(n, 3), elem);
}

/* Gemm: op(A) [M, K] x op(B) [K, N] (+ C, broadcast to [M, N]). */
static int fi_nn_gemm(fi_node *n) {
    const fi_tensor *a = fi_in(n, 0), *b = fi_in(n, 1), *c = fi_in(n, 2);
    if (!a || !b) return fi_fail(n, "expects inputs A and B");
    if (fi_has_rank(a) && a->rank != 2)
        return fi_fail(n, "input A has rank %d; 2 expected", a->rank);
    if (fi_has_rank(b) && b->rank != 2)
        return fi_fail(n, "input B has rank %d; 2 expected", b->rank);
    bool ta = fi_attr_int(n, "transA", 0) != 0, tb = fi_attr_int(n, "transB", 0) != 0;
    fi_dim m = fi_nn_dim_or_unknown(a, ta ? 1 : 0), ka = fi_nn_dim_or_unknown(a, ta ? 0 : 1);
    fi_dim kb = fi_nn_dim_or_unknown(b, tb ? 1 : 0), nn = fi_nn_dim_or_unknown(b, tb ? 0 : 1);
    fi_dim_merge(n, ka, kb, "inner dims");
    if (fi_has_rank(c)) {
        /* C broadcasts one way: each of its dims is 1 or the output's */
        if (c->rank > 2) return fi_fail(n, "input C has rank %d; at most 2 expected", c->rank);
        fi_dim out[2] = {m, nn};
        for (int d = 0; d < c->rank; d++) {
            fi_dim cd = c->dims[d];
            int o = 2 - c->rank + d;
            if (cd.v == 1 || cd.v < 0) continue;
            out[o] = fi_dim_merge(n, out[o], cd, "C and the product");
        }
        m = out[0];
        nn = out[1];
    }
    if (fi_failed(n)) return -1;
    fi_dim dims[2] = {m, nn};
    return fi_set_shape(n, 0, fi_nn_elem(a), 2, dims);
}

/* -------------------------------------------------------------- Einsum */

#define FI_NN_LABELS 52
#define FI_NN_EQ_MAX 1024

/* A label's slot, uppercase first: slot order is ASCII order, which is the
 * order of the implicit output (ONNX's reference, numpy). */
static int fi_nn_label(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return 26 + (c - 'a');
    return -1;
}

/* A character of the file for a message: control bytes print as '?'. */
static char fi_nn_printable(char c) {
    return c >= 32 && c < 127 ? c : '?';
}

typedef struct fi_nn_einsum {
    fi_dim ldim[FI_NN_LABELS];
    bool lset[FI_NN_LABELS];
    int count[FI_NN_LABELS];
    int32_t lblame; /* the first input of unknown rank's blame */
    fi_dim edim[FI_MAX_RANK];
    int erank;      /* ellipsis dims known so far; -1: no ellipsis seen */
    bool e_unknown; /* an operand with an ellipsis has unknown rank */
} fi_nn_einsum;

/* One term of the left-hand side against its operand t (rank maybe unknown). */
static int fi_nn_einsum_term(fi_node *n, fi_nn_einsum *e, const char *term, size_t len,
                             const fi_tensor *t, size_t k) {
    int letters = 0, ellipses = 0;
    for (size_t i = 0; i < len; i++) {
        if (term[i] == '.') {
            if (i + 2 >= len || term[i + 1] != '.' || term[i + 2] != '.')
                return fi_fail(n, "equation: operand %zu has a broken ellipsis", k);
            ellipses++;
            i += 2;
        } else if (fi_nn_label(term[i]) >= 0)
            letters++;
        else
            return fi_fail(n, "equation: '%c' is not a letter", fi_nn_printable(term[i]));
    }
    if (ellipses > 1) return fi_fail(n, "equation: operand %zu has more than one ellipsis", k);
    if (!fi_has_rank(t)) {
        if (ellipses) e->e_unknown = true;
        if (e->lblame < 0) e->lblame = fi_blame(t);
        for (size_t i = 0; i < len; i++)
            if (fi_nn_label(term[i]) >= 0) e->count[fi_nn_label(term[i])]++;
        return 0;
    }
    int ne = t->rank - letters;
    if (ellipses ? ne < 0 : ne != 0)
        return fi_fail(n, "equation: operand %zu has rank %d but its term names %d dims", k,
                       t->rank, letters);
    int d = 0;
    for (size_t i = 0; i < len; i++) {
        if (term[i] == '.') {
            /* every ellipsis stands for as many dims (the spec; ORT refuses
             * others); their dims broadcast */
            if (e->erank >= 0 && ne != e->erank)
                return fi_fail(n,
                               "equation: the ellipsis of operand %zu stands for %d dims, an "
                               "earlier one for %d",
                               k, ne, e->erank);
            for (int j = 0; j < ne; j++)
                e->edim[j] = e->erank >= 0 ? fi_dim_broadcast(n, e->edim[j], t->dims[d + j])
                                           : t->dims[d + j];
            e->erank = ne;
            d += ne;
            i += 2;
            continue;
        }
        int l = fi_nn_label(term[i]);
        e->count[l]++;
        e->ldim[l] = e->lset[l] ? fi_dim_broadcast(n, e->ldim[l], t->dims[d]) : t->dims[d];
        e->lset[l] = true;
        d++;
    }
    return fi_failed(n) ? -1 : 0;
}

static int fi_nn_einsum_rule(fi_node *n) {
    char raw[FI_NN_EQ_MAX + 1], eq[FI_NN_EQ_MAX + 1];
    const Onnx__AttributeProto *at = fi_attr(n, "equation");
    if (!at) return fi_fail(n, "attribute equation is required");
    if (at->s.len > FI_NN_EQ_MAX)
        return fi_fail(n, "equation is longer than %d characters", FI_NN_EQ_MAX);
    fi_attr_string(n, "equation", "", raw, sizeof raw);
    size_t len = 0;
    for (size_t i = 0; raw[i]; i++)
        if (raw[i] != ' ') eq[len++] = raw[i];
    eq[len] = '\0';
    const char *arrow = strstr(eq, "->");
    size_t lhs_len = arrow ? (size_t)(arrow - eq) : len;
    fi_nn_einsum e = {.erank = -1, .lblame = -1};
    size_t k = 0, start = 0;
    for (size_t i = 0; i <= lhs_len; i++) {
        if (i < lhs_len && eq[i] != ',') continue;
        if (k >= n->n_in)
            return fi_fail(n, "equation has more operands than the node's %zu inputs", n->n_in);
        if (!fi_in(n, k)) return fi_fail(n, "input %zu is missing", k);
        if (fi_nn_einsum_term(n, &e, eq + start, i - start, fi_in(n, k), k)) return -1;
        k++;
        start = i + 1;
    }
    if (k != n->n_in)
        return fi_fail(n, "equation has %zu operands but the node %zu inputs", k, n->n_in);
    int32_t elem = fi_nn_elem(fi_in(n, 0));
    fi_dim dims[FI_MAX_RANK];
    int r = 0;
    if (arrow) {
        const char *rhs = arrow + 2;
        bool seen[FI_NN_LABELS] = {0}, ell = false;
        for (size_t i = 0; rhs[i]; i++) {
            if (rhs[i] == '.') {
                if (ell || strncmp(rhs + i, "...", 3) != 0)
                    return fi_fail(n, "equation: bad ellipsis in the output");
                ell = true;
                i += 2;
                if (e.e_unknown) return fi_nn_type_only(n, 0, elem, e.lblame);
                for (int j = 0; j < e.erank && r < FI_MAX_RANK; j++) dims[r++] = e.edim[j];
                continue;
            }
            int l = fi_nn_label(rhs[i]);
            if (l < 0) return fi_fail(n, "equation: '%c' is not a letter", fi_nn_printable(rhs[i]));
            if (seen[l] || !e.count[l])
                return fi_fail(n, "equation: output label '%c' is repeated or in no input", rhs[i]);
            seen[l] = true;
            if (r >= FI_MAX_RANK)
                return fi_fail(n, "equation: output has more than %d dims", FI_MAX_RANK);
            dims[r++] = e.lset[l] ? e.ldim[l] : fi_unknown(e.lblame);
        }
    } else {
        if (e.e_unknown) return fi_nn_type_only(n, 0, elem, e.lblame);
        for (int j = 0; j < e.erank; j++) dims[r++] = e.edim[j];
        for (int l = 0; l < FI_NN_LABELS; l++) {
            if (e.count[l] != 1) continue;
            if (r >= FI_MAX_RANK)
                return fi_fail(n, "equation: output has more than %d dims", FI_MAX_RANK);
            dims[r++] = e.lset[l] ? e.ldim[l] : fi_unknown(e.lblame);
        }
    }
    return fi_set_shape(n, 0, elem, r, dims);
}

/* ------------------------------------------------------ Resize, Upsample */

/* floor(in * scale) in single precision, as ORT and ONNX's reference
 * compute it (a double product can round the other way). */
static fi_dim fi_nn_scale_dim(fi_node *n, fi_dim in, double scale) {
    if (!(scale > 0)) {
        fi_fail(n, "scale %g is not positive", scale);
        return fi_known(0);
    }
    if ((float)scale == 1.0f) return in;
    if (in.v < 0) return fi_nn_derived(n, in);
    float f = floorf((float)in.v * (float)scale);
    if (!(f < 4.6e18f)) {
        fi_fail(n, "dim %lld x scale %g is out of range", (long long)in.v, scale);
        return fi_known(0);
    }
    return fi_known((int64_t)f);
}

/* Whether input k is given: present and not known to be empty (Resize
 * treats an empty tensor as absent).  -1: present, emptiness unknown. */
static int fi_nn_given(const fi_node *n, size_t k) {
    const fi_tensor *t = fi_in(n, k);
    if (!t) return 0;
    if (t->n_const == 0) return 0;
    int64_t c = fi_numel(t);
    return c == 0 ? 0 : c > 0 ? 1 : -1;
}

/* Resize-18's axes (normalized, no repeats) into axes; all dims before. */
static int fi_nn_resize_axes(fi_node *n, int r, int *axes, int *count) {
    const int64_t *v;
    size_t len;
    if (n->opset < 18 || !fi_attr_ints(n, "axes", &v, &len)) {
        for (int d = 0; d < r; d++) axes[d] = d;
        *count = r;
        return 0;
    }
    if (len > (size_t)r) return fi_fail(n, "axes has %zu values for rank %d", len, r);
    bool seen[FI_MAX_RANK] = {0};
    for (size_t i = 0; i < len; i++) {
        if (fi_axis(n, v[i], r, &axes[i])) return -1;
        if (seen[axes[i]]) return fi_fail(n, "axis %d repeated in axes", axes[i]);
        seen[axes[i]] = true;
    }
    *count = (int)len;
    return 0;
}

/* keep_aspect_ratio_policy (opset 18): 0 stretch, 1 not_larger, 2 not_smaller. */
static int fi_nn_resize_policy(fi_node *n, int *policy) {
    char buf[32];
    const char *s = "stretch";
    if (n->opset >= 18)
        s = fi_attr_string(n, "keep_aspect_ratio_policy", "stretch", buf, sizeof buf);
    if (!strcmp(s, "stretch"))
        *policy = 0;
    else if (!strcmp(s, "not_larger"))
        *policy = 1;
    else if (!strcmp(s, "not_smaller"))
        *policy = 2;
    else
        return fi_fail(n, "keep_aspect_ratio_policy '%s' is not stretch, not_larger or not_smaller",
                       s);
    return 0;
}

/* Output dims from sizes (known values v[0..count) for axes): stretch
 * takes them; the other policies scale every axis by one factor, the min
 * (not_larger) or max (not_smaller) of sizes/in, and round half away. */
static int fi_nn_resize_sizes(fi_node *n, const fi_tensor *x, const int *axes, int count,
                              const int64_t *v, int policy, fi_dim *dims) {
    float scale = policy == 1 ? INFINITY : 0.0f;
    for (int i = 0; i < count; i++) {
        if (v[i] < 0 || v[i] > FI_MAX_DIM)
            return fi_fail(n, "sizes[%d] = %lld is out of range", i, (long long)v[i]);
        fi_dim in = x->dims[axes[i]];
        if (policy == 0) {
            dims[axes[i]] = fi_known(v[i]);
            continue;
        }
        if (in.v == 0) return fi_fail(n, "keep_aspect_ratio_policy on axis %d of size 0", axes[i]);
        if (in.v < 0) {
            /* the common factor depends on every resized input dim */
            for (int j = 0; j < count; j++) dims[axes[j]] = fi_unknown(in.sym);
            return 0;
        }
        float s = (float)v[i] / (float)in.v;
        scale = policy == 1 ? fminf(scale, s) : fmaxf(scale, s);
    }
    for (int i = 0; policy != 0 && i < count; i++) {
        float f = roundf(scale * (float)x->dims[axes[i]].v);
        if (!(f >= 0 && f < 4.6e18f)) return fi_fail(n, "resized dim %d is out of range", axes[i]);
        dims[axes[i]] = fi_known((int64_t)f);
    }
    return 0;
}

/* Output dims of axes from input k (sizes when is_sizes, else scales);
 * unknown values leave those dims unknown, blamed on the input. */
static int fi_nn_resize_from(fi_node *n, const fi_tensor *x, size_t k, bool is_sizes,
                             const int *axes, int count, int policy, fi_dim *dims) {
    const fi_tensor *t = fi_in(n, k);
    size_t len;
    const int64_t *iv;
    const double *fv;
    bool known = is_sizes ? fi_in_ints(n, k, &iv, &len) : fi_in_floats(n, k, &fv, &len);
    if (!known) {
        for (int i = 0; i < count; i++) {
            fi_dim in = x->dims[axes[i]];
            dims[axes[i]] = fi_unknown(fi_blame(t) >= 0 ? fi_blame(t) : in.sym);
        }
        return 0;
    }
    if (len != (size_t)count)
        return fi_fail(n, "%s has %zu values for %d resized axes", is_sizes ? "sizes" : "scales",
                       len, count);
    if (is_sizes) return fi_nn_resize_sizes(n, x, axes, count, iv, policy, dims);
    if (policy != 0)
        return fi_fail(n, "scales cannot be used with keep_aspect_ratio_policy other than stretch");
    for (int i = 0; i < count; i++) dims[axes[i]] = fi_nn_scale_dim(n, x->dims[axes[i]], fv[i]);
    return fi_failed(n) ? -1 : 0;
}

/* Resize: X, scales (opset 10); X, roi, scales, sizes (11 on; an empty
 * tensor stands for an absent one; 18 adds axes and the policy).  The roi
 * of tf_crop_and_resize does not change the output size in ORT. */
static int fi_nn_resize(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x) return fi_fail(n, "expects input X");
    size_t ks = n->opset < 11 ? 1 : 2, kz = 3;
    int gs = fi_nn_given(n, ks), gz = n->opset < 11 ? 0 : fi_nn_given(n, kz);
    if (!fi_has_rank(x)) return fi_nn_type_only(n, 0, x->elem, fi_blame(x));
    int r = x->rank, axes[FI_MAX_RANK], count = 0, policy = 0;
    if (fi_nn_resize_axes(n, r, axes, &count) || fi_nn_resize_policy(n, &policy)) return -1;
    fi_dim dims[FI_MAX_RANK];
    memcpy(dims, x->dims, (size_t)r * sizeof *dims);
    if (gs == 1 && gz == 1) return fi_fail(n, "both scales and sizes are given");
    if (gs == 0 && gz == 0) return fi_fail(n, "neither scales nor sizes is given");
    if (gz == 1 || (gz == -1 && gs == 0)) {
        if (fi_nn_resize_from(n, x, kz, true, axes, count, policy, dims)) return -1;
    } else if (gs == 1 || (gs == -1 && gz == 0)) {
        if (fi_nn_resize_from(n, x, ks, false, axes, count, policy, dims)) return -1;
    } else {
        /* both present, neither known to be the empty one */
        int32_t blame =
            fi_blame(fi_in(n, kz)) >= 0 ? fi_blame(fi_in(n, kz)) : fi_blame(fi_in(n, ks));
        for (int i = 0; i < count; i++) dims[axes[i]] = fi_unknown(blame);
    }
    return fi_set_shape(n, 0, x->elem, r, dims);
}

/* Upsample: scales attribute (7, 8), scales input (9 on). */
static int fi_nn_upsample(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x) return fi_fail(n, "expects input X");
    if (!fi_has_rank(x)) return fi_nn_type_only(n, 0, x->elem, fi_blame(x));
    int r = x->rank;
    fi_dim dims[FI_MAX_RANK];
    if (n->opset >= 9) {
        if (!fi_in(n, 1)) return fi_fail(n, "expects input scales");
        int axes[FI_MAX_RANK];
        for (int d = 0; d < r; d++) axes[d] = d;
        memcpy(dims, x->dims, (size_t)r * sizeof *dims);
        if (fi_nn_resize_from(n, x, 1, false, axes, r, 0, dims)) return -1;
        return fi_set_shape(n, 0, x->elem, r, dims);
    }
    const float *s;
    size_t len;
    if (!fi_attr_floats(n, "scales", &s, &len)) return fi_fail(n, "attribute scales is required");
    if (len != (size_t)r) return fi_fail(n, "scales has %zu values for rank %d", len, r);
    for (int d = 0; d < r; d++) dims[d] = fi_nn_scale_dim(n, x->dims[d], s[d]);
    if (fi_failed(n)) return -1;
    return fi_set_shape(n, 0, x->elem, r, dims);
}

/* ------------------------------------------------------------ layout ops */

/* DepthToSpace (to_space) and SpaceToDepth on [N, C, H, W]. */
static int fi_nn_depth_space(fi_node *n, bool to_space) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x) return fi_fail(n, "expects input");
    int64_t b = fi_attr_int(n, "blocksize", -1);
    if (b < 1 || b > (1 << 20))
        return fi_fail(n, "blocksize %lld is missing or out of range", (long long)b);
    if (!fi_has_rank(x)) return fi_nn_type_only(n, 0, x->elem, fi_blame(x));
    if (x->rank != 4) return fi_fail(n, "input has rank %d; 4 expected", x->rank);
    fi_dim dims[4] = {x->dims[0]}, bb = fi_known(b * b);
    if (to_space) {
        if (x->dims[1].v > 0 && x->dims[1].v % (b * b))
            return fi_fail(n, "channels %lld are not a multiple of blocksize^2 = %lld",
                           (long long)x->dims[1].v, (long long)(b * b));
        dims[1] = fi_dim_div_floor(n, x->dims[1], bb.v);
        dims[2] = fi_dim_mul(n, x->dims[2], fi_known(b));
        dims[3] = fi_dim_mul(n, x->dims[3], fi_known(b));
    } else {
        for (int d = 2; d < 4; d++)
            if (x->dims[d].v > 0 && x->dims[d].v % b)
                return fi_fail(n, "dim %d = %lld is not a multiple of blocksize %lld", d,
                               (long long)x->dims[d].v, (long long)b);
        dims[1] = fi_dim_mul(n, x->dims[1], bb);
        dims[2] = fi_dim_div_floor(n, x->dims[2], b);
        dims[3] = fi_dim_div_floor(n, x->dims[3], b);
    }
    if (fi_failed(n)) return -1;
    return fi_set_shape(n, 0, x->elem, 4, dims);
}

static int fi_nn_depth_to_space(fi_node *n) {
    return fi_nn_depth_space(n, true);
}
static int fi_nn_space_to_depth(fi_node *n) {
    return fi_nn_depth_space(n, false);
}

/* Same type and shape as input 0 (LRN). */
static int fi_nn_like_input(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x) return fi_fail(n, "expects an input");
    if (!fi_has_rank(x)) return fi_nn_type_only(n, 0, x->elem, fi_blame(x));
    return fi_set_like(n, 0, x);
}

/* GridSample: X [N, C, D...], grid [N, D_out..., r - 2] -> [N, C, D_out...]. */
static int fi_nn_grid_sample(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0), *g = fi_in(n, 1);
    if (!x || !g) return fi_fail(n, "expects inputs X and grid");
    int rx = fi_nn_rank_at_least(n, x, 3, "input X"), rg = fi_nn_rank_at_least(n, g, 3, "grid");
    if (rx < 0 || rg < 0) return -1;
    if (!rg) return fi_nn_type_only(n, 0, x->elem, fi_blame(g));
    if (rx && rx != rg) return fi_fail(n, "X has rank %d but grid rank %d", rx, rg);
    fi_dim_merge(n, g->dims[rg - 1], fi_known(rg - 2), "grid's last dim and the spatial rank");
    fi_dim dims[FI_MAX_RANK];
    dims[0] = fi_dim_merge(n, fi_nn_dim_or_unknown(x, 0), g->dims[0], "batch dims of X and grid");
    dims[1] = fi_nn_dim_or_unknown(x, 1);
    for (int d = 2; d < rg; d++) dims[d] = g->dims[d - 1];
    if (fi_failed(n)) return -1;
    return fi_set_shape(n, 0, x->elem, rg, dims);
}

/* Col2Im: input [N, C * prod(block_shape), L], image_shape and
 * block_shape values -> [N, C, image_shape...]. */
static int fi_nn_col2im(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x || !fi_in(n, 1) || !fi_in(n, 2))
        return fi_fail(n, "expects input, image_shape and block_shape");
    if (fi_has_rank(x) && x->rank != 3) return fi_fail(n, "input has rank %d; 3 expected", x->rank);
    const int64_t *img, *blk;
    size_t ni, nb;
    bool ki = fi_in_ints(n, 1, &img, &ni), kb = fi_in_ints(n, 2, &blk, &nb);
    if (ki && kb && ni != nb)
        return fi_fail(n, "image_shape has %zu values, block_shape %zu", ni, nb);
    size_t ns = ki ? ni : kb ? nb : 0;
    const fi_tensor *is = fi_in(n, 1);
    if (!ki && !kb && fi_has_rank(is) && is->rank == 1 && is->dims[0].v >= 0)
        ns = (size_t)is->dims[0].v;
    if (ns == 0 || ns + 2 > FI_MAX_RANK) {
        if (ki || kb) return fi_fail(n, "image_shape has %zu values", ns);
        return fi_nn_type_only(n, 0, x->elem, fi_blame(is));
    }
    fi_dim dims[FI_MAX_RANK];
    dims[0] = fi_nn_dim_or_unknown(x, 0);
    dims[1] = fi_unknown(kb ? fi_blame(x) : fi_blame(fi_in(n, 2)));
    if (kb && fi_has_rank(x)) {
        int64_t prod = 1;
        for (size_t i = 0; i < nb; i++)
            if (blk[i] < 1 || __builtin_mul_overflow(prod, blk[i], &prod) || prod > FI_MAX_DIM)
                return fi_fail(n, "block_shape[%zu] = %lld is out of range", i, (long long)blk[i]);
        if (x->dims[1].v > 0 && x->dims[1].v % prod)
            return fi_fail(n, "input dim 1 = %lld is not a multiple of prod(block_shape) = %lld",
                           (long long)x->dims[1].v, (long long)prod);
        dims[1] = fi_dim_div_floor(n, x->dims[1], prod);
    }
    for (size_t i = 0; i < ns; i++) {
        if (ki && (img[i] < 0 || img[i] > FI_MAX_DIM))
            return fi_fail(n, "image_shape[%zu] = %lld is out of range", i, (long long)img[i]);
        dims[2 + i] = ki ? fi_known(img[i]) : fi_unknown(fi_blame(is));
    }
    if (fi_failed(n)) return -1;
    return fi_set_shape(n, 0, x->elem, (int)ns + 2, dims);
}

/* ------------------------------------------------------ recurrent ops */

/* RNN (1 gate), GRU (3), LSTM (4): X [seq, batch, input] (layout 1, from
 * opset 14: [batch, seq, input]) -> Y [seq, dirs, batch, hidden] (layout 1:
 * [batch, seq, dirs, hidden]), Y_h and Y_c [dirs, batch, hidden] (layout 1:
 * [batch, dirs, hidden]). */
static int fi_nn_rnn_core(fi_node *n, int64_t gates) {
    const fi_tensor *x = fi_in(n, 0), *w = fi_in(n, 1), *rr = fi_in(n, 2);
    if (!x || !w || !rr) return fi_fail(n, "expects inputs X, W and R");
    char buf[32];
    const char *dir = fi_attr_string(n, "direction", "forward", buf, sizeof buf);
    int64_t dirs = !strcmp(dir, "bidirectional")                          ? 2
                   : (!strcmp(dir, "forward") || !strcmp(dir, "reverse")) ? 1
                                                                          : -1;
    if (dirs < 0) return fi_fail(n, "direction '%s' is not forward, reverse or bidirectional", dir);
    int64_t layout = n->opset >= 14 ? fi_attr_int(n, "layout", 0) : 0;
    if (layout != 0 && layout != 1)
        return fi_fail(n, "layout %lld is not 0 or 1", (long long)layout);
    for (int k = 1; k < 3; k++) {
        const fi_tensor *t = fi_in(n, (size_t)k);
        if (fi_has_rank(t) && t->rank != 3)
            return fi_fail(n, "input %d has rank %d; 3 expected", k, t->rank);
    }
    if (fi_has_rank(x) && x->rank != 3)
        return fi_fail(n, "input X has rank %d; 3 expected", x->rank);
    /* hidden_size, else R's last dim (R is [dirs, gates * hidden, hidden]) */
    fi_dim hidden = fi_nn_dim_or_unknown(rr, 2);
    const Onnx__AttributeProto *hs = fi_attr(n, "hidden_size");
    if (hs) {
        if (hs->i < 1 || hs->i > FI_MAX_DIM)
            return fi_fail(n, "hidden_size %lld is out of range", (long long)hs->i);
        hidden = fi_dim_merge(n, fi_known(hs->i), hidden, "hidden_size and R's last dim");
    }
    fi_dim_merge(n, fi_nn_dim_or_unknown(w, 1), fi_dim_mul(n, hidden, fi_known(gates)),
                 "W's dim 1 and gates x hidden_size");
    fi_dim_merge(n, fi_nn_dim_or_unknown(w, 0), fi_known(dirs),
                 "W's dim 0 and the number of directions");
    if (fi_failed(n)) return -1;
    int32_t elem = fi_nn_elem(x);
    fi_dim seq = fi_nn_dim_or_unknown(x, layout ? 1 : 0),
           batch = fi_nn_dim_or_unknown(x, layout ? 0 : 1);
    fi_dim nd = fi_known(dirs);
    fi_dim y[4] = {seq, nd, batch, hidden}, y1[4] = {batch, seq, nd, hidden};
    fi_dim h[3] = {nd, batch, hidden}, h1[3] = {batch, nd, hidden};
    if (fi_set_shape(n, 0, elem, 4, layout ? y1 : y)) return -1;
    for (size_t k = 1; k < n->n_out && k < (gates == 4 ? 3u : 2u); k++)
        if (fi_set_shape(n, k, elem, 3, layout ? h1 : h)) return -1;
    return 0;
}

static int fi_nn_rnn(fi_node *n) {
    return fi_nn_rnn_core(n, 1);
}
static int fi_nn_gru(fi_node *n) {
    return fi_nn_rnn_core(n, 3);
}
static int fi_nn_lstm(fi_node *n) {
    return fi_nn_rnn_core(n, 4);
}

/* -------------------------------------------------------- quantization */

/* y like x; type: output_dtype (21 on), else y_zero_point's, else UINT8. */
static int fi_nn_quantize_linear(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x || !fi_in(n, 1)) return fi_fail(n, "expects inputs x and y_scale");
    int32_t elem = (int32_t)(n->opset >= 21 ? fi_attr_int(n, "output_dtype", 0) : 0);
    if (!elem) elem = fi_nn_elem(fi_in(n, 2));
    if (!elem && !fi_in(n, 2)) elem = FI_NN_UINT8;
    if (!fi_has_rank(x)) return fi_nn_type_only(n, 0, elem, fi_blame(x));
    return fi_set_shape(n, 0, elem, x->rank, x->dims);
}

/* y like x; FLOAT before opset 19, x_scale's type from 19 on. */
static int fi_nn_dequantize_linear(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x || !fi_in(n, 1)) return fi_fail(n, "expects inputs x and x_scale");
    int32_t elem = n->opset >= 19 ? fi_nn_elem(fi_in(n, 1)) : FI_NN_FLOAT;
    if (!fi_has_rank(x)) return fi_nn_type_only(n, 0, elem, fi_blame(x));
    return fi_set_shape(n, 0, elem, x->rank, x->dims);
}

/* y (UINT8, like x), y_scale (FLOAT scalar), y_zero_point (UINT8 scalar). */
static int fi_nn_dynamic_quantize_linear(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x) return fi_fail(n, "expects input x");
    if (fi_has_rank(x) ? fi_set_shape(n, 0, FI_NN_UINT8, x->rank, x->dims)
                       : fi_nn_type_only(n, 0, FI_NN_UINT8, fi_blame(x)))
        return -1;
    if (fi_set_shape(n, 1, FI_NN_FLOAT, 0, NULL)) return -1;
    return fi_set_shape(n, 2, FI_NN_UINT8, 0, NULL);
}

/* ------------------------------------------- Det, signal processing, text */

/* A scalar input's value, or -1 (unknown, or not a non-negative integer). */
static int64_t fi_nn_scalar_value(fi_node *n, size_t k) {
    int64_t v;
    return fi_in_scalar(n, k, &v) && v >= 0 && v <= FI_MAX_DIM ? v : -1;
}

/* A dim from a scalar input's value: known, or unknown blamed on it. */
static fi_dim fi_nn_scalar_dim(fi_node *n, size_t k) {
    int64_t v = fi_nn_scalar_value(n, k);
    return v >= 0 ? fi_known(v) : fi_unknown(fi_blame(fi_in(n, k)));
}

/* Det (11): X [*, M, M] -> [*]. */
static int fi_nn_det(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x) return fi_fail(n, "expects input X");
    if (!fi_has_rank(x)) return fi_set_type(n, 0, x->elem);
    if (x->rank < 2) return fi_fail(n, "X needs rank >= 2 ([*, M, M]), has %d", x->rank);
    fi_dim_merge(n, x->dims[x->rank - 2], x->dims[x->rank - 1],
                 "the two last dims (a square matrix)");
    if (fi_failed(n)) return -1;
    return fi_set_shape(n, 0, x->elem, x->rank - 2, x->dims);
}

/* HannWindow, HammingWindow, BlackmanWindow (17): [size] of
 * output_datatype (float by default). */
static int fi_nn_window(fi_node *n) {
    if (!fi_in(n, 0)) return fi_fail(n, "expects input size");
    fi_dim d = fi_nn_scalar_dim(n, 0);
    return fi_set_shape(n, 0, (int32_t)fi_attr_int(n, "output_datatype", 1), 1, &d);
}

/* MelWeightMatrix (17): [floor(dft_length / 2) + 1, num_mel_bins]. */
static int fi_nn_mel_weight_matrix(fi_node *n) {
    if (n->n_in < 5) return fi_fail(n, "expects 5 inputs");
    fi_dim d[2] = {fi_dim_add(n, fi_dim_div_floor(n, fi_nn_scalar_dim(n, 1), 2), fi_known(1)),
                   fi_nn_scalar_dim(n, 0)};
    return fi_set_shape(n, 0, (int32_t)fi_attr_int(n, "output_datatype", 1), 2, d);
}

/* DFT (17): input [batch, n1, ..., 1|2]; the output has 2 (complex) in the
 * last dim and, on `axis`, dft_length (the input's own length when omitted)
 * or floor(that / 2) + 1 when onesided. */
static int fi_nn_dft(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x) return fi_fail(n, "expects input input");
    if (!fi_has_rank(x)) return fi_set_type(n, 0, x->elem);
    if (x->rank < 3) return fi_fail(n, "input needs rank >= 3 ([batch, n, 1|2]), has %d", x->rank);
    int axis;
    if (fi_axis(n, fi_attr_int(n, "axis", 1), x->rank - 1, &axis)) return -1;
    if (axis == 0) return fi_fail(n, "axis 0 is the batch axis");
    fi_dim dims[FI_MAX_RANK];
    memcpy(dims, x->dims, (size_t)x->rank * sizeof *dims);
    fi_dim len = fi_in(n, 1) ? fi_nn_scalar_dim(n, 1) : x->dims[axis];
    dims[axis] = fi_attr_int(n, "onesided", 0)
                     ? fi_dim_add(n, fi_dim_div_floor(n, len, 2), fi_known(1))
                     : len;
    dims[x->rank - 1] = fi_known(2);
    return fi_set_shape(n, 0, x->elem, x->rank, dims);
}

/* STFT (17): signal [batch, length, 1|2], frame_step, window?, frame_length?
 * -> [batch, frames, bins, 2]: frames = (length - frame_length) /
 * frame_step + 1, bins = frame_length / 2 + 1 when onesided (the default). */
static int fi_nn_stft(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0), *win = fi_in(n, 2);
    if (!x || !fi_in(n, 1)) return fi_fail(n, "expects inputs signal and frame_step");
    if (!fi_has_rank(x)) return fi_set_type(n, 0, x->elem);
    if (x->rank != 3)
        return fi_fail(n, "signal needs rank 3 ([batch, length, 1|2]), has %d", x->rank);
    fi_dim flen = fi_in(n, 3)             ? fi_nn_scalar_dim(n, 3)
                  : win && win->rank == 1 ? win->dims[0]
                                          : fi_unknown(-1);
    int64_t step = fi_nn_scalar_value(n, 1);
    if (step == 0) return fi_fail(n, "frame_step is 0");
    fi_dim frames =
        step > 0
            ? fi_dim_add(n, fi_dim_div_floor(n, fi_dim_sub(n, x->dims[1], flen), step), fi_known(1))
            : fi_unknown(fi_blame(fi_in(n, 1)));
    fi_dim dims[4] = {x->dims[0], frames,
                      fi_attr_int(n, "onesided", 1)
                          ? fi_dim_add(n, fi_dim_div_floor(n, flen, 2), fi_known(1))
                          : flen,
                      fi_known(2)};
    return fi_set_shape(n, 0, x->elem, 4, dims);
}

/* TfIdfVectorizer (9): X [C] or [N, C] -> FLOAT [max(ngram_indexes) + 1]
 * or [N, that]. */
static int fi_nn_tfidf(fi_node *n) {
    const fi_tensor *x = fi_in(n, 0);
    if (!x) return fi_fail(n, "expects input X");
    const int64_t *idx;
    size_t len;
    if (!fi_attr_ints(n, "ngram_indexes", &idx, &len) || len == 0)
        return fi_fail(n, "needs ngram_indexes");
    int64_t big = 0;
    for (size_t i = 0; i < len; i++) {
        if (idx[i] < 0 || idx[i] >= FI_MAX_DIM)
            return fi_fail(n, "ngram_indexes entry %lld out of range", (long long)idx[i]);
        if (idx[i] > big) big = idx[i];
    }
    if (!fi_has_rank(x)) return fi_set_type(n, 0, 1);
    if (x->rank != 1 && x->rank != 2) return fi_fail(n, "X needs rank 1 or 2, has %d", x->rank);
    fi_dim dims[2] = {x->dims[0], fi_known(big + 1)};
    return x->rank == 1 ? fi_set_shape(n, 0, 1, 1, dims + 1) : fi_set_shape(n, 0, 1, 2, dims);
}

/* ----------------------------------------------------------- the table */

const fi_rule fi_rules_nn[] = {
    {"AveragePool", fi_nn_average_pool},
    {"BlackmanWindow", fi_nn_window},
    {"Det", fi_nn_det},
    {"DFT", fi_nn_dft},
    {"HammingWindow", fi_nn_window},
    {"HannWindow", fi_nn_window},
    {"MelWeightMatrix", fi_nn_mel_weight_matrix},
    {"STFT", fi_nn_stft},
    {"TfIdfVectorizer", fi_nn_tfidf},
    {"Col2Im", fi_nn_col2im},
    {"Conv", fi_nn_conv},
    {"ConvInteger", fi_nn_conv_integer},
    {"ConvTranspose", fi_nn_conv_transpose},
    {"DepthToSpace", fi_nn_depth_to_space},
    {"DequantizeLinear", fi_nn_dequantize_linear},
    {"DynamicQuantizeLinear", fi_nn_dynamic_quantize_linear},
    {"Einsum", fi_nn_einsum_rule},
    {"Gemm", fi_nn_gemm},
    {"GlobalAveragePool", fi_nn_global_pool},
    {"GlobalLpPool", fi_nn_global_pool},
    {"GlobalMaxPool", fi_nn_global_pool},
    {"GridSample", fi_nn_grid_sample},
    {"GRU", fi_nn_gru},
    {"LpPool", fi_nn_lp_pool},
    {"LRN", fi_nn_like_input},
    {"LSTM", fi_nn_lstm},
    {"MatMul", fi_nn_matmul},
    {"MatMulInteger", fi_nn_matmul_integer},
    {"MaxPool", fi_nn_max_pool},
    {"MaxRoiPool", fi_nn_max_roi_pool},
    {"MaxUnpool", fi_nn_max_unpool},
    {"QLinearConv", fi_nn_qlinear_conv},
    {"QLinearMatMul", fi_nn_qlinear_matmul},
    {"QuantizeLinear", fi_nn_quantize_linear},
    {"Resize", fi_nn_resize},
    {"RNN", fi_nn_rnn},
    {"RoiAlign", fi_nn_roi_align},
    {"SpaceToDepth", fi_nn_space_to_depth},
    {"Upsample", fi_nn_upsample},
    {NULL, NULL},
};
