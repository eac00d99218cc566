/* Shape inference rules, family llm (see infer.h): the operators of decoder
 * files as LLM runtimes ship them.  ONNX Runtime's GenAI exporter and its
 * transformer optimizer write `com.microsoft` contrib operators (fused
 * layer norms, rotary embedding, attention with a KV cache, 4-bit
 * MatMulNBits); opset 23 adds a standard `Attention` and `RotaryEmbedding`.
 *
 * Sizes follow ONNX Runtime's CPU kernels (docs/ContribOperators.md and
 * the kernels' input checks), which is what tests/shape_cases/contrib.py
 * compares against.  A KV cache's past length is a symbolic dim
 * (`past_sequence_length`): present = past + new, so `--dim
 * past_sequence_length=N` sizes one decode step.
 *
 * Reading order: helpers -> layer norms -> rotary -> MatMulNBits ->
 * attention (contrib MultiHeadAttention, GroupQueryAttention, opset 23
 * Attention) -> the tables.
 */
#include "infer.h"

#include <string.h>

enum { FI_LLM_FLOAT = 1 };

/* ------------------------------------------------------------ helpers */

static int fi_llm_arity(fi_node *n, size_t lo, size_t hi, size_t out_hi) {
    if (n->n_in < lo || n->n_in > hi)
        return fi_fail(n, "takes %zu to %zu inputs, has %zu", lo, hi, n->n_in);
    if (n->n_out > out_hi)
        return fi_fail(n, "has %zu outputs; at most %zu allowed", n->n_out, out_hi);
    for (size_t k = 0; k < lo; k++)
        if (!fi_in(n, k)) return fi_fail(n, "input %zu is missing", k);
    return 0;
}

/* The rank of t when known: must be one of r1, r2 (r2 < 0: only r1).
 * Returns the rank, 0 when unknown (outputs stay unknown), -1 after
 * failing the node. */
static int fi_llm_rank(fi_node *n, const fi_tensor *t, int r1, int r2, const char *what) {
    if (!t || !fi_has_rank(t)) return 0;
    if (t->rank != r1 && t->rank != r2) {
        if (r2 < 0) return fi_fail(n, "%s has rank %d; %d expected", what, t->rank, r1);
        return fi_fail(n, "%s has rank %d; %d or %d expected", what, t->rank, r1, r2);
    }
    return t->rank;
}

/* a / b for a head split: a known a that b does not divide fails. */
static fi_dim fi_llm_split(fi_node *n, fi_dim a, int64_t b, const char *what) {
    if (a.v >= 0 && a.v % b != 0) {
        fi_fail(n, "%s %lld is not a multiple of %lld", what, (long long)a.v, (long long)b);
        return fi_known(0);
    }
    return fi_dim_div_floor(n, a, b);
}

/* A count attribute (heads, K, N, bits): in [1, 2^31], so that sums and
 * products of two stay far from int64 overflow. */
static int fi_llm_heads(fi_node *n, const char *name, int64_t dflt, int64_t *out) {
    *out = fi_attr_int(n, name, dflt);
    if (*out <= 0 || *out > ((int64_t)1 << 31))
        return fi_fail(n, "attribute %s = %lld is not in [1, 2^31]", name, (long long)*out);
    return 0;
}

/* [d0, d1, d2, d3] into output k. */
static int fi_llm_set4(fi_node *n, size_t k, int32_t elem, fi_dim d0, fi_dim d1, fi_dim d2,
                       fi_dim d3) {
    fi_dim d[4] = {d0, d1, d2, d3};
    return fi_set_shape(n, k, elem, 4, d);
}

/* -------------------------------------------------------- layer norms */

/* SkipLayerNormalization (input, skip, gamma, beta?, bias?) and
 * SkipSimplifiedLayerNormalization (input, skip, gamma, bias?): output and
 * input_skip_bias_sum (3) like input; mean and inv_std_var (1, 2) float,
 * input's dims with a last dim of 1 as LayerNormalization's.  skip
 * broadcasts over input's leading dims, so the output is input's shape. */
