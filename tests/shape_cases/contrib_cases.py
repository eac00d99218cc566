#!/usr/bin/python3
"""Shape-inference cases for the llm family (frontend/infer/infer_llm.c):
the com.microsoft contrib operators of decoders exported for ONNX Runtime
GenAI (SkipLayerNormalization, SkipSimplifiedLayerNormalization,
RotaryEmbedding, MultiHeadAttention, GroupQueryAttention, MatMulNBits) and
opset 23's Attention, with symbolic batch / sequence / past_sequence_length.

Same case format and runner as nn_cases.py (imported, not copied): expectations
are written from docs/ContribOperators.md and the ONNX spec and checked
against ONNX Runtime (onnxruntime-node runs the contrib operators on CPU)
with --oracle.  A decode step is `--dim past_sequence_length=P` with a new
sequence of 1: present_key/value are [batch, kv_heads, P + 1, head].

usage: contrib_cases.py [ROAMC] [--oracle] [--only=SUBSTRING]...
"""
import os
import sys

import numpy as np
from onnx import helper as oh

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nn_cases as nn  # noqa: E402  (the runner of the nn family)

F, I32, I64, U8 = nn.F, nn.I32, nn.I64, nn.U8
MS = "com.microsoft"
B, S, P = "batch", "sequence", "past_sequence_length"
BIND = ["--dim", "batch=2", "--dim", "sequence=3", "--dim", "past_sequence_length=5"]
DECODE = ["--dim", "batch=2", "--dim", "sequence=1", "--dim", "past_sequence_length=7"]


def case(name, nodes, inputs, expect, opset=17, ms=True, **kw):
    c = nn.case(name, nodes, inputs, expect, opset, **kw)
    if ms:
        c["model"].opset_import.append(oh.make_opsetid(MS, 1))
    return c


def msnode(op, ins, outs, **attrs):
    return oh.make_node(op, ins, outs, domain=MS, **attrs)


def norm_cases():
    h = 8
    inits = [nn.init("gamma", nn.f32(h)), nn.init("beta", nn.f32(h)), nn.init("bias", nn.f32(h))]
    x = [("x", F, [B, S, h]), ("skip", F, [B, S, h])]
    return [
        case("skip_layer_norm", [msnode("SkipLayerNormalization", ["x", "skip", "gamma", "beta", "bias"],
                                        ["y", "", "", "sum"], epsilon=1e-5)],
             x, {"y": (F, [2, 3, h]), "sum": (F, [2, 3, h])}, inits=inits, bindings=BIND),
        case("skip_simplified_layer_norm",
             [msnode("SkipSimplifiedLayerNormalization", ["x", "skip", "gamma"], ["y", "", "", "sum"])],
             x, {"y": (F, [2, 3, h]), "sum": (F, [2, 3, h])}, inits=inits[:1], bindings=BIND),
        # mean and inv_std_var: ORT's CPU kernel leaves them out, so these
        # follow LayerNormalization's form (spec, ort False).
        case("skip_layer_norm_stats",
             [msnode("SkipLayerNormalization", ["x", "skip", "gamma"], ["y", "mean", "inv"])],
             x, {"y": (F, [2, 3, h]), "mean": (F, [2, 3, 1]), "inv": (F, [2, 3, 1])}, inits=inits[:1],
             bindings=BIND, ort=False),
        # ORT registers it in the standard domain (opset 1 on), with an
        # optional inv_std_var.
        case("simplified_layer_norm", [oh.make_node("SimplifiedLayerNormalization", ["x", "gamma"], ["y", "inv"],
                                                    axis=-1, epsilon=1e-5)],
             x[:1], {"y": (F, [2, 3, h]), "inv": (F, [2, 3, 1])}, inits=inits[:1], bindings=BIND),
        case("skip_layer_norm_bad_rank", [msnode("SkipLayerNormalization", ["x", "skip", "gamma"], ["y"])],
             [("x", F, [h]), ("skip", F, [h])], {"y": (F, [h])}, inits=inits[:1], ort=False,
             expect_error="input has rank 1"),
    ]