static int fi_llm_skip_norm(fi_node *n, size_t max_in) {
    if (fi_llm_arity(n, 3, max_in, 4)) return -1;
    fi_tensor *x = n->in[0];
    if (fi_llm_rank(n, x, 2, 3, "input") < 0) return -1;
    if (fi_set_like(n, 0, x) || fi_set_like(n, 3, x)) return -1;
    if (!fi_has_rank(x)) return fi_set_type(n, 1, FI_LLM_FLOAT) || fi_set_type(n, 2, FI_LLM_FLOAT);
    fi_dim d[3];
    for (int i = 0; i < x->rank; i++) d[i] = i + 1 < x->rank ? x->dims[i] : fi_known(1);
    return fi_set_shape(n, 1, FI_LLM_FLOAT, x->rank, d) ||
           fi_set_shape(n, 2, FI_LLM_FLOAT, x->rank, d);
}

static int fi_llm_rule_skip_layer_norm(fi_node *n) {
    return fi_llm_skip_norm(n, 5);
}

static int fi_llm_rule_skip_simplified_layer_norm(fi_node *n) {
    return fi_llm_skip_norm(n, 4);
}

/* SimplifiedLayerNormalization (X, scale; ORT registers it in the
 * standard domain, GenAI writes it for a decoder's first norm) and opset
 * 23's RMSNormalization: Y like X; the optional inv_std_var (1) is X's
 * dims before `axis` and 1 from it on, in stash_type (float). */
static int fi_llm_rule_rms_norm(fi_node *n) {
    if (fi_llm_arity(n, 2, 2, 2)) return -1;
    fi_tensor *x = n->in[0];
    if (fi_set_like(n, 0, x)) return -1;
    int64_t stash = fi_attr_int(n, "stash_type", FI_LLM_FLOAT);
    if (!fi_has_rank(x)) return fi_set_type(n, 1, (int32_t)stash);
    int axis;
    if (x->rank == 0) return fi_fail(n, "X is a scalar; it needs rank >= 1");
    if (fi_axis(n, fi_attr_int(n, "axis", -1), x->rank, &axis)) return -1;
    fi_dim d[FI_MAX_RANK];
    for (int i = 0; i < x->rank; i++) d[i] = i < axis ? x->dims[i] : fi_known(1);
    return fi_set_shape(n, 1, (int32_t)stash, x->rank, d);
}

/* ------------------------------------------------------------- rotary */

/* RotaryEmbedding: the output is the input, rotated in place.  contrib:
 * (input, position_ids, cos_cache, sin_cache); opset 23: (X, cos_cache,
 * sin_cache, position_ids?). */
static int fi_llm_rule_rotary(fi_node *n) {
    if (fi_llm_arity(n, 3, 4, 1)) return -1;
    if (fi_llm_rank(n, n->in[0], 3, 4, "input") < 0) return -1;
    return fi_set_like(n, 0, n->in[0]);
}

/* ------------------------------------------------------- MatMulNBits */

/* MatMulNBits (A, B, scales, zero_points?, g_idx?, bias?): A [..., K] times
 * the N x K matrix packed in B ([N, ceil(K / block_size), block_size * bits
 * / 8] bytes, planned at that packed size since it is the initializer as
 * stored) gives [..., N] of A's type. */
static int fi_llm_rule_matmul_nbits(fi_node *n) {
    if (fi_llm_arity(n, 3, 6, 1)) return -1;
    int64_t k_attr, n_attr, bits, block;
    if (fi_llm_heads(n, "K", 0, &k_attr) || fi_llm_heads(n, "N", 0, &n_attr) ||
        fi_llm_heads(n, "bits", 4, &bits) || fi_llm_heads(n, "block_size", 0, &block))
        return -1;
    if (bits > 8) return fi_fail(n, "attribute bits = %lld is above 8", (long long)bits);
    if (block < 16 || block > ((int64_t)1 << 30) || (block & (block - 1)))
        return fi_fail(n, "attribute block_size = %lld is not a power of 2 in [16, 2^30]",
                       (long long)block);
    fi_tensor *a = n->in[0], *b = n->in[1];
    if (fi_all_known(b)) {
        int64_t blocks = (k_attr + block - 1) / block, blob = block * bits / 8;
        /* B is [N, blocks, blob] as the exporter writes it; a flat packing
         * of the same bytes is accepted too (older exporters). */
        int64_t want;
        if (__builtin_mul_overflow(n_attr, blocks, &want) ||
            __builtin_mul_overflow(want, blob, &want) || fi_numel(b) != want)
            return fi_fail(n,
                           "B has %lld elements; N=%lld K=%lld bits=%lld block_size=%lld pack N x "
                           "ceil(K / block_size) x block_size * bits / 8",
                           (long long)fi_numel(b), (long long)n_attr, (long long)k_attr,
                           (long long)bits, (long long)block);
    }
    if (!fi_has_rank(a)) return fi_set_type(n, 0, a->elem);
    if (a->rank < 1) return fi_fail(n, "A is a scalar; it needs rank >= 1");
    fi_dim d[FI_MAX_RANK];
    memcpy(d, a->dims, (size_t)a->rank * sizeof *d);
    fi_dim_merge(n, d[a->rank - 1], fi_known(k_attr), "A's last dim and attribute K");
    d[a->rank - 1] = fi_known(n_attr);
    return fi_set_shape(n, 0, a->elem, a->rank, d);
}

/* ---------------------------------------------------------- attention */

/* What an attention node's inputs say, for its outputs. */
typedef struct fi_llm_att {
    fi_dim batch, q_seq, kv_seq;
    fi_dim head, v_head; /* per-head sizes of K and V */
    int64_t q_heads, kv_heads;
    int32_t elem;
} fi_llm_att;

/* present = past + new along the sequence (dim 2 of the BNSH past), or new
 * alone without a past; unknown (blamed on the past) while its rank is. */
static fi_dim fi_llm_total(fi_node *n, const fi_tensor *past, fi_dim kv_seq) {
    if (!past) return kv_seq;
    if (!fi_has_rank(past)) return fi_unknown(fi_blame(past));
    return fi_dim_add(n, past->dims[2], kv_seq);
}

/* past_key (k) and past_value (k + 1), when given, must be BNSH. */
static int fi_llm_check_past(fi_node *n, size_t k) {
    for (size_t j = 0; j < 2; j++)
        if (fi_llm_rank(n, fi_in(n, k + j), 4, -1, j ? "past_value" : "past_key") < 0) return -1;
    return 0;
}

/* present_key (k_out) and present_value (k_out + 1) as [B, kv_heads,
 * total, head], of past_key's (k_past) type. */
static int fi_llm_presents(fi_node *n, const fi_llm_att *a, size_t k_past, size_t k_out,
                           fi_dim total) {
    fi_tensor *pk = fi_in(n, k_past);
    int32_t elem = pk && pk->elem ? pk->elem : a->elem;
    fi_dim kvh = fi_known(a->kv_heads);
    return fi_llm_set4(n, k_out, elem, a->batch, kvh, total, a->head) ||
           fi_llm_set4(n, k_out + 1, elem, a->batch, kvh, total, a->v_head);
}

/* MultiHeadAttention (com.microsoft): query [B, S, D] with key [B, L, D]
 * and value [B, L, Dv], or key/value already BNSH [B, N, L, h]; or query
 * packed QKV [B, S, N, 3, h]; or key packed KV [B, L, N, 2, h] without
 * value.  output [B, S, N * hv]; present_key/value [B, N, P + L, h] where
 * past_key is [B, N, P, h] (inputs 6, 7); output_qk (3) [B, N, S, P + L]. */