def rotary_cases():
    hd, maxpos = 4, 16
    inits = [nn.init("cos", nn.f32(maxpos, hd // 2)), nn.init("sin", nn.f32(maxpos, hd // 2))]
    return [
        case("rotary_bsd", [msnode("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"])],
             [("x", F, [B, S, 2 * hd]), ("pos", I64, [B, S])], {"y": (F, [2, 3, 2 * hd])}, inits=inits,
             bindings=BIND, ort_inputs={"pos": {"low": 0, "high": 8}}),
        case("rotary_bnsh", [msnode("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"])],
             [("x", F, [B, 2, S, hd]), ("pos", I64, [B, S])], {"y": (F, [2, 2, 3, hd])}, inits=inits,
             bindings=BIND, ort_inputs={"pos": {"low": 0, "high": 8}}),
    ]


def nbits_pack(n, k, block, bits=4):
    blocks = (k + block - 1) // block
    b = np.random.RandomState(1).randint(0, 255, size=(n, blocks, block * bits // 8)).astype(np.uint8)
    scales = nn.f32(n * blocks)
    return b, scales


def matmul_nbits_cases():
    k, n, block = 32, 24, 16
    b, scales = nbits_pack(n, k, block)
    inits = [nn.init("w", b), nn.init("scales", scales)]
    bad = [nn.init("w", b[:, :1]), nn.init("scales", scales)]
    node = msnode("MatMulNBits", ["a", "w", "scales"], ["y"], K=k, N=n, bits=4, block_size=block)
    return [
        case("matmul_nbits_3d", [node], [("a", F, [B, S, k])], {"y": (F, [2, 3, n])}, inits=inits,
             bindings=BIND),
        case("matmul_nbits_2d", [node], [("a", F, [B, k])], {"y": (F, [2, n])}, inits=inits, bindings=BIND),
        case("matmul_nbits_bad_k", [node], [("a", F, [B, k + 1])], {"y": (F, [2, n])}, inits=inits,
             bindings=BIND, ort=False, expect_error="attribute K"),
        case("matmul_nbits_huge_n", [msnode("MatMulNBits", ["a", "w", "scales"], ["y"], K=k, N=1 << 61, bits=4,
                                            block_size=block)],
             [("a", F, [B, k])], {"y": (F, [2, n])}, inits=inits, bindings=BIND, ort=False,
             expect_error="attribute N = 2305843009213693952 is not in [1, 2^31]"),
        case("gqa_heads_overflow", [msnode("GroupQueryAttention", ["q", "", "", "", "", "sl", "tot"], ["y"],
                                           num_heads=1 << 62, kv_num_heads=1 << 62)],
             [("q", F, [B, S, 64]), ("sl", I32, [B]), ("tot", I32, [])], {"y": (F, [2, 3, 64])}, bindings=BIND,
             ort=False, expect_error="is not in [1, 2^31]"),
        case("matmul_nbits_bad_pack", [node], [("a", F, [B, k])], {"y": (F, [2, n])}, inits=bad,
             bindings=BIND, ort=False, expect_error="B has"),
    ]


def gqa_cases():
    nh, kvh, hd = 4, 2, 16  # ORT's rotary in GQA wants head_size % 16 == 0
    maxpos = 64
    inits = [nn.init("cos", nn.f32(maxpos, hd // 2)), nn.init("sin", nn.f32(maxpos, hd // 2))]
    ins = [("q", F, [B, S, nh * hd]), ("k", F, [B, S, kvh * hd]), ("v", F, [B, S, kvh * hd]),
           ("pk", F, [B, kvh, P, hd]), ("pv", F, [B, kvh, P, hd]), ("mask", I64, [B, "total"])]
    # seqlens_k and total_sequence_length from the attention mask, as the
    # GenAI exporter writes them.
    pre = [oh.make_node("ReduceSum", ["mask", "one"], ["msum"], keepdims=0),
           oh.make_node("Sub", ["msum", "one"], ["sl64"]),
           oh.make_node("Cast", ["sl64"], ["seqlens"], to=I32),
           oh.make_node("Shape", ["mask"], ["mshape"]),
           oh.make_node("Gather", ["mshape", "one_s"], ["tot64"], axis=0),
           oh.make_node("Cast", ["tot64"], ["total"], to=I32)]
    ones = [nn.init("one", np.array([1], np.int64)), nn.init("one_s", np.array(1, np.int64))]

    def gqa(extra_ins, **kw):
        return msnode("GroupQueryAttention", ["q", "k", "v", "pk", "pv", "seqlens", "total"] + extra_ins,
                      ["y", "present_k", "present_v"], num_heads=nh, kv_num_heads=kvh, **kw)

    def binds(batch, seq, past):
        return ["--dim", "batch=%d" % batch, "--dim", "sequence=%d" % seq, "--dim",
                "past_sequence_length=%d" % past, "--dim", "total=%d" % (past + seq)]

    def out(b, s, p):
        return {"y": (F, [b, s, nh * hd]), "present_k": (F, [b, kvh, p + s, hd]),
                "present_v": (F, [b, kvh, p + s, hd])}

    mask_ones = {"mask": {"low": 1, "high": 2}}
    packed_ins = [("q", F, [B, S, (nh + 2 * kvh) * hd])] + ins[3:]
    packed = msnode("GroupQueryAttention", ["q", "", "", "pk", "pv", "seqlens", "total"],
                    ["y", "present_k", "present_v"], num_heads=nh, kv_num_heads=kvh)
    return [
        case("gqa_decode", pre + [gqa([])], ins, out(2, 1, 7), inits=ones, bindings=binds(2, 1, 7),
             ort_inputs=mask_ones),
        case("gqa_prompt_rotary", pre + [gqa(["cos", "sin"], do_rotary=1)], ins, out(2, 3, 0),
             inits=ones + inits, bindings=binds(2, 3, 0), ort_inputs=mask_ones),
        case("gqa_packed_qkv", pre + [packed], packed_ins, out(1, 1, 9), inits=ones, bindings=binds(1, 1, 9),
             ort_inputs=mask_ones),
        # a cache buffer longer than the mask (past 12, total 8): present
        # keeps the buffer's length, max(P, total).
        case("gqa_long_buffer", pre + [gqa([])], ins,
             {"y": (F, [2, 1, nh * hd]), "present_k": (F, [2, kvh, 12, hd]), "present_v": (F, [2, kvh, 12, hd])},
             inits=ones, bindings=binds(2, 1, 12)[:-2] + ["--dim", "total=8"], ort_inputs=mask_ones),
        # total_sequence_length from a graph input: its value unknown to
        # roamc, present is sized past + sequence, its largest (spec).
        case("gqa_total_unknown", [gqa([])], ins[:5] + [("seqlens", I32, [B]), ("total", I32, [])],
             out(2, 1, 7), bindings=binds(2, 1, 7), ort=False),
        case("gqa_bad_past_rank", [gqa([])], ins[:3] + [("pk", F, [B, P]), ("pv", F, [B, P]),
                                                        ("seqlens", I32, [B]), ("total", I32, [])],
             {"y": (F, [2, 1, 64])}, bindings=binds(2, 1, 7), ort=False, expect_error="past_key has rank 2"),
        case("gqa_bad_heads", [msnode("GroupQueryAttention", ["q", "k", "v", "pk", "pv", "seqlens", "total"],
                                      ["y"], num_heads=3, kv_num_heads=kvh)],
             ins[:5] + [("seqlens", I32, [B]), ("total", I32, [])], {"y": (F, [2, 1, 64])},
             bindings=binds(2, 1, 7), ort=False, expect_error="query hidden size 64 is not a multiple of 3"),
    ]


def mha_cases():
    nh, hd = 2, 4
    d = nh * hd
    ins = [("q", F, [B, S, d]), ("k", F, [B, S, d]), ("v", F, [B, S, d]),
           ("pk", F, [B, nh, P, hd]), ("pv", F, [B, nh, P, hd])]
    mha = msnode("MultiHeadAttention", ["q", "k", "v", "", "", "", "pk", "pv"], ["y", "present_k", "present_v"],
                 num_heads=nh)
    cross = msnode("MultiHeadAttention", ["q", "ck", "cv"], ["y"], num_heads=nh)
    packed = msnode("MultiHeadAttention", ["qkv"], ["y"], num_heads=nh)
    return [
        case("mha_kv_cache", [mha], ins, {"y": (F, [2, 3, d]), "present_k": (F, [2, nh, 8, hd]),
                                          "present_v": (F, [2, nh, 8, hd])}, bindings=BIND),
        case("mha_decode", [mha], ins, {"y": (F, [2, 1, d]), "present_k": (F, [2, nh, 8, hd]),
                                        "present_v": (F, [2, nh, 8, hd])}, bindings=DECODE),
        case("mha_cross_bnsh", [cross], [("q", F, [B, S, d]), ("ck", F, [B, nh, 6, hd]), ("cv", F, [B, nh, 6, hd])],
             {"y": (F, [2, 3, d])}, bindings=BIND),
        # ORT's CPU kernel refuses packed QKV (CUDA only): spec.
        case("mha_packed_qkv", [packed], [("qkv", F, [B, S, nh, 3, hd])], {"y": (F, [2, 3, d])}, bindings=BIND,
             ort=False),
    ]


def attention23_cases():
    nq, nkv, hd = 4, 2, 8
    ins3 = [("q", F, [B, S, nq * hd]), ("k", F, [B, S, nkv * hd]), ("v", F, [B, S, nkv * hd]),
            ("pk", F, [B, nkv, P, hd]), ("pv", F, [B, nkv, P, hd])]
    att3 = oh.make_node("Attention", ["q", "k", "v", "", "pk", "pv"], ["y", "present_k", "present_v", "qk"],
                        q_num_heads=nq, kv_num_heads=nkv)
    ins4 = [("q", F, [B, nq, S, hd]), ("k", F, [B, nkv, S, hd]), ("v", F, [B, nkv, S, hd]),
            ("pk", F, [B, nkv, P, hd]), ("pv", F, [B, nkv, P, hd])]
    att4 = oh.make_node("Attention", ["q", "k", "v", "", "pk", "pv"], ["y", "present_k", "present_v"])
    return [
        case("attention23_3d_cache", [att3], ins3,
             {"y": (F, [2, 3, nq * hd]), "present_k": (F, [2, nkv, 8, hd]), "present_v": (F, [2, nkv, 8, hd]),
              "qk": (F, [2, nq, 3, 8])}, opset=23, ms=False, bindings=BIND),
        case("attention23_4d_decode", [att4], ins4,
             {"y": (F, [2, nq, 1, hd]), "present_k": (F, [2, nkv, 8, hd]), "present_v": (F, [2, nkv, 8, hd])},
             opset=23, ms=False, bindings=DECODE),
        case("rms_norm23", [oh.make_node("RMSNormalization", ["x", "scale"], ["y"], axis=-1)],
             [("x", F, [B, S, hd])], {"y": (F, [2, 3, hd])}, opset=23, ms=False,
             inits=[nn.init("scale", nn.f32(hd))], bindings=BIND),
        case("rotary23", [oh.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"])],
             [("x", F, [B, nq, S, hd]), ("pos", I64, [B, S])], {"y": (F, [2, nq, 3, hd])}, opset=23, ms=False,
             inits=[nn.init("cos", nn.f32(16, hd // 2)), nn.init("sin", nn.f32(16, hd // 2))], bindings=BIND,
             ort_inputs={"pos": {"low": 0, "high": 8}}),
    ]


def cases():
    return norm_cases() + rotary_cases() + matmul_nbits_cases() + gqa_cases() + mha_cases() + attention23_cases()


if __name__ == "__main__":
    nn.cases, nn.FAMILY = cases, "contrib"
    sys.exit(nn.main(sys.argv))