static int fi_llm_rule_mha(fi_node *n) {
    if (fi_llm_arity(n, 1, 10, 4)) return -1;
    fi_llm_att a = {0};
    if (fi_llm_heads(n, "num_heads", 0, &a.q_heads)) return -1;
    a.kv_heads = a.q_heads;
    fi_tensor *q = n->in[0], *k = fi_in(n, 1), *v = fi_in(n, 2);
    a.elem = q->elem;
    int qr = fi_llm_rank(n, q, 3, 5, "query");
    int kr = fi_llm_rank(n, k, 3, k && v ? 4 : 5, "key");
    int vr = fi_llm_rank(n, v, 3, 4, "value");
    if (qr < 0 || kr < 0 || vr < 0 || fi_llm_check_past(n, 6)) return -1;
    if (qr == 3 && !k) return fi_fail(n, "key is missing and query is not packed QKV");
    if (qr == 0 || (qr == 3 && (!k || kr == 0 || (v && vr == 0)))) return fi_set_type(n, 0, a.elem);
    if (qr == 3 && !v && kr != 5) return fi_fail(n, "value is missing and key is not packed KV");
    int64_t N = a.q_heads;
    a.batch = q->dims[0];
    a.q_seq = q->dims[1];
    if (qr == 5) { /* packed QKV */
        if (q->dims[3].v >= 0 && q->dims[3].v != 3)
            return fi_fail(n, "packed QKV query needs dim 3 = 3");
        a.kv_seq = a.q_seq;
        a.head = a.v_head = q->dims[4];
    } else if (kr == 5) { /* packed KV */
        a.kv_seq = k->dims[1];
        a.head = a.v_head = k->dims[4];
    } else {
        a.kv_seq = kr == 3 ? k->dims[1] : k->dims[2];
        a.head = kr == 3 ? fi_llm_split(n, k->dims[2], N, "key hidden size") : k->dims[3];
        a.v_head = vr == 3 ? fi_llm_split(n, v->dims[2], N, "value hidden size") : v->dims[3];
    }
    fi_dim out[3] = {a.batch, a.q_seq, fi_dim_mul(n, fi_known(N), a.v_head)};
    if (fi_failed(n) || fi_set_shape(n, 0, a.elem, 3, out)) return -1;
    fi_dim total = fi_llm_total(n, fi_in(n, 6), a.kv_seq);
    if (fi_llm_presents(n, &a, 6, 1, total)) return -1;
    return fi_llm_set4(n, 3, a.elem, a.batch, fi_known(N), a.q_seq, total);
}

/* GroupQueryAttention (com.microsoft): query [B, S, D] with key/value [B,
 * S, Dkv], or packed QKV [B, S, (N + 2 * Nkv) * h] without key/value;
 * past_key/value (3, 4) [B, Nkv, P, h]; total_sequence_length (6) a
 * scalar.  output [B, S, N * h]; present_key/value [B, Nkv, T, h] with T =
 * max(P, total_sequence_length) as the CPU kernel sizes it (P is the cache
 * buffer, shared with present when it is already long enough).  While
 * total_sequence_length's value is unknown (it comes from the attention
 * mask's width), T is P + S, its largest value: a mask never spans more
 * than the past and the new tokens. */
static int fi_llm_rule_gqa(fi_node *n) {
    if (fi_llm_arity(n, 1, 14, 4)) return -1;
    fi_llm_att a = {0};
    if (fi_llm_heads(n, "num_heads", 0, &a.q_heads) ||
        fi_llm_heads(n, "kv_num_heads", 0, &a.kv_heads))
        return -1;
    fi_tensor *q = n->in[0], *k = fi_in(n, 1), *v = fi_in(n, 2);
    if ((k == NULL) != (v == NULL)) return fi_fail(n, "key and value must be given together");
    a.elem = q->elem;
    int qr = fi_llm_rank(n, q, 3, -1, "query");
    if (qr < 0 || fi_llm_rank(n, k, 3, -1, "key") < 0 || fi_llm_rank(n, v, 3, -1, "value") < 0 ||
        fi_llm_check_past(n, 3))
        return -1;
    if (qr == 0) return fi_set_type(n, 0, a.elem);
    a.batch = q->dims[0];
    a.q_seq = a.kv_seq = q->dims[1];
    if (k)
        a.head = fi_llm_split(n, q->dims[2], a.q_heads, "query hidden size");
    else
        a.head = fi_llm_split(n, q->dims[2], a.q_heads + 2 * a.kv_heads, "packed QKV hidden size");
    a.v_head = a.head;
    fi_dim out[3] = {a.batch, a.q_seq, fi_dim_mul(n, fi_known(a.q_heads), a.head)};
    if (fi_failed(n) || fi_set_shape(n, 0, a.elem, 3, out)) return -1;
    fi_tensor *past = fi_in(n, 3);
    fi_dim total = fi_llm_total(n, past, a.kv_seq);
    int64_t t_val;
    if (fi_in_scalar(n, 6, &t_val)) {
        if (t_val < 0 || t_val > FI_MAX_DIM)
            return fi_fail(n, "total_sequence_length = %lld is out of range", (long long)t_val);
        /* a past of unknown length leaves T unknown */
        int64_t p = !past ? 0 : fi_has_rank(past) ? past->dims[2].v : -1;
        if (p >= 0) total = fi_known(t_val > p ? t_val : p);
    }
    if (fi_llm_presents(n, &a, 3, 1, total)) return -1;
    return fi_llm_set4(n, 3, a.elem, a.batch, fi_known(a.q_heads), a.q_seq, total);
}

/* Attention (opset 23): Q [B, S, q_num_heads * h] or [B, Nq, S, h]; K, V
 * [B, L, Nkv * h(v)] or [B, Nkv, L, h(v)]; past_key/value (4, 5) [B, Nkv,
 * P, h(v)].  Y [B, S, Nq * hv] (3D) or [B, Nq, S, hv] (4D);
 * present_key/value [B, Nkv, P + L, h(v)]; qk_matmul_output (3) [B, Nq, S,
 * P + L]. */
static int fi_llm_rule_attention(fi_node *n) {
    if (fi_llm_arity(n, 3, 7, 4)) return -1;
    fi_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
    int qr = fi_llm_rank(n, q, 3, 4, "Q"), kr = fi_llm_rank(n, k, 3, 4, "K"),
        vr = fi_llm_rank(n, v, 3, 4, "V");
    if (qr < 0 || kr < 0 || vr < 0 || fi_llm_check_past(n, 4)) return -1;
    fi_llm_att a = {.elem = q->elem};
    if (qr == 0 || kr == 0 || vr == 0) return fi_set_type(n, 0, a.elem);
    if (qr != kr || kr != vr) return fi_fail(n, "Q, K and V must all be 3D or all be 4D");
    a.batch = q->dims[0];
    if (qr == 4) {
        if (q->dims[1].v < 0 || k->dims[1].v < 0)
            return fi_set_type(n, 0, a.elem); /* heads unknown: no shape */
        a.q_heads = q->dims[1].v;
        a.kv_heads = k->dims[1].v;
        a.q_seq = q->dims[2];
        a.kv_seq = k->dims[2];
        a.head = k->dims[3];
        a.v_head = v->dims[3];
    } else {
        if (fi_llm_heads(n, "q_num_heads", 0, &a.q_heads) ||
            fi_llm_heads(n, "kv_num_heads", 0, &a.kv_heads))
            return -1;
        a.q_seq = q->dims[1];
        a.kv_seq = k->dims[1];
        a.head = fi_llm_split(n, k->dims[2], a.kv_heads, "K hidden size");
        a.v_head = fi_llm_split(n, v->dims[2], a.kv_heads, "V hidden size");
    }
    if (a.q_heads % a.kv_heads)
        return fi_fail(n, "%lld query heads are not a multiple of %lld KV heads",
                       (long long)a.q_heads, (long long)a.kv_heads);
    fi_dim nq = fi_known(a.q_heads);
    if (qr == 4) {
        if (fi_llm_set4(n, 0, a.elem, a.batch, nq, a.q_seq, a.v_head)) return -1;
    } else {
        fi_dim out[3] = {a.batch, a.q_seq, fi_dim_mul(n, nq, a.v_head)};
        if (fi_failed(n) || fi_set_shape(n, 0, a.elem, 3, out)) return -1;
    }
    fi_dim total = fi_llm_total(n, fi_in(n, 4), a.kv_seq);
    if (fi_llm_presents(n, &a, 4, 1, total)) return -1;
    return fi_llm_set4(n, 3, a.elem, a.batch, nq, a.q_seq, total);
}

/* -------------------------------------------------------------- tables */

/* Standard domain (opset 23; SimplifiedLayerNormalization is ORT's). */
const fi_rule fi_rules_llm[] = {
    {"Attention", fi_llm_rule_attention},
    {"RMSNormalization", fi_llm_rule_rms_norm},
    {"RotaryEmbedding", fi_llm_rule_rotary},
    {"SimplifiedLayerNormalization", fi_llm_rule_rms_norm},
    {NULL, NULL},
};

/* com.microsoft (infer.c looks them up by domain) */
const fi_rule fi_rules_com_microsoft[] = {
    {"GroupQueryAttention", fi_llm_rule_gqa},
    {"MatMulNBits", fi_llm_rule_matmul_nbits},
    {"MultiHeadAttention", fi_llm_rule_mha},
    {"RotaryEmbedding", fi_llm_rule_rotary},
    {"SkipLayerNormalization", fi_llm_rule_skip_layer_norm},
    {"SkipSimplifiedLayerNormalization", fi_llm_rule_skip_simplified_layer_norm},
    {NULL, NULL},
};
